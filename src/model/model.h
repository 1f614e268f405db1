// model: language model architectures as forward passes over the engine,
// with a KV cache shared by parallel sequences ("slots"). This is the C API
// the runner calls: load a GGUF, evaluate batches of tokens from several
// slots in one forward pass, read logits / embeddings, manage each slot's
// cache (prefix reuse, context shift), free.
//
// Architectures are rows of a table keyed by general.architecture (llama,
// qwen2, qwen3, gemma2, gemma3, phi3, and the encoders bert, nomic-bert);
// anything else, or a tensor type the engine cannot use, fails at load with
// a clear message.
//
// Thread-safety: a struct model is used by one thread at a time (the
// runner's batching loop); compute runs on the model's own thread pool.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct model;

// KV cache element type; zero-initialised options mean F16 (Ollama's
// default; OLLAMA_KV_CACHE_TYPE picks another).
enum model_kv_type {
    MODEL_KV_F16 = 0,
    MODEL_KV_F32,
    MODEL_KV_Q8_0,
    MODEL_KV_Q4_0,
};
// "f16", "f32", "q8_0", "q4_0" (case-insensitive); -1 for anything else.
int model_kv_type_parse(const char *s);

struct model_options {
    int n_ctx;      // context per slot (0: min(2048, training context))
    int n_batch;    // max tokens per forward pass (0: 512)
    int n_slots;    // parallel sequences sharing the cache (0: 1)
    int n_threads;  // compute threads (0: physical cores)
    enum model_kv_type kv_type;
    bool embeddings;  // keep the final hidden state of output rows
    // Use every weight as mapped: no interleaved copies of Q4_0 matrices
    // (they cost a pass over those weights at load and speed up products;
    // this switch exists for measuring that).
    bool mapped_weights_only;
    // Give sliding-window layers a full-length cache instead of a ring of
    // window + n_batch cells (for measuring what the ring saves).
    bool kv_full_length;
    // LoRA adapters (GGUF, general.type "adapter"): each adds its low-rank
    // terms to the weights it names, scaled by alpha / rank; several stack.
    // Checked against the model at load (ERR_INVALID naming the mismatch,
    // ERR_UNSUPPORTED for a weight this engine cannot adapt). The paths are
    // read during model_load / model_estimate only.
    const char *const *lora_paths;
    int n_lora;
    // Merge each adapter into a private copy of the weights it names (W +=
    // s B A, rounded back to W's type) instead of adding the low-rank terms
    // at every product; weights of types kept interleaved (Q4_0, Q8_0, ...)
    // are refused. For measuring the choice (docs/internals/lora.md).
    bool lora_merge;
};

// Memory a load with these options will use, computed from the file's
// header alone (nothing is loaded): weights are the mapped tensor data.
struct model_memory {
    uint64_t weights_bytes;
    // Of weights_bytes, the mixture-of-experts expert tensors (*_exps): all
    // resident (mapped) although a token reads only the chosen experts.
    uint64_t experts_bytes;
    uint64_t kv_bytes;
    uint64_t scratch_bytes;  // activations, logits, per-thread buffers
    // Of weights_bytes, the LoRA adapters' tensors (as F32 copies) and of
    // scratch_bytes their products' buffers.
    uint64_t lora_bytes;
    uint64_t total_bytes;
};

int model_estimate(const char *path, const struct model_options *opts, struct model_memory *out,
                   struct err *e);

// Loads a model (mmap, weights used in place, except Q4_0 matrices, which
// are copied once into the SIMD kernels' interleaved layout). Errors: ERR_IO / ERR_FORMAT
// for the file, ERR_UNSUPPORTED for an unknown architecture or tensor type,
// ERR_NOMEM when the KV cache or scratch cannot be allocated.
int model_load(struct model **out, const char *path, const struct model_options *opts,
               struct err *e);
void model_free(struct model *m);

// Hyper-parameters.
int model_n_vocab(const struct model *m);
int model_n_embd(const struct model *m);
// Width of an image row in model_batch.embd: n_embd, or (qwen3vl) n_embd ·
// (1 + deepstack layers), the slices after the first added after layers 0...
int model_n_embd_inp(const struct model *m);
int model_n_ctx(const struct model *m);  // per slot
int model_n_slots(const struct model *m);
int model_n_batch(const struct model *m);
int model_n_threads(const struct model *m);
// The K/V cache type in use ("f16", "f32", "q8_0", "q4_0"): the requested
// one, or f16 where the model's heads cannot hold its blocks.
const char *model_kv_type_name(const struct model *m);
const char *model_arch_name(const struct model *m);
// The open GGUF (for the tokenizer and metadata); owned by the model.
const struct gguf *model_gguf(const struct model *m);

// Tokenizer pass-through (the model's own vocabulary, loaded with it).
struct tokenizer;
const struct tokenizer *model_tokenizer(const struct model *m);
// Tokenizes text into ids[0..cap) (BOS/EOS as the metadata says when
// add_special); returns the number of ids, ERR_TOO_LARGE past cap.
int model_tokenize(const struct model *m, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t *ids, int cap, struct err *e);
// The bytes of one token (may be part of a UTF-8 character; control tokens
// give nothing); returns the length written (truncated to cap).
int model_token_to_piece(const struct model *m, int32_t id, char *out, int cap);
// End-of-generation token?
bool model_token_is_eog(const struct model *m, int32_t id);

// A batch: n_tokens entries, each a token for slot `slot` at position `pos`.
// Within a slot, positions must be consecutive and start at or below the
// slot's current length (anything cached from that position on is
// replaced). `logits[i]` asks for the outputs of entry i (NULL: only the
// last entry of each slot).
struct model_batch {
    int n_tokens;
    const int32_t *tokens;
    const int32_t *pos;
    const int32_t *slot;
    const bool *logits;
    // Image embeddings (vision). An entry whose token is negative takes its
    // input row from embd (host, n_tokens rows: entry i's row at
    // embd + i·model_n_embd_inp) instead of the token table, unscaled. The negative
    // id stays in the slot's token record, so prefix reuse matches an image
    // only against the same id: callers give each picture its own id (from
    // its hash), the same for all its rows. A run of consecutive entries of
    // one slot with the same negative id is one image; with
    // embd_non_causal its rows see each other (Gemma 3), and model_decode
    // keeps a run in one forward pass (a run longer than n_batch fails).
    const float *embd;
    bool embd_non_causal;
    // M-RoPE models (qwen2vl): each image row's (row, col) in its picture's
    // merged grid, n_tokens × 2 (text entries' pairs are ignored; NULL: no
    // image rows). The model keeps each entry's rotary (t, h, w) as mtmd
    // lays them out: a text token, or an image's first row, at p = the
    // largest of the previous entry's three + 1 (0 at position 0); image
    // row (r, c) at (p, p + r, p + c). So the text after a picture
    // continues from p + max(rows, cols), while pos (the cache position)
    // stays consecutive.
    const int32_t *rope_rc;
};

// Evaluates a batch (split into n_batch pieces internally). Afterwards
// model_logits(m, i) is valid for every entry i that requested outputs.
int model_decode(struct model *m, const struct model_batch *b, struct err *e);
// Logits (n_vocab floats) of batch entry i of the last model_decode, or NULL
// if that entry did not request outputs. Valid until the next decode.
const float *model_logits(const struct model *m, int i);
// Final hidden state (after the output norm, n_embd floats), when the
// model was loaded with embeddings = true; NULL otherwise. Encoders always
// keep it (it is their only output).
const float *model_embeddings(const struct model *m, int i);

// Embedding-only encoders (bert, nomic-bert): attention is not causal and
// there are no logits (model_logits gives NULL). model_decode must get each
// slot's whole sequence in one call, as consecutive entries from position 0
// (at most model_n_ctx tokens; n_batch is raised to n_ctx for them).
bool model_is_encoder(const struct model *m);

// How the final hidden states become one embedding (GGUF
// <arch>.pooling_type, docs/spec/architectures.md §9).
enum model_pooling {
    MODEL_POOLING_NONE = 0,
    MODEL_POOLING_MEAN = 1,  // average over all tokens ([CLS] and [SEP] included)
    MODEL_POOLING_CLS = 2,   // the first token
    MODEL_POOLING_LAST = 3,  // the last token
    MODEL_POOLING_RANK = 4,  // reranker head (not supported)
};
// The file's pooling type; MEAN when the key is absent (generative models,
// as ollama-c embeds with them: docs/spec/api.md §10).
enum model_pooling model_pooling(const struct model *m);
// Applies the model's projection of a pooled embedding (n_embd floats, in
// place) after pooling: EmbeddingGemma's dense_2 then dense_3; nothing for
// the other families.
void model_pool_project(const struct model *m, float *v);

// Slots: each holds the tokens of one sequence at positions 0..n_past-1.
int model_slot_n_past(const struct model *m, int slot);
const int32_t *model_slot_tokens(const struct model *m, int slot);
void model_slot_clear(struct model *m, int slot);
// Longest-common-prefix reuse: keeps the cached prefix that matches tokens
// (at most n - 1, so the last prompt token is always evaluated for its
// logits), drops the rest; returns the number of tokens kept.
int model_slot_reuse_prefix(struct model *m, int slot, const int32_t *tokens, int n);
// Cross-slot prefix sharing: gives slot dst the first n positions of slot
// src (their tokens, and keys and values in every layer), in place of what
// dst held. n is capped at src's length. Ring (sliding-window) layers take
// the rows the window after position n needs; if src's ring has already
// written over them, or for encoders and dst == src, nothing is copied.
// Returns the positions dst now holds from src (0: dst unchanged).
int model_slot_copy_prefix(struct model *m, int dst, int src, int n);
// The length of the common prefix of a slot's cached tokens and tokens[0..n).
int model_slot_common_prefix(const struct model *m, int slot, const int32_t *tokens, int n);
// When another slot holds a longer prefix of tokens[0..n) than slot dst,
// dst takes the longest one (model_slot_copy_prefix). Returns the prefix of
// tokens dst holds afterwards; *from: the slot with that longer prefix (-1:
// none; then, or when the copy was refused, dst is unchanged).
int model_slot_share_prefix(struct model *m, int dst, const int32_t *tokens, int n, int *from);
// Removes positions [p0, p1) of a slot and shifts the later ones down
// (their keys re-rotated), as llama.cpp's seq_rm + seq_add.
int model_slot_remove(struct model *m, int slot, int p0, int p1, struct err *e);
// Drops a slot's positions from n on (speculative decoding rolls back the
// drafted tokens the target rejected); n past the slot's length is an error.
int model_slot_truncate(struct model *m, int slot, int n, struct err *e);
// Models with recurrent layers (delta nets, Mamba-2, short convolutions)
// keep per-slot state that cannot forget positions: context shift and
// removing from the middle fail (ERR_UNSUPPORTED); truncation, prefix reuse
// and cross-slot sharing go back to the latest checkpoint at or before the
// position (at worst position 0) and evaluate the rest again, so prefix
// reuse may keep fewer tokens than match.
bool model_is_recurrent(const struct model *m);
// Keeps a copy of the slot's recurrent state at its current length (a few
// per slot, the oldest replaced), so a later prompt that shares the prefix
// up to here resumes from it. The runner takes one a few tokens before the
// end of each prompt, as llama-server does. No-op for other models.
void model_slot_checkpoint(struct model *m, int slot);
// Ollama's context shift: keep the first n_keep tokens, discard half of the
// rest. Returns the number of tokens discarded. A picture's rows (a run of
// one negative id) are kept or discarded whole: n_keep inside one keeps it,
// and a discarded half that ends inside one takes the rest of it too.
int model_context_shift(struct model *m, int slot, int n_keep, struct err *e);

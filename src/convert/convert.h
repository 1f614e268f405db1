// convert: Hugging Face model folders (safetensors + config.json +
// tokenizer.json ...) to GGUF, the import behind `ollama create` with
// `FROM <folder>` (docs/internals/convert.md).
//
// The folder is given as a list of (name inside the folder, path on disk)
// pairs, as the store has it: uploaded blobs named by the client. The
// .safetensors files are mapped read-only and their tensors are streamed one
// row block at a time into the GGUF writer, so converting a model needs
// memory for its tokenizer and one block, never for its weights.
//
// Every size, offset and dtype of a safetensors header is checked against the
// file before anything is read from it: a hostile file gives ERR_FORMAT
// naming the file and tensor, an architecture or dtype this build cannot
// convert ERR_UNSUPPORTED naming it.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct convert_file {
    const char *name;  // path inside the folder ("model-00001-of-00002.safetensors")
    const char *path;  // where its bytes are
};

typedef void (*convert_progress_fn)(void *ctx, uint64_t done, uint64_t total);

struct convert_info {
    char hf_arch[64];    // config.json architectures[0]
    char arch[32];       // general.architecture written
    uint64_t n_tensors;  // tensors written
    uint64_t n_bytes;    // tensor bytes written
};

// Converts the folder into a GGUF file at out_path (created or truncated).
// On error out_path may hold a partial file: the caller removes it.
int convert_folder(const struct convert_file *files, size_t n, const char *out_path,
                   convert_progress_fn fn, void *ctx, struct convert_info *info, struct err *e);

// Converts a PEFT LoRA folder (adapter_config.json + adapter_model.safetensors)
// into llama.cpp's LoRA GGUF for the base model GGUF at base_path, whose
// architecture picks the name mapping; every A/B pair is checked against the
// base weight it adapts (a missing weight or other shape: ERR_INVALID naming
// it).
int convert_adapter(const struct convert_file *files, size_t n, const char *base_path,
                    const char *out_path, struct convert_info *info, struct err *e);

// True when name is a file convert_folder reads (.safetensors and the JSON
// and tokenizer files beside it), for clients choosing what to upload.
bool convert_wanted_file(const char *name);

// ---------------------------------------------------------------------------
// The parts, exposed for tests and fuzzers.

// U8 and I64 are parsed so that what reads them (gpt-oss's MXFP4 blocks and
// scales) or drops them (BERT's position_ids) can; everything else refuses
// them naming the tensor.
enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_U8, ST_I64 };

struct st_tensor {
    char *name;  // as in the file ("model.layers.0.self_attn.q_proj.weight")
    enum st_dtype dtype;
    uint32_t n_dims;      // 1..4
    int64_t shape[4];     // outermost first, as in the file
    const uint8_t *data;  // inside the file image
    uint64_t n_bytes;
};

struct st_set {
    struct st_tensor *v;
    size_t n;
};

// Parses one safetensors image (8-byte header length, JSON header, data) and
// appends its tensors to set. fname names the file in errors. The image must
// outlive the set.
int st_parse(struct st_set *set, const uint8_t *image, size_t n, const char *fname, struct err *e);
void st_set_free(struct st_set *set);

enum convert_special { CV_BOS, CV_EOS, CV_UNK, CV_SEP, CV_PAD, CV_CLS, CV_MASK, CV_SPECIAL_N };

struct convert_vocab {
    char **tokens;
    int32_t *types;  // llama.cpp token types: 1 normal, 2 unknown, 3 control, 4 user-defined,
                     // 5 unused, 6 byte
    float *scores;   // SentencePiece only (NULL for BPE)
    size_t n;
    bool spm;  // tokenizer.ggml.model "llama" (SentencePiece), else "gpt2"
    bool wpm;  // "bert" (WordPiece; tokens in llama.cpp's phantom-space form)
    char **merges;
    size_t n_merges;
    char pre[32];                   // tokenizer.ggml.pre
    char *chat_template;            // NULL when none
    int64_t special[CV_SPECIAL_N];  // token ids, -1 when absent
    int add_bos, add_eos;           // -1 when tokenizer_config.json does not say
};

// The vocabulary from the texts of tokenizer.json, tokenizer_config.json and
// config.json (each NULL when the folder lacks it), padded to vocab_size
// (config.json) with unused "[PAD<id>]" tokens.
int convert_vocab_parse(struct convert_vocab *v, const char *tokenizer_json, size_t n_tok,
                        const char *tokenizer_config, size_t n_cfg, const char *config_json,
                        size_t n_config, struct err *e);
// The same for a SentencePiece tokenizer.model (protobuf) with the special
// tokens of tokenizer_config.json / config.json (each may be NULL).
int convert_vocab_parse_spm(struct convert_vocab *v, const void *model, size_t n_model,
                            const char *tokenizer_config, size_t n_cfg, const char *config_json,
                            size_t n_config, struct err *e);
// The same for a WordPiece vocab.txt (one token per line, the id its line
// number), as BERT folders without tokenizer.json ship it.
int convert_vocab_parse_wordpiece(struct convert_vocab *v, const char *vocab_txt, size_t n_txt,
                                  const char *tokenizer_config, size_t n_cfg,
                                  const char *config_json, size_t n_config, struct err *e);
// sentence-transformers' pooling: modules.json names the Pooling module's
// folder, whose config.json says the mode. *pooling gets llama.cpp's
// pooling_type (1 mean, 2 cls, 3 last token); -1 when modules.json has no
// Pooling module. pooling_config is that folder's config.json (NULL when
// the folder lacks it: an error when modules.json names one). *dir gets the
// folder name from modules.json (caller frees; NULL when none).
int convert_pooling_parse(const char *modules_json, size_t n_modules, char **dir, struct err *e);
int convert_pooling_mode(const char *pooling_config, size_t n_cfg, int32_t *pooling, struct err *e);
void convert_vocab_free(struct convert_vocab *v);

// tokenizer: the text <-> token id mapping of a GGUF model, token-for-token
// identical to llama.cpp (docs/spec/tokenizers.md). Three model families:
// SentencePiece-style BPE by score ("llama", SPM), byte-level BPE by merge
// rank with per-model pre-tokenizer regexes ("gpt2", BPE), and WordPiece
// ("bert", WPM). Special tokens written in the text are recognised when asked,
// end-of-generation tokens are known per model, and a streaming decoder turns
// generated ids back into whole UTF-8 characters.
//
// A struct tokenizer is immutable after loading; every function taking a
// const struct tokenizer * is thread-safe. It owns copies of everything it
// needs, so the struct gguf may be closed after tokenizer_load.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct gguf;
struct tokenizer;

#define TOKENIZER_NULL (-1)  // "no such token" (special id not set, lookup failed)

enum tokenizer_kind {
    TOKENIZER_SPM = 1,  // tokenizer.ggml.model = "llama"
    TOKENIZER_BPE = 2,  // "gpt2"
    TOKENIZER_WPM = 3,  // "bert"
};

// tokenizer.ggml.token_type values.
enum tokenizer_token_type {
    TOKENIZER_TYPE_UNDEFINED = 0,
    TOKENIZER_TYPE_NORMAL = 1,
    TOKENIZER_TYPE_UNKNOWN = 2,
    TOKENIZER_TYPE_CONTROL = 3,
    TOKENIZER_TYPE_USER_DEFINED = 4,
    TOKENIZER_TYPE_UNUSED = 5,
    TOKENIZER_TYPE_BYTE = 6,
};

// Special token ids; TOKENIZER_NULL when the model has none.
struct tokenizer_special {
    int32_t bos, eos, eot, eom, unk, sep, pad, cls, mask;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
};

// ---------------------------------------------------------------------------
// Loading.

// Builds the tokenizer from the tokenizer.ggml.* metadata of g (the arch
// fix-ups of spec §7 use general.architecture and tokenizer.chat_template).
// Fails with ERR_UNSUPPORTED for a tokenizer model or pre-tokenizer we do not
// implement ("unknown pre-tokenizer type: 'x'"), ERR_FORMAT for missing or
// inconsistent arrays. *out is written only on success.
int tokenizer_load(struct tokenizer **out, const struct gguf *g, struct err *e);

// The same from plain arrays (tests, tools, vocabularies not in a GGUF).
// Arrays are copied. scores/types may be NULL (0 / NORMAL); merges only for
// BPE. A zero-initialised field keeps the model's default.
enum tokenizer_flag {
    TOKENIZER_FLAG_DEFAULT = 0,
    TOKENIZER_FLAG_ON = 1,
    TOKENIZER_FLAG_OFF = 2,
};
struct tokenizer_id_override {
    bool set;    // false: keep the model's default id
    int32_t id;  // TOKENIZER_NULL or out of range: no such token
};
struct tokenizer_desc {
    enum tokenizer_kind kind;
    const char *pre;  // BPE pre-tokenizer name (NULL = "default")
    size_t n_tokens;
    const struct str *tokens;
    const float *scores;
    const int32_t *types;
    size_t n_merges;
    const struct str *merges;  // "left right"
    struct tokenizer_id_override bos, eos, unk;
    enum tokenizer_flag add_bos, add_eos, add_space_prefix;
};
int tokenizer_build(struct tokenizer **out, const struct tokenizer_desc *d, struct err *e);

void tokenizer_free(struct tokenizer *t);

// ---------------------------------------------------------------------------
// Vocabulary access.

enum tokenizer_kind tokenizer_kind(const struct tokenizer *t);
// Pre-tokenizer name as resolved ("llama-bpe", "qwen2", "default"); "" for SPM/WPM.
const char *tokenizer_pre_name(const struct tokenizer *t);
int32_t tokenizer_n_vocab(const struct tokenizer *t);
// Special-token text of ids >= n is no longer matched by tokenizer_encode
// (tokens past the model's embedding rows; n <= 0: no limit).
void tokenizer_set_id_limit(struct tokenizer *t, int32_t n);
const struct tokenizer_special *tokenizer_special_ids(const struct tokenizer *t);
bool tokenizer_add_bos(const struct tokenizer *t);
bool tokenizer_add_eos(const struct tokenizer *t);
bool tokenizer_add_space_prefix(const struct tokenizer *t);
// The vocabulary text of a token as stored (▁ / Ġ forms); empty slice when
// id is out of range. Lives as long as t.
struct str tokenizer_token_text(const struct tokenizer *t, int32_t id);
// enum tokenizer_token_type, or -1 when id is out of range.
int tokenizer_token_type(const struct tokenizer *t, int32_t id);
float tokenizer_token_score(const struct tokenizer *t, int32_t id);
// Id of the token whose vocabulary text is exactly s[0..n), or TOKENIZER_NULL.
int32_t tokenizer_find(const struct tokenizer *t, const char *s, size_t n);
// True for CONTROL / UNKNOWN tokens (rendered only when asked).
bool tokenizer_is_control(const struct tokenizer *t, int32_t id);
// End of generation: eos, eot, eom, Ollama's eos_token_ids, FIM pad/rep/sep
// and the tokens with EOG text (<|eot_id|>, <|im_end|>, <end_of_turn>, ...).
bool tokenizer_is_eog(const struct tokenizer *t, int32_t id);
// The EOG ids in increasing order; returns their number, writes at most n.
size_t tokenizer_eog_ids(const struct tokenizer *t, int32_t *ids, size_t n);

// ---------------------------------------------------------------------------
// Encoding.

// Growable id array (caller's storage; tokenizer_ids_deinit frees).
struct tokenizer_ids {
    int32_t *data;
    size_t len, cap;
};
void tokenizer_ids_deinit(struct tokenizer_ids *v);
void tokenizer_ids_reset(struct tokenizer_ids *v);
int tokenizer_ids_push(struct tokenizer_ids *v, int32_t id);

// Tokenizes text[0..len) (any bytes; invalid UTF-8 is tokenized losslessly
// where the model can represent the bytes) and APPENDS the ids to out.
// add_special: the tokens the model adds around a text (BOS/EOS per
// add_bos/add_eos; [CLS] .. [SEP] for WordPiece). parse_special: CONTROL
// token text in the input becomes that token (USER_DEFINED tokens are always
// matched). Returns the number of ids appended, or a negative ERR_*.
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, struct tokenizer_ids *out, struct err *e);

// ---------------------------------------------------------------------------
// Decoding.

// The bytes one token decodes to (may be part of a UTF-8 character, e.g. a
// byte token). CONTROL/UNKNOWN tokens give their text only when
// render_special, else an empty slice; out-of-range ids give an empty slice.
// Like llama.cpp's token_to_piece with lstrip = 0.
struct str tokenizer_piece(const struct tokenizer *t, int32_t id, bool render_special);

// Whole-sequence detokenization, as llama.cpp's llama_detokenize: the
// leading space the SPM space prefix put in front of the first piece is
// removed (unless the text starts with a removed BOS); remove_special drops
// a leading BOS / trailing EOS the model adds; render_special renders
// CONTROL tokens as their text. No clean-up of spaces is applied. Appends to
// out; fails with ERR_RANGE for an id outside the vocabulary.
int tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, bool remove_special,
                     bool render_special, struct buf *out, struct err *e);

// Streaming decoder: push ids one at a time and get text made of whole UTF-8
// characters only; the concatenation of everything pushed plus the final
// flush equals tokenizer_decode(ids, remove_special = false, render_special).
// strip_leading_space applies the SPM first-piece rule (set it when the ids
// start a text, clear it for a continuation, e.g. generated after a prompt).
// Invalid UTF-8 is passed through as soon as it is known to be invalid.
struct tokenizer_stream {
    const struct tokenizer *t;
    bool render_special;
    bool first;        // no token pushed yet
    bool strip_space;  // strip one leading space from the first piece
    char pending[8];   // an incomplete UTF-8 sequence held back
    size_t n_pending;
};
void tokenizer_stream_init(struct tokenizer_stream *s, const struct tokenizer *t,
                           bool render_special, bool strip_leading_space);
// Appends the newly complete text to out (possibly nothing). ERR_RANGE for a
// bad id (the stream is unchanged).
int tokenizer_stream_push(struct tokenizer_stream *s, int32_t id, struct buf *out, struct err *e);
// Appends whatever is held back (an unfinished UTF-8 sequence, as raw bytes).
int tokenizer_stream_flush(struct tokenizer_stream *s, struct buf *out, struct err *e);

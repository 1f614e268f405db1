// sample: turning logits into tokens, and generated text into a response.
//
//  * the sampler chain of docs/spec/sampling.md §2 (R1, llama.cpp order): penalties, top_k,
//    typical_p, top_p, min_p, temperature, seeded draw; or temperature + mirostat 1/2;
//  * structured output: `format: "json"` and `format: <JSON schema>` compiled into a
//    byte-level grammar (a pushdown automaton) that masks tokens during sampling;
//  * stop sequences with streaming-safe hold-back, and num_predict limits.
//
// The vocabulary is abstract (struct sample_vocab): the token's decoded bytes and an
// end-of-generation flag, fed by the runner from the tokenizer. A vocab and a compiled
// grammar are immutable and may be shared between threads; a sampler or a stop matcher
// belongs to one sequence (not thread-safe).
//
// A runner's generation loop:
//
//   sample_vocab_new(&vocab, ...)                         once per model
//   sample_format_compile(&g, req_format, &e)             per request (error → reply e.msg)
//   sample_new(&s, vocab, &opts, g, &e); sample_stop_new(&st, stops, n, &e)
//   for each prompt token t: sample_feed_prompt(s, t)
//   limit = sample_predict_limit(num_predict, num_ctx, n_prompt)
//   for (n = 0;; n++) {
//       if (n == limit) → done "length"
//       logits = decode(...); sample_next(s, logits, &tok, &e)
//       if tok is EOG → sample_stop_flush(st, out); done "stop"
//       if (sample_stop_feed(st, piece(tok), len, out) == 1) → done "stop"
//       stream out
//   }
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/json.h"
#include "util/util.h"

// ---------------------------------------------------------------------------
// Options (docs/spec/api.md §8, docs/spec/sampling.md §1). Fill with sample_options_default().

struct sample_options {
    float temperature;        // 0.8; <= 0 → greedy
    int32_t top_k;            // 40; <= 0 → off
    float top_p;              // 0.9; >= 1 → off
    float min_p;              // 0.0; <= 0 → off
    float typical_p;          // 1.0; >= 1 → off
    int32_t repeat_last_n;    // 64; 0 → off; -1 → num_ctx
    float repeat_penalty;     // 1.0 (1.0 → off)
    float presence_penalty;   // 0.0
    float frequency_penalty;  // 0.0
    bool penalize_newline;    // true (legacy option; false leaves "\n" tokens unpenalised)
    int32_t mirostat;         // 0 (0 off, 1 or 2)
    float mirostat_tau;       // 5.0
    float mirostat_eta;       // 0.1
    int64_t seed;             // -1 (any negative value → a random seed)
    int32_t num_ctx;          // context size, used for repeat_last_n = -1 (default 4096)
};

void sample_options_default(struct sample_options *o);

// ---------------------------------------------------------------------------
// Vocabulary: n_vocab tokens, each with its decoded bytes (may be partial UTF-8, may be
// empty for control tokens) and whether it ends generation (EOS/EOT).

struct sample_vocab;

// Copies everything it needs. pieces[i] has piece_lens[i] bytes (NULL allowed when the
// length is 0): the token's detokenized bytes (byte-level BPE decoded, SentencePiece "▁"
// as a space, <0xNN> byte tokens as that byte); special/control tokens as their literal
// text or empty (empty tokens are never allowed under a grammar). is_eog may be NULL (no
// EOG tokens). Build once per model; ~40 ms for 152k tokens.
int sample_vocab_new(struct sample_vocab **out, int32_t n_vocab, const char *const *pieces,
                     const uint32_t *piece_lens, const bool *is_eog, struct err *e);
void sample_vocab_free(struct sample_vocab *v);
int32_t sample_vocab_size(const struct sample_vocab *v);

// ---------------------------------------------------------------------------
// Structured output: a compiled grammar.

struct sample_grammar;

// Compiles the `format` request field: NULL, JSON null or "" → *out = NULL (no
// constraint); "json" → any JSON object; an object → that JSON schema. Any other value,
// or a schema using a feature we cannot enforce, → ERR_INVALID with a message for the
// user (`invalid format: ...`). The grammar is immutable and shareable.
int sample_format_compile(struct sample_grammar **out, const json_t *format, struct err *e);
// Same, from the JSON text of the format value.
int sample_format_compile_text(struct sample_grammar **out, const char *text, size_t len,
                               struct err *e);
void sample_grammar_free(struct sample_grammar *g);

// Checks bytes against the grammar from its start: returns 1 when s[0..n) is a valid
// prefix of some accepted text (and sets *complete when it is a full accepted text),
// 0 when it is not, or a negative ERR_* (grammar too ambiguous/deep).
int sample_grammar_check(const struct sample_grammar *g, const char *s, size_t n, bool *complete,
                         struct err *e);

// ---------------------------------------------------------------------------
// The sampler: one per sequence.

struct sampler;

// vocab and grammar (may be NULL) are borrowed and must outlive the sampler. The RNG is
// seeded from o->seed (random when negative): same seed + prompt + options → same tokens.
int sample_new(struct sampler **out, const struct sample_vocab *vocab,
               const struct sample_options *o, const struct sample_grammar *grammar, struct err *e);
void sample_free(struct sampler *s);

// Feeds a prompt token into the penalty history (no grammar effect).
void sample_feed_prompt(struct sampler *s, int32_t token);

// The grammar constrains only while active. Active from the start by default; a runner
// for a thinking model calls sample_grammar_set_active(s, false) before generating and
// true once the thinking part has ended (docs/spec/api.md §6.5).
void sample_grammar_set_active(struct sampler *s, bool active);

// Picks the next token from logits[0..n_vocab) (not modified), then accepts it: penalty
// history, grammar state, mirostat μ. Returns 0, or ERR_INVALID when the grammar leaves no
// valid token (the vocabulary cannot continue the output).
int sample_next(struct sampler *s, const float *logits, int32_t *token, struct err *e);

// True when the grammar (if any, and active) has a complete value and nothing but white
// space could follow it: the runner may end generation here (done_reason "stop") instead
// of waiting for the model's EOG. False while the value could still grow (a top-level
// number "1" may become "12").
bool sample_grammar_complete(const struct sampler *s);

// Statistics for benchmarks: how many sample_next() calls needed the full vocab mask.
uint64_t sample_full_mask_count(const struct sampler *s);

// ---------------------------------------------------------------------------
// Log probabilities (docs/spec/api.md §6.7), from the raw logits: log_softmax over the whole
// vocabulary. Writes the chosen token's log probability to *token_logprob and the top_n
// most likely tokens (descending, ties by lower id) to top[0..top_n); returns how many
// were written (min(top_n, finite logits)). top may be NULL when top_n is 0.

struct sample_logprob {
    int32_t token;
    float logprob;
};

int sample_logprobs(const float *logits, int32_t n_vocab, int32_t token, float *token_logprob,
                    struct sample_logprob *top, int top_n);

// ---------------------------------------------------------------------------
// num_predict and done_reason.

// Maximum number of tokens to generate for a request: num_predict >= 0 → itself;
// -2 → fill the context (num_ctx - n_prompt, at least 0); other negative values →
// "unlimited", bounded to 10 × num_ctx as Ollama does.
int64_t sample_predict_limit(int64_t num_predict, int64_t num_ctx, int64_t n_prompt);

enum sample_done {
    SAMPLE_DONE_STOP,    // EOG token or stop sequence
    SAMPLE_DONE_LENGTH,  // num_predict reached or context full
};
const char *sample_done_reason(enum sample_done d);  // "stop" / "length"

// ---------------------------------------------------------------------------
// Stop sequences on detokenized text, streaming-safe.

struct sample_stop;

// Copies the n stop strings (empty strings are ignored). Never fails for n = 0.
int sample_stop_new(struct sample_stop **out, const char *const *stops, size_t n, struct err *e);
void sample_stop_free(struct sample_stop *st);

// Feeds a generated piece. Appends to out the text that can be shown now: text that
// might still become a stop string, and an incomplete trailing UTF-8 sequence, are held
// back. Returns 1 when a stop string matched (out then holds everything before it; the
// stop string and anything after it are dropped; later feeds emit nothing), 0 otherwise,
// or a negative ERR_* when out hits its cap.
int sample_stop_feed(struct sample_stop *st, const char *piece, size_t len, struct buf *out);
// End of generation: appends whatever is still held back (nothing once stopped).
int sample_stop_flush(struct sample_stop *st, struct buf *out);
bool sample_stop_stopped(const struct sample_stop *st);

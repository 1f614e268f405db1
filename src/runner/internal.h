// Shared between the runner's own files: the request object that travels
// from an HTTP connection thread to the batching loop and back, the loop's
// interface, and the HTTP layer's.
//
// Threads: the HTTP wrapper's event threads and one thread per request
// handler (httpd/), one batching loop
// thread that owns the model, and the main thread (load, signals).
// Lock order: loop->mu, then a request's mu (never the other way round).
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "httpd/httpd.h"
#include "json/json.h"
#include "model/model.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"

#define RUNNER_MAX_BODY_BYTES    (64u * 1024 * 1024)
#define RUNNER_MAX_PENDING_BYTES (64u * 1024 * 1024)

// Speculative decoding: drafted tokens per step (Ollama's draft_num_predict
// default, and our cap), and the longest prompt-lookup n-gram.
#define RUNNER_DEFAULT_DRAFT_NUM_PREDICT 4
#define RUNNER_MAX_DRAFT_NUM_PREDICT     64
#define RUNNER_MAX_DRAFT_NGRAM           16

// Embedding pooling (GGUF <arch>.pooling_type).
enum runner_pooling {
    RUNNER_POOL_MEAN = 1,
    RUNNER_POOL_CLS = 2,
    RUNNER_POOL_LAST = 3,
};

enum rreq_kind { RREQ_COMPLETION, RREQ_EMBEDDING };

// A picture of a request (images.c).
struct rimage {
    int32_t id;   // the negative token id of its rows
    int n;        // image tokens
    float *rows;  // n × img_n_embd
    int cols;     // M-RoPE towers: tokens a row of the merged grid (0: others)
};

// Where a picture's rows sit in the prompt.
struct rplace {
    int start;  // first prompt position of the rows
    int img;    // index into imgs
};

// One /completion or /embedding request. The HTTP thread fills the input
// part and submits it; from then on only the loop touches the generation
// state; output goes through `out` under `mu`.
struct rreq {
    enum rreq_kind kind;
    // Input (read-only once submitted).
    struct tokenizer_ids tokens;     // prompt, already truncated to fit
    int n_keep;                      // tokens kept at the front on a context shift
    int64_t limit;                   // most tokens to generate
    bool shift;                      // context shift allowed when the window is full
    bool cache_prompt;               // reuse a slot's cached prefix
    bool return_context;             // final line carries prompt + output ids
    bool logprobs;                   // lines carry the sampled tokens' log probabilities
    int top_logprobs;                // and this many alternatives (0-20)
    struct sampler *sampler;         // owned; prompt already fed
    struct sample_grammar *grammar;  // owned (the sampler borrows it), or NULL
    struct sample_stop *stop;        // owned
    struct tokenizer_ids context;    // prompt + generated ids (loop thread)
    // Speculative decoding (spec.c): most tokens drafted per step (0: off),
    // and the prompt-lookup n-gram length (0: use the draft model, if any).
    int draft_max;
    int draft_ngram;
    // Pictures (images.c): each encoded once; placed in the prompt at
    // places[] (a picture may be placed more than once).
    struct rimage *imgs;
    struct rplace *places;
    int n_imgs, n_places, img_n_embd;

    // Output and lifetime (mu).
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct httpd_stream *stream;  // the /completion reply (NDJSON lines), until finished
    bool finished;                // no more output will come
    int refs;                     // HTTP side + loop side
    int fd;  // /embedding: client socket polled for hang-up; -1 once the reply is sent
    atomic_bool cancelled;
    // Embedding result (set before finished).
    float *embd;
    int n_embd;
    int n_evaluated;
    char *error;  // a failure before any output (embedding), or NULL

    struct rreq *next;  // wait queue link (loop->mu)
};

// The input row of prompt position p when it is an image row, else NULL.
const float *rreq_image_row(const struct rreq *r, int p);
// M-RoPE: the (row, col) of prompt position p in its picture's grid
// (false: p is no image row, or the tower has no grid).
bool rreq_image_cell(const struct rreq *r, int p, int32_t *row, int32_t *col);
void rreq_images_free(struct rreq *r);

struct rreq *rreq_new(enum rreq_kind kind);
void rreq_ref(struct rreq *r);
void rreq_unref(struct rreq *r);
// Appends a JSON line (takes obj's reference). Dropped once cancelled.
void rreq_emit(struct rreq *r, json_t *obj);
// Marks the request finished and wakes the reader.
void rreq_finish(struct rreq *r);
// True once the client has gone (polls the socket for hang-up).
bool rreq_cancelled(struct rreq *r);

// A draft model for speculative decoding and its batch scratch (spec.c);
// used by the loop thread only.
struct runner_draft {
    struct model *m;
    int n_batch;
    int32_t *b_tokens, *b_pos, *b_slot;
    bool *b_logits;
    int *job_next, *job_row;  // per job (at most one per slot)
};

// One slot's drafting: continue hist[0..n) (n >= 1) with at most max tokens.
struct runner_draft_job {
    int slot;
    const int32_t *hist;
    int n;
    int32_t *out;
    int max;
    int k;  // drafted (out[0..k))
};

// The runner-wide state shared by the HTTP threads.
struct runner {
    atomic_int status;        // RUNNER_LOADING / RUNNER_READY / RUNNER_FAILED
    char error[ERR_MSG_MAX];  // set before status becomes RUNNER_FAILED
    struct model *model;      // set before status becomes RUNNER_READY
    const struct tokenizer *tok;
    struct sample_vocab *vocab;
    struct runner_loop *loop;
    enum runner_pooling pooling;
    bool add_bos;                // the tokenizer adds BOS with add_special
    bool no_context_shift;       // --no-context-shift
    int n_ctx;                   // per slot
    struct runner_draft *draft;  // --draft model, or NULL
    // The vision tower (--mmproj, or the model file's own), or NULL.
    struct vision_model *vision;
    struct httpd *httpd;
};

enum { RUNNER_LOADING = 0, RUNNER_READY = 1, RUNNER_FAILED = 2 };

// Fills rn's model, tokenizer, sampling vocabulary and pooling from a
// loaded model (runner.c). The fuzz target uses it too.
int runner_attach_model(struct runner *rn, struct model *m, struct err *e);

// Speculative decoding (spec.c).
// Prompt lookup: finds the most recent earlier occurrence of the last g
// tokens of hist[0..n) (g = ngram down to 1) and copies what followed it
// into out[0..max). Returns the number of drafted tokens (0: no match).
int runner_spec_lookup(const int32_t *hist, int n, int ngram, int32_t *out, int max);
// A draft model must tokenize as the target does: same vocabulary, token
// for token. ERR_INVALID with a message for the user otherwise.
int runner_spec_check_vocab(const struct tokenizer *target, const struct tokenizer *draft,
                            struct err *e);
// Drafts greedily with the draft model for every job at once (one slot
// each): brings each slot's draft cache in step with its history, then
// decodes one token per unfinished job per pass; a job stops at max tokens
// or after an end-of-generation token. Sets each job's k.
int runner_spec_draft(struct runner_draft *d, struct runner_draft_job *jobs, int n_jobs,
                      struct err *e);
// Loads the draft model with the target's context, slots and batch
// and checks its vocabulary against the target's.
int runner_draft_load(struct runner_draft **out, const char *path, const struct model *target,
                      struct err *e);
void runner_draft_free(struct runner_draft *d);

// Prompts with pictures (images.c): tokenizes text with "[img-N]" tags and
// the base64 images into r->tokens, image rows included.
int runner_images_tokenize(struct runner *rn, const char *text, size_t len, bool add_special,
                           const json_t *images, struct rreq *r, struct err *e);

// Request parsing (request.c): build a request from a JSON body. On failure
// returns NULL with *status (400/500) and e set.
struct rreq *runner_completion_parse(struct runner *rn, const json_t *body, int *status,
                                     struct err *e);
struct rreq *runner_embedding_parse(struct runner *rn, const json_t *body, int *status,
                                    struct err *e);

// The batching loop (loop.c).
struct runner_loop;
int runner_loop_start(struct runner_loop **out, struct runner *rn, struct err *e);
// Queues a request (FIFO for a free slot); the loop takes a reference.
void runner_loop_submit(struct runner_loop *l, struct rreq *r);
// Stops the thread; unfinished and later requests get an error line.
void runner_loop_stop(struct runner_loop *l);
// Stops (if needed) and frees; nothing may submit afterwards.
void runner_loop_free(struct runner_loop *l);

// HTTP (http.c): listens on 127.0.0.1:port.
int runner_http_start(struct runner *rn, uint16_t port, struct err *e);
void runner_http_stop(struct runner *rn);

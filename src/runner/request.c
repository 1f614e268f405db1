// Requests of the runner protocol (PROTOCOL.md): the shared request object
// and the parsing of /completion and /embedding bodies. Everything that can
// fail before output starts (bad options, bad format, a prompt too long
// without truncation) fails here, on the HTTP thread, so the client gets a
// plain 400 instead of an error line in a stream.
#include "runner/internal.h"

#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

struct rreq *rreq_new(enum rreq_kind kind)
{
    struct rreq *r = xcalloc(1, sizeof(*r));
    r->kind = kind;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->fd = -1;
    return r;
}

void rreq_ref(struct rreq *r)
{
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
}

void rreq_unref(struct rreq *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    int refs = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (refs > 0)
        return;
    tokenizer_ids_deinit(&r->tokens);
    tokenizer_ids_deinit(&r->context);
    rreq_images_free(r);
    sample_free(r->sampler);
    sample_grammar_free(r->grammar);
    sample_stop_free(r->stop);
    if (r->stream)  // never finished: end the reply as broken
        httpd_stream_end(r->stream, true);
    free(r->embd);
    free(r->error);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

void rreq_emit(struct rreq *r, json_t *obj)
{
    struct buf line;
    buf_init(&line, 0);
    int rc = jsonx_ndjson_line(obj, &line);
    pthread_mutex_lock(&r->mu);
    if (rc == 0 && !atomic_load(&r->cancelled) && r->stream &&
        httpd_stream_write(r->stream, line.data, line.len) < 0)
        atomic_store(&r->cancelled, true);  // gone, or stopped reading long ago
    pthread_mutex_unlock(&r->mu);
    buf_deinit(&line);
}

void rreq_finish(struct rreq *r)
{
    pthread_mutex_lock(&r->mu);
    r->finished = true;
    struct httpd_stream *st = r->stream;
    r->stream = NULL;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (st)
        httpd_stream_end(st, atomic_load(&r->cancelled));
}

bool rreq_cancelled(struct rreq *r)
{
    if (atomic_load(&r->cancelled))
        return true;
    pthread_mutex_lock(&r->mu);
    if (r->stream && httpd_stream_gone(r->stream))
        atomic_store(&r->cancelled, true);
    if (r->fd >= 0) {
        struct pollfd pfd = {.fd = r->fd, .events = POLLRDHUP};
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
            atomic_store(&r->cancelled, true);
    }
    pthread_mutex_unlock(&r->mu);
    return atomic_load(&r->cancelled);
}

// ---------------------------------------------------------------------------
// Options

static int get_float(const json_t *o, const char *key, float *out, struct err *e)
{
    double d = *out;
    int rc = jsonx_get_double(o, key, &d, false, e);
    if (rc == 1)
        *out = (float)d;
    return rc;
}

// Integer options accept any number, truncated toward zero (api.md §8).
static int get_int(const json_t *o, const char *key, int64_t *out, struct err *e)
{
    double d = (double)*out;
    int rc = jsonx_get_double(o, key, &d, false, e);
    if (rc == 1) {
        if (!isfinite(d) || d > 9.2e18 || d < -9.2e18)
            return err_set(e, ERR_RANGE, "option \"%s\" out of range", key);
        *out = (int64_t)d;
    }
    return rc;
}

static int get_int32(const json_t *o, const char *key, int32_t *out, struct err *e)
{
    int64_t v = *out;
    int rc = get_int(o, key, &v, e);
    if (rc == 1) {
        if (v > INT32_MAX)
            v = INT32_MAX;
        if (v < INT32_MIN)
            v = INT32_MIN;
        *out = (int32_t)v;
    }
    return rc;
}

struct gen_opts {
    struct sample_options s;
    int64_t num_predict;
    int64_t num_keep;
    int64_t draft_num_predict;  // -1: not given
    int64_t draft_ngram;
    char **stops;
    size_t n_stops;
};

static void gen_opts_deinit(struct gen_opts *g)
{
    for (size_t i = 0; i < g->n_stops; i++)
        free(g->stops[i]);
    free(g->stops);
}

static int parse_options(const json_t *opts, struct gen_opts *g, struct err *e)
{
    if (!opts || json_is_null(opts))
        return 0;
    if (!json_is_object(opts))
        return err_set(e, ERR_INVALID, "options must be an object");
    struct sample_options *s = &g->s;
    int rc = 0;
    int32_t mirostat = s->mirostat;
    if ((rc = get_int(opts, "num_predict", &g->num_predict, e)) < 0 ||
        (rc = get_int(opts, "num_keep", &g->num_keep, e)) < 0 ||
        (rc = get_int(opts, "draft_num_predict", &g->draft_num_predict, e)) < 0 ||
        (rc = get_int(opts, "draft_ngram", &g->draft_ngram, e)) < 0 ||
        (rc = get_float(opts, "temperature", &s->temperature, e)) < 0 ||
        (rc = get_int32(opts, "top_k", &s->top_k, e)) < 0 ||
        (rc = get_float(opts, "top_p", &s->top_p, e)) < 0 ||
        (rc = get_float(opts, "min_p", &s->min_p, e)) < 0 ||
        (rc = get_float(opts, "typical_p", &s->typical_p, e)) < 0 ||
        (rc = get_int32(opts, "repeat_last_n", &s->repeat_last_n, e)) < 0 ||
        (rc = get_float(opts, "repeat_penalty", &s->repeat_penalty, e)) < 0 ||
        (rc = get_float(opts, "presence_penalty", &s->presence_penalty, e)) < 0 ||
        (rc = get_float(opts, "frequency_penalty", &s->frequency_penalty, e)) < 0 ||
        (rc = get_int32(opts, "mirostat", &mirostat, e)) < 0 ||
        (rc = get_float(opts, "mirostat_tau", &s->mirostat_tau, e)) < 0 ||
        (rc = get_float(opts, "mirostat_eta", &s->mirostat_eta, e)) < 0 ||
        (rc = get_int(opts, "seed", &s->seed, e)) < 0 ||
        (rc = jsonx_get_bool(opts, "penalize_newline", &s->penalize_newline, false, e)) < 0)
        return rc;
    if (mirostat < 0 || mirostat > 2)
        return err_set(e, ERR_INVALID, "mirostat must be 0, 1 or 2");
    if (g->draft_ngram < 0 || g->draft_ngram > RUNNER_MAX_DRAFT_NGRAM)
        return err_set(e, ERR_INVALID, "draft_ngram must be between 0 and %d",
                       RUNNER_MAX_DRAFT_NGRAM);
    s->mirostat = mirostat;
    json_t *stop = json_object_get(opts, "stop");
    if (stop && !json_is_null(stop)) {
        if (!json_is_array(stop))
            return err_set(e, ERR_INVALID, "option \"stop\" must be of type array");
        size_t n = json_array_size(stop);
        g->stops = xcalloc(n ? n : 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            const char *str;
            size_t len;
            char what[32];
            snprintf(what, sizeof(what), "stop[%zu]", i);
            if ((rc = jsonx_as_strn(json_array_get(stop, i), what, &str, &len, e)) < 0)
                return rc;
            g->stops[g->n_stops++] = xstrndup(str, len);
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Completion

static int tokenize(struct runner *rn, const char *text, size_t len, bool add_special,
                    struct tokenizer_ids *out, struct err *e)
{
    int rc = tokenizer_encode(rn->tok, text, len, add_special, true, out, e);
    return rc < 0 ? rc : 0;
}

// Fits a prompt into the window (api.md §6.8): keep the first n_keep tokens
// and the newest ones so that about half the window stays free.
static void truncate_prompt(struct tokenizer_ids *t, int n_ctx, int n_keep)
{
    int n = (int)t->len;
    int free_ = (n_ctx - n_keep) / 2;
    if (free_ < 1)
        free_ = 1;
    int kept = n_ctx - free_;
    int tail = kept - n_keep;
    memmove(t->data + n_keep, t->data + (n - tail), (size_t)tail * sizeof(int32_t));
    t->len = (size_t)kept;
}

// The completion body's fields that only shape the prompt.
struct prompt_fields {
    const char *text;
    size_t len;
    bool add_special, truncate;
    bool shift;  // as the request asked (r->shift is also off where the model cannot shift)
};

// Reads the body's fields into r, g and pf, in the order the checks report errors.
static int parse_completion_fields(struct runner *rn, const json_t *body, struct rreq *r,
                                   struct gen_opts *g, struct prompt_fields *pf, struct err *e)
{
    int rc;
    if ((rc = jsonx_get_strn(body, "prompt", &pf->text, &pf->len, true, e)) < 0 ||
        (rc = jsonx_get_bool(body, "add_special", &pf->add_special, false, e)) < 0 ||
        (rc = jsonx_get_bool(body, "shift", &r->shift, false, e)) < 0 ||
        (rc = jsonx_get_bool(body, "truncate", &pf->truncate, false, e)) < 0 ||
        (rc = jsonx_get_bool(body, "cache_prompt", &r->cache_prompt, false, e)) < 0 ||
        (rc = jsonx_get_bool(body, "return_context", &r->return_context, false, e)) < 0 ||
        (rc = jsonx_get_bool(body, "logprobs", &r->logprobs, false, e)) < 0 ||
        (rc = parse_options(json_object_get(body, "options"), g, e)) < 0)
        return rc;
    int64_t top = 0;
    if ((rc = jsonx_get_int(body, "top_logprobs", &top, INT32_MIN, INT32_MAX, false, e)) < 0)
        return rc;
    if (top < 0 || top > 20)
        return err_set(e, ERR_INVALID, "top_logprobs must be between 0 and 20");
    r->top_logprobs = (int)top;
    pf->shift = r->shift;
    // Recurrent layers cannot forget positions: as llama-server, generation
    // ends at the context's end instead of shifting (the prompt is still
    // truncated to fit, as Ollama does before it reaches the server).
    if (rn->no_context_shift || model_is_recurrent(rn->model))
        r->shift = false;
    return sample_format_compile(&r->grammar, json_object_get(body, "format"), e);
}

// Settles n_keep and fits the tokenized prompt into the context window, or refuses it.
static int fit_prompt(struct runner *rn, struct rreq *r, const struct gen_opts *g,
                      const struct prompt_fields *pf, struct err *e)
{
    // num_keep as Ollama's runner: negative keeps the whole prompt, the BOS
    // does not count, and at least one token must stay discardable.
    int64_t n_keep = g->num_keep < 0 ? (int64_t)r->tokens.len : g->num_keep;
    if (pf->add_special && rn->add_bos)
        n_keep++;
    if (n_keep > rn->n_ctx - 1)
        n_keep = rn->n_ctx - 1;
    if (n_keep > (int64_t)r->tokens.len)
        n_keep = (int64_t)r->tokens.len;
    r->n_keep = (int)n_keep;
    if ((int64_t)r->tokens.len >= rn->n_ctx) {
        if (!pf->truncate || rn->no_context_shift)
            return err_set(e, ERR_INVALID, "input length exceeds the context length");
        // Ollama 0.33 truncates only with context shift on (the request's
        // shift, off by default for deepseek2).
        if (!pf->shift)
            return err_set(e, ERR_INVALID,
                           "the prompt is longer than the context length currently available to "
                           "the model; shorten the prompt, adjust the context length in "
                           "settings, or use a model with a longer context length");
        truncate_prompt(&r->tokens, rn->n_ctx, r->n_keep);
        if (r->tokens.len == 0)  // a window of one token holds no prompt
            return err_set(e, ERR_INVALID, "input length exceeds the context length");
    }
    return 0;
}

// Speculative decoding: prompt lookup when draft_ngram > 0, else the draft
// model when the runner has one; draft_num_predict drafted tokens per step
// (Ollama's default 4; 0 or less turns speculation off).
static void set_speculation(struct runner *rn, struct rreq *r, const struct gen_opts *g)
{
    r->draft_ngram = (int)g->draft_ngram;
    int64_t n = g->draft_num_predict < 0 ? RUNNER_DEFAULT_DRAFT_NUM_PREDICT : g->draft_num_predict;
    if (n > RUNNER_MAX_DRAFT_NUM_PREDICT)
        n = RUNNER_MAX_DRAFT_NUM_PREDICT;
    if (r->draft_ngram == 0 && !rn->draft)
        n = 0;
    r->draft_max = (int)n;
}

struct rreq *runner_completion_parse(struct runner *rn, const json_t *body, int *status,
                                     struct err *e)
{
    struct gen_opts g = {.num_predict = -1, .num_keep = 4, .draft_num_predict = -1};
    sample_options_default(&g.s);
    g.s.num_ctx = rn->n_ctx;
    struct rreq *r = rreq_new(RREQ_COMPLETION);
    struct prompt_fields pf = {.add_special = true, .truncate = true};
    r->shift = true;
    r->cache_prompt = true;
    *status = 400;
    int rc;
    if (model_is_encoder(rn->model)) {
        err_set(e, ERR_UNSUPPORTED, "%s is an embedding model and does not generate text",
                model_arch_name(rn->model));
        goto fail;
    }
    if ((rc = parse_completion_fields(rn, body, r, &g, &pf, e)) < 0)
        goto fail;
    const json_t *images = json_object_get(body, "images");
    if (json_array_size(images) > 0) {
        if ((rc = runner_images_tokenize(rn, pf.text, pf.len, pf.add_special, images, r, e)) < 0)
            goto fail;
        // Pictures are not cut: a prompt with them must fit whole.
        if ((int64_t)r->tokens.len >= rn->n_ctx) {
            err_set(e, ERR_INVALID,
                    "the prompt with its images takes %zu tokens, more than the context length "
                    "of %d; send fewer or smaller images, or raise num_ctx",
                    r->tokens.len, rn->n_ctx);
            goto fail;
        }
    } else if ((rc = tokenize(rn, pf.text, pf.len, pf.add_special, &r->tokens, e)) < 0) {
        goto fail;
    }
    if (r->tokens.len == 0) {
        rc = err_set(e, ERR_INVALID, "empty prompt");
        goto fail;
    }
    if ((rc = fit_prompt(rn, r, &g, &pf, e)) < 0)
        goto fail;
    r->limit = sample_predict_limit(g.num_predict, rn->n_ctx, (int64_t)r->tokens.len);
    set_speculation(rn, r, &g);
    if (r->n_imgs > 0 && r->draft_ngram == 0)
        r->draft_max = 0;  // the draft model has no tower: it cannot follow image rows

    if ((rc = sample_new(&r->sampler, rn->vocab, &g.s, r->grammar, e)) < 0 ||
        (rc = sample_stop_new(&r->stop, (const char *const *)g.stops, g.n_stops, e)) < 0) {
        *status = 500;
        goto fail;
    }
    for (size_t i = 0; i < r->tokens.len; i++)  // image rows (negative ids) are no tokens
        if (r->tokens.data[i] >= 0)
            sample_feed_prompt(r->sampler, r->tokens.data[i]);
    for (size_t i = 0; i < r->tokens.len && r->return_context; i++)
        if (r->tokens.data[i] >= 0)
            tokenizer_ids_push(&r->context, r->tokens.data[i]);
    gen_opts_deinit(&g);
    return r;
fail:
    (void)rc;
    gen_opts_deinit(&g);
    rreq_unref(r);
    return NULL;
}

// ---------------------------------------------------------------------------
// Embedding

struct rreq *runner_embedding_parse(struct runner *rn, const json_t *body, int *status,
                                    struct err *e)
{
    struct rreq *r = rreq_new(RREQ_EMBEDDING);
    const char *content = NULL;
    size_t len = 0;
    bool truncate = true;
    *status = 400;
    if (jsonx_get_strn(body, "content", &content, &len, true, e) < 0 ||
        jsonx_get_bool(body, "truncate", &truncate, false, e) < 0 ||
        tokenize(rn, content, len, true, &r->tokens, e) < 0)
        goto fail;
    if (r->tokens.len == 0) {
        err_set(e, ERR_INVALID, "empty input");
        goto fail;
    }
    if ((int64_t)r->tokens.len > rn->n_ctx) {
        if (!truncate) {
            err_set(e, ERR_INVALID, "input length exceeds the context length");
            goto fail;
        }
        // Keep the beginning; an end-of-sequence token the tokenizer appended
        // ([SEP], EOS) stays last.
        int32_t last = r->tokens.data[r->tokens.len - 1];
        const struct tokenizer_special *sp = tokenizer_special_ids(rn->tok);
        bool keep_last = tokenizer_add_eos(rn->tok) ||
                         (tokenizer_kind(rn->tok) == TOKENIZER_WPM && last == sp->sep);
        r->tokens.len = (size_t)rn->n_ctx;
        if (keep_last)
            r->tokens.data[r->tokens.len - 1] = last;
    }
    return r;
fail:
    rreq_unref(r);
    return NULL;
}

// The runner's HTTP side, over the one HTTP wrapper (httpd/): loopback
// only, bodies capped by the wrapper, JSON replies, and NDJSON streams fed
// by the batching loop. The loop never touches a connection: it writes
// lines to the request's stream and asks it whether the client is gone.
#include "runner/internal.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// The request body, gathered by the wrapper's body hook.
static void body_free(void *p)
{
    buf_deinit(p);
    free(p);
}

static void reply(struct httpd_req *c, int status, json_t *obj)
{
    struct buf b;
    buf_init(&b, 0);
    if (jsonx_dump(obj, 0, &b, NULL) < 0) {
        buf_reset(&b);
        buf_append_str(&b, "{\"error\":\"cannot encode response\"}");
        status = 500;
    }
    json_decref(obj);
    httpd_reply(c, status, "application/json; charset=utf-8", b.data ? b.data : "", b.len);
    buf_deinit(&b);
}

static void reply_error(struct httpd_req *c, int status, const char *msg)
{
    reply(c, status, json_pack("{s:s}", "error", msg));
}

// ---------------------------------------------------------------------------
// /health

static void handle_health(struct runner *rn, struct httpd_req *c)
{
    int st = atomic_load(&rn->status);
    if (st == RUNNER_READY) {
        reply(c, 200, json_pack("{s:s}", "status", "ok"));
    } else if (st == RUNNER_FAILED) {
        reply(c, 200, json_pack("{s:s,s:s}", "status", "error", "error", rn->error));
    } else {
        json_t *o = json_pack("{s:s}", "status", "loading model");
        jsonx_set_f32(o, "progress", 0.0f);
        reply(c, 200, o);
    }
}

// ---------------------------------------------------------------------------
// /completion: a stream fed by the loop.

static void handle_completion(struct runner *rn, struct httpd_req *c, const json_t *body)
{
    struct err e = {0};
    int status;
    struct rreq *r = runner_completion_parse(rn, body, &status, &e);
    if (!r) {
        reply_error(c, status, e.msg);
        return;
    }
    r->stream = httpd_stream_start(c, 200, "application/x-ndjson", RUNNER_MAX_PENDING_BYTES);
    runner_loop_submit(rn->loop, r);  // the stream ends when the loop finishes r
    rreq_unref(r);
}

// ---------------------------------------------------------------------------
// /embedding: waits for the loop, then one JSON object.

static bool all_finite(const float *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return false;
    return true;
}

static void handle_embedding(struct runner *rn, struct httpd_req *c, const json_t *body)
{
    struct err e = {0};
    int status;
    struct rreq *r = runner_embedding_parse(rn, body, &status, &e);
    if (!r) {
        reply_error(c, status, e.msg);
        return;
    }
    r->fd = httpd_req_fd(c);
    runner_loop_submit(rn->loop, r);
    pthread_mutex_lock(&r->mu);
    while (!r->finished)
        pthread_cond_wait(&r->cv, &r->mu);
    r->fd = -1;
    pthread_mutex_unlock(&r->mu);
    if (r->error) {
        reply_error(c, 500, r->error);
    } else if (!r->embd) {
        reply_error(c, 500, "request cancelled");
    } else if (!all_finite(r->embd, r->n_embd)) {
        reply_error(c, 500, "embedding contains NaN or Inf values");
    } else {
        json_t *o = json_object();
        json_t *v = json_array();
        for (int i = 0; i < r->n_embd; i++)
            json_array_append_new(v, jsonx_real_f32(r->embd[i]));
        jsonx_set(o, "embedding", v);
        jsonx_set_int(o, "prompt_eval_count", r->n_evaluated);
        reply(c, 200, o);
    }
    rreq_unref(r);
}

// ---------------------------------------------------------------------------
// /tokenize, /detokenize

static void handle_tokenize(struct runner *rn, struct httpd_req *c, const json_t *body)
{
    struct err e = {0};
    const char *text;
    size_t len;
    bool add_special = false;
    if (jsonx_get_strn(body, "content", &text, &len, true, &e) < 0 ||
        jsonx_get_bool(body, "add_special", &add_special, false, &e) < 0) {
        reply_error(c, 400, e.msg);
        return;
    }
    struct tokenizer_ids ids = {0};
    if (tokenizer_encode(rn->tok, text, len, add_special, true, &ids, &e) < 0) {
        tokenizer_ids_deinit(&ids);
        reply_error(c, 400, e.msg);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < ids.len; i++)
        json_array_append_new(arr, json_integer(ids.data[i]));
    tokenizer_ids_deinit(&ids);
    json_t *o = json_object();
    jsonx_set(o, "tokens", arr);
    reply(c, 200, o);
}

static void handle_detokenize(struct runner *rn, struct httpd_req *c, const json_t *body)
{
    struct err e = {0};
    json_t *arr;
    if (jsonx_get_arr(body, "tokens", &arr, true, &e) < 0) {
        reply_error(c, 400, e.msg);
        return;
    }
    size_t n = json_array_size(arr);
    int32_t *ids = xcalloc(n ? n : 1, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        char what[32];
        snprintf(what, sizeof(what), "tokens[%zu]", i);
        if (jsonx_as_int(json_array_get(arr, i), what, &v, INT32_MIN, INT32_MAX, &e) < 0) {
            free(ids);
            reply_error(c, 400, e.msg);
            return;
        }
        ids[i] = (int32_t)v;
    }
    struct buf out;
    buf_init(&out, 0);
    int rc = tokenizer_decode(rn->tok, ids, n, true, true, &out, &e);
    free(ids);
    if (rc < 0) {
        reply_error(c, 400, e.msg);
    } else {
        json_t *o = json_object();
        jsonx_set_strn(o, "content", out.data ? out.data : "", out.len);
        reply(c, 200, o);
    }
    buf_deinit(&out);
}

// ---------------------------------------------------------------------------
// Routing

// A POST route's handler, taking the parsed body (GET /health has none).
struct post_route {
    void (*fn)(struct runner *rn, struct httpd_req *c, const json_t *body);
};
static const struct post_route completion = {handle_completion}, embedding = {handle_embedding},
                               tokenize = {handle_tokenize}, detokenize = {handle_detokenize};

static const struct httpd_route routes[] = {
    {"GET", "/health", NULL, false},
    {"POST", "/completion", &completion, false},
    {"POST", "/embedding", &embedding, false},
    {"POST", "/tokenize", &tokenize, false},
    {"POST", "/detokenize", &detokenize, false},
    {NULL, NULL, NULL, false},
};
static const struct httpd_route *const route_tables[] = {routes, NULL};

static void on_begin(struct httpd_req *c)
{
    struct buf *body = xcalloc(1, sizeof(*body));
    buf_init(body, 0);  // the wrapper enforces the limit
    httpd_req_set_data(c, body, body_free);
}

static void on_unrouted(struct httpd_req *c, int status)
{
    reply_error(c, status, status == 405 ? "method not allowed" : "not found");
}

static int on_body(struct httpd_req *c, const char *p, size_t n)
{
    return buf_append(httpd_req_data(c), p, n);
}

static void on_handle(struct httpd_req *c)
{
    struct runner *rn = httpd_ctx(c);
    const struct post_route *rt = httpd_req_route(c);
    if (!rt) {  // /health
        handle_health(rn, c);
        return;
    }
    int st = atomic_load(&rn->status);
    if (st != RUNNER_READY) {
        reply_error(c, 503, st == RUNNER_FAILED ? rn->error : "loading model");
        return;
    }
    struct buf *b = httpd_req_data(c);
    json_t *body = NULL;
    struct err e = {0};
    if (jsonx_parse_object(b->data ? b->data : "", b->len, &body, &e) < 0) {
        reply_error(c, 400, e.msg);
        return;
    }
    rt->fn(rn, c, body);
    json_decref(body);
}

int runner_http_start(struct runner *rn, uint16_t port, struct err *e)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct httpd_config hc = {
        .name = "runner",
        .addr = (const struct sockaddr *)&sa,
        .port = port,
        .routes = route_tables,
        .ctx = rn,
        .begin = on_begin,
        .unrouted = on_unrouted,
        .body = on_body,
        .handle = on_handle,
    };
    httpd_limits_load(&hc.limits, RUNNER_MAX_BODY_BYTES);
    struct err he = {0};
    if (httpd_start(&rn->httpd, &hc, &he) < 0)
        return err_set(e, ERR_IO, "listen tcp 127.0.0.1:%u: %s", port, he.msg);
    return 0;
}

void runner_http_stop(struct runner *rn)
{
    if (!httpd_stop(rn->httpd))
        log_warn("runner: stopped with request handlers still running");
    rn->httpd = NULL;
}

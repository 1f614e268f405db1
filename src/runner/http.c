// The runner's HTTP layer over libmicrohttpd: loopback only, one thread per
// connection, bodies buffered under a cap, JSON replies, and NDJSON streams
// whose reader blocks on the request's output buffer. The batching loop
// never touches a connection: it appends lines to the request, and polls
// the socket (the fd taken here) for hang-up.
#include "runner/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

struct conn {
    struct buf body;
    bool too_large;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, json_t *obj)
{
    struct buf b;
    buf_init(&b, 0);
    if (jsonx_dump(obj, 0, &b, NULL) < 0) {
        buf_reset(&b);
        buf_append_str(&b, "{\"error\":\"cannot encode response\"}");
        status = 500;
    }
    json_decref(obj);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(b.len, b.data ? b.data : (char *)"", MHD_RESPMEM_MUST_COPY);
    buf_deinit(&b);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, json_pack("{s:s}", "error", msg));
}

static int client_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

// ---------------------------------------------------------------------------
// /health

static enum MHD_Result handle_health(struct runner *rn, struct MHD_Connection *c)
{
    int st = atomic_load(&rn->status);
    if (st == RUNNER_READY)
        return reply(c, 200, json_pack("{s:s}", "status", "ok"));
    if (st == RUNNER_FAILED)
        return reply(c, 200, json_pack("{s:s,s:s}", "status", "error", "error", rn->error));
    json_t *o = json_pack("{s:s}", "status", "loading model");
    jsonx_set_f32(o, "progress", 0.0f);
    return reply(c, 200, o);
}

// ---------------------------------------------------------------------------
// /completion: a stream fed by the loop.

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct rreq *r = cls;
    pthread_mutex_lock(&r->mu);
    while (r->out.len == 0 && !r->finished)
        pthread_cond_wait(&r->cv, &r->mu);
    ssize_t n;
    if (r->out.len > 0) {
        size_t take = r->out.len < max ? r->out.len : max;
        memcpy(out, r->out.data, take);
        memmove(r->out.data, r->out.data + take, r->out.len - take);
        r->out.len -= take;
        r->out.data[r->out.len] = '\0';
        n = (ssize_t)take;
    } else if (atomic_load(&r->cancelled)) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

// The response is gone (finished, or the client hung up).
static void stream_free(void *cls)
{
    struct rreq *r = cls;
    pthread_mutex_lock(&r->mu);
    r->fd = -1;
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->cancelled, true);
    rreq_unref(r);
}

static enum MHD_Result handle_completion(struct runner *rn, struct MHD_Connection *c,
                                         const json_t *body)
{
    struct err e = {0};
    int status;
    struct rreq *r = runner_completion_parse(rn, body, &status, &e);
    if (!r)
        return reply_error(c, (unsigned)status, e.msg);
    r->fd = client_fd(c);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, r, stream_free);
    if (!resp) {
        rreq_unref(r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
    runner_loop_submit(rn->loop, r);  // the response's reference stays with stream_free
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
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

static enum MHD_Result handle_embedding(struct runner *rn, struct MHD_Connection *c,
                                        const json_t *body)
{
    struct err e = {0};
    int status;
    struct rreq *r = runner_embedding_parse(rn, body, &status, &e);
    if (!r)
        return reply_error(c, (unsigned)status, e.msg);
    r->fd = client_fd(c);
    runner_loop_submit(rn->loop, r);
    pthread_mutex_lock(&r->mu);
    while (!r->finished)
        pthread_cond_wait(&r->cv, &r->mu);
    r->fd = -1;
    pthread_mutex_unlock(&r->mu);
    enum MHD_Result ret;
    if (r->error) {
        ret = reply_error(c, 500, r->error);
    } else if (!r->embd) {
        ret = reply_error(c, 500, "request cancelled");
    } else if (!all_finite(r->embd, r->n_embd)) {
        ret = reply_error(c, 500, "embedding contains NaN or Inf values");
    } else {
        json_t *o = json_object();
        json_t *v = json_array();
        for (int i = 0; i < r->n_embd; i++)
            json_array_append_new(v, jsonx_real_f32(r->embd[i]));
        jsonx_set(o, "embedding", v);
        jsonx_set_int(o, "prompt_eval_count", r->n_evaluated);
        ret = reply(c, 200, o);
    }
    rreq_unref(r);
    return ret;
}

// ---------------------------------------------------------------------------
// /tokenize, /detokenize

static enum MHD_Result handle_tokenize(struct runner *rn, struct MHD_Connection *c,
                                       const json_t *body)
{
    struct err e = {0};
    const char *text;
    size_t len;
    bool add_special = false;
    if (jsonx_get_strn(body, "content", &text, &len, true, &e) < 0 ||
        jsonx_get_bool(body, "add_special", &add_special, false, &e) < 0)
        return reply_error(c, 400, e.msg);
    struct tokenizer_ids ids = {0};
    if (tokenizer_encode(rn->tok, text, len, add_special, true, &ids, &e) < 0) {
        tokenizer_ids_deinit(&ids);
        return reply_error(c, 400, e.msg);
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < ids.len; i++)
        json_array_append_new(arr, json_integer(ids.data[i]));
    tokenizer_ids_deinit(&ids);
    json_t *o = json_object();
    jsonx_set(o, "tokens", arr);
    return reply(c, 200, o);
}

static enum MHD_Result handle_detokenize(struct runner *rn, struct MHD_Connection *c,
                                         const json_t *body)
{
    struct err e = {0};
    json_t *arr;
    if (jsonx_get_arr(body, "tokens", &arr, true, &e) < 0)
        return reply_error(c, 400, e.msg);
    size_t n = json_array_size(arr);
    int32_t *ids = xcalloc(n ? n : 1, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        char what[32];
        snprintf(what, sizeof(what), "tokens[%zu]", i);
        if (jsonx_as_int(json_array_get(arr, i), what, &v, INT32_MIN, INT32_MAX, &e) < 0) {
            free(ids);
            return reply_error(c, 400, e.msg);
        }
        ids[i] = (int32_t)v;
    }
    struct buf out;
    buf_init(&out, 0);
    int rc = tokenizer_decode(rn->tok, ids, n, true, true, &out, &e);
    free(ids);
    enum MHD_Result ret;
    if (rc < 0) {
        ret = reply_error(c, 400, e.msg);
    } else {
        json_t *o = json_object();
        jsonx_set_strn(o, "content", out.data ? out.data : "", out.len);
        ret = reply(c, 200, o);
    }
    buf_deinit(&out);
    return ret;
}

// ---------------------------------------------------------------------------
// Routing

static enum MHD_Result route(struct runner *rn, struct MHD_Connection *c, const char *url,
                             const char *method, struct conn *cs)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/health") == 0)
        return get ? handle_health(rn, c) : reply_error(c, 405, "method not allowed");
    static const char *const posts[] = {"/completion", "/embedding", "/tokenize", "/detokenize"};
    int which = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(url, posts[i]) == 0)
            which = i;
    if (which < 0)
        return reply_error(c, 404, "not found");
    if (!post)
        return reply_error(c, 405, "method not allowed");
    int st = atomic_load(&rn->status);
    if (st != RUNNER_READY)
        return reply_error(c, 503, st == RUNNER_FAILED ? rn->error : "loading model");
    if (cs->too_large)
        return reply_error(c, 413, "request body too large");
    json_t *body = NULL;
    struct err e = {0};
    if (jsonx_parse_object(cs->body.data ? cs->body.data : "", cs->body.len, &body, &e) < 0)
        return reply_error(c, 400, e.msg);
    enum MHD_Result ret;
    switch (which) {
    case 0:
        ret = handle_completion(rn, c, body);
        break;
    case 1:
        ret = handle_embedding(rn, c, body);
        break;
    case 2:
        ret = handle_tokenize(rn, c, body);
        break;
    default:
        ret = handle_detokenize(rn, c, body);
        break;
    }
    json_decref(body);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct runner *rn = cls;
    struct conn *cs = *con_cls;
    if (!cs) {
        cs = xcalloc(1, sizeof(*cs));
        buf_init(&cs->body, RUNNER_MAX_BODY_BYTES);
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!cs->too_large && buf_append(&cs->body, upload_data, *upload_data_size) < 0)
            cs->too_large = true;
        *upload_data_size = 0;
        return MHD_YES;
    }
    return route(rn, c, url, method, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct conn *cs = *con_cls;
    if (!cs)
        return;
    buf_deinit(&cs->body);
    free(cs);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_debug("http: %s", msg);
}

int runner_http_start(struct runner *rn, uint16_t port, struct err *e)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    rn->daemon = MHD_start_daemon(
        flags, port, NULL, NULL, on_request, rn, MHD_OPTION_NOTIFY_COMPLETED, on_completed, rn,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
    if (!rn->daemon)
        return err_set(e, ERR_IO, "listen tcp 127.0.0.1:%u: %s", port,
                       errno == EADDRINUSE ? "bind: address already in use" : strerror(errno));
    return 0;
}

void runner_http_stop(struct runner *rn)
{
    if (rn->daemon)
        MHD_stop_daemon(rn->daemon);
    rn->daemon = NULL;
}

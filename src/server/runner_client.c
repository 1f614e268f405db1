// The runner protocol's client side, over the httpc wrapper.
#include "server/runner_client.h"

#include <stdlib.h>
#include <string.h>

#include "httpc/httpc.h"

#define RUNNER_MAX_BODY (64u * 1024 * 1024)

static const char *const json_headers[] = {"Content-Type: application/json", NULL};

// The request for port and path: a POST of body's JSON text (*text, owned by
// the caller) when body is given, else a GET. False when body cannot be dumped.
static bool runner_request(struct httpc_request *rq, char *url, size_t url_n, uint16_t port,
                           const char *path, const json_t *body, char **text)
{
    snprintf(url, url_n, "http://127.0.0.1:%u%s", port, path);
    *rq = (struct httpc_request){.url = url, .loopback = true};
    *text = NULL;
    if (!body)
        return true;
    *text = jsonx_dumps(body, JSONX_NO_HTML_ESCAPE);
    if (!*text)
        return false;
    rq->method = "POST";
    rq->body = *text;
    rq->body_len = strlen(*text);
    rq->headers = json_headers;
    return true;
}

// The "error" string of a JSON error body, or the body itself.
static void error_message(const struct buf *b, char *out, size_t n)
{
    json_t *v = NULL;
    const char *msg = NULL;
    if (b->len && jsonx_parse(b->data, b->len, &v, NULL) == 0)
        msg = json_string_value(json_object_get(v, "error"));
    snprintf(out, n, "%s", msg ? msg : buf_cstr(b));
    json_decref(v);
}

// A runner's error answer: ERR_INVALID for 400, else ERR_INTERNAL, with its message.
static int status_error(long code, const struct buf *body, struct err *e)
{
    char msg[ERR_MSG_MAX];
    error_message(body, msg, sizeof(msg));
    return err_set(e, code == 400 ? ERR_INVALID : ERR_INTERNAL, "%s", msg);
}

int runner_http_json(uint16_t port, const char *path, const json_t *body, int timeout_ms,
                     long *status, json_t **out, struct err *e)
{
    struct httpc_request rq;
    char url[128], *text;
    if (!runner_request(&rq, url, sizeof(url), port, path, body, &text))
        return err_set(e, ERR_NOMEM, NULL);
    struct buf b;
    buf_init(&b, RUNNER_MAX_BODY);
    rq.timeout_ms = timeout_ms;
    rq.on_data = httpc_collect;
    rq.ctx = &b;
    struct httpc_result res;
    int rc = 0;
    if (httpc_perform(&rq, &res) < 0) {
        rc = err_set(e, res.fail == HTTPC_NOMEM ? ERR_NOMEM : ERR_NETWORK, "%s", res.msg);
    } else {
        if (status)
            *status = res.status;
        if (res.status >= 400)
            rc = status_error(res.status, &b, e);
        else if (out)
            rc = jsonx_parse(b.data ? b.data : "", b.len, out, e);
    }
    httpc_result_deinit(&res);
    buf_deinit(&b);
    free(text);
    return rc;
}

struct stream_ctx {
    runner_line_fn fn;
    void *ctx;
    runner_cancel_fn cancel;
    void *cancel_ctx;
    bool stopped;    // fn or cancel asked to stop
    bool saw_final;  // a line with "done" or "error" arrived
    int line_rc;
    struct err *e;
};

// One NDJSON line of a 2xx answer: parsed and handed to the caller's fn.
static bool stream_line(void *arg, const char *line, size_t n)
{
    struct stream_ctx *sc = arg;
    json_t *v = NULL;
    if (jsonx_parse(line, n, &v, sc->e) < 0) {
        sc->stopped = true;
        sc->line_rc = ERR_FORMAT;
        return false;
    }
    if (json_object_get(v, "done") || json_object_get(v, "error"))
        sc->saw_final = true;
    int rc = sc->fn(sc->ctx, v);
    json_decref(v);
    if (rc < 0) {
        sc->stopped = true;
        sc->line_rc = rc;
        return false;
    }
    return true;
}

static bool stream_progress(void *arg, uint64_t down, uint64_t up)
{
    (void)down, (void)up;
    struct stream_ctx *sc = arg;
    if (sc->cancel && sc->cancel(sc->cancel_ctx)) {
        sc->stopped = true;
        sc->line_rc = ERR_CANCELLED;
        return false;
    }
    return true;
}

// How the stream ended, as the error the caller reports.
static int stream_result(const struct stream_ctx *sc, const struct httpc_lines *lines,
                         const struct httpc_result *res, struct err *e)
{
    if (sc->stopped) {
        int rc = sc->line_rc < 0 ? sc->line_rc : ERR_CANCELLED;
        if (rc == ERR_CANCELLED)
            err_set(e, ERR_CANCELLED, NULL);
        return rc;
    }
    if (res->fail != HTTPC_OK)
        return err_set(e, res->fail == HTTPC_NOMEM ? ERR_NOMEM : ERR_NETWORK, "%s", res->msg);
    if (lines->status < 200 || lines->status >= 300)
        return status_error(res->status, lines->err_body, e);
    if (!sc->saw_final)
        return err_set(e, ERR_NETWORK,
                       "runner closed the connection before the end of the response");
    return 0;
}

int runner_http_stream(uint16_t port, const char *path, const json_t *body, runner_line_fn fn,
                       void *ctx, runner_cancel_fn cancel, void *cancel_ctx, struct err *e)
{
    struct httpc_request rq;
    char url[128], *text;
    if (!runner_request(&rq, url, sizeof(url), port, path, body, &text))
        return err_set(e, ERR_NOMEM, NULL);
    struct stream_ctx sc = {
        .fn = fn, .ctx = ctx, .cancel = cancel, .cancel_ctx = cancel_ctx, .e = e};
    struct buf line, err_body;
    buf_init(&line, 64u << 20);
    buf_init(&err_body, 1u << 20);
    struct httpc_lines lines = {
        .fn = stream_line, .ctx = &sc, .line = &line, .err_body = &err_body};
    rq.on_data = httpc_lines_feed;
    rq.ctx = &lines;
    rq.on_progress = stream_progress;
    rq.progress_ctx = &sc;
    struct httpc_result res;
    httpc_perform(&rq, &res);
    int rc = stream_result(&sc, &lines, &res, e);
    httpc_result_deinit(&res);
    buf_deinit(&line);
    buf_deinit(&err_body);
    free(text);
    return rc;
}

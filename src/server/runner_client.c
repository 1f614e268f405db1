// libcurl client for the runner protocol.
#include "server/runner_client.h"

#include <curl/curl.h>
#include <string.h>

#define RUNNER_MAX_BODY (64u * 1024 * 1024)

static size_t collect(char *p, size_t size, size_t n, void *ctx)
{
    return buf_append(ctx, p, size * n) == 0 ? size * n : 0;
}

static CURL *easy(uint16_t port, const char *path, const json_t *body, char **body_text,
                  struct curl_slist **headers)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    *body_text = NULL;
    *headers = NULL;
    if (body) {
        *body_text = jsonx_dumps(body, JSONX_NO_HTML_ESCAPE);
        if (!*body_text) {
            curl_easy_cleanup(h);
            return NULL;
        }
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, *body_text);
        *headers = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
    }
    return h;
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

int runner_http_json(uint16_t port, const char *path, const json_t *body, int timeout_ms,
                     long *status, json_t **out, struct err *e)
{
    char *text;
    struct curl_slist *headers;
    CURL *h = easy(port, path, body, &text, &headers);
    if (!h)
        return err_set(e, ERR_NOMEM, NULL);
    struct buf b;
    buf_init(&b, RUNNER_MAX_BODY);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    long code = 0;
    if (cc != CURLE_OK) {
        rc = err_set(e, ERR_NETWORK, "%s", curl_easy_strerror(cc));
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (status)
            *status = code;
        if (code >= 400) {
            char msg[ERR_MSG_MAX];
            error_message(&b, msg, sizeof(msg));
            rc = err_set(e, code == 400 ? ERR_INVALID : ERR_INTERNAL, "%s", msg);
        } else if (out) {
            rc = jsonx_parse(b.data ? b.data : "", b.len, out, e);
        }
    }
    buf_deinit(&b);
    free(text);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return rc;
}

struct stream_ctx {
    CURL *h;
    struct buf line;
    struct buf err_body;
    bool checked, ok;
    runner_line_fn fn;
    void *ctx;
    runner_cancel_fn cancel;
    void *cancel_ctx;
    bool stopped;    // fn or cancel asked to stop
    bool saw_final;  // a line with "done" or "error" arrived
    int line_rc;
    struct err *e;
};

static size_t stream_write(char *p, size_t size, size_t n, void *arg)
{
    struct stream_ctx *sc = arg;
    size_t total = size * n;
    if (!sc->checked) {
        long code = 0;
        curl_easy_getinfo(sc->h, CURLINFO_RESPONSE_CODE, &code);
        sc->ok = code >= 200 && code < 300;
        sc->checked = true;
    }
    if (!sc->ok)
        return buf_append(&sc->err_body, p, total) == 0 ? total : 0;
    for (size_t i = 0; i < total; i++) {
        if (p[i] != '\n') {
            if (buf_append_char(&sc->line, p[i]) < 0)
                return 0;
            continue;
        }
        if (!sc->line.len)
            continue;
        json_t *v = NULL;
        if (jsonx_parse(sc->line.data, sc->line.len, &v, sc->e) < 0) {
            sc->stopped = true;
            sc->line_rc = ERR_FORMAT;
            return 0;
        }
        if (json_object_get(v, "done") || json_object_get(v, "error"))
            sc->saw_final = true;
        int rc = sc->fn(sc->ctx, v);
        json_decref(v);
        buf_reset(&sc->line);
        if (rc < 0) {
            sc->stopped = true;
            sc->line_rc = rc;
            return 0;
        }
    }
    return total;
}

static int stream_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                           curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct stream_ctx *sc = arg;
    if (sc->cancel && sc->cancel(sc->cancel_ctx)) {
        sc->stopped = true;
        sc->line_rc = ERR_CANCELLED;
        return 1;
    }
    return 0;
}

int runner_http_stream(uint16_t port, const char *path, const json_t *body, runner_line_fn fn,
                       void *ctx, runner_cancel_fn cancel, void *cancel_ctx, struct err *e)
{
    char *text;
    struct curl_slist *headers;
    CURL *h = easy(port, path, body, &text, &headers);
    if (!h)
        return err_set(e, ERR_NOMEM, NULL);
    struct stream_ctx sc = {
        .h = h, .fn = fn, .ctx = ctx, .cancel = cancel, .cancel_ctx = cancel_ctx, .e = e};
    buf_init(&sc.line, 64u << 20);
    buf_init(&sc.err_body, 1u << 20);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sc);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stream_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &sc);
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    if (sc.stopped) {
        rc = sc.line_rc < 0 ? sc.line_rc : ERR_CANCELLED;
        if (rc == ERR_CANCELLED)
            err_set(e, ERR_CANCELLED, NULL);
    } else if (cc != CURLE_OK) {
        rc = err_set(e, ERR_NETWORK, "%s", curl_easy_strerror(cc));
    } else if (!sc.ok) {
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        char msg[ERR_MSG_MAX];
        error_message(&sc.err_body, msg, sizeof(msg));
        rc = err_set(e, code == 400 ? ERR_INVALID : ERR_INTERNAL, "%s", msg);
    } else if (!sc.saw_final) {
        rc = err_set(e, ERR_NETWORK, "runner closed the connection before the end of the response");
    }
    buf_deinit(&sc.line);
    buf_deinit(&sc.err_body);
    free(text);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return rc;
}

// The libcurl wrapper: one easy handle per request, set from the request
// struct, with our callbacks in front of libcurl's.
#include "httpc/httpc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

// The transfer's state, shared by the callbacks.
struct xfer {
    const struct httpc_request *rq;
    CURL *h;
    bool stopped;
};

static long status_of(CURL *h)
{
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct xfer *x = ctx;
    size_t len = size * n;
    if (!x->rq->on_data)
        return len;
    if (!x->rq->on_data(x->rq->ctx, status_of(x->h), p, len)) {
        x->stopped = true;
        return 0;
    }
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct xfer *x = ctx;
    size_t len = size * n;
    if (!x->rq->on_header(x->rq->ctx, p, len)) {
        x->stopped = true;
        return 0;
    }
    return len;
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal;
    struct xfer *x = ctx;
    void *pctx = x->rq->progress_ctx ? x->rq->progress_ctx : x->rq->ctx;
    return x->rq->on_progress(pctx, (uint64_t)dlnow, (uint64_t)ulnow) ? 0 : 1;
}

static size_t on_read(char *out, size_t size, size_t n, void *ctx)
{
    struct xfer *x = ctx;
    size_t got = x->rq->read(x->rq->read_ctx ? x->rq->read_ctx : x->rq->ctx, out, size * n);
    return got == HTTPC_READ_ABORT ? CURL_READFUNC_ABORT : got;
}

static void set_connection(CURL *h, const struct httpc_request *rq)
{
    curl_easy_setopt(h, CURLOPT_URL, rq->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (rq->user_agent)
        curl_easy_setopt(h, CURLOPT_USERAGENT, rq->user_agent);
    if (rq->loopback)
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    if (rq->connect_timeout_ms)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, rq->connect_timeout_ms);
    if (rq->timeout_ms)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
    if (rq->follow_redirects) {
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
    }
    if (rq->large_buffer)
        curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
}

// The method and what it sends: nothing for HEAD and GET without a body, a
// streamed body, or one in memory.
static void set_method(CURL *h, const struct httpc_request *rq, struct xfer *x)
{
    const char *m = rq->method ? rq->method : "GET";
    if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        return;
    }
    if (rq->read) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, x);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->read_size);
    } else if (rq->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    if (strcmp(m, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
}

static void set_callbacks(CURL *h, const struct httpc_request *rq, struct xfer *x)
{
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    if (rq->on_header) {
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    }
    if (rq->on_progress) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    }
}

static enum httpc_fail fail_of(CURLcode cc, const struct xfer *x)
{
    switch (cc) {
    case CURLE_OK:
        return HTTPC_OK;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        return HTTPC_CONNECT;
    case CURLE_WRITE_ERROR:
        return x->stopped ? HTTPC_STOPPED : HTTPC_OTHER;
    case CURLE_ABORTED_BY_CALLBACK:
        return HTTPC_ABORTED;
    case CURLE_TOO_MANY_REDIRECTS:
        return HTTPC_REDIRECTS;
    default:
        return HTTPC_OTHER;
    }
}

void httpc_init(void)
{
    pthread_once(&global_once, global_init);
}

int httpc_perform(const struct httpc_request *rq, struct httpc_result *res)
{
    httpc_init();
    memset(res, 0, sizeof(*res));
    res->msg = "";
    CURL *h = curl_easy_init();
    if (!h) {
        res->fail = HTTPC_NOMEM;
        res->msg = "cannot create an HTTP handle";
        return -1;
    }
    struct xfer x = {.rq = rq, .h = h};
    struct curl_slist *hl = NULL;
    for (const char *const *p = rq->headers; p && *p; p++)
        hl = curl_slist_append(hl, *p);
    if (hl)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    set_connection(h, rq);
    set_method(h, rq, &x);
    set_callbacks(h, rq, &x);
    CURLcode cc = curl_easy_perform(h);
    res->status = status_of(h);
    char *eff = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
    res->effective_url = xstrdup(eff ? eff : rq->url);
    res->fail = fail_of(cc, &x);
    if (cc != CURLE_OK)
        res->msg = curl_easy_strerror(cc);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return res->fail == HTTPC_OK ? 0 : -1;
}

void httpc_result_deinit(struct httpc_result *res)
{
    free(res->effective_url);
    memset(res, 0, sizeof(*res));
}

char *httpc_resolve_url(const char *base, const char *loc)
{
    CURLU *u = curl_url();
    char *out = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_URL, loc, 0) == CURLUE_OK) {
        char *s = NULL;
        if (curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
            out = xstrdup(s);
            curl_free(s);
        }
    }
    curl_url_cleanup(u);
    return out ? out : xstrdup(loc);
}

bool httpc_collect(void *b, long status, const char *p, size_t n)
{
    (void)status;
    return buf_append(b, p, n) == 0;
}

bool httpc_lines_feed(void *arg, long status, const char *p, size_t n)
{
    struct httpc_lines *l = arg;
    if (!l->status)
        l->status = status;
    if (l->status < 200 || l->status >= 300) {
        if (l->err_body && buf_append(l->err_body, p, n) < 0) {
            l->too_long = true;
            return false;
        }
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\n') {
            if (buf_append_char(l->line, p[i]) < 0) {
                l->too_long = true;
                return false;
            }
            continue;
        }
        if (l->line->len && !l->fn(l->ctx, l->line->data, l->line->len))
            return false;
        buf_reset(l->line);
    }
    return true;
}

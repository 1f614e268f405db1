// HTTP exchanges with a registry over the httpc wrapper: capped response bodies,
// the headers the protocol needs, cancellation and stall detection, and the
// "request with auth retry" of registry.md §1.1. Credentials are attached
// only to requests whose host is the registry's own; curl's redirect
// following drops a custom Authorization header when the host changes, and
// the one redirect we resolve by hand (the data URL) never carries them
// across hosts either.
#include "registry/internal.h"

#include "httpc/httpc.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void reg_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

// Cancel flags are set by one thread and polled by others: read atomically.
bool reg_cancelled(const volatile int *cancel)
{
    return cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE);
}

void reg_cancel_set(volatile int *cancel)
{
    __atomic_store_n(cancel, 1, __ATOMIC_RELEASE);
}

void reg_rsp_init(struct reg_rsp *r)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->body, REG_MAX_SMALL_BODY);
    r->content_length = -1;
}

static void rsp_clear_headers(struct reg_rsp *r)
{
    free(r->location);
    free(r->upload_location);
    free(r->www_auth);
    free(r->content_digest);
    free(r->content_range);
    r->location = r->upload_location = r->www_auth = r->content_digest = r->content_range = NULL;
    r->content_length = -1;
}

void reg_rsp_deinit(struct reg_rsp *r)
{
    rsp_clear_headers(r);
    free(r->effective_url);
    buf_deinit(&r->body);
    memset(r, 0, sizeof(*r));
}

bool reg_url_host(const char *url, char *out, size_t n)
{
    const char *p = strstr(url, "://");
    if (!p)
        return false;
    p += 3;
    size_t len = strcspn(p, "/?#");
    const char *at = memchr(p, '@', len);  // drop userinfo
    if (at) {
        len -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    if (len == 0 || len >= n)
        return false;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)((p[i] >= 'A' && p[i] <= 'Z') ? p[i] + 32 : p[i]);
    out[len] = '\0';
    return true;
}

struct xfer {
    const struct reg_rq *rq;
    struct reg_rsp *rsp;
    const volatile int *cancel;
    int64_t last_move_ns;
    uint64_t last_dl, last_ul;
    bool too_large;
    bool stopped;  // body deliberately not read
    bool sink_failed;
};

static bool on_body(void *ctx, long status, const char *p, size_t len)
{
    struct xfer *x = ctx;
    if (x->rq->stop_body) {
        x->stopped = true;
        return false;
    }
    if (x->rq->sink) {
        if (!x->rq->sink(x->rq->sink_ctx, status, p, len)) {
            x->sink_failed = true;
            return false;
        }
        return true;
    }
    if (buf_append(&x->rsp->body, p, len) < 0) {
        x->too_large = true;
        return false;
    }
    return true;
}

static char *header_value(const char *line, size_t len, const char *name)
{
    size_t nl = strlen(name);
    if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
        return NULL;
    const char *v = line + nl + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    return xstrndup(v, (size_t)(end - v));
}

static void set_header(char **slot, char *v)
{
    if (!v)
        return;
    free(*slot);
    *slot = v;
}

static bool on_header(void *ctx, const char *p, size_t len)
{
    struct xfer *x = ctx;
    struct reg_rsp *r = x->rsp;
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        rsp_clear_headers(r);  // a new response (after a redirect or 100)
        return true;
    }
    set_header(&r->location, header_value(p, len, "Location"));
    set_header(&r->upload_location, header_value(p, len, "Docker-Upload-Location"));
    set_header(&r->www_auth, header_value(p, len, "WWW-Authenticate"));
    set_header(&r->content_digest, header_value(p, len, "Docker-Content-Digest"));
    set_header(&r->content_range, header_value(p, len, "Content-Range"));
    char *cl = header_value(p, len, "Content-Length");
    if (cl) {
        int64_t v;
        if (str_to_i64(cl, 0, INT64_MAX, &v, NULL) == 0)
            r->content_length = v;
        free(cl);
    }
    return true;
}

static bool on_progress(void *ctx, uint64_t dlnow, uint64_t ulnow)
{
    struct xfer *x = ctx;
    if (reg_cancelled(x->cancel))
        return false;
    int64_t now = time_monotonic_ns();
    if (x->rq->on_xfer && (dlnow != x->last_dl || ulnow != x->last_ul))
        x->rq->on_xfer(x->rq->xfer_ctx, dlnow, ulnow);
    if (dlnow != x->last_dl || ulnow != x->last_ul) {
        x->last_dl = dlnow;
        x->last_ul = ulnow;
        x->last_move_ns = now;
    } else if (x->rq->stall_ms > 0 && now - x->last_move_ns > (int64_t)x->rq->stall_ms * 1000000) {
        x->rsp->stalled = true;
        return false;
    }
    return true;
}

struct file_src {
    int fd;
    uint64_t off, left;
    EVP_MD_CTX *md5;
};

static size_t on_read(void *ctx, char *out, size_t want)
{
    struct file_src *s = ctx;
    if (want > s->left)
        want = (size_t)s->left;
    if (want == 0)
        return 0;
    ssize_t got = pread(s->fd, out, want, (off_t)s->off);
    if (got <= 0)
        return HTTPC_READ_ABORT;
    if (s->md5)
        EVP_DigestUpdate(s->md5, out, (size_t)got);
    s->off += (uint64_t)got;
    s->left -= (uint64_t)got;
    return (size_t)got;
}

// The request's own headers, then "Expect:" (no 100-continue round trip) and, unless the
// request opts out, the Authorization line: a NULL-terminated array (free it, and
// *auth_line, after the transfer).
static const char **request_headers(const struct reg_rq *rq, const char *auth, char **auth_line)
{
    size_t n = 0;
    for (const char *const *p = rq->headers; p && *p; p++)
        n++;
    const char **hl = xcalloc(n + 3, sizeof(*hl));
    for (size_t i = 0; i < n; i++)
        hl[i] = rq->headers[i];
    hl[n++] = "Expect:";
    *auth_line = NULL;
    if (auth && !rq->no_auth) {
        *auth_line = xasprintf("Authorization: %s", auth);
        hl[n++] = *auth_line;
    }
    return hl;
}

// The wrapper's request for rq: headers, timeouts, redirects, the body (in memory, or a
// file range streamed through *src, which must outlive the transfer) and our callbacks.
static struct httpc_request http_request(const struct reg_rq *rq, const char *const *headers,
                                         struct file_src *src, struct xfer *x)
{
    struct httpc_request h = {
        .method = rq->method,
        .url = rq->url,
        .headers = headers,
        .user_agent = REG_USER_AGENT,
        .timeout_ms = rq->timeout_s * 1000,
        .connect_timeout_ms = 30000,
        .follow_redirects = rq->follow,
        .large_buffer = true,
        .on_header = on_header,
        .on_data = on_body,
        .on_progress = on_progress,
        .ctx = x,
    };
    bool sends = strcmp(rq->method, "HEAD") != 0 && strcmp(rq->method, "GET") != 0;
    if (sends && rq->body_fd > 0) {
        *src = (struct file_src){rq->body_fd, rq->body_off, rq->body_size, rq->md5};
        h.read = on_read;
        h.read_ctx = src;
        h.read_size = (int64_t)rq->body_size;
    } else if (sends) {
        h.body = rq->body ? (const char *)rq->body : "";
        h.body_len = rq->body_len;
    }
    return h;
}

// Status and final URL into rsp, with Location headers made absolute against that URL.
static void read_result(struct httpc_result *res, struct reg_rsp *rsp)
{
    rsp->status = res->status;
    free(rsp->effective_url);
    rsp->effective_url = res->effective_url;
    res->effective_url = NULL;
    if (rsp->location) {
        char *abs = httpc_resolve_url(rsp->effective_url, rsp->location);
        free(rsp->location);
        rsp->location = abs;
    }
    if (rsp->upload_location) {
        char *abs = httpc_resolve_url(rsp->effective_url, rsp->upload_location);
        free(rsp->upload_location);
        rsp->upload_location = abs;
    }
}

// Turns a failed transfer into an error, naming the most specific cause first. A stop we
// asked for (the body callback stopped on purpose) is success.
static int transfer_error(const struct httpc_result *res, const struct xfer *x,
                          const struct reg_rq *rq, const volatile int *cancel, size_t cap,
                          struct err *e)
{
    if (res->fail == HTTPC_OK || (res->fail == HTTPC_STOPPED && x->stopped))
        return 0;
    if (reg_cancelled(cancel))
        return err_set(e, ERR_CANCELLED, "context canceled");
    if (x->too_large)
        return err_set(e, ERR_TOO_LARGE, "%s %s: response body larger than %zu bytes", rq->method,
                       rq->url, cap);
    if (x->rsp->stalled)
        return err_set(e, ERR_TIMEOUT, "%s %s: download stalled", rq->method, rq->url);
    if (x->sink_failed)
        return ERR_IO;  // the sink set its own error
    if (res->fail == HTTPC_NOMEM)
        return err_set(e, ERR_NOMEM, "cannot create HTTP handle");
    if (res->fail == HTTPC_REDIRECTS)
        return err_set(e, ERR_NETWORK, "%s %s: stopped after 10 redirects", rq->method, rq->url);
    return err_set(e, ERR_NETWORK, "%s %s: %s", rq->method, rq->url, res->msg);
}

int reg_http(const struct reg_rq *rq, const char *auth, const volatile int *cancel,
             struct reg_rsp *rsp, struct err *e)
{
    size_t cap = rq->max_body ? rq->max_body : REG_MAX_SMALL_BODY;
    buf_deinit(&rsp->body);
    buf_init(&rsp->body, cap);
    rsp_clear_headers(rsp);
    rsp->status = 0;
    rsp->stalled = false;
    struct xfer x = {.rq = rq, .rsp = rsp, .cancel = cancel, .last_move_ns = time_monotonic_ns()};
    char *auth_line;
    const char **hl = request_headers(rq, auth, &auth_line);
    struct file_src src = {0};
    struct httpc_request h = http_request(rq, hl, &src, &x);
    struct httpc_result res;
    httpc_perform(&h, &res);
    read_result(&res, rsp);
    int rc = transfer_error(&res, &x, rq, cancel, cap, e);
    httpc_result_deinit(&res);
    free(hl);
    free(auth_line);
    return rc;
}

// ---------------------------------------------------------------------------
// Sessions

void reg_session_init(struct reg_session *s, struct registry *reg, const struct store_name *n,
                      bool insecure)
{
    memset(s, 0, sizeof(*s));
    s->reg = reg;
    snprintf(s->base, sizeof(s->base), "%s://%s", insecure ? "http" : "https", n->host);
    size_t i = 0;
    for (const char *p = n->host; *p && i + 1 < sizeof(s->host); p++)
        s->host[i++] = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
    s->host[i] = '\0';
    // OCI registries reject upper-case repository names (registry.md §2).
    snprintf(s->repo, sizeof(s->repo), "%s/%s", n->ns, n->model);
    for (char *p = s->repo; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p + 32);
}

void reg_session_deinit(struct reg_session *s)
{
    free(s->token);
    free(s->basic);
    s->token = s->basic = NULL;
}

const char *reg_session_auth_for(const struct reg_session *s, const char *url)
{
    char host[STORE_HOST_MAX + 1];
    if (!reg_url_host(url, host, sizeof(host)) || strcmp(host, s->host) != 0)
        return NULL;
    return s->token ? s->token : s->basic;
}

static void body_text(const struct reg_rsp *rsp, char *out, size_t n)
{
    size_t len = rsp->body.len;
    while (len && (rsp->body.data[len - 1] == '\n' || rsp->body.data[len - 1] == '\r'))
        len--;
    if (len >= n)
        len = n - 1;
    if (len)
        memcpy(out, rsp->body.data, len);
    out[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)out[i] < 0x20)
            out[i] = ' ';
}

int reg_session_do(struct reg_session *s, const struct reg_rq *rq, struct reg_rsp *rsp,
                   struct err *e)
{
    for (int attempt = 0;; attempt++) {
        int rc = reg_http(rq, reg_session_auth_for(s, rq->url), s->cancel, rsp, e);
        if (rc < 0)
            return rc;
        if (rsp->status == 401) {
            if (attempt > 0 || rq->no_auth)
                return err_set(e, ERR_UNAUTHORIZED, "unauthorized: access denied");
            rc = reg_auth_challenge(s, rsp->www_auth, rq->url, e);
            if (rc < 0)
                return rc;
            continue;
        }
        if (rsp->status == 404)
            return err_set(e, ERR_NOT_FOUND, "file does not exist");
        if (rsp->status >= 400) {
            char text[200];
            body_text(rsp, text, sizeof(text));
            if (text[0])
                return err_set(e, rsp->status >= 500 ? ERR_NETWORK : ERR_INVALID, "%ld: %s",
                               rsp->status, text);
            return err_set(e, rsp->status >= 500 ? ERR_NETWORK : ERR_INVALID, "%ld", rsp->status);
        }
        return 0;
    }
}

void reg_progress(const struct registry_opts *o, const char *status, const char *digest,
                  uint64_t total, uint64_t completed)
{
    if (!o || !o->progress)
        return;
    struct store_progress p = {
        .status = status, .digest = digest, .total = total, .completed = completed};
    o->progress(o->progress_ctx, &p);
}

// HTTP exchanges with a registry over libcurl: capped response bodies,
// the headers the protocol needs, cancellation and stall detection, and the
// "request with auth retry" of registry.md §1.1. Credentials are attached
// only to requests whose host is the registry's own; curl's redirect
// following drops a custom Authorization header when the host changes, and
// the one redirect we resolve by hand (the data URL) never carries them
// across hosts either.
#include "registry/internal.h"

#include <curl/curl.h>
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
    CURL *h;
    const volatile int *cancel;
    int64_t last_move_ns;
    curl_off_t last_dl, last_ul;
    bool too_large;
    bool stopped;  // body deliberately not read
    bool sink_failed;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct xfer *x = ctx;
    size_t len = size * n;
    if (x->rq->stop_body) {
        x->stopped = true;
        return 0;
    }
    if (x->rq->sink) {
        long status = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
        if (!x->rq->sink(x->rq->sink_ctx, status, p, len)) {
            x->sink_failed = true;
            return 0;
        }
        return len;
    }
    if (buf_append(&x->rsp->body, p, len) < 0) {
        x->too_large = true;
        return 0;
    }
    return len;
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

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct xfer *x = ctx;
    size_t len = size * n;
    struct reg_rsp *r = x->rsp;
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        rsp_clear_headers(r);  // a new response (after a redirect or 100)
        return len;
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
    return len;
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal;
    struct xfer *x = ctx;
    if (reg_cancelled(x->cancel))
        return 1;
    int64_t now = time_monotonic_ns();
    if (x->rq->on_xfer && (dlnow != x->last_dl || ulnow != x->last_ul))
        x->rq->on_xfer(x->rq->xfer_ctx, (uint64_t)dlnow, (uint64_t)ulnow);
    if (dlnow != x->last_dl || ulnow != x->last_ul) {
        x->last_dl = dlnow;
        x->last_ul = ulnow;
        x->last_move_ns = now;
    } else if (x->rq->stall_ms > 0 && now - x->last_move_ns > (int64_t)x->rq->stall_ms * 1000000) {
        x->rsp->stalled = true;
        return 1;
    }
    return 0;
}

struct file_src {
    int fd;
    uint64_t off, left;
    EVP_MD_CTX *md5;
};

static size_t on_read(char *out, size_t size, size_t n, void *ctx)
{
    struct file_src *s = ctx;
    size_t want = size * n;
    if (want > s->left)
        want = (size_t)s->left;
    if (want == 0)
        return 0;
    ssize_t got = pread(s->fd, out, want, (off_t)s->off);
    if (got <= 0)
        return CURL_READFUNC_ABORT;
    if (s->md5)
        EVP_DigestUpdate(s->md5, out, (size_t)got);
    s->off += (uint64_t)got;
    s->left -= (uint64_t)got;
    return (size_t)got;
}

// Resolves a Location value against the URL it came from.
static char *resolve_url(const char *base, const char *loc)
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

// The request's own headers, then "Expect:" (no 100-continue round trip) and, unless the
// request opts out, the Authorization line. *auth_line owns that line's text.
static struct curl_slist *request_headers(const struct reg_rq *rq, const char *auth,
                                          char **auth_line)
{
    struct curl_slist *hl = NULL;
    for (const char *const *p = rq->headers; p && *p; p++)
        hl = curl_slist_append(hl, *p);
    hl = curl_slist_append(hl, "Expect:");
    *auth_line = NULL;
    if (auth && !rq->no_auth) {
        *auth_line = xasprintf("Authorization: %s", auth);
        hl = curl_slist_append(hl, *auth_line);
    }
    return hl;
}

// Connection-level options: URL, protocols, timeouts and redirects.
static void set_connection(CURL *h, const struct reg_rq *rq)
{
    curl_easy_setopt(h, CURLOPT_URL, rq->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, REG_USER_AGENT);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    if (rq->timeout_s)
        curl_easy_setopt(h, CURLOPT_TIMEOUT, rq->timeout_s);
    if (rq->follow) {
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
        // Keep the method on 301/302/303 (blob GETs only follow GETs anyway).
        curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
    }
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
}

// The method and what it sends: nothing for HEAD and GET, a file range streamed through
// *src (which must outlive the transfer), or an in-memory body.
static void set_method(CURL *h, const struct reg_rq *rq, struct file_src *src)
{
    if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(rq->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        if (rq->body_fd > 0) {
            *src = (struct file_src){rq->body_fd, rq->body_off, rq->body_size, rq->md5};
            curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(h, CURLOPT_READDATA, src);
            curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_size);
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        } else {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? (const char *)rq->body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
        }
    }
}

// Our header, body and progress callbacks, all sharing the transfer state *x.
static void set_callbacks(CURL *h, struct curl_slist *hl, struct xfer *x)
{
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
}

// Status and final URL into rsp, with Location headers made absolute against that URL.
static void read_result(CURL *h, const struct reg_rq *rq, struct reg_rsp *rsp)
{
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rsp->status);
    char *eff = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
    free(rsp->effective_url);
    rsp->effective_url = xstrdup(eff ? eff : rq->url);
    if (rsp->location) {
        char *abs = resolve_url(rsp->effective_url, rsp->location);
        free(rsp->location);
        rsp->location = abs;
    }
    if (rsp->upload_location) {
        char *abs = resolve_url(rsp->effective_url, rsp->upload_location);
        free(rsp->upload_location);
        rsp->upload_location = abs;
    }
}

// Turns a failed transfer into an error, naming the most specific cause first. A write
// error we asked for (the body callback stopped on purpose) is success.
static int transfer_error(CURLcode cc, const struct xfer *x, const struct reg_rq *rq,
                          const volatile int *cancel, size_t cap, struct err *e)
{
    if (cc == CURLE_OK || (cc == CURLE_WRITE_ERROR && x->stopped))
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
    if (cc == CURLE_TOO_MANY_REDIRECTS)
        return err_set(e, ERR_NETWORK, "%s %s: stopped after 10 redirects", rq->method, rq->url);
    return err_set(e, ERR_NETWORK, "%s %s: %s", rq->method, rq->url, curl_easy_strerror(cc));
}

int reg_http(const struct reg_rq *rq, const char *auth, const volatile int *cancel,
             struct reg_rsp *rsp, struct err *e)
{
    CURL *h = curl_easy_init();
    if (!h)
        return err_set(e, ERR_NOMEM, "cannot create HTTP handle");
    size_t cap = rq->max_body ? rq->max_body : REG_MAX_SMALL_BODY;
    buf_deinit(&rsp->body);
    buf_init(&rsp->body, cap);
    rsp_clear_headers(rsp);
    rsp->status = 0;
    rsp->stalled = false;
    struct xfer x = {
        .rq = rq, .rsp = rsp, .h = h, .cancel = cancel, .last_move_ns = time_monotonic_ns()};
    char *auth_line;
    struct curl_slist *hl = request_headers(rq, auth, &auth_line);
    struct file_src src = {0};

    set_connection(h, rq);
    set_method(h, rq, &src);
    set_callbacks(h, hl, &x);

    CURLcode cc = curl_easy_perform(h);
    read_result(h, rq, rsp);
    int rc = transfer_error(cc, &x, rq, cancel, cap, e);
    curl_slist_free_all(hl);
    free(auth_line);
    curl_easy_cleanup(h);
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

// The HTTP server wrapper over libmicrohttpd (see httpd.h for the model).
//
// Threads: MHD's event threads (epoll, a small pool) run every callback
// here except the app's handler, which runs on a detached thread per
// request while its connection is suspended; stream writers are the app's
// threads.
//
// Lock order: g_mu (suspension state, request lifetimes, handler counts),
// then a stream's mu. g_mu is process-wide so that a stream writer that
// outlives its daemon never touches freed memory to find its lock.
#include "httpd/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// How long httpd_stop waits for running handlers before it closes anyway.
#define STOP_GRACE_S 10

struct httpd {
    struct MHD_Daemon *mhd;
    struct httpd_config cfg;
    uint16_t port;
    pthread_cond_t idle_cv;        // handlers reached 0 (g_mu)
    bool stopping;                 // (g_mu) no new suspension from here on
    struct httpd_req *suspended;   // (g_mu) every suspended request
    int handlers;                  // (g_mu) handler threads running
    bool quiesced;                 // (g_mu) the listening socket is closed (httpd_quiesce)
    atomic_uint conns;             // open connections
    atomic_uint refused;           // refused since the last log line
    _Atomic int64_t last_refusal;  // monotonic ns of the last refusal log line
};

enum reply_kind { REPLY_NONE, REPLY_BUFFER, REPLY_FD, REPLY_LENGTH, REPLY_STREAM };
// Why a request is suspended: its handler runs, or its stream has nothing queued.
enum susp { SUSP_NONE, SUSP_HANDLER, SUSP_STREAM };

struct httpd_req {
    struct httpd *d;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    const struct httpd_route *route;
    const char *param;
    void *data;
    void (*data_free)(void *);
    int64_t start_ns;
    uint64_t body_bytes;
    bool early;                               // answered before the body: the body is discarded
    bool too_large;                           // the body passed the limit: 413
    bool body_failed;                         // the body callback gave up: the rest is discarded
    bool dispatched;                          // the handler thread was started
    bool handled;                             // (g_mu) the handler has returned
    bool alive;                               // (g_mu) the MHD connection exists
    enum susp susp;                           // (g_mu)
    struct httpd_req *susp_prev, *susp_next;  // (g_mu) d->suspended list
    int refs;                                 // (g_mu) MHD, handler thread, stream
    int sent_status;                          // status queued (event thread)
    // The reply (the handler's thread until handled, then the event thread's).
    enum reply_kind kind;
    int status;
    char *content_type;
    char *body;
    size_t body_len;
    int fd;
    uint64_t offset, len;
    struct httpd_stream *stream;
    struct buf headers;  // "name\0value\0" pairs
};

struct httpd_stream {
    pthread_mutex_t mu;
    struct buf pending;  // (mu) bytes written, not yet sent
    bool ended;          // (mu) the writer is done
    bool error;          // (mu) ... and the reply is broken
    int refs;            // (mu) writer + MHD response
    int fd;              // (mu) client socket, -1 once the reply is gone
    atomic_bool gone;
    struct httpd_req *req;  // (g_mu) NULL once the reply is gone
};

// ---------------------------------------------------------------------------
// Limits

static unsigned env_seconds(const char *key, unsigned dflt)
{
    char tmp[64];
    const char *v = env_clean(getenv(key), tmp, sizeof(tmp));
    if (!v)
        return dflt;
    int64_t ns;
    struct err e = {0};
    if (duration_parse(v, &ns, &e) < 0 || ns < 0) {
        log_warn("%s: invalid duration %s, using %us", key, v, dflt);
        return dflt;
    }
    int64_t s = (ns + 999999999) / 1000000000;  // MHD counts whole seconds
    return s > 86400 * 365 ? 86400u * 365 : (unsigned)s;
}

static uint64_t env_count(const char *key, uint64_t dflt, uint64_t max)
{
    char tmp[64];
    const char *v = env_clean(getenv(key), tmp, sizeof(tmp));
    if (!v)
        return dflt;
    uint64_t n;
    if (str_to_u64(v, max, &n, NULL) < 0 || n == 0) {
        log_warn("%s: invalid value %s, using %llu", key, v, (unsigned long long)dflt);
        return dflt;
    }
    return n;
}

static pthread_once_t fd_once = PTHREAD_ONCE_INIT;
static uint64_t fd_soft;

static void fd_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fd_soft = 1024;
        return;
    }
    rlim_t before = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = before;
    }
    fd_soft = rl.rlim_cur == RLIM_INFINITY ? (uint64_t)1 << 20 : (uint64_t)rl.rlim_cur;
    log_info("file descriptor limit: soft %llu (was %llu), hard %llu", (unsigned long long)fd_soft,
             (unsigned long long)before, (unsigned long long)rl.rlim_max);
}

uint64_t httpd_raise_fd_limit(void)
{
    pthread_once(&fd_once, fd_raise);
    return fd_soft;
}

void httpd_limits_load(struct httpd_limits *l, uint64_t default_max_body)
{
    uint64_t fds = httpd_raise_fd_limit();
    // Keep an eighth of the descriptors (at least 64) for model files,
    // runners and blobs.
    uint64_t reserve = fds / 8 < 64 ? 64 : fds / 8;
    uint64_t cap = fds > reserve + 16 ? fds - reserve : 16;
    if (cap > 1000000)
        cap = 1000000;
    l->header_timeout_s = env_seconds("OLLAMA_HTTP_HEADER_TIMEOUT", 30);
    l->body_timeout_s = env_seconds("OLLAMA_HTTP_BODY_TIMEOUT", 60);
    l->idle_timeout_s = env_seconds("OLLAMA_HTTP_IDLE_TIMEOUT", 120);
    l->max_connections = (unsigned)env_count("OLLAMA_HTTP_MAX_CONNECTIONS", cap, 1000000);
    l->max_body_bytes = env_count("OLLAMA_HTTP_MAX_BODY", default_max_body, UINT64_MAX / 4);
}

// ---------------------------------------------------------------------------
// Request lifetime and suspension (g_mu held)

// Drops a reference (g_mu held); returns r when that was the last one, for
// req_free once g_mu is released (the app's free function may do I/O).
static struct httpd_req *req_unref_locked(struct httpd_req *r)
{
    return --r->refs > 0 ? NULL : r;
}

static void req_free(struct httpd_req *r)
{
    if (!r)
        return;
    if (r->data_free)
        r->data_free(r->data);
    if (r->kind == REPLY_FD && r->fd >= 0)
        close(r->fd);
    free(r->content_type);
    free(r->body);
    buf_deinit(&r->headers);
    free(r);
}

static bool suspend_locked(struct httpd_req *r, enum susp why)
{
    struct httpd *d = r->d;
    if (d->stopping || r->susp != SUSP_NONE)
        return false;
    MHD_suspend_connection(r->conn);
    r->susp = why;
    r->susp_prev = NULL;
    r->susp_next = d->suspended;
    if (d->suspended)
        d->suspended->susp_prev = r;
    d->suspended = r;
    return true;
}

static void resume_locked(struct httpd_req *r)
{
    if (r->susp == SUSP_NONE || !r->alive)
        return;
    struct httpd *d = r->d;
    if (r->susp_prev)
        r->susp_prev->susp_next = r->susp_next;
    else
        d->suspended = r->susp_next;
    if (r->susp_next)
        r->susp_next->susp_prev = r->susp_prev;
    r->susp = SUSP_NONE;
    MHD_resume_connection(r->conn);
}

static void set_timeout(struct MHD_Connection *c, unsigned secs)
{
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, secs);
}

// ---------------------------------------------------------------------------
// Request accessors

void *httpd_ctx(const struct httpd_req *r)
{
    return r->d->cfg.ctx;
}

const char *httpd_req_method(const struct httpd_req *r)
{
    return r->method;
}

const char *httpd_req_path(const struct httpd_req *r)
{
    return r->path;
}

const void *httpd_req_route(const struct httpd_req *r)
{
    return r->route ? r->route->data : NULL;
}

const char *httpd_req_param(const struct httpd_req *r)
{
    return r->param;
}

const char *httpd_req_header(const struct httpd_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *httpd_req_query(const struct httpd_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

void httpd_req_set_data(struct httpd_req *r, void *data, void (*free_fn)(void *))
{
    r->data = data;
    r->data_free = free_fn;
}

void *httpd_req_data(const struct httpd_req *r)
{
    return r->data;
}

int httpd_req_fd(const struct httpd_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static bool fd_hung_up(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

bool httpd_req_client_gone(const struct httpd_req *r)
{
    return fd_hung_up(httpd_req_fd(r));
}

// ---------------------------------------------------------------------------
// Replies

static void stream_free(void *cls);

static void reply_reset(struct httpd_req *r, enum reply_kind kind, int status)
{
    if (r->kind == REPLY_FD && r->fd >= 0)
        close(r->fd);
    if (r->kind == REPLY_STREAM && r->stream) {  // a stream replaced before it was sent
        struct httpd_stream *st = r->stream;
        r->stream = NULL;
        stream_free(st);
    }
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
    r->fd = -1;
    r->kind = kind;
    r->status = status;
}

static void set_content_type(struct httpd_req *r, const char *content_type)
{
    free(r->content_type);
    r->content_type = content_type ? xstrdup(content_type) : NULL;
}

void httpd_reply(struct httpd_req *r, int status, const char *content_type, const void *body,
                 size_t len)
{
    reply_reset(r, REPLY_BUFFER, status);
    set_content_type(r, content_type);
    r->body = xmalloc(len + 1);
    if (len)
        memcpy(r->body, body, len);
    r->body_len = len;
}

void httpd_reply_header(struct httpd_req *r, const char *name, const char *value)
{
    buf_append(&r->headers, name, strlen(name) + 1);
    buf_append(&r->headers, value, strlen(value) + 1);
}

int httpd_reply_fd(struct httpd_req *r, int status, int fd, uint64_t offset, uint64_t len)
{
    reply_reset(r, REPLY_FD, status);
    r->fd = fd;
    r->offset = offset;
    r->len = len;
    return 0;
}

void httpd_reply_length(struct httpd_req *r, int status, uint64_t len)
{
    reply_reset(r, REPLY_LENGTH, status);
    r->len = len;
}

bool httpd_replied(const struct httpd_req *r)
{
    return r->kind != REPLY_NONE;
}

// ---------------------------------------------------------------------------
// Streams

static void stream_unref(struct httpd_stream *st)
{
    pthread_mutex_lock(&st->mu);
    int refs = --st->refs;
    pthread_mutex_unlock(&st->mu);
    if (refs > 0)
        return;
    buf_deinit(&st->pending);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

// Resumes the connection if its reader parked for want of bytes.
static void stream_wake(struct httpd_stream *st)
{
    pthread_mutex_lock(&g_mu);
    if (st->req && st->req->susp == SUSP_STREAM)
        resume_locked(st->req);
    pthread_mutex_unlock(&g_mu);
}

struct httpd_stream *httpd_stream_start(struct httpd_req *r, int status, const char *content_type,
                                        size_t max_pending)
{
    struct httpd_stream *st = xcalloc(1, sizeof(*st));
    pthread_mutex_init(&st->mu, NULL);
    buf_init(&st->pending, max_pending);
    st->refs = 2;
    st->fd = httpd_req_fd(r);
    pthread_mutex_lock(&g_mu);
    st->req = r;
    r->refs++;
    pthread_mutex_unlock(&g_mu);
    reply_reset(r, REPLY_STREAM, status);
    set_content_type(r, content_type);
    r->stream = st;
    return st;
}

int httpd_stream_write(struct httpd_stream *st, const void *p, size_t n)
{
    if (httpd_stream_gone(st))
        return ERR_CANCELLED;
    pthread_mutex_lock(&st->mu);
    int rc = buf_append(&st->pending, p, n);
    pthread_mutex_unlock(&st->mu);
    if (rc < 0) {
        atomic_store(&st->gone, true);  // the client stopped reading long ago
        return ERR_TOO_LARGE;
    }
    stream_wake(st);
    return 0;
}

bool httpd_stream_gone(struct httpd_stream *st)
{
    if (atomic_load(&st->gone))
        return true;
    pthread_mutex_lock(&st->mu);
    if (fd_hung_up(st->fd))
        atomic_store(&st->gone, true);
    pthread_mutex_unlock(&st->mu);
    return atomic_load(&st->gone);
}

void httpd_stream_end(struct httpd_stream *st, bool error)
{
    pthread_mutex_lock(&st->mu);
    st->ended = true;
    st->error = error;
    pthread_mutex_unlock(&st->mu);
    stream_wake(st);
    stream_unref(st);
}

// MHD wants the next bytes (event thread): what is queued, the end, or
// nothing yet (the connection parks until a write wakes it).
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct httpd_stream *st = cls;
    ssize_t n = 0;
    pthread_mutex_lock(&g_mu);
    pthread_mutex_lock(&st->mu);
    if (st->pending.len > 0) {
        size_t take = st->pending.len < max ? st->pending.len : max;
        memcpy(out, st->pending.data, take);
        memmove(st->pending.data, st->pending.data + take, st->pending.len - take);
        st->pending.len -= take;
        st->pending.data[st->pending.len] = '\0';
        n = (ssize_t)take;
    } else if (st->ended) {
        n = st->error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    } else if (!st->req || !suspend_locked(st->req, SUSP_STREAM)) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;  // shutting down
    }
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_unlock(&g_mu);
    return n;
}

// The reply is gone: sent, or the connection closed.
static void stream_free(void *cls)
{
    struct httpd_stream *st = cls;
    pthread_mutex_lock(&g_mu);
    struct httpd_req *r = st->req, *dead = NULL;
    st->req = NULL;
    if (r)
        dead = req_unref_locked(r);
    pthread_mutex_unlock(&g_mu);
    req_free(dead);
    pthread_mutex_lock(&st->mu);
    st->fd = -1;
    pthread_mutex_unlock(&st->mu);
    atomic_store(&st->gone, true);
    stream_unref(st);
}

// ---------------------------------------------------------------------------
// Sending (event thread)

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static struct MHD_Response *make_response(struct httpd_req *r)
{
    switch (r->kind) {
    case REPLY_STREAM:
        return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read,
                                                 r->stream, stream_free);
    case REPLY_FD: {
        struct MHD_Response *resp =
            MHD_create_response_from_fd_at_offset64(r->len, r->fd, r->offset);
        if (resp)
            r->fd = -1;  // MHD closes it
        return resp;
    }
    case REPLY_LENGTH:
        return MHD_create_response_from_callback(r->len, 4096, no_body, NULL, NULL);
    default:
        return MHD_create_response_from_buffer(r->body_len, r->body ? r->body : (char *)"",
                                               MHD_RESPMEM_MUST_COPY);
    }
}

static enum MHD_Result queue_reply(struct httpd_req *r)
{
    struct MHD_Response *resp = make_response(r);
    if (!resp) {
        if (r->kind == REPLY_STREAM)  // the response never took its reference
            stream_free(r->stream);
        return MHD_NO;
    }
    if (r->content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    for (size_t i = 0; i < r->headers.len;) {
        const char *name = r->headers.data + i;
        const char *value = name + strlen(name) + 1;
        MHD_add_response_header(resp, name, value);
        i = (size_t)(value + strlen(value) + 1 - r->headers.data);
    }
    r->sent_status = r->status;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result queue_error(struct httpd_req *r, int status, const char *msg)
{
    char body[256];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", msg);
    httpd_reply(r, status, "application/json; charset=utf-8", body, (size_t)n);
    return queue_reply(r);
}

// ---------------------------------------------------------------------------
// Routing

static bool pattern_match(const char *pattern, const char *path, const char **param)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*') {
        if (strncmp(pattern, path, n - 1) != 0 || path[n - 1] == '\0')
            return false;
        *param = path + n - 1;
        return true;
    }
    *param = NULL;
    return strcmp(pattern, path) == 0;
}

static bool method_matches(const char *route_method, const char *method)
{
    return strcmp(route_method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

// 0: found; 404: no such path; 405: the path exists for other methods.
static int route_find(const struct httpd_route *const *tables, const char *method, const char *path,
                      const struct httpd_route **out, const char **param)
{
    bool path_seen = false;
    for (const struct httpd_route *const *t = tables; t && *t; t++) {
        for (const struct httpd_route *rt = *t; rt->pattern; rt++) {
            const char *p;
            if (!pattern_match(rt->pattern, path, &p))
                continue;
            path_seen = true;
            if (method_matches(rt->method, method)) {
                *out = rt;
                *param = p;
                return 0;
            }
        }
    }
    return path_seen ? 405 : 404;
}

// Routes r, or answers it (redirect, 404, 405). True when routed.
static bool request_route(struct httpd_req *r)
{
    const struct httpd_config *cfg = &r->d->cfg;
    int res = route_find(cfg->routes, r->method, r->path, &r->route, &r->param);
    if (res == 0)
        return true;
    // Gin redirects a trailing slash to the route without it.
    size_t n = strlen(r->path);
    if (res == 404 && cfg->redirect_trailing_slash && n > 1 && r->path[n - 1] == '/') {
        char *trimmed = xstrndup(r->path, n - 1);
        const struct httpd_route *rt;
        const char *param;
        if (route_find(cfg->routes, r->method, trimmed, &rt, &param) == 0) {
            httpd_reply(r, strcmp(r->method, "GET") == 0 ? 301 : 307, NULL, "", 0);
            httpd_reply_header(r, MHD_HTTP_HEADER_LOCATION, trimmed);
            free(trimmed);
            return false;
        }
        free(trimmed);
    }
    r->route = NULL;
    if (cfg->unrouted)
        cfg->unrouted(r, res);
    else
        httpd_reply(r, res, NULL, "", 0);
    return false;
}

// ---------------------------------------------------------------------------
// The request's phases (event thread)

static bool body_announced(struct httpd_req *r, uint64_t *len)
{
    *len = 0;
    const char *cl = httpd_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && str_to_u64(cl, UINT64_MAX, len, NULL) == 0)
        return *len > 0;
    return httpd_req_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

static struct httpd_req *request_new(struct httpd *d, struct MHD_Connection *c, const char *method,
                                     const char *url)
{
    struct httpd_req *r = xcalloc(1, sizeof(*r));
    r->d = d;
    r->conn = c;
    r->method = method;
    r->path = url;
    r->fd = -1;
    r->refs = 1;
    r->alive = true;
    r->start_ns = time_monotonic_ns();
    buf_init(&r->headers, 64 * 1024);
    return r;
}

// Headers are in: policy, routing, the announced body length.
static enum MHD_Result request_begin(struct httpd_req *r)
{
    struct httpd *d = r->d;
    uint64_t len;
    bool has_body = body_announced(r, &len);
    if (has_body)
        set_timeout(r->conn, d->cfg.limits.body_timeout_s);
    if (d->cfg.begin)
        d->cfg.begin(r);
    if (httpd_replied(r) || !request_route(r)) {
        r->early = true;  // answered after the body is discarded (keeps the connection)
        return MHD_YES;
    }
    if (!r->route->stream_body && len > d->cfg.limits.max_body_bytes) {
        r->too_large = true;  // before a byte of it is read: the connection closes after
        return queue_error(r, 413, "http: request body too large");
    }
    return MHD_YES;
}

static enum MHD_Result request_body(struct httpd_req *r, const char *p, size_t n)
{
    uint64_t max = r->d->cfg.limits.max_body_bytes;
    r->body_bytes += n;
    if (r->early || r->body_failed)
        return MHD_YES;
    if (r->too_large)  // a chunked body past the limit: discard a while, then hang up
        return r->body_bytes / 2 > max ? MHD_NO : MHD_YES;
    if (!r->route->stream_body && r->body_bytes > max) {
        r->too_large = true;
        return MHD_YES;
    }
    if (r->d->cfg.body && r->d->cfg.body(r, p, n) < 0)
        r->body_failed = true;
    return MHD_YES;
}

int httpd_spawn(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    int rc = pthread_create(&tid, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : ERR_INTERNAL;
}

static void *handler_main(void *p)
{
    struct httpd_req *r = p;
    struct httpd *d = r->d;
    d->cfg.handle(r);
    if (!httpd_replied(r))
        httpd_reply(r, 500, "application/json; charset=utf-8",
                    "{\"error\":\"handler did not reply\"}", 33);
    pthread_mutex_lock(&g_mu);
    r->handled = true;
    if (r->susp == SUSP_HANDLER)
        resume_locked(r);
    struct httpd_req *dead = req_unref_locked(r);
    if (--d->handlers == 0)
        pthread_cond_broadcast(&d->idle_cv);
    pthread_mutex_unlock(&g_mu);
    req_free(dead);
    return NULL;
}

// The whole request is in: start its handler on a thread of its own and
// park the connection until the handler has replied.
static enum MHD_Result request_dispatch(struct httpd_req *r)
{
    struct httpd *d = r->d;
    set_timeout(r->conn, 0);  // a reply in progress is never cut
    pthread_mutex_lock(&g_mu);
    if (!suspend_locked(r, SUSP_HANDLER)) {
        pthread_mutex_unlock(&g_mu);
        return queue_error(r, 503, "server shutting down");
    }
    r->dispatched = true;
    r->refs++;
    d->handlers++;
    pthread_mutex_unlock(&g_mu);

    if (httpd_spawn(handler_main, r) < 0) {
        httpd_reply(r, 500, "application/json; charset=utf-8",
                    "{\"error\":\"cannot start request thread\"}", 38);
        pthread_mutex_lock(&g_mu);
        r->handled = true;
        r->refs--;
        d->handlers--;
        resume_locked(r);
        pthread_mutex_unlock(&g_mu);
    }
    return MHD_YES;
}

static enum MHD_Result request_complete(struct httpd_req *r)
{
    if (r->early)
        return queue_reply(r);
    if (r->too_large)
        return queue_error(r, 413, "http: request body too large");
    if (!r->dispatched)
        return request_dispatch(r);
    pthread_mutex_lock(&g_mu);
    bool handled = r->handled;
    pthread_mutex_unlock(&g_mu);
    if (!handled)  // resumed by httpd_stop while the handler still runs
        return MHD_NO;
    return queue_reply(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct httpd_req *r = *con_cls;
    if (!r) {
        r = request_new(cls, c, method, url);
        *con_cls = r;
        return request_begin(r);
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return request_body(r, upload_data, n);
    }
    return request_complete(r);
}

// Formats the client's address into out and returns it (NULL if unknown).
static const struct sockaddr *format_client(struct MHD_Connection *c, char *out, size_t n)
{
    out[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return NULL;
    char ip[INET6_ADDRSTRLEN] = "";
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        snprintf(out, n, "%s:%u", ip, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        snprintf(out, n, "[%s]:%u", ip, ntohs(in6->sin6_port));
    }
    return sa;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct httpd *d = cls;
    struct httpd_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    if (d->cfg.observe && r->sent_status) {
        char client[INET6_ADDRSTRLEN + 16];
        const struct sockaddr *peer = format_client(c, client, sizeof(client));
        struct httpd_observation o = {.method = r->method,
                                      .path = r->path,
                                      .status = r->sent_status,
                                      .latency_ns = time_monotonic_ns() - r->start_ns,
                                      .client = client,
                                      .peer = peer,
                                      .data = r->data};
        d->cfg.observe(d->cfg.ctx, &o);
    }
    set_timeout(c, d->cfg.limits.idle_timeout_s);  // until the next request's headers
    pthread_mutex_lock(&g_mu);
    resume_locked(r);  // (never suspended here in practice)
    r->alive = false;
    struct httpd_req *dead = req_unref_locked(r);
    pthread_mutex_unlock(&g_mu);
    req_free(dead);
}

// ---------------------------------------------------------------------------
// Connections

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)c, (void)socket_ctx;
    struct httpd *d = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&d->conns, 1);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&d->conns, 1);
}

// Past the cap a new connection is closed at once; one log line per burst.
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)addr, (void)len;
    struct httpd *d = cls;
    if (atomic_load(&d->conns) < d->cfg.limits.max_connections)
        return MHD_YES;
    unsigned refused = atomic_fetch_add(&d->refused, 1) + 1;
    int64_t now = time_monotonic_ns(), last = atomic_load(&d->last_refusal);
    if (now - last > 10 * (int64_t)1000000000 &&
        atomic_compare_exchange_strong(&d->last_refusal, &last, now)) {
        atomic_store(&d->refused, 0);
        log_warn("%s: %u connections open (OLLAMA_HTTP_MAX_CONNECTIONS); refusing new ones "
                 "(%u refused since the last report)",
                 d->cfg.name, d->cfg.limits.max_connections, refused);
    }
    return MHD_NO;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct httpd *d = cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_debug("%s http: %s", d->cfg.name, msg);
}

static unsigned event_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4 ? 4 : (unsigned)n;
}

int httpd_start(struct httpd **out, const struct httpd_config *cfg, struct err *e)
{
    struct httpd *d = xcalloc(1, sizeof(*d));
    d->cfg = *cfg;
    pthread_cond_init(&d->idle_cv, NULL);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (!cfg->addr)
        flags |= MHD_USE_DUAL_STACK;
    else if (cfg->addr->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem addr_opt[] = {
        {cfg->addr ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, 0, (void *)cfg->addr},
        {MHD_OPTION_END, 0, NULL},
    };
    // MHD's own cap sits a little above ours: ours refuses cleanly, MHD's
    // (which stops accepting) only backs it up.
    unsigned threads = event_threads();
    unsigned mhd_cap = cfg->limits.max_connections + 16 * threads;
    d->mhd = MHD_start_daemon(
        flags, cfg->port, on_accept, d, on_access, d, MHD_OPTION_NOTIFY_COMPLETED, on_completed, d,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, d, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, d,
        MHD_OPTION_CONNECTION_TIMEOUT, cfg->limits.header_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        mhd_cap, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024,
        MHD_OPTION_ARRAY, addr_opt, MHD_OPTION_END);
    if (!d->mhd) {
        int err = errno;
        pthread_cond_destroy(&d->idle_cv);
        free(d);
        return err_set(e, ERR_IO, "%s",
                       err == EADDRINUSE ? "bind: address already in use"
                                         : strerror(err ? err : EIO));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
    d->port = di ? di->port : cfg->port;
    *out = d;
    return 0;
}

uint16_t httpd_port(const struct httpd *d)
{
    return d->port;
}

// Closes the listening socket under libmicrohttpd: a connect from here on
// is refused at once (a balancer retries elsewhere) instead of waiting in
// the backlog. Not MHD_quiesce_daemon: in libmicrohttpd 0.9.75 it races an
// epoll worker that removes the same socket from its set, and the loser
// aborts the process ("Failed to remove listen FD from epoll set", seen in
// CI at SIGTERM). Instead a fresh, unbound socket takes the listening
// socket's descriptor number (dup3): the listening socket is closed, which
// also drops it from every epoll set, and the number MHD holds stays valid
// until MHD_stop_daemon closes it (an accept on it fails with EINVAL, which
// MHD expects at shutdown). Once per daemon (g_mu held by neither caller).
static void quiesce_once(struct httpd *d)
{
    pthread_mutex_lock(&g_mu);
    bool done = d->quiesced;
    d->quiesced = true;
    pthread_mutex_unlock(&g_mu);
    if (done)
        return;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_LISTEN_FD);
    if (!di || di->listen_fd == MHD_INVALID_SOCKET)
        return;
    int blank = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (blank < 0 || dup3(blank, di->listen_fd, O_CLOEXEC) < 0)
        log_warn("%s: the listening socket stays open while draining: %s", d->cfg.name,
                 strerror(errno));
    if (blank >= 0)
        close(blank);
}

void httpd_quiesce(struct httpd *d)
{
    if (d)
        quiesce_once(d);
}

bool httpd_stop(struct httpd *d)
{
    if (!d)
        return true;
    quiesce_once(d);  // no new connections
    pthread_mutex_lock(&g_mu);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += STOP_GRACE_S;
    while (d->handlers > 0 && pthread_cond_timedwait(&d->idle_cv, &g_mu, &deadline) != ETIMEDOUT) {
    }
    int left = d->handlers;
    // MHD must not be stopped with suspended connections: wake them all;
    // readers and completions see `stopping` and end their replies.
    d->stopping = true;
    while (d->suspended)
        resume_locked(d->suspended);
    pthread_mutex_unlock(&g_mu);
    MHD_stop_daemon(d->mhd);
    if (left > 0) {
        // A handler that outlived the grace period still holds d: leak it.
        log_warn("%s: %d request handler(s) still running at shutdown", d->cfg.name, left);
        return false;
    }
    pthread_cond_destroy(&d->idle_cv);
    free(d);
    return true;
}

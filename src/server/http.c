// The HTTP layer of `ollama serve` over libmicrohttpd: one thread per
// connection, request bodies buffered under a cap (or streamed to a route's
// body callback), CORS and allowed-host checks before routing (env.md §6-7),
// Gin-compatible 404/405/redirect behaviour (api.md §1.1), and streaming
// replies fed by a producer thread.
//
// Lock order: a stream's mutex is the only lock here; nothing is called with
// it held except memcpy and poll.
#include "server/internal.h"
#include "server/sched.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct srv_stream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct buf pending;  // bytes queued by the producer, not yet sent (mu)
    bool ended;          // the producer is done (mu)
    int refs;            // producer + MHD response (mu)
    atomic_bool cancelled;
    int fd;  // the client socket, polled for hang-up (-1 once closed)
    srv_producer_fn fn;
    void *arg;
    struct srv_encoder enc;  // taken from the request (encode NULL: NDJSON)
};

#define STREAM_MAX_PENDING (64u * 1024 * 1024)

static void stream_unref(struct srv_stream *st)
{
    pthread_mutex_lock(&st->mu);
    int refs = --st->refs;
    pthread_mutex_unlock(&st->mu);
    if (refs > 0)
        return;
    if (st->enc.free)
        st->enc.free(st->enc.ctx);
    buf_deinit(&st->pending);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st);
}

int srv_stream_write(struct srv_stream *st, const char *p, size_t n)
{
    if (srv_stream_cancelled(st))
        return ERR_CANCELLED;
    pthread_mutex_lock(&st->mu);
    int rc = buf_append(&st->pending, p, n);
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int srv_stream_json_line(struct srv_stream *st, json_t *obj)
{
    if (st->enc.encode) {
        int erc = st->enc.encode(st->enc.ctx, st, obj);
        json_decref(obj);
        return erc;
    }
    struct buf line;
    buf_init(&line, 0);
    int rc = jsonx_dump(obj, 0, &line, NULL);
    json_decref(obj);
    if (rc == 0)
        rc = buf_append_char(&line, '\n');
    if (rc == 0)
        rc = srv_stream_write(st, line.data, line.len);
    buf_deinit(&line);
    return rc;
}

bool srv_stream_cancelled(struct srv_stream *st)
{
    if (atomic_load(&st->cancelled))
        return true;
    pthread_mutex_lock(&st->mu);
    if (st->fd >= 0) {
        struct pollfd pfd = {.fd = st->fd, .events = POLLRDHUP};
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            atomic_store(&st->cancelled, true);
    }
    pthread_mutex_unlock(&st->mu);
    return atomic_load(&st->cancelled);
}

void srv_stream_end(struct srv_stream *st)
{
    if (st->enc.finish)
        st->enc.finish(st->enc.ctx, st);
    pthread_mutex_lock(&st->mu);
    st->ended = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    stream_unref(st);
}

// MHD pulls the next bytes of a streamed reply. Blocking is fine: each
// connection has its own thread.
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct srv_stream *st = cls;
    pthread_mutex_lock(&st->mu);
    while (st->pending.len == 0 && !st->ended)
        pthread_cond_wait(&st->cv, &st->mu);
    ssize_t n;
    if (st->pending.len == 0) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        size_t take = st->pending.len < max ? st->pending.len : max;
        memcpy(out, st->pending.data, take);
        memmove(st->pending.data, st->pending.data + take, st->pending.len - take);
        st->pending.len -= take;
        st->pending.data[st->pending.len] = '\0';
        n = (ssize_t)take;
    }
    pthread_mutex_unlock(&st->mu);
    return n;
}

// The response is gone: finished, or the client hung up.
static void stream_free(void *cls)
{
    struct srv_stream *st = cls;
    pthread_mutex_lock(&st->mu);
    st->fd = -1;
    pthread_mutex_unlock(&st->mu);
    atomic_store(&st->cancelled, true);
    stream_unref(st);
}

static void *stream_thread(void *p)
{
    struct srv_stream *st = p;
    st->fn(st, st->arg);
    return NULL;
}

int srv_stream_start(struct srv_req *r, int status, const char *content_type, srv_producer_fn fn,
                     void *arg)
{
    struct srv_stream *st = xcalloc(1, sizeof(*st));
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    buf_init(&st->pending, STREAM_MAX_PENDING);
    st->refs = 2;
    st->fd = -1;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        st->fd = ci->connect_fd;
    st->fn = fn;
    st->arg = arg;
    if (r->encoder.encode) {
        st->enc = r->encoder;
        memset(&r->encoder, 0, sizeof(r->encoder));
        if (st->enc.content_type)
            content_type = st->enc.content_type;
    }
    r->stream = st;
    r->status = status;
    free(r->content_type);
    r->content_type = xstrdup(content_type);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    int rc = pthread_create(&tid, &attr, stream_thread, st);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        r->stream = NULL;
        st->refs = 1;
        stream_unref(st);
        srv_reply_error(r, 500, "cannot start response thread");
        return ERR_INTERNAL;
    }
    return 0;
}

void srv_reply(struct srv_req *r, int status, const char *content_type, const char *body,
               size_t len)
{
    r->status = status;
    free(r->content_type);
    r->content_type = content_type ? xstrdup(content_type) : NULL;
    free(r->reply_body);
    r->reply_body = xmalloc(len + 1);
    if (len)
        memcpy(r->reply_body, body, len);
    r->reply_body[len] = '\0';
    r->reply_len = len;
}

void srv_reply_text(struct srv_req *r, int status, const char *text)
{
    srv_reply(r, status, "text/plain; charset=utf-8", text, strlen(text));
}

void srv_reply_json(struct srv_req *r, int status, json_t *obj)
{
    struct buf b;
    buf_init(&b, 0);
    if (jsonx_dump(obj, 0, &b, NULL) < 0) {
        buf_deinit(&b);
        json_decref(obj);
        srv_reply_error(r, 500, "cannot encode response");
        return;
    }
    json_decref(obj);
    srv_reply(r, status, "application/json; charset=utf-8", b.data, b.len);
    buf_deinit(&b);
}

void srv_reply_error(struct srv_req *r, int status, const char *msg)
{
    srv_reply_json(r, status, json_pack("{s:s}", "error", msg));
}

void srv_reply_err(struct srv_req *r, int rc, const struct err *e)
{
    const char *msg = e && e->code != ERR_OK ? e->msg : err_str(rc);
    srv_reply_error(r, server_http_status(rc), msg);
}

json_t *srv_body_json(struct srv_req *r)
{
    if (r->body.len == 0) {
        srv_reply_error(r, 400, "missing request body");
        return NULL;
    }
    json_t *v = NULL;
    struct err e = {0};
    if (jsonx_parse(r->body.data, r->body.len, &v, &e) < 0) {
        srv_reply_error(r, 400, e.msg);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        srv_reply_error(r, 400, "json: cannot unmarshal non-object into request body");
        return NULL;
    }
    return v;
}

bool srv_client_gone(struct srv_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

const char *srv_header(struct srv_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *srv_query(struct srv_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

int server_http_status(int rc)
{
    switch (rc) {
    case ERR_INVALID:
    case ERR_FORMAT:
    case ERR_RANGE:
    case ERR_UNSUPPORTED:
        return 400;
    case ERR_UNAUTHORIZED:
        return 401;
    case ERR_PERMISSION:
        return 403;
    case ERR_NOT_FOUND:
        return 404;
    case ERR_EXISTS:
        return 409;
    case ERR_TOO_LARGE:
        return 413;
    case ERR_NOT_IMPLEMENTED:
        return 501;
    case ERR_BUSY:
        return 503;
    default:
        return 500;
    }
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

enum route_result { ROUTE_FOUND, ROUTE_NO_PATH, ROUTE_NO_METHOD };

static enum route_result route_find(const char *method, const char *path,
                                    const struct srv_route **out, const char **param)
{
    bool path_seen = false;
    for (const struct srv_route *const *t = server_route_tables; *t; t++) {
        for (const struct srv_route *rt = *t; rt->pattern; rt++) {
            const char *p;
            if (!pattern_match(rt->pattern, path, &p))
                continue;
            path_seen = true;
            if (method_matches(rt->method, method)) {
                *out = rt;
                *param = p;
                return ROUTE_FOUND;
            }
        }
    }
    return path_seen ? ROUTE_NO_METHOD : ROUTE_NO_PATH;
}

// ---------------------------------------------------------------------------
// CORS (env.md §6) and allowed hosts (env.md §7). Each returns true when the
// request was answered (403 or 204) and must not be routed.

static const char cors_allow_headers[] =
    "Authorization,Content-Type,User-Agent,Accept,X-Requested-With,OpenAI-Beta,x-stainless-arch,"
    "x-stainless-async,x-stainless-custom-poll-interval,x-stainless-helper-method,"
    "x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-poll-helper,"
    "x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout";

struct conn_state {
    struct srv_req req;
    const struct srv_route *route;
    bool answered;        // a reply was decided before the body was read
    char *cors_origin;    // echo in Access-Control-Allow-Origin, or NULL
    bool cors_preflight;  // answer 204 with the preflight headers
};

static bool same_origin(const char *origin, const char *host)
{
    if (!host)
        return false;
    const char *rest = cstr_starts_with(origin, "http://")    ? origin + 7
                       : cstr_starts_with(origin, "https://") ? origin + 8
                                                              : NULL;
    return rest && strcmp(rest, host) == 0;
}

static bool check_cors(struct conn_state *cs)
{
    struct srv_req *r = &cs->req;
    const char *origin = srv_header(r, "Origin");
    if (!origin || same_origin(origin, srv_header(r, "Host")))
        return false;
    if (!env_origin_allowed(r->srv->cfg, origin)) {
        srv_reply(r, 403, NULL, "", 0);
        return true;
    }
    bool star = false;
    for (char **o = r->srv->cfg->origins; o && *o; o++)
        star |= strcmp(*o, "*") == 0;
    cs->cors_origin = xstrdup(star ? "*" : origin);
    if (strcmp(r->method, "OPTIONS") == 0) {
        cs->cors_preflight = true;
        srv_reply(r, 204, NULL, "", 0);
        return true;
    }
    return false;
}

static bool check_host(struct conn_state *cs)
{
    struct srv_req *r = &cs->req;
    if (!r->srv->loopback)
        return false;
    const char *host = srv_header(r, "Host");
    if (!env_host_allowed(host ? host : "")) {
        srv_reply(r, 403, NULL, "", 0);
        return true;
    }
    if (strcmp(r->method, "OPTIONS") == 0) {
        srv_reply(r, 204, NULL, "", 0);
        return true;
    }
    return false;
}

// Decides, before the body is read, whether the request can be routed.
static void begin_request(struct conn_state *cs)
{
    struct srv_req *r = &cs->req;
    if (check_cors(cs) || check_host(cs)) {
        cs->answered = true;
        return;
    }
    const char *param;
    enum route_result res = route_find(r->method, r->url, &cs->route, &param);
    if (res == ROUTE_FOUND) {
        r->param = param;
        return;
    }
    // Gin redirects a trailing slash to the route without it.
    size_t n = strlen(r->url);
    if (res == ROUTE_NO_PATH && n > 1 && r->url[n - 1] == '/') {
        char *trimmed = xstrndup(r->url, n - 1);
        const struct srv_route *rt;
        if (route_find(r->method, trimmed, &rt, &param) == ROUTE_FOUND) {
            r->location = trimmed;
            srv_reply(r, strcmp(r->method, "GET") == 0 ? 301 : 307, NULL, "", 0);
            cs->answered = true;
            return;
        }
        free(trimmed);
    }
    if (res == ROUTE_NO_METHOD)
        srv_reply_text(r, 405, "405 method not allowed");
    else
        srv_reply_text(r, 404, "404 page not found");
    cs->answered = true;
}

static enum MHD_Result queue_reply(struct MHD_Connection *conn, struct conn_state *cs)
{
    struct srv_req *r = &cs->req;
    struct MHD_Response *resp;
    if (r->mhd_response) {
        resp = r->mhd_response;
        r->mhd_response = NULL;
    } else if (r->stream) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read,
                                                 r->stream, stream_free);
    } else {
        resp = MHD_create_response_from_buffer(r->reply_len, r->reply_body ? r->reply_body : "",
                                               MHD_RESPMEM_MUST_COPY);
    }
    if (!resp)
        return MHD_NO;
    if (r->content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    if (r->location)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
    if (cs->cors_origin) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", cs->cors_origin);
        if (cs->cors_preflight) {
            MHD_add_response_header(resp, "Access-Control-Allow-Methods",
                                    "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS");
            MHD_add_response_header(resp, "Access-Control-Allow-Headers", cors_allow_headers);
            MHD_add_response_header(resp, "Access-Control-Max-Age", "43200");
        } else {
            MHD_add_response_header(resp, "Vary", "Origin");
        }
    }
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct server *srv = cls;
    struct conn_state *cs = *con_cls;
    if (!cs) {
        cs = xcalloc(1, sizeof(*cs));
        cs->req.srv = srv;
        cs->req.conn = conn;
        cs->req.method = method;
        cs->req.url = url;
        cs->req.t_start_ns = time_monotonic_ns();
        buf_init(&cs->req.body, SERVER_MAX_BODY_BYTES);
        *con_cls = cs;
        begin_request(cs);
        return MHD_YES;
    }
    struct srv_req *r = &cs->req;
    if (*upload_data_size) {
        if (!cs->answered && !r->body_too_large) {
            if (cs->route->on_body) {
                if (r->upload_rc == 0)
                    r->upload_rc = cs->route->on_body(r, upload_data, *upload_data_size);
            } else if (buf_append(&r->body, upload_data, *upload_data_size) < 0) {
                r->body_too_large = true;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!cs->answered) {
        if (r->body_too_large)
            srv_reply_error(r, 413, "request body too large");
        else
            cs->route->handler(r);
        if (!r->stream && !r->mhd_response && r->status == 0)
            srv_reply_error(r, 500, "handler did not reply");
    }
    return queue_reply(conn, cs);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)conn, (void)toe;
    struct conn_state *cs = *con_cls;
    if (!cs)
        return;
    const union MHD_ConnectionInfo *peer =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    server_observe_request(&cs->req, peer ? peer->client_addr : NULL);
    if (cs->req.upload && cs->req.upload_free)
        cs->req.upload_free(cs->req.upload);
    buf_deinit(&cs->req.body);
    free(cs->req.content_type);
    free(cs->req.reply_body);
    free(cs->req.location);
    free(cs->cors_origin);
    free(cs);
    *con_cls = NULL;
}

static bool sockaddr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
    }
    return false;
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

int server_start(struct server **out, const struct server_options *opts, struct err *e)
{
    const struct host_addr *h = &opts->cfg->host;
    struct server *srv = xcalloc(1, sizeof(*srv));
    srv->cfg = opts->cfg;
    srv->self_exe = opts->self_exe;
    int rc = store_open(&srv->store, opts->cfg->models_dir, e);
    if (rc < 0) {
        free(srv);
        return rc;
    }
    struct sched_config sc = {
        .self_exe = opts->self_exe,
        .max_loaded = opts->cfg->max_loaded_models,
        .max_queue = opts->cfg->max_queue,
        .num_parallel = opts->cfg->num_parallel,
        .default_keep_alive_ns = opts->cfg->keep_alive_ns,
        .load_timeout_ns = opts->cfg->load_timeout_ns,
        .kv_cache_type = opts->cfg->kv_cache_type,
    };
    rc = sched_new(&srv->sched, &sc, e);
    if (rc < 0) {
        store_close(srv->store);
        free(srv);
        return rc;
    }
    // Start-up prune of blobs no manifest references (store.md §7.3).
    if (!opts->cfg->noprune) {
        struct err pe = {0};
        int n = store_prune(srv->store, (int64_t)3600 * 1000000000, &pe);
        if (n < 0)
            log_warn("prune: %s", pe.msg);
        else if (n > 0)
            log_info("pruned %d unused blob(s)", n);
    }

    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    bool have_addr = false;
    if (h->host[0]) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        char port[8];
        snprintf(port, sizeof(port), "%u", h->port);
        int gai = getaddrinfo(h->host, port, &hints, &ai);
        if (gai != 0) {
            sched_free(srv->sched);
            store_close(srv->store);
            free(srv);
            return err_set(e, ERR_INVALID, "listen tcp: lookup %s: %s", h->host, gai_strerror(gai));
        }
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        have_addr = true;
        if (ss.ss_family == AF_INET6)
            flags |= MHD_USE_IPv6;
        srv->loopback = sockaddr_is_loopback((struct sockaddr *)&ss);
    } else {
        flags |= MHD_USE_DUAL_STACK;
    }

    struct MHD_OptionItem ops[] = {
        {have_addr ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, 0, &ss},
        {MHD_OPTION_END, 0, NULL},
    };
    srv->daemon = MHD_start_daemon(
        flags, h->port, NULL, NULL, on_request, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0,
        MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
    if (!srv->daemon) {
        sched_free(srv->sched);
        store_close(srv->store);
        free(srv);
        char url[300];
        host_format_url(h, url, sizeof(url));
        return err_set(e, ERR_IO, "listen tcp %s: %s", url + strlen(h->scheme) + 3,
                       errno == EADDRINUSE ? "bind: address already in use" : strerror(errno));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = di ? di->port : h->port;
    *out = srv;
    return 0;
}

uint16_t server_port(const struct server *s)
{
    return s->port;
}

void server_stop(struct server *s)
{
    if (!s)
        return;
    sched_shutdown(s->sched);
    MHD_stop_daemon(s->daemon);
    sched_free(s->sched);
    store_close(s->store);
    free(s);
}

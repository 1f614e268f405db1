// The HTTP side of `ollama serve`, over the one HTTP wrapper (httpd/):
// the server's route tables, CORS and allowed-host checks before routing
// (server/policy.c), Gin-compatible 404/405/redirect behaviour (api.md
// §1.1), request handlers on their own threads (the wrapper's), and
// streaming replies fed by a producer thread.
#include "server/internal.h"
#include "server/sched.h"

#include "httpd/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct srv_stream {
    struct httpd_stream *hs;
    struct server *srv;
    srv_producer_fn fn;
    void *arg;
    struct srv_encoder enc;  // taken from the request (encode NULL: NDJSON)
};

#define STREAM_MAX_PENDING (64u * 1024 * 1024)

int srv_stream_write(struct srv_stream *st, const char *p, size_t n)
{
    return httpd_stream_write(st->hs, p, n);
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
    int rc = jsonx_ndjson_line(obj, &line);
    if (rc == 0)
        rc = srv_stream_write(st, line.data, line.len);
    buf_deinit(&line);
    return rc;
}

int srv_stream_error(struct srv_stream *st, const char *msg)
{
    return srv_stream_json_line(st, srv_error_json(msg));
}

bool srv_stream_cancelled(struct srv_stream *st)
{
    return atomic_load(&st->srv->stopping) || httpd_stream_gone(st->hs);
}

// Producer threads are counted so that shutdown frees nothing they use.
static void producers_add(struct server *srv, int delta)
{
    pthread_mutex_lock(&srv->producers_mu);
    srv->producers += delta;
    if (srv->producers == 0)
        pthread_cond_broadcast(&srv->producers_cv);
    pthread_mutex_unlock(&srv->producers_mu);
}

void srv_stream_end(struct srv_stream *st)
{
    if (st->enc.finish)
        st->enc.finish(st->enc.ctx, st);
    if (st->enc.free)
        st->enc.free(st->enc.ctx);
    httpd_stream_end(st->hs, false);
    struct server *srv = st->srv;
    free(st);
    producers_add(srv, -1);
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
    st->srv = r->srv;
    st->fn = fn;
    st->arg = arg;
    if (r->encoder.encode) {
        st->enc = r->encoder;
        memset(&r->encoder, 0, sizeof(r->encoder));
        if (st->enc.content_type)
            content_type = st->enc.content_type;
    }
    st->hs = httpd_stream_start(r->h, status, content_type, STREAM_MAX_PENDING);
    r->stream = st;
    r->status = status;

    producers_add(r->srv, 1);
    if (httpd_spawn(stream_thread, st) < 0) {
        r->stream = NULL;
        st->fn = NULL;
        srv_stream_end(st);
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

json_t *srv_error_json(const char *msg)
{
    return json_pack("{s:s}", "error", msg);
}

void srv_reply_error(struct srv_req *r, int status, const char *msg)
{
    srv_reply_json(r, status, srv_error_json(msg));
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
    return atomic_load(&r->srv->stopping) || httpd_req_client_gone(r->h);
}

const char *srv_header(struct srv_req *r, const char *name)
{
    return httpd_req_header(r->h, name);
}

const char *srv_query(struct srv_req *r, const char *name)
{
    return httpd_req_query(r->h, name);
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
// CORS (env.md §6) and allowed hosts (env.md §7): the wrapper's begin hook.
// Each check returns true when the request was answered (403 or 204).

static const char cors_allow_headers[] =
    "Authorization,Content-Type,User-Agent,Accept,X-Requested-With,OpenAI-Beta,x-stainless-arch,"
    "x-stainless-async,x-stainless-custom-poll-interval,x-stainless-helper-method,"
    "x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-poll-helper,"
    "x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout";

static bool check_cors(struct srv_req *r)
{
    const char *origin = srv_header(r, "Origin");
    if (!origin || srv_same_origin(origin, srv_header(r, "Host")))
        return false;
    char **origins = r->srv->cfg->origins;
    if (!srv_origin_allowed(origins, origin)) {
        srv_reply(r, 403, NULL, "", 0);
        return true;
    }
    bool star = false;
    for (char **o = origins; o && *o; o++)
        star |= strcmp(*o, "*") == 0;
    httpd_reply_header(r->h, "Access-Control-Allow-Origin", star ? "*" : origin);
    if (strcmp(r->method, "OPTIONS") == 0) {
        httpd_reply_header(r->h, "Access-Control-Allow-Methods",
                           "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS");
        httpd_reply_header(r->h, "Access-Control-Allow-Headers", cors_allow_headers);
        httpd_reply_header(r->h, "Access-Control-Max-Age", "43200");
        srv_reply(r, 204, NULL, "", 0);
        return true;
    }
    httpd_reply_header(r->h, "Vary", "Origin");
    return false;
}

static bool check_host(struct srv_req *r)
{
    if (!r->srv->loopback)
        return false;
    const char *host = srv_header(r, "Host");
    if (!srv_host_allowed(host ? host : "")) {
        srv_reply(r, 403, NULL, "", 0);
        return true;
    }
    if (strcmp(r->method, "OPTIONS") == 0) {
        srv_reply(r, 204, NULL, "", 0);
        return true;
    }
    return false;
}

// Hands the reply set with srv_reply_* to the wrapper (a stream or a reply
// set on r->h directly is there already).
static void reply_commit(struct srv_req *r)
{
    if (r->stream || r->raw_reply)
        return;
    if (r->status == 0)
        srv_reply_error(r, 500, "handler did not reply");
    // A full queue or a draining server: the client (or a balancer's
    // retry-on 503) may try again, here in a second or elsewhere at once.
    if (r->status == 503)
        httpd_reply_header(r->h, "Retry-After", SRV_RETRY_AFTER_S);
    httpd_reply(r->h, r->status, r->content_type, r->reply_body ? r->reply_body : "", r->reply_len);
}

static void req_free(void *p)
{
    struct srv_req *r = p;
    if (r->counted)
        atomic_fetch_sub(&r->srv->requests, 1);
    if (r->upload && r->upload_free)
        r->upload_free(r->upload);
    if (r->encoder.free)
        r->encoder.free(r->encoder.ctx);
    buf_deinit(&r->body);
    free(r->content_type);
    free(r->reply_body);
    free(r);
}

static void on_begin(struct httpd_req *h)
{
    struct srv_req *r = xcalloc(1, sizeof(*r));
    r->srv = httpd_ctx(h);
    r->h = h;
    r->method = httpd_req_method(h);
    r->url = httpd_req_path(h);
    buf_init(&r->body, 0);  // the wrapper enforces the limit
    httpd_req_set_data(h, r, req_free);
    if (atomic_load(&r->srv->draining)) {
        // Only a kept-alive connection gets here (the listener is closed):
        // close it so the client's next request connects elsewhere.
        httpd_reply_header(h, "Connection", "close");
        srv_reply_error(r, 503, "server is shutting down");
        reply_commit(r);
        return;
    }
    if (check_cors(r) || check_host(r))
        reply_commit(r);
}

static void on_unrouted(struct httpd_req *h, int status)
{
    struct srv_req *r = httpd_req_data(h);
    srv_reply_text(r, status, status == 405 ? "405 method not allowed" : "404 page not found");
    reply_commit(r);
}

static int on_body(struct httpd_req *h, const char *p, size_t n)
{
    struct srv_req *r = httpd_req_data(h);
    const struct srv_route *rt = httpd_req_route(h);
    if (!rt->on_body)
        return buf_append(&r->body, p, n);
    r->param = httpd_req_param(h);
    if (r->upload_rc == 0)
        r->upload_rc = rt->on_body(r, p, n);
    return 0;  // the handler reports a failed upload
}

static void on_handle(struct httpd_req *h)
{
    struct srv_req *r = httpd_req_data(h);
    const struct srv_route *rt = httpd_req_route(h);
    // In flight from here until its reply (stream included) ends: what a
    // drain waits for. A request whose body is still arriving is not (behind
    // a balancer that buffers bodies none is; a stalled client is not waited for).
    atomic_fetch_add(&r->srv->requests, 1);
    r->counted = true;
    r->param = httpd_req_param(h);
    rt->handler(r);
    srv_request_log(r);
    reply_commit(r);
}

// Called once per finished request: the server's observation point
// (access log, metrics).
static void on_observe(void *ctx, const struct httpd_observation *o)
{
    (void)ctx;
    // o->status is what was sent (the wrapper's 413 included).
    server_observe_request(o->method, o->path, o->status, o->latency_ns, o->client);
}

// ---------------------------------------------------------------------------
// Start and stop

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

// The wrapper's routing table: one row per server route, pointing back at it.
static struct httpd_route *routes_build(void)
{
    size_t n = 0;
    for (const struct srv_route *const *t = server_route_tables; *t; t++)
        for (const struct srv_route *rt = *t; rt->pattern; rt++)
            n++;
    struct httpd_route *out = xcalloc(n + 1, sizeof(*out));
    size_t k = 0;
    for (const struct srv_route *const *t = server_route_tables; *t; t++)
        for (const struct srv_route *rt = *t; rt->pattern; rt++)
            out[k++] = (struct httpd_route){.method = rt->method,
                                            .pattern = rt->pattern,
                                            .data = rt,
                                            .stream_body = rt->on_body != NULL};
    return out;
}

static void server_free(struct server *srv)
{
    if (srv->sched)
        sched_free(srv->sched);
    if (srv->store)
        store_close(srv->store);
    free(srv->routes);
    pthread_mutex_destroy(&srv->producers_mu);
    pthread_cond_destroy(&srv->producers_cv);
    free(srv);
}

static int server_listen(struct server *srv, struct err *e)
{
    const struct host_addr *h = &srv->cfg->host;
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
        if (gai != 0)
            return err_set(e, ERR_INVALID, "listen tcp: lookup %s: %s", h->host, gai_strerror(gai));
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        have_addr = true;
        srv->loopback = sockaddr_is_loopback((struct sockaddr *)&ss);
    }
    srv->route_tables[0] = srv->routes;
    srv->route_tables[1] = NULL;
    struct httpd_config hc = {
        .name = "server",
        .addr = have_addr ? (struct sockaddr *)&ss : NULL,
        .port = h->port,
        .routes = srv->route_tables,
        .redirect_trailing_slash = true,
        .ctx = srv,
        .begin = on_begin,
        .unrouted = on_unrouted,
        .body = on_body,
        .handle = on_handle,
        .observe = on_observe,
    };
    httpd_limits_load(&hc.limits, SERVER_MAX_BODY_BYTES);
    struct err he = {0};
    if (httpd_start(&srv->httpd, &hc, &he) < 0) {
        char url[300];
        host_format_url(h, url, sizeof(url));
        return err_set(e, ERR_IO, "listen tcp %s: %s", url + strlen(h->scheme) + 3, he.msg);
    }
    log_info("http limits: header timeout %us, body timeout %us, idle timeout %us, "
             "%u connections, %llu-byte bodies",
             hc.limits.header_timeout_s, hc.limits.body_timeout_s, hc.limits.idle_timeout_s,
             hc.limits.max_connections, (unsigned long long)hc.limits.max_body_bytes);
    return 0;
}

int server_start(struct server **out, const struct server_options *opts, struct err *e)
{
    struct server *srv = xcalloc(1, sizeof(*srv));
    srv->cfg = opts->cfg;
    srv->self_exe = opts->self_exe;
    pthread_mutex_init(&srv->producers_mu, NULL);
    pthread_cond_init(&srv->producers_cv, NULL);
    srv->routes = routes_build();
    int rc = srv_request_log_init(opts->cfg, e);
    if (rc < 0) {
        server_free(srv);
        return rc;
    }
    rc = store_open(&srv->store, opts->cfg->models_dir, e);
    if (rc < 0) {
        server_free(srv);
        return rc;
    }
    // Quantized K/V caches need flash attention (env.md): with it switched
    // off (OLLAMA_FLASH_ATTENTION=0) they fall back to f16, with a warning.
    const char *kv_type = opts->cfg->kv_cache_type;
    if (opts->cfg->flash_attention == 0 && kv_type[0] && strcmp(kv_type, "f16") != 0) {
        log_warn("OLLAMA_KV_CACHE_TYPE=%s needs flash attention, which OLLAMA_FLASH_ATTENTION=0 "
                 "turns off; using f16",
                 kv_type);
        kv_type = "f16";
    }
    struct sched_config sc = {
        .self_exe = opts->self_exe,
        .max_loaded = opts->cfg->max_loaded_models,
        .max_queue = opts->cfg->max_queue,
        .num_parallel = opts->cfg->num_parallel,
        .default_keep_alive_ns = opts->cfg->keep_alive_ns,
        .load_timeout_ns = opts->cfg->load_timeout_ns,
        .kv_cache_type = kv_type,
    };
    rc = sched_new(&srv->sched, &sc, e);
    if (rc < 0) {
        server_free(srv);
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
    rc = server_listen(srv, e);
    if (rc < 0) {
        server_free(srv);
        return rc;
    }
    srv->port = httpd_port(srv->httpd);
    *out = srv;
    return 0;
}

uint16_t server_port(const struct server *s)
{
    return s->port;
}

// Producers (pulls, generations) see their clients gone once the wrapper has
// stopped, and end; the store and the scheduler are freed only after them.
static bool producers_wait(struct server *s, int seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    pthread_mutex_lock(&s->producers_mu);
    while (s->producers > 0 &&
           pthread_cond_timedwait(&s->producers_cv, &s->producers_mu, &deadline) != ETIMEDOUT) {
    }
    int left = s->producers;
    pthread_mutex_unlock(&s->producers_mu);
    if (left > 0)
        log_warn("%d response stream(s) still running at shutdown", left);
    return left == 0;
}

void server_drain(struct server *s)
{
    if (!s || atomic_exchange(&s->draining, true))
        return;
    httpd_quiesce(s->httpd);
}

int server_requests_active(struct server *s)
{
    return s ? atomic_load(&s->requests) : 0;
}

void server_stop(struct server *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);  // pulls and waits see their clients gone
    sched_shutdown(s->sched);
    bool handlers_done = httpd_stop(s->httpd);
    if (!producers_wait(s, 10) || !handlers_done)
        return;  // a thread still uses the store: leaking it beats freeing it under the thread
    srv_registry_release(s);
    server_free(s);
}

// The one HTTP server wrapper (over libmicrohttpd), used by `ollama serve`
// and by the runner's internal port. No other file includes microhttpd.h.
//
// Model: a few event threads (epoll) own every socket; an idle or slow
// connection costs a small state block, never a thread. Once a request's
// headers and body are in, the connection is suspended and the app's
// handler runs on a thread of its own, so a handler may block (wait for a
// model, a pull, an embedding) without stalling other connections. A
// streamed reply is fed by any thread through httpd_stream_write; the event
// thread sends what is queued and parks the connection while nothing is.
//
// Hostile clients: headers must arrive within the header timeout, a body
// must not stall longer than the body timeout, an idle keep-alive
// connection closes after the idle timeout; a reply in progress is never cut
// by these. Bodies above the limit get 413 (before they are read when the
// length is announced; a chunked body is counted as it arrives). Past the
// connection cap new connections are refused at once (one log line per
// burst). See docs/ARCHITECTURE.md (HTTP layer) for the figures.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/util.h"

struct httpd;
struct httpd_req;
struct httpd_stream;

// Limits and timeouts; a timeout of 0 disables it.
struct httpd_limits {
    uint64_t max_body_bytes;    // request bodies above this get 413
    unsigned header_timeout_s;  // no header byte for this long: dropped
    unsigned body_timeout_s;    // no body byte for this long: dropped
    unsigned idle_timeout_s;    // keep-alive connection with no request: closed
    unsigned max_connections;   // open connections past this are refused
};

// Defaults (30 s header, 60 s body stall, 120 s idle, a cap from the
// descriptor limit) then the environment: OLLAMA_HTTP_HEADER_TIMEOUT,
// OLLAMA_HTTP_BODY_TIMEOUT, OLLAMA_HTTP_IDLE_TIMEOUT (Go durations, "0" =
// none), OLLAMA_HTTP_MAX_CONNECTIONS and OLLAMA_HTTP_MAX_BODY (bytes).
// Bad values warn and keep the default.
void httpd_limits_load(struct httpd_limits *l, uint64_t default_max_body);

// Raises the soft RLIMIT_NOFILE to the hard limit and logs both (once per
// process); returns the soft limit now in force.
uint64_t httpd_raise_fd_limit(void);

// A routing table row; tables end with a row whose pattern is NULL.
struct httpd_route {
    const char *method;   // "GET", "POST", ...; HEAD requests match GET rows
    const char *pattern;  // an exact path, or a prefix ending in '*'
    const void *data;     // the app's, handed back by httpd_req_route
    bool stream_body;     // the body goes to the body callback unlimited (uploads)
};

// One finished request, for the app's access log and metrics.
struct httpd_observation {
    const char *method;
    const char *path;
    int status;                   // 0 when the connection ended before a reply
    int64_t latency_ns;           // from the end of the headers to the end of the reply
    const char *client;           // "127.0.0.1:54321", "[::1]:54321" or ""
    const struct sockaddr *peer;  // the client's address, or NULL
    void *data;                   // the app's per-request data (httpd_req_set_data)
};

struct httpd_config {
    const char *name;             // in log lines: "server", "runner"
    const struct sockaddr *addr;  // NULL: every address (dual stack)
    uint16_t port;                // 0: any free port
    struct httpd_limits limits;
    const struct httpd_route *const *routes;  // tables, NULL-terminated list
    bool redirect_trailing_slash;  // "/x/" answers 301 (GET) / 307 to "/x" when "/x" routes
    void *ctx;                     // httpd_ctx() returns it
    // Headers are in (event thread; must not block). May answer at once
    // with httpd_reply (403, a CORS preflight): then nothing else runs.
    void (*begin)(struct httpd_req *r);
    // No route for the path (404) or the method (405): the app's wording.
    void (*unrouted)(struct httpd_req *r, int status);
    // A chunk of the body of a routed request (event thread). Returns < 0
    // to ignore the rest (the handler still runs and replies).
    int (*body)(struct httpd_req *r, const char *p, size_t n);
    // The request is complete: runs on its own thread and must end with a
    // reply (httpd_reply*) or a stream (httpd_stream_start).
    void (*handle)(struct httpd_req *r);
    // Optional: called once per request with a reply, when it is done.
    void (*observe)(void *ctx, const struct httpd_observation *o);
};

// Starts listening (the threads run until httpd_stop).
int httpd_start(struct httpd **out, const struct httpd_config *cfg, struct err *e);
uint16_t httpd_port(const struct httpd *d);
// Stops accepting: the listening socket is closed, so new connections are
// refused at once; connections already open (keep-alive ones included)
// are still served until httpd_stop. Safe to call more than once.
void httpd_quiesce(struct httpd *d);
// Stops accepting, waits a bounded time for running handlers, closes every
// connection and frees d. Returns false when a handler still runs after the
// grace period (d is then left allocated, and so must be whatever the
// handlers use).
bool httpd_stop(struct httpd *d);
void *httpd_ctx(const struct httpd_req *r);

// The request.
const char *httpd_req_method(const struct httpd_req *r);
const char *httpd_req_path(const struct httpd_req *r);
// The route's data, and the part of the path its '*' matched (or NULL).
const void *httpd_req_route(const struct httpd_req *r);
const char *httpd_req_param(const struct httpd_req *r);
const char *httpd_req_header(const struct httpd_req *r, const char *name);
const char *httpd_req_query(const struct httpd_req *r, const char *name);
// The app's per-request state (freed with free_fn when the request ends).
void httpd_req_set_data(struct httpd_req *r, void *data, void (*free_fn)(void *));
void *httpd_req_data(const struct httpd_req *r);
// The client socket (for hang-up polls while a handler runs), or -1.
int httpd_req_fd(const struct httpd_req *r);
// True when the client has hung up (polls the socket).
bool httpd_req_client_gone(const struct httpd_req *r);

// Replies (the last one set wins; headers accumulate).
void httpd_reply(struct httpd_req *r, int status, const char *content_type, const void *body,
                 size_t len);
void httpd_reply_header(struct httpd_req *r, const char *name, const char *value);
// The reply body is len bytes of fd from offset (fd is owned from here on).
int httpd_reply_fd(struct httpd_req *r, int status, int fd, uint64_t offset, uint64_t len);
// A reply that announces a length but sends no body (HEAD).
void httpd_reply_length(struct httpd_req *r, int status, uint64_t len);
bool httpd_replied(const struct httpd_req *r);

// Runs fn(arg) on a new detached thread; 0, or ERR_INTERNAL when the
// thread cannot start.
int httpd_spawn(void *(*fn)(void *), void *arg);

// Streamed replies: bytes written by any thread are sent as they come. The
// writer holds a reference until httpd_stream_end. max_pending bounds what
// may wait for a slow reader (past it the stream counts as cancelled).
struct httpd_stream *httpd_stream_start(struct httpd_req *r, int status, const char *content_type,
                                        size_t max_pending);
// 0, ERR_CANCELLED once the client is gone, ERR_TOO_LARGE past max_pending.
int httpd_stream_write(struct httpd_stream *st, const void *p, size_t n);
// True once the client has hung up or the reply was torn down.
bool httpd_stream_gone(struct httpd_stream *st);
// The writer is done (error: end the reply as broken, not complete).
void httpd_stream_end(struct httpd_stream *st, bool error);

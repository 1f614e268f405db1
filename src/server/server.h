// server: `ollama serve` — the HTTP API on OLLAMA_HOST (libmicrohttpd), its
// routing, CORS / allowed-host checks, and (in later layers) the scheduler
// that owns runner processes. The public surface is small: start, stop, and
// the mapping from error codes to HTTP statuses.
#pragma once

#include <stdint.h>

#include "util/util.h"

struct server;

struct server_options {
    const struct env_config *cfg;  // borrowed; must outlive the server
    const char *self_exe;          // path of the ollama binary (runners are started from it)
};

// Binds and starts serving in background threads. *out written on success.
int server_start(struct server **out, const struct server_options *opts, struct err *e);
// The port actually bound (useful with port 0).
uint16_t server_port(const struct server *s);
// Stops accepting, finishes or cancels in-flight requests, frees everything.
void server_stop(struct server *s);
// Graceful drain, the first step of a SIGTERM (a rolling restart behind a
// balancer): the listening socket is closed (connects are refused, so a
// balancer's health check fails and its retries go elsewhere), and a request
// that still arrives on an open keep-alive connection gets 503 with
// Retry-After and Connection: close. Requests already being handled
// (streams included) run on. Returns at once; server_requests_active says
// when they are done.
void server_drain(struct server *s);
// Requests in progress: their handler has started (the whole body is in)
// and their reply, stream included, has not ended.
int server_requests_active(struct server *s);

// `ollama serve`: loads the environment, starts, logs "Listening on ...",
// and blocks until SIGINT or SIGTERM. Returns the process exit status.
int server_main(const char *self_exe);

// HTTP status for a negative ERR_* code (400, 404, 413, 500, 503, ...).
int server_http_status(int rc);

// client: the HTTP client of the Ollama API over libcurl, used by the CLI and
// by tests. It resolves OLLAMA_HOST the way Ollama's client does (cli.md §1)
// and surfaces the server's error messages.
#pragma once

#include <stdint.h>

#include "util/util.h"

struct client;

// A client for base_url ("http://127.0.0.1:11434"); NULL means OLLAMA_HOST.
int client_new(struct client **out, const char *base_url, struct err *e);
void client_free(struct client *c);
const char *client_base_url(const struct client *c);

// One request with an optional body; the response body lands in resp
// (capped) and the status in *status. Fails only when the server cannot be
// reached (ERR_NETWORK with Ollama's "could not connect" wording) or the
// response is too large.
int client_request(struct client *c, const char *method, const char *path, const char *body,
                   size_t body_len, long *status, struct buf *resp, struct err *e);

// HEAD / : 0 when the server answers.
int client_heartbeat(struct client *c, struct err *e);

// Callback for streamed responses: called once per complete line (without
// the newline). Return < 0 to stop reading.
typedef int (*client_line_fn)(void *ctx, const char *line, size_t len);
// POST with a JSON body, reading an NDJSON (or any line-based) response.
// Non-2xx statuses are reported through *status with the body in err_body.
int client_stream(struct client *c, const char *method, const char *path, const char *body,
                  size_t body_len, client_line_fn fn, void *ctx, long *status,
                  struct buf *err_body, struct err *e);

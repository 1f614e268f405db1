// client: the HTTP client of the Ollama API over the httpc wrapper (libcurl), used by the CLI and
// by tests. It resolves OLLAMA_HOST the way Ollama's client does (cli.md §1)
// and surfaces the server's error messages (cli.md §1.3): a non-streaming
// call that fails reports the server's `error` string; a streaming call
// answered with status >= 400 reports "<status line>: <error>"; an error line
// inside a 200 stream reports its message; a body that is not JSON is
// reported as it is.
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "json/json.h"
#include "util/util.h"

struct client;

// A client for base_url ("http://127.0.0.1:11434"); NULL means OLLAMA_HOST
// (an unspecified host such as 0.0.0.0 becomes the loopback address).
int client_new(struct client **out, const char *base_url, struct err *e);
void client_free(struct client *c);
const char *client_base_url(const struct client *c);
// Base URL a client would use for this OLLAMA_HOST value (NULL/"" = default).
int client_url_from_host(const char *ollama_host, char *out, size_t n, struct err *e);

// Transfers in progress abort (ERR_CANCELLED) soon after *flag becomes
// non-zero, e.g. from a SIGINT handler. NULL turns this off.
void client_set_cancel(struct client *c, const volatile sig_atomic_t *flag);

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
// A request reading a line-based (NDJSON) response. Non-2xx statuses are
// reported through *status with the body in err_body.
int client_stream(struct client *c, const char *method, const char *path, const char *body,
                  size_t body_len, client_line_fn fn, void *ctx, long *status, struct buf *err_body,
                  struct err *e);

// "404 Not Found": the status line text Go's net/http prints.
const char *client_status_text(long status);

// A JSON call. req may be NULL (no body). *out (out may be NULL) receives
// the parsed response, or NULL for an empty body. Status >= 400 fails with
// the server's message; the code is ERR_NOT_FOUND for 404, ERR_INVALID for
// 400, ERR_UNAUTHORIZED for 401/403, ERR_BUSY for 503, else ERR_INTERNAL.
int client_call(struct client *c, const char *method, const char *path, const json_t *req,
                json_t **out, struct err *e);

// Called once per streamed JSON object (borrowed: valid during the call).
// Return < 0 (with e set) to stop; that error is returned by the call.
typedef int (*client_json_fn)(void *ctx, const json_t *obj, struct err *e);
// POST path with req, reading an NDJSON stream. Objects carrying "error"
// end the stream with that message (not passed to fn).
int client_call_stream(struct client *c, const char *path, const json_t *req, client_json_fn fn,
                       void *ctx, struct err *e);

// Typed calls (api.md). Objects returned through out are owned by the caller.
int client_version(struct client *c, char *out, size_t n, struct err *e);  // GET /api/version
int client_list(struct client *c, json_t **out, struct err *e);            // GET /api/tags
int client_ps(struct client *c, json_t **out, struct err *e);              // GET /api/ps
int client_show(struct client *c, const json_t *req, json_t **out, struct err *e);
int client_copy(struct client *c, const char *src, const char *dst, struct err *e);
int client_delete(struct client *c, const char *model, struct err *e);
int client_embed(struct client *c, const json_t *req, json_t **out, struct err *e);
int client_create(struct client *c, const json_t *req, client_json_fn fn, void *ctx, struct err *e);
int client_pull(struct client *c, const char *model, bool insecure, client_json_fn fn, void *ctx,
                struct err *e);
int client_push(struct client *c, const char *model, bool insecure, client_json_fn fn, void *ctx,
                struct err *e);
int client_generate(struct client *c, const json_t *req, client_json_fn fn, void *ctx,
                    struct err *e);
int client_chat(struct client *c, const json_t *req, client_json_fn fn, void *ctx, struct err *e);

// HEAD /api/blobs/<digest> ("sha256:<hex>"): *exists set on 200/404.
int client_blob_exists(struct client *c, const char *digest, bool *exists, struct err *e);
// Progress of an upload: bytes sent so far of total.
typedef void (*client_progress_fn)(void *ctx, uint64_t sent, uint64_t total);
// POST /api/blobs/<digest> with the file at path as the body.
int client_blob_upload(struct client *c, const char *digest, const char *path,
                       client_progress_fn fn, void *ctx, struct err *e);

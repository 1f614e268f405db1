// HTTP to a runner process on loopback (the protocol of src/runner/PROTOCOL.md),
// over the httpc wrapper. Private to the server module.
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "json/json.h"
#include "util/util.h"

// GET or POST (body != NULL) returning one JSON value. *status is the HTTP
// status. ERR_NETWORK when the runner cannot be reached.
int runner_http_json(uint16_t port, const char *path, const json_t *body, int timeout_ms,
                     long *status, json_t **out, struct err *e);

// Called per NDJSON line; return < 0 to stop (the connection is closed, which
// cancels the runner's work).
typedef int (*runner_line_fn)(void *ctx, const json_t *line);
// Polled about every 100 ms while waiting; true aborts the request.
typedef bool (*runner_cancel_fn)(void *ctx);

// POSTs body and feeds each NDJSON line of the response to fn. A non-2xx
// answer is returned as ERR_INTERNAL (ERR_INVALID for 400) with the runner's
// error message. ERR_CANCELLED when cancel() said so or fn stopped;
// ERR_NETWORK when the connection failed or dropped before a final line.
int runner_http_stream(uint16_t port, const char *path, const json_t *body, runner_line_fn fn,
                       void *ctx, runner_cancel_fn cancel, void *cancel_ctx, struct err *e);

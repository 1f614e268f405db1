// httpc: the one libcurl wrapper. Every HTTP request ollama-c makes goes
// through httpc_perform: the API client of the CLI (client/), the registry
// client (registry/) and the server's calls to its runners
// (server/runner_client.c). No other file includes <curl/curl.h>.
//
// A request is a plain struct: method, URL, header lines, a body in memory
// or read through a callback, timeouts, and callbacks for the response's
// header lines, its body as it arrives and the transfer's progress (which
// can stop it). libcurl's global state is set up once, on first use.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// read callback: fills out with up to n bytes and returns how many; 0 at the
// end of the body; HTTPC_READ_ABORT stops the transfer.
#define HTTPC_READ_ABORT ((size_t)-1)

struct httpc_request {
    const char *method;  // "GET" (NULL too), "HEAD", "POST", "PUT", "PATCH", "DELETE"
    const char *url;
    const char *const *headers;  // "Name: value" lines, NULL-terminated; may be NULL
    // The body: in memory (body != NULL), or streamed through read (for
    // read_size bytes, sent with that Content-Length); neither for none.
    const char *body;
    size_t body_len;
    size_t (*read)(void *ctx, char *out, size_t n);
    int64_t read_size;
    const char *user_agent;   // NULL: none
    long timeout_ms;          // the whole transfer; 0: no limit
    long connect_timeout_ms;  // 0: libcurl's default
    bool loopback;            // never through a proxy (runner calls)
    bool follow_redirects;    // up to 10, http and https only, credentials not carried
    bool large_buffer;        // 512 KiB receive buffer (blob downloads)
    // Response callbacks; returning false stops the transfer.
    // Every header line as received (status lines of redirects and 100s too).
    bool (*on_header)(void *ctx, const char *line, size_t n);
    // The body in pieces, with the status of the response they belong to.
    bool (*on_data)(void *ctx, long status, const char *p, size_t n);
    // Bytes received and sent so far, called while the transfer runs (also
    // while it is idle, about once a second).
    bool (*on_progress)(void *ctx, uint64_t down, uint64_t up);
    void *ctx;           // for on_header and on_data
    void *read_ctx;      // for read (ctx when NULL)
    void *progress_ctx;  // for on_progress (ctx when NULL)
};

// Why a transfer did not complete.
enum httpc_fail {
    HTTPC_OK = 0,
    HTTPC_CONNECT,    // could not resolve the host or connect
    HTTPC_STOPPED,    // on_header or on_data returned false
    HTTPC_ABORTED,    // on_progress returned false
    HTTPC_REDIRECTS,  // more than 10 redirects
    HTTPC_NOMEM,      // no handle could be made
    HTTPC_OTHER,      // anything else: see msg
};

struct httpc_result {
    long status;  // of the last response; 0 when none arrived
    enum httpc_fail fail;
    const char *msg;      // libcurl's words for the failure (static), "" on success
    char *effective_url;  // owned: the URL after redirects (the request's without)
};

// Sets up libcurl's global state (once; httpc_perform does it too). Modules
// that start threads which will make requests call it before they do.
void httpc_init(void);

// Runs rq to the end. 0 when the transfer completed (any status), -1 when
// it did not, with res->fail saying why. Free res with httpc_result_deinit.
int httpc_perform(const struct httpc_request *rq, struct httpc_result *res);
void httpc_result_deinit(struct httpc_result *res);

// loc (a Location header) made absolute against base; a new string.
char *httpc_resolve_url(const char *base, const char *loc);

// An on_data that collects an OK body into a struct buf (ctx); false when the
// buffer's cap is reached.
bool httpc_collect(void *buf, long status, const char *p, size_t n);

// Splits a response body into lines (NDJSON): feed it on_data's pieces with
// httpc_lines_feed; each complete non-empty line goes to fn (which returns
// false to stop), and a body with a status outside 2xx is kept whole in
// err_body instead (when given).
struct buf;
struct httpc_lines {
    bool (*fn)(void *ctx, const char *line, size_t n);
    void *ctx;
    struct buf *line;      // the line being read (its cap bounds a line)
    struct buf *err_body;  // may be NULL
    long status;           // of the first piece
    bool too_long;         // a line or the error body passed its cap
};
bool httpc_lines_feed(void *lines, long status, const char *p, size_t n);

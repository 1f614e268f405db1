// Shared between the server's own files: the request object handed to route
// handlers, the reply and streaming helpers, and the route table.
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "json/json.h"
#include "store/store.h"
#include "template/template.h"
#include "server/server.h"
#include "util/util.h"

// Largest JSON request body accepted (bigger bodies get 413). Images in chat
// requests are base64 in the body, so this is generous.
#define SERVER_MAX_BODY_BYTES (256u * 1024 * 1024)

struct server;
struct srv_stream;

// An output encoder for a streamed reply (openai.c uses it to turn native
// NDJSON objects into Server-Sent Events). Set on a request before its
// handler runs; srv_stream_start takes it over (ctx included) and then every
// object the handler writes with srv_stream_json_line goes to encode()
// instead of becoming an NDJSON line, and finish() runs once in
// srv_stream_end, before the stream closes. If no stream starts, whoever set
// it frees ctx.
struct srv_encoder {
    const char *content_type;  // static string; replaces the handler's
    int (*encode)(void *ctx, struct srv_stream *st, const json_t *obj);
    void (*finish)(void *ctx, struct srv_stream *st);
    void (*free)(void *ctx);
    void *ctx;
};

// One HTTP request, owned by the connection. Handlers read it and answer with
// exactly one srv_reply_* call or one srv_stream_start.
struct srv_req {
    struct server *srv;
    void *conn;  // struct MHD_Connection *, only http.c looks inside
    const char *method;
    const char *url;    // path without query
    const char *param;  // the part of the path matched by a route's '*' (or NULL)
    struct buf body;    // the request body (capped), unless the route streams it
    bool body_too_large;
    // Reply to send (set by srv_reply_*); a stream replaces it.
    int status;
    char *content_type;
    char *reply_body;
    size_t reply_len;
    struct srv_stream *stream;
    char *location;      // Location header for redirects, or NULL
    void *mhd_response;  // a prepared struct MHD_Response * sent as is (registry /v2/), or NULL
    // Per-route state for streamed request bodies (blob uploads); freed with
    // upload_free when the request ends without the handler taking it.
    void *upload;
    void (*upload_free)(void *upload);
    bool upload_started;
    int upload_rc;
    struct err upload_err;
    // Output encoder for the next stream (encode == NULL: plain NDJSON).
    struct srv_encoder encoder;
};

typedef void (*srv_handler_fn)(struct srv_req *r);
// For routes that stream their request body (blob uploads): called for each
// chunk; return < 0 to fail the upload (the handler still runs and replies).
typedef int (*srv_body_fn)(struct srv_req *r, const char *p, size_t n);

struct srv_route {
    const char *method;   // "GET", "POST", ...; HEAD is served by GET routes
    const char *pattern;  // exact path, or a prefix ending in '*'
    srv_handler_fn handler;
    srv_body_fn on_body;  // NULL: buffer the body (capped)
};

// Route tables: each area's file exports one (rows ended by a NULL row);
// routes.c lists them in server_route_tables (NULL-terminated).
extern const struct srv_route server_core_routes[];
extern const struct srv_route server_model_routes[];
extern const struct srv_route server_generate_routes[];
extern const struct srv_route server_openai_routes[];
extern const struct srv_route server_registry_routes[];
// store_pull_fn for create FROM a model that is not local (registry_routes.c); ctx = server.
int srv_registry_pull(void *ctx, const char *name, store_progress_fn progress, void *progress_ctx,
                      struct err *e);
extern const struct srv_route *const server_route_tables[];

// OpenAI translation (openai.c; spec/openai.md), exposed for tests.
// A /v1/chat/completions or /v1/completions body (any JSON object) → the
// native /api/chat or /api/generate body; NULL with e set (a 400: wrong
// field types with the decoder's wording, or upstream's translation errors).
json_t *srv_openai_chat_request(const json_t *body, struct err *e);
json_t *srv_openai_completion_request(const json_t *body, struct err *e);
// A native non-streamed answer → chat.completion / text_completion object.
json_t *srv_openai_chat_completion(const char *id, const json_t *native);
json_t *srv_openai_text_completion(const char *id, const json_t *native, bool chunk);
// Streaming: one state per stream (free() it); each native object appends
// its SSE events ("data: {...}\n\n") to out. [DONE] is the caller's.
struct srv_openai_stream;
struct srv_openai_stream *srv_openai_stream_new(bool chat, bool include_usage);
void srv_openai_stream_encode(struct srv_openai_stream *s, const json_t *native, struct buf *out);
// Standard base64 with padding; valid = what Go's StdEncoding decodes.
void srv_base64_encode(const unsigned char *p, size_t n, struct buf *out);
bool srv_base64_valid(const char *s);

// Prompt sources (prompt_source.c). A chat for a model whose source is its
// GGUF Jinja chat template (store_prompt_choose), rendered with the context
// Ollama 0.33 hands llama-server, truncated like the Go path (oldest
// non-system messages dropped until it fits n_ctx tokens).
struct srv_prompt_req {
    const struct store_prompt_choice *pc;
    json_t *messages;  // the assembled chat (API messages)
    json_t *tools;     // request tools, or NULL
    struct template_think think;
    bool truncate;
    int64_t n_ctx;
    template_count_fn count;  // NULL: no truncation
    void *count_ctx;
};
int srv_prompt_render_jinja(const struct srv_prompt_req *r, struct buf *out, struct err *e);

// Options (options.c): merges model params and request options with type
// checks (ERR_INTERNAL "option \"top_k\" must be of type integer").
int srv_options_merge(const json_t *model_params, const json_t *request, json_t **out,
                      struct err *e);
int64_t srv_option_int(const json_t *options, const char *name, int64_t dflt);
// keep_alive of a request body: *set false when absent; ns < 0 = forever.
int srv_keep_alive(const json_t *body, bool *set, int64_t *ns, struct err *e);
// True when the client of r has closed its connection (socket hang-up).
bool srv_client_gone(struct srv_req *r);

// The "model" field of a request body (legacy "name"); replies (400 for a
// type error; empty_status 400 "model is required" or 404 "model '' not
// found" when empty) and returns NULL when missing.
const char *srv_model_field(struct srv_req *r, const json_t *body, int empty_status);

struct server {
    const struct env_config *cfg;
    const char *self_exe;
    void *daemon;  // struct MHD_Daemon *
    uint16_t port;
    bool loopback;  // listening on a loopback address: Host header checked
    struct store *store;
    struct sched *sched;
};

// Replies.
void srv_reply(struct srv_req *r, int status, const char *content_type, const char *body,
               size_t len);
void srv_reply_text(struct srv_req *r, int status, const char *text);
// Takes a reference to obj (decref'd after serialisation).
void srv_reply_json(struct srv_req *r, int status, json_t *obj);
// {"error": "..."} with the given status.
void srv_reply_error(struct srv_req *r, int status, const char *msg);
// Status from rc, message from e (or rc's default message).
void srv_reply_err(struct srv_req *r, int rc, const struct err *e);

// Parses the request body as a JSON object: 400 "missing request body" when
// empty, 400 with the decoder's message when malformed. Returns NULL after
// replying on failure.
json_t *srv_body_json(struct srv_req *r);

// Streaming replies (NDJSON, SSE): the producer runs on its own thread and
// writes chunks; the connection thread sends them as they come. The producer
// owns a reference until srv_stream_end.
typedef void (*srv_producer_fn)(struct srv_stream *st, void *arg);
// Starts a stream with the given status and content type; fn(st, arg) runs on
// a new thread. Returns < 0 (and replies 500) if the thread cannot start.
int srv_stream_start(struct srv_req *r, int status, const char *content_type, srv_producer_fn fn,
                     void *arg);
// Queues bytes. Returns ERR_CANCELLED once the client has gone away.
int srv_stream_write(struct srv_stream *st, const char *p, size_t n);
// Writes obj as one NDJSON line (takes a reference).
int srv_stream_json_line(struct srv_stream *st, json_t *obj);
bool srv_stream_cancelled(struct srv_stream *st);
// Ends the stream (the producer must not touch st afterwards).
void srv_stream_end(struct srv_stream *st);

// Request header lookup (case-insensitive), or NULL.
const char *srv_header(struct srv_req *r, const char *name);
// Query string argument, or NULL.
const char *srv_query(struct srv_req *r, const char *name);

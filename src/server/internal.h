// Shared between the server's own files: the request object handed to route
// handlers, the reply and streaming helpers, and the route table.
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "httpd/httpd.h"
#include "json/json.h"
#include "store/store.h"
#include "server/server.h"
#include "util/util.h"

// Largest JSON request body accepted (bigger bodies get 413). Images in chat
// requests are base64 in the body, so this is generous.
#define SERVER_MAX_BODY_BYTES (256u * 1024 * 1024)
// Retry-After of every 503 (full queue, draining server), in seconds.
#define SRV_RETRY_AFTER_S "1"

// The error of every cloud-only route and CLI command (Ollama's wording with
// cloud disabled, and why).
#define SERVER_NO_CLOUD_MSG "ollama cloud is disabled: this build has no ollama.com account support"

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
    struct httpd_req *h;  // the wrapper's request (headers, direct replies)
    const char *method;
    const char *url;    // path without query
    const char *param;  // the part of the path matched by a route's '*' (or NULL)
    struct buf body;    // the request body (the wrapper caps it), unless the route streams it
    // Reply to send (set by srv_reply_*); a stream replaces it.
    int status;
    char *content_type;
    char *reply_body;
    size_t reply_len;
    struct srv_stream *stream;
    bool raw_reply;  // the reply was set on h directly (registry /v2/ files and headers)
    // Per-route state for streamed request bodies (blob uploads); freed with
    // upload_free when the request ends without the handler taking it.
    void *upload;
    void (*upload_free)(void *upload);
    bool upload_started;
    int upload_rc;
    struct err upload_err;
    // Output encoder for the next stream (encode == NULL: plain NDJSON).
    struct srv_encoder encoder;
    // Set by a translating route before srv_run_native on /api/chat or
    // /api/generate: render and count the prompt's tokens, generate nothing
    // (/v1/messages/count_tokens). Never set from a request body.
    bool count_prompt_tokens;
    bool counted;  // counted in srv->requests (its handler has started)
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
extern const struct srv_route server_anthropic_routes[];
extern const struct srv_route server_responses_routes[];
extern const struct srv_route server_metrics_routes[];
// store_pull_fn for create FROM a model that is not local (registry_routes.c); ctx = server.
int srv_registry_pull(void *ctx, const char *name, store_progress_fn progress, void *progress_ctx,
                      struct err *e);
extern const struct srv_route *const server_route_tables[];
// Frees the registry client of srv's store (at shutdown, before the store):
// background mirror pulls are cancelled and waited for.
void srv_registry_release(struct server *srv);

// OpenAI translation (openai.c; docs/spec/openai.md), exposed for tests.
// A /v1/chat/completions or /v1/completions body (any JSON object) → the
// native /api/chat or /api/generate body; NULL with e set (a 400: wrong
// field types with the decoder's wording, or upstream's translation errors).
json_t *srv_openai_chat_request(const json_t *body, struct err *e);
json_t *srv_openai_completion_request(const json_t *body, struct err *e);
// OpenAI's error body, {"error": {"message", "type", "param", "code"}}, the
// type from the status (also the Responses API's); and a reply with it.
json_t *srv_openai_error(int status, const char *msg);
void srv_openai_reply_error(struct srv_req *r, int status, const char *msg);
// A native non-streamed answer → chat.completion / text_completion object.
json_t *srv_openai_chat_completion(const char *id, const json_t *native);
json_t *srv_openai_text_completion(const char *id, const json_t *native, bool chunk);
// Streaming: one state per stream (free() it); each native object appends
// its SSE events ("data: {...}\n\n") to out. [DONE] is the caller's.
struct srv_openai_stream;
struct srv_openai_stream *srv_openai_stream_new(bool chat, bool include_usage);
void srv_openai_stream_encode(struct srv_openai_stream *s, const json_t *native, struct buf *out);

// The translation layers in front of the native handlers (openai.c,
// anthropic.c, responses.c) share these. srv_run_native replaces r's body
// with native and runs the native handler for POST path on r; with enc set,
// a stream the handler starts goes through enc (enc->ctx becomes NULL when
// the stream took it over; otherwise the caller still owns it). Returns
// SRV_NATIVE_STREAMED (the stream is running), SRV_NATIVE_REPLIED (the
// native reply is in r->status / r->reply_body, to be rewritten), or < 0
// without replying (ERR_TOO_LARGE: body over the cap; ERR_INTERNAL).
enum { SRV_NATIVE_REPLIED = 0, SRV_NATIVE_STREAMED = 1 };
int srv_run_native(struct srv_req *r, const char *path, const json_t *native,
                   struct srv_encoder *enc);
// The native reply parsed (NULL if not JSON); the caller owns it.
json_t *srv_native_reply(const struct srv_req *r);
// The message of a native error reply ({"error": "..."} or the raw text); free() it.
char *srv_native_error_msg(const struct srv_req *r);
// The name of the tool whose call (in native or OpenAI messages' tool_calls)
// has this id, or "" (the last match wins). Borrowed from messages.
const char *srv_tool_name_for(const json_t *messages, const char *id);
// A data: URL → its base64 payload (borrowed), or NULL with e set ("invalid
// image input"; http(s) URLs are refused with Ollama's wording).
const char *srv_image_payload(const char *url, struct err *e);
// reasoning.effort (or reasoning_effort) of a body → native think, NULL when
// unset; an unknown level is an error with Ollama's wording.
int srv_openai_effort(const json_t *body, json_t **think, struct err *e);
// tool_choice that forces a call (anthropic.c): the JSON schema of
// {"name", "arguments"} for the tool named only (or any of the native tools
// when only is NULL), and, on the answer, that JSON turned into the message's
// tool call (ids "<id_prefix>_<hex>") unless the model's own tool-call
// format was recognised.
json_t *srv_forced_call_schema(const json_t *native_tools, const char *only);
void srv_forced_call_from_content(json_t *native, const char *id_prefix);

// images.c: adds the request's pictures that the rendered prompt's
// "[img-N]" tags name to a runner /completion body ("images").
void srv_images_attach(json_t *runner_body, const json_t *req_body, bool chat, const char *prompt,
                       size_t len);
// Field types of a request, checked as Go's decoder checks a struct: kind
// 'S' string, 'I' integer, 'N' number, 'B' bool, 'A' array, 'O' object;
// null or absent passes. A mismatch is ERR_INVALID with the decoder's wording.
struct srv_go_field {
    const char *name;
    char kind;
    const char *go_type;
};
int srv_check_go_fields(const json_t *body, const struct srv_go_field *fields, size_t n,
                        const char *go_struct, struct err *e);

// Shared by the translated APIs that run /api/chat on the same request
// (compat.c). error makes the API's error body for a status and message.
typedef json_t *(*srv_error_fn)(int status, const char *msg);
// A stream state's encoder: appends the events it makes of one native object.
typedef void (*srv_events_fn)(void *state, const json_t *native, struct buf *out);
// The request body as a JSON object (the caller owns it), or NULL after
// replying 400 ("EOF" for an empty body, as Go's decoder says).
json_t *srv_compat_body(struct srv_req *r, srv_error_fn error);
// Replies in the API's shape when srv_run_native failed (rc < 0: 413 or 500)
// or the native handler answered an error (relayed with its status); returns
// true when it replied, false when the run succeeded.
bool srv_compat_failed(struct srv_req *r, int rc, srv_error_fn error);
// Writes to st the events encode makes of native (nothing when none).
int srv_compat_stream_events(struct srv_stream *st, srv_events_fn encode, void *state,
                             const json_t *native);
// Replies 200 text/event-stream with the events encode makes of native (a
// stream asked for and answered in one piece).
void srv_compat_reply_events(struct srv_req *r, srv_events_fn encode, void *state,
                             const json_t *native);

// A translated API as srv_compat_chat runs it.
struct srv_compat_api {
    srv_error_fn error;    // the API's error body
    srv_events_fn events;  // a stream state's events for one native object
    void (*free_state)(void *state);
    const char *call_prefix;  // id prefix of a call forced by tool_choice
    // The non-streamed answer in the API's shape (a new reference).
    json_t *(*answer)(const json_t *native, void *arg);
};
// Runs native on /api/chat and replies: as events through state while the
// native stream runs (stream and not forced), or from the whole native answer
// (as events when stream, else api->answer(native, arg)); forced: a call
// required by tool_choice, generated in one piece (native's "stream" is set
// false here) and read back from the content. Takes state (freed with
// api->free_state when the stream is over or was never started).
void srv_compat_chat(struct srv_req *r, json_t *native, bool stream, bool forced,
                     const struct srv_compat_api *api, void *state, void *arg);

// Anthropic Messages translation (anthropic.c), exposed for tests and fuzzing.
// A /v1/messages body (any JSON object) → the native /api/chat body; NULL
// with e set (a 400 with Ollama's wording).
json_t *srv_anthropic_request(const json_t *body, struct err *e);
// A native non-streamed chat answer → Anthropic Message object.
json_t *srv_anthropic_response(const char *id, const char *model, const json_t *native);
// {"type":"error","error":{type,message},"request_id"}; type from the status.
json_t *srv_anthropic_error(int status, const char *msg);
// "<prefix>_<24 hex digits>" (msg_, toolu_, req_) into out.
void srv_anthropic_id(char *out, size_t n, const char *prefix);
// Streaming: one state per stream; each native object appends its events
// ("event: NAME\ndata: {...}\n\n") to out.
struct srv_anthropic_stream;
struct srv_anthropic_stream *srv_anthropic_stream_new(const char *id, const char *model);
void srv_anthropic_stream_encode(struct srv_anthropic_stream *s, const json_t *native,
                                 struct buf *out);
void srv_anthropic_stream_free(struct srv_anthropic_stream *s);

// Responses API translation (responses.c), exposed for tests and fuzzing.
// A /v1/responses body → the native /api/chat body; NULL with e set (a 400).
json_t *srv_responses_request(const json_t *body, struct err *e);
// A native non-streamed chat answer → Response object echoing the request.
json_t *srv_responses_response(const json_t *req, const char *resp_id, const char *item_id,
                               const json_t *native);
// Streaming: one state per stream; each native object appends its events
// ("event: response.X\ndata: {...,\"sequence_number\":n}\n\n") to out.
struct srv_responses_stream;
struct srv_responses_stream *srv_responses_stream_new(const json_t *req, const char *resp_id,
                                                      const char *item_id);
void srv_responses_stream_encode(struct srv_responses_stream *s, const json_t *native,
                                 struct buf *out);
void srv_responses_stream_free(struct srv_responses_stream *s);

// Observability (metrics.c). http.c calls server_observe_request once per
// finished request (the httpd observation hook; client "ip:port", may be ""):
// the access-log line at INFO and the request counters. The others add to
// the counters; all are lock-free and thread-safe.
void server_observe_request(const char *method, const char *path, int status, int64_t latency_ns,
                            const char *client);
void server_metrics_tokens(int64_t prompt, int64_t generated, int64_t generation_ns);
void server_metrics_pulled(uint64_t bytes);
// The /metrics page (Prometheus text format) into out.
void srv_metrics_text(struct server *srv, struct buf *out);

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
    struct httpd *httpd;
    struct httpd_route *routes;  // every srv_route, for the wrapper
    const struct httpd_route *route_tables[2];
    pthread_mutex_t producers_mu;
    pthread_cond_t producers_cv;  // producers reached 0
    int producers;                // (producers_mu) stream producer threads running
    atomic_bool stopping;         // server_stop has begun: every client counts as gone
    atomic_bool draining;         // server_drain has begun: new requests get 503
    atomic_int requests;          // requests whose handler has started and that have not ended
    uint16_t port;
    bool loopback;  // listening on a loopback address: Host header checked
    struct store *store;
    struct sched *sched;
};

// OLLAMA_DEBUG_LOG_REQUESTS (request_log.c): makes the folder at start-up;
// srv_request_log then writes an inference request's body and a curl
// replay script there (a no-op when the setting is off).
int srv_request_log_init(const struct env_config *cfg, struct err *e);
void srv_request_log(const struct srv_req *r);

// HTTP policy (policy.c): CORS origins (env.md §6) and allowed hosts
// against DNS rebinding (env.md §7).
// True when origin is allowed by the NULL-terminated list (OLLAMA_ORIGINS
// then the defaults): an entry "*", an exact match, or a match of an entry
// with one '*' wildcard. NULL origin or list → false.
bool srv_origin_allowed(char *const *origins, const char *origin);
// True when origin is "http(s)://" + the Host header (no CORS checks apply).
bool srv_same_origin(const char *origin, const char *host);
// Allowed-hosts check for a Host header value ("localhost:11434",
// "[::1]:11434", "192.168.1.5"): loopback / private / unspecified / local
// interface IPs, "", "localhost", the machine's hostname, *.localhost,
// *.local, *.internal (case-insensitive). Applied only when the server
// listens on a loopback address.
bool srv_host_allowed(const char *host_header);
// True when host (no port, brackets optional) is a loopback IP address
// (127.0.0.0/8, ::1, ::ffff:127.x) or "localhost".
bool srv_addr_is_loopback(const char *host);

// Replies.
void srv_reply(struct srv_req *r, int status, const char *content_type, const char *body,
               size_t len);
void srv_reply_text(struct srv_req *r, int status, const char *text);
// Takes a reference to obj (decref'd after serialisation).
void srv_reply_json(struct srv_req *r, int status, json_t *obj);
// {"error": "..."}: the native API's error body (replies and stream lines).
json_t *srv_error_json(const char *msg);
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
// Ends a native stream's story with its error line, {"error": "..."}.
int srv_stream_error(struct srv_stream *st, const char *msg);
// A store progress event as the API's JSON ({"status", "digest", "total",
// "completed"}): a line of st when streaming (a gone client sets *cancel), else
// kept in *last for the non-streamed reply (create, pull and push).
struct store_progress;
void srv_progress_send(struct srv_stream *st, json_t **last, volatile int *cancel,
                       const struct store_progress *p);
bool srv_stream_cancelled(struct srv_stream *st);
// Ends the stream (the producer must not touch st afterwards).
void srv_stream_end(struct srv_stream *st);

// Request header lookup (case-insensitive), or NULL.
const char *srv_header(struct srv_req *r, const char *name);
// Query string argument, or NULL.
const char *srv_query(struct srv_req *r, const char *name);

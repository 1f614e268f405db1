// The OpenAI-compatible API (docs/spec/openai.md): /v1/chat/completions,
// /v1/completions, /v1/embeddings, /v1/models and /v1/models/{model}.
//
// A translation layer in front of the native handlers, as upstream does it:
// each /v1 request body is checked and rewritten into a native request
// (/api/chat, /api/generate, /api/embed), the native handler runs on the same
// srv_req, and its answer is rewritten back. Non-streamed answers are read
// from the request's reply after the handler returns; streamed ones go through
// an output encoder (struct srv_encoder, http.c) that turns every native
// NDJSON object into Server-Sent Events (`data: {...}`), ending with
// `data: [DONE]`. Every error leaves in OpenAI's shape
// {"error":{"message","type","param","code"}}.
#include "server/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// ---------------------------------------------------------------------------
// Errors (spec §1)

json_t *srv_openai_error(int status, const char *msg)
{
    const char *type = status == 400   ? "invalid_request_error"
                       : status == 404 ? "not_found_error"
                                       : "api_error";
    json_t *inner = json_object();
    jsonx_set_str(inner, "message", msg);
    jsonx_set_str(inner, "type", type);
    jsonx_set(inner, "param", json_null());
    jsonx_set(inner, "code", json_null());
    json_t *o = json_object();
    jsonx_set(o, "error", inner);
    return o;
}

void srv_openai_reply_error(struct srv_req *r, int status, const char *msg)
{
    srv_reply_json(r, status, srv_openai_error(status, msg));
}

char *srv_native_error_msg(const struct srv_req *r)
{
    json_t *v = NULL;
    char *msg = NULL;
    if (r->reply_body && jsonx_parse(r->reply_body, r->reply_len, &v, NULL) == 0 &&
        json_is_string(json_object_get(v, "error")))
        msg = xstrdup(json_string_value(json_object_get(v, "error")));
    else
        msg = xstrndup(r->reply_body ? r->reply_body : "", r->reply_len);
    json_decref(v);
    return msg;
}

// Rewrites a native error reply ({"error": "..."} or plain text) into
// OpenAI's shape, keeping the status.
static void convert_error_reply(struct srv_req *r)
{
    char *msg = srv_native_error_msg(r);
    srv_openai_reply_error(r, r->status, msg);
    free(msg);
}

// "chatcmpl-<n>" / "cmpl-<n>": n in 0..998 as upstream (any unique-ish id
// will do; clients never parse it).
static void make_id(char *out, size_t n, const char *prefix)
{
    static atomic_uint counter;
    unsigned c = atomic_fetch_add(&counter, 1);
    uint64_t mix = (uint64_t)time_now_ns() ^ ((uint64_t)c * 0x9e3779b97f4a7c15ull);
    mix ^= mix >> 29;
    snprintf(out, n, "%s-%u", prefix, (unsigned)(mix % 999));
}

// Unix seconds of a native RFC 3339 time, or now.
static int64_t unix_of(const json_t *rfc3339)
{
    int64_t ns = 0;
    const char *s = json_string_value(rfc3339);
    if (!s || time_parse_rfc3339(s, &ns, NULL) < 0 || ns == TIME_ZERO)
        ns = time_now_ns();
    return ns / 1000000000;
}

// The native handler for method + path (routes of the other tables).
static srv_handler_fn native_handler(const char *method, const char *path)
{
    for (const struct srv_route *const *t = server_route_tables; *t; t++)
        for (const struct srv_route *rt = *t; rt->pattern; rt++)
            if (strcmp(rt->method, method) == 0 && strcmp(rt->pattern, path) == 0)
                return rt->handler;
    return NULL;
}

int srv_run_native(struct srv_req *r, const char *path, const json_t *native,
                   struct srv_encoder *enc)
{
    srv_handler_fn h = native_handler("POST", path);
    struct buf text;
    buf_init(&text, SERVER_MAX_BODY_BYTES);
    int rc = h ? jsonx_dump(native, 0, &text, NULL) : ERR_INTERNAL;
    if (rc < 0) {
        buf_deinit(&text);
        return rc;
    }
    buf_deinit(&r->body);
    r->body = text;
    if (enc)
        r->encoder = *enc;
    h(r);
    // srv_stream_start clears r->encoder when it takes the encoder over.
    if (enc && !r->encoder.ctx)
        enc->ctx = NULL;
    memset(&r->encoder, 0, sizeof(r->encoder));
    return r->stream ? SRV_NATIVE_STREAMED : SRV_NATIVE_REPLIED;
}

// srv_run_native, replying in OpenAI's shape when it cannot run.
static bool run_native(struct srv_req *r, const char *path, json_t *native)
{
    int rc = srv_run_native(r, path, native, NULL);
    if (rc < 0)
        srv_openai_reply_error(r, rc == ERR_TOO_LARGE ? 413 : 500,
                               rc == ERR_TOO_LARGE ? "request body too large"
                                                   : "cannot route request");
    return rc >= 0;
}

json_t *srv_native_reply(const struct srv_req *r)
{
    json_t *v = NULL;
    if (!r->reply_body || jsonx_parse(r->reply_body, r->reply_len, &v, NULL) < 0)
        return NULL;
    return v;
}

// ---------------------------------------------------------------------------
// Request decoding: field types are checked as Go's decoder would check the
// upstream request structs (wrong type → 400 with the decoder's message).

enum ftype { F_STR, F_BOOL, F_INT, F_NUM, F_OBJ, F_ARR };

struct field {
    const char *name;
    enum ftype type;
};

static const struct field chat_fields[] = {
    {"model", F_STR},
    {"messages", F_ARR},
    {"stream", F_BOOL},
    {"stream_options", F_OBJ},
    {"max_tokens", F_INT},
    {"max_completion_tokens", F_INT},
    {"seed", F_INT},
    {"temperature", F_NUM},
    {"frequency_penalty", F_NUM},
    {"presence_penalty", F_NUM},
    {"top_p", F_NUM},
    {"response_format", F_OBJ},
    {"tools", F_ARR},
    {"reasoning", F_OBJ},
    {"reasoning_effort", F_STR},
    {"logprobs", F_BOOL},
    {"top_logprobs", F_INT},
    {"_debug_render_only", F_BOOL},
    {NULL, F_STR},
};

static const struct field completion_fields[] = {
    {"model", F_STR},
    {"prompt", F_STR},
    {"suffix", F_STR},
    {"stream", F_BOOL},
    {"stream_options", F_OBJ},
    {"max_tokens", F_INT},
    {"seed", F_INT},
    {"temperature", F_NUM},
    {"top_p", F_NUM},
    {"frequency_penalty", F_NUM},
    {"presence_penalty", F_NUM},
    {"logprobs", F_INT},
    {"_debug_render_only", F_BOOL},
    {NULL, F_STR},
};

static const struct field embed_fields[] = {
    {"model", F_STR},
    {"dimensions", F_INT},
    {"encoding_format", F_STR},
    {NULL, F_STR},
};

static int check_fields(const json_t *b, const struct field *f, struct err *e)
{
    for (; f->name; f++) {
        const char *s;
        bool bv;
        int64_t iv;
        double dv;
        json_t *jv;
        int rc = 0;
        switch (f->type) {
        case F_STR:
            rc = jsonx_get_str(b, f->name, &s, false, e);
            break;
        case F_BOOL:
            rc = jsonx_get_bool(b, f->name, &bv, false, e);
            break;
        case F_INT:
            rc = jsonx_get_int(b, f->name, &iv, INT32_MIN, INT32_MAX, false, e);
            break;
        case F_NUM:
            rc = jsonx_get_double(b, f->name, &dv, false, e);
            break;
        case F_OBJ:
            rc = jsonx_get_obj(b, f->name, &jv, false, e);
            break;
        case F_ARR:
            rc = jsonx_get_arr(b, f->name, &jv, false, e);
            break;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static json_t *body_json(struct srv_req *r, const struct field *fields)
{
    if (r->body.len == 0) {
        srv_openai_reply_error(r, 400, "EOF");
        return NULL;
    }
    json_t *v = NULL;
    struct err e = {0};
    if (jsonx_parse_object(r->body.data, r->body.len, &v, &e) < 0 ||
        (fields && check_fields(v, fields, &e) < 0)) {
        json_decref(v);
        srv_openai_reply_error(r, 400, e.msg);
        return NULL;
    }
    return v;
}

static bool include_usage(const json_t *b)
{
    return json_is_true(json_object_get(json_object_get(b, "stream_options"), "include_usage"));
}

static void set_real(json_t *o, const char *key, const json_t *v)
{
    jsonx_set(o, key, json_real(json_number_value(v)));
}

// ---------------------------------------------------------------------------
// Chat request (spec §2.1, §2.2)

// function.arguments (a JSON string) → object. Returns NULL when invalid.
static json_t *tool_arguments(const json_t *args)
{
    const char *s = json_string_value(args);
    json_t *v = NULL;
    if (!s || jsonx_parse(s, strlen(s), &v, NULL) < 0)
        return NULL;
    if (json_is_null(v)) {
        json_decref(v);
        return json_object();
    }
    if (!json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

static int native_tool_calls(const json_t *calls, json_t **out, struct err *e)
{
    json_t *arr = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        json_t *fn = json_object_get(c, "function");
        json_t *args = tool_arguments(json_object_get(fn, "arguments"));
        if (!json_is_object(c) || !args) {
            json_decref(args);
            json_decref(arr);
            return err_set(e, ERR_INVALID, "invalid tool call arguments");
        }
        json_t *nfn = json_object();
        const char *name = json_string_value(json_object_get(fn, "name"));
        jsonx_set_str(nfn, "name", name ? name : "");
        jsonx_set(nfn, "arguments", args);
        json_t *nc = json_object();
        const char *id = json_string_value(json_object_get(c, "id"));
        if (id && *id)
            jsonx_set_str(nc, "id", id);
        jsonx_set(nc, "function", nfn);
        jsonx_arr_append(arr, nc);
    }
    *out = arr;
    return 0;
}

const char *srv_tool_name_for(const json_t *messages, const char *id)
{
    for (size_t i = json_array_size(messages); i-- > 0;) {
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(json_array_get(messages, i), "tool_calls"), k, c)
        {
            const char *cid = json_string_value(json_object_get(c, "id"));
            if (cid && strcmp(cid, id) == 0) {
                const char *n =
                    json_string_value(json_object_get(json_object_get(c, "function"), "name"));
                return n ? n : "";
            }
        }
    }
    return "";
}

const char *srv_image_payload(const char *url, struct err *e)
{
    if (cstr_starts_with(url, "http://") || cstr_starts_with(url, "https://")) {
        err_set(e, ERR_INVALID,
                "image URLs are not currently supported, please use base64 encoded data instead");
        return NULL;
    }
    static const char *const prefixes[] = {"data:;base64,", "data:image/jpeg;base64,",
                                           "data:image/jpg;base64,", "data:image/png;base64,",
                                           "data:image/webp;base64,"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (cstr_starts_with(url, prefixes[i])) {
            const char *p = url + strlen(prefixes[i]);
            if (base64_valid(p))
                return p;
            break;
        }
    }
    err_set(e, ERR_INVALID, "invalid image input");
    return NULL;
}

static void set_opt_str(json_t *o, const char *key, const json_t *v)
{
    if (json_is_string(v) && *json_string_value(v))
        json_object_set(o, key, (json_t *)v);
}

// The Go decoder's type errors for a message's fields, worded as Ollama words them.
static int check_message_types(const json_t *m, struct err *e)
{
    if (!json_is_object(m))
        return err_set(e, ERR_INVALID,
                       "json: cannot unmarshal %s into Go struct field "
                       "ChatCompletionRequest.messages of type openai.Message",
                       jsonx_type_name(m));
    static const char *const str_fields[] = {"role", "reasoning", "name", "tool_call_id"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(m, str_fields[i]);
        if (v && !json_is_null(v) && !json_is_string(v))
            return err_set(e, ERR_INVALID,
                           "json: cannot unmarshal %s into Go struct field "
                           "ChatCompletionRequest.messages.%s of type string",
                           jsonx_type_name(v), str_fields[i]);
    }
    json_t *tcs = json_object_get(m, "tool_calls");
    if (tcs && !json_is_null(tcs) && !json_is_array(tcs))
        return err_set(e, ERR_INVALID,
                       "json: cannot unmarshal %s into Go struct field "
                       "ChatCompletionRequest.messages.tool_calls of type []openai.ToolCall",
                       jsonx_type_name(tcs));
    return 0;
}

// What the native messages made from one OpenAI message carry besides their content.
struct msg_meta {
    const char *role;
    const json_t *reasoning, *call_id;
    const char *tool_name;  // tool results: the function called (NULL: unknown)
    json_t *calls;          // native tool calls (owned; NULL: none)
};

// One part of an array content ("text", "image_url" or "input_audio"): *node gets a native
// message holding it.
static int convert_part(const json_t *part, const char *role, json_t **node, struct err *e)
{
    const char *type = json_string_value(json_object_get(part, "type"));
    json_t *n = json_object();
    jsonx_set_str(n, "role", role);
    if (type && strcmp(type, "text") == 0) {
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(text)) {
            json_decref(n);
            return err_set(e, ERR_INVALID, "invalid message format");
        }
        json_object_set(n, "content", text);
    } else if (type && strcmp(type, "image_url") == 0) {
        json_t *iu = json_object_get(part, "image_url");
        const char *url = json_is_object(iu) ? json_string_value(json_object_get(iu, "url"))
                                             : json_string_value(iu);
        const char *data = url ? srv_image_payload(url, e) : NULL;
        if (!url)
            err_set(e, ERR_INVALID, "invalid message format");
        if (!data) {
            json_decref(n);
            return ERR_INVALID;
        }
        jsonx_set_str(n, "content", "");
        jsonx_set(n, "images", json_pack("[s]", data));
    } else if (type && strcmp(type, "input_audio") == 0) {
        json_t *ia = json_object_get(part, "input_audio");
        const char *data = json_string_value(json_object_get(ia, "data"));
        if (!json_is_object(ia) || !data) {
            json_decref(n);
            return err_set(e, ERR_INVALID,
                           json_is_object(ia) ? "invalid input_audio format: missing data"
                                              : "invalid input_audio format");
        }
        if (!base64_valid(data)) {
            json_decref(n);
            return err_set(e, ERR_INVALID, "invalid input_audio base64 data");
        }
        jsonx_set_str(n, "content", "");
        jsonx_set(n, "images", json_pack("[s]", data));
    } else {
        json_decref(n);
        return err_set(e, ERR_INVALID, "invalid message format");
    }
    *node = n;
    return 0;
}

// Array content: one native message per part; tool calls (and the rest) attach to the
// last message produced.
static int convert_parts(const json_t *content, const struct msg_meta *mm, json_t *out,
                         struct err *e)
{
    int rc = 0;
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part)
    {
        json_t *n = NULL;
        if ((rc = convert_part(part, mm->role, &n, e)) < 0)
            break;
        jsonx_arr_append(out, n);
    }
    json_t *last = json_array_get(out, json_array_size(out) - 1);
    if (rc == 0 && last && mm->calls) {
        json_object_set(last, "tool_calls", mm->calls);
        if (mm->tool_name && *mm->tool_name)
            jsonx_set_str(last, "tool_name", mm->tool_name);
        set_opt_str(last, "tool_call_id", mm->call_id);
        set_opt_str(last, "thinking", mm->reasoning);
    }
    return rc;
}

// The Go type a non-string, non-array content decodes to, for the error message.
static const char *content_go_type(const json_t *content)
{
    return !content || json_is_null(content) ? "<nil>"
           : json_is_number(content)         ? "float64"
           : json_is_boolean(content)        ? "bool"
                                             : "map[string]interface {}";
}

// One OpenAI message → native messages appended to out.
static int convert_message(const json_t *msgs, const json_t *m, json_t *out, struct err *e)
{
    int rc = check_message_types(m, e);
    if (rc < 0)
        return rc;
    json_t *tcs = json_object_get(m, "tool_calls");
    const char *role = json_string_value(json_object_get(m, "role"));
    struct msg_meta mm = {.role = role ? role : "",
                          .reasoning = json_object_get(m, "reasoning"),
                          .call_id = json_object_get(m, "tool_call_id")};
    if (strcasecmp(mm.role, "tool") == 0) {
        mm.tool_name = json_string_value(json_object_get(m, "name"));
        const char *id = json_string_value(mm.call_id);
        if ((!mm.tool_name || !*mm.tool_name) && id && *id)
            mm.tool_name = srv_tool_name_for(msgs, id);
    }
    if (json_array_size(tcs) && native_tool_calls(tcs, &mm.calls, e) < 0)
        return ERR_INVALID;

    json_t *content = json_object_get(m, "content");
    if (json_is_string(content)) {
        json_t *n = json_object();
        jsonx_set_str(n, "role", mm.role);
        json_object_set(n, "content", content);
        set_opt_str(n, "thinking", mm.reasoning);
        if (mm.calls)
            json_object_set(n, "tool_calls", mm.calls);
        if (mm.tool_name && *mm.tool_name)
            jsonx_set_str(n, "tool_name", mm.tool_name);
        set_opt_str(n, "tool_call_id", mm.call_id);
        jsonx_arr_append(out, n);
    } else if (json_is_array(content)) {
        rc = convert_parts(content, &mm, out, e);
    } else if (mm.calls || (tcs && json_is_array(tcs))) {
        // Content may be null or absent only when tool calls are present.
        json_t *n = json_object();
        jsonx_set_str(n, "role", mm.role);
        jsonx_set_str(n, "content", "");
        set_opt_str(n, "thinking", mm.reasoning);
        jsonx_set(n, "tool_calls", mm.calls ? json_incref(mm.calls) : json_array());
        set_opt_str(n, "tool_call_id", mm.call_id);
        jsonx_arr_append(out, n);
    } else {
        rc = err_set(e, ERR_INVALID, "invalid message content type: %s", content_go_type(content));
    }
    json_decref(mm.calls);
    return rc;
}

// stop: a string → [string]; an array → its string elements (chat) or an
// error on a non-string (completions).
static int convert_stop(const json_t *stop, bool strict, json_t *options, struct err *e)
{
    if (json_is_string(stop)) {
        jsonx_set(options, "stop", json_pack("[O]", stop));
    } else if (json_is_array(stop)) {
        json_t *arr = json_array();
        size_t i;
        json_t *s;
        json_array_foreach(stop, i, s)
        {
            if (json_is_string(s)) {
                jsonx_arr_append(arr, json_incref(s));
            } else if (strict) {
                json_decref(arr);
                return err_set(e, ERR_INVALID, "invalid type for 'stop' field: %s",
                               json_is_number(s)    ? "float64"
                               : json_is_boolean(s) ? "bool"
                               : json_is_null(s)    ? "<nil>"
                               : json_is_array(s)   ? "[]interface {}"
                                                    : "map[string]interface {}");
            }
        }
        jsonx_set(options, "stop", arr);
    }
    return 0;
}

int srv_openai_effort(const json_t *b, json_t **think, struct err *e)
{
    *think = NULL;
    const json_t *reasoning = json_object_get(b, "reasoning");
    const json_t *v = json_is_object(reasoning) ? json_object_get(reasoning, "effort")
                                                : json_object_get(b, "reasoning_effort");
    if (v && !json_is_null(v) && !json_is_string(v))
        return err_set(e, ERR_INVALID,
                       "json: cannot unmarshal %s into Go struct field Reasoning.reasoning.effort "
                       "of type string",
                       jsonx_type_name(v));
    const char *s = json_string_value(v);
    if (!s || !*s)
        return 0;
    if (strcmp(s, "none") == 0)
        *think = json_false();
    else if (strcmp(s, "minimal") == 0)
        *think = json_string("low");
    else if (!strcmp(s, "low") || !strcmp(s, "medium") || !strcmp(s, "high") || !strcmp(s, "max"))
        *think = json_string(s);
    else if (strcmp(s, "xhigh") == 0 || strcmp(s, "ultra") == 0)
        *think = json_string("max");
    else
        return err_set(e, ERR_INVALID,
                       "invalid reasoning value: \"%s\" (must be \"minimal\", \"low\", "
                       "\"medium\", \"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")",
                       s);
    return 0;
}

// response_format → native format (NULL: none).
static json_t *convert_format(const json_t *rf)
{
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!type)
        return NULL;
    while (*type == ' ' || *type == '\t' || *type == '\n' || *type == '\r')
        type++;
    size_t n = strlen(type);
    while (n && (type[n - 1] == ' ' || type[n - 1] == '\t' || type[n - 1] == '\n' ||
                 type[n - 1] == '\r'))
        n--;
    if (n == 11 && strncasecmp(type, "json_object", n) == 0)
        return json_string("json");
    if (n == 11 && strncasecmp(type, "json_schema", n) == 0) {
        json_t *schema = json_object_get(json_object_get(rf, "json_schema"), "schema");
        if (schema && !json_is_null(schema))
            return json_incref(schema);
    }
    return NULL;
}

json_t *srv_openai_chat_request(const json_t *b, struct err *e)
{
    if (check_fields(b, chat_fields, e) < 0)
        return NULL;
    if (json_array_size(json_object_get(b, "messages")) == 0) {
        err_set(e, ERR_INVALID, "[] is too short - 'messages'");
        return NULL;
    }
    json_t *n = json_object();
    json_t *v;
    if ((v = json_object_get(b, "model")))
        json_object_set(n, "model", v);
    json_t *msgs = json_array();
    jsonx_set(n, "messages", msgs);
    size_t i;
    json_t *m;
    const json_t *in = json_object_get(b, "messages");
    json_array_foreach(in, i, m)
    {
        if (convert_message(in, m, msgs, e) < 0)
            goto fail;
    }
    json_t *options = json_object();
    jsonx_set(n, "options", options);
    if (convert_stop(json_object_get(b, "stop"), false, options, e) < 0)
        goto fail;
    // max_completion_tokens (ollama-c extension) when max_tokens is absent.
    if (!json_is_number(v = json_object_get(b, "max_tokens")))
        v = json_object_get(b, "max_completion_tokens");
    if (json_is_number(v))
        jsonx_set_int(options, "num_predict", jsonx_number_i64(v));
    v = json_object_get(b, "temperature");
    jsonx_set(options, "temperature", json_real(json_is_number(v) ? json_number_value(v) : 1.0));
    if (json_is_number(v = json_object_get(b, "seed")))
        jsonx_set_int(options, "seed", jsonx_number_i64(v));
    if (json_is_number(v = json_object_get(b, "frequency_penalty")))
        set_real(options, "frequency_penalty", v);
    if (json_is_number(v = json_object_get(b, "presence_penalty")))
        set_real(options, "presence_penalty", v);
    v = json_object_get(b, "top_p");
    jsonx_set(options, "top_p", json_real(json_is_number(v) ? json_number_value(v) : 1.0));

    json_t *format = convert_format(json_object_get(b, "response_format"));
    if (format)
        jsonx_set(n, "format", format);
    if (json_is_array(v = json_object_get(b, "tools")))
        json_object_set(n, "tools", v);
    json_t *think = NULL;
    if (srv_openai_effort(b, &think, e) < 0)
        goto fail;
    if (think)
        jsonx_set(n, "think", think);
    if (json_is_true(json_object_get(b, "logprobs")))
        jsonx_set_bool(n, "logprobs", true);
    if (json_is_integer(v = json_object_get(b, "top_logprobs")))
        json_object_set(n, "top_logprobs", v);
    if (json_is_true(json_object_get(b, "_debug_render_only")))
        jsonx_set_bool(n, "_debug_render_only", true);
    jsonx_set_bool(n, "stream", json_is_true(json_object_get(b, "stream")));
    return n;
fail:
    json_decref(n);
    return NULL;
}

json_t *srv_openai_completion_request(const json_t *b, struct err *e)
{
    if (check_fields(b, completion_fields, e) < 0)
        return NULL;
    json_t *n = json_object();
    json_t *v;
    if ((v = json_object_get(b, "model")))
        json_object_set(n, "model", v);
    jsonx_set_str(n, "prompt",
                  json_is_string(v = json_object_get(b, "prompt")) ? json_string_value(v) : "");
    if (json_is_string(v = json_object_get(b, "suffix")) && *json_string_value(v))
        json_object_set(n, "suffix", v);
    json_t *options = json_object();
    jsonx_set(n, "options", options);
    if (convert_stop(json_object_get(b, "stop"), true, options, e) < 0) {
        json_decref(n);
        return NULL;
    }
    if (json_is_number(v = json_object_get(b, "max_tokens")))
        jsonx_set_int(options, "num_predict", jsonx_number_i64(v));
    v = json_object_get(b, "temperature");
    jsonx_set(options, "temperature", json_real(json_is_number(v) ? json_number_value(v) : 1.0));
    if (json_is_number(v = json_object_get(b, "seed")))
        jsonx_set_int(options, "seed", jsonx_number_i64(v));
    v = json_object_get(b, "frequency_penalty");
    jsonx_set(options, "frequency_penalty",
              json_real(json_is_number(v) ? json_number_value(v) : 0));
    v = json_object_get(b, "presence_penalty");
    jsonx_set(options, "presence_penalty", json_real(json_is_number(v) ? json_number_value(v) : 0));
    v = json_object_get(b, "top_p");
    double top_p = json_is_number(v) ? json_number_value(v) : 0;
    jsonx_set(options, "top_p", json_real(top_p != 0 ? top_p : 1.0));
    v = json_object_get(b, "logprobs");
    if (json_is_number(v) && json_number_value(v) > 0) {
        jsonx_set_bool(n, "logprobs", true);
        jsonx_set_int(n, "top_logprobs", jsonx_number_i64(v));
    }
    if (json_is_true(json_object_get(b, "_debug_render_only")))
        jsonx_set_bool(n, "_debug_render_only", true);
    jsonx_set_bool(n, "stream", json_is_true(json_object_get(b, "stream")));
    return n;
}

// ---------------------------------------------------------------------------
// Responses (spec §2.3, §2.4, §3)

struct srv_openai_stream {
    bool chat;
    bool include_usage;
    char id[32];
    int64_t created;  // pinned from the first native object (chat)
    bool first_sent;
    bool tool_call_sent;
};

struct srv_openai_stream *srv_openai_stream_new(bool chat, bool include_usage)
{
    struct srv_openai_stream *s = xcalloc(1, sizeof(*s));
    s->chat = chat;
    s->include_usage = include_usage;
    make_id(s->id, sizeof(s->id), chat ? "chatcmpl" : "cmpl");
    return s;
}

static void set_model(json_t *o, const json_t *nat)
{
    const char *m = json_string_value(json_object_get(nat, "model"));
    jsonx_set_str(o, "model", m ? m : "");
}

static json_t *usage_object(const json_t *native, bool with_completion)
{
    int64_t p = json_integer_value(json_object_get(native, "prompt_eval_count"));
    int64_t c = json_integer_value(json_object_get(native, "eval_count"));
    json_t *u = json_object();
    jsonx_set_int(u, "prompt_tokens", p);
    if (with_completion)
        jsonx_set_int(u, "completion_tokens", c);
    jsonx_set_int(u, "total_tokens", with_completion ? p + c : p);
    return u;
}

// Native tool calls → OpenAI's (arguments as a JSON string).
static json_t *openai_tool_calls(const json_t *calls)
{
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        json_t *fn = json_object_get(c, "function");
        json_t *o = json_object();
        const char *id = json_string_value(json_object_get(c, "id"));
        jsonx_set_str(o, "id", id ? id : "");
        jsonx_set_int(o, "index", json_integer_value(json_object_get(fn, "index")));
        jsonx_set_str(o, "type", "function");
        json_t *ofn = json_object();
        const char *name = json_string_value(json_object_get(fn, "name"));
        jsonx_set_str(ofn, "name", name ? name : "");
        json_t *args = json_object_get(fn, "arguments");
        char *text = args ? jsonx_dumps(args, 0) : NULL;
        jsonx_set_str(ofn, "arguments", text ? text : "{}");
        free(text);
        jsonx_set(o, "function", ofn);
        jsonx_arr_append(out, o);
    }
    return out;
}

static json_t *finish_reason(const char *reason, bool tool_calls)
{
    if (!reason || !*reason)
        return json_null();
    if (strcmp(reason, "stop") == 0 && tool_calls)
        return json_string("tool_calls");
    return json_string(reason);
}

static json_t *logprobs_of(const json_t *native)
{
    json_t *lp = json_object_get(native, "logprobs");
    if (!json_array_size(lp))
        return NULL;
    return json_pack("{s:O}", "content", lp);
}

json_t *srv_openai_chat_completion(const char *id, const json_t *nat)
{
    const json_t *msg = json_object_get(nat, "message");
    json_t *o = json_object();
    jsonx_set_str(o, "id", id);
    jsonx_set_str(o, "object", "chat.completion");
    jsonx_set_int(o, "created", unix_of(json_object_get(nat, "created_at")));
    set_model(o, nat);
    jsonx_set_str(o, "system_fingerprint", "fp_ollama");
    json_t *m = json_object();
    const char *role = json_string_value(json_object_get(msg, "role"));
    jsonx_set_str(m, "role", role ? role : "assistant");
    const char *content = json_string_value(json_object_get(msg, "content"));
    jsonx_set_str(m, "content", content ? content : "");
    set_opt_str(m, "reasoning", json_object_get(msg, "thinking"));
    json_t *calls = json_object_get(msg, "tool_calls");
    if (json_array_size(calls))
        jsonx_set(m, "tool_calls", openai_tool_calls(calls));
    json_t *choice = json_object();
    jsonx_set_int(choice, "index", 0);
    jsonx_set(choice, "message", m);
    jsonx_set(choice, "finish_reason",
              finish_reason(json_string_value(json_object_get(nat, "done_reason")),
                            json_array_size(calls) > 0));
    json_t *lp = logprobs_of(nat);
    if (lp)
        jsonx_set(choice, "logprobs", lp);
    jsonx_set(o, "choices", json_pack("[o]", choice));
    jsonx_set(o, "usage", usage_object(nat, true));
    return o;
}

json_t *srv_openai_text_completion(const char *id, const json_t *nat, bool chunk)
{
    json_t *o = json_object();
    jsonx_set_str(o, "id", id);
    jsonx_set_str(o, "object", "text_completion");
    jsonx_set_int(o, "created",
                  chunk ? time_now_ns() / 1000000000 : unix_of(json_object_get(nat, "created_at")));
    set_model(o, nat);
    jsonx_set_str(o, "system_fingerprint", "fp_ollama");
    json_t *choice = json_object();
    const char *text = json_string_value(json_object_get(nat, "response"));
    jsonx_set_str(choice, "text", text ? text : "");
    jsonx_set_int(choice, "index", 0);
    jsonx_set(choice, "finish_reason",
              finish_reason(json_string_value(json_object_get(nat, "done_reason")), false));
    json_t *lp = logprobs_of(nat);
    if (lp)
        jsonx_set(choice, "logprobs", lp);
    jsonx_set(o, "choices", json_pack("[o]", choice));
    if (!chunk)
        jsonx_set(o, "usage", usage_object(nat, true));
    return o;
}

// Appends one SSE event: "data: <json>\n\n" (takes obj).
static void sse_event(struct buf *out, json_t *obj)
{
    buf_append_str(out, "data: ");
    jsonx_dump(obj, 0, out, NULL);
    buf_append_str(out, "\n\n");
    json_decref(obj);
}

static json_t *chat_chunk(const struct srv_openai_stream *s, const json_t *nat, json_t *delta,
                          json_t *finish)
{
    json_t *o = json_object();
    jsonx_set_str(o, "id", s->id);
    jsonx_set_str(o, "object", "chat.completion.chunk");
    jsonx_set_int(o, "created", s->created);
    set_model(o, nat);
    jsonx_set_str(o, "system_fingerprint", "fp_ollama");
    json_t *choice = json_object();
    jsonx_set_int(choice, "index", 0);
    jsonx_set(choice, "delta", delta);
    jsonx_set(choice, "finish_reason", finish ? finish : json_null());
    jsonx_set(o, "choices", json_pack("[o]", choice));
    return o;
}

// One native chat object → chunks (spec §2.4).
static void encode_chat(struct srv_openai_stream *s, const json_t *nat, struct buf *out)
{
    const json_t *msg = json_object_get(nat, "message");
    bool done = json_is_true(json_object_get(nat, "done"));
    if (!s->created)
        s->created = unix_of(json_object_get(nat, "created_at"));
    const char *content = json_string_value(json_object_get(msg, "content"));
    const char *thinking = json_string_value(json_object_get(msg, "thinking"));
    json_t *calls = json_object_get(msg, "tool_calls");
    json_t *lp = json_object_get(nat, "logprobs");
    bool has_content = content && *content;
    bool has_thinking = thinking && *thinking;
    bool has_calls = json_array_size(calls) > 0;
    bool empty_trailer = done && s->first_sent && !has_content && !has_thinking && !has_calls &&
                         !json_array_size(lp);
    if (!empty_trailer) {
        bool mixed = has_thinking && (has_content || has_calls);
        if (mixed) {
            json_t *d = json_object();
            if (!s->first_sent)
                jsonx_set_str(d, "role", "assistant");
            jsonx_set_str(d, "reasoning", thinking);
            json_t *c = chat_chunk(s, nat, d, NULL);
            json_t *l = logprobs_of(nat);
            if (l)
                jsonx_set(json_array_get(json_object_get(c, "choices"), 0), "logprobs", l);
            sse_event(out, c);
            s->first_sent = true;
        }
        json_t *d = json_object();
        if (!s->first_sent)
            jsonx_set_str(d, "role", "assistant");
        jsonx_set_str(d, "content", content ? content : "");
        if (has_thinking && !mixed)
            jsonx_set_str(d, "reasoning", thinking);
        if (has_calls) {
            jsonx_set(d, "tool_calls", openai_tool_calls(calls));
            s->tool_call_sent = true;
        }
        json_t *c = chat_chunk(s, nat, d, NULL);
        json_t *l = mixed ? NULL : logprobs_of(nat);
        if (l)
            jsonx_set(json_array_get(json_object_get(c, "choices"), 0), "logprobs", l);
        sse_event(out, c);
        s->first_sent = true;
    }
    if (done) {
        const char *reason = json_string_value(json_object_get(nat, "done_reason"));
        json_t *c =
            chat_chunk(s, nat, json_object(),
                       finish_reason(reason && *reason ? reason : "stop", s->tool_call_sent));
        sse_event(out, c);
        if (s->include_usage) {
            json_t *u = chat_chunk(s, nat, json_object(), NULL);
            jsonx_set(u, "choices", json_array());
            jsonx_set(u, "usage", usage_object(nat, true));
            sse_event(out, u);
        }
    }
}

static void encode_completion(struct srv_openai_stream *s, const json_t *nat, struct buf *out)
{
    json_t *c = srv_openai_text_completion(s->id, nat, true);
    if (s->include_usage)
        jsonx_set(c, "usage",
                  json_pack("{s:i,s:i,s:i}", "prompt_tokens", 0, "completion_tokens", 0,
                            "total_tokens", 0));
    if (json_is_true(json_object_get(nat, "done")) && s->include_usage) {
        json_t *u = json_deep_copy(c);
        jsonx_set(u, "choices", json_array());
        jsonx_set(u, "usage", usage_object(nat, true));
        sse_event(out, c);
        sse_event(out, u);
        return;
    }
    sse_event(out, c);
}

void srv_openai_stream_encode(struct srv_openai_stream *s, const json_t *nat, struct buf *out)
{
    json_t *err = json_object_get(nat, "error");
    if (err) {
        // After the status line is sent, errors travel as an event (spec §1).
        sse_event(out, srv_openai_error(500, json_is_string(err) ? json_string_value(err)
                                                                 : "internal error"));
        return;
    }
    if (s->chat)
        encode_chat(s, nat, out);
    else
        encode_completion(s, nat, out);
}

static int stream_encode(void *ctx, struct srv_stream *st, const json_t *obj)
{
    struct buf out;
    buf_init(&out, 0);
    srv_openai_stream_encode(ctx, obj, &out);
    int rc = srv_stream_write(st, out.data ? out.data : "", out.len);
    buf_deinit(&out);
    return rc;
}

static void stream_finish(void *ctx, struct srv_stream *st)
{
    (void)ctx;
    static const char done[] = "data: [DONE]\n\n";
    srv_stream_write(st, done, sizeof(done) - 1);
}

// Runs a chat or completion request: native call, then the answer rewritten.
static void run_completion(struct srv_req *r, bool chat)
{
    struct err e = {0};
    json_t *b = body_json(r, NULL);
    if (!b)
        return;
    json_t *native = chat ? srv_openai_chat_request(b, &e) : srv_openai_completion_request(b, &e);
    if (!native) {
        srv_openai_reply_error(r, 400, e.msg);
        goto out;
    }
    bool stream = json_is_true(json_object_get(b, "stream"));
    struct srv_openai_stream *s = srv_openai_stream_new(chat, include_usage(b));
    struct srv_encoder enc = {
        .content_type = "text/event-stream",
        .encode = stream_encode,
        .finish = stream_finish,
        .free = free,
        .ctx = s,
    };
    int ran = srv_run_native(r, chat ? "/api/chat" : "/api/generate", native, stream ? &enc : NULL);
    if (ran < 0)
        srv_openai_reply_error(r, ran == ERR_TOO_LARGE ? 413 : 500,
                               ran == ERR_TOO_LARGE ? "request body too large"
                                                    : "cannot route request");
    if (!enc.ctx)
        s = NULL;  // srv_stream_start took it: owned by the stream now
    if (ran != SRV_NATIVE_REPLIED) {
        free(s);
        goto out;
    }
    if (r->status != 200) {
        convert_error_reply(r);
    } else {
        json_t *nat = srv_native_reply(r);
        if (!nat) {
            srv_openai_reply_error(r, 500, "invalid response from native handler");
        } else if (stream) {
            // A one-shot native answer (e.g. loading with an empty prompt) to
            // a streaming request: still sent as events.
            struct buf out;
            buf_init(&out, 0);
            srv_openai_stream_encode(s, nat, &out);
            buf_append_str(&out, "data: [DONE]\n\n");
            srv_reply(r, 200, "text/event-stream", out.data, out.len);
            buf_deinit(&out);
        } else {
            srv_reply_json(r, 200,
                           chat ? srv_openai_chat_completion(s->id, nat)
                                : srv_openai_text_completion(s->id, nat, false));
        }
        json_decref(nat);
    }
    free(s);
out:
    json_decref(native);
    json_decref(b);
}

static void handle_chat_completions(struct srv_req *r)
{
    run_completion(r, true);
}

static void handle_completions(struct srv_req *r)
{
    run_completion(r, false);
}

// ---------------------------------------------------------------------------
// Embeddings (spec §4)

// encoding_format: "float" (the default) or "base64", either case; anything else is a 400.
static bool embed_format(struct srv_req *r, const json_t *b, bool *b64)
{
    const char *fmt = json_string_value(json_object_get(b, "encoding_format"));
    *b64 = false;
    if (fmt && *fmt) {
        *b64 = strcasecmp(fmt, "base64") == 0;
        if (!*b64 && strcasecmp(fmt, "float") != 0) {
            char *msg = xasprintf("Invalid value for 'encoding_format' = %s. Supported values: "
                                  "['float', 'base64'].",
                                  fmt);
            srv_openai_reply_error(r, 400, msg);
            free(msg);
            return false;
        }
    }
    return true;
}

// The /api/embed body for this request, or NULL after replying 400. An empty string is one
// empty input; a missing, null or empty-array input is invalid.
static json_t *embed_native(struct srv_req *r, const json_t *b)
{
    json_t *native;
    const json_t *in = json_object_get(b, "input");
    if (json_is_string(in) && !*json_string_value(in)) {
        native = json_pack("{s:[s]}", "input", "");
    } else if (!in || json_is_null(in) || (json_is_array(in) && json_array_size(in) == 0)) {
        srv_openai_reply_error(r, 400, "invalid input");
        return NULL;
    } else {
        native = json_pack("{s:O}", "input", in);
    }
    const json_t *model = json_object_get(b, "model");
    jsonx_set_str(native, "model", json_string_value(model) ? json_string_value(model) : "");
    const json_t *dims = json_object_get(b, "dimensions");
    if (json_is_number(dims) && json_number_value(dims) != 0)
        jsonx_set_int(native, "dimensions", jsonx_number_i64(dims));
    return native;
}

// A vector as base64 of its float32 values, little-endian whatever the host.
static void set_embedding_base64(json_t *item, const json_t *vec)
{
    size_t n = json_array_size(vec);
    unsigned char *bytes = xmalloc(n * 4 + 1);
    for (size_t k = 0; k < n; k++) {
        float f = (float)json_number_value(json_array_get(vec, k));
        uint32_t u;
        memcpy(&u, &f, 4);
        for (int j = 0; j < 4; j++)
            bytes[k * 4 + (size_t)j] = (unsigned char)(u >> (8 * j));
    }
    struct buf enc;
    buf_init(&enc, 0);
    base64_encode(bytes, n * 4, &enc);
    jsonx_set_strn(item, "embedding", enc.data ? enc.data : "", enc.len);
    buf_deinit(&enc);
    free(bytes);
}

// The native embed answer → an OpenAI embedding list.
static json_t *embed_list(const json_t *nat, const json_t *model, bool b64)
{
    json_t *vectors = json_object_get(nat, "embeddings");
    json_t *data = json_array();
    size_t i;
    json_t *vec;
    json_array_foreach(vectors, i, vec)
    {
        json_t *item = json_object();
        jsonx_set_str(item, "object", "embedding");
        if (b64)
            set_embedding_base64(item, vec);
        else
            json_object_set(item, "embedding", vec);
        jsonx_set_int(item, "index", (int64_t)i);
        jsonx_arr_append(data, item);
    }
    json_t *o = json_object();
    jsonx_set_str(o, "object", "list");
    jsonx_set(o, "data", data);
    jsonx_set_str(o, "model", json_string_value(model) ? json_string_value(model) : "");
    jsonx_set(o, "usage", usage_object(nat, false));
    return o;
}

static void handle_embeddings(struct srv_req *r)
{
    json_t *b = body_json(r, embed_fields);
    if (!b)
        return;
    json_t *native = NULL;
    bool b64;
    if (!embed_format(r, b, &b64))
        goto out;
    if (!(native = embed_native(r, b)))
        goto out;
    if (!run_native(r, "/api/embed", native))
        goto out;
    if (r->status != 200) {
        convert_error_reply(r);
        goto out;
    }
    json_t *nat = srv_native_reply(r);
    json_t *o = embed_list(nat, json_object_get(b, "model"), b64);
    json_decref(nat);
    srv_reply_json(r, 200, o);
out:
    json_decref(native);
    json_decref(b);
}

// ---------------------------------------------------------------------------
// Models (spec §5, §6)

static void owned_by(const char *name, char *out, size_t n)
{
    struct store_name sn;
    store_name_parse(name, &sn, NULL);
    snprintf(out, n, "%s", sn.ns[0] ? sn.ns : STORE_DEFAULT_NAMESPACE);
}

static json_t *model_object(const char *id, const json_t *modified_at)
{
    char ns[STORE_PART_MAX + 1];
    owned_by(id, ns, sizeof(ns));
    json_t *o = json_object();
    jsonx_set_str(o, "id", id);
    jsonx_set_str(o, "object", "model");
    jsonx_set_int(o, "created", unix_of(modified_at));
    jsonx_set_str(o, "owned_by", ns);
    return o;
}

static void handle_models(struct srv_req *r)
{
    json_t *tags = NULL;
    struct err e = {0};
    int rc = store_tags_json(r->srv->store, &tags, &e);
    if (rc < 0) {
        srv_openai_reply_error(r, server_http_status(rc), e.msg[0] ? e.msg : err_str(rc));
        return;
    }
    json_t *data = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(tags, "models"), i, m)
    {
        const char *id = json_string_value(json_object_get(m, "model"));
        if (!id || !*id)
            id = json_string_value(json_object_get(m, "name"));
        jsonx_arr_append(data, model_object(id ? id : "", json_object_get(m, "modified_at")));
    }
    json_t *o = json_object();
    jsonx_set_str(o, "object", "list");
    // No models: "data": null, as upstream's nil slice.
    jsonx_set(o, "data", json_array_size(data) ? data : (json_decref(data), json_null()));
    json_decref(tags);
    srv_reply_json(r, 200, o);
}

static void handle_model(struct srv_req *r)
{
    const char *name = r->param;
    if (!name || !*name || strchr(name, '/')) {
        srv_reply_text(r, 404, "404 page not found");
        return;
    }
    struct store_show_opts so = {0};
    json_t *show = NULL;
    struct err e = {0};
    int rc = store_show(r->srv->store, name, &so, &show, &e);
    if (rc < 0) {
        srv_openai_reply_error(r, server_http_status(rc), e.msg[0] ? e.msg : err_str(rc));
        return;
    }
    json_t *o = model_object(name, json_object_get(show, "modified_at"));
    json_decref(show);
    srv_reply_json(r, 200, o);
}

const struct srv_route server_openai_routes[] = {
    {"POST", "/v1/chat/completions", handle_chat_completions, NULL},
    {"POST", "/v1/completions", handle_completions, NULL},
    {"POST", "/v1/embeddings", handle_embeddings, NULL},
    {"GET", "/v1/models", handle_models, NULL},
    {"GET", "/v1/models/*", handle_model, NULL},
    {NULL, NULL, NULL, NULL},
};

// The Anthropic Messages API (Ollama's docs/api/anthropic-compatibility.mdx):
// POST /v1/messages and POST /v1/messages/count_tokens, for Claude Code and
// the Anthropic SDKs.
//
// A translation layer like openai.c: the request becomes a native /api/chat
// body, the native handler runs on the same srv_req (srv_run_native), and
// its answer is rewritten back: one Message object, or Server-Sent Events
// with Anthropic's event names (message_start, content_block_start, ping,
// content_block_delta, content_block_stop, message_delta, message_stop;
// `error` mid-stream). Errors leave as {"type":"error","error":{type,message}}.
//
// Beyond Ollama: tool_choice "any" / "tool" is enforced with a grammar (the
// native request gets a JSON schema for {"name","arguments"} and the answer
// becomes a tool_use block), "none" drops the tools; count_tokens renders the
// prompt with the model's template and counts it with the model's tokenizer.
// The headers x-api-key, Authorization and anthropic-version are accepted and
// not checked (a local server has no accounts).
#include "server/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

// ---------------------------------------------------------------------------
// Errors

json_t *srv_anthropic_error(int status, const char *msg)
{
    const char *type = status == 400                    ? "invalid_request_error"
                       : status == 401                  ? "authentication_error"
                       : status == 403                  ? "permission_error"
                       : status == 404                  ? "not_found_error"
                       : status == 413                  ? "request_too_large"
                       : status == 429                  ? "rate_limit_error"
                       : status == 503 || status == 529 ? "overloaded_error"
                                                        : "api_error";
    char id[64];
    srv_anthropic_id(id, sizeof(id), "req");
    return json_pack("{s:s,s:{s:s,s:s},s:s}", "type", "error", "error", "type", type, "message",
                     msg, "request_id", id);
}

static void reply_error(struct srv_req *r, int status, const char *msg)
{
    srv_reply_json(r, status, srv_anthropic_error(status, msg));
}

void srv_anthropic_id(char *out, size_t n, const char *prefix)
{
    unsigned char b[12];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t t = (uint64_t)time_now_ns();
        memcpy(b, &t, sizeof(t));
        memset(b + 8, 0, 4);
    }
    int k = snprintf(out, n, "%s_", prefix);
    for (size_t i = 0; i < sizeof(b) && k > 0 && (size_t)k + 2 < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%02x", b[i]);
}

// ---------------------------------------------------------------------------
// Request (MessagesRequest → native /api/chat)

// Go's decoder wording for a field of the wrong type.
static int type_error(struct err *e, const json_t *v, const char *field, const char *go_type)
{
    return err_set(e, ERR_INVALID,
                   "json: cannot unmarshal %s into Go struct field MessagesRequest.%s of type %s",
                   jsonx_type_name(v), field, go_type);
}

static bool present(const json_t *v)
{
    return v && !json_is_null(v);
}

int srv_check_go_fields(const json_t *b, const struct srv_go_field *f, size_t n,
                        const char *go_struct, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(b, f[i].name);
        if (!present(v))
            continue;
        bool ok = f[i].kind == 'S'   ? json_is_string(v)
                  : f[i].kind == 'I' ? json_is_integer(v)
                  : f[i].kind == 'N' ? json_is_number(v)
                  : f[i].kind == 'B' ? json_is_boolean(v)
                  : f[i].kind == 'A' ? json_is_array(v)
                                     : json_is_object(v);
        if (!ok)
            return err_set(e, ERR_INVALID,
                           "json: cannot unmarshal %s into Go struct field %s.%s of type %s",
                           jsonx_type_name(v), go_struct, f[i].name, f[i].go_type);
    }
    return 0;
}

// Checks the request's top-level field types (what ShouldBindJSON rejects).
static int check_request(const json_t *b, struct err *e)
{
    static const struct srv_go_field fields[] = {
        {"model", 'S', "string"},
        {"max_tokens", 'I', "int"},
        {"messages", 'A', "[]anthropic.MessageParam"},
        {"stream", 'B', "bool"},
        {"temperature", 'N', "float64"},
        {"top_p", 'N', "float64"},
        {"top_k", 'I', "int"},
        {"stop_sequences", 'A', "[]string"},
        {"tools", 'A', "[]anthropic.Tool"},
        {"tool_choice", 'O', "anthropic.ToolChoice"},
        {"thinking", 'O', "anthropic.ThinkingConfig"},
        {"metadata", 'O', "anthropic.Metadata"},
        {"output_config", 'O', "anthropic.OutputConfig"},
    };
    if (srv_check_go_fields(b, fields, sizeof(fields) / sizeof(fields[0]), "MessagesRequest", e) <
        0)
        return ERR_INVALID;
    const json_t *sys = json_object_get(b, "system");
    if (present(sys) && !json_is_string(sys) && !json_is_array(sys))
        return type_error(e, sys, "system", "string or []anthropic.ContentBlock");
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(b, "stop_sequences"), i, v)
    {
        if (!json_is_string(v))
            return type_error(e, v, "stop_sequences", "string");
    }
    json_array_foreach(json_object_get(b, "messages"), i, v)
    {
        if (!json_is_object(v))
            return type_error(e, v, "messages", "anthropic.MessageParam");
        const json_t *role = json_object_get(v, "role");
        const json_t *content = json_object_get(v, "content");
        if (present(role) && !json_is_string(role))
            return type_error(e, role, "messages.role", "string");
        if (present(content) && !json_is_string(content) && !json_is_array(content))
            return type_error(e, content, "messages.content", "[]anthropic.ContentBlock");
    }
    json_array_foreach(json_object_get(b, "tools"), i, v)
    {
        if (!json_is_object(v))
            return type_error(e, v, "tools", "anthropic.Tool");
        const json_t *name = json_object_get(v, "name");
        if (present(name) && !json_is_string(name))
            return type_error(e, name, "tools.name", "string");
    }
    return 0;
}

// An image source → its base64 data (borrowed), or NULL with e set.
static const char *image_data(const json_t *source, struct err *e)
{
    if (!json_is_object(source)) {
        err_set(e, ERR_INVALID, "invalid image source");
        return NULL;
    }
    const char *type = json_string_value(json_object_get(source, "type"));
    if (!type || strcmp(type, "base64") != 0) {
        err_set(e, ERR_INVALID, "invalid image source type: %s. Only base64 images are supported.",
                type ? type : "");
        return NULL;
    }
    const char *data = json_string_value(json_object_get(source, "data"));
    if (!data || !base64_valid(data)) {
        err_set(e, ERR_INVALID, "invalid base64 image data");
        return NULL;
    }
    return data;
}

// tool_result content (a string, or text and image blocks) → text + images.
static int tool_result_content(const json_t *content, struct buf *text, json_t *images,
                               struct err *e)
{
    if (json_is_string(content))
        return buf_append_str(text, json_string_value(content));
    size_t i;
    const json_t *blk;
    json_array_foreach(content, i, blk)
    {
        const char *type = json_string_value(json_object_get(blk, "type"));
        if (type && strcmp(type, "text") == 0) {
            const char *t = json_string_value(json_object_get(blk, "text"));
            buf_append_str(text, t ? t : "");
        } else if (type && strcmp(type, "image") == 0) {
            const json_t *src = json_object_get(blk, "source");
            if (!json_is_object(src))
                return err_set(e, ERR_INVALID, "invalid tool_result image source");
            const char *data = image_data(src, e);
            if (!data)
                return ERR_INVALID;
            jsonx_arr_append(images, json_string(data));
        }
    }
    return 0;
}

// What one Anthropic message's content blocks gather before they become native messages.
struct msg_parts {
    struct buf text;
    json_t *images, *calls, *results;
    const char *thinking;
};

// A tool_use (or server_tool_use) block → one native tool call. Only tool_use must carry
// its id and name.
static int add_tool_use(const json_t *blk, const char *type, json_t *calls, struct err *e)
{
    const char *id = json_string_value(json_object_get(blk, "id"));
    const char *name = json_string_value(json_object_get(blk, "name"));
    if (strcmp(type, "tool_use") == 0 && (!id || !*id))
        return err_set(e, ERR_INVALID, "tool_use block missing required 'id' field");
    if (strcmp(type, "tool_use") == 0 && (!name || !*name))
        return err_set(e, ERR_INVALID, "tool_use block missing required 'name' field");
    const json_t *input = json_object_get(blk, "input");
    json_t *args = json_is_object(input) ? json_deep_copy(input) : json_object();
    json_t *call = json_pack("{s:s,s:{s:s,s:o}}", "id", id ? id : "", "function", "name",
                             name ? name : "", "arguments", args);
    jsonx_arr_append(calls, call);
    return 0;
}

// A tool_result block → one native "tool" message, named after the call it answers when
// that call is among the messages converted so far (out).
static int add_tool_result(const json_t *blk, const json_t *out, json_t *results, struct err *e)
{
    struct buf rt;
    buf_init(&rt, SERVER_MAX_BODY_BYTES);
    json_t *rimg = json_array();
    int rc = tool_result_content(json_object_get(blk, "content"), &rt, rimg, e);
    if (rc < 0) {
        buf_deinit(&rt);
        json_decref(rimg);
        return rc;
    }
    json_t *n = json_object();
    jsonx_set_str(n, "role", "tool");
    jsonx_set_strn(n, "content", rt.data ? rt.data : "", rt.len);
    if (json_array_size(rimg))
        json_object_set(n, "images", rimg);
    const char *id = json_string_value(json_object_get(blk, "tool_use_id"));
    if (id && *id) {
        jsonx_set_str(n, "tool_call_id", id);
        const char *tn = srv_tool_name_for(out, id);
        if (*tn)
            jsonx_set_str(n, "tool_name", tn);
    }
    jsonx_arr_append(results, n);
    json_decref(rimg);
    buf_deinit(&rt);
    return 0;
}

// One content block into parts, by its type. Other blocks (redacted_thinking, documents,
// ...) carry nothing a local model can use; upstream skips them too.
static int add_block(const json_t *blk, const json_t *out, struct msg_parts *mp, struct err *e)
{
    const char *type = json_string_value(json_object_get(blk, "type"));
    if (!type)
        return 0;
    if (strcmp(type, "text") == 0) {
        const char *t = json_string_value(json_object_get(blk, "text"));
        buf_append_str(&mp->text, t ? t : "");
    } else if (strcmp(type, "image") == 0) {
        const char *data = image_data(json_object_get(blk, "source"), e);
        if (!data)
            return ERR_INVALID;
        jsonx_arr_append(mp->images, json_string(data));
    } else if (strcmp(type, "tool_use") == 0 || strcmp(type, "server_tool_use") == 0) {
        return add_tool_use(blk, type, mp->calls, e);
    } else if (strcmp(type, "tool_result") == 0) {
        return add_tool_result(blk, out, mp->results, e);
    } else if (strcmp(type, "thinking") == 0) {
        mp->thinking = json_string_value(json_object_get(blk, "thinking"));
    }
    return 0;
}

// Appends the gathered parts to out: the message itself (when it has anything) and its tool
// results, which go first in a user turn.
static void emit_message(const char *role, const struct msg_parts *mp, json_t *out)
{
    bool user = strcmp(role, "user") == 0;
    if (user)
        json_array_extend(out, mp->results);
    if (mp->text.len || json_array_size(mp->images) || json_array_size(mp->calls) ||
        (mp->thinking && *mp->thinking)) {
        json_t *n = json_object();
        jsonx_set_str(n, "role", role);
        jsonx_set_strn(n, "content", mp->text.data ? mp->text.data : "", mp->text.len);
        if (json_array_size(mp->images))
            json_object_set(n, "images", mp->images);
        if (json_array_size(mp->calls))
            json_object_set(n, "tool_calls", mp->calls);
        if (mp->thinking && *mp->thinking)
            jsonx_set_str(n, "thinking", mp->thinking);
        jsonx_arr_append(out, n);
    }
    if (!user)
        json_array_extend(out, mp->results);
}

// One Anthropic message → native messages appended to out. The tool results
// of a user turn come first (they answer the previous assistant turn), as
// upstream orders them.
static int convert_message(const json_t *m, json_t *out, struct err *e)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    char role[32];
    snprintf(role, sizeof(role), "%s", r ? r : "");
    for (char *p = role; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    const json_t *content = json_object_get(m, "content");
    struct msg_parts mp = {.images = json_array(), .calls = json_array(), .results = json_array()};
    buf_init(&mp.text, SERVER_MAX_BODY_BYTES);
    int rc = 0;
    if (json_is_string(content))
        buf_append_str(&mp.text, json_string_value(content));
    size_t i;
    const json_t *blk;
    json_array_foreach(content, i, blk)
    {
        if ((rc = add_block(blk, out, &mp, e)) < 0)
            break;
    }
    if (rc == 0)
        emit_message(role, &mp, out);
    buf_deinit(&mp.text);
    json_decref(mp.images);
    json_decref(mp.calls);
    json_decref(mp.results);
    return rc;
}

// tools[] → native tools; the names go to names (for tool_choice).
static int convert_tools(const json_t *tools, json_t *out, struct err *e)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *desc = json_string_value(json_object_get(t, "description"));
        const char *type = json_string_value(json_object_get(t, "type"));
        const json_t *schema = json_object_get(t, "input_schema");
        if (type && strncmp(type, "web_search", 10) == 0)
            return err_set(e, ERR_INVALID, SERVER_NO_CLOUD_MSG " (web search is unavailable)");
        if (present(schema) && !json_is_object(schema))
            return err_set(e, ERR_INVALID,
                           "invalid input_schema for tool \"%s\": json: cannot unmarshal %s into "
                           "Go value of type api.ToolFunctionParameters",
                           name ? name : "", jsonx_type_name(schema));
        json_t *fn = json_object();
        jsonx_set_str(fn, "name", name ? name : "");
        if (desc && *desc)
            jsonx_set_str(fn, "description", desc);
        jsonx_set(fn, "parameters",
                  json_is_object(schema) ? json_deep_copy(schema) : json_pack("{s:s}", "type", ""));
        jsonx_arr_append(out, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    return 0;
}

json_t *srv_forced_call_schema(const json_t *tools, const char *only)
{
    json_t *alts = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (only && strcmp(name, only) != 0)
            continue;
        json_t *params = json_deep_copy(json_object_get(fn, "parameters"));
        const char *ptype = json_string_value(json_object_get(params, "type"));
        if (!ptype || !*ptype)
            jsonx_set_str(params, "type", "object");
        jsonx_arr_append(alts, json_pack("{s:s,s:{s:{s:s},s:o},s:[s,s]}", "type", "object",
                                         "properties", "name", "const", name, "arguments", params,
                                         "required", "name", "arguments"));
    }
    if (json_array_size(alts) == 1) {
        json_t *one = json_incref(json_array_get(alts, 0));
        json_decref(alts);
        return one;
    }
    return json_pack("{s:o}", "anyOf", alts);
}

static int convert_tool_choice(const json_t *tc, json_t *native, struct err *e)
{
    if (!tc)
        return 0;
    const char *type = json_string_value(json_object_get(tc, "type"));
    json_t *tools = json_object_get(native, "tools");
    if (!type || strcmp(type, "auto") == 0)
        return 0;
    if (strcmp(type, "none") == 0) {
        json_object_del(native, "tools");
        return 0;
    }
    const char *name = NULL;
    if (strcmp(type, "tool") == 0) {
        name = json_string_value(json_object_get(tc, "name"));
        if (!name || !*name)
            return err_set(e, ERR_INVALID, "tool_choice.name is required when type is \"tool\"");
        bool found = false;
        size_t i;
        const json_t *t;
        json_array_foreach(tools, i, t)
        {
            const char *n =
                json_string_value(json_object_get(json_object_get(t, "function"), "name"));
            found = found || (n && strcmp(n, name) == 0);
        }
        if (!found)
            return err_set(e, ERR_INVALID, "tool_choice names tool \"%s\", which is not in tools",
                           name);
    } else if (strcmp(type, "any") != 0) {
        return err_set(e, ERR_INVALID,
                       "invalid tool_choice type \"%s\" (must be \"auto\", \"any\", \"tool\", or "
                       "\"none\")",
                       type);
    }
    if (!json_array_size(tools))
        return err_set(e, ERR_INVALID, "tool_choice \"%s\" requires tools", type);
    jsonx_set(native, "format", srv_forced_call_schema(tools, name));
    return 0;
}

// system (a string or text blocks) → one leading native system message, if not empty.
static void convert_system(const json_t *sys, json_t *out)
{
    struct buf st;
    buf_init(&st, SERVER_MAX_BODY_BYTES);
    if (json_is_string(sys)) {
        buf_append_str(&st, json_string_value(sys));
    } else {
        size_t i;
        const json_t *blk;
        json_array_foreach(sys, i, blk)
        {
            const char *t = json_string_value(json_object_get(blk, "text"));
            const char *type = json_string_value(json_object_get(blk, "type"));
            if (t && type && strcmp(type, "text") == 0)
                buf_append_str(&st, t);
        }
    }
    if (st.len)
        jsonx_arr_append(out,
                         json_pack("{s:s,s:s%}", "role", "system", "content", st.data, st.len));
    buf_deinit(&st);
}

// max_tokens, the sampling settings we share and stop_sequences → native options.
static void convert_options(const json_t *b, json_int_t max_tokens, json_t *native)
{
    json_t *opts = json_object();
    jsonx_set(native, "options", opts);
    jsonx_set_int(opts, "num_predict", max_tokens);
    static const char *const passthrough[] = {"temperature", "top_p", "top_k"};
    for (size_t k = 0; k < 3; k++) {
        const json_t *v = json_object_get(b, passthrough[k]);
        if (present(v))
            json_object_set(opts, passthrough[k], (json_t *)v);
    }
    if (json_array_size(json_object_get(b, "stop_sequences")))
        json_object_set(opts, "stop", json_object_get(b, "stop_sequences"));
}

// thinking {type: enabled|disabled} wins over output_config.effort.
static void convert_thinking(const json_t *b, json_t *native)
{
    const char *tt = json_string_value(json_object_get(json_object_get(b, "thinking"), "type"));
    const char *effort =
        json_string_value(json_object_get(json_object_get(b, "output_config"), "effort"));
    if (tt && (strcmp(tt, "enabled") == 0 || strcmp(tt, "adaptive") == 0)) {
        jsonx_set_bool(native, "think", true);
    } else if (tt && strcmp(tt, "disabled") == 0) {
        jsonx_set_bool(native, "think", false);
    } else if (effort) {
        if (strcmp(effort, "xhigh") == 0)
            effort = "high";
        if (!strcmp(effort, "low") || !strcmp(effort, "medium") || !strcmp(effort, "high") ||
            !strcmp(effort, "max"))
            jsonx_set_str(native, "think", effort);
    }
}

json_t *srv_anthropic_request(const json_t *b, struct err *e)
{
    if (check_request(b, e) < 0)
        return NULL;
    const char *model = json_string_value(json_object_get(b, "model"));
    if (!model || !*model) {
        err_set(e, ERR_INVALID, "model is required");
        return NULL;
    }
    const json_t *mt = json_object_get(b, "max_tokens");
    if (!json_is_integer(mt) || json_integer_value(mt) <= 0) {
        err_set(e, ERR_INVALID, "max_tokens is required and must be positive");
        return NULL;
    }
    const json_t *msgs = json_object_get(b, "messages");
    if (json_array_size(msgs) == 0) {
        err_set(e, ERR_INVALID, "messages is required");
        return NULL;
    }
    json_t *native = json_object();
    json_t *out = json_array();
    jsonx_set_str(native, "model", model);
    jsonx_set(native, "messages", out);

    convert_system(json_object_get(b, "system"), out);
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (convert_message(m, out, e) < 0)
            goto fail;
    }

    convert_options(b, json_integer_value(mt), native);

    const json_t *tools = json_object_get(b, "tools");
    if (json_array_size(tools)) {
        json_t *nt = json_array();
        jsonx_set(native, "tools", nt);
        if (convert_tools(tools, nt, e) < 0)
            goto fail;
    }
    if (convert_tool_choice(json_object_get(b, "tool_choice"), native, e) < 0)
        goto fail;

    convert_thinking(b, native);
    jsonx_set_bool(native, "stream", json_is_true(json_object_get(b, "stream")));
    return native;
fail:
    json_decref(native);
    return NULL;
}

// ---------------------------------------------------------------------------
// Response (native ChatResponse → Message)

static const char *stop_reason(const char *done_reason, bool tool_calls)
{
    if (tool_calls)
        return "tool_use";
    if (!done_reason || !*done_reason || strcmp(done_reason, "stop") == 0)
        return "end_turn";
    if (strcmp(done_reason, "length") == 0)
        return "max_tokens";
    return "stop_sequence";
}

static json_t *tool_use_block(const json_t *call, bool empty_input)
{
    const json_t *fn = json_object_get(call, "function");
    const char *id = json_string_value(json_object_get(call, "id"));
    char gen[64];
    if (!id || !*id) {
        srv_anthropic_id(gen, sizeof(gen), "toolu");
        id = gen;
    }
    const char *name = json_string_value(json_object_get(fn, "name"));
    const json_t *args = json_object_get(fn, "arguments");
    json_t *input = !empty_input && json_is_object(args) ? json_deep_copy(args) : json_object();
    return json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", id, "name", name ? name : "",
                     "input", input);
}

static json_t *usage(int64_t in, int64_t out)
{
    return json_pack("{s:I,s:I}", "input_tokens", (json_int_t)in, "output_tokens", (json_int_t)out);
}

static int64_t metric(const json_t *nat, const char *key)
{
    return json_integer_value(json_object_get(nat, key));
}

json_t *srv_anthropic_response(const char *id, const char *model, const json_t *nat)
{
    const json_t *msg = json_object_get(nat, "message");
    const char *thinking = json_string_value(json_object_get(msg, "thinking"));
    const char *text = json_string_value(json_object_get(msg, "content"));
    const json_t *calls = json_object_get(msg, "tool_calls");
    json_t *content = json_array();
    if (thinking && *thinking)
        jsonx_arr_append(content, json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking",
                                            thinking, "signature", ""));
    if (text && *text)
        jsonx_arr_append(content, json_pack("{s:s,s:s}", "type", "text", "text", text));
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        jsonx_arr_append(content, tool_use_block(c, false));
    }
    json_t *o = json_object();
    jsonx_set_str(o, "id", id);
    jsonx_set_str(o, "type", "message");
    jsonx_set_str(o, "role", "assistant");
    jsonx_set_str(o, "model", model);
    jsonx_set(o, "content", content);
    jsonx_set_str(o, "stop_reason",
                  stop_reason(json_string_value(json_object_get(nat, "done_reason")),
                              json_array_size(calls) > 0));
    jsonx_set(o, "stop_sequence", json_null());
    jsonx_set(o, "usage", usage(metric(nat, "prompt_eval_count"), metric(nat, "eval_count")));
    return o;
}

void srv_forced_call_from_content(json_t *nat, const char *id_prefix)
{
    json_t *msg = json_object_get(nat, "message");
    if (json_array_size(json_object_get(msg, "tool_calls")))
        return;  // the model's own tool-call format was recognised already
    const char *text = json_string_value(json_object_get(msg, "content"));
    json_t *v = NULL;
    if (!text || jsonx_parse(text, strlen(text), &v, NULL) < 0)
        return;
    const json_t *name = json_object_get(v, "name");
    const json_t *args = json_object_get(v, "arguments");
    if (json_is_string(name) && json_is_object(args)) {
        char id[64];
        srv_anthropic_id(id, sizeof(id), id_prefix);
        jsonx_set(msg, "tool_calls",
                  json_pack("[{s:s,s:{s:O,s:O}}]", "id", id, "function", "name", name, "arguments",
                            args));
        jsonx_set_str(msg, "content", "");
    }
    json_decref(v);
}

// ---------------------------------------------------------------------------
// Streaming (native NDJSON objects → Anthropic events)

struct srv_anthropic_stream {
    char id[64];
    char *model;
    bool started, ping_sent, done;
    int index;  // of the open (or next) content block
    bool thinking_open, thinking_done, text_open;
    int64_t input_tokens;
    bool tool_used;
};

struct srv_anthropic_stream *srv_anthropic_stream_new(const char *id, const char *model)
{
    struct srv_anthropic_stream *s = xcalloc(1, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    s->model = xstrdup(model);
    return s;
}

void srv_anthropic_stream_free(struct srv_anthropic_stream *s)
{
    if (!s)
        return;
    free(s->model);
    free(s);
}

// Appends "event: <name>\ndata: <json>\n\n" (takes obj).
static void event(struct buf *out, const char *name, json_t *obj)
{
    buf_printf(out, "event: %s\ndata: ", name);
    jsonx_dump(obj, 0, out, NULL);
    buf_append_str(out, "\n\n");
    json_decref(obj);
}

static void block_start(struct srv_anthropic_stream *s, struct buf *out, json_t *block)
{
    event(out, "content_block_start",
          json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", s->index,
                    "content_block", block));
    if (!s->ping_sent) {  // Anthropic pings after the first block starts
        s->ping_sent = true;
        event(out, "ping", json_pack("{s:s}", "type", "ping"));
    }
}

static void block_delta(struct srv_anthropic_stream *s, struct buf *out, json_t *delta)
{
    event(out, "content_block_delta",
          json_pack("{s:s,s:i,s:o}", "type", "content_block_delta", "index", s->index, "delta",
                    delta));
}

static void block_stop(struct srv_anthropic_stream *s, struct buf *out)
{
    event(out, "content_block_stop",
          json_pack("{s:s,s:i}", "type", "content_block_stop", "index", s->index));
    s->index++;
}

// The first object opens the message, carrying the prompt's token count.
static void stream_start(struct srv_anthropic_stream *s, const json_t *nat, struct buf *out)
{
    s->started = true;
    s->input_tokens = metric(nat, "prompt_eval_count");
    json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:o}", "id", s->id, "type", "message",
                          "role", "assistant", "model", s->model, "content", "stop_reason",
                          "stop_sequence", "usage", usage(s->input_tokens, 0));
    event(out, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", m));
}

// Thinking goes to one thinking block, which closes for good when text begins.
static void stream_thinking(struct srv_anthropic_stream *s, const char *thinking, struct buf *out)
{
    if (s->text_open) {
        block_stop(s, out);
        s->text_open = false;
    }
    if (!s->thinking_open) {
        s->thinking_open = true;
        block_start(
            s, out,
            json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", ""));
    }
    block_delta(s, out, json_pack("{s:s,s:s}", "type", "thinking_delta", "thinking", thinking));
}

static void stream_text(struct srv_anthropic_stream *s, const char *text, struct buf *out)
{
    if (s->thinking_open) {
        s->thinking_open = false;
        s->thinking_done = true;
        block_stop(s, out);
    }
    if (!s->text_open) {
        s->text_open = true;
        block_start(s, out, json_pack("{s:s,s:s}", "type", "text", "text", ""));
    }
    block_delta(s, out, json_pack("{s:s,s:s}", "type", "text_delta", "text", text));
}

// Each tool call is a whole tool_use block: start, its arguments as one delta, stop.
static void stream_tool_call(struct srv_anthropic_stream *s, const json_t *c, struct buf *out)
{
    if (s->thinking_open || s->text_open) {
        s->thinking_done = s->thinking_done || s->thinking_open;
        s->thinking_open = s->text_open = false;
        block_stop(s, out);
    }
    block_start(s, out, tool_use_block(c, true));
    const json_t *args = json_object_get(json_object_get(c, "function"), "arguments");
    char *partial = json_is_object(args) ? jsonx_dumps(args, 0) : NULL;
    block_delta(s, out,
                json_pack("{s:s,s:s}", "type", "input_json_delta", "partial_json",
                          partial ? partial : "{}"));
    free(partial);
    block_stop(s, out);
    s->tool_used = true;
}

// The last object closes the open block and the message, with the stop reason and usage.
static void stream_finish(struct srv_anthropic_stream *s, const json_t *nat, struct buf *out)
{
    s->done = true;
    if (s->thinking_open || s->text_open)
        block_stop(s, out);
    if (!s->ping_sent) {
        s->ping_sent = true;
        event(out, "ping", json_pack("{s:s}", "type", "ping"));
    }
    int64_t in = metric(nat, "prompt_eval_count");
    event(
        out, "message_delta",
        json_pack("{s:s,s:{s:s,s:n},s:o}", "type", "message_delta", "delta", "stop_reason",
                  stop_reason(json_string_value(json_object_get(nat, "done_reason")), s->tool_used),
                  "stop_sequence", "usage",
                  usage(in ? in : s->input_tokens, metric(nat, "eval_count"))));
    event(out, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

void srv_anthropic_stream_encode(struct srv_anthropic_stream *s, const json_t *nat, struct buf *out)
{
    if (s->done)
        return;
    const json_t *err = json_object_get(nat, "error");
    if (err) {
        // After the status line is sent, errors travel as an event.
        s->done = true;
        json_t *o = srv_anthropic_error(500, json_is_string(err) ? json_string_value(err)
                                                                 : "internal error");
        json_object_del(o, "request_id");
        event(out, "error", o);
        return;
    }
    if (!s->started)
        stream_start(s, nat, out);
    const json_t *msg = json_object_get(nat, "message");
    const char *thinking = json_string_value(json_object_get(msg, "thinking"));
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (thinking && *thinking && !s->thinking_done)
        stream_thinking(s, thinking, out);
    if (text && *text)
        stream_text(s, text, out);
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, c)
    {
        stream_tool_call(s, c, out);
    }
    if (json_is_true(json_object_get(nat, "done")))
        stream_finish(s, nat, out);
}

static void events(void *state, const json_t *native, struct buf *out)
{
    srv_anthropic_stream_encode(state, native, out);
}

static void stream_free(void *state)
{
    srv_anthropic_stream_free(state);
}

struct message_ids {
    const char *id, *model;
};

static json_t *answer(const json_t *native, void *arg)
{
    const struct message_ids *ids = arg;
    return srv_anthropic_response(ids->id, ids->model, native);
}

static const struct srv_compat_api messages_api = {
    .error = srv_anthropic_error,
    .events = events,
    .free_state = stream_free,
    .call_prefix = "toolu",
    .answer = answer,
};

// ---------------------------------------------------------------------------
// Handlers

// Like Ollama's relax_thinking for this API: thinking asked of a model that
// cannot think is dropped instead of failing (Claude Code always asks).
static void relax_thinking(struct srv_req *r, json_t *native)
{
    json_t *think = json_object_get(native, "think");
    if (!think || json_is_false(think))
        return;
    struct store_model *m = NULL;
    if (store_model_load(r->srv->store, json_string_value(json_object_get(native, "model")), &m,
                         NULL) < 0)
        return;  // the native handler reports the model
    const char *caps[16];
    size_t n = store_model_capabilities(m, caps, 16);
    bool can = false;
    for (size_t i = 0; i < n; i++)
        can = can || strcmp(caps[i], "thinking") == 0;
    if (!can) {
        log_warn("model does not support thinking, relaxing thinking to nil (model=%s)",
                 json_string_value(json_object_get(native, "model")));
        json_object_del(native, "think");
    }
    store_model_free(m);
}

static void handle_messages(struct srv_req *r)
{
    struct err e = {0};
    json_t *b = srv_compat_body(r, srv_anthropic_error);
    if (!b)
        return;
    json_t *native = srv_anthropic_request(b, &e);
    if (!native) {
        reply_error(r, 400, e.msg);
        json_decref(b);
        return;
    }
    relax_thinking(r, native);
    bool stream = json_is_true(json_object_get(b, "stream"));
    // A forced tool call is decided on the whole answer: generated in one
    // piece, then sent as events when the client asked for a stream.
    bool forced = json_object_get(native, "format") != NULL;
    char id[64];
    srv_anthropic_id(id, sizeof(id), "msg");
    struct message_ids ids = {id, json_string_value(json_object_get(b, "model"))};
    srv_compat_chat(r, native, stream, forced, &messages_api,
                    srv_anthropic_stream_new(ids.id, ids.model), &ids);
    json_decref(native);
    json_decref(b);
}

// POST /v1/messages/count_tokens: {"input_tokens": N}, N being the length in
// the model's tokens of the prompt the model's template renders for this
// request (system, messages, tools), as /v1/messages would send it.
static void handle_count_tokens(struct srv_req *r)
{
    struct err e = {0};
    json_t *b = srv_compat_body(r, srv_anthropic_error);
    if (!b)
        return;
    // count_tokens has no max_tokens; the translation wants one.
    if (!json_object_get(b, "max_tokens"))
        jsonx_set_int(b, "max_tokens", 1);
    json_t *native = srv_anthropic_request(b, &e);
    if (!native) {
        reply_error(r, 400, e.msg);
        json_decref(b);
        return;
    }
    relax_thinking(r, native);
    json_object_del(native, "format");
    jsonx_set_bool(native, "stream", false);
    jsonx_set_bool(native, "truncate", false);
    r->count_prompt_tokens = true;
    int rc = srv_run_native(r, "/api/chat", native, NULL);
    r->count_prompt_tokens = false;
    if (!srv_compat_failed(r, rc, srv_anthropic_error)) {
        json_t *nat = srv_native_reply(r);
        const json_t *n = json_object_get(nat, "prompt_eval_count");
        if (!json_is_integer(n))
            reply_error(r, 500, "invalid response from native handler");
        else
            srv_reply_json(r, 200, json_pack("{s:O}", "input_tokens", n));
        json_decref(nat);
    }
    json_decref(native);
    json_decref(b);
}

const struct srv_route server_anthropic_routes[] = {
    {"POST", "/v1/messages", handle_messages, NULL},
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, NULL},
    {NULL, NULL, NULL, NULL},
};

// The OpenAI Responses API (Ollama's docs/api/openai-compatibility.mdx,
// "/v1/responses"): POST /v1/responses, for Codex CLI and the openai SDKs.
//
// A translation layer like openai.c: the request becomes a native /api/chat
// body, the native handler runs on the same srv_req (srv_run_native), and its
// answer becomes a Response object, or the Responses event stream
// (`event: response.created` ... `response.completed`, each with its
// sequence_number) in the order Ollama emits it. Errors are OpenAI's shape
// ({"error":{message,type,param,code}}); after the stream started they end it
// with `response.failed`.
//
// As Ollama: nothing is stored ("store": false in every answer) and
// previous_response_id is accepted and not followed (echoed as null), so a
// client sends the whole conversation each turn. Beyond Ollama: tool_choice
// ("none", "required", or one function) using the grammar that anthropic.c
// uses for forced calls.
#include "server/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

// Errors are OpenAI's shape (srv_openai_error).

// "<prefix>_<n>", n in 0..999998 as upstream.
static void make_id(char *out, size_t n, const char *prefix)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = (uint32_t)time_now_ns();
    snprintf(out, n, "%s_%u", prefix, v % 999999u);
}

// ---------------------------------------------------------------------------
// Request (ResponsesRequest → native /api/chat)

static bool present(const json_t *v)
{
    return v && !json_is_null(v);
}

static int type_error(struct err *e, const json_t *v, const char *field, const char *go_type)
{
    return err_set(e, ERR_INVALID,
                   "json: cannot unmarshal %s into Go struct field ResponsesRequest.%s of type %s",
                   jsonx_type_name(v), field, go_type);
}

static int check_request(const json_t *b, struct err *e)
{
    static const struct srv_go_field fields[] = {
        {"model", 'S', "string"},
        {"instructions", 'S', "string"},
        {"max_output_tokens", 'I', "int"},
        {"temperature", 'N', "float64"},
        {"top_p", 'N', "float64"},
        {"stream", 'B', "bool"},
        {"background", 'B', "bool"},
        {"store", 'B', "bool"},
        {"previous_response_id", 'S', "string"},
        {"truncation", 'S', "string"},
        {"tools", 'A', "[]openai.ResponsesTool"},
        {"text", 'O', "openai.ResponsesText"},
        {"reasoning", 'O', "openai.ResponsesReasoning"},
    };
    if (srv_check_go_fields(b, fields, sizeof(fields) / sizeof(fields[0]), "ResponsesRequest", e) <
        0)
        return ERR_INVALID;
    const json_t *in = json_object_get(b, "input");
    if (present(in) && !json_is_string(in) && !json_is_array(in))
        return err_set(e, ERR_INVALID,
                       "input must be a string or array: json: cannot unmarshal %s into Go value "
                       "of type []json.RawMessage",
                       jsonx_type_name(in));
    const json_t *tc = json_object_get(b, "tool_choice");
    if (present(tc) && !json_is_string(tc) && !json_is_object(tc))
        return type_error(e, tc, "tool_choice", "string or object");
    return 0;
}

// Message content (a string, or input_text / output_text / input_image
// parts) → text + images.
static int convert_content(const json_t *content, struct buf *text, json_t *images, struct err *e)
{
    if (json_is_string(content))
        return buf_append_str(text, json_string_value(content));
    if (present(content) && !json_is_array(content))
        return err_set(e, ERR_INVALID, "content must be a string or array");
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type)
            return err_set(e, ERR_INVALID, "content[%zu]: missing type", i);
        if (strcmp(type, "input_text") == 0 || strcmp(type, "output_text") == 0) {
            const char *t = json_string_value(json_object_get(part, "text"));
            buf_append_str(text, t ? t : "");
        } else if (strcmp(type, "input_image") == 0) {
            const char *url = json_string_value(json_object_get(part, "image_url"));
            if (!url || !*url)
                continue;  // file_id images are not supported; upstream skips them
            const char *data = srv_image_payload(url, e);
            if (!data)
                return ERR_INVALID;
            jsonx_arr_append(images, json_string(data));
        } else if (strcmp(type, "input_file") == 0) {
            return err_set(e, ERR_INVALID, "file inputs are not currently supported");
        } else {
            return err_set(e, ERR_INVALID, "content[%zu]: unknown content type: %s", i, type);
        }
    }
    return 0;
}

static json_t *last_assistant(json_t *out)
{
    json_t *last = json_array_get(out, json_array_size(out) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    return role && strcmp(role, "assistant") == 0 ? last : NULL;
}

static bool has_call(const json_t *msg, const char *call_id)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, c)
    {
        const char *id = json_string_value(json_object_get(c, "id"));
        if (id && call_id && strcmp(id, call_id) == 0)
            return true;
    }
    return false;
}

static void append_text(json_t *msg, const char *key, const char *text, const char *sep)
{
    const char *old = json_string_value(json_object_get(msg, key));
    char *joined = xasprintf("%s%s%s", old ? old : "", old && *old && *text ? sep : "", text);
    jsonx_set_str(msg, key, joined);
    free(joined);
}

// Converters for one kind of input item: items[idx] → native messages appended to out.
// *thinking carries a reasoning item's text to the next assistant message.
typedef int (*item_convert_fn)(const json_t *items, size_t idx, json_t *out, char **thinking,
                               struct err *e);

// Hands the pending reasoning text to assistant message m.
static void take_thinking(json_t *m, char **thinking)
{
    jsonx_set_str(m, "thinking", *thinking);
    free(*thinking);
    *thinking = NULL;
}

// A "message" item that came converted as content and images.
static void add_message(const json_t *items, size_t idx, const char *role, const char *content,
                        json_t *images, json_t *out, char **thinking)
{
    bool assistant = role && strcmp(role, "assistant") == 0;
    // An assistant message replayed between a function_call and its
    // output joins the call's message, so the result follows the call.
    const json_t *next = json_array_get(items, idx + 1);
    const char *ntype = json_string_value(json_object_get(next, "type"));
    json_t *last = last_assistant(out);
    if (assistant && ntype && strcmp(ntype, "function_call_output") == 0 && last &&
        has_call(last, json_string_value(json_object_get(next, "call_id")))) {
        append_text(last, "content", content, "\n");
        if (json_array_size(images)) {
            if (!json_object_get(last, "images"))
                jsonx_set(last, "images", json_array());
            json_array_extend(json_object_get(last, "images"), images);
        }
        return;
    }
    json_t *m = json_object();
    jsonx_set_str(m, "role", role ? role : "");
    jsonx_set_str(m, "content", content);
    if (json_array_size(images))
        json_object_set(m, "images", images);
    if (assistant && *thinking)
        take_thinking(m, thinking);
    jsonx_arr_append(out, m);
}

static int convert_message_item(const json_t *items, size_t idx, json_t *out, char **thinking,
                                struct err *e)
{
    const json_t *it = json_array_get(items, idx);
    const char *role = json_string_value(json_object_get(it, "role"));
    struct buf text;
    buf_init(&text, SERVER_MAX_BODY_BYTES);
    json_t *images = json_array();
    int rc = convert_content(json_object_get(it, "content"), &text, images, e);
    if (rc < 0)
        err_prefix(e, "input[%zu]", idx);
    else
        add_message(items, idx, role, text.data ? text.data : "", images, out, thinking);
    buf_deinit(&text);
    json_decref(images);
    return rc;
}

// A "function_call" joins the last assistant message's tool calls (or starts one).
static int convert_function_call(const json_t *items, size_t idx, json_t *out, char **thinking,
                                 struct err *e)
{
    const json_t *it = json_array_get(items, idx);
    const char *args = json_string_value(json_object_get(it, "arguments"));
    json_t *parsed = NULL;
    struct err pe = {0};
    if (args && *args && jsonx_parse(args, strlen(args), &parsed, &pe) < 0)
        return err_set(e, ERR_INVALID, "failed to parse function call arguments: %s", pe.msg);
    if (parsed && !json_is_object(parsed)) {
        json_decref(parsed);
        return err_set(e, ERR_INVALID,
                       "failed to parse function call arguments: json: cannot unmarshal "
                       "non-object into Go value of type map[string]interface {}");
    }
    const char *call_id = json_string_value(json_object_get(it, "call_id"));
    const char *name = json_string_value(json_object_get(it, "name"));
    json_t *call = json_pack("{s:s,s:{s:s,s:o}}", "id", call_id ? call_id : "", "function", "name",
                             name ? name : "", "arguments", parsed ? parsed : json_object());
    json_t *m = last_assistant(out);
    if (!m) {
        m = json_pack("{s:s,s:s}", "role", "assistant", "content", "");
        jsonx_arr_append(out, m);
    }
    if (!json_object_get(m, "tool_calls"))
        jsonx_set(m, "tool_calls", json_array());
    jsonx_arr_append(json_object_get(m, "tool_calls"), call);
    if (*thinking)
        take_thinking(m, thinking);
    return 0;
}

// A "function_call_output" becomes a tool message naming the call and its function.
static int convert_call_output(const json_t *items, size_t idx, json_t *out, char **thinking,
                               struct err *e)
{
    (void)thinking;
    const json_t *it = json_array_get(items, idx);
    const json_t *output = json_object_get(it, "output");
    struct buf text;
    buf_init(&text, SERVER_MAX_BODY_BYTES);
    json_t *images = json_array();
    int rc = convert_content(output, &text, images, e);
    if (rc == 0) {
        const char *call_id = json_string_value(json_object_get(it, "call_id"));
        json_t *m = json_object();
        jsonx_set_str(m, "role", "tool");
        jsonx_set_str(m, "content", text.data ? text.data : "");
        if (json_array_size(images))
            json_object_set(m, "images", images);
        if (call_id && *call_id) {
            jsonx_set_str(m, "tool_call_id", call_id);
            const char *tn = srv_tool_name_for(out, call_id);
            if (*tn)
                jsonx_set_str(m, "tool_name", tn);
        }
        jsonx_arr_append(out, m);
    } else {
        err_prefix(e, "input[%zu]: output", idx);
    }
    buf_deinit(&text);
    json_decref(images);
    return rc;
}

// A "reasoning" item's text (encrypted_content, else its summaries) waits in *thinking.
static int convert_reasoning(const json_t *items, size_t idx, json_t *out, char **thinking,
                             struct err *e)
{
    (void)out;
    (void)e;
    const json_t *it = json_array_get(items, idx);
    const char *enc = json_string_value(json_object_get(it, "encrypted_content"));
    struct buf t;
    buf_init(&t, SERVER_MAX_BODY_BYTES);
    if (enc && *enc) {
        buf_append_str(&t, enc);
    } else {
        size_t k;
        const json_t *s;
        json_array_foreach(json_object_get(it, "summary"), k, s)
        {
            const char *st = json_string_value(json_object_get(s, "text"));
            buf_append_str(&t, st ? st : "");
        }
    }
    free(*thinking);
    *thinking = t.len ? xstrdup(t.data) : NULL;
    buf_deinit(&t);
    return 0;
}

// Input item types; web_search_call items are accepted and dropped.
static const struct {
    const char *type;
    item_convert_fn convert;  // NULL: ignored
} item_kinds[] = {
    {"message", convert_message_item},
    {"function_call", convert_function_call},
    {"function_call_output", convert_call_output},
    {"reasoning", convert_reasoning},
    {"web_search_call", NULL},
};

// One input item → native messages appended to out. *thinking carries a
// reasoning item's text to the next assistant message.
static int convert_item(const json_t *items, size_t idx, json_t *out, char **thinking,
                        struct err *e)
{
    const json_t *it = json_array_get(items, idx);
    if (!json_is_object(it))
        return err_set(e, ERR_INVALID,
                       "input[%zu]: json: cannot unmarshal %s into Go value of type struct { Type "
                       "string \"json:\\\"type\\\"\"; Role string \"json:\\\"role\\\"\" }",
                       idx, jsonx_type_name(it));
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *role = json_string_value(json_object_get(it, "role"));
    if ((!type || !*type) && role && *role)
        type = "message";
    if (!type || !*type)
        return err_set(e, ERR_INVALID, "input[%zu]: input item missing required 'type' field", idx);
    for (size_t i = 0; i < sizeof(item_kinds) / sizeof(item_kinds[0]); i++) {
        if (strcmp(type, item_kinds[i].type) != 0)
            continue;
        return item_kinds[i].convert ? item_kinds[i].convert(items, idx, out, thinking, e) : 0;
    }
    return err_set(e, ERR_INVALID, "input[%zu]: unknown input item type: \"%s\"", idx, type);
}

// A function tool (or a namespace's members, named "ns.member") → native tools.
static int convert_tool(const json_t *t, const char *ns, json_t *out, struct err *e)
{
    if (!json_is_object(t))
        return err_set(e, ERR_INVALID, "invalid tool");
    const char *type = json_string_value(json_object_get(t, "type"));
    const char *name = json_string_value(json_object_get(t, "name"));
    if (type && strcmp(type, "web_search") == 0) {
        log_warn("dropping the web_search tool: " SERVER_NO_CLOUD_MSG);
        return 0;
    }
    if (type && strcmp(type, "namespace") == 0) {
        size_t i;
        const json_t *m;
        json_array_foreach(json_object_get(t, "tools"), i, m)
        {
            if (convert_tool(m, name, out, e) < 0)
                return ERR_INVALID;
        }
        return 0;
    }
    const json_t *params = json_object_get(t, "parameters");
    if (present(params) && !json_is_object(params))
        return err_set(e, ERR_INVALID,
                       "json: cannot unmarshal %s into Go struct field ResponsesTool.tools."
                       "parameters of type map[string]interface {}",
                       jsonx_type_name(params));
    char *full = ns && *ns ? xasprintf("%s.%s", ns, name ? name : "") : xstrdup(name ? name : "");
    json_t *fn = json_object();
    jsonx_set_str(fn, "name", full);
    const char *desc = json_string_value(json_object_get(t, "description"));
    if (desc && *desc)
        jsonx_set_str(fn, "description", desc);
    jsonx_set(fn, "parameters",
              json_is_object(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", ""));
    jsonx_arr_append(out, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    free(full);
    return 0;
}

static int convert_tool_choice(const json_t *tc, json_t *native, struct err *e)
{
    const char *mode = json_string_value(tc);
    const char *only = NULL;
    if (!present(tc) || (mode && strcmp(mode, "auto") == 0))
        return 0;
    if (mode && strcmp(mode, "none") == 0) {
        json_object_del(native, "tools");
        return 0;
    }
    if (json_is_object(tc)) {
        const char *type = json_string_value(json_object_get(tc, "type"));
        only = json_string_value(json_object_get(tc, "name"));
        if (!type || strcmp(type, "function") != 0 || !only || !*only)
            return err_set(e, ERR_INVALID,
                           "unsupported tool_choice: only \"auto\", \"none\", \"required\", or "
                           "{\"type\": \"function\", \"name\": ...} are supported");
    } else if (!mode || strcmp(mode, "required") != 0) {
        return err_set(e, ERR_INVALID,
                       "invalid tool_choice \"%s\" (must be \"auto\", \"none\", or \"required\")",
                       mode ? mode : "");
    }
    const json_t *tools = json_object_get(native, "tools");
    bool found = !only;
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        found = found || (n && strcmp(n, only) == 0);
    }
    if (!json_array_size(tools) || !found)
        return err_set(e, ERR_INVALID, "tool_choice names a tool that is not in tools");
    jsonx_set(native, "format", srv_forced_call_schema(tools, only));
    return 0;
}

json_t *srv_responses_request(const json_t *b, struct err *e)
{
    if (check_request(b, e) < 0)
        return NULL;
    json_t *native = json_object();
    json_t *out = json_array();
    char *thinking = NULL;
    const char *model = json_string_value(json_object_get(b, "model"));
    jsonx_set_str(native, "model", model ? model : "");
    jsonx_set(native, "messages", out);
    const char *instr = json_string_value(json_object_get(b, "instructions"));
    if (instr && *instr)
        jsonx_arr_append(out, json_pack("{s:s,s:s}", "role", "system", "content", instr));
    const json_t *in = json_object_get(b, "input");
    if (json_is_string(in) && *json_string_value(in))
        jsonx_arr_append(out, json_pack("{s:s,s:O}", "role", "user", "content", in));
    for (size_t i = 0; json_is_array(in) && i < json_array_size(in); i++) {
        if (convert_item(in, i, out, &thinking, e) < 0)
            goto fail;
    }
    if (thinking) {
        jsonx_arr_append(out, json_pack("{s:s,s:s,s:s}", "role", "assistant", "content", "",
                                        "thinking", thinking));
        free(thinking);
        thinking = NULL;
    }

    json_t *opts = json_object();
    jsonx_set(native, "options", opts);
    const json_t *temp = json_object_get(b, "temperature");
    jsonx_set(opts, "temperature", json_real(present(temp) ? json_number_value(temp) : 1.0));
    const json_t *top_p = json_object_get(b, "top_p");
    if (present(top_p))
        jsonx_set(opts, "top_p", json_real(json_number_value(top_p)));
    const json_t *max = json_object_get(b, "max_output_tokens");
    if (present(max))
        jsonx_set_int(opts, "num_predict", json_integer_value(max));

    json_t *think = NULL;
    if (srv_openai_effort(b, &think, e) < 0)
        goto fail;
    if (think)
        jsonx_set(native, "think", think);

    const json_t *tools = json_object_get(b, "tools");
    if (json_array_size(tools)) {
        json_t *nt = json_array();
        jsonx_set(native, "tools", nt);
        size_t i;
        const json_t *t;
        json_array_foreach(tools, i, t)
        {
            if (convert_tool(t, NULL, nt, e) < 0)
                goto fail;
        }
        if (!json_array_size(nt))
            json_object_del(native, "tools");
    }
    if (convert_tool_choice(json_object_get(b, "tool_choice"), native, e) < 0)
        goto fail;
    const json_t *fmt = json_object_get(json_object_get(b, "text"), "format");
    const char *ftype = json_string_value(json_object_get(fmt, "type"));
    if (ftype && strcmp(ftype, "json_schema") == 0 && present(json_object_get(fmt, "schema"))) {
        if (json_object_get(native, "format"))
            goto both;
        json_object_set(native, "format", json_object_get(fmt, "schema"));
    } else if (ftype && strcmp(ftype, "json_object") == 0) {
        if (json_object_get(native, "format"))
            goto both;
        jsonx_set_str(native, "format", "json");
    }
    jsonx_set_bool(native, "stream", json_is_true(json_object_get(b, "stream")));
    return native;
both:
    err_set(e, ERR_INVALID, "text.format cannot be combined with a tool_choice that forces a call");
fail:
    free(thinking);
    json_decref(native);
    return NULL;
}

// ---------------------------------------------------------------------------
// Response objects

// {"type":"output_text","text":..,"annotations":[],"logprobs":[]}
static json_t *output_text(const char *text)
{
    return json_pack("{s:s,s:s,s:[],s:[]}", "type", "output_text", "text", text, "annotations",
                     "logprobs");
}

static json_t *message_item(const char *id, const char *status, const char *text)
{
    json_t *content = text ? json_pack("[o]", output_text(text)) : json_array();
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "id", id, "type", "message", "status", status, "role",
                     "assistant", "content", content);
}

static json_t *reasoning_item(const char *id, const char *text)
{
    return json_pack("{s:s,s:s,s:[{s:s,s:s}],s:s}", "id", id, "type", "reasoning", "summary",
                     "type", "summary_text", "text", text, "encrypted_content", text);
}

// A native tool call → function_call item (arguments as a JSON string).
static json_t *call_item(const char *id, const char *status, const json_t *call, bool args)
{
    const json_t *fn = json_object_get(call, "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    const char *call_id = json_string_value(json_object_get(call, "id"));
    const json_t *a = json_object_get(fn, "arguments");
    char *text = args && json_is_object(a) ? jsonx_dumps(a, 0) : NULL;
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", id, "type", "function_call", "status",
                          status, "call_id", call_id ? call_id : "", "name", name ? name : "",
                          "arguments", text ? text : (args ? "{}" : ""));
    free(text);
    return o;
}

static json_t *usage_of(const json_t *nat)
{
    json_int_t in = json_integer_value(json_object_get(nat, "prompt_eval_count"));
    json_int_t out = json_integer_value(json_object_get(nat, "eval_count"));
    return json_pack("{s:I,s:I,s:I,s:{s:i},s:{s:i}}", "input_tokens", in, "output_tokens", out,
                     "total_tokens", in + out, "input_tokens_details", "cached_tokens", 0,
                     "output_tokens_details", "reasoning_tokens", 0);
}

// The Response object (fields in upstream's order), echoing the request.
static json_t *response_object(const json_t *req, const char *id, const char *status,
                               int64_t created, json_t *output, json_t *usage)
{
    json_t *o = json_object();
    jsonx_set_str(o, "id", id);
    jsonx_set_str(o, "object", "response");
    jsonx_set_int(o, "created_at", created);
    jsonx_set(o, "completed_at",
              strcmp(status, "completed") == 0 ? json_integer(time_now_ns() / 1000000000)
                                               : json_null());
    jsonx_set_str(o, "status", status);
    jsonx_set(o, "incomplete_details", json_null());
    const char *model = json_string_value(json_object_get(req, "model"));
    jsonx_set_str(o, "model", model ? model : "");
    jsonx_set(o, "previous_response_id", json_null());  // not followed (nothing is stored)
    const char *instr = json_string_value(json_object_get(req, "instructions"));
    jsonx_set(o, "instructions", instr && *instr ? json_string(instr) : json_null());
    jsonx_set(o, "output", output);
    jsonx_set(o, "error", json_null());
    const json_t *tools = json_object_get(req, "tools");
    jsonx_set(o, "tools", json_is_array(tools) ? json_deep_copy(tools) : json_array());
    const json_t *tc = json_object_get(req, "tool_choice");
    jsonx_set(o, "tool_choice", present(tc) ? json_deep_copy(tc) : json_string("auto"));
    const char *trunc = json_string_value(json_object_get(req, "truncation"));
    jsonx_set_str(o, "truncation", trunc ? trunc : "disabled");
    jsonx_set_bool(o, "parallel_tool_calls", true);
    const json_t *fmt = json_object_get(json_object_get(req, "text"), "format");
    jsonx_set(
        o, "text",
        json_pack("{s:o}", "format",
                  json_is_object(fmt) ? json_deep_copy(fmt) : json_pack("{s:s}", "type", "text")));
    const json_t *top_p = json_object_get(req, "top_p");
    const json_t *temp = json_object_get(req, "temperature");
    jsonx_set(o, "top_p", json_real(present(top_p) ? json_number_value(top_p) : 1.0));
    jsonx_set_int(o, "presence_penalty", 0);
    jsonx_set_int(o, "frequency_penalty", 0);
    jsonx_set_int(o, "top_logprobs", 0);
    jsonx_set(o, "temperature", json_real(present(temp) ? json_number_value(temp) : 1.0));
    const json_t *rs = json_object_get(req, "reasoning");
    const char *effort = json_string_value(json_object_get(rs, "effort"));
    const char *summary = json_string_value(json_object_get(rs, "summary"));
    if ((effort && *effort) || (summary && *summary))
        jsonx_set(o, "reasoning",
                  json_pack("{s:o,s:o}", "effort", jsonx_str(effort && *effort ? effort : NULL),
                            "summary", jsonx_str(summary && *summary ? summary : NULL)));
    else
        jsonx_set(o, "reasoning", json_null());
    jsonx_set(o, "usage", usage ? usage : json_null());
    const json_t *max = json_object_get(req, "max_output_tokens");
    jsonx_set(o, "max_output_tokens",
              json_is_integer(max) ? json_incref((json_t *)max) : json_null());
    jsonx_set(o, "max_tool_calls", json_null());
    jsonx_set_bool(o, "store", false);  // nothing is stored
    jsonx_set_bool(o, "background", json_is_true(json_object_get(req, "background")));
    jsonx_set_str(o, "service_tier", "default");
    jsonx_set(o, "metadata", json_object());
    jsonx_set(o, "safety_identifier", json_null());
    jsonx_set(o, "prompt_cache_key", json_null());
    return o;
}

static int64_t created_of(const json_t *nat)
{
    int64_t ns = 0;
    const char *s = json_string_value(json_object_get(nat, "created_at"));
    if (!s || time_parse_rfc3339(s, &ns, NULL) < 0 || ns == TIME_ZERO)
        ns = time_now_ns();
    return ns / 1000000000;
}

json_t *srv_responses_response(const json_t *req, const char *resp_id, const char *item_id,
                               const json_t *nat)
{
    const json_t *msg = json_object_get(nat, "message");
    const char *thinking = json_string_value(json_object_get(msg, "thinking"));
    const char *text = json_string_value(json_object_get(msg, "content"));
    const json_t *calls = json_object_get(msg, "tool_calls");
    json_t *output = json_array();
    char id[96];
    if (thinking && *thinking) {
        snprintf(id, sizeof(id), "rs_%s", resp_id);
        jsonx_arr_append(output, reasoning_item(id, thinking));
    }
    if (json_array_size(calls)) {
        size_t i;
        const json_t *c;
        json_array_foreach(calls, i, c)
        {
            snprintf(id, sizeof(id), "fc_%s_%zu", resp_id, i);
            jsonx_arr_append(output, call_item(id, "completed", c, true));
        }
    } else {
        jsonx_arr_append(output, message_item(item_id, "completed", text ? text : ""));
    }
    return response_object(req, resp_id, "completed", created_of(nat), output, usage_of(nat));
}

// ---------------------------------------------------------------------------
// Streaming

struct srv_responses_stream {
    json_t *req;  // the request, echoed in response objects
    char resp_id[32], item_id[32], reasoning_id[32];
    int seq, output_index;
    bool started, content_started, calls_sent, reasoning_started, done;
    struct buf text, thinking;
    json_t *completed;  // items done before the message, in output order
};

struct srv_responses_stream *srv_responses_stream_new(const json_t *req, const char *resp_id,
                                                      const char *item_id)
{
    struct srv_responses_stream *s = xcalloc(1, sizeof(*s));
    s->req = json_deep_copy(req);
    snprintf(s->resp_id, sizeof(s->resp_id), "%s", resp_id);
    snprintf(s->item_id, sizeof(s->item_id), "%s", item_id);
    buf_init(&s->text, 0);
    buf_init(&s->thinking, 0);
    s->completed = json_array();
    return s;
}

void srv_responses_stream_free(struct srv_responses_stream *s)
{
    if (!s)
        return;
    json_decref(s->req);
    json_decref(s->completed);
    buf_deinit(&s->text);
    buf_deinit(&s->thinking);
    free(s);
}

// Appends "event: <type>\ndata: {...,"type","sequence_number"}\n\n" (takes data).
static void event(struct srv_responses_stream *s, struct buf *out, const char *type, json_t *data)
{
    jsonx_set_str(data, "type", type);
    jsonx_set_int(data, "sequence_number", s->seq++);
    buf_printf(out, "event: %s\ndata: ", type);
    jsonx_dump(data, 0, out, NULL);
    buf_append_str(out, "\n\n");
    json_decref(data);
}

static void finish_reasoning(struct srv_responses_stream *s, struct buf *out)
{
    if (!s->reasoning_started)
        return;
    const char *t = buf_cstr(&s->thinking);
    json_t *item = reasoning_item(s->reasoning_id, t);
    jsonx_arr_append(s->completed, json_incref(item));
    event(s, out, "response.reasoning_summary_text.done",
          json_pack("{s:s,s:i,s:i,s:s}", "item_id", s->reasoning_id, "output_index",
                    s->output_index, "summary_index", 0, "text", t));
    event(s, out, "response.output_item.done",
          json_pack("{s:i,s:o}", "output_index", s->output_index, "item", item));
    buf_reset(&s->thinking);
    s->reasoning_started = false;
    s->output_index++;
}

static void encode_thinking(struct srv_responses_stream *s, const char *t, struct buf *out)
{
    if (!s->reasoning_started) {
        s->reasoning_started = true;
        make_id(s->reasoning_id, sizeof(s->reasoning_id), "rs");
        event(s, out, "response.output_item.added",
              json_pack("{s:i,s:{s:s,s:s,s:[]}}", "output_index", s->output_index, "item", "id",
                        s->reasoning_id, "type", "reasoning", "summary"));
    }
    buf_append_str(&s->thinking, t);
    event(s, out, "response.reasoning_summary_text.delta",
          json_pack("{s:s,s:i,s:i,s:s}", "item_id", s->reasoning_id, "output_index",
                    s->output_index, "summary_index", 0, "delta", t));
}

static void encode_calls(struct srv_responses_stream *s, const json_t *calls, struct buf *out)
{
    finish_reasoning(s, out);
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        int idx = s->output_index + (int)i;
        char id[48], n[32];
        make_id(n, sizeof(n), "fc");
        snprintf(id, sizeof(id), "%s_%zu", n, i);
        json_t *done = call_item(id, "completed", c, true);
        const char *args = json_string_value(json_object_get(done, "arguments"));
        jsonx_arr_append(s->completed, json_incref(done));
        event(s, out, "response.output_item.added",
              json_pack("{s:i,s:o}", "output_index", idx, "item",
                        call_item(id, "in_progress", c, false)));
        event(s, out, "response.function_call_arguments.delta",
              json_pack("{s:s,s:i,s:s}", "item_id", id, "output_index", idx, "delta", args));
        event(s, out, "response.function_call_arguments.done",
              json_pack("{s:s,s:i,s:s}", "item_id", id, "output_index", idx, "arguments", args));
        event(s, out, "response.output_item.done",
              json_pack("{s:i,s:o}", "output_index", idx, "item", done));
    }
    s->output_index += (int)json_array_size(calls);
}

static void encode_text(struct srv_responses_stream *s, const char *t, struct buf *out)
{
    finish_reasoning(s, out);
    if (!s->content_started) {
        s->content_started = true;
        event(s, out, "response.output_item.added",
              json_pack("{s:i,s:o}", "output_index", s->output_index, "item",
                        message_item(s->item_id, "in_progress", NULL)));
        event(s, out, "response.content_part.added",
              json_pack("{s:s,s:i,s:i,s:o}", "item_id", s->item_id, "output_index", s->output_index,
                        "content_index", 0, "part", output_text("")));
    }
    buf_append_str(&s->text, t);
    event(s, out, "response.output_text.delta",
          json_pack("{s:s,s:i,s:i,s:s,s:[]}", "item_id", s->item_id, "output_index",
                    s->output_index, "content_index", 0, "delta", t, "logprobs"));
}

static void encode_done(struct srv_responses_stream *s, const json_t *nat, struct buf *out)
{
    finish_reasoning(s, out);
    json_t *output = json_deep_copy(s->completed);
    if (!s->calls_sent && s->content_started) {
        const char *t = buf_cstr(&s->text);
        event(s, out, "response.output_text.done",
              json_pack("{s:s,s:i,s:i,s:s,s:[]}", "item_id", s->item_id, "output_index",
                        s->output_index, "content_index", 0, "text", t, "logprobs"));
        event(s, out, "response.content_part.done",
              json_pack("{s:s,s:i,s:i,s:o}", "item_id", s->item_id, "output_index", s->output_index,
                        "content_index", 0, "part", output_text(t)));
        event(s, out, "response.output_item.done",
              json_pack("{s:i,s:o}", "output_index", s->output_index, "item",
                        message_item(s->item_id, "completed", t)));
    }
    if (s->content_started)
        jsonx_arr_append(output, message_item(s->item_id, "completed", buf_cstr(&s->text)));
    event(s, out, "response.completed",
          json_pack("{s:o}", "response",
                    response_object(s->req, s->resp_id, "completed", time_now_ns() / 1000000000,
                                    output, usage_of(nat))));
}

void srv_responses_stream_encode(struct srv_responses_stream *s, const json_t *nat, struct buf *out)
{
    if (s->done)
        return;
    if (!s->started) {
        s->started = true;
        int64_t now = time_now_ns() / 1000000000;
        event(
            s, out, "response.created",
            json_pack("{s:o}", "response",
                      response_object(s->req, s->resp_id, "in_progress", now, json_array(), NULL)));
        event(
            s, out, "response.in_progress",
            json_pack("{s:o}", "response",
                      response_object(s->req, s->resp_id, "in_progress", now, json_array(), NULL)));
    }
    const json_t *err = json_object_get(nat, "error");
    if (err) {
        // After the status line is sent, a failure ends the stream.
        s->done = true;
        json_t *resp = response_object(s->req, s->resp_id, "failed", time_now_ns() / 1000000000,
                                       json_deep_copy(s->completed), NULL);
        jsonx_set(resp, "error",
                  json_pack("{s:s,s:s}", "code", "server_error", "message",
                            json_is_string(err) ? json_string_value(err) : "internal error"));
        event(s, out, "response.failed", json_pack("{s:o}", "response", resp));
        return;
    }
    const json_t *msg = json_object_get(nat, "message");
    const char *thinking = json_string_value(json_object_get(msg, "thinking"));
    const char *text = json_string_value(json_object_get(msg, "content"));
    const json_t *calls = json_object_get(msg, "tool_calls");
    if (thinking && *thinking)
        encode_thinking(s, thinking, out);
    if (json_array_size(calls)) {
        encode_calls(s, calls, out);
        s->calls_sent = true;
    }
    if (!json_array_size(calls) && !s->calls_sent && text && *text)
        encode_text(s, text, out);
    if (json_is_true(json_object_get(nat, "done"))) {
        s->done = true;
        encode_done(s, nat, out);
    }
}

static void events(void *state, const json_t *native, struct buf *out)
{
    srv_responses_stream_encode(state, native, out);
}

static void stream_free(void *state)
{
    srv_responses_stream_free(state);
}

struct response_ids {
    const json_t *request;
    const char *resp_id, *item_id;
};

static json_t *answer(const json_t *native, void *arg)
{
    const struct response_ids *ids = arg;
    return srv_responses_response(ids->request, ids->resp_id, ids->item_id, native);
}

static const struct srv_compat_api responses_api = {
    .error = srv_openai_error,
    .events = events,
    .free_state = stream_free,
    .call_prefix = "call",
    .answer = answer,
};

// ---------------------------------------------------------------------------
// Handler

static void handle_responses(struct srv_req *r)
{
    json_t *b = srv_compat_body(r, srv_openai_error);
    if (!b)
        return;
    struct err e = {0};
    json_t *native = srv_responses_request(b, &e);
    if (!native) {
        srv_openai_reply_error(r, 400, e.msg);
        json_decref(b);
        return;
    }
    bool stream = json_is_true(json_object_get(b, "stream"));
    bool forced = json_object_get(native, "format") && json_object_get(native, "tools");
    char resp_id[32], item_id[32];
    make_id(resp_id, sizeof(resp_id), "resp");
    make_id(item_id, sizeof(item_id), "msg");
    struct response_ids ids = {b, resp_id, item_id};
    srv_compat_chat(r, native, stream, forced, &responses_api,
                    srv_responses_stream_new(b, resp_id, item_id), &ids);
    json_decref(native);
    json_decref(b);
}

const struct srv_route server_responses_routes[] = {
    {"POST", "/v1/responses", handle_responses, NULL},
    {NULL, NULL, NULL, NULL},
};

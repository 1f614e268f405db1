// Chat templates: the context Ollama 0.33 hands llama-server for a GGUF's
// Jinja `tokenizer.chat_template` (llm/llama_server.go,
// llamaServerChatMessage and llamaServerChatTemplateKwargs), rendered the
// way llama.cpp renders it, and what the template text says it supports
// (server/images.go, chatTemplateCapabilities).
#include "jinja/internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool contains(const char *text, const char *needle)
{
    return strstr(text, needle) != NULL;
}

bool jinja_chat_has_tools(const char *text)
{
    return contains(text, "tools") || contains(text, "tool_call");
}

bool jinja_chat_has_thinking(const char *text)
{
    if (contains(text, "<think>") && contains(text, "</think>"))
        return true;
    return (contains(text, "content.split('</think>')") ||
            contains(text, "content.split(\"</think>\")")) &&
           !contains(text, "reasoning_content") && !contains(text, "<SPECIAL_12>");
}

bool jinja_chat_has_tool_round_trip(const char *text)
{
    if (!jinja_chat_has_tools(text))
        return false;
    bool calls = contains(text, "tool_calls") || contains(text, "assistant_tool_call");
    return calls && (contains(text, "tool_response") || contains(text, "tool_results") ||
                     contains(text, "role'] == 'tool'") || contains(text, "role'] == \"tool\"") ||
                     contains(text, "role\"] == 'tool'") || contains(text, "role\"] == \"tool\"") ||
                     contains(text, "message.role == 'tool'") ||
                     contains(text, "message.role == \"tool\"") || contains(text, "ipython"));
}

// Python's json.dumps(v, ensure_ascii=False) as a JSON string value; compact:
// separators (",", ":"), as Ollama sends tool-call arguments to llama-server.
static json_t *jinja_json_dumps(json_t *v, bool compact)
{
    struct arena a;
    arena_init(&a, 64u << 20);
    struct jrender r = {.a = &a,
                        .lim = {.max_output_bytes = 64u << 20,
                                .max_memory_bytes = 64u << 20,
                                .max_steps = 1u << 24,
                                .max_depth = 64}};
    struct jv jv;
    struct buf b;
    buf_init(&b, 64u << 20);
    struct jv_json_opts o = {
        .indent = -1, .item_sep = compact ? "," : ", ", .key_sep = compact ? ":" : ": "};
    json_t *out = NULL;
    if (jv_from_json(&r, v, &jv) == 0 && jv_to_json(&r, jv, &o, &b) == 0)
        out = json_stringn(b.data ? b.data : "", b.len);
    buf_deinit(&b);
    arena_deinit(&a);
    return out ? out : json_string("{}");
}

static bool nonempty_str(json_t *v)
{
    return json_is_string(v) && json_string_length(v) > 0;
}

// A message's text as llama-server hands it to the template when the message carries
// images: Ollama sends the text and one image part per image; llama-server turns each
// image into a media marker and joins text and markers without a separator. Our marker
// is the runner's "[img-N]" tag, N counted over the messages rendered (*n_images).
static json_t *content_with_images(json_t *content, json_t *images, size_t *n_images)
{
    struct buf b;
    buf_init(&b, 0);
    buf_append_str(&b, json_is_string(content) ? json_string_value(content) : "");
    for (size_t i = 0; i < json_array_size(images); i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "[img-%zu]", (*n_images)++);
        buf_append_str(&b, tag);
    }
    json_t *out = json_stringn(b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return out;
}

// One API message as llama-server's chat endpoint receives it. string_args:
// tool-call arguments as a JSON string instead of an object (compact: llama-server's).
// n_images: under llama-server's rules, the images counted so far (NULL: Jinja2's
// reference, images not shown).
static json_t *chat_message(json_t *m, bool string_args, bool compact, size_t *n_images)
{
    json_t *out = json_object();
    json_t *content = json_object_get(m, "content");
    json_t *images = json_object_get(m, "images");
    json_object_set(out, "role", json_object_get(m, "role"));
    if (n_images && json_array_size(images) > 0)
        json_object_set_new(out, "content", content_with_images(content, images, n_images));
    else
        json_object_set_new(out, "content",
                            json_is_string(content) ? json_incref(content) : json_string(""));
    if (nonempty_str(json_object_get(m, "tool_name")))
        json_object_set(out, "name", json_object_get(m, "tool_name"));
    if (nonempty_str(json_object_get(m, "tool_call_id")))
        json_object_set(out, "tool_call_id", json_object_get(m, "tool_call_id"));
    json_t *calls = json_object_get(m, "tool_calls");
    if (json_is_array(calls) && json_array_size(calls) > 0) {
        json_t *list = json_array();
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c)
        {
            json_t *fn = json_object_get(c, "function");
            json_t *args = json_object_get(fn, "arguments");
            json_t *call = json_object();
            json_object_set_new(call, "type", json_string("function"));
            if (nonempty_str(json_object_get(c, "id")))
                json_object_set(call, "id", json_object_get(c, "id"));
            json_t *f = json_object();
            json_t *name = json_object_get(fn, "name");
            json_object_set_new(f, "name",
                                json_is_string(name) ? json_incref(name) : json_string(""));
            if (!args)
                args = json_object();
            else
                json_incref(args);
            if (string_args) {
                json_t *str = jinja_json_dumps(args, compact);
                json_decref(args);
                args = str;
            }
            json_object_set_new(f, "arguments", args);
            json_object_set_new(call, "function", f);
            json_array_append_new(list, call);
        }
        json_object_set_new(out, "tool_calls", list);
    }
    return out;
}

// Keys of o in the order given, skipping absent, null, "" and [] values (Go's
// omitempty on Ollama's structs); each value through f when set.
static json_t *ordered(const json_t *o, const char *const *keys, json_t *(*f)(const json_t *))
{
    json_t *out = json_object();
    for (size_t i = 0; keys[i]; i++) {
        json_t *v = json_object_get(o, keys[i]);
        if (!v || json_is_null(v) || (json_is_string(v) && !json_string_length(v)) ||
            (json_is_array(v) && !json_array_size(v)))
            continue;
        json_object_set_new(out, keys[i], f ? f(v) : json_incref(v));
    }
    return out;
}

// A property map through Go's ToolProperty (anyOf, type, items, description, enum,
// properties, required), recursively.
static json_t *go_property(const json_t *p);

static json_t *go_properties(const json_t *props)
{
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) json_object_set_new(out, k, go_property(v));
    return out;
}

static json_t *go_any_of(const json_t *list)
{
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) json_array_append_new(out, go_property(v));
    return out;
}

static json_t *go_property(const json_t *p)
{
    static const char *const keys[] = {"anyOf", "type",       "items",    "description",
                                       "enum",  "properties", "required", NULL};
    json_t *out = ordered(p, keys, NULL);
    json_t *any = json_object_get(out, "anyOf");
    if (any)
        json_object_set_new(out, "anyOf", go_any_of(any));
    json_t *props = json_object_get(out, "properties");
    if (props)
        json_object_set_new(out, "properties", go_properties(props));
    return out;
}

// A request tool as it reaches the template through Ollama's Go structs (api/types.go:
// ToolFunctionParameters keys in struct order, unknown keys dropped, "properties" null
// when absent) and llama-server (common_chat_tools_to_json_oaicompat: type "function",
// name, description ("" when none), parameters).
static json_t *go_tool(const json_t *t)
{
    static const char *const param_keys[] = {"type", "$defs", "items", "required", NULL};
    json_t *fn = json_object_get(t, "function"), *pa = json_object_get(fn, "parameters");
    json_t *params = ordered(pa, param_keys, NULL);
    json_t *props = json_object_get(pa, "properties");
    json_object_set_new(params, "properties",
                        json_is_object(props) ? go_properties(props) : json_null());
    const char *name = json_string_value(json_object_get(fn, "name"));
    const char *desc = json_string_value(json_object_get(fn, "description"));
    return json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function", "function", "name",
                     name ? name : "", "description", desc ? desc : "", "parameters", params);
}

static json_t *go_tools(const json_t *tools)
{
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) json_array_append_new(out, go_tool(t));
    return out;
}

// Today's date as llama.cpp's chat context carries it (local time).
static void set_dates(json_t *ctx)
{
    char date[64], datetime[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    strftime(datetime, sizeof datetime, "%b %d %Y", &tm);
    json_object_set_new(ctx, "datetime", json_string(datetime));
    json_object_set_new(ctx, "date_string", json_string(date));
}

static json_t *chat_context(const struct jinja_template *t, const struct jinja_chat_req *req,
                            json_t *messages, bool string_args)
{
    json_t *ctx = json_object();
    json_t *msgs = json_array();
    size_t i, n_images = 0;
    json_t *m;
    json_array_foreach(messages, i, m)
        json_array_append_new(msgs, chat_message(m, string_args, req->llama_server,
                                                 req->llama_server ? &n_images : NULL));
    if (req->llama_server)
        msgs = jinja_llama_messages(t, msgs);
    json_object_set_new(ctx, "messages", msgs);
    if (json_is_array(req->tools) && json_array_size(req->tools) > 0)
        json_object_set_new(ctx, "tools",
                            req->llama_server ? go_tools(req->tools) : json_incref(req->tools));
    // llama-server sets add_generation_prompt only when it is true: a template that
    // defaults it when undefined (Solar Open, RWKV World) opens the model's turn itself.
    if (!req->continuing || !req->llama_server)
        json_object_set_new(ctx, "add_generation_prompt", json_boolean(!req->continuing));
    json_object_set_new(ctx, "bos_token", json_string(req->bos_token ? req->bos_token : ""));
    json_object_set_new(ctx, "eos_token", json_string(req->eos_token ? req->eos_token : ""));
    if (req->llama_server) {
        set_dates(ctx);
        // llama-server's default kwarg preserve_reasoning=true and the variables
        // templates read it by (caps_apply_preserve_reasoning): earlier turns keep
        // their reasoning.
        json_object_set_new(ctx, "preserve_reasoning", json_true());
        json_object_set_new(ctx, "preserve_thinking", json_true());
        json_object_set_new(ctx, "clear_thinking", json_false());
        json_object_set_new(ctx, "truncate_history_thinking", json_false());
        json_object_set_new(ctx, "drop_thinking", json_false());
    }
    if (req->think.set) {
        json_object_set_new(ctx, "enable_thinking", json_boolean(req->think.on));
        if (req->think.level && *req->think.level) {
            json_object_set_new(ctx, "reasoning_effort", json_string(req->think.level));
            if (req->llama_server)  // caps_apply_reasoning_effort
                json_object_set_new(ctx, "reasoning_strength", json_string(req->think.level));
        }
    } else if (req->llama_server) {
        // llama-server always sets it: its default is on for a template that thinks.
        json_object_set_new(ctx, "enable_thinking", json_boolean(req->think_default));
    }
    return ctx;
}

static bool has_tool_calls(json_t *messages)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        json_t *c = json_object_get(m, "tool_calls");
        if (json_is_array(c) && json_array_size(c) > 0)
            return true;
    }
    return false;
}

static int render_once(const struct jinja_template *t, const struct jinja_chat_req *req,
                       json_t *messages, bool string_args, struct buf *out, struct err *e)
{
    json_t *ctx = chat_context(t, req, messages, string_args);
    struct jinja_limits lim = {.llama_cpp = req->llama_server};
    int rc = jinja_render(t, ctx, &lim, out, e);
    json_decref(ctx);
    return rc;
}

// The last occurrence of needle in s, or NULL.
static const char *last_of(const char *s, const char *needle)
{
    const char *last = NULL;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        last = p;
    return last;
}

// llama-server's default for enable_thinking when the request does not set it: on when
// the template's generation prompt reacts to it (a one-turn chat ends differently with
// it on and off; Gemma 4 opens its thought channel, Nemotron its <think>).
static bool supports_thinking(const struct jinja_template *t)
{
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"test\"}]", 0, NULL);
    struct buf on, off;
    buf_init(&on, 1 << 20);
    buf_init(&off, 1 << 20);
    struct err e = {0};
    struct jinja_chat_req r = {.bos_token = "", .eos_token = "", .llama_server = true};
    r.think = (struct jinja_think){.set = true, .on = true};
    int rc = render_once(t, &r, msgs, false, &on, &e);
    r.think.on = false;
    if (rc == 0)
        rc = render_once(t, &r, msgs, false, &off, &e);
    // The generation prompt (what follows the user's text) must change, as llama.cpp's
    // reasoning detection looks at the assistant's opening, not at a system preamble.
    const char *a = last_of(buf_cstr(&on), "test"), *b = last_of(buf_cstr(&off), "test");
    bool differs = rc == 0 && a && b && strcmp(a, b) != 0;
    buf_deinit(&on);
    buf_deinit(&off);
    json_decref(msgs);
    return differs;
}

// llama.cpp's supports_system_role: the template reads a system message's text. Without
// llama.cpp's usage tracking: a small chat renders, and the text reaches the output,
// with or without a tool offered (Firefunction shows it only next to its functions). A
// template that raises on the role, as Gemma 2's, does not support it.
static bool system_probe(const struct jinja_template *t, bool with_tool)
{
    static const char probe[] = "[{\"role\":\"system\",\"content\":\"System message\"},"
                                "{\"role\":\"user\",\"content\":\"User message\"}]";
    static const char tool[] = "[{\"type\":\"function\",\"function\":{\"name\":\"tool1\","
                               "\"description\":\"Tool description\",\"parameters\":{\"type\":"
                               "\"object\",\"properties\":{\"arg\":{\"type\":\"string\"}},"
                               "\"required\":[\"arg\"]}}}]";
    json_t *msgs = json_loads(probe, 0, NULL),
           *tools = with_tool ? json_loads(tool, 0, NULL) : NULL;
    struct jinja_chat_req r = {
        .tools = tools, .bos_token = "", .eos_token = "", .llama_server = true};
    struct buf out;
    buf_init(&out, 1 << 20);
    struct err e = {0};
    bool ok = render_once(t, &r, msgs, false, &out, &e) == 0 &&
              strstr(buf_cstr(&out), "System message") != NULL;
    buf_deinit(&out);
    json_decref(msgs);
    json_decref(tools);
    return ok;
}

static bool supports_system_role(const struct jinja_template *t)
{
    return system_probe(t, false) || system_probe(t, true);
}

// llama.cpp's supports_object_arguments: on its tool-call probe chat, with the call's
// arguments an object, the template reads the argument's value. Without llama.cpp's
// usage tracking: the chat renders in llama.cpp's dialect and the value reaches the
// output (tojson, items(), .arg, | string all show it; printing the object itself
// shows nothing in that dialect, as a read of the object alone is no read of the value).
// Then llama-server turns the JSON string arguments Ollama sends into objects (Apriel's
// `arguments | tojson`); otherwise the template gets the strings.
static bool supports_object_arguments(const struct jinja_template *t)
{
#define ARG_VALUE "ollama-probe-argument-value"
    static const char ctx_json[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"User message\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call00001\","
        "\"type\":\"function\",\"function\":{\"name\":\"tool1\",\"arguments\":{\"arg\":"
        "\"" ARG_VALUE "\"}}}]},{\"role\":\"tool\",\"content\":\"Tool response\","
        "\"tool_call_id\":\"call00001\"},{\"role\":\"assistant\",\"content\":\"The tool "
        "response was 'tool response'\"},{\"role\":\"user\",\"content\":\"User message\"}],"
        "\"tools\":[{\"name\":\"tool\",\"type\":\"function\",\"function\":{\"name\":"
        "\"tool1\",\"description\":\"Tool description\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"arg\":{\"type\":\"string\",\"description\":\"Arg description\"}},"
        "\"required\":[\"arg\"]}}}],\"bos_token\":\"\",\"eos_token\":\"\","
        "\"add_generation_prompt\":true}";
    json_t *ctx = json_loads(ctx_json, 0, NULL);
    struct jinja_limits lim = {.llama_cpp = true};
    struct buf out;
    buf_init(&out, 1 << 20);
    bool used = jinja_render(t, ctx, &lim, &out, NULL) == 0 && strstr(buf_cstr(&out), ARG_VALUE);
    buf_deinit(&out);
    json_decref(ctx);
    return used;
#undef ARG_VALUE
}

// The template's llama-server capabilities, probed on its first chat and kept with it
// (templates are shared between requests; two first chats may both probe, alike).
static unsigned llama_caps(const struct jinja_template *t)
{
    _Atomic unsigned *slot = &((struct jinja_template *)t)->llama_caps;
    unsigned caps = atomic_load(slot);
    if (caps & JINJA_CAPS_PROBED)
        return caps;
    caps = JINJA_CAPS_PROBED | (supports_system_role(t) ? JINJA_CAPS_SYSTEM : 0) |
           (supports_thinking(t) ? JINJA_CAPS_THINKING : 0) |
           (supports_object_arguments(t) ? JINJA_CAPS_OBJECT_ARGS : 0);
    atomic_store(slot, caps);
    return caps;
}

// llama.cpp's workaround for templates without a system role: a leading system message
// goes in front of the next message's content ("\n" between), or is dropped when alone.
static json_t *merge_system(json_t *messages)
{
    json_t *first = json_array_get(messages, 0);
    const char *role = json_string_value(json_object_get(first, "role"));
    if (!role || strcmp(role, "system") != 0)
        return json_incref(messages);
    json_t *out = json_array();
    for (size_t i = 1; i < json_array_size(messages); i++)
        json_array_append_new(out, json_copy(json_array_get(messages, i)));
    json_t *next = json_array_get(out, 0);
    if (next) {
        const char *a = json_string_value(json_object_get(first, "content"));
        const char *b = json_string_value(json_object_get(next, "content"));
        char *joined = xasprintf("%s\n%s", a ? a : "", b ? b : "");
        json_object_set_new(next, "content", json_string(joined));
        free(joined);
    }
    return out;
}

// Under llama-server's rules the arguments are objects exactly when the template reads
// them as one (JINJA_CAPS_OBJECT_ARGS), else Ollama's JSON strings. For Jinja2's
// reference: objects first; a template that fails on them, or prints them as a Python
// dict, gets them as a JSON string.
static int render_chat(const struct jinja_template *t, const struct jinja_chat_req *req,
                       unsigned caps, json_t *messages, struct buf *out, struct err *e)
{
    if (req->llama_server)
        return render_once(t, req, messages, !(caps & JINJA_CAPS_OBJECT_ARGS), out, e);
    size_t start = out->len;
    struct err first = {0};
    int rc = render_once(t, req, messages, false, out, &first);
    bool retry = has_tool_calls(messages) && rc != ERR_TOO_LARGE &&
                 (rc || strstr(buf_cstr(out) + start, "{'") != NULL);
    if (retry) {
        struct buf second;
        buf_init(&second, out->max_len);
        struct err e2 = {0};
        int rc2 = render_once(t, req, messages, true, &second, &e2);
        if (rc2 == 0) {
            out->len = start;
            if (out->data)
                out->data[start] = 0;
            rc = buf_append(out, second.data ? second.data : "", second.len);
        }
        buf_deinit(&second);
    }
    if (rc && e && !e->code)
        *e = first.code ? first : (struct err){.code = rc};
    return rc;
}

static bool role_is(json_t *m, const char *role)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    return r && strcmp(r, role) == 0;
}

// The messages with a leading system message merged into the next turn when the
// template has no system role, rendered.
static int render_merged(const struct jinja_template *t, const struct jinja_chat_req *r,
                         unsigned caps, json_t *msgs, struct buf *out, struct err *e)
{
    json_t *in = r->llama_server ? jinja_llama_inputs(t, msgs) : json_incref(msgs);
    json_t *messages = !(caps & JINJA_CAPS_SYSTEM) ? merge_system(in) : json_incref(in);
    int rc = render_chat(t, r, caps, messages, out, e);
    json_decref(messages);
    json_decref(in);
    return rc;
}

// llama-server continues a chat that ends with an assistant message (its
// prefill_assistant, on in the llama-server Ollama starts): the earlier messages without
// a generation prompt, then, when the message has text, the format's opening of the
// model's turn and the text (jinja_llama_continue). Two assistant messages at the end,
// or one with tool calls, are refused as llama-server refuses them.
static int render_continuation(const struct jinja_template *t, const struct jinja_chat_req *r,
                               unsigned caps, struct buf *out, struct err *e)
{
    size_t n = json_array_size(r->messages);
    json_t *last = json_array_get(r->messages, n - 1);
    json_t *calls = json_object_get(last, "tool_calls");
    if (n >= 2 && role_is(json_array_get(r->messages, n - 2), "assistant"))
        return err_set(e, ERR_INVALID, "%s",
                       "Cannot have 2 or more assistant messages at the end of the list.");
    if (json_is_array(calls) && json_array_size(calls) > 0)
        return err_set(e, ERR_INVALID, "%s",
                       "Cannot continue an assistant message that contains tool calls.");
    json_t *head = json_array();
    for (size_t i = 0; i + 1 < n; i++)
        json_array_append(head, json_array_get(r->messages, i));
    struct jinja_chat_req q = *r;
    q.continuing = true;
    size_t start = out->len;
    int rc = render_merged(t, &q, caps, head, out, e);
    const char *text = json_string_value(json_object_get(last, "content"));
    if (rc == 0 && text && *text) {
        struct buf with;
        buf_init(&with, out->max_len);
        rc = render_merged(t, r, caps, head, &with, e);
        if (rc == 0 && (rc = jinja_llama_continue(t, r, out, start, buf_cstr(&with), text)))
            err_set(e, rc, "%s", "jinja: out of memory");
        buf_deinit(&with);
    }
    json_decref(head);
    return rc;
}

int jinja_chat_render(const struct jinja_template *t, const struct jinja_chat_req *req,
                      struct buf *out, struct err *e)
{
    if (!json_is_array(req->messages))
        return err_set(e, ERR_INVALID, "messages must be an array");
    size_t start = out->len, n = json_array_size(req->messages);
    unsigned caps = req->llama_server ? llama_caps(t) : JINJA_CAPS_SYSTEM;
    struct jinja_chat_req r = *req;
    if (r.llama_server && !r.think.set)
        r.think_default = caps & JINJA_CAPS_THINKING;
    int rc;
    if (r.llama_server && n > 0 && role_is(json_array_get(req->messages, n - 1), "assistant")) {
        rc = render_continuation(t, &r, caps, out, e);
    } else {
        rc = render_merged(t, &r, caps, req->messages, out, e);
        if (rc == 0 && r.llama_server && (rc = jinja_llama_prompt(t, out, start)))
            err_set(e, rc, "%s", "jinja: out of memory");
    }
    if (rc && r.llama_server)
        rc = jinja_llama_refusal(t, rc, e);
    if (rc)
        return rc;
    // The tokenizer adds BOS itself: a prompt that starts with the BOS text loses it.
    if (req->tokenizer_adds_bos && req->bos_token && *req->bos_token) {
        size_t k = strlen(req->bos_token);
        if (out->len - start >= k && !memcmp(out->data + start, req->bos_token, k)) {
            memmove(out->data + start, out->data + start + k, out->len - start - k + 1);
            out->len -= k;
        }
    }
    return 0;
}

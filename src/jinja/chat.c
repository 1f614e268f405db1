// Chat templates: the context Ollama 0.33 hands llama-server for a GGUF's
// Jinja `tokenizer.chat_template` (llm/llama_server.go,
// llamaServerChatMessage and llamaServerChatTemplateKwargs), rendered the
// way llama.cpp renders it, and what the template text says it supports
// (server/images.go, chatTemplateCapabilities).
#include "jinja/internal.h"

#include <string.h>

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

// Python's json.dumps(v, ensure_ascii=False) as a JSON string value.
static json_t *jinja_json_dumps(json_t *v)
{
    struct arena a;
    arena_init(&a, 64u << 20);
    struct jrender r = {.a = &a, .lim = {.max_output_bytes = 64u << 20, .max_memory_bytes = 64u << 20,
                                         .max_steps = 1u << 24, .max_depth = 64}};
    struct jv jv;
    struct buf b;
    buf_init(&b, 64u << 20);
    struct jv_json_opts o = {.indent = -1, .item_sep = ", ", .key_sep = ": "};
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

// One API message as llama-server's chat endpoint receives it. string_args:
// tool-call arguments as a JSON string instead of an object.
static json_t *chat_message(json_t *m, bool string_args)
{
    json_t *out = json_object();
    json_t *content = json_object_get(m, "content");
    json_object_set(out, "role", json_object_get(m, "role"));
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
        json_array_foreach(calls, i, c) {
            json_t *fn = json_object_get(c, "function");
            json_t *args = json_object_get(fn, "arguments");
            json_t *call = json_object();
            json_object_set_new(call, "type", json_string("function"));
            if (nonempty_str(json_object_get(c, "id")))
                json_object_set(call, "id", json_object_get(c, "id"));
            json_t *f = json_object();
            json_t *name = json_object_get(fn, "name");
            json_object_set_new(f, "name", json_is_string(name) ? json_incref(name) : json_string(""));
            if (!args)
                args = json_object();
            else
                json_incref(args);
            if (string_args) {
                json_t *str = jinja_json_dumps(args);
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

static json_t *chat_context(const struct jinja_chat_req *req, bool string_args)
{
    json_t *ctx = json_object();
    json_t *msgs = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(req->messages, i, m) json_array_append_new(msgs, chat_message(m, string_args));
    json_object_set_new(ctx, "messages", msgs);
    if (json_is_array(req->tools) && json_array_size(req->tools) > 0)
        json_object_set(ctx, "tools", req->tools);
    json_object_set_new(ctx, "add_generation_prompt", json_true());
    json_object_set_new(ctx, "bos_token", json_string(req->bos_token ? req->bos_token : ""));
    json_object_set_new(ctx, "eos_token", json_string(req->eos_token ? req->eos_token : ""));
    if (req->think.set) {
        json_object_set_new(ctx, "enable_thinking", json_boolean(req->think.on));
        if (req->think.level && *req->think.level)
            json_object_set_new(ctx, "reasoning_effort", json_string(req->think.level));
    }
    return ctx;
}

static bool has_tool_calls(json_t *messages)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *c = json_object_get(m, "tool_calls");
        if (json_is_array(c) && json_array_size(c) > 0)
            return true;
    }
    return false;
}

static int render_once(const struct jinja_template *t, const struct jinja_chat_req *req,
                       bool string_args, struct buf *out, struct err *e)
{
    json_t *ctx = chat_context(req, string_args);
    int rc = jinja_render(t, ctx, NULL, out, e);
    json_decref(ctx);
    return rc;
}

int jinja_chat_render(const struct jinja_template *t, const struct jinja_chat_req *req,
                      struct buf *out, struct err *e)
{
    if (!json_is_array(req->messages))
        return err_set(e, ERR_INVALID, "messages must be an array");
    size_t start = out->len;
    struct err first = {0};
    int rc = render_once(t, req, false, out, &first);
    // Object arguments first; a template that fails on them, or prints them as a Python dict,
    // gets them as a JSON string (llama.cpp keeps arguments as a string unless a template
    // needs an object).
    bool retry = has_tool_calls(req->messages) && rc != ERR_TOO_LARGE &&
                 (rc || memmem(out->data + start, out->len - start, "{'", 2));
    if (retry) {
        struct buf second;
        buf_init(&second, out->max_len);
        struct err e2 = {0};
        int rc2 = render_once(t, req, true, &second, &e2);
        if (rc2 == 0) {
            out->len = start;
            if (out->data)
                out->data[start] = 0;
            rc = buf_append(out, second.data ? second.data : "", second.len);
        }
        buf_deinit(&second);
    }
    if (rc) {
        if (e && !e->code)
            *e = first.code ? first : (struct err){.code = rc};
        return rc;
    }
    // The tokenizer adds BOS itself: a prompt that starts with the BOS text loses it.
    if (req->tokenizer_adds_bos && req->bos_token && *req->bos_token) {
        size_t n = strlen(req->bos_token);
        if (out->len - start >= n && !memcmp(out->data + start, req->bos_token, n)) {
            memmove(out->data + start, out->data + start + n, out->len - start - n + 1);
            out->len -= n;
        }
    }
    return 0;
}

// nemotron-3-nano and nemotron-3.5-nano renderers (Ollama's
// model/renderers/nemotron3nano.go): ChatML with the tools in Qwen3-Coder's
// XML list (schema values written as Python's json.dumps would), thinking of
// turns before the last user message truncated to an empty <think></think>,
// XML tool calls with Python-style values (None, True, False), and the
// /think and /no_think toggles of user and system text (3 only). Output is
// read by the qwen3.5-style parser with Nemotron's rule for a tool call
// inside the thinking (variant 1 of qwen35.c's parser).
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

#define IM_START "<|im_start|>"
#define IM_END   "<|im_end|>"

enum { NEMOTRON3 = 0, NEMOTRON35 = 1 };

// Go's strconv.Quote (printable text kept, the usual escapes, other control
// bytes and invalid UTF-8 as \xNN).
static void go_quote(struct buf *out, const char *s, size_t n)
{
    buf_append_char(out, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t w = 0;
            uint32_t r = utf8_decode((const unsigned char *)s + i, n - i, &w);
            if (r == UTF8_INVALID) {
                buf_printf(out, "\\x%02x", c);
                i++;
            } else {
                buf_append(out, s + i, w);
                i += w;
            }
            continue;
        }
        switch (c) {
        case '"':
            buf_append_str(out, "\\\"");
            break;
        case '\\':
            buf_append_str(out, "\\\\");
            break;
        case '\a':
            buf_append_str(out, "\\a");
            break;
        case '\b':
            buf_append_str(out, "\\b");
            break;
        case '\f':
            buf_append_str(out, "\\f");
            break;
        case '\n':
            buf_append_str(out, "\\n");
            break;
        case '\r':
            buf_append_str(out, "\\r");
            break;
        case '\t':
            buf_append_str(out, "\\t");
            break;
        case '\v':
            buf_append_str(out, "\\v");
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                buf_printf(out, "\\x%02x", c);
            else
                buf_append_char(out, (char)c);
        }
        i++;
    }
    buf_append_char(out, '"');
}

// pythonJSON over a value whose objects are already in the order to write.
static void py_json(struct buf *out, const json_t *v, int depth)
{
    if (depth > 64) {
        buf_append_str(out, "null");
        return;
    }
    size_t i;
    json_t *x;
    const char *k;
    switch (json_typeof(v)) {
    case JSON_STRING:
        go_quote(out, json_string_value(v), json_string_length(v));
        break;
    case JSON_ARRAY:
        buf_append_char(out, '[');
        json_array_foreach((json_t *)v, i, x)
        {
            if (i)
                buf_append_str(out, ", ");
            py_json(out, x, depth + 1);
        }
        buf_append_char(out, ']');
        break;
    case JSON_OBJECT: {
        buf_append_char(out, '{');
        bool first = true;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!first)
                buf_append_str(out, ", ");
            first = false;
            go_quote(out, k, strlen(k));
            buf_append_str(out, ": ");
            py_json(out, x, depth + 1);
        }
        buf_append_char(out, '}');
        break;
    }
    default:
        rnd_go_json(out, v);
    }
}

// templateValue: None, True, False, containers as pythonJSON (map keys
// sorted), the rest with %v.
static void template_value(struct buf *out, const json_t *v, bool sort)
{
    if (!v || json_is_null(v)) {
        buf_append_str(out, "None");
    } else if (json_is_true(v)) {
        buf_append_str(out, "True");
    } else if (json_is_false(v)) {
        buf_append_str(out, "False");
    } else if (json_is_object(v) || json_is_array(v)) {
        if (sort) {
            json_t *s = json_array();
            json_array_append(s, (json_t *)v);
            struct buf tmp;
            buf_init(&tmp, 0);
            rnd_go_json(&tmp, s);  // sorted round trip
            json_t *back = json_loads(buf_cstr(&tmp), JSON_DECODE_ANY, NULL);
            buf_deinit(&tmp);
            py_json(out, json_array_get(back, 0), 0);
            json_decref(back);
            json_decref(s);
        } else {
            py_json(out, v, 0);
        }
    } else {
        rnd_go_value(out, v);
    }
}

static void trim_into(struct buf *out, const char *s)
{
    size_t n = strlen(s);
    size_t lead = rnd_leading_ws(s, n);
    buf_append(out, s + lead, n - lead - rnd_trailing_ws(s + lead, n - lead));
}

// /think and /no_think removed (a "</think>" kept).
static char *strip_toggles(const char *s)
{
    struct buf b;
    buf_init(&b, 0);
    for (const char *p = s; *p;) {
        if (cstr_starts_with(p, "</think>")) {
            buf_append_str(&b, "</think>");
            p += 8;
        } else if (cstr_starts_with(p, "/think")) {
            p += 6;
        } else if (cstr_starts_with(p, "/no_think")) {
            p += 9;
        } else {
            buf_append_char(&b, *p++);
        }
    }
    return buf_take(&b);
}

static void render_tools(struct buf *out, json_t *tools)
{
    buf_append_str(out, "# Tools\n\nYou have access to the following functions:\n\n<tools>");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        json_t *gt = rnd_go_tool(tool);  // omitempty and field order as Go sees the tool
        json_t *fn = json_object_get(gt, "function");
        json_t *params = json_object_get(fn, "parameters");
        buf_printf(out, "\n<function>\n<name>%s</name>", rnd_str(fn, "name"));
        if (*rnd_str(fn, "description")) {
            buf_append_str(out, "\n<description>");
            trim_into(out, rnd_str(fn, "description"));
            buf_append_str(out, "</description>");
        }
        buf_append_str(out, "\n<parameters>");
        const char *pname;
        json_t *prop;
        json_object_foreach(json_object_get(params, "properties"), pname, prop)
        {
            buf_printf(out, "\n<parameter>\n<name>%s</name>", pname);
            json_t *type = json_object_get(prop, "type");
            if (json_is_string(type)) {
                buf_printf(out, "\n<type>%s</type>", json_string_value(type));
            } else if (json_is_array(type)) {
                buf_append_str(out, "\n<type>[");
                for (size_t t = 0; t < json_array_size(type); t++)
                    buf_printf(out, "%s'%s'", t ? ", " : "",
                               json_string_value(json_array_get(type, t)));
                buf_append_str(out, "]</type>");
            }
            if (*rnd_str(prop, "description")) {
                buf_append_str(out, "\n<description>");
                trim_into(out, rnd_str(prop, "description"));
                buf_append_str(out, "</description>");
            }
            static const char *const extra[] = {"enum", "anyOf", "items", "properties", "required"};
            for (size_t x = 0; x < 5; x++) {
                json_t *v = json_object_get(prop, extra[x]);
                if (!v)
                    continue;
                buf_printf(out, "\n<%s>", extra[x]);
                py_json(out, v, 0);
                buf_printf(out, "</%s>", extra[x]);
            }
            buf_append_str(out, "\n</parameter>");
        }
        static const char *const pextra[] = {"$defs", "items"};
        for (size_t x = 0; x < 2; x++) {
            json_t *v = json_object_get(params, pextra[x]);
            if (!v)
                continue;
            buf_printf(out, "\n<%s>", pextra[x]);
            template_value(out, v, false);
            buf_printf(out, "</%s>", pextra[x]);
        }
        json_t *req = json_object_get(params, "required");
        if (json_array_size(req) > 0) {
            buf_append_str(out, "\n<required>");
            py_json(out, req, 0);
            buf_append_str(out, "</required>");
        }
        buf_append_str(out, "\n</parameters>\n</function>");
        json_decref(gt);
    }
    buf_append_str(
        out, "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format "
             "with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n"
             "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
             "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat "
             "can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
             "Reminder:\n- Function calls MUST follow the specified format: an inner "
             "<function=...></function> block must be nested within <tool_call></tool_call> XML "
             "tags\n- Required parameters MUST be specified\n- You may provide optional reasoning "
             "for your function call in natural language BEFORE the function call, but NOT after\n"
             "- If there is no function call available, answer the question like normal with your "
             "current knowledge and do not tell the user about function calls\n</IMPORTANT>");
}

// The assistant text with its thinking (buildContent).
static char *build_content(json_t *m, int variant)
{
    const char *content = rnd_str(m, "content"), *th = rnd_str(m, "thinking");
    if (*th)
        return variant == NEMOTRON35 ? xasprintf("<think>\n%s</think>%s", th, content)
                                     : xasprintf("<think>\n%s\n</think>\n%s", th, content);
    if (!strstr(content, "<think>") && !strstr(content, "</think>"))
        return xasprintf("<think></think>%s", content);
    return xstrdup(content);
}

// The text after the last "</think>".
static const char *after_last_close(const char *c)
{
    const char *last = NULL;
    for (const char *p = c; (p = strstr(p, "</think>")); p += 8)
        last = p;
    return last ? last + 8 : c;
}

// nemotron3: "/think" and "/no_think" in user or system text switch thinking; the last
// toggle wins.
static bool toggled_thinking(json_t *msgs, bool thinking)
{
    size_t n = json_array_size(msgs);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "user") != 0 && strcmp(role, "system") != 0)
            continue;
        char *c = xstrdup(rnd_str(m, "content"));
        // strings.ReplaceAll(content, "</think>", "") then look for "/think".
        struct buf b;
        buf_init(&b, 0);
        for (const char *p = c; *p;) {
            if (cstr_starts_with(p, "</think>"))
                p += 8;
            else
                buf_append_char(&b, *p++);
        }
        if (strstr(buf_cstr(&b), "/think"))
            thinking = true;
        else if (strstr(c, "/no_think"))
            thinking = false;
        buf_deinit(&b);
        free(c);
    }
    return thinking;
}

// The system turn, always present: the system text, then the tools.
static void render_system_turn(struct buf *out, const char *system, json_t *tools)
{
    buf_append_str(out, IM_START "system\n");
    if (system)
        buf_append_str(out, system);
    if (json_array_size(tools) > 0) {
        if (system && *system)
            buf_append_str(out, "\n\n");
        render_tools(out, tools);
    }
    buf_append_str(out, IM_END "\n");
}

// The text before an assistant turn's tool calls. A turn before the last user message
// (truncate) loses its thinking.
static void render_call_preamble(struct buf *out, const char *content, bool truncate)
{
    struct buf t;
    buf_init(&t, 0);
    trim_into(&t, content);
    if (t.len == 0) {
        buf_append_str(out, "<think></think>");
    } else if (!truncate) {
        buf_append(out, t.data, t.len);
        buf_append_char(out, '\n');
    } else {
        char *c = NULL;
        if (strstr(content, "</think>"))
            c = xstrdup(after_last_close(content));
        else if (strstr(content, "<think>"))
            c = xstrndup(content, (size_t)(strstr(content, "<think>") - content));
        else
            c = xstrdup(content);
        buf_append_str(out, "<think></think>");
        trim_into(out, c);
        buf_append_char(out, '\n');
        free(c);
    }
    buf_deinit(&t);
}

// Tool calls in qwen3-coder's XML.
static void render_call_xml(struct buf *out, json_t *calls)
{
    size_t c;
    json_t *call;
    json_array_foreach(calls, c, call)
    {
        json_t *fn = rnd_call_fn(call);
        buf_printf(out, "<tool_call>\n<function=%s>\n", rnd_str(fn, "name"));
        const char *an;
        json_t *av;
        json_object_foreach(json_object_get(fn, "arguments"), an, av)
        {
            buf_printf(out, "<parameter=%s>\n", an);
            template_value(out, av, true);
            buf_append_str(out, "\n</parameter>\n");
        }
        buf_append_str(out, "</function>\n</tool_call>\n");
    }
}

// An assistant turn; one before the last user message (truncate) keeps only the text after
// its thinking.
static void render_assistant_turn(struct buf *out, json_t *m, int variant, bool truncate)
{
    char *content = build_content(m, variant);
    json_t *calls = json_object_get(m, "tool_calls");
    buf_append_str(out, IM_START "assistant\n");
    if (json_array_size(calls) > 0) {
        render_call_preamble(out, content, truncate);
        render_call_xml(out, calls);
    } else if (truncate && strstr(content, "<think>") && strstr(content, "</think>")) {
        char *c = xasprintf("<think></think>%s", after_last_close(content));
        trim_into(out, c);
        free(c);
    } else {
        trim_into(out, content);
    }
    buf_append_str(out, IM_END "\n");
    free(content);
}

// A user or (later) system turn with its image tags. nemotron3 strips the toggles;
// nemotron3.5 asks the last user turn for efficient reasoning when thinking is "medium".
static void render_user_turn(struct buf *out, json_t *m, const char *role, int variant,
                             bool efficient, size_t *img)
{
    size_t n_img = json_array_size(json_object_get(m, "images"));
    buf_printf(out, IM_START "%s\n", role);
    struct buf c;
    buf_init(&c, 0);
    rnd_image_tags(&c, rnd_str(m, "content"), n_img, *img);
    if (variant == NEMOTRON3) {
        char *s = strip_toggles(buf_cstr(&c));
        trim_into(out, s);
        free(s);
    } else {
        buf_append(out, c.data ? c.data : "", c.len);
        if (efficient)
            buf_append_str(out, "\n\n{reasoning effort: efficient}");
    }
    buf_deinit(&c);
    *img += n_img;
    buf_append_str(out, IM_END "\n");
}

// Tool results msgs[k]: consecutive ones share one user turn (the first message after the
// system turn opens none).
static void render_tool_turn(struct buf *out, json_t *msgs, size_t k, bool first, size_t *img)
{
    json_t *m = json_array_get(msgs, k);
    size_t n_img = json_array_size(json_object_get(m, "images"));
    json_t *prev = !first ? json_array_get(msgs, k - 1) : NULL;
    json_t *next = json_array_get(msgs, k + 1);
    bool prev_tool = prev && strcmp(rnd_str(prev, "role"), "tool") == 0;
    if (!first && !prev_tool)
        buf_append_str(out, IM_START "user\n");
    buf_append_str(out, "<tool_response>\n");
    *img = rnd_image_tags(out, rnd_str(m, "content"), n_img, *img);
    buf_append_str(out, "\n</tool_response>\n");
    if (!next || strcmp(rnd_str(next, "role"), "tool") != 0)
        buf_append_str(out, IM_END "\n");
}

int rnd_render_nemotron(json_t *msgs, json_t *tools, const struct renderer_think *think,
                        int variant, struct buf *out, struct err *e)
{
    (void)e;
    bool thinking = !(think && think->set && !think->on);
    bool medium = variant == NEMOTRON35 && think && think->set && think->on && think->level &&
                  strcmp(think->level, "medium") == 0;
    size_t n = json_array_size(msgs), start = 0;
    char *system = NULL;
    if (n && strcmp(rnd_str(json_array_get(msgs, 0), "role"), "system") == 0) {
        const char *s = rnd_str(json_array_get(msgs, 0), "content");
        system = variant == NEMOTRON35 ? xstrdup(s) : strip_toggles(s);
        start = 1;
    }
    if (variant == NEMOTRON3)
        thinking = toggled_thinking(msgs, thinking);
    long last_user = -1;
    for (size_t i = start; i < n; i++)
        if (strcmp(rnd_str(json_array_get(msgs, i), "role"), "user") == 0)
            last_user = (long)(i - start);

    render_system_turn(out, system, tools);
    free(system);

    size_t img = 0;
    for (size_t k = start; k < n; k++) {
        long i = (long)(k - start);
        json_t *m = json_array_get(msgs, k);
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "assistant") == 0) {
            render_assistant_turn(out, m, variant, i < last_user);
        } else if (strcmp(role, "user") == 0 || strcmp(role, "system") == 0) {
            bool efficient = strcmp(role, "user") == 0 && i == last_user && medium;
            render_user_turn(out, m, role, variant, efficient, &img);
        } else if (strcmp(role, "tool") == 0) {
            render_tool_turn(out, msgs, k, i == 0, &img);
        } else {
            buf_printf(out, IM_START "%s\n%s" IM_END "\n", role, rnd_str(m, "content"));
        }
    }
    buf_append_str(out, thinking ? IM_START "assistant\n<think>\n"
                                 : IM_START "assistant\n<think></think>");
    return 0;
}

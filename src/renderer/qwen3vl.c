// qwen3-vl-instruct and qwen3-vl-thinking (Ollama's model/renderers/qwen3vl.go
// and model/parsers/qwen3vl.go): ChatML with the tools as JSON lines in the
// system turn, JSON tool calls in <tool_call> tags, tool results grouped in
// one user turn; the thinking variant shows <think> blocks for the turns
// after the last user query and opens one for the answer. Images become
// [img-N] tags, as Ollama's server renders them.
//
// The parser: the thinking variant starts inside the thinking (unless an
// assistant prefill has content) until </think> or a <tool_call>; then
// content with <tool_call>{JSON}</tool_call> calls. Trailing white space is
// held back until more text shows it is not the end, and, as in Ollama, the
// end of the output does not release it.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

#define IM_START    "<|im_start|>"
#define IM_END      "<|im_end|>"
#define THINK_CLOSE "</think>"
#define TOOL_OPEN   "<tool_call>"
#define TOOL_CLOSE  "</tool_call>"

enum { VL_INSTRUCT = 0, VL_THINKING = 1 };

#define VL_TOOLS_PREAMBLE                                                                          \
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "     \
    "provided with function signatures within <tools></tools> XML tags:\n<tools>"
#define VL_TOOLS_POSTAMBLE                                                                         \
    "\n</tools>\n\nFor each function call, return a json object with function name and "           \
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "                 \
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>" IM_END "\n"

// The message text with [img-N] tags for its images; *img advances.
static char *content_of(const json_t *m, size_t *img)
{
    struct buf out;
    buf_init(&out, 0);
    *img = rnd_image_tags(&out, rnd_str(m, "content"),
                          json_array_size(json_object_get(m, "images")), *img);
    return buf_take(&out);
}

static bool is_role(const json_t *m, const char *role)
{
    return m && strcmp(rnd_str(m, "role"), role) == 0;
}

static void render_system(struct buf *out, json_t *msgs, json_t *tools)
{
    json_t *first = json_array_get(msgs, 0);
    bool sys = is_role(first, "system");
    if (json_array_size(tools) > 0) {
        buf_append_str(out, IM_START "system\n");
        if (sys)
            buf_printf(out, "%s\n\n", rnd_str(first, "content"));
        buf_append_str(out, VL_TOOLS_PREAMBLE);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t)
        {
            buf_append_char(out, '\n');
            rnd_go_tool_json(out, t, true);
        }
        buf_append_str(out, VL_TOOLS_POSTAMBLE);
    } else if (sys) {
        buf_printf(out, IM_START "system\n%s" IM_END "\n", rnd_str(first, "content"));
    }
}

// The last user message that is not a wrapped tool response.
static size_t last_query_index(json_t *msgs)
{
    size_t n = json_array_size(msgs);
    for (size_t i = n; i-- > 0;) {
        json_t *m = json_array_get(msgs, i);
        if (!is_role(m, "user"))
            continue;
        size_t img = 0;
        char *c = content_of(m, &img);
        bool wrapped =
            cstr_starts_with(c, "<tool_response>") && cstr_ends_with(c, "</tool_response>");
        free(c);
        if (!wrapped)
            return i;
    }
    return n ? n - 1 : 0;
}

// Tool calls as JSON objects with the arguments spaced (marshalWithSpaces).
static void render_calls(struct buf *out, const json_t *m, const char *content)
{
    size_t j;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), j, call)
    {
        json_t *fn = rnd_call_fn(call);
        if (j > 0 || *content)
            buf_append_char(out, '\n');
        buf_printf(out, "<tool_call>\n{\"name\": \"%s\", \"arguments\": ", rnd_str(fn, "name"));
        struct buf a;
        buf_init(&a, 0);
        rnd_go_args_json(&a, json_object_get(fn, "arguments"));
        json_t *back = json_loads(buf_cstr(&a), 0, NULL);
        rnd_go_json_spaced_ordered(out, back);
        json_decref(back);
        buf_deinit(&a);
        buf_append_str(out, "}\n</tool_call>");
    }
}

// Trims the characters of set at both ends of [s, s+n) (Go's strings.Trim).
static void trim_set(const char **s, size_t *n, char c)
{
    while (*n && **s == c)
        (*s)++, (*n)--;
    while (*n && (*s)[*n - 1] == c)
        (*n)--;
}

static void render_assistant(struct buf *out, const json_t *m, const char *content, bool show_think,
                             bool last)
{
    const char *reasoning = rnd_str(m, "thinking");
    if (show_think && (last || *reasoning)) {
        const char *r = reasoning;
        size_t rn = strlen(r);
        trim_set(&r, &rn, '\n');
        buf_printf(out, IM_START "assistant\n<think>\n%.*s", (int)rn, r);
        if (*content) {
            const char *c = content;
            while (*c == '\n')
                c++;
            buf_printf(out, "\n</think>\n\n%s", c);
        }
    } else {
        buf_printf(out, IM_START "assistant\n%s", content);
    }
    render_calls(out, m, content);
}

int rnd_render_qwen3vl(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                       struct buf *out, struct err *e)
{
    (void)e;
    bool thinking = variant == VL_THINKING;
    if (think && think->set)
        thinking = think->on;
    render_system(out, msgs, tools);
    size_t n = json_array_size(msgs), last_query = last_query_index(msgs), img = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        char *content = content_of(m, &img);
        bool last = i == n - 1, prefill = last && is_role(m, "assistant");
        if (is_role(m, "user") || (is_role(m, "system") && i != 0)) {
            buf_printf(out, IM_START "%s\n%s" IM_END "\n", rnd_str(m, "role"), content);
        } else if (is_role(m, "assistant")) {
            render_assistant(out, m, content, thinking && i > last_query, last);
            if (!prefill)
                buf_append_str(out, IM_END "\n");
        } else if (is_role(m, "tool")) {
            if (i == 0 || !is_role(json_array_get(msgs, i - 1), "tool"))
                buf_append_str(out, IM_START "user");
            buf_printf(out, "\n<tool_response>\n%s\n</tool_response>", content);
            if (last || !is_role(json_array_get(msgs, i + 1), "tool"))
                buf_append_str(out, IM_END "\n");
        }
        free(content);
        if (last && !prefill) {
            buf_append_str(out, IM_START "assistant\n");
            if (thinking)
                buf_append_str(out, "<think>\n");
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { VL_THINKING_TEXT, VL_CONTENT, VL_TOOL, VL_THINK_DONE_WS, VL_TOOL_DONE_WS };

int rnd_qwen3vl_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                     int variant, struct err *e)
{
    (void)think;  // as in Ollama, the request's think value does not change the start
    (void)e;
    bool prefill = is_role(last, "assistant");
    if (variant != VL_THINKING || (prefill && *rnd_str(last, "content")))
        p->state = VL_CONTENT;
    else
        p->state = VL_THINKING_TEXT;
    return 0;
}

// Go's json.Unmarshal into api.ToolCallFunction: an object whose "name" is a
// string and whose "arguments" an object (absent or null: none).
static int tool_call(struct renderer_parser *p, const char *raw, size_t n, json_t *calls,
                     struct err *e)
{
    json_t *v = NULL;
    json_t *name = NULL, *args = NULL;
    bool ok = jsonx_parse(raw, n, &v, NULL) == 0 && json_is_object(v);
    if (ok) {
        name = json_object_get(v, "name");
        args = json_object_get(v, "arguments");
        ok = (!name || json_is_string(name) || json_is_null(name)) &&
             (!args || json_is_object(args) || json_is_null(args));
    }
    if (!ok) {
        json_decref(v);
        return err_set(e, ERR_INVALID, "qwen3-vl: failed to parse tool call JSON: %.*s",
                       (int)(n > 200 ? 200 : n), raw);
    }
    const char *s = json_string_value(name);
    rnd_call_append(p, calls, s ? s : "", json_is_object(args) ? json_incref(args) : NULL);
    json_decref(v);
    return 0;
}

static bool eat_ws_to(struct renderer_parser *p, int next)
{
    rnd_buf_consume(&p->acc, rnd_leading_ws(p->acc.data ? p->acc.data : "", p->acc.len));
    if (p->acc.len == 0)
        return false;
    p->state = next;
    return true;
}

// One step in the thinking: false when it waits for more text.
static bool thinking_step(struct renderer_parser *p, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    const char *close = rnd_find(a, p->acc.len, THINK_CLOSE);
    const char *tool = rnd_find(a, p->acc.len, TOOL_OPEN);
    if (tool && (!close || tool < close)) {
        rnd_split_at(p, tool, TOOL_OPEN, o->thinking);
        p->state = VL_TOOL;
        return true;
    }
    if (close) {
        p->state = rnd_split_at(p, close, THINK_CLOSE, o->thinking) ? VL_CONTENT : VL_THINK_DONE_WS;
        return true;
    }
    rnd_emit_until_partial(p, THINK_CLOSE, TOOL_OPEN, o->thinking);
    return false;
}

int rnd_qwen3vl_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        switch (p->state) {
        case VL_THINK_DONE_WS:
        case VL_TOOL_DONE_WS:
            if (!eat_ws_to(p, VL_CONTENT))
                return 0;
            break;
        case VL_THINKING_TEXT:
            if (!thinking_step(p, o))
                return 0;
            break;
        case VL_CONTENT: {
            const char *tool = rnd_find(a, n, TOOL_OPEN);
            if (!tool) {
                rnd_emit_until_partial(p, TOOL_OPEN, NULL, o->content);
                return 0;
            }
            rnd_split_at(p, tool, TOOL_OPEN, o->content);
            p->state = VL_TOOL;
            break;
        }
        case VL_TOOL: {
            const char *close = rnd_find(a, n, TOOL_CLOSE);
            if (!close)
                return 0;
            int rc = tool_call(p, a, (size_t)(close - a), o->calls, e);
            if (rc < 0)
                return rc;
            rnd_buf_consume(&p->acc, (size_t)(close - a) + strlen(TOOL_CLOSE));
            p->state = VL_TOOL_DONE_WS;
            break;
        }
        default:
            return 0;
        }
    }
}

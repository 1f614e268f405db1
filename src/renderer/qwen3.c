// qwen3 / qwen3-thinking parsers (Ollama's model/parsers/qwen3.go): an
// optional <think>…</think> section (qwen3-thinking starts inside it; the
// opening tag may still come first), then content with <tool_call>{JSON}
// </tool_call> calls. White space around tags is trimmed; trailing white
// space of a piece is held back until more text shows it is not the end.
#include "renderer/internal.h"

#include <string.h>

#define THINK_OPEN  "<think>"
#define THINK_CLOSE "</think>"
#define TOOL_OPEN   "<tool_call>"
#define TOOL_CLOSE  "</tool_call>"

enum {
    Q3_THINK_START_WS,  // after <think>: eat white space
    Q3_THINKING,
    Q3_THINK_DONE_WS,  // after </think>: eat white space
    Q3_CONTENT,
    Q3_TOOL_START_WS,  // after <tool_call>: eat white space
    Q3_TOOL,
};

int rnd_qwen3_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                   int variant, struct err *e)
{
    (void)last;
    (void)e;
    bool has_thinking = variant == 1;
    bool on = think && think->set ? think->on : has_thinking;  // qwen3-thinking: on by default
    if (has_thinking && on) {
        p->state = Q3_THINKING;
        p->flag = true;  // "<think>" may still open the output
    } else {
        p->state = Q3_CONTENT;
    }
    return 0;
}

// Eats leading white space; false when nothing else is buffered yet.
static bool eat_ws_to(struct renderer_parser *p, int next)
{
    size_t ws = rnd_leading_ws(p->acc.data ? p->acc.data : "", p->acc.len);
    rnd_buf_consume(&p->acc, ws);
    if (p->acc.len == 0)
        return false;
    p->state = next;
    return true;
}

static int tool_call(struct renderer_parser *p, const char *raw, size_t n, json_t *calls,
                     struct err *e)
{
    json_t *v = NULL;
    if (jsonx_parse(raw, n, &v, NULL) < 0 || !json_is_object(v)) {
        json_decref(v);
        return err_set(e, ERR_INVALID, "qwen3: failed to parse tool call JSON: %.*s",
                       (int)(n > 200 ? 200 : n), raw);
    }
    const char *name = rnd_str(v, "name");
    json_t *args = json_object_get(v, "arguments");
    if (!*name) {
        json_decref(v);
        return err_set(e, ERR_INVALID, "qwen3: empty function name");
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        json_decref(v);
        return err_set(e, ERR_INVALID, "qwen3: tool call arguments are not an object");
    }
    rnd_call_append(p, calls, name, json_is_object(args) ? json_incref(args) : NULL);
    json_decref(v);
    return 0;
}

// The thinking state: an optional opening tag first (p->flag), then text
// up to the closing tag or a tool call. False when more input is needed.
static bool q3_thinking(struct renderer_parser *p, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    if (p->flag) {
        size_t ws = rnd_leading_ws(a, n);
        size_t rest = n - ws;
        size_t tl = strlen(THINK_OPEN);
        if (rest >= tl && memcmp(a + ws, THINK_OPEN, tl) == 0) {
            size_t after = ws + tl;
            after += rnd_leading_ws(a + after, n - after);
            rnd_buf_consume(&p->acc, after);
            if (p->acc.len == 0)
                return false;
            p->flag = false;
            return true;
        }
        if (rest < tl && memcmp(THINK_OPEN, a + ws, rest) == 0)
            return false;
        p->flag = false;
    }
    const char *close = rnd_find(a, n, THINK_CLOSE);
    const char *tool = rnd_find(a, n, TOOL_OPEN);
    if (tool && (!close || tool < close)) {
        p->state = rnd_split_at(p, tool, TOOL_OPEN, o->thinking) ? Q3_TOOL : Q3_TOOL_START_WS;
        return true;
    }
    if (close) {
        p->state = rnd_split_at(p, close, THINK_CLOSE, o->thinking) ? Q3_CONTENT : Q3_THINK_DONE_WS;
        return true;
    }
    rnd_emit_until_partial(p, THINK_CLOSE, TOOL_OPEN, o->thinking);
    return false;
}

int rnd_qwen3_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        switch (p->state) {
        case Q3_THINK_START_WS:
            if (!eat_ws_to(p, Q3_THINKING))
                return 0;
            break;
        case Q3_THINK_DONE_WS:
            if (!eat_ws_to(p, Q3_CONTENT))
                return 0;
            break;
        case Q3_TOOL_START_WS:
            if (!eat_ws_to(p, Q3_TOOL))
                return 0;
            break;
        case Q3_THINKING:
            if (!q3_thinking(p, o))
                return 0;
            break;
        case Q3_CONTENT: {
            const char *tool = rnd_find(a, n, TOOL_OPEN);
            if (tool) {
                p->state =
                    rnd_split_at(p, tool, TOOL_OPEN, o->content) ? Q3_TOOL : Q3_TOOL_START_WS;
                break;
            }
            rnd_emit_until_partial(p, TOOL_OPEN, NULL, o->content);
            return 0;
        }
        case Q3_TOOL: {
            const char *close = rnd_find(a, n, TOOL_CLOSE);
            if (!close)
                return 0;
            size_t raw_len = (size_t)(close - a);
            raw_len -= rnd_trailing_ws(a, raw_len);
            int rc = tool_call(p, a, raw_len, o->calls, e);
            if (rc < 0)
                return rc;
            size_t after = (size_t)(close - a) + strlen(TOOL_CLOSE);
            after += rnd_leading_ws(a + after, n - after);
            rnd_buf_consume(&p->acc, after);
            p->state = Q3_CONTENT;
            break;
        }
        default:
            return 0;
        }
    }
}

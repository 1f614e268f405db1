// deepseek3.1 and cogito (Ollama's model/renderers/deepseek3.go, cogito.go,
// model/parsers/deepseek3.go, cogito.go): DeepSeek V3's full-width-bar
// markers, tools listed with their JSON schemas, calls as
// <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜> (cogito:
// function<｜tool▁sep｜>NAME\n```json\n{JSON}\n```), and </think> closing the
// thinking (the prompt opens it with <think>).
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

#define DS_BOS           "<｜begin▁of▁sentence｜>"
#define DS_EOS           "<｜end▁of▁sentence｜>"
#define DS_USER          "<｜User｜>"
#define DS_ASSISTANT     "<｜Assistant｜>"
#define DS_CALLS_BEGIN   "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END     "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN    "<｜tool▁call▁begin｜>"
#define DS_CALL_END      "<｜tool▁call▁end｜>"
#define DS_SEP           "<｜tool▁sep｜>"
#define DS_OUTPUT_BEGIN  "<｜tool▁output▁begin｜>"
#define DS_OUTPUT_END    "<｜tool▁output▁end｜>"
#define DS_THINK_CLOSE   "</think>"
#define DS_OUTPUTS_BEGIN "<｜tool▁outputs▁begin｜>"
#define DS_OUTPUTS_END   "<｜tool▁outputs▁end｜>"

enum { DEEPSEEK = 0, COGITO = 1, OLMO3_THINK = 2 };

// The tools with their parameter schemas, then the call format.
static void write_ds_tools(struct buf *out, json_t *tools)
{
    size_t i;
    json_t *tool;
    buf_append_str(out, "\n\n## Tools\nYou have access to the following tools:\n");
    json_array_foreach(tools, i, tool)
    {
        json_t *fn = json_object_get(tool, "function");
        buf_printf(out, "\n### %s\nDescription: %s", rnd_str(fn, "name"),
                   rnd_str(fn, "description"));
        json_t *gt = rnd_go_tool(tool);
        buf_append_str(out, "\n\nParameters: ");
        jsonx_dump(json_object_get(json_object_get(gt, "function"), "parameters"), 0, out, NULL);
        buf_append_str(out, "\n");
        json_decref(gt);
    }
    buf_append_str(out,
                   "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n" DS_CALLS_BEGIN
                       DS_CALL_BEGIN "tool_call_name" DS_SEP "tool_call_arguments" DS_CALL_END
                   "{{additional_tool_calls}}" DS_CALLS_END "\n\nWhere:\n\n- `tool_call_name` "
                   "must be an exact match to one of the available tools\n- "
                   "`tool_call_arguments` must be valid JSON that strictly follows the tool's "
                   "Parameters Schema\n- For multiple tool calls, chain them directly without "
                   "separators or spaces\n");
}

// Where the rendering of the conversation stands.
struct ds_render {
    bool thinking;       // the request turned thinking on
    bool last_user;      // the previous message was the user's
    bool is_tool;        // the previous message was a tool output
    long last_user_idx;  // index of the last user message, -1 without one
};

// An assistant message with calls: its content, then the calls.
static void write_ds_calls(struct buf *out, const json_t *m, json_t *calls, struct ds_render *r)
{
    if (r->last_user)
        buf_append_str(out, DS_ASSISTANT DS_THINK_CLOSE);
    r->last_user = false;
    r->is_tool = false;
    buf_append_str(out, rnd_str(m, "content"));
    buf_append_str(out, DS_CALLS_BEGIN);
    size_t c;
    json_t *call;
    json_array_foreach(calls, c, call)
    {
        json_t *fn = rnd_call_fn(call);
        buf_printf(out, DS_CALL_BEGIN "%s" DS_SEP, rnd_str(fn, "name"));
        rnd_go_args_json(out, json_object_get(fn, "arguments"));
        buf_append_str(out, DS_CALL_END);
    }
    buf_append_str(out, DS_CALLS_END DS_EOS);
}

// Assistant message i without calls: after a user turn it opens the
// assistant turn (thinking only for the current answer); its content drops
// any thinking up to </think> unless it follows a tool output.
static void write_ds_answer(struct buf *out, const json_t *m, size_t i, struct ds_render *r)
{
    if (r->last_user) {
        buf_append_str(out, DS_ASSISTANT);
        bool current = (long)i > r->last_user_idx;
        if (*rnd_str(m, "thinking") && r->thinking && current)
            buf_append_str(out, "<think>");
        else
            buf_append_str(out, DS_THINK_CLOSE);
    }
    r->last_user = false;
    const char *content = rnd_str(m, "content");
    if (!r->is_tool) {
        const char *close = strstr(content, DS_THINK_CLOSE);
        if (close)
            content = close + strlen(DS_THINK_CLOSE);
    }
    r->is_tool = false;
    buf_printf(out, "%s" DS_EOS, content);
}

int rnd_render_deepseek3(json_t *msgs, json_t *tools, const struct renderer_think *think,
                         int variant, struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    buf_append_str(out, DS_BOS);
    // The system messages, joined.
    size_t i;
    json_t *m;
    bool first = true;
    json_array_foreach(msgs, i, m)
    {
        if (strcmp(rnd_str(m, "role"), "system") != 0)
            continue;
        if (!first)
            buf_append_str(out, "\n\n");
        buf_append_str(out, rnd_str(m, "content"));
        first = false;
    }
    if (json_array_size(tools) > 0)
        write_ds_tools(out, tools);

    struct ds_render r = {.thinking = think && think->set && think->on, .last_user_idx = -1};
    for (size_t k = json_array_size(msgs); k > 0; k--)
        if (strcmp(rnd_str(json_array_get(msgs, k - 1), "role"), "user") == 0) {
            r.last_user_idx = (long)k - 1;
            break;
        }
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        json_t *calls = json_object_get(m, "tool_calls");
        if (strcmp(role, "user") == 0) {
            r.is_tool = false;
            r.last_user = true;
            buf_printf(out, DS_USER "%s", rnd_str(m, "content"));
        } else if (strcmp(role, "assistant") == 0 && json_array_size(calls) > 0) {
            write_ds_calls(out, m, calls, &r);
        } else if (strcmp(role, "assistant") == 0) {
            write_ds_answer(out, m, i, &r);
        } else if (strcmp(role, "tool") == 0) {
            r.last_user = false;
            r.is_tool = true;
            buf_printf(out, DS_OUTPUT_BEGIN "%s" DS_OUTPUT_END, rnd_str(m, "content"));
        }
    }
    if (r.last_user && !r.is_tool)
        buf_append_str(out, r.thinking ? DS_ASSISTANT "<think>" : DS_ASSISTANT DS_THINK_CLOSE);
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { DS_THINKING, DS_CONTENT, DS_CALLS, DS_OUTPUT };

int rnd_deepseek3_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                       int variant, struct err *e)
{
    (void)e;
    bool on = think && think->set && think->on;
    bool prefill =
        last && strcmp(rnd_str(last, "role"), "assistant") == 0 && *rnd_str(last, "content");
    // cogito answers a request with tools without thinking first;
    // olmo3-think always thinks.
    bool tools = variant == COGITO && json_array_size(p->tools) > 0;
    if (variant == OLMO3_THINK)
        on = true;
    p->state = on && !prefill && !tools ? DS_THINKING : DS_CONTENT;
    return 0;
}

// NAME<｜tool▁sep｜>{JSON} (cogito: TYPE<｜tool▁sep｜>NAME\n```json\n{JSON}\n```):
// false when it does not parse.
static bool ds_call(struct renderer_parser *p, const char *s, size_t n, json_t *calls)
{
    const char *sep = rnd_find(s, n, DS_SEP);
    if (!sep)
        return false;
    const char *name_start = s, *a = sep + strlen(DS_SEP);
    size_t nl = (size_t)(sep - s);
    size_t an = n - (size_t)(a - s);
    if (p->variant == COGITO) {
        const char *fence = rnd_find(a, an, "\n```json\n");
        if (!fence)
            return false;
        name_start = a;
        nl = (size_t)(fence - a);
        a = fence + strlen("\n```json\n");
        const char *end = rnd_find(a, n - (size_t)(a - s), "\n```");
        if (!end)
            return false;
        an = (size_t)(end - a);
    }
    rnd_trim(&name_start, &nl);
    json_t *args = NULL;
    if (jsonx_parse(a, an, &args, NULL) < 0 || !json_is_object(args)) {
        json_decref(args);
        return false;
    }
    char *name = xstrndup(name_start, nl);
    rnd_call_append(p, calls, name, args);
    free(name);
    return true;
}

// Steps of the parser, one per state. Each returns 0 when nothing more can
// be done with the text so far, 1 when it made progress.
typedef int (*ds_step_fn)(struct renderer_parser *p, struct rnd_out *o);

static int step_thinking(struct renderer_parser *p, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *close = rnd_find(a, n, DS_THINK_CLOSE);
    if (!close) {
        rnd_emit_until_partial(p, DS_THINK_CLOSE, NULL, o->thinking);
        return 0;
    }
    rnd_split_at(p, close, DS_THINK_CLOSE, o->thinking);
    p->state = DS_CONTENT;
    return 1;
}

// Content up to a call list or a tool output (olmo3-think: all content).
static int step_content(struct renderer_parser *p, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    if (p->variant == OLMO3_THINK) {
        buf_append(o->content, a, n);
        buf_reset(&p->acc);
        return 0;
    }
    const char *calls = rnd_find(a, n, DS_CALLS_BEGIN);
    bool cogito = p->variant == COGITO;
    const char *output = rnd_find(a, n, cogito ? DS_OUTPUTS_BEGIN : DS_OUTPUT_BEGIN);
    if (calls) {
        size_t before = (size_t)(calls - a);
        buf_append(o->content, a, before - rnd_trailing_ws(a, before));
        rnd_buf_consume(&p->acc, before + strlen(DS_CALLS_BEGIN));
        p->state = DS_CALLS;
        return 1;
    }
    if (output) {
        size_t before = (size_t)(output - a);
        buf_append(o->content, a, before - (cogito ? rnd_trailing_ws(a, before) : 0));
        rnd_buf_consume(&p->acc, before + strlen(cogito ? DS_OUTPUTS_BEGIN : DS_OUTPUT_BEGIN));
        p->state = DS_OUTPUT;
        return 1;
    }
    buf_append(o->content, a, n);
    buf_reset(&p->acc);
    return 0;
}

// Drops a + k and the white space after it.
static void consume_past(struct renderer_parser *p, size_t k)
{
    const char *a = p->acc.data ? p->acc.data : "";
    k += rnd_leading_ws(a + k, p->acc.len - k);
    rnd_buf_consume(&p->acc, k);
}

// Each complete call of the list, then the list's end.
static int step_calls(struct renderer_parser *p, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *b = rnd_find(a, n, DS_CALL_BEGIN);
    if (b) {
        const char *start = b + strlen(DS_CALL_BEGIN);
        const char *end = rnd_find(start, n - (size_t)(start - a), DS_CALL_END);
        if (end && ds_call(p, start, (size_t)(end - start), o->calls)) {
            consume_past(p, (size_t)(end - a) + strlen(DS_CALL_END));
            return 1;
        }
    }
    const char *end = rnd_find(a, n, DS_CALLS_END);
    if (!end)
        return 0;
    consume_past(p, (size_t)(end - a) + strlen(DS_CALLS_END));
    p->state = DS_CONTENT;
    return 1;
}

// A tool output: deepseek reports it as content; the tool outputs cogito
// echoes are dropped.
static int step_output(struct renderer_parser *p, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    if (p->variant != COGITO) {
        const char *end = rnd_find(a, n, DS_OUTPUT_END);
        if (!end)
            return 0;
        buf_append(o->content, a, (size_t)(end - a));
        rnd_buf_consume(&p->acc, (size_t)(end - a) + strlen(DS_OUTPUT_END));
        p->state = DS_CONTENT;
        return 1;
    }
    const char *b = rnd_find(a, n, DS_OUTPUT_BEGIN);
    const char *end = b ? rnd_find(b, n - (size_t)(b - a), DS_OUTPUT_END) : NULL;
    if (end) {
        consume_past(p, (size_t)(end - a) + strlen(DS_OUTPUT_END));
        return 1;
    }
    const char *ends = rnd_find(a, n, DS_OUTPUTS_END);
    if (!ends)
        return 0;
    consume_past(p, (size_t)(ends - a) + strlen(DS_OUTPUTS_END));
    p->state = DS_CONTENT;
    return 1;
}

static const ds_step_fn ds_steps[] = {
    [DS_THINKING] = step_thinking,
    [DS_CONTENT] = step_content,
    [DS_CALLS] = step_calls,
    [DS_OUTPUT] = step_output,
};

int rnd_deepseek3_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    (void)e;
    while (p->acc.len > 0)
        if (!ds_steps[p->state](p, o))
            return 0;
    return 0;
}

// ---------------------------------------------------------------------------
// cogito renderer

#define COGITO_DEFAULT                                                                             \
    "You are Cogito, an AI assistant created by Deep Cogito, which is an AI research lab based "   \
    "in San Francisco."

// The system prompt: deep thinking switched on or not, cogito's default,
// the request's system message and the tools' schemas.
static void write_cogito_system(struct buf *out, const char *system, json_t *tools, bool thinking)
{
    buf_append_str(out, DS_BOS);
    if (thinking) {
        buf_append_str(out, "Enable deep thinking subroutine.\n\n" COGITO_DEFAULT);
        if (*system)
            buf_printf(out, "\n\n%s\n\n", system);
    } else {
        buf_append_str(out, COGITO_DEFAULT);
        if (*system)
            buf_printf(out, "\n\n%s", system);
    }
    size_t i;
    json_t *tool;
    if (json_array_size(tools) > 0)
        buf_append_str(out, "\nYou have the following functions available:\n");
    json_array_foreach(tools, i, tool)
    {
        json_t *gt = rnd_go_tool(tool);
        buf_append_str(out, "```json\n");
        rnd_go_json_indent(out, gt, "    ");
        buf_append_str(out, "\n```\n");
        json_decref(gt);
    }
}

// An assistant message: its content, then its calls as fenced JSON.
static void write_cogito_assistant(struct buf *out, const json_t *m)
{
    json_t *calls = json_object_get(m, "tool_calls");
    if (json_array_size(calls) == 0) {
        buf_printf(out, "%s" DS_EOS, rnd_str(m, "content"));
        return;
    }
    buf_append_str(out, rnd_str(m, "content"));
    buf_append_str(out, DS_CALLS_BEGIN);
    size_t k;
    json_t *call;
    json_array_foreach(calls, k, call)
    {
        json_t *fn = rnd_call_fn(call);
        buf_printf(out, DS_CALL_BEGIN "function" DS_SEP "%s\n```json\n", rnd_str(fn, "name"));
        rnd_go_args_json(out, json_object_get(fn, "arguments"));
        buf_append_str(out, "\n```" DS_CALL_END);
        if (k + 1 < json_array_size(calls))
            buf_append_char(out, '\n');
    }
    buf_append_str(out, DS_CALLS_END DS_EOS);
}

// Tool message i: consecutive outputs share one outputs block.
static void write_cogito_tool(struct buf *out, json_t *msgs, size_t i, bool *outputs_open)
{
    if (!*outputs_open) {
        buf_append_str(out, DS_OUTPUTS_BEGIN);
        *outputs_open = true;
    }
    buf_printf(out, DS_OUTPUT_BEGIN "%s" DS_OUTPUT_END,
               rnd_str(json_array_get(msgs, i), "content"));
    json_t *next = json_array_get(msgs, i + 1);
    if (next && strcmp(rnd_str(next, "role"), "tool") == 0) {
        buf_append_char(out, '\n');
    } else {
        buf_append_str(out, DS_OUTPUTS_END);
        *outputs_open = false;
    }
}

int rnd_render_cogito(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    bool thinking = think && think->set && think->on;
    size_t n = json_array_size(msgs), start = 0;
    const char *system = "";
    if (n && strcmp(rnd_str(json_array_get(msgs, 0), "role"), "system") == 0) {
        system = rnd_str(json_array_get(msgs, 0), "content");
        start = 1;
    }
    write_cogito_system(out, system, tools, thinking);
    bool outputs_open = false, last_user = false;
    for (size_t i = start; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "user") == 0) {
            last_user = true;
            buf_printf(out, DS_USER "%s" DS_ASSISTANT, rnd_str(m, "content"));
        } else if (strcmp(role, "assistant") == 0) {
            last_user = false;
            write_cogito_assistant(out, m);
        } else if (strcmp(role, "tool") == 0) {
            last_user = false;
            write_cogito_tool(out, msgs, i, &outputs_open);
        }
    }
    if (outputs_open)
        buf_append_str(out, DS_OUTPUTS_END);
    if (!last_user)
        buf_append_str(out, DS_ASSISTANT);
    if (thinking)
        buf_append_str(out, "<think>\n");
    return 0;
}

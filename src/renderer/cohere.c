// cohere (Ollama's model/renderers/cohere.go, model/parsers/cohere.go):
// Command A's turn tokens, the tools as a JSON list, thinking between
// <|START_THINKING|> and <|END_THINKING|>, answers in <|START_TEXT|> (or
// <|START_RESPONSE|>) blocks and calls as a JSON list in
// <|START_ACTION|>[{"tool_call_id","tool_name","parameters"}]<|END_ACTION|>.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

#define C_TURN         "<|START_OF_TURN_TOKEN|>"
#define C_END_TURN     "<|END_OF_TURN_TOKEN|>"
#define C_SYSTEM       C_TURN "<|SYSTEM_TOKEN|>"
#define C_START_TEXT   "<|START_TEXT|>"
#define C_END_TEXT     "<|END_TEXT|>"
#define C_START_THINK  "<|START_THINKING|>"
#define C_END_THINK    "<|END_THINKING|>"
#define C_START_ACTION "<|START_ACTION|>"
#define C_END_ACTION   "<|END_ACTION|>"
#define C_START_RESP   "<|START_RESPONSE|>"
#define C_END_RESP     "<|END_RESPONSE|>"

static void tool_result(struct buf *out, const char *id, const char *content)
{
    json_t *w = json_pack("{s:s}", "content", content);
    buf_printf(out,
               "\n    {\n        \"tool_call_id\": \"%s\",\n        \"results\": {\n\n"
               "            \n            \"0\": ",
               id);
    rnd_go_json_spaced(out, w);
    buf_append_str(out, "\n\n        },\n        \"is_error\": null\n    }");
    json_decref(w);
}

static bool role_is(json_t *m, const char *role)
{
    return ascii_ieq(rnd_str(m, "role"), role);
}

// The system turn: the system prompt and the tools as a JSON list.
static void write_system(struct buf *out, const char *system, json_t *tools)
{
    buf_append_str(out, C_SYSTEM C_START_TEXT);
    if (*system)
        buf_printf(out, "%s\n\n\n\n", system);
    buf_append_str(out, "# Available Tools\n```json\n[\n");
    size_t nt = json_array_size(tools);
    if (nt == 0)
        buf_append_str(out, "\n\n");
    for (size_t i = 0; i < nt; i++) {
        json_t *gt = rnd_go_tool(json_array_get(tools, i));
        json_t *fn = json_object_get(gt, "function");
        buf_append_str(out, "\n    {\"name\": ");
        rnd_go_json(out, json_object_get(fn, "name"));
        buf_append_str(out, ", \"description\": ");
        json_t *d = json_string(rnd_str(fn, "description"));
        rnd_go_json(out, d);
        json_decref(d);
        buf_append_str(out, ", \"parameters\": ");
        rnd_go_json_spaced_ordered(out, json_object_get(fn, "parameters"));
        buf_append_str(out, ", \"responses\": null}");
        if (i + 1 < nt)
            buf_append_char(out, ',');
        buf_append_str(out, "\n\n");
        json_decref(gt);
    }
    buf_append_str(out, "\n]\n```" C_END_TEXT C_END_TURN);
}

// Call ids become "0", "1", …; tool results refer to them by the id.
struct cohere_ids {
    json_t *by_id;  // the call's own id -> its number
    int next;       // the next call's number
};

// One call of an action list, numbered; its arguments re-encoded in their
// order.
static void write_call(struct buf *out, const json_t *call, struct cohere_ids *ids)
{
    char idx[16];
    snprintf(idx, sizeof(idx), "%d", ids->next++);
    const char *id = rnd_str(call, "id");
    if (*id && !json_object_get(ids->by_id, id))
        json_object_set_new(ids->by_id, id, json_string(idx));
    json_t *fn = rnd_call_fn(call);
    buf_printf(out,
               "\n\n    {\"tool_call_id\": \"%s\", \"tool_name\": \"%s\", "
               "\"parameters\": ",
               idx, rnd_str(fn, "name"));
    json_t *args = json_object_get(fn, "arguments");
    struct buf a;
    buf_init(&a, 0);
    rnd_go_args_json(&a, args);
    json_t *back = json_loads(buf_cstr(&a), 0, NULL);
    rnd_go_json_spaced_ordered(out, back ? back : args);
    json_decref(back);
    buf_deinit(&a);
    buf_append_char(out, '}');
}

// An assistant turn: its thinking, then its calls as an action or its
// content as text. Returns whether the last message's text is left open
// (the model continues it).
static bool write_assistant(struct buf *out, const json_t *m, struct cohere_ids *ids, bool last)
{
    buf_append_str(out, C_TURN "<|CHATBOT_TOKEN|>");
    json_t *calls = json_object_get(m, "tool_calls");
    const char *th = rnd_str(m, "thinking");
    if (json_array_size(calls) == 0) {
        if (*th)
            buf_printf(out, C_START_THINK "%s" C_END_THINK, th);
        buf_printf(out, C_START_TEXT "%s", rnd_str(m, "content"));
        if (last)
            return true;
        buf_append_str(out, C_END_TEXT C_END_TURN);
        return false;
    }
    buf_append_str(out, "\n            \n                ");
    if (*th)
        buf_printf(out, C_START_THINK "%s" C_END_THINK, th);
    buf_append_str(out, C_START_ACTION "[");
    for (size_t k = 0; k < json_array_size(calls); k++) {
        write_call(out, json_array_get(calls, k), ids);
        if (k + 1 < json_array_size(calls))
            buf_append_char(out, ',');
    }
    buf_append_str(out, "\n\n]" C_END_ACTION C_END_TURN);
    return false;
}

// A run of tool results from message *i on, in one system turn; *i ends
// on the run's last message.
static void write_tool_results(struct buf *out, json_t *msgs, size_t *i,
                               const struct cohere_ids *ids)
{
    json_t *m = json_array_get(msgs, *i);
    buf_append_str(out, C_SYSTEM "<|START_TOOL_RESULT|>[");
    for (;;) {
        const char *id = rnd_str(m, "tool_call_id");
        const char *mapped = json_string_value(json_object_get(ids->by_id, id));
        tool_result(out, mapped ? mapped : id, rnd_str(m, "content"));
        json_t *next = json_array_get(msgs, *i + 1);
        if (!next || !role_is(next, "tool"))
            break;
        buf_append_char(out, ',');
        m = next;
        (*i)++;
    }
    buf_append_str(out, "\n\n]<|END_TOOL_RESULT|>" C_END_TURN);
}

int rnd_render_cohere(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    bool reasoning = !(think && think->set && !think->on);
    size_t n = json_array_size(msgs), start = 0;
    const char *system = "";
    if (n && role_is(json_array_get(msgs, 0), "system")) {
        system = rnd_str(json_array_get(msgs, 0), "content");
        start = 1;
    }
    write_system(out, system, tools);

    struct cohere_ids ids = {.by_id = json_object(), .next = 0};
    bool prefill = false;
    for (size_t i = start; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (role_is(m, "system"))
            buf_printf(out, C_SYSTEM C_START_TEXT "%s" C_END_TEXT C_END_TURN,
                       rnd_str(m, "content"));
        else if (role_is(m, "user"))
            buf_printf(out, C_TURN "<|USER_TOKEN|>" C_START_TEXT "%s" C_END_TEXT C_END_TURN,
                       rnd_str(m, "content"));
        else if (role_is(m, "assistant") || role_is(m, "chatbot"))
            prefill = write_assistant(out, m, &ids, i == n - 1) || prefill;
        else if (role_is(m, "tool"))
            write_tool_results(out, msgs, &i, &ids);
    }
    json_decref(ids.by_id);
    if (!prefill)
        buf_append_str(out, reasoning ? C_TURN "<|CHATBOT_TOKEN|>" C_START_THINK
                                      : C_TURN "<|CHATBOT_TOKEN|>" C_START_THINK C_END_THINK);
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { C_THINKING, C_AWAITING, C_CONTENT, C_ACTION };

int rnd_cohere_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e)
{
    (void)variant;
    (void)e;
    bool on = !(think && think->set && !think->on);
    bool prefill =
        last && strcmp(rnd_str(last, "role"), "assistant") == 0 && *rnd_str(last, "content");
    p->state = prefill ? C_CONTENT : on ? C_THINKING : C_AWAITING;
    return 0;
}

static void add_call(struct renderer_parser *p, json_t *c, json_t *calls)
{
    const char *name = json_string_value(json_object_get(c, "tool_name"));
    json_t *args = json_object_get(c, "parameters");
    if (!name || (args && !json_is_object(args) && !json_is_null(args)))
        return;
    rnd_call_append(p, calls, name, json_is_object(args) ? json_incref(args) : NULL);
}

// parseCohereActions: a JSON list of calls, or else every JSON object found.
static void actions(struct renderer_parser *p, const char *s, size_t n, json_t *calls)
{
    rnd_trim(&s, &n);
    if (n == 0)
        return;
    json_t *v = NULL;
    if (jsonx_parse(s, n, &v, NULL) == 0 && json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) if (json_is_object(c)) add_call(p, c, calls);
        json_decref(v);
        return;
    }
    json_decref(v);
    int depth = 0;
    long start = -1;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (esc) {
            esc = false;
        } else if (c == '\\' && in_str) {
            esc = true;
        } else if (c == '"') {
            in_str = !in_str;
        } else if (in_str) {
        } else if (c == '{') {
            if (depth++ == 0)
                start = (long)i;
        } else if (c == '}' && depth > 0 && --depth == 0 && start >= 0) {
            json_t *o = NULL;
            if (jsonx_parse(s + start, i + 1 - (size_t)start, &o, NULL) == 0 && json_is_object(o))
                add_call(p, o, calls);
            json_decref(o);
            start = -1;
        }
    }
}

static bool partial_open(const char *s, size_t n)
{
    static const char *const tags[] = {C_START_TEXT, C_START_RESP, C_START_ACTION, C_END_TURN};
    for (size_t i = 0; i < 4; i++)
        if (n < strlen(tags[i]) && memcmp(tags[i], s, n) == 0)
            return true;
    return false;
}

// Steps of the parser, one per state. Each returns 0 when nothing more can
// be done with the text so far, 1 when it made progress.
typedef int (*cohere_step_fn)(struct renderer_parser *p, bool done, struct rnd_out *o);

static int step_thinking(struct renderer_parser *p, bool done, struct rnd_out *o)
{
    (void)done;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *end = rnd_find(a, n, C_END_THINK);
    if (end) {
        size_t before = (size_t)(end - a);
        buf_append(o->thinking, a, before - rnd_trailing_ws(a, before));
        rnd_buf_consume(&p->acc, before + strlen(C_END_THINK));
        p->state = C_AWAITING;
        return 1;
    }
    size_t emit = n - rnd_overlap(a, n, C_END_THINK);
    emit -= rnd_trailing_ws(a, emit);
    buf_append(o->thinking, a, emit);
    rnd_buf_consume(&p->acc, emit);
    return 0;
}

// Between blocks: a text or response opener starts content, an action
// opener starts calls, an end of turn is dropped; anything else is content.
static int step_awaiting(struct renderer_parser *p, bool done, struct rnd_out *o)
{
    (void)o;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *t = rnd_find(a, n, C_START_TEXT);
    size_t tl = strlen(C_START_TEXT);
    if (!t) {
        t = rnd_find(a, n, C_START_RESP);
        tl = strlen(C_START_RESP);
    }
    if (t) {
        rnd_buf_consume(&p->acc, (size_t)(t - a) + tl);
        p->state = C_CONTENT;
        return 1;
    }
    const char *act = rnd_find(a, n, C_START_ACTION);
    if (act) {
        rnd_buf_consume(&p->acc, (size_t)(act - a) + strlen(C_START_ACTION));
        p->state = C_ACTION;
        return 1;
    }
    size_t ws = rnd_leading_ws(a, n);
    if (n - ws >= strlen(C_END_TURN) && memcmp(a + ws, C_END_TURN, strlen(C_END_TURN)) == 0) {
        rnd_buf_consume(&p->acc, ws + strlen(C_END_TURN));
        return 1;
    }
    if (ws == n) {
        if (done)
            buf_reset(&p->acc);
        return 0;
    }
    if (!done && partial_open(a + ws, n - ws))
        return 0;
    rnd_buf_consume(&p->acc, ws);
    p->state = C_CONTENT;
    return 1;
}

static int step_content(struct renderer_parser *p, bool done, struct rnd_out *o)
{
    static const char *const closes[] = {C_END_TEXT, C_END_RESP, C_END_TURN};
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < 3 && !best; i++) {
        const char *c = rnd_find(a, n, closes[i]);
        if (c) {
            best = c;
            best_len = strlen(closes[i]);
        }
    }
    if (best) {
        buf_append(o->content, a, (size_t)(best - a));
        rnd_buf_consume(&p->acc, (size_t)(best - a) + best_len);
        p->state = C_AWAITING;
        return 1;
    }
    size_t keep = 0;
    for (size_t i = 0; i < 3; i++) {
        size_t ov = rnd_overlap(a, n, closes[i]);
        if (ov > keep)
            keep = ov;
    }
    if (done)
        keep = 0;
    buf_append(o->content, a, n - keep);
    rnd_buf_consume(&p->acc, n - keep);
    return 0;
}

static int step_action(struct renderer_parser *p, bool done, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *end = rnd_find(a, n, C_END_ACTION);
    if (end) {
        actions(p, a, (size_t)(end - a), o->calls);
        rnd_buf_consume(&p->acc, (size_t)(end - a) + strlen(C_END_ACTION));
        p->state = C_AWAITING;
        return 1;
    }
    if (done) {
        actions(p, a, n, o->calls);
        buf_reset(&p->acc);
    }
    return 0;
}

static const cohere_step_fn cohere_steps[] = {
    [C_THINKING] = step_thinking,
    [C_AWAITING] = step_awaiting,
    [C_CONTENT] = step_content,
    [C_ACTION] = step_action,
};

int rnd_cohere_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)e;
    while (p->acc.len > 0)
        if (!cohere_steps[p->state](p, done, o))
            return 0;
    return 0;
}

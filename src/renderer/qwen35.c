// qwen3.5 and qwen3.8: Qwen 3.5's chat format (Ollama's
// model/renderers/qwen35.go): ChatML with the tools as JSON lines, the
// thinking of turns after the last user query in <think> blocks, XML tool
// calls as qwen3-coder writes them; the generation prompt opens a <think>
// block (or an empty one when thinking is off). qwen3.8 folds every
// system/developer message into one leading system turn, always shows the
// assistant's think block and adds reasoning-effort instructions.
//
// The qwen3.5 parser (model/parsers/qwen35.go): thinking until </think>
// (a <tool_call> inside it ends it), then the rest through the qwen3-coder
// parser.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

#define IM_START "<|im_start|>"
#define IM_END   "<|im_end|>"

#define Q38_XHIGH                                                                                  \
    "Reasoning effort is set to xhigh. Please think carefully through the task, validate key "     \
    "assumptions, consider plausible alternatives, and prioritize correctness, consistency, and "  \
    "clarity in the final answer."
#define Q38_LOW                                                                                    \
    "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly to "    \
    "the conclusion without unnecessary elaboration."

#define Q35_TOOL_POSTAMBLE "\n</tools>\n\n" RND_QWEN_CALL_FORMAT

// ornith (model/renderers/ornith.go) is qwen3.5 that always shows the
// assistant's think block, as qwen3.8 does.
enum { Q35 = 0, Q38 = 1, ORNITH = 2 };

// strings.TrimSpace (Go's white space) into out.
static void trim_into(struct buf *out, const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    size_t trail = lead < n ? rnd_trailing_ws(s + lead, n - lead) : 0;
    buf_append(out, s + lead, n - lead - trail);
}

// The message text: [img-N] tags for its images (Ollama's server renders
// image tags), trimmed.
static char *content_of(json_t *m, size_t *img_offset)
{
    struct buf raw, out;
    buf_init(&raw, 0);
    buf_init(&out, 0);
    *img_offset = rnd_image_tags(&raw, rnd_str(m, "content"),
                                 json_array_size(json_object_get(m, "images")), *img_offset);
    trim_into(&out, raw.data ? raw.data : "", raw.len);
    buf_deinit(&raw);
    return buf_take(&out);
}

static bool is_tool_response(const char *c)
{
    size_t n = strlen(c);
    return cstr_starts_with(c, "<tool_response>") && n >= 16 &&
           cstr_ends_with(c, "</tool_response>");
}

// qwen3.8: one leading system turn made of every system/developer message.
static json_t *normalize_q38(json_t *msgs, struct err *e)
{
    size_t count = 0;
    struct buf text;
    buf_init(&text, 0);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "system") != 0 && strcmp(role, "developer") != 0)
            continue;
        if (json_array_size(json_object_get(m, "images")) > 0) {
            buf_deinit(&text);
            err_set(e, ERR_INVALID, "%s message cannot contain images", role);
            return NULL;
        }
        count++;
        struct buf t;
        buf_init(&t, 0);
        const char *c = rnd_str(m, "content");
        trim_into(&t, c, strlen(c));
        if (t.len) {
            if (text.len)
                buf_append_str(&text, "\n\n");
            buf_append(&text, t.data, t.len);
        }
        buf_deinit(&t);
    }
    if (count == 0 ||
        (count == 1 && strcmp(rnd_str(json_array_get(msgs, 0), "role"), "system") == 0)) {
        buf_deinit(&text);
        return json_incref(msgs);
    }
    json_t *out = json_array();
    json_array_append_new(out,
                          json_pack("{s:s,s:s}", "role", "system", "content", buf_cstr(&text)));
    buf_deinit(&text);
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "system") != 0 && strcmp(role, "developer") != 0)
            json_array_append(out, m);
    }
    return out;
}

static int q38_instructions(const struct renderer_think *think, const char **out, struct err *e)
{
    *out = "";
    if (!think || !think->set) {
        *out = Q38_XHIGH;
        return 0;
    }
    if (!think->on)
        return 0;
    // think:true is level "medium" (api.ThinkValue.String).
    const char *level = think->level && *think->level ? think->level : "medium";
    if (strcmp(level, "low") == 0)
        *out = Q38_LOW;
    else if (strcmp(level, "high") == 0 || strcmp(level, "max") == 0)
        *out = Q38_XHIGH;
    else if (strcmp(level, "medium") != 0)
        return err_set(e, ERR_INVALID, "unsupported Qwen3.8 reasoning effort \"%s\"", level);
    return 0;
}

// splitQwen35ReasoningContent: the reasoning to show and the rest of the
// content (both owned by the caller's bufs).
static void split_reasoning(const char *content, const char *thinking, bool show, bool extract,
                            struct buf *reasoning, struct buf *rest)
{
    if (show && *thinking) {
        trim_into(reasoning, thinking, strlen(thinking));
        buf_append_str(rest, content);
        return;
    }
    if (!extract) {
        buf_append_str(rest, content);
        return;
    }
    const char *close = strstr(content, "</think>");
    if (!close) {
        buf_append_str(rest, content);
        return;
    }
    const char *start = content;
    for (const char *p = content; (p = strstr(p, "<think>")) && p < close; p++)
        start = p + strlen("<think>");
    trim_into(reasoning, start, (size_t)(close - start));
    const char *after = close + strlen("</think>");
    while (*after == '\n')
        after++;
    buf_append_str(rest, after);
}

static bool is_system(const json_t *m)
{
    return m && strcmp(rnd_str(m, "role"), "system") == 0;
}

// Whether user message m is a real query rather than tool results.
static bool is_query(json_t *m)
{
    size_t off = 0;
    char *c = content_of(m, &off);
    bool query = !is_tool_response(c);
    free(c);
    return query;
}

// qwen3.8's checks on the normalized messages, then its reasoning-effort instructions.
static int q38_check(json_t *msgs, const struct renderer_think *think, const char **instr,
                     struct err *e)
{
    size_t n = json_array_size(msgs);
    json_t *first = json_array_get(msgs, 0);
    bool query = false;
    for (size_t i = 0; i < n && !query; i++) {
        json_t *m = json_array_get(msgs, i);
        if (strcmp(rnd_str(m, "role"), "user") == 0)
            query = is_query(m);
    }
    if (n == 0)
        return err_set(e, ERR_INVALID, "no messages provided");
    if (is_system(first) && json_array_size(json_object_get(first, "images")) > 0)
        return err_set(e, ERR_INVALID, "system message cannot contain images");
    if (!query)
        return err_set(e, ERR_INVALID, "no user query found in messages");
    return q38_instructions(think, instr, e);
}

// The leading system turn: instructions, the tools (then the first system message's text),
// or the first system message alone. qwen3.8 leaves out an empty one.
static void render_system(struct buf *out, json_t *msgs, json_t *tools, const char *instr,
                          int variant)
{
    json_t *first = json_array_get(msgs, 0);
    bool first_system = is_system(first);
    char *sys = NULL;
    if (first_system) {
        size_t off = 0;
        sys = content_of(first, &off);
    }
    if (json_array_size(tools) > 0) {
        buf_append_str(out, IM_START "system\n");
        if (*instr)
            buf_printf(out, "%s\n\n", instr);
        buf_append_str(out, "# Tools\n\nYou have access to the following functions:\n\n<tools>");
        size_t i;
        json_t *tool;
        json_array_foreach(tools, i, tool)
        {
            buf_append_char(out, '\n');
            rnd_go_tool_json(out, tool, true);
        }
        buf_append_str(out, Q35_TOOL_POSTAMBLE);
        if (sys && *sys)
            buf_printf(out, "\n\n%s", sys);
        buf_append_str(out, IM_END "\n");
    } else if (first_system) {
        if (variant != Q38 || *sys || *instr) {
            buf_append_str(out, IM_START "system\n");
            if (*instr) {
                buf_append_str(out, instr);
                if (*sys)
                    buf_append_str(out, "\n\n");
            }
            buf_append_str(out, sys);
            buf_append_str(out, IM_END "\n");
        }
    } else if (*instr) {
        buf_printf(out, IM_START "system\n%s" IM_END "\n", instr);
    }
    free(sys);
}

// The index of the last user message that is a real query (not tool results).
static size_t last_query_index(json_t *msgs)
{
    size_t n = json_array_size(msgs);
    for (size_t i = n; i > 0; i--) {
        json_t *m = json_array_get(msgs, i - 1);
        if (strcmp(rnd_str(m, "role"), "user") == 0 && is_query(m))
            return i - 1;
    }
    return n ? n - 1 : 0;
}

// An assistant turn's tool calls in qwen3-coder's XML, after the text in rest.
static void render_tool_calls(struct buf *out, json_t *m, const struct buf *rest)
{
    size_t k;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), k, call)
    {
        if (k == 0) {
            struct buf t;
            buf_init(&t, 0);
            trim_into(&t, rest->data ? rest->data : "", rest->len);
            if (t.len)
                buf_append_str(out, "\n\n");
            buf_deinit(&t);
        } else {
            buf_append_char(out, '\n');
        }
        json_t *fn = rnd_call_fn(call);
        buf_printf(out, "<tool_call>\n<function=%s>\n", rnd_str(fn, "name"));
        const char *an;
        json_t *av;
        json_object_foreach(json_object_get(fn, "arguments"), an, av)
        {
            buf_printf(out, "<parameter=%s>\n", an);
            if (json_is_null(av))
                buf_append_str(out, "null");
            else
                rnd_go_value(out, av);
            buf_append_str(out, "\n</parameter>\n");
        }
        buf_append_str(out, "</function>\n</tool_call>");
    }
}

// An assistant turn: its reasoning in a <think> block when shown, the text, the tool
// calls; a prefill (the last message) stays open.
static void render_assistant(struct buf *out, json_t *m, const char *content, bool show,
                             int variant, bool prefill)
{
    struct buf reasoning, rest;
    buf_init(&reasoning, 0);
    buf_init(&rest, 0);
    split_reasoning(content, rnd_str(m, "thinking"), show, variant != Q38, &reasoning, &rest);
    if (show)
        buf_printf(out, IM_START "assistant\n<think>\n%s\n</think>\n\n%s", buf_cstr(&reasoning),
                   buf_cstr(&rest));
    else
        buf_printf(out, IM_START "assistant\n%s", buf_cstr(&rest));
    render_tool_calls(out, m, &rest);
    if (!prefill)
        buf_append_str(out, IM_END "\n");
    buf_deinit(&reasoning);
    buf_deinit(&rest);
}

// Tool results: consecutive tool messages share one user turn.
static void render_tool_response(struct buf *out, json_t *msgs, size_t i, const char *content)
{
    json_t *prev = i > 0 ? json_array_get(msgs, i - 1) : NULL;
    json_t *next = json_array_get(msgs, i + 1);
    if (!prev || strcmp(rnd_str(prev, "role"), "tool") != 0)
        buf_append_str(out, IM_START "user");
    buf_printf(out, "\n<tool_response>\n%s\n</tool_response>", content);
    if (!next || strcmp(rnd_str(next, "role"), "tool") != 0)
        buf_append_str(out, IM_END "\n");
}

int rnd_render_qwen35(json_t *msgs_in, json_t *tools, const struct renderer_think *think,
                      int variant, struct buf *out, struct err *e)
{
    json_t *msgs = variant == Q38 ? normalize_q38(msgs_in, e) : json_incref(msgs_in);
    if (!msgs)
        return ERR_INVALID;
    size_t n = json_array_size(msgs);
    const char *instr = "";
    if (variant == Q38) {
        int rc = q38_check(msgs, think, &instr, e);
        if (rc < 0) {
            json_decref(msgs);
            return rc;
        }
    }
    bool thinking = true;  // both variants think by default
    if (think && think->set)
        thinking = think->on;
    render_system(out, msgs, tools, instr, variant);
    size_t last_query = last_query_index(msgs);

    size_t img = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = rnd_str(m, "role");
        char *content = content_of(m, &img);
        bool last = i == n - 1;
        bool prefill = last && strcmp(role, "assistant") == 0;
        if (strcmp(role, "user") == 0 || (strcmp(role, "system") == 0 && i != 0))
            buf_printf(out, IM_START "%s\n%s" IM_END "\n", role, content);
        else if (strcmp(role, "assistant") == 0)
            render_assistant(out, m, content,
                             variant == Q38 || variant == ORNITH || (thinking && i > last_query),
                             variant, prefill);
        else if (strcmp(role, "tool") == 0)
            render_tool_response(out, msgs, i, content);
        else if (variant == Q38 && strcmp(role, "system") != 0)
            buf_printf(out, IM_START "%s\n%s" IM_END "\n", role, content);
        free(content);
        if (last && !prefill) {
            buf_append_str(out, IM_START "assistant\n");
            if (thinking)
                buf_append_str(out, "<think>\n");
            else
                buf_append_str(out, "<think>\n\n</think>\n\n");  // emitEmptyThinkOnNoThink
        }
    }
    json_decref(msgs);
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

#define THINK_OPEN  "<think>"
#define THINK_CLOSE "</think>"
#define TOOL_OPEN   "<tool_call>"

enum { P35_THINKING, P35_THINK_DONE_WS, P35_CONTENT };

struct q35 {
    struct renderer_parser *tool;  // qwen3-coder over the content
    bool allow_open;               // "<think>" may still open the output
    bool trim_lead;                // eat white space at the start of the thinking
};

int rnd_qwen35_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e)
{
    (void)variant;
    struct q35 *q = xcalloc(1, sizeof(*q));
    p->impl = q;
    int rc = renderer_parser_new(&q->tool, "qwen3-coder", p->tools, NULL, NULL, e);
    if (rc < 0)
        return rc;
    bool on = think && think->set ? think->on : true;
    bool prefill =
        last && strcmp(rnd_str(last, "role"), "assistant") == 0 && *rnd_str(last, "content");
    if (on && !prefill) {
        p->state = P35_THINKING;
        q->allow_open = true;
    } else {
        p->state = P35_CONTENT;
    }
    return 0;
}

void rnd_qwen35_deinit(struct renderer_parser *p)
{
    struct q35 *q = p->impl;
    if (!q)
        return;
    renderer_parser_free(q->tool);
    free(q);
    p->impl = NULL;
}

// Steps of the thinking states. Each returns 0 when nothing more can be done
// with the text so far, 1 when it made progress.

// White space after </think> is dropped before the content starts.
static int step_think_done_ws(struct renderer_parser *p)
{
    const char *a = p->acc.data ? p->acc.data : "";
    rnd_buf_consume(&p->acc, rnd_leading_ws(a, p->acc.len));
    if (p->acc.len == 0)
        return 0;
    p->state = P35_CONTENT;
    return 1;
}

// The model may echo the primed <think>: dropped, with the white space
// around it.
static int step_think_open(struct renderer_parser *p, struct q35 *q)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    size_t ws = rnd_leading_ws(a, n);
    size_t tl = strlen(THINK_OPEN);
    if (n - ws >= tl && memcmp(a + ws, THINK_OPEN, tl) == 0) {
        size_t after = ws + tl;
        after += rnd_leading_ws(a + after, n - after);
        rnd_buf_consume(&p->acc, after);
        q->allow_open = false;
        q->trim_lead = p->acc.len == 0;
        return p->acc.len > 0;
    }
    if (n - ws < tl && memcmp(THINK_OPEN, a + ws, n - ws) == 0)
        return 0;
    q->allow_open = false;
    return 1;
}

// White space at the start of the thinking is dropped.
// A tool call inside the thinking closes it: the text is rewritten with a
// </think> in front of the call's <tool_call>.
static void close_before_tool(struct renderer_parser *p, const char *tool)
{
    const char *a = p->acc.data;
    size_t n = p->acc.len;
    size_t before = (size_t)(tool - a);
    size_t keep = before - rnd_trailing_ws(a, before);
    size_t after = before + strlen(TOOL_OPEN);
    after += rnd_leading_ws(a + after, n - after);
    struct buf nb;
    buf_init(&nb, 0);
    buf_append(&nb, a, keep);
    buf_append_str(&nb, THINK_CLOSE TOOL_OPEN);
    buf_append(&nb, a + after, n - after);
    buf_deinit(&p->acc);
    p->acc = nb;
}

static int step_thinking(struct renderer_parser *p, struct q35 *q, struct rnd_out *o)
{
    if (q->allow_open)
        return step_think_open(p, q);
    if (q->trim_lead)
        return rnd_trim_lead(p, &q->trim_lead);
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *close = rnd_find(a, n, THINK_CLOSE);
    // Nemotron: whichever of </think> and <tool_call> comes first.
    const char *early_tool = p->variant == 1 ? rnd_find(a, n, TOOL_OPEN) : NULL;
    if (early_tool && (!close || early_tool < close))
        close = NULL;
    if (close) {
        p->state =
            rnd_split_at(p, close, THINK_CLOSE, o->thinking) ? P35_CONTENT : P35_THINK_DONE_WS;
        return 1;
    }
    size_t ov = rnd_overlap(a, n, THINK_CLOSE), ov2 = rnd_overlap(a, n, TOOL_OPEN);
    if ((ov || ov2) && !early_tool) {
        rnd_emit_until_partial(p, THINK_CLOSE, TOOL_OPEN, o->thinking);
        return 0;
    }
    const char *tool = rnd_find(a, n, TOOL_OPEN);
    if (tool) {
        close_before_tool(p, tool);
        return 1;
    }
    rnd_emit_until_partial(p, NULL, NULL, o->thinking);
    return 0;
}

// The content goes through the qwen3-coder parser.
static int step_content(struct renderer_parser *p, struct q35 *q, bool done, struct rnd_out *o,
                        struct err *e)
{
    struct buf c;
    buf_init(&c, 0);
    buf_append(&c, p->acc.data, p->acc.len);
    buf_reset(&p->acc);
    int rc =
        renderer_parser_add(q->tool, c.data, c.len, done, o->content, o->thinking, o->calls, e);
    buf_deinit(&c);
    return rc;
}

int rnd_qwen35_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    struct q35 *q = p->impl;
    for (;;) {
        if (p->state == P35_CONTENT)
            return p->acc.len ? step_content(p, q, done, o, e) : 0;
        int more = p->state == P35_THINK_DONE_WS ? step_think_done_ws(p) : step_thinking(p, q, o);
        if (!more)
            break;
    }
    // The content parser also sees the end of the response.
    if (done && p->state != P35_CONTENT)
        return renderer_parser_add(q->tool, "", 0, true, o->content, o->thinking, o->calls, e);
    return 0;
}

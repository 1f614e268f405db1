// glimmer (Ollama's model/renderers/glimmer.go, model/parsers/glimmer.go):
// a harmony-like format of addressed messages,
//
//   <|start|>assistant to=RECIPIENT<|message|>BODY<|eom|> or <|eot|>
//
// after <|begin_of_text|>. The recipient "self" carries reasoning, "user"
// the answer, and a tool name a call written as an ATEM block:
//
//   <atem:function_calls>
//   <atem:invoke name="get_weather">
//   <atem:parameter name="city">SF</atem:parameter>
//   </atem:invoke>
//   </atem:function_calls>
//
// The system message states the reasoning strength and lists the tools in
// JSON schema with the namespaces (the part of a name before its first dot)
// as valid recipients. The parser also recovers the slips the model is seen
// to make: a header without "<|start|>assistant" after an unterminated
// message, a call addressed to a namespace, the user or nobody, and stray
// <|message|> tokens inside an invoke name.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define G_BOS         "<|begin_of_text|>"
#define G_START       "<|start|>"
#define G_MESSAGE     "<|message|>"
#define G_EOM         "<|eom|>"
#define G_EOT         "<|eot|>"
#define G_ASSISTANT   G_START "assistant"
#define G_CALLS_OPEN  "<atem:function_calls>"
#define G_CALLS_CLOSE "</atem:function_calls>"
#define G_INVOKE_OPEN "<atem:invoke name=\""
#define G_INVOKE_END  "</atem:invoke>"
#define G_PARAM_OPEN  "<atem:parameter name=\""
#define G_PARAM_CLOSE "</atem:parameter>"

#define G_DEFAULT_SYSTEM   "You are a helpful AI assistant."
#define G_KNOWLEDGE_CUTOFF "2026-01-04"

#define G_TOOLS_INTRO                                                                              \
    "In this environment you have access to a set of tools you can use to answer the user's "      \
    "question.\n\nYou can invoke a function by writing a \"<atem:function_calls>\" block like "    \
    "the following:\n<atem:function_calls>\n<atem:invoke name=\"$FUNCTION_NAME\">\n"               \
    "<atem:parameter name=\"$PARAMETER_NAME\">$PARAMETER_VALUE</atem:parameter>\n...\n"            \
    "</atem:invoke>\n</atem:function_calls>\n\nString and scalar parameters should be specified "  \
    "as is, while lists and objects should use JSON format. Note that spaces for string values "   \
    "are not stripped. The output is not expected to be valid XML and is parsed with regular "     \
    "expressions.\nHere are the functions available in JSONSchema format:\n// Tool metadata\n"

#define G_TOOLS_EXAMPLE                                                                            \
    "\n\nHere's an example of how to call a function in the tool set:\n(If the tool namespace "    \
    "is not specified, invoke the function directly as `example_function_name` rather than "       \
    "`example_tool_name.example_function_name`)\n\nto=example_tool_name.example_function_name\n"   \
    "\n<atem:function_calls>\n<atem:invoke name=\"example_tool_name.example_function_name\">\n"    \
    "<atem:parameter name=\"example_parameter_1\">value_1</atem:parameter>\n<atem:parameter "      \
    "name=\"example_parameter_2\">This is the value for the second parameter\nthat can span\n"     \
    "\"multiple\" lines\n</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"

// A borrowed piece of text.
struct span {
    const char *s;
    size_t n;
};

static struct span span_of(const char *s)
{
    return (struct span){s, strlen(s)};
}

static struct span from(struct span t, size_t k)
{
    return (struct span){t.s + k, t.n - k};
}

static bool has_prefix(struct span t, const char *lit)
{
    size_t l = strlen(lit);
    return t.n >= l && memcmp(t.s, lit, l) == 0;
}

static bool has_suffix(struct span t, const char *lit)
{
    size_t l = strlen(lit);
    return t.n >= l && memcmp(t.s + t.n - l, lit, l) == 0;
}

// t is a (possibly empty) prefix of lit.
static bool prefix_of(struct span t, const char *lit)
{
    return t.n <= strlen(lit) && memcmp(t.s, lit, t.n) == 0;
}

static long find(struct span t, const char *lit)
{
    const char *at = rnd_find(t.s, t.n, lit);
    return at ? (long)(at - t.s) : -1;
}

// Go's strings.TrimSpace.
static struct span trim(struct span t)
{
    size_t k = rnd_leading_ws(t.s, t.n);
    t = from(t, k);
    t.n -= rnd_trailing_ws(t.s, t.n);
    return t;
}

static bool span_eq(struct span t, const char *lit)
{
    return t.n == strlen(lit) && memcmp(t.s, lit, t.n) == 0;
}

// ---------------------------------------------------------------------------
// Renderer

// "none" when thinking is off, the level when one is given, else "high".
static const char *strength_of(const struct renderer_think *think)
{
    if (!think || !think->set)
        return "high";
    if (!think->on)
        return "none";
    return think->level ? think->level : "high";
}

// The namespace of a tool name: the part before its first dot.
static struct span namespace_of(const char *name)
{
    const char *dot = strchr(name, '.');
    return (struct span){name, dot ? (size_t)(dot - name) : strlen(name)};
}

// The tools' namespaces in order of first appearance (borrowed spans; the
// caller frees the array).
static struct span *namespaces(json_t *tools, size_t *n)
{
    struct span *ns = xcalloc(json_array_size(tools) + 1, sizeof(*ns));
    *n = 0;
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        struct span s = namespace_of(rnd_str(json_object_get(tool, "function"), "name"));
        bool seen = false;
        for (size_t k = 0; k < *n && !seen; k++)
            seen = ns[k].n == s.n && memcmp(ns[k].s, s.s, s.n) == 0;
        if (!seen)
            ns[(*n)++] = s;
    }
    return ns;
}

// A JSON string as Transformers' tojson writes it (no HTML escaping).
static void json_string_out(struct buf *out, const char *s, size_t n)
{
    jsonx_dump_string(s, n, JSONX_NO_HTML_ESCAPE, out);
}

static void write_tool_definitions(struct buf *out, json_t *tools)
{
    buf_append_str(out, G_TOOLS_INTRO);
    size_t n_ns;
    struct span *ns = namespaces(tools, &n_ns);
    for (size_t k = 0; k < n_ns; k++) {
        buf_append_str(out, "{\"name\": ");
        json_string_out(out, ns[k].s, ns[k].n);
        buf_append_str(out, ", \"description\": \"\"}\n");
    }
    free(ns);
    buf_append_str(out, "// Function schemas");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        json_t *fn = json_object_get(tool, "function");
        buf_append_str(out, "\n{\"name\": ");
        json_string_out(out, rnd_str(fn, "name"), strlen(rnd_str(fn, "name")));
        buf_append_str(out, ", \"description\": ");
        json_string_out(out, rnd_str(fn, "description"), strlen(rnd_str(fn, "description")));
        buf_append_str(out, ", \"parameters\": ");
        // api.ToolFunctionParameters in its Go field order.
        json_t *gt = rnd_go_tool(tool);
        rnd_go_json_spaced_unescaped(out, rnd_tool_fn(gt, "parameters"), false);
        json_decref(gt);
        buf_append_char(out, '}');
    }
    buf_append_str(out, G_TOOLS_EXAMPLE);
}

// A system message's text with "reasoning effort" (in its four casings)
// renamed to "reasoning strength".
static void normalize_reasoning(struct buf *out, const char *s)
{
    static const char *const from_to[][2] = {
        {"Reasoning effort", "Reasoning strength"},
        {"Reasoning Effort", "Reasoning Strength"},
        {"reasoning effort", "reasoning strength"},
        {"REASONING EFFORT", "REASONING STRENGTH"},
    };
    size_t len = strlen(from_to[0][0]);
    while (*s) {
        size_t k = 0;
        while (k < 4 && strncmp(s, from_to[k][0], len) != 0)
            k++;
        if (k < 4) {
            buf_append_str(out, from_to[k][1]);
            s += len;
        } else {
            buf_append_char(out, *s++);
        }
    }
}

// Whether s mentions "reasoning strength" in any ASCII casing.
static bool mentions_strength(const char *s)
{
    static const char needle[] = "reasoning strength";
    size_t n = strlen(s), l = sizeof(needle) - 1;
    for (size_t i = 0; i + l <= n; i++)
        if (strncasecmp(s + i, needle, l) == 0)
            return true;
    return false;
}

// One system message: the given one (default false) or the built-in one with
// the knowledge cutoff and today's date.
static void write_system(struct buf *out, const char *content, json_t *tools, const char *strength,
                         bool is_default)
{
    struct buf text;
    buf_init(&text, 0);
    if (is_default) {
        char date[32] = "";
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm))
            strftime(date, sizeof(date), "%Y-%m-%d", &tm);
        buf_printf(&text, "%s\nKnowledge cutoff: " G_KNOWLEDGE_CUTOFF ".\nCurrent date: %s.",
                   content, date);
    } else {
        normalize_reasoning(&text, content);
    }
    buf_append_str(out, G_START "system" G_MESSAGE);
    buf_append(out, text.data ? text.data : "", text.len);
    if (is_default || !mentions_strength(buf_cstr(&text)))
        buf_printf(out, "\n\nReasoning strength: %s.", strength);
    buf_deinit(&text);
    if (json_array_size(tools) > 0) {
        buf_append_str(out, "\n\n");
        write_tool_definitions(out, tools);
    }
    buf_append_str(out, "\n\n# Valid recipients: \"self\"");
    size_t n_ns;
    struct span *ns = namespaces(tools, &n_ns);
    for (size_t k = 0; k < n_ns; k++) {
        buf_append_str(out, ", \"");
        buf_append(out, ns[k].s, ns[k].n);
        buf_append_str(out, ".*\"");
    }
    free(ns);
    buf_append_str(out, ", \"user\"." G_EOT);
}

// The name a tool result is shown under: its tool_name, else the name of the
// call its tool_call_id answers (the last such call), else that id.
static const char *result_name(json_t *m, json_t *msgs)
{
    if (*rnd_str(m, "tool_name"))
        return rnd_str(m, "tool_name");
    const char *id = rnd_str(m, "tool_call_id");
    const char *name = id;
    if (!*id)
        return name;
    size_t i, k;
    json_t *other, *call;
    json_array_foreach(msgs, i, other)
    {
        json_array_foreach(json_object_get(other, "tool_calls"), k, call)
        {
            if (strcmp(rnd_str(call, "id"), id) == 0)
                name = rnd_str(rnd_call_fn(call), "name");
        }
    }
    return name;
}

// One call as an ATEM block: null as "null", arrays and objects as JSON,
// anything else as fmt's %v.
static void write_atem(struct buf *out, json_t *call)
{
    json_t *fn = rnd_call_fn(call);
    buf_printf(out, G_CALLS_OPEN "\n" G_INVOKE_OPEN "%s\">\n", rnd_str(fn, "name"));
    json_t *args = json_object_get(fn, "arguments");
    const char *k;
    json_t *v;
    if (json_is_object(args)) {
        json_object_foreach(args, k, v)
        {
            buf_printf(out, G_PARAM_OPEN "%s\">", k);
            if (json_is_null(v))
                buf_append_str(out, "null");
            else if (json_is_array(v) || json_is_object(v))
                rnd_go_json_spaced_unescaped(out, v, true);
            else
                rnd_go_value(out, v);
            buf_append_str(out, G_PARAM_CLOSE "\n");
        }
    }
    buf_append_str(out, G_INVOKE_END "\n" G_CALLS_CLOSE);
}

int rnd_render_glimmer(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                       struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    const char *strength = strength_of(think);
    size_t n = json_array_size(msgs);
    bool has_system = false;
    for (size_t i = 0; i < n && !has_system; i++)
        has_system = strcmp(rnd_str(json_array_get(msgs, i), "role"), "system") == 0;

    buf_append_str(out, G_BOS);
    if (!has_system)
        write_system(out, G_DEFAULT_SYSTEM, tools, strength, true);

    size_t img = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = rnd_str(m, "role");
        struct buf c;
        buf_init(&c, 0);
        img = rnd_image_tags(&c, rnd_str(m, "content"),
                             json_array_size(json_object_get(m, "images")), img);
        const char *content = buf_cstr(&c);
        // A message followed by another of the same role ends with <|eom|>.
        bool same_next =
            i + 1 < n && strcmp(rnd_str(json_array_get(msgs, i + 1), "role"), role) == 0;
        const char *end = same_next ? G_EOM : G_EOT;

        if (strcmp(role, "system") == 0) {
            write_system(out, content, tools, strength, false);
        } else if (strcmp(role, "user") == 0) {
            buf_printf(out, G_START "user" G_MESSAGE "%s" G_EOT, content);
        } else if (strcmp(role, "tool") == 0) {
            const char *name = result_name(m, msgs);
            buf_printf(out,
                       G_START "tool %s" G_MESSAGE
                               "<tool_output name=\"%s\">\n%s\n</tool_output>" G_EOT,
                       name, name, content);
        } else if (strcmp(role, "assistant") == 0) {
            const char *thinking = rnd_str(m, "thinking");
            if (*thinking)
                buf_printf(out, G_START "assistant to=self" G_MESSAGE "%s" G_EOM, thinking);
            // A final message with only thinking stays an unfinished
            // reasoning segment.
            json_t *calls = json_object_get(m, "tool_calls");
            size_t n_calls = json_array_size(calls);
            if (n_calls > 0) {
                for (size_t k = 0; k < n_calls; k++) {
                    json_t *call = json_array_get(calls, k);
                    buf_printf(out, G_START "assistant to=%s" G_MESSAGE,
                               rnd_str(rnd_call_fn(call), "name"));
                    write_atem(out, call);
                    buf_append_str(out, k + 1 == n_calls ? end : G_EOM);
                }
            } else if (*content || !*thinking) {
                buf_printf(out, G_START "assistant to=user" G_MESSAGE "%s" G_EOT, content);
            }
        }
        buf_deinit(&c);
    }
    buf_append_str(out, G_ASSISTANT);
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { GP_HEADER, GP_CONTENT, GP_THINKING, GP_TOOL };

struct glimmer {
    struct buf recipient;  // of the current message
    bool emit_thinking;
    // Some of the current message already went out as content: it can no
    // longer turn out to be a call.
    bool content_streamed;
};

int rnd_glimmer_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                     int variant, struct err *e)
{
    (void)last;
    (void)variant;
    (void)e;
    struct glimmer *g = xcalloc(1, sizeof(*g));
    buf_init(&g->recipient, 0);
    g->emit_thinking = !think || !think->set || think->on;
    p->impl = g;
    p->state = GP_HEADER;
    return 0;
}

void rnd_glimmer_deinit(struct renderer_parser *p)
{
    struct glimmer *g = p->impl;
    if (g)
        buf_deinit(&g->recipient);
    free(g);
    p->impl = NULL;
}

// The declared tool of that name (names compared trimmed; a later
// declaration wins), or NULL.
static json_t *tool_named(json_t *tools, struct span name)
{
    json_t *found = NULL;
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        struct span tn = trim(span_of(rnd_str(json_object_get(tool, "function"), "name")));
        if (tn.n && tn.n == name.n && memcmp(tn.s, name.s, tn.n) == 0)
            found = tool;
    }
    return found;
}

static bool have_tools(json_t *tools)
{
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        if (trim(span_of(rnd_str(json_object_get(tool, "function"), "name"))).n)
            return true;
    }
    return false;
}

// The declared tool a recipient or invoke name means: the tool itself, or
// "ns.fn" for a declared fn whose own namespace is ns (the template offers
// "<ns>.*" recipients, so "read.read" reaches "read"). *resolved is the
// declared name's span inside name.
static json_t *resolve(json_t *tools, struct span name, struct span *resolved)
{
    json_t *tool = tool_named(tools, name);
    if (tool) {
        *resolved = name;
        return tool;
    }
    const char *dot = memchr(name.s, '.', name.n);
    if (!dot)
        return NULL;
    struct span ns = {name.s, (size_t)(dot - name.s)}, fn = from(name, ns.n + 1);
    tool = tool_named(tools, fn);
    if (!tool)
        return NULL;
    const char *fn_dot = memchr(fn.s, '.', fn.n);
    size_t fn_ns = fn_dot ? (size_t)(fn_dot - fn.s) : fn.n;
    if (fn_ns != ns.n || memcmp(fn.s, ns.s, ns.n) != 0)
        return NULL;
    *resolved = fn;
    return tool;
}

static struct span acc_span(struct renderer_parser *p)
{
    return (struct span){p->acc.data ? p->acc.data : "", p->acc.len};
}

static void set_state_for_recipient(struct renderer_parser *p, struct glimmer *g)
{
    struct span r = {g->recipient.data ? g->recipient.data : "", g->recipient.len}, res;
    if (span_eq(r, "self"))
        p->state = GP_THINKING;
    else if (resolve(p->tools, r, &res))
        p->state = GP_TOOL;
    else
        p->state = GP_CONTENT;
}

// Reads a message header (the prompt already wrote "<|start|>assistant"
// for the first one). Returns progress; text with no header at the end of
// the output is content.
static bool step_header(struct renderer_parser *p, struct glimmer *g, bool done,
                        struct buf *content)
{
    struct span a = acc_span(p);
    if (has_prefix(a, G_ASSISTANT)) {
        rnd_buf_consume(&p->acc, strlen(G_ASSISTANT));
        a = acc_span(p);
    } else if (prefix_of(a, G_ASSISTANT) && has_prefix(a, "<") && !done) {
        return false;
    }
    long idx = find(a, G_MESSAGE);
    if (idx < 0) {
        if (!done)
            return false;
        buf_append(content, a.s, a.n);
        buf_reset(&p->acc);
        return a.n > 0;
    }
    struct span header = trim((struct span){a.s, (size_t)idx});
    if (has_prefix(header, "to="))
        header = from(header, 3);
    header = trim(header);
    buf_reset(&g->recipient);
    buf_append(&g->recipient, header.s, header.n);
    rnd_buf_consume(&p->acc, (size_t)idx + strlen(G_MESSAGE));
    set_state_for_recipient(p, g);
    return true;
}

enum { HDR_INVALID, HDR_PENDING, HDR_VALID };

// Whether s starts a new assistant message header: valid (a known
// recipient and <|message|>), pending (the rest may still make one) or not.
static int header_status(json_t *tools, struct span s, bool done)
{
    if (s.n < strlen(G_ASSISTANT))
        return !done && prefix_of(s, G_ASSISTANT) ? HDR_PENDING : HDR_INVALID;
    if (!has_prefix(s, G_ASSISTANT))
        return HDR_INVALID;
    struct span rest = from(s, strlen(G_ASSISTANT));
    if (has_prefix(rest, G_MESSAGE))
        return HDR_VALID;
    if (!done && prefix_of(rest, G_MESSAGE))
        return HDR_PENDING;
    if (rest.n == 0)
        return HDR_INVALID;  // done
    if (rest.n < 4)
        return !done && prefix_of(rest, " to=") ? HDR_PENDING : HDR_INVALID;
    if (!has_prefix(rest, " to="))
        return HDR_INVALID;
    struct span r = from(rest, 4);
    long mi = find(r, G_MESSAGE);
    if (mi >= 0) {
        struct span name = {r.s, (size_t)mi};
        bool ok = span_eq(name, "self") || span_eq(name, "user") || tool_named(tools, name);
        return ok ? HDR_VALID : HDR_INVALID;
    }
    if (done)
        return HDR_INVALID;
    if (r.n == 0)
        return HDR_PENDING;
    for (size_t i = 0; i < r.n; i++)
        if (memchr(" \t\r\n", r.s[i], 4))
            return HDR_INVALID;
    const char *lt = memchr(r.s, '<', r.n);
    if (lt)
        return prefix_of(from(r, (size_t)(lt - r.s)), G_MESSAGE) ? HDR_PENDING : HDR_INVALID;
    return HDR_PENDING;
}

// Where, from offset search, a following assistant header starts (-1:
// none); *wait when it may still be one.
static long implicit_header(json_t *tools, struct span s, size_t search, bool done, bool *wait)
{
    *wait = false;
    for (long i; (i = find(from(s, search), G_START)) >= 0;) {
        size_t at = search + (size_t)i;
        int st = header_status(tools, from(s, at), done);
        if (st == HDR_VALID)
            return (long)at;
        if (st == HDR_PENDING) {
            *wait = true;
            return (long)at;
        }
        search = at + strlen(G_START);
    }
    if (done)
        return -1;
    size_t keep = rnd_overlap(s.s + search, s.n - search, G_ASSISTANT);
    if (keep > 0) {
        *wait = true;
        return (long)(s.n - keep);
    }
    return -1;
}

// Content that may be a call with a fumbled recipient (it opens with the
// ATEM wrapper) is held until its message ends.
static bool hold_content(struct renderer_parser *p, struct glimmer *g, struct span a)
{
    if (p->state != GP_CONTENT || g->content_streamed || !have_tools(p->tools))
        return false;
    while (a.n && memchr(" \t\r\n", a.s[0], 4))
        a = from(a, 1);
    return prefix_of(a, G_CALLS_OPEN) || has_prefix(a, G_CALLS_OPEN);
}

// How much of the buffer is the current message's body: len bytes of body,
// then skip bytes of end marker; complete when the message ended.
struct body_cut {
    bool progress, complete;
    size_t len, skip;
};

static struct body_cut cut_body(struct renderer_parser *p, struct glimmer *g, bool done)
{
    struct span a = acc_span(p);
    struct body_cut c = {0};
    bool hold = p->state == GP_TOOL || hold_content(p, g, a);
    // A held ATEM block may quote end markers in its values: look for them
    // only after its closing tag.
    size_t control = 0;
    if (hold) {
        long close = find(a, G_CALLS_CLOSE);
        control = close >= 0 ? (size_t)close + strlen(G_CALLS_CLOSE) : a.n;
    }
    long idx = -1;
    size_t marker = 0;
    static const char *const ends[] = {G_EOM, G_EOT};
    for (size_t k = 0; k < 2; k++) {
        long i = find(from(a, control), ends[k]);
        if (i >= 0 && (idx < 0 || (size_t)i + control < (size_t)idx)) {
            idx = i + (long)control;
            marker = strlen(ends[k]);
        }
    }
    bool wait;
    long implicit = implicit_header(p->tools, a, control, done, &wait);
    if (implicit >= 0 && !wait && (idx < 0 || implicit < idx))
        return (struct body_cut){true, true, (size_t)implicit, 0};
    if (idx >= 0)
        return (struct body_cut){true, true, (size_t)idx, marker};
    if (done)
        return (struct body_cut){a.n > 0 || p->state == GP_TOOL, true, a.n, 0};
    if (hold)
        return c;
    if (wait)
        return (struct body_cut){implicit > 0, false, (size_t)implicit, 0};
    size_t keep = rnd_overlap(a.s, a.n, G_EOM), k2 = rnd_overlap(a.s, a.n, G_EOT);
    keep = k2 > keep ? k2 : keep;
    if (keep == a.n)
        return c;
    return (struct body_cut){true, false, a.n - keep, 0};
}

// The invoke name up to its `">`, dropping <|message|> tokens the model
// slips into it (one in place of the `">` ends the name when a parameter
// follows). Returns false when the name has no end; *rest is what follows.
static bool cut_invoke_name(struct span s, struct buf *name, struct span *rest)
{
    for (;;) {
        long term = find(s, "\">"), tag = find(s, G_MESSAGE);
        if (tag >= 0 && (term < 0 || tag < term)) {
            buf_append(name, s.s, (size_t)tag);
            s = from(s, (size_t)tag + strlen(G_MESSAGE));
            if (has_prefix(s, G_PARAM_OPEN))
                break;
            continue;
        }
        if (term < 0)
            return false;
        buf_append(name, s.s, (size_t)term);
        s = from(s, (size_t)term + 2);
        break;
    }
    *rest = s;
    return true;
}

// Decodes an ATEM block: the invoke name into name, the parameters (typed
// by tool's schema) into *args (new reference).
static int parse_atem(struct span body, json_t *tool, struct buf *name, json_t **args,
                      struct err *e)
{
    body = trim(body);
    if (!has_prefix(body, G_CALLS_OPEN) || !has_suffix(body, G_CALLS_CLOSE) ||
        body.n < strlen(G_CALLS_OPEN) + strlen(G_CALLS_CLOSE))
        return err_set(e, ERR_INVALID, "missing ATEM function_calls wrapper");
    struct span inv = trim((struct span){body.s + strlen(G_CALLS_OPEN),
                                         body.n - strlen(G_CALLS_OPEN) - strlen(G_CALLS_CLOSE)});
    if (!has_prefix(inv, G_INVOKE_OPEN) || !has_suffix(inv, G_INVOKE_END))
        return err_set(e, ERR_INVALID, "missing ATEM invoke wrapper");
    struct span rest;
    if (!cut_invoke_name(from(inv, strlen(G_INVOKE_OPEN)), name, &rest) ||
        rest.n < strlen(G_INVOKE_END))
        return err_set(e, ERR_INVALID, "malformed ATEM invoke name");
    struct span params = {rest.s, rest.n - strlen(G_INVOKE_END)};
    if (params.n && params.s[0] == '\n')
        params = from(params, 1);
    if (params.n && params.s[params.n - 1] == '\n')
        params.n--;

    json_t *out = json_object();
    int rc = 0;
    while (params.n && rc == 0) {
        if (!has_prefix(params, G_PARAM_OPEN)) {
            rc = err_set(e, ERR_INVALID, "malformed ATEM parameter");
            break;
        }
        params = from(params, strlen(G_PARAM_OPEN));
        long name_end = find(params, "\">");
        if (name_end < 0) {
            rc = err_set(e, ERR_INVALID, "malformed ATEM parameter name");
            break;
        }
        char *pname = xstrndup(params.s, (size_t)name_end);
        params = from(params, (size_t)name_end + 2);
        long value_end = find(params, G_PARAM_CLOSE);
        if (value_end < 0) {
            rc = err_set(e, ERR_INVALID, "unterminated ATEM parameter \"%s\"", pname);
            free(pname);
            break;
        }
        char *value = xstrndup(params.s, (size_t)value_end);
        params = from(params, (size_t)value_end + strlen(G_PARAM_CLOSE));
        if (params.n && params.s[0] == '\n')
            params = from(params, 1);
        const char *types[32];
        size_t n_types = 0;
        rnd_tool_param_types(tool, pname, types, &n_types, 32);
        json_object_set_new(out, pname, rnd_typed_value(value, types, n_types));
        free(pname);
        free(value);
    }
    if (rc < 0) {
        json_decref(out);
        return rc;
    }
    *args = out;
    return 0;
}

// A call addressed to its tool: the invoke must name the same tool.
static int parse_call(struct renderer_parser *p, struct glimmer *g, struct span body, json_t *calls,
                      struct err *e)
{
    struct span r = {g->recipient.data ? g->recipient.data : "", g->recipient.len}, target;
    if (r.n == 0)
        return err_set(e, ERR_INVALID, "empty Glimmer function name");
    json_t *tool = resolve(p->tools, r, &target);
    if (!tool)
        return err_set(e, ERR_INVALID, "undeclared Glimmer function \"%.*s\"", (int)r.n, r.s);
    struct buf name;
    buf_init(&name, 0);
    json_t *args = NULL;
    struct err pe = {0};
    int rc = parse_atem(body, tool, &name, &args, &pe);
    if (rc < 0) {
        rc = err_set(e, ERR_INVALID, "parse Glimmer call to %.*s: %s", (int)r.n, r.s, pe.msg);
    } else {
        struct span invoked;
        json_t *it = resolve(p->tools, (struct span){buf_cstr(&name), name.len}, &invoked);
        if (!it || invoked.n != target.n || memcmp(invoked.s, target.s, target.n) != 0) {
            rc = err_set(e, ERR_INVALID,
                         "Glimmer recipient \"%.*s\" does not match ATEM invoke \"%s\"", (int)r.n,
                         r.s, buf_cstr(&name));
        } else {
            char *tn = xstrndup(target.s, target.n);
            rnd_call_append(p, calls, tn, args);
            free(tn);
            args = NULL;
        }
    }
    json_decref(args);
    buf_deinit(&name);
    return rc;
}

// A whole content message that is only an ATEM block for a declared tool
// (the recipient was fumbled) becomes that call, named by its invoke.
static bool content_call(struct renderer_parser *p, struct glimmer *g, struct span body,
                         json_t *calls)
{
    if (g->content_streamed || !have_tools(p->tools))
        return false;
    struct span t = trim(body);
    size_t lo = strlen(G_CALLS_OPEN), lc = strlen(G_CALLS_CLOSE);
    if (!has_prefix(t, G_CALLS_OPEN) || !has_suffix(t, G_CALLS_CLOSE) || t.n < lo + lc)
        return false;
    struct span inner = trim((struct span){t.s + lo, t.n - lo - lc}), rest, target;
    if (!has_prefix(inner, G_INVOKE_OPEN))
        return false;
    struct buf name;
    buf_init(&name, 0);
    bool ok = cut_invoke_name(from(inner, strlen(G_INVOKE_OPEN)), &name, &rest);
    json_t *tool = ok ? resolve(p->tools, (struct span){buf_cstr(&name), name.len}, &target) : NULL;
    json_t *args = NULL;
    struct buf ignored;
    buf_init(&ignored, 0);
    ok = tool && parse_atem(t, tool, &ignored, &args, NULL) == 0;
    if (ok) {
        char *tn = xstrndup(target.s, target.n);
        rnd_call_append(p, calls, tn, args);
        free(tn);
    }
    buf_deinit(&ignored);
    buf_deinit(&name);
    return ok;
}

int rnd_glimmer_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    struct glimmer *g = p->impl;
    for (;;) {
        if (p->state == GP_HEADER) {
            if (!step_header(p, g, done, o->content))
                return 0;
            continue;
        }
        struct body_cut c = cut_body(p, g, done);
        struct span body = {acc_span(p).s, c.len};
        int rc = 0;
        if (p->state == GP_CONTENT) {
            if (!(c.complete && content_call(p, g, body, o->calls)) && body.n) {
                buf_append(o->content, body.s, body.n);
                g->content_streamed = true;
            }
        } else if (p->state == GP_THINKING) {
            if (g->emit_thinking)
                buf_append(o->thinking, body.s, body.n);
        } else if (c.complete) {
            rc = parse_call(p, g, body, o->calls, e);
        }
        rnd_buf_consume(&p->acc, c.len + c.skip);
        if (rc < 0)
            return rc;
        if (c.complete) {
            p->state = GP_HEADER;
            buf_reset(&g->recipient);
            g->content_streamed = false;
        }
        if (!c.progress)
            return 0;
    }
}

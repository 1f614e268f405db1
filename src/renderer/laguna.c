// laguna and poolside-v1 (Ollama's model/renderers/laguna.go,
// model/parsers/laguna.go): Poolside's Laguna chat format. Turns are
// <system>, <user>, <assistant> and <tool_response> elements after a
// leading 〈|EOS|〉; the generation prompt primes the reasoning mode with
// <think> (thinking on) or </think> (off). Calls are XML-like:
//
//   <tool_call>get_weather
//   <arg_key>city</arg_key>
//   <arg_value>Paris</arg_value>
//   </tool_call>
//
// "laguna" is the v2 template (one element per line, a final assistant
// message is continued in place); "poolside-v1" is the v8 template (compact
// elements, every assistant turn closed, always a fresh generation prompt).
// The parser also accepts the shapes the model is seen to drift into: a JSON
// call ({"name":…,"arguments":…}) inside or outside <tool_call>, a call
// wrapped in <user>…</user>, and a few common aliases of tool names.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LG_BOS         "\xe3\x80\x88|EOS|\xe3\x80\x89"  // 〈|EOS|〉
#define LG_THINK_OPEN  "<think>"
#define LG_THINK_CLOSE "</think>"
#define LG_CALL_OPEN   "<tool_call>"
#define LG_CALL_CLOSE  "</tool_call>"
#define LG_USER_OPEN   "<user>"
#define LG_USER_CLOSE  "</user>"
#define LG_KEY_OPEN    "<arg_key>"
#define LG_KEY_CLOSE   "</arg_key>"
#define LG_VALUE_OPEN  "<arg_value>"
#define LG_VALUE_CLOSE "</arg_value>"

#define LG_DEFAULT_SYSTEM                                                                          \
    "You are a helpful, conversationally-fluent assistant made by Poolside. You are here to be "   \
    "helpful to users through natural language conversations."

enum { LAGUNA_V2 = 0, LAGUNA_V8 = 1 };

// A borrowed piece of text.
struct span {
    const char *s;
    size_t n;
};

static struct span span_of(const char *s)
{
    return (struct span){s, strlen(s)};
}

static struct span trim_left(struct span t)
{
    size_t k = rnd_leading_ws(t.s, t.n);
    return (struct span){t.s + k, t.n - k};
}

static struct span trim_right(struct span t)
{
    return (struct span){t.s, t.n - rnd_trailing_ws(t.s, t.n)};
}

static struct span trim(struct span t)
{
    return trim_right(trim_left(t));
}

static bool has_prefix(struct span t, const char *lit)
{
    size_t l = strlen(lit);
    return t.n >= l && memcmp(t.s, lit, l) == 0;
}

// t is a (possibly empty) prefix of lit.
static bool prefix_of(struct span t, const char *lit)
{
    return t.n <= strlen(lit) && memcmp(t.s, lit, t.n) == 0;
}

// Offset of lit in t, or -1.
static long find(struct span t, const char *lit)
{
    const char *at = rnd_find(t.s, t.n, lit);
    return at ? (long)(at - t.s) : -1;
}

static struct span from(struct span t, size_t k)
{
    return (struct span){t.s + k, t.n - k};
}

static struct span upto(struct span t, size_t k)
{
    return (struct span){t.s, k};
}

static bool span_eq(struct span t, const char *lit)
{
    return t.n == strlen(lit) && memcmp(t.s, lit, t.n) == 0;
}

// ---------------------------------------------------------------------------
// Renderers

static bool thinking_on(const struct renderer_think *think)
{
    return think && think->set && think->on;
}

// An argument value as the template writes it: strings as they are, anything
// else as Go JSON with a space after ':' and ','.
static void write_arg(struct buf *out, const json_t *v)
{
    if (json_is_string(v))
        buf_append(out, json_string_value(v), json_string_length(v));
    else
        rnd_go_json_spaced(out, v);
}

static void write_tool_list(struct buf *out, json_t *tools)
{
    buf_append_str(out, "### Tools\n\n"
                        "You may call functions to assist with the user query.\n"
                        "All available function signatures are listed below:\n"
                        "<available_tools>\n");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        rnd_go_tool_json(out, tool, true);
        buf_append_char(out, '\n');
    }
    buf_append_str(out, "</available_tools>");
}

// One call; sep goes after the name and after each element (v2: "\n",
// v8: "").
static void write_call(struct buf *out, json_t *call, const char *sep)
{
    json_t *fn = rnd_call_fn(call);
    buf_printf(out, LG_CALL_OPEN "%s%s", rnd_str(fn, "name"), sep);
    json_t *args = json_object_get(fn, "arguments");
    const char *k;
    json_t *v;
    if (json_is_object(args)) {
        json_object_foreach(args, k, v)
        {
            buf_printf(out, LG_KEY_OPEN "%s" LG_KEY_CLOSE "%s" LG_VALUE_OPEN, k, sep);
            write_arg(out, v);
            buf_printf(out, LG_VALUE_CLOSE "%s", sep);
        }
    }
    buf_printf(out, LG_CALL_CLOSE "%s", sep);
}

static void append_span(struct buf *out, struct span t)
{
    buf_append(out, t.s, t.n);
}

// The v2 template reads reasoning out of content that carries </think>: the
// text after the last </think> is the answer, and (when the message has no
// thinking field) the text before the first one, after its last <think>, is
// the reasoning.
static void split_reasoning(struct span content, struct span thinking, struct span *answer,
                            struct span *reasoning)
{
    *answer = content;
    *reasoning = thinking;
    long first = find(content, LG_THINK_CLOSE);
    if (first < 0)
        return;
    if (thinking.n == 0) {
        struct span before = upto(content, (size_t)first);
        while (before.n && before.s[before.n - 1] == '\n')
            before.n--;
        const char *last_open = NULL;
        for (const char *q = before.s;
             (q = rnd_find(q, (size_t)(before.s + before.n - q), LG_THINK_OPEN)); q++)
            last_open = q;
        if (last_open)
            before = from(before, (size_t)(last_open - before.s) + strlen(LG_THINK_OPEN));
        while (before.n && before.s[0] == '\n')
            before = from(before, 1);
        *reasoning = before;
    }
    const char *last_close = NULL;
    for (const char *q = content.s;
         (q = rnd_find(q, (size_t)(content.s + content.n - q), LG_THINK_CLOSE)); q++)
        last_close = q;
    struct span after = from(content, (size_t)(last_close - content.s) + strlen(LG_THINK_CLOSE));
    while (after.n && after.s[0] == '\n')
        after = from(after, 1);
    *answer = after;
}

static void render_v2_assistant(struct buf *out, json_t *m, bool last)
{
    struct span answer, reasoning;
    split_reasoning(span_of(rnd_str(m, "content")), span_of(rnd_str(m, "thinking")), &answer,
                    &reasoning);
    json_t *calls = json_object_get(m, "tool_calls");
    struct span a = trim(answer), r = trim(reasoning);
    bool prefill = last && (a.n || r.n || json_array_size(calls) > 0);
    buf_append_str(out, "<assistant>\n");
    if (r.n) {
        buf_append_str(out, LG_THINK_OPEN "\n");
        append_span(out, r);
        buf_append_str(out, "\n" LG_THINK_CLOSE "\n");
    } else {
        buf_append_str(out, LG_THINK_CLOSE "\n");
    }
    if (a.n) {
        append_span(out, a);
        buf_append_char(out, '\n');
    }
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call)
    {
        write_call(out, call, "\n");
    }
    if (!prefill)
        buf_append_str(out, "</assistant>\n");
}

static void render_v8_assistant(struct buf *out, json_t *m, bool think)
{
    buf_append_str(out, "<assistant>");
    if (think)
        buf_printf(out, LG_THINK_OPEN "%s" LG_THINK_CLOSE, rnd_str(m, "thinking"));
    else
        buf_append_str(out, LG_THINK_CLOSE);
    buf_append_str(out, rnd_str(m, "content"));
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call)
    {
        write_call(out, call, "");
    }
    buf_append_str(out, "</assistant>\n");
}

int rnd_render_laguna(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e)
{
    (void)e;
    bool v8 = variant == LAGUNA_V8;
    const char *nl = v8 ? "" : "\n";  // v2 puts each element on its own lines
    bool think_on = thinking_on(think);
    bool has_tools = json_array_size(tools) > 0;
    size_t n = json_array_size(msgs);
    json_t *first = json_array_get(msgs, 0);
    bool first_system = n > 0 && strcmp(rnd_str(first, "role"), "system") == 0;
    struct span sys =
        trim_right(span_of(first_system ? rnd_str(first, "content") : LG_DEFAULT_SYSTEM));

    buf_append_str(out, LG_BOS);
    if (v8 && (sys.n || has_tools || think_on)) {
        buf_append_str(out, "<system>");
        append_span(out, sys);
        if (sys.n && has_tools)
            buf_append_str(out, "\n\n");
        if (has_tools)
            write_tool_list(out, tools);
        buf_append_str(out, "</system>\n");
    } else if (!v8 && (sys.n || has_tools)) {
        buf_append_str(out, "<system>\n");
        if (sys.n) {
            buf_append_char(out, '\n');
            append_span(out, sys);
        }
        if (has_tools) {
            buf_append_str(out, "\n\n");
            write_tool_list(out, tools);
            buf_append_str(out, "\n\n");
            if (think_on)
                buf_append_str(out, "Wrap your thinking in '<think>', '</think>' tags, followed "
                                    "by a function call. ");
            buf_append_str(out, "For each function call, return an unescaped XML-like object "
                                "with function name and arguments within '<tool_call>' and "
                                "'</tool_call>' tags, like here:\n");
            if (think_on)
                buf_append_str(out, "<think> your thoughts here </think>\n");
            buf_append_str(out, "<tool_call>function-name\n<arg_key>argument-key</arg_key>\n"
                                "<arg_value>value-of-argument-key</arg_value>\n</tool_call>");
        }
        buf_append_str(out, "\n</system>\n");
    }

    for (size_t i = first_system ? 1 : 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = rnd_str(m, "role");
        const char *content = rnd_str(m, "content");
        if (strcmp(role, "user") == 0)
            buf_printf(out, "<user>%s%s%s</user>\n", nl, content, nl);
        else if (strcmp(role, "tool") == 0)
            buf_printf(out, "<tool_response>%s%s%s</tool_response>\n", nl, content, nl);
        else if (strcmp(role, "system") == 0)
            buf_printf(out, "<system>%s%s%s</system>\n", nl, content, nl);
        else if (strcmp(role, "assistant") == 0 && v8)
            render_v8_assistant(out, m, think_on);
        else if (strcmp(role, "assistant") == 0)
            render_v2_assistant(out, m, i == n - 1);
    }

    // v2 continues a final assistant message in place; v8 always opens a
    // fresh turn.
    if (v8 || n == 0 || strcmp(rnd_str(json_array_get(msgs, n - 1), "role"), "assistant") != 0)
        buf_printf(out, "<assistant>%s%s", nl, think_on ? LG_THINK_OPEN : LG_THINK_CLOSE);
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { LG_THINKING, LG_CONTENT, LG_TOOL };

struct laguna {
    bool thinking;       // think on: reasoning is reported (else dropped)
    bool allow_open;     // the model may still echo the primed <think>
    bool content_start;  // leading white space of content is still dropped
};

int rnd_laguna_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e)
{
    (void)e;
    struct laguna *l = xcalloc(1, sizeof(*l));
    p->impl = l;
    l->thinking = thinking_on(think);
    l->content_start = true;
    // v2 continues an assistant prefill after its closed </think>: the output
    // resumes as content even with thinking on. v8 always opens a new turn.
    bool prefill = variant == LAGUNA_V2 && last && strcmp(rnd_str(last, "role"), "assistant") == 0;
    if (l->thinking && !prefill) {
        p->state = LG_THINKING;
        l->allow_open = true;
    } else {
        p->state = LG_CONTENT;
    }
    return 0;
}

void rnd_laguna_deinit(struct renderer_parser *p)
{
    free(p->impl);
    p->impl = NULL;
}

static struct span acc_span(struct renderer_parser *p)
{
    return (struct span){p->acc.data ? p->acc.data : "", p->acc.len};
}

// Keeps the suffix t (which lies inside p->acc) as the unresolved text.
static void keep_from(struct renderer_parser *p, struct span t)
{
    rnd_buf_consume(&p->acc, (size_t)(t.s - acc_span(p).s));
}

// The name of the declared tool called exactly name, or NULL.
static const char *declared(json_t *tools, struct span name)
{
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        const char *tn = rnd_str(json_object_get(tool, "function"), "name");
        if (span_eq(name, tn))
            return tn;
    }
    return NULL;
}

// The tool a name denotes: itself when declared, else a declared tool it is
// a common alias of. Returns the name to report (static or borrowed from the
// tools) or NULL when neither is declared.
static const char *resolve_name(json_t *tools, struct span name)
{
    static const char *const aliases[][2] = {
        {"read_file", "read"},
        {"write_file", "write"},
        {"edit_file", "edit"},
        {"web_fetch", "webfetch"},
    };
    const char *tn = declared(tools, name);
    if (tn)
        return tn;
    for (size_t a = 0; a < sizeof(aliases) / sizeof(aliases[0]); a++)
        if (span_eq(name, aliases[a][0]) && declared(tools, span_of(aliases[a][1])))
            return aliases[a][1];
    return NULL;
}

// Strips the wrapping the model repeats around a call: leading <tool_call>
// tags, everything from </tool_call>, and a second nested <tool_call> (the
// text before it wins when there is any).
static struct span clean_raw(struct span raw)
{
    raw = trim(raw);
    while (has_prefix(raw, LG_CALL_OPEN))
        raw = trim(from(raw, strlen(LG_CALL_OPEN)));
    long idx = find(raw, LG_CALL_CLOSE);
    if (idx >= 0)
        raw = trim(upto(raw, (size_t)idx));
    idx = find(raw, LG_CALL_OPEN);
    if (idx >= 0) {
        struct span before = trim(upto(raw, (size_t)idx));
        if (before.n)
            return before;
        raw = trim(from(raw, (size_t)idx + strlen(LG_CALL_OPEN)));
    }
    return raw;
}

// The value of the object's key that Go's decoder would bind to a struct
// field of that name (case-insensitive; the last such key wins), or NULL.
static json_t *field(json_t *obj, const char *name)
{
    json_t *found = NULL, *v;
    const char *k;
    json_object_foreach(obj, k, v)
    {
        if (strcasecmp(k, name) == 0)
            found = v;
    }
    return found;
}

// Decodes a JSON object of arguments (null or absent: none). New reference
// in *out.
static int decode_args(json_t *v, json_t **out, const char *what, struct err *e)
{
    if (!v || json_is_null(v)) {
        *out = json_object();
        return 0;
    }
    if (!json_is_object(v))
        return err_set(e, ERR_INVALID,
                       "%s: json: cannot unmarshal %s into Go value of type "
                       "api.ToolCallFunctionArguments",
                       what, jsonx_type_name(v));
    *out = json_incref(v);
    return 0;
}

// {"name": …, "arguments": …}: name (a new string, "" when absent) and
// arguments (new reference).
static int decode_json_call(struct span raw, char **name, json_t **args, struct err *e)
{
    static const char what[] = "failed to parse Laguna JSON tool call";
    json_t *v = NULL;
    struct err je = {0};
    if (jsonx_parse(raw.s, raw.n, &v, &je) < 0)
        return err_set(e, ERR_INVALID, "%s: %s", what, je.msg);
    json_t *nm = field(v, "name");
    int rc = 0;
    if (nm && !json_is_string(nm) && !json_is_null(nm))
        rc = err_set(e, ERR_INVALID,
                     "%s: json: cannot unmarshal %s into Go struct field .name of type string",
                     what, jsonx_type_name(nm));
    if (rc == 0 && args)
        rc = decode_args(field(v, "arguments"), args, what, e);
    if (rc == 0)
        *name = xstrdup(json_is_string(nm) ? json_string_value(nm) : "");
    json_decref(v);
    return rc;
}

// The call's name as written (JSON "name", or the text before its
// arguments), trimmed; NULL when there is none.
static char *call_name(struct span raw)
{
    raw = clean_raw(raw);
    if (has_prefix(raw, "{")) {
        char *name = NULL;
        if (decode_json_call(raw, &name, NULL, NULL) < 0)
            return NULL;
        struct span t = trim(span_of(name));
        char *out = t.n ? xstrndup(t.s, t.n) : NULL;
        free(name);
        return out;
    }
    long end = find(raw, LG_KEY_OPEN);
    if (end < 0)
        end = find(raw, "{");
    if (end < 0) {
        const char *cr = memchr(raw.s, '\r', raw.n), *lf = memchr(raw.s, '\n', raw.n);
        const char *first = cr && (!lf || cr < lf) ? cr : lf;
        end = first ? (long)(first - raw.s) : (long)raw.n;
    }
    struct span t = trim(upto(raw, (size_t)end));
    return t.n ? xstrndup(t.s, t.n) : NULL;
}

// RE2's \s.
static bool re_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

// The next <arg_key>K</arg_key>\s*<arg_value>V</arg_value> in t from *pos
// (the regular expression's leftmost match: the shortest key that is
// followed by a value, then the shortest value).
static bool next_arg(struct span t, size_t *pos, struct span *key, struct span *value)
{
    size_t ko = strlen(LG_KEY_OPEN), kc = strlen(LG_KEY_CLOSE);
    size_t vo = strlen(LG_VALUE_OPEN), vc = strlen(LG_VALUE_CLOSE);
    for (long s; (s = find(from(t, *pos), LG_KEY_OPEN)) >= 0; (*pos)++) {
        *pos += (size_t)s;
        size_t kstart = *pos + ko;
        for (size_t q = kstart; q < t.n;) {
            long c = find(from(t, q), LG_KEY_CLOSE);
            if (c < 0)
                break;
            size_t kend = q + (size_t)c, w = kend + kc;
            while (w < t.n && re_space(t.s[w]))
                w++;
            if (has_prefix(from(t, w), LG_VALUE_OPEN)) {
                long ve = find(from(t, w + vo), LG_VALUE_CLOSE);
                if (ve < 0)
                    return false;  // no later key can close a value either
                *key = (struct span){t.s + kstart, kend - kstart};
                *value = (struct span){t.s + w + vo, (size_t)ve};
                *pos = w + vo + (size_t)ve + vc;
                return true;
            }
            q = kend + 1;
        }
    }
    return false;
}

// parseLagunaToolCall: a call from its raw text. Appends it to calls.
static int parse_call(struct renderer_parser *p, struct span raw, json_t *calls, struct err *e)
{
    raw = clean_raw(raw);
    char *name = NULL;
    json_t *args = NULL;
    int rc = 0;
    if (has_prefix(raw, "{")) {
        rc = decode_json_call(raw, &name, &args, e);
        if (rc == 0 && !*name)
            rc = err_set(e, ERR_INVALID, "empty Laguna tool call name");
        if (rc == 0) {
            const char *resolved = resolve_name(p->tools, span_of(name));
            rnd_call_append(p, calls, resolved ? resolved : name, args);
            args = NULL;
        }
        free(name);
        json_decref(args);
        return rc;
    }

    struct span nm = raw, args_text = {raw.s + raw.n, 0};
    long end = find(raw, LG_KEY_OPEN);
    if (end < 0)
        end = find(raw, "{");
    if (end >= 0) {
        nm = upto(raw, (size_t)end);
        args_text = from(raw, (size_t)end);
    }
    nm = trim(nm);
    const char *resolved = resolve_name(p->tools, nm);
    name = resolved ? xstrdup(resolved) : xstrndup(nm.s, nm.n);

    struct span at = trim(args_text);
    if (has_prefix(at, "{")) {
        static const char what[] = "failed to parse Laguna JSON tool call arguments";
        json_t *v = NULL;
        struct err je = {0};
        if (jsonx_parse(at.s, at.n, &v, &je) < 0)
            rc = err_set(e, ERR_INVALID, "%s: %s", what, je.msg);
        else
            rc = decode_args(v, &args, what, e);
        json_decref(v);
    } else {
        args = json_object();
        struct span key, value;
        for (size_t pos = 0; next_arg(args_text, &pos, &key, &value);) {
            key = trim(key);
            // One leading and one trailing newline belong to the layout.
            if (value.n && value.s[0] == '\n')
                value = from(value, 1);
            if (value.n && value.s[value.n - 1] == '\n')
                value.n--;
            char *k = xstrndup(key.s, key.n), *raw_value = xstrndup(value.s, value.n);
            const char *types[32];
            size_t n_types = 0;
            rnd_param_types(p->tools, name, k, types, &n_types, 32);
            json_object_set_new(args, k, rnd_typed_value(raw_value, types, n_types));
            free(k);
            free(raw_value);
        }
    }
    if (rc == 0) {
        rnd_call_append(p, calls, name, args);
        args = NULL;
    }
    json_decref(args);
    free(name);
    return rc;
}

// A call the model wrapped in <user>…</user>: only a declared tool (or an
// alias) that parses cleanly counts.
static bool parse_user_call(struct renderer_parser *p, struct span raw, json_t *calls)
{
    raw = clean_raw(raw);
    char *name = call_name(raw);
    bool ok = name && resolve_name(p->tools, span_of(name));
    free(name);
    if (!ok)
        return false;
    // A failed parse appends nothing: the text stays content.
    return parse_call(p, raw, calls, NULL) == 0;
}

// Whether JSON text at the start of raw may be a call.
static bool looks_like_json_call(struct span raw, bool done)
{
    raw = trim_left(raw);
    if (!has_prefix(raw, "{"))
        return false;
    if (find(raw, "\"name\"") >= 0 || find(raw, "\"arguments\"") >= 0)
        return true;
    if (done)
        return false;
    return has_prefix(raw, "{\"") || has_prefix(raw, "{\n") || has_prefix(raw, "{\r\n");
}

static bool valid_json(struct span t)
{
    json_t *v = NULL;
    bool ok = jsonx_parse(t.s, t.n, &v, NULL) == 0;
    json_decref(v);
    return ok;
}

// Results of one step: <0 error, 0 nothing more to do now, 1 progress.

static int step_thinking(struct renderer_parser *p, struct laguna *l, bool done, struct rnd_out *o)
{
    struct buf *to = l->thinking ? o->thinking : NULL;
    struct span a = acc_span(p);
    if (l->allow_open) {
        struct span t = trim_left(a);
        if (has_prefix(t, LG_THINK_OPEN)) {
            // The model echoed the primed <think>.
            keep_from(p, trim_left(from(t, strlen(LG_THINK_OPEN))));
            l->allow_open = false;
            return 1;
        }
        bool partial = prefix_of(t, LG_THINK_OPEN) && !done;
        keep_from(p, t);
        if (partial)
            return 0;
        l->allow_open = false;
        a = acc_span(p);
    }
    long idx = find(a, LG_THINK_CLOSE);
    if (idx >= 0) {
        if (to)
            append_span(to, trim_right(upto(a, (size_t)idx)));
        keep_from(p, trim_left(from(a, (size_t)idx + strlen(LG_THINK_CLOSE))));
        p->state = LG_CONTENT;
        return 1;
    }
    idx = find(a, LG_CALL_OPEN);
    if (idx >= 0) {
        if (to)
            append_span(to, trim_right(upto(a, (size_t)idx)));
        keep_from(p, from(a, (size_t)idx + strlen(LG_CALL_OPEN)));
        p->state = LG_TOOL;
        return 1;
    }
    if (done) {
        struct span t = trim_right(a);
        if (to)
            append_span(to, t);
        buf_reset(&p->acc);
        p->state = LG_CONTENT;
        return t.n > 0;
    }
    size_t keep = rnd_overlap(a.s, a.n, LG_THINK_CLOSE);
    size_t ov = rnd_overlap(a.s, a.n, LG_CALL_OPEN), ws = rnd_trailing_ws(a.s, a.n);
    keep = ov > keep ? ov : keep;
    keep = ws > keep ? ws : keep;
    if (keep > 0 && keep < a.n) {
        if (to)
            append_span(to, upto(a, a.n - keep));
        keep_from(p, from(a, a.n - keep));
        return 1;
    }
    return 0;
}

// A bare JSON call in content (tools declared). Returns <0 on error, 0 when
// the text is not such a call (*handled false) or must wait, 1 on progress.
static int step_json_call(struct renderer_parser *p, bool done, struct rnd_out *o, bool *handled,
                          struct err *e)
{
    struct span a = acc_span(p);
    *handled = false;
    long j = find(a, "{");
    if (j < 0)
        return 0;
    struct span before = trim_right(upto(a, (size_t)j)), raw = from(a, (size_t)j);
    if (!looks_like_json_call(raw, done))
        return 0;
    *handled = true;
    if (!done && !valid_json(trim(raw))) {
        if (before.n) {
            append_span(o->content, before);
            keep_from(p, raw);
            return 1;
        }
        return 0;
    }
    int rc = parse_call(p, raw, o->calls, e);
    if (rc < 0)
        return rc;
    append_span(o->content, before);
    buf_reset(&p->acc);
    p->state = LG_CONTENT;
    return 1;
}

// <think> and </think> in content. Returns as step_json_call does.
static int step_think_tags(struct renderer_parser *p, struct laguna *l, bool done,
                           struct rnd_out *o, bool *handled)
{
    struct span a = acc_span(p);
    *handled = true;
    // A <think> block in content: reported as thinking when on, else dropped.
    long idx = find(a, LG_THINK_OPEN);
    if (idx >= 0) {
        append_span(o->content, upto(a, (size_t)idx));
        keep_from(p, trim_left(from(a, (size_t)idx + strlen(LG_THINK_OPEN))));
        p->state = LG_THINKING;
        l->allow_open = false;
        return 1;
    }
    // A partial <think> at the end is held back in step_content_tail, after
    // the complete markers before it are handled. (Ollama holds it back
    // first, so a piece such as "<tool_call>f\n<" would go out as content.)

    // A stray </think> where content starts is dropped.
    struct span t = trim_left(a);
    if (has_prefix(t, LG_THINK_CLOSE)) {
        keep_from(p, trim_left(from(t, strlen(LG_THINK_CLOSE))));
        return 1;
    }
    if (prefix_of(t, LG_THINK_CLOSE) && !done)
        return 0;
    *handled = false;
    return 0;
}

// A call wrapped in <user>…</user> (tools declared). Returns as
// step_json_call does.
static int step_user_call(struct renderer_parser *p, bool done, struct rnd_out *o, bool *handled)
{
    struct span a = acc_span(p);
    *handled = false;
    long idx = find(a, LG_USER_OPEN);
    if (idx < 0)
        return 0;
    struct span before = trim_right(upto(a, (size_t)idx));
    struct span inner = from(a, (size_t)idx + strlen(LG_USER_OPEN));
    long close = find(inner, LG_USER_CLOSE);
    if (close >= 0) {
        if (parse_user_call(p, upto(inner, (size_t)close), o->calls)) {
            *handled = true;
            append_span(o->content, before);
            keep_from(p, trim_left(from(inner, (size_t)close + strlen(LG_USER_CLOSE))));
            return 1;
        }
    } else if (!done) {
        *handled = true;
        if (idx > 0) {
            append_span(o->content, before);
            keep_from(p, from(a, (size_t)idx));
            return 1;
        }
        return 0;
    }
    return 0;
}

// Plain content: all of it at the end; otherwise all but a partial marker
// or trailing white space, which wait for more text.
static int step_content_tail(struct renderer_parser *p, struct laguna *l, bool done,
                             struct rnd_out *o)
{
    struct span a = acc_span(p);
    if (done) {
        struct span r = trim_right(a);
        append_span(o->content, r);
        buf_reset(&p->acc);
        return r.n > 0;
    }
    size_t keep = rnd_overlap(a.s, a.n, LG_CALL_OPEN);
    size_t ov = rnd_overlap(a.s, a.n, LG_USER_OPEN);
    keep = ov > keep ? ov : keep;
    ov = rnd_overlap(a.s, a.n, LG_THINK_OPEN);
    keep = ov > keep ? ov : keep;
    if (!l->thinking) {
        ov = rnd_overlap(a.s, a.n, LG_THINK_CLOSE);
        keep = ov > keep ? ov : keep;
    }
    ov = rnd_trailing_ws(a.s, a.n);
    keep = ov > keep ? ov : keep;
    if (keep > 0 && keep < a.n) {
        append_span(o->content, upto(a, a.n - keep));
        keep_from(p, from(a, a.n - keep));
        return 1;
    }
    if (keep == 0 && a.n > 0) {
        append_span(o->content, a);
        buf_reset(&p->acc);
        return 1;
    }
    return 0;
}

static int step_content(struct renderer_parser *p, struct laguna *l, bool done, struct rnd_out *o,
                        struct err *e)
{
    if (l->content_start) {
        // The model puts a newline after the primed or closed </think>.
        keep_from(p, trim_left(acc_span(p)));
        if (p->acc.len == 0)
            return 0;
        l->content_start = false;
    }
    bool tools = json_array_size(p->tools) > 0;
    bool handled = false;
    int rc = step_think_tags(p, l, done, o, &handled);
    if (handled)
        return rc;
    struct span a = acc_span(p);
    long idx = find(a, LG_CALL_OPEN);
    if (idx >= 0) {
        append_span(o->content, trim_right(upto(a, (size_t)idx)));
        keep_from(p, from(a, (size_t)idx + strlen(LG_CALL_OPEN)));
        p->state = LG_TOOL;
        return 1;
    }
    if (tools) {
        rc = step_user_call(p, done, o, &handled);
        if (handled)
            return rc;
        rc = step_json_call(p, done, o, &handled, e);
        if (rc < 0 || handled)
            return rc;
    }
    return step_content_tail(p, l, done, o);
}

static int step_tool(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    struct span a = acc_span(p);
    long idx = find(a, LG_CALL_CLOSE);
    if (idx >= 0) {
        char *raw = xstrndup(a.s, (size_t)idx);
        keep_from(p, trim_left(from(a, (size_t)idx + strlen(LG_CALL_CLOSE))));
        p->state = LG_CONTENT;
        int rc = parse_call(p, span_of(raw), o->calls, e);
        free(raw);
        return rc < 0 ? rc : 1;
    }
    if (done && trim(a).n > 0) {
        char *raw = xstrndup(a.s, a.n);
        buf_reset(&p->acc);
        p->state = LG_CONTENT;
        int rc = parse_call(p, span_of(raw), o->calls, e);
        free(raw);
        return rc < 0 ? rc : 1;
    }
    return 0;
}

int rnd_laguna_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    struct laguna *l = p->impl;
    for (;;) {
        int rc;
        if (p->state == LG_THINKING)
            rc = step_thinking(p, l, done, o);
        else if (p->state == LG_CONTENT)
            rc = step_content(p, l, done, o, e);
        else
            rc = step_tool(p, done, o, e);
        if (rc <= 0)
            return rc < 0 ? rc : 0;
    }
}

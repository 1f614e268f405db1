// functiongemma renderer and parser (Ollama's model/renderers/functiongemma.go
// and model/parsers/functiongemma.go): FunctionGemma (a gemma3 model) with
// its own turn roles and call syntax:
//
//   <bos><start_of_turn>developer\n{system}\n{default line}
//     <start_function_declaration>declaration:NAME{description:<escape>…<escape>,
//       parameters:{properties:{…},required:[…],type:<escape>OBJECT<escape>}}
//     <end_function_declaration><end_of_turn>\n
//   <start_of_turn>user\n{text}<end_of_turn>\n
//   <start_of_turn>model\n{text}<start_function_call>call:NAME{k:v,…}<end_function_call>
//     <start_function_response>response:NAME{<escape>{result}<escape>}<end_function_response>
//
// Values: strings between <escape> tags, numbers, true/false, {k:v} and
// [v,…] (keys sorted). The parser reads the calls back in the same syntax.
#include "renderer/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FG_DEFAULT_SYSTEM "You can do function calling with the following functions:"
#define FG_CALL_OPEN      "<start_function_call>"
#define FG_CALL_CLOSE     "<end_function_call>"
#define FG_ESC            "<escape>"

// ---------------------------------------------------------------------------
// Renderer

static void put(struct buf *out, const char *s)
{
    buf_append(out, s, strlen(s));
}

static void put_trimmed(struct buf *out, const char *s)
{
    size_t n = strlen(s);
    rnd_trim(&s, &n);
    buf_append(out, s, n);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// An object's keys, sorted bytewise (Go's sort.Strings); free() the array.
static const char **sorted_keys(const json_t *obj, size_t *n)
{
    *n = json_object_size(obj);
    const char **keys = xcalloc(*n + 1, sizeof *keys);
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) keys[i++] = k;
    qsort(keys, *n, sizeof *keys, cmp_str);
    return keys;
}

static void put_value(struct buf *out, const json_t *v);

static void put_map(struct buf *out, const json_t *obj)
{
    size_t n;
    const char **keys = sorted_keys(obj, &n);
    put(out, "{");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            put(out, ",");
        put(out, keys[i]);
        put(out, ":");
        put_value(out, json_object_get(obj, keys[i]));
    }
    put(out, "}");
    free(keys);
}

// formatArgValue: a decoded JSON value as the model writes it.
static void put_value(struct buf *out, const json_t *v)
{
    if (json_is_string(v)) {
        put(out, FG_ESC);
        buf_append(out, json_string_value(v), json_string_length(v));
        put(out, FG_ESC);
    } else if (json_is_boolean(v)) {
        put(out, json_is_true(v) ? "true" : "false");
    } else if (json_is_integer(v)) {
        buf_printf(out, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (fabs(d) < 9.2e18 && d == trunc(d))
            buf_printf(out, "%lld", (long long)d);
        else
            rnd_go_value(out, v);
    } else if (json_is_object(v)) {
        put_map(out, v);
    } else if (json_is_array(v)) {
        put(out, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i > 0)
                put(out, ",");
            put_value(out, json_array_get(v, i));
        }
        put(out, "]");
    } else {
        put(out, "<nil>");  // fmt's %v of nil
    }
}

static void put_upper(struct buf *out, const char *s)
{
    for (; *s; s++)
        buf_printf(out, "%c", *s >= 'a' && *s <= 'z' ? *s - 'a' + 'A' : *s);
}

// A property's first declared type, upper-cased ("" when none).
static void put_type(struct buf *out, const json_t *type)
{
    const json_t *t = json_is_array(type) ? json_array_get(type, 0) : type;
    if (!json_is_string(t))
        return;
    put(out, ",type:" FG_ESC);
    put_upper(out, json_string_value(t));
    put(out, FG_ESC);
}

static void put_properties(struct buf *out, const json_t *props)
{
    size_t n;
    const char **keys = sorted_keys(props, &n);
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_object_get(props, keys[i]);
        if (i > 0)
            put(out, ",");
        buf_printf(out, "%s:{description:" FG_ESC "%s" FG_ESC, keys[i], rnd_str(p, "description"));
        put_type(out, json_object_get(p, "type"));
        put(out, "}");
    }
    free(keys);
}

static void put_declaration(struct buf *out, const json_t *tool)
{
    const json_t *params = rnd_tool_fn(tool, "parameters");
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    const char *type = rnd_str(params, "type");
    json_t *name = rnd_tool_fn(tool, "name"), *desc = rnd_tool_fn(tool, "description");
    buf_printf(out, "<start_function_declaration>declaration:%s{description:" FG_ESC "%s" FG_ESC,
               json_is_string(name) ? json_string_value(name) : "",
               json_is_string(desc) ? json_string_value(desc) : "");
    if (json_is_object(props) || *type) {
        bool comma = false;
        put(out, ",parameters:{");
        if (json_is_object(props) && json_object_size(props) > 0) {
            put(out, "properties:{");
            put_properties(out, props);
            put(out, "}");
            comma = true;
        }
        if (json_is_array(req) && json_array_size(req) > 0) {
            put(out, comma ? ",required:[" : "required:[");
            for (size_t i = 0; i < json_array_size(req); i++) {
                const json_t *r = json_array_get(req, i);
                buf_printf(out, "%s" FG_ESC "%s" FG_ESC, i > 0 ? "," : "",
                           json_is_string(r) ? json_string_value(r) : "");
            }
            put(out, "]");
            comma = true;
        }
        if (*type) {
            put(out, comma ? ",type:" FG_ESC : "type:" FG_ESC);
            put_upper(out, type);
            put(out, FG_ESC);
        }
        put(out, "}");
    }
    put(out, "}<end_function_declaration>");
}

static void put_call(struct buf *out, const json_t *call)
{
    const json_t *fn = rnd_call_fn(call), *args = json_object_get(fn, "arguments");
    buf_printf(out, FG_CALL_OPEN "call:%s", rnd_str(fn, "name"));
    if (json_is_object(args))
        put_map(out, args);
    else
        put(out, "{}");
    put(out, FG_CALL_CLOSE);
}

static void put_developer_turn(struct buf *out, const char *system, json_t *tools)
{
    const size_t n_tools = json_is_array(tools) ? json_array_size(tools) : 0;
    if (!*system && n_tools == 0)
        return;
    put(out, "<start_of_turn>developer\n");
    put_trimmed(out, system);
    if (n_tools > 0) {
        size_t n = strlen(system);
        const char *s = system;
        rnd_trim(&s, &n);
        if (*system)
            put(out, "\n");
        if (n != strlen(FG_DEFAULT_SYSTEM) || memcmp(s, FG_DEFAULT_SYSTEM, n) != 0)
            put(out, FG_DEFAULT_SYSTEM);
    }
    for (size_t i = 0; i < n_tools; i++)
        put_declaration(out, json_array_get(tools, i));
    put(out, "<end_of_turn>\n");
}

// The name of the call a tool message at i answers: the k-th call of the
// last assistant message with calls before it, k = the tool messages since.
static const char *tool_name_for(json_t *msgs, size_t first, size_t i)
{
    for (size_t j = i; j-- > first;) {
        json_t *m = json_array_get(msgs, j), *calls = json_object_get(m, "tool_calls");
        if (strcmp(rnd_str(m, "role"), "assistant") != 0 || json_array_size(calls) == 0)
            continue;
        size_t k = 0;
        for (size_t t = j + 1; t < i; t++)
            k += strcmp(rnd_str(json_array_get(msgs, t), "role"), "tool") == 0;
        return k < json_array_size(calls) ? rnd_str(rnd_call_fn(json_array_get(calls, k)), "name")
                                          : "";
    }
    return "";
}

enum { FG_PREV_NONE, FG_PREV_CALL, FG_PREV_RESPONSE };

static int render_message(json_t *msgs, size_t first, size_t i, int prev, struct buf *out)
{
    json_t *m = json_array_get(msgs, i), *calls = json_object_get(m, "tool_calls");
    const char *role = rnd_str(m, "role");
    if (strcmp(role, "assistant") == 0) {
        if (prev != FG_PREV_RESPONSE)
            put(out, "<start_of_turn>model\n");
        put_trimmed(out, rnd_str(m, "content"));
        for (size_t c = 0; c < json_array_size(calls); c++)
            put_call(out, json_array_get(calls, c));
        json_t *next = json_array_get(msgs, i + 1);
        if (json_array_size(calls) > 0 && next && !strcmp(rnd_str(next, "role"), "tool")) {
            put(out, "<start_function_response>");
            return FG_PREV_CALL;
        }
        put(out, "<end_of_turn>\n");
        return FG_PREV_NONE;
    }
    if (strcmp(role, "tool") == 0) {
        if (prev != FG_PREV_CALL)
            put(out, "<start_function_response>");
        buf_printf(out, "response:%s{", tool_name_for(msgs, first, i));
        buf_printf(out, FG_ESC "%s" FG_ESC, rnd_str(m, "content"));
        put(out, "}<end_function_response>");
        return FG_PREV_RESPONSE;
    }
    // A user turn right after tool responses continues the model's turn;
    // another role opens its own turn and (as Ollama's) leaves the state.
    const bool user = strcmp(role, "user") == 0;
    if (!user || prev != FG_PREV_RESPONSE)
        buf_printf(out, "<start_of_turn>%s\n", role);
    put_trimmed(out, rnd_str(m, "content"));
    put(out, "<end_of_turn>\n");
    return user ? FG_PREV_NONE : prev;
}

int rnd_render_functiongemma(json_t *msgs, json_t *tools, const struct renderer_think *think,
                             int variant, struct buf *out, struct err *e)
{
    (void)think;
    (void)variant;
    (void)e;
    size_t first = 0;
    const char *system = "";
    json_t *m0 = json_array_get(msgs, 0);
    if (m0 &&
        (!strcmp(rnd_str(m0, "role"), "system") || !strcmp(rnd_str(m0, "role"), "developer"))) {
        system = rnd_str(m0, "content");
        first = 1;
    }
    put(out, "<bos>");
    put_developer_turn(out, system, tools);
    int prev = FG_PREV_NONE;
    for (size_t i = first; i < json_array_size(msgs); i++)
        prev = render_message(msgs, first, i, prev, out);
    if (prev != FG_PREV_RESPONSE)
        put(out, "<start_of_turn>model\n");
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { FG_CONTENT, FG_CALLS };

// Go's fmt.Sscanf(s, "%f"): white space skipped, then the longest float
// token (sign, digits, point, exponent; nan/inf; 0x with p exponent) parsed
// as a whole. Text after the token is ignored.
static bool scan_float(const char *s, double *out)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    const char *p = s;
    const char *digits = "0123456789_", *exp = "eE";
#define ACCEPT(set) (*p && strchr(set, *p) ? (p++, true) : false)
    if (ACCEPT("nN") && ACCEPT("aA") && ACCEPT("nN"))
        goto parse;
    ACCEPT("+-");
    if (ACCEPT("iI") && ACCEPT("nN") && ACCEPT("fF"))
        goto parse;
    if (ACCEPT("0") && ACCEPT("xX")) {
        digits = "0123456789abcdefABCDEF_";
        exp = "pP";
    }
    while (ACCEPT(digits))
        ;
    if (ACCEPT("."))
        while (ACCEPT(digits))
            ;
    if (ACCEPT(exp)) {
        ACCEPT("+-");
        while (ACCEPT("0123456789_"))
            ;
    }
#undef ACCEPT
parse:;
    size_t n = (size_t)(p - s);
    if (n == 0 || memchr(s, '_', n))
        return false;
    char *tok = xstrndup(s, n), *end = NULL;
    errno = 0;
    double d = strtod(tok, &end);
    bool ok = end == tok + n && !(errno == ERANGE && isinf(d));
    free(tok);
    *out = d;
    return ok;
}

// An integer only when s is its canonical decimal (Ollama parses with %d and
// compares the printed value with the text).
static bool scan_int(const char *s, long long *out)
{
    char *end = NULL, again[32];
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE)
        return false;
    snprintf(again, sizeof again, "%lld", v);
    *out = v;
    return strcmp(again, s) == 0;
}

static json_t *parse_value(const char *v, size_t n);

// splitArguments: pieces separated by commas outside brackets and escapes
// (empty ones dropped); calls fn on each.
static void split_args(const char *s, size_t n, void (*fn)(void *, const char *, size_t), void *arg)
{
    int depth = 0;
    bool esc = false;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (n - i >= 8 && memcmp(s + i, FG_ESC, 8) == 0) {
            esc = !esc;
            i += 7;
            continue;
        }
        if (esc)
            continue;
        if (s[i] == '{' || s[i] == '[')
            depth++;
        else if (s[i] == '}' || s[i] == ']')
            depth--;
        else if (s[i] == ',' && depth == 0) {
            if (i > start)
                fn(arg, s + start, i - start);
            start = i + 1;
        }
    }
    if (n > start)
        fn(arg, s + start, n - start);
}

static void add_member(void *obj, const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    if (!colon)
        return;
    char *key = xstrndup(s, (size_t)(colon - s));
    json_object_set_new(obj, key, parse_value(colon + 1, n - (size_t)(colon - s) - 1));
    free(key);
}

static void add_item(void *arr, const char *s, size_t n)
{
    json_array_append_new(arr, parse_value(s, n));
}

static bool starts(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s, p, k) == 0;
}

static bool ends(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s + n - k, p, k) == 0;
}

// parseValue: an escaped string, true/false, a number, [..], {..}, else the
// text itself.
static json_t *parse_value(const char *v, size_t n)
{
    if (starts(v, n, FG_ESC) && ends(v, n, FG_ESC))
        return n >= 16 ? json_stringn(v + 8, n - 16) : json_string("");
    char *s = xstrndup(v, n);
    json_t *out = NULL;
    long long i;
    double d;
    if (!strcmp(s, "true") || !strcmp(s, "false"))
        out = json_boolean(!strcmp(s, "true"));
    else if (strlen(s) == n && scan_int(s, &i))
        out = json_integer(i);
    else if (strlen(s) == n && scan_float(s, &d) && isfinite(d))
        out = json_real(d);  // (Ollama would also take NaN and ±Inf, which JSON cannot carry)
    else if (starts(v, n, "[") && ends(v, n, "]")) {
        out = json_array();
        split_args(v + 1, n - 2, add_item, out);
    } else if (starts(v, n, "{") && ends(v, n, "}")) {
        out = json_object();
        split_args(v + 1, n - 2, add_member, out);
    }
    if (!out)
        out = json_stringn(v, n);
    free(s);
    return out ? out : json_string("");
}

// Ollama's call:([^{]+)\{(.*)\} on one call's text: the leftmost "call:"
// followed by a name up to the first '{', whose arguments run to the last
// '}' before a newline. Returns false when nothing matches.
static bool match_call(const char *s, size_t n, struct str *name, struct str *args)
{
    for (const char *c = s; (c = rnd_find(c, n - (size_t)(c - s), "call:")); c++) {
        const char *nm = c + 5, *brace = memchr(nm, '{', n - (size_t)(nm - s));
        if (!brace || brace == nm)
            continue;
        const char *a = brace + 1, *line_end = memchr(a, '\n', n - (size_t)(a - s));
        const char *stop = line_end ? line_end : s + n, *close = NULL;
        for (const char *q = a; q < stop; q++)
            if (*q == '}')
                close = q;
        if (!close)
            continue;
        *name = (struct str){nm, (size_t)(brace - nm)};
        *args = (struct str){a, (size_t)(close - a)};
        return true;
    }
    return false;
}

static void emit_call(struct renderer_parser *p, const char *s, size_t n, json_t *calls)
{
    struct str name = {"", 0}, args = {"", 0};
    json_t *obj = json_object();
    if (match_call(s, n, &name, &args))
        split_args(args.ptr, args.len, add_member, obj);
    char *nm = xstrndup(name.ptr, name.len);
    rnd_call_append(p, calls, nm, obj);
    free(nm);
}

int rnd_functiongemma_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    (void)e;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        if (n == 0)
            return 0;
        if (p->state == FG_CONTENT) {
            const char *open = rnd_find(a, n, FG_CALL_OPEN);
            if (!open) {  // all but a partial tag at the end is content
                size_t keep = rnd_overlap(a, n, FG_CALL_OPEN);
                buf_append(o->content, a, n - keep);
                rnd_buf_consume(&p->acc, n - keep);
                return 0;
            }
            buf_append(o->content, a, (size_t)(open - a));
            rnd_buf_consume(&p->acc, (size_t)(open - a) + strlen(FG_CALL_OPEN));
            p->state = FG_CALLS;
            continue;
        }
        const char *close = rnd_find(a, n, FG_CALL_CLOSE);
        if (!close)
            return 0;
        emit_call(p, a, (size_t)(close - a), o->calls);
        rnd_buf_consume(&p->acc, (size_t)(close - a) + strlen(FG_CALL_CLOSE));
        a = p->acc.data ? p->acc.data : "";
        if (!rnd_find(a, p->acc.len, FG_CALL_OPEN))
            p->state = FG_CONTENT;
    }
}

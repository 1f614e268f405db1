// olmo3, olmo3.1, olmo3-think, olmo3-32b-think (Ollama's
// model/renderers/olmo3.go, olmo3_think.go, model/parsers/olmo3.go):
// ChatML with the tools as a JSON list inside <functions></functions>, tool
// results in an "environment" turn, and calls written as Python-like lines
// inside <function_calls></function_calls>:
//
//   <function_calls>get_weather(location="Paris", days=2)</function_calls>
#include "renderer/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IM_START "<|im_start|>"
#define IM_END   "<|im_end|>"

#define OLMO3_DEFAULT "You are a helpful function-calling AI assistant. "
#define OLMO31_DEFAULT                                                                             \
    "You are Olmo, a helpful AI assistant built by Ai2. Your date cutoff is December 2024, and "   \
    "your model weights are available at https://huggingface.co/allenai. "
#define OLMO3_NO_FUNCTIONS "You do not currently have access to any functions. "
#define OLMO3_WITH_FUNCTIONS                                                                       \
    "You are provided with function signatures within <functions></functions> XML tags. You may "  \
    "call one or more functions to assist with the user query. Output any function calls within "  \
    "<function_calls></function_calls> XML tags. Do not make assumptions about what values to "    \
    "plug into functions."

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void functions_json(struct buf *out, json_t *tools)
{
    json_t *list = json_array();
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) json_array_append_new(list, rnd_go_tool(tool));
    rnd_go_json_spaced_ordered(out, list);
    json_decref(list);
}

// The system turn: the first system message or the default prompt, and the
// tools inside <functions></functions>.
static void write_system(struct buf *out, const json_t *system, json_t *tools, int variant)
{
    bool has_tools = json_array_size(tools) > 0;
    buf_append_str(out, IM_START "system\n");
    if (system) {
        buf_append_str(out, rnd_str(system, "content"));
        if (has_tools) {
            buf_append_str(out, "<functions>");
            functions_json(out, tools);
            buf_append_str(out, "</functions>");
        }
    } else {
        buf_append_str(out, variant == 1 ? OLMO31_DEFAULT : OLMO3_DEFAULT);
        if (has_tools) {
            buf_append_str(out, OLMO3_WITH_FUNCTIONS "<functions>");
            functions_json(out, tools);
            buf_append_str(out, "</functions>");
        } else {
            buf_append_str(out, OLMO3_NO_FUNCTIONS "<functions></functions>");
        }
    }
    buf_append_str(out, IM_END "\n");
}

// One call, Python-like: NAME(key=JSON, ...) with the keys sorted.
static void write_call(struct buf *out, const json_t *call)
{
    json_t *fn = rnd_call_fn(call);
    json_t *args = json_object_get(fn, "arguments");
    buf_printf(out, "%s(", rnd_str(fn, "name"));
    size_t na = json_object_size(args);
    const char **keys = xcalloc(na ? na : 1, sizeof(*keys));
    size_t a = 0;
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) keys[a++] = key;
    qsort(keys, na, sizeof(*keys), cmp_key);
    for (a = 0; a < na; a++) {
        buf_printf(out, "%s%s=", a ? ", " : "", keys[a]);
        rnd_go_json(out, json_object_get(args, keys[a]));
    }
    free(keys);
    buf_append_char(out, ')');
}

// An assistant turn: its content, then its calls one a line; the turn
// stays open when it is the last message and has no calls (a prefill).
static void write_assistant(struct buf *out, const json_t *m, bool last)
{
    json_t *calls = json_object_get(m, "tool_calls");
    buf_printf(out, IM_START "assistant\n%s", rnd_str(m, "content"));
    if (json_array_size(calls) > 0) {
        buf_append_str(out, "<function_calls>");
        for (size_t k = 0; k < json_array_size(calls); k++) {
            write_call(out, json_array_get(calls, k));
            if (k + 1 < json_array_size(calls))
                buf_append_char(out, '\n');
        }
        buf_append_str(out, "</function_calls>");
    }
    if (!last || json_array_size(calls) > 0)
        buf_append_str(out, IM_END "\n");
}

int rnd_render_olmo3(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                     struct buf *out, struct err *e)
{
    (void)think;
    (void)e;
    json_t *system = NULL, *rest = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (strcmp(rnd_str(m, "role"), "system") == 0) {
            if (!system)
                system = m;
            continue;
        }
        json_array_append(rest, m);
    }
    write_system(out, system, tools, variant);
    size_t n = json_array_size(rest);
    json_array_foreach(rest, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "user") == 0)
            buf_printf(out, IM_START "user\n%s" IM_END "\n", rnd_str(m, "content"));
        else if (strcmp(role, "assistant") == 0)
            write_assistant(out, m, i + 1 == n);
        else if (strcmp(role, "tool") == 0)
            buf_printf(out, IM_START "environment\n%s" IM_END "\n", rnd_str(m, "content"));
    }
    json_t *last = n ? json_array_get(rest, n - 1) : NULL;
    bool prefill = last && strcmp(rnd_str(last, "role"), "assistant") == 0 &&
                   json_array_size(json_object_get(last, "tool_calls")) == 0 &&
                   *rnd_str(last, "content");
    if (!prefill)
        buf_append_str(out, IM_START "assistant\n");
    json_decref(rest);
    return 0;
}

// variant 0: Olmo-3-32B-Think; 1: Olmo-3-7B-Think / Olmo-3.1-32B-Think.
int rnd_render_olmo3_think(json_t *msgs, json_t *tools, const struct renderer_think *think,
                           int variant, struct buf *out, struct err *e)
{
    (void)tools;
    (void)think;
    (void)e;
    json_t *system = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (!system && strcmp(rnd_str(m, "role"), "system") == 0)
        system = m;
    buf_append_str(out, IM_START "system\n");
    if (system)
        buf_printf(out,
                   "%s You do not currently have access to any functions. "
                   "<functions></functions>",
                   rnd_str(system, "content"));
    else if (variant == 0)
        buf_append_str(out, "You are a helpful AI assistant.");
    else
        buf_append_str(out, "You are Olmo, a helpful AI assistant built by Ai2. Your date cutoff "
                            "is December 2024, and your model weights are available at "
                            "https://huggingface.co/allenai.");
    buf_append_str(out, IM_END "\n");
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0)
            buf_printf(out, IM_START "%s\n%s" IM_END "\n", role, rnd_str(m, "content"));
    }
    buf_append_str(out, IM_START "assistant\n<think>");
    return 0;
}

// ---------------------------------------------------------------------------
// Parser: <function_calls> lines of name(key=value, ...)

#define CALLS_OPEN  "<function_calls>"
#define CALLS_CLOSE "</function_calls>"
#define MAX_DEPTH   64

enum { O3_CONTENT, O3_CALLS, O3_CALLS_DONE };

// Go's strings.TrimSpace over [s, s+n): adjusts both.
static void trim(const char **s, size_t *n)
{
    size_t lead = rnd_leading_ws(*s, *n);
    *s += lead;
    *n -= lead;
    *n -= rnd_trailing_ws(*s, *n);
}

// splitArguments: top-level commas outside strings and brackets. Returns the
// number of parts written to starts/lens (at most max).
static size_t split_args(const char *s, size_t n, const char **starts, size_t *lens, size_t max)
{
    size_t np = 0, begin = 0;
    int depth = 0;
    bool in_str = false, esc = false;
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (esc) {
            esc = false;
            continue;
        }
        if (c == '\\' && in_str) {
            esc = true;
            continue;
        }
        if ((c == '"' || c == '\'') && !in_str) {
            in_str = true;
            quote = c;
            continue;
        }
        if (in_str && c == quote) {
            in_str = false;
            continue;
        }
        if (in_str)
            continue;
        if (c == '(' || c == '[' || c == '{')
            depth++;
        else if (c == ')' || c == ']' || c == '}')
            depth--;
        else if (c == ',' && depth == 0) {
            if (np < max) {
                starts[np] = s + begin;
                lens[np++] = i - begin;
            }
            begin = i + 1;
        }
    }
    if (begin < n && np < max) {
        starts[np] = s + begin;
        lens[np++] = n - begin;
    }
    return np;
}

// unescapeString: \\ \" \' \n \t \r.
static json_t *unescape(const char *s, size_t n)
{
    struct buf b;
    buf_init(&b, 0);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            char c = s[i + 1];
            const char *rep = c == '\\'   ? "\\"
                              : c == '"'  ? "\""
                              : c == '\'' ? "'"
                              : c == 'n'  ? "\n"
                              : c == 't'  ? "\t"
                              : c == 'r'  ? "\r"
                                          : NULL;
            if (rep) {
                buf_append_str(&b, rep);
                i++;
                continue;
            }
        }
        buf_append_char(&b, s[i]);
    }
    json_t *v = json_stringn(b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return v ? v : json_string("");
}

static json_t *value(const char *s, size_t n, int depth);

static bool str_eq_n(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool quoted(const char *s, size_t n)
{
    return n >= 2 && ((s[0] == '"' && s[n - 1] == '"') || (s[0] == '\'' && s[n - 1] == '\''));
}

// A list of values or "key: value" entries; NULL on a malformed entry.
static json_t *container(const char *s, size_t n, bool object, int depth)
{
    trim(&s, &n);
    json_t *c = object ? json_object() : json_array();
    if (n == 0)
        return c;
    const char *starts[256];
    size_t lens[256];
    size_t np = split_args(s, n, starts, lens, 256);
    for (size_t i = 0; i < np; i++) {
        const char *p = starts[i];
        size_t pn = lens[i];
        if (!object) {
            json_t *v = value(p, pn, depth + 1);
            if (!v)
                goto bad;
            json_array_append_new(c, v);
            continue;
        }
        trim(&p, &pn);
        if (pn == 0)
            continue;
        const char *colon = memchr(p, ':', pn);
        if (!colon)
            goto bad;
        const char *k = p, *vs = colon + 1;
        size_t kn = (size_t)(colon - p), vn = pn - kn - 1;
        trim(&k, &kn);
        if (quoted(k, kn)) {
            k++;
            kn -= 2;
        }
        json_t *v = value(vs, vn, depth + 1);
        if (!v)
            goto bad;
        char *key = xstrndup(k, kn);
        json_object_set_new(c, key, v);
        free(key);
    }
    return c;
bad:
    json_decref(c);
    return NULL;
}

// parseOlmo3Value: quoted strings, booleans (also Python's), null/None/nil,
// integers, floats, lists, dicts; anything else is the text itself.
static json_t *value(const char *s, size_t n, int depth)
{
    if (depth > MAX_DEPTH)
        return NULL;
    trim(&s, &n);
    if (quoted(s, n))
        return unescape(s + 1, n - 2);
    if (str_eq_n(s, n, "true") || str_eq_n(s, n, "True"))
        return json_true();
    if (str_eq_n(s, n, "false") || str_eq_n(s, n, "False"))
        return json_false();
    if (str_eq_n(s, n, "null") || str_eq_n(s, n, "None") || str_eq_n(s, n, "nil"))
        return json_null();
    char *t = xstrndup(s, n);
    json_t *v = NULL;
    const char *digits = t + (*t == '+' || *t == '-');
    if (*digits && strspn(digits, "0123456789") == strlen(digits)) {
        errno = 0;
        long long i = strtoll(t, NULL, 10);
        if (errno == 0)
            v = json_integer(i);
    }
    if (!v && n && strspn(t, "0123456789+-.eE") == n) {
        char *end;
        errno = 0;
        double f = strtod(t, &end);
        if (*end == 0 && end != t && isfinite(f))
            v = json_real(f);
    }
    free(t);
    if (v)
        return v;
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']')
        return container(s + 1, n - 2, false, depth);
    if (n >= 2 && s[0] == '{' && s[n - 1] == '}')
        return container(s + 1, n - 2, true, depth);
    return json_stringn(s, n);
}

static bool word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// One "name(args)" line into calls; false when it does not parse.
static bool one_call(const char *s, size_t n, json_t *list)
{
    size_t name_len = 0;
    while (name_len < n && word_char(s[name_len]))
        name_len++;
    if (name_len == 0 || name_len >= n || s[name_len] != '(' || s[n - 1] != ')')
        return false;
    const char *as = s + name_len + 1;
    size_t an = n - name_len - 2;
    trim(&as, &an);
    json_t *args = json_object();
    const char *starts[256];
    size_t lens[256];
    size_t np = an ? split_args(as, an, starts, lens, 256) : 0;
    for (size_t i = 0; i < np; i++) {
        const char *p = starts[i];
        size_t pn = lens[i];
        trim(&p, &pn);
        if (pn == 0)
            continue;
        const char *eq = memchr(p, '=', pn);
        if (!eq) {
            json_decref(args);
            return false;
        }
        const char *k = p;
        size_t kn = (size_t)(eq - p);
        trim(&k, &kn);
        json_t *v = value(eq + 1, pn - (size_t)(eq - p) - 1, 0);
        if (!v) {
            json_decref(args);
            return false;
        }
        char *key = xstrndup(k, kn);
        json_object_set_new(args, key, v);
        free(key);
    }
    char *name = xstrndup(s, name_len);
    json_array_append_new(list, json_pack("{s:s,s:o}", "name", name, "arguments", args));
    free(name);
    return true;
}

// parseOlmo3FunctionCalls: every line a call, or none at all.
static void parse_calls(struct renderer_parser *p, const char *s, size_t n, json_t *calls)
{
    trim(&s, &n);
    json_t *list = json_array();
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - s) : n;
        const char *line = s + i;
        size_t ln = end - i;
        trim(&line, &ln);
        if (ln && !one_call(line, ln, list)) {
            json_decref(list);
            return;  // Ollama logs and drops the whole block
        }
        i = end + 1;
    }
    size_t k;
    json_t *c;
    json_array_foreach(list, k, c)
        rnd_call_append(p, calls, rnd_str(c, "name"), json_incref(json_object_get(c, "arguments")));
    json_decref(list);
}

int rnd_olmo3_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)e;
    if (done) {
        // The last piece is not parsed: what is buffered is content when
        // outside a call block (Ollama's Olmo3Parser.Add with done).
        if (p->state == O3_CONTENT)
            buf_append(o->content, p->acc.data ? p->acc.data : "", p->acc.len);
        buf_reset(&p->acc);
        return 0;
    }
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        if (n == 0)
            return 0;
        if (p->state == O3_CONTENT) {
            const char *t = rnd_find(a, n, CALLS_OPEN);
            if (t) {
                buf_append(o->content, a, (size_t)(t - a));
                rnd_buf_consume(&p->acc, (size_t)(t - a) + strlen(CALLS_OPEN));
                p->state = O3_CALLS;
                continue;
            }
            size_t ov = rnd_overlap(a, n, CALLS_OPEN);
            buf_append(o->content, a, n - ov);
            rnd_buf_consume(&p->acc, n - ov);
            return 0;
        }
        if (p->state == O3_CALLS) {
            const char *t = rnd_find(a, n, CALLS_CLOSE);
            if (!t)
                return 0;
            parse_calls(p, a, (size_t)(t - a), o->calls);
            rnd_buf_consume(&p->acc, (size_t)(t - a) + strlen(CALLS_CLOSE));
            p->state = O3_CALLS_DONE;
            continue;
        }
        buf_append(o->content, a, n);
        buf_reset(&p->acc);
        p->state = O3_CONTENT;
        return 0;
    }
}

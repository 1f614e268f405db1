// lfm2 and lfm2-thinking (Ollama's model/renderers/lfm2.go,
// model/parsers/lfm2.go): Liquid's LFM2 chat format, tools as a JSON list in
// the system turn, calls written Python-style:
//
//   <|tool_call_start|>[get_weather(city="Paris", days=2)]<|tool_call_end|>
//
// tool results between <|tool_response_start|> and <|tool_response_end|>,
// and <think>…</think> for the thinking variant.
#include "renderer/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define L_BOS         "<|startoftext|>"
#define L_THINK_OPEN  "<think>"
#define L_THINK_CLOSE "</think>"
#define L_LIST_START  "<|tool_list_start|>"
#define L_LIST_END    "<|tool_list_end|>"
#define L_CALL_START  "<|tool_call_start|>"
#define L_CALL_END    "<|tool_call_end|>"
#define L_RESP_START  "<|tool_response_start|>"
#define L_RESP_END    "<|tool_response_end|>"

enum { LFM2 = 0, LFM2_THINKING = 1 };

// lfm2JSON: Go JSON without HTML escaping, a space after ':' and ',' outside
// strings; decoded values are Go maps (keys sorted), a tool keeps its order.
static void lfm2_json(struct buf *out, const json_t *v, bool ordered)
{
    rnd_go_json_spaced_unescaped(out, v, !ordered);
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void render_calls(struct buf *out, json_t *calls)
{
    buf_append_str(out, L_CALL_START "[");
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call)
    {
        if (i)
            buf_append_char(out, ',');
        json_t *fn = rnd_call_fn(call);
        json_t *args = json_object_get(fn, "arguments");
        buf_printf(out, "%s(", rnd_str(fn, "name"));
        size_t na = json_object_size(args), k = 0;
        const char **keys = xcalloc(na ? na : 1, sizeof(*keys));
        const char *key;
        json_t *v;
        json_object_foreach(args, key, v) keys[k++] = key;
        qsort(keys, na, sizeof(*keys), cmp_key);
        for (k = 0; k < na; k++) {
            buf_printf(out, "%s%s=", k ? "," : "", keys[k]);
            lfm2_json(out, json_object_get(args, keys[k]), false);
        }
        free(keys);
        buf_append_char(out, ')');
    }
    buf_append_str(out, "]" L_CALL_END);
}

static void trimmed(struct buf *out, const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    buf_append(out, s + lead, n - lead - rnd_trailing_ws(s + lead, n - lead));
}

// The system turn: the first message when it is a system one (its images
// counted), then the tools as a JSON list. Returns where the conversation
// starts.
static size_t write_system(struct buf *out, json_t *msgs, json_t *tools, size_t *img)
{
    size_t start = 0;
    struct buf sys;
    buf_init(&sys, 0);
    json_t *first = json_array_get(msgs, 0);
    if (first && strcmp(rnd_str(first, "role"), "system") == 0) {
        buf_append_str(&sys, rnd_str(first, "content"));
        *img += json_array_size(json_object_get(first, "images"));
        start = 1;
    }
    if (json_array_size(tools) > 0) {
        if (sys.len)
            buf_append_char(&sys, '\n');
        buf_append_str(&sys, "List of tools: " L_LIST_START "[");
        size_t i;
        json_t *tool;
        json_array_foreach(tools, i, tool)
        {
            json_t *gt = rnd_go_tool(tool);
            json_t *fn = json_object_get(gt, "function");
            lfm2_json(&sys, *rnd_str(fn, "name") ? fn : gt, true);
            if (i + 1 < json_array_size(tools))
                buf_append_str(&sys, ", ");
            json_decref(gt);
        }
        buf_append_str(&sys, "]" L_LIST_END);
    }
    if (sys.len)
        buf_printf(out, "<|im_start|>system\n%s<|im_end|>\n", buf_cstr(&sys));
    buf_deinit(&sys);
    return start;
}

// Replaces the text c with t (taking it over).
static void replace_text(struct buf *c, struct buf *t)
{
    buf_deinit(c);
    *c = *t;
}

// An assistant's calls go in front of its text (unless the text has them).
static void prepend_calls(struct buf *c, json_t *calls)
{
    struct buf t, tr;
    buf_init(&t, 0);
    render_calls(&t, calls);
    buf_init(&tr, 0);
    trimmed(&tr, buf_cstr(c), c->len);
    if (tr.len)
        buf_append_char(&t, '\n');
    buf_deinit(&tr);
    buf_append(&t, c->data ? c->data : "", c->len);
    replace_text(c, &t);
}

// An assistant's thinking goes in front of its text, in a <think> block.
static void prepend_thinking(struct buf *c, const char *th)
{
    struct buf t;
    buf_init(&t, 0);
    buf_printf(&t, L_THINK_OPEN "%s" L_THINK_CLOSE "%s", th, buf_cstr(c));
    replace_text(c, &t);
}

// Drops everything up to the last </think> of the text, and the white space
// around what is left.
static void drop_thinking(struct buf *c)
{
    const char *last = NULL;
    for (const char *p = buf_cstr(c); (p = strstr(p, L_THINK_CLOSE)); p++)
        last = p;
    if (!last)
        return;
    struct buf t;
    buf_init(&t, 0);
    const char *rest = last + strlen(L_THINK_CLOSE);
    trimmed(&t, rest, strlen(rest));
    replace_text(c, &t);
}

// Message i: its role header, its text (with images, calls and thinking as
// the variant keeps them) and, unless it is a prefill, the turn's end.
static void write_message(struct buf *out, json_t *msgs, size_t i, int variant, bool keep_thinking,
                          long last_assistant, size_t *img)
{
    json_t *m = json_array_get(msgs, i);
    const char *role = rnd_str(m, "role");
    bool assistant = strcmp(role, "assistant") == 0;
    bool prefill = i == json_array_size(msgs) - 1 && assistant;
    buf_printf(out, "<|im_start|>%s\n", role);
    struct buf c;
    buf_init(&c, 0);
    *img = rnd_image_tags(&c, rnd_str(m, "content"), json_array_size(json_object_get(m, "images")),
                          *img);
    json_t *calls = json_object_get(m, "tool_calls");
    if (assistant && json_array_size(calls) > 0 && !strstr(buf_cstr(&c), L_CALL_START))
        prepend_calls(&c, calls);
    const char *th = rnd_str(m, "thinking");
    if (variant == LFM2_THINKING && assistant && *th && !strstr(buf_cstr(&c), L_THINK_CLOSE))
        prepend_thinking(&c, th);
    if (assistant && !keep_thinking && (long)i != last_assistant)
        drop_thinking(&c);
    if (strcmp(role, "tool") == 0 && !strstr(buf_cstr(&c), L_RESP_START))
        buf_printf(out, L_RESP_START "%s" L_RESP_END, buf_cstr(&c));
    else
        buf_append(out, c.data ? c.data : "", c.len);
    buf_deinit(&c);
    if (!prefill)
        buf_append_str(out, "<|im_end|>\n");
}

int rnd_render_lfm2(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                    struct buf *out, struct err *e)
{
    (void)e;
    buf_append_str(out, L_BOS);
    size_t n = json_array_size(msgs), img = 0;
    size_t start = write_system(out, msgs, tools, &img);

    bool keep_thinking = variant == LFM2_THINKING && think && think->set && think->on;
    long last_assistant = -1;
    for (size_t i = n; i > start; i--)
        if (strcmp(rnd_str(json_array_get(msgs, i - 1), "role"), "assistant") == 0) {
            last_assistant = (long)i - 1;
            break;
        }
    for (size_t i = start; i < n; i++)
        write_message(out, msgs, i, variant, keep_thinking, last_assistant, &img);
    if (!n || strcmp(rnd_str(json_array_get(msgs, n - 1), "role"), "assistant") != 0)
        buf_append_str(out, "<|im_start|>assistant\n");
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

enum { LP_LOOKING, LP_THINKING, LP_CONTENT, LP_CALLS };

struct lfm2 {
    bool trim_thinking, trim_content;
};

int rnd_lfm2_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                  int variant, struct err *e)
{
    (void)e;
    p->impl = xcalloc(1, sizeof(struct lfm2));
    bool on = variant == LFM2_THINKING && think && think->set && think->on;
    bool prefill =
        last && strcmp(rnd_str(last, "role"), "assistant") == 0 && *rnd_str(last, "content");
    p->state = on && !prefill ? LP_LOOKING : LP_CONTENT;
    return 0;
}

void rnd_lfm2_deinit(struct renderer_parser *p)
{
    free(p->impl);
    p->impl = NULL;
}

// pythonLiteralToJSON: single quotes to double, True/False/None.
static char *py_to_json(const char *s, size_t n)
{
    struct buf b;
    buf_init(&b, 0);
    bool in_str = false, esc = false;
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (esc) {
                buf_append_char(&b, c);
                esc = false;
            } else if (c == '\\') {
                buf_append_char(&b, c);
                esc = true;
            } else if (c == quote) {
                buf_append_char(&b, '"');
                in_str = false;
            } else if (quote == '\'' && c == '"') {
                buf_append_str(&b, "\\\"");
            } else {
                buf_append_char(&b, c);
            }
            continue;
        }
        if (c == '\'' || c == '"') {
            in_str = true;
            quote = c;
            buf_append_char(&b, '"');
            continue;
        }
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') {
            size_t j = i + 1;
            while (j < n && ((s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z') ||
                             (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
                j++;
            size_t l = j - i;
            if (l == 4 && memcmp(s + i, "True", 4) == 0)
                buf_append_str(&b, "true");
            else if (l == 5 && memcmp(s + i, "False", 5) == 0)
                buf_append_str(&b, "false");
            else if (l == 4 && memcmp(s + i, "None", 4) == 0)
                buf_append_str(&b, "null");
            else
                buf_append(&b, s + i, l);
            i = j - 1;
            continue;
        }
        buf_append_char(&b, c);
    }
    if (in_str) {
        buf_deinit(&b);
        return NULL;
    }
    return buf_take(&b);
}

// parsePythonLiteral.
static json_t *literal(const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    s += lead;
    n -= lead;
    n -= rnd_trailing_ws(s, n);
    char *t = xstrndup(s, n);
    json_t *v = NULL;
    if (n == 0)
        v = json_string("");
    else if (!strcmp(t, "true") || !strcmp(t, "True"))
        v = json_true();
    else if (!strcmp(t, "false") || !strcmp(t, "False"))
        v = json_false();
    else if (!strcmp(t, "null") || !strcmp(t, "None"))
        v = json_null();
    if (!v) {
        const char *d = t + (*t == '+' || *t == '-');
        if (*d && strspn(d, "0123456789") == strlen(d)) {
            errno = 0;
            long long i = strtoll(t, NULL, 10);
            if (errno == 0)
                v = json_integer(i);
        }
    }
    if (!v && strspn(t, "0123456789+-.eE") == n) {
        char *end;
        double f = strtod(t, &end);
        if (*end == 0 && end != t && isfinite(f))
            v = json_real(f);
    }
    if (!v && (t[0] == '[' || t[0] == '{')) {
        if (jsonx_parse(t, n, &v, NULL) < 0) {
            v = NULL;
            char *j = py_to_json(t, n);
            if (j && jsonx_parse(j, strlen(j), &v, NULL) < 0)
                v = NULL;
            free(j);
        }
    }
    if (!v)
        v = json_stringn(t, n);
    free(t);
    return v ? v : json_string("");
}

// parsePythonArgValue from s[i]: the value and the index after it, or NULL.
static json_t *arg_value(const char *s, size_t n, size_t *i)
{
    if (s[*i] == '\'' || s[*i] == '"') {
        char q = s[(*i)++];
        size_t st = *i;
        while (*i < n) {
            if (s[*i] == '\\' && *i + 1 < n) {
                *i += 2;
                continue;
            }
            if (s[*i] == q) {
                json_t *v = json_stringn(s + st, *i - st);
                (*i)++;
                return v ? v : json_string("");
            }
            (*i)++;
        }
        return NULL;  // unterminated string
    }
    size_t st = *i;
    int dp = 0, ds = 0, dc = 0;
    bool in_str = false, esc = false;
    char q = 0;
    for (; *i < n; (*i)++) {
        char c = s[*i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == q)
                in_str = false;
            continue;
        }
        if (c == '\'' || c == '"') {
            in_str = true;
            q = c;
        } else if (c == '(') {
            dp++;
        } else if (c == ')' && dp > 0) {
            dp--;
        } else if (c == '[') {
            ds++;
        } else if (c == ']' && ds > 0) {
            ds--;
        } else if (c == '{') {
            dc++;
        } else if (c == '}' && dc > 0) {
            dc--;
        } else if (c == ',' && !dp && !ds && !dc) {
            break;
        }
    }
    return literal(s + st, *i - st);
}

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// parsePythonArgs into args; false on a malformed list.
static bool py_args(const char *s, size_t n, json_t *args)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ',' || space(s[i])))
            i++;
        if (i >= n)
            break;
        size_t ks = i;
        while (i < n && s[i] != '=' && s[i] != ',')
            i++;
        if (i >= n || s[i] != '=')
            return false;
        const char *k = s + ks;
        size_t kn = i - ks;
        rnd_trim(&k, &kn);
        if (kn == 0)
            return false;
        i++;
        while (i < n && space(s[i]))
            i++;
        if (i >= n)
            return false;
        json_t *v = arg_value(s, n, &i);
        if (!v)
            return false;
        char *key = xstrndup(k, kn);
        json_object_set_new(args, key, v);
        free(key);
        if (i < n && s[i] == ',')
            i++;
    }
    return true;
}

// findMatchingParen.
static long matching_paren(const char *s, size_t n, size_t open)
{
    int depth = 1;
    for (size_t i = open + 1; i < n; i++) {
        char c = s[i];
        if (c == '(') {
            depth++;
        } else if (c == ')') {
            if (--depth == 0)
                return (long)i;
        } else if (c == '\'' || c == '"') {
            char q = c;
            for (i++; i < n && s[i] != q; i++)
                if (s[i] == '\\' && i + 1 < n)
                    i++;
        }
    }
    return -1;
}

// parseToolCallsContent: "[f(a=1), g()]" into a list of {name, arguments},
// or NULL.
static json_t *py_calls(const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    s += lead;
    n -= lead;
    n -= rnd_trailing_ws(s, n);
    size_t sl = strlen(L_CALL_START), el = strlen(L_CALL_END);
    if (n >= sl && memcmp(s, L_CALL_START, sl) == 0) {
        s += sl;
        n -= sl;
    }
    if (n >= el && memcmp(s + n - el, L_CALL_END, el) == 0)
        n -= el;
    lead = rnd_leading_ws(s, n);
    s += lead;
    n -= lead;
    n -= rnd_trailing_ws(s, n);
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    json_t *list = json_array();
    size_t i = 0;
    while (i < n) {
        i += rnd_leading_ws(s + i, n - i);
        if (i >= n)
            break;
        if (s[i] == ',') {
            i++;
            i += rnd_leading_ws(s + i, n - i);
            if (i >= n)
                break;
        }
        const char *paren = memchr(s + i, '(', n - i);
        if (!paren)
            goto bad;
        size_t po = (size_t)(paren - s);
        const char *nm = s + i;
        size_t nl = po - i;
        rnd_trim(&nm, &nl);
        if (nl == 0)
            goto bad;
        long close = matching_paren(s, n, po);
        if (close < 0)
            goto bad;
        json_t *args = json_object();
        if ((size_t)close > po + 1 && !py_args(s + po + 1, (size_t)close - po - 1, args)) {
            json_decref(args);
            goto bad;
        }
        char *name = xstrndup(nm, nl);
        json_array_append_new(list, json_pack("{s:s,s:o}", "name", name, "arguments", args));
        free(name);
        i = (size_t)close + 1;
    }
    if (json_array_size(list) > 0)
        return list;
bad:
    json_decref(list);
    return NULL;
}

static void emit_calls(struct renderer_parser *p, json_t *list, json_t *calls)
{
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
        rnd_call_append(p, calls, rnd_str(c, "name"), json_incref(json_object_get(c, "arguments")));
}

static bool tool_known(json_t *tools, const char *name)
{
    size_t i, named = 0;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *tn = rnd_str(json_object_get(t, "function"), "name");
        if (*tn)
            named++;
        if (strcmp(tn, name) == 0)
            return true;
    }
    return named == 0;
}

// Steps of the parser, one per state. Each returns 0 when nothing more can
// be done with the text so far, 1 when it made progress.
typedef int (*lfm2_step_fn)(struct renderer_parser *p, struct lfm2 *l, struct rnd_out *o);

// Before anything: a <think> (after white space) opens thinking; other text
// is content.
static int step_looking(struct renderer_parser *p, struct lfm2 *l, struct rnd_out *o)
{
    (void)o;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    size_t ws = rnd_leading_ws(a, n), tl = strlen(L_THINK_OPEN);
    if (n - ws >= tl && memcmp(a + ws, L_THINK_OPEN, tl) == 0) {
        rnd_buf_consume(&p->acc, ws + tl);
        p->state = LP_THINKING;
        l->trim_thinking = true;
        return 1;
    }
    if (ws == n || (n - ws < tl && memcmp(L_THINK_OPEN, a + ws, n - ws) == 0))
        return 0;
    rnd_buf_consume(&p->acc, ws);
    p->state = LP_CONTENT;
    return 1;
}

static int step_thinking(struct renderer_parser *p, struct lfm2 *l, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    size_t tl = strlen(L_THINK_OPEN);
    if (n >= tl && memcmp(a, L_THINK_OPEN, tl) == 0) {
        rnd_buf_consume(&p->acc, tl);
        l->trim_thinking = true;
        return 1;
    }
    if (l->trim_thinking)
        return rnd_trim_lead(p, &l->trim_thinking);
    const char *close = rnd_find(a, n, L_THINK_CLOSE);
    if (close) {
        l->trim_content = !rnd_split_at(p, close, L_THINK_CLOSE, o->thinking);
        p->state = LP_CONTENT;
        return 1;
    }
    rnd_emit_until_partial(p, L_THINK_CLOSE, NULL, o->thinking);
    return 0;
}

static int step_content(struct renderer_parser *p, struct lfm2 *l, struct rnd_out *o)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    if (l->trim_content)
        return rnd_trim_lead(p, &l->trim_content);
    const char *s = rnd_find(a, n, L_CALL_START);
    if (s) {
        size_t before = (size_t)(s - a);
        buf_append(o->content, a, before - rnd_trailing_ws(a, before));
        rnd_buf_consume(&p->acc, before + strlen(L_CALL_START));
        p->state = LP_CALLS;
        return 1;
    }
    buf_append(o->content, a, n);
    buf_reset(&p->acc);
    return 0;
}

// A call list waits for its end marker; another list may follow at once.
static int step_calls(struct renderer_parser *p, struct lfm2 *l, struct rnd_out *o)
{
    (void)l;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    const char *end = rnd_find(a, n, L_CALL_END);
    json_t *list = end ? py_calls(a, (size_t)(end - a)) : NULL;
    if (!list)
        return 0;
    emit_calls(p, list, o->calls);
    json_decref(list);
    size_t after = (size_t)(end - a) + strlen(L_CALL_END);
    if (cstr_starts_with(a + after, L_CALL_START)) {
        after += strlen(L_CALL_START);
    } else {
        after += rnd_leading_ws(a + after, n - after);
        p->state = LP_CONTENT;
    }
    rnd_buf_consume(&p->acc, after);
    return 1;
}

static const lfm2_step_fn lfm2_steps[] = {
    [LP_LOOKING] = step_looking,
    [LP_THINKING] = step_thinking,
    [LP_CONTENT] = step_content,
    [LP_CALLS] = step_calls,
};

// A reply that is only Python-style calls without the markers: the content
// written since content_start becomes those calls, when every one names a
// declared tool.
static void bare_calls(struct renderer_parser *p, struct rnd_out *o, size_t content_start)
{
    json_t *list = py_calls(buf_cstr(o->content) + content_start, o->content->len - content_start);
    bool ok = list != NULL;
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) ok = ok && tool_known(p->tools, rnd_str(c, "name"));
    if (ok) {
        o->content->len = content_start;
        o->content->data[content_start] = 0;
        emit_calls(p, list, o->calls);
    }
    json_decref(list);
}

int rnd_lfm2_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)e;
    struct lfm2 *l = p->impl;
    if (done && p->state == LP_LOOKING) {
        size_t ws = rnd_leading_ws(p->acc.data ? p->acc.data : "", p->acc.len);
        if (!cstr_starts_with(buf_cstr(&p->acc) + ws, L_THINK_OPEN)) {
            rnd_buf_consume(&p->acc, ws);
            p->state = LP_CONTENT;
        }
    }
    size_t content_start = o->content->len;
    size_t calls_before = json_array_size(o->calls);
    while (p->acc.len > 0)
        if (!lfm2_steps[p->state](p, l, o))
            break;
    if (done && json_array_size(o->calls) == calls_before && json_array_size(p->tools) > 0)
        bare_calls(p, o, content_start);
    return 0;
}

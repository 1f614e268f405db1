// Streaming parsers for the model's output (templates.md §10): thinking
// sections between the template's tags, and tool calls after the template's
// tool-call tag. Both accept input in arbitrary pieces and hold back only
// what is still ambiguous (a partial tag, an incomplete JSON object).
#include "template/internal.h"

#include <stdlib.h>
#include <string.h>

bool tmpl_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

size_t tmpl_skip_space(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && tmpl_is_space(s[i]))
        i++;
    return i;
}

size_t tmpl_partial_suffix(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    for (size_t k = tl > 0 ? tl - 1 : 0; k > 0; k--)
        if (k <= n && !memcmp(s + n - k, tag, k))
            return k;
    return 0;
}

const char *tmpl_find(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    if (tl == 0 || tl > n)
        return NULL;
    for (size_t i = 0; i + tl <= n; i++)
        if (s[i] == tag[0] && !memcmp(s + i, tag, tl))
            return s + i;
    return NULL;
}

void tmpl_buf_set(struct buf *b, const char *s, size_t n)
{
    char *tmp = xstrndup(s, n);
    buf_reset(b);
    buf_append(b, tmp, n);
    free(tmp);
}

// ---------------------------------------------------------------------------
// Thinking

enum { TH_LOOK, TH_AFTER_OPEN, TH_THINKING, TH_AFTER_CLOSE, TH_DONE };

void template_think_parser_init(struct template_think_parser *p, const char *open,
                                const char *close, bool start_inside)
{
    p->open = xstrdup(open ? open : "<think>");
    p->close = xstrdup(close ? close : "</think>");
    p->state = start_inside ? TH_AFTER_OPEN : TH_LOOK;
    buf_init(&p->acc, 0);
}

void template_think_parser_deinit(struct template_think_parser *p)
{
    free(p->open);
    free(p->close);
    p->open = p->close = NULL;
    buf_deinit(&p->acc);
}

int template_think_parser_add(struct template_think_parser *p, const char *s, size_t n,
                              struct buf *thinking, struct buf *content)
{
    if (buf_append(&p->acc, s, n))
        return ERR_TOO_LARGE;
    int rc = 0;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t len = p->acc.len;
        switch (p->state) {
        case TH_LOOK: {
            size_t w = tmpl_skip_space(a, len);
            size_t ol = strlen(p->open);
            if (len - w >= ol && !memcmp(a + w, p->open, ol)) {
                size_t r = w + ol;
                r += tmpl_skip_space(a + r, len - r);
                tmpl_buf_set(&p->acc, a + r, len - r);
                p->state = p->acc.len ? TH_THINKING : TH_AFTER_OPEN;
                continue;
            }
            if (len - w < ol && !memcmp(a + w, p->open, len - w))
                return 0;  // only white space, or a prefix of the tag: wait
            rc |= buf_append(content, a, len);
            buf_reset(&p->acc);
            p->state = TH_DONE;
            return rc;
        }
        case TH_AFTER_OPEN: {
            size_t w = tmpl_skip_space(a, len);
            if (w == len) {
                buf_reset(&p->acc);
                return 0;
            }
            tmpl_buf_set(&p->acc, a + w, len - w);
            p->state = TH_THINKING;
            continue;
        }
        case TH_THINKING: {
            const char *c = tmpl_find(a, len, p->close);
            if (c) {
                size_t before = (size_t)(c - a);
                rc |= buf_append(thinking, a, before);
                size_t r = before + strlen(p->close);
                r += tmpl_skip_space(a + r, len - r);
                if (r < len) {
                    rc |= buf_append(content, a + r, len - r);
                    p->state = TH_DONE;
                } else {
                    p->state = TH_AFTER_CLOSE;
                }
                buf_reset(&p->acc);
                return rc;
            }
            size_t keep = tmpl_partial_suffix(a, len, p->close);
            rc |= buf_append(thinking, a, len - keep);
            tmpl_buf_set(&p->acc, a + len - keep, keep);
            return rc;
        }
        case TH_AFTER_CLOSE: {
            size_t w = tmpl_skip_space(a, len);
            if (w < len) {
                rc |= buf_append(content, a + w, len - w);
                p->state = TH_DONE;
            }
            buf_reset(&p->acc);
            return rc;
        }
        default:
            rc |= buf_append(content, a, len);
            buf_reset(&p->acc);
            return rc;
        }
    }
}

int template_think_parser_finish(struct template_think_parser *p, struct buf *thinking,
                                 struct buf *content)
{
    int rc = 0;
    if (p->acc.len) {
        if (p->state == TH_THINKING)
            rc = buf_append(thinking, p->acc.data, p->acc.len);
        else if (p->state == TH_LOOK || p->state == TH_DONE)
            rc = buf_append(content, p->acc.data, p->acc.len);
    }
    buf_reset(&p->acc);
    return rc;
}

bool template_think_starts_inside(const char *prompt, size_t len, const char *open)
{
    while (len && tmpl_is_space(prompt[len - 1]))
        len--;
    size_t ol = open ? strlen(open) : 0;
    return ol && len >= ol && !memcmp(prompt + len - ol, open, ol);
}

char *template_strip_thinking(const char *text, const char *open, const char *close)
{
    struct template_think_parser p;
    template_think_parser_init(&p, open, close, false);
    struct buf th, co;
    buf_init(&th, 0);
    buf_init(&co, 0);
    template_think_parser_add(&p, text, strlen(text), &th, &co);
    template_think_parser_finish(&p, &th, &co);
    template_think_parser_deinit(&p);
    buf_deinit(&th);
    char *r = buf_take(&co);
    return r ? r : xstrdup("");
}

// ---------------------------------------------------------------------------
// Tool calls

enum { TC_LOOK, TC_CALLING, TC_CONTENT };

struct template_tool_parser {
    char *tag;
    bool json_tag;  // "{" or "["
    char **names;
    size_t n_names;
    int state;
    struct buf acc;
    int n_calls;
};

struct template_tool_parser *template_tool_parser_new(const char *tag, json_t *tools)
{
    struct template_tool_parser *p = xcalloc(1, sizeof(*p));
    p->tag = xstrdup(tag && *tag ? tag : "{");
    p->json_tag = !strcmp(p->tag, "{") || !strcmp(p->tag, "[");
    size_t n = json_array_size(tools);
    p->names = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const char *name = json_string_value(
            json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
        if (name && *name)
            p->names[p->n_names++] = xstrdup(name);
    }
    buf_init(&p->acc, 0);
    return p;
}

void template_tool_parser_free(struct template_tool_parser *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_names; i++)
        free(p->names[i]);
    free(p->names);
    free(p->tag);
    buf_deinit(&p->acc);
    free(p);
}

// An object holding JSON of an object (or an object) → new reference.
static json_t *as_object(json_t *v)
{
    if (json_is_object(v))
        return json_incref(v);
    if (json_is_string(v)) {
        json_t *o = json_loads(json_string_value(v), JSON_DECODE_ANY, NULL);
        if (json_is_object(o))
            return o;
        json_decref(o);
    }
    return NULL;
}

static json_t *find_args(json_t *obj, const char *name, int depth)
{
    if (depth > 32)
        return NULL;
    if (json_object_get(obj, "name") || json_object_get(obj, "tool_name")) {
        json_t *a = json_object_get(obj, "arguments");
        if (!a)
            a = json_object_get(obj, "parameters");
        json_t *o = as_object(a);
        return o ? o : json_object();
    }
    json_t *o = as_object(json_object_get(obj, name));
    if (o)
        return o;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        if (json_is_object(v)) {
            json_t *r = find_args(v, name, depth + 1);
            if (r)
                return r;
        } else if (json_is_array(v)) {
            for (size_t i = 0; i < json_array_size(v); i++)
                if (json_is_object(json_array_get(v, i))) {
                    json_t *r = find_args(json_array_get(v, i), name, depth + 1);
                    if (r)
                        return r;
                }
        }
    }
    return NULL;
}

// With s[0] == open: the length up to the matching close, brackets counted
// outside JSON strings (a backslash escapes the next byte, in strings or
// not); 0 while the value is still open.
static size_t bracket_span(const char *s, size_t n, char open, char close)
{
    int depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (esc) {
            esc = false;
            continue;
        }
        if (c == '\\') {
            esc = true;
            continue;
        }
        if (c == '"') {
            in_str = !in_str;
            continue;
        }
        if (in_str)
            continue;
        if (c == open)
            depth++;
        else if (c == close && --depth == 0)
            return i + 1;
    }
    return 0;
}

size_t tmpl_object_span(const char *s, size_t n)
{
    return bracket_span(s, n, '{', '}');
}

// First complete, parseable {...} object in s: its arguments and end offset.
static json_t *scan_object(const char *s, size_t n, const char *name, size_t *end)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '{')
            continue;
        size_t span = tmpl_object_span(s + i, n - i);
        if (!span)
            return NULL;  // incomplete: wait for more
        json_t *o = json_loadb(s + i, span, 0, NULL);
        if (json_is_object(o)) {
            json_t *a = find_args(o, name, 0);
            if (!a)
                a = json_incref(o);
            json_decref(o);
            *end = i + span;
            return a;
        }
        json_decref(o);
        i += span - 1;  // look on after this object
    }
    return NULL;
}

void tmpl_call_append(json_t *calls, int index, const char *name, json_t *args)
{
    json_array_append_new(calls, jsonx_tool_call(index, name, args));
}

// With a "{" or "[" tag: true when, counted outside JSON strings, the
// braces (brackets) of the buffer come back to zero at a closing one: a JSON
// value that was not a call is complete, so the rest is content.
static bool json_done(const char *s, size_t n, char open, char close)
{
    return bracket_span(s, n, open, close) != 0;
}

// One extraction: 1 = a call was emitted, 0 = wait.
static int extract(struct template_tool_parser *p, json_t *calls, bool final)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t len = p->acc.len;
    for (size_t i = 0; i < p->n_names && !final; i++)
        if (tmpl_partial_suffix(a, len, p->names[i]))
            return 0;
    const char *best = NULL;
    size_t best_len = 0, best_i = 0;
    for (size_t i = 0; i < p->n_names; i++) {
        const char *f = tmpl_find(a, len, p->names[i]);
        size_t nl = strlen(p->names[i]);
        if (f && (!best || f < best || (f == best && nl > best_len)))
            best = f, best_len = nl, best_i = i;
    }
    if (!best)
        return 0;
    size_t end;
    json_t *args = scan_object(a, len, p->names[best_i], &end);
    if (!args)
        return 0;
    tmpl_call_append(calls, p->n_calls++, p->names[best_i], args);
    size_t name_end = (size_t)(best - a) + best_len;
    size_t cut = name_end > end ? name_end : end;
    tmpl_buf_set(&p->acc, a + cut, len - cut);
    return 1;
}

int template_tool_parser_add(struct template_tool_parser *p, const char *s, size_t n,
                             struct buf *content, json_t *calls, struct err *e)
{
    if (buf_append(&p->acc, s, n))
        return err_set(e, ERR_TOO_LARGE, "tool call output too large");
    int rc = 0;
    if (p->state == TC_CONTENT) {
        rc = buf_append(content, p->acc.data, p->acc.len);
        buf_reset(&p->acc);
        return rc;
    }
    if (p->state == TC_LOOK) {
        const char *a = p->acc.data;
        size_t len = p->acc.len;
        const char *t = tmpl_find(a, len, p->tag);
        if (p->json_tag) {
            // tools only when the first non-blank character is the tag
            size_t w = tmpl_skip_space(a, len);
            if (w < len && t != a + w) {
                p->state = TC_CONTENT;
                rc = buf_append(content, a, len);
                buf_reset(&p->acc);
                return rc;
            }
            rc = buf_append(content, a, w);
            tmpl_buf_set(&p->acc, a + w, len - w);
            if (w == len)
                return rc;
            p->state = TC_CALLING;
        } else if (t) {
            rc |= buf_append(content, a, (size_t)(t - a));
            tmpl_buf_set(&p->acc, t, len - (size_t)(t - a));
            p->state = TC_CALLING;
        } else {
            size_t keep = tmpl_partial_suffix(a, len, p->tag);
            rc |= buf_append(content, a, len - keep);
            tmpl_buf_set(&p->acc, a + len - keep, keep);
            return rc;
        }
    }
    // calling
    while (extract(p, calls, false) == 1)
        ;
    if (p->json_tag) {
        char o = p->tag[0], c = o == '{' ? '}' : ']';
        if (json_done(p->acc.data ? p->acc.data : "", p->acc.len, o, c)) {
            p->state = TC_CONTENT;
            rc |= buf_append(content, p->acc.data, p->acc.len);
            buf_reset(&p->acc);
        }
    }
    return rc ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
}

int template_tool_parser_finish(struct template_tool_parser *p, struct buf *content, json_t *calls)
{
    int rc = 0;
    // a name prefix at the very end no longer needs more input
    if (p->state == TC_CALLING)
        while (extract(p, calls, true) == 1)
            ;
    if (p->state == TC_LOOK || (p->json_tag && p->n_calls == 0) || p->state == TC_CONTENT)
        rc = buf_append(content, p->acc.data, p->acc.len);
    buf_reset(&p->acc);
    return rc;
}

// ---------------------------------------------------------------------------
// Chained parsers

struct template_output_parser {
    bool thinking;
    struct template_think_parser think;
    // the request's tools, when it has some: the JSON-after-a-tag parser, or a
    // format's own syntax and its state
    struct template_tool_parser *tools;
    const struct template_call_syntax *syntax;
    void *calls;
};

// The chain for explicit tags: open/close NULL = no thinking section; tool
// calls in the syntax given, or (syntax NULL) as JSON after tool_tag as
// template_tool_parser_new takes it.
static struct template_output_parser *parser_new_tags(const char *open, const char *close,
                                                      const char *tool_tag,
                                                      const struct template_call_syntax *syntax,
                                                      bool think, json_t *tools, const char *prompt)
{
    struct template_output_parser *p = xcalloc(1, sizeof(*p));
    if (think && open && close) {
        p->thinking = true;
        bool inside = prompt && template_think_starts_inside(prompt, strlen(prompt), open);
        template_think_parser_init(&p->think, open, close, inside);
    }
    if (json_is_array(tools) && json_array_size(tools) > 0) {
        if (syntax) {
            p->syntax = syntax;
            p->calls = syntax->create(tools);
        } else {
            p->tools = template_tool_parser_new(tool_tag, tools);
        }
    }
    return p;
}

struct template_output_parser *template_output_parser_new(const struct template *t, bool think,
                                                          json_t *tools, const char *prompt)
{
    const char *open = NULL, *close = NULL;
    if (t)
        template_thinking_tags(t, &open, &close);
    return parser_new_tags(open, close, t ? template_tool_tag(t) : "{", NULL, think, tools, prompt);
}

// ---------------------------------------------------------------------------
// Output formats of models on their own Jinja chat template, recognised from
// the template text in the order llama.cpp's chat handling checks them
// (common/chat.cpp, common_chat_templates_apply_jinja): the first row whose
// needles all occur wins. Each row names the thinking tags and the tool-call
// tag the generated text uses, or the syntax whose own parser reads the calls.

static const struct template_chat_format chat_formats[] = {
    // <think>…</think>, then <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    // ```json {…} ```<｜tool▁call▁end｜>…
    {"deepseek_r1",
     {"<｜tool▁calls▁begin｜>"},
     "<think>",
     "</think>",
     "<｜tool▁calls▁begin｜>",
     NULL},
    {"command_r7b",
     {"<|END_THINKING|><|START_ACTION|>"},
     "<|START_THINKING|>",
     "<|END_THINKING|>",
     "<|START_ACTION|>",
     NULL},
    // <tool_call>{"name": …, "arguments": {…}}</tool_call> (Hermes 2/3 Pro, Qwen 2.5 / 3)
    {"hermes_2_pro", {"<tool_call>"}, "<think>", "</think>", "<tool_call>", NULL},
    // NAME\n{…} or all\ntext, then >>>NAME\n{…} / >>>all\ntext (the prompt ends in >>>)
    {"functionary_v3_2", {">>>all"}, NULL, NULL, NULL, &tmpl_calls_functionary_v3_2},
    {"firefunction_v2", {" functools["}, NULL, NULL, "functools[", NULL},
    // <function=NAME>{…}</function>
    {"functionary_v3_1_llama_3_1",
     {"<|start_header_id|>", "<function="},
     NULL,
     NULL,
     "<function=",
     NULL},
    // {"name": …, "parameters": {…}}, or after <|python_tag|> that, NAME.call(ARG=VALUE, ...)
    // or code
    {"llama_3_x",
     {"<|start_header_id|>ipython<|end_header_id|>"},
     NULL,
     NULL,
     NULL,
     &tmpl_calls_llama_3_x},
    // [TOOL_CALLS][{"name": …, "arguments": {…}, "id": …}]
    {"mistral_nemo", {"[TOOL_CALLS]"}, NULL, NULL, "[TOOL_CALLS]", NULL},
    // Action: ```json [{"tool_name": …, "parameters": {…}}] ``` (Command R / R+ tool use)
    {"command_r", {"Action:", "tool_name"}, NULL, NULL, "Action:", NULL},
    // anything else: thinking when the template has the tags, a JSON call as the whole reply
    {"generic", {NULL}, "<think>", "</think>", "{", NULL},
};

const struct template_chat_format *template_chat_format_detect(const char *jinja)
{
    size_t n = sizeof chat_formats / sizeof chat_formats[0];
    for (size_t i = 0; i + 1 < n; i++) {
        bool all = true;
        for (size_t k = 0; k < 2 && chat_formats[i].needles[k]; k++)
            all = all && jinja && strstr(jinja, chat_formats[i].needles[k]);
        if (all)
            return &chat_formats[i];
    }
    return &chat_formats[n - 1];
}

struct template_output_parser *
template_output_parser_new_format(const struct template_chat_format *f, const char *jinja,
                                  bool think, json_t *tools, const char *prompt)
{
    // thinking only where the template itself has the tags
    bool tags =
        f->think_open && jinja && strstr(jinja, f->think_open) && strstr(jinja, f->think_close);
    return parser_new_tags(tags ? f->think_open : NULL, tags ? f->think_close : NULL, f->tool_tag,
                           f->syntax, think, tools, prompt);
}

void template_output_parser_free(struct template_output_parser *p)
{
    if (!p)
        return;
    if (p->thinking)
        template_think_parser_deinit(&p->think);
    template_tool_parser_free(p->tools);
    if (p->syntax)
        p->syntax->destroy(p->calls);
    free(p);
}

static int route_content(struct template_output_parser *p, const char *s, size_t n,
                         struct buf *content, json_t *calls, struct err *e)
{
    if (!n)
        return 0;
    if (p->syntax)
        return p->syntax->add(p->calls, s, n, content, calls, e);
    if (p->tools)
        return template_tool_parser_add(p->tools, s, n, content, calls, e);
    return buf_append(content, s, n) ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
}

int template_output_parser_add(struct template_output_parser *p, const char *s, size_t n,
                               struct buf *thinking, struct buf *content, json_t *calls,
                               struct err *e)
{
    if (!p->thinking)
        return route_content(p, s, n, content, calls, e);
    struct buf c;
    buf_init(&c, 0);
    int rc = template_think_parser_add(&p->think, s, n, thinking, &c);
    if (rc)
        rc = err_set(e, ERR_TOO_LARGE, "output too large");
    if (!rc)
        rc = route_content(p, c.data ? c.data : "", c.len, content, calls, e);
    buf_deinit(&c);
    return rc;
}

int template_output_parser_finish(struct template_output_parser *p, struct buf *thinking,
                                  struct buf *content, json_t *calls, struct err *e)
{
    int rc = 0;
    if (p->thinking) {
        struct buf c;
        buf_init(&c, 0);
        template_think_parser_finish(&p->think, thinking, &c);
        rc = route_content(p, c.data ? c.data : "", c.len, content, calls, e);
        buf_deinit(&c);
    }
    if (!rc && p->syntax)
        rc = p->syntax->finish(p->calls, content, calls, e);
    else if (!rc && p->tools && template_tool_parser_finish(p->tools, content, calls))
        rc = err_set(e, ERR_TOO_LARGE, "output too large");
    return rc;
}

// llama.cpp's reasoning markers of a template (v0.5.0, common/chat-diff-analyzer.cpp,
// analyze_reasoning and the workarounds after it): the text that opens an assistant's
// reasoning (start) and the text that closes it (end), found by rendering probe chats
// and comparing them. llama-server puts them, with nothing between, in front of a
// continued assistant message (chat_formats.c, jinja_llama_continue).
#include "jinja/internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define USER_PROBE      "U_USER_MSG Hello END_U"
#define ASSISTANT_PROBE "A_ASST_MSG I can help END_A"
#define REASONING_PROBE "REASON_PART I am thinking END_R"

// A string slice: the probes' outputs are compared in pieces.
struct slice {
    const char *p;
    size_t n;
};

struct markers {
    struct buf *start, *end;
    bool found;  // llama.cpp's reasoning mode is not NONE
};

static bool src_has(const struct jinja_template *t, const char *needle)
{
    return t->src && strstr(t->src, needle) != NULL;
}

static struct slice trim(struct slice s)
{
    while (s.n && isspace((unsigned char)s.p[0]))
        s.p++, s.n--;
    while (s.n && isspace((unsigned char)s.p[s.n - 1]))
        s.n--;
    return s;
}

static bool slice_eq(struct slice a, struct slice b)
{
    return a.n == b.n && !memcmp(a.p, b.p, a.n);
}

static bool ends_with(struct slice s, struct slice tail)
{
    return s.n >= tail.n && !memcmp(s.p + s.n - tail.n, tail.p, tail.n);
}

static void set_slice(struct buf *b, struct slice s)
{
    buf_reset(b);
    buf_append(b, s.p, s.n);
}

// ---------------------------------------------------------------------------
// Segments: the text split into markers ("<...>", "[...]") and the text between.

struct seg {
    struct slice s;
    bool marker;
};

// The segments of s (an array the caller frees, count in *n), NULL when out of memory.
static struct seg *segmentize(struct slice s, size_t *n)
{
    struct seg *v = malloc((s.n + 1) * sizeof *v);
    size_t k = 0, border = 0;
    char open = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (!open && (c == '<' || c == '[')) {
            if (border < i)
                v[k++] = (struct seg){{s.p + border, i - border}, false};
            border = i;
            open = c;
        } else if (open && c == (open == '<' ? '>' : ']')) {
            v[k++] = (struct seg){{s.p + border, i - border + 1}, true};
            border = i + 1;
            open = 0;
        }
    }
    if (border < s.n)
        v[k++] = (struct seg){{s.p + border, s.n - border}, false};
    *n = k;
    return v;
}

// The segments that are not white space alone, compacted in place.
static size_t prune_blank(struct seg *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (trim(v[i].s).n)
            v[k++] = v[i];
    return k;
}

static bool seg_eq(const struct seg *a, const struct seg *b)
{
    return a->marker == b->marker && slice_eq(a->s, b->s);
}

// The text of segments [from, to) (contiguous in their source).
static struct slice span(const struct seg *v, size_t from, size_t to)
{
    if (from >= to)
        return (struct slice){"", 0};
    return (struct slice){v[from].s.p, (size_t)(v[to - 1].s.p + v[to - 1].s.n - v[from].s.p)};
}

// ---------------------------------------------------------------------------
// llama.cpp's diff of two renderings (calculate_diff_split): whole segments in common
// at both ends are dropped, then, between text segments, common bytes; what is left of
// each side is its difference.

struct diff {
    struct slice left, right;
};

// Drops the segments both sides share at their ends; the ranges left, as [*ls, *le]
// and [*rs, *re] with *lx / *rx when that side is used up.
static void strip_common(const struct seg *l, const struct seg *r, size_t *ls, size_t *le,
                         size_t *rs, size_t *re, bool *lx, bool *rx)
{
    while (*ls != *le && *rs != *re) {
        bool moved = false;
        if (seg_eq(&l[*ls], &r[*rs]))
            (*ls)++, (*rs)++, moved = true;
        if (seg_eq(&l[*le], &r[*re])) {
            if (*ls != *le)
                (*le)--;
            else
                *lx = true;
            if (*rs != *re)
                (*re)--;
            else
                *rx = true;
            moved = true;
        }
        if (!moved)
            break;
    }
    if (*ls == *le && *rs != *re) {
        if (seg_eq(&l[*ls], &r[*re]))
            (*re)--, *lx = true;
        else if (seg_eq(&l[*ls], &r[*rs]))
            (*rs)++, *lx = true;
    } else if (*rs == *re && *ls != *le) {
        if (seg_eq(&l[*le], &r[*rs]))
            (*le)--, *rx = true;
        else if (seg_eq(&l[*ls], &r[*rs]))
            (*ls)++, *rx = true;
    } else if (*ls == *le && *rs == *re && seg_eq(&l[*ls], &r[*rs]) && l[*ls].marker) {
        *lx = *rx = true;
    }
}

static int diff_split(struct slice a, struct slice b, struct diff *d)
{
    size_t nl, nr;
    struct seg *l = segmentize(a, &nl), *r = segmentize(b, &nr);
    int rc = l && r ? 0 : ERR_NOMEM;
    *d = (struct diff){a, b};
    if (rc || !nl || !nr) {
        if (!rc)
            d->left = nl ? a : (struct slice){"", 0}, d->right = nr ? b : (struct slice){"", 0};
        goto done;
    }
    size_t ls = 0, le = nl - 1, rs = 0, re = nr - 1;
    bool lx = false, rx = false;
    strip_common(l, r, &ls, &le, &rs, &re, &lx, &rx);
    bool text_suffix = !l[le].marker && !r[re].marker, text_prefix = !l[ls].marker && !r[rs].marker;
    struct slice x = span(l, ls, lx ? le : le + 1), y = span(r, rs, rx ? re : re + 1);
    size_t suf = 0, pre = 0;
    while (text_suffix && suf < x.n && suf < y.n && x.p[x.n - 1 - suf] == y.p[y.n - 1 - suf])
        suf++;
    while (text_prefix && pre < x.n - suf && pre < y.n - suf && x.p[pre] == y.p[pre])
        pre++;
    d->left = (struct slice){x.p + pre, x.n - pre - suf};
    d->right = (struct slice){y.p + pre, y.n - pre - suf};
    // a left side that is all of the right side's beginning: the right's rest
    if (!d->left.n && d->right.n && a.n <= b.n && !memcmp(a.p, b.p, a.n))
        d->right = (struct slice){b.p + a.n, b.n - a.n};
done:
    free(l);
    free(r);
    return rc;
}

// ---------------------------------------------------------------------------
// The probes

// The template rendered with llama.cpp's probe context (add_generation_prompt only
// when set, as llama.cpp leaves it out otherwise); false when the template fails.
static bool probe(const struct jinja_template *t, const struct jinja_chat_req *req,
                  json_t *messages, json_t *tools, bool gen_prompt, bool thinking, struct buf *out)
{
    json_t *ctx = json_pack("{s:o,s:s,s:s,s:b}", "messages", messages, "bos_token",
                            req->bos_token ? req->bos_token : "", "eos_token",
                            req->eos_token ? req->eos_token : "", "enable_thinking", thinking);
    if (ctx && tools)
        json_object_set_new(ctx, "tools", tools);
    else
        json_decref(tools);
    if (ctx && gen_prompt)
        json_object_set_new(ctx, "add_generation_prompt", json_true());
    struct jinja_limits lim = {.llama_cpp = true};
    bool ok = ctx && jinja_render(t, ctx, &lim, out, NULL) == 0;
    json_decref(ctx);
    return ok;
}

// The end of a marker ("<...>" or "[...]") that starts at s[i], or 0.
static size_t marker_end(const char *s, size_t i)
{
    char close = s[i] == '<' ? '>' : s[i] == '[' ? ']' : 0;
    const char *c = close ? strchr(s + i + 1, close) : NULL;
    return c ? (size_t)(c - s) + 1 : 0;
}

// The marker (and the white space after it) that ends right before s[pos], white space
// between them allowed; its start, or pos when there is none.
static size_t marker_before(const char *s, size_t pos)
{
    size_t i = pos;
    while (i > 0 && isspace((unsigned char)s[i - 1]))
        i--;
    if (i == 0 || (s[i - 1] != '>' && s[i - 1] != ']'))
        return pos;
    char close = s[i - 1], open = close == '>' ? '<' : '[';
    size_t found = pos;
    for (size_t k = i - 1; k-- > 0 && s[k] != close;)
        if (s[k] == open)
            found = k;
    return found;
}

// The markers around the reasoning probe in s: the one before it (with white space
// between) when there is one after it too, and the one after it (with the white space
// after it, and the white space before it when both are found and lead_space). False
// when there is no marker after it.
static bool around_reasoning(const char *s, bool lead_space, struct markers *m)
{
    const char *hit = strstr(s, REASONING_PROBE);
    if (!hit)
        return false;
    size_t pos = (size_t)(hit - s), q = pos + strlen(REASONING_PROBE), i = q, e;
    while (isspace((unsigned char)s[i]))
        i++;
    if ((e = marker_end(s, i)) == 0)
        return false;
    while (isspace((unsigned char)s[e]))
        e++;
    size_t pre = marker_before(s, pos);
    size_t from = pre < pos && lead_space ? q : i;
    if (pre < pos)  // wrapped: both markers
        set_slice(m->start, (struct slice){s + pre, pos - pre});
    set_slice(m->end, (struct slice){s + from, e - from});
    return m->found = true;
}

// An assistant message's reasoning rendered: the markers around it.
static void reasoning_presence(const struct jinja_template *t, const struct jinja_chat_req *req,
                               struct markers *m)
{
    json_t *msgs =
        json_pack("[{s:s,s:s},{s:s,s:s,s:s}]", "role", "user", "content", USER_PROBE, "role",
                  "assistant", "content", ASSISTANT_PROBE, "reasoning_content", REASONING_PROBE);
    struct buf b;
    buf_init(&b, 1 << 20);
    if (msgs && probe(t, req, msgs, NULL, false, true, &b))
        around_reasoning(buf_cstr(&b), true, m);
    buf_deinit(&b);
}

// The last occurrence of needle in s, or NULL.
static const char *last_of(struct slice s, struct slice needle)
{
    for (size_t i = s.n >= needle.n ? s.n - needle.n + 1 : 0; i-- > 0;)
        if (!memcmp(s.p + i, needle.p, needle.n))
            return s.p + i;
    return NULL;
}

// Both renderings differ at their ends: what one has after the other's last 64 bytes,
// when that is two markers, is the start and the end.
static void tail_markers(struct slice a, struct slice b, struct markers *m)
{
    for (int dir = 0; dir < 2; dir++) {
        struct slice base = dir ? a : b, ext = dir ? b : a;
        size_t len = base.n < 64 ? base.n : 64;
        const char *at = last_of(ext, (struct slice){base.p + base.n - len, len});
        if (!at || (size_t)(at - ext.p) + len >= ext.n)
            continue;
        size_t off = (size_t)(at - ext.p) + len, n;
        struct slice extra = trim((struct slice){ext.p + off, ext.n - off});
        struct seg *v = extra.n ? segmentize(extra, &n) : NULL;
        if (v && (n = prune_blank(v, n)) == 2 && v[0].marker && v[1].marker) {
            if (!m->start->len)
                set_slice(m->start, v[0].s);
            if (!m->end->len)
                set_slice(m->end, v[1].s);
            m->found = true;
            free(v);
            return;
        }
        free(v);
    }
}

// Thinking off against on, after one user message: what the generation prompt gains or
// loses.
static void reasoning_switch(const struct jinja_template *t, const struct jinja_chat_req *req,
                             struct markers *m)
{
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", USER_PROBE);
    struct buf off, on;
    buf_init(&off, 1 << 20);
    buf_init(&on, 1 << 20);
    struct diff d;
    if (msgs && probe(t, req, json_incref(msgs), NULL, true, false, &off) &&
        probe(t, req, json_incref(msgs), NULL, true, true, &on)) {
        struct slice a = {buf_cstr(&off), off.len}, b = {buf_cstr(&on), on.len};
        if (diff_split(a, b, &d) == 0) {
            struct slice lt = trim(d.left), rt = trim(d.right);
            if (!lt.n && d.right.n) {
                if (rt.n && ends_with(b, rt) && !m->start->len) {
                    set_slice(m->start, d.right);
                    m->found = true;
                }
            } else if (!rt.n && d.left.n) {
                if (lt.n && ends_with(a, lt) && !m->end->len) {
                    size_t n;
                    struct seg *v = segmentize(a, &n);
                    if (v && (n = prune_blank(v, n)) >= 2 && slice_eq(v[n - 1].s, lt) &&
                        v[n - 2].marker)
                        set_slice(m->start, v[n - 2].s);
                    free(v);
                    set_slice(m->end, d.left);
                    m->found = true;
                }
            } else if (lt.n && rt.n) {
                tail_markers(a, b, m);
            }
        }
    }
    if (m->end->len)
        m->found = true;
    json_decref(msgs);
    buf_deinit(&off);
    buf_deinit(&on);
}

// A template that shows reasoning only beside tool calls: the markers there. llama.cpp
// asks this of templates that use an assistant's tool calls; a template whose text never
// names them is taken as one that does not.
static void reasoning_scope(const struct jinja_template *t, const struct jinja_chat_req *req,
                            struct markers *m)
{
    if (!src_has(t, "tool_calls"))
        return;
    static const char tools_json[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"FFF_FIRST_FUN_F\",\"description\":"
        "\"Test function foo\",\"parameters\":{\"type\":\"object\",\"properties\":{"
        "\"AA_ARG_FST_AA\":{\"type\":\"string\",\"description\":\"First argument\"},"
        "\"BB_ARG_SND_BB\":{\"type\":\"string\",\"description\":\"Second argument\"}},"
        "\"required\":[]}}},{\"type\":\"function\",\"function\":{\"name\":\"SSS_SECOND_FUN_S\","
        "\"description\":\"Test function bar\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"AA_ARG_FST_AA\":{\"type\":\"string\",\"description\":\"First "
        "argument\"},\"BB_ARG_SND_BB\":{\"type\":\"string\",\"description\":\"Second "
        "argument\"}},\"required\":[]}}}]";
    static const char calls_json[] =
        "[{\"id\":\"call00001\",\"type\":\"function\",\"function\":{\"name\":"
        "\"FFF_FIRST_FUN_F\",\"arguments\":{\"AA_ARG_FST_AA\":\"VVVV\",\"BB_ARG_SND_BB\":"
        "\"XXXX\"}}}]";
    json_t *a =
        json_pack("[{s:s,s:s},{s:s,s:s,s:s}]", "role", "user", "content", USER_PROBE, "role",
                  "assistant", "content", ASSISTANT_PROBE, "reasoning_content", REASONING_PROBE);
    json_t *b = json_pack("[{s:s,s:s},{s:s,s:n,s:s,s:o}]", "role", "user", "content", USER_PROBE,
                          "role", "assistant", "content", "reasoning_content", REASONING_PROBE,
                          "tool_calls", json_loads(calls_json, 0, NULL));
    struct buf x, y;
    buf_init(&x, 1 << 20);
    buf_init(&y, 1 << 20);
    bool in_a = a && probe(t, req, a, json_loads(tools_json, 0, NULL), false, true, &x);
    bool in_b = b && probe(t, req, b, json_loads(tools_json, 0, NULL), false, true, &y);
    // reasoning only beside the calls: the markers there, or none (llama.cpp keeps a
    // start it found before when only an end follows the reasoning)
    if (in_a && in_b && !strstr(buf_cstr(&x), REASONING_PROBE) &&
        strstr(buf_cstr(&y), REASONING_PROBE))
        m->found = around_reasoning(buf_cstr(&y), false, m);
    buf_deinit(&x);
    buf_deinit(&y);
}

// A buffer's text without the white space around it.
static void trim_buf(struct buf *b)
{
    struct slice s = trim((struct slice){buf_cstr(b), b->len});
    if (b->data && s.n)
        memmove(b->data, s.p, s.n);
    if (b->data)
        b->data[s.n] = 0;
    b->len = s.n;
}

// llama.cpp's corrections for templates its analysis misreads.
static void reasoning_workarounds(const struct jinja_template *t, struct markers *m)
{
    bool old_qwen = src_has(t, "content.split('</think>')") && !src_has(t, "reasoning_content") &&
                    !src_has(t, "<SPECIAL_12>") && !m->found;
    bool granite = src_has(t, "Write your thoughts between <think></think> and write your "
                              "response between <response></response>");
    bool nemotron_v2 = src_has(t, "<SPECIAL_10>") && src_has(t, "<SPECIAL_11>") &&
                       src_has(t, "<SPECIAL_12>") && src_has(t, "<TOOL_RESPONSE>");
    if (old_qwen || granite || nemotron_v2) {
        set_slice(m->start,
                  (struct slice){nemotron_v2 ? "<think>\n" : "<think>", nemotron_v2 ? 8 : 7});
        set_slice(m->end, (struct slice){"</think>", 8});
        m->found = true;
    }
    if (src_has(t, "laguna_glm_thinking")) {  // Laguna: the bare tags
        trim_buf(m->start);
        trim_buf(m->end);
    }
}

void jinja_llama_reasoning(const struct jinja_template *t, const struct jinja_chat_req *req,
                           struct buf *start, struct buf *end)
{
    struct markers m = {start, end, false};
    reasoning_presence(t, req, &m);
    reasoning_switch(t, req, &m);
    reasoning_scope(t, req, &m);
    reasoning_workarounds(t, &m);
}

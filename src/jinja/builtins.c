// Built-ins: the filters, tests, Python methods and globals chat templates
// call, each behaving as Jinja2 3.x (filters.py, tests.py) and Python's
// str / dict / list do. Filters and tests are tables keyed by name.
#include "jinja/internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

struct jv jr_arg(const struct jcall *c, size_t i, const char *name)
{
    if (name)
        for (size_t k = 0; k < c->n_kw; k++)
            if (!strcmp(c->kw_names[k], name))
                return c->kw[k];
    if (i < c->n_pos)
        return c->pos[i];
    return jv_undef(name);
}

static struct jv list_value(struct jv_list *l)
{
    return (struct jv){.t = JV_LIST, .u.l = l};
}

static int need_str(struct jrender *r, int line, struct jv v, const char *what)
{
    if (v.t == JV_STR)
        return 0;
    return jr_fail(r, line, "%s expects a string, got %s", what, jv_type_name(v));
}

static int64_t int_or(struct jv v, int64_t dflt)
{
    return v.t == JV_INT ? v.u.i : v.t == JV_BOOL ? v.u.b : dflt;
}

// ---------------------------------------------------------------------------
// String helpers

typedef uint32_t (*case_fn)(uint32_t);

// Maps code points: mode 0 = fn on all; 't' = title (Python str.title);
// 'c' = capitalize; 'w' = Jinja's title filter (words split at space - ( { [ <).
static int map_case(struct jrender *r, struct jv s, case_fn fn, int mode, struct jv *out)
{
    struct buf b;
    buf_init(&b, 0);
    bool prev_cased = false, first = true;
    size_t i = 0;
    int rc = 0;
    while (i < s.u.s.n && !rc) {
        size_t w;
        uint32_t cp = utf8_decode((const unsigned char *)s.u.s.p + i, s.u.s.n - i, &w);
        if (cp == UTF8_INVALID) {  // invalid byte: copy as is
            rc = buf_append_char(&b, s.u.s.p[i]);
            i++;
            continue;
        }
        uint32_t o = cp;
        if (mode == 0) {
            o = fn(cp);
        } else if (mode == 't') {
            o = prev_cased ? utf8_tolower(cp) : utf8_totitle(cp);
            prev_cased = utf8_is_cased(cp);
        } else if (mode == 'c') {
            o = first ? utf8_totitle(cp) : utf8_tolower(cp);
        } else if (mode == 'w') {
            bool sep = cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '\f' ||
                       cp == '\v' || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            o = sep ? cp : prev_cased ? utf8_tolower(cp) : utf8_toupper(cp);
            prev_cased = !sep;
        }
        first = false;
        rc = buf_append_utf8(&b, o);
        i += w;
    }
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

static bool in_chars(char c, struct jv chars)
{
    if (chars.t != JV_STR)
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
    return memchr(chars.u.s.p, c, chars.u.s.n) != NULL;
}

static struct jv strip(struct jv s, struct jv chars, bool left, bool right)
{
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    while (left && n && in_chars(*p, chars))
        p++, n--;
    while (right && n && in_chars(p[n - 1], chars))
        n--;
    return jv_str(p, n);
}

static int str_replace(struct jrender *r, struct jv s, struct jv old, struct jv new_, int64_t count,
                       struct jv *out)
{
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    int rc = 0;
    size_t i = 0;
    int64_t done = 0;
    if (old.u.s.n == 0) {  // Python inserts new between every character
        while (!rc && i <= s.u.s.n) {
            if (count < 0 || done < count) {
                rc = buf_append(&b, new_.u.s.p, new_.u.s.n);
                done++;
            }
            if (i == s.u.s.n)
                break;
            size_t j = i + 1;
            while (j < s.u.s.n && ((unsigned char)s.u.s.p[j] & 0xc0) == 0x80)
                j++;
            if (!rc)
                rc = buf_append(&b, s.u.s.p + i, j - i);
            i = j;
        }
    } else {
        while (!rc && i < s.u.s.n) {
            const char *hit = (count < 0 || done < count)
                                  ? memmem(s.u.s.p + i, s.u.s.n - i, old.u.s.p, old.u.s.n)
                                  : NULL;
            if (!hit) {
                rc = buf_append(&b, s.u.s.p + i, s.u.s.n - i);
                break;
            }
            size_t k = (size_t)(hit - s.u.s.p);
            rc = buf_append(&b, s.u.s.p + i, k - i);
            if (!rc)
                rc = buf_append(&b, new_.u.s.p, new_.u.s.n);
            i = k + old.u.s.n;
            done++;
        }
    }
    if (rc == ERR_TOO_LARGE)
        rc = jr_oom(r);
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

// str.split() with no separator, from the left: runs of white space
// separate the parts and no part is empty.
static int split_ws(struct jrender *r, const char *p, size_t n, int64_t maxsplit, struct jv_list *l)
{
    int rc = 0;
    size_t i = 0;
    int64_t k = 0;
    while (!rc) {
        while (i < n && in_chars(p[i], jv_none()))
            i++;
        if (i >= n)
            break;
        if (maxsplit >= 0 && k == maxsplit) {  // the rest, trailing space kept
            rc = jv_list_push(r, l, jv_str(p + i, n - i));
            break;
        }
        size_t j = i;
        while (j < n && !in_chars(p[j], jv_none()))
            j++;
        rc = jv_list_push(r, l, jv_str(p + i, j - i));
        k++;
        i = j;
    }
    return rc;
}

// str.rsplit() with no separator: as split_ws, from the right, so the parts
// come out last first.
static int rsplit_ws(struct jrender *r, const char *p, size_t n, int64_t maxsplit,
                     struct jv_list *parts)
{
    int rc = 0;
    size_t e = n;
    int64_t k = 0;
    while (!rc) {
        while (e > 0 && in_chars(p[e - 1], jv_none()))
            e--;
        if (e == 0)
            break;
        if (maxsplit >= 0 && k == maxsplit) {  // the rest, leading space kept
            rc = jv_list_push(r, parts, jv_str(p, e));
            break;
        }
        size_t j = e;
        while (j > 0 && !in_chars(p[j - 1], jv_none()))
            j--;
        rc = jv_list_push(r, parts, jv_str(p + j, e - j));
        k++;
        e = j;
    }
    return rc;
}

// str.split(sep) from the left: empty parts are kept.
static int split_sep(struct jrender *r, const char *p, size_t n, struct jv sep, int64_t maxsplit,
                     struct jv_list *l)
{
    int rc = 0;
    size_t i = 0;
    int64_t k = 0;
    for (;;) {
        const char *hit =
            (maxsplit < 0 || k < maxsplit) ? memmem(p + i, n - i, sep.u.s.p, sep.u.s.n) : NULL;
        if (!hit) {
            rc = jv_list_push(r, l, jv_str(p + i, n - i));
            break;
        }
        size_t at = (size_t)(hit - p);
        if ((rc = jv_list_push(r, l, jv_str(p + i, at - i))) || (rc = jr_step(r)))
            break;
        i = at + sep.u.s.n;
        k++;
    }
    return rc;
}

// str.rsplit(sep): as split_sep, from the right, parts last first.
static int rsplit_sep(struct jrender *r, const char *p, size_t n, struct jv sep, int64_t maxsplit,
                      struct jv_list *parts)
{
    int rc = 0;
    size_t e = n;
    int64_t k = 0;
    for (;;) {
        size_t at = SIZE_MAX;
        if ((maxsplit < 0 || k < maxsplit) && e >= sep.u.s.n)
            for (size_t j = e - sep.u.s.n + 1; j-- > 0;)
                if (!memcmp(p + j, sep.u.s.p, sep.u.s.n)) {
                    at = j;
                    break;
                }
        if (at == SIZE_MAX) {
            rc = jv_list_push(r, parts, jv_str(p, e));
            break;
        }
        if ((rc = jv_list_push(r, parts, jv_str(p + at + sep.u.s.n, e - at - sep.u.s.n))) ||
            (rc = jr_step(r)))
            break;
        e = at;
        k++;
    }
    return rc;
}

// Python str.split / rsplit.
static int str_split(struct jrender *r, int line, struct jv s, struct jv sep, int64_t maxsplit,
                     bool from_right, struct jv *out)
{
    struct jv_list *l = jv_list_new(r, 0);
    if (!l)
        return jr_oom(r);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    int rc = 0;
    if (sep.t == JV_STR && sep.u.s.n == 0)
        return jr_fail(r, line, "%s", "empty separator");
    struct jv_list *parts = jv_list_new(r, 0);  // rsplit's parts, last first
    if (!parts)
        return jr_oom(r);
    if (!from_right) {
        rc =
            sep.t != JV_STR ? split_ws(r, p, n, maxsplit, l) : split_sep(r, p, n, sep, maxsplit, l);
    } else {
        rc = sep.t != JV_STR ? rsplit_ws(r, p, n, maxsplit, parts)
                             : rsplit_sep(r, p, n, sep, maxsplit, parts);
        for (size_t i = parts->n; !rc && i-- > 0;)
            rc = jv_list_push(r, l, parts->items[i]);
    }
    *out = list_value(l);
    return rc;
}

static bool str_affix(struct jv s, struct jv a, bool end)
{
    if (a.t != JV_STR || a.u.s.n > s.u.s.n)
        return false;
    return !memcmp(s.u.s.p + (end ? s.u.s.n - a.u.s.n : 0), a.u.s.p, a.u.s.n);
}

// startswith / endswith take a string or a tuple of strings.
static int affix_test(struct jrender *r, int line, struct jv s, struct jv a, bool end, bool *out)
{
    if (a.t == JV_LIST) {
        *out = false;
        for (size_t i = 0; i < a.u.l->n; i++)
            *out |= str_affix(s, a.u.l->items[i], end);
        return 0;
    }
    if (a.t != JV_STR)
        return jr_fail(r, line, "%swith first arg must be str or a tuple of str, not %s",
                       end ? "ends" : "starts", jv_type_name(a));
    *out = str_affix(s, a, end);
    return 0;
}

// ---------------------------------------------------------------------------
// Attribute lookup for map / selectattr / sort(attribute=) / join(attribute=):
// "a.b" or "0" path, item lookup, undefined when missing.
static struct jv attr_path(struct jrender *r, struct jv v, struct jv attr)
{
    if (attr.t == JV_INT) {
        if (v.t == JV_LIST && attr.u.i >= 0 && (size_t)attr.u.i < v.u.l->n)
            return v.u.l->items[attr.u.i];
        return jv_undef(".index");
    }
    if (attr.t != JV_STR)
        return jv_undef(".attribute");
    const char *p = attr.u.s.p, *end = p + attr.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        struct jv next = jv_undef(".attribute");
        if (v.t == JV_DICT) {
            struct jv *x = jv_dict_get(v.u.d, jv_str(p, n));
            if (x)
                next = *x;
        } else if (v.t == JV_LIST && n > 0 && p[0] >= '0' && p[0] <= '9') {
            size_t idx = 0;
            for (size_t i = 0; i < n && idx < SIZE_MAX / 16; i++)
                idx = idx * 10 + (size_t)(p[i] - '0');
            if (idx < v.u.l->n)
                next = v.u.l->items[idx];
        } else if (v.t != JV_UNDEF) {
            struct jv m;
            if (jr_method(r, v, p, n, &m))
                next = m;
        }
        v = next;
        if (!dot)
            break;
        p = dot + 1;
    }
    return v;
}

// ---------------------------------------------------------------------------
// Sorting (stable merge sort over values).

struct sort_ctx {
    struct jrender *r;
    struct jv attr;  // key attribute, or undefined
    bool case_sens;
    bool by_value;  // dictsort by value: items are (k, v) pairs
    bool pairs;
    int err;
};

static struct jv sort_key(struct sort_ctx *s, struct jv v)
{
    if (s->pairs)
        v = v.u.l->items[s->by_value ? 1 : 0];
    if (s->attr.t != JV_UNDEF)
        v = attr_path(s->r, v, s->attr);
    return v;
}

static int sort_cmp(struct sort_ctx *s, struct jv a, struct jv b)
{
    a = sort_key(s, a);
    b = sort_key(s, b);
    if (!s->case_sens && a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        for (size_t i = 0; i < n; i++) {
            unsigned char x = (unsigned char)a.u.s.p[i], y = (unsigned char)b.u.s.p[i];
            if (x >= 'A' && x <= 'Z')
                x += 32;
            if (y >= 'A' && y <= 'Z')
                y += 32;
            if (x != y)
                return x < y ? -1 : 1;
        }
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    int c = jv_compare(s->r, a, b);
    if (c == -2) {
        s->err = ERR_FORMAT;
        return 0;
    }
    return c;
}

static int sort_list(struct jrender *r, struct jv_list *l, struct sort_ctx *s, bool reverse)
{
    struct jv *tmp = arena_alloc(r->a, (l->n ? l->n : 1) * sizeof *tmp);
    if (!tmp)
        return jr_oom(r);
    for (size_t width = 1; width < l->n; width *= 2) {
        for (size_t lo = 0; lo < l->n; lo += 2 * width) {
            size_t mid = lo + width < l->n ? lo + width : l->n;
            size_t hi = lo + 2 * width < l->n ? lo + 2 * width : l->n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c = sort_cmp(s, l->items[i], l->items[j]);
                if (reverse)
                    c = -c;
                tmp[k++] = c <= 0 ? l->items[i++] : l->items[j++];
            }
            while (i < mid)
                tmp[k++] = l->items[i++];
            while (j < hi)
                tmp[k++] = l->items[j++];
        }
        jv_copy(l->items, tmp, l->n * sizeof *tmp);
        if (s->err)
            return s->err;
        int rc = jr_step(r);
        if (rc)
            return rc;
    }
    return s->err;
}

static int copy_list(struct jrender *r, struct jv v, struct jv_list **out)
{
    struct jv_list *src;
    int rc = jv_iterate(r, v, &src);
    if (rc)
        return rc;
    struct jv_list *l = jv_list_new(r, src->n);
    if (!l)
        return jr_oom(r);
    if (src->n)
        jv_copy(l->items, src->items, src->n * sizeof *l->items);
    l->n = src->n;
    *out = l;
    return 0;
}

static int items_list(struct jrender *r, int line, struct jv v, struct jv *out)
{
    if (v.t == JV_UNDEF) {
        struct jv_list *l = jv_list_new(r, 0);
        *out = list_value(l);
        return l ? 0 : jr_oom(r);
    }
    if (v.t != JV_DICT)
        return jr_fail(r, line, "can only get item pairs from a mapping, not %s", jv_type_name(v));
    struct jv_list *l = jv_list_new(r, v.u.d->n);
    if (!l)
        return jr_oom(r);
    for (size_t i = 0; i < v.u.d->n; i++) {
        struct jv_list *pair = jv_list_new(r, 2);
        if (!pair)
            return jr_oom(r);
        pair->tuple = true;
        pair->items[0] = v.u.d->keys[i];
        pair->items[1] = v.u.d->vals[i];
        pair->n = 2;
        l->items[l->n++] = list_value(pair);
    }
    *out = list_value(l);
    return 0;
}

// ---------------------------------------------------------------------------
// Filters

typedef int (*filter_fn)(struct jrender *r, int line, struct jv in, const struct jcall *c,
                         struct jv *out);

static int f_tojson(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line;
    struct jv indent = jr_arg(c, 0, "indent"), seps = jr_arg(c, 1, "separators");
    struct jv_json_opts o = {.indent =
                                 indent.t == JV_INT ? (int)(indent.u.i > 64 ? 64 : indent.u.i) : -1,
                             .item_sep = indent.t == JV_INT ? "," : ", ",
                             .key_sep = ": ",
                             .sort_keys = jv_truthy(jr_arg(c, 99, "sort_keys")),
                             .ensure_ascii = jv_truthy(jr_arg(c, 99, "ensure_ascii"))};
    if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->items[0].t == JV_STR &&
        seps.u.l->items[1].t == JV_STR) {
        // the separators live in the arena; NUL-terminate copies
        struct jv a, b;
        if (jv_str_new(r, seps.u.l->items[0].u.s.p, seps.u.l->items[0].u.s.n, &a) ||
            jv_str_new(r, seps.u.l->items[1].u.s.p, seps.u.l->items[1].u.s.n, &b))
            return ERR_TOO_LARGE;
        o.item_sep = a.u.s.p;
        o.key_sep = b.u.s.p;
    }
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    int rc = jv_to_json(r, in, &o, &b);
    if (rc == ERR_TOO_LARGE && r->e && !r->e->code)
        rc = jr_oom(r);
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

static int f_string(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line, (void)c;
    return jv_stringify(r, in, out);
}

static int f_trim(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line;
    int rc = jv_stringify(r, in, &in);
    if (!rc)
        *out = strip(in, jr_arg(c, 0, "chars"), true, true);
    return rc;
}

static int f_length(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line, (void)c;
    int64_t n;
    int rc = jv_length(r, in, &n);
    *out = jv_int(n);
    return rc;
}

static int f_join(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line;
    struct jv_list *l = NULL;
    struct jv sep = jr_arg(c, 0, "d"), attr = jr_arg(c, 1, "attribute");
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    if (sep.t != JV_UNDEF && (rc = jv_stringify(r, sep, &sep)))
        return rc;
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    for (size_t i = 0; !rc && i < l->n; i++) {
        if (i && sep.t == JV_STR)
            rc = buf_append(&b, sep.u.s.p, sep.u.s.n);
        struct jv v = attr.t != JV_UNDEF ? attr_path(r, l->items[i], attr) : l->items[i];
        if (!rc)
            rc = jv_to_str(r, v, &b);
    }
    if (rc == ERR_TOO_LARGE && r->e && !r->e->code)
        rc = jr_oom(r);
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

static int case_filter(struct jrender *r, struct jv in, case_fn fn, int mode, struct jv *out)
{
    int rc = jv_stringify(r, in, &in);
    return rc ? rc : map_case(r, in, fn, mode, out);
}
static int f_upper(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    return case_filter(r, in, utf8_toupper, 0, out);
}
static int f_lower(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    return case_filter(r, in, utf8_tolower, 0, out);
}
static int f_title(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    return case_filter(r, in, NULL, 'w', out);
}
static int f_capitalize(struct jrender *r, int line, struct jv in, const struct jcall *c,
                        struct jv *out)
{
    (void)line, (void)c;
    return case_filter(r, in, NULL, 'c', out);
}

static int f_replace(struct jrender *r, int line, struct jv in, const struct jcall *c,
                     struct jv *out)
{
    struct jv old = jr_arg(c, 0, "old"), new_ = jr_arg(c, 1, "new"), count = jr_arg(c, 2, "count");
    int rc = jv_stringify(r, in, &in);
    if (!rc)
        rc = jv_stringify(r, old, &old);
    if (!rc)
        rc = jv_stringify(r, new_, &new_);
    (void)line;
    return rc ? rc : str_replace(r, in, old, new_, int_or(count, -1), out);
}

static int f_default(struct jrender *r, int line, struct jv in, const struct jcall *c,
                     struct jv *out)
{
    (void)r, (void)line;
    struct jv dflt = jr_arg(c, 0, "default_value");
    if (dflt.t == JV_UNDEF)
        dflt = jv_str("", 0);
    bool boolean = jv_truthy(jr_arg(c, 1, "boolean"));
    *out = in.t == JV_UNDEF || (boolean && !jv_truthy(in)) ? dflt : in;
    return 0;
}

static int f_first(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (!rc)
        *out = l->n ? l->items[0] : jv_undef("first");
    return rc;
}

static int f_last(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (!rc)
        *out = l->n ? l->items[l->n - 1] : jv_undef("last");
    return rc;
}

static int f_list(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    struct jv_list *l = NULL;
    int rc = copy_list(r, in, &l);
    if (!rc)
        *out = list_value(l);
    return rc;
}

// The stripped text of a number in a string, NUL-terminated in tmp; false when empty or too long.
static bool number_text(struct jv s, char tmp[64])
{
    s = strip(s, jv_none(), true, true);
    if (s.u.s.n == 0 || s.u.s.n >= 64)
        return false;
    memcpy(tmp, s.u.s.p, s.u.s.n);
    tmp[s.u.s.n] = 0;
    return true;
}

static int f_int(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line;
    int64_t dflt = int_or(jr_arg(c, 0, "default"), 0);
    switch (in.t) {
    case JV_INT:
        *out = in;
        return 0;
    case JV_BOOL:
        *out = jv_int(in.u.b);
        return 0;
    case JV_FLOAT:
        *out = isfinite(in.u.f) && fabs(in.u.f) < 9.2e18 ? jv_int((int64_t)in.u.f) : jv_int(dflt);
        return 0;
    case JV_STR: {
        char tmp[64];
        int64_t v;
        double d;
        if (number_text(in, tmp) && str_to_i64(tmp, INT64_MIN, INT64_MAX, &v, NULL) == 0)
            *out = jv_int(v);
        else if (number_text(in, tmp) && str_to_double(tmp, &d, NULL) == 0 && isfinite(d) &&
                 fabs(d) < 9.2e18)
            *out = jv_int((int64_t)d);
        else
            *out = jv_int(dflt);
        return 0;
    }
    default:
        *out = jv_int(dflt);
        return 0;
    }
    (void)r;
}

static int f_float(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)r, (void)line;
    struct jv d = jr_arg(c, 0, "default");
    double dflt = d.t == JV_FLOAT ? d.u.f : d.t == JV_INT ? (double)d.u.i : 0.0;
    switch (in.t) {
    case JV_INT:
        *out = jv_float((double)in.u.i);
        return 0;
    case JV_BOOL:
        *out = jv_float(in.u.b);
        return 0;
    case JV_FLOAT:
        *out = in;
        return 0;
    case JV_STR: {
        char tmp[64];
        double v;
        if (number_text(in, tmp) && str_to_double(tmp, &v, NULL) == 0) {
            *out = jv_float(v);
            return 0;
        }
        *out = jv_float(dflt);
        return 0;
    }
    default:
        *out = jv_float(dflt);
        return 0;
    }
}

static int f_abs(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)c;
    if (in.t == JV_INT)
        *out =
            in.u.i == INT64_MIN ? jv_float(-(double)in.u.i) : jv_int(in.u.i < 0 ? -in.u.i : in.u.i);
    else if (in.t == JV_BOOL)
        *out = jv_int(in.u.b);
    else if (in.t == JV_FLOAT)
        *out = jv_float(fabs(in.u.f));
    else
        return jr_fail(r, line, "bad operand type for abs(): '%s'", jv_type_name(in));
    return 0;
}

static int f_items(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)c;
    return items_list(r, line, in, out);
}

// map(attribute=…, default=…) or map('filter', args…)
static int f_map(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    struct jv_list *res = jv_list_new(r, l->n);
    if (!res)
        return jr_oom(r);
    struct jv attr = jr_arg(c, 99, "attribute");
    struct jv dflt = jr_arg(c, 99, "default");
    struct jv fname = c->n_pos ? c->pos[0] : jv_undef(NULL);
    if (attr.t == JV_UNDEF && fname.t != JV_STR)
        return jr_fail(r, line, "%s", "map requires a filter name or attribute=");
    char name[64] = "";
    if (attr.t == JV_UNDEF) {
        snprintf(name, sizeof name, "%.*s", (int)(fname.u.s.n < 63 ? fname.u.s.n : 63),
                 fname.u.s.p);
        if (!jr_filter_exists(name))
            return jr_fail(r, line, "no filter named '%s'", name);
    }
    struct jcall rest = {c->n_pos > 1 ? c->pos + 1 : NULL, c->n_pos > 1 ? c->n_pos - 1 : 0, NULL,
                         NULL, 0};
    for (size_t i = 0; !rc && i < l->n; i++) {
        struct jv v;
        if (attr.t != JV_UNDEF) {
            v = attr_path(r, l->items[i], attr);
            if (v.t == JV_UNDEF && dflt.t != JV_UNDEF)
                v = dflt;
        } else {
            rc = jr_filter(r, line, name, l->items[i], &rest, &v);
        }
        if (!rc)
            res->items[res->n++] = v;
        if (!rc)
            rc = jr_step(r);
    }
    *out = list_value(res);
    return rc;
}

// select / reject / selectattr / rejectattr
static int select_common(struct jrender *r, int line, struct jv in, const struct jcall *c,
                         bool by_attr, bool keep, struct jv *out)
{
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    struct jv_list *res = jv_list_new(r, 0);
    if (!res)
        return jr_oom(r);
    size_t ti = by_attr ? 1 : 0;
    struct jv attr = by_attr ? jr_arg(c, 0, NULL) : jv_undef(NULL);
    struct jv test = ti < c->n_pos ? c->pos[ti] : jv_undef(NULL);
    char name[64] = "";
    if (test.t == JV_STR)
        snprintf(name, sizeof name, "%.*s", (int)(test.u.s.n < 63 ? test.u.s.n : 63), test.u.s.p);
    else if (test.t != JV_UNDEF)
        return jr_fail(r, line, "%s", "test name must be a string");
    if (name[0] && !jr_test_exists(name))
        return jr_fail(r, line, "no test named '%s'", name);
    struct jcall rest = {c->n_pos > ti + 1 ? c->pos + ti + 1 : NULL,
                         c->n_pos > ti + 1 ? c->n_pos - ti - 1 : 0, NULL, NULL, 0};
    for (size_t i = 0; !rc && i < l->n; i++) {
        struct jv v = by_attr ? attr_path(r, l->items[i], attr) : l->items[i];
        bool ok = false;
        if (name[0])
            rc = jr_test(r, line, name, v, &rest, &ok);
        else
            ok = jv_truthy(v);
        if (!rc && ok == keep)
            rc = jv_list_push(r, res, l->items[i]);
        if (!rc)
            rc = jr_step(r);
    }
    *out = list_value(res);
    return rc;
}
static int f_select(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    return select_common(r, line, in, c, false, true, out);
}
static int f_reject(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    return select_common(r, line, in, c, false, false, out);
}
static int f_selectattr(struct jrender *r, int line, struct jv in, const struct jcall *c,
                        struct jv *out)
{
    return select_common(r, line, in, c, true, true, out);
}
static int f_rejectattr(struct jrender *r, int line, struct jv in, const struct jcall *c,
                        struct jv *out)
{
    return select_common(r, line, in, c, true, false, out);
}

static int f_unique(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line;
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    struct jv attr = jr_arg(c, 1, "attribute");
    bool cs = jv_truthy(jr_arg(c, 0, "case_sensitive"));
    struct jv_list *res = jv_list_new(r, 0), *seen = jv_list_new(r, 0);
    if (!res || !seen)
        return jr_oom(r);
    for (size_t i = 0; !rc && i < l->n; i++) {
        struct jv k = attr.t != JV_UNDEF ? attr_path(r, l->items[i], attr) : l->items[i];
        if (!cs && k.t == JV_STR && (rc = map_case(r, k, utf8_tolower, 0, &k)))
            break;
        bool dup = false;
        for (size_t j = 0; j < seen->n && !dup; j++)
            dup = jv_equal(seen->items[j], k);
        if (!dup && !(rc = jv_list_push(r, seen, k)))
            rc = jv_list_push(r, res, l->items[i]);
        if (!rc)
            rc = jr_step(r);
    }
    *out = list_value(res);
    return rc;
}

static int f_sort(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line;
    struct jv_list *l = NULL;
    int rc = copy_list(r, in, &l);
    if (rc)
        return rc;
    struct sort_ctx s = {.r = r,
                         .attr = jr_arg(c, 2, "attribute"),
                         .case_sens = jv_truthy(jr_arg(c, 1, "case_sensitive"))};
    rc = sort_list(r, l, &s, jv_truthy(jr_arg(c, 0, "reverse")));
    *out = list_value(l);
    return rc;
}

static int f_dictsort(struct jrender *r, int line, struct jv in, const struct jcall *c,
                      struct jv *out)
{
    int rc = items_list(r, line, in, out);
    if (rc)
        return rc;
    struct jv by = jr_arg(c, 1, "by");
    struct sort_ctx s = {.r = r,
                         .attr = jv_undef(NULL),
                         .pairs = true,
                         .case_sens = jv_truthy(jr_arg(c, 0, "case_sensitive")),
                         .by_value =
                             by.t == JV_STR && by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5)};
    return sort_list(r, out->u.l, &s, jv_truthy(jr_arg(c, 2, "reverse")));
}

static int f_indent(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line;
    struct jv width = jr_arg(c, 0, "width");
    bool first = jv_truthy(jr_arg(c, 1, "first")), blank = jv_truthy(jr_arg(c, 2, "blank"));
    int rc = jv_stringify(r, in, &in);
    if (rc)
        return rc;
    struct jv pad;
    if (width.t == JV_STR) {
        pad = width;
    } else {
        int64_t w = int_or(width, 4);
        if (w < 0)
            w = 0;
        if (w > 1024)
            w = 1024;
        char sp[1025];
        memset(sp, ' ', (size_t)w);
        if ((rc = jv_str_new(r, sp, (size_t)w, &pad)))
            return rc;
    }
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    const char *p = in.u.s.p, *end = p + in.u.s.n;
    bool first_line = true;
    while (!rc && p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        bool do_pad = first_line ? first : (blank || n > 0);
        if (do_pad)
            rc = buf_append(&b, pad.u.s.p, pad.u.s.n);
        if (!rc)
            rc = buf_append(&b, p, n);
        if (!nl)
            break;
        if (!rc)
            rc = buf_append_char(&b, '\n');
        p = nl + 1;
        first_line = false;
    }
    if (rc == ERR_TOO_LARGE)
        rc = jr_oom(r);
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

static int f_safe(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)r, (void)line, (void)c;
    *out = in;
    return 0;
}

static int f_escape(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line, (void)c;
    int rc = jv_stringify(r, in, &in);
    if (rc)
        return rc;
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    for (size_t i = 0; !rc && i < in.u.s.n; i++) {
        char ch = in.u.s.p[i];
        switch (ch) {
        case '&':
            rc = buf_append_str(&b, "&amp;");
            break;
        case '<':
            rc = buf_append_str(&b, "&lt;");
            break;
        case '>':
            rc = buf_append_str(&b, "&gt;");
            break;
        case '"':
            rc = buf_append_str(&b, "&#34;");
            break;
        case '\'':
            rc = buf_append_str(&b, "&#39;");
            break;
        default:
            rc = buf_append_char(&b, ch);
        }
    }
    if (rc == ERR_TOO_LARGE)
        rc = jr_oom(r);
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

static int f_round(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    int64_t prec = int_or(jr_arg(c, 0, "precision"), 0);
    struct jv method = jr_arg(c, 1, "method");
    if (in.t != JV_INT && in.t != JV_FLOAT && in.t != JV_BOOL)
        return jr_fail(r, line, "round expects a number, got %s", jv_type_name(in));
    double x = in.t == JV_FLOAT ? in.u.f : (double)int_or(in, 0);
    if (prec > 15)
        prec = 15;
    if (prec < -15)
        prec = -15;
    double m = pow(10, (double)prec), y = x * m;
    if (method.t == JV_STR && method.u.s.n == 4 && !memcmp(method.u.s.p, "ceil", 4))
        y = ceil(y);
    else if (method.t == JV_STR && method.u.s.n == 5 && !memcmp(method.u.s.p, "floor", 5))
        y = floor(y);
    else
        y = nearbyint(y);  // Python rounds half to even
    *out = jv_float(y / m);
    return 0;
}

static int f_reverse(struct jrender *r, int line, struct jv in, const struct jcall *c,
                     struct jv *out)
{
    (void)line, (void)c;
    struct jv_list *l = NULL;
    int rc = copy_list(r, in, &l);
    if (rc)
        return rc;
    for (size_t i = 0; i < l->n / 2; i++) {
        struct jv t = l->items[i];
        l->items[i] = l->items[l->n - 1 - i];
        l->items[l->n - 1 - i] = t;
    }
    if (in.t == JV_STR) {
        struct buf b;
        buf_init(&b, 0);
        for (size_t i = 0; i < l->n; i++)
            buf_append(&b, l->items[i].u.s.p, l->items[i].u.s.n);
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
        buf_deinit(&b);
        return rc;
    }
    *out = list_value(l);
    return 0;
}

static int f_sum(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    struct jv attr = jr_arg(c, 0, "attribute"), acc = jr_arg(c, 1, "start");
    if (acc.t == JV_UNDEF)
        acc = jv_int(0);
    for (size_t i = 0; i < l->n; i++) {
        struct jv v = attr.t != JV_UNDEF ? attr_path(r, l->items[i], attr) : l->items[i];
        if (v.t == JV_FLOAT || acc.t == JV_FLOAT) {
            double a = acc.t == JV_FLOAT ? acc.u.f : (double)int_or(acc, 0);
            double b = v.t == JV_FLOAT ? v.u.f : (double)int_or(v, 0);
            acc = jv_float(a + b);
        } else if (v.t == JV_INT || v.t == JV_BOOL) {
            acc = jv_int(int_or(acc, 0) + int_or(v, 0));
        } else {
            return jr_fail(r, line, "unsupported operand type(s) for +: 'int' and '%s'",
                           jv_type_name(v));
        }
    }
    *out = acc;
    return 0;
}

static int minmax(struct jrender *r, struct jv in, bool want_max, struct jv *out)
{
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    *out = jv_undef("min/max of an empty sequence");
    for (size_t i = 0; i < l->n; i++) {
        if (i == 0) {
            *out = l->items[0];
            continue;
        }
        int cmp = jv_compare(r, l->items[i], *out);
        if (cmp == -2)
            return ERR_FORMAT;
        if (want_max ? cmp > 0 : cmp < 0)
            *out = l->items[i];
    }
    return 0;
}
static int f_min(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    return minmax(r, in, false, out);
}
static int f_max(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line, (void)c;
    return minmax(r, in, true, out);
}

static int f_wordcount(struct jrender *r, int line, struct jv in, const struct jcall *c,
                       struct jv *out)
{
    (void)line, (void)c;
    int rc = jv_stringify(r, in, &in);
    int64_t n = 0;
    bool inword = false;
    for (size_t i = 0; i < in.u.s.n; i++) {
        char ch = in.u.s.p[i];
        bool w = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || (unsigned char)ch >= 0x80;
        if (w && !inword)
            n++;
        inword = w;
    }
    *out = jv_int(n);
    return rc;
}

// "%s, %d" | format(a, b): printf-style, as the % operator.
static int f_format(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    int rc = jv_stringify(r, in, &in);
    if (rc)
        return rc;
    struct jv_list *args = jv_list_new(r, c->n_pos);
    if (!args)
        return jr_oom(r);
    args->tuple = true;
    for (size_t i = 0; i < c->n_pos; i++)
        args->items[args->n++] = c->pos[i];
    return jr_str_format(r, line, in, list_value(args), out);
}

static int f_center(struct jrender *r, int line, struct jv in, const struct jcall *c,
                    struct jv *out)
{
    (void)line;
    int rc = jv_stringify(r, in, &in);
    if (rc)
        return rc;
    int64_t width = int_or(jr_arg(c, 0, "width"), 80),
            len = (int64_t)jv_utf8_len(in.u.s.p, in.u.s.n);
    if (width > 4096)
        width = 4096;
    if (width <= len) {
        *out = in;
        return 0;
    }
    // Python's str.center: the extra space goes left when the margin and width are both odd
    int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
    char pad[4096];
    memset(pad, ' ', sizeof pad);
    struct buf b;
    buf_init(&b, 0);
    buf_append(&b, pad, (size_t)left);
    buf_append(&b, in.u.s.p, in.u.s.n);
    buf_append(&b, pad, (size_t)(marg - left));
    rc = jv_str_new(r, b.data, b.len, out);
    buf_deinit(&b);
    return rc;
}

static int f_batch(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    struct jv_list *l;
    int rc = jv_iterate(r, in, &l);
    if (rc)
        return rc;
    int64_t size = int_or(jr_arg(c, 0, "linecount"), 0);
    struct jv fill = jr_arg(c, 1, "fill_with");
    if (size <= 0)
        return jr_fail(r, line, "%s", "batch size must be positive");
    struct jv_list *res = jv_list_new(r, 0), *cur = NULL;
    if (!res)
        return jr_oom(r);
    for (size_t i = 0; !rc && i < l->n; i++) {
        if (!cur || (int64_t)cur->n == size) {
            if (!(cur = jv_list_new(r, 0)))
                return jr_oom(r);
            rc = jv_list_push(r, res, list_value(cur));
        }
        if (!rc)
            rc = jv_list_push(r, cur, l->items[i]);
    }
    while (!rc && cur && fill.t != JV_UNDEF && (int64_t)cur->n < size)
        rc = jv_list_push(r, cur, fill);
    *out = list_value(res);
    return rc;
}

static int f_attr(struct jrender *r, int line, struct jv in, const struct jcall *c, struct jv *out)
{
    (void)line;
    struct jv name = jr_arg(c, 0, "name");
    *out = name.t == JV_STR ? attr_path(r, in, name) : jv_undef(".attribute");
    return 0;
}

static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"attr", f_attr},
    {"batch", f_batch},
    {"center", f_center},
    {"format", f_format},
    {"abs", f_abs},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

static filter_fn filter_find(const char *name)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(filters[i].name, name))
            return filters[i].fn;
    return NULL;
}

bool jr_filter_exists(const char *name)
{
    return filter_find(name) != NULL;
}

int jr_filter(struct jrender *r, int line, const char *name, struct jv in, const struct jcall *c,
              struct jv *out)
{
    filter_fn fn = filter_find(name);
    if (!fn)
        return jr_fail(r, line, "no filter named '%s'", name);
    r->line = line;
    // These convert an undefined input in a way Jinja2's Undefined refuses; the others see
    // it as empty (str() is "", iteration yields nothing).
    if (in.t == JV_UNDEF &&
        (fn == f_tojson || fn == f_abs || fn == f_round || fn == f_dictsort || fn == f_sum))
        return jr_fail(r, line, "'%s' is undefined", in.u.undef ? in.u.undef : "value");
    return fn(r, line, in, c, out);
}

// ---------------------------------------------------------------------------
// Tests

typedef int (*test_fn)(struct jrender *r, int line, struct jv in, const struct jcall *c, bool *out);

#define SIMPLE_TEST(fname, expr)                                                                   \
    static int fname(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)   \
    {                                                                                              \
        (void)r, (void)line, (void)c, (void)v;                                                     \
        *out = (expr);                                                                             \
        return 0;                                                                                  \
    }

SIMPLE_TEST(t_defined, v.t != JV_UNDEF)
SIMPLE_TEST(t_undefined, v.t == JV_UNDEF)
SIMPLE_TEST(t_none, v.t == JV_NONE)
SIMPLE_TEST(t_boolean, v.t == JV_BOOL)
SIMPLE_TEST(t_true, v.t == JV_BOOL && v.u.b)
SIMPLE_TEST(t_false, v.t == JV_BOOL && !v.u.b)
SIMPLE_TEST(t_integer, v.t == JV_INT)
SIMPLE_TEST(t_float, v.t == JV_FLOAT)
SIMPLE_TEST(t_number, v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL)
SIMPLE_TEST(t_string, v.t == JV_STR)
SIMPLE_TEST(t_mapping, v.t == JV_DICT && !v.u.d->ns)
SIMPLE_TEST(t_iterable,
            v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.u.d->ns) || v.t == JV_UNDEF)
SIMPLE_TEST(t_sequence, v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.u.d->ns))
SIMPLE_TEST(t_callable, v.t == JV_FUNC)
SIMPLE_TEST(t_escaped, false)

static int t_odd_even(struct jrender *r, int line, struct jv v, bool odd, bool *out)
{
    if (v.t != JV_INT && v.t != JV_BOOL)
        return jr_fail(r, line, "%s test expects an integer, got %s", odd ? "odd" : "even",
                       jv_type_name(v));
    *out = (int_or(v, 0) % 2 != 0) == odd;
    return 0;
}
static int t_odd(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)c;
    return t_odd_even(r, line, v, true, out);
}
static int t_even(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)c;
    return t_odd_even(r, line, v, false, out);
}

static int t_divisibleby(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    struct jv d = jr_arg(c, 0, "num");
    if ((v.t != JV_INT && v.t != JV_BOOL) || (d.t != JV_INT && d.t != JV_BOOL) || int_or(d, 0) == 0)
        return jr_fail(r, line, "%s", "divisibleby needs non-zero integers");
    int64_t x = int_or(v, 0), y = int_or(d, 0);
    *out = y == -1 || x % y == 0;
    return 0;
}

static int t_cmp(struct jrender *r, int line, struct jv v, const struct jcall *c, int op, bool *out)
{
    struct jv o = jr_arg(c, 0, NULL);
    if (op == 0) {
        *out = jv_equal(v, o);
        return 0;
    }
    if (op == 1) {
        *out = !jv_equal(v, o);
        return 0;
    }
    r->line = line;
    int k = jv_compare(r, v, o);
    if (k == -2)
        return ERR_FORMAT;
    *out = op == 2 ? k < 0 : op == 3 ? k <= 0 : op == 4 ? k > 0 : k >= 0;
    return 0;
}
#define CMP_TEST(fname, op)                                                                        \
    static int fname(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)   \
    {                                                                                              \
        return t_cmp(r, line, v, c, op, out);                                                      \
    }
CMP_TEST(t_eq, 0)
CMP_TEST(t_ne, 1)
CMP_TEST(t_lt, 2)
CMP_TEST(t_le, 3)
CMP_TEST(t_gt, 4)
CMP_TEST(t_ge, 5)

static int t_sameas(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)r, (void)line;
    struct jv o = jr_arg(c, 0, "other");
    if (v.t != o.t) {
        *out = false;
        return 0;
    }
    switch (v.t) {
    case JV_NONE:
    case JV_UNDEF:
        *out = true;
        break;
    case JV_BOOL:
        *out = v.u.b == o.u.b;
        break;
    case JV_INT:
        *out = v.u.i == o.u.i;
        break;
    case JV_STR:
        *out = v.u.s.p == o.u.s.p && v.u.s.n == o.u.s.n;
        break;
    case JV_LIST:
        *out = v.u.l == o.u.l;
        break;
    case JV_DICT:
        *out = v.u.d == o.u.d;
        break;
    case JV_FUNC:
        *out = v.u.fn == o.u.fn;
        break;
    default:
        *out = false;
    }
    return 0;
}

static int t_in(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    struct jv seq = jr_arg(c, 0, "seq");
    if (seq.t == JV_STR && v.t == JV_STR) {
        *out = v.u.s.n == 0 || memmem(seq.u.s.p, seq.u.s.n, v.u.s.p, v.u.s.n) != NULL;
        return 0;
    }
    if (seq.t == JV_DICT) {
        *out = jv_dict_get(seq.u.d, v) != NULL;
        return 0;
    }
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, seq, &l);
    (void)line;
    *out = false;
    for (size_t i = 0; !rc && i < l->n && !*out; i++)
        *out = jv_equal(v, l->items[i]);
    return rc;
}

static int t_case(struct jrender *r, struct jv v, bool upper, bool *out)
{
    if (v.t != JV_STR) {
        *out = false;
        return 0;
    }
    struct jv conv;
    int rc = map_case(r, v, upper ? utf8_toupper : utf8_tolower, 0, &conv);
    *out = !rc && jv_equal(v, conv);
    return rc;
}
static int t_lower(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)line, (void)c;
    return t_case(r, v, false, out);
}
static int t_upper(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)line, (void)c;
    return t_case(r, v, true, out);
}

static int t_filter(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)r, (void)line, (void)c;
    char name[64];
    snprintf(name, sizeof name, "%.*s", v.t == JV_STR ? (int)(v.u.s.n < 63 ? v.u.s.n : 63) : 0,
             v.t == JV_STR ? v.u.s.p : "");
    *out = jr_filter_exists(name);
    return 0;
}
static int t_test(struct jrender *r, int line, struct jv v, const struct jcall *c, bool *out)
{
    (void)r, (void)line, (void)c;
    char name[64];
    snprintf(name, sizeof name, "%.*s", v.t == JV_STR ? (int)(v.u.s.n < 63 ? v.u.s.n : 63) : 0,
             v.t == JV_STR ? v.u.s.p : "");
    *out = jr_test_exists(name);
    return 0;
}

static const struct {
    const char *name;
    test_fn fn;
} tests[] = {
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_lower},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

static test_fn test_find(const char *name)
{
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (!strcmp(tests[i].name, name))
            return tests[i].fn;
    return NULL;
}

bool jr_test_exists(const char *name)
{
    return test_find(name) != NULL;
}

int jr_test(struct jrender *r, int line, const char *name, struct jv in, const struct jcall *c,
            bool *out)
{
    test_fn fn = test_find(name);
    if (!fn)
        return jr_fail(r, line, "no test named '%s'", name);
    return fn(r, line, in, c, out);
}

// ---------------------------------------------------------------------------
// Methods and globals

static const char *const str_methods[] = {
    "strip",   "lstrip",  "rstrip",     "split",   "rsplit",     "startswith", "endswith",
    "replace", "upper",   "lower",      "title",   "capitalize", "find",       "rfind",
    "count",   "join",    "splitlines", "isdigit", "isalpha",    "isalnum",    "isspace",
    "islower", "isupper", "format",     NULL};
static const char *const dict_methods[] = {"items", "keys", "values",     "get", "update",
                                           "pop",   "copy", "setdefault", NULL};
static const char *const list_methods[] = {"append", "extend", "pop",     "insert", "index",
                                           "count",  "copy",   "reverse", NULL};

static const char *method_name(const char *const *table, const char *name, size_t n)
{
    for (size_t i = 0; table[i]; i++)
        if (strlen(table[i]) == n && !memcmp(table[i], name, n))
            return table[i];
    return NULL;
}

bool jr_method(struct jrender *r, struct jv v, const char *name, size_t n, struct jv *out)
{
    const char *m = NULL;
    if (v.t == JV_STR)
        m = method_name(str_methods, name, n);
    else if (v.t == JV_DICT && !v.u.d->ns)
        m = method_name(dict_methods, name, n);
    else if (v.t == JV_LIST && !v.u.l->tuple)
        m = method_name(list_methods, name, n);
    else if (v.t == JV_LIST)
        m = method_name(list_methods + 4, name, n);  // tuple: index, count
    if (!m)
        return false;
    struct jv_func *fn = arena_alloc(r->a, sizeof *fn);
    if (!fn)
        return false;
    *fn = (struct jv_func){.kind = JF_METHOD, .name = m, .self = v};
    *out = (struct jv){.t = JV_FUNC, .u.fn = fn};
    return true;
}

static const char *const global_names[] = {"range",           "dict",         "namespace",
                                           "raise_exception", "strftime_now", NULL};
static struct jv_func global_funcs[] = {
    {.kind = JF_GLOBAL, .name = "range"},        {.kind = JF_GLOBAL, .name = "dict"},
    {.kind = JF_GLOBAL, .name = "namespace"},    {.kind = JF_GLOBAL, .name = "raise_exception"},
    {.kind = JF_GLOBAL, .name = "strftime_now"},
};

bool jr_global(const char *name, struct jv *out)
{
    for (size_t i = 0; global_names[i]; i++)
        if (!strcmp(global_names[i], name)) {
            *out = (struct jv){.t = JV_FUNC, .u.fn = &global_funcs[i]};
            return true;
        }
    return false;
}

static bool is(const char *a, const char *b)
{
    return !strcmp(a, b);
}

static int str_find(struct jv s, struct jv sub, bool last, int64_t *out)
{
    *out = -1;
    if (sub.u.s.n > s.u.s.n)
        return 0;
    for (size_t k = 0; k + sub.u.s.n <= s.u.s.n; k++) {
        size_t i = last ? s.u.s.n - sub.u.s.n - k : k;
        if (!memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n)) {
            *out = (int64_t)jv_utf8_len(s.u.s.p, i);
            return 0;
        }
    }
    return 0;
}

// str.count(sub): non-overlapping occurrences; "" occurs between every character.
static int64_t str_count(struct jv s, struct jv sub)
{
    if (sub.u.s.n == 0)
        return (int64_t)jv_utf8_len(s.u.s.p, s.u.s.n) + 1;
    int64_t k = 0;
    for (size_t i = 0; i + sub.u.s.n <= s.u.s.n;) {
        if (!memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n)) {
            k++;
            i += sub.u.s.n;
        } else {
            i++;
        }
    }
    return k;
}

// sep.join(items): Python wants strings only.
static int str_join(struct jrender *r, int line, struct jv sep, struct jv items, struct jv *out)
{
    struct jcall jc = {&sep, 1, NULL, NULL, 0};
    struct jv_list *l = NULL;
    int rc = jv_iterate(r, items, &l);
    if (rc)
        return rc;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i].t != JV_STR)
            return jr_fail(r, line, "sequence item %zu: expected str instance, %s found", i,
                           jv_type_name(l->items[i]));
    return f_join(r, line, items, &jc, out);
}

// str.splitlines() for \n and \r\n line ends.
static int str_splitlines(struct jrender *r, struct jv s, struct jv *out)
{
    struct jv_list *l = jv_list_new(r, 0);
    if (!l)
        return jr_oom(r);
    int rc = 0;
    size_t i = 0;
    while (!rc && i < s.u.s.n) {
        const char *nl = memchr(s.u.s.p + i, '\n', s.u.s.n - i);
        size_t e = nl ? (size_t)(nl - s.u.s.p) : s.u.s.n;
        size_t ce = e > i && s.u.s.p[e - 1] == '\r' ? e - 1 : e;
        rc = jv_list_push(r, l, jv_str(s.u.s.p + i, ce - i));
        i = nl ? e + 1 : s.u.s.n;
    }
    *out = list_value(l);
    return rc;
}

// isdigit, isalpha, isalnum, isspace, islower, isupper over ASCII.
static bool str_is_class(const char *m, struct jv s)
{
    bool ok = s.u.s.n > 0, any_cased = false;
    for (size_t i = 0; i < s.u.s.n; i++) {
        unsigned char ch = (unsigned char)s.u.s.p[i];
        bool d = ch >= '0' && ch <= '9', lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
        bool sp = ch == ' ' || (ch >= '\t' && ch <= '\r');
        if (is(m, "isdigit"))
            ok &= d;
        else if (is(m, "isalpha"))
            ok &= lo || up;
        else if (is(m, "isalnum"))
            ok &= lo || up || d;
        else if (is(m, "isspace"))
            ok &= sp;
        else if (is(m, "islower"))
            ok &= !up, any_cased |= lo;
        else if (is(m, "isupper"))
            ok &= !lo, any_cased |= up;
    }
    if (is(m, "islower") || is(m, "isupper"))
        ok = ok && any_cased;
    return ok;
}

// str.format with "{}" and "{0}" placeholders and positional arguments.
static int str_format(struct jrender *r, int line, struct jv s, const struct jcall *c,
                      struct jv *out)
{
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    size_t auto_i = 0;
    int rc = 0;
    for (size_t i = 0; !rc && i < s.u.s.n; i++) {
        char ch = s.u.s.p[i];
        if ((ch == '{' || ch == '}') && i + 1 < s.u.s.n && s.u.s.p[i + 1] == ch) {
            rc = buf_append_char(&b, ch);
            i++;
        } else if (ch == '{') {
            const char *close = memchr(s.u.s.p + i, '}', s.u.s.n - i);
            if (!close) {
                rc = jr_fail(r, line, "%s", "single '{' encountered in format string");
                break;
            }
            size_t idx = auto_i++;
            if (close > s.u.s.p + i + 1) {
                idx = 0;
                for (const char *p = s.u.s.p + i + 1; p < close && idx < 1000; p++)
                    idx = idx * 10 + (size_t)(*p >= '0' && *p <= '9' ? *p - '0' : 0);
            }
            if (idx >= c->n_pos) {
                rc = jr_fail(r, line, "%s", "format: index out of range");
                break;
            }
            rc = jv_to_str(r, c->pos[idx], &b);
            i = (size_t)(close - s.u.s.p);
        } else {
            rc = buf_append_char(&b, ch);
        }
    }
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

static int call_str_method(struct jrender *r, int line, const char *m, struct jv s,
                           const struct jcall *c, struct jv *out)
{
    struct jv a0 = jr_arg(c, 0, NULL), a1 = jr_arg(c, 1, NULL);
    int rc = 0;
    if (is(m, "strip") || is(m, "lstrip") || is(m, "rstrip")) {
        if (a0.t != JV_UNDEF && a0.t != JV_NONE && (rc = need_str(r, line, a0, m)))
            return rc;
        *out = strip(s, a0, m[0] != 'r', m[0] != 'l');
    } else if (is(m, "split") || is(m, "rsplit")) {
        struct jv sep = jr_arg(c, 0, "sep");
        if (sep.t != JV_UNDEF && sep.t != JV_NONE && (rc = need_str(r, line, sep, m)))
            return rc;
        return str_split(r, line, s, sep, int_or(jr_arg(c, 1, "maxsplit"), -1), m[0] == 'r', out);
    } else if (is(m, "startswith") || is(m, "endswith")) {
        bool ok = false;
        rc = affix_test(r, line, s, a0, m[0] == 'e', &ok);
        *out = jv_bool(ok);
    } else if (is(m, "replace")) {
        if ((rc = need_str(r, line, a0, m)) || (rc = need_str(r, line, a1, m)))
            return rc;
        return str_replace(r, s, a0, a1, int_or(jr_arg(c, 2, "count"), -1), out);
    } else if (is(m, "upper")) {
        return map_case(r, s, utf8_toupper, 0, out);
    } else if (is(m, "lower")) {
        return map_case(r, s, utf8_tolower, 0, out);
    } else if (is(m, "title")) {
        return map_case(r, s, NULL, 't', out);
    } else if (is(m, "capitalize")) {
        return map_case(r, s, NULL, 'c', out);
    } else if (is(m, "find") || is(m, "rfind")) {
        if ((rc = need_str(r, line, a0, m)))
            return rc;
        int64_t at;
        str_find(s, a0, m[0] == 'r', &at);
        *out = jv_int(at);
    } else if (is(m, "count")) {
        if ((rc = need_str(r, line, a0, m)))
            return rc;
        *out = jv_int(str_count(s, a0));
    } else if (is(m, "join")) {
        return str_join(r, line, s, a0, out);
    } else if (is(m, "splitlines")) {
        return str_splitlines(r, s, out);
    } else if (m[0] == 'i' && m[1] == 's') {
        *out = jv_bool(str_is_class(m, s));
    } else if (is(m, "format")) {
        return str_format(r, line, s, c, out);
    }
    return rc;
}

static int call_dict_method(struct jrender *r, int line, const char *m, struct jv_dict *d,
                            const struct jcall *c, struct jv *out)
{
    struct jv a0 = jr_arg(c, 0, NULL), a1 = jr_arg(c, 1, NULL);
    int rc = 0;
    struct jv self = {.t = JV_DICT, .u.d = d};
    if (is(m, "items")) {
        return items_list(r, line, self, out);
    } else if (is(m, "keys") || is(m, "values")) {
        struct jv_list *l = jv_list_new(r, d->n);
        if (!l)
            return jr_oom(r);
        jv_copy(l->items, m[0] == 'k' ? d->keys : d->vals, d->n * sizeof *l->items);
        l->n = d->n;
        *out = list_value(l);
    } else if (is(m, "get")) {
        struct jv *v = jv_dict_get(d, a0);
        *out = v ? *v : a1.t == JV_UNDEF ? jv_none() : a1;
    } else if (is(m, "setdefault")) {
        struct jv *v = jv_dict_get(d, a0);
        if (v) {
            *out = *v;
        } else {
            *out = a1.t == JV_UNDEF ? jv_none() : a1;
            rc = jv_dict_set(r, d, a0, *out);
        }
    } else if (is(m, "pop")) {
        struct jv *v = jv_dict_get(d, a0);
        if (!v) {
            if (a1.t == JV_UNDEF)
                return jr_fail(r, line, "%s", "KeyError in dict.pop");
            *out = a1;
            return 0;
        }
        *out = *v;
        size_t i = (size_t)(v - d->vals);
        memmove(d->keys + i, d->keys + i + 1, (d->n - i - 1) * sizeof *d->keys);
        memmove(d->vals + i, d->vals + i + 1, (d->n - i - 1) * sizeof *d->vals);
        d->n--;
    } else if (is(m, "copy")) {
        struct jv_dict *nd = jv_dict_new(r, d->n);
        if (!nd)
            return jr_oom(r);
        jv_copy(nd->keys, d->keys, d->n * sizeof *d->keys);
        jv_copy(nd->vals, d->vals, d->n * sizeof *d->vals);
        nd->n = d->n;
        *out = (struct jv){.t = JV_DICT, .u.d = nd};
    } else if (is(m, "update")) {
        if (a0.t == JV_DICT)
            for (size_t i = 0; !rc && i < a0.u.d->n; i++)
                rc = jv_dict_set(r, d, a0.u.d->keys[i], a0.u.d->vals[i]);
        for (size_t k = 0; !rc && k < c->n_kw; k++)
            rc = jv_dict_set(r, d, jv_cstr(r, c->kw_names[k]), c->kw[k]);
        *out = jv_none();
    }
    return rc;
}

static int call_list_method(struct jrender *r, int line, const char *m, struct jv_list *l,
                            const struct jcall *c, struct jv *out)
{
    struct jv a0 = jr_arg(c, 0, NULL);
    int rc = 0;
    *out = jv_none();
    if (is(m, "append")) {
        rc = jv_list_push(r, l, a0);
    } else if (is(m, "extend")) {
        struct jv_list *src;
        if (!(rc = jv_iterate(r, a0, &src))) {
            size_t n = src->n;  // src may be l itself
            for (size_t i = 0; !rc && i < n; i++)
                rc = jv_list_push(r, l, src->items[i]);
        }
    } else if (is(m, "pop")) {
        if (l->n == 0)
            return jr_fail(r, line, "%s", "pop from empty list");
        int64_t i = int_or(a0, -1);
        if (i < 0)
            i += (int64_t)l->n;
        if (i < 0 || (size_t)i >= l->n)
            return jr_fail(r, line, "%s", "pop index out of range");
        *out = l->items[i];
        memmove(l->items + i, l->items + i + 1, (l->n - (size_t)i - 1) * sizeof *l->items);
        l->n--;
    } else if (is(m, "insert")) {
        int64_t i = int_or(a0, 0);
        struct jv v = jr_arg(c, 1, NULL);
        if (i < 0)
            i += (int64_t)l->n;
        if (i < 0)
            i = 0;
        if ((size_t)i > l->n)
            i = (int64_t)l->n;
        if (!(rc = jv_list_push(r, l, v))) {
            memmove(l->items + i + 1, l->items + i, (l->n - 1 - (size_t)i) * sizeof *l->items);
            l->items[i] = v;
        }
    } else if (is(m, "index")) {
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(l->items[i], a0)) {
                *out = jv_int((int64_t)i);
                return 0;
            }
        return jr_fail(r, line, "%s", "value is not in list");
    } else if (is(m, "count")) {
        int64_t k = 0;
        for (size_t i = 0; i < l->n; i++)
            k += jv_equal(l->items[i], a0);
        *out = jv_int(k);
    } else if (is(m, "copy")) {
        struct jv_list *nl;
        if (!(rc = copy_list(r, (struct jv){.t = JV_LIST, .u.l = l}, &nl)))
            *out = list_value(nl);
    } else if (is(m, "reverse")) {
        for (size_t i = 0; i < l->n / 2; i++) {
            struct jv t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
    }
    return rc;
}

static int call_global(struct jrender *r, int line, const char *m, const struct jcall *c,
                       struct jv *out)
{
    int rc = 0;
    if (is(m, "range")) {
        int64_t start = 0, stop, step = 1;
        for (size_t i = 0; i < c->n_pos; i++)
            if (c->pos[i].t != JV_INT && c->pos[i].t != JV_BOOL)
                return jr_fail(r, line, "range() expects integers, got %s",
                               jv_type_name(c->pos[i]));
        if (c->n_pos == 1) {
            stop = int_or(c->pos[0], 0);
        } else if (c->n_pos == 2 || c->n_pos == 3) {
            start = int_or(c->pos[0], 0);
            stop = int_or(c->pos[1], 0);
            if (c->n_pos == 3)
                step = int_or(c->pos[2], 1);
        } else {
            return jr_fail(r, line, "range expected 1 to 3 arguments, got %zu", c->n_pos);
        }
        if (step == 0)
            return jr_fail(r, line, "%s", "range() arg 3 must not be zero");
        double count = ceil(((double)stop - (double)start) / (double)step);
        if (count < 0)
            count = 0;
        if (count > (double)r->lim.max_steps)
            return err_set(r->e, ERR_TOO_LARGE, "jinja: line %d: range of %.0f items is too large",
                           line, count);
        struct jv_list *l = jv_list_new(r, (size_t)count);
        if (!l)
            return jr_oom(r);
        for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step)
            l->items[l->n++] = jv_int(v);
        r->steps += l->n;
        *out = list_value(l);
    } else if (is(m, "dict") || is(m, "namespace")) {
        struct jv_dict *d = jv_dict_new(r, 0);
        if (!d)
            return jr_oom(r);
        d->ns = m[0] == 'n';
        if (c->n_pos == 1 && c->pos[0].t == JV_DICT) {
            for (size_t i = 0; !rc && i < c->pos[0].u.d->n; i++)
                rc = jv_dict_set(r, d, c->pos[0].u.d->keys[i], c->pos[0].u.d->vals[i]);
        } else if (c->n_pos) {
            return jr_fail(r, line, "%s() takes keyword arguments or one mapping", m);
        }
        for (size_t k = 0; !rc && k < c->n_kw; k++)
            rc = jv_dict_set(r, d, jv_cstr(r, c->kw_names[k]), c->kw[k]);
        *out = (struct jv){.t = JV_DICT, .u.d = d};
    } else if (is(m, "raise_exception")) {
        struct jv msg = jr_arg(c, 0, NULL);
        struct buf b;
        buf_init(&b, 200);
        jv_to_str(r, msg, &b);
        rc = jr_fail(r, line, "%s", b.data ? b.data : "");
        buf_deinit(&b);
    } else if (is(m, "strftime_now")) {
        struct jv fmt = jr_arg(c, 0, NULL);
        if ((rc = need_str(r, line, fmt, "strftime_now")))
            return rc;
        char f[128], res[256];
        if (fmt.u.s.n >= sizeof f)
            return jr_fail(r, line, "%s", "strftime_now format too long");
        memcpy(f, fmt.u.s.p, fmt.u.s.n);
        f[fmt.u.s.n] = 0;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t n = strftime(res, sizeof res, f, &tm);
        rc = jv_str_new(r, res, n, out);
    }
    return rc;
}

int jr_call_builtin(struct jrender *r, int line, struct jv_func *fn, const struct jcall *c,
                    struct jv *out)
{
    r->line = line;
    switch (fn->kind) {
    case JF_GLOBAL:
        return call_global(r, line, fn->name, c, out);
    case JF_CYCLE: {
        if (c->n_pos == 0)
            return jr_fail(r, line, "%s", "no items for cycling given");
        *out = c->pos[(size_t)fn->self.u.i % c->n_pos];
        return 0;
    }
    case JF_METHOD:
        if (fn->self.t == JV_STR)
            return call_str_method(r, line, fn->name, fn->self, c, out);
        if (fn->self.t == JV_DICT)
            return call_dict_method(r, line, fn->name, fn->self.u.d, c, out);
        if (fn->self.t == JV_LIST)
            return call_list_method(r, line, fn->name, fn->self.u.l, c, out);
        break;
    default:
        break;
    }
    return jr_fail(r, line, "'%s' is not callable", fn->name ? fn->name : "object");
}

// Runtime values: Python semantics for truth, equality and ordering, str()
// and repr() as Python prints them, json.dumps as transformers' tojson
// calls it, and conversion of the JSON context. All allocation goes to the
// render arena, whose cap bounds memory.
#include "jinja/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int jr_oom(struct jrender *r)
{
    return err_set(r->e, ERR_TOO_LARGE,
                   "jinja: line %d: template used more than %zu bytes of memory", r->line,
                   r->lim.max_memory_bytes);
}

bool jv_truthy(struct jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0;
    case JV_STR:
        return v.u.s.n != 0;
    case JV_LIST:
        return v.u.l->n != 0;
    case JV_DICT:
        return v.u.d->ns || v.u.d->n != 0;
    case JV_FUNC:
        return true;
    }
    return false;
}

static bool is_num(struct jv v)
{
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
static double num(struct jv v)
{
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}

bool jv_equal(struct jv a, struct jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_INT ? a.u.i : a.u.b, y = b.t == JV_INT ? b.u.i : b.u.b;
            return x == y;
        }
        return num(a) == num(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->items[i], b.u.l->items[i]))
                return false;
        return true;
    case JV_DICT:
        if (a.u.d->ns || b.u.d->ns)
            return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct jv *o = jv_dict_get(b.u.d, a.u.d->keys[i]);
            if (!o || !jv_equal(a.u.d->vals[i], *o))
                return false;
        }
        return true;
    case JV_FUNC:
        return a.u.fn == b.u.fn;
    default:
        return false;
    }
}

const char *jv_type_name(struct jv v)
{
    switch (v.t) {
    case JV_UNDEF:
        return "Undefined";
    case JV_NONE:
        return "NoneType";
    case JV_BOOL:
        return "bool";
    case JV_INT:
        return "int";
    case JV_FLOAT:
        return "float";
    case JV_STR:
        return "str";
    case JV_LIST:
        return v.u.l->tuple ? "tuple" : "list";
    case JV_DICT:
        return v.u.d->ns ? "Namespace" : "dict";
    case JV_FUNC:
        return "function";
    }
    return "object";
}

int jv_compare(struct jrender *r, struct jv a, struct jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_INT ? a.u.i : a.u.b, y = b.t == JV_INT ? b.u.i : b.u.b;
            return x < y ? -1 : x > y;
        }
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a.u.l->items[i], b.u.l->items[i]))
                continue;
            return jv_compare(r, a.u.l->items[i], b.u.l->items[i]);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jr_fail(r, r->line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
            jv_type_name(b));
    return -2;
}

// ---------------------------------------------------------------------------
// Containers

struct jv_list *jv_list_new(struct jrender *r, size_t cap)
{
    struct jv_list *l = arena_alloc(r->a, sizeof *l);
    if (!l)
        return NULL;
    memset(l, 0, sizeof *l);
    if (cap) {
        if (cap > r->lim.max_memory_bytes / sizeof(struct jv) ||
            !(l->items = arena_alloc(r->a, cap * sizeof(struct jv))))
            return NULL;
        l->cap = cap;
    }
    return l;
}

int jv_list_push(struct jrender *r, struct jv_list *l, struct jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct jv *items = arena_alloc(r->a, cap * sizeof *items);
        if (!items)
            return jr_oom(r);
        if (l->n)
            memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = v;
    return 0;
}

struct jv_dict *jv_dict_new(struct jrender *r, size_t cap)
{
    struct jv_dict *d = arena_alloc(r->a, sizeof *d);
    if (!d)
        return NULL;
    memset(d, 0, sizeof *d);
    if (cap) {
        d->keys = arena_alloc(r->a, cap * sizeof(struct jv));
        d->vals = arena_alloc(r->a, cap * sizeof(struct jv));
        if (!d->keys || !d->vals)
            return NULL;
        d->cap = cap;
    }
    return d;
}

struct jv *jv_dict_get(struct jv_dict *d, struct jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], k))
            return &d->vals[i];
    return NULL;
}

struct jv *jv_dict_get_cstr(struct jv_dict *d, const char *k)
{
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].t == JV_STR && d->keys[i].u.s.n == n && memcmp(d->keys[i].u.s.p, k, n) == 0)
            return &d->vals[i];
    return NULL;
}

int jv_dict_set(struct jrender *r, struct jv_dict *d, struct jv k, struct jv v)
{
    struct jv *old = jv_dict_get(d, k);
    if (old) {
        *old = v;
        return 0;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct jv *keys = arena_alloc(r->a, cap * sizeof *keys);
        struct jv *vals = arena_alloc(r->a, cap * sizeof *vals);
        if (!keys || !vals)
            return jr_oom(r);
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->n] = k;
    d->vals[d->n++] = v;
    return 0;
}

struct jv jv_cstr(struct jrender *r, const char *s)
{
    (void)r;
    return jv_str(s, strlen(s));
}

int jv_str_new(struct jrender *r, const char *p, size_t n, struct jv *out)
{
    char *s = arena_alloc(r->a, n + 1);
    if (!s)
        return jr_oom(r);
    if (n)
        memcpy(s, p, n);
    s[n] = 0;
    *out = jv_str(s, n);
    return 0;
}

// ---------------------------------------------------------------------------
// UTF-8: Python strings index code points.

size_t jv_utf8_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

size_t jv_utf8_offset(const char *s, size_t n, size_t idx)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (k == idx)
                return i;
            k++;
        }
    }
    return n;
}

// ---------------------------------------------------------------------------
// Printing

// Python's repr(float): the shortest digits that round-trip; fixed notation
// for exponents in [-4, 16), else d.ddde+XX.
int jv_format_float(double f, char *out, size_t n)
{
    if (isnan(f))
        return snprintf(out, n, "nan");
    if (isinf(f))
        return snprintf(out, n, f < 0 ? "-inf" : "inf");
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec, f);
    // e: [-]d[.ddd]e[+-]XX
    char digits[32];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = (int)strtol(p + 1, NULL, 10);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char buf[64];
    size_t k = 0;
    if (neg)
        buf[k++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            buf[k++] = '0';
            buf[k++] = '.';
            for (int i = -1; i > exp; i--)
                buf[k++] = '0';
            for (size_t i = 0; i < nd; i++)
                buf[k++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                buf[k++] = (size_t)i < nd ? digits[i] : '0';
            buf[k++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++)
                    buf[k++] = digits[i];
            else
                buf[k++] = '0';
        }
        buf[k] = 0;
    } else {
        buf[k++] = digits[0];
        if (nd > 1) {
            buf[k++] = '.';
            for (size_t i = 1; i < nd; i++)
                buf[k++] = digits[i];
        }
        buf[k] = 0;
        snprintf(buf + k, sizeof buf - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    return snprintf(out, n, "%s", buf);
}

// repr() of a string: single quotes unless it contains ' and no ".
static int repr_str(struct buf *b, const char *s, size_t n)
{
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    int rc = buf_append_char(b, q);
    for (size_t i = 0; !rc && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == (unsigned char)q || c == '\\')
            rc = buf_printf(b, "\\%c", c);
        else if (c == '\n')
            rc = buf_append_str(b, "\\n");
        else if (c == '\r')
            rc = buf_append_str(b, "\\r");
        else if (c == '\t')
            rc = buf_append_str(b, "\\t");
        else if (c < 0x20 || c == 0x7f)
            rc = buf_printf(b, "\\x%02x", c);
        else
            rc = buf_append_char(b, (char)c);
    }
    return rc ? rc : buf_append_char(b, q);
}

static int to_str(struct jrender *r, struct jv v, struct buf *b, bool repr, int depth)
{
    char num[64];
    if (depth > 100)
        return jr_fail(r, r->line, "%s", "value nested too deeply to print");
    switch (v.t) {
    case JV_UNDEF:
        return 0;
    case JV_NONE:
        return buf_append_str(b, "None");
    case JV_BOOL:
        return buf_append_str(b, v.u.b ? "True" : "False");
    case JV_INT:
        return buf_printf(b, "%lld", (long long)v.u.i);
    case JV_FLOAT:
        jv_format_float(v.u.f, num, sizeof num);
        return buf_append_str(b, num);
    case JV_STR:
        return repr ? repr_str(b, v.u.s.p, v.u.s.n) : buf_append(b, v.u.s.p, v.u.s.n);
    case JV_LIST: {
        int rc = buf_append_char(b, v.u.l->tuple ? '(' : '[');
        for (size_t i = 0; !rc && i < v.u.l->n; i++) {
            if (i)
                rc = buf_append_str(b, ", ");
            if (!rc)
                rc = to_str(r, v.u.l->items[i], b, true, depth + 1);
        }
        if (!rc && v.u.l->tuple && v.u.l->n == 1)
            rc = buf_append_char(b, ',');
        return rc ? rc : buf_append_char(b, v.u.l->tuple ? ')' : ']');
    }
    case JV_DICT: {
        int rc = buf_append_str(b, v.u.d->ns ? "<Namespace {" : "{");
        for (size_t i = 0; !rc && i < v.u.d->n; i++) {
            if (i)
                rc = buf_append_str(b, ", ");
            if (!rc)
                rc = to_str(r, v.u.d->keys[i], b, true, depth + 1);
            if (!rc)
                rc = buf_append_str(b, ": ");
            if (!rc)
                rc = to_str(r, v.u.d->vals[i], b, true, depth + 1);
        }
        return rc ? rc : buf_append_str(b, v.u.d->ns ? "}>" : "}");
    }
    case JV_FUNC:
        return buf_printf(b, "<function %s>", v.u.fn->name ? v.u.fn->name : "");
    }
    return 0;
}

int jv_to_str(struct jrender *r, struct jv v, struct buf *b)
{
    int rc = to_str(r, v, b, false, 0);
    if (rc == ERR_TOO_LARGE)
        return jr_oom(r);
    return rc;
}

int jv_stringify(struct jrender *r, struct jv v, struct jv *out)
{
    if (v.t == JV_STR) {
        *out = v;
        return 0;
    }
    if (v.t == JV_UNDEF) {
        *out = jv_str("", 0);
        return 0;
    }
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    int rc = jv_to_str(r, v, &b);
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

// ---------------------------------------------------------------------------
// JSON (Python's json.dumps with ensure_ascii=False)

// A non-ASCII character at s as \uXXXX (Python's ensure_ascii); *i moves past it.
static int json_ascii_escape(struct buf *b, const char *s, size_t n, size_t *i)
{
    size_t len;
    uint32_t cp = utf8_decode((const unsigned char *)s + *i, n - *i, &len);
    if (cp == UTF8_INVALID) {  // not UTF-8: the byte as it is
        return buf_append_char(b, s[*i]);
    }
    *i += len - 1;
    if (cp < 0x10000)
        return buf_printf(b, "\\u%04x", (unsigned)cp);
    cp -= 0x10000;
    return buf_printf(b, "\\u%04x\\u%04x", 0xd800u + ((unsigned)cp >> 10),
                      0xdc00u + ((unsigned)cp & 0x3ff));
}

static int json_str(struct buf *b, const char *s, size_t n, bool ascii)
{
    int rc = buf_append_char(b, '"');
    for (size_t i = 0; !rc && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (ascii && c >= 0x80) {
            rc = json_ascii_escape(b, s, n, &i);
            continue;
        }
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : NULL;
        if (esc)
            rc = buf_append_str(b, esc);
        else if (c < 0x20)
            rc = buf_printf(b, "\\u%04x", c);
        else
            rc = buf_append_char(b, (char)c);
    }
    return rc ? rc : buf_append_char(b, '"');
}

static int newline_indent(struct buf *b, const struct jv_json_opts *o, int level)
{
    int rc = buf_append_char(b, '\n');
    for (int i = 0; !rc && i < o->indent * level; i++)
        rc = buf_append_char(b, ' ');
    return rc;
}

static int to_json(struct jrender *r, struct jv v, const struct jv_json_opts *o, struct buf *b,
                   int level);

static int list_to_json(struct jrender *r, const struct jv_list *l, const struct jv_json_opts *o,
                        struct buf *b, int level)
{
    if (l->n == 0)
        return buf_append_str(b, "[]");
    int rc = buf_append_char(b, '[');
    for (size_t i = 0; !rc && i < l->n; i++) {
        if (i)
            rc = buf_append_str(b, o->item_sep);
        if (!rc && o->indent >= 0)
            rc = newline_indent(b, o, level + 1);
        if (!rc)
            rc = to_json(r, l->items[i], o, b, level + 1);
    }
    if (!rc && o->indent >= 0)
        rc = newline_indent(b, o, level);
    return rc ? rc : buf_append_char(b, ']');
}

// The order to write d's entries in: insertion order, or sorted by key
// (stable) with sort_keys. Fails when two keys do not compare.
static int dict_key_order(struct jrender *r, const struct jv_dict *d, const struct jv_json_opts *o,
                          size_t **out)
{
    size_t *order = arena_alloc(r->a, d->n * sizeof *order);
    if (!order)
        return jr_oom(r);
    for (size_t i = 0; i < d->n; i++)
        order[i] = i;
    if (o->sort_keys) {
        for (size_t i = 1; i < d->n; i++) {  // insertion sort: stable, dicts are small
            size_t x = order[i], j = i;
            while (j > 0) {
                int c = jv_compare(r, d->keys[order[j - 1]], d->keys[x]);
                if (c == -2)
                    return ERR_FORMAT;
                if (c <= 0)
                    break;
                order[j] = order[j - 1];
                j--;
            }
            order[j] = x;
        }
    }
    *out = order;
    return 0;
}

// A dict key as a JSON string: strings as they are, numbers, bools and None
// as their JSON text in quotes, as Python's json module does.
static int key_to_json(struct jrender *r, struct jv key, const struct jv_json_opts *o,
                       struct buf *b, int level)
{
    if (key.t == JV_STR)
        return json_str(b, key.u.s.p, key.u.s.n, o->ensure_ascii);
    if (key.t == JV_INT || key.t == JV_FLOAT || key.t == JV_BOOL || key.t == JV_NONE) {
        struct buf kb;
        buf_init(&kb, 0);
        int rc = to_json(r, key, o, &kb, level + 1);
        if (!rc)
            rc = json_str(b, kb.data, kb.len, o->ensure_ascii);
        buf_deinit(&kb);
        return rc;
    }
    return jr_fail(r, r->line, "keys must be str, int, float, bool or None, not %s",
                   jv_type_name(key));
}

static int dict_to_json(struct jrender *r, const struct jv_dict *d, const struct jv_json_opts *o,
                        struct buf *b, int level)
{
    if (d->ns)
        return jr_fail(r, r->line, "%s", "Object of type Namespace is not JSON serializable");
    if (d->n == 0)
        return buf_append_str(b, "{}");
    size_t *order = NULL;
    int rc = dict_key_order(r, d, o, &order);
    if (rc)
        return rc;
    rc = buf_append_char(b, '{');
    for (size_t k = 0; !rc && k < d->n; k++) {
        size_t i = order[k];
        if (k)
            rc = buf_append_str(b, o->item_sep);
        if (!rc && o->indent >= 0)
            rc = newline_indent(b, o, level + 1);
        if (rc)
            break;
        rc = key_to_json(r, d->keys[i], o, b, level);
        if (!rc)
            rc = buf_append_str(b, o->key_sep);
        if (!rc)
            rc = to_json(r, d->vals[i], o, b, level + 1);
    }
    if (!rc && o->indent >= 0)
        rc = newline_indent(b, o, level);
    return rc ? rc : buf_append_char(b, '}');
}

static int to_json(struct jrender *r, struct jv v, const struct jv_json_opts *o, struct buf *b,
                   int level)
{
    char num[64];
    if (level > 100)
        return jr_fail(r, r->line, "%s", "value nested too deeply for tojson");
    switch (v.t) {
    case JV_UNDEF:
        return jr_fail(r, r->line, "%s", "Object of type Undefined is not JSON serializable");
    case JV_NONE:
        return buf_append_str(b, "null");
    case JV_BOOL:
        return buf_append_str(b, v.u.b ? "true" : "false");
    case JV_INT:
        return buf_printf(b, "%lld", (long long)v.u.i);
    case JV_FLOAT:
        if (isnan(v.u.f))
            return buf_append_str(b, "NaN");
        if (isinf(v.u.f))
            return buf_append_str(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        jv_format_float(v.u.f, num, sizeof num);
        return buf_append_str(b, num);
    case JV_STR:
        return json_str(b, v.u.s.p, v.u.s.n, o->ensure_ascii);
    case JV_LIST:
        return list_to_json(r, v.u.l, o, b, level);
    case JV_DICT:
        return dict_to_json(r, v.u.d, o, b, level);
    case JV_FUNC:
        return jr_fail(r, r->line, "%s", "Object of type function is not JSON serializable");
    }
    return 0;
}

int jv_to_json(struct jrender *r, struct jv v, const struct jv_json_opts *o, struct buf *b)
{
    int rc = to_json(r, v, o, b, 0);
    if (rc == ERR_TOO_LARGE && r->e && !r->e->code)
        return jr_oom(r);
    return rc;
}

int jv_from_json(struct jrender *r, json_t *j, struct jv *out)
{
    switch (json_typeof(j)) {
    case JSON_NULL:
        *out = jv_none();
        return 0;
    case JSON_TRUE:
        *out = jv_bool(true);
        return 0;
    case JSON_FALSE:
        *out = jv_bool(false);
        return 0;
    case JSON_INTEGER:
        *out = jv_int((int64_t)json_integer_value(j));
        return 0;
    case JSON_REAL:
        *out = jv_float(json_real_value(j));
        return 0;
    case JSON_STRING:
        *out = jv_str(json_string_value(j), json_string_length(j));
        return 0;
    case JSON_ARRAY: {
        struct jv_list *l = jv_list_new(r, json_array_size(j));
        if (!l)
            return jr_oom(r);
        for (size_t i = 0; i < json_array_size(j); i++) {
            int rc = jv_from_json(r, json_array_get(j, i), &l->items[l->n]);
            if (rc)
                return rc;
            l->n++;
        }
        *out = (struct jv){.t = JV_LIST, .u.l = l};
        return 0;
    }
    case JSON_OBJECT: {
        struct jv_dict *d = jv_dict_new(r, json_object_size(j));
        if (!d)
            return jr_oom(r);
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            int rc = jv_from_json(r, v, &d->vals[d->n]);
            if (rc)
                return rc;
            d->keys[d->n++] = jv_str(k, strlen(k));
        }
        *out = (struct jv){.t = JV_DICT, .u.d = d};
        return 0;
    }
    }
    *out = jv_none();
    return 0;
}

// ---------------------------------------------------------------------------
// Iteration and length

int jv_iterate(struct jrender *r, struct jv v, struct jv_list **out)
{
    if (v.t == JV_NONE && r->lim.llama_cpp)
        v.t = JV_UNDEF;  // llama.cpp iterates none as nothing (Functionary's tools | selectattr)
    switch (v.t) {
    case JV_UNDEF:
        *out = jv_list_new(r, 0);
        return *out ? 0 : jr_oom(r);
    case JV_LIST:
        *out = v.u.l;
        return 0;
    case JV_DICT: {
        struct jv_list *l = jv_list_new(r, v.u.d->n);
        if (!l)
            return jr_oom(r);
        jv_copy(l->items, v.u.d->keys, v.u.d->n * sizeof *l->items);
        l->n = v.u.d->n;
        *out = l;
        return 0;
    }
    case JV_STR: {
        size_t n = jv_utf8_len(v.u.s.p, v.u.s.n);
        struct jv_list *l = jv_list_new(r, n);
        if (!l)
            return jr_oom(r);
        size_t i = 0;
        while (i < v.u.s.n) {
            size_t j = i + 1;
            while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xc0) == 0x80)
                j++;
            l->items[l->n++] = jv_str(v.u.s.p + i, j - i);
            i = j;
        }
        *out = l;
        return 0;
    }
    default:
        return jr_fail(r, r->line, "'%s' object is not iterable", jv_type_name(v));
    }
}

int jv_length(struct jrender *r, struct jv v, int64_t *out)
{
    switch (v.t) {
    case JV_UNDEF:
        *out = 0;
        return 0;
    case JV_STR:
        *out = (int64_t)jv_utf8_len(v.u.s.p, v.u.s.n);
        return 0;
    case JV_LIST:
        *out = (int64_t)v.u.l->n;
        return 0;
    case JV_DICT:
        *out = (int64_t)v.u.d->n;
        return 0;
    default:
        return jr_fail(r, r->line, "object of type '%s' has no len()", jv_type_name(v));
    }
}

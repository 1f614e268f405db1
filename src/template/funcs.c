// Template functions (templates.md §4): Go's built-ins (comparison, logic,
// len/index/slice, print/printf/println with Go's verbs, html/js/urlquery)
// and the ones Ollama adds (json, currentDate, yesterdayDate,
// toTypeScriptType). and/or short-circuit in exec.c.
#include "template/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int want_args(struct exec *x, int fn, size_t got, size_t want)
{
    if (got != want)
        return exec_errorf(x, "error calling %s: wrong number of args for %s: want %zu got %zu",
                           tmpl_func_name(fn), tmpl_func_name(fn), want, got);
    return 0;
}

static int ret_buf(struct exec *x, struct buf *b, struct tval *out)
{
    int rc = exec_str(x, buf_cstr(b), b->len, out);
    buf_deinit(b);
    return rc;
}

// ---------------------------------------------------------------------------
// Comparison

enum { K_INVALID, K_BOOL, K_INT, K_FLOAT, K_COMPLEX, K_STRING, K_OTHER };

static int basic_kind(const struct tval *v)
{
    switch (v->kind) {
    case TV_NIL:
        return K_INVALID;
    case TV_BOOL:
        return K_BOOL;
    case TV_INT:
        return K_INT;
    case TV_FLOAT:
        return K_FLOAT;
    case TV_COMPLEX:
        return K_COMPLEX;
    case TV_STR:
        return K_STRING;
    default:
        return K_OTHER;
    }
}

static int cmp_str(const struct tval *a, const struct tval *b)
{
    size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int c = memcmp(a->u.s.p, b->u.s.p, n);
    if (c)
        return c;
    return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
}

static int fn_eq(struct exec *x, struct tval *args, size_t n, bool *out)
{
    if (n < 2)
        return exec_errorf(x, "error calling eq: missing argument for comparison");
    const struct tval *a = &args[0];
    int k1 = basic_kind(a);
    for (size_t i = 1; i < n; i++) {
        const struct tval *b = &args[i];
        int k2 = basic_kind(b);
        bool t = false;
        if (k1 != k2) {
            if (a->kind != TV_NIL && b->kind != TV_NIL)
                return exec_errorf(x, "error calling eq: incompatible types for comparison");
        } else {
            switch (k1) {
            case K_BOOL:
                t = a->u.b == b->u.b;
                break;
            case K_INT:
                t = a->u.i == b->u.i;
                break;
            case K_FLOAT:
                t = a->u.f == b->u.f;
                break;
            case K_COMPLEX:
                t = a->u.c.re == b->u.c.re && a->u.c.im == b->u.c.im;
                break;
            case K_STRING:
                t = cmp_str(a, b) == 0;
                break;
            case K_INVALID:
                t = true;
                break;
            default:
                if (tv_is_list(a) || tv_is_map(a) || tv_is_list(b) || tv_is_map(b))
                    return exec_errorf(x, "error calling eq: non-comparable type %s",
                                       tv_type_name(a));
                t = a->schema == b->schema && a->u.j.j == b->u.j.j;
            }
        }
        if (t) {
            *out = true;
            return 0;
        }
    }
    *out = false;
    return 0;
}

static int fn_lt(struct exec *x, const char *name, const struct tval *a, const struct tval *b,
                 bool *out)
{
    int k1 = basic_kind(a), k2 = basic_kind(b);
    if (k1 == K_INVALID || k1 == K_OTHER || k2 == K_INVALID || k2 == K_OTHER)
        return exec_errorf(x, "error calling %s: invalid type for comparison", name);
    if (k1 != k2)
        return exec_errorf(x, "error calling %s: incompatible types for comparison", name);
    switch (k1) {
    case K_INT:
        *out = a->u.i < b->u.i;
        return 0;
    case K_FLOAT:
        *out = a->u.f < b->u.f;
        return 0;
    case K_STRING:
        *out = cmp_str(a, b) < 0;
        return 0;
    default:
        return exec_errorf(x, "error calling %s: invalid type for comparison", name);
    }
}

// ---------------------------------------------------------------------------
// fmt

static bool is_str(const struct tval *v)
{
    return v->kind == TV_STR;
}

static int sprint(struct buf *b, const struct tval *args, size_t n, bool ln)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i > 0 && (ln || (!is_str(&args[i]) && !is_str(&args[i - 1]))))
            rc = buf_append_char(b, ' ');
        if (!rc)
            rc = tv_print_nested(b, &args[i]);
    }
    if (ln && !rc)
        rc = buf_append_char(b, '\n');
    return rc;
}

struct spec {
    bool minus, plus, sharp, zero, space;
    int width, prec;  // -1 when absent
};

static size_t rune_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

// Appends s padded to the width; zero padding goes after a sign.
static int pad(struct buf *b, const struct spec *sp, const char *s, size_t n, bool numeric)
{
    size_t w = rune_count(s, n);
    size_t fill = sp->width > 0 && (size_t)sp->width > w ? (size_t)sp->width - w : 0;
    int rc = 0;
    if (sp->minus) {
        rc |= buf_append(b, s, n);
        for (size_t i = 0; i < fill; i++)
            rc |= buf_append_char(b, ' ');
    } else if (sp->zero && numeric) {
        size_t k = 0;
        if (n && (s[0] == '-' || s[0] == '+' || s[0] == ' '))
            rc |= buf_append_char(b, s[k++]);
        for (size_t i = 0; i < fill; i++)
            rc |= buf_append_char(b, '0');
        rc |= buf_append(b, s + k, n - k);
    } else {
        for (size_t i = 0; i < fill; i++)
            rc |= buf_append_char(b, sp->zero ? '0' : ' ');
        rc |= buf_append(b, s, n);
    }
    return rc ? ERR_TOO_LARGE : 0;
}

// Go writes U+FFFD for a rune that is not a valid code point.
static size_t put_utf8(char *o, uint32_t c)
{
    if (c > 0x10FFFF || (c >= 0xD800 && c < 0xE000))
        c = 0xFFFD;
    return utf8_encode(c, o);
}

static int fmt_int(struct buf *b, const struct spec *sp, int64_t v, char verb)
{
    char digits[80];
    int base = 10;
    const char *set = "0123456789abcdef";
    switch (verb) {
    case 'b':
        base = 2;
        break;
    case 'o':
    case 'O':
        base = 8;
        break;
    case 'x':
        base = 16;
        break;
    case 'X':
        base = 16, set = "0123456789ABCDEF";
        break;
    default:
        break;
    }
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int k = 0;
    do {
        digits[k++] = set[u % (uint64_t)base];
        u /= (uint64_t)base;
    } while (u);
    char s[160];
    size_t n = 0;
    if (v < 0)
        s[n++] = '-';
    else if (sp->plus)
        s[n++] = '+';
    else if (sp->space)
        s[n++] = ' ';
    if (verb == 'O' || (sp->sharp && base == 8))
        s[n++] = '0', s[n++] = verb == 'O' ? 'o' : 0;
    if (n && s[n - 1] == 0)
        n--;
    if (sp->sharp && base == 16)
        s[n++] = '0', s[n++] = verb;
    if (sp->sharp && base == 2)
        s[n++] = '0', s[n++] = 'b';
    int prec = sp->prec > 70 ? 70 : sp->prec;
    for (int i = k; i < prec; i++)
        s[n++] = '0';
    if (!(prec == 0 && v == 0))
        while (k)
            s[n++] = digits[--k];
    struct spec sp2 = *sp;
    if (sp->prec >= 0)
        sp2.zero = false;
    return pad(b, &sp2, s, n, true);
}

static int fmt_float(struct buf *b, const struct spec *sp, double f, char verb)
{
    struct buf t;
    buf_init(&t, 4096);
    int rc = 0;
    if (sp->plus && !signbit(f))
        rc |= buf_append_char(&t, '+');
    else if (sp->space && !signbit(f))
        rc |= buf_append_char(&t, ' ');
    if (verb == 'v')
        verb = 'g';
    if (verb == 'F')
        verb = 'f';
    int prec = sp->prec > 200 ? 200 : sp->prec;
    if ((verb == 'g' || verb == 'G') && prec < 0) {
        rc |= go_format_float(&t, f, 'g', -1);
        if (verb == 'G')
            for (size_t i = 0; i < t.len; i++)
                if (t.data[i] == 'e')
                    t.data[i] = 'E';
    } else if (!isfinite(f)) {
        rc |= go_format_float(&t, f, 'g', -1);
    } else {
        char cfmt[16];
        snprintf(cfmt, sizeof(cfmt), "%%%s.%d%c", sp->sharp ? "#" : "", prec < 0 ? 6 : prec, verb);
        rc |= buf_printf(&t, cfmt, f);
    }
    if (!rc)
        rc = pad(b, sp, buf_cstr(&t), t.len, isfinite(f));
    buf_deinit(&t);
    return rc;
}

static int bad_verb(struct buf *b, char verb, const struct tval *v)
{
    int rc = buf_printf(b, "%%!%c(", verb);
    if (v->kind == TV_NIL)
        return rc | buf_append_str(b, "<nil>)");
    rc |= buf_printf(b, "%s=", tv_type_name(v));
    rc |= tv_print_nested(b, v);
    return rc | buf_append_char(b, ')');
}

// %c and %q of an integer: the rune it names, bare or single-quoted.
static int fmt_rune(struct buf *b, const struct spec *sp, int64_t v, char verb)
{
    char s[4];
    size_t n = put_utf8(s, (uint32_t)v);
    if (verb == 'c')
        return pad(b, sp, s, n, false);
    struct buf t;
    buf_init(&t, 64);
    go_quote(&t, s, n);
    t.data[0] = t.data[t.len - 1] = '\'';
    if (n == 1 && s[0] == '\'') {
        buf_reset(&t);
        buf_append_str(&t, "'\\''");
    } else if (n == 1 && s[0] == '"') {
        buf_reset(&t);
        buf_append_str(&t, "'\"'");
    }
    int rc = pad(b, sp, buf_cstr(&t), t.len, false);
    buf_deinit(&t);
    return rc;
}

static int fmt_int_value(struct buf *b, const struct spec *sp, char verb, const struct tval *v)
{
    switch (verb) {
    case 'v':
    case 'd':
    case 'b':
    case 'o':
    case 'O':
    case 'x':
    case 'X':
        return fmt_int(b, sp, v->u.i, verb == 'v' ? 'd' : verb);
    case 'c':
    case 'q':
        return fmt_rune(b, sp, v->u.i, verb);
    case 'U': {
        char s[32];
        int n = snprintf(s, sizeof(s), "U+%04llX", (unsigned long long)v->u.i);
        return pad(b, sp, s, (size_t)n, false);
    }
    default:
        return bad_verb(b, verb, v);
    }
}

static int fmt_float_value(struct buf *b, const struct spec *sp, char verb, const struct tval *v)
{
    switch (verb) {
    case 'v':
    case 'g':
    case 'G':
    case 'e':
    case 'E':
    case 'f':
    case 'F':
        return fmt_float(b, sp, v->u.f, verb);
    default:
        return bad_verb(b, verb, v);
    }
}

// Pads a scratch buffer's text into b, then frees the scratch buffer.
static int pad_scratch(struct buf *b, const struct spec *sp, struct buf *t, int rc)
{
    if (!rc)
        rc = pad(b, sp, buf_cstr(t), t->len, false);
    buf_deinit(t);
    return rc;
}

// %s and %v of a string; a precision keeps that many runes.
static int fmt_str_plain(struct buf *b, const struct spec *sp, const struct tval *v)
{
    size_t n = v->u.s.n;
    if (sp->prec >= 0) {
        size_t r = 0, i = 0;
        for (; i < n; i++) {
            if (((unsigned char)v->u.s.p[i] & 0xC0) != 0x80) {
                if (r == (size_t)sp->prec)
                    break;
                r++;
            }
        }
        n = i;
    }
    return pad(b, sp, v->u.s.p, n, false);
}

static int fmt_str_value(struct buf *b, const struct spec *sp, char verb, const struct tval *v)
{
    struct buf t;
    int rc = 0;
    switch (verb) {
    case 'v':
    case 's':
        return fmt_str_plain(b, sp, v);
    case 'q':
        buf_init(&t, 0);
        return pad_scratch(b, sp, &t, go_quote(&t, v->u.s.p, v->u.s.n));
    case 'x':
    case 'X':
        buf_init(&t, 0);
        for (size_t i = 0; i < v->u.s.n && !rc; i++)
            rc = buf_printf(&t, verb == 'x' ? "%02x" : "%02X", (unsigned char)v->u.s.p[i]);
        return pad_scratch(b, sp, &t, rc);
    default:
        return bad_verb(b, verb, v);
    }
}

// One verb applied to one value, as Go's fmt does it (bad pairs print %!verb(type=value)).
static int fmt_one(struct buf *b, const struct spec *sp, char verb, const struct tval *v)
{
    if (verb == 'T') {
        const char *tn = v->kind == TV_NIL ? "<nil>" : tv_type_name(v);
        return pad(b, sp, tn, strlen(tn), false);
    }
    switch (v->kind) {
    case TV_NIL:
        if (verb == 'v')
            return pad(b, sp, "<nil>", 5, false);
        return bad_verb(b, verb, v);
    case TV_BOOL:
        if (verb == 'v' || verb == 't')
            return pad(b, sp, v->u.b ? "true" : "false", v->u.b ? 4 : 5, false);
        return bad_verb(b, verb, v);
    case TV_INT:
        return fmt_int_value(b, sp, verb, v);
    case TV_FLOAT:
        return fmt_float_value(b, sp, verb, v);
    case TV_STR:
        return fmt_str_value(b, sp, verb, v);
    default:
        if (verb == 'v' || verb == 's') {
            struct buf t;
            buf_init(&t, TMPL_MAX_OUTPUT);
            return pad_scratch(b, sp, &t, tv_print_nested(&t, v));
        }
        return bad_verb(b, verb, v);
    }
}

// Where sprintf_go is in its format string and its argument list.
struct fmt_cursor {
    const char *f;
    size_t len, i;  // format length and read position
    const struct tval *args;
    size_t n_args, ai;  // argument count and the next one a verb takes
};

// The flags after '%': any of "-+#0 ". A '-' turns zero padding off.
static void parse_flags(struct fmt_cursor *c, struct spec *sp)
{
    for (; c->i < c->len; c->i++) {
        char ch = c->f[c->i];
        if (ch == '-')
            sp->minus = true, sp->zero = false;
        else if (ch == '+')
            sp->plus = true;
        else if (ch == '#')
            sp->sharp = true;
        else if (ch == '0')
            sp->zero = !sp->minus;
        else if (ch == ' ')
            sp->space = true;
        else
            break;
    }
}

// Decimal digits at the cursor, added onto *v and capped at 10000.
static void parse_digits(struct fmt_cursor *c, int *v)
{
    while (c->i < c->len && c->f[c->i] >= '0' && c->f[c->i] <= '9') {
        *v = *v * 10 + (c->f[c->i] - '0');
        if (*v > 10000)
            *v = 10000;
        c->i++;
    }
}

// The int argument a '*' asks for, or false (the argument, if any, is still used up).
static bool star_arg(struct fmt_cursor *c, int64_t *v)
{
    if (c->ai < c->n_args && c->args[c->ai].kind == TV_INT) {
        *v = c->args[c->ai++].u.i;
        return true;
    }
    if (c->ai < c->n_args)
        c->ai++;
    return false;
}

// Width: digits, or '*' taking an int argument (negative means left-justify).
static int parse_width(struct fmt_cursor *c, struct spec *sp, struct buf *b)
{
    if (c->i < c->len && c->f[c->i] == '*') {
        c->i++;
        int64_t w;
        if (!star_arg(c, &w))
            return buf_append_str(b, "%!(BADWIDTH)");
        if (w < 0)
            sp->minus = true, w = -w;
        sp->width = w > 10000 ? 10000 : (int)w;
        return 0;
    }
    if (c->i < c->len && c->f[c->i] >= '0' && c->f[c->i] <= '9') {
        sp->width = 0;
        parse_digits(c, &sp->width);
    }
    return 0;
}

// Precision: '.' then digits or '*' (a negative argument means none).
static int parse_prec(struct fmt_cursor *c, struct spec *sp, struct buf *b)
{
    if (c->i >= c->len || c->f[c->i] != '.')
        return 0;
    c->i++;
    sp->prec = 0;
    if (c->i < c->len && c->f[c->i] == '*') {
        c->i++;
        int64_t p;
        if (!star_arg(c, &p))
            return buf_append_str(b, "%!(BADPREC)");
        sp->prec = p < 0 ? -1 : p > 10000 ? 10000 : (int)p;
        return 0;
    }
    parse_digits(c, &sp->prec);
    return 0;
}

// Arguments no verb used: %!(EXTRA type=value, ...).
static int fmt_extra(struct buf *b, const struct tval *args, size_t n)
{
    int rc = buf_append_str(b, "%!(EXTRA ");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            rc |= buf_append_str(b, ", ");
        if (args[i].kind == TV_NIL) {
            rc |= buf_append_str(b, "<nil>");
            continue;
        }
        rc |= buf_printf(b, "%s=", tv_type_name(&args[i]));
        rc |= tv_print_nested(b, &args[i]);
    }
    return rc | buf_append_char(b, ')');
}

// Go's fmt.Sprintf over template values: f (len bytes) with n arguments.
static int sprintf_go(struct buf *b, const char *f, size_t len, const struct tval *args, size_t n)
{
    struct fmt_cursor c = {.f = f, .len = len, .args = args, .n_args = n};
    int rc = 0;
    while (c.i < len && !rc) {
        if (f[c.i] != '%') {
            size_t j = c.i;
            while (j < len && f[j] != '%')
                j++;
            rc = buf_append(b, f + c.i, j - c.i);
            c.i = j;
            continue;
        }
        c.i++;
        struct spec sp = {.width = -1, .prec = -1};
        parse_flags(&c, &sp);
        rc |= parse_width(&c, &sp, b);
        rc |= parse_prec(&c, &sp, b);
        if (c.i >= len) {
            rc |= buf_append_str(b, "%!(NOVERB)");
            break;
        }
        char verb = f[c.i++];
        if (verb == '%') {
            rc |= buf_append_char(b, '%');
            continue;
        }
        if ((unsigned char)verb >= 0x80) {
            rc |= buf_append_str(b, "%!");
            rc |= buf_append_char(b, verb);
            continue;
        }
        if (c.ai >= n) {
            rc |= buf_printf(b, "%%!%c(MISSING)", verb);
            continue;
        }
        rc |= fmt_one(b, &sp, verb, &args[c.ai++]);
    }
    if (c.ai < n && !rc)
        rc |= fmt_extra(b, args + c.ai, n - c.ai);
    return rc ? ERR_TOO_LARGE : 0;
}

// ---------------------------------------------------------------------------
// Escapers

static int escape_arg(struct exec *x, struct tval *args, size_t n, struct buf *s)
{
    buf_init(s, TMPL_MAX_OUTPUT);
    if (n == 1 && args[0].kind == TV_STR)
        return buf_append(s, args[0].u.s.p, args[0].u.s.n);
    if (sprint(s, args, n, false))
        return exec_errorf(x, "output too large");
    return 0;
}

static int html_escape(struct buf *o, const char *s, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        switch (s[i]) {
        case '<':
            rc = buf_append_str(o, "&lt;");
            break;
        case '>':
            rc = buf_append_str(o, "&gt;");
            break;
        case '&':
            rc = buf_append_str(o, "&amp;");
            break;
        case '\'':
            rc = buf_append_str(o, "&#39;");
            break;
        case '"':
            rc = buf_append_str(o, "&#34;");
            break;
        case 0:
            rc = buf_append_str(o, "\xEF\xBF\xBD");
            break;
        default:
            rc = buf_append_char(o, s[i]);
        }
    }
    return rc;
}

static int js_escape(struct buf *o, const char *s, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '\\':
            rc = buf_append_str(o, "\\\\");
            break;
        case '\'':
            rc = buf_append_str(o, "\\'");
            break;
        case '"':
            rc = buf_append_str(o, "\\\"");
            break;
        case '<':
            rc = buf_append_str(o, "\\u003C");
            break;
        case '>':
            rc = buf_append_str(o, "\\u003E");
            break;
        case '&':
            rc = buf_append_str(o, "\\u0026");
            break;
        case '=':
            rc = buf_append_str(o, "\\u003D");
            break;
        default:
            if (c < ' ' || c == 0x7f)
                rc = buf_printf(o, "\\u%04X", c);
            else
                rc = buf_append_char(o, (char)c);
        }
    }
    return rc;
}

static int url_escape(struct buf *o, const char *s, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~')
            rc = buf_append_char(o, (char)c);
        else if (c == ' ')
            rc = buf_append_char(o, '+');
        else
            rc = buf_printf(o, "%%%02X", c);
    }
    return rc;
}

// ---------------------------------------------------------------------------
// Ollama's functions

static const char *ts_type(const char *t)
{
    if (!strcmp(t, "string"))
        return "string";
    if (!strcmp(t, "number") || !strcmp(t, "integer"))
        return "number";
    if (!strcmp(t, "boolean"))
        return "boolean";
    if (!strcmp(t, "array"))
        return "any[]";
    if (!strcmp(t, "object"))
        return "Record<string, any>";
    if (!strcmp(t, "null"))
        return "null";
    return "any";
}

static int ts_of_prop(struct buf *b, json_t *prop, int depth)
{
    json_t *any = json_object_get(prop, "anyOf");
    if (json_is_array(any) && json_array_size(any) > 0 && depth < 32) {
        for (size_t i = 0; i < json_array_size(any); i++) {
            if (i)
                buf_append_str(b, " | ");
            ts_of_prop(b, json_array_get(any, i), depth + 1);
        }
        return 0;
    }
    json_t *t = json_object_get(prop, "type");
    if (json_is_string(t))
        return buf_append_str(b, ts_type(json_string_value(t)));
    if (!json_is_array(t) || json_array_size(t) == 0)
        return buf_append_str(b, "any");
    for (size_t i = 0; i < json_array_size(t); i++) {
        if (i)
            buf_append_str(b, " | ");
        json_t *s = json_array_get(t, i);
        buf_append_str(b, ts_type(json_is_string(s) ? json_string_value(s) : ""));
    }
    return 0;
}

static int date_str(struct exec *x, int days_back, struct tval *out)
{
    time_t now = time(NULL) - (time_t)days_back * 86400;
    struct tm tm;
    localtime_r(&now, &tm);
    if (days_back) {  // calendar arithmetic: yesterday's date, DST-safe
        time_t t = time(NULL);
        localtime_r(&t, &tm);
        tm.tm_mday -= days_back;
        tm.tm_hour = 12;
        tm.tm_isdst = -1;
        mktime(&tm);
    }
    char s[32];
    strftime(s, sizeof(s), "%Y-%m-%d", &tm);
    return exec_str(x, s, strlen(s), out);
}

// Builtins. Each takes the already-evaluated arguments and writes one value to
// *out; fn is the builtin's own id, so one body can serve a family (lt/le/gt/ge).

static int builtin_not(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    int rc = want_args(x, fn, n, 1);
    if (rc)
        return rc;
    *out = (struct tval){.kind = TV_BOOL, .u.b = !tv_truth(&args[0])};
    return 0;
}

// and/or with arguments are short-circuited by the evaluator (exec.c); this
// body sees them with all arguments evaluated (today only the bare name, which
// has none and fails the argument count).
static int builtin_and_or(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    if (n == 0)
        return want_args(x, fn, n, 1);
    for (size_t i = 0; i < n; i++) {
        bool t = tv_truth(&args[i]);
        if ((fn == F_AND && !t) || (fn == F_OR && t) || i == n - 1) {
            *out = args[i];
            return 0;
        }
    }
    return 0;
}

static int builtin_len(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    int rc = want_args(x, fn, n, 1);
    if (rc)
        return rc;
    const struct tval *v = &args[0];
    int64_t len;
    if (v->kind == TV_STR)
        len = (int64_t)v->u.s.n;
    else if (tv_is_list(v))
        len = (int64_t)tv_list_len(v);
    else if (tv_is_map(v))
        len = (int64_t)json_object_size(v->u.j.j);
    else if (v->kind == TV_NIL)
        return exec_errorf(x, "error calling len: len of nil pointer");
    else
        return exec_errorf(x, "error calling len: len of type %s", tv_type_name(v));
    *out = (struct tval){.kind = TV_INT, .u.i = len};
    return 0;
}

// One step of index on a string or list: *v becomes its element ix.
static int index_list(struct exec *x, struct tval *v, const struct tval *ix)
{
    if (ix->kind != TV_INT)
        return exec_errorf(x, "error calling index: cannot index slice/array with type %s",
                           ix->kind == TV_NIL ? "nil" : tv_type_name(ix));
    size_t len = v->kind == TV_STR ? v->u.s.n : tv_list_len(v);
    if (ix->u.i < 0 || (uint64_t)ix->u.i >= len)
        return exec_errorf(x, "error calling index: index out of range: %lld", (long long)ix->u.i);
    if (v->kind == TV_STR)
        *v = (struct tval){.kind = TV_INT, .u.i = (unsigned char)v->u.s.p[ix->u.i]};
    else
        *v = tv_list_at(v, (size_t)ix->u.i);
    return 0;
}

// One step of index on a map: *v becomes the value under key ix (nil when
// absent). The key decides the schema of what comes out.
static int index_map(struct exec *x, struct tval *v, const struct tval *ix)
{
    if (ix->kind != TV_STR)
        return exec_errorf(x, "error calling index: value has type %s; should be string",
                           ix->kind == TV_NIL ? "nil" : tv_type_name(ix));
    char *key = xstrndup(ix->u.s.p, ix->u.s.n);
    json_t *j = json_object_get(v->u.j.j, key);
    int sch = v->schema == S_PROPS ? S_PROP : S_GENERIC;
    if (v->schema == S_ROOT)
        sch = !strcmp(key, "Messages") ? S_MSGS : !strcmp(key, "Tools") ? S_TOOLS : S_GENERIC;
    free(key);
    *v = (j || sch == S_PROP) ? tv_from_json(j, sch) : tv_nil();
    return 0;
}

static int builtin_index(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    (void)fn;
    if (n == 0)
        return exec_errorf(x, "wrong number of args for index: want at least 1 got 0");
    struct tval v = args[0];
    for (size_t i = 1; i < n; i++) {
        int rc;
        if (v.kind == TV_NIL)
            return exec_errorf(x, "error calling index: index of untyped nil");
        if (v.kind == TV_STR || tv_is_list(&v))
            rc = index_list(x, &v, &args[i]);
        else if (tv_is_map(&v))
            rc = index_map(x, &v, &args[i]);
        else
            return exec_errorf(x, "error calling index: can't index item of type %s",
                               tv_type_name(&v));
        if (rc)
            return rc;
    }
    *out = v;
    return 0;
}

// The length of what slice is asked to cut (n is the argument count).
static int slice_len(struct exec *x, const struct tval *v, size_t n, size_t *len)
{
    if (v->kind == TV_STR) {
        if (n == 4)
            return exec_errorf(x, "error calling slice: cannot 3-index slice a string");
        *len = v->u.s.n;
    } else if (tv_is_list(v) && v->schema != S_PTYPE) {
        *len = tv_list_len(v);
    } else if (v->kind == TV_NIL) {
        return exec_errorf(x, "error calling slice: slice of untyped nil");
    } else {
        return exec_errorf(x, "error calling slice: can't slice item of type %s", tv_type_name(v));
    }
    return 0;
}

// Reads slice's 1 to 3 indexes into ix and checks them against len and each other.
static int slice_indexes(struct exec *x, const struct tval *args, size_t n, size_t len,
                         int64_t ix[3])
{
    for (size_t i = 1; i < n; i++) {
        if (args[i].kind != TV_INT)
            return exec_errorf(x, "error calling slice: cannot index slice/array with type %s",
                               args[i].kind == TV_NIL ? "nil" : tv_type_name(&args[i]));
        ix[i - 1] = args[i].u.i;
        if (ix[i - 1] < 0 || (uint64_t)ix[i - 1] > len)
            return exec_errorf(x, "error calling slice: index out of range: %lld",
                               (long long)ix[i - 1]);
    }
    if (ix[0] > ix[1])
        return exec_errorf(x, "error calling slice: invalid slice index: %lld > %lld",
                           (long long)ix[0], (long long)ix[1]);
    if (n == 4 && ix[1] > ix[2])
        return exec_errorf(x, "error calling slice: invalid slice index: %lld > %lld",
                           (long long)ix[1], (long long)ix[2]);
    return 0;
}

static int builtin_slice(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    (void)fn;
    if (n == 0)
        return exec_errorf(x, "wrong number of args for slice: want at least 1 got 0");
    struct tval v = args[0];
    if (n == 1) {
        *out = v;
        return 0;
    }
    if (n > 4)
        return exec_errorf(x, "error calling slice: too many slice indexes: %zu", n - 1);
    size_t len = 0;
    int rc = slice_len(x, &v, n, &len);
    if (rc)
        return rc;
    int64_t ix[3] = {0, (int64_t)len, (int64_t)len};
    if ((rc = slice_indexes(x, args, n, len, ix)))
        return rc;
    if (v.kind == TV_STR) {
        *out = (struct tval){.kind = TV_STR, .u.s = {v.u.s.p + ix[0], (size_t)(ix[1] - ix[0])}};
    } else {
        *out = v;
        out->u.j.hi = v.u.j.lo + (size_t)ix[1];
        out->u.j.lo = v.u.j.lo + (size_t)ix[0];
    }
    return 0;
}

static int builtin_eq(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    (void)fn;
    bool t;
    int rc = fn_eq(x, args, n, &t);
    if (rc)
        return rc;
    *out = (struct tval){.kind = TV_BOOL, .u.b = t};
    return 0;
}

static int builtin_ne(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    int rc = want_args(x, fn, n, 2);
    if (rc)
        return rc;
    bool t;
    if ((rc = fn_eq(x, args, n, &t)))
        return rc;
    *out = (struct tval){.kind = TV_BOOL, .u.b = !t};
    return 0;
}

// lt, le, gt and ge all come from one less-than: a > c is c < a, and
// a <= c is !(c < a).
static int builtin_order(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    int rc = want_args(x, fn, n, 2);
    if (rc)
        return rc;
    bool lt;
    const struct tval *a = &args[0], *c = &args[1];
    if (fn == F_GT || fn == F_LE) {
        if ((rc = fn_lt(x, tmpl_func_name(fn), c, a, &lt)))
            return rc;
        *out = (struct tval){.kind = TV_BOOL, .u.b = fn == F_GT ? lt : !lt};
        return 0;
    }
    if ((rc = fn_lt(x, tmpl_func_name(fn), a, c, &lt)))
        return rc;
    *out = (struct tval){.kind = TV_BOOL, .u.b = fn == F_LT ? lt : !lt};
    return 0;
}

static int builtin_print(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    struct buf b;
    buf_init(&b, TMPL_MAX_OUTPUT);
    if (sprint(&b, args, n, fn == F_PRINTLN)) {
        buf_deinit(&b);
        return exec_errorf(x, "output too large");
    }
    return ret_buf(x, &b, out);
}

static int builtin_printf(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    (void)fn;
    if (n == 0)
        return exec_errorf(x, "wrong number of args for printf: want at least 1 got 0");
    if (args[0].kind != TV_STR)
        return exec_errorf(x, "wrong type for value; expected string; got %s",
                           args[0].kind == TV_NIL ? "nil" : tv_type_name(&args[0]));
    struct buf b;
    buf_init(&b, TMPL_MAX_OUTPUT);
    if (sprintf_go(&b, args[0].u.s.p, args[0].u.s.n, args + 1, n - 1)) {
        buf_deinit(&b);
        return exec_errorf(x, "output too large");
    }
    return ret_buf(x, &b, out);
}

// html, js and urlquery: the arguments printed as one string, then escaped.
static int builtin_escape(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    struct buf s, b;
    int rc = escape_arg(x, args, n, &s);
    if (rc) {
        buf_deinit(&s);
        return rc;
    }
    buf_init(&b, TMPL_MAX_OUTPUT);
    rc = fn == F_HTML ? html_escape(&b, s.data ? s.data : "", s.len)
         : fn == F_JS ? js_escape(&b, s.data ? s.data : "", s.len)
                      : url_escape(&b, s.data ? s.data : "", s.len);
    buf_deinit(&s);
    if (rc) {
        buf_deinit(&b);
        return exec_errorf(x, "output too large");
    }
    return ret_buf(x, &b, out);
}

// Templates hold no function values, so call can only fail, with Go's words.
static int builtin_call(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    (void)fn, (void)out;
    if (n == 0)
        return exec_errorf(x, "wrong number of args for call: want at least 1 got 0");
    if (args[0].kind == TV_NIL)
        return exec_errorf(x, "error calling call: call of nil");
    return exec_errorf(x, "error calling call: non-function of type %s", tv_type_name(&args[0]));
}

static int builtin_json(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    int rc = want_args(x, fn, n, 1);
    if (rc)
        return rc;
    struct buf b;
    buf_init(&b, TMPL_MAX_OUTPUT);
    if (tv_json(&b, &args[0])) {
        buf_deinit(&b);
        return exec_errorf(x, "output too large");
    }
    return ret_buf(x, &b, out);
}

// currentDate and yesterdayDate accept (and ignore) string arguments only.
static int builtin_date(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    for (size_t i = 0; i < n; i++)
        if (args[i].kind != TV_STR)
            return exec_errorf(x, "wrong type for value; expected string; got %s",
                               args[i].kind == TV_NIL ? "nil" : tv_type_name(&args[i]));
    return date_str(x, fn == F_YESTERDAYDATE ? 1 : 0, out);
}

static int builtin_ts_type(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    int rc = want_args(x, fn, n, 1);
    if (rc)
        return rc;
    struct buf b;
    buf_init(&b, 1 << 20);
    if (args[0].kind == TV_JSON && args[0].schema == S_PROP)
        ts_of_prop(&b, args[0].u.j.j, 0);
    else
        buf_append_str(&b, "any");
    return ret_buf(x, &b, out);
}

// ---------------------------------------------------------------------------
// The builtin table: name and body for each F_* id.

typedef int (*builtin_fn)(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out);

static const struct builtin {
    const char *name;
    builtin_fn call;
} builtins[F_COUNT_] = {
    [F_AND] = {"and", builtin_and_or},
    [F_OR] = {"or", builtin_and_or},
    [F_NOT] = {"not", builtin_not},
    [F_LEN] = {"len", builtin_len},
    [F_INDEX] = {"index", builtin_index},
    [F_SLICE] = {"slice", builtin_slice},
    [F_EQ] = {"eq", builtin_eq},
    [F_NE] = {"ne", builtin_ne},
    [F_LT] = {"lt", builtin_order},
    [F_LE] = {"le", builtin_order},
    [F_GT] = {"gt", builtin_order},
    [F_GE] = {"ge", builtin_order},
    [F_PRINT] = {"print", builtin_print},
    [F_PRINTF] = {"printf", builtin_printf},
    [F_PRINTLN] = {"println", builtin_print},
    [F_HTML] = {"html", builtin_escape},
    [F_JS] = {"js", builtin_escape},
    [F_URLQUERY] = {"urlquery", builtin_escape},
    [F_CALL] = {"call", builtin_call},
    [F_JSON] = {"json", builtin_json},
    [F_CURRENTDATE] = {"currentDate", builtin_date},
    [F_YESTERDAYDATE] = {"yesterdayDate", builtin_date},
    [F_TOTSTYPE] = {"toTypeScriptType", builtin_ts_type},
};

int tmpl_func_lookup(const char *name, size_t n)
{
    for (int i = 0; i < F_COUNT_; i++)
        if (strlen(builtins[i].name) == n && !memcmp(builtins[i].name, name, n))
            return i;
    return -1;
}

const char *tmpl_func_name(int id)
{
    return id >= 0 && id < F_COUNT_ ? builtins[id].name : "?";
}

int tmpl_call_func(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out)
{
    if (fn < 0 || fn >= F_COUNT_)
        return exec_errorf(x, "unknown function");
    return builtins[fn].call(x, fn, args, n, out);
}

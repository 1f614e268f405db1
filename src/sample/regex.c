// JSON Schema `pattern` → grammar for the *content* of a JSON string (between the quotes).
//
// Supported: literals, escapes (\d \w \s and their negations, \n \t \r, escaped
// punctuation), classes [a-z0-9_] and [^...] (ASCII members; a negated class and \D \W \S
// also admit any non-ASCII character), `.` (anything but \n and \r, so the text matches
// under both ECMA-262 and PCRE rules), groups ( ) and (?: ), alternation, quantifiers
// ? * + {m} {m,} {m,n} (a lazy `?` suffix is accepted and means the same), ^ at the start
// and $ at the end. Without ^ (or $) any text may come before (or after) the match, as
// JSON Schema patterns are unanchored. Anything else (backreferences, lookaround, \b,
// non-ASCII in classes) is an error.
//
// Characters that JSON must escape are written as their escape sequence (\" \\ \n \u0001).
#include "sample/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGEX_MAX_DEPTH 64

struct cset {
    uint64_t ascii[2];  // code points 0..127
    bool non_ascii;     // every character >= U+0080
};

struct rx {
    struct gbuilder *b;
    const char *p, *end;
    int32_t r_u8;
    int rc;
    struct err *e;
    int depth;
};

static int32_t rx_fail(struct rx *x, const char *msg)
{
    if (x->rc == 0)
        x->rc = err_set(x->e, ERR_UNSUPPORTED, "invalid JSON schema in format: pattern: %s", msg);
    return 0;
}

static void cset_add(struct cset *s, int lo, int hi)
{
    for (int c = lo; c <= hi && c < 128; c++)
        s->ascii[c >> 6] |= 1ull << (c & 63);
}

static void cset_invert(struct cset *s)
{
    s->ascii[0] = ~s->ascii[0];
    s->ascii[1] = ~s->ascii[1];
    s->non_ascii = !s->non_ascii;
}

static bool cset_has(const struct cset *s, int c)
{
    return (s->ascii[c >> 6] >> (c & 63)) & 1;
}

// A rule matching one JSON-string character (raw or escaped) whose value is in s.
static int32_t cset_rule(struct rx *x, const struct cset *s)
{
    struct gbuilder *b = x->b;
    int32_t r = gb_rule(b);
    struct gseq q = {0};
    uint64_t raw[4] = {0};
    bool any_raw = false;
    for (int c = 0x20; c < 0x7F; c++)
        if (cset_has(s, c) && c != '"' && c != '\\') {
            raw[c >> 6] |= 1ull << (c & 63);
            any_raw = true;
        }
    if (any_raw) {
        gseq_set(b, &q, raw);
        gb_alt(b, r, &q);
    }
    for (int c = 0; c < 128; c++) {
        if (!cset_has(s, c) || (c >= 0x20 && c < 0x7F && c != '"' && c != '\\'))
            continue;
        char esc[8];
        switch (c) {
        case '"':
            snprintf(esc, sizeof(esc), "\\\"");
            break;
        case '\\':
            snprintf(esc, sizeof(esc), "\\\\");
            break;
        case '\n':
            snprintf(esc, sizeof(esc), "\\n");
            break;
        case '\t':
            snprintf(esc, sizeof(esc), "\\t");
            break;
        case '\r':
            snprintf(esc, sizeof(esc), "\\r");
            break;
        case '\b':
            snprintf(esc, sizeof(esc), "\\b");
            break;
        case '\f':
            snprintf(esc, sizeof(esc), "\\f");
            break;
        case 0:
            continue;  // U+0000: jansson refuses it
        default:
            snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)c);
            break;
        }
        gseq_reset(&q);
        gseq_lit(b, &q, esc, strlen(esc));
        gb_alt(b, r, &q);
    }
    if (s->non_ascii) {
        gseq_reset(&q);
        gseq_ref(&q, x->r_u8);
        gb_alt(b, r, &q);
    }
    gseq_free(&q);
    if (b->n_rules > 0 && b->rules[r].n_alts == 0)
        return rx_fail(x, "a character class matches nothing");
    return r;
}

static void class_escape(struct cset *s, char c, bool *ok)
{
    struct cset t = {{0, 0}, false};
    switch (c) {
    case 'd':
    case 'D':
        cset_add(&t, '0', '9');
        break;
    case 'w':
    case 'W':
        cset_add(&t, 'a', 'z');
        cset_add(&t, 'A', 'Z');
        cset_add(&t, '0', '9');
        cset_add(&t, '_', '_');
        break;
    case 's':
    case 'S':
        cset_add(&t, ' ', ' ');
        cset_add(&t, '\t', '\r');  // \t \n \v \f \r
        break;
    default:
        *ok = false;
        return;
    }
    if (c == 'D' || c == 'W' || c == 'S')
        cset_invert(&t);
    s->ascii[0] |= t.ascii[0];
    s->ascii[1] |= t.ascii[1];
    s->non_ascii |= t.non_ascii;
    *ok = true;
}

// A single escaped character after '\' (not a class escape); -1 if unsupported.
static int char_escape(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case '0':
        return -1;
    default:
        if ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
            (c >= 0x7B && c <= 0x7E))
            return (unsigned char)c;  // escaped punctuation
        return -1;
    }
}

static int32_t rx_alt(struct rx *x);

// [ ... ] after the '['
static int32_t rx_class(struct rx *x)
{
    struct cset s = {{0, 0}, false};
    bool neg = false;
    if (x->p < x->end && *x->p == '^') {
        neg = true;
        x->p++;
    }
    bool first = true;
    while (x->p < x->end && (*x->p != ']' || first)) {
        first = false;
        int lo;
        unsigned char c = (unsigned char)*x->p++;
        if (c >= 0x80)
            return rx_fail(x, "non-ASCII characters in a class are not supported");
        if (c == '\\') {
            if (x->p >= x->end)
                return rx_fail(x, "trailing backslash");
            char e = *x->p++;
            bool ok;
            class_escape(&s, e, &ok);
            if (ok)
                continue;
            lo = e == 'b' ? '\b' : char_escape(e);
            if (lo < 0)
                return rx_fail(x, "unsupported escape in a class");
        } else {
            lo = c;
        }
        int hi = lo;
        if (x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']') {
            x->p++;
            unsigned char h = (unsigned char)*x->p++;
            if (h >= 0x80)
                return rx_fail(x, "non-ASCII characters in a class are not supported");
            if (h == '\\') {
                if (x->p >= x->end)
                    return rx_fail(x, "trailing backslash");
                hi = char_escape(*x->p++);
                if (hi < 0)
                    return rx_fail(x, "unsupported escape in a class range");
            } else {
                hi = h;
            }
            if (hi < lo)
                return rx_fail(x, "reversed range in a class");
        }
        cset_add(&s, lo, hi);
    }
    if (x->p >= x->end)
        return rx_fail(x, "unterminated character class");
    x->p++;  // ']'
    if (neg)
        cset_invert(&s);
    return cset_rule(x, &s);
}

// One atom; returns its rule, or -1 at the end of a sequence.
static int32_t rx_atom(struct rx *x)
{
    if (x->p >= x->end)
        return -1;
    char c = *x->p;
    if (c == '|' || c == ')')
        return -1;
    x->p++;
    struct cset s = {{0, 0}, false};
    switch (c) {
    case '(': {
        if (x->p < x->end && *x->p == '?') {
            if (x->p + 1 < x->end && x->p[1] == ':')
                x->p += 2;
            else
                return rx_fail(x, "lookaround and named groups are not supported");
        }
        if (++x->depth > REGEX_MAX_DEPTH)
            return rx_fail(x, "groups nested too deeply");
        int32_t r = rx_alt(x);
        x->depth--;
        if (x->p >= x->end || *x->p != ')')
            return rx_fail(x, "unbalanced parenthesis");
        x->p++;
        return r;
    }
    case '[':
        return rx_class(x);
    case '.':
        cset_add(&s, 0, 127);
        s.ascii[0] &= ~((1ull << '\n') | (1ull << '\r'));
        s.non_ascii = true;
        return cset_rule(x, &s);
    case '\\': {
        if (x->p >= x->end)
            return rx_fail(x, "trailing backslash");
        char e = *x->p++;
        bool ok;
        class_escape(&s, e, &ok);
        if (!ok) {
            int ch = char_escape(e);
            if (ch < 0)
                return rx_fail(x, "unsupported escape (backreferences, \\b, \\u... are not "
                                  "supported)");
            cset_add(&s, ch, ch);
        }
        return cset_rule(x, &s);
    }
    case '^':
        return rx_fail(x, "^ is only supported at the start");
    case '$':
        return rx_fail(x, "$ is only supported at the end");
    case '*':
    case '+':
    case '?':
    case '{':
        return rx_fail(x, "quantifier without an atom");
    default:
        break;
    }
    if ((unsigned char)c >= 0x80) {  // a literal UTF-8 character: its bytes
        size_t l = (unsigned char)c >= 0xF0 ? 4 : (unsigned char)c >= 0xE0 ? 3 : 2;
        const char *start = x->p - 1;
        if ((size_t)(x->end - start) < l)
            return rx_fail(x, "truncated UTF-8");
        x->p = start + l;
        struct gseq q = {0};
        gseq_lit(x->b, &q, start, l);
        int32_t r = gb_rule(x->b);
        gb_alt(x->b, r, &q);
        gseq_free(&q);
        return r;
    }
    cset_add(&s, (unsigned char)c, (unsigned char)c);
    return cset_rule(x, &s);
}

static bool rx_number(struct rx *x, int64_t *out)
{
    int64_t v = 0;
    const char *start = x->p;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9' && v <= GRAMMAR_MAX_REPEAT)
        v = v * 10 + (*x->p++ - '0');
    *out = v;
    return x->p > start;
}

// Appends atom `r` with its quantifier (if any) to q.
static void rx_quant(struct rx *x, struct gseq *q, int32_t r)
{
    int64_t lo = 1, hi = 1;
    if (x->p < x->end) {
        char c = *x->p;
        if (c == '?' || c == '*' || c == '+') {
            x->p++;
            lo = c == '+';
            hi = c == '?' ? 1 : -1;
        } else if (c == '{') {
            const char *save = x->p++;
            if (!rx_number(x, &lo)) {
                x->p = save;  // a literal '{' is not supported either
                rx_fail(x, "malformed {m,n}");
                return;
            }
            hi = lo;
            if (x->p < x->end && *x->p == ',') {
                x->p++;
                if (!rx_number(x, &hi))
                    hi = -1;
            }
            if (x->p >= x->end || *x->p != '}' || (hi >= 0 && hi < lo)) {
                rx_fail(x, "malformed {m,n}");
                return;
            }
            x->p++;
        }
        if (x->p < x->end && *x->p == '?' && !(lo == 1 && hi == 1))
            x->p++;  // lazy: the same language
    }
    if (lo > GRAMMAR_MAX_REPEAT || hi > GRAMMAR_MAX_REPEAT) {
        rx_fail(x, "repetition bound too large");
        return;
    }
    struct gseq alt = {0}, empty = {0};
    for (int64_t i = 0; i < lo; i++)
        gseq_ref(q, r);
    if (hi < 0) {
        int32_t star = gb_rule(x->b);  // star ::= r star | ε
        gseq_ref(&alt, r);
        gseq_ref(&alt, star);
        gb_alt(x->b, star, &alt);
        gb_alt(x->b, star, &empty);
        gseq_ref(q, star);
    } else {
        int32_t next = -1;
        for (int64_t i = hi - lo; i > 0; i--) {
            int32_t o = gb_rule(x->b);
            gseq_reset(&alt);
            gseq_ref(&alt, r);
            if (next >= 0)
                gseq_ref(&alt, next);
            gb_alt(x->b, o, &alt);
            gb_alt(x->b, o, &empty);
            next = o;
        }
        if (next >= 0)
            gseq_ref(q, next);
    }
    gseq_free(&alt);
}

// alternation of sequences, up to ')' or the end
static int32_t rx_alt(struct rx *x)
{
    int32_t r = gb_rule(x->b);
    struct gseq q = {0};
    for (;;) {
        gseq_reset(&q);
        for (;;) {
            int32_t a = rx_atom(x);
            if (a < 0 || x->rc)
                break;
            rx_quant(x, &q, a);
            if (x->rc)
                break;
        }
        gb_alt(x->b, r, &q);
        if (x->rc || x->p >= x->end || *x->p != '|')
            break;
        x->p++;
    }
    gseq_free(&q);
    return r;
}

int32_t regex_content_rule(struct gbuilder *b, const char *pattern, size_t len, int32_t r_u8,
                           int32_t r_any_char, int *rc, struct err *e)
{
    struct rx x = {b, pattern, pattern + len, r_u8, 0, e, 0};
    bool start = len > 0 && pattern[0] == '^';
    bool end =
        len > (size_t)start && pattern[len - 1] == '$' && !(len >= 2 && pattern[len - 2] == '\\');
    if (start)
        x.p++;
    if (end)
        x.end--;
    int32_t body = rx_alt(&x);
    if (x.rc == 0 && x.p != x.end)
        rx_fail(&x, "unbalanced parenthesis");
    *rc = x.rc;
    if (x.rc)
        return 0;
    // [any*] body [any*]
    struct gseq q = {0}, any = {0};
    gseq_ref(&any, r_any_char);
    int32_t star = -1;
    if (!start || !end) {
        star = gb_rule(b);
        struct gseq alt = {0}, empty = {0};
        gseq_ref(&alt, r_any_char);
        gseq_ref(&alt, star);
        gb_alt(b, star, &alt);
        gb_alt(b, star, &empty);
        gseq_free(&alt);
    }
    if (!start)
        gseq_ref(&q, star);
    gseq_ref(&q, body);
    if (!end)
        gseq_ref(&q, star);
    int32_t r = gb_rule(b);
    gb_alt(b, r, &q);
    gseq_free(&q);
    gseq_free(&any);
    return r;
}

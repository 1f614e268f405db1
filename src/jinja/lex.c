// Lexer for Jinja2 templates with the chat-template environment: trim_blocks
// and lstrip_blocks on, keep_trailing_newline off. Splits the source into
// data and tag tokens, applying the whitespace rules the way Jinja2's lexer
// does (a "-" strips all white space on that side, "+" keeps it, a block end
// eats one newline, a block start alone on its line eats the indentation),
// drops comments and turns {% raw %} bodies into data. The whole source is
// tokenized up front; the parser walks the array.
#include "jinja/internal.h"

#include <math.h>
#include <string.h>

struct lexer {
    const char *src;
    size_t len, pos;
    int line;
    bool line_starting;  // the previous match ended with a newline
    struct arena *a;
    struct jtokens *out;
    struct err *e;
};

static int lex_fail(struct lexer *l, const char *fmt, const char *arg)
{
    char msg[200];
    snprintf(msg, sizeof msg, fmt, arg);
    return err_set(l->e, ERR_FORMAT, "jinja: line %d: %s", l->line, msg);
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int count_lines(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

static int push(struct lexer *l, struct jtoken t)
{
    if (l->out->n == l->out->cap) {
        size_t cap = l->out->cap ? l->out->cap * 2 : 256;
        struct jtoken *v = arena_alloc(l->a, cap * sizeof *v);
        if (!v)
            return err_set(l->e, ERR_TOO_LARGE, "jinja: template too large");
        if (l->out->n)
            memcpy(v, l->out->v, l->out->n * sizeof *v);
        l->out->v = v;
        l->out->cap = cap;
    }
    l->out->v[l->out->n++] = t;
    return 0;
}

static int push_simple(struct lexer *l, enum jtok type, const char *s, size_t n)
{
    return push(l, (struct jtoken){.type = type, .line = l->line, .s = s, .n = n});
}

// Data before a tag, with the tag's whitespace control applied. sign is the
// character after the tag opener ('-', '+' or anything else); lstrip applies
// to blocks and comments, not to {{.
static int emit_text(struct lexer *l, const char *s, size_t n, char sign, bool lstrip)
{
    int line = l->line;
    l->line += count_lines(s, n);
    if (sign == '-') {
        while (n > 0 && is_ws(s[n - 1]))
            n--;
    } else if (sign != '+' && lstrip) {
        size_t lpos = n;
        while (lpos > 0 && s[lpos - 1] != '\n')
            lpos--;
        if (lpos > 0 || l->line_starting) {
            bool ws = lpos < n;
            for (size_t i = lpos; i < n; i++)
                if (!is_ws(s[i]))
                    ws = false;
            if (ws)
                n = lpos;
        }
    }
    if (n == 0)
        return 0;
    return push(l, (struct jtoken){.type = JT_TEXT, .line = line, .s = s, .n = n});
}

// The one-character escapes (\n, \t, \\, \' ...): the byte each stands for,
// or -1 when c is not one of them.
static int simple_escape(char c)
{
    static const char from[] = "ntrbfva\\'\"";
    static const char to[] = "\n\t\r\b\f\v\a\\'\"";
    const char *hit = memchr(from, c, sizeof from - 1);
    return hit ? (unsigned char)to[hit - from] : -1;
}

// \ooo: up to three octal digits starting at s[*i]; leaves *i on the last
// digit read and returns the low byte of the value.
static char decode_octal(const char *s, size_t n, size_t *i)
{
    uint32_t cp = 0;
    int d = 0;
    while (d < 3 && *i < n && s[*i] >= '0' && s[*i] <= '7') {
        cp = cp * 8 + (uint32_t)(s[*i] - '0');
        (*i)++, d++;
    }
    (*i)--;
    return (char)(cp & 0xff);
}

// \xHH, \uHHHH or \UHHHHHHHH: s[i] is the letter c, the hex digits follow.
static int decode_hex_escape(struct lexer *l, const char *s, size_t n, size_t i, int hex, char c,
                             uint32_t *out_cp)
{
    if (i + (size_t)hex >= n)
        return lex_fail(l, "truncated \\%s escape in string", c == 'x' ? "x" : "u");
    uint32_t cp = 0;
    for (int d = 1; d <= hex; d++) {
        char h = s[i + (size_t)d];
        int v = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (v < 0)
            return lex_fail(l, "bad \\%s escape in string", c == 'x' ? "x" : "u");
        cp = cp * 16 + (uint32_t)v;
    }
    if (cp > 0x10ffff)
        return lex_fail(l, "%s", "bad unicode escape in string");
    *out_cp = cp;
    return 0;
}

// Python string-literal escapes (Jinja2 decodes with "unicode-escape"). No
// escape decodes to more bytes than it is written with, so n + 1 bytes do.
static int decode_string(struct lexer *l, const char *s, size_t n, struct jtoken *t)
{
    char *out = arena_alloc(l->a, n + 1);
    if (!out)
        return err_set(l->e, ERR_TOO_LARGE, "jinja: template too large");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            out[k++] = s[i];
            continue;
        }
        char c = s[++i];
        int byte = simple_escape(c);
        int hex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (byte >= 0) {
            out[k++] = (char)byte;
        } else if (c == '\n') {
            // a backslash before a newline joins the lines
        } else if (hex) {
            uint32_t cp = 0;
            int rc = decode_hex_escape(l, s, n, i, hex, c, &cp);
            if (rc)
                return rc;
            i += (size_t)hex;
            k += utf8_encode(cp, out + k);
        } else if (c >= '0' && c <= '7') {
            out[k++] = decode_octal(s, n, &i);
        } else {
            out[k++] = '\\';
            out[k++] = c;
        }
    }
    out[k] = 0;
    t->s = out;
    t->n = k;
    return 0;
}

static bool is_name_start(unsigned char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_name_char(unsigned char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9');
}
static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

// The digits of a decimal literal without underscores, ready for strtod.
// Digits past the buffer are dropped, and the caller reports the literal as
// too long.
struct num_digits {
    char v[128];
    size_t k;
};

static void digits_put(struct num_digits *d, char c)
{
    if (d->k < sizeof d->v - 1)
        d->v[d->k++] = c;
}

// Whether s starts with 0x, 0o or 0b (either case).
static bool has_base_prefix(const char *s, size_t n)
{
    return n > 1 && s[0] == '0' &&
           (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B');
}

// An integer in base 16, 8 or 2 after its prefix, underscores allowed.
static int lex_based_int(struct lexer *l, const char *s, size_t n, struct jtoken *t)
{
    int base = (s[1] | 0x20) == 'x' ? 16 : (s[1] | 0x20) == 'o' ? 8 : 2;
    size_t i = 2, start = i;
    uint64_t v = 0;
    while (i < n) {
        char c = s[i];
        int d = c == '_'                                 ? -2
                : c >= '0' && c <= '9'                   ? c - '0'
                : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                         : -1;
        if (d == -2) {
            i++;
            continue;
        }
        if (d < 0 || d >= base)
            break;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base ||
            v * (uint64_t)base + (uint64_t)d > INT64_MAX)
            return lex_fail(l, "%s", "integer literal too large");
        v = v * (uint64_t)base + (uint64_t)d;
        i++;
    }
    if (i == start)
        return lex_fail(l, "%s", "malformed number");
    *t = (struct jtoken){.type = JT_INT, .line = l->line, .i = (int64_t)v};
    l->pos += i;
    return 0;
}

// Decimal digits from s[i], an underscore allowed only before a digit;
// returns the index after them.
static size_t scan_decimal(const char *s, size_t n, size_t i, struct num_digits *d)
{
    while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) {
        if (s[i] != '_')
            digits_put(d, s[i]);
        i++;
    }
    return i;
}

// An exponent (e3, E-3) at s[i] if a digit follows the sign: returns the
// index after it and sets *is_float, or returns i unchanged.
static size_t scan_exponent(const char *s, size_t n, size_t i, struct num_digits *d, bool *is_float)
{
    if (i >= n || (s[i] != 'e' && s[i] != 'E'))
        return i;
    size_t j = i + 1;
    if (j < n && (s[j] == '+' || s[j] == '-'))
        j++;
    if (j >= n || !is_digit(s[j]))
        return i;
    *is_float = true;
    digits_put(d, 'e');
    for (size_t m = i + 1; m < j; m++)
        digits_put(d, s[m]);
    i = j;
    while (i < n && (is_digit(s[i]) || s[i] == '_')) {
        if (s[i] != '_')
            digits_put(d, s[i]);
        i++;
    }
    return i;
}

// The token for the collected digits: a float, an int, or (beyond 64 bits)
// an approximate float.
static int number_token(struct lexer *l, const char *digits, bool is_float, struct jtoken *t)
{
    if (is_float) {
        double f;
        if (str_to_double(digits, &f, NULL) != 0 && !isinf(f))
            return lex_fail(l, "%s", "malformed number");
        *t = (struct jtoken){.type = JT_FLOAT, .line = l->line, .f = f};
        return 0;
    }
    int64_t v;
    double f;
    if (str_to_i64(digits, 0, INT64_MAX, &v, NULL) == 0)
        *t = (struct jtoken){.type = JT_INT, .line = l->line, .i = v};
    else if (str_to_double(digits, &f, NULL) == 0)
        *t = (struct jtoken){.type = JT_FLOAT, .line = l->line, .f = f};
    else
        return lex_fail(l, "%s", "malformed number");
    return 0;
}

// A number: integer (decimal, 0x, 0o, 0b, with _) or float (1.5, 1e3, 1.5e-3).
static int lex_number(struct lexer *l, struct jtoken *t)
{
    const char *s = l->src + l->pos;
    size_t n = l->len - l->pos;
    if (has_base_prefix(s, n))
        return lex_based_int(l, s, n, t);
    struct num_digits d = {.k = 0};
    bool is_float = false;
    size_t i = scan_decimal(s, n, 0, &d);
    if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
        is_float = true;
        digits_put(&d, s[i++]);
        i = scan_decimal(s, n, i, &d);
    }
    i = scan_exponent(s, n, i, &d, &is_float);
    if (d.k >= sizeof d.v - 1)
        return lex_fail(l, "%s", "number literal too long");
    d.v[d.k] = 0;
    int rc = number_token(l, d.v, is_float, t);
    if (rc)
        return rc;
    l->pos += i;
    return 0;
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char ops1[] = "+-/*%~[](){}><=.:|,;";

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

// After a closing marker (}}, %}, #}): with sign '-' all white space that
// follows is stripped; otherwise, unless sign is '+', one newline is eaten
// when eat_newline is set (trim_blocks). Notes whether the next text starts
// a line.
static void skip_after_close(struct lexer *l, char sign, bool eat_newline)
{
    bool nl = false;
    if (sign == '-') {
        size_t j = skip_ws(l->src, l->len, l->pos);
        l->line += count_lines(l->src + l->pos, j - l->pos);
        nl = j > l->pos && l->src[j - 1] == '\n';
        l->pos = j;
    } else if (eat_newline && sign != '+' && l->pos < l->len && l->src[l->pos] == '\n') {
        l->pos++;
        l->line++;
        nl = true;
    }
    l->line_starting = nl;
}

// The marker that closes the tag at s, possibly after a '-' (or, for blocks,
// a '+'): its length with *sign set, or 0 when s does not close the tag.
static size_t match_tag_end(const char *s, size_t left, bool block, char *sign)
{
    const char *end = block ? "%}" : "}}";
    *sign = 0;
    if (left >= 3 && (s[0] == '-' || (block && s[0] == '+')) && memcmp(s + 1, end, 2) == 0) {
        *sign = s[0];
        return 3;
    }
    if (left >= 2 && memcmp(s, end, 2) == 0)
        return 2;
    return 0;
}

static void lex_name(struct lexer *l, const char *s, size_t left, struct jtoken *t)
{
    size_t i = 1;
    while (i < left && is_name_char((unsigned char)s[i]))
        i++;
    t->type = JT_NAME;
    t->s = s;
    t->n = i;
    l->pos += i;
}

// A quoted string literal at s; a backslash protects the next character.
static int lex_string(struct lexer *l, const char *s, size_t left, struct jtoken *t)
{
    char quote = s[0];
    size_t i = 1;
    while (i < left && s[i] != quote) {
        if (s[i] == '\\' && i + 1 < left)
            i++;
        i++;
    }
    if (i >= left)
        return lex_fail(l, "%s", "unterminated string literal");
    t->type = JT_STRING;
    int rc = decode_string(l, s + 1, i - 1, t);
    l->line += count_lines(s, i);
    l->pos += i + 1;
    return rc;
}

// An operator of one or two characters; brackets are counted in *depth so
// that a '}' inside a dict literal does not end the tag.
static int lex_op(struct lexer *l, const char *s, size_t left, int *depth, struct jtoken *t)
{
    unsigned char c = (unsigned char)s[0];
    size_t m = 0;
    for (size_t k = 0; k < sizeof ops2 / sizeof ops2[0]; k++)
        if (left >= 2 && memcmp(s, ops2[k], 2) == 0)
            m = 2;
    if (!m && strchr(ops1, (char)c) && c)
        m = 1;
    if (!m) {
        char ch[8];
        snprintf(ch, sizeof ch, "%c", c >= 0x20 && c < 0x7f ? c : '?');
        return lex_fail(l, "unexpected char '%s'", ch);
    }
    if (c == '(' || c == '[' || c == '{') {
        (*depth)++;
    } else if (c == ')' || c == ']' || c == '}') {
        if (*depth == 0) {
            char ch[2] = {(char)c, 0};
            return lex_fail(l, "unexpected '%s'", ch);
        }
        (*depth)--;
    }
    t->type = JT_OP;
    t->s = s;
    t->n = m;
    l->pos += m;
    return 0;
}

// Tokens inside {{ }} or {% %} up to the closing marker (at bracket depth 0).
static int lex_tag(struct lexer *l, bool block)
{
    int depth = 0;
    int start_line = l->line;
    for (;;) {
        size_t j = skip_ws(l->src, l->len, l->pos);
        l->line += count_lines(l->src + l->pos, j - l->pos);
        l->pos = j;
        if (l->pos >= l->len) {
            l->line = start_line;
            return lex_fail(l, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
        }
        const char *s = l->src + l->pos;
        size_t left = l->len - l->pos;
        char sign;
        size_t m = depth == 0 ? match_tag_end(s, left, block, &sign) : 0;
        if (m) {
            l->pos += m;
            int rc = push_simple(l, block ? JT_BLOCK_END : JT_VAR_END, NULL, 0);
            if (rc)
                return rc;
            skip_after_close(l, sign, block);
            return 0;
        }
        struct jtoken t = {.line = l->line};
        unsigned char c = (unsigned char)s[0];
        int rc = 0;
        if (is_name_start(c))
            lex_name(l, s, left, &t);
        else if (is_digit((char)c))
            rc = lex_number(l, &t);
        else if (c == '\'' || c == '"')
            rc = lex_string(l, s, left, &t);
        else
            rc = lex_op(l, s, left, &depth, &t);
        if (rc || (rc = push(l, t)))
            return rc;
    }
}

// {%[-+]? raw [-]?%} at p: returns the length of the opener, or 0.
static size_t match_raw(const char *s, size_t n, size_t p, const char *word, char *end_sign)
{
    size_t i = p + 2;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    i = skip_ws(s, n, i);
    size_t wl = strlen(word);
    if (i + wl > n || memcmp(s + i, word, wl) != 0)
        return 0;
    i = skip_ws(s, n, i + wl);
    *end_sign = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        *end_sign = s[i++];
    if (i + 2 > n || s[i] != '%' || s[i + 1] != '}')
        return 0;
    return i + 2 - p;
}

static int lex_raw(struct lexer *l, size_t open_len, char open_end_sign)
{
    l->line += count_lines(l->src + l->pos, open_len);
    l->pos += open_len;
    if (open_end_sign == '-') {
        size_t j = skip_ws(l->src, l->len, l->pos);
        l->line += count_lines(l->src + l->pos, j - l->pos);
        l->pos = j;
    }
    l->line_starting = l->pos > 0 && l->src[l->pos - 1] == '\n';
    for (size_t p = l->pos; p + 1 < l->len; p++) {
        if (l->src[p] != '{' || l->src[p + 1] != '%')
            continue;
        char sign;
        size_t m = match_raw(l->src, l->len, p, "endraw", &sign);
        if (!m)
            continue;
        char open_sign = l->src[p + 2];
        int rc = emit_text(l, l->src + l->pos, p - l->pos, open_sign, true);
        if (rc)
            return rc;
        l->pos = p + m;
        skip_after_close(l, sign, true);
        return 0;
    }
    return lex_fail(l, "%s", "missing end of raw directive");
}

// {# ... #} at p, dropped. sign is the '-' or '+' after the opener, or 0.
static int lex_comment(struct lexer *l, size_t p, char sign)
{
    size_t body = p + 2 + (sign ? 1 : 0);
    size_t j = body;
    while (j + 1 < l->len && !(l->src[j] == '#' && l->src[j + 1] == '}'))
        j++;
    if (j + 1 >= l->len)
        return lex_fail(l, "%s", "missing end of comment tag");
    char esign = j > body ? l->src[j - 1] : 0;
    l->line += count_lines(l->src + p, j + 2 - p);
    l->pos = j + 2;
    skip_after_close(l, esign, true);
    return 0;
}

// {{ or {% at p, sign as for lex_comment: a {% raw %} block becomes text,
// any other tag its tokens between begin and end markers.
static int lex_open_tag(struct lexer *l, size_t p, char kind, char sign)
{
    if (kind == '%') {
        char rs;
        size_t m = match_raw(l->src, l->len, p, "raw", &rs);
        if (m && rs != '+')
            return lex_raw(l, m, rs);
    }
    int rc = push_simple(l, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, NULL, 0);
    if (rc)
        return rc;
    l->pos = p + 2 + (sign ? 1 : 0);
    return lex_tag(l, kind == '%');
}

// A copy of src with newlines normalised to \n and one trailing newline
// dropped (keep_trailing_newline off); NULL when the arena is full.
static char *normalize_newlines(const char *src, size_t len, struct arena *a, size_t *out_n)
{
    char *s = arena_alloc(a, len + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n')
        n--;
    s[n] = 0;
    *out_n = n;
    return s;
}

// The position of the next "{{", "{%" or "{#" from l->pos; past the last
// full pair (p + 1 >= l->len) when there is none.
static size_t find_tag_open(const struct lexer *l)
{
    size_t p = l->pos;
    while (p + 1 < l->len && !(l->src[p] == '{' && (l->src[p + 1] == '{' || l->src[p + 1] == '%' ||
                                                    l->src[p + 1] == '#')))
        p++;
    return p;
}

int jinja_lex(const char *src, size_t len, struct arena *a, struct jtokens *out, struct err *e)
{
    size_t n = 0;
    char *s = normalize_newlines(src, len, a, &n);
    if (!s)
        return err_set(e, ERR_TOO_LARGE, "jinja: template too large");
    struct lexer l = {
        .src = s, .len = n, .line = 1, .line_starting = true, .a = a, .out = out, .e = e};
    while (l.pos < l.len) {
        size_t p = find_tag_open(&l);
        if (p + 1 >= l.len) {
            int rc = emit_text(&l, l.src + l.pos, l.len - l.pos, 0, false);
            if (rc)
                return rc;
            l.pos = l.len;
            break;
        }
        char kind = l.src[p + 1];
        char sign = p + 2 < l.len ? l.src[p + 2] : 0;
        if (sign != '-' && sign != '+')
            sign = 0;
        int rc = emit_text(&l, l.src + l.pos, p - l.pos, sign, kind != '{');
        if (rc)
            return rc;
        l.pos = p;
        rc = kind == '#' ? lex_comment(&l, p, sign) : lex_open_tag(&l, p, kind, sign);
        if (rc)
            return rc;
    }
    return push_simple(&l, JT_EOF, NULL, 0);
}

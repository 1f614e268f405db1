// Parsing JSON as Go's encoding/json does. A first pass is a syntax scanner
// following Go's state machine, so errors read like Go's ("invalid character
// 'x' after object key") with a line and column added. Inputs that pass are
// repaired where Go is lenient and jansson is not (invalid UTF-8 and lone
// surrogate escapes become U+FFFD) and handed to jansson to build the tree.
#include "json/json.h"

#include <string.h>

struct scanner {
    const unsigned char *s;
    size_t n, i;
    int depth;
    char stack[JSONX_MAX_DEPTH];
    bool needs_repair;  // invalid UTF-8, a lone surrogate escape, or an integer past int64
    struct err *e;
};

#define SCAN_EOF 1  // internal: ran out of input

// Go's quoteChar: the offending byte as it appears in its messages.
static void quote_char(unsigned char c, char *out, size_t n)
{
    if (c == '\'') {
        snprintf(out, n, "'\\''");
    } else if (c == '"') {
        snprintf(out, n, "'\"'");
    } else if (c >= 0x20 && c < 0x7f) {
        snprintf(out, n, "'%c'", c);
    } else {
        static const char *const named[] = {
            ['\a'] = "\\a", ['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n",
            ['\r'] = "\\r", ['\t'] = "\\t", ['\v'] = "\\v"};
        if (c < sizeof(named) / sizeof(named[0]) && named[c])
            snprintf(out, n, "'%s'", named[c]);
        else if (c < 0x20 || c == 0x7f)
            snprintf(out, n, "'\\x%02x'", c);
        else if (c <= 0xa0 || c == 0xad)
            snprintf(out, n, "'\\u00%02x'", c);
        else  // Go shows the byte as the Latin-1 character U+00XX
            snprintf(out, n, "'%c%c'", (char)(0xc0 | (c >> 6)), (char)(0x80 | (c & 0x3f)));
    }
}

static void line_col(const unsigned char *s, size_t off, int *line, int *col)
{
    int l = 1;
    size_t start = 0;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = (int)(off - start) + 1;
}

static int syntax_error(struct scanner *sc, const char *context)
{
    if (sc->i >= sc->n) {
        err_set(sc->e, ERR_INVALID, "unexpected end of JSON input");
        return SCAN_EOF;
    }
    char q[16];
    quote_char(sc->s[sc->i], q, sizeof(q));
    int line, col;
    line_col(sc->s, sc->i, &line, &col);
    return err_set(sc->e, ERR_INVALID, "invalid character %s %s at line %d column %d", q, context,
                   line, col);
}

static void skip_ws(struct scanner *sc)
{
    while (sc->i < sc->n) {
        unsigned char c = sc->s[sc->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        sc->i++;
    }
}

static int hex_val(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

// Length of a valid UTF-8 sequence at s (1..4), or 0 when invalid.
static size_t utf8_len_at(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (!len || len > n)
        return 0;
    return utf8_valid((const char *)s, len) ? len : 0;
}

// Reads 4 hex digits at s (the caller checked they exist); -1 when not hex.
static long read_u4(const unsigned char *s)
{
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex_val(s[k]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static int scan_string(struct scanner *sc)
{
    sc->i++;  // opening quote
    for (;;) {
        if (sc->i >= sc->n)
            return syntax_error(sc, "");
        unsigned char c = sc->s[sc->i];
        if (c == '"') {
            sc->i++;
            return 0;
        }
        if (c < 0x20)
            return syntax_error(sc, "in string literal");
        if (c == '\\') {
            sc->i++;
            if (sc->i >= sc->n)
                return syntax_error(sc, "");
            c = sc->s[sc->i];
            if (c == 'u') {
                sc->i++;
                for (int k = 0; k < 4; k++, sc->i++) {
                    if (sc->i >= sc->n)
                        return syntax_error(sc, "");
                    if (hex_val(sc->s[sc->i]) < 0)
                        return syntax_error(sc, "in \\u hexadecimal character escape");
                }
                long v = read_u4(sc->s + sc->i - 4);
                if (v >= 0xd800 && v <= 0xdfff)
                    sc->needs_repair = true;  // checked precisely in repair()
                continue;
            }
            if (!strchr("bfnrt\\/\"", c) || c == '\0')
                return syntax_error(sc, "in string escape code");
            sc->i++;
            continue;
        }
        if (c >= 0x80) {
            size_t len = utf8_len_at(sc->s + sc->i, sc->n - sc->i);
            if (!len) {
                sc->needs_repair = true;
                len = 1;
            }
            sc->i += len;
            continue;
        }
        sc->i++;
    }
}

// True when the integer token p[0..len) ("-123") does not fit in int64.
static bool int_token_overflows(const unsigned char *p, size_t len)
{
    bool neg = p[0] == '-';
    size_t nd = len - neg;
    if (nd != 19)
        return nd > 19;
    return memcmp(p + neg, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0;
}

static int scan_number(struct scanner *sc)
{
    size_t start = sc->i;
    bool integral = true;
    if (sc->s[sc->i] == '-') {
        sc->i++;
        if (sc->i >= sc->n)
            return syntax_error(sc, "");
        if (sc->s[sc->i] < '0' || sc->s[sc->i] > '9')
            return syntax_error(sc, "in numeric literal");
    }
    if (sc->s[sc->i] == '0') {
        sc->i++;
    } else {
        while (sc->i < sc->n && sc->s[sc->i] >= '0' && sc->s[sc->i] <= '9')
            sc->i++;
    }
    if (sc->i < sc->n && sc->s[sc->i] == '.') {
        integral = false;
        sc->i++;
        if (sc->i >= sc->n)
            return syntax_error(sc, "");
        if (sc->s[sc->i] < '0' || sc->s[sc->i] > '9')
            return syntax_error(sc, "after decimal point in numeric literal");
        while (sc->i < sc->n && sc->s[sc->i] >= '0' && sc->s[sc->i] <= '9')
            sc->i++;
    }
    if (sc->i < sc->n && (sc->s[sc->i] == 'e' || sc->s[sc->i] == 'E')) {
        integral = false;
        sc->i++;
        if (sc->i < sc->n && (sc->s[sc->i] == '+' || sc->s[sc->i] == '-'))
            sc->i++;
        if (sc->i >= sc->n)
            return syntax_error(sc, "");
        if (sc->s[sc->i] < '0' || sc->s[sc->i] > '9')
            return syntax_error(sc, "in exponent of numeric literal");
        while (sc->i < sc->n && sc->s[sc->i] >= '0' && sc->s[sc->i] <= '9')
            sc->i++;
    }
    // Go reads 100000000000000000000 into a float64; jansson only takes it
    // as a real, so repair() writes it as "100000000000000000000.0".
    if (integral && int_token_overflows(sc->s + start, sc->i - start))
        sc->needs_repair = true;
    return 0;
}

static int scan_literal(struct scanner *sc)
{
    const char *word = sc->s[sc->i] == 't' ? "true" : sc->s[sc->i] == 'f' ? "false" : "null";
    sc->i++;
    for (const char *w = word + 1; *w; w++) {
        if (sc->i >= sc->n)
            return syntax_error(sc, "");
        if (sc->s[sc->i] != (unsigned char)*w) {
            char ctx[64];
            snprintf(ctx, sizeof(ctx), "in literal %s (expecting '%c')", word, *w);
            return syntax_error(sc, ctx);
        }
        sc->i++;
    }
    return 0;
}

static int push(struct scanner *sc, char kind)
{
    if (sc->depth >= JSONX_MAX_DEPTH) {
        int line, col;
        line_col(sc->s, sc->i, &line, &col);
        return err_set(sc->e, ERR_INVALID, "exceeded max depth at line %d column %d", line, col);
    }
    sc->stack[sc->depth++] = kind;
    sc->i++;
    return 0;
}

// After '{' or ',' in an object: a key, ':', then the value follows.
static int scan_key(struct scanner *sc)
{
    skip_ws(sc);
    if (sc->i >= sc->n || sc->s[sc->i] != '"')
        return syntax_error(sc, "looking for beginning of object key string");
    int rc = scan_string(sc);
    if (rc)
        return rc;
    skip_ws(sc);
    if (sc->i >= sc->n || sc->s[sc->i] != ':')
        return syntax_error(sc, "after object key");
    sc->i++;
    return 0;
}

// The start of a value. A scalar is scanned whole; an empty container is
// opened and closed. A non-empty one is left open, after its first key for
// an object, and *opened tells the caller its first element comes next.
static int scan_value(struct scanner *sc, bool *opened)
{
    int rc;
    *opened = false;
    skip_ws(sc);
    if (sc->i >= sc->n)
        return syntax_error(sc, "");
    unsigned char c = sc->s[sc->i];
    if (c == '{') {
        if ((rc = push(sc, '{')))
            return rc;
        skip_ws(sc);
        if (sc->i < sc->n && sc->s[sc->i] == '}') {
            sc->i++;
            sc->depth--;
            return 0;
        }
        *opened = true;
        return scan_key(sc);
    }
    if (c == '[') {
        if ((rc = push(sc, '[')))
            return rc;
        skip_ws(sc);
        if (sc->i < sc->n && sc->s[sc->i] == ']') {
            sc->i++;
            sc->depth--;
            return 0;
        }
        *opened = true;
        return 0;
    }
    if (c == '"')
        return scan_string(sc);
    if (c == '-' || (c >= '0' && c <= '9'))
        return scan_number(sc);
    if (c == 't' || c == 'f' || c == 'n')
        return scan_literal(sc);
    return syntax_error(sc, "looking for beginning of value");
}

// After a value: closes the containers it completes, then steps past the
// comma (and, in an object, the next key) to where the next value starts.
// *done is set once the top-level value is complete.
static int scan_after_value(struct scanner *sc, bool *done)
{
    for (;;) {
        skip_ws(sc);
        if (sc->depth == 0) {
            if (sc->i < sc->n)
                return syntax_error(sc, "after top-level value");
            *done = true;
            return 0;
        }
        if (sc->i >= sc->n)
            return syntax_error(sc, "");
        unsigned char c = sc->s[sc->i];
        char top = sc->stack[sc->depth - 1];
        if (top == '{') {
            if (c == '}') {
                sc->i++;
                sc->depth--;
                continue;
            }
            if (c != ',')
                return syntax_error(sc, "after object key:value pair");
            sc->i++;
            return scan_key(sc);
        }
        if (c == ']') {
            sc->i++;
            sc->depth--;
            continue;
        }
        if (c != ',')
            return syntax_error(sc, "after array element");
        sc->i++;
        return 0;
    }
}

static int scan(struct scanner *sc)
{
    int rc;
    skip_ws(sc);
    for (;;) {
        bool opened, done = false;
        if ((rc = scan_value(sc, &opened)))
            return rc;
        if (opened)
            continue;
        if ((rc = scan_after_value(sc, &done)) || done)
            return rc;
    }
}

static void put_fffd(struct buf *b)
{
    buf_append(b, "\xef\xbf\xbd", 3);
}

// Copies a syntactically valid document, replacing invalid UTF-8 bytes in
// strings and lone surrogate escapes with U+FFFD as Go's decoder does, and
// turning integers beyond int64 into reals.
static int repair(const unsigned char *s, size_t n, struct buf *out)
{
    int rc = buf_reserve(out, n + n / 2 + 16);
    if (rc < 0)
        return rc;
    bool in_str = false;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (!in_str) {
            if (c == '-' || (c >= '0' && c <= '9')) {
                size_t j = i;
                bool integral = true;
                while (j < n && strchr("0123456789-+.eE", s[j]) && s[j]) {
                    integral = integral && (s[j] == '-' || (s[j] >= '0' && s[j] <= '9'));
                    j++;
                }
                buf_append(out, s + i, j - i);
                if (integral && int_token_overflows(s + i, j - i))
                    buf_append(out, ".0", 2);
                i = j;
                continue;
            }
            if (c == '"')
                in_str = true;
            buf_append_char(out, (char)c);
            i++;
            continue;
        }
        if (c == '"') {
            in_str = false;
            buf_append_char(out, '"');
            i++;
        } else if (c == '\\' && s[i + 1] == 'u') {
            long v = read_u4(s + i + 2);
            if (v >= 0xd800 && v <= 0xdbff && i + 12 <= n && s[i + 6] == '\\' && s[i + 7] == 'u') {
                long lo = read_u4(s + i + 8);
                if (lo >= 0xdc00 && lo <= 0xdfff) {  // a proper pair
                    buf_append(out, s + i, 12);
                    i += 12;
                    continue;
                }
            }
            if (v >= 0xd800 && v <= 0xdfff)
                put_fffd(out);
            else
                buf_append(out, s + i, 6);
            i += 6;
        } else if (c == '\\') {
            buf_append(out, s + i, 2);
            i += 2;
        } else if (c >= 0x80) {
            size_t len = utf8_len_at(s + i, n - i);
            if (len) {
                buf_append(out, s + i, len);
                i += len;
            } else {
                put_fffd(out);
                i++;
            }
        } else {
            buf_append_char(out, (char)c);
            i++;
        }
    }
    return out->len ? 0 : ERR_NOMEM;
}

int jsonx_parse(const char *s, size_t n, json_t **out, struct err *e)
{
    if (!s && n)
        return err_set(e, ERR_INVALID, "json: no input");
    if (n > JSONX_MAX_BYTES)
        return err_set(e, ERR_TOO_LARGE, "json: input of %zu bytes exceeds the %zu byte limit", n,
                       JSONX_MAX_BYTES);
    struct scanner *sc = xcalloc(1, sizeof(*sc));
    sc->s = (const unsigned char *)(s ? s : "");
    sc->n = n;
    sc->e = e;
    int rc = scan(sc);
    bool repair_needed = sc->needs_repair;
    free(sc);
    if (rc)
        return rc == SCAN_EOF ? ERR_INVALID : rc;

    struct buf fixed;
    buf_init(&fixed, 0);
    const char *text = s;
    size_t len = n;
    if (repair_needed) {
        if (repair((const unsigned char *)s, n, &fixed) < 0) {
            buf_deinit(&fixed);
            return err_set(e, ERR_NOMEM, "json: out of memory");
        }
        text = fixed.data;
        len = fixed.len;
    }
    json_error_t jerr;
    json_t *v = json_loadb(text ? text : "", len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!v) {
        // The syntax is valid, so what is left is a number jansson cannot
        // hold, or memory.
        enum json_error_code code = json_error_code(&jerr);
        if (code == json_error_numeric_overflow)
            rc = err_set(e, ERR_RANGE, "json: number out of range at line %d column %d", jerr.line,
                         jerr.column);
        else if (code == json_error_out_of_memory)
            rc = err_set(e, ERR_NOMEM, "json: out of memory");
        else
            rc = err_set(e, ERR_INVALID, "json: %s at line %d column %d", jerr.text, jerr.line,
                         jerr.column);
        buf_deinit(&fixed);
        return rc;
    }
    buf_deinit(&fixed);
    *out = v;
    return 0;
}

int jsonx_parse_object(const char *s, size_t n, json_t **out, struct err *e)
{
    json_t *v;
    int rc = jsonx_parse(s, n, &v, e);
    if (rc < 0)
        return rc;
    if (!json_is_object(v)) {
        rc = err_set(e, ERR_INVALID, "json: cannot unmarshal %s into value of type object",
                     jsonx_type_name(v));
        json_decref(v);
        return rc;
    }
    *out = v;
    return 0;
}

// Capped growable buffers (like curl's dynbuf) and string slices.
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BUF_DEFAULT_MAX (SIZE_MAX / 2)

void buf_init(struct buf *b, size_t max_len)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max_len = max_len ? max_len : BUF_DEFAULT_MAX;
}

void buf_deinit(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

int buf_reserve(struct buf *b, size_t extra)
{
    size_t need;
    if (!size_add(&need, b->len, extra) || need > b->max_len)
        return ERR_TOO_LARGE;
    if (need + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need + 1) {
        if (cap > SIZE_MAX / 2) {
            cap = need + 1;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        return ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    int rc = buf_reserve(b, n);
    if (rc < 0)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_append_char(struct buf *b, char c)
{
    return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return ERR_INVALID;
    int rc = buf_reserve(b, (size_t)n);
    if (rc < 0)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

const char *buf_cstr(const struct buf *b)
{
    return b->data ? b->data : "";
}

char *buf_take(struct buf *b)
{
    char *p = b->data ? b->data : xstrdup("");
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

struct str str_from(const char *s)
{
    return (struct str){s, s ? strlen(s) : 0};
}

bool str_eq(struct str a, struct str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

bool str_eq_cstr(struct str a, const char *s)
{
    return str_eq(a, str_from(s));
}

bool str_starts_with(struct str s, const char *prefix)
{
    size_t n = strlen(prefix);
    return s.len >= n && memcmp(s.ptr, prefix, n) == 0;
}

bool str_ends_with(struct str s, const char *suffix)
{
    size_t n = strlen(suffix);
    return s.len >= n && memcmp(s.ptr + s.len - n, suffix, n) == 0;
}

struct str str_trim(struct str s)
{
    while (s.len && isspace((unsigned char)s.ptr[0])) {
        s.ptr++;
        s.len--;
    }
    while (s.len && isspace((unsigned char)s.ptr[s.len - 1]))
        s.len--;
    return s;
}

char *str_dup(struct str s)
{
    return xstrndup(s.ptr ? s.ptr : "", s.len);
}

bool ascii_ieq(const char *a, const char *b)
{
    for (;; a++, b++) {
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
        if (!*a)
            return true;
    }
}

bool cstr_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool cstr_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

// Length of the valid UTF-8 sequence starting at s (1..4), or 0 if invalid.
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t min, cp;
    if ((c & 0xE0) == 0xC0) {
        len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t len = utf8_seq_len(p + i, n - i);
        if (!len)
            return false;
        i += len;
    }
    return true;
}

size_t utf8_complete_prefix(const char *s, size_t n)
{
    // Look back at most 3 bytes for the start of a trailing sequence.
    const unsigned char *p = (const unsigned char *)s;
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = p[n - back];
        if ((c & 0xC0) == 0x80)
            continue;  // continuation byte: keep looking for the lead
        size_t need = c < 0x80             ? 1
                      : (c & 0xE0) == 0xC0 ? 2
                      : (c & 0xF0) == 0xE0 ? 3
                      : (c & 0xF8) == 0xF0 ? 4
                                           : 1;
        return back >= need ? n : n - back;
    }
    return n;
}

int str_to_i64(const char *s, int64_t min, int64_t max, int64_t *out, struct err *e)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return err_set(e, ERR_INVALID, "invalid integer \"%s\"", s ? s : "");
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return err_set(e, ERR_INVALID, "invalid integer \"%s\"", s);
    if (errno == ERANGE || v < min || v > max)
        return err_set(e, ERR_RANGE, "integer %s out of range [%lld, %lld]", s, (long long)min,
                       (long long)max);
    *out = v;
    return 0;
}

int str_to_u64(const char *s, uint64_t max, uint64_t *out, struct err *e)
{
    if (!s || !*s || !isdigit((unsigned char)*s))
        return err_set(e, ERR_INVALID, "invalid unsigned integer \"%s\"", s ? s : "");
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0')
        return err_set(e, ERR_INVALID, "invalid unsigned integer \"%s\"", s);
    if (errno == ERANGE || v > max)
        return err_set(e, ERR_RANGE, "integer %s out of range [0, %llu]", s,
                       (unsigned long long)max);
    *out = v;
    return 0;
}

bool str_go_parse_int(const char *s, int64_t *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!*p)
        return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return false;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE)
        return false;
    *out = v;
    return true;
}

int str_to_double(const char *s, double *out, struct err *e)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return err_set(e, ERR_INVALID, "invalid number \"%s\"", s ? s : "");
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0')
        return err_set(e, ERR_INVALID, "invalid number \"%s\"", s);
    // Overflow is an error; underflow to zero or a subnormal is not (as in Go).
    if (errno == ERANGE && (v > 1.0 || v < -1.0))
        return err_set(e, ERR_RANGE, "number %s out of range", s);
    *out = v;
    return 0;
}

// ---------------------------------------------------------------------------
// Go's strconv.Quote (also fmt's %q and Go-literal values in Modelfiles):
// printable runes as they are, the usual backslash escapes, \xNN for bytes
// that are not UTF-8, \uNNNN / \UNNNNNNNN for runes Go does not print.

int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

size_t utf8_encode(uint32_t c, char out[4])
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

int buf_append_utf8(struct buf *b, uint32_t c)
{
    char u[4];
    return buf_append(b, u, utf8_encode(c, u));
}

uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *w)
{
    unsigned char c = s[0];
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
        *w = 1;
        return c;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, cp = c & 0x07;
    } else {
        *w = 1;
        return UTF8_INVALID;
    }
    if (n < len) {
        *w = 1;
        return UTF8_INVALID;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *w = 1;
            return UTF8_INVALID;
        }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        *w = 1;
        return UTF8_INVALID;
    }
    *w = len;
    return cp;
}

static bool go_is_print(uint32_t cp)
{
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xA0) || cp == 0xAD)
        return false;
    if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || (cp >= 0xE000 && cp <= 0xF8FF) ||
        (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFFFE || cp == 0xFFFF)
        return false;
    return true;
}

int buf_append_go_quoted(struct buf *b, const char *s, size_t n)
{
    int rc = buf_append_char(b, '"');
    size_t i = 0;
    while (i < n && !rc) {
        size_t w;
        uint32_t cp = utf8_decode((const unsigned char *)s + i, n - i, &w);
        if (cp == UTF8_INVALID) {
            rc = buf_printf(b, "\\x%02x", (unsigned char)s[i]);
        } else if (cp == '"' || cp == '\\') {
            rc = buf_append_char(b, '\\') | buf_append_char(b, (char)cp);
        } else if (go_is_print(cp)) {
            rc = buf_append(b, s + i, w);
        } else {
            switch (cp) {
            case '\a':
                rc = buf_append_str(b, "\\a");
                break;
            case '\b':
                rc = buf_append_str(b, "\\b");
                break;
            case '\f':
                rc = buf_append_str(b, "\\f");
                break;
            case '\n':
                rc = buf_append_str(b, "\\n");
                break;
            case '\r':
                rc = buf_append_str(b, "\\r");
                break;
            case '\t':
                rc = buf_append_str(b, "\\t");
                break;
            case '\v':
                rc = buf_append_str(b, "\\v");
                break;
            default:
                if (cp < 0x20 || cp == 0x7f)
                    rc = buf_printf(b, "\\x%02x", cp);
                else if (cp < 0x10000)
                    rc = buf_printf(b, "\\u%04x", cp);
                else
                    rc = buf_printf(b, "\\U%08x", cp);
            }
        }
        i += w;
    }
    return rc ? ERR_TOO_LARGE : buf_append_char(b, '"');
}

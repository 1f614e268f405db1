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

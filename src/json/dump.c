// Writing JSON exactly as Go's encoding/json does: compact (or MarshalIndent
// with two spaces), object keys in insertion order or sorted like a Go map,
// strings with Go's escapes (<, >, & as \u003c \u003e \u0026 unless
// disabled, U+2028/U+2029 always escaped, invalid UTF-8 as \ufffd), and
// numbers in Go's float64 form.
#include "json/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Numbers

// Shortest decimal digits that round-trip (no sign, no dot) and the decimal
// exponent of the first digit: v = 0.d1d2d3... × 10^(exp+1).
static bool round_trips(double v, bool f32, int p, char *tmp, size_t n)
{
    snprintf(tmp, n, "%.*e", p - 1, v);
    return f32 ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v;
}

static void shortest_digits(double v, bool f32, char *digits, int *exp)
{
    // If p digits round-trip, so do p + 1: binary search for the least p.
    char tmp[40];
    int lo = 1, hi = f32 ? 9 : 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (round_trips(v, f32, mid, tmp, sizeof(tmp)))
            hi = mid;
        else
            lo = mid + 1;
    }
    round_trips(v, f32, lo, tmp, sizeof(tmp));
    // tmp is "d.ddde±XX" (v is non-negative here).
    int k = 0;
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[k++] = *p;
    // Trailing zeros carry no information.
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = '\0';
    *exp = atoi(p + 1);
}

static bool format_float(double v, bool f32, char *out, size_t n)
{
    if (!n)
        return false;
    out[0] = '\0';
    if (isnan(v) || isinf(v))
        return false;
    char s[64];
    int k = 0;
    if (signbit(v)) {
        s[k++] = '-';
        v = -v;
    }
    if (v == 0) {
        s[k++] = '0';
        s[k] = '\0';
        snprintf(out, n, "%s", s);
        return true;
    }
    char d[24];
    int exp;
    shortest_digits(v, f32, d, &exp);
    int nd = (int)strlen(d);
    double abs = f32 ? (double)(float)v : v;
    bool sci = f32 ? ((float)abs < 1e-6f || (float)abs >= 1e21f) : (abs < 1e-6 || abs >= 1e21);
    if (sci) {
        s[k++] = d[0];
        if (nd > 1) {
            s[k++] = '.';
            memcpy(s + k, d + 1, (size_t)nd - 1);
            k += nd - 1;
        }
        // Go writes at least two exponent digits, then trims "e-07" to "e-7".
        int ae = exp < 0 ? -exp : exp;
        if (exp < 0)
            k += snprintf(s + k, sizeof(s) - (size_t)k, "e-%d", ae);
        else
            k += snprintf(s + k, sizeof(s) - (size_t)k, "e+%02d", ae);
    } else if (exp < 0) {
        s[k++] = '0';
        s[k++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            s[k++] = '0';
        memcpy(s + k, d, (size_t)nd);
        k += nd;
    } else if (exp + 1 >= nd) {
        memcpy(s + k, d, (size_t)nd);
        k += nd;
        for (int i = 0; i < exp + 1 - nd; i++)
            s[k++] = '0';
    } else {
        memcpy(s + k, d, (size_t)exp + 1);
        k += exp + 1;
        s[k++] = '.';
        memcpy(s + k, d + exp + 1, (size_t)(nd - exp - 1));
        k += nd - exp - 1;
    }
    s[k] = '\0';
    snprintf(out, n, "%s", s);
    return true;
}

bool jsonx_format_double(double v, char *out, size_t n)
{
    return format_float(v, false, out, n);
}

bool jsonx_format_float32(float v, char *out, size_t n)
{
    return format_float((double)v, true, out, n);
}

// ---------------------------------------------------------------------------
// Strings

// Length of a valid UTF-8 sequence at s, or 0 when invalid.
static size_t seq_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (!len || len > n)
        return 0;
    return utf8_valid((const char *)s, len) ? len : 0;
}

int jsonx_dump_string(const char *str, size_t n, int flags, struct buf *out)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    bool html = !(flags & JSONX_NO_HTML_ESCAPE);
    int rc = buf_reserve(out, n + 2);
    if (rc < 0)
        return rc;
    buf_append_char(out, '"');
    size_t start = 0;  // pending run of bytes copied as they are
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        const char *esc = NULL;
        char u[8];
        size_t adv = 1;
        if (c < 0x80) {
            if (c >= 0x20 && c != '"' && c != '\\' &&
                !(html && (c == '<' || c == '>' || c == '&'))) {
                i++;
                continue;
            }
            switch (c) {
            case '"':
                esc = "\\\"";
                break;
            case '\\':
                esc = "\\\\";
                break;
            case '\b':
                esc = "\\b";
                break;
            case '\f':
                esc = "\\f";
                break;
            case '\n':
                esc = "\\n";
                break;
            case '\r':
                esc = "\\r";
                break;
            case '\t':
                esc = "\\t";
                break;
            default:
                snprintf(u, sizeof(u), "\\u00%c%c", hex[c >> 4], hex[c & 15]);
                esc = u;
            }
        } else {
            size_t len = seq_len(s + i, n - i);
            if (!len) {
                esc = "\\ufffd";
            } else if (len == 3 && c == 0xe2 && s[i + 1] == 0x80 &&
                       (s[i + 2] == 0xa8 || s[i + 2] == 0xa9)) {
                esc = s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029";
                adv = 3;
            } else {
                i += len;
                continue;
            }
        }
        if ((rc = buf_append(out, s + start, i - start)) < 0 || (rc = buf_append_str(out, esc)) < 0)
            return rc;
        i += adv;
        start = i;
    }
    if ((rc = buf_append(out, s + start, n - start)) < 0)
        return rc;
    return buf_append_char(out, '"');
}

// ---------------------------------------------------------------------------
// Values

struct key {
    const char *s;
    size_t len;
    json_t *v;
};

static int key_cmp(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, m);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static int newline_indent(struct buf *out, int flags, int depth)
{
    if (!(flags & JSONX_INDENT))
        return 0;
    int rc = buf_append_char(out, '\n');
    for (int i = 0; i < depth && rc == 0; i++)
        rc = buf_append(out, "  ", 2);
    return rc;
}

static int dump_value(const json_t *v, int flags, int depth, struct buf *out, struct err *e);

static int dump_array(const json_t *v, int flags, int depth, struct buf *out, struct err *e)
{
    size_t n = json_array_size(v);
    int rc;
    if ((rc = buf_append_char(out, '[')) < 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i && (rc = buf_append_char(out, ',')) < 0)
            break;
        if ((rc = newline_indent(out, flags, depth + 1)) < 0)
            break;
        rc = dump_value(json_array_get(v, i), flags, depth + 1, out, e);
    }
    if (rc == 0 && n)
        rc = newline_indent(out, flags, depth);
    if (rc == 0)
        rc = buf_append_char(out, ']');
    return rc;
}

// Members in insertion order, or sorted by key bytes with JSONX_SORT_KEYS.
static int dump_object(const json_t *v, int flags, int depth, struct buf *out, struct err *e)
{
    size_t n = json_object_size(v);
    struct key *keys = n ? xmalloc(n * sizeof(*keys)) : NULL;
    size_t k = 0;
    for (void *it = json_object_iter((json_t *)v); it && k < n;
         it = json_object_iter_next((json_t *)v, it), k++) {
        keys[k].s = json_object_iter_key(it);
        keys[k].len = json_object_iter_key_len(it);
        keys[k].v = json_object_iter_value(it);
    }
    if ((flags & JSONX_SORT_KEYS) && k > 1)
        qsort(keys, k, sizeof(*keys), key_cmp);
    int rc = buf_append_char(out, '{');
    for (size_t i = 0; i < k && rc == 0; i++) {
        if (i && (rc = buf_append_char(out, ',')) < 0)
            break;
        if ((rc = newline_indent(out, flags, depth + 1)) < 0 ||
            (rc = jsonx_dump_string(keys[i].s, keys[i].len, flags, out)) < 0 ||
            (rc = buf_append_str(out, (flags & JSONX_INDENT) ? ": " : ":")) < 0)
            break;
        rc = dump_value(keys[i].v, flags, depth + 1, out, e);
    }
    free(keys);
    if (rc == 0 && k)
        rc = newline_indent(out, flags, depth);
    if (rc == 0)
        rc = buf_append_char(out, '}');
    return rc;
}

static int dump_value(const json_t *v, int flags, int depth, struct buf *out, struct err *e)
{
    int rc;
    if (depth > JSONX_MAX_DEPTH)
        return err_set(e, ERR_INVALID, "json: value nested deeper than %d levels", JSONX_MAX_DEPTH);
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
        rc = buf_append_str(out, "null");
        break;
    case JSON_TRUE:
        rc = buf_append_str(out, "true");
        break;
    case JSON_FALSE:
        rc = buf_append_str(out, "false");
        break;
    case JSON_INTEGER:
        rc = buf_printf(out, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL: {
        char num[40];
        if (!jsonx_format_double(json_real_value(v), num, sizeof(num)))
            return err_set(e, ERR_INVALID, "json: unsupported value: %f", json_real_value(v));
        rc = buf_append_str(out, num);
        break;
    }
    case JSON_STRING:
        rc = jsonx_dump_string(json_string_value(v), json_string_length(v), flags, out);
        break;
    case JSON_ARRAY:
        rc = dump_array(v, flags, depth, out, e);
        break;
    case JSON_OBJECT:
        rc = dump_object(v, flags, depth, out, e);
        break;
    default:
        return err_set(e, ERR_INVALID, "json: unknown value type");
    }
    if (rc < 0)
        return err_set(e, rc, "json: %s", err_str(rc));
    return 0;
}

int jsonx_dump(const json_t *v, int flags, struct buf *out, struct err *e)
{
    return dump_value(v, flags, 0, out, e);
}

int jsonx_ndjson_line(json_t *obj, struct buf *line)
{
    int rc = jsonx_dump(obj, 0, line, NULL);
    json_decref(obj);
    return rc < 0 ? rc : buf_append_char(line, '\n');
}

char *jsonx_dumps(const json_t *v, int flags)
{
    struct buf b;
    buf_init(&b, 0);
    if (jsonx_dump(v, flags, &b, NULL) < 0) {
        buf_deinit(&b);
        return NULL;
    }
    return buf_take(&b);
}

// Text helpers shared by the renderers and parsers: Go's notion of white
// space, partial-tag overlap, Go's JSON and %v formatting of decoded values,
// and tool-call objects.
#include "renderer/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

const char *rnd_str(const json_t *m, const char *key)
{
    const char *s = json_string_value(json_object_get(m, key));
    return s ? s : "";
}

json_t *rnd_tool_fn(const json_t *tool, const char *key)
{
    return json_object_get(json_object_get(tool, "function"), key);
}

json_t *rnd_call_fn(const json_t *call)
{
    return json_object_get(call, "function");
}

// Go's unicode.IsSpace.
static bool go_space(uint32_t r)
{
    switch (r) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
        return true;
    default:
        return r >= 0x2000 && r <= 0x200A;
    }
}

size_t rnd_leading_ws(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)s + i, n - i, &w);
        if (w == 0 || !go_space(r))
            break;
        i += w;
    }
    return i;
}

size_t rnd_trailing_ws(const char *s, size_t n)
{
    size_t end = n;
    while (end > 0) {
        // Start of the last rune: step back over continuation bytes (max 4).
        size_t st = end - 1;
        while (st > 0 && end - st < 4 && ((unsigned char)s[st] & 0xC0) == 0x80)
            st--;
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)s + st, end - st, &w);
        if (w != end - st || !go_space(r))
            break;
        end = st;
    }
    return n - end;
}

size_t rnd_overlap(const char *s, size_t n, const char *delim)
{
    size_t dl = strlen(delim);
    size_t max = dl < n ? dl : n;
    for (size_t i = max; i > 0; i--)
        if (memcmp(s + n - i, delim, i) == 0)
            return i;
    return 0;
}

const char *rnd_find(const char *s, size_t n, const char *needle)
{
    size_t nl = strlen(needle);
    if (!s || nl == 0 || nl > n)
        return NULL;
    return memmem(s, n, needle, nl);
}

void rnd_buf_consume(struct buf *b, size_t k)
{
    if (k >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + k, b->len - k);
    b->len -= k;
    b->data[b->len] = 0;
}

int rnd_go_json(struct buf *out, const json_t *v)
{
    return jsonx_dump(v, JSONX_SORT_KEYS, out, NULL);
}

int rnd_go_json_spaced(struct buf *out, const json_t *v)
{
    struct buf tmp;
    buf_init(&tmp, 0);
    int rc = rnd_go_json(&tmp, v);
    bool in_str = false, esc = false;
    for (size_t i = 0; rc == 0 && i < tmp.len; i++) {
        char c = tmp.data[i];
        rc = buf_append_char(out, c);
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if ((c == ':' || c == ',') && rc == 0) {
            rc = buf_append_char(out, ' ');
        }
    }
    buf_deinit(&tmp);
    return rc;
}

// fmt's %v of a float64: shortest round-trip digits, %e form when the
// decimal exponent is < -4 or >= 6 (strconv's 'g' with precision -1).
static int go_float_v(struct buf *out, double v)
{
    if (isnan(v))
        return buf_append_str(out, "NaN");
    if (isinf(v))
        return buf_append_str(out, v > 0 ? "+Inf" : "-Inf");
    if (v == 0)
        return buf_append_str(out, signbit(v) ? "-0" : "0");
    char tmp[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    // tmp = [-]d[.ddd]e±XX
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd < sizeof(digits) - 1)
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    int rc = neg ? buf_append_char(out, '-') : 0;
    if (exp < -4 || exp >= 6) {
        rc = rc ? rc : buf_append_char(out, digits[0]);
        if (nd > 1) {
            rc = rc ? rc : buf_append_char(out, '.');
            rc = rc ? rc : buf_append(out, digits + 1, nd - 1);
        }
        return rc ? rc : buf_printf(out, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    }
    if (exp < 0) {
        rc = rc ? rc : buf_append_str(out, "0.");
        for (int i = 0; i < -exp - 1; i++)
            rc = rc ? rc : buf_append_char(out, '0');
        return rc ? rc : buf_append(out, digits, nd);
    }
    // exp + 1 integer digits.
    for (int i = 0; i <= exp; i++)
        rc = rc ? rc : buf_append_char(out, (size_t)i < nd ? digits[i] : '0');
    if ((size_t)exp + 1 < nd) {
        rc = rc ? rc : buf_append_char(out, '.');
        rc = rc ? rc : buf_append(out, digits + exp + 1, nd - (size_t)exp - 1);
    }
    return rc;
}

int rnd_go_value(struct buf *out, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return buf_append(out, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return go_float_v(out, (double)json_integer_value(v));
    case JSON_REAL:
        return go_float_v(out, json_real_value(v));
    case JSON_TRUE:
        return buf_append_str(out, "true");
    case JSON_FALSE:
        return buf_append_str(out, "false");
    case JSON_NULL:
        return buf_append_str(out, "<nil>");
    default:
        return rnd_go_json(out, v);
    }
}

static void make_call_id(char out[16])
{
    static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[8];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        for (int i = 0; i < 8; i++)
            r[i] = (unsigned char)rand();
    memcpy(out, "call_", 5);
    for (int i = 0; i < 8; i++)
        out[5 + i] = set[r[i] % 36];
    out[13] = 0;
}

void rnd_call_append(struct renderer_parser *p, json_t *calls, const char *name, json_t *args)
{
    char id[16];
    make_call_id(id);
    json_t *fn = json_object();
    json_object_set_new(fn, "index", json_integer(p->n_calls++));
    json_object_set_new(fn, "name", json_string(name));
    json_object_set_new(fn, "arguments", args ? args : json_object());
    json_t *call = json_object();
    json_object_set_new(call, "id", json_string(id));
    json_object_set_new(call, "function", fn);
    json_array_append_new(calls, call);
}

void rnd_emit_until_partial(struct renderer_parser *p, const char *tag, const char *tag2,
                            struct buf *to)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    size_t ov = tag ? rnd_overlap(a, n, tag) : 0;
    size_t ov2 = tag2 ? rnd_overlap(a, n, tag2) : 0;
    if (ov2 > ov)
        ov = ov2;
    size_t before = n - ov;
    size_t keep_from = before - rnd_trailing_ws(a, before);
    if (keep_from > 0)
        buf_append(to, a, keep_from);
    rnd_buf_consume(&p->acc, keep_from);
}

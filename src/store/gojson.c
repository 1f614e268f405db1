// Byte-exact Go encodings: encoding/json strings and float64 numbers
// (store.md §4.2, §6.1) and sorted object keys as Go marshals maps (through
// the json module's encoder), and the fmt %v / %#v forms used by `show`
// (modelfile.md §6, api.md §5). Blobs are shared across the ecosystem by
// digest, so these bytes must match Go's.
#include "store/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Strings, numbers and values are written by the json module's Go encoder;
// store only names the conventions it relies on.
int gojson_string_n(struct buf *b, const char *s, size_t n)
{
    return jsonx_dump_string(s, n, 0, b);
}

int gojson_string(struct buf *b, const char *s)
{
    return gojson_string_n(b, s, strlen(s));
}

int float_shortest_digits(double v, char *digits, size_t n, int *n_digits)
{
    char tmp[64];
    v = fabs(v);
    if (v == 0) {
        snprintf(digits, n, "0");
        *n_digits = 1;
        return 0;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v || prec == 17)
            break;
    }
    // tmp = d[.ddd]e±XX
    int nd = 0;
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && (size_t)nd + 1 < n)
            digits[nd++] = *p;
    // Drop trailing zeros of the mantissa (shortest form has none, but the
    // 17-digit fallback might).
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    *n_digits = nd;
    return *p == 'e' ? atoi(p + 1) : 0;
}

// Plain decimal ('f', shortest) of |v| from its digits and exponent.
static void format_plain(char *out, size_t n, bool neg, const char *d, int nd, int exp)
{
    size_t o = 0;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (o + 1 < n)                                                                             \
            out[o++] = (ch);                                                                       \
    } while (0)
    if (neg)
        PUT('-');
    if (exp < 0) {
        PUT('0');
        PUT('.');
        for (int i = 0; i < -exp - 1; i++)
            PUT('0');
        for (int i = 0; i < nd; i++)
            PUT(d[i]);
    } else {
        for (int i = 0; i <= exp; i++)
            PUT(i < nd ? d[i] : '0');
        if (nd > exp + 1) {
            PUT('.');
            for (int i = exp + 1; i < nd; i++)
                PUT(d[i]);
        }
    }
    out[o] = '\0';
#undef PUT
}

// Exponent form d[.ddd]e±XX (at least two exponent digits, like strconv).
static void format_exp(char *out, size_t n, bool neg, const char *d, int nd, int exp, bool json)
{
    char mant[40];
    size_t o = 0;
    mant[o++] = d[0];
    if (nd > 1) {
        mant[o++] = '.';
        for (int i = 1; i < nd && o + 1 < sizeof(mant); i++)
            mant[o++] = d[i];
    }
    mant[o] = '\0';
    int ax = exp < 0 ? -exp : exp;
    // Go's JSON encoder turns "e-07" into "e-7"; strconv keeps two digits.
    if (json && exp < 0 && ax < 10)
        snprintf(out, n, "%s%se-%d", neg ? "-" : "", mant, ax);
    else
        snprintf(out, n, "%s%se%c%02d", neg ? "-" : "", mant, exp < 0 ? '-' : '+', ax);
}

int gojson_number(struct buf *b, double v)
{
    char out[64];
    if (!jsonx_format_double(v, out, sizeof(out)))
        return ERR_INVALID;
    return buf_append_str(b, out);
}

void gofmt_float(double v, bool plain_ints, char *out, size_t n)
{
    if (isnan(v)) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v < 0 ? "-Inf" : "+Inf");
        return;
    }
    if (plain_ints && v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(out, n, "%.0f", v);
        return;
    }
    char d[32];
    int nd;
    int exp = float_shortest_digits(v, d, sizeof(d), &nd);
    bool neg = signbit(v) && v != 0;
    // %v = %g with the shortest digits; exponent form when exp < -4 or
    // exp >= 6 (strconv's "precision 6 for this decision" for shortest).
    if (exp < -4 || exp >= 6)
        format_exp(out, n, neg, d, nd, exp, false);
    else
        format_plain(out, n, neg, d, nd, exp);
}

int gofmt_quote(struct buf *b, const char *s)
{
    return buf_append_go_quoted(b, s, strlen(s));
}

int gojson_value(struct buf *b, const json_t *v)
{
    return jsonx_dump(v, JSONX_SORT_KEYS, b, NULL);
}

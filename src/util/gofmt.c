// Go's fmt formatting, the one copy: %q of a string (Modelfiles, `show`) and
// %v of a float64 (the CLI's tables, the built-in renderers and `show` print
// numbers as Go does).
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

// The shortest decimal digits that read back as v (> 0 and finite), without
// trailing zeros, and the decimal exponent of the first one.
static size_t shortest_digits(double v, char digits[32], int *exp)
{
    char tmp[64];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    size_t nd = 0;  // tmp = d[.ddd]e±XX
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd < 31)
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    *exp = *p == 'e' ? atoi(p + 1) : 0;
    return nd;
}

int buf_append_go_float(struct buf *b, double v)
{
    if (isnan(v))
        return buf_append_str(b, "NaN");
    if (isinf(v))
        return buf_append_str(b, v > 0 ? "+Inf" : "-Inf");
    if (v == 0)
        return buf_append_str(b, signbit(v) ? "-0" : "0");
    char d[32];
    int exp;
    const size_t nd = shortest_digits(fabs(v), d, &exp);
    int rc = v < 0 ? buf_append_char(b, '-') : 0;
    // strconv's %g for shortest digits: exponent form when exp < -4 or >= 6.
    if (exp < -4 || exp >= 6) {
        rc = rc ? rc : buf_append_char(b, d[0]);
        if (nd > 1)
            rc = rc ? rc : buf_printf(b, ".%s", d + 1);
        return rc ? rc : buf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    }
    if (exp < 0) {
        rc = rc ? rc : buf_append_str(b, "0.");
        for (int i = 0; i < -exp - 1; i++)
            rc = rc ? rc : buf_append_char(b, '0');
        return rc ? rc : buf_append_str(b, d);
    }
    for (int i = 0; i <= exp; i++)  // exp + 1 integer digits
        rc = rc ? rc : buf_append_char(b, (size_t)i < nd ? d[i] : '0');
    if ((size_t)exp + 1 < nd)
        rc = rc ? rc : buf_printf(b, ".%s", d + exp + 1);
    return rc;
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
        } else if (utf8_is_go_print(cp)) {
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

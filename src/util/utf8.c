// util's UTF-8 layer, the one place that handles UTF-8 and Unicode
// properties: the codec (validation, decoding, encoding) and, over
// utf8proc, case mapping, general categories, display width and canonical
// decomposition. Other modules use these, never utf8proc itself.
#include "util/util.h"

#include <utf8proc.h>

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, w = 0; i < n; i += w)
        if (utf8_decode(p + i, n - i, &w) == UTF8_INVALID)
            return false;
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

// utf8_category returns utf8proc's category numbers unchanged.
#define SAME(x) ((int)UTF8_CAT_##x == (int)UTF8PROC_CATEGORY_##x)
_Static_assert(SAME(CN) && SAME(LU) && SAME(LO) && SAME(ND) && SAME(PC) && SAME(PO) && SAME(SM) &&
                   SAME(SO) && SAME(ZS) && SAME(CC) && SAME(CF) && SAME(CS) && SAME(CO),
               "utf8_category mirrors utf8proc_category_t");
#undef SAME

enum utf8_category utf8_category(uint32_t c)
{
    return (enum utf8_category)utf8proc_category((utf8proc_int32_t)c);
}

bool utf8_is_cased(uint32_t c)
{
    enum utf8_category k = utf8_category(c);
    return k == UTF8_CAT_LU || k == UTF8_CAT_LL || k == UTF8_CAT_LT;
}

bool utf8_is_letter_or_digit(uint32_t c)
{
    enum utf8_category k = utf8_category(c);
    return (k >= UTF8_CAT_LU && k <= UTF8_CAT_LO) || k == UTF8_CAT_ND;
}

bool utf8_is_go_print(uint32_t c)
{
    if (c == ' ')
        return true;
    if (c < 0x20 || c == 0x7f)
        return false;
    if (c < 0x7f)
        return true;
    enum utf8_category k = utf8_category(c);
    return k >= UTF8_CAT_LU && k <= UTF8_CAT_SO;  // L, M, N, P, S
}

uint32_t utf8_toupper(uint32_t c)
{
    return (uint32_t)utf8proc_toupper((utf8proc_int32_t)c);
}

uint32_t utf8_tolower(uint32_t c)
{
    return (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
}

uint32_t utf8_totitle(uint32_t c)
{
    return (uint32_t)utf8proc_totitle((utf8proc_int32_t)c);
}

int utf8_width(uint32_t c)
{
    int w = utf8proc_charwidth((utf8proc_int32_t)c);
    return w < 0 ? 0 : w;
}

uint32_t utf8_nfd_first(uint32_t c)
{
    utf8proc_int32_t d[8];
    int bound = 0;
    utf8proc_ssize_t n =
        utf8proc_decompose_char((utf8proc_int32_t)c, d, 8, UTF8PROC_DECOMPOSE, &bound);
    return n >= 1 ? (uint32_t)d[0] : c;
}

// Standard base64 (RFC 4648, padded): the server's embeddings and image
// checks, the CLI's images and audio.
#include "util/util.h"

#include <stdint.h>
#include <string.h>

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_encode(const void *data, size_t n, struct buf *out)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        char q[4] = {b64_alphabet[(v >> 18) & 63], b64_alphabet[(v >> 12) & 63],
                     i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=',
                     i + 2 < n ? b64_alphabet[v & 63] : '='};
        buf_append(out, q, 4);
    }
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64_alphabet, c) : NULL;
    return p ? (int)(p - b64_alphabet) : -1;
}

// Go's base64.StdEncoding.DecodeString acceptance: groups of 4, '=' only as
// final padding, padding bits zero; CR/LF are skipped.
bool base64_valid(const char *s)
{
    int vals[4];
    int n = 0, pad = 0;
    for (; *s; s++) {
        if (*s == '\r' || *s == '\n')
            continue;
        if (pad) {
            if (*s != '=')
                return false;
            pad++;
            n++;
        } else if (*s == '=') {
            if (n < 2)
                return false;
            pad = 1;
            n++;
        } else {
            int v = b64_value(*s);
            if (v < 0)
                return false;
            vals[n++] = v;
        }
        if (n == 4) {
            if (pad == 2 && (vals[1] & 15))
                return false;
            if (pad == 1 && (vals[2] & 3))
                return false;
            if (pad && s[1] && !(s[1] == '\r' || s[1] == '\n'))
                return false;
            if (pad) {
                for (const char *t = s + 1; *t; t++)
                    if (*t != '\r' && *t != '\n')
                        return false;
                return true;
            }
            n = 0;
        }
    }
    return n == 0;
}

int base64_decode(const char *s, struct buf *out, struct err *e)
{
    if (!base64_valid(s))
        return err_set(e, ERR_FORMAT, "illegal base64 data");
    uint32_t acc = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        int v = b64_value(*s);
        if (v < 0)
            continue;  // CR / LF
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            unsigned char c = (unsigned char)(acc >> bits);
            if (buf_append(out, &c, 1) < 0)
                return err_set(e, ERR_TOO_LARGE, "base64 data too large");
        }
    }
    return 0;
}

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

int gojson_number(struct buf *b, double v)
{
    char out[64];
    if (!jsonx_format_double(v, out, sizeof(out)))
        return ERR_INVALID;
    return buf_append_str(b, out);
}

void gofmt_float(double v, bool plain_ints, char *out, size_t n)
{
    if (plain_ints && v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(out, n, "%.0f", v);
        return;
    }
    struct buf b;
    buf_init(&b, 0);
    buf_append_go_float(&b, v);
    snprintf(out, n, "%s", buf_cstr(&b));
    buf_deinit(&b);
}

int gofmt_quote(struct buf *b, const char *s)
{
    return buf_append_go_quoted(b, s, strlen(s));
}

int gojson_value(struct buf *b, const json_t *v)
{
    return jsonx_dump(v, JSONX_SORT_KEYS, b, NULL);
}

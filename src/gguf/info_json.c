// The /api/show model_info object (docs/spec/api.md §5) as JSON, built on the
// gguf_model_info walk: native JSON types, long arrays as [] unless verbose.
#include "gguf/gguf.h"

#include <math.h>
#include <stdlib.h>

#include "json/json.h"

// A JSON string of arbitrary bytes: each byte that does not start a valid
// UTF-8 sequence becomes U+FFFD (what Go's encoder writes for it).
static json_t *string_json(const char *p, size_t n)
{
    if (utf8_valid(p, n))
        return json_stringn(p, n);
    struct buf b;
    buf_init(&b, 0);
    size_t i = 0;
    while (i < n) {
        size_t k = 1;
        while (k <= 4 && i + k <= n && !utf8_valid(p + i, k))
            k++;
        if (k <= 4 && i + k <= n) {
            buf_append(&b, p + i, k);
            i += k;
        } else {
            buf_append_str(&b, "\xef\xbf\xbd");
            i++;
        }
    }
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return s;
}

// One value; NULL when out of memory. Non-finite floats are null; arrays
// nested deeper than 8 are [], and an array stops at an element it cannot read.
static json_t *value_json(const struct gguf_value *v, int depth)
{
    switch (v->type) {
    case GGUF_VAL_UINT8:
    case GGUF_VAL_UINT16:
    case GGUF_VAL_UINT32:
    case GGUF_VAL_UINT64:
        if (v->v.u64 > (uint64_t)INT64_MAX)
            return json_real((double)v->v.u64);
        return json_integer((json_int_t)v->v.u64);
    case GGUF_VAL_INT8:
    case GGUF_VAL_INT16:
    case GGUF_VAL_INT32:
    case GGUF_VAL_INT64:
        return json_integer((json_int_t)v->v.i64);
    case GGUF_VAL_FLOAT32:
        return isfinite(v->v.f64) ? jsonx_real_f32((float)v->v.f64) : json_null();
    case GGUF_VAL_FLOAT64:
        return isfinite(v->v.f64) ? json_real(v->v.f64) : json_null();
    case GGUF_VAL_BOOL:
        return json_boolean(v->v.b);
    case GGUF_VAL_STRING:
        return string_json(v->s.ptr, v->s.len);
    case GGUF_VAL_ARRAY: {
        json_t *arr = json_array();
        for (uint64_t i = 0; arr && depth <= 8 && i < v->arr_count; i++) {
            struct gguf_value e;
            if (!gguf_arr_value(v, i, &e))
                break;
            if (jsonx_arr_append(arr, value_json(&e, depth + 1)) < 0) {
                json_decref(arr);
                return NULL;
            }
        }
        return arr;
    }
    default:
        return json_null();
    }
}

// A key that is not UTF-8 is left out (a JSON object key must be text).
static int add_entry(void *ctx, struct str key, const struct gguf_value *val, bool elided)
{
    json_t *obj = ctx;
    if (!utf8_valid(key.ptr, key.len))
        return 0;
    char *k = str_dup(key);
    int rc = jsonx_set(obj, k, elided ? json_array() : value_json(val, 0));
    free(k);
    return rc;
}

struct json_t *gguf_model_info_json(const struct gguf *g, bool verbose)
{
    json_t *obj = json_object();
    if (obj && gguf_model_info(g, verbose, add_entry, obj) != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

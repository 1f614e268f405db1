// The /api/show model_info object (spec/api.md §5) as JSON, built on the
// gguf_model_info walk: native JSON types, long arrays as [] unless verbose.
#include "gguf/gguf.h"

#include <math.h>
#include <stdlib.h>

#include "json/json.h"

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
        return jsonx_strn(v->s.ptr, v->s.len);
    case GGUF_VAL_ARRAY: {
        json_t *arr = json_array();
        for (uint64_t i = 0; arr && i < v->arr_count && depth < 8; i++) {
            struct gguf_value e;
            if (!gguf_arr_value(v, i, &e) || jsonx_arr_append(arr, value_json(&e, depth + 1)) < 0) {
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

static int add_entry(void *ctx, struct str key, const struct gguf_value *val, bool elided)
{
    json_t *obj = ctx;
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

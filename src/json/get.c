// Typed access to parsed JSON with Go-like errors, and small builders for
// the objects the API writes.
#include "json/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

const char *jsonx_type_name(const json_t *v)
{
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "null";
    }
}

static int type_error(const json_t *v, const char *what, const char *want, struct err *e)
{
    return err_set(e, ERR_INVALID, "json: cannot unmarshal %s into field %s of type %s",
                   jsonx_type_name(v), what, want);
}

// Looks up key: 1 with *v set, 0 absent/null and optional, < 0 on error.
static int field(const json_t *obj, const char *key, bool required, json_t **v, struct err *e)
{
    if (!json_is_object(obj))
        return err_set(e, ERR_INVALID, "json: cannot read field %s from %s, expected object", key,
                       jsonx_type_name(obj));
    json_t *x = json_object_get(obj, key);
    if (!x || json_is_null(x)) {
        if (required)
            return err_set(e, ERR_INVALID, "missing required field %s", key);
        return 0;
    }
    *v = x;
    return 1;
}

int jsonx_as_strn(const json_t *v, const char *what, const char **out, size_t *len, struct err *e)
{
    if (!json_is_string(v))
        return type_error(v, what, "string", e);
    *out = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return 0;
}

int jsonx_as_str(const json_t *v, const char *what, const char **out, struct err *e)
{
    return jsonx_as_strn(v, what, out, NULL, e);
}

int jsonx_as_bool(const json_t *v, const char *what, bool *out, struct err *e)
{
    if (!json_is_boolean(v))
        return type_error(v, what, "bool", e);
    *out = json_is_true(v);
    return 0;
}

int jsonx_as_int(const json_t *v, const char *what, int64_t *out, int64_t min, int64_t max,
                 struct err *e)
{
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        char num[32];
        jsonx_format_double(d, num, sizeof(num));
        if (d != trunc(d))
            return err_set(e, ERR_INVALID,
                           "json: cannot unmarshal number %s into field %s of type int", num, what);
        // 2^63 is exactly representable; anything at or past it does not fit.
        if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
            return err_set(e, ERR_RANGE, "json: number %s for field %s is out of range", num, what);
        x = (int64_t)d;
    } else {
        return type_error(v, what, "int", e);
    }
    if (x < min || x > max)
        return err_set(e, ERR_RANGE, "json: %s = %lld is out of range [%lld, %lld]", what,
                       (long long)x, (long long)min, (long long)max);
    *out = x;
    return 0;
}

int jsonx_as_double(const json_t *v, const char *what, double *out, struct err *e)
{
    if (!json_is_number(v))
        return type_error(v, what, "float64", e);
    *out = json_number_value(v);
    return 0;
}

int jsonx_get_strn(const json_t *obj, const char *key, const char **out, size_t *len, bool required,
                   struct err *e)
{
    json_t *v;
    int rc = field(obj, key, required, &v, e);
    if (rc <= 0)
        return rc;
    rc = jsonx_as_strn(v, key, out, len, e);
    return rc < 0 ? rc : 1;
}

int jsonx_get_str(const json_t *obj, const char *key, const char **out, bool required,
                  struct err *e)
{
    return jsonx_get_strn(obj, key, out, NULL, required, e);
}

int jsonx_get_bool(const json_t *obj, const char *key, bool *out, bool required, struct err *e)
{
    json_t *v;
    int rc = field(obj, key, required, &v, e);
    if (rc <= 0)
        return rc;
    rc = jsonx_as_bool(v, key, out, e);
    return rc < 0 ? rc : 1;
}

int jsonx_get_int(const json_t *obj, const char *key, int64_t *out, int64_t min, int64_t max,
                  bool required, struct err *e)
{
    json_t *v;
    int rc = field(obj, key, required, &v, e);
    if (rc <= 0)
        return rc;
    rc = jsonx_as_int(v, key, out, min, max, e);
    return rc < 0 ? rc : 1;
}

int jsonx_get_double(const json_t *obj, const char *key, double *out, bool required, struct err *e)
{
    json_t *v;
    int rc = field(obj, key, required, &v, e);
    if (rc <= 0)
        return rc;
    rc = jsonx_as_double(v, key, out, e);
    return rc < 0 ? rc : 1;
}

static int get_typed(const json_t *obj, const char *key, json_t **out, bool required,
                     json_type want, const char *want_name, struct err *e)
{
    json_t *v;
    int rc = field(obj, key, required, &v, e);
    if (rc <= 0)
        return rc;
    if (json_typeof(v) != want)
        return type_error(v, key, want_name, e);
    *out = v;
    return 1;
}

int jsonx_get_obj(const json_t *obj, const char *key, json_t **out, bool required, struct err *e)
{
    return get_typed(obj, key, out, required, JSON_OBJECT, "object", e);
}

int jsonx_get_arr(const json_t *obj, const char *key, json_t **out, bool required, struct err *e)
{
    return get_typed(obj, key, out, required, JSON_ARRAY, "array", e);
}

// ---------------------------------------------------------------------------
// Builders

json_t *jsonx_strn(const char *s, size_t n)
{
    return s ? json_stringn_nocheck(s, n) : json_null();
}

json_t *jsonx_str(const char *s)
{
    return s ? json_stringn_nocheck(s, strlen(s)) : json_null();
}

json_t *jsonx_real_f32(float f)
{
    // Store the double nearest to f's shortest decimal, so the float64
    // writer prints exactly that decimal ("0.8", not "0.800000011920929").
    char num[32];
    if (!jsonx_format_float32(f, num, sizeof(num)))
        return NULL;
    return json_real(strtod(num, NULL));
}

int jsonx_set(json_t *obj, const char *key, json_t *v)
{
    if (!v)
        return ERR_NOMEM;
    if (!json_is_object(obj)) {
        json_decref(v);
        return ERR_INVALID;
    }
    return json_object_set_new_nocheck(obj, key, v) == 0 ? 0 : ERR_NOMEM;
}

int jsonx_set_str(json_t *obj, const char *key, const char *s)
{
    return jsonx_set(obj, key, jsonx_str(s));
}

int jsonx_set_strn(json_t *obj, const char *key, const char *s, size_t n)
{
    return jsonx_set(obj, key, jsonx_strn(s, n));
}

int jsonx_set_int(json_t *obj, const char *key, int64_t v)
{
    return jsonx_set(obj, key, json_integer((json_int_t)v));
}

int jsonx_set_bool(json_t *obj, const char *key, bool v)
{
    return jsonx_set(obj, key, json_boolean(v));
}

int jsonx_set_double(json_t *obj, const char *key, double v)
{
    if (!isfinite(v))
        return ERR_INVALID;
    return jsonx_set(obj, key, json_real(v));
}

int jsonx_set_f32(json_t *obj, const char *key, float v)
{
    if (!isfinite(v))
        return ERR_INVALID;
    return jsonx_set(obj, key, jsonx_real_f32(v));
}

int jsonx_arr_append(json_t *arr, json_t *v)
{
    if (!v)
        return ERR_NOMEM;
    if (!json_is_array(arr)) {
        json_decref(v);
        return ERR_INVALID;
    }
    return json_array_append_new(arr, v) == 0 ? 0 : ERR_NOMEM;
}

json_t *jsonx_tool_call(int64_t index, const char *name, json_t *args)
{
    static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[8];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        for (int i = 0; i < 8; i++)
            r[i] = (unsigned char)rand();
    char id[16] = "call_";
    for (int i = 0; i < 8; i++)
        id[5 + i] = set[r[i] % 36];
    json_t *fn = json_object();
    json_object_set_new(fn, "index", json_integer(index));
    json_object_set_new(fn, "name", json_string(name));
    json_object_set_new(fn, "arguments", args);
    json_t *call = json_object();
    json_object_set_new(call, "id", json_string(id));
    json_object_set_new(call, "function", fn);
    return call;
}

int64_t jsonx_number_i64(const json_t *v)
{
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (!json_is_real(v))
        return 0;
    double d = json_real_value(v);
    if (d != d)
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

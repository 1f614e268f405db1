// Safetensors header parsing: an 8-byte little-endian header length, a JSON
// object {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {...}}, then the data section the offsets are relative to. Every number is
// checked before it is used: the header fits the file, the offsets lie in the
// data section, and end - begin is exactly the shape's element count times
// the dtype's size (a file that lies about either is refused).
#include "convert/internal.h"

#include <stdlib.h>
#include <string.h>

#include "json/json.h"

#define ST_HEADER_MAX (100u << 20)  // as the safetensors library

static const struct {
    const char *name;
    enum st_dtype dtype;
    uint32_t size;
} dtypes[] = {
    {"F32", ST_F32, 4}, {"F16", ST_F16, 2}, {"BF16", ST_BF16, 2},
    {"U8", ST_U8, 1},   {"I64", ST_I64, 8},
};

const char *st_dtype_name(enum st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d)
            return dtypes[i].name;
    return "?";
}

bool st_dtype_float(enum st_dtype d)
{
    return d == ST_F32 || d == ST_F16 || d == ST_BF16;
}

uint32_t st_dtype_size(enum st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d)
            return dtypes[i].size;
    return 0;
}

static int parse_dtype(const char *s, enum st_dtype *out)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = dtypes[i].dtype;
            return 0;
        }
    return -1;
}

// shape: 1..4 non-negative integers; *count gets their product (checked).
static int parse_shape(const json_t *shape, struct st_tensor *t, uint64_t *count)
{
    size_t n = json_array_size(shape);
    if (!json_is_array(shape) || n == 0 || n > 4)
        return -1;
    *count = 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return -1;
        t->shape[i] = json_integer_value(d);
        if (!u64_mul(count, *count, (uint64_t)t->shape[i]))
            return -1;
    }
    t->n_dims = (uint32_t)n;
    return 0;
}

// One header entry, checked against the data section [data, data + n_data).
static int parse_entry(struct st_tensor *t, const char *name, const json_t *v, const uint8_t *data,
                       uint64_t n_data, const char *fname, struct err *e)
{
    const json_t *dt = json_object_get(v, "dtype"), *off = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !json_is_string(dt))
        return err_set(e, ERR_FORMAT, "%s: tensor %s: missing dtype", fname, name);
    if (parse_dtype(json_string_value(dt), &t->dtype) < 0)
        return err_set(e, ERR_UNSUPPORTED,
                       "%s: tensor %s has dtype %s; only F32, F16, BF16 (and U8, I64 where a "
                       "model has them) can be converted",
                       fname, name, json_string_value(dt));
    uint64_t count;
    if (parse_shape(json_object_get(v, "shape"), t, &count) < 0)
        return err_set(e, ERR_FORMAT, "%s: tensor %s: invalid shape", fname, name);
    const json_t *b = json_array_get(off, 0), *x = json_array_get(off, 1);
    if (json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(x) ||
        json_integer_value(b) < 0 || json_integer_value(x) < json_integer_value(b))
        return err_set(e, ERR_FORMAT, "%s: tensor %s: invalid data_offsets", fname, name);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(x);
    if (end > n_data)
        return err_set(e, ERR_FORMAT, "%s: tensor %s: data extends past end of file", fname, name);
    uint64_t want;
    if (!u64_mul(&want, count, st_dtype_size(t->dtype)) || want != end - begin)
        return err_set(e, ERR_FORMAT,
                       "%s: tensor %s: %" PRIu64 " bytes of data for its shape and dtype, "
                       "header says %" PRIu64,
                       fname, name, want, end - begin);
    t->data = data + begin;
    t->n_bytes = want;
    t->name = xstrdup(name);
    return 0;
}

static int parse_header_json(struct st_set *set, const json_t *root, const uint8_t *data,
                             uint64_t n_data, const char *fname, struct err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)root, k, v)
    {
        if (strcmp(k, "__metadata__") == 0)
            continue;
        for (size_t i = 0; i < set->n; i++)
            if (strcmp(set->v[i].name, k) == 0)
                return err_set(e, ERR_FORMAT, "%s: tensor %s appears twice", fname, k);
        struct st_tensor t = {0};
        int rc = parse_entry(&t, k, v, data, n_data, fname, e);
        if (rc < 0)
            return rc;
        set->v = xrealloc(set->v, (set->n + 1) * sizeof(*set->v));
        set->v[set->n++] = t;
    }
    return 0;
}

int st_parse(struct st_set *set, const uint8_t *image, size_t n, const char *fname, struct err *e)
{
    if (n < 8)
        return err_set(e, ERR_FORMAT, "%s: not a safetensors file (too short)", fname);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | image[i];
    if (hlen > ST_HEADER_MAX || hlen > n - 8)
        return err_set(e, ERR_FORMAT, "%s: header length %" PRIu64 " does not fit the file", fname,
                       hlen);
    json_t *root;
    struct err je = {0};
    if (jsonx_parse((const char *)image + 8, (size_t)hlen, &root, &je) < 0)
        return err_set(e, ERR_FORMAT, "%s: header: %s", fname, je.msg);
    int rc = 0;
    if (!json_is_object(root))
        rc = err_set(e, ERR_FORMAT, "%s: header is not a JSON object", fname);
    else
        rc = parse_header_json(set, root, image + 8 + hlen, n - 8 - hlen, fname, e);
    json_decref(root);
    return rc;
}

void st_set_free(struct st_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->v[i].name);
    free(set->v);
    memset(set, 0, sizeof(*set));
}

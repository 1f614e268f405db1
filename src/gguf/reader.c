// GGUF reader (docs/spec/gguf.md §1-4, §7): maps the file read-only and validates
// the whole header up front, so every view handed out afterwards lies inside
// the mapping. Hostile-input rules: every count, length, offset, dimension
// and type is checked against the bytes left and against overflow before it
// is used, and allocations grow with records actually parsed (never sized by
// a count read from the file). Tensor data is never touched: opening a
// multi-GB model reads only its header pages.
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

#define MAX_ARRAY_DEPTH 8
// Smallest encodings: key (8-byte length + 1 byte) + type + 1-byte value;
// tensor info: name (8 + 1) + n_dims + one dim + type + offset.
#define MIN_KV_BYTES     14u
#define MIN_TENSOR_BYTES 33u

struct gguf {
    const uint8_t *base;
    size_t size;
    void *map;  // owned mapping (gguf_open), NULL for gguf_open_memory
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    struct gguf_kv *kvs;
    size_t n_kv;
    struct gguf_tensor *tensors;
    size_t n_tensors;
    // Open-addressing hash tables of index + 1 (0 = empty), power-of-two sized.
    uint32_t *kv_hash;
    size_t kv_hash_cap;
    uint32_t *tensor_hash;
    size_t tensor_hash_cap;
};

struct rd {
    const uint8_t *p;
    size_t size;
    size_t pos;
    struct err *e;
};

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static size_t rd_left(const struct rd *r)
{
    return r->size - r->pos;
}

static bool rd_u32(struct rd *r, uint32_t *v)
{
    if (rd_left(r) < 4)
        return false;
    *v = load_u32(r->p + r->pos);
    r->pos += 4;
    return true;
}

static bool rd_u64(struct rd *r, uint64_t *v)
{
    if (rd_left(r) < 8)
        return false;
    *v = load_u64(r->p + r->pos);
    r->pos += 8;
    return true;
}

// A gguf_string: u64 length + bytes.
static bool rd_str(struct rd *r, struct str *s)
{
    uint64_t len;
    size_t save = r->pos;
    if (!rd_u64(r, &len))
        return false;
    if (len > rd_left(r)) {
        r->pos = save;
        return false;
    }
    s->ptr = (const char *)r->p + r->pos;
    s->len = (size_t)len;
    r->pos += (size_t)len;
    return true;
}

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

// ---------------------------------------------------------------------------
// Values

void gguf_decode_scalar(uint32_t type, const uint8_t *p, struct gguf_value *v)
{
    memset(v, 0, sizeof(*v));
    v->type = (enum gguf_value_type)type;
    switch (type) {
    case GGUF_VAL_UINT8:
        v->v.u64 = p[0];
        break;
    case GGUF_VAL_INT8:
        v->v.i64 = (int8_t)p[0];
        break;
    case GGUF_VAL_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->v.u64 = x;
        break;
    }
    case GGUF_VAL_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->v.i64 = x;
        break;
    }
    case GGUF_VAL_UINT32:
        v->v.u64 = load_u32(p);
        break;
    case GGUF_VAL_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->v.i64 = x;
        break;
    }
    case GGUF_VAL_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        v->v.f64 = x;
        break;
    }
    case GGUF_VAL_BOOL:
        v->v.b = p[0] != 0;
        break;
    case GGUF_VAL_UINT64:
        v->v.u64 = load_u64(p);
        break;
    case GGUF_VAL_INT64: {
        int64_t x;
        memcpy(&x, p, 8);
        v->v.i64 = x;
        break;
    }
    case GGUF_VAL_FLOAT64: {
        double x;
        memcpy(&x, p, 8);
        v->v.f64 = x;
        break;
    }
    default:
        break;
    }
}

// Encoded size of an already validated value of type at p.
static uint64_t value_span(uint32_t type, const uint8_t *p)
{
    if (type == GGUF_VAL_STRING)
        return 8 + load_u64(p);
    if (type != GGUF_VAL_ARRAY)
        return gguf_value_type_size(type);
    uint32_t et = load_u32(p);
    uint64_t count = load_u64(p + 4);
    uint64_t n = 12;
    if (et != GGUF_VAL_STRING && et != GGUF_VAL_ARRAY)
        return n + count * gguf_value_type_size(et);
    for (uint64_t i = 0; i < count; i++)
        n += value_span(et, p + n);
    return n;
}

static int parse_value(struct rd *r, uint32_t type, struct gguf_value *v, int depth,
                       struct str key);

// A fixed-size scalar (any type but string and array).
static int parse_scalar(struct rd *r, uint32_t type, struct gguf_value *v, struct str key)
{
    size_t n = gguf_value_type_size(type);
    if (rd_left(r) < n)
        return err_set(r->e, ERR_FORMAT, "key %.*s: value extends past end of file", (int)key.len,
                       key.ptr);
    gguf_decode_scalar(type, r->p + r->pos, v);
    if (type == GGUF_VAL_BOOL && r->p[r->pos] > 1)
        return err_set(r->e, ERR_FORMAT, "key %.*s: invalid bool value %u", (int)key.len, key.ptr,
                       r->p[r->pos]);
    r->pos += n;
    return 0;
}

// The elements of an array of fixed-size scalars: one bounds check for all.
static int parse_scalar_array(struct rd *r, struct gguf_value *v, struct str key)
{
    uint64_t count = v->arr_count, bytes;
    if (!u64_mul(&bytes, count, gguf_value_type_size(v->arr_type)) || bytes > rd_left(r))
        return err_set(r->e, ERR_FORMAT,
                       "key %.*s: array of %llu elements extends past end of file", (int)key.len,
                       key.ptr, (unsigned long long)count);
    if (v->arr_type == GGUF_VAL_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (v->arr_data[i] > 1)
                return err_set(r->e, ERR_FORMAT, "key %.*s: invalid bool value in array",
                               (int)key.len, key.ptr);
    r->pos += (size_t)bytes;
    v->arr_bytes = bytes;
    return 0;
}

// The elements of an array of strings or arrays, each walked in turn. At the
// top level each element's offset goes into an index owned by the value.
static int parse_variable_array(struct rd *r, struct gguf_value *v, int depth, struct str key)
{
    uint32_t et = v->arr_type;
    uint64_t count = v->arr_count;
    size_t start = r->pos;
    // Variable-size elements: each needs at least 8 (string) or 12 (array)
    // bytes, which bounds count by the bytes left before anything is sized by it.
    uint64_t min_elem = et == GGUF_VAL_STRING ? 8 : 12;
    if (count > rd_left(r) / min_elem)
        return err_set(r->e, ERR_FORMAT,
                       "key %.*s: array of %llu elements extends past end of file", (int)key.len,
                       key.ptr, (unsigned long long)count);
    uint64_t *index = NULL;
    if (depth == 0 && count > 0) {
        index = malloc((size_t)count * sizeof(*index));
        if (!index)
            return err_set(r->e, ERR_NOMEM, "key %.*s: out of memory for array index", (int)key.len,
                           key.ptr);
    }
    for (uint64_t i = 0; i < count; i++) {
        if (index)
            index[i] = r->pos - start;
        if (et == GGUF_VAL_STRING) {
            struct str s;
            if (!rd_str(r, &s)) {
                free(index);
                return err_set(r->e, ERR_FORMAT,
                               "key %.*s: string %llu of array extends past end of file",
                               (int)key.len, key.ptr, (unsigned long long)i);
            }
        } else {
            struct gguf_value inner;
            int rc = parse_value(r, GGUF_VAL_ARRAY, &inner, depth + 1, key);
            if (rc < 0) {
                free(index);
                return rc;
            }
        }
    }
    v->arr_bytes = r->pos - start;
    v->arr_index = index;
    return 0;
}

// An array: its header (element type and count), then the elements.
static int parse_array(struct rd *r, struct gguf_value *v, int depth, struct str key)
{
    struct err *e = r->e;
    if (depth >= MAX_ARRAY_DEPTH)
        return err_set(e, ERR_FORMAT, "key %.*s: arrays nested deeper than %d", (int)key.len,
                       key.ptr, MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t count;
    if (!rd_u32(r, &et) || !rd_u64(r, &count))
        return err_set(e, ERR_FORMAT, "key %.*s: array header extends past end of file",
                       (int)key.len, key.ptr);
    if (et >= GGUF_VAL_COUNT_)
        return err_set(e, ERR_FORMAT, "key %.*s: unknown array element type %u", (int)key.len,
                       key.ptr, et);
    v->arr_type = (enum gguf_value_type)et;
    v->arr_count = count;
    v->arr_data = r->p + r->pos;
    if (et != GGUF_VAL_STRING && et != GGUF_VAL_ARRAY)
        return parse_scalar_array(r, v, key);
    return parse_variable_array(r, v, depth, key);
}

// Parses one value of type at r (the key names it in errors). Top-level
// arrays of strings/arrays get an element offset index (owned by the value).
static int parse_value(struct rd *r, uint32_t type, struct gguf_value *v, int depth, struct str key)
{
    struct err *e = r->e;
    memset(v, 0, sizeof(*v));
    if (type >= GGUF_VAL_COUNT_)
        return err_set(e, ERR_FORMAT, "key %.*s: unknown value type %u", (int)key.len, key.ptr,
                       type);
    v->type = (enum gguf_value_type)type;
    if (type == GGUF_VAL_STRING) {
        if (!rd_str(r, &v->s))
            return err_set(e, ERR_FORMAT, "key %.*s: string value extends past end of file",
                           (int)key.len, key.ptr);
        return 0;
    }
    if (type != GGUF_VAL_ARRAY)
        return parse_scalar(r, type, v, key);
    return parse_array(r, v, depth, key);
}

// ---------------------------------------------------------------------------
// Hash tables

static int hash_build(uint32_t **table, size_t *cap_out, size_t n, struct err *e)
{
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    *table = calloc(cap, sizeof(uint32_t));
    if (!*table)
        return err_set(e, ERR_NOMEM, "out of memory for GGUF index");
    *cap_out = cap;
    return 0;
}

// Inserts index i with name s; returns false when the name is already there.
static bool hash_insert(uint32_t *table, size_t cap, struct str s, uint32_t i,
                        struct str (*name_of)(const struct gguf *, uint32_t), const struct gguf *g)
{
    size_t mask = cap - 1;
    size_t h = (size_t)hash_bytes(s.ptr, s.len) & mask;
    while (table[h]) {
        if (str_eq(name_of(g, table[h] - 1), s))
            return false;
        h = (h + 1) & mask;
    }
    table[h] = i + 1;
    return true;
}

static struct str kv_name(const struct gguf *g, uint32_t i)
{
    return g->kvs[i].key;
}

static struct str tensor_name(const struct gguf *g, uint32_t i)
{
    return g->tensors[i].name;
}

static const uint32_t *hash_lookup(const uint32_t *table, size_t cap, const char *name,
                                   struct str (*name_of)(const struct gguf *, uint32_t),
                                   const struct gguf *g)
{
    if (!table || !name)
        return NULL;
    struct str s = str_from(name);
    size_t mask = cap - 1;
    size_t h = (size_t)hash_bytes(s.ptr, s.len) & mask;
    while (table[h]) {
        if (str_eq(name_of(g, table[h] - 1), s))
            return &table[h];
        h = (h + 1) & mask;
    }
    return NULL;
}

// ---------------------------------------------------------------------------
// Parsing

static int parse_kvs(struct gguf *g, struct rd *r, uint64_t kv_count)
{
    struct err *e = r->e;
    size_t cap = 0;
    for (uint64_t i = 0; i < kv_count; i++) {
        if (g->n_kv == cap) {
            cap = cap ? cap * 2 : 16;
            struct gguf_kv *n = realloc(g->kvs, cap * sizeof(*n));
            if (!n)
                return err_set(e, ERR_NOMEM, "out of memory reading metadata");
            g->kvs = n;
        }
        struct gguf_kv *kv = &g->kvs[g->n_kv];
        memset(kv, 0, sizeof(*kv));
        if (!rd_str(r, &kv->key))
            return err_set(e, ERR_FORMAT, "metadata key %llu extends past end of file",
                           (unsigned long long)i);
        if (kv->key.len == 0)
            return err_set(e, ERR_FORMAT, "metadata key %llu is empty", (unsigned long long)i);
        if (!utf8_valid(kv->key.ptr, kv->key.len))
            return err_set(e, ERR_FORMAT, "metadata key %llu is not valid UTF-8",
                           (unsigned long long)i);
        if (memchr(kv->key.ptr, 0, kv->key.len))
            return err_set(e, ERR_FORMAT, "metadata key %llu contains a NUL byte",
                           (unsigned long long)i);
        uint32_t type;
        if (!rd_u32(r, &type))
            return err_set(e, ERR_FORMAT, "key %.*s: value type extends past end of file",
                           (int)kv->key.len, kv->key.ptr);
        int rc = parse_value(r, type, &kv->val, 0, kv->key);
        g->n_kv++;  // counted even on failure so close frees a partial index
        if (rc < 0)
            return rc;
    }
    int rc = hash_build(&g->kv_hash, &g->kv_hash_cap, g->n_kv, e);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < g->n_kv; i++)
        if (!hash_insert(g->kv_hash, g->kv_hash_cap, g->kvs[i].key, (uint32_t)i, kv_name, g))
            return err_set(e, ERR_FORMAT, "duplicate metadata key %.*s", (int)g->kvs[i].key.len,
                           g->kvs[i].key.ptr);
    return 0;
}

static int parse_alignment(struct gguf *g, struct err *e)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *kv = gguf_find(g, "general.alignment");
    if (!kv)
        return 0;
    if (kv->val.type != GGUF_VAL_UINT32)
        return err_set(e, ERR_FORMAT, "general.alignment must be u32, not %s",
                       gguf_value_type_name(kv->val.type));
    uint64_t a = kv->val.v.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return err_set(e, ERR_FORMAT, "general.alignment %llu is not a power of two",
                       (unsigned long long)a);
    g->alignment = (uint32_t)a;
    return 0;
}

#define TNAME(t) (int)(t)->name.len, (t)->name.ptr

static int parse_tensor(struct gguf *g, struct rd *r, uint64_t i, struct gguf_tensor *t)
{
    struct err *e = r->e;
    memset(t, 0, sizeof(*t));
    if (!rd_str(r, &t->name))
        return err_set(e, ERR_FORMAT, "tensor %llu: name extends past end of file",
                       (unsigned long long)i);
    if (t->name.len == 0)
        return err_set(e, ERR_FORMAT, "tensor %llu: empty name", (unsigned long long)i);
    if (t->name.len > GGUF_MAX_NAME_LEN)
        return err_set(e, ERR_FORMAT, "tensor %llu: name is %zu bytes long (max %d)",
                       (unsigned long long)i, t->name.len, GGUF_MAX_NAME_LEN);
    if (!utf8_valid(t->name.ptr, t->name.len) || memchr(t->name.ptr, 0, t->name.len))
        return err_set(e, ERR_FORMAT, "tensor %llu: name is not valid UTF-8",
                       (unsigned long long)i);
    if (!rd_u32(r, &t->n_dims))
        return err_set(e, ERR_FORMAT, "tensor %.*s: info extends past end of file", TNAME(t));
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return err_set(e, ERR_FORMAT, "tensor %.*s: invalid number of dimensions %u", TNAME(t),
                       t->n_dims);
    uint64_t n_elems = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (!rd_u64(r, &ne))
            return err_set(e, ERR_FORMAT, "tensor %.*s: info extends past end of file", TNAME(t));
        if (ne == 0)
            return err_set(e, ERR_FORMAT, "tensor %.*s: dimension %u is zero", TNAME(t), d);
        if (ne > (uint64_t)INT64_MAX)
            return err_set(e, ERR_FORMAT, "tensor %.*s: dimension %u is negative", TNAME(t), d);
        if (!u64_mul(&n_elems, n_elems, ne) || n_elems > (uint64_t)INT64_MAX)
            return err_set(e, ERR_FORMAT, "tensor %.*s: element count overflows", TNAME(t));
        t->ne[d] = (int64_t)ne;
    }
    if (!rd_u32(r, &t->type) || !rd_u64(r, &t->offset))
        return err_set(e, ERR_FORMAT, "tensor %.*s: info extends past end of file", TNAME(t));
    uint32_t bs, ts;
    if (!gguf_type_geometry(t->type, &bs, &ts))
        return err_set(e, ERR_UNSUPPORTED, "tensor %.*s: unknown tensor type %u", TNAME(t),
                       t->type);
    if ((uint64_t)t->ne[0] % bs != 0)
        return err_set(e, ERR_FORMAT,
                       "tensor %.*s: row length %lld is not a multiple of the %s block size %u",
                       TNAME(t), (long long)t->ne[0], gguf_type_name(t->type), bs);
    // n_elems / bs * ts cannot overflow more than n_elems * ts; check that.
    uint64_t nb;
    if (!u64_mul(&nb, n_elems / bs, ts))
        return err_set(e, ERR_FORMAT, "tensor %.*s: byte size overflows", TNAME(t));
    t->n_bytes = nb;
    if (t->offset % g->alignment != 0)
        return err_set(e, ERR_FORMAT,
                       "tensor %.*s: data offset %llu is not a multiple of the "
                       "alignment %u",
                       TNAME(t), (unsigned long long)t->offset, g->alignment);
    return 0;
}

static int cmp_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int parse_tensors(struct gguf *g, struct rd *r, uint64_t tensor_count)
{
    struct err *e = r->e;
    size_t cap = 0;
    for (uint64_t i = 0; i < tensor_count; i++) {
        if (g->n_tensors == cap) {
            cap = cap ? cap * 2 : 16;
            struct gguf_tensor *n = realloc(g->tensors, cap * sizeof(*n));
            if (!n)
                return err_set(e, ERR_NOMEM, "out of memory reading tensor infos");
            g->tensors = n;
        }
        int rc = parse_tensor(g, r, i, &g->tensors[g->n_tensors]);
        if (rc < 0)
            return rc;
        g->n_tensors++;
    }
    int rc = hash_build(&g->tensor_hash, &g->tensor_hash_cap, g->n_tensors, e);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < g->n_tensors; i++)
        if (!hash_insert(g->tensor_hash, g->tensor_hash_cap, g->tensors[i].name, (uint32_t)i,
                         tensor_name, g))
            return err_set(e, ERR_FORMAT, "duplicate tensor name %.*s", TNAME(&g->tensors[i]));

    // Data section: starts at the aligned end of the tensor infos.
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad;
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (!u64_add(&start, g->data_offset, t->offset) || !u64_add(&end, start, t->n_bytes) ||
            end > g->size)
            return err_set(e, ERR_FORMAT, "tensor %.*s: data extends past end of file", TNAME(t));
        t->data = g->base + start;
    }
    if (g->n_tensors < 2)
        return 0;
    const struct gguf_tensor **order = malloc(g->n_tensors * sizeof(*order));
    if (!order)
        return err_set(e, ERR_NOMEM, "out of memory checking tensor layout");
    for (size_t i = 0; i < g->n_tensors; i++)
        order[i] = &g->tensors[i];
    qsort(order, g->n_tensors, sizeof(*order), cmp_offset);
    rc = 0;
    for (size_t i = 1; i < g->n_tensors; i++) {
        const struct gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->n_bytes > b->offset) {
            rc = err_set(e, ERR_FORMAT, "tensor %.*s: data overlaps tensor %.*s", TNAME(b),
                         TNAME(a));
            break;
        }
    }
    free(order);
    return rc;
}

static int parse(struct gguf *g, struct err *e)
{
    struct rd r = {.p = g->base, .size = g->size, .pos = 0, .e = e};
    uint32_t magic = 0, version = 0;
    uint64_t tensor_count, kv_count;
    if (g->size < 4)
        return err_set(e, ERR_FORMAT, "not a GGUF file: too short (%zu bytes)", g->size);
    rd_u32(&r, &magic);
    if (magic != GGUF_MAGIC)
        return err_set(e, ERR_FORMAT, "not a GGUF file: bad magic %02x %02x %02x %02x", g->base[0],
                       g->base[1], g->base[2], g->base[3]);
    if (!rd_u32(&r, &version) || !rd_u64(&r, &tensor_count) || !rd_u64(&r, &kv_count))
        return err_set(e, ERR_FORMAT, "GGUF header truncated (%zu bytes)", g->size);
    if (version != 0 && (version & 0xFFFF) == 0)
        return err_set(e, ERR_UNSUPPORTED, "big-endian GGUF files are not supported");
    if (version == 1)
        return err_set(e, ERR_UNSUPPORTED, "GGUF version 1 is obsolete and not supported");
    if (version == 0 || version > 3)
        return err_set(e, ERR_UNSUPPORTED, "unsupported GGUF version %u", version);
    g->version = version;
    if (kv_count > rd_left(&r) / MIN_KV_BYTES || kv_count >= UINT32_MAX)
        return err_set(e, ERR_FORMAT,
                       "metadata count %llu does not fit in the file (%zu bytes; truncated?)",
                       (unsigned long long)kv_count, g->size);
    if (tensor_count > rd_left(&r) / MIN_TENSOR_BYTES || tensor_count >= UINT32_MAX)
        return err_set(e, ERR_FORMAT,
                       "tensor count %llu does not fit in the file (%zu bytes; truncated?)",
                       (unsigned long long)tensor_count, g->size);
    int rc = parse_kvs(g, &r, kv_count);
    if (rc == 0)
        rc = parse_alignment(g, e);
    if (rc == 0)
        rc = parse_tensors(g, &r, tensor_count);
    return rc;
}

// ---------------------------------------------------------------------------
// Open / close

static int open_image(struct gguf **out, const void *data, size_t n, void *map, struct err *e)
{
    struct gguf *g = xcalloc(1, sizeof(*g));
    g->base = data;
    g->size = n;
    g->map = map;
    int rc = parse(g, e);
    if (rc < 0) {
        g->map = NULL;  // the caller unmaps on failure
        gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int gguf_open_memory(struct gguf **out, const void *data, size_t n, struct err *e)
{
    if (!data && n)
        return err_set(e, ERR_INVALID, "gguf_open_memory: NULL data");
    return open_image(out, data ? data : "", n, NULL, e);
}

int gguf_open(struct gguf **out, const char *path, struct err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "open %s: %s", path,
                       strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = err_set(e, ERR_IO, "stat %s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(e, ERR_INVALID, "%s: not a regular file", path);
    }
    if (st.st_size < 24) {
        close(fd);
        return err_set(e, ERR_FORMAT, "not a GGUF file: too short (%lld bytes)",
                       (long long)st.st_size);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return err_set(e, ERR_TOO_LARGE, "%s: file too large to map", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED)
        return err_set(e, ERR_IO, "mmap %s: %s", path, strerror(saved));
    int rc = open_image(out, map, size, map, e);
    if (rc < 0)
        munmap(map, size);
    return rc;
}

void gguf_close(struct gguf *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_kv; i++)
        free((void *)g->kvs[i].val.arr_index);
    free(g->kvs);
    free(g->tensors);
    free(g->kv_hash);
    free(g->tensor_hash);
    if (g->map)
        munmap(g->map, g->size);
    free(g);
}

uint32_t gguf_version(const struct gguf *g)
{
    return g->version;
}

uint32_t gguf_alignment(const struct gguf *g)
{
    return g->alignment;
}

uint64_t gguf_data_offset(const struct gguf *g)
{
    return g->data_offset;
}

uint64_t gguf_file_size(const struct gguf *g)
{
    return g->size;
}

// ---------------------------------------------------------------------------
// Metadata access

size_t gguf_kv_count(const struct gguf *g)
{
    return g->n_kv;
}

const struct gguf_kv *gguf_kv_at(const struct gguf *g, size_t i)
{
    return i < g->n_kv ? &g->kvs[i] : NULL;
}

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key)
{
    const uint32_t *slot = hash_lookup(g->kv_hash, g->kv_hash_cap, key, kv_name, g);
    return slot ? &g->kvs[*slot - 1] : NULL;
}

static bool is_signed_int(enum gguf_value_type t)
{
    return t == GGUF_VAL_INT8 || t == GGUF_VAL_INT16 || t == GGUF_VAL_INT32 || t == GGUF_VAL_INT64;
}

static bool is_unsigned_int(enum gguf_value_type t)
{
    return t == GGUF_VAL_UINT8 || t == GGUF_VAL_UINT16 || t == GGUF_VAL_UINT32 ||
           t == GGUF_VAL_UINT64;
}

// Integer value as (negative?, magnitude-or-value).
static bool value_int(const struct gguf_value *v, bool *neg, uint64_t *u)
{
    if (is_unsigned_int(v->type)) {
        *neg = false;
        *u = v->v.u64;
        return true;
    }
    if (is_signed_int(v->type)) {
        *neg = v->v.i64 < 0;
        *u = (uint64_t)v->v.i64;
        return true;
    }
    if (v->type == GGUF_VAL_BOOL) {
        *neg = false;
        *u = v->v.b;
        return true;
    }
    return false;
}

static bool value_i64(const struct gguf_value *v, int64_t *out)
{
    bool neg;
    uint64_t u;
    if (!value_int(v, &neg, &u))
        return false;
    if (!neg && u > (uint64_t)INT64_MAX)
        return false;
    *out = (int64_t)u;
    return true;
}

static bool value_f64(const struct gguf_value *v, double *out)
{
    if (v->type == GGUF_VAL_FLOAT32 || v->type == GGUF_VAL_FLOAT64) {
        *out = v->v.f64;
        return true;
    }
    if (is_unsigned_int(v->type)) {
        *out = (double)v->v.u64;
        return true;
    }
    if (is_signed_int(v->type)) {
        *out = (double)v->v.i64;
        return true;
    }
    return false;
}

bool gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    bool neg;
    uint64_t u;
    if (!kv || kv->val.type == GGUF_VAL_BOOL || !value_int(&kv->val, &neg, &u) || neg ||
        u > UINT32_MAX)
        return false;
    *out = (uint32_t)u;
    return true;
}

bool gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    bool neg;
    uint64_t u;
    if (!kv || kv->val.type == GGUF_VAL_BOOL || !value_int(&kv->val, &neg, &u) || neg)
        return false;
    *out = u;
    return true;
}

bool gguf_get_i64(const struct gguf *g, const char *key, int64_t *out)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->val.type == GGUF_VAL_BOOL)
        return false;
    return value_i64(&kv->val, out);
}

bool gguf_get_f32(const struct gguf *g, const char *key, float *out)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    double d;
    if (!kv || !value_f64(&kv->val, &d))
        return false;
    *out = (float)d;
    return true;
}

bool gguf_get_bool(const struct gguf *g, const char *key, bool *out)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->val.type != GGUF_VAL_BOOL)
        return false;
    *out = kv->val.v.b;
    return true;
}

bool gguf_get_str(const struct gguf *g, const char *key, struct str *out)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->val.type != GGUF_VAL_STRING)
        return false;
    *out = kv->val.s;
    return true;
}

bool gguf_get_arr(const struct gguf *g, const char *key, enum gguf_value_type *elem_type,
                  uint64_t *count)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->val.type != GGUF_VAL_ARRAY)
        return false;
    if (elem_type)
        *elem_type = kv->val.arr_type;
    if (count)
        *count = kv->val.arr_count;
    return true;
}

bool gguf_arr_value(const struct gguf_value *arr, uint64_t i, struct gguf_value *out)
{
    if (!arr || arr->type != GGUF_VAL_ARRAY || i >= arr->arr_count)
        return false;
    uint32_t et = arr->arr_type;
    if (et != GGUF_VAL_STRING && et != GGUF_VAL_ARRAY) {
        gguf_decode_scalar(et, arr->arr_data + i * gguf_value_type_size(et), out);
        return true;
    }
    uint64_t off = 0;
    if (arr->arr_index) {
        off = arr->arr_index[i];
    } else {
        for (uint64_t k = 0; k < i; k++)
            off += value_span(et, arr->arr_data + off);
    }
    const uint8_t *p = arr->arr_data + off;
    memset(out, 0, sizeof(*out));
    out->type = (enum gguf_value_type)et;
    if (et == GGUF_VAL_STRING) {
        out->s.len = (size_t)load_u64(p);
        out->s.ptr = (const char *)p + 8;
    } else {
        out->arr_type = (enum gguf_value_type)load_u32(p);
        out->arr_count = load_u64(p + 4);
        out->arr_data = p + 12;
        out->arr_bytes = value_span(GGUF_VAL_ARRAY, p) - 12;
    }
    return true;
}

bool gguf_arr_str(const struct gguf_kv *kv, uint64_t i, struct str *out)
{
    struct gguf_value v;
    if (!kv || kv->val.arr_type != GGUF_VAL_STRING || !gguf_arr_value(&kv->val, i, &v))
        return false;
    *out = v.s;
    return true;
}

bool gguf_arr_i64(const struct gguf_kv *kv, uint64_t i, int64_t *out)
{
    struct gguf_value v;
    if (!kv || !gguf_arr_value(&kv->val, i, &v))
        return false;
    return value_i64(&v, out);
}

bool gguf_arr_f32(const struct gguf_kv *kv, uint64_t i, float *out)
{
    struct gguf_value v;
    double d;
    if (!kv || !gguf_arr_value(&kv->val, i, &v) || !value_f64(&v, &d))
        return false;
    *out = (float)d;
    return true;
}

struct str gguf_architecture(const struct gguf *g)
{
    struct str s;
    if (!gguf_get_str(g, "general.architecture", &s))
        return (struct str){"", 0};
    return s;
}

static bool arch_key(const struct gguf *g, const char *suffix, char *key, size_t n)
{
    struct str arch = gguf_architecture(g);
    if (!arch.len)
        return false;
    int k = snprintf(key, n, "%.*s.%s", (int)arch.len, arch.ptr, suffix);
    return k > 0 && (size_t)k < n;
}

bool gguf_get_arch_u32(const struct gguf *g, const char *suffix, uint32_t *out)
{
    char key[256];
    return arch_key(g, suffix, key, sizeof(key)) && gguf_get_u32(g, key, out);
}

bool gguf_get_arch_f32(const struct gguf *g, const char *suffix, float *out)
{
    char key[256];
    return arch_key(g, suffix, key, sizeof(key)) && gguf_get_f32(g, key, out);
}

// ---------------------------------------------------------------------------
// Tensors

size_t gguf_tensor_count(const struct gguf *g)
{
    return g->n_tensors;
}

const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct gguf_tensor *gguf_tensor_find(const struct gguf *g, const char *name)
{
    const uint32_t *slot = hash_lookup(g->tensor_hash, g->tensor_hash_cap, name, tensor_name, g);
    return slot ? &g->tensors[*slot - 1] : NULL;
}

uint64_t gguf_tensor_n_elements(const struct gguf_tensor *t)
{
    return (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
}

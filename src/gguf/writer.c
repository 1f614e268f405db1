// GGUF v3 writer, streaming: metadata and tensor infos are collected in
// memory (small), the header is written once, then tensor data is appended
// one tensor at a time with alignment padding, so a multi-GB model is never
// held in memory. gguf_writer_skip_data leaves holes (sparse files).
#include "gguf/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t n_bytes;
    uint64_t offset;
};

struct gguf_writer {
    FILE *f;
    char *path;
    uint32_t alignment;
    bool alignment_kv;  // general.alignment given explicitly
    struct buf kv;      // encoded KV records
    uint64_t n_kv;
    char **keys;
    size_t n_keys, cap_keys;
    struct wtensor *tensors;
    size_t n_tensors, cap_tensors;
    bool header_done;
    size_t cur;         // tensor being filled
    uint64_t cur_done;  // bytes of it written
    uint64_t pos;       // file position
    bool sparse_tail;   // last bytes were skipped: extend with ftruncate at close
    struct err err;     // sticky error of the declaration calls
};

int gguf_writer_open(struct gguf_writer **out, const char *path, struct err *e)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return err_set(e, ERR_IO, "create %s: %s", path, strerror(errno));
    struct gguf_writer *w = xcalloc(1, sizeof(*w));
    w->f = f;
    w->path = xstrdup(path);
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    buf_init(&w->kv, 0);
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    *out = w;
    return 0;
}

void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        err_set(&w->err, ERR_INVALID, "alignment %u is not a power of two", alignment);
        return;
    }
    w->alignment = alignment;
}

static int fail(struct gguf_writer *w, int code, const char *what, const char *key)
{
    return err_set(&w->err, code, "%s %s", what, key);
}

static int add_key(struct gguf_writer *w, const char *key, uint32_t type)
{
    if (w->err.code)
        return w->err.code;
    if (w->header_done)
        return fail(w, ERR_INVALID, "metadata added after the header:", key);
    size_t n = strlen(key);
    if (n == 0 || !utf8_valid(key, n))
        return fail(w, ERR_INVALID, "invalid metadata key", key);
    for (size_t i = 0; i < w->n_keys; i++)
        if (strcmp(w->keys[i], key) == 0)
            return fail(w, ERR_EXISTS, "duplicate metadata key", key);
    if (w->n_keys == w->cap_keys) {
        w->cap_keys = w->cap_keys ? w->cap_keys * 2 : 32;
        w->keys = xrealloc(w->keys, w->cap_keys * sizeof(*w->keys));
    }
    w->keys[w->n_keys++] = xstrdup(key);
    uint64_t len = n;
    int rc = buf_append(&w->kv, &len, 8);
    if (rc == 0)
        rc = buf_append(&w->kv, key, n);
    if (rc == 0)
        rc = buf_append(&w->kv, &type, 4);
    if (rc < 0)
        return fail(w, rc, "metadata too large at", key);
    w->n_kv++;
    return 0;
}

static int put(struct gguf_writer *w, const void *p, size_t n)
{
    int rc = buf_append(&w->kv, p, n);
    if (rc < 0)
        return err_set(&w->err, rc, "metadata too large");
    return 0;
}

static int kv_scalar(struct gguf_writer *w, const char *key, uint32_t type, const void *p, size_t n)
{
    int rc = add_key(w, key, type);
    return rc < 0 ? rc : put(w, p, n);
}

int gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    if (strcmp(key, "general.alignment") == 0) {
        if (v == 0 || (v & (v - 1)) != 0)
            return fail(w, ERR_INVALID, "general.alignment must be a power of two:", key);
        w->alignment = v;
        w->alignment_kv = true;
    }
    return kv_scalar(w, key, GGUF_VAL_UINT32, &v, 4);
}

int gguf_writer_kv_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    return kv_scalar(w, key, GGUF_VAL_INT32, &v, 4);
}

int gguf_writer_kv_u64(struct gguf_writer *w, const char *key, uint64_t v)
{
    return kv_scalar(w, key, GGUF_VAL_UINT64, &v, 8);
}

int gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v)
{
    return kv_scalar(w, key, GGUF_VAL_FLOAT32, &v, 4);
}

int gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return kv_scalar(w, key, GGUF_VAL_BOOL, &b, 1);
}

static int put_str(struct gguf_writer *w, const char *s, size_t n)
{
    uint64_t len = n;
    int rc = put(w, &len, 8);
    return rc < 0 ? rc : put(w, s, n);
}

int gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v)
{
    int rc = add_key(w, key, GGUF_VAL_STRING);
    return rc < 0 ? rc : put_str(w, v, strlen(v));
}

int gguf_writer_kv_arr(struct gguf_writer *w, const char *key, enum gguf_value_type elem_type,
                       const void *data, uint64_t count)
{
    size_t es = gguf_value_type_size(elem_type);
    if (es == 0)
        return fail(w, ERR_INVALID, "array of strings/arrays needs another call:", key);
    size_t bytes;
    if (count > SIZE_MAX || !size_mul(&bytes, (size_t)count, es))
        return fail(w, ERR_TOO_LARGE, "array too large:", key);
    int rc = add_key(w, key, GGUF_VAL_ARRAY);
    uint32_t et = elem_type;
    if (rc == 0)
        rc = put(w, &et, 4);
    if (rc == 0)
        rc = put(w, &count, 8);
    if (rc == 0 && bytes)
        rc = put(w, data, bytes);
    return rc;
}

int gguf_writer_kv_arr_str(struct gguf_writer *w, const char *key, const struct str *items,
                           uint64_t count)
{
    int rc = add_key(w, key, GGUF_VAL_ARRAY);
    uint32_t et = GGUF_VAL_STRING;
    if (rc == 0)
        rc = put(w, &et, 4);
    if (rc == 0)
        rc = put(w, &count, 8);
    for (uint64_t i = 0; rc == 0 && i < count; i++)
        rc = put_str(w, items[i].ptr, items[i].len);
    return rc;
}

// Re-encodes a (validated) reader value: arrays are copied verbatim.
static int put_value(struct gguf_writer *w, const struct gguf_value *v)
{
    switch (v->type) {
    case GGUF_VAL_UINT8:
    case GGUF_VAL_INT8:
    case GGUF_VAL_BOOL: {
        uint8_t b = v->type == GGUF_VAL_BOOL ? (uint8_t)v->v.b : (uint8_t)v->v.u64;
        return put(w, &b, 1);
    }
    case GGUF_VAL_UINT16:
    case GGUF_VAL_INT16: {
        uint16_t x = (uint16_t)v->v.u64;
        return put(w, &x, 2);
    }
    case GGUF_VAL_UINT32:
    case GGUF_VAL_INT32: {
        uint32_t x = (uint32_t)v->v.u64;
        return put(w, &x, 4);
    }
    case GGUF_VAL_FLOAT32: {
        float x = (float)v->v.f64;
        return put(w, &x, 4);
    }
    case GGUF_VAL_UINT64:
    case GGUF_VAL_INT64:
        return put(w, &v->v.u64, 8);
    case GGUF_VAL_FLOAT64:
        return put(w, &v->v.f64, 8);
    case GGUF_VAL_STRING:
        return put_str(w, v->s.ptr, v->s.len);
    case GGUF_VAL_ARRAY: {
        uint32_t et = v->arr_type;
        int rc = put(w, &et, 4);
        if (rc == 0)
            rc = put(w, &v->arr_count, 8);
        if (rc == 0 && v->arr_bytes)
            rc = put(w, v->arr_data, (size_t)v->arr_bytes);
        return rc;
    }
    default:
        return err_set(&w->err, ERR_INVALID, "unknown value type %u", v->type);
    }
}

int gguf_writer_kv_copy(struct gguf_writer *w, const struct gguf_kv *kv)
{
    char *key = str_dup(kv->key);
    int rc;
    if (kv->val.type == GGUF_VAL_UINT32 && strcmp(key, "general.alignment") == 0) {
        rc = gguf_writer_kv_u32(w, key, (uint32_t)kv->val.v.u64);
    } else {
        rc = add_key(w, key, kv->val.type);
        if (rc == 0)
            rc = put_value(w, &kv->val);
    }
    free(key);
    return rc;
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne)
{
    if (w->err.code)
        return w->err.code;
    if (w->header_done)
        return fail(w, ERR_INVALID, "tensor added after the header:", name);
    size_t len = strlen(name);
    if (len == 0 || len > GGUF_MAX_NAME_LEN)
        return fail(w, ERR_INVALID, "invalid tensor name", name);
    uint32_t bs, ts;
    if (!gguf_type_geometry(type, &bs, &ts))
        return fail(w, ERR_INVALID, "unknown tensor type for", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail(w, ERR_INVALID, "invalid number of dimensions for", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return fail(w, ERR_EXISTS, "duplicate tensor", name);
    struct wtensor t = {.type = type, .n_dims = n_dims};
    uint64_t n = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0 || !u64_mul(&n, n, (uint64_t)t.ne[d]) || n > (uint64_t)INT64_MAX)
            return fail(w, ERR_INVALID, "invalid dimensions for", name);
    }
    if (t.ne[0] % bs != 0)
        return fail(w, ERR_INVALID, "row length not a multiple of the block size for", name);
    if (!u64_mul(&t.n_bytes, n / bs, ts))
        return fail(w, ERR_INVALID, "tensor too large:", name);
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? w->cap_tensors * 2 : 64;
        w->tensors = xrealloc(w->tensors, w->cap_tensors * sizeof(*w->tensors));
    }
    t.name = xstrdup(name);
    w->tensors[w->n_tensors++] = t;
    return 0;
}

static int wr(struct gguf_writer *w, const void *p, size_t n, struct err *e)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        return err_set(e, ERR_IO, "write %s: %s", w->path, strerror(errno));
    w->pos += n;
    w->sparse_tail = false;
    return 0;
}

static int pad_to_alignment(struct gguf_writer *w, struct err *e)
{
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - w->pos % w->alignment) % w->alignment;
    while (pad) {
        size_t k = pad > sizeof(zeros) ? sizeof(zeros) : (size_t)pad;
        int rc = wr(w, zeros, k, e);
        if (rc < 0)
            return rc;
        pad -= k;
    }
    return 0;
}

int gguf_writer_write_header(struct gguf_writer *w, struct err *e)
{
    if (w->err.code)
        return err_set(e, w->err.code, "%s", w->err.msg);
    if (w->header_done)
        return err_set(e, ERR_INVALID, "GGUF header already written");
    if (w->alignment != GGUF_DEFAULT_ALIGNMENT && !w->alignment_kv) {
        int rc = gguf_writer_kv_u32(w, "general.alignment", w->alignment);
        if (rc < 0)
            return err_set(e, rc, "%s", w->err.msg);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        uint64_t sz = w->tensors[i].n_bytes;
        sz += (w->alignment - sz % w->alignment) % w->alignment;
        off += sz;
    }
    uint32_t hdr[2] = {GGUF_MAGIC, 3};
    uint64_t counts[2] = {w->n_tensors, w->n_kv};
    int rc = wr(w, hdr, 8, e);
    if (rc == 0)
        rc = wr(w, counts, 16, e);
    if (rc == 0)
        rc = wr(w, w->kv.data, w->kv.len, e);
    for (size_t i = 0; rc == 0 && i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint64_t ne[GGUF_MAX_DIMS];
        for (uint32_t d = 0; d < t->n_dims; d++)
            ne[d] = (uint64_t)t->ne[d];
        rc = wr(w, &len, 8, e);
        if (rc == 0)
            rc = wr(w, t->name, (size_t)len, e);
        if (rc == 0)
            rc = wr(w, &t->n_dims, 4, e);
        if (rc == 0)
            rc = wr(w, ne, 8 * t->n_dims, e);
        if (rc == 0)
            rc = wr(w, &t->type, 4, e);
        if (rc == 0)
            rc = wr(w, &t->offset, 8, e);
    }
    if (rc == 0 && w->n_tensors)
        rc = pad_to_alignment(w, e);
    buf_deinit(&w->kv);
    w->header_done = true;
    return rc;
}

// Moves to the next tensor when the current one is complete, padding to the
// alignment after every tensor, the last one included (as ggml writes it).
static int advance(struct gguf_writer *w, struct err *e)
{
    while (w->cur < w->n_tensors && w->cur_done == w->tensors[w->cur].n_bytes) {
        w->cur++;
        w->cur_done = 0;
        int rc = pad_to_alignment(w, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int gguf_writer_write_data(struct gguf_writer *w, const void *p, size_t n, struct err *e)
{
    if (!w->header_done)
        return err_set(e, ERR_INVALID, "tensor data written before the header");
    const uint8_t *src = p;
    while (n) {
        if (w->cur >= w->n_tensors)
            return err_set(e, ERR_INVALID, "more tensor data than declared");
        uint64_t left = w->tensors[w->cur].n_bytes - w->cur_done;
        size_t k = n < left ? n : (size_t)left;
        int rc = wr(w, src, k, e);
        if (rc < 0)
            return rc;
        src += k;
        n -= k;
        w->cur_done += k;
        rc = advance(w, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int gguf_writer_skip_data(struct gguf_writer *w, uint64_t n, struct err *e)
{
    if (!w->header_done)
        return err_set(e, ERR_INVALID, "tensor data written before the header");
    while (n) {
        if (w->cur >= w->n_tensors)
            return err_set(e, ERR_INVALID, "more tensor data than declared");
        uint64_t left = w->tensors[w->cur].n_bytes - w->cur_done;
        uint64_t k = n < left ? n : left;
        if (k > (uint64_t)INT64_MAX - w->pos || fflush(w->f) != 0 ||
            fseeko(w->f, (off_t)(w->pos + k), SEEK_SET) != 0)
            return err_set(e, ERR_IO, "seek %s: %s", w->path, strerror(errno));
        w->pos += k;
        w->sparse_tail = true;
        n -= k;
        w->cur_done += k;
        int rc = advance(w, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void writer_free(struct gguf_writer *w)
{
    for (size_t i = 0; i < w->n_keys; i++)
        free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    buf_deinit(&w->kv);
    free(w->path);
    free(w);
}

int gguf_writer_close(struct gguf_writer *w, struct err *e)
{
    int rc = 0;
    if (!w->header_done)
        rc = gguf_writer_write_header(w, e);
    if (rc == 0 && w->cur < w->n_tensors)
        rc = err_set(e, ERR_INVALID, "tensor %s: %llu of %llu bytes written",
                     w->tensors[w->cur].name, (unsigned long long)w->cur_done,
                     (unsigned long long)w->tensors[w->cur].n_bytes);
    if (rc == 0 && fflush(w->f) != 0)
        rc = err_set(e, ERR_IO, "write %s: %s", w->path, strerror(errno));
    if (rc == 0 && w->sparse_tail && ftruncate(fileno(w->f), (off_t)w->pos) != 0)
        rc = err_set(e, ERR_IO, "truncate %s: %s", w->path, strerror(errno));
    if (rc == 0 && fsync(fileno(w->f)) != 0 && errno != EINVAL)
        rc = err_set(e, ERR_IO, "fsync %s: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && rc == 0)
        rc = err_set(e, ERR_IO, "close %s: %s", w->path, strerror(errno));
    if (rc < 0)
        unlink(w->path);
    writer_free(w);
    return rc;
}

void gguf_writer_abort(struct gguf_writer *w)
{
    if (!w)
        return;
    fclose(w->f);
    unlink(w->path);
    writer_free(w);
}

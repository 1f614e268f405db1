// Model quantization (`ollama create --quantize`): rewrites a GGUF with every
// tensor converted to the type its mix gives it, laid out as llama-quantize
// lays it out, so the result matches llama.cpp's file:
//   - metadata: the input's keys in order, minus general.quantization_version
//     and general.file_type, which are appended (2, then the new ftype);
//   - tensors ordered by layer number ("blk.N."; others first), then by name;
//   - each tensor converted row chunk by row chunk (rows are independent in
//     every block format), so memory stays bounded for any model size.
#include "quantize/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_ELEMS ((int64_t)1 << 22)

struct order {
    const struct gguf_tensor *t;
    char name[GGUF_MAX_NAME_LEN + 1];
    int layer;
    int new_type;
};

static int cmp_order(const void *pa, const void *pb)
{
    const struct order *a = pa, *b = pb;
    if (a->layer != b->layer)
        return a->layer < b->layer ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int convert_tensor(struct gguf_writer *w, const struct order *o, float *f32, void *out,
                          int64_t chunk_rows_max, struct err *e)
{
    const struct gguf_tensor *t = o->t;
    if ((uint32_t)o->new_type == t->type)
        return gguf_writer_write_data(w, t->data, (size_t)t->n_bytes, e);
    const struct quant_traits *src = quant_traits_get(t->type);
    const struct quant_traits *dst = quant_traits_get((uint32_t)o->new_type);
    if (!src || !src->to_float)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: cannot convert from type %s", o->name,
                       gguf_type_name(t->type));
    if (!dst || !dst->from_float_ref)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: cannot quantize to type %s", o->name,
                       gguf_type_name((uint32_t)o->new_type));
    int64_t row_len = t->ne[0];
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t src_row = quant_row_size(t->type, row_len);
    size_t dst_row = quant_row_size((uint32_t)o->new_type, row_len);
    const uint8_t *p = t->data;
    for (int64_t r = 0; r < rows; r += chunk_rows_max) {
        int64_t nr = rows - r < chunk_rows_max ? rows - r : chunk_rows_max;
        src->to_float(p + (size_t)r * src_row, f32, nr * row_len);
        dst->from_float_ref(f32, out, nr * row_len);
        int rc = gguf_writer_write_data(w, out, (size_t)nr * dst_row, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// What the type mix needs to know about the model; arch_buf holds the architecture name.
static struct quantize_mix_model mix_model(const struct gguf *g, char *arch_buf, size_t arch_size)
{
    struct str arch = gguf_architecture(g);
    snprintf(arch_buf, arch_size, "%.*s", (int)arch.len, arch.ptr);
    uint32_t n_layers = 0, n_head = 0, n_head_kv = 0;
    gguf_get_arch_u32(g, "block_count", &n_layers);
    gguf_get_arch_u32(g, "attention.head_count", &n_head);
    gguf_get_arch_u32(g, "attention.head_count_kv", &n_head_kv);
    return (struct quantize_mix_model){
        .arch = arch_buf,
        .n_layers = (int)n_layers,
        .n_gqa = n_head && n_head_kv ? (int)(n_head / n_head_kv) : 1,
        .tied_embeddings = gguf_tensor_find(g, "output.weight") == NULL,
    };
}

// Fills ord[] with each tensor's name, layer and new type, then sorts it into the output
// order. Returns the input's tensor bytes (for progress); *max_row is the longest row.
static uint64_t plan_tensors(const struct gguf *g, int32_t ftype,
                             const struct quantize_mix_model *mm, struct order *ord, size_t n,
                             int64_t *max_row)
{
    uint64_t total = 0;
    *max_row = 1;
    for (size_t i = 0; i < n; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        struct order *o = &ord[i];
        o->t = t;
        snprintf(o->name, sizeof(o->name), "%.*s", (int)t->name.len, t->name.ptr);
        o->layer = -1;
        if (sscanf(o->name, "blk.%d.", &o->layer) != 1)
            o->layer = -1;
        o->new_type = quantize_mix_tensor_type(ftype, o->name, t->type, t->n_dims, t->ne[0], mm);
        if (t->ne[0] > *max_row)
            *max_row = t->ne[0];
        total += t->n_bytes;
    }
    qsort(ord, n, sizeof(*ord), cmp_order);
    return total;
}

// Metadata (the input's, with the quantization keys moved to the end) and tensor infos.
static int write_header(struct gguf_writer *w, const struct gguf *g, int32_t ftype,
                        const struct order *ord, size_t n, struct err *e)
{
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        if (str_eq_cstr(kv->key, "general.quantization_version") ||
            str_eq_cstr(kv->key, "general.file_type"))
            continue;
        gguf_writer_kv_copy(w, kv);
    }
    gguf_writer_kv_u32(w, "general.quantization_version", 2);
    gguf_writer_kv_u32(w, "general.file_type", (uint32_t)ftype);
    for (size_t i = 0; i < n; i++) {
        const struct gguf_tensor *t = ord[i].t;
        gguf_writer_add_tensor(w, ord[i].name, (uint32_t)ord[i].new_type, t->n_dims, t->ne);
    }
    return gguf_writer_write_header(w, e);
}

// Converts every tensor in order through two chunk buffers of about CHUNK_ELEMS values,
// reporting progress in input bytes after each one.
static int write_tensors(struct gguf_writer *w, const struct order *ord, size_t n, int64_t max_row,
                         uint64_t total, quantize_progress_fn progress, void *ctx, struct err *e)
{
    int64_t chunk_rows = CHUNK_ELEMS / max_row;
    if (chunk_rows < 1)
        chunk_rows = 1;
    size_t buf_elems = (size_t)(chunk_rows * max_row);
    float *f32 = malloc(buf_elems * sizeof(float));
    void *out = malloc(buf_elems * sizeof(float));  // no type is wider than F32
    int rc = 0;
    if (!f32 || !out) {
        rc = err_set(e, ERR_NOMEM, "out of memory for quantization buffers");
        goto out;
    }
    uint64_t done = 0;
    for (size_t i = 0; i < n; i++) {
        rc = convert_tensor(w, &ord[i], f32, out, chunk_rows, e);
        if (rc < 0)
            goto out;
        done += ord[i].t->n_bytes;
        if (progress)
            progress(ctx, done, total);
    }
out:
    free(f32);
    free(out);
    return rc;
}

int quantize_model(const char *in_path, const char *out_path, int32_t ftype,
                   quantize_progress_fn progress, void *ctx, struct err *e)
{
    if (quantize_mix_default_type(ftype) < 0)
        return err_set(e, ERR_UNSUPPORTED, "unsupported quantization type %d", ftype);
    struct gguf *g = NULL;
    int rc = gguf_open(&g, in_path, e);
    if (rc < 0)
        return rc;
    size_t n = gguf_tensor_count(g);
    struct order *ord = xcalloc(n ? n : 1, sizeof(*ord));
    struct gguf_writer *w = NULL;

    char arch_buf[64];
    struct quantize_mix_model mm = mix_model(g, arch_buf, sizeof(arch_buf));
    int64_t max_row;
    uint64_t total = plan_tensors(g, ftype, &mm, ord, n, &max_row);

    rc = gguf_writer_open(&w, out_path, e);
    if (rc < 0)
        goto out;
    if ((rc = write_header(w, g, ftype, ord, n, e)) < 0)
        goto out;
    if ((rc = write_tensors(w, ord, n, max_row, total, progress, ctx, e)) < 0)
        goto out;
    rc = gguf_writer_close(w, e);
    w = NULL;
out:
    if (w)
        gguf_writer_abort(w);
    free(ord);
    gguf_close(g);
    return rc;
}

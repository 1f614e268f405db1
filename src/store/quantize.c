// Quantization of a GGUF model layer into a new blob (modelfile.md §4.4):
// every tensor gets the type the llama.cpp mix chooses for it
// (engine/quant's quant_mix_tensor_type), is converted row block by row
// block through the reference quantizers, and streamed through the GGUF
// writer into a temporary file in blobs/. The result is re-opened and
// validated ("verifying conversion"), hashed, and renamed to its digest.
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"

#define QUANT_CHUNK_ELEMS ((int64_t)1 << 20)  // floats converted per step (4 MiB)
#define QUANT_VERSION 2                       // general.quantization_version of llama.cpp

static void report(const struct store_create_opts *o, const char *status, uint64_t total,
                   uint64_t done)
{
    if (!o || !o->progress)
        return;
    struct store_progress p = {.status = status, .digest = "0000000000000000000", .total = total,
                               .completed = done};
    o->progress(o->progress_ctx, &p);
}

static void mix_model(const struct gguf *g, struct quant_mix_model *mm, char *arch, size_t n)
{
    struct str a = gguf_architecture(g);
    snprintf(arch, n, "%.*s", (int)a.len, a.ptr);
    mm->arch = arch;
    uint32_t v = 0, heads = 0, heads_kv = 0;
    mm->n_layers = gguf_get_arch_u32(g, "block_count", &v) ? (int)v : 0;
    gguf_get_arch_u32(g, "attention.head_count", &heads);
    gguf_get_arch_u32(g, "attention.head_count_kv", &heads_kv);
    mm->n_gqa = heads && heads_kv ? (int)(heads / heads_kv) : 1;
    if (mm->n_gqa < 1)
        mm->n_gqa = 1;
    mm->tied_embeddings = gguf_tensor_find(g, "output.weight") == NULL;
}

// Converts one tensor's data from src_type to dst_type and writes it.
static int convert_tensor(struct gguf_writer *w, const struct gguf_tensor *t, uint32_t dst_type,
                          float *tmp, void *out, struct err *e)
{
    const struct quant_traits *src = quant_traits_get(t->type);
    const struct quant_traits *dst = quant_traits_get(dst_type);
    if (!src || !src->to_float)
        return err_set(e, ERR_UNSUPPORTED, "tensor %.*s: cannot read type %s", (int)t->name.len,
                       t->name.ptr, gguf_type_name(t->type) ? gguf_type_name(t->type) : "?");
    if (!dst || (!dst->from_float_ref && dst_type != GGUF_TYPE_F32))
        return err_set(e, ERR_UNSUPPORTED, "cannot quantize to %s",
                       gguf_type_name(dst_type) ? gguf_type_name(dst_type) : "?");
    int64_t ne0 = t->ne[0];
    int64_t rows = (int64_t)(gguf_tensor_n_elements(t) / (uint64_t)ne0);
    int64_t rows_per_chunk = QUANT_CHUNK_ELEMS / ne0 > 0 ? QUANT_CHUNK_ELEMS / ne0 : 1;
    size_t src_row = quant_row_size(t->type, ne0), dst_row = quant_row_size(dst_type, ne0);
    if (!src_row || !dst_row)
        return err_set(e, ERR_UNSUPPORTED, "tensor %.*s: row of %lld does not fit the block size",
                       (int)t->name.len, t->name.ptr, (long long)ne0);
    const uint8_t *p = t->data;
    for (int64_t r = 0; r < rows; r += rows_per_chunk) {
        int64_t nr = rows - r < rows_per_chunk ? rows - r : rows_per_chunk;
        src->to_float(p + (size_t)r * src_row, tmp, nr * ne0);
        const void *data = tmp;
        if (dst_type != GGUF_TYPE_F32) {
            dst->from_float_ref(tmp, out, nr * ne0);
            data = out;
        }
        int rc = gguf_writer_write_data(w, data, (size_t)nr * dst_row, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int store_quantize_blob(struct store *s, const char *src_path, const char *target_label,
                        const char *status, const struct store_create_opts *o,
                        char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                        struct err *e)
{
    int32_t ftype = gguf_file_type_from_name(target_label);
    if (ftype < 0 || quant_mix_default_type(ftype) < 0)
        return err_set(e, ERR_UNSUPPORTED, "cannot produce %s", target_label);
    struct gguf *g;
    int rc = gguf_open(&g, src_path, e);
    if (rc < 0)
        return rc;
    char arch[64], tmp_path[4096];
    struct quant_mix_model mm;
    mix_model(g, &mm, arch, sizeof(arch));
    struct gguf_writer *w = NULL;
    float *tmp = NULL;
    void *out = NULL;
    uint32_t *types = NULL;
    bool closed = false;

    snprintf(tmp_path, sizeof(tmp_path), "%s/sha256-quantize-XXXXXX", s->blobs_dir);
    int fd = mkstemp(tmp_path);
    if (fd < 0) {
        rc = err_set(e, ERR_IO, "create temporary file: %s", strerror(errno));
        goto out;
    }
    close(fd);
    rc = gguf_writer_open(&w, tmp_path, e);
    if (rc < 0) {
        unlink(tmp_path);
        goto out;
    }
    bool have_ft = false, have_qv = false;
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        if (str_eq_cstr(kv->key, "general.file_type")) {
            gguf_writer_kv_u32(w, "general.file_type", (uint32_t)ftype);
            have_ft = true;
        } else if (str_eq_cstr(kv->key, "general.quantization_version")) {
            gguf_writer_kv_u32(w, "general.quantization_version", QUANT_VERSION);
            have_qv = true;
        } else {
            gguf_writer_kv_copy(w, kv);
        }
    }
    if (!have_qv)
        gguf_writer_kv_u32(w, "general.quantization_version", QUANT_VERSION);
    if (!have_ft)
        gguf_writer_kv_u32(w, "general.file_type", (uint32_t)ftype);

    size_t nt = gguf_tensor_count(g);
    types = xcalloc(nt ? nt : 1, sizeof(*types));
    for (size_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char name[GGUF_MAX_NAME_LEN + 1];
        snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
        int type = quant_mix_tensor_type(ftype, name, t->type, t->n_dims, t->ne[0], &mm);
        if (type < 0) {
            rc = err_set(e, ERR_UNSUPPORTED, "tensor %s: no type in mix %s", name, target_label);
            goto out;
        }
        types[i] = (uint32_t)type;
        gguf_writer_add_tensor(w, name, types[i], t->n_dims, t->ne);
    }
    rc = gguf_writer_write_header(w, e);
    if (rc < 0)
        goto out;

    tmp = malloc((size_t)QUANT_CHUNK_ELEMS * sizeof(float) + 4096 * sizeof(float));
    out = malloc((size_t)QUANT_CHUNK_ELEMS * sizeof(float) + 4096 * sizeof(float));
    if (!tmp || !out) {
        rc = err_set(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    uint64_t total = gguf_file_size(g), done = gguf_data_offset(g), written = 0;
    report(o, status, total, 0);
    for (size_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (o && o->cancel && *o->cancel) {
            rc = err_set(e, ERR_CANCELLED, "create cancelled");
            goto out;
        }
        if (types[i] == t->type) {
            rc = gguf_writer_write_data(w, t->data, t->n_bytes, e);
        } else if (t->ne[0] > QUANT_CHUNK_ELEMS) {
            // A row longer than the chunk: one row at a time.
            float *big = malloc((size_t)t->ne[0] * sizeof(float));
            void *bout = malloc((size_t)t->ne[0] * sizeof(float));
            rc = big && bout ? 0 : err_set(e, ERR_NOMEM, "out of memory");
            if (rc == 0)
                rc = convert_tensor(w, t, types[i], big, bout, e);
            free(big);
            free(bout);
        } else {
            rc = convert_tensor(w, t, types[i], tmp, out, e);
        }
        if (rc < 0)
            goto out;
        written += quant_row_size(types[i], t->ne[0]) * (gguf_tensor_n_elements(t) / (uint64_t)t->ne[0]);
        if (o && o->fail_after_bytes && written >= o->fail_after_bytes) {
            rc = err_set(e, ERR_IO, "write %s: no space left on device (injected)", tmp_path);
            goto out;
        }
        done += t->n_bytes;
        report(o, status, total, done > total ? total : done);
    }
    rc = gguf_writer_close(w, e);
    w = NULL;
    closed = true;
    if (rc < 0)
        goto out;

    if (o && o->progress) {
        struct store_progress p = {.status = "verifying conversion"};
        o->progress(o->progress_ctx, &p);
    }
    struct gguf *check;
    struct err ce = {0};
    if (gguf_open(&check, tmp_path, &ce) < 0) {
        rc = err_set(e, ERR_INTERNAL, "quantized model does not verify: %s", ce.msg);
        goto out;
    }
    bool same = gguf_tensor_count(check) == nt;
    gguf_close(check);
    if (!same) {
        rc = err_set(e, ERR_INTERNAL, "quantized model does not verify: tensor count");
        goto out;
    }
    char hex[DIGEST_HEX_LEN + 1], final_path[4096];
    uint64_t size;
    rc = sha256_file(tmp_path, hex, &size, e);
    if (rc < 0)
        goto out;
    snprintf(final_path, sizeof(final_path), "%s/sha256-%s", s->blobs_dir, hex);
    *existed = fs_exists(final_path);
    if (*existed) {
        unlink(tmp_path);
    } else {
        if (chmod(tmp_path, 0644) < 0 || rename(tmp_path, final_path) < 0) {
            rc = err_set(e, ERR_IO, "rename quantized blob: %s", strerror(errno));
            goto out;
        }
        fs_fsync_dir(s->blobs_dir, NULL);
    }
    digest_format(hex, digest_out);
    *size_out = (int64_t)size;
out:
    if (w)
        gguf_writer_abort(w);  // unlinks the temporary file
    else if (rc < 0 && closed)
        unlink(tmp_path);
    free(tmp);
    free(out);
    free(types);
    gguf_close(g);
    return rc;
}

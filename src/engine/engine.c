// Tensor views over GGUF data, the op wrappers that route to a backend, and
// the scalar math (activations, RoPE angles) every backend agrees on.
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/internal.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

bool engine_type_supported(uint32_t type)
{
    const struct quant_traits *qt = quant_traits_get(type);
    return qt && qt->to_float && kernels_get(type) != NULL;
}

bool engine_tensor_interleavable(const struct engine_tensor *t)
{
    const struct kernels_type *kt = kernels_get(t->type);
    return kt && kt->gemm_x8 && !t->interleave && t->ne[1] % 8 == 0 && t->ne[1] > 0;
}

void *engine_alloc_pages(size_t n)
{
    const size_t huge = (size_t)2 << 20, align = 64;
    void *p = NULL;
    if (posix_memalign(&p, n >= huge ? huge : align, (n + align - 1) / align * align) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (n >= huge)
        madvise(p, n & ~(huge - 1), MADV_HUGEPAGE);
#endif
    return p;
}

int engine_tensor_interleave(struct engine_tensor *t, bool file_mapped, void **owned, struct err *e)
{
    *owned = NULL;
    if (!engine_tensor_interleavable(t))
        return 0;
    size_t bytes = t->row_bytes * (size_t)t->ne[1];
    void *buf = engine_alloc_pages(bytes);
    if (!buf)
        return err_set(e, ERR_NOMEM, "allocate %zu bytes for interleaved weights", bytes);
    if (!kernels_interleave_x8(t->type, buf, t->data, t->ne[1], t->ne[0])) {
        free(buf);
        return 0;
    }
    // The mapped rows are not read again: give their pages back (they stay
    // in the page cache; a later touch would fault them in again). The page
    // cache may hold the file in 2 MiB folios, and a touch of a small tensor
    // beside these rows (a norm) would map its whole folio again, rows
    // included: marking the range no-huge-page first splits the mapping
    // there, so such a touch maps only small pages.
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)t->data;
    uintptr_t a = (lo + page - 1) & ~(page - 1), b = (lo + bytes) & ~(page - 1);
    if (file_mapped && b > a) {
#ifdef MADV_NOHUGEPAGE
        madvise((void *)a, b - a, MADV_NOHUGEPAGE);
#endif
        madvise((void *)a, b - a, MADV_DONTNEED);
    }
    t->data = buf;
    t->interleave = 8;
    *owned = buf;
    return 1;
}

int engine_tensor_from_gguf(struct engine_tensor *t, const struct gguf_tensor *gt, struct err *e)
{
    const struct quant_traits *qt = quant_traits_get(gt->type);
    const char *tn = gguf_type_name(gt->type);
    if (!qt || !qt->to_float)
        return err_set(e, ERR_UNSUPPORTED, "tensor %.*s: unsupported tensor type %s",
                       (int)gt->name.len, gt->name.ptr, tn ? tn : "unknown");
    int64_t rows = 1;
    for (uint32_t d = 1; d < GGUF_MAX_DIMS; d++) {
        if (!i64_mul(&rows, rows, gt->ne[d]))
            return err_set(e, ERR_FORMAT, "tensor %.*s: too many rows", (int)gt->name.len,
                           gt->name.ptr);
    }
    size_t row_bytes = quant_row_size(gt->type, gt->ne[0]);
    if (row_bytes == 0)
        return err_set(e, ERR_UNSUPPORTED,
                       "tensor %.*s: row of %lld elements does not fit %s blocks",
                       (int)gt->name.len, gt->name.ptr, (long long)gt->ne[0], tn ? tn : "?");
    size_t total;
    if (!size_mul(&total, row_bytes, (size_t)rows) || total > gt->n_bytes)
        return err_set(e, ERR_FORMAT, "tensor %.*s: size does not match its shape",
                       (int)gt->name.len, gt->name.ptr);
    if (!gt->data)
        return err_set(e, ERR_INVALID, "tensor %.*s: no data", (int)gt->name.len, gt->name.ptr);
    t->name = NULL;
    t->interleave = 0;
    t->lora = NULL;
    t->type = gt->type;
    t->ne[0] = gt->ne[0];
    t->ne[1] = rows;
    t->row_bytes = row_bytes;
    t->data = gt->data;
    return 0;
}

size_t engine_kv_row_bytes(uint32_t kv_type, int64_t kv_dim)
{
    switch (kv_type) {
    case GGUF_TYPE_F32:
    case GGUF_TYPE_F16:
    case GGUF_TYPE_Q8_0:
    case GGUF_TYPE_Q4_0:
        return quant_row_size(kv_type, kv_dim);
    default:
        return 0;
    }
}

// ---------------------------------------------------------------------------
// Scalar math.

float engine_silu(float x)
{
    return kernels_silu(x);
}

float engine_gelu(float x)
{
    return kernels_gelu(x);
}

float engine_softcap_f32(float x, float cap)
{
    return cap * tanhf(x / cap);
}

// YaRN ramp over pair index i (1 inside the extrapolated band).
static float yarn_ramp(float low, float high, int i)
{
    float y = ((float)i - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

static float yarn_corr_dim(int n_rot, int n_ctx_orig, float beta, float base)
{
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * (float)M_PI)) /
           (2.0f * logf(base));
}

// Angles as the reference computes them: theta runs as a product of f32
// powers, divided by the frequency factor, then (YaRN) mixed.
// Which of the four position streams rotary pair i turns by (M-RoPE).
static int mrope_stream(const struct engine_rope *rp, int i)
{
    const int *s = rp->sections;
    int sector = i % (s[0] + s[1] + s[2] + s[3]);
    if (rp->imrope) {
        for (int k = 0; k < 3; k++)
            if (sector % 3 == k && sector < 3 * s[k])
                return k;
        return 3;
    }
    return sector < s[0] ? 0 : sector < s[0] + s[1] ? 1 : sector < s[0] + s[1] + s[2] ? 2 : 3;
}

bool engine_rope_is_multi(const struct engine_rope *rp)
{
    return rp->sections[0] + rp->sections[1] + rp->sections[2] + rp->sections[3] > 0;
}

void engine_rope_cache_multi(const struct engine_rope *rp, const float pos[4], float *cos_out,
                             float *sin_out)
{
    const float theta_scale = powf(rp->freq_base, -2.0f / (float)rp->n_rot);
    float low = 0, high = 0;
    float mscale = rp->attn_factor != 0.0f ? rp->attn_factor : 1.0f;
    if (rp->ext_factor != 0.0f) {
        low = fmaxf(0.0f,
                    floorf(yarn_corr_dim(rp->n_rot, rp->n_ctx_orig, rp->beta_fast, rp->freq_base)));
        high = fminf((float)(rp->n_rot - 1),
                     ceilf(yarn_corr_dim(rp->n_rot, rp->n_ctx_orig, rp->beta_slow, rp->freq_base)));
        mscale *= 1.0f + 0.1f * logf(1.0f / rp->freq_scale);
    }
    // Each stream's angle advances by theta_scale per pair, as ggml's caches.
    float theta[4] = {pos[0], pos[1], pos[2], pos[3]};
    bool multi = engine_rope_is_multi(rp);
    for (int i = 0; i < rp->n_rot / 2; i++) {
        float ff = rp->freq_factors ? rp->freq_factors[i] : 1.0f;
        float extrap = theta[multi ? mrope_stream(rp, i) : 0] / ff;
        float t = rp->freq_scale * extrap;
        if (rp->ext_factor != 0.0f) {
            float mix = yarn_ramp(low, high, i) * rp->ext_factor;
            t = t * (1.0f - mix) + extrap * mix;
        }
        cos_out[i] = cosf(t) * mscale;
        sin_out[i] = sinf(t) * mscale;
        for (int k = 0; k < 4; k++)
            theta[k] *= theta_scale;
    }
}

void engine_rope_cache(const struct engine_rope *rp, float pos, float *cos_out, float *sin_out)
{
    const float p[4] = {pos, pos, pos, pos};
    engine_rope_cache_multi(rp, p, cos_out, sin_out);
}

// ---------------------------------------------------------------------------
// Wrappers.

void engine_backend_free(struct engine_backend *be)
{
    if (be)
        be->ops->destroy(be);
}

void *engine_buf_alloc(struct engine_backend *be, size_t n_bytes)
{
    return be->ops->buf_alloc(be, n_bytes);
}

void engine_buf_free(struct engine_backend *be, void *buf)
{
    if (buf)
        be->ops->buf_free(be, buf);
}

void engine_buf_read(struct engine_backend *be, void *host, const void *buf, size_t n_bytes)
{
    be->ops->buf_read(be, host, buf, n_bytes);
}

void engine_buf_write(struct engine_backend *be, void *buf, const void *host, size_t n_bytes)
{
    be->ops->buf_write(be, buf, host, n_bytes);
}

int engine_reserve(struct engine_backend *be, int64_t max_rows, int64_t max_row_len, int64_t max_kv,
                   struct err *e)
{
    return be->ops->reserve(be, max_rows, max_row_len, max_kv, e);
}

void engine_get_rows(struct engine_backend *be, float *y, const struct engine_tensor *w,
                     const int32_t *ids, int64_t n_rows)
{
    be->ops->get_rows(be, y, w, ids, n_rows);
}

void engine_matmul(struct engine_backend *be, float *y, const struct engine_tensor *w,
                   const float *bias, const float *x, int64_t n_rows)
{
    struct engine_matmul_job job = {w, y, bias};
    be->ops->matmul(be, &job, 1, x, n_rows);
    if (w->lora)
        engine_lora_apply(be, &job, x, n_rows);
}

void engine_matmul_n(struct engine_backend *be, const struct engine_matmul_job *jobs, int n_jobs,
                     const float *x, int64_t n_rows)
{
    be->ops->matmul(be, jobs, n_jobs, x, n_rows);
    for (int j = 0; j < n_jobs; j++)
        if (jobs[j].w->lora)
            engine_lora_apply(be, &jobs[j], x, n_rows);
}

void engine_rmsnorm(struct engine_backend *be, float *y, const float *x, const float *w,
                    int64_t n_rows, int64_t n, float eps)
{
    be->ops->rmsnorm(be, y, x, w, n_rows, n, eps);
}

void engine_layernorm(struct engine_backend *be, float *y, const float *x, const float *w,
                      const float *b, int64_t n_rows, int64_t n, float eps)
{
    be->ops->layernorm(be, y, x, w, b, n_rows, n, eps);
}

void engine_rope(struct engine_backend *be, float *x, int64_t n_rows, int n_head, int head_dim,
                 const int32_t *pos, const struct engine_rope *rp)
{
    be->ops->rope(be, x, n_rows, n_head, head_dim, pos, rp);
}

void engine_kv_store(struct engine_backend *be, const struct engine_kv_layer *kv, uint32_t kv_type,
                     const int32_t *cells, const float *k, const float *v, int64_t n_rows,
                     int64_t kv_dim)
{
    be->ops->kv_store(be, kv, kv_type, cells, k, v, n_rows, kv_dim);
}

void engine_attention(struct engine_backend *be, float *out, const float *q, int64_t n_rows,
                      const struct engine_kv_layer *kv, const int32_t *cell0,
                      const int32_t *n_visible, const struct engine_attn *a)
{
    be->ops->attention(be, out, q, n_rows, kv, cell0, n_visible, a);
}

void engine_kv_shift(struct engine_backend *be, const struct engine_kv_layer *kv, uint32_t kv_type,
                     int64_t c0, int64_t n, int32_t delta, int n_head_kv, int head_dim,
                     const struct engine_rope *rp)
{
    be->ops->kv_shift(be, kv, kv_type, c0, n, delta, n_head_kv, head_dim, rp);
}

void engine_kv_move(struct engine_backend *be, const struct engine_kv_layer *kv, int64_t dst,
                    int64_t src, int64_t n)
{
    be->ops->kv_move(be, kv, dst, src, n);
}

void engine_softmax(struct engine_backend *be, float *x, int64_t n_rows, int64_t n, float scale)
{
    be->ops->softmax(be, x, n_rows, n, scale);
}

void engine_glu(struct engine_backend *be, float *y, const float *gate, const float *up, int64_t n,
                bool gelu)
{
    be->ops->glu(be, y, gate, up, n, gelu);
}

void engine_softcap(struct engine_backend *be, float *y, const float *x, float cap, int64_t n)
{
    be->ops->softcap(be, y, x, cap, n);
}

void engine_add(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n)
{
    be->ops->add(be, y, a, b, n);
}

void engine_mul(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n)
{
    be->ops->mul(be, y, a, b, n);
}

void engine_sigmoid_mul(struct engine_backend *be, float *y, const float *a, const float *b,
                        int64_t n)
{
    be->ops->sigmoid_mul(be, y, a, b, n);
}

void engine_scale(struct engine_backend *be, float *y, const float *x, float s, int64_t n)
{
    be->ops->scale(be, y, x, s, n);
}

void engine_relu_sqr(struct engine_backend *be, float *y, const float *x, int64_t n)
{
    be->ops->relu_sqr(be, y, x, n);
}

void engine_gather(struct engine_backend *be, float *y, const float *x, const int32_t *idx,
                   int64_t n_rows, int64_t n)
{
    be->ops->gather(be, y, x, idx, n_rows, n);
}

void engine_rows_mix(struct engine_backend *be, float *y, const float *base, const float *const *x,
                     int k, const float *c, int64_t c_stride, int64_t n_rows, int64_t n)
{
    be->ops->rows_mix(be, y, base, x, k, c, c_stride, n_rows, n);
}

void engine_rows_rescale(struct engine_backend *be, float *y, const float *x, const float *ref,
                         int64_t n_rows, int64_t n)
{
    be->ops->rows_rescale(be, y, x, ref, n_rows, n);
}

void engine_gauss_topk(struct engine_backend *be, float *y, const float *x, float std_mul,
                       int64_t n_rows, int64_t n)
{
    be->ops->gauss_topk(be, y, x, std_mul, n_rows, n);
}

void engine_moe(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                const struct engine_moe *p)
{
    be->ops->moe(be, y, x, n_rows, p);
}

int engine_moe_reserve(struct engine_backend *be, int64_t max_rows, const struct engine_moe *p,
                       struct err *e)
{
    return be->ops->moe_reserve(be, max_rows, p, e);
}

void engine_conv1d(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                   const struct engine_conv1d *p, float *state, const int32_t *slot,
                   const int32_t *pos)
{
    be->ops->conv1d(be, y, x, n_rows, p, state, slot, pos);
}

void engine_delta_net(struct engine_backend *be, float *o, const float *q, const float *k,
                      const float *v, const float *g, const float *beta, int64_t n_rows,
                      const struct engine_delta_net *p, float *state, const int32_t *slot,
                      const int32_t *pos)
{
    be->ops->delta_net(be, o, q, k, v, g, beta, n_rows, p, state, slot, pos);
}

void engine_ssm_scan(struct engine_backend *be, float *y, const float *x, const float *dt,
                     const float *B, const float *C, int64_t n_rows,
                     const struct engine_ssm_scan *p, float *state, const int32_t *slot,
                     const int32_t *pos)
{
    be->ops->ssm_scan(be, y, x, dt, B, C, n_rows, p, state, slot, pos);
}

// Scalar reference kernels: activation conversion (the same bytes as ggml's
// reference quantizers) and one dot product per weight type, written for
// clarity. The SIMD variants are tested against these, and they run where no
// SIMD variant exists. The integer arithmetic is exact; only the order of the
// float accumulation differs between variants.
#include "engine/kernels/internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Activation conversion

void kernels_from_float_q8_0_ref(const float *x, void *vy, int64_t n)
{
    struct block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = quant_f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++)
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

// Q8_1 also carries s = d * sum(qs), which folds the min of Q4_1 / Q5_1 into
// one multiply per block.
void kernels_from_float_q8_1_ref(const float *x, void *vy, int64_t n)
{
    struct block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = quant_f32_to_f16(d);
        y[i].s = quant_f32_to_f16((float)sum * d);
    }
}

// Round to nearest, ties to even, as ggml's nearest_int (valid for |f| < 2^22).
static int round_even(float f)
{
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof(i));
    return (i & 0x007FFFFF) - 0x00400000;
}

// Q8_K: the scale comes from the signed value of largest magnitude (the first
// one on ties) so that it maps to -127; bsums hold the sums of each 16 quants.
void kernels_from_float_q8_K_ref(const float *x, void *vy, int64_t n)
{
    struct block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = round_even(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

void kernels_from_float_f16_ref(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_f32_to_f16(x[i]);
}

void kernels_from_float_bf16_ref(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_f32_to_bf16(x[i]);
}

void kernels_from_float_f32_ref(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

// ---------------------------------------------------------------------------
// Float weights (accumulated in double: this is the reference)

void kernels_vec_dot_f32_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const float *w = vw, *x = vx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)w[i] * (double)x[i];
    *s = (float)sum;
}

void kernels_vec_dot_f16_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const uint16_t *w = vw, *x = vx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)quant_f16_to_f32(w[i]) * (double)quant_f16_to_f32(x[i]);
    *s = (float)sum;
}

void kernels_vec_dot_bf16_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const uint16_t *w = vw, *x = vx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)quant_bf16_to_f32(w[i]) * (double)quant_bf16_to_f32(x[i]);
    *s = (float)sum;
}

// ---------------------------------------------------------------------------
// Legacy 32-element quants x Q8_0 / Q8_1. Nibble j of a block is element j
// (low) and element j + 16 (high).

void kernels_vec_dot_q4_0_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q4_0 *w = vw;
    const struct block_q8_0 *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((w[i].qs[j] & 0x0F) - 8) * x[i].qs[j];
            sumi += ((w[i].qs[j] >> 4) - 8) * x[i].qs[j + 16];
        }
        sum += (float)sumi * (quant_f16_to_f32(w[i].d) * quant_f16_to_f32(x[i].d));
    }
    *s = sum;
}

// The scalar twins of the interleaved products: one term per (8-row block,
// activation block, row) with the arithmetic of the type's vec_dot_ref in
// the same order, so the results are identical.
typedef float (*x8_term_fn)(const void *w, const void *x, int j);

static void x8_ref(int64_t n, float *s, size_t s_stride, const void *vw, size_t w_stride,
                   const void *vx, size_t x_stride, int nr, int nc, int64_t qk, size_t wbs,
                   size_t xbs, x8_term_fn term)
{
    for (int r0 = 0; r0 < nr; r0 += 8) {
        const uint8_t *g = (const uint8_t *)vw + (size_t)r0 * w_stride;
        for (int c = 0; c < nc; c++) {
            const uint8_t *x = (const uint8_t *)vx + (size_t)c * x_stride;
            float sum[8] = {0};
            for (int64_t k = 0; k < n / qk; k++)
                for (int j = 0; j < 8; j++)
                    sum[j] += term(g + (size_t)k * wbs, x + (size_t)k * xbs, j);
            for (int j = 0; j < 8; j++)
                s[(size_t)c * s_stride + (size_t)r0 + (size_t)j] = sum[j];
        }
    }
}

static float q4_0x8_term(const void *vw, const void *vx, int j)
{
    const struct block_q4_0x8 *g = vw;
    const struct block_q8_0 *x = vx;
    int sumi = 0;
    for (int p = 0; p < 4; p++)
        for (int t = 0; t < 4; t++) {
            const uint8_t q = g->qs[32 * p + 4 * j + t];
            sumi += ((q & 0x0F) - 8) * x->qs[4 * p + t];
            sumi += ((q >> 4) - 8) * x->qs[4 * p + t + 16];
        }
    return (float)sumi * (quant_f16_to_f32(g->d[j]) * quant_f16_to_f32(x->d));
}

static float q5_0x8_term(const void *vw, const void *vx, int j)
{
    const struct block_q5_0x8 *g = vw;
    const struct block_q8_0 *x = vx;
    int sumi = 0;
    for (int i = 0; i < QK5_0 / 2; i++) {
        const int p = i / 4, t = i % 4;
        const uint8_t q = g->qs[32 * p + 4 * j + t], h = g->qh[4 * j + t];
        int q0 = (int)((q & 0x0F) | ((h >> p) & 1) << 4) - 16;
        int q1 = (int)((q >> 4) | ((h >> (4 + p)) & 1) << 4) - 16;
        sumi += q0 * x->qs[i] + q1 * x->qs[i + 16];
    }
    return (float)sumi * (quant_f16_to_f32(g->d[j]) * quant_f16_to_f32(x->d));
}

static float q8_0x8_term(const void *vw, const void *vx, int j)
{
    const struct block_q8_0x8 *g = vw;
    const struct block_q8_0 *x = vx;
    int sumi = 0;
    for (int i = 0; i < QK8_0; i++)
        sumi += g->qs[32 * (i / 4) + 4 * j + i % 4] * x->qs[i];
    return (float)sumi * (quant_f16_to_f32(g->d[j]) * quant_f16_to_f32(x->d));
}

static float q4_Kx8_term(const void *vw, const void *vx, int j)
{
    const struct block_q4_Kx8 *g = vw;
    const struct block_q8_K *x = vx;
    int isum = 0, summs = 0;
    for (int sub = 0; sub < 8; sub++) {
        uint8_t sc, m;
        kernels_q4_Kx8_scale_min(g->scl, g->sch, sub, j, &sc, &m);
        const int shift = (sub & 1) ? 4 : 0;
        int sumi = 0;
        for (int l = 0; l < 32; l++) {
            const uint8_t q = g->qs[256 * (sub / 2) + 32 * (l / 4) + 4 * j + l % 4];
            sumi += ((q >> shift) & 0x0F) * x->qs[32 * sub + l];
        }
        isum += sc * sumi;
        summs += m * (x->bsums[2 * sub] + x->bsums[2 * sub + 1]);
    }
    return (quant_f16_to_f32(g->d[j]) * x->d) * (float)isum -
           (quant_f16_to_f32(g->dmin[j]) * x->d) * (float)summs;
}

static float q6_Kx8_term(const void *vw, const void *vx, int j)
{
    const struct block_q6_Kx8 *g = vw;
    const struct block_q8_K *x = vx;
    int isum = 0;
    for (int e0 = 0; e0 < QK_K; e0 += 16) {
        int sumi = 0;
        for (int e = e0; e < e0 + 16; e++)
            sumi += (kernels_q6_Kx8_quant(g, e, j) - 32) * x->qs[e];
        isum += g->sc[8 * (e0 / 16) + j] * sumi;
    }
    return (quant_f16_to_f32(g->d[j]) * x->d) * (float)isum;
}

#define X8_REF(name, qk, wblock, xblock)                                                           \
    void kernels_gemm_##name##_ref(int64_t n, float *s, size_t s_stride, const void *vw,           \
                                   size_t w_stride, const void *vx, size_t x_stride, int nr,       \
                                   int nc)                                                         \
    {                                                                                              \
        x8_ref(n, s, s_stride, vw, w_stride, vx, x_stride, nr, nc, qk, sizeof(struct wblock),      \
               sizeof(struct xblock), name##_term);                                                \
    }
X8_REF(q4_0x8, QK4_0, block_q4_0x8, block_q8_0)
X8_REF(q5_0x8, QK5_0, block_q5_0x8, block_q8_0)
X8_REF(q8_0x8, QK8_0, block_q8_0x8, block_q8_0)
X8_REF(q4_Kx8, QK_K, block_q4_Kx8, block_q8_K)
X8_REF(q6_Kx8, QK_K, block_q6_Kx8, block_q8_K)

void kernels_vec_dot_q4_1_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q4_1 *w = vw;
    const struct block_q8_1 *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi += (w[i].qs[j] & 0x0F) * x[i].qs[j];
            sumi += (w[i].qs[j] >> 4) * x[i].qs[j + 16];
        }
        sum += (float)sumi * (quant_f16_to_f32(w[i].d) * quant_f16_to_f32(x[i].d)) +
               quant_f16_to_f32(w[i].m) * quant_f16_to_f32(x[i].s);
    }
    *s = sum;
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void kernels_vec_dot_q5_0_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q5_0 *w = vw;
    const struct block_q8_0 *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t h = load_u32(w[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (int)((w[i].qs[j] & 0x0F) | (((h >> j) & 1) << 4)) - 16;
            int q1 = (int)((w[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) - 16;
            sumi += q0 * x[i].qs[j] + q1 * x[i].qs[j + 16];
        }
        sum += (float)sumi * (quant_f16_to_f32(w[i].d) * quant_f16_to_f32(x[i].d));
    }
    *s = sum;
}

void kernels_vec_dot_q5_1_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q5_1 *w = vw;
    const struct block_q8_1 *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        uint32_t h = load_u32(w[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (int)((w[i].qs[j] & 0x0F) | (((h >> j) & 1) << 4));
            int q1 = (int)((w[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4));
            sumi += q0 * x[i].qs[j] + q1 * x[i].qs[j + 16];
        }
        sum += (float)sumi * (quant_f16_to_f32(w[i].d) * quant_f16_to_f32(x[i].d)) +
               quant_f16_to_f32(w[i].m) * quant_f16_to_f32(x[i].s);
    }
    *s = sum;
}

void kernels_vec_dot_q8_0_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q8_0 *w = vw;
    const struct block_q8_0 *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++)
            sumi += w[i].qs[j] * x[i].qs[j];
        sum += (float)sumi * (quant_f16_to_f32(w[i].d) * quant_f16_to_f32(x[i].d));
    }
    *s = sum;
}

// ---------------------------------------------------------------------------
// K-quants x Q8_K. Integer sums per super-block, then one float multiply by
// d * x.d; the mins of Q2_K / Q4_K / Q5_K use the activation bsums.

void kernels_vec_dot_q2_K_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q2_K *w = vw;
    const struct block_q8_K *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int summs = 0;
        for (int j = 0; j < 16; j++)
            summs += (w[i].scales[j] >> 4) * x[i].bsums[j];
        int isum = 0;
        for (int e0 = 0; e0 < QK_K; e0 += 16) {  // 16-element sub-blocks
            int half = e0 / 128, j = (e0 % 128) / 32, l0 = e0 % 32;
            int sumi = 0;
            for (int l = l0; l < l0 + 16; l++)
                sumi += ((w[i].qs[32 * half + l] >> (2 * j)) & 3) * x[i].qs[e0 + l - l0];
            isum += (w[i].scales[e0 / 16] & 0x0F) * sumi;
        }
        const float dall = x[i].d * quant_f16_to_f32(w[i].d);
        const float dmin = x[i].d * quant_f16_to_f32(w[i].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    *s = sum;
}

void kernels_vec_dot_q3_K_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q3_K *w = vw;
    const struct block_q8_K *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        kernels_unpack_scales_q3_K(w[i].scales, sc);
        int isum = 0;
        for (int e0 = 0; e0 < QK_K; e0 += 16) {
            int half = e0 / 128, j = (e0 % 128) / 32, l0 = e0 % 32;
            int sumi = 0;
            for (int l = l0; l < l0 + 16; l++) {
                int q2 = (w[i].qs[32 * half + l] >> (2 * j)) & 3;
                int hbit = (w[i].hmask[l] >> (4 * half + j)) & 1;
                sumi += (q2 - (hbit ? 0 : 4)) * x[i].qs[e0 + l - l0];
            }
            isum += sc[e0 / 16] * sumi;
        }
        sum += (quant_f16_to_f32(w[i].d) * x[i].d) * (float)isum;
    }
    *s = sum;
}

void kernels_vec_dot_q4_K_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q4_K *w = vw;
    const struct block_q8_K *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], m[8];
        kernels_unpack_scale_min_k4(w[i].scales, sc, m);
        int isum = 0, summs = 0;
        for (int sub = 0; sub < 8; sub++) {
            const uint8_t *q = w[i].qs + 32 * (sub / 2);
            const int shift = (sub & 1) ? 4 : 0;
            int sumi = 0;
            for (int l = 0; l < 32; l++)
                sumi += ((q[l] >> shift) & 0x0F) * x[i].qs[32 * sub + l];
            isum += sc[sub] * sumi;
            summs += m[sub] * (x[i].bsums[2 * sub] + x[i].bsums[2 * sub + 1]);
        }
        sum += (quant_f16_to_f32(w[i].d) * x[i].d) * (float)isum -
               (quant_f16_to_f32(w[i].dmin) * x[i].d) * (float)summs;
    }
    *s = sum;
}

void kernels_vec_dot_q5_K_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q5_K *w = vw;
    const struct block_q8_K *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], m[8];
        kernels_unpack_scale_min_k4(w[i].scales, sc, m);
        int isum = 0, summs = 0;
        for (int sub = 0; sub < 8; sub++) {
            const uint8_t *q = w[i].qs + 32 * (sub / 2);
            const int shift = (sub & 1) ? 4 : 0;
            int sumi = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> shift) & 0x0F) | (((w[i].qh[l] >> sub) & 1) << 4);
                sumi += v * x[i].qs[32 * sub + l];
            }
            isum += sc[sub] * sumi;
            summs += m[sub] * (x[i].bsums[2 * sub] + x[i].bsums[2 * sub + 1]);
        }
        sum += (quant_f16_to_f32(w[i].d) * x[i].d) * (float)isum -
               (quant_f16_to_f32(w[i].dmin) * x[i].d) * (float)summs;
    }
    *s = sum;
}

void kernels_vec_dot_q6_K_ref(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q6_K *w = vw;
    const struct block_q8_K *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int e0 = 0; e0 < QK_K; e0 += 16) {
            int half = e0 / 128, j = (e0 % 128) / 32, l0 = e0 % 32;
            int sumi = 0;
            for (int l = l0; l < l0 + 16; l++) {
                uint8_t lb = w[i].ql[64 * half + l + ((j & 1) ? 32 : 0)];
                int low4 = j < 2 ? (lb & 0x0F) : (lb >> 4);
                int high2 = (w[i].qh[32 * half + l] >> (2 * j)) & 3;
                sumi += ((low4 | (high2 << 4)) - 32) * x[i].qs[e0 + l - l0];
            }
            isum += w[i].scales[e0 / 16] * sumi;
        }
        sum += (quant_f16_to_f32(w[i].d) * x[i].d) * (float)isum;
    }
    *s = sum;
}

// ---------------------------------------------------------------------------
// Element-wise helpers

void kernels_f16_to_f32_row_ref(const uint16_t *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_f16_to_f32(x[i]);
}

void kernels_f32_to_f16_row_ref(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_f32_to_f16(x[i]);
}

float kernels_dot_f32_ref(const float *a, const float *b, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)a[i] * (double)b[i];
    return (float)sum;
}

void kernels_axpy_f32_ref(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

float kernels_ssm_step_ref(float *s, const float *B, const float *C, float dA, float dx, int64_t n)
{
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        s[i] = s[i] * dA + dx * B[i];
        acc += s[i] * C[i];
    }
    return acc;
}

float kernels_dot_f16_f32_ref(const uint16_t *a, const float *b, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)quant_f16_to_f32(a[i]) * (double)b[i];
    return (float)sum;
}

void kernels_axpy_f16_ref(float *y, float a, const uint16_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * quant_f16_to_f32(x[i]);
}

static float gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    const float c = 0.79788456080286535587989211986876f;  // sqrt(2/pi)
    for (uint32_t h = 0; h < (1u << 16); h++) {
        float x = quant_f16_to_f32((uint16_t)h);
        float g = 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
        gelu_table[h] = quant_f16_to_f32(quant_f32_to_f16(g));
    }
}

const float *kernels_gelu_table(void)
{
    pthread_once(&gelu_once, gelu_table_init);
    return gelu_table;
}

float kernels_gelu(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    return kernels_gelu_table()[quant_f32_to_f16(x)];
}

float kernels_silu(float x)
{
    return x / (1.0f + expf(-x));
}

void kernels_silu_glu_ref(float *y, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = kernels_silu(gate[i]) * up[i];
}

void kernels_gelu_glu_ref(float *y, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = kernels_gelu(gate[i]) * up[i];
}

// ---------------------------------------------------------------------------

// The scalar table, written by the type table (gguf/types.def): every type
// the engine runs gets its reference kernel kernels_vec_dot_<s>_ref (here
// for FLOAT and BLOCK types, iquants.c for NL and IQ ones) and the
// activation conversion of its family's activation type. No gemm and no
// gemm_x8: interleaving pays only with SIMD kernels (an ISA without one
// keeps the weights as mapped); kernels_gemm_*x8_ref are the tests'
// references.
#define KFROM_F32  kernels_from_float_f32_ref
#define KFROM_F16  kernels_from_float_f16_ref
#define KFROM_BF16 kernels_from_float_bf16_ref
#define KFROM_Q8_0 kernels_from_float_q8_0_ref
#define KFROM_Q8_1 kernels_from_float_q8_1_ref
#define KFROM_Q8_K kernels_from_float_q8_K_ref
#define KSCALAR_ROW(s, act)                                                                        \
    .vec_dot_type = GGUF_TYPE_##act, .from_float = KFROM_##act, .vec_dot = kernels_vec_dot_##s##_ref
#define KSCALAR_NONE
#define KSCALAR_ACT(s)
#define KSCALAR_FLOAT(s, act) KSCALAR_ROW(s, act)
#define KSCALAR_BLOCK(s, act) KSCALAR_ROW(s, act)
#define KSCALAR_NL(s)         KSCALAR_ROW(s, Q8_0)
#define KSCALAR_IQ(s, scale)  KSCALAR_ROW(s, Q8_K)

const struct kernels_type kernels_scalar_table[KERNELS_NTYPES] = {
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) [id] = {.gemm = NULL, KSCALAR_##fam},
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
};

const struct kernels_ops kernels_scalar_ops = {
    .f16_to_f32_row = kernels_f16_to_f32_row_ref,
    .f32_to_f16_row = kernels_f32_to_f16_row_ref,
    .dot_f32 = kernels_dot_f32_ref,
    .axpy_f32 = kernels_axpy_f32_ref,
    .dot_f16_f32 = kernels_dot_f16_f32_ref,
    .axpy_f16 = kernels_axpy_f16_ref,
    .silu_glu = kernels_silu_glu_ref,
    .gelu_glu = kernels_gelu_glu_ref,
    .ssm_step = kernels_ssm_step_ref,
};

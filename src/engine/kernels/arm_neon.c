// arm64 NEON kernels (NEON is part of the arm64 base, so no run-time check).
// The integer dot products use vdotq_s32 when the compiler targets the
// dot-product extension (__ARM_FEATURE_DOTPROD), else widening multiplies
// with pairwise accumulation, which every arm64 core has.
//
// Not run on the development machine (x86-64): these are type-checked with
// clang --target=aarch64-linux-gnu and otherwise untested here; the unit
// test compares them with the scalar twins when run on arm64.
#if defined(__aarch64__)

#include <arm_neon.h>

#include "engine/kernels/internal.h"

// acc + sum over groups of 4 of a[i] * b[i] (signed bytes)
static inline int32x4_t dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b)
{
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    int16x8_t p1 = vmull_high_s8(a, b);
    return vpadalq_s16(vpadalq_s16(acc, p0), p1);
#endif
}

static inline float f16(uint16_t h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static inline float32x4_t load_f16x4(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

// ---------------------------------------------------------------------------

static void vec_dot_f32_neon(int64_t n, float *s, const void *vw, const void *vx)
{
    const float *w = vw, *x = vx;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(w + i), vld1q_f32(x + i));
        a1 = vfmaq_f32(a1, vld1q_f32(w + i + 4), vld1q_f32(x + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(w + i + 8), vld1q_f32(x + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(w + i + 12), vld1q_f32(x + i + 12));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++)
        sum += w[i] * x[i];
    *s = sum;
}

static void vec_dot_f16_neon(int64_t n, float *s, const void *vw, const void *vx)
{
    const uint16_t *w = vw, *x = vx;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load_f16x4(w + i), load_f16x4(x + i));
        a1 = vfmaq_f32(a1, load_f16x4(w + i + 4), load_f16x4(x + i + 4));
        a2 = vfmaq_f32(a2, load_f16x4(w + i + 8), load_f16x4(x + i + 8));
        a3 = vfmaq_f32(a3, load_f16x4(w + i + 12), load_f16x4(x + i + 12));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++)
        sum += f16(w[i]) * f16(x[i]);
    *s = sum;
}

static void vec_dot_q8_0_neon(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q8_0 *w = vw;
    const struct block_q8_0 *x = vx;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int32x4_t d = dot_s8(vdupq_n_s32(0), vld1q_s8(w[i].qs), vld1q_s8(x[i].qs));
        d = dot_s8(d, vld1q_s8(w[i].qs + 16), vld1q_s8(x[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(d), f16(w[i].d) * f16(x[i].d));
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q4_0_neon(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q4_0 *w = vw;
    const struct block_q8_0 *x = vx;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / QK4_0; i++) {
        uint8x16_t q = vld1q_u8(w[i].qs);
        int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
        int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        int32x4_t d = dot_s8(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
        d = dot_s8(d, hi, vld1q_s8(x[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(d), f16(w[i].d) * f16(x[i].d));
    }
    *s = vaddvq_f32(acc);
}

// Q4_K: unsigned nibbles against Q8_K, mins through the bsums.
static void vec_dot_q4_K_neon(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q4_K *w = vw;
    const struct block_q8_K *x = vx;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], m[8];
        kernels_unpack_scale_min_k4(w[i].scales, sc, m);
        int32_t summs = 0;
        for (int j = 0; j < 8; j++)
            summs += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
        int32_t isum = 0;
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = w[i].qs + 32 * c;
            const int8_t *a = x[i].qs + 64 * c;
            uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16);
            int32x4_t dlo =
                dot_s8(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q0, m4)), vld1q_s8(a));
            dlo = dot_s8(dlo, vreinterpretq_s8_u8(vandq_u8(q1, m4)), vld1q_s8(a + 16));
            int32x4_t dhi =
                dot_s8(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(a + 32));
            dhi = dot_s8(dhi, vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), vld1q_s8(a + 48));
            isum += vaddvq_s32(dlo) * sc[2 * c] + vaddvq_s32(dhi) * sc[2 * c + 1];
        }
        sum += (f16(w[i].d) * x[i].d) * (float)isum - (f16(w[i].dmin) * x[i].d) * (float)summs;
    }
    *s = sum;
}

// Q6_K: (low4 | high2 << 4) - 32 built as signed bytes, 16-element scales.
static void vec_dot_q6_K_neon(int64_t n, float *s, const void *vw, const void *vx)
{
    const struct block_q6_K *w = vw;
    const struct block_q8_K *x = vx;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t isum = 0;
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = w[i].ql + 64 * half, *qh = w[i].qh + 32 * half;
            for (int j = 0; j < 4; j++) {
                for (int h16 = 0; h16 < 2; h16++) {  // the two 16-element sub-blocks
                    uint8x16_t lb = vld1q_u8(ql + ((j & 1) ? 32 : 0) + 16 * h16);
                    uint8x16_t low4 = j < 2 ? vandq_u8(lb, m4) : vshrq_n_u8(lb, 4);
                    uint8x16_t hb = vld1q_u8(qh + 16 * h16);
                    uint8x16_t high2 = vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(-2 * j))), m3);
                    int8x16_t q =
                        vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low4, vshlq_n_u8(high2, 4))), off);
                    int32x4_t d = dot_s8(vdupq_n_s32(0), q,
                                         vld1q_s8(x[i].qs + 128 * half + 32 * j + 16 * h16));
                    isum += vaddvq_s32(d) * w[i].scales[8 * half + 2 * j + h16];
                }
            }
        }
        sum += (f16(w[i].d) * x[i].d) * (float)isum;
    }
    *s = sum;
}

// ---------------------------------------------------------------------------
// Element-wise helpers

static void f16_to_f32_row_neon(const uint16_t *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, load_f16x4(x + i));
    for (; i < n; i++)
        y[i] = f16(x[i]);
}

static void f32_to_f16_row_neon(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++)
        y[i] = quant_f32_to_f16(x[i]);
}

static float dot_f32_neon(const float *a, const float *b, int64_t n)
{
    float s;
    vec_dot_f32_neon(n, &s, a, b);
    return s;
}

static void axpy_f32_neon(float *y, float a, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static float dot_f16_f32_neon(const uint16_t *a, const float *b, int64_t n)
{
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = vfmaq_f32(a0, load_f16x4(a + i), vld1q_f32(b + i));
        a1 = vfmaq_f32(a1, load_f16x4(a + i + 4), vld1q_f32(b + i + 4));
    }
    float sum = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < n; i++)
        sum += f16(a[i]) * b[i];
    return sum;
}

static void axpy_f16_neon(float *y, float a, const uint16_t *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), load_f16x4(x + i), a));
    for (; i < n; i++)
        y[i] += a * f16(x[i]);
}

// ---------------------------------------------------------------------------

const struct kernels_type kernels_neon_table[KERNELS_NTYPES] = {
    [GGUF_TYPE_F32] = {.vec_dot = vec_dot_f32_neon},
    [GGUF_TYPE_F16] = {.vec_dot = vec_dot_f16_neon},
    [GGUF_TYPE_Q4_0] = {.vec_dot = vec_dot_q4_0_neon},
    [GGUF_TYPE_Q8_0] = {.vec_dot = vec_dot_q8_0_neon},
    [GGUF_TYPE_Q4_K] = {.vec_dot = vec_dot_q4_K_neon},
    [GGUF_TYPE_Q6_K] = {.vec_dot = vec_dot_q6_K_neon},
};

const struct kernels_ops kernels_neon_ops = {
    .f16_to_f32_row = f16_to_f32_row_neon,
    .f32_to_f16_row = f32_to_f16_row_neon,
    .dot_f32 = dot_f32_neon,
    .axpy_f32 = axpy_f32_neon,
    .dot_f16_f32 = dot_f16_f32_neon,
    .axpy_f16 = axpy_f16_neon,
    .ssm_step = kernels_ssm_step_ref,  // (no NEON version yet)
};

#endif  // __aarch64__

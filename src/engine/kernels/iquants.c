// Scalar reference dot products of the i-quant, ternary and MXFP4 weights:
// IQ4_NL and MXFP4 (32-value blocks with a 16-entry value table) against
// Q8_0 as in ggml; every 256-value type against Q8_K through its integer
// form (struct quant_iq_block: integer sums per group of 16, one float
// multiply per block). The SIMD variants (x86_iq.inc) are checked against
// these.
#include "engine/kernels/internal.h"

// Shared by IQ4_NL and MXFP4: nibble j is value j (low) and j + 16 (high).
static float dot_nl_q8_0(int64_t n, const int8_t values[16], const uint8_t *w, size_t w_bytes,
                         const struct block_q8_0 *x, float (*scale)(const uint8_t *blk))
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++, w += w_bytes) {
        const uint8_t *qs = w + w_bytes - QK8_0 / 2;
        int sumi = 0;
        for (int j = 0; j < QK8_0 / 2; j++) {
            sumi += values[qs[j] & 0x0F] * x[i].qs[j];
            sumi += values[qs[j] >> 4] * x[i].qs[j + 16];
        }
        sum += (float)sumi * (scale(w) * quant_f16_to_f32(x[i].d));
    }
    return sum;
}

float kernels_iq4_nl_scale(const uint8_t *blk)
{
    uint16_t d = (uint16_t)(blk[0] | blk[1] << 8);
    return quant_f16_to_f32(d);
}

float kernels_mxfp4_scale(const uint8_t *blk)
{
    return quant_e8m0_half(blk[0]);
}

void kernels_vec_dot_iq4_nl_ref(int64_t n, float *s, const void *w, const void *x)
{
    *s =
        dot_nl_q8_0(n, quant_iq4nl_values, w, sizeof(struct block_iq4_nl), x, kernels_iq4_nl_scale);
}

void kernels_vec_dot_mxfp4_ref(int64_t n, float *s, const void *w, const void *x)
{
    *s = dot_nl_q8_0(n, quant_mxfp4_values, w, sizeof(struct block_mxfp4), x, kernels_mxfp4_scale);
}

int32_t kernels_iq_block_dot_ref(const struct quant_iq_block *b, const int8_t *xq)
{
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; g++) {
        int32_t sumi = 0;
        for (int l = 0; l < 16; l++)
            sumi += b->q[16 * g + l] * xq[16 * g + l];
        isum += b->ls[g] * sumi;
    }
    return isum;
}

// Any Q8_K-paired type through its traits' integer decoder.
static void vec_dot_iq(uint32_t type, int64_t n, float *s, const void *vw, const void *vx)
{
    const struct quant_traits *tr = quant_traits_get(type);
    const uint8_t *w = vw;
    const struct block_q8_K *x = vx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        struct quant_iq_block b;
        tr->iq_decode(w + (size_t)i * tr->type_size, &b);
        sum += (b.d * tr->iq_scale * x[i].d) * (float)kernels_iq_block_dot_ref(&b, x[i].qs);
    }
    *s = sum;
}

#define IQ_REF(t, id)                                                                              \
    void kernels_vec_dot_##t##_ref(int64_t n, float *s, const void *w, const void *x)              \
    {                                                                                              \
        vec_dot_iq(id, n, s, w, x);                                                                \
    }
IQ_REF(iq2_xxs, GGUF_TYPE_IQ2_XXS)
IQ_REF(iq2_xs, GGUF_TYPE_IQ2_XS)
IQ_REF(iq2_s, GGUF_TYPE_IQ2_S)
IQ_REF(iq3_xxs, GGUF_TYPE_IQ3_XXS)
IQ_REF(iq3_s, GGUF_TYPE_IQ3_S)
IQ_REF(iq1_s, GGUF_TYPE_IQ1_S)
IQ_REF(iq1_m, GGUF_TYPE_IQ1_M)
IQ_REF(iq4_xs, GGUF_TYPE_IQ4_XS)
IQ_REF(tq1_0, GGUF_TYPE_TQ1_0)
IQ_REF(tq2_0, GGUF_TYPE_TQ2_0)

#define Q8K(t, fn)                                                                                 \
    [t] = {.vec_dot_type = GGUF_TYPE_Q8_K, .from_float = kernels_from_float_q8_K_ref, .vec_dot = fn}
#define Q80(t, fn)                                                                                 \
    [t] = {.vec_dot_type = GGUF_TYPE_Q8_0, .from_float = kernels_from_float_q8_0_ref, .vec_dot = fn}

const struct kernels_type kernels_scalar_iq_table[KERNELS_NTYPES] = {
    Q80(GGUF_TYPE_IQ4_NL, kernels_vec_dot_iq4_nl_ref),
    Q80(GGUF_TYPE_MXFP4, kernels_vec_dot_mxfp4_ref),
    Q8K(GGUF_TYPE_IQ4_XS, kernels_vec_dot_iq4_xs_ref),
    Q8K(GGUF_TYPE_IQ2_XXS, kernels_vec_dot_iq2_xxs_ref),
    Q8K(GGUF_TYPE_IQ2_XS, kernels_vec_dot_iq2_xs_ref),
    Q8K(GGUF_TYPE_IQ2_S, kernels_vec_dot_iq2_s_ref),
    Q8K(GGUF_TYPE_IQ3_XXS, kernels_vec_dot_iq3_xxs_ref),
    Q8K(GGUF_TYPE_IQ3_S, kernels_vec_dot_iq3_s_ref),
    Q8K(GGUF_TYPE_IQ1_S, kernels_vec_dot_iq1_s_ref),
    Q8K(GGUF_TYPE_IQ1_M, kernels_vec_dot_iq1_m_ref),
    Q8K(GGUF_TYPE_TQ1_0, kernels_vec_dot_tq1_0_ref),
    Q8K(GGUF_TYPE_TQ2_0, kernels_vec_dot_tq2_0_ref),
};

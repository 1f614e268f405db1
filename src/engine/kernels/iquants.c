// Scalar reference dot products of the NL and IQ families of the type
// table: IQ4_NL and MXFP4 (32-value blocks with a 16-entry value table)
// against Q8_0 as in ggml; every 256-value type against Q8_K through its
// integer form (struct quant_iq_block: integer sums per group of 16, one
// float multiply per block). A type of either family needs no code here:
// its row writes its kernel from its format file's functions. The SIMD
// variants (x86_iq.inc) are checked against these.
#include "engine/kernels/internal.h"

// The NL types: nibble j is value j (low) and j + 16 (high) of the table,
// in the block's last 16 bytes, times the block's scale.
static float dot_nl_q8_0(int64_t n, const int8_t values[16], const uint8_t *w, size_t w_bytes,
                         const struct block_q8_0 *x, float (*scale)(const void *blk))
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

// The IQ types through their integer decoder.
static float dot_iq_q8_K(int64_t n, quant_iq_decode_fn decode, float scale, const uint8_t *w,
                         size_t w_bytes, const struct block_q8_K *x)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        struct quant_iq_block b;
        decode(w + (size_t)i * w_bytes, &b);
        sum += (b.d * scale * x[i].d) * (float)kernels_iq_block_dot_ref(&b, x[i].qs);
    }
    return sum;
}

// kernels_vec_dot_<s>_ref of every NL and IQ type of the type table
// (gguf/types.def), from the functions its format file gives.
#define KREF_NONE
#define KREF_ACT(s)
#define KREF_FLOAT(s, act)
#define KREF_BLOCK(s, act)
#define KREF_NL(s)                                                                                 \
    void kernels_vec_dot_##s##_ref(int64_t n, float *out, const void *w, const void *x)            \
    {                                                                                              \
        *out =                                                                                     \
            dot_nl_q8_0(n, quant_##s##_values, w, sizeof(struct block_##s), x, quant_##s##_scale); \
    }
#define KREF_IQ(s, scale)                                                                          \
    void kernels_vec_dot_##s##_ref(int64_t n, float *out, const void *w, const void *x)            \
    {                                                                                              \
        *out = dot_iq_q8_K(n, quant_##s##_decode, scale, w, sizeof(struct block_##s), x);          \
    }
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) KREF_##fam
#include "gguf/types.def"
#undef GGUF_TYPE_ROW

// The traits table: one row per supported ggml type (block geometry, the
// scalar reference dequantizer and, where we quantize to the type, the
// reference quantizer). A new type is one row here plus its row functions.
#include "engine/quant/quant.h"

#include "engine/quant/internal.h"

#define ROW(id, nm, bs, ts, q, to, from)                                                           \
    [id] = {.name = nm,                                                                            \
            .block_size = bs,                                                                      \
            .type_size = ts,                                                                       \
            .is_quantized = q,                                                                     \
            .to_float = to,                                                                        \
            .from_float_ref = from}
// The Q8_K-paired i-quant and ternary types: their integer decoder and scale.
#define IQROW(id, nm, ts, to, dec, sc)                                                             \
    [id] = {.name = nm,                                                                            \
            .block_size = QK_K,                                                                    \
            .type_size = ts,                                                                       \
            .is_quantized = true,                                                                  \
            .to_float = to,                                                                        \
            .iq_decode = dec,                                                                      \
            .iq_scale = sc}

static const struct quant_traits traits[] = {
    ROW(GGUF_TYPE_F32, "F32", 1, 4, false, quant_f32_to_float, quant_f32_from_float),
    ROW(GGUF_TYPE_F16, "F16", 1, 2, false, quant_f16_to_float, quant_f16_from_float),
    ROW(GGUF_TYPE_BF16, "BF16", 1, 2, false, quant_bf16_to_float, quant_bf16_from_float),
    ROW(GGUF_TYPE_Q4_0, "Q4_0", QK4_0, 18, true, quant_q4_0_to_float, quant_q4_0_from_float),
    ROW(GGUF_TYPE_Q4_1, "Q4_1", QK4_1, 20, true, quant_q4_1_to_float, quant_q4_1_from_float),
    ROW(GGUF_TYPE_Q5_0, "Q5_0", QK5_0, 22, true, quant_q5_0_to_float, quant_q5_0_from_float),
    ROW(GGUF_TYPE_Q5_1, "Q5_1", QK5_1, 24, true, quant_q5_1_to_float, quant_q5_1_from_float),
    ROW(GGUF_TYPE_Q8_0, "Q8_0", QK8_0, 34, true, quant_q8_0_to_float, quant_q8_0_from_float),
    ROW(GGUF_TYPE_Q8_1, "Q8_1", QK8_1, 36, true, quant_q8_1_to_float, quant_q8_1_from_float),
    ROW(GGUF_TYPE_Q2_K, "Q2_K", QK_K, 84, true, quant_q2_k_to_float, quant_q2_k_from_float),
    ROW(GGUF_TYPE_Q3_K, "Q3_K", QK_K, 110, true, quant_q3_k_to_float, quant_q3_k_from_float),
    ROW(GGUF_TYPE_Q4_K, "Q4_K", QK_K, 144, true, quant_q4_k_to_float, quant_q4_k_from_float),
    ROW(GGUF_TYPE_Q5_K, "Q5_K", QK_K, 176, true, quant_q5_k_to_float, quant_q5_k_from_float),
    ROW(GGUF_TYPE_Q6_K, "Q6_K", QK_K, 210, true, quant_q6_k_to_float, quant_q6_k_from_float),
    ROW(GGUF_TYPE_Q8_K, "Q8_K", QK_K, 292, true, quant_q8_k_to_float, quant_q8_k_from_float),
    ROW(GGUF_TYPE_IQ4_NL, "IQ4_NL", QK4_NL, 18, true, quant_iq4_nl_to_float, NULL),
    ROW(GGUF_TYPE_MXFP4, "MXFP4", QK_MXFP4, 17, true, quant_mxfp4_to_float, NULL),
    IQROW(GGUF_TYPE_IQ4_XS, "IQ4_XS", 136, quant_iq4_xs_to_float, quant_iq4_xs_decode, 1.0f),
    IQROW(GGUF_TYPE_IQ2_XXS, "IQ2_XXS", 66, quant_iq2_xxs_to_float, quant_iq2_xxs_decode, 0.125f),
    IQROW(GGUF_TYPE_IQ2_XS, "IQ2_XS", 74, quant_iq2_xs_to_float, quant_iq2_xs_decode, 0.125f),
    IQROW(GGUF_TYPE_IQ2_S, "IQ2_S", 82, quant_iq2_s_to_float, quant_iq2_s_decode, 0.125f),
    IQROW(GGUF_TYPE_IQ3_XXS, "IQ3_XXS", 98, quant_iq3_xxs_to_float, quant_iq3_xxs_decode, 0.25f),
    IQROW(GGUF_TYPE_IQ3_S, "IQ3_S", 110, quant_iq3_s_to_float, quant_iq3_s_decode, 1.0f),
    IQROW(GGUF_TYPE_IQ1_S, "IQ1_S", 50, quant_iq1_s_to_float, quant_iq1_s_decode, 0.125f),
    IQROW(GGUF_TYPE_IQ1_M, "IQ1_M", 56, quant_iq1_m_to_float, quant_iq1_m_decode, 0.125f),
    IQROW(GGUF_TYPE_TQ1_0, "TQ1_0", 54, quant_tq1_0_to_float, quant_tq1_0_decode, 1.0f),
    IQROW(GGUF_TYPE_TQ2_0, "TQ2_0", 66, quant_tq2_0_to_float, quant_tq2_0_decode, 1.0f),
};

_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(struct block_q8_K) == 292, "q8_K layout");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(struct block_iq2_xxs) == 66, "iq2_xxs layout");
_Static_assert(sizeof(struct block_iq2_xs) == 74, "iq2_xs layout");
_Static_assert(sizeof(struct block_iq2_s) == 82, "iq2_s layout");
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "iq3_xxs layout");
_Static_assert(sizeof(struct block_iq3_s) == 110, "iq3_s layout");
_Static_assert(sizeof(struct block_iq1_s) == 50, "iq1_s layout");
_Static_assert(sizeof(struct block_iq1_m) == 56, "iq1_m layout");
_Static_assert(sizeof(struct block_tq1_0) == 54, "tq1_0 layout");
_Static_assert(sizeof(struct block_tq2_0) == 66, "tq2_0 layout");
_Static_assert(sizeof(struct block_mxfp4) == 17, "mxfp4 layout");

const struct quant_traits *quant_traits_get(uint32_t type)
{
    if (type >= sizeof(traits) / sizeof(traits[0]) || !traits[type].name)
        return NULL;
    return &traits[type];
}

size_t quant_row_size(uint32_t type, int64_t n)
{
    const struct quant_traits *t = quant_traits_get(type);
    if (!t || n < 0 || n % t->block_size != 0)
        return 0;
    return (size_t)(n / t->block_size) * t->type_size;
}

// The traits table: one row per ggml type the engine supports, naming the
// scalar reference dequantizer and, where we quantize to the type, the
// reference quantizer. Name, block geometry and the quantized flag come
// from the type table (gguf/types.def), so a row here holds only functions.
#include "engine/quant/quant.h"

#include "engine/quant/internal.h"

#define GEOMETRY(nm)                                                                               \
    .name = #nm, .block_size = GGUF_TYPE_BLOCK_##nm, .type_size = GGUF_TYPE_BYTES_##nm,            \
    .is_quantized = GGUF_TYPE_QUANT_##nm
#define ROW(nm, to, from) [GGUF_TYPE_##nm] = {GEOMETRY(nm), .to_float = to, .from_float_ref = from}
// The Q8_K-paired i-quant and ternary types: their integer decoder and scale.
#define IQROW(nm, to, dec, sc)                                                                     \
    [GGUF_TYPE_##nm] = {GEOMETRY(nm), .to_float = to, .iq_decode = dec, .iq_scale = sc}

static const struct quant_traits traits[] = {
    ROW(F32, quant_f32_to_float, quant_f32_from_float),
    ROW(F16, quant_f16_to_float, quant_f16_from_float),
    ROW(BF16, quant_bf16_to_float, quant_bf16_from_float),
    ROW(Q4_0, quant_q4_0_to_float, quant_q4_0_from_float),
    ROW(Q4_1, quant_q4_1_to_float, quant_q4_1_from_float),
    ROW(Q5_0, quant_q5_0_to_float, quant_q5_0_from_float),
    ROW(Q5_1, quant_q5_1_to_float, quant_q5_1_from_float),
    ROW(Q8_0, quant_q8_0_to_float, quant_q8_0_from_float),
    ROW(Q8_1, quant_q8_1_to_float, quant_q8_1_from_float),
    ROW(Q2_K, quant_q2_k_to_float, quant_q2_k_from_float),
    ROW(Q3_K, quant_q3_k_to_float, quant_q3_k_from_float),
    ROW(Q4_K, quant_q4_k_to_float, quant_q4_k_from_float),
    ROW(Q5_K, quant_q5_k_to_float, quant_q5_k_from_float),
    ROW(Q6_K, quant_q6_k_to_float, quant_q6_k_from_float),
    ROW(Q8_K, quant_q8_k_to_float, quant_q8_k_from_float),
    ROW(IQ4_NL, quant_iq4_nl_to_float, NULL),
    ROW(MXFP4, quant_mxfp4_to_float, NULL),
    IQROW(IQ4_XS, quant_iq4_xs_to_float, quant_iq4_xs_decode, 1.0f),
    IQROW(IQ2_XXS, quant_iq2_xxs_to_float, quant_iq2_xxs_decode, 0.125f),
    IQROW(IQ2_XS, quant_iq2_xs_to_float, quant_iq2_xs_decode, 0.125f),
    IQROW(IQ2_S, quant_iq2_s_to_float, quant_iq2_s_decode, 0.125f),
    IQROW(IQ3_XXS, quant_iq3_xxs_to_float, quant_iq3_xxs_decode, 0.25f),
    IQROW(IQ3_S, quant_iq3_s_to_float, quant_iq3_s_decode, 1.0f),
    IQROW(IQ1_S, quant_iq1_s_to_float, quant_iq1_s_decode, 0.125f),
    IQROW(IQ1_M, quant_iq1_m_to_float, quant_iq1_m_decode, 0.125f),
    IQROW(TQ1_0, quant_tq1_0_to_float, quant_tq1_0_decode, 1.0f),
    IQROW(TQ2_0, quant_tq2_0_to_float, quant_tq2_0_decode, 1.0f),
};

// Each block layout against its row in the type table.
#define LAYOUT(nm, blk) _Static_assert(sizeof(struct blk) == GGUF_TYPE_BYTES_##nm, #nm " layout")
LAYOUT(Q4_0, block_q4_0);
LAYOUT(Q4_1, block_q4_1);
LAYOUT(Q5_0, block_q5_0);
LAYOUT(Q5_1, block_q5_1);
LAYOUT(Q8_0, block_q8_0);
LAYOUT(Q8_1, block_q8_1);
LAYOUT(Q2_K, block_q2_K);
LAYOUT(Q3_K, block_q3_K);
LAYOUT(Q4_K, block_q4_K);
LAYOUT(Q5_K, block_q5_K);
LAYOUT(Q6_K, block_q6_K);
LAYOUT(Q8_K, block_q8_K);
LAYOUT(IQ4_XS, block_iq4_xs);
LAYOUT(IQ2_XXS, block_iq2_xxs);
LAYOUT(IQ2_XS, block_iq2_xs);
LAYOUT(IQ2_S, block_iq2_s);
LAYOUT(IQ3_XXS, block_iq3_xxs);
LAYOUT(IQ3_S, block_iq3_s);
LAYOUT(IQ1_S, block_iq1_s);
LAYOUT(IQ1_M, block_iq1_m);
LAYOUT(TQ1_0, block_tq1_0);
LAYOUT(TQ2_0, block_tq2_0);
LAYOUT(MXFP4, block_mxfp4);
_Static_assert(QK4_0 == GGUF_TYPE_BLOCK_Q4_0 && QK_K == GGUF_TYPE_BLOCK_Q4_K &&
                   QK_MXFP4 == GGUF_TYPE_BLOCK_MXFP4,
               "block sizes as in the type table");

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

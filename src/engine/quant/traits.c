// The traits table, written by the type table (gguf/types.def): a row per
// type the engine runs, with its name and geometry and the functions its
// family names (the scalar reference dequantizer; the reference quantizer of
// the types we quantize to; the integer decoder of the Q8_K-paired types;
// the value table and block scale of the 16-value ones). A type of family
// NONE has no to_float and so no traits.
#include "engine/quant/quant.h"

#include "engine/quant/internal.h"

#define TRAITS_NONE
#define TRAITS_FLOAT(s, act)                                                                       \
    .to_float = quant_##s##_to_float, .from_float_ref = quant_##s##_from_float
#define TRAITS_BLOCK(s, act) TRAITS_FLOAT(s, act)
#define TRAITS_ACT(s)        TRAITS_FLOAT(s, s)
#define TRAITS_NL(s)                                                                               \
    .to_float = quant_##s##_to_float, .nl_values = quant_##s##_values, .nl_scale = quant_##s##_scale
#define TRAITS_IQ(s, scale)                                                                        \
    .to_float = quant_##s##_to_float, .iq_decode = quant_##s##_decode, .iq_scale = scale

static const struct quant_traits traits[] = {
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam)                                                      \
    [id] = {.name = #nm, .block_size = bs, .type_size = ts, .is_quantized = q, TRAITS_##fam},
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
};

// Each block struct against its row in the type table (0: no struct).
#define LAYOUT_NONE          0
#define LAYOUT_FLOAT(s, act) 0
#define LAYOUT_BLOCK(s, act) sizeof(struct block_##s)
#define LAYOUT_ACT(s)        sizeof(struct block_##s)
#define LAYOUT_NL(s)         sizeof(struct block_##s)
#define LAYOUT_IQ(s, scale)  sizeof(struct block_##s)
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam)                                                      \
    _Static_assert(LAYOUT_##fam == 0 || LAYOUT_##fam == ts, #nm " layout");
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
_Static_assert(QK4_0 == GGUF_TYPE_BLOCK_Q4_0 && QK_K == GGUF_TYPE_BLOCK_Q4_K &&
                   QK_MXFP4 == GGUF_TYPE_BLOCK_MXFP4,
               "block sizes as in the type table");

const struct quant_traits *quant_traits_get(uint32_t type)
{
    if (type >= sizeof(traits) / sizeof(traits[0]) || !traits[type].to_float)
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

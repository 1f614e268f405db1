// TODO(quant): temporary stand-in for engine/quant's traits table (F32, F16,
// BF16, Q8_0 only), compiled only while src/engine/quant/traits.c is absent.
#include "engine/quant/quant.h"

static void f32_to_float(const void *x, float *y, int64_t n)
{
    const float *s = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = s[i];
}

static void f16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *s = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_f16_to_f32(s[i]);
}

static void bf16_to_float(const void *x, float *y, int64_t n)
{
    const uint16_t *s = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = quant_bf16_to_f32(s[i]);
}

static void q8_0_to_float(const void *x, float *y, int64_t n)
{
    const struct block_q8_0 *b = x;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        float d = quant_f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++)
            y[i * QK8_0 + j] = d * b[i].qs[j];
    }
}

static const struct quant_traits shim[] = {
    [GGUF_TYPE_F32] = {"F32", 1, 4, false, f32_to_float, NULL},
    [GGUF_TYPE_F16] = {"F16", 1, 2, false, f16_to_float, NULL},
    [GGUF_TYPE_Q8_0] = {"Q8_0", 32, 34, true, q8_0_to_float, NULL},
    [GGUF_TYPE_BF16] = {"BF16", 1, 2, false, bf16_to_float, NULL},
};

const struct quant_traits *quant_traits_get(uint32_t type)
{
    if (type >= sizeof shim / sizeof shim[0] || !shim[type].name)
        return NULL;
    return &shim[type];
}

size_t quant_row_size(uint32_t type, int64_t n)
{
    const struct quant_traits *t = quant_traits_get(type);
    if (!t) {
        uint32_t bs, ts;
        if (!gguf_type_geometry(type, &bs, &ts) || n % bs != 0)
            return 0;
        return (size_t)(n / bs) * ts;
    }
    if (n % t->block_size != 0)
        return 0;
    return (size_t)(n / t->block_size) * t->type_size;
}

// IQ4_NL, the format file of one type: 32 values per block, each a 4-bit
// index into a non-linear table of 16 int8 values, times the block's f16
// scale (value j in the low nibble of byte j, value j + 16 in the high
// one). Its row in the type table (gguf/types.def, family NL) registers
// what is here as its traits and its scalar kernel; its block struct is in
// quant.h, its SIMD kernels in kernels/x86_iq.inc. IQ4_XS reuses the values.
#include "engine/quant/quant.h"

#include "engine/quant/internal.h"

const int8_t quant_iq4_nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

_Static_assert(QK4_NL == GGUF_TYPE_BLOCK_IQ4_NL, "IQ4_NL block size");

float quant_iq4_nl_scale(const void *block)
{
    return quant_f16_to_f32(((const struct block_iq4_nl *)block)->d);
}

void quant_iq4_nl_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_iq4_nl *x = vx;
    for (int64_t b = 0; b < n / QK4_NL; b++, y += QK4_NL) {
        const float d = quant_iq4_nl_scale(&x[b]);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)quant_iq4_nl_values[x[b].qs[j] & 0x0F];
            y[j + 16] = d * (float)quant_iq4_nl_values[x[b].qs[j] >> 4];
        }
    }
}

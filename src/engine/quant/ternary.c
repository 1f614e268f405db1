// The ternary types TQ1_0 and TQ2_0 (BitNet-style weights): every value is
// -1, 0 or 1 times the block's f16 scale d.
#include "engine/quant/quant.h"

#include "engine/quant/internal.h"

// Value n (0..4) of a TQ1_0 byte: the byte is a base-3 fixed-point fraction
// (3^5 = 243 < 256); multiplying by 3^n moves digit n to the top, and
// (q * 3) >> 8 reads it. The result is -1, 0 or 1.
int quant_tq1_digit(uint8_t byte, int n)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t q = (uint8_t)(byte * pow3[n]);
    return (((int)q * 3) >> 8) - 1;
}

// Values 0..159 come from qs[0..32) (digit n of byte m is value 32n + m),
// 160..239 from qs[32..48) (16n + m), 240..255 from qh (digit n of qh[m]
// is value 240 + 4n + m).
void quant_tq1_0_values(const struct block_tq1_0 *b, int8_t q[QK_K])
{
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++)
            q[32 * n + m] = (int8_t)quant_tq1_digit(b->qs[m], n);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++)
            q[160 + 16 * n + m] = (int8_t)quant_tq1_digit(b->qs[32 + m], n);
    for (int n = 0; n < 4; n++)
        for (int m = 0; m < 4; m++)
            q[240 + 4 * n + m] = (int8_t)quant_tq1_digit(b->qh[m], n);
}

void quant_tq1_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_tq1_0 *x = vx;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        float d = quant_f16_to_f32(x[b].d);
        quant_tq1_0_values(&x[b], q);
        for (int j = 0; j < QK_K; j++)
            y[j] = (float)q[j] * d;
    }
}

// Value 128h + 32l + m is bits 2l..2l+1 of qs[32h + m], minus one.
void quant_tq2_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_tq2_0 *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = quant_f16_to_f32(x[b].d);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *y++ = (float)(((x[b].qs[32 * h + m] >> (2 * l)) & 3) - 1) * d;
    }
}

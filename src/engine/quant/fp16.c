// IEEE half and bfloat16 <-> float conversions, exact and portable (the SIMD
// row converters in engine/kernels are checked against these).
#include "engine/quant/quant.h"

#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F)  // inf / nan
        return bits_f32(sign | 0x7F800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return bits_f32(sign);
        // subnormal: value = mant * 2^-24
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t quant_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u)  // inf or nan (keep nan quiet)
        return (uint16_t)(sign | 0x7C00 | (abs > 0x7F800000u ? 0x200 : 0));
    if (abs >= 0x477FF000u)  // rounds to >= 65520: overflow to inf
        return (uint16_t)(sign | 0x7C00);
    if (abs < 0x38800000u) {    // below the smallest normal half: subnormal or zero
        if (abs < 0x33000000u)  // < 2^-25 rounds to zero
            return (uint16_t)sign;
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7FFFFF) | 0x800000;
        uint32_t shift = 126 - e;  // 14 + (112 - e) + ... : mantissa shift into 10 bits
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((abs >> 13) - (112u << 10));
    uint32_t rem = abs & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

float quant_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)  // nan: keep it quiet
        return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7FFF + ((x >> 16) & 1))) >> 16);
}

// The 32-element block formats (docs/internals/quant.md): Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, MXFP4, plus the plain F32/F16/BF16 rows. Dequantizers evaluate in
// float32 in the spec's order; the quantizers follow ggml's reference
// ("_ref") algorithms operation by operation so they write the same bytes as
// llama-quantize without an importance matrix. Compiled with
// -ffp-contract=off (no fused multiply-add), as the reference is.
#include "engine/quant/quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/quant/internal.h"

const int8_t quant_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) for every E8M0 byte e (quant_e8m0_half as a table).
const float quant_e8m0_half_table[256] = {
    0x1p-128f, 0x1p-127f, 0x1p-126f, 0x1p-125f, 0x1p-124f, 0x1p-123f, 0x1p-122f, 0x1p-121f,
    0x1p-120f, 0x1p-119f, 0x1p-118f, 0x1p-117f, 0x1p-116f, 0x1p-115f, 0x1p-114f, 0x1p-113f,
    0x1p-112f, 0x1p-111f, 0x1p-110f, 0x1p-109f, 0x1p-108f, 0x1p-107f, 0x1p-106f, 0x1p-105f,
    0x1p-104f, 0x1p-103f, 0x1p-102f, 0x1p-101f, 0x1p-100f, 0x1p-99f,  0x1p-98f,  0x1p-97f,
    0x1p-96f,  0x1p-95f,  0x1p-94f,  0x1p-93f,  0x1p-92f,  0x1p-91f,  0x1p-90f,  0x1p-89f,
    0x1p-88f,  0x1p-87f,  0x1p-86f,  0x1p-85f,  0x1p-84f,  0x1p-83f,  0x1p-82f,  0x1p-81f,
    0x1p-80f,  0x1p-79f,  0x1p-78f,  0x1p-77f,  0x1p-76f,  0x1p-75f,  0x1p-74f,  0x1p-73f,
    0x1p-72f,  0x1p-71f,  0x1p-70f,  0x1p-69f,  0x1p-68f,  0x1p-67f,  0x1p-66f,  0x1p-65f,
    0x1p-64f,  0x1p-63f,  0x1p-62f,  0x1p-61f,  0x1p-60f,  0x1p-59f,  0x1p-58f,  0x1p-57f,
    0x1p-56f,  0x1p-55f,  0x1p-54f,  0x1p-53f,  0x1p-52f,  0x1p-51f,  0x1p-50f,  0x1p-49f,
    0x1p-48f,  0x1p-47f,  0x1p-46f,  0x1p-45f,  0x1p-44f,  0x1p-43f,  0x1p-42f,  0x1p-41f,
    0x1p-40f,  0x1p-39f,  0x1p-38f,  0x1p-37f,  0x1p-36f,  0x1p-35f,  0x1p-34f,  0x1p-33f,
    0x1p-32f,  0x1p-31f,  0x1p-30f,  0x1p-29f,  0x1p-28f,  0x1p-27f,  0x1p-26f,  0x1p-25f,
    0x1p-24f,  0x1p-23f,  0x1p-22f,  0x1p-21f,  0x1p-20f,  0x1p-19f,  0x1p-18f,  0x1p-17f,
    0x1p-16f,  0x1p-15f,  0x1p-14f,  0x1p-13f,  0x1p-12f,  0x1p-11f,  0x1p-10f,  0x1p-9f,
    0x1p-8f,   0x1p-7f,   0x1p-6f,   0x1p-5f,   0x1p-4f,   0x1p-3f,   0x1p-2f,   0x1p-1f,
    0x1p0f,    0x1p1f,    0x1p2f,    0x1p3f,    0x1p4f,    0x1p5f,    0x1p6f,    0x1p7f,
    0x1p8f,    0x1p9f,    0x1p10f,   0x1p11f,   0x1p12f,   0x1p13f,   0x1p14f,   0x1p15f,
    0x1p16f,   0x1p17f,   0x1p18f,   0x1p19f,   0x1p20f,   0x1p21f,   0x1p22f,   0x1p23f,
    0x1p24f,   0x1p25f,   0x1p26f,   0x1p27f,   0x1p28f,   0x1p29f,   0x1p30f,   0x1p31f,
    0x1p32f,   0x1p33f,   0x1p34f,   0x1p35f,   0x1p36f,   0x1p37f,   0x1p38f,   0x1p39f,
    0x1p40f,   0x1p41f,   0x1p42f,   0x1p43f,   0x1p44f,   0x1p45f,   0x1p46f,   0x1p47f,
    0x1p48f,   0x1p49f,   0x1p50f,   0x1p51f,   0x1p52f,   0x1p53f,   0x1p54f,   0x1p55f,
    0x1p56f,   0x1p57f,   0x1p58f,   0x1p59f,   0x1p60f,   0x1p61f,   0x1p62f,   0x1p63f,
    0x1p64f,   0x1p65f,   0x1p66f,   0x1p67f,   0x1p68f,   0x1p69f,   0x1p70f,   0x1p71f,
    0x1p72f,   0x1p73f,   0x1p74f,   0x1p75f,   0x1p76f,   0x1p77f,   0x1p78f,   0x1p79f,
    0x1p80f,   0x1p81f,   0x1p82f,   0x1p83f,   0x1p84f,   0x1p85f,   0x1p86f,   0x1p87f,
    0x1p88f,   0x1p89f,   0x1p90f,   0x1p91f,   0x1p92f,   0x1p93f,   0x1p94f,   0x1p95f,
    0x1p96f,   0x1p97f,   0x1p98f,   0x1p99f,   0x1p100f,  0x1p101f,  0x1p102f,  0x1p103f,
    0x1p104f,  0x1p105f,  0x1p106f,  0x1p107f,  0x1p108f,  0x1p109f,  0x1p110f,  0x1p111f,
    0x1p112f,  0x1p113f,  0x1p114f,  0x1p115f,  0x1p116f,  0x1p117f,  0x1p118f,  0x1p119f,
    0x1p120f,  0x1p121f,  0x1p122f,  0x1p123f,  0x1p124f,  0x1p125f,  0x1p126f,  0x1p127f,
};

static uint16_t f16(float f)
{
    return quant_f32_to_f16(f);
}

static float f32(uint16_t h)
{
    return quant_f16_to_f32(h);
}

// ---------------------------------------------------------------------------
// Plain types

void quant_f32_to_float(const void *x, float *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

void quant_f32_from_float(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

void quant_f16_to_float(const void *x, float *y, int64_t n)
{
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        y[i] = f32(h);
    }
}

void quant_f16_from_float(const float *x, void *y, int64_t n)
{
    uint8_t *p = y;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = f16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

void quant_bf16_to_float(const void *x, float *y, int64_t n)
{
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        y[i] = quant_bf16_to_f32(h);
    }
}

void quant_bf16_from_float(const float *x, void *y, int64_t n)
{
    uint8_t *p = y;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = quant_f32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

// ---------------------------------------------------------------------------
// Dequantizers

void quant_q4_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q4_0 *x = vx;
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0) {
        float d = f32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[b].qs[j] & 0x0F) - 8) * d;
            y[j + 16] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void quant_q4_1_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q4_1 *x = vx;
    for (int64_t b = 0; b < n / QK4_1; b++, y += QK4_1) {
        float d = f32(x[b].d), m = f32(x[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[b].qs[j] & 0x0F) * d + m;
            y[j + 16] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t load_qh(const uint8_t qh[4])
{
    uint32_t h;
    memcpy(&h, qh, 4);
    return h;
}

void quant_q5_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q5_0 *x = vx;
    for (int64_t b = 0; b < n / QK5_0; b++, y += QK5_0) {
        float d = f32(x[b].d);
        uint32_t h = load_qh(x[b].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo = (x[b].qs[j] & 0x0F) | (int)(((h >> j) & 1) << 4);
            int hi = (x[b].qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
            y[j] = (float)(lo - 16) * d;
            y[j + 16] = (float)(hi - 16) * d;
        }
    }
}

void quant_q5_1_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q5_1 *x = vx;
    for (int64_t b = 0; b < n / QK5_1; b++, y += QK5_1) {
        float d = f32(x[b].d), m = f32(x[b].m);
        uint32_t h = load_qh(x[b].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int lo = (x[b].qs[j] & 0x0F) | (int)(((h >> j) & 1) << 4);
            int hi = (x[b].qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
            y[j] = (float)lo * d + m;
            y[j + 16] = (float)hi * d + m;
        }
    }
}

void quant_q8_0_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / QK8_0; b++, y += QK8_0) {
        float d = f32(x[b].d);
        for (int j = 0; j < QK8_0; j++)
            y[j] = (float)x[b].qs[j] * d;
    }
}

// MXFP4: the table holds E2M1 values doubled, the scale is half of 2^(e-127).
float quant_mxfp4_scale(const void *block)
{
    return quant_e8m0_half(((const struct block_mxfp4 *)block)->e);
}

void quant_mxfp4_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_mxfp4 *x = vx;
    for (int64_t b = 0; b < n / QK_MXFP4; b++, y += QK_MXFP4) {
        float d = quant_e8m0_half(x[b].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[j] = (float)quant_mxfp4_values[x[b].qs[j] & 0x0F] * d;
            y[j + 16] = (float)quant_mxfp4_values[x[b].qs[j] >> 4] * d;
        }
    }
}

// ---------------------------------------------------------------------------
// Reference quantizers

float quant_signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min_out, float *max_out)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

static int imin(int a, int b)
{
    return a < b ? a : b;
}

void quant_q4_0_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q4_0 *y = vy;
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0) {
        // Scale so that the extreme value maps to -8 exactly.
        float d = quant_signed_absmax(x, QK4_0) / -8;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            float a = x[j] * id, c = x[j + 16] * id;
            uint8_t lo = (uint8_t)imin(15, (int8_t)(a + 8.5f));
            uint8_t hi = (uint8_t)imin(15, (int8_t)(c + 8.5f));
            y[b].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void quant_q4_1_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q4_1 *y = vy;
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1) {
        float min, max;
        min_max(x, QK4_1, &min, &max);
        float d = (max - min) / 15;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f16(d);
        y[b].m = f16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            float a = (x[j] - min) * id, c = (x[j + 16] - min) * id;
            uint8_t lo = (uint8_t)imin(15, (int8_t)(a + 0.5f));
            uint8_t hi = (uint8_t)imin(15, (int8_t)(c + 0.5f));
            y[b].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void quant_q5_0_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q5_0 *y = vy;
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0) {
        float d = quant_signed_absmax(x, QK5_0) / -16;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            float a = x[j] * id, c = x[j + 16] * id;
            uint8_t lo = (uint8_t)imin(31, (int8_t)(a + 16.5f));
            uint8_t hi = (uint8_t)imin(31, (int8_t)(c + 16.5f));
            y[b].qs[j] = (uint8_t)((lo & 0x0F) | ((hi & 0x0F) << 4));
            qh |= (uint32_t)((lo >> 4) & 1) << j;
            qh |= (uint32_t)((hi >> 4) & 1) << (j + 16);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

void quant_q5_1_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q5_1 *y = vy;
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1) {
        float min, max;
        min_max(x, QK5_1, &min, &max);
        float d = (max - min) / 31;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f16(d);
        y[b].m = f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            float a = (x[j] - min) * id, c = (x[j + 16] - min) * id;
            uint8_t lo = (uint8_t)(a + 0.5f);
            uint8_t hi = (uint8_t)(c + 0.5f);
            y[b].qs[j] = (uint8_t)((lo & 0x0F) | ((hi & 0x0F) << 4));
            qh |= (uint32_t)((lo >> 4) & 1) << j;
            qh |= (uint32_t)((hi >> 4) & 1) << (j + 16);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

void quant_q8_0_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f16(d);
        for (int j = 0; j < QK8_0; j++)
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

// Q8_1 (activations for the Q4_1/Q5_1 dot products): Q8_0 plus s = d * sum(qs).
void quant_q8_1_from_float(const float *x, void *vy, int64_t n)
{
    struct block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[b].qs[j];
        }
        y[b].s = f16((float)sum * d);
    }
}

void quant_q8_1_to_float(const void *vx, float *y, int64_t n)
{
    const struct block_q8_1 *x = vx;
    for (int64_t b = 0; b < n / QK8_1; b++, y += QK8_1) {
        float d = f32(x[b].d);
        for (int j = 0; j < QK8_1; j++)
            y[j] = (float)x[b].qs[j] * d;
    }
}

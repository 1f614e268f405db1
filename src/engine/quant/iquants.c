// The grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
// and the integer form of every 256-value type that pairs with Q8_K
// (struct quant_iq_block). Each type has one decoder; its dequantizer
// scales the decoded integers in the order ggml evaluates them, so the
// values are bit-exact with ggml's (an odd multiple of 1/2 times 1/4 is the
// same float whether written d * (0.5 + s) * 0.25 or d * (0.5 * ls) * 0.25).
#include "engine/quant/quant.h"

#include <string.h>

#include "engine/quant/internal.h"

static uint32_t le32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

// Writes 8 values: the codebook bytes of `grid` with signs from `mask`
// (0xFF = negative), times `mul`, plus `add`.
static void put8(int8_t *q, uint64_t grid, uint64_t mask, int mul, int add)
{
    for (int j = 0; j < 8; j++) {
        int v = (int8_t)(uint8_t)(grid >> (8 * j));
        if ((mask >> (8 * j)) & 1)
            v = -v;
        q[j] = (int8_t)(v * mul + add);
    }
}

// Byte mask of a plain sign byte (bit j set: value j negative).
static uint64_t sign_mask(uint8_t b)
{
    uint64_t m = 0;
    for (int j = 0; j < 8; j++)
        if ((b >> j) & 1)
            m |= (uint64_t)0xFF << (8 * j);
    return m;
}

static void set_ls(struct quant_iq_block *o, int group32, int ls_lo, int ls_hi)
{
    o->ls[2 * group32] = (int16_t)ls_lo;
    o->ls[2 * group32 + 1] = (int16_t)ls_hi;
}

// IQ2_XXS: per 32 values, 4 grid bytes then 4 x 7 sign bits and a 4-bit scale.
void quant_iq2_xxs_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq2_xxs *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        uint32_t idx = le32(&b->qs[4 * ib]), aux = le32(&b->qs[4 * ib + 2]);
        int ls = 2 * (int)(aux >> 28) + 1;
        set_ls(o, ib, ls, ls);
        for (int l = 0; l < 4; l++)
            put8(&o->q[32 * ib + 8 * l], quant_iq2xxs_grid[(idx >> (8 * l)) & 255],
                 quant_iq2_signs[(aux >> (7 * l)) & 127], 1, 0);
    }
}

// IQ2_XS: 9-bit grid index and 7 sign bits per 8 values, 4-bit scale per 16.
void quant_iq2_xs_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq2_xs *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        set_ls(o, ib, 2 * (b->scales[ib] & 15) + 1, 2 * (b->scales[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            uint16_t v = b->qs[4 * ib + l];
            put8(&o->q[32 * ib + 8 * l], quant_iq2xs_grid[v & 511], quant_iq2_signs[v >> 9], 1, 0);
        }
    }
}

// IQ2_S: 10-bit grid index (2 high bits in qh), a full sign byte per 8.
void quant_iq2_s_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq2_s *b = vb;
    const uint8_t *signs = b->qs + QK_K / 8;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        set_ls(o, ib, 2 * (b->scales[ib] & 15) + 1, 2 * (b->scales[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            int idx = b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
            put8(&o->q[32 * ib + 8 * l], quant_iq2s_grid[idx], sign_mask(signs[4 * ib + l]), 1, 0);
        }
    }
}

// IQ3_XXS: 8 grid bytes (4 values each) per 32, then per 32 a word of
// 4 x 7 sign bits and a 4-bit scale.
void quant_iq3_xxs_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq3_xxs *b = vb;
    const uint8_t *qs = b->qs;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux = le32(b->qs + QK_K / 4 + 4 * ib);
        int ls = 2 * (int)(aux >> 28) + 1;
        set_ls(o, ib, ls, ls);
        for (int l = 0; l < 4; l++) {
            uint64_t grid = quant_iq3xxs_grid[qs[8 * ib + 2 * l]] |
                            (uint64_t)quant_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
            put8(&o->q[32 * ib + 8 * l], grid, quant_iq2_signs[(aux >> (7 * l)) & 127], 1, 0);
        }
    }
}

// IQ3_S: 9-bit grid index per 4 values (high bit in qh), a sign byte per 8,
// a 4-bit scale per 32.
void quant_iq3_s_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq3_s *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        int ls = 1 + 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 15);
        set_ls(o, ib, ls, ls);
        const uint8_t *qs = b->qs + 8 * ib;
        for (int l = 0; l < 4; l++) {
            int i0 = qs[2 * l] | ((b->qh[ib] << (8 - 2 * l)) & 256);
            int i1 = qs[2 * l + 1] | ((b->qh[ib] << (7 - 2 * l)) & 256);
            uint64_t grid = quant_iq3s_grid[i0] | (uint64_t)quant_iq3s_grid[i1] << 32;
            put8(&o->q[32 * ib + 8 * l], grid, sign_mask(b->signs[4 * ib + l]), 1, 0);
        }
    }
}

// IQ1_S: 11-bit grid index per 8 values; per 32, a 3-bit scale and the sign
// of the +-1/8 shift. q holds 8 * (grid + shift).
void quant_iq1_s_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq1_s *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        uint16_t qh = b->qh[ib];
        int ls = 2 * ((qh >> 12) & 7) + 1, delta = (qh & 0x8000) ? -1 : 1;
        set_ls(o, ib, ls, ls);
        for (int l = 0; l < 4; l++) {
            int idx = b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
            put8(&o->q[32 * ib + 8 * l], quant_iq1s_grid[idx], 0, 8, delta);
        }
    }
}

// IQ1_M: 11-bit grid index and shift sign per 8 values, 3-bit scale per 16;
// the f16 d is the top nibbles of the four scale words.
void quant_iq1_m_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq1_m *b = vb;
    uint16_t sc[4];
    memcpy(sc, b->scales, sizeof sc);
    o->d = quant_f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                       ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
    for (int ib = 0; ib < 8; ib++) {
        set_ls(o, ib, 2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1,
               2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
        for (int l = 0; l < 4; l++) {
            uint8_t qh = b->qh[2 * ib + l / 2];
            int shift = 4 * (l % 2);
            int idx = b->qs[4 * ib + l] | (((qh >> shift) & 7) << 8);
            int delta = ((qh >> shift) & 8) ? -1 : 1;
            put8(&o->q[32 * ib + 8 * l], quant_iq1s_grid[idx], 0, 8, delta);
        }
    }
}

// IQ4_XS: 16 table values, a 6-bit scale (offset 32) per 32.
void quant_iq4_xs_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_iq4_xs *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        int ls =
            ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b->scales_h >> (2 * ib)) & 3) << 4);
        set_ls(o, ib, ls - 32, ls - 32);
        for (int j = 0; j < 16; j++) {
            o->q[32 * ib + j] = quant_iq4_nl_values[b->qs[16 * ib + j] & 15];
            o->q[32 * ib + j + 16] = quant_iq4_nl_values[b->qs[16 * ib + j] >> 4];
        }
    }
}

void quant_tq1_0_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_tq1_0 *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int g = 0; g < 16; g++)
        o->ls[g] = 1;
    quant_tq1_0_values(b, o->q);
}

void quant_tq2_0_decode(const void *vb, struct quant_iq_block *o)
{
    const struct block_tq2_0 *b = vb;
    o->d = quant_f16_to_f32(b->d);
    for (int g = 0; g < 16; g++)
        o->ls[g] = 1;
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++)
                o->q[128 * h + 32 * l + m] = (int8_t)(((b->qs[32 * h + m] >> (2 * l)) & 3) - 1);
}

// Dequantizers: dl is the float scale of a group of 16 in ggml's order of
// operations (d and ls in scope), qv the float of value q.
#define IQ_TO_FLOAT(t, bsize, DL, QV)                                                              \
    void quant_##t##_to_float(const void *vx, float *y, int64_t n)                                 \
    {                                                                                              \
        const uint8_t *x = vx;                                                                     \
        struct quant_iq_block blk;                                                                 \
        for (int64_t i = 0; i < n / QK_K; i++) {                                                   \
            quant_##t##_decode(x + (size_t)i * (bsize), &blk);                                     \
            const float d = blk.d;                                                                 \
            for (int g = 0; g < 16; g++) {                                                         \
                const int ls = blk.ls[g];                                                          \
                const float dl = (DL);                                                             \
                (void)ls;                                                                          \
                for (int j = 0; j < 16; j++) {                                                     \
                    const int q = blk.q[16 * g + j];                                               \
                    *y++ = dl * (QV);                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

// ls = 2s + 1, so 0.5 * ls is ggml's (0.5 + s) exactly.
IQ_TO_FLOAT(iq2_xxs, sizeof(struct block_iq2_xxs), d *(0.5f * (float)ls) * 0.25f, (float)q)
IQ_TO_FLOAT(iq2_xs, sizeof(struct block_iq2_xs), d *(0.5f * (float)ls) * 0.25f, (float)q)
IQ_TO_FLOAT(iq2_s, sizeof(struct block_iq2_s), d *(0.5f * (float)ls) * 0.25f, (float)q)
IQ_TO_FLOAT(iq3_xxs, sizeof(struct block_iq3_xxs), d *(0.5f * (float)ls) * 0.5f, (float)q)
IQ_TO_FLOAT(iq3_s, sizeof(struct block_iq3_s), d *(float)ls, (float)q)
// q / 8 is ggml's grid + delta exactly.
IQ_TO_FLOAT(iq1_s, sizeof(struct block_iq1_s), d *(float)ls, (float)q * 0.125f)
IQ_TO_FLOAT(iq1_m, sizeof(struct block_iq1_m), d *(float)ls, (float)q * 0.125f)

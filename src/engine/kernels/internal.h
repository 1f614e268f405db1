// kernels/internal.h: what the per-ISA files share with the dispatcher.
//
// Each ISA file fills a sparse table of struct kernels_type indexed by gguf
// type id (a NULL vec_dot means "no kernel at this ISA, use the level
// below") and a struct kernels_ops of element-wise helpers (NULL fields fall
// back the same way), and registers them in tables.def; kernels.c merges
// them from scalar upwards. The scalar table is the type table's
// (gguf/types.def), complete for every type the engine runs.
#pragma once

#include <stddef.h>

#include "engine/kernels/kernels.h"

#include "engine/quant/quant.h"

#define KERNELS_NTYPES GGUF_TYPE_COUNT_

// One block of columns of 8 interleaved Q4_0 rows (kernels_interleave_x8):
// qs[32 * p + 4 * j + t] is row j's qs[4 * p + t], so the low nibbles of
// bytes [32p, 32p + 32) are weights 4p..4p+3 of each row (a lane per row)
// and the high nibbles weights 16 + 4p..16 + 4p + 3.
struct block_q4_0x8 {
    uint16_t d[8];
    uint8_t qs[8 * QK4_0 / 2];
};
_Static_assert(sizeof(struct block_q4_0x8) == 8 * sizeof(struct block_q4_0), "x8 block size");

// One block of columns of 8 interleaved Q5_0 rows: qs as Q4_0's; qh[4 * j
// + t] holds row j's fifth bits of values 4p + t in bit p and of values
// 16 + 4p + t in bit 4 + p (p = 0..3).
struct block_q5_0x8 {
    uint16_t d[8];
    uint8_t qh[32];
    uint8_t qs[8 * QK5_0 / 2];
};
_Static_assert(sizeof(struct block_q5_0x8) == 8 * sizeof(struct block_q5_0), "x8 block size");

// Q4_1 / Q5_1 rows interleaved by 8: Q4_0's / Q5_0's lanes (their d and
// quants, Q5_1's fifth bits as Q5_0's), then the 8 rows' f16 mins.
struct block_q4_1x8 {
    struct block_q4_0x8 base;
    uint16_t m[8];
};
_Static_assert(sizeof(struct block_q4_1x8) == 8 * sizeof(struct block_q4_1), "x8 block size");
_Static_assert(offsetof(struct block_q4_1x8, m) == 8 * sizeof(struct block_q4_0), "mins after");
struct block_q5_1x8 {
    struct block_q5_0x8 base;
    uint16_t m[8];
};
_Static_assert(sizeof(struct block_q5_1x8) == 8 * sizeof(struct block_q5_1), "x8 block size");
_Static_assert(offsetof(struct block_q5_1x8, m) == 8 * sizeof(struct block_q5_0), "mins after");

// One block of 8 interleaved MXFP4 rows: the 8 rows' E8M0 scales, then
// the nibbles in Q4_0's lanes, qs[32 p + 4 j + t] = row j's qs[4 p + t].
struct block_mxfp4x8 {
    uint8_t e[8];
    uint8_t qs[8 * QK_MXFP4 / 2];
};
_Static_assert(sizeof(struct block_mxfp4x8) == 8 * sizeof(struct block_mxfp4), "x8 block size");

// One block of 8 interleaved TQ2_0 rows: the 8 rows' f16 scales, then
// qs[32 p + 4 j + t] = row j's qs[4 p + t].
struct block_tq2_0x8 {
    uint16_t d[8];
    uint8_t qs[8 * QK_K / 4];
};
_Static_assert(sizeof(struct block_tq2_0x8) == 8 * sizeof(struct block_tq2_0), "x8 block size");

// One block of columns of 8 interleaved Q8_0 rows: qs[32 * p + 4 * j + t]
// is row j's qs[4 * p + t], so bytes [32p, 32p + 32) are weights
// 4p..4p+3 of each row, a lane per row.
struct block_q8_0x8 {
    uint16_t d[8];
    int8_t qs[8 * QK8_0];
};
_Static_assert(sizeof(struct block_q8_0x8) == 8 * sizeof(struct block_q8_0), "x8 block size");
_Static_assert(offsetof(struct block_q4_0x8, qs) == 16 && offsetof(struct block_q8_0x8, qs) == 16,
               "kernels_interleave_x8 writes the quants after 8 scales");

// One super-block of 8 interleaved Q4_K rows (the same 1152 bytes as the
// 8 blocks), laid out for a kernel with a row per 32-bit lane:
// - d, dmin: the 8 rows' f16 scales;
// - scl[8 * s + j]: low 4 bits of row j's 6-bit scale (bits 0-3) and min
//   (bits 4-7) of sub-block s; sch: their top 2 bits, a nibble per (s, j)
//   (index i = 8 * s + j: byte i % 32, high nibble when i >= 32; scale in
//   bits 0-1, min in bits 2-3);
// - qs[256 * c + 32 * p + 4 * j + t]: row j's qs[32 * c + 4 * p + t], so the
//   low nibbles of bytes [256c + 32p, +32) are values 4p..4p+3 of
//   sub-block 2c of each row, the high nibbles those of sub-block 2c + 1.
struct block_q4_Kx8 {
    uint16_t d[8], dmin[8];
    uint8_t scl[64], sch[32];
    uint8_t qs[8 * QK_K / 2];
};
_Static_assert(sizeof(struct block_q4_Kx8) == 8 * sizeof(struct block_q4_K), "x8 block size");

// One super-block of 8 interleaved Q6_K rows (the same 1680 bytes as the
// 8 blocks), a row per 32-bit lane. For sub-block s (values 16s..16s+15,
// q the 6-bit quant before its -32, t = 0..3, j the row):
// - sc[8 * s + j]: row j's scale of sub-block s;
// - ql[64 * s + 4 * j + t]: q(16s + t) & 15 | (q(16s + 4 + t) & 15) << 4,
//   ql[64 * s + 32 + 4 * j + t]: the same for values 16s + 8 + t, 16s + 12 + t;
// - qh[32 * s + 4 * j + t]: the top 2 bits of q(16s + t), q(16s + 4 + t),
//   q(16s + 8 + t), q(16s + 12 + t) in bits 0-1, 2-3, 4-5, 6-7.
struct block_q6_Kx8 {
    uint16_t d[8];
    int8_t sc[8 * QK_K / 16];
    uint8_t ql[8 * QK_K / 2];
    uint8_t qh[8 * QK_K / 4];
};
_Static_assert(sizeof(struct block_q6_Kx8) == 8 * sizeof(struct block_q6_K), "x8 block size");

// Quant e (0..255, 0..63 before its -32) of a Q6_K block.
static inline int kernels_q6_K_quant(const struct block_q6_K *b, int e)
{
    const int half = e / 128, j = (e % 128) / 32, l = e % 32;
    const uint8_t lb = b->ql[64 * half + l + ((j & 1) ? 32 : 0)];
    const int low4 = j < 2 ? (lb & 0x0F) : (lb >> 4);
    return low4 | ((b->qh[32 * half + l] >> (2 * j)) & 3) << 4;
}

// Quant e of row j in a block_q6_Kx8.
static inline int kernels_q6_Kx8_quant(const struct block_q6_Kx8 *g, int e, int j)
{
    const int s = e / 16, i = e % 16, t = i % 4, quarter = i / 4;
    const uint8_t lb = g->ql[64 * s + 32 * (quarter / 2) + 4 * j + t];
    const int low4 = (quarter & 1) ? lb >> 4 : lb & 0x0F;
    return low4 | ((g->qh[32 * s + 4 * j + t] >> (2 * quarter)) & 3) << 4;
}

// A panel of the panel products (kernels.h): KERNELS_PANEL_ROWS (16) weight
// rows, a row per 32-bit lane of a 512-bit vector. Along the row, one part
// per activation block of `act` values (kernels_panel_act: 256 for the
// Q8_K-paired types, 32 for IQ4_NL / MXFP4), KERNELS_PANEL_PART_BYTES
// apiece:
// - float d[16]: row r's block scale (what the scalar dot multiplies with
//   the activation block's scale);
// - act / sub sub-blocks of `sub` values (kernels_panel_sub: 16, one per
//   group scale; 32 for IQ4_NL / MXFP4, one per block), each
//   - int32 ls[16]: row r's integer group scale (1 for IQ4_NL / MXFP4),
//   - int32 nb[16]: -128 times the sum of row r's values in the
//     sub-block, which takes back the +128 of the unsigned activations,
//   - int8 qs[sub / 4][16][4]: qs[64 g + 4 r + t] is row r's value 4 g + t.
// So a block's product is d * x_d * sum(ls * (nb + sum(q * (x + 128)))) with
// the integer part exact, as the scalar dot computes it. Rows past the
// decoded count are zeros. An activation row of the panel is float
// x_d[n / act] followed by the n quants plus 128 as uint8.
#define KERNELS_PANEL_SUB_BYTES(sub)       (128 + 16 * (sub))
#define KERNELS_PANEL_PART_BYTES(sub, act) (64 + (act) / (sub)*KERNELS_PANEL_SUB_BYTES(sub))
// 0 for a type without the layout.
int kernels_panel_sub(uint32_t type);
int kernels_panel_act(uint32_t type);
#if defined(__x86_64__) || defined(_M_X64)
// x86_simd.inc's activation quantizers under exported names.
void kernels_from_float_q8_0_avx512(const float *x, void *y, int64_t n);
void kernels_from_float_q8_K_avx512(const float *x, void *y, int64_t n);
void kernels_from_float_q8_0_avx2(const float *x, void *y, int64_t n);
void kernels_from_float_q8_K_avx2(const float *x, void *y, int64_t n);
#endif

// The scalar references of the interleaved layouts (the tests' twins).
void kernels_gemm_q4_0x8_ref(int64_t n, float *s, size_t s_stride, const void *w, size_t w_stride,
                             const void *x, size_t x_stride, int nr, int nc);
void kernels_gemm_q8_0x8_ref(int64_t n, float *s, size_t s_stride, const void *w, size_t w_stride,
                             const void *x, size_t x_stride, int nr, int nc);
void kernels_gemm_q5_0x8_ref(int64_t n, float *s, size_t s_stride, const void *w, size_t w_stride,
                             const void *x, size_t x_stride, int nr, int nc);
void kernels_gemm_q4_Kx8_ref(int64_t n, float *s, size_t s_stride, const void *w, size_t w_stride,
                             const void *x, size_t x_stride, int nr, int nc);
void kernels_gemm_q6_Kx8_ref(int64_t n, float *s, size_t s_stride, const void *w, size_t w_stride,
                             const void *x, size_t x_stride, int nr, int nc);
// Row j's 6-bit scale and min of sub-block s in a block_q4_Kx8.
static inline void kernels_q4_Kx8_scale_min(const uint8_t *scl, const uint8_t *sch, int s, int j,
                                            uint8_t *sc, uint8_t *m)
{
    const int i = 8 * s + j;
    const uint8_t hi = (uint8_t)((sch[i % 32] >> (i >= 32 ? 4 : 0)) & 0x0F);
    *sc = (uint8_t)((scl[i] & 0x0F) | (hi & 3) << 4);
    *m = (uint8_t)((scl[i] >> 4) | (hi >> 2) << 4);
}

// The ISA files' sparse tables and element-wise helpers, in the order
// kernels.c overlays them (tables.def).
#define KERNELS_TABLE(isa, table, needs) extern const struct kernels_type table[KERNELS_NTYPES];
#define KERNELS_OPS(isa, ops)            extern const struct kernels_ops ops;
#include "engine/kernels/tables.def"
#undef KERNELS_TABLE
#undef KERNELS_OPS

// GELU of every f16 input, as f32 (the f16-rounded result), indexed by the
// input's f16 bits; built once on first use (thread-safe).
const float *kernels_gelu_table(void);

// Activation conversions shared by every ISA (the formats are the same, so
// the scalar ones are used where a SIMD one would not pay).
void kernels_from_float_q8_0_ref(const float *x, void *y, int64_t n);
void kernels_from_float_q8_1_ref(const float *x, void *y, int64_t n);
void kernels_from_float_q8_K_ref(const float *x, void *y, int64_t n);
void kernels_from_float_f16_ref(const float *x, void *y, int64_t n);
void kernels_from_float_bf16_ref(const float *x, void *y, int64_t n);
void kernels_from_float_f32_ref(const float *x, void *y, int64_t n);

// The scalar vec_dots of every type the engine runs (kernels_vec_dot_<s>_ref,
// declared from the type table, gguf/types.def), for the scalar table and
// the SIMD files' odd tails.
#define KDECL_NONE
#define KDECL_ACT(s)
#define KDECL_ROW(s)                          void kernels_vec_dot_##s##_ref(int64_t, float *, const void *, const void *);
#define KDECL_FLOAT(s, act)                   KDECL_ROW(s)
#define KDECL_BLOCK(s, act)                   KDECL_ROW(s)
#define KDECL_NL(s)                           KDECL_ROW(s)
#define KDECL_IQ(s, scale)                    KDECL_ROW(s)
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) KDECL_##fam
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
// sum over groups of 16 of ls * (q . xq): the integer part of an IQ block's dot.
int32_t kernels_iq_block_dot_ref(const struct quant_iq_block *b, const int8_t *xq);

// Decodes the 12-byte packed 6-bit scales/mins of Q4_K / Q5_K.
static inline void kernels_unpack_scale_min_k4(const uint8_t *q, uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j] = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        m[j] = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Decodes the 16 signed 6-bit scales of Q3_K (range -32..31).
static inline void kernels_unpack_scales_q3_K(const uint8_t *s, int8_t out[16])
{
    for (int i = 0; i < 16; i++) {
        int lo4 = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
        int hi2 = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((lo4 | (hi2 << 4)) - 32);
    }
}

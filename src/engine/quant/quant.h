// quant: the tensor types of GGUF (docs/internals/quant.md): block layouts,
// a traits table per type with the scalar reference dequantizer and (for the
// types we quantize to) the reference quantizer that writes the same bytes as
// llama.cpp's reference quantizers (no importance matrix). Which type each
// tensor of a model gets is policy, in the quantize module.
//
// This is the reference: SIMD kernels in engine/kernels are checked against it.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

#define QK4_0        32
#define QK4_1        32
#define QK5_0        32
#define QK5_1        32
#define QK8_0        32
#define QK8_1        32
#define QK_K         256
#define K_SCALE_SIZE 12
#define QK4_NL       32

// Block layouts, byte-exact with GGUF. f16 fields are raw IEEE half bits.
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
};
struct block_q4_1 {
    uint16_t d, m;
    uint8_t qs[QK4_1 / 2];
};
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
struct block_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
};
struct block_q8_1 {
    uint16_t d, s;
    int8_t qs[QK8_1];
};  // s = d * sum(qs), activations only
struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
};
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};
struct block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};
struct block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};
struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];
};
struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};
// The grid i-quants: groups of 8 (IQ3: 4) values are an index into a
// codebook (below) plus sign bits; IQ1_M's f16 scale is spread over the top
// nibbles of its scales.
struct block_iq2_xxs {
    uint16_t d;
    uint16_t qs[QK_K / 8];
};
struct block_iq2_xs {
    uint16_t d;
    uint16_t qs[QK_K / 8];
    uint8_t scales[QK_K / 32];
};
struct block_iq2_s {
    uint16_t d;
    uint8_t qs[QK_K / 4];  // grid indices (low 8 bits), then the sign bytes
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
};
struct block_iq3_xxs {
    uint16_t d;
    uint8_t qs[3 * QK_K / 8];  // grid indices, then scales and signs
};
struct block_iq3_s {
    uint16_t d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t signs[QK_K / 8];
    uint8_t scales[QK_K / 64];
};
struct block_iq1_s {
    uint16_t d;
    uint8_t qs[QK_K / 8];
    uint16_t qh[QK_K / 32];
};
struct block_iq1_m {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32];
};
// Ternary types: values in {-1, 0, 1} times d. TQ1_0 packs 5 values per byte
// in base 3 (then 4 per byte in qh), TQ2_0 2 bits per value.
struct block_tq1_0 {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5];
    uint8_t qh[QK_K / 64];
    uint16_t d;
};
struct block_tq2_0 {
    uint8_t qs[QK_K / 4];
    uint16_t d;
};
// MXFP4: 32 E2M1 values (a 16-entry table) with one E8M0 exponent.
#define QK_MXFP4 32
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};

// Codebooks (iq_grids.c): entry k holds the values of one group, byte j is
// value j (unsigned magnitudes for IQ2/IQ3, int8 -1/0/1 for IQ1).
extern const uint64_t quant_iq2xxs_grid[256];
extern const uint64_t quant_iq2xs_grid[512];
extern const uint64_t quant_iq2s_grid[1024];
extern const uint32_t quant_iq3xxs_grid[256];
extern const uint32_t quant_iq3s_grid[512];
extern const uint64_t quant_iq1s_grid[2048];
// Byte masks (0xFF = negative) of the 8 values of a 7-bit IQ2/IQ3_XXS sign
// index (the 8th sign gives an even count of negatives).
extern const uint64_t quant_iq2_signs[128];
// IQ1_S / IQ1_M shift every value by +-1/8 of the group scale.
#define QUANT_IQ1_DELTA 0.125f

// Half of the E8M0 scale of an MXFP4 block: 2^(e - 128), as ggml computes it
// (e < 2 gives the subnormals).
static inline float quant_e8m0_half(uint8_t e)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}

// quant_e8m0_half for every e, for kernels: one load instead of a shift, a
// compare and a move per block.
extern const float quant_e8m0_half_table[256];

// Scalar conversions (exact, round-to-nearest-even).
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);

// Dequantizes n elements (a multiple of the block size) from x into y.
typedef void (*quant_to_float_fn)(const void *x, float *y, int64_t n);
// Quantizes n elements (a multiple of the block size) from x into y.
typedef void (*quant_from_float_fn)(const float *x, void *y, int64_t n);

// The integer form of one 256-value block of the i-quant and ternary types
// that pair with Q8_K: value j is d * scale * ls[j / 16] * q[j], where
// scale is the type's constant (quant_traits.iq_scale; 1/8 for IQ1 and IQ2,
// whose group scales are odd multiples of 1/8). Dot products with Q8_K then
// run in integers: sum over groups of ls * (q . x), times d * scale * x.d.
struct quant_iq_block {
    float d;         // the block's f16 scale
    int16_t ls[16];  // per 16 values
    int8_t q[QK_K];  // |q| <= 127
};
typedef void (*quant_iq_decode_fn)(const void *block, struct quant_iq_block *out);

struct quant_traits {
    const char *name;     // "Q4_K"
    uint32_t block_size;  // elements per block
    uint32_t type_size;   // bytes per block
    bool is_quantized;
    quant_to_float_fn to_float;          // every supported type
    quant_from_float_fn from_float_ref;  // NULL where we do not quantize to this type
    quant_iq_decode_fn iq_decode;        // the Q8_K-paired i-quant / ternary types
    float iq_scale;
    // The 16-value types (IQ4_NL, MXFP4): value j of a block is
    // nl_values[nibble j] * nl_scale(block), nibbles in the block's last 16 bytes.
    const int8_t *nl_values;
    float (*nl_scale)(const void *block);
};

// The functions of each type that its family in the type table
// (gguf/types.def) names, declared from it: quant_<s>_to_float for every
// type the engine runs, quant_<s>_from_float for FLOAT / BLOCK / ACT types,
// the 16 values and block scale of an NL type (quant_iq4_nl_values, which
// IQ4_XS shares; quant_mxfp4_values, E2M1 doubled) and the integer decoder
// of an IQ type. The traits table points at them.
#define QUANT_DECL_NONE
#define QUANT_DECL_FLOAT(s, act)                                                                   \
    void quant_##s##_to_float(const void *x, float *y, int64_t n);                                 \
    void quant_##s##_from_float(const float *x, void *y, int64_t n);
#define QUANT_DECL_BLOCK(s, act) QUANT_DECL_FLOAT(s, act)
#define QUANT_DECL_ACT(s)        QUANT_DECL_FLOAT(s, s)
#define QUANT_DECL_NL(s)                                                                           \
    void quant_##s##_to_float(const void *x, float *y, int64_t n);                                 \
    extern const int8_t quant_##s##_values[16];                                                    \
    float quant_##s##_scale(const void *block);
#define QUANT_DECL_IQ(s, scale)                                                                    \
    void quant_##s##_to_float(const void *x, float *y, int64_t n);                                 \
    void quant_##s##_decode(const void *b, struct quant_iq_block *o);
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) QUANT_DECL_##fam
#include "gguf/types.def"
#undef GGUF_TYPE_ROW

// Traits for a ggml type id (the row of gguf/types.def), or NULL for a type
// we do not support.
const struct quant_traits *quant_traits_get(uint32_t type);
// Bytes of a row of n elements; 0 if n is not a multiple of the block size
// or the type is unknown.
size_t quant_row_size(uint32_t type, int64_t n);

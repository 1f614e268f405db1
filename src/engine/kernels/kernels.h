// kernels: the hot inner loops of the engine, with a scalar reference twin for
// each and SIMD variants (AVX2+FMA+F16C, AVX-512, NEON) chosen at run time by
// CPU feature detection, so one binary runs well on any x86-64 or arm64.
//
// The model of a matrix product is ggml's: a weight row of type T is dotted
// with an activation row that was first converted to T's vec_dot_type (Q8_0
// for Q4_0 / Q5_0 / Q8_0, Q8_1 for Q4_1 / Q5_1 as in ggml, Q8_K for the
// k-quants, and F32 / F16 / BF16 for the float types). Integer dot products
// then do the bulk of the work. OLLAMA_KERNELS_ISA=scalar|avx2|avx512 caps
// the ISA kernels_best_isa picks.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kernels_isa {
    KERNELS_ISA_SCALAR = 0,
    KERNELS_ISA_AVX2,    // AVX2 + FMA + F16C
    KERNELS_ISA_AVX512,  // AVX-512 F/BW/VL (+VNNI, BF16 where present)
    KERNELS_ISA_NEON,
    KERNELS_ISA_COUNT_,
};

// Activation row conversion: n floats into vec_dot_type blocks.
typedef void (*kernels_from_float_fn)(const float *x, void *y, int64_t n);
// s = dot(w[0..n), x[0..n)) where w has the weight type and x the
// vec_dot_type. n is a multiple of the block size.
typedef void (*kernels_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);
// Optional tile: s[c * s_stride + r] = dot(w row r, x row c) for r < nr, c < nc
// (rows w_stride bytes apart, activation rows x_stride bytes apart). NULL
// when the variant has no tile; callers fall back to vec_dot.
typedef void (*kernels_gemm_fn)(int64_t n, float *s, size_t s_stride, const void *w,
                                size_t w_stride, const void *x, size_t x_stride, int nr, int nc);

// Panel products, for prompt batches of the types whose blocks decode to
// int8 values times group scales (the i-quants, TQ1_0 / TQ2_0, IQ4_NL,
// MXFP4): up to KERNELS_PANEL_ROWS weight rows are decoded once into a
// panel (int8, a row per 32-bit lane, kernels/internal.h), which then meets
// every activation row of the batch; the plain gemm decodes each weight
// block again for every tile of columns. The activations go through
// panel_from_float: the vec_dot_type's quantization (same values), stored
// as unsigned bytes (q + 128) after one f32 scale per activation block
// (kernels_panel_act_bytes per row).
#define KERNELS_PANEL_ROWS 16
// Batches of at least this many activation rows take the panel.
#define KERNELS_PANEL_MIN_COLS 8
// Writes rows w, w + w_stride, ... (nr <= KERNELS_PANEL_ROWS of n elements)
// into panel (kernels_panel_bytes(type, n)), the rows past nr as zeros.
typedef void (*kernels_panel_decode_fn)(int64_t n, void *panel, const void *w, size_t w_stride,
                                        int nr);
// s[c * s_stride + r] = dot(panel row r, x row c) for r < nr, c < nc; x rows
// from panel_from_float, x_stride bytes apart.
typedef void (*kernels_panel_gemm_fn)(int64_t n, float *s, size_t s_stride, const void *panel,
                                      const void *x, size_t x_stride, int nr, int nc);

struct kernels_type {
    uint32_t vec_dot_type;             // gguf type id of the activations
    kernels_from_float_fn from_float;  // float -> vec_dot_type
    kernels_vec_dot_fn vec_dot;
    kernels_gemm_fn gemm;  // may be NULL
    int gemm_nr, gemm_nc;  // tile shape when gemm != NULL
    // The product over weights rewritten by kernels_interleave_x8 (rows in
    // groups of 8, w at a group start, rows still w_stride bytes apart on
    // average): nr a multiple of 8, any nc (one column too). NULL when the
    // type has no interleaved layout.
    kernels_gemm_fn gemm_x8;
    // Panel products (above); NULL where the ISA has none for the type.
    kernels_from_float_fn panel_from_float;  // activation rows of the panel
    kernels_panel_decode_fn panel_decode;
    kernels_panel_gemm_fn panel_gemm;
};

// Rewrites n_rows rows of n elements of `type` (contiguous rows) into the
// layout gemm_x8 reads: each group of 8 rows becomes, per block of columns,
// the 8 rows' scales and then their quants interleaved 4 bytes at a time, so
// one vector lane holds one row. Same size as the input; dst and src must
// not overlap. False (nothing written) when the type has no such layout or
// n_rows is not a multiple of 8.
bool kernels_interleave_x8(uint32_t type, void *dst, const void *src, int64_t n_rows, int64_t n);
// The inverse for one row: writes row j (0..7) of the interleaved 8-row
// group at `group` (n elements per row) in the type's own block format, the
// bytes kernels_interleave_x8 read. False for a type without the layout.
bool kernels_x8_row(uint32_t type, const void *group, int j, int64_t n, void *row);

// The matrix product the engine wants: s[c * s_stride + r] = dot(w row r,
// x row c) for r < nr, c < nc (x already converted with k->from_float). Uses
// the gemm tile where it pays (two or more columns) and vec_dot otherwise.
// Thread-safe; callers split rows (or columns) across threads.
void kernels_matmul(const struct kernels_type *k, int64_t n, float *s, size_t s_stride,
                    const void *w, size_t w_stride, const void *x, size_t x_stride, int nr, int nc);

// Bytes of one panel of rows of n elements of `type`, and of one activation
// row of the panel products of `type` (0 if the type has no panel layout or
// n is not a multiple of its block size).
size_t kernels_panel_bytes(uint32_t type, int64_t n);
size_t kernels_panel_act_bytes(uint32_t type, int64_t n);

// Detects the CPU once (thread-safe) and returns the best ISA available.
enum kernels_isa kernels_best_isa(void);
const char *kernels_isa_name(enum kernels_isa isa);
// Whether the machine can run isa.
bool kernels_isa_supported(enum kernels_isa isa);

// Kernels for weight type `type` at the best ISA, or NULL if the type has no
// matrix-product kernel (e.g. IQ types).
const struct kernels_type *kernels_get(uint32_t type);
// The same at a given ISA (for tests comparing SIMD with scalar); NULL if
// that ISA has no kernel for the type or the CPU lacks it.
const struct kernels_type *kernels_get_isa(uint32_t type, enum kernels_isa isa);

// Element-wise helpers used by the engine's ops (best ISA, scalar twins
// under the _ref suffix for tests).
void kernels_f16_to_f32_row(const uint16_t *x, float *y, int64_t n);
void kernels_f32_to_f16_row(const float *x, uint16_t *y, int64_t n);
float kernels_dot_f32(const float *a, const float *b, int64_t n);
void kernels_axpy_f32(float *y, float a, const float *x, int64_t n);      // y += a*x
float kernels_dot_f16_f32(const uint16_t *a, const float *b, int64_t n);  // K cache in f16
void kernels_axpy_f16(float *y, float a, const uint16_t *x, int64_t n);   // V cache in f16
// One row of a Mamba-2 scan step: s = s·dA + dx·B, returns Σ s·C.
float kernels_ssm_step(float *s, const float *B, const float *C, float dA, float dx, int64_t n);

// Gated activations of a feed-forward block: y[i] = act(gate[i]) * up[i].
// SiLU is x / (1 + e^-x) (SIMD variants use a polynomial e^x within 2 ulp,
// as ggml's do); GELU is the tanh form read from a table by the input
// rounded to f16, the result rounded to f16, 0 below -10 and x above 10:
// exactly ggml's GELU on the CPU, at every ISA.
void kernels_silu_glu(float *y, const float *gate, const float *up, int64_t n);
void kernels_gelu_glu(float *y, const float *gate, const float *up, int64_t n);
float kernels_silu(float x);
float kernels_gelu(float x);
// Scalar reference twins of the element-wise helpers.
void kernels_f16_to_f32_row_ref(const uint16_t *x, float *y, int64_t n);
void kernels_f32_to_f16_row_ref(const float *x, uint16_t *y, int64_t n);
float kernels_dot_f32_ref(const float *a, const float *b, int64_t n);
void kernels_axpy_f32_ref(float *y, float a, const float *x, int64_t n);
float kernels_dot_f16_f32_ref(const uint16_t *a, const float *b, int64_t n);
void kernels_axpy_f16_ref(float *y, float a, const uint16_t *x, int64_t n);
float kernels_ssm_step_ref(float *s, const float *B, const float *C, float dA, float dx, int64_t n);
void kernels_silu_glu_ref(float *y, const float *gate, const float *up, int64_t n);
void kernels_gelu_glu_ref(float *y, const float *gate, const float *up, int64_t n);

// The element-wise helpers of one ISA (for tests; kernels_ops_isa returns
// NULL when the CPU lacks the ISA). Every field is set.
struct kernels_ops {
    void (*f16_to_f32_row)(const uint16_t *x, float *y, int64_t n);
    void (*f32_to_f16_row)(const float *x, uint16_t *y, int64_t n);
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n);
    float (*dot_f16_f32)(const uint16_t *a, const float *b, int64_t n);
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int64_t n);
    void (*silu_glu)(float *y, const float *gate, const float *up, int64_t n);
    void (*gelu_glu)(float *y, const float *gate, const float *up, int64_t n);
    float (*ssm_step)(float *s, const float *B, const float *C, float dA, float dx, int64_t n);
};
const struct kernels_ops *kernels_ops_isa(enum kernels_isa isa);

// Bytes of one row of n elements of a type the engine supports (0 if n is not
// a multiple of its block size), e.g. of vec_dot_type to size the buffer for
// from_float. The geometry is the type table's (gguf/types.def).
size_t kernels_row_size(uint32_t vec_dot_type, int64_t n);

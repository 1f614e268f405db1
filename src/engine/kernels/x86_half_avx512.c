// AVX-512 tiles for F32, F16 and BF16 weights (x86_half.inc): 512-bit
// vectors, BF16 as split pairs for CPUs without AVX512_BF16.
#define HALF_SUFFIX avx512
#define HALF_W      512
#define HALF_DPBF16 0
#include "x86_half.inc"

HALF_GEMM(gemm_f32, HALF_F32)
HALF_GEMM(gemm_f16, HALF_F16)
HALF_GEMM(gemm_bf16, HALF_BF16)

#define HALF_ROW(t, fn, kind) [t] = {.gemm = fn, .gemm_nr = HALF_RM, .gemm_nc = HALF_RN_OF(kind)}

const struct kernels_type kernels_avx512_half_table[KERNELS_NTYPES] = {
    HALF_ROW(GGUF_TYPE_F32, gemm_f32_avx512, HALF_F32),
    HALF_ROW(GGUF_TYPE_F16, gemm_f16_avx512, HALF_F16),
    HALF_ROW(GGUF_TYPE_BF16, gemm_bf16_avx512, HALF_BF16),
};

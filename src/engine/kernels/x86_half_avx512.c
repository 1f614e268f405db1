// AVX-512 tiles for F16, BF16 and F32 weights (x86_half.inc), BF16 as split
// pairs for CPUs without AVX512_BF16.
#define HALF_SUFFIX avx512
#define HALF_DPBF16 0
#include "x86_half.inc"

HALF_GEMM(gemm_f16, HALF_F16)
HALF_GEMM(gemm_bf16, HALF_BF16)
HALF_GEMM(gemm_f32, HALF_F32)
HALF_GEMM_X8(gemm_x8_f16, HALF_F16)
HALF_GEMM_X8(gemm_x8_f32, HALF_F32)

const struct kernels_type kernels_avx512_half_table[KERNELS_NTYPES] = {
    [GGUF_TYPE_F16] = {.gemm = gemm_f16_avx512,
                       .gemm_nr = HALF_RM,
                       .gemm_nc = HALF_RN_OF(HALF_F16),
                       .gemm_x8 = gemm_x8_f16_avx512},
    [GGUF_TYPE_BF16] = {.gemm = gemm_bf16_avx512,
                        .gemm_nr = HALF_RM,
                        .gemm_nc = HALF_RN_OF(HALF_BF16)},
    [GGUF_TYPE_F32] = {.gemm = gemm_f32_avx512,
                       .gemm_nr = HALF_RM,
                       .gemm_nc = HALF_RN_OF(HALF_F32),
                       .gemm_x8 = gemm_x8_f32_avx512},
};

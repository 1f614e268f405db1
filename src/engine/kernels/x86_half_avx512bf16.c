// AVX-512 BF16 tile with vdpbf16ps (x86_half.inc), overlaid on the AVX-512
// table only when the CPU has AVX512_BF16 (kernels.c). The only file built
// with -mavx512bf16.
#define HALF_SUFFIX avx512bf16
#define HALF_DPBF16 1
#include "x86_half.inc"

HALF_GEMM(gemm_bf16, HALF_BF16)
HALF_GEMM_X8(gemm_x8_bf16, HALF_BF16)

const struct kernels_type kernels_avx512bf16_table[KERNELS_NTYPES] = {
    [GGUF_TYPE_BF16] = {.gemm = gemm_bf16_avx512bf16,
                        .gemm_nr = HALF_RM,
                        .gemm_nc = HALF_RN_OF(HALF_BF16),
                        .gemm_x8 = gemm_x8_bf16_avx512bf16},
};

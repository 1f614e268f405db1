// AVX-512 (F/BW/VL/DQ + VNNI) kernels: the x86_simd.inc code with vpdpbusd /
// vpdpwssd for the integer dot products and 32 vector registers (so larger
// gemm tiles). Selected at run time.
#define KSIMD_VNNI   1
#define KSIMD_SUFFIX avx512
#include "x86_simd.inc"

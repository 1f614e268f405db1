// AVX-512 (F/BW/VL/DQ + VNNI) kernels: the x86_simd.inc code with vpdpbusd /
// vpdpwssd for the integer dot products, 32 vector registers (so larger
// gemm tiles) and 512-bit float loops. Selected at run time.
#define KSIMD_VNNI 1
#define KSIMD_SUFFIX avx512
#include "x86_simd.inc"

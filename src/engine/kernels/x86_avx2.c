// AVX2 + FMA + F16C kernels (compiled with exactly those flags, selected at
// run time). The code is shared with the AVX-512 build in x86_simd.inc.
#define KSIMD_VNNI   0
#define KSIMD_SUFFIX avx2
#include "x86_simd.inc"

// AVX2 + FMA + F16C i-quant / ternary / MXFP4 kernels (x86_iq.inc).
#define KIQ_VNNI   0
#define KIQ_SUFFIX avx2
#define KIQ_TABLE  kernels_avx2_iq_table
#include "x86_iq.inc"

// AVX-512 (VL + VNNI) i-quant / ternary / MXFP4 kernels (x86_iq.inc).
#define KIQ_VNNI   1
#define KIQ_SUFFIX avx512
#define KIQ_TABLE  kernels_avx512_iq_table
#include "x86_iq.inc"

// The attention tile kernels (attn_tile.inc) built for the avx512 instruction set.
#define ATTN_TABLE kernels_attn_avx512
#include "engine/kernels/attn_tile.inc"

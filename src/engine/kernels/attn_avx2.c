// The attention tile kernels (attn_tile.inc) built for the avx2 instruction set.
#define ATTN_TABLE kernels_attn_avx2
#include "engine/kernels/attn_tile.inc"

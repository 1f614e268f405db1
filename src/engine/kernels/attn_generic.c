// The attention tile kernels (attn_tile.inc) built for the generic instruction set.
#define ATTN_TABLE kernels_attn_generic
#include "engine/kernels/attn_tile.inc"

// The phi3 architecture (Phi-3/3.5 mini and medium, Phi-4-mini;
// docs/spec/architectures.md §7): llama's block with NeoX RoPE on part of each
// head (rope.dimension_count), fused Q/K/V (attn_qkv) and fused gate|up
// (ffn_up with 2·n_ff rows, gate first) bound as views, LongRoPE factors
// (rope_factors_long/short, chosen by the context length at load, with
// rope.scaling.attn_factor on cos/sin) and usually an untied output. The
// sliding_window key some files carry is ignored, as llama.cpp does.
#include "model/internal.h"

const struct model_arch model_arch_phi3 = {
    .name = "phi3",
    .rope_mode = ENGINE_ROPE_NEOX,
    .fused_qkv = true,
    .fused_gate_up = true,
    .longrope = true,
    .act = MODEL_ACT_SILU,
};

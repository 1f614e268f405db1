// The qwen2 architecture (Qwen2, Qwen2.5, Qwen2.5-Coder, DeepSeek-R1 distills
// of Qwen; docs/spec/architectures.md §3): llama's block with NeoX RoPE (dims i
// and i + head_dim/2 rotate together) and biases on the Q/K/V projections,
// usually with tied output.
#include "model/internal.h"

const struct model_arch model_arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qkv_bias = true,
    .act = MODEL_ACT_SILU,
};

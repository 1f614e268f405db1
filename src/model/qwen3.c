// The qwen3 architecture (Qwen3 0.6B-32B dense, Qwen3-Embedding;
// docs/spec/architectures.md §4): qwen2 without the Q/K/V biases, with an
// RMSNorm over each head of Q and of K before RoPE, and head_dim from
// attention.key_length (so q_dim may differ from n_embd). Qwen3-Embedding
// files say pooling_type 3 (last token); the runner pools as the key says.
#include "model/internal.h"

const struct model_arch model_arch_qwen3 = {
    .name = "qwen3",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qk_norm = true,
    .act = MODEL_ACT_SILU,
};

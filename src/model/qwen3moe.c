// The qwen3moe architecture (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder
// 30B; llama.cpp src/models/qwen3moe.cpp): qwen3's attention (per-head Q/K
// RMSNorm, NeoX RoPE, no biases) and a mixture-of-experts FFN: a softmax
// router over expert_count experts, the expert_used_count largest chosen
// with their weights renormalised to sum 1 (norm_topk_prob), SwiGLU experts
// of expert_feed_forward_length stored as 3-D ffn_{gate,up,down}_exps.
#include "model/internal.h"

static int qwen3moe_bind(struct model *m, struct err *e)
{
    static const struct model_moe_spec spec = {
        .gating = ENGINE_MOE_SOFTMAX,
        .norm_w = true,
        .act = ENGINE_MOE_SILU,
    };
    return model_bind_moe(m, &spec, e);
}

const struct model_arch model_arch_qwen3moe = {
    .name = "qwen3moe",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qk_norm = true,
    .act = MODEL_ACT_SILU,
    .bind = qwen3moe_bind,
    .ffn = model_ffn_moe,
    .prepare = model_prepare_moe,
};

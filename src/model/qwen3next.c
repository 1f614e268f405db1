// The qwen3next architecture (Qwen3-Next-80B-A3B; llama.cpp
// src/models/qwen3next.cpp): the gated delta-net hybrid of qwen35.c with a
// softmax MoE plus a σ-gated shared expert in every layer. Its files come
// with the fused delta-net projections ssm_in (q, k, v, z grouped per key
// head) and ssm_ba (beta, alpha grouped the same way), with attn_qkv /
// attn_gate and ssm_ba (Ollama's converter splits in_proj_qkvz only), or
// with qwen35's separate ones; value head h reads key head h / (Hv/Hk), as
// llama.cpp repeats each key head in place (its value heads are not
// reordered as Qwen3.5's converter does).
#include "model/internal.h"

const struct model_arch model_arch_qwen3next = {
    .name = "qwen3next",
    .rope_mode = ENGINE_ROPE_NEOX,
    .act = MODEL_ACT_SILU,
    .names = {.ffn_norm = "post_attention_norm"},
    .load = model_gdn_load,
    .bind = model_gdn_bind,
    .forward = model_gdn_forward,
    .ffn = model_ffn_moe,
    .prepare = model_gdn_prepare,
    .custom_layers = true,
};

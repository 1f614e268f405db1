// The llama architecture (Llama 2/3/3.x, Mistral, TinyLlama, SmolLM, ...;
// docs/spec/architectures.md §2): pre-norm decoder blocks with RMSNorm, GQA
// attention with RoPE on adjacent pairs (rope_freqs factors for Llama 3.1+),
// a SwiGLU MLP, and an output matrix that may be tied to the embeddings.
//
// With expert_count > 0 (Mixtral; §12.8) the MLP is a mixture of experts:
// a softmax router over all experts, the expert_used_count largest chosen
// and their weights renormalised, SwiGLU experts in 3-D ffn_*_exps tensors.
// Such a file loads through a variant row with the MoE hooks.
#include "model/internal.h"

static const struct model_arch llama_moe;

static int llama_load(struct model *m, struct err *e)
{
    (void)e;
    uint32_t n_expert = 0;
    if (gguf_get_arch_u32(m->g, "expert_count", &n_expert) && n_expert > 0)
        m->arch = &llama_moe;
    return 0;
}

static int llama_moe_bind(struct model *m, struct err *e)
{
    static const struct model_moe_spec spec = {
        .gating = ENGINE_MOE_SOFTMAX,
        .norm_w = true,
        .act = ENGINE_MOE_SILU,
    };
    return model_bind_moe(m, &spec, e);
}

const struct model_arch model_arch_llama = {
    .name = "llama",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .rope_freqs = true,
    .act = MODEL_ACT_SILU,
    .load = llama_load,
};

static const struct model_arch llama_moe = {
    .name = "llama",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .rope_freqs = true,
    .act = MODEL_ACT_SILU,
    .bind = llama_moe_bind,
    .ffn = model_ffn_moe,
    .prepare = model_prepare_moe,
};

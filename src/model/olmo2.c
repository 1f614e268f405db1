// The olmo2 architecture (OLMo 2; OLMo 3, which Ollama publishes as
// "olmo3" and llama.cpp runs as olmo2; llama.cpp src/models/olmo2.cpp): no
// norm before the sub-blocks, which read the residual itself; RMSNorm after
// each (post_attention_norm, post_ffw_norm) before its residual add; q and k
// RMSNorm over the whole projection (all heads at once) before NeoX RoPE; a
// SwiGLU MLP; untied output. With attention.sliding_window (OLMo 3) layers
// 0-2 of every 4 are sliding-window ones, on unscaled RoPE.
#include "model/internal.h"

// The sliding-window layers' RoPE has no scaling at all (llama.cpp passes
// freq_scale 1, ext_factor 0, attn_factor 1 for them) and the global base
// (its graph passes the context's freq_base, whatever rope.freq_base_swa says).
static int olmo2_load(struct model *m, struct err *e)
{
    (void)e;
    m->hp.rope_swa.attn_factor = 1.0f;
    m->hp.rope_swa.freq_base = m->hp.rope.freq_base;
    return 0;
}

const struct model_arch model_arch_olmo2 = {
    .name = "olmo2",
    .alias = "olmo3",
    .rope_mode = ENGINE_ROPE_NEOX,
    .rope_full = true,
    .swa_pattern = 4,
    .swa_unscaled = true,
    .qk_norm = true,
    .qk_norm_full = true,
    .no_pre_norms = true,
    .post_norms = true,
    .act = MODEL_ACT_SILU,
    .load = olmo2_load,
};

// The gemma2 architecture (Gemma 2 2B/9B/27B; docs/spec/architectures.md §5):
// embeddings scaled by sqrt(n_embd), RMSNorm before and after attention and
// the FFN, a GELU-gated FFN, NeoX RoPE, Q scaled before the product, the
// attention scores and the final logits soft-capped (tanh), and sliding
// window attention on even layers (pattern 2), global on odd ones. The
// output is tied to the embeddings. Norm weights carry Gemma's "+1".
#include "model/internal.h"

#include <math.h>

// Gemma 2 and 3 27B (46 and 62 layers) scale Q by 1/sqrt(n_embd / n_head),
// the others by 1/sqrt(head_dim).
int model_gemma_query_scale(struct model *m, struct err *e)
{
    (void)e;
    if (m->hp.n_layer == (m->arch == &model_arch_gemma2 ? 46 : 62))
        m->hp.q_scale = 1.0f / sqrtf((float)(m->hp.n_embd / m->hp.n_head));
    return 0;
}

const struct model_arch model_arch_gemma2 = {
    .name = "gemma2",
    .rope_mode = ENGINE_ROPE_NEOX,
    .embd_scale = true,
    .q_prescale = true,
    .swa_pattern = 2,
    .default_swa = 4096,
    .softcaps = true,
    .default_attn_softcap = 50.0f,
    .default_final_softcap = 30.0f,
    .post_norms = true,
    .act = MODEL_ACT_GELU,
    .load = model_gemma_query_scale,
};

// The granite architecture (Granite 3.x dense; llama.cpp
// src/models/granite.cpp): llama's block with Granite's scalars: the
// embeddings times embedding_scale, attention.scale instead of
// 1/sqrt(head_dim), each branch's output times residual_scale before its
// residual add, the logits divided by logit_scale; RoPE only when
// rope.scaling.finetuned is true (its default). Files with experts
// (Granite MoE) are not supported here.
#include "model/internal.h"

#include <math.h>

static int granite_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    uint32_t n_expert = 0;
    if (gguf_get_arch_u32(m->g, "expert_count", &n_expert) && n_expert > 0)
        return err_set(e, ERR_UNSUPPORTED, "granite: mixture-of-experts files are not supported");
    float v = 0, logit = 0;
    if (gguf_get_arch_f32(m->g, "embedding_scale", &v))
        hp->embd_scale = v;
    if (gguf_get_arch_f32(m->g, "attention.scale", &v) && v != 0.0f)
        hp->q_scale = v;
    gguf_get_arch_f32(m->g, "residual_scale", &hp->residual_scale);
    if (!gguf_get_arch_f32(m->g, "logit_scale", &logit) || logit == 0.0f || !isfinite(logit))
        return err_set(e, ERR_FORMAT, "missing or invalid key logit_scale");
    hp->logit_scale = 1.0f / logit;
    if (!isfinite(hp->embd_scale) || !isfinite(hp->q_scale) || !isfinite(hp->residual_scale))
        return err_set(e, ERR_FORMAT, "invalid granite scales");
    char key[128];
    bool rope = true;
    gguf_get_bool(m->g, model_key(m, key, sizeof key, "rope.scaling.finetuned"), &rope);
    for (int il = 0; il < hp->n_layer && !rope; il++)
        m->layers[il].rope = NULL;
    return 0;
}

const struct model_arch model_arch_granite = {
    .name = "granite",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .rope_freqs = true,
    .act = MODEL_ACT_SILU,
    .load = granite_load,
};

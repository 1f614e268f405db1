// The glm4moe architecture (GLM-4.5, 4.6, 4.7; docs/spec/architectures.md
// §12.10): a llama-like pre-norm block with q/k/v biases, optional per-head
// q/k RMSNorm, NeoX RoPE on rope.dimension_count dims (half the head); the
// FFN reads RMSNorm(x; post_attention_norm). The first
// leading_dense_block_count layers have a dense SwiGLU, the others a
// mixture of experts: sigmoid router, the choice biased by exp_probs_b,
// the chosen (unbiased) weights renormalised when expert_weights_norm and
// multiplied by expert_weights_scale, plus a shared SwiGLU expert.
// block_count counts nextn_predict_layers trailing multi-token-prediction
// blocks, which the forward pass does not run (nor bind).
#include "model/internal.h"

static int glm4moe_load(struct model *m, struct err *e)
{
    uint32_t nextn = 0;
    if (gguf_get_arch_u32(m->g, "nextn_predict_layers", &nextn) && nextn > 0) {
        if (nextn >= (uint32_t)m->hp.n_layer)
            return err_set(e, ERR_FORMAT, "nextn_predict_layers %u of %d blocks", nextn,
                           m->hp.n_layer);
        m->hp.n_layer -= (int)nextn;  // the trunk only
    }
    char key[128];
    if (gguf_find(m->g, model_key(m, key, sizeof key, "rope.dimension_sections")))
        return err_set(e, ERR_UNSUPPORTED,
                       "glm4moe with multi-section RoPE (vision) is not supported");
    return 0;
}

static int glm4moe_bind(struct model *m, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    uint32_t n_dense = 0, gating = 2;
    bool norm_w = false;
    float w_scale = 0;
    gguf_get_arch_u32(m->g, "leading_dense_block_count", &n_dense);
    gguf_get_arch_u32(m->g, "expert_gating_func", &gating);
    gguf_get_arch_f32(m->g, "expert_weights_scale", &w_scale);
    char key[128];
    gguf_get_bool(m->g, model_key(m, key, sizeof key, "expert_weights_norm"), &norm_w);
    if (n_dense > (uint32_t)hp->n_layer || (gating != 1 && gating != 2))
        return err_set(e, ERR_FORMAT, "invalid leading_dense_block_count %u or gating %u", n_dense,
                       gating);
    const struct model_moe_spec spec = {
        .gating = gating == 1 ? ENGINE_MOE_SOFTMAX : ENGINE_MOE_SIGMOID,
        .norm_w = norm_w,
        .act = ENGINE_MOE_SILU,
        .first_layer = (int)n_dense,
        .shared = true,
        .w_scale = w_scale == 1.0f ? 0.0f : w_scale,
    };
    int rc;
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        char n[GGUF_MAX_NAME_LEN + 1];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = model_bind_vector(m, &L->attn_q_norm, NAME("attn_q_norm.weight"), hp->head_dim,
                                    false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->attn_k_norm, NAME("attn_k_norm.weight"), hp->head_dim,
                                    L->attn_q_norm != NULL, e)) < 0)
            return rc;
        if (il >= (int)n_dense)
            continue;
        if ((rc = model_bind_matrix(m, &L->w_gate, NAME("ffn_gate.weight"), hp->n_embd, L->n_ff,
                                    true, e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_up, NAME("ffn_up.weight"), hp->n_embd, L->n_ff, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_down, NAME("ffn_down.weight"), L->n_ff, hp->n_embd,
                                    true, e)) < 0)
            return rc;
#undef NAME
    }
    return model_bind_moe(m, &spec, e);
}

const struct model_arch model_arch_glm4moe = {
    .name = "glm4moe",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qkv_bias = true,
    .act = MODEL_ACT_SILU,
    .names = {.ffn_norm = "post_attention_norm"},
    .load = glm4moe_load,
    .bind = glm4moe_bind,
    .ffn = model_ffn_moe_or_dense,
    .prepare = model_prepare_moe,
};

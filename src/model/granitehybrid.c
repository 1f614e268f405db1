// Granite 4.0-H (llama.cpp src/models/granite-hybrid.cpp; spec
// architectures.md §12.4): a layer whose attention.head_count_kv entry is 0
// is a Mamba-2 mixer (mamba2.c), else GQA attention (optional biases; RoPE
// only when rope.scaling.finetuned is true, its default). Every layer then
// has an FFN after ffn_norm: a MoE (softmax, renormalised, SwiGLU experts
// of width feed_forward_length) plus an optional shared SwiGLU expert, or a
// dense SwiGLU when the file has no experts. Granite's scalars, each
// optional: the embeddings times embedding_scale, attention.scale instead
// of 1/sqrt(hd), each branch's output times residual_scale before its
// residual add, the logits divided by logit_scale.
#include "model/internal.h"

#include <math.h>

static int granitehybrid_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    float v = 0.0f;
    if (gguf_get_arch_f32(m->g, "embedding_scale", &v))
        hp->embd_scale = v;
    if (gguf_get_arch_f32(m->g, "attention.scale", &v) && v != 0.0f)
        hp->q_scale = v;
    gguf_get_arch_f32(m->g, "residual_scale", &hp->residual_scale);
    gguf_get_arch_f32(m->g, "logit_scale", &hp->logit_divisor);
    if (!isfinite(hp->embd_scale) || !isfinite(hp->q_scale) || !isfinite(hp->residual_scale) ||
        !isfinite(hp->logit_divisor))
        return err_set(e, ERR_FORMAT, "invalid granite scales");
    return 0;
}

// The dense SwiGLU FFN of a file without experts.
static int bind_dense_ffn(struct model *m, int il, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    const int64_t D = m->hp.n_embd, F = L->n_ff;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_matrix(m, &L->w_gate, NAME("ffn_gate.weight"), D, F, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->w_up, NAME("ffn_up.weight"), D, F, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->w_down, NAME("ffn_down.weight"), F, D, true, e)) < 0)
        return rc;
#undef NAME
    return 0;
}

static int granitehybrid_bind(struct model *m, struct err *e)
{
    static const struct model_moe_spec moe = {
        .gating = ENGINE_MOE_SOFTMAX,
        .norm_w = true,
        .act = ENGINE_MOE_SILU,
        .weight_keys = true,
        .shared = true,
        .n_ff_is_expert = true,
    };
    char key[128];
    bool rope = true, experts = false;
    uint32_t n_expert = 0;
    gguf_get_bool(m->g, model_key(m, key, sizeof key, "rope.scaling.finetuned"), &rope);
    experts = gguf_get_arch_u32(m->g, "expert_count", &n_expert) && n_expert > 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        int rc;
        if (L->n_head_kv == 0) {
            rc = model_mamba2_bind(m, il, e);
        } else {
            rc = model_bind_layer_attn(m, il, e);
            if (!rope)
                L->rope = NULL;
        }
        if (rc < 0 || (rc = model_bind_layer_ffn(m, il, e)) < 0 ||
            (!experts && (rc = bind_dense_ffn(m, il, e)) < 0))
            return rc;
    }
    return experts ? model_bind_moe(m, &moe, e) : 0;
}

// x += residual_scale · xb (n rows).
static void residual(struct model *m, int n)
{
    struct engine_backend *be = m->be;
    const int64_t k = (int64_t)n * m->hp.n_embd;
    if (m->hp.residual_scale != 0.0f)
        engine_scale(be, m->s.xb, m->s.xb, m->hp.residual_scale, k);
    engine_add(be, m->s.x, m->s.x, m->s.xb, k);
}

static void granitehybrid_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    int n = ub->n;

    model_embed_input(m, ub);  // x: (n, n_embd)
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        const bool last = il == hp->n_layer - 1;
        if (L->mixer) {  // every row: the state must see each token
            engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, n_embd, hp->eps);
            model_mamba2(m, L, ub, s->xb, s->xb, n);
            if (last && ub->n_out == 0)
                return;
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->x, s->xb, NULL},
                                           (const int[]){n_embd, n_embd});
        } else {
            model_attn_qkv(m, L, ub, n);  // normed by attn_norm; K, V cached
            if (last && ub->n_out == 0)
                return;
            model_attn_attend(m, L, ub, n);
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->x, s->att, NULL},
                                           (const int[]){n_embd, q_dim});
            engine_matmul(be, s->xb, &L->wo, L->bo, s->att, n);  // (n, n_embd)
        }
        residual(m, n);
        engine_rmsnorm(be, s->xb, s->x, L->ffn_norm, n, n_embd, hp->eps);
        model_ffn_moe_or_dense(m, L, s->xb, s->xb, n);
        residual(m, n);
    }
    model_output_logits(m, ub, n);
    if (hp->logit_divisor != 0.0f) {  // host memory
        const float inv = 1.0f / hp->logit_divisor;
        for (int64_t i = 0; i < (int64_t)n * hp->n_vocab; i++)
            ub->out_logits[i] *= inv;
    }
}

const struct model_arch model_arch_granitehybrid = {
    .name = "granitehybrid",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .act = MODEL_ACT_SILU,
    .load = granitehybrid_load,
    .bind = granitehybrid_bind,
    .forward = granitehybrid_forward,
    .ffn = model_ffn_moe,  // MoE layers (model_bind_layer_ffn binds only ffn_norm)
    .prepare = model_prepare_moe,
    .custom_layers = true,
};

// The Nemotron-H hybrids (llama.cpp src/models/nemotron-h.cpp; spec
// architectures.md §12.5): one sub-block per layer, x = x + block(RMSNorm(x;
// attn_norm)), the block chosen by the per-layer attention.head_count_kv /
// feed_forward_length arrays:
//   both 0         a Mamba-2 mixer (mamba2.c)
//   kv > 0, ff 0   attention without RoPE (scale attention.scale or 1/sqrt(hd))
//   ff > 0         nemotron_h: ffn_down(relu(ffn_up · h + b)²) + b
//                  nemotron_h_moe: a MoE (sigmoid router, exp_probs_b for the
//                  choice, expert_weights_norm / _scale, squared-ReLU experts
//                  without gate) plus a squared-ReLU shared expert
//
// v0.5.0 reads the RMS epsilon from attention.layer_norm_rms_epsilon, else
// attention.layer_norm_epsilon; older files (the tiny nemotron_h_moe
// fixture) have only the first, and we accept either.
//
// Ollama's published nemotron_h_moe files use llama.cpp's names and keys
// (their compat layer only renames the latent-FFN tensors of the
// 120B-A12B variant, which we refuse, and skips the "mtp." tensors, which
// we never bind); its nemotron_h_omni files are read through an alias.
#include "model/internal.h"

#include <math.h>

enum nemotron_block { NEMO_MAMBA, NEMO_ATTN, NEMO_FFN };

static enum nemotron_block block_of(const struct model_layer *L)
{
    if (L->n_ff > 0)
        return NEMO_FFN;
    return L->n_head_kv > 0 ? NEMO_ATTN : NEMO_MAMBA;
}

static int nemotron_h_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    char key[128];
    if (!gguf_find(m->g, model_key(m, key, sizeof key, "attention.layer_norm_rms_epsilon")))
        gguf_get_arch_f32(m->g, "attention.layer_norm_epsilon", &hp->eps);
    float scale = 0.0f;
    if (gguf_get_arch_f32(m->g, "attention.scale", &scale) && scale != 0.0f)
        hp->q_scale = scale;
    if (!(hp->eps >= 0) || !isfinite(hp->eps) || !isfinite(hp->q_scale))
        return err_set(e, ERR_FORMAT, "invalid epsilon or attention scale");
    return 0;
}

// The dense MLP's tensors: attn_norm (its norm), ffn_up / ffn_down with
// optional biases.
static int bind_mlp(struct model *m, int il, bool moe, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    const int64_t D = m->hp.n_embd, F = L->n_ff;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"), D, true, e)) < 0 || moe)
        return rc;  // model_bind_moe binds the rest
    if ((rc = model_bind_matrix(m, &L->w_up, NAME("ffn_up.weight"), D, F, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->w_down, NAME("ffn_down.weight"), F, D, true, e)) < 0 ||
        (rc = model_bind_vector(m, &L->b_up, NAME("ffn_up.bias"), F, false, e)) < 0 ||
        (rc = model_bind_vector(m, &L->b_down, NAME("ffn_down.bias"), D, false, e)) < 0)
        return rc;
#undef NAME
    return 0;
}

static int nemotron_h_bind(struct model *m, struct err *e)
{
    static const struct model_moe_spec spec = {
        .gating = ENGINE_MOE_SIGMOID,
        .act = ENGINE_MOE_RELU_SQR,
        .no_gate = true,
        .sel_bias = true,
        .weight_keys = true,
        .shared = true,
        .ff_layers_only = true,
    };
    // Experts when the file has them (nemotron_h_moe; nemotron_h_omni names
    // either kind). The latent-FFN variants (Nemotron 3 Super: experts in a
    // smaller space, ffn_latent_down/up, Ollama's ffn_latent_in/out) are
    // not supported.
    uint32_t n_expert = 0, n_groups = 1, n_groups_used = 0;
    const bool moe = gguf_get_arch_u32(m->g, "expert_count", &n_expert) && n_expert > 0;
    // Group-limited routing (DeepSeek's) acts only with several groups;
    // the released Nemotron 3 files have one.
    gguf_get_arch_u32(m->g, "expert_group_count", &n_groups);
    gguf_get_arch_u32(m->g, "expert_group_used_count", &n_groups_used);
    if (moe && n_groups > 1 && n_groups_used < n_groups)
        return err_set(e, ERR_UNSUPPORTED, "expert groups (%u of %u used) are not supported",
                       n_groups_used, n_groups);
    for (int il = 0; il < m->hp.n_layer; il++) {
        static const char *const latent[] = {"ffn_latent_down", "ffn_latent_in"};
        for (size_t i = 0; i < sizeof latent / sizeof latent[0]; i++) {
            char n[GGUF_MAX_NAME_LEN + 1];
            snprintf(n, sizeof n, "blk.%d.%s.weight", il, latent[i]);
            if (gguf_tensor_find(m->g, n))
                return err_set(e, ERR_UNSUPPORTED, "latent MoE layers (%s) are not supported", n);
        }
    }
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        int rc = 0;
        switch (block_of(L)) {
        case NEMO_MAMBA:
            rc = model_mamba2_bind(m, il, e);
            break;
        case NEMO_ATTN:
            rc = model_bind_layer_attn(m, il, e);
            L->rope = NULL;
            break;
        case NEMO_FFN:
            rc = bind_mlp(m, il, moe, e);
            break;
        }
        if (rc < 0)
            return rc;
    }
    return moe ? model_bind_moe(m, &spec, e) : 0;
}

// x += MLP(h) for the n rows of xb (normed): squared ReLU, no gate.
static void mlp(struct model *m, struct model_layer *L, int n)
{
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    if (L->ext) {
        model_ffn_moe(m, L, s->xb, s->xb, n);
    } else {
        engine_matmul(be, s->hb, &L->w_up, L->b_up, s->xb, n);  // (n, n_ff)
        engine_relu_sqr(be, s->hb, s->hb, (int64_t)n * L->n_ff);
        engine_matmul(be, s->xb, &L->w_down, L->b_down, s->hb, n);  // (n, n_embd)
    }
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * m->hp.n_embd);
}

static void nemotron_h_forward(struct model *m, const struct model_ubatch *ub)
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
        switch (block_of(L)) {
        case NEMO_MAMBA:  // every row: the state must see each token
            engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, n_embd, hp->eps);
            model_mamba2(m, L, ub, s->xb, s->xb, n);
            if (last && ub->n_out == 0)
                return;
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->x, s->xb, NULL},
                                           (const int[]){n_embd, n_embd});
            engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
            break;
        case NEMO_ATTN:
            model_attn_qkv(m, L, ub, n);  // normed by attn_norm; K, V cached
            if (last && ub->n_out == 0)
                return;
            model_attn_attend(m, L, ub, n);
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->x, s->att, NULL},
                                           (const int[]){n_embd, q_dim});
            model_attn_out(m, L, n);
            break;
        case NEMO_FFN:
            if (last && ub->n_out == 0)
                return;
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->x, NULL}, (const int[]){n_embd});
            engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, n_embd, hp->eps);
            mlp(m, L, n);
            break;
        }
    }
    model_output_logits(m, ub, n);
}

// Both rows run either kind (experts when the file has expert_count), as
// llama.cpp's one class does; ffn and prepare serve the MoE layers.
const struct model_arch model_arch_nemotron_h = {
    .name = "nemotron_h",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .default_eps = 1e-5f,  // then attention.layer_norm_epsilon (the load hook)
    .act = MODEL_ACT_SILU,
    .load = nemotron_h_load,
    .bind = nemotron_h_bind,
    .forward = nemotron_h_forward,
    .ffn = model_ffn_moe,
    .prepare = model_prepare_moe,
    .custom_layers = true,
};

// Ollama's nemotron3 files are "nemotron_h_omni" (vision and audio towers
// beside the text model under v., a., mm.; keys under nemotron_h_omni.),
// which Ollama's compat layer loads as nemotron_h(_moe) text: the alias
// reads the text model the same way and leaves the towers alone.
const struct model_arch model_arch_nemotron_h_moe = {
    .name = "nemotron_h_moe",
    .alias = "nemotron_h_omni",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .default_eps = 1e-5f,
    .act = MODEL_ACT_SILU,
    .load = nemotron_h_load,
    .bind = nemotron_h_bind,
    .forward = nemotron_h_forward,
    .ffn = model_ffn_moe,
    .prepare = model_prepare_moe,
    .custom_layers = true,
};

// The cohere2 architecture (Command R7B, Command A; docs/spec/architectures.md
// §12.12): one LayerNorm (no bias) per layer whose output feeds both the
// attention and the SwiGLU FFN, added together to the residual:
//   n = LayerNorm(x; attn_norm)    x' = x + attn(n) + FFN(n)
// Layers with il % pattern < pattern - 1 (sliding_window_pattern, 4 by
// default) attend over a sliding window with RoPE on adjacent pairs; the
// others are global and apply no RoPE. The output is a LayerNorm, the tied
// embeddings, and the logits times logit_scale.
#include "model/internal.h"

#include <math.h>

static int cohere2_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    if (!gguf_get_arch_f32(m->g, "attention.layer_norm_epsilon", &hp->eps) || !(hp->eps >= 0) ||
        !isfinite(hp->eps))
        return err_set(e, ERR_FORMAT, "missing or invalid key attention.layer_norm_epsilon");
    if (!gguf_get_arch_f32(m->g, "logit_scale", &hp->logit_scale) || !isfinite(hp->logit_scale))
        return err_set(e, ERR_FORMAT, "missing or invalid key logit_scale");
    hp->mix_floats = hp->n_embd;  // the FFN's output, until the attention's is added
    // The window's RoPE is the global one (llama.cpp's graph passes the
    // context's base and scale, whatever rope.freq_base_swa says).
    hp->rope_swa = hp->rope;
    return 0;
}

// One forward pass; shapes are (rows, columns) of the activation buffers.
static void cohere2_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    int n = ub->n;

    model_embed_input(m, ub);  // x: (n, n_embd)
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        model_attn_qkv(m, L, ub, n);  // xb = LayerNorm(x); q, k, v
        if (il == hp->n_layer - 1 && ub->n_out == 0)
            return;                               // the cache is filled; nobody wants outputs
        model_dense_ffn(m, L, s->mix, s->xb, n);  // mix: (n, n_embd) from the same norm
        model_attn_attend(m, L, ub, n);           // att: (n, q_dim)
        if (il == hp->n_layer - 1) {
            float *bufs[] = {s->att, s->x, s->mix, NULL};
            const int widths[] = {q_dim, n_embd, n_embd};
            n = model_keep_output_rows(m, ub, bufs, widths);
        }
        model_attn_out(m, L, n);                                  // x += W_o att
        engine_add(be, s->x, s->x, s->mix, (int64_t)n * n_embd);  // x += FFN
    }
    model_output_logits(m, ub, n);
}

const struct model_arch model_arch_cohere2 = {
    .name = "cohere2",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .default_eps = 1e-5f,  // the LayerNorm's epsilon is read by cohere2_load
    .swa_pattern = 4,
    .nope_global = true,
    .layer_norm = true,
    .act = MODEL_ACT_SILU,
    .names = {.ffn_norm = "attn_norm"},  // the FFN reads the attention's norm
    .load = cohere2_load,
    .forward = cohere2_forward,
};

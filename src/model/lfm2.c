// The lfm2 architecture (Liquid LFM2 350M .. 2.6B; llama.cpp
// src/models/lfm2.cpp; and lfm2moe, LFM2-8B-A1B: the same with MoE FFNs
// after leading_dense_block_count dense ones): a hybrid of gated short convolutions and GQA
// attention, one kind per layer (attention.head_count_kv is a per-layer
// array, 0 on the convolution layers). Every layer:
//
//   h = RMSNorm(x; attn_norm)
//   convolution layer:  B, C, x' = in_proj h            (3 × n_embd, in that order)
//                       y = C * conv(B * x')             causal depthwise, kernel
//                                                        shortconv.l_cache, no bias
//                       o = out_proj y
//   attention layer:    q/k/v, per-head q/k RMSNorm, NeoX RoPE, GQA, attn_output
//   x = x + o
//   x = x + W_down(SiLU(W_gate f) * W_up f),  f = RMSNorm(x; ffn_norm)
//   logits = output(RMSNorm(x; token_embd_norm))
//
// The convolution keeps the last l_cache - 1 inputs (B * x') of each slot
// as its recurrent state. Ollama's published files name the final norm
// output_norm (llama.cpp's converter: token_embd_norm) and some carry a
// feed_forward_length that disagrees with the FFN tensors (the tensors'
// shape wins, as Ollama's loader fixes it). A file with
// attention.sliding_window windows every attention layer.
#include "model/internal.h"

#include <string.h>

// A layer's short convolution (model_layer.mixer of a convolution layer).
struct lfm2_conv {
    struct engine_tensor in_b, in_c, in_x;  // row views of shortconv.in_proj: [n_embd, n_embd] each
    struct engine_tensor out_proj;          // [n_embd, n_embd]
    struct engine_conv1d conv;              // kernel from shortconv.conv [l_cache, n_embd]
};

// Scratch per batch row (s.mix): B, C, x', B * x' (then C * conv) and conv.
enum { LFM2_MIX_BUFS = 5 };

static int lfm2_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    uint32_t k;
    if (!gguf_get_arch_u32(m->g, "shortconv.l_cache", &k) || k < 2 || k > 64)
        return err_set(e, ERR_FORMAT, "missing or invalid key shortconv.l_cache");
    // The FFN width of each layer is its ffn_gate's (Ollama's files may
    // state another feed_forward_length).
    hp->n_ff = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        char n[GGUF_MAX_NAME_LEN + 1];
        snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", il);
        const struct gguf_tensor *gt = gguf_tensor_find(m->g, n);
        struct model_layer *L = &m->layers[il];
        if (gt && gt->ne[1] > 0 && gt->ne[1] <= (1 << 22))
            L->n_ff = (int)gt->ne[1];
        if (L->n_ff < 1)
            return err_set(e, ERR_FORMAT, "layer %d: missing feed-forward length", il);
        hp->n_ff = L->n_ff > hp->n_ff ? L->n_ff : hp->n_ff;
        if (L->n_head_kv == 0)
            L->rs.conv_floats = (int64_t)(k - 1) * hp->n_embd;
    }
    // A sliding window, when the file has one, applies to every attention
    // layer (llama.cpp: LLAMA_SWA_TYPE_STANDARD on the non-recurrent layers).
    uint32_t w;
    if (gguf_get_arch_u32(m->g, "attention.sliding_window", &w) && w > 0 && w <= INT32_MAX) {
        hp->n_swa = (int)w;
        for (int il = 0; il < hp->n_layer; il++)
            m->layers[il].swa = m->layers[il].n_head_kv > 0;
    }
    hp->mix_floats = (int64_t)LFM2_MIX_BUFS * hp->n_embd;
    return 0;
}

static int bind_conv(struct model *m, int il, uint32_t kernel, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    const int64_t d = m->hp.n_embd;
    struct lfm2_conv *c = xcalloc(1, sizeof *c);
    L->mixer = c;
    char n[GGUF_MAX_NAME_LEN + 1];
    struct engine_tensor in;
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"), d, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &in, NAME("shortconv.in_proj.weight"), d, 3 * d, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &c->out_proj, NAME("shortconv.out_proj.weight"), d, d, true,
                                e)) < 0)
        return rc;
    const struct gguf_tensor *w = gguf_tensor_find(m->g, NAME("shortconv.conv.weight"));
    if (!w || w->type != GGUF_TYPE_F32 || w->ne[0] != kernel || w->ne[1] != d || w->ne[2] != 1 ||
        !w->data)
        return err_set(e, ERR_FORMAT, "tensor %s: expected F32 [%u, %lld]", n, kernel,
                       (long long)d);
#undef NAME
    model_row_view(&c->in_b, &in, 0, d);
    model_row_view(&c->in_c, &in, d, d);
    model_row_view(&c->in_x, &in, 2 * d, d);
    c->conv = (struct engine_conv1d){
        .channels = d,
        .kernel = (int)kernel,
        .w = w->data,
        .x_stride = d,
        .y_stride = d,
    };
    struct engine_tensor *mats[] = {&c->in_b, &c->in_c, &c->in_x, &c->out_proj};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
        L->mats[L->n_mats++] = mats[i];
    return 0;
}

// lfm2moe: leading_dense_block_count dense FFNs, then MoE layers: a
// sigmoid (expert_gating_func 2) or softmax router, exp_probs_b biasing the
// choice, the chosen weights renormalised (llama.cpp's lfm2 graph), no
// shared expert. llama.cpp does not read expert_weights_scale for lfm2moe:
// neither does this.
static int lfm2moe_bind(struct model *m, struct err *e)
{
    uint32_t lead = 0, gating = 0;
    gguf_get_arch_u32(m->g, "leading_dense_block_count", &lead);
    if (lead > (uint32_t)m->hp.n_layer)
        return err_set(e, ERR_FORMAT, "invalid leading_dense_block_count %u", lead);
    if (!gguf_get_arch_u32(m->g, "expert_gating_func", &gating) || (gating != 1 && gating != 2))
        return err_set(e, ERR_FORMAT, "missing or unsupported expert_gating_func");
    int rc;
    for (int il = 0; il < (int)lead; il++)
        if ((rc = model_bind_layer_dense_ffn(m, il, e)) < 0)
            return rc;
    const struct model_moe_spec spec = {
        .gating = gating == 2 ? ENGINE_MOE_SIGMOID : ENGINE_MOE_SOFTMAX,
        .norm_w = true,
        .act = ENGINE_MOE_SILU,
        .first_layer = (int)lead,
    };
    return lead < (uint32_t)m->hp.n_layer ? model_bind_moe(m, &spec, e) : 0;
}

static int lfm2_bind(struct model *m, struct err *e)
{
    uint32_t kernel = 0;
    gguf_get_arch_u32(m->g, "shortconv.l_cache", &kernel);
    int rc;
    if (!m->output_norm && (rc = model_bind_vector(m, &m->output_norm, "token_embd_norm.weight",
                                                   m->hp.n_embd, true, e)) < 0)
        return rc;
    for (int il = 0; il < m->hp.n_layer; il++) {
        rc = m->layers[il].n_head_kv > 0 ? model_bind_layer_attn(m, il, e)
                                         : bind_conv(m, il, kernel, e);
        if (rc < 0 || (rc = model_bind_layer_ffn(m, il, e)) < 0)
            return rc;
    }
    return m->arch->ffn ? lfm2moe_bind(m, e) : 0;
}

// The convolution mixer of n rows: s.xb = out_proj(C * conv(B * x')) from
// s.x, the state of each row's slot carried in L->rs.conv.
static void conv_mixer(struct model *m, struct model_layer *L, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const struct lfm2_conv *c = L->mixer;
    const int64_t d = hp->n_embd, nd = (int64_t)n * d;
    float *b = s->mix, *cc = b + nd, *xp = cc + nd, *bx = xp + nd, *cv = bx + nd;

    engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, hp->n_embd, hp->eps);
    const struct engine_matmul_job in[3] = {
        {&c->in_b, b, NULL},
        {&c->in_c, cc, NULL},
        {&c->in_x, xp, NULL},
    };
    engine_matmul_n(be, in, 3, s->xb, n);
    engine_mul(be, bx, b, xp, nd);
    engine_conv1d(be, cv, bx, n, &c->conv, L->rs.conv, ub->slot, ub->pos);
    engine_mul(be, bx, cc, cv, nd);
    engine_matmul(be, s->xb, &c->out_proj, NULL, bx, n);
}

// One forward pass (model_forward_decoder's shape, with a mixer per layer kind).
static void lfm2_forward(struct model *m, const struct model_ubatch *ub)
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
        if (L->n_head_kv > 0) {
            model_attn_qkv(m, L, ub, n);
            if (last && ub->n_out == 0)
                return;  // the cache is filled; nobody wants outputs
            model_attn_attend(m, L, ub, n);
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->att, s->x, NULL},
                                           (const int[]){q_dim, n_embd});
            model_attn_out(m, L, n);
        } else {
            conv_mixer(m, L, ub, n);
            if (last && ub->n_out == 0)
                return;  // the state is updated; nobody wants outputs
            if (last)
                n = model_keep_output_rows(m, ub, (float *[]){s->xb, s->x, NULL},
                                           (const int[]){n_embd, n_embd});
            engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
        }
        model_ffn_block(m, L, n);
    }
    model_output_logits(m, ub, n);
}

const struct model_arch model_arch_lfm2 = {
    .name = "lfm2",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qk_norm = true,
    .act = MODEL_ACT_SILU,
    .load = lfm2_load,
    .bind = lfm2_bind,
    .forward = lfm2_forward,
    .custom_layers = true,
};

const struct model_arch model_arch_lfm2moe = {
    .name = "lfm2moe",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qk_norm = true,
    .act = MODEL_ACT_SILU,
    .load = lfm2_load,
    .bind = lfm2_bind,
    .forward = lfm2_forward,
    .ffn = model_ffn_moe_or_dense,
    .prepare = model_prepare_moe,
    .custom_layers = true,
};

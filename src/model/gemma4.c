// The gemma4 architecture (Gemma 4; llama.cpp src/models/gemma4.cpp, spec
// §12.7): a Gemma decoder whose layers differ by kind and position.
//
//   x = token_embd[t] · sqrt(n_embd)
//   per-layer inputs P (embedding_length_per_layer_input > 0), all layers at once:
//     P = (per_layer_token_embd[t] · sqrt(w) + RMSNorm_w(per_layer_model_proj · x
//          / sqrt(n_embd); per_layer_proj_norm)) / sqrt(2)
//   per layer (sliding: head key_length_swa, RoPE rope_swa; global: head
//   key_length, RoPE with rope_freqs as divisors, "proportional"):
//     a = RMSNorm(x; attn_norm)
//     q = RoPE(RMSNorm_head(attn_q a; attn_q_norm))
//     k = RoPE(RMSNorm_head(attn_k a; attn_k_norm)); v = rms(attn_v a, or attn_k a)
//     (the last shared_kv_layers layers compute only q and attend over the
//     cache of the last layer of their kind before them)
//     h = x + RMSNorm(attn_output · attention(q, k, v; scale 1); post_attention_norm)
//     f = dense GELU MLP(RMSNorm(h; ffn_norm)), or with a router (MoE layer):
//         RMSNorm(MLP; post_ffw_norm_1) + RMSNorm(experts(RMSNorm(h; pre_ffw_norm_2));
//         post_ffw_norm_2), the router reading rms(h) / sqrt(n_embd) · ffn_gate_inp.scale
//     x = h + RMSNorm(f; post_ffw_norm)
//     x = x + RMSNorm(proj · (GELU(inp_gate · x) * P_l); post_norm)
//     x = x · layer_output_scale
//   logits = cap · tanh(output · RMSNorm(x; output_norm) / cap)
//
// The cache rows are as wide as a global layer's K (the model's head_dim);
// a sliding layer uses the front of each row. Ollama's files name the
// per-expert scale ffn_gate_inp.per_expert_scale (moe.c accepts both).
#include "model/internal.h"

#include <math.h>
#include <string.h>

// A layer's own data (model_layer.mixer).
struct gemma4_layer {
    int head_dim;                         // this layer's kind's
    int n_head_kv;                        // of the attention (the layer's own cache may be none)
    int kv_src;                           // the layer whose cache it attends (itself unless shared)
    bool own_v;                           // attn_v present (else V is K before its norm)
    const float *out_scale;               // [1] or NULL
    const float *gate_inp_s;              // [n_embd] the router input's factor (MoE layers)
    const float *pre_norm_2;              // [n_embd] the experts' input norm
    const float *post_norm_1;             // [n_embd] after the dense MLP (MoE layers)
    const float *post_norm_2;             // [n_embd] after the experts
    struct engine_tensor inp_gate, proj;  // per-layer input: [n_embd, w], [w, n_embd]
    const float *post_norm;               // [n_embd]
};

// The model's per-layer-input tensors and the row indices of one layer's
// slice (host, n_batch of them after prepare), kept on layer 0's data.
struct gemma4_model {
    int n_pl;                      // per-layer input width (0: none)
    struct engine_tensor pl_embd;  // per_layer_token_embd [n_pl · n_layer, n_vocab]
    struct engine_tensor pl_proj;  // per_layer_model_proj [n_embd, n_pl · n_layer]
    const float *pl_norm;          // per_layer_proj_norm [n_pl]
    int32_t *idx;                  // [n_batch]
};

// Model-level data lives after layer 0's (one allocation, freed with it).
struct gemma4_data {
    struct gemma4_layer l;
    struct gemma4_model g;
    int32_t idx[];
};

static struct gemma4_model *g4(struct model *m)
{
    return &((struct gemma4_data *)m->layers[0].mixer)->g;
}

// Scratch (s.mix): the per-layer inputs of all layers (n_batch rows), then
// per row either the projection of those inputs, or the dense MLP branch,
// the router input and the experts' output, or one layer's slice with its gate.
static int64_t mix_pl(const struct model *m, int n_pl)
{
    return (int64_t)n_pl * m->hp.n_layer;
}

static int gemma4_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    uint32_t v = 0, shared = 0, hd_swa = 0, n_pl = 0;
    if (hp->n_swa <= 0)
        return err_set(e, ERR_FORMAT, "gemma4: missing sliding window or its pattern");
    if (!gguf_get_arch_u32(m->g, "attention.key_length_swa", &hd_swa) || hd_swa < 2 ||
        hd_swa > (uint32_t)hp->head_dim || hd_swa % 2 != 0)
        return err_set(e, ERR_FORMAT, "missing or invalid key attention.key_length_swa");
    if (gguf_get_arch_u32(m->g, "attention.value_length_swa", &v) && v != hd_swa)
        return err_set(e, ERR_UNSUPPORTED, "value_length_swa %u != key_length_swa %u", v, hd_swa);
    hp->head_dim_swa = (int)hd_swa;
    hp->rope_swa.n_rot = (int)hd_swa;
    if (gguf_get_arch_u32(m->g, "rope.dimension_count_swa", &v)) {
        if (v < 2 || v > hd_swa || v % 2 != 0)
            return err_set(e, ERR_FORMAT, "invalid rope.dimension_count_swa %u", v);
        hp->rope_swa.n_rot = (int)v;
    }
    gguf_get_arch_u32(m->g, "attention.shared_kv_layers", &shared);
    gguf_get_arch_u32(m->g, "embedding_length_per_layer_input", &n_pl);
    if (n_pl > 65536)
        return err_set(e, ERR_FORMAT, "invalid embedding_length_per_layer_input %u", n_pl);
    const int n_kv_layers = hp->n_layer - (int)shared;
    if (shared >= (uint32_t)hp->n_layer)
        return err_set(e, ERR_FORMAT, "invalid attention.shared_kv_layers %u", shared);
    hp->q_scale = 1.0f;
    if (!(hp->final_softcap > 0))
        hp->final_softcap = 30.0f;
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct gemma4_layer *G =
            il == 0 ? &((struct gemma4_data *)xcalloc(1, sizeof(struct gemma4_data)))->l
                    : xcalloc(1, sizeof *G);
        L->mixer = G;
        G->head_dim = L->swa ? (int)hd_swa : hp->head_dim;
        G->n_head_kv = L->n_head_kv;
        G->kv_src = il;
        if (L->n_head_kv < 1 || L->n_ff < 1)
            return err_set(e, ERR_FORMAT, "layer %d: no attention or no feed-forward", il);
        if (il >= n_kv_layers) {
            // The last layer of its kind before the sharing ones.
            G->kv_src = -1;
            for (int j = n_kv_layers - 1; j >= 0 && G->kv_src < 0; j--)
                if (m->layers[j].swa == L->swa)
                    G->kv_src = j;
            if (G->kv_src < 0)
                return err_set(e, ERR_FORMAT, "layer %d: no layer of its kind to share K/V", il);
            L->n_head_kv = 0;  // no cache of its own
        }
    }
    for (int il = n_kv_layers; il < hp->n_layer; il++) {
        const struct gemma4_layer *G = m->layers[il].mixer, *S = m->layers[G->kv_src].mixer;
        if (S->n_head_kv != G->n_head_kv)
            return err_set(e, ERR_FORMAT, "layer %d: K/V heads differ from layer %d's", il,
                           G->kv_src);
    }
    g4(m)->n_pl = (int)n_pl;
    int64_t rest = mix_pl(m, (int)n_pl);
    if (rest < 3 * (int64_t)hp->n_embd)
        rest = 3 * (int64_t)hp->n_embd;
    if (rest < 2 * (int64_t)n_pl)
        rest = 2 * (int64_t)n_pl;
    hp->mix_floats = mix_pl(m, (int)n_pl) + rest;
    return 0;
}

static int bind_attn(struct model *m, int il, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    struct gemma4_layer *G = L->mixer;
    char n[GGUF_MAX_NAME_LEN + 1];
    snprintf(n, sizeof n, "blk.%d.layer_output_scale.weight", il);
    int rc = model_bind_gemma_attn(m, il, G->head_dim, G->n_head_kv, G->kv_src == il, false, e);
    if (rc < 0 || (rc = model_bind_vector(m, &G->out_scale, n, 1, false, e)) < 0)
        return rc;
    G->own_v = L->wv.data != NULL;
    return 0;
}

// The FFN beside the attention: the dense MLP, with post_ffw_norm, and the
// MoE's norms and router factor where the layer has a router.
static int bind_ffn(struct model *m, int il, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    struct gemma4_layer *G = L->mixer;
    const int64_t d = m->hp.n_embd;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_layer_ffn(m, il, e)) < 0 ||
        (rc = model_bind_vector(m, &L->ffn_post_norm, NAME("post_ffw_norm.weight"), d, true, e)) <
            0)
        return rc;
    const bool moe = gguf_tensor_find(m->g, NAME("ffn_gate_inp.weight")) != NULL;
    if (moe &&
        ((rc = model_bind_vector(m, &G->gate_inp_s, NAME("ffn_gate_inp.scale"), d, true, e)) < 0 ||
         (rc = model_bind_vector(m, &G->pre_norm_2, NAME("pre_ffw_norm_2.weight"), d, true, e)) <
             0 ||
         (rc = model_bind_vector(m, &G->post_norm_1, NAME("post_ffw_norm_1.weight"), d, true, e)) <
             0 ||
         (rc = model_bind_vector(m, &G->post_norm_2, NAME("post_ffw_norm_2.weight"), d, true, e)) <
             0))
        return rc;
    const int64_t w = g4(m)->n_pl;
    if (w > 0 &&
        ((rc = model_bind_matrix(m, &G->inp_gate, NAME("inp_gate.weight"), d, w, true, e)) < 0 ||
         (rc = model_bind_matrix(m, &G->proj, NAME("proj.weight"), w, d, true, e)) < 0 ||
         (rc = model_bind_vector(m, &G->post_norm, NAME("post_norm.weight"), d, true, e)) < 0))
        return rc;
#undef NAME
    if (w > 0) {
        L->mats[L->n_mats++] = &G->inp_gate;
        L->mats[L->n_mats++] = &G->proj;
    }
    return 0;
}

static int gemma4_bind(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    struct gemma4_model *gm = g4(m);
    int rc;
    // Proportional RoPE of the global layers: rope_freqs divide their frequencies.
    if ((rc = model_bind_vector(m, &m->rope_freqs, "rope_freqs.weight", hp->rope.n_rot / 2, false,
                                e)) < 0)
        return rc;
    hp->rope.freq_factors = m->rope_freqs;
    const int64_t w = (int64_t)gm->n_pl * hp->n_layer;
    if (gm->n_pl > 0 && ((rc = model_bind_matrix(m, &gm->pl_embd, "per_layer_token_embd.weight", w,
                                                 hp->n_vocab, true, e)) < 0 ||
                         (rc = model_bind_matrix(m, &gm->pl_proj, "per_layer_model_proj.weight",
                                                 hp->n_embd, w, true, e)) < 0 ||
                         (rc = model_bind_vector(m, &gm->pl_norm, "per_layer_proj_norm.weight",
                                                 gm->n_pl, true, e)) < 0))
        return rc;
    for (int il = 0; il < hp->n_layer; il++)
        if ((rc = bind_attn(m, il, e)) < 0 || (rc = bind_ffn(m, il, e)) < 0)
            return rc;
    const struct model_moe_spec spec = {
        .gating = ENGINE_MOE_SOFTMAX,
        .norm_w = true,
        .act = ENGINE_MOE_GELU,
        .router_layers_only = true,
        .exp_scale = true,
    };
    for (int il = 0; il < hp->n_layer; il++)
        if (((struct gemma4_layer *)m->layers[il].mixer)->gate_inp_s)
            return model_bind_moe(m, &spec, e);
    return 0;
}

static int gemma4_prepare(struct model *m, struct err *e)
{
    struct gemma4_data *d =
        xrealloc(m->layers[0].mixer, sizeof *d + (size_t)m->opts.n_batch * sizeof(int32_t));
    m->layers[0].mixer = d;
    d->g.idx = d->idx;
    return model_prepare_moe(m, e);
}

// The per-layer inputs of all layers, P (n, n_layer · n_pl), from s.x.
static void per_layer_inputs(struct model *m, const struct model_ubatch *ub, float *P, float *tmp)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    const struct gemma4_model *gm = g4(m);
    const int64_t w = (int64_t)gm->n_pl * hp->n_layer, n = ub->n;
    engine_get_rows(be, P, &gm->pl_embd, ub->tokens, n);
    engine_scale(be, P, P, sqrtf((float)gm->n_pl), n * w);
    engine_matmul(be, tmp, &gm->pl_proj, NULL, m->s.x, n);
    engine_scale(be, tmp, tmp, 1.0f / sqrtf((float)hp->n_embd), n * w);
    engine_rmsnorm(be, tmp, tmp, gm->pl_norm, n * hp->n_layer, gm->n_pl, hp->eps);
    engine_add(be, P, P, tmp, n * w);
    engine_scale(be, P, P, 1.0f / sqrtf(2.0f), n * w);
}

// Attention of layer il for n rows: s.att (n, n_head · head_dim) from s.x,
// K and V into the layer's cache unless it shares another's.
static void attention(struct model *m, int il, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct model_layer *L = &m->layers[il];
    const struct gemma4_layer *G = L->mixer;
    const int hd = G->head_dim;
    engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, hp->n_embd, hp->eps);
    engine_matmul(be, s->q, &L->wq, NULL, s->xb, n);
    engine_rmsnorm(be, s->q, s->q, L->attn_q_norm, (int64_t)n * hp->n_head, hd, hp->eps);
    engine_rope(be, s->q, n, hp->n_head, hd, ub->pos, L->rope);
    if (G->kv_src == il) {
        const int64_t kv_dim = (int64_t)G->n_head_kv * hd;
        engine_matmul(be, s->k, &L->wk, NULL, s->xb, n);
        if (G->own_v)
            engine_matmul(be, s->v, &L->wv, NULL, s->xb, n);
        else
            engine_scale(be, s->v, s->k, 1.0f, (int64_t)n * kv_dim);
        engine_rmsnorm(be, s->k, s->k, L->attn_k_norm, (int64_t)n * G->n_head_kv, hd, hp->eps);
        engine_rmsnorm(be, s->v, s->v, NULL, (int64_t)n * G->n_head_kv, hd, hp->eps);
        engine_rope(be, s->k, n, G->n_head_kv, hd, ub->pos, L->rope);
        engine_kv_store(be, &L->kv, m->kv_type, L->kv_ring > 0 ? ub->ring_cells : ub->cells, s->k,
                        s->v, n, kv_dim);
    }
}

static void attend(struct model *m, int il, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    const struct model_layer *L = &m->layers[il];
    const struct gemma4_layer *G = L->mixer;
    const struct model_layer *S = &m->layers[G->kv_src];
    const struct engine_attn attn = {
        .n_head = hp->n_head,
        .n_head_kv = G->n_head_kv,
        .head_dim = G->head_dim,
        .scale = 1.0f,
        .kv_type = m->kv_type,
        .window = L->swa ? hp->n_swa : 0,
        .kv_ring = S->kv_ring,
    };
    engine_attention(m->be, m->s.att, m->s.q, n, &S->kv,
                     S->kv_ring > 0 ? ub->ring_cell0 : ub->cell0, ub->n_visible, &attn);
}

// x = h + RMSNorm(FFN(h); post_ffw_norm), the FFN dense or dense + MoE.
static void ffn(struct model *m, struct model_layer *L, int n, float *mix)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const struct gemma4_layer *G = L->mixer;
    const int64_t d = hp->n_embd, nd = (int64_t)n * d;
    float *f1 = mix, *rin = f1 + nd, *f2 = rin + nd;
    engine_rmsnorm(be, s->xb, s->x, L->ffn_norm, n, d, hp->eps);
    model_dense_ffn(m, L, f1, s->xb, n);
    if (L->ext) {
        engine_rmsnorm(be, f1, f1, G->post_norm_1, n, d, hp->eps);
        engine_rmsnorm(be, s->xb, s->x, G->pre_norm_2, n, d, hp->eps);
        engine_rmsnorm(be, rin, s->x, G->gate_inp_s, n, d, hp->eps);
        engine_scale(be, rin, rin, 1.0f / sqrtf((float)d), nd);
        model_ffn_moe_routed(m, L, f2, s->xb, rin, n);
        engine_rmsnorm(be, f2, f2, G->post_norm_2, n, d, hp->eps);
        engine_add(be, f1, f1, f2, nd);
    }
    engine_rmsnorm(be, f1, f1, L->ffn_post_norm, n, d, hp->eps);
    engine_add(be, s->x, s->x, f1, nd);
}

// x += RMSNorm(proj · (GELU(inp_gate · x) * P_l); post_norm) for n rows
// whose per-layer inputs are rows idx of P viewed as n_pl-wide rows.
static void per_layer_add(struct model *m, struct model_layer *L, const float *P,
                          const int32_t *idx, int n, float *mix)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const struct gemma4_layer *G = L->mixer;
    const int w = g4(m)->n_pl;
    float *pl = mix, *g = pl + (int64_t)n * w;
    engine_gather(be, pl, P, idx, n, w);
    engine_matmul(be, g, &G->inp_gate, NULL, s->x, n);
    engine_glu(be, g, g, pl, (int64_t)n * w, true);
    engine_matmul(be, s->xb, &G->proj, NULL, g, n);
    engine_rmsnorm(be, s->xb, s->xb, G->post_norm, n, hp->n_embd, hp->eps);
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * hp->n_embd);
}

static void gemma4_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct gemma4_model *gm = g4(m);
    const int n_embd = hp->n_embd, nb = m->opts.n_batch;
    const int64_t wpl = mix_pl(m, gm->n_pl);
    float *P = s->mix, *rest = P + (int64_t)nb * wpl;
    int n = ub->n;
    const int32_t *rows = NULL;  // the rows that go on (NULL: all)

    model_embed_input(m, ub);  // x: (n, n_embd)
    if (gm->n_pl > 0)
        per_layer_inputs(m, ub, P, rest);
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        const struct gemma4_layer *G = L->mixer;
        const bool last = il == hp->n_layer - 1;
        attention(m, il, ub, n);
        if (last && ub->n_out == 0)
            return;  // the cache is filled; nobody wants outputs
        attend(m, il, ub, n);
        if (last) {
            n = model_keep_output_rows(m, ub, (float *[]){s->att, s->x, NULL},
                                       (const int[]){hp->n_head * G->head_dim, n_embd});
            rows = ub->out_rows;
        }
        engine_matmul(be, s->xb, &L->wo, NULL, s->att, n);
        engine_rmsnorm(be, s->xb, s->xb, L->attn_post_norm, n, n_embd, hp->eps);
        engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
        ffn(m, L, n, rest);
        if (gm->n_pl > 0) {
            for (int r = 0; r < n; r++)
                gm->idx[r] = (rows ? rows[r] : r) * hp->n_layer + il;
            per_layer_add(m, L, P, gm->idx, n, rest);
        }
        if (G->out_scale)
            engine_scale(be, s->x, s->x, G->out_scale[0], (int64_t)n * n_embd);
    }
    model_output_logits(m, ub, n);
}

const struct model_arch model_arch_gemma4 = {
    .name = "gemma4",
    .rope_mode = ENGINE_ROPE_NEOX,
    .default_eps = 1e-6f,
    .embd_scale = true,
    .swa_pattern = 2,  // the file's sliding_window_pattern array decides
    .softcaps = true,
    .default_final_softcap = 30.0f,
    .act = MODEL_ACT_GELU,
    .load = gemma4_load,
    .bind = gemma4_bind,
    .forward = gemma4_forward,
    .prepare = gemma4_prepare,
    .custom_layers = true,
};

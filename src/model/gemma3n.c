// The gemma3n architecture (Gemma 3n E2B/E4B, text; llama.cpp
// src/models/gemma3n.cpp, spec §12.6): a Gemma decoder that carries K
// "AltUp" streams of the residual, of which one (the active stream a) goes
// through each layer, and per-layer inputs as Gemma 4's.
//
//   e = token_embd[t] · sqrt(n_embd)
//   P = (per_layer_token_embd[t] · sqrt(w) + RMSNorm_w(per_layer_model_proj · e
//        / sqrt(n_embd); per_layer_proj_norm)) / sqrt(2)             (all layers)
//   X_0 = e;  X_k = altup_proj[k-1] · e brought to |e|  (k = 1..K-1)
//   per layer:
//     mod(v) = tanh(altup_router · RMSNorm(v; altup_router_norm) / n_embd)   [K]
//     c = altup_predict_coef · mod(X_a);  pred_j = X_j + Σ_s c[K j + s] · X_s
//     h0 = RMSNorm(pred_a; attn_norm)
//     lau = h0 + RMSNorm(laurel_r · laurel_l · h0; laurel_post_norm)       (LAuReL)
//     attention of h0: q/k per-head norms, v RMS-normalised, NeoX RoPE, scale 1
//     h = RMSNorm(attn_output · att; post_attention_norm) + pred_a
//     h2 = (h + lau) / sqrt(2)
//     g = ffn_gate · RMSNorm(h2; ffn_norm), on the first 10 layers Gaussian
//         top-k: relu(g - (mean(g) + 1.6448534 · std(g)))
//     out = h2 + RMSNorm(ffn_down(GELU(g) * ffn_up · ...); post_ffw_norm)
//     w = altup_correct_coef · mod(out) + 1;  X_j = pred_j + w_j · (out - pred_a)
//     u = RMSNorm(proj · (GELU(inp_gate · (X_a ⊙ altup_correct_scale)) * P_l); post_norm)
//     X_k += u for k ≠ 0
//   y = (X_0 + Σ_{k≥1} altup_unembd_proj[k-1] · X_k brought to |X_a|) / K
//   logits = 30 · tanh(output · RMSNorm(y; output_norm) / 30)
//
// llama.cpp fixes K = 4, a = 0, LAuReL rank 64, per-layer width 256, the
// sparsity on layers 0-9 and "layers from 20 on reuse K/V" (a sliding layer
// that of layer 18, a global one that of layer 19); the files' keys
// (altup.num_inputs, altup.active_idx, embedding_length_per_layer_input,
// attention.shared_kv_layers, activation_sparsity_scale) and the tensors'
// shapes give the same numbers for the released models, and are read here
// when present. Ollama's files (convert_gemma3n.go) name the sliding layers'
// RoPE base rope.freq_base_local and the head size head_dim, and keep the
// multimodal vocabulary in token_embd (more rows than per_layer_token_embd):
// the model's vocabulary is the per-layer table's, as Ollama's llama.cpp
// makes it (llama/compat handle_gemma3n; the tokenizer drops the same
// tokens).
#include "model/internal.h"

#include <math.h>
#include <string.h>

#define G3N_MAX_ALTUP      8
#define G3N_KV_FROM_START  20                   // llama.cpp: layers from here reuse K/V
#define G3N_SPARSE_LAYERS  10                   // activation sparsity on the first layers
#define G3N_SPARSE_STD_MUL 1.6448533535003662f  // the normal distribution's 0.95 quantile

// A layer's own data (model_layer.mixer).
struct g3n_layer {
    int kv_src;   // the layer whose cache it attends (itself unless shared)
    bool sparse;  // Gaussian top-k on the FFN gate
    struct engine_tensor laurel_l, laurel_r;  // [n_embd, rank], [rank, n_embd]
    const float *laurel_norm;                 // [n_embd]
    struct engine_tensor router;              // [n_embd, K]
    const float *router_norm;                 // [n_embd]
    struct engine_tensor predict, correct;    // [K, K·K], [K, K]
    const float *correct_scale;               // [n_embd]
    struct engine_tensor inp_gate, proj;      // [n_embd, w], [w, n_embd]
    const float *post_norm;                   // [n_embd]
};

// Model-level data, after layer 0's (one allocation, freed with it).
struct g3n_model {
    int n_altup, i_act, n_pl, rank;
    struct engine_tensor altup_proj;  // [n_embd, n_embd · (K-1)]: stream k's at rows (k-1)·n_embd
    struct engine_tensor altup_unembd;  // the same shape
    struct engine_tensor pl_embd;       // per_layer_token_embd [n_pl · n_layer, n_pl_vocab]
    struct engine_tensor pl_proj;       // per_layer_model_proj [n_embd, n_pl · n_layer]
    const float *pl_norm;               // per_layer_proj_norm [n_pl]
    float ones[G3N_MAX_ALTUP];          // the correction coefficients' + 1
    int32_t *idx;                       // host [n_batch] row indices
};

struct g3n_data {
    struct g3n_layer l;
    struct g3n_model g;
    int32_t idx[];
};

static struct g3n_model *g3n(const struct model *m)
{
    return &((struct g3n_data *)m->layers[0].mixer)->g;
}

// Scratch (s.mix), each region n_batch rows of the width given: P (n_layer ·
// w), the streams X (K · n_embd, stream-major), the predictions (K · n_embd),
// lau, innov (n_embd), mod (K), coef (K · K), tmp (max(rank, w)), pl (w).
struct g3n_scratch {
    float *P, *X[G3N_MAX_ALTUP], *pred[G3N_MAX_ALTUP], *lau, *innov, *mod, *coef, *tmp, *pl;
};

static int64_t tmp_width(const struct g3n_model *g)
{
    return g->rank > g->n_pl ? g->rank : g->n_pl;
}

static int64_t stream_floats(const struct model *m, const struct g3n_model *g)
{
    const int64_t K = g->n_altup, d = m->hp.n_embd;
    return 2 * K * d + 2 * d + K + K * K + tmp_width(g) + g->n_pl;
}

static struct g3n_scratch carve(struct model *m)
{
    const struct g3n_model *g = g3n(m);
    const int64_t nb = m->opts.n_batch, d = m->hp.n_embd;
    struct g3n_scratch sc = {.P = m->s.mix};
    float *p = sc.P + nb * g->n_pl * m->hp.n_layer;
    for (int k = 0; k < g->n_altup; k++, p += nb * d)
        sc.X[k] = p;
    for (int k = 0; k < g->n_altup; k++, p += nb * d)
        sc.pred[k] = p;
    sc.lau = p, p += nb * d;
    sc.innov = p, p += nb * d;
    sc.mod = p, p += nb * g->n_altup;
    sc.coef = p, p += nb * g->n_altup * g->n_altup;
    sc.tmp = p, p += nb * tmp_width(g);
    sc.pl = p;
    return sc;
}

static int read_u32_default(struct model *m, const char *key, uint32_t dflt, uint32_t lo,
                            uint32_t hi, uint32_t *out, struct err *e)
{
    *out = dflt;
    if (gguf_get_arch_u32(m->g, key, out) && (*out < lo || *out > hi))
        return err_set(e, ERR_FORMAT, "invalid %s.%s %u", m->arch->name, key, *out);
    return 0;
}

// The layers from the first sharing one on (G3N_KV_FROM_START, or
// block_count - attention.shared_kv_layers) attend the cache of the last
// layer of their kind before it and keep none of their own.
static int plan_kv_sharing(struct model *m, struct err *e)
{
    const int n_layer = m->hp.n_layer;
    uint32_t shared = 0;
    int from = G3N_KV_FROM_START;
    if (gguf_get_arch_u32(m->g, "attention.shared_kv_layers", &shared)) {
        if (shared >= (uint32_t)n_layer || (shared > 0 && n_layer - (int)shared < 2))
            return err_set(e, ERR_FORMAT, "invalid %s.attention.shared_kv_layers %u", m->arch->name,
                           shared);
        from = n_layer - (int)shared;
    }
    for (int il = 0; il < n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct g3n_layer *G = L->mixer;
        G->kv_src = il;
        if (L->n_head_kv < 1 || L->n_ff < 1)
            return err_set(e, ERR_FORMAT, "layer %d: no attention or no feed-forward", il);
        if (il < from)
            continue;
        G->kv_src = from - (L->swa ? 2 : 1);
        if (m->layers[G->kv_src].swa != L->swa)
            return err_set(e, ERR_FORMAT, "layer %d: layer %d is not of its kind to share K/V", il,
                           G->kv_src);
        L->n_head_kv = 0;
    }
    return 0;
}

// Ollama's names: rope.freq_base_local (the sliding layers' base), head_dim
// (when attention.key_length is absent); activation_sparsity_scale (per
// layer, 0: dense) chooses the sparse layers, else the first 10 are.
static int read_ollama_keys(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    float base;
    uint32_t hd;
    if (!gguf_get_arch_f32(m->g, "rope.freq_base_swa", &base) &&
        gguf_get_arch_f32(m->g, "rope.freq_base_local", &base)) {
        if (!(base > 0) || !isfinite(base))
            return err_set(e, ERR_FORMAT, "invalid %s.rope.freq_base_local", m->arch->name);
        hp->rope_swa.freq_base = base;
    }
    if (!gguf_get_arch_u32(m->g, "attention.key_length", &hd) &&
        gguf_get_arch_u32(m->g, "head_dim", &hd) && (int)hd != hp->head_dim) {
        if (hd < 2 || hd > 1024 || hd % 2 != 0)
            return err_set(e, ERR_FORMAT, "invalid %s.head_dim %u", m->arch->name, hd);
        hp->head_dim = (int)hd;
        hp->rope.n_rot = hp->rope_swa.n_rot = (int)hd;
    }
    char key[128];
    const struct gguf_kv *kv =
        gguf_find(m->g, model_key(m, key, sizeof key, "activation_sparsity_scale"));
    for (int il = 0; il < hp->n_layer; il++) {
        float v;
        bool sparse = il < G3N_SPARSE_LAYERS;
        if (kv && kv->val.type == GGUF_VAL_ARRAY && gguf_arr_f32(kv, (uint64_t)il, &v))
            sparse = v > 0;
        ((struct g3n_layer *)m->layers[il].mixer)->sparse = sparse;
    }
    return 0;
}

static int gemma3n_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    uint32_t n_altup, i_act, n_pl;
    int rc;
    if ((rc = read_u32_default(m, "altup.num_inputs", 4, 2, G3N_MAX_ALTUP, &n_altup, e)) < 0 ||
        (rc = read_u32_default(m, "altup.active_idx", 0, 0, n_altup - 1, &i_act, e)) < 0 ||
        (rc = read_u32_default(m, "embedding_length_per_layer_input", 256, 1, 65536, &n_pl, e)) < 0)
        return rc;
    hp->q_scale = 1.0f;
    if (!(hp->final_softcap > 0))
        hp->final_softcap = 30.0f;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].mixer = il == 0 ? &((struct g3n_data *)xcalloc(1, sizeof(struct g3n_data)))->l
                                      : xcalloc(1, sizeof(struct g3n_layer));
    if ((rc = read_ollama_keys(m, e)) < 0 || (rc = plan_kv_sharing(m, e)) < 0)
        return rc;
    struct g3n_model *g = g3n(m);
    g->n_altup = (int)n_altup;
    g->i_act = (int)i_act;
    g->n_pl = (int)n_pl;
    for (int k = 0; k < G3N_MAX_ALTUP; k++)
        g->ones[k] = 1.0f;
    // The LAuReL rank is layer 0's laurel_l's width (bind checks the others).
    const struct gguf_tensor *lt = gguf_tensor_find(m->g, "blk.0.laurel_l.weight");
    if (!lt || lt->ne[1] < 1 || lt->ne[1] > hp->n_embd)
        return err_set(e, ERR_FORMAT, "missing or invalid tensor blk.0.laurel_l.weight");
    g->rank = (int)lt->ne[1];
    const int64_t per_layer = (int64_t)n_pl * hp->n_layer;
    int64_t rest = stream_floats(m, g);
    hp->mix_floats = per_layer + (rest > per_layer ? rest : per_layer);
    return 0;
}

// A 3-D [n_embd, n_embd, K - 1] tensor as one matrix of (K - 1) · n_embd rows.
static int bind_streams(struct model *m, struct engine_tensor *t, const char *name, struct err *e)
{
    const int64_t d = m->hp.n_embd, k = g3n(m)->n_altup - 1;
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    if (!gt)
        return err_set(e, ERR_FORMAT, "missing tensor %s", name);
    if (gt->ne[0] != d || gt->ne[1] != d || gt->ne[2] != k || gt->ne[3] != 1)
        return err_set(e, ERR_FORMAT,
                       "tensor %s has shape [%lld, %lld, %lld], expected [%lld, "
                       "%lld, %lld]",
                       name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)gt->ne[2],
                       (long long)d, (long long)d, (long long)k);
    return engine_tensor_from_gguf(t, gt, e);
}

static int bind_model(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    struct g3n_model *g = g3n(m);
    const int64_t w = (int64_t)g->n_pl * hp->n_layer;
    const struct gguf_tensor *pe = gguf_tensor_find(m->g, "per_layer_token_embd.weight");
    // Ollama's files: the per-layer table has the text vocabulary only,
    // which becomes the model's.
    if (pe && pe->ne[1] >= 1 && pe->ne[1] < hp->n_vocab) {
        hp->n_vocab = (int)pe->ne[1];
        model_row_view(&m->tok_embd, &m->tok_embd, 0, hp->n_vocab);
        model_row_view(&m->output, &m->output, 0, hp->n_vocab);
    }
    int rc;
    if ((rc = bind_streams(m, &g->altup_proj, "altup_proj.weight", e)) < 0 ||
        (rc = bind_streams(m, &g->altup_unembd, "altup_unembd_proj.weight", e)) < 0 ||
        (rc = model_bind_matrix(m, &g->pl_embd, "per_layer_token_embd.weight", w, hp->n_vocab, true,
                                e)) < 0 ||
        (rc = model_bind_matrix(m, &g->pl_proj, "per_layer_model_proj.weight", hp->n_embd, w, true,
                                e)) < 0 ||
        (rc = model_bind_vector(m, &g->pl_norm, "per_layer_proj_norm.weight", g->n_pl, true, e)) <
            0)
        return rc;
    return 0;
}

static int bind_attn(struct model *m, int il, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    struct model_layer *L = &m->layers[il];
    const struct g3n_layer *G = L->mixer;
    const bool own_kv = G->kv_src == il;
    int rc = model_bind_gemma_attn(m, il, hp->head_dim, hp->n_head_kv, own_kv, own_kv, e);
    if (rc < 0)
        return rc;
    if (!own_kv) {  // K/V of a sharing layer are never used
        memset(&L->wk, 0, sizeof L->wk);
        memset(&L->wv, 0, sizeof L->wv);
    }
    return 0;
}

// The FFN's post-norm, LAuReL, AltUp's router and coefficients, the
// per-layer input's gate and projection.
static int bind_extras(struct model *m, int il, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    struct g3n_layer *G = L->mixer;
    const struct g3n_model *g = g3n(m);
    const int64_t d = m->hp.n_embd, K = g->n_altup, r = g->rank, w = g->n_pl;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_vector(m, &L->ffn_post_norm, NAME("post_ffw_norm.weight"), d, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &G->laurel_l, NAME("laurel_l.weight"), d, r, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &G->laurel_r, NAME("laurel_r.weight"), r, d, true, e)) < 0 ||
        (rc = model_bind_vector(m, &G->laurel_norm, NAME("laurel_post_norm.weight"), d, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &G->router, NAME("altup_router.weight"), d, K, true, e)) < 0 ||
        (rc = model_bind_vector(m, &G->router_norm, NAME("altup_router_norm.weight"), d, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &G->predict, NAME("altup_predict_coef.weight"), K, K * K, true,
                                e)) < 0 ||
        (rc = model_bind_matrix(m, &G->correct, NAME("altup_correct_coef.weight"), K, K, true, e)) <
            0 ||
        (rc = model_bind_vector(m, &G->correct_scale, NAME("altup_correct_scale.weight"), d, true,
                                e)) < 0 ||
        (rc = model_bind_matrix(m, &G->inp_gate, NAME("inp_gate.weight"), d, w, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &G->proj, NAME("proj.weight"), w, d, true, e)) < 0 ||
        (rc = model_bind_vector(m, &G->post_norm, NAME("post_norm.weight"), d, true, e)) < 0)
        return rc;
#undef NAME
    L->mats[L->n_mats++] = &G->laurel_l;
    L->mats[L->n_mats++] = &G->laurel_r;
    L->mats[L->n_mats++] = &G->inp_gate;
    L->mats[L->n_mats++] = &G->proj;
    return 0;
}

static int gemma3n_bind(struct model *m, struct err *e)
{
    int rc;
    if ((rc = bind_model(m, e)) < 0)
        return rc;
    for (int il = 0; il < m->hp.n_layer; il++)
        if ((rc = bind_attn(m, il, e)) < 0 || (rc = model_bind_layer_ffn(m, il, e)) < 0 ||
            (rc = bind_extras(m, il, e)) < 0)
            return rc;
    return 0;
}

static int gemma3n_prepare(struct model *m, struct err *e)
{
    (void)e;
    struct g3n_data *d =
        xrealloc(m->layers[0].mixer, sizeof *d + (size_t)m->opts.n_batch * sizeof(int32_t));
    m->layers[0].mixer = d;
    d->g.idx = d->idx;
    return 0;
}

// The per-layer inputs of all layers, P (n, n_layer · w), from s.x.
static void per_layer_inputs(struct model *m, const struct model_ubatch *ub, float *P, float *tmp)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    const struct g3n_model *g = g3n(m);
    const int64_t w = (int64_t)g->n_pl * hp->n_layer, n = ub->n;
    engine_get_rows(be, P, &g->pl_embd, ub->tokens, n);
    engine_scale(be, P, P, sqrtf((float)g->n_pl), n * w);
    engine_matmul(be, tmp, &g->pl_proj, NULL, m->s.x, n);
    engine_scale(be, tmp, tmp, 1.0f / sqrtf((float)hp->n_embd), n * w);
    engine_rmsnorm(be, tmp, tmp, g->pl_norm, n * hp->n_layer, g->n_pl, hp->eps);
    engine_add(be, P, P, tmp, n * w);
    engine_scale(be, P, P, 1.0f / sqrtf(2.0f), n * w);
}

// X_0 = e (s.x), X_k = altup_proj[k-1] · e at e's magnitude.
static void init_streams(struct model *m, const struct g3n_scratch *sc, int n)
{
    struct engine_backend *be = m->be;
    const struct g3n_model *g = g3n(m);
    const int64_t d = m->hp.n_embd;
    engine_scale(be, sc->X[0], m->s.x, 1.0f, n * d);
    for (int k = 1; k < g->n_altup; k++) {
        struct engine_tensor v;
        model_row_view(&v, &g->altup_proj, (k - 1) * d, d);
        engine_matmul(be, sc->X[k], &v, NULL, m->s.x, n);
        engine_rows_rescale(be, sc->X[k], sc->X[k], m->s.x, n, d);
    }
}

// mod (n, K) = tanh(altup_router · RMSNorm(v; altup_router_norm) / n_embd).
static void modalities(struct model *m, const struct g3n_layer *G, float *mod, const float *v,
                       int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    float *xb = m->s.xb;
    engine_rmsnorm(be, xb, v, G->router_norm, n, hp->n_embd, hp->eps);
    engine_scale(be, xb, xb, 1.0f / (float)hp->n_embd, (int64_t)n * hp->n_embd);
    engine_matmul(be, mod, &G->router, NULL, xb, n);
    engine_softcap(be, mod, mod, 1.0f, (int64_t)n * g3n(m)->n_altup);
}

// pred_j = X_j + Σ_s c[K j + s] X_s, c = altup_predict_coef · mod(X_a).
static void predict(struct model *m, const struct g3n_layer *G, const struct g3n_scratch *sc, int n)
{
    const struct g3n_model *g = g3n(m);
    const int K = g->n_altup;
    modalities(m, G, sc->mod, sc->X[g->i_act], n);
    engine_matmul(m->be, sc->coef, &G->predict, NULL, sc->mod, n);
    for (int j = 0; j < K; j++)
        engine_rows_mix(m->be, sc->pred[j], sc->X[j], (const float *const *)sc->X, K,
                        sc->coef + (int64_t)K * j, (int64_t)K * K, n, m->hp.n_embd);
}

// X_j = pred_j + (altup_correct_coef · mod(out) + 1)_j · (out - pred_a), out = s.x.
static void correct(struct model *m, const struct g3n_layer *G, const struct g3n_scratch *sc, int n)
{
    struct engine_backend *be = m->be;
    const struct g3n_model *g = g3n(m);
    const int K = g->n_altup;
    const int64_t nd = (int64_t)n * m->hp.n_embd;
    const float *out = m->s.x;
    modalities(m, G, sc->mod, out, n);
    engine_matmul(be, sc->coef, &G->correct, g->ones, sc->mod, n);
    engine_scale(be, sc->innov, sc->pred[g->i_act], -1.0f, nd);
    engine_add(be, sc->innov, sc->innov, out, nd);
    for (int j = 0; j < K; j++)
        engine_rows_mix(be, sc->X[j], sc->pred[j], (const float *const *)&sc->innov, 1,
                        sc->coef + j, K, n, m->hp.n_embd);
}

// Attention of layer il over h0 (s.xb, n rows) into s.att, K and V into the
// layer's cache unless it shares another's.
static void attention(struct model *m, int il, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct model_layer *L = &m->layers[il];
    const struct g3n_layer *G = L->mixer;
    const int hd = hp->head_dim;
    engine_matmul(be, s->q, &L->wq, NULL, s->xb, n);
    engine_rmsnorm(be, s->q, s->q, L->attn_q_norm, (int64_t)n * hp->n_head, hd, hp->eps);
    engine_rope(be, s->q, n, hp->n_head, hd, ub->pos, L->rope);
    if (G->kv_src == il) {
        const int64_t kv_dim = (int64_t)hp->n_head_kv * hd;
        const struct engine_matmul_job kv[2] = {{&L->wk, s->k, NULL}, {&L->wv, s->v, NULL}};
        engine_matmul_n(be, kv, 2, s->xb, n);
        engine_rmsnorm(be, s->k, s->k, L->attn_k_norm, (int64_t)n * hp->n_head_kv, hd, hp->eps);
        engine_rmsnorm(be, s->v, s->v, NULL, (int64_t)n * hp->n_head_kv, hd, hp->eps);
        engine_rope(be, s->k, n, hp->n_head_kv, hd, ub->pos, L->rope);
        engine_kv_store(be, &L->kv, m->kv_type, L->kv_ring > 0 ? ub->ring_cells : ub->cells, s->k,
                        s->v, n, kv_dim);
    }
    const struct model_layer *S = &m->layers[G->kv_src];
    const struct engine_attn attn = {
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .head_dim = hd,
        .scale = 1.0f,
        .kv_type = m->kv_type,
        .window = L->swa ? hp->n_swa : 0,
        .kv_ring = S->kv_ring,
    };
    engine_attention(be, s->att, s->q, n, &S->kv, S->kv_ring > 0 ? ub->ring_cell0 : ub->cell0,
                     ub->n_visible, &attn);
}

// s.x = out = h2 + RMSNorm(FFN(RMSNorm(h2; ffn_norm)); post_ffw_norm), h2 in
// s.x, with the Gaussian top-k on the gate of the first layers.
static void ffn(struct model *m, int il, float *tmp, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct model_layer *L = &m->layers[il];
    const int64_t nf = (int64_t)n * L->n_ff;
    engine_rmsnorm(be, s->xb, s->x, L->ffn_norm, n, hp->n_embd, hp->eps);
    const struct engine_matmul_job gate_up[2] = {{&L->w_gate, s->hb, NULL},
                                                 {&L->w_up, s->hb2, NULL}};
    engine_matmul_n(be, gate_up, 2, s->xb, n);
    if (((const struct g3n_layer *)L->mixer)->sparse)
        engine_gauss_topk(be, s->hb, s->hb, G3N_SPARSE_STD_MUL, n, L->n_ff);
    engine_glu(be, s->hb, s->hb, s->hb2, nf, true);
    engine_matmul(be, tmp, &L->w_down, NULL, s->hb, n);
    engine_rmsnorm(be, tmp, tmp, L->ffn_post_norm, n, hp->n_embd, hp->eps);
    engine_add(be, s->x, s->x, tmp, (int64_t)n * hp->n_embd);
}

// One layer over the streams of n rows (the residual of this layer in s.x).
static void layer(struct model *m, int il, const struct model_ubatch *ub,
                  const struct g3n_scratch *sc, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct model_layer *L = &m->layers[il];
    const struct g3n_layer *G = L->mixer;
    struct g3n_model *g = g3n(m);
    const int64_t d = hp->n_embd, nd = (int64_t)n * d;
    const float *pred_a = sc->pred[g->i_act];

    predict(m, G, sc, n);
    engine_rmsnorm(be, s->xb, pred_a, L->attn_norm, n, d, hp->eps);  // h0
    engine_matmul(be, sc->tmp, &G->laurel_l, NULL, s->xb, n);
    engine_matmul(be, sc->lau, &G->laurel_r, NULL, sc->tmp, n);
    engine_rmsnorm(be, sc->lau, sc->lau, G->laurel_norm, n, d, hp->eps);
    engine_add(be, sc->lau, sc->lau, s->xb, nd);
    attention(m, il, ub, n);
    engine_matmul(be, s->x, &L->wo, NULL, s->att, n);
    engine_rmsnorm(be, s->x, s->x, L->attn_post_norm, n, d, hp->eps);
    engine_add(be, s->x, s->x, pred_a, nd);
    engine_add(be, s->x, s->x, sc->lau, nd);
    engine_scale(be, s->x, s->x, 1.0f / sqrtf(2.0f), nd);  // h2
    ffn(m, il, sc->lau, n);
    correct(m, G, sc, n);
    // The per-layer input, added to every stream but the first.
    for (int r = 0; r < n; r++)
        engine_mul(be, s->xb + r * d, sc->X[g->i_act] + r * d, G->correct_scale, d);
    engine_matmul(be, sc->tmp, &G->inp_gate, NULL, s->xb, n);
    for (int r = 0; r < n; r++)
        g->idx[r] = r * hp->n_layer + il;
    engine_gather(be, sc->pl, sc->P, g->idx, n, g->n_pl);
    engine_glu(be, sc->tmp, sc->tmp, sc->pl, (int64_t)n * g->n_pl, true);
    engine_matmul(be, s->xb, &G->proj, NULL, sc->tmp, n);
    engine_rmsnorm(be, s->xb, s->xb, G->post_norm, n, d, hp->eps);
    for (int k = 1; k < g->n_altup; k++)
        engine_add(be, sc->X[k], sc->X[k], s->xb, nd);
}

// s.x = (X_0 + Σ_k altup_unembd_proj[k-1] · X_k at |X_a|) / K for n rows.
static void merge_streams(struct model *m, const struct g3n_scratch *sc, int n)
{
    struct engine_backend *be = m->be;
    const struct g3n_model *g = g3n(m);
    const int64_t d = m->hp.n_embd, nd = (int64_t)n * d;
    engine_scale(be, m->s.x, sc->X[0], 1.0f, nd);
    for (int k = 1; k < g->n_altup; k++) {
        struct engine_tensor v;
        model_row_view(&v, &g->altup_unembd, (k - 1) * d, d);
        engine_matmul(be, sc->pred[k], &v, NULL, sc->X[k], n);
        engine_rows_rescale(be, sc->pred[k], sc->pred[k], sc->X[g->i_act], n, d);
        engine_add(be, m->s.x, m->s.x, sc->pred[k], nd);
    }
    engine_scale(be, m->s.x, m->s.x, 1.0f / (float)g->n_altup, nd);
}

static void gemma3n_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct g3n_scratch sc = carve(m);
    const struct g3n_model *g = g3n(m);
    const int n = ub->n;
    model_embed_input(m, ub);  // s.x = e
    per_layer_inputs(m, ub, sc.P, sc.X[0]);
    init_streams(m, &sc, n);
    for (int il = 0; il < m->hp.n_layer; il++)
        layer(m, il, ub, &sc, n);
    if (ub->n_out == 0)
        return;
    float *bufs[G3N_MAX_ALTUP + 1] = {0};
    int widths[G3N_MAX_ALTUP];
    for (int k = 0; k < g->n_altup; k++) {
        bufs[k] = sc.X[k];
        widths[k] = m->hp.n_embd;
    }
    const int n_out = model_keep_output_rows(m, ub, bufs, widths);
    merge_streams(m, &sc, n_out);
    model_output_logits(m, ub, n_out);
}

const struct model_arch model_arch_gemma3n = {
    .name = "gemma3n",
    .rope_mode = ENGINE_ROPE_NEOX,
    .default_eps = 1e-6f,
    .embd_scale = true,
    .swa_pattern = 5,  // 4 sliding, 1 global; the file's sliding_window_pattern array wins
    .softcaps = true,
    .default_final_softcap = 30.0f,
    .act = MODEL_ACT_GELU,
    .load = gemma3n_load,
    .bind = gemma3n_bind,
    .forward = gemma3n_forward,
    .prepare = gemma3n_prepare,
    .custom_layers = true,
};

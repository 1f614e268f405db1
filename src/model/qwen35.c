// The gated delta-net hybrids (spec §12.1–§12.2; llama.cpp
// src/models/qwen35.cpp, qwen35moe.cpp, qwen3next.cpp, delta-net-base.cpp):
// qwen35 (Qwen3.5 dense) and qwen35moe rows here, qwen3next (Qwen3-Next)
// in qwen3next.c, all built from this file's hooks. Each layer is
//
//   h   = x + mixer(RMSNorm(x; attn_norm))
//   out = h + FFN(RMSNorm(h; post_attention_norm))
//
// with the FFN a dense SwiGLU (qwen35) or a softmax MoE plus a shared
// expert scaled by σ(ffn_gate_inp_shexp · x) (qwen35moe, qwen3next). The
// mixer is a gated delta net on most layers and gated attention on every
// full_attention_interval-th (or as attention.recurrent_layers says):
//
//   delta net: qkv = attn_qkv·x, z = attn_gate·x (or both from the older
//     fused ssm_in, grouped per key head), causal conv (ssm_conv1d) + SiLU,
//     q and k L2-normalised per head, beta = σ(ssm_beta·x),
//     g = softplus(ssm_alpha·x + ssm_dt.bias) · ssm_a, the delta rule
//     (engine_delta_net) with state per slot, y = RMSNorm(o; ssm_norm) ·
//     SiLU(z) per head, ssm_out·y. Value head h reads key head h mod Hk
//     (qwen35: its converter reorders the value heads) or h / (Hv/Hk)
//     (qwen3next: llama.cpp repeats each key head in place).
//   attention: attn_q gives per head q then a gate (interleaved head by
//     head); q/k RMSNorm per head, NeoX RoPE on rope.dimension_count dims
//     (Qwen3.5's multi-section RoPE is that for text), attention, times
//     σ(gate), attn_output.
//
// Ollama's published files differ only in names and keys (its
// llama-ollama-compat.cpp): `ssm_dt` without `.bias`, head_count_kv as a
// per-layer array (0 on delta-net layers), extra vision / MTP tensors and
// keys (never read here); both layouts load as they are.
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// A layer's mixer (model_layer.mixer).
// Shapes shared by the delta-net layers.
struct gdn_shape {
    int d, n_k, n_v, kernel;  // head dim (key = value), key heads, value heads, conv kernel
    int64_t conv_dim, inner;  // 2 n_k d + n_v d, n_v d
};

struct gdn_layer {
    bool recurrent;
    struct gdn_shape sh;
    // Delta net: the qwen35 projections, or qwen3next's fused ones (ssm_in
    // for qkv and z, ssm_ba for beta and alpha; Ollama's qwen3next files
    // have attn_qkv / attn_gate with ssm_ba) whose outputs are regrouped by
    // the idx patterns below.
    struct engine_tensor qkv, z, beta, alpha, out;
    struct engine_tensor in, ba;
    bool fused_in, fused_ba;
    const float *norm;  // ssm_norm [d]
    struct engine_conv1d conv;
    struct engine_delta_net dn;
    // Per-row gather patterns: attention (q heads, gate heads of attn_q's
    // output, in head_dim pieces); fused delta-net projections (qkv and z in
    // pieces of d from ssm_in's output, beta and alpha in single values from
    // ssm_ba's).
    int32_t *idx_q, *idx_gate;
    int32_t *idx_qkv, *idx_z, *idx_beta, *idx_alpha;
    int32_t idx[];
};

// The delta-net shapes (shared by the layers) from the ssm keys.
static struct gdn_shape gdn_shape_of(const struct model *m)
{
    struct gdn_shape sh = {0};
    uint32_t v;
    if (gguf_get_arch_u32(m->g, "ssm.state_size", &v))
        sh.d = (int)v;
    if (gguf_get_arch_u32(m->g, "ssm.group_count", &v))
        sh.n_k = (int)v;
    if (gguf_get_arch_u32(m->g, "ssm.time_step_rank", &v))
        sh.n_v = (int)v;
    if (gguf_get_arch_u32(m->g, "ssm.conv_kernel", &v))
        sh.kernel = (int)v;
    sh.inner = (int64_t)sh.n_v * sh.d;
    sh.conv_dim = 2 * (int64_t)sh.n_k * sh.d + sh.inner;
    return sh;
}

// Offsets (in rows of n_batch) of the delta-net intermediates in s.mix.
enum { MIX_QKV, MIX_CONV, MIX_Z, MIX_BETA, MIX_ALPHA, MIX_O, MIX_RAWBA, MIX_RAW, MIX_N };

static void mix_widths(const struct gdn_shape *sh, int64_t w[MIX_N])
{
    w[MIX_QKV] = sh->conv_dim;
    w[MIX_CONV] = sh->conv_dim;
    w[MIX_Z] = sh->inner;
    w[MIX_BETA] = sh->n_v;
    w[MIX_ALPHA] = sh->n_v;
    w[MIX_O] = sh->inner;
    w[MIX_RAWBA] = 2 * (int64_t)sh->n_v;    // fused ssm_ba
    w[MIX_RAW] = sh->conv_dim + sh->inner;  // fused ssm_in: q, k, v, z
}

// Start of region r in s.mix.
static float *mix_at(const struct model *m, const struct gdn_shape *sh, int r)
{
    int64_t w[MIX_N], off = 0;
    mix_widths(sh, w);
    for (int i = 0; i < r; i++)
        off += w[i];
    return m->s.mix + off * m->opts.n_batch;
}

// Which layers are delta nets: attention.recurrent_layers (one bool per
// layer), else every layer but each full_attention_interval-th (default 4).
static int read_recurrent(struct model *m, bool *rec, struct err *e)
{
    const int n_layer = m->hp.n_layer;
    char key[128];
    const struct gguf_kv *kv =
        gguf_find(m->g, model_key(m, key, sizeof key, "attention.recurrent_layers"));
    if (kv && kv->val.type == GGUF_VAL_ARRAY) {
        if (kv->val.arr_count < (uint64_t)n_layer)
            return err_set(e, ERR_FORMAT, "%s has %llu entries for %d layers", key,
                           (unsigned long long)kv->val.arr_count, n_layer);
        for (int il = 0; il < n_layer; il++) {
            struct gguf_value ev;
            if (!gguf_arr_value(&kv->val, (uint64_t)il, &ev))
                return err_set(e, ERR_FORMAT, "invalid %s", key);
            rec[il] = ev.type == GGUF_VAL_BOOL ? ev.v.b : ev.v.u64 != 0;
        }
        return 0;
    }
    uint32_t interval = 4;
    gguf_get_arch_u32(m->g, "full_attention_interval", &interval);
    if (interval < 1)
        return err_set(e, ERR_FORMAT, "invalid full_attention_interval 0");
    for (int il = 0; il < n_layer; il++)
        rec[il] = (il + 1) % (int)interval != 0;
    return 0;
}

// The load hook: the delta-net shapes, which layers are recurrent (no K/V
// cache, recurrent state instead), and the family scratch.
int model_gdn_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const struct gdn_shape sh = gdn_shape_of(m);
    uint32_t v;
    if (sh.d < 1 || sh.d > 1024 || sh.n_k < 1 || sh.n_v < 1 || sh.n_v % sh.n_k != 0 ||
        sh.kernel < 1 || sh.kernel > 64)
        return err_set(e, ERR_FORMAT,
                       "invalid ssm keys: state_size %d, group_count %d, time_step_rank %d, "
                       "conv_kernel %d",
                       sh.d, sh.n_k, sh.n_v, sh.kernel);
    if (gguf_get_arch_u32(m->g, "ssm.inner_size", &v) && (int64_t)v != sh.inner)
        return err_set(e, ERR_UNSUPPORTED, "ssm.inner_size %u != %d value heads of %d", v, sh.n_v,
                       sh.d);
    // Trailing multi-token-prediction blocks are not part of the pass.
    if (gguf_get_arch_u32(m->g, "nextn_predict_layers", &v) && v > 0) {
        if ((int)v >= hp->n_layer)
            return err_set(e, ERR_FORMAT, "nextn_predict_layers %u of %d blocks", v, hp->n_layer);
        hp->n_layer -= (int)v;
    }
    bool *rec = xcalloc((size_t)hp->n_layer, sizeof(bool)), fused_in = false, fused_ba = false;
    int rc = read_recurrent(m, rec, e);
    for (int il = 0; rc >= 0 && il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        if (rec[il]) {
            char n[GGUF_MAX_NAME_LEN + 1];
            snprintf(n, sizeof n, "blk.%d.ssm_in.weight", il);
            fused_in |= gguf_tensor_find(m->g, n) != NULL;
            snprintf(n, sizeof n, "blk.%d.ssm_ba.weight", il);
            fused_ba |= gguf_tensor_find(m->g, n) != NULL;
            L->n_head_kv = 0;
            L->rs.conv_floats = (int64_t)(sh.kernel - 1) * sh.conv_dim;
            L->rs.ssm_floats = (int64_t)sh.n_v * sh.d * sh.d;
        } else if (L->n_head_kv < 1) {
            rc = err_set(e, ERR_FORMAT, "layer %d: attention layer without K/V heads", il);
        }
    }
    free(rec);
    if (rc < 0)
        return rc;
    int64_t w[MIX_N], delta = 0;
    mix_widths(&sh, w);
    // The fused projections' outputs come last (ssm_ba's, then ssm_in's).
    int n_regions = fused_in ? MIX_N : fused_ba ? MIX_RAW : MIX_RAWBA;
    for (int i = 0; i < n_regions; i++)
        delta += w[i];
    int64_t attn = 3 * (int64_t)hp->n_head * hp->head_dim;  // attn_q's q|gate, the gate
    hp->mix_floats = delta > attn ? delta : attn;
    return 0;
}

// ---------------------------------------------------------------------------
// Binding.

static int bind_f32(struct model *m, const float **out, const char *name, int64_t ne0, int64_t ne1,
                    struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    if (!gt)
        return err_set(e, ERR_FORMAT, "missing tensor %s", name);
    if (gt->type != GGUF_TYPE_F32 || !gt->data)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: expected F32", name);
    if (gt->ne[0] != ne0 || gt->ne[1] != ne1 || gt->ne[2] != 1 || gt->ne[3] != 1)
        return err_set(e, ERR_FORMAT, "tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                       name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)ne0,
                       (long long)ne1);
    *out = gt->data;
    return 0;
}

static void add_mat(struct model_layer *L, struct engine_tensor *t)
{
    if (t->data && L->n_mats < MODEL_LAYER_MATS)
        L->mats[L->n_mats++] = t;
}

// The fused ssm_in / ssm_ba outputs are grouped per key head g:
// [q_g | k_g | v of its Hv/Hk heads | z of them] and [beta of them | alpha
// of them]; the patterns pick them into qwen35's order (q, k, v heads; z;
// beta; alpha), value head g·r + j for r = Hv/Hk.
static void fused_patterns(struct gdn_layer *G, const struct gdn_shape *sh)
{
    const int r = sh->n_v / sh->n_k, per = 2 + 2 * r;
    int i = 0;
    for (int g = 0; g < sh->n_k; g++)
        G->idx_qkv[i++] = g * per;
    for (int g = 0; g < sh->n_k; g++)
        G->idx_qkv[i++] = g * per + 1;
    for (int g = 0; g < sh->n_k; g++)
        for (int j = 0; j < r; j++) {
            G->idx_qkv[i++] = g * per + 2 + j;
            G->idx_z[g * r + j] = g * per + 2 + r + j;
            G->idx_beta[g * r + j] = g * 2 * r + j;
            G->idx_alpha[g * r + j] = g * 2 * r + r + j;
        }
}

static int bind_delta(struct model *m, struct model_layer *L, struct gdn_layer *G, int il,
                      const struct gdn_shape *sh, struct err *e)
{
    const int64_t D = m->hp.n_embd;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    snprintf(n, sizeof n, "blk.%d.attn_qkv.weight", il);
    G->fused_in = !gguf_tensor_find(m->g, n);
    if (G->fused_in) {
        if ((rc = model_bind_matrix(m, &G->in, NAME("ssm_in.weight"), D, sh->conv_dim + sh->inner,
                                    true, e)) < 0)
            return rc;
    } else if ((rc = model_bind_matrix(m, &G->qkv, n, D, sh->conv_dim, true, e)) < 0 ||
               (rc = model_bind_matrix(m, &G->z, NAME("attn_gate.weight"), D, sh->inner, true, e)) <
                   0) {
        return rc;
    }
    G->fused_ba = gguf_tensor_find(m->g, NAME("ssm_ba.weight")) != NULL;
    if (G->fused_ba) {
        if ((rc = model_bind_matrix(m, &G->ba, n, D, 2 * (int64_t)sh->n_v, true, e)) < 0)
            return rc;
    } else if ((rc = model_bind_matrix(m, &G->beta, NAME("ssm_beta.weight"), D, sh->n_v, true, e)) <
                   0 ||
               (rc = model_bind_matrix(m, &G->alpha, NAME("ssm_alpha.weight"), D, sh->n_v, true,
                                       e)) < 0) {
        return rc;
    }
    const float *conv_w = NULL, *dt_bias = NULL, *A = NULL;
    if ((rc = model_bind_matrix(m, &G->out, NAME("ssm_out.weight"), sh->inner, D, true, e)) < 0 ||
        (rc = bind_f32(m, &conv_w, NAME("ssm_conv1d.weight"), sh->kernel, sh->conv_dim, e)) < 0 ||
        (rc = model_bind_vector(m, &A, NAME("ssm_a"), sh->n_v, true, e)) < 0 ||
        (rc = model_bind_vector(m, &G->norm, NAME("ssm_norm.weight"), sh->d, true, e)) < 0)
        return rc;
    // llama.cpp's name, or Ollama's (no .bias).
    if (!gguf_tensor_find(m->g, NAME("ssm_dt.bias")))
        snprintf(n, sizeof n, "blk.%d.ssm_dt", il);
    if ((rc = model_bind_vector(m, &dt_bias, n, sh->n_v, true, e)) < 0)
        return rc;
#undef NAME
    add_mat(L, &G->qkv);
    add_mat(L, &G->z);
    add_mat(L, &G->beta);
    add_mat(L, &G->alpha);
    add_mat(L, &G->in);
    add_mat(L, &G->ba);
    add_mat(L, &G->out);
    G->conv = (struct engine_conv1d){
        .channels = sh->conv_dim,
        .kernel = sh->kernel,
        .w = conv_w,
        .silu = true,
        .x_stride = sh->conv_dim,
        .y_stride = sh->conv_dim,
    };
    G->dn = (struct engine_delta_net){
        .n_k_heads = sh->n_k,
        .n_v_heads = sh->n_v,
        .dk = sh->d,
        .dv = sh->d,
        .k_block = m->arch == &model_arch_qwen3next,
        .scale = 1.0f / sqrtf((float)sh->d),
        .q_stride = sh->conv_dim,
        .k_stride = sh->conv_dim,
        .v_stride = sh->conv_dim,
        .g_stride = sh->n_v,
        .beta_stride = sh->n_v,
        .o_stride = sh->inner,
        .l2_norm = true,
        .l2_eps = m->hp.eps,
        .beta_sigmoid = true,
        .dt_bias = dt_bias,
        .A = A,
    };
    fused_patterns(G, sh);
    return 0;
}

// Gated attention: attn_q [n_embd, 2 q_dim] (q and gate per head), K, V,
// output, q/k norms.
static int bind_gated_attn(struct model *m, struct model_layer *L, struct gdn_layer *G, int il,
                           struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    const int64_t D = hp->n_embd, hd = hp->head_dim, q_dim = hp->n_head * hd,
                  kv_dim = (int64_t)L->n_head_kv * hd;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_matrix(m, &L->wq, NAME("attn_q.weight"), D, 2 * q_dim, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wk, NAME("attn_k.weight"), D, kv_dim, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wv, NAME("attn_v.weight"), D, kv_dim, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wo, NAME("attn_output.weight"), q_dim, D, true, e)) < 0 ||
        (rc = model_bind_vector(m, &L->attn_q_norm, NAME("attn_q_norm.weight"), hd, true, e)) < 0 ||
        (rc = model_bind_vector(m, &L->attn_k_norm, NAME("attn_k_norm.weight"), hd, true, e)) < 0)
        return rc;
#undef NAME
    for (int h = 0; h < hp->n_head; h++) {
        G->idx_q[h] = 2 * h;
        G->idx_gate[h] = 2 * h + 1;
    }
    return 0;
}

int model_gdn_bind(struct model *m, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    const struct gdn_shape sh = gdn_shape_of(m);
    const size_t n_idx = 2 * (size_t)hp->n_head + (size_t)(sh.conv_dim / sh.d) + 3 * (size_t)sh.n_v;
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct gdn_layer *G = xcalloc(1, sizeof *G + n_idx * sizeof(int32_t));
        L->mixer = G;
        G->idx_q = G->idx;
        G->idx_gate = G->idx_q + hp->n_head;
        G->idx_qkv = G->idx_gate + hp->n_head;
        G->idx_z = G->idx_qkv + sh.conv_dim / sh.d;
        G->idx_beta = G->idx_z + sh.n_v;
        G->idx_alpha = G->idx_beta + sh.n_v;
        G->recurrent = L->rs.ssm_floats > 0;
        G->sh = sh;
        char n[GGUF_MAX_NAME_LEN + 1];
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", il);
        int rc = model_bind_vector(m, &L->attn_norm, n, hp->n_embd, true, e);
        if (rc >= 0)
            rc = G->recurrent ? bind_delta(m, L, G, il, &sh, e) : bind_gated_attn(m, L, G, il, e);
        if (rc >= 0)
            rc = model_bind_layer_ffn(m, il, e);  // post_attention_norm (+ dense SwiGLU)
        if (rc < 0)
            return rc;
    }
    if (!m->arch->ffn)
        return 0;
    static const struct model_moe_spec moe = {
        .gating = ENGINE_MOE_SOFTMAX,
        .norm_w = true,
        .act = ENGINE_MOE_SILU,
        .shared_gated = true,
    };
    return model_bind_moe(m, &moe, e);
}

int model_gdn_prepare(struct model *m, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    const struct gdn_shape sh = gdn_shape_of(m);
    // ssm_out's input rows (inner) may be wider than what load reserved for.
    int64_t max_row = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    if (sh.inner > max_row)
        max_row = sh.inner;
    if ((int64_t)hp->n_head * hp->head_dim > max_row)
        max_row = (int64_t)hp->n_head * hp->head_dim;
    int rc = engine_reserve(m->be, m->opts.n_batch, max_row, m->opts.n_ctx, e);
    if (rc >= 0 && m->arch->ffn)
        rc = model_prepare_moe(m, e);
    return rc;
}

// ---------------------------------------------------------------------------
// Forward pass.

// Per row r of n: dst row (dst_w wide) = the pieces idx[0..cnt) of len
// floats of src row (src_w wide).
static void gather_pieces(struct model *m, float *dst, int64_t dst_w, const float *src,
                          int64_t src_w, const int32_t *idx, int cnt, int64_t len, int n)
{
    for (int r = 0; r < n; r++)
        engine_gather(m->be, dst + r * dst_w, src + r * src_w, idx, cnt, len);
}

// The delta-net mixer of n rows: s.x += ssm_out · y. Returns the rows
// that go on (the last layer keeps only the output rows; 0: nobody wants
// outputs, the state is updated).
static int delta_mixer(struct model *m, struct model_layer *L, const struct model_ubatch *ub, int n,
                       bool last)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct gdn_layer *G = L->mixer;
    const struct gdn_shape sh = G->sh;
    float *qkv = mix_at(m, &sh, MIX_QKV), *cv = mix_at(m, &sh, MIX_CONV),
          *z = mix_at(m, &sh, MIX_Z), *beta = mix_at(m, &sh, MIX_BETA),
          *alpha = mix_at(m, &sh, MIX_ALPHA), *o = mix_at(m, &sh, MIX_O);

    engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, hp->n_embd, hp->eps);
    float *raw = G->fused_in ? mix_at(m, &sh, MIX_RAW) : NULL,
          *rawba = G->fused_ba ? mix_at(m, &sh, MIX_RAWBA) : NULL;
    struct engine_matmul_job jobs[4];
    int nj = 0;
    if (G->fused_in) {
        jobs[nj++] = (struct engine_matmul_job){&G->in, raw, NULL};
    } else {
        jobs[nj++] = (struct engine_matmul_job){&G->qkv, qkv, NULL};
        jobs[nj++] = (struct engine_matmul_job){&G->z, z, NULL};
    }
    if (G->fused_ba) {
        jobs[nj++] = (struct engine_matmul_job){&G->ba, rawba, NULL};
    } else {
        jobs[nj++] = (struct engine_matmul_job){&G->beta, beta, NULL};
        jobs[nj++] = (struct engine_matmul_job){&G->alpha, alpha, NULL};
    }
    engine_matmul_n(be, jobs, nj, s->xb, n);
    if (G->fused_in) {
        const int64_t rw = sh.conv_dim + sh.inner;
        gather_pieces(m, qkv, sh.conv_dim, raw, rw, G->idx_qkv, (int)(sh.conv_dim / sh.d), sh.d, n);
        gather_pieces(m, z, sh.inner, raw, rw, G->idx_z, sh.n_v, sh.d, n);
    }
    if (G->fused_ba) {
        const int64_t bw = 2 * (int64_t)sh.n_v;
        gather_pieces(m, beta, sh.n_v, rawba, bw, G->idx_beta, sh.n_v, 1, n);
        gather_pieces(m, alpha, sh.n_v, rawba, bw, G->idx_alpha, sh.n_v, 1, n);
    }
    engine_conv1d(be, cv, qkv, n, &G->conv, L->rs.conv, ub->slot, ub->pos);
    const int64_t kd = (int64_t)sh.n_k * sh.d;
    engine_delta_net(be, o, cv, cv + kd, cv + 2 * kd, alpha, beta, n, &G->dn, L->rs.ssm, ub->slot,
                     ub->pos);
    if (last) {
        if (ub->n_out == 0)
            return 0;
        float *bufs[] = {o, z, s->x, NULL};
        const int widths[] = {(int)sh.inner, (int)sh.inner, hp->n_embd};
        n = model_keep_output_rows(m, ub, bufs, widths);
    }
    // Gated RMSNorm per head, then the output projection and residual.
    engine_rmsnorm(be, o, o, G->norm, (int64_t)n * sh.n_v, sh.d, hp->eps);
    engine_glu(be, o, z, o, (int64_t)n * sh.inner, false);
    engine_matmul(be, s->xb, &G->out, NULL, o, n);
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * hp->n_embd);
    return n;
}

// The gated attention mixer of n rows (as delta_mixer).
static int attn_mixer(struct model *m, struct model_layer *L, const struct model_ubatch *ub, int n,
                      bool last)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    struct gdn_layer *G = L->mixer;
    const int hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;
    float *qg = m->s.mix, *gate = m->s.mix + (size_t)m->opts.n_batch * 2 * q_dim;

    engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, hp->n_embd, hp->eps);
    const struct engine_matmul_job jobs[3] = {
        {&L->wq, qg, NULL},    // (n, 2 q_dim): per head q then gate
        {&L->wk, s->k, NULL},  // (n, kv_dim)
        {&L->wv, s->v, NULL},  // (n, kv_dim)
    };
    engine_matmul_n(be, jobs, 3, s->xb, n);
    gather_pieces(m, s->q, q_dim, qg, 2 * (int64_t)q_dim, G->idx_q, hp->n_head, hd, n);
    gather_pieces(m, gate, q_dim, qg, 2 * (int64_t)q_dim, G->idx_gate, hp->n_head, hd, n);
    engine_rmsnorm(be, s->q, s->q, L->attn_q_norm, (int64_t)n * hp->n_head, hd, hp->eps);
    engine_rmsnorm(be, s->k, s->k, L->attn_k_norm, (int64_t)n * hp->n_head_kv, hd, hp->eps);
    engine_rope(be, s->q, n, hp->n_head, hd, ub->pos, L->rope);
    engine_rope(be, s->k, n, hp->n_head_kv, hd, ub->pos, L->rope);
    engine_kv_store(be, &L->kv, m->kv_type, ub->cells, s->k, s->v, n, kv_dim);
    if (last && ub->n_out == 0)
        return 0;
    model_attn_attend(m, L, ub, n);  // att: (n, q_dim)
    if (last) {
        float *bufs[] = {s->att, gate, s->x, NULL};
        const int widths[] = {q_dim, q_dim, hp->n_embd};
        n = model_keep_output_rows(m, ub, bufs, widths);
    }
    engine_sigmoid_mul(be, s->att, s->att, gate, (int64_t)n * q_dim);
    model_attn_out(m, L, n);
    return n;
}

void model_gdn_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    int n = ub->n;
    model_embed_input(m, ub);  // x: (n, n_embd)
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        const struct gdn_layer *G = L->mixer;
        bool last = il == hp->n_layer - 1;
        n = G->recurrent ? delta_mixer(m, L, ub, n, last) : attn_mixer(m, L, ub, n, last);
        if (n == 0)
            return;
        model_ffn_block(m, L, n);  // post_attention_norm, dense SwiGLU or MoE
    }
    model_output_logits(m, ub, n);
}

const struct model_arch model_arch_qwen35 = {
    .name = "qwen35",
    .rope_mode = ENGINE_ROPE_NEOX,
    .act = MODEL_ACT_SILU,
    .names = {.ffn_norm = "post_attention_norm"},
    .load = model_gdn_load,
    .bind = model_gdn_bind,
    .forward = model_gdn_forward,
    .prepare = model_gdn_prepare,
    .custom_layers = true,
};

const struct model_arch model_arch_qwen35moe = {
    .name = "qwen35moe",
    .rope_mode = ENGINE_ROPE_NEOX,
    .act = MODEL_ACT_SILU,
    .names = {.ffn_norm = "post_attention_norm"},
    .load = model_gdn_load,
    .bind = model_gdn_bind,
    .forward = model_gdn_forward,
    .ffn = model_ffn_moe,
    .prepare = model_gdn_prepare,
    .custom_layers = true,
};

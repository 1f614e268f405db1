// The deepseek2 architecture (DeepSeek-V2 / V2-Lite / V3 / R1, Kimi K2,
// GLM-4.x-Flash; llama.cpp src/models/deepseek2.cpp): multi-head latent
// attention (MLA), leading dense FFN blocks, then mixture-of-experts FFNs
// with shared experts.
//
// MLA, per layer (H heads; per head dn "nope" + dr RoPE dims of query/key,
// dv value dims; a latent of R = kv_lora_rank):
//
//   h      = RMSNorm(x; attn_norm)
//   q      = attn_q_b RMSNorm(attn_q_a h; attn_q_a_norm)   (or attn_q h: no q LoRA)
//            per head [q_nope (dn) | q_pe (dr)]
//   c, k_pe = attn_kv_a_mqa h                              (R, dr)
//   c      = RMSNorm(c; attn_kv_a_norm)                    the latent
//   q_pe, k_pe = RoPE (adjacent pairs)
//
// The absorbed form (the files' attn_k_b / attn_v_b are per-head slices of
// the latent's up-projection): K_h·q_h = (W_kb,h^T q_nope,h)·c + q_pe,h·k_pe,
// and V_h = W_vb,h c, so every head attends one shared row per token,
//
//   cache row = [k_pe (dr) | c (R)],   query_h = [q_pe,h | W_kb,h^T q_nope,h]
//   o_h = W_vb,h (softmax(query_h · rows · scale) · rows)[dr:]
//   x += attn_output [o_1 .. o_H]
//
// one K/V head of dr + R wide (multi-query attention) whose V rows are its K
// rows: the cache holds dr + R values per token and layer (llama.cpp's
// MLA cache: the same, K only, V a view of it). RoPE first in the row so a
// context shift re-rotates exactly k_pe. The scale is 1/sqrt(dn + dr),
// times YaRN's mscale squared when the file asks for YaRN.
//
// The file's key_length / value_length are the absorbed row widths (R + dr,
// R) and key_length_mla / value_length_mla the per-head ones (llama.cpp's
// converter). Ollama's glm4moelite files (GLM-4.7-Flash) hold the same
// tensors with per-head key/value lengths and K/V head counts: read here
// the way Ollama's compatibility layer renames them for llama.cpp. Ollama's
// deepseek2 converter (and llama.cpp's before the split) writes one
// attn_kv_b per layer instead of attn_k_b / attn_v_b, with per-head
// lengths: llama.cpp runs those as plain multi-head attention (per-head K
// and V cached); here the value rows are used as W_vb and the key rows,
// turned around at load (a copy, H × R × dn per layer, F16 unless the file
// is F32; not in the estimate), as W_kb, so
// they get the same latent cache.
//
// FFN: leading_dense_block_count dense SwiGLU layers, then a MoE (softmax
// or sigmoid router, exp_probs_b biasing the choice, optional
// renormalisation and expert_weights_scale) plus the shared experts.
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"

// A layer's MLA weights (model_layer.mixer), per-head views at the end.
struct ds2_mla {
    struct engine_tensor wq_a, wq_b, wq;  // wq: attn_q when there is no q LoRA
    const float *q_a_norm, *kv_a_norm;
    struct engine_tensor kv_pe, kv_lat;  // row views of attn_kv_a_mqa: [n_embd, dr], [n_embd, R]
    struct engine_tensor heads[];        // k_b[H] ([dn → R]) then v_b[H] ([R → dv])
};

// Shapes, read by the load hook (kept in the layer-0 mixer's dims below).
struct ds2_dims {
    int H, dn, dr, dv, R, ql, g;  // g: the gather granule (divides every piece)
};

static struct ds2_dims dims_of(const struct model *m);

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static bool is_glm4moelite(const struct model *m)
{
    return str_eq_cstr(gguf_architecture(m->g), "glm4moelite");
}

// The older layout (Ollama's deepseek2 converter, llama.cpp's before the
// split): one attn_kv_b {R, H × (dn + dv)} per layer, per-head key/value
// lengths and K/V head counts. Its K rows are turned around at load.
static bool is_unsplit(const struct model *m)
{
    return !gguf_tensor_find(m->g, "blk.0.attn_k_b.weight") &&
           gguf_tensor_find(m->g, "blk.0.attn_kv_b.weight");
}

// Per-head q/k width (dn + dr) and value width (dv).
static int head_widths(const struct model *m, int *dk, int *dv, struct err *e)
{
    uint32_t k = 0, v = 0;
    if (is_glm4moelite(m) || is_unsplit(m)) {
        // key_length / value_length are per head.
        if (!gguf_get_arch_u32(m->g, "attention.key_length", &k) ||
            !gguf_get_arch_u32(m->g, "attention.value_length", &v))
            return err_set(e, ERR_FORMAT, "missing attention.key_length / value_length");
    } else if (!gguf_get_arch_u32(m->g, "attention.key_length_mla", &k) ||
               !gguf_get_arch_u32(m->g, "attention.value_length_mla", &v)) {
        return err_set(e, ERR_FORMAT, "missing attention.key_length_mla / value_length_mla");
    }
    if (k < 1 || v < 1 || k > 4096 || v > 4096)
        return err_set(e, ERR_FORMAT, "invalid MLA head widths %u / %u", k, v);
    *dk = (int)k;
    *dv = (int)v;
    return 0;
}

static float yarn_get_mscale(float scale, float mscale)
{
    return scale <= 1.0f ? 1.0f : 0.1f * mscale * logf(scale) + 1.0f;
}

// The attention scale and the RoPE attention factor (llama.cpp's
// llama_context for YaRN and deepseek2's graph): the rope's cos/sin carry
// the file's attn_factor times the mscale ratio, the scores mscale^2.
static void read_scale(struct model *m, int dk)
{
    struct model_hparams *hp = &m->hp;
    struct engine_rope *rp = &hp->rope;
    const float factor = 1.0f / rp->freq_scale, lf = logf(factor);
    float log_mul = 0;
    if (gguf_get_arch_f32(m->g, "rope.scaling.yarn_log_multiplier", &log_mul))
        log_mul /= 0.1f;  // the converter stores 0.1 × mscale_all_dim
    float af = rp->attn_factor;
    if (rp->ext_factor != 0.0f) {
        float ratio;
        if (log_mul != 0.0f) {
            float mscale = log_mul != 1.0f ? log_mul : 1.0f;
            ratio = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, log_mul);
        } else {
            ratio = yarn_get_mscale(factor, 1.0f);
        }
        af = rp->attn_factor * ratio / (1.0f + 0.1f * lf);
    }
    rp->attn_factor = af;
    hp->rope_swa = *rp;
    const float mscale = af * (1.0f + 0.1f * lf) * (1.0f + 0.1f * log_mul * lf);
    hp->q_scale = mscale * mscale / sqrtf((float)dk);
}

static int ds2_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    uint32_t R = 0, ql = 0;
    int dk, dv, rc;
    if (!gguf_get_arch_u32(m->g, "attention.kv_lora_rank", &R) || R < 1 || R > 65536)
        return err_set(e, ERR_FORMAT, "missing or invalid key attention.kv_lora_rank");
    gguf_get_arch_u32(m->g, "attention.q_lora_rank", &ql);
    if (!gguf_tensor_find(m->g, "blk.0.attn_q_a.weight"))
        ql = 0;  // V2-Lite: attn_q (its files may still state a rank)
    if (ql > 65536)
        return err_set(e, ERR_FORMAT, "invalid attention.q_lora_rank %u", ql);
    if ((rc = head_widths(m, &dk, &dv, e)) < 0)
        return rc;
    const int dr = hp->rope.n_rot, dn = dk - dr;
    if (dn < 1)
        return err_set(e, ERR_FORMAT, "MLA key width %d is not above the RoPE dims %d", dk, dr);
    // One K/V head of [k_pe | latent] per token; V is the same row.
    hp->head_dim = dr + (int)R;
    hp->n_head_kv = 1;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].n_head_kv = 1;
    hp->kv_v_is_k = true;
    read_scale(m, dk);
    float temp;
    if (gguf_get_arch_f32(m->g, "attention.temperature_scale", &temp) && temp != 0.0f)
        return err_set(e, ERR_UNSUPPORTED, "attention temperature scaling");
    const int H = hp->n_head, g = gcd(gcd(dn, dr), gcd(dv, (int)R));
    // mix: qa, q, latent, k_pe, q_nope (by head), q_pe, absorbed q (by
    // head; later the attention's latent part), per-head outputs, then the
    // gathers' indices (int32, one per granule of the widest gather).
    int64_t widest = (int64_t)H * (dr + (int64_t)R);
    widest = (int64_t)H * dn > widest ? (int64_t)H * dn : widest;
    widest = (int64_t)H * dv > widest ? (int64_t)H * dv : widest;
    hp->mix_floats = (int64_t)ql + (int64_t)H * dk + R + dr + (int64_t)H * dn + (int64_t)H * dr +
                     (int64_t)H * R + (int64_t)H * dv + widest / g;
    return 0;
}

static struct ds2_dims dims_of(const struct model *m)
{
    const struct model_hparams *hp = &m->hp;
    const struct ds2_mla *a = m->layers[0].mixer;
    struct ds2_dims d;
    d.H = hp->n_head;
    d.dr = hp->rope.n_rot;
    d.R = hp->head_dim - d.dr;
    d.ql = a->wq_a.data ? (int)a->wq_a.ne[1] : 0;
    d.dn = (int)a->heads[0].ne[0];
    d.dv = (int)a->heads[d.H].ne[1];
    d.g = gcd(gcd(d.dn, d.dr), gcd(d.dv, d.R));
    return d;
}

// The per-head slices of a 3-D tensor {cols, rows, H}: H views of rows × cols.
static int bind_heads(struct model *m, struct engine_tensor *out, const char *name, int64_t cols,
                      int64_t rows, int H, struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    if (!gt)
        return err_set(e, ERR_FORMAT, "missing tensor %s", name);
    if (gt->ne[0] != cols || gt->ne[1] != rows || gt->ne[2] != H || gt->ne[3] != 1)
        return err_set(e, ERR_FORMAT,
                       "tensor %s has shape [%lld, %lld, %lld], expected [%lld, "
                       "%lld, %d]",
                       name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)gt->ne[2],
                       (long long)cols, (long long)rows, H);
    struct engine_tensor all;
    int rc = engine_tensor_from_gguf(&all, gt, e);
    if (rc < 0)
        return rc;
    for (int h = 0; h < H; h++)
        model_row_view(&out[h], &all, (int64_t)h * rows, rows);
    return 0;
}

// The unsplit attn_kv_b {R, H × (dn + dv)}: head h's rows are dn key rows
// then dv value rows, each over the latent. The value rows are W_vb,h as
// they are; the key rows turned around (in kt: H × R × dn, F32 when the file
// is F32, else F16) are W_kb,h.
static int bind_unsplit(struct model *m, struct engine_tensor *heads, void *kt, const char *name,
                        int dn, int dv, int R, int H, struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    if (!gt)
        return err_set(e, ERR_FORMAT, "missing tensor %s", name);
    const struct quant_traits *qt = quant_traits_get(gt->type);
    if (gt->ne[0] != R || gt->ne[1] != (int64_t)H * (dn + dv) || gt->ne[2] != 1 || !qt ||
        !qt->to_float || !gt->data)
        return err_set(e, ERR_FORMAT, "tensor %s: expected [%d, %lld] of a known type", name, R,
                       (long long)H * (dn + dv));
    struct engine_tensor all;
    int rc = engine_tensor_from_gguf(&all, gt, e);
    if (rc < 0)
        return rc;
    const bool f32 = gt->type == GGUF_TYPE_F32;
    const size_t es = f32 ? sizeof(float) : sizeof(uint16_t);
    float *row = xmalloc((size_t)R * sizeof(float));
    for (int h = 0; h < H; h++) {
        uint8_t *k = (uint8_t *)kt + (size_t)h * R * dn * es;
        for (int i = 0; i < dn; i++) {
            int64_t r = (int64_t)h * (dn + dv) + i;
            qt->to_float((const uint8_t *)gt->data + (size_t)r * all.row_bytes, row, R);
            for (int j = 0; j < R; j++) {
                size_t at = (size_t)j * dn + i;
                if (f32)
                    ((float *)k)[at] = row[j];
                else
                    ((uint16_t *)k)[at] = quant_f32_to_f16(row[j]);
            }
        }
        heads[h] = (struct engine_tensor){
            .type = f32 ? GGUF_TYPE_F32 : GGUF_TYPE_F16,
            .ne = {dn, R},
            .row_bytes = (size_t)dn * es,
            .data = k,
        };
        model_row_view(&heads[H + h], &all, (int64_t)h * (dn + dv) + dn, dv);
    }
    free(row);
    return 0;
}

static int bind_mla(struct model *m, int il, int dk, int dv, int ql, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    struct model_layer *L = &m->layers[il];
    const int H = hp->n_head, dr = hp->rope.n_rot, R = hp->head_dim - dr, dn = dk - dr;
    const int64_t D = hp->n_embd;
    // With the unsplit attn_kv_b, the turned-around key rows follow.
    const bool unsplit = is_unsplit(m);
    char n[GGUF_MAX_NAME_LEN + 1];
    snprintf(n, sizeof n, "blk.%d.attn_kv_b.weight", il);
    const struct gguf_tensor *kvb = unsplit ? gguf_tensor_find(m->g, n) : NULL;
    size_t kt_bytes = kvb ? (size_t)H * R * dn * (kvb->type == GGUF_TYPE_F32 ? 4 : 2) : 0;
    struct ds2_mla *a =
        xcalloc(1, sizeof *a + 2 * (size_t)H * sizeof(struct engine_tensor) + kt_bytes);
    L->mixer = a;
    void *kt = a->heads + 2 * H;
    struct engine_tensor kv_a;
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"), D, true, e)) < 0 ||
        (rc = model_bind_vector(m, &a->kv_a_norm, NAME("attn_kv_a_norm.weight"), R, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &kv_a, NAME("attn_kv_a_mqa.weight"), D, R + dr, true, e)) < 0 ||
        (unsplit &&
         (rc = bind_unsplit(m, a->heads, kt, NAME("attn_kv_b.weight"), dn, dv, R, H, e)) < 0) ||
        (!unsplit && (rc = bind_heads(m, a->heads, NAME("attn_k_b.weight"), dn, R, H, e)) < 0) ||
        (!unsplit &&
         (rc = bind_heads(m, a->heads + H, NAME("attn_v_b.weight"), R, dv, H, e)) < 0) ||
        (rc = model_bind_matrix(m, &L->wo, NAME("attn_output.weight"), (int64_t)H * dv, D, true,
                                e)) < 0)
        return rc;
    if (ql > 0) {
        if ((rc = model_bind_matrix(m, &a->wq_a, NAME("attn_q_a.weight"), D, ql, true, e)) < 0 ||
            (rc = model_bind_vector(m, &a->q_a_norm, NAME("attn_q_a_norm.weight"), ql, true, e)) <
                0 ||
            (rc = model_bind_matrix(m, &a->wq_b, NAME("attn_q_b.weight"), ql, (int64_t)H * dk, true,
                                    e)) < 0)
            return rc;
        L->mats[L->n_mats++] = &a->wq_a;
        L->mats[L->n_mats++] = &a->wq_b;
    } else {
        if ((rc = model_bind_matrix(m, &a->wq, NAME("attn_q.weight"), D, (int64_t)H * dk, true,
                                    e)) < 0)
            return rc;
        L->mats[L->n_mats++] = &a->wq;
    }
#undef NAME
    model_row_view(&a->kv_lat, &kv_a, 0, R);
    model_row_view(&a->kv_pe, &kv_a, R, dr);
    L->mats[L->n_mats++] = &a->kv_lat;
    L->mats[L->n_mats++] = &a->kv_pe;
    return 0;
}

static int ds2_bind(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    uint32_t lead = 0, gating = 0, ql = 0;
    bool norm_w = false;
    float w_scale = 0;
    int dk, dv, rc;
    if ((rc = head_widths(m, &dk, &dv, e)) < 0)
        return rc;
    if (gguf_tensor_find(m->g, "blk.0.attn_q_a.weight"))
        gguf_get_arch_u32(m->g, "attention.q_lora_rank", &ql);
    gguf_get_arch_u32(m->g, "leading_dense_block_count", &lead);
    if (lead > (uint32_t)hp->n_layer)
        return err_set(e, ERR_FORMAT, "invalid leading_dense_block_count %u", lead);
    for (int il = 0; il < hp->n_layer; il++) {
        if ((rc = bind_mla(m, il, dk, dv, (int)ql, e)) < 0 ||
            (rc = model_bind_layer_ffn(m, il, e)) < 0 ||  // ffn_norm (the FFN hook binds the rest)
            (il < (int)lead && (rc = model_bind_layer_dense_ffn(m, il, e)) < 0))
            return rc;
    }
    // The router: expert_gating_func 1 softmax, 2 sigmoid; absent: softmax
    // (DeepSeek-V2 files), except GLM-4.7-Flash's (47/48 layers, 154880
    // tokens) as llama.cpp guesses.
    if (!gguf_get_arch_u32(m->g, "expert_gating_func", &gating) || gating == 0)
        gating = (hp->n_layer == 47 || hp->n_layer == 48) && hp->n_vocab == 154880 ? 2 : 1;
    if (gating != 1 && gating != 2)
        return err_set(e, ERR_UNSUPPORTED, "expert_gating_func %u", gating);
    char key[128];
    const struct gguf_kv *kv =
        gguf_find(m->g, model_key(m, key, sizeof key, "expert_weights_norm"));
    if (kv && kv->val.type == GGUF_VAL_BOOL)
        norm_w = kv->val.v.b;
    gguf_get_arch_f32(m->g, "expert_weights_scale", &w_scale);
    // Group-limited routing (DeepSeek-V3: 8 groups, 4 used).
    uint32_t groups = 0, groups_used = 0;
    if (gguf_get_arch_u32(m->g, "expert_group_count", &groups) && groups > 1 &&
        (!gguf_get_arch_u32(m->g, "expert_group_used_count", &groups_used) || groups > 256))
        return err_set(e, ERR_FORMAT, "expert_group_count %u without a valid used count", groups);
    if (w_scale == 1.0f)
        w_scale = 0;
    const struct model_moe_spec spec = {
        .gating = gating == 2 ? ENGINE_MOE_SIGMOID : ENGINE_MOE_SOFTMAX,
        .norm_w = norm_w,
        .act = ENGINE_MOE_SILU,
        .first_layer = (int)lead,
        .shared = true,
        .w_scale = w_scale,
        .n_group = (int)groups,
        .n_group_used = (int)groups_used,
    };
    if (lead < (uint32_t)hp->n_layer && (rc = model_bind_moe(m, &spec, e)) < 0)
        return rc;
    return 0;
}

// ---------------------------------------------------------------------------
// The forward pass. Gathers rearrange the per-head pieces between the
// row-major activations and the head-major inputs of the per-head matmuls
// (engine_gather on rows of g floats: every piece is a multiple of g).

struct ds2_bufs {
    float *qa, *q, *lat, *pe, *qn, *qp, *qab, *ov;  // in s.mix (see ds2_load)
    int32_t *idx;  // gather indices, after them in s.mix (the CPU backend's memory is the host's)
};

static struct ds2_bufs bufs_of(struct model *m, const struct ds2_dims *d, int dk)
{
    const int64_t nb = m->opts.n_batch;
    struct ds2_bufs b;
    b.qa = m->s.mix;
    b.q = b.qa + nb * d->ql;
    b.lat = b.q + nb * d->H * dk;
    b.pe = b.lat + nb * d->R;
    b.qn = b.pe + nb * d->dr;
    b.qp = b.qn + nb * d->H * d->dn;
    b.qab = b.qp + nb * d->H * d->dr;
    b.ov = b.qab + nb * d->H * d->R;
    b.idx = (int32_t *)(b.ov + nb * d->H * d->dv);
    return b;
}

// Appends the granules of floats [off, off + len) of base to idx.
static void run(int32_t *idx, int64_t *k, int64_t off, int len, int g)
{
    for (int i = 0; i < len / g; i++)
        idx[(*k)++] = (int32_t)(off / g + i);
}

static void gather(struct model *m, float *dst, const float *base, const int32_t *idx, int64_t k,
                   int g)
{
    engine_gather(m->be, dst, base, idx, k, g);
}

// Queries of n rows into s.q: [q_pe | W_kb^T q_nope] per head, RoPE'd.
static void mla_queries(struct model *m, struct model_layer *L, const struct ds2_dims *d,
                        const struct ds2_bufs *b, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct ds2_mla *a = L->mixer;
    const int H = d->H, dk = d->dn + d->dr, g = d->g;
    const float *mix = m->s.mix;
    int32_t *idx = b->idx;
    int64_t k = 0;
    if (d->ql > 0) {
        engine_matmul(be, b->qa, &a->wq_a, NULL, m->s.xb, n);
        engine_rmsnorm(be, b->qa, b->qa, a->q_a_norm, n, d->ql, hp->eps);
        engine_matmul(be, b->q, &a->wq_b, NULL, b->qa, n);
    } else {
        engine_matmul(be, b->q, &a->wq, NULL, m->s.xb, n);
    }
    // q_nope by head, q_pe by row.
    for (int h = 0; h < H; h++)
        for (int r = 0; r < n; r++)
            run(idx, &k, (int64_t)(r * H + h) * dk + (b->q - mix), d->dn, g);
    gather(m, b->qn, mix, idx, k, g);
    k = 0;
    for (int r = 0; r < n; r++)
        for (int h = 0; h < H; h++)
            run(idx, &k, (int64_t)(r * H + h) * dk + d->dn + (b->q - mix), d->dr, g);
    gather(m, b->qp, mix, idx, k, g);
    engine_rope(be, b->qp, n, H, d->dr, ub->pos, L->rope);
    for (int h = 0; h < H; h++)
        engine_matmul(be, b->qab + (int64_t)h * n * d->R, &a->heads[h], NULL,
                      b->qn + (int64_t)h * n * d->dn, n);
    k = 0;
    for (int r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            run(idx, &k, (int64_t)(r * H + h) * d->dr + (b->qp - mix), d->dr, g);
            run(idx, &k, ((int64_t)h * n + r) * d->R + (b->qab - mix), d->R, g);
        }
    gather(m, m->s.q, mix, idx, k, g);
}

// The latent rows [k_pe | RMSNorm(c)] of n rows into the cache.
static void mla_cache_rows(struct model *m, struct model_layer *L, const struct ds2_dims *d,
                           const struct ds2_bufs *b, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct ds2_mla *a = L->mixer;
    const float *mix = m->s.mix;
    const struct engine_matmul_job jobs[2] = {
        {&a->kv_lat, b->lat, NULL},
        {&a->kv_pe, b->pe, NULL},
    };
    engine_matmul_n(be, jobs, 2, m->s.xb, n);
    engine_rmsnorm(be, b->lat, b->lat, a->kv_a_norm, n, d->R, hp->eps);
    engine_rope(be, b->pe, n, 1, d->dr, ub->pos, L->rope);
    int64_t k = 0;
    for (int r = 0; r < n; r++) {
        run(b->idx, &k, (int64_t)r * d->dr + (b->pe - mix), d->dr, d->g);
        run(b->idx, &k, (int64_t)r * d->R + (b->lat - mix), d->R, d->g);
    }
    gather(m, m->s.k, mix, b->idx, k, d->g);
    engine_kv_store(be, &L->kv, m->kv_type, ub->cells, m->s.k, m->s.k, n, hp->head_dim);
}

// n rows of s.att (per head [·, latent]) through W_vb per head into s.q
// as (n, H × dv), the input of attn_output.
static void mla_values(struct model *m, struct model_layer *L, const struct ds2_dims *d,
                       const struct ds2_bufs *b, int n)
{
    struct ds2_mla *a = L->mixer;
    const int H = d->H, g = d->g, w = d->dr + d->R;
    const float *mix = m->s.mix;
    int64_t k = 0;
    for (int h = 0; h < H; h++)
        for (int r = 0; r < n; r++)
            run(b->idx, &k, (int64_t)(r * H + h) * w + d->dr, d->R, g);
    gather(m, b->qab, m->s.att, b->idx, k, g);  // the latent part, by head
    for (int h = 0; h < H; h++)
        engine_matmul(m->be, b->ov + (int64_t)h * n * d->dv, &a->heads[H + h], NULL,
                      b->qab + (int64_t)h * n * d->R, n);
    k = 0;
    for (int r = 0; r < n; r++)
        for (int h = 0; h < H; h++)
            run(b->idx, &k, ((int64_t)h * n + r) * d->dv + (b->ov - mix), d->dv, g);
    gather(m, m->s.q, mix, b->idx, k, g);
}

static void ds2_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const struct ds2_dims d = dims_of(m);
    const int n_embd = hp->n_embd, dk = d.dn + d.dr;
    const struct ds2_bufs b = bufs_of(m, &d, dk);
    int n = ub->n;

    model_embed_input(m, ub);  // x: (n, n_embd)
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, n_embd, hp->eps);
        mla_queries(m, L, &d, &b, ub, n);
        mla_cache_rows(m, L, &d, &b, ub, n);
        if (il == hp->n_layer - 1 && ub->n_out == 0)
            return;  // the cache is filled; nobody wants outputs
        const struct engine_attn attn = {
            .n_head = d.H,
            .n_head_kv = 1,
            .head_dim = hp->head_dim,
            .scale = hp->q_scale,
            .kv_type = m->kv_type,
        };
        engine_attention(be, s->att, s->q, n, &L->kv, ub->cell0, ub->n_visible, &attn);
        if (il == hp->n_layer - 1)
            n = model_keep_output_rows(m, ub, (float *[]){s->att, s->x, NULL},
                                       (const int[]){d.H * hp->head_dim, n_embd});
        mla_values(m, L, &d, &b, n);
        engine_matmul(be, s->xb, &L->wo, NULL, s->q, n);
        engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
        model_ffn_block(m, L, n);
    }
    model_output_logits(m, ub, n);
}

const struct model_arch model_arch_deepseek2 = {
    .name = "deepseek2",
    .alias = "glm4moelite",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .act = MODEL_ACT_SILU,
    .load = ds2_load,
    .bind = ds2_bind,
    .forward = ds2_forward,
    .ffn = model_ffn_moe_or_dense,
    .prepare = model_prepare_moe,
    .custom_layers = true,
};

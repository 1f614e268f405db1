// The architecture table and the generic loader: hyper-parameters (spec
// §0.1) and decoder tensors, read as each family's table row describes
// (struct model_arch in internal.h). A family file holds its row and the
// hooks for what no field describes.
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct model_arch *const model_archs[] = {
    &model_arch_llama,          &model_arch_qwen2,         &model_arch_qwen3,
    &model_arch_gemma2,         &model_arch_gemma3,        &model_arch_phi3,
    &model_arch_bert,           &model_arch_nomic_bert,    &model_arch_qwen3moe,
    &model_arch_gpt_oss,        &model_arch_gptoss,        &model_arch_qwen35,
    &model_arch_qwen35moe,      &model_arch_qwen3next,     &model_arch_nemotron_h,
    &model_arch_nemotron_h_moe, &model_arch_granitehybrid, &model_arch_lfm2,
    &model_arch_lfm2moe,        &model_arch_deepseek2,     &model_arch_smollm3,
    &model_arch_olmo2,          &model_arch_mistral3,      &model_arch_cohere2,
    &model_arch_glm4moe,        &model_arch_granite,       &model_arch_gemma4,
    &model_arch_llama4,         &model_arch_gemma_embd,    &model_arch_gemma3n,
    &model_arch_qwen2vl,        &model_arch_qwen3vl,
};

const struct model_arch *model_arch_find(struct str name)
{
    for (size_t i = 0; i < sizeof model_archs / sizeof model_archs[0]; i++) {
        const struct model_arch *a = model_archs[i];
        if (str_eq_cstr(name, a->name) || (a->alias && str_eq_cstr(name, a->alias)))
            return a;
    }
    return NULL;
}

const char *model_key(const struct model *m, char *buf, size_t n, const char *suffix)
{
    struct str a = gguf_architecture(m->g);
    snprintf(buf, n, "%.*s.%s", (int)a.len, a.ptr, suffix);
    return buf;
}

int model_need_u32(const struct model *m, const char *suffix, int *out, struct err *e)
{
    uint32_t v;
    struct str a = gguf_architecture(m->g);
    if (!gguf_get_arch_u32(m->g, suffix, &v))
        return err_set(e, ERR_FORMAT, "missing or invalid key %.*s.%s", (int)a.len, a.ptr, suffix);
    if (v > INT32_MAX)
        return err_set(e, ERR_FORMAT, "key %.*s.%s out of range", (int)a.len, a.ptr, suffix);
    *out = (int)v;
    return 0;
}

int model_read_base_hparams(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    int rc;
    if ((rc = model_need_u32(m, "context_length", &hp->n_ctx_train, e)) < 0 ||
        (rc = model_need_u32(m, "embedding_length", &hp->n_embd, e)) < 0 ||
        (rc = model_need_u32(m, "block_count", &hp->n_layer, e)) < 0 ||
        (rc = model_need_u32(m, "attention.head_count", &hp->n_head, e)) < 0)
        return rc;
    if (hp->n_layer < 1 || hp->n_layer > MODEL_MAX_LAYERS)
        return err_set(e, ERR_FORMAT, "invalid hyper-parameters: %d layers", hp->n_layer);
    return 0;
}

// RoPE of the global layers: base, scaling type and factor, YaRN.
static int read_rope(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    struct engine_rope *rp = &hp->rope;
    uint32_t v;
    memset(rp, 0, sizeof *rp);
    rp->mode = m->arch->rope_mode;
    rp->n_rot = gguf_get_arch_u32(m->g, "rope.dimension_count", &v) ? (int)v : hp->head_dim;
    if (rp->n_rot < 2 || rp->n_rot > hp->head_dim || rp->n_rot % 2 != 0)
        return err_set(e, ERR_FORMAT, "invalid rope.dimension_count %d", rp->n_rot);
    if (m->arch->rope_full && rp->n_rot != hp->head_dim)
        return err_set(e, ERR_UNSUPPORTED, "rope.dimension_count %d != head_dim %d", rp->n_rot,
                       hp->head_dim);
    // Ollama's gemma3 files name the global base rope.global.freq_base.
    if (!gguf_get_arch_f32(m->g, "rope.freq_base", &rp->freq_base) &&
        !gguf_get_arch_f32(m->g, "rope.global.freq_base", &rp->freq_base))
        rp->freq_base = 10000.0f;
    rp->freq_scale = 1.0f;
    rp->attn_factor = 1.0f;
    rp->beta_fast = 32.0f;
    rp->beta_slow = 1.0f;
    rp->n_ctx_orig = hp->n_ctx_train;
    if (gguf_get_arch_u32(m->g, "rope.scaling.original_context_length", &v) && v > 0 &&
        v <= INT32_MAX)
        rp->n_ctx_orig = (int)v;
    gguf_get_arch_f32(m->g, "rope.scaling.attn_factor", &rp->attn_factor);
    float factor = 0;
    if (!gguf_get_arch_f32(m->g, "rope.scaling.factor", &factor))
        gguf_get_arch_f32(m->g, "rope.scale_linear", &factor);
    char key[128];
    struct str stype = STR_LIT("linear");
    gguf_get_str(m->g, model_key(m, key, sizeof key, "rope.scaling.type"), &stype);
    if (str_eq_cstr(stype, "none")) {
        factor = 0;
    } else if (str_eq_cstr(stype, "yarn")) {
        rp->ext_factor = 1.0f;
        gguf_get_arch_f32(m->g, "rope.scaling.yarn_beta_fast", &rp->beta_fast);
        gguf_get_arch_f32(m->g, "rope.scaling.yarn_beta_slow", &rp->beta_slow);
    } else if (!str_eq_cstr(stype, "linear") && !str_eq_cstr(stype, "longrope")) {
        return err_set(e, ERR_UNSUPPORTED, "unsupported rope scaling type %.*s", (int)stype.len,
                       stype.ptr);
    }
    if (factor > 0)
        rp->freq_scale = 1.0f / factor;
    if (!(rp->freq_base > 0) || !isfinite(rp->freq_base) || !(rp->freq_scale > 0) ||
        !isfinite(rp->attn_factor))
        return err_set(e, ERR_FORMAT, "invalid rope parameters");
    return 0;
}

// Which layers are sliding-window ones: the file's sliding_window_pattern
// (a number, or one bool per layer as Ollama writes it), else the row's.
static int read_swa(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const struct model_arch *a = m->arch;
    uint32_t v;
    hp->n_swa = a->default_swa;
    if (a->swa_pattern > 0 && gguf_get_arch_u32(m->g, "attention.sliding_window", &v))
        hp->n_swa = v > INT32_MAX ? INT32_MAX : (int)v;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].swa = false;
    if (a->swa_pattern <= 0 || hp->n_swa <= 0) {
        hp->n_swa = 0;
        return 0;
    }
    char key[128];
    const struct gguf_kv *kv =
        gguf_find(m->g, model_key(m, key, sizeof key, "attention.sliding_window_pattern"));
    if (kv && kv->val.type == GGUF_VAL_ARRAY) {
        if (kv->val.arr_count != (uint64_t)hp->n_layer)
            return err_set(e, ERR_FORMAT, "%s has %llu entries for %d layers", key,
                           (unsigned long long)kv->val.arr_count, hp->n_layer);
        for (int il = 0; il < hp->n_layer; il++) {
            struct gguf_value ev;
            if (!gguf_arr_value(&kv->val, (uint64_t)il, &ev))
                return err_set(e, ERR_FORMAT, "invalid %s", key);
            m->layers[il].swa = ev.type == GGUF_VAL_BOOL ? ev.v.b : ev.v.u64 != 0;
        }
        return 0;
    }
    int pattern = a->swa_pattern;
    if (kv && gguf_get_u32(m->g, key, &v) && v > 0 && v <= (uint32_t)MODEL_MAX_LAYERS)
        pattern = (int)v;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].swa = il % pattern < pattern - 1;
    return 0;
}

// A key that is one number or one number per layer (hybrids:
// feed_forward_length, attention.head_count_kv). per_layer[il] gets each
// layer's value; *max the largest. Absent: dflt for every layer (-1: required).
static int read_layer_u32(struct model *m, const char *suffix, int dflt, int *per_layer, int *max,
                          struct err *e)
{
    char key[128];
    const struct gguf_kv *kv = gguf_find(m->g, model_key(m, key, sizeof key, suffix));
    int n_layer = m->hp.n_layer;
    *max = 0;
    if (kv && kv->val.type == GGUF_VAL_ARRAY) {
        if (kv->val.arr_count != (uint64_t)n_layer)
            return err_set(e, ERR_FORMAT, "%s has %llu entries for %d layers", key,
                           (unsigned long long)kv->val.arr_count, n_layer);
        for (int il = 0; il < n_layer; il++) {
            struct gguf_value ev;
            if (!gguf_arr_value(&kv->val, (uint64_t)il, &ev) || ev.type == GGUF_VAL_BOOL ||
                ev.v.u64 > INT32_MAX)
                return err_set(e, ERR_FORMAT, "invalid %s", key);
            per_layer[il] = (int)ev.v.u64;
        }
    } else {
        uint32_t v;
        if (kv && !gguf_get_u32(m->g, key, &v))
            return err_set(e, ERR_FORMAT, "invalid key %s", key);
        if (!kv && dflt < 0)
            return err_set(e, ERR_FORMAT, "missing or invalid key %s", key);
        if (kv && v > INT32_MAX)
            return err_set(e, ERR_FORMAT, "key %s out of range", key);
        for (int il = 0; il < n_layer; il++)
            per_layer[il] = kv ? (int)v : dflt;
    }
    for (int il = 0; il < n_layer; il++)
        *max = per_layer[il] > *max ? per_layer[il] : *max;
    return 0;
}

// feed_forward_length and attention.head_count_kv, per layer. Families with
// their own layers may have layers without either (0); the attention layers
// must share one K/V head count (the cache's row width).
static int read_layer_shapes(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const bool custom = m->arch->custom_layers;
    int *ff = xcalloc((size_t)hp->n_layer, sizeof(int)),
        *kv = xcalloc((size_t)hp->n_layer, sizeof(int));
    int rc = read_layer_u32(m, "feed_forward_length", custom ? 0 : -1, ff, &hp->n_ff, e);
    if (rc >= 0)
        rc = read_layer_u32(m, "attention.head_count_kv", hp->n_head, kv, &hp->n_head_kv, e);
    for (int il = 0; rc >= 0 && il < hp->n_layer; il++) {
        m->layers[il].n_ff = ff[il];
        m->layers[il].n_head_kv = kv[il];
        if ((!custom && (ff[il] < 1 || kv[il] < 1)) || (kv[il] > 0 && kv[il] != hp->n_head_kv))
            rc = err_set(e, ERR_UNSUPPORTED,
                         "layer %d: %d K/V heads and feed-forward length %d are not supported", il,
                         kv[il], ff[il]);
    }
    free(ff);
    free(kv);
    if (rc >= 0 && hp->n_head_kv == 0)
        hp->n_head_kv = hp->n_head;  // no attention layer at all: any width will do
    return rc;
}

// Which layers slide and which RoPE each applies (the sliding layers' own
// base, none on a family's no-RoPE layers).
static int read_layer_ropes(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const struct model_arch *a = m->arch;
    int rc;
    if ((rc = read_swa(m, e)) < 0)
        return rc;
    hp->rope_swa = hp->rope;
    if (hp->n_swa > 0) {
        float base;
        if (gguf_get_arch_f32(m->g, "rope.freq_base_swa", &base) ||
            gguf_get_arch_f32(m->g, "rope.local.freq_base", &base))
            hp->rope_swa.freq_base = base;
        else if (a->swa_freq_base > 0)
            hp->rope_swa.freq_base = a->swa_freq_base;
        if (a->swa_unscaled) {
            hp->rope_swa.freq_scale = 1.0f;
            hp->rope_swa.ext_factor = 0.0f;
        }
        if (!(hp->rope_swa.freq_base > 0) || !isfinite(hp->rope_swa.freq_base))
            return err_set(e, ERR_FORMAT, "invalid local rope base");
    }
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        L->rope = L->swa ? &hp->rope_swa : &hp->rope;
        if ((a->nope_step > 0 && (il + 1) % a->nope_step == 0) ||
            (a->nope_global && hp->n_swa > 0 && !L->swa))
            L->rope = NULL;
    }
    return 0;
}

int model_read_hparams(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const struct model_arch *a = m->arch;
    int rc = model_read_base_hparams(m, e);
    if (rc < 0)
        return rc;
    m->layers = xcalloc((size_t)hp->n_layer, sizeof *m->layers);
    if (hp->n_head >= 1 && (rc = read_layer_shapes(m, e)) < 0)
        return rc;
    if (hp->n_embd < 1 || hp->n_head < 1 || hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0 ||
        (hp->n_ff < 1 && !a->custom_layers) || hp->n_embd > (1 << 20) || hp->n_ff > (1 << 22) ||
        hp->n_head > 4096 || hp->n_ctx_train < 1)
        return err_set(e, ERR_FORMAT,
                       "invalid hyper-parameters: %d layers, n_embd %d, %d heads, %d kv heads, "
                       "n_ff %d",
                       hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_ff);
    uint32_t v;
    hp->head_dim =
        gguf_get_arch_u32(m->g, "attention.key_length", &v) ? (int)v : hp->n_embd / hp->n_head;
    uint32_t vlen;
    // (Families with their own layers check it: deepseek2's value rows are
    // narrower than its key rows.)
    if (!a->custom_layers && gguf_get_arch_u32(m->g, "attention.value_length", &vlen) &&
        (int)vlen != hp->head_dim)
        return err_set(e, ERR_UNSUPPORTED, "value_length %u != key_length %d", vlen, hp->head_dim);
    if (hp->head_dim < 2 || hp->head_dim > 1024 || hp->head_dim % 2 != 0)
        return err_set(e, ERR_FORMAT, "invalid head dimension %d", hp->head_dim);
    if (!gguf_get_arch_f32(m->g, "attention.layer_norm_rms_epsilon", &hp->eps)) {
        if (!(a->default_eps > 0))
            return err_set(e, ERR_FORMAT, "missing key attention.layer_norm_rms_epsilon");
        hp->eps = a->default_eps;
    }
    if (!(hp->eps >= 0) || !isfinite(hp->eps))
        return err_set(e, ERR_FORMAT, "invalid layer_norm_rms_epsilon");
    if ((rc = read_rope(m, e)) < 0)
        return rc;

    // Per-layer types.
    if ((rc = read_layer_ropes(m, e)) < 0)
        return rc;

    // Attention and output features.
    hp->q_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->attn_softcap = a->default_attn_softcap;
    hp->final_softcap = a->default_final_softcap;
    if (a->softcaps) {
        gguf_get_arch_f32(m->g, "attn_logit_softcapping", &hp->attn_softcap);
        gguf_get_arch_f32(m->g, "final_logit_softcapping", &hp->final_softcap);
    }
    if (!(hp->attn_softcap >= 0) || !(hp->final_softcap >= 0) || !isfinite(hp->attn_softcap) ||
        !isfinite(hp->final_softcap))
        return err_set(e, ERR_FORMAT, "invalid soft-capping values");
    hp->embd_scale = a->embd_scale ? sqrtf((float)hp->n_embd) : 0.0f;
    return 0;
}

// ---------------------------------------------------------------------------
// Tensors.

int model_bind_matrix(struct model *m, struct engine_tensor *t, const char *name, int64_t ne0,
                      int64_t ne1, bool required, struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    memset(t, 0, sizeof *t);
    if (!gt)
        return required ? err_set(e, ERR_FORMAT, "missing tensor %s", name) : 0;
    if (gt->ne[0] != ne0 || gt->ne[1] != ne1 || gt->ne[2] != 1 || gt->ne[3] != 1)
        return err_set(e, ERR_FORMAT, "tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                       name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)ne0,
                       (long long)ne1);
    if (!engine_type_supported(gt->type)) {
        const char *tn = gguf_type_name(gt->type);
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: unsupported tensor type %s", name,
                       tn ? tn : "unknown");
    }
    return engine_tensor_from_gguf(t, gt, e);
}

int model_bind_vector(struct model *m, const float **out, const char *name, int64_t n,
                      bool required, struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    *out = NULL;
    if (!gt)
        return required ? err_set(e, ERR_FORMAT, "missing tensor %s", name) : 0;
    if (gt->type != GGUF_TYPE_F32)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: expected F32, got %s", name,
                       gguf_type_name(gt->type) ? gguf_type_name(gt->type) : "unknown");
    if (gt->ne[0] != n || gt->ne[1] != 1 || gt->ne[2] != 1 || gt->ne[3] != 1)
        return err_set(e, ERR_FORMAT, "tensor %s has %lld elements, expected %lld", name,
                       (long long)gt->ne[0], (long long)n);
    if (!gt->data)
        return err_set(e, ERR_FORMAT, "tensor %s has no data", name);
    *out = gt->data;
    return 0;
}

void model_row_view(struct engine_tensor *out, const struct engine_tensor *t, int64_t r0, int64_t n)
{
    *out = *t;
    out->ne[1] = n;
    out->data = (const uint8_t *)t->data + (size_t)r0 * t->row_bytes;
}

// Q, K and V: separate matrices, or views of a fused attn_qkv.
static int bind_qkv(struct model *m, struct model_layer *L, int il, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char n[GGUF_MAX_NAME_LEN + 1];
    snprintf(n, sizeof n, "blk.%d.attn_qkv.weight", il);
    if (gguf_tensor_find(m->g, n)) {
        if (!m->arch->fused_qkv)
            return err_set(e, ERR_UNSUPPORTED, "fused attn_qkv tensors are not supported");
        struct engine_tensor qkv;
        int rc = model_bind_matrix(m, &qkv, n, hp->n_embd, q_dim + 2 * kv_dim, true, e);
        if (rc < 0)
            return rc;
        model_row_view(&L->wq, &qkv, 0, q_dim);
        model_row_view(&L->wk, &qkv, q_dim, kv_dim);
        model_row_view(&L->wv, &qkv, q_dim + kv_dim, kv_dim);
        return 0;
    }
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if ((rc = model_bind_matrix(m, &L->wq, NAME("attn_q.weight"), hp->n_embd, q_dim, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &L->wk, NAME("attn_k.weight"), hp->n_embd, kv_dim, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &L->wv, NAME("attn_v.weight"), hp->n_embd, kv_dim, true, e)) < 0)
        return rc;
#undef NAME
    return 0;
}

// Gate and up: separate matrices, or views of a fused ffn_up (gate rows
// first, as llama.cpp's LLM_FFN_SWIGLU with LLM_FFN_SEQ splits it).
static int bind_gate_up(struct model *m, struct model_layer *L, int il, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
    if (m->arch->fused_gate_up) {
        struct engine_tensor gu;
        snprintf(n, sizeof n, "blk.%d.ffn_up.weight", il);
        if ((rc = model_bind_matrix(m, &gu, n, hp->n_embd, 2 * (int64_t)L->n_ff, true, e)) < 0)
            return rc;
        model_row_view(&L->w_gate, &gu, 0, L->n_ff);
        model_row_view(&L->w_up, &gu, L->n_ff, L->n_ff);
        return 0;
    }
    snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", il);
    if ((rc = model_bind_matrix(m, &L->w_gate, n, hp->n_embd, L->n_ff, true, e)) < 0)
        return rc;
    snprintf(n, sizeof n, "blk.%d.ffn_up.weight", il);
    return model_bind_matrix(m, &L->w_up, n, hp->n_embd, L->n_ff, true, e);
}

static const char *name_or(const char *name, const char *dflt)
{
    return name ? name : dflt;
}

int model_bind_gemma_attn(struct model *m, int il, int64_t hd, int64_t n_head_kv, bool own_kv,
                          bool v_own, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    const int64_t d = m->hp.n_embd, q_dim = (int64_t)m->hp.n_head * hd, kv_dim = n_head_kv * hd;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"), d, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wq, NAME("attn_q.weight"), d, q_dim, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wk, NAME("attn_k.weight"), d, kv_dim, own_kv, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wv, NAME("attn_v.weight"), d, kv_dim, v_own, e)) < 0 ||
        (rc = model_bind_matrix(m, &L->wo, NAME("attn_output.weight"), q_dim, d, true, e)) < 0 ||
        (rc = model_bind_vector(m, &L->attn_q_norm, NAME("attn_q_norm.weight"), hd, true, e)) < 0 ||
        (rc = model_bind_vector(m, &L->attn_k_norm, NAME("attn_k_norm.weight"), hd, own_kv, e)) <
            0 ||
        (rc = model_bind_vector(m, &L->attn_post_norm, NAME("post_attention_norm.weight"), d, true,
                                e)) < 0)
        return rc;
#undef NAME
    return 0;
}

int model_bind_layer_attn(struct model *m, int il, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    const struct model_arch *a = m->arch;
    struct model_layer *L = &m->layers[il];
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    const int64_t n_embd = hp->n_embd;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
#define NAMED(name, dflt, suffix)                                                                  \
    (snprintf(n, sizeof n, "blk.%d.%s.%s", il, name_or(name, dflt), suffix), n)
    if ((!a->no_pre_norms && (rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"),
                                                     n_embd, true, e)) < 0) ||
        (rc = bind_qkv(m, L, il, e)) < 0)
        return rc;
    snprintf(n, sizeof n, "blk.%d.%s.weight", il, name_or(a->names.attn_output, "attn_output"));
    if ((rc = model_bind_matrix(m, &L->wo, n, q_dim, n_embd, true, e)) < 0)
        return rc;
    if ((rc = model_bind_vector(m, &L->bq, NAME("attn_q.bias"), q_dim, a->qkv_bias, e)) < 0 ||
        (rc = model_bind_vector(m, &L->bk, NAME("attn_k.bias"), kv_dim, a->qkv_bias, e)) < 0 ||
        (rc = model_bind_vector(m, &L->bv, NAME("attn_v.bias"), kv_dim, a->qkv_bias, e)) < 0 ||
        (rc = model_bind_vector(m, &L->bo, NAMED(a->names.attn_output, "attn_output", "bias"),
                                n_embd, false, e)) < 0)
        return rc;
    const int qn = a->qk_norm_full ? q_dim : hp->head_dim,
              kn = a->qk_norm_full ? kv_dim : hp->head_dim;
    if (a->qk_norm &&
        ((rc = model_bind_vector(m, &L->attn_q_norm, NAME("attn_q_norm.weight"), qn, true, e)) <
             0 ||
         (rc = model_bind_vector(m, &L->attn_k_norm, NAME("attn_k_norm.weight"), kn, true, e)) < 0))
        return rc;
    if (a->post_norms) {
        char pn[64];
        snprintf(pn, sizeof pn, "%s.weight",
                 name_or(a->names.attn_post_norm, "post_attention_norm"));
        if ((rc = model_bind_vector(m, &L->attn_post_norm, NAME(pn), n_embd, true, e)) < 0)
            return rc;
        snprintf(pn, sizeof pn, "%s.weight", name_or(a->names.ffn_post_norm, "post_ffw_norm"));
        if ((rc = model_bind_vector(m, &L->ffn_post_norm, NAME(pn), n_embd, true, e)) < 0)
            return rc;
    }
#undef NAME
#undef NAMED
    return 0;
}

int model_bind_layer_ffn(struct model *m, int il, struct err *e)
{
    const struct model_arch *a = m->arch;
    struct model_layer *L = &m->layers[il];
    const int64_t n_embd = m->hp.n_embd;
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
    snprintf(n, sizeof n, "blk.%d.%s.weight", il, name_or(a->names.ffn_norm, "ffn_norm"));
    if (!a->no_pre_norms && (rc = model_bind_vector(m, &L->ffn_norm, n, n_embd, true, e)) < 0)
        return rc;
    if (a->ffn)
        return 0;  // the family's FFN hook binds its own tensors
    return model_bind_layer_dense_ffn(m, il, e);
}

int model_bind_layer_dense_ffn(struct model *m, int il, struct err *e)
{
    struct model_layer *L = &m->layers[il];
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
    if ((rc = bind_gate_up(m, L, il, e)) < 0)
        return rc;
    snprintf(n, sizeof n, "blk.%d.ffn_down.weight", il);
    return model_bind_matrix(m, &L->w_down, n, L->n_ff, m->hp.n_embd, true, e);
}

int model_bind_decoder(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const struct model_arch *a = m->arch;
    const struct gguf_tensor *te = gguf_tensor_find(m->g, "token_embd.weight");
    if (!te)
        return err_set(e, ERR_FORMAT, "missing tensor token_embd.weight");
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return err_set(e, ERR_FORMAT, "token_embd.weight: invalid vocabulary size");
    hp->n_vocab = (int)te->ne[1];
    int rc;
    if ((rc = model_bind_matrix(m, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, true,
                                e)) < 0 ||
        (rc = model_bind_vector(m, &m->output_norm, "output_norm.weight", hp->n_embd,
                                !a->custom_layers, e)) < 0 ||
        (rc = model_bind_matrix(m, &m->output, "output.weight", hp->n_embd, hp->n_vocab, false,
                                e)) < 0 ||
        (rc = model_bind_vector(m, &m->output_bias, "output.bias", hp->n_vocab, false, e)) < 0)
        return rc;
    if (!m->output.data)
        m->output = m->tok_embd;  // tied embeddings
    for (int il = 0; il < hp->n_layer && !a->custom_layers; il++)
        if ((rc = model_bind_layer_attn(m, il, e)) < 0 || (rc = model_bind_layer_ffn(m, il, e)) < 0)
            return rc;

    // RoPE frequency factors: llama3's rope_freqs, shared by all layers, or
    // Phi-3's LongRoPE pair, chosen by the context once it is known (load.c).
    const int n_pairs = hp->rope.n_rot / 2;
    if (a->rope_freqs) {
        rc = model_bind_vector(m, &m->rope_freqs, "rope_freqs.weight", n_pairs, false, e);
        if (rc < 0)
            return rc;
        hp->rope.freq_factors = m->rope_freqs;
        hp->rope_swa.freq_factors = m->rope_freqs;
    }
    if (a->longrope && ((rc = model_bind_vector(m, &m->rope_long, "rope_factors_long.weight",
                                                n_pairs, false, e)) < 0 ||
                        (rc = model_bind_vector(m, &m->rope_short, "rope_factors_short.weight",
                                                n_pairs, false, e)) < 0))
        return rc;
    if ((m->rope_long == NULL) != (m->rope_short == NULL))
        return err_set(e, ERR_FORMAT, "rope_factors_long and rope_factors_short come in pairs");
    return 0;
}

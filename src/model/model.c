// Loading (architecture table, hyper-parameters, tensor binding), memory
// estimate, the KV cache shared by slots, and batch evaluation.
//
// KV cache layout: n_slots × n_ctx cells per layer; position p of slot s
// lives in cell s·n_ctx + p, so a slot's keys are contiguous and a token at
// position p attends cells [s·n_ctx, s·n_ctx + p]. Removing positions moves
// the later cells down and re-rotates their keys (RoPE angles add).
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"
#include "tokenizer/tokenizer.h"

#define MODEL_DEFAULT_CTX   4096
#define MODEL_DEFAULT_BATCH 512

static const struct model_arch *const model_archs[] = {
    &model_arch_llama,
    &model_arch_qwen2,
    &model_arch_bert,
    &model_arch_nomic_bert,
};

static const struct model_arch *arch_find(struct str name)
{
    for (size_t i = 0; i < sizeof model_archs / sizeof model_archs[0]; i++)
        if (str_eq_cstr(name, model_archs[i]->name))
            return model_archs[i];
    return NULL;
}

int model_kv_type_parse(const char *s)
{
    if (!s || !*s || ascii_ieq(s, "f16"))
        return MODEL_KV_F16;
    if (ascii_ieq(s, "f32"))
        return MODEL_KV_F32;
    if (ascii_ieq(s, "q8_0"))
        return MODEL_KV_Q8_0;
    return -1;
}

static uint32_t kv_gguf_type(enum model_kv_type t)
{
    switch (t) {
    case MODEL_KV_F32:
        return GGUF_TYPE_F32;
    case MODEL_KV_Q8_0:
        return GGUF_TYPE_Q8_0;
    default:
        return GGUF_TYPE_F16;
    }
}

// ---------------------------------------------------------------------------
// Hyper-parameters and tensors.

static int need_u32(struct model *m, const char *suffix, int *out, struct err *e)
{
    uint32_t v;
    if (!gguf_get_arch_u32(m->g, suffix, &v)) {
        struct str a = gguf_architecture(m->g);
        return err_set(e, ERR_FORMAT, "missing or invalid key %.*s.%s", (int)a.len, a.ptr, suffix);
    }
    if (v > INT32_MAX)
        return err_set(e, ERR_FORMAT, "key %s out of range", suffix);
    *out = (int)v;
    return 0;
}

int model_read_hparams(struct model *m, enum engine_rope_mode rope_mode, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    int rc;
    if ((rc = need_u32(m, "context_length", &hp->n_ctx_train, e)) < 0 ||
        (rc = need_u32(m, "embedding_length", &hp->n_embd, e)) < 0 ||
        (rc = need_u32(m, "block_count", &hp->n_layer, e)) < 0 ||
        (rc = need_u32(m, "feed_forward_length", &hp->n_ff, e)) < 0 ||
        (rc = need_u32(m, "attention.head_count", &hp->n_head, e)) < 0)
        return rc;
    uint32_t v;
    hp->n_head_kv = gguf_get_arch_u32(m->g, "attention.head_count_kv", &v) ? (int)v : hp->n_head;
    if (hp->n_layer < 1 || hp->n_layer > MODEL_MAX_LAYERS || hp->n_embd < 1 || hp->n_head < 1 ||
        hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0 || hp->n_ff < 1 ||
        hp->n_embd > (1 << 20) || hp->n_ff > (1 << 22) || hp->n_head > 4096)
        return err_set(e, ERR_FORMAT,
                       "invalid hyper-parameters: %d layers, n_embd %d, %d heads, %d kv heads, "
                       "n_ff %d",
                       hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_ff);
    hp->head_dim =
        gguf_get_arch_u32(m->g, "attention.key_length", &v) ? (int)v : hp->n_embd / hp->n_head;
    uint32_t vlen;
    if (gguf_get_arch_u32(m->g, "attention.value_length", &vlen) && (int)vlen != hp->head_dim)
        return err_set(e, ERR_UNSUPPORTED, "value_length %u != key_length %d", vlen, hp->head_dim);
    if (hp->head_dim < 2 || hp->head_dim > 1024 || hp->head_dim % 2 != 0)
        return err_set(e, ERR_FORMAT, "invalid head dimension %d", hp->head_dim);
    if (!gguf_get_arch_f32(m->g, "attention.layer_norm_rms_epsilon", &hp->eps))
        return err_set(e, ERR_FORMAT, "missing key attention.layer_norm_rms_epsilon");

    struct engine_rope *rp = &hp->rope;
    memset(rp, 0, sizeof *rp);
    rp->mode = rope_mode;
    rp->n_rot = gguf_get_arch_u32(m->g, "rope.dimension_count", &v) ? (int)v : hp->head_dim;
    if (rp->n_rot < 2 || rp->n_rot > hp->head_dim || rp->n_rot % 2 != 0)
        return err_set(e, ERR_FORMAT, "invalid rope.dimension_count %d", rp->n_rot);
    if (!gguf_get_arch_f32(m->g, "rope.freq_base", &rp->freq_base))
        rp->freq_base = 10000.0f;
    rp->freq_scale = 1.0f;
    rp->attn_factor = 1.0f;
    rp->beta_fast = 32.0f;
    rp->beta_slow = 1.0f;
    rp->n_ctx_orig = hp->n_ctx_train;
    float factor = 0;
    if (!gguf_get_arch_f32(m->g, "rope.scaling.factor", &factor))
        gguf_get_arch_f32(m->g, "rope.scale_linear", &factor);
    // The type key is "<arch>.rope.scaling.type" (a string).
    char key[128];
    struct str arch = gguf_architecture(m->g);
    snprintf(key, sizeof key, "%.*s.rope.scaling.type", (int)arch.len, arch.ptr);
    struct str stype = STR_LIT("linear");
    gguf_get_str(m->g, key, &stype);
    if (str_eq_cstr(stype, "none")) {
        factor = 0;
    } else if (str_eq_cstr(stype, "yarn")) {
        rp->ext_factor = 1.0f;
        gguf_get_arch_f32(m->g, "rope.scaling.attn_factor", &rp->attn_factor);
        gguf_get_arch_f32(m->g, "rope.scaling.yarn_beta_fast", &rp->beta_fast);
        gguf_get_arch_f32(m->g, "rope.scaling.yarn_beta_slow", &rp->beta_slow);
        if (gguf_get_arch_u32(m->g, "rope.scaling.original_context_length", &v))
            rp->n_ctx_orig = (int)v;
    } else if (!str_eq_cstr(stype, "linear")) {
        return err_set(e, ERR_UNSUPPORTED, "unsupported rope scaling type %.*s", (int)stype.len,
                       stype.ptr);
    }
    if (factor > 0)
        rp->freq_scale = 1.0f / factor;
    if (!(rp->freq_base > 0) || !isfinite(rp->freq_base) || !(rp->freq_scale > 0))
        return err_set(e, ERR_FORMAT, "invalid rope parameters");
    return 0;
}

static int tensor_lookup(struct model *m, const struct gguf_tensor **out, const char *name,
                         bool required, struct err *e)
{
    *out = gguf_tensor_find(m->g, name);
    if (!*out && required)
        return err_set(e, ERR_FORMAT, "missing tensor %s", name);
    return 0;
}

int model_bind_matrix(struct model *m, struct engine_tensor *t, const char *name, int64_t ne0,
                      int64_t ne1, bool required, struct err *e)
{
    const struct gguf_tensor *gt;
    memset(t, 0, sizeof *t);
    int rc = tensor_lookup(m, &gt, name, required, e);
    if (rc < 0 || !gt)
        return rc;
    if (gt->ne[0] != ne0 || gt->ne[1] != ne1 || gt->ne[2] != 1 || gt->ne[3] != 1)
        return err_set(e, ERR_FORMAT, "tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                       name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)ne0,
                       (long long)ne1);
    if (!engine_type_supported(gt->type)) {
        const char *tn = gguf_type_name(gt->type);
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: unsupported tensor type %s", name,
                       tn ? tn : "unknown");
    }
    rc = engine_tensor_from_gguf(t, gt, e);
    if (rc < 0)
        return rc;
    return 0;
}

int model_bind_vector(struct model *m, const float **out, const char *name, int64_t n,
                      bool required, struct err *e)
{
    const struct gguf_tensor *gt;
    *out = NULL;
    int rc = tensor_lookup(m, &gt, name, required, e);
    if (rc < 0 || !gt)
        return rc;
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

int model_bind_llama_tensors(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const struct gguf_tensor *te = gguf_tensor_find(m->g, "token_embd.weight");
    if (!te)
        return err_set(e, ERR_FORMAT, "missing tensor token_embd.weight");
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return err_set(e, ERR_FORMAT, "token_embd.weight: invalid vocabulary size");
    hp->n_vocab = (int)te->ne[1];
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    int rc;
    if ((rc = model_bind_matrix(m, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, true,
                                e)) < 0 ||
        (rc = model_bind_vector(m, &m->output_norm, "output_norm.weight", hp->n_embd, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &m->output, "output.weight", hp->n_embd, hp->n_vocab, false,
                                e)) < 0 ||
        (rc = model_bind_vector(m, &m->output_bias, "output.bias", hp->n_vocab, false, e)) < 0)
        return rc;
    if (!m->output.data)
        m->output = m->tok_embd;  // tied embeddings

    m->layers = xcalloc((size_t)hp->n_layer, sizeof *m->layers);
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        char n[GGUF_MAX_NAME_LEN + 1];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
        if ((rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"), hp->n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->wq, NAME("attn_q.weight"), hp->n_embd, q_dim, true, e)) <
                0 ||
            (rc = model_bind_matrix(m, &L->wk, NAME("attn_k.weight"), hp->n_embd, kv_dim, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->wv, NAME("attn_v.weight"), hp->n_embd, kv_dim, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->wo, NAME("attn_output.weight"), q_dim, hp->n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_vector(m, &L->bq, NAME("attn_q.bias"), q_dim, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->bk, NAME("attn_k.bias"), kv_dim, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->bv, NAME("attn_v.bias"), kv_dim, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->bo, NAME("attn_output.bias"), hp->n_embd, false, e)) <
                0 ||
            (rc = model_bind_vector(m, &L->ffn_norm, NAME("ffn_norm.weight"), hp->n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_gate, NAME("ffn_gate.weight"), hp->n_embd, hp->n_ff,
                                    true, e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_up, NAME("ffn_up.weight"), hp->n_embd, hp->n_ff, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_down, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd,
                                    true, e)) < 0)
            return rc;
#undef NAME
    }
    if (gguf_tensor_find(m->g, "blk.0.attn_qkv.weight"))
        return err_set(e, ERR_UNSUPPORTED, "fused attn_qkv tensors are not supported");
    return 0;
}

// ---------------------------------------------------------------------------
// Sizes.

static void resolve_options(struct model_options *o, const struct model_hparams *hp, bool encoder)
{
    if (o->n_ctx <= 0)
        o->n_ctx = MODEL_DEFAULT_CTX;
    if (o->n_ctx > hp->n_ctx_train)
        o->n_ctx = hp->n_ctx_train;  // as Ollama: never past the training context
    if (o->n_batch <= 0)
        o->n_batch = MODEL_DEFAULT_BATCH;
    if (encoder && o->n_batch < o->n_ctx)
        o->n_batch = o->n_ctx;  // a whole sequence goes through in one pass
    if (o->n_slots <= 0)
        o->n_slots = 1;
    if (o->n_threads <= 0)
        o->n_threads = engine_physical_cores();
}

static uint32_t choose_kv_type(struct model_options *o, const struct model_hparams *hp)
{
    uint32_t t = kv_gguf_type(o->kv_type);
    if (t == GGUF_TYPE_Q8_0 && hp->head_dim % QK8_0 != 0) {
        log_warn("q8_0 KV cache needs a head dimension divisible by 32 (have %d); using f16",
                 hp->head_dim);
        o->kv_type = MODEL_KV_F16;
        t = GGUF_TYPE_F16;
    }
    return t;
}

static int n_out_max_for(const struct model_options *o)
{
    return o->n_slots > 8 ? o->n_slots : 8;
}

struct sizes {
    uint64_t kv, scratch;
};

static struct sizes compute_sizes(const struct model_hparams *hp, const struct model_options *o,
                                  uint32_t kv_type, int n_kv_layers)
{
    struct sizes s;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim,
             kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t cells = (uint64_t)o->n_ctx * (uint64_t)o->n_slots;
    s.kv = 2ull * (uint64_t)n_kv_layers * cells * engine_kv_row_bytes(kv_type, (int64_t)kv_dim);
    uint64_t nb = (uint64_t)o->n_batch;
    uint64_t f = sizeof(float);
    uint64_t acts =
        nb * (2 * (uint64_t)hp->n_embd + 2 * q_dim + 2 * kv_dim + 2 * (uint64_t)hp->n_ff) +
        nb * (uint64_t)hp->n_embd;  // x xb q att k v hb hb2 xo
    uint64_t logits = (uint64_t)n_out_max_for(o) * (uint64_t)hp->n_vocab * 2;  // device + host
    uint64_t max_row = (uint64_t)hp->n_embd;
    if ((uint64_t)hp->n_ff > max_row)
        max_row = (uint64_t)hp->n_ff;
    if (q_dim > max_row)
        max_row = q_dim;
    uint64_t wdata = nb * (max_row * 2 + 512);
    uint64_t att = (uint64_t)o->n_threads * ((uint64_t)o->n_ctx + 2048 + 64 + 16) * f;
    uint64_t ubatch = nb * 4 * 7 + cells * 4;  // ubatch arrays + slot token lists
    s.scratch = acts * f + logits * f + wdata + att + ubatch;
    return s;
}

// ---------------------------------------------------------------------------
// Load / free.

static void model_release(struct model *m)
{
    if (!m)
        return;
    if (m->be) {
        // Encoders share layer 0's KV buffers.
        int n_kv_layers = m->arch->encoder && m->hp.n_layer > 0 ? 1 : m->hp.n_layer;
        for (int il = 0; m->layers && il < n_kv_layers; il++) {
            engine_buf_free(m->be, m->layers[il].kv.k);
            engine_buf_free(m->be, m->layers[il].kv.v);
        }
        float **bufs[] = {&m->s.x,   &m->s.xb, &m->s.q,   &m->s.k,  &m->s.v,
                          &m->s.att, &m->s.hb, &m->s.hb2, &m->s.xo, &m->s.logits};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            engine_buf_free(m->be, *bufs[i]);
        engine_backend_free(m->be);
    }
    if (m->slots)
        for (int i = 0; i < m->opts.n_slots; i++)
            free(m->slots[i].tokens);
    free(m->slots);
    for (size_t i = 0; i < m->n_weight_copies; i++)
        free(m->weight_copies[i]);
    free(m->weight_copies);
    free(m->layers);
    free(m->logits);
    free(m->embd);
    free(m->out_index);
    free(m->ub_buf);
    free(m->type_ids);
    free(m->slot_next);
    free(m->slot_last);
    tokenizer_free(m->tok);
    gguf_close(m->g);
    free(m);
}

void model_free(struct model *m)
{
    model_release(m);
}

// Opens the file and runs the architecture loader (no allocation of cache
// or scratch): the common part of estimate and load.
static int model_open(struct model **out, const char *path, const struct model_options *opts,
                      struct err *e)
{
    struct model *m = xcalloc(1, sizeof *m);
    int rc = gguf_open(&m->g, path, e);
    if (rc < 0) {
        free(m);
        return rc;
    }
    struct str an = gguf_architecture(m->g);
    m->arch = arch_find(an);
    if (!m->arch) {
        rc = err_set(e, ERR_UNSUPPORTED, "unsupported model architecture \"%.*s\"", (int)an.len,
                     an.ptr);
        model_release(m);
        return rc;
    }
    rc = m->arch->load(m, e);
    if (rc < 0) {
        err_prefix(e, "%s", m->arch->name);
        model_release(m);
        return rc;
    }
    m->opts = opts ? *opts : (struct model_options){0};
    resolve_options(&m->opts, &m->hp, m->arch->encoder);
    // An encoder's cache is scratch for one pass: F32, as the reference
    // computes attention of encoders in F32.
    m->kv_type = m->arch->encoder ? GGUF_TYPE_F32 : choose_kv_type(&m->opts, &m->hp);
    if (m->arch->encoder)
        m->opts.embeddings = true;
    *out = m;
    return 0;
}

int model_estimate(const char *path, const struct model_options *opts, struct model_memory *out,
                   struct err *e)
{
    struct model *m;
    int rc = model_open(&m, path, opts, e);
    if (rc < 0)
        return rc;
    struct sizes s =
        compute_sizes(&m->hp, &m->opts, m->kv_type, m->arch->encoder ? 1 : m->hp.n_layer);
    out->weights_bytes = gguf_file_size(m->g);
    out->kv_bytes = s.kv;
    out->scratch_bytes = s.scratch;
    out->total_bytes = out->weights_bytes + out->kv_bytes + out->scratch_bytes;
    model_release(m);
    return 0;
}

static float *alloc_act(struct model *m, size_t n_floats, int *failed)
{
    float *p = engine_buf_alloc(m->be, n_floats * sizeof(float));
    if (!p)
        *failed = 1;
    return p;
}

// Interleaves the Q4_0 matmul weights of decoder models (the kernels then
// multiply 8 rows per vector lane set). The embedding table stays as mapped:
// it is also read by row lookups (a tied output gets its own copy).
static int interleave_weights(struct model *m, struct err *e)
{
    if (m->arch->encoder || m->opts.mapped_weights_only || !m->layers)
        return 0;
    size_t n = (size_t)m->hp.n_layer * 7 + 1, k = 0;
    struct engine_tensor **ts = xcalloc(n, sizeof *ts);
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct engine_tensor *lt[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                      &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lt / sizeof lt[0]; i++)
            ts[k++] = lt[i];
    }
    ts[k++] = &m->output;
    m->weight_copies = xcalloc(k, sizeof *m->weight_copies);
    int rc = 0;
    for (size_t i = 0; i < k && rc >= 0; i++) {
        void *copy = NULL;
        if (!ts[i]->data)
            continue;
        rc = engine_tensor_interleave(ts[i], true, &copy, e);
        if (copy)
            m->weight_copies[m->n_weight_copies++] = copy;
    }
    free(ts);
    return rc < 0 ? rc : 0;
}

int model_load(struct model **out, const char *path, const struct model_options *opts,
               struct err *e)
{
    struct model *m;
    int rc = model_open(&m, path, opts, e);
    if (rc < 0)
        return rc;
    const struct model_hparams *hp = &m->hp;
    const struct model_options *o = &m->opts;
    rc = tokenizer_load(&m->tok, m->g, e);
    if (rc < 0) {
        err_prefix(e, "tokenizer");
        goto fail;
    }
    rc = engine_cpu_new(&m->be, o->n_threads, e);
    if (rc < 0)
        goto fail;
    if ((rc = interleave_weights(m, e)) < 0)
        goto fail;

    // KV cache: n_slots × n_ctx cells per layer.
    int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    size_t row_bytes = engine_kv_row_bytes(m->kv_type, kv_dim);
    m->n_cells = o->n_ctx * o->n_slots;
    if (o->n_ctx < 1 || (int64_t)o->n_ctx * o->n_slots > INT32_MAX / 2) {
        rc = err_set(e, ERR_RANGE, "context %d × %d slots is too large", o->n_ctx, o->n_slots);
        goto fail;
    }
    size_t layer_bytes;
    if (row_bytes == 0 || !size_mul(&layer_bytes, row_bytes, (size_t)m->n_cells)) {
        rc = err_set(e, ERR_TOO_LARGE, "KV cache too large");
        goto fail;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        struct engine_kv_layer *kv = &m->layers[il].kv;
        if (m->arch->encoder && il > 0) {
            *kv = m->layers[0].kv;  // one layer's keys and values at a time
            continue;
        }
        kv->row_bytes = row_bytes;
        kv->k = engine_buf_alloc(m->be, layer_bytes);
        kv->v = engine_buf_alloc(m->be, layer_bytes);
        if (!kv->k || !kv->v) {
            rc = err_set(e, ERR_NOMEM, "allocate KV cache (%zu bytes per layer)", 2 * layer_bytes);
            goto fail;
        }
    }

    // Activations for n_batch rows, allocated once.
    int failed = 0;
    size_t nb = (size_t)o->n_batch;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    m->s.n_out_max = n_out_max_for(o);
    m->s.x = alloc_act(m, nb * hp->n_embd, &failed);
    m->s.xb = alloc_act(m, nb * hp->n_embd, &failed);
    m->s.q = alloc_act(m, nb * q_dim, &failed);
    m->s.k = alloc_act(m, nb * (size_t)kv_dim, &failed);
    m->s.v = alloc_act(m, nb * (size_t)kv_dim, &failed);
    m->s.att = alloc_act(m, nb * q_dim, &failed);
    m->s.hb = alloc_act(m, nb * hp->n_ff, &failed);
    m->s.hb2 = alloc_act(m, nb * hp->n_ff, &failed);
    m->s.xo = alloc_act(m, nb * hp->n_embd, &failed);
    m->s.logits = alloc_act(m, (size_t)m->s.n_out_max * hp->n_vocab, &failed);
    if (failed) {
        rc = err_set(e, ERR_NOMEM, "allocate activation buffers for a batch of %d", o->n_batch);
        goto fail;
    }
    int64_t max_row = hp->n_embd;
    if (hp->n_ff > max_row)
        max_row = hp->n_ff;
    if ((int64_t)q_dim > max_row)
        max_row = (int64_t)q_dim;
    rc = engine_reserve(m->be, o->n_batch, max_row, o->n_ctx, e);
    if (rc < 0)
        goto fail;

    m->ub_buf = xcalloc(nb * 7, sizeof(int32_t));
    m->slots = xcalloc((size_t)o->n_slots, sizeof *m->slots);
    m->slot_next = xcalloc((size_t)o->n_slots, sizeof(int));
    m->slot_last = xcalloc((size_t)o->n_slots, sizeof(int));
    for (int i = 0; i < o->n_slots; i++)
        m->slots[i].tokens = xcalloc((size_t)o->n_ctx, sizeof(int32_t));
    m->out_cap = m->s.n_out_max;
    m->logits = malloc((size_t)m->out_cap * hp->n_vocab * sizeof(float));
    if (o->embeddings)
        m->embd = malloc((size_t)m->out_cap * hp->n_embd * sizeof(float));
    if (!m->logits || (o->embeddings && !m->embd)) {
        rc = err_set(e, ERR_NOMEM, "allocate logits");
        goto fail;
    }
    if (m->arch->prepare && (rc = m->arch->prepare(m, e)) < 0)
        goto fail;
    *out = m;
    return 0;
fail:
    model_release(m);
    return rc;
}

// ---------------------------------------------------------------------------
// Accessors.

int model_n_vocab(const struct model *m)
{
    return m->hp.n_vocab;
}
int model_n_embd(const struct model *m)
{
    return m->hp.n_embd;
}
int model_n_ctx(const struct model *m)
{
    return m->opts.n_ctx;
}
int model_n_slots(const struct model *m)
{
    return m->opts.n_slots;
}
int model_n_batch(const struct model *m)
{
    return m->opts.n_batch;
}
int model_n_threads(const struct model *m)
{
    return engine_cpu_n_threads(m->be);
}
const char *model_arch_name(const struct model *m)
{
    return m->arch->name;
}
const struct gguf *model_gguf(const struct model *m)
{
    return m->g;
}

bool model_is_encoder(const struct model *m)
{
    return m->arch->encoder;
}

enum model_pooling model_pooling(const struct model *m)
{
    uint32_t t;
    if (!gguf_get_arch_u32(m->g, "pooling_type", &t))
        return MODEL_POOLING_MEAN;
    return t <= MODEL_POOLING_RANK ? (enum model_pooling)t : MODEL_POOLING_NONE;
}

const float *model_logits(const struct model *m, int i)
{
    if (m->arch->encoder || i < 0 || i >= m->n_batch_entries || !m->out_index ||
        m->out_index[i] < 0)
        return NULL;
    return m->logits + (size_t)m->out_index[i] * m->hp.n_vocab;
}

const float *model_embeddings(const struct model *m, int i)
{
    if (!m->embd || i < 0 || i >= m->n_batch_entries || m->out_index[i] < 0)
        return NULL;
    return m->embd + (size_t)m->out_index[i] * m->hp.n_embd;
}

// ---------------------------------------------------------------------------
// Decode.

static int grow_outputs(struct model *m, int n_out, struct err *e)
{
    if (n_out <= m->out_cap)
        return 0;
    if (!m->arch->encoder) {  // encoders have no logits
        float *l = realloc(m->logits, (size_t)n_out * m->hp.n_vocab * sizeof(float));
        if (!l)
            return err_set(e, ERR_NOMEM, "allocate logits for %d outputs", n_out);
        m->logits = l;
    }
    if (m->opts.embeddings) {
        float *em = realloc(m->embd, (size_t)n_out * m->hp.n_embd * sizeof(float));
        if (!em)
            return err_set(e, ERR_NOMEM, "allocate embeddings for %d outputs", n_out);
        m->embd = em;
    }
    m->out_cap = n_out;
    return 0;
}

int model_decode(struct model *m, const struct model_batch *b, struct err *e)
{
    const int n = b->n_tokens, n_ctx = m->opts.n_ctx, n_slots = m->opts.n_slots;
    m->n_batch_entries = 0;
    if (n < 1)
        return err_set(e, ERR_INVALID, "empty batch");
    if (!b->tokens || !b->pos || !b->slot)
        return err_set(e, ERR_INVALID, "batch without tokens, positions or slots");

    // Validate: known tokens and slots; per slot, consecutive positions that
    // start at or below the slot's length and stay inside the context.
    // Per-slot bookkeeping, allocated at load: expected next position + 1
    // (0 = slot not in the batch) and the slot's last entry.
    int *next = m->slot_next, *last = m->slot_last;
    memset(next, 0, (size_t)n_slots * sizeof(int));
    memset(last, 0, (size_t)n_slots * sizeof(int));
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int s = b->slot[i], p = b->pos[i], t = b->tokens[i];
        if (s < 0 || s >= n_slots)
            rc = err_set(e, ERR_INVALID, "batch entry %d: slot %d out of range [0, %d)", i, s,
                         n_slots);
        else if (t < 0 || t >= m->hp.n_vocab)
            rc = err_set(e, ERR_INVALID, "batch entry %d: token id %d out of range [0, %d)", i, t,
                         m->hp.n_vocab);
        else if (p < 0 || p >= n_ctx)
            rc = err_set(e, ERR_RANGE, "batch entry %d: position %d outside the context of %d", i,
                         p, n_ctx);
        else if (m->arch->encoder && next[s] == 0 && p != 0)
            rc = err_set(e, ERR_INVALID,
                         "batch entry %d: an encoder takes slot %d's whole sequence from "
                         "position 0",
                         i, s);
        else if (next[s] == 0 && p > m->slots[s].n_past)
            rc = err_set(e, ERR_INVALID,
                         "batch entry %d: position %d leaves a gap after slot %d's %d tokens", i, p,
                         s, m->slots[s].n_past);
        else if (next[s] != 0 && p != next[s] - 1)
            rc = err_set(e, ERR_INVALID, "batch entry %d: slot %d positions not consecutive", i, s);
        else if (m->arch->encoder && next[s] != 0 && b->slot[i - 1] != s)
            rc = err_set(e, ERR_INVALID, "batch entry %d: slot %d's entries are not contiguous", i,
                         s);
        if (rc == 0) {
            next[s] = p + 2;
            last[s] = i;
        }
    }
    if (rc < 0)
        goto out;

    // Output rows, numbered in entry order.
    if (n > m->out_index_cap) {
        free(m->out_index);
        m->out_index = xmalloc((size_t)n * sizeof(int32_t));
        m->out_index_cap = n;
    }
    int n_out = 0;
    for (int i = 0; i < n; i++) {
        bool want = b->logits ? b->logits[i] : last[b->slot[i]] == i;
        m->out_index[i] = want ? n_out++ : -1;
    }
    rc = grow_outputs(m, n_out, e);
    if (rc < 0)
        goto out;
    // Cached tokens from each slot's first position on are replaced.
    for (int s = 0; s < n_slots; s++)
        next[s] = 0;
    for (int i = 0; i < n; i++) {
        struct model_slot *sl = &m->slots[b->slot[i]];
        if (next[b->slot[i]] == 0) {
            sl->n_past = b->pos[i];
            next[b->slot[i]] = 1;
        }
    }

    // Forward passes of up to n_batch rows.
    int nb = m->opts.n_batch;
    int32_t *tokens = m->ub_buf, *pos = tokens + nb, *cells = pos + nb, *cell0 = cells + nb,
            *n_vis = cell0 + nb, *out_rows = n_vis + nb;
    for (int i0 = 0; i0 < n;) {
        int un = n - i0 < nb ? n - i0 : nb;
        // An encoder's sequence is never split: end the ubatch before the
        // sequence that crosses it (each fits, as n_batch >= n_ctx).
        while (m->arch->encoder && i0 + un < n && un > 1 &&
               b->slot[i0 + un] == b->slot[i0 + un - 1])
            un--;
        int u_out = 0, first_out = -1;
        for (int r = 0; r < un; r++) {
            int i = i0 + r, s = b->slot[i];
            tokens[r] = b->tokens[i];
            pos[r] = b->pos[i];
            cell0[r] = s * n_ctx;
            cells[r] = s * n_ctx + b->pos[i];
            n_vis[r] = b->pos[i] + 1;
            if (m->out_index[i] >= 0) {
                if (first_out < 0)
                    first_out = m->out_index[i];
                out_rows[u_out++] = r;
            }
        }
        if (m->arch->encoder) {
            // Non-causal: every row sees its whole sequence (a run of rows).
            for (int r0 = 0, r1; r0 < un; r0 = r1) {
                for (r1 = r0 + 1; r1 < un && cell0[r1] == cell0[r0];)
                    r1++;
                for (int r = r0; r < r1; r++)
                    n_vis[r] = r1 - r0;
            }
        }
        struct model_ubatch ub = {
            .n = un,
            .tokens = tokens,
            .pos = pos,
            .cells = cells,
            .cell0 = cell0,
            .n_visible = n_vis,
            .n_out = u_out,
            .out_rows = out_rows,
            .out_logits = m->arch->encoder
                              ? NULL
                              : m->logits + (size_t)(first_out < 0 ? 0 : first_out) * m->hp.n_vocab,
            .out_embd =
                m->embd ? m->embd + (size_t)(first_out < 0 ? 0 : first_out) * m->hp.n_embd : NULL,
        };
        m->arch->forward(m, &ub);
        for (int r = 0; r < un; r++) {
            int i = i0 + r;
            struct model_slot *sl = &m->slots[b->slot[i]];
            sl->tokens[b->pos[i]] = b->tokens[i];
            sl->n_past = b->pos[i] + 1;
        }
        i0 += un;
    }
    m->n_batch_entries = n;
out:
    return rc;
}

// ---------------------------------------------------------------------------
// Slots.

static bool slot_ok(const struct model *m, int slot)
{
    return slot >= 0 && slot < m->opts.n_slots;
}

int model_slot_n_past(const struct model *m, int slot)
{
    return slot_ok(m, slot) ? m->slots[slot].n_past : 0;
}

const int32_t *model_slot_tokens(const struct model *m, int slot)
{
    return slot_ok(m, slot) ? m->slots[slot].tokens : NULL;
}

void model_slot_clear(struct model *m, int slot)
{
    if (slot_ok(m, slot))
        m->slots[slot].n_past = 0;
}

int model_slot_reuse_prefix(struct model *m, int slot, const int32_t *tokens, int n)
{
    if (!slot_ok(m, slot))
        return 0;
    struct model_slot *sl = &m->slots[slot];
    int k = 0;
    while (k < sl->n_past && k < n && sl->tokens[k] == tokens[k])
        k++;
    if (k >= n)
        k = n - 1;  // the last prompt token is evaluated again for its logits
    if (k < 0)
        k = 0;
    sl->n_past = k;
    return k;
}

int model_slot_remove(struct model *m, int slot, int p0, int p1, struct err *e)
{
    if (!slot_ok(m, slot))
        return err_set(e, ERR_INVALID, "slot %d out of range", slot);
    struct model_slot *sl = &m->slots[slot];
    if (p0 < 0 || p1 < p0 || p1 > sl->n_past)
        return err_set(e, ERR_RANGE, "remove [%d, %d) from a slot of %d tokens", p0, p1,
                       sl->n_past);
    int n_del = p1 - p0, n_move = sl->n_past - p1;
    if (n_del == 0)
        return 0;
    int64_t base = (int64_t)slot * m->opts.n_ctx;
    int64_t kv_dim = (int64_t)m->hp.n_head_kv * m->hp.head_dim;
    (void)kv_dim;
    for (int il = 0; il < m->hp.n_layer && n_move > 0; il++) {
        const struct engine_kv_layer *kv = &m->layers[il].kv;
        engine_kv_move(m->be, kv, base + p0, base + p1, n_move);
        engine_kv_shift(m->be, kv, m->kv_type, base + p0, n_move, -n_del, m->hp.n_head_kv,
                        m->hp.head_dim, &m->hp.rope);
    }
    memmove(sl->tokens + p0, sl->tokens + p1, (size_t)n_move * sizeof(int32_t));
    sl->n_past -= n_del;
    return 0;
}

int model_context_shift(struct model *m, int slot, int n_keep, struct err *e)
{
    if (!slot_ok(m, slot))
        return err_set(e, ERR_INVALID, "slot %d out of range", slot);
    if (n_keep < 0)
        n_keep = 0;
    if (n_keep >= m->opts.n_ctx)
        return err_set(e, ERR_RANGE,
                       "unable to shift context - keep exceeds context (keep: %d context: %d)",
                       n_keep, m->opts.n_ctx);
    struct model_slot *sl = &m->slots[slot];
    if (n_keep > sl->n_past)
        n_keep = sl->n_past;
    int discard = (sl->n_past - n_keep) / 2;
    if (discard <= 0)
        return 0;
    int rc = model_slot_remove(m, slot, n_keep, n_keep + discard, e);
    return rc < 0 ? rc : discard;
}

void model_debug_kv_row(struct model *m, int il, int cell, float *k, float *v)
{
    const struct engine_kv_layer *kv = &m->layers[il].kv;
    int64_t kv_dim = (int64_t)m->hp.n_head_kv * m->hp.head_dim;
    const uint8_t *kr = (const uint8_t *)kv->k + (size_t)cell * kv->row_bytes;
    const uint8_t *vr = (const uint8_t *)kv->v + (size_t)cell * kv->row_bytes;
    const struct quant_traits *qt = quant_traits_get(m->kv_type);
    if (m->kv_type == GGUF_TYPE_F32) {
        memcpy(k, kr, (size_t)kv_dim * sizeof(float));
        memcpy(v, vr, (size_t)kv_dim * sizeof(float));
    } else if (m->kv_type == GGUF_TYPE_F16) {
        for (int64_t i = 0; i < kv_dim; i++) {
            k[i] = quant_f16_to_f32(((const uint16_t *)kr)[i]);
            v[i] = quant_f16_to_f32(((const uint16_t *)vr)[i]);
        }
    } else {
        qt->to_float(kr, k, kv_dim);
        qt->to_float(vr, v, kv_dim);
    }
}

// The encoder architectures bert (all-MiniLM, bge-*, mxbai-embed-large,
// snowflake-arctic-embed, ...) and nomic-bert (nomic-embed-text v1/v1.5);
// docs/spec/architectures.md §8. Post-norm transformer blocks with LayerNorm
// (weights and biases) and non-causal attention: every token attends to every
// token of its own sequence. bert adds learned absolute positions and uses
// biased projections with a GELU MLP; nomic-bert rotates Q and K (NeoX RoPE)
// and uses a fused QKV matrix and a SwiGLU MLP without biases. The output is
// the last layer's hidden state per token; the caller pools it
// (model_pooling).
//
// The encoder has no KV cache in the usual sense: model.c gives it one
// F32 buffer of n_ctx cells per slot that holds the current layer's keys and
// values, and sets n_visible to the length of each row's sequence.
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_nomic(const struct model *m)
{
    return m->arch == &model_arch_nomic_bert;
}

// Hyper-parameters (the common ones, then the encoder's): LayerNorm epsilon instead of RMSNorm's,
// no GQA, head_dim = n_embd / n_head, RoPE only for nomic-bert.
static int read_hparams(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    int rc;
    if ((rc = model_read_base_hparams(m, e)) < 0 ||
        (rc = model_need_u32(m, "feed_forward_length", &hp->n_ff, e)) < 0)
        return rc;
    uint32_t v;
    hp->n_head_kv = gguf_get_arch_u32(m->g, "attention.head_count_kv", &v) ? (int)v : hp->n_head;
    if (hp->n_layer < 1 || hp->n_layer > MODEL_MAX_LAYERS || hp->n_embd < 2 ||
        hp->n_embd > (1 << 20) || hp->n_head < 1 || hp->n_head > 4096 ||
        hp->n_embd % hp->n_head != 0 || hp->n_ff < 1 || hp->n_ff > (1 << 22) || hp->n_ctx_train < 1)
        return err_set(e, ERR_FORMAT,
                       "invalid hyper-parameters: %d layers, n_embd %d, %d heads, n_ff %d, "
                       "context %d",
                       hp->n_layer, hp->n_embd, hp->n_head, hp->n_ff, hp->n_ctx_train);
    if (hp->n_head_kv != hp->n_head)
        return err_set(e, ERR_UNSUPPORTED, "%d kv heads for %d heads (encoders have no GQA)",
                       hp->n_head_kv, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (gguf_get_arch_u32(m->g, "attention.key_length", &v) && (int)v != hp->head_dim)
        return err_set(e, ERR_UNSUPPORTED, "key_length %u != n_embd / n_head", v);
    if (hp->head_dim > 1024 || (is_nomic(m) && hp->head_dim % 2 != 0))
        return err_set(e, ERR_FORMAT, "invalid head dimension %d", hp->head_dim);
    if (!gguf_get_arch_f32(m->g, "attention.layer_norm_epsilon", &hp->eps) || !(hp->eps >= 0))
        return err_set(e, ERR_FORMAT, "missing or invalid key %s.attention.layer_norm_epsilon",
                       m->arch->name);
    bool causal = false;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.causal", m->arch->name);
    if (gguf_get_bool(m->g, key, &causal) && causal)
        return err_set(e, ERR_UNSUPPORTED, "causal %s models are not supported", m->arch->name);
    uint32_t n_moe = 0;
    if (gguf_get_arch_u32(m->g, "moe_every_n_layers", &n_moe) && n_moe > 0)
        return err_set(e, ERR_UNSUPPORTED, "nomic-bert mixture-of-experts is not supported");

    // nomic-bert: NeoX RoPE over the whole head, base from the file.
    struct engine_rope *rp = &hp->rope;
    memset(rp, 0, sizeof *rp);
    rp->mode = ENGINE_ROPE_NEOX;
    rp->n_rot = hp->head_dim;
    if (!gguf_get_arch_f32(m->g, "rope.freq_base", &rp->freq_base))
        rp->freq_base = 10000.0f;
    if (!(rp->freq_base > 0) || !isfinite(rp->freq_base))
        return err_set(e, ERR_FORMAT, "invalid rope.freq_base");
    rp->freq_scale = 1.0f;
    rp->attn_factor = 1.0f;
    rp->beta_fast = 32.0f;
    rp->beta_slow = 1.0f;
    rp->n_ctx_orig = hp->n_ctx_train;
    return 0;
}

static int bind_tensors(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    const bool nomic = is_nomic(m);
    const int n_embd = hp->n_embd, n_ff = hp->n_ff;
    const struct gguf_tensor *te = gguf_tensor_find(m->g, "token_embd.weight");
    if (!te)
        return err_set(e, ERR_FORMAT, "missing tensor token_embd.weight");
    if (te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return err_set(e, ERR_FORMAT, "token_embd.weight: invalid vocabulary size");
    hp->n_vocab = (int)te->ne[1];
    const struct gguf_tensor *tt = gguf_tensor_find(m->g, "token_types.weight");
    int64_t n_types = tt ? tt->ne[1] : 1;
    int rc;
    if ((rc = model_bind_matrix(m, &m->tok_embd, "token_embd.weight", n_embd, hp->n_vocab, true,
                                e)) < 0 ||
        (rc = model_bind_matrix(m, &m->type_embd, "token_types.weight", n_embd, n_types, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &m->pos_embd, "position_embd.weight", n_embd, hp->n_ctx_train,
                                !nomic, e)) < 0 ||
        (rc = model_bind_vector(m, &m->embd_norm, "token_embd_norm.weight", n_embd, true, e)) < 0 ||
        (rc = model_bind_vector(m, &m->embd_norm_b, "token_embd_norm.bias", n_embd, true, e)) < 0)
        return rc;

    m->layers = xcalloc((size_t)hp->n_layer, sizeof *m->layers);
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        char n[GGUF_MAX_NAME_LEN + 1];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
        if (nomic) {
            struct engine_tensor qkv;
            if ((rc = model_bind_matrix(m, &qkv, NAME("attn_qkv.weight"), n_embd, 3 * n_embd, true,
                                        e)) < 0)
                return rc;
            model_row_view(&L->wq, &qkv, 0, n_embd);
            model_row_view(&L->wk, &qkv, n_embd, n_embd);
            model_row_view(&L->wv, &qkv, 2 * n_embd, n_embd);
            if ((rc = model_bind_matrix(m, &L->w_gate, NAME("ffn_gate.weight"), n_embd, n_ff, true,
                                        e)) < 0)
                return rc;
        } else {
            if ((rc = model_bind_matrix(m, &L->wq, NAME("attn_q.weight"), n_embd, n_embd, true,
                                        e)) < 0 ||
                (rc = model_bind_matrix(m, &L->wk, NAME("attn_k.weight"), n_embd, n_embd, true,
                                        e)) < 0 ||
                (rc = model_bind_matrix(m, &L->wv, NAME("attn_v.weight"), n_embd, n_embd, true,
                                        e)) < 0)
                return rc;
        }
        // Biases are optional everywhere (nomic-bert has none, bert all).
        if ((rc = model_bind_vector(m, &L->bq, NAME("attn_q.bias"), n_embd, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->bk, NAME("attn_k.bias"), n_embd, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->bv, NAME("attn_v.bias"), n_embd, false, e)) < 0 ||
            (rc = model_bind_matrix(m, &L->wo, NAME("attn_output.weight"), n_embd, n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_vector(m, &L->bo, NAME("attn_output.bias"), n_embd, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->attn_norm, NAME("attn_output_norm.weight"), n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_vector(m, &L->attn_norm_b, NAME("attn_output_norm.bias"), n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_up, NAME("ffn_up.weight"), n_embd, n_ff, true, e)) <
                0 ||
            (rc = model_bind_vector(m, &L->b_up, NAME("ffn_up.bias"), n_ff, false, e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_down, NAME("ffn_down.weight"), n_ff, n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_vector(m, &L->b_down, NAME("ffn_down.bias"), n_embd, false, e)) < 0 ||
            (rc = model_bind_vector(m, &L->ffn_norm, NAME("layer_output_norm.weight"), n_embd, true,
                                    e)) < 0 ||
            (rc = model_bind_vector(m, &L->ffn_norm_b, NAME("layer_output_norm.bias"), n_embd, true,
                                    e)) < 0)
            return rc;
#undef NAME
    }
    return 0;
}

static int encoder_load(struct model *m, struct err *e)
{
    int rc = read_hparams(m, e);
    return rc < 0 ? rc : bind_tensors(m, e);
}

// After the scratch is allocated: the all-zero token type ids, and for
// bert's ungated GELU a scratch of ones, so gelu(h) = engine_glu(h, 1).
static int encoder_prepare(struct model *m, struct err *e)
{
    size_t nb = (size_t)m->opts.n_batch;
    m->type_ids = xcalloc(nb, sizeof(int32_t));
    if (!is_nomic(m)) {
        size_t n = nb * (size_t)m->hp.n_ff;
        float *ones = malloc(n * sizeof(float));
        if (!ones)
            return err_set(e, ERR_NOMEM, "allocate %zu floats", n);
        for (size_t i = 0; i < n; i++)
            ones[i] = 1.0f;
        engine_buf_write(m->be, m->s.hb2, ones, n * sizeof(float));
        free(ones);
    }
    return 0;
}

// x = LayerNorm(token + token type 0 (+ position))      (n, n_embd)
static void encoder_embed(struct model *m, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd;
    engine_get_rows(be, s->x, &m->tok_embd, ub->tokens, n);
    if (m->tok_embd.lora)
        engine_lora_embed(be, s->x, &m->tok_embd, ub->tokens, n);
    engine_get_rows(be, s->xb, &m->type_embd, m->type_ids, n);
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
    if (m->pos_embd.data) {
        engine_get_rows(be, s->xb, &m->pos_embd, ub->pos, n);
        engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
    }
    engine_layernorm(be, s->x, s->x, m->embd_norm, m->embd_norm_b, n, n_embd, hp->eps);
}

// Attention over the whole sequence: Q/K/V straight from x (post-norm block), RoPE for
// nomic-bert, then every row attends the ub->n_visible cells of its slot.
// att: (n, n_embd)
static void encoder_attend(struct model *m, struct model_layer *L, const struct model_ubatch *ub,
                           int n, bool nomic)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int hd = hp->head_dim;
    const struct engine_attn attn = {
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head,
        .head_dim = hd,
        .scale = 1.0f / sqrtf((float)hd),
        .kv_type = m->kv_type,
    };
    const struct engine_matmul_job qkv[3] = {
        {&L->wq, s->q, L->bq},  // q: (n, n_embd)
        {&L->wk, s->k, L->bk},  // k: (n, n_embd)
        {&L->wv, s->v, L->bv},  // v: (n, n_embd)
    };
    engine_matmul_n(be, qkv, 3, s->x, n);
    if (nomic) {
        engine_rope(be, s->q, n, hp->n_head, hd, ub->pos, &hp->rope);
        engine_rope(be, s->k, n, hp->n_head, hd, ub->pos, &hp->rope);
    }
    engine_kv_store(be, &L->kv, m->kv_type, ub->cells, s->k, s->v, n, hp->n_embd);
    engine_attention(be, s->att, s->q, n, &L->kv, ub->cell0, ub->n_visible, &attn);
}

// MLP: bert W_down gelu(W_up x + b_up) + b_down; nomic-bert W_down (silu(W_gate x) * W_up x).
// Then x = LayerNorm(x + mlp).
static void encoder_mlp(struct model *m, struct model_layer *L, int n, bool nomic)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd, n_ff = hp->n_ff;
    if (nomic) {
        const struct engine_matmul_job gate_up[2] = {
            {&L->w_gate, s->hb, NULL},  // (n, n_ff)
            {&L->w_up, s->hb2, NULL},   // (n, n_ff)
        };
        engine_matmul_n(be, gate_up, 2, s->x, n);
        engine_glu(be, s->hb, s->hb, s->hb2, (int64_t)n * n_ff, false);
    } else {
        engine_matmul(be, s->hb, &L->w_up, L->b_up, s->x, n);           // (n, n_ff)
        engine_glu(be, s->hb, s->hb, s->hb2, (int64_t)n * n_ff, true);  // hb2: ones
    }
    engine_matmul(be, s->xb, &L->w_down, L->b_down, s->hb, n);  // (n, n_embd)
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
    engine_layernorm(be, s->x, s->x, L->ffn_norm, L->ffn_norm_b, n, n_embd, hp->eps);
}

// One forward pass over ub->n rows: whole sequences of one or more slots.
// Shapes in comments are (rows, columns) of the activation buffers.
static void encoder_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const bool nomic = is_nomic(m);
    const int n_embd = hp->n_embd;
    int n = ub->n;
    if (ub->n_out == 0)
        return;  // nothing is kept from an encoder pass but its outputs

    encoder_embed(m, ub, n);
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        encoder_attend(m, L, ub, n, nomic);  // att: (n, n_embd)
        if (il == hp->n_layer - 1) {
            // Only the rows whose outputs are wanted go on from here.
            engine_gather(be, s->att, s->att, ub->out_rows, ub->n_out, n_embd);
            engine_gather(be, s->x, s->x, ub->out_rows, ub->n_out, n_embd);
            n = ub->n_out;
        }

        // x = LayerNorm(x + W_o att + b_o)
        engine_matmul(be, s->xb, &L->wo, L->bo, s->att, n);  // (n, n_embd)
        engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
        engine_layernorm(be, s->x, s->x, L->attn_norm, L->attn_norm_b, n, n_embd, hp->eps);
        encoder_mlp(m, L, n, nomic);
    }

    // The last layer's output is the embedding of each token (no final norm).
    engine_buf_read(be, ub->out_embd, s->x, (size_t)n * n_embd * sizeof(float));
}

const struct model_arch model_arch_bert = {
    .name = "bert",
    .load = encoder_load,
    .forward = encoder_forward,
    .encoder = true,
    .prepare = encoder_prepare,
};

const struct model_arch model_arch_nomic_bert = {
    .name = "nomic-bert",
    .load = encoder_load,
    .forward = encoder_forward,
    .encoder = true,
    .prepare = encoder_prepare,
};

// The llama architecture (Llama 2/3/3.x, Mistral, TinyLlama, SmolLM, ...;
// spec/architectures.md §2): pre-norm decoder blocks with RMSNorm, GQA
// attention with RoPE on adjacent pairs (rope_freqs factors for Llama 3.1+),
// a SwiGLU MLP, and an output matrix that may be tied to the embeddings.
// qwen2 (qwen2.c) runs this same forward pass with NeoX RoPE and QKV biases.
#include "model/internal.h"

#include <math.h>

// One forward pass over ub->n tokens of possibly different slots. Shapes in
// comments are (rows, columns) of the activation buffers.
void model_forward_llama(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd, n_ff = hp->n_ff, hd = hp->head_dim;
    const int q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;
    const struct engine_attn attn = {
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .head_dim = hd,
        .scale = 1.0f / sqrtf((float)hd),
        .kv_type = m->kv_type,
    };
    int n = ub->n;

    engine_get_rows(be, s->x, &m->tok_embd, ub->tokens, n);  // x: (n, n_embd)

    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];

        // Attention: norm, Q/K/V projections, RoPE, cache, attend.
        engine_rmsnorm(be, s->xb, s->x, L->attn_norm, n, n_embd, hp->eps);  // (n, n_embd)
        const struct engine_matmul_job qkv[3] = {
            {&L->wq, s->q, L->bq},  // q: (n, n_head·hd)
            {&L->wk, s->k, L->bk},  // k: (n, n_head_kv·hd)
            {&L->wv, s->v, L->bv},  // v: (n, n_head_kv·hd)
        };
        engine_matmul_n(be, qkv, 3, s->xb, n);
        engine_rope(be, s->q, n, hp->n_head, hd, ub->pos, &hp->rope);
        engine_rope(be, s->k, n, hp->n_head_kv, hd, ub->pos, &hp->rope);
        engine_kv_store(be, &L->kv, m->kv_type, ub->cells, s->k, s->v, n, kv_dim);
        if (il == hp->n_layer - 1 && ub->n_out == 0)
            return;  // the cache is filled; nobody wants outputs
        engine_attention(be, s->att, s->q, n, &L->kv, ub->cell0, ub->n_visible, &attn);
        // att: (n, q_dim)

        if (il == hp->n_layer - 1) {
            // Only the rows whose outputs are wanted go on from here.
            engine_gather(be, s->att, s->att, ub->out_rows, ub->n_out, q_dim);
            engine_gather(be, s->x, s->x, ub->out_rows, ub->n_out, n_embd);
            n = ub->n_out;
        }

        engine_matmul(be, s->xb, &L->wo, L->bo, s->att, n);      // (n, n_embd)
        engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);  // residual

        // MLP: x += W_down(silu(W_gate h) * (W_up h)), h = RMSNorm(x).
        engine_rmsnorm(be, s->xb, s->x, L->ffn_norm, n, n_embd, hp->eps);
        const struct engine_matmul_job gate_up[2] = {
            {&L->w_gate, s->hb, NULL},  // (n, n_ff)
            {&L->w_up, s->hb2, NULL},   // (n, n_ff)
        };
        engine_matmul_n(be, gate_up, 2, s->xb, n);
        engine_glu(be, s->hb, s->hb, s->hb2, (int64_t)n * n_ff, false);
        engine_matmul(be, s->xb, &L->w_down, NULL, s->hb, n);  // (n, n_embd)
        engine_add(be, s->x, s->x, s->xb, (int64_t)n * n_embd);
    }

    // Output: final norm, then the vocabulary projection in pieces of
    // n_out_max rows (the logits scratch is sized for that many).
    engine_rmsnorm(be, s->xo, s->x, m->output_norm, n, n_embd, hp->eps);  // (n_out, n_embd)
    if (ub->out_embd)
        engine_buf_read(be, ub->out_embd, s->xo, (size_t)n * n_embd * sizeof(float));
    for (int r0 = 0; r0 < n; r0 += s->n_out_max) {
        int nr = n - r0 < s->n_out_max ? n - r0 : s->n_out_max;
        engine_matmul(be, s->logits, &m->output, m->output_bias, s->xo + (size_t)r0 * n_embd,
                      nr);  // (nr, n_vocab)
        engine_buf_read(be, ub->out_logits + (size_t)r0 * hp->n_vocab, s->logits,
                        (size_t)nr * hp->n_vocab * sizeof(float));
    }
}

static int llama_load(struct model *m, struct err *e)
{
    int rc = model_read_hparams(m, ENGINE_ROPE_NORMAL, e);
    if (rc < 0)
        return rc;
    uint32_t n_expert = 0;
    if (gguf_get_arch_u32(m->g, "expert_count", &n_expert) && n_expert > 0)
        return err_set(e, ERR_UNSUPPORTED, "llama: mixture-of-experts models are not supported");
    if (m->hp.rope.n_rot != m->hp.head_dim)
        return err_set(e, ERR_UNSUPPORTED, "llama: rope.dimension_count %d != head_dim %d",
                       m->hp.rope.n_rot, m->hp.head_dim);
    rc = model_bind_llama_tensors(m, e);
    if (rc < 0)
        return rc;
    // Llama 3.1+ RoPE frequency factors, shared by all layers.
    rc = model_bind_vector(m, &m->rope_freqs, "rope_freqs.weight", m->hp.rope.n_rot / 2, false, e);
    if (rc < 0)
        return rc;
    m->hp.rope.freq_factors = m->rope_freqs;
    return 0;
}

const struct model_arch model_arch_llama = {
    .name = "llama",
    .load = llama_load,
    .forward = model_forward_llama,
};

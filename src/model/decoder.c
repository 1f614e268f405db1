// The generic decoder block every decoder family runs, composed from its
// table row (struct model_arch) and the per-layer data the loader bound:
//
//   x = token_embd[t] (· sqrt(n_embd) or the file's embedding scale)
//   per layer:
//     h = RMSNorm(x; attn_norm)               LayerNorm: cohere2; none: olmo2 (h = x)
//     q, k, v = W h (+ b)                     separate or fused Q/K/V
//     q, k = RMSNorm per head (q/k norms)     qwen3, gemma3; over all heads: olmo2
//     q, k = RoPE(layer's base/scale/factors) normal or NeoX, partial dims; none in
//                                             NoPE layers (smollm3, cohere2)
//     q = q · temperature(pos)                mistral3
//     a = attention(q, k, v)                  window, soft-cap, sinks per layer
//     o = W_o a (+ b_o) ; o = RMSNorm(o)      post-norm: gemma, olmo2
//     x = x + o (· residual scale)            granite
//     h = RMSNorm(x; ffn_norm)                as the attention's
//     f = W_down(act(W_gate h) * W_up h)      SiLU or GELU; fused gate|up; or
//                                             the family's FFN hook (MoE)
//     f = RMSNorm(f)                          post-norm: gemma, olmo2
//     x = x + f (· residual scale)
//   logits = W_out RMSNorm(x) (+ b) (soft-capped) (· logit scale)
#include "model/internal.h"

#include <math.h>

// The dense gated FFN: out (n, n_embd) = W_down(act(W_gate in) * W_up in).
void model_dense_ffn(struct model *m, struct model_layer *L, float *out, const float *in, int n)
{
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const struct engine_matmul_job gate_up[2] = {
        {&L->w_gate, s->hb, NULL},  // (n, n_ff)
        {&L->w_up, s->hb2, NULL},   // (n, n_ff)
    };
    engine_matmul_n(be, gate_up, 2, in, n);
    engine_glu(be, s->hb, s->hb, s->hb2, (int64_t)n * L->n_ff, m->arch->act == MODEL_ACT_GELU);
    engine_matmul(be, out, &L->w_down, NULL, s->hb, n);  // (n, n_embd)
}

// The pre-norms and the final norm: RMSNorm, or LayerNorm without bias
// when the row says (cohere2).
static void pre_norm(struct model *m, float *y, const float *x, const float *w, int n)
{
    if (m->arch->layer_norm)
        engine_layernorm(m->be, y, x, w, NULL, n, m->hp.n_embd, m->hp.eps);
    else
        engine_rmsnorm(m->be, y, x, w, n, m->hp.n_embd, m->hp.eps);
}

// Attention temperature: each query row times its position's factor, one
// scale per run of rows that share it (a slot's rows are consecutive).
static void scale_q_by_position(struct model *m, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
    for (int r0 = 0, r1; r0 < n; r0 = r1) {
        float t = floorf(((float)ub->pos[r0] + hp->attn_temp_offset) / (float)hp->attn_temp_floor);
        for (r1 = r0 + 1; r1 < n; r1++)
            if (floorf(((float)ub->pos[r1] + hp->attn_temp_offset) / (float)hp->attn_temp_floor) !=
                t)
                break;
        if (t > 0) {
            float *q = m->s.q + (size_t)r0 * q_dim;
            engine_scale(m->be, q, q, 1.0f + hp->attn_temp_scale * logf(t + 1.0f),
                         (int64_t)(r1 - r0) * q_dim);
        }
    }
}

// Attention inputs for n tokens: norm, Q/K/V projections, q/k norms, RoPE, then K and V
// into the layer's cache (ring cells for a sliding-window ring).
void model_attn_qkv(struct model *m, struct model_layer *L, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int hd = hp->head_dim;
    const int q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;

    const float *in = s->x;  // no pre-norm (olmo2): the residual itself
    if (L->attn_norm) {
        pre_norm(m, s->xb, s->x, L->attn_norm, n);  // (n, n_embd)
        in = s->xb;
    }
    const struct engine_matmul_job qkv[3] = {
        {&L->wq, s->q, L->bq},  // q: (n, n_head·hd)
        {&L->wk, s->k, L->bk},  // k: (n, n_head_kv·hd)
        {&L->wv, s->v, L->bv},  // v: (n, n_head_kv·hd)
    };
    engine_matmul_n(be, qkv, 3, in, n);
    if (L->attn_q_norm && m->arch->qk_norm_full) {  // over all heads: rows of q_dim / kv_dim
        engine_rmsnorm(be, s->q, s->q, L->attn_q_norm, n, q_dim, hp->eps);
        engine_rmsnorm(be, s->k, s->k, L->attn_k_norm, n, kv_dim, hp->eps);
    } else if (L->attn_q_norm) {  // per head: rows of head_dim
        engine_rmsnorm(be, s->q, s->q, L->attn_q_norm, (int64_t)n * hp->n_head, hd, hp->eps);
        engine_rmsnorm(be, s->k, s->k, L->attn_k_norm, (int64_t)n * hp->n_head_kv, hd, hp->eps);
    }
    if (L->rope) {
        const int32_t *pos = ub->rope_pos ? ub->rope_pos : ub->pos;
        engine_rope(be, s->q, n, hp->n_head, hd, pos, L->rope);
        engine_rope(be, s->k, n, hp->n_head_kv, hd, pos, L->rope);
    }
    if (L->qk_rms) {  // llama4: per head, no weight
        engine_rmsnorm(be, s->q, s->q, NULL, (int64_t)n * hp->n_head, hd, hp->eps);
        engine_rmsnorm(be, s->k, s->k, NULL, (int64_t)n * hp->n_head_kv, hd, hp->eps);
    }
    if (hp->attn_temp_scale != 0.0f && !(m->arch->attn_temp_nope && L->rope))
        scale_q_by_position(m, ub, n);
    if (m->arch->q_prescale)
        engine_scale(be, s->q, s->q, hp->q_scale, (int64_t)n * q_dim);
    engine_kv_store(be, &L->kv, m->kv_type, L->kv_ring > 0 ? ub->ring_cells : ub->cells, s->k, s->v,
                    n, kv_dim);
}

// Attention over the cache for n query rows: att (n, q_dim).
void model_attn_attend(struct model *m, struct model_layer *L, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    const bool ring = L->kv_ring > 0;
    const struct engine_attn attn = {
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim,
        .scale = m->arch->q_prescale ? 1.0f : hp->q_scale,
        .kv_type = m->kv_type,
        .softcap = hp->attn_softcap,
        .window = L->swa ? hp->n_swa : 0,
        .chunk = L->chunk,
        .kv_ring = L->kv_ring,
        .sinks = L->sinks,
        .win_pos = ub->open_runs ? ub->pos : NULL,
    };
    engine_attention(m->be, m->s.att, m->s.q, n, &L->kv, ring ? ub->ring_cell0 : ub->cell0,
                     ub->n_visible, &attn);
}

// x += RMSNorm?(W_o att + b_o): the attention output and its residual.
void model_attn_out(struct model *m, struct model_layer *L, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    engine_matmul(be, s->xb, &L->wo, L->bo, s->att, n);  // (n, n_embd)
    if (L->attn_post_norm)
        engine_rmsnorm(be, s->xb, s->xb, L->attn_post_norm, n, hp->n_embd, hp->eps);
    if (hp->residual_scale != 0.0f)
        engine_scale(be, s->xb, s->xb, hp->residual_scale, (int64_t)n * hp->n_embd);
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * hp->n_embd);  // residual
}

// x += RMSNorm?(FFN(RMSNorm(x))), by the family's FFN hook or the dense gated FFN; the
// FFN's result goes through xb.
void model_ffn_block(struct model *m, struct model_layer *L, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const float *in = s->x;  // no pre-norm (olmo2): the residual itself
    if (L->ffn_norm) {
        pre_norm(m, s->xb, s->x, L->ffn_norm, n);
        in = s->xb;
    }
    if (m->arch->ffn)
        m->arch->ffn(m, L, s->xb, in, n);
    else
        model_dense_ffn(m, L, s->xb, in, n);
    if (L->ffn_post_norm)
        engine_rmsnorm(be, s->xb, s->xb, L->ffn_post_norm, n, hp->n_embd, hp->eps);
    if (hp->residual_scale != 0.0f)
        engine_scale(be, s->xb, s->xb, hp->residual_scale, (int64_t)n * hp->n_embd);
    engine_add(be, s->x, s->x, s->xb, (int64_t)n * hp->n_embd);
}

// Output: final norm, then the vocabulary projection in pieces of n_out_max rows (the
// logits scratch is sized for that many).
void model_output_logits(struct model *m, const struct model_ubatch *ub, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd;
    pre_norm(m, s->xo, s->x, m->output_norm, n);  // (n_out, n_embd)
    if (ub->out_embd)
        engine_buf_read(be, ub->out_embd, s->xo, (size_t)n * n_embd * sizeof(float));
    for (int r0 = 0; r0 < n; r0 += s->n_out_max) {
        int nr = n - r0 < s->n_out_max ? n - r0 : s->n_out_max;
        engine_matmul(be, s->logits, &m->output, m->output_bias, s->xo + (size_t)r0 * n_embd,
                      nr);  // (nr, n_vocab)
        if (hp->final_softcap > 0)
            engine_softcap(be, s->logits, s->logits, hp->final_softcap, (int64_t)nr * hp->n_vocab);
        if (hp->logit_scale != 0.0f)
            engine_scale(be, s->logits, s->logits, hp->logit_scale, (int64_t)nr * hp->n_vocab);
        engine_buf_read(be, ub->out_logits + (size_t)r0 * hp->n_vocab, s->logits,
                        (size_t)nr * hp->n_vocab * sizeof(float));
    }
}

void model_embed_input(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    engine_get_rows(m->be, m->s.x, &m->tok_embd, ub->tokens, ub->n);  // x: (n, n_embd)
    if (m->tok_embd.lora)  // before the scale, as llama.cpp's build_inp_embd
        engine_lora_embed(m->be, m->s.x, &m->tok_embd, ub->tokens, ub->n);
    if (hp->embd_scale != 0.0f)
        engine_scale(m->be, m->s.x, m->s.x, hp->embd_scale, (int64_t)ub->n * hp->n_embd);
    // Image rows (their token is 0 here) take the projector's output as it
    // is: the scale applies to token embeddings only, as llama.cpp does.
    // Rows are model_n_embd_inp wide (deepstack slices after the first n_embd).
    const size_t width = (size_t)model_n_embd_inp(m);
    for (int r = 0; ub->embd && r < ub->n; r++)
        if (ub->from_embd[r])
            engine_buf_write(m->be, m->s.x + (size_t)r * hp->n_embd, ub->embd + (size_t)r * width,
                             sizeof(float) * hp->n_embd);
}

// One forward pass over ub->n tokens of possibly different slots. Shapes in
// comments are (rows, columns) of the activation buffers.
void model_forward_decoder(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    const int n_embd = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    int n = ub->n;

    model_embed_input(m, ub);  // x: (n, n_embd)

    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        model_attn_qkv(m, L, ub, n);
        if (il == hp->n_layer - 1 && ub->n_out == 0)
            return;                      // the cache is filled; nobody wants outputs
        model_attn_attend(m, L, ub, n);  // att: (n, q_dim)
        if (il == hp->n_layer - 1) {
            // Only the rows whose outputs are wanted go on from here.
            engine_gather(be, s->att, s->att, ub->out_rows, ub->n_out, q_dim);
            engine_gather(be, s->x, s->x, ub->out_rows, ub->n_out, n_embd);
            n = ub->n_out;
        }
        model_attn_out(m, L, n);
        model_ffn_block(m, L, n);
        if (il < hp->n_deepstack && ub->embd)
            model_add_deepstack(m, ub, il);  // Qwen3-VL (qwen3vl.c)
    }
    model_output_logits(m, ub, n);
}

int model_keep_output_rows(struct model *m, const struct model_ubatch *ub, float **bufs,
                           const int *widths)
{
    for (int i = 0; bufs[i]; i++)
        engine_gather(m->be, bufs[i], bufs[i], ub->out_rows, ub->n_out, widths[i]);
    return ub->n_out;
}

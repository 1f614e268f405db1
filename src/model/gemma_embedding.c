// The gemma-embedding architecture (EmbeddingGemma; docs/spec/architectures.md
// §12.13, llama.cpp src/models/gemma-embedding.cpp): the Gemma 3 block
// (embeddings · sqrt(n_embd), per-head q/k RMSNorm, NeoX RoPE with the
// local base on sliding layers, q scaled by 1/sqrt(head_dim) before the
// product, post-attention and post-FFN norms, GELU-tanh gate) run as an
// encoder: attention is bidirectional over the whole sequence, and on the
// sliding layers (5 of 6) symmetric: a token at p sees p - w/2 … p + w/2.
// The output is the final RMSNorm per token; the runner pools it (mean) and
// model_pool_project applies the sentence-transformers projections dense_2
// and dense_3 when the file has them.
//
// Ollama publishes EmbeddingGemma as general.architecture gemma3 with the
// projections named dense.0 / dense.1 (llama/compat/llama-ollama-compat.cpp):
// gemma3's load hook switches such a file to model_arch_gemma_embd_gemma3,
// this row under the gemma3 name.
#include "model/internal.h"

#include "engine/quant/quant.h"

#include <stdlib.h>
#include <string.h>

// The dense projections under llama.cpp's names, else Ollama's.
static void dense_tensors(const struct model *m, const struct gguf_tensor **d2,
                          const struct gguf_tensor **d3)
{
    *d2 = gguf_tensor_find(m->g, "dense_2.weight");
    *d3 = gguf_tensor_find(m->g, "dense_3.weight");
    if (!*d2 && !*d3) {
        *d2 = gguf_tensor_find(m->g, "dense.0.weight");
        *d3 = gguf_tensor_find(m->g, "dense.1.weight");
    }
}

int model_gemb_check(struct model *m, struct err *e)
{
    if (m->hp.n_swa < 0 || m->hp.n_swa > (1 << 24))
        return err_set(e, ERR_FORMAT, "invalid sliding_window %d", m->hp.n_swa);
    const struct gguf_tensor *d2, *d3;
    dense_tensors(m, &d2, &d3);
    if (!d2 && !d3)
        return 0;
    const int64_t D = m->hp.n_embd;
    if (!d2 || !d3 || d2->n_dims != 2 || d3->n_dims != 2 || d2->ne[0] != D || d3->ne[1] != D ||
        d2->ne[1] != d3->ne[0] || d2->ne[1] < 1 || d2->ne[1] > (1 << 20) ||
        !quant_traits_get(d2->type) || !quant_traits_get(d3->type) ||
        d2->ne[0] % quant_traits_get(d2->type)->block_size != 0 ||
        d3->ne[0] % quant_traits_get(d3->type)->block_size != 0)
        return err_set(e, ERR_FORMAT, "invalid dense_2 / dense_3 projection tensors");
    return 0;
}

// The common Gemma 3 reader and binder with the row below, then the dense
// projections' shapes.
static int gemb_load(struct model *m, struct err *e)
{
    int rc;
    if ((rc = model_read_hparams(m, e)) < 0 || (rc = model_bind_decoder(m, e)) < 0)
        return rc;
    return model_gemb_check(m, e);
}

// Symmetric sliding-window attention of n rows: row r (position p of a
// sequence of length len) sees [max(0, p - h), min(len, p + h + 1)),
// h = n_swa / 2. The engine's window counts back from n_visible, so rows
// are run in groups that share the window that gives that start.
static void attend_symmetric(struct model *m, struct model_layer *L, const struct model_ubatch *ub,
                             int n)
{
    const struct model_hparams *hp = &m->hp;
    const int h = hp->n_swa / 2, q_dim = hp->n_head * hp->head_dim;
    int32_t *nv = xmalloc((size_t)n * sizeof *nv), *win = xmalloc((size_t)n * sizeof *win);
    for (int r = 0; r < n; r++) {
        int64_t p = ub->pos[r], len = ub->n_visible[r];
        int64_t hi = p + h + 1 < len ? p + h + 1 : len, lo = p - h > 0 ? p - h : 0;
        nv[r] = (int32_t)hi;
        win[r] = hi == p + h + 1 ? 2 * h + 1 : (int32_t)(hi - lo);
    }
    struct engine_attn attn = {
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim,
        .scale = 1.0f,  // q was scaled
        .kv_type = m->kv_type,
    };
    for (int r0 = 0, r1; r0 < n; r0 = r1) {
        for (r1 = r0 + 1; r1 < n && win[r1] == win[r0];)
            r1++;
        attn.window = win[r0];
        engine_attention(m->be, m->s.att + (size_t)r0 * q_dim, m->s.q + (size_t)r0 * q_dim, r1 - r0,
                         &L->kv, ub->cell0 + r0, nv + r0, &attn);
    }
    free(nv);
    free(win);
}

static void gemb_forward(struct model *m, const struct model_ubatch *ub)
{
    const struct model_hparams *hp = &m->hp;
    struct engine_backend *be = m->be;
    struct model_scratch *s = &m->s;
    int n = ub->n;
    if (ub->n_out == 0)
        return;                // nothing is kept from an encoder pass but its outputs
    model_embed_input(m, ub);  // x: (n, n_embd)
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        model_attn_qkv(m, L, ub, n);
        if (L->swa && hp->n_swa > 0)
            attend_symmetric(m, L, ub, n);
        else
            model_attn_attend(m, L, ub, n);  // the whole sequence (n_visible = its length)
        if (il == hp->n_layer - 1) {
            // Only the rows whose outputs are wanted go on from here.
            engine_gather(be, s->att, s->att, ub->out_rows, ub->n_out,
                          (int64_t)hp->n_head * hp->head_dim);
            engine_gather(be, s->x, s->x, ub->out_rows, ub->n_out, hp->n_embd);
            n = ub->n_out;
        }
        model_attn_out(m, L, n);
        model_ffn_block(m, L, n);
    }
    engine_rmsnorm(be, s->xb, s->x, m->output_norm, n, hp->n_embd, hp->eps);
    engine_buf_read(be, ub->out_embd, s->xb, (size_t)n * hp->n_embd * sizeof(float));
}

// y (rows) = W x for a 2-D tensor of any type with a to_float (host, small).
static void host_matvec(const struct gguf_tensor *t, const float *x, float *y)
{
    const struct quant_traits *qt = quant_traits_get(t->type);
    const size_t rb = (size_t)(t->n_bytes / (uint64_t)t->ne[1]);
    float *row = xmalloc((size_t)t->ne[0] * sizeof(float));
    for (int64_t o = 0; o < t->ne[1]; o++) {
        qt->to_float((const uint8_t *)t->data + (size_t)o * rb, row, t->ne[0]);
        double acc = 0;
        for (int64_t i = 0; i < t->ne[0]; i++)
            acc += (double)row[i] * x[i];
        y[o] = (float)acc;
    }
    free(row);
}

static void gemb_pool_project(const struct model *m, float *v)
{
    const struct gguf_tensor *d2, *d3;
    dense_tensors(m, &d2, &d3);
    if (!d2 || !d3)
        return;
    float *mid = xmalloc((size_t)d2->ne[1] * sizeof(float));
    host_matvec(d2, v, mid);
    host_matvec(d3, mid, v);
    free(mid);
}

const struct model_arch model_arch_gemma_embd = {
    .name = "gemma-embedding",
    .rope_mode = ENGINE_ROPE_NEOX,
    .default_eps = 1e-6f,
    .embd_scale = true,
    .q_prescale = true,
    .swa_pattern = 6,
    .swa_freq_base = 10000.0f,
    .swa_unscaled = true,
    .qk_norm = true,
    .post_norms = true,
    .act = MODEL_ACT_GELU,
    .load = gemb_load,
    .forward = gemb_forward,
    .encoder = true,
    .pool_project = gemb_pool_project,
};

// Ollama's EmbeddingGemma files (general.architecture gemma3).
const struct model_arch model_arch_gemma_embd_gemma3 = {
    .name = "gemma3",
    .rope_mode = ENGINE_ROPE_NEOX,
    .default_eps = 1e-6f,
    .embd_scale = true,
    .q_prescale = true,
    .swa_pattern = 6,
    .swa_freq_base = 10000.0f,
    .swa_unscaled = true,
    .qk_norm = true,
    .post_norms = true,
    .act = MODEL_ACT_GELU,
    .load = gemb_load,  // not called: gemma3's hook chose this row after reading
    .forward = gemb_forward,
    .encoder = true,
    .pool_project = gemb_pool_project,
};

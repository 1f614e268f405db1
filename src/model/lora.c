// LoRA adapters (Modelfile ADAPTER): each adapter GGUF is checked against
// the model (gguf_lora_check: llama.cpp's rules), its A and B matrices are
// copied as F32 (B times the scale alpha / rank), and every weight it names
// gets the term as a struct engine_lora, which the engine's matmul adds on
// the fly: y = W x + s B (A x). The base weights stay mapped and untouched,
// so an adapter costs its own size, whatever the base's type.
// docs/internals/lora.md says why this and not merging into the weights.
#include "model/internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"

#define LORA_USER_SCALE 1.0f  // Ollama's ADAPTER has no scale

struct model_lora {
    struct engine_lora **terms;  // [n_terms], owned with their a / b data
    size_t n_terms, cap;
    void **merged;  // lora_merge: the weights' private copies, [n_merged]
    size_t n_merged;
    float *t, *u;  // backend scratch shared by every term (one product at a time)
    int64_t max_rank, max_out;
};

// The weights a term may attach to: the matrices the decoder multiplies
// with engine_matmul, whole or row views of a fused one (not experts).
static size_t matmul_weights(struct model *m, struct engine_tensor **out, size_t cap)
{
    size_t k = 0;
    if (k < cap)
        out[k++] = &m->output;
    for (int il = 0; m->layers && il < m->hp.n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct engine_tensor *lt[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                      &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lt / sizeof lt[0] && k < cap; i++)
            out[k++] = lt[i];
        for (int i = 0; i < L->n_mats && k < cap; i++)
            out[k++] = L->mats[i];
    }
    return k;
}

static size_t matmul_weights_cap(const struct model *m)
{
    return 1 + (size_t)m->hp.n_layer * (7 + MODEL_LAYER_MATS);
}

// Rows [r0, r0 + n_rows) of an adapter tensor as an F32 matrix (times
// scale), in a new allocation.
static int f32_copy(struct engine_tensor *out, const struct gguf_tensor *gt, int64_t r0,
                    int64_t n_rows, float scale, struct err *e)
{
    const struct quant_traits *qt = quant_traits_get(gt->type);
    const char *tn = gguf_type_name(gt->type);
    if (!qt || !qt->to_float || quant_row_size(gt->type, gt->ne[0]) == 0)
        return err_set(e, ERR_UNSUPPORTED,
                       "LoRA tensor %.*s has type %s, which this version "
                       "cannot read",
                       (int)gt->name.len, gt->name.ptr, tn ? tn : "unknown");
    int64_t n = gt->ne[0] * n_rows;
    size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
    float *data = aligned_alloc(64, bytes);
    if (!data)
        return err_set(e, ERR_NOMEM, "LoRA tensor %.*s", (int)gt->name.len, gt->name.ptr);
    qt->to_float((const uint8_t *)gt->data + (size_t)r0 * quant_row_size(gt->type, gt->ne[0]), data,
                 n);
    if (scale != 1.0f)
        for (int64_t i = 0; i < n; i++)
            data[i] *= scale;
    *out = (struct engine_tensor){.type = GGUF_TYPE_F32,
                                  .ne = {gt->ne[0], n_rows},
                                  .row_bytes = (size_t)gt->ne[0] * sizeof(float),
                                  .data = data};
    return 0;
}

// A new term, kept in ml (terms do not move: weights point at them).
static struct engine_lora *term_new(struct model_lora *ml)
{
    if (ml->n_terms == ml->cap) {
        ml->cap = ml->cap ? 2 * ml->cap : 16;
        ml->terms = xrealloc(ml->terms, ml->cap * sizeof *ml->terms);
    }
    return ml->terms[ml->n_terms++] = xcalloc(1, sizeof(struct engine_lora));
}

// lora_merge: W (n_out rows of n_in) += B A into a private copy, row by
// row (dequantized, updated, rounded back to W's type). Runs before
// model_load interleaves the weights, which then rewrites the copy and
// hands it back (model_lora_release_copy).
static int merge_term(struct model_lora *ml, struct engine_tensor *w, const struct engine_lora *t,
                      struct err *e)
{
    const struct quant_traits *qt = quant_traits_get(w->type);
    if (!qt || !qt->from_float_ref || w->interleave)
        return err_set(e, ERR_UNSUPPORTED, "merging a LoRA adapter into %s weights",
                       gguf_type_name(w->type));
    int64_t n_in = w->ne[0], n_out = w->ne[1], rank = t->a.ne[1];
    uint8_t *copy = aligned_alloc(64, (w->row_bytes * (size_t)n_out + 63) / 64 * 64);
    float *row = malloc((size_t)n_in * sizeof(float));
    if (!copy || !row) {
        free(copy);
        free(row);
        return err_set(e, ERR_NOMEM, "LoRA merge");
    }
    const float *a = t->a.data, *b = t->b.data;
    for (int64_t o = 0; o < n_out; o++) {
        qt->to_float((const uint8_t *)w->data + (size_t)o * w->row_bytes, row, n_in);
        for (int64_t r = 0; r < rank; r++)
            for (int64_t i = 0; i < n_in; i++)
                row[i] += b[o * rank + r] * a[r * n_in + i];
        qt->from_float_ref(row, copy + (size_t)o * w->row_bytes, n_in);
    }
    free(row);
    ml->merged = xrealloc(ml->merged, (ml->n_merged + 1) * sizeof *ml->merged);
    ml->merged[ml->n_merged++] = copy;
    w->data = copy;
    return 0;
}

// The term of a pair on one weight that holds rows [r0, r0 + n_rows) of
// the pair's base tensor: A whole, those rows of B (y_rows = W_rows x +
// s B_rows (A x), the rows of the fused product).
static int attach_term(struct model_lora *ml, struct engine_tensor *target,
                       const struct gguf_lora *gl, const struct gguf_lora_pair *p, int64_t r0,
                       int64_t n_rows, bool merge, struct err *e)
{
    struct engine_lora *t = term_new(ml);
    int rc = f32_copy(&t->a, p->a, 0, p->a->ne[1], 1.0f, e);
    if (rc == 0)
        rc = f32_copy(&t->b, p->b, r0, n_rows, gguf_lora_scale(gl, p, LORA_USER_SCALE), e);
    if (rc < 0)
        return rc;  // freed with the model
    if (merge)
        return merge_term(ml, target, t, e);
    // Stacked adapters chain on the weight; the weight itself is unchanged.
    t->next = target->lora;
    target->lora = t;
    if (p->rank > ml->max_rank)
        ml->max_rank = p->rank;
    if (n_rows > ml->max_out)
        ml->max_out = n_rows;
    return 0;
}

// One pair of the adapter: its term on the weight that views the pair's
// base tensor, or on each weight viewing rows of it (Q, K and V of a fused
// attn_qkv, gate and up of a fused ffn_up), which must cover all its rows.
static int attach_pair(struct model_lora *ml, struct engine_tensor **ws, size_t n_ws,
                       const struct gguf_lora *gl, const struct gguf_lora_pair *p, bool merge,
                       struct err *e)
{
    const struct gguf_tensor *base = p->base;
    for (size_t i = 0; i < n_ws; i++)
        if (ws[i]->data == base->data && ws[i]->ne[0] == base->ne[0] && ws[i]->ne[1] == base->ne[1])
            return attach_term(ml, ws[i], gl, p, 0, base->ne[1], merge, e);
    size_t row_bytes = quant_row_size(base->type, base->ne[0]);
    const uint8_t *b0 = base->data;
    struct engine_tensor *views[8];
    int64_t first[8], covered = 0;
    size_t n_views = 0;
    for (size_t i = 0; i < n_ws && row_bytes; i++) {
        const uint8_t *d = ws[i]->data;
        bool seen = false;
        for (size_t k = 0; k < n_views; k++)
            seen |= views[k] == ws[i];
        if (seen || !d || d < b0 || d >= b0 + base->n_bytes || ws[i]->ne[0] != base->ne[0] ||
            ws[i]->row_bytes != row_bytes || (size_t)(d - b0) % row_bytes != 0 || n_views == 8)
            continue;
        first[n_views] = (int64_t)((size_t)(d - b0) / row_bytes);
        covered += ws[i]->ne[1];
        views[n_views++] = ws[i];
    }
    if (n_views == 0 || covered != base->ne[1])
        return err_set(e, ERR_UNSUPPORTED,
                       "LoRA on %.*s is not supported by this version (only 2-D projection "
                       "weights, fused or not)",
                       (int)base->name.len, base->name.ptr);
    int rc = 0;
    for (size_t k = 0; k < n_views && rc == 0; k++)
        rc = attach_term(ml, views[k], gl, p, first[k], views[k]->ne[1], merge, e);
    return rc;
}

// A pair on the embedding table: a term on m->tok_embd that the input
// lookup adds (engine_lora_embed), never on the tied output projection,
// and always on the fly (lora_merge too: it costs one small product per
// token).
static int attach_embd(struct model *m, const struct gguf_lora *gl, const struct gguf_lora_pair *p,
                       struct err *e)
{
    struct model_lora *ml = m->lora;
    struct engine_lora *t = term_new(ml);
    int rc = f32_copy(&t->a, p->a, 0, p->a->ne[1], 1.0f, e);
    if (rc == 0)
        rc = f32_copy(&t->b, p->b, 0, p->b->ne[1], gguf_lora_scale(gl, p, LORA_USER_SCALE), e);
    if (rc < 0)
        return rc;  // freed with the model
    t->next = m->tok_embd.lora;
    m->tok_embd.lora = t;
    if (p->rank > ml->max_rank)
        ml->max_rank = p->rank;
    if (p->b->ne[1] > ml->max_out)
        ml->max_out = p->b->ne[1];
    return 0;
}

static int attach_file(struct model *m, struct engine_tensor **ws, size_t n_ws, const char *path,
                       struct err *e)
{
    struct gguf *ad;
    int rc = gguf_open(&ad, path, e);
    if (rc < 0)
        return rc;
    struct gguf_lora gl;
    if ((rc = gguf_lora_check(ad, m->g, &gl, e)) == 0) {
        for (size_t i = 0; i < gl.n_pairs && rc == 0; i++)
            rc = str_eq_cstr(gl.pairs[i].base->name, "token_embd.weight")
                     ? attach_embd(m, &gl, &gl.pairs[i], e)
                     : attach_pair(m->lora, ws, n_ws, &gl, &gl.pairs[i], m->opts.lora_merge, e);
        gguf_lora_deinit(&gl);
    }
    gguf_close(ad);
    return rc;
}

int model_lora_attach(struct model *m, int64_t max_rows, struct err *e)
{
    if (m->opts.n_lora <= 0)
        return 0;
    m->lora = xcalloc(1, sizeof *m->lora);
    size_t cap = matmul_weights_cap(m);
    struct engine_tensor **ws = xcalloc(cap, sizeof *ws);
    size_t n_ws = matmul_weights(m, ws, cap);
    int rc = 0;
    for (int i = 0; i < m->opts.n_lora && rc == 0; i++)
        if ((rc = attach_file(m, ws, n_ws, m->opts.lora_paths[i], e)) < 0)
            err_prefix(e, "LoRA adapter %s", m->opts.lora_paths[i]);
    free(ws);
    if (rc < 0)
        return rc;
    struct model_lora *ml = m->lora;
    ml->t = engine_buf_alloc(m->be, (size_t)(max_rows * ml->max_rank + 1) * sizeof(float));
    ml->u = engine_buf_alloc(m->be, (size_t)(max_rows * ml->max_out + 1) * sizeof(float));
    if (!ml->t || !ml->u)
        return err_set(e, ERR_NOMEM, "LoRA scratch for %lld rows", (long long)max_rows);
    for (size_t i = 0; i < ml->n_terms; i++) {
        ml->terms[i]->t = ml->t;
        ml->terms[i]->u = ml->u;
    }
    return 0;
}

bool model_lora_holds(const struct model *m, const void *p)
{
    for (size_t i = 0; m->lora && i < m->lora->n_merged; i++)
        if (m->lora->merged[i] == p)
            return true;
    return false;
}

void model_lora_release_copy(struct model *m, void *p)
{
    struct model_lora *ml = m->lora;
    for (size_t i = 0; ml && i < ml->n_merged; i++)
        if (ml->merged[i] == p) {
            free(p);
            ml->merged[i] = ml->merged[--ml->n_merged];
            return;
        }
}

void model_lora_free(struct model *m)
{
    struct model_lora *ml = m->lora;
    if (!ml)
        return;
    for (size_t i = 0; i < ml->n_terms; i++) {
        free((void *)ml->terms[i]->a.data);
        free((void *)ml->terms[i]->b.data);
        free(ml->terms[i]);
    }
    for (size_t i = 0; i < ml->n_merged; i++)
        free(ml->merged[i]);
    free(ml->merged);
    if (m->be) {
        engine_buf_free(m->be, ml->t);
        engine_buf_free(m->be, ml->u);
    }
    free(ml->terms);
    free(ml);
    m->lora = NULL;
}

// The sizes of one adapter file (checked as at load, so an estimate fails
// the way the load would).
static int estimate_file(const struct model *m, const char *path, uint64_t *weights,
                         int64_t *max_rank, int64_t *max_out, struct err *e)
{
    struct gguf *ad;
    int rc = gguf_open(&ad, path, e);
    if (rc < 0)
        return rc;
    struct gguf_lora gl;
    if ((rc = gguf_lora_check(ad, m->g, &gl, e)) == 0) {
        for (size_t i = 0; i < gl.n_pairs; i++) {
            const struct gguf_lora_pair *p = &gl.pairs[i];
            *weights += (gguf_tensor_n_elements(p->a) + gguf_tensor_n_elements(p->b)) * 4;
            if (p->rank > *max_rank)
                *max_rank = p->rank;
            int64_t out = p->b->ne[1];  // the embedding's term is n_embd wide
            if (out > *max_out)
                *max_out = out;
        }
        gguf_lora_deinit(&gl);
    }
    gguf_close(ad);
    if (rc < 0)
        err_prefix(e, "LoRA adapter %s", path);
    return rc;
}

int model_lora_estimate(const struct model *m, int64_t max_rows, uint64_t *weights,
                        uint64_t *scratch, struct err *e)
{
    *weights = *scratch = 0;
    int64_t max_rank = 0, max_out = 0;
    for (int i = 0; i < m->opts.n_lora; i++) {
        int rc = estimate_file(m, m->opts.lora_paths[i], weights, &max_rank, &max_out, e);
        if (rc < 0)
            return rc;
    }
    *scratch = (uint64_t)max_rows * (uint64_t)(max_rank + max_out) * sizeof(float);
    return 0;
}

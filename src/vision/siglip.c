// The SigLIP vision tower (a ViT: patch embedding, learned positions,
// pre-norm blocks with full attention and a GELU MLP, a final LayerNorm)
// and Gemma 3's projector (average pooling of the patch grid, RMSNorm,
// projection into the text model's width), as llama.cpp's clip graph
// computes them. The tower runs on its own CPU backend (products, norms,
// attention: attend.c), whose buffers are host memory: the few steps that
// are not engine ops (patch gathering, pooling, GELU) read and write them
// directly.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vision/internal.h"

// Each patch as one row of 3·p·p values in (channel, y, x) order, the
// order of the patch embedding's kernel.
static void gather_patches(const struct vision_model *vm, const float *chw, float *rows)
{
    const int p = vm->patch_size, side = vm->image_size / p, sz = vm->image_size;
    for (int py = 0; py < side; py++)
        for (int px = 0; px < side; px++) {
            float *r = rows + ((size_t)py * side + px) * 3 * p * p;
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < p; y++)
                    memcpy(r + ((size_t)c * p + y) * p,
                           chw + ((size_t)c * sz + (size_t)py * p + y) * sz + (size_t)px * p,
                           sizeof(float) * (size_t)p);
        }
}

static int block(struct vision_model *vm, const struct vision_layer *L, int n, struct err *e)
{
    struct engine_backend *be = vm->be;
    const int d = vm->n_embd;
    engine_layernorm(be, vm->xb, vm->x, L->ln1_w, L->ln1_b, n, d, vm->eps);
    struct engine_matmul_job qkv[3] = {
        {&L->wq, vm->q, L->bq}, {&L->wk, vm->k, L->bk}, {&L->wv, vm->v, L->bv}};
    engine_matmul_n(be, qkv, 3, vm->xb, n);
    // As the reference's flash-attention path: Q, K, V rounded to f16,
    // softmax and sums in F32.
    int rc = vision_attend(be, vm->att, vm->q, vm->k, vm->v, n, vm->n_head, d / vm->n_head, NULL, 0,
                           true, e);
    if (rc < 0)
        return rc;
    engine_matmul(be, vm->xb, &L->wo, L->bo, vm->att, n);
    engine_add(be, vm->x, vm->x, vm->xb, (int64_t)n * d);

    engine_layernorm(be, vm->xb, vm->x, L->ln2_w, L->ln2_b, n, d, vm->eps);
    engine_matmul(be, vm->ff, &L->w_up, L->b_up, vm->xb, n);
    for (size_t i = 0; i < (size_t)n * vm->n_ff; i++)
        vm->ff[i] = engine_gelu(vm->ff[i]);
    engine_matmul(be, vm->xb, &L->w_down, L->b_down, vm->ff, n);
    engine_add(be, vm->x, vm->x, vm->xb, (int64_t)n * d);
    return 0;
}

// Gemma 3: the side × side patch grid average-pooled by n_merge into
// (side / n_merge)² tokens, row-major.
static int pool_avg(const struct vision_model *vm, const float *x, float *y)
{
    const int d = vm->n_embd, side = vm->image_size / vm->patch_size, m = vm->n_merge;
    const int out_side = side / m;
    const float inv = 1.0f / (float)(m * m);
    for (int oy = 0; oy < out_side; oy++)
        for (int ox = 0; ox < out_side; ox++) {
            float *o = y + ((size_t)oy * out_side + ox) * d;
            memset(o, 0, sizeof(float) * (size_t)d);
            for (int dy = 0; dy < m; dy++)
                for (int dx = 0; dx < m; dx++) {
                    const float *p = x + ((size_t)(oy * m + dy) * side + ox * m + dx) * d;
                    for (int c = 0; c < d; c++)
                        o[c] += p[c];
                }
            for (int c = 0; c < d; c++)
                o[c] *= inv;
        }
    return out_side * out_side;
}

int vision_siglip_encode(struct vision_model *vm, const float *chw, float *out, struct err *e)
{
    struct engine_backend *be = vm->be;
    const int d = vm->n_embd, side = vm->image_size / vm->patch_size, n = side * side;
    gather_patches(vm, chw, vm->ff);
    engine_matmul(be, vm->x, &vm->patch_w, vm->patch_b, vm->ff, n);  // x: (n, d)
    engine_buf_write(be, vm->xb, vm->pos_embd, sizeof(float) * (size_t)n * d);
    engine_add(be, vm->x, vm->x, vm->xb, (int64_t)n * d);
    for (int il = 0; il < vm->n_layer; il++) {
        int rc = block(vm, &vm->layers[il], n, e);
        if (rc < 0)
            return rc;
    }
    engine_layernorm(be, vm->x, vm->x, vm->post_ln_w, vm->post_ln_b, n, d, vm->eps);

    int n_tok = pool_avg(vm, vm->x, vm->xb);
    engine_rmsnorm(be, vm->xb, vm->xb, vm->soft_emb_norm, n_tok, d, vm->eps);
    engine_matmul(be, vm->y, &vm->proj, NULL, vm->xb, n_tok);
    engine_buf_read(be, out, vm->y, sizeof(float) * (size_t)n_tok * vm->n_out);
    return 0;
}

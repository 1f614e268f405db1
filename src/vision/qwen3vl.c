// Qwen3-VL's vision tower (projector type "qwen3vl_merger"), as llama.cpp
// v0.5.0's clip graph computes it. It runs through Qwen2.5-VL's pipeline
// (qwen25vl.c: the dynamic-size preprocessing, the Conv3D patch embedding
// as the sum of its two temporal slices, patches in 2 × 2 groups, 2-D
// RoPE, attention as ggml's CPU flash attention) with these differences:
//   - the patch embedding has a bias, and learned position embeddings
//     (v.position_embd, a pos_side × pos_side grid) are resized to the
//     patch grid by bilinear interpolation with aligned corners, put in
//     the patches' group order and added;
//   - blocks: LayerNorms with biases, a fused attn_qkv with bias, full
//     attention in every block, a GELU FFN (up, down, biases);
//   - deepstack: after each block marked in clip.vision.is_deepstack_layers
//     (the blocks with v.deepstack.N.* tensors), the block output grouped
//     2 × 2 (4 · n_embd) goes through a LayerNorm, fc1, GELU and fc2;
//   - the final merger: LayerNorm v.post_ln (with bias), 2 × 2 groups,
//     mm.0, GELU, mm.2.
// An output row is [merger | deepstack 0 | deepstack 1 | ...]; the text
// model (model/qwen3vl.c) takes the first slice as the input embedding and
// adds slice k + 1 after its layer k.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vision/internal.h"

// A view of rows [r0, r0 + n) of a matrix (part of the fused QKV).
static void row_view(struct engine_tensor *out, const struct engine_tensor *t, int64_t r0,
                     int64_t n)
{
    *out = *t;
    out->ne[1] = n;
    out->data = (const uint8_t *)t->data + (size_t)r0 * t->row_bytes;
}

static int bind_block(struct vision_model *vm, int il, struct err *e)
{
    struct vision_layer *L = &vm->layers[il];
    const int d = vm->n_embd, f = vm->n_ff;
    char n[96];
    struct engine_tensor qkv;
    const float *bqkv = NULL;
    snprintf(n, sizeof n, "v.blk.%d.attn_qkv.weight", il);
    int rc = vision_qmat(vm, n, d, 3 * d, &qkv, e);
    snprintf(n, sizeof n, "v.blk.%d.attn_qkv.bias", il);
    if (rc == 0 && (rc = vision_qvec(vm, n, 3 * d, &bqkv, e)) == 0) {
        row_view(&L->wq, &qkv, 0, d);
        row_view(&L->wk, &qkv, d, d);
        row_view(&L->wv, &qkv, 2 * d, d);
        L->bq = bqkv;
        L->bk = bqkv + d;
        L->bv = bqkv + 2 * d;
    }
    static const struct {
        const char *part;
        size_t mat, bias;
        int in, out;  // 0: d, 1: f
    } rows[] = {
        {"attn_out", offsetof(struct vision_layer, wo), offsetof(struct vision_layer, bo), 0, 0},
        {"ffn_up", offsetof(struct vision_layer, w_up), offsetof(struct vision_layer, b_up), 0, 1},
        {"ffn_down", offsetof(struct vision_layer, w_down), offsetof(struct vision_layer, b_down),
         1, 0},
    };
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof rows[0]; i++) {
        int in = rows[i].in ? f : d, out = rows[i].out ? f : d;
        snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, rows[i].part);
        rc = vision_qmat(vm, n, in, out, (struct engine_tensor *)((char *)L + rows[i].mat), e);
        snprintf(n, sizeof n, "v.blk.%d.%s.bias", il, rows[i].part);
        if (rc == 0)
            rc = vision_qvec(vm, n, out, (const float **)((char *)L + rows[i].bias), e);
    }
    static const char *const norms[] = {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"};
    const float **dst[] = {&L->ln1_w, &L->ln1_b, &L->ln2_w, &L->ln2_b};
    for (int i = 0; rc == 0 && i < 4; i++) {
        snprintf(n, sizeof n, "v.blk.%d.%s", il, norms[i]);
        rc = vision_qvec(vm, n, d, dst[i], e);
    }
    return rc;
}

// The deepstack merger after block il, when the file has one.
static int bind_deepstack(struct vision_model *vm, int il, struct err *e)
{
    struct vision_layer *L = &vm->layers[il];
    const int d4 = 4 * vm->n_embd;
    char n[96];
    L->ds_index = -1;
    snprintf(n, sizeof n, "v.deepstack.%d.norm.weight", il);
    if (!gguf_tensor_find(vm->g, n))
        return 0;
    int rc = vision_qvec(vm, n, d4, &L->ds_norm_w, e);
    snprintf(n, sizeof n, "v.deepstack.%d.norm.bias", il);
    if (rc == 0)
        rc = vision_qvec(vm, n, d4, &L->ds_norm_b, e);
    snprintf(n, sizeof n, "v.deepstack.%d.fc1.weight", il);
    if (rc == 0)
        rc = vision_qmat(vm, n, d4, d4, &L->ds_fc1, e);
    snprintf(n, sizeof n, "v.deepstack.%d.fc1.bias", il);
    if (rc == 0)
        rc = vision_qvec(vm, n, d4, &L->ds_fc1_b, e);
    snprintf(n, sizeof n, "v.deepstack.%d.fc2.weight", il);
    if (rc == 0)
        rc = vision_qmat(vm, n, d4, vm->n_out, &L->ds_fc2, e);
    snprintf(n, sizeof n, "v.deepstack.%d.fc2.bias", il);
    if (rc == 0)
        rc = vision_qvec(vm, n, vm->n_out, &L->ds_fc2_b, e);
    if (rc == 0)
        L->ds_index = vm->n_deepstack++;
    return rc;
}

// Patch bias, learned positions (a square grid), post LayerNorm, mm.0 and
// mm.2 (whose rows give the projection width).
static int bind_globals(struct vision_model *vm, struct err *e)
{
    const int d = vm->n_embd, d4 = 4 * d;
    int rc = vision_qvec(vm, "v.patch_embd.bias", d, &vm->patch_b, e);
    const struct gguf_tensor *pos = gguf_tensor_find(vm->g, "v.position_embd.weight");
    if (rc == 0 && (!pos || pos->n_dims != 2 || pos->ne[0] != d))
        rc = err_set(e, ERR_FORMAT, "vision tower: v.position_embd.weight: want [%d, n_pos]", d);
    if (rc == 0) {
        vm->pos_side = (int)lround(sqrt((double)pos->ne[1]));
        if (vm->pos_side < 1 || vm->pos_side > 1024 ||
            (int64_t)vm->pos_side * vm->pos_side != pos->ne[1])
            rc = err_set(e, ERR_FORMAT, "vision tower: %lld position embeddings are not a square",
                         (long long)pos->ne[1]);
    }
    if (rc == 0)
        rc = vision_qvec(vm, "v.position_embd.weight", (int64_t)vm->pos_side * vm->pos_side * d,
                         &vm->pos_embd, e);
    if (rc == 0)
        rc = vision_qvec(vm, "v.post_ln.weight", d, &vm->post_ln_w, e);
    if (rc == 0)
        rc = vision_qvec(vm, "v.post_ln.bias", d, &vm->post_ln_b, e);
    if (rc == 0)
        rc = vision_qmat(vm, "mm.0.weight", d4, d4, &vm->mm0, e);
    if (rc == 0)
        rc = vision_qvec(vm, "mm.0.bias", d4, &vm->mm0_b, e);
    const struct gguf_tensor *t = rc == 0 ? gguf_tensor_find(vm->g, "mm.2.weight") : NULL;
    if (rc == 0 && (!t || t->n_dims != 2 || t->ne[0] != d4 || t->ne[1] < 1 || t->ne[1] > 65536))
        rc = err_set(e, ERR_FORMAT, "vision tower: mm.2.weight: want a [%d, n_out] matrix", d4);
    if (rc == 0) {
        vm->n_out = (int)t->ne[1];
        rc = vision_qmat(vm, "mm.2.weight", d4, vm->n_out, &vm->mm2, e);
    }
    if (rc == 0)
        rc = vision_qvec(vm, "mm.2.bias", vm->n_out, &vm->mm2_b, e);
    return rc;
}

int vision_qwen3_open(struct vision_model *vm, struct err *e)
{
    vm->n_wa_pattern = 0;  // full attention in every block
    vm->n_deepstack = 0;
    int rc = bind_globals(vm, e);
    for (int il = 0; rc == 0 && il < vm->n_layer; il++) {
        rc = bind_block(vm, il, e);
        if (rc == 0)
            rc = bind_deepstack(vm, il, e);
    }
    if (rc == 0 && (int64_t)vm->n_out * (1 + vm->n_deepstack) > 65536)
        rc = err_set(e, ERR_FORMAT, "vision tower: output rows too wide");
    return rc;
}

int vision_row_width(const struct vision_model *vm)
{
    return vm->n_out * (1 + vm->n_deepstack);
}

// The learned position embedding at patch (py, px) of a gh × gw grid:
// ggml's bilinear interpolation with aligned corners (source coordinate
// i · (in - 1) / (out - 1), clamped neighbours) of the pos_side² grid.
static void pos_at(const struct vision_model *vm, int gw, int gh, int py, int px, float *out)
{
    const int s = vm->pos_side, d = vm->n_embd;
    float sfx = gw > 1 && s > 1 ? (float)(gw - 1) / (float)(s - 1) : (float)gw / (float)s;
    float sfy = gh > 1 && s > 1 ? (float)(gh - 1) / (float)(s - 1) : (float)gh / (float)s;
    float x = (float)px / sfx, y = (float)py / sfy;
    int x0 = (int)floorf(x), y0 = (int)floorf(y);
    int x1 = x0 + 1, y1 = y0 + 1;
    x0 = x0 < 0 ? 0 : x0 > s - 1 ? s - 1 : x0;
    x1 = x1 < 0 ? 0 : x1 > s - 1 ? s - 1 : x1;
    y0 = y0 < 0 ? 0 : y0 > s - 1 ? s - 1 : y0;
    y1 = y1 < 0 ? 0 : y1 > s - 1 ? s - 1 : y1;
    float dx = x - (float)x0, dy = y - (float)y0;
    dx = dx < 0 ? 0 : dx > 1 ? 1 : dx;
    dy = dy < 0 ? 0 : dy > 1 ? 1 : dy;
    const float *a = vm->pos_embd + ((size_t)y0 * s + x0) * d;
    const float *b = vm->pos_embd + ((size_t)y0 * s + x1) * d;
    const float *c = vm->pos_embd + ((size_t)y1 * s + x0) * d;
    const float *dd = vm->pos_embd + ((size_t)y1 * s + x1) * d;
    for (int i = 0; i < d; i++)
        out[i] = a[i] * (1 - dx) * (1 - dy) + b[i] * dx * (1 - dy) + c[i] * (1 - dx) * dy +
                 dd[i] * dx * dy;
}

// The activations are the CPU backend's host memory (as qwen25vl.c's
// gather writes them).
void vision_qwen3_embed(struct vision_model *vm, struct qwen_run *r)
{
    const int d = vm->n_embd;
    float pos[8192];  // n_embd <= 8192 (read_qwen_hparams)
    for (int i = 0; i < r->n; i++) {
        float *x = r->x + (size_t)i * d;
        pos_at(vm, r->gw, r->gh, r->py[i], r->px[i], pos);
        for (int k = 0; k < d; k++)
            x[k] = (x[k] + vm->patch_b[k]) + pos[k];
    }
}

void vision_qwen3_deepstack(struct vision_model *vm, struct qwen_run *r, int il, float *out)
{
    const struct vision_layer *L = &vm->layers[il];
    if (L->ds_index < 0)
        return;
    struct engine_backend *be = vm->be;
    const int d4 = 4 * vm->n_embd, ng = r->n / 4, no = vm->n_out;
    const size_t width = (size_t)vision_row_width(vm);
    engine_layernorm(be, r->xb, r->x, L->ds_norm_w, L->ds_norm_b, ng, d4, vm->eps);
    engine_matmul(be, r->ff, &L->ds_fc1, L->ds_fc1_b, r->xb, ng);
    for (size_t i = 0; i < (size_t)ng * d4; i++)
        r->ff[i] = engine_gelu(r->ff[i]);
    engine_matmul(be, r->y, &L->ds_fc2, L->ds_fc2_b, r->ff, ng);
    for (int g = 0; g < ng; g++)
        engine_buf_read(be, out + (size_t)r->order[g] * width + (size_t)(1 + L->ds_index) * no,
                        r->y + (size_t)g * no, sizeof(float) * (size_t)no);
}

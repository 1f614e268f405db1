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
#include <stdlib.h>
#include <string.h>

#include "vision/internal.h"

// Tensor names of the two layouts: llama.cpp's mmproj and Ollama's
// monolithic file (the tower inside the text model's file, as its library
// publishes qwen3-vl; llama/compat's handle_qwen3vl_clip maps one onto the
// other): separate Q/K/V, one Conv3D patch kernel, HF-style leaf names,
// deepstack mergers numbered in order with their blocks in
// qwen3vl.vision.deepstack_visual_indexes.
struct q3_names {
    const char *patch_b, *pos, *post_ln, *mm0, *mm2, *ln1, *ln2, *up, *down;
    const char *ds, *ds_fc1, *ds_fc2;  // "<ds>.N.norm", "<ds>.N.<ds_fc1>", ...
    bool ollama;
};

static const struct q3_names names_mmproj = {"v.patch_embd.bias",
                                             "v.position_embd.weight",
                                             "v.post_ln",
                                             "mm.0",
                                             "mm.2",
                                             "ln1",
                                             "ln2",
                                             "ffn_up",
                                             "ffn_down",
                                             "v.deepstack",
                                             "fc1",
                                             "fc2",
                                             false};
static const struct q3_names names_ollama = {"v.patch_embed.bias",
                                             "v.pos_embed.weight",
                                             "v.merger.norm",
                                             "v.merger.linear_fc1",
                                             "v.merger.linear_fc2",
                                             "norm1",
                                             "norm2",
                                             "mlp.linear_fc1",
                                             "mlp.linear_fc2",
                                             "v.deepstack_merger",
                                             "linear_fc1",
                                             "linear_fc2",
                                             true};

// A view of rows [r0, r0 + n) of a matrix (part of the fused QKV).
static void row_view(struct engine_tensor *out, const struct engine_tensor *t, int64_t r0,
                     int64_t n)
{
    *out = *t;
    out->ne[1] = n;
    out->data = (const uint8_t *)t->data + (size_t)r0 * t->row_bytes;
}

// Q, K, V: views of the mmproj's fused attn_qkv, or Ollama's three.
static int bind_qkv(struct vision_model *vm, int il, const struct q3_names *nm, struct err *e)
{
    struct vision_layer *L = &vm->layers[il];
    const int d = vm->n_embd;
    char n[96];
    int rc = 0;
    if (nm->ollama) {
        static const char *const parts[] = {"attn_q", "attn_k", "attn_v"};
        struct engine_tensor *mats[] = {&L->wq, &L->wk, &L->wv};
        const float **bias[] = {&L->bq, &L->bk, &L->bv};
        for (int i = 0; rc == 0 && i < 3; i++) {
            snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, parts[i]);
            rc = vision_qmat(vm, n, d, d, mats[i], e);
            snprintf(n, sizeof n, "v.blk.%d.%s.bias", il, parts[i]);
            if (rc == 0)
                rc = vision_qvec(vm, n, d, bias[i], e);
        }
        return rc;
    }
    struct engine_tensor qkv;
    const float *bqkv = NULL;
    snprintf(n, sizeof n, "v.blk.%d.attn_qkv.weight", il);
    rc = vision_qmat(vm, n, d, 3 * d, &qkv, e);
    snprintf(n, sizeof n, "v.blk.%d.attn_qkv.bias", il);
    if (rc == 0 && (rc = vision_qvec(vm, n, 3 * d, &bqkv, e)) == 0) {
        row_view(&L->wq, &qkv, 0, d);
        row_view(&L->wk, &qkv, d, d);
        row_view(&L->wv, &qkv, 2 * d, d);
        L->bq = bqkv;
        L->bk = bqkv + d;
        L->bv = bqkv + 2 * d;
    }
    return rc;
}

static int bind_block(struct vision_model *vm, int il, const struct q3_names *nm, struct err *e)
{
    struct vision_layer *L = &vm->layers[il];
    const int d = vm->n_embd, f = vm->n_ff;
    const struct {
        const char *part;
        struct engine_tensor *mat;
        const float **bias;
        int in, out;
    } rows[] = {
        {"attn_out", &L->wo, &L->bo, d, d},
        {nm->up, &L->w_up, &L->b_up, d, f},
        {nm->down, &L->w_down, &L->b_down, f, d},
    };
    char n[96];
    int rc = bind_qkv(vm, il, nm, e);
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, rows[i].part);
        rc = vision_qmat(vm, n, rows[i].in, rows[i].out, rows[i].mat, e);
        snprintf(n, sizeof n, "v.blk.%d.%s.bias", il, rows[i].part);
        if (rc == 0)
            rc = vision_qvec(vm, n, rows[i].out, rows[i].bias, e);
    }
    const char *norms[] = {nm->ln1, nm->ln1, nm->ln2, nm->ln2};
    const char *leaf[] = {"weight", "bias", "weight", "bias"};
    const float **dst[] = {&L->ln1_w, &L->ln1_b, &L->ln2_w, &L->ln2_b};
    for (int i = 0; rc == 0 && i < 4; i++) {
        snprintf(n, sizeof n, "v.blk.%d.%s.%s", il, norms[i], leaf[i]);
        rc = vision_qvec(vm, n, d, dst[i], e);
    }
    return rc;
}

// Deepstack merger `num` (mmproj: the block's index; Ollama: its place in
// deepstack_visual_indexes) onto block il.
static int bind_deepstack(struct vision_model *vm, int il, int num, const struct q3_names *nm,
                          struct err *e)
{
    struct vision_layer *L = &vm->layers[il];
    const int d4 = 4 * vm->n_embd;
    const struct {
        const char *leaf;
        const float **vec;
        struct engine_tensor *mat;
        int in, out;
    } parts[] = {
        {"norm.weight", &L->ds_norm_w, NULL, 0, d4},
        {"norm.bias", &L->ds_norm_b, NULL, 0, d4},
        {nm->ds_fc1, &L->ds_fc1_b, &L->ds_fc1, d4, d4},
        {nm->ds_fc2, &L->ds_fc2_b, &L->ds_fc2, d4, vm->n_out},
    };
    char n[128];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof parts / sizeof parts[0]; i++) {
        if (!parts[i].mat) {
            snprintf(n, sizeof n, "%s.%d.%s", nm->ds, num, parts[i].leaf);
            rc = vision_qvec(vm, n, parts[i].out, parts[i].vec, e);
            continue;
        }
        snprintf(n, sizeof n, "%s.%d.%s.weight", nm->ds, num, parts[i].leaf);
        rc = vision_qmat(vm, n, parts[i].in, parts[i].out, parts[i].mat, e);
        snprintf(n, sizeof n, "%s.%d.%s.bias", nm->ds, num, parts[i].leaf);
        if (rc == 0)
            rc = vision_qvec(vm, n, parts[i].out, parts[i].vec, e);
    }
    if (rc == 0)
        L->ds_index = 0;  // numbered in block order once all are bound
    return rc;
}

// The deepstack mergers: the mmproj's v.deepstack.<block>.* where present;
// Ollama's v.deepstack_merger.<k>.* onto block deepstack_visual_indexes[k].
static int bind_deepstacks(struct vision_model *vm, const struct q3_names *nm, struct err *e)
{
    char n[96];
    int rc = 0;
    for (int il = 0; il < vm->n_layer; il++)
        vm->layers[il].ds_index = -1;
    if (nm->ollama) {
        const char *key = "qwen3vl.vision.deepstack_visual_indexes";
        enum gguf_value_type et;
        uint64_t cnt = 0;
        gguf_get_arr(vm->g, key, &et, &cnt);
        for (uint64_t k = 0; rc == 0 && k < cnt; k++) {
            int64_t il;
            if (!gguf_arr_i64(gguf_find(vm->g, key), k, &il) || il < 0 || il >= vm->n_layer ||
                vm->layers[il].ds_index >= 0)
                return err_set(e, ERR_FORMAT, "vision tower: bad %s", key);
            rc = bind_deepstack(vm, (int)il, (int)k, nm, e);
        }
    }
    for (int il = 0; !nm->ollama && rc == 0 && il < vm->n_layer; il++) {
        snprintf(n, sizeof n, "v.deepstack.%d.norm.weight", il);
        if (gguf_tensor_find(vm->g, n))
            rc = bind_deepstack(vm, il, il, nm, e);
    }
    vm->n_deepstack = 0;
    for (int il = 0; rc == 0 && il < vm->n_layer; il++)
        if (vm->layers[il].ds_index >= 0)
            vm->layers[il].ds_index = vm->n_deepstack++;
    return rc;
}

// Ollama's patch kernel: one Conv3D [p, p, 2, n_embd · 3] (ne order; the
// slow axis is out-channel · 3 + in-channel), the two temporal slices
// summed after rounding to f16 as the reference's convolution does.
static int bind_conv3d(struct vision_model *vm, struct err *e)
{
    const int p = vm->patch_size, d = vm->n_embd;
    const int64_t in = 3 * (int64_t)p * p, n = 2 * in * d;
    const float *w = NULL;
    const struct gguf_tensor *t = gguf_tensor_find(vm->g, "v.patch_embed.weight");
    if (!t || t->ne[0] != p || t->ne[1] != p || t->ne[2] != 2 || t->ne[3] != 3 * (int64_t)d)
        return err_set(e, ERR_FORMAT, "vision tower: v.patch_embed.weight: want [%d, %d, 2, %d]", p,
                       p, 3 * d);
    int rc = vision_qvec(vm, "v.patch_embed.weight", n, &w, e);
    float *sum = rc == 0 ? malloc(sizeof(float) * (size_t)(in * d)) : NULL;
    if (rc == 0 && (!sum || vm->n_owned >= (int)(sizeof vm->owned / sizeof vm->owned[0]))) {
        free(sum);
        return err_set(e, ERR_NOMEM, "vision tower: out of memory");
    }
    if (rc < 0)
        return rc;
    vm->owned[vm->n_owned++] = sum;
    const size_t hw = (size_t)p * p;
    for (int64_t oc = 0; oc < d; oc++)
        for (int64_t ic = 0; ic < 3; ic++)
            for (size_t i = 0; i < hw; i++) {
                const float *src = w + hw * (size_t)(2 * (oc * 3 + ic));
                sum[(size_t)oc * in + (size_t)ic * hw + i] =
                    vision_round_f16(src[i]) + vision_round_f16(src[hw + i]);
            }
    vm->patch_w = (struct engine_tensor){.name = "v.patch_embd.weight",
                                         .type = GGUF_TYPE_F32,
                                         .ne = {in, d},
                                         .row_bytes = sizeof(float) * (size_t)in,
                                         .data = sum};
    return 0;
}

// Patch bias, learned positions (a square grid), post LayerNorm, mm.0 and
// mm.2 (whose rows give the projection width).
static int bind_globals(struct vision_model *vm, const struct q3_names *nm, struct err *e)
{
    const int d = vm->n_embd;
    char n[96];
    int rc = nm->ollama ? bind_conv3d(vm, e) : vision_qwen_bind_patch(vm, e);
    if (rc == 0)
        rc = vision_qvec(vm, nm->patch_b, d, &vm->patch_b, e);
    const struct gguf_tensor *pos = gguf_tensor_find(vm->g, nm->pos);
    if (rc == 0 && (!pos || pos->n_dims != 2 || pos->ne[0] != d))
        rc = err_set(e, ERR_FORMAT, "vision tower: %s: want [%d, n_pos]", nm->pos, d);
    if (rc == 0) {
        vm->pos_side = (int)lround(sqrt((double)pos->ne[1]));
        if (vm->pos_side < 1 || vm->pos_side > 1024 ||
            (int64_t)vm->pos_side * vm->pos_side != pos->ne[1])
            rc = err_set(e, ERR_FORMAT, "vision tower: %lld position embeddings are not a square",
                         (long long)pos->ne[1]);
    }
    if (rc == 0)
        rc = vision_qvec(vm, nm->pos, (int64_t)vm->pos_side * vm->pos_side * d, &vm->pos_embd, e);
    snprintf(n, sizeof n, "%s.weight", nm->post_ln);
    if (rc == 0)
        rc = vision_qvec(vm, n, d, &vm->post_ln_w, e);
    snprintf(n, sizeof n, "%s.bias", nm->post_ln);
    if (rc == 0)
        rc = vision_qvec(vm, n, d, &vm->post_ln_b, e);
    return rc == 0 ? vision_qwen_bind_merger(vm, nm->mm0, nm->mm2, e) : rc;
}

// Ollama's files: mean / std from qwen3vl.vision.image_mean / image_std,
// else Qwen3-VL's 0.5 (llama/compat's defaults).
static void read_ollama_norm(struct vision_model *vm)
{
    static const char *const keys[] = {"qwen3vl.vision.image_mean", "qwen3vl.vision.image_std"};
    float *dst[] = {vm->mean, vm->std};
    for (int k = 0; k < 2; k++) {
        enum gguf_value_type et;
        uint64_t n = 0;
        float v[3] = {0.5f, 0.5f, 0.5f};
        if (gguf_get_arr(vm->g, keys[k], &et, &n) && n == 3)
            for (int c = 0; c < 3; c++)
                gguf_arr_f32(gguf_find(vm->g, keys[k]), (uint64_t)c, &v[c]);
        for (int c = 0; c < 3; c++)
            dst[k][c] = v[c] > 0.0f ? v[c] : 0.5f;
    }
}

int vision_qwen3_open(struct vision_model *vm, bool ollama, struct err *e)
{
    const struct q3_names *nm = ollama ? &names_ollama : &names_mmproj;
    vm->n_wa_pattern = 0;  // full attention in every block
    if (ollama)
        read_ollama_norm(vm);
    int rc = bind_globals(vm, nm, e);
    for (int il = 0; rc == 0 && il < vm->n_layer; il++)
        rc = bind_block(vm, il, nm, e);
    if (rc == 0)
        rc = bind_deepstacks(vm, nm, e);
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

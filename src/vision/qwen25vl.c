// Qwen2.5-VL's vision tower and merger, as llama.cpp v0.5.0's clip graph
// (projector type "qwen2.5vl_merger") computes them:
//   - the picture is resized (letterboxed, bicubic) to multiples of
//     patch × merge per side, 8 to 4096 merged tokens (mtmd's "dyn size");
//   - patches are embedded by the sum of the Conv3D's two temporal slices
//     (a still image is both frames) and ordered so each 2 × 2 group is
//     contiguous, the groups window by window;
//   - pre-norm blocks (RMSNorm, Q/K/V with biases, 2-D RoPE: the first half
//     of each head's pairs turn by the patch row, the second by its column,
//     SwiGLU FFN with biases); window blocks attend within their window,
//     every n_wa_pattern-th block to all;
//   - RMSNorm, each group's four rows concatenated, mm.0, GELU, mm.2, and
//     the tokens put back in row-major order of the merged grid.
// Mistral 3's Pixtral tower runs through the same pipeline (vm->pixtral:
// one patch kernel, RMSNorm before the blocks, no biases, 2-D RoPE on
// adjacent pairs, full attention, an unfolding patch merger and
// [IMG_BREAK] rows). Buffers are allocated per encode (the size follows
// the picture).
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/internal.h"

#define QWEN_MERGE         2
#define QWEN_MIN_TOKENS    8
#define QWEN_MAX_TOKENS    4096
#define QWEN_TILED_ROWS    64  // from this many rows ggml's flash attention takes its tiled path
#define PIXTRAL_MAX_TOKENS 1024

// The code an error helper set (e may be NULL).
static int code_of(const struct err *e, int fallback)
{
    return e && e->code < 0 ? e->code : fallback;
}

// Tensor names of the two layouts (mmproj, Ollama's monolithic file).
struct qwen_names {
    const char *patch0, *patch1, *post_ln, *mm0, *mm2;
};

static const struct qwen_names names_mmproj = {"v.patch_embd.weight", "v.patch_embd.weight.1",
                                               "v.post_ln", "mm.0", "mm.2"};
static const struct qwen_names names_ollama = {"v.patch_embd_0.weight", "v.patch_embd_1.weight",
                                               "v.merger.ln_q", "v.merger.mlp.0", "v.merger.mlp.2"};

static const struct gguf_tensor *qneed(const struct vision_model *vm, const char *name, int64_t n,
                                       struct err *e)
{
    const struct gguf_tensor *t = gguf_tensor_find(vm->g, name);
    if (!t) {
        err_set(e, ERR_FORMAT, "vision tower: missing tensor %s", name);
        return NULL;
    }
    if ((int64_t)gguf_tensor_n_elements(t) != n) {
        err_set(e, ERR_FORMAT, "vision tower: tensor %s has %llu elements, want %lld", name,
                (unsigned long long)gguf_tensor_n_elements(t), (long long)n);
        return NULL;
    }
    if (t->type != GGUF_TYPE_F32 && t->type != GGUF_TYPE_F16) {
        err_set(e, ERR_UNSUPPORTED, "vision tower: tensor %s: type %s not supported", name,
                gguf_type_name(t->type));
        return NULL;
    }
    return t;
}

static float *owned_floats(struct vision_model *vm, size_t n)
{
    if (vm->n_owned >= (int)(sizeof vm->owned / sizeof vm->owned[0]))
        return NULL;
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (p)
        vm->owned[vm->n_owned++] = p;
    return p;
}

// An F32 copy of a tensor's n values (F16 converted).
static float *qcopy(struct vision_model *vm, const char *name, int64_t n, struct err *e)
{
    const struct gguf_tensor *t = qneed(vm, name, n, e);
    float *f = t ? owned_floats(vm, (size_t)n) : NULL;
    if (t && !f)
        err_set(e, ERR_NOMEM, "vision tower: out of memory");
    for (int64_t i = 0; f && i < n; i++)
        f[i] = t->type == GGUF_TYPE_F32 ? ((const float *)t->data)[i]
                                        : vision_f16_to_f32(((const uint16_t *)t->data)[i]);
    return f;
}

int vision_qvec(struct vision_model *vm, const char *name, int64_t n, const float **out,
                struct err *e)
{
    *out = qcopy(vm, name, n, e);
    return *out ? 0 : code_of(e, ERR_FORMAT);
}

// A matrix of rows × cols (ne[0] = cols) as an engine view.
int vision_qmat(struct vision_model *vm, const char *name, int64_t cols, int64_t rows,
                struct engine_tensor *out, struct err *e)
{
    const struct gguf_tensor *t = qneed(vm, name, cols * rows, e);
    if (!t)
        return code_of(e, ERR_FORMAT);
    int rc = engine_tensor_from_gguf(out, t, e);
    if (rc == 0 && out->ne[0] != cols)
        rc = err_set(e, ERR_FORMAT, "vision tower: tensor %s has rows of %lld, want %lld", name,
                     (long long)out->ne[0], (long long)cols);
    return rc;
}

// A block's per-layer part names that differ between layouts.
struct block_names {
    const char *attn_out, *ln1, *ln2;
};

static const struct block_names blk_llama = {"attn_out", "ln1", "ln2"};
static const struct block_names blk_mistral3 = {"attn_output", "attn_norm", "ffn_norm"};

static int bind_block(struct vision_model *vm, int il, const struct block_names *bn, struct err *e)
{
    struct vision_layer *L = &vm->layers[il];
    const int d = vm->n_embd, f = vm->n_ff;
    static const struct {
        const char *part;
        size_t mat, bias;
        int in, out;  // 0: d, 1: f
    } rows[] = {
        {"attn_q", offsetof(struct vision_layer, wq), offsetof(struct vision_layer, bq), 0, 0},
        {"attn_k", offsetof(struct vision_layer, wk), offsetof(struct vision_layer, bk), 0, 0},
        {"attn_v", offsetof(struct vision_layer, wv), offsetof(struct vision_layer, bv), 0, 0},
        {NULL, offsetof(struct vision_layer, wo), offsetof(struct vision_layer, bo), 0, 0},
        {"ffn_gate", offsetof(struct vision_layer, w_gate), offsetof(struct vision_layer, b_gate),
         0, 1},
        {"ffn_up", offsetof(struct vision_layer, w_up), offsetof(struct vision_layer, b_up), 0, 1},
        {"ffn_down", offsetof(struct vision_layer, w_down), offsetof(struct vision_layer, b_down),
         1, 0},
    };
    char n[96];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof rows[0]; i++) {
        int in = rows[i].in ? f : d, out = rows[i].out ? f : d;
        const char *part = rows[i].part ? rows[i].part : bn->attn_out;
        snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, part);
        rc = vision_qmat(vm, n, in, out, (struct engine_tensor *)((char *)L + rows[i].mat), e);
        snprintf(n, sizeof n, "v.blk.%d.%s.bias", il, part);
        if (rc == 0 && !vm->pixtral)  // Pixtral has no biases
            rc = vision_qvec(vm, n, out, (const float **)((char *)L + rows[i].bias), e);
    }
    snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, bn->ln1);
    if (rc == 0)
        rc = vision_qvec(vm, n, d, &L->ln1_w, e);
    snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, bn->ln2);
    if (rc == 0)
        rc = vision_qvec(vm, n, d, &L->ln2_w, e);
    return rc;
}

static bool qkey_u32(const struct gguf *g, const char *prefix, const char *suffix, int *out)
{
    char k[96];
    uint32_t v;
    snprintf(k, sizeof k, "%s%s", prefix, suffix);
    if (!gguf_get_u32(g, k, &v) || v > (1u << 20))
        return false;
    *out = (int)v;
    return true;
}

// Window pattern: the mmproj's n_wa_pattern, or from Ollama's list of
// full-attention blocks (the first + 1).
static void read_window_pattern(struct vision_model *vm, const char *prefix)
{
    vm->n_wa_pattern = 0;
    if (qkey_u32(vm->g, prefix, "n_wa_pattern", &vm->n_wa_pattern))
        return;
    char k[96];
    snprintf(k, sizeof k, "%sfullatt_block_indexes", prefix);
    enum gguf_value_type et;
    uint64_t cnt;
    int64_t first;
    if (gguf_get_arr(vm->g, k, &et, &cnt) && cnt > 0 &&
        gguf_arr_i64(gguf_find(vm->g, k), 0, &first) && first >= 0 && first < VISION_MAX_LAYERS)
        vm->n_wa_pattern = (int)first + 1;
}

static int read_qwen_hparams(struct vision_model *vm, const char *prefix, float eps, struct err *e)
{
    const struct gguf *g = vm->g;
    char k[96];
    vm->eps = eps;  // the norms' epsilon when the file has none
    snprintf(k, sizeof k, "%sattention.layer_norm_epsilon", prefix);
    gguf_get_f32(g, k, &vm->eps);
    vm->rope_base = 10000.0f;
    snprintf(k, sizeof k, "%srope.freq_base", prefix);
    gguf_get_f32(g, k, &vm->rope_base);
    vm->window = 112;
    qkey_u32(g, prefix, "window_size", &vm->window);
    vm->n_merge = QWEN_MERGE;
    qkey_u32(g, prefix, "spatial_merge_size", &vm->n_merge);
    if (!qkey_u32(g, prefix, "patch_size", &vm->patch_size) ||
        !qkey_u32(g, prefix, "embedding_length", &vm->n_embd) ||
        !qkey_u32(g, prefix, "attention.head_count", &vm->n_head) ||
        !qkey_u32(g, prefix, "block_count", &vm->n_layer))
        return err_set(e, ERR_FORMAT, "vision tower: missing or bad %s* hyper-parameters", prefix);
    // The FFN width: the key, else (Ollama's files) ffn_up's shape.
    const struct gguf_tensor *up = gguf_tensor_find(g, "v.blk.0.ffn_up.weight");
    if (!up)  // Ollama's Qwen3-VL files
        up = gguf_tensor_find(g, "v.blk.0.mlp.linear_fc1.weight");
    if (!qkey_u32(g, prefix, "feed_forward_length", &vm->n_ff))
        vm->n_ff = up && up->n_dims == 2 ? (int)up->ne[1] : 0;
    read_window_pattern(vm, prefix);
    int hd = vm->n_head ? vm->n_embd / vm->n_head : 0;
    if (vm->n_merge != QWEN_MERGE || vm->patch_size < 1 || vm->patch_size > 64 || vm->n_embd < 1 ||
        vm->n_embd > 8192 || vm->n_head < 1 || vm->n_embd % vm->n_head || hd % 4 || hd > 1024 ||
        vm->n_layer < 1 || vm->n_layer > VISION_MAX_LAYERS || vm->n_ff < 1 || vm->n_ff > 65536 ||
        vm->window < 0 || !(vm->rope_base > 0))
        return err_set(e, ERR_FORMAT, "vision tower: inconsistent hyper-parameters");
    // CLIP's mean / std unless the file says (Ollama's files imply them).
    static const float clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    static const float clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    memcpy(vm->mean, clip_mean, sizeof vm->mean);
    memcpy(vm->std, clip_std, sizeof vm->std);
    enum gguf_value_type et;
    uint64_t n;
    if (gguf_get_arr(g, "clip.vision.image_mean", &et, &n) && n == 3)
        for (int c = 0; c < 3; c++)
            gguf_arr_f32(gguf_find(g, "clip.vision.image_mean"), (uint64_t)c, &vm->mean[c]);
    if (gguf_get_arr(g, "clip.vision.image_std", &et, &n) && n == 3)
        for (int c = 0; c < 3; c++)
            gguf_arr_f32(gguf_find(g, "clip.vision.image_std"), (uint64_t)c, &vm->std[c]);
    for (int c = 0; c < 3; c++)
        if (!(vm->std[c] > 0.0f))
            return err_set(e, ERR_FORMAT, "vision tower: image_std must be positive");
    return 0;
}

// The patch embedding: both temporal slices summed (one matmul). The
// reference's convolution (im2col) rounds pixels and kernels to f16.
static int bind_patch(struct vision_model *vm, const struct qwen_names *nm, struct err *e);

int vision_qwen_bind_patch(struct vision_model *vm, struct err *e)
{
    return bind_patch(vm, &names_mmproj, e);
}

static int bind_patch(struct vision_model *vm, const struct qwen_names *nm, struct err *e)
{
    const int64_t in = (int64_t)3 * vm->patch_size * vm->patch_size, n = in * vm->n_embd;
    float *w0 = qcopy(vm, nm->patch0, n, e);
    const float *w1 = w0 && nm->patch1 ? qcopy(vm, nm->patch1, n, e) : NULL;
    if (!w0 || (nm->patch1 && !w1))
        return code_of(e, ERR_FORMAT);
    for (int64_t i = 0; i < n; i++)
        w0[i] = vision_round_f16(w0[i]) + (w1 ? vision_round_f16(w1[i]) : 0.0f);
    vm->patch_w = (struct engine_tensor){.name = "v.patch_embd.weight",
                                         .type = GGUF_TYPE_F32,
                                         .ne = {in, vm->n_embd},
                                         .row_bytes = sizeof(float) * (size_t)in,
                                         .data = w0};
    return 0;
}

// The merger's two products (Qwen2.5-VL and Qwen3-VL): mm0 [4 n_embd, 4 n_embd]
// and mm2 [4 n_embd, n_out] with their biases (names without ".weight"); mm2's
// rows give the projection width.
int vision_qwen_bind_merger(struct vision_model *vm, const char *mm0, const char *mm2,
                            struct err *e)
{
    const int d4 = 4 * vm->n_embd;
    char n[96];
    snprintf(n, sizeof n, "%s.weight", mm0);
    int rc = vision_qmat(vm, n, d4, d4, &vm->mm0, e);
    snprintf(n, sizeof n, "%s.bias", mm0);
    if (rc == 0)
        rc = vision_qvec(vm, n, d4, &vm->mm0_b, e);
    snprintf(n, sizeof n, "%s.weight", mm2);
    const struct gguf_tensor *t = rc == 0 ? gguf_tensor_find(vm->g, n) : NULL;
    if (rc == 0 && (!t || t->n_dims != 2 || t->ne[0] != d4 || t->ne[1] < 1 || t->ne[1] > 65536))
        rc = err_set(e, ERR_FORMAT, "vision tower: %s: want a [%d, n_out] matrix", n, d4);
    if (rc == 0) {
        vm->n_out = (int)t->ne[1];
        rc = vision_qmat(vm, n, d4, vm->n_out, &vm->mm2, e);
    }
    snprintf(n, sizeof n, "%s.bias", mm2);
    if (rc == 0)
        rc = vision_qvec(vm, n, vm->n_out, &vm->mm2_b, e);
    return rc;
}

int vision_qwen_open(struct vision_model *vm, const char *prefix, bool ollama, struct err *e)
{
    const struct qwen_names *nm = ollama ? &names_ollama : &names_mmproj;
    int rc = read_qwen_hparams(vm, prefix, 1e-6f, e);
    if (vm->qwen3)  // its own names and patch kernel (qwen3vl.c)
        return rc == 0 ? vision_qwen3_open(vm, ollama, e) : rc;
    if (rc == 0)
        rc = bind_patch(vm, nm, e);
    for (int il = 0; rc == 0 && il < vm->n_layer; il++)
        rc = bind_block(vm, il, &blk_llama, e);
    char n[96];
    snprintf(n, sizeof n, "%s.weight", nm->post_ln);
    if (rc == 0)
        rc = vision_qvec(vm, n, vm->n_embd, &vm->post_ln_w, e);
    return rc == 0 ? vision_qwen_bind_merger(vm, nm->mm0, nm->mm2, e) : rc;
}

// Pixtral (Mistral 3): a single patch kernel, RMSNorm before block 0, no
// biases; the merger: RMSNorm × mm.input_norm, 2 × 2 unfold, patch_merger,
// mm.1, GELU, mm.2; the [IMG_BREAK] embedding after every row but the last.
// Two layouts: llama.cpp's mmproj, and Ollama's single file (the tower in
// the text model's file: HF names, `mistral3.vision.*` keys, vision Q / K
// rows in HF order, no [IMG_BREAK] row).
struct pixtral_names {
    const char *prefix, *patch, *pre_ln, *mm_norm, *merger, *mm1, *mm2;
    const char *img_break;  // NULL: zeros, as Ollama's llama.cpp compat layer
    const struct block_names *blk;
    float eps;        // when the file has none (Ollama's: 1e-5, as its compat layer)
    bool permute_qk;  // Q / K rows in HF order: turned into llama.cpp's at load
};

static const struct pixtral_names pixtral_mmproj = {.prefix = "clip.vision.",
                                                    .patch = "v.patch_embd.weight",
                                                    .pre_ln = "v.pre_ln.weight",
                                                    .mm_norm = "mm.input_norm.weight",
                                                    .merger = "mm.patch_merger.weight",
                                                    .mm1 = "mm.1.weight",
                                                    .mm2 = "mm.2.weight",
                                                    .img_break = "v.token_embd.img_break",
                                                    .blk = &blk_llama,
                                                    .eps = 1e-6f};
static const struct pixtral_names pixtral_ollama = {.prefix = "mistral3.vision.",
                                                    .patch = "v.patch_conv.weight",
                                                    .pre_ln = "v.encoder_norm.weight",
                                                    .mm_norm = "mm.norm.weight",
                                                    .merger =
                                                        "mm.patch_merger.merging_layer.weight",
                                                    .mm1 = "mm.linear_1.weight",
                                                    .mm2 = "mm.linear_2.weight",
                                                    .blk = &blk_mistral3,
                                                    .eps = 1e-5f,
                                                    .permute_qk = true};

static int pixtral_merger(struct vision_model *vm, const struct pixtral_names *pn, struct err *e)
{
    const int d = vm->n_embd;
    int rc = vision_qvec(vm, pn->pre_ln, d, &vm->pre_ln_w, e);
    if (rc == 0)
        rc = vision_qvec(vm, pn->mm_norm, d, &vm->mm_in_norm, e);
    if (rc == 0)
        rc = vision_qmat(vm, pn->merger, 4 * d, d, &vm->mm_merge, e);
    const struct gguf_tensor *t1 = gguf_tensor_find(vm->g, pn->mm1);
    const struct gguf_tensor *t2 = gguf_tensor_find(vm->g, pn->mm2);
    if (rc == 0 && (!t1 || !t2 || t1->n_dims != 2 || t2->n_dims != 2 || t1->ne[0] != d ||
                    t2->ne[0] != t1->ne[1] || t1->ne[1] < 1 || t1->ne[1] > 65536 || t2->ne[1] < 1 ||
                    t2->ne[1] > 65536))
        rc = err_set(e, ERR_FORMAT, "vision tower: %s / %s: bad shapes", pn->mm1, pn->mm2);
    if (rc == 0) {
        vm->n_mid = (int)t1->ne[1];
        vm->n_out = (int)t2->ne[1];
        rc = vision_qmat(vm, pn->mm1, d, vm->n_mid, &vm->mm0, e);
    }
    if (rc == 0)
        rc = vision_qmat(vm, pn->mm2, vm->n_mid, vm->n_out, &vm->mm2, e);
    if (rc < 0 || pn->img_break)
        return rc < 0 ? rc : vision_qvec(vm, pn->img_break, vm->n_out, &vm->img_break, e);
    float *zero = owned_floats(vm, (size_t)vm->n_out);
    if (!zero)
        return err_set(e, ERR_NOMEM, "vision tower: out of memory");
    memset(zero, 0, sizeof(float) * (size_t)vm->n_out);
    vm->img_break = zero;
    return 0;
}

// HF's Q / K rows (a head's rotary pairs (i, i + hd/2)) in llama.cpp's order
// (adjacent pairs), which rope_pixtral expects: a copy of the matrix with
// row h·hd + 2i + j taken from row h·hd + j·hd/2 + i.
static int permute_qk(struct vision_model *vm, struct engine_tensor *w, struct err *e)
{
    const int hd = vm->n_embd / vm->n_head, rows = (int)w->ne[1];
    uint8_t *dst = (uint8_t *)owned_floats(vm, (w->row_bytes * (size_t)rows + 3) / 4);
    if (!dst)
        return err_set(e, ERR_NOMEM, "vision tower: out of memory");
    for (int oa = 0; oa < rows; oa++) {
        int h = oa / hd, i = (oa % hd) / 2, j = oa % 2;
        memcpy(dst + (size_t)oa * w->row_bytes,
               (const uint8_t *)w->data + (size_t)(h * hd + j * (hd / 2) + i) * w->row_bytes,
               w->row_bytes);
    }
    w->data = dst;
    return 0;
}

int vision_pixtral_open(struct vision_model *vm, bool ollama, struct err *e)
{
    const struct pixtral_names *pn = ollama ? &pixtral_ollama : &pixtral_mmproj;
    const struct qwen_names nm = {pn->patch, NULL, NULL, NULL, NULL};
    vm->pixtral = true;
    int rc = read_qwen_hparams(vm, pn->prefix, pn->eps, e);
    vm->n_wa_pattern = 0;
    if (rc == 0)
        rc = bind_patch(vm, &nm, e);
    for (int il = 0; rc == 0 && il < vm->n_layer; il++) {
        rc = bind_block(vm, il, pn->blk, e);
        if (rc == 0 && pn->permute_qk)
            rc = permute_qk(vm, &vm->layers[il].wq, e);
        if (rc == 0 && pn->permute_qk)
            rc = permute_qk(vm, &vm->layers[il].wk, e);
    }
    return rc == 0 ? pixtral_merger(vm, pn, e) : rc;
}

// ---------------------------------------------------------------------------
// Preprocessing.

static int round_by(float x, int f)
{
    return (int)roundf(x / (float)f) * f;
}

void vision_qwen_size(const struct vision_model *vm, int width, int height, int *w_out, int *h_out)
{
    const int a = vm->patch_size * vm->n_merge;
    const int max_tok = vm->pixtral ? PIXTRAL_MAX_TOKENS : QWEN_MAX_TOKENS;
    const int min_tok = !vm->pixtral && vm->min_tokens > 0 ? vm->min_tokens : QWEN_MIN_TOKENS;
    const int min_px = min_tok * a * a, max_px = max_tok * a * a;
    int w = round_by((float)width, a), h = round_by((float)height, a);
    w = w < a ? a : w;
    h = h < a ? a : h;
    if ((int64_t)w * h > max_px) {
        float beta = sqrtf((float)height * (float)width / (float)max_px);
        w = (int)floorf((float)width / beta / (float)a) * a;
        h = (int)floorf((float)height / beta / (float)a) * a;
        w = w < a ? a : w;
        h = h < a ? a : h;
    } else if ((int64_t)w * h < min_px) {
        float beta = sqrtf((float)min_px / ((float)height * (float)width));
        w = (int)ceilf((float)width * beta / (float)a) * a;
        h = (int)ceilf((float)height * beta / (float)a) * a;
    }
    *w_out = w;
    *h_out = h;
}

// ---------------------------------------------------------------------------
// The tower.

// Group slots window by window (row-major inside each window), as mtmd's
// window index; without window attention, row-major.
static int plan_windows(const struct vision_model *vm, struct qwen_run *r)
{
    int gwin = vm->n_wa_pattern > 0 ? vm->window / vm->patch_size / vm->n_merge : 0;
    if (gwin < 1)
        gwin = r->mw > r->mh ? r->mw : r->mh;
    int nwx = (r->mw + gwin - 1) / gwin, nwy = (r->mh + gwin - 1) / gwin;
    r->win = malloc(sizeof(int) * (size_t)(nwx * nwy + 1));
    r->seg = malloc(sizeof(int) * (size_t)(nwx * nwy + 1));
    if (!r->win || !r->seg)
        return ERR_NOMEM;
    int dst = 0;
    r->n_win = 0;
    for (int y = 0; y < r->mh; y += gwin)
        for (int x = 0; x < r->mw; x += gwin) {
            r->win[r->n_win++] = dst;
            for (int dy = 0; dy < gwin && y + dy < r->mh; dy++)
                for (int dx = 0; dx < gwin && x + dx < r->mw; dx++)
                    r->order[dst++] = (y + dy) * r->mw + x + dx;
        }
    r->win[r->n_win] = dst;
    return 0;
}

// Patch rows in group-slot order: (channel, y, x) values of each patch,
// rounded to f16 as the reference's im2col.
static void gather(const struct vision_model *vm, struct qwen_run *r, const float *chw, int W,
                   int H)
{
    const int p = vm->patch_size;
    for (int g = 0; g < r->n / 4; g++) {
        int my = r->order[g] / r->mw, mx = r->order[g] % r->mw;
        for (int k = 0; k < 4; k++) {
            int row = g * 4 + k, pyy = 2 * my + k / 2, pxx = 2 * mx + k % 2;
            r->py[row] = pyy;
            r->px[row] = pxx;
            if (r->perm)
                r->perm[pyy * r->gw + pxx] = row;
            float *dst = r->ff + (size_t)row * 3 * p * p;
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < p; y++)
                    for (int x = 0; x < p; x++)
                        dst[((size_t)c * p + y) * p + x] = vision_round_f16(
                            chw[((size_t)c * H + (size_t)pyy * p + y) * W + (size_t)pxx * p + x]);
        }
    }
}

// 2-D RoPE in place on rows of n_head heads: dimension i pairs with
// i + hd/2; the first quarter of pairs turn by the row, the second by the
// column, each angle base^(-k/(hd/4)) for its k-th pair.
static void rope_pixtral(const struct vision_model *vm, const struct qwen_run *r, float *x);

static void rope_2d(const struct vision_model *vm, const struct qwen_run *r, float *x)
{
    if (vm->pixtral) {
        rope_pixtral(vm, r, x);
        return;
    }
    const int hd = vm->n_embd / vm->n_head, half = hd / 2, sect = hd / 4;
    const float scale = powf(vm->rope_base, -2.0f / (float)half);
    for (int i = 0; i < r->n; i++) {
        float cs[512], sn[512];
        float th[2] = {(float)r->py[i], (float)r->px[i]};
        for (int j = 0; j < half && j < 512; j++) {
            if (j == sect)  // the column's section starts its own angle
                th[1] = (float)r->px[i];
            float t = j < sect ? th[0] : th[1];
            cs[j] = cosf(t);
            sn[j] = sinf(t);
            th[0] *= scale;
            th[1] *= scale;
        }
        for (int h = 0; h < vm->n_head; h++) {
            float *v = x + (size_t)i * vm->n_embd + (size_t)h * hd;
            for (int j = 0; j < half; j++) {
                float a = v[j], b = v[j + half];
                v[j] = a * cs[j] - b * sn[j];
                v[j + half] = a * sn[j] + b * cs[j];
            }
        }
    }
}

static inline float round_f16(float x)
{
    return vision_round_f16_fast(x);
}

// Pixtral's 2-D RoPE on adjacent pairs: the first half of a head turns by
// the patch row (pair i at base^(-2i / (hd/2))), the second by the column
// at the odd frequencies (base^(-(2i+1) / (hd/2))).
static void rope_pixtral(const struct vision_model *vm, const struct qwen_run *r, float *x)
{
    const int hd = vm->n_embd / vm->n_head, q = hd / 4;
    const float scale = powf(vm->rope_base, -2.0f / (float)(hd / 2));
    const float odd = powf(vm->rope_base, -2.0f / (float)hd);
    for (int i = 0; i < r->n; i++) {
        float cs[2][256], sn[2][256];
        for (int half = 0; half < 2; half++) {
            float th = (float)(half ? r->px[i] : r->py[i]);
            for (int j = 0; j < q && j < 256; j++) {
                float t = half ? odd * th : th;
                cs[half][j] = cosf(t);
                sn[half][j] = sinf(t);
                th *= scale;
            }
        }
        for (int h = 0; h < vm->n_head; h++)
            for (int half = 0; half < 2; half++) {
                float *v = x + (size_t)i * vm->n_embd + (size_t)h * hd + half * (hd / 2);
                for (int j = 0; j < q; j++) {
                    float a = v[2 * j], b = v[2 * j + 1];
                    v[2 * j] = a * cs[half][j] - b * sn[half][j];
                    v[2 * j + 1] = a * sn[half][j] + b * cs[half][j];
                }
            }
    }
}

// One query's output as the reference's CPU flash attention computes it
// with an F16 V: online softmax over the keys in order, the weighted sum
// of V accumulated in f16 (each update rounded), divided by the sum last.
static void attend_one(const float *sc, const float *v16, int n, int hd, float scale,
                       const int32_t *perm, float *acc, float *out)
{
    float M = -INFINITY, S = 0.0f;
    memset(acc, 0, sizeof(float) * (size_t)hd);
    for (int jj = 0; jj < n; jj++) {
        int j = perm ? perm[jj] : jj;
        float s = sc[j] * scale, ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = expf(M - s);
            M = s;
            for (int t = 0; t < hd; t++)
                acc[t] = round_f16(acc[t] * ms);
        } else {
            vs = expf(s - M);
        }
        const float *v = v16 + (size_t)j * hd;
        for (int t = 0; t < hd; t++)
            acc[t] = round_f16(fmaf(v[t], vs, acc[t]));
        S = S * ms + vs;
    }
    float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int t = 0; t < hd; t++)
        out[t] = acc[t] * inv;
}

// Attention among rows [r0, r1) (full: all rows), one head at a time, as
// ggml's CPU flash attention's one-row path computes it (below 64 query
// rows, the whole tower's, whatever the window: tiny pictures only): Q, K,
// V rounded to f16, online softmax, the V sum accumulated in f16.
static void attend_range(struct vision_model *vm, struct qwen_run *r, int r0, int r1)
{
    const int d = vm->n_embd, hd = d / vm->n_head, n = r1 - r0;
    const float scale = 1.0f / sqrtf((float)hd);
    float acc[1024];
    for (int h = 0; h < vm->n_head; h++) {
        for (int j = 0; j < n; j++)
            for (int t = 0; t < hd; t++) {
                size_t src = (size_t)(r0 + j) * d + (size_t)h * hd + t;
                r->qh[(size_t)j * hd + t] = round_f16(r->q[src]);
                r->kh[(size_t)j * hd + t] = round_f16(r->k[src]);
                r->vt[(size_t)j * hd + t] = round_f16(r->v[src]);
            }
        struct engine_tensor k = {.name = "attn_k",
                                  .type = GGUF_TYPE_F32,
                                  .ne = {hd, n},
                                  .row_bytes = sizeof(float) * (size_t)hd,
                                  .data = r->kh};
        engine_matmul(vm->be, r->scores, &k, NULL, r->qh, n);
        for (int i = 0; i < n; i++)
            attend_one(r->scores + (size_t)i * n, r->vt, n, hd, scale, r->perm, acc,
                       r->att + (size_t)(r0 + i) * d + (size_t)h * hd);
    }
}

// The block's attention. From 64 rows on, ggml's tiled path: Q stays F32,
// K and V f16, the V sum F32 — the engine's attention over the rows, a
// window a slot (attend.c).
static int attend(struct vision_model *vm, struct qwen_run *r, bool full, struct err *e)
{
    if (r->n >= QWEN_TILED_ROWS) {
        for (int w = 0; w <= r->n_win; w++)
            r->seg[w] = 4 * r->win[w];
        return vision_attend(vm->be, r->att, r->q, r->k, r->v, r->n, vm->n_head,
                             vm->n_embd / vm->n_head, full ? NULL : r->seg, r->n_win, false, e);
    }
    if (full)
        attend_range(vm, r, 0, r->n);
    else
        for (int w = 0; w < r->n_win; w++)
            attend_range(vm, r, 4 * r->win[w], 4 * r->win[w + 1]);
    return 0;
}

static int qwen_block(struct vision_model *vm, struct qwen_run *r, int il, struct err *e)
{
    struct engine_backend *be = vm->be;
    const struct vision_layer *L = &vm->layers[il];
    const int d = vm->n_embd, n = r->n;
    if (vm->qwen3)
        engine_layernorm(be, r->xb, r->x, L->ln1_w, L->ln1_b, n, d, vm->eps);
    else
        engine_rmsnorm(be, r->xb, r->x, L->ln1_w, n, d, vm->eps);
    struct engine_matmul_job qkv[3] = {
        {&L->wq, r->q, L->bq}, {&L->wk, r->k, L->bk}, {&L->wv, r->v, L->bv}};
    engine_matmul_n(be, qkv, 3, r->xb, n);
    rope_2d(vm, r, r->q);
    rope_2d(vm, r, r->k);
    bool full = vm->n_wa_pattern <= 0 || (il + 1) % vm->n_wa_pattern == 0;
    int rc = attend(vm, r, full, e);
    if (rc < 0)
        return rc;
    engine_matmul(be, r->xb, &L->wo, L->bo, r->att, n);
    engine_add(be, r->x, r->x, r->xb, (int64_t)n * d);

    if (vm->qwen3) {  // LayerNorm, GELU FFN
        engine_layernorm(be, r->xb, r->x, L->ln2_w, L->ln2_b, n, d, vm->eps);
        engine_matmul(be, r->ff, &L->w_up, L->b_up, r->xb, n);
        for (size_t i = 0; i < (size_t)n * vm->n_ff; i++)
            r->ff[i] = engine_gelu(r->ff[i]);
        engine_matmul(be, r->xb, &L->w_down, L->b_down, r->ff, n);
        engine_add(be, r->x, r->x, r->xb, (int64_t)n * d);
        return 0;
    }
    engine_rmsnorm(be, r->xb, r->x, L->ln2_w, n, d, vm->eps);
    struct engine_matmul_job ffn[2] = {{&L->w_gate, r->gate, L->b_gate},
                                       {&L->w_up, r->ff, L->b_up}};
    engine_matmul_n(be, ffn, 2, r->xb, n);
    engine_glu(be, r->ff, r->gate, r->ff, (int64_t)n * vm->n_ff, false);
    engine_matmul(be, r->xb, &L->w_down, L->b_down, r->ff, n);
    engine_add(be, r->x, r->x, r->xb, (int64_t)n * d);
    return 0;
}

static void run_free(struct vision_model *vm, struct qwen_run *r)
{
    float **bufs[] = {&r->x,    &r->xb, &r->q,  &r->k,  &r->v,      &r->att, &r->ff,
                      &r->gate, &r->qh, &r->kh, &r->vt, &r->scores, &r->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i])
            engine_buf_free(vm->be, *bufs[i]);
    free(r->order);
    free(r->py);
    free(r->px);
    free(r->perm);
    free(r->win);
    free(r->seg);
}

static int run_alloc(struct vision_model *vm, struct qwen_run *r, struct err *e)
{
    const size_t n = (size_t)r->n, d = (size_t)vm->n_embd, hd = d / (size_t)vm->n_head;
    const size_t pin = 3 * (size_t)vm->patch_size * vm->patch_size;
    size_t wide = (size_t)vm->n_ff > pin ? (size_t)vm->n_ff : pin;
    wide = wide > 4 * d ? wide : 4 * d;
    wide = wide > (size_t)vm->n_out ? wide : (size_t)vm->n_out;
    wide = wide > (size_t)vm->n_mid ? wide : (size_t)vm->n_mid;
    int rc = engine_reserve(vm->be, (int64_t)n, (int64_t)wide, 0, e);
    if (rc < 0)
        return rc;
    float **nd[] = {&r->x, &r->xb, &r->q, &r->k, &r->v, &r->att};
    for (size_t i = 0; i < sizeof nd / sizeof nd[0]; i++)
        *nd[i] = engine_buf_alloc(vm->be, sizeof(float) * n * d);
    r->ff = engine_buf_alloc(vm->be, sizeof(float) * n * wide);
    r->gate = engine_buf_alloc(vm->be, sizeof(float) * n * (size_t)vm->n_ff);
    // One head's Q, K, V and scores: the one-row path's (small pictures).
    const size_t nh = n < QWEN_TILED_ROWS ? n : 1;
    r->qh = engine_buf_alloc(vm->be, sizeof(float) * nh * hd);
    r->kh = engine_buf_alloc(vm->be, sizeof(float) * nh * hd);
    r->vt = engine_buf_alloc(vm->be, sizeof(float) * nh * hd);
    r->scores = engine_buf_alloc(vm->be, sizeof(float) * nh * nh);
    r->y = engine_buf_alloc(vm->be, sizeof(float) * (n / 4) * (size_t)vm->n_out);
    r->order = malloc(sizeof(int32_t) * (n / 4));
    r->py = malloc(sizeof(int32_t) * n);
    r->px = malloc(sizeof(int32_t) * n);
    if (vm->pixtral && !(r->perm = malloc(sizeof(int32_t) * n)))
        return err_set(e, ERR_NOMEM, "vision tower: cannot allocate activations");
    bool ok = r->y && r->ff && r->gate && r->qh && r->kh && r->vt && r->scores && r->order &&
              r->py && r->px;
    for (size_t i = 0; i < sizeof nd / sizeof nd[0]; i++)
        ok = ok && *nd[i];
    if (!ok || plan_windows(vm, r) < 0)
        return err_set(e, ERR_NOMEM, "vision tower: cannot allocate activations");
    return 0;
}

// The merger: RMSNorm, groups of four rows as one (4 d), mm.0, GELU, mm.2;
// rows back in the merged grid's row-major order.
static void merge_pixtral(struct vision_model *vm, struct qwen_run *r, float *out)
{
    struct engine_backend *be = vm->be;
    const int d = vm->n_embd, ng = r->n / 4, no = vm->n_out, cols = r->mw;
    engine_rmsnorm(be, r->xb, r->x, vm->mm_in_norm, r->n, d, vm->eps);
    for (int g = 0; g < ng; g++)  // unfold: channel-major, c·4 + dy·2 + dx
        for (int k = 0; k < 4; k++)
            for (int c = 0; c < d; c++)
                r->att[(size_t)g * 4 * d + (size_t)c * 4 + k] = r->xb[((size_t)g * 4 + k) * d + c];
    engine_matmul(be, r->x, &vm->mm_merge, NULL, r->att, ng);
    engine_matmul(be, r->ff, &vm->mm0, NULL, r->x, ng);
    for (size_t i = 0; i < (size_t)ng * vm->n_mid; i++)
        r->ff[i] = engine_gelu(r->ff[i]);
    engine_matmul(be, r->y, &vm->mm2, NULL, r->ff, ng);
    for (int g = 0; g < ng; g++) {
        int m = r->order[g], row = m / cols, col = m % cols;
        engine_buf_read(be, out + ((size_t)row * (cols + 1) + col) * no, r->y + (size_t)g * no,
                        sizeof(float) * (size_t)no);
    }
    for (int row = 0; row + 1 < r->mh; row++)
        memcpy(out + ((size_t)row * (cols + 1) + cols) * no, vm->img_break,
               sizeof(float) * (size_t)no);
}

static void merge(struct vision_model *vm, struct qwen_run *r, float *out)
{
    if (vm->pixtral) {
        merge_pixtral(vm, r, out);
        return;
    }
    struct engine_backend *be = vm->be;
    const int d = vm->n_embd, ng = r->n / 4;
    const size_t width = (size_t)vision_row_width(vm);  // deepstack slices after n_out
    if (vm->qwen3)
        engine_layernorm(be, r->xb, r->x, vm->post_ln_w, vm->post_ln_b, r->n, d, vm->eps);
    else
        engine_rmsnorm(be, r->xb, r->x, vm->post_ln_w, r->n, d, vm->eps);
    engine_matmul(be, r->ff, &vm->mm0, vm->mm0_b, r->xb, ng);
    for (size_t i = 0; i < (size_t)ng * 4 * d; i++)
        r->ff[i] = engine_gelu(r->ff[i]);
    engine_matmul(be, r->y, &vm->mm2, vm->mm2_b, r->ff, ng);
    for (int g = 0; g < ng; g++)
        engine_buf_read(be, out + (size_t)r->order[g] * width, r->y + (size_t)g * vm->n_out,
                        sizeof(float) * (size_t)vm->n_out);
}

int vision_qwen_encode(struct vision_model *vm, const struct vision_image *img, float *out,
                       struct err *e)
{
    int W, H, rc;
    vision_qwen_size(vm, img->width, img->height, &W, &H);
    struct vision_image boxed = {0};
    if ((rc = vision_letterbox_to(img, W, H, VISION_RESAMPLE_BICUBIC, &boxed, e)) < 0)
        return rc;
    float *chw = malloc(sizeof(float) * 3 * (size_t)W * H);
    if (!chw) {
        vision_image_free(&boxed);
        return err_set(e, ERR_NOMEM, "encode image: out of memory");
    }
    vision_normalize(&boxed, vm->mean, vm->std, chw);
    vision_image_free(&boxed);
    if (!vm->be && (rc = engine_cpu_new(&vm->be, vm->n_threads, e)) < 0) {
        free(chw);
        return rc;
    }
    struct qwen_run r = {.gw = W / vm->patch_size, .gh = H / vm->patch_size};
    r.n = r.gw * r.gh;
    r.mw = r.gw / 2;
    r.mh = r.gh / 2;
    rc = run_alloc(vm, &r, e);
    if (rc == 0) {
        gather(vm, &r, chw, W, H);
        engine_matmul(vm->be, r.x, &vm->patch_w, NULL, r.ff, r.n);
        if (vm->pre_ln_w)
            engine_rmsnorm(vm->be, r.x, r.x, vm->pre_ln_w, r.n, vm->n_embd, vm->eps);
        if (vm->qwen3)
            vision_qwen3_embed(vm, &r);
        for (int il = 0; rc == 0 && il < vm->n_layer; il++) {
            rc = qwen_block(vm, &r, il, e);
            if (rc == 0 && vm->qwen3)
                vision_qwen3_deepstack(vm, &r, il, out);
        }
        if (rc == 0)
            merge(vm, &r, out);
    }
    run_free(vm, &r);
    free(chw);
    return rc;
}

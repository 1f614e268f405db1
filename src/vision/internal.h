// vision internals shared by the module's files:
//   image.c    PNG / JPEG / WebP decoding with the size limits
//   resize.c   Pillow-compatible resampling, letterboxing, normalisation
//   clip.c     the projector file: layouts (mmproj, Ollama's monolithic),
//              hyper-parameters, tensors, the public model API
//   siglip.c   the SigLIP tower and Gemma 3's pooling projector
#pragma once

#include <string.h>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "vision/vision.h"

#define VISION_MAX_LAYERS 64

// One transformer block of a ViT. Matrices are engine views over the
// mapping; vectors are F32 host arrays (in the mapping, or converted).
struct vision_layer {
    struct engine_tensor wq, wk, wv, wo, w_up, w_down;
    const float *bq, *bk, *bv, *bo, *b_up, *b_down;
    struct engine_tensor w_gate;  // SwiGLU towers (Qwen2.5-VL)
    const float *b_gate;
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    // Qwen3-VL's deepstack merger after this block (ds_index >= 0: its
    // slice of the output row): LayerNorm over 2 × 2 groups, fc1, GELU, fc2.
    int ds_index;
    const float *ds_norm_w, *ds_norm_b, *ds_fc1_b, *ds_fc2_b;
    struct engine_tensor ds_fc1, ds_fc2;
};

struct vision_model {
    struct gguf *g;
    const char *projector;  // "gemma3"
    int image_size, patch_size, n_embd, n_ff, n_head, n_layer;
    int n_merge;     // pooling kernel (Gemma 3: image tokens per side = patches / n_merge)
    int n_out;       // projection width (the text model's n_embd)
    int min_tokens;  // Qwen-VL: fewest image tokens a picture becomes (0: the projector's 8)
    float eps;       // LayerNorm / RMSNorm epsilon
    float mean[3], std[3];
    struct engine_tensor patch_w;  // [3·p·p, n_embd]: rows in (channel, y, x) order
    const float *patch_b, *pos_embd, *post_ln_w, *post_ln_b;
    struct vision_layer layers[VISION_MAX_LAYERS];
    const float *soft_emb_norm;  // [n_embd] (already 1 + w)
    struct engine_tensor proj;   // [n_embd, n_out]: the transposed input projection
    // Qwen2.5-VL (qwen25vl.c): window attention every block but each
    // n_wa_pattern-th (0: none), windows of `window` pixels, 2-D RoPE base,
    // the merger's two products.
    bool qwen;
    // Qwen3-VL (qwen3vl.c; the same pipeline, vm->qwen too): patch bias,
    // learned positions on a pos_side² grid interpolated to the patches,
    // LayerNorms with biases, fused QKV, GELU FFN, deepstack mergers; an
    // output row is n_out · (1 + n_deepstack) wide.
    bool qwen3;
    int pos_side, n_deepstack;
    bool pixtral;  // Mistral 3's tower (the same file; no M-RoPE, [IMG_BREAK] rows)
    const float *pre_ln_w, *mm_in_norm, *img_break;
    struct engine_tensor mm_merge;  // Pixtral's patch merger [4 n_embd → n_embd]
    int n_mid;                      // Pixtral: mm.1's width
    int n_wa_pattern, window;
    float rope_base;
    struct engine_tensor mm0, mm2;
    const float *mm0_b, *mm2_b;
    // Buffers made at load (converted vectors, copies): up to 9 vectors and
    // 2 permuted matrices a block (Qwen2.5-VL: 7 biases, 2 norms).
    void *owned[12 * VISION_MAX_LAYERS + 16];
    int n_owned;
    int n_threads;
    struct engine_backend *be;  // made at the first encode
    // Activations, n_patches rows each.
    float *x, *xb, *q, *k, *v, *att, *ff;
    float *y;  // the projector's output: image tokens × n_out
};

// resize.c
int vision_letterbox(const struct vision_image *src, int size, enum vision_resample algo,
                     struct vision_image *out, struct err *e);
void vision_normalize(const struct vision_image *img, const float mean[3], const float std[3],
                      float *chw);

int vision_letterbox_to(const struct vision_image *src, int width, int height,
                        enum vision_resample algo, struct vision_image *out, struct err *e);

// One encode of the Qwen / Pixtral pipeline (qwen25vl.c), its buffers sized
// for the picture.
struct qwen_run {
    int n, gw, gh, mw, mh;  // patches; patch grid; merged grid
    int32_t *order;         // [n / 4]: merged token (row-major) at each group slot
    int32_t *py, *px;       // [n]: patch row / column of each row
    int *win;               // [n_win + 1]: first group slot of each window
    int *seg;               // [n_win + 1]: first row of each window (4 win[w])
    int n_win;              // windows (1 without window attention)
    int32_t *perm;          // Pixtral: rows in raster order (the reference's key order)
    float *x, *xb, *q, *k, *v, *att, *ff, *gate, *qh, *kh, *vt, *scores, *y;
};

// qwen25vl.c: binding (prefix: "clip.vision." or "qwen25vl.vision."), the
// size a picture is resized to, the encode.
int vision_qwen_open(struct vision_model *vm, const char *prefix, bool ollama, struct err *e);
// Pixtral: llama.cpp's mmproj, or (ollama) Ollama's single mistral3 file.
int vision_pixtral_open(struct vision_model *vm, bool ollama, struct err *e);
// Tensor binding of the Qwen files: an F32 copy of a vector, an engine
// view of a matrix of rows × cols (ne[0] = cols).
int vision_qvec(struct vision_model *vm, const char *name, int64_t n, const float **out,
                struct err *e);
int vision_qmat(struct vision_model *vm, const char *name, int64_t cols, int64_t rows,
                struct engine_tensor *out, struct err *e);
// The Qwen mergers' mm0 and mm2 (qwen25vl.c).
int vision_qwen_bind_merger(struct vision_model *vm, const char *mm0, const char *mm2,
                            struct err *e);

// qwen3vl.c: Qwen3-VL's binding (after qwen25vl.c's hyper-parameters; the
// mmproj or Ollama's monolithic layout), its additions to the patch embeddings (bias, learned
// positions), the deepstack merger of block il into out's rows, and the
// width of an output row.
int vision_qwen3_open(struct vision_model *vm, bool ollama, struct err *e);
// The mmproj's two temporal patch kernels summed (qwen25vl.c).
int vision_qwen_bind_patch(struct vision_model *vm, struct err *e);
void vision_qwen3_embed(struct vision_model *vm, struct qwen_run *r);
void vision_qwen3_deepstack(struct vision_model *vm, struct qwen_run *r, int il, float *out);
int vision_row_width(const struct vision_model *vm);
void vision_qwen_size(const struct vision_model *vm, int width, int height, int *w_out, int *h_out);
int vision_qwen_encode(struct vision_model *vm, const struct vision_image *img, float *out,
                       struct err *e);

// siglip.c
int vision_siglip_encode(struct vision_model *vm, const float *chw, float *out, struct err *e);

// f16 helpers (clip.c).
float vision_f16_to_f32(uint16_t h);
float vision_round_f16(float x);

// vision_round_f16 for the hot loops: inside f16's normal range the low 13
// mantissa bits are rounded off (to nearest, ties to even) on the bits;
// elsewhere (tiny, huge, inf, NaN) the exact helper.
static inline float vision_round_f16_fast(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t ex = (u >> 23) & 0xff;
    if (ex < 127 - 14 || ex > 127 + 15)
        return vision_round_f16(x);
    u += 0x0fffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
    if (((u >> 23) & 0xff) > 127 + 15)  // rounded past 65504
        return vision_round_f16(x);
    memcpy(&x, &u, sizeof u);
    return x;
}

// Bytes the engine's attention keeps for a tower (its per-thread tiles:
// well under 1 MB a thread at 64 queries of head width up to 256).
#define VISION_ATTN_SCRATCH (16ull << 20)

// attend.c: non-causal attention of n rows (n_head heads of head_dim) in
// segments [seg[s], seg[s + 1]) (seg NULL: one of all n rows) through the
// engine; rounds K, V (and Q with round_q) to f16 values in place.
int vision_attend(struct engine_backend *be, float *out, float *q, float *k, float *v, int n,
                  int n_head, int head_dim, const int *seg, int n_seg, bool round_q, struct err *e);

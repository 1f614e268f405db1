// The projector file. Two layouts hold the same tower:
//   - an mmproj file (general.architecture "clip"), as llama.cpp's converter
//     and Hugging Face GGUFs ship it beside the text model;
//   - Ollama's monolithic model file (general.architecture "gemma3",
//     "qwen25vl", "qwen3vl"), with
//     the tower's tensors and "<arch>.vision.*" keys inside the text model.
// A row of `layouts` names each one's keys and tensors; everything after
// binding is the same.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/internal.h"

struct vision_layout {
    const char *arch;        // general.architecture
    const char *projector;   // the projector it implies ("" : read clip.projector_type)
    const char *key_prefix;  // "clip.vision." / "gemma3.vision."
    const char *patch, *pos, *post_ln, *soft_emb_norm, *input_proj;
    const char *ln1, *ln2, *attn_out, *ffn_up, *ffn_down;
};

static const struct vision_layout layouts[] = {
    {"clip", "", "clip.vision.", "v.patch_embd", "v.position_embd", "v.post_ln", "mm.soft_emb_norm",
     "mm.input_projection", "ln1", "ln2", "attn_out", "ffn_up", "ffn_down"},
    {"gemma3", "gemma3", "gemma3.vision.", "v.patch_embedding", "v.position_embedding",
     "v.post_layernorm", "mm.mm_soft_emb_norm", "mm.mm_input_projection", "layer_norm1",
     "layer_norm2", "attn_output", "mlp.fc1", "mlp.fc2"},
    // Qwen2.5-VL binds its own tensors (qwen25vl.c); only the patch name
    // (the tower's presence) is read from here.
    {"qwen25vl", "qwen2.5vl_merger", "qwen25vl.vision.", "v.patch_embd_0", "", "", "", "", "", "",
     "", "", ""},
    // Qwen3-VL as Ollama's library publishes it (qwen3vl.c binds it).
    {"qwen3vl", "qwen3vl_merger", "qwen3vl.vision.", "v.patch_embed", "", "", "", "", "", "", "",
     "", ""},
    // Mistral 3 in Ollama's single file (Pixtral tower, HF names): qwen25vl.c.
    {"mistral3", "pixtral", "mistral3.vision.", "v.patch_conv", "", "", "", "", "", "", "", "", ""},
};

// Projector types this module runs.
static const char *const projectors[] = {"gemma3", "qwen2.5vl_merger", "pixtral", "qwen3vl_merger"};

static const struct vision_layout *layout_of(const struct gguf *g)
{
    struct str arch = gguf_architecture(g);
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (str_eq_cstr(arch, layouts[i].arch))
            return &layouts[i];
    return NULL;
}

// The projector type of a file in layout l, or NULL if not one we run.
static const char *projector_of(const struct gguf *g, const struct vision_layout *l)
{
    struct str s = {0};
    if (l->projector[0])
        s = str_from(l->projector);
    else if (!gguf_get_str(g, "clip.projector_type", &s))
        return NULL;
    for (size_t i = 0; i < sizeof projectors / sizeof projectors[0]; i++)
        if (str_eq_cstr(s, projectors[i]))
            return projectors[i];
    return NULL;
}

bool vision_gguf_has_tower(const struct gguf *g)
{
    const struct vision_layout *l = layout_of(g);
    if (!l || !projector_of(g, l))
        return false;
    char name[64];
    snprintf(name, sizeof name, "%s.weight", l->patch);
    return gguf_tensor_find(g, name) != NULL;
}

static bool is_qwen(const char *projector)
{
    return strcmp(projector, "qwen2.5vl_merger") == 0;
}

float vision_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f;
    if (exp == 0)
        f = ldexpf((float)man, -24);
    else if (exp == 31)
        f = man ? NAN : INFINITY;
    else
        f = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -f : f;
}

// Rounds to the nearest f16 value (ties to even), as a float.
float vision_round_f16(float x)
{
    if (!isfinite(x) || x == 0.0f)
        return x;
    float a = fabsf(x);
    if (a >= 65520.0f)
        return x > 0 ? INFINITY : -INFINITY;
    int ex;
    frexpf(a, &ex);                         // a = m · 2^ex, m in [0.5, 1)
    int q = ex - 11 < -24 ? -24 : ex - 11;  // spacing of f16 values near a
    float r = ldexpf(nearbyintf(ldexpf(a, -q)), q);
    return x < 0 ? -r : r;
}

struct binder {
    struct vision_model *vm;
    const struct vision_layout *l;
    struct err *e;
};

static const struct gguf_tensor *need(struct binder *b, const char *name, int64_t n)
{
    const struct gguf_tensor *t = gguf_tensor_find(b->vm->g, name);
    if (!t) {
        err_set(b->e, ERR_FORMAT, "vision tower: missing tensor %s", name);
        return NULL;
    }
    if (n >= 0 && (int64_t)gguf_tensor_n_elements(t) != n) {
        err_set(b->e, ERR_FORMAT, "vision tower: tensor %s has %llu elements, want %lld", name,
                (unsigned long long)gguf_tensor_n_elements(t), (long long)n);
        return NULL;
    }
    return t;
}

static void *own(struct vision_model *vm, size_t n_bytes)
{
    if (vm->n_owned >= (int)(sizeof vm->owned / sizeof vm->owned[0]))
        return NULL;
    void *p = malloc(n_bytes ? n_bytes : 1);
    if (p)
        vm->owned[vm->n_owned++] = p;
    return p;
}

// An F32 vector of n values (F16 in the file is converted).
static int bind_vec(struct binder *b, const char *name, int64_t n, const float **out)
{
    const struct gguf_tensor *t = need(b, name, n);
    if (!t)
        return ERR_FORMAT;
    if (t->type == GGUF_TYPE_F32) {
        *out = t->data;
        return 0;
    }
    if (t->type != GGUF_TYPE_F16)
        return err_set(b->e, ERR_UNSUPPORTED, "vision tower: tensor %s: type %s not supported",
                       name, gguf_type_name(t->type));
    float *f = own(b->vm, sizeof(float) * (size_t)n);
    if (!f)
        return err_set(b->e, ERR_NOMEM, "vision tower: out of memory");
    for (int64_t i = 0; i < n; i++)
        f[i] = vision_f16_to_f32(((const uint16_t *)t->data)[i]);
    *out = f;
    return 0;
}

// A matrix of `rows` rows of `cols` (the file's ne[0] = cols).
static int bind_mat(struct binder *b, const char *name, int64_t cols, int64_t rows,
                    struct engine_tensor *out)
{
    const struct gguf_tensor *t = need(b, name, cols * rows);
    if (!t)
        return ERR_FORMAT;
    int rc = engine_tensor_from_gguf(out, t, b->e);
    if (rc < 0)
        return rc;
    if (out->ne[0] != cols)
        return err_set(b->e, ERR_FORMAT, "vision tower: tensor %s has rows of %lld, want %lld",
                       name, (long long)out->ne[0], (long long)cols);
    return 0;
}

static int bind_layer(struct binder *b, int il)
{
    struct vision_model *vm = b->vm;
    struct vision_layer *L = &vm->layers[il];
    const struct vision_layout *l = b->l;
    const int d = vm->n_embd, f = vm->n_ff;
    char n[96];
    int rc = 0;
#define MAT(field, part, cols, rows)                                                               \
    snprintf(n, sizeof n, "v.blk.%d.%s.weight", il, part);                                         \
    if (!rc)                                                                                       \
    rc = bind_mat(b, n, cols, rows, &L->field)
#define VEC(field, part, suffix, len)                                                              \
    snprintf(n, sizeof n, "v.blk.%d.%s.%s", il, part, suffix);                                     \
    if (!rc)                                                                                       \
    rc = bind_vec(b, n, len, &L->field)
    MAT(wq, "attn_q", d, d);
    MAT(wk, "attn_k", d, d);
    MAT(wv, "attn_v", d, d);
    MAT(wo, l->attn_out, d, d);
    MAT(w_up, l->ffn_up, d, f);
    MAT(w_down, l->ffn_down, f, d);
    VEC(bq, "attn_q", "bias", d);
    VEC(bk, "attn_k", "bias", d);
    VEC(bv, "attn_v", "bias", d);
    VEC(bo, l->attn_out, "bias", d);
    VEC(b_up, l->ffn_up, "bias", f);
    VEC(b_down, l->ffn_down, "bias", d);
    VEC(ln1_w, l->ln1, "weight", d);
    VEC(ln1_b, l->ln1, "bias", d);
    VEC(ln2_w, l->ln2, "weight", d);
    VEC(ln2_b, l->ln2, "bias", d);
#undef MAT
#undef VEC
    return rc;
}

static bool key_u32(const struct gguf *g, const struct vision_layout *l, const char *suffix,
                    int *out)
{
    char k[96];
    uint32_t v;
    snprintf(k, sizeof k, "%s%s", l->key_prefix, suffix);
    if (!gguf_get_u32(g, k, &v) || v == 0 || v > (1u << 20))
        return false;
    *out = (int)v;
    return true;
}

// The pooling factor: the file's scale_factor key when present; in Ollama's
// layout sqrt(patches / tokens_per_image); else Gemma 3's 4.
static int read_merge(const struct gguf *g, const struct vision_model *vm)
{
    uint32_t v;
    if (gguf_get_u32(g, "clip.vision.projector.scale_factor", &v) && v > 0)
        return (int)v;
    int side = vm->image_size / vm->patch_size;
    if (gguf_get_u32(g, "gemma3.mm.tokens_per_image", &v) && v > 0) {
        int per_side = (int)lround(sqrt((double)v));
        if (per_side > 0 && per_side * per_side == (int)v && side % per_side == 0)
            return side / per_side;
    }
    return 4;
}

static int read_hparams(struct vision_model *vm, const struct vision_layout *l, struct err *e)
{
    const struct gguf *g = vm->g;
    vm->eps = 1e-6f;
    char k[96];
    snprintf(k, sizeof k, "%sattention.layer_norm_epsilon", l->key_prefix);
    gguf_get_f32(g, k, &vm->eps);
    if (!key_u32(g, l, "image_size", &vm->image_size) ||
        !key_u32(g, l, "patch_size", &vm->patch_size) ||
        !key_u32(g, l, "embedding_length", &vm->n_embd) ||
        !key_u32(g, l, "feed_forward_length", &vm->n_ff) ||
        !key_u32(g, l, "attention.head_count", &vm->n_head) ||
        !key_u32(g, l, "block_count", &vm->n_layer))
        return err_set(e, ERR_FORMAT, "vision tower: missing or bad %s* hyper-parameters",
                       l->key_prefix);
    // Bounds that keep the activations of one encode under ~4 GB whatever
    // the file says (real towers: 4096 patches, width 1152, FFN 4304).
    int64_t n_pos = (int64_t)(vm->image_size / vm->patch_size) * (vm->image_size / vm->patch_size);
    if (vm->n_layer > VISION_MAX_LAYERS || vm->n_embd % vm->n_head ||
        vm->image_size % vm->patch_size || vm->image_size > 4096 || vm->n_embd > 8192 ||
        vm->n_ff > 65536 || n_pos > 16384 ||
        n_pos * (6 * vm->n_embd + vm->n_ff + n_pos) > (1 << 30))
        return err_set(e, ERR_FORMAT, "vision tower: inconsistent hyper-parameters");
    for (int c = 0; c < 3; c++)
        vm->mean[c] = vm->std[c] = 0.5f;  // Gemma 3 (Ollama's layout implies them)
    enum gguf_value_type et;
    const struct gguf_kv *kv = NULL;
    uint64_t n = 0;
    (void)et;
    if (gguf_get_arr(g, "clip.vision.image_mean", &et, &n) && n == 3) {
        kv = gguf_find(g, "clip.vision.image_mean");
        for (int c = 0; c < 3; c++)
            gguf_arr_f32(kv, (uint64_t)c, &vm->mean[c]);
    }
    if (gguf_get_arr(g, "clip.vision.image_std", &et, &n) && n == 3) {
        kv = gguf_find(g, "clip.vision.image_std");
        for (int c = 0; c < 3; c++)
            gguf_arr_f32(kv, (uint64_t)c, &vm->std[c]);
    }
    for (int c = 0; c < 3; c++)
        if (!(vm->std[c] > 0.0f))
            return err_set(e, ERR_FORMAT, "vision tower: image_std must be positive");
    vm->n_merge = read_merge(g, vm);
    if ((vm->image_size / vm->patch_size) % vm->n_merge)
        return err_set(e, ERR_FORMAT, "vision tower: %d patches a side do not pool by %d",
                       vm->image_size / vm->patch_size, vm->n_merge);
    return 0;
}

static int bind_globals(struct binder *b)
{
    struct vision_model *vm = b->vm;
    const struct vision_layout *l = b->l;
    const int d = vm->n_embd, p = vm->patch_size, side = vm->image_size / p;
    char n[96];
    snprintf(n, sizeof n, "%s.weight", l->patch);
    const struct gguf_tensor *t = need(b, n, (int64_t)3 * p * p * d);
    if (!t)
        return ERR_FORMAT;
    uint32_t bs, ts;
    if ((t->type != GGUF_TYPE_F32 && t->type != GGUF_TYPE_F16) ||
        !gguf_type_geometry(t->type, &bs, &ts))
        return err_set(b->e, ERR_UNSUPPORTED, "vision tower: %s: type %s not supported", n,
                       gguf_type_name(t->type));
    vm->patch_w = (struct engine_tensor){.name = "v.patch_embd.weight",
                                         .type = t->type,
                                         .ne = {(int64_t)3 * p * p, d},
                                         .row_bytes = (size_t)3 * p * p * ts,
                                         .data = t->data};
    int rc = 0;
    snprintf(n, sizeof n, "%s.bias", l->patch);
    rc = rc ? rc : bind_vec(b, n, d, &vm->patch_b);
    snprintf(n, sizeof n, "%s.weight", l->pos);
    rc = rc ? rc : bind_vec(b, n, (int64_t)side * side * d, &vm->pos_embd);
    snprintf(n, sizeof n, "%s.weight", l->post_ln);
    rc = rc ? rc : bind_vec(b, n, d, &vm->post_ln_w);
    snprintf(n, sizeof n, "%s.bias", l->post_ln);
    rc = rc ? rc : bind_vec(b, n, d, &vm->post_ln_b);
    snprintf(n, sizeof n, "%s.weight", l->soft_emb_norm);
    rc = rc ? rc : bind_vec(b, n, d, &vm->soft_emb_norm);
    return rc;
}

// The input projection is stored [n_embd rows of n_out] and used
// transposed: an F32 copy in the matmul's orientation.
static int bind_projection(struct binder *b)
{
    struct vision_model *vm = b->vm;
    char n[96];
    snprintf(n, sizeof n, "%s.weight", b->l->input_proj);
    const struct gguf_tensor *t = need(b, n, -1);
    if (!t)
        return ERR_FORMAT;
    if ((t->type != GGUF_TYPE_F32 && t->type != GGUF_TYPE_F16) || t->ne[1] != vm->n_embd ||
        t->ne[0] <= 0 || t->ne[0] > (1 << 16) || t->n_dims != 2)
        return err_set(b->e, ERR_FORMAT, "vision tower: %s: want an F32/F16 [n_out, %d] matrix", n,
                       vm->n_embd);
    vm->n_out = (int)t->ne[0];
    float *w = own(vm, sizeof(float) * (size_t)vm->n_out * vm->n_embd);
    if (!w)
        return err_set(b->e, ERR_NOMEM, "vision tower: out of memory");
    for (int64_t i = 0; i < vm->n_embd; i++)
        for (int64_t o = 0; o < vm->n_out; o++) {
            size_t src = (size_t)i * vm->n_out + o;
            w[o * vm->n_embd + i] = t->type == GGUF_TYPE_F32
                                        ? ((const float *)t->data)[src]
                                        : vision_f16_to_f32(((const uint16_t *)t->data)[src]);
        }
    vm->proj = (struct engine_tensor){.name = "mm.input_projection.weight",
                                      .type = GGUF_TYPE_F32,
                                      .ne = {vm->n_embd, vm->n_out},
                                      .row_bytes = sizeof(float) * (size_t)vm->n_embd,
                                      .data = w};
    return 0;
}

static void free_activations(struct vision_model *vm)
{
    if (!vm->be)
        return;
    float **bufs[] = {&vm->x, &vm->xb, &vm->q, &vm->k, &vm->v, &vm->att, &vm->ff, &vm->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (*bufs[i])
            engine_buf_free(vm->be, *bufs[i]);
        *bufs[i] = NULL;
    }
    engine_backend_free(vm->be);
    vm->be = NULL;
}

static int alloc_activations(struct vision_model *vm, int n_threads, struct err *e)
{
    int rc = engine_cpu_new(&vm->be, n_threads, e);
    if (rc < 0)
        return rc;
    const int64_t n_pos =
        (int64_t)(vm->image_size / vm->patch_size) * (vm->image_size / vm->patch_size);
    const int64_t patch_in = (int64_t)3 * vm->patch_size * vm->patch_size;
    int64_t wide = vm->n_ff > patch_in ? vm->n_ff : patch_in;
    int64_t row_max = wide > vm->n_embd ? wide : vm->n_embd;
    rc = engine_reserve(vm->be, n_pos, row_max, 0, e);
    if (rc < 0)
        return rc;
    float **bufs[] = {&vm->x, &vm->xb, &vm->q, &vm->k, &vm->v, &vm->att};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        *bufs[i] = engine_buf_alloc(vm->be, sizeof(float) * (size_t)n_pos * vm->n_embd);
    vm->ff = engine_buf_alloc(vm->be, sizeof(float) * (size_t)n_pos * wide);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (!*bufs[i])
            return err_set(e, ERR_NOMEM, "vision tower: cannot allocate activations");
    int64_t side = vm->image_size / vm->patch_size / vm->n_merge;
    vm->y = engine_buf_alloc(vm->be, sizeof(float) * (size_t)(side * side) * vm->n_out);
    if (!vm->ff || !vm->y)
        return err_set(e, ERR_NOMEM, "vision tower: cannot allocate activations");
    return 0;
}

// Activations are allocated at the first encode, so a model that never
// sees a picture costs only its mapping.
static int ensure_activations(struct vision_model *vm, struct err *e)
{
    if (vm->x)
        return 0;
    int rc = alloc_activations(vm, vm->n_threads, e);
    if (rc < 0)
        free_activations(vm);
    return rc;
}

static int model_open(struct vision_model *vm, const char *what, struct err *e)
{
    const struct vision_layout *l = layout_of(vm->g);
    if (!vision_gguf_has_tower(vm->g)) {
        struct str arch = gguf_architecture(vm->g);
        return err_set(e, ERR_UNSUPPORTED, "%s: no vision tower this build can run (%.*s)", what,
                       (int)arch.len, arch.ptr);
    }
    vm->projector = projector_of(vm->g, l);
    if ((vm->qwen = is_qwen(vm->projector)))
        return vision_qwen_open(vm, l->key_prefix, strcmp(l->arch, "clip") != 0, e);
    if (strcmp(vm->projector, "qwen3vl_merger") == 0) {
        vm->qwen = vm->qwen3 = true;  // qwen25vl.c's pipeline, qwen3vl.c's differences
        return vision_qwen_open(vm, l->key_prefix, strcmp(l->arch, "clip") != 0, e);
    }
    if (strcmp(vm->projector, "pixtral") == 0) {
        vm->qwen = true;  // the same dynamic-size pipeline (qwen25vl.c)
        return vision_pixtral_open(vm, strcmp(l->arch, "clip") != 0, e);
    }
    struct binder b = {vm, l, e};
    int rc = read_hparams(vm, l, e);
    if (rc == 0)
        rc = bind_globals(&b);
    for (int il = 0; rc == 0 && il < vm->n_layer; il++)
        rc = bind_layer(&b, il);
    if (rc == 0)
        rc = bind_projection(&b);
    return rc;
}

int vision_model_load(struct vision_model **out, const char *path, int n_threads, struct err *e)
{
    *out = NULL;
    struct vision_model *vm = calloc(1, sizeof *vm);
    if (!vm)
        return err_set(e, ERR_NOMEM, "vision tower: out of memory");
    vm->n_threads = n_threads;
    int rc = gguf_open(&vm->g, path, e);
    if (rc == 0)
        rc = model_open(vm, path, e);
    if (rc < 0) {
        vision_model_free(vm);
        return rc;
    }
    *out = vm;
    return 0;
}

int vision_model_load_memory(struct vision_model **out, const void *data, size_t n, int n_threads,
                             struct err *e)
{
    *out = NULL;
    struct vision_model *vm = calloc(1, sizeof *vm);
    if (!vm)
        return err_set(e, ERR_NOMEM, "vision tower: out of memory");
    vm->n_threads = n_threads;
    int rc = gguf_open_memory(&vm->g, data, n, e);
    if (rc == 0)
        rc = model_open(vm, "projector", e);
    if (rc < 0) {
        vision_model_free(vm);
        return rc;
    }
    *out = vm;
    return 0;
}

void vision_model_free(struct vision_model *vm)
{
    if (!vm)
        return;
    free_activations(vm);
    for (int i = 0; i < vm->n_owned; i++)
        free(vm->owned[i]);
    if (vm->g)
        gguf_close(vm->g);
    free(vm);
}

const char *vision_model_projector(const struct vision_model *vm)
{
    return vm->projector;
}

void vision_model_set_min_tokens(struct vision_model *vm, int n)
{
    vm->min_tokens = n <= 0 ? 0 : n > 4096 ? 4096 : n;  // at most the tower's maximum
}

int vision_model_n_embd(const struct vision_model *vm)
{
    return vision_row_width(vm);
}

int vision_model_n_tokens(const struct vision_model *vm, int width, int height)
{
    int rows, cols;
    if (vision_model_grid(vm, width, height, &rows, &cols))
        return rows * cols;
    if (vm->pixtral) {  // a [IMG_BREAK] after every row but the last
        int w, h, a = vm->patch_size * vm->n_merge;
        vision_qwen_size(vm, width, height, &w, &h);
        return (h / a) * (w / a + 1) - 1;
    }
    (void)width;  // Gemma 3: every picture is letterboxed to one size
    (void)height;
    int side = vm->image_size / vm->patch_size / vm->n_merge;
    return side * side;
}

bool vision_model_grid(const struct vision_model *vm, int width, int height, int *rows, int *cols)
{
    if (!vm->qwen || vm->pixtral)
        return false;
    int w, h, a = vm->patch_size * vm->n_merge;
    vision_qwen_size(vm, width, height, &w, &h);
    *rows = h / a;
    *cols = w / a;
    return true;
}

const char *vision_model_image_begin(const struct vision_model *vm)
{
    return vm->pixtral ? "" : vm->qwen ? "<|vision_start|>" : "<start_of_image>";
}

const char *vision_model_image_end(const struct vision_model *vm)
{
    return vm->pixtral ? "[IMG_END]" : vm->qwen ? "<|vision_end|>" : "<end_of_image>";
}

uint64_t vision_model_weights_bytes(const struct vision_model *vm)
{
    uint64_t n = 0;
    for (size_t i = 0; i < gguf_tensor_count(vm->g); i++)
        n += gguf_tensor_at(vm->g, i)->n_bytes;
    return n;
}

bool vision_model_non_causal(const struct vision_model *vm)
{
    return strcmp(vm->projector, "gemma3") == 0;
}

uint64_t vision_model_scratch_bytes(const struct vision_model *vm)
{
    if (vm->qwen) {
        // The largest picture: 4096 merged tokens (16384 patches): six
        // n_embd-wide buffers, the FFN's two, the output, the row lists, the
        // attention's tiles (no n × n scores: attend.c), the activation
        // scratch, and the output rows (Qwen3-VL: with the deepstack slices).
        uint64_t n = 16384, d = (uint64_t)vm->n_embd, f = (uint64_t)vm->n_ff;
        return sizeof(float) * n * (6 * d + 2 * f + 4 * d + vm->n_out / 4 + 5) +
               VISION_ATTN_SCRATCH + n * (4 * d * 2 + 512) +
               sizeof(float) * (n / 4) * (uint64_t)vision_row_width(vm);
    }
    uint64_t n_pos =
        (uint64_t)(vm->image_size / vm->patch_size) * (uint64_t)(vm->image_size / vm->patch_size);
    uint64_t patch_in = 3ull * vm->patch_size * vm->patch_size;
    uint64_t wide = (uint64_t)vm->n_ff > patch_in ? (uint64_t)vm->n_ff : patch_in;
    // six n_embd-wide buffers, one wide one, the attention's cell lists
    // and tiles (no n × n scores: attend.c), the pixels, the activation
    // scratch
    return sizeof(float) * n_pos * (6ull * vm->n_embd + wide + 2) + VISION_ATTN_SCRATCH +
           sizeof(float) * 3ull * vm->image_size * vm->image_size + n_pos * (wide * 2 + 512);
}

int vision_encode(struct vision_model *vm, const struct vision_image *img, float *out,
                  struct err *e)
{
    if (vm->qwen)
        return vision_qwen_encode(vm, img, out, e);
    int rc = ensure_activations(vm, e);
    if (rc < 0)
        return rc;
    struct vision_image boxed = {0};
    rc = vision_letterbox(img, vm->image_size, VISION_RESAMPLE_BILINEAR, &boxed, e);
    if (rc < 0)
        return rc;
    float *chw = malloc(sizeof(float) * 3 * (size_t)vm->image_size * vm->image_size);
    if (!chw) {
        vision_image_free(&boxed);
        return err_set(e, ERR_NOMEM, "encode image: out of memory");
    }
    vision_normalize(&boxed, vm->mean, vm->std, chw);
    vision_image_free(&boxed);
    rc = vision_siglip_encode(vm, chw, out, e);
    free(chw);
    return rc;
}

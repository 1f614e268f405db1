// The mixture-of-experts FFN of decoder families (qwen3moe, gpt-oss): binds
// each layer's router and 3-D expert tensors (used in place from the
// mapping, every expert resident; rewritten at load into the interleaved
// layout where the type has one) and runs the engine's MoE op as the
// decoder block's FFN hook. A family describes its MoE with a
// struct model_moe_spec (gating, renormalisation, activation, biases).
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// A layer's MoE data (model_layer.ext).
struct model_moe_layer {
    struct engine_tensor gate_inp;  // [n_embd, n_expert]
    const float *gate_inp_b;        // [n_expert] or NULL
    struct engine_experts gate, up, down;
    const float *gate_b, *up_b, *down_b;           // [n_expert × n_ff_exp] ... or NULL
    const float *sel_bias;                         // exp_probs_b [n_expert] or NULL
    struct engine_tensor sh_gate, sh_up, sh_down;  // shared expert (sh_up.data NULL: none)
    const float *sh_gate_inp;                      // [n_embd] the shared expert's gate or NULL
    const float *exp_scale;                        // [n_expert] output factors or NULL
    struct engine_moe p;
};

// The first layer with experts (hybrids: layer 0 may have none), or NULL.
static const struct model_moe_layer *first_moe_layer(const struct model *m)
{
    for (int il = 0; m->layers && il < m->hp.n_layer; il++)
        if (m->layers[il].ext)
            return m->layers[il].ext;
    return NULL;
}

// Whether layer il has a MoE FFN under spec.
static bool has_moe(const struct model *m, const struct model_moe_spec *spec, int il)
{
    if (spec->moe_step > 0 && (il + 1) % spec->moe_step != 0)
        return false;
    if (spec->router_layers_only) {
        char n[GGUF_MAX_NAME_LEN + 1];
        snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", il);
        return gguf_tensor_find(m->g, n) != NULL;
    }
    return !spec->ff_layers_only || m->layers[il].n_ff > 0;
}

// The per-expert output factors (gemma4) under llama.cpp's name or Ollama's.
static int bind_exp_scale(struct model *m, int il, struct model_moe_layer *X, int64_t E,
                          struct err *e)
{
    char n[GGUF_MAX_NAME_LEN + 1];
    snprintf(n, sizeof n, "blk.%d.ffn_down_exps.scale", il);
    if (!gguf_tensor_find(m->g, n))
        snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.per_expert_scale", il);
    int rc = model_bind_vector(m, &X->exp_scale, n, E, false, e);
    X->p.exp_scale = X->exp_scale;
    return rc;
}

// One expert's width: the key, else (Ollama's gpt-oss files) the shape of
// the first MoE layer's ffn_up_exps as Ollama's loader recovers it; granite
// names it feed_forward_length.
static int expert_width(struct model *m, const struct model_moe_spec *spec, uint32_t *out,
                        struct err *e)
{
    if (spec->n_ff_is_expert) {
        *out = (uint32_t)m->hp.n_ff;
        return 0;
    }
    if (gguf_get_arch_u32(m->g, "expert_feed_forward_length", out) && *out > 0)
        return 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        if (!has_moe(m, spec, il))
            continue;
        char n[GGUF_MAX_NAME_LEN + 1];
        snprintf(n, sizeof n, "blk.%d.ffn_up_exps.weight", il);
        const struct gguf_tensor *gt = gguf_tensor_find(m->g, n);
        if (!gt || gt->ne[1] < 1 || gt->ne[1] > (1 << 22))
            break;
        *out = (uint32_t)gt->ne[1];
        return 0;
    }
    return err_set(e, ERR_FORMAT, "missing key expert_feed_forward_length");
}

// The shared expert of layer il when the file has one: width
// expert_shared_feed_forward_length (else the tensors' shape).
static int bind_shared(struct model *m, const struct model_moe_spec *spec, int il,
                       struct model_moe_layer *X, struct err *e)
{
    char n[GGUF_MAX_NAME_LEN + 1];
    uint32_t f = 0;
    snprintf(n, sizeof n, "blk.%d.ffn_up_shexp.weight", il);
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, n);
    if (!gguf_get_arch_u32(m->g, "expert_shared_feed_forward_length", &f))
        f = gt ? (uint32_t)gt->ne[1] : 0;
    if (f == 0 && spec->shared_gated)
        return err_set(e, ERR_FORMAT, "missing tensor %s", n);
    if (f == 0)
        return 0;
    if (f > (1u << 22))
        return err_set(e, ERR_FORMAT, "invalid expert_shared_feed_forward_length %u", f);
    const int64_t D = m->hp.n_embd;
    int rc;
    if ((rc = model_bind_matrix(m, &X->sh_up, n, D, f, true, e)) < 0)
        return rc;
    snprintf(n, sizeof n, "blk.%d.ffn_down_shexp.weight", il);
    if ((rc = model_bind_matrix(m, &X->sh_down, n, f, D, true, e)) < 0)
        return rc;
    snprintf(n, sizeof n, "blk.%d.ffn_gate_shexp.weight", il);
    if (!spec->no_gate && (rc = model_bind_matrix(m, &X->sh_gate, n, D, f, true, e)) < 0)
        return rc;
    X->p.sh_up = &X->sh_up;
    X->p.sh_down = &X->sh_down;
    X->p.sh_gate = spec->no_gate ? NULL : &X->sh_gate;
    // qwen3next, qwen35moe: the shared expert's output scaled by
    // σ(ffn_gate_inp_shexp · x), one scalar per token.
    snprintf(n, sizeof n, "blk.%d.ffn_gate_inp_shexp.weight", il);
    if ((rc = model_bind_vector(m, &X->sh_gate_inp, n, D, spec->shared_gated, e)) < 0)
        return rc;
    X->p.sh_gate_inp = X->sh_gate_inp;
    return 0;
}

// An expert bias: ne {rows, n_expert}, F32.
static int bind_expert_bias(struct model *m, const float **out, const char *name, int64_t rows,
                            int64_t n_expert, bool required, struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    *out = NULL;
    if (!gt)
        return required ? err_set(e, ERR_FORMAT, "missing tensor %s", name) : 0;
    if (gt->type != GGUF_TYPE_F32)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: expected F32, got %s", name,
                       gguf_type_name(gt->type) ? gguf_type_name(gt->type) : "unknown");
    if (gt->ne[0] != rows || gt->ne[1] != n_expert || gt->ne[2] != 1 || gt->ne[3] != 1 || !gt->data)
        return err_set(e, ERR_FORMAT, "tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                       name, (long long)gt->ne[0], (long long)gt->ne[1], (long long)rows,
                       (long long)n_expert);
    *out = gt->data;
    return 0;
}

// A 3-D expert tensor of shape {cols, rows, n_expert}.
static int bind_experts(struct model *m, struct engine_experts *x, const char *name, int64_t cols,
                        int64_t rows, int64_t n_expert, struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    if (!gt)
        return err_set(e, ERR_FORMAT, "missing tensor %s", name);
    if (gt->n_dims != 3 || gt->ne[0] != cols || gt->ne[1] != rows || gt->ne[2] != n_expert)
        return err_set(e, ERR_FORMAT,
                       "tensor %s has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                       (long long)gt->ne[0], (long long)gt->ne[1], (long long)gt->ne[2],
                       (long long)cols, (long long)rows, (long long)n_expert);
    int rc = engine_experts_from_gguf(x, gt, e);
    if (rc < 0)
        return rc;
    x->all.name = NULL;
    return 0;
}

// What every MoE layer of a file shares: the expert counts and width, and
// the routing weights' renormalisation and scale.
struct moe_shape {
    uint32_t n_expert, n_used, n_ff_exp;
    bool per_layer;  // expert_feed_forward_length per layer: each layer's tensors say
    bool norm_w;
    float w_scale;
};

static int read_moe_shape(struct model *m, const struct model_moe_spec *spec, struct moe_shape *out,
                          struct err *e)
{
    uint32_t n_expert = 0, n_used = 0, n_ff_exp = 0;
    if (!gguf_get_arch_u32(m->g, "expert_count", &n_expert) || n_expert == 0)
        return err_set(e, ERR_FORMAT, "missing or invalid key expert_count");
    if (!gguf_get_arch_u32(m->g, "expert_used_count", &n_used) || n_used == 0)
        return err_set(e, ERR_FORMAT, "missing or invalid key expert_used_count");
    if (n_expert > 4096 || n_used > n_expert || n_used > 256)
        return err_set(e, ERR_FORMAT, "invalid expert counts: %u used of %u", n_used, n_expert);
    if (spec->n_group > 1 &&
        (spec->n_group > 256 || n_expert % (uint32_t)spec->n_group != 0 ||
         n_expert / (uint32_t)spec->n_group < 2 || spec->n_group_used < 1 ||
         (uint64_t)spec->n_group_used * (n_expert / (uint32_t)spec->n_group) < n_used))
        return err_set(e, ERR_FORMAT, "invalid expert groups: %d (%d used) of %u experts",
                       spec->n_group, spec->n_group_used, n_expert);
    int rc;
    if ((rc = expert_width(m, spec, &n_ff_exp, e)) < 0)
        return rc;
    if (n_ff_exp == 0 || n_ff_exp > (1u << 22))
        return err_set(e, ERR_FORMAT, "invalid expert_feed_forward_length %u", n_ff_exp);
    // Routing weights as the file says (nemotron-h, granite): renormalised
    // or not, and scaled.
    bool norm_w = spec->norm_w;
    float w_scale = spec->w_scale;
    if (spec->weight_keys) {
        char key[128];
        gguf_get_bool(m->g, model_key(m, key, sizeof key, "expert_weights_norm"), &norm_w);
        gguf_get_arch_f32(m->g, "expert_weights_scale", &w_scale);
        if (!isfinite(w_scale))
            return err_set(e, ERR_FORMAT, "invalid expert_weights_scale");
    }
    // A per-layer expert_feed_forward_length (qwen35moe may have one): each
    // layer's experts take their own tensors' shape.
    char fkey[128];
    const struct gguf_kv *fkv =
        gguf_find(m->g, model_key(m, fkey, sizeof fkey, "expert_feed_forward_length"));
    *out = (struct moe_shape){n_expert, n_used, n_ff_exp, fkv && fkv->val.type == GGUF_VAL_ARRAY,
                              norm_w,   w_scale};
    return 0;
}

// Binds layer il's router, experts, biases and shared expert (layer.ext).
static int bind_moe_layer(struct model *m, const struct model_moe_spec *spec,
                          const struct moe_shape *sh, int il, struct err *e)
{
    const int64_t E = sh->n_expert, D = m->hp.n_embd;
    int rc;
    struct model_layer *L = &m->layers[il];
    struct model_moe_layer *X = xcalloc(1, sizeof *X);
    L->ext = X;
    char n[GGUF_MAX_NAME_LEN + 1];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    int64_t F = sh->n_ff_exp;
    const struct gguf_tensor *up = gguf_tensor_find(m->g, NAME("ffn_up_exps.weight"));
    if (sh->per_layer && up && up->ne[1] >= 1 && up->ne[1] <= (1 << 22))
        F = up->ne[1];
    // ffn_gate_up_exps (gemma4 from Ollama or llama.cpp): one tensor,
    // each expert's gate rows then its up rows.
    const bool fused =
        !spec->no_gate && !up && gguf_tensor_find(m->g, NAME("ffn_gate_up_exps.weight")) != NULL;
    if ((rc = model_bind_matrix(m, &X->gate_inp, NAME("ffn_gate_inp.weight"), D, E, true, e)) < 0 ||
        (rc = model_bind_vector(m, &X->gate_inp_b, NAME("ffn_gate_inp.bias"), E, spec->biases, e)) <
            0 ||
        (rc = model_bind_vector(m, &X->sel_bias, NAME("exp_probs_b.bias"), E, spec->sel_bias, e)) <
            0 ||
        (!spec->no_gate && !fused &&
         (rc = bind_experts(m, &X->gate, NAME("ffn_gate_exps.weight"), D, F, E, e)) < 0) ||
        (!fused && (rc = bind_experts(m, &X->up, NAME("ffn_up_exps.weight"), D, F, E, e)) < 0) ||
        (fused &&
         (rc = bind_experts(m, &X->up, NAME("ffn_gate_up_exps.weight"), D, 2 * F, E, e)) < 0) ||
        (rc = bind_experts(m, &X->down, NAME("ffn_down_exps.weight"), F, D, E, e)) < 0)
        return rc;
    if (spec->biases &&
        ((rc = bind_expert_bias(m, &X->gate_b, NAME("ffn_gate_exps.bias"), F, E, true, e)) < 0 ||
         (rc = bind_expert_bias(m, &X->up_b, NAME("ffn_up_exps.bias"), F, E, true, e)) < 0 ||
         (rc = bind_expert_bias(m, &X->down_b, NAME("ffn_down_exps.bias"), D, E, true, e)) < 0))
        return rc;
#undef NAME
    X->p = (struct engine_moe){
        .n_expert = (int)E,
        .n_expert_used = (int)sh->n_used,
        .gating = spec->gating,
        .norm_w = sh->norm_w,
        .w_scale = sh->w_scale,
        .sel_bias = X->sel_bias,
        .act = spec->act,
        .oai_alpha = 1.702f,  // llama.cpp build_moe_ffn, LLM_FFN_SWIGLU_OAI_MOE
        .oai_limit = 7.0f,
        .gate_inp = &X->gate_inp,
        .gate_inp_b = X->gate_inp_b,
        .gate = spec->no_gate || fused ? NULL : &X->gate,
        .up = &X->up,
        .fused_gate_up = fused,
        .down = &X->down,
        .gate_b = X->gate_b,
        .up_b = X->up_b,
        .down_b = X->down_b,
        .n_group = spec->n_group,
        .n_group_used = spec->n_group_used,
        .w_input = spec->w_input,
    };
    if ((spec->shared || spec->shared_gated) && (rc = bind_shared(m, spec, il, X, e)) < 0)
        return rc;
    if (spec->exp_scale && (rc = bind_exp_scale(m, il, X, E, e)) < 0)
        return rc;
    return 0;
}

int model_bind_moe(struct model *m, const struct model_moe_spec *spec, struct err *e)
{
    struct moe_shape sh;
    int rc = read_moe_shape(m, spec, &sh, e);
    for (int il = 0; rc >= 0 && il < m->hp.n_layer; il++)
        if (il >= spec->first_layer && has_moe(m, spec, il))
            rc = bind_moe_layer(m, spec, &sh, il, e);
    return rc < 0 ? rc : 0;
}

size_t model_moe_interleavable(struct model *m, int il, struct engine_tensor **out)
{
    struct model_moe_layer *X = m->layers[il].ext;
    size_t n = 0;
    struct engine_experts *xs[3] = {X ? &X->gate : NULL, X ? &X->up : NULL, X ? &X->down : NULL};
    for (int i = 0; i < 3; i++)
        if (xs[i] && xs[i]->all.data && engine_experts_interleavable(xs[i]))
            out[n++] = &xs[i]->all;
    return n;
}

void model_ffn_moe_or_dense(struct model *m, struct model_layer *L, float *out, const float *in,
                            int n)
{
    if (L->ext)
        model_ffn_moe(m, L, out, in, n);
    else
        model_dense_ffn(m, L, out, in, n);
}

void model_ffn_moe(struct model *m, struct model_layer *L, float *out, const float *in, int n)
{
    const struct model_moe_layer *X = L->ext;
    engine_moe(m->be, out, in, n, &X->p);
}

void model_ffn_moe_routed(struct model *m, struct model_layer *L, float *out, const float *in,
                          const float *router_in, int n)
{
    const struct model_moe_layer *X = L->ext;
    struct engine_moe p = X->p;
    p.router_x = router_in;
    engine_moe(m->be, out, in, n, &p);
}

int model_prepare_moe(struct model *m, struct err *e)
{
    const struct model_moe_layer *X = first_moe_layer(m);
    return X ? engine_moe_reserve(m->be, m->opts.n_batch, &X->p, e) : 0;
}

uint64_t model_moe_scratch_bytes(const struct model *m, int n_batch)
{
    const struct model_moe_layer *X = first_moe_layer(m);
    if (!X)
        return 0;
    const struct engine_moe *p = &X->p;
    // Per (token, expert) pair: the input row, gate and up rows, the hidden
    // row converted, the down result; per token the router logits. Sized for
    // F32 activations (the widest vec_dot_type) plus alignment.
    // A shared expert is one more pair per token, its hidden rows as wide
    // as the widest of the experts' and its own.
    uint64_t pairs = (uint64_t)n_batch * (uint64_t)(p->n_expert_used + (p->sh_up ? 1 : 0));
    uint64_t n_embd = (uint64_t)m->hp.n_embd, n_ff = (uint64_t)p->up->rows;
    if (p->sh_up && (uint64_t)p->sh_up->ne[1] > n_ff)
        n_ff = (uint64_t)p->sh_up->ne[1];  // a wider shared expert
    return pairs * (n_embd * 8 + n_ff * 12 + 16) + (uint64_t)n_batch * (uint64_t)p->n_expert * 4 +
           (uint64_t)p->n_expert * 40 + 16 * 64;
}

uint64_t model_moe_experts_bytes(const struct model *m)
{
    uint64_t n = 0;
    for (size_t i = 0; i < gguf_tensor_count(m->g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(m->g, i);
        if (t->n_dims == 3 && str_ends_with(t->name, "_exps.weight"))
            n += t->n_bytes;
    }
    return n;
}

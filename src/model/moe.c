// The mixture-of-experts FFN of decoder families (qwen3moe, gpt-oss): binds
// each layer's router and 3-D expert tensors (used in place from the
// mapping, every expert resident) and runs the engine's MoE op as the
// decoder block's FFN hook. A family describes its MoE with a
// struct model_moe_spec (gating, renormalisation, activation, biases).
#include "model/internal.h"

#include <stdlib.h>
#include <string.h>

// A layer's MoE data (model_layer.ext).
struct model_moe_layer {
    struct engine_tensor gate_inp;  // [n_embd, n_expert]
    const float *gate_inp_b;        // [n_expert] or NULL
    struct engine_experts gate, up, down;
    const float *gate_b, *up_b, *down_b;  // [n_expert × n_ff_exp] ... or NULL
    struct engine_tensor sh_gate, sh_up, sh_down;  // shared expert (spec.shared_gated)
    const float *sh_gate_inp;                      // [n_embd]
    struct engine_moe p;
};

// The gated shared expert of a layer (struct model_moe_spec.shared_gated).
static int bind_shared_gated(struct model *m, struct model_moe_layer *X, int il, struct err *e)
{
    const int64_t D = m->hp.n_embd;
    uint32_t v = 0;
    int64_t F = gguf_get_arch_u32(m->g, "expert_shared_feed_forward_length", &v) && v > 0
                    ? (int64_t)v
                    : m->layers[il].n_ff;
    if (F < 1 || F > (1 << 22))
        return err_set(e, ERR_FORMAT, "invalid expert_shared_feed_forward_length");
    char n[GGUF_MAX_NAME_LEN + 1];
    int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_matrix(m, &X->sh_gate, NAME("ffn_gate_shexp.weight"), D, F, true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &X->sh_up, NAME("ffn_up_shexp.weight"), D, F, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &X->sh_down, NAME("ffn_down_shexp.weight"), F, D, true, e)) <
            0 ||
        (rc = model_bind_vector(m, &X->sh_gate_inp, NAME("ffn_gate_inp_shexp.weight"), D, true,
                                e)) < 0)
        return rc;
#undef NAME
    X->p.sh_gate = &X->sh_gate;
    X->p.sh_up = &X->sh_up;
    X->p.sh_down = &X->sh_down;
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

int model_bind_moe(struct model *m, const struct model_moe_spec *spec, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    uint32_t n_expert = 0, n_used = 0, n_ff_exp = 0;
    if (!gguf_get_arch_u32(m->g, "expert_count", &n_expert) || n_expert == 0)
        return err_set(e, ERR_FORMAT, "missing or invalid key expert_count");
    if (!gguf_get_arch_u32(m->g, "expert_used_count", &n_used) || n_used == 0)
        return err_set(e, ERR_FORMAT, "missing or invalid key expert_used_count");
    if (n_expert > 4096 || n_used > n_expert || n_used > 256)
        return err_set(e, ERR_FORMAT, "invalid expert counts: %u used of %u", n_used, n_expert);
    // n_ff of one expert: the key, else (Ollama's gpt-oss files) the shape of
    // ffn_gate_exps / ffn_up_exps, as Ollama's loader recovers it; a
    // per-layer array (qwen35moe may have one): each layer's shape.
    char fkey[128];
    const struct gguf_kv *fkv =
        gguf_find(m->g, model_key(m, fkey, sizeof fkey, "expert_feed_forward_length"));
    const bool per_layer = fkv && fkv->val.type == GGUF_VAL_ARRAY;
    if (!gguf_get_arch_u32(m->g, "expert_feed_forward_length", &n_ff_exp) || n_ff_exp == 0) {
        const struct gguf_tensor *gt = gguf_tensor_find(m->g, "blk.0.ffn_up_exps.weight");
        if (!gt || gt->ne[1] < 1 || gt->ne[1] > (1 << 22))
            return err_set(e, ERR_FORMAT, "missing key expert_feed_forward_length");
        n_ff_exp = (uint32_t)gt->ne[1];
    }
    if (n_ff_exp > (1u << 22))
        return err_set(e, ERR_FORMAT, "invalid expert_feed_forward_length %u", n_ff_exp);
    const int64_t E = n_expert, D = hp->n_embd;
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct model_moe_layer *X = xcalloc(1, sizeof *X);
        L->ext = X;
        char n[GGUF_MAX_NAME_LEN + 1];
        int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        int64_t F = n_ff_exp;
        const struct gguf_tensor *up = gguf_tensor_find(m->g, NAME("ffn_up_exps.weight"));
        if (per_layer && up && up->ne[1] >= 1 && up->ne[1] <= (1 << 22))
            F = up->ne[1];
        if ((rc = model_bind_matrix(m, &X->gate_inp, NAME("ffn_gate_inp.weight"), D, E, true, e)) <
                0 ||
            (rc = model_bind_vector(m, &X->gate_inp_b, NAME("ffn_gate_inp.bias"), E, spec->biases,
                                    e)) < 0 ||
            (rc = bind_experts(m, &X->gate, NAME("ffn_gate_exps.weight"), D, F, E, e)) < 0 ||
            (rc = bind_experts(m, &X->up, NAME("ffn_up_exps.weight"), D, F, E, e)) < 0 ||
            (rc = bind_experts(m, &X->down, NAME("ffn_down_exps.weight"), F, D, E, e)) < 0)
            return rc;
        if (spec->biases &&
            ((rc = bind_expert_bias(m, &X->gate_b, NAME("ffn_gate_exps.bias"), F, E, true, e)) <
                 0 ||
             (rc = bind_expert_bias(m, &X->up_b, NAME("ffn_up_exps.bias"), F, E, true, e)) < 0 ||
             (rc = bind_expert_bias(m, &X->down_b, NAME("ffn_down_exps.bias"), D, E, true, e)) < 0))
            return rc;
#undef NAME
        X->p = (struct engine_moe){
            .n_expert = (int)E,
            .n_expert_used = (int)n_used,
            .gating = spec->gating,
            .norm_w = spec->norm_w,
            .act = spec->act,
            .oai_alpha = 1.702f,  // llama.cpp build_moe_ffn, LLM_FFN_SWIGLU_OAI_MOE
            .oai_limit = 7.0f,
            .gate_inp = &X->gate_inp,
            .gate_inp_b = X->gate_inp_b,
            .gate = &X->gate,
            .up = &X->up,
            .down = &X->down,
            .gate_b = X->gate_b,
            .up_b = X->up_b,
            .down_b = X->down_b,
        };
        if (spec->shared_gated && (rc = bind_shared_gated(m, X, il, e)) < 0)
            return rc;
    }
    return 0;
}

void model_ffn_moe(struct model *m, struct model_layer *L, float *out, const float *in, int n)
{
    const struct model_moe_layer *X = L->ext;
    engine_moe(m->be, out, in, n, &X->p);
}

int model_prepare_moe(struct model *m, struct err *e)
{
    const struct model_moe_layer *X = m->layers[0].ext;
    return engine_moe_reserve(m->be, m->opts.n_batch, &X->p, e);
}

uint64_t model_moe_scratch_bytes(const struct model *m, int n_batch)
{
    if (m->arch->ffn != model_ffn_moe || !m->layers || !m->layers[0].ext)
        return 0;
    const struct engine_moe *p = &((const struct model_moe_layer *)m->layers[0].ext)->p;
    // Per (token, expert) pair: the input row, gate and up rows, the hidden
    // row converted, the down result; per token the router logits. Sized for
    // F32 activations (the widest vec_dot_type) plus alignment.
    uint64_t pairs = (uint64_t)n_batch * (uint64_t)p->n_expert_used;
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

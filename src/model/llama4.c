// The llama4 architecture, text part (Llama 4 Scout / Maverick;
// docs/spec/architectures.md §12.9, llama.cpp src/models/llama4.cpp): llama's
// block (consecutive-pair RoPE, optional rope_freqs) with
//   - every interleave_moe_layer_step-th layer ((il + 1) % step == 0) a
//     mixture of experts routed the Llama 4 way (σ of the chosen raw logit
//     scales the expert's input, outputs summed unweighted) plus a shared
//     SwiGLU expert; the other layers a dense SwiGLU;
//   - every fourth layer without RoPE; there the queries of position p are
//     multiplied by 1 + 0.1 · ln(floor((p + 1) / 8192) + 1);
//   - the RoPE layers RMS-normalise q and k per head (no weight) after RoPE
//     (not in the 128-expert model) and attend in chunks of 8192 positions
//     (a query sees its own chunk only); the NoPE layers are global.
// A file with attention.sliding_window 0 turns chunking and the
// temperature off, and then (as llama.cpp) only the last layer has no RoPE.
// Ollama's files embed the vision tower (v.*, mm.*), which is not bound.
#include "model/internal.h"

#define LLAMA4_CHUNK 8192  // llama.cpp's fixed chunk (and temperature floor)

// Test hook: the chunk and temperature floor of the next llama4 load (0: 8192).
int model_llama4_test_chunk;

static int llama4_load(struct model *m, struct err *e)
{
    (void)e;
    struct model_hparams *hp = &m->hp;
    uint32_t swa = 1;
    const bool has_swa = gguf_get_arch_u32(m->g, "attention.sliding_window", &swa);
    if (has_swa && swa == 0) {
        for (int il = 0; il < hp->n_layer; il++)
            m->layers[il].rope = il == hp->n_layer - 1 ? NULL : &hp->rope;
        return 0;
    }
    const int chunk = model_llama4_test_chunk > 0 ? model_llama4_test_chunk : LLAMA4_CHUNK;
    hp->attn_temp_scale = 0.1f;
    hp->attn_temp_offset = 1.0f;
    hp->attn_temp_floor = chunk;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].chunk = m->layers[il].rope ? chunk : 0;
    return 0;
}

static int llama4_bind(struct model *m, struct err *e)
{
    const struct model_hparams *hp = &m->hp;
    uint32_t step = 0, n_expert = 0;
    if (!gguf_get_arch_u32(m->g, "interleave_moe_layer_step", &step) || step == 0 ||
        step > (uint32_t)hp->n_layer)
        return err_set(e, ERR_FORMAT, "missing or invalid key interleave_moe_layer_step");
    gguf_get_arch_u32(m->g, "expert_count", &n_expert);
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        L->qk_rms = L->rope && n_expert != 128;  // not in Maverick (128 experts)
        if ((il + 1) % (int)step == 0)
            continue;
        char n[GGUF_MAX_NAME_LEN + 1];
        int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = model_bind_matrix(m, &L->w_gate, NAME("ffn_gate.weight"), hp->n_embd, L->n_ff,
                                    true, e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_up, NAME("ffn_up.weight"), hp->n_embd, L->n_ff, true,
                                    e)) < 0 ||
            (rc = model_bind_matrix(m, &L->w_down, NAME("ffn_down.weight"), L->n_ff, hp->n_embd,
                                    true, e)) < 0)
            return rc;
#undef NAME
    }
    const struct model_moe_spec spec = {
        .gating = ENGINE_MOE_SIGMOID,  // top-k of σ(l) is top-k of l
        .act = ENGINE_MOE_SILU,
        .shared = true,
        .moe_step = (int)step,
        .w_input = true,
    };
    return model_bind_moe(m, &spec, e);
}

const struct model_arch model_arch_llama4 = {
    .name = "llama4",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .rope_freqs = true,
    .nope_step = 4,
    .attn_temp_nope = true,
    .act = MODEL_ACT_SILU,
    .load = llama4_load,
    .bind = llama4_bind,
    .ffn = model_ffn_moe_or_dense,
    .prepare = model_prepare_moe,
};

// The qwen3vl architecture (Qwen3-VL's text model): qwen3's block (per-head
// RMSNorm of Q and K before RoPE, no biases) with interleaved M-RoPE
// (rope.dimension_sections used as imrope: rotary pair j turns by the
// time, height or width position as j mod 3 says, while j < 3 × that
// section) and deepstack: an image row from the projector is n_embd ·
// (1 + n_deepstack_layers) wide; its first n_embd floats are the input
// embedding, slice k + 1 is added to the row's hidden state after layer k
// (k < n_deepstack_layers). Text rows get nothing added, as llama.cpp pads
// token embeddings with zeros.
#include "model/internal.h"

#include <string.h>

// Ollama's published files have no M-RoPE sections; llama/compat gives
// them Qwen3-VL's [24, 20, 20, 0] (head_dim 128: 64 rotary pairs).
static int default_sections(struct model *m, struct err *e)
{
    static const int def[4] = {24, 20, 20, 0};
    if (m->hp.rope.n_rot < 2 * (def[0] + def[1] + def[2]))
        return err_set(e, ERR_FORMAT, "%s: missing rope.dimension_sections", m->arch->name);
    memcpy(m->hp.rope.sections, def, sizeof def);
    return 0;
}

static bool has_key(struct model *m, const char *suffix)
{
    char key[128];
    return gguf_find(m->g, model_key(m, key, sizeof key, suffix)) != NULL;
}

static int qwen3vl_load(struct model *m, struct err *e)
{
    int rc = has_key(m, "rope.dimension_sections") || has_key(m, "rope.mrope_section")
                 ? model_mrope_load(m, e)
                 : default_sections(m, e);
    if (rc < 0)
        return rc;
    m->hp.rope.imrope = true;
    m->hp.rope_swa = m->hp.rope;
    // n_deepstack_layers, or (Ollama's files) the length of the tower's
    // deepstack_visual_indexes.
    uint32_t n_ds = 0;
    char key[128], idx_key[128];
    model_key(m, key, sizeof key, "n_deepstack_layers");
    model_key(m, idx_key, sizeof idx_key, "vision.deepstack_visual_indexes");
    enum gguf_value_type et;
    uint64_t n_idx = 0;
    if (!gguf_get_u32(m->g, key, &n_ds) && gguf_get_arr(m->g, idx_key, &et, &n_idx))
        n_ds = n_idx > 64 ? 64 : (uint32_t)n_idx;
    // The deepstack slices are added before the last layer picks its
    // output rows, so they must end before it.
    if (n_ds >= (uint32_t)m->hp.n_layer)
        return err_set(e, ERR_FORMAT, "%s: %u deepstack layers in a model of %d layers", key, n_ds,
                       m->hp.n_layer);
    m->hp.n_deepstack = (int)n_ds;
    return 0;
}

// x[r] += slice k + 1 of the input row, for the rows that come from image
// embeddings (through xb, free after the FFN block).
void model_add_deepstack(struct model *m, const struct model_ubatch *ub, int k)
{
    const int n_embd = m->hp.n_embd;
    const size_t width = (size_t)n_embd * (1 + m->hp.n_deepstack);
    for (int r = 0; r < ub->n; r++) {
        if (!ub->from_embd[r])
            continue;
        float *x = m->s.x + (size_t)r * n_embd, *xb = m->s.xb + (size_t)r * n_embd;
        engine_buf_write(m->be, xb, ub->embd + (size_t)r * width + (size_t)(k + 1) * n_embd,
                         sizeof(float) * n_embd);
        engine_add(m->be, x, x, xb, n_embd);
    }
}

const struct model_arch model_arch_qwen3vl = {
    .name = "qwen3vl",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qk_norm = true,
    .act = MODEL_ACT_SILU,
    .load = qwen3vl_load,
};

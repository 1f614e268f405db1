// The mistral3 architecture, text part (Ministral 3, Mistral Small 3.x;
// llama.cpp src/models/mistral3.cpp): llama's block with head_dim from
// attention.key_length (q wider than n_embd), YaRN RoPE whose attention
// factor follows rope.scaling.yarn_log_multiplier, and Llama-4-style
// attention temperature: with attention.temperature_scale s the queries at
// position p are multiplied by 1 + s · ln(floor(p / n_orig) + 1), n_orig the
// YaRN original context.
//
// Files that Ollama's converter wrote name the keys otherwise
// (llama/compat/llama-ollama-compat.cpp): rope.scaling.beta_fast /
// beta_slow, rope.scaling.mscale_all_dim and rope.scaling_beta for the
// temperature; both spellings are read. Their embedded vision tensors
// (v.*, mm.*) are not bound.
#include "model/internal.h"

#include <math.h>

// A float under its llama.cpp name, else under Ollama's.
static bool get_f32_either(struct model *m, const char *name, const char *ollama, float *out)
{
    return gguf_get_arch_f32(m->g, name, out) || gguf_get_arch_f32(m->g, ollama, out);
}

// YaRN's magnitude scale of a context factor (llama.cpp's get_mscale).
static float yarn_mscale(float factor, float mscale)
{
    return factor <= 1.0f ? 1.0f : 0.1f * mscale * logf(factor) + 1.0f;
}

static int mistral3_load(struct model *m, struct err *e)
{
    struct model_hparams *hp = &m->hp;
    struct engine_rope *rp = &hp->rope;
    get_f32_either(m, "rope.scaling.yarn_beta_fast", "rope.scaling.beta_fast", &rp->beta_fast);
    get_f32_either(m, "rope.scaling.yarn_beta_slow", "rope.scaling.beta_slow", &rp->beta_slow);
    float log_mul = 0;
    get_f32_either(m, "rope.scaling.yarn_log_multiplier", "rope.scaling.mscale_all_dim", &log_mul);
    if (rp->ext_factor != 0.0f && log_mul != 0.0f) {
        // llama.cpp's attention factor is mscale(f, 1) / mscale(f, log_mul),
        // and the RoPE op multiplies by 1 + 0.1 ln f again: cancel that.
        float f = 1.0f / rp->freq_scale;
        rp->attn_factor *= yarn_mscale(f, 1.0f) / yarn_mscale(f, log_mul) / (1.0f + 0.1f * logf(f));
    }
    hp->rope_swa = *rp;
    get_f32_either(m, "attention.temperature_scale", "rope.scaling_beta", &hp->attn_temp_scale);
    if (!isfinite(hp->attn_temp_scale) || !isfinite(rp->attn_factor))
        return err_set(e, ERR_FORMAT, "invalid attention temperature or YaRN parameters");
    hp->attn_temp_floor = rp->n_ctx_orig;
    if (hp->attn_temp_scale != 0.0f && hp->attn_temp_floor < 1)
        return err_set(e, ERR_FORMAT, "attention temperature without an original context");
    return 0;
}

const struct model_arch model_arch_mistral3 = {
    .name = "mistral3",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .rope_freqs = true,
    .act = MODEL_ACT_SILU,
    .load = mistral3_load,
};

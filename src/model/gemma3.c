// The gemma3 architecture, text part (Gemma 3 270M/1B/4B/12B/27B;
// docs/spec/architectures.md §6): gemma2's block without attention soft-capping,
// with per-head Q/K RMSNorm, 5 sliding-window layers to 1 global (pattern
// 6), local layers on RoPE base 10000 unscaled, global ones on the file's
// base and linear scaling. The final soft-cap is off unless the file says.
//
// Files that Ollama's converter wrote load too: RoPE bases under
// rope.global/local.freq_base (arch.c reads both spellings), no epsilon
// (1e-6), no scaling keys (x8 when the training context is 128k, as the
// models that need it have), the vision tower's v.* / mm.* tensors and
// gemma3.vision.* keys (ignored here: nothing binds them).
#include "model/internal.h"

static int gemma3_load(struct model *m, struct err *e)
{
    float f;
    char key[128];
    if (gguf_tensor_find(m->g, "dense.0.weight")) {  // Ollama's EmbeddingGemma
        m->arch = &model_arch_gemma_embd_gemma3;
        m->hp.attn_softcap = 0;
        return model_gemb_check(m, e);
    }
    m->hp.attn_softcap = 0;  // gemma3 has none, whatever the file says
    bool ollama = !gguf_get_arch_f32(m->g, "attention.layer_norm_rms_epsilon", &f) ||
                  gguf_find(m->g, model_key(m, key, sizeof key, "rope.global.freq_base")) ||
                  gguf_find(m->g, model_key(m, key, sizeof key, "mm.tokens_per_image"));
    if (!ollama)
        return model_gemma_query_scale(m, e);
    if (!gguf_get_arch_f32(m->g, "rope.scaling.factor", &f) &&
        !gguf_find(m->g, model_key(m, key, sizeof key, "rope.scaling.type")) &&
        m->hp.n_ctx_train >= 131072)
        m->hp.rope.freq_scale = 1.0f / 8.0f;
    // Ollama's engine never soft-caps the 1B model's logits (26 layers),
    // whatever its file stores.
    if (m->hp.n_layer == 26)
        m->hp.final_softcap = 0;
    return model_gemma_query_scale(m, e);
}

const struct model_arch model_arch_gemma3 = {
    .name = "gemma3",
    .rope_mode = ENGINE_ROPE_NEOX,
    .default_eps = 1e-6f,
    .embd_scale = true,
    .q_prescale = true,
    .swa_pattern = 6,
    .swa_freq_base = 10000.0f,
    .swa_unscaled = true,
    .softcaps = true,  // the final one only (see gemma3_load)
    .qk_norm = true,
    .post_norms = true,
    .act = MODEL_ACT_GELU,
    .load = gemma3_load,
};

// The gpt-oss architecture (gpt-oss-20b / 120b; llama.cpp
// src/models/openai-moe-iswa.cpp): pre-norm blocks with biases on Q/K/V/O,
// NeoX RoPE with YaRN scaling, a learned attention sink per head, sliding
// window attention on even layers (pattern 2), and a mixture-of-experts FFN
// after `post_attention_norm` (llama.cpp's name for the FFN norm): experts
// chosen by router logit (+ bias), weighted by a softmax over the chosen
// logits, each a clamped SwiGLU (ggml_swiglu_oai: alpha 1.702, limit 7)
// with biases on gate, up and down.
//
// Two rows: llama.cpp's files ("gpt-oss") and those Ollama's converter
// wrote ("gptoss", docs/spec/architectures.md §11): attn_out, ffn_norm,
// attn_sinks without .weight, no expert_feed_forward_length (taken from the
// experts' shape), no rope.scaling.type (YaRN implied); their tokenizer gets
// the gpt-4o pre-tokenizer (tokenizer/vocab.c).
#include "model/internal.h"

#include <string.h>

// Ollama's files leave out rope.scaling.type: gpt-oss is always YaRN.
static int gpt_oss_load(struct model *m, struct err *e)
{
    char key[128];
    (void)e;
    if (!gguf_find(m->g, model_key(m, key, sizeof key, "rope.scaling.type"))) {
        m->hp.rope.ext_factor = 1.0f;
        m->hp.rope_swa.ext_factor = 1.0f;
    }
    return 0;
}

static int gpt_oss_bind(struct model *m, struct err *e)
{
    static const struct model_moe_spec spec = {
        .gating = ENGINE_MOE_SOFTMAX_WEIGHT,
        .act = ENGINE_MOE_SWIGLU_OAI,
        .biases = true,
    };
    bool ollama = strcmp(m->arch->name, "gptoss") == 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        char n[GGUF_MAX_NAME_LEN + 1];
        snprintf(n, sizeof n, ollama ? "blk.%d.attn_sinks" : "blk.%d.attn_sinks.weight", il);
        int rc = model_bind_vector(m, &m->layers[il].sinks, n, m->hp.n_head, true, e);
        if (rc < 0)
            return rc;
    }
    return model_bind_moe(m, &spec, e);
}

const struct model_arch model_arch_gpt_oss = {
    .name = "gpt-oss",
    .rope_mode = ENGINE_ROPE_NEOX,
    .swa_pattern = 2,
    .qkv_bias = true,
    .act = MODEL_ACT_SILU,
    .names = {.ffn_norm = "post_attention_norm"},
    .load = gpt_oss_load,
    .bind = gpt_oss_bind,
    .ffn = model_ffn_moe,
    .prepare = model_prepare_moe,
};

const struct model_arch model_arch_gptoss = {
    .name = "gptoss",
    .rope_mode = ENGINE_ROPE_NEOX,
    .swa_pattern = 2,
    .qkv_bias = true,
    .act = MODEL_ACT_SILU,
    .names = {.attn_output = "attn_out"},
    .load = gpt_oss_load,
    .bind = gpt_oss_bind,
    .ffn = model_ffn_moe,
    .prepare = model_prepare_moe,
};

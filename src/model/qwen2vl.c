// The qwen2vl architecture (Qwen2-VL, Qwen2.5-VL; Ollama's files say
// qwen25vl): qwen2's block with M-RoPE. Each token has three positions
// (time, height, width; a text token has all three equal to its position)
// and each head's rotary pairs are split into sections turning by one of
// them (rope.dimension_sections, Ollama's rope.mrope_section). The image
// rows' positions come from the batch (model_batch.rope_pos).
#include "model/internal.h"

// Reads the sections (3 or 4 integers) under either key name (also
// qwen3vl.c's).
int model_mrope_load(struct model *m, struct err *e)
{
    static const char *const keys[] = {"rope.dimension_sections", "rope.mrope_section"};
    char key[128];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const struct gguf_kv *kv = gguf_find(m->g, model_key(m, key, sizeof key, keys[k]));
        enum gguf_value_type t;
        uint64_t n;
        if (!kv || !gguf_get_arr(m->g, key, &t, &n))
            continue;
        if (n < 3 || n > 4)
            return err_set(e, ERR_FORMAT, "%s: expected 3 or 4 sections, got %llu", key,
                           (unsigned long long)n);
        int sum = 0;
        for (uint64_t i = 0; i < n; i++) {
            int64_t v;
            if (!gguf_arr_i64(kv, i, &v) || v < 0 || v > 4096)
                return err_set(e, ERR_FORMAT, "%s: bad section", key);
            m->hp.rope.sections[i] = (int)v;
            sum += (int)v;
        }
        if (sum == 0 || 2 * sum > m->hp.rope.n_rot)
            return err_set(e, ERR_FORMAT, "%s: sections cover %d pairs, the head rotates %d", key,
                           sum, m->hp.rope.n_rot / 2);
        m->hp.rope_swa = m->hp.rope;
        return 0;
    }
    return err_set(e, ERR_FORMAT, "%s: missing rope.dimension_sections", m->arch->name);
}

const struct model_arch model_arch_qwen2vl = {
    .name = "qwen2vl",
    .alias = "qwen25vl",
    .rope_mode = ENGINE_ROPE_NEOX,
    .qkv_bias = true,
    .act = MODEL_ACT_SILU,
    .load = model_mrope_load,
};

// The llama architecture (Llama 2/3/3.x, Mistral, TinyLlama, SmolLM, ...;
// spec/architectures.md §2): pre-norm decoder blocks with RMSNorm, GQA
// attention with RoPE on adjacent pairs (rope_freqs factors for Llama 3.1+),
// a SwiGLU MLP, and an output matrix that may be tied to the embeddings.
#include "model/internal.h"

static int llama_load(struct model *m, struct err *e)
{
    uint32_t n_expert = 0;
    if (gguf_get_arch_u32(m->g, "expert_count", &n_expert) && n_expert > 0)
        return err_set(e, ERR_UNSUPPORTED, "llama: mixture-of-experts models are not supported");
    return 0;
}

const struct model_arch model_arch_llama = {
    .name = "llama",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .rope_freqs = true,
    .act = MODEL_ACT_SILU,
    .load = llama_load,
};

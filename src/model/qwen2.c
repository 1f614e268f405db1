// The qwen2 architecture (Qwen2, Qwen2.5, Qwen2.5-Coder, DeepSeek-R1 distills
// of Qwen; spec/architectures.md §3): llama's block with NeoX RoPE (dims i
// and i + head_dim/2 rotate together) and biases on the Q/K/V projections,
// usually with tied output. The forward pass is llama's (llama.c), which
// adds the biases when the file has them.
#include "model/internal.h"

static int qwen2_load(struct model *m, struct err *e)
{
    int rc = model_read_hparams(m, ENGINE_ROPE_NEOX, e);
    if (rc < 0)
        return rc;
    rc = model_bind_llama_tensors(m, e);
    if (rc < 0)
        return rc;
    for (int il = 0; il < m->hp.n_layer; il++) {
        if (!m->layers[il].bq || !m->layers[il].bk || !m->layers[il].bv)
            return err_set(e, ERR_FORMAT, "qwen2: layer %d lacks attn_q/k/v.bias", il);
    }
    return 0;
}

const struct model_arch model_arch_qwen2 = {
    .name = "qwen2",
    .load = qwen2_load,
    .forward = model_forward_llama,
};

// The smollm3 architecture (SmolLM3; docs/spec/architectures.md §12.11): llama's
// block (§2) except that every fourth layer ((il + 1) % 4 == 0) applies no
// RoPE to its queries and keys (a fixed step, not a key of the file).
#include "model/internal.h"

const struct model_arch model_arch_smollm3 = {
    .name = "smollm3",
    .rope_mode = ENGINE_ROPE_NORMAL,
    .rope_full = true,
    .nope_step = 4,
    .act = MODEL_ACT_SILU,
};

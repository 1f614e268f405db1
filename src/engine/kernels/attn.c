// Picks the attention tile kernels (kernels/attn.h) for an ISA.
#include "engine/kernels/attn.h"

#include <stddef.h>

const struct kernels_attn *kernels_attn_get_isa(enum kernels_isa isa)
{
    if (!kernels_isa_supported(isa))
        return NULL;
    switch (isa) {
#if defined(__x86_64__) || defined(_M_X64)
    case KERNELS_ISA_AVX512:
        return &kernels_attn_avx512;
    case KERNELS_ISA_AVX2:
        return &kernels_attn_avx2;
#endif
    default:
        return &kernels_attn_generic;
    }
}

const struct kernels_attn *kernels_attn_get(void)
{
    return kernels_attn_get_isa(kernels_best_isa());
}

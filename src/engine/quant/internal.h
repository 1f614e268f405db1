// engine/quant internals: the per-type row functions the traits table
// points at, and the IQ4_NL value table.
#pragma once

#include <stdint.h>

extern const int8_t quant_iq4nl_values[16];

#define QUANT_ROW_FNS(t)                                                                           \
    void quant_##t##_to_float(const void *x, float *y, int64_t n);                                 \
    void quant_##t##_from_float(const float *x, void *y, int64_t n);

QUANT_ROW_FNS(f32)
QUANT_ROW_FNS(f16)
QUANT_ROW_FNS(bf16)
QUANT_ROW_FNS(q4_0)
QUANT_ROW_FNS(q4_1)
QUANT_ROW_FNS(q5_0)
QUANT_ROW_FNS(q5_1)
QUANT_ROW_FNS(q8_0)
QUANT_ROW_FNS(q8_1)
QUANT_ROW_FNS(q2_k)
QUANT_ROW_FNS(q3_k)
QUANT_ROW_FNS(q4_k)
QUANT_ROW_FNS(q5_k)
QUANT_ROW_FNS(q6_k)
QUANT_ROW_FNS(q8_k)
void quant_iq4_nl_to_float(const void *x, float *y, int64_t n);
void quant_iq4_xs_to_float(const void *x, float *y, int64_t n);

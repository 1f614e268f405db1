// engine/quant internals: the per-type row functions the traits table
// points at, and the IQ4_NL value table.
#pragma once

#include <stdint.h>

#include "engine/quant/quant.h"

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
void quant_mxfp4_to_float(const void *x, float *y, int64_t n);
void quant_tq1_0_to_float(const void *x, float *y, int64_t n);
void quant_tq2_0_to_float(const void *x, float *y, int64_t n);
void quant_iq2_xxs_to_float(const void *x, float *y, int64_t n);
void quant_iq2_xs_to_float(const void *x, float *y, int64_t n);
void quant_iq2_s_to_float(const void *x, float *y, int64_t n);
void quant_iq3_xxs_to_float(const void *x, float *y, int64_t n);
void quant_iq3_s_to_float(const void *x, float *y, int64_t n);
void quant_iq1_s_to_float(const void *x, float *y, int64_t n);
void quant_iq1_m_to_float(const void *x, float *y, int64_t n);
// The element of largest magnitude (its sign kept; the first one on ties;
// 0 when all are 0). The reference quantizers' scale anchor.
float quant_signed_absmax(const float *x, int n);
int quant_tq1_digit(uint8_t byte, int n);
void quant_tq1_0_values(const struct block_tq1_0 *b, int8_t q[QK_K]);
void quant_iq2_xxs_decode(const void *b, struct quant_iq_block *o);
void quant_iq2_xs_decode(const void *b, struct quant_iq_block *o);
void quant_iq2_s_decode(const void *b, struct quant_iq_block *o);
void quant_iq3_xxs_decode(const void *b, struct quant_iq_block *o);
void quant_iq3_s_decode(const void *b, struct quant_iq_block *o);
void quant_iq1_s_decode(const void *b, struct quant_iq_block *o);
void quant_iq1_m_decode(const void *b, struct quant_iq_block *o);
void quant_iq4_xs_decode(const void *b, struct quant_iq_block *o);
void quant_tq1_0_decode(const void *b, struct quant_iq_block *o);
void quant_tq2_0_decode(const void *b, struct quant_iq_block *o);

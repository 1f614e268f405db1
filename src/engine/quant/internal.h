// engine/quant internals: helpers the format files share.
#pragma once

#include <stdint.h>

#include "engine/quant/quant.h"

// The element of largest magnitude (its sign kept; the first one on ties;
// 0 when all are 0). The reference quantizers' scale anchor.
float quant_signed_absmax(const float *x, int n);
int quant_tq1_digit(uint8_t byte, int n);
void quant_tq1_0_values(const struct block_tq1_0 *b, int8_t q[QK_K]);

// gguf module internals shared between reader.c, summary.c and writer.c.
#pragma once

#include "gguf/gguf.h"

// Decodes a fixed-size scalar of value type `type` stored at p.
void gguf_decode_scalar(uint32_t type, const uint8_t *p, struct gguf_value *v);

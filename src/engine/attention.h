// engine/attention.h: the CPU attention op (attention.c), shared with the
// CPU backend (cpu.c). Not part of the engine's public interface.
#pragma once

#include "engine/engine.h"

// Scratch the op keeps between calls (grown on the caller thread, never
// inside the pool). Zero-initialise; engine_attn_ws_free releases it.
struct engine_attn_ws {
    float *buf;  // per-thread tiles
    size_t buf_floats;
    float *parts;  // partial softmax states of split key ranges
    size_t parts_floats;
    float *scores;  // F16 caches: the first pass's scores, kept for the second
    size_t scores_floats;
    void *sets, *items, *merges;  // work lists
    size_t sets_cap, items_cap, merges_cap;
};

void engine_attn_ws_free(struct engine_attn_ws *ws);

// The attention op of engine_backend_ops on host memory, split across the
// pool's n_threads (n_threads == 1 or small work: the caller thread alone).
void engine_attention_cpu(struct engine_pool *pool, int n_threads, struct engine_attn_ws *ws,
                          float *out, const float *q, int64_t n_rows,
                          const struct engine_kv_layer *kv, const int32_t *cell0,
                          const int32_t *n_visible, const struct engine_attn *a);

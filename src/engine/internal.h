// engine internals shared between the engine's files (engine.c, cpu.c, moe.c).
#pragma once

#include "engine/engine.h"

// n bytes (not zeroed; free with free), 64-byte aligned; from 2 MiB on,
// 2 MiB aligned and offered to transparent huge pages (interleaved weights
// and the K/V cache are streamed whole: fewer first-touch faults and TLB
// misses). NULL when out of memory.
void *engine_alloc_pages(size_t n);

// Scratch of the CPU mixture-of-experts op, grown on demand (the backend is
// used by one caller thread at a time, so one per backend suffices).
struct engine_moe_ws {
    void *buf;
    size_t cap;
};

void engine_moe_ws_free(struct engine_moe_ws *ws);

// Grows ws for batches of up to max_rows rows of p (ERR_NOMEM).
int engine_cpu_moe_reserve(struct engine_moe_ws *ws, int64_t max_rows, const struct engine_moe *p,
                           struct err *e);
// The CPU backend's MoE op over its pool (moe.c).
void engine_cpu_moe(struct engine_pool *pool, int n_threads, struct engine_moe_ws *ws, float *y,
                    const float *x, int64_t n_rows, const struct engine_moe *p);

// The CPU backend's recurrent-layer ops over its pool (recurrent.c).
void engine_cpu_conv1d(struct engine_pool *pool, float *y, const float *x, int64_t n_rows,
                       const struct engine_conv1d *p, float *state, const int32_t *slot,
                       const int32_t *pos);
void engine_cpu_delta_net(struct engine_pool *pool, float *o, const float *q, const float *k,
                          const float *v, const float *g, const float *beta, int64_t n_rows,
                          const struct engine_delta_net *p, float *state, const int32_t *slot,
                          const int32_t *pos);
void engine_cpu_ssm_scan(struct engine_pool *pool, float *y, const float *x, const float *dt,
                         const float *B, const float *C, int64_t n_rows,
                         const struct engine_ssm_scan *p, float *state, const int32_t *slot,
                         const int32_t *pos);

// Adds the LoRA terms of job->w (w->lora, in order) to job->y for the
// n_rows rows of x the product just read (lora.c).
void engine_lora_apply(struct engine_backend *be, const struct engine_matmul_job *job,
                       const float *x, int64_t n_rows);

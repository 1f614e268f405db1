// bench_attention: times the engine's attention op on a filled KV cache, as
// one layer of a model sees it: ROWS query rows at positions DEPTH..DEPTH+ROWS-1
// of one slot (1 row: a decode step; 512: a prompt ubatch on top of DEPTH
// tokens). Each of N_LAYER layers has its own cache, called in turn as a
// model would (so the caches come from memory, not from the last call's
// cache lines). Prints ms per call (wall and CPU), GFLOP/s
// (4·keys·heads·head_dim per row) and the time of N_LAYER such calls.
//
//   bench_attention [-d 4096] [-r 1] [-t 2] [--heads 32] [--kv-heads 8]
//                   [--head-dim 64] [--kv f16|f32|q8_0|q4_0] [--layers 16] [-n REPS]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/engine.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int arg_int(const char *s)
{
    int64_t v;
    struct err e = {0};
    if (str_to_i64(s, 1, 1 << 24, &v, &e) < 0) {
        fprintf(stderr, "bench_attention: %s: %s\n", s, e.msg);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    int depth = 4096, n_rows = 1, n_threads = 2, n_head = 32, n_head_kv = 8, hd = 64;
    int n_layer = 16, reps = 0;
    uint32_t type = GGUF_TYPE_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            goto usage;
        if (!strcmp(a, "-d"))
            depth = arg_int(argv[++i]);
        else if (!strcmp(a, "-r"))
            n_rows = arg_int(argv[++i]);
        else if (!strcmp(a, "-t"))
            n_threads = arg_int(argv[++i]);
        else if (!strcmp(a, "--heads"))
            n_head = arg_int(argv[++i]);
        else if (!strcmp(a, "--kv-heads"))
            n_head_kv = arg_int(argv[++i]);
        else if (!strcmp(a, "--head-dim"))
            hd = arg_int(argv[++i]);
        else if (!strcmp(a, "--layers"))
            n_layer = arg_int(argv[++i]);
        else if (!strcmp(a, "-n"))
            reps = arg_int(argv[++i]);
        else if (!strcmp(a, "--kv")) {
            const char *t = argv[++i];
            type = !strcmp(t, "f32")    ? GGUF_TYPE_F32
                   : !strcmp(t, "q8_0") ? GGUF_TYPE_Q8_0
                   : !strcmp(t, "q4_0") ? GGUF_TYPE_Q4_0
                   : !strcmp(t, "f16")  ? GGUF_TYPE_F16
                                        : UINT32_MAX;
            if (type == UINT32_MAX)
                goto usage;
        } else
            goto usage;
    }
    if (n_head % n_head_kv != 0 ||
        ((type == GGUF_TYPE_Q8_0 || type == GGUF_TYPE_Q4_0) && hd % 32 != 0))
        goto usage;

    struct engine_backend *be;
    struct err e = {0};
    if (engine_cpu_new(&be, n_threads, &e) < 0 ||
        engine_reserve(be, n_rows, (int64_t)n_head * hd, depth + n_rows, &e) < 0) {
        fprintf(stderr, "bench_attention: %s\n", e.msg);
        return 1;
    }
    const int kv_dim = n_head_kv * hd, n_cells = depth + n_rows, q_dim = n_head * hd;
    // One cache per layer, used in turn: like a model's, their bytes come
    // from memory, not from the last call's cache lines.
    struct engine_kv_layer *kvs = xcalloc((size_t)n_layer, sizeof *kvs);
    for (int l = 0; l < n_layer; l++) {
        kvs[l].row_bytes = engine_kv_row_bytes(type, kv_dim);
        kvs[l].k = engine_buf_alloc(be, kvs[l].row_bytes * (size_t)n_cells);
        kvs[l].v = engine_buf_alloc(be, kvs[l].row_bytes * (size_t)n_cells);
    }
    float *rows = xmalloc((size_t)512 * kv_dim * sizeof(float));
    int32_t cells[512];
    uint32_t seed = 1;
    for (int i = 0; i < 512 * kv_dim; i++) {
        seed = seed * 1664525u + 1013904223u;
        rows[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    for (int c0 = 0; c0 < n_cells; c0 += 512) {
        int n = n_cells - c0 < 512 ? n_cells - c0 : 512;
        for (int i = 0; i < n; i++)
            cells[i] = c0 + i;
        for (int l = 0; l < n_layer; l++)
            engine_kv_store(be, &kvs[l], type, cells, rows, rows, n, kv_dim);
    }
    float *q = engine_buf_alloc(be, (size_t)n_rows * q_dim * sizeof(float));
    float *out = engine_buf_alloc(be, (size_t)n_rows * q_dim * sizeof(float));
    for (int i = 0; i < n_rows * q_dim; i++)
        q[i] = rows[i % (512 * kv_dim)] * 4.0f;
    int32_t *cell0 = xcalloc((size_t)n_rows, sizeof(int32_t)),
            *nvis = xcalloc((size_t)n_rows, sizeof(int32_t));
    double flops = 0;
    for (int r = 0; r < n_rows; r++) {
        nvis[r] = depth + r + 1;
        flops += 4.0 * nvis[r] * n_head * hd;
    }
    struct engine_attn a = {n_head, n_head_kv, hd, 1.0f / sqrtf((float)hd), type};
    engine_attention(be, out, q, n_rows, &kvs[0], cell0, nvis, &a);  // warm-up
    if (reps == 0)
        reps = n_rows > 1 ? 3 : 30;
    double t0 = now_s(), c0 = cpu_s();
    for (int i = 0; i < reps; i++)
        for (int l = 0; l < n_layer; l++)
            engine_attention(be, out, q, n_rows, &kvs[l], cell0, nvis, &a);
    double wall = (now_s() - t0) / reps / n_layer, cpu = (cpu_s() - c0) / reps / n_layer;
    printf("depth %d, %d row(s), heads %d/%d, head_dim %d, %d thread(s): %.3f ms/call "
           "(CPU %.3f ms), %.1f GFLOP/s; %d layers: %.1f ms\n",
           depth, n_rows, n_head, n_head_kv, hd, n_threads, wall * 1e3, cpu * 1e3,
           flops / wall / 1e9, n_layer, wall * n_layer * 1e3);
    engine_buf_free(be, q), engine_buf_free(be, out);
    for (int l = 0; l < n_layer; l++)
        engine_buf_free(be, kvs[l].k), engine_buf_free(be, kvs[l].v);
    free(kvs);
    engine_backend_free(be);
    free(rows), free(cell0), free(nvis);
    return 0;
usage:
    fprintf(stderr,
            "usage: bench_attention [-d DEPTH] [-r ROWS] [-t THREADS] [--heads N] "
            "[--kv-heads N] [--head-dim N] [--kv f16|f32|q8_0|q4_0] [--layers N] [-n REPS]\n");
    return 2;
}

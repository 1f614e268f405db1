// bench_kernels: single-thread throughput of the matrix kernels per weight
// type and ISA.
//   decode: one activation column against a weight matrix larger than the
//           last-level cache (vec_dot row by row): GB/s of weights streamed;
//           and the same through the gemm tile with one column;
//   prompt: 128 activation columns against a cache-resident weight block
//           (the gemm tile, or vec_dot per pair where a type has none).
// Each figure is the best of repeated passes (the machine may be shared).
// Usage: bench_kernels [-t TYPE[,TYPE...]] [-i ISA] [-s SECONDS_PER_CASE]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

static const struct {
    const char *name;
    uint32_t type;
    int block, off_d, off_m;  // f16 scale fields inside a block (-1: none; MXFP4: E8M0 byte 0)
} types[] = {
    {"F32", GGUF_TYPE_F32, 1, -1, -1},          {"F16", GGUF_TYPE_F16, 1, -1, -1},
    {"BF16", GGUF_TYPE_BF16, 1, -1, -1},        {"Q4_0", GGUF_TYPE_Q4_0, 32, 0, -1},
    {"Q4_1", GGUF_TYPE_Q4_1, 32, 0, 2},         {"Q5_0", GGUF_TYPE_Q5_0, 32, 0, -1},
    {"Q5_1", GGUF_TYPE_Q5_1, 32, 0, 2},         {"Q8_0", GGUF_TYPE_Q8_0, 32, 0, -1},
    {"Q2_K", GGUF_TYPE_Q2_K, 256, 80, 82},      {"Q3_K", GGUF_TYPE_Q3_K, 256, 108, -1},
    {"Q4_K", GGUF_TYPE_Q4_K, 256, 0, 2},        {"Q5_K", GGUF_TYPE_Q5_K, 256, 0, 2},
    {"Q6_K", GGUF_TYPE_Q6_K, 256, 208, -1},     {"IQ2_XXS", GGUF_TYPE_IQ2_XXS, 256, 0, -1},
    {"IQ2_XS", GGUF_TYPE_IQ2_XS, 256, 0, -1},   {"IQ2_S", GGUF_TYPE_IQ2_S, 256, 0, -1},
    {"IQ3_XXS", GGUF_TYPE_IQ3_XXS, 256, 0, -1}, {"IQ3_S", GGUF_TYPE_IQ3_S, 256, 0, -1},
    {"IQ1_S", GGUF_TYPE_IQ1_S, 256, 0, -1},     {"IQ4_NL", GGUF_TYPE_IQ4_NL, 32, 0, -1},
    {"IQ4_XS", GGUF_TYPE_IQ4_XS, 256, 0, -1},   {"TQ1_0", GGUF_TYPE_TQ1_0, 256, 52, -1},
    {"TQ2_0", GGUF_TYPE_TQ2_0, 256, 64, -1},    {"MXFP4", GGUF_TYPE_MXFP4, 32, -1, -1},
};
#define N_TYPES (sizeof(types) / sizeof(types[0]))

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float rndf(void)
{
    return (float)(rnd() & 0xFFFF) / 32768.0f - 1.0f;
}

// Random weights with sane scales (so no inf / nan / subnormal slow paths).
static void fill_weights(size_t ti, uint8_t *p, int64_t rows, int64_t k)
{
    const uint32_t type = types[ti].type;
    const size_t row = quant_row_size(type, k), total = row * (size_t)rows;
    if (type == GGUF_TYPE_F32) {
        for (size_t i = 0; i < total / 4; i++)
            ((float *)p)[i] = rndf();
        return;
    }
    if (type == GGUF_TYPE_F16 || type == GGUF_TYPE_BF16) {
        for (size_t i = 0; i < total / 2; i++)
            ((uint16_t *)p)[i] =
                type == GGUF_TYPE_F16 ? quant_f32_to_f16(rndf()) : quant_f32_to_bf16(rndf());
        return;
    }
    for (size_t i = 0; i < total; i++)
        p[i] = (uint8_t)rnd();
    const size_t bb = quant_row_size(type, types[ti].block);
    for (size_t b = 0; b < total / bb; b++) {
        if (type == GGUF_TYPE_MXFP4) {  // E8M0 scale byte: 2^-8 .. 2^-1
            p[b * bb] = (uint8_t)(119 + rnd() % 8);
            continue;
        }
        uint16_t h = quant_f32_to_f16(0.01f * rndf());
        memcpy(p + b * bb + types[ti].off_d, &h, 2);
        if (types[ti].off_m >= 0)
            memcpy(p + b * bb + types[ti].off_m, &h, 2);
    }
}

// decode: K x ROWS_DEC sized to ~48 MiB of weights (beyond the LLC; -m 1
// keeps them in L2 to compare kernels' compute on a busy machine);
// prompt: K x 64 rows x 128 columns
enum { K = 2048, NCOL = 128, PROWS = 64 };

// One type and ISA's buffers, and what to time with them.
struct bench_run {
    const struct kernels_type *k;
    const uint8_t *w, *xq;
    uint8_t *wx;   // the interleaved rows (gemm_x8) or NULL
    uint8_t *wdx;  // the decode rows interleaved (gemm_x8) or NULL
    float *out;
    size_t row, xrow;
    int64_t drows;
};

enum run_kind {
    RUN_DECODE,        // vec_dot over every decode row
    RUN_DECODE_GEMM1,  // the gemm tile with one column (rows share the activation loads)
    RUN_PROMPT,        // PROWS (cache-resident) rows x NCOL columns
    RUN_PROMPT_X8,     // the same through the interleaved layout
    RUN_BATCH8,        // 8 columns over the decode rows (8 decode streams), 64-row chunks
};

static void run_once(const struct bench_run *b, enum run_kind kind)
{
    const struct kernels_type *k = b->k;
    switch (kind) {
    case RUN_DECODE:
        for (int64_t r = 0; r < b->drows; r++)
            k->vec_dot(K, &b->out[r % 8192], b->w + b->row * (size_t)r, b->xq);
        break;
    case RUN_DECODE_GEMM1:
        for (int64_t r = 0; r < b->drows; r += 8192) {
            int nr = b->drows - r < 8192 ? (int)(b->drows - r) : 8192;
            k->gemm(K, b->out, 8192, b->w + b->row * (size_t)r, b->row, b->xq, b->xrow, nr, 1);
        }
        break;
    case RUN_PROMPT:
        if (k->gemm) {
            k->gemm(K, b->out, PROWS, b->w, b->row, b->xq, b->xrow, PROWS, NCOL);
            break;
        }
        for (int c = 0; c < NCOL; c++)
            for (int r = 0; r < PROWS; r++)
                k->vec_dot(K, &b->out[c * PROWS + r], b->w + b->row * r, b->xq + b->xrow * c);
        break;
    case RUN_PROMPT_X8:
        k->gemm_x8(K, b->out, PROWS, b->wx, b->row, b->xq, b->xrow, PROWS, NCOL);
        break;
    case RUN_BATCH8:
        // as the engine hands a batch's rows out: chunks of 64 rows, each
        // through the interleaved product where the type has one
        for (int64_t r = 0; r + 64 <= b->drows; r += 64) {
            const uint8_t *wr = (b->wdx ? b->wdx : b->w) + b->row * (size_t)r;
            (b->wdx ? k->gemm_x8 : k->gemm)(K, b->out + (r % 8192), 8192, wr, b->row, b->xq,
                                            b->xrow, 64, 8);
        }
        break;
    }
}

// The best pass of several within secs seconds: the machine is shared, so
// the minimum is the figure least disturbed by other load.
static double best_time(const struct bench_run *b, enum run_kind kind, double secs)
{
    double best = 1e30, t0 = now_s();
    do {
        double t1 = now_s();
        run_once(b, kind);
        double dt = now_s() - t1;
        best = dt < best ? dt : best;
    } while (now_s() - t0 < secs);
    return best;
}

struct bench_opts {
    const char *only_types;
    int only_isa;
    double secs;
    unsigned dec_mib;
};

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            o->only_types = argv[++i];
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            const char *want = argv[++i];
            for (int j = 0; j < KERNELS_ISA_COUNT_; j++)
                if (!strcmp(want, kernels_isa_name((enum kernels_isa)j)))
                    o->only_isa = j;
            if (o->only_isa < 0) {
                fprintf(stderr, "unknown isa %s\n", want);
                return -1;
            }
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            o->secs = atof(argv[++i]);
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            o->dec_mib = (unsigned)atoi(argv[++i]);
            if (o->dec_mib < 1 || o->dec_mib > 1024) {
                fprintf(stderr, "-m: 1 to 1024 MiB\n");
                return -1;
            }
        } else {
            fprintf(stderr,
                    "usage: %s [-t TYPE[,TYPE]] [-i scalar|avx2|avx512|neon] [-s SEC] [-m MIB]\n",
                    argv[0]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {.only_isa = -1, .secs = 0.15, .dec_mib = 48};
    if (parse_args(argc, argv, &o) < 0)
        return 2;
    const char *only_types = o.only_types;
    const int only_isa = o.only_isa;
    const double secs = o.secs;
    const unsigned dec_mib = o.dec_mib;
    float *xf = malloc((size_t)K * NCOL * sizeof(float));
    float *out = malloc((size_t)8192 * 2 * NCOL * sizeof(float));
    for (int i = 0; i < K * NCOL; i++)
        xf[i] = rndf();
    printf("%-5s %-7s %10s %9s %10s %10s   %-6s %5s %10s\n", "type", "isa", "decode", "", "decode",
           "prompt", "", "", "8 streams");
    printf("%-5s %-7s %10s %9s %10s %10s   %-6s %5s %10s\n", "", "", "vec_dot", "", "gemm nc=1",
           "gemm", "", "", "gemm nc=8");
    printf("%-5s %-7s %10s %9s %10s %10s   %-6s %5s %10s\n", "", "", "GB/s", "GFLOP/s", "GB/s",
           "GFLOP/s", "kernel", "tile", "GB/s");
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        if (only_types && !strstr(only_types, types[ti].name))
            continue;
        const uint32_t type = types[ti].type;
        const size_t row = quant_row_size(type, K);
        const int64_t drows = (int64_t)(((size_t)dec_mib << 20) / row);
        uint8_t *w = malloc(row * (size_t)drows);
        fill_weights(ti, w, drows, K);
        for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
            if (only_isa >= 0 && isa != only_isa)
                continue;
            const struct kernels_type *k = kernels_get_isa(type, (enum kernels_isa)isa);
            if (!k)
                continue;
            const size_t xrow = kernels_row_size(k->vec_dot_type, K);
            uint8_t *xq = malloc(xrow * NCOL);
            for (int c = 0; c < NCOL; c++)
                k->from_float(xf + (size_t)c * K, xq + xrow * c, K);

            struct bench_run br = {
                .k = k, .w = w, .xq = xq, .out = out, .row = row, .xrow = xrow, .drows = drows};
            const double dbytes = (double)row * (double)drows;
            double best = best_time(&br, RUN_DECODE, secs);
            double dec_gbs = dbytes / best / 1e9;
            double dec_gflops = 2.0 * K * (double)drows / best / 1e9;
            double dec1_gbs = k->gemm ? dbytes / best_time(&br, RUN_DECODE_GEMM1, secs) / 1e9 : 0.0;
            double pp_gflops = 2.0 * K * PROWS * NCOL / best_time(&br, RUN_PROMPT, secs) / 1e9;
            char tile[16] = "-";
            if (k->gemm)
                snprintf(tile, sizeof(tile), "%dx%d", k->gemm_nr, k->gemm_nc);
            // the interleaved layout (the engine's prompt path where a type has one)
            br.wx = k->gemm_x8 ? malloc(row * PROWS) : NULL;
            if (br.wx && kernels_interleave_x8(type, br.wx, w, PROWS, K)) {
                pp_gflops = 2.0 * K * PROWS * NCOL / best_time(&br, RUN_PROMPT_X8, secs) / 1e9;
                snprintf(tile, sizeof(tile), "x8");
            }
            free(br.wx);
            // 8 streams' step: the decode rows (beyond the LLC) times 8
            // columns, in the layout the engine would use; GB/s of weights.
            br.wdx = k->gemm_x8 ? malloc(row * (size_t)drows) : NULL;
            if (br.wdx && !kernels_interleave_x8(type, br.wdx, w, drows / 8 * 8, K)) {
                free(br.wdx);
                br.wdx = NULL;
            }
            double b8_gbs =
                k->gemm || br.wdx ? dbytes / best_time(&br, RUN_BATCH8, secs) / 1e9 : 0.0;
            free(br.wdx);
            br.wdx = NULL;
            printf("%-7s %-7s %10.2f %9.2f %10.2f %10.2f   %-6s %5s %10.2f\n", types[ti].name,
                   kernels_isa_name((enum kernels_isa)isa), dec_gbs, dec_gflops, dec1_gbs,
                   pp_gflops, k->gemm ? "gemm" : "vecdot", tile, b8_gbs);
            fflush(stdout);
            free(xq);
        }
        free(w);
    }
    free(xf);
    free(out);
    return 0;
}

// bench_vision: times encodes of an 896 x 896 picture (a synthetic
// gradient) with a projector file, after WARMUP encodes (default 1; the
// first also allocates the activations), and reports the fastest and the
// median run and the peak resident memory.
//   bench_vision MMPROJ [THREADS] [RUNS] [WARMUP]
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "vision/vision.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_vision MMPROJ [THREADS] [RUNS] [WARMUP]\n");
        return 2;
    }
    int n_threads = argc > 2 ? atoi(argv[2]) : 0, runs = argc > 3 ? atoi(argv[3]) : 3;
    int warmup = argc > 4 ? atoi(argv[4]) : 1;
    if (runs < 1 || runs > 100 || warmup < 0 || warmup > 10) {
        fprintf(stderr, "bench_vision: RUNS 1..100, WARMUP 0..10\n");
        return 2;
    }
    struct err e = {0};
    struct vision_model *vm = NULL;
    double t0 = now_s();
    if (vision_model_load(&vm, argv[1], n_threads, &e) < 0) {
        fprintf(stderr, "error: %s\n", e.msg);
        return 1;
    }
    double t_load = now_s() - t0;
    struct vision_image img = {896, 896, malloc(896 * 896 * 3)};
    for (int i = 0; i < 896 * 896 * 3; i++)
        img.rgb[i] = (unsigned char)((i / 3 % 896 + i / 3 / 896 + (i % 3) * 80) & 255);
    int n_tok = vision_model_n_tokens(vm, 896, 896), n_embd = vision_model_n_embd(vm);
    float *out = malloc(sizeof(float) * (size_t)n_tok * n_embd);
    double times[100];
    for (int r = 0; r < warmup + runs; r++) {
        t0 = now_s();
        if (vision_encode(vm, &img, out, &e) < 0) {
            fprintf(stderr, "error: %s\n", e.msg);
            return 1;
        }
        if (r >= warmup)
            times[r - warmup] = now_s() - t0;
    }
    qsort(times, (size_t)runs, sizeof times[0], cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("projector %s: load %.2f s, encode 896x896 -> %d tokens x %d, %d runs after %d "
           "warm-up: min %.3f s, median %.3f s, peak RSS %.0f MB\n",
           vision_model_projector(vm), t_load, n_tok, n_embd, runs, warmup, times[0],
           runs % 2 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2,
           (double)ru.ru_maxrss / 1024.0);
    free(out);
    free(img.rgb);
    vision_model_free(vm);
    return 0;
}

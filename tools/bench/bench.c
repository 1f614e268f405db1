// bench: prompt processing and generation speed of the engine, like
// llama-bench: pp<P> evaluates P tokens in one batch, tg<N> generates N
// tokens one at a time from an empty context, and with -B S, tg<N>xS
// generates N tokens in each of S sequences decoded together, one batch of
// S tokens per step (the runner's continuous batching; t/s counts every
// sequence's tokens). With -d DEPTH (llama-bench's -d), both run after DEPTH
// tokens already in the cache: the slot is filled once (not timed) and every
// run starts again at position DEPTH ("pp512 @ d4096", "tg32 @ d4096").
// Each test runs once to warm up and then -r times. Prints a Markdown table
// (mean ± sd tokens/s, peak RSS) or, with -o json, an array of objects.
//
//   bench MODEL.gguf [-t THREADS] [-p 128] [-n 32] [-d 0] [-B S] [-r 3] [-o md|json]
//                    [--mapped-weights]   (no interleaved Q4_0 copies: A/B)
//                    [--lora ADAPTER.gguf]... (LoRA adapters applied on the fly)
//                    [--lora-merge]       (... merged into copies of the weights: A/B)
//   bench --membw [-t THREADS]     read bandwidth of a 1 GiB buffer
//   bench --fma [-t THREADS]       fp32 multiply-add rate of each thread (256-, 512-bit)
//
// The Markdown output also gives the bytes of weights a generated token
// reads (every matrix once; the embedding table only when it is the output)
// and, with --membw-gbs, generation as a fraction of the bandwidth limit.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "gguf/gguf.h"
#include "model/model.h"

static void usage(void)
{
    fprintf(stderr, "usage: bench MODEL.gguf [-t THREADS] [-p 128] [-n 32] [-d DEPTH] [-B S] "
                    "[-r 3] "
                    "[-o md|json] [--mapped-weights] [--lora ADAPTER.gguf]... [--lora-merge] "
                    "[--kv f16|f32|q8_0|q4_0] [-c N_CTX] [--kv-full] [--membw-gbs GBS]\n"
                    "       bench --membw [-t THREADS]\n"
                    "       bench --fma [-t THREADS]\n");
    exit(2);
}

static int int_arg(const char *s, int min, int max)
{
    int64_t v;
    struct err e = {0};
    if (str_to_i64(s, min, max, &v, &e) < 0) {
        fprintf(stderr, "bench: %s: %s\n", s, e.msg);
        exit(2);
    }
    return (int)v;
}

static uint64_t peak_rss_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024u;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const struct err *e)
{
    fprintf(stderr, "bench: %s\n", e->msg);
    exit(1);
}

// Fills n random tokens from position p0 of slot 0 into buf/pos/slot.
static void random_tokens(const struct model *m, int n, int p0, int32_t *buf, int32_t *pos,
                          int32_t *slot)
{
    int n_vocab = model_n_vocab(m);
    uint32_t seed = 12345u + (uint32_t)p0;
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        buf[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
        pos[i] = p0 + i;
        slot[i] = 0;
    }
}

// Puts `depth` tokens into slot 0 (untimed), so that the runs after it
// start at position depth. Returns the seconds it took.
static double fill_depth(struct model *m, int depth)
{
    struct err e = {0};
    model_slot_clear(m, 0);
    if (depth == 0)
        return 0;
    int32_t *buf = xcalloc((size_t)depth * 3, sizeof(int32_t));
    random_tokens(m, depth, 0, buf, buf + depth, buf + 2 * depth);
    double t0 = now_s();
    struct model_batch b = {depth, buf, buf + depth, buf + 2 * depth, NULL};
    if (model_decode(m, &b, &e) < 0)
        die(&e);
    free(buf);
    return now_s() - t0;
}

// Drops everything after the first `depth` tokens of slot 0.
static void rewind_to(struct model *m, int depth)
{
    if (depth == 0)
        model_slot_clear(m, 0);
    else
        model_slot_reuse_prefix(m, 0, model_slot_tokens(m, 0), depth + 1);
}

// One timed run: returns tokens/s.
static double run_pp(struct model *m, int n_prompt, int depth, int32_t *buf, int32_t *pos,
                     int32_t *slot)
{
    struct err e = {0};
    random_tokens(m, n_prompt, depth, buf, pos, slot);
    rewind_to(m, depth);
    double t0 = now_s();
    struct model_batch b = {n_prompt, buf, pos, slot, NULL};
    if (model_decode(m, &b, &e) < 0)
        die(&e);
    return n_prompt / (now_s() - t0);
}

static double run_tg(struct model *m, int n_gen, int depth)
{
    struct err e = {0};
    int n_vocab = model_n_vocab(m);
    int32_t tok = 1 % n_vocab, slot = 0;
    rewind_to(m, depth);
    double t0 = now_s();
    for (int i = 0; i < n_gen; i++) {
        int32_t p = depth + i;
        struct model_batch b = {1, &tok, &p, &slot, NULL};
        if (model_decode(m, &b, &e) < 0)
            die(&e);
        const float *lg = model_logits(m, 0);
        int best = 0;
        for (int k = 1; k < n_vocab; k++)
            if (lg[k] > lg[best])
                best = k;
        tok = best;
    }
    return n_gen / (now_s() - t0);
}

// S sequences generate n_gen tokens each, one batch of S tokens per step
// (greedy, every row wants logits). Returns tokens/s over all sequences.
static double run_tg_batch(struct model *m, int n_gen, int n_seq)
{
    struct err e = {0};
    int n_vocab = model_n_vocab(m);
    int32_t tok[64], pos[64], slot[64];
    bool want[64];
    for (int s = 0; s < n_seq; s++) {
        model_slot_clear(m, s);
        tok[s] = (1 + s) % n_vocab;  // distinct sequences
        slot[s] = s;
        want[s] = true;
    }
    double t0 = now_s();
    for (int i = 0; i < n_gen; i++) {
        for (int s = 0; s < n_seq; s++)
            pos[s] = i;
        struct model_batch b = {n_seq, tok, pos, slot, want};
        if (model_decode(m, &b, &e) < 0)
            die(&e);
        for (int s = 0; s < n_seq; s++) {
            const float *lg = model_logits(m, s);
            int best = 0;
            for (int k = 1; k < n_vocab; k++)
                if (lg[k] > lg[best])
                    best = k;
            tok[s] = best;
        }
    }
    return (double)n_gen * n_seq / (now_s() - t0);
}

// ---------------------------------------------------------------------------
// Memory bandwidth: each thread sums its share of a 1 GiB buffer.

struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *bw_thread(void *p)
{
    struct bw_arg *a = p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= a->n; i += 4) {
        s0 += a->p[i];
        s1 += a->p[i + 1];
        s2 += a->p[i + 2];
        s3 += a->p[i + 3];
    }
    a->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static double measure_bw(int n_threads)
{
    const size_t bytes = (size_t)1 << 30, n = bytes / 8;
    uint64_t *buf = xmalloc(bytes);
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[64];
        struct bw_arg args[64];
        int nt = n_threads > 64 ? 64 : n_threads;
        double t0 = now_s();
        for (int t = 0; t < nt; t++) {
            args[t] = (struct bw_arg){buf + n / nt * t, n / nt, 0};
            pthread_create(&th[t], NULL, bw_thread, &args[t]);
        }
        uint64_t sum = 0;
        for (int t = 0; t < nt; t++) {
            pthread_join(th[t], NULL);
            sum += args[t].sum;
        }
        double gbs = bytes / (now_s() - t0) / 1e9;
        if (gbs > best && sum != 1)
            best = gbs;
    }
    free(buf);
    return best;
}

// ---------------------------------------------------------------------------
// Arithmetic: each thread runs a chain-free loop of float multiply-adds on
// registers only, 8 lanes wide. On a VM whose vCPUs the host sometimes puts
// on one physical core, two threads then get about half each: run this
// before and after a two-thread measurement to know which machine it saw.

struct fma_arg {
    double gflops;
    float check;  // the chains' sum, so that they are computed
};

#if defined(__x86_64__)
// One thread's chains at one vector width: V the vector type, P the
// intrinsic prefix, W the lanes. 12 independent chains: more than the FMA
// units' latency x throughput; the empty asm keeps them in registers.
#define FMA4(P, a, b, c, d)                                                                        \
    a = P##_fmadd_ps(a, m, k), b = P##_fmadd_ps(b, m, k), c = P##_fmadd_ps(c, m, k),               \
    d = P##_fmadd_ps(d, m, k)
#define FMA_THREAD(name, isa, V, P, W)                                                             \
    __attribute__((target(isa))) static void *name(void *p)                                        \
    {                                                                                              \
        V a0 = P##_set1_ps(1.00f), a1 = P##_set1_ps(1.01f), a2 = P##_set1_ps(1.02f),               \
          a3 = P##_set1_ps(1.03f), a4 = P##_set1_ps(1.04f), a5 = P##_set1_ps(1.05f),               \
          a6 = P##_set1_ps(1.06f), a7 = P##_set1_ps(1.07f), a8 = P##_set1_ps(1.08f),               \
          a9 = P##_set1_ps(1.09f), a10 = P##_set1_ps(1.10f), a11 = P##_set1_ps(1.11f);             \
        const V m = P##_set1_ps(0.999999f), k = P##_set1_ps(1e-7f);                                \
        const long n = 40000000;                                                                   \
        double t0 = now_s();                                                                       \
        for (long i = 0; i < n; i++) {                                                             \
            FMA4(P, a0, a1, a2, a3);                                                               \
            FMA4(P, a4, a5, a6, a7);                                                               \
            FMA4(P, a8, a9, a10, a11);                                                             \
            __asm__ volatile(""                                                                    \
                             : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),         \
                               "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));      \
        }                                                                                          \
        double dt = now_s() - t0;                                                                  \
        V s = P##_add_ps(P##_add_ps(P##_add_ps(a0, a1), P##_add_ps(a2, a3)),                       \
                         P##_add_ps(P##_add_ps(a4, a5), P##_add_ps(a6, a7)));                      \
        s = P##_add_ps(s, P##_add_ps(P##_add_ps(a8, a9), P##_add_ps(a10, a11)));                   \
        float out[W];                                                                              \
        P##_storeu_ps(out, s);                                                                     \
        ((struct fma_arg *)p)->gflops = (double)n * 12 * 2 * (W) / dt / 1e9;                       \
        ((struct fma_arg *)p)->check = out[0];                                                     \
        return NULL;                                                                               \
    }
FMA_THREAD(fma_thread, "avx2,fma", __m256, _mm256, 8)
FMA_THREAD(fma_thread_512, "avx512f", __m512, _mm512, 16)
#undef FMA_THREAD
#undef FMA4

// Runs fn on nt threads and prints each one's rate and the total.
static void fma_run(void *(*fn)(void *), int nt, const char *what)
{
    pthread_t th[64];
    struct fma_arg args[64];
    for (int t = 0; t < nt; t++)
        pthread_create(&th[t], NULL, fn, &args[t]);
    double total = 0;
    printf("fp32 multiply-adds%s, %d threads, GFLOP/s per thread:", what, nt);
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        printf(" %.1f", args[t].gflops);
        total += args[t].gflops;
    }
    printf("; total %.1f\n", total);
}
#endif

static int measure_fma(int n_threads)
{
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "bench --fma: needs AVX2 and FMA\n");
        return 1;
    }
    int nt = n_threads > 64 ? 64 : n_threads;
    fma_run(fma_thread, nt, "");
    // the 512-bit rate where the CPU has it (some run 512-bit FMA at twice
    // the 256-bit rate, some at the same)
    if (__builtin_cpu_supports("avx512f"))
        fma_run(fma_thread_512, nt, " (512-bit)");
    return 0;
#else
    (void)n_threads;
    fprintf(stderr, "bench --fma: x86-64 only\n");
    return 1;
#endif
}

// Bytes of weights one generated token reads: every matrix once, but of a
// mixture of experts' 3-D expert tensors only the expert_used_count chosen
// of expert_count.
static uint64_t bytes_per_token(const struct gguf *g)
{
    uint64_t total = 0, embd = 0, experts = 0;
    bool tied = gguf_tensor_find(g, "output.weight") == NULL;
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->n_dims == 3 && str_ends_with(t->name, "_exps.weight"))
            experts += t->n_bytes;
        else
            total += t->n_bytes;
        if (str_eq_cstr(t->name, "token_embd.weight"))
            embd = t->n_bytes;
    }
    uint32_t n_expert = 0, n_used = 0;
    if (experts && gguf_get_arch_u32(g, "expert_count", &n_expert) &&
        gguf_get_arch_u32(g, "expert_used_count", &n_used) && n_expert > 0)
        total += experts / n_expert * n_used;
    return tied ? total : total - embd;
}

struct result {
    char test[48];
    int n_prompt, n_gen;
    double avg, sd;
};

static void stats(const double *v, int n, double *avg, double *sd)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *avg = s / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *avg) * (v[i] - *avg);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

// The command line.
struct bench_args {
    const char *path, *fmt;
    bool membw, fma;
    double membw_gbs;
    int n_threads, n_prompt, n_gen, reps, n_seq, n_ctx, depth;
    struct model_options o;
    const char *lora[8];
};

static void parse_args(int argc, char **argv, struct bench_args *b)
{
    *b = (struct bench_args){.fmt = "md", .n_prompt = 128, .n_gen = 32, .reps = 3};
    struct model_options *o = &b->o;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "-t") && has)
            b->n_threads = int_arg(argv[++i], 1, 1024);
        else if (!strcmp(a, "-p") && has)
            b->n_prompt = int_arg(argv[++i], 0, 1 << 20);
        else if (!strcmp(a, "-n") && has)
            b->n_gen = int_arg(argv[++i], 0, 1 << 20);
        else if (!strcmp(a, "-d") && has)
            b->depth = int_arg(argv[++i], 0, 1 << 22);
        else if (!strcmp(a, "-B") && has)
            b->n_seq = int_arg(argv[++i], 1, 64);
        else if (!strcmp(a, "-r") && has)
            b->reps = int_arg(argv[++i], 1, 1000);
        else if (!strcmp(a, "-o") && has) {
            b->fmt = argv[++i];
            if (strcmp(b->fmt, "md") && strcmp(b->fmt, "json"))
                usage();
        } else if (!strcmp(a, "--kv") && has) {
            int k = model_kv_type_parse(argv[++i]);
            if (k < 0)
                usage();
            o->kv_type = (enum model_kv_type)k;
        } else if (!strcmp(a, "--lora-merge")) {
            o->lora_merge = true;
        } else if (!strcmp(a, "--lora") && has && o->n_lora < 8) {
            b->lora[o->n_lora++] = argv[++i];
            o->lora_paths = b->lora;
        } else if (!strcmp(a, "--mapped-weights"))
            o->mapped_weights_only = true;
        else if (!strcmp(a, "-c") && has)  // context (default -p + -n)
            b->n_ctx = int_arg(argv[++i], 1, 1 << 24);
        else if (!strcmp(a, "--kv-full"))  // no ring caches for sliding-window layers
            o->kv_full_length = true;
        else if (!strcmp(a, "--membw"))
            b->membw = true;
        else if (!strcmp(a, "--fma"))
            b->fma = true;
        else if (!strcmp(a, "--membw-gbs") && has) {
            struct err e = {0};
            if (str_to_double(argv[++i], &b->membw_gbs, &e) < 0)
                usage();
        } else if (a[0] != '-' && !b->path)
            b->path = a;
        else
            usage();
    }
}

// The tests: pp (one batch of n_prompt), tg (n_gen one at a time), tgxS
// (n_gen in each of n_seq sequences together).
enum bench_test { TEST_PP, TEST_TG, TEST_TG_BATCH };

struct bench_run {
    struct model *m;
    const struct bench_args *b;
    int32_t *buf, *pos, *slot;  // n_prompt tokens, positions, slots
    double *v;                  // reps timings
};

static double run_test(const struct bench_run *r, enum bench_test t, int n)
{
    if (t == TEST_PP)
        return run_pp(r->m, n, r->b->depth, r->buf, r->pos, r->slot);
    if (t == TEST_TG)
        return run_tg(r->m, n, r->b->depth);
    return run_tg_batch(r->m, n, r->b->n_seq);
}

// One test: a warm-up (generation: 4 tokens), then reps timed runs.
static void measure(const struct bench_run *r, enum bench_test t, const char *at, struct result *x)
{
    const struct bench_args *b = r->b;
    const int n = t == TEST_PP ? b->n_prompt : b->n_gen;
    run_test(r, t, t == TEST_PP || n <= 4 ? n : 4);
    for (int i = 0; i < b->reps; i++)
        r->v[i] = run_test(r, t, n);
    if (t == TEST_PP)
        snprintf(x->test, sizeof x->test, "pp%d%s", n, at);
    else if (t == TEST_TG)
        snprintf(x->test, sizeof x->test, "tg%d%s", n, at);
    else
        snprintf(x->test, sizeof x->test, "tg%dx%d", n, b->n_seq);
    x->n_prompt = t == TEST_PP ? n : 0;
    x->n_gen = t == TEST_PP ? 0 : t == TEST_TG ? n : n * b->n_seq;
    stats(r->v, b->reps, &x->avg, &x->sd);
}

static void print_json(const struct bench_args *b, const struct result *res, int n_res,
                       int n_threads, uint64_t rss)
{
    printf("[\n");
    for (int i = 0; i < n_res; i++)
        printf("  {\"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"n_threads\": %d, "
               "\"n_depth\": %d, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, "
               "\"peak_rss_bytes\": %llu}%s\n",
               res[i].test, res[i].n_prompt, res[i].n_gen, n_threads, b->depth, res[i].avg,
               res[i].sd, (unsigned long long)rss, i + 1 < n_res ? "," : "");
    printf("]\n");
}

static void print_md(const struct bench_args *b, struct model *m, const struct model_memory *mem,
                     const struct result *res, int n_res, double fill_s, uint64_t rss)
{
    struct gguf_summary sum;
    gguf_summarize(model_gguf(m), &sum);
    const char *base = strrchr(b->path, '/') ? strrchr(b->path, '/') + 1 : b->path;
    printf("| model | size | params | backend | threads | test | t/s | peak RSS |\n");
    printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_res; i++)
        printf("| %s %s | %.2f GiB | %s | CPU | %d | %s | %.2f ± %.2f | %.1f MiB |\n", base,
               sum.quantization_level, gguf_file_size(model_gguf(m)) / 1073741824.0,
               sum.parameter_size, model_n_threads(m), res[i].test, res[i].avg, res[i].sd,
               rss / 1048576.0);
    printf("\nmemory estimate: %.1f MiB (weights %.1f + KV %.1f + scratch %.1f), peak RSS "
           "%.1f MiB (%+.1f%%)\n",
           mem->total_bytes / 1048576.0, mem->weights_bytes / 1048576.0, mem->kv_bytes / 1048576.0,
           mem->scratch_bytes / 1048576.0, rss / 1048576.0,
           100.0 * ((double)rss - (double)mem->total_bytes) / (double)mem->total_bytes);
    if (b->depth > 0)
        printf("depth fill: %d tokens in %.2f s (%.1f t/s, one batch per %d tokens)\n", b->depth,
               fill_s, b->depth / fill_s, model_n_batch(m));
    uint64_t bpt = bytes_per_token(model_gguf(m));
    printf("weights read per generated token: %.1f MiB", bpt / 1048576.0);
    if (b->membw_gbs > 0 && b->n_gen > 0) {
        double limit = b->membw_gbs * 1e9 / (double)bpt;
        printf("; bandwidth limit at %.1f GB/s: %.1f t/s; tg at %.0f%% of it", b->membw_gbs, limit,
               100.0 * res[n_res - 1].avg / limit);
    }
    printf("\n");
}

// The model options from the command line: a context for -d + -p + -n
// (or -c), n_seq slots.
static int model_options_of(struct bench_args *b)
{
    struct model_options *o = &b->o;
    o->n_threads = b->n_threads;
    if (b->depth > 0 && b->n_seq > 1) {
        fprintf(stderr, "bench: -d and -B cannot be combined\n");
        return 2;
    }
    int need = b->depth + b->n_prompt + b->n_gen;
    o->n_ctx = need > 0 ? need : 1;
    if (b->n_ctx > o->n_ctx)
        o->n_ctx = b->n_ctx;
    o->n_batch = 512;
    o->n_slots = b->n_seq > 1 ? b->n_seq : 1;
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_args b;
    parse_args(argc, argv, &b);
    if (b.fma)
        return measure_fma(b.n_threads > 0 ? b.n_threads : 2);
    if (b.membw) {
        int nt = b.n_threads > 0 ? b.n_threads : 2;
        printf("memory read bandwidth, %d threads: %.1f GB/s\n", nt, measure_bw(nt));
        return 0;
    }
    if (!b.path)
        usage();
    int rc = model_options_of(&b);
    if (rc)
        return rc;
    struct err e = {0};
    struct model_memory mem;
    if (model_estimate(b.path, &b.o, &mem, &e) < 0)
        die(&e);
    struct model *m;
    if (model_load(&m, b.path, &b.o, &e) < 0)
        die(&e);
    if (model_n_ctx(m) < b.depth + b.n_prompt + b.n_gen) {
        fprintf(stderr, "bench: the model's context (%d) is smaller than -d + -p + -n\n",
                model_n_ctx(m));
        return 1;
    }
    double fill_s = fill_depth(m, b.depth);
    char at[24] = "";
    if (b.depth > 0)
        snprintf(at, sizeof at, " @ d%d", b.depth);
    size_t cap = (size_t)(b.n_prompt > 0 ? b.n_prompt : 1);
    struct bench_run r = {.m = m,
                          .b = &b,
                          .buf = xcalloc(cap, sizeof(int32_t)),
                          .pos = xcalloc(cap, sizeof(int32_t)),
                          .slot = xcalloc(cap, sizeof(int32_t)),
                          .v = xcalloc((size_t)b.reps, sizeof(double))};
    struct result res[3];
    int n_res = 0;
    if (b.n_prompt > 0)
        measure(&r, TEST_PP, at, &res[n_res++]);
    if (b.n_gen > 0)
        measure(&r, TEST_TG, at, &res[n_res++]);
    if (b.n_gen > 0 && b.n_seq > 1)
        measure(&r, TEST_TG_BATCH, at, &res[n_res++]);
    uint64_t rss = peak_rss_bytes();
    if (!strcmp(b.fmt, "json"))
        print_json(&b, res, n_res, model_n_threads(m), rss);
    else
        print_md(&b, m, &mem, res, n_res, fill_s, rss);
    free(r.buf), free(r.pos), free(r.slot), free(r.v);
    model_free(m);
    return 0;
}

// bench_gguf: open + fully validate the header of a ~1 GB GGUF (Llama 3.2 1B
// layout in F16-ish size, with a Llama 3 sized tokenizer: 128256 tokens and
// 280147 merges), page cache warm. Prints the time per open and the page
// faults taken, which show that tensor data is never touched (the data is
// written sparse, so the file costs no disk space).
//
// usage: bench_gguf [FILE] [ITERATIONS]   (FILE is created when absent)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"

static int make_model(const char *path, struct err *e)
{
    struct gguf_writer *w = NULL;
    int rc = gguf_writer_open(&w, path, e);
    if (rc < 0)
        return rc;
    const int n_vocab = 128256, n_merges = 280147, n_embd = 2048, n_layer = 16, n_ff = 8192;
    gguf_writer_kv_str(w, "general.architecture", "llama");
    gguf_writer_kv_u32(w, "general.file_type", 7);
    gguf_writer_kv_u32(w, "llama.block_count", n_layer);
    gguf_writer_kv_u32(w, "llama.embedding_length", n_embd);
    struct str *s = calloc((size_t)n_merges, sizeof(*s));
    char *pool = malloc((size_t)n_merges * 24);
    for (int i = 0; i < n_merges; i++) {
        char *p = pool + (size_t)i * 24;
        int k = snprintf(p, 24, i < n_vocab ? "tok%d" : "m%d n%d", i, i * 7);
        s[i] = (struct str){p, (size_t)k};
    }
    gguf_writer_kv_arr_str(w, "tokenizer.ggml.tokens", s, (uint64_t)n_vocab);
    float *scores = calloc((size_t)n_vocab, sizeof(float));
    int32_t *types = calloc((size_t)n_vocab, sizeof(int32_t));
    gguf_writer_kv_arr(w, "tokenizer.ggml.scores", GGUF_VAL_FLOAT32, scores, (uint64_t)n_vocab);
    gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_VAL_INT32, types, (uint64_t)n_vocab);
    gguf_writer_kv_arr_str(w, "tokenizer.ggml.merges", s, (uint64_t)n_merges);
    free(scores);
    free(types);
    char name[64];
    int64_t embd[2] = {n_embd, n_vocab};
    gguf_writer_add_tensor(w, "token_embd.weight", GGUF_TYPE_Q8_0, 2, embd);
    for (int l = 0; l < n_layer; l++) {
        int64_t sq[2] = {n_embd, n_embd}, kv[2] = {n_embd, 512}, up[2] = {n_embd, n_ff},
                down[2] = {n_ff, n_embd}, norm[1] = {n_embd};
        static const char *const mats[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                           "ffn_gate", "ffn_up", "ffn_down"};
        const int64_t *shapes[] = {sq, kv, kv, sq, up, up, down};
        for (int m = 0; m < 7; m++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, mats[m]);
            gguf_writer_add_tensor(w, name, GGUF_TYPE_Q8_0, 2, shapes[m]);
        }
        snprintf(name, sizeof(name), "blk.%d.attn_norm.weight", l);
        gguf_writer_add_tensor(w, name, GGUF_TYPE_F32, 1, norm);
        snprintf(name, sizeof(name), "blk.%d.ffn_norm.weight", l);
        gguf_writer_add_tensor(w, name, GGUF_TYPE_F32, 1, norm);
    }
    int64_t onorm[1] = {n_embd};
    gguf_writer_add_tensor(w, "output_norm.weight", GGUF_TYPE_F32, 1, onorm);
    rc = gguf_writer_write_header(w, e);
    // All data as holes: Q8_0 matrices (34 bytes per 32) and F32 norms.
    uint64_t q8 =
        (uint64_t)n_embd * n_vocab +
        (uint64_t)n_layer * (2ull * n_embd * n_embd + 2ull * n_embd * 512 + 3ull * n_embd * n_ff);
    uint64_t f32 = (uint64_t)(2 * n_layer + 1) * n_embd;
    if (rc == 0)
        rc = gguf_writer_skip_data(w, q8 / 32 * 34 + f32 * 4, e);
    if (rc == 0)
        rc = gguf_writer_close(w, e);
    else
        gguf_writer_abort(w);
    free(s);
    free(pool);
    return rc;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/bench_gguf_1g.gguf";
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    struct err e = {0};
    if (access(path, R_OK) != 0) {
        if (make_model(path, &e) < 0) {
            fprintf(stderr, "bench_gguf: %s\n", e.msg);
            return 1;
        }
    }
    struct gguf *g = NULL;
    if (gguf_open(&g, path, &e) < 0) {  // warm the page cache
        fprintf(stderr, "bench_gguf: %s\n", e.msg);
        return 1;
    }
    uint64_t size = gguf_file_size(g), header = gguf_data_offset(g);
    size_t n_tensors = gguf_tensor_count(g), n_kv = gguf_kv_count(g);
    gguf_close(g);
    double best = 1e30, total = 0;
    long faults = 0;
    for (int i = 0; i < iters; i++) {
        long f0 = minor_faults();
        int64_t t0 = now_ns();
        if (gguf_open(&g, path, &e) < 0)
            return 1;
        // One string lookup deep in the merges: O(1) through the index.
        struct str s;
        gguf_arr_str(gguf_find(g, "tokenizer.ggml.merges"), 280000, &s);
        int64_t t1 = now_ns();
        gguf_close(g);
        faults += minor_faults() - f0;
        double ms = (double)(t1 - t0) / 1e6;
        total += ms;
        if (ms < best)
            best = ms;
    }
    printf("bench_gguf: %s: %.2f GB file, %.2f MB header, %zu KVs, %zu tensors\n", path,
           (double)size / 1e9, (double)header / 1e6, n_kv, n_tensors);
    printf("bench_gguf: open+validate: best %.2f ms, mean %.2f ms over %d runs\n", best,
           total / iters, iters);
    printf("bench_gguf: page faults per open: %.0f (header is %llu pages, data %llu pages)\n",
           (double)faults / iters, (unsigned long long)(header + 4095) / 4096,
           (unsigned long long)(size - header) / 4096);
    return 0;
}

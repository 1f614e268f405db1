// Server-path benchmark (issue 8): what the HTTP + scheduler + runner path
// costs over calling the engine directly, and what continuous batching buys.
//
//   bench_server MODEL.gguf [-n TOKENS] [-r REPEATS]
//
// 1. Direct: load the model in-process, evaluate the prompt and sample one
//    token (greedy): the engine's time to first token.
// 2. Served: start `ollama serve` (OLLAMA_NUM_PARALLEL=8), create the model,
//    warm it, and time the first streamed chunk of /api/generate for the same
//    prompt (prefix cache off: every run uses a new prompt suffix).
// 3. Aggregate generation tokens/s with 1, 2, 4 and 8 concurrent streams of
//    TOKENS tokens each (wall time of the whole batch of requests).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integration/models.h"
#include "model/model.h"

static struct harness srv;
static int n_tokens = 64;

static double now_s(void)
{
    return (double)time_monotonic_ns() / 1e9;
}

static struct model *direct_model;

static double direct_ttft(const char *prompt)
{
    struct err e = {0};
    int32_t ids[512];
    int n = model_tokenize(direct_model, prompt, strlen(prompt), true, true, ids, 512, &e);
    int32_t pos[512], slot[512];
    for (int i = 0; i < n; i++) {
        pos[i] = i;
        slot[i] = 0;
    }
    model_slot_clear(direct_model, 0);
    double t0 = now_s();
    struct model_batch b = {.n_tokens = n, .tokens = ids, .pos = pos, .slot = slot};
    if (model_decode(direct_model, &b, &e) < 0) {
        fprintf(stderr, "decode: %s\n", e.msg);
        exit(1);
    }
    const float *logits = model_logits(direct_model, n - 1);
    int best = 0;
    for (int i = 1; i < model_n_vocab(direct_model); i++)
        if (logits[i] > logits[best])
            best = i;
    return now_s() - t0;
}

struct first_chunk {
    double t0, t_first;
};

static size_t on_chunk(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    struct first_chunk *fc = ctx;
    if (fc->t_first == 0)
        fc->t_first = now_s();
    return size * n;
}

static double served_ttft(const char *prompt)
{
    char url[256], body[1024];
    snprintf(url, sizeof(url), "%s/api/generate", srv.base_url);
    snprintf(body, sizeof(body),
             "{\"model\":\"bench\",\"prompt\":\"%s\",\"options\":{\"num_predict\":1,"
             "\"temperature\":0}}",
             prompt);
    struct first_chunk fc = {now_s(), 0};
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_chunk);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &fc);
    curl_easy_perform(h);
    curl_easy_cleanup(h);
    return fc.t_first - fc.t0;
}

struct stream_job {
    int idx;
    long eval_count;
};

static void *stream_thread(void *arg)
{
    struct stream_job *j = arg;
    char url[256], body[512];
    snprintf(url, sizeof(url), "%s/api/generate", srv.base_url);
    snprintf(body, sizeof(body),
             "{\"model\":\"bench\",\"prompt\":\"Stream %d says\",\"stream\":false,"
             "\"options\":{\"num_predict\":%d,\"temperature\":0}}",
             j->idx, n_tokens);
    struct http_resp r;
    if (http_request(url, "POST", NULL, body, strlen(body), 0, &r) == 0) {
        const char *p = strstr(r.body, "\"eval_count\":");
        j->eval_count = p ? atol(p + 13) : 0;
    }
    http_resp_free(&r);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_server MODEL.gguf [-n TOKENS] [-r REPEATS]\n");
        return 2;
    }
    const char *path = argv[1];
    int repeats = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-n") == 0)
            n_tokens = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-r") == 0)
            repeats = atoi(argv[i + 1]);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    // Without OLLAMA_BIN, the build's ollama, as bench_runner (run from the
    // repository root).
    setenv("OLLAMA_BIN", "build/bin/ollama", 0);
    static const char *const env[] = {"OLLAMA_NUM_PARALLEL=8", NULL};
    if (harness_start(&srv, env) != 0 || models_create(&srv, "bench", path, "") != 0) {
        fprintf(stderr,
                "cannot start the server (%s; set OLLAMA_BIN to the ollama binary) or create the "
                "model\n",
                harness_bin());
        harness_dump_log(&srv);
        return 1;
    }
    served_ttft("warm up");
    struct err e = {0};
    struct model_options o = {.n_ctx = 512};
    if (model_load(&direct_model, path, &o, &e) < 0) {
        fprintf(stderr, "load: %s\n", e.msg);
        return 1;
    }
    direct_ttft("warm up");

    printf("## time to first token (prompt of ~8 tokens, best of %d)\n\n", repeats);
    double best_direct = 1e9, best_served = 1e9;
    for (int i = 0; i < repeats; i++) {
        char prompt[64];
        snprintf(prompt, sizeof(prompt), "Run %d: once upon a time there was", i);
        double d = direct_ttft(prompt);
        double s = served_ttft(prompt);
        best_direct = d < best_direct ? d : best_direct;
        best_served = s < best_served ? s : best_served;
    }
    printf("| path | TTFT ms |\n|---|---|\n| engine, in process | %.2f |\n"
           "| HTTP + scheduler + runner | %.2f |\n| overhead | %.2f |\n\n",
           best_direct * 1e3, best_served * 1e3, (best_served - best_direct) * 1e3);

    printf("## aggregate generation, %d tokens per stream (OLLAMA_NUM_PARALLEL=8)\n\n", n_tokens);
    printf("| streams | wall s | tokens | aggregate t/s | vs 1 stream |\n|---|---|---|---|---|\n");
    double one = 0;
    int counts[] = {1, 2, 4, 8};
    for (int c = 0; c < 4; c++) {
        int n = counts[c];
        struct stream_job jobs[8];
        pthread_t th[8];
        double t0 = now_s();
        for (int i = 0; i < n; i++) {
            jobs[i] = (struct stream_job){.idx = i + 100 * c};
            pthread_create(&th[i], NULL, stream_thread, &jobs[i]);
        }
        long total = 0;
        for (int i = 0; i < n; i++) {
            pthread_join(th[i], NULL);
            total += jobs[i].eval_count;
        }
        double dt = now_s() - t0;
        double tps = (double)total / dt;
        if (n == 1)
            one = tps;
        printf("| %d | %.2f | %ld | %.1f | %.2fx |\n", n, dt, total, tps, one > 0 ? tps / one : 0);
    }
    model_free(direct_model);
    harness_stop(&srv);
    curl_global_cleanup();
    return 0;
}

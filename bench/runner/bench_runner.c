// bench_runner: aggregate generation throughput of one `ollama runner` for
// 1, 2, 4 and 8 concurrent streams, and time to first token.
//
//   bench_runner MODEL.gguf [--bin PATH/ollama] [--threads N] [--tokens N]
//                [--prompt-tokens N] [--streams 1,2,4,8] [--ctx N] [--repeat N]
//                [--late N] [--shared N] [--cache-prompt]
//
// Starts the runner with --parallel = the largest stream count, warms it up,
// then for each stream count runs that many greedy completions at once
// (distinct prompts, no prompt cache), best of --repeat rounds (the machine
// may be shared). --shared N opens every prompt of a round with the same N
// words (a system prompt, different in every round) and --cache-prompt lets
// the runner reuse cached prompts, so that concurrent requests evaluate
// their common opening once (cross-slot prompt sharing). It reports:
//   agg tok/s   sum of eval_count / wall time from first send to last done
//   per-stream  agg tok/s / streams
//   TTFT        time from send to the first content line (median, max)
//   speedup     agg tok/s / agg tok/s of one stream
//   tok/cpu-s   tokens per CPU second of the runner process (utime + stime
//               from /proc): batching efficiency without the noise of other
//               processes sharing the machine
// Then, with --late N (default 8), the time to first token of a request that
// arrives while S - 1 other streams are generating: N such requests one
// after another (num_predict 1) against the busy runner, p50 and p99
// (nearest rank; with few samples p99 is the slowest), for every S of
// --streams (S = 1: an idle runner).
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "integration/procstat.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

struct stream {
    char url[128];
    char body[8192];
    double t_send, t_first, t_done;
    long eval_count;
    char *data;
    size_t n;
    int ok;
    int started;  // first content seen (atomic: the main thread polls it)
    int *abort;   // non-zero: end the transfer (atomic), or NULL
};

static size_t on_data(char *p, size_t size, size_t nmemb, void *ctx)
{
    struct stream *s = ctx;
    size_t add = size * nmemb;
    if (s->t_first == 0 && memmem(p, add, "\"content\"", 9)) {
        s->t_first = now_s();
        __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
    }
    char *g = realloc(s->data, s->n + add + 1);
    if (!g)
        return 0;
    memcpy(g + s->n, p, add);
    s->n += add;
    g[s->n] = '\0';
    s->data = g;
    return add;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    const struct stream *s = ctx;
    return s->abort && __atomic_load_n(s->abort, __ATOMIC_ACQUIRE);
}

static void *run_stream(void *p)
{
    struct stream *s = p;
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
    curl_easy_setopt(c, CURLOPT_URL, s->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    s->t_send = now_s();
    s->ok = curl_easy_perform(c) == CURLE_OK;
    s->t_done = now_s();
    curl_easy_cleanup(c);
    const char *ec = s->data ? strstr(s->data, "\"eval_count\":") : NULL;
    s->eval_count = ec ? strtol(ec + 13, NULL, 10) : 0;
    if (!ec)
        s->ok = 0;
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// --shared: words every prompt of a round opens with (a system prompt; new
// in every round, so no slot has it cached from an earlier one), and
// --cache-prompt: the requests' cache_prompt.
static int shared_words = 0, cache_prompt = 0;

// One /completion request: a distinct prompt of ~prompt_words words, after
// the round's shared_words.
static void stream_init(struct stream *s, int port, int round, int i, int prompt_words,
                        int n_tokens)
{
    snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d/completion", port);
    int off = snprintf(s->body, sizeof(s->body), "{\"prompt\":\"");
    if (shared_words > 0)
        off += snprintf(s->body + off, sizeof(s->body) - (size_t)off, "System %d:", round);
    for (int w = 0; w < shared_words && off < (int)sizeof(s->body) - 400; w++)
        off +=
            snprintf(s->body + off, sizeof(s->body) - (size_t)off, " s%d", (w * 13 + round) % 89);
    off += snprintf(s->body + off, sizeof(s->body) - (size_t)off,
                    "%sStory %d.%d:", shared_words > 0 ? " " : "", round, i);
    for (int w = 0; w < prompt_words && off < (int)sizeof(s->body) - 200; w++)
        off += snprintf(s->body + off, sizeof(s->body) - (size_t)off, " w%d", (w * 7 + i) % 97);
    snprintf(s->body + off, sizeof(s->body) - (size_t)off,
             "\",\"cache_prompt\":%s,\"options\":{\"temperature\":0,\"num_predict\":%d}}",
             cache_prompt ? "true" : "false", n_tokens);
}

// Runs n streams at once; returns aggregate tok/s, fills TTFT stats.
static double run_round(int port, int n, int n_tokens, int prompt_words, double *ttft_med,
                        double *ttft_max, long *total, int round)
{
    struct stream *ss = calloc((size_t)n, sizeof(*ss));
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    for (int i = 0; i < n; i++)
        stream_init(&ss[i], port, round, i, prompt_words, n_tokens);
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, run_stream, &ss[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    double t1 = now_s();
    double *ttft = calloc((size_t)n, sizeof(double));
    *total = 0;
    for (int i = 0; i < n; i++) {
        if (!ss[i].ok)
            fprintf(stderr, "stream %d failed: %.200s\n", i, ss[i].data ? ss[i].data : "");
        *total += ss[i].eval_count;
        ttft[i] = ss[i].t_first > 0 ? ss[i].t_first - ss[i].t_send : 0;
        free(ss[i].data);
    }
    qsort(ttft, (size_t)n, sizeof(double), cmp_double);
    *ttft_med = ttft[n / 2];
    *ttft_max = ttft[n - 1];
    free(ttft);
    free(ss);
    free(t);
    return (double)*total / (t1 - t0);
}

// TTFT of n_late requests (one after another) while busy - 1 streams
// generate; p50 and p99 (nearest rank) in seconds. Returns -1 if a request
// failed.
static int late_ttft(int port, int busy, int n_late, int prompt_words, double *p50, double *p99)
{
    int stop = 0, nb = busy - 1;
    struct stream *bg = calloc((size_t)(nb > 0 ? nb : 1), sizeof(*bg));
    pthread_t *t = calloc((size_t)(nb > 0 ? nb : 1), sizeof(*t));
    for (int i = 0; i < nb; i++) {
        stream_init(&bg[i], port, 9000 + busy, i, prompt_words, 100000);
        bg[i].abort = &stop;
        pthread_create(&t[i], NULL, run_stream, &bg[i]);
    }
    // Wait until every background stream is generating (at most 120 s).
    for (int w = 0, all = 0; !all && w < 12000; w++) {
        all = 1;
        for (int i = 0; i < nb; i++)
            all &= __atomic_load_n(&bg[i].started, __ATOMIC_ACQUIRE);
        if (!all)
            usleep(10 * 1000);
    }
    double *v = calloc((size_t)n_late, sizeof(double));
    int rc = 0;
    for (int k = 0; k < n_late; k++) {
        struct stream s = {0};
        stream_init(&s, port, 8000 + busy, k, prompt_words, 1);
        run_stream(&s);
        if (!s.ok || s.t_first == 0)
            rc = -1;
        v[k] = s.t_first - s.t_send;
        free(s.data);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < nb; i++) {
        pthread_join(t[i], NULL);
        free(bg[i].data);
    }
    qsort(v, (size_t)n_late, sizeof(double), cmp_double);
    *p50 = v[(n_late - 1) / 2];
    int r99 = (99 * n_late + 99) / 100;  // nearest rank, 1-based
    *p99 = v[(r99 < 1 ? 1 : r99 > n_late ? n_late : r99) - 1];
    free(v);
    free(bg);
    free(t);
    return rc;
}

static int health_ok(int port)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/health", port);
    CURL *c = curl_easy_init();
    struct stream s = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 2L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    int ok = curl_easy_perform(c) == CURLE_OK && s.data && strstr(s.data, "\"ok\"");
    curl_easy_cleanup(c);
    free(s.data);
    return ok;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *bin = getenv("OLLAMA_BIN");
    const char *threads = "0", *ctx = "512";
    int n_tokens = 32, prompt_words = 16, repeat = 1, n_late = 8;
    int streams[8] = {1, 2, 4, 8}, n_streams = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--bin") == 0 && v)
            bin = argv[++i];
        else if (strcmp(a, "--threads") == 0 && v)
            threads = argv[++i];
        else if (strcmp(a, "--ctx") == 0 && v)
            ctx = argv[++i];
        else if (strcmp(a, "--tokens") == 0 && v)
            n_tokens = atoi(argv[++i]);
        else if (strcmp(a, "--repeat") == 0 && v)
            repeat = atoi(argv[++i]);
        else if (strcmp(a, "--late") == 0 && v)
            n_late = atoi(argv[++i]);
        else if (strcmp(a, "--prompt-tokens") == 0 && v)
            prompt_words = atoi(argv[++i]);
        else if (strcmp(a, "--shared") == 0 && v)
            shared_words = atoi(argv[++i]);
        else if (strcmp(a, "--cache-prompt") == 0)
            cache_prompt = 1;
        else if (strcmp(a, "--streams") == 0 && v) {
            n_streams = 0;
            for (char *p = argv[++i]; *p && n_streams < 8;) {
                streams[n_streams++] = (int)strtol(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else if (a[0] != '-' && !model)
            model = a;
        else {
            fprintf(stderr, "usage: bench_runner MODEL.gguf [--bin ollama] [--threads N] "
                            "[--tokens N] [--prompt-tokens N] [--streams 1,2,4,8] [--ctx N] "
                            "[--repeat N] [--late N] [--shared N] [--cache-prompt]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "bench_runner: a model file is required\n");
        return 2;
    }
    if (!bin)
        bin = "build/bin/ollama";
    int max_streams = 1;
    for (int i = 0; i < n_streams; i++)
        if (streams[i] > max_streams)
            max_streams = streams[i];
    char parallel[16];
    snprintf(parallel, sizeof(parallel), "%d", max_streams);
    int port = free_port();
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execl(bin, "ollama", "runner", "--model", model, "--port", port_s, "--parallel", parallel,
              "--ctx-size", ctx, "--threads", threads, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    int ready = 0;
    for (int i = 0; i < 1200 && !ready; i++) {
        ready = health_ok(port);
        if (!ready)
            usleep(100 * 1000);
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            fprintf(stderr, "runner exited\n");
            return 1;
        }
    }
    if (!ready) {
        kill(pid, SIGKILL);
        return 1;
    }
    printf("model %s, threads %s, %d tokens per stream, ~%d prompt words after %d shared, "
           "cache_prompt %s, --parallel %d, best of %d\n\n",
           model, threads, n_tokens, prompt_words, shared_words, cache_prompt ? "true" : "false",
           max_streams, repeat);
    double med, mx;
    long total;
    run_round(port, 1, 4, prompt_words, &med, &mx, &total, 0);  // warm-up
    printf("| streams | tokens | agg tok/s | per-stream tok/s | speedup | tok/cpu-s | cpu speedup "
           "| TTFT median ms | TTFT max ms |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    double base = 0, base_cpu = 0;
    for (int k = 0; k < n_streams; k++) {
        int n = streams[k];
        double agg = 0, per_cpu = 0;
        for (int r = 0; r < (repeat > 0 ? repeat : 1); r++) {
            double m2, x2;
            long t2;
            double c0 = proc_cpu_seconds(pid);
            double a2 = run_round(port, n, n_tokens, prompt_words, &m2, &x2, &t2, k * 100 + r + 1);
            double c1 = proc_cpu_seconds(pid);
            if (a2 > agg) {
                agg = a2, med = m2, mx = x2, total = t2;
            }
            if (c1 > c0 && (double)t2 / (c1 - c0) > per_cpu)
                per_cpu = (double)t2 / (c1 - c0);
        }
        if (k == 0)
            base_cpu = per_cpu;
        if (k == 0)
            base = agg;
        printf("| %d | %ld | %.2f | %.2f | %.2fx | %.2f | %.2fx | %.1f | %.1f |\n", n, total, agg,
               agg / n, base > 0 ? agg / base : 0, per_cpu, base_cpu > 0 ? per_cpu / base_cpu : 0,
               med * 1e3, mx * 1e3);
        fflush(stdout);
    }
    if (n_late > 0) {
        printf("\nTTFT of a request arriving while S - 1 streams generate (%d requests, one "
               "after another, ~%d prompt words):\n\n| S | TTFT p50 ms | TTFT p99 ms |\n"
               "|---:|---:|---:|\n",
               n_late, prompt_words);
        for (int k = 0; k < n_streams; k++) {
            double p50, p99;
            if (late_ttft(port, streams[k], n_late, prompt_words, &p50, &p99) < 0)
                fprintf(stderr, "late requests with %d streams: a request failed\n", streams[k]);
            printf("| %d | %.1f | %.1f |\n", streams[k], p50 * 1e3, p99 * 1e3);
            fflush(stdout);
        }
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    curl_global_cleanup();
    return 0;
}

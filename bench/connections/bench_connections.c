// Connection benchmark (issue 26): what idle connections cost the server.
//
//   bench_connections MODEL.gguf [-s SECONDS] [-c CLIENTS]
//
// Starts `ollama serve`, creates a model from MODEL.gguf and warms it; then
// with 0, 1000 and 3000 idle connections open (each sent half a request
// and then nothing) measures, for SECONDS each, requests/s and p99 latency
// of GET /api/version and of a short POST /api/generate (one token,
// stream false) from CLIENTS keep-alive clients, and reads the server's
// thread count and RSS from /proc.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "integration/models.h"

static struct harness srv;
static double seconds = 2.0;
static int clients = 4;

static double now_s(void)
{
    return (double)time_monotonic_ns() / 1e9;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p, (void)ctx;
    return size * n;
}

struct client {
    bool generate;
    double *lat;
    size_t n, cap;
    int failed;
};

static void *client_main(void *p)
{
    struct client *c = p;
    char url[256];
    snprintf(url, sizeof(url), "%s%s", srv.base_url,
             c->generate ? "/api/generate" : "/api/version");
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    if (c->generate)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                         "{\"model\":\"bench\",\"prompt\":\"Once\",\"stream\":false,"
                         "\"options\":{\"num_predict\":1,\"temperature\":0}}");
    double end = now_s() + seconds;
    while (now_s() < end) {
        double t0 = now_s();
        long code = 0;
        if (curl_easy_perform(h) != CURLE_OK ||
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200) {
            c->failed++;
            continue;
        }
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 1024;
            c->lat = xrealloc(c->lat, c->cap * sizeof(double));
        }
        c->lat[c->n++] = now_s() - t0;
    }
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(bool generate, double *rps, double *p99_ms, int *failed)
{
    pthread_t tid[64];
    struct client cs[64];
    memset(cs, 0, sizeof(cs));
    for (int i = 0; i < clients; i++) {
        cs[i].generate = generate;
        pthread_create(&tid[i], NULL, client_main, &cs[i]);
    }
    size_t total = 0;
    *failed = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(tid[i], NULL);
        total += cs[i].n;
        *failed += cs[i].failed;
    }
    double *all = xmalloc((total ? total : 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, cs[i].lat, cs[i].n * sizeof(double));
        k += cs[i].n;
        free(cs[i].lat);
    }
    qsort(all, total, sizeof(double), cmp_double);
    *rps = (double)total / seconds;
    *p99_ms = total ? all[(size_t)((double)(total - 1) * 0.99)] * 1e3 : 0;
    free(all);
}

static void server_status(int *threads, long *rss_kb)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)srv.pid);
    FILE *f = fopen(path, "r");
    *threads = 0;
    *rss_kb = 0;
    while (f && fgets(line, sizeof(line), f)) {
        sscanf(line, "Threads: %d", threads);
        sscanf(line, "VmRSS: %ld", rss_kb);
    }
    if (f)
        fclose(f);
}

static int open_idle(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    static const char partial[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (send(fd, partial, sizeof(partial) - 1, MSG_NOSIGNAL) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_connections MODEL.gguf [-s SECONDS] [-c CLIENTS]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-s") == 0)
            seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "-c") == 0)
            clients = atoi(argv[i + 1]) > 0 && atoi(argv[i + 1]) <= 64 ? atoi(argv[i + 1]) : 4;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (harness_start(&srv, NULL) != 0 ||
        models_create(&srv, "bench", argv[1], "\"parameters\":{\"temperature\":0}") != 0) {
        harness_dump_log(&srv);
        harness_stop(&srv);
        return 1;
    }
    double r, p;
    int f;
    measure(true, &r, &p, &f);  // warm: load the runner
    printf("%-6s %-10s %10s %10s %8s %8s %10s\n", "idle", "request", "req/s", "p99 ms", "failed",
           "threads", "RSS MB");
    static const int idle_counts[] = {0, 1000, 3000};
    int *fds = xcalloc(3000, sizeof(int));
    int open = 0;
    for (int k = 0; k < 3; k++) {
        while (open < idle_counts[k]) {
            fds[open] = open_idle(srv.port);
            if (fds[open] < 0)
                break;
            open++;
        }
        harness_sleep_ms(300);
        for (int g = 0; g < 2; g++) {
            int threads;
            long rss;
            server_status(&threads, &rss);
            measure(g == 1, &r, &p, &f);
            printf("%-6d %-10s %10.0f %10.2f %8d %8d %10.1f\n", open, g ? "generate" : "version", r,
                   p, f, threads, (double)rss / 1024);
        }
    }
    for (int i = 0; i < open; i++)
        close(fds[i]);
    free(fds);
    harness_stop(&srv);
    curl_global_cleanup();
    return 0;
}

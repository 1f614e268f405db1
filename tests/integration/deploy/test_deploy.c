// The deployment recipe of deploy/ (issue 47), run for real on loopback:
// Debian's docker-registry as the one model source, three `ollama serve`
// nodes that pull from it through OLLAMA_PULL_MIRROR, and HAProxy with the
// shipped deploy/haproxy.cfg routing by model. In order:
//   1. each node pulls the pushed models from the registry (and a node that
//      has a blob never fetches it again), or from another node's /v2/ mirror;
//   2. the balancer's added latency (p50 / p99, printed for bench/README);
//   3. 4 models x 8 concurrent clients: each model loads on exactly one node;
//   4. kill -9 of a node under load: requests not yet answered succeed
//      elsewhere, its streams end with an error, nothing hangs, and only its
//      models move;
//   5. SIGTERM of a node (drain): every stream it serves completes.
// Every request is bounded (curl timeouts) and so is every wait.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "integration/harness.h"
#include "integration/http.h"
#include "integration/models.h"
#include "testutil.h"
#include "util/util.h"

#define REGISTRY_BIN "/usr/bin/docker-registry"
#define HAPROXY_BIN  "/usr/sbin/haproxy"
#define N_NODES      3
#define N_MODELS     4

static struct {
    bool ready;  // registry, nodes and balancer are up (tests skip otherwise)
    char dir[256];
    pid_t reg_pid, lb_pid;
    int reg_port, lb_port, admin_port;
    char reg_log[300], lb_log[300];
    struct harness nodes[N_NODES];
    bool node_up[N_NODES];
    char env[8][128];
    const char *envp[9];
    // Which node serves each model (index), from test_affinity on.
    int home[N_MODELS];
} g;

static const char *const model_names[N_MODELS] = {"m1", "m2", "m3", "m4"};

static double now_s(void)
{
    return (double)time_monotonic_ns() / 1e9;
}

static pid_t spawn(const char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static bool wait_port(int port, double seconds)
{
    for (double end = now_s() + seconds; now_s() < end; harness_sleep_ms(50))
        if (harness_port_open(port))
            return true;
    return false;
}

static void stop_pid(pid_t *pid, int sig)
{
    if (*pid <= 0)
        return;
    kill(*pid, sig);
    for (int i = 0; i < 100; i++) {
        if (waitpid(*pid, NULL, WNOHANG) == *pid) {
            *pid = 0;
            return;
        }
        harness_sleep_ms(50);
    }
    kill(*pid, SIGKILL);
    waitpid(*pid, NULL, 0);
    *pid = 0;
}

static void dump_file(const char *title, const char *path)
{
    struct buf b;
    buf_init(&b, 0);
    if (fs_read_all(path, 1 << 20, &b, NULL) == 0)
        fprintf(stderr, "---- %s ----\n%s\n", title, buf_cstr(&b));
    buf_deinit(&b);
}

// ---------------------------------------------------------------------------
// HTTP helpers

static long post(const char *base, const char *path, const char *json, struct http_resp *r)
{
    char url[300];
    snprintf(url, sizeof(url), "%s%s", base, path);
    if (http_request(url, "POST", NULL, json, strlen(json), 0, r) < 0)
        return -1;
    return r->status;
}

static long post_simple(const char *base, const char *path, const char *json)
{
    struct http_resp r;
    long st = post(base, path, json, &r);
    if (st != 200)
        fprintf(stderr, "POST %s%s %s: %ld %s\n", base, path, json, st, r.body ? r.body : "");
    http_resp_free(&r);
    return st;
}

static void lb_url(char *out, size_t n)
{
    snprintf(out, n, "http://127.0.0.1:%d", g.lb_port);
}

// The node index that answered (X-Ollama-Node: nodeK), or -1.
static int answered_by(const struct http_resp *r)
{
    const char *h = r->headers ? strcasestr(r->headers, "X-Ollama-Node: node") : NULL;
    return h ? atoi(h + strlen("X-Ollama-Node: node")) - 1 : -1;
}

// A non-streamed generation through the balancer; returns the node that
// answered with a complete reply, or -1 (the reason printed).
static int lb_generate(const char *model, int num_predict)
{
    char base[64], json[400];
    lb_url(base, sizeof(base));
    snprintf(json, sizeof(json),
             "{\"model\":\"%s\",\"prompt\":\"Once upon a time\",\"stream\":false,"
             "\"options\":{\"num_predict\":%d,\"temperature\":0}}",
             model, num_predict);
    struct http_resp r;
    long st = post(base, "/api/generate", json, &r);
    int node = answered_by(&r);
    if (st != 200 || !strstr(r.body, "\"done\":true")) {
        fprintf(stderr, "generate %s via balancer: %ld %s\n", model, st, r.body ? r.body : "");
        node = -1;
    }
    http_resp_free(&r);
    return node;
}

// Names of the models loaded on node i (GET /api/ps), as a bit set over model_names.
static unsigned loaded_on(int i)
{
    char url[128];
    snprintf(url, sizeof(url), "%s/api/ps", g.nodes[i].base_url);
    struct http_resp r;
    unsigned set = 0;
    if (http_request(url, "GET", NULL, NULL, 0, 0, &r) == 0 && r.status == 200) {
        for (int m = 0; m < N_MODELS; m++) {
            char needle[64];
            snprintf(needle, sizeof(needle), "\"name\":\"%s:latest\"", model_names[m]);
            if (strstr(r.body, needle))
                set |= 1u << m;
        }
    }
    http_resp_free(&r);
    return set;
}

// HAProxy's view of node i: its stats status ("UP", "DOWN", "UP 1/2" while
// going down, "DOWN 1/2" while coming up) into out.
static void lb_node_status(int i, char *out, size_t n)
{
    char url[128], prefix[32];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/stats;csv", g.admin_port);
    snprintf(prefix, sizeof(prefix), "\nnodes,node%d,", i + 1);
    struct http_resp r;
    out[0] = '\0';
    if (http_request(url, "GET", NULL, NULL, 0, 0, &r) == 0 && r.status == 200) {
        // The status is the 18th field of the node's line.
        const char *p = strstr(r.body, prefix);
        for (int field = 0; p && field < 17; field++)
            p = strchr(p + 1, ',');
        const char *end = p ? strchr(p + 1, ',') : NULL;
        if (p && end)
            snprintf(out, n, "%.*s", (int)(end - p - 1), p + 1);
    }
    http_resp_free(&r);
}

// Waits until HAProxy has node i fully up or fully down.
static bool wait_lb_state(int i, bool up, double seconds)
{
    char st[64];
    for (double end = now_s() + seconds; now_s() < end; harness_sleep_ms(100)) {
        lb_node_status(i, st, sizeof(st));
        if (strcmp(st, up ? "UP" : "DOWN") == 0)
            return true;
    }
    fprintf(stderr, "node%d: haproxy says \"%s\"\n", i + 1, st);
    return false;
}

// Blob downloads docker-registry has served (its access log).
static int registry_blob_gets(void)
{
    struct buf b;
    buf_init(&b, 0);
    int n = 0;
    if (fs_read_all(g.reg_log, 64 << 20, &b, NULL) == 0) {
        for (const char *p = b.data; (p = strstr(p, "\"GET /v2/")) != NULL; p++) {
            const char *eol = strchr(p, '\n');
            const char *blob = strstr(p, "/blobs/sha256:");
            if (blob && (!eol || blob < eol))
                n++;
        }
    }
    buf_deinit(&b);
    return n;
}

// ---------------------------------------------------------------------------
// Streams: a client on its own thread reading NDJSON lines through the balancer.

struct stream {
    char model[64];
    int num_predict;
    pthread_t tid;
    atomic_int lines;
    atomic_bool finished;
    bool done;        // a line with "done":true came
    bool error_line;  // a line with "error" came
    int curl_rc;
    long status;
    int node;
    int eval_count;
    double ended_at;
    char tail[512];  // the last bytes received
    char headers[2048];
    size_t headers_len;
};

static size_t stream_body(char *p, size_t size, size_t n, void *ctx)
{
    struct stream *s = ctx;
    size_t len = size * n;
    for (size_t i = 0; i < len; i++)
        if (p[i] == '\n')
            atomic_fetch_add(&s->lines, 1);
    // Keep the end of the stream: the last line tells how it ended.
    size_t keep = sizeof(s->tail) - 1, have = strlen(s->tail);
    if (len >= keep) {
        memcpy(s->tail, p + len - keep, keep);
        s->tail[keep] = '\0';
    } else {
        if (have + len > keep) {
            memmove(s->tail, s->tail + (have + len - keep), keep - len);
            have = keep - len;
        }
        memcpy(s->tail + have, p, len);
        s->tail[have + len] = '\0';
    }
    return len;
}

static size_t stream_header(char *p, size_t size, size_t n, void *ctx)
{
    struct stream *s = ctx;
    size_t len = size * n;
    if (s->headers_len + len < sizeof(s->headers)) {
        memcpy(s->headers + s->headers_len, p, len);
        s->headers_len += len;
        s->headers[s->headers_len] = '\0';
    }
    return len;
}

static void *stream_thread(void *arg)
{
    struct stream *s = arg;
    char url[128], json[400];
    // /api/chat: its last line is short (no "context" array), so the tail holds it whole.
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/chat", g.lb_port);
    snprintf(json, sizeof(json),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
             "time\"}],\"options\":{\"num_predict\":%d,\"temperature\":0}}",
             s->model, s->num_predict);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, stream_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
    s->curl_rc = (int)curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
    curl_easy_cleanup(h);
    const char *last = s->tail;
    for (const char *p = s->tail; *p; p++)
        if (*p == '\n' && p[1])
            last = p + 1;
    s->done = strstr(last, "\"done\":true") != NULL;
    s->error_line = strstr(last, "\"error\"") != NULL;
    const char *ec = strstr(last, "\"eval_count\":");
    s->eval_count = ec ? atoi(ec + strlen("\"eval_count\":")) : 0;
    struct http_resp fake = {.headers = s->headers};
    s->node = answered_by(&fake);
    s->ended_at = now_s();
    atomic_store(&s->finished, true);
    return NULL;
}

static void stream_start(struct stream *s, const char *model, int num_predict)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->model, sizeof(s->model), "%s", model);
    s->num_predict = num_predict;
    assert_int_equal(pthread_create(&s->tid, NULL, stream_thread, s), 0);
}

// Waits until every stream has sent its first line (they are in flight).
static void streams_wait_started(struct stream *s, int n)
{
    double end = now_s() + 30;
    for (int i = 0; i < n; i++) {
        while (atomic_load(&s[i].lines) == 0 && !atomic_load(&s[i].finished) && now_s() < end)
            harness_sleep_ms(5);
        if (atomic_load(&s[i].lines) == 0)
            fail_msg("stream %d for %s never started (curl %d, status %ld)", i, s[i].model,
                     s[i].curl_rc, s[i].status);
    }
}

// ---------------------------------------------------------------------------
// Concurrent non-streamed clients

struct client {
    pthread_t tid;
    int id, rounds;
    int served_by[N_MODELS];  // node index per model (-1 not yet, -2 inconsistent)
    int failures;
};

static void *client_thread(void *arg)
{
    struct client *c = arg;
    // Each model under several spellings: the balancer must see one model.
    static const char *const fmt[] = {"%s", "%s:latest", "library/%s",
                                      "registry.ollama.ai/library/%s:latest"};
    for (int round = 0; round < c->rounds; round++) {
        for (int k = 0; k < N_MODELS; k++) {
            int m = (k + c->id) % N_MODELS;
            char name[96];
            snprintf(name, sizeof(name), fmt[(c->id + round) % 4], model_names[m]);
            int node = lb_generate(name, 4);
            if (node < 0)
                c->failures++;
            else if (c->served_by[m] == -1)
                c->served_by[m] = node;
            else if (c->served_by[m] != node)
                c->served_by[m] = -2;
        }
    }
    return NULL;
}

// n clients, each asking every model `rounds` times; the node of each model
// (all clients agree) goes to home[]; returns the failures.
static int run_clients(int n, int rounds, int home[N_MODELS])
{
    struct client c[16];
    assert_true(n <= 16);
    for (int i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].id = i;
        c[i].rounds = rounds;
        for (int m = 0; m < N_MODELS; m++)
            c[i].served_by[m] = -1;
        assert_int_equal(pthread_create(&c[i].tid, NULL, client_thread, &c[i]), 0);
    }
    int failures = 0;
    for (int m = 0; m < N_MODELS; m++)
        home[m] = -1;
    for (int i = 0; i < n; i++) {
        pthread_join(c[i].tid, NULL);
        failures += c[i].failures;
        for (int m = 0; m < N_MODELS; m++) {
            if (c[i].served_by[m] == -1)
                continue;
            if (c[i].served_by[m] == -2 || (home[m] >= 0 && home[m] != c[i].served_by[m])) {
                fprintf(stderr, "model %s answered by more than one node\n", model_names[m]);
                home[m] = -2;
            } else if (home[m] == -1) {
                home[m] = c[i].served_by[m];
            }
        }
    }
    return failures;
}

// ---------------------------------------------------------------------------
// Setup: registry, a builder that pushes the models, the nodes, the balancer.

static int registry_start(void)
{
    g.reg_port = harness_free_port();
    char cfg[300], text[1024];
    snprintf(cfg, sizeof(cfg), "%s/registry.yml", g.dir);
    snprintf(g.reg_log, sizeof(g.reg_log), "%s/registry.log", g.dir);
    // Info level: the access log counts the blob downloads.
    snprintf(text, sizeof(text),
             "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n"
             "  filesystem:\n    rootdirectory: %s/registry\nhttp:\n  addr: 127.0.0.1:%d\n",
             g.dir, g.reg_port);
    if (fs_write_atomic(cfg, text, strlen(text), NULL) < 0)
        return -1;
    const char *argv[] = {REGISTRY_BIN, "serve", cfg, NULL};
    g.reg_pid = spawn(argv, g.reg_log);
    return wait_port(g.reg_port, 10) ? 0 : -1;
}

// Four distinct models from the stories fixture: each copy differs in the
// lowest mantissa byte of its last weight, so each is its own blob (and its
// own runner: the scheduler keys runners by blob).
static int push_models(void)
{
    struct harness b;
    if (harness_start(&b, NULL) != 0)
        return -1;
    char fx[512];
    test_fixture(fx, sizeof(fx), "stories260K.gguf");
    struct buf gguf;
    buf_init(&gguf, 0);
    int rc = fs_read_all(fx, 1u << 30, &gguf, NULL);
    for (int m = 0; m < N_MODELS && rc == 0; m++) {
        char path[300], json[400];
        gguf.data[gguf.len - 4] = (char)(gguf.data[gguf.len - 4] ^ (m + 1));
        snprintf(path, sizeof(path), "%s/%s.gguf", g.dir, model_names[m]);
        rc = fs_write_atomic(path, gguf.data, gguf.len, NULL);
        gguf.data[gguf.len - 4] = (char)(gguf.data[gguf.len - 4] ^ (m + 1));
        if (rc == 0)
            rc = models_create(&b, model_names[m], path, "");
        snprintf(json, sizeof(json),
                 "{\"source\":\"%s\",\"destination\":\"127.0.0.1:%d/library/%s:latest\"}",
                 model_names[m], g.reg_port, model_names[m]);
        if (rc == 0 && post_simple(b.base_url, "/api/copy", json) != 200)
            rc = -1;
        snprintf(json, sizeof(json),
                 "{\"model\":\"127.0.0.1:%d/library/%s:latest\",\"insecure\":true,"
                 "\"stream\":false}",
                 g.reg_port, model_names[m]);
        if (rc == 0 && post_simple(b.base_url, "/api/push", json) != 200)
            rc = -1;
    }
    buf_deinit(&gguf);
    if (harness_stop(&b) != 0)
        rc = -1;
    return rc;
}

static int lb_start(void)
{
    g.lb_port = harness_free_port();
    g.admin_port = harness_free_port();
    char cfg[512], bind[64], admin[64], nodes[N_NODES][64];
    snprintf(cfg, sizeof(cfg), "%s/deploy/haproxy.cfg", test_source_dir());
    snprintf(g.lb_log, sizeof(g.lb_log), "%s/haproxy.log", g.dir);
    snprintf(bind, sizeof(bind), "127.0.0.1:%d", g.lb_port);
    snprintf(admin, sizeof(admin), "127.0.0.1:%d", g.admin_port);
    setenv("OLLAMA_LB_BIND", bind, 1);
    setenv("OLLAMA_LB_ADMIN", admin, 1);
    setenv("OLLAMA_LB_RUN", g.dir, 1);
    for (int i = 0; i < N_NODES; i++) {
        char var[32];
        snprintf(var, sizeof(var), "OLLAMA_NODE%d", i + 1);
        snprintf(nodes[i], sizeof(nodes[i]), "%s", g.nodes[i].host);
        setenv(var, nodes[i], 1);
    }
    // -db: stay in the foreground (a child we can signal and wait for).
    const char *argv[] = {HAPROXY_BIN, "-db", "-f", cfg, NULL};
    g.lb_pid = spawn(argv, g.lb_log);
    if (!wait_port(g.lb_port, 10) || !wait_port(g.admin_port, 10))
        return -1;
    for (int i = 0; i < N_NODES; i++)
        if (!wait_lb_state(i, true, 10))
            return -1;
    return 0;
}

static int setup_all(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (access(REGISTRY_BIN, X_OK) != 0 || access(HAPROXY_BIN, X_OK) != 0) {
        fprintf(stderr, "docker-registry or haproxy missing: skipping\n");
        return 0;
    }
    snprintf(g.dir, sizeof(g.dir), "/tmp/ollama-it-deploy-XXXXXX");
    if (!mkdtemp(g.dir))
        return -1;
    double t0 = now_s();
    if (registry_start() != 0 || push_models() != 0) {
        dump_file("docker-registry log", g.reg_log);
        return -1;
    }
    snprintf(g.env[0], sizeof(g.env[0]), "OLLAMA_PULL_MIRROR=http://127.0.0.1:%d", g.reg_port);
    snprintf(g.env[1], sizeof(g.env[1]), "OLLAMA_MAX_LOADED_MODELS=%d", N_MODELS);
    snprintf(g.env[2], sizeof(g.env[2]), "OLLAMA_NUM_PARALLEL=4");
    // Long enough for the drain test's streams on a slow machine.
    snprintf(g.env[3], sizeof(g.env[3]), "OLLAMA_DRAIN_TIMEOUT=20s");
    snprintf(g.env[4], sizeof(g.env[4]), "OLLAMA_KEEP_ALIVE=10m");
    snprintf(g.env[5], sizeof(g.env[5]), "OLLAMA_CONTEXT_LENGTH=256");
    for (int i = 0; i < 6; i++)
        g.envp[i] = g.env[i];
    for (int i = 0; i < N_NODES; i++) {
        if (harness_start(&g.nodes[i], g.envp) != 0) {
            harness_dump_log(&g.nodes[i]);
            return -1;
        }
        g.node_up[i] = true;
    }
    if (lb_start() != 0) {
        dump_file("haproxy log", g.lb_log);
        return -1;
    }
    printf("deploy: registry, %d nodes and haproxy up in %.1f s\n", N_NODES, now_s() - t0);
    g.ready = true;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    for (int i = 0; i < N_NODES; i++) {
        if (g.node_up[i]) {
            if (harness_stop(&g.nodes[i]) != 0)
                rc = -1;
        } else if (g.nodes[i].tmp_dir[0]) {  // killed or drained by a test, or never up
            stop_pid(&g.nodes[i].pid, SIGKILL);
            char cmd[300];
            snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g.nodes[i].tmp_dir);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", g.nodes[i].tmp_dir);
        }
    }
    stop_pid(&g.lb_pid, SIGUSR1);  // soft stop
    stop_pid(&g.reg_pid, SIGTERM);
    if (g.dir[0] && getenv("OLLAMA_TEST_KEEP")) {
        printf("deploy: kept %s\n", g.dir);
    } else if (g.dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g.dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g.dir);
    }
    curl_global_cleanup();
    return rc;
}

// A failed group setup gets no teardown from cmocka: stop what did start.
static int setup(void **state)
{
    if (setup_all(state) == 0)
        return 0;
    teardown(state);
    return -1;
}

static void need_ready(void)
{
    if (!g.ready)
        skip();
}

// ---------------------------------------------------------------------------
// 1. One model source

static void test_pull_from_registry(void **state)
{
    (void)state;
    need_ready();
    // Every node pulls every model by its plain name: OLLAMA_PULL_MIRROR
    // sends registry.ollama.ai names to docker-registry (the only source
    // there is: nothing else is reachable from here).
    for (int i = 0; i < N_NODES; i++) {
        for (int m = 0; m < N_MODELS; m++) {
            char json[128];
            snprintf(json, sizeof(json), "{\"model\":\"%s\",\"stream\":false}", model_names[m]);
            struct http_resp r;
            long st = post(g.nodes[i].base_url, "/api/pull", json, &r);
            if (st != 200 || !strstr(r.body, "success")) {
                harness_dump_log(&g.nodes[i]);
                fail_msg("node%d pull %s: %ld %s", i + 1, model_names[m], st, r.body);
            }
            http_resp_free(&r);
        }
    }
    // Stored under their own names.
    for (int i = 0; i < N_NODES; i++) {
        char url[128];
        snprintf(url, sizeof(url), "%s/api/tags", g.nodes[i].base_url);
        struct http_resp r;
        assert_int_equal(http_request(url, "GET", NULL, NULL, 0, 0, &r), 0);
        for (int m = 0; m < N_MODELS; m++) {
            char needle[64];
            snprintf(needle, sizeof(needle), "\"name\":\"%s:latest\"", model_names[m]);
            if (!strstr(r.body, needle))
                fail_msg("node%d lacks %s: %s", i + 1, model_names[m], r.body);
        }
        http_resp_free(&r);
    }
    // Content addressing: pulling again fetches no blob.
    harness_sleep_ms(200);  // the registry writes its access log line after the reply
    int before = registry_blob_gets();
    assert_true(before >= N_NODES * N_MODELS);
    for (int m = 0; m < N_MODELS; m++) {
        char json[128];
        snprintf(json, sizeof(json), "{\"model\":\"%s\",\"stream\":false}", model_names[m]);
        assert_int_equal(post_simple(g.nodes[0].base_url, "/api/pull", json), 200);
    }
    harness_sleep_ms(200);
    int after = registry_blob_gets();
    printf("deploy: %d blob downloads from the registry for %d nodes x %d models; "
           "re-pulling on one node fetched %d\n",
           before, N_NODES, N_MODELS, after - before);
    assert_int_equal(after, before);
}

// Or one node's built-in /v2/ mirror as the source: a new node pulls from
// node1, which serves the model from its store (the registry sees nothing).
static void test_pull_from_node_mirror(void **state)
{
    (void)state;
    need_ready();
    char env[128];
    snprintf(env, sizeof(env), "OLLAMA_PULL_MIRROR=http://%s", g.nodes[0].host);
    const char *extra[] = {env, NULL};
    struct harness n;
    assert_int_equal(harness_start(&n, extra), 0);
    harness_sleep_ms(200);
    int before = registry_blob_gets();
    long st = post_simple(n.base_url, "/api/pull", "{\"model\":\"m2\",\"stream\":false}");
    char body[256];
    snprintf(body, sizeof(body),
             "{\"model\":\"m2\",\"prompt\":\"Once\",\"stream\":false,"
             "\"options\":{\"num_predict\":2}}");
    long gen = post_simple(n.base_url, "/api/generate", body);
    harness_sleep_ms(200);
    int after = registry_blob_gets();
    assert_int_equal(harness_stop(&n), 0);
    assert_int_equal(st, 200);
    assert_int_equal(gen, 200);
    assert_int_equal(after, before);
}

// ---------------------------------------------------------------------------
// 2. The balancer's added latency

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

static CURL *latency_handle(const char *url, const char *body)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    return h;
}

static double timed_request(CURL *h)
{
    double t0 = now_s();
    CURLcode cc = curl_easy_perform(h);
    double us = (now_s() - t0) * 1e6;
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    assert_int_equal(cc, CURLE_OK);
    assert_int_equal(st, 200);
    return us;
}

// n requests straight to a node and n through the balancer, alternating (so
// both see the same machine load), each on its own kept-alive connection.
// Prints p50 / p99 of both, in microseconds.
static void latency(const char *what, const char *path, const char *body, int n)
{
    char direct[128], via[128];
    snprintf(direct, sizeof(direct), "%s%s", g.nodes[0].base_url, path);
    snprintf(via, sizeof(via), "http://127.0.0.1:%d%s", g.lb_port, path);
    double *td = calloc((size_t)n, sizeof(double)), *tv = calloc((size_t)n, sizeof(double));
    CURL *hd = latency_handle(direct, body), *hv = latency_handle(via, body);
    for (int i = 0; i < 20; i++) {  // warm up: connections, the model's manifest
        timed_request(hd);
        timed_request(hv);
    }
    for (int i = 0; i < n; i++) {
        td[i] = timed_request(hd);
        tv[i] = timed_request(hv);
    }
    curl_easy_cleanup(hd);
    curl_easy_cleanup(hv);
    qsort(td, (size_t)n, sizeof(double), cmp_double);
    qsort(tv, (size_t)n, sizeof(double), cmp_double);
    int p99 = (n * 99) / 100;
    printf("deploy: %s x%d: direct p50 %.0f us p99 %.0f us; via haproxy p50 %.0f us p99 %.0f us "
           "(added p50 %.0f us, p99 %.0f us)\n",
           what, n, td[n / 2], td[p99], tv[n / 2], tv[p99], tv[n / 2] - td[n / 2],
           tv[p99] - td[p99]);
    free(td);
    free(tv);
}

static void test_balancer_latency(void **state)
{
    (void)state;
    need_ready();
    latency("GET /api/version", "/api/version", NULL, 200);
    // A body the balancer reads for the model (m1 is on node1 or not: the
    // hash decides; /api/show answers from any node's store).
    latency("POST /api/show", "/api/show", "{\"model\":\"m1\"}", 200);
}

// ---------------------------------------------------------------------------
// 3. Affinity

static void test_affinity(void **state)
{
    (void)state;
    need_ready();
    double t0 = now_s();
    int failures = run_clients(8, 2, g.home);
    printf("deploy: 8 clients x %d models x 2 rounds through haproxy in %.1f s\n", N_MODELS,
           now_s() - t0);
    assert_int_equal(failures, 0);
    unsigned on[N_NODES];
    for (int i = 0; i < N_NODES; i++)
        on[i] = loaded_on(i);
    for (int m = 0; m < N_MODELS; m++) {
        int count = 0, where = -1;
        for (int i = 0; i < N_NODES; i++)
            if (on[i] & (1u << m)) {
                count++;
                where = i;
            }
        printf("deploy: %s on node%d\n", model_names[m], where + 1);
        if (count != 1 || where != g.home[m])
            fail_msg("%s loaded on %d node(s) (node%d), answered by node%d", model_names[m], count,
                     where + 1, g.home[m] + 1);
    }
}

// The up node that serves the most models.
static int busiest_node(void)
{
    int best = -1, best_n = 0;
    for (int i = 0; i < N_NODES; i++) {
        if (!g.node_up[i])
            continue;
        int n = 0;
        for (int m = 0; m < N_MODELS; m++)
            n += g.home[m] == i;
        if (n > best_n) {
            best = i;
            best_n = n;
        }
    }
    return best;
}

static int first_model_on(int node)
{
    for (int m = 0; m < N_MODELS; m++)
        if (g.home[m] == node)
            return m;
    return -1;
}

// Every model is loaded on exactly one up node, and (where moved[m] is
// false) on the same node as before.
static void check_placement(const int before[N_MODELS], const bool moved[N_MODELS])
{
    unsigned on[N_NODES] = {0};
    for (int i = 0; i < N_NODES; i++)
        if (g.node_up[i])
            on[i] = loaded_on(i);
    for (int m = 0; m < N_MODELS; m++) {
        int count = 0, where = -1;
        for (int i = 0; i < N_NODES; i++)
            if (on[i] & (1u << m)) {
                count++;
                where = i;
            }
        printf("deploy: %s on node%d (was node%d)\n", model_names[m], where + 1, before[m] + 1);
        if (count != 1)
            fail_msg("%s loaded on %d nodes", model_names[m], count);
        if (!moved[m] && where != before[m])
            fail_msg("%s moved from node%d to node%d", model_names[m], before[m] + 1, where + 1);
        if (moved[m] && where == before[m])
            fail_msg("%s still on node%d", model_names[m], where + 1);
        g.home[m] = where;
    }
}

// ---------------------------------------------------------------------------
// 4. kill -9 under load

static void test_kill9_under_load(void **state)
{
    (void)state;
    need_ready();
    int victim = busiest_node();
    assert_true(victim >= 0);
    int vm = first_model_on(victim);
    // Streams in flight on the victim: long ones (ended by the kill).
    struct stream s[2];
    for (int i = 0; i < 2; i++)
        stream_start(&s[i], model_names[vm], 100000);
    streams_wait_started(s, 2);
    double t_kill = now_s();
    kill(g.nodes[victim].pid, SIGKILL);
    waitpid(g.nodes[victim].pid, NULL, 0);
    g.nodes[victim].pid = 0;
    g.node_up[victim] = false;
    // Requests not yet answered, for every model, while the balancer has not
    // yet seen the node go: they must all succeed (retried elsewhere).
    int during[N_MODELS];
    int failures = run_clients(4, 1, during);
    double t_clients = now_s() - t_kill;
    for (int i = 0; i < 2; i++)
        pthread_join(s[i].tid, NULL);
    for (int i = 0; i < 2; i++) {
        printf("deploy: stream %d on node%d ended %.2f s after kill -9: curl %d, %d lines, "
               "done %d\n",
               i, s[i].node + 1, s[i].ended_at - t_kill, s[i].curl_rc, atomic_load(&s[i].lines),
               s[i].done);
        assert_int_equal(s[i].node, victim);
        assert_false(s[i].done);                // cut, and the client knows it:
        assert_int_not_equal(s[i].curl_rc, 0);  // a transfer error, not a clean end
        assert_true(s[i].ended_at - t_kill < 10);
    }
    printf("deploy: 4 clients x %d models right after kill -9: %d failures, %.1f s\n", N_MODELS,
           failures, t_clients);
    assert_int_equal(failures, 0);
    // The balancer takes the node out; the dead node's models now load on
    // exactly one other node, the others stay where they were.
    assert_true(wait_lb_state(victim, false, 10));
    printf("deploy: haproxy marked node%d down %.1f s after kill -9\n", victim + 1,
           now_s() - t_kill);
    int after[N_MODELS];
    assert_int_equal(run_clients(4, 1, after), 0);
    int before[N_MODELS];
    bool moved[N_MODELS];
    for (int m = 0; m < N_MODELS; m++) {
        before[m] = g.home[m];
        moved[m] = g.home[m] == victim;
    }
    check_placement(before, moved);
}

// ---------------------------------------------------------------------------
// 5. SIGTERM drains

static void test_sigterm_drains(void **state)
{
    (void)state;
    need_ready();
    int victim = busiest_node();
    assert_true(victim >= 0);
    int vm = first_model_on(victim);
    // Streams of about a second: this node's streaming speed first (wall
    // clock, client included: faster than the eval rate alone says).
    char json[256];
    snprintf(json, sizeof(json),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
             "time\"}],\"options\":{\"num_predict\":256,\"temperature\":0}}",
             model_names[vm]);
    struct http_resp r;
    double t0 = now_s();
    assert_int_equal(post(g.nodes[victim].base_url, "/api/chat", json, &r), 200);
    double wall = now_s() - t0;
    const char *ec = strstr(r.body, "\"eval_count\":");
    assert_non_null(ec);
    double rate = atof(ec + 13) / wall;
    http_resp_free(&r);
    int n_predict = (int)(rate / 3);  // three streams share the node
    if (n_predict < 64)
        n_predict = 64;
    if (n_predict > 20000)
        n_predict = 20000;
    struct stream s[3];
    for (int i = 0; i < 3; i++)
        stream_start(&s[i], model_names[vm], n_predict);
    streams_wait_started(s, 3);
    double t_term = now_s();
    kill(g.nodes[victim].pid, SIGTERM);
    // New requests for the same model meanwhile go elsewhere.
    int during[N_MODELS];
    int failures = run_clients(2, 1, during);
    int status = -1;
    bool exited = false;
    for (double end = now_s() + 25; now_s() < end && !exited; harness_sleep_ms(20)) {
        int st;
        if (waitpid(g.nodes[victim].pid, &st, WNOHANG) == g.nodes[victim].pid) {
            status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            exited = true;
        }
    }
    double t_exit = now_s() - t_term;
    if (!exited) {  // still running: the assertion below fails, leave nothing behind
        kill(g.nodes[victim].pid, SIGKILL);
        waitpid(g.nodes[victim].pid, NULL, 0);
    }
    g.nodes[victim].pid = 0;
    g.node_up[victim] = false;
    for (int i = 0; i < 3; i++)
        pthread_join(s[i].tid, NULL);
    printf("deploy: SIGTERM to node%d with 3 streams of %d tokens (%.0f tokens/s) in flight: "
           "exited %d after %.2f s\n",
           victim + 1, n_predict, rate, status, t_exit);
    for (int i = 0; i < 3; i++) {
        printf("deploy: stream %d: node%d, curl %d, done %d, eval_count %d, ended %.2f s after "
               "SIGTERM\n",
               i, s[i].node + 1, s[i].curl_rc, s[i].done, s[i].eval_count, s[i].ended_at - t_term);
        assert_int_equal(s[i].node, victim);
        assert_int_equal(s[i].curl_rc, 0);
        assert_true(s[i].done);
        assert_false(s[i].error_line);
    }
    assert_int_equal(status, 0);
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_from_registry), cmocka_unit_test(test_pull_from_node_mirror),
        cmocka_unit_test(test_balancer_latency),   cmocka_unit_test(test_affinity),
        cmocka_unit_test(test_kill9_under_load),   cmocka_unit_test(test_sigterm_drains),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

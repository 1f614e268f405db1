// Scheduler behaviour through a real server (scheduler.md): with
// OLLAMA_MAX_LOADED_MODELS=1 a second model evicts the first; with
// OLLAMA_MAX_QUEUE=1 a load request beyond the queue gets 503 with Ollama's
// message while another load waits for a busy runner; OLLAMA_KV_CACHE_TYPE
// and OLLAMA_FLASH_ATTENTION reach the runner and the memory accounting.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "integration/models.h"
#include "testutil.h"

static struct harness srv;

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"OLLAMA_MAX_LOADED_MODELS=1", "OLLAMA_MAX_QUEUE=1",
                                      "OLLAMA_NUM_PARALLEL=1", NULL};
    if (harness_setup(&srv, env) != 0)
        return -1;
    char stories[512], gen[600], cmd[1400];
    test_fixture(stories, sizeof(stories), "stories260K.gguf");
    snprintf(gen, sizeof(gen), "%s/tiny.gguf", srv.tmp_dir);
    const char *bin_dir = getenv("OLLAMA_BIN_DIR");
    snprintf(cmd, sizeof(cmd), "'%s/gguf-gen' --preset tiny --seed 7 --quiet -o '%s'",
             bin_dir ? bin_dir : ".", gen);
    if (system(cmd) != 0)
        return -1;
    if (models_create(&srv, "stories", stories, "\"parameters\":{\"temperature\":0}") < 0 ||
        models_create(&srv, "tiny", gen, "\"parameters\":{\"temperature\":0}") < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

static long post(const char *path, const char *body, char **out)
{
    struct http_resp r;
    assert_int_equal(harness_request(&srv, "POST", path, NULL, body, &r), 0);
    long st = r.status;
    if (out)
        *out = xstrdup(r.body);
    http_resp_free(&r);
    return st;
}

static char *ps(void)
{
    struct http_resp r;
    assert_int_equal(harness_request(&srv, "GET", "/api/ps", NULL, NULL, &r), 0);
    char *s = xstrdup(r.body);
    http_resp_free(&r);
    return s;
}

static void test_eviction(void **state)
{
    (void)state;
    assert_int_equal(post("/api/generate", "{\"model\":\"stories\"}", NULL), 200);
    char *p = ps();
    assert_non_null(strstr(p, "stories:latest"));
    free(p);
    assert_int_equal(post("/api/generate", "{\"model\":\"tiny\"}", NULL), 200);
    p = ps();
    assert_non_null(strstr(p, "tiny:latest"));
    assert_null(strstr(p, "stories:latest"));  // evicted: only one may be loaded
    free(p);
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p, (void)ctx;
    return size * n;
}

// An endless generation (greedy decoding of the random tiny model never
// reaches its end token) that the client abandons after 3 s (the server then
// frees the runner).
static void *long_generation(void *arg)
{
    (void)arg;
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof(url), "%s/api/generate", srv.base_url);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                     "{\"model\":\"tiny\",\"prompt\":\"a\",\"options\":{\"num_predict\":-1,"
                     "\"temperature\":0}}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
    curl_easy_perform(h);
    curl_easy_cleanup(h);
    return NULL;
}

static void *queued_load(void *arg)
{
    long *status = arg;
    *status = post("/api/generate", "{\"model\":\"stories\"}", NULL);
    return NULL;
}

static void test_queue_full(void **state)
{
    (void)state;
    // tiny is busy generating; stories must wait for it (max 1 loaded): it
    // takes the only queue place; one more load request is refused.
    pthread_t busy, queued;
    long queued_status = 0;
    pthread_create(&busy, NULL, long_generation, NULL);
    harness_sleep_ms(300);
    pthread_create(&queued, NULL, queued_load, &queued_status);
    harness_sleep_ms(300);
    char *body = NULL;
    long st = post("/api/chat", "{\"model\":\"stories\",\"messages\":[]}", &body);
    assert_int_equal(st, 503);
    assert_non_null(
        strstr(body, "server busy, please try again.  maximum pending requests exceeded"));
    free(body);
    pthread_join(busy, NULL);
    pthread_join(queued, NULL);
    assert_int_equal(queued_status, 200);
}

// The whole log of a server (caller frees).
static char *server_log(const struct harness *h)
{
    struct buf b;
    buf_init(&b, 0);
    FILE *f = fopen(h->log_path, "r");
    if (f) {
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
            buf_append(&b, chunk, n);
        fclose(f);
    }
    char *s = xstrdup(buf_cstr(&b));
    buf_deinit(&b);
    return s;
}

// OLLAMA_KV_CACHE_TYPE reaches the runner and the memory the scheduler
// accounts for: the tiny model (64-wide heads, 2 layers, 2 KV heads, 4096
// cells) takes 2 × 2 × 4096 × (256 − 72) bytes less in /api/ps with a q4_0
// cache than with f16 (more, with the f16 cache's kept attention scores).
// With OLLAMA_FLASH_ATTENTION=0 a quantized type falls back to f16 with a
// warning (env.md).
static void test_kv_cache_type(void **state)
{
    (void)state;
    char gen[600];
    snprintf(gen, sizeof(gen), "%s/tiny.gguf", srv.tmp_dir);
    const char *const envs[3][3] = {
        {"OLLAMA_KV_CACHE_TYPE=f16", NULL},
        {"OLLAMA_KV_CACHE_TYPE=q4_0", NULL},
        {"OLLAMA_KV_CACHE_TYPE=q4_0", "OLLAMA_FLASH_ATTENTION=0", NULL},
    };
    long long size[3];
    for (int i = 0; i < 3; i++) {
        struct harness h;
        assert_int_equal(harness_start(&h, envs[i]), 0);
        assert_int_equal(models_create(&h, "tiny", gen, "\"parameters\":{\"temperature\":0}"), 0);
        struct http_resp r;
        assert_int_equal(harness_request(&h, "POST", "/api/generate", NULL,
                                         "{\"model\":\"tiny\",\"prompt\":\"a\",\"stream\":false,"
                                         "\"options\":{\"num_predict\":2}}",
                                         &r),
                         0);
        assert_int_equal(r.status, 200);
        http_resp_free(&r);
        assert_int_equal(harness_request(&h, "GET", "/api/ps", NULL, NULL, &r), 0);
        const char *at = strstr(r.body, "\"size\":");
        assert_non_null(at);
        size[i] = atoll(at + 7);
        http_resp_free(&r);
        char *log = server_log(&h);
        bool q4 = strstr(log, " kv=q4_0 ") != NULL;  // the runner's "model loaded" line
        bool warned = strstr(log, "OLLAMA_KV_CACHE_TYPE=q4_0 needs flash attention, which "
                                  "OLLAMA_FLASH_ATTENTION=0 turns off; using f16") != NULL;
        free(log);
        assert_true(q4 == (i == 1));
        assert_true(warned == (i == 2));
        assert_int_equal(harness_stop(&h), 0);
    }
    assert_true(size[0] - size[1] >= 2LL * 2 * 4096 * (256 - 72));
    assert_true(size[2] == size[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eviction),
        cmocka_unit_test(test_queue_full),
        cmocka_unit_test(test_kv_cache_type),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Registry interop through real processes on loopback: Debian's
// docker-registry (Docker Distribution 2.8, filesystem storage, no auth) and
// `ollama serve`. Push a created model, delete it, pull it back byte for byte
// and run it; kill a server mid-download and resume; pull through another
// server's /v2/ mirror, which pulls through docker-registry.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "integration/harness.h"
#include "integration/http.h"
#include "integration/models.h"
#include "testutil.h"
#include "util/util.h"

#define REGISTRY_BIN "/usr/bin/docker-registry"

struct reg {
    pid_t pid;
    int port;
    char dir[256];
};

static struct reg g_reg;

static int registry_start(void **state)
{
    (void)state;
    if (access(REGISTRY_BIN, X_OK) != 0)
        return 0;  // tests skip
    snprintf(g_reg.dir, sizeof(g_reg.dir), "/tmp/ollama-it-reg-XXXXXX");
    if (!mkdtemp(g_reg.dir))
        return -1;
    g_reg.port = harness_free_port();
    char cfg[300], text[1024], log[300];
    snprintf(cfg, sizeof(cfg), "%s/config.yml", g_reg.dir);
    snprintf(log, sizeof(log), "%s/registry.log", g_reg.dir);
    snprintf(text, sizeof(text),
             "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "
             "%s/data\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:%d\n",
             g_reg.dir, g_reg.port);
    if (fs_write_atomic(cfg, text, strlen(text), NULL) < 0)
        return -1;
    g_reg.pid = fork();
    if (g_reg.pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(REGISTRY_BIN, "docker-registry", "serve", cfg, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        if (harness_port_open(g_reg.port))
            return 0;
        harness_sleep_ms(50);
    }
    return -1;
}

static int registry_stop(void **state)
{
    (void)state;
    if (g_reg.pid > 0) {
        kill(g_reg.pid, SIGTERM);
        waitpid(g_reg.pid, NULL, 0);
    }
    if (g_reg.dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_reg.dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_reg.dir);
    }
    return 0;
}

static void need_registry(void)
{
    if (g_reg.pid <= 0)
        skip();
}

// POST a JSON body; returns the HTTP status, body in *out (caller frees).
static long post(const struct harness *h, const char *path, const char *json, char **out)
{
    char url[300];
    snprintf(url, sizeof(url), "%s%s", h->base_url, path);
    struct http_resp r;
    int rc = http_request(url, "POST", NULL, json, strlen(json), 0, &r);
    long st = rc == 0 ? r.status : -1;
    if (out)
        *out = xstrdup(r.body ? r.body : "");
    http_resp_free(&r);
    return st;
}

static void must_post_ok(const struct harness *h, const char *path, const char *json)
{
    char *body = NULL;
    long st = post(h, path, json, &body);
    if (st != 200 || strstr(body, "\"error\""))
        fail_msg("%s %s: %ld %s", path, json, st, body);
    free(body);
}

static void delete_model(const struct harness *h, const char *name)
{
    char url[300], json[300];
    snprintf(url, sizeof(url), "%s/api/delete", h->base_url);
    snprintf(json, sizeof(json), "{\"model\":\"%s\"}", name);
    struct http_resp r;
    assert_int_equal(http_request(url, "DELETE", NULL, json, strlen(json), 0, &r), 0);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
}

static void read_file(const char *path, struct buf *out)
{
    buf_reset(out);
    struct err e = {0};
    if (fs_read_all(path, 1u << 30, out, &e) < 0)
        fail_msg("read %s: %s", path, e.msg);
}

static void manifest_path(const struct harness *h, const char *host, const char *model, char *out,
                          size_t n)
{
    snprintf(out, n, "%s/manifests/%s/library/%s/latest", h->models_dir, host, model);
}

// Every blob the manifest names exists in h's store with exactly the bytes
// of the same blob in ref's store.
static void blobs_identical(const struct harness *h, const struct harness *ref,
                            const char *manifest_text)
{
    int n = 0;
    for (const char *p = strstr(manifest_text, "sha256:"); p; p = strstr(p + 7, "sha256:")) {
        char hex[65];
        memcpy(hex, p + 7, 64);
        hex[64] = '\0';
        char a[400], b[400];
        snprintf(a, sizeof(a), "%s/blobs/sha256-%s", h->models_dir, hex);
        snprintf(b, sizeof(b), "%s/blobs/sha256-%s", ref->models_dir, hex);
        struct buf x, y;
        buf_init(&x, 0);
        buf_init(&y, 0);
        read_file(a, &x);
        read_file(b, &y);
        assert_int_equal(x.len, y.len);
        assert_memory_equal(x.data, y.data, x.len);
        buf_deinit(&x);
        buf_deinit(&y);
        n++;
    }
    assert_true(n >= 2);
}

static void test_push_pull_roundtrip(void **state)
{
    (void)state;
    need_registry();
    struct harness a, ref;
    assert_int_equal(harness_start(&a, NULL), 0);
    assert_int_equal(harness_start(&ref, NULL), 0);
    char fx[512];
    test_fixture(fx, sizeof(fx), "stories260K.gguf");
    assert_int_equal(models_create(&a, "stories", fx, ""), 0);
    assert_int_equal(models_create(&ref, "stories", fx, ""), 0);
    char name[128], json[400];
    snprintf(name, sizeof(name), "127.0.0.1:%d/library/stories:latest", g_reg.port);
    snprintf(json, sizeof(json), "{\"source\":\"stories\",\"destination\":\"%s\"}", name);
    must_post_ok(&a, "/api/copy", json);

    // Push (streamed): the exact progress statuses.
    snprintf(json, sizeof(json), "{\"model\":\"%s\",\"insecure\":true}", name);
    char *body = NULL;
    assert_int_equal(post(&a, "/api/push", json, &body), 200);
    assert_true(cstr_starts_with(body, "{\"status\":\"retrieving manifest\"}\n"));
    assert_non_null(strstr(body, "{\"status\":\"pushing manifest\"}\n{\"status\":\"success\"}\n"));
    assert_null(strstr(body, "error"));
    free(body);

    // Without insecure the https attempt fails; with an http:// scheme it is refused.
    snprintf(json, sizeof(json), "{\"model\":\"http://%s\",\"stream\":false}", name);
    assert_int_equal(post(&a, "/api/pull", json, &body), 500);
    assert_non_null(strstr(body, "insecure protocol http"));
    free(body);

    // Delete everything locally, pull back.
    delete_model(&a, name);
    delete_model(&a, "stories");
    snprintf(json, sizeof(json), "{\"model\":\"%s\",\"insecure\":true}", name);
    assert_int_equal(post(&a, "/api/pull", json, &body), 200);
    assert_true(cstr_starts_with(body, "{\"status\":\"pulling manifest\"}\n"));
    assert_non_null(strstr(body, "{\"status\":\"verifying sha256 digest\"}\n{\"status\":\"writing "
                                 "manifest\"}\n{\"status\":\"success\"}\n"));
    free(body);

    // The manifest is what the registry holds; every blob identical to a
    // locally created copy.
    char path[600], url[400];
    char host[64];
    snprintf(host, sizeof(host), "127.0.0.1:%d", g_reg.port);
    manifest_path(&a, host, "stories", path, sizeof(path));
    struct buf m;
    buf_init(&m, 0);
    read_file(path, &m);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v2/library/stories/manifests/latest",
             g_reg.port);
    const char *acc[] = {"Accept: application/vnd.docker.distribution.manifest.v2+json", NULL};
    struct http_resp r;
    assert_int_equal(http_request(url, "GET", acc, NULL, 0, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, m.len);
    assert_memory_equal(r.body, m.data, m.len);
    http_resp_free(&r);
    blobs_identical(&a, &ref, m.data);
    buf_deinit(&m);

    // And it runs.
    snprintf(json, sizeof(json),
             "{\"model\":\"%s\",\"prompt\":\"Once upon\",\"stream\":false,\"options\":"
             "{\"num_predict\":4,\"temperature\":0}}",
             name);
    assert_int_equal(post(&a, "/api/generate", json, &body), 200);
    assert_non_null(strstr(body, "\"done\":true"));
    free(body);

    // 404 wording.
    snprintf(json, sizeof(json),
             "{\"model\":\"127.0.0.1:%d/library/nope:latest\",\"insecure\":true,\"stream\":false}",
             g_reg.port);
    assert_int_equal(post(&a, "/api/pull", json, &body), 500);
    assert_non_null(strstr(body, "pull model manifest: file does not exist"));
    free(body);

    // create FROM a model that is not local goes through the registry
    // (https here, so the plain-http registry cannot answer it).
    snprintf(
        json, sizeof(json),
        "{\"model\":\"derived\",\"from\":\"127.0.0.1:%d/library/nope:latest\",\"stream\":false}",
        g_reg.port);
    assert_true(post(&a, "/api/create", json, &body) >= 400);
    assert_non_null(strstr(body, "pull model manifest: "));
    free(body);
    assert_int_equal(harness_stop(&a), 0);
    assert_int_equal(harness_stop(&ref), 0);
}

struct pull_child {
    pid_t pid;
};

// Starts a pull in a child process (it ends when the server dies).
static void pull_in_child(const struct harness *h, const char *json, struct pull_child *c)
{
    c->pid = fork();
    if (c->pid == 0) {
        char *body = NULL;
        post(h, "/api/pull", json, &body);
        _exit(0);
    }
}

static uint64_t sidecar_completed(const char *path)
{
    struct buf b;
    buf_init(&b, 4096);
    uint64_t c = 0;
    if (fs_read_all(path, 4096, &b, NULL) == 0 && b.data) {
        const char *p = strstr(b.data, "\"Completed\":");
        if (p)
            c = strtoull(p + 12, NULL, 10);
    }
    buf_deinit(&b);
    return c;
}

static void test_pull_killed_resumes(void **state)
{
    (void)state;
    need_registry();
    const char *bin_dir = getenv("OLLAMA_BIN_DIR");
    char gen[400], gguf[400], cmd[1200];
    snprintf(gen, sizeof(gen), "%s/gguf-gen", bin_dir ? bin_dir : ".");
    if (access(gen, X_OK) != 0)
        skip();
    struct harness a;
    assert_int_equal(harness_start(&a, NULL), 0);
    snprintf(gguf, sizeof(gguf), "%s/mid.gguf", a.tmp_dir);
    // ~89 MB of q8_0: enough bytes that the download can be cut in the middle.
    snprintf(cmd, sizeof(cmd),
             "'%s' --arch llama --n-embd 1024 --n-layer 4 --n-head 8 --n-head-kv 8 --n-ff 4096 "
             "--n-vocab 16000 --tied --type q8_0 --quiet -o '%s'",
             gen, gguf);
    assert_int_equal(system(cmd), 0);
    char hex[65];
    uint64_t size = 0;
    assert_int_equal(sha256_file(gguf, hex, &size, NULL), 0);
    assert_int_equal(models_create(&a, "mid", gguf, ""), 0);
    char name[128], json[400];
    snprintf(name, sizeof(name), "127.0.0.1:%d/library/mid:latest", g_reg.port);
    snprintf(json, sizeof(json), "{\"source\":\"mid\",\"destination\":\"%s\"}", name);
    must_post_ok(&a, "/api/copy", json);
    snprintf(json, sizeof(json), "{\"model\":\"%s\",\"insecure\":true,\"stream\":false}", name);
    must_post_ok(&a, "/api/push", json);

    // Server B starts pulling; once part of the blob is on disk it is killed.
    struct harness b;
    bool cut = false;
    uint64_t done_before = 0;
    char sidecar[600], blob[600], models[300];
    for (int attempt = 0; attempt < 3 && !cut; attempt++) {
        assert_int_equal(harness_start(&b, NULL), 0);
        snprintf(models, sizeof(models), "%s", b.models_dir);
        snprintf(sidecar, sizeof(sidecar), "%s/blobs/sha256-%s-partial-0", models, hex);
        snprintf(blob, sizeof(blob), "%s/blobs/sha256-%s", models, hex);
        struct pull_child c;
        pull_in_child(&b, json, &c);
        for (int i = 0; i < 20000; i++) {
            done_before = sidecar_completed(sidecar);
            if (done_before > 0 || fs_exists(blob))
                break;
            usleep(200);
        }
        kill(b.pid, SIGKILL);
        waitpid(b.pid, NULL, 0);
        b.pid = 0;
        // Cut only if the blob had not completed by the time the kill landed.
        cut = done_before > 0 && !fs_exists(blob);
        waitpid(c.pid, NULL, 0);
        if (!cut)
            harness_stop(&b);
    }
    if (!cut) {
        harness_stop(&a);
        fail_msg("the pull finished before it could be interrupted three times");
    }
    assert_false(fs_exists(blob));
    // Restart on the same store: the pull resumes from the sidecar.
    struct harness b2;
    char env[400];
    snprintf(env, sizeof(env), "OLLAMA_MODELS=%s", models);
    const char *extra[] = {env, NULL};
    assert_int_equal(harness_start(&b2, extra), 0);
    snprintf(json, sizeof(json), "{\"model\":\"%s\",\"insecure\":true}", name);
    char *body = NULL;
    assert_int_equal(post(&b2, "/api/pull", json, &body), 200);
    assert_non_null(strstr(body, "{\"status\":\"success\"}"));
    // The first progress line of the model blob already counts the bytes
    // written before the kill.
    char key[64];
    snprintf(key, sizeof(key), "\"status\":\"pulling %.12s\"", hex);
    const char *first = strstr(body, key);
    assert_non_null(first);
    const char *comp = strstr(first, "\"completed\":");
    const char *eol = strchr(first, '\n');
    assert_true(comp && comp < eol);
    assert_true(strtoull(comp + 12, NULL, 10) >= done_before);
    free(body);
    char got[65];
    assert_int_equal(sha256_file(blob, got, NULL, NULL), 0);
    assert_string_equal(got, hex);
    assert_false(fs_exists(sidecar));
    assert_int_equal(harness_stop(&b2), 0);
    harness_stop(&b);
    assert_int_equal(harness_stop(&a), 0);
}

static void test_mirror_pull_through(void **state)
{
    (void)state;
    need_registry();
    struct harness a, mirror, client;
    assert_int_equal(harness_start(&a, NULL), 0);
    char fx[512];
    test_fixture(fx, sizeof(fx), "stories260K.gguf");
    assert_int_equal(models_create(&a, "stories2", fx, ""), 0);
    char name[128], json[400];
    snprintf(name, sizeof(name), "127.0.0.1:%d/library/stories2:latest", g_reg.port);
    snprintf(json, sizeof(json), "{\"source\":\"stories2\",\"destination\":\"%s\"}", name);
    must_post_ok(&a, "/api/copy", json);
    snprintf(json, sizeof(json), "{\"model\":\"%s\",\"insecure\":true,\"stream\":false}", name);
    must_post_ok(&a, "/api/push", json);

    char env[200];
    snprintf(env, sizeof(env), "OLLAMA_REGISTRY_MIRROR=http://127.0.0.1:%d", g_reg.port);
    const char *extra[] = {env, NULL};
    assert_int_equal(harness_start(&mirror, extra), 0);
    assert_int_equal(harness_start(&client, NULL), 0);

    // The mirror answers the OCI base check.
    char url[400];
    snprintf(url, sizeof(url), "%s/v2/", mirror.base_url);
    struct http_resp r;
    assert_int_equal(http_request(url, "GET", NULL, NULL, 0, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{}");
    http_resp_free(&r);

    // client pulls mirror:port/library/stories2 → the mirror pulls from docker-registry.
    snprintf(json, sizeof(json), "{\"model\":\"%s/library/stories2:latest\",\"insecure\":true}",
             mirror.host);
    char *body = NULL;
    assert_int_equal(post(&client, "/api/pull", json, &body), 200);
    if (!strstr(body, "{\"status\":\"success\"}"))
        fail_msg("pull through mirror: %s", body);
    free(body);
    char path[600], host[64];
    manifest_path(&client, mirror.host, "stories2", path, sizeof(path));
    struct buf m;
    buf_init(&m, 0);
    read_file(path, &m);
    blobs_identical(&client, &a, m.data);
    // The mirror stored it (verified) under the upstream's name; its
    // background pull writes the manifest after the last blob.
    snprintf(host, sizeof(host), "127.0.0.1:%d", g_reg.port);
    manifest_path(&mirror, host, "stories2", path, sizeof(path));
    for (int i = 0; i < 200 && !fs_exists(path); i++)
        harness_sleep_ms(50);
    struct buf mm;
    buf_init(&mm, 0);
    read_file(path, &mm);
    assert_int_equal(mm.len, m.len);
    assert_memory_equal(mm.data, m.data, m.len);
    blobs_identical(&mirror, &a, m.data);

    // Blob reads: HEAD with the digest header, a byte range.
    const char *d = strstr(m.data, "\"layers\"");
    d = strstr(d, "sha256:");
    char digest[72];
    memcpy(digest, d, 71);
    digest[71] = '\0';
    snprintf(url, sizeof(url), "%s/v2/library/stories2/blobs/%s", mirror.base_url, digest);
    assert_int_equal(http_request(url, "HEAD", NULL, NULL, 0, 0, &r), 0);
    assert_int_equal(r.status, 200);
    char hdr[120];
    snprintf(hdr, sizeof(hdr), "Docker-Content-Digest: %s", digest);
    assert_true(http_has_header(&r, hdr));
    http_resp_free(&r);
    const char *range[] = {"Range: bytes=4-11", NULL};
    assert_int_equal(http_request(url, "GET", range, NULL, 0, 0, &r), 0);
    assert_int_equal(r.status, 206);
    assert_int_equal(r.body_len, 8);
    assert_true(http_has_header(&r, "Content-Range: bytes 4-11/"));
    http_resp_free(&r);
    // Unknown things: registry-style 404s; writes refused.
    snprintf(url, sizeof(url), "%s/v2/library/nothing/manifests/latest", client.base_url);
    assert_int_equal(http_request(url, "GET", NULL, NULL, 0, 0, &r), 0);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "MANIFEST_UNKNOWN"));
    http_resp_free(&r);
    snprintf(url, sizeof(url), "%s/v2/library/x/blobs/sha256:..%%2F..%%2Fetc", mirror.base_url);
    assert_int_equal(http_request(url, "GET", NULL, NULL, 0, 0, &r), 0);
    assert_true(r.status == 400 || r.status == 404);
    http_resp_free(&r);
    snprintf(url, sizeof(url), "%s/v2/library/x/blobs/uploads/", mirror.base_url);
    assert_int_equal(http_request(url, "POST", NULL, "", 0, 0, &r), 0);
    assert_int_equal(r.status, 405);
    http_resp_free(&r);
    buf_deinit(&m);
    buf_deinit(&mm);
    assert_int_equal(harness_stop(&client), 0);
    assert_int_equal(harness_stop(&mirror), 0);
    assert_int_equal(harness_stop(&a), 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_pull_roundtrip),
        cmocka_unit_test(test_pull_killed_resumes),
        cmocka_unit_test(test_mirror_pull_through),
    };
    return cmocka_run_group_tests(tests, registry_start, registry_stop);
}

// Integration test of the model-store endpoints of a real `ollama serve`:
// blob upload with digest verification, create (streamed and not), tags,
// show, copy, delete, and the bad-input answers of api.md §5, §12, §15, §16.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "integration/harness.h"
#include "integration/http.h"
#include "testutil.h"
#include "util/util.h"

static struct harness srv;
static char model_digest[80];  // "sha256:<hex>" of stories260K.gguf
static char *model_bytes;
static size_t model_len;

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char path[512];
    test_fixture(path, sizeof(path), "stories260K.gguf");
    struct buf b;
    buf_init(&b, 0);
    if (fs_read_all(path, 64u << 20, &b, NULL) < 0)
        return -1;
    model_len = b.len;
    model_bytes = buf_take(&b);
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(model_bytes, model_len, hex);
    snprintf(model_digest, sizeof(model_digest), "sha256:%s", hex);
    if (harness_start(&srv, NULL) != 0) {
        harness_dump_log(&srv);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(model_bytes);
    int rc = harness_stop(&srv);
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

static void req(const char *method, const char *path, const char *body, size_t len,
                struct http_resp *r)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", srv.base_url, path);
    assert_int_equal(http_request(url, method, NULL, body ? body : NULL, body ? len : 0, 0, r), 0);
}

static void req_json(const char *method, const char *path, const char *body, struct http_resp *r)
{
    req(method, path, body, body ? strlen(body) : 0, r);
}

static void expect(const char *method, const char *path, const char *body, long status,
                   const char *body_substr)
{
    struct http_resp r;
    req_json(method, path, body, &r);
    if (r.status != status || (body_substr && !strstr(r.body, body_substr)))
        fprintf(stderr, "%s %s %s -> %ld %s\n", method, path, body ? body : "", r.status, r.body);
    assert_int_equal(r.status, status);
    if (body_substr)
        assert_non_null(strstr(r.body, body_substr));
    http_resp_free(&r);
}

static void test_empty_tags(void **state)
{
    (void)state;
    expect("GET", "/api/tags", NULL, 200, "{\"models\":[]}");
}

static void test_blobs(void **state)
{
    (void)state;
    char path[160];
    snprintf(path, sizeof(path), "/api/blobs/%s", model_digest);
    expect("HEAD", path, NULL, 404, NULL);
    // Wrong bytes under this digest: refused, nothing kept.
    struct http_resp r;
    req("POST", path, "not the model", 13, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "digest mismatch"));
    http_resp_free(&r);
    expect("HEAD", path, NULL, 404, NULL);
    // The real bytes: 201, then 200 (already present).
    req("POST", path, model_bytes, model_len, &r);
    assert_int_equal(r.status, 201);
    assert_int_equal(r.body_len, 0);
    http_resp_free(&r);
    expect("HEAD", path, NULL, 200, NULL);
    req("POST", path, model_bytes, model_len, &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    // Digests that could escape or are malformed.
    expect("HEAD", "/api/blobs/sha256:..%2f..%2fetc", NULL, 400, NULL);
    expect("POST", "/api/blobs/sha256-../../x", "x", 400, "invalid digest format");
    expect("HEAD", "/api/blobs/sha256:abc", NULL, 400, NULL);
}

static void test_create_and_list(void **state)
{
    (void)state;
    char body[512];
    snprintf(body, sizeof(body),
             "{\"model\":\"stories\",\"files\":{\"stories260K.gguf\":\"%s\"},"
             "\"parameters\":{\"temperature\":0,\"stop\":[\"<end>\"]},\"system\":\"Tell a story.\","
             "\"stream\":false}",
             model_digest);
    expect("POST", "/api/create", body, 200, "{\"status\":\"success\"}");

    // Streamed create of a derived model: progress lines end with success.
    expect("POST", "/api/create", "{\"model\":\"stories:v2\",\"from\":\"stories\"}", 200,
           "\"status\":\"success\"");

    struct http_resp r;
    req_json("GET", "/api/tags", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"name\":\"stories:latest\""));
    assert_non_null(strstr(r.body, "\"name\":\"stories:v2\""));
    assert_non_null(strstr(r.body, "\"family\":\"llama\""));
    assert_non_null(strstr(r.body, "\"format\":\"gguf\""));
    // Ollama 0.33 lists capabilities too (and the context and embedding
    // lengths, which it reads only before the first tokenizer key: this
    // file has them after).
    assert_non_null(strstr(r.body, "\"quantization_level\":\"unknown\"},\"capabilities\":"
                                   "[\"completion\"]"));
    http_resp_free(&r);

    req_json("POST", "/api/show", "{\"model\":\"stories\"}", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"modelfile\":"));
    assert_non_null(strstr(r.body, "\"system\":\"Tell a story.\""));
    assert_non_null(strstr(r.body, "\"general.architecture\":\"llama\""));
    assert_non_null(strstr(r.body, "\"capabilities\":[\"completion\"]"));
    assert_non_null(strstr(r.body, "temperature"));
    http_resp_free(&r);
}

static void test_copy_delete(void **state)
{
    (void)state;
    expect("POST", "/api/copy", "{\"source\":\"stories\",\"destination\":\"backup/stories:b\"}",
           200, NULL);
    expect("POST", "/api/show", "{\"model\":\"backup/stories:b\"}", 200, "\"modelfile\"");
    expect("POST", "/api/copy", "{\"source\":\"nope\",\"destination\":\"x\"}", 404,
           "model \\\"nope\\\" not found");
    expect("POST", "/api/copy", "{\"source\":\"stories\",\"destination\":\"../evil\"}", 400,
           "destination");
    expect("DELETE", "/api/delete", "{\"model\":\"backup/stories:b\"}", 200, NULL);
    expect("DELETE", "/api/delete", "{\"model\":\"backup/stories:b\"}", 404,
           "model 'backup/stories:b' not found");
    // The blob is still referenced by stories:latest.
    char path[160];
    snprintf(path, sizeof(path), "/api/blobs/%s", model_digest);
    expect("HEAD", path, NULL, 200, NULL);
}

static void test_bad_input(void **state)
{
    (void)state;
    expect("POST", "/api/show", "", 400, "missing request body");
    expect("POST", "/api/show", "{\"model\":", 400, "\"error\"");
    expect("POST", "/api/show", "{}", 400, "model is required");
    expect("POST", "/api/show", "{\"model\":\"nope\"}", 404, "model 'nope:latest' not found");
    expect("POST", "/api/show", "{\"model\":\"a/b/c/d/e\"}", 400, "invalid model name");
    expect("DELETE", "/api/delete", "{}", 400, "model is required");
    expect("POST", "/api/create", "{\"model\":\"x\"}", 400,
           "neither 'from' or 'files' was specified");
    expect("POST", "/api/create", "{\"model\":\"x\",\"path\":\"/etc/passwd\"}", 400, "\"error\"");
    char body[512];
    snprintf(body, sizeof(body),
             "{\"model\":\"x\",\"files\":{\"../../x.gguf\":\"%s\"},\"stream\":false}",
             model_digest);
    expect("POST", "/api/create", body, 400, "file path must be relative");
    expect("POST", "/api/create", "{\"model\":\"x\",\"files\":{\"a.gguf\":\"\"},\"stream\":false}",
           400, "invalid digest format");
    expect("POST", "/api/create", "{\"model\":\"bad name!\",\"from\":\"stories\"}", 400,
           "invalid model name");
    // DRAFT files and --draft-quantize (draft_files, draft_quantize).
    expect("POST", "/api/create",
           "{\"model\":\"x\",\"from\":\"stories\",\"draft_quantize\":\"q4_0\"}", 400,
           "--draft-quantize requires a DRAFT model");
    snprintf(body, sizeof(body),
             "{\"model\":\"x\",\"from\":\"stories\",\"draft_files\":{\"../d.gguf\":\"%s\"}}",
             model_digest);
    expect("POST", "/api/create", body, 400, "file path must be relative");
    expect("POST", "/api/create",
           "{\"model\":\"x\",\"from\":\"stories\",\"draft_files\":{\"d.gguf\":\"\"}}", 400,
           "invalid digest format");
    // A base model that is neither local nor pullable (an unreachable local
    // registry: no network is touched).
    expect("POST", "/api/create",
           "{\"model\":\"y\",\"from\":\"127.0.0.1:1/x/does-not-exist\",\"stream\":false}", 404,
           "\"error\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_tags),      cmocka_unit_test(test_blobs),
        cmocka_unit_test(test_create_and_list), cmocka_unit_test(test_copy_delete),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Mixture-of-experts models through the API (issue 17): the tiny qwen3moe
// and gpt-oss fixtures (llama.cpp's layout and Ollama's) are created from
// their GGUF blobs and generate greedily with the server's default F16
// cache; the generated ids (`context`) must be llama.cpp's greedy tokens
// for the same prompt (tiny-<family>.reference.json, kv_cache_type f16),
// and `ollama show` reports the architecture. Skips when shared/fixtures is
// absent; fails when it is there and a case does not match.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "integration/models.h"
#include "json/json.h"
#include "testutil.h"

static struct harness srv;
static bool have_fixtures;

static int setup(void **state)
{
    (void)state;
    char path[1024];
    have_fixtures = test_shared_fixture(path, sizeof path, "tiny-gpt-oss.reference.json") != NULL;
    if (!have_fixtures)
        return 0;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (harness_start(&srv, NULL) != 0) {
        harness_dump_log(&srv);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (!have_fixtures)
        return 0;
    int rc = harness_stop(&srv);
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

static json_t *post_json(const char *path, const char *body)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", srv.base_url, path);
    struct http_resp r;
    assert_int_equal(http_request(url, "POST", NULL, body, strlen(body), 0, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "POST %s -> %ld %s\n", path, r.status, r.body);
    assert_int_equal(r.status, 200);
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(r.body, strlen(r.body), &v, NULL), 0);
    http_resp_free(&r);
    return v;
}

// The f16-cache case of prompt 0 for `file` in a reference file.
static json_t *reference_case(const char *ref_name, const char *file, json_t **root)
{
    char path[1024];
    assert_non_null(test_shared_fixture(path, sizeof path, ref_name));
    struct buf b;
    buf_init(&b, 0);
    assert_true(fs_read_all(path, 1u << 26, &b, NULL) >= 0);
    assert_int_equal(jsonx_parse(b.data, b.len, root, NULL), 0);
    buf_deinit(&b);
    json_t *cases = json_object_get(*root, "logit_cases");
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        if (!strcmp(json_string_value(json_object_get(c, "model")), file) &&
            !strcmp(json_string_value(json_object_get(c, "kv_cache_type")), "f16") &&
            json_integer_value(json_object_get(c, "prompt_index")) == 0)
            return c;
    }
    fail_msg("%s has no f16 case for %s", ref_name, file);
    return NULL;
}

static void check_family(const char *name, const char *file, const char *ref_name, const char *arch)
{
    if (!have_fixtures)
        skip();
    char path[1024];
    assert_non_null(test_shared_fixture(path, sizeof path, file));
    // The bare prompt as template, so that `context` (only sent for
    // templated prompts, as Ollama does) holds exactly the reference's ids.
    assert_int_equal(models_create(&srv, name, path, "\"template\":\"{{ .Prompt }}\""), 0);

    json_t *root = NULL;
    json_t *c = reference_case(ref_name, file, &root);
    json_t *prompt_tokens = json_object_get(c, "prompt_tokens");
    json_t *greedy = json_object_get(c, "greedy_tokens");
    char *body = xasprintf("{\"model\":\"%s\",\"prompt\":%s,\"stream\":false,"
                           "\"options\":{\"temperature\":0,\"num_predict\":%zu,\"num_ctx\":512}}",
                           name, "\"Hello, world!\"", json_array_size(greedy));
    json_t *v = post_json("/api/generate", body);
    free(body);
    json_t *ctx = json_object_get(v, "context");
    size_t np = json_array_size(prompt_tokens), ng = json_array_size(greedy);
    assert_int_equal(json_array_size(ctx), np + ng);
    for (size_t i = 0; i < np; i++)
        assert_int_equal(json_integer_value(json_array_get(ctx, i)),
                         json_integer_value(json_array_get(prompt_tokens, i)));
    for (size_t i = 0; i < ng; i++) {
        long long got = json_integer_value(json_array_get(ctx, np + i));
        long long want = json_integer_value(json_array_get(greedy, i));
        if (got != want)
            fail_msg("%s: greedy token %zu is %lld, llama.cpp %lld", name, i, got, want);
    }
    assert_int_equal(json_integer_value(json_object_get(v, "eval_count")), (json_int_t)ng);
    json_decref(v);
    json_decref(root);

    char *show = xasprintf("{\"model\":\"%s\"}", name);
    v = post_json("/api/show", show);
    free(show);
    json_t *mi = json_object_get(v, "model_info");
    assert_string_equal(json_string_value(json_object_get(mi, "general.architecture")), arch);
    json_decref(v);
}

static void test_qwen3moe(void **state)
{
    (void)state;
    check_family("qwen3moe-tiny", "tiny-qwen3moe-f32.gguf", "tiny-qwen3moe.reference.json",
                 "qwen3moe");
}

static void test_gpt_oss(void **state)
{
    (void)state;
    check_family("gpt-oss-tiny", "tiny-gpt-oss-f32.gguf", "tiny-gpt-oss.reference.json", "gpt-oss");
}

static void test_gpt_oss_ollama_layout(void **state)
{
    (void)state;
    check_family("gptoss-tiny", "tiny-gpt-oss-ollama-f32.gguf", "tiny-gpt-oss.reference.json",
                 "gptoss");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_gpt_oss),
        cmocka_unit_test(test_gpt_oss_ollama_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

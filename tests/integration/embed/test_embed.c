// Encoder embeddings end to end: generated bert / nomic-bert models (and a
// CLS-pooled bert) created in a temporary store of a real `ollama serve`,
// /api/embed against llama.cpp's reference vectors
// (tests/fixtures/bert/README.md), the embedding-only capability, truncation
// to num_ctx, and generate refused for an encoder.
//
// Tolerance: cosine >= 0.9999 with the reference (returned vectors are
// L2-normalized, the reference is not: cosine does not care).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "gguf/gguf.h"
#include "integration/models.h"
#include "json/json.h"
#include "testgguf.h"
#include "testutil.h"

static struct harness srv;
static char tmp[64];
static char paths[3][128];  // tiny-bert, tiny-nomic-bert, tiny-bert with CLS pooling
static json_t *ref;

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char p[512], vocab[512];
    struct buf b;
    buf_init(&b, 0);
    if (fs_read_all(test_fixture(p, sizeof p, "bert/reference.json"), 1u << 24, &b, NULL) < 0 ||
        jsonx_parse(b.data, b.len, &ref, NULL) < 0)
        return -1;
    buf_deinit(&b);
    const char *bin = getenv("OLLAMA_BIN_DIR");
    snprintf(tmp, sizeof tmp, "/tmp/test_embed.XXXXXX");
    if (!bin || !mkdtemp(tmp))
        return -1;
    test_fixture(vocab, sizeof vocab, "vocab/ggml-vocab-bert-bge.gguf");
    const char *presets[2] = {"tiny-bert", "tiny-nomic-bert"};
    for (int i = 0; i < 2; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s.gguf", tmp, presets[i]);
        char *cmd = xasprintf("'%s/gguf-gen' --preset %s --seed 1 --vocab '%s' --quiet -o '%s'",
                              bin, presets[i], vocab, paths[i]);
        int rc = system(cmd);
        free(cmd);
        if (rc != 0)
            return -1;
    }
    snprintf(paths[2], sizeof paths[2], "%s/tiny-bert-cls.gguf", tmp);
    if (test_gguf_set_arch_u32(paths[0], paths[2], "pooling_type", 2) < 0)
        return -1;
    static const char *const env[] = {"OLLAMA_NUM_PARALLEL=2", NULL};
    if (harness_start(&srv, env) != 0) {
        harness_dump_log(&srv);
        return -1;
    }
    if (models_create(&srv, "bert", paths[0], "") < 0 ||
        models_create(&srv, "nomic", paths[1], "") < 0 ||
        models_create(&srv, "bert-cls", paths[2], "") < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = harness_stop(&srv);
    for (int i = 0; i < 3; i++)
        unlink(paths[i]);
    rmdir(tmp);
    json_decref(ref);
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

static void post(const char *path, const char *body, struct http_resp *r)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", srv.base_url, path);
    assert_int_equal(http_request(url, "POST", NULL, body, strlen(body), 0, r), 0);
}

static json_t *post_json(const char *path, const char *body, long want_status)
{
    struct http_resp r;
    post(path, body, &r);
    if (r.status != want_status)
        fprintf(stderr, "POST %s %s -> %ld %s\n", path, body, r.status, r.body);
    assert_int_equal(r.status, want_status);
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(r.body, strlen(r.body), &v, NULL), 0);
    http_resp_free(&r);
    return v;
}

// Cosine of a returned vector with the reference `kind` of input i.
static double ref_cosine(const char *model, const char *kind, size_t i, json_t *got)
{
    json_t *want = json_array_get(
        json_object_get(json_object_get(json_object_get(ref, "models"), model), kind), i);
    size_t n = json_array_size(want);
    assert_int_equal(json_array_size(got), n);
    double ab = 0, aa = 0, bb = 0;
    for (size_t k = 0; k < n; k++) {
        double a = json_number_value(json_array_get(got, k));
        double b = json_number_value(json_array_get(want, k));
        ab += a * b;
        aa += a * a;
        bb += b * b;
    }
    assert_true(fabs(aa - 1) < 1e-4);  // L2-normalized
    return ab / sqrt(aa * bb);
}

// All reference inputs in one request; each vector against the reference.
static void check_model(const char *name, const char *ref_model, const char *kind)
{
    json_t *inputs = json_object_get(ref, "inputs");
    json_t *req = json_pack("{s:s,s:O}", "model", name, "input", inputs);
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *v = post_json("/api/embed", body, 200);
    free(body);
    json_decref(req);
    json_t *embs = json_object_get(v, "embeddings");
    assert_int_equal(json_array_size(embs), json_array_size(inputs));
    json_t *tokens =
        json_object_get(json_object_get(json_object_get(ref, "models"), ref_model), "tokens");
    int64_t n_tokens = 0;
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        double c = ref_cosine(ref_model, kind, i, json_array_get(embs, i));
        if (c < 0.9999)
            fprintf(stderr, "%s input %zu: cosine %.7f\n", name, i, c);
        assert_true(c >= 0.9999);
        n_tokens += (int64_t)json_array_size(json_array_get(tokens, i));
    }
    assert_int_equal(json_integer_value(json_object_get(v, "prompt_eval_count")), n_tokens);
    json_decref(v);
}

static void test_bert_mean(void **state)
{
    (void)state;
    check_model("bert", "tiny-bert", "mean");
}

static void test_nomic_mean(void **state)
{
    (void)state;
    check_model("nomic", "tiny-nomic-bert", "mean");
}

static void test_bert_cls(void **state)
{
    (void)state;
    check_model("bert-cls", "tiny-bert", "cls");
}

// Embedding-only: /api/show reports "embedding" (no "completion") and
// /api/generate is refused.
static void test_capabilities(void **state)
{
    (void)state;
    json_t *v = post_json("/api/show", "{\"model\":\"bert\"}", 200);
    json_t *caps = json_object_get(v, "capabilities");
    bool embedding = false, completion = false;
    for (size_t i = 0; i < json_array_size(caps); i++) {
        const char *c = json_string_value(json_array_get(caps, i));
        embedding |= strcmp(c, "embedding") == 0;
        completion |= strcmp(c, "completion") == 0;
    }
    assert_true(embedding);
    assert_false(completion);
    json_decref(v);
    struct http_resp r;
    post("/api/generate", "{\"model\":\"bert\",\"prompt\":\"hi\",\"stream\":false}", &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "does not support"));
    http_resp_free(&r);
}

// num_ctx 8: ten words keep [CLS] + six words + [SEP], which is reference
// input 4 ("one two three four five six"); truncate:false refuses them.
static void test_truncation(void **state)
{
    (void)state;
    json_t *v = post_json("/api/embed",
                          "{\"model\":\"bert\",\"input\":\"one two three four five six seven "
                          "eight nine ten\",\"options\":{\"num_ctx\":8}}",
                          200);
    json_t *embs = json_object_get(v, "embeddings");
    assert_int_equal(json_array_size(embs), 1);
    assert_true(ref_cosine("tiny-bert", "mean", 4, json_array_get(embs, 0)) >= 0.9999);
    assert_int_equal(json_integer_value(json_object_get(v, "prompt_eval_count")), 8);
    json_decref(v);
    v = post_json("/api/embed",
                  "{\"model\":\"bert\",\"input\":\"one two three four five six seven eight nine "
                  "ten\",\"truncate\":false,\"options\":{\"num_ctx\":8}}",
                  400);
    assert_non_null(
        strstr(json_string_value(json_object_get(v, "error")), "exceeds the context length"));
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bert_mean),  cmocka_unit_test(test_nomic_mean),
        cmocka_unit_test(test_bert_cls),   cmocka_unit_test(test_capabilities),
        cmocka_unit_test(test_truncation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// The i-quant and ternary tiny models through the API (issue 25): each
// ../shared/fixtures/tiny-iq-<type>.gguf is created with /api/create, shows
// its tensor types in /api/show, and /api/generate (greedy)
// tokenizes the prompt and continues it as llama.cpp does
// (tiny-iq.reference.json, the F16-cache cases: the server's default
// cache). Skipped only when ../shared is absent.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "integration/models.h"
#include "json/json.h"
#include "testutil.h"

static struct harness srv;
static int n_compared;  // greedy tokens compared over all cases

static int setup(void **state)
{
    (void)state;
    if (harness_setup(&srv, NULL) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

static json_t *post_json(const char *path, const char *body)
{
    struct http_resp r;
    assert_int_equal(harness_request(&srv, "POST", path, NULL, body, &r), 0);
    if (r.status != 200)
        fail_msg("POST %s %s -> %ld %s", path, body, r.status, r.body);
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(r.body, strlen(r.body), &v, NULL), 0);
    http_resp_free(&r);
    return v;
}

// One reference case: prompt ids as llama.cpp tokenized them, then the
// greedy tokens up to the first choice closer than the tolerance (where
// rounding may legitimately pick the other token).
static void check_case(const char *name, const json_t *c)
{
    const json_t *pt = json_object_get(c, "prompt_tokens"),
                 *gt = json_object_get(c, "greedy_tokens");
    const json_t *margin = json_object_get(c, "greedy_top1_margin");
    size_t np = json_array_size(pt), ng = json_array_size(gt);
    // Not raw (a raw request returns no context); the model has no chat
    // template, so the prompt goes through unchanged.
    json_t *req = json_pack("{s:s, s:s, s:b, s:{s:i, s:f}}", "model", name, "prompt",
                            json_string_value(json_object_get(c, "prompt")), "stream", 0, "options",
                            "num_predict", (int)ng, "temperature", 0.0);
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *v = post_json("/api/generate", body);
    free(body);
    json_decref(req);
    const json_t *ctx = json_object_get(v, "context");
    assert_true(json_array_size(ctx) >= np);
    for (size_t i = 0; i < np; i++)
        if (json_integer_value(json_array_get(ctx, i)) != json_integer_value(json_array_get(pt, i)))
            fail_msg("%s: prompt token %zu differs from llama.cpp's", name, i);
    size_t got = json_array_size(ctx) - np;
    for (size_t g = 0; g < ng && g < got; g++) {
        if (json_real_value(json_array_get(margin, g)) < 0.1)
            break;
        json_int_t want = json_integer_value(json_array_get(gt, g));
        json_int_t have = json_integer_value(json_array_get(ctx, np + g));
        if (want != have)
            fail_msg("%s: greedy token %zu is %lld, llama.cpp %lld", name, g, (long long)have,
                     (long long)want);
        n_compared++;
    }
    json_decref(v);
}

static void test_tiny_iq_models(void **state)
{
    (void)state;
    char ref[1024], path[1024];
    if (!test_shared_fixture(ref, sizeof ref, "tiny-iq.reference.json")) {
        printf("skip: shared fixtures absent (tiny-iq.reference.json)\n");
        return;
    }
    json_t *root = json_load_file(ref, 0, NULL);
    assert_non_null(root);
    const json_t *cases = json_object_get(root, "logit_cases");
    static const char *const types[] = {"iq1_s", "iq1_m",  "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs",
                                        "iq3_s", "iq4_nl", "iq4_xs",  "tq1_0",  "tq2_0"};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        char file[64], name[64];
        snprintf(file, sizeof file, "tiny-iq-%s.gguf", types[t]);
        snprintf(name, sizeof name, "tiny-iq-%s", types[t]);
        if (!test_shared_fixture(path, sizeof path, file))
            fail_msg("missing shared fixture %s", file);
        assert_int_equal(models_create(&srv, name, path, ""), 0);
        // /api/show lists the block matrices with their type's name.
        char body[256], upper[16];
        snprintf(body, sizeof body, "{\"model\":\"%s\",\"verbose\":true}", name);
        json_t *show = post_json("/api/show", body);
        char *dump = json_dumps(show, JSON_COMPACT);
        size_t i = 0;
        for (; types[t][i] && i < sizeof upper - 1; i++)
            upper[i] =
                (char)(types[t][i] >= 'a' && types[t][i] <= 'z' ? types[t][i] - 32 : types[t][i]);
        upper[i] = '\0';
        char want[64];
        snprintf(want, sizeof want, "\"type\":\"%s\"", upper);
        if (!strstr(dump, want))
            fail_msg("/api/show of %s lacks %s", name, want);
        free(dump);
        json_decref(show);
        int n = 0;
        for (size_t k = 0; k < json_array_size(cases); k++) {
            const json_t *c = json_array_get(cases, k);
            if (strcmp(json_string_value(json_object_get(c, "model")), file) != 0 ||
                strcmp(json_string_value(json_object_get(c, "kv_cache_type")), "f16") != 0)
                continue;
            check_case(name, c);
            n++;
        }
        assert_true(n > 0);
    }
    json_decref(root);
    printf("compared %d greedy tokens\n", n_compared);
    assert_true(n_compared >= 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_iq_models),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

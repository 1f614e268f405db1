// Speculative decoding in the real `ollama runner` with the committed
// stories260K fixture: whatever drafts (prompt lookup, a draft model that
// always agrees — the target itself —, one that never agrees — the target
// with its output norm negated, so its argmax is the target's argmin), the
// output is token for token what the target alone produces: greedy, seeded
// sampling, logprobs, stop sequences, JSON format, parallel slots, context
// shift. The final line's draft statistics show the drafts were used.
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runner_harness.h"
#include "testutil.h"

static char model_path[512];
static char negated_path[64];  // the never-agreeing draft, written by setup

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(model_path, sizeof(model_path), "%s/tests/fixtures/stories260K.gguf",
             test_source_dir());
    snprintf(negated_path, sizeof(negated_path), "/tmp/ollama-spec-negated-%d.gguf", (int)getpid());
    return rh_write_negated(model_path, negated_path);
}

static int teardown(void **state)
{
    (void)state;
    unlink(negated_path);
    curl_global_cleanup();
    return 0;
}

static void start(struct rharness *h, const char *const *extra)
{
    if (rh_start_model(h, model_path, extra) != 0)
        fail_msg("runner did not become ready");
}

// One completion: the streamed text, the final line, and every logprobs
// entry of the stream in order.
struct result {
    struct rh_stream s;
    json_t *logprobs;
};

static void run(const struct rharness *h, const char *prompt, const char *options,
                const char *extra, struct result *r)
{
    char *body = xasprintf("{\"prompt\":\"%s\",\"return_context\":true,\"cache_prompt\":false,"
                           "\"options\":{%s}%s%s}",
                           prompt, options, extra ? "," : "", extra ? extra : "");
    char *out = NULL;
    long st = rh_request(h, "/completion", body, &out, 0, 120);
    if (st != 200)
        fail_msg("status %ld for %s: %s", st, body, out);
    rh_stream_parse(out, &r->s);
    assert_true(r->s.all_lines_valid);
    assert_non_null(r->s.final);
    if (json_object_get(r->s.final, "error"))
        fail_msg("%s: %s", body, json_string_value(json_object_get(r->s.final, "error")));
    r->logprobs = json_array();
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        json_t *v = NULL;
        assert_int_equal(jsonx_parse(p, len, &v, NULL), 0);
        json_t *lps = json_object_get(v, "logprobs");
        if (lps)
            json_array_extend(r->logprobs, lps);
        json_decref(v);
        p += len + (nl ? 1 : 0);
    }
    free(out);
    free(body);
}

static void result_free(struct result *r)
{
    rh_stream_free(&r->s);
    json_decref(r->logprobs);
}

// Same tokens (the final context: prompt + output ids), text, done reason;
// logprobs of the same tokens within float rounding (a batched pass and a
// one-token pass add in different orders: ~2e-3 seen with the F16 cache).
static void assert_same(const struct result *a, const struct result *b)
{
    assert_string_equal(a->s.text, b->s.text);
    assert_string_equal(rh_final_str(&a->s, "done_reason"), rh_final_str(&b->s, "done_reason"));
    assert_int_equal(rh_final_int(&a->s, "eval_count"), rh_final_int(&b->s, "eval_count"));
    json_t *ca = json_object_get(a->s.final, "context"),
           *cb = json_object_get(b->s.final, "context");
    assert_int_equal(json_array_size(ca), json_array_size(cb));
    for (size_t i = 0; i < json_array_size(ca); i++)
        assert_int_equal(json_integer_value(json_array_get(ca, i)),
                         json_integer_value(json_array_get(cb, i)));
    assert_int_equal(json_array_size(a->logprobs), json_array_size(b->logprobs));
    for (size_t i = 0; i < json_array_size(a->logprobs); i++) {
        json_t *x = json_array_get(a->logprobs, i), *y = json_array_get(b->logprobs, i);
        assert_string_equal(json_string_value(json_object_get(x, "token")),
                            json_string_value(json_object_get(y, "token")));
        double lx = json_number_value(json_object_get(x, "logprob"));
        double ly = json_number_value(json_object_get(y, "logprob"));
        if (!(fabs(lx - ly) < 1e-2))
            fail_msg("logprob %zu of \"%s\": %g vs %g", i,
                     json_string_value(json_object_get(x, "token")), lx, ly);
    }
}

static const char *const prompts[] = {
    "Once upon a time",
    "Lily and Tom went to the park. They saw a big",
    "The little dog was sad because",
    "Tom had a red ball. Tom had a red ball. Tom had a red ball. Tom had a",
    "One, two, three. One, two, three. One, two,",
};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))

// Every prompt with and without `spec` (options added to a greedy request,
// with logprobs) gives the same result. Returns the drafts proposed and
// accepted over all prompts.
static void compare_all(const struct rharness *h, const char *spec, int64_t *drafted,
                        int64_t *accepted)
{
    *drafted = *accepted = 0;
    for (size_t i = 0; i < N_PROMPTS; i++) {
        struct result plain, fast;
        const char *extra = "\"logprobs\":true,\"top_logprobs\":2";
        run(h, prompts[i], "\"temperature\":0,\"num_predict\":80,\"draft_num_predict\":0", extra,
            &plain);
        char *opts = xasprintf("\"temperature\":0,\"num_predict\":80,%s", spec);
        run(h, prompts[i], opts, extra, &fast);
        assert_same(&plain, &fast);
        assert_int_equal(rh_final_int(&plain.s, "draft_count"), -1);
        int64_t d = rh_final_int(&fast.s, "draft_count");
        int64_t a = rh_final_int(&fast.s, "draft_accepted_count");
        if (d > 0) {
            assert_true(a >= 0 && a <= d);
            *drafted += d;
            *accepted += a;
        }
        result_free(&plain);
        result_free(&fast);
        free(opts);
    }
}

// ---------------------------------------------------------------------------

static void test_lookup_equals_plain(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--parallel", "2", NULL};
    start(&h, extra);
    static const char *const specs[] = {
        "\"draft_ngram\":1",
        "\"draft_ngram\":3",
        "\"draft_ngram\":2,\"draft_num_predict\":10",
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        int64_t d, a;
        compare_all(&h, specs[i], &d, &a);
        // The repetitive prompts give the lookup matches the target takes.
        assert_true(d > 0);
        assert_true(a > 0);
    }
    // draft_num_predict 0 turns speculation off.
    struct result r;
    run(&h, prompts[3],
        "\"temperature\":0,\"num_predict\":16,\"draft_ngram\":2,"
        "\"draft_num_predict\":0",
        NULL, &r);
    assert_int_equal(rh_final_int(&r.s, "draft_count"), -1);
    result_free(&r);
    // A bad n-gram length is refused.
    char *out = NULL;
    assert_int_equal(rh_request(&h, "/completion",
                                "{\"prompt\":\"x\",\"options\":{\"draft_ngram\":-1}}", &out, 0, 30),
                     400);
    assert_non_null(strstr(out, "draft_ngram must be between 0 and 16"));
    free(out);
    assert_int_equal(rh_stop(&h), 0);
}

// The target as its own draft agrees with itself at every drafted token.
static void test_draft_always_agrees(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--draft", model_path, NULL};
    start(&h, extra);
    int64_t d, a;
    compare_all(&h, "\"draft_num_predict\":6", &d, &a);
    assert_true(d > 0);
    assert_int_equal(a, d);
    // Default draft_num_predict (4) applies when a draft model is loaded.
    compare_all(&h, "\"seed\":1", &d, &a);
    assert_true(d > 0);
    assert_int_equal(a, d);
    assert_int_equal(rh_stop(&h), 0);
}

// A draft whose every guess is the target's least likely token: nothing is
// accepted, and the output is still the target's.
static void test_draft_never_agrees(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--draft", negated_path, "--parallel", "2", NULL};
    start(&h, extra);
    int64_t d, a;
    compare_all(&h, "\"draft_num_predict\":4", &d, &a);
    assert_true(d > 0);
    assert_int_equal(a, 0);
    assert_int_equal(rh_stop(&h), 0);
}

// Stop sequences, JSON format (drafts the grammar rejects are rejected),
// seeded sampling (the same sampler calls in the same order) and
// num_predict limits give the same output with drafts.
static void test_spec_options(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--draft", model_path, NULL};
    start(&h, extra);
    static const struct {
        const char *options, *extra;
    } cases[] = {
        {"\"temperature\":0,\"num_predict\":80,\"stop\":[\"ball\"]", NULL},
        {"\"temperature\":0,\"num_predict\":80,\"stop\":[\". \"]", NULL},
        {"\"temperature\":0,\"num_predict\":48", "\"format\":\"json\""},
        {"\"temperature\":0.9,\"seed\":42,\"num_predict\":60", NULL},
        {"\"temperature\":1.2,\"seed\":7,\"top_k\":20,\"num_predict\":60", "\"logprobs\":true"},
        {"\"temperature\":0,\"num_predict\":3", NULL},
        {"\"temperature\":0,\"num_predict\":60,\"repeat_penalty\":1.3", NULL},
    };
    static const char *const specs[] = {"\"draft_num_predict\":0", "\"draft_num_predict\":5",
                                        "\"draft_ngram\":2,\"draft_num_predict\":5"};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (size_t p = 0; p < N_PROMPTS; p += 3) {
            struct result want;
            char *o = xasprintf("%s,%s", cases[c].options, specs[0]);
            run(&h, prompts[p], o, cases[c].extra, &want);
            free(o);
            for (size_t k = 1; k < sizeof(specs) / sizeof(specs[0]); k++) {
                struct result got;
                o = xasprintf("%s,%s", cases[c].options, specs[k]);
                run(&h, prompts[p], o, cases[c].extra, &got);
                assert_same(&want, &got);
                result_free(&got);
                free(o);
            }
            result_free(&want);
        }
    }
    assert_int_equal(rh_stop(&h), 0);
}

// A small window: the drafts stop at its end, the context shifts as without
// them, and the output is the same.
static void test_spec_context_shift(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--ctx-size", "32", "--draft", model_path, NULL};
    start(&h, extra);
    struct result want, got, lookup;
    run(&h, prompts[0], "\"temperature\":0,\"num_predict\":100,\"draft_num_predict\":0", NULL,
        &want);
    run(&h, prompts[0], "\"temperature\":0,\"num_predict\":100,\"draft_num_predict\":6", NULL,
        &got);
    run(&h, prompts[0], "\"temperature\":0,\"num_predict\":100,\"draft_ngram\":3", NULL, &lookup);
    assert_int_equal(rh_final_int(&want.s, "eval_count"), 100);
    assert_string_equal(want.s.text, got.s.text);
    assert_string_equal(want.s.text, lookup.s.text);
    assert_true(rh_final_int(&got.s, "draft_count") > 0);
    result_free(&want);
    result_free(&got);
    result_free(&lookup);
    assert_int_equal(rh_stop(&h), 0);
}

// Parallel slots, each drafting: every stream equals its single run.
struct job {
    const struct rharness *h;
    const char *prompt, *options;
    struct result r;
};

static void *job_run(void *p)
{
    struct job *j = p;
    run(j->h, j->prompt, j->options, NULL, &j->r);
    return NULL;
}

static void test_spec_parallel(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--parallel", "4", "--draft", model_path, NULL};
    start(&h, extra);
    const char *plain = "\"temperature\":0,\"num_predict\":60,\"draft_num_predict\":0";
    const char *opts[] = {"\"temperature\":0,\"num_predict\":60",
                          "\"temperature\":0,\"num_predict\":60,\"draft_ngram\":2"};
    struct job jobs[N_PROMPTS];
    pthread_t t[N_PROMPTS];
    for (size_t i = 0; i < N_PROMPTS; i++) {
        jobs[i] = (struct job){.h = &h, .prompt = prompts[i], .options = opts[i % 2]};
        pthread_create(&t[i], NULL, job_run, &jobs[i]);
    }
    for (size_t i = 0; i < N_PROMPTS; i++)
        pthread_join(t[i], NULL);
    for (size_t i = 0; i < N_PROMPTS; i++) {
        struct result want;
        run(&h, prompts[i], plain, NULL, &want);
        assert_string_equal(want.s.text, jobs[i].r.s.text);
        result_free(&want);
        result_free(&jobs[i].r);
    }
    assert_int_equal(rh_stop(&h), 0);
}

// Requests that open alike, one after another on different slots (no
// prompt cache: each takes the least recently used slot): the draft
// model's slot takes the opening from the slot that drafted for the
// previous request (spec.c catch_up). The target as its own draft still
// agrees at every drafted token, so the copied rows are the right ones, and
// the output is the target's.
static void test_spec_shared_opening(void **state)
{
    (void)state;
    struct rharness h;
    const char *extra[] = {"--parallel", "3", "--draft", model_path, NULL};
    setenv("OLLAMA_DEBUG", "1", 1);  // the runner logs each copy
    start(&h, extra);
    unsetenv("OLLAMA_DEBUG");
    static const char *const endings[] = {"Once upon a time", "The little dog was sad because",
                                          "Ben liked to eat", "Mom said to Sue,"};
    for (size_t i = 0; i < sizeof endings / sizeof endings[0]; i++) {
        char *prompt = xasprintf("Sue had a big red ball. She liked to play with it in the park "
                                 "with her friend Tim every day. %s",
                                 endings[i]);
        struct result plain, fast;
        run(&h, prompt, "\"temperature\":0,\"num_predict\":40,\"draft_num_predict\":0", NULL,
            &plain);
        run(&h, prompt, "\"temperature\":0,\"num_predict\":40,\"draft_num_predict\":4", NULL,
            &fast);
        assert_string_equal(plain.s.text, fast.s.text);
        int64_t d = rh_final_int(&fast.s, "draft_count");
        assert_true(d > 0);
        assert_int_equal(rh_final_int(&fast.s, "draft_accepted_count"), d);
        result_free(&plain);
        result_free(&fast);
        free(prompt);
    }
    // From the second request on, the least recently used slot's draft
    // cache is empty (its last request did not draft) or holds another
    // prompt: the opening comes from the slot that drafted last.
    char *log = rh_log(&h);
    bool took = false;
    for (const char *p = strstr(log, "draft: slot"); p && !took; p = strstr(p + 1, "draft: slot")) {
        const char *eol = strchr(p, '\n'), *t = strstr(p, " tokens from slot ");
        took = t && (!eol || t < eol);
    }
    if (!took)
        fail_msg("no draft slot took a prefix from another:\n%s", log);
    free(log);
    assert_int_equal(rh_stop(&h), 0);
}

// gguf-gen writes a small llama whose F32 weights (the target) and Q4_0
// quantization (the draft) come from one seed; `confident` adds --confident
// 2 to both (an untied output whose rows are permuted token embeddings).
static void gen_pair(const char *dir, bool confident, char *target, char *draft, size_t n)
{
    const char *bin = getenv("OLLAMA_BIN_DIR");
    assert_non_null(bin);
    const char *type[2] = {"f32", "q4_0"};
    char *out[2] = {target, draft};
    for (int i = 0; i < 2; i++) {
        snprintf(out[i], n, "%s/%s-%s.gguf", dir, confident ? "confident" : "random", type[i]);
        char *cmd = xasprintf("'%s/gguf-gen' --arch llama --n-embd 256 --n-layer 2 --n-head 4 "
                              "--n-ff 512 --n-vocab 512 --untied %s --type %s --quiet -o '%s'",
                              bin, confident ? "--confident 2" : "", type[i], out[i]);
        assert_int_equal(system(cmd), 0);
        free(cmd);
    }
}

// A quantized draft agrees with its target as often as the target is sure
// of its tokens. On seeded random weights the logits are nearly flat and
// 4-bit rounding flips the argmax; with gguf-gen --confident (the model the
// speculative benchmark uses) the Q4_0 draft's tokens are accepted. Either
// way the output is the target's.
static void test_quantized_draft(void **state)
{
    (void)state;
    char dir[] = "/tmp/ollama-spec-q-XXXXXX";
    assert_non_null(mkdtemp(dir));
    double rate[2];
    for (int confident = 0; confident < 2; confident++) {
        char target[128], draft[128];
        gen_pair(dir, confident, target, draft, sizeof(target));
        struct rharness h;
        const char *extra[] = {"--draft", draft, NULL};
        if (rh_start_model(&h, target, extra) != 0)
            fail_msg("runner did not become ready");
        int64_t d, a;
        compare_all(&h, "\"draft_num_predict\":4", &d, &a);
        assert_true(d > 0);
        rate[confident] = (double)a / (double)d;
        printf("%s weights: %lld of %lld drafted tokens accepted\n",
               confident ? "--confident" : "random", (long long)a, (long long)d);
        assert_int_equal(rh_stop(&h), 0);
        unlink(target);
        unlink(draft);
    }
    assert_true(rate[0] < 0.5);
    assert_true(rate[1] >= 0.9);
    rmdir(dir);
}

// A draft model must share the target's vocabulary; an embedding model or a
// missing file cannot draft. The runner says so and exits.
static void expect_load_error(const char *draft, const char *want)
{
    struct rharness h;
    const char *args[] = {"--model", model_path, "--draft", draft, "--threads", "1", NULL};
    assert_int_equal(rh_spawn(&h, args), 0);
    assert_false(rh_wait_ready(&h));
    char *log = rh_log(&h);
    if (!strstr(log, want))
        fail_msg("want \"%s\" in the runner's log:\n%s", want, log);
    free(log);
    unlink(h.log_path);
}

static void test_draft_errors(void **state)
{
    (void)state;
    char path[600];
    if (test_shared_fixture(path, sizeof(path), "tiny-llama-f32.gguf"))
        expect_load_error(path, "draft model vocabulary does not match the target model's");
    else
        printf("skip: shared/fixtures/tiny-llama-f32.gguf absent (vocabulary mismatch case)\n");
    expect_load_error("/nonexistent/draft.gguf", "draft model");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_equals_plain), cmocka_unit_test(test_draft_always_agrees),
        cmocka_unit_test(test_draft_never_agrees),  cmocka_unit_test(test_spec_options),
        cmocka_unit_test(test_spec_context_shift),  cmocka_unit_test(test_spec_parallel),
        cmocka_unit_test(test_spec_shared_opening), cmocka_unit_test(test_draft_errors),
        cmocka_unit_test(test_quantized_draft),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Models with recurrent layers in the real `ollama runner` (issue 42): the
// shared tiny fixtures of each layer kind (gated delta net, Mamba-2, short
// convolution; and MLA, which is not recurrent) behind the same runner paths
// as every other model. Greedy output must not depend on how it was reached:
//   - prompt lookup drafts (rejected drafts roll the recurrent state back),
//   - the prompt cache (a second request sharing a prefix resumes from a
//     state checkpoint instead of position 0),
//   - four parallel slots decoding different prompts in one batch,
//   - a JSON-format grammar, with and without drafts;
// and a context that fills ends the generation with done_reason "length"
// (no context shift for recurrent state).
//
// Fails when ../shared/fixtures is present and a file is missing; skips
// with a message when it is absent.
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runner_harness.h"
#include "testutil.h"

static const char *const fixtures[] = {
    "tiny-qwen35-f32.gguf",      // gated delta net + gated attention
    "tiny-nemotron_h-f32.gguf",  // Mamba-2 + attention + MLP layers
    "tiny-lfm2-f32.gguf",        // short convolutions + attention
};
#define N_FIXTURES (sizeof fixtures / sizeof fixtures[0])

static const char *const prompts[] = {
    "Once upon a time",
    "Tom had a red ball. Tom had a red ball. Tom had a red ball. Tom had a",
    "One, two, three. One, two, three. One, two,",
    "The little dog was sad because",
};
#define N_PROMPTS (sizeof prompts / sizeof prompts[0])

static bool have_shared;

static int setup(void **state)
{
    (void)state;
    char p[1024];
    have_shared = test_shared_fixture(p, sizeof p, "README.md");
    if (!have_shared)
        fprintf(stderr, "shared fixtures absent: skipping the hybrid runner tests\n");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    curl_global_cleanup();
    return 0;
}

// The final line and the output of one completion (greedy).
struct result {
    struct rh_stream s;
};

static void run(const struct rharness *h, const char *prompt, const char *options, bool cache,
                const char *extra, struct result *r)
{
    char *body =
        xasprintf("{\"prompt\":\"%s\",\"return_context\":true,\"cache_prompt\":%s,"
                  "\"options\":{\"temperature\":0,%s}%s%s}",
                  prompt, cache ? "true" : "false", options, extra ? "," : "", extra ? extra : "");
    char *out = NULL;
    long st = rh_request(h, "/completion", body, &out, 0, 120);
    if (st != 200)
        fail_msg("status %ld for %s: %s", st, body, out);
    rh_stream_parse(out, &r->s);
    assert_non_null(r->s.final);
    if (json_object_get(r->s.final, "error"))
        fail_msg("%s: %s", body, json_string_value(json_object_get(r->s.final, "error")));
    free(out);
    free(body);
}

// Same context (prompt + output ids), text and done reason.
static void assert_same(const struct result *a, const struct result *b, const char *what)
{
    json_t *ca = json_object_get(a->s.final, "context"),
           *cb = json_object_get(b->s.final, "context");
    if (json_array_size(ca) != json_array_size(cb))
        fail_msg("%s: %zu tokens vs %zu", what, json_array_size(ca), json_array_size(cb));
    for (size_t i = 0; i < json_array_size(ca); i++)
        if (json_integer_value(json_array_get(ca, i)) != json_integer_value(json_array_get(cb, i)))
            fail_msg("%s: token %zu differs", what, i);
    assert_string_equal(a->s.text, b->s.text);
    assert_string_equal(rh_final_str(&a->s, "done_reason"), rh_final_str(&b->s, "done_reason"));
}

static bool start(struct rharness *h, const char *file, const char *const *extra)
{
    char path[1024];
    if (!test_shared_fixture(path, sizeof path, file))
        fail_msg("shared fixtures present but %s is missing", file);
    if (rh_start_model(h, path, extra) != 0)
        fail_msg("runner did not become ready for %s", file);
    return true;
}

struct job {
    const struct rharness *h;
    const char *prompt;
    struct result r;
};

static void *job_run(void *p)
{
    struct job *j = p;
    run(j->h, j->prompt, "\"num_predict\":40", false, NULL, &j->r);
    return NULL;
}

static void check_model(const char *file)
{
    struct rharness h;
    const char *extra[] = {"--parallel", "4", NULL};
    start(&h, file, extra);
    int64_t drafted = 0;
    for (size_t i = 0; i < N_PROMPTS; i++) {
        struct result plain, lookup, again, cached;
        run(&h, prompts[i], "\"num_predict\":40,\"draft_num_predict\":0", false, NULL, &plain);
        run(&h, prompts[i], "\"num_predict\":40,\"draft_ngram\":1,\"draft_num_predict\":6", false,
            NULL, &lookup);
        assert_same(&plain, &lookup, "prompt lookup");
        int64_t d = rh_final_int(&lookup.s, "draft_count");
        drafted += d > 0 ? d : 0;
        // The prompt cache: the same prompt twice (the second resumes from
        // the checkpoint before the prompt's end), then a prompt that extends
        // the first request's whole context.
        run(&h, prompts[i], "\"num_predict\":40", true, NULL, &again);
        run(&h, prompts[i], "\"num_predict\":40", true, NULL, &cached);
        assert_same(&plain, &again, "prompt cache (first)");
        assert_same(&plain, &cached, "prompt cache (second)");
        rh_stream_free(&plain.s);
        rh_stream_free(&lookup.s);
        rh_stream_free(&again.s);
        rh_stream_free(&cached.s);
    }
    assert_true(drafted > 0);

    // Four slots at once give what each gives alone.
    struct job jobs[N_PROMPTS];
    pthread_t t[N_PROMPTS];
    for (size_t i = 0; i < N_PROMPTS; i++) {
        jobs[i] = (struct job){.h = &h, .prompt = prompts[i]};
        pthread_create(&t[i], NULL, job_run, &jobs[i]);
    }
    for (size_t i = 0; i < N_PROMPTS; i++)
        pthread_join(t[i], NULL);
    for (size_t i = 0; i < N_PROMPTS; i++) {
        struct result want;
        run(&h, prompts[i], "\"num_predict\":40", false, NULL, &want);
        assert_same(&want, &jobs[i].r, "parallel slots");
        rh_stream_free(&want.s);
        rh_stream_free(&jobs[i].r.s);
    }

    // A grammar: drafts it rejects are rolled back like any other.
    const char *fmt = "\"format\":\"json\"";
    struct result gp, gl;
    run(&h, prompts[1], "\"num_predict\":24,\"draft_num_predict\":0", false, fmt, &gp);
    run(&h, prompts[1], "\"num_predict\":24,\"draft_ngram\":1", false, fmt, &gl);
    assert_same(&gp, &gl, "json format with drafts");
    assert_true(gp.s.text[0] == '{' || gp.s.text[0] == '[' || gp.s.text[0] == ' ' ||
                gp.s.text[0] == '\n' || gp.s.text[0] == '\0');
    rh_stream_free(&gp.s);
    rh_stream_free(&gl.s);
    assert_int_equal(rh_stop(&h), 0);

    // A full context ends the generation: no context shift for these models.
    const char *small[] = {"--ctx-size", "32", NULL};
    start(&h, file, small);
    struct result full;
    run(&h, prompts[0], "\"num_predict\":100", false, NULL, &full);
    assert_string_equal(rh_final_str(&full.s, "done_reason"), "length");
    // the window holds 32; the last token sampled is returned, not evaluated
    size_t n_full = json_array_size(json_object_get(full.s.final, "context"));
    if (n_full > 33)
        fail_msg("%s: %zu tokens in a window of 32", file, n_full);
    rh_stream_free(&full.s);
    assert_int_equal(rh_stop(&h), 0);
}

static void test_hybrid_runner(void **state)
{
    (void)state;
    if (!have_shared)
        skip();
    for (size_t i = 0; i < N_FIXTURES; i++)
        check_model(fixtures[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_runner),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Unit tests for src/sample: the sampler chain (penalties, cut-offs, greedy, mirostat,
// seeds), num_predict, stop sequences, and structured output (format "json" and random
// JSON schemas, validated with an independent validator on the parsed output).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "sample/internal.h"
#include "sample/sample.h"
#define EXPECT_SEED42 215, 405, 166, 465, 25, 683, 159, 976, 661, 587, 444, 44, 916, 873, 336, 197

// ---------------------------------------------------------------------------
// Helpers.

static uint64_t lcg_state;
static uint32_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 33);
}
static double lcg_unit(void)
{
    return (double)lcg() / 2147483648.0;
}

// A vocabulary of n tokens named "t<i>" (so none is "\n" unless asked).
static struct sample_vocab *plain_vocab(int32_t n, int32_t newline_id, int32_t eog_id)
{
    char **pieces = calloc((size_t)n, sizeof(char *));
    uint32_t *lens = calloc((size_t)n, sizeof(uint32_t));
    bool *eog = calloc((size_t)n, sizeof(bool));
    for (int32_t i = 0; i < n; i++) {
        pieces[i] = i == newline_id ? xstrdup("\n") : xasprintf("t%d", (int)i);
        lens[i] = (uint32_t)strlen(pieces[i]);
        eog[i] = i == eog_id;
    }
    struct sample_vocab *v = NULL;
    assert_int_equal(sample_vocab_new(&v, n, (const char *const *)pieces, lens, eog, NULL), 0);
    for (int32_t i = 0; i < n; i++)
        free(pieces[i]);
    free(pieces);
    free(lens);
    free(eog);
    return v;
}

static struct sample_options opts_greedy(void)
{
    struct sample_options o;
    sample_options_default(&o);
    o.temperature = 0;
    o.seed = 1;
    return o;
}

static int32_t next_tok(struct sampler *s, const float *logits)
{
    int32_t t = -1;
    struct err e = {0};
    int rc = sample_next(s, logits, &t, &e);
    if (rc)
        fail_msg("sample_next: %s", e.msg);
    return t;
}

// Draws n tokens from fresh-history samplers (one sampler, no penalties) and counts ids.
static void histogram(const struct sample_options *o, const float *logits, int32_t n_vocab,
                      int draws, int *counts)
{
    struct sample_vocab *v = plain_vocab(n_vocab, -1, -1);
    struct sampler *s = NULL;
    assert_int_equal(sample_new(&s, v, o, NULL, NULL), 0);
    memset(counts, 0, (size_t)n_vocab * sizeof(int));
    for (int i = 0; i < draws; i++)
        counts[next_tok(s, logits)]++;
    sample_free(s);
    sample_vocab_free(v);
}

static struct sample_options opts_free(void)
{
    struct sample_options o;
    sample_options_default(&o);
    o.temperature = 1;
    o.top_k = 0;
    o.top_p = 1;
    o.min_p = 0;
    o.typical_p = 1;
    o.repeat_penalty = 1;
    o.seed = 7;
    return o;
}

// logits for given probabilities
static void logits_from_p(float *l, const double *p, int n)
{
    for (int i = 0; i < n; i++)
        l[i] = p[i] > 0 ? (float)log(p[i]) : -INFINITY;
}

// ---------------------------------------------------------------------------
// Chain.

static void test_defaults(void **state)
{
    (void)state;
    struct sample_options o;
    sample_options_default(&o);
    assert_true(o.temperature == 0.8f && o.top_k == 40 && o.top_p == 0.9f && o.min_p == 0.0f);
    assert_true(o.typical_p == 1.0f && o.repeat_last_n == 64 && o.repeat_penalty == 1.0f);
    assert_true(o.presence_penalty == 0 && o.frequency_penalty == 0 && o.mirostat == 0);
    assert_true(o.mirostat_tau == 5.0f && o.mirostat_eta == 0.1f && o.seed == -1);
}

static void test_greedy_ties(void **state)
{
    (void)state;
    struct sample_vocab *v = plain_vocab(6, -1, -1);
    struct sample_options o = opts_greedy();
    struct sampler *s = NULL;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    float l[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -INFINITY};
    for (int i = 0; i < 5; i++)
        assert_int_equal(next_tok(s, l), 1);  // tie 1/3 → lowest id
    sample_free(s);
    sample_vocab_free(v);
}

static void test_penalties(void **state)
{
    (void)state;
    struct sample_vocab *v = plain_vocab(8, 7, -1);
    struct sample_options o = opts_greedy();
    o.repeat_penalty = 2.0f;
    struct sampler *s = NULL;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 0);
    // token 0: 3.0 / 2 = 1.5 < 1.9 → token 1 wins
    float l[8] = {3.0f, 1.9f, 0, 0, 0, 0, 0, 0};
    assert_int_equal(next_tok(s, l), 1);  // also pushes 1 into history
    // both penalised now: 0 → 1.5, 1 → 0.95; token 2 at 1.4 loses to 1.5
    float l2[8] = {3.0f, 1.9f, 1.4f, 0, 0, 0, 0, 0};
    assert_int_equal(next_tok(s, l2), 0);
    sample_free(s);

    // negative logits are multiplied: -1 * 2 = -2 < -1.5
    o.repeat_penalty = 2.0f;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 3);
    float l3[8] = {-9, -9, -9, -1.0f, -1.5f, -9, -9, -9};
    assert_int_equal(next_tok(s, l3), 4);
    sample_free(s);

    // frequency: count × penalty; presence: once
    o.repeat_penalty = 1.0f;
    o.frequency_penalty = 0.5f;
    o.presence_penalty = 0.25f;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 0);
    sample_feed_prompt(s, 0);
    sample_feed_prompt(s, 0);  // token 0: 5 - 1.5 - 0.25 = 3.25
    sample_feed_prompt(s, 1);  // token 1: 4.01 - 0.5 - 0.25 = 3.26
    float l4[8] = {5.0f, 4.01f, 3.0f, 0, 0, 0, 0, 0};
    assert_int_equal(next_tok(s, l4), 1);
    sample_free(s);

    // window: repeat_last_n = 2 forgets older tokens
    o = opts_greedy();
    o.repeat_penalty = 10.0f;
    o.repeat_last_n = 2;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 0);
    sample_feed_prompt(s, 5);
    sample_feed_prompt(s, 6);  // 0 fell out of the window
    float l5[8] = {2.0f, 1.0f, 0, 0, 0, 1.9f, 1.9f, 0};
    assert_int_equal(next_tok(s, l5), 0);
    sample_free(s);

    // repeat_last_n = 0 disables; penalize_newline=false leaves "\n" (id 7) alone
    o.repeat_last_n = 0;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 0);
    assert_int_equal(next_tok(s, l5), 0);
    sample_free(s);
    o.repeat_last_n = 64;
    o.penalize_newline = false;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 7);
    sample_feed_prompt(s, 0);
    float l6[8] = {2.5f, 0, 0, 0, 0, 0, 0, 2.0f};
    assert_int_equal(next_tok(s, l6), 7);  // 0 → 0.25, "\n" keeps 2.0
    sample_free(s);
    // repeat_last_n = -1 → num_ctx
    o = opts_greedy();
    o.repeat_penalty = 10.0f;
    o.repeat_last_n = -1;
    o.num_ctx = 3;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    sample_feed_prompt(s, 0);
    sample_feed_prompt(s, 1);
    sample_feed_prompt(s, 2);
    float l7[8] = {2.0f, 1.9f, 1.8f, 0.5f, 0, 0, 0, 0};
    assert_int_equal(next_tok(s, l7), 3);
    sample_feed_prompt(s, 4);  // window [3 4 5]: 0, 1, 2 have left it
    sample_feed_prompt(s, 5);
    assert_int_equal(next_tok(s, l7), 0);
    sample_free(s);
    sample_vocab_free(v);
}

static void test_top_k_exact(void **state)
{
    (void)state;
    double p[6] = {0.05, 0.3, 0.1, 0.25, 0.2, 0.1};
    float l[6];
    logits_from_p(l, p, 6);
    struct sample_options o = opts_free();
    o.top_k = 3;
    int c[6];
    histogram(&o, l, 6, 3000, c);
    assert_int_equal(c[0], 0);
    assert_int_equal(c[2], 0);
    assert_int_equal(c[5], 0);
    assert_true(c[1] > 0 && c[3] > 0 && c[4] > 0);
    // renormalised 0.3/0.75 = 0.4
    assert_true(fabs(c[1] / 3000.0 - 0.4) < 0.04);
}

// A vocabulary of 1007 (not a multiple of the scans' 16-logit chunks): the five
// candidates sit at chunk starts and ends, in the partial last chunk and beside chunks of
// NaN and -inf; every one must be drawn and nothing else, through the top_k scan and
// through the top_p-first one.
static void test_scan_chunks(void **state)
{
    (void)state;
    enum { N = 1007 };
    static float l[N];
    static int c[N];
    for (int i = 0; i < N; i++)
        l[i] = -30.0f;
    for (int i = 96; i < 112; i++)
        l[i] = NAN;
    for (int i = 112; i < 128; i++)
        l[i] = -INFINITY;
    const int at[5] = {15, 16, 47, 128, 1006};
    const float val[5] = {0.6f, 1.0f, 0.9f, 0.7f, 0.8f};
    for (int j = 0; j < 5; j++)
        l[at[j]] = val[j];
    l[500] = 0.6f;  // ties the fifth: top_k keeps the lower id (15)
    for (int pass = 0; pass < 2; pass++) {
        struct sample_options o = opts_free();
        if (pass == 0) {
            o.top_k = 5;
        } else {
            o.top_p = 0.999f;  // the -30s sit 20 nats below the max: out of the list
            l[500] = -30.0f;
        }
        histogram(&o, l, N, 4000, c);
        int in = 0;
        for (int j = 0; j < 5; j++) {
            assert_true(c[at[j]] > 0);
            in += c[at[j]];
        }
        assert_int_equal(in, 4000);
    }
}

static void test_top_p_exact(void **state)
{
    (void)state;
    double p[5] = {0.15, 0.5, 0.05, 0.3, 0.0};
    float l[5];
    logits_from_p(l, p, 5);
    struct sample_options o = opts_free();
    int c[5];
    o.top_p = 0.75f;  // 0.5 → 0.8 ≥ 0.75: keep {1, 3}
    histogram(&o, l, 5, 2000, c);
    assert_true(c[1] > 0 && c[3] > 0);
    assert_int_equal(c[0] + c[2] + c[4], 0);
    o.top_p = 0.85f;  // needs 0.95: keep {1, 3, 0}
    histogram(&o, l, 5, 2000, c);
    assert_true(c[0] > 0 && c[1] > 0 && c[3] > 0);
    assert_int_equal(c[2] + c[4], 0);
    o.top_p = 0.1f;  // at least one token
    histogram(&o, l, 5, 200, c);
    assert_int_equal(c[1], 200);
}

// Large vocabulary: the top_p pre-filter leaves the far tail out of the candidate list but
// must still count its mass. p(0) = p(1) = e^21 / (2 e^21 + 100000) = 0.499981 < 0.49999,
// so token 1 is needed as well; ignoring the tail would give p(0) = 0.5 and keep token 0 only.
static void test_top_p_tail_mass(void **state)
{
    (void)state;
    int32_t n = 100000;
    float *l = calloc((size_t)n, sizeof(float));
    l[0] = l[1] = 21.0f;
    struct sample_options o = opts_free();
    o.top_p = 0.49999f;
    int *c = calloc((size_t)n, sizeof(int));
    histogram(&o, l, n, 400, c);
    assert_true(c[0] > 100 && c[1] > 100);
    assert_int_equal(c[0] + c[1], 400);
    o.top_p = 0.49f;
    histogram(&o, l, n, 100, c);
    assert_int_equal(c[0], 100);
    free(c);
    free(l);
}

// A long candidate list takes the bucketed top_p path: same cut as an explicit sort.
static void test_top_p_long_list(void **state)
{
    (void)state;
    int32_t n = 10000;
    float *l = calloc((size_t)n, sizeof(float));
    for (int i = 0; i < 10; i++)
        l[i * 37] = 10.0f - 0.1f * (float)i;
    double total = 0;
    for (int32_t i = 0; i < n; i++)
        total += exp(l[i]);
    struct sample_options o = opts_free();
    o.top_p = 0.45f;
    int expect_n = 0;
    double cum = 0;
    for (int i = 0; i < 10 && cum < o.top_p; i++, expect_n++)
        cum += exp(l[i * 37]) / total;
    assert_int_equal(expect_n, 4);
    int *c = calloc((size_t)n, sizeof(int));
    histogram(&o, l, n, 2000, c);
    int seen = 0, total_kept = 0;
    for (int32_t i = 0; i < n; i++) {
        bool kept = i % 37 == 0 && i / 37 < expect_n;
        if (kept) {
            assert_true(c[i] > 0);
            total_kept += c[i];
            seen++;
        } else if (c[i]) {
            fail_msg("token %d drawn outside the nucleus", (int)i);
        }
    }
    assert_int_equal(seen, expect_n);
    assert_int_equal(total_kept, 2000);
    free(c);
    free(l);
}

static void test_min_p_exact(void **state)
{
    (void)state;
    double p[5] = {0.4, 0.3, 0.19, 0.07, 0.04};
    float l[5];
    logits_from_p(l, p, 5);
    struct sample_options o = opts_free();
    o.min_p = 0.2f;  // keep p >= 0.08
    int c[5];
    histogram(&o, l, 5, 3000, c);
    assert_true(c[0] > 0 && c[1] > 0 && c[2] > 0);
    assert_int_equal(c[3] + c[4], 0);
    o.min_p = 1.5f;  // nothing passes: the most likely token stays
    histogram(&o, l, 5, 50, c);
    assert_int_equal(c[0], 50);
    o.min_p = 0.2f;  // after top_k (a sorted prefix)
    o.top_k = 4;
    histogram(&o, l, 5, 3000, c);
    assert_true(c[0] > 0 && c[1] > 0 && c[2] > 0);
    assert_int_equal(c[3] + c[4], 0);
}

static void test_typical_exact(void **state)
{
    (void)state;
    double p[5] = {0.5, 0.2, 0.15, 0.1, 0.05};
    float l[5];
    logits_from_p(l, p, 5);
    // independent computation: H, scores, order, cumulative > typical_p
    double h = 0;
    for (int i = 0; i < 5; i++)
        h -= p[i] * log(p[i]);
    int order[5] = {0, 1, 2, 3, 4};
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (fabs(-log(p[order[j]]) - h) < fabs(-log(p[order[i]]) - h)) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    double tp = 0.5, cum = 0;
    bool keep[5] = {0};
    for (int i = 0; i < 5; i++) {
        keep[order[i]] = true;
        cum += p[order[i]];
        if (cum > tp)
            break;
    }
    struct sample_options o = opts_free();
    o.typical_p = (float)tp;
    int c[5];
    histogram(&o, l, 5, 3000, c);
    int n_keep = 0;
    for (int i = 0; i < 5; i++) {
        n_keep += keep[i];
        if (keep[i])
            assert_true(c[i] > 0);
        else
            assert_int_equal(c[i], 0);
    }
    assert_true(n_keep >= 2 && n_keep < 5);  // the case is not trivial
}

static void test_temperature(void **state)
{
    (void)state;
    double p[2] = {0.75, 0.25};
    float l[2];
    logits_from_p(l, p, 2);
    struct sample_options o = opts_free();
    o.temperature = 0.5f;  // p ∝ p^2: 0.9 / 0.1
    int c[2];
    histogram(&o, l, 2, 5000, c);
    assert_true(fabs(c[0] / 5000.0 - 0.9) < 0.02);
    o.temperature = 1.0f;
    histogram(&o, l, 2, 5000, c);
    assert_true(fabs(c[0] / 5000.0 - 0.75) < 0.025);
}

static double avg_surprise(int mirostat, float tau, int32_t n, int steps)
{
    float *l = malloc((size_t)n * sizeof(float));
    double *p = malloc((size_t)n * sizeof(double));
    double z = 0;
    for (int32_t i = 0; i < n; i++)
        z += p[i] = 1.0 / (i + 1.0);  // Zipf
    for (int32_t i = 0; i < n; i++) {
        p[i] /= z;
        l[i] = (float)log(p[i]);
    }
    struct sample_vocab *v = plain_vocab(n, -1, -1);
    struct sample_options o = opts_free();
    o.mirostat = mirostat;
    o.mirostat_tau = tau;
    o.mirostat_eta = 0.1f;
    struct sampler *s = NULL;
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    double sum = 0;
    for (int i = 0; i < steps; i++)
        sum += -log2(p[next_tok(s, l)]);
    sample_free(s);
    sample_vocab_free(v);
    free(l);
    free(p);
    return sum / steps;
}

static void test_mirostat(void **state)
{
    (void)state;
    // Zipf over 1000 tokens has entropy ≈ 7.5 bits; mirostat steers the observed surprise
    // towards tau instead.
    double free_s = avg_surprise(0, 0, 1000, 2000);
    assert_true(free_s > 6.0);
    for (int m = 1; m <= 2; m++) {
        double s3 = avg_surprise(m, 3.0f, 1000, 3000);
        double s5 = avg_surprise(m, 5.0f, 1000, 3000);
        // measured against the full distribution, so a little above tau (mirostat targets
        // the surprise within its truncated distribution)
        assert_true(fabs(s3 - 3.0) < 1.5);
        assert_true(fabs(s5 - 5.0) < 1.5);
        assert_true(s3 < s5 - 0.5);
        assert_true(s5 < free_s - 1.0);
    }
}

static void test_seed_reproducible(void **state)
{
    (void)state;
    int32_t n = 1000;
    struct sample_vocab *v = plain_vocab(n, -1, -1);
    float *l = malloc((size_t)n * sizeof(float));
    struct sample_options o;
    sample_options_default(&o);  // the default chain: top_k 40, top_p 0.9, T 0.8
    o.seed = 42;
    o.repeat_penalty = 1.1f;
    int32_t got[3][16];
    for (int run = 0; run < 3; run++) {
        if (run == 2)
            o.seed = 43;
        struct sampler *s = NULL;
        assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
        lcg_state = 99;
        for (int i = 0; i < 16; i++) {
            for (int32_t j = 0; j < n; j++)
                l[j] = (float)(lcg_unit() * 6.0);
            got[run][i] = next_tok(s, l);
        }
        sample_free(s);
    }
    // Regression values: computed once by this implementation (xoshiro256** seeded by
    // splitmix64(42)); they must never change across runs or machines.
    static const int32_t expect[16] = {EXPECT_SEED42};
    for (int i = 0; i < 16; i++)
        print_message("%d, ", got[0][i]);
    print_message("\n");
    for (int i = 0; i < 16; i++) {
        assert_int_equal(got[0][i], got[1][i]);
        assert_int_equal(got[0][i], expect[i]);
    }
    assert_memory_not_equal(got[0], got[2], sizeof(got[0]));
    free(l);
    sample_vocab_free(v);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct sample_vocab *v = plain_vocab(4, -1, -1);
    struct sample_options o = opts_free();
    struct sampler *s = NULL;
    struct err e = {0};
    o.mirostat = 3;
    assert_int_equal(sample_new(&s, v, &o, NULL, &e), ERR_INVALID);
    o = opts_free();
    o.top_p = NAN;
    assert_int_equal(sample_new(&s, v, &o, NULL, &e), ERR_INVALID);
    o = opts_free();
    assert_int_equal(sample_new(&s, v, &o, NULL, NULL), 0);
    float l[4] = {-INFINITY, -INFINITY, NAN, -INFINITY};
    int32_t t;
    err_clear(&e);
    assert_int_equal(sample_next(s, l, &t, &e), ERR_INVALID);
    sample_free(s);
    sample_vocab_free(v);
    struct sample_vocab *bad = NULL;
    assert_int_equal(sample_vocab_new(&bad, 0, NULL, NULL, NULL, &e), ERR_INVALID);
}

static void test_logprobs(void **state)
{
    (void)state;
    float l[6] = {1.0f, 3.0f, -INFINITY, 3.0f, 2.0f, NAN};
    // log-sum-exp over the finite logits
    double lse = log(exp(1.0) + 2 * exp(3.0) + exp(2.0));
    struct sample_logprob top[4];
    float lp;
    int n = sample_logprobs(l, 6, 4, &lp, top, 4);
    assert_int_equal(n, 4);
    assert_true(fabs(lp - (2.0 - lse)) < 1e-5);
    static const int32_t order[4] = {1, 3, 4, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(top[i].token, order[i]);
        assert_true(fabs(top[i].logprob - (l[order[i]] - lse)) < 1e-5);
    }
    assert_int_equal(sample_logprobs(l, 6, 1, &lp, top, 2), 2);
    assert_int_equal(top[1].token, 3);
    assert_int_equal(sample_logprobs(l, 6, 1, NULL, NULL, 0), 0);
}

static void test_predict_limit(void **state)
{
    (void)state;
    assert_int_equal(sample_predict_limit(128, 4096, 10), 128);
    assert_int_equal(sample_predict_limit(0, 4096, 10), 0);
    assert_int_equal(sample_predict_limit(-1, 4096, 10), 40960);
    assert_int_equal(sample_predict_limit(-2, 4096, 96), 4000);
    assert_int_equal(sample_predict_limit(-2, 100, 200), 0);
    assert_int_equal(sample_predict_limit(-5, 2048, 0), 20480);
    assert_string_equal(sample_done_reason(SAMPLE_DONE_STOP), "stop");
    assert_string_equal(sample_done_reason(SAMPLE_DONE_LENGTH), "length");
}

// ---------------------------------------------------------------------------
// Stop sequences.

static void feed_all(struct sample_stop *st, const char *const *pieces, struct buf *out,
                     int *stopped_at)
{
    *stopped_at = -1;
    for (int i = 0; pieces[i]; i++) {
        int rc = sample_stop_feed(st, pieces[i], strlen(pieces[i]), out);
        assert_true(rc >= 0);
        if (rc == 1 && *stopped_at < 0)
            *stopped_at = i;
    }
}

static void test_stop_split(void **state)
{
    (void)state;
    const char *stops[] = {"<|end|>", "\n\nUser:", "STOP"};
    struct sample_stop *st = NULL;
    assert_int_equal(sample_stop_new(&st, stops, 3, NULL), 0);
    struct buf out;
    buf_init(&out, 0);
    // held back while it could be a stop string
    assert_int_equal(sample_stop_feed(st, "Hello <|", 8, &out), 0);
    assert_string_equal(buf_cstr(&out), "Hello ");
    assert_int_equal(sample_stop_feed(st, "en", 2, &out), 0);
    assert_string_equal(buf_cstr(&out), "Hello ");
    assert_int_equal(sample_stop_feed(st, "d|> after", 9, &out), 1);
    assert_string_equal(buf_cstr(&out), "Hello ");
    assert_true(sample_stop_stopped(st));
    assert_int_equal(sample_stop_feed(st, "more", 4, &out), 1);
    assert_int_equal(sample_stop_flush(st, &out), 0);
    assert_string_equal(buf_cstr(&out), "Hello ");
    sample_stop_free(st);

    // a near miss is released, one piece at a time
    assert_int_equal(sample_stop_new(&st, stops, 3, NULL), 0);
    buf_reset(&out);
    const char *p1[] = {"a\n", "\nUse", "d it", " ST", "OP", "x", NULL};
    int at;
    feed_all(st, p1, &out, &at);
    assert_int_equal(at, 4);
    assert_string_equal(buf_cstr(&out), "a\n\nUsed it ");
    sample_stop_free(st);

    // earliest match wins when two stops are in one piece; text before it is emitted
    assert_int_equal(sample_stop_new(&st, stops, 3, NULL), 0);
    buf_reset(&out);
    assert_int_equal(sample_stop_feed(st, "xSTOPy<|end|>", 13, &out), 1);
    assert_string_equal(buf_cstr(&out), "x");
    sample_stop_free(st);

    // flush releases a held prefix at the end; incomplete UTF-8 is held too
    assert_int_equal(sample_stop_new(&st, stops, 3, NULL), 0);
    buf_reset(&out);
    assert_int_equal(sample_stop_feed(st, "caf\xc3", 4, &out), 0);
    assert_string_equal(buf_cstr(&out), "caf");
    assert_int_equal(sample_stop_feed(st, "\xa9 ST", 4, &out), 0);
    assert_string_equal(buf_cstr(&out), "caf\xc3\xa9 ");
    assert_int_equal(sample_stop_flush(st, &out), 0);
    assert_string_equal(buf_cstr(&out), "caf\xc3\xa9 ST");
    assert_false(sample_stop_stopped(st));
    sample_stop_free(st);

    // no stops: everything passes; byte-by-byte feeding of a stop string
    assert_int_equal(sample_stop_new(&st, NULL, 0, NULL), 0);
    buf_reset(&out);
    assert_int_equal(sample_stop_feed(st, "STOP", 4, &out), 0);
    assert_string_equal(buf_cstr(&out), "STOP");
    sample_stop_free(st);
    assert_int_equal(sample_stop_new(&st, stops, 3, NULL), 0);
    buf_reset(&out);
    const char *text = "ok<|end|";
    for (const char *c = text; *c; c++)
        assert_int_equal(sample_stop_feed(st, c, 1, &out), 0);
    assert_string_equal(buf_cstr(&out), "ok");
    assert_int_equal(sample_stop_feed(st, ">", 1, &out), 1);
    assert_string_equal(buf_cstr(&out), "ok");
    sample_stop_free(st);
    buf_deinit(&out);
}

// ---------------------------------------------------------------------------
// Grammars.

static struct sample_grammar *compile(const char *format)
{
    struct sample_grammar *g = NULL;
    struct err e = {0};
    int rc = sample_format_compile_text(&g, format, strlen(format), &e);
    if (rc)
        fail_msg("compile %s: %s", format, e.msg);
    return g;
}

static int check(const struct sample_grammar *g, const char *s, bool *complete)
{
    return sample_grammar_check(g, s, strlen(s), complete, NULL);
}

static void test_format_json(void **state)
{
    (void)state;
    struct sample_grammar *g = compile("\"json\"");
    bool done;
    static const char *const ok[] = {"{ \"a\": \"b\" }", "{\"a\":1,\"c\":[ 1, 2 ]}", "{}",
                                     "{\"x\":{\"y\":[true, false, null, -0.5e+3]}}",
                                     "{\"\\u00e9\\n\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(check(g, ok[i], &done), 1);
        assert_true(done);
    }
    static const char *const bad[] = {"{\"a\": \"b\" , \"c\": 1}",
                                      "{\"a\" : 1}",
                                      "[1]",
                                      "{\"a\":01}",
                                      "{\"a\":\"\\u0000\"}",
                                      "{\"a\":\"\\ud800\"}",
                                      "{\"a\":\"\xed\xa0\x80\"}",
                                      "{\"a\":\"\xc0\xaf\"}",
                                      "{\"a\":\"\x01\"}",
                                      " {}",
                                      "{} x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(check(g, bad[i], &done), 0);
    // a valid prefix, not complete; a prefix ending inside a UTF-8 character
    assert_int_equal(check(g, "{\"a\": [1, ", &done), 1);
    assert_false(done);
    assert_int_equal(check(g, "{\"a\":\"\xe4\xb8", &done), 1);
    assert_false(done);
    sample_grammar_free(g);
    // no constraint
    struct sample_grammar *none = (void *)1;
    assert_int_equal(sample_format_compile_text(&none, "null", 4, NULL), 0);
    assert_null(none);
    assert_int_equal(sample_format_compile_text(&none, "\"\"", 2, NULL), 0);
    assert_null(none);
}

static void test_format_errors(void **state)
{
    (void)state;
    struct sample_grammar *g = NULL;
    struct err e = {0};
    assert_int_equal(sample_format_compile_text(&g, "\"xml\"", 5, &e), ERR_INVALID);
    assert_string_equal(e.msg,
                        "invalid format: \"xml\"; expected \"json\" or a valid JSON Schema object");
    static const char *const bad[] = {
        "[1]",
        "12",
        "{\"type\":\"string\",\"pattern\":\"^(?=a)$\"}",
        "{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}",
        "{\"type\":\"string\",\"pattern\":\"^[a-\"}",
        "{\"type\":\"string\",\"pattern\":\"^a{3,2}$\"}",
        "{\"type\":\"string\",\"pattern\":\"a^b\"}",
        "{\"type\":\"string\",\"pattern\":\"(ab\"}",
        "{\"type\":\"string\",\"pattern\":\"^[\xc3\xa9]$\"}",
        "{\"type\":\"number\",\"minimum\":3}",
        "{\"allOf\":[{},{}]}",
        "{\"prefixItems\":[{}],\"minItems\":2}",
        "{\"$ref\":\"#\"}",
        "{\"$ref\":\"http://x/y\"}",
        "{\"$ref\":\"#/$defs/missing\"}",
        "{\"type\":\"frob\"}",
        "{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}",
        "{\"type\":\"array\",\"maxItems\":1e12}",
        "{\"anyOf\":[]}",
        "{\"type\":\"object\",\"properties\":{\"a\":false}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/properties/a\"}]}}}",
        "{bad json",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        int rc = sample_format_compile_text(&g, bad[i], strlen(bad[i]), &e);
        if (rc >= 0)
            fail_msg("accepted: %s", bad[i]);
        assert_null(g);
        assert_true(strlen(e.msg) > 0);
    }
}

static void test_schema_example(void **state)
{
    (void)state;
    struct sample_grammar *g =
        compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\"]}");
    bool done;
    assert_int_equal(check(g, "{\"name\":\"Al\"}", &done), 1);
    assert_true(done);
    assert_int_equal(check(g, "{ \"name\" : \"Al\", \"age\": 3 }", &done), 1);
    assert_true(done);
    assert_int_equal(check(g, "{\"age\":3,\"name\":\"Al\"}", &done), 0);  // order
    assert_int_equal(check(g, "{\"name\":\"Al\",\"x\":1}", &done), 0);    // additional
    assert_int_equal(check(g, "{}", &done), 0);                           // required
    assert_int_equal(check(g, "{\"name\":\"Al\",\"age\":1.5}", &done), 0);
    sample_grammar_free(g);

    // optional properties in any subset, in order; additionalProperties schema with keys
    // that differ from the declared names
    g = compile("{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"boolean\"},"
                "\"c\":{\"enum\":[1,\"x\"]}},\"additionalProperties\":{\"type\":\"integer\"}}");
    static const char *const ok[] = {"{}",
                                     "{\"b\":true}",
                                     "{\"a\":null,\"c\":\"x\"}",
                                     "{\"c\":1,\"ab\":5,\"\":6}",
                                     "{\"d\":7}",
                                     "{\"b\":false,\"aa\":1}"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(check(g, ok[i], &done), 1);
        assert_true(done);
    }
    static const char *const bad[] = {"{\"c\":1,\"b\":true}", "{\"a\":1}", "{\"b\":true,\"a\":2}",
                                      "{\"d\":\"s\"}", "{\"c\":2}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(check(g, bad[i], &done), 0);
    sample_grammar_free(g);

    // arrays with bounds, strings with lengths, formats, $defs and recursion
    g = compile("{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},"
                "\"minItems\":1,\"maxItems\":2}");
    assert_int_equal(check(g, "[\"ab\",\"\xc3\xa9\"]", &done), 1);
    assert_true(done);
    assert_int_equal(check(g, "[]", &done), 0);
    assert_int_equal(check(g, "[\"abc\"]", &done), 0);
    assert_int_equal(check(g, "[\"a\",\"b\",\"c\"]", &done), 0);
    sample_grammar_free(g);
    g = compile("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
                "\"integer\"},\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},"
                "\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}");
    assert_int_equal(check(g, "{\"v\":1,\"k\":[{\"v\":2,\"k\":[]},{\"v\":-3}]}", &done), 1);
    assert_true(done);
    sample_grammar_free(g);
    // tuples, and allOf with one part (pydantic's described $ref)
    g = compile("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"allOf\":"
                "[{\"type\":\"null\"}],\"description\":\"d\"}]}");
    assert_int_equal(check(g, "[1, null]", &done), 1);
    assert_true(done);
    assert_int_equal(check(g, "[1", &done), 1);
    assert_false(done);
    assert_int_equal(check(g, "[1]", &done), 0);
    assert_int_equal(check(g, "[1, 2]", &done), 0);
    sample_grammar_free(g);
    g = compile("{\"type\":\"string\",\"format\":\"date-time\"}");
    assert_int_equal(check(g, "\"2024-02-29T13:05:59.123+01:00\"", &done), 1);
    assert_true(done);
    assert_int_equal(check(g, "\"2024-13-01T00:00:00Z\"", &done), 0);
    sample_grammar_free(g);
}

// Large enums become a trie (one matcher stack); too many start alternatives are refused at
// compile time rather than at the first token.
static void test_large_alternatives(void **state)
{
    (void)state;
    json_t *en = json_array(), *any = json_array();
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "item_%d", i);
        json_array_append_new(en, json_string(name));
        json_array_append_new(any, json_pack("{s:s}", "const", name));
    }
    json_array_append_new(en, json_integer(7));
    json_t *schema = json_pack("{s:o}", "enum", en);
    struct sample_grammar *g = NULL;
    assert_int_equal(sample_format_compile(&g, schema, NULL), 0);
    bool done;
    assert_true(check(g, "\"item_4999\"", &done) == 1 && done);
    assert_true(check(g, "7", &done) == 1 && done);
    assert_int_equal(check(g, "\"item_5000\"", &done), 0);
    struct gstate st = {0};
    assert_true(gstate_start(g, &st) <= 2);  // the trie root: a quote or a 7
    gstate_free(&st);
    sample_grammar_free(g);
    json_decref(schema);
    schema = json_pack("{s:o}", "anyOf", any);
    struct err e = {0};
    assert_int_equal(sample_format_compile(&g, schema, &e), ERR_UNSUPPORTED);
    assert_null(g);
    json_decref(schema);
}

static void test_integer_ranges(void **state)
{
    (void)state;
    static const struct {
        const char *bounds;
        long lo, hi;  // expected inclusive range within the probe window
    } cases[] = {
        {"\"minimum\":0,\"maximum\":150", 0, 150},
        {"\"minimum\":-7,\"maximum\":7", -7, 7},
        {"\"minimum\":-1234,\"maximum\":-99", -1234, -99},
        {"\"minimum\":37,\"maximum\":1010", 37, 1010},
        {"\"exclusiveMinimum\":9,\"exclusiveMaximum\":100", 10, 99},
        {"\"minimum\":2.5,\"maximum\":5.5", 3, 5},
        {"\"minimum\":5,\"maximum\":5", 5, 5},
        {"\"minimum\":-20", -20, 100000},
        {"\"maximum\":-3", -100000, -3},
        {"\"minimum\":10,\"exclusiveMinimum\":true", 11, 100000},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char schema[256];
        snprintf(schema, sizeof(schema), "{\"type\":\"integer\",%s}", cases[k].bounds);
        struct sample_grammar *g = compile(schema);
        for (long n = -1500; n <= 1500; n++) {
            char txt[32];
            snprintf(txt, sizeof(txt), "%ld", n);
            bool done = false;
            int rc = check(g, txt, &done);
            bool want = n >= cases[k].lo && n <= cases[k].hi;
            if ((rc == 1 && done) != want)
                fail_msg("%s: %ld gives %d/%d", schema, n, rc, done);
        }
        bool done;
        assert_int_equal(check(g, "-0", &done) == 1 && done, false);
        assert_int_equal(check(g, "007", &done) == 1 && done, false);
        sample_grammar_free(g);
    }
    struct sample_grammar *bad = NULL;
    const char *t = "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}";
    assert_int_equal(sample_format_compile_text(&bad, t, strlen(t), NULL), ERR_INVALID);
    t = "{\"type\":\"number\",\"minimum\":5}";
    assert_true(sample_format_compile_text(&bad, t, strlen(t), NULL) < 0);
    t = "{\"type\":\"string\",\"minimum\":5}";  // bounds do not apply to strings
    assert_int_equal(sample_format_compile_text(&bad, t, strlen(t), NULL), 0);
    sample_grammar_free(bad);
}

static bool pcre_search(const char *pattern, const char *s, size_t n)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
    if (!re)
        fail_msg("pcre2 cannot compile %s", pattern);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static char *generate(const struct sample_vocab *v, const struct sample_grammar *g, int32_t eog,
                      const int32_t *closers, int n_closers, const struct sample_options *o,
                      int max_tokens, bool *finished);
static struct sample_vocab *synthetic_vocab(int32_t *eog_id, int32_t **closers, int *n_closers);

static void test_patterns(void **state)
{
    (void)state;
    static const struct {
        const char *pattern;   // as a C string (JSON-escaped below)
        const char *yes, *no;  // JSON string texts that must / must not be accepted
    } cases[] = {
        {"^[a-z]{2,5}$", "\"abc\"", "\"abcdef\""},
        {"^\\d{3}-\\d{4}$", "\"555-1234\"", "\"555-123\""},
        {"^(foo|bar)+baz?$", "\"foobarba\"", "\"foob\""},
        {"[A-Z]", "\"xxAyy\"", "\"xyz\""},
        {"^a.c$", "\"a\\\"c\"", "\"a\\nc\""},
        {"^[^\\\"\\\\]*$", "\"plain \xc3\xa9\"", "\"q\\\"\""},
        {"^\\w+@\\w+\\.com$", "\"a_1@b.com\"", "\"a@b.org\""},
        {"^[\\s\\S]{0,3}$", "\"\\t\\n\\u0001\"", "\"abcd\""},
        {"^(?:x|y\\.z)*\\$$", "\"xy.zx$\"", "\"y.\""},
        {"^\\(\\d+\\)$", "\"(12)\"", "\"()\""},
        {"quote\"d", "\"a quote\\\"d b\"", "\"quoted\""},
        {"^\xc3\xa9+$", "\"\xc3\xa9\xc3\xa9\"", "\"e\""},
        {"^a|b$", "\"a\"", "\"xax\""},  // anchors taken for the whole: a subset, still sound
        {"", "\"anything\"", "\"\\u0000\""},
    };
    int32_t eog, *closers, n_closers;
    struct sample_vocab *v = synthetic_vocab(&eog, &closers, &n_closers);
    lcg_state = 777;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        json_t *schema = json_pack("{s:s, s:s}", "type", "string", "pattern", cases[k].pattern);
        struct sample_grammar *g = NULL;
        struct err e = {0};
        if (sample_format_compile(&g, schema, &e) != 0)
            fail_msg("pattern %s: %s", cases[k].pattern, e.msg);
        bool done = false;
        if (!(check(g, cases[k].yes, &done) == 1 && done))
            fail_msg("pattern %s rejects %s", cases[k].pattern, cases[k].yes);
        if (check(g, cases[k].no, &done) == 1 && done)
            fail_msg("pattern %s accepts %s", cases[k].pattern, cases[k].no);
        for (int i = 0; i < 20; i++) {
            struct sample_options o = opts_free();
            o.seed = (int64_t)(k * 100 + (size_t)i);
            bool finished;
            char *out = generate(v, g, eog, closers, n_closers, &o, 300, &finished);
            if (finished) {
                json_t *val = json_loads(out, JSON_DECODE_ANY, NULL);
                if (!val || !json_is_string(val) ||
                    !pcre_search(cases[k].pattern, json_string_value(val), json_string_length(val)))
                    fail_msg("pattern %s: output %s does not match", cases[k].pattern, out);
                json_decref(val);
            }
            free(out);
        }
        sample_grammar_free(g);
        json_decref(schema);
    }
    free(closers);
    sample_vocab_free(v);
}

// ---------------------------------------------------------------------------
// Random schemas: generation, an independent validator, constrained sampling.

static const char *const prop_names[] = {"a",  "b", "name", "age", "x_y", "\xc3\xa9t\xc3\xa9",
                                         "id", "k"};
#define N_PROP_NAMES (sizeof(prop_names) / sizeof(prop_names[0]))

static json_t *rand_scalar_value(void)
{
    switch (lcg() % 5) {
    case 0:
        return json_integer((json_int_t)(lcg() % 200) - 100);
    case 1:
        return json_string(prop_names[lcg() % N_PROP_NAMES]);
    case 2:
        return json_true();
    case 3:
        return json_null();
    default:
        return json_real(0.5 * (lcg() % 9));
    }
}

static json_t *rand_schema(int depth, bool have_defs)
{
    int kind = (int)(lcg() % (depth > 2 ? 8 : 12));
    if (depth == 0 && lcg() % 4 != 0)
        kind = lcg() % 3 ? 10 : 8;  // mostly objects and arrays at the top
    json_t *s = json_object();
    switch (kind) {
    case 0:
        json_object_set_new(s, "type", json_string("string"));
        if (lcg() % 4 == 0) {
            static const char *const pats[] = {"^[a-c]+$", "^\\d{2,3}(-\\d)?$", "x", "^(ab|c)*$",
                                               "^[^a-z]{1,4}$"};
            json_object_set_new(s, "pattern", json_string(pats[lcg() % 5]));
        } else if (lcg() % 3 == 0) {
            json_object_set_new(s, "minLength", json_integer(lcg() % 3));
            json_object_set_new(s, "maxLength", json_integer(3 + lcg() % 4));
        }
        break;
    case 1:
        json_object_set_new(s, "type", json_string("integer"));
        if (lcg() % 2) {
            int lo = (int)(lcg() % 300) - 150;
            if (lcg() % 3)
                json_object_set_new(s, "minimum", json_integer(lo));
            if (lcg() % 3)
                json_object_set_new(s, "maximum", json_integer(lo + (int)(lcg() % 2000)));
        }
        break;
    case 2:
        json_object_set_new(s, "type", json_string("number"));
        break;
    case 3:
        json_object_set_new(s, "type", json_string("boolean"));
        break;
    case 4:
        json_object_set_new(s, "type", json_string("null"));
        break;
    case 5: {
        json_t *e = json_array();
        int n = 1 + (int)(lcg() % 4);
        for (int i = 0; i < n; i++)
            json_array_append_new(e, rand_scalar_value());
        json_object_set_new(s, "enum", e);
        break;
    }
    case 6:
        json_object_set_new(s, "const", rand_scalar_value());
        break;
    case 7:
        if (have_defs) {
            json_object_set_new(s, "$ref", json_string(lcg() % 2 ? "#/$defs/d0" : "#/$defs/d1"));
        } else {
            json_t *t = json_array();
            json_array_append_new(t, json_string("integer"));
            json_array_append_new(t, json_string("null"));
            json_object_set_new(s, "type", t);
        }
        break;
    case 8: {
        json_object_set_new(s, "type", json_string("array"));
        if (lcg() % 4 == 0) {  // a tuple
            json_t *parts = json_array();
            int n = 1 + (int)(lcg() % 3);
            for (int i = 0; i < n; i++)
                json_array_append_new(parts, rand_schema(depth + 1, have_defs));
            json_object_set_new(s, "prefixItems", parts);
            break;
        }
        json_object_set_new(s, "items", rand_schema(depth + 1, have_defs));
        if (lcg() % 2) {
            int lo = (int)(lcg() % 3);
            json_object_set_new(s, "minItems", json_integer(lo));
            json_object_set_new(s, "maxItems", json_integer(lo + (int)(lcg() % 3)));
        }
        break;
    }
    case 9: {
        json_t *a = json_array();
        json_array_append_new(a, rand_schema(depth + 1, have_defs));
        json_array_append_new(a, rand_schema(depth + 1, have_defs));
        json_object_set_new(s, "anyOf", a);
        break;
    }
    default: {
        if (lcg() % 4)
            json_object_set_new(s, "type", json_string("object"));
        json_t *props = json_object();
        json_t *req = json_array();
        int n = (int)(lcg() % 5);
        for (int i = 0; i < n; i++) {
            const char *name = prop_names[lcg() % N_PROP_NAMES];
            if (json_object_get(props, name))
                continue;
            json_object_set_new(props, name, rand_schema(depth + 1, have_defs));
            if (lcg() % 2)
                json_array_append_new(req, json_string(name));
        }
        json_object_set_new(s, "properties", props);
        json_object_set_new(s, "required", req);
        switch (lcg() % 4) {
        case 0:
            json_object_set_new(s, "additionalProperties", json_true());
            break;
        case 1:
            json_object_set_new(s, "additionalProperties", rand_schema(depth + 1, have_defs));
            break;
        case 2:
            json_object_set_new(s, "additionalProperties", json_false());
            break;
        default:
            break;
        }
        break;
    }
    }
    if (lcg() % 5 == 0)
        json_object_set_new(s, "description", json_string("ignored"));
    if (lcg() % 10 == 0) {  // pydantic style: {"allOf": [S], "description": ...}
        json_t *w = json_object();
        json_t *a = json_array();
        json_array_append_new(a, s);
        json_object_set_new(w, "allOf", a);
        json_object_set_new(w, "title", json_string("T"));
        return w;
    }
    return s;
}

static size_t utf8_count(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((uint8_t)*s & 0xC0) != 0x80;
    return n;
}

static bool validate(const json_t *root, const json_t *s, const json_t *v, int depth);

static bool validate_type(const json_t *root, const json_t *s, const char *t, const json_t *v,
                          int depth)
{
    if (strcmp(t, "null") == 0)
        return json_is_null(v);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(t, "integer") == 0) {
        if (!json_is_integer(v))
            return false;
        const json_t *lo = json_object_get(s, "minimum"), *hi = json_object_get(s, "maximum");
        return (!lo || json_integer_value(v) >= json_integer_value(lo)) &&
               (!hi || json_integer_value(v) <= json_integer_value(hi));
    }
    if (strcmp(t, "number") == 0)
        return json_is_number(v);
    if (strcmp(t, "string") == 0) {
        if (!json_is_string(v))
            return false;
        const json_t *pat = json_object_get(s, "pattern");
        if (pat &&
            !pcre_search(json_string_value(pat), json_string_value(v), json_string_length(v)))
            return false;
        size_t n = utf8_count(json_string_value(v));
        const json_t *lo = json_object_get(s, "minLength"), *hi = json_object_get(s, "maxLength");
        return (!lo || n >= (size_t)json_integer_value(lo)) &&
               (!hi || n <= (size_t)json_integer_value(hi));
    }
    if (strcmp(t, "array") == 0) {
        if (!json_is_array(v))
            return false;
        const json_t *lo = json_object_get(s, "minItems"), *hi = json_object_get(s, "maxItems");
        size_t n = json_array_size(v);
        if ((lo && n < (size_t)json_integer_value(lo)) ||
            (hi && n > (size_t)json_integer_value(hi)))
            return false;
        const json_t *items = json_object_get(s, "items");
        const json_t *prefix = json_object_get(s, "prefixItems");
        for (size_t i = 0; i < n; i++) {
            const json_t *is =
                prefix && i < json_array_size(prefix) ? json_array_get(prefix, i) : items;
            if (is && !validate(root, is, json_array_get(v, i), depth + 1))
                return false;
        }
        return true;
    }
    if (strcmp(t, "object") == 0) {
        if (!json_is_object(v))
            return false;
        const json_t *props = json_object_get(s, "properties");
        const json_t *req = json_object_get(s, "required");
        const json_t *add = json_object_get(s, "additionalProperties");
        for (size_t i = 0; req && i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i))))
                return false;
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            const json_t *ps = props ? json_object_get(props, k) : NULL;
            if (ps) {
                if (!validate(root, ps, x, depth + 1))
                    return false;
            } else if (add && json_is_object(add)) {
                if (!validate(root, add, x, depth + 1))
                    return false;
            } else if (add && json_is_false(add)) {
                return false;
            }
        }
        return true;
    }
    return false;
}

static bool validate(const json_t *root, const json_t *s, const json_t *v, int depth)
{
    if (depth > 100)
        return false;
    if (json_is_true(s))
        return true;
    const json_t *x;
    if ((x = json_object_get(s, "$ref"))) {
        const char *ref = json_string_value(x);
        const json_t *t = json_object_get(json_object_get(root, "$defs"), ref + strlen("#/$defs/"));
        return t && validate(root, t, v, depth + 1);
    }
    if ((x = json_object_get(s, "allOf"))) {
        for (size_t i = 0; i < json_array_size(x); i++)
            if (!validate(root, json_array_get(x, i), v, depth + 1))
                return false;
        return true;
    }
    if ((x = json_object_get(s, "anyOf"))) {
        for (size_t i = 0; i < json_array_size(x); i++)
            if (validate(root, json_array_get(x, i), v, depth + 1))
                return true;
        return false;
    }
    if ((x = json_object_get(s, "const")))
        return json_equal(x, v);
    if ((x = json_object_get(s, "enum"))) {
        for (size_t i = 0; i < json_array_size(x); i++)
            if (json_equal(json_array_get(x, i), v))
                return true;
        return false;
    }
    const json_t *t = json_object_get(s, "type");
    if (json_is_string(t))
        return validate_type(root, s, json_string_value(t), v, depth);
    if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++)
            if (validate_type(root, s, json_string_value(json_array_get(t, i)), v, depth))
                return true;
        return false;
    }
    if (json_object_get(s, "properties"))
        return validate_type(root, s, "object", v, depth);
    return true;
}

// Synthetic vocabulary: every single byte, useful multi-byte pieces (including split UTF-8
// characters), two empty control tokens; the last token is EOG.
static struct sample_vocab *synthetic_vocab(int32_t *eog_id, int32_t **closers, int *n_closers)
{
    static const char *const multi[] = {
        "{\"",
        "\"}",
        "\":",
        "\": ",
        ", \"",
        ",\"",
        "true",
        "false",
        "null",
        "12",
        "345",
        "-0.5",
        "e+1",
        " \"",
        "\n  ",
        "\"a\"",
        "name",
        "age",
        "\"name\": \"",
        "]",
        "[{",
        "}]",
        "\\u00e9",
        "\xc3\xa9",
        "\xe4\xb8\xad",
        "\xe4\xb8",
        "\xad",
        "\xe6\x97\xa5\xe6\x9c\xac",
        "\xf0\x9f\x98\x80",
        "\xf0\x9f",
        "\\n",
        "\\\"",
        "x_y",
        "id",
        "\xc3\xa9t\xc3\xa9",
        "\": [",
        "\": {",
        "0",
        "00",
        "1.",
        ".5",
        "\"\"",
        "{}",
        "[]",
        "}}",
        "]]",
        "\": \"",
        "\"]",
    };
    size_t n_multi = sizeof(multi) / sizeof(multi[0]);
    int32_t n = (int32_t)(256 + n_multi + 3);
    char **pieces = calloc((size_t)n, sizeof(char *));
    uint32_t *lens = calloc((size_t)n, sizeof(uint32_t));
    bool *eog = calloc((size_t)n, sizeof(bool));
    for (int i = 0; i < 256; i++) {
        pieces[i] = malloc(1);
        pieces[i][0] = (char)i;
        lens[i] = 1;
    }
    for (size_t i = 0; i < n_multi; i++) {
        pieces[256 + i] = xstrdup(multi[i]);
        lens[256 + i] = (uint32_t)strlen(multi[i]);
    }
    // two empty tokens: a control token and the EOG token
    *eog_id = n - 1;
    eog[n - 1] = true;
    struct sample_vocab *v = NULL;
    assert_int_equal(sample_vocab_new(&v, n, (const char *const *)pieces, lens, eog, NULL), 0);
    static const char *const close[] = {"\"", "}", "]", "\"}", "}]", "}}", "]]", "\"]"};
    *closers = malloc(16 * sizeof(int32_t));
    *n_closers = 0;
    for (int32_t i = 0; i < n; i++)
        for (size_t j = 0; j < sizeof(close) / sizeof(close[0]); j++)
            if (pieces[i] && lens[i] == strlen(close[j]) &&
                memcmp(pieces[i], close[j], lens[i]) == 0)
                (*closers)[(*n_closers)++] = i;
    for (int32_t i = 0; i < n; i++)
        free(pieces[i]);
    free(pieces);
    free(lens);
    free(eog);
    return v;
}

// Generates with the grammar until EOG (or max_tokens); returns the text (malloc'd).
static char *generate(const struct sample_vocab *v, const struct sample_grammar *g, int32_t eog,
                      const int32_t *closers, int n_closers, const struct sample_options *o,
                      int max_tokens, bool *finished)
{
    int32_t n = sample_vocab_size(v);
    float *l = malloc((size_t)n * sizeof(float));
    struct sampler *s = NULL;
    assert_int_equal(sample_new(&s, v, o, g, NULL), 0);
    struct buf out;
    buf_init(&out, 0);
    *finished = false;
    for (int step = 0; step < max_tokens; step++) {
        for (int32_t i = 0; i < n; i++)
            l[i] = (float)(lcg_unit() * 4.0);
        for (int i = 0; i < n_closers; i++)
            l[closers[i]] += 1.0f + (float)step / 40.0f;
        l[eog] += 2.0f;
        int32_t t = next_tok(s, l);
        if (t == eog) {
            *finished = true;
            break;
        }
        uint32_t len;
        const char *p = vocab_piece(v, t, &len);
        assert_int_equal(buf_append(&out, p, len), 0);
    }
    sample_free(s);
    free(l);
    return buf_take(&out);
}

static void test_random_schemas(void **state)
{
    (void)state;
    int32_t eog, *closers, n_closers;
    struct sample_vocab *v = synthetic_vocab(&eog, &closers, &n_closers);
    lcg_state = 12345;
    int n_schemas = 300, n_finished = 0;
    for (int k = 0; k < n_schemas; k++) {
        bool defs = k % 3 == 0;
        json_t *schema = rand_schema(0, defs);
        if (defs) {
            json_t *d = json_object();
            json_object_set_new(d, "d0", rand_schema(2, false));
            // a recursive definition: arrays of itself, or an integer
            json_t *d1 = json_object();
            json_t *any = json_array();
            json_t *arr = json_object();
            json_object_set_new(arr, "type", json_string("array"));
            json_t *it = json_object();
            json_object_set_new(it, "$ref", json_string("#/$defs/d1"));
            json_object_set_new(arr, "items", it);
            json_object_set_new(arr, "maxItems", json_integer(2));
            json_t *in = json_object();
            json_object_set_new(in, "type", json_string("integer"));
            json_array_append_new(any, in);
            json_array_append_new(any, arr);
            json_object_set_new(d1, "anyOf", any);
            json_object_set_new(d, "d1", d1);
            json_object_set_new(schema, "$defs", d);
        }
        struct sample_grammar *g = NULL;
        struct err e = {0};
        char *txt = json_dumps(schema, JSON_COMPACT);
        if (sample_format_compile(&g, schema, &e) != 0)
            fail_msg("compile %s: %s", txt, e.msg);
        struct sample_options o;
        sample_options_default(&o);
        o.seed = k;
        o.temperature = k % 4 == 0 ? 0 : 1.0f;
        o.top_k = k % 2 ? 0 : 40;
        o.top_p = k % 5 == 0 ? 1.0f : 0.9f;
        o.mirostat = k % 7 == 3 ? 2 : 0;
        bool finished;
        char *out = generate(v, g, eog, closers, n_closers, &o, 600, &finished);
        bool complete = false;
        if (sample_grammar_check(g, out, strlen(out), &complete, NULL) != 1)
            fail_msg("schema %s: output not a grammar prefix: %s", txt, out);
        if (finished) {
            n_finished++;
            assert_true(complete);
            json_error_t je;
            json_t *val = json_loads(out, JSON_DECODE_ANY, &je);
            if (!val)
                fail_msg("schema %s: output does not parse (%s): %s", txt, je.text, out);
            if (!validate(schema, schema, val, 0))
                fail_msg("schema %s: output does not validate: %s", txt, out);
            json_decref(val);
        }
        free(out);
        free(txt);
        sample_grammar_free(g);
        json_decref(schema);
    }
    // most outputs finish (the test biases closing tokens); all were checked above
    assert_true(n_finished > n_schemas * 9 / 10);

    // format "json": the output is always one JSON object
    struct sample_grammar *g = compile("\"json\"");
    for (int k = 0; k < 40; k++) {
        struct sample_options o = opts_free();
        o.seed = 1000 + k;
        bool finished;
        char *out = generate(v, g, eog, closers, n_closers, &o, 600, &finished);
        if (finished) {
            json_t *val = json_loads(out, 0, NULL);
            if (!val || !json_is_object(val))
                fail_msg("format json output: %s", out);
            json_decref(val);
        }
        free(out);
    }
    sample_grammar_free(g);
    free(closers);
    sample_vocab_free(v);
}

// The mask computed over the sorted vocabulary agrees with checking every token.
static void test_mask_agrees(void **state)
{
    (void)state;
    int32_t eog, *closers, n_closers;
    struct sample_vocab *v = synthetic_vocab(&eog, &closers, &n_closers);
    struct sample_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
                                       "\"string\"},\"n\":{\"type\":\"array\",\"items\":{\"type\":"
                                       "\"number\"}}},\"required\":[\"name\",\"n\"]}");
    static const char *const prefixes[] = {"",
                                           "{",
                                           "{\"na",
                                           "{\"name\": \"ab\xe4\xb8",
                                           "{\"name\":\"\"",
                                           "{\"name\":\"x\",\"n\":[1",
                                           "{\"name\":\"x\",\"n\":[]}"};
    struct gmask_ctx m = {0};
    struct gstate st = {0}, next = {0}, tmp = {0};
    for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++) {
        assert_true(gstate_start(g, &st) > 0);
        for (const char *p = prefixes[k]; *p; p++) {
            assert_true(gstate_advance(g, &st, (uint8_t)*p, &tmp) > 0);
            gstate_copy(&st, &tmp);
        }
        for (int rep = 0; rep < 2; rep++) {  // second time from the cache
            const uint64_t *bits = gmask_compute(&m, g, v, &st);
            int n_ok = 0;
            for (int32_t id = 0; id < sample_vocab_size(v); id++) {
                bool in_mask = (bits[id >> 6] >> (id & 63)) & 1;
                bool ok = gmask_token_ok(g, v, &st, id, &next, &tmp);
                n_ok += ok;
                if (in_mask != ok)
                    fail_msg("prefix %s token %d: mask %d check %d", prefixes[k], id, in_mask, ok);
            }
            assert_true(n_ok > 0);
        }
    }
    gstate_free(&st);
    gstate_free(&next);
    gstate_free(&tmp);
    gmask_ctx_free(&m);
    sample_grammar_free(g);
    free(closers);
    sample_vocab_free(v);
}

// sample_grammar_complete: complete and only white space may follow.
static void test_grammar_done(void **state)
{
    (void)state;
    int32_t eog, *closers, n_closers;
    struct sample_vocab *v = synthetic_vocab(&eog, &closers, &n_closers);
    float *l = calloc((size_t)sample_vocab_size(v), sizeof(float));
    static const struct {
        const char *format, *text;
        bool done_at[8];  // after each byte
    } cases[] = {
        {"{\"type\":\"integer\"}", "12", {false, false}},
        {"{\"type\":\"boolean\"}", "true", {false, false, false, true}},
        {"\"json\"", "{}", {false, true}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}}}",
         "{} ",
         {false, true, true}},
        {"{\"enum\":[\"a\",\"ab\"]}", "\"a\"", {false, false, true}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct sample_grammar *g = compile(cases[k].format);
        struct sample_options o = opts_greedy();
        struct sampler *s = NULL;
        assert_int_equal(sample_new(&s, v, &o, g, NULL), 0);
        assert_false(sample_grammar_complete(s));
        for (size_t i = 0; cases[k].text[i]; i++) {
            memset(l, 0, (size_t)sample_vocab_size(v) * sizeof(float));
            l[(uint8_t)cases[k].text[i]] = 50;  // the single-byte token
            assert_int_equal(next_tok(s, l), (uint8_t)cases[k].text[i]);
            if (sample_grammar_complete(s) != cases[k].done_at[i])
                fail_msg("%s after %zu bytes of %s", cases[k].format, i + 1, cases[k].text);
        }
        sample_free(s);
        sample_grammar_free(g);
    }
    free(l);
    free(closers);
    sample_vocab_free(v);
}

// A thinking model: the grammar only starts constraining once activated.
static void test_grammar_inactive(void **state)
{
    (void)state;
    int32_t eog, *closers, n_closers;
    struct sample_vocab *v = synthetic_vocab(&eog, &closers, &n_closers);
    struct sample_grammar *g = compile("{\"type\":\"boolean\"}");
    struct sample_options o = opts_greedy();
    struct sampler *s = NULL;
    assert_int_equal(sample_new(&s, v, &o, g, NULL), 0);
    sample_grammar_set_active(s, false);
    float *l = calloc((size_t)sample_vocab_size(v), sizeof(float));
    l['x'] = 5;
    assert_int_equal(next_tok(s, l), 'x');
    sample_grammar_set_active(s, true);
    int32_t t = next_tok(s, l);
    assert_true(t == 't' || t == 'f' || t >= 256);
    uint32_t len;
    const char *p = vocab_piece(v, t, &len);
    assert_true(p[0] == 't' || p[0] == 'f');
    free(l);
    sample_free(s);
    sample_grammar_free(g);
    free(closers);
    sample_vocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),           cmocka_unit_test(test_greedy_ties),
        cmocka_unit_test(test_penalties),          cmocka_unit_test(test_top_k_exact),
        cmocka_unit_test(test_scan_chunks),        cmocka_unit_test(test_top_p_exact),
        cmocka_unit_test(test_min_p_exact),        cmocka_unit_test(test_top_p_tail_mass),
        cmocka_unit_test(test_top_p_long_list),    cmocka_unit_test(test_typical_exact),
        cmocka_unit_test(test_temperature),        cmocka_unit_test(test_mirostat),
        cmocka_unit_test(test_seed_reproducible),  cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_predict_limit),      cmocka_unit_test(test_stop_split),
        cmocka_unit_test(test_format_json),        cmocka_unit_test(test_format_errors),
        cmocka_unit_test(test_schema_example),     cmocka_unit_test(test_integer_ranges),
        cmocka_unit_test(test_logprobs),           cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_large_alternatives), cmocka_unit_test(test_mask_agrees),
        cmocka_unit_test(test_grammar_inactive),   cmocka_unit_test(test_grammar_done),
        cmocka_unit_test(test_random_schemas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

// quantize: the Q*_K_M mixes, and quantization of the tiny Llama fixture
// byte-identical with llama-quantize's output (per tensor and whole file).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"
#include "quantize/quantize.h"
#include "testutil.h"

// Quantizing the F32 fixture's tensors to Q8_0 gives llama-quantize's bytes.
static void test_q8_0_matches_llama_cpp(void **state)
{
    (void)state;
    char p32[1024], p8[1024];
    if (!test_shared_fixture(p32, sizeof(p32), "tiny-llama-f32.gguf") ||
        !test_shared_fixture(p8, sizeof(p8), "tiny-llama-q8_0.gguf"))
        skip();
    struct gguf *a = NULL, *b = NULL;
    struct err e = {0};
    assert_int_equal(gguf_open(&a, p32, &e), 0);
    assert_int_equal(gguf_open(&b, p8, &e), 0);
    int compared = 0;
    struct quantize_mix_model mm = {
        .arch = "llama", .n_layers = 2, .n_gqa = 2, .tied_embeddings = true};
    for (size_t i = 0; i < gguf_tensor_count(b); i++) {
        const struct gguf_tensor *tq = gguf_tensor_at(b, i);
        char name[80];
        snprintf(name, sizeof(name), "%.*s", (int)tq->name.len, tq->name.ptr);
        const struct gguf_tensor *tf = gguf_tensor_find(a, name);
        assert_non_null(tf);
        // The mix chooses the type llama-quantize chose.
        assert_int_equal(quantize_mix_tensor_type(7, name, tf->type, tf->n_dims, tf->ne[0], &mm),
                         (int)tq->type);
        if (tq->type != GGUF_TYPE_Q8_0)
            continue;
        uint64_t n = gguf_tensor_n_elements(tf);
        float *x = malloc(n * sizeof(float));
        quant_traits_get(tf->type)->to_float(tf->data, x, (int64_t)n);
        void *q = malloc(tq->n_bytes);
        quant_traits_get(GGUF_TYPE_Q8_0)->from_float_ref(x, q, (int64_t)n);
        if (memcmp(q, tq->data, tq->n_bytes) != 0)
            fail_msg("tensor %s: Q8_0 bytes differ from llama-quantize", name);
        compared++;
        free(x);
        free(q);
    }
    assert_true(compared >= 15);
    gguf_close(a);
    gguf_close(b);
}

static void count_progress(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *calls = ctx;
    calls[0]++;
    calls[1] = done;
    calls[2] = total;
}

// quantize_model on the F32 fixture reproduces llama-quantize's Q8_0
// file byte for byte: metadata order, tensor order, types, data, padding.
static void test_model_quantize_matches_llama_cpp(void **state)
{
    (void)state;
    char p32[1024], p8[1024];
    if (!test_shared_fixture(p32, sizeof(p32), "tiny-llama-f32.gguf") ||
        !test_shared_fixture(p8, sizeof(p8), "tiny-llama-q8_0.gguf"))
        skip();
    char out[256];
    snprintf(out, sizeof(out), "/tmp/test_quant_%d.gguf", (int)getpid());
    struct err e = {0};
    uint64_t calls[3] = {0};
    if (quantize_model(p32, out, 7, count_progress, calls, &e) != 0)
        fail_msg("%s", e.msg);
    assert_true(calls[0] > 10);
    assert_int_equal(calls[1], calls[2]);
    size_t na, nb;
    uint8_t *a = test_read_file(out, &na), *b = test_read_file(p8, &nb);
    assert_non_null(a);
    assert_int_equal(na, nb);
    size_t first = 0;
    while (first < na && a[first] == b[first])
        first++;
    if (first != na)
        fail_msg("files differ from byte %zu of %zu", first, na);
    free(a);
    free(b);

    // A K-quant mix: every tensor gets its mix type and reads back.
    assert_int_equal(quantize_model(p32, out, 15, NULL, NULL, &e), 0);
    struct gguf *g = NULL;
    assert_int_equal(gguf_open(&g, out, &e), 0);
    struct gguf_summary s;
    gguf_summarize(g, &s);
    assert_string_equal(s.quantization_level, "Q4_K_M");
    // n_embd 64 is no multiple of 256: Q4_K falls back to Q5_0, the tied
    // embedding (output) to Q8_0.
    assert_int_equal(gguf_tensor_find(g, "token_embd.weight")->type, GGUF_TYPE_Q8_0);
    assert_int_equal(gguf_tensor_find(g, "blk.0.attn_q.weight")->type, GGUF_TYPE_Q5_0);
    assert_int_equal(gguf_tensor_find(g, "blk.0.ffn_down.weight")->type, GGUF_TYPE_Q5_0);
    assert_int_equal(gguf_tensor_find(g, "blk.1.ffn_down.weight")->type, GGUF_TYPE_Q8_0);
    assert_int_equal(gguf_tensor_find(g, "blk.0.attn_norm.weight")->type, GGUF_TYPE_F32);
    gguf_close(g);
    assert_int_not_equal(quantize_model(p32, out, 19, NULL, NULL, &e), 0);
    unlink(out);
}

static const char *type_name(int t)
{
    return t < 0 ? "(none)" : gguf_type_name((uint32_t)t);
}

static void expect_type(int32_t ft, const char *name, uint32_t n_dims, int64_t ne0,
                        const struct quantize_mix_model *m, uint32_t want)
{
    int got = quantize_mix_tensor_type(ft, name, GGUF_TYPE_F32, n_dims, ne0, m);
    if (got != (int)want)
        fail_msg("ftype %d %s: got %s want %s", ft, name, type_name(got), gguf_type_name(want));
}

static void test_mixes(void **state)
{
    (void)state;
    int32_t q4km = quantize_mix_from_name("q4_K_M");
    assert_int_equal(q4km, 15);
    assert_int_equal(quantize_mix_from_name("Q8_0"), 7);
    assert_int_equal(quantize_mix_from_name("IQ2_XXS"), -1);
    assert_int_equal(quantize_mix_from_name("bogus"), -1);
    assert_int_equal(quantize_mix_default_type(15), GGUF_TYPE_Q4_K);
    assert_int_equal(quantize_mix_tensor_type(19, "x.weight", 0, 2, 256, NULL), -1);

    // Llama 3.2 1B shape: 16 layers, 32 heads / 8 kv heads, tied output.
    struct quantize_mix_model m = {
        .arch = "llama", .n_layers = 16, .n_gqa = 4, .tied_embeddings = true};
    expect_type(q4km, "token_embd.weight", 2, 2048, &m, GGUF_TYPE_Q6_K);
    expect_type(q4km, "blk.0.attn_norm.weight", 1, 2048, &m, GGUF_TYPE_F32);
    expect_type(q4km, "rope_freqs.weight", 1, 32, &m, GGUF_TYPE_F32);
    expect_type(q4km, "blk.3.attn_q.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    expect_type(q4km, "blk.3.attn_k.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    expect_type(q4km, "blk.3.ffn_gate.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    // use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2.
    static const int more[16] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    for (int i = 0; i < 16; i++) {
        char name[64];
        uint32_t want = more[i] ? GGUF_TYPE_Q6_K : GGUF_TYPE_Q4_K;
        snprintf(name, sizeof(name), "blk.%d.attn_v.weight", i);
        expect_type(q4km, name, 2, 2048, &m, want);
        snprintf(name, sizeof(name), "blk.%d.ffn_down.weight", i);
        expect_type(q4km, name, 2, 8192, &m, want);
    }
    // Untied: output gets Q6_K, token_embd keeps the default.
    m.tied_embeddings = false;
    expect_type(q4km, "output.weight", 2, 2048, &m, GGUF_TYPE_Q6_K);
    expect_type(q4km, "token_embd.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    // Q8_0 and Q4_0: output Q8_0 / Q6_K, everything else the default.
    expect_type(7, "output.weight", 2, 2048, &m, GGUF_TYPE_Q8_0);
    expect_type(2, "output.weight", 2, 2048, &m, GGUF_TYPE_Q6_K);
    expect_type(2, "blk.0.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q4_0);
    // Q4_K_S: attn_v of the first 4 layers and ffn_down of the first n/8 get Q5_K.
    expect_type(14, "blk.3.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q5_K);
    expect_type(14, "blk.4.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    expect_type(14, "blk.1.ffn_down.weight", 2, 8192, &m, GGUF_TYPE_Q5_K);
    expect_type(14, "blk.2.ffn_down.weight", 2, 8192, &m, GGUF_TYPE_Q4_K);
    // Q3_K_M: attn_v Q5_K for layers 0-1 then Q4_K; attn_output Q4_K;
    // ffn_down Q5_K for layer 0 (n/16 = 1) then Q4_K.
    expect_type(12, "blk.1.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q5_K);
    expect_type(12, "blk.2.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    expect_type(12, "blk.5.attn_output.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    expect_type(12, "blk.0.ffn_down.weight", 2, 8192, &m, GGUF_TYPE_Q5_K);
    expect_type(12, "blk.1.ffn_down.weight", 2, 8192, &m, GGUF_TYPE_Q4_K);
    expect_type(12, "blk.1.ffn_up.weight", 2, 2048, &m, GGUF_TYPE_Q3_K);
    // Q2_K: attn_v Q4_K with GQA >= 4 (Q3_K otherwise), ffn_down and attn_output Q3_K.
    expect_type(10, "blk.1.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q4_K);
    m.n_gqa = 1;
    expect_type(10, "blk.1.attn_v.weight", 2, 2048, &m, GGUF_TYPE_Q3_K);
    expect_type(10, "blk.1.ffn_down.weight", 2, 8192, &m, GGUF_TYPE_Q3_K);
    expect_type(10, "blk.1.attn_output.weight", 2, 2048, &m, GGUF_TYPE_Q3_K);
    // Shape fallbacks: rows of 64 cannot hold K-quant blocks.
    expect_type(q4km, "blk.3.attn_q.weight", 2, 64, &m, GGUF_TYPE_Q5_0);
    expect_type(16, "blk.3.attn_q.weight", 2, 64, &m, GGUF_TYPE_Q5_1);
    expect_type(18, "blk.3.attn_q.weight", 2, 64, &m, GGUF_TYPE_Q8_0);
    expect_type(10, "blk.3.attn_q.weight", 2, 64, &m, GGUF_TYPE_Q4_0);
    expect_type(q4km, "output.weight", 2, 64, &m, GGUF_TYPE_Q8_0);
    expect_type(2, "blk.3.attn_q.weight", 2, 48, &m, GGUF_TYPE_F16);
    // F16 mix converts every quantizable tensor, leaves norms alone.
    expect_type(1, "blk.3.attn_q.weight", 2, 64, &m, GGUF_TYPE_F16);
    expect_type(1, "blk.3.ffn_norm.weight", 1, 64, &m, GGUF_TYPE_F32);
    assert_false(quantize_tensor_quantizable("position_embd.weight", 2));
    assert_false(quantize_tensor_quantizable("blk.0.ffn_gate_inp.weight", 2));
    assert_false(quantize_tensor_quantizable("blk.0.attn_q.bias", 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_matches_llama_cpp),
        cmocka_unit_test(test_mixes),
        cmocka_unit_test(test_model_quantize_matches_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

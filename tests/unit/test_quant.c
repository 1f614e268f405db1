// engine/quant: dequantization bit-exact against ggml's test vectors and
// quantize → dequantize error bounds (the mixes and whole-model
// quantization: test_quantize.c).
#include <math.h>
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
#include "testutil.h"

// The integer form the dot products use gives the dequantized values:
// d * iq_scale * ls * q within float rounding.
static void check_iq_decode(const struct quant_traits *tr, const uint8_t *blocks, const float *want,
                            int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++) {
        struct quant_iq_block ib;
        tr->iq_decode(blocks + (size_t)b * tr->type_size, &ib);
        for (int j = 0; j < QK_K; j++) {
            double v = (double)ib.d * tr->iq_scale * ib.ls[j / 16] * ib.q[j];
            double w = want[b * QK_K + j];
            if (fabs(v - w) > 1e-6 * fabs(w) + 1e-30)
                fail_msg("%s block %lld value %d: integer form %.9g, dequantized %.9g", tr->name,
                         (long long)b, j, v, w);
        }
    }
}

// Dequantizes each type's 8 blocks from <dir>/<T>.blocks and compares with
// <dir>/<T>.f32 bit for bit.
static void check_vectors(const uint32_t *types, size_t n_types, const char *dir)
{
    for (size_t t = 0; t < n_types; t++) {
        const struct quant_traits *tr = quant_traits_get(types[t]);
        assert_non_null(tr);
        char path[1024];
        size_t nb, nf;
        snprintf(path, sizeof(path), "%s/%s.blocks", dir, tr->name);
        void *blocks = test_read_file(path, &nb);
        if (!blocks)
            fail_msg("missing %s", path);
        snprintf(path, sizeof(path), "%s/%s.f32", dir, tr->name);
        float *expect = test_read_file(path, &nf);
        if (!expect)
            fail_msg("missing %s", path);
        // 8 blocks (BF16, not a block type: 256 values)
        int64_t n = tr->block_size == 1 ? 256 : 8 * (int64_t)tr->block_size;
        assert_int_equal(nf, (size_t)n * 4);
        assert_int_equal(quant_row_size(types[t], n), nb);
        float *got = malloc(nf);
        tr->to_float(blocks, got, n);
        for (int64_t i = 0; i < n; i++) {
            if (memcmp(&got[i], &expect[i], 4) != 0)
                fail_msg("%s element %lld: got %.9g want %.9g", tr->name, (long long)i, got[i],
                         expect[i]);
        }
        if (tr->iq_decode)
            check_iq_decode(tr, blocks, got, n);
        free(got);
        free(blocks);
        free(expect);
    }
}

static void test_vectors(void **state)
{
    (void)state;
    static const uint32_t types[] = {
        GGUF_TYPE_Q4_0, GGUF_TYPE_Q4_1,   GGUF_TYPE_Q5_0,   GGUF_TYPE_Q5_1, GGUF_TYPE_Q8_0,
        GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K,   GGUF_TYPE_Q4_K,   GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K,
        GGUF_TYPE_Q8_K, GGUF_TYPE_IQ4_NL, GGUF_TYPE_IQ4_XS,
    };
    char dir[1024];
    check_vectors(types, sizeof(types) / sizeof(types[0]), test_fixture(dir, sizeof(dir), "quant"));
}

// The i-quant, ternary, MXFP4 and BF16 vectors of ../shared (ggml
// ec98e2002): skipped only when shared is absent, every type must match
// when it is present.
static void test_vectors_shared(void **state)
{
    (void)state;
    static const uint32_t types[] = {
        GGUF_TYPE_IQ2_XXS, GGUF_TYPE_IQ2_XS, GGUF_TYPE_IQ3_XXS, GGUF_TYPE_IQ1_S, GGUF_TYPE_IQ3_S,
        GGUF_TYPE_IQ2_S,   GGUF_TYPE_IQ1_M,  GGUF_TYPE_BF16,    GGUF_TYPE_TQ1_0, GGUF_TYPE_TQ2_0,
        GGUF_TYPE_MXFP4,   GGUF_TYPE_IQ4_NL, GGUF_TYPE_IQ4_XS,  GGUF_TYPE_Q4_K,
    };
    char readme[1024];
    if (!test_shared_fixture(readme, sizeof(readme), "quant/README.md")) {
        printf("skip: shared fixtures absent (quant/README.md)\n");
        return;
    }
    char *slash = strrchr(readme, '/');
    *slash = '\0';
    check_vectors(types, sizeof(types) / sizeof(types[0]), readme);
}

// The kernels' E8M0 table holds exactly what the formula gives, bit for bit.
static void test_e8m0_table(void **state)
{
    (void)state;
    for (int e = 0; e < 256; e++) {
        float f = quant_e8m0_half((uint8_t)e), t = quant_e8m0_half_table[e];
        assert_memory_equal(&f, &t, sizeof f);
    }
}

static void test_traits(void **state)
{
    (void)state;
    for (uint32_t id = 0; id < 64; id++) {
        const struct quant_traits *tr = quant_traits_get(id);
        if (!tr)
            continue;
        uint32_t bs, ts;
        assert_true(gguf_type_geometry(id, &bs, &ts));
        assert_int_equal(bs, tr->block_size);
        assert_int_equal(ts, tr->type_size);
        assert_string_equal(tr->name, gguf_type_name(id));
        assert_non_null(tr->to_float);
    }
    assert_null(quant_traits_get(GGUF_TYPE_NVFP4));
    assert_null(quant_traits_get(1000));
    assert_int_equal(quant_row_size(GGUF_TYPE_Q4_K, 512), 288);
    assert_int_equal(quant_row_size(GGUF_TYPE_Q4_K, 100), 0);
    assert_int_equal(quant_row_size(GGUF_TYPE_F16, 3), 6);
}

// Deterministic gaussian-ish data (sum of uniforms), with a few outliers.
static void fill(float *x, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        float acc = 0;
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            acc += (float)((s >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
        }
        x[i] = acc * 0.1f;
        if (i % 97 == 13)
            x[i] *= 6;
    }
}

static void test_roundtrip_bounds(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        double max_rel_rmse;  // RMSE of the error / RMS of the data
    } cases[] = {
        {GGUF_TYPE_F16, 0.001}, {GGUF_TYPE_BF16, 0.005}, {GGUF_TYPE_Q8_0, 0.01},
        {GGUF_TYPE_Q8_K, 0.03}, {GGUF_TYPE_Q8_1, 0.01},  {GGUF_TYPE_Q6_K, 0.03},
        {GGUF_TYPE_Q5_0, 0.08}, {GGUF_TYPE_Q5_1, 0.05},  {GGUF_TYPE_Q5_K, 0.05},
        {GGUF_TYPE_Q4_0, 0.16}, {GGUF_TYPE_Q4_1, 0.12},  {GGUF_TYPE_Q4_K, 0.11},
        {GGUF_TYPE_Q3_K, 0.25}, {GGUF_TYPE_Q2_K, 0.45},  {GGUF_TYPE_F32, 0.0},
    };
    const int64_t n = 4096;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    void *q = malloc(n * 4);
    fill(x, n, 7);
    double rms = 0;
    for (int64_t i = 0; i < n; i++)
        rms += (double)x[i] * x[i];
    rms = sqrt(rms / (double)n);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct quant_traits *tr = quant_traits_get(cases[c].type);
        assert_non_null(tr->from_float_ref);
        memset(q, 0xAB, n * 4);
        tr->from_float_ref(x, q, n);
        tr->to_float(q, y, n);
        double err = 0;
        for (int64_t i = 0; i < n; i++)
            err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        err = sqrt(err / (double)n) / rms;
        print_message("%-5s relative rmse %.5f (bound %.3f)\n", tr->name, err,
                      cases[c].max_rel_rmse);
        if (err > cases[c].max_rel_rmse)
            fail_msg("%s: relative rmse %.4f > %.4f", tr->name, err, cases[c].max_rel_rmse);
        // Deterministic: the same input gives the same bytes.
        void *q2 = malloc(n * 4);
        memset(q2, 0xCD, n * 4);
        tr->from_float_ref(x, q2, n);
        assert_memory_equal(q, q2, quant_row_size(cases[c].type, n));
        free(q2);
    }
    // All-zero input quantizes to zeros and back without NaNs.
    memset(x, 0, n * sizeof(float));
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct quant_traits *tr = quant_traits_get(cases[c].type);
        tr->from_float_ref(x, q, n);
        tr->to_float(q, y, n);
        for (int64_t i = 0; i < n; i++)
            if (y[i] != 0.0f)
                fail_msg("%s: zero input gave %g at %lld", tr->name, y[i], (long long)i);
    }
    free(x);
    free(y);
    free(q);
}

// Hand-checked small cases of the legacy quantizers.
static void test_q8_0_exact(void **state)
{
    (void)state;
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16) / 16.0f * 1.27f;  // absmax 1.27 at i = 0
    struct block_q8_0 b;
    quant_traits_get(GGUF_TYPE_Q8_0)->from_float_ref(x, &b, 32);
    assert_int_equal(b.d, quant_f32_to_f16(0.01f));
    assert_int_equal(b.qs[0], -127);
    assert_int_equal(b.qs[16], 0);
    struct block_q4_0 b4;
    quant_traits_get(GGUF_TYPE_Q4_0)->from_float_ref(x, &b4, 32);
    // d = max / -8 with max = -1.27: element 0 maps to nibble 0.
    assert_int_equal(b4.qs[0] & 0x0F, 0);
    assert_int_equal(b4.d, quant_f32_to_f16(1.27f / 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),          cmocka_unit_test(test_vectors_shared),
        cmocka_unit_test(test_traits),           cmocka_unit_test(test_e8m0_table),
        cmocka_unit_test(test_roundtrip_bounds), cmocka_unit_test(test_q8_0_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

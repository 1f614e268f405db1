// kernels: every SIMD variant against its scalar twin on random data, the
// scalar dot products against a float reference computed here from the
// format spec (spec/gguf.md §5), activation quantizers byte-exact against
// straightforward test-local versions, and gemm tiles against vec_dot.
// ISAs the CPU lacks are skipped at run time; scalar always runs.
//
// Tolerances (relative to sum |w_i * x_i|, the scale of the rounding error):
//   SIMD vs scalar, gemm vs vec_dot: 2e-5 (integer sums are exact; only the
//     float accumulation order and fused multiply-adds differ);
//   scalar vs float reference: 2e-5, except Q4_1 / Q5_1 at 2e-3 because the
//     Q8_1 activation sum s is stored as f16, as in ggml.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "engine/kernels/internal.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"
#include "testutil.h"

// ---------------------------------------------------------------------------
// Random data

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rnd_f(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd_u32() & 0xFFFFFF) / 16777216.0f;
}

static void rnd_floats(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_f(-1.0f, 1.0f);
    if (n > 40)  // a couple of outliers, as real activations have
        x[rnd_u32() % n] = rnd_f(-12.0f, 12.0f);
}

static void put_f16(void *p, float v)
{
    uint16_t h = quant_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static float get_f16(const void *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return quant_f16_to_f32(h);
}

// Random weight row of `type`: random bytes with sane f16 scale fields.
static void *rnd_iq_weights(uint32_t type, int64_t n);

static void *rnd_weights(uint32_t type, int64_t n)
{
    if (type == GGUF_TYPE_MXFP4)
        return rnd_iq_weights(type, n);  // a sane E8M0 scale
    size_t size = kernels_row_size(type, n);
    assert_true(size > 0);
    uint8_t *p = malloc(size);
    assert_non_null(p);
    if (type == GGUF_TYPE_F32) {
        rnd_floats((float *)p, n);
        return p;
    }
    if (type == GGUF_TYPE_F16 || type == GGUF_TYPE_BF16) {
        uint16_t *h = (uint16_t *)p;
        for (int64_t i = 0; i < n; i++) {
            float v = rnd_f(-1.0f, 1.0f);
            h[i] = type == GGUF_TYPE_F16 ? quant_f32_to_f16(v) : quant_f32_to_bf16(v);
        }
        return p;
    }
    for (size_t i = 0; i < size; i++)
        p[i] = (uint8_t)rnd_u32();
    // (offset of d, offset of dmin/m or -1) per block, block bytes
    int od = 0, om = -1;
    switch (type) {
    case GGUF_TYPE_Q4_0:
    case GGUF_TYPE_Q5_0:
    case GGUF_TYPE_Q8_0:
    case GGUF_TYPE_IQ4_NL:
        od = 0;
        break;
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1:
        od = 0;
        om = 2;
        break;
    case GGUF_TYPE_Q2_K:
        od = 80;
        om = 82;
        break;
    case GGUF_TYPE_Q3_K:
        od = 108;
        break;
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K:
        od = 0;
        om = 2;
        break;
    case GGUF_TYPE_Q6_K:
        od = 208;
        break;
    case GGUF_TYPE_TQ2_0:
        od = 64;
        break;
    default:
        fail_msg("type %u", type);
    }
    size_t bb = kernels_row_size(type, quant_traits_get(type)->block_size);
    for (size_t b = 0; b < size / bb; b++) {
        put_f16(p + b * bb + od, rnd_f(-0.1f, 0.1f));
        if (om >= 0)
            put_f16(p + b * bb + om, rnd_f(-0.05f, 0.05f));
    }
    return p;
}

// ---------------------------------------------------------------------------
// Float reference: dequantizers written from the spec, element by element.

static void deq_weights(uint32_t type, const uint8_t *p, float *y, int64_t n)
{
    // the i-quant family's layouts (only the tolerance of their interleaved
    // products is taken from here): the traits' dequantizers, as iq_exact
    if (type == GGUF_TYPE_IQ4_NL || type == GGUF_TYPE_TQ2_0 || type == GGUF_TYPE_MXFP4) {
        quant_traits_get(type)->to_float(p, y, n);
        return;
    }
    for (int64_t e = 0; e < n; e++) {
        const int64_t nb32 = e / 32, nb256 = e / 256;
        const int j32 = (int)(e % 32), i = (int)(e % 256);
        switch (type) {
        case GGUF_TYPE_F32:
            memcpy(&y[e], p + 4 * e, 4);
            break;
        case GGUF_TYPE_F16:
            y[e] = get_f16(p + 2 * e);
            break;
        case GGUF_TYPE_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * e, 2);
            y[e] = quant_bf16_to_f32(h);
            break;
        }
        case GGUF_TYPE_Q4_0: {
            const uint8_t *b = p + 18 * nb32;
            int q = j32 < 16 ? (b[2 + j32] & 15) : (b[2 + j32 - 16] >> 4);
            y[e] = (float)(q - 8) * get_f16(b);
            break;
        }
        case GGUF_TYPE_Q4_1: {
            const uint8_t *b = p + 20 * nb32;
            int q = j32 < 16 ? (b[4 + j32] & 15) : (b[4 + j32 - 16] >> 4);
            y[e] = (float)q * get_f16(b) + get_f16(b + 2);
            break;
        }
        case GGUF_TYPE_Q5_0:
        case GGUF_TYPE_Q5_1: {
            const bool one = type == GGUF_TYPE_Q5_1;
            const uint8_t *b = p + (one ? 24 : 22) * nb32;
            const uint8_t *qh = b + (one ? 4 : 2), *qs = qh + 4;
            int q = j32 < 16 ? (qs[j32] & 15) : (qs[j32 - 16] >> 4);
            q |= ((qh[j32 / 8] >> (j32 % 8)) & 1) << 4;
            y[e] = one ? (float)q * get_f16(b) + get_f16(b + 2) : (float)(q - 16) * get_f16(b);
            break;
        }
        case GGUF_TYPE_Q8_0: {
            const uint8_t *b = p + 34 * nb32;
            y[e] = (float)(int8_t)b[2 + j32] * get_f16(b);
            break;
        }
        case GGUF_TYPE_Q2_K: {
            const uint8_t *b = p + 84 * nb256;
            int half = i / 128, j = (i % 128) / 32, l = i % 32;
            int q = (b[16 + 32 * half + l] >> (2 * j)) & 3;
            int s = b[i / 16];
            y[e] = get_f16(b + 80) * (float)(s & 15) * (float)q - get_f16(b + 82) * (float)(s >> 4);
            break;
        }
        case GGUF_TYPE_Q3_K: {
            const uint8_t *b = p + 110 * nb256, *sc = b + 96;
            int half = i / 128, j = (i % 128) / 32, l = i % 32, si = i / 16;
            int lo4 = si < 8 ? (sc[si] & 15) : (sc[si - 8] >> 4);
            int hi2 = (sc[8 + si % 4] >> (2 * (si / 4))) & 3;
            int s = (lo4 | hi2 << 4) - 32;
            int q =
                ((b[32 + 32 * half + l] >> (2 * j)) & 3) - (((b[l] >> (4 * half + j)) & 1) ? 0 : 4);
            y[e] = get_f16(b + 108) * (float)s * (float)q;
            break;
        }
        case GGUF_TYPE_Q4_K:
        case GGUF_TYPE_Q5_K: {
            const bool five = type == GGUF_TYPE_Q5_K;
            const uint8_t *b = p + (five ? 176 : 144) * nb256, *s = b + 4;
            const uint8_t *qs = b + (five ? 48 : 16);
            int sub = i / 32, sc, m;
            if (sub < 4) {
                sc = s[sub] & 63;
                m = s[sub + 4] & 63;
            } else {
                sc = (s[sub + 4] & 15) | ((s[sub - 4] >> 6) << 4);
                m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
            }
            int byte = qs[32 * (i / 64) + i % 32];
            int q = (i % 64) < 32 ? (byte & 15) : (byte >> 4);
            if (five)
                q += 16 * ((b[16 + i % 32] >> sub) & 1);
            y[e] = get_f16(b) * (float)sc * (float)q - get_f16(b + 2) * (float)m;
            break;
        }
        case GGUF_TYPE_Q6_K: {
            const uint8_t *b = p + 210 * nb256;
            int half = i / 128, j = (i % 128) / 32, l = i % 32;
            int lb = b[64 * half + l + ((j == 1 || j == 3) ? 32 : 0)];
            int low4 = j < 2 ? (lb & 15) : (lb >> 4);
            int high2 = (b[128 + 32 * half + l] >> (2 * j)) & 3;
            y[e] = get_f16(b + 208) * (float)(int8_t)b[192 + i / 16] *
                   (float)((low4 | high2 << 4) - 32);
            break;
        }
        default:
            fail_msg("type %u", type);
        }
    }
}

static void deq_acts(uint32_t vdt, const uint8_t *p, float *y, int64_t n)
{
    for (int64_t e = 0; e < n; e++) {
        switch (vdt) {
        case GGUF_TYPE_Q8_0: {
            const uint8_t *b = p + 34 * (e / 32);
            y[e] = get_f16(b) * (float)(int8_t)b[2 + e % 32];
            break;
        }
        case GGUF_TYPE_Q8_1: {
            const uint8_t *b = p + 36 * (e / 32);
            y[e] = get_f16(b) * (float)(int8_t)b[4 + e % 32];
            break;
        }
        case GGUF_TYPE_Q8_K: {
            const uint8_t *b = p + 292 * (e / 256);
            float d;
            memcpy(&d, b, 4);
            y[e] = d * (float)(int8_t)b[4 + e % 256];
            break;
        }
        default:
            deq_weights(vdt, p, y, n);
            return;
        }
    }
}

// ---------------------------------------------------------------------------

static const uint32_t all_types[] = {
    GGUF_TYPE_F32,  GGUF_TYPE_F16,  GGUF_TYPE_BF16, GGUF_TYPE_Q4_0, GGUF_TYPE_Q4_1,
    GGUF_TYPE_Q5_0, GGUF_TYPE_Q5_1, GGUF_TYPE_Q8_0, GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K,
    GGUF_TYPE_Q4_K, GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K,
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

static const char *type_name(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_F32:
        return "F32";
    case GGUF_TYPE_F16:
        return "F16";
    case GGUF_TYPE_BF16:
        return "BF16";
    case GGUF_TYPE_Q4_0:
        return "Q4_0";
    case GGUF_TYPE_Q4_1:
        return "Q4_1";
    case GGUF_TYPE_Q5_0:
        return "Q5_0";
    case GGUF_TYPE_Q5_1:
        return "Q5_1";
    case GGUF_TYPE_Q8_0:
        return "Q8_0";
    case GGUF_TYPE_Q2_K:
        return "Q2_K";
    case GGUF_TYPE_Q3_K:
        return "Q3_K";
    case GGUF_TYPE_Q4_K:
        return "Q4_K";
    case GGUF_TYPE_Q5_K:
        return "Q5_K";
    case GGUF_TYPE_Q6_K:
        return "Q6_K";
    default:
        return "?";
    }
}

static int block_of(uint32_t t)
{
    if (t == GGUF_TYPE_F32 || t == GGUF_TYPE_F16 || t == GGUF_TYPE_BF16)
        return 1;
    return t >= GGUF_TYPE_Q2_K ? 256 : 32;
}

static int lengths_for(uint32_t t, int64_t *out)
{
    static const int64_t flt[] = {1, 7, 8, 31, 32, 33, 100, 256, 1000, 4096};
    static const int64_t q32[] = {32, 64, 96, 256, 288, 1056, 4096, 16416};
    static const int64_t qk[] = {256, 512, 768, 2048, 4096};
    const int64_t *src = block_of(t) == 1 ? flt : block_of(t) == 32 ? q32 : qk;
    int cnt = block_of(t) == 1 ? 10 : block_of(t) == 32 ? 8 : 5;
    memcpy(out, src, (size_t)cnt * sizeof(*out));
    return cnt;
}

static double abs_dot(const float *a, const float *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += fabs((double)a[i] * (double)b[i]);
    return s;
}

static void test_dispatch(void **state)
{
    (void)state;
    assert_true(kernels_isa_supported(KERNELS_ISA_SCALAR));
    enum kernels_isa best = kernels_best_isa();
    assert_true(kernels_isa_supported(best));
    printf("best isa: %s\n", kernels_isa_name(best));
    for (size_t t = 0; t < N_TYPES; t++) {
        const struct kernels_type *k = kernels_get(all_types[t]);
        assert_non_null(k);
        assert_non_null(k->vec_dot);
        assert_non_null(k->from_float);
        if (k->gemm)
            assert_true(k->gemm_nr > 0 && k->gemm_nc > 0);
    }
    assert_null(kernels_get(GGUF_TYPE_NVFP4));
    assert_null(kernels_get(GGUF_TYPE_Q8_K));
    assert_null(kernels_get(1000));
    assert_null(kernels_get_isa(GGUF_TYPE_Q4_0, KERNELS_ISA_COUNT_));
    assert_int_equal(kernels_row_size(GGUF_TYPE_Q4_0, 64), 36);
    assert_int_equal(kernels_row_size(GGUF_TYPE_Q6_K, 512), 420);
    assert_int_equal(kernels_row_size(GGUF_TYPE_Q8_K, 256), 292);
    assert_int_equal(kernels_row_size(GGUF_TYPE_Q4_0, 33), 0);
    assert_int_equal(kernels_row_size(GGUF_TYPE_IQ2_XXS, 256), 66);  // from the type table
    assert_int_equal(kernels_row_size(GGUF_TYPE_IQ4_NL, 64), 36);
    assert_int_equal(kernels_row_size(GGUF_TYPE_NVFP4, 64), 0);  // no engine traits
}

// The type table registers each type's traits and scalar kernel by its
// family (gguf/types.def): NONE neither, ACT traits only, the others both,
// and no ISA table adds a type the table does not run.
#define HAS_KERNEL_NONE        0
#define HAS_KERNEL_ACT(s)      0
#define HAS_KERNEL_FLOAT(s, a) 1
#define HAS_KERNEL_BLOCK(s, a) 1
#define HAS_KERNEL_NL(s)       1
#define HAS_KERNEL_IQ(s, sc)   1
#define HAS_TRAITS_NONE        0
#define HAS_TRAITS_ACT(s)      1
#define HAS_TRAITS_FLOAT(s, a) 1
#define HAS_TRAITS_BLOCK(s, a) 1
#define HAS_TRAITS_NL(s)       1
#define HAS_TRAITS_IQ(s, sc)   1
static const struct {
    uint32_t id;
    bool traits, kernel;
} registry_rows[] = {
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) {id, HAS_TRAITS_##fam, HAS_KERNEL_##fam},
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
};

static void test_registry(void **state)
{
    (void)state;
    int kernels = 0;
    for (size_t i = 0; i < sizeof registry_rows / sizeof registry_rows[0]; i++) {
        const uint32_t id = registry_rows[i].id;
        const struct quant_traits *tr = quant_traits_get(id);
        assert_int_equal(tr != NULL, registry_rows[i].traits);
        const struct kernels_type *k = kernels_get_isa(id, KERNELS_ISA_SCALAR);
        assert_int_equal(k != NULL, registry_rows[i].kernel);
        kernels += k != NULL;
        if (k)  // the activations are a type the engine converts to and reads
            assert_non_null(quant_traits_get(k->vec_dot_type));
        for (int isa = 1; isa < KERNELS_ISA_COUNT_; isa++)
            if (kernels_isa_supported((enum kernels_isa)isa)) {
                const struct kernels_type *ki = kernels_get_isa(id, (enum kernels_isa)isa);
                assert_int_equal(ki != NULL, k != NULL);
                if (ki)
                    assert_int_equal(ki->vec_dot_type, k->vec_dot_type);
            }
    }
    assert_true(kernels >= (int)N_TYPES);  // all_types and the NL / IQ ones
}

// Straightforward Q8_0 quantizer (ggml's quantize_row_q8_0_ref semantics).
static void simple_q8_0(const float *x, uint8_t *out, int64_t n, bool with_sum)
{
    size_t bb = with_sum ? 36 : 34;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *v = x + 32 * b;
        uint8_t *o = out + bb * (size_t)b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(v[j]) > amax)
                amax = fabsf(v[j]);
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(o, d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int8_t q = (int8_t)roundf(v[j] * id);
            o[bb - 32 + j] = (uint8_t)q;
            sum += q;
        }
        if (with_sum)
            put_f16(o + 2, (float)sum * d);
    }
}

static void simple_q8_K(const float *x, uint8_t *out, int64_t n)
{
    for (int64_t b = 0; b < n / 256; b++) {
        const float *v = x + 256 * b;
        uint8_t *o = out + 292 * (size_t)b;
        memset(o, 0, 292);
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                max = v[j];
            }
        if (amax == 0.0f)
            continue;
        float iscale = -127.0f / max;
        int16_t bs[16] = {0};
        for (int j = 0; j < 256; j++) {
            float r = rintf(iscale * v[j]);  // ties to even (default rounding mode)
            int q = r > 127.0f ? 127 : (int)r;
            o[4 + j] = (uint8_t)(int8_t)q;
            bs[j / 16] = (int16_t)(bs[j / 16] + q);
        }
        float d = 1.0f / iscale;
        memcpy(o, &d, 4);
        memcpy(o + 260, bs, sizeof(bs));
    }
}

// Every ISA's from_float of the tables of `users` (all pairing with
// act_type) gives want, byte for byte.
static void check_quantizers(const uint32_t *users, size_t n_users, uint32_t act_type,
                             const float *x, const uint8_t *want, uint8_t *got, int64_t n)
{
    for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++)
        for (size_t u = 0; u < n_users; u++) {
            const struct kernels_type *k = kernels_get_isa(users[u], (enum kernels_isa)isa);
            if (!k)
                continue;
            assert_int_equal(k->vec_dot_type, act_type);
            k->from_float(x, got, n);
            assert_memory_equal(want, got, kernels_row_size(act_type, n));
        }
}

static void test_from_float(void **state)
{
    (void)state;
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float));
    uint8_t *want = malloc(N * 2), *got = malloc(N * 2);
    assert_non_null(x);
    assert_non_null(want);
    assert_non_null(got);
    for (int round = 0; round < 4; round++) {
        rnd_floats(x, N);
        if (round == 1) {
            for (int i = 0; i < 64; i++)  // zero blocks
                x[i] = 0.0f;
            // ties: d = 1 exactly, x = k + 0.5 must round away from zero
            x[64] = 127.0f;
            for (int i = 65; i < 96; i++)
                x[i] = (float)(i - 80) + 0.5f;
        }
        if (round == 2)  // ties of |max| with both signs: the first wins
            for (int i = 0; i < 256; i++)
                x[i] = (i % 3 == 0) ? -2.0f : (i % 3 == 1 ? 2.0f : rnd_f(-1.0f, 1.0f));
        // the activation quantizers of every table that pairs with Q8_0
        // (the legacy types and the 16-value tables) and Q8_K (the K-,
        // i-quant and ternary types)
        const uint32_t q80_users[] = {GGUF_TYPE_Q8_0, GGUF_TYPE_IQ4_NL, GGUF_TYPE_MXFP4};
        const uint32_t q81_users[] = {GGUF_TYPE_Q4_1};
        const uint32_t q8k_users[] = {GGUF_TYPE_Q4_K, GGUF_TYPE_IQ2_S, GGUF_TYPE_TQ1_0,
                                      GGUF_TYPE_IQ4_XS};
        simple_q8_0(x, want, N, false);
        check_quantizers(q80_users, sizeof q80_users / sizeof *q80_users, GGUF_TYPE_Q8_0, x, want,
                         got, N);
        if (round == 1) {  // roundf, not rint: 2.5 -> 3, -2.5 -> -3 (elements 82, 77)
            assert_int_equal((int8_t)want[68 + 2 + 82 - 64], 3);
            assert_int_equal((int8_t)want[68 + 2 + 77 - 64], -3);
        }
        simple_q8_0(x, want, N, true);
        check_quantizers(q81_users, sizeof q81_users / sizeof *q81_users, GGUF_TYPE_Q8_1, x, want,
                         got, N);
        simple_q8_K(x, want, N);
        check_quantizers(q8k_users, sizeof q8k_users / sizeof *q8k_users, GGUF_TYPE_Q8_K, x, want,
                         got, N);
        for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
            const struct kernels_type *k = kernels_get_isa(GGUF_TYPE_F16, (enum kernels_isa)isa);
            if (!k)
                continue;
            k->from_float(x, got, N);
            for (int i = 0; i < N; i++) {
                uint16_t h;
                memcpy(&h, got + 2 * i, 2);
                assert_int_equal(h, quant_f32_to_f16(x[i]));
            }
        }
        if (round == 3) {  // bf16 edge cases (last: the quantizers above assume finite x)
            const uint32_t special[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7F800000u,
                                        0xFF800000u, 0x3F808000u, 0x3F818000u, 0x7F7FFFFFu,
                                        0x00008000u, 0x80018000u, 0x00000001u, 0x80000000u};
            for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
                memcpy(&x[1000 + i], &special[i], 4);
        }
        for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
            const struct kernels_type *k = kernels_get_isa(GGUF_TYPE_BF16, (enum kernels_isa)isa);
            if (!k)
                continue;
            // N - 3: the vector loop and the scalar tail both
            k->from_float(x, got, N - 3);
            for (int i = 0; i < N - 3; i++) {
                uint16_t h;
                memcpy(&h, got + 2 * i, 2);
                if (h != quant_f32_to_bf16(x[i]))
                    fail_msg("%s bf16 of %a (element %d): %04x, want %04x",
                             kernels_isa_name((enum kernels_isa)isa), (double)x[i], i, h,
                             quant_f32_to_bf16(x[i]));
            }
        }
    }
    free(x);
    free(want);
    free(got);
}

// scalar vec_dot against the float reference, for every type and length
static void test_scalar_vs_reference(void **state)
{
    (void)state;
    for (size_t t = 0; t < N_TYPES; t++) {
        const uint32_t type = all_types[t];
        const struct kernels_type *k = kernels_get_isa(type, KERNELS_ISA_SCALAR);
        assert_non_null(k);
        int64_t lens[16];
        int nl = lengths_for(type, lens);
        for (int li = 0; li < nl; li++) {
            const int64_t n = lens[li];
            void *w = rnd_weights(type, n);
            float *x = malloc((size_t)n * sizeof(float));
            float *wf = malloc((size_t)n * sizeof(float));
            float *xf = malloc((size_t)n * sizeof(float));
            void *xq = malloc(kernels_row_size(k->vec_dot_type, n));
            rnd_floats(x, n);
            k->from_float(x, xq, n);
            deq_weights(type, w, wf, n);
            deq_acts(k->vec_dot_type, xq, xf, n);
            double ref = 0.0;
            for (int64_t i = 0; i < n; i++)
                ref += (double)wf[i] * (double)xf[i];
            float got;
            k->vec_dot(n, &got, w, xq);
            double tol_rel = (type == GGUF_TYPE_Q4_1 || type == GGUF_TYPE_Q5_1) ? 2e-3 : 2e-5;
            double tol = tol_rel * abs_dot(wf, xf, n) + 1e-6;
            if (fabs(got - ref) > tol)
                fail_msg("%s n=%lld: scalar %.9g reference %.9g (tol %.3g)", type_name(type),
                         (long long)n, got, ref, tol);
            free(w);
            free(x);
            free(wf);
            free(xf);
            free(xq);
        }
    }
}

// every ISA's vec_dot and gemm against the scalar vec_dot
static void test_isa_vs_scalar(void **state)
{
    (void)state;
    int checked = 0;
    for (int isa = 1; isa < KERNELS_ISA_COUNT_; isa++) {
        if (!kernels_isa_supported((enum kernels_isa)isa)) {
            printf("skip %s: not supported by this CPU\n", kernels_isa_name((enum kernels_isa)isa));
            continue;
        }
        for (size_t t = 0; t < N_TYPES; t++) {
            const uint32_t type = all_types[t];
            const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
            const struct kernels_type *k = kernels_get_isa(type, (enum kernels_isa)isa);
            assert_non_null(k);
            assert_int_equal(k->vec_dot_type, ref->vec_dot_type);
            int64_t lens[16];
            int nl = lengths_for(type, lens);
            for (int li = 0; li < nl; li++) {
                const int64_t n = lens[li];
                enum { NR = 9, NC = 7 };
                const size_t wrow = kernels_row_size(type, n);
                const size_t xrow = kernels_row_size(k->vec_dot_type, n);
                uint8_t *w = malloc(wrow * NR), *xq = malloc(xrow * NC);
                float *x = malloc((size_t)n * sizeof(float));
                float *wf = malloc((size_t)n * sizeof(float));
                float *xf = malloc((size_t)n * sizeof(float));
                for (int r = 0; r < NR; r++) {
                    void *wr = rnd_weights(type, n);
                    memcpy(w + wrow * r, wr, wrow);
                    free(wr);
                }
                for (int c = 0; c < NC; c++) {
                    rnd_floats(x, n);
                    ref->from_float(x, xq + xrow * c, n);
                }
                float want[NC][NR], s[NC * NR];
                double scale[NC][NR];
                for (int c = 0; c < NC; c++) {
                    deq_acts(k->vec_dot_type, xq + xrow * c, xf, n);
                    for (int r = 0; r < NR; r++) {
                        deq_weights(type, w + wrow * r, wf, n);
                        scale[c][r] = abs_dot(wf, xf, n) * 2e-5 + 1e-6;
                        ref->vec_dot(n, &want[c][r], w + wrow * r, xq + xrow * c);
                        float got;
                        k->vec_dot(n, &got, w + wrow * r, xq + xrow * c);
                        if (fabs(got - want[c][r]) > scale[c][r])
                            fail_msg("%s %s n=%lld: vec_dot %.9g scalar %.9g",
                                     kernels_isa_name((enum kernels_isa)isa), type_name(type),
                                     (long long)n, got, want[c][r]);
                    }
                }
                if (k->gemm) {
                    // full tiles, edge tiles and a single column
                    const int shapes[][2] = {
                        {NR, NC}, {k->gemm_nr, k->gemm_nc}, {NR, 1}, {1, NC}, {5, 2}, {NR, 3}};
                    for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++) {
                        int nr = shapes[sh][0] < NR ? shapes[sh][0] : NR;
                        int nc = shapes[sh][1] < NC ? shapes[sh][1] : NC;
                        for (int i = 0; i < NC * NR; i++)
                            s[i] = NAN;
                        k->gemm(n, s, NR, w, wrow, xq, xrow, nr, nc);
                        for (int c = 0; c < NC; c++)
                            for (int r = 0; r < NR; r++) {
                                float got = s[c * NR + r];
                                if (r >= nr || c >= nc) {
                                    assert_true(isnan(got));  // untouched
                                    continue;
                                }
                                if (!(fabs(got - want[c][r]) <= scale[c][r]))
                                    fail_msg("%s %s n=%lld gemm %dx%d (%d,%d): %.9g scalar %.9g",
                                             kernels_isa_name((enum kernels_isa)isa),
                                             type_name(type), (long long)n, nr, nc, r, c, got,
                                             want[c][r]);
                            }
                    }
                }
                // kernels_matmul (tile or vec_dot, whichever it picks) for a few shapes
                const int mshapes[][2] = {{NR, NC}, {NR, 1}, {3, 2}};
                for (size_t sh = 0; sh < 3; sh++) {
                    for (int i = 0; i < NC * NR; i++)
                        s[i] = NAN;
                    kernels_matmul(k, n, s, NR, w, wrow, xq, xrow, mshapes[sh][0], mshapes[sh][1]);
                    for (int c = 0; c < NC; c++)
                        for (int r = 0; r < NR; r++) {
                            float got = s[c * NR + r];
                            if (r >= mshapes[sh][0] || c >= mshapes[sh][1])
                                assert_true(isnan(got));
                            else if (!(fabs(got - want[c][r]) <= scale[c][r]))
                                fail_msg("%s %s kernels_matmul (%d,%d): %.9g scalar %.9g",
                                         kernels_isa_name((enum kernels_isa)isa), type_name(type),
                                         r, c, got, want[c][r]);
                        }
                }
                checked++;
                free(w);
                free(xq);
                free(x);
                free(wf);
                free(xf);
            }
        }
    }
    printf("checked %d (isa, type, length) cases\n", checked);
}

// Interleaved Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, IQ4_NL, Q4_1, Q5_1, TQ2_0 and
// MXFP4 (kernels_interleave_x8 + gemm_x8) at every ISA against the scalar
// vec_dot on the original rows: the scalar twin (where the layout has one) bit for
// bit (same arithmetic in the same order), SIMD within the usual tolerance,
// every column count from 1 to 9, and nothing outside the requested rows
// written.
static void check_interleaved(uint32_t type, kernels_gemm_fn ref_x8, int *checked)
{
    const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
    assert_null(ref->gemm_x8);  // scalar code keeps weights as mapped
    // 4, 20, 2060: float rows that end inside a vector (the block types skip them)
    const int64_t lens[] = {4, 20, 32, 64, 96, 256, 2060, 4096, 16384 + 256};
    enum { NR = 40, NC = 9 };
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        if (kernels_row_size(type, n) == 0)
            continue;  // not whole blocks of this type
        const size_t wrow = kernels_row_size(type, n);
        const size_t xrow = kernels_row_size(ref->vec_dot_type, n);
        uint8_t *w = malloc(wrow * NR), *wx = malloc(wrow * NR), *xq = malloc(xrow * NC);
        float *x = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * sizeof(float)),
              *xf = malloc((size_t)n * sizeof(float));
        for (int r = 0; r < NR; r++) {
            void *wr = rnd_weights(type, n);
            memcpy(w + wrow * r, wr, wrow);
            free(wr);
        }
        for (int c = 0; c < NC; c++) {
            rnd_floats(x, n);
            ref->from_float(x, xq + xrow * c, n);
        }
        assert_true(kernels_interleave_x8(type, wx, w, NR, n));
        // every row comes back byte for byte (the embedding lookups of a
        // tied, interleaved output read rows this way)
        uint8_t *back = malloc(wrow);
        for (int r = 0; r < NR; r++) {
            assert_true(kernels_x8_row(type, wx + wrow * (size_t)(r & ~7), r & 7, n, back));
            assert_memory_equal(back, w + wrow * r, wrow);
        }
        free(back);
        float want[NC][NR], s[NC * NR];
        double scale[NC][NR];
        for (int c = 0; c < NC; c++) {
            deq_acts(ref->vec_dot_type, xq + xrow * c, xf, n);
            for (int r = 0; r < NR; r++) {
                deq_weights(type, w + wrow * r, wf, n);
                scale[c][r] = abs_dot(wf, xf, n) * 2e-5 + 1e-6;
                ref->vec_dot(n, &want[c][r], w + wrow * r, xq + xrow * c);
            }
        }
        // isa -1: the scalar reference of the layout
        for (int isa = -1; isa < KERNELS_ISA_COUNT_; isa++) {
            const struct kernels_type *k =
                isa < 0 ? NULL : kernels_get_isa(type, (enum kernels_isa)isa);
            kernels_gemm_fn gemm_x8 = isa < 0 ? ref_x8 : k ? k->gemm_x8 : NULL;
            if (!gemm_x8)
                continue;
            for (int nc = 1; nc <= NC; nc++) {
                // rows 8..39 (a group offset: one tile of 4 groups), then all 40 (and a group left)
                for (int part = 0; part < 2; part++) {
                    const int r0 = part == 0 ? 8 : 0, nr = NR - r0;
                    for (int i = 0; i < NC * NR; i++)
                        s[i] = NAN;
                    gemm_x8(n, s + r0, NR, wx + wrow * r0, wrow, xq, xrow, nr, nc);
                    for (int c = 0; c < NC; c++)
                        for (int r = 0; r < NR; r++) {
                            float got = s[c * NR + r];
                            if (c >= nc || r < r0 || r >= r0 + nr) {
                                assert_true(isnan(got));
                                continue;
                            }
                            bool ok =
                                isa < 0 ? got == want[c][r] : fabs(got - want[c][r]) <= scale[c][r];
                            if (!ok)
                                fail_msg("%s n=%lld x8 %dx%d (%d,%d): %.9g scalar %.9g",
                                         isa < 0 ? "reference"
                                                 : kernels_isa_name((enum kernels_isa)isa),
                                         (long long)n, nr, nc, r, c, got, want[c][r]);
                        }
                }
            }
            (*checked)++;
        }
        free(w);
        free(wx);
        free(xq);
        free(x);
        free(wf);
        free(xf);
    }
}

static void test_interleaved(void **state)
{
    (void)state;
    // Types without an interleaved layout, and row counts not a multiple of 8, are refused.
    uint8_t dummy[2 * 8 * 34] = {0};
    assert_false(kernels_interleave_x8(GGUF_TYPE_Q2_K, dummy, dummy + 8 * 34, 8, 32));
    assert_false(kernels_interleave_x8(GGUF_TYPE_Q4_0, dummy, dummy + 8 * 34, 7, 32));
    assert_false(kernels_interleave_x8(GGUF_TYPE_Q8_0, dummy, dummy + 8 * 34, 7, 32));
    assert_false(kernels_x8_row(GGUF_TYPE_Q2_K, dummy, 0, 32, dummy + 8 * 34));
    int checked = 0;
    check_interleaved(GGUF_TYPE_Q4_0, kernels_gemm_q4_0x8_ref, &checked);
    check_interleaved(GGUF_TYPE_Q8_0, kernels_gemm_q8_0x8_ref, &checked);
    check_interleaved(GGUF_TYPE_Q5_0, kernels_gemm_q5_0x8_ref, &checked);
    check_interleaved(GGUF_TYPE_Q4_K, kernels_gemm_q4_Kx8_ref, &checked);
    check_interleaved(GGUF_TYPE_Q6_K, kernels_gemm_q6_Kx8_ref, &checked);
    check_interleaved(GGUF_TYPE_IQ4_NL, NULL, &checked);  // SIMD only: no scalar twin
    check_interleaved(GGUF_TYPE_Q4_1, NULL, &checked);
    check_interleaved(GGUF_TYPE_Q5_1, NULL, &checked);
    check_interleaved(GGUF_TYPE_TQ2_0, NULL, &checked);
    check_interleaved(GGUF_TYPE_MXFP4, NULL, &checked);
    check_interleaved(GGUF_TYPE_F32, NULL, &checked);  // AVX-512 only
    check_interleaved(GGUF_TYPE_F16, NULL, &checked);
    check_interleaved(GGUF_TYPE_BF16, NULL, &checked);  // with AVX512_BF16
    printf("checked %d (type, isa, length) interleaved cases\n", checked);
}

// The test-local reference dequantizers against ggml's reference output
// (fixtures/quant: 8 blocks per type with random bits and finite scales),
// then every ISA's vec_dot on those real blocks against the float reference.
static void test_fixture_vectors(void **state)
{
    (void)state;
    static const uint32_t qtypes[] = {
        GGUF_TYPE_Q4_0, GGUF_TYPE_Q4_1, GGUF_TYPE_Q5_0, GGUF_TYPE_Q5_1, GGUF_TYPE_Q8_0,
        GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K, GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K};
    int found = 0;
    for (size_t t = 0; t < sizeof(qtypes) / sizeof(qtypes[0]); t++) {
        const uint32_t type = qtypes[t];
        char rel[64], path[1024], path2[1024];
        snprintf(rel, sizeof(rel), "quant/%s.blocks", type_name(type));
        const char *pb = test_shared_fixture(path, sizeof(path), rel);
        if (!pb) {
            test_fixture(path, sizeof(path), rel);
            pb = path;
        }
        snprintf(path2, sizeof(path2), "%.*s.f32", (int)(strlen(pb) - strlen(".blocks")), pb);
        size_t nb_bytes = 0, nf_bytes = 0;
        uint8_t *blocks = test_read_file(pb, &nb_bytes);
        float *want = test_read_file(path2, &nf_bytes);
        if (!blocks || !want) {
            free(blocks);
            free(want);
            continue;
        }
        found++;
        const int64_t n = (int64_t)(nf_bytes / sizeof(float));
        assert_int_equal(kernels_row_size(type, n), nb_bytes);
        float *got = malloc((size_t)n * sizeof(float));
        deq_weights(type, blocks, got, n);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                fail_msg("%s element %lld: %.9g, ggml %.9g", type_name(type), (long long)i, got[i],
                         want[i]);
        // vec_dot of the fixture blocks against random activations
        const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
        float *x = malloc((size_t)n * sizeof(float)), *xf = malloc((size_t)n * sizeof(float));
        void *xq = malloc(kernels_row_size(ref->vec_dot_type, n));
        rnd_floats(x, n);
        ref->from_float(x, xq, n);
        deq_acts(ref->vec_dot_type, xq, xf, n);
        double exact = 0.0;
        for (int64_t i = 0; i < n; i++)
            exact += (double)want[i] * (double)xf[i];
        double tol_rel = (type == GGUF_TYPE_Q4_1 || type == GGUF_TYPE_Q5_1) ? 2e-3 : 2e-5;
        double tol = tol_rel * abs_dot(want, xf, n) + 1e-6;
        for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
            const struct kernels_type *k = kernels_get_isa(type, (enum kernels_isa)isa);
            if (!k)
                continue;
            float s;
            k->vec_dot(n, &s, blocks, xq);
            if (fabs(s - exact) > tol)
                fail_msg("%s %s fixture vec_dot %.9g reference %.9g",
                         kernels_isa_name((enum kernels_isa)isa), type_name(type), s, exact);
        }
        free(x);
        free(xf);
        free(xq);
        free(got);
        free(blocks);
        free(want);
    }
    if (!found)
        skip();
}

// ---------------------------------------------------------------------------
// The i-quant, ternary and MXFP4 weights (quant traits' dequantizers are the
// float reference; they are checked bit-exact against ggml in test_quant).

static const uint32_t iq_types[] = {
    GGUF_TYPE_IQ2_XXS, GGUF_TYPE_IQ2_XS, GGUF_TYPE_IQ2_S, GGUF_TYPE_IQ3_XXS,
    GGUF_TYPE_IQ3_S,   GGUF_TYPE_IQ1_S,  GGUF_TYPE_IQ1_M, GGUF_TYPE_IQ4_NL,
    GGUF_TYPE_IQ4_XS,  GGUF_TYPE_TQ1_0,  GGUF_TYPE_TQ2_0, GGUF_TYPE_MXFP4,
};
#define N_IQ_TYPES (sizeof(iq_types) / sizeof(iq_types[0]))

// Random blocks of an i-quant type: random bytes with a sane scale.
static void *rnd_iq_weights(uint32_t type, int64_t n)
{
    const struct quant_traits *tr = quant_traits_get(type);
    size_t size = quant_row_size(type, n);
    assert_true(size > 0);
    uint8_t *p = malloc(size);
    assert_non_null(p);
    for (size_t i = 0; i < size; i++)
        p[i] = (uint8_t)rnd_u32();
    for (size_t b = 0; b < size / tr->type_size; b++) {
        uint8_t *blk = p + b * tr->type_size;
        if (type == GGUF_TYPE_MXFP4) {
            blk[0] = (uint8_t)(118 + rnd_u32() % 12);
        } else if (type == GGUF_TYPE_IQ1_M) {
            // the f16 scale is the top nibble of each of the 4 scale words
            uint16_t h = quant_f32_to_f16(rnd_f(-0.1f, 0.1f));
            for (int k = 0; k < 4; k++)
                blk[48 + 2 * k + 1] =
                    (uint8_t)((blk[48 + 2 * k + 1] & 0x0F) | (((h >> (4 * k)) & 15) << 4));
        } else {
            size_t od = type == GGUF_TYPE_TQ1_0 ? 52 : type == GGUF_TYPE_TQ2_0 ? 64 : 0;
            put_f16(blk + od, rnd_f(-0.1f, 0.1f));
        }
    }
    return p;
}

// Dot of dequantized weights with dequantized activations, in double, and
// the sum of absolute products (for the tolerance).
static double iq_exact(uint32_t type, const void *w, uint32_t vdt, const void *xq, int64_t n,
                       double *abs_sum)
{
    float *wf = malloc((size_t)n * sizeof(float)), *xf = malloc((size_t)n * sizeof(float));
    quant_traits_get(type)->to_float(w, wf, n);
    deq_acts(vdt, xq, xf, n);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)wf[i] * (double)xf[i];
    *abs_sum = abs_dot(wf, xf, n);
    free(wf);
    free(xf);
    return s;
}

static void test_iq_types(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t t = 0; t < N_IQ_TYPES; t++) {
        const uint32_t type = iq_types[t];
        const char *tn = quant_traits_get(type)->name;
        const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
        assert_non_null(ref);
        assert_non_null(kernels_get(type));
        const int64_t lens[] = {256, 512, 2048};
        for (size_t li = 0; li < 3; li++) {
            const int64_t n = lens[li];
            enum { NR = 5, NC = 19 };  // more columns than one gemm pass
            const size_t wrow = quant_row_size(type, n);
            const size_t xrow = kernels_row_size(ref->vec_dot_type, n);
            uint8_t *w = malloc(wrow * NR), *xq = malloc(xrow * NC);
            float *x = malloc((size_t)n * sizeof(float));
            for (int r = 0; r < NR; r++) {
                void *wr = rnd_iq_weights(type, n);
                memcpy(w + wrow * r, wr, wrow);
                free(wr);
            }
            for (int c = 0; c < NC; c++) {
                rnd_floats(x, n);
                ref->from_float(x, xq + xrow * c, n);
            }
            static float want[NC][NR], s[NC * NR];
            static double tol[NC][NR];
            for (int c = 0; c < NC; c++)
                for (int r = 0; r < NR; r++) {
                    double abs_sum;
                    double exact =
                        iq_exact(type, w + wrow * r, ref->vec_dot_type, xq + xrow * c, n, &abs_sum);
                    tol[c][r] = 2e-5 * abs_sum + 1e-6;
                    ref->vec_dot(n, &want[c][r], w + wrow * r, xq + xrow * c);
                    if (!(fabs(want[c][r] - exact) <= tol[c][r]))
                        fail_msg("%s n=%lld: scalar dot %.9g, dequantized %.9g", tn, (long long)n,
                                 want[c][r], exact);
                }
            for (int isa = 1; isa < KERNELS_ISA_COUNT_; isa++) {
                const struct kernels_type *k = kernels_get_isa(type, (enum kernels_isa)isa);
                if (!k)
                    continue;
                const char *in = kernels_isa_name((enum kernels_isa)isa);
                assert_int_equal(k->vec_dot_type, ref->vec_dot_type);
                for (int c = 0; c < NC; c++)
                    for (int r = 0; r < NR; r++) {
                        float got;
                        k->vec_dot(n, &got, w + wrow * r, xq + xrow * c);
                        if (!(fabs(got - want[c][r]) <= tol[c][r]))
                            fail_msg("%s %s n=%lld: vec_dot %.9g scalar %.9g", in, tn, (long long)n,
                                     got, want[c][r]);
                    }
                const int shapes[][2] = {{NR, NC}, {NR, 2}, {1, NC}, {3, 16}, {2, 17}};
                for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++) {
                    int nr = shapes[sh][0], nc = shapes[sh][1];
                    for (int i = 0; i < NC * NR; i++)
                        s[i] = NAN;
                    kernels_matmul(k, n, s, NR, w, wrow, xq, xrow, nr, nc);
                    for (int c = 0; c < NC; c++)
                        for (int r = 0; r < NR; r++) {
                            float got = s[c * NR + r];
                            if (r >= nr || c >= nc)
                                assert_true(isnan(got));
                            else if (!(fabs(got - want[c][r]) <= tol[c][r]))
                                fail_msg("%s %s n=%lld matmul %dx%d (%d,%d): %.9g scalar %.9g", in,
                                         tn, (long long)n, nr, nc, r, c, got, want[c][r]);
                        }
                }
                checked++;
            }
            free(w);
            free(xq);
            free(x);
        }
    }
    printf("checked %d (isa, i-quant type, length) cases\n", checked);
}

// One panel product (kernels.h) of nr x nc at length n: the rows decoded
// panel by panel, the activations through panel_from_float, against the
// scalar vec_dot on the vec_dot_type's blocks (want, tol: [c][r], NR rows).
enum { PNR = 37, PNC = 19 };  // two whole panels and a part; two tiles and a part
static void check_panel(const struct kernels_type *k, uint32_t type, const char *in, int64_t n,
                        const uint8_t *w, size_t wrow, const float *x, int nr, int nc,
                        float want[PNC][PNR], double tol[PNC][PNR])
{
    const char *tn = quant_traits_get(type)->name;
    const size_t pb = kernels_panel_bytes(type, n), arow = kernels_panel_act_bytes(type, n);
    assert_true(pb > 0 && arow > 0);
    uint8_t *panel = aligned_alloc(64, (pb + 63) / 64 * 64), *xa = malloc(arow * PNC);
    for (int c = 0; c < nc; c++)
        k->panel_from_float(x + (size_t)c * n, xa + arow * c, n);
    static float s[PNC * PNR];
    for (int i = 0; i < PNC * PNR; i++)
        s[i] = NAN;
    for (int r0 = 0; r0 < nr; r0 += KERNELS_PANEL_ROWS) {
        int rn = nr - r0 < KERNELS_PANEL_ROWS ? nr - r0 : KERNELS_PANEL_ROWS;
        memset(panel, 0x5A, pb);  // the decoder writes every byte
        k->panel_decode(n, panel, w + wrow * (size_t)r0, wrow, rn);
        k->panel_gemm(n, s + r0, PNR, panel, xa, arow, rn, nc);
    }
    for (int c = 0; c < PNC; c++)
        for (int r = 0; r < PNR; r++) {
            float got = s[c * PNR + r];
            if (r >= nr || c >= nc)
                assert_true(isnan(got));
            else if (!(fabs(got - want[c][r]) <= tol[c][r]))
                fail_msg("%s %s n=%lld panel %dx%d (%d,%d): %.9g scalar %.9g", in, tn, (long long)n,
                         nr, nc, r, c, got, want[c][r]);
        }
    free(panel);
    free(xa);
}

// The panel products of every i-quant type at every ISA that has them:
// rows and columns not a multiple of the panel or the tile, lengths of one
// and three blocks of 256 (IQ4_NL, MXFP4: also 96, not a multiple of 256).
static void test_panels(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t t = 0; t < N_IQ_TYPES; t++) {
        const uint32_t type = iq_types[t];
        const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
        assert_null(ref->panel_gemm);  // the scalar table has none
        const int64_t lens[] = {256, 768, 2048, 96};
        for (size_t li = 0; li < 4; li++) {
            const int64_t n = lens[li];
            if (n % quant_traits_get(type)->block_size)
                continue;
            const size_t wrow = quant_row_size(type, n);
            const size_t xrow = kernels_row_size(ref->vec_dot_type, n);
            uint8_t *w = malloc(wrow * PNR), *xq = malloc(xrow * PNC);
            float *x = malloc((size_t)n * PNC * sizeof(float));
            for (int r = 0; r < PNR; r++) {
                void *wr = rnd_iq_weights(type, n);
                memcpy(w + wrow * r, wr, wrow);
                free(wr);
            }
            rnd_floats(x, n * PNC);
            for (int c = 0; c < PNC; c++)
                ref->from_float(x + (size_t)c * n, xq + xrow * c, n);
            static float want[PNC][PNR];
            static double tol[PNC][PNR];
            for (int c = 0; c < PNC; c++)
                for (int r = 0; r < PNR; r++) {
                    double abs_sum;
                    iq_exact(type, w + wrow * r, ref->vec_dot_type, xq + xrow * c, n, &abs_sum);
                    tol[c][r] = 2e-5 * abs_sum + 1e-6;
                    ref->vec_dot(n, &want[c][r], w + wrow * r, xq + xrow * c);
                }
            for (int isa = 1; isa < KERNELS_ISA_COUNT_; isa++) {
                const struct kernels_type *k = kernels_get_isa(type, (enum kernels_isa)isa);
                if (!k || !k->panel_gemm)
                    continue;
                const char *in = kernels_isa_name((enum kernels_isa)isa);
                const int shapes[][2] = {{PNR, PNC}, {16, 8}, {5, 1}, {PNR, 3}, {32, 17}};
                for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++)
                    check_panel(k, type, in, n, w, wrow, x, shapes[sh][0], shapes[sh][1], want,
                                tol);
                checked++;
            }
            free(w);
            free(xq);
            free(x);
        }
    }
    printf("checked %d (isa, panel type, length) cases\n", checked);
}

// The ggml test vectors of ../shared as weights: every ISA's vec_dot against
// the exact dot of the expected values (fails when shared is present and a
// file is missing).
static void test_iq_fixture_vectors(void **state)
{
    (void)state;
    char readme[1024];
    if (!test_shared_fixture(readme, sizeof(readme), "quant/README.md")) {
        printf("skip: shared fixtures absent (quant/README.md)\n");
        return;
    }
    for (size_t t = 0; t < N_IQ_TYPES; t++) {
        const uint32_t type = iq_types[t];
        const char *tn = quant_traits_get(type)->name;
        char rel[64], pb[1024], pf[1024];
        snprintf(rel, sizeof(rel), "quant/%s.blocks", tn);
        if (!test_shared_fixture(pb, sizeof(pb), rel))
            fail_msg("missing shared fixture %s", rel);
        snprintf(rel, sizeof(rel), "quant/%s.f32", tn);
        if (!test_shared_fixture(pf, sizeof(pf), rel))
            fail_msg("missing shared fixture %s", rel);
        size_t nb = 0, nf = 0;
        uint8_t *blocks = test_read_file(pb, &nb);
        float *want = test_read_file(pf, &nf);
        assert_non_null(blocks);
        assert_non_null(want);
        const int64_t n = (int64_t)(nf / sizeof(float));
        assert_int_equal(quant_row_size(type, n), nb);
        const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
        float *x = malloc((size_t)n * sizeof(float)), *xf = malloc((size_t)n * sizeof(float));
        void *xq = malloc(kernels_row_size(ref->vec_dot_type, n));
        rnd_floats(x, n);
        ref->from_float(x, xq, n);
        deq_acts(ref->vec_dot_type, xq, xf, n);
        double exact = 0.0;
        for (int64_t i = 0; i < n; i++)
            exact += (double)want[i] * (double)xf[i];
        double tol = 2e-5 * abs_dot(want, xf, n) + 1e-6;
        for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
            const struct kernels_type *k = kernels_get_isa(type, (enum kernels_isa)isa);
            if (!k)
                continue;
            float s;
            k->vec_dot(n, &s, blocks, xq);
            if (!(fabs(s - exact) <= tol))
                fail_msg("%s %s fixture vec_dot %.9g reference %.9g",
                         kernels_isa_name((enum kernels_isa)isa), tn, s, exact);
        }
        free(x);
        free(xf);
        free(xq);
        free(blocks);
        free(want);
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    const struct kernels_ops *ref = kernels_ops_isa(KERNELS_ISA_SCALAR);
    assert_non_null(ref);
    static const int64_t lens[] = {1, 5, 8, 15, 16, 17, 64, 100, 1000};
    for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
        const struct kernels_ops *o = kernels_ops_isa((enum kernels_isa)isa);
        if (!o)
            continue;
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            const int64_t n = lens[li];
            float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
            float *y0 = malloc((size_t)n * 4), *y1 = malloc((size_t)n * 4);
            uint16_t *h = malloc((size_t)n * 2), *h2 = malloc((size_t)n * 2);
            rnd_floats(a, n);
            rnd_floats(b, n);
            if (n > 10) {  // f16 edge cases: subnormals, overflow, halfway points
                a[0] = 1e-6f;
                a[1] = -3e-7f;
                a[2] = 70000.0f;
                a[3] = 1.0f + 1.0f / 2048.0f;
                a[4] = 65519.0f;
            }
            ref->f32_to_f16_row(a, h, n);
            o->f32_to_f16_row(a, h2, n);
            assert_memory_equal(h, h2, (size_t)n * 2);
            ref->f16_to_f32_row(h, y0, n);
            o->f16_to_f32_row(h, y1, n);
            assert_memory_equal(y0, y1, (size_t)n * 4);
            rnd_floats(a, n);
            ref->f32_to_f16_row(a, h, n);
            double sc = abs_dot(a, b, n);
            float d0 = ref->dot_f32(a, b, n), d1 = o->dot_f32(a, b, n);
            assert_true(fabs(d0 - d1) <= 2e-6 * sc + 1e-7);
            ref->f16_to_f32_row(h, y0, n);
            sc = abs_dot(y0, b, n);
            d0 = ref->dot_f16_f32(h, b, n);
            d1 = o->dot_f16_f32(h, b, n);
            assert_true(fabs(d0 - d1) <= 2e-6 * sc + 1e-7);
            memcpy(y0, b, (size_t)n * 4);
            memcpy(y1, b, (size_t)n * 4);
            ref->axpy_f32(y0, 0.37f, a, n);
            o->axpy_f32(y1, 0.37f, a, n);
            for (int64_t i = 0; i < n; i++)
                assert_true(fabsf(y0[i] - y1[i]) <= 1e-6f * (fabsf(b[i]) + fabsf(a[i])));
            memcpy(y0, b, (size_t)n * 4);
            memcpy(y1, b, (size_t)n * 4);
            ref->axpy_f16(y0, -1.5f, h, n);
            o->axpy_f16(y1, -1.5f, h, n);
            for (int64_t i = 0; i < n; i++)
                assert_true(fabsf(y0[i] - y1[i]) <= 1e-6f * (fabsf(b[i]) + 2.0f * fabsf(a[i])));
            // Mamba-2 scan step: state y = y·0.8 + 0.3·a, returns Σ y·b.
            rnd_floats(y0, n);
            memcpy(y1, y0, (size_t)n * 4);
            d0 = ref->ssm_step(y0, a, b, 0.8f, 0.3f, n);
            d1 = o->ssm_step(y1, a, b, 0.8f, 0.3f, n);
            for (int64_t i = 0; i < n; i++)
                assert_true(fabsf(y0[i] - y1[i]) <= 1e-6f * (fabsf(y0[i]) + fabsf(a[i])));
            assert_true(fabs(d0 - d1) <= 2e-6 * abs_dot(y0, b, n) + 1e-6);
            free(a);
            free(b);
            free(y0);
            free(y1);
            free(h);
            free(h2);
        }
    }
    // the public entry points use the best ISA and agree with the scalar twins
    float a[3] = {1.0f, 2.0f, 3.0f}, b[3] = {4.0f, 5.0f, 6.0f};
    assert_true(kernels_dot_f32(a, b, 3) == 32.0f);
    uint16_t h[3];
    kernels_f32_to_f16_row(a, h, 3);
    assert_int_equal(h[1], 0x4000);
    assert_true(kernels_dot_f16_f32(h, b, 3) == 32.0f);
    float y[3];
    kernels_f16_to_f32_row(h, y, 3);
    assert_true(y[2] == 3.0f);
    kernels_axpy_f32(y, 2.0f, b, 3);
    assert_true(y[0] == 9.0f);
    kernels_axpy_f16(y, 1.0f, h, 3);
    assert_true(y[0] == 10.0f);
}

// The gated activations: GELU is ggml's f16 table at every ISA (bit-exact),
// SiLU's polynomial e^x stays within a few ulp of expf; the far ends (no
// overflow, exact limits) and the table's direct formula are checked too.
static void test_glu(void **state)
{
    (void)state;
    enum { N = 4099 };
    float *g = malloc(N * 4), *u = malloc(N * 4), *y0 = malloc(N * 4), *y1 = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        g[i] = -24.0f + 48.0f * (float)i / (float)(N - 1);  // past both GELU cut-offs
        u[i] = 0.5f + (float)(i % 7);
    }
    g[0] = -200.0f;
    g[1] = 200.0f;
    g[2] = 0.0f;
    g[3] = -0.0f;
    const float c = 0.79788456080286535587989211986876f;
    for (int i = 0; i < N; i++) {
        float x = g[i], want;
        if (x <= -10.0f) {
            want = 0.0f;
        } else if (x >= 10.0f) {
            want = x;
        } else {
            float h = quant_f16_to_f32(quant_f32_to_f16(x));
            float t = 0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h)));
            want = quant_f16_to_f32(quant_f32_to_f16(t));
        }
        assert_true(kernels_gelu(x) == want);
    }
    const struct kernels_ops *ref = kernels_ops_isa(KERNELS_ISA_SCALAR);
    for (int isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
        const struct kernels_ops *o = kernels_ops_isa((enum kernels_isa)isa);
        if (!o)
            continue;
        for (int64_t n = 1; n <= N; n += n < 40 ? 1 : 1013) {
            ref->gelu_glu(y0, g, u, n);
            o->gelu_glu(y1, g, u, n);
            assert_memory_equal(y0, y1, (size_t)n * 4);
            ref->silu_glu(y0, g, u, n);
            o->silu_glu(y1, g, u, n);
            for (int64_t i = 0; i < n; i++) {
                assert_true(isfinite(y1[i]));
                assert_true(fabsf(y0[i] - y1[i]) <= 4e-7f * fabsf(y0[i]) + 1e-30f);
            }
        }
        o->silu_glu(y1, g, u, 8);  // one full vector: the SIMD path
        assert_true(fabsf(y1[0]) < 1e-30f && y1[1] == 200.0f * u[1] && y1[2] == 0.0f);
    }
    free(g);
    free(u);
    free(y0);
    free(y1);
}

#if defined(__x86_64__)
// The F32 / F16 / BF16 tiles, each variant directly (the resolved tables
// show only the best one: on a CPU with AVX-512 the AVX2 tiles of
// x86_gemm.inc, and with AVX512_BF16 the split-pair BF16 tile, would go
// untested) against the scalar vec_dot, at row lengths off every step (8,
// 16, 32) and row / column counts off the tile and the engine's column
// block (16).
static void check_half_table(const char *name, const struct kernels_type *tab, int *checked)
{
    static const uint32_t half_types[] = {GGUF_TYPE_F16, GGUF_TYPE_BF16, GGUF_TYPE_F32};
    static const int64_t lens[] = {1, 7, 15, 16, 17, 31, 33, 100, 257, 512, 1000, 1031, 2051};
    enum { NR = 11, NC = 19 };
    for (size_t t = 0; t < sizeof half_types / sizeof half_types[0]; t++) {
        const uint32_t type = half_types[t];
        const struct kernels_type *ref = kernels_get_isa(type, KERNELS_ISA_SCALAR);
        if (!tab[type].gemm)
            continue;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = lens[li];
            const size_t wrow = kernels_row_size(type, n);
            const size_t xrow = kernels_row_size(ref->vec_dot_type, n);
            uint8_t *w = malloc(wrow * NR), *xq = malloc(xrow * NC);
            float *x = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * sizeof(float));
            float *xf = malloc((size_t)n * sizeof(float));
            for (int r = 0; r < NR; r++) {
                void *wr = rnd_weights(type, n);
                memcpy(w + wrow * r, wr, wrow);
                free(wr);
            }
            for (int c = 0; c < NC; c++) {
                rnd_floats(x, n);
                ref->from_float(x, xq + xrow * c, n);
            }
            float want[NC][NR], s[NC * NR];
            double scale[NC][NR];
            for (int c = 0; c < NC; c++) {
                deq_acts(ref->vec_dot_type, xq + xrow * c, xf, n);
                for (int r = 0; r < NR; r++) {
                    deq_weights(type, w + wrow * r, wf, n);
                    scale[c][r] = abs_dot(wf, xf, n) * 2e-5 + 1e-6;
                    ref->vec_dot(n, &want[c][r], w + wrow * r, xq + xrow * c);
                }
            }
            const int shapes[][2] = {{NR, NC}, {tab[type].gemm_nr, tab[type].gemm_nc},
                                     {NR, 1},  {1, NC},
                                     {3, 2},   {8, 5},
                                     {5, 16},  {4, 17}};
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                const int nr = shapes[sh][0], nc = shapes[sh][1];
                for (int i = 0; i < NC * NR; i++)
                    s[i] = NAN;
                tab[type].gemm(n, s, NR, w, wrow, xq, xrow, nr, nc);
                for (int c = 0; c < NC; c++)
                    for (int r = 0; r < NR; r++) {
                        const float got = s[c * NR + r];
                        if (r >= nr || c >= nc)
                            assert_true(isnan(got));  // untouched
                        else if (!(fabs(got - want[c][r]) <= scale[c][r]))
                            fail_msg("%s %s n=%lld gemm %dx%d (%d,%d): %.9g scalar %.9g", name,
                                     type_name(type), (long long)n, nr, nc, r, c, got, want[c][r]);
                    }
            }
            (*checked)++;
            free(w);
            free(xq);
            free(x);
            free(wf);
            free(xf);
        }
    }
}

static void test_half_tiles(void **state)
{
    (void)state;
    int checked = 0;
    if (kernels_isa_supported(KERNELS_ISA_AVX2))
        check_half_table("avx2", kernels_avx2_table, &checked);
    if (kernels_isa_supported(KERNELS_ISA_AVX512)) {
        check_half_table("avx512 (x86_gemm.inc)", kernels_avx512_table, &checked);
        check_half_table("avx512", kernels_avx512_half_table, &checked);
    }
    if (kernels_isa_supported(KERNELS_ISA_AVX512) && __builtin_cpu_supports("avx512bf16")) {
        check_half_table("avx512bf16", kernels_avx512bf16_table, &checked);
        // and the dispatcher picks it
        assert_ptr_equal(kernels_get_isa(GGUF_TYPE_BF16, KERNELS_ISA_AVX512)->gemm,
                         kernels_avx512bf16_table[GGUF_TYPE_BF16].gemm);
    }
    printf("checked %d (variant, type, length) cases\n", checked);
}
#else
static void test_half_tiles(void **state)
{
    (void)state;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_from_float),
        cmocka_unit_test(test_scalar_vs_reference),
        cmocka_unit_test(test_isa_vs_scalar),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_fixture_vectors),
        cmocka_unit_test(test_iq_types),
        cmocka_unit_test(test_iq_fixture_vectors),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_half_tiles),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_panels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

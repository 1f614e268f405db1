// engine attention: the flash-style kernel (engine/attention.c) against the
// plain double-precision reference engine_attention_ref and against the
// engine's previous algorithm (whole score row, softmax, weighted V sum),
// over every KV type, GQA ratios, head dims 8..256, each contract field
// (softcap, window, kv_ring, sinks), odd key counts, several slots in one
// ubatch, and 1, 2 and 3 threads; and the tile kernels of every ISA the CPU
// has against the generic build.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "engine/kernels/attn.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float frand(void)  // uniform in [-1, 1)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void fill_rand(float *v, int64_t n, float amp)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = amp * frand();
}

static void assert_close(const float *got, const float *want, int64_t n, double tol,
                         const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
            fail_msg("%s: element %lld: %.7f vs %.7f (tol %g)", what, (long long)i, (double)got[i],
                     (double)want[i], tol);
}

// The engine's attention before the flash-style kernel: every score of a
// (row, head) pair, softmax, then the weighted sum of V; with an F16 cache
// the normalized probabilities are rounded to f16 (llama.cpp's non-flash
// path). Linear cache, no optional fields.
static void old_attention(float *out, const float *q, int n_rows, const struct engine_kv_layer *kv,
                          const int32_t *cell0, const int32_t *nvis, const struct engine_attn *a)
{
    int hd = a->head_dim, G = a->n_head / a->n_head_kv;
    float *qr = xmalloc((size_t)hd * sizeof(float)), *row = xmalloc((size_t)hd * sizeof(float));
    void *q8 = xmalloc((size_t)hd * 2 + 64);
    const struct quant_traits *qt = quant_traits_get(a->kv_type);
    for (int r = 0; r < n_rows; r++)
        for (int h = 0; h < a->n_head; h++) {
            int g = h / G;
            size_t hoff = g == 0 ? 0 : quant_row_size(a->kv_type, (int64_t)g * hd);
            const float *qh = q + ((size_t)r * a->n_head + h) * hd;
            if (a->kv_type == GGUF_TYPE_F16)
                for (int i = 0; i < hd; i++)
                    qr[i] = quant_f16_to_f32(quant_f32_to_f16(qh[i]));
            else if (a->kv_type == GGUF_TYPE_Q8_0 || a->kv_type == GGUF_TYPE_Q4_0) {
                kernels_get(GGUF_TYPE_Q8_0)->from_float(qh, q8, hd);
                quant_traits_get(GGUF_TYPE_Q8_0)->to_float(q8, qr, hd);
            } else
                memcpy(qr, qh, (size_t)hd * sizeof(float));
            float *s = xmalloc((size_t)nvis[r] * sizeof(float)), mx = -INFINITY;
            for (int j = 0; j < nvis[r]; j++) {
                qt->to_float((const uint8_t *)kv->k + (size_t)(cell0[r] + j) * kv->row_bytes + hoff,
                             row, hd);
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += (double)qr[i] * row[i];
                s[j] = (float)d * a->scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            double sum = 0;
            for (int j = 0; j < nvis[r]; j++)
                sum += (s[j] = expf(s[j] - mx));
            float *o = out + ((size_t)r * a->n_head + h) * hd;
            memset(o, 0, (size_t)hd * sizeof(float));
            for (int j = 0; j < nvis[r]; j++) {
                float p = (float)(s[j] / sum);
                if (a->kv_type == GGUF_TYPE_F16)
                    p = quant_f16_to_f32(quant_f32_to_f16(p));
                qt->to_float((const uint8_t *)kv->v + (size_t)(cell0[r] + j) * kv->row_bytes + hoff,
                             row, hd);
                for (int i = 0; i < hd; i++)
                    o[i] += p * row[i];
            }
            free(s);
        }
    free(qr), free(row), free(q8);
}

struct attn_case {
    uint32_t type;
    int n_head, n_head_kv, head_dim;
    float softcap;
    int window, kv_ring;
    bool sinks;
};

// A ubatch of rows from two slots: a prefill run of slot 0 (positions
// p0 .. p0 + n_pre - 1), then one decode row of slot 1 at position dec_pos,
// then one more decode row of slot 0. Cells per slot: the ring size, or
// n_ctx.
static void run_case(const struct attn_case *tc, int n_threads, int n_pre, int p0, int dec_pos)
{
    const int n_ctx = 1100, n_slots = 2;
    const int hd = tc->head_dim, kv_dim = tc->n_head_kv * hd, q_dim = tc->n_head * hd;
    const int cells_per_slot = tc->kv_ring > 0 ? tc->kv_ring : n_ctx;
    const int n_cells = cells_per_slot * n_slots;

    struct engine_backend *be;
    struct err e = {0};
    assert_int_equal(engine_cpu_new(&be, n_threads, &e), 0);
    assert_int_equal(engine_reserve(be, 64, q_dim > 1024 ? q_dim : 1024, n_ctx, &e), 0);
    struct engine_kv_layer kv = {NULL, NULL, engine_kv_row_bytes(tc->type, kv_dim)};
    assert_true(kv.row_bytes > 0);
    kv.k = engine_buf_alloc(be, kv.row_bytes * (size_t)n_cells);
    kv.v = engine_buf_alloc(be, kv.row_bytes * (size_t)n_cells);
    float *k = xmalloc((size_t)n_cells * kv_dim * sizeof(float));
    float *v = xmalloc((size_t)n_cells * kv_dim * sizeof(float));
    fill_rand(k, (int64_t)n_cells * kv_dim, 1.5f);
    fill_rand(v, (int64_t)n_cells * kv_dim, 1.0f);
    int32_t *cells = xmalloc((size_t)n_cells * sizeof(int32_t));
    for (int i = 0; i < n_cells; i++)
        cells[i] = i;
    engine_kv_store(be, &kv, tc->type, cells, k, v, n_cells, kv_dim);

    int n_rows = n_pre + 2;
    int32_t *cell0 = xmalloc((size_t)n_rows * sizeof(int32_t)),
            *nvis = xmalloc((size_t)n_rows * sizeof(int32_t));
    for (int r = 0; r < n_pre; r++)
        cell0[r] = 0, nvis[r] = p0 + r + 1;
    cell0[n_pre] = cells_per_slot, nvis[n_pre] = dec_pos + 1;
    cell0[n_pre + 1] = 0, nvis[n_pre + 1] = p0 + n_pre + 1;

    float *q = xmalloc((size_t)n_rows * q_dim * sizeof(float));
    fill_rand(q, (int64_t)n_rows * q_dim, 2.0f);
    float *sinks = xmalloc((size_t)tc->n_head * sizeof(float));
    fill_rand(sinks, tc->n_head, 3.0f);
    struct engine_attn a = {
        .n_head = tc->n_head,
        .n_head_kv = tc->n_head_kv,
        .head_dim = hd,
        .scale = 1.0f / sqrtf((float)hd),
        .kv_type = tc->type,
        .softcap = tc->softcap,
        .window = tc->window,
        .kv_ring = tc->kv_ring,
        .sinks = tc->sinks ? sinks : NULL,
    };
    float *out = engine_buf_alloc(be, (size_t)n_rows * q_dim * sizeof(float));
    float *ref = xmalloc((size_t)n_rows * q_dim * sizeof(float));
    // Twice: the second call reuses the grown scratch.
    for (int rep = 0; rep < 2; rep++)
        engine_attention(be, out, q, n_rows, &kv, cell0, nvis, &a);
    engine_attention_ref(ref, q, n_rows, &kv, cell0, nvis, &a);
    char what[160];
    snprintf(what, sizeof what,
             "type %u heads %d/%d hd %d softcap %g window %d ring %d sinks %d threads %d rows %d",
             tc->type, tc->n_head, tc->n_head_kv, hd, (double)tc->softcap, tc->window, tc->kv_ring,
             tc->sinks, n_threads, n_rows);
    // F16: a probability within float noise of an f16 rounding boundary
    // may round the other way (one f16 ulp, 2^-11 of it).
    double tol = tc->type == GGUF_TYPE_F16 ? 5e-4 : 2e-5;
    assert_close(out, ref, (int64_t)n_rows * q_dim, tol, what);
    if (tc->softcap == 0 && tc->window == 0 && tc->kv_ring == 0 && !tc->sinks) {
        old_attention(ref, q, n_rows, &kv, cell0, nvis, &a);
        assert_close(out, ref, (int64_t)n_rows * q_dim, tol, what);
    }
    engine_buf_free(be, out), engine_buf_free(be, kv.k), engine_buf_free(be, kv.v);
    engine_backend_free(be);
    free(k), free(v), free(cells), free(cell0), free(nvis), free(q), free(sinks), free(ref);
}

static const uint32_t kv_types[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_Q8_0, GGUF_TYPE_Q4_0};
#define N_KV_TYPES (sizeof kv_types / sizeof kv_types[0])

static bool kv_blocks(uint32_t type)
{
    return type == GGUF_TYPE_Q8_0 || type == GGUF_TYPE_Q4_0;
}

static void test_types_heads_dims(void **state)
{
    (void)state;
    // {n_head, n_head_kv, head_dim}: MHA, GQA 2, 4 (Llama 3.2 1B), 7
    // (Qwen2.5 0.5B), 8; head dims 64, 80 (phi), 128, 256 (gemma) and, for
    // F32/F16 only (Q8_0 and Q4_0 need multiples of 32), 8 and 20.
    const int shapes[][3] = {{4, 4, 64},  {4, 2, 80},  {8, 2, 128}, {14, 2, 64},
                             {8, 1, 256}, {16, 2, 32}, {4, 2, 8},   {6, 3, 20}};
    for (size_t t = 0; t < N_KV_TYPES; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (kv_blocks(kv_types[t]) && shapes[s][2] % 32 != 0)
                continue;
            struct attn_case tc = {kv_types[t], shapes[s][0], shapes[s][1], shapes[s][2], 0, 0,
                                   0,           false};
            for (int nth = 1; nth <= 2; nth++)
                run_case(&tc, nth, 37, 250, 122);  // odd key counts everywhere
        }
}

static void test_split_keys(void **state)
{
    (void)state;
    // A single decode row deep in the cache, few KV heads: the key range is
    // split into chunks whose partial softmax states are merged (2, 3
    // threads); plus a short prefill that is not split.
    for (size_t t = 0; t < N_KV_TYPES; t++) {
        struct attn_case one = {kv_types[t], 8, 1, 64, 0, 0, 0, false};
        struct attn_case two = {kv_types[t], 14, 2, 64, 0, 0, 0, true};
        for (int nth = 1; nth <= 3; nth++) {
            run_case(&one, nth, 0, 0, 1033);
            run_case(&two, nth, 0, 0, 999);
            run_case(&two, nth, 3, 1000, 0);  // decode row at position 0: one key
        }
    }
}

static void test_scores_recomputed(void **state)
{
    (void)state;
    // F16 caches keep the first pass's scores within caps; without room the
    // second pass recomputes them: same results either way (whole ranges,
    // split ranges, decode rows of every head).
    struct attn_case gqa = {GGUF_TYPE_F16, 8, 2, 64, 0, 0, 0, false};
    struct attn_case one = {GGUF_TYPE_F16, 8, 1, 64, 0, 0, 0, true};
    const size_t caps[][2] = {{0, 0}, {0, (size_t)1 << 30}, {(size_t)1 << 30, 0}};
    for (size_t c = 0; c < 3; c++) {
        engine_attention_score_caps(caps[c][0], caps[c][1]);
        for (int nth = 1; nth <= 2; nth++) {
            run_case(&gqa, nth, 37, 250, 122);
            run_case(&one, nth, 0, 0, 1033);
        }
    }
    engine_attention_score_caps(4 << 20, 8 << 20);
}

static void test_contract_fields(void **state)
{
    (void)state;
    for (size_t t = 0; t < N_KV_TYPES; t++)
        for (int nth = 1; nth <= 2; nth++) {
            struct attn_case softcap = {kv_types[t], 8, 2, 64, 5.0f, 0, 0, false};
            struct attn_case window = {kv_types[t], 8, 2, 64, 0, 47, 0, false};
            // Ring of 160 cells >= window 47 + 64-row ubatch.
            struct attn_case ring = {kv_types[t], 8, 2, 64, 0, 47, 160, false};
            struct attn_case sinks = {kv_types[t], 8, 2, 64, 0, 0, 0, true};
            struct attn_case all = {kv_types[t], 8, 4, 128, 30.0f, 100, 300, true};
            run_case(&softcap, nth, 37, 250, 122);
            run_case(&window, nth, 37, 250, 122);
            run_case(&window, nth, 37, 5, 30);  // window longer than the prefix
            run_case(&ring, nth, 37, 250, 122);
            run_case(&ring, nth, 1, 1050, 1033);  // decode deep into a ring
            run_case(&sinks, nth, 37, 250, 122);
            run_case(&sinks, nth, 0, 0, 1033);  // sinks through the split merge
            run_case(&all, nth, 61, 700, 511);
            // A few consecutive rows of one slot (a speculative verify
            // pass): decode items of several rows (at most 8 queries per KV
            // head), each row with its own window start.
            run_case(&window, nth, 2, 700, 511);
            run_case(&softcap, nth, 2, 1000, 30);
            run_case(&all, nth, 4, 250, 122);
        }
}

// A sink far above every score takes (almost) all the weight.
static void test_sink_dominates(void **state)
{
    (void)state;
    struct engine_backend *be;
    struct err e = {0};
    assert_int_equal(engine_cpu_new(&be, 1, &e), 0);
    const int hd = 16;
    struct engine_kv_layer kv = {NULL, NULL, hd * sizeof(float)};
    kv.k = engine_buf_alloc(be, kv.row_bytes * 4);
    kv.v = engine_buf_alloc(be, kv.row_bytes * 4);
    float *vv = kv.v;
    for (int i = 0; i < 4 * hd; i++)
        vv[i] = 1.0f;
    float q[16] = {0}, out[16], sink = 40.0f;
    int32_t cell0 = 0, nvis = 4;
    struct engine_attn a = {.n_head = 1,
                            .n_head_kv = 1,
                            .head_dim = hd,
                            .scale = 1.0f,
                            .kv_type = GGUF_TYPE_F32,
                            .sinks = &sink};
    engine_attention(be, out, q, 1, &kv, &cell0, &nvis, &a);
    // Scores are 0: out = 4 / (4 + e^40) per element.
    for (int i = 0; i < hd; i++)
        assert_true(fabsf(out[i] - 4.0f / (4.0f + expf(40.0f))) < 1e-20f);
    sink = -INFINITY;  // a sink of -inf changes nothing
    engine_attention(be, out, q, 1, &kv, &cell0, &nvis, &a);
    for (int i = 0; i < hd; i++)
        assert_true(fabsf(out[i] - 1.0f) < 1e-6f);
    engine_buf_free(be, kv.k), engine_buf_free(be, kv.v);
    engine_backend_free(be);
}

// ---------------------------------------------------------------------------
// Tile kernels per ISA against the generic build.

static void test_tile_kernels(void **state)
{
    (void)state;
    const struct kernels_attn *gen = kernels_attn_get_isa(KERNELS_ISA_SCALAR);
    assert_non_null(gen);
    assert_non_null(kernels_attn_get());
    enum { T = KERNELS_ATTN_TILE, HD = 80, NQ = 7 };
    float k[T * HD], kt[T * HD], kt2[T * HD], q[NQ * HD], s[NQ * T], s2[NQ * T];
    float acc[NQ * HD], acc2[NQ * HD];
    fill_rand(k, T * HD, 1.0f);
    fill_rand(q, NQ * HD, 1.0f);
    fill_rand(acc, NQ * HD, 1.0f);
    // exp: against expf over the softmax's range, exactly 0 for -inf and
    // far below -87.
    float x[64], y[64];
    for (int i = 0; i < 60; i++)
        x[i] = -87.0f + 87.5f * i / 59.0f;
    x[60] = -INFINITY, x[61] = -1000.0f, x[62] = 0.0f, x[63] = -1e-8f;
    for (enum kernels_isa isa = 0; isa < KERNELS_ISA_COUNT_; isa++) {
        const struct kernels_attn *ka = kernels_attn_get_isa(isa);
        if (!ka)
            continue;
        ka->exp(x, y, 63);  // odd count: the tail path too
        for (int i = 0; i < 60; i++)
            if (fabsf(y[i] - expf(x[i])) > 4e-7f * expf(x[i]))
                fail_msg("isa %d exp(%g) = %g, expf %g", isa, (double)x[i], (double)y[i],
                         (double)expf(x[i]));
        assert_true(y[60] == 0.0f && y[61] == 0.0f && y[62] == 1.0f);

        gen->transpose(k, HD, HD, kt);
        ka->transpose(k, HD, HD, kt2);
        assert_memory_equal(kt, kt2, sizeof kt);
        for (int j = 0; j < T; j++)
            for (int d = 0; d < HD; d++)
                assert_true(kt[d * T + j] == k[j * HD + d]);

        // Rows further apart than the head (a tile holding several heads).
        float kw[T * (HD + 16)];
        for (int j = 0; j < T; j++)
            for (int d = 0; d < HD + 16; d++)
                kw[j * (HD + 16) + d] = d < HD ? k[j * HD + d] : 99.0f;
        ka->transpose(kw, HD + 16, HD, kt2);
        assert_memory_equal(kt, kt2, sizeof kt);
        // From f16 rows (values exact in f16), the tile's tail keys zero.
        uint16_t kh[T * HD];
        const uint16_t *rows[T];
        for (int j = 0; j < T; j++) {
            for (int d = 0; d < HD; d++)
                kh[j * HD + d] = quant_f32_to_f16((float)((j * 7 + d * 3) % 41) - 20.0f);
            rows[j] = kh + (T - 1 - j) * HD;  // rows in any order
        }
        for (int nk = 1; nk <= T; nk += 10) {
            ka->transpose_f16(rows, nk, HD, kt2);
            for (int j = 0; j < T; j++)
                for (int d = 0; d < HD; d++) {
                    float want = j < nk ? quant_f16_to_f32(rows[j][d]) : 0.0f;
                    if (kt2[d * T + j] != want)
                        fail_msg("isa %d transpose_f16 nk %d [%d][%d] %g vs %g", isa, nk, j, d,
                                 (double)kt2[d * T + j], (double)want);
                }
        }
        for (int nq = 1; nq <= NQ; nq++) {
            ka->qk(HD, nq, q, kt, 0.5f, s);
            for (int i = 0; i < nq; i++)
                for (int j = 0; j < T; j++) {
                    double d = 0;
                    for (int dd = 0; dd < HD; dd++)
                        d += (double)q[i * HD + dd] * k[j * HD + dd];
                    if (fabs(s[i * T + j] - 0.5 * d) > 1e-5)
                        fail_msg("isa %d qk[%d][%d] %g vs %g", isa, i, j, (double)s[i * T + j],
                                 0.5 * d);
                }
            for (int nk = 1; nk <= T; nk += 7) {
                memcpy(acc2, acc, sizeof acc);
                ka->pv(HD, nq, nk, s, kw, HD + 16, acc2);
                for (int i = 0; i < nq; i++)
                    for (int d = 0; d < HD; d++) {
                        double o = acc[i * HD + d];
                        for (int j = 0; j < nk; j++)
                            o += (double)s[i * T + j] * k[j * HD + d];
                        if (fabs(acc2[i * HD + d] - o) > 1e-4 * (1 + fabs(o)))
                            fail_msg("isa %d pv nk %d [%d][%d] %g vs %g", isa, nk, i, d,
                                     (double)acc2[i * HD + d], o);
                    }
            }
        }
        // Straight from the cache rows, F16, Q8_0 then Q4_0: nh heads per
        // row (a gap after each), up to 8 queries per head, partial tiles,
        // rows to prefetch or none.
        for (int fmt = KERNELS_KV_F16; fmt <= KERNELS_KV_Q4_0; fmt++) {
            enum { NH = 3, HD8 = 64, NQ8 = 8 };
            const bool q8 = fmt == KERNELS_KV_Q8_0, q4 = fmt == KERNELS_KV_Q4_0;
            const int hd = q8 || q4 ? HD8 : HD;  // whole blocks of 32
            const size_t bb = q4 ? 18 : 34;      // bytes of a block
            const size_t lh = q8 || q4 ? (size_t)HD8 / 32 * bb + bb : (size_t)(HD + 8) * 2;
            static uint8_t kv[T * NH * (HD + 8) * 2];
            static float qh[NH * NQ8 * HD], sh[NH * NQ8 * T], ah[NH * NQ8 * HD], ah0[NH * NQ8 * HD];
            static float kf[T * NH * HD];  // the rows' values as floats, [j][g][d]
            const uint8_t *rh[T], *nx[T];
            for (int j = 0; j < T; j++)
                for (int g = 0; g < NH; g++) {
                    uint8_t *slice = kv + ((size_t)j * NH + g) * lh;
                    for (int d = 0; d < hd; d++) {
                        float val = (float)((((j * NH + g) * hd + d) * 7) % 23) / 8.0f - 1.4f;
                        if (q8 || q4) {
                            uint8_t *b = slice + (size_t)(d / 32) * bb;
                            if (d % 32 == 0) {
                                uint16_t h = quant_f32_to_f16(0.03125f * (float)(1 + (j + g) % 3));
                                memcpy(b, &h, 2);
                                memset(b + 2, 0, bb - 2);
                            }
                            int v;
                            if (q8) {
                                v = (((j * NH + g) * hd + d) * 5) % 255 - 127;
                                b[2 + d % 32] = (uint8_t)(int8_t)v;
                            } else {  // value e: byte e % 16, high nibble from e = 16 on
                                int u = (((j * NH + g) * hd + d) * 5) % 16, e = d % 32;
                                b[2 + e % 16] |= (uint8_t)(e < 16 ? u : u << 4);
                                v = u - 8;
                            }
                            uint16_t h;
                            memcpy(&h, b, 2);
                            val = quant_f16_to_f32(h) * (float)v;
                        } else {
                            uint16_t h = quant_f32_to_f16(val);
                            memcpy(slice + 2 * (size_t)d, &h, 2);
                            val = quant_f16_to_f32(h);
                        }
                        kf[((size_t)j * NH + g) * HD + d] = val;
                    }
                }
            int perm[T];
            for (int j = 0; j < T; j++) {
                perm[j] = (j * 5) % T;  // rows in any order
                rh[j] = kv + (size_t)perm[j] * NH * lh;
            }
            for (int j = 0; j < T; j++)
                nx[j] = j % 3 ? rh[(j + 1) % T] : NULL;
            fill_rand(qh, NH * NQ8 * HD, 1.0f);
            fill_rand(ah0, NH * NQ8 * HD, 1.0f);
            for (int nq = 1; nq <= NQ8; nq++)
                for (int nk = 1; nk <= T; nk += 10) {
                    for (int i = 0; i < NH * NQ8 * T; i++)
                        sh[i] = 99.0f;
                    ka->qk_rows(fmt, hd, NH, nq, qh, (int64_t)NQ8 * hd, rh, nk & 1 ? nx : NULL,
                                (int64_t)lh, nk, 0.5f, sh, (int64_t)NQ8 * T, T);
                    memcpy(ah, ah0, sizeof ah);
                    ka->pv_rows(fmt, hd, NH, nq, nk, sh, (int64_t)NQ8 * T, T, rh,
                                nk & 1 ? NULL : nx, (int64_t)lh, ah, (int64_t)NQ8 * hd);
                    for (int g = 0; g < NH; g++)
                        for (int i = 0; i < NQ8; i++) {
                            const float *qi = qh + ((size_t)g * NQ8 + i) * hd;
                            const float *si = sh + ((size_t)g * NQ8 + i) * T;
                            const float *ai = ah + ((size_t)g * NQ8 + i) * hd;
                            const float *a0 = ah0 + ((size_t)g * NQ8 + i) * hd;
                            for (int j = 0; j < T; j++) {
                                const float *kj = kf + ((size_t)perm[j] * NH + g) * HD;
                                double want = i >= nq ? 99.0 : 0.0;
                                for (int d = 0; i < nq && j < nk && d < hd; d++)
                                    want += (double)qi[d] * kj[d];
                                if (i < nq && j < nk)
                                    want *= 0.5;
                                if (fabs(si[j] - want) > 1e-5 * (1 + fabs(want)))
                                    fail_msg(
                                        "isa %d fmt %d qk_rows nq %d nk %d [%d][%d][%d] %g vs %g",
                                        isa, fmt, nq, nk, g, i, j, (double)si[j], want);
                            }
                            for (int d = 0; d < hd; d++) {
                                double o = a0[d];
                                for (int j = 0; i < nq && j < nk; j++)
                                    o += (double)si[j] * kf[((size_t)perm[j] * NH + g) * HD + d];
                                if (fabs(ai[d] - o) > 1e-4 * (1 + fabs(o)))
                                    fail_msg(
                                        "isa %d fmt %d pv_rows nq %d nk %d [%d][%d][%d] %g vs %g",
                                        isa, fmt, nq, nk, g, i, d, (double)ai[d], o);
                            }
                        }
                }
        }
        // softmax: running state over two tiles equals the direct sums.
        float m = -INFINITY, l = 0, t1[T], t2[T];
        fill_rand(t1, T, 4.0f);
        fill_rand(t2, T, 4.0f);
        t2[5] = 9.0f, t1[3] = -INFINITY;
        double mx = 9.0, sum = 0;
        for (int j = 0; j < T; j++)
            sum += (j == 3 ? 0 : exp(t1[j] - mx)) + exp(t2[j] - mx);
        memcpy(s, t1, sizeof t1);
        memcpy(s2, t2, sizeof t2);
        assert_true(ka->softmax(s, &m, &l) == 0.0f);  // from -inf: the (zero) acc scales by 0
        assert_true(s[3] == 0.0f);
        float corr = ka->softmax(s2, &m, &l);
        assert_true(m == 9.0f);
        assert_true(fabs(l - sum) < 1e-5 * sum);
        assert_true(corr > 0 && corr < 1);
        float masked[T];
        for (int j = 0; j < T; j++)
            masked[j] = -INFINITY;
        assert_true(ka->softmax(masked, &m, &l) == 1.0f && masked[0] == 0.0f && m == 9.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_heads_dims),  cmocka_unit_test(test_split_keys),
        cmocka_unit_test(test_scores_recomputed), cmocka_unit_test(test_contract_fields),
        cmocka_unit_test(test_sink_dominates),    cmocka_unit_test(test_tile_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

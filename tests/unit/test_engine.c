// engine: thread pool and barrier, and every CPU op against a naive double
// precision reference on random data (1, 2 and 3 threads).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

static uint64_t rng = 88172645463325252ull;

static float frand(void)  // uniform in [-1, 1)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *rand_vec(int64_t n)
{
    float *v = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] = frand();
    return v;
}

static void assert_close(const float *a, const double *b, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > tol * (1.0 + fabs(b[i])))
            fail_msg("element %lld: %.7f vs %.7f (tol %g)", (long long)i, (double)a[i], b[i], tol);
}

static struct engine_backend *backend(int n_threads)
{
    struct engine_backend *be;
    struct err e = {0};
    assert_int_equal(engine_cpu_new(&be, n_threads, &e), 0);
    assert_int_equal(engine_reserve(be, 16, 1024, 256, &e), 0);
    return be;
}

// ---------------------------------------------------------------------------
// Pool.

struct pool_test {
    struct engine_pool *p;
    _Atomic int slots[8];
    _Atomic int bad;
};

static void pool_task(void *arg, int ith, int nth)
{
    struct pool_test *t = arg;
    for (int round = 1; round <= 10; round++) {
        atomic_store(&t->slots[ith], round);
        engine_pool_barrier(t->p);
        for (int i = 0; i < nth; i++)
            if (atomic_load(&t->slots[i]) != round)
                atomic_fetch_add(&t->bad, 1);
        engine_pool_barrier(t->p);
    }
}

static void test_pool(void **state)
{
    (void)state;
    assert_true(engine_physical_cores() >= 1);
    for (int nth = 1; nth <= 3; nth++) {
        struct err e = {0};
        struct pool_test t = {0};
        t.p = engine_pool_new(nth, &e);
        assert_non_null(t.p);
        assert_int_equal(engine_pool_n_threads(t.p), nth);
        for (int rep = 0; rep < 20; rep++)
            engine_pool_run(t.p, pool_task, &t);
        assert_int_equal(atomic_load(&t.bad), 0);
        engine_pool_free(t.p);
    }
}

// ---------------------------------------------------------------------------
// Matrix products.

// Builds a weight matrix of `type` from random floats and returns the
// dequantized copy the reference uses.
static void make_weight(uint32_t type, int64_t n_in, int64_t n_out, struct engine_tensor *t,
                        void **data, float **deq)
{
    float *src = rand_vec(n_in * n_out);
    size_t rb = quant_row_size(type, n_in);
    assert_true(rb > 0);
    uint8_t *d = xmalloc(rb * (size_t)n_out);
    for (int64_t r = 0; r < n_out; r++) {
        if (type == GGUF_TYPE_F32)
            memcpy(d + r * rb, src + r * n_in, rb);
        else if (type == GGUF_TYPE_F16)
            kernels_f32_to_f16_row(src + r * n_in, (uint16_t *)(d + r * rb), n_in);
        else
            kernels_get(GGUF_TYPE_Q8_0)->from_float(src + r * n_in, d + r * rb, n_in);
    }
    *deq = xmalloc((size_t)(n_in * n_out) * sizeof(float));
    for (int64_t r = 0; r < n_out; r++)
        quant_traits_get(type)->to_float(d + r * rb, *deq + r * n_in, n_in);
    *t = (struct engine_tensor){"w", type, {n_in, n_out}, rb, d};
    *data = d;
    free(src);
}

// The activation as the kernel sees it (rounded to its vec_dot_type).
static void round_activation(uint32_t wtype, const float *x, float *out, int64_t n)
{
    const struct kernels_type *kt = kernels_get(wtype);
    if (kt->vec_dot_type == GGUF_TYPE_F32) {
        memcpy(out, x, (size_t)n * sizeof(float));
        return;
    }
    void *tmp = xmalloc(quant_row_size(kt->vec_dot_type, n) + 64);
    kt->from_float(x, tmp, n);
    const struct quant_traits *qt = quant_traits_get(kt->vec_dot_type);
    if (qt && qt->to_float)
        qt->to_float(tmp, out, n);
    else
        memcpy(out, x, (size_t)n * sizeof(float));  // no dequantizer: compare loosely
    free(tmp);
}

static void check_matmul(int n_threads, uint32_t type, int64_t n_rows, bool bias)
{
    const int64_t n_in = 256, n_out = 1100;  // large enough for the pool (not inline)
    struct engine_backend *be = backend(n_threads);
    struct engine_tensor w;
    void *wd;
    float *deq;
    make_weight(type, n_in, n_out, &w, &wd, &deq);
    float *x = rand_vec(n_in * n_rows), *b = bias ? rand_vec(n_out) : NULL;
    float *y = engine_buf_alloc(be, (size_t)(n_out * n_rows) * sizeof(float));
    engine_matmul(be, y, &w, b, x, n_rows);
    double *ref = xmalloc((size_t)(n_out * n_rows) * sizeof(double));
    float *xr = xmalloc((size_t)n_in * sizeof(float));
    for (int64_t c = 0; c < n_rows; c++) {
        round_activation(type, x + c * n_in, xr, n_in);
        for (int64_t r = 0; r < n_out; r++) {
            double s = 0;
            for (int64_t i = 0; i < n_in; i++)
                s += (double)deq[r * n_in + i] * xr[i];
            ref[c * n_out + r] = s + (b ? b[r] : 0);
        }
    }
    assert_close(y, ref, n_out * n_rows, 1e-3);
    engine_buf_free(be, y);
    engine_backend_free(be);
    free(ref), free(xr), free(x), free(b), free(wd), free(deq);
}

static void test_matmul(void **state)
{
    (void)state;
    const uint32_t types[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_Q8_0};
    for (size_t t = 0; t < 3; t++)
        for (int nth = 1; nth <= 3; nth++) {
            check_matmul(nth, types[t], 1, false);
            check_matmul(nth, types[t], 9, true);  // gemm tiles plus a remainder
        }
}

// Several jobs sharing one input, with different activation types.
static void test_matmul_n(void **state)
{
    (void)state;
    struct engine_backend *be = backend(2);
    struct engine_tensor w1, w2;
    void *d1, *d2;
    float *q1, *q2;
    make_weight(GGUF_TYPE_Q8_0, 256, 700, &w1, &d1, &q1);
    make_weight(GGUF_TYPE_F32, 256, 33, &w2, &d2, &q2);
    float *x = rand_vec(256 * 5);
    float *y1 = engine_buf_alloc(be, 700 * 5 * sizeof(float));
    float *y2 = engine_buf_alloc(be, 33 * 5 * sizeof(float));
    float *z1 = engine_buf_alloc(be, 700 * 5 * sizeof(float));
    float *z2 = engine_buf_alloc(be, 33 * 5 * sizeof(float));
    struct engine_matmul_job jobs[2] = {{&w1, y1, NULL}, {&w2, y2, NULL}};
    engine_matmul_n(be, jobs, 2, x, 5);
    engine_matmul(be, z1, &w1, NULL, x, 5);
    engine_matmul(be, z2, &w2, NULL, x, 5);
    assert_memory_equal(y1, z1, 700 * 5 * sizeof(float));
    assert_memory_equal(y2, z2, 33 * 5 * sizeof(float));
    engine_buf_free(be, y1), engine_buf_free(be, y2), engine_buf_free(be, z1),
        engine_buf_free(be, z2);
    engine_backend_free(be);
    free(x), free(d1), free(d2), free(q1), free(q2);
}

// Jobs of one group whose rows are shared out as one run of chunks, cut
// into a home range per thread for a few activation rows (1, 6: ranges span
// job boundaries, and with 4 threads the small product has fewer chunks
// than ranges) and dealt from one cursor for more (20). Every row must be
// computed once, as the same product with 1 thread computes it.
static void test_matmul_ranges(void **state)
{
    (void)state;
    const int64_t n_out[3] = {700, 40, 130}, n_rows[3] = {1, 6, 20};
    struct engine_tensor w[3];
    void *d[3];
    float *q[3];
    for (int j = 0; j < 3; j++)
        make_weight(GGUF_TYPE_Q8_0, 256, n_out[j], &w[j], &d[j], &q[j]);
    float *x = rand_vec(256 * 20);
    for (int k = 0; k < 3; k++) {
        float *y[2][3];
        for (int nth = 1; nth <= 4; nth += 3) {
            struct engine_backend *be = backend(nth);
            struct engine_matmul_job jobs[3];
            for (int j = 0; j < 3; j++) {
                y[nth > 1][j] = xmalloc((size_t)(n_out[j] * n_rows[k]) * sizeof(float));
                jobs[j] = (struct engine_matmul_job){&w[j], y[nth > 1][j], NULL};
            }
            engine_matmul_n(be, jobs, 3, x, n_rows[k]);
            float *small = xmalloc((size_t)(40 * n_rows[k]) * sizeof(float));
            engine_matmul(be, small, &w[1], NULL, x, n_rows[k]);
            assert_memory_equal(small, y[nth > 1][1], (size_t)(40 * n_rows[k]) * sizeof(float));
            free(small);
            engine_backend_free(be);
        }
        for (int j = 0; j < 3; j++) {
            assert_memory_equal(y[0][j], y[1][j], (size_t)(n_out[j] * n_rows[k]) * sizeof(float));
            free(y[0][j]), free(y[1][j]);
        }
    }
    for (int j = 0; j < 3; j++)
        free(d[j]), free(q[j]);
    free(x);
}

static void test_get_rows(void **state)
{
    (void)state;
    struct engine_backend *be = backend(2);
    const uint32_t types[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_Q8_0};
    for (size_t t = 0; t < 3; t++) {
        struct engine_tensor w;
        void *wd;
        float *deq;
        make_weight(types[t], 64, 10, &w, &wd, &deq);
        int32_t ids[3] = {9, 0, 4};
        float *y = engine_buf_alloc(be, 3 * 64 * sizeof(float));
        engine_get_rows(be, y, &w, ids, 3);
        for (int r = 0; r < 3; r++)
            assert_memory_equal(y + r * 64, deq + ids[r] * 64, 64 * sizeof(float));
        engine_buf_free(be, y);
        free(wd), free(deq);
    }
    engine_backend_free(be);
}

// ---------------------------------------------------------------------------
// Norms, activations, softmax, element-wise.

static void test_norms_and_elementwise(void **state)
{
    (void)state;
    struct engine_backend *be = backend(2);
    const int64_t rows = 3, n = 100;
    float *x = rand_vec(rows * n), *w = rand_vec(n), *b = rand_vec(n);
    float *y = engine_buf_alloc(be, (size_t)(rows * n) * sizeof(float));
    double ref[300];

    engine_rmsnorm(be, y, x, w, rows, n, 1e-5f);
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)x[r * n + i] * x[r * n + i];
        double s = 1.0 / sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; i++)
            ref[r * n + i] = x[r * n + i] * s * w[i];
    }
    assert_close(y, ref, rows * n, 1e-5);

    engine_layernorm(be, y, x, w, b, rows, n, 1e-5f);
    for (int64_t r = 0; r < rows; r++) {
        double mu = 0, var = 0;
        for (int64_t i = 0; i < n; i++)
            mu += x[r * n + i];
        mu /= n;
        for (int64_t i = 0; i < n; i++)
            var += (x[r * n + i] - mu) * (x[r * n + i] - mu);
        var /= n;
        for (int64_t i = 0; i < n; i++)
            ref[r * n + i] = (x[r * n + i] - mu) / sqrt(var + 1e-5) * w[i] + b[i];
    }
    assert_close(y, ref, rows * n, 1e-5);

    memcpy(y, x, (size_t)(rows * n) * sizeof(float));
    engine_softmax(be, y, rows, n, 0.5f);
    for (int64_t r = 0; r < rows; r++) {
        double mx = -1e30, sum = 0;
        for (int64_t i = 0; i < n; i++)
            mx = fmax(mx, 0.5 * x[r * n + i]);
        for (int64_t i = 0; i < n; i++)
            sum += exp(0.5 * x[r * n + i] - mx);
        for (int64_t i = 0; i < n; i++)
            ref[r * n + i] = exp(0.5 * x[r * n + i] - mx) / sum;
    }
    assert_close(y, ref, rows * n, 1e-5);

    engine_glu(be, y, x, w, n, false);
    for (int64_t i = 0; i < n; i++)
        ref[i] = x[i] / (1 + exp(-(double)x[i])) * w[i];
    assert_close(y, ref, n, 1e-5);
    // GELU as the reference's table: input and result rounded to f16.
    engine_glu(be, y, x, w, n, true);
    for (int64_t i = 0; i < n; i++) {
        double v = quant_f16_to_f32(quant_f32_to_f16(x[i]));
        float g = (float)(0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
        ref[i] = (double)quant_f16_to_f32(quant_f32_to_f16(g)) * w[i];
    }
    assert_close(y, ref, n, 1e-5);
    assert_true(engine_gelu(-11.0f) == 0.0f && engine_gelu(12.5f) == 12.5f);

    // Soft-capping: cap · tanh(x / cap).
    for (int64_t i = 0; i < n; i++)
        y[i] = 4.0f * x[i];
    engine_softcap(be, y, y, 3.0f, n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = 3.0 * tanh(4.0 * x[i] / 3.0);
    assert_close(y, ref, n, 1e-6);

    engine_add(be, y, x, w, n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = (double)x[i] + w[i];
    assert_close(y, ref, n, 1e-6);
    engine_mul(be, y, x, w, n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = (double)x[i] * w[i];
    assert_close(y, ref, n, 1e-6);
    engine_scale(be, y, x, 3.0f, n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = 3.0 * x[i];
    assert_close(y, ref, n, 1e-6);

    int32_t idx[2] = {2, 0};
    engine_gather(be, y, x, idx, 2, n);
    assert_memory_equal(y, x + 2 * n, (size_t)n * sizeof(float));
    assert_memory_equal(y + n, x, (size_t)n * sizeof(float));

    engine_buf_free(be, y);
    engine_backend_free(be);
    free(x), free(w), free(b);
}

// Gemma 3n's AltUp row ops: per-row linear combinations, rescaling to
// another row's magnitude, Gaussian top-k.
static void test_altup_rows(void **state)
{
    (void)state;
    struct engine_backend *be = backend(2);
    const int64_t rows = 3, n = 100;
    float *a = rand_vec(rows * n), *b = rand_vec(rows * n), *base = rand_vec(rows * n);
    float *c = rand_vec(rows * 4);
    float *y = engine_buf_alloc(be, (size_t)(rows * n) * sizeof(float));
    double ref[300];

    // y = base + c[r·4 + 1]·a + c[r·4 + 2]·b (offset 1, stride 4), then without base.
    const float *srcs[2] = {a, b};
    engine_rows_mix(be, y, base, srcs, 2, c + 1, 4, rows, n);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            ref[r * n + i] = (double)base[r * n + i] + (double)c[r * 4 + 1] * a[r * n + i] +
                             (double)c[r * 4 + 2] * b[r * n + i];
    assert_close(y, ref, rows * n, 1e-5);
    engine_rows_mix(be, y, NULL, srcs, 1, c, 4, rows, n);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            ref[r * n + i] = (double)c[r * 4] * a[r * n + i];
    assert_close(y, ref, rows * n, 1e-6);

    // a brought to |b| per row (in place).
    memcpy(y, a, (size_t)(rows * n) * sizeof(float));
    engine_rows_rescale(be, y, y, b, rows, n);
    for (int64_t r = 0; r < rows; r++) {
        double na = 0, nb = 0;
        for (int64_t i = 0; i < n; i++) {
            na += (double)a[r * n + i] * a[r * n + i];
            nb += (double)b[r * n + i] * b[r * n + i];
        }
        for (int64_t i = 0; i < n; i++)
            ref[r * n + i] = a[r * n + i] * sqrt(nb / na);
    }
    assert_close(y, ref, rows * n, 1e-5);

    // relu(x - (mean + 1.5·std)), sample std: only the top of each row stays.
    engine_gauss_topk(be, y, a, 1.5f, rows, n);
    int kept = 0;
    for (int64_t r = 0; r < rows; r++) {
        double mu = 0, var = 0;
        for (int64_t i = 0; i < n; i++)
            mu += a[r * n + i];
        mu /= n;
        for (int64_t i = 0; i < n; i++)
            var += (a[r * n + i] - mu) * (a[r * n + i] - mu);
        double cut = mu + 1.5 * sqrt(var / (n - 1));
        for (int64_t i = 0; i < n; i++) {
            ref[r * n + i] = a[r * n + i] > cut ? a[r * n + i] - cut : 0.0;
            kept += ref[r * n + i] > 0;
        }
    }
    assert_close(y, ref, rows * n, 1e-5);
    assert_true(kept > 0 && kept < rows * n / 4);

    engine_buf_free(be, y);
    engine_backend_free(be);
    free(a), free(b), free(base), free(c);
}

// ---------------------------------------------------------------------------
// RoPE.

static void rope_ref(double *out, const float *x, int n_head, int hd, int n_rot, bool neox,
                     double pos, double base, const float *ff)
{
    for (int h = 0; h < n_head; h++) {
        const float *xh = x + h * hd;
        double *oh = out + h * hd;
        for (int i = 0; i < hd; i++)
            oh[i] = xh[i];
        for (int i = 0; i < n_rot / 2; i++) {
            double th = pos * pow(base, -2.0 * i / n_rot) / (ff ? ff[i] : 1.0);
            int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
            oh[a] = xh[a] * cos(th) - xh[b] * sin(th);
            oh[b] = xh[a] * sin(th) + xh[b] * cos(th);
        }
    }
}

static void test_rope(void **state)
{
    (void)state;
    struct engine_backend *be = backend(2);
    const int n_head = 3, hd = 16;
    float ff[8];
    for (int i = 0; i < 8; i++)
        ff[i] = 1.0f + (float)i;
    for (int mode = 0; mode < 4; mode++) {
        bool neox = mode & 1;
        int n_rot = mode & 2 ? 8 : 16;  // partial rotation leaves dims alone
        struct engine_rope rp = {.mode = neox ? ENGINE_ROPE_NEOX : ENGINE_ROPE_NORMAL,
                                 .n_rot = n_rot,
                                 .freq_base = 10000.0f,
                                 .freq_scale = 1.0f,
                                 .freq_factors = mode == 2 ? ff : NULL};
        float *x = rand_vec(2 * n_head * hd);
        float *y = engine_buf_alloc(be, 2 * n_head * hd * sizeof(float));
        memcpy(y, x, 2 * n_head * hd * sizeof(float));
        int32_t pos[2] = {7, 300};
        engine_rope(be, y, 2, n_head, hd, pos, &rp);
        double ref[2 * 3 * 16];
        for (int r = 0; r < 2; r++)
            rope_ref(ref + r * n_head * hd, x + r * n_head * hd, n_head, hd, n_rot, neox, pos[r],
                     10000.0, rp.freq_factors);
        assert_close(y, ref, 2 * n_head * hd, 2e-4);
        engine_buf_free(be, y);
        free(x);
    }
    engine_backend_free(be);
}

// M-RoPE: pair i turns by the stream its section names (contiguous: Qwen2-VL
// [2, 3, 3]; interleaved: Qwen3-VL [3, 3, 2], pair i by i % 3 while below 3
// × that section), NeoX halves, positions as four streams of n_rows.
static void test_rope_multi(void **state)
{
    (void)state;
    struct engine_backend *be = backend(1);
    const int n_head = 2, hd = 16, n = 2;
    static const int32_t pos[4 * 2] = {5, 9, 7, 20, 11, 40, 0, 0};  // t, h, w, e per row
    static const int want_contig[8] = {0, 0, 1, 1, 1, 2, 2, 2};
    static const int want_inter[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    for (int inter = 0; inter < 2; inter++) {
        struct engine_rope rp = {.mode = ENGINE_ROPE_NEOX,
                                 .n_rot = hd,
                                 .freq_base = 10000.0f,
                                 .freq_scale = 1.0f,
                                 .sections = {inter ? 3 : 2, 3, inter ? 2 : 3, 0},
                                 .imrope = inter};
        float *x = rand_vec(n * n_head * hd);
        float *y = engine_buf_alloc(be, n * n_head * hd * sizeof(float));
        memcpy(y, x, n * n_head * hd * sizeof(float));
        engine_rope(be, y, n, n_head, hd, pos, &rp);
        double ref[2 * 2 * 16];
        for (int r = 0; r < n; r++)
            for (int h = 0; h < n_head; h++) {
                const float *xh = x + (r * n_head + h) * hd;
                double *oh = ref + (r * n_head + h) * hd;
                for (int i = 0; i < hd / 2; i++) {
                    int stream = inter ? want_inter[i] : want_contig[i];
                    double th = pos[r + stream * n] * pow(10000.0, -2.0 * i / hd);
                    oh[i] = xh[i] * cos(th) - xh[i + hd / 2] * sin(th);
                    oh[i + hd / 2] = xh[i] * sin(th) + xh[i + hd / 2] * cos(th);
                }
            }
        assert_close(y, ref, n * n_head * hd, 2e-4);
        engine_buf_free(be, y);
        free(x);
    }
    engine_backend_free(be);
}

// ---------------------------------------------------------------------------
// KV cache and attention.

static void test_attention(void **state)
{
    (void)state;
    const int n_head = 4, n_head_kv = 2, hd = 32, n_cells = 40, kv_dim = n_head_kv * hd;
    const uint32_t kv_types[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_Q8_0, GGUF_TYPE_Q4_0};
    for (int nth = 1; nth <= 2; nth++)
        for (size_t kt = 0; kt < sizeof kv_types / sizeof kv_types[0]; kt++) {
            uint32_t type = kv_types[kt];
            struct engine_backend *be = backend(nth);
            struct engine_kv_layer kv = {NULL, NULL, engine_kv_row_bytes(type, kv_dim)};
            kv.k = engine_buf_alloc(be, kv.row_bytes * n_cells);
            kv.v = engine_buf_alloc(be, kv.row_bytes * n_cells);
            float *k = rand_vec(n_cells * kv_dim), *v = rand_vec(n_cells * kv_dim);
            int32_t cells[40];
            for (int i = 0; i < n_cells; i++)
                cells[i] = i;
            engine_kv_store(be, &kv, type, cells, k, v, n_cells, kv_dim);
            // What the cache holds, as floats.
            for (int c = 0; c < n_cells; c++) {
                const uint8_t *kr = (const uint8_t *)kv.k + c * kv.row_bytes;
                const uint8_t *vr = (const uint8_t *)kv.v + c * kv.row_bytes;
                quant_traits_get(type)->to_float(kr, k + c * kv_dim, kv_dim);
                quant_traits_get(type)->to_float(vr, v + c * kv_dim, kv_dim);
            }
            const int n_rows = 3;
            float *q = rand_vec(n_rows * n_head * hd);
            int32_t cell0[3] = {0, 10, 0}, nvis[3] = {1, 17, 40};
            float *out = engine_buf_alloc(be, n_rows * n_head * hd * sizeof(float));
            struct engine_attn a = {n_head, n_head_kv, hd, 1.0f / sqrtf(hd), type};
            engine_attention(be, out, q, n_rows, &kv, cell0, nvis, &a);
            double ref[3 * 4 * 32];
            for (int r = 0; r < n_rows; r++)
                for (int h = 0; h < n_head; h++) {
                    int g = h / (n_head / n_head_kv);
                    double s[40], mx = -1e30, sum = 0;
                    for (int j = 0; j < nvis[r]; j++) {
                        double d = 0;
                        for (int i = 0; i < hd; i++)
                            d += (double)q[(r * n_head + h) * hd + i] *
                                 k[(cell0[r] + j) * kv_dim + g * hd + i];
                        s[j] = d / sqrt(hd);
                        mx = fmax(mx, s[j]);
                    }
                    for (int j = 0; j < nvis[r]; j++)
                        sum += (s[j] = exp(s[j] - mx));
                    for (int i = 0; i < hd; i++) {
                        double o = 0;
                        for (int j = 0; j < nvis[r]; j++)
                            o += s[j] / sum * v[(cell0[r] + j) * kv_dim + g * hd + i];
                        ref[(r * n_head + h) * hd + i] = o;
                    }
                }
            // F16 / Q8_0 / Q4_0 round the query (and F16 the probabilities).
            double tol = type == GGUF_TYPE_F32 ? 1e-5 : type == GGUF_TYPE_F16 ? 3e-3 : 3e-2;
            assert_close(out, ref, n_rows * n_head * hd, tol);
            engine_buf_free(be, out), engine_buf_free(be, kv.k), engine_buf_free(be, kv.v);
            engine_backend_free(be);
            free(k), free(v), free(q);
        }
}

// Sliding window, soft-capped scores and a ring cache: position p of a
// slot in cell cell0 + p % ring; row r sees positions
// [max(0, nvis - window), nvis).
static void test_attention_window_ring(void **state)
{
    (void)state;
    const int n_head = 2, n_head_kv = 1, hd = 16, kv_dim = hd, n_pos = 30, ring = 12, window = 5;
    struct engine_backend *be = backend(2);
    struct engine_kv_layer kv = {NULL, NULL, engine_kv_row_bytes(GGUF_TYPE_F32, kv_dim)};
    kv.k = engine_buf_alloc(be, kv.row_bytes * 2 * ring);  // two slots
    kv.v = engine_buf_alloc(be, kv.row_bytes * 2 * ring);
    float *k = rand_vec(n_pos * kv_dim), *v = rand_vec(n_pos * kv_dim);
    for (int i = 0; i < n_pos * kv_dim; i++)
        k[i] *= 8.0f;  // large scores, so the cap bites
    // Slot 1 holds positions 0..n_pos-1 as a ring (the earlier ones are
    // overwritten); slot 0 is never read.
    for (int p = 0; p < n_pos; p++) {
        int32_t cell = ring + p % ring;
        engine_kv_store(be, &kv, GGUF_TYPE_F32, &cell, k + p * kv_dim, v + p * kv_dim, 1, kv_dim);
    }
    const int n_rows = 3;
    float *q = rand_vec(n_rows * n_head * hd);
    int32_t cell0[3] = {ring, ring, ring}, nvis[3] = {n_pos, n_pos - 3, n_pos - 7};
    float *out = engine_buf_alloc(be, n_rows * n_head * hd * sizeof(float));
    for (int capped = 0; capped <= 1; capped++) {
        struct engine_attn a = {n_head, n_head_kv, hd, 1.0f / sqrtf(hd), GGUF_TYPE_F32};
        a.window = window;
        a.kv_ring = ring;
        a.softcap = capped ? 2.0f : 0.0f;
        engine_attention(be, out, q, n_rows, &kv, cell0, nvis, &a);
        double ref[3 * 2 * 16];
        for (int r = 0; r < n_rows; r++)
            for (int h = 0; h < n_head; h++) {
                int p0 = nvis[r] > window ? nvis[r] - window : 0;
                double s[32], mx = -1e30, sum = 0;
                for (int p = p0; p < nvis[r]; p++) {
                    double d = 0;
                    for (int i = 0; i < hd; i++)
                        d += (double)q[(r * n_head + h) * hd + i] * k[p * kv_dim + i];
                    d /= sqrt(hd);
                    if (capped)
                        d = 2.0 * tanh(d / 2.0);
                    s[p] = d;
                    mx = fmax(mx, d);
                }
                for (int p = p0; p < nvis[r]; p++)
                    sum += (s[p] = exp(s[p] - mx));
                for (int i = 0; i < hd; i++) {
                    double o = 0;
                    for (int p = p0; p < nvis[r]; p++)
                        o += s[p] / sum * v[p * kv_dim + i];
                    ref[(r * n_head + h) * hd + i] = o;
                }
            }
        assert_close(out, ref, n_rows * n_head * hd, 1e-5);
    }
    engine_buf_free(be, out), engine_buf_free(be, kv.k), engine_buf_free(be, kv.v);
    engine_backend_free(be);
    free(k), free(v), free(q);
}

// Shifting cached keys by delta equals rotating them at pos + delta.
static void test_kv_shift_and_move(void **state)
{
    (void)state;
    struct engine_backend *be = backend(2);
    const int n_head_kv = 2, hd = 16, kv_dim = 32;
    struct engine_rope rp = {
        .mode = ENGINE_ROPE_NORMAL, .n_rot = 16, .freq_base = 500000.0f, .freq_scale = 1.0f};
    struct engine_kv_layer kv = {NULL, NULL, kv_dim * sizeof(float)};
    kv.k = engine_buf_alloc(be, kv.row_bytes * 8);
    kv.v = engine_buf_alloc(be, kv.row_bytes * 8);
    float *k = rand_vec(4 * kv_dim), *v = rand_vec(4 * kv_dim);
    float *k_at = xmalloc(4 * kv_dim * sizeof(float)),
          *k_later = xmalloc(4 * kv_dim * sizeof(float));
    memcpy(k_at, k, 4 * kv_dim * sizeof(float));
    memcpy(k_later, k, 4 * kv_dim * sizeof(float));
    int32_t pos[4] = {5, 6, 7, 8}, later[4] = {2, 3, 4, 5}, cells[4] = {4, 5, 6, 7};
    engine_rope(be, k_at, 4, n_head_kv, hd, pos, &rp);
    engine_rope(be, k_later, 4, n_head_kv, hd, later, &rp);
    engine_kv_store(be, &kv, GGUF_TYPE_F32, cells, k_at, v, 4, kv_dim);
    engine_kv_move(be, &kv, 1, 4, 4);  // cells 4..7 -> 1..4
    engine_kv_shift(be, &kv, GGUF_TYPE_F32, 1, 4, -3, n_head_kv, hd, &rp);
    double ref[4 * 32];
    for (int i = 0; i < 4 * kv_dim; i++)
        ref[i] = k_later[i];
    assert_close((const float *)kv.k + 1 * kv_dim, ref, 4 * kv_dim, 1e-5);
    assert_memory_equal((const float *)kv.v + 1 * kv_dim, v, 4 * kv_dim * sizeof(float));
    engine_buf_free(be, kv.k), engine_buf_free(be, kv.v);
    engine_backend_free(be);
    free(k), free(v), free(k_at), free(k_later);
}

static void test_tensor_view(void **state)
{
    (void)state;
    float data[64 * 2] = {0};
    struct gguf_tensor gt = {.name = STR_LIT("x"),
                             .type = GGUF_TYPE_Q8_0,
                             .n_dims = 2,
                             .ne = {64, 2, 1, 1},
                             .n_bytes = 2 * 68,
                             .data = data};
    struct engine_tensor t;
    struct err e = {0};
    assert_int_equal(engine_tensor_from_gguf(&t, &gt, &e), 0);
    assert_int_equal(t.row_bytes, 68);
    assert_int_equal(t.ne[1], 2);
    gt.ne[0] = 48;  // not a multiple of 32
    assert_int_equal(engine_tensor_from_gguf(&t, &gt, &e), ERR_UNSUPPORTED);
    gt.ne[0] = 64;
    gt.type = 99;
    err_clear(&e);
    assert_int_equal(engine_tensor_from_gguf(&t, &gt, &e), ERR_UNSUPPORTED);
    assert_false(engine_type_supported(99));
    assert_true(engine_type_supported(GGUF_TYPE_F32));
    assert_int_equal(engine_kv_row_bytes(GGUF_TYPE_F16, 64), 128);
    assert_int_equal(engine_kv_row_bytes(GGUF_TYPE_Q4_0, 64), 36);
    assert_int_equal(engine_kv_row_bytes(GGUF_TYPE_Q8_0, 64), 68);
    assert_int_equal(engine_kv_row_bytes(GGUF_TYPE_Q4_1, 64), 0);  // not a cache type
}

// ---------------------------------------------------------------------------
// Recurrent-layer ops: two slots in one ubatch (their runs of rows), a fresh
// start at position 0, and the state carried from one call to the next,
// against a double-precision reference that walks each slot token by token.

enum { RC_T = 7, RC_CH = 40, RC_K = 4, RC_HK = 2, RC_HV = 4, RC_DK = 16, RC_DV = 8 };

// Rows: slot 1 positions 0-2, then slot 0 positions 0-3 (7 rows); the
// second call continues slot 0 at 4-6.
static const int32_t rc_slot[RC_T] = {1, 1, 1, 0, 0, 0, 0};
static const int32_t rc_pos1[RC_T] = {0, 1, 2, 0, 1, 2, 3};

static void ref_conv(double *y, const float *x, const float *w, const float *b, int n, int s0)
{
    // y for rows [s0, s0 + n) of one slot's sequence x (rows of RC_CH).
    for (int t = s0; t < s0 + n; t++)
        for (int c = 0; c < RC_CH; c++) {
            double acc = b[c];
            for (int j = 0; j < RC_K; j++) {
                int src = t - RC_K + 1 + j;
                acc += src < 0 ? 0.0 : (double)w[c * RC_K + j] * x[src * RC_CH + c];
            }
            y[(t - s0) * RC_CH + c] = acc / (1.0 + exp(-acc));
        }
}

static void test_conv1d(void **state)
{
    (void)state;
    float *w = rand_vec(RC_CH * RC_K), *b = rand_vec(RC_CH);
    float *seq0 = rand_vec(7 * RC_CH), *seq1 = rand_vec(3 * RC_CH);
    for (int nt = 1; nt <= 2; nt++) {
        struct engine_backend *be = backend(nt);
        float *st = engine_buf_alloc(be, 2 * (RC_K - 1) * RC_CH * sizeof(float));
        float x[RC_T * RC_CH], y[RC_T * RC_CH];
        for (int r = 0; r < 3; r++)
            memcpy(x + r * RC_CH, seq1 + r * RC_CH, sizeof(float) * RC_CH);
        for (int r = 0; r < 4; r++)
            memcpy(x + (3 + r) * RC_CH, seq0 + r * RC_CH, sizeof(float) * RC_CH);
        for (int i = 0; i < 2 * (RC_K - 1) * RC_CH; i++)
            st[i] = 1e9f;  // garbage: position 0 must not read it
        struct engine_conv1d p = {.channels = RC_CH,
                                  .kernel = RC_K,
                                  .w = w,
                                  .b = b,
                                  .silu = true,
                                  .x_stride = RC_CH,
                                  .y_stride = RC_CH};
        engine_conv1d(be, y, x, RC_T, &p, st, rc_slot, rc_pos1);
        double ref[7 * RC_CH];
        ref_conv(ref, seq1, w, b, 3, 0);
        assert_close(y, ref, 3 * RC_CH, 1e-5);
        ref_conv(ref, seq0, w, b, 4, 0);
        assert_close(y + 3 * RC_CH, ref, 4 * RC_CH, 1e-5);
        // Slot 0 goes on from its state.
        const int32_t sl[3] = {0, 0, 0}, ps[3] = {4, 5, 6};
        engine_conv1d(be, y, seq0 + 4 * RC_CH, 3, &p, st, sl, ps);
        ref_conv(ref, seq0, w, b, 3, 4);
        assert_close(y, ref, 3 * RC_CH, 1e-5);
        engine_buf_free(be, st);
        engine_backend_free(be);
    }
    free(w), free(b), free(seq0), free(seq1);
}

// The gated delta rule with the inputs formed in the op (qwen3next /
// qwen35): q, k L2-normalised, beta = σ(b), g = softplus(a + dt_bias) · A;
// two slots in one ubatch (slot 0 fresh at position 0, slot 1 going on
// from its state), both key-head mappings, 1 and 3 threads, against a
// double-precision reference; then y = a · σ(b).
static void test_delta_net(void **state)
{
    (void)state;
    enum { NK = 2, NV = 4, D = 8, N = 5 };
    const int32_t slot[N] = {0, 0, 0, 1, 1}, pos[N] = {0, 1, 2, 5, 6};
    float *q = rand_vec(N * NK * D), *k = rand_vec(N * NK * D), *v = rand_vec(N * NV * D);
    float *a = rand_vec(N * NV), *b = rand_vec(N * NV), *dt = rand_vec(NV), *A = rand_vec(NV);
    for (int h = 0; h < NV; h++)
        A[h] = -0.5f - 0.5f * fabsf(A[h]);
    float *init = rand_vec(2 * NV * D * D);
    for (int kb = 0; kb < 2; kb++) {
        for (int nt = 1; nt <= 3; nt += 2) {
            struct engine_backend *be = backend(nt);
            float *st = engine_buf_alloc(be, sizeof(float) * 2 * NV * D * D);
            float *o = engine_buf_alloc(be, sizeof(float) * N * NV * D);
            memcpy(st, init, sizeof(float) * 2 * NV * D * D);
            const struct engine_delta_net p = {.n_k_heads = NK,
                                               .n_v_heads = NV,
                                               .dk = D,
                                               .dv = D,
                                               .k_block = kb,
                                               .scale = 1.0f / sqrtf((float)D),
                                               .q_stride = NK * D,
                                               .k_stride = NK * D,
                                               .v_stride = NV * D,
                                               .g_stride = NV,
                                               .beta_stride = NV,
                                               .o_stride = NV * D,
                                               .l2_norm = true,
                                               .l2_eps = 1e-6f,
                                               .beta_sigmoid = true,
                                               .dt_bias = dt,
                                               .A = A};
            engine_delta_net(be, o, q, k, v, a, b, N, &p, st, slot, pos);
            double S[2][NV][D][D], ref_o[N * NV * D], ref_s[2 * NV * D * D];
            for (int sl = 0; sl < 2; sl++)
                for (int h = 0; h < NV; h++)
                    for (int i = 0; i < D; i++)
                        for (int j = 0; j < D; j++)
                            S[sl][h][i][j] = sl == 0 ? 0.0 : init[((sl * NV + h) * D + i) * D + j];
            for (int r = 0; r < N; r++) {
                for (int h = 0; h < NV; h++) {
                    int kh = kb ? h / (NV / NK) : h % NK;
                    const float *qr = q + r * NK * D + kh * D, *kr = k + r * NK * D + kh * D;
                    double qn = 0, kn = 0;
                    for (int j = 0; j < D; j++) {
                        qn += (double)qr[j] * qr[j];
                        kn += (double)kr[j] * kr[j];
                    }
                    qn = 1.0 / sqrt(qn + 1e-6) / sqrt((double)D);
                    kn = 1.0 / sqrt(kn + 1e-6);
                    double x = a[r * NV + h] + dt[h];
                    double decay = exp((x > 20 ? x : log1p(exp(x))) * A[h]);
                    double beta = 1.0 / (1.0 + exp(-b[r * NV + h]));
                    double(*M)[D] = S[slot[r]][h];
                    for (int i = 0; i < D; i++) {
                        double sk = 0;
                        for (int j = 0; j < D; j++) {
                            M[i][j] *= decay;
                            sk += M[i][j] * kr[j] * kn;
                        }
                        double d = beta * (v[r * NV * D + h * D + i] - sk), acc = 0;
                        for (int j = 0; j < D; j++) {
                            M[i][j] += d * kr[j] * kn;
                            acc += M[i][j] * qr[j] * qn;
                        }
                        ref_o[r * NV * D + h * D + i] = acc;
                    }
                }
            }
            memcpy(ref_s, S, sizeof ref_s);
            assert_close(o, ref_o, N * NV * D, 1e-5);
            assert_close(st, ref_s, 2 * NV * D * D, 1e-5);
            engine_buf_free(be, st);
            engine_buf_free(be, o);
            engine_backend_free(be);
        }
    }
    struct engine_backend *be = backend(2);
    float *y = engine_buf_alloc(be, sizeof(float) * N * NV);
    double ref[N * NV];
    engine_sigmoid_mul(be, y, a, b, N * NV);
    for (int i = 0; i < N * NV; i++)
        ref[i] = a[i] / (1.0 + exp(-(double)b[i]));
    assert_close(y, ref, N * NV, 1e-6);
    engine_buf_free(be, y);
    engine_backend_free(be);
    free(q);
    free(k);
    free(v);
    free(a);
    free(b);
    free(dt);
    free(A);
    free(init);
}

// The Mamba-2 scan with its in-op pieces (Δ = softplus(dt + bias), the
// SiLU(z) gate, D) over two slots: slot 1 starts at position 0 (its state
// buffer holds garbage the op must ignore), slot 0 continues from a state.
static void test_ssm_scan(void **state)
{
    (void)state;
    enum { H = 4, P = 8, G = 2, N = 20, R = 7, HP = H * P, GN = G * N, S = H * P * N };
    const int32_t slot[R] = {1, 1, 1, 0, 0, 0, 0}, pos[R] = {0, 1, 2, 5, 6, 7, 8};
    float *x = rand_vec(R * HP), *dt = rand_vec(R * H), *B = rand_vec(R * GN);
    float *C = rand_vec(R * GN), *z = rand_vec(R * HP), *bias = rand_vec(H), *D = rand_vec(H);
    float A[H], st0[2 * S];
    for (int h = 0; h < H; h++)
        A[h] = -1.0f - (float)h;
    for (int i = 0; i < R * H; i++)
        dt[i] *= 3.0f;
    dt[0] = 25.0f;  // past 20: softplus is the identity
    float *init = rand_vec(2 * S);
    for (int nt = 1; nt <= 3; nt++) {
        struct engine_backend *be = backend(nt);
        memcpy(st0, init, sizeof st0);
        float y[R * HP];
        const struct engine_ssm_scan p = {
            .n_heads = H,
            .head_dim = P,
            .n_groups = G,
            .d_state = N,
            .A = A,
            .D = D,
            .x_stride = HP,
            .B_stride = GN,
            .C_stride = GN,
            .dt_stride = H,
            .y_stride = HP,
            .dt_softplus = true,
            .dt_bias = bias,
            .z = z,
            .z_stride = HP,
        };
        engine_ssm_scan(be, y, x, dt, B, C, R, &p, st0, slot, pos);
        // Reference in double.
        double ref_s[2 * S], ref_y[R * HP];
        for (int i = 0; i < 2 * S; i++)
            ref_s[i] = init[i];
        for (int r = 0; r < R; r++) {
            double *sl = ref_s + slot[r] * S;
            if (pos[r] == 0)
                memset(sl, 0, S * sizeof(double));
            for (int h = 0; h < H; h++) {
                double v = (double)dt[r * H + h] + bias[h];
                double d = v > 20.0 ? v : log1p(exp(v)), dA = exp(d * A[h]);
                int g = h / (H / G);
                for (int i = 0; i < P; i++) {
                    double acc = 0, xi = x[r * HP + h * P + i];
                    for (int n = 0; n < N; n++) {
                        double *sv = sl + (h * P + i) * N + n;
                        *sv = *sv * dA + d * xi * B[r * GN + g * N + n];
                        acc += *sv * C[r * GN + g * N + n];
                    }
                    double zz = z[r * HP + h * P + i];
                    ref_y[r * HP + h * P + i] = (acc + D[h] * xi) * zz / (1.0 + exp(-zz));
                }
            }
        }
        assert_close(y, ref_y, R * HP, 1e-4);
        assert_close(st0, ref_s, 2 * S, 1e-4);
        engine_backend_free(be);
    }
    free(x), free(dt), free(B), free(C), free(z), free(bias), free(D), free(init);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_n),
        cmocka_unit_test(test_matmul_ranges),
        cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_norms_and_elementwise),
        cmocka_unit_test(test_altup_rows),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_multi),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_window_ring),
        cmocka_unit_test(test_kv_shift_and_move),
        cmocka_unit_test(test_tensor_view),
        cmocka_unit_test(test_ssm_scan),
        cmocka_unit_test(test_delta_net),
        cmocka_unit_test(test_conv1d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

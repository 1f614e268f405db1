// The CPU backend's recurrent-layer ops (engine.h: struct engine_conv1d,
// engine_delta_net, engine_ssm_scan): a ubatch's rows in order, each slot's
// run of rows from its state. The work splits over independent units
// (channels, heads) across the pool; each unit walks all rows.
#include <math.h>
#include <string.h>

#include "engine/internal.h"
#include "engine/kernels/kernels.h"

// The runs of rows of one slot: [r0, r1).
static int64_t run_end(const int32_t *slot, int64_t r0, int64_t n_rows)
{
    int64_t r1 = r0 + 1;
    while (r1 < n_rows && slot[r1] == slot[r0])
        r1++;
    return r1;
}

struct units_task {
    void (*fn)(void *ctx, int64_t u0, int64_t u1);
    void *ctx;
    int64_t n;
};

static void units_run(void *arg, int ith, int nth)
{
    struct units_task *t = arg;
    int64_t per = (t->n + nth - 1) / nth, u0 = per * ith, u1 = u0 + per < t->n ? u0 + per : t->n;
    if (u0 < u1)
        t->fn(t->ctx, u0, u1);
}

// fn over [0, n) units on the pool (inline when the work is small).
static void par_units(struct engine_pool *pool, int64_t n, int64_t work,
                      void (*fn)(void *ctx, int64_t u0, int64_t u1), void *ctx)
{
    if (n <= 0)
        return;
    if (n == 1 || work < 32768 || engine_pool_n_threads(pool) == 1) {
        fn(ctx, 0, n);
        return;
    }
    struct units_task t = {fn, ctx, n};
    engine_pool_run(pool, units_run, &t);
}

// ---------------------------------------------------------------------------
// Causal depthwise convolution.

struct conv_ctx {
    float *y;
    const float *x;
    int64_t n_rows;
    const struct engine_conv1d *p;
    float *state;
    const int32_t *slot, *pos;
};

static void conv_units(void *arg, int64_t c0, int64_t c1)
{
    const struct conv_ctx *t = arg;
    const struct engine_conv1d *p = t->p;
    const int K = p->kernel;
    const int64_t C = p->channels, per_slot = (int64_t)(K - 1) * C;
    float win[64];  // the last K inputs of one channel (K <= 64, checked by the caller)
    for (int64_t r0 = 0; r0 < t->n_rows;) {
        int64_t r1 = run_end(t->slot, r0, t->n_rows);
        float *st = t->state + (int64_t)t->slot[r0] * per_slot;
        bool fresh = t->pos[r0] == 0;
        for (int64_t c = c0; c < c1; c++) {
            const float *w = p->w + c * K;
            for (int j = 0; j < K - 1; j++)
                win[j] = fresh ? 0.0f : st[(int64_t)j * C + c];
            for (int64_t r = r0; r < r1; r++) {
                win[K - 1] = t->x[r * p->x_stride + c];
                float acc = p->b ? p->b[c] : 0.0f;
                for (int j = 0; j < K; j++)
                    acc += w[j] * win[j];
                if (p->silu)
                    acc = acc / (1.0f + expf(-acc));
                t->y[r * p->y_stride + c] = acc;
                memmove(win, win + 1, (size_t)(K - 1) * sizeof(float));
            }
            for (int j = 0; j < K - 1; j++)
                st[(int64_t)j * C + c] = win[j];
        }
        r0 = r1;
    }
}

void engine_cpu_conv1d(struct engine_pool *pool, float *y, const float *x, int64_t n_rows,
                       const struct engine_conv1d *p, float *state, const int32_t *slot,
                       const int32_t *pos)
{
    struct conv_ctx t = {y, x, n_rows, p, state, slot, pos};
    par_units(pool, p->channels, p->channels * n_rows * p->kernel, conv_units, &t);
}

// ---------------------------------------------------------------------------
// Gated delta rule.

// x *= s, in runs of 8 the compiler turns into vector code.
static void scale_f32(float *x, float s, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            x[j + l] *= s;
    for (; j < n; j++)
        x[j] *= s;
}

struct delta_ctx {
    float *o;
    const float *q, *k, *v, *g, *beta;
    int64_t n_rows;
    const struct engine_delta_net *p;
    float *state;
    const int32_t *slot, *pos;
};

static void delta_units(void *arg, int64_t h0, int64_t h1)
{
    const struct delta_ctx *t = arg;
    const struct engine_delta_net *p = t->p;
    const int dk = p->dk, dv = p->dv;
    const int64_t head = (int64_t)dk * dv, per_slot = (int64_t)p->n_v_heads * head;
    const int group = p->n_v_heads / p->n_k_heads;
    float kv[1024], qs[1024];  // dk <= 1024 (checked by the caller)
    for (int64_t r0 = 0; r0 < t->n_rows;) {
        int64_t r1 = run_end(t->slot, r0, t->n_rows);
        for (int64_t h = h0; h < h1; h++) {
            float *S = t->state + (int64_t)t->slot[r0] * per_slot + h * head;
            if (t->pos[r0] == 0)
                memset(S, 0, (size_t)head * sizeof(float));
            int kh = p->k_block ? (int)(h / group) : (int)(h % p->n_k_heads);
            for (int64_t r = r0; r < r1; r++) {
                const float *k = t->k + r * p->k_stride + (int64_t)kh * dk;
                const float *q = t->q + r * p->q_stride + (int64_t)kh * dk;
                const float *v = t->v + r * p->v_stride + h * dv;
                float g = t->g[r * p->g_stride + h];
                if (p->A) {
                    float a = g + (p->dt_bias ? p->dt_bias[h] : 0.0f);
                    g = (a > 20.0f ? a : logf(1.0f + expf(a))) * p->A[h];
                }
                float decay = expf(g);
                float beta = t->beta[r * p->beta_stride + h];
                if (p->beta_sigmoid)
                    beta = 1.0f / (1.0f + expf(-beta));
                float *o = t->o + r * p->o_stride + h * dv;
                float kn = 1.0f, qn = p->scale;
                if (p->l2_norm) {
                    double sk = 0.0, sq = 0.0;
                    for (int j = 0; j < dk; j++) {
                        sk += (double)k[j] * k[j];
                        sq += (double)q[j] * q[j];
                    }
                    kn = (float)(1.0 / sqrt(sk + p->l2_eps));
                    qn *= (float)(1.0 / sqrt(sq + p->l2_eps));
                }
                for (int j = 0; j < dk; j++) {
                    kv[j] = k[j] * kn;
                    qs[j] = q[j] * qn;
                }
                scale_f32(S, decay, head);
                for (int i = 0; i < dv; i++) {  // the SIMD dot and axpy kernels
                    float *row = S + (int64_t)i * dk;
                    float d = beta * (v[i] - kernels_dot_f32(row, kv, dk));
                    kernels_axpy_f32(row, d, kv, dk);
                    o[i] = kernels_dot_f32(row, qs, dk);
                }
            }
        }
        r0 = r1;
    }
}

void engine_cpu_delta_net(struct engine_pool *pool, float *o, const float *q, const float *k,
                          const float *v, const float *g, const float *beta, int64_t n_rows,
                          const struct engine_delta_net *p, float *state, const int32_t *slot,
                          const int32_t *pos)
{
    struct delta_ctx t = {o, q, k, v, g, beta, n_rows, p, state, slot, pos};
    par_units(pool, p->n_v_heads, (int64_t)p->dk * p->dv * 4 * n_rows, delta_units, &t);
}

// ---------------------------------------------------------------------------
// Mamba-2 selective scan.

struct scan_ctx {
    float *y;
    const float *x, *dt, *B, *C, *z;
    int64_t n_rows;
    const struct engine_ssm_scan *p;
    float *state;
    const int32_t *slot, *pos;
};

static void scan_units(void *arg, int64_t h0, int64_t h1)
{
    const struct scan_ctx *t = arg;
    const struct engine_ssm_scan *p = t->p;
    const int P = p->head_dim, N = p->d_state;
    const int64_t head = (int64_t)P * N, per_slot = (int64_t)p->n_heads * head;
    const int per_group = p->n_heads / p->n_groups;
    for (int64_t r0 = 0; r0 < t->n_rows;) {
        int64_t r1 = run_end(t->slot, r0, t->n_rows);
        for (int64_t h = h0; h < h1; h++) {
            float *s = t->state + (int64_t)t->slot[r0] * per_slot + h * head;
            if (t->pos[r0] == 0)
                memset(s, 0, (size_t)head * sizeof(float));
            const int64_t g = h / per_group;
            const float A = p->A[h], D = p->D ? p->D[h] : 0.0f;
            for (int64_t r = r0; r < r1; r++) {
                float dt = t->dt[r * p->dt_stride + h];
                if (p->dt_softplus) {
                    dt += p->dt_bias ? p->dt_bias[h] : 0.0f;
                    dt = dt > 20.0f ? dt : logf(1.0f + expf(dt));
                }
                const float dA = expf(dt * A);
                const float *x = t->x + r * p->x_stride + h * P;
                const float *B = t->B + r * p->B_stride + g * N;
                const float *C = t->C + r * p->C_stride + g * N;
                float *y = t->y + r * p->y_stride + h * P;
                for (int i = 0; i < P; i++)
                    y[i] = kernels_ssm_step(s + (int64_t)i * N, B, C, dA, dt * x[i], N) + D * x[i];
                if (t->z) {
                    const float *z = t->z + r * p->z_stride + h * P;
                    for (int i = 0; i < P; i++)
                        y[i] *= z[i] / (1.0f + expf(-z[i]));
                }
            }
        }
        r0 = r1;
    }
}

void engine_cpu_ssm_scan(struct engine_pool *pool, float *y, const float *x, const float *dt,
                         const float *B, const float *C, int64_t n_rows,
                         const struct engine_ssm_scan *p, float *state, const int32_t *slot,
                         const int32_t *pos)
{
    struct scan_ctx t = {y, x, dt, B, C, p->z, n_rows, p, state, slot, pos};
    par_units(pool, p->n_heads, (int64_t)p->head_dim * p->d_state * 3 * n_rows, scan_units, &t);
}

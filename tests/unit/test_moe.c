// engine mixture-of-experts: routing (softmax / sigmoid / gpt-oss softmax
// over the chosen, ties, renormalisation, selection bias, scale), the
// clamped SwiGLU of gpt-oss, expert views over 3-D GGUF tensors, and the CPU
// op (grouped by expert, threaded) against a per-token scalar reference for
// float and quantized experts, biases, fused gate+up, ungated experts and a
// shared expert.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

// ---------------------------------------------------------------------------
// Routing.

static void route(const struct engine_moe *p, const float *logits, int32_t *ids, float *w)
{
    float probs[64];
    engine_moe_route(p, logits, probs, ids, w);
}

static void test_route_softmax_renormalised(void **state)
{
    (void)state;
    // qwen3moe: softmax over all experts, top-2, weights renormalised.
    struct engine_moe p = {.n_expert = 4, .n_expert_used = 2, .norm_w = true};
    const float logits[4] = {0.5f, 2.0f, -1.0f, 1.0f};
    int32_t ids[2];
    float w[2];
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    // Renormalised softmax of the two chosen = softmax over their logits.
    double e1 = exp(2.0), e3 = exp(1.0);
    assert_true(fabs(w[0] - e1 / (e1 + e3)) < 1e-6);
    assert_true(fabs(w[1] - e3 / (e1 + e3)) < 1e-6);
    assert_true(fabs(w[0] + w[1] - 1.0) < 1e-6);

    // Without renormalisation (mixtral-style weights): the plain softmax.
    p.norm_w = false;
    route(&p, logits, ids, w);
    double z = exp(0.5) + exp(2.0) + exp(-1.0) + exp(1.0);
    assert_true(fabs(w[0] - exp(2.0) / z) < 1e-6);
    assert_true(fabs(w[1] - exp(1.0) / z) < 1e-6);
}

static void test_route_ties(void **state)
{
    (void)state;
    // Equal scores: the lower expert id ranks first (ggml's argsort order
    // for up to 16 experts), however the ties are placed.
    struct engine_moe p = {.n_expert = 6, .n_expert_used = 3, .norm_w = true};
    const float logits[6] = {0.0f, 3.0f, 1.0f, 3.0f, 3.0f, 1.0f};
    int32_t ids[3];
    float w[3];
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 4);
    assert_true(fabs(w[0] - 1.0 / 3) < 1e-6 && fabs(w[2] - 1.0 / 3) < 1e-6);

    const float all_equal[6] = {0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
    route(&p, all_equal, ids, w);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 2);

    // A tie at the edge of the top-k: the earlier of the tied pair gets in.
    const float edge[6] = {5.0f, 1.0f, 2.0f, 4.0f, 2.0f, 0.0f};
    route(&p, edge, ids, w);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 2);
}

static void test_route_softmax_weight(void **state)
{
    (void)state;
    // gpt-oss: choose by raw logit, weights = softmax over the chosen logits.
    struct engine_moe p = {.n_expert = 5, .n_expert_used = 2, .gating = ENGINE_MOE_SOFTMAX_WEIGHT};
    const float logits[5] = {-2.0f, 0.75f, 4.0f, 0.5f, 3.0f};
    int32_t ids[2];
    float w[2];
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 4);
    double a = exp(4.0 - 4.0), b = exp(3.0 - 4.0);
    assert_true(fabs(w[0] - a / (a + b)) < 1e-6);
    assert_true(fabs(w[1] - b / (a + b)) < 1e-6);
}

static void test_route_sigmoid_bias_scale(void **state)
{
    (void)state;
    // deepseek v3: sigmoid, the selection bias changes the choice but not the
    // weights, renormalised and scaled.
    const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};
    struct engine_moe p = {.n_expert = 4,
                           .n_expert_used = 2,
                           .gating = ENGINE_MOE_SIGMOID,
                           .norm_w = true,
                           .w_scale = 2.5f,
                           .sel_bias = bias};
    const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
    int32_t ids[2];
    float w[2];
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 3);  // sigmoid(-1) + 1 = 1.27
    assert_int_equal(ids[1], 0);  // sigmoid(2) = 0.88 beats sigmoid(1) = 0.73
    double s0 = 1 / (1 + exp(-2.0)), s3 = 1 / (1 + exp(1.0));
    assert_true(fabs(w[0] - 2.5 * s3 / (s0 + s3)) < 1e-5);  // unbiased probabilities
    assert_true(fabs(w[1] - 2.5 * s0 / (s0 + s3)) < 1e-5);

    // A sum below the f16 floor is clamped, not divided through.
    p.sel_bias = NULL;
    p.w_scale = 0;
    const float tiny[4] = {-20.0f, -30.0f, -40.0f, -50.0f};
    route(&p, tiny, ids, w);
    double t0 = 1 / (1 + exp(20.0));
    assert_true(fabs(w[0] - t0 / 6.103515625e-5) < 1e-6);
}

static void test_route_groups(void **state)
{
    (void)state;
    // deepseek v3's group-limited choice: 4 groups of 2, the 2 groups with
    // the largest sums of their best two take part. Group 0 holds the best
    // expert (sigmoid(3) = 0.95) but sums 1.0; groups 2 (0.88 + 0.62) and
    // 1 (0.73 + 0.73) win, and the choice is made among their experts.
    struct engine_moe p = {.n_expert = 8,
                           .n_expert_used = 2,
                           .gating = ENGINE_MOE_SIGMOID,
                           .n_group = 4,
                           .n_group_used = 2};
    const float logits[8] = {3.0f, -3.0f, 1.0f, 1.0f, 2.0f, 0.5f, -1.0f, -1.0f};
    int32_t ids[2];
    float w[2];
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 2);  // ties to the lower id
    assert_true(fabs(w[0] - 1 / (1 + exp(-2.0))) < 1e-6);
    assert_true(fabs(w[1] - 1 / (1 + exp(-1.0))) < 1e-6);
    // The selection bias counts in the group scores: +1 on expert 1 makes
    // group 0 (0.95 + 1.05) the best.
    const float bias[8] = {0, 1.0f, 0, 0, 0, 0, 0, 0};
    p.sel_bias = bias;
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 1);  // 0.05 + 1
    assert_int_equal(ids[1], 0);
    // Without groups the best two overall.
    p.sel_bias = NULL;
    p.n_group = 0;
    route(&p, logits, ids, w);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 4);
}

static void test_swiglu_oai(void **state)
{
    (void)state;
    struct engine_moe p = {.act = ENGINE_MOE_SWIGLU_OAI, .oai_alpha = 1.702f, .oai_limit = 7.0f};
    const float cases[][2] = {{0.5f, 0.25f}, {-3.0f, 2.0f}, {10.0f, -9.0f}, {8.0f, 12.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double g = fmin(cases[i][0], 7.0), u = fmax(-7.0, fmin(cases[i][1], 7.0));
        double want = g / (1 + exp(-1.702 * g)) * (u + 1);
        float got = engine_moe_act_gated(&p, cases[i][0], cases[i][1]);
        assert_true(fabs(got - want) < 1e-5 * (1 + fabs(want)));
    }
    // The gate is clamped from above only: a very negative gate stays.
    assert_true(engine_moe_act_gated(&p, -20.0f, 1.0f) < 0);
}

// ---------------------------------------------------------------------------
// Expert views.

static void test_expert_view(void **state)
{
    (void)state;
    static float data[3 * 4 * 8];
    for (int i = 0; i < 3 * 4 * 8; i++)
        data[i] = (float)i;
    struct gguf_tensor gt = {.name = {"blk.0.ffn_up_exps.weight", 24},
                             .type = GGUF_TYPE_F32,
                             .n_dims = 3,
                             .ne = {8, 4, 3, 1},
                             .n_bytes = sizeof data,
                             .data = data};
    struct engine_experts x;
    struct err e = {0};
    assert_int_equal(engine_experts_from_gguf(&x, &gt, &e), 0);
    assert_int_equal(x.n_expert, 3);
    assert_int_equal(x.rows, 4);
    struct engine_tensor v = engine_expert_view(&x, 2, 1, 2);
    assert_int_equal(v.ne[0], 8);
    assert_int_equal(v.ne[1], 2);
    assert_true(((const float *)v.data)[0] == (float)(2 * 32 + 8));

    gt.n_dims = 2;
    assert_int_equal(engine_experts_from_gguf(&x, &gt, &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, "3 dimensions"));
}

// ---------------------------------------------------------------------------
// The op against a per-token reference.

static uint64_t rng_state = 88172645463325252ull;

static float frand(void)  // uniform in [-1, 1)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

// A weight of n_mat matrices [rows, cols] of `type`, random values of
// standard deviation ~scale, quantized with the type's row quantizer.
static void *make_weight(uint32_t type, int64_t n_mat, int64_t rows, int64_t cols, float scale,
                         size_t *row_bytes)
{
    *row_bytes = quant_row_size(type, cols);
    uint8_t *buf = malloc(*row_bytes * (size_t)(n_mat * rows));
    float *row = malloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < n_mat * rows; r++) {
        for (int64_t i = 0; i < cols; i++)
            row[i] = frand() * scale;
        if (type == GGUF_TYPE_F32)
            memcpy(buf + (size_t)r * *row_bytes, row, (size_t)cols * sizeof(float));
        else
            quant_traits_get(type)->from_float_ref(row, buf + (size_t)r * *row_bytes, cols);
    }
    free(row);
    return buf;
}

static struct engine_experts experts_of(uint32_t type, void *data, size_t rb, int64_t n_expert,
                                        int64_t rows, int64_t cols)
{
    struct engine_experts x = {.n_expert = n_expert, .rows = rows};
    x.all = (struct engine_tensor){
        .type = type, .ne = {cols, n_expert * rows}, .row_bytes = rb, .data = data};
    return x;
}

// y = W x for one token, with the activation converted as the op does.
static void ref_matvec(const struct engine_tensor *w, const float *x, float *y)
{
    const struct kernels_type *kt = kernels_get(w->type);
    size_t rb = kt->vec_dot_type == GGUF_TYPE_F32 ? (size_t)w->ne[0] * 4
                                                  : kernels_row_size(kt->vec_dot_type, w->ne[0]);
    uint8_t *xq = malloc(rb);
    if (kt->vec_dot_type == GGUF_TYPE_F32)
        memcpy(xq, x, rb);
    else
        kt->from_float(x, xq, w->ne[0]);
    for (int64_t r = 0; r < w->ne[1]; r++)
        kt->vec_dot(w->ne[0], &y[r], (const uint8_t *)w->data + (size_t)r * w->row_bytes, xq);
    free(xq);
}

// One expert's FFN on one token (reference).
static void ref_expert(const struct engine_moe *p, const struct engine_tensor *gate,
                       const struct engine_tensor *up, const struct engine_tensor *down,
                       const float *gb, const float *ub, const float *db, const float *x,
                       float *out)
{
    int64_t n_ff = up->ne[1];
    float *g = calloc((size_t)n_ff, sizeof(float)), *u = calloc((size_t)n_ff, sizeof(float));
    ref_matvec(up, x, u);
    if (gate)
        ref_matvec(gate, x, g);
    for (int64_t i = 0; i < n_ff; i++) {
        float uu = u[i] + (ub ? ub[i] : 0);
        if (gate) {
            g[i] = engine_moe_act_gated(p, g[i] + (gb ? gb[i] : 0), uu);
        } else if (p->act == ENGINE_MOE_RELU_SQR) {
            g[i] = uu > 0 ? uu * uu : 0;
        } else {
            g[i] = engine_silu(uu);
        }
    }
    ref_matvec(down, g, out);
    if (db)
        for (int64_t i = 0; i < down->ne[1]; i++)
            out[i] += db[i];
    free(g);
    free(u);
}

static void ref_moe(const struct engine_moe *p, const float *x, int64_t n_rows, float *y)
{
    int64_t n_embd = p->gate_inp->ne[0];
    int k = p->n_expert_used;
    float *logits = malloc((size_t)p->n_expert * sizeof(float));
    float *probs = malloc((size_t)p->n_expert * sizeof(float));
    float *d = malloc((size_t)n_embd * sizeof(float));
    float *xs = malloc((size_t)n_embd * sizeof(float));
    int32_t ids[16];
    float w[16];
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * n_embd;
        float *yr = y + r * n_embd;
        ref_matvec(p->gate_inp, xr, logits);
        if (p->gate_inp_b)
            for (int i = 0; i < p->n_expert; i++)
                logits[i] += p->gate_inp_b[i];
        engine_moe_route(p, logits, probs, ids, w);
        for (int j = 0; j < k; j++) {
            int ie = ids[j];
            struct engine_tensor g, u, dn = engine_expert_view(p->down, ie, 0, p->down->rows);
            int64_t n_ff;
            if (p->fused_gate_up) {
                n_ff = p->up->rows / 2;
                g = engine_expert_view(p->up, ie, 0, n_ff);
                u = engine_expert_view(p->up, ie, n_ff, n_ff);
            } else {
                n_ff = p->up->rows;
                u = engine_expert_view(p->up, ie, 0, n_ff);
                if (p->gate)
                    g = engine_expert_view(p->gate, ie, 0, n_ff);
            }
            bool gated = p->gate || p->fused_gate_up;
            // Llama 4 (w_input): the weight scales the input, the outputs add up.
            for (int64_t i = 0; i < n_embd; i++)
                xs[i] = p->w_input ? xr[i] * w[j] : xr[i];
            float wj = p->w_input ? 1.0f : w[j];
            ref_expert(p, gated ? &g : NULL, &u, &dn, p->gate_b ? p->gate_b + ie * n_ff : NULL,
                       p->up_b ? p->up_b + ie * n_ff : NULL,
                       p->down_b ? p->down_b + ie * n_embd : NULL, xs, d);
            for (int64_t i = 0; i < n_embd; i++)
                yr[i] = j == 0 ? d[i] * wj : yr[i] + d[i] * wj;
        }
        if (p->sh_up) {
            ref_expert(p, p->sh_gate, p->sh_up, p->sh_down, NULL, NULL, NULL, xr, d);
            float s = 1.0f;
            if (p->sh_gate_inp) {  // qwen3next / qwen35moe: σ(gate · x)
                double dot = 0.0;
                for (int64_t i = 0; i < n_embd; i++)
                    dot += (double)p->sh_gate_inp[i] * xr[i];
                s = (float)(1.0 / (1.0 + exp(-dot)));
            }
            for (int64_t i = 0; i < n_embd; i++)
                yr[i] += d[i] * s;
        }
    }
    free(logits);
    free(probs);
    free(d);
    free(xs);
}

struct moe_case {
    const char *name;
    uint32_t type;  // expert weight type
    int n_embd, n_ff, n_expert, k;
    enum engine_moe_gating gating;
    enum engine_moe_act act;
    bool gated, fused, biases, shared, norm_w;
    bool shared_gated;  // the shared expert scaled by σ(sh_gate_inp · x)
    bool interleaved;   // experts rewritten into the kernels' groups of 8 rows (where the
                        // type has the layout at this ISA)
    bool w_input;       // llama4: the weight scales the expert's input
};

static int n_interleaved_cases;

static void run_case(const struct moe_case *c)
{
    const int n_embd = c->n_embd, n_ff = c->n_ff, E = c->n_expert;
    size_t rb_r, rb_g, rb_u, rb_d, rb_s1, rb_s2, rb_s3;
    void *router = make_weight(GGUF_TYPE_F32, 1, E, n_embd, 0.5f, &rb_r);
    int up_rows = c->fused ? 2 * n_ff : n_ff;
    void *gate = c->gated && !c->fused ? make_weight(c->type, E, n_ff, n_embd, 0.3f, &rb_g) : NULL;
    void *up = make_weight(c->type, E, up_rows, n_embd, 0.3f, &rb_u);
    void *down = make_weight(c->type, E, n_embd, n_ff, 0.3f, &rb_d);
    struct engine_tensor t_router = {
        .type = GGUF_TYPE_F32, .ne = {n_embd, E}, .row_bytes = rb_r, .data = router};
    struct engine_experts x_gate =
        gate ? experts_of(c->type, gate, rb_g, E, n_ff, n_embd) : (struct engine_experts){0};
    struct engine_experts x_up = experts_of(c->type, up, rb_u, E, up_rows, n_embd);
    struct engine_experts x_down = experts_of(c->type, down, rb_d, E, n_embd, n_ff);
    float *gb = NULL, *ub = NULL, *db = NULL, *rbias = NULL;
    if (c->biases) {
        gb = malloc((size_t)E * n_ff * sizeof(float));
        ub = malloc((size_t)E * n_ff * sizeof(float));
        db = malloc((size_t)E * n_embd * sizeof(float));
        rbias = malloc((size_t)E * sizeof(float));
        for (int i = 0; i < E * n_ff; i++) {
            gb[i] = frand() * 0.1f;
            ub[i] = frand() * 0.1f;
        }
        for (int i = 0; i < E * n_embd; i++)
            db[i] = frand() * 0.1f;
        for (int i = 0; i < E; i++)
            rbias[i] = frand() * 0.1f;
    }
    void *sh1 = NULL, *sh2 = NULL, *sh3 = NULL;
    float *sh_gate_inp = NULL;
    if (c->shared_gated) {
        sh_gate_inp = malloc((size_t)n_embd * sizeof(float));
        for (int i = 0; i < n_embd; i++)
            sh_gate_inp[i] = frand() * 0.5f;
    }
    struct engine_tensor t_sh_gate, t_sh_up, t_sh_down;
    if (c->shared) {
        int n_sh = 2 * n_ff;  // a wider shared expert than the routed ones
        sh1 = make_weight(c->type, 1, n_sh, n_embd, 0.3f, &rb_s1);
        sh2 = make_weight(c->type, 1, n_sh, n_embd, 0.3f, &rb_s2);
        sh3 = make_weight(c->type, 1, n_embd, n_sh, 0.3f, &rb_s3);
        t_sh_gate = (struct engine_tensor){
            .type = c->type, .ne = {n_embd, n_sh}, .row_bytes = rb_s1, .data = sh1};
        t_sh_up = (struct engine_tensor){
            .type = c->type, .ne = {n_embd, n_sh}, .row_bytes = rb_s2, .data = sh2};
        t_sh_down = (struct engine_tensor){
            .type = c->type, .ne = {n_sh, n_embd}, .row_bytes = rb_s3, .data = sh3};
    }
    struct engine_moe p = {
        .n_expert = E,
        .n_expert_used = c->k,
        .gating = c->gating,
        .norm_w = c->norm_w,
        .act = c->act,
        .oai_alpha = 1.702f,
        .oai_limit = 7.0f,
        .gate_inp = &t_router,
        .gate_inp_b = rbias,
        .gate = gate ? &x_gate : NULL,
        .up = &x_up,
        .down = &x_down,
        .fused_gate_up = c->fused,
        .gate_b = gb,
        .up_b = ub,
        .down_b = db,
        .sh_gate = c->shared && c->gated ? &t_sh_gate : NULL,
        .sh_up = c->shared ? &t_sh_up : NULL,
        .sh_down = c->shared ? &t_sh_down : NULL,
        .sh_gate_inp = sh_gate_inp,
        .w_input = c->w_input,
    };
    // The reference reads the plain experts; the op, when asked, the
    // interleaved copies.
    struct engine_moe p_ref = p;
    struct engine_experts xi[3] = {x_gate, x_up, x_down};
    void *owned[3] = {NULL, NULL, NULL};
    if (c->interleaved && engine_experts_interleavable(&xi[1])) {
        struct err ie = {0};
        for (int i = gate ? 0 : 1; i < 3; i++) {
            assert_true(engine_experts_interleavable(&xi[i]));
            assert_int_equal(engine_tensor_interleave(&xi[i].all, false, &owned[i], &ie), 1);
        }
        p.gate = gate ? &xi[0] : NULL;
        p.up = &xi[1];
        p.down = &xi[2];
        n_interleaved_cases++;
    }
    const int row_counts[] = {1, 3, 37};
    const int threads[] = {1, 2, 3};
    int max_rows = 37;
    float *x = malloc((size_t)max_rows * n_embd * sizeof(float));
    float *want = malloc((size_t)max_rows * n_embd * sizeof(float));
    for (int i = 0; i < max_rows * n_embd; i++)
        x[i] = frand();
    // Float experts: the product order differs (tiles vs dot), so a small
    // relative tolerance; quantized: the same integer dots, float sums.
    float tol = 2e-4f;
    for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
        struct engine_backend *be = NULL;
        struct err e = {0};
        assert_int_equal(engine_cpu_new(&be, threads[ti], &e), 0);
        assert_int_equal(engine_moe_reserve(be, max_rows, &p, &e), 0);
        float *y = engine_buf_alloc(be, (size_t)max_rows * n_embd * sizeof(float));
        for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++) {
            int n = row_counts[ri];
            ref_moe(&p_ref, x, n, want);
            engine_moe(be, y, x, n, &p);
            for (int i = 0; i < n * n_embd; i++) {
                if (!(fabsf(y[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
                    fail_msg("%s, %d threads, %d rows: y[%d] = %g, reference %g", c->name,
                             threads[ti], n, i, (double)y[i], (double)want[i]);
            }
            // In place (y = x), as the decoder block calls it.
            memcpy(y, x, (size_t)n * n_embd * sizeof(float));
            engine_moe(be, y, y, n, &p);
            for (int i = 0; i < n * n_embd; i++)
                if (!(fabsf(y[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
                    fail_msg("%s in place, %d threads, %d rows: y[%d] = %g, reference %g", c->name,
                             threads[ti], n, i, (double)y[i], (double)want[i]);
        }
        engine_buf_free(be, y);
        engine_backend_free(be);
    }
    free(x);
    free(want);
    free(router);
    free(gate);
    free(up);
    free(down);
    free(gb);
    free(ub);
    free(db);
    free(rbias);
    free(sh1);
    free(sh2);
    free(sh3);
    free(sh_gate_inp);
    for (int i = 0; i < 3; i++)
        free(owned[i]);
}

static void test_moe_op_matches_reference(void **state)
{
    (void)state;
    const struct moe_case cases[] = {
        {"qwen3moe f32", GGUF_TYPE_F32, 64, 32, 8, 2, ENGINE_MOE_SOFTMAX, ENGINE_MOE_SILU, true,
         false, false, false, true},
        {"gpt-oss f32", GGUF_TYPE_F32, 64, 64, 8, 2, ENGINE_MOE_SOFTMAX_WEIGHT,
         ENGINE_MOE_SWIGLU_OAI, true, false, true, false, false},
        {"q8_0 wide", GGUF_TYPE_Q8_0, 256, 128, 16, 4, ENGINE_MOE_SOFTMAX, ENGINE_MOE_SILU, true,
         false, false, false, true},
        {"q4_0 fused", GGUF_TYPE_Q4_0, 128, 64, 8, 3, ENGINE_MOE_SOFTMAX, ENGINE_MOE_SILU, true,
         true, false, false, true},
        {"q4_k shared sigmoid", GGUF_TYPE_Q4_K, 256, 256, 8, 2, ENGINE_MOE_SIGMOID, ENGINE_MOE_SILU,
         true, false, false, true, true},
        {"relu^2 ungated shared", GGUF_TYPE_F32, 64, 48, 4, 2, ENGINE_MOE_SIGMOID,
         ENGINE_MOE_RELU_SQR, false, false, true, true, true},
        {"qwen35moe gated shared", GGUF_TYPE_Q8_0, 64, 32, 8, 2, ENGINE_MOE_SOFTMAX,
         ENGINE_MOE_SILU, true, false, false, true, true, true},
        // Interleaved experts (decode multiplies 8 rows a pass).
        {"q8_0 interleaved", GGUF_TYPE_Q8_0, 256, 128, 16, 4, ENGINE_MOE_SOFTMAX, ENGINE_MOE_SILU,
         true, false, false, false, true, false, true},
        {"q4_0 fused interleaved", GGUF_TYPE_Q4_0, 128, 64, 8, 3, ENGINE_MOE_SOFTMAX,
         ENGINE_MOE_SILU, true, true, false, false, true, false, true},
        {"q4_k shared interleaved", GGUF_TYPE_Q4_K, 256, 256, 8, 2, ENGINE_MOE_SIGMOID,
         ENGINE_MOE_SILU, true, false, false, true, true, false, true},
        {"q5_0 interleaved", GGUF_TYPE_Q5_0, 64, 96, 8, 2, ENGINE_MOE_SOFTMAX, ENGINE_MOE_SILU,
         true, false, false, false, true, false, true},
        // Llama 4: σ of the chosen logit scales the expert's input (F32 and
        // a quantized input row), plus a shared expert.
        {"llama4 f32", GGUF_TYPE_F32, 64, 32, 4, 1, ENGINE_MOE_SIGMOID, ENGINE_MOE_SILU, true,
         false, false, true, false, false, false, true},
        {"llama4 q8_0 top-2", GGUF_TYPE_Q8_0, 64, 32, 8, 2, ENGINE_MOE_SIGMOID, ENGINE_MOE_SILU,
         true, false, false, true, false, false, false, true},
    };
    n_interleaved_cases = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    // Where Q8_0 has the layout (x86 SIMD), Q4_0 and Q5_0 have it too.
    const struct engine_tensor q8 = {.type = GGUF_TYPE_Q8_0, .ne = {256, 8}};
    if (engine_tensor_interleavable(&q8))
        assert_true(n_interleaved_cases >= 3);
}

// Decode reads only the chosen experts: the others hold NaN, and the
// router bias makes sure they are never chosen.
static void test_moe_reads_only_chosen(void **state)
{
    (void)state;
    enum { D = 64, F = 64, E = 8, K = 2 };
    size_t rb;
    float *router = make_weight(GGUF_TYPE_F32, 1, E, D, 0.1f, &rb);
    float *gate = make_weight(GGUF_TYPE_F32, E, F, D, 0.3f, &rb);
    float *up = make_weight(GGUF_TYPE_F32, E, F, D, 0.3f, &rb);
    float *down = make_weight(GGUF_TYPE_F32, E, D, F, 0.3f, &rb);
    float bias[E] = {0};
    bias[2] = bias[5] = 100.0f;
    for (int ie = 0; ie < E; ie++) {
        if (ie == 2 || ie == 5)
            continue;
        for (int i = 0; i < F * D; i++) {
            gate[(size_t)ie * F * D + i] = NAN;
            up[(size_t)ie * F * D + i] = NAN;
            down[(size_t)ie * D * F + i] = NAN;
        }
    }
    struct engine_tensor t_router = {
        .type = GGUF_TYPE_F32, .ne = {D, E}, .row_bytes = D * 4, .data = router};
    struct engine_experts xg = experts_of(GGUF_TYPE_F32, gate, D * 4, E, F, D);
    struct engine_experts xu = experts_of(GGUF_TYPE_F32, up, D * 4, E, F, D);
    struct engine_experts xd = experts_of(GGUF_TYPE_F32, down, F * 4, E, D, F);
    struct engine_moe p = {.n_expert = E,
                           .n_expert_used = K,
                           .norm_w = true,
                           .gate_inp = &t_router,
                           .gate_inp_b = bias,
                           .gate = &xg,
                           .up = &xu,
                           .down = &xd};
    struct engine_backend *be = NULL;
    struct err e = {0};
    assert_int_equal(engine_cpu_new(&be, 2, &e), 0);
    float x[4 * D], y[4 * D];
    for (int i = 0; i < 4 * D; i++)
        x[i] = frand();
    engine_moe(be, y, x, 4, &p);
    for (int i = 0; i < 4 * D; i++)
        assert_true(isfinite(y[i]));
    engine_backend_free(be);
    free(router);
    free(gate);
    free(up);
    free(down);
}

// ---------------------------------------------------------------------------
// Attention sinks (gpt-oss): a per-head logit that joins the softmax
// denominator without a value row.

static void test_attention_sinks(void **state)
{
    (void)state;
    enum { H = 2, HD = 32, N = 3 };
    struct engine_backend *be = NULL;
    struct err e = {0};
    assert_int_equal(engine_cpu_new(&be, 1, &e), 0);
    assert_int_equal(engine_reserve(be, 4, 256, 16, &e), 0);
    size_t rb = engine_kv_row_bytes(GGUF_TYPE_F32, H * HD);
    struct engine_kv_layer kv = {engine_buf_alloc(be, rb * N), engine_buf_alloc(be, rb * N), rb};
    float k[N * H * HD], v[N * H * HD], q[H * HD], out[H * HD];
    for (int i = 0; i < N * H * HD; i++) {
        k[i] = frand();
        v[i] = frand();
    }
    for (int i = 0; i < H * HD; i++)
        q[i] = frand();
    const int32_t cells[N] = {0, 1, 2}, cell0 = 0, nvis = N;
    engine_kv_store(be, &kv, GGUF_TYPE_F32, cells, k, v, N, H * HD);
    const float sinks[H] = {0.7f, 25.0f};  // head 1's sink dwarfs every score
    struct engine_attn a = {.n_head = H,
                            .n_head_kv = H,
                            .head_dim = HD,
                            .scale = 0.125f,
                            .kv_type = GGUF_TYPE_F32,
                            .sinks = sinks};
    engine_attention(be, out, q, 1, &kv, &cell0, &nvis, &a);
    for (int h = 0; h < H; h++) {
        double s[N], max = sinks[h], sum = 0;
        for (int j = 0; j < N; j++) {
            s[j] = 0;
            for (int i = 0; i < HD; i++)
                s[j] += (double)q[h * HD + i] * k[(j * H + h) * HD + i];
            s[j] *= 0.125;
            if (s[j] > max)
                max = s[j];
        }
        for (int j = 0; j < N; j++)
            sum += exp(s[j] - max);
        sum += exp(sinks[h] - max);
        for (int i = 0; i < HD; i++) {
            double o = 0;
            for (int j = 0; j < N; j++)
                o += exp(s[j] - max) / sum * v[(j * H + h) * HD + i];
            assert_true(fabs(out[h * HD + i] - o) < 1e-5);
        }
    }
    // The big sink leaves almost nothing for the values.
    for (int i = 0; i < HD; i++)
        assert_true(fabsf(out[HD + i]) < 1e-6f);
    engine_buf_free(be, kv.k);
    engine_buf_free(be, kv.v);
    engine_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_softmax_renormalised),
        cmocka_unit_test(test_route_ties),
        cmocka_unit_test(test_route_softmax_weight),
        cmocka_unit_test(test_route_sigmoid_bias_scale),
        cmocka_unit_test(test_route_groups),
        cmocka_unit_test(test_swiglu_oai),
        cmocka_unit_test(test_expert_view),
        cmocka_unit_test(test_moe_op_matches_reference),
        cmocka_unit_test(test_moe_reads_only_chosen),
        cmocka_unit_test(test_attention_sinks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

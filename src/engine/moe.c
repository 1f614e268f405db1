// Mixture-of-experts FFN (llama.cpp's build_moe_ffn) for the CPU backend:
// expert views over 3-D GGUF tensors, the routing reference, and the op.
//
// The op runs as one pool task in phases separated by barriers:
//   1. router logits for every token (rows of gate_inp split over threads);
//   2. routing on thread 0: top-k per token, weights, and the batch's
//      (token, expert) pairs grouped by expert, so each expert's matrices
//      are read once per batch however many tokens chose it;
//   3. each pair's input row converted to the experts' vec_dot_type;
//   4. gate and up products + activation: work items are (expert, chunk of
//      n_ff rows) handed out through an atomic counter, so a decode token's
//      k experts run in parallel on all threads;
//   5. the hidden rows converted for the down matrices;
//   6. down products, items (expert, chunk of n_embd rows);
//   7. per token, the weighted sum over its experts in rank order.
// Decode touches only the chosen experts' rows (the mapping pages in what
// it reads); nothing is copied.
#include "engine/internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

#define MOE_ALIGN 64
// Below this many multiply-adds the op runs on the caller thread.
#define MOE_INLINE_WORK (256 * 1024)
// Activation rows per product call: they stay in L1 while weight rows stream.
#define MOE_COL_BLOCK 16

int engine_experts_from_gguf(struct engine_experts *x, const struct gguf_tensor *gt, struct err *e)
{
    if (gt->n_dims != 3)
        return err_set(e, ERR_FORMAT, "tensor %.*s: expected 3 dimensions (experts), got %u",
                       (int)gt->name.len, gt->name.ptr, gt->n_dims);
    int rc = engine_tensor_from_gguf(&x->all, gt, e);
    if (rc < 0)
        return rc;
    if (!engine_type_supported(gt->type))
        return err_set(e, ERR_UNSUPPORTED, "tensor %.*s: type %s has no matrix kernels",
                       (int)gt->name.len, gt->name.ptr, gguf_type_name(gt->type));
    if (gt->ne[1] <= 0 || gt->ne[2] <= 0)
        return err_set(e, ERR_FORMAT, "tensor %.*s: empty expert tensor", (int)gt->name.len,
                       gt->name.ptr);
    x->rows = gt->ne[1];
    x->n_expert = gt->ne[2];
    return 0;
}

bool engine_experts_interleavable(const struct engine_experts *x)
{
    // Every view (an expert, the gate or up half of a fused one) starts on
    // a group of 8 rows.
    return x->rows % 16 == 0 && engine_tensor_interleavable(&x->all);
}

struct engine_tensor engine_expert_view(const struct engine_experts *x, int64_t ie, int64_t r0,
                                        int64_t n_rows)
{
    ASSERT(ie >= 0 && ie < x->n_expert && r0 >= 0 && r0 + n_rows <= x->rows);
    struct engine_tensor t = x->all;
    t.ne[1] = n_rows;
    t.data = (const uint8_t *)x->all.data + (size_t)(ie * x->rows + r0) * x->all.row_bytes;
    // An interleaved expert tensor (engine_experts_interleavable) keeps its
    // groups of 8 rows in views that start on a group.
    t.interleave = x->all.interleave && (ie * x->rows + r0) % 8 == 0 ? x->all.interleave : 0;
    return t;
}

// ---------------------------------------------------------------------------
// Routing (scalar reference, also what the CPU op runs).

// ggml's soft_max: max, exp, sum in double, scale by the f32 reciprocal.
static void softmax_row(float *y, const float *x, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > max)
            max = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += (double)y[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        y[i] *= inv;
}

// Group-limited routing (llama.cpp build_moe_ffn, n_expert_groups > 1):
// each group's score is the sum of its two largest choice scores; ok[g]
// marks the n_group_used best groups (ties to the lower group). Returns the
// experts per group, 0 when every expert takes part.
static int group_choice(const struct engine_moe *p, const float *probs, bool *ok)
{
    const int G = p->n_group, used = p->n_group_used;
    if (G <= 1 || used >= G)
        return 0;
    ASSERT(G <= 256 && p->n_expert % G == 0 && p->n_expert / G >= 2);
    const int per = p->n_expert / G;
    float score[256];
    for (int g = 0; g < G; g++) {
        float a = -INFINITY, b = -INFINITY;  // the best two
        for (int i = g * per; i < (g + 1) * per; i++) {
            float v = p->sel_bias ? probs[i] + p->sel_bias[i] : probs[i];
            if (v > a)
                b = a, a = v;
            else if (v > b)
                b = v;
        }
        score[g] = a + b;
        ok[g] = false;
    }
    for (int j = 0; j < used; j++) {
        int top = -1;
        for (int g = 0; g < G; g++)
            if (!ok[g] && (top < 0 || score[g] > score[top]))
                top = g;
        ok[top] = true;
    }
    return per;
}

void engine_moe_route(const struct engine_moe *p, const float *logits, float *probs, int32_t *ids,
                      float *weights)
{
    const int n = p->n_expert, k = p->n_expert_used;
    switch (p->gating) {
    case ENGINE_MOE_SOFTMAX:
        softmax_row(probs, logits, n);
        break;
    case ENGINE_MOE_SIGMOID:
        for (int i = 0; i < n; i++)
            probs[i] = 1.0f / (1.0f + expf(-logits[i]));
        break;
    case ENGINE_MOE_SOFTMAX_WEIGHT:
        memcpy(probs, logits, (size_t)n * sizeof(float));
        break;
    }
    // Top-k by (probs + sel_bias), descending; an equal score never passes
    // an earlier expert, so ties go to the lower id (what ggml's argsort
    // gives for the expert counts models use: std::sort is an insertion
    // sort below 17 elements, which keeps equal elements in order).
    float best[256];
    ASSERT(k >= 1 && k <= 256 && k <= n);
    bool group_ok[256];
    const int per_group = group_choice(p, probs, group_ok);
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = p->sel_bias ? probs[i] + p->sel_bias[i] : probs[i];
        if (isnan(v) || (per_group > 0 && !group_ok[i / per_group]))
            continue;
        if (m == k && !(v > best[k - 1]))
            continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && v > best[j - 1]) {
            best[j] = best[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        best[j] = v;
        ids[j] = i;
    }
    for (int j = m; j < k; j++)  // all NaN: fall back to the lowest ids
        ids[j] = j;
    for (int j = 0; j < k; j++)
        weights[j] = probs[ids[j]];
    if (p->gating == ENGINE_MOE_SOFTMAX_WEIGHT)
        softmax_row(weights, weights, k);
    if (p->norm_w) {
        float sum = 0;
        for (int j = 0; j < k; j++)
            sum += weights[j];
        if (sum < 6.103515625e-5f)  // ggml_clamp to the smallest normal f16
            sum = 6.103515625e-5f;
        for (int j = 0; j < k; j++)
            weights[j] /= sum;
    }
    if (p->w_scale != 0.0f)
        for (int j = 0; j < k; j++)
            weights[j] *= p->w_scale;
    if (p->exp_scale)
        for (int j = 0; j < k; j++)
            weights[j] *= p->exp_scale[ids[j]];
}

float engine_moe_act_gated(const struct engine_moe *p, float gate, float up)
{
    switch (p->act) {
    case ENGINE_MOE_SILU:
        return engine_silu(gate) * up;
    case ENGINE_MOE_GELU:
        return engine_gelu(gate) * up;
    case ENGINE_MOE_SWIGLU_OAI: {
        float g = fminf(gate, p->oai_limit);
        float u = fminf(fmaxf(up, -p->oai_limit), p->oai_limit);
        return g / (1.0f + expf(p->oai_alpha * -g)) * (u + 1.0f);
    }
    case ENGINE_MOE_RELU_SQR:
        break;
    }
    ASSERT(!"ENGINE_MOE_RELU_SQR has no gate");
    return 0;
}

static float act_ungated(enum engine_moe_act act, float up)
{
    switch (act) {
    case ENGINE_MOE_SILU:
        return engine_silu(up);
    case ENGINE_MOE_GELU:
        return engine_gelu(up);
    case ENGINE_MOE_RELU_SQR: {
        float r = up > 0 ? up : 0;
        return r * r;
    }
    case ENGINE_MOE_SWIGLU_OAI:
        break;
    }
    ASSERT(!"ENGINE_MOE_SWIGLU_OAI needs a gate");
    return 0;
}

// ---------------------------------------------------------------------------
// The CPU op.

void engine_moe_ws_free(struct engine_moe_ws *ws)
{
    free(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
}

// One group of (token, expert) pairs sharing weights: expert g < n_expert,
// or the shared expert (g == n_expert).
struct moe_group_w {
    struct engine_tensor gate, up, down;  // full matrices of the group (views)
    bool gated;
    const float *gate_b, *up_b, *down_b;  // this group's rows or NULL
    const struct kernels_type *kt_up, *kt_down;
    int64_t n_ff;
};

struct moe_task {
    struct engine_pool *pool;
    const struct engine_moe *p;
    const float *x;
    float *y;
    int64_t n_rows, n_embd, n_slots, hs;  // hs: hidden row stride (floats)
    int n_groups;                         // n_expert (+ 1 with a shared expert)
    // workspace
    float *logits;       // [n_rows, n_expert]
    float *probs;        // [n_expert] (routing, thread 0)
    int32_t *ids;        // [n_rows, k]
    float *wts;          // [n_rows, k]
    int64_t *off, *cnt;  // [n_groups] first slot and count of each group
    int64_t *item0;      // [n_groups + 1] first work item of each group (gate/up)
    int64_t *ditem0;     // [n_groups + 1] first work item of each group (down)
    int32_t *slot_tok;   // [n_slots] token of each slot
    int32_t *slot_of;    // [n_rows, k] slot of each (token, rank)
    uint8_t *xr;         // [n_rows, xr_rb] router input in the router's vec_dot_type
    uint8_t *xg;         // [n_slots, xg_rb] expert inputs
    float *hg, *hu;      // [n_slots, hs]
    uint8_t *hq;         // [n_slots, hq_rb]
    float *yd;           // [n_slots, n_embd]
    size_t xr_rb, xg_rb, hq_rb;
    const struct kernels_type *kt_router;
    int64_t chunk_ff, chunk_embd, chunk_router;
    struct moe_group_w sh;  // the shared expert's weights
    bool inline_run;        // small: the caller thread alone
    _Atomic int64_t next_router, next_up, next_down;
};

static size_t vdt_rb(const struct kernels_type *kt, int64_t n)
{
    return kt->vec_dot_type == GGUF_TYPE_F32 ? (size_t)n * sizeof(float)
                                             : kernels_row_size(kt->vec_dot_type, n);
}

static void to_vdt(const struct kernels_type *kt, const float *x, void *out, int64_t n)
{
    if (kt->vec_dot_type == GGUF_TYPE_F32)
        memcpy(out, x, (size_t)n * sizeof(float));
    else
        kt->from_float(x, out, n);
}

// The weights of group g (an expert or the shared one).
static struct moe_group_w group_w(const struct moe_task *t, int g)
{
    const struct engine_moe *p = t->p;
    if (g == p->n_expert)
        return t->sh;
    struct moe_group_w w = {0};
    if (p->fused_gate_up) {
        int64_t n_ff = p->up->rows / 2;
        w.gate = engine_expert_view(p->up, g, 0, n_ff);
        w.up = engine_expert_view(p->up, g, n_ff, n_ff);
        w.gated = true;
    } else {
        w.up = engine_expert_view(p->up, g, 0, p->up->rows);
        if (p->gate) {
            w.gate = engine_expert_view(p->gate, g, 0, p->gate->rows);
            w.gated = true;
        }
    }
    w.down = engine_expert_view(p->down, g, 0, p->down->rows);
    w.n_ff = w.up.ne[1];
    w.gate_b = p->gate_b ? p->gate_b + (size_t)g * (size_t)w.n_ff : NULL;
    w.up_b = p->up_b ? p->up_b + (size_t)g * (size_t)w.n_ff : NULL;
    w.down_b = p->down_b ? p->down_b + (size_t)g * (size_t)t->n_embd : NULL;
    w.kt_up = kernels_get(w.up.type);
    w.kt_down = kernels_get(w.down.type);
    return w;
}

// s[c * s_stride + r] = dot(w row r, x row c) for r < nr, c < nc, in
// blocks of MOE_COL_BLOCK activation rows.
static void product(const struct kernels_type *kt, const struct engine_tensor *w, int64_t r0,
                    int64_t r1, const uint8_t *x, size_t x_rb, int64_t nc, float *s,
                    size_t s_stride)
{
    if (w->interleave) {  // groups of 8 rows (r0 and r1 are multiples of 8: chunk_rows)
        for (int64_t c = 0; c < nc; c += MOE_COL_BLOCK) {
            int64_t ce = c + MOE_COL_BLOCK < nc ? c + MOE_COL_BLOCK : nc;
            kt->gemm_x8(w->ne[0], s + (size_t)c * s_stride + r0, s_stride,
                        (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes,
                        x + (size_t)c * x_rb, x_rb, (int)(r1 - r0), (int)(ce - c));
        }
        return;
    }
    for (int64_t c = 0; c < nc; c += MOE_COL_BLOCK) {
        int64_t ce = c + MOE_COL_BLOCK < nc ? c + MOE_COL_BLOCK : nc;
        kernels_matmul(kt, w->ne[0], s + (size_t)c * s_stride + r0, s_stride,
                       (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes,
                       x + (size_t)c * x_rb, x_rb, (int)(r1 - r0), (int)(ce - c));
    }
}

// Group of a work item: the last g with first[g] <= item (binary search).
static int item_group(const int64_t *first, int n_groups, int64_t item)
{
    int lo = 0, hi = n_groups;  // first[lo] <= item < first[hi]
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (first[mid] <= item)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static void barrier(struct moe_task *t, int nth)
{
    if (nth > 1)
        engine_pool_barrier(t->pool);
}

// Thread 0: top-k of every token, then the (token, expert) pairs grouped
// by expert (counting sort, tokens in order within a group).
static void route_all(struct moe_task *t)
{
    const struct engine_moe *p = t->p;
    const int k = p->n_expert_used, E = p->n_expert;
    for (int64_t r = 0; r < t->n_rows; r++)
        engine_moe_route(p, t->logits + r * E, t->probs, t->ids + r * k, t->wts + r * k);
    memset(t->cnt, 0, (size_t)t->n_groups * sizeof(int64_t));
    for (int64_t i = 0; i < t->n_rows * k; i++)
        t->cnt[t->ids[i]]++;
    if (t->n_groups > E)
        t->cnt[E] = t->n_rows;
    int64_t o = 0, it = 0, dit = 0;
    for (int g = 0; g < t->n_groups; g++) {
        t->off[g] = o;
        o += t->cnt[g];
        t->item0[g] = it;
        t->ditem0[g] = dit;
        if (t->cnt[g] > 0) {
            int64_t n_ff = g == E ? t->sh.n_ff : (p->fused_gate_up ? p->up->rows / 2 : p->up->rows);
            it += (n_ff + t->chunk_ff - 1) / t->chunk_ff;
            dit += (t->n_embd + t->chunk_embd - 1) / t->chunk_embd;
        }
    }
    t->item0[t->n_groups] = it;
    t->ditem0[t->n_groups] = dit;
    // Place the pairs: cnt becomes a fill counter, then is restored.
    memset(t->cnt, 0, (size_t)t->n_groups * sizeof(int64_t));
    for (int64_t r = 0; r < t->n_rows; r++) {
        for (int j = 0; j < k; j++) {
            int g = t->ids[r * k + j];
            int64_t s = t->off[g] + t->cnt[g]++;
            t->slot_tok[s] = (int32_t)r;
            t->slot_of[r * k + j] = (int32_t)s;
        }
        if (t->n_groups > E) {
            int64_t s = t->off[E] + t->cnt[E]++;
            t->slot_tok[s] = (int32_t)r;
        }
    }
}

// Gate and up rows [r0, r1) of group g for all its pairs, then the activation.
static void up_item(struct moe_task *t, int g, int64_t r0, int64_t r1)
{
    struct moe_group_w w = group_w(t, g);
    int64_t off = t->off[g], nc = t->cnt[g];
    const uint8_t *xg = t->xg + (size_t)off * t->xg_rb;
    float *hg = t->hg + (size_t)off * (size_t)t->hs, *hu = t->hu + (size_t)off * (size_t)t->hs;
    product(w.kt_up, &w.up, r0, r1, xg, t->xg_rb, nc, hu, (size_t)t->hs);
    if (w.gated)
        product(kernels_get(w.gate.type), &w.gate, r0, r1, xg, t->xg_rb, nc, hg, (size_t)t->hs);
    for (int64_t c = 0; c < nc; c++) {
        float *g_row = hg + (size_t)c * (size_t)t->hs, *u_row = hu + (size_t)c * (size_t)t->hs;
        for (int64_t r = r0; r < r1; r++) {
            float u = u_row[r] + (w.up_b ? w.up_b[r] : 0.0f);
            if (w.gated) {
                float gv = g_row[r] + (w.gate_b ? w.gate_b[r] : 0.0f);
                g_row[r] = engine_moe_act_gated(t->p, gv, u);
            } else {
                g_row[r] = act_ungated(t->p->act, u);
            }
        }
    }
}

static void down_item(struct moe_task *t, int g, int64_t r0, int64_t r1)
{
    struct moe_group_w w = group_w(t, g);
    int64_t off = t->off[g], nc = t->cnt[g];
    float *yd = t->yd + (size_t)off * (size_t)t->n_embd;
    product(w.kt_down, &w.down, r0, r1, t->hq + (size_t)off * t->hq_rb, t->hq_rb, nc, yd,
            (size_t)t->n_embd);
    if (w.down_b)
        for (int64_t c = 0; c < nc; c++)
            for (int64_t r = r0; r < r1; r++)
                yd[(size_t)c * (size_t)t->n_embd + r] += w.down_b[r];
}

// 1. Router logits: (n_rows, n_expert). Inputs go to the router's vec_dot_type first when
// it is not F32 (with its own barrier); then threads take chunks of experts.
static void router_phase(struct moe_task *t, int ith, int nth)
{
    const struct engine_moe *p = t->p;
    const int E = p->n_expert;
    const int64_t n_embd = t->n_embd;
    const float *x = p->router_x ? p->router_x : t->x;
    const uint8_t *xr = (const uint8_t *)x;
    if (t->kt_router->vec_dot_type != GGUF_TYPE_F32) {
        for (int64_t r = ith; r < t->n_rows; r += nth)
            to_vdt(t->kt_router, x + r * n_embd, t->xr + (size_t)r * t->xr_rb, n_embd);
        barrier(t, nth);
        xr = t->xr;
    }
    const struct engine_tensor *gi = p->gate_inp;
    int64_t n_router_items = (E + t->chunk_router - 1) / t->chunk_router;
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&t->next_router, 1, memory_order_relaxed);
        if (it >= n_router_items)
            break;
        int64_t r0 = it * t->chunk_router, r1 = r0 + t->chunk_router < E ? r0 + t->chunk_router : E;
        product(t->kt_router, gi, r0, r1, xr, t->xr_rb, t->n_rows, t->logits, (size_t)E);
        if (p->gate_inp_b)
            for (int64_t c = 0; c < t->n_rows; c++)
                for (int64_t r = r0; r < r1; r++)
                    t->logits[c * E + r] += p->gate_inp_b[r];
    }
}

// 3. Each pair's input in the experts' vec_dot_type.
// The shared expert's slots follow the routed ones.
static void inputs_phase(struct moe_task *t, int ith, int nth)
{
    const struct engine_moe *p = t->p;
    const int k = p->n_expert_used;
    const int64_t n_embd = t->n_embd;
    for (int64_t s = ith; s < t->n_slots; s += nth) {
        bool shared = s >= t->n_rows * k;
        const struct kernels_type *kt = shared ? t->sh.kt_up : kernels_get(p->up->all.type);
        const float *x = t->x + (int64_t)t->slot_tok[s] * n_embd;
        if (p->w_input && !shared) {
            // x times the pair's weight, staged in the pair's down row (written later).
            const int64_t r = t->slot_tok[s];
            float w = 0.0f, *xs = t->yd + (size_t)s * (size_t)n_embd;
            for (int j = 0; j < k; j++)
                if (t->slot_of[r * k + j] == (int32_t)s)
                    w = t->wts[r * k + j];
            for (int64_t i = 0; i < n_embd; i++)
                xs[i] = x[i] * w;
            x = xs;
        }
        to_vdt(kt, x, t->xg + (size_t)s * t->xg_rb, n_embd);
    }
}

// 4. Gate / up products and the activation.
static void up_phase(struct moe_task *t)
{
    const struct engine_moe *p = t->p;
    const int E = p->n_expert;
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&t->next_up, 1, memory_order_relaxed);
        if (it >= t->item0[t->n_groups])
            break;
        int g = item_group(t->item0, t->n_groups, it);
        while (t->cnt[g] == 0)  // empty groups own no items: skip to the owner
            g++;
        int64_t n_ff = g == E ? t->sh.n_ff : (p->fused_gate_up ? p->up->rows / 2 : p->up->rows);
        int64_t r0 = (it - t->item0[g]) * t->chunk_ff;
        int64_t r1 = r0 + t->chunk_ff < n_ff ? r0 + t->chunk_ff : n_ff;
        up_item(t, g, r0, r1);
    }
}

// 5. Hidden rows in the down matrices' vec_dot_type.
static void hidden_phase(struct moe_task *t, int ith, int nth)
{
    const struct engine_moe *p = t->p;
    const int k = p->n_expert_used;
    for (int64_t s = ith; s < t->n_slots; s += nth) {
        bool shared = s >= t->n_rows * k;
        const struct kernels_type *kt = shared ? t->sh.kt_down : kernels_get(p->down->all.type);
        int64_t n_ff = shared ? t->sh.n_ff : p->down->all.ne[0];
        to_vdt(kt, t->hg + (size_t)s * (size_t)t->hs, t->hq + (size_t)s * t->hq_rb, n_ff);
    }
}

// 6. Down products.
static void down_phase(struct moe_task *t)
{
    const int64_t n_embd = t->n_embd;
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&t->next_down, 1, memory_order_relaxed);
        if (it >= t->ditem0[t->n_groups])
            break;
        int g = item_group(t->ditem0, t->n_groups, it);
        while (t->cnt[g] == 0)
            g++;
        int64_t r0 = (it - t->ditem0[g]) * t->chunk_embd;
        int64_t r1 = r0 + t->chunk_embd < n_embd ? r0 + t->chunk_embd : n_embd;
        down_item(t, g, r0, r1);
    }
}

// 7. Weighted sum in rank order (as ggml adds the weighted experts),
// then the shared expert.
static void combine_phase(struct moe_task *t, int ith, int nth)
{
    const int k = t->p->n_expert_used, E = t->p->n_expert;
    const int64_t n_embd = t->n_embd;
    for (int64_t r = ith; r < t->n_rows; r += nth) {
        float *y = t->y + r * n_embd;
        // σ(gate · x) scales the shared expert (read before y, which may be x).
        float sh_scale = 1.0f;
        if (t->p->sh_gate_inp) {
            const float *x = t->x + r * n_embd;
            float dot = 0.0f;
            for (int64_t i = 0; i < n_embd; i++)
                dot += t->p->sh_gate_inp[i] * x[i];
            sh_scale = 1.0f / (1.0f + expf(-dot));
        }
        for (int j = 0; j < k; j++) {
            float wj = t->p->w_input ? 1.0f : t->wts[r * k + j];
            const float *d = t->yd + (size_t)t->slot_of[r * k + j] * (size_t)n_embd;
            if (j == 0)
                for (int64_t i = 0; i < n_embd; i++)
                    y[i] = d[i] * wj;
            else
                for (int64_t i = 0; i < n_embd; i++)
                    y[i] += d[i] * wj;
        }
        if (t->n_groups > E) {
            const float *d = t->yd + (size_t)(t->off[E] + r) * (size_t)n_embd;
            for (int64_t i = 0; i < n_embd; i++)
                y[i] += d[i] * sh_scale;
        }
    }
}

// The phases of one MoE op, separated by pool barriers (each reads what the last wrote).
static void moe_task_run(void *arg, int ith, int nth)
{
    struct moe_task *t = arg;
    router_phase(t, ith, nth);
    barrier(t, nth);
    // 2. Routing and grouping.
    if (ith == 0)
        route_all(t);
    barrier(t, nth);
    inputs_phase(t, ith, nth);
    barrier(t, nth);
    up_phase(t);
    barrier(t, nth);
    hidden_phase(t, ith, nth);
    barrier(t, nth);
    down_phase(t);
    barrier(t, nth);
    combine_phase(t, ith, nth);
}

// Carves the workspace; returns false when it cannot be allocated.
static bool ws_layout(struct engine_moe_ws *ws, struct moe_task *t)
{
    const int k = t->p->n_expert_used, E = t->p->n_expert;
    size_t sizes[] = {
        (size_t)t->n_rows * (size_t)E * sizeof(float),           // logits
        (size_t)E * sizeof(float),                               // probs
        (size_t)t->n_rows * (size_t)k * sizeof(int32_t),         // ids
        (size_t)t->n_rows * (size_t)k * sizeof(float),           // wts
        (size_t)t->n_groups * sizeof(int64_t),                   // off
        (size_t)t->n_groups * sizeof(int64_t),                   // cnt
        (size_t)(t->n_groups + 1) * sizeof(int64_t),             // item0
        (size_t)(t->n_groups + 1) * sizeof(int64_t),             // ditem0
        (size_t)t->n_slots * sizeof(int32_t),                    // slot_tok
        (size_t)t->n_rows * (size_t)k * sizeof(int32_t),         // slot_of
        (size_t)t->n_rows * t->xr_rb,                            // xr
        (size_t)t->n_slots * t->xg_rb,                           // xg
        (size_t)t->n_slots * (size_t)t->hs * sizeof(float),      // hg
        (size_t)t->n_slots * (size_t)t->hs * sizeof(float),      // hu
        (size_t)t->n_slots * t->hq_rb,                           // hq
        (size_t)t->n_slots * (size_t)t->n_embd * sizeof(float),  // yd
    };
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    size_t offs[N], total = 0;
    for (int i = 0; i < N; i++) {
        offs[i] = total;
        total += (sizes[i] + MOE_ALIGN - 1) / MOE_ALIGN * MOE_ALIGN;
    }
    if (total > ws->cap) {
        void *buf = NULL;
        if (posix_memalign(&buf, MOE_ALIGN, total) != 0)
            return false;
        free(ws->buf);
        ws->buf = buf;
        ws->cap = total;
    }
    uint8_t *b = ws->buf;
    t->logits = (float *)(b + offs[0]);
    t->probs = (float *)(b + offs[1]);
    t->ids = (int32_t *)(b + offs[2]);
    t->wts = (float *)(b + offs[3]);
    t->off = (int64_t *)(b + offs[4]);
    t->cnt = (int64_t *)(b + offs[5]);
    t->item0 = (int64_t *)(b + offs[6]);
    t->ditem0 = (int64_t *)(b + offs[7]);
    t->slot_tok = (int32_t *)(b + offs[8]);
    t->slot_of = (int32_t *)(b + offs[9]);
    t->xr = b + offs[10];
    t->xg = b + offs[11];
    t->hg = (float *)(b + offs[12]);
    t->hu = (float *)(b + offs[13]);
    t->hq = b + offs[14];
    t->yd = (float *)(b + offs[15]);
    return true;
}

// Rows per work item: about 4 items per thread over what one token needs,
// at least 16, a multiple of the tile height (and of 8 over interleaved
// experts, whose groups a chunk must not split).
static int64_t chunk_rows(int64_t rows, int64_t units, int nth, const struct kernels_type *kt,
                          bool x8)
{
    int64_t c = rows * units / ((int64_t)nth * 4);
    if (c > rows)
        c = rows;
    if (c < 16)
        c = 16;
    int64_t nr = kt->gemm && kt->gemm_nr > 1 ? kt->gemm_nr : 1;
    while (x8 && nr % 8 != 0)  // lcm(nr, 8)
        nr *= 2;
    return (c + nr - 1) / nr * nr;
}

// Fills the task's shapes and work split for n_rows rows.
static void task_init(struct moe_task *t, struct engine_pool *pool, int n_threads, float *y,
                      const float *x, int64_t n_rows, const struct engine_moe *p)
{
    ASSERT(p->n_expert >= 1 && p->n_expert_used >= 1 && p->n_expert_used <= p->n_expert);
    ASSERT(p->up->n_expert == p->n_expert && p->down->n_expert == p->n_expert);
    ASSERT(p->act != ENGINE_MOE_SWIGLU_OAI || p->gate || p->fused_gate_up);
    memset(t, 0, sizeof *t);
    t->pool = pool;
    t->p = p;
    t->x = x;
    t->y = y;
    t->n_rows = n_rows;
    t->n_embd = p->gate_inp->ne[0];
    t->n_groups = p->n_expert + (p->sh_up ? 1 : 0);
    t->n_slots = n_rows * p->n_expert_used + (p->sh_up ? n_rows : 0);
    int64_t n_ff = p->fused_gate_up ? p->up->rows / 2 : p->up->rows;
    t->hs = n_ff;
    t->kt_router = kernels_get(p->gate_inp->type);
    const struct kernels_type *kt_up = kernels_get(p->up->all.type);
    const struct kernels_type *kt_down = kernels_get(p->down->all.type);
    ASSERT(t->kt_router && kt_up && kt_down && !p->gate_inp->interleave);
    t->xr_rb = vdt_rb(t->kt_router, t->n_embd);
    t->xg_rb = vdt_rb(kt_up, t->n_embd);
    t->hq_rb = vdt_rb(kt_down, n_ff);
    if (p->sh_up) {
        struct moe_group_w *sh = &t->sh;
        sh->up = *p->sh_up;
        sh->down = *p->sh_down;
        sh->gated = p->sh_gate != NULL;
        if (sh->gated)
            sh->gate = *p->sh_gate;
        sh->n_ff = p->sh_up->ne[1];
        sh->kt_up = kernels_get(p->sh_up->type);
        sh->kt_down = kernels_get(p->sh_down->type);
        ASSERT(sh->kt_up && sh->kt_down && !p->sh_up->interleave && !p->sh_down->interleave &&
               (!sh->gated || !p->sh_gate->interleave));
        if (sh->n_ff > t->hs)
            t->hs = sh->n_ff;
        size_t rb = vdt_rb(sh->kt_up, t->n_embd);
        if (rb > t->xg_rb)
            t->xg_rb = rb;
        rb = vdt_rb(sh->kt_down, sh->n_ff);
        if (rb > t->hq_rb)
            t->hq_rb = rb;
    }
    int64_t work = n_rows * (int64_t)p->n_expert * t->n_embd + t->n_slots * t->n_embd * t->hs * 3;
    int nth = n_threads > 1 && work >= MOE_INLINE_WORK ? n_threads : 1;
    // Work items: a token's k experts are spread over the threads.
    t->chunk_ff = chunk_rows(t->hs, p->n_expert_used, nth, kt_up, p->up->all.interleave != 0);
    t->chunk_embd =
        chunk_rows(t->n_embd, p->n_expert_used, nth, kt_down, p->down->all.interleave != 0);
    t->chunk_router = chunk_rows(p->n_expert, 1, nth, t->kt_router, false);
    t->inline_run = nth == 1;
    atomic_init(&t->next_router, 0);
    atomic_init(&t->next_up, 0);
    atomic_init(&t->next_down, 0);
}

int engine_cpu_moe_reserve(struct engine_moe_ws *ws, int64_t max_rows, const struct engine_moe *p,
                           struct err *e)
{
    struct moe_task t;
    task_init(&t, NULL, 1, NULL, NULL, max_rows, p);
    if (!ws_layout(ws, &t))
        return err_set(e, ERR_NOMEM, "allocate the mixture-of-experts scratch");
    return 0;
}

void engine_cpu_moe(struct engine_pool *pool, int n_threads, struct engine_moe_ws *ws, float *y,
                    const float *x, int64_t n_rows, const struct engine_moe *p)
{
    if (n_rows <= 0)
        return;
    struct moe_task t;
    task_init(&t, pool, n_threads, y, x, n_rows, p);
    // The model reserved the scratch for its largest batch at load
    // (engine_moe_reserve); growing here only happens for callers that did
    // not, and failing then is out of memory for a few megabytes.
    if (!ws_layout(ws, &t))
        ASSERT(!"out of memory for the mixture-of-experts scratch");
    if (t.inline_run)
        moe_task_run(&t, 0, 1);
    else
        engine_pool_run(pool, moe_task_run, &t);
}

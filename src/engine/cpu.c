// The CPU backend: every op of engine_backend_ops on host memory, with rows
// split across the persistent pool. Matrix products follow ggml's model:
// activation rows are converted once to the weight kernel's vec_dot_type,
// then output rows are handed out in chunks and computed with the kernel's
// gemm tile where the batch has several rows, vec_dot otherwise. Each thread
// first takes the chunks of its own contiguous range in order (its weights
// stream sequentially, so the prefetches run on into the next chunk), then
// takes what is left of the other ranges through their atomic cursors, so a
// thread that was descheduled does not hold the others up.
//
// Small ops on one token (norms, RoPE, element-wise) run on the calling
// thread: waking the pool would cost more than the work.
#include "engine/engine.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attention.h"
#include "engine/internal.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

// Below this many float operations an op runs on the caller thread.
#define CPU_INLINE_WORK   32768
#define CPU_INLINE_MATMUL (256 * 1024)  // multiply-adds
#define CPU_ALIGN         64
#define CPU_PANEL_BUDGET  (384 * 1024)  // bytes of decoded panels per thread at once
#define CPU_MAX_JOBS      8
#define CPU_MAX_RANGES    64  // home ranges of a product's chunks (threads beyond share)
#define CPU_RANGE_ROWS    16  // most activation rows of a product cut into home ranges

struct cpu {
    struct engine_backend base;
    struct engine_pool *pool;
    int n_threads;
    void *wdata;  // converted activations (vec_dot_type rows)
    size_t wdata_bytes;
    uint8_t *panels;  // each thread's decoded weight panels (kernels.h), panel_bytes apiece
    size_t panel_bytes;
    struct engine_attn_ws attn_ws;  // the attention op's tiles and work lists
    struct engine_moe_ws moe_ws;    // mixture-of-experts scratch (moe.c)
};

static struct cpu *cpu_of(struct engine_backend *be)
{
    return (struct cpu *)be;
}

static void *aligned_alloc_bytes(size_t n)
{
    void *p = NULL;
    if (n == 0)
        n = CPU_ALIGN;
    if (posix_memalign(&p, CPU_ALIGN, (n + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN) != 0)
        return NULL;
    return p;
}

// ---------------------------------------------------------------------------
// Row-parallel helper: fn(ctx, r0, r1) over contiguous ranges.

typedef void (*rows_fn)(void *ctx, int64_t r0, int64_t r1);

struct rows_task {
    rows_fn fn;
    void *ctx;
    int64_t n;
};

static void rows_task_run(void *arg, int ith, int nth)
{
    struct rows_task *t = arg;
    int64_t per = (t->n + nth - 1) / nth;
    int64_t r0 = per * ith, r1 = r0 + per < t->n ? r0 + per : t->n;
    if (r0 < r1)
        t->fn(t->ctx, r0, r1);
}

// Runs fn over [0, n) units, each costing ~work_per_unit flops.
static void par_rows(struct cpu *c, int64_t n, int64_t work_per_unit, rows_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (c->n_threads == 1 || n == 1 || n * work_per_unit < CPU_INLINE_WORK) {
        fn(ctx, 0, n);
        return;
    }
    struct rows_task t = {fn, ctx, n};
    engine_pool_run(c->pool, rows_task_run, &t);
}

// ---------------------------------------------------------------------------
// Buffers and scratch.

// Buffers of 2 MiB and more (the K/V cache of a layer) go on transparent
// huge pages (engine_alloc_pages): decode attention walks a layer's whole
// cache every token, and with 4 KiB pages each 4 KiB of it was a TLB miss
// whose page walk the weights streamed in between had pushed out of the
// caches. The memset touches every page either way.
static void *cpu_buf_alloc(struct engine_backend *be, size_t n_bytes)
{
    (void)be;
    void *p = engine_alloc_pages(n_bytes ? n_bytes : 1);
    if (p)
        memset(p, 0, n_bytes);
    return p;
}

static void cpu_buf_free(struct engine_backend *be, void *buf)
{
    (void)be;
    free(buf);
}

static void cpu_buf_copy(struct engine_backend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    memmove(dst, src, n);
}

static int cpu_reserve(struct engine_backend *be, int64_t max_rows, int64_t max_row_len,
                       int64_t max_kv, struct err *e)
{
    struct cpu *c = cpu_of(be);
    (void)max_kv;  // attention scratch grows with the head count, at the first call
    // Largest vec_dot_type row is F16 (2 bytes/element); Q8_K is 292/256.
    size_t need;
    if (!size_mul(&need, (size_t)max_rows, (size_t)max_row_len * 2 + 512))
        return err_set(e, ERR_TOO_LARGE, "activation scratch too large");
    if (need > c->wdata_bytes) {
        void *p = aligned_alloc_bytes(need);
        if (!p)
            return err_set(e, ERR_NOMEM, "allocate %zu bytes of activation scratch", need);
        free(c->wdata);
        c->wdata = p;
        c->wdata_bytes = need;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Embedding rows.

struct get_rows_ctx {
    float *y;
    const struct engine_tensor *w;
    const int32_t *ids;
    quant_to_float_fn to_float;
};

static void get_rows_range(void *p, int64_t r0, int64_t r1)
{
    struct get_rows_ctx *g = p;
    int64_t n = g->w->ne[0];
    // An interleaved table (a tied output's copy) gives each row back in
    // its own format first.
    uint8_t *tmp = g->w->interleave ? xmalloc(g->w->row_bytes) : NULL;
    for (int64_t r = r0; r < r1; r++) {
        int64_t id = g->ids[r];
        const uint8_t *src = (const uint8_t *)g->w->data + (size_t)id * g->w->row_bytes;
        if (tmp) {
            const uint8_t *group =
                (const uint8_t *)g->w->data + (size_t)(id & ~7) * g->w->row_bytes;
            bool ok = kernels_x8_row(g->w->type, group, (int)(id & 7), n, tmp);
            ASSERT(ok);
            src = tmp;
        }
        float *dst = g->y + r * n;
        if (g->w->type == GGUF_TYPE_F32)
            memcpy(dst, src, (size_t)n * sizeof(float));
        else if (g->w->type == GGUF_TYPE_F16)
            kernels_f16_to_f32_row((const uint16_t *)src, dst, n);
        else
            g->to_float(src, dst, n);
    }
    free(tmp);
}

static void cpu_get_rows(struct engine_backend *be, float *y, const struct engine_tensor *w,
                         const int32_t *ids, int64_t n_rows)
{
    ASSERT(!w->interleave || w->interleave == 8);
    const struct quant_traits *qt = quant_traits_get(w->type);
    struct get_rows_ctx g = {y, w, ids, qt ? qt->to_float : NULL};
    par_rows(cpu_of(be), n_rows, w->ne[0] * 4, get_rows_range, &g);
}

// ---------------------------------------------------------------------------
// Matrix products.

struct mm_group {
    const struct kernels_type *kt;
    uint32_t vdt;
    const void *xq;  // converted activations (or x itself for F32)
    size_t xq_row_bytes;
};

struct mm_task {
    struct cpu *cpu;
    const struct engine_matmul_job *jobs;
    int n_jobs;
    const float *x;
    int64_t n_rows, n_in;
    const struct kernels_type *kt[CPU_MAX_JOBS];
    bool panel[CPU_MAX_JOBS];  // job j decodes its rows into panels (kernels.h)
    int64_t chunk_rows;
    bool private_rows;  // n_rows == 1: each thread converts x into its own slot
    // Jobs sharing a vec_dot_type form a group; groups run one after the
    // other (they share the conversion scratch), each with its own chunk
    // counter. Job j owns chunk ids [chunk_start[j], chunk_end[j]) of its group.
    int group_of[CPU_MAX_JOBS];
    int n_groups;
    uint32_t group_vdt[CPU_MAX_JOBS];
    bool group_panel[CPU_MAX_JOBS];  // the activation rows of the panel products
    int64_t chunk_start[CPU_MAX_JOBS], chunk_end[CPU_MAX_JOBS];
    // A group's chunks are cut into n_ranges contiguous ranges, one per
    // thread, each with its own cursor: a thread takes its own range in
    // order (one sequential stream of weights, which the prefetches follow
    // from chunk to chunk), then helps the others from their cursors.
    int n_ranges;
    int64_t n_chunks[CPU_MAX_JOBS];
    _Atomic int64_t cursor[CPU_MAX_JOBS][CPU_MAX_RANGES];
};

static size_t vdt_row_bytes(uint32_t vdt, int64_t n)
{
    return vdt == GGUF_TYPE_F32 ? (size_t)n * sizeof(float) : quant_row_size(vdt, n);
}

// The first job of group g, and the bytes of one of the group's converted
// activation rows (the panel products' rows carry f32 scales and offset
// quants: kernels_panel_act_bytes).
static int mm_group_job(const struct mm_task *t, int g)
{
    int j = 0;
    while (t->group_of[j] != g)
        j++;
    return j;
}

static size_t mm_group_row_bytes(const struct mm_task *t, int g)
{
    return t->group_panel[g] ? kernels_panel_act_bytes(t->jobs[mm_group_job(t, g)].w->type, t->n_in)
                             : vdt_row_bytes(t->group_vdt[g], t->n_in);
}

// Panels decoded at once from a chunk of `chunk` rows: as many as fit in
// CPU_PANEL_BUDGET (they stay in L2 while the activation rows pass), at
// least one.
static int64_t mm_panels(int64_t chunk, size_t panel_bytes)
{
    int64_t fit = (int64_t)(CPU_PANEL_BUDGET / panel_bytes);
    int64_t all = (chunk + KERNELS_PANEL_ROWS - 1) / KERNELS_PANEL_ROWS;
    return fit < 1 ? 1 : fit < all ? fit : all;
}

// Rows [r0, r1) of a panel job: decode a few panels, then every block of
// activation rows meets them.
static void mm_panel_rows(const struct mm_task *t, int j, int64_t r0, int64_t r1, const uint8_t *xd,
                          size_t xq_row_bytes, uint8_t *scratch)
{
    const struct kernels_type *kt = t->kt[j];
    const struct engine_tensor *w = t->jobs[j].w;
    const uint8_t *wd = w->data;
    int64_t n_out = w->ne[1], n_in = w->ne[0], nc = t->n_rows;
    const size_t pb = kernels_panel_bytes(w->type, n_in);
    const int64_t npan = mm_panels(t->chunk_rows, pb), step = npan * KERNELS_PANEL_ROWS;
    // interleaved weights: each panel's rows back in their own layout first
    uint8_t *rows = scratch + (size_t)npan * pb;
    for (int64_t p0 = r0; p0 < r1; p0 += step) {
        int64_t p1 = p0 + step < r1 ? p0 + step : r1;
        int np = 0;
        for (int64_t r = p0; r < p1; r += KERNELS_PANEL_ROWS, np++) {
            int nr = (int)(p1 - r < KERNELS_PANEL_ROWS ? p1 - r : KERNELS_PANEL_ROWS);
            const uint8_t *src = wd + (size_t)r * w->row_bytes;
            if (w->interleave) {
                for (int q = 0; q < nr; q++) {
                    int64_t rq = r + q, g0 = rq / 8 * 8;
                    bool ok = kernels_x8_row(w->type, wd + (size_t)g0 * w->row_bytes,
                                             (int)(rq - g0), n_in, rows + (size_t)q * w->row_bytes);
                    ASSERT(ok);
                }
                src = rows;
            }
            kt->panel_decode(n_in, scratch + (size_t)np * pb, src, w->row_bytes, nr);
        }
        const int64_t cb = 32;
        for (int64_t c = 0; c < nc; c += cb) {
            int64_t ce = c + cb < nc ? c + cb : nc;
            for (int q = 0; q < np; q++) {
                int64_t r = p0 + (int64_t)q * KERNELS_PANEL_ROWS;
                int nr = (int)(p1 - r < KERNELS_PANEL_ROWS ? p1 - r : KERNELS_PANEL_ROWS);
                kt->panel_gemm(n_in, t->jobs[j].y + c * n_out + r, (size_t)n_out,
                               scratch + (size_t)q * pb, xd + (size_t)c * xq_row_bytes,
                               xq_row_bytes, nr, (int)(ce - c));
            }
        }
    }
}

// Computes output rows [r0, r1) of job j for every activation row.
static void mm_rows(const struct mm_task *t, int j, int64_t r0, int64_t r1, const void *xq,
                    size_t xq_row_bytes, uint8_t *scratch)
{
    const struct engine_matmul_job *job = &t->jobs[j];
    const struct kernels_type *kt = t->kt[j];
    const struct engine_tensor *w = job->w;
    const uint8_t *wd = w->data;
    const uint8_t *xd = xq;
    int64_t n_out = w->ne[1], n_in = w->ne[0], nc = t->n_rows;
    float *y = job->y;

    if (t->panel[j]) {
        mm_panel_rows(t, j, r0, r1, xd, xq_row_bytes, scratch);
    } else if ((kt->gemm && nc > 1) || w->interleave) {
        // Tiles over [r0, r1) × blocks of activation rows small enough to
        // stay in L1 while the chunk's weight rows stream from L2.
        // Interleaved weights always go through their own product (r0 and
        // r1 are multiples of 8: see the chunk size).
        kernels_gemm_fn gemm = w->interleave ? kt->gemm_x8 : kt->gemm;
        const int64_t cb = 16;
        for (int64_t c = 0; c < nc; c += cb) {
            int64_t ce = c + cb < nc ? c + cb : nc;
            gemm(n_in, y + c * n_out + r0, (size_t)n_out, wd + (size_t)r0 * w->row_bytes,
                 w->row_bytes, xd + (size_t)c * xq_row_bytes, xq_row_bytes, (int)(r1 - r0),
                 (int)(ce - c));
        }
    } else {
        // Blocks of 4 activation rows keep a weight row hot.
        for (int64_t c = 0; c < nc; c += 4) {
            int64_t ce = c + 4 < nc ? c + 4 : nc;
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *wr = wd + (size_t)r * w->row_bytes;
                for (int64_t cc = c; cc < ce; cc++)
                    kt->vec_dot(n_in, y + cc * n_out + r, wr, xd + (size_t)cc * xq_row_bytes);
            }
        }
    }
    if (job->bias) {
        for (int64_t cc = 0; cc < nc; cc++)
            for (int64_t r = r0; r < r1; r++)
                y[cc * n_out + r] += job->bias[r];
    }
}

// Computes chunk ch of group g: the rows of the job that owns it.
static void mm_chunk(const struct mm_task *t, int g, int64_t ch, const void *xq, size_t row_bytes,
                     uint8_t *scratch)
{
    int j = 0;
    while (t->group_of[j] != g || ch < t->chunk_start[j] || ch >= t->chunk_end[j])
        j++;
    int64_t r0 = (ch - t->chunk_start[j]) * t->chunk_rows;
    int64_t r1 = r0 + t->chunk_rows;
    if (r1 > t->jobs[j].w->ne[1])
        r1 = t->jobs[j].w->ne[1];
    mm_rows(t, j, r0, r1, xq, row_bytes, scratch);
}

static void mm_task_run(void *arg, int ith, int nth)
{
    struct mm_task *t = arg;
    for (int g = 0; g < t->n_groups; g++) {
        uint32_t vdt = t->group_vdt[g];
        const struct kernels_type *kt = t->kt[mm_group_job(t, g)];
        size_t row_bytes = mm_group_row_bytes(t, g);
        kernels_from_float_fn from_float =
            t->group_panel[g] ? kt->panel_from_float : kt->from_float;
        uint8_t *scratch =
            t->cpu->panels ? t->cpu->panels + (size_t)ith * t->cpu->panel_bytes : NULL;
        const void *xq = t->x;
        if (vdt != GGUF_TYPE_F32 && t->private_rows) {
            // One activation row (decode): every thread converts its own copy,
            // which costs less than a barrier.
            uint8_t *mine = (uint8_t *)t->cpu->wdata + (size_t)ith * row_bytes;
            from_float(t->x, mine, t->n_in);
            xq = mine;
        } else if (vdt != GGUF_TYPE_F32) {
            if (g > 0 && nth > 1)
                engine_pool_barrier(t->cpu->pool);  // the previous group is done with wdata
            for (int64_t r = ith; r < t->n_rows; r += nth)
                from_float(t->x + r * t->n_in, (uint8_t *)t->cpu->wdata + (size_t)r * row_bytes,
                           t->n_in);
            if (nth > 1)
                engine_pool_barrier(t->cpu->pool);
            xq = t->cpu->wdata;
        }
        for (int k = 0; k < t->n_ranges; k++) {
            const int rg = (ith + k) % t->n_ranges;
            const int64_t end = t->n_chunks[g] * (rg + 1) / t->n_ranges;
            int64_t ch;
            while ((ch = atomic_fetch_add_explicit(&t->cursor[g][rg], 1, memory_order_relaxed)) <
                   end)
                mm_chunk(t, g, ch, xq, row_bytes, scratch);
        }
    }
}

// Grows each thread's panel scratch to what the panel jobs of t need; false
// when that memory cannot be had.
static bool cpu_panel_scratch(struct cpu *c, const struct mm_task *t)
{
    size_t need = 0;
    for (int j = 0; j < t->n_jobs; j++) {
        if (!t->panel[j])
            continue;
        size_t pb = kernels_panel_bytes(t->jobs[j].w->type, t->n_in);
        size_t b = (size_t)mm_panels(t->chunk_rows, pb) * pb;
        if (t->jobs[j].w->interleave)  // room for one panel's rows taken back out
            b += KERNELS_PANEL_ROWS * t->jobs[j].w->row_bytes;
        if (b > need)
            need = b;
    }
    need = (need + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (need <= c->panel_bytes)
        return true;
    size_t total;
    if (!size_mul(&total, need, (size_t)c->n_threads))
        return false;
    uint8_t *p = aligned_alloc_bytes(total);
    if (!p)
        return false;
    free(c->panels);
    c->panels = p;
    c->panel_bytes = need;
    return true;
}

// Each job's kernels and whether it takes the panels; jobs sharing an
// activation format form a group. Returns the tile height chunks must be a
// multiple of, and the jobs' rows in *total_rows.
static int mm_group_jobs(struct mm_task *t, int64_t *total_rows)
{
    int tile_nr = 1;
    for (int j = 0; j < t->n_jobs; j++) {
        const struct engine_tensor *w = t->jobs[j].w;
        ASSERT(w->ne[0] == t->n_in);
        t->kt[j] = kernels_get(w->type);
        ASSERT(t->kt[j] != NULL);
        uint32_t vdt = t->kt[j]->vec_dot_type;
        t->panel[j] = t->kt[j]->panel_gemm && t->n_rows >= KERNELS_PANEL_MIN_COLS &&
                      kernels_panel_bytes(w->type, t->n_in) > 0;
        int g = 0;
        while (g < t->n_groups && (t->group_vdt[g] != vdt || t->group_panel[g] != t->panel[j]))
            g++;
        if (g == t->n_groups) {
            t->group_vdt[t->n_groups] = vdt;
            t->group_panel[t->n_groups++] = t->panel[j];
        }
        t->group_of[j] = g;
        *total_rows += w->ne[1];
        if (t->kt[j]->gemm && t->n_rows > 1 && t->kt[j]->gemm_nr > tile_nr)
            tile_nr = t->kt[j]->gemm_nr;
        if (t->panel[j] && tile_nr < KERNELS_PANEL_ROWS)
            tile_nr = KERNELS_PANEL_ROWS;
        if (w->interleave > tile_nr)
            tile_nr = w->interleave;
    }
    return tile_nr;
}

static void cpu_matmul(struct engine_backend *be, const struct engine_matmul_job *jobs, int n_jobs,
                       const float *x, int64_t n_rows)
{
    struct cpu *c = cpu_of(be);
    ASSERT(n_jobs >= 1 && n_jobs <= CPU_MAX_JOBS);
    struct mm_task t;
    memset(&t, 0, sizeof t);
    t.cpu = c;
    t.jobs = jobs;
    t.n_jobs = n_jobs;
    t.x = x;
    t.n_rows = n_rows;
    t.n_in = jobs[0].w->ne[0];
    int64_t total_rows = 0;
    const int tile_nr = mm_group_jobs(&t, &total_rows);
    // About 8 chunks per thread for load balance; at least 16 rows; a
    // multiple of the gemm tile height; at most 64 rows for batches (the
    // chunk's weight rows then stay in L2 while all activation rows pass).
    int64_t chunk = total_rows / ((int64_t)c->n_threads * 8);
    if (n_rows > 1 && chunk > 64)
        chunk = 64;
    if (chunk < 16)
        chunk = 16;
    chunk = (chunk + tile_nr - 1) / tile_nr * tile_nr;
    t.chunk_rows = chunk;
    if (!cpu_panel_scratch(c, &t)) {
        // no memory for the panels: the plain products
        for (int j = 0; j < n_jobs; j++)
            t.panel[j] = false;
        for (int g = 0; g < t.n_groups; g++)
            t.group_panel[g] = false;
    }
    int64_t next[CPU_MAX_JOBS] = {0};
    for (int j = 0; j < n_jobs; j++) {
        int g = t.group_of[j];
        t.chunk_start[j] = next[g];
        next[g] += (jobs[j].w->ne[1] + chunk - 1) / chunk;
        t.chunk_end[j] = next[g];
    }
    t.private_rows = n_rows == 1;
    // Home ranges pay where the weights stream from memory (a few activation
    // rows: +8-12 % at 8 decoding streams); a prompt's chunks are compute-bound
    // and ran 9-12 % slower with them than dealt out alternately: one range.
    t.n_ranges = n_rows > CPU_RANGE_ROWS         ? 1
                 : c->n_threads < CPU_MAX_RANGES ? c->n_threads
                                                 : CPU_MAX_RANGES;
    for (int g = 0; g < t.n_groups; g++) {
        t.n_chunks[g] = next[g];
        for (int rg = 0; rg < t.n_ranges; rg++)
            atomic_init(&t.cursor[g][rg], t.n_chunks[g] * rg / t.n_ranges);
        size_t rb = mm_group_row_bytes(&t, g);
        if (t.group_vdt[g] != GGUF_TYPE_F32) {
            ASSERT(rb * (size_t)n_rows <= c->wdata_bytes);
            if (rb * (size_t)c->n_threads > c->wdata_bytes)
                t.private_rows = false;
        }
    }
    // Small products (tiny models) run on the caller: waking the pool would
    // cost more than the work.
    if (c->n_threads == 1 || total_rows * t.n_in * n_rows < CPU_INLINE_MATMUL)
        mm_task_run(&t, 0, 1);
    else
        engine_pool_run(c->pool, mm_task_run, &t);
}

// ---------------------------------------------------------------------------
// Norms (sums in double, scale in f32, as the reference).

struct norm_ctx {
    float *y;
    const float *x, *w, *b;
    int64_t n;
    float eps;
};

static void rmsnorm_range(void *p, int64_t r0, int64_t r1)
{
    struct norm_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->n;
        float *y = c->y + r * c->n;
        double sum = 0;
        for (int64_t i = 0; i < c->n; i++)
            sum += (double)(x[i] * x[i]);
        float mean = (float)(sum / (double)c->n);
        float scale = 1.0f / sqrtf(mean + c->eps);
        if (c->w)
            for (int64_t i = 0; i < c->n; i++)
                y[i] = (x[i] * scale) * c->w[i];
        else
            for (int64_t i = 0; i < c->n; i++)
                y[i] = x[i] * scale;
    }
}

static void cpu_rmsnorm(struct engine_backend *be, float *y, const float *x, const float *w,
                        int64_t n_rows, int64_t n, float eps)
{
    struct norm_ctx c = {y, x, w, NULL, n, eps};
    par_rows(cpu_of(be), n_rows, n * 3, rmsnorm_range, &c);
}

static void layernorm_range(void *p, int64_t r0, int64_t r1)
{
    struct norm_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->n;
        float *y = c->y + r * c->n;
        double sum = 0;
        for (int64_t i = 0; i < c->n; i++)
            sum += (double)x[i];
        float mean = (float)(sum / (double)c->n);
        double var = 0;
        for (int64_t i = 0; i < c->n; i++) {
            float d = x[i] - mean;
            var += (double)(d * d);
        }
        float scale = 1.0f / sqrtf((float)(var / (double)c->n) + c->eps);
        for (int64_t i = 0; i < c->n; i++) {
            float v = (x[i] - mean) * scale;
            if (c->w)
                v *= c->w[i];
            if (c->b)
                v += c->b[i];
            y[i] = v;
        }
    }
}

static void cpu_layernorm(struct engine_backend *be, float *y, const float *x, const float *w,
                          const float *b, int64_t n_rows, int64_t n, float eps)
{
    struct norm_ctx c = {y, x, w, b, n, eps};
    par_rows(cpu_of(be), n_rows, n * 5, layernorm_range, &c);
}

// ---------------------------------------------------------------------------
// RoPE.

#define ROPE_MAX_PAIRS 512

static void rope_head(float *x, int n_rot, enum engine_rope_mode mode, const float *cs,
                      const float *sn)
{
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        int a = mode == ENGINE_ROPE_NEOX ? i : 2 * i;
        int b = mode == ENGINE_ROPE_NEOX ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * cs[i] - x1 * sn[i];
        x[b] = x0 * sn[i] + x1 * cs[i];
    }
}

struct rope_ctx {
    float *x;
    int n_head, head_dim;
    const int32_t *pos;
    const struct engine_rope *rp;
    int64_t n_rows;  // stride of M-RoPE's position streams
};

static void rope_range(void *p, int64_t r0, int64_t r1)
{
    struct rope_ctx *c = p;
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    bool multi = engine_rope_is_multi(c->rp);
    for (int64_t r = r0; r < r1; r++) {
        if (multi) {
            float p4[4];
            for (int k = 0; k < 4; k++)
                p4[k] = (float)c->pos[r + k * c->n_rows];
            engine_rope_cache_multi(c->rp, p4, cs, sn);
        } else {
            engine_rope_cache(c->rp, (float)c->pos[r], cs, sn);
        }
        for (int h = 0; h < c->n_head; h++)
            rope_head(c->x + (r * c->n_head + h) * c->head_dim, c->rp->n_rot, c->rp->mode, cs, sn);
    }
}

static void cpu_rope(struct engine_backend *be, float *x, int64_t n_rows, int n_head, int head_dim,
                     const int32_t *pos, const struct engine_rope *rp)
{
    ASSERT(rp->n_rot <= head_dim && rp->n_rot / 2 <= ROPE_MAX_PAIRS);
    struct rope_ctx c = {x, n_head, head_dim, pos, rp, n_rows};
    par_rows(cpu_of(be), n_rows, (int64_t)n_head * head_dim * 4 + rp->n_rot * 20, rope_range, &c);
}

// ---------------------------------------------------------------------------
// KV cache.

static void kv_row_from_f32(uint32_t kv_type, const float *src, void *dst, int64_t n)
{
    switch (kv_type) {
    case GGUF_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case GGUF_TYPE_F16:
        kernels_f32_to_f16_row(src, dst, n);
        break;
    case GGUF_TYPE_Q8_0:
        kernels_get(GGUF_TYPE_Q8_0)->from_float(src, dst, n);
        break;
    default:
        quant_traits_get(kv_type)->from_float_ref(src, dst, n);
        break;
    }
}

static void kv_row_to_f32(uint32_t kv_type, const void *src, float *dst, int64_t n)
{
    switch (kv_type) {
    case GGUF_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case GGUF_TYPE_F16:
        kernels_f16_to_f32_row(src, dst, n);
        break;
    default:
        quant_traits_get(kv_type)->to_float(src, dst, n);
        break;
    }
}

struct kv_store_ctx {
    const struct engine_kv_layer *kv;
    uint32_t kv_type;
    const int32_t *cells;
    const float *k, *v;
    int64_t kv_dim;
};

static void kv_store_range(void *p, int64_t r0, int64_t r1)
{
    struct kv_store_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        size_t off = (size_t)c->cells[r] * c->kv->row_bytes;
        kv_row_from_f32(c->kv_type, c->k + r * c->kv_dim, (uint8_t *)c->kv->k + off, c->kv_dim);
        if (c->kv->v != c->kv->k)
            kv_row_from_f32(c->kv_type, c->v + r * c->kv_dim, (uint8_t *)c->kv->v + off, c->kv_dim);
    }
}

static void cpu_kv_store(struct engine_backend *be, const struct engine_kv_layer *kv,
                         uint32_t kv_type, const int32_t *cells, const float *k, const float *v,
                         int64_t n_rows, int64_t kv_dim)
{
    struct kv_store_ctx c = {kv, kv_type, cells, k, v, kv_dim};
    par_rows(cpu_of(be), n_rows, kv_dim * 4, kv_store_range, &c);
}

struct kv_shift_ctx {
    const struct engine_kv_layer *kv;
    uint32_t kv_type;
    int64_t c0;
    int32_t delta;
    int n_head_kv, head_dim;
    const struct engine_rope *rp;
    const float *cs, *sn;
};

static void kv_shift_range(void *p, int64_t r0, int64_t r1)
{
    struct kv_shift_ctx *c = p;
    int64_t kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    float *row = xmalloc((size_t)kv_dim * sizeof(float));
    for (int64_t r = r0; r < r1; r++) {
        void *dst = (uint8_t *)c->kv->k + (size_t)(c->c0 + r) * c->kv->row_bytes;
        kv_row_to_f32(c->kv_type, dst, row, kv_dim);
        for (int h = 0; h < c->n_head_kv; h++)
            rope_head(row + (int64_t)h * c->head_dim, c->rp->n_rot, c->rp->mode, c->cs, c->sn);
        kv_row_from_f32(c->kv_type, row, dst, kv_dim);
    }
    free(row);
}

static void cpu_kv_shift(struct engine_backend *be, const struct engine_kv_layer *kv,
                         uint32_t kv_type, int64_t c0, int64_t n, int32_t delta, int n_head_kv,
                         int head_dim, const struct engine_rope *rp)
{
    // Rotations compose: rotating a key stored at position p by the angle
    // of position delta gives the key at p + delta.
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    engine_rope_cache(rp, (float)delta, cs, sn);
    struct kv_shift_ctx c = {kv, kv_type, c0, delta, n_head_kv, head_dim, rp, cs, sn};
    par_rows(cpu_of(be), n, (int64_t)n_head_kv * head_dim * 8, kv_shift_range, &c);
}

static void cpu_kv_move(struct engine_backend *be, const struct engine_kv_layer *kv, int64_t dst,
                        int64_t src, int64_t n)
{
    (void)be;
    if (n <= 0 || dst == src)
        return;
    size_t rb = kv->row_bytes;
    memmove((uint8_t *)kv->k + (size_t)dst * rb, (uint8_t *)kv->k + (size_t)src * rb,
            (size_t)n * rb);
    if (kv->v != kv->k)
        memmove((uint8_t *)kv->v + (size_t)dst * rb, (uint8_t *)kv->v + (size_t)src * rb,
                (size_t)n * rb);
}

// ---------------------------------------------------------------------------
// Attention: the flash-style kernel of engine/attention.c.

static void cpu_attention(struct engine_backend *be, float *out, const float *q, int64_t n_rows,
                          const struct engine_kv_layer *kv, const int32_t *cell0,
                          const int32_t *n_visible, const struct engine_attn *a)
{
    struct cpu *c = cpu_of(be);
    engine_attention_cpu(c->pool, c->n_threads, &c->attn_ws, out, q, n_rows, kv, cell0, n_visible,
                         a);
}

// ---------------------------------------------------------------------------
// Softmax and element-wise ops.

struct softmax_ctx {
    float *x;
    int64_t n;
    float scale;
};

static void softmax_range(void *p, int64_t r0, int64_t r1)
{
    struct softmax_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        float *x = c->x + r * c->n;
        float max = -INFINITY;
        for (int64_t i = 0; i < c->n; i++) {
            x[i] *= c->scale;
            if (x[i] > max)
                max = x[i];
        }
        double sum = 0;
        for (int64_t i = 0; i < c->n; i++) {
            x[i] = expf(x[i] - max);
            sum += (double)x[i];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < c->n; i++)
            x[i] *= inv;
    }
}

static void cpu_softmax(struct engine_backend *be, float *x, int64_t n_rows, int64_t n, float scale)
{
    struct softmax_ctx c = {x, n, scale};
    par_rows(cpu_of(be), n_rows, n * 8, softmax_range, &c);
}

enum ew_kind {
    EW_ADD,
    EW_MUL,
    EW_SCALE,
    EW_RELU_SQR,
    EW_SOFTCAP,
    EW_SILU_GLU,
    EW_GELU_GLU,
    EW_SIGMOID_MUL,
};

struct ew_ctx {
    enum ew_kind kind;
    float *y;
    const float *a, *b;
    float s;
};

static void ew_range(void *p, int64_t i0, int64_t i1)
{
    struct ew_ctx *c = p;
    float *y = c->y;
    const float *a = c->a, *b = c->b;
    switch (c->kind) {
    case EW_ADD:
        for (int64_t i = i0; i < i1; i++)
            y[i] = a[i] + b[i];
        break;
    case EW_MUL:
        for (int64_t i = i0; i < i1; i++)
            y[i] = a[i] * b[i];
        break;
    case EW_SCALE:
        for (int64_t i = i0; i < i1; i++)
            y[i] = a[i] * c->s;
        break;
    case EW_RELU_SQR:
        for (int64_t i = i0; i < i1; i++)
            y[i] = a[i] > 0.0f ? a[i] * a[i] : 0.0f;
        break;
    case EW_SOFTCAP:
        for (int64_t i = i0; i < i1; i++)
            y[i] = engine_softcap_f32(a[i], c->s);
        break;
    case EW_SILU_GLU:
        kernels_silu_glu(y + i0, a + i0, b + i0, i1 - i0);
        break;
    case EW_GELU_GLU:
        kernels_gelu_glu(y + i0, a + i0, b + i0, i1 - i0);
        break;
    case EW_SIGMOID_MUL:
        for (int64_t i = i0; i < i1; i++)
            y[i] = a[i] / (1.0f + expf(-b[i]));
        break;
    }
}

static void run_ew(struct engine_backend *be, struct ew_ctx *c, int64_t n)
{
    int64_t cost = c->kind >= EW_SOFTCAP ? 20 : 1;
    par_rows(cpu_of(be), n, cost, ew_range, c);
}

static void cpu_glu(struct engine_backend *be, float *y, const float *gate, const float *up,
                    int64_t n, bool gelu)
{
    struct ew_ctx c = {gelu ? EW_GELU_GLU : EW_SILU_GLU, y, gate, up, 0};
    run_ew(be, &c, n);
}

static void cpu_add(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n)
{
    struct ew_ctx c = {EW_ADD, y, a, b, 0};
    run_ew(be, &c, n);
}

static void cpu_mul(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n)
{
    struct ew_ctx c = {EW_MUL, y, a, b, 0};
    run_ew(be, &c, n);
}

static void cpu_sigmoid_mul(struct engine_backend *be, float *y, const float *a, const float *b,
                            int64_t n)
{
    struct ew_ctx c = {EW_SIGMOID_MUL, y, a, b, 0};
    run_ew(be, &c, n);
}

static void cpu_scale(struct engine_backend *be, float *y, const float *x, float s, int64_t n)
{
    struct ew_ctx c = {EW_SCALE, y, x, NULL, s};
    run_ew(be, &c, n);
}

static void cpu_relu_sqr(struct engine_backend *be, float *y, const float *x, int64_t n)
{
    struct ew_ctx c = {EW_RELU_SQR, y, x, NULL, 0};
    run_ew(be, &c, n);
}

static void cpu_softcap(struct engine_backend *be, float *y, const float *x, float cap, int64_t n)
{
    struct ew_ctx c = {EW_SOFTCAP, y, x, NULL, cap};
    run_ew(be, &c, n);
}

static void cpu_gather(struct engine_backend *be, float *y, const float *x, const int32_t *idx,
                       int64_t n_rows, int64_t n)
{
    (void)be;
    for (int64_t r = 0; r < n_rows; r++)
        memmove(y + r * n, x + (int64_t)idx[r] * n, (size_t)n * sizeof(float));
}

// Row ops of Gemma 3n's AltUp: one context for the three, each row on its own.
struct altup_ctx {
    float *y;
    const float *base, *x, *ref;
    const float *const *srcs;
    const float *c;
    int k;
    int64_t c_stride, n;
    float std_mul;
};

static void rows_mix_range(void *p, int64_t r0, int64_t r1)
{
    const struct altup_ctx *a = p;
    for (int64_t r = r0; r < r1; r++) {
        float *y = a->y + r * a->n;
        const float *c = a->c + r * a->c_stride;
        if (a->base)
            memmove(y, a->base + r * a->n, (size_t)a->n * sizeof *y);
        else
            memset(y, 0, (size_t)a->n * sizeof *y);
        for (int s = 0; s < a->k; s++) {
            const float *x = a->srcs[s] + r * a->n, w = c[s];
            for (int64_t i = 0; i < a->n; i++)
                y[i] += w * x[i];
        }
    }
}

static double row_norm(const float *x, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i] * x[i];
    return sqrt(sum);
}

static void rows_rescale_range(void *p, int64_t r0, int64_t r1)
{
    const struct altup_ctx *a = p;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * a->n;
        const float f = (float)(row_norm(a->ref + r * a->n, a->n) / row_norm(x, a->n));
        float *y = a->y + r * a->n;
        for (int64_t i = 0; i < a->n; i++)
            y[i] = x[i] * f;
    }
}

static void gauss_topk_range(void *p, int64_t r0, int64_t r1)
{
    const struct altup_ctx *a = p;
    const int64_t n = a->n;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * n;
        double sum = 0, var = 0;
        for (int64_t i = 0; i < n; i++)
            sum += x[i];
        const double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++)
            var += (x[i] - mean) * (x[i] - mean);
        const float cut = (float)(mean + a->std_mul * sqrt(var / (double)(n > 1 ? n - 1 : 1)));
        float *y = a->y + r * n;
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > cut ? x[i] - cut : 0.0f;
    }
}

static void cpu_rows_mix(struct engine_backend *be, float *y, const float *base,
                         const float *const *x, int k, const float *c, int64_t c_stride,
                         int64_t n_rows, int64_t n)
{
    struct altup_ctx a = {
        .y = y, .base = base, .srcs = x, .k = k, .c = c, .c_stride = c_stride, .n = n};
    par_rows(cpu_of(be), n_rows, n * (k + 1), rows_mix_range, &a);
}

static void cpu_rows_rescale(struct engine_backend *be, float *y, const float *x, const float *ref,
                             int64_t n_rows, int64_t n)
{
    struct altup_ctx a = {.y = y, .x = x, .ref = ref, .n = n};
    par_rows(cpu_of(be), n_rows, 3 * n, rows_rescale_range, &a);
}

static void cpu_gauss_topk(struct engine_backend *be, float *y, const float *x, float std_mul,
                           int64_t n_rows, int64_t n)
{
    struct altup_ctx a = {.y = y, .x = x, .n = n, .std_mul = std_mul};
    par_rows(cpu_of(be), n_rows, 3 * n, gauss_topk_range, &a);
}

static void cpu_moe(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                    const struct engine_moe *p)
{
    struct cpu *c = cpu_of(be);
    engine_cpu_moe(c->pool, c->n_threads, &c->moe_ws, y, x, n_rows, p);
}

static int cpu_moe_reserve(struct engine_backend *be, int64_t max_rows, const struct engine_moe *p,
                           struct err *e)
{
    return engine_cpu_moe_reserve(&cpu_of(be)->moe_ws, max_rows, p, e);
}

static void cpu_conv1d(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                       const struct engine_conv1d *p, float *state, const int32_t *slot,
                       const int32_t *pos)
{
    engine_cpu_conv1d(cpu_of(be)->pool, y, x, n_rows, p, state, slot, pos);
}

static void cpu_delta_net(struct engine_backend *be, float *o, const float *q, const float *k,
                          const float *v, const float *g, const float *beta, int64_t n_rows,
                          const struct engine_delta_net *p, float *state, const int32_t *slot,
                          const int32_t *pos)
{
    engine_cpu_delta_net(cpu_of(be)->pool, o, q, k, v, g, beta, n_rows, p, state, slot, pos);
}

static void cpu_ssm_scan(struct engine_backend *be, float *y, const float *x, const float *dt,
                         const float *B, const float *C, int64_t n_rows,
                         const struct engine_ssm_scan *p, float *state, const int32_t *slot,
                         const int32_t *pos)
{
    engine_cpu_ssm_scan(cpu_of(be)->pool, y, x, dt, B, C, n_rows, p, state, slot, pos);
}

// ---------------------------------------------------------------------------
// Backend object.

static void cpu_destroy(struct engine_backend *be)
{
    struct cpu *c = cpu_of(be);
    engine_pool_free(c->pool);
    free(c->wdata);
    free(c->panels);
    engine_attn_ws_free(&c->attn_ws);
    engine_moe_ws_free(&c->moe_ws);
    free(c);
}

static const struct engine_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_read = cpu_buf_copy,
    .buf_write = cpu_buf_copy,
    .reserve = cpu_reserve,
    .get_rows = cpu_get_rows,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .layernorm = cpu_layernorm,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .kv_shift = cpu_kv_shift,
    .kv_move = cpu_kv_move,
    .softmax = cpu_softmax,
    .glu = cpu_glu,
    .softcap = cpu_softcap,
    .add = cpu_add,
    .mul = cpu_mul,
    .sigmoid_mul = cpu_sigmoid_mul,
    .scale = cpu_scale,
    .relu_sqr = cpu_relu_sqr,
    .gather = cpu_gather,
    .rows_mix = cpu_rows_mix,
    .rows_rescale = cpu_rows_rescale,
    .gauss_topk = cpu_gauss_topk,
    .moe = cpu_moe,
    .moe_reserve = cpu_moe_reserve,
    .conv1d = cpu_conv1d,
    .delta_net = cpu_delta_net,
    .ssm_scan = cpu_ssm_scan,
};

int engine_cpu_new(struct engine_backend **out, int n_threads, struct err *e)
{
    struct cpu *c = xcalloc(1, sizeof *c);
    c->base.ops = &cpu_ops;
    c->pool = engine_pool_new(n_threads, e);
    if (!c->pool) {
        free(c);
        return e ? e->code : ERR_INTERNAL;
    }
    c->n_threads = engine_pool_n_threads(c->pool);
    *out = &c->base;
    return 0;
}

int engine_cpu_n_threads(const struct engine_backend *be)
{
    return ((const struct cpu *)be)->n_threads;
}

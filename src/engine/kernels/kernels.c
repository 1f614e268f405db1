// Run-time dispatch: detects the CPU once and builds, for each ISA level, a
// table of kernels where each field comes from the highest level at or below
// it that has one (x86: scalar < AVX2 < AVX-512; arm64: scalar < NEON).
//
// OLLAMA_KERNELS_ISA=scalar|avx2|avx512|neon caps the level kernels_best_isa
// picks (for benchmarks and for chasing a numerical difference).
#include "engine/kernels/kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/kernels/internal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

static const char *const isa_names[KERNELS_ISA_COUNT_] = {
    [KERNELS_ISA_SCALAR] = "scalar",
    [KERNELS_ISA_AVX2] = "avx2",
    [KERNELS_ISA_AVX512] = "avx512",
    [KERNELS_ISA_NEON] = "neon",
};

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static bool isa_ok[KERNELS_ISA_COUNT_];
static bool has_avx512_bf16;  // vdpbf16ps (CPUID 7.1 EAX bit 5)
static enum kernels_isa best_isa;
// Resolved tables per ISA (written once under detect_once, read-only after).
static struct kernels_type resolved[KERNELS_ISA_COUNT_][KERNELS_NTYPES];
static struct kernels_ops resolved_ops[KERNELS_ISA_COUNT_];

#if defined(__x86_64__)
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect_x86(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
         f16c = c & (1u << 29);
    if (!osxsave || !avx)
        return;
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6)  // OS saves SSE and AVX state
        return;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return;
    bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512dq = b & (1u << 17),
         avx512bw = b & (1u << 30), avx512vl = b & (1u << 31), vnni = c & (1u << 11);
    isa_ok[KERNELS_ISA_AVX2] = avx2 && fma && f16c;
    isa_ok[KERNELS_ISA_AVX512] = isa_ok[KERNELS_ISA_AVX2] && avx512f && avx512dq && avx512bw &&
                                 avx512vl && vnni && (xcr0 & 0xE0) == 0xE0;
    has_avx512_bf16 =
        isa_ok[KERNELS_ISA_AVX512] && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}
#endif

// Copies the non-NULL fields of an ISA's sparse table over the level below.
static void overlay(struct kernels_type *dst, const struct kernels_type *src)
{
    for (int t = 0; t < KERNELS_NTYPES; t++) {
        if (!src[t].vec_dot && !src[t].gemm && !src[t].from_float && !src[t].gemm_x8 &&
            !src[t].panel_gemm)
            continue;
        if (src[t].panel_gemm) {
            dst[t].panel_from_float = src[t].panel_from_float;
            dst[t].panel_decode = src[t].panel_decode;
            dst[t].panel_gemm = src[t].panel_gemm;
        }
        if (src[t].gemm_x8)
            dst[t].gemm_x8 = src[t].gemm_x8;
        if (src[t].from_float)
            dst[t].from_float = src[t].from_float;
        if (src[t].vec_dot && !dst[t].vec_dot)  // a type new at this level
            dst[t].vec_dot_type = src[t].vec_dot_type;
        if (src[t].vec_dot)
            dst[t].vec_dot = src[t].vec_dot;
        if (src[t].gemm) {
            dst[t].gemm = src[t].gemm;
            dst[t].gemm_nr = src[t].gemm_nr;
            dst[t].gemm_nc = src[t].gemm_nc;
        }
    }
}

static void overlay_ops(struct kernels_ops *dst, const struct kernels_ops *src)
{
#define OV(f)                                                                                      \
    if (src->f)                                                                                    \
        dst->f = src->f;
    OV(f16_to_f32_row)
    OV(f32_to_f16_row)
    OV(dot_f32) OV(axpy_f32) OV(dot_f16_f32) OV(axpy_f16) OV(silu_glu) OV(gelu_glu) OV(ssm_step)
#undef OV
}

// The level each ISA starts from, and the CPU features a table may need
// beyond its ISA (tables.def's third column).
static const enum kernels_isa isa_below[KERNELS_ISA_COUNT_] = {
    [KERNELS_ISA_AVX2] = KERNELS_ISA_SCALAR,
    [KERNELS_ISA_AVX512] = KERNELS_ISA_AVX2,
    [KERNELS_ISA_NEON] = KERNELS_ISA_SCALAR,
};
enum { NEED_BASE, NEED_AVX512_BF16, NEED_COUNT_ };
static bool has_need[NEED_COUNT_];

static const struct isa_table {
    enum kernels_isa isa;
    const struct kernels_type *table;
    int need;
} isa_tables[] = {
#define KERNELS_TABLE(isa, table, needs) {KERNELS_ISA_##isa, table, NEED_##needs},
#define KERNELS_OPS(isa, ops)
#include "engine/kernels/tables.def"
#undef KERNELS_TABLE
#undef KERNELS_OPS
};

static const struct isa_ops {
    enum kernels_isa isa;
    const struct kernels_ops *ops;
} isa_ops[] = {
#define KERNELS_TABLE(isa, table, needs)
#define KERNELS_OPS(isa, ops) {KERNELS_ISA_##isa, &ops},
#include "engine/kernels/tables.def"
#undef KERNELS_TABLE
#undef KERNELS_OPS
};

// Level isa: the level below it, then its registered tables in order. The
// levels are resolved in enum order, so the one below is ready.
static void resolve(enum kernels_isa isa)
{
    if (isa != KERNELS_ISA_SCALAR) {
        memcpy(resolved[isa], resolved[isa_below[isa]], sizeof(resolved[0]));
        resolved_ops[isa] = resolved_ops[isa_below[isa]];
    }
    for (size_t i = 0; i < sizeof isa_tables / sizeof isa_tables[0]; i++)
        if (isa_tables[i].isa == isa && has_need[isa_tables[i].need])
            overlay(resolved[isa], isa_tables[i].table);
    for (size_t i = 0; i < sizeof isa_ops / sizeof isa_ops[0]; i++)
        if (isa_ops[i].isa == isa)
            overlay_ops(&resolved_ops[isa], isa_ops[i].ops);
}

static void detect(void)
{
    isa_ok[KERNELS_ISA_SCALAR] = true;
#if defined(__x86_64__)
    detect_x86();
#elif defined(__aarch64__)
    isa_ok[KERNELS_ISA_NEON] = true;  // NEON is part of the arm64 base
#endif
    has_need[NEED_BASE] = true;
    has_need[NEED_AVX512_BF16] = has_avx512_bf16;
    for (int i = 0; i < KERNELS_ISA_COUNT_; i++)
        resolve((enum kernels_isa)i);
    best_isa = KERNELS_ISA_SCALAR;
    for (int i = 0; i < KERNELS_ISA_COUNT_; i++)
        if (isa_ok[i])
            best_isa = (enum kernels_isa)i;
    const char *cap = getenv("OLLAMA_KERNELS_ISA");
    if (cap && *cap) {
        for (int i = 0; i < KERNELS_ISA_COUNT_; i++)
            if (strcasecmp(cap, isa_names[i]) == 0 && isa_ok[i] && i < (int)best_isa)
                best_isa = (enum kernels_isa)i;
    }
}

enum kernels_isa kernels_best_isa(void)
{
    pthread_once(&detect_once, detect);
    return best_isa;
}

const char *kernels_isa_name(enum kernels_isa isa)
{
    return (unsigned)isa < KERNELS_ISA_COUNT_ ? isa_names[isa] : "unknown";
}

bool kernels_isa_supported(enum kernels_isa isa)
{
    pthread_once(&detect_once, detect);
    return (unsigned)isa < KERNELS_ISA_COUNT_ && isa_ok[isa];
}

const struct kernels_type *kernels_get_isa(uint32_t type, enum kernels_isa isa)
{
    if (!kernels_isa_supported(isa) || type >= KERNELS_NTYPES)
        return NULL;
    const struct kernels_type *k = &resolved[isa][type];
    return k->vec_dot ? k : NULL;
}

const struct kernels_type *kernels_get(uint32_t type)
{
    return kernels_get_isa(type, kernels_best_isa());
}

void kernels_matmul(const struct kernels_type *k, int64_t n, float *s, size_t s_stride,
                    const void *w, size_t w_stride, const void *x, size_t x_stride, int nr, int nc)
{
    // One column streams the weights once: the plain dot product measured
    // as fast or faster than a one-column tile (bench/kernels).
    if (k->gemm && nc >= 2) {
        k->gemm(n, s, s_stride, w, w_stride, x, x_stride, nr, nc);
        return;
    }
    const uint8_t *wp = w, *xp = x;
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            k->vec_dot(n, s + (size_t)c * s_stride + r, wp + (size_t)r * w_stride,
                       xp + (size_t)c * x_stride);
}

// Row j's block b into lane j of the 8-row block g of each layout (and,
// for the inverses below, lane j of g back into b: the same signature with
// the first two roles swapped).
typedef void (*x8_put_fn)(void *dst, const void *src, int j);

// The layouts made of the 8 rows' scales (ss bytes each, at b_s in a
// block) followed, at g_q in the group, by their quant bytes 4 at a time
// (qbytes from b_q in a block): lane j of group g from block b, and back.
static void put_lanes(uint8_t *g, const uint8_t *b, int j, size_t ss, size_t b_s, size_t g_q,
                      size_t b_q, size_t qbytes)
{
    memcpy(g + ss * (size_t)j, b + b_s, ss);
    for (size_t p = 0; p < qbytes / 4; p++)
        memcpy(g + g_q + 32 * p + 4 * (size_t)j, b + b_q + 4 * p, 4);
}

static void take_lanes(uint8_t *b, const uint8_t *g, int j, size_t ss, size_t b_s, size_t g_q,
                       size_t b_q, size_t qbytes)
{
    memcpy(b + b_s, g + ss * (size_t)j, ss);
    for (size_t p = 0; p < qbytes / 4; p++)
        memcpy(b + b_q + 4 * p, g + g_q + 32 * p + 4 * (size_t)j, 4);
}

// Q4_0, Q8_0: the 8 rows' f16 scales, then their quants 4 bytes at a time
// (Q4_0: the packed nibble bytes, 16 per row; Q8_0: the 32 quants).
static void put_legacy(uint8_t *o, const uint8_t *b, int j, size_t qbytes)
{
    put_lanes(o, b, j, 2, 0, 16, 2, qbytes);
}

static void put_q4_0(void *g, const void *b, int j)
{
    put_legacy(g, b, j, QK4_0 / 2);
}

static void put_q8_0(void *g, const void *b, int j)
{
    put_legacy(g, b, j, QK8_0);
}

// Q5_0: see struct block_q5_0x8.
static void put_q5_0(void *vg, const void *vb, int j)
{
    struct block_q5_0x8 *g = vg;
    const struct block_q5_0 *b = vb;
    uint32_t h;
    memcpy(&h, b->qh, 4);
    g->d[j] = b->d;
    for (int t = 0; t < 4; t++) {
        uint8_t v = 0;
        for (int p = 0; p < 4; p++)
            v |=
                (uint8_t)(((h >> (4 * p + t)) & 1) << p | ((h >> (16 + 4 * p + t)) & 1) << (4 + p));
        g->qh[4 * j + t] = v;
    }
    for (int p = 0; p < 4; p++)
        memcpy(&g->qs[32 * p + 4 * j], &b->qs[4 * p], 4);
}

// Q4_1 / Q5_1: a block is Q4_0's / Q5_0's (base_size bytes: d, then the
// rest) with its f16 min after d; the 8-row layout is the base type's for
// lane j, then the 8 mins.
static void put_with_min(uint8_t *g, const uint8_t *b, int j, x8_put_fn put_base, size_t base_size)
{
    uint8_t t[sizeof(struct block_q5_0)];
    memcpy(t, b, 2);
    memcpy(t + 2, b + 4, base_size - 2);
    put_base(g, t, j);
    memcpy(g + 8 * base_size + 2 * (size_t)j, b + 2, 2);
}

static void put_q4_1(void *g, const void *b, int j)
{
    put_with_min(g, b, j, put_q4_0, sizeof(struct block_q4_0));
}

static void put_q5_1(void *g, const void *b, int j)
{
    put_with_min(g, b, j, put_q5_0, sizeof(struct block_q5_0));
}

// MXFP4: see struct block_mxfp4x8.
static void put_mxfp4(void *g, const void *b, int j)
{
    put_lanes(g, b, j, 1, 0, offsetof(struct block_mxfp4x8, qs), 1, QK_MXFP4 / 2);
}

// TQ2_0: see struct block_tq2_0x8.
static void put_tq2_0(void *g, const void *b, int j)
{
    put_lanes(g, b, j, 2, offsetof(struct block_tq2_0, d), offsetof(struct block_tq2_0x8, qs), 0,
              QK_K / 4);
}

// Q4_K: see struct block_q4_Kx8.
static void put_q4_K(void *vg, const void *vb, int j)
{
    struct block_q4_Kx8 *g = vg;
    const struct block_q4_K *b = vb;
    if (j == 0)
        memset(g->sch, 0, sizeof g->sch);
    g->d[j] = b->d;
    g->dmin[j] = b->dmin;
    uint8_t sc[8], m[8];
    kernels_unpack_scale_min_k4(b->scales, sc, m);
    for (int s = 0; s < 8; s++) {
        const int i = 8 * s + j;
        g->scl[i] = (uint8_t)((sc[s] & 0x0F) | (m[s] & 0x0F) << 4);
        const uint8_t hi = (uint8_t)((sc[s] >> 4) | (m[s] >> 4) << 2);
        g->sch[i % 32] |= (uint8_t)(hi << (i >= 32 ? 4 : 0));
    }
    for (int c = 0; c < 4; c++)
        for (int p = 0; p < 8; p++)
            memcpy(&g->qs[256 * c + 32 * p + 4 * j], &b->qs[32 * c + 4 * p], 4);
}

// Q6_K: see struct block_q6_Kx8.
static void put_q6_K(void *vg, const void *vb, int j)
{
    struct block_q6_Kx8 *g = vg;
    const struct block_q6_K *b = vb;
    g->d[j] = b->d;
    for (int s = 0; s < QK_K / 16; s++) {
        g->sc[8 * s + j] = b->scales[s];
        for (int t = 0; t < 4; t++) {
            int q[4];
            for (int u = 0; u < 4; u++)
                q[u] = kernels_q6_K_quant(b, 16 * s + 4 * u + t);
            g->ql[64 * s + 4 * j + t] = (uint8_t)((q[0] & 15) | (q[1] & 15) << 4);
            g->ql[64 * s + 32 + 4 * j + t] = (uint8_t)((q[2] & 15) | (q[3] & 15) << 4);
            g->qh[32 * s + 4 * j + t] =
                (uint8_t)(q[0] >> 4 | (q[1] >> 4) << 2 | (q[2] >> 4) << 4 | (q[3] >> 4) << 6);
        }
    }
}

// The types with an 8-row layout: block size, and the functions each way
// (take_* below).
struct x8_layout {
    uint32_t type;
    int64_t qk;
    x8_put_fn put, take;
};

static void take_q4_0(void *o, const void *g, int j);
static void take_q5_0(void *o, const void *g, int j);
static void take_q4_1(void *o, const void *g, int j);
static void take_tq2_0(void *o, const void *g, int j);
static void take_mxfp4(void *o, const void *g, int j);
static void take_q5_1(void *o, const void *g, int j);
static void take_q8_0(void *o, const void *g, int j);
static void take_q4_K(void *o, const void *g, int j);
static void take_q6_K(void *o, const void *g, int j);

// The float types: 8 bytes of each row in turn (2 F32, 4 F16 / BF16 values).
static void put_float(void *g, const void *b, int j)
{
    memcpy((uint8_t *)g + 8 * j, b, 8);
}

static void take_float(void *o, const void *g, int j)
{
    memcpy(o, (const uint8_t *)g + 8 * j, 8);
}

static const struct x8_layout x8_layouts[] = {
    {GGUF_TYPE_F32, 2, put_float, take_float},
    {GGUF_TYPE_F16, 4, put_float, take_float},
    {GGUF_TYPE_BF16, 4, put_float, take_float},
    {GGUF_TYPE_Q4_0, QK4_0, put_q4_0, take_q4_0},
    {GGUF_TYPE_Q5_0, QK5_0, put_q5_0, take_q5_0},
    {GGUF_TYPE_Q8_0, QK8_0, put_q8_0, take_q8_0},
    {GGUF_TYPE_Q4_K, QK_K, put_q4_K, take_q4_K},
    {GGUF_TYPE_Q6_K, QK_K, put_q6_K, take_q6_K},
    {GGUF_TYPE_IQ4_NL, QK4_NL, put_q4_0, take_q4_0},  // Q4_0's block, other values
    {GGUF_TYPE_Q4_1, QK4_1, put_q4_1, take_q4_1},
    {GGUF_TYPE_Q5_1, QK5_1, put_q5_1, take_q5_1},
    {GGUF_TYPE_TQ2_0, QK_K, put_tq2_0, take_tq2_0},
    {GGUF_TYPE_MXFP4, QK_MXFP4, put_mxfp4, take_mxfp4},
};

// The layout of `type` for rows of n elements, or NULL.
static const struct x8_layout *x8_layout_of(uint32_t type, int64_t n)
{
    for (size_t i = 0; i < sizeof x8_layouts / sizeof x8_layouts[0]; i++)
        if (x8_layouts[i].type == type)
            return n > 0 && n % x8_layouts[i].qk == 0 ? &x8_layouts[i] : NULL;
    return NULL;
}

bool kernels_interleave_x8(uint32_t type, void *dst, const void *src, int64_t n_rows, int64_t n)
{
    const struct x8_layout *l = x8_layout_of(type, n);
    if (!l || n_rows % 8 != 0)
        return false;
    const int64_t qk = l->qk;
    const x8_put_fn put = l->put;
    const int64_t nb = n / qk;
    const size_t bs = quant_row_size(type, qk), row_bytes = (size_t)nb * bs;
    for (int64_t r0 = 0; r0 < n_rows; r0 += 8)
        for (int64_t k = 0; k < nb; k++)
            for (int j = 0; j < 8; j++)
                put((uint8_t *)dst + (size_t)r0 * row_bytes + (size_t)k * 8 * bs,
                    (const uint8_t *)src + (size_t)(r0 + j) * row_bytes + (size_t)k * bs, j);
    return true;
}

// The inverses: lane j of the 8-row block g back into a block o of the type.
static void take_legacy(uint8_t *o, const uint8_t *g, int j, size_t qbytes, size_t qs_at,
                        size_t o_qs)
{
    take_lanes(o, g, j, 2, 0, qs_at, o_qs, qbytes);
}

static void take_q4_0(void *o, const void *g, int j)
{
    take_legacy(o, g, j, QK4_0 / 2, 16, 2);
}

static void take_q8_0(void *o, const void *g, int j)
{
    take_legacy(o, g, j, QK8_0, 16, 2);
}

static void take_q5_0(void *vo, const void *vg, int j)
{
    const struct block_q5_0x8 *g = vg;
    take_legacy(vo, vg, j, QK5_0 / 2, offsetof(struct block_q5_0x8, qs),
                offsetof(struct block_q5_0, qs));
    uint32_t h = 0;
    for (int t = 0; t < 4; t++)
        for (int p = 0; p < 4; p++)
            h |= (uint32_t)((g->qh[4 * j + t] >> p) & 1) << (4 * p + t) |
                 (uint32_t)((g->qh[4 * j + t] >> (4 + p)) & 1) << (16 + 4 * p + t);
    memcpy(((struct block_q5_0 *)vo)->qh, &h, 4);
}

// The inverse of put_with_min.
static void take_with_min(uint8_t *o, const uint8_t *g, int j, x8_put_fn take_base,
                          size_t base_size)
{
    uint8_t t[sizeof(struct block_q5_0)];
    take_base(t, g, j);
    memcpy(o, t, 2);
    memcpy(o + 2, g + 8 * base_size + 2 * (size_t)j, 2);
    memcpy(o + 4, t + 2, base_size - 2);
}

static void take_q4_1(void *o, const void *g, int j)
{
    take_with_min(o, g, j, take_q4_0, sizeof(struct block_q4_0));
}

static void take_q5_1(void *o, const void *g, int j)
{
    take_with_min(o, g, j, take_q5_0, sizeof(struct block_q5_0));
}

static void take_mxfp4(void *o, const void *g, int j)
{
    take_lanes(o, g, j, 1, 0, offsetof(struct block_mxfp4x8, qs), 1, QK_MXFP4 / 2);
}

static void take_tq2_0(void *o, const void *g, int j)
{
    take_lanes(o, g, j, 2, offsetof(struct block_tq2_0, d), offsetof(struct block_tq2_0x8, qs), 0,
               QK_K / 4);
}

static void take_q4_K(void *vo, const void *vg, int j)
{
    const struct block_q4_Kx8 *g = vg;
    struct block_q4_K *o = vo;
    o->d = g->d[j];
    o->dmin = g->dmin[j];
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; s++)
        kernels_q4_Kx8_scale_min(g->scl, g->sch, s, j, &sc[s], &m[s]);
    for (int i = 0; i < 4; i++) {  // the 12-byte packing kernels_unpack_scale_min_k4 reads
        o->scales[i] = (uint8_t)(sc[i] | (sc[i + 4] >> 4) << 6);
        o->scales[i + 4] = (uint8_t)(m[i] | (m[i + 4] >> 4) << 6);
        o->scales[i + 8] = (uint8_t)((sc[i + 4] & 0x0F) | (m[i + 4] & 0x0F) << 4);
    }
    for (int c = 0; c < 4; c++)
        for (int p = 0; p < 8; p++)
            memcpy(&o->qs[32 * c + 4 * p], &g->qs[256 * c + 32 * p + 4 * j], 4);
}

static void take_q6_K(void *vo, const void *vg, int j)
{
    const struct block_q6_Kx8 *g = vg;
    struct block_q6_K *o = vo;
    o->d = g->d[j];
    memset(o->ql, 0, sizeof o->ql);
    memset(o->qh, 0, sizeof o->qh);
    for (int s = 0; s < QK_K / 16; s++)
        o->scales[s] = g->sc[8 * s + j];
    for (int e = 0; e < QK_K; e++) {
        const int q = kernels_q6_Kx8_quant(g, e, j);
        const int half = e / 128, jj = (e % 128) / 32, l = e % 32;
        o->ql[64 * half + l + ((jj & 1) ? 32 : 0)] |= (uint8_t)((q & 0x0F) << (jj < 2 ? 0 : 4));
        o->qh[32 * half + l] |= (uint8_t)((q >> 4) << (2 * jj));
    }
}

bool kernels_x8_row(uint32_t type, const void *group, int j, int64_t n, void *row)
{
    const struct x8_layout *l = x8_layout_of(type, n);
    if (!l)
        return false;
    const size_t bs = quant_row_size(type, l->qk);
    for (int64_t k = 0; k < n / l->qk; k++)
        l->take((uint8_t *)row + (size_t)k * bs, (const uint8_t *)group + (size_t)k * 8 * bs, j);
    return true;
}

const struct kernels_ops *kernels_ops_isa(enum kernels_isa isa)
{
    return kernels_isa_supported(isa) ? &resolved_ops[isa] : NULL;
}

static const struct kernels_ops *ops(void)
{
    return &resolved_ops[kernels_best_isa()];
}

void kernels_f16_to_f32_row(const uint16_t *x, float *y, int64_t n)
{
    ops()->f16_to_f32_row(x, y, n);
}

void kernels_f32_to_f16_row(const float *x, uint16_t *y, int64_t n)
{
    ops()->f32_to_f16_row(x, y, n);
}

float kernels_dot_f32(const float *a, const float *b, int64_t n)
{
    return ops()->dot_f32(a, b, n);
}

void kernels_axpy_f32(float *y, float a, const float *x, int64_t n)
{
    ops()->axpy_f32(y, a, x, n);
}

float kernels_dot_f16_f32(const uint16_t *a, const float *b, int64_t n)
{
    return ops()->dot_f16_f32(a, b, n);
}

void kernels_axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    ops()->axpy_f16(y, a, x, n);
}

void kernels_silu_glu(float *y, const float *gate, const float *up, int64_t n)
{
    ops()->silu_glu(y, gate, up, n);
}

void kernels_gelu_glu(float *y, const float *gate, const float *up, int64_t n)
{
    ops()->gelu_glu(y, gate, up, n);
}

float kernels_ssm_step(float *s, const float *B, const float *C, float dA, float dx, int64_t n)
{
    return ops()->ssm_step(s, B, C, dA, dx, n);
}

int kernels_panel_sub(uint32_t type)
{
    const struct quant_traits *qt = quant_traits_get(type);
    if (!qt)
        return 0;
    if (qt->iq_decode && qt->block_size == QK_K)
        return 16;  // one sub-block per group scale of the Q8_K-paired types
    if (qt->nl_values && qt->block_size == 32)
        return 32;  // one per block of IQ4_NL / MXFP4
    return 0;
}

int kernels_panel_act(uint32_t type)
{
    int sub = kernels_panel_sub(type);
    return sub == 16 ? QK_K : sub == 32 ? QK8_0 : 0;
}

size_t kernels_panel_bytes(uint32_t type, int64_t n)
{
    int sub = kernels_panel_sub(type);
    if (!sub || n <= 0 || n % kernels_panel_act(type))
        return 0;
    int act = kernels_panel_act(type);
    return (size_t)(n / act) * KERNELS_PANEL_PART_BYTES(sub, act);
}

size_t kernels_panel_act_bytes(uint32_t type, int64_t n)
{
    int act = kernels_panel_act(type);
    if (!act || n <= 0 || n % act)
        return 0;
    return (size_t)n + 4 * (size_t)(n / act);
}

size_t kernels_row_size(uint32_t type, int64_t n)
{
    return quant_row_size(type, n);  // the geometry of the type table
}

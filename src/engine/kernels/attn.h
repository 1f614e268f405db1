// kernels/attn.h: the inner loops of flash-style attention on f32 tiles.
//
// The engine's attention op (engine/attention.c) walks the keys of a slot in
// tiles of KERNELS_ATTN_TILE positions. For each tile it converts the K rows
// of one KV head to f32 (row-major, head dimension padded to a multiple of
// 8 with zeros), transposes them so that one vector holds 8 keys, scores a
// block of queries against all of them (broadcast q[d] times 8 keys: no
// horizontal sums), updates each query's online softmax (running max and
// denominator, exponentials computed 8 at a time) and adds the
// probability-weighted V rows to the query's accumulator.
//
// The same source (attn_tile.inc, written with GCC/clang vector extensions)
// is compiled once per ISA: generic (the baseline instruction set of the
// target: SSE2 on x86-64, NEON on arm64), AVX2+FMA and AVX-512. The scalar
// reference of the whole op is engine_attention_ref (engine/attention.h).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/kernels/kernels.h"

#define KERNELS_ATTN_TILE 32  // keys per tile (4 vectors of 8)

// The stored types the row kernels (qk_rows, pv_rows) read: F16 values, or
// blocks of 32 with an f16 scale: Q8_0 (32 int8), Q4_0 (16 bytes: value i
// in the low nibble of byte i, value 16 + i in its high nibble, minus 8).
enum kernels_kv_fmt {
    KERNELS_KV_F16,
    KERNELS_KV_Q8_0,
    KERNELS_KV_Q4_0,
};

struct kernels_attn {
    // kt[d * TILE + j] = k[j * ldk + d] for j < TILE, d < hdp (hdp % 8 == 0).
    void (*transpose)(const float *k, int ldk, int hdp, float *kt);
    // The same from f16 rows: kt[d * TILE + j] = rows[j][d] for j < nk,
    // d < hd (hd % 8 == 0), and 0 for nk <= j < TILE.
    void (*transpose_f16)(const uint16_t *const *rows, int nk, int hd, float *kt);
    // s[i * TILE + j] = scale * dot(q + i * hdp, key j of kt) for i < nq.
    void (*qk)(int hdp, int nq, const float *q, const float *kt, float scale, float *s);
    // One query's tile of scores s[0..TILE) (masked keys -INFINITY) against
    // its running max *m and denominator *l: turns s into exp(s - m_new),
    // updates *m and *l, and returns the factor exp(m_old - m_new) the
    // query's accumulator must be multiplied by (1 when the max did not
    // move; a fully masked tile leaves s zero and returns 1).
    float (*softmax)(float *s, float *m, float *l);
    // s[j] = exp(s[j] - m) * inv_l rounded to f16 precision (masked keys,
    // -INFINITY, give 0): the normalized probabilities of llama.cpp's F16
    // path, for j < TILE.
    void (*exp_shift)(float *s, float m, float inv_l);
    // s[j] = e[j] * f rounded to f16 precision, j < n, n % 8 == 0 (the same
    // from kept exponentials; s may be e).
    void (*scale_f16)(float *s, const float *e, float f, int n);
    // A whole row of scores s[0..n), n % 8 == 0 (masked keys -INFINITY):
    // *m = their max, s[j] = exp(s[j] - *m), *l = the sum of those. A fully
    // masked row gives *m = -INFINITY, *l = 0 and s zero.
    void (*softmax_row)(float *s, int n, float *m, float *l);
    // acc[i * hdp + d] += sum_{j < nk} p[i * TILE + j] * v[j * ldv + d] for
    // i < nq, d < hdp.
    void (*pv)(int hdp, int nq, int nk, const float *p, const float *v, int ldv, float *acc);
    // At most 8 queries per KV head, nh heads of every row at once, straight
    // from the cache rows in their stored type fmt (enum kernels_kv_fmt: F16,
    // or Q8_0 / Q4_0 blocks, the head dimension then a multiple of 32). No transposed tile; rows
    // are read whole, in order. rows[j]: key j's row at the first head; head g's slice starts lh
    // bytes further on. next (NULL: none): rows to prefetch, head g of next[j] while head g of key
    // j is used (NULL entries skipped). For g < nh, i < nq, j < nk (hd % 8 == 0, nk <= TILE; a
    // query's scores lie lsi floats apart: TILE for a tile of scores, longer in a row of a whole
    // key range):
    //   s[g * ls + i * lsi + j] = scale * dot(q + g * lq + i * hd, row j, head g)
    // and 0 for nk <= j < TILE; queries from nq on are not written.
    void (*qk_rows)(int fmt, int hd, int nh, int nq, const float *q, int64_t lq,
                    const uint8_t *const *rows, const uint8_t *const *next, int64_t lh, int nk,
                    float scale, float *s, int64_t ls, int64_t lsi);
    //   acc[g * la + i * hd + d] += sum_{j < nk} p[g * lp + i * lpi + j] * (row j, head g)[d]
    void (*pv_rows)(int fmt, int hd, int nh, int nq, int nk, const float *p, int64_t lp,
                    int64_t lpi, const uint8_t *const *rows, const uint8_t *const *next, int64_t lh,
                    float *acc, int64_t la);
    // y[i] = exp(x[i]) for i < n (the tile's exponential; tests).
    void (*exp)(const float *x, float *y, int n);
};

// The kernels at the best ISA (kernels_best_isa), or at a given one (NULL
// if the CPU lacks it; KERNELS_ISA_SCALAR is the generic build).
const struct kernels_attn *kernels_attn_get(void);
const struct kernels_attn *kernels_attn_get_isa(enum kernels_isa isa);

// The per-ISA tables behind kernels_attn_get (attn_<isa>.c).
extern const struct kernels_attn kernels_attn_generic;
#if defined(__x86_64__) || defined(_M_X64)
extern const struct kernels_attn kernels_attn_avx2;
extern const struct kernels_attn kernels_attn_avx512;
#endif

// The CPU attention op: flash-attention style, no n × n score matrix.
//
// Rows of the ubatch that belong to the same slot are grouped into sets of
// up to ATTN_MAX_Q queries per KV head (rows × the query heads sharing that
// KV head: GQA heads share every K/V tile). A work item is (set, KV head,
// range of key positions); a set of few rows (decode) takes every KV head
// in one item instead, so that it reads whole cache rows in address order
// (one head's slice of each row is only 1/n_head_kv of it). It walks its keys in tiles of
// KERNELS_ATTN_TILE: the K and V rows of the tile are converted once from the cache's type (F32,
// F16, Q8_0, Q4_0) to f32, and every query of the set is scored against them, folded into its
// online softmax (running max m, denominator l) and its probability-weighted sum of V
// (kernels/attn.h has the SIMD inner loops).
//
// Tiles start at multiples of KERNELS_ATTN_TILE positions (keys before a
// row's window are masked), so a row's result does not depend on the other
// rows of its ubatch: a prompt split into ubatches gives the same bits as
// one batch, as long as no key range is split (below).
//
// Threads take items from an atomic counter, largest first. When there are
// fewer (set, KV head) pairs than threads — decoding one token, a model with
// few KV heads — each pair's key range is split into chunks (one per
// thread), items write their partial (m, l, acc) states, and after a barrier
// the chunks of each pair are merged:
//   M = max(m_c), L = sum(l_c e^(m_c - M)), out = sum(acc_c e^(m_c - M)) / L.
//
// Precision follows the reference's non-flash path: the query is rounded to
// the cache's precision (F16, or Q8_0 blocks for Q8_0 and Q4_0 caches, whose
// dot products llama.cpp takes against a Q8_0 query) before its dot
// products, and
// with an F16 cache the normalized probabilities are rounded to f16 before
// the V product. That needs the final max and sum first, so F16 items make
// two passes over their keys (PASS_STATS, then PASS_FINAL with
// exp(s - M) / L); split F16 ranges merge their statistics between the two
// (a second barrier). The first pass keeps its scores (per thread for a
// whole range, per item for split ones, within SCORE_CAP_*), so the second
// reads only V. F32, Q8_0 and Q4_0 caches take one pass (online softmax).
#include "engine/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kernels/attn.h"
#include "engine/kernels/kernels.h"
#include "engine/quant/quant.h"

#define TILE             KERNELS_ATTN_TILE
#define ATTN_MAX_Q       64         // queries per work item (rows × heads of a group)
#define ATTN_ALL_Q       128        // a set this small takes every KV head in one item
#define ATTN_ALL_ROW     4096       // ... when a cache row (all heads) has at most this many floats
#define ATTN_ROWS_Q      8          // F16, at most this many queries per KV head: from rows
#define ATTN_MIN_CHUNK   256        // keys per split chunk, at least
#define ATTN_INLINE      32768      // below this many multiply-adds: caller thread only
#define SCORE_CAP_THREAD (4 << 20)  // floats of kept scores per thread (whole ranges)
#define SCORE_CAP_SPLIT  (8 << 20)  // ... and for all split items together

static size_t score_cap_thread = SCORE_CAP_THREAD, score_cap_split = SCORE_CAP_SPLIT;

void engine_attention_score_caps(size_t per_thread, size_t split)
{
    score_cap_thread = per_thread;
    score_cap_split = split;
}

struct attn_set {
    int r0, r1;        // rows
    int32_t plo, phi;  // key positions any of them sees
    int heads;         // KV heads per item: 1, or all of them (few rows)
};

struct attn_item {
    int set, g0, g1;  // set, KV heads [g0, g1)
    int32_t p0, p1;   // key positions
    int64_t part;     // offset of its partial states, -1: writes the output
    int merge;        // its merge (the sibling chunks), -1 when not split
    int64_t sc;       // split items: offset of its kept scores (-1: none)
};

struct attn_merge {
    int item0, n;  // the chunks of one (set, KV heads), consecutive items
};

struct attn_run {
    struct engine_pool *pool;
    const struct kernels_attn *k;
    const struct engine_attn *a;
    float *out;
    const float *q;
    const struct engine_kv_layer *kv;
    const int32_t *cell0, *n_visible;
    int group, hdp;
    size_t head_bytes;  // bytes of one KV head inside a cell row
    size_t per_thread;  // floats of tile scratch per thread
    size_t sc_split;    // floats of kept scores of split items, first in scores
    size_t sc_thread;   // ... then per thread (0: none)
    float *buf, *parts, *scores;
    const struct attn_set *sets;
    const struct attn_item *items;
    const struct attn_merge *merges;
    int n_items, n_merges;
    quant_to_float_fn kv_to_float;  // quantized caches: a row of the cache's type as f32
    quant_to_float_fn q8_to_float;  // the query's Q8_0 rounding
    kernels_from_float_fn q8_from_float;
    bool round_p;  // F16 cache: two passes, probabilities rounded to f16
    _Atomic int next_item, next_merge, next_final;
};

// How a pass over an item's keys uses the scores.
enum pass_mode {
    PASS_ONLINE,  // online softmax: running max and sum, rescaled accumulator
    PASS_STATS,   // running max and sum only (first of two passes)
    PASS_FINAL,   // p = f16(exp(s - M) / L) with the final M, L: acc += p · V
};

void engine_attn_ws_free(struct engine_attn_ws *ws)
{
    free(ws->buf);
    free(ws->parts);
    free(ws->scores);
    free(ws->sets);
    free(ws->items);
    free(ws->merges);
    memset(ws, 0, sizeof *ws);
}

// ---------------------------------------------------------------------------
// Shared by the kernel and the reference.

static int32_t visible_lo(const struct engine_attn *a, int32_t nv, int64_t r)
{
    int32_t top = a->win_pos ? a->win_pos[r] + 1 : nv;  // one past the window's last position
    int32_t lo = a->window > 0 && top > a->window ? top - a->window : 0;
    if (a->chunk > 0 && nv > 0) {
        int32_t c0 = (nv - 1) / a->chunk * a->chunk;
        lo = c0 > lo ? c0 : lo;
    }
    return lo;
}

static int64_t cell_of(const struct engine_attn *a, int32_t cell0, int32_t pos)
{
    return (int64_t)cell0 + (a->kv_ring > 0 ? pos % a->kv_ring : pos);
}

// One KV head's slice of a cache row as hd floats (zeros up to hdp);
// to_float converts the quantized types.
static void kv_to_f32(uint32_t type, const uint8_t *src, float *dst, int hd, int hdp,
                      quant_to_float_fn to_float)
{
    switch (type) {
    case GGUF_TYPE_F32:
        memcpy(dst, src, (size_t)hd * sizeof(float));
        break;
    case GGUF_TYPE_F16:
        kernels_f16_to_f32_row((const uint16_t *)src, dst, hd);
        break;
    default:
        to_float(src, dst, hd);
        break;
    }
    for (int d = hd; d < hdp; d++)
        dst[d] = 0;
}

// The query rounded to the cache's precision (zeros up to hdp). tmp holds
// one Q8_0 row of hd elements.
static void query_prepare(uint32_t type, const float *q, float *dst, int hd, int hdp, void *tmp,
                          kernels_from_float_fn q8_from_float, quant_to_float_fn q8_to_float)
{
    switch (type) {
    case GGUF_TYPE_F32:
        memcpy(dst, q, (size_t)hd * sizeof(float));
        break;
    case GGUF_TYPE_F16:
        for (int d0 = 0; d0 < hd; d0 += 256) {  // SIMD conversions, 256 at a time
            uint16_t h[256];
            int n = hd - d0 < 256 ? hd - d0 : 256;
            kernels_f32_to_f16_row(q + d0, h, n);
            kernels_f16_to_f32_row(h, dst + d0, n);
        }
        break;
    default:
        q8_from_float(q, tmp, hd);
        q8_to_float(tmp, dst, hd);
        break;
    }
    for (int d = hd; d < hdp; d++)
        dst[d] = 0;
}

static size_t head_offset(uint32_t type, int g, int hd)
{
    return g == 0 ? 0 : quant_row_size(type, (int64_t)g * hd);
}

// out = acc / l, with the sink's term in the denominator.
static void finalize(const struct engine_attn *a, int h, const float *acc, float m, float l,
                     float *out)
{
    float f = 1.0f / l;
    if (a->sinks) {
        float sink = a->sinks[h], mx = m > sink ? m : sink;
        float em = expf(m - mx);
        f = em / (l * em + expf(sink - mx));
    }
    for (int d = 0; d < a->head_dim; d++)
        out[d] = acc[d] * f;
}

// ---------------------------------------------------------------------------
// Work items.

struct tiles {
    float *q, *acc, *s, *m, *l, *mi, *kb, *kt, *vb;
    void *qtmp;
};

// row: floats of the K (and V) rows of one tile: heads × hdp.
static size_t tiles_floats(int n_q, int hdp, int row)
{
    size_t f = (size_t)n_q * hdp * 2 + (size_t)n_q * TILE + 3 * (size_t)n_q +
               (size_t)TILE * row * 2 + (size_t)TILE * hdp + (size_t)hdp * 2 + 64;
    return (f + 15) / 16 * 16;  // keeps every thread's block 64-byte aligned
}

static struct tiles tiles_carve(float *p, int n_q, int hdp, int row)
{
    struct tiles t;
    t.kb = p, p += (size_t)TILE * row;
    t.kt = p, p += (size_t)TILE * hdp;
    t.vb = p, p += (size_t)TILE * row;
    t.q = p, p += (size_t)n_q * hdp;
    t.acc = p, p += (size_t)n_q * hdp;
    t.s = p, p += (size_t)n_q * TILE;
    t.m = p, p += n_q;
    t.l = p, p += n_q;
    t.mi = p, p += n_q;
    t.qtmp = p;
    return t;
}

// Keys from p0 in whole tiles.
static int64_t kept_keys(const struct attn_item *it)
{
    return ((int64_t)it->p1 - it->p0 + TILE - 1) / TILE * TILE;
}

// A query's row of kept scores: exp(s - m) for every key, then the m of
// each tile (its running max when the tile was scored).
static int64_t score_stride(const struct attn_item *it)
{
    return kept_keys(it) + kept_keys(it) / TILE;
}

// The tile's K and V rows, every head of the item, as f32 (K not when its
// scores are kept, V not in the statistics pass). off[j]: key j's row.
static void tile_rows(const struct attn_run *c, struct tiles *t, const struct attn_item *it,
                      const size_t *off, int nk, bool want_k, bool want_v)
{
    const int hd = c->a->head_dim, hdp = c->hdp, nh = it->g1 - it->g0, row = nh * hdp;
    const uint32_t type = c->a->kv_type;
    const uint8_t *kbase = (const uint8_t *)c->kv->k + c->head_bytes * (size_t)it->g0;
    const uint8_t *vbase = (const uint8_t *)c->kv->v + c->head_bytes * (size_t)it->g0;
    for (int j = 0; j < nk; j++) {
        for (int gg = 0; gg < (hdp == hd ? 1 : nh); gg++) {
            // Whole rows when no head is padded, else head by head.
            int n = hdp == hd ? row : hd;
            size_t ho = off[j] + (hdp == hd ? 0 : c->head_bytes * (size_t)gg);
            size_t fo = (size_t)j * row + (size_t)gg * hdp;
            if (want_k)
                kv_to_f32(type, kbase + ho, t->kb + fo, n, hdp == hd ? n : hdp, c->kv_to_float);
            if (want_v)
                kv_to_f32(type, vbase + ho, t->vb + fo, n, hdp == hd ? n : hdp, c->kv_to_float);
        }
    }
    if (want_k && nk < TILE)
        memset(t->kb + (size_t)nk * row, 0, (size_t)(TILE - nk) * row * sizeof(float));
}

// F16 caches with unpadded heads: head gg's K slices straight into the
// transposed tile (no f32 copy of the rows), its V slices into t->vb.
static void tile_head_f16(const struct attn_run *c, struct tiles *t, const struct attn_item *it,
                          const size_t *off, int nk, int gg, bool want_k, bool want_v)
{
    const int hd = c->a->head_dim;
    const size_t ho = c->head_bytes * (size_t)(it->g0 + gg);
    const uint8_t *kbase = (const uint8_t *)c->kv->k + ho, *vbase = (const uint8_t *)c->kv->v + ho;
    if (want_k) {
        const uint16_t *rows[TILE];
        for (int j = 0; j < nk; j++)
            rows[j] = (const uint16_t *)(kbase + off[j]);
        c->k->transpose_f16(rows, nk, hd, t->kt);
    }
    if (want_v)
        for (int j = 0; j < nk; j++)
            kernels_f16_to_f32_row((const uint16_t *)(vbase + off[j]), t->vb + (size_t)j * hd, hd);
}

// The tile's rows in cache from the item's first head on; NULL where off
// is SIZE_MAX.
static void cache_rows(const struct attn_run *c, const void *cache, const struct attn_item *it,
                       const size_t *off, int nk, const uint8_t **out)
{
    const uint8_t *base = (const uint8_t *)cache + c->head_bytes * (size_t)it->g0;
    for (int j = 0; j < nk; j++)
        out[j] = off[j] == SIZE_MAX ? NULL : base + off[j];
}

// Asks for head gg's slices of the tile at key p while this one is computed
// (each slice is one head of a row: a strided read the hardware does not
// run ahead of).
static void prefetch_head(const struct attn_run *c, const struct attn_item *it, int32_t p, int gg,
                          bool want_k, bool want_v)
{
    int nk = it->p1 - p < TILE ? it->p1 - p : TILE;
    const size_t ho = c->head_bytes * (size_t)(it->g0 + gg);
    const int32_t c0 = c->cell0[c->sets[it->set].r0];
    for (int j = 0; j < nk; j++) {
        size_t off = (size_t)cell_of(c->a, c0, p + j) * c->kv->row_bytes + ho;
        for (size_t b = 0; b < c->head_bytes; b += 64) {
            if (want_k)
                __builtin_prefetch((const uint8_t *)c->kv->k + off + b);
            if (want_v)
                __builtin_prefetch((const uint8_t *)c->kv->v + off + b);
        }
    }
}

// Query i's scores of one tile (in t->s): softcap, mask, then the pass's
// use of them; PASS_STATS with keep also stores its exponentials at
// keep[off..] and the max they are relative to at keep[keys + off / TILE].
static void score_tile(const struct attn_run *c, struct tiles *t, int i, int32_t p, int nk, int r,
                       enum pass_mode mode, float *keep, int64_t off, int64_t keys)
{
    const struct engine_attn *a = c->a;
    float *si = t->s + (size_t)i * TILE;
    int32_t nv = c->n_visible[r], lo = visible_lo(a, nv, r);
    if (a->softcap > 0)
        for (int j = 0; j < nk; j++)
            si[j] = engine_softcap_f32(si[j], a->softcap);
    if (nk < TILE || p < lo || p + TILE > nv)
        for (int j = 0; j < TILE; j++)
            if (j >= nk || p + j < lo || p + j >= nv)
                si[j] = -INFINITY;
    if (mode == PASS_FINAL) {
        // The reference's probabilities: normalized, then f16.
        c->k->exp_shift(si, t->m[i], 1.0f / t->l[i]);
        return;
    }
    float corr = c->k->softmax(si, &t->m[i], &t->l[i]);
    if (keep) {
        memcpy(keep + off, si, TILE * sizeof(float));
        keep[keys + off / TILE] = t->m[i];
    }
    if (corr != 1.0f && mode == PASS_ONLINE) {
        float *ai = t->acc + (size_t)i * c->hdp;
        for (int d = 0; d < c->hdp; d++)
            ai[d] *= corr;
    }
}

// Queries [i0, i1) of an item, the tile at p (nk keys): their
// probabilities in t->s. From the kept exponentials (PASS_FINAL with sc),
// else from the raw scores there (score_tile).
static void tile_probs(const struct attn_run *c, struct tiles *t, const struct attn_item *it,
                       int i0, int i1, int32_t p, int nk, enum pass_mode mode, float *sc)
{
    const struct attn_set *st = &c->sets[it->set];
    const int G = c->group, nr = st->r1 - st->r0;
    const int64_t keys = kept_keys(it), ld = score_stride(it);
    for (int i = i0; i < i1; i++) {
        if (sc && mode == PASS_FINAL) {  // exp(s - m) e^(m - M) / L, rounded to f16
            const float *kr = sc + i * ld;
            float m = kr[keys + (p - it->p0) / TILE];
            c->k->scale_f16(t->s + (size_t)i * TILE, kr + (p - it->p0), expf(m - t->m[i]) / t->l[i],
                            TILE);
        } else {
            score_tile(c, t, i, p, nk, st->r0 + (i / G) % nr, mode, sc ? sc + i * ld : NULL,
                       p - it->p0, keys);
        }
    }
}

// Query i of an item: KV head g0 + i / (nr·G), row r0 + (i / G) % nr, query
// head (g0 + i / (nr·G))·G + i % G: each head's queries are consecutive.
static void query_of(const struct attn_run *c, const struct attn_item *it, int i, int *r, int *h)
{
    const struct attn_set *st = &c->sets[it->set];
    int nr = st->r1 - st->r0, G = c->group;
    *r = st->r0 + (i / G) % nr;
    *h = (it->g0 + i / (nr * G)) * G + i % G;
}

// Query i's keys of the item it sees: [*a, *b) relative to p0, within
// [0, p1 - p0]; an empty span is [0, 0) (a window may start past the item).
static void visible_span(const struct attn_run *c, const struct attn_item *it, int i, int32_t *a,
                         int32_t *b)
{
    int r, h;
    query_of(c, it, i, &r, &h);
    int32_t nv = c->n_visible[r], lo = visible_lo(c->a, nv, r);
    int32_t from = lo > it->p0 ? lo : it->p0, to = nv < it->p1 ? nv : it->p1;
    *a = to > from ? from - it->p0 : 0;
    *b = to > from ? to - it->p0 : 0;
}

// Whole rows of kept scores (decode from an F16 cache), after the
// statistics pass scored every key: softcap, mask, then each query's max,
// exponentials and their sum (t->m, t->l) over its whole row at once.
static void rows_softmax(const struct attn_run *c, struct tiles *t, const struct attn_item *it,
                         float *sc, int nq)
{
    const int64_t keys = kept_keys(it), ld = score_stride(it);
    for (int i = 0; i < nq; i++) {
        float *row = sc + i * ld;
        int32_t a, b;
        visible_span(c, it, i, &a, &b);
        if (c->a->softcap > 0)
            for (int32_t j = a; j < b; j++)
                row[j] = engine_softcap_f32(row[j], c->a->softcap);
        for (int32_t j = 0; j < a; j++)
            row[j] = -INFINITY;
        for (int64_t j = b; j < keys; j++)
            row[j] = -INFINITY;
        c->k->softmax_row(row, (int)keys, &t->m[i], &t->l[i]);
    }
}

// ... and before the final pass: the probabilities exp(s - m_item)
// e^(m_item - M) / L rounded to f16, in place (t->mi: the item's own max).
static void rows_scale(const struct attn_run *c, const struct tiles *t, const struct attn_item *it,
                       float *sc, int nq)
{
    const int64_t keys = kept_keys(it), ld = score_stride(it);
    for (int i = 0; i < nq; i++) {
        float f = t->mi[i] == -INFINITY ? 0.0f : expf(t->mi[i] - t->m[i]) / t->l[i];
        c->k->scale_f16(sc + i * ld, sc + i * ld, f, (int)keys);
    }
}

// How one pass reads an item, decided once per item (item_pass).
struct pass_plan {
    enum pass_mode mode;
    float *sc;     // kept scores (F16 caches) or NULL
    bool kept;     // PASS_FINAL reads the kept scores instead of K
    int fmt;       // enum kernels_kv_fmt of the row kernels, or -1
    bool rows;     // the row kernels (few queries per KV head)
    bool by_head;  // one KV head's slices transposed straight from f16
    bool whole;    // rows with kept scores: the whole key range at once
    int nr, nh, per_head, row;
    int64_t lq, ld, lsh;  // strides of q / acc, of a score row, of a head's scores
};

static void plan_pass(const struct attn_run *c, const struct attn_item *it, enum pass_mode mode,
                      float *sc, struct pass_plan *pl)
{
    const struct engine_attn *a = c->a;
    const struct attn_set *st = &c->sets[it->set];
    const int hdp = c->hdp;
    pl->mode = mode;
    pl->sc = sc;
    pl->nr = st->r1 - st->r0;
    pl->nh = it->g1 - it->g0;
    pl->per_head = pl->nr * c->group;
    pl->row = pl->nh * hdp;
    pl->kept = sc && mode == PASS_FINAL;
    // F16, Q8_0 and Q4_0 caches: few queries per KV head (decode) are scored
    // straight from the cache rows, every head of a row at once; with F16,
    // more queries of one head per item (prompts) transpose the head's K
    // slices straight from f16. Other items convert whole rows to f32 in
    // address order (tile_rows).
    const bool f16 = a->kv_type == GGUF_TYPE_F16 && hdp == a->head_dim;
    const bool blocks = a->head_dim % 32 == 0;
    pl->fmt = f16                                      ? KERNELS_KV_F16
              : a->kv_type == GGUF_TYPE_Q8_0 && blocks ? KERNELS_KV_Q8_0
              : a->kv_type == GGUF_TYPE_Q4_0 && blocks ? KERNELS_KV_Q4_0
                                                       : -1;
    pl->rows = pl->fmt >= 0 && pl->per_head <= ATTN_ROWS_Q;
    pl->by_head = f16 && !pl->rows && pl->nh == 1;
    // Rows with kept scores score the whole key range into them, then take
    // each query's softmax over its whole row (no tile by tile statistics).
    pl->whole = pl->rows && sc;
    pl->lq = (int64_t)pl->per_head * hdp;
    pl->ld = pl->whole ? score_stride(it) : TILE;
    pl->lsh = pl->whole ? pl->per_head * pl->ld : (int64_t)pl->per_head * TILE;
}

// The tile of keys [p, p + nk) for the query rows [ra, rz) of the item
// through the row kernels (off: the keys' cache offsets).
static void tile_pass_rows(struct attn_run *c, struct tiles *t, const struct attn_item *it,
                           const struct pass_plan *pl, int32_t p, int nk, int ra, int qn,
                           const size_t *off)
{
    const struct attn_set *st = &c->sets[it->set];
    const int hdp = c->hdp, G = c->group;
    size_t off_next[TILE];
    const uint8_t *kv_rows[TILE], *next_rows[TILE];
    // The next tile's rows are asked for while this one is used.
    const int64_t lh = (int64_t)c->head_bytes;
    int nn = it->p1 - p - TILE < TILE ? it->p1 - p - TILE : TILE;
    for (int j = 0; j < TILE; j++)
        off_next[j] = j < nn
                          ? (size_t)cell_of(c->a, c->cell0[st->r0], p + TILE + j) * c->kv->row_bytes
                          : SIZE_MAX;
    float *sp =
        pl->whole ? pl->sc + (size_t)ra * G * pl->ld + (p - it->p0) : t->s + (size_t)ra * G * TILE;
    if (!pl->kept) {
        cache_rows(c, c->kv->k, it, off, nk, kv_rows);
        cache_rows(c, c->kv->k, it, off_next, TILE, next_rows);
        c->k->qk_rows(pl->fmt, hdp, pl->nh, qn, t->q + (size_t)ra * G * hdp, pl->lq, kv_rows,
                      next_rows, lh, nk, c->a->scale, sp, pl->lsh, pl->ld);
    }
    for (int gg = 0; gg < pl->nh && !pl->whole; gg++) {
        int qa = gg * pl->per_head + ra * G;
        tile_probs(c, t, it, qa, qa + qn, p, nk, pl->mode, pl->sc);
    }
    if (pl->mode != PASS_STATS) {
        cache_rows(c, c->kv->v, it, off, nk, kv_rows);
        cache_rows(c, c->kv->v, it, off_next, TILE, next_rows);
        c->k->pv_rows(pl->fmt, hdp, pl->nh, qn, nk, sp, pl->lsh, pl->ld, kv_rows, next_rows, lh,
                      t->acc + (size_t)ra * G * hdp, pl->lq);
    }
}

// The same through f32 tiles: whole rows converted (tile_rows) or one KV
// head's slices (by_head), transposed K, then qk, probabilities and pv.
static void tile_pass_f32(struct attn_run *c, struct tiles *t, const struct attn_item *it,
                          const struct pass_plan *pl, int32_t p, int nk, int ra, int qn,
                          const size_t *off)
{
    const int hdp = c->hdp, G = c->group;
    const bool want_v = pl->mode != PASS_STATS;
    if (!pl->by_head) {
        tile_rows(c, t, it, off, nk, !pl->kept, want_v);
        // One KV head's slices (prompt items): a strided read, asked
        // for a tile ahead as the F16 path does.
        if (pl->nh == 1 && p + TILE < it->p1)
            prefetch_head(c, it, p + TILE, 0, !pl->kept, want_v);
    }
    for (int gg = 0; gg < pl->nh; gg++) {
        int qa = gg * pl->per_head + ra * G;
        if (pl->by_head) {
            tile_head_f16(c, t, it, off, nk, gg, !pl->kept, want_v);
            if (p + TILE < it->p1)
                prefetch_head(c, it, p + TILE, gg, !pl->kept, want_v);
        }
        if (!pl->kept) {
            if (!pl->by_head)
                c->k->transpose(t->kb + (size_t)gg * hdp, pl->row, hdp, t->kt);
            c->k->qk(hdp, qn, t->q + (size_t)qa * hdp, t->kt, c->a->scale,
                     t->s + (size_t)qa * TILE);
        }
        tile_probs(c, t, it, qa, qa + qn, p, nk, pl->mode, pl->sc);
        if (!want_v)
            continue;
        c->k->pv(hdp, qn, nk, t->s + (size_t)qa * TILE,
                 pl->by_head ? t->vb : t->vb + (size_t)gg * hdp, pl->by_head ? hdp : pl->row,
                 t->acc + (size_t)qa * hdp);
    }
}

// One pass over an item's keys (see enum pass_mode); m, l, acc in t. With
// sc (F16 caches), PASS_STATS keeps every score there (query i's row at
// i * score_stride) and PASS_FINAL reads them back instead of K.
static void item_pass(struct attn_run *c, struct tiles *t, const struct attn_item *it,
                      enum pass_mode mode, float *sc)
{
    const struct engine_attn *a = c->a;
    const struct attn_set *st = &c->sets[it->set];
    struct pass_plan pl;
    plan_pass(c, it, mode, sc, &pl);
    size_t off[TILE];
    if (pl.whole && mode == PASS_FINAL)
        rows_scale(c, t, it, sc, pl.per_head * pl.nh);
    for (int32_t p = it->p0; p < it->p1; p += TILE) {
        int nk = it->p1 - p < TILE ? it->p1 - p : TILE;
        // Rows that see any key of the tile.
        int ra = pl.nr, rz = 0;
        for (int rr = 0; rr < pl.nr; rr++) {
            int32_t nv = c->n_visible[st->r0 + rr];
            if (nv > p && visible_lo(a, nv, st->r0 + rr) < p + nk) {
                ra = rr < ra ? rr : ra;
                rz = rr + 1;
            }
        }
        if (ra >= rz)
            continue;
        for (int j = 0; j < nk; j++)
            off[j] = (size_t)cell_of(a, c->cell0[st->r0], p + j) * c->kv->row_bytes;
        const int qn = (rz - ra) * c->group;
        if (pl.rows)
            tile_pass_rows(c, t, it, &pl, p, nk, ra, qn, off);
        else
            tile_pass_f32(c, t, it, &pl, p, nk, ra, qn, off);
    }
    if (pl.whole && mode == PASS_STATS)
        rows_softmax(c, t, it, sc, pl.per_head * pl.nh);
}

// The max and denominator over all keys and the sink: M' = max(M, sink),
// L' = L e^(M - M') + e^(sink - M').
static void with_sink(const struct engine_attn *a, int h, float *m, float *l)
{
    if (!a->sinks)
        return;
    float sink = a->sinks[h], mx = *m > sink ? *m : sink;
    *l = *l * expf(*m - mx) + expf(sink - mx);
    *m = mx;
}

// Stages of an item: STAGE_ALL does everything (its key range is not
// split); split items of an F16 cache run STAGE_STATS, then (after a
// barrier) STAGE_FINAL with the siblings' statistics.
enum { STAGE_ALL, STAGE_STATS, STAGE_FINAL };

// Where an item keeps its scores: its own space when split, else the
// thread's, if either holds them (F16 caches only).
static float *item_scores(const struct attn_run *c, float *sc_thread, const struct attn_item *it,
                          int64_t nq)
{
    if (!c->round_p)
        return NULL;
    if (it->sc >= 0)
        return c->scores + it->sc;
    if (it->merge < 0 && (size_t)(nq * score_stride(it)) <= c->sc_thread)
        return sc_thread;
    return NULL;
}

static void run_item(struct attn_run *c, float *scratch, float *sc_thread,
                     const struct attn_item *it, int stage)
{
    const struct engine_attn *a = c->a;
    const struct attn_set *st = &c->sets[it->set];
    const int hd = a->head_dim, hdp = c->hdp, G = c->group;
    const int nr = st->r1 - st->r0, nh = it->g1 - it->g0, nq = nr * G * nh;
    struct tiles t = tiles_carve(scratch, nq, hdp, nh * hdp);
    float *sc = item_scores(c, sc_thread, it, nq);
    for (int i = 0; i < nq; i++) {
        int r, h;
        query_of(c, it, i, &r, &h);
        query_prepare(a->kv_type, c->q + ((int64_t)r * a->n_head + h) * hd, t.q + (size_t)i * hdp,
                      hd, hdp, t.qtmp, c->q8_from_float, c->q8_to_float);
        t.m[i] = -INFINITY;
        t.l[i] = 0;
    }
    memset(t.acc, 0, (size_t)nq * hdp * sizeof(float));

    if (!c->round_p) {
        item_pass(c, &t, it, PASS_ONLINE, NULL);
        for (int i = 0; i < nq; i++) {
            int r, h;
            query_of(c, it, i, &r, &h);
            const float *ai = t.acc + (size_t)i * hdp;
            if (it->part < 0) {
                finalize(a, h, ai, t.m[i], t.l[i], c->out + ((int64_t)r * a->n_head + h) * hd);
            } else {
                float *dst = c->parts + it->part + (size_t)i * (hd + 2);
                dst[0] = t.m[i];
                dst[1] = t.l[i];
                memcpy(dst + 2, ai, (size_t)hd * sizeof(float));
            }
        }
        return;
    }
    if (stage != STAGE_FINAL)
        item_pass(c, &t, it, PASS_STATS, sc);
    if (stage == STAGE_STATS) {
        for (int i = 0; i < nq; i++) {
            float *dst = c->parts + it->part + (size_t)i * (hd + 2);
            dst[0] = t.m[i];
            dst[1] = t.l[i];
        }
        return;
    }
    for (int i = 0; i < nq; i++)  // the item's own max (its kept scores are relative to it)
        t.mi[i] = stage == STAGE_FINAL ? c->parts[it->part + (int64_t)i * (hd + 2)] : t.m[i];
    if (stage == STAGE_FINAL) {  // the whole key range's statistics
        const struct attn_merge *mg = &c->merges[it->merge];
        for (int i = 0; i < nq; i++) {
            float mx = -INFINITY, l = 0;
            for (int ch = 0; ch < mg->n; ch++) {
                float m = c->parts[c->items[mg->item0 + ch].part + (int64_t)i * (hd + 2)];
                mx = m > mx ? m : mx;
            }
            for (int ch = 0; ch < mg->n; ch++) {
                const float *src = c->parts + c->items[mg->item0 + ch].part + (int64_t)i * (hd + 2);
                if (src[0] != -INFINITY)
                    l += src[1] * expf(src[0] - mx);
            }
            t.m[i] = mx;
            t.l[i] = l;
        }
    }
    for (int i = 0; i < nq; i++) {
        int r, h;
        query_of(c, it, i, &r, &h);
        with_sink(a, h, &t.m[i], &t.l[i]);
    }
    item_pass(c, &t, it, PASS_FINAL, sc);
    for (int i = 0; i < nq; i++) {
        int r, h;
        query_of(c, it, i, &r, &h);
        const float *ai = t.acc + (size_t)i * hdp;
        float *dst = it->part < 0 ? c->out + ((int64_t)r * a->n_head + h) * hd
                                  : c->parts + it->part + (size_t)i * (hd + 2) + 2;
        memcpy(dst, ai, (size_t)hd * sizeof(float));
    }
}

// Combines the chunks of one (set, KV head) into the output.
static void run_merge(struct attn_run *c, float *scratch, const struct attn_merge *mg)
{
    const struct engine_attn *a = c->a;
    const struct attn_item *it0 = &c->items[mg->item0];
    const struct attn_set *st = &c->sets[it0->set];
    const int hd = a->head_dim, G = c->group, nr = st->r1 - st->r0;
    const int nq = nr * G * (it0->g1 - it0->g0);
    float *acc = scratch;
    for (int i = 0; i < nq; i++) {
        float mx = -INFINITY, l = 0;
        for (int ch = 0; ch < mg->n; ch++) {
            float m = c->parts[c->items[mg->item0 + ch].part + (int64_t)i * (hd + 2)];
            mx = m > mx ? m : mx;
        }
        memset(acc, 0, (size_t)hd * sizeof(float));
        int r, h;
        query_of(c, it0, i, &r, &h);
        if (c->round_p) {  // normalized already: the chunks' sums add up
            float *out = c->out + ((int64_t)r * a->n_head + h) * hd;
            for (int ch = 0; ch < mg->n; ch++) {
                const float *src =
                    c->parts + c->items[mg->item0 + ch].part + (int64_t)i * (hd + 2) + 2;
                for (int d = 0; d < hd; d++)
                    acc[d] += src[d];
            }
            memcpy(out, acc, (size_t)hd * sizeof(float));
            continue;
        }
        for (int ch = 0; ch < mg->n; ch++) {
            const float *src = c->parts + c->items[mg->item0 + ch].part + (int64_t)i * (hd + 2);
            if (src[0] == -INFINITY)
                continue;  // no key of this chunk is visible to the row
            float f = expf(src[0] - mx);
            l += src[1] * f;
            for (int d = 0; d < hd; d++)
                acc[d] += src[2 + d] * f;
        }
        finalize(a, h, acc, mx, l, c->out + ((int64_t)r * a->n_head + h) * hd);
    }
}

static void attn_task(void *arg, int ith, int nth)
{
    struct attn_run *c = arg;
    float *scratch = c->buf + (size_t)ith * c->per_thread;
    float *sc_thread = c->sc_thread ? c->scores + c->sc_split + (size_t)ith * c->sc_thread : NULL;
    for (;;) {
        int i = atomic_fetch_add_explicit(&c->next_item, 1, memory_order_relaxed);
        if (i >= c->n_items)
            break;
        const struct attn_item *it = &c->items[i];
        run_item(c, scratch, sc_thread, it, it->merge >= 0 ? STAGE_STATS : STAGE_ALL);
    }
    if (c->n_merges == 0)
        return;
    if (nth > 1)
        engine_pool_barrier(c->pool);
    if (c->round_p) {
        for (;;) {
            int i = atomic_fetch_add_explicit(&c->next_final, 1, memory_order_relaxed);
            if (i >= c->n_items)
                break;
            if (c->items[i].merge >= 0)
                run_item(c, scratch, sc_thread, &c->items[i], STAGE_FINAL);
        }
        if (nth > 1)
            engine_pool_barrier(c->pool);
    }
    for (;;) {
        int i = atomic_fetch_add_explicit(&c->next_merge, 1, memory_order_relaxed);
        if (i >= c->n_merges)
            break;
        run_merge(c, scratch, &c->merges[i]);
    }
}

// ---------------------------------------------------------------------------
// Planning.

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t n = need + need / 2;
    free(p);
    *cap = n;
    return xmalloc(n * elem);
}

// Like grow, with room to spare (the kept scores and partial states grow
// with the context, a tile at a time while decoding) and 64-byte aligned.
// Only what is needed now is touched: the spare pages stay out of RSS until
// used (every user writes its floats before reading them).
static float *grow_aligned(float *p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return p;
    size_t n = need + need / 2;
    free(p);
    void *np = NULL;
    if (posix_memalign(&np, 64, n * sizeof(float)) != 0)
        ASSERT(!"attention scratch allocation failed");
    memset(np, 0, need * sizeof(float));
    *cap = n;
    return np;
}

// What planning learns about the work, for sizing chunks, lists and scratch.
struct attn_plan {
    int n_sets;
    int64_t total_keys, work, n_units;  // keys over all units, multiply-adds, units
    int64_t chunk;                      // keys per item (INT32_MAX: no split)
    int64_t n_items, n_merges, parts;   // list lengths, floats of partial states
    int64_t sc_split, sc_whole;         // kept scores: all split items, largest whole item
    int max_q, max_row;                 // largest item: queries, floats of a K/V row
};

// Sets: runs of rows of one slot, at most rows_per_set each, into ws->sets.
static void plan_sets(struct engine_attn_ws *ws, struct attn_plan *pl, int64_t n_rows,
                      const int32_t *cell0, const int32_t *n_visible, const struct engine_attn *a,
                      int rows_per_set, int hdp)
{
    const int hd = a->head_dim;
    ws->sets = grow(ws->sets, &ws->sets_cap, (size_t)n_rows, sizeof(struct attn_set));
    struct attn_set *sets = ws->sets;
    int n_sets = 0;
    int64_t total_keys = 0, work = 0, n_units = 0;
    for (int64_t r = 0; r < n_rows;) {
        struct attn_set *st = &sets[n_sets++];
        st->r0 = (int)r;
        st->plo = INT32_MAX, st->phi = 0;
        do {
            int32_t nv = n_visible[r];
            ASSERT(nv >= 1);
            int32_t lo = visible_lo(a, nv, r);
            st->plo = lo < st->plo ? lo : st->plo;
            st->phi = nv > st->phi ? nv : st->phi;
            work += (int64_t)(nv - lo) * a->n_head * hd * 2;
            r++;
        } while (r < n_rows && r - st->r0 < rows_per_set && cell0[r] == cell0[st->r0]);
        st->r1 = (int)r;
        // Few rows (decode): one item takes every KV head, so it reads whole
        // cache rows in order instead of one head's slice of each.
        bool all = (int64_t)(st->r1 - st->r0) * a->n_head <= ATTN_ALL_Q &&
                   (int64_t)a->n_head_kv * hdp <= ATTN_ALL_ROW;
        st->heads = all ? a->n_head_kv : 1;
        int units = a->n_head_kv / st->heads;
        n_units += units;
        total_keys += (int64_t)(st->phi - st->plo) * units;
    }
    pl->n_sets = n_sets;
    pl->total_keys = total_keys;
    pl->work = work;
    pl->n_units = n_units;
}

// Split key ranges when there are fewer (set, KV heads) units than threads;
// then count the items and merges that chunk gives. One chunk per thread:
// every further chunk adds its own pass set-up, partial state and merge, and
// 8 chunks per thread measured 5-15 % slower in decode at depth 4096 on 2
// threads (bench_attention and whole-model tg, 1B and 0.5B shapes) than one.
static void plan_chunks(const struct engine_attn_ws *ws, struct attn_plan *pl,
                        const struct engine_attn *a, int nth)
{
    const struct attn_set *sets = ws->sets;
    int64_t target = nth, chunk = INT32_MAX;
    if (nth > 1 && pl->n_units < target) {
        chunk = (pl->total_keys + target - 1) / target;
        chunk = (chunk + TILE - 1) / TILE * TILE;
        if (chunk < ATTN_MIN_CHUNK)
            chunk = ATTN_MIN_CHUNK;
    }
    int64_t n_items = 0, n_merges = 0;
    for (int s = 0; s < pl->n_sets; s++) {
        int64_t n_chunks = (sets[s].phi - sets[s].plo / TILE * TILE + chunk - 1) / chunk;
        int units = a->n_head_kv / sets[s].heads;
        n_items += n_chunks * units;
        if (n_chunks > 1)
            n_merges += units;
    }
    pl->chunk = chunk;
    pl->n_items = n_items;
    pl->n_merges = n_merges;
}

// Fills ws->items and ws->merges: per set, per KV head group, one item per chunk; split
// ones get partial-state space and a merge. Later sets see more keys: they go first.
static void plan_items(struct engine_attn_ws *ws, struct attn_plan *pl, const struct engine_attn *a,
                       int G, int hdp)
{
    const int hd = a->head_dim;
    const int64_t chunk = pl->chunk;
    const struct attn_set *sets = ws->sets;
    ws->items = grow(ws->items, &ws->items_cap, (size_t)pl->n_items, sizeof(struct attn_item));
    ws->merges =
        grow(ws->merges, &ws->merges_cap, (size_t)pl->n_merges + 1, sizeof(struct attn_merge));
    struct attn_item *items = ws->items;
    struct attn_merge *merges = ws->merges;
    int64_t ni = 0, nm = 0, parts = 0, sc_split = 0, sc_whole = 0;
    int max_q = 1, max_row = hdp;
    for (int s = pl->n_sets - 1; s >= 0; s--) {
        const struct attn_set *st = &sets[s];
        int nq = (st->r1 - st->r0) * G * st->heads;
        max_q = nq > max_q ? nq : max_q;
        max_row = st->heads * hdp > max_row ? st->heads * hdp : max_row;
        int64_t n_chunks = (st->phi - st->plo / TILE * TILE + chunk - 1) / chunk;
        for (int g = 0; g < a->n_head_kv; g += st->heads) {
            int merge = n_chunks > 1 ? (int)nm : -1;
            if (n_chunks > 1)
                merges[nm++] = (struct attn_merge){(int)ni, (int)n_chunks};
            for (int64_t ch = 0; ch < n_chunks; ch++) {
                int32_t p0 = (int32_t)(st->plo / TILE * TILE + ch * chunk);
                int32_t p1 = (int32_t)(p0 + chunk < st->phi ? p0 + chunk : st->phi);
                struct attn_item *it = &items[ni++];
                *it = (struct attn_item){s,     g, g + st->heads, p0, p1, n_chunks > 1 ? parts : -1,
                                         merge, -1};
                int64_t need = (int64_t)nq * score_stride(it);
                if (n_chunks > 1) {
                    parts += (int64_t)nq * (hd + 2);
                    it->sc = sc_split;
                    sc_split += need;
                } else if (need > sc_whole) {
                    sc_whole = need;
                }
            }
        }
    }
    pl->parts = parts;
    pl->sc_split = sc_split;
    pl->sc_whole = sc_whole;
    pl->max_q = max_q;
    pl->max_row = max_row;
}

void engine_attention_cpu(struct engine_pool *pool, int n_threads, struct engine_attn_ws *ws,
                          float *out, const float *q, int64_t n_rows,
                          const struct engine_kv_layer *kv, const int32_t *cell0,
                          const int32_t *n_visible, const struct engine_attn *a)
{
    ASSERT(a->n_head_kv > 0 && a->n_head % a->n_head_kv == 0 && a->head_dim > 0);
    ASSERT(a->kv_type == GGUF_TYPE_F32 || a->kv_type == GGUF_TYPE_F16 ||
           a->kv_type == GGUF_TYPE_Q8_0 || a->kv_type == GGUF_TYPE_Q4_0);
    const int G = a->n_head / a->n_head_kv, hd = a->head_dim, hdp = (hd + 7) / 8 * 8;
    const int rows_per_set = G >= ATTN_MAX_Q ? 1 : ATTN_MAX_Q / G;

    struct attn_plan pl = {0};
    plan_sets(ws, &pl, n_rows, cell0, n_visible, a, rows_per_set, hdp);
    int nth = pl.work < ATTN_INLINE ? 1 : n_threads;
    plan_chunks(ws, &pl, a, nth);
    plan_items(ws, &pl, a, G, hdp);

    size_t per_thread = tiles_floats(pl.max_q, hdp, pl.max_row);
    ws->buf = grow_aligned(ws->buf, &ws->buf_floats, per_thread * (size_t)nth);
    if (pl.parts > 0)
        ws->parts = grow_aligned(ws->parts, &ws->parts_floats, (size_t)pl.parts);
    // Kept scores (F16 caches), each kind within its cap.
    bool round_p = a->kv_type == GGUF_TYPE_F16;
    size_t sc_split = round_p && (size_t)pl.sc_split <= score_cap_split ? (size_t)pl.sc_split : 0;
    size_t sc_thread = round_p && (size_t)pl.sc_whole <= score_cap_thread ? (size_t)pl.sc_whole : 0;
    if (round_p && sc_split == 0)
        for (int64_t i = 0; i < pl.n_items; i++)
            ((struct attn_item *)ws->items)[i].sc = -1;
    if (sc_split + sc_thread > 0)
        ws->scores =
            grow_aligned(ws->scores, &ws->scores_floats, sc_split + sc_thread * (size_t)nth);

    struct attn_run c = {
        .pool = pool,
        .k = kernels_attn_get(),
        .a = a,
        .out = out,
        .q = q,
        .kv = kv,
        .cell0 = cell0,
        .n_visible = n_visible,
        .group = G,
        .hdp = hdp,
        .head_bytes = head_offset(a->kv_type, 1, hd),
        .per_thread = per_thread,
        .sc_split = sc_split,
        .sc_thread = sc_thread,
        .buf = ws->buf,
        .parts = ws->parts,
        .scores = ws->scores,
        .sets = ws->sets,
        .items = ws->items,
        .merges = ws->merges,
        .n_items = (int)pl.n_items,
        .n_merges = (int)pl.n_merges,
        .kv_to_float = quant_traits_get(a->kv_type)->to_float,
        .q8_to_float = quant_traits_get(GGUF_TYPE_Q8_0)->to_float,
        .q8_from_float = kernels_get(GGUF_TYPE_Q8_0)->from_float,
        .round_p = round_p,
    };
    atomic_init(&c.next_item, 0);
    atomic_init(&c.next_merge, 0);
    atomic_init(&c.next_final, 0);
    if (nth == 1)
        attn_task(&c, 0, 1);
    else
        engine_pool_run(pool, attn_task, &c);
}

uint64_t engine_attention_score_bytes(uint32_t kv_type, int n_threads, int n_head, int n_ctx,
                                      int n_slots)
{
    if (kv_type != GGUF_TYPE_F16)
        return 0;
    uint64_t keys = ((uint64_t)n_ctx + TILE - 1) / TILE * (TILE + 1);
    uint64_t whole = (uint64_t)(n_head > ATTN_MAX_Q ? n_head : ATTN_MAX_Q) * keys;
    uint64_t split = (uint64_t)n_slots * (uint64_t)n_head * (keys + TILE);
    whole = whole <= SCORE_CAP_THREAD ? whole : 0;
    split = split <= SCORE_CAP_SPLIT ? split : SCORE_CAP_SPLIT;
    return ((uint64_t)n_threads * whole + split) * sizeof(float);
}

// ---------------------------------------------------------------------------
// Reference.

void engine_attention_ref(float *out, const float *q, int64_t n_rows,
                          const struct engine_kv_layer *kv, const int32_t *cell0,
                          const int32_t *n_visible, const struct engine_attn *a)
{
    const int G = a->n_head / a->n_head_kv, hd = a->head_dim;
    quant_to_float_fn q8_to_float = quant_traits_get(GGUF_TYPE_Q8_0)->to_float;
    quant_to_float_fn kv_to_float = quant_traits_get(a->kv_type)->to_float;
    kernels_from_float_fn q8_from_float = kernels_get(GGUF_TYPE_Q8_0)->from_float;
    float *qr = xmalloc((size_t)hd * sizeof(float) * 2), *row = qr + hd;
    void *tmp = xmalloc(quant_row_size(GGUF_TYPE_Q8_0, (hd + 31) / 32 * 32) + 64);
    for (int64_t r = 0; r < n_rows; r++) {
        int32_t nv = n_visible[r], lo = visible_lo(a, nv, r);
        double *s = xmalloc((size_t)(nv - lo) * sizeof(double)),
               *o = xcalloc((size_t)hd, sizeof(double));
        for (int h = 0; h < a->n_head; h++) {
            int g = h / G;
            size_t hoff = head_offset(a->kv_type, g, hd);
            query_prepare(a->kv_type, q + (r * a->n_head + h) * hd, qr, hd, hd, tmp, q8_from_float,
                          q8_to_float);
            double mx = a->sinks ? (double)a->sinks[h] : -INFINITY;
            for (int32_t p = lo; p < nv; p++) {
                const uint8_t *kr =
                    (const uint8_t *)kv->k + (size_t)cell_of(a, cell0[r], p) * kv->row_bytes + hoff;
                kv_to_f32(a->kv_type, kr, row, hd, hd, kv_to_float);
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += (double)qr[i] * row[i];
                d *= a->scale;
                if (a->softcap > 0)
                    d = a->softcap * tanh(d / a->softcap);
                s[p - lo] = d;
                mx = d > mx ? d : mx;
            }
            double sum = a->sinks ? exp((double)a->sinks[h] - mx) : 0;
            for (int32_t p = lo; p < nv; p++)
                sum += (s[p - lo] = exp(s[p - lo] - mx));
            memset(o, 0, (size_t)hd * sizeof(double));
            for (int32_t p = lo; p < nv; p++) {
                const uint8_t *vr =
                    (const uint8_t *)kv->v + (size_t)cell_of(a, cell0[r], p) * kv->row_bytes + hoff;
                kv_to_f32(a->kv_type, vr, row, hd, hd, kv_to_float);
                double pn = s[p - lo] / sum;
                if (a->kv_type == GGUF_TYPE_F16)
                    pn = quant_f16_to_f32(quant_f32_to_f16((float)pn));
                for (int i = 0; i < hd; i++)
                    o[i] += pn * row[i];
            }
            for (int i = 0; i < hd; i++)
                out[(r * a->n_head + h) * hd + i] = (float)o[i];
        }
        free(s);
        free(o);
    }
    free(qr);
    free(tmp);
}

// The sampler chain (docs/spec/sampling.md §2, R1 = llama.cpp order): penalties → top_k →
// typical_p → top_p → min_p → temperature → seeded draw, or temperature → mirostat v1/v2.
// Stages are a table; sample_new() keeps the enabled ones in order.
//
// Grammar (§6.2): the chain runs once on all candidates, the chosen token is checked
// against the grammar; only when it is rejected is the full vocabulary mask computed and
// the chain run again on the allowed tokens.
//
// Cost on a 150k vocabulary: candidate ordering uses quickselect + sorting only the prefix
// a stage needs (top_k, top_p, mirostat); only typical_p sorts everything.
#include "sample/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void sample_options_default(struct sample_options *o)
{
    *o = (struct sample_options){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.9f,
        .min_p = 0.0f,
        .typical_p = 1.0f,
        .repeat_last_n = 64,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalize_newline = true,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
        .seed = -1,
        .num_ctx = 4096,
    };
}

// ---------------------------------------------------------------------------
// RNG: xoshiro256** seeded through splitmix64 — portable and exactly reproducible.

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

// Uniform double in [0, 1) with 53 random bits.
static double rng_uniform(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

// ---------------------------------------------------------------------------
// Candidates.

struct cand {
    int32_t id;
    float logit;
    float p;
};

struct cands {
    struct cand *v;
    size_t n;
    size_t n_sorted;  // v[0..n_sorted) are the largest logits, sorted descending
    double extra;     // softmax weight (relative to the max logit) of tokens left out
    bool p_ready;     // p already holds the softmax of the current list (+ extra)
};

// Total order: larger logit first, then lower id — so results never depend on the sort.
static inline bool cand_before(const struct cand *a, const struct cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

static void cand_swap(struct cand *a, struct cand *b)
{
    struct cand t = *a;
    *a = *b;
    *b = t;
}

// Moves the k best candidates of v[lo..hi) to the front (unordered): quickselect with a
// three-way partition (the order is total, so the pivot's block is never empty).
static void select_top(struct cand *v, size_t lo, size_t hi, size_t k)
{
    while (hi - lo > 1 && k > lo && k < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cand_before(&v[hi - 1], &v[lo]))
            cand_swap(&v[hi - 1], &v[lo]);
        if (cand_before(&v[mid], &v[lo]))
            cand_swap(&v[mid], &v[lo]);
        if (cand_before(&v[hi - 1], &v[mid]))
            cand_swap(&v[hi - 1], &v[mid]);
        struct cand pivot = v[mid];
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (cand_before(&v[i], &pivot))
                cand_swap(&v[lt++], &v[i++]);
            else if (cand_before(&pivot, &v[i]))
                cand_swap(&v[i], &v[--gt]);
            else
                i++;
        }
        if (k <= lt)
            hi = lt;
        else if (k <= gt)
            return;
        else
            lo = gt;
    }
}

// Ensures the m best candidates are at the front, sorted.
static void cands_sort_prefix(struct cands *c, size_t m)
{
    if (m > c->n)
        m = c->n;
    if (m <= c->n_sorted)
        return;
    if (m < c->n)
        select_top(c->v, c->n_sorted, c->n, m);
    qsort(c->v + c->n_sorted, m - c->n_sorted, sizeof(struct cand), cmp_cand);
    c->n_sorted = m;
}

static float cands_max_logit(const struct cands *c)
{
    if (c->n_sorted)
        return c->v[0].logit;
    float m = -INFINITY;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].logit > m)
            m = c->v[i].logit;
    return m;
}

// p_i = softmax(logit_i); returns nothing, p sums to 1.
static void cands_softmax(struct cands *c)
{
    float mx = cands_max_logit(c);
    double sum = c->extra;
    for (size_t i = 0; i < c->n; i++) {
        float w = expf(c->v[i].logit - mx);
        c->v[i].p = w;
        sum += w;
    }
    float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < c->n; i++)
        c->v[i].p *= inv;
}

// ---------------------------------------------------------------------------
// The sampler.

struct sampler {
    const struct sample_vocab *vocab;
    const struct sample_grammar *grammar;
    struct sample_options opt;
    struct rng rng;
    float mu;          // mirostat
    float mu_pending;  // μ after the current draw, committed when the token is accepted

    // penalty history: ring of the last n_hist tokens
    int32_t *hist;
    int32_t n_hist, hist_len, hist_pos;
    int32_t *count;   // occurrences of each token in the ring
    uint32_t *stamp;  // stamp[id] == step → already penalised this step
    uint32_t step;

    float *work;  // n_vocab logits after penalties
    float *heap;  // top_k values
    float *wbuf;  // n_vocab softmax weights (top_p pre-filter)
    struct cands c;
    struct cand *cbuf;

    struct stage {
        const char *name;
        void (*fn)(struct sampler *s, struct cands *c);
    } stages[8];
    int n_stages;

    bool grammar_active;
    struct gstate gs, gnext, gtmp;
    struct gmask_ctx mask;
    uint64_t n_full_mask;
};

static void stage_top_k(struct sampler *s, struct cands *c)
{
    size_t k = (size_t)s->opt.top_k;
    if (k >= c->n) {
        cands_sort_prefix(c, c->n);
        return;
    }
    cands_sort_prefix(c, k);
    c->n = k;
}

static void stage_typical(struct sampler *s, struct cands *c)
{
    cands_softmax(c);
    double ent = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].p > 0)
            ent -= (double)c->v[i].p * log(c->v[i].p);
    // order by |−ln p − H| ascending: reuse logit as the key temporarily
    struct cand *tmp = xmalloc(c->n * sizeof(*tmp));
    for (size_t i = 0; i < c->n; i++) {
        tmp[i] = c->v[i];
        double surprise = c->v[i].p > 0 ? -log(c->v[i].p) : INFINITY;
        tmp[i].logit = -(float)fabs(surprise - ent);  // larger = more typical
    }
    // shortest prefix in that order whose mass exceeds typical_p: sort only as much of the
    // order as the prefix needs
    struct cands t = {tmp, c->n, 0};
    double cum = 0;
    size_t keep = c->n, i = 0, m = 64;
    for (bool found = false; !found;) {
        cands_sort_prefix(&t, m);
        for (; i < t.n_sorted; i++) {
            cum += tmp[i].p;
            if (cum > s->opt.typical_p) {
                keep = i + 1;
                found = true;
                break;
            }
        }
        if (t.n_sorted >= t.n)
            break;
        m *= 4;
    }
    // restore the real logits (looked up from the sorted copy by id)
    for (size_t j = 0; j < keep; j++)
        tmp[j].logit = s->work[tmp[j].id];
    memcpy(c->v, tmp, keep * sizeof(*tmp));
    free(tmp);
    c->n = keep;
    c->n_sorted = 0;  // typicality order, not logit order
}

// top_p on a long unsorted list: bucket the candidates by logit (quarter-nat bins below the
// max), find the bin where the cumulative mass crosses top_p, keep the bins above it as
// they are and sort only that bin to place the cut. The kept set is the reference's
// (smallest sorted prefix reaching top_p); only the order of the bins above the cut is not
// sorted, which changes which token a given draw lands on, not the distribution. Returns
// false when the crossing lies beyond the binned range (the caller sorts instead).
#define TOP_P_BINS 128
static bool top_p_binned(struct sampler *s, struct cands *c)
{
    float mx = cands_max_logit(c);
    double mass[TOP_P_BINS] = {0};
    for (size_t i = 0; i < c->n; i++) {
        float d = (mx - c->v[i].logit) * 4.0f;
        if (d < TOP_P_BINS)
            mass[(int)d] += c->v[i].p;
    }
    double cum = 0;
    int cut = -1;
    for (int b = 0; b < TOP_P_BINS; b++) {
        if (cum + mass[b] >= s->opt.top_p) {
            cut = b;
            break;
        }
        cum += mass[b];
    }
    if (cut < 0)
        return false;
    // partition: bins before the cut, then the cut bin, then the rest
    size_t k0 = 0;
    for (size_t i = 0; i < c->n; i++) {
        float d = (mx - c->v[i].logit) * 4.0f;
        if (d < (float)cut)
            cand_swap(&c->v[k0++], &c->v[i]);
    }
    size_t k1 = k0;
    for (size_t i = k0; i < c->n; i++) {
        float d = (mx - c->v[i].logit) * 4.0f;
        if (d < (float)(cut + 1))
            cand_swap(&c->v[k1++], &c->v[i]);
    }
    qsort(c->v + k0, k1 - k0, sizeof(struct cand), cmp_cand);
    size_t n = k1;
    for (size_t i = k0; i < k1; i++) {
        cum += c->v[i].p;
        if (cum >= s->opt.top_p) {
            n = i + 1;
            break;
        }
    }
    c->n = n ? n : 1;
    c->n_sorted = k0 == 0 ? c->n : 0;
    return true;
}

static void stage_top_p(struct sampler *s, struct cands *c)
{
    if (!c->p_ready)
        cands_softmax(c);
    c->p_ready = false;
    c->extra = 0;  // later stages see only the kept tokens, as in the reference
    if (c->n > 4096 && c->n_sorted == 0 && top_p_binned(s, c))
        return;
    double cum = 0;
    size_t i = 0, m = 64;
    if (c->n_sorted == 0 && c->n <= 64)
        m = c->n;
    // (after typical_p the list is in typicality order: it is sorted again by probability,
    // as the reference does)
    for (;;) {
        cands_sort_prefix(c, m);
        size_t lim = c->n_sorted < c->n ? c->n_sorted : c->n;
        for (; i < lim; i++) {
            cum += c->v[i].p;
            if (cum >= s->opt.top_p) {
                c->n = i + 1;
                if (c->n_sorted > c->n)
                    c->n_sorted = c->n;
                return;
            }
        }
        if (lim >= c->n)
            return;
        m *= 4;
    }
}

static void stage_min_p(struct sampler *s, struct cands *c)
{
    float thr = cands_max_logit(c) + logf(s->opt.min_p);
    size_t best = 0;
    for (size_t i = 1; i < c->n; i++)
        if (cand_before(&c->v[i], &c->v[best]))
            best = i;
    if (c->v[best].logit < thr) {  // min_p > 1 keeps nothing: keep the most likely token
        c->v[0] = c->v[best];
        c->n = 1;
        c->n_sorted = 1;
        return;
    }
    size_t k = 0, sorted_kept = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->v[i].logit >= thr) {
            if (i < c->n_sorted)
                sorted_kept++;
            c->v[k++] = c->v[i];
        }
    }
    // the sorted entries are the largest, so those kept are still a sorted prefix; if some
    // were dropped, everything after them was dropped too and the whole list is sorted
    c->n_sorted = sorted_kept;
    c->n = k;
}

static void stage_temperature(struct sampler *s, struct cands *c)
{
    float t = s->opt.temperature;
    if (t <= 0) {
        size_t best = 0;
        for (size_t i = 1; i < c->n; i++)
            if (cand_before(&c->v[i], &c->v[best]))
                best = i;
        c->v[0] = c->v[best];
        c->n = 1;
        c->n_sorted = 1;
        return;
    }
    for (size_t i = 0; i < c->n; i++)
        c->v[i].logit /= t;
}

// Draw from softmax(logits) in list order; returns the index.
static size_t draw(struct sampler *s, struct cands *c)
{
    double r = rng_uniform(&s->rng);
    if (c->n == 1)
        return 0;
    float mx = cands_max_logit(c);
    double sum = 0;
    for (size_t i = 0; i < c->n; i++) {
        c->v[i].p = expf(c->v[i].logit - mx);
        sum += c->v[i].p;
    }
    double target = r * sum, cum = 0;
    for (size_t i = 0; i < c->n; i++) {
        cum += c->v[i].p;
        if (cum >= target && c->v[i].p > 0)
            return i;
    }
    for (size_t i = c->n; i-- > 0;)  // rounding: the last candidate with weight
        if (c->v[i].p > 0)
            return i;
    return 0;
}

static void stage_mirostat1(struct sampler *s, struct cands *c)
{
    const int m = 100;
    double n = (double)sample_vocab_size(s->vocab);
    cands_softmax(c);
    cands_sort_prefix(c, (size_t)m);
    double sum_ti_bi = 0, sum_ti_sq = 0;
    for (size_t i = 0; i + 1 < (size_t)m && i + 1 < c->n; i++) {
        if (c->v[i].p <= 0 || c->v[i + 1].p <= 0)
            break;
        double t_i = log((double)(i + 2) / (double)(i + 1));
        double b_i = log((double)c->v[i].p / (double)c->v[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    double s_hat = sum_ti_sq > 0 ? sum_ti_bi / sum_ti_sq : 1.0;
    double eps = s_hat - 1;
    double k = 1;
    if (fabs(eps) > 1e-9 && s_hat > 0)
        k = pow(eps * pow(2.0, s->mu) / (1 - pow(n, -eps)), 1 / s_hat);
    size_t keep = !(k >= 1) ? 1 : k >= (double)c->n ? c->n : (size_t)k;
    // the top `keep` (their order only matters for which token a given draw lands on, so
    // they are not sorted beyond the prefix already sorted)
    if (keep > c->n_sorted && keep < c->n)
        select_top(c->v, c->n_sorted, c->n, keep);
    c->n = keep;
    if (c->n_sorted > keep)
        c->n_sorted = keep;
    cands_softmax(c);
}

static void stage_mirostat2(struct sampler *s, struct cands *c)
{
    cands_softmax(c);
    double thr = exp2(-(double)s->mu);  // -log2(p) > mu  <=>  p < 2^-mu
    size_t k = 0;
    size_t best = 0;
    for (size_t i = 1; i < c->n; i++)
        if (cand_before(&c->v[i], &c->v[best]))
            best = i;
    struct cand top = c->v[best];
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].p >= thr)
            c->v[k++] = c->v[i];
    if (k == 0)
        c->v[k++] = top;
    c->n = k;
    c->n_sorted = 0;
    if (k <= 1024)
        cands_sort_prefix(c, k);  // small lists: draw in probability order, like the reference
    cands_softmax(c);
}

static const struct stage stage_table[] = {
    {"top_k", stage_top_k},
    {"typical_p", stage_typical},
    {"top_p", stage_top_p},
    {"min_p", stage_min_p},
    {"temperature", stage_temperature},
    {"mirostat1", stage_mirostat1},
    {"mirostat2", stage_mirostat2},
};

static void add_stage(struct sampler *s, const char *name)
{
    for (size_t i = 0; i < sizeof(stage_table) / sizeof(stage_table[0]); i++)
        if (strcmp(stage_table[i].name, name) == 0)
            s->stages[s->n_stages++] = stage_table[i];
}

static uint64_t random_seed(void)
{
    uint64_t x = 0;
    if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
    return x;
}

int sample_new(struct sampler **out, const struct sample_vocab *vocab,
               const struct sample_options *o, const struct sample_grammar *grammar, struct err *e)
{
    if (!vocab)
        return err_set(e, ERR_INVALID, "sampler needs a vocabulary");
    if (o->mirostat < 0 || o->mirostat > 2)
        return err_set(e, ERR_INVALID, "mirostat must be 0, 1 or 2");
    if (!isfinite(o->temperature) || !isfinite(o->top_p) || !isfinite(o->min_p) ||
        !isfinite(o->typical_p) || !isfinite(o->repeat_penalty) || !isfinite(o->presence_penalty) ||
        !isfinite(o->frequency_penalty) || !isfinite(o->mirostat_tau) || !isfinite(o->mirostat_eta))
        return err_set(e, ERR_INVALID, "sampling options must be finite numbers");
    struct sampler *s = xcalloc(1, sizeof(*s));
    s->vocab = vocab;
    s->grammar = grammar;
    s->opt = *o;
    if (s->opt.repeat_penalty <= 0)
        s->opt.repeat_penalty = 1.0f;  // a non-positive factor would flip signs: off
    rng_seed(&s->rng, o->seed >= 0 ? (uint64_t)o->seed : random_seed());
    s->mu = 2 * o->mirostat_tau;
    int32_t n_vocab = sample_vocab_size(vocab);
    int32_t n_hist = o->repeat_last_n < 0 ? (o->num_ctx > 0 ? o->num_ctx : 4096) : o->repeat_last_n;
    bool penalties =
        o->mirostat == 0 && n_hist > 0 &&
        (o->repeat_penalty != 1.0f || o->presence_penalty != 0.0f || o->frequency_penalty != 0.0f);
    if (penalties) {
        if (n_hist > (1 << 22))
            n_hist = 1 << 22;
        s->n_hist = n_hist;
        s->hist = xmalloc((size_t)n_hist * sizeof(int32_t));
        s->stamp = xcalloc((size_t)n_vocab, sizeof(uint32_t));
        s->count = xcalloc((size_t)n_vocab, sizeof(int32_t));
    }
    s->work = xmalloc((size_t)n_vocab * sizeof(float));
    s->cbuf = xmalloc((size_t)n_vocab * sizeof(struct cand));
    if (o->mirostat) {
        add_stage(s, "temperature");
        if (o->temperature > 0)
            add_stage(s, o->mirostat == 1 ? "mirostat1" : "mirostat2");
    } else {
        if (o->top_k > 0)
            add_stage(s, "top_k");
        if (o->typical_p < 1.0f)
            add_stage(s, "typical_p");
        if (o->top_p < 1.0f)
            add_stage(s, "top_p");
        if (o->min_p > 0.0f)
            add_stage(s, "min_p");
        add_stage(s, "temperature");
    }
    s->grammar_active = grammar != NULL;
    if (grammar) {
        int rc = gstate_start(grammar, &s->gs);
        if (rc <= 0) {
            sample_free(s);
            return err_set(e, ERR_INVALID, "grammar has no valid start");
        }
    }
    *out = s;
    return 0;
}

void sample_free(struct sampler *s)
{
    if (!s)
        return;
    free(s->hist);
    free(s->stamp);
    free(s->count);
    free(s->work);
    free(s->heap);
    free(s->wbuf);
    free(s->cbuf);
    gstate_free(&s->gs);
    gstate_free(&s->gnext);
    gstate_free(&s->gtmp);
    gmask_ctx_free(&s->mask);
    free(s);
}

static void hist_push(struct sampler *s, int32_t token)
{
    if (!s->n_hist || token < 0 || token >= sample_vocab_size(s->vocab))
        return;
    if (s->hist_len == s->n_hist)
        s->count[s->hist[s->hist_pos]]--;  // evict the oldest
    s->hist[s->hist_pos] = token;
    s->count[token]++;
    s->hist_pos = (s->hist_pos + 1) % s->n_hist;
    if (s->hist_len < s->n_hist)
        s->hist_len++;
}

void sample_feed_prompt(struct sampler *s, int32_t token)
{
    hist_push(s, token);
}

void sample_grammar_set_active(struct sampler *s, bool active)
{
    s->grammar_active = active && s->grammar;
}

bool sample_grammar_complete(const struct sampler *s)
{
    if (!s->grammar || !s->grammar_active || !s->gs.complete)
        return false;
    for (int c = 0; c < 256; c++)
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' &&
            gstate_may_accept(s->grammar, &s->gs, (uint8_t)c))
            return false;
    return true;
}

uint64_t sample_full_mask_count(const struct sampler *s)
{
    return s->n_full_mask;
}

// §2.1: every token in the window is penalised once; count scales the frequency penalty.
static void apply_penalties(struct sampler *s)
{
    if (!s->n_hist || !s->hist_len)
        return;
    const struct sample_vocab *v = s->vocab;
    float saved_nl[8];
    int32_t n_nl = v->n_newline < 8 ? v->n_newline : 8;
    for (int32_t i = 0; i < n_nl; i++)
        saved_nl[i] = s->work[v->newline_ids[i]];
    if (++s->step == 0) {  // stamp wrap-around: clear
        memset(s->stamp, 0, (size_t)sample_vocab_size(v) * sizeof(uint32_t));
        s->step = 1;
    }
    for (int32_t i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (s->stamp[t] == s->step)
            continue;
        s->stamp[t] = s->step;
        int32_t count = s->count[t];
        float l = s->work[t];
        l = l <= 0 ? l * s->opt.repeat_penalty : l / s->opt.repeat_penalty;
        l -= (float)count * s->opt.frequency_penalty + s->opt.presence_penalty;
        s->work[t] = l;
    }
    if (!s->opt.penalize_newline)
        for (int32_t i = 0; i < n_nl; i++)
            s->work[v->newline_ids[i]] = saved_nl[i];
}

// Whether any of the SCAN_CHUNK logits from l is at or above t (NaN never is). A fixed
// count with no early exit, so the compiler compares them a vector at a time: the scans
// below skip whole chunks that cannot enter, most of a large vocabulary.
#define SCAN_CHUNK 16
static bool chunk_reaches(const float *l, float t)
{
    int any = 0;
    for (int j = 0; j < SCAN_CHUNK; j++)
        any |= l[j] >= t;
    return any != 0;
}

// k-th largest finite logit among the allowed tokens (a min-heap of k values), or -inf
// when fewer than k exist.
static float kth_largest(const float *l, int32_t n, const uint64_t *allowed, size_t k, float *heap)
{
    size_t h = 0;
    for (int32_t i = 0; i < n; i++) {
        // once the heap is full only values above its root enter, and the root only
        // rises: a chunk with none at or above it is skipped whole
        if (h == k && i % SCAN_CHUNK == 0 && n - i >= SCAN_CHUNK &&
            !chunk_reaches(l + i, heap[0])) {
            i += SCAN_CHUNK - 1;
            continue;
        }
        float x = l[i];
        if (x != x || x == -INFINITY || (allowed && !((allowed[i >> 6] >> (i & 63)) & 1)))
            continue;
        if (h < k) {  // sift up
            size_t j = h++;
            while (j > 0 && heap[(j - 1) / 2] > x) {
                heap[j] = heap[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            heap[j] = x;
        } else if (x > heap[0]) {  // replace the root, sift down
            size_t j = 0;
            for (;;) {
                size_t c = 2 * j + 1;
                if (c >= k)
                    break;
                if (c + 1 < k && heap[c + 1] < heap[c])
                    c++;
                if (heap[c] >= x)
                    break;
                heap[j] = heap[c];
                j = c;
            }
            heap[j] = x;
        }
    }
    return h < k ? -INFINITY : heap[0];
}

static void stage_top_p(struct sampler *s, struct cands *c);

// top_p first in the chain (top_k and typical_p off): when the tokens within 20 nats of the
// max already hold top_p of the mass, the others can never be kept; they stay out of the
// candidate list and only their total weight (*extra) enters the top_p softmax.
static float top_p_threshold(struct sampler *s, const uint64_t *allowed, double *extra,
                             double *total)
{
    int32_t n = sample_vocab_size(s->vocab);
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (s->work[i] > mx && (!allowed || ((allowed[i >> 6] >> (i & 63)) & 1)))
            mx = s->work[i];
    if (mx == -INFINITY)
        return -INFINITY;
    float thr = mx - 20.0f;
    double above = 0, below = 0;
    if (!s->wbuf)
        s->wbuf = xmalloc((size_t)n * sizeof(float));
    for (int32_t i = 0; i < n; i++) {
        float x = s->work[i];
        if (x != x || x == -INFINITY || (allowed && !((allowed[i >> 6] >> (i & 63)) & 1)))
            continue;
        float w = expf(x - mx);
        s->wbuf[i] = w;  // the same weights cands_softmax would compute
        if (x >= thr)
            above += w;
        else
            below += w;
    }
    *total = above + below;
    if (above < s->opt.top_p * (above + below)) {
        *extra = 0;
        return -INFINITY;
    }
    *extra = below;
    return thr;
}

// Runs the stages on s->c and draws. allowed (NULL = all) restricts the candidates.
static int32_t run_chain(struct sampler *s, const uint64_t *allowed, float *mu_after)
{
    int32_t n_vocab = sample_vocab_size(s->vocab);
    struct cands *c = &s->c;
    c->v = s->cbuf;
    c->n = 0;
    c->n_sorted = 0;
    // top_k first in the chain: only candidates at or above the k-th largest logit enter
    // the list (ties at the threshold enter too; the top_k stage then cuts by id)
    c->extra = 0;
    c->p_ready = false;
    double total = 0;
    float thr = -INFINITY;
    if (s->opt.mirostat == 0 && s->opt.top_k > 0 && (size_t)s->opt.top_k * 8 < (size_t)n_vocab) {
        if (!s->heap)
            s->heap = xmalloc((size_t)s->opt.top_k * sizeof(float));
        thr = kth_largest(s->work, n_vocab, allowed, (size_t)s->opt.top_k, s->heap);
    } else if (s->n_stages > 0 && s->stages[0].fn == stage_top_p) {
        thr = top_p_threshold(s, allowed, &c->extra, &total);
        c->p_ready = total > 0;
    }
    double inv_total = total > 0 ? 1.0 / total : 0;
    const bool cut = thr > -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (cut && i % SCAN_CHUNK == 0 && n_vocab - i >= SCAN_CHUNK &&
            !chunk_reaches(s->work + i, thr)) {
            i += SCAN_CHUNK - 1;  // no value of the chunk at or above the threshold
            continue;
        }
        float x = s->work[i];
        if (x != x || x == -INFINITY || x < thr)
            continue;  // NaN, masked by the model, or below the top_k / top_p threshold
        if (allowed && !((allowed[i >> 6] >> (i & 63)) & 1))
            continue;
        c->v[c->n++] = (struct cand){i, x, c->p_ready ? (float)(s->wbuf[i] * inv_total) : 0};
    }
    if (c->n == 0)
        return -1;
    for (int i = 0; i < s->n_stages; i++)
        s->stages[i].fn(s, c);
    size_t k = draw(s, c);
    int32_t tok = c->v[k].id;
    *mu_after = s->mu;
    if (s->opt.mirostat && s->opt.temperature > 0) {
        double px = c->v[k].p;
        double wsum = 0;
        for (size_t i = 0; i < c->n; i++)
            wsum += c->v[i].p;
        double surprise = -log2(px / wsum);
        *mu_after = s->mu - s->opt.mirostat_eta * (float)(surprise - s->opt.mirostat_tau);
    }
    return tok;
}

int sample_next(struct sampler *s, const float *logits, int32_t *token, struct err *e)
{
    int32_t n_vocab = sample_vocab_size(s->vocab);
    memcpy(s->work, logits, (size_t)n_vocab * sizeof(float));
    if (s->opt.mirostat == 0)
        apply_penalties(s);
    float mu_after = s->mu;
    bool constrained = s->grammar && s->grammar_active;
    int32_t tok;
    if (!constrained) {
        tok = run_chain(s, NULL, &mu_after);
        if (tok < 0)
            return err_set(e, ERR_INVALID, "no token can be sampled (all logits are -inf)");
    } else {
        tok = run_chain(s, NULL, &mu_after);
        if (tok < 0 || !gmask_token_ok(s->grammar, s->vocab, &s->gs, tok, &s->gnext, &s->gtmp)) {
            s->n_full_mask++;
            const uint64_t *allowed = gmask_compute(&s->mask, s->grammar, s->vocab, &s->gs);
            tok = run_chain(s, allowed, &mu_after);
            if (tok < 0)
                return err_set(e, ERR_INVALID,
                               "structured output: no token of the vocabulary can continue "
                               "the output");
            if (!gmask_token_ok(s->grammar, s->vocab, &s->gs, tok, &s->gnext, &s->gtmp))
                return err_set(e, ERR_INTERNAL, "grammar mask disagrees with matcher");
        }
        struct gstate t = s->gs;
        s->gs = s->gnext;
        s->gnext = t;
    }
    s->mu = mu_after;
    hist_push(s, tok);
    *token = tok;
    return 0;
}

// ---------------------------------------------------------------------------
// Log probabilities

int sample_logprobs(const float *logits, int32_t n_vocab, int32_t token, float *token_logprob,
                    struct sample_logprob *top, int top_n)
{
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] == logits[i])
            sum += exp((double)logits[i] - mx);
    float lse = mx + (float)log(sum);
    if (token_logprob)
        *token_logprob = token >= 0 && token < n_vocab ? logits[token] - lse : -INFINITY;
    if (top_n <= 0 || !top)
        return 0;
    // insertion into a small sorted list: top_n is at most 20 in the API
    int n = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        float x = logits[i];
        if (x != x || x == -INFINITY)
            continue;
        if (n == top_n && !(x > top[n - 1].logprob))
            continue;
        int j = n < top_n ? n++ : n - 1;
        while (j > 0 && x > top[j - 1].logprob) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (struct sample_logprob){i, x};
    }
    for (int j = 0; j < n; j++)
        top[j].logprob -= lse;
    return n;
}

// ---------------------------------------------------------------------------
// num_predict

int64_t sample_predict_limit(int64_t num_predict, int64_t num_ctx, int64_t n_prompt)
{
    if (num_ctx <= 0)
        num_ctx = 4096;
    if (num_predict >= 0)
        return num_predict;
    if (num_predict == -2)
        return num_ctx > n_prompt ? num_ctx - n_prompt : 0;
    return 10 * num_ctx;
}

const char *sample_done_reason(enum sample_done d)
{
    return d == SAMPLE_DONE_LENGTH ? "length" : "stop";
}

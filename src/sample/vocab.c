// The abstract vocabulary (token bytes + EOG flags) and grammar token masks.
//
// Masks walk the vocabulary in byte order: tokens sorted by their bytes share prefixes
// with their neighbours, so the matcher state after each prefix is computed once (a trie
// walk without building the trie), and a prefix the grammar rejects skips every token
// that starts with it. Recent masks are cached by exact matcher state: inside a JSON
// string the state repeats after every character, so most full masks are cache hits.
#include "sample/internal.h"

#include <stdlib.h>
#include <string.h>

struct sort_item {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
};

static int cmp_item(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int sample_vocab_new(struct sample_vocab **out, int32_t n_vocab, const char *const *pieces,
                     const uint32_t *piece_lens, const bool *is_eog, struct err *e)
{
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return err_set(e, ERR_INVALID, "vocabulary size %d out of range", (int)n_vocab);
    if (!pieces || !piece_lens)
        return err_set(e, ERR_INVALID, "vocabulary without pieces");
    size_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (piece_lens[i] && !pieces[i])
            return err_set(e, ERR_INVALID, "token %d has a length but no bytes", (int)i);
        if (!size_add(&total, total, piece_lens[i]) || total > UINT32_MAX / 2)
            return err_set(e, ERR_TOO_LARGE, "vocabulary too large");
    }
    struct sample_vocab *v = xcalloc(1, sizeof(*v));
    v->n_vocab = n_vocab;
    v->bytes = xmalloc(total + 1);
    v->off = xmalloc(((size_t)n_vocab + 1) * sizeof(uint32_t));
    v->is_eog = xcalloc((size_t)n_vocab, 1);
    size_t k = 0;
    int32_t n_eog = 0, n_nl = 0, n_sorted = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        v->off[i] = (uint32_t)k;
        if (piece_lens[i])
            memcpy(v->bytes + k, pieces[i], piece_lens[i]);
        k += piece_lens[i];
        if (piece_lens[i] > v->max_len)
            v->max_len = piece_lens[i];
        v->is_eog[i] = is_eog && is_eog[i];
        if (v->is_eog[i])
            n_eog++;
        else if (piece_lens[i])
            n_sorted++;
        if (piece_lens[i] == 1 && pieces[i][0] == '\n')
            n_nl++;
    }
    v->off[n_vocab] = (uint32_t)k;
    v->eog_ids = xmalloc(((size_t)n_eog + 1) * sizeof(int32_t));
    v->newline_ids = xmalloc(((size_t)n_nl + 1) * sizeof(int32_t));
    struct sort_item *items = xmalloc(((size_t)n_sorted + 1) * sizeof(*items));
    for (int32_t i = 0; i < n_vocab; i++) {
        uint32_t len;
        const char *p = vocab_piece(v, i, &len);
        if (v->is_eog[i])
            v->eog_ids[v->n_eog++] = i;
        else if (len)
            items[v->n_sorted++] = (struct sort_item){(const uint8_t *)p, len, i};
        if (len == 1 && p[0] == '\n')
            v->newline_ids[v->n_newline++] = i;
    }
    qsort(items, (size_t)v->n_sorted, sizeof(*items), cmp_item);
    v->sorted = xmalloc(((size_t)v->n_sorted + 1) * sizeof(int32_t));
    v->lcp = xmalloc(((size_t)v->n_sorted + 1) * sizeof(uint32_t));
    for (int32_t i = 0; i < v->n_sorted; i++) {
        v->sorted[i] = items[i].id;
        uint32_t l = 0;
        if (i > 0) {
            uint32_t n = items[i].len < items[i - 1].len ? items[i].len : items[i - 1].len;
            while (l < n && items[i].p[l] == items[i - 1].p[l])
                l++;
        }
        v->lcp[i] = l;
    }
    free(items);
    *out = v;
    return 0;
}

void sample_vocab_free(struct sample_vocab *v)
{
    if (!v)
        return;
    free(v->bytes);
    free(v->off);
    free(v->is_eog);
    free(v->eog_ids);
    free(v->sorted);
    free(v->lcp);
    free(v->newline_ids);
    free(v);
}

int32_t sample_vocab_size(const struct sample_vocab *v)
{
    return v->n_vocab;
}

// ---------------------------------------------------------------------------
// Masks.

void gmask_ctx_free(struct gmask_ctx *m)
{
    for (int32_t i = 0; i < m->n_states; i++)
        gstate_free(&m->states[i].st);
    free(m->states);
    free(m->index);
    free(m->depth);
    gstate_free(&m->tmp);
    for (size_t i = 0; i < sizeof(m->cache) / sizeof(m->cache[0]); i++) {
        free(m->cache[i].key);
        free(m->cache[i].bits);
    }
    memset(m, 0, sizeof(*m));
}

static uint32_t state_hash(const struct gstate *st)
{
    uint32_t h = 2166136261u ^ (uint32_t)st->complete;
    for (int32_t i = 0; i < st->n; i++)
        h = (h ^ (uint32_t)st->d[i]) * 16777619u;
    return h;
}

static void intern_reset(struct gmask_ctx *m)
{
    for (int32_t i = 0; i < m->n_states; i++)
        gstate_free(&m->states[i].st);
    m->n_states = 0;
    if (m->index)
        memset(m->index, 0, (size_t)m->index_cap * sizeof(int32_t));
}

// Id of the state equal to st (added when new).
static int32_t intern(struct gmask_ctx *m, const struct gstate *st)
{
    if (!m->index) {
        m->index_cap = 2 * GMASK_MAX_STATES;
        m->index = xcalloc((size_t)m->index_cap, sizeof(int32_t));
    }
    uint32_t h = state_hash(st);
    uint32_t mask = (uint32_t)m->index_cap - 1;
    uint32_t slot = h & mask;
    for (; m->index[slot]; slot = (slot + 1) & mask) {
        struct gmask_state *x = &m->states[m->index[slot] - 1];
        if (x->hash == h && x->st.n == st->n && x->st.complete == st->complete &&
            memcmp(x->st.d, st->d, (size_t)st->n * sizeof(int32_t)) == 0)
            return m->index[slot] - 1;
    }
    if (m->n_states == m->cap_states) {
        m->cap_states = m->cap_states ? m->cap_states * 2 : 64;
        m->states = xrealloc(m->states, (size_t)m->cap_states * sizeof(*m->states));
    }
    struct gmask_state *x = &m->states[m->n_states];
    memset(&x->st, 0, sizeof(x->st));
    gstate_copy(&x->st, st);
    x->hash = h;
    for (int i = 0; i < 256; i++)
        x->next[i] = GMASK_UNKNOWN;
    m->index[slot] = m->n_states + 1;
    return m->n_states++;
}

// State id after byte c from state id, or GMASK_DEAD.
static int32_t step(struct gmask_ctx *m, const struct sample_grammar *g, int32_t id, uint8_t c)
{
    int32_t nx = m->states[id].next[c];
    if (nx != GMASK_UNKNOWN)
        return nx;
    const struct gstate *cur = &m->states[id].st;
    if (!gstate_may_accept(g, cur, c) || gstate_advance(g, cur, c, &m->tmp) <= 0) {
        nx = GMASK_DEAD;
    } else if (m->n_states >= GMASK_MAX_STATES) {
        return GMASK_UNKNOWN;  // table full: the caller walks without memoising
    } else {
        nx = intern(m, &m->tmp);
    }
    m->states[id].next[c] = nx;
    return nx;
}

bool gmask_token_ok(const struct sample_grammar *g, const struct sample_vocab *v,
                    const struct gstate *st, int32_t id, struct gstate *next, struct gstate *tmp)
{
    if (id < 0 || id >= v->n_vocab)
        return false;
    if (v->is_eog[id]) {
        if (next && st->complete)
            gstate_copy(next, st);
        return st->complete;
    }
    uint32_t len;
    const char *p = vocab_piece(v, id, &len);
    if (len == 0 || !gstate_may_accept(g, st, (uint8_t)p[0]))
        return false;
    // Alternate between next and tmp; the final state must end up in next.
    struct gstate *bufs[2] = {len % 2 ? next : tmp, len % 2 ? tmp : next};
    struct gstate local[2] = {{0}, {0}};
    if (!next) {
        bufs[0] = &local[0];
        bufs[1] = &local[1];
    }
    const struct gstate *cur = st;
    bool ok = true;
    for (uint32_t i = 0; i < len; i++) {
        struct gstate *o = bufs[i % 2];
        if (gstate_advance(g, cur, (uint8_t)p[i], o) <= 0) {
            ok = false;
            break;
        }
        cur = o;
    }
    gstate_free(&local[0]);
    gstate_free(&local[1]);
    return ok;
}

static void mask_walk(struct gmask_ctx *m, const struct sample_grammar *g,
                      const struct sample_vocab *v, const struct gstate *st, uint64_t *bits)
{
    size_t words = ((size_t)v->n_vocab + 63) / 64;
    memset(bits, 0, words * sizeof(uint64_t));
    if (st->complete)
        for (int32_t i = 0; i < v->n_eog; i++)
            bits[v->eog_ids[i] >> 6] |= 1ull << (v->eog_ids[i] & 63);
    if (m->n_states > GMASK_MAX_STATES / 2)
        intern_reset(m);  // keep the table small and mostly relevant
    if (m->n_depth < (int32_t)v->max_len + 1) {
        m->n_depth = (int32_t)v->max_len + 1;
        m->depth = xrealloc(m->depth, (size_t)m->n_depth * sizeof(int32_t));
    }
    m->depth[0] = intern(m, st);
    uint32_t valid = 0;    // depth[0..valid] hold states for the current token's prefix
    int64_t dead_at = -1;  // depth at which the previous walk died, or -1
    for (int32_t i = 0; i < v->n_sorted; i++) {
        int32_t id = v->sorted[i];
        uint32_t len;
        const uint8_t *p = (const uint8_t *)vocab_piece(v, id, &len);
        if (v->lcp[i] < valid)
            valid = v->lcp[i];
        if (dead_at >= 0 && (uint32_t)dead_at <= valid)
            continue;  // shares a rejected prefix
        dead_at = -1;
        uint32_t j = valid;
        bool full = false;
        for (; j < len; j++) {
            int32_t nx = step(m, g, m->depth[j], p[j]);
            if (nx == GMASK_UNKNOWN) {
                full = true;
                break;
            }
            if (nx == GMASK_DEAD) {
                dead_at = (int64_t)j + 1;
                break;
            }
            m->depth[j + 1] = nx;
        }
        if (full) {  // state table full: check this token directly, keep the known prefix
            if (gmask_token_ok(g, v, st, id, NULL, NULL))
                bits[id >> 6] |= 1ull << (id & 63);
            valid = j;
            continue;
        }
        valid = dead_at >= 0 ? (uint32_t)dead_at : len;
        if (dead_at < 0)
            bits[id >> 6] |= 1ull << (id & 63);
    }
}

const uint64_t *gmask_compute(struct gmask_ctx *m, const struct sample_grammar *g,
                              const struct sample_vocab *v, const struct gstate *st)
{
    size_t n_cache = sizeof(m->cache) / sizeof(m->cache[0]);
    m->clock++;
    struct gmask_entry *slot = &m->cache[0];
    for (size_t i = 0; i < n_cache; i++) {
        struct gmask_entry *c = &m->cache[i];
        if (c->bits && c->key_n == st->n && c->complete == st->complete &&
            memcmp(c->key, st->d, (size_t)st->n * sizeof(int32_t)) == 0) {
            c->last_use = m->clock;
            return c->bits;
        }
        if (!c->bits || (slot->bits && c->last_use < slot->last_use))
            slot = c;
    }
    size_t words = ((size_t)v->n_vocab + 63) / 64;
    if (!slot->bits)
        slot->bits = xmalloc(words * sizeof(uint64_t));
    slot->key = xrealloc(slot->key, ((size_t)st->n + 1) * sizeof(int32_t));
    if (st->n)
        memcpy(slot->key, st->d, (size_t)st->n * sizeof(int32_t));
    slot->key_n = st->n;
    slot->complete = st->complete;
    slot->last_use = m->clock;
    mask_walk(m, g, v, st, slot->bits);
    return slot->bits;
}

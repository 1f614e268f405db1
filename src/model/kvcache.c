// The KV cache shared by slots, and the slot operations on it.
//
// Layout per layer: linear layers hold n_slots × n_ctx cells, position p of
// slot s in cell s·n_ctx + p, so a slot's keys are contiguous and a token at
// position p attends cells [s·n_ctx, s·n_ctx + p]. Sliding-window layers
// whose window (plus a batch) is shorter than the context keep a ring of
// kv_ring = n_swa + n_batch cells per slot, position p in cell
// s·kv_ring + p % kv_ring: their memory does not grow with n_ctx. A ubatch
// writes at most n_batch positions, so the window of each of its rows is
// still in the ring when it attends (as llama.cpp's SWA cache of n_swa +
// n_ubatch cells).
//
// Removing positions moves the later cells down and re-rotates their keys
// (RoPE angles add); ring layers move only the rows they still hold.
#include "model/internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"

static int64_t kv_dim_of(const struct model *m)
{
    return (int64_t)m->hp.n_head_kv * m->hp.head_dim;
}

// The head dimension of a layer's cached keys (gemma4's sliding layers
// have their own, at the front of each row).
static int layer_head_dim(const struct model *m, const struct model_layer *L)
{
    return L->swa && m->hp.head_dim_swa > 0 ? m->hp.head_dim_swa : m->hp.head_dim;
}

void model_kv_plan(struct model *m)
{
    const struct model_options *o = &m->opts;
    m->n_cells = o->n_ctx * o->n_slots;
    m->kv_ring = 0;
    if (m->arch->encoder || m->hp.n_swa <= 0 || o->kv_full_length)
        return;
    int64_t ring = (int64_t)m->hp.n_swa + o->n_batch;
    if (ring >= o->n_ctx)
        return;  // the window covers the context: linear like the others
    m->kv_ring = (int)ring;
    for (int il = 0; il < m->hp.n_layer; il++)
        m->layers[il].kv_ring = m->layers[il].swa ? m->kv_ring : 0;
}

static int64_t layer_cells(const struct model *m, const struct model_layer *L)
{
    return L->kv_ring > 0 ? (int64_t)L->kv_ring * m->opts.n_slots : m->n_cells;
}

// Layers without attention (hybrids' recurrent layers) have no K/V cache.
static bool has_kv(const struct model *m, int il)
{
    return m->arch->encoder || m->layers[il].n_head_kv > 0;
}

uint64_t model_rstate_bytes(const struct model *m)
{
    uint64_t per_slot = 0;
    for (int il = 0; il < m->hp.n_layer; il++)
        per_slot += (uint64_t)(m->layers[il].rs.conv_floats + m->layers[il].rs.ssm_floats);
    // Live state plus the checkpoints of every slot.
    return per_slot * sizeof(float) * (uint64_t)m->opts.n_slots * (1 + MODEL_CKPTS + 1);
}

uint64_t model_kv_bytes(const struct model *m)
{
    uint64_t row = engine_kv_row_bytes(m->kv_type, kv_dim_of(m)), total = 0;
    // Encoders share one layer's buffers (they hold one layer at a time).
    int n_kv_layers = m->arch->encoder ? 1 : m->hp.n_layer;
    for (int il = 0; il < n_kv_layers; il++)
        if (has_kv(m, il))
            total +=
                (m->hp.kv_v_is_k ? 1ull : 2ull) * row * (uint64_t)layer_cells(m, &m->layers[il]);
    return total + model_rstate_bytes(m);
}

// The recurrent state of every layer that has one, and each slot's
// checkpoints (host memory), all zero.
static int rstate_alloc(struct model *m, struct err *e)
{
    const int n_slots = m->opts.n_slots;
    m->rstate_floats = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_rstate *rs = &m->layers[il].rs;
        if (rs->conv_floats < 0 || rs->ssm_floats < 0 ||
            rs->conv_floats + rs->ssm_floats > (INT64_MAX / 8) / n_slots)
            return err_set(e, ERR_TOO_LARGE, "recurrent state too large");
        m->rstate_floats += rs->conv_floats + rs->ssm_floats;
        float **bufs[2] = {&rs->conv, &rs->ssm};
        int64_t n[2] = {rs->conv_floats, rs->ssm_floats};
        for (int b = 0; b < 2; b++) {
            if (n[b] == 0)
                continue;
            size_t bytes = (size_t)n[b] * (size_t)n_slots * sizeof(float);
            *bufs[b] = engine_buf_alloc(m->be, bytes);
            if (!*bufs[b])
                return err_set(e, ERR_NOMEM, "allocate recurrent state (%zu bytes)", bytes);
            float *zero = xcalloc((size_t)n[b] * (size_t)n_slots, sizeof(float));
            engine_buf_write(m->be, *bufs[b], zero, bytes);
            free(zero);
        }
    }
    m->recurrent = m->rstate_floats > 0;
    if (!m->recurrent)
        return 0;
    size_t n_ck = (size_t)n_slots * (MODEL_CKPTS + 1);
    m->ckpts = xcalloc(n_ck, sizeof *m->ckpts);
    for (size_t i = 0; i < n_ck; i++) {
        m->ckpts[i].pos = -1;
        m->ckpts[i].data = malloc((size_t)m->rstate_floats * sizeof(float));
        if (!m->ckpts[i].data)
            return err_set(e, ERR_NOMEM, "allocate recurrent state checkpoints");
    }
    return 0;
}

int model_kv_alloc(struct model *m, struct err *e)
{
    const struct model_options *o = &m->opts;
    size_t row_bytes = engine_kv_row_bytes(m->kv_type, kv_dim_of(m));
    if (o->n_ctx < 1 || (int64_t)o->n_ctx * o->n_slots > INT32_MAX / 2)
        return err_set(e, ERR_RANGE, "context %d × %d slots is too large", o->n_ctx, o->n_slots);
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct engine_kv_layer *kv = &m->layers[il].kv;
        if (m->arch->encoder && il > 0) {
            *kv = m->layers[0].kv;  // one layer's keys and values at a time
            continue;
        }
        if (!has_kv(m, il))
            continue;
        size_t layer_bytes;
        if (row_bytes == 0 ||
            !size_mul(&layer_bytes, row_bytes, (size_t)layer_cells(m, &m->layers[il])))
            return err_set(e, ERR_TOO_LARGE, "KV cache too large");
        kv->row_bytes = row_bytes;
        kv->k = engine_buf_alloc(m->be, layer_bytes);
        kv->v = m->hp.kv_v_is_k ? kv->k : engine_buf_alloc(m->be, layer_bytes);
        if (!kv->k || !kv->v)
            return err_set(e, ERR_NOMEM, "allocate KV cache (%zu bytes per layer)",
                           (m->hp.kv_v_is_k ? 1 : 2) * layer_bytes);
    }
    return rstate_alloc(m, e);
}

void model_kv_free(struct model *m)
{
    int n_kv_layers = m->arch->encoder && m->hp.n_layer > 0 ? 1 : m->hp.n_layer;
    for (int il = 0; m->layers && il < n_kv_layers; il++) {
        if (m->layers[il].kv.v != m->layers[il].kv.k)
            engine_buf_free(m->be, m->layers[il].kv.v);
        engine_buf_free(m->be, m->layers[il].kv.k);
        m->layers[il].kv.k = m->layers[il].kv.v = NULL;
    }
    for (int il = 0; m->layers && !m->arch->encoder && il < m->hp.n_layer; il++) {
        struct model_rstate *rs = &m->layers[il].rs;
        engine_buf_free(m->be, rs->conv);
        engine_buf_free(m->be, rs->ssm);
        rs->conv = rs->ssm = NULL;
    }
    if (m->ckpts)
        for (int i = 0; i < m->opts.n_slots * (MODEL_CKPTS + 1); i++)
            free(m->ckpts[i].data);
    free(m->ckpts);
    m->ckpts = NULL;
}

// ---------------------------------------------------------------------------
// Recurrent state: checkpoints and going back.
//
// A recurrent layer's state after position p cannot be turned back into the
// state after an earlier position. So each slot keeps checkpoints: copies
// of every layer's state at a position. Entry 0 is taken automatically by
// model_decode before a slot's run of several tokens (a speculative step,
// a prompt chunk), so rolling back rejected drafts costs the accepted ones'
// evaluation again; entries 1.. are the runner's (model_slot_checkpoint:
// near the end of each prompt, as llama-server does, for the next turn of
// a chat). Going back to p restores the latest copy at or before p (or
// zeros, position 0) and evaluates the slot's tokens from there to p again:
// the state is never wrong, at worst recomputed.

static struct model_ckpt *slot_ckpts(struct model *m, int slot)
{
    return m->ckpts + (size_t)slot * (MODEL_CKPTS + 1);
}

// Copies slot's live state (every layer's conv and ssm parts, in that
// order) to host floats (save), from them, or from zeros (host NULL).
static void rstate_copy(struct model *m, int slot, float *host, bool save)
{
    size_t off = 0;
    float *zero = NULL;
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_rstate *rs = &m->layers[il].rs;
        float *bufs[2] = {rs->conv, rs->ssm};
        int64_t n[2] = {rs->conv_floats, rs->ssm_floats};
        for (int b = 0; b < 2; b++) {
            if (n[b] == 0)
                continue;
            float *dev = bufs[b] + (size_t)slot * (size_t)n[b];
            size_t bytes = (size_t)n[b] * sizeof(float);
            if (!host) {
                zero = xrealloc(zero, bytes);
                memset(zero, 0, bytes);
                engine_buf_write(m->be, dev, zero, bytes);
            } else if (save) {
                engine_buf_read(m->be, host + off, dev, bytes);
            } else {
                engine_buf_write(m->be, dev, host + off, bytes);
            }
            off += (size_t)n[b];
        }
    }
    free(zero);
}

static void rstate_zero(struct model *m, int slot)
{
    rstate_copy(m, slot, NULL, false);
}

void model_rstate_save(struct model *m, int slot, int k)
{
    if (!m->recurrent)
        return;
    struct model_ckpt *c = slot_ckpts(m, slot);
    int pos = m->slots[slot].n_past;
    if (k == 0) {
        rstate_copy(m, slot, c[0].data, true);
        c[0].pos = pos;
        return;
    }
    // An explicit checkpoint: replaces one at the same position, else the
    // empty or the oldest (lowest position) entry.
    int at = 1;
    for (int i = 1; i <= MODEL_CKPTS; i++) {
        if (c[i].pos == pos) {
            at = i;
            break;
        }
        if (c[i].pos < c[at].pos)
            at = i;
    }
    rstate_copy(m, slot, c[at].data, true);
    c[at].pos = pos;
}

// Drops the checkpoints past position p (the slot's sequence changes there).
static void ckpts_drop_after(struct model *m, int slot, int p)
{
    if (!m->recurrent)
        return;
    struct model_ckpt *c = slot_ckpts(m, slot);
    for (int i = 0; i <= MODEL_CKPTS; i++)
        if (c[i].pos > p)
            c[i].pos = -1;
}

// The latest position at or before p that slot's state can be brought to
// without evaluating: p itself when the live state is there, a checkpoint,
// else 0. *ck: the checkpoint's index, -1 for the live state or zeros.
static int best_restore(struct model *m, int slot, int p, int *ck)
{
    const struct model_ckpt *c = slot_ckpts(m, slot);
    *ck = -1;
    if (m->slots[slot].n_past == p)
        return p;
    int best = 0;
    for (int i = 0; i <= MODEL_CKPTS; i++)
        if (c[i].pos >= 0 && c[i].pos <= p && c[i].pos > best &&
            c[i].pos <= m->slots[slot].n_past) {
            best = c[i].pos;
            *ck = i;
        }
    return best;
}

// Brings slot's live state to position c (best_restore's answer) and sets
// its length to c.
static void restore_to(struct model *m, int slot, int c, int ck)
{
    if (c != m->slots[slot].n_past) {
        if (ck >= 0)
            rstate_copy(m, slot, slot_ckpts(m, slot)[ck].data, false);
        else
            rstate_zero(m, slot);
    }
    m->slots[slot].n_past = c;
    ckpts_drop_after(m, slot, c);
}

// Evaluates slot's cached tokens [from, to) again (no outputs).
static int replay(struct model *m, int slot, int from, int to, struct err *e)
{
    const int nb = m->opts.n_batch;
    int32_t *pos = xmalloc((size_t)nb * sizeof(int32_t));
    int32_t *sl = xmalloc((size_t)nb * sizeof(int32_t));
    bool *lg = xcalloc((size_t)nb, sizeof(bool));
    int32_t *tok = xmalloc((size_t)nb * sizeof(int32_t));
    int rc = 0;
    m->replaying = true;
    for (int p0 = from; p0 < to && rc >= 0; p0 += nb) {
        int n = to - p0 < nb ? to - p0 : nb;
        for (int i = 0; i < n; i++) {
            pos[i] = p0 + i;
            sl[i] = slot;
            tok[i] = m->slots[slot].tokens[p0 + i];
        }
        struct model_batch b = {.n_tokens = n, .tokens = tok, .pos = pos, .slot = sl, .logits = lg};
        rc = model_decode(m, &b, e);
    }
    m->replaying = false;
    m->n_batch_entries = 0;  // no outputs from the replay
    free(pos);
    free(sl);
    free(lg);
    free(tok);
    return rc;
}

int model_rstate_rewind(struct model *m, int slot, int p, struct err *e)
{
    if (!m->recurrent || m->slots[slot].n_past == p)
        return 0;
    int ck, c = best_restore(m, slot, p, &ck);
    log_debug("recurrent state: slot %d back from %d to %d: %s at %d, %d tokens evaluated again",
              slot, m->slots[slot].n_past, p, ck >= 0 ? "checkpoint" : "start", c, p - c);
    restore_to(m, slot, c, ck);
    if (c == p)
        return 0;
    int rc = replay(m, slot, c, p, e);
    if (rc < 0) {
        restore_to(m, slot, 0, -1);
        return rc;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Slots.

static bool slot_ok(const struct model *m, int slot)
{
    return slot >= 0 && slot < m->opts.n_slots;
}

int model_slot_n_past(const struct model *m, int slot)
{
    return slot_ok(m, slot) ? m->slots[slot].n_past : 0;
}

const int32_t *model_slot_tokens(const struct model *m, int slot)
{
    return slot_ok(m, slot) ? m->slots[slot].tokens : NULL;
}

void model_slot_clear(struct model *m, int slot)
{
    if (!slot_ok(m, slot))
        return;
    m->slots[slot].n_past = 0;
    if (m->recurrent) {
        rstate_zero(m, slot);
        ckpts_drop_after(m, slot, -1);
    }
}

void model_slot_checkpoint(struct model *m, int slot)
{
    if (slot_ok(m, slot) && m->recurrent && m->slots[slot].n_past > 0)
        model_rstate_save(m, slot, 1);
}

bool model_is_recurrent(const struct model *m)
{
    return m->recurrent;
}

int model_slot_common_prefix(const struct model *m, int slot, const int32_t *tokens, int n)
{
    if (!slot_ok(m, slot))
        return 0;
    const struct model_slot *sl = &m->slots[slot];
    int k = 0;
    while (k < sl->n_past && k < n && sl->tokens[k] == tokens[k])
        k++;
    return k;
}

int model_slot_reuse_prefix(struct model *m, int slot, const int32_t *tokens, int n)
{
    if (!slot_ok(m, slot))
        return 0;
    struct model_slot *sl = &m->slots[slot];
    int k = model_slot_common_prefix(m, slot, tokens, n);
    if (k >= n)
        k = n - 1;  // the last prompt token is evaluated again for its logits
    if (k < 0)
        k = 0;
    // Ring layers: the window before position k must still be in the ring
    // (nothing at or past k + kv_ring - window was written over it).
    if (m->kv_ring > 0 && k > 0 && (int64_t)k - m->hp.n_swa + 1 < (int64_t)sl->n_past - m->kv_ring)
        k = 0;
    if (m->recurrent) {
        // The prompt evaluates from the latest state at or before k.
        int ck, want = k;
        k = best_restore(m, slot, k, &ck);
        log_debug("recurrent state: slot %d reuses %d of %d matching tokens (%s)", slot, k, want,
                  ck >= 0           ? "checkpoint"
                  : k == sl->n_past ? "live state"
                                    : "start");
        restore_to(m, slot, k, ck);
        return k;
    }
    sl->n_past = k;
    return k;
}

int model_slot_copy_prefix(struct model *m, int dst, int src, int n)
{
    if (!slot_ok(m, dst) || !slot_ok(m, src) || dst == src || m->arch->encoder)
        return 0;
    const struct model_slot *from = &m->slots[src];
    struct model_slot *to = &m->slots[dst];
    if (n > from->n_past)
        n = from->n_past;
    if (n <= 0)
        return 0;
    // Ring layers: the window of position n starts at n - n_swa + 1; src's
    // ring holds its positions from n_past - kv_ring on.
    if (m->kv_ring > 0 && (int64_t)n - m->hp.n_swa + 1 < (int64_t)from->n_past - m->kv_ring)
        return 0;
    if (m->recurrent) {
        // src's state at n: live (n = its length) or a checkpoint at or before n.
        int ck;
        n = best_restore(m, src, n, &ck);
        if (n <= 0)
            return 0;
        float *st = xmalloc((size_t)m->rstate_floats * sizeof(float));
        if (ck >= 0)
            memcpy(st, slot_ckpts(m, src)[ck].data, (size_t)m->rstate_floats * sizeof(float));
        else
            rstate_copy(m, src, st, true);
        rstate_copy(m, dst, st, false);
        free(st);
        ckpts_drop_after(m, dst, -1);
    }
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct model_layer *L = &m->layers[il];
        if (!has_kv(m, il))
            continue;
        if (L->kv_ring == 0) {
            engine_kv_move(m->be, &L->kv, (int64_t)dst * m->opts.n_ctx,
                           (int64_t)src * m->opts.n_ctx, n);
            continue;
        }
        // Every position src's ring still holds (n <= n_past: that covers
        // the window).
        const int64_t ring = L->kv_ring;
        int64_t lo = (int64_t)from->n_past - ring > 0 ? (int64_t)from->n_past - ring : 0;
        for (int64_t q = lo; q < n; q++)
            engine_kv_move(m->be, &L->kv, dst * ring + q % ring, src * ring + q % ring, 1);
    }
    memcpy(to->tokens, from->tokens, (size_t)n * sizeof(int32_t));
    if (to->rope3)
        memcpy(to->rope3, from->rope3, (size_t)n * 3 * sizeof(int32_t));
    to->n_past = n;
    return n;
}

int model_slot_share_prefix(struct model *m, int dst, const int32_t *tokens, int n, int *from)
{
    int own = model_slot_common_prefix(m, dst, tokens, n), best = own, ck;
    *from = -1;
    for (int o = 0; o < m->opts.n_slots; o++) {
        int k = o == dst ? 0 : model_slot_common_prefix(m, o, tokens, n);
        if (m->recurrent && k > best)
            k = best_restore(m, o, k, &ck);  // what o's state can give
        if (k > best) {
            best = k;
            *from = o;
        }
    }
    if (*from >= 0 && model_slot_copy_prefix(m, dst, *from, best) == best)
        return best;
    return own;
}

// Ring layer: the positions q of the new sequence that the ring can hold
// and that moved (q >= p0) take the rows of q + n_del, re-rotated.
static void ring_remove(struct model *m, const struct model_layer *L, int slot, int p0, int n_del,
                        int n_past)
{
    const int64_t ring = L->kv_ring, base = (int64_t)slot * ring, n_new = n_past - n_del;
    const struct engine_kv_layer *kv = &L->kv;
    int64_t lo = n_new - ring > p0 ? n_new - ring : p0;
    if (lo >= n_new)
        return;
    size_t rb = kv->row_bytes, n_rows = (size_t)(n_new - lo);
    uint8_t *kt = xmalloc(n_rows * rb), *vt = xmalloc(n_rows * rb);
    for (int64_t q = lo; q < n_new; q++) {
        int64_t src = base + (q + n_del) % ring;
        engine_buf_read(m->be, kt + (size_t)(q - lo) * rb, (uint8_t *)kv->k + src * rb, rb);
        engine_buf_read(m->be, vt + (size_t)(q - lo) * rb, (uint8_t *)kv->v + src * rb, rb);
    }
    for (int64_t q = lo; q < n_new; q++) {
        int64_t dst = base + q % ring;
        engine_buf_write(m->be, (uint8_t *)kv->k + dst * rb, kt + (size_t)(q - lo) * rb, rb);
        engine_buf_write(m->be, (uint8_t *)kv->v + dst * rb, vt + (size_t)(q - lo) * rb, rb);
        if (L->rope)  // a layer without RoPE keeps its keys as they are
            engine_kv_shift(m->be, kv, m->kv_type, dst, 1, -n_del, m->hp.n_head_kv,
                            layer_head_dim(m, L), L->rope);
    }
    free(kt);
    free(vt);
}

int model_slot_remove(struct model *m, int slot, int p0, int p1, struct err *e)
{
    if (!slot_ok(m, slot))
        return err_set(e, ERR_INVALID, "slot %d out of range", slot);
    struct model_slot *sl = &m->slots[slot];
    if (p0 < 0 || p1 < p0 || p1 > sl->n_past)
        return err_set(e, ERR_RANGE, "remove [%d, %d) from a slot of %d tokens", p0, p1,
                       sl->n_past);
    int n_del = p1 - p0, n_move = sl->n_past - p1;
    if (n_del == 0)
        return 0;
    if (m->recurrent) {
        // A recurrent state cannot forget positions in the middle; the end
        // it can, by going back to p0.
        if (n_move > 0)
            return err_set(e, ERR_UNSUPPORTED,
                           "this model's recurrent layers cannot remove positions from the middle "
                           "of a sequence (no context shift)");
        return model_rstate_rewind(m, slot, p0, e);
    }
    int64_t base = (int64_t)slot * m->opts.n_ctx;
    for (int il = 0; il < m->hp.n_layer && n_move > 0; il++) {
        const struct model_layer *L = &m->layers[il];
        if (!has_kv(m, il))
            continue;
        if (L->kv_ring > 0) {
            ring_remove(m, L, slot, p0, n_del, sl->n_past);
            continue;
        }
        engine_kv_move(m->be, &L->kv, base + p0, base + p1, n_move);
        if (L->rope)
            engine_kv_shift(m->be, &L->kv, m->kv_type, base + p0, n_move, -n_del, m->hp.n_head_kv,
                            layer_head_dim(m, L), L->rope);
    }
    memmove(sl->tokens + p0, sl->tokens + p1, (size_t)n_move * sizeof(int32_t));
    if (sl->rope3) {  // the moved keys turned back by n_del on every stream
        memmove(sl->rope3 + 3 * p0, sl->rope3 + 3 * p1, (size_t)n_move * 3 * sizeof(int32_t));
        for (int i = 3 * p0; i < 3 * (p0 + n_move); i++)
            sl->rope3[i] -= n_del;
    }
    sl->n_past -= n_del;
    return 0;
}

int model_slot_truncate(struct model *m, int slot, int n, struct err *e)
{
    return model_slot_remove(m, slot, n, model_slot_n_past(m, slot), e);
}

// Where a cut at position p may fall without splitting a picture: p itself
// when it starts an entry run or is text, else the end of the image run
// (consecutive entries with the same negative id, model_batch) it is in.
static int past_image(const struct model_slot *sl, int p)
{
    if (p <= 0 || p >= sl->n_past || sl->tokens[p] >= 0 || sl->tokens[p - 1] != sl->tokens[p])
        return p;
    const int32_t id = sl->tokens[p];
    while (p < sl->n_past && sl->tokens[p] == id)
        p++;
    return p;
}

int model_context_shift(struct model *m, int slot, int n_keep, struct err *e)
{
    if (!slot_ok(m, slot))
        return err_set(e, ERR_INVALID, "slot %d out of range", slot);
    if (n_keep < 0)
        n_keep = 0;
    if (n_keep >= m->opts.n_ctx)
        return err_set(e, ERR_RANGE,
                       "unable to shift context - keep exceeds context (keep: %d context: %d)",
                       n_keep, m->opts.n_ctx);
    struct model_slot *sl = &m->slots[slot];
    if (n_keep > sl->n_past)
        n_keep = sl->n_past;
    // Pictures stay whole: one the kept prefix ends in is kept, one the
    // discarded half ends in goes with it.
    n_keep = past_image(sl, n_keep);
    int discard = (sl->n_past - n_keep) / 2;
    if (discard <= 0)
        return 0;
    discard = past_image(sl, n_keep + discard) - n_keep;
    int rc = model_slot_remove(m, slot, n_keep, n_keep + discard, e);
    return rc < 0 ? rc : discard;
}

void model_debug_kv_row(struct model *m, int il, int cell, float *k, float *v)
{
    const struct engine_kv_layer *kv = &m->layers[il].kv;
    int64_t kv_dim = kv_dim_of(m);
    const uint8_t *kr = (const uint8_t *)kv->k + (size_t)cell * kv->row_bytes;
    const uint8_t *vr = (const uint8_t *)kv->v + (size_t)cell * kv->row_bytes;
    if (m->kv_type == GGUF_TYPE_F32) {
        memcpy(k, kr, (size_t)kv_dim * sizeof(float));
        memcpy(v, vr, (size_t)kv_dim * sizeof(float));
    } else if (m->kv_type == GGUF_TYPE_F16) {
        for (int64_t i = 0; i < kv_dim; i++) {
            k[i] = quant_f16_to_f32(((const uint16_t *)kr)[i]);
            v[i] = quant_f16_to_f32(((const uint16_t *)vr)[i]);
        }
    } else {
        const struct quant_traits *qt = quant_traits_get(m->kv_type);
        qt->to_float(kr, k, kv_dim);
        qt->to_float(vr, v, kv_dim);
    }
}

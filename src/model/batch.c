// model_decode: validates a batch of tokens from several slots, numbers the
// rows that want outputs, and runs it in ubatches of at most n_batch rows,
// giving each row the KV cells of its position (linear layers: slot·n_ctx +
// pos; ring layers: slot·kv_ring + pos % kv_ring, see kvcache.c).
#include "model/internal.h"

#include <stdlib.h>
#include <string.h>

static int grow_outputs(struct model *m, int n_out, struct err *e)
{
    if (n_out <= m->out_cap)
        return 0;
    if (!m->arch->encoder) {  // encoders have no logits
        float *l = realloc(m->logits, (size_t)n_out * m->hp.n_vocab * sizeof(float));
        if (!l)
            return err_set(e, ERR_NOMEM, "allocate logits for %d outputs", n_out);
        m->logits = l;
    }
    if (m->opts.embeddings) {
        float *em = realloc(m->embd, (size_t)n_out * m->hp.n_embd * sizeof(float));
        if (!em)
            return err_set(e, ERR_NOMEM, "allocate embeddings for %d outputs", n_out);
        m->embd = em;
    }
    m->out_cap = n_out;
    return 0;
}

// Entry i against the slot bookkeeping so far (next: expected position + 1,
// 0 = slot not seen yet in this batch).
static int check_entry(struct model *m, const struct model_batch *b, int i, const int *next,
                       struct err *e)
{
    int s = b->slot[i], p = b->pos[i], t = b->tokens[i];
    if (s < 0 || s >= m->opts.n_slots)
        return err_set(e, ERR_INVALID, "batch entry %d: slot %d out of range [0, %d)", i, s,
                       m->opts.n_slots);
    if (t < 0 && !b->embd)
        return err_set(e, ERR_INVALID, "batch entry %d: token id %d without an embedding row", i,
                       t);
    if (t >= m->hp.n_vocab)
        return err_set(e, ERR_INVALID, "batch entry %d: token id %d out of range [0, %d)", i, t,
                       m->hp.n_vocab);
    if (p < 0 || p >= m->opts.n_ctx)
        return err_set(e, ERR_RANGE, "batch entry %d: position %d outside the context of %d", i, p,
                       m->opts.n_ctx);
    if (m->arch->encoder && next[s] == 0 && p != 0)
        return err_set(e, ERR_INVALID,
                       "batch entry %d: an encoder takes slot %d's whole sequence from "
                       "position 0",
                       i, s);
    if (next[s] == 0 && p > m->slots[s].n_past)
        return err_set(e, ERR_INVALID,
                       "batch entry %d: position %d leaves a gap after slot %d's %d tokens", i, p,
                       s, m->slots[s].n_past);
    if (next[s] != 0 && p != next[s] - 1)
        return err_set(e, ERR_INVALID, "batch entry %d: slot %d positions not consecutive", i, s);
    if ((m->arch->encoder || m->recurrent) && next[s] != 0 && b->slot[i - 1] != s)
        return err_set(e, ERR_INVALID, "batch entry %d: slot %d's entries are not contiguous", i,
                       s);
    return 0;
}

// Known tokens and slots; per slot, consecutive positions that start at or
// below the slot's length and stay inside the context. Leaves each slot's
// last entry in m->slot_last.
static int validate_batch(struct model *m, const struct model_batch *b, struct err *e)
{
    int *next = m->slot_next, *last = m->slot_last;
    memset(next, 0, (size_t)m->opts.n_slots * sizeof(int));
    memset(last, 0, (size_t)m->opts.n_slots * sizeof(int));
    for (int i = 0; i < b->n_tokens; i++) {
        int rc = check_entry(m, b, i, next, e);
        if (rc < 0)
            return rc;
        next[b->slot[i]] = b->pos[i] + 2;
        last[b->slot[i]] = i;
    }
    return 0;
}

// Output rows, numbered in entry order (the rows asked for, else each slot's
// last), with room for their logits / embeddings.
static int number_outputs(struct model *m, const struct model_batch *b, struct err *e)
{
    int n = b->n_tokens;
    if (n > m->out_index_cap) {
        free(m->out_index);
        m->out_index = xmalloc((size_t)n * sizeof(int32_t));
        m->out_index_cap = n;
    }
    int n_out = 0;
    for (int i = 0; i < n; i++) {
        bool want = b->logits ? b->logits[i] : m->slot_last[b->slot[i]] == i;
        m->out_index[i] = want ? n_out++ : -1;
    }
    return grow_outputs(m, n_out, e);
}

// Cached tokens from each slot's first position in the batch on are replaced.
static void truncate_slots(struct model *m, const struct model_batch *b)
{
    int *seen = m->slot_next;
    memset(seen, 0, (size_t)m->opts.n_slots * sizeof(int));
    for (int i = 0; i < b->n_tokens; i++) {
        if (!seen[b->slot[i]]) {
            m->slots[b->slot[i]].n_past = b->pos[i];
            seen[b->slot[i]] = 1;
        }
    }
}

// Recurrent models: each slot's state is brought to the batch's first
// position of that slot (a slot written from below its length goes back,
// kvcache.c), and a slot given several tokens keeps a checkpoint of the
// state before them (a speculative step rolls back to it). Runs before the
// batch is numbered: going back may evaluate tokens again.
static int prepare_recurrent(struct model *m, const struct model_batch *b, struct err *e)
{
    for (int i = 0; i < b->n_tokens; i++) {
        int s = b->slot[i];
        if (i > 0 && b->slot[i - 1] == s)
            continue;  // a slot's entries are contiguous
        int rc = model_rstate_rewind(m, s, b->pos[i], e);
        if (rc < 0)
            return rc;
        if (!m->replaying && i + 1 < b->n_tokens && b->slot[i + 1] == s && b->pos[i] > 0)
            model_rstate_save(m, s, 0);
    }
    return 0;
}

// The per-row arrays of one ubatch, carved from m->ub_buf.
struct ub_rows {
    int32_t *tokens, *pos, *cells, *cell0, *n_vis, *out_rows, *rcells, *rcell0, *slot, *from_embd;
    int32_t *rope_pos;  // 4 streams of n_batch (M-RoPE)
};

static int32_t max3(int32_t a, int32_t b, int32_t c)
{
    int32_t m = a > b ? a : b;
    return m > c ? m : c;
}

// M-RoPE positions (model_batch.rope_rc), recorded in the slot as they
// are laid out: a text entry or an image's first row one past the largest
// of the previous entry's (0 at position 0), the image's other rows from
// their run's t.
static void fill_rope_pos(struct model *m, const struct model_batch *b, int i0, int un, int32_t *rp)
{
    for (int r = 0; r < un; r++) {
        int i = i0 + r, p = b->pos[i], t = b->tokens[i];
        int32_t *rec = m->slots[b->slot[i]].rope3, *prev = p > 0 ? rec + 3 * (p - 1) : NULL;
        int prev_tok = i > 0 && b->slot[i - 1] == b->slot[i] ? b->tokens[i - 1]
                       : p > 0                               ? m->slots[b->slot[i]].tokens[p - 1]
                                                             : 0;
        int32_t base = 0;
        if (t < 0 && prev && prev_tok == t)
            base = prev[0];  // inside a picture: its t
        else if (prev)
            base = max3(prev[0], prev[1], prev[2]) + 1;
        bool img = t < 0 && b->rope_rc;
        rec[3 * p] = base;
        rec[3 * p + 1] = base + (img ? b->rope_rc[2 * i] : 0);
        rec[3 * p + 2] = base + (img ? b->rope_rc[2 * i + 1] : 0);
        for (int k = 0; k < 3; k++)
            rp[r + k * un] = rec[3 * p + k];
        rp[r + 3 * un] = 0;
    }
}

// An image run: entries from i of one slot with the same negative token.
static int embd_run_end(const struct model_batch *b, int i)
{
    int j = i + 1;
    while (j < b->n_tokens && b->tokens[j] == b->tokens[i] && b->slot[j] == b->slot[i])
        j++;
    return j;
}

// Non-causal image runs: each row sees up to the run's last position.
static void open_embd_runs(const struct model_batch *b, int i0, int un, const struct ub_rows *u)
{
    for (int r = 0; r < un;) {
        int i = i0 + r;
        if (b->tokens[i] >= 0) {
            r++;
            continue;
        }
        int end = embd_run_end(b, i) - i0;
        end = end > un ? un : end;
        for (int k = r; k < end; k++)
            u->n_vis[k] = u->pos[end - 1] + 1;
        r = end;
    }
}

// Fills rows for entries i0 .. i0+un of b; returns the ubatch descriptor.
static struct model_ubatch fill_ubatch(struct model *m, const struct model_batch *b, int i0, int un,
                                       const struct ub_rows *u)
{
    const int n_ctx = m->opts.n_ctx, ring = m->kv_ring;
    int u_out = 0, first_out = -1;
    for (int r = 0; r < un; r++) {
        int i = i0 + r, s = b->slot[i];
        u->tokens[r] = b->tokens[i] < 0 ? 0 : b->tokens[i];
        u->from_embd[r] = b->tokens[i] < 0;
        u->pos[r] = b->pos[i];
        u->slot[r] = s;
        u->cell0[r] = s * n_ctx;
        u->cells[r] = s * n_ctx + b->pos[i];
        u->n_vis[r] = b->pos[i] + 1;
        if (ring) {
            u->rcell0[r] = s * ring;
            u->rcells[r] = s * ring + b->pos[i] % ring;
        }
        if (m->out_index[i] >= 0) {
            if (first_out < 0)
                first_out = m->out_index[i];
            u->out_rows[u_out++] = r;
        }
    }
    if (m->arch->encoder) {
        // Non-causal: every row sees its whole sequence (a run of rows).
        for (int r0 = 0, r1; r0 < un; r0 = r1) {
            for (r1 = r0 + 1; r1 < un && u->cell0[r1] == u->cell0[r0];)
                r1++;
            for (int r = r0; r < r1; r++)
                u->n_vis[r] = r1 - r0;
        }
    }
    if (b->embd && b->embd_non_causal)
        open_embd_runs(b, i0, un, u);
    bool multi = engine_rope_is_multi(&m->hp.rope);
    if (multi)
        fill_rope_pos(m, b, i0, un, u->rope_pos);
    size_t out0 = (size_t)(first_out < 0 ? 0 : first_out);
    return (struct model_ubatch){
        .n = un,
        .tokens = u->tokens,
        .pos = u->pos,
        .rope_pos = multi ? u->rope_pos : NULL,
        .slot = u->slot,
        .cells = u->cells,
        .cell0 = u->cell0,
        .ring_cells = ring ? u->rcells : NULL,
        .ring_cell0 = ring ? u->rcell0 : NULL,
        .n_visible = u->n_vis,
        .n_out = u_out,
        .out_rows = u->out_rows,
        .out_logits = m->arch->encoder ? NULL : m->logits + out0 * m->hp.n_vocab,
        .out_embd = m->embd ? m->embd + out0 * m->hp.n_embd : NULL,
        .embd = b->embd ? b->embd + (size_t)i0 * model_n_embd_inp(m) : NULL,
        .from_embd = u->from_embd,
        .open_runs = b->embd && b->embd_non_causal,
    };
}

// An image run is not split between forward passes (its rows attend to
// each other): the pass ends before a run that crosses its end.
static int keep_embd_run(const struct model_batch *b, int i0, int *un, int nb, struct err *e)
{
    int last = i0 + *un - 1;
    if (last + 1 >= b->n_tokens || b->tokens[last] >= 0 || !b->embd_non_causal ||
        b->tokens[last + 1] != b->tokens[last] || b->slot[last + 1] != b->slot[last])
        return 0;
    int start = last;
    while (start > i0 && b->tokens[start - 1] == b->tokens[last] &&
           b->slot[start - 1] == b->slot[last])
        start--;
    if (start == i0)
        return err_set(e, ERR_INVALID, "an image of %d tokens does not fit in a batch of %d",
                       embd_run_end(b, start) - start, nb);
    *un = start - i0;
    return 0;
}

int model_decode(struct model *m, const struct model_batch *b, struct err *e)
{
    const int n = b->n_tokens;
    m->n_batch_entries = 0;
    if (n < 1)
        return err_set(e, ERR_INVALID, "empty batch");
    if (!b->tokens || !b->pos || !b->slot)
        return err_set(e, ERR_INVALID, "batch without tokens, positions or slots");
    int rc = validate_batch(m, b, e);
    if (rc < 0)
        return rc;
    if (m->recurrent) {
        if ((rc = prepare_recurrent(m, b, e)) < 0)
            return rc;
        validate_batch(m, b, e);  // again: going back reused the bookkeeping
    }
    if ((rc = number_outputs(m, b, e)) < 0)
        return rc;
    truncate_slots(m, b);

    // Forward passes of up to n_batch rows.
    const int nb = m->opts.n_batch;
    int32_t *p = m->ub_buf;
    struct ub_rows u = {p,          p + nb,     p + 2 * nb, p + 3 * nb, p + 4 * nb, p + 5 * nb,
                        p + 6 * nb, p + 7 * nb, p + 8 * nb, p + 9 * nb, p + 10 * nb};
    for (int i0 = 0; i0 < n;) {
        int un = n - i0 < nb ? n - i0 : nb;
        // An encoder's sequence is never split: end the ubatch before the
        // sequence that crosses it (each fits, as n_batch >= n_ctx).
        while (m->arch->encoder && i0 + un < n && un > 1 &&
               b->slot[i0 + un] == b->slot[i0 + un - 1])
            un--;
        if ((rc = keep_embd_run(b, i0, &un, nb, e)) < 0)
            return rc;
        struct model_ubatch ub = fill_ubatch(m, b, i0, un, &u);
        if (m->arch->forward)
            m->arch->forward(m, &ub);
        else
            model_forward_decoder(m, &ub);
        for (int i = i0; i < i0 + un; i++) {
            struct model_slot *sl = &m->slots[b->slot[i]];
            sl->tokens[b->pos[i]] = b->tokens[i];
            sl->n_past = b->pos[i] + 1;
        }
        i0 += un;
    }
    m->n_batch_entries = n;
    return 0;
}

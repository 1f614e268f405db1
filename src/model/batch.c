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

int model_decode(struct model *m, const struct model_batch *b, struct err *e)
{
    const int n = b->n_tokens, n_ctx = m->opts.n_ctx, n_slots = m->opts.n_slots;
    m->n_batch_entries = 0;
    if (n < 1)
        return err_set(e, ERR_INVALID, "empty batch");
    if (!b->tokens || !b->pos || !b->slot)
        return err_set(e, ERR_INVALID, "batch without tokens, positions or slots");

    // Validate: known tokens and slots; per slot, consecutive positions that
    // start at or below the slot's length and stay inside the context.
    // Per-slot bookkeeping, allocated at load: expected next position + 1
    // (0 = slot not in the batch) and the slot's last entry.
    int *next = m->slot_next, *last = m->slot_last;
    memset(next, 0, (size_t)n_slots * sizeof(int));
    memset(last, 0, (size_t)n_slots * sizeof(int));
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int s = b->slot[i], p = b->pos[i], t = b->tokens[i];
        if (s < 0 || s >= n_slots)
            rc = err_set(e, ERR_INVALID, "batch entry %d: slot %d out of range [0, %d)", i, s,
                         n_slots);
        else if (t < 0 || t >= m->hp.n_vocab)
            rc = err_set(e, ERR_INVALID, "batch entry %d: token id %d out of range [0, %d)", i, t,
                         m->hp.n_vocab);
        else if (p < 0 || p >= n_ctx)
            rc = err_set(e, ERR_RANGE, "batch entry %d: position %d outside the context of %d", i,
                         p, n_ctx);
        else if (m->arch->encoder && next[s] == 0 && p != 0)
            rc = err_set(e, ERR_INVALID,
                         "batch entry %d: an encoder takes slot %d's whole sequence from "
                         "position 0",
                         i, s);
        else if (next[s] == 0 && p > m->slots[s].n_past)
            rc = err_set(e, ERR_INVALID,
                         "batch entry %d: position %d leaves a gap after slot %d's %d tokens", i, p,
                         s, m->slots[s].n_past);
        else if (next[s] != 0 && p != next[s] - 1)
            rc = err_set(e, ERR_INVALID, "batch entry %d: slot %d positions not consecutive", i, s);
        else if (m->arch->encoder && next[s] != 0 && b->slot[i - 1] != s)
            rc = err_set(e, ERR_INVALID, "batch entry %d: slot %d's entries are not contiguous", i,
                         s);
        if (rc == 0) {
            next[s] = p + 2;
            last[s] = i;
        }
    }
    if (rc < 0)
        goto out;

    // Output rows, numbered in entry order.
    if (n > m->out_index_cap) {
        free(m->out_index);
        m->out_index = xmalloc((size_t)n * sizeof(int32_t));
        m->out_index_cap = n;
    }
    int n_out = 0;
    for (int i = 0; i < n; i++) {
        bool want = b->logits ? b->logits[i] : last[b->slot[i]] == i;
        m->out_index[i] = want ? n_out++ : -1;
    }
    rc = grow_outputs(m, n_out, e);
    if (rc < 0)
        goto out;
    // Cached tokens from each slot's first position on are replaced.
    for (int s = 0; s < n_slots; s++)
        next[s] = 0;
    for (int i = 0; i < n; i++) {
        struct model_slot *sl = &m->slots[b->slot[i]];
        if (next[b->slot[i]] == 0) {
            sl->n_past = b->pos[i];
            next[b->slot[i]] = 1;
        }
    }

    // Forward passes of up to n_batch rows.
    int nb = m->opts.n_batch;
    int32_t *tokens = m->ub_buf, *pos = tokens + nb, *cells = pos + nb, *cell0 = cells + nb,
            *n_vis = cell0 + nb, *out_rows = n_vis + nb, *rcells = out_rows + nb,
            *rcell0 = rcells + nb;
    const int ring = m->kv_ring;
    for (int i0 = 0; i0 < n;) {
        int un = n - i0 < nb ? n - i0 : nb;
        // An encoder's sequence is never split: end the ubatch before the
        // sequence that crosses it (each fits, as n_batch >= n_ctx).
        while (m->arch->encoder && i0 + un < n && un > 1 &&
               b->slot[i0 + un] == b->slot[i0 + un - 1])
            un--;
        int u_out = 0, first_out = -1;
        for (int r = 0; r < un; r++) {
            int i = i0 + r, s = b->slot[i];
            tokens[r] = b->tokens[i];
            pos[r] = b->pos[i];
            cell0[r] = s * n_ctx;
            cells[r] = s * n_ctx + b->pos[i];
            n_vis[r] = b->pos[i] + 1;
            if (ring) {
                rcell0[r] = s * ring;
                rcells[r] = s * ring + b->pos[i] % ring;
            }
            if (m->out_index[i] >= 0) {
                if (first_out < 0)
                    first_out = m->out_index[i];
                out_rows[u_out++] = r;
            }
        }
        if (m->arch->encoder) {
            // Non-causal: every row sees its whole sequence (a run of rows).
            for (int r0 = 0, r1; r0 < un; r0 = r1) {
                for (r1 = r0 + 1; r1 < un && cell0[r1] == cell0[r0];)
                    r1++;
                for (int r = r0; r < r1; r++)
                    n_vis[r] = r1 - r0;
            }
        }
        struct model_ubatch ub = {
            .n = un,
            .tokens = tokens,
            .pos = pos,
            .cells = cells,
            .cell0 = cell0,
            .ring_cells = ring ? rcells : NULL,
            .ring_cell0 = ring ? rcell0 : NULL,
            .n_visible = n_vis,
            .n_out = u_out,
            .out_rows = out_rows,
            .out_logits = m->arch->encoder
                              ? NULL
                              : m->logits + (size_t)(first_out < 0 ? 0 : first_out) * m->hp.n_vocab,
            .out_embd =
                m->embd ? m->embd + (size_t)(first_out < 0 ? 0 : first_out) * m->hp.n_embd : NULL,
        };
        if (m->arch->forward)
            m->arch->forward(m, &ub);
        else
            model_forward_decoder(m, &ub);
        for (int r = 0; r < un; r++) {
            int i = i0 + r;
            struct model_slot *sl = &m->slots[b->slot[i]];
            sl->tokens[b->pos[i]] = b->tokens[i];
            sl->n_past = b->pos[i] + 1;
        }
        i0 += un;
    }
    m->n_batch_entries = n;
out:
    return rc;
}

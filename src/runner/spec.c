// Speculative decoding: the drafters. A drafter proposes the tokens that
// probably follow a slot's history; the loop (loop.c) then verifies them in
// one batched forward pass of the target and keeps the longest prefix the
// target's own sampler agrees with. Two drafters:
//
//  * prompt lookup: the most recent earlier occurrence of the history's last
//    n tokens (n = draft_ngram down to 1) in the prompt and the text so far;
//    what followed it is the draft. Free, and strong on repetitive text
//    (code edits, quoting, extraction).
//  * a draft model: a smaller model with the same vocabulary, loaded beside
//    the target with the same context and slots; it drafts greedily (argmax),
//    one token per forward pass for all drafting slots together. Its cache follows the target's
//    history lazily: each drafting step keeps the common prefix and evaluates the rest, so rejected
//    drafts and context shifts need no bookkeeping here.
#include "runner/internal.h"

#include <stdlib.h>
#include <string.h>

int runner_spec_lookup(const int32_t *hist, int n, int ngram, int32_t *out, int max)
{
    if (max <= 0)
        return 0;
    for (int g = ngram < n - 1 ? ngram : n - 1; g >= 1; g--) {
        const int32_t *tail = hist + n - g;
        // Most recent match first; a match must leave something after it.
        for (int i = n - g - 1; i >= 0; i--) {
            if (memcmp(hist + i, tail, (size_t)g * sizeof(int32_t)) != 0)
                continue;
            int k = 0;
            for (int j = i + g; j < n && k < max && hist[j] >= 0; j++)  // not image rows
                out[k++] = hist[j];
            return k;
        }
    }
    return 0;
}

int runner_spec_check_vocab(const struct tokenizer *target, const struct tokenizer *draft,
                            struct err *e)
{
    int n = tokenizer_n_vocab(target), nd = tokenizer_n_vocab(draft);
    if (n != nd)
        return err_set(e, ERR_INVALID,
                       "draft model vocabulary does not match the target model's (%d tokens vs "
                       "%d): a draft model must use the same tokenizer",
                       nd, n);
    for (int i = 0; i < n; i++) {
        struct str a = tokenizer_token_text(target, i), b = tokenizer_token_text(draft, i);
        if (a.len != b.len || memcmp(a.ptr, b.ptr, a.len) != 0)
            return err_set(e, ERR_INVALID,
                           "draft model vocabulary does not match the target model's (token %d "
                           "differs): a draft model must use the same tokenizer",
                           i);
    }
    return 0;
}

static int32_t argmax(const float *logits, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

// Evaluates the batch in d's scratch (n entries) and takes the argmax of
// every job whose row `row` is in it as that job's next draft.
static int decode_step(struct runner_draft *d, int n, struct runner_draft_job *jobs, int n_jobs,
                       const int *row, struct err *e)
{
    struct model_batch b = {.n_tokens = n,
                            .tokens = d->b_tokens,
                            .pos = d->b_pos,
                            .slot = d->b_slot,
                            .logits = d->b_logits};
    int rc = model_decode(d->m, &b, e);
    if (rc < 0)
        return rc;
    for (int i = 0; i < n_jobs; i++) {
        if (row[i] < 0)
            continue;
        const float *logits = model_logits(d->m, row[i]);
        if (!logits)
            return err_set(e, ERR_INTERNAL, "draft model gave no logits");
        jobs[i].out[jobs[i].k++] = argmax(logits, model_n_vocab(d->m));
    }
    return 0;
}

// Brings every job's slot in step with its history (the common prefix is
// kept, at most n - 1 tokens so the last one is evaluated again) and takes
// each job's first draft from the logits of its last history token. When
// another slot of the draft model holds a longer prefix of the history (a
// prompt the target's slots shared, loop.c), the job's slot takes those
// rows from it first. The missing tokens of all jobs share batches of
// n_batch entries.
static int catch_up(struct runner_draft *d, struct runner_draft_job *jobs, int n_jobs, int *row,
                    struct err *e)
{
    int *next = d->job_next;  // next history position to evaluate, per job
    for (int i = 0; i < n_jobs; i++) {
        struct runner_draft_job *j = &jobs[i];
        int own = model_slot_common_prefix(d->m, j->slot, j->hist, j->n - 1), from;
        int c = model_slot_share_prefix(d->m, j->slot, j->hist, j->n - 1, &from);
        if (c > own)
            log_debug("draft: slot %d takes %d tokens from slot %d", j->slot, c - own, from);
        int rc = model_slot_truncate(d->m, j->slot, c, e);
        if (rc < 0)
            return rc;
        next[i] = c;
        j->k = 0;
        log_debug("draft: slot %d keeps %d cached tokens, evaluates %d", j->slot, c, j->n - c);
    }
    for (int i0 = 0; i0 < n_jobs;) {  // jobs before i0 are fed
        int n = 0;
        for (int i = 0; i < n_jobs; i++)
            row[i] = -1;
        for (int i = i0; i < n_jobs && n < d->n_batch; i++) {
            struct runner_draft_job *j = &jobs[i];
            while (next[i] < j->n && n < d->n_batch) {
                d->b_tokens[n] = j->hist[next[i]];
                d->b_pos[n] = next[i];
                d->b_slot[n] = j->slot;
                d->b_logits[n] = next[i] == j->n - 1;
                if (d->b_logits[n])
                    row[i] = n;
                n++;
                next[i]++;
            }
        }
        int rc = decode_step(d, n, jobs, n_jobs, row, e);
        if (rc < 0)
            return rc;
        while (i0 < n_jobs && next[i0] == jobs[i0].n)
            i0++;
    }
    return 0;
}

int runner_spec_draft(struct runner_draft *d, struct runner_draft_job *jobs, int n_jobs,
                      struct err *e)
{
    int *row = d->job_row;
    int n_ctx = model_n_ctx(d->m);
    for (int i = 0; i < n_jobs; i++)  // drafts fed at positions n .. n + max - 2
        if (jobs[i].n + jobs[i].max - 1 > n_ctx)
            jobs[i].max = n_ctx - jobs[i].n + 1;
    int rc = catch_up(d, jobs, n_jobs, row, e);
    // One token per unfinished job and pass: its last draft, for the next.
    while (rc == 0) {
        int n = 0;
        for (int i = 0; i < n_jobs; i++) {
            struct runner_draft_job *j = &jobs[i];
            row[i] = -1;
            if (j->k == 0 || j->k >= j->max || model_token_is_eog(d->m, j->out[j->k - 1]))
                continue;
            d->b_tokens[n] = j->out[j->k - 1];
            d->b_pos[n] = j->n + j->k - 1;
            d->b_slot[n] = j->slot;
            d->b_logits[n] = true;
            row[i] = n++;
        }
        if (n == 0)
            break;
        rc = decode_step(d, n, jobs, n_jobs, row, e);
    }
    return rc;
}

int runner_draft_load(struct runner_draft **out, const char *path, const struct model *target,
                      struct err *e)
{
    struct model_options o = {
        .n_ctx = model_n_ctx(target),
        .n_batch = model_n_batch(target),
        .n_slots = model_n_slots(target),
        .n_threads = model_n_threads(target),
    };
    struct model *m = NULL;
    int rc = model_load(&m, path, &o, e);
    if (rc < 0) {
        err_prefix(e, "draft model");
        return rc;
    }
    if (model_is_encoder(m)) {
        rc = err_set(e, ERR_INVALID, "draft model: %s is an embedding model", model_arch_name(m));
        model_free(m);
        return rc;
    }
    if ((rc = runner_spec_check_vocab(model_tokenizer(target), model_tokenizer(m), e)) < 0) {
        model_free(m);
        return rc;
    }
    struct runner_draft *d = xcalloc(1, sizeof(*d));
    d->m = m;
    d->n_batch = model_n_batch(m);
    size_t nb = (size_t)d->n_batch;
    d->b_tokens = xcalloc(nb, sizeof(int32_t));
    d->b_pos = xcalloc(nb, sizeof(int32_t));
    d->b_slot = xcalloc(nb, sizeof(int32_t));
    d->b_logits = xcalloc(nb, sizeof(bool));
    d->job_next = xcalloc((size_t)model_n_slots(m), sizeof(int));
    d->job_row = xcalloc((size_t)model_n_slots(m), sizeof(int));
    *out = d;
    return 0;
}

void runner_draft_free(struct runner_draft *d)
{
    if (!d)
        return;
    model_free(d->m);
    free(d->b_tokens);
    free(d->b_pos);
    free(d->b_slot);
    free(d->b_logits);
    free(d->job_next);
    free(d->job_row);
    free(d);
}

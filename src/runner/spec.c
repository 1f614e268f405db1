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
//    one token per forward pass. Its cache follows the target's history
//    lazily: each drafting step keeps the common prefix and evaluates the
//    rest, so rejected drafts and context shifts need no bookkeeping here.
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
            for (int j = i + g; j < n && k < max; j++)
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

// Evaluates tokens[0..n) at positions p0.. of the draft's slot in pieces of
// n_batch; the logits of the last one are left in model_logits(dm, last).
static int feed(struct runner_draft *d, int slot, const int32_t *tokens, int n, int p0, int *last,
                struct err *e)
{
    for (int i0 = 0; i0 < n;) {
        int un = n - i0 < d->n_batch ? n - i0 : d->n_batch;
        for (int j = 0; j < un; j++) {
            d->b_tokens[j] = tokens[i0 + j];
            d->b_pos[j] = p0 + i0 + j;
            d->b_slot[j] = slot;
            d->b_logits[j] = j == un - 1;
        }
        struct model_batch b = {.n_tokens = un,
                                .tokens = d->b_tokens,
                                .pos = d->b_pos,
                                .slot = d->b_slot,
                                .logits = d->b_logits};
        int rc = model_decode(d->m, &b, e);
        if (rc < 0)
            return rc;
        *last = un - 1;
        i0 += un;
    }
    return 0;
}

int runner_spec_draft(struct runner_draft *d, int slot, const int32_t *hist, int n, int32_t *out,
                      int max, struct err *e)
{
    if (max <= 0 || n <= 0)
        return 0;
    if (n + max - 1 > model_n_ctx(d->m))
        max = model_n_ctx(d->m) - n + 1;
    // Keep the cached prefix the history still has (at most n - 1 tokens:
    // the last one is evaluated again for its logits).
    int c = 0, n_past = model_slot_n_past(d->m, slot);
    const int32_t *cached = model_slot_tokens(d->m, slot);
    while (c < n_past && c < n - 1 && cached[c] == hist[c])
        c++;
    int rc = model_slot_truncate(d->m, slot, c, e);
    int last = 0;
    if (rc < 0 || (rc = feed(d, slot, hist + c, n - c, c, &last, e)) < 0)
        return rc;
    int k = 0;
    for (;;) {
        const float *logits = model_logits(d->m, last);
        if (!logits)
            return err_set(e, ERR_INTERNAL, "draft model gave no logits");
        out[k] = argmax(logits, model_n_vocab(d->m));
        if (model_token_is_eog(d->m, out[k++]) || k == max)
            return k;
        if ((rc = feed(d, slot, &out[k - 1], 1, n + k - 1, &last, e)) < 0)
            return rc;
    }
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
    free(d);
}

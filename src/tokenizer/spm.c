// SentencePiece-style tokenization (spec §4): spaces become U+2581, the text
// is split into UTF-8 characters, and adjacent symbols whose concatenation is
// a token are merged, highest token score first (ties: leftmost). Characters
// that end up outside the vocabulary fall back to <0xXX> byte tokens. Pairs
// wait in a binary heap over a linked list of symbols: O(n log n).
#include "tokenizer/internal.h"

#include <stdlib.h>
#include <string.h>

struct spm_pair {
    float score;
    int32_t left, right;
    uint32_t size;
    int32_t id;  // the merged token
};

static inline bool pair_before(const struct spm_pair *a, const struct spm_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

TOK_PAIR_HEAP(spm_pair, pair_before)

static void try_pair(const struct tokenizer *t, struct tok_scratch *s, size_t *n_heap, int32_t l,
                     int32_t r)
{
    if (l < 0 || r < 0)
        return;
    const struct tok_sym *a = &s->syms[l], *b = &s->syms[r];
    size_t size = (size_t)a->len + b->len;
    if (size > t->max_token_len)
        return;
    int32_t id = tok_lookup_real(t, s->text.data + a->start, size);
    if (id < 0)
        return;
    heap_push(s, n_heap, (struct spm_pair){t->scores[id], l, r, (uint32_t)size, id});
}

static bool spm_pair_known(const struct tokenizer *t, const char *s, size_t n)
{
    uint64_t h = tok_hash(s, n) | 1;
    uint32_t k = (uint32_t)(h >> 32) & t->spm_pairs_mask;
    for (;;) {
        uint64_t v = t->spm_pairs[k];
        if (v == h)
            return true;
        if (v == 0)
            return false;
        k = (k + 1) & t->spm_pairs_mask;
    }
}

// Splits the chunk w[0..n) of s->text into characters, merges them and
// appends their ids (a tok_word_fn: symbols keep offsets into s->text).
static int spm_chunk(const struct tokenizer *t, struct tok_scratch *s, const char *w, size_t n,
                     struct tokenizer_ids *out)
{
    const char *p = s->text.data;
    size_t a = (size_t)(w - p), b = a + n;
    if (tok_scratch_syms(s, b - a) < 0)
        return ERR_NOMEM;
    struct tok_sym *sym = s->syms;
    size_t n_sym = 0;
    for (size_t off = a; off < b;) {
        size_t l = tok_utf8_len((unsigned char)p[off]);
        if (l > b - off)
            l = b - off;
        sym[n_sym] = (struct tok_sym){-1, (uint32_t)off, (uint32_t)l, (int32_t)n_sym - 1,
                                      off + l < b ? (int32_t)n_sym + 1 : -1};
        n_sym++;
        off += l;
    }
    size_t n_heap = 0;
    for (size_t i = 1; i < n_sym; i++)
        try_pair(t, s, &n_heap, (int32_t)i - 1, (int32_t)i);
    while (n_heap > 0) {
        struct spm_pair q = heap_pop(s, &n_heap);
        struct tok_sym *l = &sym[q.left], *r = &sym[q.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != q.size)
            continue;  // stale
        l->len += r->len;
        l->id = q.id;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = q.left;
        try_pair(t, s, &n_heap, l->prev, q.left);
        try_pair(t, s, &n_heap, q.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        int32_t id = sym[i].id >= 0 ? sym[i].id : tok_lookup_real(t, p + sym[i].start, sym[i].len);
        if (id >= 0) {
            if (tokenizer_ids_push(out, id) < 0)
                return ERR_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < sym[i].len; k++) {
            int32_t bt = t->byte_tok[(unsigned char)p[sym[i].start + k]];
            if (bt < 0)
                bt = t->sp.unk;
            if (bt >= 0 && tokenizer_ids_push(out, bt) < 0)
                return ERR_NOMEM;
        }
    }
    return 0;
}

int tok_spm_encode(const struct tokenizer *t, struct tok_scratch *s, const char *text, size_t len,
                   bool space_prefix, struct tokenizer_ids *out, struct err *e)
{
    // Prepare: optional space prefix, ' ' -> U+2581.
    buf_reset(&s->text);
    if (buf_reserve(&s->text, len * 3 + 4) < 0)
        return err_set(e, ERR_NOMEM, NULL);
    char *p = s->text.data;
    size_t n = 0;
    if (space_prefix) {
        memcpy(p, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(p + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            p[n++] = text[i];
        }
    }
    s->text.len = n;
    p[n] = 0;
    if (n >= UINT32_MAX)
        return err_set(e, ERR_TOO_LARGE, "text too large to tokenize");

    // Cut into chunks at word starts (U+2581 after another character) whose
    // character pair occurs in no token: nothing is ever merged across such a
    // point, so the chunks are independent and the result equals one global
    // pass, with small heaps and cacheable words.
    static const char sp[] = "\xe2\x96\x81";
    size_t c0 = 0, prev = 0, prev_len = 0;
    for (size_t off = 0; off < n;) {
        size_t l = tok_utf8_len((unsigned char)p[off]);
        if (l > n - off)
            l = n - off;
        if (off > c0 && l == 3 && memcmp(p + off, sp, 3) == 0 &&
            !(prev_len == 3 && memcmp(p + prev, sp, 3) == 0) &&
            !spm_pair_known(t, p + prev, prev_len + 3)) {
            int rc = tok_wc_encode(t, s, p + c0, off - c0, spm_chunk, out);
            if (rc < 0)
                return err_set(e, rc, NULL);
            c0 = off;
        }
        prev = off;
        prev_len = l;
        off += l;
    }
    if (c0 < n) {
        int rc = tok_wc_encode(t, s, p + c0, n - c0, spm_chunk, out);
        if (rc < 0)
            return err_set(e, rc, NULL);
    }
    return 0;
}

// Byte-level BPE (spec §5): pre-tokenize, map bytes to the GPT-2 alphabet,
// then merge the adjacent pair of lowest rank until none applies. Symbols are
// kept as a linked list over the word's bytes (each byte is one byte-level
// character) and candidate pairs in a binary heap, so a word of n bytes costs
// O(n log n) whatever its length.
#include "tokenizer/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bpe_pair {
    int32_t rank;
    int32_t left, right;
    int32_t lid, rid;
    int32_t result;
};

static inline bool pair_before(const struct bpe_pair *a, const struct bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

TOK_PAIR_HEAP(bpe_pair, pair_before)

static void try_pair(const struct tokenizer *t, struct tok_scratch *s, size_t *n_heap, int32_t l,
                     int32_t r)
{
    if (l < 0 || r < 0)
        return;
    int32_t rank, result;
    if (!tok_pair_find(t, s->syms[l].id, s->syms[r].id, &rank, &result))
        return;
    heap_push(s, n_heap, (struct bpe_pair){rank, l, r, s->syms[l].id, s->syms[r].id, result});
}

// A symbol that is not a token: the tokens of its single bytes, if any
// (as llama.cpp; with a byte-level vocabulary this never happens). Gemma 4's
// SentencePiece-style vocabulary spells byte tokens <0xXX>.
static int emit_fallback(const struct tokenizer *t, const char *word, const struct tok_sym *sym,
                         struct tokenizer_ids *out)
{
    for (uint32_t i = 0; i < sym->len; i++) {
        unsigned char b = (unsigned char)word[sym->start + i];
        if (t->spm_bpe) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            int32_t id = tok_lookup_real(t, hex, 6);
            if (id >= 0 && tokenizer_ids_push(out, id) < 0)
                return ERR_NOMEM;
            continue;
        }
        const char *u = t->byte_char[b];
        for (int k = 0; k < u[2]; k++) {
            int32_t id = tok_lookup_real(t, u + k, 1);
            if (id >= 0 && tokenizer_ids_push(out, id) < 0)
                return ERR_NOMEM;
        }
    }
    return 0;
}

// Merges the n symbols of s->syms (the word's characters) by rank and
// appends the tokens of what is left.
static int merge_and_emit(const struct tokenizer *t, struct tok_scratch *s, const char *word,
                          size_t n, struct tokenizer_ids *out)
{
    struct tok_sym *sym = s->syms;
    size_t n_heap = 0;
    for (size_t i = 1; i < n; i++)
        try_pair(t, s, &n_heap, (int32_t)i - 1, (int32_t)i);
    while (n_heap > 0) {
        struct bpe_pair p = heap_pop(s, &n_heap);
        struct tok_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->len == 0 || r->len == 0 || l->next != p.right || l->id != p.lid || r->id != p.rid)
            continue;  // stale
        l->id = p.result;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = p.left;
        try_pair(t, s, &n_heap, l->prev, p.left);
        try_pair(t, s, &n_heap, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        if (sym[i].id >= 0 && sym[i].id < t->n_vocab) {
            if (tokenizer_ids_push(out, sym[i].id) < 0)
                return ERR_NOMEM;
        } else if (emit_fallback(t, word, &sym[i], out) < 0) {
            return ERR_NOMEM;
        }
    }
    return 0;
}

static int bpe_word(const struct tokenizer *t, struct tok_scratch *s, const char *word, size_t n,
                    struct tokenizer_ids *out)
{
    if (t->ignore_merges && n <= t->max_token_len) {
        // The word as byte-level text (each byte 1 or 2 bytes of UTF-8).
        buf_reset(&s->text);
        if (buf_reserve(&s->text, n * 2 + 1) < 0)
            return ERR_NOMEM;
        char *m = s->text.data;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const char *u = t->byte_char[(unsigned char)word[i]];
            m[k] = u[0];
            m[k + 1] = u[1];
            k += (size_t)u[2];
        }
        int32_t id = tok_lookup_real(t, m, k);
        if (id >= 0)
            return tokenizer_ids_push(out, id);
    }
    if (tok_scratch_syms(s, n) < 0)
        return ERR_NOMEM;
    struct tok_sym *sym = s->syms;
    for (size_t i = 0; i < n; i++) {
        sym[i].id = t->byte_sym[(unsigned char)word[i]];
        sym[i].start = (uint32_t)i;
        sym[i].len = 1;
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    return merge_and_emit(t, s, word, n, out);
}

// SentencePiece-style BPE (Gemma 4) over one word of the escaped text: a
// word of newlines only is one token when the vocabulary has it (llama.cpp's
// fix for Gemma 4), else the symbols start as the word's UTF-8 characters.
static int spm_bpe_word(const struct tokenizer *t, struct tok_scratch *s, const char *word,
                        size_t n, struct tokenizer_ids *out)
{
    size_t nl = 0;
    while (nl < n && word[nl] == '\n')
        nl++;
    if (nl == n) {
        int32_t id = tok_lookup_real(t, word, n);
        if (id >= 0)
            return tokenizer_ids_push(out, id);
    }
    if (tok_scratch_syms(s, n) < 0)
        return ERR_NOMEM;
    struct tok_sym *sym = s->syms;
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t len = tok_utf8_len((unsigned char)word[i]);
        if (len > n - i)
            len = n - i;
        sym[k].id = tok_lookup(t, word + i, len);
        sym[k].start = (uint32_t)i;
        sym[k].len = (uint32_t)len;
        sym[k].prev = (int32_t)k - 1;
        i += len;
        sym[k].next = i < n ? (int32_t)k + 1 : -1;
    }
    return merge_and_emit(t, s, word, k, out);
}

// Gemma 4's normaliser: every space becomes U+2581 (nothing else changes).
static int escape_spaces(struct buf *b, const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        int rc = text[i] == ' ' ? buf_append(b, "\xe2\x96\x81", 3) : buf_append_char(b, text[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int tok_bpe_encode(const struct tokenizer *t, struct tok_scratch *s, const char *text, size_t len,
                   struct tokenizer_ids *out, struct err *e)
{
    struct buf esc;
    buf_init(&esc, 0);
    if (t->spm_bpe) {
        if (escape_spaces(&esc, text, len) < 0) {
            buf_deinit(&esc);
            return err_set(e, ERR_NOMEM, NULL);
        }
        text = esc.data ? esc.data : "";
        len = esc.len;
    }
    s->spans.n = 0;
    int rc = tok_pretok_split(&t->pre, text, len, &s->spans, e);
    for (size_t i = 0; rc >= 0 && i < s->spans.n; i += 2) {
        rc = tok_wc_encode(t, s, text + s->spans.v[i], s->spans.v[i + 1],
                           t->spm_bpe ? spm_bpe_word : bpe_word, out);
        if (rc < 0)
            err_set(e, rc, NULL);
    }
    buf_deinit(&esc);
    return rc < 0 ? rc : 0;
}

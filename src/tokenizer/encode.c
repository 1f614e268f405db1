// Encoding pipeline (spec §2, §3): special-token text is split out of the
// input (longest candidate first, plain substring search), then each raw
// fragment goes to the model's encoder, with BOS/EOS/CLS/SEP around the
// whole when add_special is set.
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

// ---------------------------------------------------------------------------
// Id arrays and scratch.

void tokenizer_ids_deinit(struct tokenizer_ids *v)
{
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

void tokenizer_ids_reset(struct tokenizer_ids *v)
{
    v->len = 0;
}

int tokenizer_ids_push(struct tokenizer_ids *v, int32_t id)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        if (cap > SIZE_MAX / 2 / sizeof(int32_t))
            return ERR_NOMEM;
        int32_t *p = realloc(v->data, cap * sizeof(int32_t));
        if (!p)
            return ERR_NOMEM;
        v->data = p;
        v->cap = cap;
    }
    v->data[v->len++] = id;
    return 0;
}

void tok_scratch_deinit(struct tok_scratch *s)
{
    tok_spans_deinit(&s->spans);
    free(s->wc);
    tokenizer_ids_deinit(&s->wc_ids);
    buf_deinit(&s->wc_text);
    free(s->syms);
    free(s->heap);
    buf_deinit(&s->text);
    memset(s, 0, sizeof(*s));
}

// Word cache: natural text repeats its words, and the ids of a BPE word
// (or an SPM chunk) depend only on its bytes. Kept per call, so the
// tokenizer itself stays read-only; sized by the text.
#define WC_MAX_ENTRIES (1u << 16)

void tok_wc_init(struct tok_scratch *s, size_t text_len)
{
    if (s->wc)
        return;
    uint32_t slots = 256;
    while (slots < 2 * WC_MAX_ENTRIES && slots < text_len / 2)
        slots <<= 1;
    s->wc = xcalloc(slots, sizeof(*s->wc));
    s->wc_mask = slots - 1;
    buf_init(&s->wc_text, 0);
}

static struct tok_wc_slot *wc_find(struct tok_scratch *s, const char *w, uint32_t n, uint32_t h)
{
    uint32_t i = h & s->wc_mask;
    for (;;) {
        struct tok_wc_slot *q = &s->wc[i];
        if (!q->len ||
            (q->hash == h && q->len == n && memcmp(s->wc_text.data + q->text_off, w, n) == 0))
            return q;
        i = (i + 1) & s->wc_mask;
    }
}

bool tok_wc_get(struct tok_scratch *s, const char *w, size_t n, uint32_t *hash,
                struct tokenizer_ids *out, int *rc)
{
    *rc = 0;
    if (!s->wc || n < 2 || n > TOK_WC_MAX_WORD)
        return false;
    *hash = (uint32_t)tok_hash(w, n);
    const struct tok_wc_slot *q = wc_find(s, w, (uint32_t)n, *hash);
    if (!q->len)
        return false;
    for (uint32_t i = 0; i < q->n_ids; i++)
        if (tokenizer_ids_push(out, s->wc_ids.data[q->off + i]) < 0) {
            *rc = ERR_NOMEM;
            break;
        }
    return true;
}

void tok_wc_put(struct tok_scratch *s, const char *w, size_t n, uint32_t hash, const int32_t *ids,
                size_t n_ids)
{
    if (!s->wc || n < 2 || n > TOK_WC_MAX_WORD || s->wc_n * 2 >= s->wc_mask ||
        s->wc_ids.len + n_ids >= UINT32_MAX / 2 || s->wc_text.len + n >= UINT32_MAX / 2)
        return;
    struct tok_wc_slot *q = wc_find(s, w, (uint32_t)n, hash);
    if (q->len)
        return;
    size_t off = s->wc_ids.len;
    for (size_t i = 0; i < n_ids; i++)
        if (tokenizer_ids_push(&s->wc_ids, ids[i]) < 0) {
            s->wc_ids.len = off;
            return;
        }
    size_t text_off = s->wc_text.len;
    if (buf_append(&s->wc_text, w, n) < 0) {
        s->wc_ids.len = off;
        return;
    }
    q->len = (uint32_t)n;
    q->hash = hash;
    q->text_off = (uint32_t)text_off;
    q->off = (uint32_t)off;
    q->n_ids = (uint32_t)n_ids;
    s->wc_n++;
}

int tok_wc_encode(const struct tokenizer *t, struct tok_scratch *s, const char *w, size_t n,
                  tok_word_fn encode, struct tokenizer_ids *out)
{
    uint32_t h;
    int rc;
    if (tok_wc_get(s, w, n, &h, out, &rc))
        return rc;
    size_t start = out->len;
    rc = encode(t, s, w, n, out);
    // A word that produced no ids (data may still be NULL) is not cached.
    if (rc == 0 && n >= 2 && n <= TOK_WC_MAX_WORD && out->len > start)
        tok_wc_put(s, w, n, h, out->data + start, out->len - start);
    return rc;
}

int tok_scratch_syms(struct tok_scratch *s, size_t n)
{
    if (n <= s->cap_syms)
        return 0;
    size_t cap = s->cap_syms ? s->cap_syms : 64;
    while (cap < n)
        cap *= 2;
    struct tok_sym *p = realloc(s->syms, cap * sizeof(*p));
    if (!p)
        return ERR_NOMEM;
    s->syms = p;
    s->cap_syms = cap;
    return 0;
}

// ---------------------------------------------------------------------------
// Special-token partition.

struct frag {
    uint32_t off, len;
    int32_t id;  // -1: raw text
};

struct frags {
    struct frag *v;
    size_t n, cap;
};

static void frags_push(struct frags *f, uint32_t off, uint32_t len, int32_t id)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 16;
        f->v = xrealloc(f->v, f->cap * sizeof(*f->v));
    }
    f->v[f->n++] = (struct frag){off, len, id};
}

static bool c_isspace(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

// Marks in seen[] the special-token candidates that occur anywhere in the
// text (a fragment is a substring of it, so the others can be skipped);
// returns how many.
static size_t candidates_seen(const struct tokenizer *t, const char *text, size_t len,
                              uint8_t *seen)
{
    size_t n_seen = 0;
    for (size_t p = 0; p < len && n_seen < t->n_cands; p++) {
        unsigned char b = (unsigned char)text[p];
        if (!t->cand_lead[b])
            continue;
        uint32_t buckets[2] = {0x10000u + b, p + 1 < len
                                                 ? (uint32_t)b << 8 | (unsigned char)text[p + 1]
                                                 : 0x10000u + b};
        for (int k2 = 0; k2 < (buckets[1] == buckets[0] ? 1 : 2); k2++) {
            uint32_t bk = buckets[k2];
            for (uint32_t k = t->cand_first[bk]; k < t->cand_first[bk + 1]; k++) {
                uint32_t ci = t->cand_idx[k];
                int32_t id = t->cands[ci];
                size_t n = t->text_len[id];
                if (!seen[ci] && n <= len - p && memcmp(text + p, tok_text(t, id), n) == 0) {
                    seen[ci] = 1;
                    n_seen++;
                }
            }
        }
    }
    return n_seen;
}

// The text fragment [base, base + blen) split on every occurrence of token
// id into next (whitespace stripped on the sides its attributes say).
static void split_fragment(const struct tokenizer *t, const char *text, size_t base, size_t blen,
                           int32_t id, struct frags *next)
{
    const uint32_t attr = t->attrs[id];
    const char *ct = tok_text(t, id);
    const size_t cn = t->text_len[id];
    while (blen > 0) {
        const char *m = memmem(text + base, blen, ct, cn);
        if (!m) {
            frags_push(next, (uint32_t)base, (uint32_t)blen, -1);
            break;
        }
        size_t mpos = (size_t)(m - text);
        size_t llen = mpos - base;
        if (attr & TOK_ATTR_LSTRIP)
            while (llen > 0 && c_isspace(text[base + llen - 1]))
                llen--;
        if (llen > 0)
            frags_push(next, (uint32_t)base, (uint32_t)llen, -1);
        frags_push(next, (uint32_t)mpos, (uint32_t)cn, id);
        size_t rstart = mpos + cn, rlen = base + blen - rstart;
        if (attr & TOK_ATTR_RSTRIP)
            while (rlen > 0 && c_isspace(text[rstart])) {
                rstart++;
                rlen--;
            }
        base = rstart;
        blen = rlen;
    }
}

static void partition(const struct tokenizer *t, const char *text, size_t len, bool parse_special,
                      struct frags *out)
{
    frags_push(out, 0, (uint32_t)len, -1);
    if (t->n_cands == 0)
        return;
    uint8_t *seen = xcalloc(t->n_cands, 1);
    size_t n_seen = candidates_seen(t, text, len, seen);
    struct frags next = {0};
    for (size_t ci = 0; ci < t->n_cands && n_seen > 0; ci++) {
        if (!seen[ci])
            continue;
        n_seen--;
        int32_t id = t->cands[ci];
        uint32_t attr = t->attrs[id];
        if (!parse_special && (attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))
            continue;
        if (t->id_limit > 0 && id >= t->id_limit)
            continue;
        next.n = 0;
        for (size_t i = 0; i < out->n; i++) {
            struct frag f = out->v[i];
            if (f.id >= 0)
                frags_push(&next, f.off, f.len, f.id);
            else
                split_fragment(t, text, f.off, f.len, id, &next);
        }
        struct frags tmp = *out;
        *out = next;
        next = tmp;
    }
    free(next.v);
    free(seen);
}

// ---------------------------------------------------------------------------
// Encode.

static int push_id(struct tokenizer_ids *out, int32_t id, struct err *e)
{
    if (id < 0)
        return 0;  // the model has no such token: nothing to add
    return tokenizer_ids_push(out, id) < 0 ? err_set(e, ERR_NOMEM, NULL) : 0;
}

int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, struct tokenizer_ids *out, struct err *e)
{
    if (!text && len)
        return err_set(e, ERR_INVALID, "tokenize: NULL text");
    if (len >= UINT32_MAX / 4)
        return err_set(e, ERR_TOO_LARGE, "tokenize: text of %zu bytes is too large", len);
    size_t start = out->len;
    struct frags fr = {0};
    if (len > 0)
        partition(t, text, len, parse_special, &fr);
    struct tok_scratch s = {0};
    buf_init(&s.text, 0);
    tok_wc_init(&s, len);
    int rc = 0;

    bool lead = add_special && (t->kind == TOKENIZER_WPM || t->add_bos);
    if (lead) {
        int32_t id = t->sp.bos >= 0 ? t->sp.bos : t->kind == TOKENIZER_WPM ? t->sp.cls : -1;
        rc = push_id(out, id, e);
    }
    bool prev_special = true;  // SPM: prefix a space to the first fragment and after specials
    for (size_t i = 0; i < fr.n && rc == 0; i++) {
        const struct frag *f = &fr.v[i];
        if (f->id >= 0) {
            rc = push_id(out, f->id, e);
            prev_special = true;
            continue;
        }
        switch (t->kind) {
        case TOKENIZER_SPM:
            rc = tok_spm_encode(t, &s, text + f->off, f->len, t->add_space_prefix && prev_special,
                                out, e);
            break;
        case TOKENIZER_BPE:
            rc = tok_bpe_encode(t, &s, text + f->off, f->len, out, e);
            break;
        case TOKENIZER_WPM:
            rc = tok_wpm_encode(t, &s, text + f->off, f->len, out, e);
            break;
        }
        prev_special = false;
    }
    if (rc == 0 && add_special) {
        if (t->kind != TOKENIZER_WPM && t->add_eos)
            rc = push_id(out, t->sp.eos, e);
        if (rc == 0 && (t->kind == TOKENIZER_WPM || t->add_sep))
            rc = push_id(out, t->sp.sep, e);
    }
    free(fr.v);
    tok_scratch_deinit(&s);
    if (rc < 0) {
        out->len = start;
        return rc;
    }
    return (int)(out->len - start);
}

void tokenizer_set_id_limit(struct tokenizer *t, int32_t n)
{
    t->id_limit = n;
}

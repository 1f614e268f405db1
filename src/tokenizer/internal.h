// tokenizer internals shared by the module's files: the vocabulary tables,
// hash maps and the per-model encoders.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

// Token attributes (llama.cpp's llama_token_attr): a token type may gain
// extra flags at load (CONTROL tokens named "unused" are also UNUSED).
enum {
    TOK_ATTR_UNDEFINED = 0,
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7,
    TOK_ATTR_RSTRIP = 1 << 8,
};

// Open-addressing map from token text to id. Texts live in the tokenizer's
// text table, so a slot stores only the hash and the id.
struct tok_slot {
    uint32_t hash;
    int32_t id;  // -1 = empty slot
};
struct tok_map {
    struct tok_slot *slots;
    uint32_t mask;
};

// BPE merge table keyed by (left id, right id).
struct tok_pair {
    uint64_t key;  // UINT64_MAX = empty
    int32_t rank;
    int32_t result;
};
struct tok_pair_map {
    struct tok_pair *slots;
    uint32_t mask;
};

// Pre-tokenizer: up to 8 regexes applied in sequence (spec §5.3).
#define TOK_MAX_REGEX 8
struct tok_pretok {
    const char *name;
    int n_re;
    void *re[TOK_MAX_REGEX];  // pcre2_code_8 *
    bool jit[TOK_MAX_REGEX];
};

struct tokenizer {
    enum tokenizer_kind kind;
    char pre_name[64];
    int32_t n_vocab;  // real tokens
    int32_t n_text;   // real + virtual (merge parts that are not tokens)
    int32_t cap_text;

    // Token texts: text_blob[text_off[i] .. + text_len[i]).
    char *text_blob;
    size_t blob_len, blob_cap;
    uint32_t *text_off, *text_len;
    float *scores;
    uint8_t *types;
    uint32_t *attrs;
    size_t max_token_len;
    struct tok_map map;

    // Decoded piece per token (▁ -> space, byte tokens -> the byte, BPE
    // byte-level text -> raw bytes); CONTROL text for render_special.
    char *piece_blob;
    uint32_t *piece_off, *piece_len;

    // BPE.
    struct tok_pair_map pairs;
    int32_t byte_sym[256];   // id of the byte-level char of each byte (or -1)
    char byte_char[256][3];  // its UTF-8 (2 bytes at most; [2] = length)
    bool ignore_merges;
    bool clean_spaces;
    // SentencePiece-style BPE (Gemma 4): merges over raw UTF-8 characters of
    // the text with spaces as U+2581, <0xXX> byte tokens for what is left.
    bool spm_bpe;
    struct tok_pretok pre;

    // SPM: the token for each byte (<0xXX>, else the one-byte text), or -1.
    int32_t byte_tok[256];

    // WPM normalisation.
    bool wpm_lowercase, wpm_strip_accents;

    bool add_bos, add_eos, add_sep, add_space_prefix;
    struct tokenizer_special sp;

    // Special-token candidates (CONTROL | USER_DEFINED | UNKNOWN), longest first.
    int32_t *cands;
    size_t n_cands;
    // Candidates by their first two bytes (one-byte candidates under
    // 0x10000 + b): cand_idx[cand_first[k] .. cand_first[k + 1]) index cands.
    uint32_t *cand_first;  // 0x10100 + 1 entries
    uint32_t *cand_idx;
    uint8_t cand_lead[256];  // some candidate starts with this byte

    // SPM: hashes of the adjacent character pairs inside tokens; a text
    // position whose pair is absent can never be merged across.
    uint64_t *spm_pairs;
    uint32_t spm_pairs_mask;

    uint8_t *eog;  // bitmap over n_vocab
    // > 0: special-token text of ids >= this is not matched.
    int32_t id_limit;
};

// Hashing.
uint64_t tok_hash(const void *p, size_t n);

// Text map.
int32_t tok_lookup(const struct tokenizer *t, const char *s, size_t n);  // real or virtual
static inline int32_t tok_lookup_real(const struct tokenizer *t, const char *s, size_t n)
{
    int32_t id = tok_lookup(t, s, n);
    return id < t->n_vocab ? id : -1;
}
static inline const char *tok_text(const struct tokenizer *t, int32_t id)
{
    return t->text_blob + t->text_off[id];
}

// Pair map.
static inline bool tok_pair_find(const struct tokenizer *t, int32_t a, int32_t b, int32_t *rank,
                                 int32_t *result)
{
    if (!t->pairs.slots || a < 0 || b < 0)
        return false;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & t->pairs.mask;
    for (;;) {
        const struct tok_pair *q = &t->pairs.slots[i];
        uint64_t k = q->key;
        if (k == key) {
            *rank = q->rank;
            *result = q->result;
            return true;
        }
        if (k == UINT64_MAX)
            return false;
        i = (i + 1) & t->pairs.mask;
    }
}

// Pre-tokenizers (pretok.c).
int tok_pretok_init(struct tok_pretok *p, const char *name, bool *ignore_merges, int *add_bos,
                    bool *clean_spaces, struct err *e);
void tok_pretok_deinit(struct tok_pretok *p);
// Splits text into words: appends (offset, length) pairs to *spans. Thread-safe.
struct tok_spans {
    uint32_t *v;  // offset, length pairs
    size_t n, cap;
};
int tok_pretok_split(const struct tok_pretok *p, const char *text, size_t len,
                     struct tok_spans *out, struct err *e);
void tok_spans_deinit(struct tok_spans *s);

// Working memory of one encode call, reused across its fragments.
struct tok_sym {
    int32_t id;  // BPE: token (or virtual) id of the symbol, -1 if none
    uint32_t start, len;
    int32_t prev, next;
};
// Per-call word cache (BPE words, SPM chunks): bytes -> ids.
struct tok_wc_slot {
    uint32_t len;  // 0 = empty slot
    uint32_t hash;
    uint32_t text_off;    // into tok_scratch.wc_text
    uint32_t off, n_ids;  // into tok_scratch.wc_ids
};
struct tok_scratch {
    struct tok_spans spans;
    struct tok_wc_slot *wc;
    uint32_t wc_mask, wc_n;
    struct tokenizer_ids wc_ids;
    struct buf wc_text;
    struct tok_sym *syms;
    size_t cap_syms;
    void *heap;
    size_t cap_heap_bytes;
    struct buf text;
};
void tok_scratch_deinit(struct tok_scratch *s);
// Word cache: words of 2..TOK_WC_MAX_WORD bytes. tok_wc_get appends the
// cached ids and returns true on a hit; tok_wc_put remembers ids for a word.
#define TOK_WC_MAX_WORD 64
bool tok_wc_get(struct tok_scratch *s, const char *w, size_t n, uint32_t *hash,
                struct tokenizer_ids *out, int *rc);
void tok_wc_put(struct tok_scratch *s, const char *w, size_t n, uint32_t hash, const int32_t *ids,
                size_t n_ids);
void tok_wc_init(struct tok_scratch *s, size_t text_len);
// Appends the ids of the word w[0..n) through the cache: a hit appends the
// cached ids; a miss calls encode and caches what it appended (when it
// succeeded with at least one id). Returns encode's result (or ERR_NOMEM).
typedef int (*tok_word_fn)(const struct tokenizer *t, struct tok_scratch *s, const char *w,
                           size_t n, struct tokenizer_ids *out);
int tok_wc_encode(const struct tokenizer *t, struct tok_scratch *s, const char *w, size_t n,
                  tok_word_fn encode, struct tokenizer_ids *out);
int tok_scratch_syms(struct tok_scratch *s, size_t n);

// Model encoders: append ids for one raw text fragment.
// A binary min-heap of pairs in the scratch's heap buffer, ordered by a
// `before(a, b)` predicate: TOK_PAIR_HEAP(bpe_pair, pair_before) defines
// static heap_push / heap_pop for that element type. A macro rather than a
// comparator callback: the merge loops of SPM and BPE are the hot path.
#define TOK_PAIR_HEAP(T, before)                                                                   \
    static void heap_push(struct tok_scratch *s, size_t *n, struct T p)                            \
    {                                                                                              \
        if ((*n + 1) * sizeof(struct T) > s->cap_heap_bytes) {                                     \
            size_t cap = s->cap_heap_bytes ? s->cap_heap_bytes * 2 : 64 * sizeof(struct T);        \
            s->heap = xrealloc(s->heap, cap);                                                      \
            s->cap_heap_bytes = cap;                                                               \
        }                                                                                          \
        struct T *h = s->heap;                                                                     \
        size_t i = (*n)++;                                                                         \
        while (i > 0) {                                                                            \
            size_t parent = (i - 1) / 2;                                                           \
            if (!before(&p, &h[parent]))                                                           \
                break;                                                                             \
            h[i] = h[parent];                                                                      \
            i = parent;                                                                            \
        }                                                                                          \
        h[i] = p;                                                                                  \
    }                                                                                              \
    static struct T heap_pop(struct tok_scratch *s, size_t *n)                                     \
    {                                                                                              \
        struct T *h = s->heap;                                                                     \
        struct T top = h[0];                                                                       \
        struct T last = h[--(*n)];                                                                 \
        size_t i = 0;                                                                              \
        for (;;) {                                                                                 \
            size_t c = 2 * i + 1;                                                                  \
            if (c >= *n)                                                                           \
                break;                                                                             \
            if (c + 1 < *n && before(&h[c + 1], &h[c]))                                            \
                c++;                                                                               \
            if (!before(&h[c], &last))                                                             \
                break;                                                                             \
            h[i] = h[c];                                                                           \
            i = c;                                                                                 \
        }                                                                                          \
        if (*n > 0)                                                                                \
            h[i] = last;                                                                           \
        return top;                                                                                \
    }

int tok_spm_encode(const struct tokenizer *t, struct tok_scratch *s, const char *text, size_t len,
                   bool space_prefix, struct tokenizer_ids *out, struct err *e);
int tok_bpe_encode(const struct tokenizer *t, struct tok_scratch *s, const char *text, size_t len,
                   struct tokenizer_ids *out, struct err *e);
int tok_wpm_encode(const struct tokenizer *t, struct tok_scratch *s, const char *text, size_t len,
                   struct tokenizer_ids *out, struct err *e);

// UTF-8 helpers.
// Length of the sequence led by byte c, as llama.cpp's unicode_len_utf8
// (continuation and invalid lead bytes count as 1).
static inline size_t tok_utf8_len(unsigned char c)
{
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}
// Unicode White_Space (spec §5.3).
static inline bool tok_is_ws(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

// Vocabulary: token texts and types, the text->id map, BPE merge ranks,
// special ids, end-of-generation set and decoded pieces, built from GGUF
// metadata (spec §1, §6, §7) or from plain arrays.
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/internal.h"

#define TOK_MAX_TOKENS   (1 << 24)
#define TOK_MAX_BLOB     ((size_t)1 << 31)
#define TOK_CAND_BUCKETS 0x10100u

// ---------------------------------------------------------------------------
// Hashing: 8 bytes at a time, multiply-xorshift mixing.

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
}

uint64_t tok_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xA0761D6478BD642Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mix64(h ^ w) * 0x9E3779B97F4A7C15ull;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)s[i] << (8 * i);
    return mix64(h ^ w ^ 0xE7037ED1A0B428DBull);
}

// ---------------------------------------------------------------------------
// Text map.

static void map_insert(struct tokenizer *t, int32_t id)
{
    const char *s = tok_text(t, id);
    size_t n = t->text_len[id];
    uint32_t h = (uint32_t)tok_hash(s, n);
    uint32_t i = h & t->map.mask;
    for (;;) {
        struct tok_slot *q = &t->map.slots[i];
        int32_t cur = q->id;
        if (cur < 0) {
            q->id = id;
            q->hash = h;
            return;
        }
        if (q->hash == h && t->text_len[cur] == n && memcmp(tok_text(t, cur), s, n) == 0) {
            // Duplicate text: the later id wins (as a std::map assignment).
            q->id = id;
            return;
        }
        i = (i + 1) & t->map.mask;
    }
}

static void map_rebuild(struct tokenizer *t, size_t n_entries)
{
    uint32_t size = 16;
    while (size < n_entries * 2 + 16)
        size <<= 1;
    free(t->map.slots);
    t->map.slots = xmalloc(size * sizeof(struct tok_slot));
    memset(t->map.slots, 0xff, size * sizeof(struct tok_slot));
    t->map.mask = size - 1;
    for (int32_t i = 0; i < t->n_text; i++)
        map_insert(t, i);
}

int32_t tok_lookup(const struct tokenizer *t, const char *s, size_t n)
{
    uint32_t h = (uint32_t)tok_hash(s, n);
    uint32_t i = h & t->map.mask;
    for (;;) {
        const struct tok_slot *q = &t->map.slots[i];
        int32_t cur = q->id;
        if (cur < 0)
            return -1;
        if (q->hash == h && t->text_len[cur] == n && memcmp(tok_text(t, cur), s, n) == 0)
            return cur;
        i = (i + 1) & t->map.mask;
    }
}

// Appends a text entry (token or virtual); returns its id or -1 past the caps.
static int32_t text_add(struct tokenizer *t, const char *s, size_t n)
{
    if (t->blob_len + n + 1 > TOK_MAX_BLOB || t->n_text >= TOK_MAX_TOKENS * 2)
        return -1;
    if (t->n_text == t->cap_text) {
        t->cap_text = t->cap_text ? t->cap_text * 2 : 1024;
        t->text_off = xrealloc(t->text_off, (size_t)t->cap_text * sizeof(uint32_t));
        t->text_len = xrealloc(t->text_len, (size_t)t->cap_text * sizeof(uint32_t));
    }
    if (t->blob_len + n + 1 > t->blob_cap) {
        size_t cap = t->blob_cap ? t->blob_cap : 4096;
        while (cap < t->blob_len + n + 1)
            cap *= 2;
        t->text_blob = xrealloc(t->text_blob, cap);
        t->blob_cap = cap;
    }
    memcpy(t->text_blob + t->blob_len, s, n);
    t->text_blob[t->blob_len + n] = 0;
    t->text_off[t->n_text] = (uint32_t)t->blob_len;
    t->text_len[t->n_text] = (uint32_t)n;
    t->blob_len += n + 1;
    return t->n_text++;
}

// Looks a text up, adding it as a virtual entry (id >= n_vocab) if absent.
static int32_t text_intern(struct tokenizer *t, const char *s, size_t n)
{
    int32_t id = tok_lookup(t, s, n);
    if (id >= 0)
        return id;
    id = text_add(t, s, n);
    if (id < 0)
        return -1;
    if ((uint32_t)t->n_text * 2 > t->map.mask)
        map_rebuild(t, (size_t)t->n_text * 2);
    else
        map_insert(t, id);
    return id;
}

// ---------------------------------------------------------------------------
// Pair map.

static void pairs_alloc(struct tokenizer *t, size_t n)
{
    uint32_t size = 16;
    while (size < n * 2 + 16)
        size <<= 1;
    t->pairs.slots = xmalloc(size * sizeof(struct tok_pair));
    memset(t->pairs.slots, 0xff, size * sizeof(struct tok_pair));
    t->pairs.mask = size - 1;
}

static void pairs_insert(struct tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t result)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & t->pairs.mask;
    for (;;) {
        struct tok_pair *q = &t->pairs.slots[i];
        if (q->key == key)
            return;  // first (lowest) rank wins
        if (q->key == UINT64_MAX) {
            q->key = key;
            q->rank = rank;
            q->result = result;
            return;
        }
        i = (i + 1) & t->pairs.mask;
    }
}

// ---------------------------------------------------------------------------
// GPT-2 byte <-> unicode table (spec §5.2).

static uint32_t byte_to_cpt(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return b;
    uint32_t n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)))
            n++;
    return 256 + n;
}

// Inverse: byte for a code point of the byte-level alphabet, or -1.
static int cpt_to_byte(uint32_t c)
{
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))
        return (int)c;
    if (c < 256 || c >= 256 + 68)
        return -1;
    uint32_t n = 0;
    for (unsigned x = 0; x < 256; x++) {
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) {
            if (256 + n == c)
                return (int)x;
            n++;
        }
    }
    return -1;
}

// Decodes one UTF-8 sequence leniently: returns its length (>= 1) and the
// code point, or 0xFFFFFFFF for an invalid sequence (length 1).
static size_t utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (len == 0 || len > n) {
        *cp = 0xFFFFFFFFu;
        return 1;
    }
    uint32_t v = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *cp = 0xFFFFFFFFu;
            return 1;
        }
        v = (v << 6) | (p[i] & 0x3F);
    }
    *cp = v;
    return len;
}

// ---------------------------------------------------------------------------
// Building.

static void set_id(const struct tokenizer *t, int32_t *slot, int64_t v)
{
    if (v >= 0 && v < t->n_vocab)
        *slot = (int32_t)v;
}

static void sp_clear(struct tokenizer_special *sp)
{
    int32_t *p = (int32_t *)sp;
    for (size_t i = 0; i < sizeof(*sp) / sizeof(int32_t); i++)
        p[i] = TOKENIZER_NULL;
}

// The attribute bits of a token type; an unknown type becomes UNDEFINED.
static uint32_t type_attr(int32_t *ty)
{
    switch (*ty) {
    case TOKENIZER_TYPE_NORMAL:
        return TOK_ATTR_NORMAL;
    case TOKENIZER_TYPE_UNKNOWN:
        return TOK_ATTR_UNKNOWN;
    case TOKENIZER_TYPE_CONTROL:
        return TOK_ATTR_CONTROL;
    case TOKENIZER_TYPE_USER_DEFINED:
        return TOK_ATTR_USER_DEFINED;
    case TOKENIZER_TYPE_UNUSED:
        return TOK_ATTR_UNUSED;
    case TOKENIZER_TYPE_BYTE:
        return TOK_ATTR_BYTE;
    default:
        *ty = TOKENIZER_TYPE_UNDEFINED;
        return TOK_ATTR_UNDEFINED;
    }
}

// Token i: its text (an empty one gets a placeholder name), score and type.
static int add_token(struct tokenizer *t, size_t i, struct str text, float score, int32_t ty,
                     struct err *e)
{
    char tmp[32];
    const char *s = text.ptr;
    size_t len = text.len;
    if (len == 0) {
        snprintf(tmp, sizeof(tmp), "[EMPTY_%zu]", i);
        s = tmp;
        len = strlen(tmp);
    }
    if (text_add(t, s, len) < 0)
        return err_set(e, ERR_TOO_LARGE, "tokenizer vocabulary text is too large");
    if (len > t->max_token_len)
        t->max_token_len = len;
    t->scores[i] = score;
    t->attrs[i] = type_attr(&ty);
    t->types[i] = (uint8_t)ty;
    return 0;
}

// Each kind's special ids and flags before the metadata has its say.
static void kind_defaults(struct tokenizer *t)
{
    sp_clear(&t->sp);
    t->add_bos = t->add_eos = t->add_sep = t->add_space_prefix = false;
    switch (t->kind) {
    case TOKENIZER_SPM:
        set_id(t, &t->sp.bos, 1);
        set_id(t, &t->sp.eos, 2);
        set_id(t, &t->sp.unk, 0);
        t->add_bos = true;
        t->add_space_prefix = true;
        break;
    case TOKENIZER_BPE:
        if (!t->spm_bpe) {  // Gemma 4's come from the metadata only
            set_id(t, &t->sp.bos, 11);
            set_id(t, &t->sp.eos, 11);
        }
        t->clean_spaces = true;
        break;
    case TOKENIZER_WPM:
        set_id(t, &t->sp.bos, 101);
        set_id(t, &t->sp.cls, 101);
        set_id(t, &t->sp.unk, 100);
        set_id(t, &t->sp.sep, 102);
        set_id(t, &t->sp.pad, 0);
        set_id(t, &t->sp.mask, 103);
        t->add_bos = true;
        t->add_sep = true;
        t->clean_spaces = true;
        t->wpm_lowercase = true;
        t->wpm_strip_accents = true;
        break;
    }
}

static int init_tokens(struct tokenizer *t, enum tokenizer_kind kind, size_t n,
                       const struct str *tokens, const float *scores, const int32_t *types,
                       struct err *e)
{
    if (kind != TOKENIZER_SPM && kind != TOKENIZER_BPE && kind != TOKENIZER_WPM)
        return err_set(e, ERR_UNSUPPORTED, "unknown tokenizer kind %d", (int)kind);
    if (n == 0)
        return err_set(e, ERR_FORMAT, "tokenizer has no tokens");
    if (n > TOK_MAX_TOKENS)
        return err_set(e, ERR_TOO_LARGE, "tokenizer has too many tokens (%zu)", n);
    t->kind = kind;
    t->n_vocab = (int32_t)n;
    t->scores = xcalloc(n, sizeof(float));
    t->types = xcalloc(n, 1);
    t->attrs = xcalloc(n, sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        int rc = add_token(t, i, tokens[i], scores ? scores[i] : 0.0f,
                           types ? types[i] : TOKENIZER_TYPE_NORMAL, e);
        if (rc < 0)
            return rc;
    }
    map_rebuild(t, n);
    kind_defaults(t);
    return 0;
}

static int init_pre(struct tokenizer *t, const char *pre, struct err *e)
{
    if (t->kind != TOKENIZER_BPE)
        return 0;
    if (!pre || !*pre)
        pre = "default";
    int add_bos = -1;
    snprintf(t->pre_name, sizeof(t->pre_name), "%s", pre);
    int rc = tok_pretok_init(&t->pre, pre, &t->ignore_merges, &add_bos, &t->clean_spaces, e);
    if (rc < 0)
        return rc;
    if (add_bos >= 0)
        t->add_bos = add_bos;
    if (strcmp(pre, "chatglm-bpe") == 0 || strcmp(pre, "glm4") == 0)
        t->sp.bos = TOKENIZER_NULL;
    if (strcmp(pre, "roberta-bpe") == 0 || strcmp(pre, "jina-v1-en") == 0 ||
        strcmp(pre, "jina-v2-code") == 0)
        t->add_sep = true;
    return 0;
}

// Merge entries "left right": split at the first space at index >= 1.
typedef bool (*merge_at_fn)(const void *ctx, size_t i, struct str *out);

static int init_merges(struct tokenizer *t, size_t n, merge_at_fn at, const void *ctx,
                       struct err *e)
{
    if (t->kind != TOKENIZER_BPE)
        return 0;
    if (n > (size_t)INT32_MAX / 4)
        return err_set(e, ERR_TOO_LARGE, "too many merges (%zu)", n);
    pairs_alloc(t, n);
    struct buf tmp;
    buf_init(&tmp, 0);
    for (size_t i = 0; i < n; i++) {
        struct str m;
        if (!at(ctx, i, &m)) {
            buf_deinit(&tmp);
            return err_set(e, ERR_FORMAT, "tokenizer.ggml.merges[%zu] is not a string", i);
        }
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp)
            continue;  // not a pair: can never apply
        size_t nl = (size_t)(sp - m.ptr), nr = m.len - nl - 1;
        int32_t a = text_intern(t, m.ptr, nl);
        int32_t b = text_intern(t, sp + 1, nr);
        buf_reset(&tmp);
        buf_append(&tmp, m.ptr, nl);
        buf_append(&tmp, sp + 1, nr);
        int32_t r = text_intern(t, tmp.data ? tmp.data : "", tmp.len);
        if (a < 0 || b < 0 || r < 0) {
            buf_deinit(&tmp);
            return err_set(e, ERR_TOO_LARGE, "tokenizer merges are too large");
        }
        pairs_insert(t, a, b, (int32_t)i, r);
    }
    buf_deinit(&tmp);
    return 0;
}

static bool text_is(const struct tokenizer *t, int32_t id, const char *s)
{
    return id >= 0 && id < t->n_vocab && t->text_len[id] == strlen(s) &&
           memcmp(tok_text(t, id), s, t->text_len[id]) == 0;
}

static int32_t find_cstr(const struct tokenizer *t, const char *s)
{
    return tok_lookup_real(t, s, strlen(s));
}

static void force_control(struct tokenizer *t, int32_t id)
{
    if (id >= 0 && !(t->attrs[id] & TOK_ATTR_CONTROL))
        t->attrs[id] = TOK_ATTR_CONTROL | (t->attrs[id] & (TOK_ATTR_LSTRIP | TOK_ATTR_RSTRIP));
}

static void detect_by_text(struct tokenizer *t, int32_t *slot, const char *const *names)
{
    if (*slot != TOKENIZER_NULL)
        return;
    for (size_t i = 0; names[i]; i++) {
        int32_t id = find_cstr(t, names[i]);
        if (id >= 0) {
            *slot = id;
            force_control(t, id);
            return;
        }
    }
}

static void eog_add(struct tokenizer *t, int64_t id)
{
    if (id >= 0 && id < t->n_vocab)
        t->eog[id >> 3] |= (uint8_t)(1u << (id & 7));
}

static int cand_cmp(const void *a, const void *b, void *ctx)
{
    const struct tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->text_len[x] != t->text_len[y])
        return t->text_len[x] > t->text_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static uint32_t cand_bucket(const struct tokenizer *t, int32_t id)
{
    const unsigned char *p = (const unsigned char *)tok_text(t, id);
    return t->text_len[id] >= 2 ? (uint32_t)p[0] << 8 | p[1] : 0x10000u + p[0];
}

// SPM: the set of adjacent character pairs found inside tokens (characters
// split by lead byte as the encoder does). Only hashes are kept: a collision
// merely hides a cut point, it never changes a result.
static void spm_pairs_build(struct tokenizer *t)
{
    size_t n_pairs = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        n_pairs += t->text_len[i];
    uint32_t size = 16;
    while (size < n_pairs * 2 + 16)
        size <<= 1;
    t->spm_pairs = xcalloc(size, sizeof(uint64_t));
    t->spm_pairs_mask = size - 1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = tok_text(t, i);
        size_t n = t->text_len[i];
        size_t a = 0, la = tok_utf8_len((unsigned char)s[0]);
        if (la > n)
            la = n;
        while (a + la < n) {
            size_t b = a + la, lb = tok_utf8_len((unsigned char)s[b]);
            if (lb > n - b)
                lb = n - b;
            uint64_t h = tok_hash(s + a, la + lb) | 1;
            uint32_t k = (uint32_t)(h >> 32) & t->spm_pairs_mask;
            while (t->spm_pairs[k] && t->spm_pairs[k] != h)
                k = (k + 1) & t->spm_pairs_mask;
            t->spm_pairs[k] = h;
            a = b;
            la = lb;
        }
    }
}

static void lowercase_ascii(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
}

// Special ids the metadata left unset, found by their usual texts (and made
// CONTROL tokens).
static void detect_specials(struct tokenizer *t)
{
    static const char *const eot_names[] = {"<|eot_id|>",
                                            "<|im_end|>",
                                            "<|end|>",
                                            "<end_of_turn>",
                                            "<|endoftext|>",
                                            "<EOT>",
                                            "<｜end▁of▁sentence｜>",
                                            NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const pre_names[] = {"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>",
                                            "<PRE>", NULL};
    static const char *const suf_names[] = {"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>",
                                            "<SUF>", NULL};
    static const char *const mid_names[] = {"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>",
                                            "<MID>", NULL};
    static const char *const pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<PAD>", NULL};
    static const char *const rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                            NULL};
    static const char *const sep_names[] = {"<|file_sep|>", NULL};
    detect_by_text(t, &t->sp.eot, eot_names);
    detect_by_text(t, &t->sp.eom, eom_names);
    detect_by_text(t, &t->sp.fim_pre, pre_names);
    detect_by_text(t, &t->sp.fim_suf, suf_names);
    detect_by_text(t, &t->sp.fim_mid, mid_names);
    detect_by_text(t, &t->sp.fim_pad, pad_names);
    detect_by_text(t, &t->sp.fim_rep, rep_names);
    detect_by_text(t, &t->sp.fim_sep, sep_names);
}

// End of generation (spec §7): the special ids, the extra ids from the
// metadata, and the usual end texts.
static void build_eog(struct tokenizer *t, const int64_t *extra_eog, size_t n_extra_eog)
{
    t->eog = xcalloc(((size_t)t->n_vocab + 7) / 8, 1);
    eog_add(t, t->sp.eos);
    eog_add(t, t->sp.eot);
    eog_add(t, t->sp.eom);
    eog_add(t, t->sp.fim_pad);
    eog_add(t, t->sp.fim_rep);
    eog_add(t, t->sp.fim_sep);
    for (size_t i = 0; i < n_extra_eog; i++)
        eog_add(t, extra_eog[i]);
    static const char *const eog_names[] = {"<|eot_id|>",
                                            "<|eom_id|>",
                                            "<|im_end|>",
                                            "<|end|>",
                                            "<end_of_turn>",
                                            "<|endoftext|>",
                                            "<|end_of_text|>",
                                            "<EOT>",
                                            "_<EOT>",
                                            "<｜end▁of▁sentence｜>",
                                            "<end_of_utterance>",
                                            NULL};
    for (size_t i = 0; eog_names[i]; i++) {
        int32_t id = find_cstr(t, eog_names[i]);
        if (id >= 0) {
            eog_add(t, id);
            force_control(t, id);
        }
    }
    // Harmony (gpt-oss): <|end|> separates channels when <|return|> and <|call|> exist.
    int32_t ret = find_cstr(t, "<|return|>"), call = find_cstr(t, "<|call|>"),
            end = find_cstr(t, "<|end|>");
    if (ret >= 0 && call >= 0 && end >= 0 && tokenizer_is_eog(t, ret) && tokenizer_is_eog(t, call))
        t->eog[end >> 3] &= (uint8_t) ~(1u << (end & 7));
}

// Special-token candidates, longest text first, indexed by their first two
// bytes (cand_first/cand_idx) and their lead byte (cand_lead).
static void build_candidates(struct tokenizer *t)
{
    int32_t n = t->n_vocab;
    t->cands = xmalloc(((size_t)n + 1) * sizeof(int32_t));
    t->n_cands = 0;
    for (int32_t i = 0; i < n; i++)
        if (t->attrs[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
            t->cands[t->n_cands++] = i;
    qsort_r(t->cands, t->n_cands, sizeof(int32_t), cand_cmp, t);
    t->cand_first = xcalloc(TOK_CAND_BUCKETS + 1, sizeof(uint32_t));
    for (size_t i = 0; i < t->n_cands; i++) {
        t->cand_first[cand_bucket(t, t->cands[i]) + 1]++;
        t->cand_lead[(unsigned char)tok_text(t, t->cands[i])[0]] = 1;
    }
    for (uint32_t k = 0; k < TOK_CAND_BUCKETS; k++)
        t->cand_first[k + 1] += t->cand_first[k];
    t->cand_idx = xmalloc((t->n_cands + 1) * sizeof(uint32_t));
    uint32_t *fill = xmalloc(TOK_CAND_BUCKETS * sizeof(uint32_t));
    memcpy(fill, t->cand_first, TOK_CAND_BUCKETS * sizeof(uint32_t));
    for (size_t i = 0; i < t->n_cands; i++)
        t->cand_idx[fill[cand_bucket(t, t->cands[i])]++] = (uint32_t)i;
    free(fill);
}

// Per-model strip attributes (llama.cpp sets them by name).
static void strip_attrs(struct tokenizer *t, const char *model_name)
{
    if (strstr(t->pre_name, "jina-v2-de") || strstr(t->pre_name, "jina-v2-es") ||
        strstr(t->pre_name, "jina-v2-code")) {
        int32_t id = find_cstr(t, "<mask>");
        if (id >= 0)
            t->attrs[id] |= TOK_ATTR_LSTRIP;
        return;
    }
    if (!model_name)
        return;
    char *lower = xstrdup(model_name);
    lowercase_ascii(lower);
    if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
        for (size_t i = 0; i < t->n_cands; i++)
            t->attrs[t->cands[i]] |= TOK_ATTR_RSTRIP;
        int32_t id = find_cstr(t, "</s>");
        if (id >= 0)
            t->attrs[id] |= TOK_ATTR_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < 3; i++) {
            id = find_cstr(t, keep[i]);
            if (id >= 0)
                t->attrs[id] &= ~(uint32_t)TOK_ATTR_RSTRIP;
        }
    }
    free(lower);
}

// For each byte: its token (<0xXX> or the one-byte text), and its GPT-2
// byte-level character with that character's token.
static void build_byte_tables(struct tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof(hex), "<0x%02X>", b);
        int32_t id = find_cstr(t, hex);
        if (id < 0) {
            char c = (char)b;
            id = tok_lookup_real(t, &c, 1);
        }
        t->byte_tok[b] = id;
        char u[4];
        size_t ul = utf8_encode(byte_to_cpt((unsigned)b), u);
        memcpy(t->byte_char[b], u, ul);
        t->byte_char[b][2] = (char)ul;
        t->byte_sym[b] = tok_lookup(t, u, ul);
    }
}

// A normal token's bytes: byte-level characters back to bytes (BPE), or
// U+2581 back to a space (SPM, WPM).
static void normal_piece(const struct tokenizer *t, struct buf *pb, const char *s, size_t len)
{
    if (t->kind == TOKENIZER_BPE && !t->spm_bpe) {
        for (size_t k = 0; k < len;) {
            uint32_t cp;
            size_t l = utf8_next(s + k, len - k, &cp);
            int b = cp == 0xFFFFFFFFu ? -1 : cpt_to_byte(cp);
            if (b >= 0)
                buf_append_char(pb, (char)b);
            else
                buf_append(pb, s + k, l);  // not byte-level: keep the text
            k += l;
        }
        return;
    }
    for (size_t k = 0; k < len;) {
        if (k + 3 <= len && memcmp(s + k, "\xe2\x96\x81", 3) == 0) {
            buf_append_char(pb, ' ');
            k += 3;
        } else {
            buf_append_char(pb, s[k++]);
        }
    }
}

// Appends token i's decoded bytes to pb.
static void token_piece(const struct tokenizer *t, struct buf *pb, int32_t i)
{
    const char *s = tok_text(t, i);
    size_t len = t->text_len[i];
    uint32_t a = t->attrs[i];
    if (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_USER_DEFINED)) {
        buf_append(pb, s, len);
    } else if (a & TOK_ATTR_NORMAL) {
        normal_piece(t, pb, s, len);
    } else if ((a & TOK_ATTR_BYTE) && (t->kind != TOKENIZER_BPE || t->spm_bpe)) {
        unsigned v;
        char tail;
        if (len == 6 && sscanf(s, "<0x%2x%c", &v, &tail) == 2 && tail == '>')
            buf_append_char(pb, (char)v);
    }
}

// Decoded pieces of all tokens, in one blob.
static int build_pieces(struct tokenizer *t)
{
    int32_t n = t->n_vocab;
    struct buf pb;
    buf_init(&pb, 0);
    t->piece_off = xmalloc((size_t)n * sizeof(uint32_t));
    t->piece_len = xmalloc((size_t)n * sizeof(uint32_t));
    for (int32_t i = 0; i < n; i++) {
        size_t start = pb.len;
        token_piece(t, &pb, i);
        t->piece_off[i] = (uint32_t)start;
        t->piece_len[i] = (uint32_t)(pb.len - start);
        if (pb.len > TOK_MAX_BLOB) {
            buf_deinit(&pb);
            return ERR_TOO_LARGE;
        }
    }
    t->piece_blob = buf_take(&pb);
    return 0;
}

// Final steps once ids and flags are known: type fix-ups, EOG set, special
// candidates, decoded pieces, byte tables.
static int finalize(struct tokenizer *t, const int64_t *extra_eog, size_t n_extra_eog,
                    const char *model_name)
{
    // CONTROL tokens named "unused" are also UNUSED.
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->attrs[i] & TOK_ATTR_CONTROL) && strstr(tok_text(t, i), "unused"))
            t->attrs[i] |= TOK_ATTR_UNUSED;
    detect_specials(t);
    build_eog(t, extra_eog, n_extra_eog);
    build_candidates(t);
    if (t->kind == TOKENIZER_SPM)
        spm_pairs_build(t);
    strip_attrs(t, model_name);
    build_byte_tables(t);
    return build_pieces(t);
}

void tokenizer_free(struct tokenizer *t)
{
    if (!t)
        return;
    free(t->text_blob);
    free(t->text_off);
    free(t->text_len);
    free(t->scores);
    free(t->types);
    free(t->attrs);
    free(t->map.slots);
    free(t->piece_blob);
    free(t->piece_off);
    free(t->piece_len);
    free(t->pairs.slots);
    free(t->cands);
    free(t->cand_first);
    free(t->cand_idx);
    free(t->spm_pairs);
    free(t->eog);
    tok_pretok_deinit(&t->pre);
    free(t);
}

// ---------------------------------------------------------------------------
// From arrays.

static bool desc_merge_at(const void *ctx, size_t i, struct str *out)
{
    const struct tokenizer_desc *d = ctx;
    *out = d->merges[i];
    return true;
}

int tokenizer_build(struct tokenizer **out, const struct tokenizer_desc *d, struct err *e)
{
    struct tokenizer *t = xcalloc(1, sizeof(*t));
    int rc = init_tokens(t, d->kind, d->n_tokens, d->tokens, d->scores, d->types, e);
    if (rc == 0)
        rc = init_pre(t, d->pre, e);
    if (rc == 0)
        rc = init_merges(t, d->merges ? d->n_merges : 0, desc_merge_at, d, e);
    if (rc < 0)
        goto fail;
    if (d->bos.set)
        t->sp.bos = d->bos.id >= 0 && d->bos.id < t->n_vocab ? d->bos.id : TOKENIZER_NULL;
    if (d->eos.set)
        t->sp.eos = d->eos.id >= 0 && d->eos.id < t->n_vocab ? d->eos.id : TOKENIZER_NULL;
    if (d->unk.set)
        t->sp.unk = d->unk.id >= 0 && d->unk.id < t->n_vocab ? d->unk.id : TOKENIZER_NULL;
    if (d->add_bos != TOKENIZER_FLAG_DEFAULT)
        t->add_bos = d->add_bos == TOKENIZER_FLAG_ON;
    if (d->add_eos != TOKENIZER_FLAG_DEFAULT)
        t->add_eos = d->add_eos == TOKENIZER_FLAG_ON;
    if (d->add_space_prefix != TOKENIZER_FLAG_DEFAULT)
        t->add_space_prefix = d->add_space_prefix == TOKENIZER_FLAG_ON;
    rc = finalize(t, NULL, 0, NULL);
    if (rc < 0) {
        err_set(e, rc, "tokenizer pieces are too large");
        goto fail;
    }
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return rc;
}

// ---------------------------------------------------------------------------
// From GGUF.

static bool gguf_merge_at(const void *ctx, size_t i, struct str *out)
{
    return gguf_arr_str(ctx, i, out);
}

static void get_id(const struct gguf *g, struct tokenizer *t, const char *key, int32_t *slot)
{
    uint64_t v;
    if (gguf_get_u64(g, key, &v) && v < (uint64_t)t->n_vocab)
        *slot = (int32_t)v;
}

static void get_flag(const struct gguf *g, const char *key, bool *slot)
{
    bool b;
    if (gguf_get_bool(g, key, &b))
        *slot = b;
}

// tokenizer.ggml.model: llama (SentencePiece), gpt2 (byte-level BPE), gemma4
// (SentencePiece-style BPE) or bert (WordPiece). Ollama's Gemma 4 files say
// llama with the gemma4 pre-tokenizer and merges: Ollama reads them as
// gemma4 (llama/compat handle_gemma4), and so do we.
static int gguf_kind(const struct gguf *g, enum tokenizer_kind *kind, bool *spm_bpe, struct err *e)
{
    struct str model, pre = {0};
    if (!gguf_get_str(g, "tokenizer.ggml.model", &model))
        return err_set(e, ERR_FORMAT, "missing tokenizer.ggml.model");
    gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    *spm_bpe = str_eq_cstr(model, "gemma4") ||
               (str_eq_cstr(model, "llama") && str_eq_cstr(pre, "gemma4") &&
                gguf_find(g, "tokenizer.ggml.merges"));
    if (*spm_bpe)
        *kind = TOKENIZER_BPE;
    else if (str_eq_cstr(model, "llama"))
        *kind = TOKENIZER_SPM;
    else if (str_eq_cstr(model, "gpt2"))
        *kind = TOKENIZER_BPE;
    else if (str_eq_cstr(model, "bert"))
        *kind = TOKENIZER_WPM;
    else
        return err_set(e, ERR_UNSUPPORTED, "unsupported tokenizer model '%.*s'", (int)model.len,
                       model.ptr);
    return 0;
}

// The per-token arrays of the metadata: texts, and optional scores and types.
struct gguf_tokens {
    uint64_t n;
    const struct gguf_kv *kv_tok, *kv_sc, *kv_ty;
    struct str *tokens;
    float *scores;   // NULL without tokenizer.ggml.scores
    int32_t *types;  // NULL without tokenizer.ggml.token_type
};

// Finds the arrays and checks their shapes (scores and types, when present,
// have one entry per token).
static int gguf_tokens_find(struct gguf_tokens *gt, const struct gguf *g, struct err *e)
{
    const struct gguf_kv *kv_tok = gguf_find(g, "tokenizer.ggml.tokens");
    if (!kv_tok || kv_tok->val.type != GGUF_VAL_ARRAY || kv_tok->val.arr_type != GGUF_VAL_STRING)
        return err_set(e, ERR_FORMAT, "missing tokenizer.ggml.tokens");
    uint64_t n = kv_tok->val.arr_count;
    if (n == 0 || n > TOK_MAX_TOKENS)
        return err_set(e, ERR_FORMAT, "tokenizer.ggml.tokens has %llu entries",
                       (unsigned long long)n);
    const struct gguf_kv *kv_sc = gguf_find(g, "tokenizer.ggml.scores");
    const struct gguf_kv *kv_ty = gguf_find(g, "tokenizer.ggml.token_type");
    if (kv_sc && (kv_sc->val.type != GGUF_VAL_ARRAY || kv_sc->val.arr_count != n))
        return err_set(e, ERR_FORMAT, "tokenizer.ggml.scores: expected %llu entries",
                       (unsigned long long)n);
    if (kv_ty && (kv_ty->val.type != GGUF_VAL_ARRAY || kv_ty->val.arr_count != n))
        return err_set(e, ERR_FORMAT, "tokenizer.ggml.token_type: expected %llu entries",
                       (unsigned long long)n);
    *gt = (struct gguf_tokens){.n = n, .kv_tok = kv_tok, .kv_sc = kv_sc, .kv_ty = kv_ty};
    return 0;
}

// Reads every entry of the arrays found by gguf_tokens_find. Types outside
// 0..6 read as 0.
static int gguf_tokens_read(struct gguf_tokens *gt, struct err *e)
{
    uint64_t n = gt->n;
    gt->tokens = xmalloc(n * sizeof(*gt->tokens));
    gt->scores = gt->kv_sc ? xmalloc(n * sizeof(float)) : NULL;
    gt->types = gt->kv_ty ? xmalloc(n * sizeof(int32_t)) : NULL;
    for (uint64_t i = 0; i < n; i++) {
        if (!gguf_arr_str(gt->kv_tok, i, &gt->tokens[i]))
            return err_set(e, ERR_FORMAT, "tokenizer.ggml.tokens[%llu] is not a string",
                           (unsigned long long)i);
        if (gt->scores && !gguf_arr_f32(gt->kv_sc, i, &gt->scores[i]))
            return err_set(e, ERR_FORMAT, "tokenizer.ggml.scores must be an array of floats");
        int64_t ty;
        if (gt->types) {
            if (!gguf_arr_i64(gt->kv_ty, i, &ty))
                return err_set(e, ERR_FORMAT,
                               "tokenizer.ggml.token_type must be an array of integers");
            gt->types[i] = ty < 0 || ty > 6 ? 0 : (int32_t)ty;
        }
    }
    return 0;
}

static void gguf_tokens_deinit(struct gguf_tokens *gt)
{
    free(gt->tokens);
    free(gt->scores);
    free(gt->types);
}

// Whether Ollama's Llama 3 metadata fix-up applies (spec §7): a llama BPE
// vocabulary with <|eot_id|> at 128009 and Llama 3's header tokens, by id or
// in the chat template.
static bool needs_llama3_fix(const struct gguf *g, const struct tokenizer *t)
{
    if (t->kind != TOKENIZER_BPE || !str_eq_cstr(gguf_architecture(g), "llama") ||
        !text_is(t, 128009, "<|eot_id|>"))
        return false;
    struct str tmpl = {0};
    bool has_tmpl = gguf_get_str(g, "tokenizer.chat_template", &tmpl);
    bool mentions = false;
    if (has_tmpl && tmpl.len) {
        char *c = str_dup(tmpl);
        mentions = strstr(c, "<|start_header_id|>") || strstr(c, "<|eot_id|>");
        free(c);
    }
    return text_is(t, 128006, "<|start_header_id|>") || mentions;
}

// Ollama's mistral3 files (llama/compat detect_ollama_mistral3): embedded
// vision tensors (v.*, mm.*) or Ollama's names of the YaRN / temperature keys.
static bool ollama_mistral3(const struct gguf *g)
{
    if (!str_eq_cstr(gguf_architecture(g), "mistral3"))
        return false;
    if (gguf_find(g, "mistral3.rope.scaling.beta_fast") ||
        gguf_find(g, "mistral3.rope.scaling.mscale_all_dim") ||
        gguf_find(g, "mistral3.rope.scaling_beta"))
        return true;
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        struct str n = gguf_tensor_at(g, i)->name;
        if (str_starts_with(n, "v.") || str_starts_with(n, "mm."))
            return true;
    }
    return false;
}

// The pre-tokenizer name: tokenizer.ggml.pre, with the Llama 3, gpt-oss and
// mistral3 fix-ups applied.
static void gguf_pre_name(const struct gguf *g, const struct tokenizer *t, bool llama3_fix,
                          char pre[64])
{
    pre[0] = '\0';
    struct str s;
    if (gguf_get_str(g, "tokenizer.ggml.pre", &s))
        snprintf(pre, 64, "%.*s", (int)(s.len < 63 ? s.len : 63), s.ptr);
    if (t->spm_bpe)  // llama.cpp: the gemma4 model always has the gemma4 pre-tokenizer
        snprintf(pre, 64, "gemma4");
    if (llama3_fix && (!pre[0] || strcmp(pre, "default") == 0))
        snprintf(pre, 64, "llama-bpe");
    // Ollama's gpt-oss files ("gptoss") keep the default marker although the
    // o200k vocabulary needs the gpt-4o pre-tokenizer; Ollama forces it
    // (llama/compat handle_gptoss), and so do we.
    if (t->kind == TOKENIZER_BPE && str_eq_cstr(gguf_architecture(g), "gptoss"))
        snprintf(pre, 64, "gpt-4o");
    // Ollama's mistral3 files may leave the pre-tokenizer out (or "default");
    // Ollama sets tekken then (llama/compat handle_mistral3), and so do we.
    if (t->kind == TOKENIZER_BPE && (!pre[0] || strcmp(pre, "default") == 0) && ollama_mistral3(g))
        snprintf(pre, 64, "tekken");
}

static int gguf_merges(const struct gguf *g, struct tokenizer *t, struct err *e)
{
    if (t->kind != TOKENIZER_BPE)
        return 0;
    const struct gguf_kv *kv_m = gguf_find(g, "tokenizer.ggml.merges");
    if (kv_m && (kv_m->val.type != GGUF_VAL_ARRAY || kv_m->val.arr_type != GGUF_VAL_STRING))
        return err_set(e, ERR_FORMAT, "tokenizer.ggml.merges must be an array of strings");
    return init_merges(t, kv_m ? (size_t)kv_m->val.arr_count : 0, gguf_merge_at, kv_m, e);
}

// Special ids from the metadata, in this order: a later key overrides an
// earlier one for the same slot (the misspelt "seperator" and the fim_* keys).
static const struct {
    const char *key;
    size_t slot;  // offset in struct tokenizer_special
} special_keys[] = {
    {"tokenizer.ggml.bos_token_id", offsetof(struct tokenizer_special, bos)},
    {"tokenizer.ggml.eos_token_id", offsetof(struct tokenizer_special, eos)},
    {"tokenizer.ggml.eot_token_id", offsetof(struct tokenizer_special, eot)},
    {"tokenizer.ggml.eom_token_id", offsetof(struct tokenizer_special, eom)},
    {"tokenizer.ggml.unknown_token_id", offsetof(struct tokenizer_special, unk)},
    {"tokenizer.ggml.separator_token_id", offsetof(struct tokenizer_special, sep)},
    {"tokenizer.ggml.seperator_token_id", offsetof(struct tokenizer_special, sep)},
    {"tokenizer.ggml.padding_token_id", offsetof(struct tokenizer_special, pad)},
    {"tokenizer.ggml.cls_token_id", offsetof(struct tokenizer_special, cls)},
    {"tokenizer.ggml.mask_token_id", offsetof(struct tokenizer_special, mask)},
    {"tokenizer.ggml.prefix_token_id", offsetof(struct tokenizer_special, fim_pre)},
    {"tokenizer.ggml.suffix_token_id", offsetof(struct tokenizer_special, fim_suf)},
    {"tokenizer.ggml.middle_token_id", offsetof(struct tokenizer_special, fim_mid)},
    {"tokenizer.ggml.fim_pre_token_id", offsetof(struct tokenizer_special, fim_pre)},
    {"tokenizer.ggml.fim_suf_token_id", offsetof(struct tokenizer_special, fim_suf)},
    {"tokenizer.ggml.fim_mid_token_id", offsetof(struct tokenizer_special, fim_mid)},
    {"tokenizer.ggml.fim_pad_token_id", offsetof(struct tokenizer_special, fim_pad)},
    {"tokenizer.ggml.fim_rep_token_id", offsetof(struct tokenizer_special, fim_rep)},
    {"tokenizer.ggml.fim_sep_token_id", offsetof(struct tokenizer_special, fim_sep)},
};

// Special ids and flags from the metadata over the kind's defaults. The Llama 3
// fix-up ends generation at <|eot_id|> where eos/eot were unset or
// <|end_of_text|>.
static void gguf_specials(const struct gguf *g, struct tokenizer *t, bool llama3_fix)
{
    for (size_t i = 0; i < sizeof(special_keys) / sizeof(special_keys[0]); i++)
        get_id(g, t, special_keys[i].key, (int32_t *)((char *)&t->sp + special_keys[i].slot));
    if (t->kind == TOKENIZER_WPM && t->sp.cls == TOKENIZER_NULL)
        t->sp.cls = t->sp.bos;
    get_flag(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    get_flag(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    get_flag(g, "tokenizer.ggml.add_sep_token", &t->add_sep);
    get_flag(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    if (t->kind == TOKENIZER_WPM) {
        get_flag(g, "tokenizer.ggml.normalizer.lowercase", &t->wpm_lowercase);
        t->wpm_strip_accents = t->wpm_lowercase;
        get_flag(g, "tokenizer.ggml.normalizer.strip_accents", &t->wpm_strip_accents);
    }
    if (llama3_fix) {
        if (t->sp.eos == TOKENIZER_NULL || t->sp.eos == 128001)
            t->sp.eos = 128009;
        if (t->sp.eot == TOKENIZER_NULL || t->sp.eot == 128001)
            t->sp.eot = 128009;
    }
}

// Extra end-of-generation ids: tokenizer.ggml.eos_token_ids (when it is no
// longer than the vocabulary), plus <|eot_id|> for the Llama 3 fix-up.
// Returns the array (NULL when empty) and its length in *n_extra.
// Ollama's gemma3n files (llama/compat detect_ollama_gemma3n): token_embd
// holds the multimodal vocabulary, more rows than per_layer_token_embd.
// Returns the text vocabulary's size (the per-layer table's rows), or 0.
static uint64_t ollama_gemma3n_vocab(const struct gguf *g)
{
    const struct gguf_tensor *te = gguf_tensor_find(g, "token_embd.weight"),
                             *pe = gguf_tensor_find(g, "per_layer_token_embd.weight");
    if (!str_eq_cstr(gguf_architecture(g), "gemma3n") || !te || !pe || te->ne[1] == pe->ne[1])
        return 0;
    return (uint64_t)pe->ne[1];
}

// What Ollama's llama.cpp makes of those files (handle_gemma3n): the token
// arrays cut to the text vocabulary, <0xXX> tokens BYTE and <unused…> ones
// NORMAL, and <end_of_turn> (106) ends generation beside the EOS ids.
static void ollama_gemma3n_tokens(struct gguf_tokens *gt, uint64_t n_text)
{
    if (n_text == 0 || n_text >= gt->n)
        return;
    gt->n = n_text;
    for (uint64_t i = 0; gt->types && i < gt->n; i++) {
        struct str tk = gt->tokens[i];
        if (tk.len == 6 && !memcmp(tk.ptr, "<0x", 3) && tk.ptr[5] == '>')
            gt->types[i] = TOKENIZER_TYPE_BYTE;
        else if (str_starts_with(tk, "<unused"))
            gt->types[i] = TOKENIZER_TYPE_NORMAL;
    }
}

static int64_t *gguf_extra_eog(const struct gguf *g, const struct tokenizer *t, bool llama3_fix,
                               size_t *n_extra)
{
    int64_t *extra = NULL;
    size_t n = 0;
    const struct gguf_kv *kv_eos = gguf_find(g, "tokenizer.ggml.eos_token_ids");
    if (kv_eos && kv_eos->val.type == GGUF_VAL_ARRAY &&
        kv_eos->val.arr_count <= (uint64_t)t->n_vocab) {
        extra = xmalloc((kv_eos->val.arr_count + 1) * sizeof(int64_t));
        for (uint64_t i = 0; i < kv_eos->val.arr_count; i++)
            if (gguf_arr_i64(kv_eos, i, &extra[n]))
                n++;
    }
    if (llama3_fix) {
        if (!extra)
            extra = xmalloc(sizeof(int64_t));
        else
            extra = xrealloc(extra, (n + 1) * sizeof(int64_t));
        extra[n++] = 128009;
    }
    if (ollama_gemma3n_vocab(g) > 0) {  // 1 (EOS) and 106 (<end_of_turn>)
        extra = xrealloc(extra, (n + 2) * sizeof(int64_t));
        extra[n++] = 1;
        extra[n++] = 106;
    }
    *n_extra = n;
    return extra;
}

int tokenizer_load(struct tokenizer **out, const struct gguf *g, struct err *e)
{
    enum tokenizer_kind kind = TOKENIZER_SPM;
    struct gguf_tokens gt = {0};
    bool spm_bpe = false;
    int rc = gguf_kind(g, &kind, &spm_bpe, e);
    if (rc < 0 || (rc = gguf_tokens_find(&gt, g, e)) < 0)
        return rc;
    struct tokenizer *t = xcalloc(1, sizeof(*t));
    t->spm_bpe = spm_bpe;
    int64_t *extra = NULL;
    size_t n_extra = 0;
    if ((rc = gguf_tokens_read(&gt, e)) < 0)
        goto out;
    ollama_gemma3n_tokens(&gt, ollama_gemma3n_vocab(g));
    rc = init_tokens(t, kind, (size_t)gt.n, gt.tokens, gt.scores, gt.types, e);
    if (rc < 0)
        goto out;
    bool llama3_fix = needs_llama3_fix(g, t);
    char pre[64];
    gguf_pre_name(g, t, llama3_fix, pre);
    if ((rc = init_pre(t, pre, e)) < 0 || (rc = gguf_merges(g, t, e)) < 0)
        goto out;
    gguf_specials(g, t, llama3_fix);
    if (t->spm_bpe)  // llama.cpp overrides add_bos_token false for Gemma 4
        t->add_bos = true;
    extra = gguf_extra_eog(g, t, llama3_fix, &n_extra);
    char name[128] = "";
    struct str s;
    if (gguf_get_str(g, "general.name", &s))
        snprintf(name, sizeof(name), "%.*s", (int)(s.len < 127 ? s.len : 127), s.ptr);
    rc = finalize(t, extra, n_extra, name);
    if (rc < 0)
        err_set(e, rc, "tokenizer pieces are too large");
out:
    gguf_tokens_deinit(&gt);
    free(extra);
    if (rc < 0) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

// ---------------------------------------------------------------------------
// Accessors.

enum tokenizer_kind tokenizer_kind(const struct tokenizer *t)
{
    return t->kind;
}
const char *tokenizer_pre_name(const struct tokenizer *t)
{
    return t->pre_name;
}
int32_t tokenizer_n_vocab(const struct tokenizer *t)
{
    return t->n_vocab;
}
const struct tokenizer_special *tokenizer_special_ids(const struct tokenizer *t)
{
    return &t->sp;
}
bool tokenizer_add_bos(const struct tokenizer *t)
{
    return t->add_bos;
}
bool tokenizer_add_eos(const struct tokenizer *t)
{
    return t->add_eos;
}
bool tokenizer_add_space_prefix(const struct tokenizer *t)
{
    return t->add_space_prefix;
}

struct str tokenizer_token_text(const struct tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab)
        return (struct str){"", 0};
    return (struct str){tok_text(t, id), t->text_len[id]};
}

int tokenizer_token_type(const struct tokenizer *t, int32_t id)
{
    return id < 0 || id >= t->n_vocab ? -1 : t->types[id];
}

float tokenizer_token_score(const struct tokenizer *t, int32_t id)
{
    return id < 0 || id >= t->n_vocab ? 0.0f : t->scores[id];
}

int32_t tokenizer_find(const struct tokenizer *t, const char *s, size_t n)
{
    return tok_lookup_real(t, s, n);
}

bool tokenizer_is_control(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->attrs[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN));
}

bool tokenizer_is_eog(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->eog[id >> 3] >> (id & 7)) & 1;
}

size_t tokenizer_eog_ids(const struct tokenizer *t, int32_t *ids, size_t n)
{
    size_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (tokenizer_is_eog(t, i)) {
            if (k < n)
                ids[k] = i;
            k++;
        }
    return k;
}

struct str tokenizer_piece(const struct tokenizer *t, int32_t id, bool render_special)
{
    if (id < 0 || id >= t->n_vocab)
        return (struct str){"", 0};
    if (!render_special && (t->attrs[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))
        return (struct str){"", 0};
    return (struct str){t->piece_blob + t->piece_off[id], t->piece_len[id]};
}

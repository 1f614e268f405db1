// WordPiece (spec §8), as llama.cpp's llm_tokenizer_wpm: every code point
// replaced by the first code point of its canonical decomposition (so "é"
// becomes "e" and a Hangul syllable its leading consonant jamo), control
// characters dropped, lower-casing, punctuation, ASCII symbols and CJK
// ideographs as words of their own. Combining marks that arrive as code
// points of their own (decomposed accents, Devanagari and Arabic vowel
// signs, the variation selector and keycap of emoji) are kept in their word,
// which then usually matches nothing and becomes [UNK] (unlike Hugging
// Face's BertTokenizer, which strips them). Then
// greedy longest match per word against the "phantom space" vocabulary
// (word-initial pieces carry a U+2581 prefix). A word with an unmatched rest
// becomes [UNK].
#include "tokenizer/internal.h"

#include <string.h>

static bool is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// First code point of the full canonical decomposition; a Hangul syllable
// decomposes algorithmically into jamo, the first being its leading
// consonant U+1100 + (c - U+AC00) / 588.
static uint32_t nfd_first(uint32_t c)
{
    if (c < 0xC0)
        return c;
    if (c >= 0xAC00 && c <= 0xD7A3)
        return 0x1100 + (c - 0xAC00) / 588;
    return utf8_nfd_first(c);
}

// Greedy longest match of "▁" + word; the word is b->data[3 .. len).
static int wpm_word(const struct tokenizer *t, const struct buf *b, struct tokenizer_ids *out)
{
    size_t n = b->len;
    if (n <= 3)
        return 0;
    size_t mark = out->len;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > t->max_token_len ? i + t->max_token_len : n;
        int32_t id = -1;
        for (; j > i; j--) {
            id = tok_lookup_real(t, b->data + i, j - i);
            if (id >= 0)
                break;
        }
        if (id < 0) {
            out->len = mark;
            break;
        }
        if (tokenizer_ids_push(out, id) < 0)
            return ERR_NOMEM;
        i = j;
    }
    if (out->len == mark && t->sp.unk >= 0 && tokenizer_ids_push(out, t->sp.unk) < 0)
        return ERR_NOMEM;
    return 0;
}

int tok_wpm_encode(const struct tokenizer *t, struct tok_scratch *s, const char *text, size_t len,
                   struct tokenizer_ids *out, struct err *e)
{
    struct buf *w = &s->text;
    buf_reset(w);
    buf_append(w, "\xe2\x96\x81", 3);
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        size_t l;
        uint32_t c = utf8_decode((const unsigned char *)text + i, len - i, &l);
        if (c == UTF8_INVALID)
            c = 0xFFFD;
        i += l;
        if (t->wpm_strip_accents)
            c = nfd_first(c);
        if (tok_is_ws(c)) {
            rc = wpm_word(t, w, out);
            w->len = 3;
            continue;
        }
        enum utf8_category cat = utf8_category(c);
        if (c == 0 || c == 0xFFFD || cat == UTF8_CAT_CC || cat == UTF8_CAT_CF ||
            cat == UTF8_CAT_CO || cat == UTF8_CAT_CS)
            continue;
        if (t->wpm_lowercase)
            c = utf8_tolower(c);
        bool punct = cat >= UTF8_CAT_PC && cat <= UTF8_CAT_PO;
        bool sym = cat >= UTF8_CAT_SM && cat <= UTF8_CAT_SO;
        if (punct || (sym && c < 0x7F) || is_cjk(c)) {
            rc = wpm_word(t, w, out);
            w->len = 3;
            if (rc == 0) {
                buf_append_utf8(w, c);
                rc = wpm_word(t, w, out);
                w->len = 3;
            }
            continue;
        }
        buf_append_utf8(w, c);
    }
    if (rc == 0)
        rc = wpm_word(t, w, out);
    return rc < 0 ? err_set(e, rc, NULL) : 0;
}

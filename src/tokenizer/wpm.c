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

#include <utf8proc.h>

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
    utf8proc_int32_t buf[8];
    int bound = 0;
    utf8proc_ssize_t n =
        utf8proc_decompose_char((utf8proc_int32_t)c, buf, 8, UTF8PROC_DECOMPOSE, &bound);
    return n >= 1 ? (uint32_t)buf[0] : c;
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
        utf8proc_int32_t cp;
        utf8proc_ssize_t l =
            utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &cp);
        if (l <= 0) {
            l = 1;
            cp = 0xFFFD;
        }
        i += (size_t)l;
        uint32_t c = (uint32_t)cp;
        if (t->wpm_strip_accents)
            c = nfd_first(c);
        if (tok_is_ws(c)) {
            rc = wpm_word(t, w, out);
            w->len = 3;
            continue;
        }
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
        if (c == 0 || c == 0xFFFD || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
            cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS)
            continue;
        if (t->wpm_lowercase)
            c = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
        bool punct = cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
        bool sym = cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO;
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

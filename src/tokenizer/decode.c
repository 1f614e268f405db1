// Decoding (spec §4.3, §5.4): whole sequences as llama.cpp's detokenize, and
// a streaming decoder that holds back an unfinished UTF-8 character so that
// the text it emits piece by piece concatenates to the full decode.
#include "tokenizer/tokenizer.h"

#include <string.h>

#include "tokenizer/internal.h"

int tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, bool remove_special,
                     bool render_special, struct buf *out, struct err *e)
{
    bool remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->sp.bos && t->sp.bos >= 0) {
        remove_space = false;
        ids++;
        n--;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->sp.eos && t->sp.eos >= 0)
        n--;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return err_set(e, ERR_RANGE, "token id %d is out of range (vocabulary of %d)",
                           (int)ids[i], (int)t->n_vocab);
        struct str p = tokenizer_piece(t, ids[i], render_special);
        if (remove_space && p.len > 0 && p.ptr[0] == ' ') {
            p.ptr++;
            p.len--;
        }
        remove_space = false;
        if (buf_append(out, p.ptr, p.len) < 0)
            return err_set(e, ERR_TOO_LARGE, "decoded text is too large");
    }
    return 0;
}

void tokenizer_stream_init(struct tokenizer_stream *s, const struct tokenizer *t,
                           bool render_special, bool strip_leading_space)
{
    memset(s, 0, sizeof(*s));
    s->t = t;
    s->render_special = render_special;
    s->first = true;
    s->strip_space = strip_leading_space;
}

// Length of the incomplete (but so far valid) UTF-8 sequence at the end of
// p[0..n), 0 if the text ends on a character boundary or in invalid bytes.
static size_t incomplete_tail(const unsigned char *p, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = p[n - back];
        if ((c & 0xC0) == 0x80)
            continue;  // continuation byte: keep looking for the lead
        size_t need = c >= 0xF0 && c < 0xF5   ? 4
                      : c >= 0xE0 && c < 0xF0 ? 3
                      : c >= 0xC2 && c < 0xE0 ? 2
                                              : 1;
        return need > back ? back : 0;
    }
    return 0;
}

static int stream_emit(struct tokenizer_stream *s, const char *p, size_t n, struct buf *out,
                       struct err *e)
{
    // pending + p, with the unfinished tail kept back.
    char tmp[8];
    size_t k = s->n_pending;
    memcpy(tmp, s->pending, k);
    size_t fill = n < sizeof(tmp) - k ? n : sizeof(tmp) - k;
    memcpy(tmp + k, p, fill);
    size_t total = k + n;
    // The tail lies within the last 3 bytes of pending + p.
    size_t tail;
    if (n >= 3) {
        tail = incomplete_tail((const unsigned char *)p, n);
    } else {
        tail = incomplete_tail((const unsigned char *)tmp, k + n);
    }
    size_t emit = total - tail;
    // Emit pending bytes first, then the part of p.
    size_t from_pending = emit < k ? emit : k;
    if (buf_append(out, s->pending, from_pending) < 0)
        return err_set(e, ERR_TOO_LARGE, "decoded text is too large");
    if (emit > k && buf_append(out, p, emit - k) < 0)
        return err_set(e, ERR_TOO_LARGE, "decoded text is too large");
    // Keep the tail.
    char keep[8];
    size_t nk = 0;
    for (size_t i = emit; i < total; i++)
        keep[nk++] = i < k ? s->pending[i] : p[i - k];
    memcpy(s->pending, keep, nk);
    s->n_pending = nk;
    return 0;
}

int tokenizer_stream_push(struct tokenizer_stream *s, int32_t id, struct buf *out, struct err *e)
{
    const struct tokenizer *t = s->t;
    if (id < 0 || id >= t->n_vocab)
        return err_set(e, ERR_RANGE, "token id %d is out of range (vocabulary of %d)", (int)id,
                       (int)t->n_vocab);
    struct str p = tokenizer_piece(t, id, s->render_special);
    if (s->first && s->strip_space && p.len > 0 && p.ptr[0] == ' ') {
        p.ptr++;
        p.len--;
    }
    s->first = false;
    if (p.len == 0)
        return 0;
    return stream_emit(s, p.ptr, p.len, out, e);
}

int tokenizer_stream_flush(struct tokenizer_stream *s, struct buf *out, struct err *e)
{
    int rc = 0;
    if (s->n_pending && buf_append(out, s->pending, s->n_pending) < 0)
        rc = err_set(e, ERR_TOO_LARGE, "decoded text is too large");
    s->n_pending = 0;
    return rc;
}

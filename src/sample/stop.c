// Stop sequences on the detokenized output, streaming-safe: text is held back while it
// could still be the beginning of a stop string (or of a UTF-8 character), so the client
// never sees a stop string or half of one. Matching is on bytes, across piece boundaries.
#include "sample/internal.h"

#include <stdlib.h>
#include <string.h>

struct sample_stop {
    char **stops;
    size_t *lens;
    size_t n;
    struct buf pending;
    bool stopped;
};

int sample_stop_new(struct sample_stop **out, const char *const *stops, size_t n, struct err *e)
{
    (void)e;
    struct sample_stop *st = xcalloc(1, sizeof(*st));
    st->stops = xcalloc(n + 1, sizeof(char *));
    st->lens = xcalloc(n + 1, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0])
            continue;
        st->stops[st->n] = xstrdup(stops[i]);
        st->lens[st->n] = strlen(stops[i]);
        st->n++;
    }
    buf_init(&st->pending, 0);
    *out = st;
    return 0;
}

void sample_stop_free(struct sample_stop *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free(st->stops[i]);
    free(st->stops);
    free(st->lens);
    buf_deinit(&st->pending);
    free(st);
}

bool sample_stop_stopped(const struct sample_stop *st)
{
    return st->stopped;
}

// Length of the longest prefix of s[0..n) not ending inside a UTF-8 sequence.
static size_t utf8_cut(const char *s, size_t n)
{
    size_t back = 0;
    while (back < 3 && back < n && ((uint8_t)s[n - 1 - back] & 0xC0) == 0x80)
        back++;
    if (back == n)
        return n;  // only continuation bytes: nothing to wait for
    uint8_t lead = (uint8_t)s[n - 1 - back];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (lead >= 0xF8 || need == 1)
        return n;
    return back + 1 < need ? n - 1 - back : n;
}

// Drops the first k bytes of the pending buffer.
static void pending_consume(struct buf *b, size_t k)
{
    memmove(b->data, b->data + k, b->len - k);
    b->len -= k;
    b->data[b->len] = '\0';
}

int sample_stop_feed(struct sample_stop *st, const char *piece, size_t len, struct buf *out)
{
    if (st->stopped)
        return 1;
    int rc = buf_append(&st->pending, piece, len);
    if (rc < 0)
        return rc;
    const char *p = st->pending.data ? st->pending.data : "";
    size_t n = st->pending.len;
    // earliest complete match of any stop string
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < st->n; i++) {
        const char *m = memmem(p, n, st->stops[i], st->lens[i]);
        if (m && (size_t)(m - p) < best)
            best = (size_t)(m - p);
    }
    if (best != SIZE_MAX) {
        rc = buf_append(out, p, best);
        st->stopped = true;
        buf_reset(&st->pending);
        return rc < 0 ? rc : 1;
    }
    // hold the longest suffix that is a proper prefix of some stop string
    size_t hold = 0;
    for (size_t i = 0; i < st->n; i++) {
        size_t max = st->lens[i] - 1 < n ? st->lens[i] - 1 : n;
        for (size_t k = max; k > hold; k--) {
            if (memcmp(p + n - k, st->stops[i], k) == 0) {
                hold = k;
                break;
            }
        }
    }
    size_t emit = utf8_cut(p, n - hold);
    if (emit) {
        rc = buf_append(out, p, emit);
        if (rc < 0)
            return rc;
        pending_consume(&st->pending, emit);
    }
    return 0;
}

int sample_stop_flush(struct sample_stop *st, struct buf *out)
{
    if (st->stopped || st->pending.len == 0)
        return 0;
    int rc = buf_append(out, st->pending.data, st->pending.len);
    buf_reset(&st->pending);
    return rc < 0 ? rc : 0;
}

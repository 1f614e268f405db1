// Built-in templates and their autodetection from a GGUF's Jinja chat
// template (modelfile.md §5): Levenshtein distance over code points against
// the known Jinja texts, smallest distance below 100 wins, ties to the
// earlier entry. The data (upstream's template/ directory) is compiled in by
// embed.cmake.
#include "template/template.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct template_blob {
    const char *name;
    const unsigned char *data;
    size_t len;
};
extern const struct template_blob template_blobs[];

#define DETECT_MAX_DIST 100

struct builtin {
    char *name;
    char *text;    // CRLF → LF
    char **stops;  // NULL-terminated
};

struct known {
    const char *name;  // points into builtins
    uint32_t *cps;     // Jinja text as code points
    size_t n;
};

static struct builtin *builtins;
static size_t n_builtins;
static struct known *knowns;
static size_t n_knowns;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct template_blob *blob(const char *file)
{
    for (const struct template_blob *b = template_blobs; b->name; b++)
        if (!strcmp(b->name, file))
            return b;
    return NULL;
}

static size_t to_cps(const char *s, size_t n, uint32_t *out)
{
    size_t k = 0;
    for (size_t i = 0, w; i < n; i += w) {
        uint32_t cp = utf8_decode((const unsigned char *)s + i, n - i, &w);
        out[k++] = cp == UTF8_INVALID ? 0xFFFD : cp;  // Go's RuneError, width 1
    }
    return k;
}

static void load(void)
{
    for (const struct template_blob *b = template_blobs; b->name; b++) {
        size_t nl = strlen(b->name);
        if (nl < 7 || strcmp(b->name + nl - 7, ".gotmpl"))
            continue;
        builtins = xrealloc(builtins, (n_builtins + 1) * sizeof(*builtins));
        struct builtin *t = &builtins[n_builtins++];
        t->name = xstrndup(b->name, nl - 7);
        t->text = xmalloc(b->len + 1);
        size_t k = 0;
        for (size_t i = 0; i < b->len; i++)
            if (!(b->data[i] == '\r' && i + 1 < b->len && b->data[i + 1] == '\n'))
                t->text[k++] = (char)b->data[i];
        t->text[k] = 0;
        // stop words from <name>.json
        char file[128];
        snprintf(file, sizeof(file), "%s.json", t->name);
        const struct template_blob *pj = blob(file);
        json_t *params = pj ? json_loadb((const char *)pj->data, pj->len, 0, NULL) : NULL;
        json_t *stop = json_object_get(params, "stop");
        size_t ns = json_array_size(stop);
        t->stops = xcalloc(ns + 1, sizeof(char *));
        for (size_t i = 0, j = 0; i < ns; i++)
            if (json_is_string(json_array_get(stop, i)))
                t->stops[j++] = xstrdup(json_string_value(json_array_get(stop, i)));
        json_decref(params);
    }
    const struct template_blob *ix = blob("index.json");
    json_t *index = ix ? json_loadb((const char *)ix->data, ix->len, 0, NULL) : NULL;
    for (size_t i = 0; i < json_array_size(index); i++) {
        json_t *e = json_array_get(index, i);
        const char *jinja = json_string_value(json_object_get(e, "template"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!jinja || !name)
            continue;
        const char *bname = NULL;
        for (size_t k = 0; k < n_builtins; k++)
            if (!strcmp(builtins[k].name, name))
                bname = builtins[k].name;
        if (!bname)
            continue;
        knowns = xrealloc(knowns, (n_knowns + 1) * sizeof(*knowns));
        struct known *kn = &knowns[n_knowns++];
        size_t len = strlen(jinja);
        kn->name = bname;
        kn->cps = xmalloc((len + 1) * sizeof(uint32_t));
        kn->n = to_cps(jinja, len, kn->cps);
    }
    json_decref(index);
}

static const struct builtin *find_builtin(const char *name)
{
    pthread_once(&once, load);
    for (size_t i = 0; name && i < n_builtins; i++)
        if (!strcmp(builtins[i].name, name))
            return &builtins[i];
    return NULL;
}

const char *template_builtin(const char *name)
{
    const struct builtin *b = find_builtin(name);
    return b ? b->text : NULL;
}

const char *const *template_builtin_stops(const char *name)
{
    const struct builtin *b = find_builtin(name);
    return b ? (const char *const *)b->stops : NULL;
}

// Levenshtein distance, or DETECT_MAX_DIST when it is at least that: a band
// of width 2*DETECT_MAX_DIST around the diagonal suffices.
static size_t bounded_distance(const uint32_t *a, size_t n, const uint32_t *b, size_t m)
{
    const size_t K = DETECT_MAX_DIST, INF = (size_t)-1 / 2;
    if ((n > m ? n - m : m - n) >= K)
        return K;
    size_t *prev = xmalloc((m + 1) * sizeof(size_t));
    size_t *cur = xmalloc((m + 1) * sizeof(size_t));
    for (size_t j = 0; j <= m; j++)
        prev[j] = j <= K ? j : INF;
    cur[0] = 0;
    size_t result = K;
    for (size_t i = 1; i <= n; i++) {
        size_t lo = i > K ? i - K : 0, hi = i + K < m ? i + K : m;
        size_t row_min = INF;
        // cells just outside the band read as "unreachable"
        if (lo == 0)
            cur[0] = i;
        else
            cur[lo - 1] = INF;
        if (hi + 1 <= m)
            cur[hi + 1] = INF;
        for (size_t j = lo > 1 ? lo : 1; j <= hi; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
        for (size_t j = lo; j <= hi; j++)
            if (cur[j] < row_min)
                row_min = cur[j];
        size_t *t = prev;
        prev = cur;
        cur = t;
        if (row_min >= K)
            goto out;
    }
    result = prev[m] < K ? prev[m] : K;
out:
    free(prev);
    free(cur);
    return result;
}

const char *template_detect(const char *jinja, size_t len)
{
    pthread_once(&once, load);
    if (!jinja || len > (1u << 20))
        return NULL;
    uint32_t *cps = xmalloc((len + 1) * sizeof(uint32_t));
    size_t n = to_cps(jinja, len, cps);
    const char *best = NULL;
    size_t best_d = DETECT_MAX_DIST;
    for (size_t i = 0; i < n_knowns; i++) {
        size_t d = bounded_distance(cps, n, knowns[i].cps, knowns[i].n);
        if (d < best_d) {
            best_d = d;
            best = knowns[i].name;
        }
    }
    free(cps);
    return best;
}

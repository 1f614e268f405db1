// Allocation helpers that abort on failure (bookkeeping only: allocations
// sized by input go through checked paths that report ERR_NOMEM), overflow-
// checked arithmetic, and the arena used for per-request data.
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static _Noreturn void oom(size_t n)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ASSERT(n >= 0);
    char *p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

bool size_add(size_t *out, size_t a, size_t b)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

bool size_mul(size_t *out, size_t a, size_t b)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

bool u64_add(uint64_t *out, uint64_t a, uint64_t b)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

bool u64_mul(uint64_t *out, uint64_t a, uint64_t b)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

bool i64_mul(int64_t *out, int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

// Arena: a list of chunks; big requests get a chunk of their own.
struct arena_chunk {
    struct arena_chunk *next;
    size_t size;
    size_t used;
    _Alignas(16) unsigned char data[];
};

#define ARENA_CHUNK_BYTES (64 * 1024)

void arena_init(struct arena *a, size_t cap_bytes)
{
    a->head = NULL;
    a->cap_bytes = cap_bytes;
    a->used_bytes = 0;
}

void *arena_alloc(struct arena *a, size_t n)
{
    // Round up to 16; a zero-byte request still gets a distinct pointer.
    size_t need = n ? (n + 15) & ~(size_t)15 : 16;
    if (need < n)
        return NULL;
    if (a->cap_bytes && (a->used_bytes > a->cap_bytes || need > a->cap_bytes - a->used_bytes))
        return NULL;
    struct arena_chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t size = need > ARENA_CHUNK_BYTES ? need : ARENA_CHUNK_BYTES;
        size_t total;
        if (!size_add(&total, sizeof(*c), size))
            return NULL;
        c = malloc(total);
        if (!c)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->used_bytes += need;
    return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *p = arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void arena_deinit(struct arena *a)
{
    struct arena_chunk *c = a->head;
    while (c) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

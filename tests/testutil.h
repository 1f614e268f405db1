// Small helpers shared by the unit tests: where the fixtures are.
//
// Small fixtures (stories260K, vocab/, quant/) are committed under
// tests/fixtures/. The large tiny-* models are read from shared/fixtures/
// beside the checkout (CI has it); tests that need them skip when absent.
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

// Directory of the source tree (set by ctest, else the compile-time value).
static inline const char *test_source_dir(void)
{
    const char *d = getenv("OLLAMA_SOURCE_DIR");
    return d && *d ? d : OLLAMA_SOURCE_DIR;
}

// Path of a committed fixture: tests/fixtures/<rel>.
static inline const char *test_fixture(char *out, size_t n, const char *rel)
{
    snprintf(out, n, "%s/tests/fixtures/%s", test_source_dir(), rel);
    return out;
}

// Path of a file in shared/fixtures (OLLAMA_SHARED_DIR, else ../shared beside
// the checkout), or NULL when it does not exist: the caller skips.
static inline const char *test_shared_fixture(char *out, size_t n, const char *rel)
{
    const char *d = getenv("OLLAMA_SHARED_DIR");
    if (d && *d)
        snprintf(out, n, "%s/fixtures/%s", d, rel);
    else
        snprintf(out, n, "%s/../shared/fixtures/%s", test_source_dir(), rel);
    struct stat st;
    return stat(out, &st) == 0 ? out : NULL;
}

// A whole file, malloc'd (caller frees; one byte spare), its size in *n; NULL
// when it cannot be opened.
static inline void *test_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(len > 0 ? (size_t)len + 1 : 1);
    *n = p && len > 0 ? fread(p, 1, (size_t)len, f) : 0;
    fclose(f);
    return p;
}

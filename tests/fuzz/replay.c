// Replays a fuzz target's committed corpus (seeds and the inputs of crashes
// already fixed) through its LLVMFuzzerTestOneInput, as an ordinary test:
// every fuzz finding stays a regression test in the normal and sanitizer
// suites, without libFuzzer.
//   test_fuzz_<name> CORPUS_DIR
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "%s: no corpus\n", argv[1]);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char **grown = realloc(names, (n + 1) * sizeof(*names));
        if (!grown)
            return 1;
        names = grown;
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *data = malloc(len > 0 ? (size_t)len : 1);
        size_t got = data ? fread(data, 1, len > 0 ? (size_t)len : 0, f) : 0;
        fclose(f);
        LLVMFuzzerTestOneInput(data, got);
        free(data);
        free(names[i]);
    }
    free(names);
    printf("%zu corpus inputs replayed\n", n);
    return n > 0 ? 0 : 1;
}

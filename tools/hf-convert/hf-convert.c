// hf-convert: converts a Hugging Face folder to GGUF with convert/, the code
// `ollama create` runs on the server, without a server or store: for
// checking a folder before uploading it, and for bench/ (import time and
// peak memory). With --base it converts a PEFT LoRA folder for that model.
//
//   hf-convert DIR OUT.gguf [--base BASE.gguf]
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert/convert.h"

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    int *last = ctx;
    int pct = total ? (int)(done * 100 / total) : 0;
    if (pct / 10 != *last / 10)
        fprintf(stderr, "converting model %d%%\n", pct);
    *last = pct;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 5 && strcmp(argv[3], "--base") == 0)) {
        fprintf(stderr, "usage: hf-convert DIR OUT.gguf [--base BASE.gguf]\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "hf-convert: cannot open %s\n", argv[1]);
        return 1;
    }
    struct convert_file files[256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256) {
        if (convert_wanted_file(de->d_name)) {
            files[n].name = xstrdup(de->d_name);
            files[n].path = xasprintf("%s/%s", argv[1], de->d_name);
            n++;
        } else if (cstr_ends_with(de->d_name, "_Pooling")) {  // sentence-transformers pooling
            files[n].name = xasprintf("%s/config.json", de->d_name);
            files[n].path = xasprintf("%s/%s/config.json", argv[1], de->d_name);
            n++;
        }
    }
    closedir(d);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct convert_info info;
    struct err e = {0};
    int last = -1;
    int rc = argc == 5 ? convert_adapter(files, n, argv[4], argv[2], &info, &e)
                       : convert_folder(files, n, argv[2], on_progress, &last, &info, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc < 0) {
        fprintf(stderr, "hf-convert: %s\n", e.msg);
        return 1;
    }
    printf("%s (%s): %llu tensors, %.1f MB of tensor data in %.2f s\n", info.arch,
           info.hf_arch[0] ? info.hf_arch : "adapter", (unsigned long long)info.n_tensors,
           (double)info.n_bytes / 1e6,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    for (size_t i = 0; i < n; i++) {
        free((char *)files[i].name);
        free((char *)files[i].path);
    }
    return 0;
}

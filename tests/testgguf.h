// GGUF rewriting for tests that need a variant of a model file (another
// pooling type, ...). Include after gguf/gguf.h.
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"

// Copies src to dst with <general.architecture>.<suffix> set to v (replaced
// where src has it, added otherwise). 0 on success.
static inline int test_gguf_set_arch_u32(const char *src, const char *dst, const char *suffix,
                                         uint32_t v)
{
    struct gguf *g;
    struct gguf_writer *w;
    struct err e = {0};
    if (gguf_open(&g, src, &e) < 0)
        return fprintf(stderr, "%s\n", e.msg), -1;
    if (gguf_writer_open(&w, dst, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        gguf_close(g);
        return -1;
    }
    struct str arch = gguf_architecture(g);
    char key[128];
    snprintf(key, sizeof key, "%.*s.%s", (int)arch.len, arch.ptr, suffix);
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        if (!str_eq_cstr(kv->key, key))
            gguf_writer_kv_copy(w, kv);
    }
    gguf_writer_kv_u32(w, key, v);
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char *name = str_dup(t->name);
        gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne);
        free(name);
    }
    int rc = gguf_writer_write_header(w, &e);
    for (size_t i = 0; rc == 0 && i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        rc = gguf_writer_write_data(w, t->data, t->n_bytes, &e);
    }
    if (rc == 0)
        rc = gguf_writer_close(w, &e);
    else
        gguf_writer_abort(w);
    if (rc < 0)
        fprintf(stderr, "%s\n", e.msg);
    gguf_close(g);
    return rc;
}

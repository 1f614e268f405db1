// libFuzzer target for the GGUF reader: open the input as an in-memory GGUF
// and, when it is accepted, touch every view the reader hands out (keys,
// values, array elements, tensor data) so an out-of-bounds view is caught.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void touch(const void *p, size_t n)
{
    const uint8_t *b = p;
    if (n)
        sink ^= b[0] ^ b[n - 1];
}

static void walk_value(const struct gguf_value *v, int depth)
{
    if (v->type == GGUF_VAL_STRING)
        touch(v->s.ptr, v->s.len);
    if (v->type != GGUF_VAL_ARRAY || depth > 10)
        return;
    touch(v->arr_data, (size_t)v->arr_bytes);
    uint64_t n = v->arr_count < 64 ? v->arr_count : 64;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_value e;
        if (gguf_arr_value(v, i, &e))
            walk_value(&e, depth + 1);
    }
    if (v->arr_count) {
        struct gguf_value e;
        if (gguf_arr_value(v, v->arr_count - 1, &e))
            walk_value(&e, depth + 1);
    }
}

static int info_cb(void *ctx, struct str key, const struct gguf_value *val, bool elided)
{
    (void)ctx;
    (void)elided;
    touch(key.ptr, key.len);
    walk_value(val, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    // A private heap copy of exactly size bytes: ASan flags any over-read.
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    struct gguf *g = NULL;
    struct err e = {0};
    if (gguf_open_memory(&g, copy, size, &e) == 0) {
        for (size_t i = 0; i < gguf_kv_count(g); i++) {
            const struct gguf_kv *kv = gguf_kv_at(g, i);
            touch(kv->key.ptr, kv->key.len);
            walk_value(&kv->val, 0);
        }
        for (size_t i = 0; i < gguf_tensor_count(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            touch(t->name.ptr, t->name.len);
            touch(t->data, (size_t)t->n_bytes);
        }
        struct gguf_summary s;
        gguf_summarize(g, &s);
        gguf_model_info(g, false, info_cb, NULL);
        uint32_t u;
        gguf_get_arch_u32(g, "context_length", &u);
        gguf_close(g);
    } else if (!e.msg[0]) {
        abort();  // every rejection must say why
    }
    free(copy);
    return 0;
}

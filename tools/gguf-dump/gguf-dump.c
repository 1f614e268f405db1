// gguf-dump FILE: prints the metadata and tensor table of a GGUF file (like
// llama.cpp's gguf-dump), with long arrays abbreviated. Exits 1 with the
// reader's error for a bad file.
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

#define ARRAY_SHOW  8
#define STRING_SHOW 120

static void print_str(struct str s, size_t max)
{
    putchar('"');
    size_t n = s.len < max ? s.len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
    if (s.len > max)
        printf("...(%zu bytes)", s.len);
}

static void print_value(const struct gguf_value *v, int depth)
{
    switch (v->type) {
    case GGUF_VAL_UINT8:
    case GGUF_VAL_UINT16:
    case GGUF_VAL_UINT32:
    case GGUF_VAL_UINT64:
        printf("%llu", (unsigned long long)v->v.u64);
        break;
    case GGUF_VAL_INT8:
    case GGUF_VAL_INT16:
    case GGUF_VAL_INT32:
    case GGUF_VAL_INT64:
        printf("%lld", (long long)v->v.i64);
        break;
    case GGUF_VAL_FLOAT32:
    case GGUF_VAL_FLOAT64:
        printf("%.9g", v->v.f64);
        break;
    case GGUF_VAL_BOOL:
        fputs(v->v.b ? "true" : "false", stdout);
        break;
    case GGUF_VAL_STRING:
        print_str(v->s, depth ? 40 : STRING_SHOW);
        break;
    case GGUF_VAL_ARRAY: {
        putchar('[');
        uint64_t n = v->arr_count < ARRAY_SHOW ? v->arr_count : ARRAY_SHOW;
        for (uint64_t i = 0; i < n; i++) {
            struct gguf_value e;
            if (i)
                fputs(", ", stdout);
            if (gguf_arr_value(v, i, &e))
                print_value(&e, depth + 1);
        }
        if (v->arr_count > n)
            printf(", ... (%llu more)", (unsigned long long)(v->arr_count - n));
        putchar(']');
        break;
    }
    default:
        fputs("?", stdout);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: gguf-dump FILE.gguf\n");
        return 2;
    }
    struct gguf *g = NULL;
    struct err e = {0};
    if (gguf_open(&g, argv[1], &e) < 0) {
        fprintf(stderr, "gguf-dump: %s: %s\n", argv[1], e.msg);
        return 1;
    }
    struct gguf_summary s;
    gguf_summarize(g, &s);
    printf("* File: %s\n", argv[1]);
    printf("* GGUF v%u, %zu key/value pairs, %zu tensors, alignment %u, data at offset %llu\n",
           gguf_version(g), gguf_kv_count(g), gguf_tensor_count(g), gguf_alignment(g),
           (unsigned long long)gguf_data_offset(g));
    printf("* Architecture %s, %llu parameters (%s), quantization %s\n\n",
           s.architecture[0] ? s.architecture : "(none)", (unsigned long long)s.parameter_count,
           s.parameter_size, s.quantization_level);
    printf("* Metadata:\n");
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        char type[32];
        if (kv->val.type == GGUF_VAL_ARRAY)
            snprintf(type, sizeof(type), "[%s]", gguf_value_type_name(kv->val.arr_type));
        else
            snprintf(type, sizeof(type), "%s", gguf_value_type_name(kv->val.type));
        printf("  %5zu: %-8s %-10llu %.*s = ", i + 1, type,
               (unsigned long long)(kv->val.type == GGUF_VAL_ARRAY ? kv->val.arr_count : 1),
               (int)kv->key.len, kv->key.ptr);
        print_value(&kv->val, 0);
        putchar('\n');
    }
    printf("\n* Tensors:\n");
    printf("  %5s  %12s  %-24s  %-8s  %14s  %s\n", "#", "elements", "shape", "type", "offset",
           "name");
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char shape[96];
        int k = 0;
        for (uint32_t d = 0; d < t->n_dims && k < (int)sizeof(shape); d++)
            k += snprintf(shape + k, sizeof(shape) - (size_t)k, "%s%lld", d ? " x " : "",
                          (long long)t->ne[d]);
        const char *tn = gguf_type_name(t->type);
        printf("  %5zu  %12llu  %-24s  %-8s  %14llu  %.*s\n", i + 1,
               (unsigned long long)gguf_tensor_n_elements(t), shape, tn ? tn : "?",
               (unsigned long long)t->offset, (int)t->name.len, t->name.ptr);
    }
    gguf_close(g);
    return 0;
}

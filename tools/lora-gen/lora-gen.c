// lora-gen: writes a random LoRA adapter GGUF for a base model, in llama.cpp's
// adapter layout (general.type "adapter", adapter.type "lora",
// adapter.lora.alpha, <W>.lora_a [n_in, rank] / <W>.lora_b [rank, n_out]),
// for benchmarks and tests of the adapter path (docs/internals/lora.md).
//
//   lora-gen BASE.gguf -o OUT.gguf [--rank 16] [--alpha 32] [--std 0.02]
//            [--targets attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down]
//            [--type f32|f16] [--seed 1]
//
// Every 2-D blk.N.<target>.weight of the base gets a pair, entries drawn from
// N(0, std²) (one deterministic stream per run). The target token_embd
// adapts the embedding table in llama.cpp's layout for it: lora_a
// [rank, n_vocab] (transposed), lora_b [rank, n_embd].
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"

struct opts {
    const char *base, *out, *targets, *type;
    int64_t rank;
    float alpha, std;
    uint64_t seed;
};

static uint64_t rng_next(uint64_t *s)  // splitmix64
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_normal(uint64_t *s)  // Box-Muller
{
    double u1 = ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

// Whether a base tensor name is blk.N.<one of targets>.weight.
static bool is_embd(const struct gguf_tensor *t)
{
    return str_eq_cstr(t->name, "token_embd.weight");
}

static bool is_target(const struct gguf_tensor *t, const char *targets)
{
    if (is_embd(t) && t->n_dims == 2)
        for (const char *p = targets; *p;) {
            size_t n = strcspn(p, ",");
            if (n == 10 && memcmp(p, "token_embd", 10) == 0)
                return true;
            p += n + (p[n] == ',');
        }
    if (t->n_dims != 2 || t->name.len < 12 || memcmp(t->name.ptr, "blk.", 4) != 0)
        return false;
    const char *dot = memchr(t->name.ptr + 4, '.', t->name.len - 4);
    if (!dot)
        return false;
    size_t off = (size_t)(dot + 1 - t->name.ptr);
    struct str rest = {dot + 1, t->name.len - off};
    for (const char *p = targets; *p;) {
        size_t n = strcspn(p, ",");
        if (rest.len == n + 7 && memcmp(rest.ptr, p, n) == 0 &&
            memcmp(rest.ptr + n, ".weight", 7) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static int write_matrix(struct gguf_writer *w, int64_t n, uint32_t type, float std, uint64_t *rng,
                        struct err *e)
{
    float *f = malloc((size_t)n * sizeof(float));
    uint16_t *h = malloc((size_t)n * sizeof(uint16_t));
    if (!f || !h) {
        free(f);
        free(h);
        return err_set(e, ERR_NOMEM, "%lld values", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) {
        f[i] = std * rng_normal(rng);
        h[i] = quant_f32_to_f16(f[i]);
    }
    int rc = type == GGUF_TYPE_F16 ? gguf_writer_write_data(w, h, (size_t)n * 2, e)
                                   : gguf_writer_write_data(w, f, (size_t)n * 4, e);
    free(f);
    free(h);
    return rc;
}

static int generate(const struct opts *o, struct err *e)
{
    struct gguf *g;
    int rc = gguf_open(&g, o->base, e);
    if (rc < 0)
        return rc;
    uint32_t type = strcmp(o->type, "f16") == 0 ? GGUF_TYPE_F16 : GGUF_TYPE_F32;
    struct gguf_writer *w;
    if ((rc = gguf_writer_open(&w, o->out, e)) < 0) {
        gguf_close(g);
        return rc;
    }
    struct str arch = gguf_architecture(g);
    char archz[64];
    snprintf(archz, sizeof archz, "%.*s", (int)arch.len, arch.ptr);
    gguf_writer_kv_str(w, "general.architecture", archz);
    gguf_writer_kv_str(w, "general.type", "adapter");
    gguf_writer_kv_str(w, "general.name", "lora-gen");
    gguf_writer_kv_str(w, "adapter.type", "lora");
    gguf_writer_kv_f32(w, "adapter.lora.alpha", o->alpha);
    size_t n_pairs = 0;
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (!is_target(t, o->targets))
            continue;
        char name[GGUF_MAX_NAME_LEN + 16];
        int64_t ne_a[2] = {t->ne[0], o->rank}, ne_b[2] = {o->rank, t->ne[1]};
        if (is_embd(t)) {
            ne_a[0] = o->rank;
            ne_a[1] = t->ne[1];
            ne_b[1] = t->ne[0];
        }
        snprintf(name, sizeof name, "%.*s.lora_a", (int)t->name.len, t->name.ptr);
        gguf_writer_add_tensor(w, name, type, 2, ne_a);
        snprintf(name, sizeof name, "%.*s.lora_b", (int)t->name.len, t->name.ptr);
        gguf_writer_add_tensor(w, name, type, 2, ne_b);
        n_pairs++;
    }
    rc = n_pairs
             ? gguf_writer_write_header(w, e)
             : err_set(e, ERR_INVALID, "no tensor of %s matches --targets %s", o->base, o->targets);
    uint64_t rng = o->seed;
    for (size_t i = 0; i < gguf_tensor_count(g) && rc == 0; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (!is_target(t, o->targets))
            continue;
        // the embedding's pair has the same element counts, A and B swapped
        rc = write_matrix(w, (is_embd(t) ? t->ne[1] : t->ne[0]) * o->rank, type, o->std, &rng, e);
        if (rc == 0)
            rc = write_matrix(w, o->rank * (is_embd(t) ? t->ne[0] : t->ne[1]), type, o->std, &rng,
                              e);
    }
    if (rc == 0)
        rc = gguf_writer_close(w, e);
    else
        gguf_writer_abort(w);
    gguf_close(g);
    if (rc == 0)
        printf("%s: %zu pairs, rank %lld, alpha %g, %s\n", o->out, n_pairs, (long long)o->rank,
               (double)o->alpha, o->type);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o = {.targets = "attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down",
                     .type = "f32",
                     .rank = 16,
                     .alpha = 32,
                     .std = 0.02f,
                     .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-' && !o.base)
            o.base = a;
        else if (!strcmp(a, "-o") && v)
            o.out = argv[++i];
        else if (!strcmp(a, "--rank") && v)
            o.rank = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(a, "--alpha") && v)
            o.alpha = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--std") && v)
            o.std = strtof(argv[++i], NULL);
        else if (!strcmp(a, "--targets") && v)
            o.targets = argv[++i];
        else if (!strcmp(a, "--type") && v)
            o.type = argv[++i];
        else if (!strcmp(a, "--seed") && v)
            o.seed = strtoull(argv[++i], NULL, 10);
        else
            o.base = NULL, i = argc;  // usage
    }
    if (!o.base || !o.out || o.rank < 1 || o.rank > 4096 ||
        (strcmp(o.type, "f32") && strcmp(o.type, "f16"))) {
        fprintf(stderr, "usage: lora-gen BASE.gguf -o OUT.gguf [--rank 16] [--alpha 32] "
                        "[--std 0.02] [--targets attn_q,...,ffn_down] [--type f32|f16] "
                        "[--seed 1]\n");
        return 2;
    }
    struct err e = {0};
    if (generate(&o, &e) < 0) {
        fprintf(stderr, "error: %s\n", e.msg);
        return 1;
    }
    return 0;
}

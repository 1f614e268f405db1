// LoRA adapter files checked against their base model, from the GGUF
// metadata and tensor table alone (nothing is read from the data). Used at
// `ollama create` (store), so a mismatched ADAPTER is refused before it is
// stored, and again by the model when it loads the adapter. The rules are
// llama.cpp's llama_adapter_lora_init (docs/internals/lora.md).
#include "gguf/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LORA_SUFFIX_LEN 7  // ".lora_a" / ".lora_b"

static int check_metadata(const struct gguf *ad, const struct gguf *base, struct err *e)
{
    struct str type = {"", 0}, atype = {"", 0};
    gguf_get_str(ad, "general.type", &type);
    if (!str_eq_cstr(type, "adapter"))
        return err_set(e, ERR_INVALID,
                       "not a LoRA adapter: general.type is \"%.*s\", expected \"adapter\"",
                       (int)type.len, type.ptr);
    gguf_get_str(ad, "adapter.type", &atype);
    if (!str_eq_cstr(atype, "lora"))
        return err_set(e, ERR_INVALID, "unsupported adapter type \"%.*s\" (expected \"lora\")",
                       (int)atype.len, atype.ptr);
    struct str aa = gguf_architecture(ad), ba = gguf_architecture(base);
    if (!str_eq(aa, ba))
        return err_set(e, ERR_INVALID,
                       "model arch and LoRA arch mismatch: the adapter is for \"%.*s\", the model "
                       "is \"%.*s\"",
                       (int)aa.len, aa.ptr, (int)ba.len, ba.ptr);
    return 0;
}

// The adapter tensor named <stem><suffix>, or NULL.
static const struct gguf_tensor *find_part(const struct gguf *g, struct str stem,
                                           const char *suffix)
{
    char name[GGUF_MAX_NAME_LEN + LORA_SUFFIX_LEN + 2];
    if (stem.len > GGUF_MAX_NAME_LEN)
        return NULL;
    snprintf(name, sizeof name, "%.*s%s", (int)stem.len, stem.ptr, suffix);
    return gguf_tensor_find(g, name);
}

// The embedding table, a row lookup: llama.cpp's converter stores its A
// transposed, A [r, n_vocab] and B [r, n_embd] for W [n_embd, n_vocab]
// (llama-adapter.cpp), so that a token's row of A times B is its term.
static int check_embd_shapes(const struct gguf_lora_pair *p, struct str stem, struct err *e)
{
    const struct gguf_tensor *a = p->a, *b = p->b, *w = p->base;
    if (a->n_dims != 2 || b->n_dims != 2 || w->n_dims != 2 || a->ne[0] != b->ne[0] ||
        a->ne[0] < 1 || a->ne[1] != w->ne[1] || b->ne[1] != w->ne[0])
        return err_set(e, ERR_INVALID,
                       "LoRA tensor %.*s has incorrect shape: the model's is [%lld, %lld], the "
                       "adapter's lora_a [%lld, %lld] and lora_b [%lld, %lld] (want [r, %lld] "
                       "and [r, %lld])",
                       (int)stem.len, stem.ptr, (long long)w->ne[0], (long long)w->ne[1],
                       (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                       (long long)b->ne[1], (long long)w->ne[1], (long long)w->ne[0]);
    return 0;
}

// Shapes (GGUF ne): W [n_in, n_out], A [n_in, r], B [r, n_out], all 2-D.
static int check_shapes(const struct gguf_lora_pair *p, struct str stem, struct err *e)
{
    const struct gguf_tensor *a = p->a, *b = p->b, *w = p->base;
    if (w->n_dims != 2 || w->ne[2] != 1 || w->ne[3] != 1)
        return err_set(e, ERR_INVALID, "LoRA on %.*s: only 2-D weights can be adapted",
                       (int)stem.len, stem.ptr);
    if (str_eq_cstr(stem, "token_embd.weight"))
        return check_embd_shapes(p, stem, e);
    if (a->n_dims != 2 || b->n_dims != 2 || a->ne[1] != b->ne[0] || a->ne[1] < 1)
        return err_set(e, ERR_INVALID,
                       "LoRA tensor pair for %.*s has incorrect shape: lora_a [%lld, %lld], "
                       "lora_b [%lld, %lld]",
                       (int)stem.len, stem.ptr, (long long)a->ne[0], (long long)a->ne[1],
                       (long long)b->ne[0], (long long)b->ne[1]);
    if (a->ne[0] != w->ne[0] || b->ne[1] != w->ne[1])
        return err_set(e, ERR_INVALID,
                       "LoRA tensor %.*s has incorrect shape: the model's is [%lld, %lld], the "
                       "adapter's lora_a [%lld, %lld] and lora_b [%lld, %lld]",
                       (int)stem.len, stem.ptr, (long long)w->ne[0], (long long)w->ne[1],
                       (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0],
                       (long long)b->ne[1]);
    return 0;
}

// One adapter tensor: a norm (ignored, 0), the a of a pair (1, *p filled),
// the b of a pair (0, its a must exist), or an error.
static int read_tensor(const struct gguf *ad, const struct gguf *base, const struct gguf_tensor *t,
                       struct gguf_lora_pair *p, struct err *e)
{
    struct str n = t->name;
    if (str_ends_with(n, "_norm.weight"))
        return 0;
    bool is_a = str_ends_with(n, ".lora_a"), is_b = str_ends_with(n, ".lora_b");
    if (!is_a && !is_b)
        return err_set(e, ERR_INVALID,
                       "invalid LoRA tensor name %.*s (expected a name ending in .lora_a or "
                       ".lora_b)",
                       (int)n.len, n.ptr);
    struct str stem = {n.ptr, n.len - LORA_SUFFIX_LEN};
    const struct gguf_tensor *other = find_part(ad, stem, is_a ? ".lora_b" : ".lora_a");
    if (!other)
        return err_set(e, ERR_INVALID, "LoRA tensor pair for %.*s is missing its %s", (int)stem.len,
                       stem.ptr, is_a ? "lora_b" : "lora_a");
    if (is_b)
        return 0;
    const struct gguf_tensor *w = find_part(base, stem, "");
    if (!w)
        return err_set(e, ERR_INVALID, "LoRA tensor %.*s does not exist in base model",
                       (int)stem.len, stem.ptr);
    *p = (struct gguf_lora_pair){.a = t, .b = other, .base = w, .rank = other->ne[0]};
    int rc = check_shapes(p, stem, e);
    return rc < 0 ? rc : 1;
}

int gguf_lora_check(const struct gguf *ad, const struct gguf *base, struct gguf_lora *out,
                    struct err *e)
{
    int rc = check_metadata(ad, base, e);
    if (rc < 0)
        return rc;
    struct gguf_lora l = {0};
    gguf_get_f32(ad, "adapter.lora.alpha", &l.alpha);
    size_t n = gguf_tensor_count(ad);
    l.pairs = calloc(n ? n : 1, sizeof *l.pairs);
    if (!l.pairs)
        return err_set(e, ERR_NOMEM, "LoRA adapter: %zu tensors", n);
    for (size_t i = 0; i < n; i++) {
        rc = read_tensor(ad, base, gguf_tensor_at(ad, i), &l.pairs[l.n_pairs], e);
        if (rc < 0) {
            free(l.pairs);
            return rc;
        }
        l.n_pairs += (size_t)rc;
    }
    if (l.n_pairs == 0) {
        free(l.pairs);
        return err_set(e, ERR_INVALID, "LoRA adapter has no lora_a / lora_b tensors");
    }
    *out = l;
    return 0;
}

void gguf_lora_deinit(struct gguf_lora *l)
{
    if (!l)
        return;
    free(l->pairs);
    *l = (struct gguf_lora){0};
}

float gguf_lora_scale(const struct gguf_lora *l, const struct gguf_lora_pair *p, float user_scale)
{
    return l->alpha != 0.0f ? user_scale * l->alpha / (float)p->rank : user_scale;
}

// What the server process needs from a model's GGUF header, read once per
// blob: the chat template and vocabulary facts a Jinja template is rendered
// with (bos_token, eos_token, whether the tokenizer adds BOS itself), the
// trained context length and the header keys capabilities come from. Opening
// the header parses the whole vocabulary (milliseconds for a 150k-token one),
// and every chat, generate and show asks.
#include "prompt/prompt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"

static char *token_text(const struct gguf *g, const char *id_key)
{
    uint32_t id;
    const struct gguf_kv *kv = gguf_find(g, "tokenizer.ggml.tokens");
    struct str s;
    if (!kv || !gguf_get_u32(g, id_key, &id) || !gguf_arr_str(kv, id, &s))
        return xstrdup("");
    return str_dup(s);
}

// Whether the tokenizer adds BOS: tokenizer.ggml.add_bos_token when present, else the
// default of the tokenizer kind (SentencePiece and WordPiece add it, BPE does not).
static bool adds_bos(const struct gguf *g)
{
    bool b;
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
        return b;
    struct str model;
    if (!gguf_get_str(g, "tokenizer.ggml.model", &model))
        return false;
    return str_eq_cstr(model, "llama") || str_eq_cstr(model, "bert");
}

static bool has_arch_key(const struct gguf *g, const char *suffix)
{
    struct str arch = gguf_architecture(g);
    char key[256];
    snprintf(key, sizeof(key), "%.*s.%s", (int)arch.len, arch.ptr, suffix);
    return gguf_find(g, key) != NULL;
}

// One cached file: the facts and what identifies the file they came from.
struct facts_entry {
    char *path;
    off_t size;
    struct timespec mtime;
    struct prompt_facts f;
};

enum { FACTS_CACHE_SLOTS = 8 };
static struct facts_entry facts_cache[FACTS_CACHE_SLOTS];
static unsigned facts_cache_next;
static pthread_mutex_t facts_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static bool read_facts(const char *path, struct prompt_facts *f)
{
    struct gguf *g = NULL;
    if (gguf_open(&g, path, NULL) != 0)
        return false;
    struct str ct;
    if (gguf_get_str(g, "tokenizer.chat_template", &ct) && ct.len > 0)
        f->chat_template = str_dup(ct);
    f->bos_token = token_text(g, "tokenizer.ggml.bos_token_id");
    f->eos_token = token_text(g, "tokenizer.ggml.eos_token_id");
    f->adds_bos = adds_bos(g);
    uint32_t n = 0;
    if (gguf_get_arch_u32(g, "context_length", &n))
        f->context_length = n;
    f->pooling = has_arch_key(g, "pooling_type");
    f->vision = has_arch_key(g, "vision.block_count");
    f->audio = has_arch_key(g, "audio.block_count");
    gguf_close(g);
    return true;
}

void prompt_facts_deinit(struct prompt_facts *f)
{
    free(f->chat_template);
    free(f->bos_token);
    free(f->eos_token);
    memset(f, 0, sizeof *f);
}

static void copy_facts(const struct prompt_facts *from, struct prompt_facts *out)
{
    *out = *from;
    out->chat_template = dup_or_null(from->chat_template);
    out->bos_token = dup_or_null(from->bos_token);
    out->eos_token = dup_or_null(from->eos_token);
}

static bool same_file(const struct facts_entry *c, const char *path, const struct stat *st)
{
    return c->path && !strcmp(c->path, path) && c->size == st->st_size &&
           c->mtime.tv_sec == st->st_mtim.tv_sec && c->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

bool prompt_facts_get(const char *path, struct prompt_facts *out)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return false;
    pthread_mutex_lock(&facts_cache_mu);
    for (int i = 0; i < FACTS_CACHE_SLOTS; i++)
        if (same_file(&facts_cache[i], path, &st)) {
            copy_facts(&facts_cache[i].f, out);
            pthread_mutex_unlock(&facts_cache_mu);
            return true;
        }
    pthread_mutex_unlock(&facts_cache_mu);
    struct facts_entry fresh = {.size = st.st_size, .mtime = st.st_mtim};
    if (!read_facts(path, &fresh.f)) {
        prompt_facts_deinit(&fresh.f);
        return false;
    }
    fresh.path = xstrdup(path);
    copy_facts(&fresh.f, out);
    pthread_mutex_lock(&facts_cache_mu);
    struct facts_entry *slot = &facts_cache[facts_cache_next++ % FACTS_CACHE_SLOTS];
    free(slot->path);
    prompt_facts_deinit(&slot->f);
    *slot = fresh;
    pthread_mutex_unlock(&facts_cache_mu);
    return true;
}

// Prompt source selection as Ollama 0.33 does it (server/images.go:
// selectedTemplateSource, shouldPreferChatTemplate, goTemplateCapabilities,
// chatTemplateCapabilities; server/routes.go: shouldUseGoTemplate,
// shouldUseHarmony), and the vocabulary facts a Jinja template is rendered
// with (bos_token, eos_token, whether the tokenizer adds BOS itself).
#include "store/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "jinja/jinja.h"

static bool has(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
}

// Go template capabilities (the same reading store_model_capabilities does).
static int go_caps(const char *t, bool *tools)
{
    int n = 0;
    *tools = has(t, ".Tools");
    n += *tools;
    n += has(t, ".Suffix");
    n += has(t, ".Thinking") || has(t, ".IsThinkSet");
    return n;
}

// goTemplateHasToolRoundTrip: tools and tool calls both rendered, and tool results.
static bool go_tool_round_trip(const char *t)
{
    if (!has(t, ".Tools") || !has(t, ".ToolCalls"))
        return false;
    return has(t, "eq .Role \"tool\"") || has(t, "tool_response") || has(t, "TOOL_RESULTS");
}

static int chat_caps(const char *t, bool *tools)
{
    *tools = jinja_chat_has_tools(t);
    return *tools + jinja_chat_has_thinking(t);
}

// shouldPreferChatTemplate: more capabilities wins (unless it would lose a tool round trip the
// Go template has); equal tool-capable sets prefer the one with the round trip.
static bool prefer_chat_template(const char *chat, const char *go)
{
    bool chat_tools, go_tools;
    int nc = chat_caps(chat, &chat_tools), ng = go_caps(go, &go_tools);
    bool chat_thinking = jinja_chat_has_thinking(chat);
    bool go_thinking = has(go, ".Thinking") || has(go, ".IsThinkSet");
    if (nc > ng)
        return !go_tool_round_trip(go) || jinja_chat_has_tool_round_trip(chat);
    bool same =
        nc == ng && chat_tools == go_tools && chat_thinking == go_thinking && !has(go, ".Suffix");
    if (!same || !chat_tools || !go_tools)
        return false;
    return jinja_chat_has_tool_round_trip(chat) && !go_tool_round_trip(go);
}

// OLLAMA_GO_TEMPLATE: -1 unset (or not a boolean), else 0 / 1.
static int go_template_env(void)
{
    const char *raw = getenv("OLLAMA_GO_TEMPLATE");
    char tmp[64];
    const char *v = raw ? env_clean(raw, tmp, sizeof tmp) : NULL;
    if (!v || env_parse_bool(v, true) != env_parse_bool(v, false))
        return -1;
    return env_parse_bool(v, true);
}

static bool is_harmony(const struct store_model *m)
{
    const char *fam = m->config.model_family;
    return fam && (!strcmp(fam, "gptoss") || !strcmp(fam, "gpt-oss")) &&
           has(m->template_text, "<|start|>") && has(m->template_text, "<|end|>");
}

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

// What a chat needs from the GGUF header, kept per file: opening the header
// parses the whole vocabulary (milliseconds for a 150k-token one), and every
// chat, generate and show asks. Blobs are content-addressed and never change
// in place; the size and modification time guard other paths.
struct vocab_facts {
    char *path;
    off_t size;
    struct timespec mtime;
    char *chat_template;  // NULL when absent
    char *bos_token, *eos_token;
    bool adds_bos;
};

enum { VOCAB_CACHE_SLOTS = 8 };
static struct vocab_facts vocab_cache[VOCAB_CACHE_SLOTS];
static unsigned vocab_cache_next;
static pthread_mutex_t vocab_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static bool read_vocab_facts(const char *path, struct vocab_facts *f)
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
    gguf_close(g);
    return true;
}

static void vocab_facts_free(struct vocab_facts *f)
{
    free(f->path);
    free(f->chat_template);
    free(f->bos_token);
    free(f->eos_token);
    memset(f, 0, sizeof *f);
}

static void copy_facts(const struct vocab_facts *f, struct store_prompt_choice *out)
{
    out->chat_template = dup_or_null(f->chat_template);
    out->bos_token = dup_or_null(f->bos_token);
    out->eos_token = dup_or_null(f->eos_token);
    out->tokenizer_adds_bos = f->adds_bos;
}

// Fills out's vocabulary facts for path from the cache, reading the header on a miss.
static void vocab_facts_get(const char *path, struct store_prompt_choice *out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    pthread_mutex_lock(&vocab_cache_mu);
    for (int i = 0; i < VOCAB_CACHE_SLOTS; i++) {
        const struct vocab_facts *f = &vocab_cache[i];
        if (f->path && !strcmp(f->path, path) && f->size == st.st_size &&
            f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec) {
            copy_facts(f, out);
            pthread_mutex_unlock(&vocab_cache_mu);
            return;
        }
    }
    pthread_mutex_unlock(&vocab_cache_mu);
    struct vocab_facts fresh = {.size = st.st_size, .mtime = st.st_mtim};
    if (!read_vocab_facts(path, &fresh))
        return;
    fresh.path = xstrdup(path);
    copy_facts(&fresh, out);
    pthread_mutex_lock(&vocab_cache_mu);
    struct vocab_facts *slot = &vocab_cache[vocab_cache_next++ % VOCAB_CACHE_SLOTS];
    vocab_facts_free(slot);
    *slot = fresh;
    pthread_mutex_unlock(&vocab_cache_mu);
}

void store_prompt_choose(const struct store_model *m, struct store_prompt_choice *out)
{
    memset(out, 0, sizeof *out);
    if (m->model_path)
        vocab_facts_get(m->model_path, out);
    if (!out->bos_token)
        out->bos_token = xstrdup("");
    if (!out->eos_token)
        out->eos_token = xstrdup("");
    bool has_go = m->template_text != NULL;
    int env = go_template_env();
    bool use_go = false;
    if (has_go) {
        if (env >= 0)
            use_go = env == 1;
        else
            use_go =
                !(out->chat_template && prefer_chat_template(out->chat_template, m->template_text));
    }
    if ((m->config.renderer && *m->config.renderer) || (m->config.parser && *m->config.parser))
        out->source = STORE_PROMPT_RENDERER;
    else if (has_go && is_harmony(m))
        out->source = STORE_PROMPT_HARMONY;
    else if (use_go)
        out->source = STORE_PROMPT_GO_TEMPLATE;
    else if (out->chat_template)
        out->source = STORE_PROMPT_CHAT_TEMPLATE;
    else
        out->source = STORE_PROMPT_NONE;
}

void store_prompt_choice_deinit(struct store_prompt_choice *c)
{
    free(c->chat_template);
    free(c->bos_token);
    free(c->eos_token);
    memset(c, 0, sizeof *c);
}

const char *store_prompt_source_name(const struct store_model *m, enum store_prompt_source s)
{
    bool r = m->config.renderer && *m->config.renderer, p = m->config.parser && *m->config.parser;
    switch (s) {
    case STORE_PROMPT_RENDERER:
        return r && p ? "renderer_parser" : r ? "renderer" : "parser";
    case STORE_PROMPT_HARMONY:
        return "harmony";
    case STORE_PROMPT_GO_TEMPLATE:
        return "go_template";
    case STORE_PROMPT_CHAT_TEMPLATE:
        return "gguf_chat_template";
    default:
        return "none";
    }
}

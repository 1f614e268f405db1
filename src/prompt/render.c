// Prompt rendering by source (store_prompt_choose picks it, in Ollama 0.33's
// order): the renderer/parser named in the model's config and harmony
// (src/renderer, selected in generate.c first), the Go template, or the
// GGUF's Jinja chat template. This file renders the Jinja source (parsed once
// per template text and cached) with truncation to the context window, and
// builds the output parser for the template sources.
#include "server/internal.h"

#include <pthread.h>
#include <string.h>

#include "jinja/jinja.h"

// ---------------------------------------------------------------------------
// Parsed templates, once per distinct text. Entries live until the server
// exits (a handful of models); past the cap a template is parsed per request.

#define JINJA_CACHE_MAX 32

static struct {
    pthread_mutex_t mu;  // guards n and entries
    size_t n;
    struct {
        char digest[DIGEST_HEX_LEN + 1];
        struct jinja_template *t;
    } entries[JINJA_CACHE_MAX];
} jinja_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

// The parsed template for text: *owned says whether the caller frees it.
static int jinja_get(const char *text, const struct jinja_template **out, bool *owned,
                     struct err *e)
{
    char digest[DIGEST_HEX_LEN + 1];
    sha256_hex(text, strlen(text), digest);
    pthread_mutex_lock(&jinja_cache.mu);
    for (size_t i = 0; i < jinja_cache.n; i++)
        if (!strcmp(jinja_cache.entries[i].digest, digest)) {
            *out = jinja_cache.entries[i].t;
            *owned = false;
            pthread_mutex_unlock(&jinja_cache.mu);
            return 0;
        }
    pthread_mutex_unlock(&jinja_cache.mu);
    struct jinja_template *t;
    int rc = jinja_parse(&t, text, strlen(text), e);
    if (rc)
        return rc;
    pthread_mutex_lock(&jinja_cache.mu);
    *owned = jinja_cache.n == JINJA_CACHE_MAX;
    if (!*owned) {
        memcpy(jinja_cache.entries[jinja_cache.n].digest, digest, sizeof digest);
        jinja_cache.entries[jinja_cache.n++].t = t;
    }
    pthread_mutex_unlock(&jinja_cache.mu);
    *out = t;
    return 0;
}

// ---------------------------------------------------------------------------
// Rendering

static bool is_system(json_t *m)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    return role && !strcmp(role, "system");
}

static int render_jinja(const struct srv_prompt_req *r, struct buf *out, struct err *e)
{
    const struct jinja_template *t;
    bool owned;
    int rc = jinja_get(r->pc->chat_template, &t, &owned, e);
    if (rc) {
        err_prefix(e, "chat template");
        return rc;
    }
    struct jinja_chat_req req = {
        .tools = r->tools,
        .think = {.set = r->think.think_set, .on = r->think.think, .level = r->think.level},
        .bos_token = r->pc->bos_token,
        .eos_token = r->pc->eos_token,
        .tokenizer_adds_bos = r->pc->tokenizer_adds_bos,
    };
    // Truncation as the Go path does it (templates.md §8): while the prompt does not fit
    // n_ctx tokens, drop the oldest message that is not a system message, keeping the last.
    json_t *msgs = json_copy(r->messages);
    size_t start = out->len;
    for (;;) {
        req.messages = msgs;
        out->len = start;
        if (out->data)
            out->data[start] = 0;
        rc = jinja_chat_render(t, &req, out, e);
        if (rc || !r->truncate || !r->count)
            break;
        int64_t n = r->count(r->count_ctx, buf_cstr(out) + start, out->len - start, e);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (n <= r->n_ctx)
            break;
        size_t drop = SIZE_MAX;
        for (size_t i = 0; i + 1 < json_array_size(msgs); i++)
            if (!is_system(json_array_get(msgs, i))) {
                drop = i;
                break;
            }
        if (drop == SIZE_MAX)
            break;
        json_array_remove(msgs, drop);
    }
    json_decref(msgs);
    if (owned)
        jinja_free((struct jinja_template *)t);
    if (rc == ERR_FORMAT)
        err_prefix(e, "chat template");
    return rc;
}

int srv_prompt_render(const struct srv_prompt_req *r, const struct template *go,
                      const struct template_prompt_req *go_req, struct buf *out, struct err *e)
{
    switch (r->pc->source) {
    case STORE_PROMPT_CHAT_TEMPLATE:
        // suffix mode (no messages) has no Jinja form: the Go template renders it
        if (r->messages)
            return render_jinja(r, out, e);
        break;
    case STORE_PROMPT_RENDERER:
    case STORE_PROMPT_HARMONY:
        // A named renderer and harmony are rendered by src/renderer before this is called
        // (generate.c, renderer_select); what reaches here is a config with only a parser,
        // whose prompt the Go template renders, as Ollama does.
        break;
    case STORE_PROMPT_GO_TEMPLATE:
    case STORE_PROMPT_NONE:
        break;
    }
    return template_render_prompt(go, go_req, out, NULL, e);
}

struct template_output_parser *srv_output_parser_new(const struct store_prompt_choice *pc,
                                                     const struct template *go, bool think,
                                                     json_t *tools, const char *prompt)
{
    switch (pc->source) {
    case STORE_PROMPT_CHAT_TEMPLATE:
        return template_output_parser_new_format(template_chat_format_detect(pc->chat_template),
                                                 pc->chat_template, think, tools, prompt);
    case STORE_PROMPT_RENDERER:  // a named parser is src/renderer's (generate.c)
    case STORE_PROMPT_HARMONY:
    case STORE_PROMPT_GO_TEMPLATE:
    case STORE_PROMPT_NONE:
        break;
    }
    return template_output_parser_new(go, think, tools, prompt);
}

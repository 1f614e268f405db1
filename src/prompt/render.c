// One request's prompt: the source chosen in Ollama 0.33's order
// (prompt_choose), the Go template, the built-in renderer / parser, and the
// rendering of the assembled messages through the chosen engine: the named
// renderer, the GGUF's Jinja chat template (parsed once per template text and
// cached), or the Go template. All three share one truncation loop here;
// the Go template numbers its [img-N] tags from the start the loop picks.
#include "prompt/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
// Opening

// Chooses the built-in renderer / parser (Ollama's order: RENDERER/PARSER,
// then harmony for gpt-oss; "gemma4" becomes its small or large variant by
// the model's name or size). A name this build does not have is an error for
// the request, as Ollama's `unknown renderer "x"`.
static int builtin_select(struct prompt *p, const struct prompt_model *m,
                          struct prompt_think *think, struct err *e)
{
    renderer_select(m->renderer, m->parser, m->family, template_text(p->tmpl), &p->builtin);
    p->builtin.renderer = renderer_resolve(p->builtin.renderer, m->display, m->model_type);
    if (p->builtin.renderer && !renderer_known(p->builtin.renderer))
        return err_set(e, ERR_NOT_FOUND, "unknown renderer \"%s\"", p->builtin.renderer);
    if (p->builtin.parser && !renderer_parser_known(p->builtin.parser))
        return err_set(e, ERR_NOT_FOUND, "unknown parser \"%s\"", p->builtin.parser);
    // harmony's Reasoning only knows low/medium/high.
    if (p->builtin.harmony && think->level && strcmp(think->level, "max") == 0)
        think->level = "high";
    return 0;
}

int prompt_open(struct prompt **out, const struct prompt_model *m, const char *req_template,
                struct prompt_think *think, struct err *e)
{
    struct prompt *p = xcalloc(1, sizeof *p);
    prompt_choose(m, &p->pc);
    if (req_template && *req_template)
        p->pc.source = PROMPT_GO_TEMPLATE;
    if (log_enabled(LOG_DEBUG)) {
        char *kv = xasprintf("model=%s selected=%s", m->display ? m->display : "",
                             prompt_source_name(m, p->pc.source));
        log_kv(LOG_DEBUG, kv, "template selection");
        free(kv);
    }
    const char *ttext = req_template;
    if (!ttext || !*ttext)
        ttext = m->template_text ? m->template_text : TEMPLATE_DEFAULT;
    int rc = template_parse(&p->tmpl, ttext, strlen(ttext), e);
    if (rc < 0)
        rc = ERR_INVALID;
    else
        rc = builtin_select(p, m, think, e);
    if (rc < 0) {
        prompt_free(p);
        return rc;
    }
    p->family = xstrdup(m->family ? m->family : "");
    *out = p;
    return 0;
}

void prompt_free(struct prompt *p)
{
    if (!p)
        return;
    prompt_choice_deinit(&p->pc);
    template_free(p->tmpl);
    prompt_parser_free(p->parser);
    free(p->family);
    free(p);
}

enum prompt_source prompt_get_source(const struct prompt *p)
{
    return p->pc.source;
}

// ---------------------------------------------------------------------------
// Engines: each renders one candidate list of messages.

static bool is_system(json_t *m)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    return role && !strcmp(role, "system");
}

// msgs[start..] with the system messages before start (a new reference).
static json_t *from_start(json_t *msgs, size_t start)
{
    json_t *sub = json_array();
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        if (i >= start || is_system(m))
            json_array_append(sub, m);
    }
    return sub;
}

static int render_builtin(struct prompt *p, const struct engine_call *c, json_t *msgs, size_t start,
                          bool probe, struct buf *out, struct err *e)
{
    (void)probe;
    json_t *sub = from_start(msgs, start);
    int rc;
    if (p->builtin.renderer) {
        rc = renderer_render(p->builtin.renderer, sub, c->tools, c->rthink, out, e);
    } else {  // a parser without a renderer: the Go template renders, as Ollama does
        struct template_prompt_req pr = {.messages = sub, .tools = c->tools, .think = c->think};
        rc = template_render_prompt(p->tmpl, &pr, out, NULL, e);
    }
    json_decref(sub);
    return rc;
}

static int render_jinja(struct prompt *p, const struct engine_call *c, json_t *msgs, size_t start,
                        bool probe, struct buf *out, struct err *e)
{
    (void)probe;
    json_t *sub = from_start(msgs, start);
    struct jinja_chat_req req = {
        .messages = sub,
        .tools = c->tools,
        .think = {.set = c->think.think_set, .on = c->think.think, .level = c->think.level},
        .bos_token = p->pc.bos_token,
        .eos_token = p->pc.eos_token,
        .tokenizer_adds_bos = p->pc.tokenizer_adds_bos,
        .llama_server = true,  // Ollama 0.33 renders through llama-server
    };
    int rc = jinja_chat_render(c->jinja, &req, out, e);
    json_decref(sub);
    return rc;
}

static int render_go(struct prompt *p, const struct engine_call *c, json_t *msgs, size_t start,
                     bool probe, struct buf *out, struct err *e)
{
    struct template_prompt_req pr = {
        .messages = msgs, .tools = c->tools, .think = c->think, .start = start, .probe = probe};
    return template_render_prompt(p->tmpl, &pr, out, NULL, e);
}

// Renders one candidate into out after its first prefix bytes (the
// detokenized context, if any).
static int render_at(struct prompt *p, const struct engine_call *c, engine_fn render, json_t *msgs,
                     size_t start, bool probe, size_t prefix, struct buf *out, struct err *e)
{
    out->len = prefix;
    if (out->data)
        out->data[prefix] = 0;
    return render(p, c, msgs, start, probe, out, e);
}

// Truncation (templates.md §8, Ollama's chatPrompt), the one loop of every
// engine: the messages from start on, with the system messages before start
// kept, until the prompt fits n_ctx tokens or only the last message is left.
static int render_truncated(struct prompt *p, const struct engine_call *c, engine_fn render,
                            json_t *msgs, const struct prompt_input *in, struct buf *out,
                            struct err *e)
{
    size_t n = json_array_size(msgs);
    bool truncate = in->truncate && in->count;
    size_t prefix = out->len;
    int rc = 0;
    for (size_t start = 0;; start++) {
        bool last = !truncate || start + 1 >= n;
        rc = render_at(p, c, render, msgs, start, !last, prefix, out, e);
        if (rc < 0 || last)
            break;
        int64_t nt = in->count(in->count_ctx, buf_cstr(out) + prefix, out->len - prefix, e);
        if (nt < 0) {
            rc = (int)nt;
            break;
        }
        if (nt <= in->n_ctx) {
            if (c->probes_differ)
                rc = render_at(p, c, render, msgs, start, false, prefix, out, e);
            break;
        }
    }
    if (rc == 0 && out->data)
        out->data[out->len] = 0;
    return rc;
}

// The built-in renderer / parser path: the parser is made first (harmony
// renames the tools the prompt shows), then the prompt comes from the named
// renderer, or from the Go template when only a parser is named.
static int builtin_prompt(struct prompt *p, const struct prompt_input *in, json_t *msgs,
                          struct buf *out, struct err *e)
{
    struct renderer_think th = {in->think.set, in->think.on, in->think.level};
    size_t n = json_array_size(msgs);
    json_t *last = n ? json_array_get(msgs, n - 1) : NULL;
    json_t *tools = in->chat ? in->tools : NULL;
    if (p->builtin.parser) {
        struct renderer_parser *bp;
        int rc = renderer_parser_new(&bp, p->builtin.parser, tools, in->chat ? last : NULL, &th, e);
        if (rc < 0)
            return rc;
        p->parser = prompt_parser_wrap_renderer(bp);
    }
    json_t *ptools = p->parser ? renderer_parser_prompt_tools(p->parser->impl) : json_incref(tools);
    struct engine_call c = {.tools = ptools, .rthink = &th, .think = template_think_of(&in->think)};
    int rc = render_truncated(p, &c, render_builtin, msgs, in, out, e);
    json_decref(ptools);
    return rc;
}

static int jinja_prompt(struct prompt *p, const struct prompt_input *in, json_t *msgs,
                        struct buf *out, struct err *e)
{
    bool owned;
    struct engine_call c = {.tools = in->tools, .think = template_think_of(&in->think)};
    int rc = jinja_get(p->pc.chat_template, &c.jinja, &owned, e);
    if (rc) {
        err_prefix(e, "chat template");
        return rc;
    }
    rc = render_truncated(p, &c, render_jinja, msgs, in, out, e);
    if (owned)
        jinja_free((struct jinja_template *)c.jinja);
    if (rc == ERR_FORMAT)
        err_prefix(e, "chat template");
    return rc;
}

static int go_prompt(struct prompt *p, const struct prompt_input *in, json_t *msgs, struct buf *out,
                     struct err *e)
{
    if (!msgs) {  // suffix mode, which only the Go template renders
        struct template_prompt_req pr = {.tools = in->tools,
                                         .think = template_think_of(&in->think),
                                         .prompt = in->prompt,
                                         .suffix = in->suffix};
        return template_render_prompt(p->tmpl, &pr, out, NULL, e);
    }
    struct engine_call c = {
        .tools = in->tools, .think = template_think_of(&in->think), .probes_differ = true};
    return render_truncated(p, &c, render_go, msgs, in, out, e);
}

// ---------------------------------------------------------------------------
// Rendering

// The chat or generate messages (templates.md §7.1); NULL for suffix mode.
// Thinking is removed from earlier assistant turns for the qwen3 family and
// deepseek-r1 on a Go template with thinking tags, as Ollama does.
static int assemble(struct prompt *p, const struct prompt_input *in, json_t **msgs, struct err *e)
{
    *msgs = NULL;
    if (in->chat) {
        const char *open = NULL, *close = NULL;
        bool strip = p->pc.source != PROMPT_CHAT_TEMPLATE &&
                     template_thinking_tags(p->tmpl, &open, &close) &&
                     (strstr(p->family, "qwen3") ||
                      (in->model_name && strstr(in->model_name, "deepseek-r1")));
        *msgs = template_chat_messages(in->history, in->messages, in->model_system, strip, e);
        return *msgs ? 0 : ERR_INVALID;
    }
    if (in->suffix && *in->suffix && in->prompt && *in->prompt)
        return 0;
    const char *system = in->system ? in->system : in->model_system;
    json_t *history = in->has_context ? NULL : in->history;
    *msgs = template_generate_messages(system, history, in->prompt ? in->prompt : "", in->images);
    return 0;
}

int prompt_render(struct prompt *p, const struct prompt_input *in, struct buf *out, struct err *e)
{
    if (in->raw)
        return buf_append_str(out, in->prompt ? in->prompt : "");
    json_t *msgs;
    int rc = assemble(p, in, &msgs, e);
    if (rc < 0)
        return rc;
    if (p->builtin.active && msgs)
        rc = builtin_prompt(p, in, msgs, out, e);
    else if (p->pc.source == PROMPT_CHAT_TEMPLATE && msgs)
        rc = jinja_prompt(p, in, msgs, out, e);
    else
        rc = go_prompt(p, in, msgs, out, e);
    json_decref(msgs);
    return rc;
}

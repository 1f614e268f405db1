// The renderer and parser tables (Ollama's rendererForName and
// ParserForName) and the public API over them.
#include "renderer/renderer.h"

#include <stdlib.h>
#include <string.h>

#include "renderer/internal.h"

// One row per renderer name (Ollama's rendererForName); the variant selects
// a family's options.
// clang-format off
static const struct rnd_renderer renderers[] = {
    {"qwen3-coder",     rnd_render_qwen3coder,   0},
    {"harmony",         rnd_render_harmony,      0},
    {"qwen3.5",         rnd_render_qwen35,       0},
    {"qwen3.8",         rnd_render_qwen35,       1},
    {"ornith",          rnd_render_qwen35,       2},
    {"deepseek3.1",     rnd_render_deepseek3,    0},
    {"cogito",          rnd_render_cogito,       0},
    {"olmo3",           rnd_render_olmo3,        0},
    {"olmo3.1",         rnd_render_olmo3,        1},
    {"olmo3-think",     rnd_render_olmo3_think,  1},
    {"olmo3-32b-think", rnd_render_olmo3_think,  0},
    {"glm-4.7",         rnd_render_glm47,        0},
    {"glm-ocr",         rnd_render_glmocr,       0},
    {"qwen3-vl-instruct", rnd_render_qwen3vl,    0},
    {"qwen3-vl-thinking", rnd_render_qwen3vl,    1},
    {"nemotron-3-nano",   rnd_render_nemotron,   0},
    {"nemotron-3.5-nano", rnd_render_nemotron,   1},
    {"cohere",          rnd_render_cohere,       0},
    {"lfm2",            rnd_render_lfm2,         0},
    {"lfm2-thinking",   rnd_render_lfm2,         1},
    {"laguna",          rnd_render_laguna,       0},
    {"poolside-v1",     rnd_render_laguna,       1},
    {"glimmer",         rnd_render_glimmer,      0},
    {"gemma4",          rnd_render_gemma4,       0},
    {"gemma4-small",    rnd_render_gemma4,       0},
    {"gemma4-large",    rnd_render_gemma4,       1},
    {"functiongemma",   rnd_render_functiongemma, 0},
};
// clang-format on
#define N_RENDERERS (sizeof(renderers) / sizeof(renderers[0]))

// passthrough: the text is content.
static int passthrough_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    (void)e;
    int rc = buf_append(o->content, p->acc.data ? p->acc.data : "", p->acc.len);
    buf_reset(&p->acc);
    return rc;
}

static const struct rnd_parser_kind parsers[] = {
    {"qwen3", true, false, 0, rnd_qwen3_init, rnd_qwen3_add, NULL},
    {"qwen3-thinking", true, true, 1, rnd_qwen3_init, rnd_qwen3_add, NULL},
    {"qwen3-coder", true, false, 0, NULL, rnd_qwen3coder_add, NULL},
    {"harmony", true, true, 0, rnd_harmony_init, rnd_harmony_add, rnd_harmony_deinit},
    {"qwen3.5", true, true, 0, rnd_qwen35_init, rnd_qwen35_add, rnd_qwen35_deinit},
    {"ornith", true, true, 0, rnd_qwen35_init, rnd_qwen35_add, rnd_qwen35_deinit},
    {"deepseek3", true, true, 0, rnd_deepseek3_init, rnd_deepseek3_add, NULL},
    {"cogito", true, true, 1, rnd_deepseek3_init, rnd_deepseek3_add, NULL},
    {"olmo3", true, false, 0, NULL, rnd_olmo3_add, NULL},
    {"olmo3-think", false, true, 2, rnd_deepseek3_init, rnd_deepseek3_add, NULL},
    {"ministral", true, false, 0, rnd_ministral_init, rnd_ministral_add, rnd_ministral_deinit},
    {"glm-4.7", true, true, 0, rnd_glm47_init, rnd_glm47_add, NULL},
    {"glm-ocr", true, false, 1, rnd_glm47_init, rnd_glm47_add, NULL},
    {"qwen3-vl-instruct", true, false, 0, rnd_qwen3vl_init, rnd_qwen3vl_add, NULL},
    {"qwen3-vl-thinking", true, true, 1, rnd_qwen3vl_init, rnd_qwen3vl_add, NULL},
    {"nemotron-3-nano", true, true, 1, rnd_qwen35_init, rnd_qwen35_add, rnd_qwen35_deinit},
    {"nemotron-3.5-nano", true, true, 1, rnd_qwen35_init, rnd_qwen35_add, rnd_qwen35_deinit},
    {"cohere", true, true, 0, rnd_cohere_init, rnd_cohere_add, NULL},
    {"lfm2", true, false, 0, rnd_lfm2_init, rnd_lfm2_add, rnd_lfm2_deinit},
    {"lfm2-thinking", true, true, 1, rnd_lfm2_init, rnd_lfm2_add, rnd_lfm2_deinit},
    {"laguna", true, true, 0, rnd_laguna_init, rnd_laguna_add, rnd_laguna_deinit},
    {"poolside-v1", true, true, 1, rnd_laguna_init, rnd_laguna_add, rnd_laguna_deinit},
    {"glimmer", true, true, 0, rnd_glimmer_init, rnd_glimmer_add, rnd_glimmer_deinit},
    {"gemma4", true, true, 1, rnd_gemma4_init, rnd_gemma4_add, rnd_gemma4_deinit},
    {"gemma4-no-thinking", true, false, 0, rnd_gemma4_init, rnd_gemma4_add, rnd_gemma4_deinit},
    {"functiongemma", true, false, 0, NULL, rnd_functiongemma_add, NULL},
    {"passthrough", false, false, 0, NULL, passthrough_add, NULL},
};
#define N_PARSERS (sizeof(parsers) / sizeof(parsers[0]))

static const struct rnd_renderer *find_renderer(const char *name)
{
    for (size_t i = 0; name && i < N_RENDERERS; i++)
        if (strcmp(renderers[i].name, name) == 0)
            return &renderers[i];
    return NULL;
}

static const struct rnd_parser_kind *find_parser(const char *name)
{
    for (size_t i = 0; name && i < N_PARSERS; i++)
        if (strcmp(parsers[i].name, name) == 0)
            return &parsers[i];
    return NULL;
}

bool renderer_known(const char *name)
{
    return find_renderer(name) != NULL;
}

bool renderer_parser_known(const char *name)
{
    return find_parser(name) != NULL;
}

const char *const *renderer_names(void)
{
    static const char *names[N_RENDERERS + 1];
    for (size_t i = 0; i < N_RENDERERS; i++)
        names[i] = renderers[i].name;
    return names;
}

const char *const *renderer_parser_names(void)
{
    static const char *names[N_PARSERS + 1];
    for (size_t i = 0; i < N_PARSERS; i++)
        names[i] = parsers[i].name;
    return names;
}

// Messages must be objects with a string role; fields used as text must be
// strings when present.
static int check_messages(json_t *msgs, struct err *e)
{
    if (!json_is_array(msgs))
        return err_set(e, ERR_INVALID, "messages must be an array");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")))
            return err_set(e, ERR_INVALID, "message %zu: role must be a string", i);
        static const char *const text[] = {"content", "thinking", "tool_name"};
        for (size_t k = 0; k < 3; k++) {
            json_t *v = json_object_get(m, text[k]);
            if (v && !json_is_string(v) && !json_is_null(v))
                return err_set(e, ERR_INVALID, "message %zu: %s must be a string", i, text[k]);
        }
        json_t *calls = json_object_get(m, "tool_calls");
        if (calls && !json_is_array(calls) && !json_is_null(calls))
            return err_set(e, ERR_INVALID, "message %zu: tool_calls must be an array", i);
    }
    return 0;
}

int renderer_render(const char *name, json_t *messages, json_t *tools,
                    const struct renderer_think *think, struct buf *out, struct err *e)
{
    const struct rnd_renderer *r = find_renderer(name);
    if (!r)
        return err_set(e, ERR_NOT_FOUND, "unknown renderer \"%s\"", name ? name : "");
    int rc = check_messages(messages, e);
    if (rc < 0)
        return rc;
    if (tools && !json_is_array(tools) && !json_is_null(tools))
        return err_set(e, ERR_INVALID, "tools must be an array");
    rc = r->render(messages, json_is_array(tools) ? tools : NULL, think, r->variant, out, e);
    if (rc == 0 && out->max_len && out->len > out->max_len)
        rc = err_set(e, ERR_TOO_LARGE, "rendered prompt too large");
    return rc;
}

bool renderer_parser_tools(const char *name)
{
    const struct rnd_parser_kind *k = find_parser(name);
    return k && k->tools;
}

bool renderer_parser_thinking(const char *name)
{
    const struct rnd_parser_kind *k = find_parser(name);
    return k && k->thinking;
}

int renderer_parser_new(struct renderer_parser **out, const char *name, json_t *tools, json_t *last,
                        const struct renderer_think *think, struct err *e)
{
    const struct rnd_parser_kind *k = find_parser(name);
    if (!k)
        return err_set(e, ERR_NOT_FOUND, "unknown parser \"%s\"", name ? name : "");
    struct renderer_parser *p = xcalloc(1, sizeof(*p));
    p->kind = k;
    p->variant = k->variant;
    p->tools = json_is_array(tools) ? json_incref(tools) : NULL;
    p->prompt_tools = json_incref(p->tools);
    buf_init(&p->acc, 0);
    int rc = k->init ? k->init(p, last, think, k->variant, e) : 0;
    if (rc < 0) {
        renderer_parser_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void renderer_parser_free(struct renderer_parser *p)
{
    if (!p)
        return;
    if (p->kind->deinit)
        p->kind->deinit(p);
    json_decref(p->tools);
    json_decref(p->prompt_tools);
    buf_deinit(&p->acc);
    free(p);
}

json_t *renderer_parser_prompt_tools(struct renderer_parser *p)
{
    return json_incref(p->prompt_tools);
}

int renderer_parser_add(struct renderer_parser *p, const char *s, size_t n, bool done,
                        struct buf *content, struct buf *thinking, json_t *calls, struct err *e)
{
    int rc = buf_append(&p->acc, s ? s : "", n);
    if (rc < 0)
        return err_set(e, rc, "%s: output too large", p->kind->name);
    struct rnd_out o = {content, thinking, calls};
    return p->kind->add(p, done, &o, e);
}

const char *renderer_resolve(const char *renderer, const char *model_name, const char *model_type)
{
    if (renderer && strcmp(renderer, "gemma4") == 0)
        return rnd_gemma4_resolve(model_name, model_type);
    return renderer;
}

void renderer_select(const char *renderer, const char *parser, const char *family,
                     const char *template_text, struct renderer_choice *out)
{
    memset(out, 0, sizeof(*out));
    out->renderer = renderer && *renderer ? renderer : NULL;
    out->parser = parser && *parser ? parser : NULL;
    bool gptoss = family && (strcmp(family, "gptoss") == 0 || strcmp(family, "gpt-oss") == 0);
    if (gptoss && template_text && strstr(template_text, "<|start|>") &&
        strstr(template_text, "<|end|>")) {
        out->harmony = true;
        if (!out->parser)
            out->parser = "harmony";
    }
    out->active = out->renderer || out->parser;
}

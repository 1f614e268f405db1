// Prompt source selection as Ollama 0.33 does it (server/images.go:
// selectedTemplateSource, shouldPreferChatTemplate, goTemplateCapabilities,
// chatTemplateCapabilities; server/routes.go: shouldUseGoTemplate,
// shouldUseHarmony), the capabilities of the chosen source, and the engines'
// names as the store checks them.
#include "prompt/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"
#include "renderer/renderer.h"
#include "template/template.h"

static bool has(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
}

// Go template capabilities (the same reading prompt_source_caps does).
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

static bool is_harmony(const struct prompt_model *m)
{
    const char *fam = m->family;
    return fam && (!strcmp(fam, "gptoss") || !strcmp(fam, "gpt-oss")) &&
           has(m->template_text, "<|start|>") && has(m->template_text, "<|end|>");
}

void prompt_choose(const struct prompt_model *m, struct prompt_choice *out)
{
    memset(out, 0, sizeof *out);
    struct prompt_facts f;
    if (prompt_facts_get(m->model_path, &f)) {
        out->chat_template = f.chat_template;  // moved, not copied
        out->bos_token = f.bos_token;
        out->eos_token = f.eos_token;
        out->tokenizer_adds_bos = f.adds_bos;
    }
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
    if ((m->renderer && *m->renderer) || (m->parser && *m->parser))
        out->source = PROMPT_RENDERER;
    else if (has_go && is_harmony(m))
        out->source = PROMPT_HARMONY;
    else if (use_go)
        out->source = PROMPT_GO_TEMPLATE;
    else if (out->chat_template)
        out->source = PROMPT_CHAT_TEMPLATE;
    else
        out->source = PROMPT_NONE;
}

void prompt_choice_deinit(struct prompt_choice *c)
{
    free(c->chat_template);
    free(c->bos_token);
    free(c->eos_token);
    memset(c, 0, sizeof *c);
}

const char *prompt_source_name(const struct prompt_model *m, enum prompt_source s)
{
    bool r = m->renderer && *m->renderer, p = m->parser && *m->parser;
    switch (s) {
    case PROMPT_RENDERER:
        return r && p ? "renderer_parser" : r ? "renderer" : "parser";
    case PROMPT_HARMONY:
        return "harmony";
    case PROMPT_GO_TEMPLATE:
        return "go_template";
    case PROMPT_CHAT_TEMPLATE:
        return "gguf_chat_template";
    default:
        return "none";
    }
}

void prompt_source_caps(const struct prompt_model *m, struct prompt_caps *out)
{
    memset(out, 0, sizeof *out);
    struct prompt_choice pc;
    prompt_choose(m, &pc);
    if (pc.source == PROMPT_GO_TEMPLATE) {
        const char *t = m->template_text;
        out->tools = has(t, ".Tools");
        out->insert = has(t, ".Suffix");
        out->thinking = has(t, ".Thinking") || has(t, ".IsThinkSet");
    } else if (pc.source == PROMPT_CHAT_TEMPLATE) {
        out->tools = jinja_chat_has_tools(pc.chat_template);
        out->thinking = jinja_chat_has_thinking(pc.chat_template);
    }
    prompt_choice_deinit(&pc);
}

bool prompt_renderer_known(const char *name)
{
    return renderer_known(name);
}

bool prompt_parser_known(const char *name)
{
    return renderer_parser_known(name);
}

bool prompt_parser_tools(const char *name)
{
    return renderer_parser_tools(name);
}

bool prompt_parser_thinking(const char *name)
{
    return renderer_parser_thinking(name);
}

int prompt_go_template_check(const char *text, struct err *e)
{
    struct template *t = NULL;
    struct err pe = {0};
    int rc = template_parse(&t, text, strlen(text), &pe);
    template_free(t);
    if (rc < 0)
        return err_set(e, ERR_INVALID, "template error: %s", pe.msg);
    return 0;
}

bool prompt_go_template_detect(const char *chat_template, const char **name, const char **text,
                               const char *const **stops)
{
    const char *n = template_detect(chat_template, strlen(chat_template));
    if (!n)
        return false;
    *name = n;
    *text = template_builtin(n);
    *stops = template_builtin_stops(n);
    return *text != NULL;
}

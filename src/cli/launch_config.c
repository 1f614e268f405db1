// The config files `ollama launch` writes for the tools that keep their
// model settings on disk (as Ollama 0.33's cmd/launch does): one writer per
// file, each turning the user's current bytes into the new bytes, so the
// user's own keys survive and a test can check each format. Writing goes
// through launch_backup.c, which keeps the user's original for --restore.
#include "cli/launch.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---------------------------------------------------------------------------
// JSON helpers

// The object at parent[key], replacing a missing or non-object value.
json_t *launch_obj_at(json_t *parent, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (json_is_object(v))
        return v;
    v = json_object();
    json_object_set_new(parent, key, v);
    return v;
}

// The array at parent[key], replacing a missing or non-array value.
static json_t *arr_at(json_t *parent, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (json_is_array(v))
        return v;
    v = json_array();
    json_object_set_new(parent, key, v);
    return v;
}

static char *url_v1(const struct launch_target *t)
{
    return xasprintf("%s/v1", t->host);
}

// Parses the user's file as a JSON object (an empty or missing file is {}).
static int parse_old_object(const struct buf *old, json_t **out, struct err *e)
{
    if (!old || old->len == 0) {
        *out = json_object();
        return 0;
    }
    int rc = jsonx_parse(old->data, old->len, out, e);
    if (rc < 0)
        return rc;
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return err_set(e, ERR_FORMAT, "not a JSON object");
    }
    return 0;
}

// Writes v as MarshalIndent does (two spaces, insertion order).
static int dump_indented(json_t *v, struct buf *out, struct err *e)
{
    int rc = jsonx_dump(v, JSONX_INDENT | JSONX_NO_HTML_ESCAPE, out, e);
    json_decref(v);
    return rc;
}

// ---------------------------------------------------------------------------
// JSON writers

// Cline: ~/.cline/data/settings/providers.json, the "ollama" provider.
static int write_cline_providers(const struct launch_target *t, const struct buf *old,
                                 struct buf *out, struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *provider = launch_obj_at(launch_obj_at(cfg, "providers"), "ollama");
    json_t *settings = launch_obj_at(provider, "settings");
    char *base = url_v1(t);
    jsonx_set_str(settings, "provider", "ollama");
    jsonx_set_str(settings, "model", t->model);
    jsonx_set_str(settings, "baseUrl", base);
    json_object_del(settings, "apiKey");
    char stamp[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    jsonx_set_str(provider, "updatedAt", stamp);
    jsonx_set_str(provider, "tokenSource", "manual");
    jsonx_set_int(cfg, "version", 1);
    jsonx_set_str(cfg, "lastUsedProvider", "ollama");
    free(base);
    return dump_indented(cfg, out, e);
}

// Cline's older globalState.json: act and plan mode on the Ollama provider.
static int write_cline_state(const struct launch_target *t, const struct buf *old, struct buf *out,
                             struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    static const char *const modes[] = {"actMode", "planMode"};
    jsonx_set_str(cfg, "ollamaBaseUrl", t->host);
    for (size_t i = 0; i < 2; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%sApiProvider", modes[i]);
        jsonx_set_str(cfg, key, "ollama");
        snprintf(key, sizeof(key), "%sOllamaModelId", modes[i]);
        jsonx_set_str(cfg, key, t->model);
        snprintf(key, sizeof(key), "%sOllamaBaseUrl", modes[i]);
        jsonx_set_str(cfg, key, t->host);
    }
    jsonx_set_bool(cfg, "welcomeViewCompleted", true);
    return dump_indented(cfg, out, e);
}

// Droid: ~/.factory/settings.json, Ollama's entries (apiKey "ollama") first
// in customModels, the user's own kept after them.
static int write_droid(const struct launch_target *t, const struct buf *old, struct buf *out,
                       struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *models = json_array();
    char *base = url_v1(t);
    char *id = xasprintf("custom:%s-0", t->model);
    json_array_append_new(models,
                          json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:i}", "model", t->model,
                                    "displayName", t->model, "baseUrl", base, "apiKey", "ollama",
                                    "provider", "generic-chat-completion-api", "maxOutputTokens",
                                    64000, "supportsImages", t->vision, "id", id, "index", 0));
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(cfg, "customModels"), i, m)
    {
        if (json_is_object(m) && !json_equal(json_object_get(m, "apiKey"),
                                             json_object_get(json_array_get(models, 0), "apiKey")))
            json_array_append(models, m);
    }
    json_object_set_new(cfg, "customModels", models);
    json_t *session = launch_obj_at(cfg, "sessionDefaultSettings");
    jsonx_set_str(session, "model", id);
    static const char *const efforts[] = {"high", "medium", "low", "none"};
    const char *effort = json_string_value(json_object_get(session, "reasoningEffort"));
    bool valid = false;
    for (size_t k = 0; effort && k < 4; k++)
        valid |= strcmp(effort, efforts[k]) == 0;
    if (!valid)
        jsonx_set_str(session, "reasoningEffort", "none");
    free(base);
    free(id);
    return dump_indented(cfg, out, e);
}

// OpenCode: ~/.local/state/opencode/model.json, the model first among the
// recent ones so OpenCode's picker offers it.
static int write_opencode_state(const struct launch_target *t, const struct buf *old,
                                struct buf *out, struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *recent = json_array();
    json_array_append_new(recent,
                          json_pack("{s:s,s:s}", "providerID", "ollama", "modelID", t->model));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(cfg, "recent"), i, r)
    {
        const char *p = json_string_value(json_object_get(r, "providerID"));
        const char *m = json_string_value(json_object_get(r, "modelID"));
        if (!(p && m && strcmp(p, "ollama") == 0 && strcmp(m, t->model) == 0))
            json_array_append(recent, r);
    }
    json_object_set_new(cfg, "recent", recent);
    arr_at(cfg, "favorite");
    launch_obj_at(cfg, "variant");
    return dump_indented(cfg, out, e);
}

// One model entry of OpenClaw's and Pi's provider lists.
static json_t *model_entry(const struct launch_target *t, bool with_name)
{
    json_t *m = json_object();
    jsonx_set_str(m, "id", t->model);
    if (with_name)
        jsonx_set_str(m, "name", t->model);
    json_object_set_new(m, "input",
                        t->vision ? json_pack("[s,s]", "text", "image") : json_pack("[s]", "text"));
    if (t->thinking)
        jsonx_set_bool(m, "reasoning", true);
    if (t->context > 0)
        jsonx_set_int(m, "contextWindow", t->context);
    return m;
}

// OpenClaw: ~/.openclaw/openclaw.json, models.providers.ollama and the
// default agent model "ollama/<model>".
static int write_openclaw(const struct launch_target *t, const struct buf *old, struct buf *out,
                          struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *ollama =
        launch_obj_at(launch_obj_at(launch_obj_at(cfg, "models"), "providers"), "ollama");
    jsonx_set_str(ollama, "baseUrl", t->host);
    jsonx_set_str(ollama, "apiKey", "ollama-local");
    jsonx_set_str(ollama, "api", "ollama");
    json_t *entry = model_entry(t, true);
    json_object_set_new(
        entry, "cost",
        json_pack("{s:i,s:i,s:i,s:i}", "input", 0, "output", 0, "cacheRead", 0, "cacheWrite", 0));
    // Keys the user added to this model's entry stay.
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(ollama, "models"), i, m)
    {
        const char *id = json_string_value(json_object_get(m, "id"));
        if (id && strcmp(id, t->model) == 0)
            json_object_update_missing(entry, m);
    }
    json_object_set_new(ollama, "models", json_pack("[o]", entry));
    char *primary = xasprintf("ollama/%s", t->model);
    jsonx_set_str(launch_obj_at(launch_obj_at(launch_obj_at(cfg, "agents"), "defaults"), "model"),
                  "primary", primary);
    free(primary);
    return dump_indented(cfg, out, e);
}

// Pi: ~/.pi/agent/models.json, the "ollama" provider; entries Ollama manages
// carry "_launch": true, the user's own entries are kept.
static int write_pi_models(const struct launch_target *t, const struct buf *old, struct buf *out,
                           struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *providers = launch_obj_at(cfg, "providers");
    json_t *ollama = json_object_get(providers, "ollama");
    if (!json_is_object(ollama)) {
        char *base = url_v1(t);
        ollama = json_pack("{s:s,s:s,s:s}", "baseUrl", base, "api", "openai-completions", "apiKey",
                           "ollama");
        json_object_set_new(providers, "ollama", ollama);
        free(base);
    }
    json_t *models = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(ollama, "models"), i, m)
    {
        const char *id = json_string_value(json_object_get(m, "id"));
        if (id && !json_is_true(json_object_get(m, "_launch")))
            json_array_append(models, m);
    }
    json_t *entry = model_entry(t, false);
    jsonx_set_bool(entry, "_launch", true);
    json_array_append_new(models, entry);
    json_object_set_new(ollama, "models", models);
    return dump_indented(cfg, out, e);
}

// Pi: ~/.pi/agent/settings.json, the default provider and model.
static int write_pi_settings(const struct launch_target *t, const struct buf *old, struct buf *out,
                             struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    jsonx_set_str(cfg, "defaultProvider", "ollama");
    jsonx_set_str(cfg, "defaultModel", t->model);
    return dump_indented(cfg, out, e);
}

// Qwen Code: ~/.qwen/settings.json, an OpenAI-compatible provider on
// OLLAMA_HOST/v1 with its key in OLLAMA_API_KEY, selected for auth and model.
static int write_qwen(const struct launch_target *t, const struct buf *old, struct buf *out,
                      struct err *e)
{
    json_t *cfg;
    int rc = parse_old_object(old, &cfg, e);
    if (rc < 0)
        return rc;
    char *base = url_v1(t);
    jsonx_set_str(launch_obj_at(cfg, "env"), "OLLAMA_API_KEY", "ollama");
    char *name = xasprintf("%s (Ollama)", t->model);
    json_t *list = json_array();
    json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:s}", "id", t->model, "name", name,
                                          "baseUrl", base, "envKey", "OLLAMA_API_KEY"));
    json_t *providers = launch_obj_at(cfg, "modelProviders");
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(providers, "openai"), i, p)
    {
        const char *key = json_string_value(json_object_get(p, "envKey"));
        if (!key || strcmp(key, "OLLAMA_API_KEY") != 0)
            json_array_append(list, p);
    }
    json_object_set_new(providers, "openai", list);
    json_t *auth = launch_obj_at(launch_obj_at(cfg, "security"), "auth");
    jsonx_set_str(auth, "selectedType", "openai");
    jsonx_set_str(auth, "baseUrl", base);
    jsonx_set_str(launch_obj_at(cfg, "model"), "name", t->model);
    free(name);
    free(base);
    return dump_indented(cfg, out, e);
}

// VS Code: chatLanguageModels.json, one "ollama" vendor entry (others kept).
static int write_vscode(const struct launch_target *t, const struct buf *old, struct buf *out,
                        struct err *e)
{
    json_t *list = NULL;
    if (old && old->len > 0) {
        int rc = jsonx_parse(old->data, old->len, &list, e);
        if (rc < 0)
            return rc;
        if (!json_is_array(list)) {
            json_decref(list);
            return err_set(e, ERR_FORMAT, "not a JSON array");
        }
    }
    json_t *kept = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *vendor = json_string_value(json_object_get(v, "vendor"));
        if (!vendor || strcmp(vendor, "ollama") != 0)
            json_array_append(kept, v);
    }
    json_decref(list);
    json_array_append_new(
        kept, json_pack("{s:s,s:s,s:s}", "vendor", "ollama", "name", "Ollama", "url", t->host));
    return dump_indented(kept, out, e);
}

// Codex: ~/.codex/model.json, the model catalog Codex reads the context
// window from (as 0.33's buildCodexModelEntry).
static int write_codex_catalog(const struct launch_target *t, const struct buf *old,
                               struct buf *out, struct err *e)
{
    (void)old;
    json_t *entry =
        json_pack("{s:s,s:s,s:I,s:s,s:s,s:b,s:i,s:{s:s,s:i},s:o,s:s,s:b,s:s,s:b,s:b,s:[],s:[]}",
                  "slug", t->model, "display_name", t->model, "context_window",
                  (json_int_t)(t->context > 0 ? t->context : LAUNCH_CODEX_FALLBACK_CONTEXT),
                  "shell_type", "default", "visibility", "list", "supported_in_api", 1, "priority",
                  0, "truncation_policy", "mode", "bytes", "limit", 10000, "input_modalities",
                  t->vision ? json_pack("[s,s]", "text", "image") : json_pack("[s]", "text"),
                  "base_instructions", "", "support_verbosity", 1, "default_verbosity", "low",
                  "supports_parallel_tool_calls", 0, "supports_reasoning_summaries", 0,
                  "supported_reasoning_levels", "experimental_supported_tools");
    return dump_indented(json_pack("{s:[o]}", "models", entry), out, e);
}

// ---------------------------------------------------------------------------
// Text formats (TOML): the files Ollama owns outright. (YAML files are
// edited as trees in launch_config_yaml.c.)

// Appends s as a TOML double-quoted string.
static void append_quoted(struct buf *out, const char *s)
{
    buf_append_char(out, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_append_char(out, '\\');
        if ((unsigned char)*s < 0x20)
            buf_printf(out, "\\u%04x", (unsigned char)*s);
        else
            buf_append_char(out, *s);
    }
    buf_append_char(out, '"');
}

// Codex: ~/.codex/ollama-launch.config.toml, the profile `codex --profile
// ollama-launch` reads: model, provider, catalog, and the provider's table.
static int write_codex_profile(const struct launch_target *t, const struct buf *old,
                               struct buf *out, struct err *e)
{
    (void)old;
    (void)e;
    char *catalog = xasprintf("%s/.codex/model.json", t->home);
    char *base = url_v1(t);
    buf_append_str(out, "model = ");
    append_quoted(out, t->model);
    buf_append_str(out, "\nmodel_provider = \"ollama-launch\"\nmodel_catalog_json = ");
    append_quoted(out, catalog);
    buf_append_str(out, "\n\n[model_providers.ollama-launch]\nname = \"Ollama\"\nbase_url = ");
    append_quoted(out, base);
    buf_append_str(out, "\nwire_api = \"responses\"\n");
    free(catalog);
    free(base);
    return 0;
}

const struct launch_file launch_files_cline[] = {
    {".cline/data/settings/providers.json", write_cline_providers},
    {".cline/data/globalState.json", write_cline_state},
    {NULL, NULL}};
const struct launch_file launch_files_codex[] = {
    {".codex/model.json", write_codex_catalog},
    {".codex/ollama-launch.config.toml", write_codex_profile},
    {NULL, NULL}};
const struct launch_file launch_files_droid[] = {{".factory/settings.json", write_droid},
                                                 {NULL, NULL}};
const struct launch_file launch_files_opencode[] = {
    {".local/state/opencode/model.json", write_opencode_state}, {NULL, NULL}};
const struct launch_file launch_files_openclaw[] = {{".openclaw/openclaw.json", write_openclaw},
                                                    {NULL, NULL}};
const struct launch_file launch_files_pi[] = {{".pi/agent/models.json", write_pi_models},
                                              {".pi/agent/settings.json", write_pi_settings},
                                              {NULL, NULL}};
const struct launch_file launch_files_qwen[] = {{".qwen/settings.json", write_qwen}, {NULL, NULL}};
const struct launch_file launch_files_vscode[] = {
    {".config/Code/User/chatLanguageModels.json", write_vscode}, {NULL, NULL}};

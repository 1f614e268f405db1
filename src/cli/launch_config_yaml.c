// Config writers for the tools that keep YAML (Hermes, OMP, DeepSeek
// Harness: read and written through launch_yaml.c) and for Muse's
// settings.json in a config root of launch's own. Each turns the current
// bytes into the new ones, as the writers in launch_config.c do.
#include "cli/launch.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

// One model as OMP and DeepSeek Harness list it: id, name, input kinds and
// the context window when known (0.33's ompModelConfig).
static json_t *model_row(const struct launch_target *t)
{
    json_t *m = json_object();
    jsonx_set_str(m, "id", t->model);
    jsonx_set_str(m, "name", t->model);
    json_object_set_new(m, "input",
                        t->vision ? json_pack("[s,s]", "text", "image") : json_pack("[s]", "text"));
    if (t->context > 0)
        jsonx_set_int(m, "contextWindow", t->context);
    return m;
}

static int dump_yaml(json_t *v, struct buf *out)
{
    launch_yaml_dump(v, out);
    json_decref(v);
    return 0;
}

// Hermes's toolsets with "web" added (0.33's mergeHermesToolsets): a list
// keeps its order, a comma-separated string becomes a list, anything else
// is Hermes's default ["hermes-cli", "web"].
static json_t *hermes_toolsets(json_t *cur)
{
    json_t *out = json_array();
    if (json_is_array(cur)) {
        json_array_extend(out, cur);
    } else if (json_is_string(cur)) {
        char *copy = xstrdup(json_string_value(cur));
        for (char *part = strtok(copy, ","); part; part = strtok(NULL, ",")) {
            part += strspn(part, " \t");
            size_t n = strlen(part);
            while (n > 0 && (part[n - 1] == ' ' || part[n - 1] == '\t'))
                part[--n] = '\0';
            if (n > 0)
                json_array_append_new(out, json_string(part));
        }
        free(copy);
    }
    const char *str = json_string_value(cur);
    if (!json_is_array(cur) && (!str || strspn(str, " \t\r\n") == strlen(str)))
        json_array_append_new(out, json_string("hermes-cli"));
    size_t i;
    json_t *v;
    bool web = false;
    json_array_foreach(out, i, v)
    {
        web |= json_is_string(v) && strcmp(json_string_value(v), "web") == 0;
    }
    if (!web)
        json_array_append_new(out, json_string("web"));
    return out;
}

// Hermes: $HERMES_HOME/config.yaml (~/.hermes), as 0.33's Hermes.Configure:
// the `model:` block on the launch-owned provider "ollama-launch", that
// provider under `providers:` (one picker row; the legacy "ollama" key
// goes), custom providers named "Ollama" dropped, and the web toolset.
static int write_hermes(const struct launch_target *t, const struct buf *old, struct buf *out,
                        struct err *e)
{
    json_t *cfg;
    int rc = launch_yaml_parse_mapping(old, &cfg, e);
    if (rc < 0)
        return rc;
    char *base = xasprintf("%s/v1", t->host);
    json_t *providers = launch_obj_at(cfg, "providers");
    json_t *entry = json_object_get(providers, "ollama-launch");
    if (!json_is_object(entry))
        entry = json_object_get(providers, "ollama");
    entry = json_is_object(entry) ? json_incref(entry) : json_object();
    jsonx_set_str(entry, "name", "Ollama");
    jsonx_set_str(entry, "api", base);
    jsonx_set_str(entry, "default_model", t->model);
    json_object_set_new(entry, "models", json_pack("[s]", t->model));
    json_object_set_new(providers, "ollama-launch", entry);
    json_object_del(providers, "ollama");
    json_t *custom = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(cfg, "custom_providers"), i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        if (!name || strcasecmp(name, "Ollama") != 0)
            json_array_append(custom, p);
    }
    if (json_array_size(custom))
        json_object_set(cfg, "custom_providers", custom);
    else
        json_object_del(cfg, "custom_providers");
    json_decref(custom);
    json_t *model = launch_obj_at(cfg, "model");
    jsonx_set_str(model, "provider", "ollama-launch");
    jsonx_set_str(model, "default", t->model);
    jsonx_set_str(model, "base_url", base);
    jsonx_set_str(model, "api_key", "ollama");
    json_object_set_new(cfg, "toolsets", hermes_toolsets(json_object_get(cfg, "toolsets")));
    free(base);
    return dump_yaml(cfg, out);
}

// OMP: <agent dir>/models.yml, the "ollama" provider (Responses API on
// OLLAMA_HOST/v1, no auth, Ollama model discovery) with the model first;
// keys the user added to its entry and their other models are kept.
static int write_omp_models(const struct launch_target *t, const struct buf *old, struct buf *out,
                            struct err *e)
{
    json_t *cfg;
    int rc = launch_yaml_parse_mapping(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *provider = launch_obj_at(launch_obj_at(cfg, "providers"), "ollama");
    char *base = xasprintf("%s/v1", t->host);
    jsonx_set_str(provider, "baseUrl", base);
    jsonx_set_str(provider, "api", "openai-responses");
    jsonx_set_str(provider, "auth", "none");
    json_object_set_new(provider, "discovery", json_pack("{s:s}", "type", "ollama"));
    free(base);
    json_t *entry = model_row(t), *models = json_array();
    json_t *prev = json_object_get(provider, "models");
    size_t i;
    json_t *m;
    json_array_foreach(prev, i, m)
    {
        const char *id = json_string_value(json_object_get(m, "id"));
        if (id && strcmp(id, t->model) == 0)
            json_object_update_missing(entry, m);
    }
    json_array_append_new(models, entry);
    json_array_foreach(prev, i, m)
    {
        const char *id = json_string_value(json_object_get(m, "id"));
        if (!json_is_object(m) || (id && *id && strcmp(id, t->model) != 0))
            json_array_append(models, m);
    }
    json_object_set_new(provider, "models", models);
    return dump_yaml(cfg, out);
}

// OMP: <agent dir>/config.yml, setupVersion 1 so OMP skips its first-run setup.
static int write_omp_config(const struct launch_target *t, const struct buf *old, struct buf *out,
                            struct err *e)
{
    (void)t;
    json_t *cfg;
    int rc = launch_yaml_parse_mapping(old, &cfg, e);
    if (rc < 0)
        return rc;
    jsonx_set_int(cfg, "setupVersion", 1);
    return dump_yaml(cfg, out);
}

// DeepSeek Harness: ~/.ollama/launch/dsh/settings.yaml, a settings document
// of launch's own (dsh reads it through the patch below, the user's DSH_HOME
// is not touched): the default agent model and the "ollama" provider,
// OpenAI chat completions with its key in OLLAMA_LAUNCH_DSH_API_KEY.
static int write_dsh_settings(const struct launch_target *t, const struct buf *old, struct buf *out,
                              struct err *e)
{
    json_t *cfg;
    int rc = launch_yaml_parse_mapping(old, &cfg, e);
    if (rc < 0)
        return rc;
    json_t *selected = launch_obj_at(cfg, "agent-default-model");
    jsonx_set_str(selected, "provider", "ollama");
    jsonx_set_str(selected, "model", t->model);
    json_t *provider =
        launch_obj_at(launch_obj_at(launch_obj_at(cfg, "llm-pi-ai"), "providers"), "ollama");
    char *base = xasprintf("%s/v1", t->host);
    jsonx_set_str(provider, "displayName", "Ollama");
    jsonx_set_str(provider, "apiKeyEnv", LAUNCH_DSH_KEY_ENV);
    jsonx_set_str(provider, "api", "openai-completions");
    jsonx_set_str(provider, "baseURL", base);
    json_object_set_new(provider, "models", json_pack("[o]", model_row(t)));
    free(base);
    return dump_yaml(cfg, out);
}

// DeepSeek Harness: ~/.ollama/launch/dsh/ollama.cordis.yml, the patch
// `dsh web --patch` applies: its settings provider reads the file above.
static int write_dsh_patch(const struct launch_target *t, const struct buf *old, struct buf *out,
                           struct err *e)
{
    (void)old;
    (void)e;
    char *path = xasprintf("%s/" LAUNCH_DSH_DIR "/settings.yaml", t->home);
    json_t *patch = json_pack("[{s:s,s:{s:s}}]", "id", "settings", "config", "path", path);
    free(path);
    return dump_yaml(patch, out);
}

// The user's own muse settings ($XDG_CONFIG_HOME/muse or ~/.config/muse),
// {} when there are none or they do not parse.
static json_t *muse_user_settings(const char *home)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    char *path = xdg && *xdg ? xasprintf("%s/muse/settings.json", xdg)
                             : xasprintf("%s/.config/muse/settings.json", home);
    struct buf b;
    buf_init(&b, 16u << 20);
    json_t *v = NULL;
    if (fs_read_all(path, 16u << 20, &b, NULL) == 0 &&
        jsonx_parse(b.data ? b.data : "", b.len, &v, NULL) == 0 && !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    buf_deinit(&b);
    free(path);
    return v ? v : json_object();
}

// Muse: ~/.ollama/launch/muse-config/muse/settings.json, handed to muse as
// XDG_CONFIG_HOME so a Meta-backed muse keeps its own file. The first launch
// starts from the user's settings (skills, hooks, MCP servers survive); then
// launch's file, where muse also records its own changes. Provider "meta"
// and profile "tbh" are what muse checks every catalog row against.
static int write_muse(const struct launch_target *t, const struct buf *old, struct buf *out,
                      struct err *e)
{
    json_t *cfg = NULL;
    if (old && old->len > 0) {
        int rc = jsonx_parse(old->data, old->len, &cfg, e);
        if (rc < 0)
            return rc;
        if (!json_is_object(cfg)) {
            json_decref(cfg);
            return err_set(e, ERR_FORMAT, "not a JSON object");
        }
    } else {
        cfg = muse_user_settings(t->home);
    }
    if (!json_object_get(cfg, "schema_version"))
        jsonx_set_int(cfg, "schema_version", 1);
    jsonx_set_str(cfg, "provider", "meta");
    jsonx_set_str(cfg, "model", t->model);
    char *base = xasprintf("%s/v1", t->host);
    json_object_set_new(cfg, "endpoint_transport",
                        json_pack("{s:s,s:s}", "base_url", base, "auth", "none"));
    free(base);
    int64_t ctx = t->context > 0 ? t->context : LAUNCH_MUSE_FALLBACK_LIMIT;
    int64_t output = ctx < LAUNCH_MUSE_FALLBACK_LIMIT ? ctx : LAUNCH_MUSE_FALLBACK_LIMIT;
    json_t *row =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:b,s:I,s:I,s:s}", "model_id", t->model, "provider_id",
                  "meta", "profile_id", "tbh", "display_label", t->model, "visibility", "visible",
                  "display_order", 0, "is_default", 1, "context_limit", (json_int_t)ctx,
                  "output_limit", (json_int_t)output, "description", "Served by Ollama");
    json_object_set_new(cfg, "model_catalog", json_pack("[o]", row));
    int rc = jsonx_dump(cfg, JSONX_INDENT | JSONX_NO_HTML_ESCAPE, out, e);
    json_decref(cfg);
    return rc;
}

const struct launch_file launch_files_hermes[] = {{"$HERMES_HOME/config.yaml", write_hermes},
                                                  {NULL, NULL}};
const struct launch_file launch_files_omp[] = {{"$OMP_AGENT/models.yml", write_omp_models},
                                               {"$OMP_AGENT/config.yml", write_omp_config},
                                               {NULL, NULL}};
const struct launch_file launch_files_dsh[] = {
    {LAUNCH_DSH_DIR "/settings.yaml", write_dsh_settings},
    {LAUNCH_DSH_DIR "/ollama.cordis.yml", write_dsh_patch},
    {NULL, NULL}};
const struct launch_file launch_files_muse[] = {
    {LAUNCH_MUSE_CONFIG "/muse/settings.json", write_muse}, {NULL, NULL}};

// The models 0.33 warns about before launching a coding tool
// (cmd/launch/deprecated_models.go): older families that do not call tools
// well. The picker leaves them out; one named with --model asks first
// ("... Launch with X anyway?", no by default) and names an agent-capable
// model from the server's recommendations instead.
#include "cli/launch.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

// Families deprecated whatever the tag.
static const char *const deprecated_families[] = {
    "codellama", "qwen2.5",  "qwen2.5-coder", "llama3",    "llama3.1",
    "llama3.2",  "llama3.3", "mistral",       "starcoder",
};

// Families deprecated only in some sizes ("" = no tag).
static const struct {
    const char *family;
    const char *tags[8];
} deprecated_tags[] = {
    {"deepseek-r1", {"", "latest", "1.5b", "7b", "8b", "14b", "32b", NULL}},
};

// The local model 0.33 recommends first when the server lists none.
#define FALLBACK_RECOMMENDATION "gemma4"

bool cli_launch_model_deprecated(const char *name)
{
    char ref[256];
    size_t n = 0;
    while (isspace((unsigned char)*name))
        name++;
    for (; *name && n + 1 < sizeof(ref); name++)
        ref[n++] = (char)tolower((unsigned char)*name);
    while (n > 0 && isspace((unsigned char)ref[n - 1]))
        n--;
    ref[n] = '\0';
    if (n > 6 && strcmp(ref + n - 6, ":cloud") == 0)
        ref[n - 6] = '\0';
    char *family = strrchr(ref, '/') ? strrchr(ref, '/') + 1 : ref;
    char *colon = strchr(family, ':');
    const char *tag = "";
    if (colon) {
        *colon = '\0';
        tag = colon + 1;
    }
    for (size_t i = 0; i < sizeof(deprecated_families) / sizeof(deprecated_families[0]); i++)
        if (strcmp(family, deprecated_families[i]) == 0)
            return true;
    for (size_t i = 0; i < sizeof(deprecated_tags) / sizeof(deprecated_tags[0]); i++) {
        if (strcmp(family, deprecated_tags[i].family) != 0)
            continue;
        for (size_t k = 0; deprecated_tags[i].tags[k]; k++)
            if (strcmp(tag, deprecated_tags[i].tags[k]) == 0)
                return true;
    }
    return false;
}

char *cli_launch_deprecated_prompt(const char *model, const char *label, const char *command,
                                   const char *recommended)
{
    if (!cli_launch_model_deprecated(model))
        return NULL;
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b, "%s does not work well with %s. ", model, label);
    if (recommended && *recommended)
        buf_printf(&b, "Try an agent-capable model like %s instead", recommended);
    else
        buf_append_str(&b, "Try a newer recommended agent-capable model instead");
    if (command && *command && recommended && *recommended)
        buf_printf(&b, ":\n  ollama launch %s --model %s", command, recommended);
    else
        buf_append_char(&b, '.');
    buf_printf(&b, "\n\nLaunch with %s anyway?", model);
    return buf_take(&b);
}

// The first local, not deprecated model the server recommends (this build
// reaches no cloud, so cloud recommendations are skipped as 0.33 skips them
// when cloud is disabled); 0.33's built-in first local one otherwise.
static char *local_recommendation(struct client *c)
{
    json_t *recs = NULL;
    char *out = NULL;
    if (client_call(c, "GET", "/api/experimental/model-recommendations", NULL, &recs, NULL) == 0) {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(recs, "recommendations"), i, m)
        {
            const char *name = json_string_value(json_object_get(m, "model"));
            if (!out && name && *name && !strstr(name, "cloud") &&
                !cli_launch_model_deprecated(name))
                out = xstrdup(name);
        }
    }
    json_decref(recs);
    return out ? out : xstrdup(FALLBACK_RECOMMENDATION);
}

int cli_launch_check_deprecated(struct client *c, const char *model, const char *label,
                                const char *command, bool yes)
{
    if (!cli_launch_model_deprecated(model))
        return 1;
    char *rec = local_recommendation(c);
    char *prompt = cli_launch_deprecated_prompt(model, label, command, rec);
    int ok = launch_ask(prompt, yes, false);
    free(prompt);
    free(rec);
    return ok;
}

// `ollama launch [INTEGRATION] [--model M] [--config] [-- ARGS...]`: starts a
// coding agent pointed at this Ollama server, as Ollama's cmd/launch does
// (docs/integrations/claude-code.mdx, codex.mdx, opencode.mdx).
//
// Each integration is a row of the table below: the program to find, how to
// install it, and the environment and arguments that route every model tier
// to OLLAMA_HOST with a dummy key. Like Ollama's launcher for these three,
// everything is passed through the environment and command-line overrides
// (Claude Code: ANTHROPIC_*; Codex: -c model_providers...; OpenCode:
// OPENCODE_CONFIG_CONTENT), so the user's own config files are never
// written and there is nothing to back up or restore. --config prints that
// setup instead of launching. Without an integration, a terminal gets a short
// menu and anything else the list.
#include "cli/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"

struct integration;
typedef void (*launch_setup_fn)(const struct integration *in, const char *host, const char *model,
                                json_t *env, json_t *args);

struct integration {
    const char *name;     // argument of ollama launch
    const char *display;  // "Claude Code"
    const char *program;  // looked up on PATH, then in fallbacks (relative to $HOME)
    const char *fallbacks[3];
    const char *install;  // how to install it
    launch_setup_fn setup;
};

static void set_env(json_t *env, const char *key, const char *value)
{
    jsonx_set_str(env, key, value);
}

static void add_arg(json_t *args, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_arg(json_t *args, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    jsonx_arr_append(args, json_string(s));
    free(s);
}

// Claude Code speaks the Anthropic Messages API (/v1/messages); every tier
// (opus, sonnet, haiku, subagents) is the chosen model.
static void setup_claude(const struct integration *in, const char *host, const char *model,
                         json_t *env, json_t *args)
{
    (void)in;
    set_env(env, "ANTHROPIC_BASE_URL", host);
    set_env(env, "ANTHROPIC_API_KEY", "");
    set_env(env, "ANTHROPIC_AUTH_TOKEN", "ollama");
    set_env(env, "CLAUDE_CODE_ATTRIBUTION_HEADER", "0");
    set_env(env, "DISABLE_ERROR_REPORTING", "1");
    set_env(env, "DISABLE_FEEDBACK_COMMAND", "1");
    set_env(env, "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1");
    static const char *const tiers[] = {
        "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"};
    for (size_t i = 0; i < sizeof(tiers) / sizeof(tiers[0]); i++)
        set_env(env, tiers[i], model);
    add_arg(args, "--model");
    add_arg(args, "%s", model);
}

// Codex speaks the Responses API (/v1/responses) through a provider of its
// own, defined with -c overrides as Ollama's launcher does.
static void setup_codex(const struct integration *in, const char *host, const char *model,
                        json_t *env, json_t *args)
{
    (void)in;
    set_env(env, "OPENAI_API_KEY", "ollama");
    static const char *const p = "ollama-launch";
    add_arg(args, "-c");
    add_arg(args, "model_provider=\"%s\"", p);
    add_arg(args, "-c");
    add_arg(args, "model_providers.%s.name=\"Ollama\"", p);
    add_arg(args, "-c");
    add_arg(args, "model_providers.%s.base_url=\"%s/v1\"", p, host);
    add_arg(args, "-c");
    add_arg(args, "model_providers.%s.wire_api=\"responses\"", p);
    add_arg(args, "-m");
    add_arg(args, "%s", model);
}

// OpenCode takes an inline config: an "ollama" provider (OpenAI-compatible,
// /v1) with the model, and that model as the default.
static void setup_opencode(const struct integration *in, const char *host, const char *model,
                           json_t *env, json_t *args)
{
    (void)in;
    (void)args;
    char base[600], id[700];
    snprintf(base, sizeof(base), "%s/v1", host);
    snprintf(id, sizeof(id), "ollama/%s", model);
    json_t *cfg = json_pack("{s:s,s:{s:{s:s,s:s,s:{s:s},s:{s:{s:s}}}},s:s}", "$schema",
                            "https://opencode.ai/config.json", "provider", "ollama", "npm",
                            "@ai-sdk/openai-compatible", "name", "Ollama", "options", "baseURL",
                            base, "models", model, "name", model, "model", id);
    char *text = jsonx_dumps(cfg, 0);
    set_env(env, "OPENCODE_CONFIG_CONTENT", text ? text : "{}");
    free(text);
    json_decref(cfg);
}

static const struct integration integrations[] = {
    {"claude",
     "Claude Code",
     "claude",
     {".local/bin/claude", ".claude/local/claude", NULL},
     "npm install -g @anthropic-ai/claude-code  (or: curl -fsSL https://claude.ai/install.sh | "
     "bash)",
     setup_claude},
    {"codex", "Codex", "codex", {NULL}, "npm install -g @openai/codex", setup_codex},
    {"opencode",
     "OpenCode",
     "opencode",
     {".opencode/bin/opencode", NULL},
     "npm install -g opencode-ai  (or: curl -fsSL https://opencode.ai/install | bash)",
     setup_opencode},
    {NULL, NULL, NULL, {NULL}, NULL, NULL},
};

static const struct integration *find_integration(const char *name)
{
    for (const struct integration *in = integrations; in->name; in++)
        if (strcmp(in->name, name) == 0)
            return in;
    return NULL;
}

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

// The program's path on PATH or in its fallbacks; NULL when not installed.
static char *find_program(const struct integration *in)
{
    const char *path = getenv("PATH");
    char *copy = xstrdup(path ? path : "");
    char *found = NULL;
    for (char *dir = copy, *next; dir && !found; dir = next) {
        next = strchr(dir, ':');
        if (next)
            *next++ = '\0';
        char *cand = xasprintf("%s/%s", *dir ? dir : ".", in->program);
        if (executable(cand))
            found = cand;
        else
            free(cand);
    }
    free(copy);
    const char *home = getenv("HOME");
    for (size_t i = 0; !found && home && in->fallbacks[i]; i++) {
        char *cand = xasprintf("%s/%s", home, in->fallbacks[i]);
        if (executable(cand))
            found = cand;
        else
            free(cand);
    }
    return found;
}

static void print_list(FILE *out)
{
    fprintf(out, "Available integrations:\n");
    for (const struct integration *in = integrations; in->name; in++)
        fprintf(out, "  %-10s %s\n", in->name, in->display);
    fprintf(out, "\nUsage: ollama launch INTEGRATION [--model MODEL] [--config] [-- ARGS...]\n");
}

// A line from stdin, trimmed; false at EOF.
static bool read_line(char *buf, size_t n)
{
    if (!fgets(buf, (int)n, stdin))
        return false;
    buf[strcspn(buf, "\r\n")] = '\0';
    return true;
}

// Asks for one of n choices (1-based on screen); -1 when none was given.
static int choose(const char *what, size_t n)
{
    char line[64];
    fprintf(stderr, "Select %s [1-%zu]: ", what, n);
    if (!read_line(line, sizeof(line)))
        return -1;
    int64_t k = 0;
    if (str_to_i64(line, 1, (int64_t)n, &k, NULL) < 0)
        return -1;
    return (int)k - 1;
}

// The model to launch with: --model, or on a terminal a choice among the
// local models. Returns a malloc'd name or NULL after printing an error.
static char *pick_model(struct client *c, const char *flag)
{
    json_t *tags = NULL;
    struct err e = {0};
    if (client_list(c, &tags, &e) < 0) {
        cli_fail_err(&e);
        return NULL;
    }
    json_t *models = json_object_get(tags, "models");
    char *out = NULL;
    if (flag) {
        // The model must be here: agents give poor errors for a missing one.
        json_t *req = json_pack("{s:s}", "model", flag);
        json_t *show = NULL;
        if (client_call(c, "POST", "/api/show", req, &show, &e) < 0)
            cli_fail("model '%s' not found; pull it first with: ollama pull %s", flag, flag);
        else
            out = xstrdup(flag);
        json_decref(req);
        json_decref(show);
    } else if (!isatty(STDIN_FILENO)) {
        cli_fail("no model given: use --model MODEL");
    } else if (json_array_size(models) == 0) {
        cli_fail("no local models: pull one first with: ollama pull MODEL");
    } else {
        size_t i;
        json_t *m;
        json_array_foreach(models, i, m)
        {
            fprintf(stderr, "  %zu. %s\n", i + 1, json_string_value(json_object_get(m, "name")));
        }
        int k = choose("a model", json_array_size(models));
        if (k < 0)
            cli_fail("no model selected");
        else
            out = xstrdup(
                json_string_value(json_object_get(json_array_get(models, (size_t)k), "name")));
    }
    json_decref(tags);
    return out;
}

// Shell-quotes s for --config output.
static void print_quoted(const char *s)
{
    if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./:=@,") ==
                  strlen(s)) {
        fputs(s, stdout);
        return;
    }
    putchar('\'');
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*s);
    }
    putchar('\'');
}

// The integration named on the command line, or chosen from a menu on a terminal. *out
// stays NULL when there is nothing to launch; the return value is then the exit status
// (0 after printing the list to a pipe).
static int select_integration(struct cli_args *a, const struct integration **out)
{
    *out = NULL;
    if (a->n_pos == 0) {
        if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO)) {
            print_list(stdout);
            return 0;
        }
        size_t n = 0;
        for (const struct integration *p = integrations; p->name; p++)
            fprintf(stderr, "  %zu. %-10s %s\n", ++n, p->name, p->display);
        int k = choose("an integration", n);
        if (k < 0)
            return cli_fail("no integration selected");
        *out = &integrations[k];
        return 0;
    }
    *out = find_integration(a->pos[0]);
    if (!*out) {
        print_list(stderr);
        return cli_fail("unknown integration: %s", a->pos[0]);
    }
    return 0;
}

// --config: the environment and command line as shell lines instead of running them.
static void print_config(const struct integration *in, const char *host, const char *model,
                         const char *prog, json_t *env, json_t *args)
{
    const char *key;
    json_t *v;
    printf("# %s with %s through %s\n", in->display, model, host);
    json_object_foreach(env, key, v)
    {
        printf("export %s=", key);
        print_quoted(json_string_value(v));
        putchar('\n');
    }
    print_quoted(prog ? prog : in->program);
    size_t i;
    json_array_foreach(args, i, v)
    {
        putchar(' ');
        print_quoted(json_string_value(v));
    }
    putchar('\n');
}

// Sets the environment and replaces this process with prog; returns only if exec fails.
static void exec_program(char *prog, json_t *env, json_t *args)
{
    const char *key;
    json_t *v;
    json_object_foreach(env, key, v)
    {
        setenv(key, json_string_value(v), 1);
    }
    size_t n = json_array_size(args);
    char **argv = xcalloc(n + 2, sizeof(char *));
    argv[0] = prog;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)json_string_value(json_array_get(args, i));
    fflush(stdout);
    fflush(stderr);
    execv(prog, argv);
    cli_fail("cannot run %s: %s", prog, strerror(errno));
    free(argv);
}

int cli_cmd_launch(struct cli_args *a)
{
    const struct integration *in;
    int sel = select_integration(a, &in);
    if (!in)
        return sel;
    bool config_only = cli_flag(a, "config") != NULL;
    char *prog = find_program(in);
    if (!prog && !config_only)
        return cli_fail("%s is not installed (no '%s' on PATH).\n\nInstall it with:\n  %s\n\n"
                        "Then re-run:\n  ollama launch %s",
                        in->display, in->program, in->install, in->name);

    struct client *c = cli_connect();
    if (!c) {
        free(prog);
        return 1;
    }
    int rc = 1;
    json_t *env = json_object(), *args = json_array();
    char *model = pick_model(c, cli_flag(a, "model"));
    if (!model)
        goto out;
    char host[512];
    snprintf(host, sizeof(host), "%s", client_base_url(c));
    in->setup(in, host, model, env, args);
    for (int i = a->n_pos ? 1 : 0; i < a->n_pos; i++)
        jsonx_arr_append(args, json_string(a->pos[i]));

    if (config_only) {
        print_config(in, host, model, prog, env, args);
        rc = 0;
        goto out;
    }
    exec_program(prog, env, args);
out:
    free(model);
    free(prog);
    json_decref(env);
    json_decref(args);
    client_free(c);
    return rc;
}

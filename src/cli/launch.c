// `ollama launch [INTEGRATION] [--model M] [--config] [--yes] [--restore]
// [-- ARGS...]`: points a coding tool at this Ollama server, as Ollama
// 0.33's cmd/launch does (registry.go and one file per integration).
//
// Each integration is a row of the table below: the program to find, the
// install hint, the environment and arguments to start it with, and the
// config files it reads (launch_config.c writes them, launch_backup.c keeps
// the user's originals so --restore can put them back). --config writes the
// files and prints the command instead of launching; --yes answers every
// question (a missing model is pulled). Without an integration, a terminal
// gets a short menu and anything else the list.
#include "cli/launch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"

struct integration;
typedef void (*launch_setup_fn)(const struct integration *in, const struct launch_target *t,
                                json_t *env, json_t *args);
// A step just before the tool starts (prog: its path); non-zero stops the
// launch after printing why.
typedef int (*launch_prepare_fn)(const struct integration *in, const struct launch_target *t,
                                 const char *prog);

struct integration {
    const char *name;         // argument of ollama launch
    const char *aliases[4];   // other names it answers to
    const char *display;      // "Claude Code"
    const char *description;  // one line for the menu
    const char *program;      // looked up on PATH, then in fallbacks (relative to $HOME)
    const char *fallbacks[3];
    const char *install;                     // "install from URL" / "install with: COMMAND"
    launch_setup_fn setup;                   // environment and arguments (NULL: none)
    const struct launch_file *files;         // config files written (NULL: none)
    bool hidden;                             // not in the menu (0.33's Hidden)
    const struct launch_install *installer;  // how to install it when missing (NULL: the hint)
    const char *refusal;                     // 0.33's error on Linux (desktop apps), or NULL
    launch_prepare_fn prepare;               // NULL: none
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
static void setup_claude(const struct integration *in, const struct launch_target *t, json_t *env,
                         json_t *args)
{
    (void)in;
    set_env(env, "ANTHROPIC_BASE_URL", t->host);
    set_env(env, "ANTHROPIC_API_KEY", "");
    set_env(env, "ANTHROPIC_AUTH_TOKEN", "ollama");
    set_env(env, "CLAUDE_CODE_ATTRIBUTION_HEADER", "0");
    set_env(env, "CLAUDE_CODE_TOTAL_TOKENS_REMINDER", "off");
    set_env(env, "DISABLE_ERROR_REPORTING", "1");
    set_env(env, "DISABLE_FEEDBACK_COMMAND", "1");
    set_env(env, "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1");
    static const char *const tiers[] = {
        "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"};
    for (size_t i = 0; i < sizeof(tiers) / sizeof(tiers[0]); i++)
        set_env(env, tiers[i], t->model);
    add_arg(args, "--model");
    add_arg(args, "%s", t->model);
}

// Codex speaks the Responses API (/v1/responses) through a provider of its
// own. The profile file launch_config.c writes says the same; the -c
// overrides also work with Codex versions that predate profile files.
static void setup_codex(const struct integration *in, const struct launch_target *t, json_t *env,
                        json_t *args)
{
    (void)in;
    set_env(env, "OPENAI_API_KEY", "ollama");
    static const char *const p = "ollama-launch";
    add_arg(args, "-c");
    add_arg(args, "model_provider=\"%s\"", p);
    add_arg(args, "-c");
    add_arg(args, "model_providers.%s.name=\"Ollama\"", p);
    add_arg(args, "-c");
    add_arg(args, "model_providers.%s.base_url=\"%s/v1\"", p, t->host);
    add_arg(args, "-c");
    add_arg(args, "model_providers.%s.wire_api=\"responses\"", p);
    if (t->context > 0) {
        add_arg(args, "-c");
        add_arg(args, "model_context_window=%lld", (long long)t->context);
    }
    add_arg(args, "-m");
    add_arg(args, "%s", t->model);
}

// OpenCode takes an inline config: an "ollama" provider (OpenAI-compatible,
// /v1) with the model, and that model as the default.
static void setup_opencode(const struct integration *in, const struct launch_target *t, json_t *env,
                           json_t *args)
{
    (void)in;
    (void)args;
    char base[600], id[700];
    snprintf(base, sizeof(base), "%s/v1", t->host);
    snprintf(id, sizeof(id), "ollama/%s", t->model);
    // No "limit": 0.33 sets one only for cloud models (known output limit);
    // with one, OpenCode keeps asking a local model to continue.
    json_t *model = json_pack("{s:s}", "name", t->model);
    json_t *cfg = json_pack("{s:s,s:{s:{s:s,s:s,s:{s:s},s:{s:o}}},s:s}", "$schema",
                            "https://opencode.ai/config.json", "provider", "ollama", "npm",
                            "@ai-sdk/openai-compatible", "name", "Ollama", "options", "baseURL",
                            base, "models", t->model, model, "model", id);
    char *text = jsonx_dumps(cfg, 0);
    set_env(env, "OPENCODE_CONFIG_CONTENT", text ? text : "{}");
    free(text);
    json_decref(cfg);
}

// GitHub Copilot CLI: its provider variables (Responses API).
static void setup_copilot(const struct integration *in, const struct launch_target *t, json_t *env,
                          json_t *args)
{
    (void)in;
    char *base = xasprintf("%s/v1", t->host);
    set_env(env, "COPILOT_PROVIDER_BASE_URL", base);
    set_env(env, "COPILOT_PROVIDER_API_KEY", "");
    set_env(env, "COPILOT_PROVIDER_WIRE_API", "responses");
    set_env(env, "COPILOT_MODEL", t->model);
    add_arg(args, "--model");
    add_arg(args, "%s", t->model);
    free(base);
}

// Kimi Code CLI: an inline --config with an "ollama" provider and model
// alias, its max_context_size the model's window (32768 when unknown).
static void setup_kimi(const struct integration *in, const struct launch_target *t, json_t *env,
                       json_t *args)
{
    (void)in;
    (void)env;
    char *base = xasprintf("%s/v1", t->host);
    json_t *cfg =
        json_pack("{s:s,s:{s:{s:s,s:s,s:s}},s:{s:{s:s,s:s,s:I}}}", "default_model", "ollama",
                  "providers", "ollama", "type", "openai_legacy", "base_url", base, "api_key",
                  "ollama", "models", "ollama", "provider", "ollama", "model", t->model,
                  "max_context_size", (json_int_t)(t->context > 0 ? t->context : 32768));
    char *text = jsonx_dumps(cfg, JSONX_SORT_KEYS);
    add_arg(args, "--config");
    add_arg(args, "%s", text ? text : "{}");
    free(text);
    json_decref(cfg);
    free(base);
}

// OpenClaw: its terminal UI, on the config launch_config.c wrote.
static void setup_openclaw(const struct integration *in, const struct launch_target *t, json_t *env,
                           json_t *args)
{
    (void)in;
    (void)t;
    (void)env;
    add_arg(args, "tui");
}

// Poolside's pool: its standalone endpoint variables.
static void setup_pool(const struct integration *in, const struct launch_target *t, json_t *env,
                       json_t *args)
{
    (void)in;
    char *base = xasprintf("%s/v1", t->host);
    set_env(env, "POOLSIDE_STANDALONE_BASE_URL", base);
    set_env(env, "POOLSIDE_API_KEY", "ollama");
    add_arg(args, "-m");
    add_arg(args, "%s", t->model);
    free(base);
}

// Qwen Code: OpenAI auth on OLLAMA_HOST/v1 (settings.json says the same).
static void setup_qwen(const struct integration *in, const struct launch_target *t, json_t *env,
                       json_t *args)
{
    (void)in;
    char *base = xasprintf("%s/v1", t->host);
    set_env(env, "OPENAI_API_KEY", "ollama");
    set_env(env, "OPENAI_BASE_URL", base);
    set_env(env, "OPENAI_MODEL", t->model);
    add_arg(args, "--auth-type");
    add_arg(args, "openai");
    add_arg(args, "--model");
    add_arg(args, "%s", t->model);
    free(base);
}

// Oh My Pi: the model through its "ollama" provider. Its web search plugin
// needs ollama.com, which this build does not reach, so launch skips it with
// 0.33's note for a server whose cloud is disabled.
static void setup_omp(const struct integration *in, const struct launch_target *t, json_t *env,
                      json_t *args)
{
    (void)in;
    (void)env;
    add_arg(args, "--model");
    add_arg(args, strncmp(t->model, "ollama/", 7) == 0 ? "%s" : "ollama/%s", t->model);
}

static int prepare_omp(const struct integration *in, const struct launch_target *t,
                       const char *prog)
{
    (void)in;
    (void)t;
    (void)prog;
    fprintf(stderr, "Cloud is disabled; skipping @ollama/pi-web-search setup.\n");
    return 0;
}

// DeepSeek Harness: its web UI with launch's settings patch; the provider's
// key variable holds a placeholder (Ollama needs none).
static void setup_dsh(const struct integration *in, const struct launch_target *t, json_t *env,
                      json_t *args)
{
    (void)in;
    set_env(env, LAUNCH_DSH_KEY_ENV, "ollama");
    add_arg(args, "web");
    add_arg(args, "--patch");
    add_arg(args, "%s/" LAUNCH_DSH_DIR "/ollama.cordis.yml", t->home);
}

// --patch is launch's: one from the user would replace its settings.
static int prepare_dsh(const struct integration *in, const struct launch_target *t,
                       const char *prog)
{
    (void)in;
    (void)prog;
    for (int i = 0; i < t->n_extra; i++)
        if (strcmp(t->extra[i], "--patch") == 0 || strncmp(t->extra[i], "--patch=", 8) == 0)
            return cli_fail("conflicting extra argument \"%s\": ollama launch dsh manages --patch",
                            t->extra[i]);
    return 0;
}

// Muse reads settings.json from $XDG_CONFIG_HOME/muse: launch's own root.
static void setup_muse(const struct integration *in, const struct launch_target *t, json_t *env,
                       json_t *args)
{
    (void)in;
    (void)args;
    char *dir = xasprintf("%s/" LAUNCH_MUSE_CONFIG, t->home);
    set_env(env, "XDG_CONFIG_HOME", dir);
    free(dir);
}

// Whether Hermes's packaged desktop app is there (then `hermes desktop`
// need not build it): the install roots Hermes's installer uses on Linux.
static bool hermes_desktop_packaged(const char *home)
{
    const char *install = getenv("HERMES_INSTALL_DIR"), *hh = getenv("HERMES_HOME");
    char *roots[4] = {
        install && *install ? xstrdup(install) : NULL,
        hh && *hh ? xasprintf("%s/hermes-agent", hh) : NULL,
        home ? xasprintf("%s/.hermes/hermes-agent", home) : NULL,
        xstrdup("/usr/local/lib/hermes-agent"),
    };
    bool found = false;
    for (size_t i = 0; i < 4; i++) {
        for (size_t k = 0; roots[i] && !found && k < 2; k++) {
            char *p = xasprintf("%s/apps/desktop/release/linux-unpacked/%s", roots[i],
                                k ? "Hermes" : "hermes");
            found = access(p, F_OK) == 0;
            free(p);
        }
        free(roots[i]);
    }
    return found;
}

// Hermes Desktop: `hermes desktop`, with --skip-build when the packaged app
// is there and the user named no build flag of their own.
static void setup_hermes_desktop(const struct integration *in, const struct launch_target *t,
                                 json_t *env, json_t *args)
{
    (void)in;
    (void)env;
    static const char *const flags[] = {"--skip-build", "--force-build", "--source",
                                        "--build-only", "--help",        "-h"};
    bool own = false;
    for (int i = 0; i < t->n_extra && strcmp(t->extra[i], "--") != 0; i++)
        for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
            own |= strcmp(t->extra[i], flags[k]) == 0;
    add_arg(args, "desktop");
    if (!own && hermes_desktop_packaged(t->home))
        add_arg(args, "--skip-build");
}

// The first "vX[.Y[.Z]]" word of `prog --version`'s first line as
// major*1e6 + minor*1e3 + patch; -1 when there is none.
static long hermes_version(const char *prog, char *shown, size_t n)
{
    char *cmd = xasprintf("'%s' --version 2>/dev/null", prog);
    FILE *p = strchr(prog, '\'') ? NULL : popen(cmd, "r");
    free(cmd);
    char line[256] = "";
    if (!p)
        return -1;
    if (!fgets(line, sizeof(line), p))
        line[0] = '\0';
    pclose(p);
    for (char *w = strtok(line, " \t\r\n"); w; w = strtok(NULL, " \t\r\n")) {
        long v[3] = {0, 0, 0};
        if (w[0] != 'v' || sscanf(w + 1, "%ld.%ld.%ld", &v[0], &v[1], &v[2]) < 1)
            continue;
        snprintf(shown, n, "%s", w);
        return v[0] * 1000000 + v[1] * 1000 + v[2];
    }
    return -1;
}

// `hermes desktop` needs Hermes v0.16.0 or newer: an older one is updated first.
static int prepare_hermes_desktop(const struct integration *in, const struct launch_target *t,
                                  const char *prog)
{
    (void)in;
    (void)t;
    char shown[64];
    long v = hermes_version(prog, shown, sizeof(shown));
    if (v < 0 || v >= 16000)
        return 0;
    fprintf(stderr,
            "Hermes %s is older than the minimum version (v0.16.0) for `hermes desktop`; "
            "updating...\n",
            shown);
    const char *argv[] = {prog, "update", NULL};
    int status = launch_run_attached(argv);
    if (status != 0)
        return cli_fail("failed to update hermes to v0.16.0 or newer: exit status %d", status);
    return 0;
}

// How each tool installs itself on Linux (0.33's ensure<Tool>Installed).
#define NEED_NPM                                                                                   \
    {                                                                                              \
        "npm", "npm (Node.js): https://nodejs.org/"                                                \
    }
#define NEED_CURL                                                                                  \
    {                                                                                              \
        "curl", "curl: https://curl.se/"                                                           \
    }
#define NEED_BASH                                                                                  \
    {                                                                                              \
        "bash", "bash: https://www.gnu.org/software/bash/"                                         \
    }
static const struct launch_install install_claude = {
    "claude",
    "claude",
    "Claude Code",
    "Claude Code is not installed. Install now?",
    {NEED_CURL, NEED_BASH},
    NULL,
    {"bash", "-c", "curl -fsSL https://claude.ai/install.sh | bash", NULL}};
static const struct launch_install install_cline = {"cline",
                                                    "cline",
                                                    "Cline",
                                                    "Cline is not installed. Install with npm?",
                                                    {NEED_NPM},
                                                    NULL,
                                                    {"npm", "install", "-g", "cline@latest", NULL}};
static const struct launch_install install_dsh = {
    "deepseek harness",
    "dsh",
    "DeepSeek Harness",
    "DeepSeek Harness is not installed. Install with npm?",
    {NEED_NPM},
    "dsh is not installed and npm (Node.js) is required\n\nInstall Node.js first:\n  "
    "https://nodejs.org/\n\nThen re-run:\n  ollama launch dsh",
    {"npm", "install", "-g", "@deepseek-ai/dsh@latest", NULL},
    "@deepseek-ai/dsh@latest"};
static const struct launch_install install_hermes = {
    "hermes",
    "Hermes",
    "Hermes",
    "Hermes is not installed. Install now?",
    {{"bash", "bash"}, {"curl", "curl"}, {"git", "git"}},
    NULL,
    {"bash", "-lc",
     "curl -fsSL https://hermes-agent.nousresearch.com/install.sh | bash -s -- --skip-setup",
     NULL}};
static const struct launch_install install_kimi = {
    "kimi",
    "kimi",
    "Kimi",
    "Kimi is not installed. Install now?",
    {NEED_CURL, NEED_BASH},
    NULL,
    {"bash", "-c", "curl -LsSf https://code.kimi.com/install.sh | bash", NULL}};
static const struct launch_install install_muse = {
    "muse",
    "muse",
    "Muse",
    "Muse is not installed. Install now?",
    {{NULL, NULL}},
    NULL,
    {"bash", "-c", "curl -fsSL https://dev.meta.ai/install.sh | bash", NULL}};
static const struct launch_install install_openclaw = {
    "openclaw",
    "OpenClaw",
    "OpenClaw",
    "OpenClaw is not installed. Install with npm?",
    {NEED_NPM, {"git", "git: https://git-scm.com/"}},
    NULL,
    {"npm", "install", "-g", "openclaw@latest", NULL}};
static const struct launch_install install_opencode = {
    "opencode",
    "opencode",
    "OpenCode",
    "OpenCode is not installed. Install now?",
    {NEED_CURL, NEED_BASH},
    NULL,
    {"bash", "-c", "set -o pipefail; curl -fsSL https://opencode.ai/install | bash", NULL}};
static const struct launch_install install_pi = {
    "pi",
    "pi",
    "Pi",
    "Install Pi with npm?",
    {NEED_NPM},
    NULL,
    {"npm", "install", "-g", "@earendil-works/pi-coding-agent@latest", NULL}};
static const struct launch_install install_qwen = {
    "qwen",
    "qwen",
    "Qwen Code",
    "Qwen Code is not installed. Install now?",
    {NEED_CURL, NEED_BASH},
    NULL,
    {"bash", "-c",
     "set -o pipefail; curl -fsSL "
     "https://qwen-code-assets.oss-cn-hangzhou.aliyuncs.com/installation/install-qwen.sh | sed "
     "'/log_info \"Starting Qwen Code...\"/,/exec qwen/d' | bash",
     NULL}};

// In 0.33's launcher order (launcherIntegrationOrder), then the hidden ones.
// The desktop apps 0.33 runs only on macOS and Windows (ChatGPT, Claude
// Desktop) are rows too: on Linux they give 0.33's refusal and stay out of
// the menu.
static const struct integration integrations[] = {
    {"claude",
     {NULL},
     "Claude Code",
     "Anthropic's coding tool with subagents",
     "claude",
     {".local/bin/claude", ".claude/local/claude", NULL},
     "install from https://code.claude.com/docs/en/quickstart (or: npm install -g "
     "@anthropic-ai/claude-code)",
     setup_claude,
     NULL,
     false,
     &install_claude,
     NULL,
     NULL},
    {"chatgpt",
     {"codex-app", "codex-desktop", "codex-gui", NULL},
     "ChatGPT",
     "Complete work with ChatGPT",
     "chatgpt",
     {NULL},
     "install from https://chatgpt.com/download",
     NULL,
     NULL,
     false,
     NULL,
     "ChatGPT launch is only supported on macOS and Windows",
     NULL},
    {"hermes",
     {NULL},
     "Hermes Agent",
     "Self-improving AI agent built by Nous Research",
     "hermes",
     {".local/bin/hermes", NULL},
     "install from https://hermes-agent.nousresearch.com/docs/getting-started/installation/",
     NULL,
     launch_files_hermes,
     false,
     &install_hermes,
     NULL,
     NULL},
    {"openclaw",
     {"clawdbot", "moltbot", NULL},
     "OpenClaw",
     "Personal AI with 100+ skills",
     "openclaw",
     {NULL},
     "install from https://docs.openclaw.ai",
     setup_openclaw,
     launch_files_openclaw,
     false,
     &install_openclaw,
     NULL,
     NULL},
    {"opencode",
     {NULL},
     "OpenCode",
     "Anomaly's open-source coding agent",
     "opencode",
     {".opencode/bin/opencode", NULL},
     "install from https://opencode.ai (or: npm install -g opencode-ai)",
     setup_opencode,
     launch_files_opencode,
     false,
     &install_opencode,
     NULL,
     NULL},
    {"hermes-desktop",
     {NULL},
     "Hermes Desktop",
     "Desktop app for Hermes Agent by Nous Research",
     "hermes",
     {".local/bin/hermes", NULL},
     "install from https://hermes-agent.nousresearch.com/docs/getting-started/installation/",
     setup_hermes_desktop,
     launch_files_hermes,
     false,
     &install_hermes,
     NULL,
     prepare_hermes_desktop},
    {"codex",
     {NULL},
     "Codex",
     "OpenAI's open-source coding agent",
     "codex",
     {NULL},
     "install from https://developers.openai.com/codex/cli/",
     setup_codex,
     launch_files_codex,
     false,
     NULL,
     NULL,
     NULL},
    {"copilot",
     {"copilot-cli", NULL},
     "Copilot CLI",
     "GitHub's AI coding agent for the terminal",
     "copilot",
     {".local/bin/copilot", NULL},
     "install from https://github.com/features/copilot/cli/",
     setup_copilot,
     NULL,
     false,
     NULL,
     NULL,
     NULL},
    {"omp",
     {NULL},
     "Oh My Pi",
     "AI coding agent with IDE integration",
     "omp",
     {".local/bin/omp", ".bun/bin/omp", NULL},
     "install from https://omp.sh",
     setup_omp,
     launch_files_omp,
     false,
     NULL,
     NULL,
     prepare_omp},
    {"cline",
     {NULL},
     "Cline",
     "Autonomous coding agent with parallel execution",
     "cline",
     {NULL},
     "install with: npm install -g cline@latest",
     NULL,
     launch_files_cline,
     false,
     &install_cline,
     NULL,
     NULL},
    {"droid",
     {NULL},
     "Droid",
     "Factory's coding agent across terminal and IDEs",
     "droid",
     {NULL},
     "install from https://docs.factory.ai/cli/getting-started/quickstart",
     NULL,
     launch_files_droid,
     false,
     NULL,
     NULL,
     NULL},
    {"dsh",
     {"deepseek-harness", NULL},
     "DeepSeek Harness",
     "DeepSeek's open-source agent harness",
     "dsh",
     {NULL},
     "install from https://github.com/deepseek-ai/deepseek-harness",
     setup_dsh,
     launch_files_dsh,
     false,
     &install_dsh,
     NULL,
     prepare_dsh},
    {"pi",
     {NULL},
     "Pi",
     "Minimal AI agent toolkit with plugin support",
     "pi",
     {NULL},
     "install with: npm install -g @earendil-works/pi-coding-agent@latest",
     NULL,
     launch_files_pi,
     false,
     &install_pi,
     NULL,
     NULL},
    {"pool",
     {NULL},
     "Poolside",
     "Poolside's software agent for enterprise development",
     "pool",
     {NULL},
     "install from https://github.com/poolsideai/pool",
     setup_pool,
     NULL,
     false,
     NULL,
     NULL,
     NULL},
    {"qwen",
     {NULL},
     "Qwen Code",
     "Qwen's AI coding agent with tool use",
     "qwen",
     {".npm-global/bin/qwen", ".local/bin/qwen", NULL},
     "install from https://qwen.ai/qwencode",
     setup_qwen,
     launch_files_qwen,
     false,
     &install_qwen,
     NULL,
     NULL},
    {"kimi",
     {NULL},
     "Kimi Code CLI",
     "Moonshot's coding agent for terminal and IDEs",
     "kimi",
     {".local/bin/kimi", "bin/kimi", NULL},
     "install from https://moonshotai.github.io/kimi-cli/en/guides/getting-started.html",
     setup_kimi,
     NULL,
     true,
     &install_kimi,
     NULL,
     NULL},
    {"vscode",
     {"code", NULL},
     "Visual Studio Code",
     "Microsoft's open-source AI code editor",
     "code",
     {NULL},
     "install from https://code.visualstudio.com",
     NULL,
     launch_files_vscode,
     true,
     NULL,
     NULL,
     NULL},
    {"claude-desktop",
     {"claude-app", NULL},
     "Claude Desktop",
     "Use Ollama models in Claude Desktop",
     "claude-desktop",
     {NULL},
     "install from https://claude.com/download",
     NULL,
     NULL,
     true,
     NULL,
     "Claude Desktop launch is only supported on macOS",
     NULL},
    {"muse",
     {"muse-code", NULL},
     "Muse Code",
     "Meta's agentic coding CLI",
     "muse",
     {".local/bin/muse", NULL},
     "install with: bash -c curl -fsSL https://dev.meta.ai/install.sh | bash",
     setup_muse,
     launch_files_muse,
     true,
     &install_muse,
     NULL,
     NULL},
    {NULL, {NULL}, NULL, NULL, NULL, {NULL}, NULL, NULL, NULL, false, NULL, NULL, NULL},
};

static const struct integration *find_integration(const char *name)
{
    for (const struct integration *in = integrations; in->name; in++) {
        if (strcasecmp(in->name, name) == 0)
            return in;
        for (size_t i = 0; in->aliases[i]; i++)
            if (strcasecmp(in->aliases[i], name) == 0)
                return in;
    }
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
    char *found = launch_which(in->program);
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
    for (const struct integration *in = integrations; in->name; in++) {
        fprintf(out, "  %-15s %s", in->name, in->display);
        for (size_t i = 0; in->aliases[i]; i++)
            fprintf(out, "%s%s", i ? ", " : " (aliases: ", in->aliases[i]);
        fprintf(out, "%s\n", in->aliases[0] ? ")" : "");
    }
    fprintf(out, "\nUsage: ollama launch INTEGRATION [--model MODEL] [--config] [--yes] "
                 "[--restore] [-- ARGS...]\n");
}

// A line from stdin, trimmed; false at EOF.
static bool read_line(char *buf, size_t n)
{
    if (!fgets(buf, (int)n, stdin))
        return false;
    buf[strcspn(buf, "\r\n")] = '\0';
    return true;
}

// A yes/no question; yes unless the answer starts with n.
static bool confirm(const char *question)
{
    char line[64];
    fprintf(stderr, "%s [Y/n] ", question);
    if (!read_line(line, sizeof(line)))
        return false;
    return line[0] != 'n' && line[0] != 'N';
}

static bool interactive(void)
{
    return isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
}

// Makes sure model is on the server: pulled with --yes, after a question on
// a terminal, else the error 0.33 gives.
static int ensure_model(struct client *c, const char *model, bool yes)
{
    json_t *req = json_pack("{s:s}", "model", model);
    json_t *show = NULL;
    struct err e = {0};
    int rc = client_show(c, req, &show, &e);
    json_decref(req);
    json_decref(show);
    if (rc == 0)
        return 0;
    if (!yes && !interactive())
        return cli_fail("model \"%s\" not found; run 'ollama pull %s' first, or use --yes to "
                        "auto-pull",
                        model, model);
    char q[600];
    snprintf(q, sizeof(q), "Download %s?", model);
    if (!yes && !confirm(q))
        return cli_fail("cancelled");
    err_clear(&e);
    if (cli_pull_model(c, model, false, &e) < 0) {
        fprintf(stderr, "Error: failed to pull %s: %s\n", model, e.msg);
        return 1;
    }
    return 0;
}

// The model to launch with: --model, or on a terminal a choice among the
// local models. Returns a malloc'd name or NULL after printing an error.
static char *pick_model(struct client *c, const struct integration *in, const char *flag, bool yes)
{
    if (flag) {
        // A deprecated model asks first; "no" on a terminal opens the picker.
        int ok = cli_launch_check_deprecated(c, flag, in->display, in->name, yes);
        if (ok < 0)
            return NULL;
        if (ok > 0)
            return ensure_model(c, flag, yes) == 0 ? xstrdup(flag) : NULL;
    }
    if (!interactive() || !isatty(STDOUT_FILENO)) {
        if (yes)
            cli_fail("headless --yes launch for %s requires --model <model>", in->name);
        else
            cli_fail("no model given: use --model MODEL");
        return NULL;
    }
    json_t *cfg = cli_user_config_load();
    char title[160];
    snprintf(title, sizeof(title), "Select model for %s:", in->display);
    char *out = cli_model_picker(c, title, cli_user_config_model(cfg, in->name));
    json_decref(cfg);
    if (!out)
        cli_fail("no model selected");
    return out;
}

// "name" and "name:latest" are the same model (0.33's SameModelRef).
static bool same_model(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 7 && strcmp(a + la - 7, ":latest") == 0)
        la -= 7;
    if (lb > 7 && strcmp(b + lb - 7, ":latest") == 0)
        lb -= 7;
    return la == lb && strncasecmp(a, b, la) == 0;
}

// The context window a tool should assume, as 0.33 finds it: the one the
// model is loaded with now (/api/ps), else OLLAMA_CONTEXT_LENGTH, else the
// model's trained <arch>.context_length; 0 when none is known.
int64_t cli_model_context(struct client *c, const char *model, const json_t *show)
{
    json_t *ps = NULL;
    int64_t n = 0;
    if (client_ps(c, &ps, NULL) == 0) {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(ps, "models"), i, m)
        {
            const char *name = json_string_value(json_object_get(m, "name"));
            int64_t ctx = json_integer_value(json_object_get(m, "context_length"));
            if (name && ctx > 0 && same_model(name, model))
                n = ctx;
        }
        json_decref(ps);
    }
    const char *env = getenv("OLLAMA_CONTEXT_LENGTH");
    if (n == 0 && env && *env)
        str_to_i64(env, 1, INT64_MAX, &n, NULL);
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(show, "model_info"), key, v)
    {
        size_t kl = strlen(key);
        if (n == 0 && kl > 15 && strcmp(key + kl - 15, ".context_length") == 0)
            n = json_integer_value(v);
    }
    return n;
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
        static const char *const flags[] = {"model", "config", "yes", "restore"};
        for (size_t i = 0; i < 4; i++)
            if (cli_flag(a, flags[i]))
                return cli_fail("flags and extra args require an integration name, for example: "
                                "'ollama launch claude --model qwen3.5'");
        if (!interactive() || !isatty(STDOUT_FILENO)) {
            print_list(stdout);
            return 0;
        }
        return cli_launcher();
    }
    *out = find_integration(a->pos[0]);
    if (!*out) {
        print_list(stderr);
        return cli_fail("unknown integration: %s", a->pos[0]);
    }
    return 0;
}

// --config: the environment and command line as shell lines instead of running them.
static void print_config(const struct integration *in, const struct launch_target *t,
                         const char *prog, json_t *env, json_t *args)
{
    const char *key;
    json_t *v;
    printf("# %s with %s through %s", in->display, t->model, t->host);
    if (t->context > 0)
        printf(" (context window %lld)", (long long)t->context);
    putchar('\n');
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

// The name backups are kept under: integrations that write the same files
// (hermes and hermes-desktop) share the first one's, so --restore of either
// gives back the user's own bytes.
static const char *backup_owner(const struct integration *in)
{
    for (const struct integration *o = integrations; in->files && o->name; o++)
        if (o->files == in->files)
            return o->name;
    return in->name;
}

static int fail_not_installed(const struct integration *in)
{
    return cli_fail("%s is not installed, %s\n\nThen re-run:\n  ollama launch %s", in->name,
                    in->install, in->name);
}

// The program after offering to install it (0.33's EnsureIntegrationInstalled):
// the install hint where the tool has no installer. NULL after an error.
static char *offer_install(const struct integration *in, bool yes)
{
    if (!in->installer) {
        fail_not_installed(in);
        return NULL;
    }
    int rc = launch_install(in->name, in->installer, yes);
    if (rc == 2)  // the npm install failed: the package runs through npx
        return launch_which("npx");
    if (rc != 0)
        return NULL;
    char *prog = find_program(in);
    if (!prog)
        cli_fail("%s was installed but the binary was not found on PATH\n\nYou may need to "
                 "restart your shell",
                 in->installer->key);
    else
        fprintf(stderr, "%s installed successfully\n\n", in->installer->display);
    return prog;
}

// --restore: the user's own config files back, byte for byte.
static int restore(struct cli_args *a, const struct integration *in)
{
    if (cli_flag(a, "model") || cli_flag(a, "config") || a->n_pos > 1)
        return cli_fail("--restore cannot be combined with --model, --config, or extra args");
    if (!in->files)
        return cli_fail("%s does not support --restore", in->name);
    const char *home = getenv("HOME");
    if (!home || !*home)
        return cli_fail("HOME is not set");
    struct err e = {0};
    int n = launch_restore_files(backup_owner(in), in->files, home, stderr, &e);
    if (n < 0)
        return cli_fail_err(&e);
    if (n == 0)
        fprintf(stderr, "Nothing to restore: ollama launch has not changed %s's config.\n",
                in->display);
    else
        fprintf(stderr, "%s configuration restored.\n", in->display);
    return 0;
}

// Model, context and capabilities of the target (strings owned by the caller).
static int fill_target(struct client *c, const struct integration *in, struct cli_args *a,
                       struct launch_target *t, char *host, size_t hn)
{
    bool yes = cli_flag(a, "yes") != NULL;
    char *model = pick_model(c, in, cli_flag(a, "model"), yes);
    if (!model)
        return 1;
    snprintf(host, hn, "%s", client_base_url(c));
    json_t *req = json_pack("{s:s}", "model", model);
    json_t *show = NULL;
    client_show(c, req, &show, NULL);
    json_decref(req);
    t->home = getenv("HOME");
    t->host = host;
    t->model = model;
    t->context = cli_model_context(c, model, show);
    t->vision = cli_has_capability(show, "vision");
    t->thinking = cli_has_capability(show, "thinking");
    t->extra = a->n_pos > 1 ? a->pos + 1 : NULL;
    t->n_extra = a->n_pos > 1 ? a->n_pos - 1 : 0;
    json_decref(show);
    return 0;
}

// When offer_install settled for npx (the package could not be installed
// globally), npx runs the package with the tool's arguments (0.33's dsh).
static void via_npx(const struct integration *in, const char *run, json_t *args)
{
    const char *slash = run ? strrchr(run, '/') : NULL;
    if (!run || !in->installer || !in->installer->npx ||
        strcmp(slash ? slash + 1 : run, "npx") != 0)
        return;
    json_array_insert_new(args, 0, json_string(in->installer->npx));
    json_array_insert_new(args, 0, json_string("--yes"));
}

// Writes the config files, then prints (--config) or runs the tool.
static int configure_and_launch(struct cli_args *a, const struct integration *in, char *prog,
                                const struct launch_target *t)
{
    bool config_only = cli_flag(a, "config") != NULL;
    if (in->files) {
        if (!t->home || !*t->home)
            return cli_fail("HOME is not set");
        struct err e = {0};
        if (launch_write_files(backup_owner(in), in->files, t, stderr, &e) < 0)
            return cli_fail_err(&e);
    }
    cli_user_config_remember(NULL, in->name, t->model);
    json_t *env = json_object(), *args = json_array();
    if (in->setup)
        in->setup(in, t, env, args);
    for (int i = a->n_pos ? 1 : 0; i < a->n_pos; i++)
        jsonx_arr_append(args, json_string(a->pos[i]));
    int rc = 0;
    char q[128];
    snprintf(q, sizeof(q), "Launch %s now?", in->display);
    bool yes = cli_flag(a, "yes") != NULL;
    if (config_only && !(interactive() && !yes && confirm(q))) {
        print_config(in, t, prog, env, args);
    } else {
        char *run = prog ? prog : offer_install(in, yes);
        via_npx(in, run, args);
        rc = 1;
        if (run && (!in->prepare || in->prepare(in, t, run) == 0))
            exec_program(run, env, args);  // returns only when exec failed
        if (run != prog)
            free(run);
    }
    json_decref(env);
    json_decref(args);
    return rc;
}

// 0.33's argument rules: one integration name, everything else after "--".
static int check_positionals(const struct cli_args *a)
{
    int named = a->n_before_dash < 0 ? a->n_pos : a->n_before_dash;
    if (a->n_before_dash < 0 && a->n_pos > 1) {
        fprintf(stderr, "Error: unexpected arguments: [");
        for (int i = 1; i < a->n_pos; i++)
            fprintf(stderr, "%s%s", i > 1 ? " " : "", a->pos[i]);
        fprintf(stderr, "]\nUse '--' to pass extra arguments to the integration\n");
        return 1;
    }
    if (named > 1)
        return cli_fail("expected at most 1 integration name before '--', got %d", named);
    if (named == 0 && a->n_pos > 0)
        return cli_fail("flags and extra args require an integration name, for example: "
                        "'ollama launch claude --model qwen3.5'");
    return 0;
}

int cli_cmd_launch(struct cli_args *a)
{
    if (check_positionals(a) != 0)
        return 1;
    const struct integration *in;
    int sel = select_integration(a, &in);
    if (!in)
        return sel;
    // Claude Desktop: 0.33 refuses anything but --restore before it runs.
    if (strcmp(in->name, "claude-desktop") == 0 && !cli_flag(a, "restore"))
        return cli_fail("Claude Desktop can only be restored from the command line: ollama "
                        "launch claude-desktop --restore");
    if (in->refusal)
        return cli_fail("%s", in->refusal);
    if (cli_flag(a, "restore"))
        return restore(a, in);
    bool config_only = cli_flag(a, "config") != NULL, yes = cli_flag(a, "yes") != NULL;
    // As 0.33, before anything is installed.
    if (yes && !cli_flag(a, "model") && (!interactive() || !isatty(STDOUT_FILENO)))
        return cli_fail("headless --yes launch for %s requires --model <model>", in->name);
    char *prog = find_program(in);
    if (!prog && !config_only && !(prog = offer_install(in, yes)))
        return 1;

    struct client *c = cli_connect();
    if (!c) {
        free(prog);
        return 1;
    }
    struct launch_target t = {0};
    char host[512];
    int rc = fill_target(c, in, a, &t, host, sizeof(host));
    if (rc == 0)
        rc = configure_and_launch(a, in, prog, &t);
    free((char *)t.model);
    free(prog);
    client_free(c);
    return rc;
}

size_t cli_launch_count(void)
{
    return sizeof(integrations) / sizeof(integrations[0]) - 1;
}

bool cli_launch_info(size_t i, const char **name, const char **display, const char **desc,
                     bool *hidden)
{
    if (i >= cli_launch_count())
        return false;
    *name = integrations[i].name;
    *display = integrations[i].display;
    *desc = integrations[i].description;
    *hidden = integrations[i].hidden || integrations[i].refusal;
    return true;
}

int cli_launch_write(const char *name, const struct launch_target *t, FILE *log, struct err *e)
{
    const struct integration *in = find_integration(name);
    if (!in)
        return err_set(e, ERR_NOT_FOUND, "unknown integration: %s", name);
    return launch_write_files(backup_owner(in), in->files, t, log, e);
}

int cli_launch_restore(const char *name, const char *home, FILE *log, struct err *e)
{
    const struct integration *in = find_integration(name);
    if (!in)
        return err_set(e, ERR_NOT_FOUND, "unknown integration: %s", name);
    return launch_restore_files(backup_owner(in), in->files, home, log, e);
}

int cli_launch_setup(const char *name, const struct launch_target *t, json_t *env, json_t *args)
{
    const struct integration *in = find_integration(name);
    if (!in)
        return ERR_NOT_FOUND;
    if (in->setup)
        in->setup(in, t, env, args);
    return 0;
}

const char *cli_launch_program(const char *name)
{
    const struct integration *in = find_integration(name);
    return in ? in->program : NULL;
}

const char *cli_launch_install_hint(const char *name)
{
    const struct integration *in = find_integration(name);
    return in ? in->install : NULL;
}

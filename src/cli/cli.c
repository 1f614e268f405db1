// The command table and dispatcher of `ollama` (docs/spec/cli.md): flag parsing
// as cobra does it (--flag, --flag=value, -f value, bool flags), argument
// count checks with cobra's messages, and the version command.
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/internal.h"
#include "cli/agent.h"
#include "cli/launch.h"
#include "client/client.h"
#include "json/json.h"
#include "runner/runner.h"
#include "server/server.h"

static const char *const env_host_only[] = {"OLLAMA_HOST", NULL};
static const char *const env_run[] = {"OLLAMA_EDITOR", "OLLAMA_HOST", "OLLAMA_NOHISTORY", NULL};
static const char *const env_serve[] = {"OLLAMA_DEBUG",
                                        "OLLAMA_HOST",
                                        "OLLAMA_CONTEXT_LENGTH",
                                        "OLLAMA_KEEP_ALIVE",
                                        "OLLAMA_MAX_LOADED_MODELS",
                                        "OLLAMA_MAX_QUEUE",
                                        "OLLAMA_MODELS",
                                        "OLLAMA_NUM_PARALLEL",
                                        "OLLAMA_NOPRUNE",
                                        "OLLAMA_ORIGINS",
                                        "OLLAMA_SCHED_SPREAD",
                                        "OLLAMA_FLASH_ATTENTION",
                                        "OLLAMA_KV_CACHE_TYPE",
                                        "OLLAMA_LLM_LIBRARY",
                                        "OLLAMA_GPU_OVERHEAD",
                                        "OLLAMA_LOAD_TIMEOUT",
                                        "OLLAMA_REGISTRY_MIRROR",
                                        "OLLAMA_PULL_MIRROR",
                                        "OLLAMA_DRAIN_TIMEOUT",
                                        NULL};

static const struct cli_flag flags_create[] = {
    {"file", 'f', "string", "Name of the Modelfile (default \"Modelfile\")"},
    {"quantize", 'q', "string", "Quantize model to this level (e.g. q4_K_M)"},
    {"draft-quantize", 0, "string", "Quantize draft model to this level"},
    {NULL, 0, NULL, NULL},
};
static const struct cli_flag flags_show[] = {
    {"license", 0, NULL, "Show license of a model"},
    {"modelfile", 0, NULL, "Show Modelfile of a model"},
    {"parameters", 0, NULL, "Show parameters of a model"},
    {"system", 0, NULL, "Show system message of a model"},
    {"template", 0, NULL, "Show template of a model"},
    {"verbose", 'v', NULL, "Show detailed model information"},
    {NULL, 0, NULL, NULL},
};
static const struct cli_flag flags_run[] = {
    {"dimensions", 0, "int",
     "Truncate output embeddings to specified dimension (embedding models only)"},
    {"format", 0, "string", "Response format (e.g. json)"},
    {"hidethinking", 0, NULL, "Hide thinking output (if provided)"},
    {"insecure", 0, NULL, "Use an insecure registry"},
    {"keepalive", 0, "string", "Duration to keep a model loaded (e.g. 5m)"},
    {"nowordwrap", 0, NULL, "Don't wrap words to the next line automatically"},
    {"think", 0, "string[=\"true\"]",
     "Enable thinking mode: true/false or high/medium/low for supported models"},
    {"truncate", 0, NULL, "Truncate inputs that exceed the context length (embedding models only)"},
    {"verbose", 0, NULL, "Show timings for response"},
    {NULL, 0, NULL, NULL},
};
static const struct cli_flag flags_agent[] = {
    {"format", 0, "string", "Response format: json or a JSON schema"},
    {"hidethinking", 0, NULL, "Hide thinking output (if provided)"},
    {"think", 0, "string[=\"true\"]",
     "Enable thinking mode: true/false or high/medium/low for supported models"},
    {NULL, 0, NULL, NULL},
};
static const struct cli_flag flags_insecure[] = {
    {"insecure", 0, NULL, "Use an insecure registry"},
    {NULL, 0, NULL, NULL},
};

int cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("Error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int cmd_serve(struct cli_args *a)
{
    (void)a;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    return server_main(self);
}

// The hidden `runner` command: its flags are parsed here like any other
// command's, then handed to runner_main as "--name value" pairs.
static const struct cli_flag flags_runner[] = {
    {"model", 0, "string", "Model file"},
    {"draft", 0, "string", "Draft model file (speculative decoding)"},
    {"lora", 0, "stringArray", "LoRA adapter file (repeatable)"},
    {"mmproj", 0, "string", "Vision projector file"},
    {"port", 0, "int", "Port to listen on"},
    {"ctx-size", 0, "int", "Context per slot"},
    {"parallel", 0, "int", "Slots"},
    {"batch-size", 0, "int", "Batch size"},
    {"threads", 0, "int", "Threads"},
    {"kv-cache-type", 0, "string", "KV cache type"},
    {"n-gpu-layers", 0, "int", "GPU layers"},
    {"embedding", 0, NULL, "Embedding runner"},
    {"no-context-shift", 0, NULL, "No shift"},
    {"flash-attn", 0, NULL, "Flash attention"},
    {"no-mmap", 0, NULL, "No mmap"},
    {NULL, 0, NULL, NULL},
};

static int cmd_runner(struct cli_args *a)
{
    if (a->n_pos > 0)
        return cli_fail("unexpected argument \"%s\"", a->pos[0]);
    char *argv[2 * 32 + 2 * 16];
    int n = 0;
    for (int i = 0; a->cmd->flags[i].name; i++) {
        const char *v = a->values[i];
        if (!v || (!a->cmd->flags[i].type && strcmp(v, "true") != 0))
            continue;
        bool many = a->cmd->flags[i].type && strcmp(a->cmd->flags[i].type, "stringArray") == 0;
        // A repeated flag goes on as one pair per value (the runner caps --lora at 16).
        for (const char *p = v; p && n < (int)(sizeof argv / sizeof argv[0]) - 1;) {
            const char *nl = many ? strchr(p, '\n') : NULL;
            argv[n++] = xasprintf("--%s", a->cmd->flags[i].name);
            if (!a->cmd->flags[i].type)
                break;
            argv[n++] = nl ? xstrndup(p, (size_t)(nl - p)) : xstrdup(p);
            p = nl ? nl + 1 : NULL;
        }
    }
    int rc = runner_main(n, argv);
    for (int i = 0; i < n; i++)
        free(argv[i]);
    return rc;
}

static const struct cli_flag flags_launch[] = {
    {"model", 0, "string", "Model to use"},
    {"config", 0, NULL, "Configure without launching"},
    {"restore", 0, NULL, "Restore an integration to its default profile"},
    {"yes", 'y', NULL, "Automatically answer yes to confirmation prompts"},
    {NULL, 0, NULL, NULL},
};

const struct cli_command cli_commands[] = {
    {"serve", "start", "serve [flags]", "Start ollama", 0, 0, NULL, env_serve, cmd_serve, false},
    {"create", NULL, "create MODEL [flags]", "Create a model", 1, 1, flags_create, env_host_only,
     cli_cmd_create, false},
    {"show", NULL, "show MODEL [flags]", "Show information for a model", 1, 1, flags_show,
     env_host_only, cli_cmd_show, false},
    {"run", NULL, "run MODEL [PROMPT] [flags]", "Run a model", 1, -1, flags_run, env_run,
     cli_cmd_run, false},
    {"stop", NULL, "stop MODEL [flags]", "Stop a running model", 1, 1, NULL, env_host_only,
     cli_cmd_stop, false},
    {"pull", NULL, "pull MODEL [flags]", "Pull a model from a registry", 1, 1, flags_insecure,
     env_host_only, cli_cmd_pull, false},
    {"push", NULL, "push MODEL [flags]", "Push a model to a registry", 1, 1, flags_insecure,
     env_host_only, cli_cmd_push, false},
    {"list", "ls", "list [flags]", "List models", 0, 1, NULL, env_host_only, cli_cmd_list, false},
    {"ps", NULL, "ps [flags]", "List running models", 0, 1, NULL, env_host_only, cli_cmd_ps, false},
    {"cp", NULL, "cp SOURCE DESTINATION [flags]", "Copy a model", 2, 2, NULL, env_host_only,
     cli_cmd_cp, false},
    {"rm", NULL, "rm MODEL [MODEL...] [flags]", "Remove a model", 1, -1, NULL, env_host_only,
     cli_cmd_rm, false},
    {"launch", NULL, "launch [INTEGRATION] [flags] [-- ARGS...]",
     "Launch the Ollama menu or an integration", 0, -1, flags_launch, env_host_only, cli_cmd_launch,
     false},
    {"signin", NULL, "signin", "Sign in to ollama.com", 0, 0, NULL, NULL, cli_cmd_no_cloud, false},
    {"signout", NULL, "signout", "Sign out from ollama.com", 0, 0, NULL, NULL, cli_cmd_no_cloud,
     false},
    {"agent", NULL, "agent MODEL [flags]", "Chat with a local agent that can use tools", 1, 1,
     flags_agent, env_host_only, cli_cmd_agent, true},
    // Ollama's hidden spellings of signin / signout.
    {"login", NULL, "login", "Sign in to ollama.com", 0, 0, NULL, NULL, cli_cmd_no_cloud, true},
    {"logout", NULL, "logout", "Sign out from ollama.com", 0, 0, NULL, NULL, cli_cmd_no_cloud,
     true},
    {"runner", NULL, "runner [flags]", "Run a model runner (internal)", 0, -1, flags_runner, NULL,
     cmd_runner, true},
    {NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, false},
};

static const struct cli_command *find_command(const char *name)
{
    for (const struct cli_command *c = cli_commands; c->name; c++) {
        if (strcmp(c->name, name) == 0)
            return c;
        if (c->aliases) {
            // aliases is a comma-separated list
            const char *p = c->aliases;
            size_t n = strlen(name);
            while (*p) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len == n && strncmp(p, name, n) == 0)
                    return c;
                p += len;
                while (*p == ',' || *p == ' ')
                    p++;
            }
        }
    }
    return NULL;
}

const char *cli_flag(const struct cli_args *a, const char *name)
{
    for (int i = 0; a->cmd->flags && a->cmd->flags[i].name; i++)
        if (strcmp(a->cmd->flags[i].name, name) == 0)
            return a->values[i];
    return NULL;
}

static int find_flag(const struct cli_command *c, const char *name, char shorthand)
{
    for (int i = 0; c->flags && c->flags[i].name; i++)
        if ((name && strcmp(c->flags[i].name, name) == 0) ||
            (shorthand && c->flags[i].shorthand == shorthand))
            return i;
    return -1;
}

// Parses argv (after the command name) into a. Returns 0, 1 after printing
// an error, or 2 when help was asked for.
static int parse_args(const struct cli_command *c, int argc, char **argv, struct cli_args *a)
{
    memset(a, 0, sizeof(*a));
    a->cmd = c;
    a->pos = xcalloc((size_t)argc + 1, sizeof(char *));
    a->n_before_dash = -1;
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            a->pos[a->n_pos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            a->n_before_dash = a->n_pos;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            return 2;
        bool is_long = arg[1] == '-';
        char name[64];
        const char *value = NULL;
        int idx;
        if (is_long) {
            const char *eq = strchr(arg + 2, '=');
            size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            snprintf(name, sizeof(name), "%.*s", (int)len, arg + 2);
            value = eq ? eq + 1 : NULL;
            idx = find_flag(c, name, 0);
            if (idx < 0)
                return cli_fail("unknown flag: --%s", name);
        } else {
            idx = find_flag(c, NULL, arg[1]);
            if (idx < 0)
                return cli_fail("unknown shorthand flag: '%c' in %s", arg[1], arg);
            if (arg[2])
                value = arg[2] == '=' ? arg + 3 : arg + 2;
        }
        const struct cli_flag *f = &c->flags[idx];
        if (!f->type) {
            a->values[idx] = value ? value : "true";
        } else if (value) {
            a->values[idx] = value;
        } else if (strstr(f->type, "[=")) {
            a->values[idx] = "true";  // optional value (--think)
        } else if (i + 1 < argc) {
            value = argv[++i];
            if (a->values[idx] && strcmp(f->type, "stringArray") == 0) {
                char *all = xasprintf("%s\n%s", a->values[idx], value);
                free(a->joined[idx]);
                value = a->joined[idx] = all;
            }
            a->values[idx] = value;
        } else {
            return cli_fail("flag needs an argument: --%s", f->name);
        }
    }
    if (a->n_pos < c->min_args) {
        if (c->min_args == c->max_args)
            return cli_fail("accepts %d arg(s), received %d", c->min_args, a->n_pos);
        return cli_fail("requires at least %d arg(s), only received %d", c->min_args, a->n_pos);
    }
    if (c->max_args >= 0 && a->n_pos > c->max_args) {
        if (c->min_args == c->max_args)
            return cli_fail("accepts %d arg(s), received %d", c->max_args, a->n_pos);
        return cli_fail("accepts at most %d arg(s), received %d", c->max_args, a->n_pos);
    }
    return 0;
}

// `ollama -v`: the server's version, and warnings as Ollama prints them.
static int cmd_version(void)
{
    struct client *c = NULL;
    struct err e = {0};
    char server_version[64] = "";
    if (client_new(&c, NULL, &e) == 0) {
        long status = 0;
        struct buf body;
        buf_init(&body, 1 << 16);
        if (client_request(c, "GET", "/api/version", NULL, 0, &status, &body, &e) == 0 &&
            status == 200) {
            json_t *v = NULL;
            if (jsonx_parse(body.data, body.len, &v, NULL) == 0) {
                const char *s = json_string_value(json_object_get(v, "version"));
                if (s)
                    snprintf(server_version, sizeof(server_version), "%s", s);
                json_decref(v);
            }
        }
        buf_deinit(&body);
        client_free(c);
    }
    if (server_version[0])
        printf("ollama version is %s\n", server_version);
    else
        printf("Warning: could not connect to a running Ollama instance\n");
    if (strcmp(server_version, OLLAMA_VERSION) != 0)
        printf("Warning: client version is %s\n", OLLAMA_VERSION);
    return 0;
}

// The root command's own flags (Ollama 0.33: --verbose, --nowordwrap, for its
// interactive start). As cobra does, flags before a command name are that
// command's: `ollama --verbose run m` is `ollama run m --verbose`.
static bool is_root_flag(const char *arg)
{
    static const char *const names[] = {"--verbose", "--nowordwrap"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (!strncmp(arg, names[i], n) && (arg[n] == 0 || arg[n] == '='))
            return true;
    }
    return false;
}

// Moves the leading root flags after the command name (when there is one).
// Returns the number of root flags moved or consumed.
static int hoist_root_flags(int argc, char **argv)
{
    int n = 0;
    while (1 + n < argc && is_root_flag(argv[1 + n]))
        n++;
    if (n == 0 || 1 + n >= argc)
        return n;
    char *cmd = argv[1 + n];
    memmove(argv + 2, argv + 1, (size_t)n * sizeof(char *));
    argv[1] = cmd;
    return n;
}

int cli_main(int argc, char **argv)
{
    if (hoist_root_flags(argc, argv) == argc - 1)
        argc = 1;  // only root flags: the bare command
    if (argc < 2) {
        // A terminal gets the launcher menu (0.33's runInteractiveTUI).
        if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))
            return cli_launcher();
        cli_print_usage(stderr);
        return 0;
    }
    const char *first = argv[1];
    if (strcmp(first, "-v") == 0 || strcmp(first, "--version") == 0)
        return cmd_version();
    if (strcmp(first, "-h") == 0 || strcmp(first, "--help") == 0) {
        printf("Large language model runner\n\n");
        cli_print_usage(stdout);
        return 0;
    }
    if (strcmp(first, "help") == 0) {
        if (argc < 3) {
            printf("Large language model runner\n\n");
            cli_print_usage(stdout);
            return 0;
        }
        const struct cli_command *c = find_command(argv[2]);
        if (!c) {
            printf("Unknown help topic [`%s`]\n", argv[2]);
            cli_print_usage(stdout);
            return 0;
        }
        cli_print_command_help(stdout, c);
        return 0;
    }
    const struct cli_command *c = find_command(first);
    if (!c) {
        fprintf(stderr, "Error: unknown command \"%s\" for \"ollama\"\n", first);
        fprintf(stderr, "Run 'ollama --help' for usage.\n");
        return 1;
    }
    struct cli_args a;
    int rc = parse_args(c, argc - 2, argv + 2, &a);
    if (rc == 2) {
        cli_print_command_help(stdout, c);
        rc = 0;
    } else if (rc == 0) {
        rc = c->run(&a);
    }
    free(a.pos);
    for (int i = 0; i < 32; i++)
        free(a.joined[i]);
    return rc;
}

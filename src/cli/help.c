// Cobra-style usage and help text (docs/spec/cli.md §2): the usage block of a bare
// `ollama`, `ollama --help`, and `ollama <command> --help` with flags sorted
// and the environment variables each command reads.
#include "cli/internal.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_env_doc env_docs[] = {
    {"OLLAMA_DEBUG", "Show additional debug information (e.g. OLLAMA_DEBUG=1)"},
    {"OLLAMA_HOST", "IP Address for the ollama server (default 127.0.0.1:11434)"},
    {"OLLAMA_CONTEXT_LENGTH", "Context length to use unless otherwise specified (default: 4096)"},
    {"OLLAMA_KEEP_ALIVE", "The duration that models stay loaded in memory (default \"5m\")"},
    {"OLLAMA_MAX_LOADED_MODELS", "Maximum number of loaded models per GPU"},
    {"OLLAMA_MAX_QUEUE", "Maximum number of queued requests"},
    {"OLLAMA_MODELS", "The path to the models directory"},
    {"OLLAMA_NUM_PARALLEL", "Maximum number of parallel requests"},
    {"OLLAMA_NOPRUNE", "Do not prune model blobs on startup"},
    {"OLLAMA_ORIGINS", "A comma separated list of allowed origins"},
    {"OLLAMA_SCHED_SPREAD", "Always schedule model across all GPUs"},
    {"OLLAMA_FLASH_ATTENTION", "Enabled flash attention"},
    {"OLLAMA_KV_CACHE_TYPE", "Quantization type for the K/V cache (default: f16)"},
    {"OLLAMA_LLM_LIBRARY", "Set LLM library to bypass autodetection"},
    {"OLLAMA_GPU_OVERHEAD", "Reserve a portion of VRAM per GPU (bytes)"},
    {"OLLAMA_LOAD_TIMEOUT",
     "How long to allow model loads to stall before giving up (default \"5m\")"},
    {"OLLAMA_REGISTRY_MIRROR", "Upstream registry for the built-in /v2/ mirror (ollama-c)"},
    {"OLLAMA_PULL_MIRROR", "Registry that pulls of registry.ollama.ai models try first (ollama-c)"},
    {"OLLAMA_DRAIN_TIMEOUT",
     "How long SIGTERM waits for requests in flight before exiting (default \"5s\", ollama-c)"},
    {"OLLAMA_NOHISTORY", "Do not preserve readline history"},
    {"OLLAMA_EDITOR", "Path to editor for interactive prompt input"},
    {NULL, NULL},
};

static const char *env_doc(const char *name)
{
    for (const struct cli_env_doc *d = env_docs; d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d->doc;
    return "";
}

void cli_print_usage(FILE *out)
{
    fprintf(out, "Usage:\n  ollama [flags]\n  ollama [command]\n\nAvailable Commands:\n");
    for (const struct cli_command *c = cli_commands; c->name; c++)
        if (!c->hidden)
            fprintf(out, "  %-11s %s\n", c->name, c->short_help);
    fprintf(out, "  %-11s %s\n", "help", "Help about any command");
    fprintf(out, "\nFlags:\n  -h, --help         help for ollama\n"
                 "      --nowordwrap   Don't wrap words to the next line automatically\n"
                 "      --verbose      Show timings for response\n"
                 "  -v, --version      Show version information\n\n"
                 "Use \"ollama [command] --help\" for more information about a command.\n");
}

// "  -f, --file string   " : the left column of a flag row.
static void flag_left(const struct cli_flag *f, char *out, size_t n)
{
    char shorthand[8] = "    ";
    if (f->shorthand)
        snprintf(shorthand, sizeof(shorthand), "-%c, ", f->shorthand);
    snprintf(out, n, "  %s--%s%s%s", shorthand, f->name, f->type ? " " : "",
             f->type ? f->type : "");
}

static int flag_cmp(const void *a, const void *b)
{
    const struct cli_flag *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

void cli_print_command_help(FILE *out, const struct cli_command *c)
{
    fprintf(out, "%s\n\nUsage:\n  ollama %s\n", c->short_help, c->use);
    if (c->aliases)
        fprintf(out, "\nAliases:\n  %s, %s\n", c->name, c->aliases);

    // Flags sorted by name, with cobra's aligned description column.
    const struct cli_flag help = {"help", 'h', NULL, NULL};
    const struct cli_flag *flags[32];
    size_t n = 0;
    for (const struct cli_flag *f = c->flags; f && f->name && n < 31; f++)
        flags[n++] = f;
    flags[n++] = &help;
    qsort(flags, n, sizeof(flags[0]), flag_cmp);
    size_t width = 0;
    char left[96];
    for (size_t i = 0; i < n; i++) {
        flag_left(flags[i], left, sizeof(left));
        width = strlen(left) > width ? strlen(left) : width;
    }
    fprintf(out, "\nFlags:\n");
    for (size_t i = 0; i < n; i++) {
        flag_left(flags[i], left, sizeof(left));
        if (flags[i] == &help)
            fprintf(out, "%-*s   help for %s\n", (int)width, left, c->name);
        else
            fprintf(out, "%-*s   %s\n", (int)width, left, flags[i]->doc);
    }
    if (c->env && c->env[0]) {
        fprintf(out, "\nEnvironment Variables:\n");
        for (const char *const *v = c->env; *v; v++)
            fprintf(out, "      %-27s   %s\n", *v, env_doc(*v));
    }
}

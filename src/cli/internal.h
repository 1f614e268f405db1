// Shared between the CLI's own files: the command table and help rendering.
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "util/util.h"

struct cli_flag {
    const char *name;  // long name without "--"
    char shorthand;    // 0 when none
    const char *type;  // "string", "int", or NULL for a bool flag
    const char *doc;
};

struct cli_env_doc {
    const char *name;
    const char *doc;
};

// Parsed arguments of one invocation.
struct cli_args {
    int n_pos;
    char **pos;          // positional arguments
    const char *values[32];  // values[i] for flags[i]: NULL unset, "true" for bools
    const struct cli_command *cmd;
};

typedef int (*cli_cmd_fn)(struct cli_args *a);

struct cli_command {
    const char *name;
    const char *aliases;  // "start" (comma-separated) or NULL
    const char *use;      // "run MODEL [PROMPT]"
    const char *short_help;
    int min_args, max_args;  // -1 = unlimited
    const struct cli_flag *flags;  // NULL-terminated array or NULL
    const char *const *env;        // environment variables shown in help
    cli_cmd_fn run;
    bool hidden;
};

extern const struct cli_command cli_commands[];

void cli_print_usage(FILE *out);
void cli_print_command_help(FILE *out, const struct cli_command *c);
// Value of a flag by long name, or NULL.
const char *cli_flag(const struct cli_args *a, const char *name);
// Prints "Error: <msg>" to stderr and returns 1.
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// cli: the `ollama` command line (docs/spec/cli.md): subcommand table, cobra-style
// help and argument checks, and each subcommand as a thin HTTP client of
// `ollama serve`.
#pragma once

// Runs the command line; returns the process exit status.
int cli_main(int argc, char **argv);

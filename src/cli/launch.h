// `ollama launch` internals shared by launch.c (the integration table and the
// command), launch_config.c (one config writer per file a tool reads) and
// launch_backup.c (backup and restore of the user's files); the unit tests
// drive the writers against a temporary HOME.
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cli/internal.h"

// Codex's context window when the model's is unknown (0.33's fallback).
#define LAUNCH_CODEX_FALLBACK_CONTEXT 128000

// What a tool is pointed at.
struct launch_target {
    const char *home;   // the user's home directory
    const char *host;   // OLLAMA_HOST as a URL, no trailing slash
    const char *model;  // the model every tier uses
    int64_t context;    // context window in tokens (0 = unknown)
    bool vision, thinking;
};

// Turns the user's current file (old: NULL or empty when there is none) into
// the bytes to write, appended to out.
typedef int (*launch_writer_fn)(const struct launch_target *t, const struct buf *old,
                                struct buf *out, struct err *e);

struct launch_file {
    const char *path;  // relative to $HOME; "$HERMES_HOME/x" honours that variable
    launch_writer_fn write;
};

extern const struct launch_file launch_files_cline[], launch_files_codex[], launch_files_droid[],
    launch_files_hermes[], launch_files_opencode[], launch_files_openclaw[], launch_files_pi[],
    launch_files_qwen[], launch_files_vscode[];

// The absolute path of f under home.
char *launch_file_path(const struct launch_file *f, const char *home);

// Writes every file of files (NULL-terminated) for t, backing up the user's
// own first; the paths written are printed to log when it is not NULL.
int launch_write_files(const char *integration, const struct launch_file *files,
                       const struct launch_target *t, FILE *log, struct err *e);
// Puts back what the user had before the first launch: the original bytes,
// or no file where there was none. Returns how many files were restored.
int launch_restore_files(const char *integration, const struct launch_file *files, const char *home,
                         FILE *log, struct err *e);

// The integration table (launch.c), for the launcher menu and the tests.
size_t cli_launch_count(void);
bool cli_launch_info(size_t i, const char **name, const char **display, const char **desc,
                     bool *hidden);
// Writes / restores the config files of the integration named name (or an
// alias); restore returns how many files it put back.
int cli_launch_write(const char *name, const struct launch_target *t, FILE *log, struct err *e);
int cli_launch_restore(const char *name, const char *home, FILE *log, struct err *e);
// The environment and arguments the tool is started with.
int cli_launch_setup(const char *name, const struct launch_target *t, json_t *env, json_t *args);
// The program an integration runs ("claude"), NULL for an unknown name.
const char *cli_launch_program(const char *name);
// How to install it: "install from URL" or "install with: COMMAND".
const char *cli_launch_install_hint(const char *name);

// ~/.ollama/config.json as 0.33 keeps it (launcher.c): the menu's last
// choice, the chat's last model and each integration's models.
json_t *cli_user_config_load(void);
void cli_user_config_save(json_t *cfg);
// The remembered model of an integration (NULL: the chat's last model).
const char *cli_user_config_model(json_t *cfg, const char *integration);
// Records a choice; any argument may be NULL.
void cli_user_config_remember(const char *selection, const char *integration, const char *model);

// The model picker (picker.c): a malloc'd model name, pulled first when it
// was not on the server, or NULL when the user went back.
struct client;
char *cli_model_picker(struct client *c, const char *title, const char *current);
// Starts (or resumes after endwin) the ncurses screen.
void cli_curses_begin(void);
// The launcher menu behind bare `ollama` on a terminal (launcher.c).
int cli_launcher(void);
// The context window of model as 0.33 finds it: loaded (/api/ps), else
// OLLAMA_CONTEXT_LENGTH, else the model's trained length (show); 0 unknown.
int64_t cli_model_context(struct client *c, const char *model, const json_t *show);

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

// Where launch keeps the files of tools it gives a config root of its own
// (relative to $HOME), and DeepSeek Harness's key variable.
#define LAUNCH_DSH_DIR     ".ollama/launch/dsh"
#define LAUNCH_MUSE_CONFIG ".ollama/launch/muse-config"
#define LAUNCH_DSH_KEY_ENV "OLLAMA_LAUNCH_DSH_API_KEY"
// Muse's context and output limit when the model's is unknown (0.33's).
#define LAUNCH_MUSE_FALLBACK_LIMIT 32768

// What a tool is pointed at.
struct launch_target {
    const char *home;   // the user's home directory
    const char *host;   // OLLAMA_HOST as a URL, no trailing slash
    const char *model;  // the model every tier uses
    int64_t context;    // context window in tokens (0 = unknown)
    bool vision, thinking;
    char **extra;  // the arguments after "--", for the tool
    int n_extra;
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
    launch_files_qwen[], launch_files_vscode[], launch_files_omp[], launch_files_dsh[],
    launch_files_muse[];

// YAML through libyaml (launch_yaml.c): a document as a JSON tree (an empty
// one is null; _mapping: {} and an error for anything but a mapping), and a
// tree written back as block YAML.
// The object at parent[key], replacing a missing or non-object value (the
// config writers' way down a user's file).
json_t *launch_obj_at(json_t *parent, const char *key);
int launch_yaml_parse(const struct buf *in, json_t **out, struct err *e);
int launch_yaml_parse_mapping(const struct buf *in, json_t **out, struct err *e);
void launch_yaml_dump(const json_t *v, struct buf *out);

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

// How a missing tool installs itself (launch_install.c, 0.33's
// ensure<Tool>Installed): the programs the installer needs, the question,
// the command.
struct launch_need {
    const char *program, *label;  // looked up on PATH; shown when missing
};
struct launch_install {
    const char *key;       // "cline": "cline installation cancelled"
    const char *subject;   // of the missing-dependency error ("OpenClaw")
    const char *display;   // "Installing Cline..."
    const char *question;  // "Cline is not installed. Install with npm?"
    struct launch_need needs[3];
    const char *needs_error;  // that error's whole text where 0.33 words it its own way
    const char *argv[5];      // the install command
    const char *npx;          // npm package npx runs when that command fails (NULL: none)
};
// Asks question: 1 yes (always with yes), 0 no, -1 after printing 0.33's
// "requires confirmation; re-run with --yes" error off a terminal.
int launch_ask(const char *question, bool yes, bool default_yes);
// Offers the install and runs it: 0 when it ran and succeeded, 2 when it
// failed but npx can run in->npx instead, else 1 after printing the error
// (and how to install by hand when not run).
int launch_install(const char *name, const struct launch_install *in, bool yes);
// program's path on PATH (malloc'd), NULL when it is not there.
char *launch_which(const char *program);
// Runs argv attached to the terminal and waits: its exit status, -1 when it
// could not start.
int launch_run_attached(const char *const *argv);

// Deprecated models (launch_models.c): whether name is one, the question
// 0.33 asks (NULL when it is not), and the question asked through
// launch_ask (1 go on, 0 declined, -1 error printed).
struct client;
bool cli_launch_model_deprecated(const char *name);
char *cli_launch_deprecated_prompt(const char *model, const char *label, const char *command,
                                   const char *recommended);
int cli_launch_check_deprecated(struct client *c, const char *model, const char *label,
                                const char *command, bool yes);

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

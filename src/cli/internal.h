// Shared between the CLI's own files: the command table and help rendering.
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include <signal.h>
#include <stdint.h>
#include <wchar.h>

#include "json/json.h"
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
    char **pos;              // positional arguments
    int n_before_dash;       // positionals before "--" (-1: no "--")
    const char *values[32];  // values[i] for flags[i]: NULL unset, "true" for bools
    // A repeated flag of type "stringArray": its values joined by '\n' (owned).
    char *joined[32];
    const struct cli_command *cmd;
};

typedef int (*cli_cmd_fn)(struct cli_args *a);

struct cli_command {
    const char *name;
    const char *aliases;  // "start" (comma-separated) or NULL
    const char *use;      // "run MODEL [PROMPT]"
    const char *short_help;
    int min_args, max_args;        // -1 = unlimited
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

// ---------------------------------------------------------------------------
// Formatting (format.c): pure functions with golden tests.

// Display width of UTF-8 text in terminal columns (wide characters count 2).
size_t cli_text_width(const char *s, size_t n);

// A table of strings: row 0 may be a header.
struct cli_table {
    int n_cols, n_rows, cap;
    char **cells;  // n_rows * n_cols, owned
};
void cli_table_init(struct cli_table *t, int n_cols);
void cli_table_deinit(struct cli_table *t);
// Appends a row of n_cols cells (NULL cells become "").
void cli_table_add(struct cli_table *t, const char *const *row);
// `ollama list`/`ps` layout (cli.md §3.8): row 0 is the header.
void cli_table_render_list(const struct cli_table *t, struct buf *out);
// One `ollama show` section (cli.md §3.3): "  Title\n", rows indented by an
// empty first column, cells wrapped at wrap_cols, then a blank line.
void cli_table_render_section(const struct cli_table *t, const char *title, int wrap_cols,
                              struct buf *out);

// HumanNumber (cli.md §6.3): "8B", "8.0B", "137M", "22.57M", "5K", "999".
void cli_human_number(uint64_t n, char *out, size_t len);
// A float64 as Go's %v prints it: "131072", "1e-05", "4.294967295e+09".
void cli_go_float(double v, char *out, size_t n);
// The PROCESSOR column of `ollama ps` (cli.md §3.9).
void cli_processor(int64_t size, int64_t size_vram, char *out, size_t n);
// The whole `ollama show` report for an /api/show answer.
void cli_show_report(const json_t *show, bool verbose, struct buf *out);
// The --verbose statistics block (cli.md §6.5) of a final response.
void cli_stats_render(const json_t *final, struct buf *out);
// Remaining-time text of a progress bar: "56s", "3m56s", "1h5m", "99h+".
void cli_eta_format(double seconds, char *out, size_t n);
// One progress bar line (cli.md §4); rate_bps < 0 when unknown.
void cli_bar_render(const char *label, uint64_t current, uint64_t total, double rate_bps, int width,
                    struct buf *out);
// The same for output that is not a terminal: "<label> NN% <size>".
void cli_bar_render_plain(const char *label, uint64_t current, uint64_t total, struct buf *out);
// One spinner line (cli.md §4): frame is an index into the 10 frames.
void cli_spinner_render(const char *message, int frame, bool stopped, struct buf *out);

// Word wrap of streamed text (cli.md §6.6): state kept across chunks.
struct cli_wrap {
    bool enabled;
    int width;        // terminal columns
    int line_len;     // columns on the current line
    struct buf word;  // the partial word on the current line
};
void cli_wrap_init(struct cli_wrap *w, bool enabled, int width);
void cli_wrap_deinit(struct cli_wrap *w);
void cli_wrap_reset(struct cli_wrap *w);
// Appends the bytes to print for text to out.
void cli_wrap_feed(struct cli_wrap *w, const char *text, size_t n, struct buf *out);

// Images and audio in a prompt (media.c, cli.md §5.5). Paths in text ending
// in .jpg/.jpeg/.png/.webp (when images) or .wav (when audio) that name a
// file of that kind are read, appended to media as base64, reported on log
// ("Added image '<path>'") and removed from the text; *out_text (owned) is
// the rest. Returns how many were added.
int cli_media_extract(const char *text, bool images, bool audio, char **out_text, json_t *media,
                      FILE *log);
// The content type sniffed from a file's first bytes.
const char *cli_media_type(const unsigned char *p, size_t n);

// ---------------------------------------------------------------------------
// Progress display (progress.c, cli.md §4): spinners and bars on stderr,
// redrawn every 100 ms on a terminal, printed once per line otherwise.

struct cli_progress;
// out: where to draw; tty: draw in place (else plain lines).
struct cli_progress *cli_progress_new(FILE *out, bool tty);
// Adds a spinner line (stopping the previous spinner); returns its index.
int cli_progress_spinner(struct cli_progress *p, const char *message);
// Changes a spinner's message.
void cli_progress_spinner_set(struct cli_progress *p, int idx, const char *message);
void cli_progress_spinner_stop(struct cli_progress *p, int idx);
// The bar keyed by key (created with label and total when new); returns it.
int cli_progress_bar(struct cli_progress *p, const char *key, const char *label, uint64_t total);
void cli_progress_bar_set(struct cli_progress *p, int idx, uint64_t completed, uint64_t total);
// Final redraw (every spinner stopped) and a newline.
void cli_progress_stop(struct cli_progress *p);
// Erases what was drawn (the `run` spinner) instead.
void cli_progress_stop_clear(struct cli_progress *p);
void cli_progress_free(struct cli_progress *p);
// Terminal size of fd, 80x24 when unknown.
void cli_term_size(int fd, int *cols, int *rows);

// ---------------------------------------------------------------------------
// Shared command plumbing (commands.c, run.c, repl.c).

struct client;
// A client for OLLAMA_HOST that has answered HEAD / (else prints the error
// and returns NULL).
struct client *cli_connect(void);
// Pulls model, rendering the progress on stderr (pull and run).
int cli_pull_model(struct client *c, const char *model, bool insecure, struct err *e);
// Prints the error as `Error: ...` and returns 1.
int cli_fail_err(const struct err *e);

// Options of one run/REPL session.
struct cli_run_opts {
    char *model;
    char *parent;        // details.parent_model of the model (for /save)
    const char *format;  // "json" or NULL
    const char *keep_alive;
    const char *think;  // NULL unset, "true", "false", "high", ...
    bool verbose, wordwrap, hide_thinking, insecure;
    json_t *options;   // session options (/set parameter)
    char *system;      // session system message
    json_t *show;      // the model's /api/show answer
    json_t *messages;  // chat history (REPL)
};
// Streams one /api/generate (chat=false) or /api/chat request and prints
// it. Returns 0, ERR_CANCELLED on Ctrl+C, or an error. *reply (may be
// NULL) receives the assistant message {role, content, thinking} for chat.
int cli_generate(struct client *c, struct cli_run_opts *o, const char *prompt, bool chat,
                 json_t **reply, struct err *e);
// Whether the /api/show answer lists capability cap.
bool cli_has_capability(const json_t *show, const char *cap);
// The interactive REPL (repl.c).
int cli_repl(struct client *c, struct cli_run_opts *o);
// The SIGINT flag of the current generation.
extern volatile sig_atomic_t cli_interrupted;
void cli_sigint_install(void);
// Reads one UTF-8 character from stdin for libedit (EL_GETCFN): 1 with *wc,
// 0 at end of input, -1 on error; with stop_on_interrupt, 2 when a signal
// set cli_interrupted while waiting (else reading goes on).
int cli_tty_read_char(wchar_t *wc, bool stop_on_interrupt);
// Loads the model (empty prompt) with a spinner.
int cli_preload(struct client *c, struct cli_run_opts *o, struct err *e);
// `ollama list` output for prefix (used by /list too).
int cli_list_print(struct client *c, const char *prefix, struct err *e);

// Subcommands (commands.c, run.c), referenced by the table in cli.c.
int cli_cmd_create(struct cli_args *a);
int cli_cmd_show(struct cli_args *a);
int cli_cmd_run(struct cli_args *a);
int cli_cmd_stop(struct cli_args *a);
int cli_cmd_pull(struct cli_args *a);
int cli_cmd_push(struct cli_args *a);
int cli_cmd_list(struct cli_args *a);
int cli_cmd_ps(struct cli_args *a);
int cli_cmd_cp(struct cli_args *a);
int cli_cmd_rm(struct cli_args *a);
// launch (launch.c): starts Claude Code, Codex or OpenCode on this server.
int cli_cmd_launch(struct cli_args *a);
// signin / signout: this build has no ollama.com account support (exit 1).
int cli_cmd_no_cloud(struct cli_args *a);

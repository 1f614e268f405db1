// The interactive REPL of `ollama run` (docs/spec/cli.md §5) over libedit:
// history in ~/.ollama/history, """ multi-line input, the slash commands,
// Ctrl+C (clears the line, or stops a response), Ctrl+D (exits), and chat
// through /api/chat with the running message history.
//
// While a line is being edited the terminal's ISIG is off so Ctrl+C reaches
// libedit as a key (bound to interrupt the line); during a response the
// terminal is in its normal mode and Ctrl+C raises SIGINT, which cancels the
// request.
#include "cli/internal.h"

#include <errno.h>
#include <histedit.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "client/client.h"
#include "store/store.h"

#define HISTORY_MAX 100

// What an unfinished """ block is gathering.
enum multiline { ML_NONE, ML_PROMPT, ML_SYSTEM };

struct repl {
    struct client *c;
    struct cli_run_opts *o;
    EditLine *el;
    History *hist;
    const char *prompt;
    const char *placeholder;  // to draw before the first key of a line, or NULL
    bool placeholder_shown;
    bool fancy;  // a terminal that understands colours
    bool ctrl_c;
    bool history_on;
    char *history_path;  // NULL when history is disabled by OLLAMA_NOHISTORY
    char **entries;      // the last HISTORY_MAX lines, oldest first
    int n_entries;

    // The chat loop's state.
    struct buf text;     // the message being gathered (several lines inside """)
    enum multiline ml;   // ML_NONE unless a """ block is open
    bool vision, audio;  // what the model takes besides text
    struct err e;        // shared by the loop's steps; cleared before each turn
};

static struct repl *g_repl;  // for libedit's callbacks (one REPL per process)

static char *prompt_fn(EditLine *el)
{
    (void)el;
    return (char *)g_repl->prompt;
}

// Reads one character for libedit (UTF-8 from stdin). Before the first key
// of a line it draws the grey placeholder after the prompt (the cursor moved
// back to where it was, so libedit's idea of the screen stays true), and the
// key erases it.
static int read_char(EditLine *el, wchar_t *wc)
{
    (void)el;
    struct repl *r = g_repl;
    if (r->placeholder) {
        bool typed_ahead = false;
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        typed_ahead = poll(&pfd, 1, 0) > 0;
        if (!typed_ahead) {
            fprintf(stdout, "\x1b[90m%s\x1b[0m\x1b[%dD", r->placeholder,
                    (int)strlen(r->placeholder));
            fflush(stdout);
            r->placeholder_shown = true;
        }
        r->placeholder = NULL;
    }
    int rc = cli_tty_read_char(wc, false);
    if (rc != 1)
        return rc;
    if (r->placeholder_shown) {
        r->placeholder_shown = false;
        fputs("\x1b[K", stdout);
        fflush(stdout);
    }
    return 1;
}

static unsigned char on_ctrl_c(EditLine *el, int ch)
{
    (void)el, (void)ch;
    g_repl->ctrl_c = true;
    return CC_NEWLINE;
}

// Ctrl+G: edit the current line in $OLLAMA_EDITOR, $VISUAL, $EDITOR or vi,
// then put the result (trailing newlines removed) back on the line.
static unsigned char on_ctrl_g(EditLine *el, int ch)
{
    (void)ch;
    const LineInfo *li = el_line(el);
    char path[] = "/tmp/ollama-prompt-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return CC_ERROR;
    size_t len = (size_t)(li->lastchar - li->buffer);
    if (write(fd, li->buffer, len) != (ssize_t)len) {
        close(fd);
        unlink(path);
        return CC_ERROR;
    }
    close(fd);
    const char *editor = NULL;
    const char *vars[] = {"OLLAMA_EDITOR", "VISUAL", "EDITOR"};
    for (int i = 0; i < 3 && !editor; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            editor = v;
    }
    char *cmd = xasprintf("%s '%s' </dev/tty >/dev/tty", editor ? editor : "vi", path);
    int rc = system(cmd);
    free(cmd);
    struct buf b;
    buf_init(&b, 1u << 20);
    if (rc == 0 && fs_read_all(path, 1u << 20, &b, NULL) == 0) {
        while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
            b.data[--b.len] = '\0';
        el_replacestr(el, buf_cstr(&b));
    }
    buf_deinit(&b);
    unlink(path);
    return CC_REFRESH;
}

// Bracketed paste: the terminal wraps pasted text in ESC[200~ ... ESC[201~;
// it goes onto the line as it is, newlines included, so a pasted block is
// one message.
static unsigned char on_paste(EditLine *el, int ch)
{
    (void)ch;
    static const char end[] = "\x1b[201~";
    struct buf b;
    buf_init(&b, 16u << 20);
    char c;
    while (el_getc(el, &c) == 1) {
        if (buf_append_char(&b, c == '\r' ? '\n' : c) < 0)
            break;
        if (b.len >= sizeof(end) - 1 &&
            memcmp(b.data + b.len - (sizeof(end) - 1), end, sizeof(end) - 1) == 0) {
            b.len -= sizeof(end) - 1;
            b.data[b.len] = '\0';
            break;
        }
    }
    if (b.len)
        el_insertstr(el, buf_cstr(&b));
    buf_deinit(&b);
    return CC_REFRESH;
}

// ---------------------------------------------------------------------------
// History file: plain lines, the last HISTORY_MAX kept.

static void history_add_entry(struct repl *r, const char *line)
{
    if (r->n_entries == HISTORY_MAX) {
        free(r->entries[0]);
        memmove(r->entries, r->entries + 1, (HISTORY_MAX - 1) * sizeof(char *));
        r->n_entries--;
    }
    r->entries[r->n_entries++] = xstrdup(line);
    HistEvent ev;
    history(r->hist, &ev, H_ENTER, line);
}

static void history_load(struct repl *r)
{
    if (!r->history_path)
        return;
    struct buf b;
    buf_init(&b, 16u << 20);
    if (fs_read_all(r->history_path, 16u << 20, &b, NULL) == 0 && b.len) {
        char *p = b.data;
        while (*p) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            if (*p)
                history_add_entry(r, p);
            if (!nl)
                break;
            p = nl + 1;
        }
    }
    buf_deinit(&b);
}

static void history_save(struct repl *r)
{
    if (!r->history_path)
        return;
    struct buf b;
    buf_init(&b, 0);
    for (int i = 0; i < r->n_entries; i++)
        buf_printf(&b, "%s\n", r->entries[i]);
    char *dir = xstrdup(r->history_path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        fs_mkdir_p(dir, NULL);
    }
    free(dir);
    FILE *f = fopen(r->history_path, "w");
    if (f) {
        fwrite(b.data ? b.data : "", 1, b.len, f);
        fclose(f);
    }
    buf_deinit(&b);
}

static void remember(struct repl *r, const char *line)
{
    // Pasted blocks (with newlines) stay out of the line-based file.
    if (!r->history_on || !*line || strchr(line, '\n'))
        return;
    history_add_entry(r, line);
    history_save(r);
}

// Reads one line; NULL on EOF. *interrupted is set when Ctrl+C ended it.
static char *read_line(struct repl *r, const char *prompt, bool *interrupted)
{
    r->prompt = prompt;
    // The grey placeholder is drawn by read_char once libedit has drawn
    // the prompt.
    r->placeholder = !r->fancy                     ? NULL
                     : strcmp(prompt, ">>> ") == 0 ? "Send a message (/? for help)"
                                                   : "Press Enter to send";
    r->ctrl_c = false;
    int count = 0;
    const char *s = el_gets(r->el, &count);
    *interrupted = r->ctrl_c;
    if (!s || count <= 0)
        return NULL;
    char *line = xstrdup(s);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

// ---------------------------------------------------------------------------
// Help texts.

static void usage(bool multimodal)
{
    fputs("Available Commands:\n"
          "  /set            Set session variables\n"
          "  /show           Show model information\n"
          "  /load <model>   Load a session or model\n"
          "  /save <model>   Save your current session\n"
          "  /clear          Clear session context\n"
          "  /bye            Exit\n"
          "  /?, /help       Help for a command\n"
          "  /? shortcuts    Help for keyboard shortcuts\n"
          "\n"
          "Use \"\"\" to begin a multi-line message.\n",
          stderr);
    if (multimodal)
        fputs("Use /path/to/file to include .jpg, .png, .webp images, or .wav audio files.\n",
              stderr);
    fputs("\n", stderr);
}

static void usage_set(void)
{
    fputs("Available Commands:\n"
          "  /set parameter ...     Set a parameter\n"
          "  /set system <string>   Set system message\n"
          "  /set history           Enable history\n"
          "  /set nohistory         Disable history\n"
          "  /set wordwrap          Enable wordwrap\n"
          "  /set nowordwrap        Disable wordwrap\n"
          "  /set format json       Enable JSON mode\n"
          "  /set noformat          Disable formatting\n"
          "  /set verbose           Show LLM stats\n"
          "  /set quiet             Disable LLM stats\n"
          "  /set think             Enable thinking\n"
          "  /set nothink           Disable thinking\n"
          "\n",
          stderr);
}

static void usage_show(void)
{
    fputs("Available Commands:\n"
          "  /show info         Show details for this model\n"
          "  /show license      Show model license\n"
          "  /show modelfile    Show Modelfile for this model\n"
          "  /show parameters   Show parameters for this model\n"
          "  /show system       Show system message\n"
          "  /show template     Show prompt template\n"
          "\n",
          stderr);
}

static void usage_shortcuts(void)
{
    fputs("Available keyboard shortcuts:\n"
          "  Ctrl + a            Move to the beginning of the line (Home)\n"
          "  Ctrl + e            Move to the end of the line (End)\n"
          "   Alt + b            Move back (left) one word\n"
          "   Alt + f            Move forward (right) one word\n"
          "  Ctrl + k            Delete the sentence after the cursor\n"
          "  Ctrl + u            Delete the sentence before the cursor\n"
          "  Ctrl + w            Delete the word before the cursor\n"
          "\n"
          "  Ctrl + l            Clear the screen\n"
          "  Ctrl + g            Open default editor to compose a prompt\n"
          "  Ctrl + c            Stop the model from responding\n"
          "  Ctrl + d            Exit ollama (/bye)\n"
          "\n",
          stderr);
}

static void usage_parameters(void)
{
    fputs("Available Parameters:\n"
          "  /set parameter seed <int>             Random number seed\n"
          "  /set parameter num_predict <int>      Max number of tokens to predict\n"
          "  /set parameter top_k <int>            Pick from top k num of tokens\n"
          "  /set parameter top_p <float>          Pick token based on sum of probabilities\n"
          "  /set parameter min_p <float>          Pick token based on top token probability "
          "* min_p\n"
          "  /set parameter num_ctx <int>          Set the context size\n"
          "  /set parameter temperature <float>    Set creativity level\n"
          "  /set parameter repeat_penalty <float> How strongly to penalize repetitions\n"
          "  /set parameter repeat_last_n <int>    Set how far back to look for repetitions\n"
          "  /set parameter num_gpu <int>          The number of layers to send to the GPU\n"
          "  /set parameter stop <string> <string> ...   Set the stop parameters\n"
          "\n",
          stderr);
}

// ---------------------------------------------------------------------------
// Commands.

// Splits a line on blanks into at most max fields (xstrdup'd).
static int split_fields(const char *line, char **out, int max)
{
    int n = 0;
    const char *p = line;
    while (*p && n < max) {
        p += strspn(p, " \t");
        if (!*p)
            break;
        size_t len = strcspn(p, " \t");
        out[n++] = xstrndup(p, len);
        p += len;
    }
    return n;
}

static void free_fields(char **f, int n)
{
    for (int i = 0; i < n; i++)
        free(f[i]);
}

// A parameter value typed as /set parameter gives it (api.FormatParams).
static int parse_param(const char *name, char **vals, int n, json_t **out, struct err *e)
{
    enum store_param_type type;
    if (!store_param_type(name, &type))
        return err_set(e, ERR_INVALID, "unknown parameter '%s'", name);
    if (strcmp(name, "stop") == 0) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr, json_string(vals[i]));
        *out = arr;
        return 0;
    }
    const char *v = vals[0];
    switch (type) {
    case STORE_PARAM_INT: {
        int64_t x;
        const char *s = v[0] == '+' ? v + 1 : v;
        if (str_to_i64(s, INT64_MIN, INT64_MAX, &x, NULL) < 0)
            return err_set(e, ERR_INVALID, "invalid int value [%s]", v);
        *out = json_integer(x);
        return 0;
    }
    case STORE_PARAM_FLOAT: {
        double x;
        if (str_to_double(v, &x, NULL) < 0)
            return err_set(e, ERR_INVALID, "invalid float value [%s]", v);
        *out = jsonx_real_f32((float)x);
        return 0;
    }
    case STORE_PARAM_BOOL: {
        static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
        static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False"};
        for (int i = 0; i < 6; i++) {
            if (strcmp(v, t[i]) == 0) {
                *out = json_true();
                return 0;
            }
            if (strcmp(v, f[i]) == 0) {
                *out = json_false();
                return 0;
            }
        }
        return err_set(e, ERR_INVALID, "invalid bool value [%s]", v);
    }
    default:
        *out = json_string(v);
        return 0;
    }
}

static void set_system(struct repl *r, const char *text)
{
    struct cli_run_opts *o = r->o;
    free(o->system);
    o->system = xstrdup(text);
    json_t *m = json_pack("{s:s,s:s}", "role", "system", "content", text);
    size_t n = json_array_size(o->messages);
    const json_t *last = n ? json_array_get(o->messages, n - 1) : NULL;
    const char *role = last ? json_string_value(json_object_get(last, "role")) : NULL;
    if (role && strcmp(role, "system") == 0)
        json_array_set_new(o->messages, n - 1, m);
    else
        json_array_append_new(o->messages, m);
    printf("Set system message.\n");
}

// One /set line split into fields: f[0] is "/set", f[1] the setting, then its values.
struct subcmd_args {
    const char *line;
    char **f;
    int n;
};

static void set_history(struct repl *r, const struct subcmd_args *a)
{
    r->history_on = strcmp(a->f[1], "history") == 0;
}

static void set_wordwrap(struct repl *r, const struct subcmd_args *a)
{
    r->o->wordwrap = strcmp(a->f[1], "wordwrap") == 0;
    printf("Set '%s' mode.\n", a->f[1]);
}

static void set_verbose(struct repl *r, const struct subcmd_args *a)
{
    r->o->verbose = strcmp(a->f[1], "verbose") == 0;
    printf("Set '%s' mode.\n", a->f[1]);
}

// /set format json and /set noformat.
static void set_format(struct repl *r, const struct subcmd_args *a)
{
    if (strcmp(a->f[1], "noformat") == 0) {
        r->o->format = NULL;
        printf("Disabled format.\n");
    } else if (a->n < 3 || strcmp(a->f[2], "json") != 0) {
        printf("Invalid or missing format. For 'json' mode use '/set format json'\n");
    } else {
        r->o->format = "json";
        printf("Set format to 'json' mode.\n");
    }
}

// /set think [high|medium|low|max] and /set nothink.
static void set_think(struct repl *r, const struct subcmd_args *a)
{
    struct cli_run_opts *o = r->o;
    bool on = strcmp(a->f[1], "think") == 0;
    static const char *const levels[] = {"high", "medium", "low", "max"};
    const char *level = NULL;
    if (on && a->n >= 3) {
        for (int i = 0; i < 4; i++)
            if (strcmp(a->f[2], levels[i]) == 0)
                level = levels[i];
        if (!level) {
            printf("Invalid think level '%s'. Use high, medium, low, or max\n", a->f[2]);
            return;
        }
    }
    o->think = on ? (level ? level : "true") : "false";
    if (level)
        printf("Set 'think' mode to '%s'.\n", level);
    else
        printf("Set '%s' mode.\n", a->f[1]);
    if (!cli_has_capability(o->show, "thinking"))
        fprintf(stderr, "warning: model \"%s\" does not support thinking output\n", o->model);
}

// /set parameter <name> <value>... (several values only for stop).
static void set_parameter(struct repl *r, const struct subcmd_args *a)
{
    struct cli_run_opts *o = r->o;
    if (a->n < 4) {
        usage_parameters();
        return;
    }
    json_t *v = NULL;
    struct err e = {0};
    if (parse_param(a->f[2], a->f + 3, a->n - 3, &v, &e) < 0) {
        printf("Couldn't set parameter: \"%s\"\n", e.msg);
        return;
    }
    if (!o->options)
        o->options = json_object();
    json_object_set_new(o->options, a->f[2], v);
    struct buf joined;
    buf_init(&joined, 0);
    for (int i = 3; i < a->n; i++)
        buf_printf(&joined, "%s%s", i > 3 ? ", " : "", a->f[i]);
    printf("Set parameter '%s' to '%s'\n", a->f[2], buf_cstr(&joined));
    buf_deinit(&joined);
}

// /set system <text>: the text after "system", blanks around it trimmed. A
// """ that is not closed on the same line starts a multi-line message.
static void set_system_line(struct repl *r, const struct subcmd_args *a)
{
    const char *p = strstr(a->line, "system") + 6;
    struct str s = str_trim(str_from(p));
    char *text = str_dup(s);
    if (cstr_starts_with(text, "\"\"\"")) {
        const char *body = text + 3;
        size_t len = strlen(body);
        if (len >= 3 && cstr_ends_with(body, "\"\"\"")) {
            char *one = xstrndup(body, len - 3);
            set_system(r, one);
            free(one);
        } else {
            buf_reset(&r->text);
            buf_append_str(&r->text, body);
            buf_append_char(&r->text, '\n');
            r->ml = ML_SYSTEM;
        }
    } else {
        // Plain quotes around a one-line system message are dropped.
        size_t len = strlen(text);
        if (len >= 2 && text[0] == '"' && text[len - 1] == '"') {
            text[len - 1] = '\0';
            memmove(text, text + 1, len - 1);
        }
        set_system(r, text);
    }
    free(text);
}

typedef void (*subcmd_fn)(struct repl *r, const struct subcmd_args *a);

struct subcmd {
    const char *name;
    subcmd_fn run;
};

static const struct subcmd set_cmds[] = {
    {"history", set_history},     {"nohistory", set_history},   {"wordwrap", set_wordwrap},
    {"nowordwrap", set_wordwrap}, {"verbose", set_verbose},     {"quiet", set_verbose},
    {"format", set_format},       {"noformat", set_format},     {"think", set_think},
    {"nothink", set_think},       {"parameter", set_parameter}, {"system", set_system_line},
};

static const struct subcmd *subcmd_find(const struct subcmd *cmds, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(cmds[i].name, name) == 0)
            return &cmds[i];
    return NULL;
}

// /set ...; an unclosed /set system """ leaves r->ml at ML_SYSTEM for the lines to come.
static void cmd_set(struct repl *r, const char *line)
{
    char *f[64];
    int n = split_fields(line, f, 64);
    if (n < 2) {
        usage_set();
        free_fields(f, n);
        return;
    }
    const struct subcmd *cmd = subcmd_find(set_cmds, sizeof(set_cmds) / sizeof(set_cmds[0]), f[1]);
    if (cmd)
        cmd->run(r, &(struct subcmd_args){line, f, n});
    else
        printf("Unknown command '/set %s'. Type /? for help\n", f[1]);
    free_fields(f, n);
}

// /show's subcommands read the model's /api/show answer.
typedef void (*show_fn)(struct repl *r, const json_t *show);

static const char *show_str(const json_t *show, const char *key)
{
    return json_string_value(json_object_get(show, key));
}

static void show_info(struct repl *r, const json_t *show)
{
    (void)r;
    struct buf b;
    buf_init(&b, 0);
    cli_show_report(show, false, &b);
    fwrite(b.data ? b.data : "", 1, b.len, stderr);
    buf_deinit(&b);
}

static void show_license(struct repl *r, const json_t *show)
{
    (void)r;
    const char *license = show_str(show, "license");
    if (license && *license)
        printf("%s\n", license);
    else
        printf("No license was specified for this model.\n");
}

static void show_modelfile(struct repl *r, const json_t *show)
{
    (void)r;
    const char *modelfile = show_str(show, "modelfile");
    printf("%s\n", modelfile ? modelfile : "");
}

// A /set parameter value as the user typed it: a list in brackets, a string
// bare, anything else as JSON.
static void option_text(struct buf *b, const json_t *v)
{
    if (json_is_array(v)) {
        buf_append_char(b, '[');
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x)
            buf_printf(b, "%s%s", i ? " " : "", json_string_value(x) ? json_string_value(x) : "");
        buf_append_char(b, ']');
    } else if (json_is_string(v)) {
        buf_append_str(b, json_string_value(v));
    } else {
        char *s = jsonx_dumps(v, JSON_ENCODE_ANY);
        buf_append_str(b, s ? s : "");
        free(s);
    }
}

// The model's parameters (one per line, indented), then the session's own.
static void show_parameters(struct repl *r, const json_t *show)
{
    const char *params = show_str(show, "parameters");
    if (params && *params) {
        printf("Model defined parameters:\n");
        const char *p = params;
        while (*p) {
            size_t len = strcspn(p, "\n");
            printf("  %.*s\n", (int)len, p);
            p += len;
            if (*p)
                p++;
        }
    } else {
        printf("  No additional parameters were specified for this model.\n");
    }
    printf("\n");
    const json_t *options = r->o->options;
    if (!options || !json_object_size(options))
        return;
    printf("User defined parameters:\n");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)options, k, v)
    {
        struct buf b;
        buf_init(&b, 0);
        option_text(&b, v);
        printf("  %-30s %s\n", k, buf_cstr(&b));
        buf_deinit(&b);
    }
    printf("\n");
}

// The session's system message wins over the model's.
static void show_system(struct repl *r, const json_t *show)
{
    const char *system = show_str(show, "system");
    if (r->o->system)
        printf("%s\n\n", r->o->system);
    else if (system && *system)
        printf("%s\n\n", system);
    else
        printf("No system message was specified for this model.\n");
}

static void show_template(struct repl *r, const json_t *show)
{
    (void)r;
    const char *tmpl = show_str(show, "template");
    if (tmpl && *tmpl)
        printf("%s\n", tmpl);
    else
        printf("No prompt template was specified for this model.\n");
}

static const struct {
    const char *name;
    show_fn run;
} show_cmds[] = {
    {"info", show_info},           {"license", show_license},
    {"modelfile", show_modelfile}, {"parameters", show_parameters},
    {"system", show_system},       {"template", show_template},
};

// The model as this session sees it: its system message and options applied.
static int fetch_show(struct repl *r, json_t **show)
{
    struct cli_run_opts *o = r->o;
    json_t *req = json_pack("{s:s}", "model", o->model);
    if (o->system)
        json_object_set_new(req, "system", json_string(o->system));
    if (o->options)
        json_object_set(req, "options", o->options);
    struct err e = {0};
    int rc = client_show(r->c, req, show, &e);
    json_decref(req);
    return rc;
}

// /show ...; the model is asked first, so an unknown subcommand still needs it.
static void cmd_show(struct repl *r, const char *line)
{
    char *f[4];
    int n = split_fields(line, f, 4);
    if (n < 2) {
        usage_show();
        free_fields(f, n);
        return;
    }
    json_t *show = NULL;
    if (fetch_show(r, &show) < 0) {
        printf("error: couldn't get model\n");
        free_fields(f, n);
        return;
    }
    show_fn run = NULL;
    for (size_t i = 0; i < sizeof(show_cmds) / sizeof(show_cmds[0]); i++)
        if (strcmp(show_cmds[i].name, f[1]) == 0)
            run = show_cmds[i].run;
    if (run)
        run(r, show);
    else
        printf("Unknown command '/show %s'. Type /? for help\n", f[1]);
    json_decref(show);
    free_fields(f, n);
}

static void clear_history(struct cli_run_opts *o)
{
    json_t *kept = json_array();
    if (o->system)
        json_array_append_new(kept, json_pack("{s:s,s:s}", "role", "system", "content", o->system));
    json_decref(o->messages);
    o->messages = kept;
}

static void print_model_messages(struct cli_run_opts *o)
{
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(o->show, "messages"), i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        if (!role || !content)
            continue;
        if (strcmp(role, "user") == 0)
            printf(">>> %s\n", content);
        else if (strcmp(role, "assistant") == 0)
            printf("%s\n\n", content);
        json_array_append(o->messages, (json_t *)m);
    }
    fflush(stdout);
}

static void cmd_load(struct repl *r, const char *line)
{
    struct cli_run_opts *o = r->o;
    char *f[3];
    int n = split_fields(line, f, 3);
    if (n != 2) {
        printf("Usage:\n  /load <modelname>\n");
        free_fields(f, n);
        return;
    }
    printf("Loading model '%s'\n", f[1]);
    fflush(stdout);
    json_t *req = json_pack("{s:s}", "model", f[1]), *show = NULL;
    struct err e = {0};
    int rc = client_show(r->c, req, &show, &e);
    json_decref(req);
    if (rc < 0) {
        printf("Couldn't find model '%s'\n", f[1]);
        free_fields(f, n);
        return;
    }
    free(o->model);
    o->model = xstrdup(f[1]);
    json_decref(o->show);
    o->show = show;
    free(o->system);
    o->system = NULL;
    clear_history(o);
    err_clear(&e);
    if (cli_preload(r->c, o, &e) < 0)
        fprintf(stderr, "error: %s\n", e.msg);
    print_model_messages(o);
    free_fields(f, n);
}

static void cmd_save(struct repl *r, const char *line)
{
    struct cli_run_opts *o = r->o;
    char *f[3];
    int n = split_fields(line, f, 3);
    if (n != 2) {
        printf("Usage:\n  /save <modelname>\n");
        free_fields(f, n);
        return;
    }
    if (!store_name_valid(f[1])) {
        printf("error: The model name '%s' is invalid\n", f[1]);
        free_fields(f, n);
        return;
    }
    // Based on the current model: its layers, then the session on top.
    json_t *req = json_pack("{s:s,s:s}", "model", f[1], "from", o->model);
    if (o->system)
        json_object_set_new(req, "system", json_string(o->system));
    if (o->options && json_object_size(o->options))
        json_object_set(req, "parameters", o->options);
    json_t *msgs = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(o->messages, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && strcmp(role, "system") != 0)
            json_array_append(msgs, (json_t *)m);
    }
    if (json_array_size(msgs))
        json_object_set(req, "messages", msgs);
    json_decref(msgs);
    struct err e = {0};
    int rc = client_create(r->c, req, NULL, NULL, &e);
    json_decref(req);
    if (rc < 0)
        printf("error: %s\n", e.msg);
    else
        printf("Created new model '%s'\n", f[1]);
    free_fields(f, n);
}

// A line like "/path/to/picture.png describe": its first word is a file.
static bool first_token_is_file(const char *line)
{
    struct buf path;
    buf_init(&path, 0);
    for (const char *p = line; *p && !(*p == ' ' && (p == line || p[-1] != '\\')); p++)
        if (!(*p == '\\' && p[1] == ' '))
            buf_append_char(&path, *p);
    bool ok = fs_exists(buf_cstr(&path));
    buf_deinit(&path);
    return ok;
}

// ---------------------------------------------------------------------------
// Slash commands: matched as prefixes, in table order, the first match wins.

static void slash_list(struct repl *r, const char *line)
{
    char *f[3];
    int n = split_fields(line, f, 3);
    if (cli_list_print(r->c, n > 1 ? f[1] : NULL, &r->e) < 0) {
        printf("error: %s\n", r->e.msg);
        err_clear(&r->e);
    }
    free_fields(f, n);
}

static void slash_clear(struct repl *r, const char *line)
{
    (void)line;
    clear_history(r->o);
    printf("Cleared session context\n");
}

static void slash_help(struct repl *r, const char *line)
{
    char *f[3];
    int n = split_fields(line, f, 3);
    if (n > 1 && strcmp(f[1], "set") == 0)
        usage_set();
    else if (n > 1 && strcmp(f[1], "show") == 0)
        usage_show();
    else if (n > 1 && (strcmp(f[1], "shortcut") == 0 || strcmp(f[1], "shortcuts") == 0))
        usage_shortcuts();
    else
        usage(r->vision || r->audio);
    free_fields(f, n);
}

typedef void (*slash_fn)(struct repl *r, const char *line);

static const struct {
    const char *prefix;
    slash_fn run;  // NULL: leave the REPL
} slash_cmds[] = {
    {"/list", slash_list}, {"/load", cmd_load}, {"/save", cmd_save},   {"/clear", slash_clear},
    {"/set", cmd_set},     {"/show", cmd_show}, {"/help", slash_help}, {"/?", slash_help},
    {"/exit", NULL},       {"/bye", NULL},
};

// ---------------------------------------------------------------------------
// The loop.

// What the loop does after a line: read the next line of an open """ block,
// carry on without sending, send the gathered text, or leave.
enum line_step { STEP_MORE, STEP_KEEP, STEP_SEND, STEP_EXIT };

// Ctrl+C while editing: the line and any open block are dropped.
static void on_interrupt(struct repl *r, const char *line)
{
    bool empty = !line || !*line;
    if (empty && r->ml == ML_NONE && r->text.len == 0)
        printf("\nUse Ctrl + d or /bye to exit.\n");
    else if (!empty)
        printf("\r\x1b[K");  // the typed text is dropped: clear the line
    else
        printf("\n");
    fflush(stdout);
    buf_reset(&r->text);
    r->ml = ML_NONE;
}

// A line inside an open """ block; a closing """ ends it.
static enum line_step block_line(struct repl *r, const char *line)
{
    size_t len = strlen(line);
    bool ends = len >= 3 && cstr_ends_with(line, "\"\"\"");
    buf_append(&r->text, line, ends ? len - 3 : len);
    if (!ends) {
        buf_append_char(&r->text, '\n');
        return STEP_MORE;
    }
    enum multiline was = r->ml;
    r->ml = ML_NONE;
    if (was == ML_SYSTEM) {
        set_system(r, buf_cstr(&r->text));
        buf_reset(&r->text);
        return STEP_KEEP;
    }
    return STEP_SEND;
}

// A line starting with """: a one-line message, or the start of a block.
static enum line_step block_open(struct repl *r, const char *line)
{
    const char *body = line + 3;
    size_t len = strlen(body);
    bool ends = len >= 3 && cstr_ends_with(body, "\"\"\"");
    buf_append(&r->text, body, ends ? len - 3 : len);
    if (!ends) {
        buf_append_char(&r->text, '\n');
        r->ml = ML_PROMPT;
        return STEP_MORE;
    }
    return STEP_SEND;
}

static enum line_step handle_line(struct repl *r, const char *line)
{
    if (r->ml != ML_NONE)
        return block_line(r, line);
    if (cstr_starts_with(line, "\"\"\""))
        return block_open(r, line);
    for (size_t i = 0; i < sizeof(slash_cmds) / sizeof(slash_cmds[0]); i++) {
        if (!cstr_starts_with(line, slash_cmds[i].prefix))
            continue;
        if (!slash_cmds[i].run)
            return STEP_EXIT;
        slash_cmds[i].run(r, line);
        return STEP_KEEP;
    }
    if (line[0] == '/' && (r->vision || r->audio) && first_token_is_file(line)) {
        buf_append_str(&r->text, line);
        return STEP_SEND;
    }
    if (line[0] == '/') {
        size_t len = strcspn(line, " \t");
        printf("Unknown command '%.*s'. Type /? for help\n", (int)len, line);
        return STEP_KEEP;
    }
    buf_append_str(&r->text, line);
    return r->text.len > 0 ? STEP_SEND : STEP_KEEP;
}

// The gathered text as a user message; files it names become its images.
static json_t *user_message(struct repl *r)
{
    struct buf *sb = &r->text;
    json_t *msg = json_pack("{s:s,s:s%}", "role", "user", "content", sb->data, sb->len);
    if (r->vision || r->audio) {
        char *text = NULL;
        json_t *media = json_array();
        if (cli_media_extract(buf_cstr(sb), r->vision, r->audio, &text, media, stderr) > 0) {
            json_object_set_new(msg, "content", json_string(text));
            json_object_set(msg, "images", media);
        }
        json_decref(media);
        free(text);
    }
    return msg;
}

// Sends the gathered text and keeps the reply in the history. Returns false
// when the REPL must end, with *status set.
static bool send_turn(struct repl *r, int *status)
{
    struct cli_run_opts *o = r->o;
    json_array_append_new(o->messages, user_message(r));
    buf_reset(&r->text);
    json_t *reply = NULL;
    err_clear(&r->e);
    int rc = cli_generate(r->c, o, NULL, true, &reply, &r->e);
    if (rc < 0 && rc != ERR_CANCELLED && strstr(r->e.msg, "does not support thinking")) {
        // A /set think the model cannot honour: say so and stay.
        printf("error: %s\n", r->e.msg);
        json_array_remove(o->messages, json_array_size(o->messages) - 1);
        return true;
    }
    if (rc < 0 && rc != ERR_CANCELLED) {
        *status = cli_fail_err(&r->e);
        return false;
    }
    if (reply)
        json_array_append_new(o->messages, reply);
    return true;
}

static int chat_loop(struct repl *r)
{
    print_model_messages(r->o);
    buf_init(&r->text, 0);
    r->ml = ML_NONE;
    r->vision = cli_has_capability(r->o->show, "vision");
    r->audio = cli_has_capability(r->o->show, "audio");
    int status = 0;
    for (;;) {
        bool interrupted = false;
        char *line = read_line(r, r->ml == ML_NONE ? ">>> " : "... ", &interrupted);
        if (interrupted) {
            on_interrupt(r, line);
            free(line);
            continue;
        }
        if (!line) {
            printf("\n");
            break;
        }
        remember(r, line);
        enum line_step step = handle_line(r, line);
        free(line);
        if (step == STEP_EXIT)
            break;
        if (step == STEP_MORE)
            continue;
        fflush(stdout);
        if (step != STEP_SEND || r->text.len == 0) {
            if (r->ml == ML_NONE && step != STEP_SEND)
                buf_reset(&r->text);
            continue;
        }
        if (!send_turn(r, &status))
            break;
    }
    buf_deinit(&r->text);
    return status;
}

// History and libedit: Ctrl+C, Ctrl+G, bracketed paste and the shortcuts.
static void repl_open(struct repl *r)
{
    if (!env_parse_bool(getenv("OLLAMA_NOHISTORY"), false)) {
        const char *home = env_home_dir();
        if (home)
            r->history_path = xasprintf("%s/.ollama/history", home);
    } else {
        r->history_on = false;
    }
    r->entries = xcalloc(HISTORY_MAX, sizeof(char *));
    r->hist = history_init();
    HistEvent ev;
    history(r->hist, &ev, H_SETSIZE, HISTORY_MAX);
    history_load(r);
    r->el = el_init("ollama", stdin, stdout, stderr);
    el_set(r->el, EL_EDITOR, "emacs");
    const char *term = getenv("TERM");
    r->fancy = !(term && strcmp(term, "dumb") == 0);
    el_set(r->el, EL_PROMPT, prompt_fn);
    el_wset(r->el, EL_GETCFN, read_char);
    el_set(r->el, EL_HIST, history, r->hist);
    el_set(r->el, EL_SETTY, "-d", "-isig", NULL);
    // (el_wset: the narrow form of EL_ADDFN leaks its converted copies.)
    el_wset(r->el, EL_ADDFN, L"ollama-interrupt", L"Interrupt the line", on_ctrl_c);
    el_set(r->el, EL_BIND, "^C", "ollama-interrupt", NULL);
    el_wset(r->el, EL_ADDFN, L"ollama-editor", L"Edit the line in an editor", on_ctrl_g);
    el_set(r->el, EL_BIND, "^G", "ollama-editor", NULL);
    // The shortcuts of `/? shortcuts`: Ctrl+W deletes the word before the
    // cursor, Ctrl+U everything before it (emacs mode binds them otherwise).
    el_set(r->el, EL_BIND, "^W", "ed-delete-prev-word", NULL);
    el_set(r->el, EL_BIND, "^U", "vi-kill-line-prev", NULL);
    el_wset(r->el, EL_ADDFN, L"ollama-paste", L"Bracketed paste", on_paste);
    el_set(r->el, EL_BIND, "\x1b[200~", "ollama-paste", NULL);
    fputs("\x1b[?2004h", stdout);  // bracketed paste on
}

static void repl_close(struct repl *r)
{
    fputs("\x1b[?2004l", stdout);
    fflush(stdout);
    el_end(r->el);
    history_end(r->hist);
    for (int i = 0; i < r->n_entries; i++)
        free(r->entries[i]);
    free(r->entries);
    free(r->history_path);
}

int cli_repl(struct client *c, struct cli_run_opts *o)
{
    struct repl r = {.c = c, .o = o, .history_on = true};
    g_repl = &r;
    if (!o->messages)
        o->messages = json_array();
    repl_open(&r);
    int status;
    if (cli_preload(c, o, &r.e) < 0)
        status = cli_fail_err(&r.e);
    else
        status = chat_loop(&r);
    repl_close(&r);
    g_repl = NULL;
    return status;
}

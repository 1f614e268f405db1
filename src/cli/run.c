// `ollama run` (docs/spec/cli.md §3.4): flags, prompt from arguments and piped
// stdin, pull-if-missing, embedding models, one-shot generation through
// /api/generate, and the streamed display shared with the REPL (spinner
// until the first token, thinking markers, word wrap, stats block, Ctrl+C).
#include "cli/internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <wchar.h>

#include "client/client.h"

volatile sig_atomic_t cli_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

int cli_tty_read_char(wchar_t *wc, bool stop_on_interrupt)
{
    unsigned char b[4];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, b, 1);
        if (n == 1)
            break;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
        if (stop_on_interrupt && cli_interrupted)
            return 2;
    }
    int len = b[0] < 0x80             ? 1
              : (b[0] & 0xe0) == 0xc0 ? 2
              : (b[0] & 0xf0) == 0xe0 ? 3
              : (b[0] & 0xf8) == 0xf0 ? 4
                                      : 1;
    for (int i = 1; i < len; i++)
        if (read(STDIN_FILENO, b + i, 1) != 1)
            return -1;
    uint32_t cp = len == 1 ? b[0] : (uint32_t)(b[0] & (0x7f >> len));
    for (int i = 1; i < len; i++)
        cp = (cp << 6) | (b[i] & 0x3f);
    *wc = (wchar_t)cp;
    return 1;
}

void cli_sigint_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

#define GREY  "\x1b[90m"
#define BOLD  "\x1b[1m"
#define RESET "\x1b[0m"

struct gen_ctx {
    struct cli_run_opts *o;
    bool chat;
    bool plain;  // stdout is not a terminal: no colours
    struct cli_progress *spinner;
    struct cli_wrap wrap;
    bool think_open, think_closed;
    bool thinking_ends_nl;
    struct buf content, thinking;
    json_t *final;
};

static void out_text(struct gen_ctx *g, const char *s, size_t n)
{
    struct buf b;
    buf_init(&b, 0);
    cli_wrap_feed(&g->wrap, s, n, &b);
    fwrite(b.data ? b.data : "", 1, b.len, stdout);
    buf_deinit(&b);
}

static int on_chunk(void *ctx, const json_t *obj, struct err *e)
{
    (void)e;
    struct gen_ctx *g = ctx;
    const json_t *src = g->chat ? json_object_get(obj, "message") : obj;
    const char *content = json_string_value(json_object_get(src, g->chat ? "content" : "response"));
    const char *thinking = json_string_value(json_object_get(src, "thinking"));
    const json_t *tools = json_object_get(src, "tool_calls");
    bool has_content = content && *content;
    bool has_thinking = thinking && *thinking;
    if ((has_content || has_thinking || json_array_size(tools)) && g->spinner) {
        cli_progress_stop_clear(g->spinner);
        cli_progress_free(g->spinner);
        g->spinner = NULL;
    }
    if (has_thinking) {
        buf_append_str(&g->thinking, thinking);
        if (!g->o->hide_thinking) {
            if (!g->think_open) {
                fputs(g->plain ? "Thinking...\n" : GREY BOLD "Thinking..." RESET "\n" GREY, stdout);
                g->think_open = true;
            }
            out_text(g, thinking, strlen(thinking));
            g->thinking_ends_nl = thinking[strlen(thinking) - 1] == '\n';
        }
    }
    if (g->think_open && !g->think_closed && (has_content || json_array_size(tools))) {
        if (!g->thinking_ends_nl)
            fputc('\n', stdout);
        fputs(g->plain ? "...done thinking.\n\n" : GREY BOLD "...done thinking." RESET "\n\n",
              stdout);
        g->think_closed = true;
        cli_wrap_reset(&g->wrap);
    }
    if (has_content) {
        buf_append_str(&g->content, content);
        out_text(g, content, strlen(content));
    }
    size_t i;
    const json_t *call;
    json_array_foreach(tools, i, call)
    {
        const json_t *fn = json_object_get(call, "function");
        char *args = jsonx_dumps(json_object_get(fn, "arguments"), JSON_COMPACT);
        printf("  Model called a non-existent function '%s()' with arguments: %s\n",
               json_string_value(json_object_get(fn, "name"))
                   ? json_string_value(json_object_get(fn, "name"))
                   : "",
               args ? args : "{}");
        free(args);
    }
    fflush(stdout);
    if (json_is_true(json_object_get(obj, "done"))) {
        json_decref(g->final);
        g->final = json_deep_copy(obj);
    }
    return 0;
}

static void set_think(json_t *req, const char *think)
{
    if (!think)
        return;
    if (strcmp(think, "true") == 0)
        json_object_set_new(req, "think", json_true());
    else if (strcmp(think, "false") == 0)
        json_object_set_new(req, "think", json_false());
    else
        json_object_set_new(req, "think", json_string(think));
}

static void set_common(json_t *req, const struct cli_run_opts *o)
{
    json_object_set_new(req, "model", json_string(o->model));
    if (o->format && *o->format)
        json_object_set_new(req, "format", json_string(o->format));
    if (o->keep_alive)
        json_object_set_new(req, "keep_alive", json_string(o->keep_alive));
    if (o->options && json_object_size(o->options))
        json_object_set(req, "options", o->options);
}

int cli_generate(struct client *c, struct cli_run_opts *o, const char *prompt, bool chat,
                 json_t **reply, struct err *e)
{
    bool out_tty = isatty(STDOUT_FILENO);
    int cols, rows;
    cli_term_size(STDOUT_FILENO, &cols, &rows);
    struct gen_ctx g = {.o = o, .chat = chat, .plain = !out_tty};
    cli_wrap_init(&g.wrap, o->wordwrap && out_tty, cols);
    buf_init(&g.content, 0);
    buf_init(&g.thinking, 0);
    if (isatty(STDERR_FILENO)) {
        g.spinner = cli_progress_new(stderr, true);
        cli_progress_spinner(g.spinner, "");
    }
    json_t *req = json_object();
    set_common(req, o);
    set_think(req, o->think);
    if (chat) {
        json_object_set(req, "messages", o->messages);
    } else {
        bool vision = cli_has_capability(o->show, "vision");
        bool audio = cli_has_capability(o->show, "audio");
        char *text = NULL;
        json_t *media = json_array();
        if ((vision || audio) && prompt)
            cli_media_extract(prompt, vision, audio, &text, media, stderr);
        json_object_set_new(req, "prompt", json_string(text ? text : prompt ? prompt : ""));
        if (json_array_size(media))
            json_object_set(req, "images", media);
        json_decref(media);
        free(text);
        if (o->system)
            json_object_set_new(req, "system", json_string(o->system));
    }
    cli_interrupted = 0;
    client_set_cancel(c, &cli_interrupted);
    int rc = chat ? client_chat(c, req, on_chunk, &g, e) : client_generate(c, req, on_chunk, &g, e);
    client_set_cancel(c, NULL);
    json_decref(req);
    if (g.spinner) {
        cli_progress_stop_clear(g.spinner);
        cli_progress_free(g.spinner);
    }
    if (!g.plain && g.think_open && !g.think_closed)
        fputs(RESET, stdout);
    if (rc == ERR_CANCELLED || cli_interrupted) {
        if (g.content.len || g.thinking.len)
            fputc('\n', stdout);
        rc = ERR_CANCELLED;
    } else if (rc == 0) {
        if ((chat && (g.content.len || g.thinking.len)) || (!chat && prompt && *prompt))
            fputs("\n\n", stdout);
        fflush(stdout);
        if (o->verbose && g.final) {
            struct buf b;
            buf_init(&b, 0);
            cli_stats_render(g.final, &b);
            fwrite(b.data ? b.data : "", 1, b.len, stderr);
            buf_deinit(&b);
        }
        if (reply) {
            json_t *m = json_pack("{s:s,s:s%}", "role", "assistant", "content",
                                  buf_cstr(&g.content), g.content.len);
            if (g.thinking.len)
                json_object_set_new(m, "thinking", json_stringn(g.thinking.data, g.thinking.len));
            *reply = m;
        }
    }
    fflush(stdout);
    json_decref(g.final);
    cli_wrap_deinit(&g.wrap);
    buf_deinit(&g.content);
    buf_deinit(&g.thinking);
    return rc;
}

int cli_preload(struct client *c, struct cli_run_opts *o, struct err *e)
{
    struct cli_progress *p = NULL;
    if (isatty(STDERR_FILENO)) {
        p = cli_progress_new(stderr, true);
        cli_progress_spinner(p, "");
    }
    json_t *req = json_object();
    set_common(req, o);
    bool chat = o->messages != NULL;
    if (chat)
        json_object_set_new(req, "messages", json_array());
    int rc = chat ? client_chat(c, req, NULL, NULL, e) : client_generate(c, req, NULL, NULL, e);
    json_decref(req);
    cli_progress_stop_clear(p);
    cli_progress_free(p);
    return rc;
}

bool cli_has_capability(const json_t *show, const char *cap)
{
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(show, "capabilities"), i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), cap) == 0)
            return true;
    }
    return false;
}

static int show_model(struct client *c, const char *model, json_t **out, struct err *e)
{
    json_t *req = json_pack("{s:s}", "model", model);
    int rc = client_show(c, req, out, e);
    json_decref(req);
    return rc;
}

static int run_embed(struct client *c, struct cli_run_opts *o, const char *prompt,
                     struct cli_args *a)
{
    if (!prompt || !*prompt)
        return cli_fail("embedding models require input text. Usage: ollama run MODEL \"your "
                        "text here\"");
    json_t *req = json_pack("{s:s,s:s}", "model", o->model, "input", prompt), *resp = NULL;
    if (o->keep_alive)
        json_object_set_new(req, "keep_alive", json_string(o->keep_alive));
    const char *tr = cli_flag(a, "truncate"), *dims = cli_flag(a, "dimensions");
    if (tr)
        json_object_set_new(req, "truncate", json_boolean(strcmp(tr, "false") != 0));
    if (dims) {
        int64_t d;
        if (str_to_i64(dims, 0, INT32_MAX, &d, NULL) < 0) {
            json_decref(req);
            return cli_fail("invalid argument \"%s\" for \"--dimensions\" flag", dims);
        }
        json_object_set_new(req, "dimensions", json_integer(d));
    }
    struct err e = {0};
    int rc = client_embed(c, req, &resp, &e);
    json_decref(req);
    if (rc < 0)
        return cli_fail_err(&e);
    const json_t *vec = json_array_get(json_object_get(resp, "embeddings"), 0);
    char *s = vec ? jsonx_dumps(vec, JSON_COMPACT) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(resp);
    return 0;
}

// Reads all of stdin.
static char *read_stdin(void)
{
    struct buf b;
    buf_init(&b, 256u << 20);
    char chunk[65536];
    ssize_t n;
    while ((n = read(STDIN_FILENO, chunk, sizeof(chunk))) > 0)
        if (buf_append(&b, chunk, (size_t)n) < 0)
            break;
    return buf_take(&b);
}

static bool valid_think(const char *v)
{
    static const char *const ok[] = {"true", "false", "high", "medium", "low", "max"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (strcmp(v, ok[i]) == 0)
            return true;
    return false;
}

// --keepalive takes a Go duration; a bare number other than 0 has no unit.
// Returns 0, or the exit status after printing why it is invalid.
static int check_keep_alive(const char *v)
{
    int64_t ns;
    bool bare = v[0] && strspn(v, "0123456789.-+") == strlen(v);
    if (bare && strcmp(v, "0") != 0)
        return cli_fail("time: missing unit in duration \"%s\"", v);
    if (duration_parse(v, &ns, NULL) < 0)
        return cli_fail("time: invalid duration \"%s\"", v);
    return 0;
}

// The run flags into o. Returns 0, or the exit status after printing why a
// flag is invalid.
static int run_flags(struct cli_args *a, struct cli_run_opts *o)
{
    o->think = cli_flag(a, "think");
    if (o->think && !valid_think(o->think))
        return cli_fail("invalid value for --think: \"%s\" (must be true, false, high, medium, "
                        "low, or max)",
                        o->think);
    o->keep_alive = cli_flag(a, "keepalive");
    if (o->keep_alive) {
        int status = check_keep_alive(o->keep_alive);
        if (status)
            return status;
    }
    o->format = cli_flag(a, "format");
    o->verbose = cli_flag(a, "verbose") != NULL;
    o->wordwrap = cli_flag(a, "nowordwrap") == NULL;
    o->hide_thinking = cli_flag(a, "hidethinking") != NULL;
    o->insecure = cli_flag(a, "insecure") != NULL;
    return 0;
}

// The prompt: piped stdin first, then the arguments, joined by spaces. Piped
// input turns word wrap off. Returns whether a prompt was given.
static bool gather_prompt(struct cli_args *a, bool stdin_tty, struct cli_run_opts *o,
                          struct buf *prompt)
{
    bool have_prompt = a->n_pos > 1;
    if (!stdin_tty) {
        char *in = read_stdin();
        if (in && *in) {
            buf_append_str(prompt, in);
            have_prompt = true;
        }
        free(in);
        o->wordwrap = false;
    }
    for (int i = 1; i < a->n_pos; i++) {
        if (prompt->len)
            buf_append_char(prompt, ' ');
        buf_append_str(prompt, a->pos[i]);
    }
    return have_prompt;
}

// The model's /api/show answer into o->show, pulling the model first when
// it is not here.
static int find_model(struct client *c, struct cli_run_opts *o, struct err *e)
{
    int rc = show_model(c, o->model, &o->show, e);
    if (rc == ERR_NOT_FOUND) {
        err_clear(e);
        rc = cli_pull_model(c, o->model, o->insecure, e);
        if (rc == 0)
            rc = show_model(c, o->model, &o->show, e);
    }
    return rc;
}

// Embedding models print a vector; with no prompt on a terminal the REPL
// starts; otherwise one generation.
static int run_model(struct client *c, struct cli_run_opts *o, struct cli_args *a,
                     const char *prompt, bool interactive)
{
    if (cli_has_capability(o->show, "embedding") && !cli_has_capability(o->show, "completion"))
        return run_embed(c, o, prompt, a);
    if (interactive)
        return cli_repl(c, o);
    struct err e = {0};
    int rc = cli_generate(c, o, prompt, false, NULL, &e);
    if (rc < 0 && rc != ERR_CANCELLED)
        return cli_fail_err(&e);
    return 0;
}

int cli_cmd_run(struct cli_args *a)
{
    struct cli_run_opts o = {0};
    o.model = xstrdup(a->pos[0]);
    int status = run_flags(a, &o);
    if (status) {
        free(o.model);
        return status;
    }
    struct buf prompt;
    buf_init(&prompt, 0);
    bool stdin_tty = isatty(STDIN_FILENO);
    bool have_prompt = gather_prompt(a, stdin_tty, &o, &prompt);
    bool interactive = a->n_pos == 1 && stdin_tty && isatty(STDOUT_FILENO);

    struct err e = {0};
    struct client *c = cli_connect();
    if (!c) {
        status = 1;
        goto out;
    }
    if (find_model(c, &o, &e) < 0) {
        status = cli_fail_err(&e);
        goto out;
    }
    if (!o.think && cli_has_capability(o.show, "thinking"))
        o.think = "true";
    const char *parent =
        json_string_value(json_object_get(json_object_get(o.show, "details"), "parent_model"));
    o.parent = xstrdup(parent ? parent : "");
    cli_sigint_install();
    status = run_model(c, &o, a, buf_cstr(&prompt), interactive && !have_prompt);
out:
    client_free(c);
    buf_deinit(&prompt);
    json_decref(o.show);
    json_decref(o.options);
    json_decref(o.messages);
    free(o.system);
    free(o.parent);
    free(o.model);
    return status;
}

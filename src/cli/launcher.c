// The launcher behind bare `ollama` on a terminal (Ollama 0.33's cmd/tui/tui.go
// and selector.go, drawn with ncurses): "Chat, Code, & Work" (a model, then
// the agent chat of agent.c, run as the hidden `ollama agent MODEL`), the pinned integrations, and
// "More..." for the rest. Keys: up/k, down/j, enter or space to launch, right/l to choose another
// model first, q/esc/Ctrl-C to quit. The last choice and each integration's model are remembered in
// ~/.ollama/config.json (last_selection, last_model, integrations.<name>.models) as 0.33 keeps
// them. After a launched tool or chat exits, the menu comes back.
#include "cli/launch.h"

#include <curses.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"

// The integrations on the root menu (0.33's launcherMenuIntegrations).
static const char *const pinned[] = {"claude", "opencode", "hermes", "openclaw"};
#define N_PINNED (sizeof(pinned) / sizeof(pinned[0]))

// ---------------------------------------------------------------------------
// ~/.ollama/config.json

static char *config_path(void)
{
    const char *home = getenv("HOME");
    return home && *home ? xasprintf("%s/.ollama/config.json", home) : NULL;
}

json_t *cli_user_config_load(void)
{
    char *path = config_path();
    struct buf b;
    buf_init(&b, 1 << 20);
    json_t *cfg = NULL;
    if (path && fs_read_all(path, 1 << 20, &b, NULL) == 0)
        jsonx_parse(b.data, b.len, &cfg, NULL);
    buf_deinit(&b);
    free(path);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        cfg = json_object();
    }
    return cfg;
}

void cli_user_config_save(json_t *cfg)
{
    char *path = config_path();
    if (!path)
        return;
    char *text = jsonx_dumps(cfg, JSONX_INDENT);
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = '\0';
    // Best effort, as 0.33: the menu's memory is not worth failing a launch.
    if (text && fs_mkdir_p(dir, NULL) == 0)
        fs_write_atomic(path, text, strlen(text), NULL);
    free(dir);
    free(text);
    free(path);
}

const char *cli_user_config_model(json_t *cfg, const char *integration)
{
    if (!integration)
        return json_string_value(json_object_get(cfg, "last_model"));
    json_t *in = json_object_get(json_object_get(cfg, "integrations"), integration);
    return json_string_value(json_array_get(json_object_get(in, "models"), 0));
}

void cli_user_config_remember(const char *selection, const char *integration, const char *model)
{
    json_t *cfg = cli_user_config_load();
    if (selection)
        jsonx_set_str(cfg, "last_selection", selection);
    if (model && !integration)
        jsonx_set_str(cfg, "last_model", model);
    if (model && integration) {
        json_t *all = json_object_get(cfg, "integrations");
        if (!json_is_object(all)) {
            all = json_object();
            json_object_set_new(cfg, "integrations", all);
        }
        json_t *in = json_object_get(all, integration);
        if (!json_is_object(in)) {
            in = json_object();
            json_object_set_new(all, integration, in);
        }
        json_object_set_new(in, "models", json_pack("[s]", model));
    }
    cli_user_config_save(cfg);
    json_decref(cfg);
}

// ---------------------------------------------------------------------------
// The menu

struct menu_item {
    char title[96];
    const char *desc;
    const char *integration;  // NULL for the chat and "More..."
    bool run, others, installed;
};

struct menu {
    struct menu_item items[32];
    int n, cursor, n_primary;
    bool show_others;
    json_t *cfg;
};

static bool on_path(const char *program)
{
    const char *path = getenv("PATH");
    char *copy = xstrdup(path ? path : "");
    bool found = false;
    for (char *dir = strtok(copy, ":"); dir && !found; dir = strtok(NULL, ":")) {
        char *p = xasprintf("%s/%s", dir, program);
        found = access(p, X_OK) == 0;
        free(p);
    }
    free(copy);
    return found;
}

static void add_integration(struct menu *m, size_t i)
{
    const char *name, *display, *desc;
    bool hidden;
    cli_launch_info(i, &name, &display, &desc, &hidden);
    struct menu_item *it = &m->items[m->n++];
    snprintf(it->title, sizeof(it->title), "Launch %s", display);
    it->desc = desc;
    it->integration = name;
    it->installed = on_path(cli_launch_program(name));
}

static bool is_pinned(const char *name)
{
    for (size_t i = 0; i < N_PINNED; i++)
        if (strcmp(pinned[i], name) == 0)
            return true;
    return false;
}

static void menu_build(struct menu *m)
{
    m->n = 0;
    struct menu_item *run = &m->items[m->n++];
    *run = (struct menu_item){.desc = "Chat with models, code, search the web, and delegate real "
                                      "work",
                              .run = true,
                              .installed = true};
    snprintf(run->title, sizeof(run->title), "Chat, Code, & Work");
    for (size_t p = 0; p < N_PINNED; p++)
        for (size_t i = 0; i < cli_launch_count(); i++) {
            const char *name, *display, *desc;
            bool hidden;
            cli_launch_info(i, &name, &display, &desc, &hidden);
            if (strcmp(name, pinned[p]) == 0)
                add_integration(m, i);
        }
    m->n_primary = m->n;
    for (size_t i = 0; i < cli_launch_count() && m->n < 31; i++) {
        const char *name, *display, *desc;
        bool hidden;
        cli_launch_info(i, &name, &display, &desc, &hidden);
        if (hidden || is_pinned(name))
            continue;
        if (!m->show_others) {
            struct menu_item *more = &m->items[m->n++];
            *more = (struct menu_item){.desc = "Show additional integrations", .others = true};
            snprintf(more->title, sizeof(more->title), "More...");
            break;
        }
        add_integration(m, i);
    }
}

// The item's line: cursor, title, the remembered model on the selected
// item, and the install state.
static void draw_item(const struct menu *m, int i, int *y)
{
    const struct menu_item *it = &m->items[i];
    bool sel = i == m->cursor;
    if (sel)
        attron(A_BOLD);
    mvprintw((*y)++, 0, "%s%s", sel ? "\u25b8 " : "  ", it->title);
    if (sel)
        attroff(A_BOLD);
    const char *model = it->others ? NULL : cli_user_config_model(m->cfg, it->integration);
    if (sel && model)
        printw(" (%s)", model);
    if (!it->installed && !it->others) {
        attron(A_DIM);
        printw(" (not installed)");
        attroff(A_DIM);
    }
    // A tool that is not there says how to get it (0.33's install hint).
    const char *hint =
        it->installed || !it->integration ? NULL : cli_launch_install_hint(it->integration);
    attron(A_DIM);
    if (hint) {  // its first way, on one line
        const char *alt = strstr(hint, " (or:");
        int n = alt ? (int)(alt - hint) : (int)strlen(hint);
        n = n < COLS - 5 ? n : COLS - 5;
        mvprintw((*y)++, 4, "%c%.*s", hint[0] - 'a' + 'A', n - 1, hint + 1);
    } else {
        mvprintw((*y)++, 4, "%.*s", COLS > 5 ? COLS - 5 : 0, it->desc);
    }
    attroff(A_DIM);
    (*y)++;
}

static void menu_draw(const struct menu *m)
{
    erase();
    int y = 0;
    attron(A_BOLD);
    mvprintw(y, 0, "Ollama ");
    attroff(A_BOLD);
    attron(A_DIM);
    printw("%s", OLLAMA_VERSION);
    attroff(A_DIM);
    y += 2;
    for (int i = 0; i < m->n; i++)
        draw_item(m, i, &y);
    attron(A_DIM);
    mvprintw(y, 0,
             "\u2191/\u2193 navigate \u2022 enter launch \u2022 \u2192 configure \u2022 "
             "esc quit");
    attroff(A_DIM);
    refresh();
}

// Moves the cursor; "More..." opens when reached and closes when the cursor
// goes back into the pinned items (as 0.33).
static void menu_move(struct menu *m, int delta)
{
    m->cursor += delta;
    if (m->cursor < 0)
        m->cursor = 0;
    if (m->cursor >= m->n)
        m->cursor = m->n - 1;
    if (m->items[m->cursor].others && !m->show_others) {
        m->show_others = true;
        menu_build(m);
    } else if (delta < 0 && m->show_others && m->cursor < m->n_primary) {
        m->show_others = false;
        menu_build(m);
    }
}

// The cursor on the remembered choice, "More..." open when it is there.
static void menu_init(struct menu *m)
{
    const char *last = json_string_value(json_object_get(m->cfg, "last_selection"));
    for (int pass = 0; pass < 2 && last; pass++) {
        menu_build(m);
        for (int i = 0; i < m->n; i++) {
            const struct menu_item *it = &m->items[i];
            if ((it->run && strcmp(last, "run") == 0) ||
                (it->integration && strcmp(it->integration, last) == 0)) {
                m->cursor = i;
                return;
            }
        }
        m->show_others = true;
    }
    m->show_others = false;
    menu_build(m);
}

void cli_curses_begin(void)
{
    // initscr once per process; after endwin a refresh resumes the screen.
    static bool started;
    if (!started) {
        setlocale(LC_CTYPE, "");
        set_escdelay(25);
        initscr();
        started = true;
    } else {
        reset_prog_mode();
        clear();
        refresh();
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
}

enum action { ACT_QUIT, ACT_LAUNCH, ACT_CONFIGURE };

// Runs the menu until a choice; *item is the chosen one.
static enum action menu_run(struct menu *m, const struct menu_item **item)
{
    cli_curses_begin();
    enum action act = ACT_QUIT;
    for (bool done = false; !done;) {
        menu_draw(m);
        int ch = getch();
        switch (ch) {
        case KEY_UP:
        case 'k':
            menu_move(m, -1);
            break;
        case KEY_DOWN:
        case 'j':
            menu_move(m, 1);
            break;
        case '\n':
        case KEY_ENTER:
        case ' ':
            act = ACT_LAUNCH, done = !m->items[m->cursor].others;
            break;
        case KEY_RIGHT:
        case 'l':
            act = ACT_CONFIGURE, done = !m->items[m->cursor].others;
            break;
        case 'q':
        case 27:
        case 3:
        case ERR:
            act = ACT_QUIT, done = true;
            break;
        default:
            break;
        }
    }
    endwin();
    *item = &m->items[m->cursor];
    return act;
}

// Runs this program with args and waits; the exit status.
static int run_self(char *const argv[])
{
    fflush(stdout);
    fflush(stderr);
    // Ctrl-C belongs to the child (it cancels an agent turn), not the menu.
    void (*old)(int) = signal(SIGINT, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    bool ok = pid > 0 && waitpid(pid, &status, 0) == pid;
    signal(SIGINT, old);
    return ok && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Carries out the chosen item; false when the launcher should end.
static bool menu_act(struct client *c, json_t *cfg, enum action act, const struct menu_item *it)
{
    const char *saved = cli_user_config_model(cfg, it->integration);
    char *model = saved && act == ACT_LAUNCH ? xstrdup(saved) : NULL;
    // The chat's remembered model, when 0.33 calls it deprecated, asks first
    // (no: pick another); `ollama launch` asks for the integrations itself.
    if (model && it->run &&
        cli_launch_check_deprecated(c, model, "ollama launch", NULL, false) <= 0) {
        free(model);
        model = NULL;
    }
    if (!model) {
        char title[160];
        snprintf(title, sizeof(title), "Select model%s%s:", it->integration ? " for " : "",
                 it->integration ? it->title + 7 : "");
        model = cli_model_picker(c, title, saved);
    }
    if (!model)
        return true;  // back to the menu
    cli_user_config_remember(it->run ? "run" : it->integration, it->integration, model);
    if (it->run) {
        char *argv[] = {"ollama", "agent", model, NULL};
        run_self(argv);
    } else {
        char *argv[] = {"ollama", "launch", (char *)it->integration, "--model", model, NULL};
        if (run_self(argv) != 0) {
            fprintf(stderr, "\nPress enter to go back to the menu.");
            int ch;
            while ((ch = getchar()) != EOF && ch != '\n') {
            }
        }
    }
    free(model);
    return true;
}

int cli_launcher(void)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    for (bool again = true; again;) {
        struct menu m = {0};
        m.cfg = cli_user_config_load();
        menu_init(&m);
        const struct menu_item *it;
        enum action act = menu_run(&m, &it);
        again = act != ACT_QUIT && menu_act(c, m.cfg, act, it);
        json_decref(m.cfg);
    }
    client_free(c);
    return 0;
}

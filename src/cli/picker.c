// The model picker of the launcher (0.33's cmd/tui/selector.go, drawn with
// ncurses): the server's models (`ollama list`) and, after them, the local
// models 0.33 recommends that are not pulled yet, marked "(download)";
// deprecated models (launch_models.c) are not offered.
// Typing filters by name, up/down move, enter picks, esc goes back. A model
// that is not on the server is pulled on pick with the usual progress bars.
#include "cli/launch.h"

#include <curses.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

struct pick_item {
    const char *name, *desc;
    bool local;
};

struct picker {
    struct pick_item items[256];
    int n;
    char filter[64];
    int cursor;
};

static bool matches(const struct picker *p, const struct pick_item *it)
{
    return !p->filter[0] || strcasestr(it->name, p->filter);
}

// The items the filter keeps, as indices into p->items.
static int visible(const struct picker *p, int *idx)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (matches(p, &p->items[i]))
            idx[n++] = i;
    return n;
}

static void picker_draw(const struct picker *p, const char *title, const char *current)
{
    erase();
    attron(A_BOLD);
    mvprintw(0, 0, "%s", title);
    attroff(A_BOLD);
    attron(A_DIM);
    mvprintw(1, 0, "%s", p->filter[0] ? "" : "Type to filter...");
    attroff(A_DIM);
    if (p->filter[0])
        mvprintw(1, 0, "%s", p->filter);
    int idx[256];
    int n = visible(p, idx), y = 3, rows = LINES - 5;
    int first = p->cursor >= rows ? p->cursor - rows + 1 : 0;
    for (int k = first; k < n && y < LINES - 2; k++) {
        const struct pick_item *it = &p->items[idx[k]];
        bool sel = k == p->cursor;
        if (sel)
            attron(A_BOLD);
        mvprintw(y, 0, "%s%s", sel ? "\u25b8 " : "  ", it->name);
        if (sel)
            attroff(A_BOLD);
        attron(A_DIM);
        if (current && strcmp(current, it->name) == 0)
            printw(" (current)");
        if (!it->local)
            printw(" (download)");
        if (it->desc && *it->desc)
            printw("  %s", it->desc);
        attroff(A_DIM);
        y++;
    }
    if (n == 0)
        mvprintw(y, 2, "no matching models");
    attron(A_DIM);
    mvprintw(LINES - 1, 0, "\u2191/\u2193 navigate \u2022 enter select \u2022 esc back");
    attroff(A_DIM);
    refresh();
}

// The key loop; the picked item or NULL.
static const struct pick_item *picker_loop(struct picker *p, const char *title, const char *current)
{
    int idx[256];
    for (;;) {
        int n = visible(p, idx);
        if (p->cursor >= n)
            p->cursor = n > 0 ? n - 1 : 0;
        picker_draw(p, title, current);
        int ch = getch();
        size_t fl = strlen(p->filter);
        if (ch == KEY_UP && p->cursor > 0)
            p->cursor--;
        else if (ch == KEY_DOWN && p->cursor < n - 1)
            p->cursor++;
        else if ((ch == '\n' || ch == KEY_ENTER) && n > 0)
            return &p->items[idx[p->cursor]];
        else if (ch == 27 || ch == 3 || ch == ERR)
            return NULL;
        else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && fl > 0)
            p->filter[fl - 1] = '\0';
        else if (ch >= 0x20 && ch < 0x7f && fl + 1 < sizeof(p->filter))
            p->filter[fl] = (char)ch, p->filter[fl + 1] = '\0', p->cursor = 0;
    }
}

static bool listed(const struct picker *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->items[i].name, name) == 0 ||
            (strncmp(p->items[i].name, name, strlen(name)) == 0 &&
             strcmp(p->items[i].name + strlen(name), ":latest") == 0))
            return true;
    return false;
}

// Fills p from /api/tags and the recommendations; tags and recs keep the strings.
static void picker_fill(struct picker *p, struct client *c, json_t **tags, json_t **recs)
{
    size_t i;
    json_t *m;
    if (client_list(c, tags, NULL) == 0) {
        json_array_foreach(json_object_get(*tags, "models"), i, m)
        {
            // Models that do not call tools well are left out, as 0.33 does.
            const char *name = json_string_value(json_object_get(m, "name"));
            if (p->n < 256 && name && !cli_launch_model_deprecated(name))
                p->items[p->n++] =
                    (struct pick_item){name,
                                       json_string_value(json_object_get(
                                           json_object_get(m, "details"), "parameter_size")),
                                       true};
        }
    }
    if (client_call(c, "GET", "/api/experimental/model-recommendations", NULL, recs, NULL) < 0)
        return;
    json_array_foreach(json_object_get(*recs, "recommendations"), i, m)
    {
        const char *name = json_string_value(json_object_get(m, "model"));
        // This build has no ollama.com account: cloud models cannot run.
        if (!name || strstr(name, ":cloud") || listed(p, name) || p->n >= 256 ||
            cli_launch_model_deprecated(name))
            continue;
        p->items[p->n++] =
            (struct pick_item){name, json_string_value(json_object_get(m, "description")), false};
    }
}

char *cli_model_picker(struct client *c, const char *title, const char *current)
{
    struct picker p = {0};
    json_t *tags = NULL, *recs = NULL;
    picker_fill(&p, c, &tags, &recs);
    cli_curses_begin();
    const struct pick_item *it = picker_loop(&p, title, current);
    endwin();
    char *out = it ? xstrdup(it->name) : NULL;
    bool pull = it && !it->local;
    json_decref(tags);
    json_decref(recs);
    if (pull) {
        struct err e = {0};
        fprintf(stderr, "Downloading %s...\n", out);
        if (cli_pull_model(c, out, false, &e) < 0) {
            fprintf(stderr, "Error: failed to pull %s: %s\n", out, e.msg);
            free(out);
            out = NULL;
        }
    }
    return out;
}

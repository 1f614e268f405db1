// Streaming markdown for the agent chat (0.33's cmd/tui/chat/markdown.go in
// spirit): text arrives in chunks and is printed as it comes, styled on the
// way. Headings are bold without their #, bullets become "•", fenced code is
// indented and coloured (the fence lines themselves are not shown),
// **bold** and `code` are styled inline. The styles are terminfo strings
// (agent_md_styles_terminal) or, for tests and pipes, any text.
#include "cli/agent.h"

#include <curses.h>
#include <string.h>
#include <term.h>

static void style(struct agent_md *md, const char *s)
{
    if (s && *s)
        buf_append_str(md->out, s);
}

// The line-start prefix decided: what it was and how it is shown.
static void emit_prefix(struct agent_md *md)
{
    const char *p = md->prefix;
    size_t n = md->prefix_len;
    md->line_start = false;
    md->prefix_len = 0;
    if (n >= 3 && strncmp(p, "```", 3) == 0) {
        md->fence = !md->fence;
        md->skip_line = true;  // the fence line (and its language) is not shown
        return;
    }
    if (md->fence) {
        buf_append_str(md->out, "  ");
        style(md, md->styles.code);
        md->styled = true;
        buf_append(md->out, p, n);
        return;
    }
    size_t h = strspn(p, "#");
    if (h > 0 && h <= 6 && h < n && p[h] == ' ') {
        style(md, md->styles.bold);
        md->styled = true;
        md->heading = true;
        buf_append(md->out, p + h + 1, n - h - 1);
        return;
    }
    size_t ind = strspn(p, " ");
    if (ind + 1 < n && (p[ind] == '-' || p[ind] == '*') && p[ind + 1] == ' ') {
        buf_append(md->out, p, ind);
        buf_append_str(md->out, "\u2022 ");
        buf_append(md->out, p + ind + 2, n - ind - 2);
        return;
    }
    // Not a line marker: the characters go through the inline rules.
    for (size_t i = 0; i < n; i++)
        agent_md_inline(md, p[i]);
}

// Restores the plain style after a styled run.
static void unstyle(struct agent_md *md)
{
    if (md->styled || md->bold || md->code)
        style(md, md->styles.reset);
    md->styled = md->bold = md->code = md->heading = false;
}

void agent_md_inline(struct agent_md *md, char c)
{
    if (md->star) {
        md->star = false;
        if (c == '*') {
            md->bold = !md->bold;
            style(md, md->bold ? md->styles.bold : md->styles.reset);
            return;
        }
        buf_append_char(md->out, '*');
    }
    if (c == '*' && !md->code) {
        md->star = true;
        return;
    }
    if (c == '`') {
        md->code = !md->code;
        style(md, md->code ? md->styles.code : md->styles.reset);
        if (!md->code && md->bold)
            style(md, md->styles.bold);
        return;
    }
    buf_append_char(md->out, c);
}

// Whether the line's first characters may still become a marker.
static bool maybe_marker(const struct agent_md *md, char c)
{
    if (md->prefix_len + 1 >= sizeof(md->prefix))
        return false;
    if (md->prefix_len == 0)
        return c == '#' || c == '`' || c == '-' || c == '*' || c == ' ';
    char first = md->prefix[0];
    char last = md->prefix[md->prefix_len - 1];
    if (first == '`')
        return md->prefix_len < 3 && c == '`';
    if (first == '#')
        return c == '#' && last == '#';
    if (first == ' ')
        return c == ' ' || c == '-' || c == '*';
    return false;  // "-" or "*" then anything: decided with this character
}

static void feed_char(struct agent_md *md, char c)
{
    if (c == '\n') {
        if (md->line_start && md->prefix_len)
            emit_prefix(md);
        if (md->star) {
            md->star = false;
            buf_append_char(md->out, '*');
        }
        if (!md->fence || md->styled)
            unstyle(md);
        if (!md->skip_line)
            buf_append_char(md->out, '\n');
        md->skip_line = false;
        md->line_start = true;
        return;
    }
    if (md->skip_line)
        return;
    if (md->line_start) {
        if (maybe_marker(md, c)) {
            md->prefix[md->prefix_len++] = c;
            return;
        }
        md->prefix[md->prefix_len++] = c;
        emit_prefix(md);
        return;
    }
    if (md->fence)
        buf_append_char(md->out, c);
    else
        agent_md_inline(md, c);
}

void agent_md_init(struct agent_md *md, struct buf *out, const struct agent_md_styles *styles)
{
    memset(md, 0, sizeof(*md));
    md->out = out;
    if (styles)
        md->styles = *styles;
    md->line_start = true;
}

void agent_md_feed(struct agent_md *md, const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++)
        feed_char(md, text[i]);
}

void agent_md_finish(struct agent_md *md)
{
    if (md->line_start && md->prefix_len)
        emit_prefix(md);
    if (md->star)
        buf_append_char(md->out, '*');
    md->star = false;
    unstyle(md);
    md->fence = false;
    md->skip_line = false;
    md->line_start = true;
}

// The terminal's own sequences from terminfo (empty when it has none).
void agent_md_styles_terminal(struct agent_md_styles *s)
{
    memset(s, 0, sizeof(*s));
    int err = 0;
    if (setupterm(NULL, 1, &err) != OK)
        return;
    static char bold[32], code[32], dim[32], reset[32];
    const char *b = tigetstr("bold"), *d = tigetstr("dim"), *r = tigetstr("sgr0");
    const char *af = tigetstr("setaf");
    snprintf(bold, sizeof(bold), "%s", b && b != (char *)-1 ? b : "");
    snprintf(dim, sizeof(dim), "%s", d && d != (char *)-1 ? d : "");
    snprintf(reset, sizeof(reset), "%s", r && r != (char *)-1 ? r : "");
    const char *cy = af && af != (char *)-1 ? tiparm(af, COLOR_CYAN) : NULL;
    snprintf(code, sizeof(code), "%s", cy ? cy : "");
    s->bold = bold;
    s->code = code;
    s->dim = dim;
    s->reset = reset;
}

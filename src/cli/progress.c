// The progress display of pull/push/create/run (docs/spec/cli.md §4): a list of
// spinner and bar lines redrawn in place every 100 ms by a ticker thread on
// a terminal (synchronized output, hidden cursor, cursor-up per line). When
// the output is not a terminal each line is printed once, when it is done,
// without bars or escape codes.
//
// Lock order: p->mu only.
#include "cli/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MAX_SAMPLES 10

struct line {
    bool is_bar;
    bool stopped;
    char *text;  // spinner message, or bar label
    char *key;   // bar key (digest)
    uint64_t completed, total;
    int64_t started_ns;
    // rate samples: one per second, the last MAX_SAMPLES
    int64_t sample_ns[MAX_SAMPLES];
    uint64_t sample_bytes[MAX_SAMPLES];
    int n_samples;
    bool printed;  // plain mode: already written
};

struct cli_progress {
    FILE *out;
    bool tty;
    pthread_mutex_t mu;  // guards everything below
    pthread_cond_t cv;
    struct line *lines;
    int n_lines, cap;
    int drawn;  // lines drawn by the last redraw
    int frame;
    bool done;
    pthread_t ticker;
    bool have_ticker;
};

void cli_term_size(int fd, int *cols, int *rows)
{
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row > 0 ? ws.ws_row : 24;
    }
}

static double line_rate(const struct line *l)
{
    if (l->n_samples < 2)
        return -1;
    int64_t dt = l->sample_ns[l->n_samples - 1] - l->sample_ns[0];
    if (dt <= 0)
        return -1;
    uint64_t db = l->sample_bytes[l->n_samples - 1] - l->sample_bytes[0];
    return (double)db / ((double)dt / 1e9);
}

static void sample(struct line *l, int64_t now)
{
    if (l->n_samples && now - l->sample_ns[l->n_samples - 1] < 1000000000LL)
        return;
    if (l->n_samples == MAX_SAMPLES) {
        memmove(l->sample_ns, l->sample_ns + 1, (MAX_SAMPLES - 1) * sizeof(int64_t));
        memmove(l->sample_bytes, l->sample_bytes + 1, (MAX_SAMPLES - 1) * sizeof(uint64_t));
        l->n_samples--;
    }
    l->sample_ns[l->n_samples] = now;
    l->sample_bytes[l->n_samples] = l->completed;
    l->n_samples++;
}

static void render_line(const struct line *l, int frame, int width, struct buf *out)
{
    if (l->is_bar)
        cli_bar_render(l->text, l->completed, l->total, l->stopped ? -1 : line_rate(l), width, out);
    else
        cli_spinner_render(l->text, frame, l->stopped, out);
}

// Plain mode: print every finished line not printed yet, in order, stopping
// at the first unfinished one.
static void flush_plain(struct cli_progress *p, bool all)
{
    for (int i = 0; i < p->n_lines; i++) {
        struct line *l = &p->lines[i];
        if (l->printed)
            continue;
        bool finished = all || l->stopped || i < p->n_lines - 1 ||
                        (l->is_bar && l->total && l->completed >= l->total);
        if (!finished)
            break;
        struct buf b;
        buf_init(&b, 0);
        if (l->is_bar)
            cli_bar_render_plain(l->text, l->completed, l->total, &b);
        else
            buf_append_str(&b, l->text ? l->text : "");
        if (b.len)
            fprintf(p->out, "%s\n", buf_cstr(&b));
        buf_deinit(&b);
        l->printed = true;
    }
    fflush(p->out);
}

static void redraw(struct cli_progress *p)
{
    if (!p->tty) {
        flush_plain(p, false);
        return;
    }
    int cols, rows;
    cli_term_size(fileno(p->out), &cols, &rows);
    int64_t now = time_monotonic_ns();
    struct buf b;
    buf_init(&b, 0);
    buf_append_str(&b, "\x1b[?2026h\x1b[?25l");
    for (int i = 1; i < p->drawn; i++)
        buf_append_str(&b, "\x1b[A");
    buf_append_str(&b, "\x1b[1G");
    int first = p->n_lines > rows ? p->n_lines - rows : 0;
    for (int i = first; i < p->n_lines; i++) {
        struct line *l = &p->lines[i];
        if (l->is_bar && !l->stopped)
            sample(l, now);
        render_line(l, p->frame, cols, &b);
        buf_append_str(&b, "\x1b[K");
        if (i < p->n_lines - 1)
            buf_append_char(&b, '\n');
    }
    buf_append_str(&b, "\x1b[?25h\x1b[?2026l");
    p->drawn = p->n_lines - first;
    fwrite(b.data, 1, b.len, p->out);
    fflush(p->out);
    buf_deinit(&b);
}

static void *ticker_main(void *arg)
{
    struct cli_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->done)
            break;
        p->frame++;
        if (p->n_lines)
            redraw(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct cli_progress *cli_progress_new(FILE *out, bool tty)
{
    struct cli_progress *p = xcalloc(1, sizeof(*p));
    p->out = out;
    p->tty = tty;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (tty && pthread_create(&p->ticker, NULL, ticker_main, p) == 0)
        p->have_ticker = true;
    return p;
}

static struct line *add_line(struct cli_progress *p)
{
    if (p->n_lines == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 8;
        p->lines = xrealloc(p->lines, (size_t)p->cap * sizeof(*p->lines));
    }
    struct line *l = &p->lines[p->n_lines++];
    memset(l, 0, sizeof(*l));
    return l;
}

int cli_progress_spinner(struct cli_progress *p, const char *message)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_lines; i++)
        if (!p->lines[i].is_bar)
            p->lines[i].stopped = true;
    struct line *l = add_line(p);
    l->text = xstrdup(message ? message : "");
    int idx = p->n_lines - 1;
    if (!p->tty)
        flush_plain(p, false);
    pthread_mutex_unlock(&p->mu);
    return idx;
}

void cli_progress_spinner_set(struct cli_progress *p, int idx, const char *message)
{
    pthread_mutex_lock(&p->mu);
    if (idx >= 0 && idx < p->n_lines) {
        free(p->lines[idx].text);
        p->lines[idx].text = xstrdup(message ? message : "");
    }
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_spinner_stop(struct cli_progress *p, int idx)
{
    pthread_mutex_lock(&p->mu);
    if (idx >= 0 && idx < p->n_lines)
        p->lines[idx].stopped = true;
    if (!p->tty)
        flush_plain(p, false);
    pthread_mutex_unlock(&p->mu);
}

int cli_progress_bar(struct cli_progress *p, const char *key, const char *label, uint64_t total)
{
    pthread_mutex_lock(&p->mu);
    int idx = -1;
    for (int i = 0; i < p->n_lines; i++)
        if (p->lines[i].is_bar && strcmp(p->lines[i].key, key) == 0)
            idx = i;
    if (idx < 0) {
        for (int i = 0; i < p->n_lines; i++)
            if (!p->lines[i].is_bar)
                p->lines[i].stopped = true;
        struct line *l = add_line(p);
        l->is_bar = true;
        l->key = xstrdup(key);
        l->text = xstrdup(label);
        l->total = total;
        l->started_ns = time_monotonic_ns();
        idx = p->n_lines - 1;
        if (!p->tty)
            flush_plain(p, false);
    }
    pthread_mutex_unlock(&p->mu);
    return idx;
}

void cli_progress_bar_set(struct cli_progress *p, int idx, uint64_t completed, uint64_t total)
{
    pthread_mutex_lock(&p->mu);
    if (idx >= 0 && idx < p->n_lines) {
        p->lines[idx].completed = completed;
        if (total)
            p->lines[idx].total = total;
    }
    pthread_mutex_unlock(&p->mu);
}

static void stop_ticker(struct cli_progress *p)
{
    pthread_mutex_lock(&p->mu);
    p->done = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->have_ticker) {
        pthread_join(p->ticker, NULL);
        p->have_ticker = false;
    }
}

void cli_progress_stop(struct cli_progress *p)
{
    if (!p)
        return;
    bool was_done = p->done;
    stop_ticker(p);
    if (was_done)
        return;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_lines; i++)
        p->lines[i].stopped = true;
    if (p->tty) {
        if (p->n_lines) {
            redraw(p);
            fputc('\n', p->out);
        }
    } else {
        flush_plain(p, true);
    }
    fflush(p->out);
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_stop_clear(struct cli_progress *p)
{
    if (!p)
        return;
    bool was_done = p->done;
    stop_ticker(p);
    if (was_done)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->tty && p->drawn) {
        struct buf b;
        buf_init(&b, 0);
        for (int i = 0; i < p->drawn; i++) {
            buf_append_str(&b, "\x1b[2K\x1b[1G");
            if (i < p->drawn - 1)
                buf_append_str(&b, "\x1b[A");
        }
        fwrite(b.data, 1, b.len, p->out);
        buf_deinit(&b);
        p->drawn = 0;
    }
    fflush(p->out);
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_free(struct cli_progress *p)
{
    if (!p)
        return;
    stop_ticker(p);
    for (int i = 0; i < p->n_lines; i++) {
        free(p->lines[i].text);
        free(p->lines[i].key);
    }
    free(p->lines);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

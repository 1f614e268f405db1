// Text layout of the CLI (docs/spec/cli.md §3, §4, §6): list/ps tables, `show`
// sections, human numbers, progress bar and spinner lines, the verbose
// statistics block, and word wrapping of streamed text. Everything here is a
// pure function of its inputs so the golden tests can pin it byte for byte.
#include "cli/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Decodes one code point; invalid bytes count as one column each.
static size_t next_cp(const char *s, size_t n, int32_t *cp)
{
    size_t w;
    uint32_t c = utf8_decode((const unsigned char *)s, n, &w);
    *cp = c == UTF8_INVALID ? (unsigned char)s[0] : (int32_t)c;
    return w;
}

static int cp_width(int32_t cp)
{
    if (cp < 0x80)
        return cp >= 0x20 && cp != 0x7f ? 1 : 0;
    return utf8_width((uint32_t)cp);
}

size_t cli_text_width(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += next_cp(s + i, n - i, &cp);
        w += (size_t)cp_width(cp);
    }
    return w;
}

static size_t str_width(const char *s)
{
    return cli_text_width(s, strlen(s));
}

static void pad(struct buf *out, const char *s, size_t width)
{
    buf_append_str(out, s);
    for (size_t w = str_width(s); w < width; w++)
        buf_append_char(out, ' ');
}

// ---------------------------------------------------------------------------
// Tables.

void cli_table_init(struct cli_table *t, int n_cols)
{
    memset(t, 0, sizeof(*t));
    t->n_cols = n_cols;
}

void cli_table_deinit(struct cli_table *t)
{
    for (int i = 0; i < t->n_rows * t->n_cols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

void cli_table_add(struct cli_table *t, const char *const *row)
{
    if (t->n_rows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->cells = xrealloc(t->cells, (size_t)t->cap * (size_t)t->n_cols * sizeof(char *));
    }
    for (int j = 0; j < t->n_cols; j++)
        t->cells[t->n_rows * t->n_cols + j] = xstrdup(row[j] ? row[j] : "");
    t->n_rows++;
}

static const char *cell(const struct cli_table *t, int i, int j)
{
    return t->cells[i * t->n_cols + j];
}

void cli_table_render_list(const struct cli_table *t, struct buf *out)
{
    size_t width[16] = {0};
    for (int i = 0; i < t->n_rows; i++)
        for (int j = 0; j < t->n_cols && j < 16; j++) {
            size_t w = str_width(cell(t, i, j));
            width[j] = w > width[j] ? w : width[j];
        }
    for (int i = 0; i < t->n_rows; i++) {
        for (int j = 0; j < t->n_cols && j < 16; j++) {
            pad(out, cell(t, i, j), width[j]);
            // The header's last cell is followed by one space, every other
            // cell by four (tabwriter with padding 4, as Ollama prints it).
            buf_append_str(out, i == 0 && j == t->n_cols - 1 ? " " : "    ");
        }
        buf_append_char(out, '\n');
    }
}

// Splits text into lines of at most limit columns at spaces (a longer word
// keeps a line of its own), as the table writer's wrapping does.
static int wrap_words(const char *text, int limit, char ***lines_out)
{
    char **lines = NULL;
    int n = 0;
    if (str_width(text) <= (size_t)limit) {
        lines = xmalloc(sizeof(char *));
        lines[0] = xstrdup(text);
        *lines_out = lines;
        return 1;
    }
    struct buf line;
    buf_init(&line, 0);
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t w = cli_text_width(p, len);
        size_t cur = cli_text_width(line.data ? line.data : "", line.len);
        if (line.len && cur + 1 + w > (size_t)limit) {
            lines = xrealloc(lines, (size_t)(n + 1) * sizeof(char *));
            lines[n++] = xstrdup(buf_cstr(&line));
            buf_reset(&line);
        }
        if (line.len)
            buf_append_char(&line, ' ');
        buf_append(&line, p, len);
        p += len;
    }
    if (line.len || n == 0) {
        lines = xrealloc(lines, (size_t)(n + 1) * sizeof(char *));
        lines[n++] = xstrdup(buf_cstr(&line));
    }
    buf_deinit(&line);
    *lines_out = lines;
    return n;
}

void cli_table_render_section(const struct cli_table *t, const char *title, int wrap_cols,
                              struct buf *out)
{
    // Wrap every cell, then lay the wrapped lines out as extra rows.
    struct cli_table w;
    cli_table_init(&w, t->n_cols);
    for (int i = 0; i < t->n_rows; i++) {
        char **lines[16];
        int n_lines[16], height = 1;
        for (int j = 0; j < t->n_cols && j < 16; j++) {
            n_lines[j] = wrap_words(cell(t, i, j), wrap_cols, &lines[j]);
            height = n_lines[j] > height ? n_lines[j] : height;
        }
        for (int k = 0; k < height; k++) {
            const char *row[16];
            for (int j = 0; j < t->n_cols && j < 16; j++)
                row[j] = k < n_lines[j] ? lines[j][k] : "";
            cli_table_add(&w, row);
        }
        for (int j = 0; j < t->n_cols && j < 16; j++) {
            for (int k = 0; k < n_lines[j]; k++)
                free(lines[j][k]);
            free(lines[j]);
        }
    }
    size_t width[16] = {0};
    for (int i = 0; i < w.n_rows; i++)
        for (int j = 0; j < w.n_cols && j < 16; j++) {
            size_t cw = str_width(cell(&w, i, j));
            width[j] = cw > width[j] ? cw : width[j];
        }
    buf_printf(out, "  %s\n", title);
    for (int i = 0; i < w.n_rows; i++) {
        buf_append_str(out, "    ");
        for (int j = 0; j < w.n_cols && j < 16; j++) {
            pad(out, cell(&w, i, j), width[j]);
            buf_append_str(out, "    ");
        }
        buf_append_char(out, '\n');
    }
    buf_append_char(out, '\n');
    cli_table_deinit(&w);
}

// ---------------------------------------------------------------------------
// Numbers.

void cli_human_number(uint64_t n, char *out, size_t len)
{
    if (n >= 1000000000ull) {
        if (n % 1000000000ull == 0)
            snprintf(out, len, "%lluB", (unsigned long long)(n / 1000000000ull));
        else
            snprintf(out, len, "%.1fB", (double)n / 1e9);
    } else if (n >= 1000000ull) {
        if (n % 1000000ull == 0)
            snprintf(out, len, "%lluM", (unsigned long long)(n / 1000000ull));
        else
            snprintf(out, len, "%.2fM", (double)n / 1e6);
    } else if (n >= 1000ull) {
        snprintf(out, len, "%.0fK", (double)n / 1e3);
    } else {
        snprintf(out, len, "%llu", (unsigned long long)n);
    }
}

void cli_processor(int64_t size, int64_t size_vram, char *out, size_t n)
{
    if (size_vram == 0)
        snprintf(out, n, "100%% CPU");
    else if (size_vram > size || size == 0)
        snprintf(out, n, "Unknown");
    else if (size_vram == size)
        snprintf(out, n, "100%% GPU");
    else {
        int cpu = (int)llround(100.0 * (double)(size - size_vram) / (double)size);
        snprintf(out, n, "%d%%/%d%% CPU/GPU", cpu, 100 - cpu);
    }
}

void cli_go_float(double v, char *out, size_t n)
{
    struct buf b;
    buf_init(&b, 0);
    buf_append_go_float(&b, v);
    snprintf(out, n, "%s", buf_cstr(&b));
    buf_deinit(&b);
}

// A JSON value as Go's %v prints it after decoding into `any`: numbers are
// float64 (go_float) unless ints is set; strings bare.
static void value_text_ex(const json_t *v, bool ints, struct buf *out)
{
    char tmp[64];
    if (!v) {  // a field the server left out (Go prints a nil interface so)
        buf_append_str(out, "<nil>");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_STRING:
        buf_append(out, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        if (ints) {
            buf_printf(out, "%lld", (long long)json_integer_value(v));
        } else {
            cli_go_float((double)json_integer_value(v), tmp, sizeof(tmp));
            buf_append_str(out, tmp);
        }
        break;
    case JSON_REAL:
        cli_go_float(json_real_value(v), tmp, sizeof(tmp));
        buf_append_str(out, tmp);
        break;
    case JSON_TRUE:
        buf_append_str(out, "true");
        break;
    case JSON_FALSE:
        buf_append_str(out, "false");
        break;
    case JSON_ARRAY: {
        // Long arrays are abbreviated: "[1 2 3 ...+128253 more]".
        size_t n = json_array_size(v), shown = n > 3 ? 3 : n;
        buf_append_char(out, '[');
        for (size_t i = 0; i < shown; i++) {
            if (i)
                buf_append_char(out, ' ');
            value_text_ex(json_array_get(v, i), ints, out);
        }
        if (n > shown)
            buf_printf(out, " ...+%zu more", n - shown);
        buf_append_char(out, ']');
        break;
    }
    case JSON_NULL:
        buf_append_str(out, "<nil>");
        break;
    default:
        buf_append_str(out, "map[...]");
        break;
    }
}

static void value_text(const json_t *v, struct buf *out)
{
    value_text_ex(v, false, out);
}

static void add_row2(struct cli_table *t, const char *a, const char *b)
{
    const char *row[2] = {a, b};
    cli_table_add(t, row);
}

static void add_info_row(struct cli_table *t, const json_t *info, const char *label,
                         const char *key)
{
    const json_t *v = json_object_get(info, key);
    if (!v)
        return;
    struct buf b;
    buf_init(&b, 0);
    value_text(v, &b);
    add_row2(t, label, buf_cstr(&b));
    buf_deinit(&b);
}

// System and License: the first two non-empty lines, then "..." if more.
static void text_section(const char *title, const char *text, struct buf *out)
{
    struct cli_table t;
    cli_table_init(&t, 1);
    int shown = 0;
    bool more = false;
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        struct str s = str_trim((struct str){p, len});
        if (s.len) {
            if (shown == 2) {
                more = true;
                break;
            }
            char *line = str_dup(s);
            const char *row[1] = {line};
            cli_table_add(&t, row);
            free(line);
            shown++;
        }
        p += len;
        if (*p == '\n')
            p++;
    }
    if (more) {
        const char *row[1] = {"..."};
        cli_table_add(&t, row);
    }
    cli_table_render_section(&t, title, 100, out);
    cli_table_deinit(&t);
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// "Model": architecture, size, context and embedding lengths, quantization.
static void model_section(const json_t *show, struct buf *out)
{
    const json_t *info = json_object_get(show, "model_info");
    const json_t *details = json_object_get(show, "details");
    struct cli_table t;
    cli_table_init(&t, 2);
    const char *arch = json_string_value(json_object_get(info, "general.architecture"));
    if (arch)
        add_row2(&t, "architecture", arch);
    const char *psize = json_string_value(json_object_get(details, "parameter_size"));
    const json_t *pcount = json_object_get(info, "general.parameter_count");
    char num[32];
    if (psize && *psize) {
        add_row2(&t, "parameters", psize);
    } else if (json_is_integer(pcount)) {
        cli_human_number((uint64_t)json_integer_value(pcount), num, sizeof(num));
        add_row2(&t, "parameters", num);
    }
    if (arch) {
        char key[160];
        snprintf(key, sizeof(key), "%s.context_length", arch);
        add_info_row(&t, info, "context length", key);
        snprintf(key, sizeof(key), "%s.embedding_length", arch);
        add_info_row(&t, info, "embedding length", key);
    }
    const char *quant = json_string_value(json_object_get(details, "quantization_level"));
    if (quant && *quant)
        add_row2(&t, "quantization", quant);
    const char *requires = json_string_value(json_object_get(show, "requires"));
    if (requires && *requires)
        add_row2(&t, "requires", requires);
    cli_table_render_section(&t, "Model", 30, out);
    cli_table_deinit(&t);
}

static void capabilities_section(const json_t *show, struct buf *out)
{
    const json_t *caps = json_object_get(show, "capabilities");
    if (!json_array_size(caps))
        return;
    struct cli_table t;
    cli_table_init(&t, 1);
    size_t i;
    const json_t *v;
    json_array_foreach(caps, i, v)
    {
        const char *row[1] = {json_string_value(v)};
        cli_table_add(&t, row);
    }
    cli_table_render_section(&t, "Capabilities", 30, out);
    cli_table_deinit(&t);
}

// "Projector": the vision projector of a multimodal model, when it has one.
static void projector_section(const json_t *show, struct buf *out)
{
    const json_t *proj = json_object_get(show, "projector_info");
    if (!json_object_size(proj))
        return;
    struct cli_table t;
    cli_table_init(&t, 2);
    const char *parch = json_string_value(json_object_get(proj, "general.architecture"));
    if (parch)
        add_row2(&t, "architecture", parch);
    const json_t *pc = json_object_get(proj, "general.parameter_count");
    if (json_is_integer(pc)) {
        char num[32];
        cli_human_number((uint64_t)json_integer_value(pc), num, sizeof(num));
        add_row2(&t, "parameters", num);
    }
    if (parch) {
        char key[160];
        snprintf(key, sizeof(key), "%s.vision.embedding_length", parch);
        add_info_row(&t, proj, "embedding length", key);
        snprintf(key, sizeof(key), "%s.vision.projection_dim", parch);
        add_info_row(&t, proj, "dimensions", key);
    }
    cli_table_render_section(&t, "Projector", 30, out);
    cli_table_deinit(&t);
}

// One "name value..." line of the parameters text as a row: the name, then
// the rest joined by single spaces. Blank lines add nothing.
static void parameter_row(struct cli_table *t, const char *p, size_t len)
{
    char *line = xstrndup(p, len);
    char *s = line;
    while (*s == ' ' || *s == '\t')
        s++;
    char *rest = s + strcspn(s, " \t");
    if (*rest) {
        *rest++ = '\0';
        while (*rest == ' ' || *rest == '\t')
            rest++;
    }
    struct buf v;
    buf_init(&v, 0);
    for (char *q = rest; *q;) {
        size_t wlen = strcspn(q, " \t");
        if (v.len)
            buf_append_char(&v, ' ');
        buf_append(&v, q, wlen);
        q += wlen;
        q += strspn(q, " \t");
    }
    if (*s)
        add_row2(t, s, buf_cstr(&v));
    buf_deinit(&v);
    free(line);
}

static void parameters_section(const json_t *show, struct buf *out)
{
    const char *params = json_string_value(json_object_get(show, "parameters"));
    if (!params || !*params)
        return;
    struct cli_table t;
    cli_table_init(&t, 2);
    const char *p = params;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        parameter_row(&t, p, len);
        p += len;
        if (*p == '\n')
            p++;
    }
    cli_table_render_section(&t, "Parameters", 30, out);
    cli_table_deinit(&t);
}

// "Metadata" (verbose): every model_info key, sorted.
static void metadata_section(const json_t *info, struct buf *out)
{
    struct cli_table t;
    cli_table_init(&t, 2);
    size_t n = json_object_size(info), k = 0;
    const char **keys = xcalloc(n ? n : 1, sizeof(char *));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)info, key, v) keys[k++] = key;
    qsort(keys, k, sizeof(char *), key_cmp);
    for (size_t i = 0; i < k; i++) {
        struct buf b;
        buf_init(&b, 0);
        value_text(json_object_get(info, keys[i]), &b);
        add_row2(&t, keys[i], buf_cstr(&b));
        buf_deinit(&b);
    }
    free(keys);
    cli_table_render_section(&t, "Metadata", 30, out);
    cli_table_deinit(&t);
}

// "Tensors" (verbose): name, type and shape of each.
static void tensors_section(const json_t *show, struct buf *out)
{
    const json_t *tensors = json_object_get(show, "tensors");
    if (!json_array_size(tensors))
        return;
    struct cli_table t;
    cli_table_init(&t, 3);
    size_t i;
    const json_t *v;
    json_array_foreach(tensors, i, v)
    {
        struct buf shape;
        buf_init(&shape, 0);
        value_text_ex(json_object_get(v, "shape"), true, &shape);
        const char *row[3] = {json_string_value(json_object_get(v, "name")),
                              json_string_value(json_object_get(v, "type")), buf_cstr(&shape)};
        cli_table_add(&t, row);
        buf_deinit(&shape);
    }
    cli_table_render_section(&t, "Tensors", 30, out);
    cli_table_deinit(&t);
}

void cli_show_report(const json_t *show, bool verbose, struct buf *out)
{
    model_section(show, out);
    capabilities_section(show, out);
    projector_section(show, out);
    parameters_section(show, out);
    const char *system = json_string_value(json_object_get(show, "system"));
    if (system && *system)
        text_section("System", system, out);
    const char *license = json_string_value(json_object_get(show, "license"));
    if (license && *license)
        text_section("License", license, out);
    if (verbose) {
        metadata_section(json_object_get(show, "model_info"), out);
        tensors_section(show, out);
    }
}

// ---------------------------------------------------------------------------
// Verbose statistics (cli.md §6.5).

static int64_t get_i64(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    // A real from a misbehaving server: only in-range values convert.
    double d = json_is_real(v) ? json_real_value(v) : 0;
    return d > -9.2e18 && d < 9.2e18 ? (int64_t)d : 0;
}

void cli_stats_render(const json_t *final, struct buf *out)
{
    char d[64];
    int64_t total = get_i64(final, "total_duration"), load = get_i64(final, "load_duration");
    int64_t pc = get_i64(final, "prompt_eval_count"), pd = get_i64(final, "prompt_eval_duration");
    int64_t ec = get_i64(final, "eval_count"), ed = get_i64(final, "eval_duration");
    if (total > 0) {
        duration_format(total, d, sizeof(d));
        buf_printf(out, "%-22s%s\n", "total duration:", d);
    }
    if (load > 0) {
        duration_format(load, d, sizeof(d));
        buf_printf(out, "%-22s%s\n", "load duration:", d);
    }
    if (pc > 0)
        buf_printf(out, "%-22s%lld token(s)\n", "prompt eval count:", (long long)pc);
    if (pd > 0) {
        duration_format(pd, d, sizeof(d));
        buf_printf(out, "%-22s%s\n", "prompt eval duration:", d);
        buf_printf(out, "%-22s%.2f tokens/s\n",
                   "prompt eval rate:", (double)pc / ((double)pd / 1e9));
    }
    if (ec > 0)
        buf_printf(out, "%-22s%lld token(s)\n", "eval count:", (long long)ec);
    if (ed > 0) {
        duration_format(ed, d, sizeof(d));
        buf_printf(out, "%-22s%s\n", "eval duration:", d);
        buf_printf(out, "%-22s%.2f tokens/s\n", "eval rate:", (double)ec / ((double)ed / 1e9));
    }
}

// ---------------------------------------------------------------------------
// Progress lines (cli.md §4).

void cli_eta_format(double seconds, char *out, size_t n)
{
    if (!(seconds >= 0))
        seconds = 0;
    double r = floor(seconds + 0.5);
    if (r >= 100 * 3600) {
        snprintf(out, n, "99h+");
        return;
    }
    long s = (long)r;
    if (s >= 3600)
        snprintf(out, n, "%ldh%ldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60)
        snprintf(out, n, "%ldm%lds", s / 60, s % 60);
    else
        snprintf(out, n, "%lds", s);
}

static double percent_of(uint64_t current, uint64_t total)
{
    if (total == 0)
        return 0;
    double p = 100.0 * (double)current / (double)total;
    return p > 100 ? 100 : p;
}

void cli_bar_render(const char *label, uint64_t current, uint64_t total, double rate_bps, int width,
                    struct buf *out)
{
    double pct = percent_of(current, total);
    char prefix[512], suffix[128], cur[32], tot[32];
    snprintf(prefix, sizeof(prefix), "%s %3.0f%%", label, pct);
    size_format_human(total, tot, sizeof(tot));
    if (current >= total && total > 0) {
        snprintf(suffix, sizeof(suffix), "%6s%7s%10s%8s", tot, "", "", "");
    } else {
        size_format_human(current, cur, sizeof(cur));
        int k = snprintf(suffix, sizeof(suffix), "%6s/%6s", cur, tot);
        if (rate_bps > 0) {
            char rate[32], eta[32];
            size_format_human((uint64_t)rate_bps, rate, sizeof(rate));
            cli_eta_format((double)(total - (current < total ? current : total)) / rate_bps, eta,
                           sizeof(eta));
            snprintf(suffix + k, sizeof(suffix) - (size_t)k, "  %6s/s  %6s", rate, eta);
        } else {
            snprintf(suffix + k, sizeof(suffix) - (size_t)k, "%10s%8s", "", "");
        }
    }
    buf_append_str(out, prefix);
    int f = width - (int)str_width(prefix) - (int)str_width(suffix) - 5;
    if (f > 0) {
        int filled = (int)((double)f * pct / 100.0);
        buf_append_str(out, " \u2595");
        for (int i = 0; i < f; i++)
            buf_append_str(out, i < filled ? "\u2588" : " ");
        buf_append_str(out, "\u258f ");
    } else {
        buf_append_char(out, ' ');
    }
    buf_append_str(out, suffix);
}

void cli_bar_render_plain(const char *label, uint64_t current, uint64_t total, struct buf *out)
{
    char tot[32];
    size_format_human(total, tot, sizeof(tot));
    buf_printf(out, "%s %3.0f%% %s", label, percent_of(current, total), tot);
}

static const char *const spinner_frames[] = {"\u280b", "\u2819", "\u2839", "\u2838", "\u283c",
                                             "\u2834", "\u2826", "\u2827", "\u2807", "\u280f"};

void cli_spinner_render(const char *message, int frame, bool stopped, struct buf *out)
{
    if (message && *message) {
        buf_append_str(out, message);
        buf_append_char(out, ' ');
    }
    if (!stopped) {
        buf_append_str(out, spinner_frames[((frame % 10) + 10) % 10]);
        buf_append_char(out, ' ');
    }
}

// ---------------------------------------------------------------------------
// Word wrap (cli.md §6.6).

void cli_wrap_init(struct cli_wrap *w, bool enabled, int width)
{
    memset(w, 0, sizeof(*w));
    w->enabled = enabled && width >= 10;
    w->width = width;
    buf_init(&w->word, 0);
}

void cli_wrap_deinit(struct cli_wrap *w)
{
    buf_deinit(&w->word);
}

void cli_wrap_reset(struct cli_wrap *w)
{
    w->line_len = 0;
    buf_reset(&w->word);
}

void cli_wrap_feed(struct cli_wrap *w, const char *text, size_t n, struct buf *out)
{
    if (!w->enabled) {
        buf_append(out, text, n);
        return;
    }
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = next_cp(text + i, n - i, &cp);
        const char *ch = text + i;
        i += k;
        int cw = cp_width(cp);
        if (cp == '\n' || cp == '\r') {
            buf_append(out, ch, k);
            cli_wrap_reset(w);
            continue;
        }
        if (w->line_len + 1 > w->width - 5) {
            int word_w = (int)cli_text_width(w->word.data ? w->word.data : "", w->word.len);
            if (word_w > w->width - 10) {
                // A word too long to move: break it where it is.
                buf_append_str(out, "\n");
                buf_append(out, ch, k);
                buf_reset(&w->word);
                if (cp != ' ' && cp != '\t' && cw < 2)
                    buf_append(&w->word, ch, k);
                w->line_len = cw;
                continue;
            }
            // Erase the partial word, start a new line, and retype it.
            if (word_w > 0)
                buf_printf(out, "\x1b[%dD", word_w);
            buf_append_str(out, "\x1b[K\n");
            buf_append(out, w->word.data ? w->word.data : "", w->word.len);
            buf_append(out, ch, k);
            w->line_len = word_w + cw;
            if (cp == ' ' || cp == '\t' || cw >= 2)
                buf_reset(&w->word);
            else
                buf_append(&w->word, ch, k);
            continue;
        }
        buf_append(out, ch, k);
        w->line_len += cw;
        if (cp == ' ' || cp == '\t' || cw >= 2)
            buf_reset(&w->word);
        else
            buf_append(&w->word, ch, k);
    }
}

// The agent chat's local tools (0.33's agent/tools: bash, read, edit, skill;
// plus list and search for looking around without the shell). Every path is
// resolved inside the working directory and refused when it would leave it
// (also through a symbolic link). A tool's failure is text for the model and
// the user ("Error: ..."), never a crash.
#include "cli/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIST_MAX   1000
#define SEARCH_MAX 200

// ---------------------------------------------------------------------------
// Definitions

static json_t *param(const char *type, const char *desc)
{
    return json_pack("{s:s,s:s}", "type", type, "description", desc);
}

static json_t *def(const char *name, const char *desc, json_t *props, json_t *required)
{
    return json_pack("{s:s,s:{s:s,s:s,s:{s:s,s:o,s:o}}}", "type", "function", "function", "name",
                     name, "description", desc, "parameters", "type", "object", "properties", props,
                     "required", required);
}

json_t *agent_tools_defs(const struct agent_tools *t)
{
    json_t *defs = json_array();
    if (t->shell)
        json_array_append_new(
            defs, def("bash",
                      "Execute a bash command on the system. Use this to inspect files, run "
                      "tests, and perform development tasks.",
                      json_pack("{s:o}", "command", param("string", "The command to run.")),
                      json_pack("[s]", "command")));
    json_array_append_new(
        defs,
        def("read", "Read a text file in the working directory.",
            json_pack("{s:o,s:o,s:o}", "path",
                      param("string", "Path to the file to read, relative to the working "
                                      "directory."),
                      "start_line",
                      param("integer", "Optional 1-based line to start reading from."), "end_line",
                      param("integer", "Optional 1-based inclusive line to stop reading at.")),
            json_pack("[s]", "path")));
    json_array_append_new(
        defs,
        def("edit",
            "Edit a file by exact-text replacement. old_text must match the file exactly once "
            "unless replace_all is true; an empty old_text on a missing file creates it.",
            json_pack(
                "{s:o,s:o,s:o,s:o,s:o}", "path",
                param("string", "Path to the file to edit, relative to the working "
                                "directory."),
                "old_text", param("string", "Exact text to replace."), "new_text",
                param("string", "Replacement text."), "edits",
                json_pack("{s:s,s:s,s:{s:s,s:{s:o,s:o},s:[s,s]}}", "type", "array", "description",
                          "Several exact-text replacements instead of old_text/new_text, "
                          "each matched against the original file, not overlapping.",
                          "items", "type", "object", "properties", "old_text",
                          param("string", "Exact text to replace."), "new_text",
                          param("string", "Replacement text."), "required", "old_text", "new_text"),
                "replace_all",
                param("boolean", "Replace every occurrence (a single edit only). "
                                 "Defaults to false.")),
            json_pack("[s]", "path")));
    json_array_append_new(
        defs, def("list", "List the files of a directory in the working directory.",
                  json_pack("{s:o}", "path", param("string", "Directory, relative (default .).")),
                  json_array()));
    json_array_append_new(
        defs, def("search", "Search the files under a directory for lines containing a text.",
                  json_pack("{s:o,s:o}", "pattern", param("string", "Text to look for."), "path",
                            param("string", "Directory or file, relative (default .).")),
                  json_pack("[s]", "pattern")));
    if (json_array_size(t->skills) > 0)
        json_array_append_new(
            defs, def("skill", "Load the instructions of one of the available skills by name.",
                      json_pack("{s:o}", "name", param("string", "The skill's name.")),
                      json_pack("[s]", "name")));
    return defs;
}

bool agent_tool_read_only(const char *name)
{
    static const char *const ro[] = {"read", "list", "search", "skill"};
    for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
        if (strcmp(name, ro[i]) == 0)
            return true;
    return false;
}

static const char *arg_str(const json_t *args, const char *key)
{
    return json_string_value(json_object_get(args, key));
}

char *agent_tool_scope(const char *name, const json_t *args)
{
    const char *cmd = arg_str(args, "command");
    if (strcmp(name, "bash") == 0 && cmd)
        return xasprintf("bash:%s", cmd);
    return xstrdup(name);
}

char *agent_tool_label(const char *name, const json_t *args)
{
    static const char *const keys[] = {"command", "path", "pattern", "name"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = arg_str(args, keys[i]);
        if (v)
            return xasprintf("%s(%s)", name, v);
    }
    return xasprintf("%s()", name);
}

// ---------------------------------------------------------------------------
// Paths

// The absolute path of rel inside t->cwd; NULL (and the reason in out) when
// it would leave it.
static char *resolve(const struct agent_tools *t, const char *rel, struct buf *out)
{
    if (!rel || !*rel)
        rel = ".";
    char joined[PATH_MAX];
    const char *cand = rel;
    if (rel[0] != '/') {
        if (path_join(t->cwd, rel, joined, sizeof(joined), NULL) < 0) {
            buf_printf(out, "Error: path too long: %s", rel);
            return NULL;
        }
        cand = joined;
    }
    // The deepest existing ancestor decides (the file itself may be new).
    char *copy = xstrdup(cand), real[PATH_MAX];
    const char *tail = NULL;
    while (!realpath(copy, real)) {
        char *slash = strrchr(copy, '/');
        if (!slash || slash == copy) {
            free(copy);
            buf_printf(out, "Error: cannot resolve %s", rel);
            return NULL;
        }
        *slash = '\0';
        tail = cand + (slash - copy);
    }
    size_t n = strlen(t->cwd);
    bool inside = strncmp(real, t->cwd, n) == 0 && (real[n] == '\0' || real[n] == '/');
    bool dotdot = tail && strstr(tail, "/..");
    free(copy);
    if (!inside || dotdot) {
        buf_printf(out, "Error: %s is outside the working directory %s", rel, t->cwd);
        return NULL;
    }
    return tail ? xasprintf("%s%s", real, tail) : xstrdup(real);
}

// ---------------------------------------------------------------------------
// bash

// Reads the child's output until it exits, the deadline passes or cancel is
// set; keeps the first AGENT_BASH_MAX_OUTPUT bytes. 1 on timeout, 2 on cancel.
static int collect(struct agent_tools *t, int fd, struct buf *text, bool *truncated)
{
    int64_t deadline = time_monotonic_ns() + (int64_t)t->bash_timeout_ms * 1000000;
    char chunk[4096];
    for (;;) {
        if (t->cancel && *t->cancel)
            return 2;
        if (time_monotonic_ns() >= deadline)
            return 1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 200);
        if (r < 0 && errno != EINTR)
            return 0;
        if (r <= 0)
            continue;
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        size_t room = AGENT_BASH_MAX_OUTPUT - text->len;
        *truncated |= (size_t)n > room;
        buf_append(text, chunk, (size_t)n < room ? (size_t)n : room);
    }
}

static int run_bash(struct agent_tools *t, const json_t *args, struct buf *out)
{
    const char *cmd = arg_str(args, "command");
    if (!cmd || !*cmd)
        return buf_append_str(out, "Error: command parameter is required"), ERR_INVALID;
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return buf_printf(out, "Error: pipe: %s", strerror(errno)), ERR_IO;
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, STDIN_FILENO);
        dup2(pipefd[1], STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        if (chdir(t->cwd) != 0)
            _exit(126);
        signal(SIGINT, SIG_DFL);
        execl("/bin/bash", "bash", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    if (pid < 0) {
        close(pipefd[0]);
        return buf_printf(out, "Error: fork: %s", strerror(errno)), ERR_IO;
    }
    setpgid(pid, pid);
    struct buf text;
    buf_init(&text, 0);
    bool truncated = false;
    int why = collect(t, pipefd[0], &text, &truncated);
    if (why)
        kill(-pid, SIGKILL);
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    buf_append(out, text.data ? text.data : "", text.len);
    buf_deinit(&text);
    if (truncated)
        buf_printf(out, "\n[output truncated to %d bytes]", AGENT_BASH_MAX_OUTPUT);
    if (why == 1)
        return buf_printf(out, "\nError: command timed out after %gs", t->bash_timeout_ms / 1000.0),
               ERR_TIMEOUT;
    if (why == 2)
        return buf_append_str(out, "\nError: command canceled"), ERR_CANCELLED;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return buf_printf(out, "\nError: exit status %d", WEXITSTATUS(status)), ERR_IO;
    if (WIFSIGNALED(status))
        return buf_printf(out, "\nError: killed by signal %d", WTERMSIG(status)), ERR_IO;
    if (text.len == 0 && out->len == 0)
        buf_append_str(out, "(no output)");
    return 0;
}

// ---------------------------------------------------------------------------
// read, edit

static int read_file(const char *path, const char *rel, struct buf *data, struct buf *out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return buf_printf(out, "Error: %s: %s", rel, strerror(errno)), ERR_NOT_FOUND;
    if (S_ISDIR(st.st_mode))
        return buf_printf(out, "Error: %s is a directory", rel), ERR_INVALID;
    struct err e = {0};
    if (fs_read_all(path, AGENT_READ_MAX_BYTES, data, &e) < 0)
        return buf_printf(out, "Error: %s: %s", rel,
                          e.code == ERR_TOO_LARGE ? "file is larger than 200000 bytes" : e.msg),
               ERR_TOO_LARGE;
    return 0;
}

static int run_read(struct agent_tools *t, const json_t *args, struct buf *out)
{
    const char *rel = arg_str(args, "path");
    if (!rel)
        return buf_append_str(out, "Error: path parameter is required"), ERR_INVALID;
    char *path = resolve(t, rel, out);
    if (!path)
        return ERR_PERMISSION;
    struct buf data;
    buf_init(&data, AGENT_READ_MAX_BYTES);
    int rc = read_file(path, rel, &data, out);
    int64_t from = json_integer_value(json_object_get(args, "start_line"));
    int64_t to = json_integer_value(json_object_get(args, "end_line"));
    int64_t line = 1;
    for (size_t i = 0; rc == 0 && i < data.len; i++) {
        bool in = (from <= 0 || line >= from) && (to <= 0 || line <= to);
        if (in)
            buf_append_char(out, data.data[i]);
        line += data.data[i] == '\n';
    }
    buf_deinit(&data);
    free(path);
    return rc;
}

// Occurrences of needle in hay.
static size_t count_matches(const char *hay, size_t hn, const char *needle, size_t nn)
{
    size_t k = 0;
    for (const char *p = hay; nn && (p = memmem(p, hn - (size_t)(p - hay), needle, nn)); p += nn)
        k++;
    return k;
}

static void replace(const struct buf *in, const char *old, const char *new_text, bool all,
                    struct buf *res)
{
    size_t on = strlen(old);
    const char *p = in->data ? in->data : "", *end = p + in->len;
    for (bool done = false; p < end;) {
        const char *m = done ? NULL : memmem(p, (size_t)(end - p), old, on);
        if (!m) {
            buf_append(res, p, (size_t)(end - p));
            break;
        }
        buf_append(res, p, (size_t)(m - p));
        buf_append_str(res, new_text);
        p = m + on;
        done = !all;
    }
}

#define MAX_EDITS 32

struct edit {
    const char *old, *new_text;
    size_t at;  // where old matched in the original
};

static int cmp_edit(const void *a, const void *b)
{
    size_t x = ((const struct edit *)a)->at, y = ((const struct edit *)b)->at;
    return x < y ? -1 : x > y;
}

// The replacements of a call: "edits" [{old_text, new_text}] (0.33's form)
// or old_text/new_text. Returns how many, or -1 (out says why).
static int collect_edits(const json_t *args, struct edit *ed, struct buf *out)
{
    const json_t *list = json_object_get(args, "edits");
    if (!json_is_array(list) || json_array_size(list) == 0) {
        ed[0] = (struct edit){arg_str(args, "old_text"), arg_str(args, "new_text"), 0};
        if (!ed[0].old || !ed[0].new_text)
            return buf_append_str(out, "Error: old_text and new_text are required"), -1;
        return 1;
    }
    if (json_array_size(list) > MAX_EDITS)
        return buf_printf(out, "Error: at most %d edits per call", MAX_EDITS), -1;
    size_t i;
    const json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *o = arg_str(v, "old_text"), *n = arg_str(v, "new_text");
        ed[i] = (struct edit){o ? o : arg_str(v, "oldText"), n ? n : arg_str(v, "newText"), 0};
        if (!ed[i].old || !*ed[i].old || !ed[i].new_text)
            return buf_printf(out, "Error: edit %zu needs old_text and new_text", i + 1), -1;
    }
    return (int)json_array_size(list);
}

// Applies n edits (each matched once in the original, not overlapping;
// replace_all with a single edit) to data, into res.
static int apply_edits(const struct buf *data, struct edit *ed, int n, bool all, const char *rel,
                       struct buf *res, struct buf *out)
{
    const char *base = data->data ? data->data : "";
    for (int i = 0; i < n; i++) {
        size_t ol = strlen(ed[i].old);
        size_t k = ol ? count_matches(base, data->len, ed[i].old, ol) : 0;
        if (k == 0)
            return buf_printf(out, "Error: old_text was not found in %s", rel), ERR_NOT_FOUND;
        if (k > 1 && !(all && n == 1))
            return buf_printf(out,
                              "Error: old_text matched %zu times in %s; set replace_all to true "
                              "to replace every match",
                              k, rel),
                   ERR_INVALID;
        ed[i].at = (size_t)((const char *)memmem(base, data->len, ed[i].old, ol) - base);
    }
    if (n == 1) {
        replace(data, ed[0].old, ed[0].new_text, all, res);
        return 0;
    }
    qsort(ed, (size_t)n, sizeof(ed[0]), cmp_edit);
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (ed[i].at < pos)
            return buf_printf(out, "Error: edits overlap in %s", rel), ERR_INVALID;
        buf_append(res, base + pos, ed[i].at - pos);
        buf_append_str(res, ed[i].new_text);
        pos = ed[i].at + strlen(ed[i].old);
    }
    buf_append(res, base + pos, data->len - pos);
    return 0;
}

static int run_edit(struct agent_tools *t, const json_t *args, struct buf *out)
{
    const char *rel = arg_str(args, "path");
    struct edit ed[MAX_EDITS];
    if (!rel)
        return buf_append_str(out, "Error: path parameter is required"), ERR_INVALID;
    int n = collect_edits(args, ed, out);
    if (n < 0)
        return ERR_INVALID;
    char *path = resolve(t, rel, out);
    if (!path)
        return ERR_PERMISSION;
    struct buf data, res;
    buf_init(&data, AGENT_READ_MAX_BYTES);
    buf_init(&res, AGENT_READ_MAX_BYTES);
    int rc = 0;
    if (n == 1 && !*ed[0].old && !fs_exists(path))
        buf_append_str(&res, ed[0].new_text);  // a new file
    else if ((rc = read_file(path, rel, &data, out)) == 0)
        rc = apply_edits(&data, ed, n, json_is_true(json_object_get(args, "replace_all")), rel,
                         &res, out);
    struct err e = {0};
    if (rc == 0 && fs_write_atomic(path, res.data ? res.data : "", res.len, &e) < 0)
        rc = ERR_IO, buf_printf(out, "Error: %s", e.msg);
    if (rc == 0)
        buf_printf(out, "Edited %s", rel);
    buf_deinit(&data);
    buf_deinit(&res);
    free(path);
    return rc;
}

// ---------------------------------------------------------------------------
// list, search

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_list(struct agent_tools *t, const json_t *args, struct buf *out)
{
    const char *rel = arg_str(args, "path");
    char *path = resolve(t, rel, out);
    if (!path)
        return ERR_PERMISSION;
    DIR *d = opendir(path);
    free(path);
    if (!d)
        return buf_printf(out, "Error: %s: %s", rel ? rel : ".", strerror(errno)), ERR_NOT_FOUND;
    char *names[LIST_MAX];
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < LIST_MAX;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        names[n++] = xasprintf("%s%s", de->d_name, de->d_type == DT_DIR ? "/" : "");
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_str);
    for (size_t i = 0; i < n; i++) {
        buf_printf(out, "%s\n", names[i]);
        free(names[i]);
    }
    if (n == 0)
        buf_append_str(out, "(empty directory)");
    return 0;
}

static void search_file(const char *path, const char *shown, const char *pattern, size_t *hits,
                        struct buf *out)
{
    struct buf data;
    buf_init(&data, AGENT_READ_MAX_BYTES);
    if (fs_read_all(path, AGENT_READ_MAX_BYTES, &data, NULL) == 0 &&
        !memchr(data.data, '\0', data.len)) {
        int64_t line = 1;
        for (char *p = data.data, *end = data.data + data.len; p < end && *hits < SEARCH_MAX;
             line++) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (memmem(p, len, pattern, strlen(pattern))) {
                buf_printf(out, "%s:%lld: %.*s\n", shown, (long long)line, (int)len, p);
                (*hits)++;
            }
            p += len + 1;
        }
    }
    buf_deinit(&data);
}

// Depth-first over dir (skipping .git and other hidden directories).
static void search_dir(const char *dir, const char *shown, const char *pattern, int depth,
                       size_t *hits, struct buf *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d)) && *hits < SEARCH_MAX;) {
        if (de->d_name[0] == '.')
            continue;
        char *p = xasprintf("%s/%s", dir, de->d_name);
        char *s = *shown ? xasprintf("%s/%s", shown, de->d_name) : xstrdup(de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth < 16)
            search_dir(p, s, pattern, depth + 1, hits, out);
        else if (S_ISREG(st.st_mode))
            search_file(p, s, pattern, hits, out);
        free(s);
        free(p);
    }
    closedir(d);
}

static int run_search(struct agent_tools *t, const json_t *args, struct buf *out)
{
    const char *pattern = arg_str(args, "pattern"), *rel = arg_str(args, "path");
    if (!pattern || !*pattern)
        return buf_append_str(out, "Error: pattern parameter is required"), ERR_INVALID;
    char *path = resolve(t, rel, out);
    if (!path)
        return ERR_PERMISSION;
    size_t hits = 0;
    struct stat st;
    const char *shown = rel && strcmp(rel, ".") != 0 ? rel : "";
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        search_file(path, rel, pattern, &hits, out);
    else
        search_dir(path, shown, pattern, 0, &hits, out);
    free(path);
    if (hits == 0)
        buf_append_str(out, "No matches.");
    else if (hits >= SEARCH_MAX)
        buf_printf(out, "[stopped after %d matches]", SEARCH_MAX);
    return 0;
}

static int run_skill(struct agent_tools *t, const json_t *args, struct buf *out)
{
    const char *name = arg_str(args, "name");
    size_t i;
    json_t *s;
    json_array_foreach(t->skills, i, s)
    {
        const char *sn = arg_str(s, "name");
        if (name && sn && strcmp(name, sn) == 0) {
            struct err e = {0};
            if (fs_read_all(arg_str(s, "path"), AGENT_READ_MAX_BYTES, out, &e) < 0)
                return buf_printf(out, "Error: %s", e.msg), ERR_IO;
            return 0;
        }
    }
    return buf_printf(out, "Error: unknown skill: %s", name ? name : ""), ERR_NOT_FOUND;
}

typedef int (*tool_fn)(struct agent_tools *t, const json_t *args, struct buf *out);
static const struct {
    const char *name;
    tool_fn run;
} tools[] = {{"bash", run_bash}, {"read", run_read},     {"edit", run_edit},
             {"list", run_list}, {"search", run_search}, {"skill", run_skill}};

int agent_tool_run(struct agent_tools *t, const char *name, const json_t *args, struct buf *out)
{
    if (strcmp(name, "bash") == 0 && !t->shell)
        return buf_append_str(out, "Error: the shell is disabled (OLLAMA_AGENT_DISABLE_SHELL)"),
               ERR_PERMISSION;
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        if (strcmp(tools[i].name, name) == 0)
            return tools[i].run(t, json_is_object(args) ? args : NULL, out);
    return buf_printf(out, "Error: unknown tool: %s", name), ERR_NOT_FOUND;
}

int agent_tools_init(struct agent_tools *t, const char *cwd, struct err *e)
{
    memset(t, 0, sizeof(*t));
    char real[PATH_MAX];
    if (!realpath(cwd, real))
        return err_set(e, ERR_IO, "%s: %s", cwd, strerror(errno));
    t->cwd = xstrdup(real);
    const char *off = getenv("OLLAMA_AGENT_DISABLE_SHELL");
    t->shell = !off || !*off;
    t->bash_timeout_ms = AGENT_BASH_TIMEOUT_S * 1000;
    agent_skills_load(t);
    return 0;
}

void agent_tools_deinit(struct agent_tools *t)
{
    free(t->cwd);
    json_decref(t->skills);
    memset(t, 0, sizeof(*t));
}

// ---------------------------------------------------------------------------
// Result sizes (0.33's agent/session.go Truncate)

static int64_t approx_tokens(int64_t runes)
{
    return runes <= 0 ? 0 : (runes + 3) / 4 > 1 ? (runes + 3) / 4 : 1;
}

int64_t agent_tool_result_limit(int64_t num_ctx, int64_t base_tokens)
{
    int64_t limit = 60000;
    if (num_ctx > 0 && num_ctx <= 4096)
        limit = 3200;
    else if (num_ctx > 0 && num_ctx <= 8192)
        limit = 6000;
    int64_t threshold = (int64_t)((double)(num_ctx > 0 ? num_ctx : 32768) * 0.8);
    int64_t avail = (threshold - base_tokens - 2 - 64) * 4;  // role overhead, marker reserve
    return avail < limit ? (avail > 0 ? avail : 0) : limit;
}

// Byte offset of rune index r in s (or the end).
static size_t rune_offset(const char *s, size_t len, int64_t r)
{
    size_t i = 0;
    for (int64_t k = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80 && k++ == r)
            return i;
    return len;
}

char *agent_truncate_result(const char *text, int64_t max_runes)
{
    static const char hint[] =
        " Use a narrower command, line range, or search query if more detail is needed.";
    size_t len = strlen(text);
    int64_t total = 0;
    for (size_t i = 0; i < len; i++)
        total += ((unsigned char)text[i] & 0xc0) != 0x80;
    if (max_runes <= 0)
        return xasprintf("[tool output truncated: output omitted because the context is full; "
                         "omitted ~%lld tokens.%s]",
                         (long long)approx_tokens(total), hint);
    if (total <= max_runes)
        return xstrdup(text);
    int64_t head = max_runes * 75 / 100, tail = max_runes - head;
    size_t h = rune_offset(text, len, head), t = rune_offset(text, len, total - tail);
    return xasprintf("%.*s\n\n[tool output truncated: showing first ~%lld tokens and last ~%lld "
                     "tokens; omitted ~%lld tokens.%s]\n\n%s",
                     (int)h, text, (long long)approx_tokens(head), (long long)approx_tokens(tail),
                     (long long)approx_tokens(total - head - tail), hint, text + t);
}

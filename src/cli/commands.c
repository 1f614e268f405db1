// The model-management subcommands (docs/spec/cli.md §3.2–§3.10): create, show,
// stop, pull, push, list, ps, cp, rm. Each is a thin client of the API that
// prints what Ollama prints.
#include "cli/internal.h"

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "client/client.h"
#include "store/store.h"

int cli_fail_err(const struct err *e)
{
    return cli_fail("%s", e->msg[0] ? e->msg : err_str(e->code));
}

struct client *cli_connect(void)
{
    struct client *c = NULL;
    struct err e = {0};
    if (client_new(&c, NULL, &e) < 0 || client_heartbeat(c, &e) < 0) {
        client_free(c);
        cli_fail_err(&e);
        return NULL;
    }
    return c;
}

static bool stderr_tty(void)
{
    return isatty(STDERR_FILENO);
}

// ---------------------------------------------------------------------------
// Progress streams of pull, push and create.

enum progress_mode { MODE_PULL, MODE_PUSH, MODE_CREATE };

struct progress_ctx {
    struct cli_progress *p;
    enum progress_mode mode;
    int spinner;
    char status[512];
};

static int on_progress(void *ctx, const json_t *obj, struct err *e)
{
    (void)e;
    struct progress_ctx *pc = ctx;
    const char *status = json_string_value(json_object_get(obj, "status"));
    const char *digest = json_string_value(json_object_get(obj, "digest"));
    json_int_t total = json_integer_value(json_object_get(obj, "total"));
    json_int_t completed = json_integer_value(json_object_get(obj, "completed"));
    if (digest && *digest) {
        // A pull shows a bar once bytes start arriving.
        if (pc->mode == MODE_PULL && completed == 0)
            return 0;
        if (pc->spinner >= 0) {
            cli_progress_spinner_stop(pc->p, pc->spinner);
            pc->spinner = -1;
        }
        char label[600];
        if (pc->mode == MODE_PULL || !status || !*status) {
            const char *hex = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
            snprintf(label, sizeof(label), "pulling %.12s:", hex);
        } else {
            snprintf(label, sizeof(label), "%s", status);
        }
        int idx = cli_progress_bar(pc->p, digest, label, (uint64_t)total);
        cli_progress_bar_set(pc->p, idx, (uint64_t)completed, (uint64_t)total);
    } else if (status && strcmp(status, pc->status) != 0) {
        snprintf(pc->status, sizeof(pc->status), "%s", status);
        pc->spinner = cli_progress_spinner(pc->p, status);
    }
    return 0;
}

int cli_pull_model(struct client *c, const char *model, bool insecure, struct err *e)
{
    struct progress_ctx pc = {
        .p = cli_progress_new(stderr, stderr_tty()), .mode = MODE_PULL, .spinner = -1};
    int rc = client_pull(c, model, insecure, on_progress, &pc, e);
    cli_progress_stop(pc.p);
    cli_progress_free(pc.p);
    return rc;
}

int cli_cmd_pull(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    struct err e = {0};
    int rc = cli_pull_model(c, a->pos[0], cli_flag(a, "insecure") != NULL, &e);
    client_free(c);
    return rc < 0 ? cli_fail_err(&e) : 0;
}

int cli_cmd_push(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    struct err e = {0};
    struct progress_ctx pc = {
        .p = cli_progress_new(stderr, stderr_tty()), .mode = MODE_PUSH, .spinner = -1};
    int rc = client_push(c, a->pos[0], cli_flag(a, "insecure") != NULL, on_progress, &pc, &e);
    cli_progress_stop(pc.p);
    cli_progress_free(pc.p);
    client_free(c);
    if (rc < 0) {
        if (strstr(e.msg, "access denied") || strstr(e.msg, "unauthorized"))
            return cli_fail("you are not authorized to push to this namespace, create the model "
                            "under a namespace you own");
        return cli_fail_err(&e);
    }
    struct store_name n;
    char addr[1024];
    if (store_name_parse(a->pos[0], &n, NULL) == 0 &&
        (strcmp(n.host, "registry.ollama.ai") == 0 || strcmp(n.host, "ollama.com") == 0))
        snprintf(addr, sizeof(addr), "https://ollama.com/%s/%s", n.ns, n.model);
    else
        snprintf(addr, sizeof(addr), "%s", a->pos[0]);
    printf("\nYou can find your model at:\n\n\t%s\n", addr);
    return 0;
}

// The RFC 3339 time in m[key], or TIME_ZERO when absent or unparsable.
static int64_t json_time(const json_t *m, const char *key)
{
    int64_t t_ns = TIME_ZERO;
    const char *s = json_string_value(json_object_get(m, key));
    if (s)
        time_parse_rfc3339(s, &t_ns, NULL);
    return t_ns;
}

// Writes a list table (ls, ps) to stdout and frees it.
static void print_list(struct cli_table *t)
{
    struct buf out;
    buf_init(&out, 0);
    cli_table_render_list(t, &out);
    fwrite(out.data, 1, out.len, stdout);
    buf_deinit(&out);
    cli_table_deinit(t);
}

// ---------------------------------------------------------------------------
// list, ps, cp, rm, stop.

int cli_list_print(struct client *c, const char *prefix, struct err *e)
{
    json_t *resp = NULL;
    int rc = client_list(c, &resp, e);
    if (rc < 0)
        return rc;
    struct cli_table t;
    cli_table_init(&t, 4);
    const char *header[4] = {"NAME", "ID", "SIZE", "MODIFIED"};
    cli_table_add(&t, header);
    int64_t now = time_now_ns();
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(resp, "models"), i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (!name)
            continue;
        if (prefix && strncasecmp(name, prefix, strlen(prefix)) != 0)
            continue;
        const char *digest = json_string_value(json_object_get(m, "digest"));
        char id[16], size[32], modified[64];
        snprintf(id, sizeof(id), "%.12s", digest ? digest : "");
        if (json_object_get(m, "remote_host"))
            snprintf(size, sizeof(size), "-");
        else
            size_format_human((uint64_t)json_integer_value(json_object_get(m, "size")), size,
                              sizeof(size));
        time_format_relative(json_time(m, "modified_at"), now, modified, sizeof(modified));
        const char *row[4] = {name, id, size, modified};
        cli_table_add(&t, row);
    }
    print_list(&t);
    json_decref(resp);
    return 0;
}

int cli_cmd_list(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    struct err e = {0};
    int rc = cli_list_print(c, a->n_pos ? a->pos[0] : NULL, &e);
    client_free(c);
    return rc < 0 ? cli_fail_err(&e) : 0;
}

int cli_cmd_ps(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    struct err e = {0};
    json_t *resp = NULL;
    int rc = client_ps(c, &resp, &e);
    client_free(c);
    if (rc < 0)
        return cli_fail_err(&e);
    struct cli_table t;
    cli_table_init(&t, 6);
    const char *header[6] = {"NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"};
    cli_table_add(&t, header);
    int64_t now = time_now_ns();
    const char *prefix = a->n_pos ? a->pos[0] : NULL;
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(resp, "models"), i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (!name || (prefix && strncmp(name, prefix, strlen(prefix)) != 0))
            continue;
        const char *digest = json_string_value(json_object_get(m, "digest"));
        int64_t size = json_integer_value(json_object_get(m, "size"));
        int64_t vram = json_integer_value(json_object_get(m, "size_vram"));
        char id[16], sz[32], proc[48], ctx[32], until[64];
        snprintf(id, sizeof(id), "%.12s", digest ? digest : "");
        size_format_human((uint64_t)size, sz, sizeof(sz));
        cli_processor(size, vram, proc, sizeof(proc));
        snprintf(ctx, sizeof(ctx), "%lld",
                 (long long)json_integer_value(json_object_get(m, "context_length")));
        int64_t exp = json_time(m, "expires_at");
        if (exp != TIME_ZERO && exp < now)
            snprintf(until, sizeof(until), "Stopping...");
        else
            time_format_relative(exp, now, until, sizeof(until));
        const char *row[6] = {name, id, sz, proc, ctx, until};
        cli_table_add(&t, row);
    }
    print_list(&t);
    json_decref(resp);
    return 0;
}

int cli_cmd_cp(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    struct err e = {0};
    int rc = client_copy(c, a->pos[0], a->pos[1], &e);
    client_free(c);
    if (rc < 0)
        return cli_fail_err(&e);
    printf("copied '%s' to '%s'\n", a->pos[0], a->pos[1]);
    return 0;
}

// Unloads model: /api/generate with keep_alive 0 and no prompt.
static int unload(struct client *c, const char *model, struct err *e)
{
    json_t *req = json_pack("{s:s,s:i}", "model", model, "keep_alive", 0);
    int rc = client_generate(c, req, NULL, NULL, e);
    json_decref(req);
    return rc;
}

int cli_cmd_stop(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    struct err e = {0};
    json_t *req = json_pack("{s:s}", "model", a->pos[0]), *show = NULL;
    int rc = client_show(c, req, &show, &e);
    json_decref(req);
    json_decref(show);
    if (rc == ERR_NOT_FOUND) {
        client_free(c);
        return cli_fail("couldn't find model \"%s\" to stop", a->pos[0]);
    }
    if (rc == 0)
        rc = unload(c, a->pos[0], &e);
    client_free(c);
    return rc < 0 ? cli_fail_err(&e) : 0;
}

int cli_cmd_rm(struct cli_args *a)
{
    struct client *c = cli_connect();
    if (!c)
        return 1;
    int status = 0;
    for (int i = 0; i < a->n_pos; i++) {
        struct err e = {0};
        int rc = unload(c, a->pos[i], &e);
        if (rc < 0 && rc != ERR_NOT_FOUND && !strstr(e.msg, "not found"))
            fprintf(stderr, "Warning: unable to stop model '%s'\n", a->pos[i]);
        err_clear(&e);
        if (client_delete(c, a->pos[i], &e) < 0) {
            status = cli_fail_err(&e);
            break;
        }
        printf("deleted '%s'\n", a->pos[i]);
    }
    client_free(c);
    return status;
}

// ---------------------------------------------------------------------------
// show.

int cli_cmd_show(struct cli_args *a)
{
    static const char *const selectors[] = {"license", "modelfile", "parameters", "system",
                                            "template"};
    const char *which = NULL;
    int n_sel = 0;
    for (int i = 0; i < 5; i++)
        if (cli_flag(a, selectors[i])) {
            which = selectors[i];
            n_sel++;
        }
    if (n_sel > 1)
        return cli_fail("only one of '--license', '--modelfile', '--parameters', '--system', or "
                        "'--template' can be specified");
    struct client *c = cli_connect();
    if (!c)
        return 1;
    bool verbose = cli_flag(a, "verbose") != NULL;
    struct err e = {0};
    json_t *req = json_pack("{s:s}", "model", a->pos[0]), *show = NULL;
    if (verbose)
        json_object_set_new(req, "verbose", json_true());
    int rc = client_show(c, req, &show, &e);
    json_decref(req);
    client_free(c);
    if (rc < 0)
        return cli_fail_err(&e);
    if (which) {
        const char *v = json_string_value(json_object_get(show, which));
        bool newline = strcmp(which, "system") != 0 && strcmp(which, "template") != 0;
        printf("%s%s", v ? v : "", newline ? "\n" : "");
    } else {
        struct buf out;
        buf_init(&out, 0);
        cli_show_report(show, verbose, &out);
        fwrite(out.data, 1, out.len, stdout);
        buf_deinit(&out);
    }
    json_decref(show);
    return 0;
}

// ---------------------------------------------------------------------------
// create (cli.md §3.2, modelfile.md §3).

struct local_file {
    char *path;  // absolute
    char *key;   // name in the request
    char digest[80];
};

// Resolves a FROM/ADAPTER argument to an absolute path (modelfile.md §1.5).
static char *resolve_path(const char *arg, const char *base_dir)
{
    if (arg[0] == '/' || arg[0] == '\\')
        return xstrdup(arg);
    if (arg[0] == '~') {
        const char *rest = arg + 1;
        const char *home = NULL;
        if (*rest == '/' || *rest == '\0') {
            home = env_home_dir();
        } else {
            size_t len = strcspn(rest, "/");
            char user[256];
            snprintf(user, sizeof(user), "%.*s", (int)len, rest);
            struct passwd *pw = getpwnam(user);
            if (pw)
                home = pw->pw_dir;
            rest += len;
        }
        if (home)
            return xasprintf("%s%s", home, rest);
    }
    char *p = xasprintf("%s/%s", base_dir, arg);
    char *real = realpath(p, NULL);
    if (real) {
        free(p);
        return real;
    }
    return p;
}

static int add_file(struct local_file **files, size_t *n, const char *path)
{
    *files = xrealloc(*files, (*n + 1) * sizeof(**files));
    struct local_file *f = &(*files)[(*n)++];
    memset(f, 0, sizeof(*f));
    f->path = xstrdup(path);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The files of a directory FROM or ADAPTER, as Ollama's client picks them
// (modelfile.md §1): its model*.safetensors (consolidated*, PEFT's
// adapter_model / adapters) with the *.json, chat_template.jinja and
// tokenizer.model beside them (a Hugging Face folder, converted by the
// server), else its *.gguf files.
static bool hf_weight(const char *n)
{
    return cstr_ends_with(n, ".safetensors") &&
           (cstr_starts_with(n, "model") || cstr_starts_with(n, "consolidated") ||
            strcmp(n, "adapter_model.safetensors") == 0 || strcmp(n, "adapters.safetensors") == 0);
}

static bool hf_side_file(const char *n)
{
    return cstr_ends_with(n, ".json") || strcmp(n, "tokenizer.model") == 0 ||
           strcmp(n, "chat_template.jinja") == 0 || strcmp(n, "vocab.txt") == 0;
}

// sentence-transformers' pooling folders ("1_Pooling"), whose config.json
// gives an embedding model its pooling.
static bool pooling_dir(const char *n)
{
    return cstr_ends_with(n, "_Pooling");
}

static bool gguf_file(const char *n)
{
    return cstr_ends_with(n, ".gguf");
}

// Names in dir matching keep (sorted); NULL-free count in *n_out.
static char **dir_names(const char *dir, bool (*keep)(const char *), size_t *n_out)
{
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' && keep(de->d_name)) {
            names = xrealloc(names, (n + 1) * sizeof(char *));
            names[n++] = xstrdup(de->d_name);
        }
    if (d)
        closedir(d);
    if (n)
        qsort(names, n, sizeof(char *), name_cmp);
    *n_out = n;
    return names;
}

static void add_names(struct local_file **files, size_t *n, const char *dir, char **names,
                      size_t n_names)
{
    for (size_t i = 0; i < n_names; i++) {
        char *p = xasprintf("%s/%s", dir, names[i]);
        add_file(files, n, p);
        free(p);
        free(names[i]);
    }
    free(names);
}

static int add_dir(struct local_file **files, size_t *n, const char *dir, struct err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return err_set(e, ERR_IO, "open %s: %s", dir, strerror(errno));
    closedir(d);
    size_t n_st, n_side;
    char **st = dir_names(dir, hf_weight, &n_st);
    if (n_st) {
        char **side = dir_names(dir, hf_side_file, &n_side);
        add_names(files, n, dir, st, n_st);
        add_names(files, n, dir, side, n_side);
        char **pool = dir_names(dir, pooling_dir, &n_side);
        for (size_t i = 0; i < n_side; i++) {
            char *p = xasprintf("%s/%s/config.json", dir, pool[i]);
            if (access(p, R_OK) == 0)
                add_file(files, n, p);
            free(p);
            free(pool[i]);
        }
        free(pool);
        return 0;
    }
    free(st);
    char **gg = dir_names(dir, gguf_file, &n_st);
    if (n_st == 0) {
        free(gg);
        return err_set(e, ERR_NOT_FOUND, "no Modelfile or safetensors files found");
    }
    add_names(files, n, dir, gg, n_st);
    return 0;
}

// Request keys: the base name for one file, else paths relative to the
// files' common parent directory.
static void set_keys(struct local_file *files, size_t n)
{
    if (n == 0)
        return;
    size_t common = strlen(files[0].path);
    for (size_t i = 1; i < n; i++) {
        size_t k = 0;
        while (k < common && files[i].path[k] == files[0].path[k])
            k++;
        common = k;
    }
    // Back up to a directory boundary.
    while (common > 0 && files[0].path[common - 1] != '/')
        common--;
    for (size_t i = 0; i < n; i++) {
        if (n == 1) {
            const char *slash = strrchr(files[i].path, '/');
            files[i].key = xstrdup(slash ? slash + 1 : files[i].path);
        } else {
            files[i].key = xstrdup(files[i].path + common);
        }
    }
}

struct upload_ctx {
    struct cli_progress *p;
    int idx;
    char digest[80];
    int last_pct;
};

static void on_upload(void *ctx, uint64_t sent, uint64_t total)
{
    struct upload_ctx *u = ctx;
    int pct = total ? (int)(100 * sent / total) : 100;
    if (pct == u->last_pct)
        return;
    u->last_pct = pct;
    char msg[160];
    snprintf(msg, sizeof(msg), "copying file %s %d%%", u->digest, pct);
    cli_progress_spinner_set(u->p, u->idx, msg);
}

// Hashes and uploads one file unless the server has it.
static int upload_file(struct client *c, struct cli_progress *p, struct local_file *f,
                       struct err *e)
{
    char hex[DIGEST_HEX_LEN + 1];
    uint64_t size = 0;
    int rc = sha256_file(f->path, hex, &size, e);
    if (rc < 0)
        return rc;
    snprintf(f->digest, sizeof(f->digest), "sha256:%s", hex);
    struct upload_ctx u = {.p = p, .last_pct = -1};
    snprintf(u.digest, sizeof(u.digest), "%s", f->digest);
    char msg[160];
    snprintf(msg, sizeof(msg), "copying file %s 0%%", f->digest);
    u.idx = cli_progress_spinner(p, msg);
    bool exists = false;
    rc = client_blob_exists(c, f->digest, &exists, e);
    if (rc == 0 && !exists)
        rc = client_blob_upload(c, f->digest, f->path, on_upload, &u, e);
    if (rc == 0) {
        snprintf(msg, sizeof(msg), "copying file %s 100%%", f->digest);
        cli_progress_spinner_set(p, u.idx, msg);
        cli_progress_spinner_stop(p, u.idx);
    }
    return rc;
}

struct upload_job {
    struct client *c;
    struct cli_progress *p;
    struct local_file *f;
    struct err e;
    int rc;
};

static void *upload_main(void *arg)
{
    struct upload_job *j = arg;
    j->rc = upload_file(j->c, j->p, j->f, &j->e);
    return NULL;
}

// Hashes and uploads every file, about one at a time per CPU.
static int upload_all(struct client *c, struct cli_progress *p, struct local_file **list, size_t n,
                      struct err *e)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t width = cpus > 0 ? (size_t)cpus : 1;
    struct upload_job *jobs = xcalloc(n ? n : 1, sizeof(*jobs));
    pthread_t *threads = xcalloc(n ? n : 1, sizeof(*threads));
    int rc = 0;
    for (size_t start = 0; start < n; start += width) {
        size_t end = start + width < n ? start + width : n;
        for (size_t i = start; i < end; i++) {
            jobs[i] = (struct upload_job){.c = c, .p = p, .f = list[i]};
            if (pthread_create(&threads[i], NULL, upload_main, &jobs[i]) != 0)
                upload_main(&jobs[i]), threads[i] = 0;
        }
        for (size_t i = start; i < end; i++)
            if (threads[i])
                pthread_join(threads[i], NULL);
        for (size_t i = start; i < end && rc == 0; i++)
            if (jobs[i].rc < 0) {
                rc = jobs[i].rc;
                err_set(e, jobs[i].e.code, "%s", jobs[i].e.msg);
            }
        if (rc < 0)
            break;
    }
    free(jobs);
    free(threads);
    return rc;
}

static void free_files(struct local_file *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].key);
    }
    free(files);
}

// The local files a Modelfile's FROM, ADAPTER and DRAFT lines name, and the
// model name of the last FROM that is not a path.
struct create_files {
    struct local_file *files, *adapters, *drafts;
    size_t n_files, n_adapters, n_drafts;
    const char *from_name;
};

// The Modelfile's text and the folder its relative paths start from. With no
// -f and no ./Modelfile, the current folder is the model ("FROM ."). Returns
// -1 after printing why the file could not be read.
static int read_modelfile(const char *file, bool explicit_file, struct buf *text, char **base_dir)
{
    struct err e = {0};
    if (!explicit_file && !fs_exists(file)) {
        buf_append_str(text, "FROM .\n");
        *base_dir = getcwd(NULL, 0);
        return 0;
    }
    if (fs_read_all(file, 64u << 20, text, &e) < 0) {
        if (!fs_exists(file))
            cli_fail("open %s: no such file or directory", file);
        else
            cli_fail_err(&e);
        return -1;
    }
    char *dup = xstrdup(file);
    char *dir = realpath(dirname(dup), NULL);
    *base_dir = dir ? dir : xstrdup(".");
    free(dup);
    return 0;
}

static void warn_deprecated(const struct store_modelfile *mf)
{
    for (size_t i = 0; i < mf->n; i++)
        if (strcmp(mf->cmds[i].name, "parameter") == 0 && store_param_deprecated(mf->cmds[i].key))
            fprintf(stderr, "warning: parameter %s is deprecated\n", mf->cmds[i].key);
}

// True when a and b name the same existing file or folder.
static bool same_local_path(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

// A DRAFT may not be one of the FROM files (Ollama's rule).
static int check_draft_paths(const struct create_files *cf, struct err *e)
{
    for (size_t i = 0; i < cf->n_drafts; i++)
        for (size_t j = 0; j < cf->n_files; j++)
            if (same_local_path(cf->drafts[i].path, cf->files[j].path))
                return err_set(e, ERR_INVALID,
                               "DRAFT must not reference the same local path as FROM: %s",
                               cf->drafts[i].path);
    return 0;
}

// FROM paths that exist become files; otherwise the last FROM is a name.
// An ADAPTER or DRAFT must exist, and the last one of each wins.
static int gather_files(struct create_files *cf, const struct store_modelfile *mf,
                        const char *base_dir, struct err *e)
{
    for (size_t i = 0; i < mf->n; i++) {
        const struct store_mf_command *cmd = &mf->cmds[i];
        bool is_from = strcmp(cmd->name, "from") == 0;
        bool is_adapter = strcmp(cmd->name, "adapter") == 0;
        bool is_draft = strcmp(cmd->name, "draft") == 0;
        if (!is_from && !is_adapter && !is_draft)
            continue;
        struct local_file **list = is_from ? &cf->files : is_draft ? &cf->drafts : &cf->adapters;
        size_t *n = is_from ? &cf->n_files : is_draft ? &cf->n_drafts : &cf->n_adapters;
        char *path = resolve_path(cmd->args, base_dir);
        struct stat st;
        int rc = 0;
        if (stat(path, &st) == 0) {
            if (!is_from) {
                free_files(*list, *n);
                *list = NULL;
                *n = 0;
            }
            rc = S_ISDIR(st.st_mode) ? add_dir(list, n, path, e) : add_file(list, n, path);
        } else if (is_from) {
            cf->from_name = cmd->args;
        } else {
            rc = err_set(e, ERR_NOT_FOUND, "stat %s: no such file or directory", path);
        }
        free(path);
        if (rc < 0)
            return rc;
    }
    return check_draft_paths(cf, e);
}

// Names every file by its key and uploads the model's files, then the
// adapters', then the draft model's.
static int upload_files(struct client *c, struct cli_progress *p, struct create_files *cf,
                        struct err *e)
{
    set_keys(cf->files, cf->n_files);
    set_keys(cf->adapters, cf->n_adapters);
    set_keys(cf->drafts, cf->n_drafts);
    size_t n = cf->n_files + cf->n_adapters + cf->n_drafts;
    struct local_file **all = xcalloc(n + 1, sizeof(*all));
    for (size_t i = 0; i < n; i++) {
        size_t k = i;
        if (k < cf->n_files) {
            all[i] = &cf->files[k];
            continue;
        }
        k -= cf->n_files;
        all[i] = k < cf->n_adapters ? &cf->adapters[k] : &cf->drafts[k - cf->n_adapters];
    }
    int rc = upload_all(c, p, all, n, e);
    free(all);
    return rc;
}

// {key: digest} for uploaded files.
static json_t *digest_map(const struct local_file *files, size_t n)
{
    json_t *m = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(m, files[i].key, json_string(files[i].digest));
    return m;
}

// The create request: the Modelfile's fields, with FROM replaced by the
// uploaded files (or the base model's name), the adapters and the draft
// model added.
static void fill_request(json_t *req, const char *name, const struct create_files *cf,
                         const char *quant, const char *draft_quant)
{
    json_object_set_new(req, "model", json_string(name));
    json_object_del(req, "from");
    if (cf->n_files)
        json_object_set_new(req, "files", digest_map(cf->files, cf->n_files));
    else if (cf->from_name)
        json_object_set_new(req, "from", json_string(cf->from_name));
    if (cf->n_adapters)
        json_object_set_new(req, "adapters", digest_map(cf->adapters, cf->n_adapters));
    if (quant && *quant)
        json_object_set_new(req, "quantize", json_string(quant));
    if (cf->n_drafts)
        json_object_set_new(req, "draft_files", digest_map(cf->drafts, cf->n_drafts));
    if (draft_quant && *draft_quant)
        json_object_set_new(req, "draft_quantize", json_string(draft_quant));
}

int cli_cmd_create(struct cli_args *a)
{
    const char *name = a->pos[0];
    if (!store_name_valid(name))
        return cli_fail("invalid model name: %s", name);
    const char *file = cli_flag(a, "file");
    bool explicit_file = file != NULL;
    if (!file)
        file = "Modelfile";
    struct err e = {0};
    struct buf text;
    buf_init(&text, 64u << 20);
    char *base_dir = NULL;
    int status = 1;
    struct create_files cf = {0};
    json_t *req = NULL;
    struct store_modelfile mf = {0};
    struct client *c = NULL;
    struct cli_progress *p = NULL;

    if (read_modelfile(file, explicit_file, &text, &base_dir) < 0)
        goto out;
    if (store_modelfile_parse(text.data, text.len, &mf, &e) < 0 ||
        store_modelfile_to_request(&mf, &req, &e) < 0) {
        cli_fail_err(&e);
        goto out;
    }
    warn_deprecated(&mf);
    c = cli_connect();
    if (!c)
        goto out;
    p = cli_progress_new(stderr, stderr_tty());
    int gather = cli_progress_spinner(p, "gathering model components");
    if (gather_files(&cf, &mf, base_dir, &e) < 0) {
        cli_progress_stop(p);
        cli_fail_err(&e);
        goto out;
    }
    cli_progress_spinner_stop(p, gather);
    const char *draft_quant = cli_flag(a, "draft-quantize");
    if (draft_quant && *draft_quant && cf.n_drafts == 0) {
        cli_progress_stop(p);
        cli_fail("--draft-quantize requires a DRAFT model");
        goto out;
    }
    if (upload_files(c, p, &cf, &e) < 0) {
        cli_progress_stop(p);
        cli_fail_err(&e);
        goto out;
    }
    fill_request(req, name, &cf, cli_flag(a, "quantize"), draft_quant);
    struct progress_ctx pc = {.p = p, .mode = MODE_CREATE, .spinner = -1};
    int rc = client_create(c, req, on_progress, &pc, &e);
    cli_progress_stop(p);
    if (rc < 0) {
        cli_fail_err(&e);
        goto out;
    }
    status = 0;
out:
    cli_progress_free(p);
    client_free(c);
    store_modelfile_deinit(&mf);
    json_decref(req);
    free_files(cf.files, cf.n_files);
    free_files(cf.adapters, cf.n_adapters);
    free_files(cf.drafts, cf.n_drafts);
    free(base_dir);
    buf_deinit(&text);
    return status;
}

int cli_cmd_no_cloud(struct cli_args *a)
{
    (void)a;
    return cli_fail("ollama cloud is disabled: this build has no ollama.com account support");
}

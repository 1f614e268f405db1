// Backup and restore of the files `ollama launch` writes. Under
// ~/.ollama/backup/<integration>/ each file gets:
//   <name>.orig    the user's bytes before Ollama first wrote it (kept until
//                  --restore), or <name>.absent when there was no file;
//   <name>.<unix>  a copy of what each overwrite replaced, the last 5 kept
//                  (as 0.33's fileutil.WriteWithBackup).
// Writes are atomic (temp file, fsync, rename); an unchanged file is not
// rewritten.
#include "cli/launch.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (16u << 20)
#define BACKUPS_KEPT     5

// $HERMES_HOME/x: Hermes's home, ~/.hermes unless set.
static char *hermes_dir(const char *home)
{
    const char *h = getenv("HERMES_HOME");
    return h && *h ? xstrdup(h) : xasprintf("%s/.hermes", home);
}

// $OMP_AGENT/x: OMP's agent directory as 0.33's ompAgentDir finds it:
// PI_CODING_AGENT_DIR, else PI_CONFIG_DIR/agent (relative to home unless
// absolute), else ~/.omp/agent.
static char *omp_agent_dir(const char *home)
{
    const char *dir = getenv("PI_CODING_AGENT_DIR");
    if (dir && *dir)
        return xstrdup(dir);
    const char *cfg = getenv("PI_CONFIG_DIR");
    if (!cfg || !*cfg)
        cfg = ".omp";
    return cfg[0] == '/' ? xasprintf("%s/agent", cfg) : xasprintf("%s/%s/agent", home, cfg);
}

// Path prefixes that name a directory a tool lets its user move.
static const struct {
    const char *prefix;
    char *(*dir)(const char *home);
} path_vars[] = {
    {"$HERMES_HOME/", hermes_dir},
    {"$OMP_AGENT/", omp_agent_dir},
};

char *launch_file_path(const struct launch_file *f, const char *home)
{
    for (size_t i = 0; i < sizeof(path_vars) / sizeof(path_vars[0]); i++) {
        size_t n = strlen(path_vars[i].prefix);
        if (strncmp(f->path, path_vars[i].prefix, n) == 0) {
            char *dir = path_vars[i].dir(home);
            char *p = xasprintf("%s/%s", dir, f->path + n);
            free(dir);
            return p;
        }
    }
    return xasprintf("%s/%s", home, f->path);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int mkdir_parent(const char *path, struct err *e)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    int rc = 0;
    if (slash && slash != dir) {
        *slash = '\0';
        rc = fs_mkdir_p(dir, e);
    }
    free(dir);
    return rc;
}

// Writes data to path with the given permission bits.
static int write_with_mode(const char *path, const struct buf *data, mode_t mode, struct err *e)
{
    int rc = fs_write_atomic(path, data->data ? data->data : "", data->len, e);
    if (rc == 0 && chmod(path, mode & 07777) != 0)
        rc = err_set(e, ERR_IO, "chmod %s: %s", path, strerror(errno));
    return rc;
}

// Drops the oldest "<name>.<digits>" copies in dir past BACKUPS_KEPT.
static void prune_backups(const char *dir, const char *name)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    long long stamps[64];
    size_t n = 0, nlen = strlen(name);
    for (struct dirent *de; (de = readdir(d)) && n < 64;) {
        const char *s = de->d_name;
        if (strncmp(s, name, nlen) != 0 || s[nlen] != '.' || !s[nlen + 1] ||
            strspn(s + nlen + 1, "0123456789") != strlen(s + nlen + 1))
            continue;
        stamps[n++] = atoll(s + nlen + 1);
    }
    closedir(d);
    while (n > BACKUPS_KEPT) {
        size_t oldest = 0;
        for (size_t i = 1; i < n; i++)
            if (stamps[i] < stamps[oldest])
                oldest = i;
        char *p = xasprintf("%s/%s.%lld", dir, name, stamps[oldest]);
        unlink(p);
        free(p);
        stamps[oldest] = stamps[--n];
    }
}

// Keeps what the user had at path before Ollama replaces it (old is NULL
// when there was no file).
static int backup_before_write(const char *dir, const char *path, const struct buf *old,
                               mode_t mode, struct err *e)
{
    const char *name = base_name(path);
    char *orig = xasprintf("%s/%s.orig", dir, name);
    char *absent = xasprintf("%s/%s.absent", dir, name);
    int rc = fs_mkdir_p(dir, e);
    if (rc == 0 && !fs_exists(orig) && !fs_exists(absent)) {
        struct buf none;
        buf_init(&none, 0);
        rc = old ? write_with_mode(orig, old, mode, e) : write_with_mode(absent, &none, 0644, e);
        buf_deinit(&none);
    }
    if (rc == 0 && old) {
        char *copy = xasprintf("%s/%s.%lld", dir, name, (long long)time(NULL));
        rc = write_with_mode(copy, old, mode, e);
        free(copy);
        prune_backups(dir, name);
    }
    free(orig);
    free(absent);
    return rc;
}

// Reads path into out; *exists false (and 0 returned) when there is no file.
static int read_existing(const char *path, struct buf *out, bool *exists, mode_t *mode,
                         struct err *e)
{
    struct stat st;
    *exists = stat(path, &st) == 0;
    if (!*exists)
        return errno == ENOENT ? 0 : err_set(e, ERR_IO, "%s: %s", path, strerror(errno));
    *mode = st.st_mode;
    return fs_read_all(path, CONFIG_MAX_BYTES, out, e);
}

// The file 0600 and its directory 0700.
static int make_private(const char *path, struct err *e)
{
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = '\0';
    int rc = 0;
    if (chmod(dir, 0700) != 0 || chmod(path, 0600) != 0)
        rc = err_set(e, ERR_IO, "chmod %s: %s", path, strerror(errno));
    free(dir);
    return rc;
}

static int write_one(const char *integration, const struct launch_file *f,
                     const struct launch_target *t, FILE *log, struct err *e)
{
    char *path = launch_file_path(f, t->home);
    char *dir = xasprintf("%s/.ollama/backup/%s", t->home, integration);
    struct buf old, data;
    buf_init(&old, CONFIG_MAX_BYTES);
    buf_init(&data, CONFIG_MAX_BYTES);
    bool exists = false;
    mode_t mode = 0644;
    int rc = read_existing(path, &old, &exists, &mode, e);
    if (rc == 0) {
        rc = f->write(t, exists ? &old : NULL, &data, e);
        if (rc < 0)
            err_prefix(e, "failed to parse config: %s", path);
    }
    bool same = exists && old.len == data.len && memcmp(old.data, data.data, old.len) == 0;
    if (rc == 0 && !same) {
        rc = backup_before_write(dir, path, exists ? &old : NULL, mode, e);
        if (rc == 0)
            rc = mkdir_parent(path, e);
        if (rc == 0)
            rc = write_with_mode(path, &data, exists ? mode : 0644, e);
    }
    // Files launch keeps for a tool (~/.ollama/launch/<tool>/) may carry a
    // key variable's name and the user's settings: private, as 0.33 keeps them.
    if (rc == 0 && strncmp(f->path, ".ollama/launch/", 15) == 0)
        rc = make_private(path, e);
    if (rc == 0 && log)
        fprintf(log, "%s %s\n", same ? "Unchanged" : "Wrote", path);
    buf_deinit(&old);
    buf_deinit(&data);
    free(dir);
    free(path);
    return rc;
}

int launch_write_files(const char *integration, const struct launch_file *files,
                       const struct launch_target *t, FILE *log, struct err *e)
{
    for (const struct launch_file *f = files; f && f->path; f++) {
        int rc = write_one(integration, f, t, log, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// Restores one file; 1 when something was put back, 0 when there was no
// backup of it.
static int restore_one(const char *integration, const struct launch_file *f, const char *home,
                       FILE *log, struct err *e)
{
    char *path = launch_file_path(f, home);
    char *orig = xasprintf("%s/.ollama/backup/%s/%s.orig", home, integration, base_name(path));
    char *absent = xasprintf("%s/.ollama/backup/%s/%s.absent", home, integration, base_name(path));
    struct buf data;
    buf_init(&data, CONFIG_MAX_BYTES);
    struct stat st;
    int rc = 0;
    if (stat(orig, &st) == 0) {
        rc = fs_read_all(orig, CONFIG_MAX_BYTES, &data, e);
        if (rc == 0)
            rc = write_with_mode(path, &data, st.st_mode, e);
        if (rc == 0 && unlink(orig) == 0)
            rc = 1;
        if (rc == 1 && log)
            fprintf(log, "Restored %s\n", path);
    } else if (fs_exists(absent)) {
        if (unlink(path) != 0 && errno != ENOENT)
            rc = err_set(e, ERR_IO, "remove %s: %s", path, strerror(errno));
        else if (unlink(absent) == 0)
            rc = 1;
        if (rc == 1 && log)
            fprintf(log, "Removed %s (there was none before)\n", path);
    }
    buf_deinit(&data);
    free(absent);
    free(orig);
    free(path);
    return rc;
}

int launch_restore_files(const char *integration, const struct launch_file *files, const char *home,
                         FILE *log, struct err *e)
{
    int n = 0;
    for (const struct launch_file *f = files; f && f->path; f++) {
        int rc = restore_one(integration, f, home, log, e);
        if (rc < 0)
            return rc;
        n += rc;
    }
    return n;
}

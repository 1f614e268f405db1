// File-system helpers for data that must never be lost or escape its root:
// mkdir -p, atomic writes (temp file in the same directory, fsync, rename,
// fsync the directory), capped whole-file reads, and path joins that refuse
// anything that could climb out of the store.
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int errno_code(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return ERR_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
        return ERR_PERMISSION;
    case EEXIST:
        return ERR_EXISTS;
    case ENOMEM:
        return ERR_NOMEM;
    case ENAMETOOLONG:
        return ERR_INVALID;
    default:
        return ERR_IO;
    }
}

int fs_mkdir_p(const char *path, struct err *e)
{
    if (!path || !*path)
        return err_set(e, ERR_INVALID, "mkdir: empty path");
    size_t n = strlen(path);
    char *p = xstrndup(path, n);
    int rc = 0;
    // Create each prefix ending before a '/', then the whole path.
    for (size_t i = 1; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        if (i < n && p[i - 1] == '/')
            continue;  // "a//b"
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int err = errno;
            if (err == EACCES)
                rc =
                    err_set(e, ERR_PERMISSION,
                            "mkdir %s: permission denied: ensure path elements are traversable", p);
            else
                rc = err_set(e, errno_code(err), "mkdir %s: %s", p, strerror(err));
            p[i] = saved;
            break;
        }
        p[i] = saved;
    }
    if (rc == 0) {
        struct stat st;
        if (stat(path, &st) != 0)
            rc = err_set(e, errno_code(errno), "mkdir %s: %s", path, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
            rc = err_set(e, ERR_EXISTS, "mkdir %s: not a directory", path);
    }
    free(p);
    return rc;
}

int fs_fsync_dir(const char *dir, struct err *e)
{
    int fd = open(dir && *dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, errno_code(errno), "open %s: %s", dir, strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        rc = err_set(e, ERR_IO, "fsync %s: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

static int write_full(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int fs_write_atomic(const char *path, const void *data, size_t n, struct err *e)
{
    if (!path || !*path)
        return err_set(e, ERR_INVALID, "write: empty path");
    const char *slash = strrchr(path, '/');
    char *dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : xstrdup(".");
    char *tmp = xasprintf("%s.tmp-XXXXXX", path);
    int rc = 0;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        rc = err_set(e, errno_code(errno), "create %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (fchmod(fd, 0644) != 0 || write_full(fd, data, n) != 0 || fsync(fd) != 0) {
        rc = err_set(e, errno_code(errno), "write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    if (close(fd) != 0) {
        rc = err_set(e, ERR_IO, "close %s: %s", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        rc = err_set(e, errno_code(errno), "rename %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = fs_fsync_dir(dir, e);
out:
    free(tmp);
    free(dir);
    return rc;
}

int fs_read_all(const char *path, size_t max_bytes, struct buf *out, struct err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, errno_code(errno), "open %s: %s", path, strerror(errno));
    int rc = 0;
    size_t total = 0;
    char chunk[65536];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = err_set(e, errno_code(errno), "read %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        if ((size_t)r > max_bytes - total) {
            rc = err_set(e, ERR_TOO_LARGE, "read %s: file larger than %zu bytes", path, max_bytes);
            break;
        }
        total += (size_t)r;
        rc = buf_append(out, chunk, (size_t)r);
        if (rc < 0) {
            err_set(e, rc, "read %s: %s", path, err_str(rc));
            break;
        }
    }
    close(fd);
    return rc;
}

bool fs_exists(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0;
}

static int join(const char *a, const char *b, char *out, size_t n, struct err *e)
{
    size_t la = strlen(a);
    bool sep = la && a[la - 1] != '/' && *b;
    int w = snprintf(out, n, "%s%s%s", a, sep ? "/" : "", b);
    if (w < 0 || (size_t)w >= n)
        return err_set(e, ERR_TOO_LARGE, "path too long: %s/%s", a, b);
    return 0;
}

int path_join(const char *a, const char *b, char *out, size_t n, struct err *e)
{
    if (!a || !b || !out || !n)
        return err_set(e, ERR_INVALID, "path_join: missing argument");
    return join(a, b, out, n, e);
}

int path_join_under(const char *root, const char *rel, char *out, size_t n, struct err *e)
{
    if (!root || !*root)
        return err_set(e, ERR_INVALID, "path: empty root");
    if (!rel || !out || !n)
        return err_set(e, ERR_INVALID, "path: missing argument");
    if (rel[0] == '/')
        return err_set(e, ERR_INVALID, "path %s: absolute path not allowed", rel);
    // Every element must be a plain name: no "..", no backslash tricks.
    for (const char *p = rel; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return err_set(e, ERR_INVALID, "path %s: \"..\" not allowed", rel);
        if (memchr(p, '\\', len))
            return err_set(e, ERR_INVALID, "path %s: backslash not allowed", rel);
        p += len;
        if (*p == '/')
            p++;
    }
    return join(root, rel, out, n, e);
}

// Blobs (store.md §3): content-addressed files under blobs/, written to a
// temporary name, hashed while written, fsynced, and renamed only when the
// digest is known (and matches what the client promised).
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct store_blob_writer {
    struct store *s;
    int fd;
    char tmp_path[4096];
    char expected_hex[DIGEST_HEX_LEN + 1];  // "" when not checked
    struct sha256 hash;
    uint64_t size;
};

int store_blob_path(const struct store *s, const char *digest, char *out, size_t n_out,
                    struct err *e)
{
    char hex[DIGEST_HEX_LEN + 1];
    int rc = store_digest_parse(digest, hex, e);
    if (rc < 0)
        return rc;
    int w = snprintf(out, n_out, "%s/sha256-%s", s->blobs_dir, hex);
    if (w < 0 || (size_t)w >= n_out)
        return err_set(e, ERR_TOO_LARGE, "path too long");
    return 0;
}

bool store_blob_exists(const struct store *s, const char *digest)
{
    char path[4096];
    struct stat st;
    if (store_blob_path(s, digest, path, sizeof(path), NULL) < 0)
        return false;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void store_blob_touch(const struct store *s, const char *digest)
{
    char path[4096];
    if (store_blob_path(s, digest, path, sizeof(path), NULL) == 0)
        utimensat(AT_FDCWD, path, NULL, 0);
}

int store_blob_read(const struct store *s, const char *digest, size_t max_bytes, struct buf *out,
                    struct err *e)
{
    char path[4096];
    int rc = store_blob_path(s, digest, path, sizeof(path), e);
    if (rc < 0)
        return rc;
    return fs_read_all(path, max_bytes, out, e);
}

int store_blob_writer_open(struct store *s, const char *expected_digest,
                           struct store_blob_writer **out, struct err *e)
{
    char hex[DIGEST_HEX_LEN + 1] = "";
    if (expected_digest) {
        int rc = store_digest_parse(expected_digest, hex, e);
        if (rc < 0)
            return rc;
    }
    struct store_blob_writer *w = xcalloc(1, sizeof(*w));
    w->s = s;
    snprintf(w->expected_hex, sizeof(w->expected_hex), "%s", hex);
    // Not a valid digest name, so pruning removes it if we die (store.md §7).
    snprintf(w->tmp_path, sizeof(w->tmp_path), "%s/sha256-tmp-XXXXXX", s->blobs_dir);
    w->fd = mkostemp(w->tmp_path, O_CLOEXEC);
    if (w->fd < 0) {
        int rc = err_set(e, ERR_IO, "create blob: %s", strerror(errno));
        free(w);
        return rc;
    }
    fchmod(w->fd, 0644);
    sha256_init(&w->hash);
    *out = w;
    return 0;
}

int store_blob_writer_write(struct store_blob_writer *w, const void *p, size_t n, struct err *e)
{
    const char *c = p;
    sha256_update(&w->hash, p, n);
    w->size += n;
    while (n > 0) {
        ssize_t k = write(w->fd, c, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return err_set(e, ERR_IO, "write blob: %s", strerror(errno));
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

uint64_t store_blob_writer_size(const struct store_blob_writer *w)
{
    return w->size;
}

void store_blob_writer_abort(struct store_blob_writer *w)
{
    if (!w)
        return;
    sha256_abort(&w->hash);
    if (w->fd >= 0)
        close(w->fd);
    unlink(w->tmp_path);
    free(w);
}

int store_blob_writer_commit(struct store_blob_writer *w, char digest_out[STORE_DIGEST_LEN + 1],
                             bool *existed, struct err *e)
{
    char hex[DIGEST_HEX_LEN + 1], final_path[4096];
    int rc = 0;
    sha256_final(&w->hash, hex);
    w->hash.ctx = NULL;
    if (w->expected_hex[0] && !ascii_ieq(w->expected_hex, hex)) {
        rc = err_set(e, ERR_DIGEST, "digest mismatch, expected \"sha256:%s\", got \"sha256:%s\"",
                     w->expected_hex, hex);
        goto fail;
    }
    if (fsync(w->fd) < 0) {
        rc = err_set(e, ERR_IO, "fsync blob: %s", strerror(errno));
        goto fail;
    }
    if (close(w->fd) < 0) {
        w->fd = -1;
        rc = err_set(e, ERR_IO, "close blob: %s", strerror(errno));
        goto fail;
    }
    w->fd = -1;
    snprintf(final_path, sizeof(final_path), "%s/sha256-%s", w->s->blobs_dir, hex);
    struct stat st;
    bool had = stat(final_path, &st) == 0 && S_ISREG(st.st_mode);
    if (had) {
        unlink(w->tmp_path);
    } else if (rename(w->tmp_path, final_path) < 0) {
        rc = err_set(e, ERR_IO, "rename blob: %s", strerror(errno));
        goto fail;
    } else {
        fs_fsync_dir(w->s->blobs_dir, NULL);
    }
    utimensat(AT_FDCWD, final_path, NULL, 0);
    if (digest_out)
        digest_format(hex, digest_out);
    if (existed)
        *existed = had;
    free(w);
    return 0;
fail:
    if (w->fd >= 0)
        close(w->fd);
    unlink(w->tmp_path);
    free(w);
    return rc;
}

int store_blob_put(struct store *s, const void *p, size_t n, char digest_out[STORE_DIGEST_LEN + 1],
                   bool *existed, struct err *e)
{
    struct store_blob_writer *w;
    int rc = store_blob_writer_open(s, NULL, &w, e);
    if (rc < 0)
        return rc;
    rc = store_blob_writer_write(w, p, n, e);
    if (rc < 0) {
        store_blob_writer_abort(w);
        return rc;
    }
    return store_blob_writer_commit(w, digest_out, existed, e);
}

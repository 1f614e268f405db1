// A blob file filled by several streams at once (the parts of a download):
// receiving, writing and hashing run on different threads so that each
// byte costs one pass of each and none waits for another.
//
// Each stream copies its bytes into 4 KiB-aligned staging buffers. A writer
// thread puts full buffers on disk, with O_DIRECT where the file system
// takes it: page-cache writeback followed by fsync ran at a fifth of the
// disk's direct-write speed on the machines we measured (bench/README.md),
// so a buffered pull is disk-bound long before the network is. Only the
// unaligned edges of a stream (where a part starts, resumes or ends) go
// through the page cache. A hasher thread feeds SHA-256 in file order: from
// the buffers while they arrive in order (one fast stream, the common case),
// else by reading back the contiguous prefix that has landed.
//
// Lock order: a download's locks, then blobfile.mu. Hooks run unlocked.
#include "registry/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif

#define BF_ALIGN      4096u
#define BF_SPARE_BUFS 6           // buffers beyond one per stream
#define BF_READ_BYTES (4u << 20)  // read-back chunk of the hasher

struct reg_bf_buf {
    struct reg_bf_buf *next;  // in a queue or the free list
    struct reg_bf_buf *all_next;
    struct reg_blobstream *stream;
    uint64_t base;        // file offset of mem[0] (aligned)
    uint64_t start, end;  // the data: file bytes [start, end)
    int refs;             // queued for the writer and the hasher
    unsigned char *mem;
};

struct bf_queue {
    struct reg_bf_buf *head, *tail;
};

struct reg_blobfile {
    char path[4200];
    int fd;   // buffered: edges, read back, fsync
    int dfd;  // O_DIRECT, or -1 (writer thread only after open)
    uint64_t total;
    size_t buf_bytes;
    struct reg_blobfile_hooks hooks;
    pthread_mutex_t mu;
    pthread_cond_t cv;  // any change: buffer freed, queued or landed; failure; stop
    struct reg_bf_buf *free_list;
    size_t n_bufs, max_bufs;
    struct bf_queue wq, hq;  // to write, to hash
    bool stop;
    int rc;  // first failure; once set nothing more is written
    struct err err;
    struct sha256 sh;        // hasher thread only
    uint64_t hashed;         // bytes [0, hashed) hashed (written by the hasher, under mu)
    struct reg_bf_buf *all;  // every buffer, for close
    pthread_t writer, hasher;
    bool threads, hasher_joined;
};

static uint64_t round_down(uint64_t x)
{
    return x & ~(uint64_t)(BF_ALIGN - 1);
}

static uint64_t round_up(uint64_t x)
{
    return round_down(x + BF_ALIGN - 1);
}

static void queue_push(struct bf_queue *q, struct reg_bf_buf *b)
{
    b->next = NULL;
    if (q->tail)
        q->tail->next = b;
    else
        q->head = b;
    q->tail = b;
}

static struct reg_bf_buf *queue_pop(struct bf_queue *q)
{
    struct reg_bf_buf *b = q->head;
    if (b) {
        q->head = b->next;
        if (!q->head)
            q->tail = NULL;
    }
    return b;
}

// With mu held.
static void fail_locked(struct reg_blobfile *f, int rc, const struct err *e)
{
    if (f->rc == 0) {
        f->rc = rc;
        f->err = *e;
    }
    pthread_cond_broadcast(&f->cv);
}

// With mu held.
static void buf_unref(struct reg_blobfile *f, struct reg_bf_buf *b)
{
    if (--b->refs > 0)
        return;
    b->stream = NULL;
    b->next = f->free_list;
    f->free_list = b;
    pthread_cond_broadcast(&f->cv);
}

static int pwrite_all(int fd, const unsigned char *p, size_t n, uint64_t off, size_t *done)
{
    *done = 0;
    while (*done < n) {
        ssize_t w = pwrite(fd, p + *done, n - *done, (off_t)(off + *done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        *done += (size_t)w;
    }
    return 0;
}

// Writer thread: the aligned middle of the buffer directly, the edges (and
// everything, without O_DIRECT) through the page cache.
static int buf_write(struct reg_blobfile *f, const struct reg_bf_buf *b, struct err *e)
{
    uint64_t s = b->start, end = b->end, a0 = round_up(s), a1 = round_down(end);
    const unsigned char *at_s = b->mem + (s - b->base);
    size_t done = 0, ignored;
    int rc = 0;
    if (f->dfd >= 0 && a1 > a0) {
        rc = pwrite_all(f->dfd, b->mem + (a0 - b->base), (size_t)(a1 - a0), a0, &done);
        if (rc == -EINVAL) {
            // The file system took O_DIRECT at open but not for this write
            // (or a short write left an unaligned rest): the page cache it is.
            if (done == 0) {
                close(f->dfd);
                f->dfd = -1;
            }
            rc = 0;
        }
        // [a0, a0 + done) is on disk; the head and the rest are not.
        if (rc == 0)
            rc = pwrite_all(f->fd, at_s, (size_t)(a0 - s), s, &ignored);
        if (rc == 0)
            rc = pwrite_all(f->fd, b->mem + (a0 + done - b->base), (size_t)(end - a0 - done),
                            a0 + done, &ignored);
    } else {
        rc = pwrite_all(f->fd, at_s, (size_t)(end - s), s, &ignored);
    }
    return rc < 0 ? err_set(e, ERR_IO, "write %s: %s", f->path, strerror(-rc)) : 0;
}

static void *writer_main(void *arg)
{
    struct reg_blobfile *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        struct reg_bf_buf *b = queue_pop(&f->wq);
        if (!b) {
            if (f->stop)
                break;
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        bool write = f->rc == 0 && !f->stop;
        pthread_mutex_unlock(&f->mu);
        struct err e = {0};
        int rc = write ? buf_write(f, b, &e) : 0;
        if (write && rc == 0 && f->hooks.landed)
            f->hooks.landed(f->hooks.ctx, b->stream->tag, b->start, b->end - b->start);
        pthread_mutex_lock(&f->mu);
        if (rc < 0)
            fail_locked(f, rc, &e);
        b->stream->pending -= b->end - b->start;
        buf_unref(f, b);
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void *hasher_main(void *arg)
{
    struct reg_blobfile *f = arg;
    unsigned char *chunk = NULL;
    pthread_mutex_lock(&f->mu);
    while (!f->stop && f->rc == 0 && f->hashed < f->total) {
        struct reg_bf_buf *b = queue_pop(&f->hq);
        uint64_t pos = f->hashed;
        if (b) {
            // A buffer is hashed when it holds the next bytes; one that is
            // ahead is dropped and read back once it has landed.
            if (b->start <= pos && pos < b->end) {
                pthread_mutex_unlock(&f->mu);
                sha256_update(&f->sh, b->mem + (pos - b->base), (size_t)(b->end - pos));
                pthread_mutex_lock(&f->mu);
                f->hashed = b->end;
                pthread_cond_broadcast(&f->cv);
            }
            buf_unref(f, b);
            continue;
        }
        uint64_t front = f->hooks.frontier(f->hooks.ctx);
        if (front > f->total)
            front = f->total;
        if (front <= pos) {
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        pthread_mutex_unlock(&f->mu);
        size_t want = front - pos > BF_READ_BYTES ? BF_READ_BYTES : (size_t)(front - pos);
        if (!chunk)
            chunk = xmalloc(BF_READ_BYTES);
        ssize_t got = pread(f->fd, chunk, want, (off_t)pos);
        if (got > 0)
            sha256_update(&f->sh, chunk, (size_t)got);
        int saved_errno = errno;
        pthread_mutex_lock(&f->mu);
        if (got <= 0) {
            struct err e = {0};
            err_set(&e, ERR_IO, "read %s: %s", f->path,
                    got < 0 ? strerror(saved_errno) : "unexpected end of file");
            fail_locked(f, ERR_IO, &e);
            break;
        }
        f->hashed = pos + (uint64_t)got;
        pthread_cond_broadcast(&f->cv);
    }
    // Whatever is still queued is released unhashed.
    for (struct reg_bf_buf *b; (b = queue_pop(&f->hq));)
        buf_unref(f, b);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    free(chunk);
    return NULL;
}

// O_DIRECT only where it is a plain win: local block-device file systems.
// On NFS it makes every write synchronous with the server, on tmpfs it is
// a copy like any other, and other file systems vary.
static bool direct_io_suits(int fd)
{
#ifdef __linux__
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return false;
    switch ((unsigned long)sf.f_type) {
    case 0xEF53UL:      // ext2/3/4
    case 0x58465342UL:  // xfs
    case 0x9123683EUL:  // btrfs
    case 0xF2F52010UL:  // f2fs
        return true;
    default:
        return false;
    }
#else
    (void)fd;
    return false;
#endif
}

int reg_blobfile_open(struct reg_blobfile **out, const char *path, uint64_t total,
                      const struct reg_blobfile_hooks *hooks, bool direct, struct err *e)
{
    *out = NULL;
    struct reg_blobfile *f = xcalloc(1, sizeof(*f));
    snprintf(f->path, sizeof(f->path), "%s", path);
    f->total = total;
    f->hooks = *hooks;
    f->buf_bytes = REG_BLOBFILE_BUF_BYTES;
    f->max_bufs = BF_SPARE_BUFS;
    f->dfd = -1;
    f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int rc = err_set(e, ERR_IO, "open %s: %s", path, strerror(errno));
        free(f);
        return rc;
    }
    struct stat st;
    if (fstat(f->fd, &st) == 0 && (uint64_t)st.st_size != total &&
        ftruncate(f->fd, (off_t)total) < 0) {
        int rc = err_set(e, ERR_IO, "truncate %s: %s", path, strerror(errno));
        close(f->fd);
        free(f);
        return rc;
    }
#ifdef O_DIRECT
    if (direct && direct_io_suits(f->fd))
        f->dfd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);  // -1: not here
#else
    (void)direct;
#endif
    if (sha256_init(&f->sh) < 0) {
        reg_blobfile_close(f, false, NULL);
        return err_set(e, ERR_NOMEM, "sha256");
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    const char *failed = NULL;
    if (pthread_create(&f->writer, NULL, writer_main, f) != 0) {
        failed = "writer";
    } else if (pthread_create(&f->hasher, NULL, hasher_main, f) != 0) {
        failed = "hasher";
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->writer, NULL);
    }
    if (failed) {
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
        reg_blobfile_close(f, false, NULL);  // no threads: closes and frees
        return err_set(e, ERR_INTERNAL, "cannot start the blob %s", failed);
    }
    f->threads = true;
    *out = f;
    return 0;
}

bool reg_blobfile_direct(const struct reg_blobfile *f)
{
    return f->dfd >= 0;
}

void reg_blobstream_init(struct reg_blobstream *s, struct reg_blobfile *f, void *tag, uint64_t off)
{
    *s = (struct reg_blobstream){.f = f, .tag = tag, .next = off};
    pthread_mutex_lock(&f->mu);
    f->max_bufs++;
    pthread_mutex_unlock(&f->mu);
}

static void stream_submit(struct reg_blobstream *s)
{
    struct reg_blobfile *f = s->f;
    struct reg_bf_buf *b = s->cur;
    s->cur = NULL;
    pthread_mutex_lock(&f->mu);
    if (b->end == b->start || f->rc < 0) {
        b->refs = 1;
        buf_unref(f, b);
    } else {
        s->pending += b->end - b->start;
        b->refs = 2;
        queue_push(&f->wq, b);
        queue_push(&f->hq, b);
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
}

int reg_blobstream_put(struct reg_blobstream *s, const void *data, size_t n, struct err *e)
{
    struct reg_blobfile *f = s->f;
    const unsigned char *p = data;
    while (n > 0) {
        if (!s->cur) {
            pthread_mutex_lock(&f->mu);
            while (f->rc == 0 && !f->free_list && f->n_bufs >= f->max_bufs)
                pthread_cond_wait(&f->cv, &f->mu);
            if (f->rc < 0) {
                if (e)
                    *e = f->err;
                int rc = f->rc;
                pthread_mutex_unlock(&f->mu);
                return rc;
            }
            struct reg_bf_buf *b = f->free_list;
            if (b) {
                f->free_list = b->next;
            } else {
                unsigned char *mem = aligned_alloc(BF_ALIGN, f->buf_bytes);
                if (!mem) {
                    pthread_mutex_unlock(&f->mu);
                    return err_set(e, ERR_NOMEM, "out of memory for download buffers");
                }
                b = xcalloc(1, sizeof(*b));
                b->mem = mem;
                b->all_next = f->all;
                f->all = b;
                f->n_bufs++;
            }
            pthread_mutex_unlock(&f->mu);
            b->stream = s;
            b->base = round_down(s->next);
            b->start = b->end = s->next;
            s->cur = b;
        }
        struct reg_bf_buf *b = s->cur;
        uint64_t room = b->base + f->buf_bytes - b->end;
        size_t k = n < room ? n : (size_t)room;
        memcpy(b->mem + (b->end - b->base), p, k);
        b->end += k;
        s->next += k;
        p += k;
        n -= k;
        if (b->end == b->base + f->buf_bytes)
            stream_submit(s);
    }
    return 0;
}

int reg_blobstream_flush(struct reg_blobstream *s, struct err *e)
{
    struct reg_blobfile *f = s->f;
    if (s->cur)
        stream_submit(s);
    pthread_mutex_lock(&f->mu);
    while (s->pending > 0)
        pthread_cond_wait(&f->cv, &f->mu);
    int rc = f->rc;
    if (rc < 0 && e)
        *e = f->err;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void reg_blobstream_deinit(struct reg_blobstream *s)
{
    if (!s->f)
        return;
    reg_blobstream_flush(s, NULL);
    pthread_mutex_lock(&s->f->mu);
    s->f->max_bufs--;
    pthread_mutex_unlock(&s->f->mu);
    s->f = NULL;
}

int reg_blobfile_digest(struct reg_blobfile *f, char hex[DIGEST_HEX_LEN + 1], struct err *e)
{
    pthread_mutex_lock(&f->mu);
    if (f->rc == 0 && f->hooks.frontier(f->hooks.ctx) < f->total) {
        // Every stream has flushed: nothing more will land.
        struct err le = {0};
        err_set(&le, ERR_IO, "download of %s ended early", f->path);
        fail_locked(f, ERR_IO, &le);
    }
    while (f->rc == 0 && f->hashed < f->total)
        pthread_cond_wait(&f->cv, &f->mu);
    int rc = f->rc;
    if (rc < 0 && e)
        *e = f->err;
    pthread_mutex_unlock(&f->mu);
    if (rc < 0)
        return rc;
    pthread_join(f->hasher, NULL);  // it ends at total; the context is ours now
    f->hasher_joined = true;
    sha256_final(&f->sh, hex);
    f->sh.ctx = NULL;
    return 0;
}

int reg_blobfile_close(struct reg_blobfile *f, bool sync, struct err *e)
{
    if (!f)
        return 0;
    int rc = 0;
    if (f->threads) {
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->writer, NULL);
        if (!f->hasher_joined)
            pthread_join(f->hasher, NULL);
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
    }
    if (f->sh.ctx)
        sha256_abort(&f->sh);
    if (sync && f->rc == 0 && fsync(f->fd) < 0)
        rc = err_set(e, ERR_IO, "fsync %s: %s", f->path, strerror(errno));
    if (f->dfd >= 0)
        close(f->dfd);
    close(f->fd);
    for (struct reg_bf_buf *b = f->all, *next; b; b = next) {
        next = b->all_next;
        free(b->mem);
        free(b);
    }
    free(f);
    return rc;
}

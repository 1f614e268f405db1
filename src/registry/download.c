// Blob downloads (registry.md §5.2-5.6, store.md §8): shared by digest
// across concurrent pulls, planned as ranged parts written in place into
// blobs/sha256-<hex>-partial with one JSON sidecar per part, so a download
// cut at any point (kill -9, network loss) resumes without fetching finished
// bytes again. Parts run in parallel with retries, backoff and a stall
// watchdog; their bytes go through a blob file (blobfile.c) that writes
// and hashes on threads of its own, so the SHA-256 is ready when the last
// byte lands, and the file is renamed into place only when it matches.
//
// Lock order: registry.mu, then a download's own mu.
#include "registry/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DL_MAX_PARTS_INFLIGHT 16
#define DL_MAX_FAILURES       6
#define DL_SIDECAR_EVERY      (16u << 20)  // rewrite a sidecar mid-attempt this often
#define DL_MAX_PARTS          4096
#define DL_RAMP_INTERVAL_MS   500
#define DL_FAST_LINK_BPS      150e6  // one stream this fast needs no company

struct dl_part {
    int n;
    uint64_t off, size;
    _Atomic uint64_t completed;
    uint64_t saved;  // Completed last written to the sidecar
};

struct reg_download {
    struct reg_download *next;
    char digest[STORE_DIGEST_LEN + 1];
    char hex[DIGEST_HEX_LEN + 1];
    int refs;   // waiters + the worker (registry.mu)
    bool done;  // (registry.mu)
    int rc;
    struct err err;
    pthread_cond_t cv;  // with registry.mu: done
    _Atomic uint64_t total, completed;
    volatile int cancel;  // every waiter left (set once, read by the worker)
    // Worker inputs.
    struct reg_session sess;  // own copy (token duplicated)
    int64_t size_hint;
    // Worker state.
    char path[4096], partial[4200];
    struct reg_blobfile *bf;
    struct dl_part *parts;
    size_t n_parts;
    _Atomic size_t next_part;
    char data_url[4096];
    pthread_mutex_t mu;       // first error below
    pthread_cond_t parts_cv;  // with mu: a part thread ended
    int fail_rc;
    struct err fail_err;
    atomic_int stop;  // a fatal error: other parts give up
    atomic_int parts_done;
    atomic_int running;  // part threads alive
};

static void dl_free(struct reg_download *d)
{
    reg_session_deinit(&d->sess);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->parts_cv);
    free(d->parts);
    free(d);
}

uint64_t registry_part_size(uint64_t total, uint64_t min_bytes, uint64_t max_bytes)
{
    if (total == 0)
        return 0;
    uint64_t size = total / 16;
    if (size < min_bytes)
        size = min_bytes;
    if (size > max_bytes)
        size = max_bytes;
    return size ? size : 1;
}

// ---------------------------------------------------------------------------
// Sidecars: {"N":0,"Offset":0,"Size":100000000,"Completed":37748736}\n

static void sidecar_path(const struct reg_download *d, int n, char *out, size_t len)
{
    snprintf(out, len, "%s-%d", d->partial, n);
}

static int sidecar_write(struct reg_download *d, struct dl_part *p)
{
    char path[4300], line[160];
    sidecar_path(d, p->n, path, sizeof(path));
    uint64_t c = atomic_load(&p->completed);
    int len = snprintf(
        line, sizeof(line), "{\"N\":%d,\"Offset\":%llu,\"Size\":%llu,\"Completed\":%llu}\n", p->n,
        (unsigned long long)p->off, (unsigned long long)p->size, (unsigned long long)c);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, line, (size_t)len);
    int saved_errno = errno;
    close(fd);
    if (w != len)
        return -(saved_errno ? saved_errno : EIO);
    p->saved = c;
    return 0;
}

static void sidecars_remove(struct reg_download *d, size_t n)
{
    char path[4300];
    for (size_t i = 0; i < n; i++) {
        sidecar_path(d, (int)i, path, sizeof(path));
        unlink(path);
    }
}

// Rebuilds the parts from sidecars; false (and nothing kept) when there are
// none or they do not describe one consistent blob.
static bool sidecars_load(struct reg_download *d)
{
    struct dl_part *parts = NULL;
    size_t n = 0;
    uint64_t next_off = 0;
    bool ok = true;
    for (;; n++) {
        char path[4300];
        sidecar_path(d, (int)n, path, sizeof(path));
        struct buf b;
        buf_init(&b, 4096);
        if (fs_read_all(path, 4096, &b, NULL) < 0) {
            buf_deinit(&b);
            break;
        }
        json_t *o = NULL;
        int64_t N = -1, off = -1, size = -1, c = -1;
        if (n >= DL_MAX_PARTS || jsonx_parse_object(b.data, b.len, &o, NULL) < 0 ||
            jsonx_get_int(o, "N", &N, 0, DL_MAX_PARTS, true, NULL) < 0 ||
            jsonx_get_int(o, "Offset", &off, 0, INT64_MAX, true, NULL) < 0 ||
            jsonx_get_int(o, "Size", &size, 1, INT64_MAX, true, NULL) < 0 ||
            jsonx_get_int(o, "Completed", &c, 0, INT64_MAX, true, NULL) < 0 || (size_t)N != n ||
            (uint64_t)off != next_off || c > size)
            ok = false;
        json_decref(o);
        buf_deinit(&b);
        if (!ok)
            break;
        parts = xrealloc(parts, (n + 1) * sizeof(*parts));
        parts[n] = (struct dl_part){
            .n = (int)n, .off = (uint64_t)off, .size = (uint64_t)size, .saved = (uint64_t)c};
        atomic_store(&parts[n].completed, (uint64_t)c);
        next_off += (uint64_t)size;
    }
    if (ok && n > 0 && d->size_hint > 0 && next_off != (uint64_t)d->size_hint)
        ok = false;
    struct stat st;
    if (ok && n > 0 && (stat(d->partial, &st) != 0 || (uint64_t)st.st_size != next_off))
        ok = false;
    if (!ok || n == 0) {
        free(parts);
        // Leftovers that do not add up: start over.
        sidecars_remove(d, n + 1);
        unlink(d->partial);
        return false;
    }
    d->parts = parts;
    d->n_parts = n;
    atomic_store(&d->total, next_off);
    uint64_t done = 0;
    for (size_t i = 0; i < n; i++)
        done += atomic_load(&parts[i].completed);
    atomic_store(&d->completed, done);
    return true;
}

static int plan_parts(struct reg_download *d, uint64_t total, struct err *e)
{
    uint64_t ps = registry_part_size(total, d->sess.reg->part_min, d->sess.reg->part_max);
    size_t n = total ? (size_t)((total + ps - 1) / ps) : 0;
    if (n > DL_MAX_PARTS)
        return err_set(e, ERR_TOO_LARGE, "blob of %llu bytes needs too many parts",
                       (unsigned long long)total);
    d->parts = xcalloc(n ? n : 1, sizeof(*d->parts));
    d->n_parts = n;
    for (size_t i = 0; i < n; i++) {
        d->parts[i].n = (int)i;
        d->parts[i].off = i * ps;
        d->parts[i].size = i + 1 < n ? ps : total - i * ps;
        int rc = sidecar_write(d, &d->parts[i]);
        if (rc < 0)
            return err_set(e, rc == -ENOSPC ? ERR_IO : ERR_IO, "write %s-%zu: %s", d->partial, i,
                           strerror(-rc));
    }
    atomic_store(&d->total, total);
    atomic_store(&d->completed, 0);
    return 0;
}

// ---------------------------------------------------------------------------
// Size and data URL

static int query_size(struct reg_download *d, struct err *e)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", d->sess.base, d->sess.repo, d->digest);
    struct reg_rq rq = {
        .method = "HEAD", .url = url, .follow = true, .timeout_s = REG_SLOW_REPLY_S};
    struct reg_rsp rsp;
    reg_rsp_init(&rsp);
    int rc = reg_session_do(&d->sess, &rq, &rsp, e);
    int64_t total = rsp.content_length;
    reg_rsp_deinit(&rsp);
    if (rc < 0)
        return rc;
    if (total < 0)
        total = d->size_hint;  // (fix) upstream would use 0
    if (total < 0)
        return err_set(e, ERR_INVALID, "registry did not say how large blob %s is", d->digest);
    if (d->size_hint >= 0 && total != d->size_hint)
        return err_set(e, ERR_INVALID, "blob %s is %lld bytes, the manifest says %lld", d->digest,
                       (long long)total, (long long)d->size_hint);
    if ((uint64_t)total > REG_MAX_BLOB_BYTES)
        return err_set(e, ERR_TOO_LARGE, "blob %s is too large", d->digest);
    return plan_parts(d, (uint64_t)total, e);
}

static bool same_hostname(const char *a_url, const char *b_url)
{
    char a[STORE_HOST_MAX + 1], b[STORE_HOST_MAX + 1];
    if (!reg_url_host(a_url, a, sizeof(a)) || !reg_url_host(b_url, b, sizeof(b)))
        return false;
    // Port ignored (registry.md §5.4).
    char *ca = strrchr(a, ':'), *cb = strrchr(b, ':');
    if (ca && !strchr(a, ']'))
        *ca = '\0';
    if (cb && !strchr(b, ']'))
        *cb = '\0';
    return strcmp(a, b) == 0;
}

static int resolve_once(struct reg_download *d, struct err *e)
{
    char url[4096];
    snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", d->sess.base, d->sess.repo, d->digest);
    for (int hops = 0;; hops++) {
        struct reg_rq rq = {
            .method = "GET", .url = url, .stop_body = true, .timeout_s = REG_SLOW_REPLY_S};
        struct reg_rsp rsp;
        reg_rsp_init(&rsp);
        int rc = reg_session_do(&d->sess, &rq, &rsp, e);
        if (rc < 0) {
            reg_rsp_deinit(&rsp);
            return rc;
        }
        long st = rsp.status;
        if (st == 200) {
            snprintf(d->data_url, sizeof(d->data_url), "%s", url);
            reg_rsp_deinit(&rsp);
            return 0;
        }
        if ((st == 301 || st == 302 || st == 303 || st == 307 || st == 308) && rsp.location) {
            if (hops >= 10) {
                reg_rsp_deinit(&rsp);
                return err_set(e, ERR_INVALID, "stopped after 10 redirects");
            }
            bool same = same_hostname(rsp.location, url);
            if (strlen(rsp.location) >= sizeof(url)) {
                reg_rsp_deinit(&rsp);
                return err_set(e, ERR_INVALID, "redirect location too long");
            }
            snprintf(url, sizeof(url), "%s", rsp.location);
            reg_rsp_deinit(&rsp);
            if (same)
                continue;
            snprintf(d->data_url, sizeof(d->data_url), "%s", url);
            return 0;
        }
        reg_rsp_deinit(&rsp);
        return err_set(e, ERR_INVALID, "unexpected status code %ld", st);
    }
}

static uint32_t rand_u32(void)
{
    static _Atomic uint64_t state = 0x9e3779b97f4a7c15ull;
    uint64_t x = atomic_fetch_add(&state, 0x9e3779b97f4a7c15ull) ^ (uint64_t)time_monotonic_ns();
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static int resolve_data_url(struct reg_download *d, struct err *e)
{
    int64_t start = time_monotonic_ns();
    for (int n = 1;; n++) {
        struct err le = {0};
        int rc = resolve_once(d, &le);
        if (rc == 0)
            return 0;
        bool retry = rc == ERR_NETWORK && !reg_cancelled(&d->cancel) &&
                     time_monotonic_ns() - start < 30LL * 1000000000;
        if (!retry) {
            err_set(e, rc, "%s", le.msg);
            return rc;
        }
        int64_t ms = (int64_t)n * n * 10;
        if (ms > 10000)
            ms = 10000;
        ms = ms / 2 + (int64_t)(rand_u32() % (uint32_t)(ms + 1));
        reg_sleep_ms(ms);
    }
}

// ---------------------------------------------------------------------------
// Parts

struct attempt {
    struct reg_download *d;
    struct dl_part *p;
    struct reg_blobstream *out;
    struct reg_rsp *rsp;
    bool checked;
    int rc;
    struct err err;
    bool fatal;
};

static bool part_sink(void *ctx, long status, const char *data, size_t n)
{
    struct attempt *a = ctx;
    struct dl_part *p = a->p;
    uint64_t done = a->out->next - p->off;  // received, landed or not
    if (!a->checked) {
        uint64_t start = p->off + done;
        bool whole = p->off + done == 0 && p->size == atomic_load(&a->d->total);
        bool ok = status == 206 || (status == 200 && whole);
        if (status == 206 && a->rsp->content_range) {
            unsigned long long s = 0;
            ok = sscanf(a->rsp->content_range, "bytes %llu-", &s) == 1 && s == start;
        }
        if (!ok) {
            a->rc = err_set(&a->err, status >= 500 || status == 0 ? ERR_NETWORK : ERR_INVALID,
                            "unexpected status code %ld for bytes %llu-", status,
                            (unsigned long long)start);
            return false;
        }
        a->checked = true;
    }
    if (n > p->size - done) {
        a->rc = err_set(&a->err, ERR_NETWORK, "registry sent more bytes than requested");
        return false;
    }
    int rc = reg_blobstream_put(a->out, data, n, &a->err);
    if (rc < 0) {
        a->rc = rc;
        a->fatal = true;  // the disk failed: another attempt would too
        return false;
    }
    return true;
}

// Blob file hooks: a part's bytes count once they are on file.
static void part_landed(void *ctx, void *tag, uint64_t off, uint64_t n)
{
    (void)off;
    struct reg_download *d = ctx;
    struct dl_part *p = tag;
    uint64_t c = atomic_fetch_add(&p->completed, n) + n;
    atomic_fetch_add(&d->completed, n);
    if (c - p->saved >= DL_SIDECAR_EVERY)
        sidecar_write(d, p);
}

static uint64_t frontier(void *ctx)
{
    struct reg_download *d = ctx;
    uint64_t f = 0;
    for (size_t i = 0; i < d->n_parts; i++) {
        uint64_t c = atomic_load(&d->parts[i].completed);
        f = d->parts[i].off + c;
        if (c < d->parts[i].size)
            break;
    }
    return f;
}

static void set_failure(struct reg_download *d, int rc, const struct err *e)
{
    pthread_mutex_lock(&d->mu);
    if (d->fail_rc == 0) {
        d->fail_rc = rc;
        d->fail_err = *e;
    }
    pthread_mutex_unlock(&d->mu);
    atomic_store(&d->stop, 1);
}

static bool dl_should_stop(struct reg_download *d)
{
    return atomic_load(&d->stop) || reg_cancelled(&d->cancel);
}

static void part_run(struct reg_download *d, struct dl_part *p)
{
    int failures = 0;
    const char *auth = reg_session_auth_for(&d->sess, d->data_url);
    while (atomic_load(&p->completed) < p->size) {
        if (dl_should_stop(d))
            return;
        uint64_t done = atomic_load(&p->completed);
        char range[80];
        snprintf(range, sizeof(range), "Range: bytes=%llu-%llu",
                 (unsigned long long)(p->off + done), (unsigned long long)(p->off + p->size - 1));
        const char *hdrs[] = {range, NULL};
        struct reg_rsp rsp;
        reg_rsp_init(&rsp);
        struct reg_blobstream out;
        reg_blobstream_init(&out, d->bf, p, p->off + done);
        struct attempt a = {.d = d, .p = p, .out = &out, .rsp = &rsp};
        struct reg_rq rq = {.method = "GET",
                            .url = d->data_url,
                            .headers = hdrs,
                            .follow = true,
                            .stall_ms = d->sess.reg->stall_timeout_ms,
                            .sink = part_sink,
                            .sink_ctx = &a};
        struct err he = {0};
        int rc = reg_http(&rq, auth, &d->cancel, &rsp, &he);
        bool stalled = rsp.stalled;
        reg_rsp_deinit(&rsp);
        reg_blobstream_deinit(&out);  // what was received lands before the next range
        sidecar_write(d, p);          // after every attempt, successful or not
        if (rc == 0 && a.rc == 0 && atomic_load(&p->completed) < p->size) {
            rc = ERR_NETWORK;
            err_set(&he, ERR_NETWORK, "unexpected EOF");
        }
        if (rc == 0 && a.rc == 0)
            break;
        if (a.rc < 0) {
            rc = a.rc;
            he = a.err;
        }
        if (reg_cancelled(&d->cancel) || a.fatal) {
            set_failure(d, a.fatal ? ERR_IO : ERR_CANCELLED, &he);
            return;
        }
        if (stalled) {
            log_warn("%s part %d stalled; retrying", d->hex, p->n);
            continue;  // stalls are not failures
        }
        if (++failures >= DL_MAX_FAILURES) {
            struct err fe = {0};
            err_set(&fe, ERR_NETWORK, "max retries exceeded: %s", he.msg);
            set_failure(d, ERR_NETWORK, &fe);
            return;
        }
        int64_t ms = ((int64_t)1 << (failures - 1)) * d->sess.reg->backoff_unit_ms;
        log_warn("%s part %d attempt %d failed, retrying in %lldms: %s", d->hex, p->n, failures,
                 (long long)ms, he.msg);
        for (int64_t slept = 0; slept < ms && !dl_should_stop(d); slept += 50)
            reg_sleep_ms(ms - slept < 50 ? ms - slept : 50);
    }
    atomic_fetch_add(&d->parts_done, 1);
}

static void *part_thread(void *arg)
{
    struct reg_download *d = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&d->next_part, 1);
        if (i >= d->n_parts || dl_should_stop(d))
            break;
        if (atomic_load(&d->parts[i].completed) >= d->parts[i].size) {
            atomic_fetch_add(&d->parts_done, 1);
            continue;
        }
        part_run(d, &d->parts[i]);
    }
    pthread_mutex_lock(&d->mu);
    atomic_fetch_sub(&d->running, 1);
    pthread_cond_broadcast(&d->parts_cv);
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

// A pthread_cond_timedwait deadline ms (< 1000) from now.
static struct timespec deadline_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

// Before any byte: the size (from the sidecars when resuming, else asked of the registry),
// checked against the manifest's, and the URL the data comes from.
static int dl_prepare(struct reg_download *d, uint64_t *total, struct err *e)
{
    bool resumed = sidecars_load(d);
    int rc = 0;
    if (!resumed)
        rc = query_size(d, e);
    if (rc < 0)
        return rc;
    *total = atomic_load(&d->total);
    if (d->size_hint >= 0 && *total != (uint64_t)d->size_hint)
        return err_set(e, ERR_INVALID, "blob %s: registry size %llu, manifest %lld", d->digest,
                       (unsigned long long)*total, (long long)d->size_hint);
    if (*total > 0 && (rc = resolve_data_url(d, e)) < 0)
        return rc;
    return 0;
}

// Runs the part threads until every part has landed or the download stops; returns how
// many threads ran. Connections ramp up from one: while the link is slower than the
// hasher, another part starts every half second (up to 16). On a fast link (loopback,
// LAN) one stream already saturates it, parts then land in order and are hashed as they
// arrive instead of after the last byte.
static size_t dl_run_parts(struct reg_download *d)
{
    size_t n_threads = d->n_parts < DL_MAX_PARTS_INFLIGHT ? d->n_parts : DL_MAX_PARTS_INFLIGHT;
    pthread_t tids[DL_MAX_PARTS_INFLIGHT];
    size_t started = 0;
    atomic_store(&d->running, 0);
    int64_t last_ns = time_monotonic_ns();
    uint64_t last_bytes = atomic_load(&d->completed);
    while (started < n_threads || atomic_load(&d->running) > 0) {
        bool slow = started == 0;
        if (!slow && started < n_threads) {
            int64_t now = time_monotonic_ns();
            uint64_t bytes = atomic_load(&d->completed);
            if (now - last_ns >= DL_RAMP_INTERVAL_MS * 1000000LL) {
                double rate = (double)(bytes - last_bytes) * 1e9 / (double)(now - last_ns);
                slow = rate < DL_FAST_LINK_BPS;
                last_ns = now;
                last_bytes = bytes;
            }
        }
        if (slow && started < n_threads && atomic_load(&d->next_part) < d->n_parts &&
            !dl_should_stop(d)) {
            atomic_fetch_add(&d->running, 1);
            if (pthread_create(&tids[started], NULL, part_thread, d) == 0) {
                started++;
            } else {
                atomic_fetch_sub(&d->running, 1);
                if (started == 0) {
                    struct err te = {0};
                    err_set(&te, ERR_INTERNAL, "cannot start download thread");
                    set_failure(d, ERR_INTERNAL, &te);
                }
                n_threads = started;
            }
            continue;
        }
        // Sleep until a part thread ends or the next ramp-up check is due.
        pthread_mutex_lock(&d->mu);
        if (atomic_load(&d->running) == 0 &&
            (atomic_load(&d->next_part) >= d->n_parts || dl_should_stop(d))) {
            pthread_mutex_unlock(&d->mu);
            break;
        }
        struct timespec ts = deadline_in_ms(started < n_threads ? DL_RAMP_INTERVAL_MS / 5 : 250);
        pthread_cond_timedwait(&d->parts_cv, &d->mu, &ts);
        pthread_mutex_unlock(&d->mu);
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    return started;
}

// Moves the verified file to its blob path and makes the rename durable.
static int dl_install(struct reg_download *d, struct err *e)
{
    if (rename(d->partial, d->path) < 0)
        return err_set(e, ERR_IO, "rename %s: %s", d->partial, strerror(errno));
    chmod(d->path, 0644);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", d->path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        fs_fsync_dir(dir, NULL);
    }
    return 0;
}

// Downloads one blob: prepare, fetch the parts, check the digest (a mismatch throws the
// partial file and its sidecars away), then install it.
static int dl_work(struct reg_download *d, struct err *e)
{
    if (fs_exists(d->path))
        return 0;
    uint64_t total = 0;
    int rc = dl_prepare(d, &total, e);
    if (rc < 0)
        return rc;
    int64_t t_start = time_monotonic_ns();
    uint64_t resumed_bytes = atomic_load(&d->completed);
    struct reg_blobfile_hooks hooks = {.ctx = d, .landed = part_landed, .frontier = frontier};
    rc = reg_blobfile_open(&d->bf, d->partial, total, &hooks, d->sess.reg->direct_io, e);
    if (rc < 0)
        return rc;
    size_t started = dl_run_parts(d);
    if (d->fail_rc < 0) {
        reg_blobfile_close(d->bf, false, NULL);
        *e = d->fail_err;
        return d->fail_rc;
    }
    int64_t t_landed = time_monotonic_ns();
    char hex[DIGEST_HEX_LEN + 1];
    bool direct = reg_blobfile_direct(d->bf);
    rc = reg_blobfile_digest(d->bf, hex, e);
    int64_t t_hashed = time_monotonic_ns();
    if (rc < 0) {
        reg_blobfile_close(d->bf, false, NULL);
        return rc;
    }
    if (strcmp(hex, d->hex) != 0) {
        reg_blobfile_close(d->bf, false, NULL);
        unlink(d->partial);
        sidecars_remove(d, d->n_parts);
        return err_set(e, ERR_DIGEST,
                       "digest mismatch, file must be downloaded again: want %s, got sha256:%s",
                       d->digest, hex);
    }
    if ((rc = reg_blobfile_close(d->bf, true, e)) < 0)
        return rc;
    int64_t t_synced = time_monotonic_ns();
    log_debug("blob %.12s: %llu bytes (%llu resumed) in %.0f ms over %zu connections, %s writes; "
              "hash done %.0f ms and fsync %.0f ms after the last byte",
              d->hex, (unsigned long long)total, (unsigned long long)resumed_bytes,
              (double)(t_synced - t_start) / 1e6, started, direct ? "direct" : "buffered",
              (double)(t_hashed - t_landed) / 1e6, (double)(t_synced - t_hashed) / 1e6);
    sidecars_remove(d, d->n_parts);
    return dl_install(d, e);
}

static void *dl_thread(void *arg)
{
    struct reg_download *d = arg;
    struct err e = {0};
    int rc = dl_work(d, &e);
    struct registry *reg = d->sess.reg;
    pthread_mutex_lock(&reg->mu);
    d->rc = rc;
    d->err = e;
    d->done = true;
    for (struct reg_download **pp = &reg->downloads; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            break;
        }
    pthread_cond_broadcast(&d->cv);
    bool last = --d->refs == 0;
    pthread_mutex_unlock(&reg->mu);
    if (last)
        dl_free(d);
    return NULL;
}

// Starts a new shared download of hex and links it into reg->downloads. Called with reg->mu
// held; on failure it releases reg->mu and returns the error with *out untouched.
static int dl_start(struct reg_session *s, const char *hex, const char *canon, int64_t size,
                    struct reg_download **out, struct err *e)
{
    struct registry *reg = s->reg;
    struct reg_download *d = xcalloc(1, sizeof(*d));
    snprintf(d->digest, sizeof(d->digest), "%s", canon);
    snprintf(d->hex, sizeof(d->hex), "%s", hex);
    pthread_cond_init(&d->cv, NULL);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->parts_cv, NULL);
    d->sess = *s;
    d->sess.token = s->token ? xstrdup(s->token) : NULL;
    d->sess.basic = s->basic ? xstrdup(s->basic) : NULL;
    d->sess.cancel = NULL;
    d->size_hint = size;
    int prc = store_blob_path(reg->store, canon, d->path, sizeof(d->path), e);
    if (prc < 0) {
        pthread_mutex_unlock(&reg->mu);
        dl_free(d);
        return prc;
    }
    snprintf(d->partial, sizeof(d->partial), "%s-partial", d->path);
    d->refs = 2;  // the worker thread and us
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    if (pthread_create(&tid, &attr, dl_thread, d) != 0) {
        pthread_attr_destroy(&attr);
        pthread_mutex_unlock(&reg->mu);
        dl_free(d);
        return err_set(e, ERR_INTERNAL, "cannot start download thread");
    }
    pthread_attr_destroy(&attr);
    d->next = reg->downloads;
    reg->downloads = d;
    *out = d;
    return 0;
}

// Attached: reports the shared progress every 60 ms until the download ends (true) or this
// caller is cancelled (false). Called and returns with reg->mu held.
static bool dl_follow(struct reg_download *d, struct reg_session *s, const struct registry_opts *o,
                      const char *status, const char *canon)
{
    struct registry *reg = s->reg;
    while (!d->done) {
        struct timespec ts = deadline_in_ms(60);
        pthread_cond_timedwait(&d->cv, &reg->mu, &ts);
        if (d->done)
            break;
        uint64_t total = atomic_load(&d->total), done = atomic_load(&d->completed);
        pthread_mutex_unlock(&reg->mu);
        if (total)
            reg_progress(o, status, canon, total, done);
        bool cancel = reg_cancelled(o ? o->cancel : NULL) || reg_cancelled(s->cancel);
        pthread_mutex_lock(&reg->mu);
        if (cancel)
            return false;
    }
    return true;
}

int reg_blob_fetch(struct reg_session *s, const char *digest, int64_t size,
                   const struct registry_opts *o, struct err *e)
{
    struct registry *reg = s->reg;
    char hex[DIGEST_HEX_LEN + 1];
    int rc = store_digest_parse(digest, hex, e);
    if (rc < 0)
        return rc;
    for (char *p = hex; *p; p++)
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p + 32);
    char status[32];
    snprintf(status, sizeof(status), "pulling %.12s", hex);
    char canon[STORE_DIGEST_LEN + 1];
    snprintf(canon, sizeof(canon), "sha256:%s", hex);

    // Join a download of the same blob already under way, or start one.
    pthread_mutex_lock(&reg->mu);
    struct reg_download *d;
    for (d = reg->downloads; d; d = d->next)
        if (strcmp(d->hex, hex) == 0)
            break;
    if (d) {
        d->refs++;
    } else if ((rc = dl_start(s, hex, canon, size, &d, e)) < 0) {
        return rc;
    }
    if (!dl_follow(d, s, o, status, canon)) {
        if (--d->refs == 1 && !d->done)
            reg_cancel_set(&d->cancel);  // only the worker is left
        bool last = d->refs == 0;
        pthread_mutex_unlock(&reg->mu);
        if (last)
            dl_free(d);
        return err_set(e, ERR_CANCELLED, "context canceled");
    }
    rc = d->rc;
    if (rc < 0)
        *e = d->err;
    uint64_t total = atomic_load(&d->total);
    bool last = --d->refs == 0;
    pthread_mutex_unlock(&reg->mu);
    if (last)
        dl_free(d);
    if (rc == 0)
        reg_progress(o, status, canon, total, total);
    return rc;
}

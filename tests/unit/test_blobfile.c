// Blob files (registry/blobfile.c): bytes put by several streams at once,
// at unaligned offsets and in chunks of every size, land byte for byte
// (O_DIRECT bulk and page-cache edges alike), a stream's bytes land in
// order, the SHA-256 is that of the whole file whether the bytes were
// hashed in memory or read back (a resumed download), and a failing disk
// or a missing byte is an error, never a wrong digest or a hang.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/internal.h"

#define MAX_SEGS 8

// A file cut into segments (like download parts), each written by a stream.
struct fx {
    char dir[64], path[128];
    uint64_t total;
    unsigned char *data;  // the expected content
    size_t n_segs;
    uint64_t seg_off[MAX_SEGS], seg_size[MAX_SEGS];
    _Atomic uint64_t landed[MAX_SEGS];  // contiguous bytes of each segment on file
    atomic_int out_of_order;
};

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void on_landed(void *ctx, void *tag, uint64_t off, uint64_t n)
{
    struct fx *x = ctx;
    size_t i = (size_t)(uintptr_t)tag;
    if (off != x->seg_off[i] + atomic_load(&x->landed[i]))
        atomic_fetch_add(&x->out_of_order, 1);
    atomic_fetch_add(&x->landed[i], n);
}

static uint64_t on_frontier(void *ctx)
{
    struct fx *x = ctx;
    uint64_t f = 0;
    for (size_t i = 0; i < x->n_segs; i++) {
        uint64_t c = atomic_load(&x->landed[i]);
        f = x->seg_off[i] + c;
        if (c < x->seg_size[i])
            break;
    }
    return f;
}

// Segments cut at unaligned places; every segment non-empty.
static struct fx *fx_new(uint64_t total, size_t n_segs)
{
    struct fx *x = calloc(1, sizeof(*x));
    snprintf(x->dir, sizeof(x->dir), "/tmp/ollama-test-blobfile-XXXXXX");
    assert_non_null(mkdtemp(x->dir));
    snprintf(x->path, sizeof(x->path), "%s/blob-partial", x->dir);
    x->total = total;
    x->data = malloc(total ? total : 1);
    for (uint64_t i = 0; i < total; i++)
        x->data[i] = (unsigned char)(rng() >> 24);
    x->n_segs = n_segs;
    uint64_t seg = total / n_segs;
    for (size_t i = 0; i < n_segs; i++) {
        x->seg_off[i] = i * seg;
        x->seg_size[i] = i + 1 < n_segs ? seg : total - i * seg;
    }
    return x;
}

static void fx_free(struct fx *x)
{
    unlink(x->path);
    rmdir(x->dir);
    free(x->data);
    free(x);
}

static struct reg_blobfile *fx_open(struct fx *x, bool direct)
{
    struct reg_blobfile_hooks h = {.ctx = x, .landed = on_landed, .frontier = on_frontier};
    struct reg_blobfile *f = NULL;
    struct err e = {0};
    assert_int_equal(reg_blobfile_open(&f, x->path, x->total, &h, direct, &e), 0);
    return f;
}

struct writer_arg {
    struct fx *x;
    struct reg_blobfile *f;
    size_t seg;
    uint64_t from;  // offset inside the segment to start at
    uint64_t seed;
    int rc;
};

// Puts a segment in chunks of random sizes (1 byte to 3 MiB).
static void *writer(void *arg)
{
    struct writer_arg *w = arg;
    struct fx *x = w->x;
    uint64_t s = w->seed;
    uint64_t off = x->seg_off[w->seg] + w->from, end = x->seg_off[w->seg] + x->seg_size[w->seg];
    struct reg_blobstream st;
    reg_blobstream_init(&st, w->f, (void *)(uintptr_t)w->seg, off);
    struct err e = {0};
    while (off < end && w->rc == 0) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t n = (s >> 33) % 4 == 0 ? 1 + (s >> 40) % 4096 : 1 + (s >> 30) % (3u << 20);
        if (n > end - off)
            n = end - off;
        w->rc = reg_blobstream_put(&st, x->data + off, (size_t)n, &e);
        off += n;
    }
    if (w->rc == 0)
        w->rc = reg_blobstream_flush(&st, &e);
    reg_blobstream_deinit(&st);
    return NULL;
}

// Writes segments [0, n) (from[i] bytes into each already there).
static void run_writers(struct fx *x, struct reg_blobfile *f, size_t n, const uint64_t *from)
{
    pthread_t t[MAX_SEGS];
    struct writer_arg w[MAX_SEGS];
    for (size_t i = 0; i < n; i++) {
        w[i] = (struct writer_arg){
            .x = x, .f = f, .seg = i, .from = from ? from[i] : 0, .seed = rng()};
        assert_int_equal(pthread_create(&t[i], NULL, writer, &w[i]), 0);
    }
    for (size_t i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
}

static void check_file(struct fx *x, const char *hex)
{
    char want[DIGEST_HEX_LEN + 1];
    sha256_hex(x->data, x->total, want);
    assert_string_equal(hex, want);
    struct stat st;
    assert_int_equal(stat(x->path, &st), 0);
    assert_int_equal((uint64_t)st.st_size, x->total);
    int fd = open(x->path, O_RDONLY);
    assert_true(fd >= 0);
    unsigned char *got = malloc(x->total ? x->total : 1);
    uint64_t have = 0;
    while (have < x->total) {
        ssize_t r = pread(fd, got + have, x->total - have, (off_t)have);
        assert_true(r > 0);
        have += (uint64_t)r;
    }
    close(fd);
    assert_memory_equal(got, x->data, x->total);
    free(got);
    assert_int_equal(atomic_load(&x->out_of_order), 0);
}

// Every stream has flushed: the digest and the file are the expected ones.
static void finish_and_check(struct fx *x, struct reg_blobfile *f)
{
    char hex[DIGEST_HEX_LEN + 1];
    struct err e = {0};
    assert_int_equal(reg_blobfile_digest(f, hex, &e), 0);
    assert_int_equal(reg_blobfile_close(f, true, &e), 0);
    check_file(x, hex);
    fx_free(x);
}

static void whole_file(uint64_t total, size_t n_segs, bool direct)
{
    struct fx *x = fx_new(total, n_segs);
    struct reg_blobfile *f = fx_open(x, direct);
    if (!direct)
        assert_false(reg_blobfile_direct(f));
    run_writers(x, f, x->n_segs, NULL);
    finish_and_check(x, f);
}

static void test_one_stream(void **state)
{
    (void)state;
    whole_file((9u << 20) + 12345, 1, true);
    // Where the test directory lives on tmpfs (or NFS) the page cache is used.
    struct fx *x = fx_new(1, 1);
    struct reg_blobfile *f = fx_open(x, true);
    print_message("O_DIRECT in %s: %s\n", x->dir, reg_blobfile_direct(f) ? "yes" : "no");
    reg_blobfile_close(f, false, NULL);
    fx_free(x);
}

static void test_parallel_streams(void **state)
{
    (void)state;
    // Segments start at unaligned offsets; their buffers interleave, so the
    // hasher drops what is ahead and reads it back once it has landed.
    whole_file((23u << 20) + 777, 5, true);
    whole_file(3 * 4096 + 1, 3, true);
}

static void test_buffered(void **state)
{
    (void)state;
    whole_file((7u << 20) + 3, 3, false);
}

static void test_tiny_and_empty(void **state)
{
    (void)state;
    whole_file(1, 1, true);
    whole_file(83, 1, true);
    struct fx *x = fx_new(0, 1);
    finish_and_check(x, fx_open(x, true));
}

static void test_resume_reads_back(void **state)
{
    (void)state;
    // A download cut earlier: each segment already has some bytes on file.
    struct fx *x = fx_new((12u << 20) + 5, 3);
    uint64_t from[MAX_SEGS];
    int fd = open(x->path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)x->total), 0);
    for (size_t i = 0; i < x->n_segs; i++) {
        from[i] = x->seg_size[i] / (i + 2) + 1;
        assert_int_equal(pwrite(fd, x->data + x->seg_off[i], from[i], (off_t)x->seg_off[i]),
                         (ssize_t)from[i]);
        atomic_store(&x->landed[i], from[i]);
    }
    close(fd);
    struct reg_blobfile *f = fx_open(x, true);
    run_writers(x, f, x->n_segs, from);
    finish_and_check(x, f);
}

static void test_missing_bytes(void **state)
{
    (void)state;
    // Segment 1 never arrives: the digest is an error, not a hang.
    struct fx *x = fx_new(5u << 20, 2);
    struct reg_blobfile *f = fx_open(x, true);
    run_writers(x, f, 1, NULL);
    char hex[DIGEST_HEX_LEN + 1];
    struct err e = {0};
    assert_int_equal(reg_blobfile_digest(f, hex, &e), ERR_IO);
    assert_non_null(strstr(e.msg, "ended early"));
    reg_blobfile_close(f, false, NULL);
    fx_free(x);
}

static void test_disk_full(void **state)
{
    (void)state;
    // Writes past RLIMIT_FSIZE fail with EFBIG as a full disk would with
    // ENOSPC: the stream sees the error, nothing hangs.
    signal(SIGXFSZ, SIG_IGN);
    struct fx *x = fx_new(8u << 20, 1);
    struct reg_blobfile *f = fx_open(x, true);  // sized before the limit
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 3u << 20;
    setrlimit(RLIMIT_FSIZE, &lim);
    struct reg_blobstream st;
    reg_blobstream_init(&st, f, (void *)(uintptr_t)0, 0);
    struct err e = {0};
    int rc = 0;
    for (uint64_t off = 0; off < x->total && rc == 0; off += 65536)
        rc = reg_blobstream_put(&st, x->data + off, 65536, &e);
    if (rc == 0)
        rc = reg_blobstream_flush(&st, &e);
    reg_blobstream_deinit(&st);
    setrlimit(RLIMIT_FSIZE, &old);
    assert_int_equal(rc, ERR_IO);
    assert_non_null(strstr(e.msg, "File too large"));
    assert_true(atomic_load(&x->landed[0]) <= (3u << 20));
    char hex[DIGEST_HEX_LEN + 1];
    assert_int_equal(reg_blobfile_digest(f, hex, NULL), ERR_IO);
    reg_blobfile_close(f, false, NULL);
    fx_free(x);
}

static void test_abort_midway(void **state)
{
    (void)state;
    // Closing with bytes staged and nothing digested releases everything.
    struct fx *x = fx_new(6u << 20, 2);
    struct reg_blobfile *f = fx_open(x, true);
    struct reg_blobstream st;
    reg_blobstream_init(&st, f, (void *)(uintptr_t)1, x->seg_off[1]);
    assert_int_equal(reg_blobstream_put(&st, x->data + x->seg_off[1], 5000, NULL), 0);
    reg_blobstream_deinit(&st);
    assert_int_equal(atomic_load(&x->landed[1]), 5000);
    assert_int_equal(reg_blobfile_close(f, false, NULL), 0);
    fx_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_stream),        cmocka_unit_test(test_parallel_streams),
        cmocka_unit_test(test_buffered),          cmocka_unit_test(test_tiny_and_empty),
        cmocka_unit_test(test_resume_reads_back), cmocka_unit_test(test_missing_bytes),
        cmocka_unit_test(test_disk_full),         cmocka_unit_test(test_abort_midway),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

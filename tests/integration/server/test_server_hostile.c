// Integration test: `ollama serve` holds under hostile connections (issue
// 26). A real server on a loopback port faces 1500 half-open connections, a
// flood of 5000 connects, slowloris and idle keep-alive connections (with
// the timeouts shortened through the environment), oversized bodies and a
// connection cap; a slow reader of a real generation is never cut. Every
// case is bounded in count and time and closes what it opens.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/resource.h>

#include "integration/harness.h"
#include "integration/http.h"
#include "integration/models.h"
#include "testutil.h"

#define HALF_OPEN 1500
#define FLOOD     5000

// The case's server and sockets, released by teardown even when it fails.
static struct harness h;
static int *fds;
static int n_fds;

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    fds = NULL;
    n_fds = 0;
    int rc = h.pid > 0 ? harness_stop(&h) : 0;
    memset(&h, 0, sizeof(h));
    return rc == 0 ? 0 : -1;
}

// Room for n sockets that teardown closes.
static int *fds_alloc(int n)
{
    fds = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    n_fds = n;
    return fds;
}

// Open descriptors of the server process.
static int server_fds(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)h.pid);
    DIR *d = opendir(path);
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        s += w;
        n -= (size_t)w;
    }
}

// Reads until the peer closes, the deadline passes or cap bytes are in.
// Returns bytes read; *closed says whether the peer closed (EOF or reset).
static size_t read_until_close(int fd, char *out, size_t cap, int timeout_ms, bool *closed)
{
    size_t got = 0;
    *closed = false;
    int64_t end = now_ms() + timeout_ms;
    while (got + 1 < cap) {
        int left = (int)(end - now_ms());
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0)
            break;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0) {
            *closed = true;
            break;
        }
        got += (size_t)n;
    }
    out[got] = '\0';
    return got;
}

// The server's log contains needle this many times.
static int log_count(const char *needle)
{
    FILE *f = fopen(h.log_path, "r");
    if (!f)
        return 0;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

// GET /api/version over a fresh connection; the milliseconds it took, or -1.
static int version_ms(int timeout_ms)
{
    int64_t t0 = now_ms();
    int fd = connect_to(h.port);
    if (fd < 0)
        return -1;
    static const char req[] = "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n";
    send_all(fd, req, sizeof(req) - 1);
    char buf[2048];
    bool closed;
    read_until_close(fd, buf, sizeof(buf), timeout_ms, &closed);
    close(fd);
    if (!strstr(buf, "HTTP/1.1 200") || !strstr(buf, "\"version\""))
        return -1;
    return (int)(now_ms() - t0);
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < HALF_OPEN + 64)
        skip();  // the machine's hard limit is below what the case needs
}

static const char partial[] = "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slo";

// ---------------------------------------------------------------------------
// Default timeouts

static void test_half_open_connections(void **state)
{
    (void)state;
    raise_fd_limit();
    assert_int_equal(harness_start(&h, NULL), 0);
    fds_alloc(HALF_OPEN);
    int opened = 0;
    for (int i = 0; i < HALF_OPEN; i++) {
        fds[i] = connect_to(h.port);
        if (fds[i] < 0)
            break;
        send_all(fds[i], partial, sizeof(partial) - 1);
        opened++;
    }
    assert_int_equal(opened, HALF_OPEN);
    // Time the request once the server holds them all (slow under sanitizers).
    for (int64_t end = now_ms() + 30000; server_fds() < HALF_OPEN && now_ms() < end;)
        harness_sleep_ms(50);
    assert_true(server_fds() >= HALF_OPEN);
    int ms = version_ms(2000);
    print_message("GET /api/version with %d half-open connections: %d ms\n", opened, ms);
    assert_true(ms >= 0 && ms < 2000);
    assert_true(version_ms(2000) >= 0);
}

static void test_connect_flood(void **state)
{
    (void)state;
    raise_fd_limit();
    assert_int_equal(harness_start(&h, NULL), 0);
    // 5000 connects in batches of 500 held together, then dropped.
    int64_t t0 = now_ms();
    int done = 0;
    fds_alloc(500);
    while (done < FLOOD && now_ms() - t0 < 20000) {
        int n = 0;
        for (; n < 500; n++) {
            fds[n] = connect_to(h.port);
            if (fds[n] < 0)
                break;
            if (n % 2)  // half of them send a partial request first
                send(fds[n], partial, sizeof(partial) - 1, MSG_NOSIGNAL);
        }
        for (int i = 0; i < n; i++) {
            close(fds[i]);
            fds[i] = -1;
        }
        done += n;
    }
    print_message("%d connects in %lld ms\n", done, (long long)(now_ms() - t0));
    assert_true(done >= FLOOD);
    // Still serving (the backlog of closed connections drains first: seconds
    // under ThreadSanitizer, milliseconds otherwise).
    int ms = version_ms(10000);
    print_message("then GET /api/version: %d ms\n", ms);
    assert_true(ms >= 0);
    assert_int_equal(harness_stop(&h), 0);  // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

// A body above the limit gets 413 while the client has sent only headers.
static void test_body_limit(void **state)
{
    (void)state;
    static const char *const env[] = {"OLLAMA_HTTP_MAX_BODY=4096", NULL};
    assert_int_equal(harness_start(&h, env), 0);
    int fd = connect_to(h.port);
    static const char hdr[] = "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n";
    send_all(fd, hdr, sizeof(hdr) - 1);
    char buf[2048];
    bool closed;
    read_until_close(fd, buf, sizeof(buf), 3000, &closed);
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 413"));
    assert_non_null(strstr(buf, "http: request body too large"));

    // A chunked body is counted as it arrives: 8 KiB in 1 KiB chunks.
    fd = connect_to(h.port);
    static const char chdr[] = "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    send_all(fd, chdr, sizeof(chdr) - 1);
    char chunk[1024 + 16];
    memcpy(chunk, "400\r\n", 5);
    memset(chunk + 5, 'x', 1024);
    memcpy(chunk + 5 + 1024, "\r\n", 2);
    for (int i = 0; i < 8; i++)
        send_all(fd, chunk, 1024 + 7);
    send_all(fd, "0\r\n\r\n", 5);
    read_until_close(fd, buf, sizeof(buf), 3000, &closed);
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 413"));

    // Below the limit the route answers as usual.
    fd = connect_to(h.port);
    static const char ok[] = "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Connection: close\r\nContent-Length: 2\r\n\r\n{}";
    send_all(fd, ok, sizeof(ok) - 1);
    read_until_close(fd, buf, sizeof(buf), 3000, &closed);
    close(fd);
    assert_non_null(strstr(buf, "model '' not found"));
    assert_int_equal(harness_stop(&h), 0);  // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

// ---------------------------------------------------------------------------
// Shortened timeouts

static const char *const short_env[] = {"OLLAMA_HTTP_HEADER_TIMEOUT=1s",
                                        "OLLAMA_HTTP_BODY_TIMEOUT=1s",
                                        "OLLAMA_HTTP_IDLE_TIMEOUT=1s", NULL};

static void test_header_timeout(void **state)
{
    (void)state;
    assert_int_equal(harness_start(&h, short_env), 0);
    int fd = connect_to(h.port);
    send_all(fd, partial, sizeof(partial) - 1);
    int64_t t0 = now_ms();
    char buf[256];
    bool closed;
    read_until_close(fd, buf, sizeof(buf), 5000, &closed);
    int64_t took = now_ms() - t0;
    close(fd);
    print_message("half-open connection dropped after %lld ms\n", (long long)took);
    assert_true(closed);
    assert_true(took >= 500 && took < 4000);

    // A body that stalls is dropped too.
    fd = connect_to(h.port);
    static const char hdr[] = "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Length: 100\r\n\r\n{\"model\":";
    send_all(fd, hdr, sizeof(hdr) - 1);
    t0 = now_ms();
    read_until_close(fd, buf, sizeof(buf), 5000, &closed);
    took = now_ms() - t0;
    close(fd);
    assert_true(closed);
    assert_true(took >= 500 && took < 4000);
    assert_int_equal(harness_stop(&h), 0);  // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

static void test_idle_keep_alive(void **state)
{
    (void)state;
    assert_int_equal(harness_start(&h, short_env), 0);
    int fd = connect_to(h.port);
    static const char req[] = "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    send_all(fd, req, sizeof(req) - 1);
    char buf[2048];
    bool closed;
    int64_t t0 = now_ms();
    read_until_close(fd, buf, sizeof(buf), 5000, &closed);
    int64_t took = now_ms() - t0;
    close(fd);
    print_message("idle keep-alive connection closed after %lld ms\n", (long long)took);
    assert_non_null(strstr(buf, "HTTP/1.1 200"));  // answered and kept alive, then closed
    assert_true(closed);
    assert_true(took >= 500 && took < 4000);
    assert_int_equal(harness_stop(&h), 0);  // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

// A real generation read slowly, for longer than every timeout: never cut.
static void test_slow_stream(void **state)
{
    (void)state;
    char model[512];
    test_fixture(model, sizeof(model), "stories260K.gguf");
    assert_int_equal(harness_start(&h, short_env), 0);
    assert_int_equal(models_create(&h, "stories", model, "\"parameters\":{\"temperature\":0}"), 0);
    int fd = connect_to(h.port);
    static const char body[] =
        "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"options\":{\"num_predict\":48}}";
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     sizeof(body) - 1, body);
    send_all(fd, req, (size_t)n);
    // 64 bytes every 50 ms: the whole reply takes several seconds.
    static char reply[1 << 16];
    size_t got = 0;
    int64_t t0 = now_ms();
    while (got + 65 < sizeof(reply) && now_ms() - t0 < 60000) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) <= 0)
            break;
        ssize_t r = recv(fd, reply + got, 64, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        harness_sleep_ms(50);
    }
    reply[got] = '\0';
    int64_t took = now_ms() - t0;
    close(fd);
    print_message("slow reader: %zu bytes over %lld ms\n", got, (long long)took);
    assert_true(took > 1500);  // longer than every timeout
    assert_non_null(strstr(reply, "HTTP/1.1 200"));
    assert_non_null(strstr(reply, "\"done\":true"));
    assert_int_equal(harness_stop(&h), 0);  // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

// SIGTERM while a generation streams: the server ends the stream, stops its
// runner and exits 0 (under ThreadSanitizer: without a race).
static void test_sigterm_during_stream(void **state)
{
    (void)state;
    char model[512];
    test_fixture(model, sizeof(model), "stories260K.gguf");
    assert_int_equal(harness_start(&h, NULL), 0);
    assert_int_equal(models_create(&h, "stories", model, "\"parameters\":{\"temperature\":0}"), 0);
    fds_alloc(1);
    fds[0] = connect_to(h.port);
    static const char body[] = "{\"model\":\"stories\",\"prompt\":\"Once\",\"options\":"
                               "{\"num_predict\":100000,\"num_ctx\":256}}";
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     sizeof(body) - 1, body);
    send_all(fds[0], req, (size_t)n);
    char buf[4096] = "";
    size_t got = 0;
    for (int64_t end = now_ms() + 30000; !strstr(buf, "\"response\"") && now_ms() < end;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (poll(&p, 1, 1000) != 1)
            continue;
        ssize_t r = recv(fds[0], buf + got, sizeof(buf) - 1 - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
        buf[got] = '\0';
    }
    assert_non_null(strstr(buf, "\"response\""));  // streaming
    assert_int_equal(harness_stop(&h), 0);         // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

// Past the cap new connections are closed at once, with one log line per
// burst; the server serves again when connections go.
static void test_connection_cap(void **state)
{
    (void)state;
    static const char *const env[] = {"OLLAMA_HTTP_MAX_CONNECTIONS=50", NULL};
    assert_int_equal(harness_start(&h, env), 0);
    fds_alloc(120);
    int n = 0;
    for (; n < 120; n++) {
        fds[n] = connect_to(h.port);
        if (fds[n] < 0)
            break;
        send_all(fds[n], partial, sizeof(partial) - 1);
    }
    assert_int_equal(n, 120);  // the kernel accepts; the server closes the extra ones
    // The refusals come as the server reaches them (slowly under sanitizers).
    int refused = 0;
    for (int64_t end = now_ms() + 10000; now_ms() < end && refused < n - 50;) {
        harness_sleep_ms(100);
        refused = 0;
        for (int i = 0; i < n; i++) {
            struct pollfd p = {.fd = fds[i], .events = POLLIN};
            refused += poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR));
        }
    }
    print_message("%d of %d connections refused past a cap of 50\n", refused, n);
    // 70 past the cap; one or two more when the harness's readiness probe
    // was still counted as open when the burst arrived (seen on a loaded
    // machine).
    assert_true(refused >= 60 && refused <= 72);
    assert_int_equal(log_count("refusing new ones"), 1);
    for (int i = 0; i < n; i++) {
        close(fds[i]);
        fds[i] = -1;
    }
    harness_sleep_ms(200);
    assert_true(version_ms(2000) >= 0);
    assert_int_equal(harness_stop(&h), 0);  // a clean exit on SIGTERM
    memset(&h, 0, sizeof(h));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_half_open_connections, teardown),
        cmocka_unit_test_teardown(test_connect_flood, teardown),
        cmocka_unit_test_teardown(test_body_limit, teardown),
        cmocka_unit_test_teardown(test_header_timeout, teardown),
        cmocka_unit_test_teardown(test_idle_keep_alive, teardown),
        cmocka_unit_test_teardown(test_slow_stream, teardown),
        cmocka_unit_test_teardown(test_sigterm_during_stream, teardown),
        cmocka_unit_test_teardown(test_connection_cap, teardown),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

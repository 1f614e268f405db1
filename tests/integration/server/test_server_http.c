// Integration test of the server skeleton: a real `ollama serve` on a free
// loopback port answers /, /api/version, 404/405 as Gin does, caps request
// bodies, applies CORS and the allowed-host check, and exits cleanly on
// SIGTERM, after draining the requests in flight.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <poll.h>
#include <sys/time.h>
#include <cmocka.h>

#include "integration/harness.h"
#include "integration/http.h"
#include "integration/models.h"
#include "testutil.h"

static struct harness srv;

static int setup(void **state)
{
    (void)state;
    if (harness_setup(&srv, NULL) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

static void get(const char *method, const char *path, const char *const *headers,
                struct http_resp *r)
{
    assert_int_equal(harness_request(&srv, method, path, headers, NULL, r), 0);
}

static void test_root(void **state)
{
    (void)state;
    struct http_resp r;
    get("GET", "/", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "Ollama is running");
    assert_true(http_has_header(&r, "Content-Type: text/plain; charset=utf-8"));
    http_resp_free(&r);
    get("HEAD", "/", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    http_resp_free(&r);
}

static void test_version(void **state)
{
    (void)state;
    struct http_resp r;
    get("GET", "/api/version", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"version\":\"" OLLAMA_VERSION "\"}");
    assert_true(http_has_header(&r, "Content-Type: application/json; charset=utf-8"));
    http_resp_free(&r);
    get("HEAD", "/api/version", NULL, &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
}

static void test_not_found_and_method(void **state)
{
    (void)state;
    struct http_resp r;
    get("GET", "/api/nothing-here", NULL, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "404 page not found");
    http_resp_free(&r);
    get("DELETE", "/api/version", NULL, &r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.body, "405 method not allowed");
    http_resp_free(&r);
    // Trailing slash: redirected to the route without it (Gin).
    get("GET", "/api/version/", NULL, &r);
    assert_int_equal(r.status, 301);
    assert_true(http_has_header(&r, "Location: /api/version"));
    http_resp_free(&r);
}

static void test_body_cap(void **state)
{
    (void)state;
    struct http_resp r;
    char url[256];
    snprintf(url, sizeof(url), "%s/api/version", srv.base_url);
    // One byte over the 256 MiB cap: refused with 413, server stays up.
    assert_int_equal(http_request(url, "GET", NULL, NULL, 0, 256u * 1024 * 1024 + 1, &r), 0);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "\"error\""));
    http_resp_free(&r);
    get("GET", "/", NULL, &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
}

static void test_cors(void **state)
{
    (void)state;
    struct http_resp r;
    const char *allowed[] = {"Origin: http://localhost:3000", NULL};
    get("GET", "/api/version", allowed, &r);
    assert_int_equal(r.status, 200);
    assert_true(http_has_header(&r, "Access-Control-Allow-Origin: http://localhost:3000"));
    assert_true(http_has_header(&r, "Vary: Origin"));
    http_resp_free(&r);

    get("OPTIONS", "/api/chat", allowed, &r);
    assert_int_equal(r.status, 204);
    assert_true(http_has_header(
        &r, "Access-Control-Allow-Methods: GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS"));
    assert_true(http_has_header(&r, "Access-Control-Max-Age: 43200"));
    http_resp_free(&r);

    const char *evil[] = {"Origin: https://evil.example", NULL};
    get("GET", "/api/version", evil, &r);
    assert_int_equal(r.status, 403);
    assert_int_equal(r.body_len, 0);
    http_resp_free(&r);

    // Same origin as the Host header: not a CORS request.
    char same[128];
    snprintf(same, sizeof(same), "Origin: http://%s", srv.host);
    const char *same_h[] = {same, NULL};
    get("GET", "/api/version", same_h, &r);
    assert_int_equal(r.status, 200);
    assert_false(http_has_header(&r, "Access-Control-Allow-Origin"));
    http_resp_free(&r);
}

static void test_allowed_hosts(void **state)
{
    (void)state;
    struct http_resp r;
    const char *rebind[] = {"Host: attacker.example.com", NULL};
    get("GET", "/api/version", rebind, &r);
    assert_int_equal(r.status, 403);
    http_resp_free(&r);
    const char *ok_hosts[][2] = {{"Host: localhost:11434", NULL},
                                 {"Host: myhost.local", NULL},
                                 {"Host: 192.168.1.20:11434", NULL},
                                 {"Host: [::1]:11434", NULL}};
    for (size_t i = 0; i < sizeof(ok_hosts) / sizeof(ok_hosts[0]); i++) {
        get("GET", "/api/version", ok_hosts[i], &r);
        assert_int_equal(r.status, 200);
        http_resp_free(&r);
    }
    get("OPTIONS", "/api/version", ok_hosts[0], &r);
    assert_int_equal(r.status, 204);
    http_resp_free(&r);
}

// ---------------------------------------------------------------------------
// SIGTERM drains (issue 47): a server of its own, raw sockets.

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    assert_int_equal(write(fd, s, n), (ssize_t)n);
}

// Reads one message (headers and a Content-Length body, if any) into out; 2 s bound.
static void read_reply(int fd, char *out, size_t n)
{
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    size_t len = 0;
    out[0] = '\0';
    while (len + 1 < n) {
        ssize_t k = read(fd, out + len, n - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
        out[len] = '\0';
        const char *end = strstr(out, "\r\n\r\n");
        const char *cl = strcasestr(out, "Content-Length: ");
        if (end && (!cl || len >= (size_t)(end + 4 - out) + (size_t)atoi(cl + 16)))
            break;
    }
}

// A loopback listener that plays a registry which has not answered yet.
static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_sigterm_drains(void **state)
{
    (void)state;
    struct harness h;
    const char *env[] = {"OLLAMA_DRAIN_TIMEOUT=10s", NULL};
    assert_int_equal(harness_start(&h, env), 0);
    char reply[4096], json[256], req[512];
    // A kept-alive connection, and a request in flight: a pull whose
    // registry (this test) has not answered yet.
    int idle = connect_port(h.port);
    assert_true(idle >= 0);
    send_all(idle, "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    read_reply(idle, reply, sizeof(reply));
    assert_non_null(strstr(reply, "HTTP/1.1 200"));
    int reg_port, reg = listen_any(&reg_port);
    snprintf(json, sizeof(json),
             "{\"model\":\"127.0.0.1:%d/library/x:latest\",\"insecure\":true,\"stream\":false}",
             reg_port);
    snprintf(req, sizeof(req),
             "POST /api/pull HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(json), json);
    int busy = connect_port(h.port);
    assert_true(busy >= 0);
    send_all(busy, req);
    struct pollfd pfd = {.fd = reg, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1);
    int pulling = accept(reg, NULL, NULL);
    assert_true(pulling >= 0);
    read_reply(pulling, reply, sizeof(reply));  // the manifest request (headers only)
    assert_non_null(strstr(reply, "GET /v2/library/x/manifests/latest"));

    kill(h.pid, SIGTERM);
    harness_sleep_ms(300);
    // New connections are refused at once (a balancer retries elsewhere).
    assert_int_equal(connect_port(h.port), -1);
    // A request on the kept-alive connection: 503, Retry-After, closed.
    send_all(idle, "GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    read_reply(idle, reply, sizeof(reply));
    assert_non_null(strstr(reply, "HTTP/1.1 503"));
    assert_non_null(strcasestr(reply, "\r\nRetry-After: 1\r\n"));
    assert_non_null(strcasestr(reply, "\r\nConnection: close\r\n"));
    assert_non_null(strstr(reply, "{\"error\":\"server is shutting down\"}"));
    close(idle);
    // The request in flight still runs to its answer, then the server exits.
    int status;
    assert_int_equal(waitpid(h.pid, &status, WNOHANG), 0);
    send_all(pulling, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                      "Content-Length: 40\r\n\r\n{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\"}]}");
    close(pulling);
    close(reg);
    read_reply(busy, reply, sizeof(reply));
    assert_non_null(strstr(reply, "file does not exist"));
    close(busy);
    // No second signal: the drain ends by itself once the pull has answered.
    assert_int_equal(harness_wait_exit(&h, 10000), 0);
    assert_int_equal(harness_stop(&h), 0);
}

// A full load queue (OLLAMA_MAX_QUEUE=0: no request may wait for a load):
// 503 with Ollama's words and Retry-After, so a balancer tries another node.
static void test_busy_retry_after(void **state)
{
    (void)state;
    struct harness h;
    const char *env[] = {"OLLAMA_MAX_QUEUE=0", NULL};
    assert_int_equal(harness_start(&h, env), 0);
    char fx[512];
    test_fixture(fx, sizeof(fx), "stories260K.gguf");
    assert_int_equal(models_create(&h, "stories", fx, ""), 0);
    struct http_resp r;
    const char *body = "{\"model\":\"stories\",\"prompt\":\"hi\",\"stream\":false}";
    assert_int_equal(harness_request(&h, "POST", "/api/generate", NULL, body, &r), 0);
    assert_int_equal(r.status, 503);
    assert_true(http_has_header(&r, "Retry-After: 1"));
    assert_non_null(strstr(r.body, "server busy, please try again.  maximum pending requests "
                                   "exceeded"));
    http_resp_free(&r);
    assert_int_equal(harness_stop(&h), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_not_found_and_method),
        cmocka_unit_test(test_body_cap),
        cmocka_unit_test(test_cors),
        cmocka_unit_test(test_allowed_hosts),
        cmocka_unit_test(test_sigterm_drains),
        cmocka_unit_test(test_busy_retry_after),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

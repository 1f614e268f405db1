// Integration test of the server skeleton: a real `ollama serve` on a free
// loopback port answers /, /api/version, 404/405 as Gin does, caps request
// bodies, applies CORS and the allowed-host check, and exits cleanly on
// SIGTERM.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "integration/harness.h"
#include "integration/http.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_not_found_and_method),
        cmocka_unit_test(test_body_cap),
        cmocka_unit_test(test_cors),
        cmocka_unit_test(test_allowed_hosts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// The server's HTTP policy (server/policy.c): CORS origins against the
// OLLAMA_ORIGINS list and its defaults, and the allowed-hosts check that
// keeps a loopback server out of reach of DNS rebinding.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/internal.h"

static void env_clear_all(void)
{
    unsetenv("OLLAMA_ORIGINS");
}

static void test_env_origins(void **state)
{
    (void)state;
    env_clear_all();
    struct env_config c;
    env_config_load(&c);
    static const char *const yes[] = {
        "http://localhost",
        "https://localhost",
        "http://localhost:3000",
        "https://127.0.0.1:8080",
        "http://0.0.0.0:1",
        "app://obsidian.md",
        "file://",
        "tauri://localhost",
        "vscode-webview://abc",
        "vscode-file://vscode-app",
        "http://localhost:3000.evil.com",  // the wildcard matches anything after it, as upstream
    };
    static const char *const no[] = {
        "http://evil.com",           "chrome-extension://abc",
        "http://localhost.evil.com", "https://localhost.evil.com:443",
        "HTTP://LOCALHOST",          "",
        "http://127.0.0.2",          "null",
    };
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!srv_origin_allowed(c.origins, yes[i]))
            fail_msg("origin %s should be allowed", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (srv_origin_allowed(c.origins, no[i]))
            fail_msg("origin %s should be refused", no[i]);
    assert_false(srv_origin_allowed(c.origins, NULL));
    assert_false(srv_origin_allowed(NULL, "http://localhost"));
    env_config_deinit(&c);

    setenv("OLLAMA_ORIGINS", "*", 1);
    env_config_load(&c);
    assert_true(srv_origin_allowed(c.origins, "http://evil.com"));
    assert_true(srv_origin_allowed(c.origins, "chrome-extension://x"));
    env_config_deinit(&c);

    // An entry with two wildcards matches only itself; a prefix+suffix pattern
    // needs both ends.
    setenv("OLLAMA_ORIGINS", "http://*.example.*,https://*.example.com", 1);
    env_config_load(&c);
    assert_false(srv_origin_allowed(c.origins, "http://a.example.org"));
    assert_true(srv_origin_allowed(c.origins, "https://api.example.com"));
    assert_false(srv_origin_allowed(c.origins, "https://api.example.com.evil"));
    assert_false(srv_origin_allowed(c.origins, "https://.example.co"));
    env_config_deinit(&c);
    env_clear_all();
}

static void test_env_hosts(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "localhost:11434",
        "LOCALHOST",
        "localhost",
        "127.0.0.1:11434",
        "127.8.9.10",
        "[::1]:11434",
        "::1",
        "[::1]",
        "10.1.2.3",
        "172.16.0.1:80",
        "172.31.255.255",
        "192.168.1.1",
        "0.0.0.0",
        "[::]:1",
        "[fd00::1]:80",
        "fc00::5",
        "foo.localhost",
        "printer.local:631",
        "host.docker.internal",
        "HOST.DOCKER.INTERNAL:11434",
        "",
        "[::ffff:127.0.0.1]:80",
        "[::ffff:10.0.0.1]",
    };
    static const char *const no[] = {
        "8.8.8.8:80", "evil.com",   "evil.com:11434",     "example.com.evil", "localhost.evil.com",
        "172.32.0.1", "172.15.0.1", "192.169.1.1",        "[2001:db8::1]",    "11.0.0.1",
        "local",      "internal",   "evil.localhost.com",
    };
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!srv_host_allowed(yes[i]))
            fail_msg("host %s should be allowed", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (srv_host_allowed(no[i]))
            fail_msg("host %s should be refused", no[i]);
    assert_true(srv_host_allowed(NULL));
    char hostname[256] = {0};
    if (gethostname(hostname, sizeof(hostname) - 1) == 0 && hostname[0]) {
        char with_port[300];
        snprintf(with_port, sizeof(with_port), "%s:11434", hostname);
        assert_true(srv_host_allowed(hostname));
        assert_true(srv_host_allowed(with_port));
    }
    assert_true(srv_addr_is_loopback("127.0.0.1"));
    assert_true(srv_addr_is_loopback("127.1.2.3"));
    assert_true(srv_addr_is_loopback("::1"));
    assert_true(srv_addr_is_loopback("[::1]"));
    assert_true(srv_addr_is_loopback("localhost"));
    assert_false(srv_addr_is_loopback("0.0.0.0"));
    assert_false(srv_addr_is_loopback(""));
    assert_false(srv_addr_is_loopback("10.0.0.1"));
    assert_false(srv_addr_is_loopback(NULL));
}

static void test_same_origin(void **state)
{
    (void)state;
    assert_true(srv_same_origin("http://localhost:11434", "localhost:11434"));
    assert_true(srv_same_origin("https://example.com", "example.com"));
    assert_false(srv_same_origin("http://localhost:11434", "localhost:11435"));
    assert_false(srv_same_origin("ftp://localhost", "localhost"));
    assert_false(srv_same_origin("http://localhost", NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_origins),
        cmocka_unit_test(test_env_hosts),
        cmocka_unit_test(test_same_origin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

// Integration-test harness: starts the real `ollama serve` as a child
// process on a free loopback port with a temporary model store, waits until
// it answers, and stops it with SIGTERM (checking it exits cleanly).
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "integration/http.h"

struct harness {
    pid_t pid;
    int port;
    char base_url[64];
    char host[32];      // "127.0.0.1:PORT"
    char tmp_dir[256];  // removed by harness_stop
    char models_dir[300];
    char log_path[300];
    int exit_status;  // set by harness_wait_exit when the server ended itself
};

static inline int harness_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static inline const char *harness_bin(void)
{
    const char *b = getenv("OLLAMA_BIN");
    return b && *b ? b : "ollama";
}

static inline bool harness_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static inline void harness_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Starts `ollama serve`. extra_env: NULL-terminated "KEY=VALUE" list or NULL.
// Returns 0 when the server answers within 20 s.
static inline int harness_start(struct harness *h, const char *const *extra_env)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->tmp_dir, sizeof(h->tmp_dir), "/tmp/ollama-it-XXXXXX");
    if (!mkdtemp(h->tmp_dir))
        return -1;
    snprintf(h->models_dir, sizeof(h->models_dir), "%s/models", h->tmp_dir);
    snprintf(h->log_path, sizeof(h->log_path), "%s/serve.log", h->tmp_dir);
    h->port = harness_free_port();
    if (h->port <= 0)
        return -1;
    snprintf(h->host, sizeof(h->host), "127.0.0.1:%d", h->port);
    snprintf(h->base_url, sizeof(h->base_url), "http://127.0.0.1:%d", h->port);
    h->pid = fork();
    if (h->pid < 0)
        return -1;
    if (h->pid == 0) {
        int fd = open(h->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setenv("OLLAMA_HOST", h->host, 1);
        setenv("OLLAMA_MODELS", h->models_dir, 1);
        setenv("HOME", h->tmp_dir, 1);
        // SIGTERM stops at once (as before drains existed) unless a test
        // asks for a drain: a test's last stream must not hold teardown 5 s.
        setenv("OLLAMA_DRAIN_TIMEOUT", "0", 1);
        for (const char *const *e = extra_env; e && *e; e++)
            putenv((char *)*e);
        execl(harness_bin(), "ollama", "serve", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        if (harness_port_open(h->port))
            return 0;
        int status;
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            h->pid = 0;
            return -1;
        }
        harness_sleep_ms(50);
    }
    return -1;
}

// The pid of a live `ollama runner` child of the server (from /proc), or 0.
static inline pid_t harness_runner_pid(const struct harness *h)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    pid_t found = 0;
    while (d && (de = readdir(d)) && !found) {
        char path[300], stat[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
        stat[n] = '\0';
        const char *rp = strrchr(stat, ')');
        int ppid = 0;
        char st;
        if (!rp || sscanf(rp + 2, "%c %d", &st, &ppid) != 2 || ppid != h->pid || st == 'Z')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        char cmd[512];
        n = fread(cmd, 1, sizeof(cmd) - 1, f);
        fclose(f);
        if (n > 7 && memmem(cmd, n, "runner", 6))
            found = (pid_t)atoi(de->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

// Prints the server log (for failures).
static inline void harness_dump_log(const struct harness *h)
{
    FILE *f = fopen(h->log_path, "r");
    if (!f)
        return;
    char line[1024];
    fprintf(stderr, "---- ollama serve log ----\n");
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fclose(f);
}

// SIGTERM, wait (10 s), remove the temp dir. Returns the exit status (or -1
// if it had to be killed or died by a signal).
// Waits up to timeout_ms for the server to end by itself (a drain that
// finished, say) without signalling it. Its exit status, or -1 when it is
// still running or died of a signal; harness_stop then only cleans up.
static inline int harness_wait_exit(struct harness *h, int timeout_ms)
{
    for (int waited = 0; h->pid > 0 && waited <= timeout_ms; waited += 20) {
        int status;
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            h->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            h->pid = 0;
            return h->exit_status;
        }
        harness_sleep_ms(20);
    }
    return -1;
}

static inline int harness_stop(struct harness *h)
{
    int result = h->pid > 0 ? -1 : h->exit_status;
    if (h->pid > 0) {
        kill(h->pid, SIGTERM);
        for (int i = 0; i < 200; i++) {
            int status;
            if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
                result = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                h->pid = 0;
                break;
            }
            harness_sleep_ms(50);
        }
        if (h->pid > 0) {
            kill(h->pid, SIGKILL);
            waitpid(h->pid, NULL, 0);
            h->pid = 0;
        }
    }
    if (result != 0)
        harness_dump_log(h);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", h->tmp_dir);
    return result;
}

// A cmocka group's setup: curl's globals, then the server (its log printed
// when it does not start). extra_env as for harness_start. 0 on success.
static inline int harness_setup(struct harness *h, const char *const *extra_env)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (harness_start(h, extra_env) != 0) {
        harness_dump_log(h);
        return -1;
    }
    return 0;
}

// A cmocka group's teardown: stops the server, then curl's globals. 0 when
// the server exited cleanly.
static inline int harness_teardown(struct harness *h)
{
    int rc = harness_stop(h);
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

// One request to path on h's server (body NULL: none); 0 when it went
// through (any status), as http_request.
static inline int harness_request(const struct harness *h, const char *method, const char *path,
                                  const char *const *headers, const char *body, struct http_resp *r)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", h->base_url, path);
    return http_request(url, method, headers, body, body ? strlen(body) : 0, 0, r);
}

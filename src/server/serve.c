// `ollama serve`: configuration from the environment, start-up checks, the
// listening log line, and a clean shutdown on SIGINT / SIGTERM.
#include "server/internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void log_config(const struct env_config *c)
{
    struct buf map, kv;
    buf_init(&map, 1 << 16);
    buf_init(&kv, 1 << 17);
    if (env_config_describe(c, &map) == 0 && buf_printf(&kv, "env=\"%s\"", buf_cstr(&map)) == 0)
        log_kv(LOG_INFO, buf_cstr(&kv), "server config");
    buf_deinit(&map);
    buf_deinit(&kv);
}

// SIGTERM (systemd stop, a rolling restart): stop accepting and let the
// requests in flight, streams included, finish within timeout_ns. A second
// SIGTERM or a SIGINT ends the wait at once.
static void drain(struct server *srv, const sigset_t *sigs, int64_t timeout_ns)
{
    server_drain(srv);
    int n = server_requests_active(srv);
    if (n == 0)
        return;
    char d[64];
    duration_format(timeout_ns, d, sizeof(d));
    log_info("draining: %d request(s) in flight, waiting up to %s", n, d);
    int64_t deadline = time_monotonic_ns() + timeout_ns;
    while ((n = server_requests_active(srv)) > 0 && time_monotonic_ns() < deadline) {
        struct timespec step = {0, 20 * 1000000L};
        if (sigtimedwait(sigs, NULL, &step) > 0) {
            log_info("second signal: stopping now");
            break;
        }
    }
    if (n > 0)
        log_warn("drain: %d request(s) still running, ending them", n);
    else
        log_info("drained");
}

int server_main(const char *self_exe)
{
    struct env_config cfg;
    env_config_load(&cfg);
    log_set_level(cfg.debug_level);
    log_config(&cfg);

    struct err e = {0};
    if (fs_mkdir_p(cfg.models_dir, &e) < 0) {
        fprintf(stderr, "Error: %s: ensure path elements are traversable\n", e.msg);
        env_config_deinit(&cfg);
        return 1;
    }

    // Block the shutdown signals in every thread; this one waits for them.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct server *srv = NULL;
    struct server_options opts = {.cfg = &cfg, .self_exe = self_exe};
    if (server_start(&srv, &opts, &e) < 0) {
        fprintf(stderr, "Error: %s\n", e.msg);
        env_config_deinit(&cfg);
        return 1;
    }
    struct host_addr bound = cfg.host;
    bound.port = server_port(srv);
    char url[300];
    host_format_url(&bound, url, sizeof(url));
    log_info("Listening on %s (version %s)", url + strlen(bound.scheme) + 3, OLLAMA_VERSION);

    int sig = 0;
    sigwait(&sigs, &sig);
    log_info("received %s, shutting down", sig == SIGINT ? "interrupt" : "terminate");
    if (sig == SIGTERM && cfg.drain_timeout_ns > 0)
        drain(srv, &sigs, cfg.drain_timeout_ns);
    server_stop(srv);
    env_config_deinit(&cfg);
    return 0;
}

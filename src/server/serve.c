// `ollama serve`: configuration from the environment, start-up checks, the
// listening log line, and a clean shutdown on SIGINT / SIGTERM.
#include "server/internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

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
    server_stop(srv);
    env_config_deinit(&cfg);
    return 0;
}

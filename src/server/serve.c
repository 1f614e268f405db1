// `ollama serve`: configuration from the environment, start-up checks, the
// listening log line, and a clean shutdown on SIGINT / SIGTERM.
#include "server/internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void log_config(const struct env_config *c)
{
    char url[300], keep[32];
    host_format_url(&c->host, url, sizeof(url));
    duration_format(c->keep_alive_ns, keep, sizeof(keep));
    char *kv = xasprintf("OLLAMA_HOST=%s OLLAMA_MODELS=%s OLLAMA_KEEP_ALIVE=%s "
                         "OLLAMA_NUM_PARALLEL=%llu OLLAMA_MAX_LOADED_MODELS=%llu "
                         "OLLAMA_MAX_QUEUE=%llu OLLAMA_KV_CACHE_TYPE=%s OLLAMA_NOPRUNE=%s",
                         url, c->models_dir, keep, (unsigned long long)c->num_parallel,
                         (unsigned long long)c->max_loaded_models,
                         (unsigned long long)c->max_queue, c->kv_cache_type,
                         c->noprune ? "true" : "false");
    log_kv(LOG_INFO, kv, "server config");
    free(kv);
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

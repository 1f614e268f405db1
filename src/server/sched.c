// The scheduler (docs/spec/scheduler.md): one runner process per model file,
// reference counted, reused while its load options match, expiring after its
// keep-alive, evicted least-recently-used (shortest keep-alive first) when
// the number of loaded models or memory does not allow another, and a strict
// FIFO queue of pending loads (one load at a time, bounded by
// OLLAMA_MAX_QUEUE). A background thread reaps runners that died or expired.
//
// Lock order: s->mu only. Starting, health-polling and killing a runner
// happen with the lock released; the runner is marked loading / unloading
// meanwhile so nobody else uses it.
#include "server/sched.h"
#include "vision/vision.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/model.h"
#include "server/runner_client.h"

#define SCHED_ERR_TAIL 8192
#define FOREVER_NS     ((int64_t)292 * 365 * 24 * 3600 * 1000000000LL)

struct sched_runner {
    char *model_path, *name, *digest;
    char *draft_path;      // NULL: no draft model
    char **adapter_paths;  // --lora, [n_adapters]
    size_t n_adapters;
    // NULL: no separate vision projector (runner --mmproj).
    char *projector_path;
    json_t *details;
    pid_t pid;
    uint16_t port;
    int n_ctx, n_batch, n_threads, n_parallel;
    bool embedding;
    uint64_t size_bytes;
    // Guarded by sched.mu:
    int refs;
    int64_t keep_alive_ns;  // session duration (< 0 never expires)
    int64_t expires_at_ns;  // wall clock
    int64_t last_used_ns;   // monotonic, for LRU
    bool loading;           // being started; not usable yet
    bool expired;           // unload as soon as idle
    // Outside sched.mu: sched_runner_alive runs on request threads, so the
    // reaping thread (waitpid returns the pid to one caller only) writes
    // exit_status, then publishes exited.
    atomic_bool exited;  // the process is gone (reaped)
    int exit_status;     // valid once exited reads true
    // Output capture (own mutex: written by the log thread).
    int log_fd;
    pthread_t log_thread;
    bool log_thread_started;
    pthread_mutex_t err_mu;
    char err_tail[SCHED_ERR_TAIL];
    size_t err_len;
    struct sched_runner *next;
};

struct waiter {
    bool (*cancelled)(void *);
    void *cancel_ctx;
    struct waiter *next;
};

struct sched {
    struct sched_config cfg;
    char *self_exe;
    char *kv_type;
    pthread_mutex_t mu;
    pthread_cond_t cv;             // any change of runners or the queue
    struct sched_runner *runners;  // (mu)
    struct waiter *queue_head;     // pending loads, FIFO (mu)
    struct waiter *queue_tail;
    uint64_t pending;  // (mu)
    bool stopping;     // (mu)
    pthread_t reaper;
    // Runners are forked by one long-lived thread: PR_SET_PDEATHSIG fires
    // when the forking *thread* exits, and connection threads are short-lived.
    pthread_t spawner;
    pthread_mutex_t spawn_mu;
    pthread_cond_t spawn_cv;
    struct sched_runner *spawn_req;  // (spawn_mu) runner to start, NULL when idle
    bool spawn_done;                 // (spawn_mu)
    int spawn_rc;                    // (spawn_mu)
    struct err spawn_err;            // (spawn_mu)
    bool spawn_stop;                 // (spawn_mu)
};

// ---------------------------------------------------------------------------
// Runner output: copied to the server log; error-like lines remembered for
// user-visible messages (scheduler.md §9).

static bool error_like(const char *line)
{
    static const char *const prefixes[] = {
        "error:", "Error:", "panic:", "fatal error:", "error loading model"};
    static const char *const contains[] = {"CUDA error",          "ROCm error",
                                           "cudaMalloc failed",   "GGML_ASSERT",
                                           "error loading model", "level=ERROR"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (cstr_starts_with(line, prefixes[i]))
            return true;
    for (size_t i = 0; i < sizeof(contains) / sizeof(contains[0]); i++)
        if (strstr(line, contains[i]))
            return true;
    return false;
}

static void remember_error(struct sched_runner *r, const char *line)
{
    pthread_mutex_lock(&r->err_mu);
    size_t n = strlen(line);
    if (n >= SCHED_ERR_TAIL / 2)
        n = SCHED_ERR_TAIL / 2 - 1;
    if (r->err_len + n + 2 > SCHED_ERR_TAIL) {
        // Keep the newest lines: drop the oldest half.
        size_t drop = r->err_len / 2;
        memmove(r->err_tail, r->err_tail + drop, r->err_len - drop);
        r->err_len -= drop;
    }
    if (r->err_len)
        r->err_tail[r->err_len++] = '\n';
    memcpy(r->err_tail + r->err_len, line, n);
    r->err_len += n;
    r->err_tail[r->err_len] = '\0';
    pthread_mutex_unlock(&r->err_mu);
}

static void *log_thread_main(void *arg)
{
    struct sched_runner *r = arg;
    struct buf line;
    buf_init(&line, 1 << 20);
    char chunk[4096];
    for (;;) {
        ssize_t n = read(r->log_fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] != '\n') {
                buf_append_char(&line, chunk[i]);
                continue;
            }
            fprintf(stderr, "%s\n", buf_cstr(&line));
            if (error_like(buf_cstr(&line)))
                remember_error(r, buf_cstr(&line));
            buf_reset(&line);
        }
    }
    if (line.len) {
        fprintf(stderr, "%s\n", buf_cstr(&line));
        if (error_like(buf_cstr(&line)))
            remember_error(r, buf_cstr(&line));
    }
    buf_deinit(&line);
    return NULL;
}

void sched_runner_last_error(const struct sched_runner *r, char *out, size_t n)
{
    pthread_mutex_lock((pthread_mutex_t *)&r->err_mu);
    // The last line is the most useful one.
    const char *last = strrchr(r->err_tail, '\n');
    snprintf(out, n, "%s", last ? last + 1 : r->err_tail);
    pthread_mutex_unlock((pthread_mutex_t *)&r->err_mu);
}

uint16_t sched_runner_port(const struct sched_runner *r)
{
    return r->port;
}

int sched_runner_n_ctx(const struct sched_runner *r)
{
    return r->n_ctx;
}

// ---------------------------------------------------------------------------
// Processes

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    if (port <= 0)
        port = 49152 + (int)(time_monotonic_ns() % 16383);
    return port;
}

// The runner's command line; argv points into the struct's own strings.
struct runner_cmd {
    char port[16], ctx[16], par[16], batch[16], threads[16];
    const char *argv[26 + 2 * SCHED_MAX_ADAPTERS];
};

static void runner_cmd(struct runner_cmd *c, const struct sched *s, const struct sched_runner *r)
{
    snprintf(c->port, sizeof(c->port), "%u", r->port);
    snprintf(c->ctx, sizeof(c->ctx), "%d", r->n_ctx);
    snprintf(c->par, sizeof(c->par), "%d", r->n_parallel);
    snprintf(c->batch, sizeof(c->batch), "%d", r->n_batch);
    snprintf(c->threads, sizeof(c->threads), "%d", r->n_threads);
    const char **argv = c->argv;
    int argc = 0;
#define ARG2(flag, value)                                                                          \
    do {                                                                                           \
        argv[argc++] = flag;                                                                       \
        argv[argc++] = value;                                                                      \
    } while (0)
    argv[argc++] = "ollama";
    argv[argc++] = "runner";
    ARG2("--model", r->model_path);
    if (r->draft_path)
        ARG2("--draft", r->draft_path);
    for (size_t i = 0; i < r->n_adapters && i < SCHED_MAX_ADAPTERS; i++)
        ARG2("--lora", r->adapter_paths[i]);
    if (r->projector_path)
        ARG2("--mmproj", r->projector_path);
    ARG2("--port", c->port);
    ARG2("--ctx-size", c->ctx);
    ARG2("--parallel", c->par);
    if (r->n_batch > 0)
        ARG2("--batch-size", c->batch);
    if (r->n_threads > 0)
        ARG2("--threads", c->threads);
    ARG2("--kv-cache-type", s->kv_type);
#undef ARG2
    if (r->embedding)
        argv[argc++] = "--embedding";
    argv[argc] = NULL;
}

// In the forked child: the runner dies with the server, its output goes to
// the pipe's write end.
_Noreturn static void exec_runner(const struct sched *s, int out_fd, const char *const *argv)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    int dn = open("/dev/null", O_RDONLY);
    if (dn >= 0)
        dup2(dn, 0);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    execv(s->self_exe, (char *const *)argv);
    fprintf(stderr, "error: exec %s: %s\n", s->self_exe, strerror(errno));
    _exit(127);
}

static int spawn_here(struct sched *s, struct sched_runner *r, struct err *e)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return err_set(e, ERR_IO, "pipe: %s", strerror(errno));
    r->port = (uint16_t)free_port();
    struct runner_cmd c;
    runner_cmd(&c, s, r);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_set(e, ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0)
        exec_runner(s, fds[1], c.argv);
    close(fds[1]);
    r->pid = pid;
    r->log_fd = fds[0];
    if (pthread_create(&r->log_thread, NULL, log_thread_main, r) == 0)
        r->log_thread_started = true;
    char *cmd = xasprintf("%s runner --model %s%s%s --port %s --ctx-size %s --parallel %s",
                          s->self_exe, r->model_path, r->draft_path ? " --draft " : "",
                          r->draft_path ? r->draft_path : "", c.port, c.ctx, c.par);
    log_info("starting runner: %s", cmd);
    for (size_t i = 0; i < r->n_adapters; i++)
        log_info("runner LoRA adapter: %s", r->adapter_paths[i]);
    free(cmd);
    return 0;
}

static void *spawner_main(void *arg)
{
    struct sched *s = arg;
    pthread_mutex_lock(&s->spawn_mu);
    for (;;) {
        while (!s->spawn_req && !s->spawn_stop)
            pthread_cond_wait(&s->spawn_cv, &s->spawn_mu);
        if (s->spawn_stop)
            break;
        struct sched_runner *r = s->spawn_req;
        err_clear(&s->spawn_err);
        s->spawn_rc = spawn_here(s, r, &s->spawn_err);
        s->spawn_req = NULL;
        s->spawn_done = true;
        pthread_cond_broadcast(&s->spawn_cv);
    }
    pthread_mutex_unlock(&s->spawn_mu);
    return NULL;
}

// Starts r's process on the spawner thread (one spawn at a time: loads are
// serialised by the queue anyway).
static int spawn(struct sched *s, struct sched_runner *r, struct err *e)
{
    pthread_mutex_lock(&s->spawn_mu);
    while (s->spawn_req)
        pthread_cond_wait(&s->spawn_cv, &s->spawn_mu);
    s->spawn_req = r;
    s->spawn_done = false;
    pthread_cond_broadcast(&s->spawn_cv);
    while (!s->spawn_done)
        pthread_cond_wait(&s->spawn_cv, &s->spawn_mu);
    int rc = s->spawn_rc;
    if (rc < 0)
        err_set(e, s->spawn_err.code, "%s", s->spawn_err.msg);
    s->spawn_done = false;
    pthread_cond_broadcast(&s->spawn_cv);
    pthread_mutex_unlock(&s->spawn_mu);
    return rc;
}

// Non-blocking check whether the process has exited (reaps it). Caller
// holds s->mu or owns r exclusively.
static bool check_exited(struct sched_runner *r)
{
    if (r->exited)
        return true;
    int status;
    pid_t got = waitpid(r->pid, &status, WNOHANG);
    if (got == r->pid) {
        r->exit_status = status;
        atomic_store(&r->exited, true);
    }
    return r->exited;
}

bool sched_runner_alive(struct sched_runner *r)
{
    return !check_exited(r);
}

static void exit_text(const struct sched_runner *r, char *out, size_t n)
{
    if (WIFEXITED(r->exit_status))
        snprintf(out, n, "exit status %d", WEXITSTATUS(r->exit_status));
    else if (WIFSIGNALED(r->exit_status))
        snprintf(out, n, "signal: %s", strsignal(WTERMSIG(r->exit_status)));
    else
        snprintf(out, n, "exited");
}

// Kills and reaps the process, joins the log thread, frees r. r must no
// longer be reachable from the runner list.
static void runner_destroy(struct sched_runner *r)
{
    if (r->pid > 0 && !r->exited) {
        kill(r->pid, SIGKILL);
        int status;
        while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
            ;
        r->exited = true;
    }
    if (r->log_thread_started)
        pthread_join(r->log_thread, NULL);
    if (r->log_fd > 0)
        close(r->log_fd);
    pthread_mutex_destroy(&r->err_mu);
    free(r->model_path);
    free(r->draft_path);
    for (size_t i = 0; i < r->n_adapters; i++)
        free(r->adapter_paths[i]);
    free(r->adapter_paths);
    free(r->projector_path);
    free(r->name);
    free(r->digest);
    json_decref(r->details);
    free(r);
}

// Polls the runner's /health until ready, failed, exited or stalled.
static int wait_ready(struct sched *s, struct sched_runner *r, struct err *e)
{
    double last_progress = -1;
    int64_t last_change = time_monotonic_ns();
    for (;;) {
        if (check_exited(r)) {
            char status[64], last[1024];
            exit_text(r, status, sizeof(status));
            // Give the log thread a moment to drain the last lines.
            if (r->log_thread_started) {
                pthread_join(r->log_thread, NULL);
                r->log_thread_started = false;
            }
            sched_runner_last_error(r, last, sizeof(last));
            return err_set(e, ERR_INTERNAL, "llama runner process has terminated: %s%s%s", status,
                           last[0] ? ": " : "", last);
        }
        json_t *h = NULL;
        struct err he = {0};
        if (runner_http_json(r->port, "/health", NULL, 2000, NULL, &h, &he) == 0) {
            const char *st = json_string_value(json_object_get(h, "status"));
            double progress = json_number_value(json_object_get(h, "progress"));
            if (st && strcmp(st, "ok") == 0) {
                json_decref(h);
                return 0;
            }
            if (st && strcmp(st, "error") == 0) {
                const char *msg = json_string_value(json_object_get(h, "error"));
                int rc = err_set(e, ERR_INTERNAL, "llama runner process has terminated: %s",
                                 msg ? msg : "error");
                json_decref(h);
                return rc;
            }
            if (progress != last_progress) {
                last_progress = progress;
                last_change = time_monotonic_ns();
            }
            json_decref(h);
        }
        if (s->cfg.load_timeout_ns > 0 &&
            time_monotonic_ns() - last_change > s->cfg.load_timeout_ns) {
            char last[1024];
            sched_runner_last_error(r, last, sizeof(last));
            return err_set(e, ERR_TIMEOUT,
                           "timed out waiting for llama runner to start - progress %.2f - %s",
                           last_progress < 0 ? 0.0 : last_progress, last);
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

// ---------------------------------------------------------------------------
// Bookkeeping (all with s->mu held)

static struct sched_runner *find_runner(struct sched *s, const char *model_path)
{
    for (struct sched_runner *r = s->runners; r; r = r->next)
        if (strcmp(r->model_path, model_path) == 0)
            return r;
    return NULL;
}

static void unlink_runner(struct sched *s, struct sched_runner *r)
{
    for (struct sched_runner **p = &s->runners; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            return;
        }
    }
}

static int count_runners(struct sched *s)
{
    int n = 0;
    for (struct sched_runner *r = s->runners; r; r = r->next)
        n++;
    return n;
}

static int64_t effective_keep_alive(const struct sched *s, const struct sched_request *rq)
{
    return rq->keep_alive_set ? rq->keep_alive_ns : s->cfg.default_keep_alive_ns;
}

static void set_expiry(struct sched_runner *r)
{
    int64_t now = time_now_ns();
    r->expires_at_ns = r->keep_alive_ns < 0 ? now + FOREVER_NS : now + r->keep_alive_ns;
}

// Whether the runner was started with exactly the request's adapters (in
// order: Ollama compares the lists).
static bool same_adapters(const struct sched_runner *r, const struct sched_request *rq)
{
    if (r->n_adapters != rq->n_adapters)
        return false;
    for (size_t i = 0; i < r->n_adapters; i++)
        if (strcmp(r->adapter_paths[i], rq->adapter_paths[i]) != 0)
            return false;
    return true;
}

static bool needs_reload(const struct sched_runner *r, const struct sched_request *rq,
                         int n_parallel)
{
    const char *draft = rq->draft_path ? rq->draft_path : "";
    return r->n_ctx != rq->n_ctx || r->embedding != rq->embedding || !same_adapters(r, rq) ||
           strcmp(r->draft_path ? r->draft_path : "", draft) != 0 ||
           strcmp(r->projector_path ? r->projector_path : "",
                  rq->projector_path ? rq->projector_path : "") != 0 ||
           (rq->n_batch > 0 && r->n_batch != rq->n_batch) ||
           (rq->n_threads > 0 && r->n_threads != rq->n_threads) || r->n_parallel != n_parallel;
}

// Unloads an idle runner: unlinks it, then kills it with the lock released.
static void unload_locked(struct sched *s, struct sched_runner *r)
{
    unlink_runner(s, r);
    log_info("unloading model %s", r->name);
    pthread_mutex_unlock(&s->mu);
    runner_destroy(r);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
}

// Eviction candidate (scheduler.md §7): shortest keep-alive first (forever
// last), then least recently used; idle runners before busy ones.
static struct sched_runner *pick_victim(struct sched *s)
{
    struct sched_runner *best = NULL;
    for (int pass = 0; pass < 2 && !best; pass++) {
        for (struct sched_runner *r = s->runners; r; r = r->next) {
            if (r->loading || (pass == 0 && r->refs > 0))
                continue;
            if (!best) {
                best = r;
                continue;
            }
            int64_t ka = r->keep_alive_ns < 0 ? INT64_MAX : r->keep_alive_ns;
            int64_t kb = best->keep_alive_ns < 0 ? INT64_MAX : best->keep_alive_ns;
            if (ka < kb || (ka == kb && r->last_used_ns < best->last_used_ns))
                best = r;
        }
    }
    return best;
}

// Expires r and unloads it if idle; otherwise the caller waits for its
// requests to finish.
static void expire_locked(struct sched *s, struct sched_runner *r)
{
    r->expired = true;
    if (r->refs == 0 && !r->loading)
        unload_locked(s, r);
}

static uint64_t mem_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

static void gib(uint64_t bytes, char *out, size_t n)
{
    snprintf(out, n, "%.1f GiB", (double)bytes / (1024.0 * 1024 * 1024));
}

// ---------------------------------------------------------------------------
// Reaper: expired idle runners are unloaded; dead ones forgotten.

static void *reaper_main(void *arg)
{
    struct sched *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        bool changed = true;
        while (changed && !s->stopping) {
            changed = false;
            int64_t now = time_now_ns();
            for (struct sched_runner *r = s->runners; r; r = r->next) {
                if (r->loading)
                    continue;
                bool dead = check_exited(r);
                if (dead && !r->expired)
                    log_warn("runner for %s exited unexpectedly", r->name);
                if (dead)
                    r->expired = true;
                if (r->refs == 0 &&
                    (r->expired || (r->keep_alive_ns >= 0 && now >= r->expires_at_ns))) {
                    unload_locked(s, r);
                    changed = true;
                    break;  // the list changed
                }
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sched_new(struct sched **out, const struct sched_config *cfg, struct err *e)
{
    struct sched *s = xcalloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->self_exe = xstrdup(cfg->self_exe ? cfg->self_exe : "/proc/self/exe");
    s->kv_type = xstrdup(cfg->kv_cache_type && *cfg->kv_cache_type ? cfg->kv_cache_type : "f16");
    if (s->cfg.max_loaded == 0)
        s->cfg.max_loaded = 3;
    if (s->cfg.num_parallel == 0)
        s->cfg.num_parallel = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->spawn_mu, NULL);
    pthread_cond_init(&s->spawn_cv, NULL);
    if (pthread_create(&s->spawner, NULL, spawner_main, s) != 0) {
        free(s->self_exe);
        free(s->kv_type);
        free(s);
        return err_set(e, ERR_INTERNAL, "cannot start scheduler thread");
    }
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        free(s->self_exe);
        free(s->kv_type);
        free(s);
        return err_set(e, ERR_INTERNAL, "cannot start scheduler thread");
    }
    *out = s;
    return 0;
}

void sched_shutdown(struct sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    for (struct sched_runner *r = s->runners; r; r = r->next) {
        r->expired = true;
        if (r->pid > 0 && !r->exited)
            kill(r->pid, SIGKILL);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_free(struct sched *s)
{
    if (!s)
        return;
    sched_shutdown(s);
    pthread_join(s->reaper, NULL);
    pthread_mutex_lock(&s->spawn_mu);
    s->spawn_stop = true;
    pthread_cond_broadcast(&s->spawn_cv);
    pthread_mutex_unlock(&s->spawn_mu);
    pthread_join(s->spawner, NULL);
    pthread_mutex_destroy(&s->spawn_mu);
    pthread_cond_destroy(&s->spawn_cv);
    // Requests still running lose their runner; the HTTP layer has stopped.
    struct sched_runner *r = s->runners;
    s->runners = NULL;
    while (r) {
        struct sched_runner *next = r->next;
        runner_destroy(r);
        r = next;
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->self_exe);
    free(s->kv_type);
    free(s);
}

// ---------------------------------------------------------------------------
// Acquire / release

static void queue_remove(struct sched *s, struct waiter *w)
{
    struct waiter *prev = NULL;
    for (struct waiter *q = s->queue_head; q; prev = q, q = q->next) {
        if (q != w)
            continue;
        if (prev)
            prev->next = q->next;
        else
            s->queue_head = q->next;
        if (s->queue_tail == q)
            s->queue_tail = prev;
        break;
    }
    s->pending--;
    pthread_cond_broadcast(&s->cv);
}

static void timed_wait(struct sched *s, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

// Takes r for a request (s->mu held).
static void take(struct sched *s, struct sched_runner *r, const struct sched_request *rq)
{
    r->refs++;
    r->last_used_ns = time_monotonic_ns();
    if (rq->keep_alive_set)
        r->keep_alive_ns = rq->keep_alive_ns;
    set_expiry(r);
    (void)s;
}

// Health check of a ready runner (1 s).
static bool runner_ping(struct sched_runner *r)
{
    json_t *h = NULL;
    long status = 0;
    int rc = runner_http_json(r->port, "/health", NULL, 1000, &status, &h, NULL);
    const char *st = rc == 0 ? json_string_value(json_object_get(h, "status")) : NULL;
    bool ok = status == 200 && st && strcmp(st, "ok") == 0;
    json_decref(h);
    return ok;
}

static bool usable(struct sched_runner *r, const struct sched_request *rq, int n_parallel)
{
    return !r->loading && !r->expired && !check_exited(r) && !needs_reload(r, rq, n_parallel);
}

// The vision tower's weights and one encode's activations: the --mmproj
// file's, or the model file's own tower (Ollama's layout).
static int estimate_vision(const struct sched_request *rq, struct model_memory *mem, struct err *e)
{
    const char *path = rq->projector_path && *rq->projector_path ? rq->projector_path : NULL;
    struct vision_model *vm = NULL;
    int rc = vision_model_load(&vm, path ? path : rq->model_path, 1, e);
    if (rc == ERR_UNSUPPORTED) {
        err_clear(e);
        return 0;  // a text-only model, or a tower the runner will not load
    }
    if (rc < 0)
        return rc;
    uint64_t w = path ? vision_model_weights_bytes(vm) : 0;  // else counted with the model
    uint64_t s = vision_model_scratch_bytes(vm);
    vision_model_free(vm);
    mem->weights_bytes += w;
    mem->scratch_bytes += s;
    mem->total_bytes += w + s;
    return 0;
}

// The memory a load would take, from the file header alone (run unlocked).
static int estimate_memory(struct sched *s, const struct sched_request *rq, int n_parallel,
                           struct model_memory *mem, struct err *e)
{
    struct model_options mo = {.n_ctx = rq->n_ctx,
                               .n_batch = rq->n_batch,
                               .n_slots = n_parallel,
                               .n_threads = rq->n_threads,
                               .kv_type = model_kv_type_parse(s->kv_type) < 0
                                              ? MODEL_KV_F16
                                              : (enum model_kv_type)model_kv_type_parse(s->kv_type),
                               .embeddings = rq->embedding,
                               .lora_paths = (const char *const *)rq->adapter_paths,
                               .n_lora = (int)rq->n_adapters};
    if (rq->n_adapters > SCHED_MAX_ADAPTERS)
        return err_set(e, ERR_INVALID, "too many adapters (%zu, at most %d)", rq->n_adapters,
                       SCHED_MAX_ADAPTERS);
    int rc = model_estimate(rq->model_path, &mo, mem, e);
    mo.n_lora = 0;  // the draft model runs without the adapters
    struct model_memory dm;
    if (rc == 0 && rq->draft_path && *rq->draft_path) {  // loaded beside it, same context
        if ((rc = model_estimate(rq->draft_path, &mo, &dm, e)) < 0)
            return rc;
        mem->weights_bytes += dm.weights_bytes;
        mem->kv_bytes += dm.kv_bytes;
        mem->scratch_bytes += dm.scratch_bytes;
        mem->total_bytes += dm.total_bytes;
    }
    if (rc == 0)
        rc = estimate_vision(rq, mem, e);
    return rc;
}

// Joins the back of the load queue (s->mu held).
static void queue_add(struct sched *s, struct waiter *w)
{
    if (s->queue_tail)
        s->queue_tail->next = w;
    else
        s->queue_head = w;
    s->queue_tail = w;
    s->pending++;
}

// A queued request stops waiting when the server shuts down or its client goes away
// (s->mu held). Returns 0 to keep waiting.
static int waiter_abandoned(struct sched *s, const struct waiter *w, struct err *e)
{
    if (s->stopping)
        return err_set(e, ERR_CANCELLED, "server is shutting down");
    if (w->cancelled && w->cancelled(w->cancel_ctx))
        return err_set(e, ERR_CANCELLED, "client connection closed before the model loaded");
    return 0;
}

// Whether a new runner fits (s->mu held): 0 when it does; 1 when too many runners are
// loaded or memory is short, after starting to evict one (the caller waits and retries);
// ERR_NOMEM when the model is larger than all the memory available.
static int room_for(struct sched *s, const struct sched_request *rq, const struct model_memory *mem,
                    struct err *e)
{
    int loaded = count_runners(s);
    uint64_t avail = mem_available_bytes();
    bool too_many = (uint64_t)loaded >= s->cfg.max_loaded;
    bool no_room = avail && loaded > 0 && (double)mem->total_bytes > 0.8 * (double)avail;
    if (too_many || no_room) {
        struct sched_runner *v = pick_victim(s);
        if (v && !v->expired) {
            log_info("evicting %s to make room for %s", v->name, rq->name);
            expire_locked(s, v);
        }
        return 1;
    }
    if (avail && mem->total_bytes > avail) {
        char need[32], have[32];
        gib(mem->total_bytes, need, sizeof(need));
        gib(avail, have, sizeof(have));
        return err_set(e, ERR_NOMEM,
                       "model requires more system memory (%s) than is available (%s)", need, have);
    }
    return 0;
}

// A new runner for the request, marked loading and listed at once so /api/ps shows it
// (s->mu held). The request holds its one reference.
static struct sched_runner *runner_new_loading(struct sched *s, const struct sched_request *rq,
                                               int n_parallel, const struct model_memory *mem)
{
    struct sched_runner *r = xcalloc(1, sizeof(*r));
    pthread_mutex_init(&r->err_mu, NULL);
    r->model_path = xstrdup(rq->model_path);
    r->draft_path = rq->draft_path && *rq->draft_path ? xstrdup(rq->draft_path) : NULL;
    r->n_adapters = rq->n_adapters;
    r->adapter_paths = xcalloc(rq->n_adapters ? rq->n_adapters : 1, sizeof(char *));
    for (size_t i = 0; i < rq->n_adapters; i++)
        r->adapter_paths[i] = xstrdup(rq->adapter_paths[i]);
    r->projector_path =
        rq->projector_path && *rq->projector_path ? xstrdup(rq->projector_path) : NULL;
    r->name = xstrdup(rq->name ? rq->name : rq->model_path);
    r->digest = xstrdup(rq->digest ? rq->digest : "");
    r->details = rq->details ? json_deep_copy(rq->details) : NULL;
    r->n_ctx = rq->n_ctx;
    r->n_batch = rq->n_batch;
    r->n_threads = rq->n_threads;
    r->n_parallel = n_parallel;
    r->embedding = rq->embedding;
    r->size_bytes = mem->total_bytes;
    if (mem->experts_bytes > 0) {  // counted in full: every expert stays mapped
        char ex[32], tot[32];
        gib(mem->experts_bytes, ex, sizeof(ex));
        gib(mem->total_bytes, tot, sizeof(tot));
        log_info("%s: mixture of experts, all experts resident (%s of %s)", r->name, ex, tot);
    }
    r->keep_alive_ns = effective_keep_alive(s, rq);
    r->loading = true;
    r->refs = 1;
    r->log_fd = -1;
    set_expiry(r);
    r->next = s->runners;
    s->runners = r;
    return r;
}

// Starts r's process and waits until it is ready, with s->mu released meanwhile (held on
// entry and on return). A runner that fails to load is unlinked and destroyed.
static int load_runner(struct sched *s, struct sched_runner *r, struct err *e)
{
    pthread_mutex_unlock(&s->mu);
    int rc = spawn(s, r, e);
    if (rc == 0)
        rc = wait_ready(s, r, e);

    pthread_mutex_lock(&s->mu);
    if (rc < 0) {
        unlink_runner(s, r);
        pthread_mutex_unlock(&s->mu);
        runner_destroy(r);
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        return rc;
    }
    r->loading = false;
    r->last_used_ns = time_monotonic_ns();
    set_expiry(r);
    log_info("loaded %s on port %u (%d slot(s), ctx %d)", r->name, r->port, r->n_parallel,
             r->n_ctx);
    return rc;
}

int sched_acquire(struct sched *s, const struct sched_request *rq, struct sched_runner **out,
                  int64_t *load_ns, struct err *e)
{
    int64_t t0 = time_monotonic_ns();
    int n_parallel = rq->embedding ? 1 : (int)s->cfg.num_parallel;
    struct model_memory mem = {0};
    int rc = estimate_memory(s, rq, n_parallel, &mem, e);
    if (rc < 0)
        return rc;

    pthread_mutex_lock(&s->mu);
    struct sched_runner *r = find_runner(s, rq->model_path);
    if (r && usable(r, rq, n_parallel)) {
        take(s, r, rq);
        pthread_mutex_unlock(&s->mu);
        // A runner that was just killed may not be reaped yet: ping it, as
        // Ollama does before reusing one (scheduler.md §4).
        if (runner_ping(r)) {
            *out = r;
            *load_ns = time_monotonic_ns() - t0;
            return 0;
        }
        log_warn("runner for %s does not answer; reloading", r->name);
        sched_release(s, r, true);
        pthread_mutex_lock(&s->mu);
    }
    if (s->pending >= s->cfg.max_queue) {
        pthread_mutex_unlock(&s->mu);
        return err_set(e, ERR_BUSY,
                       "server busy, please try again.  maximum pending requests exceeded");
    }
    struct waiter me = {.cancelled = rq->cancelled, .cancel_ctx = rq->cancel_ctx};
    queue_add(s, &me);

    // Strict FIFO: only the head of the queue loads or takes a runner.
    for (;;) {
        if ((rc = waiter_abandoned(s, &me, e)) < 0)
            break;
        if (s->queue_head != &me) {
            timed_wait(s, 100);
            continue;
        }
        r = find_runner(s, rq->model_path);
        if (r && usable(r, rq, n_parallel)) {
            take(s, r, rq);
            rc = 0;
            break;
        }
        if (r) {
            // Needs a reload, expired or dead: unload it first.
            if (!r->loading)
                expire_locked(s, r);
            timed_wait(s, 100);
            continue;
        }
        if ((rc = room_for(s, rq, &mem, e)) < 0)
            break;
        if (rc > 0) {
            timed_wait(s, 100);
            continue;
        }
        r = runner_new_loading(s, rq, n_parallel, &mem);
        rc = load_runner(s, r, e);
        break;
    }
    queue_remove(s, &me);
    pthread_mutex_unlock(&s->mu);
    if (rc == 0) {
        *out = r;
        *load_ns = time_monotonic_ns() - t0;
    }
    return rc;
}

void sched_release(struct sched *s, struct sched_runner *r, bool failed)
{
    pthread_mutex_lock(&s->mu);
    // A runner that failed a request (dropped connection, died) is not
    // trusted again, even if its exit has not been reaped yet.
    if (failed)
        r->expired = true;
    r->refs--;
    r->last_used_ns = time_monotonic_ns();
    if (r->refs == 0) {
        if (r->expired || r->keep_alive_ns == 0)
            unload_locked(s, r);
        else
            set_expiry(r);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int sched_expire(struct sched *s, const char *model_path)
{
    pthread_mutex_lock(&s->mu);
    struct sched_runner *r = find_runner(s, model_path);
    if (!r) {
        pthread_mutex_unlock(&s->mu);
        return ERR_NOT_FOUND;
    }
    r->keep_alive_ns = 0;
    r->expires_at_ns = time_now_ns();
    expire_locked(s, r);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void sched_wait_unloaded(struct sched *s, const char *model_path, int timeout_ms)
{
    int64_t deadline = time_monotonic_ns() + (int64_t)timeout_ms * 1000000;
    pthread_mutex_lock(&s->mu);
    while (find_runner(s, model_path) && time_monotonic_ns() < deadline)
        timed_wait(s, 50);
    pthread_mutex_unlock(&s->mu);
}

static int ps_cmp(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int64_t ex = json_integer_value(json_object_get(x, "_expires"));
    int64_t ey = json_integer_value(json_object_get(y, "_expires"));
    return ex < ey ? 1 : ex > ey ? -1 : 0;
}

json_t *sched_ps_json(struct sched *s)
{
    json_t *items[64];
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (struct sched_runner *r = s->runners; r && n < 64; r = r->next) {
        json_t *o = json_object();
        jsonx_set_str(o, "name", r->name);
        jsonx_set_str(o, "model", r->name);
        jsonx_set_int(o, "size", (int64_t)r->size_bytes);
        jsonx_set_str(o, "digest", r->digest);
        if (r->details)
            jsonx_set(o, "details", json_deep_copy(r->details));
        int64_t exp = r->expires_at_ns;
        if (r->refs > 0 || r->loading)  // no timer while in use: now + duration
            exp = r->keep_alive_ns < 0 ? time_now_ns() + FOREVER_NS
                                       : time_now_ns() + r->keep_alive_ns;
        char when[64];
        time_format_rfc3339(exp, when, sizeof(when));
        jsonx_set_str(o, "expires_at", when);
        jsonx_set_int(o, "size_vram", 0);
        jsonx_set_int(o, "context_length", r->n_ctx);
        jsonx_set_int(o, "_expires", exp);
        items[n++] = o;
    }
    pthread_mutex_unlock(&s->mu);
    qsort(items, n, sizeof(items[0]), ps_cmp);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_object_del(items[i], "_expires");
        jsonx_arr_append(arr, items[i]);
    }
    json_t *out = json_object();
    jsonx_set(out, "models", arr);
    return out;
}

void sched_counts(struct sched *s, uint64_t *active, uint64_t *queued)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = 0;
    for (struct sched_runner *r = s->runners; r; r = r->next)
        n += r->refs > 0 ? (uint64_t)r->refs : 0;
    *active = n;
    *queued = s->pending;
    pthread_mutex_unlock(&s->mu);
}

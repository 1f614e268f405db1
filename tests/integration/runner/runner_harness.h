// Integration-test harness for `ollama runner`: starts the real binary as a
// child on a free loopback port (stderr and stdout to a log file), waits for
// GET /health to say ok, and drives the protocol with libcurl: plain JSON
// requests and NDJSON streams (optionally abandoned after the first line).
#pragma once

#include <curl/curl.h>
#include <stdbool.h>
#include <sys/prctl.h>

#include "gguf/gguf.h"
#include "integration/harness.h"
#include "integration/procstat.h"
#include "json/json.h"

struct rharness {
    pid_t pid;
    int port;
    char base[64];
    char log_path[128];
    int exit_status;  // after rh_wait_exit
};

// Starts `ollama runner --port P <args...>`. Does not wait for readiness.
static inline int rh_spawn(struct rharness *h, const char *const *args)
{
    memset(h, 0, sizeof(*h));
    h->port = harness_free_port();
    if (h->port <= 0)
        return -1;
    snprintf(h->base, sizeof(h->base), "http://127.0.0.1:%d", h->port);
    snprintf(h->log_path, sizeof(h->log_path), "/tmp/ollama-runner-it-%d-%d.log", (int)getpid(),
             h->port);
    char port[16];
    snprintf(port, sizeof(port), "%d", h->port);
    const char *argv[64];
    int n = 0;
    argv[n++] = "ollama";
    argv[n++] = "runner";
    argv[n++] = "--port";
    argv[n++] = port;
    for (const char *const *a = args; a && *a && n < 62; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    h->pid = fork();
    if (h->pid < 0)
        return -1;
    if (h->pid == 0) {
        // A test that fails before rh_stop (or a killed benchmark) must not
        // leave its runner behind.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(h->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(harness_bin(), (char *const *)argv);
        _exit(127);
    }
    return 0;
}

struct rh_buf {
    char *p;
    size_t n;
    size_t abort_after_lines;  // 0: never
    size_t lines;
};

static inline size_t rh_collect(char *p, size_t size, size_t nmemb, void *ctx)
{
    struct rh_buf *b = ctx;
    size_t add = size * nmemb;
    char *g = realloc(b->p, b->n + add + 1);
    if (!g)
        return 0;
    memcpy(g + b->n, p, add);
    b->n += add;
    g[b->n] = '\0';
    b->p = g;
    for (size_t i = 0; i < add; i++)
        b->lines += p[i] == '\n';
    if (b->abort_after_lines && b->lines >= b->abort_after_lines)
        return 0;  // hang up
    return add;
}

// POST (body != NULL) or GET path; returns the status (or -1), body in *out
// (caller frees). abort_after_lines > 0 closes the connection after that
// many NDJSON lines.
static inline long rh_request(const struct rharness *h, const char *path, const char *body,
                              char **out, size_t abort_after_lines, long timeout_s)
{
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof(url), "%s%s", h->base, path);
    struct rh_buf b = {.abort_after_lines = abort_after_lines};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s > 0 ? timeout_s : 120L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, rh_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(c);
    long status = -1;
    if (cc == CURLE_OK || (abort_after_lines && cc == CURLE_WRITE_ERROR))
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (out)
        *out = b.p ? b.p : calloc(1, 1);
    else
        free(b.p);
    return status;
}

// Waits until /health reports ok (true) or the process exits / 30 s pass.
static inline bool rh_wait_ready(struct rharness *h)
{
    for (int i = 0; i < 600; i++) {
        int status;
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            h->pid = 0;
            h->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            return false;
        }
        char *body = NULL;
        long st = rh_request(h, "/health", NULL, &body, 0, 2);
        bool ok = st == 200 && strstr(body, "\"ok\"") != NULL;
        free(body);
        if (ok)
            return true;
        harness_sleep_ms(50);
    }
    return false;
}

static inline int rh_start(struct rharness *h, const char *const *args)
{
    if (rh_spawn(h, args) < 0)
        return -1;
    return rh_wait_ready(h) ? 0 : -1;
}

// Waits for the child to exit (up to 20 s); returns its exit status, or -1.
static inline int rh_wait_exit(struct rharness *h)
{
    for (int i = 0; i < 400 && h->pid > 0; i++) {
        int status;
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            h->pid = 0;
            h->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            return h->exit_status;
        }
        harness_sleep_ms(50);
    }
    return h->pid > 0 ? -1 : h->exit_status;
}

static inline void rh_dump_log(const struct rharness *h)
{
    FILE *f = fopen(h->log_path, "r");
    if (!f)
        return;
    char line[1024];
    fprintf(stderr, "---- runner log ----\n");
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fclose(f);
}

// Starts `ollama runner --model model --threads 1 <extra...>` and waits for
// readiness; dumps the runner's log when it does not come up.
static inline int rh_start_model(struct rharness *h, const char *model, const char *const *extra)
{
    const char *args[40] = {"--model", model, "--threads", "1"};
    int n = 4;
    for (const char *const *a = extra; a && *a && n < 38; a++)
        args[n++] = *a;
    args[n] = NULL;
    if (rh_start(h, args) == 0)
        return 0;
    rh_dump_log(h);
    return -1;
}

// Reads the whole log (caller frees).
static inline char *rh_log(const struct rharness *h)
{
    FILE *f = fopen(h->log_path, "r");
    if (!f)
        return calloc(1, 1);
    char *s = calloc(1, 1 << 16);
    size_t n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

// SIGTERM, wait; returns the exit status (0 expected) or -1 after SIGKILL.
static inline int rh_stop(struct rharness *h)
{
    int result = h->pid > 0 ? -1 : h->exit_status;
    if (h->pid > 0) {
        kill(h->pid, SIGTERM);
        result = rh_wait_exit(h);
        if (h->pid > 0) {
            kill(h->pid, SIGKILL);
            waitpid(h->pid, NULL, 0);
            h->pid = 0;
            result = -1;
        }
    }
    if (result != 0)
        rh_dump_log(h);
    unlink(h->log_path);
    return result;
}

// A parsed completion stream.
struct rh_stream {
    char *text;     // concatenated content
    json_t *final;  // the last line (done or error), or NULL
    int n_lines;
    bool all_lines_valid;  // every line parsed and content lines were UTF-8
};

static inline void rh_stream_parse(const char *body, struct rh_stream *s)
{
    memset(s, 0, sizeof(*s));
    struct buf text;
    buf_init(&text, 0);
    s->all_lines_valid = true;
    const char *p = body;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        json_t *v = NULL;
        if (jsonx_parse(p, len, &v, NULL) == 0 && json_is_object(v)) {
            s->n_lines++;
            json_t *c = json_object_get(v, "content");
            if (c && json_is_string(c)) {
                buf_append(&text, json_string_value(c), json_string_length(c));
                if (!utf8_valid(json_string_value(c), json_string_length(c)))
                    s->all_lines_valid = false;
            }
            if (json_object_get(v, "done") || json_object_get(v, "error")) {
                json_decref(s->final);
                s->final = v;
                v = NULL;
            }
        } else {
            s->all_lines_valid = false;
        }
        json_decref(v);
        p += len + (nl ? 1 : 0);
    }
    s->text = buf_take(&text);
    if (!s->text)
        s->text = calloc(1, 1);
}

static inline void rh_stream_free(struct rh_stream *s)
{
    free(s->text);
    json_decref(s->final);
    memset(s, 0, sizeof(*s));
}

static inline int64_t rh_final_int(const struct rh_stream *s, const char *key)
{
    json_t *v = s->final ? json_object_get(s->final, key) : NULL;
    return v && json_is_integer(v) ? json_integer_value(v) : -1;
}

static inline const char *rh_final_str(const struct rh_stream *s, const char *key)
{
    json_t *v = s->final ? json_object_get(s->final, key) : NULL;
    return v && json_is_string(v) ? json_string_value(v) : "";
}

// Writes a copy of the model at src with output_norm.weight negated: its
// logits are the original's negated, so its greedy choice is the original's
// least likely token (a draft model that never agrees). Streams the copy.
static inline int rh_write_negated(const char *src, const char *out)
{
    struct gguf *g = NULL;
    if (gguf_open(&g, src, NULL) < 0)
        return -1;
    const struct gguf_tensor *t = gguf_tensor_find(g, "output_norm.weight");
    int rc = -1;
    int in = open(src, O_RDONLY), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (t && t->type == GGUF_TYPE_F32 && in >= 0 && fd >= 0) {
        static char chunk[1 << 20];
        ssize_t n;
        rc = 0;
        while (rc == 0 && (n = read(in, chunk, sizeof(chunk))) > 0)
            rc = write(fd, chunk, (size_t)n) == n ? 0 : -1;
        uint64_t off = gguf_data_offset(g) + t->offset;
        size_t n_w = (size_t)(t->n_bytes / sizeof(float));
        float *w = malloc(n_w * sizeof(float));
        if (rc == 0 && w && pread(in, w, n_w * sizeof(float), (off_t)off) == (ssize_t)(n_w * 4)) {
            for (size_t i = 0; i < n_w; i++)
                w[i] = -w[i];
            rc = pwrite(fd, w, n_w * sizeof(float), (off_t)off) == (ssize_t)(n_w * 4) ? 0 : -1;
        } else {
            rc = -1;
        }
        free(w);
    }
    if (in >= 0)
        close(in);
    if (fd >= 0 && close(fd) < 0)
        rc = -1;
    gguf_close(g);
    return rc;
}

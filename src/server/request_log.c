// OLLAMA_DEBUG_LOG_REQUESTS (Ollama's server/inference_request_log.go): every
// inference request's body, and a shell script that replays it with curl,
// written to a fresh temporary folder announced at start-up.
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "server/internal.h"

// The routes Ollama logs.
static const char *const logged_routes[] = {
    "/api/generate", "/api/chat", "/v1/chat/completions", "/v1/completions", "/v1/responses",
    "/v1/messages",  NULL,
};

static char log_dir[256];
static atomic_ulong log_counter;

int srv_request_log_init(const struct env_config *cfg, struct err *e)
{
    if (!cfg->debug_log_requests)
        return 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(log_dir, sizeof log_dir, "%s/ollama-request-logs-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(log_dir)) {
        log_dir[0] = '\0';
        return err_set(e, ERR_IO, "enable OLLAMA_DEBUG_LOG_REQUESTS: %s", strerror(errno));
    }
    log_info("request debug logging enabled; inference request logs will be stored in %s and "
             "include request bodies and replay curl commands",
             log_dir);
    return 0;
}

// "api/chat" → "api_chat": letters and digits kept, anything else '_'.
static void route_filename(const char *route, char *out, size_t n)
{
    while (*route == '/')
        route++;
    size_t k = 0;
    for (; *route && k + 1 < n; route++)
        out[k++] = (*route >= 'a' && *route <= 'z') || (*route >= 'A' && *route <= 'Z') ||
                           (*route >= '0' && *route <= '9')
                       ? *route
                       : '_';
    out[k] = '\0';
    if (k == 0)
        snprintf(out, n, "root");
}

// Go's %q of a printable ASCII string: quotes, with \ and " escaped.
static void go_quote(struct buf *b, const char *s)
{
    buf_append_char(b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_append_char(b, '\\');
        buf_append_char(b, *s);
    }
    buf_append_char(b, '"');
}

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    int rc = fclose(f);
    chmod(path, 0600);
    return w == n && rc == 0 ? 0 : -1;
}

void srv_request_log(const struct srv_req *r)
{
    if (!log_dir[0] || strcmp(r->method, "POST") != 0)
        return;
    bool logged = false;
    for (size_t i = 0; logged_routes[i]; i++)
        logged = logged || strcmp(r->url, logged_routes[i]) == 0;
    if (!logged)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[64], route[128], body_name[256], body_path[512], sh_path[512];
    size_t w = strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
    snprintf(stamp + w, sizeof stamp - w, ".%09ldZ-%06lu", ts.tv_nsec,
             atomic_fetch_add(&log_counter, 1) + 1);
    route_filename(r->url, route, sizeof route);
    snprintf(body_name, sizeof body_name, "%s_%s_body.json", stamp, route);
    snprintf(body_path, sizeof body_path, "%s/%s", log_dir, body_name);
    snprintf(sh_path, sizeof sh_path, "%s/%s_%s_request.sh", log_dir, stamp, route);
    if (write_file(body_path, r->body.data, r->body.len) < 0) {
        log_warn("failed to write debug request body: %s", r->url);
        return;
    }
    const char *ct = httpd_req_header(r->h, "Content-Type");
    const char *host = httpd_req_header(r->h, "Host");
    struct buf url, hdr, sh;
    buf_init(&url, 0);
    buf_init(&hdr, 0);
    buf_init(&sh, 0);
    buf_printf(&url, "http://%s%s", host && *host ? host : "127.0.0.1:11434", r->url);
    buf_printf(&hdr, "Content-Type: %s", ct && *ct ? ct : "application/json");
    buf_append_str(&sh, "#!/bin/sh\nSCRIPT_DIR=\"$(CDPATH= cd -- \"$(dirname -- \"$0\")\" && "
                        "pwd)\"\ncurl --request POST --url ");
    go_quote(&sh, buf_cstr(&url));
    buf_append_str(&sh, " --header ");
    go_quote(&sh, buf_cstr(&hdr));
    buf_printf(&sh, " --data-binary @\"${SCRIPT_DIR}/%s\"\n", body_name);
    if (write_file(sh_path, sh.data, sh.len) < 0)
        log_warn("failed to write debug request replay command: %s", r->url);
    else
        log_info("logged to %s, replay using curl with `sh %s`", body_path, sh_path);
    buf_deinit(&url);
    buf_deinit(&hdr);
    buf_deinit(&sh);
}

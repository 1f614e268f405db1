// The API client, over the httpc wrapper.
#include "client/client.h"

#include "httpc/httpc.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_MAX_BODY_BYTES (64u * 1024 * 1024)
#define CLIENT_MAX_LINE_BYTES (8u * 1024 * 1024)

struct client {
    char *base_url;
    const volatile sig_atomic_t *cancel;
};

static pthread_once_t agent_once = PTHREAD_ONCE_INIT;
static char user_agent[128];  // written once under agent_once

// "ollama/<version> (<arch> <os>) ..." with Go's names for the platform.
static void user_agent_init(void)
{
    struct utsname u;
    const char *arch = "amd64";
    if (uname(&u) == 0) {
        if (strcmp(u.machine, "aarch64") == 0 || strcmp(u.machine, "arm64") == 0)
            arch = "arm64";
        else if (strcmp(u.machine, "x86_64") != 0)
            arch = u.machine;
    }
    snprintf(user_agent, sizeof(user_agent), "ollama/%s (%s linux) ollama-c", OLLAMA_VERSION, arch);
}

int client_url_from_host(const char *ollama_host, char *out, size_t n, struct err *e)
{
    struct host_addr h;
    char tmp[512];
    const char *v = env_clean(ollama_host, tmp, sizeof(tmp));
    int rc = host_parse(v ? v : "", &h, e);
    if (rc < 0)
        return rc;
    // An unspecified address means "this machine" for a client.
    host_format_connect_url(&h, out, n);
    return 0;
}

int client_new(struct client **out, const char *base_url, struct err *e)
{
    pthread_once(&agent_once, user_agent_init);
    httpc_init();
    char url[600];
    if (!base_url) {
        int rc = client_url_from_host(getenv("OLLAMA_HOST"), url, sizeof(url), e);
        if (rc < 0)
            return rc;
        base_url = url;
    }
    struct client *c = xcalloc(1, sizeof(*c));
    c->base_url = xstrdup(base_url);
    size_t n = strlen(c->base_url);
    while (n && c->base_url[n - 1] == '/')
        c->base_url[--n] = '\0';
    *out = c;
    return 0;
}

void client_free(struct client *c)
{
    if (!c)
        return;
    free(c->base_url);
    free(c);
}

const char *client_base_url(const struct client *c)
{
    return c->base_url;
}

void client_set_cancel(struct client *c, const volatile sig_atomic_t *flag)
{
    c->cancel = flag;
}

static bool cancelled(const struct client *c)
{
    return c->cancel && *c->cancel;
}

static bool xfer_continue(void *ctx, uint64_t down, uint64_t up)
{
    (void)down, (void)up;
    return !cancelled(ctx);
}

static const char *const json_headers[] = {"Content-Type: application/json",
                                           "Accept: application/json", "Expect:", NULL};
static const char *const ndjson_headers[] = {"Content-Type: application/json",
                                             "Accept: application/x-ndjson", "Expect:", NULL};

// A request to the server: path under the base URL (*url, freed by the caller).
static struct httpc_request request_for(struct client *c, const char *method, const char *path,
                                        const char *body, size_t body_len, bool stream, char **url)
{
    *url = xasprintf("%s%s", c->base_url, path);
    return (struct httpc_request){
        .method = method,
        .url = *url,
        .headers = stream ? ndjson_headers : json_headers,
        .body = body,
        .body_len = body_len,
        .user_agent = user_agent,
        .on_progress = c->cancel ? xfer_continue : NULL,
        .progress_ctx = c,
    };
}

// The error for a transfer that did not complete (too_large: our buffer's cap stopped it).
static int transfer_fail(const struct httpc_result *res, bool too_large, struct err *e)
{
    switch (res->fail) {
    case HTTPC_CONNECT:
        return err_set(e, ERR_NETWORK,
                       "could not connect to ollama server, run 'ollama serve' to start it");
    case HTTPC_STOPPED:
        if (too_large)
            return err_set(e, ERR_TOO_LARGE, "response too large");
        return err_set(e, ERR_CANCELLED, "cancelled");
    case HTTPC_ABORTED:
        return err_set(e, ERR_CANCELLED, "cancelled");
    case HTTPC_NOMEM:
        return err_set(e, ERR_NOMEM, "%s", res->msg);
    default:
        return err_set(e, ERR_NETWORK, "%s", res->msg);
    }
}

int client_request(struct client *c, const char *method, const char *path, const char *body,
                   size_t body_len, long *status, struct buf *resp, struct err *e)
{
    char *url;
    struct httpc_request rq = request_for(c, method, path, body, body_len, false, &url);
    struct buf local;
    buf_init(&local, CLIENT_MAX_BODY_BYTES);
    rq.on_data = httpc_collect;
    rq.ctx = resp ? resp : &local;
    struct httpc_result res;
    int rc = 0;
    if (httpc_perform(&rq, &res) < 0)
        rc = transfer_fail(&res, res.fail == HTTPC_STOPPED, e);
    else if (status)
        *status = res.status;
    httpc_result_deinit(&res);
    buf_deinit(&local);
    free(url);
    return rc;
}

int client_heartbeat(struct client *c, struct err *e)
{
    long status = 0;
    int rc = client_request(c, "HEAD", "/", NULL, 0, &status, NULL, e);
    if (rc < 0)
        return rc;
    if (status != 200)
        return err_set(e, ERR_NETWORK, "unexpected status %ld from server", status);
    return 0;
}

struct line_reader {
    client_line_fn fn;
    void *ctx;
    const struct client *c;
    bool stopped;  // fn or the cancel flag stopped the stream
};

static bool reader_line(void *arg, const char *line, size_t n)
{
    struct line_reader *lr = arg;
    if (cancelled(lr->c) || lr->fn(lr->ctx, line, n) < 0) {
        lr->stopped = true;
        return false;
    }
    return true;
}

int client_stream(struct client *c, const char *method, const char *path, const char *body,
                  size_t body_len, client_line_fn fn, void *ctx, long *status, struct buf *err_body,
                  struct err *e)
{
    char *url;
    struct httpc_request rq = request_for(c, method, path, body, body_len, true, &url);
    struct line_reader lr = {.fn = fn, .ctx = ctx, .c = c};
    struct buf line;
    buf_init(&line, CLIENT_MAX_LINE_BYTES);
    struct httpc_lines lines = {.fn = reader_line, .ctx = &lr, .line = &line, .err_body = err_body};
    rq.on_data = httpc_lines_feed;
    rq.ctx = &lines;
    struct httpc_result res;
    int rc = 0;
    if (httpc_perform(&rq, &res) < 0) {
        if ((res.fail == HTTPC_STOPPED && lr.stopped) || res.fail == HTTPC_ABORTED)
            rc = err_set(e, ERR_CANCELLED, "cancelled");
        else
            rc = transfer_fail(&res, res.fail == HTTPC_STOPPED, e);
    }
    bool ok = lines.status >= 200 && lines.status < 300;
    if (rc == 0 && line.len && ok)  // a last line without newline
        if (fn(ctx, line.data, line.len) < 0)
            rc = ERR_CANCELLED;
    if (status)
        *status = res.status;
    httpc_result_deinit(&res);
    buf_deinit(&line);
    free(url);
    return rc;
}

// ---------------------------------------------------------------------------
// JSON calls and the server's error messages (cli.md §1.3).

const char *client_status_text(long status)
{
    static const struct {
        long code;
        const char *text;
    } table[] = {
        {200, "OK"},
        {201, "Created"},
        {204, "No Content"},
        {301, "Moved Permanently"},
        {307, "Temporary Redirect"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {413, "Request Entity Too Large"},
        {429, "Too Many Requests"},
        {499, "Client Closed Request"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].code == status)
            return table[i].text;
    return "";
}

static int status_code(long status)
{
    switch (status) {
    case 400:
        return ERR_INVALID;
    case 401:
    case 403:
        return ERR_UNAUTHORIZED;
    case 404:
        return ERR_NOT_FOUND;
    case 503:
        return ERR_BUSY;
    default:
        return ERR_INTERNAL;
    }
}

// The message of an error body: its "error" string, else the body as is.
static void error_message(const struct buf *body, long status, char *out, size_t n)
{
    json_t *v = NULL;
    const char *msg = NULL;
    if (body->len && jsonx_parse(body->data, body->len, &v, NULL) == 0 && json_is_object(v))
        msg = json_string_value(json_object_get(v, "error"));
    if (msg)
        snprintf(out, n, "%s", msg);
    else if (body->len) {
        // Trim the trailing newline a text body ends with.
        size_t len = body->len;
        while (len && (body->data[len - 1] == '\n' || body->data[len - 1] == '\r'))
            len--;
        snprintf(out, n, "%.*s", (int)len, body->data);
    } else
        snprintf(out, n, "%ld %s", status, client_status_text(status));
    json_decref(v);
}

int client_call(struct client *c, const char *method, const char *path, const json_t *req,
                json_t **out, struct err *e)
{
    char *body = req ? jsonx_dumps(req, JSON_COMPACT) : NULL;
    struct buf resp;
    buf_init(&resp, CLIENT_MAX_BODY_BYTES);
    long status = 0;
    int rc = client_request(c, method, path, body, body ? strlen(body) : 0, &status, &resp, e);
    free(body);
    if (rc < 0)
        goto out;
    if (status >= 400) {
        char msg[ERR_MSG_MAX];
        error_message(&resp, status, msg, sizeof(msg));
        rc = err_set(e, status_code(status), "%s", msg);
        goto out;
    }
    if (out) {
        *out = NULL;
        if (resp.len) {
            rc = jsonx_parse(resp.data, resp.len, out, e);
            if (rc < 0)
                err_prefix(e, "%s %s", method, path);
        }
    }
out:
    buf_deinit(&resp);
    return rc;
}

struct json_stream {
    client_json_fn fn;
    void *ctx;
    struct err *e;
    int rc;
};

static int stream_line(void *ctx, const char *line, size_t len)
{
    struct json_stream *js = ctx;
    json_t *v = NULL;
    struct err pe = {0};
    if (jsonx_parse(line, len, &v, &pe) < 0) {
        js->rc = err_set(js->e, ERR_FORMAT, "%.*s", (int)(len > 200 ? 200 : len), line);
        return -1;
    }
    const char *msg = json_is_object(v) ? json_string_value(json_object_get(v, "error")) : NULL;
    if (msg) {
        js->rc = err_set(js->e, ERR_INTERNAL, "%s", msg);
        json_decref(v);
        return -1;
    }
    int rc = js->fn ? js->fn(js->ctx, v, js->e) : 0;
    json_decref(v);
    if (rc < 0) {
        js->rc = rc;
        return -1;
    }
    return 0;
}

int client_call_stream(struct client *c, const char *path, const json_t *req, client_json_fn fn,
                       void *ctx, struct err *e)
{
    char *body = req ? jsonx_dumps(req, JSON_COMPACT) : NULL;
    struct json_stream js = {.fn = fn, .ctx = ctx, .e = e};
    struct buf err_body;
    buf_init(&err_body, CLIENT_MAX_BODY_BYTES);
    long status = 0;
    int rc = client_stream(c, "POST", path, body, body ? strlen(body) : 0, stream_line, &js,
                           &status, &err_body, e);
    free(body);
    if (js.rc < 0)
        rc = js.rc;
    else if (rc == 0 && status >= 400) {
        char msg[ERR_MSG_MAX];
        error_message(&err_body, status, msg, sizeof(msg));
        rc = err_set(e, status_code(status), "%ld %s: %s", status, client_status_text(status), msg);
    }
    buf_deinit(&err_body);
    return rc;
}

int client_version(struct client *c, char *out, size_t n, struct err *e)
{
    json_t *v = NULL;
    int rc = client_call(c, "GET", "/api/version", NULL, &v, e);
    if (rc < 0)
        return rc;
    const char *s = json_string_value(json_object_get(v, "version"));
    if (!s)
        rc = err_set(e, ERR_FORMAT, "no version in the server's answer");
    else
        snprintf(out, n, "%s", s);
    json_decref(v);
    return rc;
}

static int get_object(struct client *c, const char *path, json_t **out, struct err *e)
{
    json_t *v = NULL;
    int rc = client_call(c, "GET", path, NULL, &v, e);
    if (rc < 0)
        return rc;
    if (!json_is_object(v)) {
        json_decref(v);
        return err_set(e, ERR_FORMAT, "unexpected answer from %s", path);
    }
    *out = v;
    return 0;
}

int client_list(struct client *c, json_t **out, struct err *e)
{
    return get_object(c, "/api/tags", out, e);
}

int client_ps(struct client *c, json_t **out, struct err *e)
{
    return get_object(c, "/api/ps", out, e);
}

int client_show(struct client *c, const json_t *req, json_t **out, struct err *e)
{
    json_t *v = NULL;
    int rc = client_call(c, "POST", "/api/show", req, &v, e);
    if (rc < 0)
        return rc;
    if (!json_is_object(v)) {
        json_decref(v);
        return err_set(e, ERR_FORMAT, "unexpected answer from /api/show");
    }
    *out = v;
    return 0;
}

int client_copy(struct client *c, const char *src, const char *dst, struct err *e)
{
    json_t *req = json_pack("{s:s,s:s}", "source", src, "destination", dst);
    int rc = client_call(c, "POST", "/api/copy", req, NULL, e);
    json_decref(req);
    return rc;
}

int client_delete(struct client *c, const char *model, struct err *e)
{
    json_t *req = json_pack("{s:s}", "model", model);
    int rc = client_call(c, "DELETE", "/api/delete", req, NULL, e);
    json_decref(req);
    return rc;
}

int client_embed(struct client *c, const json_t *req, json_t **out, struct err *e)
{
    return client_call(c, "POST", "/api/embed", req, out, e);
}

int client_create(struct client *c, const json_t *req, client_json_fn fn, void *ctx, struct err *e)
{
    return client_call_stream(c, "/api/create", req, fn, ctx, e);
}

static int transfer(struct client *c, const char *path, const char *model, bool insecure,
                    client_json_fn fn, void *ctx, struct err *e)
{
    json_t *req = json_pack("{s:s}", "model", model);
    if (insecure)
        json_object_set_new(req, "insecure", json_true());
    int rc = client_call_stream(c, path, req, fn, ctx, e);
    json_decref(req);
    return rc;
}

int client_pull(struct client *c, const char *model, bool insecure, client_json_fn fn, void *ctx,
                struct err *e)
{
    return transfer(c, "/api/pull", model, insecure, fn, ctx, e);
}

int client_push(struct client *c, const char *model, bool insecure, client_json_fn fn, void *ctx,
                struct err *e)
{
    return transfer(c, "/api/push", model, insecure, fn, ctx, e);
}

int client_generate(struct client *c, const json_t *req, client_json_fn fn, void *ctx,
                    struct err *e)
{
    return client_call_stream(c, "/api/generate", req, fn, ctx, e);
}

int client_chat(struct client *c, const json_t *req, client_json_fn fn, void *ctx, struct err *e)
{
    return client_call_stream(c, "/api/chat", req, fn, ctx, e);
}

// ---------------------------------------------------------------------------
// Blobs (api.md §16).

int client_blob_exists(struct client *c, const char *digest, bool *exists, struct err *e)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/blobs/%s", digest);
    long status = 0;
    int rc = client_request(c, "HEAD", path, NULL, 0, &status, NULL, e);
    if (rc < 0)
        return rc;
    if (status == 200 || status == 404) {
        *exists = status == 200;
        return 0;
    }
    return err_set(e, status_code(status), "%ld %s", status, client_status_text(status));
}

struct upload {
    FILE *f;
    uint64_t size;
    client_progress_fn fn;
    void *ctx;
    const struct client *c;
};

static size_t read_file(void *ctx, char *p, size_t n)
{
    struct upload *u = ctx;
    size_t got = fread(p, 1, n, u->f);
    if (got == 0 && ferror(u->f))
        return HTTPC_READ_ABORT;
    return got;
}

static bool upload_progress(void *ctx, uint64_t down, uint64_t up)
{
    (void)down;
    struct upload *u = ctx;
    if (cancelled(u->c))
        return false;
    if (u->fn && u->size > 0)
        u->fn(u->ctx, up, u->size);
    return true;
}

int client_blob_upload(struct client *c, const char *digest, const char *path,
                       client_progress_fn fn, void *ctx, struct err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ERR_IO, "open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) < 0) {
        fclose(f);
        return err_set(e, ERR_IO, "stat %s: %s", path, strerror(errno));
    }
    char url_path[128], *url;
    snprintf(url_path, sizeof(url_path), "/api/blobs/%s", digest);
    struct httpc_request rq = request_for(c, "POST", url_path, NULL, 0, false, &url);
    struct upload u = {.f = f, .size = (uint64_t)st.st_size, .fn = fn, .ctx = ctx, .c = c};
    struct buf resp;
    buf_init(&resp, 1 << 20);
    rq.read = read_file;
    rq.read_ctx = &u;
    rq.read_size = st.st_size;
    rq.on_progress = upload_progress;
    rq.progress_ctx = &u;
    rq.on_data = httpc_collect;
    rq.ctx = &resp;
    struct httpc_result res;
    int rc = 0;
    if (httpc_perform(&rq, &res) < 0) {
        rc = transfer_fail(&res, res.fail == HTTPC_STOPPED, e);
    } else if (res.status >= 400) {
        char msg[ERR_MSG_MAX];
        error_message(&resp, res.status, msg, sizeof(msg));
        rc = err_set(e, status_code(res.status), "%s", msg);
    } else if (fn) {
        fn(ctx, (uint64_t)st.st_size, (uint64_t)st.st_size);
    }
    httpc_result_deinit(&res);
    buf_deinit(&resp);
    free(url);
    fclose(f);
    return rc;
}

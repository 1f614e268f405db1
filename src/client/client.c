// libcurl-based implementation of the API client.
#include "client/client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_MAX_BODY_BYTES (64u * 1024 * 1024)
#define CLIENT_MAX_LINE_BYTES (8u * 1024 * 1024)

struct client {
    char *base_url;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int client_new(struct client **out, const char *base_url, struct err *e)
{
    pthread_once(&curl_once, curl_init_once);
    char url[320];
    if (!base_url) {
        struct host_addr h;
        char tmp[512];
        const char *v = env_clean(getenv("OLLAMA_HOST"), tmp, sizeof(tmp));
        int rc = host_parse(v ? v : "", &h, e);
        if (rc < 0)
            return rc;
        // An unspecified address means "this machine" for a client.
        if (!h.host[0] || strcmp(h.host, "0.0.0.0") == 0)
            snprintf(h.host, sizeof(h.host), "127.0.0.1");
        else if (strcmp(h.host, "::") == 0)
            snprintf(h.host, sizeof(h.host), "::1");
        host_format_url(&h, url, sizeof(url));
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

static size_t write_buf(char *p, size_t size, size_t n, void *ctx)
{
    struct buf *b = ctx;
    return buf_append(b, p, size * n) == 0 ? size * n : 0;
}

static CURL *easy_new(struct client *c, const char *method, const char *path, const char *body,
                      size_t body_len, struct curl_slist **headers, bool stream)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char *url = xasprintf("%s%s", c->base_url, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    free(url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "ollama/" OLLAMA_VERSION " (amd64 linux) ollama-c");
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    *headers = curl_slist_append(NULL, "Content-Type: application/json");
    *headers = curl_slist_append(*headers, stream ? "Accept: application/x-ndjson"
                                                  : "Accept: application/json");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
    return h;
}

static int curl_fail(CURLcode cc, struct err *e)
{
    if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
        return err_set(e, ERR_NETWORK,
                       "could not connect to ollama server, run 'ollama serve' to start it");
    if (cc == CURLE_WRITE_ERROR)
        return err_set(e, ERR_TOO_LARGE, "response too large");
    return err_set(e, ERR_NETWORK, "%s", curl_easy_strerror(cc));
}

int client_request(struct client *c, const char *method, const char *path, const char *body,
                   size_t body_len, long *status, struct buf *resp, struct err *e)
{
    struct curl_slist *headers = NULL;
    CURL *h = easy_new(c, method, path, body, body_len, &headers, false);
    if (!h)
        return err_set(e, ERR_NOMEM, "curl_easy_init failed");
    struct buf local;
    buf_init(&local, CLIENT_MAX_BODY_BYTES);
    struct buf *out = resp ? resp : &local;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_buf);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    if (cc != CURLE_OK)
        rc = curl_fail(cc, e);
    else if (status)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    buf_deinit(&local);
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
    struct buf line;
    client_line_fn fn;
    void *ctx;
    CURL *h;
    bool ok_status;  // decided on the first byte
    bool checked;
    struct buf *err_body;
    bool stopped;
};

static size_t write_lines(char *p, size_t size, size_t n, void *ctx)
{
    struct line_reader *lr = ctx;
    size_t total = size * n;
    if (!lr->checked) {
        long status = 0;
        curl_easy_getinfo(lr->h, CURLINFO_RESPONSE_CODE, &status);
        lr->ok_status = status >= 200 && status < 300;
        lr->checked = true;
    }
    if (!lr->ok_status) {
        if (lr->err_body && buf_append(lr->err_body, p, total) < 0)
            return 0;
        return total;
    }
    for (size_t i = 0; i < total; i++) {
        if (p[i] != '\n') {
            if (buf_append_char(&lr->line, p[i]) < 0)
                return 0;
            continue;
        }
        if (lr->line.len && lr->fn(lr->ctx, lr->line.data, lr->line.len) < 0) {
            lr->stopped = true;
            return 0;
        }
        buf_reset(&lr->line);
    }
    return total;
}

int client_stream(struct client *c, const char *method, const char *path, const char *body,
                  size_t body_len, client_line_fn fn, void *ctx, long *status,
                  struct buf *err_body, struct err *e)
{
    struct curl_slist *headers = NULL;
    CURL *h = easy_new(c, method, path, body, body_len, &headers, true);
    if (!h)
        return err_set(e, ERR_NOMEM, "curl_easy_init failed");
    struct line_reader lr = {.fn = fn, .ctx = ctx, .h = h, .err_body = err_body};
    buf_init(&lr.line, CLIENT_MAX_LINE_BYTES);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_lines);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &lr);
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    if (cc == CURLE_WRITE_ERROR && lr.stopped)
        rc = ERR_CANCELLED;
    else if (cc != CURLE_OK)
        rc = curl_fail(cc, e);
    if (rc == 0 && lr.line.len)  // a last line without newline
        fn(ctx, lr.line.data, lr.line.len);
    if (status)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    buf_deinit(&lr.line);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return rc;
}

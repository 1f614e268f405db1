// A small libcurl wrapper for integration tests: one request with custom
// headers, returning status, body and response headers as strings.
#pragma once

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

struct http_resp {
    long status;
    char *body;
    size_t body_len;
    char *headers;  // raw header block
    size_t headers_len;
};

static inline size_t http_collect_(char *p, size_t size, size_t n, void *ctx)
{
    char **buf = ((char ***)ctx)[0];
    size_t *len = ((size_t **)ctx)[1];
    size_t add = size * n;
    char *grown = realloc(*buf, *len + add + 1);
    if (!grown)
        return 0;
    memcpy(grown + *len, p, add);
    *len += add;
    grown[*len] = '\0';
    *buf = grown;
    return add;
}

struct http_body_src_ {
    size_t remaining;  // bytes of 'x' to send (for oversized bodies)
};

static inline size_t http_read_x_(char *out, size_t size, size_t n, void *ctx)
{
    struct http_body_src_ *src = ctx;
    size_t take = size * n < src->remaining ? size * n : src->remaining;
    memset(out, 'x', take);
    src->remaining -= take;
    return take;
}

// headers: NULL-terminated list of "Name: value" or NULL. If synth_len > 0,
// sends a body of synth_len 'x' bytes instead of body.
static inline int http_request(const char *url, const char *method, const char *const *headers,
                               const char *body, size_t body_len, size_t synth_len,
                               struct http_resp *r)
{
    memset(r, 0, sizeof(*r));
    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    struct curl_slist *hl = NULL;
    for (const char *const *p = headers; p && *p; p++)
        hl = curl_slist_append(hl, *p);
    void *body_ctx[2] = {&r->body, &r->body_len};
    void *head_ctx[2] = {&r->headers, &r->headers_len};
    struct http_body_src_ src = {synth_len};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (synth_len) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, http_read_x_);
        curl_easy_setopt(h, CURLOPT_READDATA, &src);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)synth_len);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    } else if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, http_collect_);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)body_ctx);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, http_collect_);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, (void *)head_ctx);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    if (!r->body)
        r->body = calloc(1, 1);
    if (!r->headers)
        r->headers = calloc(1, 1);
    return cc == CURLE_OK ? 0 : -1;
}

static inline void http_resp_free(struct http_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

// Case-insensitive search for "Name: value" in the header block.
static inline int http_has_header(const struct http_resp *r, const char *line)
{
    return r->headers && strcasestr(r->headers, line) != NULL;
}

// Helpers for integration tests that need models in the server's store:
// upload a GGUF as a blob and create a model from it over the HTTP API.
#pragma once

#include "integration/harness.h"
#include "integration/http.h"
#include "util/util.h"

// Uploads path as a blob and creates `name` from it with the given extra
// create fields (a JSON fragment like "\"parameters\":{...}" or ""). 0 on success.
static inline int models_create(const struct harness *h, const char *name, const char *path,
                                const char *extra)
{
    struct buf b;
    buf_init(&b, 0);
    if (fs_read_all(path, 1u << 30, &b, NULL) < 0)
        return -1;
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(b.data, b.len, hex);
    char url[512];
    snprintf(url, sizeof(url), "%s/api/blobs/sha256:%s", h->base_url, hex);
    struct http_resp r;
    int rc = http_request(url, "POST", NULL, b.data, b.len, 0, &r);
    buf_deinit(&b);
    if (rc < 0 || (r.status != 200 && r.status != 201)) {
        http_resp_free(&r);
        return -1;
    }
    http_resp_free(&r);
    char *body = xasprintf("{\"model\":\"%s\",\"files\":{\"model.gguf\":\"sha256:%s\"},"
                           "\"stream\":false%s%s}",
                           name, hex, extra && *extra ? "," : "", extra ? extra : "");
    snprintf(url, sizeof(url), "%s/api/create", h->base_url);
    rc = http_request(url, "POST", NULL, body, strlen(body), 0, &r);
    free(body);
    int ok = rc == 0 && r.status == 200 ? 0 : -1;
    if (ok < 0)
        fprintf(stderr, "create %s: %ld %s\n", name, r.status, r.body);
    http_resp_free(&r);
    return ok;
}

// models_create with a Go template (tmpl already escaped for a JSON string).
static inline int models_create_template(const struct harness *h, const char *name,
                                         const char *path, const char *tmpl)
{
    char extra[1024];
    snprintf(extra, sizeof(extra), "\"template\":\"%s\"", tmpl);
    return models_create(h, name, path, extra);
}

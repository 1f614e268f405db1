// Push (registry.md §6): for each blob a HEAD; missing ones go through an
// upload session (POST, cross-repository mount when the layer names its
// source, PATCH parts in order with Content-Range, PUT ?digest=); the
// manifest PUT comes last, re-encoded compactly without a trailing newline.
#include "registry/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int reg_parse_name(struct registry *r, const char *name, bool insecure, struct store_name *n,
                   struct err *e);

static void url_add_query(struct buf *out, const char *url, const char *params)
{
    buf_append_str(out, url);
    buf_append_char(out, strchr(url, '?') ? '&' : '?');
    buf_append_str(out, params);
}

// Progress of one blob while a part is on the wire: every 60 ms.
struct up_progress {
    const struct registry_opts *o;
    const char *status, *digest;
    uint64_t total, base;  // bytes of earlier parts
    int64_t last_ns;
};

static void on_upload(void *ctx, uint64_t down, uint64_t up)
{
    (void)down;
    struct up_progress *u = ctx;
    int64_t now = time_monotonic_ns();
    if (now - u->last_ns < 60 * 1000000LL)
        return;
    u->last_ns = now;
    reg_progress(u->o, u->status, u->digest, u->total, u->base + up);
}

// One blob's upload, carried through upload_blob's steps.
struct blob_upload {
    struct reg_session *s;
    const struct store_layer *l;
    const struct registry_opts *o;
    char status[32];     // "pushing <short digest>"
    uint64_t total;      // the blob's size
    struct reg_rsp rsp;  // every request's response, reused
    char *url;           // the session's location for the next request (owned)
    int fd;              // the blob file the parts are read from
    uint64_t sent;       // bytes of the parts done
};

static void upload_progress(const struct blob_upload *u, uint64_t done)
{
    reg_progress(u->o, u->status, u->l->digest, u->total, done);
}

// HEAD: *have is true when the registry already holds the blob.
static int upload_head(struct blob_upload *u, bool *have, struct err *e)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", u->s->base, u->s->repo, u->l->digest);
    struct reg_rq head = {.method = "HEAD", .url = url, .follow = true, .timeout_s = 120};
    struct err he = {0};
    int rc = reg_session_do(u->s, &head, &u->rsp, &he);
    *have = rc == 0;
    if (rc == 0 || rc == ERR_NOT_FOUND)
        return 0;
    err_set(e, rc, "%s", he.msg);
    return rc;
}

// POST opens an upload session, with a cross-repository mount when the layer came from
// another model. *mounted is true when the mount made the upload unnecessary; otherwise
// u->url is where the parts go.
static int upload_open_session(struct blob_upload *u, bool *mounted, struct err *e)
{
    const struct store_layer *l = u->l;
    struct buf post;
    buf_init(&post, 0);
    buf_printf(&post, "%s/v2/%s/blobs/uploads/", u->s->base, u->s->repo);
    if (l->from && *l->from) {
        struct store_name fn;
        if (store_name_parse(l->from, &fn, NULL) == 0) {
            char from[2 * STORE_PART_MAX + 2];
            snprintf(from, sizeof(from), "%s%%2F%s", fn.ns, fn.model);
            for (char *p = from; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                    *p = (char)(*p + 32);
            buf_printf(&post, "?from=%s&mount=sha256%%3A%s", from, l->digest + 7);
        }
    }
    struct reg_rq prq = {.method = "POST", .url = post.data, .timeout_s = 120};
    int rc = reg_session_do(u->s, &prq, &u->rsp, e);
    buf_deinit(&post);
    if (rc < 0)
        return rc;
    *mounted = u->rsp.status == 201;
    if (*mounted)
        return 0;
    const char *loc = u->rsp.upload_location ? u->rsp.upload_location : u->rsp.location;
    if (u->rsp.status != 202 || !loc)
        return err_set(e, ERR_INVALID, "upload session: unexpected status code %ld", u->rsp.status);
    u->url = xstrdup(loc);
    return 0;
}

// Ollama's registry answers a PATCH with 307: the bytes go to the redirect target, without
// auth, and the session moves to the new upload location when one is given.
static int upload_part_redirected(struct blob_upload *u, uint64_t off, uint64_t size,
                                  EVP_MD_CTX *md5, struct err *ae)
{
    struct reg_rsp *rsp = &u->rsp;
    char *next = rsp->upload_location ? xstrdup(rsp->upload_location) : NULL;
    char *target = xstrdup(rsp->location);
    EVP_DigestInit_ex(md5, EVP_md5(), NULL);
    static const char *const put_hdrs[] = {"Content-Type: application/octet-stream", NULL};
    struct reg_rq put = {.method = "PUT",
                         .url = target,
                         .headers = put_hdrs,
                         .body_fd = u->fd,
                         .body_off = off,
                         .body_size = size,
                         .md5 = md5,
                         .no_auth = true,
                         .stall_ms = u->s->reg->stall_timeout_ms};
    int arc = reg_http(&put, NULL, u->s->cancel, rsp, ae);
    free(target);
    if (arc == 0 && rsp->status >= 400)
        arc = err_set(ae, ERR_NETWORK, "http status %ld", rsp->status);
    if (arc == 0 && next) {
        free(u->url);
        u->url = next;
        next = NULL;
    }
    free(next);
    return arc;
}

// One try at one part: a PATCH of bytes [off, off + size), following a 307 redirect and
// answering a 401 challenge (the retry then carries the token). part_md5 gets the MD5 of
// the bytes sent, for the etag.
static int upload_part_once(struct blob_upload *u, uint64_t off, uint64_t size,
                            uint8_t part_md5[16], struct err *ae)
{
    struct reg_session *s = u->s;
    char range[80], clen[64];
    snprintf(range, sizeof(range), "Content-Range: %llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + size - 1));
    snprintf(clen, sizeof(clen), "Content-Length: %llu", (unsigned long long)size);
    const char *hdrs[] = {"Content-Type: application/octet-stream", range, "X-Redirect-Uploads: 1",
                          NULL};
    (void)clen;
    EVP_MD_CTX *md5 = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md5, EVP_md5(), NULL);
    struct up_progress up = {u->o, u->status, u->l->digest, u->total, u->sent, time_monotonic_ns()};
    struct reg_rq rq = {.method = "PATCH",
                        .url = u->url,
                        .headers = hdrs,
                        .body_fd = u->fd,
                        .body_off = off,
                        .body_size = size,
                        .md5 = md5,
                        .stall_ms = s->reg->stall_timeout_ms,
                        .on_xfer = on_upload,
                        .xfer_ctx = &up};
    struct reg_rsp *rsp = &u->rsp;
    int arc = reg_http(&rq, reg_session_auth_for(s, u->url), s->cancel, rsp, ae);
    if (arc == 0 && rsp->status == 307 && rsp->location) {
        arc = upload_part_redirected(u, off, size, md5, ae);
    } else if (arc == 0 && rsp->status == 401) {
        struct err te = {0};
        arc = reg_auth_challenge(s, rsp->www_auth, u->url, &te);
        if (arc == 0)
            arc = err_set(ae, ERR_UNAUTHORIZED, "unauthorized");
        else
            *ae = te;
    } else if (arc == 0 && rsp->status >= 400) {
        size_t bl = rsp->body.len > 200 ? 200 : rsp->body.len;
        arc = err_set(ae, rsp->status >= 500 ? ERR_NETWORK : ERR_INVALID, "http status %ld: %.*s",
                      rsp->status, (int)bl, rsp->body.data ? rsp->body.data : "");
    } else if (arc == 0) {
        const char *next = rsp->upload_location ? rsp->upload_location : rsp->location;
        if (next) {
            free(u->url);
            u->url = xstrdup(next);
        }
    }
    unsigned int mdlen = 16;
    EVP_DigestFinal_ex(md5, part_md5, &mdlen);
    EVP_MD_CTX_free(md5);
    return arc;
}

// One part with retries: up to 6 tries with doubling backoff, none after a cancel or a
// 4xx answer.
static int upload_part(struct blob_upload *u, uint64_t off, uint64_t size, uint8_t part_md5[16],
                       struct err *e)
{
    for (int failures = 0;;) {
        struct err ae = {0};
        int arc = upload_part_once(u, off, size, part_md5, &ae);
        if (arc == 0) {
            u->sent += size;
            upload_progress(u, u->sent);
            return 0;
        }
        if (arc == ERR_CANCELLED || ++failures >= 6 ||
            (arc == ERR_INVALID && u->rsp.status < 500 && u->rsp.status != 0)) {
            err_set(e, arc, "%s", ae.msg);
            return arc;
        }
        reg_sleep_ms(((int64_t)1 << (failures - 1)) * u->s->reg->backoff_unit_ms);
    }
}

// Closes the session: PUT ?digest=...&etag=<MD5 of the part MD5s>-<parts>, retried like
// a part except that an auth failure is final.
static int upload_finish(struct blob_upload *u, EVP_MD_CTX *etag, size_t n_parts, struct err *e)
{
    uint8_t em[16];
    unsigned int elen = 16;
    EVP_DigestFinal_ex(etag, em, &elen);
    char params[200];
    int pl = snprintf(params, sizeof(params), "digest=sha256%%3A%s&etag=", u->l->digest + 7);
    for (int i = 0; i < 16; i++)
        pl += snprintf(params + pl, sizeof(params) - (size_t)pl, "%02x", em[i]);
    snprintf(params + pl, sizeof(params) - (size_t)pl, "-%zu", n_parts);
    struct buf fin;
    buf_init(&fin, 0);
    url_add_query(&fin, u->url, params);
    const char *hdrs[] = {"Content-Type: application/octet-stream", NULL};
    int rc;
    for (int failures = 0;;) {
        struct reg_rq rq = {.method = "PUT", .url = fin.data, .headers = hdrs, .timeout_s = 300};
        struct err fe = {0};
        rc = reg_session_do(u->s, &rq, &u->rsp, &fe);
        if (rc == 0 || rc == ERR_CANCELLED || rc == ERR_UNAUTHORIZED || ++failures >= 6 ||
            rc == ERR_INVALID) {
            if (rc < 0)
                err_set(e, rc, "%s", fe.msg);
            break;
        }
        reg_sleep_ms(((int64_t)1 << (failures - 1)) * u->s->reg->backoff_unit_ms);
    }
    buf_deinit(&fin);
    if (rc == 0)
        upload_progress(u, u->total);
    return rc;
}

// Sends the blob file in parts, in order, then closes the session.
static int upload_send(struct blob_upload *u, struct err *e)
{
    struct registry *r = u->s->reg;
    char path[4096];
    int rc = store_blob_path(r->store, u->l->digest, path, sizeof(path), e);
    u->fd = rc == 0 ? open(path, O_RDONLY) : -1;
    if (rc == 0 && u->fd < 0)
        rc = err_set(e, ERR_NOT_FOUND, "open %s: %s", path, strerror(errno));
    uint64_t ps = registry_part_size(u->total, r->part_min, r->part_max);
    size_t n_parts = u->total ? (size_t)((u->total + ps - 1) / ps) : 0;
    EVP_MD_CTX *etag = EVP_MD_CTX_new();
    EVP_DigestInit_ex(etag, EVP_md5(), NULL);
    upload_progress(u, 0);
    for (size_t i = 0; rc == 0 && i < n_parts; i++) {
        uint64_t off = i * ps, size = i + 1 < n_parts ? ps : u->total - off;
        uint8_t part_md5[16];
        rc = upload_part(u, off, size, part_md5, e);
        if (rc == 0)
            EVP_DigestUpdate(etag, part_md5, 16);
    }
    if (u->fd >= 0)
        close(u->fd);
    if (rc == 0)
        rc = upload_finish(u, etag, n_parts, e);
    EVP_MD_CTX_free(etag);
    return rc;
}

// A blob the registry lacks: HEAD, then an upload session (or a mount), then the parts.
static int upload_blob(struct reg_session *s, const struct store_layer *l,
                       const struct registry_opts *o, struct err *e)
{
    struct blob_upload u = {.s = s, .l = l, .o = o, .total = (uint64_t)l->size, .fd = -1};
    snprintf(u.status, sizeof(u.status), "pushing %.12s", l->digest + 7);
    reg_rsp_init(&u.rsp);
    bool have = false;
    int rc = upload_head(&u, &have, e);
    if (rc == 0 && !have)
        rc = upload_open_session(&u, &have, e);
    if (rc == 0 && have)
        upload_progress(&u, u.total);
    else if (rc == 0)
        rc = upload_send(&u, e);
    free(u.url);
    reg_rsp_deinit(&u.rsp);
    return rc;
}

// Uploads are shared by digest server-wide (registry.md §6.2): a push that
// wants a blob another push is uploading to the same host waits for it, then
// finds it with its HEAD (or mounts / uploads it to its own repository).
static int upload_shared(struct reg_session *s, const struct store_layer *l,
                         const struct registry_opts *o, struct err *e)
{
    struct registry *r = s->reg;
    char *key = xasprintf("%s %s", s->host, l->digest);
    pthread_mutex_lock(&r->mu);
    for (;;) {
        bool busy = false;
        for (size_t i = 0; i < r->n_uploads; i++)
            busy |= strcmp(r->uploads[i], key) == 0;
        if (!busy)
            break;
        pthread_cond_wait(&r->uploads_cv, &r->mu);
    }
    r->uploads = xrealloc(r->uploads, (r->n_uploads + 1) * sizeof(char *));
    r->uploads[r->n_uploads++] = key;
    pthread_mutex_unlock(&r->mu);
    int rc = upload_blob(s, l, o, e);
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_uploads; i++)
        if (r->uploads[i] == key) {
            r->uploads[i] = r->uploads[--r->n_uploads];
            break;
        }
    pthread_cond_broadcast(&r->uploads_cv);
    pthread_mutex_unlock(&r->mu);
    free(key);
    return rc;
}

int registry_push(struct registry *r, const char *name, const struct registry_opts *o,
                  struct err *e)
{
    struct store_name n;
    bool insecure = o && o->insecure;
    int rc = reg_parse_name(r, name, insecure, &n, e);
    if (rc < 0)
        return rc;
    struct reg_session s;
    reg_session_init(&s, r, &n, insecure);
    s.cancel = o ? o->cancel : NULL;
    struct store_manifest m = {0};
    struct buf body;
    buf_init(&body, REG_MAX_MANIFEST_BYTES);
    reg_progress(o, "retrieving manifest", NULL, 0, 0);
    rc = store_manifest_load(r->store, &n, &m, NULL, e);
    if (rc < 0) {
        reg_progress(o, "couldn't retrieve manifest", NULL, 0, 0);
        if (rc == ERR_NOT_FOUND) {
            char path[4096] = "";
            store_manifest_path(r->store, &n, path, sizeof(path), NULL);
            err_clear(e);
            err_set(e, ERR_NOT_FOUND, "open %s: no such file or directory", path);
        }
        reg_session_deinit(&s);
        buf_deinit(&body);
        return rc;
    }
    for (size_t i = 0; rc == 0 && i <= m.n_layers; i++) {
        const struct store_layer *l = i < m.n_layers ? &m.layers[i] : &m.config;
        if (!l->digest[0])
            continue;
        rc = upload_shared(&s, l, o, e);
    }
    if (rc == 0) {
        reg_progress(o, "pushing manifest", NULL, 0, 0);
        rc = store_manifest_encode(&m, &body);
        while (rc == 0 && body.len && body.data[body.len - 1] == '\n')
            body.data[--body.len] = '\0';
    }
    if (rc == 0) {
        char url[1024];
        snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", s.base, s.repo, n.tag);
        const char *hdrs[] = {"Content-Type: " STORE_MT_MANIFEST, NULL};
        struct reg_rq rq = {.method = "PUT",
                            .url = url,
                            .headers = hdrs,
                            .body = body.data,
                            .body_len = body.len,
                            .timeout_s = 120};
        struct reg_rsp rsp;
        reg_rsp_init(&rsp);
        rc = reg_session_do(&s, &rq, &rsp, e);
        reg_rsp_deinit(&rsp);
    }
    if (rc == 0)
        reg_progress(o, "success", NULL, 0, 0);
    store_manifest_deinit(&m);
    buf_deinit(&body);
    reg_session_deinit(&s);
    return rc;
}

// Registry endpoints of `ollama serve`: POST /api/pull and /api/push
// (api.md §13-14, streamed progress), and the read side of the registry API
// under /v2/ (manifests and blobs, GET/HEAD, single byte ranges, the
// Content-Type and Docker-Content-Digest headers OCI clients expect) served
// from the store, so another machine can `ollama pull --insecure
// host:11434/library/model:tag`. With OLLAMA_REGISTRY_MIRROR set, what the
// store lacks is pulled once from that upstream, verified and stored, then
// served (a pull-through cache). The mirror never accepts writes.
#include "server/internal.h"

#include "registry/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// One registry client per store (normally one per process), made on first
// use and kept for the life of the process.
struct reg_slot {
    struct reg_slot *next;
    const struct store *store;
    struct registry *reg;
};
static pthread_mutex_t reg_slots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg_slot *reg_slots;  // (reg_slots_mu)

static struct registry *server_registry(struct server *srv)
{
    pthread_mutex_lock(&reg_slots_mu);
    struct reg_slot *s;
    for (s = reg_slots; s; s = s->next)
        if (s->store == srv->store)
            break;
    if (!s) {
        struct registry_config cfg = {.mirror_upstream = srv->cfg->registry_mirror,
                                      .pull_mirror = srv->cfg->pull_mirror};
        struct registry *reg = NULL;
        if (registry_new(&reg, srv->store, &cfg, NULL) == 0) {
            s = xcalloc(1, sizeof(*s));
            s->store = srv->store;
            s->reg = reg;
            s->next = reg_slots;
            reg_slots = s;
        }
    }
    pthread_mutex_unlock(&reg_slots_mu);
    return s ? s->reg : NULL;
}

void srv_registry_release(struct server *srv)
{
    pthread_mutex_lock(&reg_slots_mu);
    struct reg_slot **pp = &reg_slots, *s = NULL;
    while (*pp && (*pp)->store != srv->store)
        pp = &(*pp)->next;
    if (*pp) {
        s = *pp;
        *pp = s->next;
    }
    pthread_mutex_unlock(&reg_slots_mu);
    if (s) {
        registry_free(s->reg);  // stops the mirror's background pulls and waits for them
        free(s);
    }
}

// ---------------------------------------------------------------------------
// Pull and push: progress lines while streaming, the last object otherwise.

struct reg_job {
    struct server *srv;
    char *model;
    bool push;
    bool insecure;
    struct srv_stream *st;
    json_t *last;
    volatile int cancel;
};

static void job_progress(void *ctx, const struct store_progress *p)
{
    struct reg_job *job = ctx;
    if (atomic_load(&job->srv->stopping))
        __atomic_store_n(&job->cancel, 1, __ATOMIC_RELEASE);  // shutting down: stop the pull
    if (!job->push && p->digest && p->total && p->completed == p->total)
        server_metrics_pulled(p->total);  // a layer finished
    srv_progress_send(job->st, &job->last, &job->cancel, p);
}

static int job_run(struct reg_job *job, struct err *e)
{
    struct registry *reg = server_registry(job->srv);
    if (!reg)
        return err_set(e, ERR_INTERNAL, "registry client unavailable");
    struct registry_opts o = {.insecure = job->insecure,
                              .noprune = job->srv->cfg->noprune,
                              .progress = job_progress,
                              .progress_ctx = job,
                              .cancel = &job->cancel};
    return job->push ? registry_push(reg, job->model, &o, e)
                     : registry_pull(reg, job->model, &o, e);
}

static void job_free(struct reg_job *job)
{
    free(job->model);
    json_decref(job->last);
    free(job);
}

static void job_producer(struct srv_stream *st, void *arg)
{
    struct reg_job *job = arg;
    job->st = st;  // before the first progress line (the starter may not have set it yet)
    struct err e = {0};
    int rc = job_run(job, &e);
    if (rc < 0 && rc != ERR_CANCELLED)
        srv_stream_error(st, e.msg);
    if (rc < 0)
        log_warn("%s %s: %s", job->push ? "push" : "pull", job->model, e.msg);
    srv_stream_end(st);
    job_free(job);
}

static void handle_transfer(struct srv_req *r, bool push)
{
    json_t *body = srv_body_json(r);
    if (!body)
        return;
    const char *model = srv_model_field(r, body, 400);
    if (!model) {
        json_decref(body);
        return;
    }
    bool stream = true, insecure = false;
    struct err e = {0};
    if (jsonx_get_bool(body, "stream", &stream, false, &e) < 0 ||
        jsonx_get_bool(body, "insecure", &insecure, false, &e) < 0) {
        json_decref(body);
        srv_reply_error(r, 400, e.msg);
        return;
    }
    if (!store_name_valid(model)) {
        json_decref(body);
        srv_reply_error(r, 400, "invalid model name");
        return;
    }
    struct reg_job *job = xcalloc(1, sizeof(*job));
    job->srv = r->srv;
    job->model = xstrdup(model);
    job->push = push;
    job->insecure = insecure;
    json_decref(body);
    if (!stream) {
        int rc = job_run(job, &e);
        if (rc < 0)
            srv_reply_error(r, rc == ERR_INVALID && !e.msg[0] ? 400 : 500, e.msg);
        else
            srv_reply_json(r, 200, json_pack("{s:s}", "status", "success"));
        job_free(job);
        return;
    }
    srv_stream_start(r, 200, "application/x-ndjson", job_producer, job);
    if (!r->stream)
        job_free(job);
}

static void handle_pull(struct srv_req *r)
{
    handle_transfer(r, false);
}

static void handle_push(struct srv_req *r)
{
    handle_transfer(r, true);
}

// The store's hook for create FROM a model that is not local.
int srv_registry_pull(void *ctx, const char *name, store_progress_fn progress, void *progress_ctx,
                      struct err *e)
{
    struct server *srv = ctx;
    struct registry *reg = server_registry(srv);
    if (!reg)
        return err_set(e, ERR_INTERNAL, "registry client unavailable");
    struct registry_opts o = {
        .noprune = srv->cfg->noprune, .progress = progress, .progress_ctx = progress_ctx};
    int rc = registry_pull(reg, name, &o, e);
    // A base model neither local nor obtainable from its registry is "not
    // found" (api.md §12), whatever kept the manifest from arriving.
    if (rc < 0 && rc != ERR_CANCELLED &&
        cstr_starts_with(e ? e->msg : "", "pull model manifest:")) {
        rc = ERR_NOT_FOUND;
        if (e)
            e->code = ERR_NOT_FOUND;
    }
    return rc;
}

// ---------------------------------------------------------------------------
// /v2/: the read side of the distribution API.

// Replies set on the wrapper's request directly (headers and file bodies).
static void v2_reply(struct srv_req *r, int status, const char *content_type, const void *body,
                     size_t len)
{
    httpd_reply_header(r->h, "Docker-Distribution-API-Version", "registry/2.0");
    httpd_reply(r->h, status, content_type, body, len);
    r->raw_reply = true;
    r->status = status;
}

static void v2_error(struct srv_req *r, int status, const char *code, const char *msg)
{
    json_t *o = json_pack("{s:[{s:s,s:s}]}", "errors", "code", code, "message", msg);
    char *text = jsonx_dumps(o, 0);
    json_decref(o);
    v2_reply(r, status, "application/json; charset=utf-8", text ? text : "",
             strlen(text ? text : ""));
    free(text);
}

static void v2_err(struct srv_req *r, int rc, const struct err *e, const char *code)
{
    if (rc == ERR_NOT_FOUND)
        v2_error(r, 404, code, e->msg[0] ? e->msg : "not found");
    else if (rc == ERR_INVALID)
        v2_error(r, 400, strcmp(code, "BLOB_UNKNOWN") == 0 ? "DIGEST_INVALID" : "MANIFEST_INVALID",
                 e->msg);
    else
        v2_error(r, 502, "UNKNOWN", e->msg[0] ? e->msg : "upstream error");
}

static void handle_v2_base(struct srv_req *r)
{
    v2_reply(r, 200, "application/json; charset=utf-8", "{}", 2);
}

static void v2_manifest(struct srv_req *r, const char *repo, const char *ref)
{
    struct registry *reg = server_registry(r->srv);
    struct buf body;
    buf_init(&body, 0);
    const char *mt = STORE_MT_MANIFEST;
    struct err e = {0};
    int rc = reg ? registry_mirror_manifest(reg, repo, ref, &body, &mt, &e)
                 : err_set(&e, ERR_INTERNAL, "registry client unavailable");
    if (rc < 0) {
        buf_deinit(&body);
        v2_err(r, rc, &e, "MANIFEST_UNKNOWN");
        return;
    }
    char hex[DIGEST_HEX_LEN + 1], digest[DIGEST_HEX_LEN + 8];
    sha256_hex(body.data, body.len, hex);
    digest_format(hex, digest);
    httpd_reply_header(r->h, "Docker-Content-Digest", digest);
    char etag[DIGEST_HEX_LEN + 12];
    snprintf(etag, sizeof(etag), "\"%s\"", digest);
    httpd_reply_header(r->h, "ETag", etag);
    v2_reply(r, 200, mt, body.data ? body.data : "", body.len);
    buf_deinit(&body);
}

// Parses a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range. Returns
// false for anything unsatisfiable (multiple ranges are served whole).
static bool parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len, bool *whole)
{
    *whole = true;
    if (!h)
        return true;
    if (!cstr_starts_with(h, "bytes=") || strchr(h, ','))
        return true;
    const char *spec = h + 6;
    const char *dash = strchr(spec, '-');
    if (!dash)
        return true;
    char a[32] = "", b[32] = "";
    size_t al = (size_t)(dash - spec), bl = strlen(dash + 1);
    if (al >= sizeof(a) || bl >= sizeof(b))
        return false;
    memcpy(a, spec, al);
    memcpy(b, dash + 1, bl + 1);
    uint64_t x = 0, y = 0;
    if (al == 0) {  // suffix
        if (str_to_u64(b, UINT64_MAX, &y, NULL) < 0 || y == 0 || size == 0)
            return false;
        if (y > size)
            y = size;
        *start = size - y;
        *len = y;
    } else {
        if (str_to_u64(a, UINT64_MAX, &x, NULL) < 0 || x >= size)
            return false;
        if (bl == 0) {
            y = size - 1;
        } else if (str_to_u64(b, UINT64_MAX, &y, NULL) < 0 || y < x) {
            return false;
        }
        if (y >= size)
            y = size - 1;
        *start = x;
        *len = y - x + 1;
    }
    *whole = false;
    return true;
}

static void v2_blob(struct srv_req *r, const char *repo, const char *digest)
{
    struct registry *reg = server_registry(r->srv);
    char path[4096];
    struct err e = {0};
    char canon[STORE_DIGEST_LEN + 1];
    snprintf(canon, sizeof(canon), "%s", digest);
    canon[6] = ':';
    for (char *p = canon + 7; *p; p++)
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p + 32);
    bool head = strcmp(r->method, "HEAD") == 0;
    uint64_t upstream_size = 0;
    int rc =
        reg ? registry_mirror_blob(reg, repo, digest, head, path, sizeof(path), &upstream_size, &e)
            : err_set(&e, ERR_INTERNAL, "registry client unavailable");
    if (rc < 0) {
        v2_err(r, rc, &e, "BLOB_UNKNOWN");
        return;
    }
    if (!path[0]) {  // HEAD of a blob only upstream has: its length, no body
        httpd_reply_header(r->h, "Docker-Content-Digest", canon);
        httpd_reply_header(r->h, "Accept-Ranges", "bytes");
        v2_reply(r, 200, "application/octet-stream", "", 0);
        httpd_reply_length(r->h, 200, upstream_size);
        return;
    }
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        err_set(&e, ERR_NOT_FOUND, "blob unknown to registry");
        v2_err(r, ERR_NOT_FOUND, &e, "BLOB_UNKNOWN");
        return;
    }
    uint64_t size = (uint64_t)st.st_size, start = 0, len = size;
    bool whole = true;
    if (!parse_range(srv_header(r, "Range"), size, &start, &len, &whole)) {
        close(fd);
        char cr[64];
        snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
        httpd_reply_header(r->h, "Content-Range", cr);
        v2_reply(r, 416, NULL, "", 0);
        return;
    }
    if (whole) {
        start = 0;
        len = size;
    }
    httpd_reply_header(r->h, "Docker-Content-Digest", canon);
    httpd_reply_header(r->h, "Accept-Ranges", "bytes");
    char etag[STORE_DIGEST_LEN + 4];
    snprintf(etag, sizeof(etag), "\"%s\"", canon);
    httpd_reply_header(r->h, "ETag", etag);
    if (!whole) {
        char cr[96];
        snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)start,
                 (unsigned long long)(start + len - 1), (unsigned long long)size);
        httpd_reply_header(r->h, "Content-Range", cr);
    }
    int status = whole ? 200 : 206;
    v2_reply(r, status, "application/octet-stream", "", 0);
    httpd_reply_fd(r->h, status, fd, start, len);
}

// /v2/<namespace>/<model>/manifests/<ref> and /v2/<namespace>/<model>/blobs/<digest>.
static void handle_v2(struct srv_req *r)
{
    const char *p = r->param ? r->param : "";
    const char *m = strstr(p, "/manifests/");
    const char *b = strstr(p, "/blobs/");
    const char *sep = m ? m : b;
    size_t skip = m ? strlen("/manifests/") : strlen("/blobs/");
    if (!sep || sep == p || strchr(sep + skip, '/') || !sep[skip]) {
        v2_error(r, 404, "NAME_UNKNOWN", "repository name not known to registry");
        return;
    }
    char repo[2 * STORE_PART_MAX + 2];
    size_t rl = (size_t)(sep - p);
    const char *slash = memchr(p, '/', rl);
    if (rl >= sizeof(repo) || !slash || memchr(slash + 1, '/', rl - (size_t)(slash + 1 - p))) {
        v2_error(r, 404, "NAME_UNKNOWN", "repository name not known to registry");
        return;
    }
    memcpy(repo, p, rl);
    repo[rl] = '\0';
    const char *ref = sep + skip;
    if (m) {
        // Tags follow the model-name rules; digests the digest rules.
        char probe[STORE_NAME_MAX];
        snprintf(probe, sizeof(probe), "%s:%s", repo, ref);
        if (!cstr_starts_with(ref, "sha256:") && !store_name_valid(probe)) {
            v2_error(r, 404, "NAME_UNKNOWN", "repository name not known to registry");
            return;
        }
        v2_manifest(r, repo, ref);
    } else {
        if (!store_digest_valid(ref)) {
            v2_error(r, 400, "DIGEST_INVALID", "invalid digest format");
            return;
        }
        v2_blob(r, repo, ref);
    }
}

const struct srv_route server_registry_routes[] = {
    {"POST", "/api/pull", handle_pull, NULL}, {"POST", "/api/push", handle_push, NULL},
    {"GET", "/v2/", handle_v2_base, NULL},    {"GET", "/v2", handle_v2_base, NULL},
    {"GET", "/v2/*", handle_v2, NULL},        {NULL, NULL, NULL, NULL},
};

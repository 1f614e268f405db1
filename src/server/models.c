// Model-store endpoints (api.md §3, §5, §12, §15, §16): list, show, copy,
// delete, create (streamed progress) and blob upload. Each handler is a thin
// call into the store module; the store decides paths, digests and wording.
#include "server/internal.h"

#include <stdlib.h>
#include <string.h>

// The model name of a request: "model", else the legacy "name". Replies 400
// on a type error; an empty name is answered with empty_status: 400 "model is
// required" (most endpoints) or 404 "model '' not found" (generate, embed).
const char *srv_model_field(struct srv_req *r, const json_t *body, int empty_status)
{
    struct err e = {0};
    const char *name = NULL;
    if (jsonx_get_str(body, "model", &name, false, &e) < 0 ||
        (!name && jsonx_get_str(body, "name", &name, false, &e) < 0)) {
        srv_reply_error(r, 400, e.msg);
        return NULL;
    }
    if (!name || !*name) {
        if (empty_status == 404)
            srv_reply_error(r, 404, "model '' not found");
        else
            srv_reply_error(r, 400, "model is required");
        return NULL;
    }
    return name;
}

static void handle_tags(struct srv_req *r)
{
    json_t *out = NULL;
    struct err e = {0};
    int rc = store_tags_json(r->srv->store, &out, &e);
    if (rc < 0) {
        srv_reply_err(r, rc, &e);
        return;
    }
    srv_reply_json(r, 200, out);
}

static void handle_show(struct srv_req *r)
{
    json_t *body = srv_body_json(r);
    if (!body)
        return;
    const char *name = srv_model_field(r, body, 400);
    struct err e = {0};
    struct store_show_opts o = {0};
    json_t *options = NULL;
    if (name && (jsonx_get_bool(body, "verbose", &o.verbose, false, &e) < 0 ||
                 jsonx_get_str(body, "system", &o.system, false, &e) < 0 ||
                 jsonx_get_obj(body, "options", &options, false, &e) < 0)) {
        srv_reply_error(r, 400, e.msg);
        name = NULL;
    }
    if (name) {
        o.options = options;
        json_t *out = NULL;
        int rc = store_show(r->srv->store, name, &o, &out, &e);
        if (rc < 0)
            srv_reply_err(r, rc, &e);
        else
            srv_reply_json(r, 200, out);
    }
    json_decref(body);
}

static void handle_copy(struct srv_req *r)
{
    json_t *body = srv_body_json(r);
    if (!body)
        return;
    const char *src = NULL, *dst = NULL;
    struct err e = {0};
    if (jsonx_get_str(body, "source", &src, false, &e) < 0 ||
        jsonx_get_str(body, "destination", &dst, false, &e) < 0) {
        srv_reply_error(r, 400, e.msg);
    } else {
        int rc = store_copy(r->srv->store, src ? src : "", dst ? dst : "", &e);
        if (rc < 0)
            srv_reply_err(r, rc, &e);
        else
            srv_reply(r, 200, NULL, "", 0);
    }
    json_decref(body);
}

static void handle_delete(struct srv_req *r)
{
    json_t *body = srv_body_json(r);
    if (!body)
        return;
    const char *name = srv_model_field(r, body, 400);
    if (name) {
        struct err e = {0};
        int rc = store_delete(r->srv->store, name, &e);
        if (rc < 0)
            srv_reply_err(r, rc, &e);
        else
            srv_reply(r, 200, NULL, "", 0);
    }
    json_decref(body);
}

// ---------------------------------------------------------------------------
// Create: validation errors are answered with 400 before streaming starts;
// afterwards progress lines are streamed and a failure ends the stream with
// an {"error": ...} line.

struct create_job {
    struct server *srv;
    struct store_create_req req;
    struct srv_stream *st;  // NULL when not streaming
    json_t *last;           // last progress object (non-streaming reply)
    volatile int cancel;
};

static json_t *progress_json(const struct store_progress *p)
{
    json_t *o = json_object();
    jsonx_set_str(o, "status", p->status);
    if (p->digest)
        jsonx_set_str(o, "digest", p->digest);
    if (p->total)
        jsonx_set_int(o, "total", (int64_t)p->total);
    if (p->completed)
        jsonx_set_int(o, "completed", (int64_t)p->completed);
    return o;
}

void srv_progress_send(struct srv_stream *st, json_t **last, volatile int *cancel,
                       const struct store_progress *p)
{
    if (st) {
        if (srv_stream_json_line(st, progress_json(p)) == ERR_CANCELLED)
            __atomic_store_n(cancel, 1, __ATOMIC_RELEASE);
    } else {
        json_decref(*last);
        *last = progress_json(p);
    }
}

static void create_progress(void *ctx, const struct store_progress *p)
{
    struct create_job *job = ctx;
    srv_progress_send(job->st, &job->last, &job->cancel, p);
}

// A TEMPLATE given to create must parse (Go template syntax).
static int create_template_check(void *ctx, const char *text, struct err *e)
{
    (void)ctx;
    return prompt_go_template_check(text, e);
}

// A GGUF without a TEMPLATE: pick the built-in Go template matching its Jinja
// chat template, as Ollama does (templates.md).
static bool create_template_detect(void *ctx, const char *chat_template, const char **name,
                                   const char **go_template, const char *const **stops)
{
    (void)ctx;
    return prompt_go_template_detect(chat_template, name, go_template, stops);
}

static int create_run(struct create_job *job, struct err *e)
{
    struct store_create_opts o = {
        .progress = create_progress,
        .progress_ctx = job,
        .pull = srv_registry_pull,
        .pull_ctx = job->srv,
        .template_check = create_template_check,
        .template_detect = create_template_detect,
        .noprune = job->srv->cfg->noprune,
        .cancel = &job->cancel,
    };
    return store_create(job->srv->store, &job->req, &o, e);
}

static void create_job_free(struct create_job *job)
{
    store_create_req_deinit(&job->req);
    json_decref(job->last);
    free(job);
}

static void create_producer(struct srv_stream *st, void *arg)
{
    struct create_job *job = arg;
    job->st = st;  // before any progress: the producer may run before start returns
    struct err e = {0};
    int rc = create_run(job, &e);
    if (rc < 0 && rc != ERR_CANCELLED)
        srv_stream_error(st, e.msg);
    if (rc < 0)
        log_warn("create %s: %s", job->req.model ? job->req.model : "", e.msg);
    srv_stream_end(st);
    create_job_free(job);
}

static void handle_create(struct srv_req *r)
{
    json_t *body = srv_body_json(r);
    if (!body)
        return;
    struct create_job *job = xcalloc(1, sizeof(*job));
    job->srv = r->srv;
    struct err e = {0};
    bool stream = true;
    int rc = store_create_req_from_json(&job->req, body, &e);
    if (rc == 0)
        rc = jsonx_get_bool(body, "stream", &stream, false, &e) < 0 ? ERR_INVALID : 0;
    if (rc == 0)
        rc = store_create_validate(&job->req, &e);
    if (rc == 0 && !job->req.from && job->req.n_files == 0 && !job->req.modelfile)
        rc = err_set(&e, ERR_INVALID, "neither 'from' or 'files' was specified");
    json_decref(body);
    if (rc < 0) {
        srv_reply_err(r, rc, &e);
        create_job_free(job);
        return;
    }
    if (!stream) {
        rc = create_run(job, &e);
        if (rc < 0)
            srv_reply_err(r, rc, &e);
        else
            srv_reply_json(r, 200, json_pack("{s:s}", "status", "success"));
        create_job_free(job);
        return;
    }
    // The job is handed to the producer thread; it frees it.
    if (srv_stream_start(r, 200, "application/x-ndjson", create_producer, job) < 0)
        create_job_free(job);
}

// ---------------------------------------------------------------------------
// Blobs: HEAD answers whether a blob exists; POST streams the body into a
// blob writer that verifies the digest before anything becomes visible.

struct blob_upload {
    struct store_blob_writer *w;
    bool exists;  // already stored: the body is ignored
};

static void blob_upload_free(void *p)
{
    struct blob_upload *u = p;
    if (u->w)
        store_blob_writer_abort(u->w);
    free(u);
}

// Validates the digest of the path; replies 400 and returns false if bad.
static bool blob_digest(struct srv_req *r, char *out, size_t n)
{
    struct err e = {0};
    char hex[DIGEST_HEX_LEN + 1];
    const char *p = r->param ? r->param : "";
    if (store_digest_parse(p, hex, &e) < 0) {
        srv_reply_error(r, 400, "invalid digest format");
        return false;
    }
    snprintf(out, n, "sha256:%s", hex);
    return true;
}

static int blob_upload_begin(struct srv_req *r)
{
    struct blob_upload *u = xcalloc(1, sizeof(*u));
    r->upload = u;
    r->upload_free = blob_upload_free;
    r->upload_started = true;
    char hex[DIGEST_HEX_LEN + 1];
    const char *p = r->param ? r->param : "";
    if (store_digest_parse(p, hex, &r->upload_err) < 0)
        return ERR_INVALID;
    char digest[80];
    snprintf(digest, sizeof(digest), "sha256:%s", hex);
    if (store_blob_exists(r->srv->store, digest)) {
        u->exists = true;
        return 0;
    }
    return store_blob_writer_open(r->srv->store, digest, &u->w, &r->upload_err);
}

static int blob_on_body(struct srv_req *r, const char *p, size_t n)
{
    if (!r->upload_started) {
        int rc = blob_upload_begin(r);
        if (rc < 0)
            return rc;
    }
    struct blob_upload *u = r->upload;
    if (u->exists)
        return 0;
    return store_blob_writer_write(u->w, p, n, &r->upload_err);
}

static void handle_blob_head(struct srv_req *r)
{
    char digest[80];
    if (!blob_digest(r, digest, sizeof(digest)))
        return;
    if (store_blob_exists(r->srv->store, digest)) {
        srv_reply(r, 200, NULL, "", 0);
    } else {
        char msg[160];
        snprintf(msg, sizeof(msg), "blob \"%s\" not found", digest);
        srv_reply_error(r, 404, msg);
    }
}

static void handle_blob_post(struct srv_req *r)
{
    char digest[80];
    if (!blob_digest(r, digest, sizeof(digest)))
        return;
    if (!r->upload_started && r->upload_rc == 0)
        r->upload_rc = blob_upload_begin(r);  // empty body
    struct blob_upload *u = r->upload;
    if (r->upload_rc < 0) {
        srv_reply_err(r, r->upload_rc, &r->upload_err);
        return;
    }
    if (u->exists) {
        srv_reply(r, 200, NULL, "", 0);
        return;
    }
    struct err e = {0};
    char got[STORE_DIGEST_LEN + 1];
    int rc = store_blob_writer_commit(u->w, got, NULL, &e);
    u->w = NULL;  // committed or aborted by commit
    if (rc < 0) {
        srv_reply_err(r, rc == ERR_DIGEST ? ERR_INVALID : rc, &e);
        return;
    }
    srv_reply(r, 201, NULL, "", 0);
}

// Route rows (listed in server_route_tables by routes.c).
const struct srv_route server_model_routes[] = {
    {"GET", "/api/tags", handle_tags, NULL},
    {"POST", "/api/show", handle_show, NULL},
    {"POST", "/api/copy", handle_copy, NULL},
    {"DELETE", "/api/delete", handle_delete, NULL},
    {"POST", "/api/create", handle_create, NULL},
    {"HEAD", "/api/blobs/*", handle_blob_head, NULL},
    {"POST", "/api/blobs/*", handle_blob_post, blob_on_body},
    {NULL, NULL, NULL, NULL},
};

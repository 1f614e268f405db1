// Pull (registry.md §5) and the registry object. The manifest is fetched
// and checked first, every blob is downloaded and verified, and only then is
// the manifest written (atomically) and the old version's unused layers
// pruned: a failed or interrupted pull leaves the previous state visible.
#include "registry/internal.h"

#include <stdlib.h>
#include <string.h>

void reg_tokens_free(struct registry *reg);

int registry_new(struct registry **out, struct store *s, const struct registry_config *cfg,
                 struct err *e)
{
    (void)e;
    httpc_init();
    struct registry *r = xcalloc(1, sizeof(*r));
    r->store = s;
    const struct registry_config dflt = {0};
    if (!cfg)
        cfg = &dflt;
    if (cfg->key_path)
        r->key_path = xstrdup(cfg->key_path);
    else
        r->key_path = xasprintf("%s/.ollama/id_ed25519", env_home_dir());
    r->stall_timeout_ms = cfg->stall_timeout_ms > 0 ? cfg->stall_timeout_ms : 30000;
    r->backoff_unit_ms = cfg->backoff_unit_ms > 0 ? cfg->backoff_unit_ms : 1000;
    size_t n = 0;
    for (const char *const *a = cfg->realm_allow; a && *a; a++)
        n++;
    r->realm_allow = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        r->realm_allow[i] = xstrdup(cfg->realm_allow[i]);
    r->basic_auth = cfg->basic_auth ? xstrdup(cfg->basic_auth) : NULL;
    if (cfg->pull_mirror && *cfg->pull_mirror) {
        r->pull_mirror = xstrdup(cfg->pull_mirror);
        size_t len = strlen(r->pull_mirror);
        while (len && r->pull_mirror[len - 1] == '/')
            r->pull_mirror[--len] = '\0';
    }
    if (cfg->mirror_upstream && *cfg->mirror_upstream) {
        r->mirror_upstream = xstrdup(cfg->mirror_upstream);
        size_t len = strlen(r->mirror_upstream);
        while (len && r->mirror_upstream[len - 1] == '/')
            r->mirror_upstream[--len] = '\0';
    }
    r->part_min = cfg->part_min_bytes ? cfg->part_min_bytes : 100000000ull;
    r->part_max = cfg->part_max_bytes ? cfg->part_max_bytes : 1000000000ull;
    r->direct_io = !cfg->buffered_io;
    if (r->part_max < r->part_min)
        r->part_max = r->part_min;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->uploads_cv, NULL);
    *out = r;
    return 0;
}

void registry_free(struct registry *r)
{
    if (!r)
        return;
    // Downloads still running hold their own copy of what they need; stop
    // the mirror's background pulls and wait for them all so none outlives
    // the store.
    reg_cancel_set(&r->bg_cancel);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool busy = r->downloads != NULL || r->n_background > 0;
        pthread_mutex_unlock(&r->mu);
        if (!busy)
            break;
        reg_sleep_ms(20);
    }
    reg_tokens_free(r);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->uploads_cv);
    free(r->uploads);
    for (char **a = r->realm_allow; a && *a; a++)
        free(*a);
    free(r->realm_allow);
    free(r->basic_auth);
    free(r->mirror_upstream);
    free(r->pull_mirror);
    free(r->key_path);
    free(r);
}

// Accepted manifest media types: Docker schema 2 and the OCI image manifest
// (an empty mediaType is allowed by the OCI spec). Lists and indexes name
// other manifests, not models.
static bool manifest_type_ok(const char *mt)
{
    return !mt || !*mt || strcmp(mt, STORE_MT_MANIFEST) == 0 ||
           strcmp(mt, "application/vnd.oci.image.manifest.v1+json") == 0;
}

// Checks a parsed manifest beyond what the store's parser does: media type,
// sizes, digests present.
static int manifest_check(const struct store_manifest *m, const char *repo, struct err *e)
{
    if (m->schema_version != 2)
        return err_set(e, ERR_INVALID, "unsupported manifest schemaVersion %lld",
                       (long long)m->schema_version);
    if (!manifest_type_ok(m->media_type))
        return err_set(e, ERR_UNSUPPORTED, "unsupported manifest media type %s", m->media_type);
    for (size_t i = 0; i <= m->n_layers; i++) {
        const struct store_layer *l = i < m->n_layers ? &m->layers[i] : &m->config;
        if (i == m->n_layers && !l->digest[0])
            break;  // no config
        if (!l->digest[0])
            return err_set(e, ERR_INVALID, "%s: digest is empty", repo);
        if (!store_digest_valid(l->digest))
            return err_set(e, ERR_INVALID, "invalid digest format");
        if (l->size < 0 || (uint64_t)l->size > REG_MAX_BLOB_BYTES)
            return err_set(e, ERR_INVALID, "invalid size %lld for layer %s", (long long)l->size,
                           l->digest);
    }
    return 0;
}

static bool manifest_has(const struct store_manifest *m, const char *digest)
{
    if (m->config.digest[0] && ascii_ieq(m->config.digest, digest))
        return true;
    for (size_t i = 0; i < m->n_layers; i++)
        if (ascii_ieq(m->layers[i].digest, digest))
            return true;
    return false;
}

int reg_fetch_manifest(struct reg_session *s, const char *ref, struct buf *body, struct err *e);
int reg_fetch_manifest(struct reg_session *s, const char *ref, struct buf *body, struct err *e)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", s->base, s->repo, ref);
    static const char *const hdrs[] = {
        "Accept: application/vnd.docker.distribution.manifest.v2+json, "
        "application/vnd.oci.image.manifest.v1+json",
        NULL};
    struct reg_rq rq = {.method = "GET",
                        .url = url,
                        .headers = hdrs,
                        .follow = true,
                        .max_body = REG_MAX_MANIFEST_BYTES,
                        .timeout_s = REG_SLOW_REPLY_S};
    struct reg_rsp rsp;
    reg_rsp_init(&rsp);
    int rc = reg_session_do(s, &rq, &rsp, e);
    if (rc == 0 && rsp.status != 200)
        rc = err_set(e, ERR_INVALID, "unexpected status code %ld", rsp.status);
    if (rc == 0)
        rc = buf_append(body, rsp.body.data ? rsp.body.data : "", rsp.body.len);
    reg_rsp_deinit(&rsp);
    return rc;
}

// Fetches every layer and the config that isn't in the store yet; those already there are
// touched and reported as complete.
static int fetch_layers(struct reg_session *s, const struct store_manifest *m,
                        const struct registry_opts *o, struct err *e)
{
    struct registry *r = s->reg;
    for (size_t i = 0; i <= m->n_layers; i++) {
        const struct store_layer *l = i < m->n_layers ? &m->layers[i] : &m->config;
        if (!l->digest[0])
            continue;
        if (store_blob_exists(r->store, l->digest)) {
            char status[32];
            snprintf(status, sizeof(status), "pulling %.12s", l->digest + 7);
            store_blob_touch(r->store, l->digest);
            reg_progress(o, status, l->digest, (uint64_t)l->size, (uint64_t)l->size);
            continue;
        }
        int rc = reg_blob_fetch(s, l->digest, l->size, o, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// Each downloaded blob was hashed before it was renamed into place; a blob that vanished
// meanwhile (a concurrent delete) fails here.
static int verify_layers(struct registry *r, const struct store_manifest *m, struct err *e)
{
    for (size_t i = 0; i <= m->n_layers; i++) {
        const struct store_layer *l = i < m->n_layers ? &m->layers[i] : &m->config;
        if (l->digest[0] && !store_blob_exists(r->store, l->digest))
            return err_set(e, ERR_NOT_FOUND, "blob %s disappeared before the manifest was written",
                           l->digest);
    }
    return 0;
}

// After a re-pull, removes the blobs the old manifest named that the new one dropped. A
// failure is only reported as progress: the pull itself has succeeded.
static void prune_old(struct registry *r, const struct store_manifest *old,
                      const struct store_manifest *m, const struct registry_opts *o)
{
    bool unused = !manifest_has(m, old->config.digest[0] ? old->config.digest : "");
    if (!old->config.digest[0])
        unused = false;
    for (size_t i = 0; i < old->n_layers; i++)
        unused |= !manifest_has(m, old->layers[i].digest);
    if (!unused)
        return;
    reg_progress(o, "removing unused layers", NULL, 0, 0);
    struct err pe = {0};
    if (store_remove_unused(r->store, old, &pe) < 0) {
        char status[300];
        snprintf(status, sizeof(status), "couldn't remove unused layers: %s", pe.msg);
        reg_progress(o, status, NULL, 0, 0);
    }
}

// Pulls src (the registry to fetch from) into the store as n: the same name
// except when a pull mirror stands in for n's registry.
static int pull_from(struct registry *r, const struct store_name *src, const struct store_name *n,
                     bool insecure, const struct registry_opts *o, struct err *e)
{
    struct reg_session s;
    reg_session_init(&s, r, src, insecure);
    s.cancel = o ? o->cancel : NULL;
    struct store_manifest old = {0}, m = {0};
    bool have_old = false, have_new = false;
    struct buf body;
    buf_init(&body, REG_MAX_MANIFEST_BYTES);
    struct err le = {0};
    int rc = store_manifest_load(r->store, n, &old, NULL, &le);
    if (rc == 0)
        have_old = true;
    else if (rc != ERR_NOT_FOUND)
        log_warn("pull: ignoring unreadable old manifest: %s", le.msg);

    reg_progress(o, "pulling manifest", NULL, 0, 0);
    rc = reg_fetch_manifest(&s, n->tag, &body, e);
    if (rc < 0) {
        if (rc != ERR_CANCELLED)
            err_prefix(e, "pull model manifest");
        goto out;
    }
    rc = store_manifest_parse(body.data, body.len, &m, e);
    if (rc < 0)
        goto out;
    have_new = true;
    if ((rc = manifest_check(&m, s.repo, e)) < 0)
        goto out;
    if ((rc = fetch_layers(&s, &m, o, e)) < 0)
        goto out;
    reg_progress(o, "verifying sha256 digest", NULL, 0, 0);
    if ((rc = verify_layers(r, &m, e)) < 0)
        goto out;
    if (reg_cancelled(s.cancel)) {
        rc = err_set(e, ERR_CANCELLED, "context canceled");
        goto out;
    }
    reg_progress(o, "writing manifest", NULL, 0, 0);
    rc = store_manifest_write(r->store, n, body.data, body.len, e);
    if (rc < 0)
        goto out;
    if (have_old && !(o && o->noprune))
        prune_old(r, &old, &m, o);
    reg_progress(o, "success", NULL, 0, 0);
out:
    if (have_old)
        store_manifest_deinit(&old);
    if (have_new)
        store_manifest_deinit(&m);
    buf_deinit(&body);
    reg_session_deinit(&s);
    return rc;
}

int reg_parse_name(struct registry *r, const char *name, bool insecure, struct store_name *n,
                   struct err *e);
int reg_parse_name(struct registry *r, const char *name, bool insecure, struct store_name *n,
                   struct err *e)
{
    int rc = store_name_parse(name, n, e);
    if (rc < 0)
        return rc;
    if (ascii_ieq(n->scheme, "http") && !insecure)
        return err_set(e, ERR_INVALID, "insecure protocol http");
    return store_name_canonicalize(r->store, n, e);
}

static int pull_name(struct registry *r, const struct store_name *n, bool insecure,
                     const struct registry_opts *o, struct err *e)
{
    return pull_from(r, n, n, insecure, o, e);
}

// OLLAMA_PULL_MIRROR: a name of the default registry is fetched from the
// mirror first (same namespace, model and tag) and stored under its own
// name, so `ollama pull llama3.2` and `ollama run llama3.2` work as usual.
// Blobs are content-addressed: the ones the store has are never fetched,
// whichever registry the manifest came from. When the mirror fails (it
// lacks the model, it is down), the pull goes to the registry itself.
static int pull_via_mirror(struct registry *r, const struct store_name *n,
                           const struct registry_opts *o, struct err *e)
{
    struct store_name src = *n;
    if (!reg_url_host(r->pull_mirror, src.host, sizeof(src.host)))
        return err_set(e, ERR_INVALID, "OLLAMA_PULL_MIRROR: invalid url %s", r->pull_mirror);
    bool insecure = cstr_starts_with(r->pull_mirror, "http://");
    return pull_from(r, &src, n, insecure, o, e);
}

int registry_pull(struct registry *r, const char *name, const struct registry_opts *o,
                  struct err *e)
{
    struct store_name n;
    int rc = reg_parse_name(r, name, o && o->insecure, &n, e);
    if (rc < 0)
        return rc;
    if (r->pull_mirror && ascii_ieq(n.host, STORE_DEFAULT_HOST)) {
        struct err me = {0};
        rc = pull_via_mirror(r, &n, o, &me);
        if (rc == 0 || rc == ERR_CANCELLED) {
            if (rc < 0)
                *e = me;
            return rc;
        }
        log_warn("pull %s/%s:%s from mirror %s: %s; trying %s", n.ns, n.model, n.tag,
                 r->pull_mirror, me.msg, n.host);
    }
    return pull_name(r, &n, o && o->insecure, o, e);
}

// ---------------------------------------------------------------------------
// The /v2/ mirror: local store first, then (when configured) upstream.

static bool split_repo(const char *repo, struct store_name *n, const char *host, const char *tag)
{
    const char *slash = strchr(repo, '/');
    if (!slash || strchr(slash + 1, '/'))
        return false;
    char buf[STORE_NAME_MAX];
    int len = snprintf(buf, sizeof(buf), "%s/%.*s/%s:%s", host, (int)(slash - repo), repo,
                       slash + 1, tag);
    if (len < 0 || (size_t)len >= sizeof(buf))
        return false;
    return store_name_parse(buf, n, NULL) == 0;
}

// The local manifest of repo:tag under any host: the upstream's host first,
// then the default host, then any other.
static int find_local(struct registry *r, const char *repo, const char *ref, struct buf *out,
                      struct err *e)
{
    bool by_digest = cstr_starts_with(ref, "sha256:");
    char hex[DIGEST_HEX_LEN + 1] = "";
    if (by_digest && store_digest_parse(ref, hex, e) < 0)
        return ERR_INVALID;
    struct store_list l = {0};
    int rc = store_list(r->store, &l, e);
    if (rc < 0)
        return rc;
    char up_host[STORE_HOST_MAX + 1] = "";
    if (r->mirror_upstream)
        reg_url_host(r->mirror_upstream, up_host, sizeof(up_host));
    const struct store_entry *best = NULL;
    int best_rank = 99;
    for (size_t i = 0; i < l.n; i++) {
        const struct store_name *p = &l.items[i].parsed;
        char rp[2 * STORE_PART_MAX + 2];
        snprintf(rp, sizeof(rp), "%s/%s", p->ns, p->model);
        if (!ascii_ieq(rp, repo))
            continue;
        if (by_digest ? !ascii_ieq(l.items[i].digest, hex) : !ascii_ieq(p->tag, ref))
            continue;
        int rank = up_host[0] && ascii_ieq(p->host, up_host) ? 0
                   : ascii_ieq(p->host, STORE_DEFAULT_HOST)  ? 1
                                                             : 2;
        if (rank < best_rank) {
            best_rank = rank;
            best = &l.items[i];
        }
    }
    rc = ERR_NOT_FOUND;
    if (best) {
        char path[4096];
        rc = store_manifest_path(r->store, &best->parsed, path, sizeof(path), e);
        if (rc == 0)
            rc = fs_read_all(path, REG_MAX_MANIFEST_BYTES, out, e);
    }
    store_list_deinit(&l);
    return rc;
}

static bool upstream_session(struct registry *r, const char *repo, const char *tag,
                             struct store_name *n, bool *insecure)
{
    if (!r->mirror_upstream)
        return false;
    char host[STORE_HOST_MAX + 1];
    if (!reg_url_host(r->mirror_upstream, host, sizeof(host)))
        return false;
    *insecure = cstr_starts_with(r->mirror_upstream, "http://");
    return split_repo(repo, n, host, tag);
}

struct bg_pull {
    struct registry *reg;
    struct store_name name;
    bool insecure;
};

static void *bg_pull_thread(void *arg)
{
    struct bg_pull *b = arg;
    struct registry_opts o = {
        .insecure = b->insecure, .noprune = true, .cancel = &b->reg->bg_cancel};
    struct err e = {0};
    if (pull_name(b->reg, &b->name, b->insecure, &o, &e) < 0)
        log_warn("mirror: pull of %s/%s/%s:%s from upstream failed: %s", b->name.host, b->name.ns,
                 b->name.model, b->name.tag, e.msg);
    pthread_mutex_lock(&b->reg->mu);
    b->reg->n_background--;
    pthread_mutex_unlock(&b->reg->mu);
    free(b);
    return NULL;
}

// Pull-through of a manifest: upstream's bytes are served at once (checked
// like any pulled manifest), while the whole model is pulled into the store
// in the background; blob requests attach to those downloads, and the
// manifest is stored only after every blob verified.
static int mirror_upstream_manifest(struct registry *r, const struct store_name *n, bool insecure,
                                    struct buf *out, struct err *e)
{
    struct reg_session s;
    reg_session_init(&s, r, n, insecure);
    int rc = reg_fetch_manifest(&s, n->tag, out, e);
    reg_session_deinit(&s);
    struct store_manifest m;
    if (rc == 0 && (rc = store_manifest_parse(out->data, out->len, &m, e)) == 0) {
        rc = manifest_check(&m, s.repo, e);
        store_manifest_deinit(&m);
    }
    if (rc < 0)
        return rc;
    struct bg_pull *b = xcalloc(1, sizeof(*b));
    b->reg = r;
    b->name = *n;
    b->insecure = insecure;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    pthread_mutex_lock(&r->mu);
    r->n_background++;
    if (pthread_create(&tid, &attr, bg_pull_thread, b) != 0) {
        r->n_background--;
        free(b);
        log_warn("mirror: cannot start a background pull");
    }
    pthread_mutex_unlock(&r->mu);
    pthread_attr_destroy(&attr);
    return 0;
}

int registry_mirror_manifest(struct registry *r, const char *repo, const char *ref, struct buf *out,
                             const char **media_type, struct err *e)
{
    *media_type = STORE_MT_MANIFEST;
    buf_reset(out);
    int rc = find_local(r, repo, ref, out, e);
    if (rc == ERR_NOT_FOUND) {
        struct store_name n;
        bool insecure = false;
        if (cstr_starts_with(ref, "sha256:") || !upstream_session(r, repo, ref, &n, &insecure))
            return err_set(e, ERR_NOT_FOUND, "manifest unknown");
        err_clear(e);
        buf_reset(out);
        rc = mirror_upstream_manifest(r, &n, insecure, out, e);
    }
    if (rc == 0) {
        json_t *doc = NULL;
        if (jsonx_parse_object(out->data, out->len, &doc, NULL) == 0) {
            const char *mt = NULL;
            jsonx_get_str(doc, "mediaType", &mt, false, NULL);
            if (mt && strcmp(mt, "application/vnd.oci.image.manifest.v1+json") == 0)
                *media_type = "application/vnd.oci.image.manifest.v1+json";
            json_decref(doc);
        }
    } else if (rc == ERR_NOT_FOUND) {
        err_clear(e);
        err_set(e, ERR_NOT_FOUND, "manifest unknown");
    }
    return rc;
}

int registry_mirror_blob(struct registry *r, const char *repo, const char *digest, bool head_only,
                         char *path, size_t n_path, uint64_t *size, struct err *e)
{
    char hex[DIGEST_HEX_LEN + 1];
    int rc = store_digest_parse(digest, hex, e);
    if (rc < 0)
        return rc;
    char canon[STORE_DIGEST_LEN + 1];
    snprintf(canon, sizeof(canon), "sha256:%s", hex);
    for (char *p = canon; *p; p++)
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p + 32);
    path[0] = '\0';
    *size = 0;
    if (!store_blob_exists(r->store, canon)) {
        struct store_name n;
        bool insecure = false;
        if (!upstream_session(r, repo, STORE_DEFAULT_TAG, &n, &insecure))
            return err_set(e, ERR_NOT_FOUND, "blob unknown to registry");
        struct reg_session s;
        reg_session_init(&s, r, &n, insecure);
        if (head_only) {
            // A HEAD is answered from upstream's HEAD; nothing is fetched.
            char url[1024];
            snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", s.base, s.repo, canon);
            struct reg_rq rq = {
                .method = "HEAD", .url = url, .follow = true, .timeout_s = REG_SLOW_REPLY_S};
            struct reg_rsp rsp;
            reg_rsp_init(&rsp);
            rc = reg_session_do(&s, &rq, &rsp, e);
            if (rc == 0 && rsp.content_length < 0)
                rc = err_set(e, ERR_NETWORK, "upstream did not say how large %s is", canon);
            if (rc == 0)
                *size = (uint64_t)rsp.content_length;
            reg_rsp_deinit(&rsp);
            reg_session_deinit(&s);
            return rc == ERR_NOT_FOUND ? err_set(e, ERR_NOT_FOUND, "blob unknown to registry") : rc;
        }
        rc = reg_blob_fetch(&s, canon, -1, NULL, e);
        reg_session_deinit(&s);
        if (rc < 0)
            return rc;
    }
    return store_blob_path(r->store, canon, path, n_path, e);
}

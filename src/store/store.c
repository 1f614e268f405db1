// The store as a whole (store.md §2, §7): opening the tree, enumerating
// manifests, case canonicalisation, reference counting of blobs, list,
// copy, delete, the consistency check and pruning.
#include "store/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int store_open(struct store **out, const char *root, struct err *e)
{
    struct store *s = xcalloc(1, sizeof(*s));
    s->root = xstrdup(root);
    s->blobs_dir = xasprintf("%s/blobs", root);
    s->manifests_dir = xasprintf("%s/manifests", root);
    pthread_mutex_init(&s->mu, NULL);
    int rc = fs_mkdir_p(s->blobs_dir, e);
    if (rc == 0)
        rc = fs_mkdir_p(s->manifests_dir, e);
    if (rc < 0) {
        store_close(s);
        return rc;
    }
    // Very old stores named blobs "sha256:<hex>" (store.md §3.1).
    DIR *d = opendir(s->blobs_dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (strncmp(de->d_name, "sha256:", 7) != 0)
                continue;
            char from[4096], to[4096];
            snprintf(from, sizeof(from), "%s/%s", s->blobs_dir, de->d_name);
            snprintf(to, sizeof(to), "%s/sha256-%s", s->blobs_dir, de->d_name + 7);
            if (rename(from, to) < 0)
                log_warn("rename legacy blob %s: %s", de->d_name, strerror(errno));
        }
        closedir(d);
    }
    *out = s;
    return 0;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s->root);
    free(s->blobs_dir);
    free(s->manifests_dir);
    free(s);
}

const char *store_root(const struct store *s)
{
    return s->root;
}

void store_default_root(char *out, size_t n)
{
    const char *v = getenv("OLLAMA_MODELS");
    if (v) {
        // Trim white space, then surrounding quotes (env.md §1).
        const char *a = v, *z = v + strlen(v);
        while (a < z && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
            a++;
        while (z > a && (z[-1] == ' ' || z[-1] == '\t' || z[-1] == '\n' || z[-1] == '\r'))
            z--;
        while (a < z && (*a == '"' || *a == '\''))
            a++;
        while (z > a && (z[-1] == '"' || z[-1] == '\''))
            z--;
        if (z > a) {
            snprintf(out, n, "%.*s", (int)(z - a), a);
            return;
        }
    }
    snprintf(out, n, "%s/.ollama/models", env_home_dir());
}

int store_manifest_path(const struct store *s, const struct store_name *n, char *out, size_t n_out,
                        struct err *e)
{
    struct store_name check;
    if (store_name_from_parts(n->host, n->ns, n->model, n->tag, &check) < 0)
        return err_set(e, ERR_NOT_FOUND, "invalid model name");
    int w =
        snprintf(out, n_out, "%s/%s/%s/%s/%s", s->manifests_dir, n->host, n->ns, n->model, n->tag);
    if (w < 0 || (size_t)w >= n_out)
        return err_set(e, ERR_TOO_LARGE, "path too long");
    return 0;
}

// ---------------------------------------------------------------------------
// Enumeration.

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Sorted entries of dir (excluding "." and ".."); want_dir selects
// directories or regular files.
static char **list_dir(const char *dir, bool want_dir, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    size_t cap = 16;
    char **out = xmalloc(cap * sizeof(*out));
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (lstat(path, &st) < 0)
            continue;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
            continue;
        if (*n == cap)
            out = xrealloc(out, (cap *= 2) * sizeof(*out));
        out[(*n)++] = xstrdup(de->d_name);
    }
    closedir(d);
    qsort(out, *n, sizeof(*out), cmp_cstr);
    return out;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

int store_walk_manifests(struct store *s, store_walk_fn fn, void *ctx, struct err *e)
{
    (void)e;
    int rc = 0;
    size_t nh;
    char **hosts = list_dir(s->manifests_dir, true, &nh);
    for (size_t a = 0; rc >= 0 && a < nh; a++) {
        char d1[4096];
        snprintf(d1, sizeof(d1), "%s/%s", s->manifests_dir, hosts[a]);
        size_t nn;
        char **nss = list_dir(d1, true, &nn);
        for (size_t b = 0; rc >= 0 && b < nn; b++) {
            char d2[4096];
            snprintf(d2, sizeof(d2), "%s/%s", d1, nss[b]);
            size_t nm;
            char **models = list_dir(d2, true, &nm);
            for (size_t c = 0; rc >= 0 && c < nm; c++) {
                char d3[4096];
                snprintf(d3, sizeof(d3), "%s/%s", d2, models[c]);
                size_t nt;
                char **tags = list_dir(d3, false, &nt);
                for (size_t t = 0; rc >= 0 && t < nt; t++) {
                    char path[4096];
                    snprintf(path, sizeof(path), "%s/%s", d3, tags[t]);
                    const char *parts[4] = {hosts[a], nss[b], models[c], tags[t]};
                    struct store_name name;
                    bool ok =
                        store_name_from_parts(parts[0], parts[1], parts[2], parts[3], &name) == 0;
                    rc = fn(ctx, ok ? &name : NULL, parts, path);
                }
                free_list(tags, nt);
            }
            free_list(models, nm);
        }
        free_list(nss, nn);
    }
    free_list(hosts, nh);
    return rc < 0 ? rc : 0;
}

// ---------------------------------------------------------------------------
// Canonicalisation (store.md §1.5).

static int canon_cb(void *ctx, const struct store_name *name, const char *parts[4],
                    const char *path)
{
    (void)parts;
    (void)path;
    struct store_name *n = ctx;
    if (!name)
        return 0;
    if (ascii_ieq(n->host, name->host))
        memcpy(n->host, name->host, sizeof(n->host));
    if (ascii_ieq(n->ns, name->ns))
        memcpy(n->ns, name->ns, sizeof(n->ns));
    if (ascii_ieq(n->model, name->model))
        memcpy(n->model, name->model, sizeof(n->model));
    if (ascii_ieq(n->tag, name->tag))
        memcpy(n->tag, name->tag, sizeof(n->tag));
    return 0;
}

int store_name_canonicalize(struct store *s, struct store_name *n, struct err *e)
{
    return store_walk_manifests(s, canon_cb, n, e);
}

// ---------------------------------------------------------------------------
// References.

void store_refs_free(struct store_refs *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->hex[i]);
    free(r->hex);
    memset(r, 0, sizeof(*r));
}

static void refs_add(struct store_refs *r, const char *digest)
{
    char hex[DIGEST_HEX_LEN + 1];
    if (store_digest_parse(digest, hex, NULL) < 0)
        return;
    if (store_refs_has(r, hex))
        return;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 32;
        r->hex = xrealloc(r->hex, r->cap * sizeof(*r->hex));
    }
    r->hex[r->n++] = xstrdup(hex);
}

bool store_refs_has(const struct store_refs *r, const char *hex)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->hex[i], hex) == 0)
            return true;
    return false;
}

struct refs_ctx {
    struct store_refs *r;
    size_t corrupt;
    struct store_check_report *report;
    struct store *s;
};

static void list_push(char ***arr, size_t *n, char *s)
{
    *arr = xrealloc(*arr, (*n + 1) * sizeof(**arr));
    (*arr)[(*n)++] = s;
}

static int refs_cb(void *ctx, const struct store_name *name, const char *parts[4], const char *path)
{
    struct refs_ctx *c = ctx;
    struct store_manifest m;
    if (!name)
        return 0;
    if (store_manifest_load_path(path, &m, NULL, NULL) < 0) {
        c->corrupt++;
        if (c->report)
            list_push(&c->report->corrupt, &c->report->n_corrupt,
                      xasprintf("%s/%s/%s/%s", parts[0], parts[1], parts[2], parts[3]));
        return 0;
    }
    if (m.config.digest[0])
        refs_add(c->r, m.config.digest);
    for (size_t i = 0; i < m.n_layers; i++)
        refs_add(c->r, m.layers[i].digest);
    if (c->report) {
        char disp[STORE_NAME_MAX];
        store_name_display(name, disp, sizeof(disp));
        for (size_t i = 0; i <= m.n_layers; i++) {
            const struct store_layer *l = i < m.n_layers ? &m.layers[i] : &m.config;
            if (l->digest[0] && !store_blob_exists(c->s, l->digest))
                list_push(&c->report->missing, &c->report->n_missing,
                          xasprintf("%s: %s", disp, l->digest));
        }
    }
    store_manifest_deinit(&m);
    return 0;
}

int store_refs_collect(struct store *s, struct store_refs *r, size_t *corrupt, struct err *e)
{
    struct refs_ctx c = {.r = r, .s = s};
    memset(r, 0, sizeof(*r));
    int rc = store_walk_manifests(s, refs_cb, &c, e);
    if (corrupt)
        *corrupt = c.corrupt;
    return rc;
}

// Removes empty directories below dir; returns true when dir itself is empty.
static bool prune_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool empty = true;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && prune_empty(path) && rmdir(path) == 0)
            continue;
        empty = false;
    }
    closedir(d);
    return empty;
}

void store_prune_manifest_dirs(struct store *s)
{
    prune_empty(s->manifests_dir);  // manifests/ itself stays
}

// Deletes blobs of m that no manifest references any more. Caller holds mu.
static int remove_unreferenced(struct store *s, const struct store_manifest *m, struct err *e)
{
    struct store_refs refs;
    int rc = store_refs_collect(s, &refs, NULL, e);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i <= m->n_layers; i++) {
        const struct store_layer *l = i < m->n_layers ? &m->layers[i] : &m->config;
        char hex[DIGEST_HEX_LEN + 1], path[4096];
        if (!l->digest[0] || store_digest_parse(l->digest, hex, NULL) < 0)
            continue;
        if (store_refs_has(&refs, hex))
            continue;
        if (store_blob_path(s, l->digest, path, sizeof(path), NULL) == 0 && unlink(path) < 0 &&
            errno != ENOENT)
            log_warn("remove blob %s: %s", l->digest, strerror(errno));
    }
    store_refs_free(&refs);
    return 0;
}

int store_remove_unused(struct store *s, const struct store_manifest *old, struct err *e)
{
    pthread_mutex_lock(&s->mu);
    int rc = remove_unreferenced(s, old, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

// ---------------------------------------------------------------------------
// List.

struct list_ctx {
    struct store *s;
    struct store_list *l;
    size_t cap;
};

static int list_cb(void *ctx, const struct store_name *name, const char *parts[4], const char *path)
{
    struct list_ctx *c = ctx;
    if (!name) {
        log_warn("skipping manifest with invalid name %s/%s/%s/%s", parts[0], parts[1], parts[2],
                 parts[3]);
        return 0;
    }
    struct store_manifest m;
    struct store_manifest_info info;
    struct err e = {0};
    if (store_manifest_load_path(path, &m, &info, &e) < 0) {
        log_warn("skipping manifest %s: %s", path, e.msg);
        return 0;
    }
    if (c->l->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->l->items = xrealloc(c->l->items, c->cap * sizeof(*c->l->items));
    }
    struct store_entry *it = &c->l->items[c->l->n++];
    memset(it, 0, sizeof(*it));
    it->parsed = *name;
    store_name_display(name, it->name, sizeof(it->name));
    it->modified_ns = info.modified_ns;
    it->size = info.size;
    memcpy(it->digest, info.digest, sizeof(it->digest));
    if (m.config.digest[0]) {
        struct buf b;
        buf_init(&b, 0);
        if (store_blob_read(c->s, m.config.digest, 1 << 20, &b, NULL) == 0 &&
            store_config_parse(b.data ? b.data : "", b.len, &it->config, NULL) == 0) {
            // parsed
        } else {
            log_warn("model %s: config blob unreadable", it->name);
        }
        buf_deinit(&b);
    }
    store_manifest_deinit(&m);
    return 0;
}

static int cmp_entry(const void *a, const void *b)
{
    const struct store_entry *x = a, *y = b;
    int64_t sx = x->modified_ns / 1000000000, sy = y->modified_ns / 1000000000;
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return 0;
}

int store_list(struct store *s, struct store_list *out, struct err *e)
{
    struct list_ctx c = {.s = s, .l = out};
    memset(out, 0, sizeof(*out));
    int rc = store_walk_manifests(s, list_cb, &c, e);
    if (rc < 0) {
        store_list_deinit(out);
        return rc;
    }
    // Stable: qsort is not, so sort indices by (seconds desc, walk order).
    struct store_entry *it = out->items;
    for (size_t i = 1; i < out->n; i++) {
        struct store_entry tmp = it[i];
        size_t j = i;
        while (j > 0 && cmp_entry(&it[j - 1], &tmp) > 0) {
            it[j] = it[j - 1];
            j--;
        }
        it[j] = tmp;
    }
    return 0;
}

void store_list_deinit(struct store_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        store_config_deinit(&l->items[i].config);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static json_t *str_or_empty(const char *s)
{
    return json_string(s ? s : "");
}

json_t *store_details_json(const struct store_config *c, const char *parent_model);
json_t *store_details_json(const struct store_config *c, const char *parent_model)
{
    json_t *d = json_object();
    json_object_set_new(d, "parent_model", str_or_empty(parent_model));
    json_object_set_new(d, "format", str_or_empty(c->model_format));
    json_object_set_new(d, "family", str_or_empty(c->model_family));
    if (c->n_families) {
        json_t *fam = json_array();
        for (size_t i = 0; i < c->n_families; i++)
            json_array_append_new(fam, json_string(c->model_families[i]));
        json_object_set_new(d, "families", fam);
    } else {
        json_object_set_new(d, "families", json_null());
    }
    json_object_set_new(d, "parameter_size", str_or_empty(c->model_type));
    json_object_set_new(d, "quantization_level", str_or_empty(c->file_type));
    return d;
}

int store_tags_json(struct store *s, json_t **out, struct err *e)
{
    struct store_list l;
    int rc = store_list(s, &l, e);
    if (rc < 0)
        return rc;
    json_t *models = json_array();
    for (size_t i = 0; i < l.n; i++) {
        const struct store_entry *it = &l.items[i];
        char ts[64];
        time_format_rfc3339(it->modified_ns, ts, sizeof(ts));
        json_t *m = json_object();
        json_object_set_new(m, "name", json_string(it->name));
        json_object_set_new(m, "model", json_string(it->name));
        json_object_set_new(m, "modified_at", json_string(ts));
        json_object_set_new(m, "size", json_integer((json_int_t)it->size));
        json_object_set_new(m, "digest", json_string(it->digest));
        json_t *details = store_details_json(&it->config, "");
        struct store_model *sm;
        if (store_model_load(s, it->name, &sm, NULL) == 0) {
            struct store_list_info info;
            store_model_list_info(sm, &info);
            const char *q = json_string_value(json_object_get(details, "quantization_level"));
            if ((!q || !*q || !strcmp(q, "unknown")) && strcmp(info.file_type, "unknown") != 0 &&
                info.file_type[0])
                json_object_set_new(details, "quantization_level", json_string(info.file_type));
            if (info.context_length > 0)
                json_object_set_new(details, "context_length",
                                    json_integer((json_int_t)info.context_length));
            if (info.embedding_length > 0)
                json_object_set_new(details, "embedding_length",
                                    json_integer((json_int_t)info.embedding_length));
            json_object_set_new(m, "details", details);
            json_t *caps = json_array();
            for (size_t c = 0; c < info.n_caps; c++)
                json_array_append_new(caps, json_string(info.caps[c]));
            if (info.n_caps)
                json_object_set_new(m, "capabilities", caps);
            else
                json_decref(caps);
            store_model_free(sm);
        } else {
            json_object_set_new(m, "details", details);
        }
        json_array_append_new(models, m);
    }
    store_list_deinit(&l);
    json_t *root = json_object();
    json_object_set_new(root, "models", models);
    *out = root;
    return 0;
}

// ---------------------------------------------------------------------------
// Copy and delete (store.md §7.1, §7.2).

static void quoted(const char *s, char *out, size_t n)
{
    struct buf b;
    buf_init(&b, 0);
    gofmt_quote(&b, s);
    snprintf(out, n, "%s", buf_cstr(&b));
    buf_deinit(&b);
}

int store_copy(struct store *s, const char *src, const char *dst, struct err *e)
{
    struct store_name a, b;
    char q[STORE_NAME_MAX + 8];
    if (store_name_parse(src, &a, NULL) < 0) {
        quoted(src, q, sizeof(q));
        return err_set(e, ERR_INVALID, "source %s is invalid", q);
    }
    if (store_name_parse(dst, &b, NULL) < 0) {
        quoted(dst, q, sizeof(q));
        return err_set(e, ERR_INVALID, "destination %s is invalid", q);
    }
    pthread_mutex_lock(&s->mu);
    int rc = store_name_canonicalize(s, &a, e);
    if (rc == 0)
        rc = store_name_canonicalize(s, &b, e);
    char pa[4096], pb[4096];
    if (rc == 0)
        rc = store_manifest_path(s, &a, pa, sizeof(pa), e);
    if (rc == 0)
        rc = store_manifest_path(s, &b, pb, sizeof(pb), e);
    struct buf data;
    buf_init(&data, 0);
    if (rc == 0) {
        struct stat st;
        if (stat(pa, &st) < 0 || !S_ISREG(st.st_mode)) {
            quoted(src, q, sizeof(q));
            rc = err_set(e, ERR_NOT_FOUND, "model %s not found", q);
        }
    }
    if (rc == 0 && strcmp(pa, pb) != 0) {
        rc = fs_read_all(pa, 16u << 20, &data, e);
        if (rc == 0)
            rc = store_manifest_write(s, &b, data.data ? data.data : "", data.len, e);
    }
    buf_deinit(&data);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int store_delete(struct store *s, const char *name, struct err *e)
{
    struct store_name n;
    if (store_name_parse(name, &n, NULL) < 0) {
        char q[STORE_NAME_MAX + 8];
        quoted(name, q, sizeof(q));
        return err_set(e, ERR_INVALID, "name %s is invalid", q);
    }
    pthread_mutex_lock(&s->mu);
    struct store_manifest m = {0};
    char path[4096];
    int rc = store_name_canonicalize(s, &n, e);
    if (rc == 0)
        rc = store_manifest_path(s, &n, path, sizeof(path), e);
    if (rc == 0) {
        struct err le = {0};
        rc = store_manifest_load_path(path, &m, NULL, &le);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(e, ERR_NOT_FOUND, "model '%s' not found", name);
        else if (rc < 0)
            rc = err_set(e, rc, "%s", le.msg);
    }
    if (rc == 0 && unlink(path) < 0)
        rc = err_set(e, ERR_IO, "remove manifest: %s", strerror(errno));
    if (rc == 0) {
        store_prune_manifest_dirs(s);
        rc = remove_unreferenced(s, &m, e);
    }
    store_manifest_deinit(&m);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

// ---------------------------------------------------------------------------
// Consistency check and prune.

int store_check(struct store *s, struct store_check_report *r, struct err *e)
{
    memset(r, 0, sizeof(*r));
    struct store_refs refs;
    memset(&refs, 0, sizeof(refs));
    struct refs_ctx c = {.r = &refs, .report = r, .s = s};
    pthread_mutex_lock(&s->mu);
    int rc = store_walk_manifests(s, refs_cb, &c, e);
    if (rc == 0) {
        size_t n;
        char **files = list_dir(s->blobs_dir, false, &n);
        for (size_t i = 0; i < n; i++) {
            char hex[DIGEST_HEX_LEN + 1];
            if (store_digest_parse(files[i], hex, NULL) < 0 || files[i][6] != '-')
                list_push(&r->temporary, &r->n_temporary, xstrdup(files[i]));
            else if (!store_refs_has(&refs, hex))
                list_push(&r->orphaned, &r->n_orphaned, xstrdup(files[i]));
        }
        free_list(files, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_refs_free(&refs);
    return rc;
}

static void free_strs(char **a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(a[i]);
    free(a);
}

void store_check_report_deinit(struct store_check_report *r)
{
    free_strs(r->orphaned, r->n_orphaned);
    free_strs(r->missing, r->n_missing);
    free_strs(r->corrupt, r->n_corrupt);
    free_strs(r->temporary, r->n_temporary);
    memset(r, 0, sizeof(*r));
}

bool store_check_ok(const struct store_check_report *r)
{
    return r->n_orphaned == 0 && r->n_missing == 0 && r->n_corrupt == 0;
}

int store_prune(struct store *s, int64_t grace_ns, struct err *e)
{
    pthread_mutex_lock(&s->mu);
    struct store_refs refs;
    size_t corrupt = 0;
    int removed = 0;
    int rc = store_refs_collect(s, &refs, &corrupt, e);
    if (rc < 0)
        goto out;
    if (corrupt) {
        log_warn("a manifest failed to parse: skipping the blob prune");
        goto out_refs;
    }
    int64_t now = time_now_ns();
    size_t n;
    char **files = list_dir(s->blobs_dir, false, &n);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", s->blobs_dir, files[i]);
        if (stat(path, &st) < 0)
            continue;
        int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        if (now - mtime < grace_ns)
            continue;
        // The name with every '-' turned into ':' must be a digest.
        char name[512], hex[DIGEST_HEX_LEN + 1];
        snprintf(name, sizeof(name), "%s", files[i]);
        for (char *p = name; *p; p++)
            if (*p == '-')
                *p = ':';
        bool digest = store_digest_parse(name, hex, NULL) == 0;
        if (digest && store_refs_has(&refs, hex))
            continue;
        if (unlink(path) == 0)
            removed++;
    }
    free_list(files, n);
    store_prune_manifest_dirs(s);
out_refs:
    store_refs_free(&refs);
out:
    pthread_mutex_unlock(&s->mu);
    return rc < 0 ? rc : removed;
}

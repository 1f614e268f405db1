// Manifests and config blobs (store.md §4, §5): parsing with every digest
// validated, Go-encoder serialisation with Ollama's field order, atomic
// writes, and the derived values (manifest digest, total size, mtime).
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_MAX_BYTES (16u << 20)

void store_layer_copy(struct store_layer *dst, const struct store_layer *src)
{
    dst->media_type = xstrdup(src->media_type ? src->media_type : "");
    memcpy(dst->digest, src->digest, sizeof(dst->digest));
    dst->size = src->size;
    dst->from = src->from ? xstrdup(src->from) : NULL;
    dst->name = src->name ? xstrdup(src->name) : NULL;
}

void store_layer_deinit(struct store_layer *l)
{
    free(l->media_type);
    free(l->from);
    free(l->name);
    memset(l, 0, sizeof(*l));
}

void store_manifest_add_layer(struct store_manifest *m, const struct store_layer *l)
{
    m->layers = xrealloc(m->layers, (m->n_layers + 1) * sizeof(*m->layers));
    store_layer_copy(&m->layers[m->n_layers++], l);
}

void store_manifest_deinit(struct store_manifest *m)
{
    for (size_t i = 0; i < m->n_layers; i++)
        store_layer_deinit(&m->layers[i]);
    free(m->layers);
    store_layer_deinit(&m->config);
    free(m->media_type);
    memset(m, 0, sizeof(*m));
}

static const char *opt_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

// A descriptor; an empty config digest is allowed (store.md §5).
static int parse_layer(const json_t *o, struct store_layer *l, bool allow_empty, struct err *e)
{
    memset(l, 0, sizeof(*l));
    if (!json_is_object(o))
        return err_set(e, ERR_FORMAT, "manifest: descriptor is not an object");
    const char *digest = opt_str(o, "digest");
    if (!digest)
        digest = "";
    if (!(allow_empty && digest[0] == '\0')) {
        char hex[DIGEST_HEX_LEN + 1];
        int rc = store_digest_parse(digest, hex, e);
        if (rc < 0)
            return rc;
        // Canonical ":" form; upper-case hex is kept and is simply not found.
        snprintf(l->digest, sizeof(l->digest), "sha256:%s", hex);
    }
    const char *mt = opt_str(o, "mediaType");
    l->media_type = xstrdup(mt ? mt : "");
    json_t *size = json_object_get(o, "size");
    l->size = json_is_integer(size) ? json_integer_value(size) : 0;
    const char *from = opt_str(o, "from");
    const char *name = opt_str(o, "name");
    l->from = from && *from ? xstrdup(from) : NULL;
    l->name = name && *name ? xstrdup(name) : NULL;
    return 0;
}

int store_manifest_parse(const void *data, size_t n, struct store_manifest *out, struct err *e)
{
    json_error_t je;
    json_t *root = json_loadb(data, n, 0, &je);
    if (!root)
        return err_set(e, ERR_FORMAT, "manifest: %s", je.text);
    int rc = 0;
    struct store_manifest m = {0};
    if (!json_is_object(root)) {
        rc = err_set(e, ERR_FORMAT, "manifest: not an object");
        goto out;
    }
    json_t *sv = json_object_get(root, "schemaVersion");
    m.schema_version = json_is_integer(sv) ? json_integer_value(sv) : 0;
    const char *mt = opt_str(root, "mediaType");
    m.media_type = xstrdup(mt ? mt : "");
    json_t *cfg = json_object_get(root, "config");
    if (cfg) {
        rc = parse_layer(cfg, &m.config, true, e);
        if (rc < 0)
            goto out;
    } else {
        m.config.media_type = xstrdup("");
    }
    json_t *layers = json_object_get(root, "layers");
    if (layers && !json_is_array(layers) && !json_is_null(layers)) {
        rc = err_set(e, ERR_FORMAT, "manifest: layers is not an array");
        goto out;
    }
    size_t nl = json_array_size(layers);
    m.layers = xcalloc(nl ? nl : 1, sizeof(*m.layers));
    for (size_t i = 0; i < nl; i++) {
        rc = parse_layer(json_array_get(layers, i), &m.layers[i], false, e);
        if (rc < 0) {
            store_layer_deinit(&m.layers[i]);
            goto out;
        }
        m.n_layers++;
    }
out:
    json_decref(root);
    if (rc < 0) {
        store_manifest_deinit(&m);
        return rc;
    }
    *out = m;
    return 0;
}

static int encode_layer(struct buf *b, const struct store_layer *l)
{
    int rc = buf_append_str(b, "{\"mediaType\":");
    rc = rc ? rc : gojson_string(b, l->media_type ? l->media_type : "");
    rc = rc ? rc : buf_append_str(b, ",\"digest\":");
    rc = rc ? rc : gojson_string(b, l->digest);
    rc = rc ? rc : buf_printf(b, ",\"size\":%lld", (long long)l->size);
    if (!rc && l->from && *l->from) {
        rc = buf_append_str(b, ",\"from\":");
        rc = rc ? rc : gojson_string(b, l->from);
    }
    if (!rc && l->name && *l->name) {
        rc = buf_append_str(b, ",\"name\":");
        rc = rc ? rc : gojson_string(b, l->name);
    }
    return rc ? rc : buf_append_char(b, '}');
}

int store_manifest_encode(const struct store_manifest *m, struct buf *b)
{
    int rc = buf_printf(b, "{\"schemaVersion\":%lld,\"mediaType\":", (long long)m->schema_version);
    rc = rc ? rc : gojson_string(b, m->media_type ? m->media_type : STORE_MT_MANIFEST);
    rc = rc ? rc : buf_append_str(b, ",\"config\":");
    rc = rc ? rc : encode_layer(b, &m->config);
    rc = rc ? rc : buf_append_str(b, ",\"layers\":[");
    for (size_t i = 0; !rc && i < m->n_layers; i++) {
        if (i)
            rc = buf_append_char(b, ',');
        rc = rc ? rc : encode_layer(b, &m->layers[i]);
    }
    return rc ? rc : buf_append_str(b, "]}\n");
}

int store_manifest_load_path(const char *path, struct store_manifest *m,
                             struct store_manifest_info *info, struct err *e)
{
    struct buf b;
    buf_init(&b, 0);
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
        return errno == ENOENT || errno == ENOTDIR || !errno
                   ? err_set(e, ERR_NOT_FOUND, "manifest not found")
                   : err_set(e, ERR_IO, "stat %s: %s", path, strerror(errno));
    }
    int rc = fs_read_all(path, MANIFEST_MAX_BYTES, &b, e);
    if (rc < 0)
        goto out;
    struct err pe = {0};
    rc = store_manifest_parse(b.data ? b.data : "", b.len, m, &pe);
    if (rc < 0) {
        rc = err_set(e, ERR_IO, "corrupt manifest: %s", pe.msg);
        goto out;
    }
    if (info) {
        sha256_hex(b.data ? b.data : "", b.len, info->digest);
        info->modified_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        uint64_t size = m->config.size > 0 ? (uint64_t)m->config.size : 0;
        for (size_t i = 0; i < m->n_layers; i++)
            size += m->layers[i].size > 0 ? (uint64_t)m->layers[i].size : 0;
        info->size = size;
    }
out:
    buf_deinit(&b);
    return rc;
}

int store_manifest_load(struct store *s, const struct store_name *n, struct store_manifest *m,
                        struct store_manifest_info *info, struct err *e)
{
    char path[4096];
    int rc = store_manifest_path(s, n, path, sizeof(path), e);
    if (rc < 0)
        return rc;
    return store_manifest_load_path(path, m, info, e);
}

int store_manifest_write(struct store *s, const struct store_name *n, const void *data, size_t len,
                         struct err *e)
{
    char path[4096], dir[4096];
    int rc = store_manifest_path(s, n, path, sizeof(path), e);
    if (rc < 0)
        return rc;
    snprintf(dir, sizeof(dir), "%s/%s/%s/%s", s->manifests_dir, n->host, n->ns, n->model);
    rc = fs_mkdir_p(dir, e);
    if (rc < 0)
        return rc;
    return fs_write_atomic(path, data, len, e);
}

// ---------------------------------------------------------------------------
// Config blob.

static char **str_array(const json_t *a, size_t *n)
{
    *n = 0;
    if (!json_is_array(a))
        return NULL;
    size_t k = json_array_size(a);
    char **out = xcalloc(k ? k : 1, sizeof(*out));
    for (size_t i = 0; i < k; i++) {
        const json_t *v = json_array_get(a, i);
        if (json_is_string(v))
            out[(*n)++] = xstrdup(json_string_value(v));
    }
    return out;
}

static char *dup_opt(const json_t *o, const char *key)
{
    const char *s = opt_str(o, key);
    return s ? xstrdup(s) : NULL;
}

int store_config_parse(const void *data, size_t n, struct store_config *c, struct err *e)
{
    memset(c, 0, sizeof(*c));
    json_error_t je;
    json_t *root = json_loadb(data, n, 0, &je);
    if (!root)
        return err_set(e, ERR_FORMAT, "config: %s", je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, ERR_FORMAT, "config: not an object");
    }
    c->model_format = dup_opt(root, "model_format");
    c->model_family = dup_opt(root, "model_family");
    c->model_type = dup_opt(root, "model_type");
    c->file_type = dup_opt(root, "file_type");
    c->renderer = dup_opt(root, "renderer");
    c->parser = dup_opt(root, "parser");
    c->requires = dup_opt(root, "requires");
    c->base_name = dup_opt(root, "base_name");
    c->model_families = str_array(json_object_get(root, "model_families"), &c->n_families);
    c->capabilities = str_array(json_object_get(root, "capabilities"), &c->n_capabilities);
    json_t *v = json_object_get(root, "context_length");
    c->context_length = json_is_integer(v) ? json_integer_value(v) : 0;
    v = json_object_get(root, "embedding_length");
    c->embedding_length = json_is_integer(v) ? json_integer_value(v) : 0;
    json_t *d = json_object_get(root, "draft");
    if (json_is_object(d)) {
        c->draft_format = dup_opt(d, "model_format");
        c->draft_arch = dup_opt(d, "architecture");
        c->draft_tensor_prefix = dup_opt(d, "tensor_prefix");
        c->draft_config = dup_opt(d, "config");
    }
    json_decref(root);
    return 0;
}

void store_config_deinit(struct store_config *c)
{
    free(c->model_format);
    free(c->model_family);
    free(c->model_type);
    free(c->file_type);
    free(c->renderer);
    free(c->parser);
    free(c->requires);
    free(c->base_name);
    free(c->draft_format);
    free(c->draft_arch);
    free(c->draft_tensor_prefix);
    free(c->draft_config);
    for (size_t i = 0; i < c->n_families; i++)
        free(c->model_families[i]);
    free(c->model_families);
    for (size_t i = 0; i < c->n_capabilities; i++)
        free(c->capabilities[i]);
    free(c->capabilities);
    memset(c, 0, sizeof(*c));
}

static int kv_str(struct buf *b, const char *key, const char *v, bool always)
{
    if (!always && (!v || !*v))
        return 0;
    int rc = buf_printf(b, ",\"%s\":", key);
    return rc ? rc : gojson_string(b, v ? v : "");
}

// ,"draft":{...} as Go encodes model.Draft (every field omitempty), or
// nothing without a draft.
static int draft_encode(const struct store_config *c, struct buf *b)
{
    const char *keys[] = {"model_format", "architecture", "tensor_prefix", "config"};
    const char *vals[] = {c->draft_format, c->draft_arch, c->draft_tensor_prefix, c->draft_config};
    int rc = 0, n = 0;
    for (int i = 0; !rc && i < 4; i++) {
        if (!vals[i] || !*vals[i])
            continue;
        rc = buf_printf(b, "%s\"%s\":", n++ ? "," : ",\"draft\":{", keys[i]);
        rc = rc ? rc : gojson_string(b, vals[i]);
    }
    return rc || n == 0 ? rc : buf_append_char(b, '}');
}

int store_config_encode(const struct store_config *c, const struct store_layer *layers,
                        size_t n_layers, struct buf *b)
{
    int rc = buf_append_str(b, "{\"model_format\":");
    rc = rc ? rc : gojson_string(b, c->model_format ? c->model_format : "");
    rc = rc ? rc : kv_str(b, "model_family", c->model_family, true);
    rc = rc ? rc : buf_append_str(b, ",\"model_families\":");
    if (!rc && c->n_families == 0) {
        rc = buf_append_str(b, "null");
    } else if (!rc) {
        rc = buf_append_char(b, '[');
        for (size_t i = 0; !rc && i < c->n_families; i++) {
            if (i)
                rc = buf_append_char(b, ',');
            rc = rc ? rc : gojson_string(b, c->model_families[i]);
        }
        rc = rc ? rc : buf_append_char(b, ']');
    }
    rc = rc ? rc : kv_str(b, "model_type", c->model_type, true);
    rc = rc ? rc : kv_str(b, "file_type", c->file_type, true);
    rc = rc ? rc : kv_str(b, "renderer", c->renderer, false);
    rc = rc ? rc : kv_str(b, "parser", c->parser, false);
    rc = rc ? rc : kv_str(b, "requires", c->requires, false);
    if (!rc && c->n_capabilities) {
        rc = buf_append_str(b, ",\"capabilities\":[");
        for (size_t i = 0; !rc && i < c->n_capabilities; i++) {
            if (i)
                rc = buf_append_char(b, ',');
            rc = rc ? rc : gojson_string(b, c->capabilities[i]);
        }
        rc = rc ? rc : buf_append_char(b, ']');
    }
    if (!rc && c->context_length)
        rc = buf_printf(b, ",\"context_length\":%lld", (long long)c->context_length);
    if (!rc && c->embedding_length)
        rc = buf_printf(b, ",\"embedding_length\":%lld", (long long)c->embedding_length);
    rc = rc ? rc : kv_str(b, "base_name", c->base_name, false);
    rc = rc ? rc : draft_encode(c, b);
    rc = rc ? rc : buf_append_str(b, ",\"architecture\":\"amd64\",\"os\":\"linux\"");
    rc = rc ? rc : buf_append_str(b, ",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[");
    for (size_t i = 0; !rc && i < n_layers; i++) {
        if (i)
            rc = buf_append_char(b, ',');
        rc = rc ? rc : gojson_string(b, layers[i].digest);
    }
    return rc ? rc : buf_append_str(b, "]}}\n");
}

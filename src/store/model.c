// A model as the server uses it (store.md §4.3 reading rules): the manifest
// resolved into blob paths, text layers, params and messages.
#include "store/internal.h"

#include <stdlib.h>
#include <string.h>

#define TEXT_LAYER_MAX (64u << 20)

static char *blob_path_dup(const struct store *s, const char *digest)
{
    char path[4096];
    if (store_blob_path(s, digest, path, sizeof(path), NULL) < 0)
        return NULL;
    return xstrdup(path);
}

static void push_str(char ***arr, size_t *n, char *s)
{
    *arr = xrealloc(*arr, (*n + 1) * sizeof(**arr));
    (*arr)[(*n)++] = s;
}

static int read_text(struct store *s, const struct store_layer *l, char **out, struct err *e)
{
    struct buf b;
    buf_init(&b, 0);
    int rc = store_blob_read(s, l->digest, TEXT_LAYER_MAX, &b, e);
    if (rc < 0) {
        buf_deinit(&b);
        err_prefix(e, "layer %s", l->digest);
        return rc;
    }
    free(*out);
    *out = b.data ? buf_take(&b) : xstrdup("");
    buf_deinit(&b);
    return 0;
}

static int read_json(struct store *s, const struct store_layer *l, json_t **out, struct err *e)
{
    char *text = NULL;
    int rc = read_text(s, l, &text, e);
    if (rc < 0)
        return rc;
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    free(text);
    if (!v)
        return err_set(e, ERR_IO, "layer %s: %s", l->digest, je.text);
    json_decref(*out);
    *out = v;
    return 0;
}

// One manifest layer into the model, by its media type (the first model and
// draft layers count; unknown types are ignored, as Ollama does).
static int take_layer(struct store *s, struct store_model *m, const struct store_layer *l,
                      struct err *e)
{
    const char *mt = l->media_type;
    int rc = 0;
    if (strcmp(mt, STORE_MT_MODEL) == 0) {
        if (!m->model_path) {
            m->model_path = blob_path_dup(s, l->digest);
            m->parent_model = xstrdup(l->from ? l->from : "");
        }
    } else if (strcmp(mt, STORE_MT_ADAPTER) == 0) {
        push_str(&m->adapter_paths, &m->n_adapters, blob_path_dup(s, l->digest));
    } else if (strcmp(mt, STORE_MT_DRAFT) == 0) {
        if (!m->draft_path)
            m->draft_path = blob_path_dup(s, l->digest);
    } else if (strcmp(mt, STORE_MT_PROJECTOR) == 0) {
        push_str(&m->projector_paths, &m->n_projectors, blob_path_dup(s, l->digest));
    } else if (strcmp(mt, STORE_MT_TEMPLATE) == 0 || strcmp(mt, STORE_MT_PROMPT) == 0) {
        rc = read_text(s, l, &m->template_text, e);
    } else if (strcmp(mt, STORE_MT_SYSTEM) == 0) {
        rc = read_text(s, l, &m->system, e);
    } else if (strcmp(mt, STORE_MT_LICENSE) == 0) {
        char *t = NULL;
        rc = read_text(s, l, &t, e);
        if (rc == 0)
            push_str(&m->licenses, &m->n_licenses, t);
    } else if (strcmp(mt, STORE_MT_PARAMS) == 0) {
        rc = read_json(s, l, &m->params, e);
    } else if (strcmp(mt, STORE_MT_MESSAGES) == 0) {
        rc = read_json(s, l, &m->messages, e);
    } else if (strcmp(mt, STORE_MT_EMBED) == 0) {
        log_warn("model %s: ignoring obsolete embeddings layer", m->display);
    } else if (strcmp(mt, STORE_MT_TENSOR) == 0 || strcmp(mt, STORE_MT_JSON) == 0) {
        m->unsupported_format = true;
    }
    return rc;
}

int store_model_load(struct store *s, const char *name, struct store_model **out, struct err *e)
{
    struct store_name n;
    if (store_name_parse(name, &n, NULL) < 0)
        return err_set(e, ERR_INVALID, "invalid model name");
    int rc = store_name_canonicalize(s, &n, e);
    if (rc < 0)
        return rc;
    struct store_model *m = xcalloc(1, sizeof(*m));
    m->name = n;
    store_name_display(&n, m->display, sizeof(m->display));
    struct err le = {0};
    rc = store_manifest_load(s, &n, &m->manifest, &m->info, &le);
    if (rc == ERR_NOT_FOUND) {
        rc = err_set(e, ERR_NOT_FOUND, "model '%s' not found", m->display);
        goto fail;
    } else if (rc < 0) {
        rc = err_set(e, rc, "%s", le.msg);
        goto fail;
    }
    if (m->manifest.config.digest[0]) {
        struct buf b;
        buf_init(&b, 0);
        rc = store_blob_read(s, m->manifest.config.digest, 1 << 20, &b, e);
        if (rc == 0)
            rc = store_config_parse(b.data ? b.data : "", b.len, &m->config, e);
        buf_deinit(&b);
        if (rc < 0)
            goto fail;
    }
    for (size_t i = 0; i < m->manifest.n_layers; i++)
        if ((rc = take_layer(s, m, &m->manifest.layers[i], e)) < 0)
            goto fail;
    if (m->params && !json_is_object(m->params)) {
        json_decref(m->params);
        m->params = NULL;
    }
    if (m->messages && !json_is_array(m->messages)) {
        json_decref(m->messages);
        m->messages = NULL;
    }
    if (!m->parent_model)
        m->parent_model = xstrdup("");
    *out = m;
    return 0;
fail:
    store_model_free(m);
    return rc;
}

void store_model_free(struct store_model *m)
{
    if (!m)
        return;
    store_manifest_deinit(&m->manifest);
    store_config_deinit(&m->config);
    free(m->model_path);
    free(m->parent_model);
    for (size_t i = 0; i < m->n_adapters; i++)
        free(m->adapter_paths[i]);
    free(m->adapter_paths);
    free(m->draft_path);
    for (size_t i = 0; i < m->n_projectors; i++)
        free(m->projector_paths[i]);
    free(m->projector_paths);
    free(m->template_text);
    free(m->system);
    json_decref(m->params);
    json_decref(m->messages);
    for (size_t i = 0; i < m->n_licenses; i++)
        free(m->licenses[i]);
    free(m->licenses);
    free(m);
}

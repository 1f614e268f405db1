// Model creation (modelfile.md §4, api.md §12): base layers from an existing
// model or from uploaded GGUF blobs, adapters, quantization, text and JSON
// layers, the config blob, and the manifest written last and atomically.
//
// Nothing a client names is read from the server's file system: model
// content comes only from blobs (uploaded through /api/blobs), legacy `path`
// requests and Modelfile FROM/ADAPTER paths are refused with one fixed
// message whether or not the path exists (no file-existence oracle).
#include "store/internal.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"

#define ERR_SERVER_PATH                                                                            \
    "the server does not read files by path: upload them with /api/blobs/:digest and name them "   \
    "in \"files\""
#define PARAMS_MAX_BYTES (16u << 20)

// ---------------------------------------------------------------------------
// Request.

static char *dup_str_field(const json_t *body, const char *key, int *rc, struct err *e)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        *rc = err_set(e, ERR_INVALID,
                      "json: cannot unmarshal %s into Go struct field "
                      "CreateRequest.%s of type string",
                      json_is_number(v)    ? "number"
                      : json_is_boolean(v) ? "bool"
                                           : "object",
                      key);
        return NULL;
    }
    return xstrdup(json_string_value(v));
}

static int file_map(const json_t *body, const char *key, struct store_file_ref **out, size_t *n,
                    struct err *e)
{
    const json_t *v = json_object_get(body, key);
    *out = NULL;
    *n = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return err_set(e, ERR_INVALID,
                       "json: cannot unmarshal into Go struct field "
                       "CreateRequest.%s of type map[string]string",
                       key);
    *out = xcalloc(json_object_size(v) + 1, sizeof(**out));
    const char *k;
    json_t *d;
    json_object_foreach((json_t *)v, k, d)
    {
        if (!json_is_string(d))
            return err_set(e, ERR_INVALID,
                           "json: cannot unmarshal into Go struct field "
                           "CreateRequest.%s of type string",
                           key);
        (*out)[*n].name = xstrdup(k);
        (*out)[*n].digest = xstrdup(json_string_value(d));
        (*n)++;
    }
    return 0;
}

int store_create_req_from_json(struct store_create_req *r, const json_t *body, struct err *e)
{
    memset(r, 0, sizeof(*r));
    if (!json_is_object(body))
        return err_set(e, ERR_INVALID,
                       "json: cannot unmarshal into Go value of type "
                       "api.CreateRequest");
    int rc = 0;
    r->model = dup_str_field(body, "model", &rc, e);
    if (!r->model || !*r->model) {
        free(r->model);
        r->model = dup_str_field(body, "name", &rc, e);
    }
    r->from = dup_str_field(body, "from", &rc, e);
    r->template_text = dup_str_field(body, "template", &rc, e);
    r->system = dup_str_field(body, "system", &rc, e);
    r->quantize = dup_str_field(body, "quantize", &rc, e);
    r->draft_quantize = dup_str_field(body, "draft_quantize", &rc, e);
    if (!r->quantize || !*r->quantize) {
        free(r->quantize);
        r->quantize = dup_str_field(body, "quantization", &rc, e);
    }
    r->renderer = dup_str_field(body, "renderer", &rc, e);
    r->parser = dup_str_field(body, "parser", &rc, e);
    r->requires = dup_str_field(body, "requires", &rc, e);
    r->modelfile = dup_str_field(body, "modelfile", &rc, e);
    const json_t *path = json_object_get(body, "path");
    r->has_path =
        path && !json_is_null(path) && !(json_is_string(path) && !*json_string_value(path));
    if (rc < 0)
        return rc;
    rc = file_map(body, "files", &r->files, &r->n_files, e);
    if (rc == 0)
        rc = file_map(body, "adapters", &r->adapters, &r->n_adapters, e);
    if (rc == 0)
        rc = file_map(body, "draft_files", &r->draft_files, &r->n_draft_files, e);
    if (rc < 0)
        return rc;
    const json_t *lic = json_object_get(body, "license");
    if (json_is_string(lic)) {
        r->licenses = xcalloc(1, sizeof(char *));
        r->licenses[r->n_licenses++] = xstrdup(json_string_value(lic));
    } else if (json_is_array(lic)) {
        r->licenses = xcalloc(json_array_size(lic) + 1, sizeof(char *));
        for (size_t i = 0; i < json_array_size(lic); i++) {
            const json_t *x = json_array_get(lic, i);
            if (!json_is_string(x))
                return err_set(e, ERR_INVALID, "unknown license type");
            r->licenses[r->n_licenses++] = xstrdup(json_string_value(x));
        }
    } else if (lic && !json_is_null(lic)) {
        return err_set(e, ERR_INVALID, "unknown license type");
    }
    const json_t *p = json_object_get(body, "parameters");
    if (p && !json_is_null(p)) {
        if (!json_is_object(p))
            return err_set(e, ERR_INVALID,
                           "json: cannot unmarshal into Go struct field "
                           "CreateRequest.parameters of type map[string]interface {}");
        r->parameters = json_deep_copy(p);
    }
    const json_t *msgs = json_object_get(body, "messages");
    if (msgs && !json_is_null(msgs)) {
        if (!json_is_array(msgs))
            return err_set(e, ERR_INVALID,
                           "json: cannot unmarshal into Go struct field "
                           "CreateRequest.messages of type []api.Message");
        for (size_t i = 0; i < json_array_size(msgs); i++)
            if (!json_is_object(json_array_get(msgs, i)))
                return err_set(e, ERR_INVALID,
                               "json: cannot unmarshal into Go struct field "
                               "CreateRequest.messages of type api.Message");
        r->messages = json_deep_copy(msgs);
    }
    return 0;
}

static void free_refs(struct store_file_ref *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(f[i].name);
        free(f[i].digest);
    }
    free(f);
}

void store_create_req_deinit(struct store_create_req *r)
{
    free(r->model);
    free(r->from);
    free_refs(r->files, r->n_files);
    free_refs(r->adapters, r->n_adapters);
    free_refs(r->draft_files, r->n_draft_files);
    free(r->draft_quantize);
    free(r->template_text);
    free(r->system);
    for (size_t i = 0; i < r->n_licenses; i++)
        free(r->licenses[i]);
    free(r->licenses);
    json_decref(r->parameters);
    json_decref(r->messages);
    free(r->quantize);
    free(r->renderer);
    free(r->parser);
    free(r->requires);
    free(r->modelfile);
    memset(r, 0, sizeof(*r));
}

// Go's io/fs.ValidPath: unrooted, '/'-separated, no empty, "." or ".."
// elements (the single name "." is allowed).
static bool valid_rel_path(const char *p)
{
    if (strcmp(p, ".") == 0)
        return true;
    if (!*p)
        return false;
    const char *s = p;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        if (!slash)
            return true;
        s = slash + 1;
    }
}

// A Modelfile sent by an old client: its FROM must name a model (never a
// server path); ADAPTER / DRAFT always name paths; RENDERER / PARSER must be
// built in.
static int check_modelfile_paths(const struct store_modelfile *m, struct err *e)
{
    for (size_t i = 0; i < m->n; i++) {
        const struct store_mf_command *c = &m->cmds[i];
        if (strcmp(c->name, "adapter") == 0 || strcmp(c->name, "draft") == 0)
            return err_set(e, ERR_INVALID, ERR_SERVER_PATH);
        if (strcmp(c->name, "from") == 0 && !store_name_valid(c->args))
            return err_set(e, ERR_INVALID, ERR_SERVER_PATH);
        if (strcmp(c->name, "renderer") == 0 && !prompt_renderer_known(c->args))
            return err_set(e, ERR_INVALID, "unknown renderer \"%s\"", c->args);
        if (strcmp(c->name, "parser") == 0 && !prompt_parser_known(c->args))
            return err_set(e, ERR_INVALID, "unknown parser \"%s\"", c->args);
    }
    return 0;
}

int store_create_validate(const struct store_create_req *r, struct err *e)
{
    if (r->has_path)
        return err_set(e, ERR_INVALID, ERR_SERVER_PATH);
    for (size_t i = 0; i < r->n_files; i++) {
        if (!valid_rel_path(r->files[i].name))
            return err_set(e, ERR_INVALID, "file path must be relative");
        if (!r->files[i].digest || !*r->files[i].digest)
            return err_set(e, ERR_INVALID, "invalid digest format");
    }
    for (size_t i = 0; i < r->n_adapters; i++) {
        if (!valid_rel_path(r->adapters[i].name))
            return err_set(e, ERR_INVALID, "file path must be relative");
        if (!r->adapters[i].digest || !*r->adapters[i].digest)
            return err_set(e, ERR_INVALID, "invalid digest format");
    }
    for (size_t i = 0; i < r->n_draft_files; i++) {
        if (!valid_rel_path(r->draft_files[i].name))
            return err_set(e, ERR_INVALID, "file path must be relative");
        if (!r->draft_files[i].digest || !*r->draft_files[i].digest)
            return err_set(e, ERR_INVALID, "invalid digest format");
    }
    if (r->draft_quantize && *r->draft_quantize && r->n_draft_files == 0)
        return err_set(e, ERR_INVALID, "--draft-quantize requires a DRAFT model");
    if (!r->model || !store_name_valid(r->model))
        return err_set(e, ERR_INVALID, "invalid model name");
    // Only names this build can render with (a pulled model keeps whatever
    // its config names; its chat requests report the missing one).
    if (r->renderer && *r->renderer && !prompt_renderer_known(r->renderer))
        return err_set(e, ERR_INVALID, "unknown renderer \"%s\"", r->renderer);
    if (r->parser && *r->parser && !prompt_parser_known(r->parser))
        return err_set(e, ERR_INVALID, "unknown parser \"%s\"", r->parser);
    if (r->modelfile) {
        struct store_modelfile m;
        int rc = store_modelfile_parse(r->modelfile, strlen(r->modelfile), &m, e);
        if (rc < 0)
            return rc;
        rc = check_modelfile_paths(&m, e);
        store_modelfile_deinit(&m);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Layers being assembled.

struct layer {
    struct store_layer l;
    bool is_new;       // created by this request ("creating new layer")
    char status[128];  // overrides the status line ("using autodetected template X")
};

struct layers {
    struct layer *v;
    size_t n;
};

static void layers_add(struct layers *ls, const struct store_layer *l, bool is_new)
{
    ls->v = xrealloc(ls->v, (ls->n + 1) * sizeof(*ls->v));
    struct layer *x = &ls->v[ls->n++];
    memset(x, 0, sizeof(*x));
    store_layer_copy(&x->l, l);
    x->is_new = is_new;
}

static void layers_remove_type(struct layers *ls, const char *mt, const char *mt2)
{
    size_t o = 0;
    for (size_t i = 0; i < ls->n; i++) {
        if (strcmp(ls->v[i].l.media_type, mt) == 0 ||
            (mt2 && strcmp(ls->v[i].l.media_type, mt2) == 0)) {
            store_layer_deinit(&ls->v[i].l);
            continue;
        }
        ls->v[o++] = ls->v[i];
    }
    ls->n = o;
}

static void layers_free(struct layers *ls)
{
    for (size_t i = 0; i < ls->n; i++)
        store_layer_deinit(&ls->v[i].l);
    free(ls->v);
    memset(ls, 0, sizeof(*ls));
}

struct create_ctx {
    struct store *s;
    const struct store_create_opts *o;
    struct layers layers;
    // Blobs this request created (digests), removed again on failure unless
    // a manifest references them.
    struct store_manifest created;
    char *chat_template;  // tokenizer.chat_template of the first imported GGUF
};

static void progress(const struct create_ctx *c, const char *status, const char *digest,
                     uint64_t total, uint64_t completed)
{
    if (!c->o->progress)
        return;
    struct store_progress p = {
        .status = status, .digest = digest, .total = total, .completed = completed};
    c->o->progress(c->o->progress_ctx, &p);
}

static int check_cancel(const struct create_ctx *c, struct err *e)
{
    if (c->o->cancel && *c->o->cancel)
        return err_set(e, ERR_CANCELLED, "create cancelled");
    return 0;
}

static void note_created(struct create_ctx *c, const char *digest)
{
    struct store_layer l = {.media_type = "", .size = 0};
    snprintf(l.digest, sizeof(l.digest), "%s", digest);
    store_manifest_add_layer(&c->created, &l);
}

// Adds a layer holding data (a text or JSON blob).
static int add_data_layer(struct create_ctx *c, const char *media_type, const void *data, size_t n,
                          struct err *e)
{
    struct store_layer l = {.media_type = (char *)media_type, .size = (int64_t)n};
    bool existed;
    int rc = store_blob_put(c->s, data, n, l.digest, &existed, e);
    if (rc < 0)
        return rc;
    if (!existed)
        note_created(c, l.digest);
    layers_add(&c->layers, &l, !existed);
    return 0;
}

// ---------------------------------------------------------------------------
// Base layers.

struct base_info {
    struct store_config config;  // of the base model (from), for inheritance
    bool have_config;
    json_t *params;  // inherited params layer (object) or NULL
};

static int layers_from_model(struct create_ctx *c, const char *from, struct base_info *bi,
                             struct err *e)
{
    struct store_name n;
    if (store_name_parse(from, &n, NULL) < 0)
        return err_set(e, ERR_INVALID, "invalid model name");
    int rc = store_name_canonicalize(c->s, &n, e);
    if (rc < 0)
        return rc;
    char display[STORE_NAME_MAX];
    store_name_display(&n, display, sizeof(display));
    struct store_manifest m;
    struct err le = {0};
    rc = store_manifest_load(c->s, &n, &m, NULL, &le);
    if (rc == ERR_NOT_FOUND && c->o->pull) {
        rc = c->o->pull(c->o->pull_ctx, display, c->o->progress, c->o->progress_ctx, e);
        if (rc < 0)
            return rc;
        err_clear(&le);
        rc = store_manifest_load(c->s, &n, &m, NULL, &le);
    }
    if (rc == ERR_NOT_FOUND)
        return err_set(e, ERR_NOT_FOUND, "model '%s' not found", display);
    if (rc < 0)
        return err_set(e, rc, "%s", le.msg);
    progress(c, "reading model metadata", NULL, 0, 0);
    for (size_t i = 0; i < m.n_layers; i++) {
        struct store_layer l = m.layers[i];
        l.from = display;
        if (!store_blob_exists(c->s, l.digest)) {
            rc = err_set(e, ERR_NOT_FOUND, "model '%s' is missing blob %s", display, l.digest);
            break;
        }
        store_blob_touch(c->s, l.digest);
        layers_add(&c->layers, &l, false);
        if (strcmp(l.media_type, STORE_MT_PARAMS) == 0) {
            struct buf b;
            buf_init(&b, 0);
            if (store_blob_read(c->s, l.digest, PARAMS_MAX_BYTES, &b, NULL) == 0) {
                json_decref(bi->params);
                bi->params = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
                if (bi->params && !json_is_object(bi->params)) {
                    json_decref(bi->params);
                    bi->params = NULL;
                }
            }
            buf_deinit(&b);
        }
    }
    if (rc == 0 && m.config.digest[0]) {
        struct buf b;
        buf_init(&b, 0);
        if (store_blob_read(c->s, m.config.digest, 1 << 20, &b, NULL) == 0 &&
            store_config_parse(b.data ? b.data : "", b.len, &bi->config, NULL) == 0)
            bi->have_config = true;
        buf_deinit(&b);
    }
    store_manifest_deinit(&m);
    return rc;
}

static int cmp_ref(const void *a, const void *b)
{
    return strcmp(((const struct store_file_ref *)a)->name,
                  ((const struct store_file_ref *)b)->name);
}

static bool blob_has_gguf_magic(const char *path)
{
    unsigned char magic[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, magic, 4);
    close(fd);
    return n == 4 && memcmp(magic, "GGUF", 4) == 0;
}

// The layer media type of a GGUF by its metadata (modelfile.md §4.2).
static const char *gguf_media_type(const struct gguf *g)
{
    struct str type;
    if (gguf_get_str(g, "general.type", &type)) {
        if (str_eq_cstr(type, "adapter"))
            return STORE_MT_ADAPTER;
        if (str_eq_cstr(type, "projector") || str_eq_cstr(type, "mmproj"))
            return STORE_MT_PROJECTOR;
    }
    struct str arch = gguf_architecture(g);
    if (str_eq_cstr(arch, "clip"))
        return STORE_MT_PROJECTOR;
    return STORE_MT_MODEL;
}

// A model whose tensors have a type the engine cannot read would be created
// and then fail every request: refuse it here.
static int check_tensor_types(const struct gguf *g, const char *file, struct err *e)
{
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (quant_traits_get(t->type))
            continue;
        const char *tn = gguf_type_name(t->type);
        return err_set(e, ERR_UNSUPPORTED,
                       "file \"%s\": tensor %.*s has type %s, which this version cannot run", file,
                       (int)t->name.len, t->name.ptr, tn ? tn : "unknown");
    }
    return 0;
}

// An adapter must fit the model it is added to (gguf_lora_check: the same
// architecture, every weight it names present with its shape) and have
// tensor types the engine reads; otherwise every request would fail when
// the runner loads it, so it is refused here, before anything is written.
static int check_adapter(struct create_ctx *c, const struct gguf *ad, const char *file,
                         struct err *e)
{
    const char *digest = NULL;
    for (size_t i = 0; i < c->layers.n && !digest; i++)
        if (strcmp(c->layers.v[i].l.media_type, STORE_MT_MODEL) == 0)
            digest = c->layers.v[i].l.digest;
    if (!digest)
        return err_set(e, ERR_INVALID, "adapter \"%s\": there is no model to apply it to", file);
    char path[4096];
    struct gguf *base;
    int rc = store_blob_path(c->s, digest, path, sizeof(path), e);
    if (rc < 0 || (rc = gguf_open(&base, path, e)) < 0)
        return rc;
    struct gguf_lora gl;
    struct err le = {0};
    if ((rc = gguf_lora_check(ad, base, &gl, &le)) == 0)
        gguf_lora_deinit(&gl);
    else
        rc = err_set(e, ERR_INVALID, "invalid adapter \"%s\": %s", file, le.msg);
    gguf_close(base);
    return rc < 0 ? rc : check_tensor_types(ad, file, e);
}

// A Hugging Face folder (safetensors + JSON files) converted into one model
// layer, whose chat template feeds the template autodetection; or with `as`
// the adapter type, a PEFT LoRA folder converted for the model's base layer.
static int layer_from_safetensors(struct create_ctx *c, const struct store_file_ref *files,
                                  size_t n, const char *as, struct err *e)
{
    struct store_layer l = {.media_type = as ? (char *)as : STORE_MT_MODEL};
    char base[4096] = "";
    for (size_t i = 0; as && !base[0] && i < c->layers.n; i++)
        if (strcmp(c->layers.v[i].l.media_type, STORE_MT_MODEL) == 0)
            store_blob_path(c->s, c->layers.v[i].l.digest, base, sizeof(base), NULL);
    if (as && !base[0])
        return err_set(e, ERR_INVALID, "a safetensors adapter needs a base model (FROM)");
    bool existed;
    int rc =
        store_convert_files(c->s, files, n, as ? base : NULL, c->o, l.digest, &l.size, &existed, e);
    if (rc < 0)
        return rc;
    if (!existed)
        note_created(c, l.digest);
    char path[4096];
    struct gguf *g;
    store_blob_path(c->s, l.digest, path, sizeof(path), NULL);
    if (gguf_open(&g, path, NULL) == 0) {
        struct str chat;
        if (!c->chat_template && gguf_get_str(g, "tokenizer.chat_template", &chat))
            c->chat_template = str_dup(chat);
        gguf_close(g);
    }
    layers_add(&c->layers, &l, !existed);
    return 0;
}

// One uploaded GGUF file as a layer of media type `as`, or by its metadata
// when `as` is NULL; the model's tensor types (and an adapter against the
// model) are checked first.
static int layer_from_gguf(struct create_ctx *c, const struct store_file_ref *f, const char *as,
                           struct err *e)
{
    char path[4096];
    progress(c, "parsing GGUF", NULL, 0, 0);
    store_blob_path(c->s, f->digest, path, sizeof(path), NULL);
    if (!blob_has_gguf_magic(path))
        return err_set(e, ERR_INVALID, "supplied file was not in GGUF format");
    struct gguf *g;
    struct err ge = {0};
    if (gguf_open(&g, path, &ge) < 0)
        return err_set(e, ERR_FORMAT, "invalid GGUF file \"%s\": %s", f->name, ge.msg);
    const char *mt = as ? as : gguf_media_type(g);
    int rc = 0;
    if (strcmp(mt, STORE_MT_MODEL) == 0 || strcmp(mt, STORE_MT_DRAFT) == 0)
        rc = check_tensor_types(g, f->name, e);
    if (rc == 0 && as && strcmp(as, STORE_MT_ADAPTER) == 0)
        rc = check_adapter(c, g, f->name, e);
    struct str chat;
    if (rc == 0 && !as && !c->chat_template && gguf_get_str(g, "tokenizer.chat_template", &chat))
        c->chat_template = str_dup(chat);
    gguf_close(g);
    if (rc < 0)
        return rc;
    struct store_layer l = {.media_type = (char *)mt, .from = f->name};
    char hex[DIGEST_HEX_LEN + 1];
    store_digest_parse(f->digest, hex, NULL);
    digest_format(hex, l.digest);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    if (fd >= 0)
        close(fd);
    l.size = (int64_t)size;
    store_blob_touch(c->s, l.digest);
    layers_add(&c->layers, &l, false);
    return 0;
}

// The uploaded GGUF files as layers: of media type `as` (adapters, the
// draft model), or by their metadata when `as` is NULL.
static int layers_from_files(struct create_ctx *c, const struct store_file_ref *files0, size_t n,
                             const char *as, struct err *e)
{
    bool adapters = as && strcmp(as, STORE_MT_ADAPTER) == 0;
    struct store_file_ref *files = xcalloc(n ? n : 1, sizeof(*files));
    memcpy(files, files0, n * sizeof(*files));
    qsort(files, n, sizeof(*files), cmp_ref);
    int rc = 0;
    bool gguf_mode = false;
    char path[4096];
    for (size_t i = 0; i < n; i++) {
        if (cstr_ends_with(files[i].name, ".safetensors")) {
            rc = as && !adapters ? err_set(e, ERR_UNSUPPORTED,
                                           "safetensors draft models are not supported yet; "
                                           "convert it to GGUF first")
                                 : layer_from_safetensors(c, files0, n, as, e);
            goto out;
        }
        if (cstr_ends_with(files[i].name, ".gguf"))
            gguf_mode = true;
    }
    for (size_t i = 0; i < n; i++) {
        rc = store_blob_path(c->s, files[i].digest, path, sizeof(path), e);
        if (rc < 0)
            goto out;
        if (!store_blob_exists(c->s, files[i].digest)) {
            rc = err_set(e, ERR_INVALID, "file \"%s\": blob %s not found (upload it first)",
                         files[i].name, files[i].digest);
            goto out;
        }
        if (!gguf_mode && blob_has_gguf_magic(path))
            gguf_mode = true;
    }
    if (!gguf_mode) {
        rc = err_set(e, ERR_INVALID, "unknown type");
        goto out;
    }
    if (adapters && n > 1) {  // before the files are read (each is checked against the model)
        rc = err_set(e, ERR_INVALID, "only one adapter is currently supported");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = layer_from_gguf(c, &files[i], as, e)) < 0)
            goto out;
    if (as && strcmp(as, STORE_MT_DRAFT) == 0 && n > 1)
        rc = err_set(e, ERR_INVALID, "only one draft model file is currently supported");
out:
    free(files);
    return rc;
}

// Adds the autodetected template (and its stop words as inherited params)
// after the imported GGUF layers (modelfile.md §5).
static int autodetect_template(struct create_ctx *c, struct base_info *bi, struct err *e)
{
    const char *name = NULL, *go = NULL;
    const char *const *stops = NULL;
    if (!c->chat_template || !c->o->template_detect ||
        !c->o->template_detect(c->o->detect_ctx, c->chat_template, &name, &go, &stops) || !go)
        return 0;
    struct buf t;
    buf_init(&t, 0);
    for (const char *p = go; *p; p++)  // CRLF → LF
        if (!(p[0] == '\r' && p[1] == '\n'))
            buf_append_char(&t, *p);
    int rc = add_data_layer(c, STORE_MT_TEMPLATE, t.data ? t.data : "", t.len, e);
    buf_deinit(&t);
    if (rc < 0)
        return rc;
    snprintf(c->layers.v[c->layers.n - 1].status, sizeof(c->layers.v[0].status),
             "using autodetected template %s", name ? name : "");
    if (stops && stops[0]) {
        json_t *arr = json_array();
        for (size_t i = 0; stops[i]; i++)
            json_array_append_new(arr, json_string(stops[i]));
        json_decref(bi->params);
        bi->params = json_pack("{s:o}", "stop", arr);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Quantization.

static const struct {
    const char *name;   // upper-cased request
    const char *label;  // file type label
} quant_names[] = {
    {"F32", "F32"},       {"F16", "F16"},       {"BF16", "BF16"},     {"Q8_0", "Q8_0"},
    {"Q4_0", "Q4_0"},     {"Q4_1", "Q4_1"},     {"Q5_0", "Q5_0"},     {"Q5_1", "Q5_1"},
    {"Q2_K", "Q2_K"},     {"Q3_K_S", "Q3_K_S"}, {"Q3_K_M", "Q3_K_M"}, {"Q3_K", "Q3_K_M"},
    {"Q3_K_L", "Q3_K_L"}, {"Q4_K_S", "Q4_K_S"}, {"Q4_K_M", "Q4_K_M"}, {"Q4_K", "Q4_K_M"},
    {"Q5_K_S", "Q5_K_S"}, {"Q5_K_M", "Q5_K_M"}, {"Q5_K", "Q5_K_M"},   {"Q6_K", "Q6_K"},
};

const char *store_quantize_label(const char *requested)
{
    for (size_t i = 0; i < sizeof(quant_names) / sizeof(quant_names[0]); i++)
        if (ascii_ieq(requested, quant_names[i].name))
            return quant_names[i].label;
    return NULL;
}

// For a file without general.file_type: "F32" / "F16" / "BF16" when every
// matrix has that type, else "unknown".
static const char *infer_float_type(const struct gguf *g)
{
    int type = -1;
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->n_dims < 2)
            continue;
        if (type >= 0 && (uint32_t)type != t->type)
            return "unknown";
        type = (int)t->type;
    }
    return type == GGUF_TYPE_F32    ? "F32"
           : type == GGUF_TYPE_F16  ? "F16"
           : type == GGUF_TYPE_BF16 ? "BF16"
                                    : "unknown";
}

// The i-quant mixes (IQ2_XXS ... IQ4_XS) and Q2_K_S: llama-quantize makes
// them only with an importance matrix.
static bool is_imatrix_type(const char *upper)
{
    return gguf_file_type_from_name(upper) >= 0 &&
           (strncmp(upper, "IQ", 2) == 0 || strcmp(upper, "Q2_K_S") == 0);
}

// Quantizes the layers of media type mt (the model, or the draft model with
// --draft-quantize) to the requested type.
static int quantize_layers(struct create_ctx *c, const char *requested, const char *mt,
                           struct err *e)
{
    bool draft = strcmp(mt, STORE_MT_DRAFT) == 0;
    const char *label = store_quantize_label(requested);
    if (!label) {
        char up[64];
        size_t k = 0;
        for (; requested[k] && k + 1 < sizeof(up); k++)
            up[k] = (char)toupper((unsigned char)requested[k]);
        up[k] = '\0';
        if (is_imatrix_type(up))
            return err_set(e, ERR_INVALID,
                           "quantization type %s needs an importance matrix, which create "
                           "does not compute; import a GGUF file already quantized to %s "
                           "(supported types are F32, F16, Q4_K_S, Q4_K_M, Q8_0)",
                           up, up);
        return err_set(e, ERR_INVALID,
                       "unsupported quantization type %s - supported types are "
                       "F32, F16, Q4_K_S, Q4_K_M, Q8_0",
                       up);
    }
    for (size_t i = 0; i < c->layers.n; i++) {
        struct layer *x = &c->layers.v[i];
        if (strcmp(x->l.media_type, mt) != 0)
            continue;
        char path[4096];
        int rc = store_blob_path(c->s, x->l.digest, path, sizeof(path), e);
        if (rc < 0)
            return rc;
        struct gguf *g;
        struct err ge = {0};
        if (gguf_open(&g, path, &ge) < 0)
            return err_set(e, ERR_FORMAT, "model layer %s: %s", x->l.digest, ge.msg);
        struct gguf_summary sum;
        gguf_summarize(g, &sum);
        const char *src =
            sum.file_type == UINT32_MAX ? infer_float_type(g) : sum.quantization_level;
        gguf_close(g);
        bool is_float = !strcmp(src, "F32") || !strcmp(src, "F16") || !strcmp(src, "BF16");
        if (draft && !is_float)
            return err_set(e, ERR_INVALID,
                           "draft quantization requires an unquantized draft model, got %s", src);
        if (!is_float)
            return err_set(e, ERR_INVALID,
                           "quantization is only supported for F16, BF16 and F32 models");
        if (strcmp(src, label) == 0)
            continue;
        char status[128];
        snprintf(status, sizeof(status), "quantizing %s %s to %s", src,
                 draft ? "draft model" : "model", label);
        char digest[STORE_DIGEST_LEN + 1];
        int64_t size;
        bool existed;
        rc = store_quantize_blob(c->s, path, label, status, c->o, digest, &size, &existed, e);
        if (rc < 0)
            return rc;
        if (!existed)
            note_created(c, digest);
        snprintf(x->l.digest, sizeof(x->l.digest), "%s", digest);
        x->l.size = size;
        x->is_new = !existed;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Text and JSON layers, config.

static int encode_messages(const json_t *msgs, struct buf *b)
{
    static const char *const fields[] = {"role",       "content",   "thinking",    "images",
                                         "tool_calls", "tool_name", "tool_call_id"};
    int rc = buf_append_char(b, '[');
    for (size_t i = 0; !rc && i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        if (i)
            rc = buf_append_char(b, ',');
        rc = rc ? rc : buf_append_char(b, '{');
        bool first = true;
        for (size_t f = 0; !rc && f < sizeof(fields) / sizeof(fields[0]); f++) {
            const json_t *v = json_object_get(m, fields[f]);
            bool empty = !v || json_is_null(v) || (json_is_string(v) && !*json_string_value(v)) ||
                         (json_is_array(v) && json_array_size(v) == 0);
            if (empty && f >= 2)
                continue;
            if (!first)
                rc = buf_append_char(b, ',');
            first = false;
            rc = rc ? rc : buf_printf(b, "\"%s\":", fields[f]);
            if (rc)
                break;
            if (!v || json_is_null(v))
                rc = buf_append_str(b, "\"\"");
            else if (f == 0 && json_is_string(v)) {
                char *role = xstrdup(json_string_value(v));
                for (char *p = role; *p; p++)
                    *p = (char)tolower((unsigned char)*p);
                rc = gojson_string(b, role);
                free(role);
            } else
                rc = gojson_value(b, v);
        }
        rc = rc ? rc : buf_append_char(b, '}');
    }
    rc = rc ? rc : buf_append_str(b, "]\n");
    return rc;
}

static int add_text_layers(struct create_ctx *c, const struct store_create_req *r,
                           struct base_info *bi, struct err *e)
{
    int rc = 0;
    if (r->template_text && *r->template_text) {
        if (c->o->template_check) {
            struct err te = {0};
            if (c->o->template_check(c->o->template_ctx, r->template_text, &te) < 0)
                return err_set(e, ERR_INVALID, "template error: %s", te.msg);
        }
        layers_remove_type(&c->layers, STORE_MT_TEMPLATE, STORE_MT_PROMPT);
        rc = add_data_layer(c, STORE_MT_TEMPLATE, r->template_text, strlen(r->template_text), e);
        if (rc < 0)
            return rc;
    }
    if (r->system && *r->system) {
        layers_remove_type(&c->layers, STORE_MT_SYSTEM, NULL);
        rc = add_data_layer(c, STORE_MT_SYSTEM, r->system, strlen(r->system), e);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < r->n_licenses; i++) {
        if (!*r->licenses[i])
            continue;
        rc = add_data_layer(c, STORE_MT_LICENSE, r->licenses[i], strlen(r->licenses[i]), e);
        if (rc < 0)
            return rc;
    }
    json_t *merged = r->parameters ? json_deep_copy(r->parameters) : json_object();
    if (bi->params) {
        const char *k;
        json_t *v;
        json_object_foreach(bi->params, k, v)
        {
            if (!json_object_get(merged, k))
                json_object_set(merged, k, v);
        }
    }
    if (json_object_size(merged)) {
        struct buf b;
        buf_init(&b, PARAMS_MAX_BYTES);
        rc = gojson_value(&b, merged);
        if (rc == 0)
            rc = buf_append_char(&b, '\n');
        if (rc < 0) {
            rc = err_set(e, ERR_INVALID, "invalid parameters");
        } else {
            layers_remove_type(&c->layers, STORE_MT_PARAMS, NULL);
            rc = add_data_layer(c, STORE_MT_PARAMS, b.data, b.len, e);
        }
        buf_deinit(&b);
    }
    json_decref(merged);
    if (rc < 0)
        return rc;
    if (r->messages && json_array_size(r->messages)) {
        struct buf b;
        buf_init(&b, PARAMS_MAX_BYTES);
        rc = encode_messages(r->messages, &b);
        if (rc < 0) {
            rc = err_set(e, ERR_INVALID, "invalid messages");
        } else {
            layers_remove_type(&c->layers, STORE_MT_MESSAGES, NULL);
            rc = add_data_layer(c, STORE_MT_MESSAGES, b.data, b.len, e);
        }
        buf_deinit(&b);
    }
    return rc;
}

static void add_family(struct store_config *cfg, const char *arch)
{
    for (size_t i = 0; i < cfg->n_families; i++)
        if (strcmp(cfg->model_families[i], arch) == 0)
            return;
    cfg->model_families = xrealloc(cfg->model_families, (cfg->n_families + 1) * sizeof(char *));
    cfg->model_families[cfg->n_families++] = xstrdup(arch);
}

static char *dup_or_null(const char *a, const char *b)
{
    const char *s = a && *a ? a : b && *b ? b : NULL;
    return s ? xstrdup(s) : NULL;
}

// The renderer and parser Ollama 0.33's create gives a GGUF of these
// architectures when the Modelfile names none (server/create.go).
static const struct {
    const char *arch, *renderer, *parser;
} arch_renderers[] = {
    {"gemma4", "gemma4", "gemma4"},
    {"laguna", "laguna", "laguna"},
    {"nemotron_h", "nemotron-3-nano", "nemotron-3-nano"},
    {"nemotron_h_moe", "nemotron-3-nano", "nemotron-3-nano"},
    {"nemotron_h_omni", "nemotron-3-nano", "nemotron-3-nano"},
};

static void default_renderer(struct store_config *cfg, const char *arch)
{
    for (size_t i = 0; i < sizeof arch_renderers / sizeof arch_renderers[0]; i++) {
        if (strcmp(arch, arch_renderers[i].arch) != 0)
            continue;
        if (!cfg->renderer)
            cfg->renderer = xstrdup(arch_renderers[i].renderer);
        if (!cfg->parser)
            cfg->parser = xstrdup(arch_renderers[i].parser);
    }
}

static int build_config(struct create_ctx *c, const struct store_create_req *r,
                        const struct base_info *bi, struct store_config *cfg, struct err *e)
{
    memset(cfg, 0, sizeof(*cfg));
    const struct store_config *b = bi->have_config ? &bi->config : NULL;
    cfg->model_format =
        xstrdup(b && b->model_format && *b->model_format ? b->model_format : "gguf");
    cfg->renderer = dup_or_null(r->renderer, b ? b->renderer : NULL);
    cfg->parser = dup_or_null(r->parser, b ? b->parser : NULL);
    cfg->requires = dup_or_null(r->requires, b ? b->requires : NULL);
    if (b && b->n_capabilities) {
        cfg->capabilities = xcalloc(b->n_capabilities, sizeof(char *));
        for (size_t i = 0; i < b->n_capabilities; i++)
            cfg->capabilities[cfg->n_capabilities++] = xstrdup(b->capabilities[i]);
    }
    for (size_t i = 0; i < c->layers.n; i++) {
        const struct store_layer *l = &c->layers.v[i].l;
        bool is_model = strcmp(l->media_type, STORE_MT_MODEL) == 0;
        bool is_draft = strcmp(l->media_type, STORE_MT_DRAFT) == 0;
        if (!is_model && !is_draft && strcmp(l->media_type, STORE_MT_PROJECTOR) != 0)
            continue;
        char path[4096];
        struct gguf *g;
        struct err ge = {0};
        store_blob_path(c->s, l->digest, path, sizeof(path), NULL);
        if (gguf_open(&g, path, &ge) < 0)
            return err_set(e, ERR_FORMAT, "layer %s: %s", l->digest, ge.msg);
        struct gguf_summary sum;
        gguf_summarize(g, &sum);
        gguf_close(g);
        if (is_draft) {  // Ollama's config.draft: {model_format, architecture}
            free(cfg->draft_format);
            free(cfg->draft_arch);
            cfg->draft_format = xstrdup("gguf");
            cfg->draft_arch = dup_or_null(sum.architecture, NULL);
            continue;
        }
        if (sum.architecture[0])
            add_family(cfg, sum.architecture);
        if (is_model && !cfg->model_family) {
            default_renderer(cfg, sum.architecture);
            cfg->model_family = xstrdup(sum.architecture);
            cfg->model_type = xstrdup(sum.parameter_size);
            cfg->file_type = xstrdup(sum.quantization_level);
        }
    }
    if (!cfg->model_family)
        cfg->model_family = xstrdup(b && b->model_family ? b->model_family : "");
    if (!cfg->model_type)
        cfg->model_type = xstrdup(b && b->model_type ? b->model_type : "");
    if (!cfg->file_type)
        cfg->file_type = xstrdup(b && b->file_type ? b->file_type : "");
    return 0;
}

// ---------------------------------------------------------------------------
// The whole create.

static struct store_file_ref *copy_refs(const struct store_file_ref *f, size_t n)
{
    struct store_file_ref *c = xcalloc(n, sizeof(*c));
    for (size_t i = 0; i < n; i++) {
        c[i].name = xstrdup(f[i].name);
        c[i].digest = xstrdup(f[i].digest);
    }
    return c;
}

static int effective_request(const struct store_create_req *r, struct store_create_req *eff,
                             struct err *e)
{
    struct store_modelfile m;
    int rc = store_modelfile_parse(r->modelfile, strlen(r->modelfile), &m, e);
    if (rc < 0)
        return rc;
    rc = check_modelfile_paths(&m, e);
    json_t *req = NULL;
    if (rc == 0)
        rc = store_modelfile_to_request(&m, &req, e);
    store_modelfile_deinit(&m);
    if (rc < 0)
        return rc;
    rc = store_create_req_from_json(eff, req, e);
    json_decref(req);
    if (rc < 0)
        return rc;
    // Fields of the JSON request win over the Modelfile's.
    free(eff->model);
    eff->model = xstrdup(r->model);
    if (r->from) {
        free(eff->from);
        eff->from = xstrdup(r->from);
    }
    if (r->quantize) {
        free(eff->quantize);
        eff->quantize = xstrdup(r->quantize);
    }
    if (r->draft_quantize) {
        free(eff->draft_quantize);
        eff->draft_quantize = xstrdup(r->draft_quantize);
    }
    if (r->n_draft_files)
        eff->draft_files = copy_refs(r->draft_files, eff->n_draft_files = r->n_draft_files);
    if (r->n_files) {
        eff->files = copy_refs(r->files, eff->n_files = r->n_files);
        free(eff->from);
        eff->from = NULL;
    }
    return 0;
}

// The layers and config of the new model: from a model or from files, then adapters,
// quantization and the Modelfile's text layers, checking for a cancel between the slow
// steps.
static int gather_layers(struct create_ctx *c, const struct store_create_req *r,
                         struct base_info *bi, struct store_config *cfg, struct err *e)
{
    int rc;
    if (r->from && *r->from) {
        rc = layers_from_model(c, r->from, bi, e);
    } else if (r->n_files) {
        rc = layers_from_files(c, r->files, r->n_files, NULL, e);
        if (rc == 0)
            rc = autodetect_template(c, bi, e);
    } else {
        rc = err_set(e, ERR_INVALID, "neither 'from' or 'files' was specified");
    }
    if (rc == 0 && r->n_adapters)
        rc = layers_from_files(c, r->adapters, r->n_adapters, STORE_MT_ADAPTER, e);
    if (rc == 0 && r->n_draft_files) {  // a new DRAFT replaces the base model's
        layers_remove_type(&c->layers, STORE_MT_DRAFT, NULL);
        rc = layers_from_files(c, r->draft_files, r->n_draft_files, STORE_MT_DRAFT, e);
    }
    if (rc == 0)
        rc = check_cancel(c, e);
    if (rc == 0 && r->quantize && *r->quantize)
        rc = quantize_layers(c, r->quantize, STORE_MT_MODEL, e);
    if (rc == 0 && r->draft_quantize && *r->draft_quantize)
        rc = quantize_layers(c, r->draft_quantize, STORE_MT_DRAFT, e);
    if (rc == 0)
        rc = check_cancel(c, e);
    if (rc == 0)
        rc = add_text_layers(c, r, bi, e);
    if (rc == 0)
        rc = build_config(c, r, bi, cfg, e);
    return rc;
}

// Fills manifest m with the layers and stores the config blob it names (b: scratch).
static int write_config(struct create_ctx *c, const struct store_config *cfg,
                        struct store_manifest *m, struct buf *b, struct err *e)
{
    m->schema_version = 2;
    m->media_type = xstrdup(STORE_MT_MANIFEST);
    for (size_t i = 0; i < c->layers.n; i++)
        store_manifest_add_layer(m, &c->layers.v[i].l);
    int rc = store_config_encode(cfg, m->layers, m->n_layers, b);
    if (rc < 0)
        return err_set(e, rc, "encode config");
    bool existed;
    m->config.media_type = xstrdup(STORE_MT_CONFIG);
    m->config.size = (int64_t)b->len;
    rc = store_blob_put(c->s, b->data, b->len, m->config.digest, &existed, e);
    if (rc < 0)
        return rc;
    if (!existed)
        note_created(c, m->config.digest);
    return rc;
}

// One progress line per layer: new or reused.
static void report_layers(struct create_ctx *c)
{
    for (size_t i = 0; i < c->layers.n; i++) {
        char status[128];
        snprintf(status, sizeof(status), "%s %s",
                 c->layers.v[i].is_new ? "creating new layer" : "using existing layer",
                 c->layers.v[i].l.digest);
        progress(c, c->layers.v[i].status[0] ? c->layers.v[i].status : status, NULL, 0, 0);
    }
}

// Writes manifest m under name (b: scratch), with s->mu held while checking its blobs.
static int publish_manifest(struct store *s, const struct store_name *name,
                            const struct store_manifest *m, struct buf *b, struct err *e)
{
    buf_reset(b);
    int rc = store_manifest_encode(m, b);
    if (rc < 0)
        return err_set(e, rc, "encode manifest");
    pthread_mutex_lock(&s->mu);
    // A delete running meanwhile may have removed a blob this manifest
    // reuses (it was referenced by no manifest at that moment): never
    // publish a manifest with a missing layer.
    for (size_t i = 0; rc == 0 && i <= m->n_layers; i++) {
        const struct store_layer *l = i < m->n_layers ? &m->layers[i] : &m->config;
        if (!store_blob_exists(s, l->digest))
            rc = err_set(e, ERR_IO,
                         "layer %s was removed while the model was being created; "
                         "try again",
                         l->digest);
    }
    if (rc == 0)
        rc = store_manifest_write(s, name, b->data, b->len, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int store_create(struct store *s, const struct store_create_req *r0,
                 const struct store_create_opts *o, struct err *e)
{
    struct store_create_opts none = {0};
    if (!o)
        o = &none;
    int rc = store_create_validate(r0, e);
    if (rc < 0)
        return rc;
    struct store_create_req eff = {0};
    const struct store_create_req *r = r0;
    if (r0->modelfile) {
        rc = effective_request(r0, &eff, e);
        if (rc < 0) {
            store_create_req_deinit(&eff);
            return rc;
        }
        r = &eff;
    }

    struct create_ctx c = {.s = s, .o = o};
    struct base_info bi = {0};
    struct store_config cfg = {0};
    struct store_manifest old = {0}, m = {0};
    bool have_old = false, written = false;
    struct buf b;
    buf_init(&b, 0);

    struct store_name name;
    store_name_parse(r->model, &name, NULL);
    rc = store_name_canonicalize(s, &name, e);
    if (rc < 0)
        goto out;
    have_old = store_manifest_load(s, &name, &old, NULL, NULL) == 0;

    rc = gather_layers(&c, r, &bi, &cfg, e);
    if (rc >= 0)
        rc = write_config(&c, &cfg, &m, &b, e);
    if (rc < 0)
        goto out;
    report_layers(&c);
    rc = check_cancel(&c, e);
    if (rc < 0)
        goto out;
    progress(&c, "writing manifest", NULL, 0, 0);
    rc = publish_manifest(s, &name, &m, &b, e);
    if (rc < 0)
        goto out;
    written = true;
    if (have_old && !o->noprune)
        store_remove_unused(s, &old, NULL);
    progress(&c, "success", NULL, 0, 0);
out:
    if (rc < 0 && !written && c.created.n_layers) {
        // Nothing partial stays behind: blobs this request made and no
        // manifest references go again.
        store_remove_unused(s, &c.created, NULL);
    }
    buf_deinit(&b);
    store_manifest_deinit(&m);
    store_manifest_deinit(&old);
    store_manifest_deinit(&c.created);
    store_config_deinit(&cfg);
    store_config_deinit(&bi.config);
    json_decref(bi.params);
    layers_free(&c.layers);
    free(c.chat_template);
    store_create_req_deinit(&eff);
    return rc;
}

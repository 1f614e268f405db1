// The data behind POST /api/show (api.md §5): details, model_info from the
// GGUF, tensors, capabilities, the parameters text and the generated
// Modelfile (modelfile.md §6).
#include "store/internal.h"

#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "vision/vision.h"

json_t *store_details_json(const struct store_config *c, const char *parent_model);

void store_prompt_model(const struct store_model *m, struct prompt_model *out)
{
    *out = (struct prompt_model){
        .model_path = m->model_path,
        .template_text = m->template_text,
        .renderer = m->config.renderer,
        .parser = m->config.parser,
        .family = m->config.model_family,
        .model_type = m->config.model_type,
        .display = m->display,
    };
}

static size_t add_cap(const char **out, size_t n, size_t max, const char *cap)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(out[i], cap) == 0)
            return n;
    if (n < max)
        out[n++] = cap;
    return n;
}

// "vision" only where the engine runs the tower (Ollama lists it for any
// vision keys or projector layer): a projector layer of a supported type.
static bool projector_can_see(const struct store_model *m)
{
    bool ok = false;
    for (size_t i = 0; i < m->n_projectors && !ok; i++) {
        struct gguf *g = NULL;
        if (gguf_open(&g, m->projector_paths[i], NULL) == 0) {
            ok = vision_gguf_has_tower(g);
            gguf_close(g);
        }
    }
    return ok;
}

static const char *const known_caps[] = {"completion", "tools",    "insert", "vision",
                                         "embedding",  "thinking", "audio"};

// A model file with vision keys sees only when its tower is one we run
// (vision_gguf_has_tower); the header is opened again only for such files.
static bool tower_can_run(const char *path)
{
    struct gguf *g;
    if (gguf_open(&g, path, NULL) < 0)
        return false;
    bool ok = vision_gguf_has_tower(g);
    gguf_close(g);
    return ok;
}

size_t store_model_capabilities(const struct store_model *m, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < m->config.n_capabilities; i++)
        for (size_t k = 0; k < sizeof(known_caps) / sizeof(known_caps[0]); k++)
            if (strcmp(m->config.capabilities[i], known_caps[k]) == 0)
                n = add_cap(out, n, max, known_caps[k]);
    // The GGUF header's keys, read once per blob (the prompt module's cache).
    struct prompt_facts f;
    if (prompt_facts_get(m->model_path, &f)) {
        n = add_cap(out, n, max, f.pooling ? "embedding" : "completion");
        if (f.vision && tower_can_run(m->model_path))
            n = add_cap(out, n, max, "vision");
        if (f.audio)
            n = add_cap(out, n, max, "audio");
        prompt_facts_deinit(&f);
    }
    if (projector_can_see(m))
        n = add_cap(out, n, max, "vision");
    // Template capabilities come from the source the model's chats use.
    struct prompt_model pm;
    store_prompt_model(m, &pm);
    struct prompt_caps pc;
    prompt_source_caps(&pm, &pc);
    if (pc.tools)
        n = add_cap(out, n, max, "tools");
    if (pc.insert)
        n = add_cap(out, n, max, "insert");
    if (pc.thinking)
        n = add_cap(out, n, max, "thinking");
    // A built-in parser's capabilities (Ollama's parserCapabilities), and
    // gpt-oss always thinks (modelFamilyCapabilities).
    if (prompt_parser_tools(m->config.parser))
        n = add_cap(out, n, max, "tools");
    if (prompt_parser_thinking(m->config.parser))
        n = add_cap(out, n, max, "thinking");
    const char *fam = m->config.model_family ? m->config.model_family : "";
    if (strcmp(fam, "gptoss") == 0 || strcmp(fam, "gpt-oss") == 0)
        n = add_cap(out, n, max, "thinking");
    return n;
}

// An integer GGUF value as Go's model list reads it (any integer type).
static bool kv_int(const struct gguf_value *v, int64_t *out)
{
    switch (v->type) {
    case GGUF_VAL_UINT8:
    case GGUF_VAL_UINT16:
    case GGUF_VAL_UINT32:
    case GGUF_VAL_UINT64:
        *out = v->v.u64 > INT64_MAX ? INT64_MAX : (int64_t)v->v.u64;
        return true;
    case GGUF_VAL_INT8:
    case GGUF_VAL_INT16:
    case GGUF_VAL_INT32:
    case GGUF_VAL_INT64:
        *out = v->v.i64;
        return true;
    default:
        return false;
    }
}

// What /api/tags reads from the GGUF header, in key order as Ollama's model
// list does (server/model_list_cache.go readModelListGGUF): vision / audio
// blocks, the context and embedding lengths, and pooling_type for an
// embedding model; it stops at the first tokenizer key after the
// architecture.
static size_t list_gguf_info(const char *path, const char **caps, size_t n, size_t max,
                             struct store_list_info *out, char *file_type, size_t ft_len)
{
    struct gguf *g;
    if (!path || gguf_open(&g, path, NULL) < 0)
        return n;
    struct str arch = gguf_architecture(g), seen = {0};
    bool pooling = false;
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        if (str_eq_cstr(kv->key, "general.architecture"))
            seen = arch;
        if (seen.len && kv->key.len > 10 && memcmp(kv->key.ptr, "tokenizer.", 10) == 0)
            break;
        if (!seen.len)
            continue;
        if (!arch.len || kv->key.len <= arch.len + 1 ||
            memcmp(kv->key.ptr, arch.ptr, arch.len) != 0 || kv->key.ptr[arch.len] != '.')
            continue;
        struct str k = {kv->key.ptr + arch.len + 1, kv->key.len - arch.len - 1};
        int64_t v;
        if (str_eq_cstr(k, "pooling_type"))
            pooling = true;
        else if (str_eq_cstr(k, "audio.block_count"))
            n = add_cap(caps, n, max, "audio");
        else if (str_eq_cstr(k, "context_length") && kv_int(&kv->val, &v))
            out->context_length = v;
        else if (str_eq_cstr(k, "embedding_length") && kv_int(&kv->val, &v))
            out->embedding_length = v;
    }
    n = add_cap(caps, n, max, pooling ? "embedding" : "completion");
    if (vision_gguf_has_tower(g))
        n = add_cap(caps, n, max, "vision");
    struct gguf_summary sum;
    gguf_summarize(g, &sum);
    snprintf(file_type, ft_len, "%s", sum.quantization_level);
    gguf_close(g);
    return n;
}

void store_model_list_info(const struct store_model *m, struct store_list_info *out)
{
    memset(out, 0, sizeof(*out));
    const size_t max = sizeof(out->caps) / sizeof(out->caps[0]);
    size_t n = list_gguf_info(m->model_path, out->caps, 0, max, out, out->file_type,
                              sizeof(out->file_type));
    for (size_t i = 0; i < m->config.n_capabilities; i++)
        for (size_t k = 0; k < sizeof(known_caps) / sizeof(known_caps[0]); k++)
            if (strcmp(m->config.capabilities[i], known_caps[k]) == 0)
                n = add_cap(out->caps, n, max, known_caps[k]);
    // Only a TEMPLATE layer counts here (Ollama's list reads no Jinja
    // template: without the layer its default template has no variables).
    const char *t = m->template_text ? m->template_text : "";
    if (strstr(t, ".Tools") || prompt_parser_tools(m->config.parser))
        n = add_cap(out->caps, n, max, "tools");
    if (strstr(t, ".Suffix"))
        n = add_cap(out->caps, n, max, "insert");
    const char *fam = m->config.model_family ? m->config.model_family : "";
    if (strstr(t, ".Thinking") || strstr(t, ".IsThinkSet") || strcmp(fam, "gptoss") == 0 ||
        strcmp(fam, "gpt-oss") == 0 || prompt_parser_thinking(m->config.parser))
        n = add_cap(out->caps, n, max, "thinking");
    if (projector_can_see(m))
        n = add_cap(out->caps, n, max, "vision");
    out->n_caps = n;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Sorted keys of an object (borrowed strings).
static const char **sorted_keys(const json_t *o, size_t *n)
{
    *n = json_object_size(o);
    const char **keys = xcalloc(*n ? *n : 1, sizeof(*keys));
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) keys[i++] = k;
    qsort(keys, *n, sizeof(*keys), cmp_key);
    return keys;
}

// A parameter value as `show --modelfile` prints it after PARAMETER, or
// (go_syntax) as Go's %#v prints the decoded JSON value: strings quoted,
// floats without the %v exponent form.
static void param_value(const json_t *v, bool go_syntax, struct buf *out)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_STRING:
        if (go_syntax)
            gofmt_quote(out, json_string_value(v));
        else
            buf_append_str(out, json_string_value(v));
        break;
    case JSON_INTEGER:
        gofmt_float((double)json_integer_value(v), !go_syntax, num, sizeof(num));
        buf_append_str(out, num);
        break;
    case JSON_REAL:
        gofmt_float(json_real_value(v), !go_syntax, num, sizeof(num));
        buf_append_str(out, num);
        break;
    case JSON_TRUE:
        buf_append_str(out, "true");
        break;
    case JSON_FALSE:
        buf_append_str(out, "false");
        break;
    default: {
        struct buf b;
        buf_init(&b, 0);
        gojson_value(&b, v);
        buf_append_str(out, buf_cstr(&b));
        buf_deinit(&b);
    }
    }
}

int store_show_parameters(const json_t *params, struct buf *out)
{
    if (!params)
        return 0;
    size_t n;
    const char **keys = sorted_keys(params, &n);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(params, keys[i]);
        size_t count = json_is_array(v) ? json_array_size(v) : 1;
        for (size_t j = 0; j < count; j++) {
            if (!first)
                buf_append_char(out, '\n');
            first = false;
            buf_printf(out, "%-30s ", keys[i]);
            param_value(json_is_array(v) ? json_array_get(v, j) : v, true, out);
        }
    }
    free(keys);
    return 0;
}

static void cmd_line(struct buf *out, const char *cmd, const char *arg)
{
    buf_printf(out, "%s ", cmd);
    store_modelfile_quote(arg, out);
    buf_append_char(out, '\n');
}

int store_show_modelfile(const struct store_model *m, const char *system_override,
                         const json_t *options, struct buf *out)
{
    buf_append_str(out, "# Modelfile generated by \"ollama show\"\n"
                        "# To build a new Modelfile based on this, replace FROM with:\n");
    buf_printf(out, "# FROM %s\n\n", m->display);
    if (m->model_path)
        buf_printf(out, "FROM %s\n", m->model_path);
    for (size_t i = 0; i < m->n_adapters; i++)
        buf_printf(out, "ADAPTER %s\n", m->adapter_paths[i]);
    if (m->draft_path)
        buf_printf(out, "DRAFT %s\n", m->draft_path);
    for (size_t i = 0; i < m->n_projectors; i++)
        buf_printf(out, "FROM %s\n", m->projector_paths[i]);
    cmd_line(out, "TEMPLATE", m->template_text ? m->template_text : "{{ .Prompt }}");
    const char *system = system_override && *system_override ? system_override : m->system;
    if (system && *system)
        cmd_line(out, "SYSTEM", system);
    if (m->config.renderer && *m->config.renderer)
        cmd_line(out, "RENDERER", m->config.renderer);
    if (m->config.parser && *m->config.parser)
        cmd_line(out, "PARSER", m->config.parser);

    json_t *params = m->params ? json_deep_copy(m->params) : json_object();
    if (options && json_is_object(options))
        json_object_update(params, (json_t *)options);
    size_t n;
    const char **keys = sorted_keys(params, &n);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(params, keys[i]);
        size_t count = json_is_array(v) ? json_array_size(v) : 1;
        for (size_t j = 0; j < count; j++) {
            struct buf val;
            buf_init(&val, 0);
            param_value(json_is_array(v) ? json_array_get(v, j) : v, false, &val);
            buf_printf(out, "PARAMETER %s ", keys[i]);
            store_modelfile_quote(buf_cstr(&val), out);
            buf_append_char(out, '\n');
            buf_deinit(&val);
        }
    }
    free(keys);
    json_decref(params);

    for (size_t i = 0; i < m->n_licenses; i++)
        cmd_line(out, "LICENSE", m->licenses[i]);
    for (size_t i = 0; m->messages && i < json_array_size(m->messages); i++) {
        const json_t *msg = json_array_get(m->messages, i);
        const char *role = json_string_value(json_object_get(msg, "role"));
        const char *content = json_string_value(json_object_get(msg, "content"));
        buf_printf(out, "MESSAGE %s ", role ? role : "");
        store_modelfile_quote(content ? content : "", out);
        buf_append_char(out, '\n');
    }
    return 0;
}

// The Modelfile's text: license, modelfile, parameters, template, system, details and
// messages, in that order.
static void show_text_fields(json_t *r, const struct store_model *m,
                             const struct store_show_opts *o)
{
    struct buf b;
    buf_init(&b, 0);
    for (size_t i = 0; i < m->n_licenses; i++) {
        if (i)
            buf_append_char(&b, '\n');
        buf_append_str(&b, m->licenses[i]);
    }
    if (b.len)
        json_object_set_new(r, "license", json_string(buf_cstr(&b)));
    buf_reset(&b);
    store_show_modelfile(m, o->system, o->options, &b);
    json_object_set_new(r, "modelfile", json_string(buf_cstr(&b)));
    if (m->params) {
        buf_reset(&b);
        store_show_parameters(m->params, &b);
        json_object_set_new(r, "parameters", json_string(buf_cstr(&b)));
    }
    buf_deinit(&b);
    if (m->template_text && *m->template_text)
        json_object_set_new(r, "template", json_string(m->template_text));
    const char *system = o->system && *o->system ? o->system : m->system;
    if (system && *system)
        json_object_set_new(r, "system", json_string(system));
    json_object_set_new(r, "details", store_details_json(&m->config, m->parent_model));
    if (m->messages && json_array_size(m->messages)) {
        json_t *msgs = json_array();
        for (size_t i = 0; i < json_array_size(m->messages); i++) {
            const json_t *msg = json_array_get(m->messages, i);
            json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
            json_array_append_new(
                msgs,
                json_pack("{s:s,s:s}", "role", json_is_string(role) ? json_string_value(role) : "",
                          "content", json_is_string(content) ? json_string_value(content) : ""));
        }
        json_object_set_new(r, "messages", msgs);
    }
}

// Every tensor of g: name, type and shape.
static json_t *tensors_json(struct gguf *g)
{
    json_t *tensors = json_array();
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        json_t *shape = json_array();
        for (uint32_t d = 0; d < t->n_dims; d++)
            json_array_append_new(shape, json_integer(t->ne[d]));
        const char *tn = gguf_type_name(t->type);
        json_array_append_new(tensors, json_pack("{s:s%,s:s,s:o}", "name", t->name.ptr, t->name.len,
                                                 "type", tn ? tn : "unknown", "shape", shape));
    }
    return tensors;
}

// What the model file says: model_info in r, and the tensors (NULL when the file cannot be
// read), which the caller adds after projector_info.
static json_t *show_model_file(json_t *r, const struct store_model *m, bool verbose)
{
    json_t *info = json_object();
    json_t *tensors = NULL;
    struct gguf *g = NULL;
    if (m->model_path && gguf_open(&g, m->model_path, NULL) == 0) {
        // A config without a usable quantization level: take the file's.
        const char *ql = m->config.file_type;
        if (!ql || !*ql || ascii_ieq(ql, "unknown")) {
            struct gguf_summary sum;
            gguf_summarize(g, &sum);
            if (sum.quantization_level[0] && !ascii_ieq(sum.quantization_level, "unknown"))
                json_object_set_new(json_object_get(r, "details"), "quantization_level",
                                    json_string(sum.quantization_level));
        }
        json_t *full = gguf_model_info_json(g, verbose);
        if (full) {
            json_decref(info);
            info = full;
        }
        tensors = tensors_json(g);
        gguf_close(g);
    } else if (m->model_path) {
        log_warn("model %s: cannot read the model file for model_info", m->display);
    }
    json_object_set_new(r, "model_info", info);
    return tensors;
}

int store_show(struct store *s, const char *name, const struct store_show_opts *o, json_t **out,
               struct err *e)
{
    struct store_show_opts none = {0};
    if (!o)
        o = &none;
    struct store_model *m;
    int rc = store_model_load(s, name, &m, e);
    if (rc < 0)
        return rc;
    json_t *r = json_object();
    show_text_fields(r, m, o);
    json_t *tensors = show_model_file(r, m, o->verbose);
    if (m->n_projectors) {
        json_t *pinfo = NULL;
        struct gguf *g = NULL;
        if (gguf_open(&g, m->projector_paths[0], NULL) == 0) {
            pinfo = gguf_model_info_json(g, o->verbose);
            gguf_close(g);
        }
        json_object_set_new(r, "projector_info", pinfo ? pinfo : json_object());
    }
    if (tensors)
        json_object_set_new(r, "tensors", tensors);

    const char *caps[16];
    size_t nc = store_model_capabilities(m, caps, 16);
    json_t *capj = json_array();
    for (size_t i = 0; i < nc; i++)
        json_array_append_new(capj, json_string(caps[i]));
    json_object_set_new(r, "capabilities", capj);
    char ts[64];
    time_format_rfc3339(m->info.modified_ns, ts, sizeof(ts));
    json_object_set_new(r, "modified_at", json_string(ts));
    if (m->config.renderer && *m->config.renderer)
        json_object_set_new(r, "renderer", json_string(m->config.renderer));
    if (m->config.parser && *m->config.parser)
        json_object_set_new(r, "parser", json_string(m->config.parser));
    if (m->config.requires && *m->config.requires)
        json_object_set_new(r, "requires", json_string(m->config.requires));
    store_model_free(m);
    *out = r;
    return 0;
}

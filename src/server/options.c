// Request options (api.md §8) and keep_alive (api.md §9): type checks with
// Ollama's wording, and the merge default < model params < request options.
#include "server/internal.h"

#include <math.h>
#include <string.h>

enum opt_type { OPT_INT, OPT_FLOAT, OPT_BOOL, OPT_STRINGS };

static const struct {
    const char *name;
    enum opt_type type;
} option_types[] = {
    {"num_ctx", OPT_INT},
    {"num_batch", OPT_INT},
    {"num_gpu", OPT_INT},
    {"main_gpu", OPT_INT},
    {"num_thread", OPT_INT},
    {"draft_num_predict", OPT_INT},
    {"draft_ngram", OPT_INT},
    {"num_keep", OPT_INT},
    {"seed", OPT_INT},
    {"num_predict", OPT_INT},
    {"top_k", OPT_INT},
    {"repeat_last_n", OPT_INT},
    {"mirostat", OPT_INT},
    {"top_p", OPT_FLOAT},
    {"min_p", OPT_FLOAT},
    {"typical_p", OPT_FLOAT},
    {"temperature", OPT_FLOAT},
    {"repeat_penalty", OPT_FLOAT},
    {"presence_penalty", OPT_FLOAT},
    {"frequency_penalty", OPT_FLOAT},
    {"mirostat_tau", OPT_FLOAT},
    {"mirostat_eta", OPT_FLOAT},
    {"tfs_z", OPT_FLOAT},
    {"use_mmap", OPT_BOOL},
    {"penalize_newline", OPT_BOOL},
    {"numa", OPT_BOOL},
    {"low_vram", OPT_BOOL},
    {"f16_kv", OPT_BOOL},
    {"logits_all", OPT_BOOL},
    {"vocab_only", OPT_BOOL},
    {"use_mlock", OPT_BOOL},
    {"stop", OPT_STRINGS},
};

static const char *type_word(enum opt_type t)
{
    switch (t) {
    case OPT_INT:
        return "integer";
    case OPT_FLOAT:
        return "float32";
    case OPT_BOOL:
        return "boolean";
    default:
        return "an array of strings";
    }
}

// Checks and normalises one value: ints truncated toward zero, floats as
// reals, stop as an array of strings. Returns a new reference, or NULL with e
// set (500 in Ollama: "option \"top_k\" must be of type integer").
static json_t *normalise(const char *name, enum opt_type t, json_t *v, struct err *e)
{
    switch (t) {
    case OPT_INT:
        if (json_is_number(v)) {
            double d = json_number_value(v);
            if (isfinite(d) && d >= -9.2e18 && d <= 9.2e18)
                return json_integer((json_int_t)d);
        }
        break;
    case OPT_FLOAT:
        if (json_is_number(v))
            return json_real(json_number_value(v));
        break;
    case OPT_BOOL:
        if (json_is_boolean(v))
            return json_incref(v);
        break;
    case OPT_STRINGS:
        if (json_is_array(v)) {
            size_t i;
            json_t *item;
            json_array_foreach(v, i, item)
            {
                if (!json_is_string(item)) {
                    err_set(e, ERR_INTERNAL, "option \"%s\" must be of type %s", name,
                            type_word(t));
                    return NULL;
                }
            }
            return json_incref(v);
        }
        if (json_is_string(v)) {  // a single stop string is accepted as a list
            json_t *a = json_array();
            json_array_append(a, v);
            return a;
        }
        break;
    }
    err_set(e, ERR_INTERNAL, "option \"%s\" must be of type %s", name, type_word(t));
    return NULL;
}

static int merge_into(json_t *out, const json_t *src, struct err *e)
{
    if (!src)
        return 0;
    if (!json_is_object(src))
        return err_set(e, ERR_INVALID, "options must be an object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)src, key, v)
    {
        if (json_is_null(v))
            continue;
        size_t i;
        for (i = 0; i < sizeof(option_types) / sizeof(option_types[0]); i++)
            if (strcmp(option_types[i].name, key) == 0)
                break;
        if (i == sizeof(option_types) / sizeof(option_types[0])) {
            log_debug("ignoring unknown option %s", key);
            continue;
        }
        json_t *n = normalise(key, option_types[i].type, v, e);
        if (!n)
            return ERR_INTERNAL;
        json_object_set_new(out, key, n);
    }
    return 0;
}

int srv_options_merge(const json_t *model_params, const json_t *request, json_t **out,
                      struct err *e)
{
    json_t *o = json_object();
    int rc = merge_into(o, model_params, e);
    if (rc == 0)
        rc = merge_into(o, request, e);
    if (rc < 0) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return 0;
}

int64_t srv_option_int(const json_t *options, const char *name, int64_t dflt)
{
    json_t *v = json_object_get(options, name);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

int srv_keep_alive(const json_t *body, bool *set, int64_t *ns, struct err *e)
{
    json_t *v = json_object_get(body, "keep_alive");
    *set = false;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_number(v)) {
        double secs = json_number_value(v);
        *ns = secs < 0 ? -1 : (int64_t)(secs * 1e9);
        *set = true;
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        // A bare number other than "0" needs a unit (Go's time.ParseDuration).
        bool bare = *s != '\0';
        for (const char *p = s; *p; p++)
            if (!(*p >= '0' && *p <= '9') && *p != '-' && *p != '+' && *p != '.')
                bare = false;
        if (bare && strcmp(s, "0") != 0 && strcmp(s, "-0") != 0)
            return err_set(e, ERR_INVALID, "time: missing unit in duration \"%s\"", s);
        int64_t d;
        struct err pe = {0};
        if (duration_parse(s, &d, &pe) < 0)
            return err_set(e, ERR_INVALID, "time: invalid duration \"%s\"", s);
        *ns = d < 0 ? -1 : d;
        *set = true;
        return 0;
    }
    return err_set(e, ERR_INVALID, "Unsupported type: '%s'", jsonx_type_name(v));
}

// libFuzzer target for the json module: jsonx_parse on arbitrary bytes, the
// typed getters on whatever object comes out, and the Go-style writer, whose
// output must parse again to the same text.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise_getters(const json_t *o)
{
    static const char *const keys[] = {"model",   "prompt",      "stream", "options",    "messages",
                                       "num_ctx", "temperature", "stop",   "keep_alive", "format"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        struct err e = {0};
        const char *s;
        size_t len;
        bool b;
        int64_t n;
        double d;
        json_t *sub;
        jsonx_get_strn(o, keys[i], &s, &len, false, &e);
        err_clear(&e);
        jsonx_get_bool(o, keys[i], &b, true, &e);
        err_clear(&e);
        jsonx_get_int(o, keys[i], &n, -1000, 1000, false, &e);
        err_clear(&e);
        jsonx_get_double(o, keys[i], &d, false, &e);
        err_clear(&e);
        if (jsonx_get_arr(o, keys[i], &sub, false, &e) == 1) {
            for (size_t k = 0; k < json_array_size(sub); k++) {
                jsonx_as_str(json_array_get(sub, k), "elem", &s, NULL);
                jsonx_as_int(json_array_get(sub, k), "elem", &n, INT64_MIN, INT64_MAX, NULL);
            }
        }
        err_clear(&e);
        jsonx_get_obj(o, keys[i], &sub, false, &e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = NULL;
    struct err e = {0};
    if (jsonx_parse((const char *)data, size, &v, &e) < 0) {
        if (!e.msg[0])
            abort();  // every failure explains itself
        return 0;
    }
    if (json_is_object(v))
        exercise_getters(v);
    // Writer output must parse again, and after one normalisation (-0 and
    // 5.0 come back as integers) re-encoding is stable.
    static const int flag_sets[] = {0, JSONX_SORT_KEYS | JSONX_NO_HTML_ESCAPE, JSONX_INDENT};
    for (size_t f = 0; f < 3; f++) {
        char *a = jsonx_dumps(v, flag_sets[f]);
        if (!a)
            abort();
        json_t *w = NULL;
        if (jsonx_parse(a, strlen(a), &w, NULL) < 0)
            abort();
        char *b = jsonx_dumps(w, flag_sets[f]);
        json_t *x = NULL;
        if (!b || jsonx_parse(b, strlen(b), &x, NULL) < 0)
            abort();
        char *c = jsonx_dumps(x, flag_sets[f]);
        if (!c || strcmp(b, c) != 0)
            abort();
        free(a);
        free(b);
        free(c);
        json_decref(w);
        json_decref(x);
    }
    json_decref(v);
    return 0;
}

// Tokenizer pass-through for the runner: the model's vocabulary is loaded
// with the model, so the runner needs only the model handle.
#include "model/internal.h"

#include <string.h>

#include "tokenizer/tokenizer.h"

const struct tokenizer *model_tokenizer(const struct model *m)
{
    return m->tok;
}

int model_tokenize(const struct model *m, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t *ids, int cap, struct err *e)
{
    struct tokenizer_ids v = {0};
    int rc = tokenizer_encode(m->tok, text, len, add_special, parse_special, &v, e);
    if (rc >= 0) {
        if (v.len > (size_t)cap)
            rc = err_set(e, ERR_TOO_LARGE, "prompt is %zu tokens, more than the %d allowed", v.len,
                         cap);
        else {
            if (v.len)
                memcpy(ids, v.data, v.len * sizeof(int32_t));
            rc = (int)v.len;
        }
    }
    tokenizer_ids_deinit(&v);
    return rc;
}

int model_token_to_piece(const struct model *m, int32_t id, char *out, int cap)
{
    struct str p = tokenizer_piece(m->tok, id, false);
    size_t n = p.len < (size_t)cap ? p.len : (size_t)cap;
    if (n)
        memcpy(out, p.ptr, n);
    return (int)n;
}

bool model_token_is_eog(const struct model *m, int32_t id)
{
    return tokenizer_is_eog(m->tok, id);
}

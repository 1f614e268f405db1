// Tokenizer pass-through for the runner. TODO(tokenizer): temporary
// version until the tokenizer module lands: every call reports it.
#include "model/internal.h"

const struct tokenizer *model_tokenizer(const struct model *m)
{
    (void)m;
    return NULL;
}

int model_tokenize(const struct model *m, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t *ids, int cap, struct err *e)
{
    (void)m, (void)text, (void)len, (void)add_special, (void)parse_special, (void)ids, (void)cap;
    return err_set(e, ERR_NOT_IMPLEMENTED, "tokenizer not available in this build");
}

int model_token_to_piece(const struct model *m, int32_t id, char *out, int cap)
{
    (void)m, (void)id, (void)out, (void)cap;
    return 0;
}

bool model_token_is_eog(const struct model *m, int32_t id)
{
    (void)m, (void)id;
    return false;
}

// Parsing entry points: source -> tokens -> tree, kept in one arena that
// lives as long as the template.
#include "jinja/internal.h"

#include <string.h>

int jinja_parse(struct jinja_template **out, const char *text, size_t len, struct err *e)
{
    if (len > JINJA_MAX_SOURCE)
        return err_set(e, ERR_TOO_LARGE, "jinja: template of %zu bytes is too large", len);
    struct jinja_template *t = xcalloc(1, sizeof *t);
    arena_init(&t->arena, 0);
    t->src = arena_strndup(&t->arena, text, len);
    int rc = t->src ? 0 : err_set(e, ERR_TOO_LARGE, "jinja: out of memory");
    if (!rc)
        rc = jinja_lex(text, len, &t->arena, &t->toks, e);
    if (!rc)
        rc = jinja_parse_tokens(t, &t->toks, e);
    if (rc) {
        jinja_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void jinja_free(struct jinja_template *t)
{
    if (!t)
        return;
    arena_deinit(&t->arena);
    free(t);
}

bool jinja_mentions(const struct jinja_template *t, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < t->toks.n; i++) {
        const struct jtoken *k = &t->toks.v[i];
        if ((k->type == JT_NAME || k->type == JT_STRING) && k->n == n && !memcmp(k->s, name, n))
            return true;
    }
    return false;
}

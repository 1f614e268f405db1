// template: public entry points for parsing and executing templates, and
// the capability queries derived from the parse tree (templates.md §1, §11).
#include "template/template.h"

#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

int template_parse(struct template **out, const char *text, size_t len, struct err *e)
{
    if (len > TMPL_MAX_SOURCE)
        return err_set(e, ERR_TOO_LARGE, "template too large (%zu bytes)", len);
    struct template *t = xcalloc(1, sizeof(*t));
    arena_init(&t->arena, 0);
    t->src = xstrndup(text ? text : "", len);
    t->src_len = len;
    int rc = tmpl_parse_tree(t, e);
    if (rc) {
        template_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void template_free(struct template *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_idents; i++)
        free(t->idents[i]);
    free(t->idents);
    free(t->defs);
    free(t->tool_tag);
    free(t->think_open);
    free(t->think_close);
    free(t->src);
    arena_deinit(&t->arena);
    free(t);
}

const char *template_text(const struct template *t)
{
    return t->src;
}

bool template_has_ident(const struct template *t, const char *lower_name)
{
    size_t lo = 0, hi = t->n_idents;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(t->idents[mid], lower_name);
        if (!c)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool template_supports_tools(const struct template *t)
{
    return template_has_ident(t, "tools");
}
bool template_supports_insert(const struct template *t)
{
    return template_has_ident(t, "suffix");
}

bool template_thinking_tags(const struct template *t, const char **open, const char **close)
{
    bool ok = t->think_open && t->think_close && *t->think_open && *t->think_close;
    if (open)
        *open = ok ? t->think_open : NULL;
    if (close)
        *close = ok ? t->think_close : NULL;
    return ok;
}

const char *template_tool_tag(const struct template *t)
{
    return t->tool_tag;
}

int template_execute(const struct template *t, json_t *data, struct buf *out, struct err *e)
{
    return tmpl_exec_node(t, t->root, data, out, e);
}

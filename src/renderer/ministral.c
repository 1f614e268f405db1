// ministral parser (Ollama's model/parsers/ministral.go): Mistral's
// [THINK]…[/THINK] thinking and [TOOL_CALLS]NAME[ARGS]{JSON} calls, the name
// checked against the request's tools.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

#define M_CALLS     "[TOOL_CALLS]"
#define M_THINK     "[THINK]"
#define M_THINK_END "[/THINK]"
#define M_ARGS      "[ARGS]"

enum { M_CONTENT, M_THINKING, M_NAME, M_ARGS_STATE };

struct ministral {
    char *name;  // the call whose arguments are being collected
};

int rnd_ministral_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                       int variant, struct err *e)
{
    (void)think;
    (void)e;
    p->impl = xcalloc(1, sizeof(struct ministral));
    bool prefill =
        last && strcmp(rnd_str(last, "role"), "assistant") == 0 && *rnd_str(last, "content");
    p->state = variant == 1 && !prefill ? M_THINKING : M_CONTENT;
    return 0;
}

void rnd_ministral_deinit(struct renderer_parser *p)
{
    struct ministral *m = p->impl;
    if (m)
        free(m->name);
    free(m);
    p->impl = NULL;
}

// findJSONEnd: the index of the bracket closing the first value, or -1.
static long json_end(const char *s, size_t n)
{
    int depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return (long)i;
    }
    return -1;
}

static bool has_tool(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) if (strcmp(rnd_str(json_object_get(t, "function"), "name"),
                                               name) == 0) return true;
    return false;
}

int rnd_ministral_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    struct ministral *m = p->impl;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        if (p->state == M_CONTENT) {
            const char *calls = rnd_find(a, n, M_CALLS), *think = rnd_find(a, n, M_THINK);
            const char *tag = calls ? calls : think;
            if (tag) {
                size_t before = (size_t)(tag - a);
                buf_append(o->content, a, before - rnd_trailing_ws(a, before));
                rnd_buf_consume(&p->acc, before + strlen(calls ? M_CALLS : M_THINK));
                p->state = calls ? M_NAME : M_THINKING;
                continue;
            }
            rnd_emit_until_partial(p, M_CALLS, M_THINK, o->content);
            return 0;
        }
        if (p->state == M_THINKING) {
            const char *end = rnd_find(a, n, M_THINK_END);
            if (end) {
                buf_append(o->thinking, a, (size_t)(end - a));
                size_t after = (size_t)(end - a) + strlen(M_THINK_END);
                after += rnd_leading_ws(a + after, n - after);
                rnd_buf_consume(&p->acc, after);
                p->state = M_CONTENT;
                continue;
            }
            size_t ov = rnd_overlap(a, n, M_THINK_END);
            buf_append(o->thinking, a, n - ov);
            rnd_buf_consume(&p->acc, n - ov);
            return 0;
        }
        if (p->state == M_NAME) {
            const char *args = rnd_find(a, n, M_ARGS);
            if (!args)
                return 0;
            free(m->name);
            m->name = xstrndup(a, (size_t)(args - a));
            rnd_buf_consume(&p->acc, (size_t)(args - a) + strlen(M_ARGS));
            p->state = M_ARGS_STATE;
            continue;
        }
        long end = json_end(a, n);
        if (end < 0)
            return 0;
        if (!has_tool(p->tools, m->name))
            return err_set(e, ERR_INVALID, "tool '%s' not found", m->name);
        json_t *args = NULL;
        if (jsonx_parse(a, (size_t)end + 1, &args, NULL) < 0 || !json_is_object(args)) {
            json_decref(args);
            return err_set(e, ERR_INVALID, "ministral: tool call arguments are not a JSON object");
        }
        rnd_call_append(p, o->calls, m->name, args);
        rnd_buf_consume(&p->acc, (size_t)end + 1);
        p->state = M_CONTENT;
    }
}

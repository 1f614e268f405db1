// glm-4.7 (Ollama's model/renderers/glm47.go, model/parsers/glm47.go over
// glm46.go): [gMASK]<sop> turns, the tools as JSON lines, calls as
//
//   <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>
//
// with values typed from the tool's schema as qwen3-coder does, thinking in
// <think>…</think> (on by default: the prompt ends with <think>).
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

int rnd_render_glm47(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                     struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    buf_append_str(out, "[gMASK]<sop>");
    size_t i;
    json_t *m;
    if (json_array_size(tools) > 0) {
        rnd_glm_tools(out, tools);
    }
    bool thinking = !(think && think->set && !think->on);
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "user") == 0) {
            buf_printf(out, "<|user|>%s", rnd_str(m, "content"));
        } else if (strcmp(role, "assistant") == 0) {
            buf_append_str(out, "<|assistant|>");
            const char *th = rnd_str(m, "thinking");
            if (*th)
                buf_printf(out, "<think>%s</think>", th);
            else
                buf_append_str(out, "</think>");
            buf_append_str(out, rnd_str(m, "content"));
            size_t k;
            json_t *call;
            json_array_foreach(json_object_get(m, "tool_calls"), k, call)
                rnd_glm_tool_call(out, call, "<tool_call>");
        } else if (strcmp(role, "tool") == 0) {
            json_t *prev = i > 0 ? json_array_get(msgs, i - 1) : NULL;
            if (!prev || strcmp(rnd_str(prev, "role"), "tool") != 0)
                buf_append_str(out, "<|observation|>");
            buf_printf(out, "<tool_response>%s</tool_response>", rnd_str(m, "content"));
        } else if (strcmp(role, "system") == 0) {
            buf_printf(out, "<|system|>%s", rnd_str(m, "content"));
        }
    }
    buf_append_str(out, thinking ? "<|assistant|><think>" : "<|assistant|></think>");
    return 0;
}

// ---------------------------------------------------------------------------
// Parser

#define THINK_OPEN  "<think>"
#define THINK_CLOSE "</think>"
#define TOOL_OPEN   "<tool_call>"
#define TOOL_CLOSE  "</tool_call>"

enum { G_LOOKING, G_THINK_START_WS, G_THINKING, G_THINK_DONE_WS, G_CONTENT, G_TOOL_WS, G_TOOL };

int rnd_glm47_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                   int variant, struct err *e)
{
    (void)last;
    (void)e;
    // The prompt ends with <think> unless thinking is off; glm-ocr's (variant 1)
    // never thinks.
    p->state = variant == 1 || (think && think->set && !think->on) ? G_LOOKING : G_THINKING;
    return 0;
}

// The text between open and close (both literal) at *pos; advances *pos.
static bool element(const char *s, size_t n, size_t *pos, const char *open, const char *close,
                    const char **v, size_t *vn)
{
    size_t ol = strlen(open), cl = strlen(close);
    if (n - *pos < ol || memcmp(s + *pos, open, ol) != 0)
        return false;
    const char *start = s + *pos + ol;
    const char *end = rnd_find(start, n - (*pos + ol), close);
    if (!end)
        return false;
    *v = start;
    *vn = (size_t)(end - start);
    *pos = (size_t)(end - s) + cl;
    return true;
}

// A copy of s[0..n) without its leading and trailing white space.
static char *trimmed_dup(const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    return xstrndup(s + lead, n - lead - rnd_trailing_ws(s + lead, n - lead));
}

// One <arg_key>k</arg_key><arg_value>v</arg_value> pair at *pos into args,
// the value typed from the schema of the function `name` (text so far, not
// yet trimmed); advances *pos. Returns 0 or an error.
static int glm_arg(struct renderer_parser *p, const char *s, size_t n, size_t *pos,
                   const struct buf *name, bool final, json_t *args, struct err *e)
{
    const char *k, *v;
    size_t kn, vn;
    if (!element(s, n, pos, "<arg_key>", "</arg_key>", &k, &kn))
        return err_set(e, ERR_INVALID, "failed to parse XML: unclosed <arg_key>");
    *pos += rnd_leading_ws(s + *pos, n - *pos);
    if (!element(s, n, pos, "<arg_value>", "</arg_value>", &v, &vn))
        return err_set(e, ERR_INVALID, "mismatched arg_key and arg_value counts");
    char *key = trimmed_dup(k, kn);
    if (final && !*key) {
        free(key);
        return err_set(e, ERR_INVALID, "incomplete GLM tool call: empty argument name");
    }
    // One newline on each side of the value is the format's, not the value's.
    const char *vs = v, *ve = v + vn;
    if (vs < ve && *vs == '\n')
        vs++;
    if (ve > vs && ve[-1] == '\n')
        ve--;
    char *value = xstrndup(vs, (size_t)(ve - vs));
    const char *types[32];
    size_t nt = 0;
    char *fname = trimmed_dup(name->data ? name->data : "", name->len);
    rnd_param_types(p->tools, fname, key, types, &nt, 32);
    free(fname);
    json_object_set_new(args, key, rnd_typed_value(value, types, nt));
    free(key);
    free(value);
    return 0;
}

// A call the response ended inside must name a declared tool and give it
// its required arguments. Returns 0 or an error.
static int glm_check_final(struct renderer_parser *p, const char *fn, const json_t *args,
                           struct err *e)
{
    json_t *tool = NULL, *t;
    size_t i;
    json_array_foreach(p->tools, i, t)
    {
        if (!tool && strcmp(rnd_str(json_object_get(t, "function"), "name"), fn) == 0)
            tool = t;
    }
    if (!tool)
        return err_set(e, ERR_INVALID, "incomplete GLM tool call: tool \"%s\" is not declared", fn);
    json_t *req = json_object_get(rnd_tool_fn(tool, "parameters"), "required");
    json_t *r;
    json_array_foreach(req, i, r)
    {
        if (json_is_string(r) && !json_object_get(args, json_string_value(r)))
            return err_set(e, ERR_INVALID,
                           "incomplete GLM tool call: required argument \"%s\" is missing for "
                           "tool \"%s\"",
                           json_string_value(r), fn);
    }
    return 0;
}

// NAME<arg_key>k</arg_key><arg_value>v</arg_value>…: a call, or an error.
// final: the response ended inside the call (the tool must be declared and
// given its required arguments).
static int glm_call(struct renderer_parser *p, const char *s, size_t n, bool final, json_t *calls,
                    struct err *e)
{
    struct buf name;
    buf_init(&name, 0);
    json_t *args = json_object();
    size_t pos = 0;
    int rc = 0;
    while (pos < n && rc == 0) {
        if (s[pos] != '<' || !cstr_starts_with(s + pos, "<arg_key>"))
            buf_append_char(&name, s[pos++]);  // text nodes form the name
        else
            rc = glm_arg(p, s, n, &pos, &name, final, args, e);
    }
    char *fn = trimmed_dup(name.data ? name.data : "", name.len);
    if (rc == 0 && !*fn)
        rc = err_set(e, ERR_INVALID, "empty function name");
    if (rc == 0 && final)
        rc = glm_check_final(p, fn, args, e);
    if (rc == 0)
        rnd_call_append(p, calls, fn, json_incref(args));
    free(fn);
    json_decref(args);
    buf_deinit(&name);
    return rc;
}

static bool eat_ws(struct renderer_parser *p, int next)
{
    rnd_buf_consume(&p->acc, rnd_leading_ws(p->acc.data ? p->acc.data : "", p->acc.len));
    if (p->acc.len == 0)
        return false;
    p->state = next;
    return true;
}

int rnd_glm47_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    for (bool more = true; more;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        switch (p->state) {
        case G_LOOKING: {
            size_t ws = rnd_leading_ws(a, n), tl = strlen(THINK_OPEN);
            if (n - ws >= tl && memcmp(a + ws, THINK_OPEN, tl) == 0) {
                rnd_buf_consume(&p->acc, ws + tl);
                p->state = G_THINK_START_WS;
            } else if (n - ws == 0 || (n - ws < tl && memcmp(THINK_OPEN, a + ws, n - ws) == 0)) {
                more = false;
            } else {
                p->state = G_CONTENT;
            }
            break;
        }
        case G_THINK_START_WS:
            more = eat_ws(p, G_THINKING);
            break;
        case G_THINK_DONE_WS:
            more = eat_ws(p, G_CONTENT);
            break;
        case G_TOOL_WS:
            more = eat_ws(p, G_TOOL);
            break;
        case G_THINKING: {
            const char *close = rnd_find(a, n, THINK_CLOSE);
            if (close) {
                p->state =
                    rnd_split_at(p, close, THINK_CLOSE, o->thinking) ? G_CONTENT : G_THINK_DONE_WS;
            } else {
                rnd_emit_until_partial(p, THINK_CLOSE, NULL, o->thinking);
                more = false;
            }
            break;
        }
        case G_CONTENT: {
            const char *t = rnd_find(a, n, TOOL_OPEN);
            if (t) {
                p->state = rnd_split_at(p, t, TOOL_OPEN, o->content) ? G_TOOL : G_TOOL_WS;
            } else {
                rnd_emit_until_partial(p, TOOL_OPEN, NULL, o->content);
                more = false;
            }
            break;
        }
        default: {  // G_TOOL
            const char *close = rnd_find(a, n, TOOL_CLOSE);
            if (!close) {
                more = false;
                break;
            }
            size_t raw = (size_t)(close - a);
            raw -= rnd_trailing_ws(a, raw);
            int rc = glm_call(p, a, raw, false, o->calls, e);
            if (rc < 0)
                return rc;
            size_t after = (size_t)(close - a) + strlen(TOOL_CLOSE);
            after += rnd_leading_ws(a + after, n - after);
            rnd_buf_consume(&p->acc, after);
            p->state = G_CONTENT;
        }
        }
    }
    // The response ended inside a call: finish it if it is complete enough.
    if (done && (p->state == G_TOOL || p->state == G_TOOL_WS) && p->acc.len) {
        const char *a = p->acc.data;
        size_t n = p->acc.len - rnd_overlap(p->acc.data, p->acc.len, TOOL_CLOSE);
        n -= rnd_trailing_ws(a, n);
        int rc = glm_call(p, a, n, true, o->calls, e);
        if (rc < 0)
            return rc;
        buf_reset(&p->acc);
        p->state = G_CONTENT;
    }
    return 0;
}

// qwen3-coder: Qwen3-Coder's chat format (ChatML with an XML tool list) and
// its XML tool calls, as Ollama's model/renderers/qwen3coder.go and
// model/parsers/qwen3coder.go write and read them:
//
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
//
// Parameter values are text; the parser types them from the tool's schema.
#include "renderer/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IM_START "<|im_start|>"
#define IM_END   "<|im_end|>"

#define QWEN_DEFAULT_SYSTEM                                                                        \
    "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."

#define QWEN_TOOLS_FOOTER "\n\n" RND_QWEN_CALL_FORMAT

// ---------------------------------------------------------------------------
// Renderer

// The keys of a schema object other than the handled ones, in the order of
// Ollama's Go struct fields (its map iteration has no order of its own):
// "\n<key>value</key>", objects and arrays as Go JSON.
static void additional_keys(struct buf *b, const json_t *obj, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++) {
        json_t *v = json_object_get(obj, keys[i]);
        if (!v || json_is_null(v))
            continue;
        // Go's omitempty drops empty arrays and strings.
        if ((json_is_array(v) && json_array_size(v) == 0) ||
            (json_is_string(v) && json_string_length(v) == 0))
            continue;
        buf_printf(b, "\n<%s>", keys[i]);
        rnd_go_value(b, v);
        buf_printf(b, "</%s>", keys[i]);
    }
}

static void render_tools(struct buf *b, json_t *tools)
{
    static const char *const prop_keys[] = {"anyOf",      "items",    "enum",
                                            "properties", "required", NULL};
    static const char *const param_keys[] = {"$defs", "items", "required", NULL};
    buf_append_str(b, "\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        buf_append_str(b, "\n<function>\n<name>");
        buf_append_str(b, rnd_str(json_object_get(tool, "function"), "name"));
        buf_append_str(b, "</name>");
        const char *desc = rnd_str(json_object_get(tool, "function"), "description");
        if (*desc)
            buf_printf(b, "\n<description>%s</description>", desc);
        buf_append_str(b, "\n<parameters>");
        json_t *params = rnd_tool_fn(tool, "parameters");
        json_t *props = json_object_get(params, "properties");
        const char *pname;
        json_t *prop;
        json_object_foreach(props, pname, prop)
        {
            buf_printf(b, "\n<parameter>\n<name>%s</name>", pname);
            json_t *type = json_object_get(prop, "type");
            if (json_is_string(type) && json_string_length(type)) {
                buf_printf(b, "\n<type>%s</type>", json_string_value(type));
            } else if (json_is_array(type) && json_array_size(type) == 1) {
                buf_append_str(b, "\n<type>");
                const char *t0 = json_string_value(json_array_get(type, 0));
                buf_append_str(b, t0 ? t0 : "");
                buf_append_str(b, "</type>");
            } else if (json_is_array(type) && json_array_size(type) > 1) {
                buf_append_str(b, "\n<type>");
                rnd_go_json(b, type);
                buf_append_str(b, "</type>");
            }
            const char *pdesc = rnd_str(prop, "description");
            if (*pdesc)
                buf_printf(b, "\n<description>%s</description>", pdesc);
            additional_keys(b, prop, prop_keys);
            buf_append_str(b, "\n</parameter>");
        }
        additional_keys(b, params, param_keys);
        buf_append_str(b, "\n</parameters>\n</function>");
    }
    buf_append_str(b, "\n</tools>");
    buf_append_str(b, QWEN_TOOLS_FOOTER);
}

// formatToolCallArgument: strings as they are, null as "null", objects and
// arrays as Go JSON, the rest with %v.
static void call_argument(struct buf *b, const json_t *v)
{
    if (json_is_null(v))
        buf_append_str(b, "null");
    else
        rnd_go_value(b, v);
}

// The system turn, when there is a system message or tools: the first
// non-empty system message (or the default) and the tools' list.
static void write_system(struct buf *out, const char *system, json_t *tools)
{
    bool has_tools = json_array_size(tools) > 0;
    if (!*system && !has_tools)
        return;
    buf_append_str(out, IM_START "system\n");
    buf_append_str(out, *system ? system : QWEN_DEFAULT_SYSTEM);
    if (has_tools)
        render_tools(out, tools);
    buf_append_str(out, IM_END "\n");
}

// One call: its function and each argument as a <parameter=NAME> element.
static void write_call(struct buf *out, const json_t *call)
{
    json_t *fn = rnd_call_fn(call);
    buf_printf(out, "\n<tool_call>\n<function=%s>", rnd_str(fn, "name"));
    const char *an;
    json_t *av;
    json_object_foreach(json_object_get(fn, "arguments"), an, av)
    {
        buf_printf(out, "\n<parameter=%s>\n", an);
        call_argument(out, av);
        buf_append_str(out, "\n</parameter>");
    }
    buf_append_str(out, "\n</function>\n</tool_call>");
}

// An assistant turn: its content and calls; a last one without calls is
// left open (a prefill).
static void write_assistant(struct buf *out, const json_t *m, bool prefill)
{
    buf_append_str(out, IM_START "assistant\n");
    json_t *calls = json_object_get(m, "tool_calls");
    if (json_array_size(calls) == 0) {
        buf_append_str(out, rnd_str(m, "content"));
        if (!prefill)
            buf_append_str(out, IM_END "\n");
        return;
    }
    const char *content = rnd_str(m, "content");
    if (*content)
        buf_printf(out, "%s\n", content);
    for (size_t k = 0; k < json_array_size(calls); k++)
        write_call(out, json_array_get(calls, k));
    buf_append_str(out, IM_END "\n");
}

// Tool result i: consecutive tool results share one user turn.
static void write_tool_result(struct buf *out, json_t *rest, size_t i)
{
    json_t *prev = i > 0 ? json_array_get(rest, i - 1) : NULL;
    json_t *next = json_array_get(rest, i + 1);
    if (!prev || strcmp(rnd_str(prev, "role"), "tool") != 0)
        buf_append_str(out, IM_START "user");
    buf_append_str(out, "\n<tool_response>\n");
    buf_append_str(out, rnd_str(json_array_get(rest, i), "content"));
    buf_append_str(out, "\n</tool_response>");
    if (!next || strcmp(rnd_str(next, "role"), "tool") != 0)
        buf_append_str(out, IM_END "\n");
}

int rnd_render_qwen3coder(json_t *msgs, json_t *tools, const struct renderer_think *think,
                          int variant, struct buf *out, struct err *e)
{
    (void)think;
    (void)variant;
    (void)e;
    const char *system = "";
    json_t *rest = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (strcmp(rnd_str(m, "role"), "system") != 0) {
            json_array_append(rest, m);
            continue;
        }
        if (!*system)
            system = rnd_str(m, "content");
    }
    write_system(out, system, tools);
    size_t n = json_array_size(rest);
    json_array_foreach(rest, i, m)
    {
        const char *role = rnd_str(m, "role");
        bool last = i == n - 1;
        bool prefill = last && strcmp(role, "assistant") == 0;
        if (strcmp(role, "assistant") == 0) {
            write_assistant(out, m, prefill);
        } else if (strcmp(role, "tool") == 0) {
            write_tool_result(out, rest, i);
        } else {
            buf_printf(out, IM_START "%s\n", role);
            buf_append_str(out, rnd_str(m, "content"));
            buf_append_str(out, IM_END "\n");
        }
        if (last && !prefill)
            buf_append_str(out, IM_START "assistant\n");
    }
    json_decref(rest);
    return out->len > out->max_len && out->max_len ? ERR_TOO_LARGE : 0;
}

// ---------------------------------------------------------------------------
// Parser

#define TOOL_OPEN  "<tool_call>"
#define TOOL_CLOSE "</tool_call>"

enum { QC_LOOKING, QC_COLLECTING };

// The parameter's declared types: its "type" (string or list) or, with
// anyOf, the types of every branch.
void rnd_param_types(json_t *tools, const char *fn_name, const char *param, const char **types,
                     size_t *n_types, size_t max)
{
    *n_types = 0;
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        if (strcmp(rnd_str(json_object_get(tool, "function"), "name"), fn_name) != 0)
            continue;
        rnd_tool_param_types(tool, param, types, n_types, max);
        return;  // the first tool of that name
    }
}

void rnd_tool_param_types(const json_t *tool, const char *param, const char **types,
                          size_t *n_types, size_t max)
{
    *n_types = 0;
    json_t *prop =
        json_object_get(json_object_get(rnd_tool_fn(tool, "parameters"), "properties"), param);
    json_t *any = json_object_get(prop, "anyOf");
    json_t *srcs[32];
    size_t n_src = 0;
    if (json_is_array(any) && json_array_size(any) > 0) {
        for (size_t k = 0; k < json_array_size(any) && n_src < 32; k++)
            srcs[n_src++] = json_object_get(json_array_get(any, k), "type");
    } else {
        srcs[n_src++] = json_object_get(prop, "type");
    }
    for (size_t k = 0; k < n_src; k++) {
        if (json_is_string(srcs[k]) && *n_types < max)
            types[(*n_types)++] = json_string_value(srcs[k]);
        for (size_t t = 0; json_is_array(srcs[k]) && t < json_array_size(srcs[k]); t++)
            if (json_is_string(json_array_get(srcs[k], t)) && *n_types < max)
                types[(*n_types)++] = json_string_value(json_array_get(srcs[k], t));
    }
}

static bool has_type(const char *const *types, size_t n, const char *t)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(types[i], t) == 0)
            return true;
    return false;
}

// Go's strconv.ParseFloat(s, 64) for finite decimal numbers.
static bool parse_float(const char *s, double *out)
{
    if (!*s || strchr(" \t\n\r\v\f", *s))
        return false;
    for (const char *q = s; *q; q++)
        if (!strchr("0123456789+-.eE", *q))
            return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static json_t *number_value(double f)
{
    if (f == trunc(f) && fabs(f) < 9.2e18)
        return json_integer((json_int_t)f);
    return json_real(f);
}

// parseTypedToolValue: null first, then boolean, integer, number, array,
// object, string in that order of preference.
json_t *rnd_typed_value(const char *raw, const char *const *types, size_t n)
{
    if (ascii_ieq(raw, "null"))
        return json_null();
    if (n == 0)
        return json_string(raw);
    if (has_type(types, n, "boolean")) {
        if (ascii_ieq(raw, "true"))
            return json_true();
        if (ascii_ieq(raw, "false"))
            return json_false();
        if (n == 1)
            return json_false();
    }
    if (has_type(types, n, "integer")) {
        int64_t i;
        if (str_go_parse_int(raw, &i))
            return json_integer(i);
        if (n == 1)
            return json_string(raw);
    }
    if (has_type(types, n, "number")) {
        double f;
        if (parse_float(raw, &f))
            return number_value(f);
        if (n == 1)
            return json_string(raw);
    }
    if (has_type(types, n, "array")) {
        json_t *v = json_loads(raw, JSON_DECODE_ANY, NULL);
        if (json_is_array(v))
            return v;
        json_decref(v);
        if (n == 1)
            return json_string(raw);
    }
    if (has_type(types, n, "object")) {
        json_t *v = json_loads(raw, JSON_DECODE_ANY, NULL);
        if (json_is_object(v))
            return v;
        json_decref(v);
        if (n == 1)
            return json_string(raw);
    }
    return json_string(raw);
}

// `<tag=VALUE>` at s: returns the end (after '>') and the value span.
static const char *eq_tag(const char *s, const char *end, const char *tag, const char **v,
                          size_t *vn)
{
    size_t tl = strlen(tag);
    if ((size_t)(end - s) < tl + 3 || s[0] != '<' || memcmp(s + 1, tag, tl) != 0 ||
        s[1 + tl] != '=')
        return NULL;
    const char *p = s + 2 + tl;
    const char *gt = memchr(p, '>', (size_t)(end - p));
    if (!gt || gt == p)
        return NULL;
    *v = p;
    *vn = (size_t)(gt - p);
    return gt + 1;
}

// One call's text (between <tool_call> and </tool_call>).
static int parse_call(struct renderer_parser *p, const char *raw, size_t n, json_t *calls,
                      struct err *e)
{
    const char *s = raw, *end = raw + n;
    const char *fn = rnd_find(s, n, "<function=");
    const char *name = NULL;
    size_t name_len = 0;
    const char *q = fn ? eq_tag(fn, end, "function", &name, &name_len) : NULL;
    if (!q)
        return err_set(e, ERR_INVALID, "qwen3-coder: tool call has no <function=...> element");
    json_t *args = json_object();
    char *fname = xstrndup(name, name_len);
    for (;;) {
        const char *pv = NULL;
        size_t pvn = 0;
        const char *lt = memchr(q, '<', (size_t)(end - q));
        if (!lt) {
            free(fname);
            json_decref(args);
            return err_set(e, ERR_INVALID, "qwen3-coder: tool call: missing </function>");
        }
        if ((size_t)(end - lt) >= 11 && memcmp(lt, "</function>", 11) == 0)
            break;
        const char *body = eq_tag(lt, end, "parameter", &pv, &pvn);
        if (!body) {
            q = lt + 1;  // other text inside the function element is ignored
            continue;
        }
        const char *close = rnd_find(body, (size_t)(end - body), "</parameter>");
        if (!close) {
            free(fname);
            json_decref(args);
            return err_set(e, ERR_INVALID, "qwen3-coder: tool call: missing </parameter>");
        }
        const char *vs = body, *ve = close;
        if (vs < ve && *vs == '\n')
            vs++;
        if (ve > vs && ve[-1] == '\n')
            ve--;
        char *pname = xstrndup(pv, pvn);
        char *value = xstrndup(vs, (size_t)(ve - vs));
        const char *types[32];
        size_t n_types;
        rnd_param_types(p->tools, fname, pname, types, &n_types, 32);
        json_object_set_new(args, pname, rnd_typed_value(value, types, n_types));
        free(pname);
        free(value);
        q = close + strlen("</parameter>");
    }
    rnd_call_append(p, calls, fname, args);
    free(fname);
    return 0;
}

int rnd_qwen3coder_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    (void)done;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        if (p->state == QC_LOOKING) {
            const char *t = rnd_find(a, n, TOOL_OPEN);
            if (!t) {
                rnd_emit_until_partial(p, TOOL_OPEN, NULL, o->content);
                return 0;
            }
            size_t before = (size_t)(t - a);
            buf_append(o->content, a, before - rnd_trailing_ws(a, before));
            rnd_buf_consume(&p->acc, before + strlen(TOOL_OPEN));
            p->state = QC_COLLECTING;
            continue;
        }
        const char *c = rnd_find(a, n, TOOL_CLOSE);
        if (!c)
            return 0;
        int rc = parse_call(p, a, (size_t)(c - a), o->calls, e);
        if (rc < 0)
            return rc;
        size_t after = (size_t)(c - a) + strlen(TOOL_CLOSE);
        after += rnd_leading_ws(a + after, n - after);
        rnd_buf_consume(&p->acc, after);
        p->state = QC_LOOKING;
    }
}

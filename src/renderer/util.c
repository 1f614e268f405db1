// Text helpers shared by the renderers and parsers: Go's notion of white
// space, partial-tag overlap, Go's JSON and %v formatting of decoded values,
// and tool-call objects.
#include "renderer/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rnd_str(const json_t *m, const char *key)
{
    const char *s = json_string_value(json_object_get(m, key));
    return s ? s : "";
}

json_t *rnd_tool_fn(const json_t *tool, const char *key)
{
    return json_object_get(json_object_get(tool, "function"), key);
}

json_t *rnd_call_fn(const json_t *call)
{
    return json_object_get(call, "function");
}

// Go's unicode.IsSpace.
static bool go_space(uint32_t r)
{
    switch (r) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
        return true;
    default:
        return r >= 0x2000 && r <= 0x200A;
    }
}

size_t rnd_leading_ws(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)s + i, n - i, &w);
        if (w == 0 || !go_space(r))
            break;
        i += w;
    }
    return i;
}

size_t rnd_trailing_ws(const char *s, size_t n)
{
    size_t end = n;
    while (end > 0) {
        // Start of the last rune: step back over continuation bytes (max 4).
        size_t st = end - 1;
        while (st > 0 && end - st < 4 && ((unsigned char)s[st] & 0xC0) == 0x80)
            st--;
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)s + st, end - st, &w);
        if (w != end - st || !go_space(r))
            break;
        end = st;
    }
    return n - end;
}

void rnd_trim(const char **s, size_t *n)
{
    size_t lead = rnd_leading_ws(*s, *n);
    *s += lead;
    *n -= lead;
    *n -= rnd_trailing_ws(*s, *n);
}

size_t rnd_overlap(const char *s, size_t n, const char *delim)
{
    size_t dl = strlen(delim);
    size_t max = dl < n ? dl : n;
    for (size_t i = max; i > 0; i--)
        if (memcmp(s + n - i, delim, i) == 0)
            return i;
    return 0;
}

const char *rnd_find(const char *s, size_t n, const char *needle)
{
    size_t nl = strlen(needle);
    if (!s || nl == 0 || nl > n)
        return NULL;
    return memmem(s, n, needle, nl);
}

void rnd_buf_consume(struct buf *b, size_t k)
{
    if (k >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + k, b->len - k);
    b->len -= k;
    b->data[b->len] = 0;
}

bool rnd_split_at(struct renderer_parser *p, const char *at, const char *tag, struct buf *to)
{
    const char *a = p->acc.data;
    size_t before = (size_t)(at - a);
    buf_append(to, a, before - rnd_trailing_ws(a, before));
    size_t after = before + strlen(tag);
    after += rnd_leading_ws(a + after, p->acc.len - after);
    rnd_buf_consume(&p->acc, after);
    return p->acc.len > 0;
}

int rnd_trim_lead(struct renderer_parser *p, bool *pending)
{
    const char *a = p->acc.data ? p->acc.data : "";
    rnd_buf_consume(&p->acc, rnd_leading_ws(a, p->acc.len));
    if (p->acc.len == 0)
        return 0;
    *pending = false;
    return 1;
}

int rnd_go_json(struct buf *out, const json_t *v)
{
    return jsonx_dump(v, JSONX_SORT_KEYS, out, NULL);
}

static int spaced(struct buf *out, const json_t *v, int flags)
{
    struct buf tmp;
    buf_init(&tmp, 0);
    int rc = jsonx_dump(v, flags, &tmp, NULL);
    bool in_str = false, esc = false;
    for (size_t i = 0; rc == 0 && i < tmp.len; i++) {
        char c = tmp.data[i];
        rc = buf_append_char(out, c);
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if ((c == ':' || c == ',') && rc == 0) {
            rc = buf_append_char(out, ' ');
        }
    }
    buf_deinit(&tmp);
    return rc;
}

int rnd_go_json_spaced(struct buf *out, const json_t *v)
{
    return spaced(out, v, JSONX_SORT_KEYS);
}

int rnd_go_json_spaced_ordered(struct buf *out, const json_t *v)
{
    return spaced(out, v, 0);
}

int rnd_go_json_spaced_unescaped(struct buf *out, const json_t *v, bool sort_keys)
{
    return spaced(out, v, JSONX_NO_HTML_ESCAPE | (sort_keys ? JSONX_SORT_KEYS : 0));
}

int rnd_go_value(struct buf *out, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return buf_append(out, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return buf_append_go_float(out, (double)json_integer_value(v));
    case JSON_REAL:
        return buf_append_go_float(out, json_real_value(v));
    case JSON_TRUE:
        return buf_append_str(out, "true");
    case JSON_FALSE:
        return buf_append_str(out, "false");
    case JSON_NULL:
        return buf_append_str(out, "<nil>");
    default:
        return rnd_go_json(out, v);
    }
}

void rnd_call_append(struct renderer_parser *p, json_t *calls, const char *name, json_t *args)
{
    json_array_append_new(calls, jsonx_tool_call(p->n_calls++, name, args ? args : json_object()));
}

void rnd_emit_until_partial(struct renderer_parser *p, const char *tag, const char *tag2,
                            struct buf *to)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    size_t ov = tag ? rnd_overlap(a, n, tag) : 0;
    size_t ov2 = tag2 ? rnd_overlap(a, n, tag2) : 0;
    if (ov2 > ov)
        ov = ov2;
    size_t before = n - ov;
    size_t keep_from = before - rnd_trailing_ws(a, before);
    if (keep_from > 0)
        buf_append(to, a, keep_from);
    rnd_buf_consume(&p->acc, keep_from);
}

// A copy whose objects have their keys in byte order (a Go map).
static json_t *sorted_copy(const json_t *v, int depth)
{
    if (json_is_array(v)) {
        json_t *a = json_array();
        for (size_t i = 0; i < json_array_size(v); i++)
            json_array_append_new(a, sorted_copy(json_array_get(v, i), depth + 1));
        return a;
    }
    if (!json_is_object(v) || depth > 64)
        return json_deep_copy(v);
    size_t n = json_object_size(v);
    const char **keys = xcalloc(n ? n : 1, sizeof(*keys));
    size_t k = 0;
    const char *key;
    json_t *x;
    json_object_foreach((json_t *)v, key, x) keys[k++] = key;
    for (size_t i = 1; i < n; i++)  // insertion sort: schemas are small
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, keys[i], sorted_copy(json_object_get(v, keys[i]), depth + 1));
    free(keys);
    return o;
}

static bool empty_value(const json_t *v)
{
    return !v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_string(v) && json_string_length(v) == 0);
}

// api.PropertyType: one type as a string, several as a list.
static json_t *go_type(const json_t *t)
{
    if (json_is_array(t) && json_array_size(t) == 1)
        return json_deep_copy(json_array_get(t, 0));
    return json_deep_copy(t);
}

static json_t *go_props(const json_t *props, int depth);

// api.ToolProperty in its field order with omitempty.
static json_t *go_prop(const json_t *p, int depth)
{
    json_t *o = json_object();
    json_t *any = json_object_get(p, "anyOf");
    if (json_is_array(any) && json_array_size(any) && depth < 32) {
        json_t *a = json_array();
        for (size_t i = 0; i < json_array_size(any); i++)
            json_array_append_new(a, go_prop(json_array_get(any, i), depth + 1));
        json_object_set_new(o, "anyOf", a);
    }
    json_t *t = json_object_get(p, "type");
    if (!empty_value(t))
        json_object_set_new(o, "type", go_type(t));
    if (!empty_value(json_object_get(p, "items")))
        json_object_set_new(o, "items", sorted_copy(json_object_get(p, "items"), 0));
    if (!empty_value(json_object_get(p, "description")))
        json_object_set(o, "description", json_object_get(p, "description"));
    if (!empty_value(json_object_get(p, "enum")))
        json_object_set_new(o, "enum", sorted_copy(json_object_get(p, "enum"), 0));
    json_t *props = json_object_get(p, "properties");
    if (json_is_object(props) && depth < 32)
        json_object_set_new(o, "properties", go_props(props, depth + 1));
    if (!empty_value(json_object_get(p, "required")))
        json_object_set(o, "required", json_object_get(p, "required"));
    return o;
}

static json_t *go_props(const json_t *props, int depth)
{
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) json_object_set_new(o, k, go_prop(v, depth));
    return o;
}

json_t *rnd_go_tool(const json_t *tool)
{
    json_t *o = json_object();
    json_t *t = json_object_get(tool, "type");
    json_object_set_new(o, "type", json_string(json_is_string(t) ? json_string_value(t) : ""));
    if (!empty_value(json_object_get(tool, "items")))
        json_object_set_new(o, "items", sorted_copy(json_object_get(tool, "items"), 0));
    json_t *fn = json_object_get(tool, "function");
    json_t *f = json_object();
    json_object_set_new(f, "name", json_string(rnd_str(fn, "name")));
    if (*rnd_str(fn, "description"))
        json_object_set_new(f, "description", json_string(rnd_str(fn, "description")));
    json_t *params = json_object_get(fn, "parameters");
    json_t *p = json_object();
    json_object_set_new(p, "type", json_string(rnd_str(params, "type")));
    if (!empty_value(json_object_get(params, "$defs")))
        json_object_set_new(p, "$defs", sorted_copy(json_object_get(params, "$defs"), 0));
    if (!empty_value(json_object_get(params, "items")))
        json_object_set_new(p, "items", sorted_copy(json_object_get(params, "items"), 0));
    if (!empty_value(json_object_get(params, "required")))
        json_object_set(p, "required", json_object_get(params, "required"));
    json_t *props = json_object_get(params, "properties");
    json_object_set_new(p, "properties", json_is_object(props) ? go_props(props, 0) : json_null());
    json_object_set_new(f, "parameters", p);
    json_object_set_new(o, "function", f);
    return o;
}

int rnd_go_tool_json(struct buf *out, const json_t *tool, bool spaced)
{
    json_t *t = rnd_go_tool(tool);
    int rc;
    if (spaced) {
        rc = rnd_go_json_spaced_ordered(out, t);
    } else {
        rc = jsonx_dump(t, 0, out, NULL);
    }
    json_decref(t);
    return rc;
}

size_t rnd_image_tags(struct buf *out, const char *content, size_t n_images, size_t offset)
{
    if (n_images == 0 || strstr(content, "[img-")) {
        buf_append_str(out, content);
        return offset + n_images;
    }
    struct buf prefix, body;
    buf_init(&prefix, 0);
    buf_init(&body, 0);
    buf_append_str(&body, content);
    for (size_t i = 0; i < n_images; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "[img-%zu]", offset + i);
        const char *at = rnd_find(body.data, body.len, "[img]");
        if (at) {
            size_t pos = (size_t)(at - body.data);
            struct buf nb;
            buf_init(&nb, 0);
            buf_append(&nb, body.data, pos);
            buf_append_str(&nb, tag);
            buf_append_str(&nb, body.data + pos + 5);
            buf_deinit(&body);
            body = nb;
        } else {
            buf_append_str(&prefix, tag);
        }
    }
    if (prefix.len && body.len) {
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)body.data, body.len, &w);
        if (r != UTF8_INVALID && !go_space(r))
            buf_append_char(&prefix, ' ');
    }
    buf_append(out, prefix.data ? prefix.data : "", prefix.len);
    buf_append(out, body.data ? body.data : "", body.len);
    buf_deinit(&prefix);
    buf_deinit(&body);
    return offset + n_images;
}

int rnd_go_args_json(struct buf *out, const json_t *args)
{
    if (!json_is_object(args))
        return buf_append_str(out, "{}");
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)args, k, v) json_object_set_new(o, k, sorted_copy(v, 1));
    int rc = jsonx_dump(o, 0, out, NULL);
    json_decref(o);
    return rc;
}

int rnd_go_json_indent(struct buf *out, const json_t *v, const char *indent)
{
    struct buf c;
    buf_init(&c, 0);
    int rc = jsonx_dump(v, 0, &c, NULL);
    int depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; rc == 0 && i < c.len; i++) {
        char ch = c.data[i];
        if (in_str) {
            buf_append_char(out, ch);
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
            continue;
        }
        switch (ch) {
        case '"':
            in_str = true;
            buf_append_char(out, ch);
            break;
        case '{':
        case '[':
            buf_append_char(out, ch);
            // Empty objects and arrays stay "{}" / "[]".
            if (i + 1 < c.len && (c.data[i + 1] == '}' || c.data[i + 1] == ']')) {
                buf_append_char(out, c.data[++i]);
                break;
            }
            depth++;
            buf_append_char(out, '\n');
            for (int d = 0; d < depth; d++)
                buf_append_str(out, indent);
            break;
        case '}':
        case ']':
            depth--;
            buf_append_char(out, '\n');
            for (int d = 0; d < depth; d++)
                buf_append_str(out, indent);
            buf_append_char(out, ch);
            break;
        case ',':
            buf_append_char(out, ',');
            buf_append_char(out, '\n');
            for (int d = 0; d < depth; d++)
                buf_append_str(out, indent);
            break;
        case ':':
            buf_append_str(out, ": ");
            break;
        default:
            buf_append_char(out, ch);
        }
    }
    buf_deinit(&c);
    return rc;
}

void rnd_glm_tool_call(struct buf *out, json_t *call, const char *open)
{
    json_t *fn = rnd_call_fn(call);
    buf_printf(out, "%s%s", open, rnd_str(fn, "name"));
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(fn, "arguments"), key, v)
    {
        buf_printf(out, "<arg_key>%s</arg_key><arg_value>", key);
        if (json_is_string(v))
            buf_append(out, json_string_value(v), json_string_length(v));
        else
            rnd_go_json(out, v);
        buf_append_str(out, "</arg_value>");
    }
    buf_append_str(out, "</tool_call>");
}

void rnd_glm_tools(struct buf *out, json_t *tools)
{
    buf_append_str(out, "<|system|>\n# Tools\n\nYou may call one or more functions to assist "
                        "with the user query.\n\nYou are provided with function signatures "
                        "within <tools></tools> XML tags:\n<tools>\n");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        rnd_go_tool_json(out, tool, true);
        buf_append_char(out, '\n');
    }
    buf_append_str(out, "</tools>\n\nFor each function call, output the function name and "
                        "arguments within the following XML format:\n<tool_call>"
                        "{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}"
                        "</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}"
                        "</arg_value>...</tool_call>");
}

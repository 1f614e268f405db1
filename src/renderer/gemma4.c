// gemma4, gemma4-small and gemma4-large (Ollama's model/renderers/gemma4.go):
// Google's Gemma 4 chat format.
//
//   <bos><|turn>system\n<|think|>\nSYSTEM<|tool>declaration:NAME{…}<tool|><turn|>\n
//   <|turn>user\nTEXT<turn|>\n
//   <|turn>model\n<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
//   <|tool_response>response:NAME{value:<|"|>RESULT<|"|>}<tool_response|>TEXT<turn|>\n
//
// Strings in declarations, calls and results sit between <|"|> delimiters
// and are never escaped; keys are bare. Tool results fold into the model
// turn that made the calls, and adjacent assistant messages continue one
// model turn. Thinking is a <|channel>thought\n…<channel|> block. The large
// variant (26b/31b templates) opens an empty thought block when thinking is
// off.
#include "renderer/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#define G4_Q          "<|\"|>"
#define G4_BOS        "<bos>"
#define G4_TURN       "<|turn>"
#define G4_TURN_END   "<turn|>\n"
#define G4_THINK      "<|think|>\n"
#define G4_CH_OPEN    "<|channel>"
#define G4_CH_CLOSE   "<channel|>"
#define G4_CALL_OPEN  "<|tool_call>"
#define G4_CALL_CLOSE "<tool_call|>"
#define G4_RESP_OPEN  "<|tool_response>"
#define G4_RESP_CLOSE "<tool_response|>"

// Renderer variants (the table's variant column).
enum { G4_SMALL = 0, G4_LARGE = 1 };

static bool think_on(const struct renderer_think *think)
{
    return think && think->set && think->on;
}

static bool role_is(const json_t *m, const char *role)
{
    return strcmp(rnd_str(m, "role"), role) == 0;
}

// strings.TrimSpace (Go's white space) into out.
static void trim_into(struct buf *out, const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    buf_append(out, s + lead, n - lead - rnd_trailing_ws(s + lead, n - lead));
}

// strings.ToUpper.
static void upper_into(struct buf *out, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)s + i, n - i, &w);
        if (r == UTF8_INVALID) {
            buf_append(out, s + i, 1);
            i++;
            continue;
        }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t el = utf8proc_encode_char(utf8proc_toupper((utf8proc_int32_t)r), enc);
        buf_append(out, (const char *)enc, (size_t)el);
        i += w;
    }
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The keys of an object in byte order (a Go map ranged over sorted keys);
// caller frees the array, the keys are borrowed.
static const char **sorted_keys(json_t *o, size_t *n)
{
    *n = json_object_size(o);
    const char **keys = xcalloc(*n ? *n : 1, sizeof(*keys));
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) keys[k++] = key;
    qsort(keys, *n, sizeof(*keys), cmp_key);
    return keys;
}

// ---------------------------------------------------------------------------
// Values in calls and declarations

// A decoded number is a float64: integral values print as integers, the
// rest as fmt's %v.
static void number_into(struct buf *out, const json_t *v)
{
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == trunc(d)) {
        buf_printf(out, "%lld", (long long)d);
        return;
    }
    json_t *r = json_real(d);
    rnd_go_value(out, r);
    json_decref(r);
}

// formatArgValue (bare keys) and formatSchemaValue (keys in <|"|>): strings
// delimited, objects with sorted keys.
static void value_into(struct buf *out, const json_t *v, bool quote_keys)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        buf_append_str(out, "null");
        break;
    case JSON_STRING:
        buf_append_str(out, G4_Q);
        buf_append(out, json_string_value(v), json_string_length(v));
        buf_append_str(out, G4_Q);
        break;
    case JSON_TRUE:
        buf_append_str(out, "true");
        break;
    case JSON_FALSE:
        buf_append_str(out, "false");
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        number_into(out, v);
        break;
    case JSON_OBJECT: {
        size_t n;
        const char **keys = sorted_keys((json_t *)v, &n);
        buf_append_char(out, '{');
        for (size_t i = 0; i < n; i++) {
            if (i)
                buf_append_char(out, ',');
            if (quote_keys)
                buf_printf(out, G4_Q "%s" G4_Q ":", keys[i]);
            else
                buf_printf(out, "%s:", keys[i]);
            value_into(out, json_object_get(v, keys[i]), quote_keys);
        }
        buf_append_char(out, '}');
        free(keys);
        break;
    }
    case JSON_ARRAY: {
        buf_append_char(out, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                buf_append_char(out, ',');
            value_into(out, json_array_get(v, i), quote_keys);
        }
        buf_append_char(out, ']');
        break;
    }
    }
}

// ---------------------------------------------------------------------------
// Tool declarations

// A property's declared types (api.PropertyType: one string or a list),
// borrowed; at most max.
static size_t prop_types(const json_t *t, const char **types, size_t max)
{
    size_t n = 0;
    if (json_is_string(t)) {
        types[n++] = json_string_value(t);
    } else if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t) && n < max; i++)
            if (json_is_string(json_array_get(t, i)))
                types[n++] = json_string_value(json_array_get(t, i));
    }
    return n;
}

static bool nonempty_array(const json_t *v)
{
    return json_is_array(v) && json_array_size(v) > 0;
}

// An anyOf branch that holds only a type (the fields of api.ToolProperty).
static bool bare_type_only(const json_t *p)
{
    const char *types[1];
    const json_t *items = json_object_get(p, "items");
    const json_t *props = json_object_get(p, "properties");
    return !nonempty_array(json_object_get(p, "anyOf")) &&
           prop_types(json_object_get(p, "type"), types, 1) > 0 &&
           (!items || json_is_null(items)) && *rnd_str(p, "description") == 0 &&
           !nonempty_array(json_object_get(p, "enum")) && !json_is_object(props) &&
           !nonempty_array(json_object_get(p, "required"));
}

#define G4_MAX_TYPES 32

// The type a top-level property shows: its one type as given, or a union
// written as the template stringifies a list ("['STRING', 'NULL']"). A
// simple anyOf of bare types counts as that union. NULL when it has none.
static json_t *typed_type(const json_t *p)
{
    const char *types[G4_MAX_TYPES];
    size_t n = prop_types(json_object_get(p, "type"), types, G4_MAX_TYPES);
    json_t *any = json_object_get(p, "anyOf");
    if (n == 0 && nonempty_array(any)) {
        for (size_t i = 0; i < json_array_size(any); i++) {
            const json_t *b = json_array_get(any, i);
            if (!bare_type_only(b))
                return NULL;
            const char *bt[G4_MAX_TYPES];
            size_t bn = prop_types(json_object_get(b, "type"), bt, G4_MAX_TYPES);
            for (size_t j = 0; j < bn; j++) {
                bool seen = false;
                for (size_t k = 0; k < n && !seen; k++)
                    seen = strcmp(types[k], bt[j]) == 0;
                if (!seen && n < G4_MAX_TYPES)
                    types[n++] = bt[j];
            }
        }
    }
    if (n == 0)
        return NULL;
    if (n == 1)
        return json_string(types[0]);
    struct buf b;
    buf_init(&b, 0);
    buf_append_char(&b, '[');
    for (size_t i = 0; i < n; i++) {
        buf_append_str(&b, i ? ", '" : "'");
        upper_into(&b, types[i]);
        buf_append_char(&b, '\'');
    }
    buf_append_char(&b, ']');
    json_t *s = json_stringn(buf_cstr(&b), b.len);
    buf_deinit(&b);
    return s ? s : json_string("");
}

static json_t *typed_props(const json_t *props);

// A top-level property (api.ToolProperty) as the schema map the writer
// reads: its typed type, description, enum, items, typed nested properties
// and required list. Other keys of the request are not part of the type.
static json_t *typed_prop(const json_t *p)
{
    json_t *o = json_object();
    json_t *t = typed_type(p);
    if (t)
        json_object_set_new(o, "type", t);
    if (*rnd_str(p, "description"))
        json_object_set(o, "description", json_object_get(p, "description"));
    if (nonempty_array(json_object_get(p, "enum")))
        json_object_set(o, "enum", json_object_get(p, "enum"));
    json_t *items = json_object_get(p, "items");
    if (items && !json_is_null(items))
        json_object_set(o, "items", items);
    json_t *props = json_object_get(p, "properties");
    if (json_is_object(props))
        json_object_set_new(o, "properties", typed_props(props));
    if (nonempty_array(json_object_get(p, "required")))
        json_object_set(o, "required", json_object_get(p, "required"));
    return o;
}

static json_t *typed_props(const json_t *props)
{
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) json_object_set_new(o, k, typed_prop(v));
    return o;
}

// Upper-cased type names of a schema "type" (a string or a list).
static size_t type_names(const json_t *t, struct buf *names, size_t max)
{
    const char *types[G4_MAX_TYPES];
    size_t n = prop_types(t, types, max < G4_MAX_TYPES ? max : G4_MAX_TYPES);
    for (size_t i = 0; i < n; i++) {
        buf_init(&names[i], 0);
        upper_into(&names[i], types[i]);
    }
    return n;
}

static void names_deinit(struct buf *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf_deinit(&names[i]);
}

static void type_into(struct buf *out, struct buf *names, size_t n)
{
    if (n == 1) {
        buf_printf(out, "type:" G4_Q "%s" G4_Q, buf_cstr(&names[0]));
    } else if (n > 1) {
        buf_append_str(out, "type:[");
        for (size_t i = 0; i < n; i++)
            buf_printf(out, "%s" G4_Q "%s" G4_Q, i ? "," : "", buf_cstr(&names[i]));
        buf_append_char(out, ']');
    }
}

// required:[<|"|>a<|"|>,…] of the string elements.
static void required_into(struct buf *out, const json_t *req)
{
    buf_append_str(out, "required:[");
    bool first = true;
    for (size_t i = 0; i < json_array_size(req); i++) {
        const json_t *r = json_array_get(req, i);
        if (!json_is_string(r))
            continue;
        buf_printf(out, "%s" G4_Q "%s" G4_Q, first ? "" : ",", json_string_value(r));
        first = false;
    }
    buf_append_char(out, ']');
}

static size_t string_count(const json_t *a)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        n += json_is_string(json_array_get(a, i));
    return n;
}

static bool schema_key(const char *k)
{
    return !strcmp(k, "description") || !strcmp(k, "type") || !strcmp(k, "properties") ||
           !strcmp(k, "required") || !strcmp(k, "nullable");
}

// A separator before the next field of an object being written.
static void sep(struct buf *out, bool *comma)
{
    if (*comma)
        buf_append_char(out, ',');
    *comma = true;
}

static void write_items(struct buf *out, json_t *items, int depth);

// writeSchemaProperties: each property (sorted; schema keywords and
// non-objects skipped) as name:{description,enum|items,nullable,
// properties,required,type}.
static void write_props(struct buf *out, json_t *props, int depth)
{
    if (depth > 64)
        return;
    size_t n;
    const char **keys = sorted_keys(props, &n);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object_get(props, keys[i]);
        if (schema_key(keys[i]) || !json_is_object(p))
            continue;
        if (!first)
            buf_append_char(out, ',');
        first = false;
        buf_printf(out, "%s:{", keys[i]);
        bool comma = false;
        const char *desc = rnd_str(p, "description");
        if (*desc) {
            buf_printf(out, "description:" G4_Q "%s" G4_Q, desc);
            comma = true;
        }
        struct buf names[G4_MAX_TYPES];
        size_t nt = type_names(json_object_get(p, "type"), names, G4_MAX_TYPES);
        const char *type = nt ? buf_cstr(&names[0]) : "";
        if (!strcmp(type, "STRING")) {
            json_t *en = json_object_get(p, "enum");
            if (nonempty_array(en)) {
                sep(out, &comma);
                buf_append_str(out, "enum:[");
                for (size_t j = 0; j < json_array_size(en); j++) {
                    buf_append_str(out, j ? "," G4_Q : G4_Q);
                    rnd_go_value(out, json_array_get(en, j));
                    buf_append_str(out, G4_Q);
                }
                buf_append_char(out, ']');
            }
        } else if (!strcmp(type, "ARRAY")) {
            json_t *items = json_object_get(p, "items");
            if (json_is_object(items) && json_object_size(items) > 0) {
                sep(out, &comma);
                buf_append_str(out, "items:{");
                write_items(out, items, depth + 1);
                buf_append_char(out, '}');
            }
        }
        if (json_is_true(json_object_get(p, "nullable"))) {
            sep(out, &comma);
            buf_append_str(out, "nullable:true");
        }
        if (!strcmp(type, "OBJECT")) {
            json_t *nested = json_object_get(p, "properties");
            sep(out, &comma);
            buf_append_str(out, "properties:{");
            // Without a properties object the template walks the property
            // itself.
            write_props(out, json_is_object(nested) ? nested : p, depth + 1);
            buf_append_char(out, '}');
            json_t *req = json_object_get(p, "required");
            if (string_count(req) > 0) {
                sep(out, &comma);
                required_into(out, req);
            }
        }
        if (nt > 0) {
            if (comma)
                buf_append_char(out, ',');
            type_into(out, names, nt);
        }
        names_deinit(names, nt);
        buf_append_char(out, '}');
    }
    free(keys);
}

// writeSchemaItemsSpec: an array's items schema, keys sorted, null values
// skipped.
static void write_items(struct buf *out, json_t *items, int depth)
{
    size_t n;
    const char **keys = sorted_keys(items, &n);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(items, keys[i]);
        if (json_is_null(v))
            continue;
        if (!first)
            buf_append_char(out, ',');
        first = false;
        if (!strcmp(keys[i], "properties")) {
            buf_append_str(out, "properties:{");
            if (json_is_object(v))
                write_props(out, v, depth + 1);
            buf_append_char(out, '}');
        } else if (!strcmp(keys[i], "required")) {
            required_into(out, v);
        } else if (!strcmp(keys[i], "type")) {
            struct buf names[G4_MAX_TYPES];
            size_t nt = type_names(v, names, G4_MAX_TYPES);
            type_into(out, names, nt);
            names_deinit(names, nt);
        } else {
            buf_printf(out, "%s:", keys[i]);
            value_into(out, v, true);
        }
    }
    free(keys);
}

static void write_declaration(struct buf *out, const json_t *tool)
{
    json_t *fn = json_object_get(tool, "function");
    json_t *params = json_object_get(fn, "parameters");
    json_t *props = json_object_get(params, "properties");
    const char *type = rnd_str(params, "type");
    buf_printf(out, "<|tool>declaration:%s{description:" G4_Q "%s" G4_Q, rnd_str(fn, "name"),
               rnd_str(fn, "description"));
    if (json_is_object(props) || *type) {
        buf_append_str(out, ",parameters:{");
        bool comma = false;
        if (json_object_size(props) > 0) {
            json_t *typed = typed_props(props);
            buf_append_str(out, "properties:{");
            write_props(out, typed, 0);
            buf_append_char(out, '}');
            json_decref(typed);
            comma = true;
        }
        json_t *req = json_object_get(params, "required");
        if (string_count(req) > 0) {
            sep(out, &comma);
            required_into(out, req);
        }
        if (*type) {
            sep(out, &comma);
            buf_append_str(out, "type:" G4_Q);
            upper_into(out, type);
            buf_append_str(out, G4_Q);
        }
        buf_append_char(out, '}');
    }
    buf_append_str(out, "}<tool|>");
}

// ---------------------------------------------------------------------------
// Renderer

// strip_thinking: <|channel>…<channel|> blocks removed (an unclosed one
// drops the rest), trimmed.
static char *strip_thinking(const char *s)
{
    struct buf b;
    buf_init(&b, 0);
    size_t n = strlen(s);
    for (;;) {
        const char *open = rnd_find(s, n, G4_CH_OPEN);
        if (!open) {
            buf_append(&b, s, n);
            break;
        }
        buf_append(&b, s, (size_t)(open - s));
        size_t rest = n - (size_t)(open - s);
        const char *close = rnd_find(open, rest, G4_CH_CLOSE);
        if (!close)
            break;
        const char *after = close + strlen(G4_CH_CLOSE);
        n -= (size_t)(after - s);
        s = after;
    }
    struct buf t;
    buf_init(&t, 0);
    trim_into(&t, b.data ? b.data : "", b.len);
    buf_deinit(&b);
    return buf_take(&t);
}

static void format_call(struct buf *out, const json_t *call)
{
    json_t *fn = rnd_call_fn(call);
    json_t *args = json_object_get(fn, "arguments");
    buf_printf(out, G4_CALL_OPEN "call:%s{", rnd_str(fn, "name"));
    if (json_is_object(args)) {
        size_t n;
        const char **keys = sorted_keys(args, &n);
        for (size_t i = 0; i < n; i++) {
            buf_printf(out, "%s%s:", i ? "," : "", keys[i]);
            value_into(out, json_object_get(args, keys[i]), false);
        }
        free(keys);
    }
    buf_append_str(out, "}" G4_CALL_CLOSE);
}

// The name a tool result answers to: its tool_name ("unknown" without one),
// or the name of the call its tool_call_id points at.
static const char *response_name(const json_t *m, const json_t *calls)
{
    const char *name = *rnd_str(m, "tool_name") ? rnd_str(m, "tool_name") : "unknown";
    const char *id = rnd_str(m, "tool_call_id");
    if (*id) {
        for (size_t i = 0; i < json_array_size(calls); i++) {
            const json_t *c = json_array_get(calls, i);
            if (strcmp(rnd_str(c, "id"), id) == 0)
                return rnd_str(rnd_call_fn(c), "name");
        }
    }
    return name;
}

static size_t n_images(const json_t *m)
{
    return json_array_size(json_object_get(m, "images"));
}

static const char *next_non_tool_role(json_t *msgs, size_t i)
{
    for (size_t k = i + 1; k < json_array_size(msgs); k++)
        if (!role_is(json_array_get(msgs, k), "tool"))
            return rnd_str(json_array_get(msgs, k), "role");
    return "";
}

// What the last non-tool message ended with.
enum { G4_PREV_NONE, G4_PREV_CALL, G4_PREV_RESPONSE };

int rnd_render_gemma4(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e)
{
    (void)e;
    size_t n = json_array_size(msgs), start = 0, img = 0;
    bool thinking = think_on(think);
    buf_append_str(out, G4_BOS);
    json_t *first = json_array_get(msgs, 0);
    bool has_system = n > 0 && (role_is(first, "system") || role_is(first, "developer"));
    if (has_system)
        start = 1;
    if (has_system || json_array_size(tools) > 0 || thinking) {
        buf_append_str(out, G4_TURN "system\n");
        if (thinking)
            buf_append_str(out, G4_THINK);
        if (has_system) {
            const char *sys = rnd_str(first, "content");
            trim_into(out, sys, strlen(sys));
        }
        for (size_t i = 0; i < json_array_size(tools); i++)
            write_declaration(out, json_array_get(tools, i));
        buf_append_str(out, G4_TURN_END);
    }

    long last_user = -1;
    for (size_t i = start; i < n; i++)
        if (role_is(json_array_get(msgs, i), "user"))
            last_user = (long)i;

    int prev = G4_PREV_NONE;
    const char *prev_role = "";
    for (size_t i = start; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (role_is(m, "tool"))
            continue;
        prev = G4_PREV_NONE;
        const char *mrole = rnd_str(m, "role");
        bool assistant = strcmp(mrole, "assistant") == 0;
        const char *role = assistant ? "model" : mrole;
        bool model = strcmp(role, "model") == 0;
        if (!(model && strcmp(prev_role, "assistant") == 0))
            buf_printf(out, G4_TURN "%s\n", role);
        const char *th = rnd_str(m, "thinking");
        if (assistant && *th && (long)i > last_user)
            buf_printf(out, G4_CH_OPEN "thought\n%s\n" G4_CH_CLOSE, th);

        json_t *calls = json_object_get(m, "tool_calls");
        size_t nc = json_array_size(calls);
        for (size_t k = 0; k < nc; k++)
            format_call(out, json_array_get(calls, k));
        if (nc)
            prev = G4_PREV_CALL;
        bool responses = false;
        for (size_t k = i + 1; nc && k < n && role_is(json_array_get(msgs, k), "tool"); k++) {
            json_t *t = json_array_get(msgs, k);
            buf_printf(out, G4_RESP_OPEN "response:%s{value:" G4_Q, response_name(t, calls));
            img = rnd_image_tags(out, rnd_str(t, "content"), n_images(t), img);
            buf_append_str(out, G4_Q "}" G4_RESP_CLOSE);
            responses = true;
            prev = G4_PREV_RESPONSE;
        }

        bool had_content = false;
        const char *content = rnd_str(m, "content");
        if (model) {
            if (*content || n_images(m)) {
                char *stripped = strip_thinking(content);
                img = rnd_image_tags(out, stripped, n_images(m), img);
                had_content = *stripped || n_images(m);
                free(stripped);
            }
        } else {
            struct buf t;
            buf_init(&t, 0);
            trim_into(&t, content, strlen(content));
            img = rnd_image_tags(out, buf_cstr(&t), n_images(m), img);
            had_content = t.len || n_images(m);
            buf_deinit(&t);
        }

        const char *next = next_non_tool_role(msgs, i);
        bool continues = model && strcmp(next, "assistant") == 0 && (nc == 0 || responses);
        if (prev == G4_PREV_CALL && !responses)
            buf_append_str(out, G4_RESP_OPEN);
        else if (!continues && !(responses && !had_content && *next == 0))
            buf_append_str(out, G4_TURN_END);
        prev_role = mrole;
    }

    if (prev == G4_PREV_NONE) {
        buf_append_str(out, G4_TURN "model\n");
        if (variant == G4_LARGE && !thinking)
            buf_append_str(out, G4_CH_OPEN "thought\n" G4_CH_CLOSE);
    } else if (prev == G4_PREV_RESPONSE && thinking) {
        buf_append_str(out, G4_CH_OPEN "thought\n");
    }
    return 0;
}

// gemma4, gemma4-small and gemma4-large (Ollama's model/renderers/gemma4.go),
// and the gemma4 / gemma4-no-thinking parsers (model/parsers/gemma4.go):
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
//
// The parser reads the same markers back: thinking blocks, content, and
// calls whose arguments are turned into JSON (bare keys quoted, <|"|>
// strings made JSON strings) with a few schema-guided repairs for calls the
// model leaves malformed. Two choices differ from Ollama's Go: a call that
// still cannot be read is ERR_INVALID (Ollama logs and drops it), and in a
// piece holding both a call and a channel opener the first one wins
// (Ollama looks for the channel first wherever it is).
#include "renderer/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
#define G4_THOUGHT    "thought\n"

#define G4_Q_LEN (sizeof(G4_Q) - 1)

// Renderer variants (the table's variant column).
enum { G4_SMALL = 0, G4_LARGE = 1 };
// Parser variants: whether the model family can think.
enum { G4_PLAIN = 0, G4_THINKER = 1 };

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
    rnd_trim(&s, &n);
    buf_append(out, s, n);
}

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
    size_t pl = strlen(prefix);
    return n >= pl && memcmp(s, prefix, pl) == 0;
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
        buf_append_utf8(out, utf8_toupper(r));
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

// Where the rendering of the conversation stands.
struct g4_render {
    json_t *msgs;
    size_t n;
    long last_user;         // index of the last user message, -1 without one
    size_t img;             // the next image's number
    int prev;               // G4_PREV_*
    const char *prev_role;  // the previous non-tool message's role
};

// The system turn: the thinking switch, the system prompt and the tools'
// declarations, when there is any of them.
static void write_system(struct buf *out, const json_t *first, bool has_system, json_t *tools,
                         bool thinking)
{
    if (!has_system && json_array_size(tools) == 0 && !thinking)
        return;
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

// The tool results that follow message i answer its calls inside its turn.
// Returns whether there were any.
static bool write_responses(struct buf *out, struct g4_render *r, size_t i, const json_t *calls)
{
    bool responses = false;
    for (size_t k = i + 1; k < r->n && role_is(json_array_get(r->msgs, k), "tool"); k++) {
        json_t *t = json_array_get(r->msgs, k);
        buf_printf(out, G4_RESP_OPEN "response:%s{value:" G4_Q, response_name(t, calls));
        r->img = rnd_image_tags(out, rnd_str(t, "content"), n_images(t), r->img);
        buf_append_str(out, G4_Q "}" G4_RESP_CLOSE);
        responses = true;
        r->prev = G4_PREV_RESPONSE;
    }
    return responses;
}

// A message's content with its images: the model's without its thinking,
// anyone else's trimmed. Returns whether anything was written.
static bool write_content(struct buf *out, struct g4_render *r, const json_t *m, bool model)
{
    bool had_content = false;
    const char *content = rnd_str(m, "content");
    if (model) {
        if (*content || n_images(m)) {
            char *stripped = strip_thinking(content);
            r->img = rnd_image_tags(out, stripped, n_images(m), r->img);
            had_content = *stripped || n_images(m);
            free(stripped);
        }
    } else {
        struct buf t;
        buf_init(&t, 0);
        trim_into(&t, content, strlen(content));
        r->img = rnd_image_tags(out, buf_cstr(&t), n_images(m), r->img);
        had_content = t.len || n_images(m);
        buf_deinit(&t);
    }
    return had_content;
}

// One non-tool message i, with the tool results that answer its calls.
static void write_message(struct buf *out, struct g4_render *r, size_t i)
{
    json_t *m = json_array_get(r->msgs, i);
    r->prev = G4_PREV_NONE;
    const char *mrole = rnd_str(m, "role");
    bool assistant = strcmp(mrole, "assistant") == 0;
    const char *role = assistant ? "model" : mrole;
    bool model = strcmp(role, "model") == 0;
    // Consecutive assistant messages share one model turn.
    if (!(model && strcmp(r->prev_role, "assistant") == 0))
        buf_printf(out, G4_TURN "%s\n", role);
    const char *th = rnd_str(m, "thinking");
    if (assistant && *th && (long)i > r->last_user)
        buf_printf(out, G4_CH_OPEN "thought\n%s\n" G4_CH_CLOSE, th);

    json_t *calls = json_object_get(m, "tool_calls");
    size_t nc = json_array_size(calls);
    for (size_t k = 0; k < nc; k++)
        format_call(out, json_array_get(calls, k));
    if (nc)
        r->prev = G4_PREV_CALL;
    bool responses = nc && write_responses(out, r, i, calls);
    bool had_content = write_content(out, r, m, model);

    const char *next = next_non_tool_role(r->msgs, i);
    bool continues = model && strcmp(next, "assistant") == 0 && (nc == 0 || responses);
    if (r->prev == G4_PREV_CALL && !responses)
        buf_append_str(out, G4_RESP_OPEN);
    else if (!continues && !(responses && !had_content && *next == 0))
        buf_append_str(out, G4_TURN_END);
    r->prev_role = mrole;
}

int rnd_render_gemma4(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e)
{
    (void)e;
    size_t n = json_array_size(msgs), start = 0;
    bool thinking = think_on(think);
    buf_append_str(out, G4_BOS);
    json_t *first = json_array_get(msgs, 0);
    bool has_system = n > 0 && (role_is(first, "system") || role_is(first, "developer"));
    if (has_system)
        start = 1;
    write_system(out, first, has_system, tools, thinking);

    struct g4_render r = {
        .msgs = msgs, .n = n, .last_user = -1, .prev = G4_PREV_NONE, .prev_role = ""};
    for (size_t i = start; i < n; i++)
        if (role_is(json_array_get(msgs, i), "user"))
            r.last_user = (long)i;
    for (size_t i = start; i < n; i++)
        if (!role_is(json_array_get(msgs, i), "tool"))
            write_message(out, &r, i);

    if (r.prev == G4_PREV_NONE) {
        buf_append_str(out, G4_TURN "model\n");
        if (variant == G4_LARGE && !thinking)
            buf_append_str(out, G4_CH_OPEN "thought\n" G4_CH_CLOSE);
    } else if (r.prev == G4_PREV_RESPONSE && thinking) {
        buf_append_str(out, G4_CH_OPEN "thought\n");
    }
    return 0;
}

// Ollama's renderer_resolution.go: the model's name first, then its size.
const char *rnd_gemma4_resolve(const char *model_name, const char *model_type)
{
    static const char *const small[] = {"e2b", "e4b"}, *const large[] = {"12b", "26b", "31b"};
    char *lower = xstrdup(model_name ? model_name : "");
    for (char *c = lower; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    const char *pick = NULL;
    for (size_t i = 0; !pick && i < sizeof(small) / sizeof(small[0]); i++)
        if (strstr(lower, small[i]))
            pick = "gemma4-small";
    for (size_t i = 0; !pick && i < sizeof(large) / sizeof(large[0]); i++)
        if (strstr(lower, large[i]))
            pick = "gemma4-large";
    free(lower);
    if (pick)
        return pick;
    // A human parameter count: "4.3B", "25.2B", "800M".
    size_t n = model_type ? strlen(model_type) : 0;
    if (n < 2)
        return "gemma4-small";
    double unit;
    switch (model_type[n - 1]) {
    case 'B':
    case 'b':
        unit = 1e9;
        break;
    case 'M':
    case 'm':
        unit = 1e6;
        break;
    case 'K':
    case 'k':
        unit = 1e3;
        break;
    default:
        return "gemma4-small";
    }
    char *num = xstrndup(model_type, n - 1);
    double v = 0;
    int rc = str_to_double(num, &v, NULL);
    free(num);
    return rc == 0 && v * unit >= 12e9 ? "gemma4-large" : "gemma4-small";
}

// ---------------------------------------------------------------------------
// Tool call arguments: Gemma's notation to JSON

static size_t skip_space(const char *s, size_t n, size_t i)
{
    return i + rnd_leading_ws(s + i, n - i);
}

// Index past the end of s[0..n) without trailing white space.
static size_t trim_right_index(const char *s, size_t n)
{
    return n - rnd_trailing_ws(s, n);
}

// A bare key's end: letters, digits and '_' (Go's unicode classes).
static size_t bare_key_end(const char *s, size_t n, size_t i)
{
    while (i < n) {
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)s + i, n - i, &w);
        if (r == UTF8_INVALID)
            break;
        if (r != '_' && !utf8_is_letter_or_digit(r))
            break;
        i += w;
    }
    return i;
}

// The end (past the closing quote) of a JSON string starting at s[start],
// or 0 when it is not closed. unit (may be NULL) marks opaque positions.
static size_t json_quoted_end(const char *s, const bool *unit, size_t n, size_t start)
{
    bool escaped = false;
    for (size_t i = start + 1; i < n; i++) {
        bool u = unit && unit[i];
        if (!u && s[i] == '"' && !escaped)
            return i + 1;
        escaped = !u && s[i] == '\\' && !escaped;
    }
    return 0;
}

// The argument text with each <|"|>…<|"|> string as one opaque position
// (Ollama swaps them for placeholders before quoting the keys).
struct g4_text {
    struct buf c;  // the text; a string's position holds 0
    bool *unit;    // c.data[i] stands for the next string
    const char **str;
    size_t *str_len, n_str;
};

static void text_init(struct g4_text *t, const char *s, size_t n)
{
    buf_init(&t->c, 0);
    t->unit = xcalloc(n + 1, sizeof(*t->unit));
    t->str = xcalloc(n / G4_Q_LEN + 1, sizeof(*t->str));
    t->str_len = xcalloc(n / G4_Q_LEN + 1, sizeof(*t->str_len));
    t->n_str = 0;
    size_t i = 0;
    while (i < n) {
        if (has_prefix(s + i, n - i, G4_Q)) {
            size_t body = i + G4_Q_LEN;
            const char *end = rnd_find(s + body, n - body, G4_Q);
            if (end) {
                t->unit[t->c.len] = true;
                buf_append_char(&t->c, 0);
                t->str[t->n_str] = s + body;
                t->str_len[t->n_str++] = (size_t)(end - (s + body));
                i = (size_t)(end - s) + G4_Q_LEN;
                continue;
            }
        }
        buf_append_char(&t->c, s[i]);
        i++;
    }
}

static void text_deinit(struct g4_text *t)
{
    buf_deinit(&t->c);
    free(t->unit);
    free(t->str);
    free(t->str_len);
}

// Appends t[a..b) with each string as a JSON string; *k counts the strings
// written so far.
static void text_emit(struct buf *out, const struct g4_text *t, size_t a, size_t b, size_t *k)
{
    for (size_t i = a; i < b; i++) {
        if (t->unit[i]) {
            jsonx_dump_string(t->str[*k], t->str_len[*k], 0, out);
            (*k)++;
        } else {
            buf_append_char(out, t->c.data[i]);
        }
    }
}

// gemma4ArgsToJSON: bare keys after '{' or ',' quoted, JSON strings kept
// as they are, <|"|> strings written as JSON strings.
static void args_to_json(struct buf *out, const char *s, size_t n)
{
    struct g4_text t;
    text_init(&t, s, n);
    const char *c = t.c.data ? t.c.data : "";
    size_t len = t.c.len, k = 0;
    for (size_t i = 0; i < len;) {
        if (!t.unit[i] && c[i] == '"') {
            size_t end = json_quoted_end(c, t.unit, len, i);
            if (end) {
                text_emit(out, &t, i, end, &k);
                i = end;
                continue;
            }
        }
        if (t.unit[i] || (c[i] != '{' && c[i] != ',')) {
            text_emit(out, &t, i, i + 1, &k);
            i++;
            continue;
        }
        buf_append_char(out, c[i++]);
        size_t sp = skip_space(c, len, i);
        text_emit(out, &t, i, sp, &k);
        i = sp;
        size_t ke = bare_key_end(c, len, i);
        if (ke > i && ke < len && !t.unit[ke] && c[ke] == ':') {
            buf_append_char(out, '"');
            buf_append(out, c + i, ke - i);
            buf_append_str(out, "\":");
            i = ke + 1;
        }
    }
    text_deinit(&t);
}

// The arguments as a JSON object, or NULL (e set when given).
static json_t *args_decode(const char *s, size_t n, struct err *e)
{
    struct buf j;
    buf_init(&j, 0);
    args_to_json(&j, s, n);
    json_t *v = NULL;
    int rc = jsonx_parse(j.data ? j.data : "", j.len, &v, e);
    buf_deinit(&j);
    if (rc < 0)
        return NULL;
    if (!json_is_object(v)) {
        json_decref(v);
        err_set(e, ERR_INVALID, "arguments are not an object");
        return NULL;
    }
    return v;
}

// ---------------------------------------------------------------------------
// Repairs tried when the arguments do not decode

// Single-quoted values ('…' after a ':') become <|"|> strings; a stray
// delimiter right after the closing quote is dropped.
static void repair_single_quotes(struct buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (has_prefix(s + i, n - i, G4_Q)) {
            size_t body = i + G4_Q_LEN;
            const char *end = rnd_find(s + body, n - body, G4_Q);
            if (!end) {
                buf_append(out, s + i, n - i);
                break;
            }
            size_t stop = (size_t)(end - s) + G4_Q_LEN;
            buf_append(out, s + i, stop - i);
            i = stop;
            continue;
        }
        if (s[i] == '"') {
            size_t end = json_quoted_end(s, NULL, n, i);
            if (end) {
                buf_append(out, s + i, end - i);
                i = end;
                continue;
            }
        }
        if (s[i] != ':') {
            buf_append_char(out, s[i++]);
            continue;
        }
        buf_append_char(out, s[i++]);
        size_t sp = skip_space(s, n, i);
        buf_append(out, s + i, sp - i);
        i = sp;
        if (i >= n || s[i] != '\'')
            continue;
        // The quoted value, with backslash escapes kept as written.
        bool escaped = false;
        size_t close = 0;
        for (size_t j = i + 1; j < n; j++) {
            if (s[j] == '\'' && !escaped) {
                close = j;
                break;
            }
            escaped = s[j] == '\\' && !escaped;
        }
        if (!close)
            continue;
        buf_append_str(out, G4_Q);
        buf_append(out, s + i + 1, close - i - 1);
        buf_append_str(out, G4_Q);
        i = close + 1;
        if (has_prefix(s + i, n - i, G4_Q))
            i += G4_Q_LEN;
    }
}

// An odd number of delimiters: one more at the end, before a final '}' or
// ']'.
static void repair_missing_delimiter(struct buf *out, const char *s, size_t n)
{
    size_t count = 0;
    for (const char *p = s; (p = rnd_find(p, n - (size_t)(p - s), G4_Q)); p += G4_Q_LEN)
        count++;
    if (count % 2 == 0) {
        buf_append(out, s, n);
        return;
    }
    size_t at = trim_right_index(s, n);
    if (at > 0 && (s[at - 1] == '}' || s[at - 1] == ']'))
        at--;
    buf_append(out, s, at);
    buf_append_str(out, G4_Q);
    buf_append(out, s + at, n - at);
}

// An object missing its final '}' gets one (before trailing white space).
static void repair_missing_close(struct buf *out, const char *s, size_t n)
{
    size_t lead = rnd_leading_ws(s, n);
    size_t end = trim_right_index(s, n);
    if (lead >= n || s[lead] != '{' || (end > 0 && s[end - 1] == '}')) {
        buf_append(out, s, n);
        return;
    }
    buf_append(out, s, end);
    buf_append_char(out, '}');
    buf_append(out, s + end, n - end);
}

// The properties object of the first tool with that name, or NULL.
static json_t *tool_props(json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        if (strcmp(rnd_str(fn, "name"), name) == 0) {
            json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
            return json_is_object(props) ? props : NULL;
        }
    }
    return NULL;
}

static bool accepts_string(const json_t *prop, int depth)
{
    const char *types[G4_MAX_TYPES];
    size_t n = prop_types(json_object_get(prop, "type"), types, G4_MAX_TYPES);
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(types[i], "string") == 0)
            return true;
    json_t *any = json_object_get(prop, "anyOf");
    for (size_t i = 0; depth < 64 && i < json_array_size(any); i++)
        if (accepts_string(json_array_get(any, i), depth + 1))
            return true;
    return false;
}

// Where the value of `key` starts (after its ':'), searching from `from`
// outside strings; false when there is none.
static bool value_start(const char *s, size_t n, const char *key, size_t from, size_t *at)
{
    size_t kl = strlen(key);
    for (size_t i = from; i < n; i++) {
        if (has_prefix(s + i, n - i, G4_Q)) {
            size_t body = i + G4_Q_LEN;
            const char *end = rnd_find(s + body, n - body, G4_Q);
            if (!end)
                return false;
            i = (size_t)(end - s) + G4_Q_LEN - 1;
            continue;
        }
        if (s[i] == '"') {
            size_t end = json_quoted_end(s, NULL, n, i);
            if (end) {
                i = end - 1;
                continue;
            }
        }
        if (s[i] != '{' && s[i] != ',')
            continue;
        size_t ks = skip_space(s, n, i + 1);
        if (!has_prefix(s + ks, n - ks, key))
            continue;
        size_t colon = skip_space(s, n, ks + kl);
        if (colon < n && s[colon] == ':') {
            *at = colon + 1;
            return true;
        }
    }
    return false;
}

// A value that already has a shape: a string, an object, an array or a
// JSON literal.
static bool starts_structured(const char *s, size_t n, size_t pos)
{
    if (pos >= n)
        return false;
    if (has_prefix(s + pos, n - pos, G4_Q))
        return true;
    char c = s[pos];
    return c == '\'' || c == '"' || c == '{' || c == '[' || c == '-' || (c >= '0' && c <= '9') ||
           c == 't' || c == 'f' || c == 'n';
}

// Where a raw value starting at `start` ends: before ", key:" naming
// another property, else before a final '}', else at the end.
static size_t raw_value_end(const char *s, size_t n, size_t start, json_t *props)
{
    for (size_t i = start; i < n; i++) {
        if (s[i] != ',')
            continue;
        size_t ks = skip_space(s, n, i + 1);
        size_t ke = bare_key_end(s, n, ks);
        if (ke == ks)
            continue;
        size_t colon = skip_space(s, n, ke);
        if (colon < n && s[colon] == ':') {
            char *key = xstrndup(s + ks, ke - ks);
            bool known = json_object_get(props, key) != NULL;
            free(key);
            if (known)
                return i;
        }
    }
    size_t end = trim_right_index(s, n);
    if (end > start && s[end - 1] == '}')
        return end - 1;
    return n;
}

// A raw (unquoted) value of a string property wrapped in delimiters: only
// where the tool's schema says the argument is a string.
static bool repair_raw_string(struct buf *out, const char *s, size_t n, json_t *tools,
                              const char *name)
{
    json_t *props = tool_props(tools, name);
    const char *key;
    json_t *prop;
    json_object_foreach(props, key, prop)
    {
        if (!accepts_string(prop, 0))
            continue;
        for (size_t from = 0; from < n;) {
            size_t at;
            if (!value_start(s, n, key, from, &at))
                break;
            if (starts_structured(s, n, skip_space(s, n, at))) {
                from = at;
                continue;
            }
            size_t end = raw_value_end(s, n, at, props);
            buf_append(out, s, at);
            buf_append_str(out, G4_Q);
            buf_append(out, s + at, end - at);
            buf_append_str(out, G4_Q);
            buf_append(out, s + end, n - end);
            return true;
        }
    }
    return false;
}

// One repair candidate: quotes, then delimiters, then (when asked, or when
// those changed something) the object's close.
static void repair(struct buf *out, const char *s, size_t n, bool close)
{
    struct buf a, b;
    buf_init(&a, 0);
    buf_init(&b, 0);
    repair_single_quotes(&a, s, n);
    repair_missing_delimiter(&b, a.data ? a.data : "", a.len);
    if (close || b.len != n || memcmp(b.data ? b.data : "", s, n) != 0)
        repair_missing_close(out, b.data ? b.data : "", b.len);
    else
        buf_append(out, b.data ? b.data : "", b.len);
    buf_deinit(&a);
    buf_deinit(&b);
}

// The arguments after the repairs, or NULL.
static json_t *args_repaired(const char *s, size_t n, json_t *tools, const char *name)
{
    struct buf c1, raw, c2;
    buf_init(&c1, 0);
    buf_init(&raw, 0);
    buf_init(&c2, 0);
    repair(&c1, s, n, false);
    json_t *v = args_decode(c1.data ? c1.data : "", c1.len, NULL);
    if (!v && repair_raw_string(&raw, s, n, tools, name)) {
        repair(&c2, raw.data ? raw.data : "", raw.len, true);
        v = args_decode(c2.data ? c2.data : "", c2.len, NULL);
    }
    buf_deinit(&c1);
    buf_deinit(&raw);
    buf_deinit(&c2);
    return v;
}

// "call:NAME{args}" into a call appended to calls.
static int parse_call(struct renderer_parser *p, const char *s, size_t n, json_t *calls,
                      struct err *e)
{
    if (!has_prefix(s, n, "call:"))
        return err_set(e, ERR_INVALID, "gemma4: tool call \"%.*s\": expected 'call:' prefix",
                       (int)(n > 80 ? 80 : n), s);
    s += 5;
    n -= 5;
    const char *brace = memchr(s, '{', n);
    if (!brace)
        return err_set(e, ERR_INVALID, "gemma4: tool call \"%.*s\": expected '{' in tool call",
                       (int)(n > 80 ? 80 : n), s);
    struct buf name;
    buf_init(&name, 0);
    trim_into(&name, s, (size_t)(brace - s));
    const char *args = brace;
    size_t an = n - (size_t)(brace - s);
    struct err pe = {0};
    json_t *v = args_decode(args, an, &pe);
    if (!v)
        v = args_repaired(args, an, p->tools, buf_cstr(&name));
    int rc = 0;
    if (v)
        rnd_call_append(p, calls, buf_cstr(&name), v);
    else
        rc = err_set(e, ERR_INVALID, "gemma4: cannot parse the arguments of tool call %s: %s",
                     buf_cstr(&name), pe.msg);
    buf_deinit(&name);
    return rc;
}

// ---------------------------------------------------------------------------
// Parser

enum { G4_CONTENT, G4_THINKING, G4_CALL, G4_AFTER_CALL };

struct gemma4 {
    bool thinking;       // the family thinks and the request asked for it
    bool strip_channel;  // just entered a channel: drop its "thought\n" name
    size_t call_seen;    // bytes of a call's text searched for its close tag
};

int rnd_gemma4_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e)
{
    (void)e;
    struct gemma4 *g = xcalloc(1, sizeof(*g));
    p->impl = g;
    g->thinking = variant == G4_THINKER && think_on(think);
    p->state = G4_CONTENT;
    // After a tool result the prompt reopens the thought channel.
    if (g->thinking && last && role_is(last, "tool"))
        p->state = G4_THINKING;
    return 0;
}

void rnd_gemma4_deinit(struct renderer_parser *p)
{
    free(p->impl);
    p->impl = NULL;
}

static void emit_thinking(struct gemma4 *g, struct rnd_out *o, const char *s, size_t n)
{
    if (g->thinking && n)
        buf_append(o->thinking, s, n);
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

// Steps of the parser, one per state. Each returns <0 on error, 0 when
// nothing more can be done with the text so far, 1 when it made progress.
typedef int (*g4_step_fn)(struct renderer_parser *p, struct gemma4 *g, bool done, struct rnd_out *o,
                          struct err *e);

static int step_content(struct renderer_parser *p, struct gemma4 *g, bool done, struct rnd_out *o,
                        struct err *e)
{
    (void)e;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    // The first marker wins: a channel opens thinking, a call opener starts
    // a call; white space before either is dropped.
    const char *tag = rnd_find(a, n, G4_CH_OPEN);
    const char *call = rnd_find(a, n, G4_CALL_OPEN);
    size_t tl = strlen(G4_CH_OPEN);
    int next = G4_THINKING;
    if (call && (!tag || call < tag)) {
        tag = call;
        tl = strlen(G4_CALL_OPEN);
        next = G4_CALL;
    }
    if (tag) {
        size_t before = (size_t)(tag - a);
        buf_append(o->content, a, before - rnd_trailing_ws(a, before));
        rnd_buf_consume(&p->acc, before + tl);
        p->state = next;
        g->strip_channel = next == G4_THINKING;
        g->call_seen = 0;
        return 1;
    }
    size_t ov = max_size(rnd_overlap(a, n, G4_CH_OPEN), rnd_overlap(a, n, G4_CALL_OPEN));
    if (!done && ov > 0) {
        rnd_emit_until_partial(p, G4_CH_OPEN, G4_CALL_OPEN, o->content);
        return 0;
    }
    buf_append(o->content, a, n);
    buf_reset(&p->acc);
    return 0;
}

static int step_thinking(struct renderer_parser *p, struct gemma4 *g, bool done, struct rnd_out *o,
                         struct err *e)
{
    (void)e;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    if (g->strip_channel) {
        size_t nl = strlen(G4_THOUGHT);
        if (has_prefix(a, n, G4_THOUGHT)) {
            rnd_buf_consume(&p->acc, nl);
            g->strip_channel = false;
            return 1;
        }
        if (!done && n < nl && memcmp(G4_THOUGHT, a, n) == 0)
            return 0;
        g->strip_channel = false;
    }
    const char *close = rnd_find(a, n, G4_CH_CLOSE);
    if (close) {
        size_t before = (size_t)(close - a);
        emit_thinking(g, o, a, before - rnd_trailing_ws(a, before));
        size_t after = before + strlen(G4_CH_CLOSE);
        after += rnd_leading_ws(a + after, n - after);
        rnd_buf_consume(&p->acc, after);
        p->state = G4_CONTENT;
        return 1;
    }
    if (done) {
        emit_thinking(g, o, a, n);
        buf_reset(&p->acc);
        return 0;
    }
    // A partial close tag and the white space before it wait.
    size_t keep = n - rnd_overlap(a, n, G4_CH_CLOSE);
    keep -= rnd_trailing_ws(a, keep);
    emit_thinking(g, o, a, keep);
    rnd_buf_consume(&p->acc, keep);
    return 0;
}

static int step_call(struct renderer_parser *p, struct gemma4 *g, bool done, struct rnd_out *o,
                     struct err *e)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    // Long arguments arrive in many pieces: search only the new text (and
    // the tail a split tag may have started in).
    size_t from = g->call_seen;
    const char *close = rnd_find(a + from, n - from, G4_CALL_CLOSE);
    size_t cl = strlen(G4_CALL_CLOSE);
    g->call_seen = n >= cl ? n - cl + 1 : 0;
    if (close) {
        size_t len = (size_t)(close - a);
        int rc = parse_call(p, a, len, o->calls, e);
        if (rc < 0)
            return rc;
        size_t after = len + strlen(G4_CALL_CLOSE);
        after += rnd_leading_ws(a + after, n - after);
        rnd_buf_consume(&p->acc, after);
        p->state = G4_AFTER_CALL;
        return 1;
    }
    if (done) {
        // The model may stop before closing its call.
        int rc = parse_call(p, a, n, o->calls, e);
        buf_reset(&p->acc);
        p->state = G4_CONTENT;
        return rc < 0 ? rc : 0;
    }
    return 0;
}

// Gemma 4 sometimes repeats <tool_call|> or opens a <|tool_response> after
// a call: dropped, with the white space around them.
static int step_after_call(struct renderer_parser *p, struct gemma4 *g, bool done,
                           struct rnd_out *o, struct err *e)
{
    (void)g;
    (void)o;
    (void)e;
    const char *a = p->acc.data ? p->acc.data : "";
    size_t n = p->acc.len;
    size_t k = rnd_leading_ws(a, n);
    for (;;) {
        if (has_prefix(a + k, n - k, G4_CALL_CLOSE))
            k += strlen(G4_CALL_CLOSE);
        else if (has_prefix(a + k, n - k, G4_RESP_OPEN))
            k += strlen(G4_RESP_OPEN);
        else
            break;
        k += rnd_leading_ws(a + k, n - k);
    }
    rnd_buf_consume(&p->acc, k);
    a = p->acc.data ? p->acc.data : "";
    n = p->acc.len;
    if (n == 0)
        return 0;
    if ((n < strlen(G4_CALL_CLOSE) && memcmp(G4_CALL_CLOSE, a, n) == 0) ||
        (n < strlen(G4_RESP_OPEN) && memcmp(G4_RESP_OPEN, a, n) == 0)) {
        if (done) {
            buf_reset(&p->acc);
            p->state = G4_CONTENT;
        }
        return 0;
    }
    p->state = G4_CONTENT;
    return 1;
}

static const g4_step_fn g4_steps[] = {
    [G4_CONTENT] = step_content,
    [G4_THINKING] = step_thinking,
    [G4_CALL] = step_call,
    [G4_AFTER_CALL] = step_after_call,
};

int rnd_gemma4_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    struct gemma4 *g = p->impl;
    while (p->acc.len > 0) {
        int rc = g4_steps[p->state](p, g, done, o, e);
        if (rc <= 0)
            return rc;
    }
    return 0;
}

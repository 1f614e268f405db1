// YAML for the config files `ollama launch` edits (OMP's models.yml and
// config.yml, DeepSeek Harness's settings): libyaml reads the user's file
// into a JSON tree so the writers in launch_config_yaml.c can change it key
// by key like the JSON ones, and the tree is written back as block YAML.
// Comments and anchors are not kept (0.33's yaml.Marshal drops them too);
// the user's bytes stay in the backup for --restore.
#include "cli/launch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 100000

// ---------------------------------------------------------------------------
// Reading

// A plain scalar as YAML's core schema resolves it: null, bool, int, float
// or string.
static json_t *resolve_plain(const char *s, size_t n)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    static const char *const trues[] = {"true", "True", "TRUE"};
    static const char *const falses[] = {"false", "False", "FALSE"};
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        if (strcmp(s, nulls[i]) == 0)
            return json_null();
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(s, trues[i]) == 0)
            return json_true();
        if (strcmp(s, falses[i]) == 0)
            return json_false();
    }
    if (n == 0 || strlen(s) != n)
        return json_stringn(s, n);
    char *end;
    errno = 0;
    bool hex = strncmp(s, "0x", 2) == 0, oct = strncmp(s, "0o", 2) == 0;
    long long ll = strtoll(s + (hex || oct ? 2 : 0), &end, hex ? 16 : oct ? 8 : 10);
    bool digits = strspn(s + (*s == '-' || *s == '+'), "0123456789") > 0;
    if (digits && *end == '\0' && errno == 0 && (n > 2 || !(hex || oct)))
        return json_integer(ll);
    double d = strtod(s, &end);
    if (digits && *end == '\0' && isfinite(d) && !strchr(s, 'x') && !strchr(s, 'X'))
        return json_real(d);
    return json_stringn(s, n);
}

// One document being read: aliases make a node reachable many times, so the
// nodes expanded are counted (a "billion laughs" file is an error, not a hang).
struct reader {
    yaml_document_t *doc;
    size_t nodes;
    struct err *e;
};

static json_t *node_to_json(struct reader *r, yaml_node_t *node, int depth);

// A scalar's text; NULL after an error when it holds a NUL byte (no config
// file here has one, and a JSON tree key cannot).
static const char *scalar_text(struct reader *r, yaml_node_t *node, size_t *n)
{
    *n = node->data.scalar.length;
    if (memchr(node->data.scalar.value, '\0', *n)) {
        err_set(r->e, ERR_FORMAT, "yaml: line %zu: a NUL character", node->start_mark.line + 1);
        return NULL;
    }
    return (const char *)node->data.scalar.value;
}

static json_t *mapping_to_json(struct reader *r, yaml_node_t *node, int depth)
{
    json_t *obj = json_object();
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
        size_t kn = 0;
        const char *key = k && k->type == YAML_SCALAR_NODE ? scalar_text(r, k, &kn) : NULL;
        if (!key && k && k->type == YAML_SCALAR_NODE) {
            json_decref(obj);
            return NULL;
        }
        if (!key) {
            json_decref(obj);
            err_set(r->e, ERR_FORMAT, "yaml: line %zu: only text keys are supported",
                    k ? k->start_mark.line + 1 : 0);
            return NULL;
        }
        json_t *v = node_to_json(r, yaml_document_get_node(r->doc, p->value), depth + 1);
        if (!v) {
            json_decref(obj);
            return NULL;
        }
        json_object_setn_new(obj, key, kn, v);
    }
    return obj;
}

static json_t *sequence_to_json(struct reader *r, yaml_node_t *node, int depth)
{
    json_t *arr = json_array();
    for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top;
         it++) {
        json_t *v = node_to_json(r, yaml_document_get_node(r->doc, *it), depth + 1);
        if (!v) {
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, v);
    }
    return arr;
}

static json_t *node_to_json(struct reader *r, yaml_node_t *node, int depth)
{
    if (!node)
        return json_null();
    if (depth > YAML_MAX_DEPTH || ++r->nodes > YAML_MAX_NODES) {
        err_set(r->e, ERR_FORMAT, "yaml: nested deeper than %d levels or over %d values",
                YAML_MAX_DEPTH, YAML_MAX_NODES);
        return NULL;
    }
    if (node->type == YAML_MAPPING_NODE)
        return mapping_to_json(r, node, depth);
    if (node->type == YAML_SEQUENCE_NODE)
        return sequence_to_json(r, node, depth);
    // libyaml's loader tags every untagged scalar !!str, so a plain one is
    // resolved by its text (an explicit "!!str 12" reads as 12 here).
    size_t n;
    const char *s = scalar_text(r, node, &n);
    if (!s)
        return NULL;
    if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return resolve_plain(s, n);
    return json_stringn(s, n);
}

int launch_yaml_parse(const struct buf *in, json_t **out, struct err *e)
{
    *out = NULL;
    if (!in || in->len == 0) {
        *out = json_null();
        return 0;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return err_set(e, ERR_NOMEM, "yaml parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)in->data, in->len);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = err_set(e, ERR_FORMAT, "yaml: line %zu: %s", parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "syntax error");
    } else {
        struct err local = {0};
        struct reader r = {&doc, 0, e ? e : &local};
        *out = node_to_json(&r, yaml_document_get_root_node(&doc), 0);
        if (!*out)
            rc = ERR_FORMAT;
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return rc;
}

int launch_yaml_parse_mapping(const struct buf *in, json_t **out, struct err *e)
{
    int rc = launch_yaml_parse(in, out, e);
    if (rc < 0)
        return rc;
    if (json_is_null(*out)) {
        json_decref(*out);
        *out = json_object();
    }
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return err_set(e, ERR_FORMAT, "the top level is not a mapping");
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Writing

// Whether s can be written without quotes and still read back as this string.
static bool plain_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || s[0] == ' ' || s[n - 1] == ' ' || strchr("-?:,[]{}#&*!|>'\"%@`", s[0]))
        return false;
    if (strstr(s, ": ") || strstr(s, " #") || s[n - 1] == ':')
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    json_t *v = resolve_plain(s, n);
    bool str = json_is_string(v);
    json_decref(v);
    return str;
}

static void put_string(struct buf *out, const char *s)
{
    if (plain_ok(s)) {
        buf_append_str(out, s);
        return;
    }
    buf_append_char(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            buf_printf(out, "\\%c", *p);
        else if (*p == '\n')
            buf_append_str(out, "\\n");
        else if (*p == '\t')
            buf_append_str(out, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            buf_printf(out, "\\x%02x", *p);
        else
            buf_append_char(out, (char)*p);
    }
    buf_append_char(out, '"');
}

static bool is_block(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v) > 0) ||
           (json_is_array(v) && json_array_size(v) > 0);
}

// A scalar or an empty collection on the current line.
static void put_inline(struct buf *out, const json_t *v)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        buf_append_str(out, "{}");
        break;
    case JSON_ARRAY:
        buf_append_str(out, "[]");
        break;
    case JSON_STRING:
        put_string(out, json_string_value(v));
        break;
    case JSON_INTEGER:
        buf_printf(out, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        jsonx_format_double(json_real_value(v), num, sizeof(num));
        buf_append_str(out, num);
        if (!strpbrk(num, ".eEn"))  // read back as a real, not an integer
            buf_append_str(out, ".0");
        break;
    case JSON_TRUE:
        buf_append_str(out, "true");
        break;
    case JSON_FALSE:
        buf_append_str(out, "false");
        break;
    default:
        buf_append_str(out, "null");
        break;
    }
}

static void put_block(struct buf *out, const json_t *v, int indent, bool inline_first);

static void put_indent(struct buf *out, int indent)
{
    for (int i = 0; i < indent; i++)
        buf_append_char(out, ' ');
}

// The mapping's keys at indent; with inline_first the first key continues a
// "- " already written.
static void put_mapping(struct buf *out, const json_t *obj, int indent, bool inline_first)
{
    const char *key;
    json_t *v;
    bool first = true;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!(first && inline_first))
            put_indent(out, indent);
        first = false;
        put_string(out, key);
        buf_append_char(out, ':');
        if (is_block(v)) {
            buf_append_char(out, '\n');
            put_block(out, v, indent + 2, false);
        } else {
            buf_append_char(out, ' ');
            put_inline(out, v);
            buf_append_char(out, '\n');
        }
    }
}

static void put_block(struct buf *out, const json_t *v, int indent, bool inline_first)
{
    if (json_is_object(v)) {
        put_mapping(out, v, indent, inline_first);
        return;
    }
    size_t i;
    json_t *item;
    json_array_foreach((json_t *)v, i, item)
    {
        if (!(i == 0 && inline_first))
            put_indent(out, indent);
        buf_append_str(out, "- ");
        if (json_is_object(item) && json_object_size(item) > 0) {
            put_mapping(out, item, indent + 2, true);
        } else if (is_block(item)) {
            buf_append_char(out, '\n');
            put_block(out, item, indent + 2, false);
        } else {
            put_inline(out, item);
            buf_append_char(out, '\n');
        }
    }
}

void launch_yaml_dump(const json_t *v, struct buf *out)
{
    if (is_block(v)) {
        put_block(out, v, 0, false);
        return;
    }
    put_inline(out, v);
    buf_append_char(out, '\n');
}

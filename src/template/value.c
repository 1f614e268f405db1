// Runtime values: JSON data seen through upstream's Go types (templates.md
// §5), truth (§3.4), printing with fmt.Sprint rules (§3.6) and Go's
// encoding/json output (§5.3), including Go's float formatting.
#include "template/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Float formatting (strconv.FormatFloat with precision -1).

// Shortest digits that round-trip: value = 0.D1D2... no: D1.D2D3 × 10^exp.
static int shortest_digits(double f, char *digits, int *exp10)
{
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f || prec == 17)
            break;
    }
    // tmp: d[.ddd]e±XX
    int k = 0;
    const char *p = tmp;
    if (*p == '-')
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = 0;
    *exp10 = atoi(p + 1);
    return k;
}

static int fmt_e(struct buf *b, bool neg, const char *d, int nd, int exp, int min_exp_digits)
{
    int rc = 0;
    if (neg)
        rc |= buf_append_char(b, '-');
    rc |= buf_append_char(b, d[0]);
    if (nd > 1) {
        rc |= buf_append_char(b, '.');
        rc |= buf_append(b, d + 1, (size_t)nd - 1);
    }
    rc |= buf_printf(b, "e%c%0*d", exp < 0 ? '-' : '+', min_exp_digits, exp < 0 ? -exp : exp);
    return rc ? ERR_TOO_LARGE : 0;
}

static int fmt_f(struct buf *b, bool neg, const char *d, int nd, int exp)
{
    // value = d0.d1d2... × 10^exp ; decimal point after (exp+1) digits
    int rc = 0;
    if (neg)
        rc |= buf_append_char(b, '-');
    int dp = exp + 1;
    if (dp <= 0) {
        rc |= buf_append_str(b, "0.");
        for (int i = 0; i < -dp; i++)
            rc |= buf_append_char(b, '0');
        rc |= buf_append(b, d, (size_t)nd);
    } else {
        for (int i = 0; i < dp; i++)
            rc |= buf_append_char(b, i < nd ? d[i] : '0');
        if (nd > dp) {
            rc |= buf_append_char(b, '.');
            rc |= buf_append(b, d + dp, (size_t)(nd - dp));
        }
    }
    return rc ? ERR_TOO_LARGE : 0;
}

static int special_float(struct buf *b, double f, bool json)
{
    if (isnan(f))
        return buf_append_str(b, json ? "" : "NaN");
    return buf_append_str(b, json ? "" : (f > 0 ? "+Inf" : "-Inf"));
}

int go_format_float(struct buf *b, double f, char verb, int prec)
{
    if (!isfinite(f))
        return special_float(b, f, false);
    if (prec >= 0 || (verb != 'g' && verb != 'v')) {
        char fmt[16];
        snprintf(fmt, sizeof(fmt), "%%.%d%c", prec < 0 ? 6 : prec, verb == 'v' ? 'g' : verb);
        return buf_printf(b, fmt, f);
    }
    if (f == 0)
        return buf_append_str(b, signbit(f) ? "-0" : "0");
    char d[32];
    int exp;
    int nd = shortest_digits(f, d, &exp);
    if (exp < -4 || exp >= 21 - 15)  // eprec is 6 for the shortest form
        return fmt_e(b, f < 0, d, nd, exp, 2);
    return fmt_f(b, f < 0, d, nd, exp);
}

int go_json_float(struct buf *b, double f)
{
    if (!isfinite(f))
        return special_float(b, f, true);
    if (f == 0)
        return buf_append_str(b, signbit(f) ? "-0" : "0");
    char d[32];
    int exp;
    int nd = shortest_digits(f, d, &exp);
    double a = fabs(f);
    if (a < 1e-6 || a >= 1e21)
        return fmt_e(b, f < 0, d, nd, exp, 1);
    return fmt_f(b, f < 0, d, nd, exp);
}

// ---------------------------------------------------------------------------
// Strings

int go_quote(struct buf *b, const char *s, size_t n)
{
    return buf_append_go_quoted(b, s, n);
}

// ---------------------------------------------------------------------------
// JSON helpers

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char **json_sorted_keys(json_t *obj, size_t *n_out)
{
    size_t n = json_is_object(obj) ? json_object_size(obj) : 0;
    const char **keys = xmalloc((n + 1) * sizeof(char *));
    size_t k = 0;
    const char *key;
    json_t *v;
    if (n)
        json_object_foreach(obj, key, v) keys[k++] = key;
    qsort(keys, k, sizeof(char *), cmp_key);
    *n_out = k;
    return keys;
}

// ---------------------------------------------------------------------------
// Schemas

bool tv_is_list(const struct tval *v)
{
    if (v->kind != TV_JSON)
        return false;
    switch (v->schema) {
    case S_MSGS:
    case S_TCS:
    case S_TOOLS:
    case S_PROPLIST:
    case S_PTYPE:
        return true;
    case S_GENERIC:
        return json_is_array(v->u.j.j);
    default:
        return false;
    }
}

bool tv_is_map(const struct tval *v)
{
    if (v->kind != TV_JSON)
        return false;
    switch (v->schema) {
    case S_ROOT:
    case S_ARGS:
    case S_PROPS:
        return true;
    case S_GENERIC:
        return json_is_object(v->u.j.j);
    default:
        return false;
    }
}

bool tv_is_struct(const struct tval *v)
{
    return v->kind == TV_JSON && !tv_is_list(v) && !tv_is_map(v);
}

size_t tv_list_len(const struct tval *v)
{
    if (v->schema == S_PTYPE && json_is_string(v->u.j.j))
        return 1;
    return v->u.j.hi - v->u.j.lo;
}

struct tval tv_from_json(json_t *j, int schema)
{
    struct tval v = {.kind = TV_JSON, .schema = schema};
    v.u.j.j = j;
    if (schema == S_GENERIC) {
        switch (json_typeof(j ? j : json_null())) {
        case JSON_STRING:
            return (struct tval){.kind = TV_STR,
                                 .u.s = {json_string_value(j), json_string_length(j)}};
        case JSON_INTEGER:
            return (struct tval){.kind = TV_FLOAT, .u.f = (double)json_integer_value(j)};
        case JSON_REAL:
            return (struct tval){.kind = TV_FLOAT, .u.f = json_real_value(j)};
        case JSON_TRUE:
            return (struct tval){.kind = TV_BOOL, .u.b = true};
        case JSON_FALSE:
            return (struct tval){.kind = TV_BOOL, .u.b = false};
        case JSON_NULL:
            return tv_nil();
        default:
            break;
        }
    }
    if (schema == S_PTYPE) {
        if (json_is_string(j)) {
            v.u.j.hi = 1;
            return v;
        }
    }
    if (tv_is_list(&v)) {
        if (!json_is_array(j))
            v.u.j.j = NULL;
        v.u.j.hi = json_is_array(j) ? json_array_size(j) : 0;
    } else if (!json_is_object(j)) {
        v.u.j.j = NULL;  // nil map / zero struct
    }
    return v;
}

static int elem_schema(int list_schema)
{
    switch (list_schema) {
    case S_MSGS:
        return S_MSG;
    case S_TCS:
        return S_TC;
    case S_TOOLS:
        return S_TOOL;
    case S_PROPLIST:
        return S_PROP;
    default:
        return S_GENERIC;
    }
}

struct tval tv_list_at(const struct tval *v, size_t i)
{
    if (v->schema == S_PTYPE && json_is_string(v->u.j.j))
        return tv_from_json(v->u.j.j, S_GENERIC);
    json_t *e = json_array_get(v->u.j.j, v->u.j.lo + i);
    return tv_from_json(e, elem_schema(v->schema));
}

bool tv_truth(const struct tval *v)
{
    switch (v->kind) {
    case TV_NIL:
        return false;
    case TV_BOOL:
        return v->u.b;
    case TV_INT:
        return v->u.i != 0;
    case TV_FLOAT:
        return v->u.f != 0;
    case TV_COMPLEX:
        return v->u.c.re != 0 || v->u.c.im != 0;
    case TV_STR:
        return v->u.s.n > 0;
    default:
        if (tv_is_list(v))
            return tv_list_len(v) > 0;
        if (tv_is_map(v))
            return json_object_size(v->u.j.j) > 0;
        return true;  // structs are always true
    }
}

const char *tv_type_name(const struct tval *v)
{
    switch (v->kind) {
    case TV_NIL:
        return "nil";
    case TV_BOOL:
        return "bool";
    case TV_INT:
        return "int";
    case TV_FLOAT:
        return "float64";
    case TV_COMPLEX:
        return "complex128";
    case TV_STR:
        return "string";
    default:
        break;
    }
    switch (v->schema) {
    case S_ROOT:
        return "map[string]interface {}";
    case S_MSGS:
        return "[]*template.templateMessage";
    case S_MSG:
        return "*template.templateMessage";
    case S_TCS:
        return "[]template.templateToolCall";
    case S_TC:
        return "template.templateToolCall";
    case S_TCFUNC:
        return "template.templateToolCallFunction";
    case S_ARGS:
        return "template.templateArgs";
    case S_TOOLS:
        return "template.templateTools";
    case S_TOOL:
        return "template.templateTool";
    case S_TFUNC:
        return "template.templateToolFunction";
    case S_PARAMS:
        return "template.templateToolFunctionParameters";
    case S_PROPS:
        return "template.templateProperties";
    case S_PROP:
        return "api.ToolProperty";
    case S_PROPLIST:
        return "[]api.ToolProperty";
    case S_PTYPE:
        return "api.PropertyType";
    default:
        return json_is_array(v->u.j.j) ? "[]interface {}" : "map[string]interface {}";
    }
}

// ---------------------------------------------------------------------------
// JSON output in Go struct order

enum { FK_STR, FK_INT, FK_JSON };
// omitempty: 0 never; 1 when nil (Go interfaces and pointers); 2 when nil or
// empty (strings, slices)
struct fdef {
    const char *go, *key;
    int kind, schema;
    int omitempty;
};

static const struct fdef msg_f[] = {{"Role", "role", FK_STR, 0, 0},
                                    {"Content", "content", FK_STR, 0, 0},
                                    {"Thinking", "thinking", FK_STR, 0, 2},
                                    {"Images", "images", FK_JSON, S_GENERIC, 2},
                                    {"ToolCalls", "tool_calls", FK_JSON, S_TCS, 2},
                                    {"ToolName", "tool_name", FK_STR, 0, 2},
                                    {"ToolCallID", "tool_call_id", FK_STR, 0, 2},
                                    {0}};
static const struct fdef tc_f[] = {
    {"ID", "id", FK_STR, 0, 2}, {"Function", "function", FK_JSON, S_TCFUNC, 0}, {0}};
static const struct fdef tcfunc_f[] = {{"Index", "index", FK_INT, 0, 0},
                                       {"Name", "name", FK_STR, 0, 0},
                                       {"Arguments", "arguments", FK_JSON, S_ARGS, 0},
                                       {0}};
static const struct fdef tool_f[] = {{"Type", "type", FK_STR, 0, 0},
                                     {"Items", "items", FK_JSON, S_GENERIC, 1},
                                     {"Function", "function", FK_JSON, S_TFUNC, 0},
                                     {0}};
static const struct fdef tfunc_f[] = {{"Name", "name", FK_STR, 0, 0},
                                      {"Description", "description", FK_STR, 0, 2},
                                      {"Parameters", "parameters", FK_JSON, S_PARAMS, 0},
                                      {0}};
static const struct fdef params_f[] = {{"Type", "type", FK_STR, 0, 0},
                                       {"Defs", "$defs", FK_JSON, S_GENERIC, 1},
                                       {"Items", "items", FK_JSON, S_GENERIC, 1},
                                       {"Required", "required", FK_JSON, S_GENERIC, 2},
                                       {"Properties", "properties", FK_JSON, S_PROPS, 0},
                                       {0}};
static const struct fdef prop_f[] = {{"AnyOf", "anyOf", FK_JSON, S_PROPLIST, 2},
                                     {"Type", "type", FK_JSON, S_PTYPE, 2},
                                     {"Items", "items", FK_JSON, S_GENERIC, 1},
                                     {"Description", "description", FK_STR, 0, 2},
                                     {"Enum", "enum", FK_JSON, S_GENERIC, 2},
                                     {"Properties", "properties", FK_JSON, S_PROPS, 1},
                                     {"Required", "required", FK_JSON, S_GENERIC, 2},
                                     {0}};

static const struct fdef *schema_fields(int schema)
{
    switch (schema) {
    case S_MSG:
        return msg_f;
    case S_TC:
        return tc_f;
    case S_TCFUNC:
        return tcfunc_f;
    case S_TOOL:
        return tool_f;
    case S_TFUNC:
        return tfunc_f;
    case S_PARAMS:
        return params_f;
    case S_PROP:
        return prop_f;
    default:
        return NULL;
    }
}

bool tv_struct_field(const struct tval *v, const char *name, struct tval *out)
{
    const struct fdef *f = schema_fields(v->schema);
    if (!f)
        return false;
    for (; f->go; f++) {
        if (strcmp(f->go, name))
            continue;
        json_t *j = json_object_get(v->u.j.j, f->key);
        switch (f->kind) {
        case FK_STR:
            if (json_is_string(j))
                *out = (struct tval){.kind = TV_STR,
                                     .u.s = {json_string_value(j), json_string_length(j)}};
            else
                *out = (struct tval){.kind = TV_STR, .u.s = {"", 0}};
            return true;
        case FK_INT:
            *out = (struct tval){.kind = TV_INT, .u.i = jsonx_number_i64(j)};
            return true;
        default:
            *out = tv_from_json(j, f->schema);
            return true;
        }
    }
    return false;
}

static int json_generic(struct buf *b, json_t *j);

static int json_schema(struct buf *b, json_t *j, int schema);

static int json_struct(struct buf *b, json_t *j, const struct fdef *f)
{
    int rc = buf_append_char(b, '{');
    bool first = true;
    for (; f->go && !rc; f++) {
        json_t *x = json_object_get(j, f->key);
        if (f->omitempty) {
            if (!x || json_is_null(x))
                continue;
            if (f->omitempty == 2 && json_is_string(x) && json_string_length(x) == 0)
                continue;
            if (f->omitempty == 2 && json_is_array(x) && json_array_size(x) == 0)
                continue;
        }
        if (!first)
            rc |= buf_append_char(b, ',');
        first = false;
        rc |= jsonx_dump_string(f->key, strlen(f->key), 0, b);
        rc |= buf_append_char(b, ':');
        switch (f->kind) {
        case FK_STR:
            rc |= json_is_string(x)
                      ? jsonx_dump_string(json_string_value(x), json_string_length(x), 0, b)
                      : buf_append_str(b, "\"\"");
            break;
        case FK_INT:
            rc |= buf_printf(b, "%lld", json_is_number(x) ? (long long)json_number_value(x) : 0LL);
            break;
        default:
            if (f->schema == S_PROPS && !json_is_object(x))
                rc |= buf_append_str(b, "null");
            else if (f->schema == S_ARGS && !json_is_object(x))
                rc |= buf_append_str(b, "{}");
            else
                rc |= json_schema(b, x, f->schema);
        }
    }
    return rc ? ERR_TOO_LARGE : buf_append_char(b, '}');
}

static int json_map(struct buf *b, json_t *j, int vschema)
{
    size_t n;
    const char **keys = json_sorted_keys(j, &n);
    int rc = buf_append_char(b, '{');
    for (size_t i = 0; i < n && !rc; i++) {
        if (i)
            rc |= buf_append_char(b, ',');
        rc |= jsonx_dump_string(keys[i], strlen(keys[i]), 0, b);
        rc |= buf_append_char(b, ':');
        rc |= json_schema(b, json_object_get(j, keys[i]), vschema);
    }
    free(keys);
    return rc ? ERR_TOO_LARGE : buf_append_char(b, '}');
}

static int json_list(struct buf *b, json_t *j, size_t lo, size_t hi, int eschema)
{
    int rc = buf_append_char(b, '[');
    for (size_t i = lo; i < hi && !rc; i++) {
        if (i > lo)
            rc |= buf_append_char(b, ',');
        rc |= json_schema(b, json_array_get(j, i), eschema);
    }
    return rc ? ERR_TOO_LARGE : buf_append_char(b, ']');
}

static int json_generic(struct buf *b, json_t *j)
{
    switch (json_typeof(j ? j : json_null())) {
    case JSON_OBJECT:
        return json_map(b, j, S_GENERIC);
    case JSON_ARRAY:
        return json_list(b, j, 0, json_array_size(j), S_GENERIC);
    case JSON_STRING:
        return jsonx_dump_string(json_string_value(j), json_string_length(j), 0, b);
    case JSON_INTEGER:
        return go_json_float(b, (double)json_integer_value(j));
    case JSON_REAL:
        return go_json_float(b, json_real_value(j));
    case JSON_TRUE:
        return buf_append_str(b, "true");
    case JSON_FALSE:
        return buf_append_str(b, "false");
    default:
        return buf_append_str(b, "null");
    }
}

static int json_schema(struct buf *b, json_t *j, int schema)
{
    switch (schema) {
    case S_GENERIC:
        return json_generic(b, j);
    case S_MSGS:
    case S_TCS:
    case S_PROPLIST:
        if (!json_is_array(j))
            return buf_append_str(b, "null");
        return json_list(b, j, 0, json_array_size(j), elem_schema(schema));
    case S_TOOLS:
        if (!json_is_array(j) || json_array_size(j) == 0)
            return buf_append_str(b, "null");
        return json_list(b, j, 0, json_array_size(j), S_TOOL);
    case S_PTYPE:
        if (json_is_array(j) && json_array_size(j) == 1)
            return json_generic(b, json_array_get(j, 0));
        return json_generic(b, j);
    case S_ARGS:
        if (!json_is_object(j))
            return buf_append_str(b, "{}");
        return json_map(b, j, S_GENERIC);
    case S_PROPS:
        if (!json_is_object(j))
            return buf_append_str(b, "{}");
        return json_map(b, j, S_PROP);
    case S_ROOT:
        return json_map(b, j, S_GENERIC);
    default:
        return json_struct(b, j, schema_fields(schema));
    }
}

int tv_json(struct buf *b, const struct tval *v)
{
    switch (v->kind) {
    case TV_NIL:
        return buf_append_str(b, "null");
    case TV_BOOL:
        return buf_append_str(b, v->u.b ? "true" : "false");
    case TV_INT:
        return buf_printf(b, "%lld", (long long)v->u.i);
    case TV_FLOAT:
        return go_json_float(b, v->u.f);
    case TV_COMPLEX:
        return 0;  // json.Marshal fails: upstream prints ""
    case TV_STR:
        return jsonx_dump_string(v->u.s.p, v->u.s.n, 0, b);
    default:
        break;
    }
    if (tv_is_list(v) && v->schema != S_PTYPE) {
        if (!v->u.j.j || (v->schema == S_TOOLS && tv_list_len(v) == 0))
            return buf_append_str(b, "null");
        return json_list(b, v->u.j.j, v->u.j.lo, v->u.j.hi, elem_schema(v->schema));
    }
    return json_schema(b, v->u.j.j, v->schema);
}

// ---------------------------------------------------------------------------
// Printing (fmt.Sprint)

static int print_in(struct buf *b, const struct tval *v, bool nested);

static int print_generic_map(struct buf *b, json_t *j, int vschema)
{
    size_t n;
    const char **keys = json_sorted_keys(j, &n);
    int rc = buf_append_str(b, "map[");
    for (size_t i = 0; i < n && !rc; i++) {
        if (i)
            rc |= buf_append_char(b, ' ');
        rc |= buf_append_str(b, keys[i]);
        rc |= buf_append_char(b, ':');
        struct tval x = tv_from_json(json_object_get(j, keys[i]), vschema);
        rc |= print_in(b, &x, true);
    }
    free(keys);
    return rc ? ERR_TOO_LARGE : buf_append_char(b, ']');
}

static int root_schema_of(const char *key)
{
    if (!strcmp(key, "Messages"))
        return S_MSGS;
    if (!strcmp(key, "Tools"))
        return S_TOOLS;
    return S_GENERIC;
}

static int print_in(struct buf *b, const struct tval *v, bool nested)
{
    switch (v->kind) {
    case TV_NIL:
        return buf_append_str(b, nested ? "<nil>" : "<no value>");
    case TV_BOOL:
        return buf_append_str(b, v->u.b ? "true" : "false");
    case TV_INT:
        return buf_printf(b, "%lld", (long long)v->u.i);
    case TV_FLOAT:
        return go_format_float(b, v->u.f, 'g', -1);
    case TV_COMPLEX: {
        int rc = buf_append_char(b, '(');
        rc |= go_format_float(b, v->u.c.re, 'g', -1);
        if (v->u.c.im >= 0 || isnan(v->u.c.im))
            rc |= buf_append_char(b, '+');
        rc |= go_format_float(b, v->u.c.im, 'g', -1);
        return rc ? ERR_TOO_LARGE : buf_append_str(b, "i)");
    }
    case TV_STR:
        return buf_append(b, v->u.s.p, v->u.s.n);
    default:
        break;
    }
    switch (v->schema) {
    case S_GENERIC:
        if (json_is_object(v->u.j.j))
            return print_generic_map(b, v->u.j.j, S_GENERIC);
        /* fallthrough */
    case S_MSGS:
    case S_TCS:
    case S_PROPLIST: {
        int rc = buf_append_char(b, '[');
        size_t n = tv_list_len(v);
        for (size_t i = 0; i < n && !rc; i++) {
            if (i)
                rc |= buf_append_char(b, ' ');
            struct tval x = tv_list_at(v, i);
            rc |= print_in(b, &x, true);
        }
        return rc ? ERR_TOO_LARGE : buf_append_char(b, ']');
    }
    case S_PTYPE:
        if (tv_list_len(v) == 1) {
            struct tval x = tv_list_at(v, 0);
            return print_in(b, &x, true);
        }
        {
            int rc = buf_append_char(b, '[');
            for (size_t i = 0; i < tv_list_len(v) && !rc; i++) {
                if (i)
                    rc |= buf_append_char(b, ' ');
                struct tval x = tv_list_at(v, i);
                rc |= print_in(b, &x, true);
            }
            return rc ? ERR_TOO_LARGE : buf_append_char(b, ']');
        }
    case S_ROOT: {
        size_t n;
        const char **keys = json_sorted_keys(v->u.j.j, &n);
        int rc = buf_append_str(b, "map[");
        for (size_t i = 0; i < n && !rc; i++) {
            if (i)
                rc |= buf_append_char(b, ' ');
            rc |= buf_append_str(b, keys[i]);
            rc |= buf_append_char(b, ':');
            struct tval x =
                tv_from_json(json_object_get(v->u.j.j, keys[i]), root_schema_of(keys[i]));
            rc |= print_in(b, &x, true);
        }
        free(keys);
        return rc ? ERR_TOO_LARGE : buf_append_char(b, ']');
    }
    default:
        // tools, tool parts, arguments, properties, messages, tool calls: JSON
        return tv_json(b, v);
    }
}

int tv_print(struct buf *b, const struct tval *v)
{
    return print_in(b, v, false);
}

int tv_print_nested(struct buf *b, const struct tval *v)
{
    return print_in(b, v, true);
}

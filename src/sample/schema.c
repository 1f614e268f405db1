// The `format` request field → a byte-level grammar (docs/spec/sampling.md §6.3, §6.4).
//
// "json" is the fixed JSON-object grammar of §6.3 (unbounded whitespace after punctuation).
// A schema object is translated node by node as in §6.4: values end with `space`, object
// properties come in schema order with the required ones first, additionalProperties
// defaults to false, $ref is resolved locally and may recurse.
//
// Deviations, all so that the output always parses with jansson and validates:
//  * numbers are bounded (≤ 16 integer digits, ≤ 16 fraction digits, ≤ 2 exponent
//    digits), and `\u` escapes exclude U+0000 and the surrogate block (jansson rejects
//    those); raw characters are well-formed UTF-8 spelled out byte by byte;
//  * keywords we cannot enforce are errors instead of being ignored (see reject_words;
//    minimum/maximum are enforced on integers and rejected on numbers);
//  * additional property keys are written without escapes and never equal a declared name.
#include "sample/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_MAX_DEPTH 64

struct conv {
    struct gbuilder b;
    const json_t *doc;  // root document for $ref
    struct err *e;
    int rc;
    int depth;
    // shared rules, created on first use (-1 = not yet)
    int32_t r_space, r_u8, r_hex, r_u4, r_char, r_str_raw, r_num_raw, r_int_raw, r_int_part;
    int32_t r_string, r_number, r_integer, r_boolean, r_null, r_value, r_object, r_array;
    int32_t r_plain_char, r_key_rest;
    int32_t r_date, r_time;
    struct ref_memo {
        const json_t *target;
        int32_t rule;
    } * refs;
    int32_t n_refs;
};

static int cmp_cstr(const void *a, const void *b);

static int32_t conv_fail(struct conv *c, int code, const char *msg, const char *detail)
{
    if (c->rc == 0)
        c->rc = err_set(c->e, code, "invalid JSON schema in format: %s%s%s", msg, detail ? " " : "",
                        detail ? detail : "");
    return 0;
}

static void seq_byte(struct conv *c, struct gseq *s, int ch)
{
    gseq_range(&c->b, s, ch, ch);
}

static void seq_str(struct conv *c, struct gseq *s, const char *lit)
{
    gseq_lit(&c->b, s, lit, strlen(lit));
}

// A rule with the given alternatives, each a NUL-free literal or NULL-terminated list.
static int32_t rule_from_seq(struct conv *c, const struct gseq *s)
{
    int32_t r = gb_rule(&c->b);
    gb_alt(&c->b, r, s);
    return r;
}

// Appends S{m,n} to out (n < 0: unbounded).
static void seq_repeat(struct conv *c, struct gseq *out, const struct gseq *s, int64_t m, int64_t n)
{
    if (m < 0 || m > GRAMMAR_MAX_REPEAT || (n >= 0 && (n < m || n - m > GRAMMAR_MAX_REPEAT))) {
        conv_fail(c, ERR_INVALID, "repetition bound too large", NULL);
        return;
    }
    for (int64_t i = 0; i < m; i++)
        gseq_cat(out, s);
    struct gseq alt = {0};
    struct gseq empty = {0};
    if (n < 0) {
        int32_t r = gb_rule(&c->b);  // r ::= S r | ε
        gseq_cat(&alt, s);
        gseq_ref(&alt, r);
        gb_alt(&c->b, r, &alt);
        gb_alt(&c->b, r, &empty);
        gseq_ref(out, r);
    } else if (n > m) {
        // innermost first: r_k ::= S | ε ; r_{i} ::= S r_{i+1} | ε
        int32_t next = -1;
        for (int64_t i = n - m; i > 0; i--) {
            int32_t r = gb_rule(&c->b);
            gseq_reset(&alt);
            gseq_cat(&alt, s);
            if (next >= 0)
                gseq_ref(&alt, next);
            gb_alt(&c->b, r, &alt);
            gb_alt(&c->b, r, &empty);
            next = r;
        }
        gseq_ref(out, next);
    }
    gseq_free(&alt);
}

// ---------------------------------------------------------------------------
// Shared primitives.

static int32_t get_space(struct conv *c)
{
    if (c->r_space >= 0)
        return c->r_space;
    // space ::= ε | " " | "\n" [ \t]{0,20}
    int32_t r = c->r_space = gb_rule(&c->b);
    struct gseq s = {0}, tab = {0};
    gb_alt(&c->b, r, &s);
    seq_byte(c, &s, ' ');
    gb_alt(&c->b, r, &s);
    gseq_reset(&s);
    seq_byte(c, &s, '\n');
    uint64_t set[4] = {0};
    set_add_range(set, ' ', ' ');
    set_add_range(set, '\t', '\t');
    gseq_set(&c->b, &tab, set);
    seq_repeat(c, &s, &tab, 0, 20);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    gseq_free(&tab);
    return r;
}

// One well-formed multi-byte UTF-8 character (Unicode table 3-7).
static int32_t get_u8(struct conv *c)
{
    if (c->r_u8 >= 0)
        return c->r_u8;
    static const uint8_t rows[][4][2] = {
        {{0xC2, 0xDF}, {0x80, 0xBF}, {0, 0}, {0, 0}},
        {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}, {0, 0}},
        {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}, {0, 0}},
        {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}, {0, 0}},
        {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}, {0, 0}},
        {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
    };
    int32_t r = c->r_u8 = gb_rule(&c->b);
    struct gseq s = {0};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        gseq_reset(&s);
        for (int j = 0; j < 4 && rows[i][j][0]; j++)
            gseq_range(&c->b, &s, rows[i][j][0], rows[i][j][1]);
        gb_alt(&c->b, r, &s);
    }
    gseq_free(&s);
    return r;
}

static void seq_hex(struct conv *c, struct gseq *s)
{
    uint64_t set[4] = {0};
    set_add_range(set, '0', '9');
    set_add_range(set, 'a', 'f');
    set_add_range(set, 'A', 'F');
    gseq_set(&c->b, s, set);
}

// Four hex digits, not 0000 and not D800-DFFF (jansson rejects both).
static int32_t get_u4(struct conv *c)
{
    if (c->r_u4 >= 0)
        return c->r_u4;
    int32_t r = c->r_u4 = gb_rule(&c->b);
    struct gseq s = {0};
    uint64_t first[4] = {0}, nz[4] = {0};
    set_add_range(first, '1', '9');
    set_add_range(first, 'a', 'c');
    set_add_range(first, 'A', 'C');
    set_add_range(first, 'e', 'f');
    set_add_range(first, 'E', 'F');
    set_add_range(nz, '1', '9');
    set_add_range(nz, 'a', 'f');
    set_add_range(nz, 'A', 'F');
    for (int zeros = 0; zeros < 4; zeros++) {
        gseq_reset(&s);
        for (int i = 0; i < zeros; i++)
            seq_byte(c, &s, '0');
        gseq_set(&c->b, &s, zeros == 0 ? first : nz);
        for (int i = zeros + 1; i < 4; i++)
            seq_hex(c, &s);
        gb_alt(&c->b, r, &s);
    }
    gseq_free(&s);
    return r;
}

// Adds to rule r the alternatives [ -~ except " and \] and u8 (s is scratch).
static void add_plain_alts(struct conv *c, int32_t r, struct gseq *s)
{
    uint64_t plain[4] = {0};
    set_add_range(plain, 0x20, 0x7E);
    plain[0] &= ~(1ull << '"');
    plain[1] &= ~(1ull << ('\\' - 64));
    gseq_set(&c->b, s, plain);
    gb_alt(&c->b, r, s);
    gseq_reset(s);
    gseq_ref(s, get_u8(c));
    gb_alt(&c->b, r, s);
}

// char ::= [ -~ except " \] | u8 | "\" ( ["\/bfnrt] | "u" u4 )
static int32_t get_char(struct conv *c)
{
    if (c->r_char >= 0)
        return c->r_char;
    int32_t r = c->r_char = gb_rule(&c->b);
    struct gseq s = {0};
    add_plain_alts(c, r, &s);
    gseq_reset(&s);
    seq_byte(c, &s, '\\');
    uint64_t esc[4] = {0};
    for (const char *p = "\"\\/bfnrt"; *p; p++)
        set_add_range(esc, *p, *p);
    gseq_set(&c->b, &s, esc);
    gb_alt(&c->b, r, &s);
    gseq_reset(&s);
    seq_str(c, &s, "\\u");
    gseq_ref(&s, get_u4(c));
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    return r;
}

// "\"" char* "\""  (no trailing space)
static int32_t get_str_raw(struct conv *c)
{
    if (c->r_str_raw >= 0)
        return c->r_str_raw;
    struct gseq s = {0}, ch = {0};
    seq_byte(c, &s, '"');
    gseq_ref(&ch, get_char(c));
    seq_repeat(c, &s, &ch, 0, -1);
    seq_byte(c, &s, '"');
    c->r_str_raw = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&ch);
    return c->r_str_raw;
}

// "0" | [1-9] [0-9]{0,15}
static int32_t get_int_part(struct conv *c)
{
    if (c->r_int_part >= 0)
        return c->r_int_part;
    int32_t r = c->r_int_part = gb_rule(&c->b);
    struct gseq s = {0}, d = {0};
    seq_byte(c, &s, '0');
    gb_alt(&c->b, r, &s);
    gseq_reset(&s);
    gseq_range(&c->b, &s, '1', '9');
    gseq_range(&c->b, &d, '0', '9');
    seq_repeat(c, &s, &d, 0, 15);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    gseq_free(&d);
    return r;
}

static void seq_opt(struct conv *c, struct gseq *out, const struct gseq *s)
{
    seq_repeat(c, out, s, 0, 1);
}

// "-"? int-part ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
static int32_t get_num_raw(struct conv *c)
{
    if (c->r_num_raw >= 0)
        return c->r_num_raw;
    struct gseq s = {0}, t = {0}, d = {0};
    seq_byte(c, &t, '-');
    seq_opt(c, &s, &t);
    gseq_ref(&s, get_int_part(c));
    gseq_range(&c->b, &d, '0', '9');
    gseq_reset(&t);
    seq_byte(c, &t, '.');
    seq_repeat(c, &t, &d, 1, 16);
    seq_opt(c, &s, &t);
    gseq_reset(&t);
    uint64_t e[4] = {0}, sign[4] = {0};
    set_add_range(e, 'e', 'e');
    set_add_range(e, 'E', 'E');
    set_add_range(sign, '-', '-');
    set_add_range(sign, '+', '+');
    gseq_set(&c->b, &t, e);
    struct gseq sg = {0};
    gseq_set(&c->b, &sg, sign);
    seq_opt(c, &t, &sg);
    seq_repeat(c, &t, &d, 1, 2);
    seq_opt(c, &s, &t);
    c->r_num_raw = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&t);
    gseq_free(&d);
    gseq_free(&sg);
    return c->r_num_raw;
}

static int32_t get_int_raw(struct conv *c)
{
    if (c->r_int_raw >= 0)
        return c->r_int_raw;
    struct gseq s = {0}, t = {0};
    seq_byte(c, &t, '-');
    seq_opt(c, &s, &t);
    gseq_ref(&s, get_int_part(c));
    c->r_int_raw = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&t);
    return c->r_int_raw;
}

// rule ::= <ref> space
static int32_t with_space(struct conv *c, int32_t raw)
{
    struct gseq s = {0};
    gseq_ref(&s, raw);
    gseq_ref(&s, get_space(c));
    int32_t r = rule_from_seq(c, &s);
    gseq_free(&s);
    return r;
}

// rule ::= "literal" space
static int32_t lit_space(struct conv *c, const char *lit, size_t n)
{
    struct gseq s = {0};
    gseq_lit(&c->b, &s, lit, n);
    gseq_ref(&s, get_space(c));
    int32_t r = rule_from_seq(c, &s);
    gseq_free(&s);
    return r;
}

static int32_t get_string(struct conv *c)
{
    return c->r_string >= 0 ? c->r_string : (c->r_string = with_space(c, get_str_raw(c)));
}
static int32_t get_number(struct conv *c)
{
    return c->r_number >= 0 ? c->r_number : (c->r_number = with_space(c, get_num_raw(c)));
}
static int32_t get_integer(struct conv *c)
{
    return c->r_integer >= 0 ? c->r_integer : (c->r_integer = with_space(c, get_int_raw(c)));
}
static int32_t get_null(struct conv *c)
{
    return c->r_null >= 0 ? c->r_null : (c->r_null = lit_space(c, "null", 4));
}
static int32_t get_boolean(struct conv *c)
{
    if (c->r_boolean >= 0)
        return c->r_boolean;
    int32_t r = c->r_boolean = gb_rule(&c->b);
    struct gseq s = {0};
    seq_str(c, &s, "true");
    gseq_ref(&s, get_space(c));
    gb_alt(&c->b, r, &s);
    gseq_reset(&s);
    seq_str(c, &s, "false");
    gseq_ref(&s, get_space(c));
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    return r;
}

static int32_t get_value(struct conv *c);

// open space ( item ("," space item)* )? close space
static int32_t list_rule(struct conv *c, char open, char close, const struct gseq *item)
{
    struct gseq s = {0}, body = {0}, tail = {0};
    seq_byte(c, &s, open);
    gseq_ref(&s, get_space(c));
    gseq_cat(&body, item);
    seq_byte(c, &tail, ',');
    gseq_ref(&tail, get_space(c));
    gseq_cat(&tail, item);
    seq_repeat(c, &body, &tail, 0, -1);
    seq_opt(c, &s, &body);
    seq_byte(c, &s, close);
    gseq_ref(&s, get_space(c));
    int32_t r = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&body);
    gseq_free(&tail);
    return r;
}

static int32_t get_object(struct conv *c)
{
    if (c->r_object >= 0)
        return c->r_object;
    // reserve the id first: value and object refer to each other
    int32_t r = c->r_object = gb_rule(&c->b);
    struct gseq kv = {0};
    gseq_ref(&kv, get_string(c));
    seq_byte(c, &kv, ':');
    gseq_ref(&kv, get_space(c));
    gseq_ref(&kv, get_value(c));
    int32_t body = list_rule(c, '{', '}', &kv);
    struct gseq s = {0};
    gseq_ref(&s, body);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    gseq_free(&kv);
    return r;
}

static int32_t get_array(struct conv *c)
{
    if (c->r_array >= 0)
        return c->r_array;
    int32_t r = c->r_array = gb_rule(&c->b);
    struct gseq item = {0}, s = {0};
    gseq_ref(&item, get_value(c));
    gseq_ref(&s, list_rule(c, '[', ']', &item));
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    gseq_free(&item);
    return r;
}

static int32_t get_value(struct conv *c)
{
    if (c->r_value >= 0)
        return c->r_value;
    int32_t r = c->r_value = gb_rule(&c->b);
    int32_t alts[6] = {get_object(c), get_array(c),   get_string(c),
                       get_number(c), get_boolean(c), get_null(c)};
    struct gseq s = {0};
    for (int i = 0; i < 6; i++) {
        gseq_reset(&s);
        gseq_ref(&s, alts[i]);
        gb_alt(&c->b, r, &s);
    }
    gseq_free(&s);
    return r;
}

// ---------------------------------------------------------------------------
// format: "json" (§6.3), with its own unbounded whitespace.

static int32_t json_format_grammar(struct conv *c)
{
    struct gbuilder *b = &c->b;
    int32_t ws = gb_rule(b), value = gb_rule(b), object = gb_rule(b), array = gb_rule(b);
    struct gseq s = {0}, t = {0}, u = {0};
    // ws ::= ([ \t\n] ws)?
    uint64_t wsset[4] = {0};
    set_add_range(wsset, ' ', ' ');
    set_add_range(wsset, '\t', '\n');
    gseq_set(b, &s, wsset);
    gseq_ref(&s, ws);
    gb_alt(b, ws, &s);
    gseq_reset(&s);
    gb_alt(b, ws, &s);
    // value ::= object | array | string | number | ("true" | "false" | "null") ws
    int32_t refs[4] = {object, array, get_str_raw(c), get_num_raw(c)};
    for (int i = 0; i < 4; i++) {
        gseq_reset(&s);
        gseq_ref(&s, refs[i]);
        gb_alt(b, value, &s);
    }
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        gseq_reset(&s);
        seq_str(c, &s, lits[i]);
        gseq_ref(&s, ws);
        gb_alt(b, value, &s);
    }
    // object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? ws "}"
    struct gseq kv = {0};
    gseq_ref(&kv, get_str_raw(c));
    seq_byte(c, &kv, ':');
    gseq_ref(&kv, ws);
    gseq_ref(&kv, value);
    for (int arr = 0; arr < 2; arr++) {
        gseq_reset(&s);
        gseq_reset(&t);
        gseq_reset(&u);
        const struct gseq *item = arr ? NULL : &kv;
        struct gseq vitem = {0};
        if (arr) {
            gseq_ref(&vitem, value);
            item = &vitem;
        }
        seq_byte(c, &s, arr ? '[' : '{');
        gseq_ref(&s, ws);
        gseq_cat(&t, item);
        seq_byte(c, &u, ',');
        gseq_ref(&u, ws);
        gseq_cat(&u, item);
        seq_repeat(c, &t, &u, 0, -1);
        seq_opt(c, &s, &t);
        gseq_ref(&s, ws);
        seq_byte(c, &s, arr ? ']' : '}');
        gb_alt(b, arr ? array : object, &s);
        gseq_free(&vitem);
    }
    gseq_free(&kv);
    gseq_free(&s);
    gseq_free(&t);
    gseq_free(&u);
    return object;  // root ::= object
}

// ---------------------------------------------------------------------------
// Schema nodes.

static int32_t conv_schema(struct conv *c, const json_t *s);

// Keywords that constrain values in ways this translation does not enforce.
static const char *const reject_words[] = {
    "not",
    "if",
    "then",
    "else",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "$dynamicRef",
    "$recursiveRef",
};

static bool has_bounds(const json_t *s)
{
    return json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
           json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum");
}

static bool is_constraint_word(const char *k)
{
    static const char *const words[] = {"type",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "minItems",
                                        "maxItems",
                                        "enum",
                                        "const",
                                        "anyOf",
                                        "oneOf",
                                        "$ref",
                                        "minLength",
                                        "maxLength",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum",
                                        "allOf",
                                        "prefixItems",
                                        "pattern"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcmp(k, words[i]) == 0)
            return true;
    return false;
}

static int32_t literal_rule(struct conv *c, const json_t *v)
{
    char *txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!txt)
        return conv_fail(c, ERR_INVALID, "cannot encode enum/const value", NULL);
    int32_t r = lit_space(c, txt, strlen(txt));
    free(txt);
    return r;
}

// The literals lits[0..n) (sorted, distinct, sharing their first d bytes) from byte d on, as
// a trie of rules: one stack whatever the number of literals.
static int32_t literal_trie_rule(struct conv *c, char **lits, size_t n, size_t d)
{
    int32_t r = gb_rule(&c->b);
    struct gseq s = {0};
    size_t i = 0;
    while (i < n) {
        if (strlen(lits[i]) == d) {
            gseq_reset(&s);
            gb_alt(&c->b, r, &s);  // this literal ends here
            i++;
            continue;
        }
        uint8_t b = (uint8_t)lits[i][d];
        size_t j = i;
        while (j < n && strlen(lits[j]) > d && (uint8_t)lits[j][d] == b)
            j++;
        gseq_reset(&s);
        seq_byte(c, &s, b);
        gseq_ref(&s, literal_trie_rule(c, lits + i, j - i, d + 1));
        gb_alt(&c->b, r, &s);
        i = j;
    }
    gseq_free(&s);
    return r;
}

static int32_t enum_rule(struct conv *c, const json_t *values)
{
    size_t n = json_array_size(values), k = 0;
    char **lits = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        lits[k] = json_dumps(json_array_get(values, i), JSON_COMPACT | JSON_ENCODE_ANY);
        if (!lits[k]) {
            conv_fail(c, ERR_INVALID, "cannot encode enum value", NULL);
            continue;
        }
        k++;
    }
    qsort(lits, k, sizeof(char *), cmp_cstr);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        if (u > 0 && strcmp(lits[u - 1], lits[i]) == 0) {
            free(lits[i]);
            continue;
        }
        lits[u++] = lits[i];
    }
    int32_t r = 0;
    if (u > 0 && c->rc == 0) {
        struct gseq s = {0};
        gseq_ref(&s, literal_trie_rule(c, lits, u, 0));
        gseq_ref(&s, get_space(c));
        r = rule_from_seq(c, &s);
        gseq_free(&s);
    }
    for (size_t i = 0; i < u; i++)
        free(lits[i]);
    free(lits);
    return r;
}

static int32_t alt_rule(struct conv *c, const int32_t *rules, size_t n)
{
    int32_t r = gb_rule(&c->b);
    struct gseq s = {0};
    for (size_t i = 0; i < n; i++) {
        gseq_reset(&s);
        gseq_ref(&s, rules[i]);
        gb_alt(&c->b, r, &s);
    }
    gseq_free(&s);
    return r;
}

// JSON pointer inside the root document ("#", "#/$defs/x", "#/definitions/a~1b").
static const json_t *resolve_ref(struct conv *c, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const json_t *cur = c->doc;
    const char *p = ref + 1;
    if (*p == '\0')
        return cur;
    if (*p != '/')
        return NULL;
    char tok[512];
    while (*p == '/' && cur) {
        p++;
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1'))
                ch = *p++ == '0' ? '~' : '/';
            if (n + 1 >= sizeof(tok))
                return NULL;
            tok[n++] = ch;
        }
        tok[n] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            long idx = strtol(tok, &end, 10);
            cur = (*end || n == 0 || idx < 0) ? NULL : json_array_get(cur, (size_t)idx);
        } else {
            cur = NULL;
        }
    }
    return cur;
}

static int32_t conv_ref(struct conv *c, const char *ref)
{
    const json_t *t = resolve_ref(c, ref);
    if (!t)
        return conv_fail(c, ERR_INVALID, "unresolvable $ref (only local refs are supported):", ref);
    for (int32_t i = 0; i < c->n_refs; i++)
        if (c->refs[i].target == t)
            return c->refs[i].rule;
    int32_t r = gb_rule(&c->b);
    c->refs = xrealloc(c->refs, ((size_t)c->n_refs + 1) * sizeof(*c->refs));
    c->refs[c->n_refs++] = (struct ref_memo){t, r};
    int32_t body = conv_schema(c, t);
    struct gseq s = {0};
    gseq_ref(&s, body);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    return r;
}

static int64_t int_field(struct conv *c, const json_t *s, const char *k, int64_t dflt)
{
    const json_t *v = json_object_get(s, k);
    if (!v)
        return dflt;
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 1e9 &&
        json_real_value(v) == (double)(int64_t)json_real_value(v))
        return (int64_t)json_real_value(v);
    conv_fail(c, ERR_INVALID, "must be a non-negative integer:", k);
    return dflt;
}

// prefixItems (or draft-4 tuple "items"): exactly those items, in order — always valid,
// since further items are optional.
static int32_t conv_tuple(struct conv *c, const json_t *s, const json_t *parts)
{
    size_t n = json_array_size(parts);
    int64_t lo = int_field(c, s, "minItems", 0), hi = int_field(c, s, "maxItems", -1);
    if (lo > (int64_t)n || (hi >= 0 && hi < (int64_t)n))
        return conv_fail(c, ERR_UNSUPPORTED,
                         "minItems/maxItems other than the number of prefixItems", NULL);
    struct gseq q = {0};
    seq_byte(c, &q, '[');
    gseq_ref(&q, get_space(c));
    for (size_t i = 0; i < n && c->rc == 0; i++) {
        int32_t r = conv_schema(c, json_array_get(parts, i));
        if (i) {
            seq_byte(c, &q, ',');
            gseq_ref(&q, get_space(c));
        }
        gseq_ref(&q, r);
    }
    seq_byte(c, &q, ']');
    gseq_ref(&q, get_space(c));
    int32_t r = rule_from_seq(c, &q);
    gseq_free(&q);
    return r;
}

static int32_t conv_array(struct conv *c, const json_t *s)
{
    const json_t *items = json_object_get(s, "items");
    const json_t *prefix = json_object_get(s, "prefixItems");
    if (prefix && !json_is_array(prefix))
        return conv_fail(c, ERR_INVALID, "prefixItems must be an array", NULL);
    if (prefix)
        return conv_tuple(c, s, prefix);
    if (items && json_is_array(items))
        return conv_tuple(c, s, items);
    int64_t lo = int_field(c, s, "minItems", 0), hi = int_field(c, s, "maxItems", -1);
    if (hi >= 0 && hi < lo)
        return conv_fail(c, ERR_INVALID, "maxItems is smaller than minItems", NULL);
    int32_t item = items ? conv_schema(c, items) : get_value(c);
    struct gseq s1 = {0}, body = {0}, tail = {0}, it = {0};
    seq_byte(c, &s1, '[');
    gseq_ref(&s1, get_space(c));
    if (hi != 0) {
        gseq_ref(&body, item);
        seq_byte(c, &tail, ',');
        gseq_ref(&tail, get_space(c));
        gseq_ref(&tail, item);
        seq_repeat(c, &body, &tail, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
        if (lo == 0)
            seq_opt(c, &s1, &body);
        else
            gseq_cat(&s1, &body);
    }
    seq_byte(c, &s1, ']');
    gseq_ref(&s1, get_space(c));
    int32_t r = rule_from_seq(c, &s1);
    gseq_free(&s1);
    gseq_free(&body);
    gseq_free(&tail);
    gseq_free(&it);
    return r;
}

// Key characters for additional properties: printable ASCII except " and \, or UTF-8.
static int32_t get_plain_char(struct conv *c)
{
    if (c->r_plain_char >= 0)
        return c->r_plain_char;
    int32_t r = c->r_plain_char = gb_rule(&c->b);
    struct gseq s = {0};
    add_plain_alts(c, r, &s);
    gseq_free(&s);
    return r;
}

// rest ::= plain-char* "\""
static int32_t get_key_rest(struct conv *c)
{
    if (c->r_key_rest >= 0)
        return c->r_key_rest;
    struct gseq s = {0}, ch = {0};
    gseq_ref(&ch, get_plain_char(c));
    seq_repeat(c, &s, &ch, 0, -1);
    seq_byte(c, &s, '"');
    c->r_key_rest = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&ch);
    return c->r_key_rest;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Key body (after the opening quote, through the closing quote) for names sharing the
// first d bytes, that never spells one of names[] exactly.
static int32_t key_trie_rule(struct conv *c, const char **names, size_t n, size_t d)
{
    int32_t r = gb_rule(&c->b);
    struct gseq s = {0};
    bool is_end = false, boundary = true, high_child = false;
    // boundary: the common prefix ends on a character boundary
    const char *p0 = names[0];
    for (size_t i = 0; i < d;) {
        uint8_t b = (uint8_t)p0[i];
        size_t l = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        if (i + l > d)
            boundary = false;
        i += l;
    }
    uint64_t children[4] = {0};
    size_t i = 0;
    while (i < n) {
        if (strlen(names[i]) == d) {
            is_end = true;
            i++;
            continue;
        }
        uint8_t b = (uint8_t)names[i][d];
        size_t j = i;
        while (j < n && strlen(names[j]) > d && (uint8_t)names[j][d] == b)
            j++;
        set_add_range(children, b, b);
        if (b >= 0x80)
            high_child = true;
        int32_t sub = key_trie_rule(c, names + i, j - i, d + 1);
        gseq_reset(&s);
        seq_byte(c, &s, b);
        gseq_ref(&s, sub);
        gb_alt(&c->b, r, &s);
        i = j;
    }
    if (boundary) {
        uint64_t plain[4] = {0};
        set_add_range(plain, 0x20, 0x7E);
        plain[0] &= ~(1ull << '"');
        plain[1] &= ~(1ull << ('\\' - 64));
        for (int k = 0; k < 4; k++)
            plain[k] &= ~children[k];
        gseq_reset(&s);
        gseq_set(&c->b, &s, plain);
        gseq_ref(&s, get_key_rest(c));
        gb_alt(&c->b, r, &s);
        if (!high_child) {
            gseq_reset(&s);
            gseq_ref(&s, get_u8(c));
            gseq_ref(&s, get_key_rest(c));
            gb_alt(&c->b, r, &s);
        }
        if (!is_end) {
            gseq_reset(&s);
            seq_byte(c, &s, '"');
            gb_alt(&c->b, r, &s);
        }
    }
    gseq_free(&s);
    return r;
}

// An object key that is not one of the declared names (no escapes), then space.
static int32_t other_key_rule(struct conv *c, const json_t *props)
{
    size_t n = props ? json_object_size(props) : 0;
    const char **names = xmalloc((n + 1) * sizeof(char *));
    size_t k = 0;
    const char *key;
    const json_t *val;
    if (props) {
        json_object_foreach((json_t *)props, key, val)
        {
            bool plain = true;
            for (const char *p = key; *p; p++)
                if ((uint8_t)*p < 0x20 || *p == '"' || *p == '\\' || *p == 0x7F)
                    plain = false;
            if (plain)
                names[k++] = key;
        }
    }
    struct gseq s = {0};
    seq_byte(c, &s, '"');
    if (k == 0) {
        gseq_ref(&s, get_key_rest(c));
    } else {
        qsort(names, k, sizeof(*names), cmp_cstr);
        gseq_ref(&s, key_trie_rule(c, names, k, 0));
    }
    gseq_ref(&s, get_space(c));
    int32_t r = rule_from_seq(c, &s);
    gseq_free(&s);
    free(names);
    return r;
}

// "\"name\"" space ":" space value
static void seq_kv(struct conv *c, struct gseq *s, const char *name, int32_t value)
{
    json_t *js = json_string(name);
    char *txt = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
    json_decref(js);
    if (!txt) {
        conv_fail(c, ERR_INVALID, "property name is not valid UTF-8", NULL);
        return;
    }
    seq_str(c, s, txt);
    free(txt);
    gseq_ref(s, get_space(c));
    seq_byte(c, s, ':');
    gseq_ref(s, get_space(c));
    gseq_ref(s, value);
}

// One property of an object schema, in the order the grammar writes them.
struct obj_item {
    const char *name;
    const json_t *schema;  // NULL → any value
    bool required;
};

// The declared properties whose being required equals want_required, in
// schema order, appended at items[n]; returns the new count.
static size_t add_declared(const json_t *props, const json_t *req, size_t n_req, bool want_required,
                           struct obj_item *items, size_t n)
{
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)props, key, val)
    {
        bool is_req = false;
        for (size_t i = 0; i < n_req; i++)
            if (strcmp(json_string_value(json_array_get(req, i)), key) == 0)
                is_req = true;
        if (is_req == want_required)
            items[n++] = (struct obj_item){key, val, is_req};
    }
    return n;
}

// The names listed in "required" but not declared, each once, appended at
// items[n]; returns the new count.
static size_t add_undeclared_required(const json_t *props, const json_t *req, size_t n_req,
                                      struct obj_item *items, size_t n)
{
    for (size_t i = 0; i < n_req; i++) {
        const char *name = json_string_value(json_array_get(req, i));
        bool dup = false;
        for (size_t j = 0; j < n; j++)
            dup |= strcmp(items[j].name, name) == 0;
        if (!dup && !(props && json_object_get(props, name)))
            items[n++] = (struct obj_item){name, NULL, true};
    }
    return n;
}

// The items in output order: required (schema order, then undeclared
// required names), then optional. NULL when "required" lists a non-string.
static struct obj_item *object_items(struct conv *c, const json_t *props, const json_t *req,
                                     size_t n_req, size_t *out_n)
{
    size_t n_props = props ? json_object_size(props) : 0;
    struct obj_item *items = xcalloc(n_props + n_req + 1, sizeof(*items));
    for (size_t i = 0; i < n_req; i++)
        if (!json_is_string(json_array_get(req, i))) {
            free(items);
            conv_fail(c, ERR_INVALID, "\"required\" must list strings", NULL);
            return NULL;
        }
    size_t n = 0;
    if (props)
        n = add_declared(props, req, n_req, true, items, n);
    n = add_undeclared_required(props, req, n_req, items, n);
    if (props)
        n = add_declared(props, req, n_req, false, items, n);
    *out_n = n;
    return items;
}

// Each property i gets alternatives in F_i (nothing written yet) and T_i
// (something written: a comma comes first); an optional one may be skipped.
static void object_item_rules(struct conv *c, const struct obj_item *items, size_t n,
                              const int32_t *f, const int32_t *t)
{
    struct gseq q = {0};
    for (size_t i = 0; i < n && c->rc == 0; i++) {
        int32_t v = items[i].schema ? conv_schema(c, items[i].schema) : get_value(c);
        gseq_reset(&q);
        seq_kv(c, &q, items[i].name, v);
        gseq_ref(&q, t[i + 1]);
        gb_alt(&c->b, f[i], &q);
        gseq_reset(&q);
        seq_byte(c, &q, ',');
        gseq_ref(&q, get_space(c));
        seq_kv(c, &q, items[i].name, v);
        gseq_ref(&q, t[i + 1]);
        gb_alt(&c->b, t[i], &q);
        if (!items[i].required) {
            gseq_reset(&q);
            gseq_ref(&q, f[i + 1]);
            gb_alt(&c->b, f[i], &q);
            gseq_reset(&q);
            gseq_ref(&q, t[i + 1]);
            gb_alt(&c->b, t[i], &q);
        }
    }
    gseq_free(&q);
}

// The tail F_n / T_n: additional properties (any number), when allowed, or
// nothing.
static void object_tail_rules(struct conv *c, const json_t *add, const json_t *props, int32_t fn,
                              int32_t tn)
{
    struct gseq q = {0}, empty = {0};
    if (add && (json_is_true(add) || json_is_object(add)) && c->rc == 0) {
        int32_t v = json_is_object(add) ? conv_schema(c, add) : get_value(c);
        int32_t k = other_key_rule(c, props);
        // F_n ::= K ":" space V T_n | ε ; T_n ::= "," space K ":" space V T_n | ε
        for (int started = 0; started < 2; started++) {
            gseq_reset(&q);
            if (started) {
                seq_byte(c, &q, ',');
                gseq_ref(&q, get_space(c));
            }
            gseq_ref(&q, k);
            seq_byte(c, &q, ':');
            gseq_ref(&q, get_space(c));
            gseq_ref(&q, v);
            gseq_ref(&q, tn);
            gb_alt(&c->b, started ? tn : fn, &q);
        }
    }
    gb_alt(&c->b, fn, &empty);
    gb_alt(&c->b, tn, &empty);
    gseq_free(&q);
}

static int32_t conv_object(struct conv *c, const json_t *s)
{
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return conv_fail(c, ERR_INVALID, "\"properties\" must be an object", NULL);
    if (req && !json_is_array(req))
        return conv_fail(c, ERR_INVALID, "\"required\" must be an array", NULL);
    if (add && !json_is_boolean(add) && !json_is_object(add))
        return conv_fail(c, ERR_INVALID, "\"additionalProperties\" must be a boolean or schema",
                         NULL);
    size_t n_req = req ? json_array_size(req) : 0;
    if (!props && n_req == 0 && (!add || json_is_true(add)))
        return get_object(c);

    size_t n;
    struct obj_item *items = object_items(c, props, req, n_req, &n);
    if (!items)
        return 0;  // the error is in c->rc
    int32_t *f = xmalloc((n + 1) * sizeof(int32_t)), *t = xmalloc((n + 1) * sizeof(int32_t));
    for (size_t i = 0; i <= n; i++) {
        f[i] = gb_rule(&c->b);
        t[i] = gb_rule(&c->b);
    }
    object_item_rules(c, items, n, f, t);
    object_tail_rules(c, add, props, f[n], t[n]);
    struct gseq q = {0};
    seq_byte(c, &q, '{');
    gseq_ref(&q, get_space(c));
    gseq_ref(&q, f[0]);
    seq_byte(c, &q, '}');
    gseq_ref(&q, get_space(c));
    int32_t r = rule_from_seq(c, &q);
    gseq_free(&q);
    free(f);
    free(t);
    free(items);
    return r;
}

static int32_t get_date(struct conv *c)
{
    if (c->r_date >= 0)
        return c->r_date;
    // [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1])
    struct gseq s = {0}, d = {0}, a = {0};
    gseq_range(&c->b, &d, '0', '9');
    seq_repeat(c, &s, &d, 4, 4);
    seq_byte(c, &s, '-');
    int32_t month = gb_rule(&c->b), day = gb_rule(&c->b);
    static const char m_alts[][4] = {"019", "102"};  // first char, range lo, range hi
    for (int i = 0; i < 2; i++) {
        gseq_reset(&a);
        seq_byte(c, &a, m_alts[i][0]);
        gseq_range(&c->b, &a, m_alts[i][1], m_alts[i][2]);
        gb_alt(&c->b, month, &a);
    }
    gseq_reset(&a);
    seq_byte(c, &a, '0');
    gseq_range(&c->b, &a, '1', '9');
    gb_alt(&c->b, day, &a);
    gseq_reset(&a);
    gseq_range(&c->b, &a, '1', '2');
    gseq_range(&c->b, &a, '0', '9');
    gb_alt(&c->b, day, &a);
    gseq_reset(&a);
    seq_byte(c, &a, '3');
    gseq_range(&c->b, &a, '0', '1');
    gb_alt(&c->b, day, &a);
    gseq_ref(&s, month);
    seq_byte(c, &s, '-');
    gseq_ref(&s, day);
    c->r_date = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&d);
    gseq_free(&a);
    return c->r_date;
}

static int32_t get_time(struct conv *c)
{
    if (c->r_time >= 0)
        return c->r_time;
    // ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3})?
    // ("Z" | ("+" | "-") ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
    int32_t hour = gb_rule(&c->b), zone = gb_rule(&c->b);
    struct gseq s = {0}, a = {0}, d = {0};
    gseq_range(&c->b, &a, '0', '1');
    gseq_range(&c->b, &a, '0', '9');
    gb_alt(&c->b, hour, &a);
    gseq_reset(&a);
    seq_byte(c, &a, '2');
    gseq_range(&c->b, &a, '0', '3');
    gb_alt(&c->b, hour, &a);
    gseq_ref(&s, hour);
    for (int i = 0; i < 2; i++) {
        seq_byte(c, &s, ':');
        gseq_range(&c->b, &s, '0', '5');
        gseq_range(&c->b, &s, '0', '9');
    }
    gseq_reset(&a);
    seq_byte(c, &a, '.');
    gseq_range(&c->b, &d, '0', '9');
    seq_repeat(c, &a, &d, 3, 3);
    seq_opt(c, &s, &a);
    gseq_reset(&a);
    seq_byte(c, &a, 'Z');
    gb_alt(&c->b, zone, &a);
    gseq_reset(&a);
    uint64_t sign[4] = {0};
    set_add_range(sign, '+', '+');
    set_add_range(sign, '-', '-');
    gseq_set(&c->b, &a, sign);
    gseq_ref(&a, hour);
    seq_byte(c, &a, ':');
    gseq_range(&c->b, &a, '0', '5');
    gseq_range(&c->b, &a, '0', '9');
    gb_alt(&c->b, zone, &a);
    gseq_ref(&s, zone);
    c->r_time = rule_from_seq(c, &s);
    gseq_free(&s);
    gseq_free(&a);
    gseq_free(&d);
    return c->r_time;
}

static int32_t conv_string(struct conv *c, const json_t *s)
{
    const json_t *fmt = json_object_get(s, "format");
    const char *f = json_is_string(fmt) ? json_string_value(fmt) : "";
    bool has_len = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
    struct gseq q = {0}, d = {0};
    const json_t *pat = json_object_get(s, "pattern");
    if (pat) {
        if (!json_is_string(pat))
            return conv_fail(c, ERR_INVALID, "pattern must be a string", NULL);
        if (has_len)
            return conv_fail(c, ERR_UNSUPPORTED,
                             "pattern together with minLength/maxLength is not supported", NULL);
        int rc = 0;
        int32_t body = regex_content_rule(&c->b, json_string_value(pat), json_string_length(pat),
                                          get_u8(c), get_char(c), &rc, c->e);
        if (rc) {
            c->rc = rc;
            return 0;
        }
        seq_byte(c, &q, '"');
        gseq_ref(&q, body);
        seq_byte(c, &q, '"');
        gseq_ref(&q, get_space(c));
    } else if (!has_len && (strcmp(f, "date") == 0 || strcmp(f, "time") == 0 ||
                            strcmp(f, "date-time") == 0 || strcmp(f, "uuid") == 0)) {
        seq_byte(c, &q, '"');
        if (strcmp(f, "date") == 0) {
            gseq_ref(&q, get_date(c));
        } else if (strcmp(f, "time") == 0) {
            gseq_ref(&q, get_time(c));
        } else if (strcmp(f, "date-time") == 0) {
            gseq_ref(&q, get_date(c));
            seq_byte(c, &q, 'T');
            gseq_ref(&q, get_time(c));
        } else {
            static const int groups[] = {8, 4, 4, 4, 12};
            for (int g = 0; g < 5; g++) {
                if (g)
                    seq_byte(c, &q, '-');
                gseq_reset(&d);
                seq_hex(c, &d);
                seq_repeat(c, &q, &d, groups[g], groups[g]);
            }
        }
        seq_byte(c, &q, '"');
        gseq_ref(&q, get_space(c));
    } else if (!has_len) {
        gseq_free(&q);
        return get_string(c);
    } else {
        int64_t lo = int_field(c, s, "minLength", 0), hi = int_field(c, s, "maxLength", -1);
        if (hi >= 0 && hi < lo)
            conv_fail(c, ERR_INVALID, "maxLength is smaller than minLength", NULL);
        seq_byte(c, &q, '"');
        gseq_ref(&d, get_char(c));
        seq_repeat(c, &q, &d, lo, hi);
        seq_byte(c, &q, '"');
        gseq_ref(&q, get_space(c));
    }
    int32_t r = rule_from_seq(c, &q);
    gseq_free(&q);
    gseq_free(&d);
    return r;
}

// ---------------------------------------------------------------------------
// Integer ranges (§6.4 "Integer ranges"): digit strings of equal length between lo and hi
// split on the first differing digit; lengths are covered one by one; negative ranges get
// a "-" and mirrored bounds. Every integer stays within the 16 digits of `integral-part`.

#define INT_RANGE_MAX 9999999999999999ull  // 16 digits

// Digit strings d with lo <= d <= hi, all of length n (lo, hi: n digits each).
static int32_t digits_range(struct conv *c, const char *lo, const char *hi, size_t n)
{
    int32_t r = gb_rule(&c->b);
    struct gseq s = {0};
    if (n == 0 || c->rc) {
        gb_alt(&c->b, r, &s);
        return r;
    }
    static const char zeros[] = "0000000000000000000", nines[] = "9999999999999999999";
    bool lo_min = memcmp(lo + 1, zeros, n - 1) == 0, hi_max = memcmp(hi + 1, nines, n - 1) == 0;
    int a = lo[0], b = hi[0];
    if (a == b) {
        seq_byte(c, &s, a);
        gseq_ref(&s, digits_range(c, lo + 1, hi + 1, n - 1));
        gb_alt(&c->b, r, &s);
    } else {
        if (!lo_min) {
            seq_byte(c, &s, a);
            gseq_ref(&s, digits_range(c, lo + 1, nines, n - 1));
            gb_alt(&c->b, r, &s);
            a++;
        }
        if (!hi_max) {
            gseq_reset(&s);
            seq_byte(c, &s, b);
            gseq_ref(&s, digits_range(c, zeros, hi + 1, n - 1));
            gb_alt(&c->b, r, &s);
            b--;
        }
        if (a <= b) {
            struct gseq d = {0};
            gseq_reset(&s);
            gseq_range(&c->b, &s, a, b);
            gseq_range(&c->b, &d, '0', '9');
            seq_repeat(c, &s, &d, (int64_t)n - 1, (int64_t)n - 1);
            gb_alt(&c->b, r, &s);
            gseq_free(&d);
        }
    }
    gseq_free(&s);
    return r;
}

static size_t n_digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

// Adds to rule r one alternative per digit count covering [a, b] (0 <= a <= b), each
// prefixed with "-" when neg.
static void add_nonneg_range(struct conv *c, int32_t r, uint64_t a, uint64_t b, bool neg)
{
    uint64_t p10 = 1;
    for (size_t len = 1; len <= n_digits(b); len++, p10 *= 10) {
        uint64_t lo = len == 1 ? 0 : p10, hi = p10 * 10 - 1;
        if (lo < a)
            lo = a;
        if (hi > b)
            hi = b;
        if (lo > hi)
            continue;
        char los[24], his[24];
        snprintf(los, sizeof(los), "%llu", (unsigned long long)lo);
        snprintf(his, sizeof(his), "%llu", (unsigned long long)hi);
        struct gseq s = {0};
        if (neg)
            seq_byte(c, &s, '-');
        gseq_ref(&s, digits_range(c, los, his, len));
        gb_alt(&c->b, r, &s);
        gseq_free(&s);
    }
}

static bool bound_value(struct conv *c, const json_t *s, const char *key, double *out)
{
    const json_t *v = json_object_get(s, key);
    if (!v || json_is_boolean(v))
        return false;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        conv_fail(c, ERR_INVALID, "must be a number:", key);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

static int32_t conv_integer(struct conv *c, const json_t *s)
{
    if (!has_bounds(s))
        return get_integer(c);
    double lo = -(double)INT_RANGE_MAX, hi = (double)INT_RANGE_MAX, v;
    // draft 4 spelled exclusive bounds as booleans beside minimum/maximum
    bool excl_min = json_is_true(json_object_get(s, "exclusiveMinimum"));
    bool excl_max = json_is_true(json_object_get(s, "exclusiveMaximum"));
    if (bound_value(c, s, "minimum", &v))
        lo = fmax(lo, excl_min ? floor(v) + 1 : ceil(v));
    if (bound_value(c, s, "exclusiveMinimum", &v))
        lo = fmax(lo, floor(v) + 1);
    if (bound_value(c, s, "maximum", &v))
        hi = fmin(hi, excl_max ? ceil(v) - 1 : floor(v));
    if (bound_value(c, s, "exclusiveMaximum", &v))
        hi = fmin(hi, ceil(v) - 1);
    if (c->rc)
        return 0;
    if (lo > hi)
        return conv_fail(c, ERR_INVALID, "no integer lies within minimum/maximum", NULL);
    int64_t a = (int64_t)lo, b = (int64_t)hi;
    int32_t digits = gb_rule(&c->b);
    if (a < 0)  // negative part: -(1 .. -a) limited by b when b < 0
        add_nonneg_range(c, digits, b < 0 ? (uint64_t)-b : 1, (uint64_t)-a, true);
    if (b >= 0)
        add_nonneg_range(c, digits, a > 0 ? (uint64_t)a : 0, (uint64_t)b, false);
    return with_space(c, digits);
}

static int32_t conv_typed(struct conv *c, const json_t *s, const char *type)
{
    if (strcmp(type, "string") == 0)
        return conv_string(c, s);
    if (strcmp(type, "number") == 0)
        return has_bounds(s) ? conv_fail(c, ERR_UNSUPPORTED,
                                         "minimum/maximum are supported for integers only", NULL)
                             : get_number(c);
    if (strcmp(type, "integer") == 0)
        return conv_integer(c, s);
    if (strcmp(type, "boolean") == 0)
        return get_boolean(c);
    if (strcmp(type, "null") == 0)
        return get_null(c);
    if (strcmp(type, "array") == 0)
        return conv_array(c, s);
    if (strcmp(type, "object") == 0)
        return conv_object(c, s);
    return conv_fail(c, ERR_INVALID, "unknown type:", type);
}

// Fails on a keyword we cannot express; otherwise returns how many of the
// schema's keywords constrain the value (-1 after a failure).
static int count_constraints(struct conv *c, const json_t *s)
{
    const char *key;
    const json_t *val;
    int n_constraints = 0;
    json_object_foreach((json_t *)s, key, val)
    {
        for (size_t i = 0; i < sizeof(reject_words) / sizeof(reject_words[0]); i++)
            if (strcmp(key, reject_words[i]) == 0) {
                conv_fail(c, ERR_UNSUPPORTED, "unsupported keyword:", key);
                return -1;
            }
        n_constraints += is_constraint_word(key);
    }
    return n_constraints;
}

// $ref, or anyOf/oneOf: any one of the listed schemas.
static int32_t conv_ref_or_any(struct conv *c, const json_t *ref, const json_t *any)
{
    if (ref) {
        if (!json_is_string(ref))
            return conv_fail(c, ERR_INVALID, "$ref must be a string", NULL);
        return conv_ref(c, json_string_value(ref));
    }
    if (!json_is_array(any) || json_array_size(any) == 0)
        return conv_fail(c, ERR_INVALID, "anyOf/oneOf must be a non-empty array", NULL);
    size_t n = json_array_size(any);
    int32_t *rules = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        rules[i] = conv_schema(c, json_array_get(any, i));
    int32_t r = alt_rule(c, rules, n);
    free(rules);
    return r;
}

// "type": [...]: a value of any of the listed types.
static int32_t conv_type_list(struct conv *c, const json_t *s, const json_t *type)
{
    size_t n = json_array_size(type);
    if (n == 0)
        return conv_fail(c, ERR_INVALID, "empty type list", NULL);
    int32_t *rules = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(type, i);
        rules[i] = json_is_string(t) ? conv_typed(c, s, json_string_value(t))
                                     : conv_fail(c, ERR_INVALID, "type must be a string", NULL);
    }
    int32_t r = alt_rule(c, rules, n);
    free(rules);
    return r;
}

// No "type": the type the other keywords imply, or any value.
static int32_t conv_implied_type(struct conv *c, const json_t *s)
{
    if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
        json_object_get(s, "required"))
        return conv_object(c, s);
    if (json_object_get(s, "items") || json_object_get(s, "minItems") ||
        json_object_get(s, "maxItems") || json_object_get(s, "prefixItems"))
        return conv_array(c, s);
    if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
        json_object_get(s, "pattern"))
        return conv_string(c, s);
    if (has_bounds(s))
        return conv_fail(c, ERR_UNSUPPORTED, "minimum/maximum need \"type\": \"integer\"", NULL);
    return get_value(c);
}

static int32_t conv_schema_inner(struct conv *c, const json_t *s)
{
    if (json_is_true(s))
        return get_value(c);
    if (json_is_false(s))
        return conv_fail(c, ERR_INVALID, "the schema `false` accepts nothing", NULL);
    if (!json_is_object(s))
        return conv_fail(c, ERR_INVALID, "a schema must be an object", NULL);
    int n_constraints = count_constraints(c, s);
    if (n_constraints < 0)
        return 0;  // the error is in c->rc
    const json_t *all = json_object_get(s, "allOf");
    if (all) {  // one part (as pydantic writes a described $ref) is that part
        if (!json_is_array(all) || json_array_size(all) != 1 || n_constraints > 1)
            return conv_fail(c, ERR_UNSUPPORTED,
                             "allOf is supported with a single schema and no other keywords", NULL);
        return conv_schema(c, json_array_get(all, 0));
    }
    const json_t *ref = json_object_get(s, "$ref");
    const json_t *any = json_object_get(s, "anyOf");
    if (!any)
        any = json_object_get(s, "oneOf");
    if (ref || any) {
        if (n_constraints > 1)
            return conv_fail(c, ERR_UNSUPPORTED,
                             "$ref/anyOf/oneOf combined with other keywords is not supported",
                             NULL);
        return conv_ref_or_any(c, ref, any);
    }
    const json_t *cst = json_object_get(s, "const");
    if (cst)
        return literal_rule(c, cst);
    const json_t *en = json_object_get(s, "enum");
    if (en) {
        if (!json_is_array(en) || json_array_size(en) == 0)
            return conv_fail(c, ERR_INVALID, "enum must be a non-empty array", NULL);
        return enum_rule(c, en);
    }
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type))
        return conv_typed(c, s, json_string_value(type));
    if (json_is_array(type))
        return conv_type_list(c, s, type);
    if (type)
        return conv_fail(c, ERR_INVALID, "type must be a string or an array", NULL);
    return conv_implied_type(c, s);
}

static int32_t conv_schema(struct conv *c, const json_t *s)
{
    if (c->rc)
        return 0;
    if (++c->depth > SCHEMA_MAX_DEPTH) {
        c->depth--;
        return conv_fail(c, ERR_INVALID, "schema nested too deeply", NULL);
    }
    int32_t r = conv_schema_inner(c, s);
    c->depth--;
    return r;
}

// ---------------------------------------------------------------------------

static void conv_init(struct conv *c, const json_t *doc, struct err *e)
{
    memset(c, 0, sizeof(*c));
    gb_init(&c->b);
    c->doc = doc;
    c->e = e;
    int32_t *shared[] = {
        &c->r_space,    &c->r_u8,      &c->r_hex,      &c->r_u4,     &c->r_char,   &c->r_str_raw,
        &c->r_num_raw,  &c->r_int_raw, &c->r_int_part, &c->r_string, &c->r_number, &c->r_integer,
        &c->r_boolean,  &c->r_null,    &c->r_value,    &c->r_object, &c->r_array,  &c->r_plain_char,
        &c->r_key_rest, &c->r_date,    &c->r_time};
    for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
        *shared[i] = -1;
}

static int invalid_format(const json_t *format, struct err *e)
{
    char *txt = json_dumps(format, JSON_COMPACT | JSON_ENCODE_ANY);
    const char *shown = txt ? txt : "?";
    if (json_is_string(format))
        shown = json_string_value(format);
    int rc = err_set(e, ERR_INVALID,
                     "invalid format: \"%.120s\"; expected \"json\" or a valid JSON Schema object",
                     shown);
    free(txt);
    return rc;
}

int sample_format_compile(struct sample_grammar **out, const json_t *format, struct err *e)
{
    *out = NULL;
    if (!format || json_is_null(format))
        return 0;
    if (json_is_string(format)) {
        const char *s = json_string_value(format);
        if (!*s)
            return 0;
        if (strcmp(s, "json") != 0)
            return invalid_format(format, e);
    } else if (!json_is_object(format)) {
        return invalid_format(format, e);
    }
    struct conv c;
    conv_init(&c, format, e);
    int32_t root = json_is_string(format) ? json_format_grammar(&c) : conv_schema(&c, format);
    int rc = c.rc;
    if (rc == 0) {
        rc = gb_finish(&c.b, root, out, e);
        if (rc < 0)
            err_prefix(e, "invalid JSON schema in format");
    }
    if (rc == 0) {  // the start state must fit the matcher's bounds
        struct gstate st = {0};
        if (gstate_start(*out, &st) <= 0) {
            sample_grammar_free(*out);
            *out = NULL;
            rc = err_set(e, ERR_UNSUPPORTED,
                         "invalid JSON schema in format: too many alternatives at the start");
        }
        gstate_free(&st);
    }
    gb_deinit(&c.b);
    free(c.refs);
    return rc;
}

int sample_format_compile_text(struct sample_grammar **out, const char *text, size_t len,
                               struct err *e)
{
    *out = NULL;
    json_t *v = NULL;
    int rc = jsonx_parse(text, len, &v, e);
    if (rc < 0) {
        err_prefix(e, "invalid format");
        return rc;
    }
    rc = sample_format_compile(out, v, e);
    json_decref(v);
    return rc;
}

// template internals shared by the module's files: tokens, the parse tree,
// runtime values and the evaluator's entry points. Nothing here is public.
#pragma once

#include "template/template.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

// ---------------------------------------------------------------------------
// Limits that keep hostile templates and data cheap.

#define TMPL_MAX_DEPTH  200          // nested parse constructs and template calls
#define TMPL_MAX_STEPS  5000000      // evaluation steps per execution
#define TMPL_MAX_OUTPUT (64u << 20)  // bytes of rendered output
#define TMPL_MAX_SOURCE (4u << 20)   // bytes of template source

// ---------------------------------------------------------------------------
// Lexer

enum tok_type {
    T_EOF,
    T_TEXT,
    T_LDELIM,
    T_RDELIM,
    T_SPACE,
    T_IDENT,
    T_FIELD,   // ".Name" (text without the dot)
    T_VAR,     // "$" or "$name"
    T_STRING,  // decoded value
    T_CHAR,    // value in num
    T_NUMBER,  // text
    T_BOOL,
    T_NIL,
    T_DOT,
    T_LPAREN,
    T_RPAREN,
    T_PIPE,
    T_COMMA,
    T_DECLARE,
    T_ASSIGN,
    // keywords
    T_IF,
    T_ELSE,
    T_END,
    T_RANGE,
    T_WITH,
    T_BREAK,
    T_CONTINUE,
    T_DEFINE,
    T_TEMPLATE,
    T_BLOCK,
};

struct tok {
    int type;
    const char *s;  // text (for T_STRING: decoded bytes in the arena)
    size_t n;
    int64_t num;    // T_CHAR code point, T_BOOL value
    int line, col;  // 1-based line, 0-based byte column (Go's ErrorContext)
};

struct toks {
    struct tok *v;
    size_t n, cap;
};

int tmpl_lex(const char *src, size_t len, struct arena *a, struct toks *out, struct err *e);

// ---------------------------------------------------------------------------
// Values

enum tv_kind {
    TV_NIL,  // absent value / nil: prints "<no value>"
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_COMPLEX,
    TV_STR,
    TV_JSON,  // a json_t seen through a schema (lists, maps, API objects)
};

// How a json_t is seen by templates (the Go types of upstream's data).
enum schema {
    S_GENERIC,   // any JSON: objects are maps, arrays lists, numbers float64
    S_ROOT,      // the root map
    S_MSGS,      // []Message
    S_MSG,       // Message
    S_TCS,       // []ToolCall
    S_TC,        // ToolCall
    S_TCFUNC,    // ToolCallFunction
    S_ARGS,      // map[string]any, prints as JSON
    S_TOOLS,     // []Tool, prints as JSON (null when empty)
    S_TOOL,      // Tool
    S_TFUNC,     // ToolFunction
    S_PARAMS,    // ToolFunctionParameters
    S_PROPS,     // map[string]ToolProperty
    S_PROP,      // ToolProperty
    S_PROPLIST,  // []ToolProperty (anyOf)
    S_PTYPE,     // PropertyType ([]string)
};

struct tval {
    int kind;
    int schema;  // TV_JSON
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            double re, im;
        } c;
        struct {
            const char *p;
            size_t n;
        } s;
        struct {
            json_t *j;      // may be NULL: a nil list/map or a zero struct
            size_t lo, hi;  // list window (slice)
        } j;
    } u;
};

static inline struct tval tv_nil(void)
{
    return (struct tval){.kind = TV_NIL};
}

bool tv_is_list(const struct tval *v);
bool tv_is_map(const struct tval *v);
bool tv_is_struct(const struct tval *v);
size_t tv_list_len(const struct tval *v);
bool tv_truth(const struct tval *v);
struct tval tv_from_json(json_t *j, int schema);
struct tval tv_list_at(const struct tval *v, size_t i);
const char *tv_type_name(const struct tval *v);

// fmt.Sprint of one value (the {{ pipeline }} printing rules); nested: as an
// element inside a list or map (nil prints "<nil>").
int tv_print(struct buf *b, const struct tval *v);
int tv_print_nested(struct buf *b, const struct tval *v);
// Field of a struct-like value (message, tool, ...); false when no such field.
bool tv_struct_field(const struct tval *v, const char *name, struct tval *out);
// Go's encoding/json of a value (HTML-escaped, sorted map keys, struct order).
int tv_json(struct buf *b, const struct tval *v);
// Go's float formatting: verb 'g'/'v' with prec < 0 is the shortest
// round-trip form (%v: exponent when exp < -4 or >= 6); otherwise C's %.*<verb>.
int go_format_float(struct buf *b, double f, char verb, int prec);
// Go's JSON float form.
int go_json_float(struct buf *b, double f);
int go_quote(struct buf *b, const char *s, size_t n);

// Sorted keys of a json object (caller frees the array).
const char **json_sorted_keys(json_t *obj, size_t *n_out);

// ---------------------------------------------------------------------------
// Parse tree

enum node_type {
    N_LIST,
    N_TEXT,
    N_ACTION,
    N_IF,
    N_RANGE,
    N_WITH,
    N_TEMPLATE,
    N_BREAK,
    N_CONTINUE,
    // inside pipelines
    N_PIPE,
    N_CMD,
    N_FIELD,  // .A.B: idents
    N_VAR,    // $x.A: idents[0] = "$x"
    N_DOT,
    N_NIL,
    N_BOOL,
    N_NUM,
    N_STR,
    N_IDENT,  // function name
    N_CHAIN,  // (pipe).A.B: sub + idents
};

struct node {
    int type;
    int line, col;
    // N_LIST: kids; N_PIPE: kids = commands; N_CMD: kids = args
    struct node **kids;
    size_t n_kids;
    // N_TEXT / N_STR / N_IDENT / N_TEMPLATE name
    const char *s;
    size_t n;
    // N_FIELD / N_VAR / N_CHAIN
    const char **idents;
    size_t n_idents;
    // N_ACTION / branches / N_TEMPLATE: the pipeline; N_CHAIN: the operand
    struct node *pipe;
    struct node *list, *else_list;  // branches
    // N_PIPE declarations
    const char **decl;
    size_t n_decl;
    bool is_assign;
    // constants
    struct tval val;  // N_NUM / N_BOOL
    int func;         // N_IDENT: builtin id
};

struct named {
    const char *name;
    struct node *root;
};

struct template
{
    struct arena arena;
    char *src;  // copy of the text
    size_t src_len;
    struct node *root;  // main template (with the appended {{ .Response }} if needed)
    struct named *defs;
    size_t n_defs;
    // identifiers (lower-cased, sorted, unique)
    char **idents;
    size_t n_idents;
    char *tool_tag;
    char *think_open, *think_close;
    struct node *cut_root;  // legacy last-turn tree (see prompt.c)
};

// Builtin functions: lookup by name, -1 when unknown.
int tmpl_func_lookup(const char *name, size_t n);
const char *tmpl_func_name(int id);
enum {
    F_AND,
    F_OR,
    F_NOT,
    F_LEN,
    F_INDEX,
    F_SLICE,
    F_EQ,
    F_NE,
    F_LT,
    F_LE,
    F_GT,
    F_GE,
    F_PRINT,
    F_PRINTF,
    F_PRINTLN,
    F_HTML,
    F_JS,
    F_URLQUERY,
    F_CALL,
    F_JSON,
    F_CURRENTDATE,
    F_YESTERDAYDATE,
    F_TOTSTYPE,
    F_COUNT_
};

// Evaluator state (exec.c), passed to funcs.c.
struct exec {
    const struct template *t;
    struct arena *a;  // per-execution allocations (strings made by functions)
    struct buf *out;
    struct err *e;
    json_t *root;
    struct {
        const char *name;
        struct tval v;
    } * vars;
    size_t n_vars, cap_vars;
    size_t var_base;  // first variable visible in the current template call
    long steps;
    int depth;
    const struct node *at;  // node being evaluated (for error context)
};

int exec_errorf(struct exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Calls builtin fn with evaluated args (and/or are handled by the evaluator).
int tmpl_call_func(struct exec *x, int fn, struct tval *args, size_t n, struct tval *out);
// A string value stored in the execution arena.
int exec_str(struct exec *x, const char *s, size_t n, struct tval *out);

int tmpl_parse_tree(struct template *t, struct err *e);
int tmpl_exec_node(const struct template *t, const struct node *root, json_t *data, struct buf *out,
                   struct err *e);

// ---------------------------------------------------------------------------
// Output parsing: what output.c shares with the format-specific tool-call
// parsers (output_llama3.c, output_functionary.c).

bool tmpl_is_space(char c);
size_t tmpl_skip_space(const char *s, size_t n);
// Length of the longest suffix of s[0..n) that is a proper prefix of tag.
size_t tmpl_partial_suffix(const char *s, size_t n, const char *tag);
// The first occurrence of tag in s[0..n), or NULL.
const char *tmpl_find(const char *s, size_t n, const char *tag);
// Replaces the buffer's contents with s[0..n) (s may point into it).
void tmpl_buf_set(struct buf *b, const char *s, size_t n);
// With s[0] == '{': the length of the object up to its closing brace, braces
// counted outside JSON strings; 0 while it is still open.
size_t tmpl_object_span(const char *s, size_t n);
// Appends {"id","function":{"index","name","arguments"}} to calls; takes
// the reference to args.
void tmpl_call_append(json_t *calls, int index, const char *name, json_t *args);

// A tool-call syntax with its own streaming parser, named by a row of the
// output-format table (output.c). add appends the content that can be sent
// now and the calls that are complete; finish flushes what was held back.
// Both fail only when a buffer would grow too large (ERR_TOO_LARGE).
typedef void *(*tmpl_calls_new_fn)(json_t *tools);
typedef int (*tmpl_calls_add_fn)(void *p, const char *s, size_t n, struct buf *content,
                                 json_t *calls, struct err *e);
typedef int (*tmpl_calls_finish_fn)(void *p, struct buf *content, json_t *calls, struct err *e);
typedef void (*tmpl_calls_free_fn)(void *p);

struct template_call_syntax {
    tmpl_calls_new_fn create;
    tmpl_calls_add_fn add;
    tmpl_calls_finish_fn finish;
    tmpl_calls_free_fn destroy;
};

// Llama 3.x: a JSON call as the whole reply, or after <|python_tag|> a JSON
// call, a built-in tool's NAME.call(ARG=VALUE, ...) or code (output_llama3.c).
extern const struct template_call_syntax tmpl_calls_llama_3_x;
// Functionary v3.2: NAME\n{...} and all\ntext segments, the later ones after
// ">>>" (output_functionary.c).
extern const struct template_call_syntax tmpl_calls_functionary_v3_2;

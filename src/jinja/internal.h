// jinja internals shared by the module's files: tokens, the parse tree,
// runtime values, the render state and the built-in tables. Nothing here is
// public.
#pragma once

#include "jinja/jinja.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

#define JINJA_MAX_SOURCE      (4u << 20)  // bytes of template source
#define JINJA_MAX_PARSE_DEPTH 200         // nested expressions and blocks while parsing

// ---------------------------------------------------------------------------
// Values. Passed by value; the pointed-to data lives in the render arena,
// the template (literals) or the caller's JSON context (strings).

enum jv_type {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,  // list or tuple (l->tuple)
    JV_DICT,  // dict or namespace (d->ns)
    JV_FUNC,  // global function, bound method, macro, loop.cycle
};

struct jv_list;
struct jv_dict;
struct jv_func;

struct jv {
    enum jv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct jv_list *l;
        struct jv_dict *d;
        struct jv_func *fn;
        const char *undef;  // the name that was looked up (NULL = unknown)
    } u;
};

struct jv_list {
    struct jv *items;
    size_t n, cap;
    bool tuple;
};

struct jv_dict {
    struct jv *keys, *vals;
    size_t n, cap;
    bool ns;  // namespace(): attributes assignable with {% set ns.x = … %}
};

static inline struct jv jv_undef(const char *name)
{
    return (struct jv){.t = JV_UNDEF, .u.undef = name};
}
static inline struct jv jv_none(void)
{
    return (struct jv){.t = JV_NONE};
}
static inline struct jv jv_bool(bool b)
{
    return (struct jv){.t = JV_BOOL, .u.b = b};
}
static inline struct jv jv_int(int64_t i)
{
    return (struct jv){.t = JV_INT, .u.i = i};
}
static inline struct jv jv_float(double f)
{
    return (struct jv){.t = JV_FLOAT, .u.f = f};
}
static inline struct jv jv_str(const char *p, size_t n)
{
    return (struct jv){.t = JV_STR, .u.s = {p, n}};
}

// memcpy for possibly empty arrays (whose pointers may be NULL).
static inline void jv_copy(void *dst, const void *src, size_t n)
{
    if (n)
        memcpy(dst, src, n);
}

// ---------------------------------------------------------------------------
// Lexer

enum jtok {
    JT_EOF,
    JT_TEXT,         // template data
    JT_VAR_BEGIN,    // {{
    JT_VAR_END,      // }}
    JT_BLOCK_BEGIN,  // {%
    JT_BLOCK_END,    // %}
    JT_NAME,
    JT_STRING,  // decoded value
    JT_INT,
    JT_FLOAT,
    JT_OP,  // operator text in s/n
};

struct jtoken {
    enum jtok type;
    int line;
    const char *s;  // text (decoded for strings; arena or source)
    size_t n;
    int64_t i;
    double f;
};

struct jtokens {
    struct jtoken *v;
    size_t n, cap;
};

int jinja_lex(const char *src, size_t len, struct arena *a, struct jtokens *out, struct err *e);

// ---------------------------------------------------------------------------
// Parse tree

enum jnode_type {
    // statements
    JN_TEXT,
    JN_OUTPUT,
    JN_IF,
    JN_FOR,
    JN_SET,
    JN_SET_BLOCK,
    JN_MACRO,
    JN_CALL_BLOCK,
    JN_FILTER_BLOCK,
    JN_WITH,
    JN_BREAK,
    JN_CONTINUE,
    JN_SCOPE,  // {% generation %}: renders its body
    // expressions
    JN_LITERAL,
    JN_NAME,
    JN_LIST,
    JN_TUPLE,
    JN_DICT,
    JN_GETATTR,
    JN_GETITEM,
    JN_SLICE,
    JN_CALL,
    JN_FILTER,
    JN_TEST,
    JN_UNARY,   // op: '-', '+', 'n' (not)
    JN_BINARY,  // op: '+', '-', '*', '/', 'f' (//), '%', 'p' (**), '~'
    JN_AND,
    JN_OR,
    JN_COMPARE,
    JN_COND,
};

// Comparison operators in a chain.
enum jcmp { JC_EQ, JC_NE, JC_LT, JC_LE, JC_GT, JC_GE, JC_IN, JC_NOTIN };

struct jnode;

struct jnodes {
    struct jnode **v;
    size_t n;
};

// Call arguments: positional, then keyword (names[i] for kwargs[i]).
struct jargs {
    struct jnodes pos;
    struct jnodes kw;
    const char **kw_names;
};

struct jnode {
    enum jnode_type type;
    int line;
    int op;
    const char *name;  // NAME, GETATTR, FILTER, TEST, MACRO name, SET target name
    struct jv lit;     // LITERAL
    struct jnode *a, *b, *c, *d;
    struct jnodes body, else_body;
    struct jnodes list;        // LIST/TUPLE/DICT items (dict: k0, v0, k1, v1 …); IF conditions
    struct jnodes *if_bodies;  // IF: one body per condition
    struct jargs args;         // CALL/FILTER/TEST args; MACRO/CALL_BLOCK params (kw = defaults)
    const char **targets;      // FOR / SET unpack targets
    size_t n_targets;
    int *cmp_ops;  // COMPARE: ops between list[i] and list[i+1]
    bool negate;   // TEST with "is not"
    bool recursive;
    // MACRO / CALL_BLOCK parameters
    const char **params;
    struct jnode **defaults;  // NULL entry = no default
    size_t n_params;
    // FILTER_BLOCK / SET_BLOCK filter chain: a FILTER node whose a is NULL
    struct jnode *filter;
};

struct jinja_template {
    struct arena arena;  // tokens, nodes, literal strings
    struct jnodes root;
    struct jtokens toks;
    const char *src;  // the source text, for llama.cpp's rules that look at it (chat.c)
    // The first filter or test the template names that does not exist ("jinja: line N:
    // no filter named 'x'", in the arena), or NULL. Jinja2 refuses such a template when
    // compiling it; llama.cpp's engine only when the filter runs (DeepSeek V3.2 names
    // from_json on a branch llama-server never takes), so the render decides.
    const char *unknown_name;
    // llama-server's capability probes of the template, made once (chat.c):
    // JINJA_CAPS_* bits, 0 until probed.
    _Atomic unsigned llama_caps;
};
enum {
    JINJA_CAPS_PROBED = 1,
    JINJA_CAPS_SYSTEM = 2,
    JINJA_CAPS_THINKING = 4,
    JINJA_CAPS_OBJECT_ARGS = 8,
};

int jinja_parse_tokens(struct jinja_template *t, const struct jtokens *toks, struct err *e);

// llama-server's adjustments for particular chat formats (chat_formats.c): the request's
// messages as its input stage leaves them, before any system merge (StepFun's trimmed
// texts, developer as system; a new reference), the messages as the template sees them
// (takes msgs, returns the array to use), and the rendered prompt from start on
// (appends to it).
json_t *jinja_llama_inputs(const struct jinja_template *t, json_t *msgs);
json_t *jinja_llama_messages(const struct jinja_template *t, json_t *msgs);
int jinja_llama_prompt(const struct jinja_template *t, struct buf *out, size_t start);
// A continued assistant message (chat.c): out holds the earlier messages rendered
// without a generation prompt from start on, with the same rendering with one; appends
// what llama-server puts between them and the message's text, then the text.
// llama.cpp's reasoning markers of the template (chat_reasoning.c): the text that opens
// an assistant's reasoning and the text that closes it, appended to start and end (both
// left empty when it finds none).
void jinja_llama_reasoning(const struct jinja_template *t, const struct jinja_chat_req *req,
                           struct buf *start, struct buf *end);
int jinja_llama_continue(const struct jinja_template *t, const struct jinja_chat_req *req,
                         struct buf *out, size_t start, const char *with_prompt, const char *text);
// How llama-server answers a request the template fails on (rc, the render's error):
// ERR_INTERNAL (500) for a format with a handler of its own, else ERR_FORMAT (400) with
// its parser generator's wording; other errors (limits) unchanged.
int jinja_llama_refusal(const struct jinja_template *t, int rc, struct err *e);

// ---------------------------------------------------------------------------
// Rendering

struct jframe;

struct jrender {
    struct arena *a;
    struct buf *out;
    struct err *e;
    struct jinja_limits lim;
    uint64_t steps;
    int depth;
    struct jframe *globals;
    int line;  // line of the node being evaluated (for messages)
    int flow;  // break / continue pending (eval.c)
};

// Errors during rendering: "line N: message" (ERR_FORMAT), or ERR_TOO_LARGE
// for the limits.
int jr_fail(struct jrender *r, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int jr_oom(struct jrender *r);

// Values (value.c)
bool jv_truthy(struct jv v);
bool jv_equal(struct jv a, struct jv b);
// -1/0/1; fails (returns -2, error set) for types that do not order.
int jv_compare(struct jrender *r, struct jv a, struct jv b);
const char *jv_type_name(struct jv v);
struct jv_list *jv_list_new(struct jrender *r, size_t cap);
int jv_list_push(struct jrender *r, struct jv_list *l, struct jv v);
struct jv_dict *jv_dict_new(struct jrender *r, size_t cap);
int jv_dict_set(struct jrender *r, struct jv_dict *d, struct jv k, struct jv v);
struct jv *jv_dict_get(struct jv_dict *d, struct jv k);
struct jv *jv_dict_get_cstr(struct jv_dict *d, const char *k);
struct jv jv_cstr(struct jrender *r, const char *s);
// str(v) as Python prints it (None, True, 1.0, ['a'], {'k': 1}); appended to b.
int jv_to_str(struct jrender *r, struct jv v, struct buf *b);
// str(v) as a string value (no copy for strings).
int jv_stringify(struct jrender *r, struct jv v, struct jv *out);
// Python's json.dumps (ensure_ascii=False).
struct jv_json_opts {
    int indent;  // < 0: none
    const char *item_sep, *key_sep;
    bool sort_keys;
    bool ensure_ascii;  // non-ASCII as \uXXXX (surrogate pairs past U+FFFF)
};
int jv_to_json(struct jrender *r, struct jv v, const struct jv_json_opts *o, struct buf *b);
int jv_from_json(struct jrender *r, json_t *j, struct jv *out);
int jv_format_float(double f, char *out, size_t n);
size_t jv_utf8_len(const char *s, size_t n);
// Byte offset of code point index i (clamped to n).
size_t jv_utf8_offset(const char *s, size_t n, size_t i);
// New string in the arena.
int jv_str_new(struct jrender *r, const char *p, size_t n, struct jv *out);
int jv_iterate(struct jrender *r, struct jv v, struct jv_list **out);
int jv_length(struct jrender *r, struct jv v, int64_t *out);

// Evaluation (eval.c)
int jr_eval(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out);
int jr_call(struct jrender *r, int line, struct jv fn, struct jv *pos, size_t n_pos,
            const char **kw_names, struct jv *kw, size_t n_kw, struct jv *out);
int jr_step(struct jrender *r);
// fmt % args (printf-style: s, r, d, i, f, %%); args a tuple or one value.
int jr_str_format(struct jrender *r, int line, struct jv fmt, struct jv args, struct jv *out);

// Built-ins (builtins.c)
struct jcall {
    struct jv *pos;
    size_t n_pos;
    const char **kw_names;
    struct jv *kw;
    size_t n_kw;
};
int jr_filter(struct jrender *r, int line, const char *name, struct jv in, const struct jcall *c,
              struct jv *out);
int jr_test(struct jrender *r, int line, const char *name, struct jv in, const struct jcall *c,
            bool *out);
bool jr_filter_exists(const char *name);
bool jr_test_exists(const char *name);
// Attribute lookup that yields a bound method (str.strip, dict.items …), or
// false when name is not a method of v's type.
bool jr_method(struct jrender *r, struct jv v, const char *name, size_t n, struct jv *out);
// Global functions: range, dict, namespace, raise_exception, strftime_now, cycler, joiner.
bool jr_global(const char *name, struct jv *out);

// Callables
enum jfunc_kind { JF_GLOBAL, JF_METHOD, JF_MACRO, JF_CYCLE };
struct jv_func {
    enum jfunc_kind kind;
    const char *name;
    struct jv self;          // METHOD receiver; CYCLE: loop index (int)
    struct jnode *macro;     // MACRO
    struct jframe *closure;  // MACRO: defining scope
    struct jv caller;        // MACRO called from {% call %}: the caller() macro
};
int jr_call_builtin(struct jrender *r, int line, struct jv_func *fn, const struct jcall *c,
                    struct jv *out);
// Keyword or positional argument i named name, or undefined when absent.
struct jv jr_arg(const struct jcall *c, size_t i, const char *name);

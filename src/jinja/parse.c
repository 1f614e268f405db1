// Parser: tokens -> tree, following Jinja2's grammar and operator
// precedence (parser.py): condexpr < or < and < not < compare < + - < ~ <
// * / // % < ** < unary, then postfix (. [] ()) and filters / tests.
// Nodes live in the template's arena. Nesting is bounded so a hostile
// template cannot exhaust the stack.
#include "jinja/internal.h"

#include <stdio.h>
#include <string.h>

struct parser {
    const struct jtokens *t;
    size_t pos;
    struct arena *a;
    struct err *e;
    int depth;
    const char **unknown_name;  // the template's first unknown filter / test
};

// A growable node list built in the arena.
struct nvec {
    struct jnode **v;
    size_t n, cap;
};

static struct jtoken *cur(struct parser *p)
{
    return &p->t->v[p->pos];
}
static struct jtoken *peek(struct parser *p, size_t k)
{
    size_t i = p->pos + k;
    return &p->t->v[i < p->t->n ? i : p->t->n - 1];
}
static void next(struct parser *p)
{
    if (p->pos + 1 < p->t->n)
        p->pos++;
}

static const char *tok_desc(const struct jtoken *t, char *buf, size_t n)
{
    switch (t->type) {
    case JT_EOF:
        return "end of template";
    case JT_TEXT:
        return "template data";
    case JT_VAR_BEGIN:
        return "'{{'";
    case JT_VAR_END:
        return "end of print statement";
    case JT_BLOCK_BEGIN:
        return "'{%'";
    case JT_BLOCK_END:
        return "end of statement block";
    case JT_STRING:
        return "string";
    case JT_INT:
        return "integer";
    case JT_FLOAT:
        return "float";
    case JT_NAME:
    case JT_OP:
        snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
        return buf;
    }
    return "token";
}

static int fail(struct parser *p, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    return err_set(p->e, ERR_FORMAT, "jinja: line %d: %s", cur(p)->line, msg);
}

static int fail_unexpected(struct parser *p, const char *expected)
{
    char b[64], msg[200];
    snprintf(msg, sizeof msg, "unexpected %s%s%s", tok_desc(cur(p), b, sizeof b),
             expected ? ", expected " : "", expected ? expected : "");
    return fail(p, "%s", msg);
}

static bool is_op(const struct jtoken *t, const char *op)
{
    return t->type == JT_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static bool is_name(const struct jtoken *t, const char *name)
{
    return t->type == JT_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

static int expect_op(struct parser *p, const char *op)
{
    if (!is_op(cur(p), op)) {
        char ex[16];
        snprintf(ex, sizeof ex, "'%s'", op);
        return fail_unexpected(p, ex);
    }
    next(p);
    return 0;
}

static struct jnode *node(struct parser *p, enum jnode_type type, int line)
{
    struct jnode *n = arena_alloc(p->a, sizeof *n);
    if (!n) {
        err_set(p->e, ERR_TOO_LARGE, "jinja: template too large");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->type = type;
    n->line = line;
    return n;
}

static int nvec_push(struct parser *p, struct nvec *v, struct jnode *n)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        struct jnode **nv = arena_alloc(p->a, cap * sizeof *nv);
        if (!nv)
            return err_set(p->e, ERR_TOO_LARGE, "jinja: template too large");
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = n;
    return 0;
}

static struct jnodes nvec_done(struct nvec *v)
{
    return (struct jnodes){v->v, v->n};
}

static const char *tok_str(struct parser *p, const struct jtoken *t)
{
    return arena_strndup(p->a, t->s, t->n);
}

static int enter(struct parser *p)
{
    if (++p->depth > JINJA_MAX_PARSE_DEPTH)
        return fail(p, "%s", "template nested too deeply");
    return 0;
}

static int parse_expr(struct parser *p, bool with_cond, struct jnode **out);
static int parse_tuple(struct parser *p, bool with_cond, bool explicit_parens, struct jnode **out);
static int parse_unary(struct parser *p, bool with_filter, struct jnode **out);

// ( args ) — the current token is '('.
static int parse_call_args(struct parser *p, struct jargs *args)
{
    struct nvec pos = {0}, kw = {0};
    const char **names = NULL;
    size_t names_cap = 0;
    int rc = expect_op(p, "(");
    while (!rc && !is_op(cur(p), ")")) {
        if (pos.n + kw.n > 0 && (rc = expect_op(p, ",")))
            break;
        if (is_op(cur(p), ")"))
            break;
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            return fail(p, "%s", "*args and **kwargs in calls are not supported");
        struct jnode *v;
        if (cur(p)->type == JT_NAME && is_op(peek(p, 1), "=")) {
            const char *name = tok_str(p, cur(p));
            next(p);
            next(p);
            if ((rc = parse_expr(p, true, &v)) || (rc = nvec_push(p, &kw, v)))
                break;
            if (kw.n > names_cap) {
                size_t cap = names_cap ? names_cap * 2 : 4;
                const char **nn = arena_alloc(p->a, cap * sizeof *nn);
                if (!nn)
                    return err_set(p->e, ERR_TOO_LARGE, "jinja: template too large");
                if (kw.n > 1)
                    memcpy(nn, names, (kw.n - 1) * sizeof *nn);
                names = nn;
                names_cap = cap;
            }
            names[kw.n - 1] = name;
        } else {
            if (kw.n)
                return fail(p, "%s", "positional argument after keyword argument");
            if ((rc = parse_expr(p, true, &v)) || (rc = nvec_push(p, &pos, v)))
                break;
        }
    }
    if (rc || (rc = expect_op(p, ")")))
        return rc;
    args->pos = nvec_done(&pos);
    args->kw = nvec_done(&kw);
    args->kw_names = names;
    return 0;
}

// A name: true/false/none (either case of the first letter) are literals.
static int parse_name(struct parser *p, struct jtoken *t, struct jnode **out)
{
    struct jnode *n = node(p, JN_LITERAL, t->line);
    if (!n)
        return ERR_TOO_LARGE;
    if (is_name(t, "true") || is_name(t, "True")) {
        n->lit = jv_bool(true);
    } else if (is_name(t, "false") || is_name(t, "False")) {
        n->lit = jv_bool(false);
    } else if (is_name(t, "none") || is_name(t, "None")) {
        n->lit = jv_none();
    } else {
        n->type = JN_NAME;
        n->name = tok_str(p, t);
    }
    next(p);
    *out = n;
    return 0;
}

// One or more string literals; adjacent ones concatenate.
static int parse_strings(struct parser *p, struct jtoken *t, struct jnode **out)
{
    struct jnode *n = node(p, JN_LITERAL, t->line);
    if (!n)
        return ERR_TOO_LARGE;
    struct buf b;
    buf_init(&b, 0);
    while (cur(p)->type == JT_STRING) {
        buf_append(&b, cur(p)->s, cur(p)->n);
        next(p);
    }
    char *s = arena_strndup(p->a, buf_cstr(&b), b.len);
    size_t len = b.len;
    buf_deinit(&b);
    if (!s)
        return err_set(p->e, ERR_TOO_LARGE, "jinja: template too large");
    n->lit = jv_str(s, len);
    *out = n;
    return 0;
}

static int parse_number(struct parser *p, struct jtoken *t, struct jnode **out)
{
    struct jnode *n = node(p, JN_LITERAL, t->line);
    if (!n)
        return ERR_TOO_LARGE;
    n->lit = t->type == JT_INT ? jv_int(t->i) : jv_float(t->f);
    next(p);
    *out = n;
    return 0;
}

// ( ) is the empty tuple; otherwise a parenthesised expression or tuple.
static int parse_parens(struct parser *p, struct jtoken *t, struct jnode **out)
{
    next(p);
    if (is_op(cur(p), ")")) {
        struct jnode *n = node(p, JN_TUPLE, t->line);
        if (!n)
            return ERR_TOO_LARGE;
        next(p);
        *out = n;
        return 0;
    }
    struct jnode *n;
    int rc;
    if ((rc = parse_tuple(p, true, true, &n)) || (rc = expect_op(p, ")")))
        return rc;
    *out = n;
    return 0;
}

// [a, b] or {k: v, ...}, a trailing comma allowed. A dict's items are its
// keys and values in turn.
static int parse_list_or_dict(struct parser *p, struct jtoken *t, struct jnode **out)
{
    bool dict = is_op(t, "{");
    const char *close = dict ? "}" : "]";
    struct jnode *n = node(p, dict ? JN_DICT : JN_LIST, t->line);
    if (!n)
        return ERR_TOO_LARGE;
    next(p);
    struct nvec items = {0};
    int rc;
    while (!is_op(cur(p), close)) {
        if (items.n && (rc = expect_op(p, ",")))
            return rc;
        if (is_op(cur(p), close))
            break;
        struct jnode *k;
        if ((rc = parse_expr(p, true, &k)) || (rc = nvec_push(p, &items, k)))
            return rc;
        if (dict) {
            struct jnode *v;
            if ((rc = expect_op(p, ":")) || (rc = parse_expr(p, true, &v)) ||
                (rc = nvec_push(p, &items, v)))
                return rc;
        }
    }
    next(p);
    n->list = nvec_done(&items);
    *out = n;
    return 0;
}

static int parse_primary(struct parser *p, struct jnode **out)
{
    struct jtoken *t = cur(p);
    switch (t->type) {
    case JT_NAME:
        return parse_name(p, t, out);
    case JT_STRING:
        return parse_strings(p, t, out);
    case JT_INT:
    case JT_FLOAT:
        return parse_number(p, t, out);
    case JT_OP:
        if (is_op(t, "("))
            return parse_parens(p, t, out);
        if (is_op(t, "[") || is_op(t, "{"))
            return parse_list_or_dict(p, t, out);
        return fail_unexpected(p, NULL);
    default:
        return fail_unexpected(p, NULL);
    }
}

// [ subscript ] after obj: an index or a slice a:b:c.
static int parse_subscript(struct parser *p, struct jnode *obj, struct jnode **out)
{
    int line = cur(p)->line;
    next(p);  // '['
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int part = 0, rc;
    bool slice = false;
    for (;;) {
        if (is_op(cur(p), ":")) {
            slice = true;
            if (++part > 2)
                return fail_unexpected(p, "']'");
            next(p);
            continue;
        }
        if (is_op(cur(p), "]"))
            break;
        if (parts[part])
            return fail_unexpected(p, "']'");
        if ((rc = parse_expr(p, true, &parts[part])))
            return rc;
    }
    next(p);
    struct jnode *n = node(p, slice ? JN_SLICE : JN_GETITEM, line);
    if (!n)
        return ERR_TOO_LARGE;
    if (!slice && !parts[0])
        return fail(p, "%s", "empty subscript");
    n->a = obj;
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    *out = n;
    return 0;
}

static int parse_postfix(struct parser *p, struct jnode **io)
{
    int rc;
    for (;;) {
        struct jtoken *t = cur(p);
        if (is_op(t, ".")) {
            next(p);
            struct jtoken *k = cur(p);
            struct jnode *n;
            if (k->type == JT_NAME) {
                if (!(n = node(p, JN_GETATTR, k->line)))
                    return ERR_TOO_LARGE;
                n->name = tok_str(p, k);
            } else if (k->type == JT_INT) {
                if (!(n = node(p, JN_GETITEM, k->line)))
                    return ERR_TOO_LARGE;
                struct jnode *lit = node(p, JN_LITERAL, k->line);
                if (!lit)
                    return ERR_TOO_LARGE;
                lit->lit = jv_int(k->i);
                n->b = lit;
            } else {
                return fail_unexpected(p, "attribute name");
            }
            next(p);
            n->a = *io;
            *io = n;
        } else if (is_op(t, "[")) {
            if ((rc = parse_subscript(p, *io, io)))
                return rc;
        } else if (is_op(t, "(")) {
            struct jnode *n = node(p, JN_CALL, t->line);
            if (!n)
                return ERR_TOO_LARGE;
            n->a = *io;
            if ((rc = parse_call_args(p, &n->args)))
                return rc;
            *io = n;
        } else {
            return 0;
        }
    }
}

// A filter or test name that does not exist: kept for the render to refuse (the
// first one only; a render error names the one it reaches).
static void note_unknown(struct parser *p, int line, const char *kind, const char *name)
{
    if (*p->unknown_name)
        return;
    char msg[256];
    snprintf(msg, sizeof msg, "jinja: line %d: no %s named '%s'", line, kind, name);
    *p->unknown_name = arena_strndup(p->a, msg, strlen(msg));
}

// NAME(.NAME)* [args] after '|': a filter applied to in (NULL for block filters).
static int parse_filter(struct parser *p, struct jnode *in, struct jnode **out)
{
    if (cur(p)->type != JT_NAME)
        return fail_unexpected(p, "filter name");
    struct jnode *n = node(p, JN_FILTER, cur(p)->line);
    if (!n)
        return ERR_TOO_LARGE;
    n->name = tok_str(p, cur(p));
    next(p);
    if (!jr_filter_exists(n->name))
        note_unknown(p, n->line, "filter", n->name);
    int rc;
    if (is_op(cur(p), "(") && (rc = parse_call_args(p, &n->args)))
        return rc;
    n->a = in;
    *out = n;
    return 0;
}

static int parse_test(struct parser *p, struct jnode *in, struct jnode **out)
{
    struct jnode *n = node(p, JN_TEST, cur(p)->line);
    if (!n)
        return ERR_TOO_LARGE;
    next(p);  // 'is'
    if (is_name(cur(p), "not")) {
        n->negate = true;
        next(p);
    }
    if (cur(p)->type != JT_NAME)
        return fail_unexpected(p, "test name");
    n->name = tok_str(p, cur(p));
    next(p);
    if (!jr_test_exists(n->name))
        note_unknown(p, n->line, "test", n->name);
    n->a = in;
    int rc;
    struct jtoken *t = cur(p);
    if (is_op(t, "(")) {
        if ((rc = parse_call_args(p, &n->args)))
            return rc;
    } else if ((t->type == JT_NAME || t->type == JT_STRING || t->type == JT_INT ||
                t->type == JT_FLOAT || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and") &&
               !is_name(t, "if") && !is_name(t, "is") && !is_name(t, "in") && !is_name(t, "not") &&
               !is_name(t, "recursive")) {
        struct jnode *arg;
        if ((rc = parse_primary(p, &arg)) || (rc = parse_postfix(p, &arg)))
            return rc;
        struct jnode **v = arena_alloc(p->a, sizeof *v);
        if (!v)
            return ERR_TOO_LARGE;
        v[0] = arg;
        n->args.pos = (struct jnodes){v, 1};
    }
    *out = n;
    return 0;
}

static int parse_filter_expr(struct parser *p, struct jnode **io)
{
    int rc;
    for (;;) {
        if (is_op(cur(p), "|")) {
            next(p);
            if ((rc = parse_filter(p, *io, io)))
                return rc;
        } else if (is_name(cur(p), "is")) {
            if ((rc = parse_test(p, *io, io)))
                return rc;
        } else if (is_op(cur(p), "(")) {
            struct jnode *n = node(p, JN_CALL, cur(p)->line);
            if (!n)
                return ERR_TOO_LARGE;
            n->a = *io;
            if ((rc = parse_call_args(p, &n->args)))
                return rc;
            *io = n;
        } else {
            return 0;
        }
    }
}

static int parse_unary(struct parser *p, bool with_filter, struct jnode **out)
{
    int rc = enter(p);
    if (rc)
        return rc;
    struct jtoken *t = cur(p);
    struct jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        if (!(n = node(p, JN_UNARY, t->line)))
            return ERR_TOO_LARGE;
        n->op = t->s[0];
        next(p);
        if ((rc = parse_unary(p, false, &n->a)))
            return rc;
    } else if ((rc = parse_primary(p, &n))) {
        return rc;
    }
    if ((rc = parse_postfix(p, &n)))
        return rc;
    if (with_filter && (rc = parse_filter_expr(p, &n)))
        return rc;
    p->depth--;
    *out = n;
    return 0;
}

static int binary(struct parser *p, int op, int line, struct jnode *l, struct jnode *r,
                  struct jnode **out)
{
    struct jnode *n = node(p, JN_BINARY, line);
    if (!n)
        return ERR_TOO_LARGE;
    n->op = op;
    n->a = l;
    n->b = r;
    *out = n;
    return 0;
}

// The binary operator levels between unary and comparison, tightest first;
// each is left-associative. Node ops: 'p' power, 'f' floor division.
struct binop {
    const char *tok;
    int op;
};
static const struct binop ops_pow[] = {{"**", 'p'}};
static const struct binop ops_mul[] = {{"*", '*'}, {"/", '/'}, {"//", 'f'}, {"%", '%'}};
static const struct binop ops_concat[] = {{"~", '~'}};
static const struct binop ops_add[] = {{"+", '+'}, {"-", '-'}};
static const struct {
    const struct binop *ops;
    size_t n;
} binary_levels[] = {
    {ops_pow, 1},
    {ops_mul, sizeof ops_mul / sizeof ops_mul[0]},
    {ops_concat, 1},
    {ops_add, sizeof ops_add / sizeof ops_add[0]},
};
enum { BINARY_TOP = sizeof binary_levels / sizeof binary_levels[0] - 1 };

static int binary_op_at(int level, const struct jtoken *t)
{
    for (size_t i = 0; i < binary_levels[level].n; i++)
        if (is_op(t, binary_levels[level].ops[i].tok))
            return binary_levels[level].ops[i].op;
    return 0;
}

// One operand of level: the next tighter level, or a unary expression.
static int parse_binary(struct parser *p, int level, struct jnode **out);

static int parse_operand(struct parser *p, int level, struct jnode **out)
{
    return level == 0 ? parse_unary(p, true, out) : parse_binary(p, level - 1, out);
}

static int parse_binary(struct parser *p, int level, struct jnode **out)
{
    int rc = parse_operand(p, level, out);
    for (;;) {
        struct jtoken *t = cur(p);
        int op = rc ? 0 : binary_op_at(level, t);
        if (!op)
            return rc;
        next(p);
        struct jnode *r;
        if ((rc = parse_operand(p, level, &r)) == 0)
            rc = binary(p, op, t->line, *out, r, out);
    }
}

static int parse_compare(struct parser *p, struct jnode **out)
{
    struct jnode *first;
    int rc = parse_binary(p, BINARY_TOP, &first);
    if (rc)
        return rc;
    struct nvec items = {0};
    int ops[64];
    size_t n_ops = 0;
    for (;;) {
        struct jtoken *t = cur(p);
        int op = -1;
        if (is_op(t, "=="))
            op = JC_EQ;
        else if (is_op(t, "!="))
            op = JC_NE;
        else if (is_op(t, "<"))
            op = JC_LT;
        else if (is_op(t, "<="))
            op = JC_LE;
        else if (is_op(t, ">"))
            op = JC_GT;
        else if (is_op(t, ">="))
            op = JC_GE;
        else if (is_name(t, "in"))
            op = JC_IN;
        else if (is_name(t, "not") && is_name(peek(p, 1), "in"))
            op = JC_NOTIN;
        if (op < 0)
            break;
        if (n_ops == sizeof ops / sizeof ops[0])
            return fail(p, "%s", "comparison chain too long");
        next(p);
        if (op == JC_NOTIN)
            next(p);
        if (!items.n && (rc = nvec_push(p, &items, first)))
            return rc;
        struct jnode *r;
        if ((rc = parse_binary(p, BINARY_TOP, &r)) || (rc = nvec_push(p, &items, r)))
            return rc;
        ops[n_ops++] = op;
    }
    if (!n_ops) {
        *out = first;
        return 0;
    }
    struct jnode *n = node(p, JN_COMPARE, first->line);
    int *o = arena_alloc(p->a, n_ops * sizeof *o);
    if (!n || !o)
        return ERR_TOO_LARGE;
    memcpy(o, ops, n_ops * sizeof *o);
    n->list = nvec_done(&items);
    n->cmp_ops = o;
    *out = n;
    return 0;
}

static int parse_not(struct parser *p, struct jnode **out)
{
    if (is_name(cur(p), "not")) {
        struct jnode *n = node(p, JN_UNARY, cur(p)->line);
        if (!n)
            return ERR_TOO_LARGE;
        n->op = 'n';
        next(p);
        int rc = enter(p);
        if (rc || (rc = parse_not(p, &n->a)))
            return rc;
        p->depth--;
        *out = n;
        return 0;
    }
    return parse_compare(p, out);
}

static int parse_logic(struct parser *p, bool is_or, struct jnode **out)
{
    int rc = is_or ? parse_logic(p, false, out) : parse_not(p, out);
    while (!rc && is_name(cur(p), is_or ? "or" : "and")) {
        struct jnode *n = node(p, is_or ? JN_OR : JN_AND, cur(p)->line);
        if (!n)
            return ERR_TOO_LARGE;
        next(p);
        n->a = *out;
        rc = is_or ? parse_logic(p, false, &n->b) : parse_not(p, &n->b);
        *out = n;
    }
    return rc;
}

static int parse_expr(struct parser *p, bool with_cond, struct jnode **out)
{
    int rc = enter(p);
    if (rc || (rc = parse_logic(p, true, out)))
        return rc;
    while (with_cond && is_name(cur(p), "if")) {
        struct jnode *n = node(p, JN_COND, cur(p)->line);
        if (!n)
            return ERR_TOO_LARGE;
        next(p);
        n->a = *out;
        if ((rc = parse_logic(p, true, &n->b)))
            return rc;
        if (is_name(cur(p), "else")) {
            next(p);
            if ((rc = parse_expr(p, true, &n->c)))
                return rc;
        }
        *out = n;
    }
    p->depth--;
    return 0;
}

// expr or expr, expr, … (a tuple). explicit_parens: inside ( ).
static int parse_tuple(struct parser *p, bool with_cond, bool explicit_parens, struct jnode **out)
{
    int line = cur(p)->line;
    struct jnode *first;
    int rc = parse_expr(p, with_cond, &first);
    if (rc)
        return rc;
    if (!is_op(cur(p), ",")) {
        *out = first;
        return 0;
    }
    struct nvec items = {0};
    if ((rc = nvec_push(p, &items, first)))
        return rc;
    while (is_op(cur(p), ",")) {
        next(p);
        struct jtoken *t = cur(p);
        if (t->type == JT_VAR_END || t->type == JT_BLOCK_END || is_op(t, ")") ||
            (!explicit_parens && (is_name(t, "if") || is_name(t, "recursive"))))
            break;
        struct jnode *v;
        if ((rc = parse_expr(p, with_cond, &v)) || (rc = nvec_push(p, &items, v)))
            return rc;
    }
    struct jnode *n = node(p, JN_TUPLE, line);
    if (!n)
        return ERR_TOO_LARGE;
    n->list = nvec_done(&items);
    *out = n;
    return 0;
}

// ---------------------------------------------------------------------------
// Statements

static int parse_body(struct parser *p, const char *const *ends, struct jnodes *out,
                      const char **end_out);

static int expect_block_end(struct parser *p)
{
    if (cur(p)->type != JT_BLOCK_END)
        return fail_unexpected(p, "end of statement block");
    next(p);
    return 0;
}

// Assignment targets: name, name.attr (namespace), or a, b (unpacking).
static int parse_targets(struct parser *p, struct jnode *n, bool allow_attr)
{
    const char *names[32];
    size_t k = 0;
    bool paren = is_op(cur(p), "(");
    if (paren)
        next(p);
    for (;;) {
        if (cur(p)->type != JT_NAME)
            return fail_unexpected(p, "variable name");
        if (k == 32)
            return fail(p, "%s", "too many assignment targets");
        names[k++] = tok_str(p, cur(p));
        next(p);
        if (allow_attr && k == 1 && is_op(cur(p), ".")) {
            next(p);
            if (cur(p)->type != JT_NAME)
                return fail_unexpected(p, "attribute name");
            n->name = tok_str(p, cur(p));  // attribute of names[0]
            next(p);
            break;
        }
        if (!is_op(cur(p), ","))
            break;
        next(p);
    }
    if (paren && expect_op(p, ")"))
        return ERR_FORMAT;
    const char **v = arena_alloc(p->a, k * sizeof *v);
    if (!v)
        return ERR_TOO_LARGE;
    memcpy(v, names, k * sizeof *v);
    n->targets = v;
    n->n_targets = k;
    return 0;
}

// Macro / call-block parameters: ( name [= default], … )
static int parse_params(struct parser *p, struct jnode *n)
{
    int rc = expect_op(p, "(");
    const char *names[64];
    struct jnode *defs[64];
    size_t k = 0;
    while (!rc && !is_op(cur(p), ")")) {
        if (k && (rc = expect_op(p, ",")))
            return rc;
        if (is_op(cur(p), ")"))
            break;
        if (cur(p)->type != JT_NAME)
            return fail_unexpected(p, "parameter name");
        if (k == 64)
            return fail(p, "%s", "too many parameters");
        names[k] = tok_str(p, cur(p));
        defs[k] = NULL;
        next(p);
        if (is_op(cur(p), "=")) {
            next(p);
            if ((rc = parse_expr(p, true, &defs[k])))
                return rc;
        }
        k++;
    }
    if (rc || (rc = expect_op(p, ")")))
        return rc;
    n->params = arena_alloc(p->a, (k ? k : 1) * sizeof *n->params);
    n->defaults = arena_alloc(p->a, (k ? k : 1) * sizeof *n->defaults);
    if (!n->params || !n->defaults)
        return ERR_TOO_LARGE;
    memcpy(n->params, names, k * sizeof *names);
    memcpy(n->defaults, defs, k * sizeof *defs);
    n->n_params = k;
    return 0;
}

static int parse_filter_chain(struct parser *p, struct jnode **out)
{
    struct jnode *f = NULL;
    int rc;
    do {
        if ((rc = parse_filter(p, f, &f)))
            return rc;
    } while (is_op(cur(p), "|") && (next(p), true));
    *out = f;
    return 0;
}

// The body of a block with one end tag: "%}" then statements up to end.
static int single_end_body(struct parser *p, const char *end_tag, struct jnodes *body)
{
    const char *const ends[] = {end_tag, NULL};
    const char *end;
    int rc = expect_block_end(p);
    return rc ? rc : parse_body(p, ends, body, &end);
}

// After a body that ended at `else`: "%}" and the else body up to end_tag.
static int else_body(struct parser *p, const char *end, const char *end_tag, struct jnode *n)
{
    if (strcmp(end, "else") != 0)
        return 0;
    return single_end_body(p, end_tag, &n->else_body);
}

// Appends one body slot to *bodies (arena, doubling); k bodies are in use.
static int grow_bodies(struct parser *p, struct jnodes **bodies, size_t k, size_t *cap)
{
    if (k < *cap)
        return 0;
    *cap = *cap ? *cap * 2 : 4;
    struct jnodes *nb = arena_alloc(p->a, *cap * sizeof *nb);
    if (!nb)
        return err_set(p->e, ERR_TOO_LARGE, "jinja: template too large");
    if (k)
        memcpy(nb, *bodies, k * sizeof *nb);
    *bodies = nb;
    return 0;
}

// {% if c %} … {% elif c %} … {% else %} … {% endif %}
static int tag_if(struct parser *p, struct jnode *n)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct nvec conds = {0};
    struct jnodes *bodies = NULL;
    size_t k = 0, cap = 0;
    const char *end = "elif";
    int rc;
    while (!strcmp(end, "elif")) {
        struct jnode *c;
        if ((rc = grow_bodies(p, &bodies, k, &cap)) || (rc = parse_tuple(p, true, false, &c)) ||
            (rc = nvec_push(p, &conds, c)) || (rc = expect_block_end(p)) ||
            (rc = parse_body(p, ends, &bodies[k++], &end)))
            return rc;
    }
    if ((rc = else_body(p, end, "endif", n)))
        return rc;
    n->list = nvec_done(&conds);
    n->if_bodies = bodies;
    return 0;
}

// {% for targets in iterable [if cond] %} … [{% else %} …] {% endfor %}
static int tag_for(struct parser *p, struct jnode *n)
{
    static const char *const ends[] = {"endfor", "else", NULL};
    int rc = parse_targets(p, n, false);
    if (rc)
        return rc;
    if (!is_name(cur(p), "in"))
        return fail_unexpected(p, "'in'");
    next(p);
    if ((rc = parse_tuple(p, false, false, &n->a)))
        return rc;
    if (is_name(cur(p), "if")) {
        next(p);
        if ((rc = parse_expr(p, true, &n->b)))
            return rc;
    }
    if (is_name(cur(p), "recursive"))
        return fail(p, "%s", "recursive for loops are not supported");
    const char *end;
    if ((rc = expect_block_end(p)) || (rc = parse_body(p, ends, &n->body, &end)))
        return rc;
    return else_body(p, end, "endfor", n);
}

// {% set targets = value %}, or the block form {% set name [| filters] %} … {% endset %}
static int tag_set(struct parser *p, struct jnode *n)
{
    int rc = parse_targets(p, n, true);
    if (rc)
        return rc;
    if (is_op(cur(p), "=")) {
        next(p);
        return parse_tuple(p, true, false, &n->a);
    }
    if (n->n_targets != 1 || n->name)
        return fail_unexpected(p, "'='");
    n->type = JN_SET_BLOCK;
    if (is_op(cur(p), "|")) {
        next(p);
        if ((rc = parse_filter_chain(p, &n->filter)))
            return rc;
    }
    return single_end_body(p, "endset", &n->body);
}

static int tag_macro(struct parser *p, struct jnode *n)
{
    if (cur(p)->type != JT_NAME)
        return fail_unexpected(p, "macro name");
    n->name = tok_str(p, cur(p));
    next(p);
    int rc = parse_params(p, n);
    return rc ? rc : single_end_body(p, "endmacro", &n->body);
}

// {% call [(params)] macro(args) %} … {% endcall %}
static int tag_call(struct parser *p, struct jnode *n)
{
    int rc;
    if (is_op(cur(p), "(") && (rc = parse_params(p, n)))
        return rc;
    if ((rc = parse_expr(p, true, &n->a)))
        return rc;
    if (n->a->type != JN_CALL)
        return fail(p, "%s", "expected a call after 'call'");
    return single_end_body(p, "endcall", &n->body);
}

static int tag_filter(struct parser *p, struct jnode *n)
{
    int rc = parse_filter_chain(p, &n->filter);
    return rc ? rc : single_end_body(p, "endfilter", &n->body);
}

// {% with a = x, b = y %} … {% endwith %}
static int tag_with(struct parser *p, struct jnode *n)
{
    struct nvec sets = {0};
    int rc;
    while (cur(p)->type != JT_BLOCK_END) {
        if (sets.n && (rc = expect_op(p, ",")))
            return rc;
        struct jnode *s = node(p, JN_SET, cur(p)->line);
        if (!s)
            return ERR_TOO_LARGE;
        if ((rc = parse_targets(p, s, false)) || (rc = expect_op(p, "=")) ||
            (rc = parse_expr(p, true, &s->a)) || (rc = nvec_push(p, &sets, s)))
            return rc;
    }
    n->list = nvec_done(&sets);
    return single_end_body(p, "endwith", &n->body);
}

// {% generation %} … {% endgeneration %} renders its body.
static int tag_generation(struct parser *p, struct jnode *n)
{
    return single_end_body(p, "endgeneration", &n->body);
}

static const struct {
    const char *name;
    enum jnode_type type;
    int (*parse)(struct parser *p, struct jnode *n);  // NULL: the tag has nothing more
} statement_tags[] = {
    {"if", JN_IF, tag_if},
    {"for", JN_FOR, tag_for},
    {"set", JN_SET, tag_set},
    {"macro", JN_MACRO, tag_macro},
    {"call", JN_CALL_BLOCK, tag_call},
    {"filter", JN_FILTER_BLOCK, tag_filter},
    {"with", JN_WITH, tag_with},
    {"generation", JN_SCOPE, tag_generation},
    {"break", JN_BREAK, NULL},
    {"continue", JN_CONTINUE, NULL},
};

static int parse_statement(struct parser *p, struct jnode **out)
{
    struct jtoken *t = cur(p);
    if (t->type != JT_NAME)
        return fail_unexpected(p, "tag name");
    char tag[32];
    snprintf(tag, sizeof tag, "%.*s", (int)(t->n < 31 ? t->n : 31), t->s);
    for (size_t i = 0; i < sizeof statement_tags / sizeof statement_tags[0]; i++) {
        if (strcmp(tag, statement_tags[i].name) != 0)
            continue;
        next(p);
        struct jnode *n = node(p, statement_tags[i].type, t->line);
        if (!n)
            return ERR_TOO_LARGE;
        int rc = statement_tags[i].parse ? statement_tags[i].parse(p, n) : 0;
        if (rc || (rc = expect_block_end(p)))
            return rc;
        *out = n;
        return 0;
    }
    return fail(p, "unknown tag '%s'", tag);
}

// Statements until one of ends (a block tag name) or EOF (ends == NULL).
// The end tag's name is consumed; its block end is not.
static int parse_body(struct parser *p, const char *const *ends, struct jnodes *out,
                      const char **end_out)
{
    int rc = enter(p);
    if (rc)
        return rc;
    struct nvec body = {0};
    int start_line = cur(p)->line;
    for (;;) {
        struct jtoken *t = cur(p);
        struct jnode *n = NULL;
        if (t->type == JT_EOF) {
            if (ends) {
                char msg[128];
                const char *want = ends[0];
                for (size_t i = 0; ends[i]; i++)
                    if (!strncmp(ends[i], "end", 3))
                        want = ends[i];
                snprintf(msg, sizeof msg,
                         "unexpected end of template, expected '%s' (block opened on line %d)",
                         want, start_line);
                return fail(p, "%s", msg);
            }
            break;
        }
        if (t->type == JT_TEXT) {
            if (!(n = node(p, JN_TEXT, t->line)))
                return ERR_TOO_LARGE;
            n->lit = jv_str(t->s, t->n);
            next(p);
        } else if (t->type == JT_VAR_BEGIN) {
            next(p);
            if (!(n = node(p, JN_OUTPUT, t->line)))
                return ERR_TOO_LARGE;
            if ((rc = parse_tuple(p, true, false, &n->a)))
                return rc;
            if (cur(p)->type != JT_VAR_END)
                return fail_unexpected(p, "end of print statement");
            next(p);
        } else if (t->type == JT_BLOCK_BEGIN) {
            next(p);
            struct jtoken *name = cur(p);
            bool is_end = false;
            for (size_t i = 0; ends && ends[i]; i++)
                if (is_name(name, ends[i])) {
                    *end_out = ends[i];
                    is_end = true;
                }
            if (is_end) {
                next(p);
                break;
            }
            if (name->type == JT_NAME && (is_name(name, "elif") || is_name(name, "else") ||
                                          (name->n > 3 && memcmp(name->s, "end", 3) == 0)))
                return fail_unexpected(p, NULL);
            if ((rc = parse_statement(p, &n)))
                return rc;
        } else {
            return fail_unexpected(p, NULL);
        }
        if ((rc = nvec_push(p, &body, n)))
            return rc;
    }
    *out = nvec_done(&body);
    p->depth--;
    return 0;
}

int jinja_parse_tokens(struct jinja_template *t, const struct jtokens *toks, struct err *e)
{
    struct parser p = {.t = toks, .a = &t->arena, .e = e, .unknown_name = &t->unknown_name};
    const char *end = NULL;
    return parse_body(&p, NULL, &t->root, &end);
}

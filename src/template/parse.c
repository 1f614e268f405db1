// Parser for Go text/template (templates.md §2–3): tokens → node tree, with
// Go's rules for pipelines, declarations, variable scope, else-if chains,
// define/template/block. Also the tree walks Ollama does on a parsed
// template: the identifier set (§1), the tool-call tag (§10.2), the thinking
// tags (§10.1) and the legacy "cut" tree (§6.2).
#include "template/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    struct template *t;
    struct arena *a;
    struct tok *v;
    size_t n, i;
    struct err *e;
    const char **vars;
    size_t n_vars, cap_vars;
    int depth;
    int range_depth;
};

// Growable array of pointers stored in the arena.
struct vec {
    void **v;
    size_t n, cap;
};

static int vec_push(struct parser *p, struct vec *vc, void *x)
{
    if (vc->n == vc->cap) {
        size_t cap = vc->cap ? vc->cap * 2 : 4;
        void **nv = arena_alloc(p->a, cap * sizeof(void *));
        if (!nv)
            return err_set(p->e, ERR_TOO_LARGE, "template too large");
        if (vc->n)
            memcpy(nv, vc->v, vc->n * sizeof(void *));
        vc->v = nv;
        vc->cap = cap;
    }
    vc->v[vc->n++] = x;
    return 0;
}

static struct tok *peek(struct parser *p)
{
    return &p->v[p->i];
}
static struct tok *next(struct parser *p)
{
    struct tok *t = &p->v[p->i];
    if (t->type != T_EOF)
        p->i++;
    return t;
}
static struct tok *peek_ns(struct parser *p)
{
    while (p->v[p->i].type == T_SPACE)
        p->i++;
    return &p->v[p->i];
}
static struct tok *next_ns(struct parser *p)
{
    peek_ns(p);
    return next(p);
}

static const char *tok_desc(const struct tok *t, char *buf, size_t n)
{
    switch (t->type) {
    case T_EOF:
        return "EOF";
    case T_RDELIM:
        return "\"}}\"";
    case T_LDELIM:
        return "\"{{\"";
    case T_SPACE:
        return "space";
    case T_IF:
    case T_ELSE:
    case T_END:
    case T_RANGE:
    case T_WITH:
    case T_BREAK:
    case T_CONTINUE:
    case T_DEFINE:
    case T_TEMPLATE:
    case T_BLOCK:
    case T_NIL:
        snprintf(buf, n, "<%.*s>", (int)(t->n > 40 ? 40 : t->n), t->s);
        return buf;
    case T_STRING:
        snprintf(buf, n, "string");
        return buf;
    default:
        snprintf(buf, n, "%.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
        return buf;
    }
}

static int perr(struct parser *p, const struct tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(struct parser *p, const struct tok *t, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return err_set(p->e, ERR_FORMAT, "template: :%d:%d: %s", t->line, t->col, msg);
}

static int unexpected(struct parser *p, const struct tok *t, const char *ctx)
{
    char b[64];
    if (t->type == T_EOF)
        return perr(p, t, "unexpected EOF");
    return perr(p, t, "unexpected %s in %s", tok_desc(t, b, sizeof(b)), ctx);
}

static struct node *new_node(struct parser *p, int type, const struct tok *t)
{
    struct node *n = arena_alloc(p->a, sizeof(*n));
    if (!n) {
        err_set(p->e, ERR_TOO_LARGE, "template too large");
        return NULL;
    }
    memset(n, 0, sizeof(*n));
    n->type = type;
    n->line = t->line;
    n->col = t->col;
    return n;
}

static const char *tok_str(struct parser *p, const struct tok *t)
{
    return arena_strndup(p->a, t->s, t->n);
}

static int push_var(struct parser *p, const char *name)
{
    if (p->n_vars == p->cap_vars) {
        p->cap_vars = p->cap_vars ? p->cap_vars * 2 : 16;
        p->vars = xrealloc(p->vars, p->cap_vars * sizeof(*p->vars));
    }
    p->vars[p->n_vars++] = name;
    return 0;
}

static bool has_var(struct parser *p, const char *name, size_t n)
{
    for (size_t i = p->n_vars; i-- > 0;)
        if (strlen(p->vars[i]) == n && !memcmp(p->vars[i], name, n))
            return true;
    return false;
}

// ---------------------------------------------------------------------------
// Numbers (Go's parse.NumberNode + exec's idealConstant).

static int parse_number(struct parser *p, const struct tok *t, struct tval *out)
{
    char buf[128];
    size_t k = 0;
    for (size_t i = 0; i < t->n && k + 1 < sizeof(buf); i++)
        if (t->s[i] != '_')
            buf[k++] = t->s[i];
    buf[k] = 0;
    if (k + 1 >= sizeof(buf) - 1 && t->n >= sizeof(buf))
        return perr(p, t, "illegal number syntax: %.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
    bool imag = k > 0 && buf[k - 1] == 'i';
    if (imag) {
        buf[--k] = 0;
        char *end;
        double im = strtod(buf, &end);
        if (k == 0 || *end)
            return perr(p, t, "illegal number syntax: %.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
        *out = (struct tval){.kind = TV_COMPLEX, .u.c = {0, im}};
        return 0;
    }
    // integer with Go base prefixes
    const char *s = buf;
    bool neg = false;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    int base = 10;
    const char *d = s;
    bool hex = false;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        base = 16, d = s + 2, hex = true;
    else if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
        base = 8, d = s + 2;
    else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
        base = 2, d = s + 2;
    else if (s[0] == '0' && s[1])
        base = 8, d = s + 1;
    if (*d) {
        uint64_t v = 0;
        bool ok = true;
        for (const char *q = d; *q; q++) {
            int dv;
            char c = *q;
            if (c >= '0' && c <= '9')
                dv = c - '0';
            else if (c >= 'a' && c <= 'f')
                dv = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F')
                dv = c - 'A' + 10;
            else {
                ok = false;
                break;
            }
            if (dv >= base || v > (UINT64_MAX - (uint64_t)dv) / (uint64_t)base) {
                ok = false;
                break;
            }
            v = v * (uint64_t)base + (uint64_t)dv;
        }
        if (ok && (neg ? v <= (uint64_t)INT64_MAX + 1 : v <= (uint64_t)INT64_MAX)) {
            *out = (struct tval){.kind = TV_INT, .u.i = neg ? (int64_t)(0 - v) : (int64_t)v};
            return 0;
        }
    }
    // float
    char *end;
    double f = strtod(buf, &end);
    bool octal_float_like = base == 8 && !(s[1] == 'o' || s[1] == 'O');
    if (*end || k == 0 || (base != 10 && !hex && !octal_float_like) || !strpbrk(buf, "0123456789"))
        return perr(p, t, "illegal number syntax: %.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
    if (hex && !strpbrk(buf, "pP"))
        return perr(p, t, "illegal number syntax: %.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
    // "08" parses as the float 8 and is then an integer constant
    if (!strpbrk(buf, ".eEpP") && f > -9.2e18 && f < 9.2e18 && f == (double)(int64_t)f) {
        *out = (struct tval){.kind = TV_INT, .u.i = (int64_t)f};
        return 0;
    }
    *out = (struct tval){.kind = TV_FLOAT, .u.f = f};
    return 0;
}

// ---------------------------------------------------------------------------
// Pipelines

static struct node *parse_pipeline(struct parser *p, const char *ctx, int end_type, int max_decl);

static struct node *term(struct parser *p)
{
    struct tok *t = next_ns(p);
    struct node *n = NULL;
    switch (t->type) {
    case T_IDENT: {
        int f = tmpl_func_lookup(t->s, t->n);
        if (f < 0) {
            perr(p, t, "function \"%.*s\" not defined", (int)(t->n > 60 ? 60 : t->n), t->s);
            return NULL;
        }
        if (!(n = new_node(p, N_IDENT, t)))
            return NULL;
        n->s = tok_str(p, t);
        n->n = t->n;
        n->func = f;
        return n;
    }
    case T_DOT:
        return new_node(p, N_DOT, t);
    case T_NIL:
        return new_node(p, N_NIL, t);
    case T_VAR:
        if (!has_var(p, t->s, t->n)) {
            perr(p, t, "undefined variable \"%.*s\"", (int)(t->n > 60 ? 60 : t->n), t->s);
            return NULL;
        }
        if (!(n = new_node(p, N_VAR, t)))
            return NULL;
        n->idents = arena_alloc(p->a, sizeof(char *));
        if (!n->idents)
            return NULL;
        n->idents[0] = tok_str(p, t);
        n->n_idents = 1;
        return n;
    case T_FIELD:
        if (!(n = new_node(p, N_FIELD, t)))
            return NULL;
        n->idents = arena_alloc(p->a, sizeof(char *));
        if (!n->idents)
            return NULL;
        n->idents[0] = tok_str(p, t);
        n->n_idents = 1;
        return n;
    case T_BOOL:
        if (!(n = new_node(p, N_BOOL, t)))
            return NULL;
        n->val = (struct tval){.kind = TV_BOOL, .u.b = t->num != 0};
        return n;
    case T_CHAR:
        if (!(n = new_node(p, N_NUM, t)))
            return NULL;
        n->val = (struct tval){.kind = TV_INT, .u.i = t->num};
        return n;
    case T_NUMBER:
        if (!(n = new_node(p, N_NUM, t)))
            return NULL;
        if (parse_number(p, t, &n->val))
            return NULL;
        return n;
    case T_LPAREN:
        if (++p->depth > TMPL_MAX_DEPTH) {
            perr(p, t, "template nested too deeply");
            return NULL;
        }
        n = parse_pipeline(p, "parenthesized pipeline", T_RPAREN, 1);
        p->depth--;
        return n;
    case T_STRING:
        if (!(n = new_node(p, N_STR, t)))
            return NULL;
        n->s = t->s;
        n->n = t->n;
        return n;
    default:
        if (t->type != T_EOF)
            p->i--;  // back up (next_ns consumed it; spaces before are harmless)
        return NULL;
    }
}

// Sets *none when there is no operand here (not an error).
static struct node *operand(struct parser *p, bool *none)
{
    size_t before = p->i;
    struct node *n = term(p);
    *none = false;
    if (!n) {
        // term backs up without error when the token is not an operand
        if (p->e->code)
            return NULL;
        *none = true;
        return NULL;
    }
    if (peek(p)->type == T_FIELD) {
        struct vec ids = {0};
        if (n->type == N_FIELD || n->type == N_VAR)
            for (size_t i = 0; i < n->n_idents; i++)
                vec_push(p, &ids, (void *)n->idents[i]);
        while (peek(p)->type == T_FIELD) {
            struct tok *f = next(p);
            if (vec_push(p, &ids, (void *)tok_str(p, f)))
                return NULL;
        }
        switch (n->type) {
        case N_FIELD:
        case N_VAR:
            n->idents = (const char **)ids.v;
            n->n_idents = ids.n;
            break;
        case N_BOOL:
        case N_STR:
        case N_NUM:
        case N_NIL:
        case N_DOT: {
            perr(p, peek(p), "unexpected . after term");
            return NULL;
        }
        default: {
            struct node *c = new_node(p, N_CHAIN, &p->v[before]);
            if (!c)
                return NULL;
            c->pipe = n;
            c->idents = (const char **)ids.v;
            c->n_idents = ids.n;
            n = c;
        }
        }
    }
    return n;
}

static struct node *command(struct parser *p, const char *ctx, int end_type)
{
    struct node *cmd = new_node(p, N_CMD, peek_ns(p));
    if (!cmd)
        return NULL;
    struct vec args = {0};
    for (;;) {
        peek_ns(p);
        bool none;
        struct node *o = operand(p, &none);
        if (!o && !none)
            return NULL;
        if (o && vec_push(p, &args, o))
            return NULL;
        struct tok *t = next(p);
        if (t->type == T_SPACE)
            continue;
        if (t->type == T_RDELIM || t->type == T_RPAREN) {
            if (t->type != end_type) {
                unexpected(p, t, ctx);
                return NULL;
            }
            p->i--;
        } else if (t->type != T_PIPE) {
            unexpected(p, t, "operand");
            return NULL;
        }
        break;
    }
    if (args.n == 0) {
        perr(p, peek(p), "empty command");
        return NULL;
    }
    cmd->kids = (struct node **)args.v;
    cmd->n_kids = args.n;
    return cmd;
}

// "$a, $b :=" or "$a, $b =" (range only), after "$a" and the comma: records
// both names in decl and, for :=, brings them into scope.
static int pipe_decl_pair(struct parser *p, struct node *pipe, const struct tok *v1,
                          const struct tok *comma, const char *ctx, int max_decl, struct vec *decl)
{
    if (max_decl < 2)
        return perr(p, comma, "too many declarations in %s", ctx);
    struct tok *v2 = next_ns(p);
    if (v2->type != T_VAR)
        return perr(p, v2, "missing variable in %s", ctx);
    struct tok *op = next_ns(p);
    if (op->type != T_DECLARE && op->type != T_ASSIGN)
        return unexpected(p, op, ctx);
    pipe->is_assign = op->type == T_ASSIGN;
    if (pipe->is_assign && (!has_var(p, v1->s, v1->n) || !has_var(p, v2->s, v2->n)))
        return perr(p, v1, "undefined variable in assignment");
    const char *n1 = tok_str(p, v1), *n2 = tok_str(p, v2);
    vec_push(p, decl, (void *)n1);
    vec_push(p, decl, (void *)n2);
    if (!pipe->is_assign) {
        push_var(p, n1);
        push_var(p, n2);
    }
    return 0;
}

// The pipeline's optional declaration: "$x :=", "$x =", or the range pair.
// Anything else starting with a variable is left for the commands.
static int pipe_decl(struct parser *p, struct node *pipe, const char *ctx, int max_decl)
{
    struct vec decl = {0};
    size_t save = p->i;
    struct tok *v1 = next(p);
    struct tok *nx = peek_ns(p);
    if (nx->type == T_DECLARE || nx->type == T_ASSIGN) {
        next(p);
        pipe->is_assign = nx->type == T_ASSIGN;
        if (pipe->is_assign && !has_var(p, v1->s, v1->n))
            return perr(p, v1, "undefined variable \"%.*s\"", (int)(v1->n > 60 ? 60 : v1->n),
                        v1->s);
        const char *name = tok_str(p, v1);
        vec_push(p, &decl, (void *)name);
        if (!pipe->is_assign)
            push_var(p, name);
    } else if (nx->type == T_COMMA) {
        next(p);
        int rc = pipe_decl_pair(p, pipe, v1, nx, ctx, max_decl, &decl);
        if (rc)
            return rc;
    } else {
        p->i = save;
    }
    pipe->decl = (const char **)decl.v;
    pipe->n_decl = decl.n;
    return 0;
}

// Commands separated by '|' up to end_type, collected into cmds.
static int pipe_commands(struct parser *p, const char *ctx, int end_type, struct vec *cmds)
{
    for (;;) {
        struct tok *t = peek_ns(p);
        if (t->type == end_type) {
            next(p);
            return 0;
        }
        switch (t->type) {
        case T_BOOL:
        case T_CHAR:
        case T_DOT:
        case T_FIELD:
        case T_IDENT:
        case T_NUMBER:
        case T_NIL:
        case T_STRING:
        case T_VAR:
        case T_LPAREN: {
            struct node *c = command(p, ctx, end_type);
            if (!c)
                return -1;
            int rc = vec_push(p, cmds, c);
            if (rc)
                return rc;
            break;
        }
        default:
            return unexpected(p, t, ctx);
        }
    }
}

// Go rejects a constant as any stage after the first: it has nothing to call.
static int check_stages(struct parser *p, const struct tok *start, const struct vec *cmds)
{
    for (size_t i = 1; i < cmds->n; i++) {
        struct node *a0 = ((struct node *)cmds->v[i])->kids[0];
        switch (a0->type) {
        case N_BOOL:
        case N_DOT:
        case N_NIL:
        case N_NUM:
        case N_STR:
            return perr(p, start, "non executable command in pipeline stage %zu", i + 1);
        default:
            break;
        }
    }
    return 0;
}

// [declaration] command { '|' command } up to end_type. max_decl is how
// many variables the context may declare (2 for range).
static struct node *parse_pipeline(struct parser *p, const char *ctx, int end_type, int max_decl)
{
    struct tok *start = peek_ns(p);
    struct node *pipe = new_node(p, N_PIPE, start);
    if (!pipe)
        return NULL;
    if (start->type == T_VAR && pipe_decl(p, pipe, ctx, max_decl))
        return NULL;
    struct vec cmds = {0};
    if (pipe_commands(p, ctx, end_type, &cmds))
        return NULL;
    if (cmds.n == 0) {
        perr(p, start, "missing value for %s", ctx);
        return NULL;
    }
    if (check_stages(p, start, &cmds))
        return NULL;
    pipe->kids = (struct node **)cmds.v;
    pipe->n_kids = cmds.n;
    return pipe;
}

// ---------------------------------------------------------------------------
// Lists and control structures

enum { END_EOF, END_END, END_ELSE };

static struct node *parse_list(struct parser *p, int *ended, bool top);

static int expect_rdelim(struct parser *p, const char *ctx)
{
    struct tok *t = next_ns(p);
    if (t->type != T_RDELIM)
        return unexpected(p, t, ctx);
    return 0;
}

// if / range / with after the keyword.
static struct node *parse_control(struct parser *p, int type, const struct tok *kw)
{
    const char *ctx = type == N_IF ? "if" : type == N_RANGE ? "range" : "with";
    size_t mark = p->n_vars;
    if (++p->depth > TMPL_MAX_DEPTH) {
        perr(p, kw, "template nested too deeply");
        return NULL;
    }
    struct node *n = new_node(p, type, kw);
    if (!n)
        return NULL;
    n->pipe = parse_pipeline(p, ctx, T_RDELIM, type == N_RANGE ? 2 : 1);
    if (!n->pipe)
        return NULL;
    if (type == N_RANGE)
        p->range_depth++;
    int ended;
    n->list = parse_list(p, &ended, false);
    if (type == N_RANGE)
        p->range_depth--;
    if (!n->list)
        return NULL;
    if (ended == END_ELSE) {
        struct tok *t = peek_ns(p);
        if ((type == N_IF && t->type == T_IF) || (type == N_WITH && t->type == T_WITH)) {
            // "else if" / "else with": a nested construct that shares our {{end}}
            struct tok *kw2 = next(p);
            struct node *inner = parse_control(p, type, kw2);
            if (!inner)
                return NULL;
            struct node *l = new_node(p, N_LIST, kw2);
            if (!l)
                return NULL;
            l->kids = arena_alloc(p->a, sizeof(struct node *));
            if (!l->kids)
                return NULL;
            l->kids[0] = inner;
            l->n_kids = 1;
            n->else_list = l;
        } else {
            if (expect_rdelim(p, "else"))
                return NULL;
            n->else_list = parse_list(p, &ended, false);
            if (!n->else_list)
                return NULL;
            if (ended != END_END) {
                perr(p, peek(p), "expected end; found {{else}}");
                return NULL;
            }
        }
    }
    p->n_vars = mark;
    p->depth--;
    return n;
}

static int add_define(struct parser *p, const char *name, struct node *root)
{
    struct template *t = p->t;
    for (size_t i = 0; i < t->n_defs; i++)
        if (!strcmp(t->defs[i].name, name)) {
            t->defs[i].root = root;
            return 0;
        }
    t->defs = xrealloc(t->defs, (t->n_defs + 1) * sizeof(*t->defs));
    t->defs[t->n_defs++] = (struct named){name, root};
    return 0;
}

static struct node *parse_define_body(struct parser *p, const struct tok *kw, const char **name)
{
    struct tok *s = next_ns(p);
    if (s->type != T_STRING) {
        unexpected(p, s, "define clause");
        return NULL;
    }
    *name = s->s;
    if (expect_rdelim(p, "define clause"))
        return NULL;
    const char **save = p->vars;
    size_t save_n = p->n_vars, save_cap = p->cap_vars;
    int save_range = p->range_depth;
    p->vars = NULL, p->n_vars = 0, p->cap_vars = 0, p->range_depth = 0;
    push_var(p, "$");
    int ended;
    struct node *body = parse_list(p, &ended, false);
    free(p->vars);
    p->vars = save, p->n_vars = save_n, p->cap_vars = save_cap, p->range_depth = save_range;
    if (body && ended != END_END) {
        perr(p, kw, "unexpected {{else}} in define");
        return NULL;
    }
    return body;
}

// {{break}} / {{continue}}: only inside a range.
static struct node *parse_loop_jump(struct parser *p, const struct tok *t)
{
    if (p->range_depth == 0) {
        perr(p, t, "{{%s}} outside {{range}}", t->type == T_BREAK ? "break" : "continue");
        return NULL;
    }
    if (expect_rdelim(p, t->type == T_BREAK ? "{{break}}" : "{{continue}}"))
        return NULL;
    return new_node(p, t->type == T_BREAK ? N_BREAK : N_CONTINUE, t);
}

// A block's body up to {{end}}, parsed in a fresh variable scope holding only
// "$", then defined under the block's name.
static int parse_block_body(struct parser *p, const struct tok *kw, const char *name)
{
    const char **save = p->vars;
    size_t save_n = p->n_vars, save_cap = p->cap_vars;
    p->vars = NULL, p->n_vars = 0, p->cap_vars = 0;
    push_var(p, "$");
    int ended;
    struct node *body = parse_list(p, &ended, false);
    free(p->vars);
    p->vars = save, p->n_vars = save_n, p->cap_vars = save_cap;
    if (!body)
        return -1;
    if (ended != END_END)
        return perr(p, kw, "unexpected {{else}} in block clause");
    return add_define(p, name, body);
}

// {{template "name" [pipeline]}} and {{block "name" pipeline}}...{{end}}.
static struct node *parse_template_call(struct parser *p, const struct tok *t)
{
    const char *ctx = t->type == T_BLOCK ? "block clause" : "template clause";
    struct tok *s = next_ns(p);
    if (s->type != T_STRING) {
        unexpected(p, s, ctx);
        return NULL;
    }
    struct node *n = new_node(p, N_TEMPLATE, t);
    if (!n)
        return NULL;
    n->s = s->s;
    n->n = s->n;
    if (peek_ns(p)->type != T_RDELIM) {
        n->pipe = parse_pipeline(p, ctx, T_RDELIM, 1);
        if (!n->pipe)
            return NULL;
    } else {
        next(p);
        if (t->type == T_BLOCK) {
            perr(p, t, "missing value for block clause");
            return NULL;
        }
    }
    if (t->type == T_BLOCK && parse_block_body(p, t, n->s))
        return NULL;
    return n;
}

// {{define "name"}}...{{end}}, allowed only at the top level.
static void parse_define(struct parser *p, const struct tok *t, int *ended, bool top)
{
    if (!top) {
        unexpected(p, t, "command");
        return;
    }
    const char *name;
    struct node *body = parse_define_body(p, t, &name);
    if (!body)
        return;
    add_define(p, name, body);
    *ended = -2;  // nothing to add to the list
}

// {{end}} or {{else}}: closes the enclosing list, so never at the top level.
static void parse_list_end(struct parser *p, const struct tok *t, int *ended, bool top)
{
    if (top) {
        if (t->type == T_END)
            perr(p, t, "unexpected {{end}}");
        else
            perr(p, t, "unexpected {{else}}");
        return;
    }
    if (t->type == T_ELSE) {
        // "else if" is handled by the caller: do not consume the delimiter yet
        *ended = END_ELSE;
        return;
    }
    if (expect_rdelim(p, "end"))
        return;
    *ended = END_END;
}

// After "{{": one action, control structure or keyword. *ended set for end/else.
static struct node *parse_action(struct parser *p, int *ended, bool top)
{
    struct tok *t = peek_ns(p);
    *ended = -1;
    switch (t->type) {
    case T_END:
    case T_ELSE:
        next(p);
        parse_list_end(p, t, ended, top);
        return NULL;
    case T_IF:
        next(p);
        return parse_control(p, N_IF, t);
    case T_RANGE:
        next(p);
        return parse_control(p, N_RANGE, t);
    case T_WITH:
        next(p);
        return parse_control(p, N_WITH, t);
    case T_BREAK:
    case T_CONTINUE:
        next(p);
        return parse_loop_jump(p, t);
    case T_TEMPLATE:
    case T_BLOCK:
        next(p);
        return parse_template_call(p, t);
    case T_DEFINE:
        next(p);
        parse_define(p, t, ended, top);
        return NULL;
    default: {
        struct node *n = new_node(p, N_ACTION, t);
        if (!n)
            return NULL;
        n->pipe = parse_pipeline(p, "command", T_RDELIM, 1);
        return n->pipe ? n : NULL;
    }
    }
}

static struct node *parse_list(struct parser *p, int *ended, bool top)
{
    struct node *l = new_node(p, N_LIST, peek(p));
    if (!l)
        return NULL;
    struct vec kids = {0};
    for (;;) {
        struct tok *t = next(p);
        if (t->type == T_EOF) {
            if (!top) {
                perr(p, t, "unexpected EOF");
                return NULL;
            }
            *ended = END_EOF;
            break;
        }
        if (t->type == T_TEXT) {
            struct node *n = new_node(p, N_TEXT, t);
            if (!n || vec_push(p, &kids, n))
                return NULL;
            n->s = t->s;
            n->n = t->n;
            continue;
        }
        if (t->type != T_LDELIM) {
            unexpected(p, t, "input");
            return NULL;
        }
        int e;
        struct node *n = parse_action(p, &e, top);
        if (e == END_END || e == END_ELSE) {
            *ended = e;
            break;
        }
        if (e == -2)
            continue;
        if (!n || vec_push(p, &kids, n))
            return NULL;
    }
    l->kids = (struct node **)kids.v;
    l->n_kids = kids.n;
    return l;
}

// ---------------------------------------------------------------------------
// Tree walks

struct strset {
    char **v;
    size_t n, cap;
};

static void set_add(struct strset *s, const char *name)
{
    size_t n = strlen(name);
    char *low = xmalloc(n + 1);
    for (size_t i = 0; i <= n; i++)
        low[i] = (name[i] >= 'A' && name[i] <= 'Z') ? (char)(name[i] + 32) : name[i];
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], low)) {
            free(low);
            return;
        }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, s->cap * sizeof(char *));
    }
    s->v[s->n++] = low;
}

// Upstream's Identifiers(): fields and variables, not inside chains.
static int idents_walk(const struct node *n, struct strset *s)
{
    if (!n)
        return 0;
    switch (n->type) {
    case N_LIST:
    case N_PIPE:
    case N_CMD:
        for (size_t i = 0; i < n->n_kids; i++)
            if (idents_walk(n->kids[i], s))
                return -1;
        return 0;
    case N_TEMPLATE:
        if (!n->pipe)
            return -1;
        return idents_walk(n->pipe, s);
    case N_ACTION:
        return idents_walk(n->pipe, s);
    case N_IF:
    case N_RANGE:
    case N_WITH:
        if (idents_walk(n->pipe, s) || idents_walk(n->list, s) || idents_walk(n->else_list, s))
            return -1;
        return 0;
    case N_FIELD:
    case N_VAR:
        for (size_t i = 0; i < n->n_idents; i++)
            set_add(s, n->idents[i]);
        return 0;
    default:
        return 0;
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool chain_has(const struct node *n, const char *name)
{
    if (n->type != N_FIELD)
        return false;
    for (size_t i = 0; i < n->n_idents; i++)
        if (!strcmp(n->idents[i], name))
            return true;
    return false;
}

// §10.2: a field chain naming ToolCalls among the if's direct arguments.
static bool is_toolcalls_if(const struct node *n)
{
    for (size_t i = 0; i < n->pipe->n_kids; i++) {
        const struct node *cmd = n->pipe->kids[i];
        for (size_t j = 0; j < cmd->n_kids; j++)
            if (chain_has(cmd->kids[j], "ToolCalls"))
                return true;
    }
    return false;
}

// §10.2: the first `if` whose condition names ToolCalls.
static const struct node *find_toolcalls_if(const struct node *list)
{
    if (!list)
        return NULL;
    for (size_t i = 0; i < list->n_kids; i++) {
        const struct node *n = list->kids[i], *r;
        switch (n->type) {
        case N_IF:
            if (is_toolcalls_if(n))
                return n;
            /* fallthrough */
        case N_RANGE:
        case N_WITH:
            if ((r = find_toolcalls_if(n->list)) || (r = find_toolcalls_if(n->else_list)))
                return r;
            break;
        default:
            break;
        }
    }
    return NULL;
}

// First text of a list that is not all white space, descending into nested
// constructs (body, then else); stops at the first action or at a nested
// construct without one.
static const struct node *first_text(const struct node *list)
{
    if (!list)
        return NULL;
    for (size_t i = 0; i < list->n_kids; i++) {
        const struct node *n = list->kids[i], *r;
        switch (n->type) {
        case N_TEXT:
            for (size_t k = 0; k < n->n; k++)
                if (!strchr(" \t\r\n\v\f", n->s[k]))
                    return n;
            break;
        case N_IF:
        case N_RANGE:
        case N_WITH:
            if ((r = first_text(n->list)) || (r = first_text(n->else_list)))
                return r;
            return NULL;
        case N_ACTION:
            return NULL;
        default:
            break;
        }
    }
    return NULL;
}

static char *trim_dup(const char *s, size_t n)
{
    while (n && strchr(" \t\r\n", *s))
        s++, n--;
    while (n && strchr(" \t\r\n", s[n - 1]))
        n--;
    return xstrndup(s, n);
}

static char *compute_tool_tag(const struct node *root)
{
    const struct node *f = find_toolcalls_if(root);
    if (f) {
        const struct node *t = first_text(f->list);
        if (t) {
            // CRLF → LF, cut before the first '{', trim
            char *c = xmalloc(t->n + 1);
            size_t k = 0;
            for (size_t i = 0; i < t->n; i++) {
                if (t->s[i] == '\r' && i + 1 < t->n && t->s[i + 1] == '\n')
                    continue;
                c[k++] = t->s[i];
            }
            char *b = memchr(c, '{', k);
            if (b)
                k = (size_t)(b - c);
            char *r = trim_dup(c, k);
            free(c);
            if (*r)
                return r;
            free(r);
        }
    }
    return xstrdup("{");
}

// A field whose first name is `name` in a pipeline (not inside chains), as
// upstream's rangeUsesField checks.
static bool pipe_has_first_field(const struct node *n, const char *name)
{
    if (!n)
        return false;
    switch (n->type) {
    case N_PIPE:
    case N_CMD:
        for (size_t i = 0; i < n->n_kids; i++)
            if (pipe_has_first_field(n->kids[i], name))
                return true;
        return false;
    case N_FIELD:
        return n->n_idents > 0 && !strcmp(n->idents[0], name);
    default:
        return false;
    }
}

// §10.1: a field starting with .Thinking whose nearest enclosing range
// iterates over .Messages; the nearest enclosing list gives the tags.
// in_msgs: the nearest enclosing range uses Messages.
static void think_walk(const struct node *n, const struct node *list, bool in_msgs,
                       struct template *t)
{
    if (!n)
        return;
    switch (n->type) {
    case N_LIST:
        for (size_t i = 0; i < n->n_kids; i++)
            think_walk(n->kids[i], n, in_msgs, t);
        return;
    case N_ACTION:
    case N_TEMPLATE:
        think_walk(n->pipe, list, in_msgs, t);
        return;
    case N_PIPE:
    case N_CMD:
        for (size_t i = 0; i < n->n_kids; i++)
            think_walk(n->kids[i], list, in_msgs, t);
        return;
    case N_IF:
    case N_WITH:
    case N_RANGE: {
        bool inner = n->type == N_RANGE ? pipe_has_first_field(n->pipe, "Messages") : in_msgs;
        think_walk(n->pipe, list, inner, t);
        think_walk(n->list, n->list, inner, t);
        think_walk(n->else_list, n->else_list, inner, t);
        return;
    }
    case N_FIELD:
        if (in_msgs && n->n_idents > 0 && !strcmp(n->idents[0], "Thinking") && list &&
            list->n_kids > 0) {
            const struct node *a = list->kids[0], *b = list->kids[list->n_kids - 1];
            if (a->type == N_TEXT) {
                free(t->think_open);
                t->think_open = trim_dup(a->s, a->n);
            }
            if (b->type == N_TEXT) {
                free(t->think_close);
                t->think_close = trim_dup(b->s, b->n);
            }
        }
        return;
    default:
        return;
    }
}

// §6.2: copy of the tree with everything after the first .Response field
// removed (upstream's deleteNode walk order).
struct cutter {
    struct parser *p;
    bool cut;
};

static bool cut_pred(struct cutter *c, const struct node *n)
{
    if (n->type == N_FIELD && chain_has(n, "Response")) {
        c->cut = true;
        return false;
    }
    return c->cut;
}

static struct node *cut_walk(struct cutter *c, const struct node *n)
{
    if (cut_pred(c, n))
        return NULL;
    struct node *m = arena_alloc(c->p->a, sizeof(*m));
    if (!m)
        return NULL;
    *m = *n;
    switch (n->type) {
    case N_LIST: {
        struct node **kids = arena_alloc(c->p->a, (n->n_kids + 1) * sizeof(*kids));
        if (!kids)
            return NULL;
        size_t k = 0;
        for (size_t i = 0; i < n->n_kids; i++) {
            struct node *x = cut_walk(c, n->kids[i]);
            if (x)
                kids[k++] = x;
        }
        m->kids = kids;
        m->n_kids = k;
        return m;
    }
    case N_IF:
    case N_RANGE:
    case N_WITH:
        m->list = cut_walk(c, n->list);
        if (!m->list)
            return NULL;
        if (n->else_list)
            m->else_list = cut_walk(c, n->else_list);
        return m;
    case N_ACTION:
        m->pipe = cut_walk(c, n->pipe);
        return m->pipe ? m : NULL;
    case N_PIPE: {
        struct node **cmds = arena_alloc(c->p->a, (n->n_kids + 1) * sizeof(*cmds));
        if (!cmds)
            return NULL;
        size_t k = 0;
        for (size_t i = 0; i < n->n_kids; i++) {
            const struct node *cmd = n->kids[i];
            struct node **args = arena_alloc(c->p->a, (cmd->n_kids + 1) * sizeof(*args));
            if (!args)
                return NULL;
            size_t na = 0;
            for (size_t j = 0; j < cmd->n_kids; j++) {
                struct node *x = cut_walk(c, cmd->kids[j]);
                if (x)
                    args[na++] = x;
            }
            if (na == 0)
                return NULL;
            struct node *mc = arena_alloc(c->p->a, sizeof(*mc));
            if (!mc)
                return NULL;
            *mc = *cmd;
            mc->kids = args;
            mc->n_kids = na;
            cmds[k++] = mc;
        }
        if (k == 0)
            return NULL;
        m->kids = cmds;
        m->n_kids = k;
        return m;
    }
    default:
        return m;
    }
}

// ---------------------------------------------------------------------------

// The identifiers the main template and every define use, sorted (for
// template_has_ident); a {{ template }} of an undefined name is an error.
static int collect_idents(struct template *t, struct err *e)
{
    struct strset s = {0};
    bool bad = idents_walk(t->root, &s) != 0;
    for (size_t i = 0; i < t->n_defs && !bad; i++)
        bad = idents_walk(t->defs[i].root, &s) != 0;
    if (bad) {
        for (size_t i = 0; i < s.n; i++)
            free(s.v[i]);
        free(s.v);
        return err_set(e, ERR_FORMAT, "undefined template specified");
    }
    if (s.n)
        qsort(s.v, s.n, sizeof(char *), cmp_str);
    t->idents = s.v;
    t->n_idents = s.n;
    return 0;
}

// Ollama appends {{ .Response }} to a template that uses neither .Messages
// nor .Response, so a completion template still ends with the answer.
static int append_response(struct template *t, struct err *e)
{
    if (template_has_ident(t, "messages") || template_has_ident(t, "response"))
        return 0;
    struct node *l = t->root;
    struct node **kids = arena_alloc(&t->arena, (l->n_kids + 1) * sizeof(*kids));
    struct node *act = arena_alloc(&t->arena, sizeof(struct node) * 4);
    const char **ids = arena_alloc(&t->arena, sizeof(char *));
    struct node **pk = arena_alloc(&t->arena, sizeof(*pk) * 2);
    if (!kids || !act || !ids || !pk)
        return err_set(e, ERR_TOO_LARGE, "template too large");
    memset(act, 0, sizeof(struct node) * 4);
    struct node *pipe = act + 1, *cmd = act + 2, *field = act + 3;
    ids[0] = "Response";
    *field = (struct node){.type = N_FIELD, .idents = ids, .n_idents = 1};
    pk[0] = field;
    *cmd = (struct node){.type = N_CMD, .kids = pk, .n_kids = 1};
    pk[1] = cmd;
    *pipe = (struct node){.type = N_PIPE, .kids = pk + 1, .n_kids = 1};
    *act = (struct node){.type = N_ACTION, .pipe = pipe};
    if (l->n_kids)
        memcpy(kids, l->kids, l->n_kids * sizeof(*kids));
    kids[l->n_kids] = act;
    l->kids = kids;
    l->n_kids++;
    return 0;
}

int tmpl_parse_tree(struct template *t, struct err *e)
{
    struct toks toks = {0};
    int rc = tmpl_lex(t->src, t->src_len, &t->arena, &toks, e);
    if (rc) {
        free(toks.v);
        return rc;
    }
    struct err local = {0};
    struct parser p = {.t = t, .a = &t->arena, .v = toks.v, .n = toks.n, .e = &local};
    push_var(&p, "$");
    int ended;
    t->root = parse_list(&p, &ended, true);
    free(p.vars);
    free(toks.v);
    if (!t->root) {
        if (!local.code)
            err_set(&local, ERR_FORMAT, "template: parse error");
        return err_set(e, local.code, "%s", local.msg);
    }

    if ((rc = collect_idents(t, e)) || (rc = append_response(t, e)))
        return rc;
    t->tool_tag = compute_tool_tag(t->root);
    think_walk(t->root, t->root, false, t);
    struct cutter c = {.p = &p};
    t->cut_root = cut_walk(&c, t->root);
    if (!t->cut_root) {
        // everything was cut (cannot happen for a list) or out of memory
        t->cut_root = t->root;
    }
    return 0;
}

// Evaluator for parsed templates (templates.md §3): walks the node tree over
// the root data with Go's rules for pipelines, variables, field lookup with
// missingkey=zero, if/with/range/break/continue and template calls. Every
// error is reported, never a crash; steps, depth and output are bounded.
#include "template/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { W_OK = 0, W_BREAK = 1, W_CONTINUE = 2 };

static void node_str(struct buf *b, const struct node *n)
{
    if (!n)
        return;
    switch (n->type) {
    case N_FIELD:
        for (size_t i = 0; i < n->n_idents; i++)
            buf_printf(b, ".%s", n->idents[i]);
        break;
    case N_VAR:
        buf_append_str(b, n->idents[0]);
        for (size_t i = 1; i < n->n_idents; i++)
            buf_printf(b, ".%s", n->idents[i]);
        break;
    case N_CHAIN:
        buf_append_char(b, '(');
        node_str(b, n->pipe);
        buf_append_char(b, ')');
        for (size_t i = 0; i < n->n_idents; i++)
            buf_printf(b, ".%s", n->idents[i]);
        break;
    case N_IDENT:
        buf_append_str(b, n->s);
        break;
    case N_DOT:
        buf_append_char(b, '.');
        break;
    case N_NIL:
        buf_append_str(b, "nil");
        break;
    case N_STR:
        buf_printf(b, "%.*s", (int)(n->n > 30 ? 30 : n->n), n->s);
        break;
    case N_PIPE:
        for (size_t i = 0; i < n->n_kids; i++) {
            if (i)
                buf_append_str(b, " | ");
            node_str(b, n->kids[i]);
        }
        break;
    case N_CMD:
        for (size_t i = 0; i < n->n_kids; i++) {
            if (i)
                buf_append_char(b, ' ');
            node_str(b, n->kids[i]);
        }
        break;
    case N_BOOL:
    case N_NUM:
        tv_print(b, &n->val);
        break;
    default:
        break;
    }
}

int exec_errorf(struct exec *x, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct buf at;
    buf_init(&at, 120);
    node_str(&at, x->at);
    int rc = err_set(x->e, ERR_FORMAT, "template: :%d:%d: executing \"\" at <%s>: %s",
                     x->at ? x->at->line : 0, x->at ? x->at->col : 0, buf_cstr(&at), msg);
    buf_deinit(&at);
    return rc;
}

int exec_str(struct exec *x, const char *s, size_t n, struct tval *out)
{
    char *p = arena_strndup(x->a, s, n);
    if (!p)
        return exec_errorf(x, "out of memory");
    *out = (struct tval){.kind = TV_STR, .u.s = {p, n}};
    return 0;
}

static int step(struct exec *x)
{
    if (++x->steps > TMPL_MAX_STEPS)
        return exec_errorf(x, "template execution exceeded %d steps", TMPL_MAX_STEPS);
    return 0;
}

// ---------------------------------------------------------------------------
// Variables

static void var_push(struct exec *x, const char *name, struct tval v)
{
    if (x->n_vars == x->cap_vars) {
        x->cap_vars = x->cap_vars ? x->cap_vars * 2 : 16;
        x->vars = xrealloc(x->vars, x->cap_vars * sizeof(*x->vars));
    }
    x->vars[x->n_vars].name = name;
    x->vars[x->n_vars].v = v;
    x->n_vars++;
}

static struct tval *var_find(struct exec *x, const char *name)
{
    for (size_t i = x->n_vars; i-- > x->var_base;)
        if (!strcmp(x->vars[i].name, name))
            return &x->vars[i].v;
    return NULL;
}

// ---------------------------------------------------------------------------
// Fields

static int root_schema(const char *key)
{
    if (!strcmp(key, "Messages"))
        return S_MSGS;
    if (!strcmp(key, "Tools"))
        return S_TOOLS;
    return S_GENERIC;
}

static int field(struct exec *x, const struct tval *recv, const char *name, struct tval *out)
{
    if (recv->kind == TV_NIL)
        return exec_errorf(x, "nil pointer evaluating interface {}.%s", name);
    if (tv_is_map(recv)) {
        json_t *j = json_object_get(recv->u.j.j, name);
        switch (recv->schema) {
        case S_ROOT:
            if (!j)
                *out = tv_nil();
            else
                *out = tv_from_json(j, root_schema(name));
            return 0;
        case S_PROPS:
            *out = tv_from_json(j, S_PROP);
            return 0;
        default:
            *out = j ? tv_from_json(j, S_GENERIC) : tv_nil();
            return 0;
        }
    }
    if (tv_is_struct(recv) && tv_struct_field(recv, name, out))
        return 0;
    return exec_errorf(x, "can't evaluate field %s in type %s", name, tv_type_name(recv));
}

static int fields(struct exec *x, struct tval v, const char *const *ids, size_t n, bool has_args,
                  struct tval *out)
{
    for (size_t i = 0; i < n; i++) {
        struct tval nv;
        int rc = field(x, &v, ids[i], &nv);
        if (rc)
            return rc;
        v = nv;
    }
    if (has_args && n > 0)
        return exec_errorf(x, "%s is not a method but has arguments", ids[n - 1]);
    *out = v;
    return 0;
}

// ---------------------------------------------------------------------------
// Pipelines

static int eval_pipeline(struct exec *x, struct tval dot, const struct node *pipe, bool decl,
                         struct tval *out);

static int eval_arg(struct exec *x, struct tval dot, const struct node *n, struct tval *out)
{
    int rc = step(x);
    if (rc)
        return rc;
    const struct node *save = x->at;
    x->at = n;
    switch (n->type) {
    case N_DOT:
        *out = dot;
        break;
    case N_NIL:
        *out = tv_nil();
        break;
    case N_BOOL:
    case N_NUM:
        *out = n->val;
        break;
    case N_STR:
        *out = (struct tval){.kind = TV_STR, .u.s = {n->s, n->n}};
        break;
    case N_FIELD:
        rc = fields(x, dot, n->idents, n->n_idents, false, out);
        break;
    case N_VAR: {
        struct tval *v = var_find(x, n->idents[0]);
        if (!v) {
            rc = exec_errorf(x, "undefined variable: %s", n->idents[0]);
            break;
        }
        rc = fields(x, *v, n->idents + 1, n->n_idents - 1, false, out);
        break;
    }
    case N_CHAIN: {
        struct tval v;
        rc = eval_arg(x, dot, n->pipe, &v);
        if (!rc)
            rc = fields(x, v, n->idents, n->n_idents, false, out);
        break;
    }
    case N_PIPE:
        if (++x->depth > TMPL_MAX_DEPTH) {
            rc = exec_errorf(x, "exceeded maximum template depth (%d)", TMPL_MAX_DEPTH);
            break;
        }
        rc = eval_pipeline(x, dot, n, true, out);
        x->depth--;
        break;
    case N_IDENT:
        rc = tmpl_call_func(x, n->func, NULL, 0, out);
        break;
    default:
        rc = exec_errorf(x, "can't handle argument");
        break;
    }
    x->at = save;
    return rc;
}

// One command; final is the previous command's value (has_final) for pipes.
static int eval_command(struct exec *x, struct tval dot, const struct node *cmd,
                        const struct tval *final, struct tval *out)
{
    const struct node *first = cmd->kids[0];
    x->at = first;
    int rc = step(x);
    if (rc)
        return rc;
    bool has_args = cmd->n_kids > 1 || final;
    switch (first->type) {
    case N_FIELD:
        return fields(x, dot, first->idents, first->n_idents, has_args, out);
    case N_VAR: {
        struct tval *v = var_find(x, first->idents[0]);
        if (!v)
            return exec_errorf(x, "undefined variable: %s", first->idents[0]);
        if (first->n_idents == 1 && has_args)
            return exec_errorf(x, "can't give argument to non-function %s", first->idents[0]);
        return fields(x, *v, first->idents + 1, first->n_idents - 1, has_args, out);
    }
    case N_CHAIN: {
        struct tval v;
        if ((rc = eval_arg(x, dot, first->pipe, &v)))
            return rc;
        x->at = first;
        return fields(x, v, first->idents, first->n_idents, has_args, out);
    }
    case N_IDENT:
        break;
    case N_NIL:
        return exec_errorf(x, "nil is not a command");
    default:
        if (has_args)
            return exec_errorf(x, "can't give argument to non-function");
        return eval_arg(x, dot, first, out);
    }
    // function call
    int fn = first->func;
    size_t n_args = cmd->n_kids - 1 + (final ? 1 : 0);
    if (fn == F_AND || fn == F_OR) {
        if (n_args < 1)
            return exec_errorf(x, "wrong number of args for %s: want at least 1 got 0",
                               tmpl_func_name(fn));
        struct tval v = tv_nil();
        for (size_t i = 1; i < cmd->n_kids; i++) {
            if ((rc = eval_arg(x, dot, cmd->kids[i], &v)))
                return rc;
            bool t = tv_truth(&v);
            if ((fn == F_AND && !t) || (fn == F_OR && t)) {
                *out = v;
                return 0;
            }
        }
        if (final)
            v = *final;
        *out = v;
        return 0;
    }
    struct tval stack_args[8];
    struct tval *args = n_args <= 8 ? stack_args : xmalloc(n_args * sizeof(*args));
    size_t k = 0;
    for (size_t i = 1; i < cmd->n_kids && !rc; i++)
        rc = eval_arg(x, dot, cmd->kids[i], &args[k++]);
    if (!rc && final)
        args[k++] = *final;
    x->at = first;
    if (!rc)
        rc = tmpl_call_func(x, fn, args, k, out);
    if (args != stack_args)
        free(args);
    return rc;
}

static int eval_pipeline(struct exec *x, struct tval dot, const struct node *pipe, bool decl,
                         struct tval *out)
{
    struct tval v = tv_nil();
    for (size_t i = 0; i < pipe->n_kids; i++) {
        struct tval nv;
        int rc = eval_command(x, dot, pipe->kids[i], i ? &v : NULL, &nv);
        if (rc)
            return rc;
        v = nv;
    }
    if (decl) {
        for (size_t i = 0; i < pipe->n_decl; i++) {
            if (pipe->is_assign) {
                struct tval *p = var_find(x, pipe->decl[i]);
                if (!p)
                    return exec_errorf(x, "undefined variable: %s", pipe->decl[i]);
                *p = v;
            } else {
                var_push(x, pipe->decl[i], v);
            }
        }
    }
    *out = v;
    return 0;
}

// ---------------------------------------------------------------------------
// Statements

static int walk(struct exec *x, struct tval dot, const struct node *n);

static int print_value(struct exec *x, const struct tval *v)
{
    int rc = tv_print(x->out, v);
    if (rc || x->out->len > TMPL_MAX_OUTPUT)
        return exec_errorf(x, "template output too large");
    return 0;
}

// What a range iterates: a list, a map (sorted keys) or an int (0 .. n-1).
struct range_src {
    struct tval v;
    bool is_list, is_map;
    const char **keys;  // owned, maps only
    size_t count;
};

static int range_open(struct exec *x, struct tval v, size_t n_decl, struct range_src *r)
{
    *r = (struct range_src){.v = v, .is_list = tv_is_list(&v), .is_map = tv_is_map(&v)};
    if (r->is_list) {
        r->count = tv_list_len(&v);
    } else if (r->is_map) {
        r->keys = json_sorted_keys(v.u.j.j, &r->count);
    } else if (v.kind == TV_INT) {
        if (n_decl > 1)
            return exec_errorf(x, "can't use %lld to iterate over more than one variable",
                               (long long)v.u.i);
        r->count = v.u.i > 0 ? (size_t)v.u.i : 0;
    } else if (v.kind != TV_NIL) {
        char desc[64];
        snprintf(desc, sizeof(desc), "%s", tv_type_name(&v));
        return exec_errorf(x, "range can't iterate over value of type %s", desc);
    }
    return 0;
}

// Element i and its index (a list position, a map key, or the int itself).
static void range_at(const struct range_src *r, size_t i, struct tval *idx, struct tval *elem)
{
    const struct tval *v = &r->v;
    if (r->is_list) {
        *idx = (struct tval){.kind = TV_INT, .u.i = (int64_t)i};
        *elem = tv_list_at(v, i);
    } else if (r->is_map) {
        const char *k = r->keys[i];
        *idx = (struct tval){.kind = TV_STR, .u.s = {k, strlen(k)}};
        int sch = v->schema == S_PROPS  ? S_PROP
                  : v->schema == S_ROOT ? (!strcmp(k, "Messages") ? S_MSGS
                                           : !strcmp(k, "Tools")  ? S_TOOLS
                                                                  : S_GENERIC)
                                        : S_GENERIC;
        *elem = tv_from_json(json_object_get(v->u.j.j, k), sch);
    } else {
        *idx = *elem = (struct tval){.kind = TV_INT, .u.i = (int64_t)i};
    }
}

// Binds the range's variables for one element: declared ($i, $e := ...) in
// the slots from dbase, or assigned ($i, $e = ...) to existing variables.
static void range_bind(struct exec *x, const struct node *pipe, size_t dbase, struct tval idx,
                       struct tval elem)
{
    size_t nd = pipe->n_decl;
    if (pipe->is_assign) {
        struct tval *a = var_find(x, pipe->decl[0]);
        struct tval *b = nd > 1 ? var_find(x, pipe->decl[1]) : NULL;
        if (nd == 1 && a)
            *a = elem;
        if (nd == 2 && a && b)
            *a = idx, *b = elem;
    } else if (nd == 1) {
        x->vars[dbase].v = elem;
    } else if (nd == 2) {
        x->vars[dbase].v = idx;
        x->vars[dbase + 1].v = elem;
    }
}

static int walk_range(struct exec *x, struct tval dot, const struct node *n)
{
    size_t mark = x->n_vars;
    struct tval v;
    int rc = eval_pipeline(x, dot, n->pipe, false, &v);
    if (rc)
        return rc;
    // the declared variables: element (one) or index, element (two)
    size_t dbase = x->n_vars;
    if (!n->pipe->is_assign)
        for (size_t i = 0; i < n->pipe->n_decl; i++)
            var_push(x, n->pipe->decl[i], v);
    struct range_src r;
    if ((rc = range_open(x, v, n->pipe->n_decl, &r))) {
        x->n_vars = mark;
        return rc;
    }
    for (size_t i = 0; i < r.count; i++) {
        struct tval idx, elem;
        range_at(&r, i, &idx, &elem);
        range_bind(x, n->pipe, dbase, idx, elem);
        size_t inner = x->n_vars;
        rc = walk(x, elem, n->list);
        x->n_vars = inner;
        if (rc == W_BREAK) {
            rc = 0;
            break;
        }
        if (rc == W_CONTINUE)
            rc = 0;
        if (rc || (rc = step(x)))
            break;
    }
    free(r.keys);
    if (!rc && r.count == 0 && n->else_list)
        rc = walk(x, dot, n->else_list);
    x->n_vars = mark;
    return rc;
}

static const struct node *find_def(const struct template *t, const char *name, size_t n)
{
    for (size_t i = 0; i < t->n_defs; i++)
        if (strlen(t->defs[i].name) == n && !memcmp(t->defs[i].name, name, n))
            return t->defs[i].root;
    return NULL;
}

static int walk(struct exec *x, struct tval dot, const struct node *n)
{
    int rc = step(x);
    if (rc)
        return rc;
    x->at = n;
    switch (n->type) {
    case N_LIST:
        for (size_t i = 0; i < n->n_kids; i++)
            if ((rc = walk(x, dot, n->kids[i])))
                return rc;
        return 0;
    case N_TEXT:
        if (buf_append(x->out, n->s, n->n) || x->out->len > TMPL_MAX_OUTPUT)
            return exec_errorf(x, "template output too large");
        return 0;
    case N_ACTION: {
        struct tval v;
        if ((rc = eval_pipeline(x, dot, n->pipe, true, &v)))
            return rc;
        if (n->pipe->n_decl == 0)
            return print_value(x, &v);
        return 0;
    }
    case N_IF:
    case N_WITH: {
        size_t mark = x->n_vars;
        struct tval v;
        if ((rc = eval_pipeline(x, dot, n->pipe, true, &v)))
            return rc;
        if (tv_truth(&v))
            rc = walk(x, n->type == N_WITH ? v : dot, n->list);
        else if (n->else_list)
            rc = walk(x, dot, n->else_list);
        x->n_vars = mark;
        return rc;
    }
    case N_RANGE:
        return walk_range(x, dot, n);
    case N_BREAK:
        return W_BREAK;
    case N_CONTINUE:
        return W_CONTINUE;
    case N_TEMPLATE: {
        const struct node *def = find_def(x->t, n->s, n->n);
        if (!def)
            return exec_errorf(x, "no such template \"%.*s\"", (int)(n->n > 60 ? 60 : n->n), n->s);
        if (x->depth + 1 > TMPL_MAX_DEPTH)
            return exec_errorf(x, "exceeded maximum template depth (%d)", TMPL_MAX_DEPTH);
        struct tval v = tv_nil();
        if (n->pipe && (rc = eval_pipeline(x, dot, n->pipe, true, &v)))
            return rc;
        size_t save_base = x->var_base, save_n = x->n_vars;
        x->var_base = x->n_vars;
        var_push(x, "$", v);
        x->depth++;
        rc = walk(x, v, def);
        x->depth--;
        x->n_vars = save_n;
        x->var_base = save_base;
        // break/continue cannot cross a template call (parse rejects it)
        return rc < 0 ? rc : 0;
    }
    default:
        return exec_errorf(x, "unknown node");
    }
}

int tmpl_exec_node(const struct template *t, const struct node *root, json_t *data, struct buf *out,
                   struct err *e)
{
    struct arena a;
    arena_init(&a, 256u << 20);
    struct exec x = {.t = t, .a = &a, .out = out, .e = e, .root = data};
    struct tval rootv = tv_from_json(data, S_ROOT);
    if (!json_is_object(data))
        rootv = tv_nil();
    var_push(&x, "$", rootv);
    int rc = walk(&x, rootv, root);
    free(x.vars);
    arena_deinit(&a);
    return rc < 0 ? rc : 0;
}

// The interpreter: walks the tree over scopes (frames), writing output to
// the render's buffer. Scoping follows Jinja2: each for-loop iteration,
// macro call and with-block gets its own frame; if-blocks do not. Every
// node evaluated and every loop iteration counts against the step limit;
// macro calls against the depth limit; output and memory are capped.
#include "jinja/internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

struct jframe {
    struct jframe *parent;
    const char **names;
    struct jv *vals;
    size_t n, cap;
};

enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

int jr_fail(struct jrender *r, int line, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(r->e, ERR_FORMAT, "jinja: line %d: %s", line ? line : r->line, msg);
}

int jr_step(struct jrender *r)
{
    if (++r->steps > r->lim.max_steps)
        return err_set(r->e, ERR_TOO_LARGE,
                       "jinja: line %d: template took more than %llu steps to render", r->line,
                       (unsigned long long)r->lim.max_steps);
    return 0;
}

static struct jframe *frame_new(struct jrender *r, struct jframe *parent)
{
    struct jframe *f = arena_alloc(r->a, sizeof *f);
    if (!f)
        return NULL;
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static int frame_set(struct jrender *r, struct jframe *f, const char *name, struct jv v)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return 0;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        const char **names = arena_alloc(r->a, cap * sizeof *names);
        struct jv *vals = arena_alloc(r->a, cap * sizeof *vals);
        if (!names || !vals)
            return jr_oom(r);
        if (f->n) {
            memcpy(names, f->names, f->n * sizeof *names);
            memcpy(vals, f->vals, f->n * sizeof *vals);
        }
        f->names = names;
        f->vals = vals;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
    return 0;
}

static struct jv *frame_get(struct jframe *f, const char *name)
{
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name))
                return &f->vals[i];
    return NULL;
}

// Undefined values remember why they are undefined, for the error when one
// is used: a plain name, or ".attr" for a missing attribute or key.
static int undefined_error(struct jrender *r, int line, struct jv v)
{
    const char *u = v.u.undef;
    if (u && u[0] == '.')
        return jr_fail(r, line, "object has no attribute '%s'", u + 1);
    if (u && u[0] == '[')
        return jr_fail(r, line, "object has no element %s", u);
    return jr_fail(r, line, "'%s' is undefined", u ? u : "value");
}

static const char *undef_attr(struct jrender *r, const char *name, size_t n)
{
    char *s = arena_alloc(r->a, n + 2);
    if (!s)
        return NULL;
    s[0] = '.';
    memcpy(s + 1, name, n);
    s[n + 1] = 0;
    return s;
}

static int emit(struct jrender *r, const char *s, size_t n)
{
    if (r->out->len + n > r->lim.max_output_bytes)
        return err_set(r->e, ERR_TOO_LARGE, "jinja: line %d: rendered output exceeds %zu bytes",
                       r->line, r->lim.max_output_bytes);
    int rc = buf_append(r->out, s, n);
    return rc ? jr_oom(r) : 0;
}

static int render_nodes(struct jrender *r, struct jnodes body, struct jframe *f);

// Renders body into a fresh string (block set, filter blocks, macros).
static int capture(struct jrender *r, struct jnodes body, struct jframe *f, struct jv *out)
{
    struct buf tmp, *saved = r->out;
    buf_init(&tmp, r->lim.max_output_bytes);
    r->out = &tmp;
    int rc = render_nodes(r, body, f);
    r->out = saved;
    if (!rc)
        rc = jv_str_new(r, tmp.data ? tmp.data : "", tmp.len, out);
    buf_deinit(&tmp);
    return rc;
}

// ---------------------------------------------------------------------------
// Expressions

static int eval_args(struct jrender *r, const struct jargs *a, struct jframe *f, struct jcall *c)
{
    memset(c, 0, sizeof *c);
    size_t np = a->pos.n, nk = a->kw.n;
    if (np + nk == 0)
        return 0;
    struct jv *vals = arena_alloc(r->a, (np + nk) * sizeof *vals);
    if (!vals)
        return jr_oom(r);
    for (size_t i = 0; i < np; i++) {
        int rc = jr_eval(r, a->pos.v[i], f, &vals[i]);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < nk; i++) {
        int rc = jr_eval(r, a->kw.v[i], f, &vals[np + i]);
        if (rc)
            return rc;
    }
    c->pos = vals;
    c->n_pos = np;
    c->kw = vals + np;
    c->n_kw = nk;
    c->kw_names = a->kw_names;
    return 0;
}

static int getattr_value(struct jrender *r, int line, struct jv obj, const char *name, size_t n,
                         struct jv *out)
{
    if (obj.t == JV_UNDEF && r->lim.llama_cpp) {  // llama.cpp: undefined.x is undefined
        *out = obj;
        return 0;
    }
    if (obj.t == JV_UNDEF)
        return undefined_error(r, line, obj);
    if (obj.t == JV_FUNC && r->lim.llama_cpp)  // llama.cpp: a method has no attributes
        return jr_fail(r, line, "Function has no builtins");
    if (obj.t == JV_DICT && obj.u.d->ns) {
        for (size_t i = 0; i < obj.u.d->n; i++)
            if (obj.u.d->keys[i].u.s.n == n && !memcmp(obj.u.d->keys[i].u.s.p, name, n)) {
                *out = obj.u.d->vals[i];
                return 0;
            }
    } else {
        // Jinja2's getattr: the Python attribute (a method) first, then the item.
        if (jr_method(r, obj, name, n, out))
            return 0;
        if (obj.t == JV_DICT) {
            struct jv *v = jv_dict_get(obj.u.d, jv_str(name, n));
            if (v) {
                *out = *v;
                return 0;
            }
        }
    }
    const char *u = undef_attr(r, name, n);
    if (!u)
        return jr_oom(r);
    *out = jv_undef(u);
    return 0;
}

static int getitem_value(struct jrender *r, int line, struct jv obj, struct jv key, struct jv *out)
{
    if (r->lim.llama_cpp && (obj.t == JV_UNDEF || key.t == JV_UNDEF)) {
        *out = obj.t == JV_UNDEF ? obj : key;  // llama.cpp: x[undefined] is undefined
        return 0;
    }
    if (obj.t == JV_UNDEF)
        return undefined_error(r, line, obj);
    if (key.t == JV_UNDEF)
        return undefined_error(r, line, key);
    if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = key.t == JV_INT ? key.u.i : key.u.b;
        int64_t len;
        jv_length(r, obj, &len);
        if (i < 0)
            i += len;
        if (i < 0 || i >= len) {
            *out = jv_undef("[index]");
            return 0;
        }
        if (obj.t == JV_LIST) {
            *out = obj.u.l->items[i];
        } else {
            size_t a = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i);
            size_t b = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
            *out = jv_str(obj.u.s.p + a, b - a);
        }
        return 0;
    }
    if (obj.t == JV_DICT) {
        struct jv *v = jv_dict_get(obj.u.d, key);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    if (key.t == JV_STR)
        return getattr_value(r, line, obj, key.u.s.p, key.u.s.n, out);
    *out = jv_undef("[key]");
    return 0;
}

// Python slice semantics over n elements.
static void slice_bounds(int64_t n, struct jv a, struct jv b, int64_t step, int64_t *start,
                         int64_t *stop)
{
    bool has_a = a.t == JV_INT, has_b = b.t == JV_INT;
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    if (has_a) {
        *start = a.u.i < 0 ? a.u.i + n : a.u.i;
        if (*start < lo)
            *start = lo;
        if (*start > hi)
            *start = hi;
    } else {
        *start = step < 0 ? hi : lo;
    }
    if (has_b) {
        *stop = b.u.i < 0 ? b.u.i + n : b.u.i;
        if (*stop < lo)
            *stop = lo;
        if (*stop > hi)
            *stop = hi;
    } else {
        *stop = step < 0 ? lo : hi;
    }
}

static int eval_slice(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv obj, a = jv_none(), b = jv_none(), s = jv_none();
    int rc = jr_eval(r, n->a, f, &obj);
    if (!rc && n->b)
        rc = jr_eval(r, n->b, f, &a);
    if (!rc && n->c)
        rc = jr_eval(r, n->c, f, &b);
    if (!rc && n->d)
        rc = jr_eval(r, n->d, f, &s);
    if (rc)
        return rc;
    if (obj.t == JV_UNDEF)
        return undefined_error(r, n->line, obj);
    for (int k = 0; k < 3; k++) {
        struct jv v = k == 0 ? a : k == 1 ? b : s;
        if (v.t != JV_INT && v.t != JV_NONE && v.t != JV_UNDEF)
            return jr_fail(r, n->line, "%s", "slice indices must be integers or None");
    }
    int64_t step = s.t == JV_INT ? s.u.i : 1;
    if (step == 0)
        return jr_fail(r, n->line, "%s", "slice step cannot be zero");
    if (obj.t != JV_LIST && obj.t != JV_STR)
        return jr_fail(r, n->line, "'%s' object is not subscriptable", jv_type_name(obj));
    // Strings slice code points: split into a list first when not ASCII.
    struct jv_list *items = NULL;
    bool ascii = true;
    if (obj.t == JV_STR) {
        for (size_t i = 0; i < obj.u.s.n && ascii; i++)
            ascii = (unsigned char)obj.u.s.p[i] < 0x80;
    }
    int64_t len;
    jv_length(r, obj, &len);
    int64_t start, stop;
    slice_bounds(len, a, b, step, &start, &stop);
    if (obj.t == JV_STR && ascii && step == 1) {
        *out = start < stop ? jv_str(obj.u.s.p + start, (size_t)(stop - start)) : jv_str("", 0);
        return 0;
    }
    if ((rc = jv_iterate(r, obj, &items)))
        return rc;
    struct jv_list *res = jv_list_new(r, 0);
    if (!res)
        return jr_oom(r);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        if ((rc = jr_step(r)) || (rc = jv_list_push(r, res, items->items[i])))
            return rc;
    if (obj.t == JV_LIST) {
        res->tuple = obj.u.l->tuple;
        *out = (struct jv){.t = JV_LIST, .u.l = res};
        return 0;
    }
    struct buf bb;
    buf_init(&bb, 0);
    for (size_t i = 0; i < res->n; i++)
        buf_append(&bb, res->items[i].u.s.p, res->items[i].u.s.n);
    rc = jv_str_new(r, bb.data ? bb.data : "", bb.len, out);
    buf_deinit(&bb);
    return rc;
}

static bool is_int(struct jv v)
{
    return v.t == JV_INT || v.t == JV_BOOL;
}
static int64_t ival(struct jv v)
{
    return v.t == JV_INT ? v.u.i : v.u.b;
}
static double fval(struct jv v)
{
    return v.t == JV_FLOAT ? v.u.f : (double)ival(v);
}

static int repeat(struct jrender *r, int line, struct jv seq, int64_t times, struct jv *out)
{
    if (times < 0)
        times = 0;
    if (seq.t == JV_STR) {
        size_t total;
        if (!size_mul(&total, seq.u.s.n, (size_t)times) || total > r->lim.max_output_bytes)
            return err_set(r->e, ERR_TOO_LARGE, "jinja: line %d: string repetition too large",
                           line);
        char *s = arena_alloc(r->a, total + 1);
        if (!s)
            return jr_oom(r);
        for (int64_t i = 0; i < times; i++)
            memcpy(s + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        s[total] = 0;
        *out = jv_str(s, total);
        return 0;
    }
    size_t total;
    if (!size_mul(&total, seq.u.l->n, (size_t)times) || total > r->lim.max_steps)
        return err_set(r->e, ERR_TOO_LARGE, "jinja: line %d: list repetition too large", line);
    struct jv_list *l = jv_list_new(r, total);
    if (!l)
        return jr_oom(r);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            l->items[l->n++] = seq.u.l->items[k];
    l->tuple = seq.u.l->tuple;
    *out = (struct jv){.t = JV_LIST, .u.l = l};
    return 0;
}

// printf-style "%s" % args (the conversions templates use: s, d, i, r, f, %).
int jr_str_format(struct jrender *r, int line, struct jv fmt, struct jv args, struct jv *out)
{
    struct jv_list one = {.items = &args, .n = 1};
    struct jv_list *a = args.t == JV_LIST && args.u.l->tuple ? args.u.l : &one;
    size_t ai = 0;
    struct buf b;
    buf_init(&b, r->lim.max_output_bytes);
    int rc = 0;
    for (size_t i = 0; !rc && i < fmt.u.s.n; i++) {
        char c = fmt.u.s.p[i];
        if (c != '%') {
            rc = buf_append_char(&b, c);
            continue;
        }
        if (++i >= fmt.u.s.n) {
            rc = jr_fail(r, line, "%s", "incomplete format");
            break;
        }
        char conv = fmt.u.s.p[i];
        if (conv == '%') {
            rc = buf_append_char(&b, '%');
            continue;
        }
        if (ai >= a->n) {
            rc = jr_fail(r, line, "%s", "not enough arguments for format string");
            break;
        }
        struct jv v = a->items[ai++];
        if (conv == 's' || conv == 'r') {
            rc = jv_to_str(r, v, &b);
        } else if (conv == 'd' || conv == 'i') {
            if (v.t == JV_FLOAT)
                rc = buf_printf(&b, "%lld", (long long)v.u.f);
            else if (is_int(v))
                rc = buf_printf(&b, "%lld", (long long)ival(v));
            else
                rc = jr_fail(r, line, "%%d format: a real number is required, not %s",
                             jv_type_name(v));
        } else if (conv == 'f') {
            if (v.t == JV_FLOAT || is_int(v))
                rc = buf_printf(&b, "%f", fval(v));
            else
                rc = jr_fail(r, line, "%%f format: a real number is required, not %s",
                             jv_type_name(v));
        } else {
            rc = jr_fail(r, line, "unsupported format character '%c'", conv);
        }
    }
    if (!rc && ai < a->n)
        rc = jr_fail(r, line, "%s", "not all arguments converted during string formatting");
    if (!rc)
        rc = jv_str_new(r, b.data ? b.data : "", b.len, out);
    buf_deinit(&b);
    return rc;
}

// a ~ b: both as strings, concatenated.
static int concat_values(struct jrender *r, struct jv a, struct jv b, struct jv *out)
{
    struct buf s;
    buf_init(&s, r->lim.max_output_bytes);
    int rc = jv_to_str(r, a, &s);
    if (!rc)
        rc = jv_to_str(r, b, &s);
    if (!rc)
        rc = jv_str_new(r, s.data ? s.data : "", s.len, out);
    buf_deinit(&s);
    return rc;
}

// str + str and list + list (a tuple stays a tuple).
static int add_sequences(struct jrender *r, struct jv a, struct jv b, struct jv *out)
{
    if (a.t == JV_STR) {
        size_t total = a.u.s.n + b.u.s.n;
        char *s = arena_alloc(r->a, total + 1);
        if (!s)
            return jr_oom(r);
        memcpy(s, a.u.s.p, a.u.s.n);
        memcpy(s + a.u.s.n, b.u.s.p, b.u.s.n);
        s[total] = 0;
        *out = jv_str(s, total);
        return 0;
    }
    struct jv_list *l = jv_list_new(r, a.u.l->n + b.u.l->n);
    if (!l)
        return jr_oom(r);
    jv_copy(l->items, a.u.l->items, a.u.l->n * sizeof *l->items);
    jv_copy(l->items + a.u.l->n, b.u.l->items, b.u.l->n * sizeof *l->items);
    l->n = a.u.l->n + b.u.l->n;
    l->tuple = a.u.l->tuple;
    *out = (struct jv){.t = JV_LIST, .u.l = l};
    return 0;
}

// Integer x ** y for y >= 0; false on overflow (Python then has a big int; we use a float).
static bool int_pow(int64_t x, int64_t y, int64_t *z)
{
    *z = 1;
    for (int64_t i = 0; i < y; i++) {
        if (__builtin_mul_overflow(*z, x, z))
            return false;
        if (*z == 0 || *z == 1)
            break;
    }
    if (x == -1)
        *z = (y % 2) ? -1 : 1;
    return true;
}

// Python's integer arithmetic (floor division and modulo round toward minus
// infinity). Returns 1 when the result does not fit an int64 (the caller
// computes in floating point), 0 with *z set, < 0 on an error.
static int int_arith(struct jrender *r, int line, int op, int64_t x, int64_t y, int64_t *z)
{
    switch (op) {
    case '+':
        return __builtin_add_overflow(x, y, z) ? 1 : 0;
    case '-':
        return __builtin_sub_overflow(x, y, z) ? 1 : 0;
    case '*':
        return __builtin_mul_overflow(x, y, z) ? 1 : 0;
    case 'f':
    case '%':
        if (y == 0)
            return jr_fail(r, line, "%s", "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1)
            return 1;
        *z = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0)))
            (*z)--;
        if (op == '%')
            *z = x - *z * y;
        return 0;
    case 'p':
        return y < 0 || !int_pow(x, y, z) ? 1 : 0;
    default:
        *z = 0;
        return 0;
    }
}

// Python's float arithmetic, with its division-by-zero errors.
static int float_arith(struct jrender *r, int line, int op, double x, double y, double *z)
{
    switch (op) {
    case '+':
        *z = x + y;
        return 0;
    case '-':
        *z = x - y;
        return 0;
    case '*':
        *z = x * y;
        return 0;
    case '/':
        if (y == 0)
            return jr_fail(r, line, "%s", "division by zero");
        *z = x / y;
        return 0;
    case 'f':
        if (y == 0)
            return jr_fail(r, line, "%s", "float floor division by zero");
        *z = __builtin_floor(x / y);
        return 0;
    case '%':
        if (y == 0)
            return jr_fail(r, line, "%s", "float modulo");
        *z = __builtin_fmod(x, y);
        if (*z != 0 && ((*z < 0) != (y < 0)))
            *z += y;
        return 0;
    case 'p':
        *z = __builtin_pow(x, y);
        return 0;
    default:
        *z = 0;
        return 0;
    }
}

// Numbers only: ints stay ints (except true division and overflow).
static int arith(struct jrender *r, int line, int op, struct jv a, struct jv b, struct jv *out)
{
    bool num_a = is_int(a) || a.t == JV_FLOAT, num_b = is_int(b) || b.t == JV_FLOAT;
    if (!num_a || !num_b) {
        static const char *names[] = {['+'] = "+",  ['-'] = "-", ['*'] = "*", ['/'] = "/",
                                      ['f'] = "//", ['%'] = "%", ['p'] = "**"};
        return jr_fail(r, line, "unsupported operand type(s) for %s: '%s' and '%s'", names[op],
                       jv_type_name(a), jv_type_name(b));
    }
    if (is_int(a) && is_int(b) && op != '/') {
        int64_t z = 0;
        int rc = int_arith(r, line, op, ival(a), ival(b), &z);
        if (rc <= 0) {
            if (rc == 0)
                *out = jv_int(z);
            return rc;
        }
    }
    double z = 0;
    int rc = float_arith(r, line, op, fval(a), fval(b), &z);
    if (rc == 0)
        *out = jv_float(z);
    return rc;
}

static int eval_binary(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv a, b;
    int rc = jr_eval(r, n->a, f, &a);
    if (!rc)
        rc = jr_eval(r, n->b, f, &b);
    if (rc)
        return rc;
    int op = n->op;
    // llama.cpp: none next to a string concatenates as "" (Jinja2 writes "None").
    if (op == '~' && r->lim.llama_cpp && a.t == JV_NONE && b.t == JV_STR)
        a = jv_undef(NULL);
    if (op == '~' && r->lim.llama_cpp && b.t == JV_NONE && a.t == JV_STR)
        b = jv_undef(NULL);
    if (op == '~')
        return concat_values(r, a, b, out);
    // llama.cpp: an undefined or none operand of "+" with a string is "".
    bool a_null = a.t == JV_UNDEF || a.t == JV_NONE, b_null = b.t == JV_UNDEF || b.t == JV_NONE;
    if (op == '+' && r->lim.llama_cpp && ((a_null && b.t == JV_STR) || (b_null && a.t == JV_STR))) {
        *out = a_null ? b : a;
        return 0;
    }
    if (a.t == JV_UNDEF)
        return undefined_error(r, n->line, a);
    if (b.t == JV_UNDEF)
        return undefined_error(r, n->line, b);
    if (op == '+' && a.t == b.t && (a.t == JV_STR || a.t == JV_LIST))
        return add_sequences(r, a, b, out);
    if (op == '*' && (a.t == JV_STR || a.t == JV_LIST) && is_int(b))
        return repeat(r, n->line, a, ival(b), out);
    if (op == '*' && (b.t == JV_STR || b.t == JV_LIST) && is_int(a))
        return repeat(r, n->line, b, ival(a), out);
    if (op == '%' && a.t == JV_STR)
        return jr_str_format(r, n->line, a, b, out);
    return arith(r, n->line, op, a, b, out);
}

static int contains(struct jrender *r, int line, struct jv item, struct jv seq, bool *out)
{
    switch (seq.t) {
    case JV_UNDEF:
        *out = false;
        return 0;
    case JV_STR:
        if (item.t != JV_STR)
            return jr_fail(r, line, "'in <string>' requires string as left operand, not %s",
                           jv_type_name(item));
        *out = item.u.s.n == 0 ||
               (item.u.s.n <= seq.u.s.n && memmem(seq.u.s.p, seq.u.s.n, item.u.s.p, item.u.s.n));
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jv_equal(item, seq.u.l->items[i])) {
                *out = true;
                return 0;
            }
        *out = false;
        return 0;
    case JV_DICT:
        *out = jv_dict_get(seq.u.d, item) != NULL;
        return 0;
    default:
        return jr_fail(r, line, "argument of type '%s' is not iterable", jv_type_name(seq));
    }
}

// llama.cpp's engine refuses `undefined in x` and `x in none` where Jinja2 answers
// false or raises on none alike (Command R7B's `message.tool_call_id not in seen` on a
// tool result without an id); `x in undefined` is false in both.
static int llama_cpp_in(struct jrender *r, int line, int op, struct jv a, struct jv b)
{
    if (b.t == JV_UNDEF)
        return 0;
    if (a.t == JV_UNDEF)
        return jr_fail(r, line, "Cannot perform operation %s on undefined values",
                       op == JC_IN ? "in" : "not in");
    if (b.t == JV_NONE)
        return jr_fail(r, line, "%s", "Cannot perform operation on null values");
    return 0;
}

static int eval_compare(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv a, b;
    int rc = jr_eval(r, n->list.v[0], f, &a);
    if (rc)
        return rc;
    for (size_t i = 1; i < n->list.n; i++) {
        if ((rc = jr_eval(r, n->list.v[i], f, &b)))
            return rc;
        bool ok = false;
        int op = n->cmp_ops[i - 1];
        switch (op) {
        case JC_EQ:
            ok = jv_equal(a, b);
            break;
        case JC_NE:
            ok = !jv_equal(a, b);
            break;
        case JC_IN:
        case JC_NOTIN:
            if (r->lim.llama_cpp && (rc = llama_cpp_in(r, n->line, op, a, b)))
                return rc;
            if ((rc = contains(r, n->line, a, b, &ok)))
                return rc;
            if (op == JC_NOTIN)
                ok = !ok;
            break;
        default: {
            if (a.t == JV_UNDEF)
                return undefined_error(r, n->line, a);
            if (b.t == JV_UNDEF)
                return undefined_error(r, n->line, b);
            r->line = n->line;
            int c = jv_compare(r, a, b);
            if (c == -2)
                return ERR_FORMAT;
            ok = op == JC_LT ? c < 0 : op == JC_LE ? c <= 0 : op == JC_GT ? c > 0 : c >= 0;
        }
        }
        if (!ok) {
            *out = jv_bool(false);
            return 0;
        }
        a = b;
    }
    *out = jv_bool(true);
    return 0;
}

static int eval_name(struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv *v = frame_get(f, n->name);
    if (v)
        *out = *v;
    else if (!jr_global(n->name, out))
        *out = jv_undef(n->name);
    return 0;
}

// [a, b] and (a, b).
static int eval_sequence(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv_list *l = jv_list_new(r, n->list.n);
    if (!l)
        return jr_oom(r);
    l->tuple = n->type == JN_TUPLE;
    int rc = 0;
    for (size_t i = 0; !rc && i < n->list.n; i++)
        if (!(rc = jr_eval(r, n->list.v[i], f, &l->items[i])))
            l->n++;
    *out = (struct jv){.t = JV_LIST, .u.l = l};
    return rc;
}

// {k: v, ...}: the node's list holds keys and values in turn.
static int eval_dict(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv_dict *d = jv_dict_new(r, n->list.n / 2);
    if (!d)
        return jr_oom(r);
    int rc = 0;
    for (size_t i = 0; !rc && i + 1 < n->list.n; i += 2) {
        struct jv k, v;
        if (!(rc = jr_eval(r, n->list.v[i], f, &k)) && !(rc = jr_eval(r, n->list.v[i + 1], f, &v)))
            rc = jv_dict_set(r, d, k, v);
    }
    *out = (struct jv){.t = JV_DICT, .u.d = d};
    return rc;
}

// obj.name and obj[key].
static int eval_lookup(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv obj, key;
    int rc = jr_eval(r, n->a, f, &obj);
    if (rc)
        return rc;
    if (n->type == JN_GETATTR)
        return getattr_value(r, n->line, obj, n->name, strlen(n->name), out);
    if ((rc = jr_eval(r, n->b, f, &key)))
        return rc;
    return getitem_value(r, n->line, obj, key, out);
}

// f(args), x | filter(args) and x is test(args): the subject, then the arguments.
static int eval_applied(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv subject;
    struct jcall c;
    int rc = jr_eval(r, n->a, f, &subject);
    if (rc || (rc = eval_args(r, &n->args, f, &c)))
        return rc;
    if (n->type == JN_CALL)
        return jr_call(r, n->line, subject, c.pos, c.n_pos, c.kw_names, c.kw, c.n_kw, out);
    if (n->type == JN_FILTER)
        return jr_filter(r, n->line, n->name, subject, &c, out);
    bool ok = false;
    if ((rc = jr_test(r, n->line, n->name, subject, &c, &ok)))
        return rc;
    *out = jv_bool(ok != n->negate);
    return 0;
}

// not x, -x, +x.
static int eval_unary(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv v;
    int rc = jr_eval(r, n->a, f, &v);
    if (rc)
        return rc;
    if (n->op == 'n') {
        *out = jv_bool(!jv_truthy(v));
    } else if (v.t == JV_INT || v.t == JV_BOOL) {
        int64_t i = ival(v);
        *out = n->op == '-' ? (i == INT64_MIN ? jv_float(-(double)i) : jv_int(-i)) : jv_int(i);
    } else if (v.t == JV_FLOAT) {
        *out = jv_float(n->op == '-' ? -v.u.f : v.u.f);
    } else if (v.t == JV_UNDEF) {
        return undefined_error(r, n->line, v);
    } else {
        return jr_fail(r, n->line, "bad operand type for unary %c: '%s'", n->op, jv_type_name(v));
    }
    return 0;
}

// a and b / a or b: Python's short circuit, returning the deciding operand.
static int eval_logic(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv a;
    int rc = jr_eval(r, n->a, f, &a);
    if (rc)
        return rc;
    if (jv_truthy(a) == (n->type == JN_OR)) {
        *out = a;
        return 0;
    }
    return jr_eval(r, n->b, f, out);
}

// a if cond [else c]; without else, an undefined value.
static int eval_cond(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    struct jv c;
    int rc = jr_eval(r, n->b, f, &c);
    if (rc)
        return rc;
    if (jv_truthy(c))
        return jr_eval(r, n->a, f, out);
    if (n->c)
        return jr_eval(r, n->c, f, out);
    *out = jv_undef("else branch");
    return 0;
}

static int eval_node(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    switch (n->type) {
    case JN_LITERAL:
        *out = n->lit;
        return 0;
    case JN_NAME:
        return eval_name(n, f, out);
    case JN_LIST:
    case JN_TUPLE:
        return eval_sequence(r, n, f, out);
    case JN_DICT:
        return eval_dict(r, n, f, out);
    case JN_GETATTR:
    case JN_GETITEM:
        return eval_lookup(r, n, f, out);
    case JN_SLICE:
        return eval_slice(r, n, f, out);
    case JN_CALL:
    case JN_FILTER:
    case JN_TEST:
        return eval_applied(r, n, f, out);
    case JN_UNARY:
        return eval_unary(r, n, f, out);
    case JN_BINARY:
        return eval_binary(r, n, f, out);
    case JN_AND:
    case JN_OR:
        return eval_logic(r, n, f, out);
    case JN_COMPARE:
        return eval_compare(r, n, f, out);
    case JN_COND:
        return eval_cond(r, n, f, out);
    default:
        return jr_fail(r, n->line, "%s", "statement used as an expression");
    }
}

int jr_eval(struct jrender *r, struct jnode *n, struct jframe *f, struct jv *out)
{
    int rc = jr_step(r);
    if (rc)
        return rc;
    if (++r->depth > r->lim.max_depth * 4) {
        r->depth--;
        return err_set(r->e, ERR_TOO_LARGE, "jinja: line %d: expression nested too deeply",
                       n->line);
    }
    rc = eval_node(r, n, f, out);
    r->depth--;
    return rc;
}

// ---------------------------------------------------------------------------
// Calls

static int call_macro(struct jrender *r, int line, struct jv_func *fn, const struct jcall *c,
                      struct jv *out)
{
    struct jnode *m = fn->macro;
    if (++r->depth > r->lim.max_depth) {
        r->depth--;
        return err_set(r->e, ERR_TOO_LARGE, "jinja: line %d: macro calls nested deeper than %d",
                       line, r->lim.max_depth);
    }
    int rc = 0;
    struct jframe *mf = frame_new(r, fn->closure);
    if (!mf) {
        rc = jr_oom(r);
        goto out;
    }
    if (c->n_pos > m->n_params) {
        rc = jr_fail(r, line, "macro '%s' takes not more than %zu argument(s)",
                     m->name ? m->name : "caller", m->n_params);
        goto out;
    }
    for (size_t i = 0; i < m->n_params && !rc; i++) {
        struct jv v = jv_undef(m->params[i]);
        bool have = false;
        if (i < c->n_pos) {
            v = c->pos[i];
            have = true;
        }
        for (size_t k = 0; k < c->n_kw; k++)
            if (!strcmp(c->kw_names[k], m->params[i])) {
                v = c->kw[k];
                have = true;
            }
        if (!have && m->defaults[i])
            rc = jr_eval(r, m->defaults[i], mf, &v);
        if (!rc)
            rc = frame_set(r, mf, m->params[i], v);
    }
    for (size_t k = 0; k < c->n_kw && !rc; k++) {
        bool known = false;
        for (size_t i = 0; i < m->n_params; i++)
            known |= !strcmp(c->kw_names[k], m->params[i]);
        if (!known)
            rc = jr_fail(r, line, "macro '%s' takes no keyword argument '%s'",
                         m->name ? m->name : "caller", c->kw_names[k]);
    }
    if (!rc && fn->caller.t == JV_FUNC)
        rc = frame_set(r, mf, "caller", fn->caller);
    if (!rc)
        rc = capture(r, m->body, mf, out);
out:
    r->depth--;
    return rc;
}

int jr_call(struct jrender *r, int line, struct jv fn, struct jv *pos, size_t n_pos,
            const char **kw_names, struct jv *kw, size_t n_kw, struct jv *out)
{
    struct jcall c = {pos, n_pos, kw_names, kw, n_kw};
    if (fn.t == JV_UNDEF)
        return undefined_error(r, line, fn);
    if (fn.t != JV_FUNC)
        return jr_fail(r, line, "'%s' object is not callable", jv_type_name(fn));
    if (fn.u.fn->kind == JF_MACRO)
        return call_macro(r, line, fn.u.fn, &c, out);
    return jr_call_builtin(r, line, fn.u.fn, &c, out);
}

// ---------------------------------------------------------------------------
// Statements

static int assign(struct jrender *r, struct jnode *n, struct jframe *f, struct jv v)
{
    if (n->name) {  // ns.attr = v
        struct jv *ns = frame_get(f, n->targets[0]);
        if (!ns || ns->t != JV_DICT || !ns->u.d->ns)
            return jr_fail(r, n->line, "%s", "cannot assign attribute on non-namespace object");
        return jv_dict_set(r, ns->u.d, jv_cstr(r, n->name), v);
    }
    if (n->n_targets == 1)
        return frame_set(r, f, n->targets[0], v);
    struct jv_list *items = NULL;
    int rc = jv_iterate(r, v, &items);
    if (rc)
        return rc;
    if (items->n != n->n_targets)
        return jr_fail(r, n->line, "%s unpack (expected %zu, got %zu)",
                       items->n > n->n_targets ? "too many values to" : "not enough values to",
                       n->n_targets, items->n);
    for (size_t i = 0; i < n->n_targets && !rc; i++)
        rc = frame_set(r, f, n->targets[i], items->items[i]);
    return rc;
}

// The loop variable: one dict per for-loop, its values updated in place each iteration.
static const char *const loop_keys[] = {"index",  "index0",   "revindex", "revindex0",
                                        "first",  "last",     "length",   "depth",
                                        "depth0", "previtem", "nextitem", "cycle"};
enum { LOOP_KEYS = sizeof loop_keys / sizeof loop_keys[0] };

static int loop_dict_new(struct jrender *r, struct jv *out)
{
    struct jv_dict *d = jv_dict_new(r, LOOP_KEYS);
    struct jv_func *cyc = arena_alloc(r->a, sizeof *cyc);
    if (!d || !cyc)
        return jr_oom(r);
    *cyc = (struct jv_func){.kind = JF_CYCLE, .name = "cycle", .self = jv_int(0)};
    for (int j = 0; j < LOOP_KEYS; j++) {
        d->keys[j] = jv_str(loop_keys[j], strlen(loop_keys[j]));
        d->vals[j] = jv_none();
    }
    d->vals[LOOP_KEYS - 1] = (struct jv){.t = JV_FUNC, .u.fn = cyc};
    d->n = LOOP_KEYS;
    *out = (struct jv){.t = JV_DICT, .u.d = d};
    return 0;
}

static void loop_dict_update(struct jv loop, struct jv_list *items, size_t i)
{
    int64_t n = (int64_t)items->n, k = (int64_t)i;
    struct jv *v = loop.u.d->vals;
    v[0] = jv_int(k + 1);
    v[1] = jv_int(k);
    v[2] = jv_int(n - k);
    v[3] = jv_int(n - k - 1);
    v[4] = jv_bool(k == 0);
    v[5] = jv_bool(k == n - 1);
    v[6] = jv_int(n);
    v[7] = jv_int(1);
    v[8] = jv_int(0);
    v[9] = k > 0 ? items->items[k - 1] : jv_undef("previtem");
    v[10] = k + 1 < n ? items->items[k + 1] : jv_undef("nextitem");
    v[11].u.fn->self = jv_int(k);
}

static int render_for(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jv seq;
    struct jv_list *items = NULL;
    int rc = jr_eval(r, n->a, f, &seq);
    if (rc)
        return rc;
    if (seq.t == JV_DICT && seq.u.d->ns)
        return jr_fail(r, n->line, "%s", "'Namespace' object is not iterable");
    if ((rc = jv_iterate(r, seq, &items)))
        return rc;
    if (n->b) {  // the loop filter: `for x in xs if cond`
        struct jv_list *kept = jv_list_new(r, items->n);
        if (!kept)
            return jr_oom(r);
        struct jframe *lf = frame_new(r, f);
        if (!lf)
            return jr_oom(r);
        for (size_t i = 0; i < items->n; i++) {
            struct jv c;
            lf->n = 0;
            if ((rc = jr_step(r)) || (rc = assign(r, n, lf, items->items[i])) ||
                (rc = jr_eval(r, n->b, lf, &c)))
                return rc;
            if (jv_truthy(c))
                kept->items[kept->n++] = items->items[i];
        }
        items = kept;
    }
    // One frame per loop, emptied each iteration: what the body sets does not outlive it.
    struct jframe *lf = frame_new(r, f);
    struct jv loop;
    if (!lf)
        return jr_oom(r);
    if (items->n && (rc = loop_dict_new(r, &loop)))
        return rc;
    for (size_t i = 0; i < items->n; i++) {
        lf->n = 0;
        loop_dict_update(loop, items, i);
        if ((rc = jr_step(r)) || (rc = frame_set(r, lf, "loop", loop)) ||
            (rc = assign(r, n, lf, items->items[i])) || (rc = render_nodes(r, n->body, lf)))
            return rc;
        if (r->flow == FLOW_BREAK) {
            r->flow = FLOW_NONE;
            break;
        }
        r->flow = FLOW_NONE;
    }
    if (items->n == 0)
        return render_nodes(r, n->else_body, f);
    return 0;
}

// {{ expr }}
// What llama.cpp's engine prints for {{ v }}: strings, numbers and booleans, a list as
// its items one after another, and nothing for none, undefined, a dict or a function
// (MiniCPM5 shows a nested argument object as an empty value, Gemma 4 a null as nothing).
// A float as C's "%f" less its trailing zeros (one kept after the point).
static int emit_llama_cpp(struct jrender *r, struct jv v, int depth)
{
    char num[512];
    switch (v.t) {
    case JV_STR:
        return emit(r, v.u.s.p, v.u.s.n);
    case JV_BOOL:
        return emit(r, v.u.b ? "True" : "False", v.u.b ? 4 : 5);
    case JV_INT:
        return emit(r, num, (size_t)snprintf(num, sizeof num, "%" PRId64, v.u.i));
    case JV_FLOAT: {
        size_t len = (size_t)snprintf(num, sizeof num, "%f", v.u.f);
        if (len >= sizeof num)
            len = sizeof num - 1;
        while (len > 0 && num[len - 1] == '0')
            len--;
        if (len > 0 && num[len - 1] == '.')
            num[len++] = '0';
        return emit(r, num, len);
    }
    case JV_LIST:
        if (depth > r->lim.max_depth)
            return jr_fail(r, r->line, "%s", "list nested too deeply to print");
        for (size_t i = 0; i < v.u.l->n; i++) {
            int rc = emit_llama_cpp(r, v.u.l->items[i], depth + 1);
            if (rc)
                return rc;
        }
        return 0;
    default:
        return 0;
    }
}

static int render_output(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jv v;
    int rc = jr_eval(r, n->a, f, &v);
    if (rc)
        return rc;
    if (v.t == JV_STR)
        return emit(r, v.u.s.p, v.u.s.n);
    if (r->lim.llama_cpp)
        return emit_llama_cpp(r, v, 0);
    struct jv s;
    if ((rc = jv_stringify(r, v, &s)))
        return rc;
    return emit(r, s.u.s.p, s.u.s.n);
}

static int render_if(struct jrender *r, struct jnode *n, struct jframe *f)
{
    for (size_t i = 0; i < n->list.n; i++) {
        struct jv c;
        int rc = jr_eval(r, n->list.v[i], f, &c);
        if (rc)
            return rc;
        if (jv_truthy(c))
            return render_nodes(r, n->if_bodies[i], f);
    }
    return render_nodes(r, n->else_body, f);
}

static int render_set(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jv v;
    int rc = jr_eval(r, n->a, f, &v);
    return rc ? rc : assign(r, n, f, v);
}

// {% set x | filters %} … {% endset %} and {% filter … %} … {% endfilter %}:
// the body rendered to a string, then the filters applied first to last.
static int render_filtered_block(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jv v;
    int rc = capture(r, n->body, f, &v);
    if (rc)
        return rc;
    // the chain links from the last filter back to the first through ->a
    struct jnode *chain[32];
    size_t k = 0;
    for (struct jnode *x = n->filter; x; x = x->a) {
        if (k == 32)
            return jr_fail(r, n->line, "%s", "too many filters on a block");
        chain[k++] = x;
    }
    for (size_t i = k; i-- > 0 && !rc;) {
        struct jcall c;
        if (!(rc = eval_args(r, &chain[i]->args, f, &c)))
            rc = jr_filter(r, chain[i]->line, chain[i]->name, v, &c, &v);
    }
    if (rc)
        return rc;
    if (n->type == JN_SET_BLOCK)
        return assign(r, n, f, v);
    if ((rc = jv_stringify(r, v, &v)))
        return rc;
    return emit(r, v.u.s.p, v.u.s.n);
}

// A macro object for body (a macro, or a call block's body as `caller`) closed over f.
static struct jv_func *macro_new(struct jrender *r, const char *name, struct jnode *body,
                                 struct jframe *f)
{
    struct jv_func *fn = arena_alloc(r->a, sizeof *fn);
    if (fn)
        *fn = (struct jv_func){.kind = JF_MACRO,
                               .name = name,
                               .macro = body,
                               .closure = f,
                               .caller = jv_undef("caller")};
    return fn;
}

static int render_macro(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jv_func *fn = macro_new(r, n->name, n, f);
    if (!fn)
        return jr_oom(r);
    return frame_set(r, f, n->name, (struct jv){.t = JV_FUNC, .u.fn = fn});
}

// {% call m(args) %} body {% endcall %}: m runs with caller() rendering body.
static int render_call_block(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jnode *call = n->a;
    struct jv callee;
    struct jcall c;
    int rc;
    if ((rc = jr_eval(r, call->a, f, &callee)) || (rc = eval_args(r, &call->args, f, &c)))
        return rc;
    if (callee.t != JV_FUNC || callee.u.fn->kind != JF_MACRO)
        return jr_fail(r, n->line, "%s", "{% call %} needs a macro");
    struct jv_func *caller = macro_new(r, "caller", n, f);
    struct jv_func *bound = arena_alloc(r->a, sizeof *bound);
    if (!caller || !bound)
        return jr_oom(r);
    *bound = *callee.u.fn;
    bound->caller = (struct jv){.t = JV_FUNC, .u.fn = caller};
    struct jv v;
    if ((rc = call_macro(r, n->line, bound, &c, &v)))
        return rc;
    return emit(r, v.u.s.p, v.u.s.n);
}

static int render_with(struct jrender *r, struct jnode *n, struct jframe *f)
{
    struct jframe *wf = frame_new(r, f);
    if (!wf)
        return jr_oom(r);
    for (size_t i = 0; i < n->list.n; i++) {
        struct jv v;
        int rc = jr_eval(r, n->list.v[i]->a, f, &v);
        if (rc || (rc = assign(r, n->list.v[i], wf, v)))
            return rc;
    }
    return render_nodes(r, n->body, wf);
}

static int render_node(struct jrender *r, struct jnode *n, struct jframe *f)
{
    int rc = jr_step(r);
    if (rc)
        return rc;
    r->line = n->line;
    switch (n->type) {
    case JN_TEXT:
        return emit(r, n->lit.u.s.p, n->lit.u.s.n);
    case JN_OUTPUT:
        return render_output(r, n, f);
    case JN_IF:
        return render_if(r, n, f);
    case JN_FOR:
        return render_for(r, n, f);
    case JN_SET:
        return render_set(r, n, f);
    case JN_SET_BLOCK:
    case JN_FILTER_BLOCK:
        return render_filtered_block(r, n, f);
    case JN_MACRO:
        return render_macro(r, n, f);
    case JN_CALL_BLOCK:
        return render_call_block(r, n, f);
    case JN_WITH:
        return render_with(r, n, f);
    case JN_BREAK:
        r->flow = FLOW_BREAK;
        return 0;
    case JN_CONTINUE:
        r->flow = FLOW_CONTINUE;
        return 0;
    case JN_SCOPE:
        return render_nodes(r, n->body, f);
    default:
        return jr_fail(r, n->line, "%s", "expression used as a statement");
    }
}

static int render_nodes(struct jrender *r, struct jnodes body, struct jframe *f)
{
    for (size_t i = 0; i < body.n; i++) {
        int rc = render_node(r, body.v[i], f);
        if (rc)
            return rc;
        if (r->flow != FLOW_NONE)
            return 0;
    }
    return 0;
}

int jinja_render(const struct jinja_template *t, json_t *ctx, const struct jinja_limits *lim,
                 struct buf *out, struct err *e)
{
    struct jinja_limits l = lim ? *lim : (struct jinja_limits){0};
    if (!l.max_output_bytes)
        l.max_output_bytes = JINJA_DEFAULT_MAX_OUTPUT;
    if (!l.max_memory_bytes)
        l.max_memory_bytes = JINJA_DEFAULT_MAX_MEMORY;
    if (!l.max_steps)
        l.max_steps = JINJA_DEFAULT_MAX_STEPS;
    if (!l.max_depth)
        l.max_depth = JINJA_DEFAULT_MAX_DEPTH;
    struct arena a;
    arena_init(&a, l.max_memory_bytes);
    struct err local = {0};
    if (!e)
        e = &local;
    if (t->unknown_name && !l.llama_cpp) {
        arena_deinit(&a);
        return err_set(e, ERR_FORMAT, "%s", t->unknown_name);
    }
    struct jrender r = {.a = &a, .out = out, .e = e, .lim = l, .line = 1};
    int rc = 0;
    struct jframe *g = frame_new(&r, NULL);
    if (!g) {
        rc = jr_oom(&r);
        goto done;
    }
    if (ctx && json_is_object(ctx)) {
        const char *k;
        json_t *v;
        json_object_foreach(ctx, k, v)
        {
            struct jv jvv;
            if ((rc = jv_from_json(&r, v, &jvv)) || (rc = frame_set(&r, g, k, jvv)))
                goto done;
        }
    }
    r.globals = g;
    // the template's top level gets its own frame so {% set %} never shadows the context in place
    struct jframe *top = frame_new(&r, g);
    if (!top) {
        rc = jr_oom(&r);
        goto done;
    }
    rc = render_nodes(&r, t->root, top);
done:
    arena_deinit(&a);
    return rc;
}

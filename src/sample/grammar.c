// Byte-level grammars: a builder for rules (alternatives of sequences of byte sets and
// rule references), their flattened compiled form, and the pushdown matcher of
// docs/spec/sampling.md §6.2 working on bytes instead of code points (multi-byte UTF-8 is
// spelled out as byte sequences by schema.c, so a token ending inside a character simply
// leaves the matcher mid-sequence).
//
// A matcher state is a set of stacks of positions; accepting a byte pops every stack whose
// top byte set contains it, pushes the following element and expands rule references
// until each top is a byte set again (or the stack is empty: the text is complete).
#include "sample/internal.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Sequences and builder.

void gseq_reset(struct gseq *s)
{
    s->n = 0;
}

void gseq_free(struct gseq *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void gseq_push(struct gseq *s, int32_t el)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, (size_t)s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = el;
}

void gseq_ref(struct gseq *s, int32_t rule)
{
    gseq_push(s, GEL(GEL_REF, rule));
}

void gseq_set(struct gbuilder *b, struct gseq *s, const uint64_t set[4])
{
    gseq_push(s, GEL(GEL_CHAR, gb_set(b, set)));
}

void gseq_range(struct gbuilder *b, struct gseq *s, int lo, int hi)
{
    uint64_t set[4] = {0};
    set_add_range(set, lo, hi);
    gseq_set(b, s, set);
}

void gseq_lit(struct gbuilder *b, struct gseq *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gseq_range(b, s, (uint8_t)p[i], (uint8_t)p[i]);
}

void gseq_cat(struct gseq *s, const struct gseq *t)
{
    for (int32_t i = 0; i < t->n; i++)
        gseq_push(s, t->v[i]);
}

void gb_init(struct gbuilder *b)
{
    memset(b, 0, sizeof(*b));
}

void gb_deinit(struct gbuilder *b)
{
    for (int32_t i = 0; i < b->n_rules; i++)
        free(b->rules[i].alts);
    free(b->rules);
    free(b->sets);
    memset(b, 0, sizeof(*b));
}

int32_t gb_rule(struct gbuilder *b)
{
    if (b->n_rules >= GRAMMAR_MAX_RULES) {
        b->err = ERR_TOO_LARGE;
        return 0;  // a valid id; gb_finish reports the error
    }
    if (b->n_rules == b->cap_rules) {
        b->cap_rules = b->cap_rules ? b->cap_rules * 2 : 64;
        b->rules = xrealloc(b->rules, (size_t)b->cap_rules * sizeof(*b->rules));
    }
    memset(&b->rules[b->n_rules], 0, sizeof(b->rules[0]));
    return b->n_rules++;
}

void gb_alt(struct gbuilder *b, int32_t rule, const struct gseq *s)
{
    if (rule < 0 || rule >= b->n_rules)
        return;
    struct grule *r = &b->rules[rule];
    int32_t need = r->n + s->n + 1;
    if (need > r->cap) {
        while (r->cap < need)
            r->cap = r->cap ? r->cap * 2 : 16;
        r->alts = xrealloc(r->alts, (size_t)r->cap * sizeof(*r->alts));
    }
    if (s->n)
        memcpy(r->alts + r->n, s->v, (size_t)s->n * sizeof(*s->v));
    r->n += s->n;
    r->alts[r->n++] = GEL(GEL_ALT, 0);
    r->n_alts++;
}

int32_t gb_set(struct gbuilder *b, const uint64_t set[4])
{
    // Few distinct sets exist in practice: a linear search from the end is fine.
    for (int32_t i = b->n_sets - 1; i >= 0 && i >= b->n_sets - 64; i--)
        if (memcmp(b->sets[i], set, sizeof(b->sets[i])) == 0)
            return i;
    if (b->n_sets == b->cap_sets) {
        b->cap_sets = b->cap_sets ? b->cap_sets * 2 : 64;
        b->sets = xrealloc(b->sets, (size_t)b->cap_sets * sizeof(*b->sets));
    }
    memcpy(b->sets[b->n_sets], set, sizeof(b->sets[0]));
    return b->n_sets++;
}

// Which rules can match the empty string (1 = nullable), found by iterating
// to a fixed point. Owned by the caller.
static uint8_t *nullable_rules(const struct gbuilder *b)
{
    int32_t n = b->n_rules;
    uint8_t *nullable = xcalloc((size_t)n, 1);
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < n; r++) {
            if (nullable[r])
                continue;
            const struct grule *ru = &b->rules[r];
            bool ok = true;  // current alternative nullable so far
            for (int32_t i = 0; i < ru->n; i++) {
                int32_t el = ru->alts[i];
                if (GEL_KIND(el) == GEL_ALT) {
                    if (ok) {
                        nullable[r] = 1;
                        changed = true;
                        break;
                    }
                    ok = true;
                } else if (GEL_KIND(el) == GEL_CHAR || !nullable[GEL_ARG(el)]) {
                    ok = false;
                }
            }
        }
    }
    return nullable;
}

// The search state: a stack of rules being walked, each with the index of
// its next element and whether a consuming element already came before it
// in the current alternative; colours are 0 new, 1 on path, 2 done.
struct lr_search {
    const struct gbuilder *b;
    const uint8_t *nullable;
    uint8_t *colour;
    int32_t *stack_rule, *stack_i;
    uint8_t *stack_blocked;
};

// Iterative DFS from rule s over left-edge references: reaching a rule that
// is on the path is left recursion.
static int lr_search_from(struct lr_search *ls, int32_t s, struct err *e)
{
    int32_t sp = 0;
    ls->stack_rule[0] = s;
    ls->stack_i[0] = 0;
    ls->stack_blocked[0] = 0;
    ls->colour[s] = 1;
    while (sp >= 0) {
        const struct grule *ru = &ls->b->rules[ls->stack_rule[sp]];
        int32_t i = ls->stack_i[sp];
        if (i >= ru->n) {
            ls->colour[ls->stack_rule[sp]] = 2;
            sp--;
            continue;
        }
        ls->stack_i[sp]++;
        int32_t el = ru->alts[i];
        if (GEL_KIND(el) == GEL_ALT) {
            ls->stack_blocked[sp] = 0;
            continue;
        }
        if (ls->stack_blocked[sp])
            continue;
        if (GEL_KIND(el) == GEL_CHAR) {
            ls->stack_blocked[sp] = 1;
            continue;
        }
        int32_t t = GEL_ARG(el);
        if (!ls->nullable[t])
            ls->stack_blocked[sp] = 1;
        if (ls->colour[t] == 1)
            return err_set(e, ERR_INVALID,
                           "grammar is left-recursive (a rule refers to itself without "
                           "consuming input)");
        if (ls->colour[t] == 0) {
            ls->colour[t] = 1;
            sp++;
            ls->stack_rule[sp] = t;
            ls->stack_i[sp] = 0;
            ls->stack_blocked[sp] = 0;
        }
    }
    return 0;
}

// Left recursion check: a rule that can reach itself at its left edge without consuming a
// byte would make expansion loop forever.
static int check_left_recursion(const struct gbuilder *b, struct err *e)
{
    int32_t n = b->n_rules;
    uint8_t *nullable = nullable_rules(b);
    struct lr_search ls = {
        .b = b,
        .nullable = nullable,
        .colour = xcalloc((size_t)n, 1),
        .stack_rule = xmalloc((size_t)n * sizeof(int32_t)),
        .stack_i = xmalloc((size_t)n * sizeof(int32_t)),
        .stack_blocked = xmalloc((size_t)n),
    };
    int rc = 0;
    for (int32_t s = 0; s < n && rc == 0; s++)
        if (!ls.colour[s])
            rc = lr_search_from(&ls, s, e);
    free(nullable);
    free(ls.colour);
    free(ls.stack_rule);
    free(ls.stack_i);
    free(ls.stack_blocked);
    return rc;
}

int gb_finish(struct gbuilder *b, int32_t root, struct sample_grammar **out, struct err *e)
{
    if (b->err)
        return err_set(e, b->err, "grammar too large");
    if (root < 0 || root >= b->n_rules)
        return err_set(e, ERR_INTERNAL, "grammar has no root rule");
    size_t total = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        if (b->rules[r].n_alts == 0)
            return err_set(e, ERR_INTERNAL, "grammar rule %d has no alternative", (int)r);
        total += (size_t)b->rules[r].n;
    }
    if (total > INT32_MAX / 8)
        return err_set(e, ERR_TOO_LARGE, "grammar too large");
    int rc = check_left_recursion(b, e);
    if (rc < 0)
        return rc;
    struct sample_grammar *g = xcalloc(1, sizeof(*g));
    g->elems = xmalloc((total + 1) * sizeof(int32_t));
    g->rule_start = xmalloc((size_t)b->n_rules * sizeof(int32_t));
    int32_t k = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        g->rule_start[r] = k;
        memcpy(g->elems + k, b->rules[r].alts, (size_t)b->rules[r].n * sizeof(int32_t));
        k += b->rules[r].n;
        g->elems[k - 1] = GEL(GEL_END, 0);  // the last ALT marker ends the rule
    }
    g->n_elems = k;
    g->n_rules = b->n_rules;
    g->sets = b->sets;
    g->n_sets = b->n_sets;
    g->root = root;
    b->sets = NULL;
    b->n_sets = b->cap_sets = 0;
    gb_deinit(b);
    *out = g;
    return 0;
}

void sample_grammar_free(struct sample_grammar *g)
{
    if (!g)
        return;
    free(g->elems);
    free(g->rule_start);
    free(g->sets);
    free(g);
}

// ---------------------------------------------------------------------------
// Matcher.

void gstate_free(struct gstate *st)
{
    free(st->d);
    memset(st, 0, sizeof(*st));
}

static void gstate_reset(struct gstate *st)
{
    st->n = 0;
    st->n_stacks = 0;
    st->complete = false;
}

void gstate_copy(struct gstate *dst, const struct gstate *src)
{
    if (dst->cap < src->n) {
        dst->cap = src->n;
        dst->d = xrealloc(dst->d, (size_t)dst->cap * sizeof(int32_t));
    }
    if (src->n)
        memcpy(dst->d, src->d, (size_t)src->n * sizeof(int32_t));
    dst->n = src->n;
    dst->n_stacks = src->n_stacks;
    dst->complete = src->complete;
}

static uint32_t stack_hash(const int32_t *stk, int32_t len)
{
    uint32_t h = 2166136261u ^ (uint32_t)len;
    for (int32_t i = 0; i < len; i++)
        h = (h ^ (uint32_t)stk[i]) * 16777619u;
    return h;
}

static int add_stack(struct gstate *st, const int32_t *stk, int32_t len)
{
    uint32_t h = stack_hash(stk, len);
    for (int32_t off = 0; off < st->n; off += 2 + st->d[off + 1]) {
        if ((uint32_t)st->d[off] == h && st->d[off + 1] == len &&
            memcmp(st->d + off + 2, stk, (size_t)len * sizeof(int32_t)) == 0)
            return 0;
    }
    if (st->n_stacks >= GRAMMAR_MAX_STACKS)
        return ERR_TOO_LARGE;
    int32_t need = st->n + 2 + len;
    if (need > st->cap) {
        st->cap = need * 2 > 64 ? need * 2 : 64;
        st->d = xrealloc(st->d, (size_t)st->cap * sizeof(int32_t));
    }
    st->d[st->n] = (int32_t)h;
    st->d[st->n + 1] = len;
    memcpy(st->d + st->n + 2, stk, (size_t)len * sizeof(int32_t));
    st->n = need;
    st->n_stacks++;
    if (len == 0)
        st->complete = true;
    return 0;
}

static inline bool is_seq_end(int32_t el)
{
    return GEL_KIND(el) == GEL_END || GEL_KIND(el) == GEL_ALT;
}

// Adds stk (len entries; the top may be a rule reference) to st after expanding references.
static int push_expanded(const struct sample_grammar *g, struct gstate *st, const int32_t *stk,
                         int32_t len, int depth)
{
    if (len == 0 || GEL_KIND(g->elems[stk[len - 1]]) == GEL_CHAR)
        return add_stack(st, stk, len);
    if (depth >= GRAMMAR_MAX_EXPAND)
        return ERR_TOO_LARGE;
    int32_t work[GRAMMAR_MAX_STACK];
    int32_t pos = stk[len - 1];
    int32_t rule = GEL_ARG(g->elems[pos]);
    int32_t base = len - 1;
    memcpy(work, stk, (size_t)base * sizeof(int32_t));
    if (!is_seq_end(g->elems[pos + 1]))
        work[base++] = pos + 1;
    int32_t a = g->rule_start[rule];
    for (;;) {
        int32_t l = base;
        if (!is_seq_end(g->elems[a])) {
            if (l >= GRAMMAR_MAX_STACK)
                return ERR_TOO_LARGE;
            work[l++] = a;
        }
        int rc = push_expanded(g, st, work, l, depth + 1);
        if (rc < 0)
            return rc;
        while (!is_seq_end(g->elems[a]))
            a++;
        if (GEL_KIND(g->elems[a]) == GEL_END)
            break;
        a++;  // past ALT
    }
    return 0;
}

int gstate_start(const struct sample_grammar *g, struct gstate *st)
{
    gstate_reset(st);
    // A virtual stack holding only a reference to the root: expand it.
    int32_t a = g->rule_start[g->root];
    for (;;) {
        int32_t stk[1];
        int32_t l = 0;
        if (!is_seq_end(g->elems[a]))
            stk[l++] = a;
        int rc = push_expanded(g, st, stk, l, 0);
        if (rc < 0)
            return rc;
        while (!is_seq_end(g->elems[a]))
            a++;
        if (GEL_KIND(g->elems[a]) == GEL_END)
            break;
        a++;
    }
    return st->n_stacks;
}

bool gstate_may_accept(const struct sample_grammar *g, const struct gstate *st, uint8_t c)
{
    for (int32_t off = 0; off < st->n; off += 2 + st->d[off + 1]) {
        int32_t len = st->d[off + 1];
        if (len == 0)
            continue;
        int32_t top = st->d[off + 2 + len - 1];
        if (set_has(g->sets[GEL_ARG(g->elems[top])], c))
            return true;
    }
    return false;
}

int gstate_advance(const struct sample_grammar *g, const struct gstate *in, uint8_t c,
                   struct gstate *out)
{
    gstate_reset(out);
    int32_t work[GRAMMAR_MAX_STACK];
    for (int32_t off = 0; off < in->n; off += 2 + in->d[off + 1]) {
        int32_t len = in->d[off + 1];
        if (len == 0)
            continue;
        const int32_t *stk = in->d + off + 2;
        int32_t top = stk[len - 1];
        if (!set_has(g->sets[GEL_ARG(g->elems[top])], c))
            continue;
        int32_t l = len - 1;
        memcpy(work, stk, (size_t)l * sizeof(int32_t));
        if (!is_seq_end(g->elems[top + 1]))
            work[l++] = top + 1;
        int rc = push_expanded(g, out, work, l, 0);
        if (rc < 0) {
            gstate_reset(out);
            return rc;
        }
    }
    return out->n_stacks;
}

int sample_grammar_check(const struct sample_grammar *g, const char *s, size_t n, bool *complete,
                         struct err *e)
{
    struct gstate a = {0}, b = {0};
    int rc = gstate_start(g, &a);
    for (size_t i = 0; rc > 0 && i < n; i++) {
        rc = gstate_advance(g, &a, (uint8_t)s[i], &b);
        struct gstate t = a;
        a = b;
        b = t;
    }
    if (rc < 0)
        err_set(e, rc, "grammar matcher limit reached (too deep or too ambiguous)");
    else if (complete)
        *complete = rc > 0 && a.complete;
    gstate_free(&a);
    gstate_free(&b);
    return rc < 0 ? rc : rc > 0 ? 1 : 0;
}

// sample internals: the byte-level grammar (builder, compiled form, matcher state) shared
// by grammar.c (builder + pushdown matcher), schema.c (format → grammar), vocab.c (token
// masks) and chain.c (the sampler).
#pragma once

#include "sample/sample.h"

// ---------------------------------------------------------------------------
// Compiled grammar: rules flattened into one element array. An element is an int32 with
// the kind in the low 2 bits: END (end of rule), ALT (end of one alternative), CHAR (arg =
// index of a 256-bit byte set), REF (arg = rule id). A position is an index into elems.

enum { GEL_END = 0, GEL_ALT = 1, GEL_CHAR = 2, GEL_REF = 3 };
#define GEL(kind, arg) ((int32_t)(((uint32_t)(arg) << 2) | (uint32_t)(kind)))
#define GEL_KIND(x)    ((x)&3)
#define GEL_ARG(x)     ((int32_t)((uint32_t)(x) >> 2))

#define GRAMMAR_MAX_STACK  256     // nesting depth of one matcher stack
#define GRAMMAR_MAX_STACKS 4096    // stacks alive in one state (ambiguity bound)
#define GRAMMAR_MAX_EXPAND 128     // nested rule expansions at one position
#define GRAMMAR_MAX_RULES  200000  // rules in one grammar
#define GRAMMAR_MAX_REPEAT 10000   // x{m,n} bound

struct sample_grammar {
    int32_t *elems;
    int32_t n_elems;
    int32_t *rule_start;  // first element of rule r's first alternative
    int32_t n_rules;
    uint64_t (*sets)[4];  // byte sets
    int32_t n_sets;
    int32_t root;
};

// ---------------------------------------------------------------------------
// Builder.

struct gseq {
    int32_t *v;
    int32_t n, cap;
};

struct gbuilder {
    struct grule {
        int32_t *alts;  // elements with GEL_ALT after each alternative
        int32_t n, cap;
        int32_t n_alts;
    } * rules;
    int32_t n_rules, cap_rules;
    uint64_t (*sets)[4];
    int32_t n_sets, cap_sets;
    int err;  // first error (ERR_TOO_LARGE on caps)
};

void gb_init(struct gbuilder *b);
void gb_deinit(struct gbuilder *b);
int32_t gb_rule(struct gbuilder *b);  // a new rule without alternatives yet
void gb_alt(struct gbuilder *b, int32_t rule, const struct gseq *s);  // s may be empty (ε)
int32_t gb_set(struct gbuilder *b, const uint64_t set[4]);
// Moves the builder's content into a grammar (checks: every rule has an alternative, no
// left recursion). The builder is left empty.
int gb_finish(struct gbuilder *b, int32_t root, struct sample_grammar **out, struct err *e);

void gseq_reset(struct gseq *s);
void gseq_free(struct gseq *s);
void gseq_push(struct gseq *s, int32_t el);
void gseq_ref(struct gseq *s, int32_t rule);
void gseq_set(struct gbuilder *b, struct gseq *s, const uint64_t set[4]);
void gseq_range(struct gbuilder *b, struct gseq *s, int lo, int hi);  // bytes lo..hi
void gseq_lit(struct gbuilder *b, struct gseq *s, const char *p, size_t n);
void gseq_cat(struct gseq *s, const struct gseq *t);

static inline void set_add_range(uint64_t set[4], int lo, int hi)
{
    for (int c = lo; c <= hi; c++)
        set[c >> 6] |= 1ull << (c & 63);
}
static inline bool set_has(const uint64_t set[4], unsigned c)
{
    return (set[c >> 6] >> (c & 63)) & 1;
}

// JSON Schema `pattern` → a rule for the content of a JSON string (regex.c). r_u8 matches
// one raw multi-byte UTF-8 character, r_any_char one JSON string character. On error sets
// *rc (ERR_UNSUPPORTED, message in e) and returns 0.
int32_t regex_content_rule(struct gbuilder *b, const char *pattern, size_t len, int32_t r_u8,
                           int32_t r_any_char, int *rc, struct err *e);

// ---------------------------------------------------------------------------
// Matcher state: a set of stacks, stored back to back as [hash, len, pos...]. The top of a
// stack (its last position) is always a CHAR element; an empty stack means "complete".

struct gstate {
    int32_t *d;
    int32_t n, cap;  // ints used / allocated
    int32_t n_stacks;
    bool complete;
};

void gstate_free(struct gstate *st);
void gstate_copy(struct gstate *dst, const struct gstate *src);
// Initial state of g. Returns 0 or ERR_TOO_LARGE.
int gstate_start(const struct sample_grammar *g, struct gstate *st);
// out = state after byte c. Returns the number of stacks (0: c is not allowed), or
// ERR_TOO_LARGE when a bound is hit (treated as "not allowed" by callers).
int gstate_advance(const struct sample_grammar *g, const struct gstate *in, uint8_t c,
                   struct gstate *out);
// Cheap pre-check: can any stack consume c?
bool gstate_may_accept(const struct sample_grammar *g, const struct gstate *st, uint8_t c);

// ---------------------------------------------------------------------------
// Vocabulary (vocab.c).

struct sample_vocab {
    int32_t n_vocab;
    char *bytes;    // all pieces back to back
    uint32_t *off;  // piece i = bytes[off[i] .. off[i+1])
    uint8_t *is_eog;
    int32_t *eog_ids;  // the EOG tokens
    int32_t n_eog;
    int32_t *sorted;  // non-EOG tokens with a non-empty piece, sorted by bytes
    uint32_t *lcp;    // common prefix length of sorted[i] with sorted[i-1]
    int32_t n_sorted;
    uint32_t max_len;
    int32_t *newline_ids;  // tokens whose piece is exactly "\n"
    int32_t n_newline;
};

static inline const char *vocab_piece(const struct sample_vocab *v, int32_t id, uint32_t *len)
{
    *len = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

// Per-sampler scratch for token masks.
// Matcher states met during mask walks are interned, with their byte transitions
// memoised: inside a JSON string, say, almost every byte leads back to the same state, so
// a walk over the vocabulary is mostly table lookups.
#define GMASK_MAX_STATES 2048
#define GMASK_UNKNOWN    (-1)
#define GMASK_DEAD       (-2)

struct gmask_ctx {
    struct gmask_state {
        struct gstate st;
        uint32_t hash;
        int32_t next[256];  // state id after a byte, GMASK_UNKNOWN or GMASK_DEAD
    } * states;
    int32_t n_states, cap_states;
    int32_t *index;  // open addressing over hash: state id + 1, 0 = empty
    int32_t index_cap;
    int32_t *depth;  // state id after 0..max_len bytes of the current token
    int32_t n_depth;
    struct gstate tmp;
    // a small cache of masks keyed by the exact state
    struct gmask_entry {
        int32_t *key;
        int32_t key_n;
        bool complete;
        uint64_t *bits;
        uint64_t last_use;
    } cache[8];
    uint64_t clock;
};

void gmask_ctx_free(struct gmask_ctx *m);
// Allowed tokens in state st as a bitmap of n_vocab bits (owned by m, valid until the next
// call). EOG tokens are allowed iff st is complete; empty pieces are never allowed.
const uint64_t *gmask_compute(struct gmask_ctx *m, const struct sample_grammar *g,
                              const struct sample_vocab *v, const struct gstate *st);
// Whether token id may follow state st; if so and next != NULL, next = the state after it.
bool gmask_token_ok(const struct sample_grammar *g, const struct sample_vocab *v,
                    const struct gstate *st, int32_t id, struct gstate *next, struct gstate *tmp);

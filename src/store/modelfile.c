// Modelfile parser and renderer (docs/spec/modelfile.md §1, §2, §6), and the
// client-side conversion of PARAMETER lines into typed request values.
//
// The parser is the five-state reader of upstream's ParseFile, one code point
// at a time: between commands, comment, instruction name, parameter name /
// message role, value. Values are "complete" at a newline unless an open
// quote is pending. Non-printable characters are dropped from arguments (Go's
// strconv.IsPrint: letters, marks, numbers, punctuation, symbols, space).
#include "store/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MF_MAX_COMMANDS 100000

static const char *const mf_instructions[] = {"from",      "license", "template", "system",
                                              "adapter",   "draft",   "renderer", "parser",
                                              "parameter", "message", "requires"};

#define MF_ERR_COMMAND                                                                             \
    "command must be one of \"from\", \"license\", \"template\", \"system\", \"adapter\", "        \
    "\"draft\", \"renderer\", \"parser\", \"parameter\", \"message\", or \"requires\""
#define MF_ERR_ROLE "message role must be one of \"system\", \"user\", or \"assistant\""

// ---------------------------------------------------------------------------
// Input decoding (§1.2): UTF-8 (BOM skipped) or UTF-16 with a BOM; invalid
// bytes become U+FFFD.

static uint32_t *decode_input(const char *text, size_t n, size_t *n_out)
{
    const unsigned char *p = (const unsigned char *)text;
    uint32_t *cps = xmalloc((n + 1) * sizeof(*cps));
    size_t o = 0, i = 0;
    if (n >= 2 && ((p[0] == 0xff && p[1] == 0xfe) || (p[0] == 0xfe && p[1] == 0xff))) {
        bool le = p[0] == 0xff;
        for (i = 2; i + 1 < n; i += 2) {
            uint32_t u =
                le ? (uint32_t)(p[i] | (p[i + 1] << 8)) : (uint32_t)((p[i] << 8) | p[i + 1]);
            if (u >= 0xd800 && u <= 0xdbff && i + 3 < n) {
                uint32_t lo = le ? (uint32_t)(p[i + 2] | (p[i + 3] << 8))
                                 : (uint32_t)((p[i + 2] << 8) | p[i + 3]);
                if (lo >= 0xdc00 && lo <= 0xdfff) {
                    cps[o++] = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                    i += 2;
                    continue;
                }
            }
            cps[o++] = (u >= 0xd800 && u <= 0xdfff) ? 0xfffd : u;
        }
        if (i < n)
            cps[o++] = 0xfffd;  // odd trailing byte
        *n_out = o;
        return cps;
    }
    if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
        i = 3;
    while (i < n) {
        size_t len;
        uint32_t cp = utf8_decode(p + i, n - i, &len);
        cps[o++] = cp == UTF8_INVALID ? 0xfffd : cp;
        i += len;
    }
    *n_out = o;
    return cps;
}

static bool is_blank(uint32_t c)
{
    return c == ' ' || c == '\t';
}
static bool is_newline(uint32_t c)
{
    return c == '\r' || c == '\n';
}
static bool is_alpha(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(uint32_t c)
{
    return c >= '0' && c <= '9';
}

static void put_cp(struct buf *b, uint32_t cp)
{
    buf_append_utf8(b, cp);
}

// Trims ASCII/Unicode white space (only ASCII blanks and newlines can be in
// the buffer: other spaces are not printable and were dropped).
static struct str trim_ws(const char *s, size_t n)
{
    size_t a = 0, z = n;
    while (a < z && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r'))
        a++;
    while (z > a && (s[z - 1] == ' ' || s[z - 1] == '\t' || s[z - 1] == '\n' || s[z - 1] == '\r'))
        z--;
    return (struct str){s + a, z - a};
}

// Upstream's unquote on a trimmed value: false when a quote is still open.
static bool unquote(struct str s, struct str *out)
{
    if (s.len >= 3 && memcmp(s.ptr, "\"\"\"", 3) == 0) {
        if (s.len >= 6 && memcmp(s.ptr + s.len - 3, "\"\"\"", 3) == 0) {
            *out = (struct str){s.ptr + 3, s.len - 6};
            return true;
        }
        return false;
    }
    if (s.len >= 1 && s.ptr[0] == '"') {
        if (s.len >= 2 && s.ptr[s.len - 1] == '"') {
            *out = (struct str){s.ptr + 1, s.len - 2};
            return true;
        }
        return false;
    }
    *out = s;
    return true;
}

static bool valid_instruction(const char *s, const char **canon)
{
    for (size_t i = 0; i < sizeof(mf_instructions) / sizeof(mf_instructions[0]); i++)
        if (ascii_ieq(s, mf_instructions[i])) {
            *canon = mf_instructions[i];
            return true;
        }
    return false;
}

enum mf_state { ST_NIL, ST_COMMENT, ST_NAME, ST_PARAM, ST_ROLE, ST_VALUE };

static void add_command(struct store_modelfile *m, size_t *cap, const char *name, const char *key,
                        struct str args, int line)
{
    if (m->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        m->cmds = xrealloc(m->cmds, *cap * sizeof(*m->cmds));
    }
    struct store_mf_command *c = &m->cmds[m->n++];
    c->name = xstrdup(name);
    c->key = key ? xstrdup(key) : NULL;
    c->args = str_dup(args);
    c->line = line;
}

// The parser's state between runes: the state machine of upstream's parser.go.
struct mf_parser {
    struct store_modelfile m;  // the commands so far
    size_t cap;                // of m.cmds
    struct buf b;              // the token being read
    enum mf_state st;
    int line;
    const char *cmd_name;  // the current command's instruction, canonical spelling
    char key[256];         // its parameter name or message role
};

// Adds the current command with value v; PARAMETER and MESSAGE carry their key.
static void mf_add(struct mf_parser *p, struct str v)
{
    bool has_key = strcmp(p->cmd_name, "parameter") == 0 || strcmp(p->cmd_name, "message") == 0;
    add_command(&p->m, &p->cap, p->cmd_name, has_key ? p->key : NULL, v, p->line);
}

// Where rune r takes the machine from p->st: *next is the new state and *keep the rune to
// append after the transition (0: none).
static int mf_next_state(struct mf_parser *p, uint32_t r, enum mf_state *next, uint32_t *keep,
                         struct err *e)
{
    switch (p->st) {
    case ST_NIL:
        if (r == '#')
            *next = ST_COMMENT;
        else if (!is_blank(r) && !is_newline(r))
            *next = ST_NAME, *keep = r;
        break;
    case ST_COMMENT:
        if (is_newline(r))
            *next = ST_NIL;
        break;
    case ST_NAME:
        if (is_alpha(r))
            *keep = r;
        else if (is_blank(r))
            *next = ST_VALUE;
        else
            return err_set(e, ERR_INVALID, "(line %d): %s", p->line, MF_ERR_COMMAND);
        break;
    case ST_PARAM:
    case ST_ROLE:
        if (is_alpha(r) || (p->st == ST_PARAM && (is_digit(r) || r == '_')))
            *keep = r;
        else if (is_blank(r))
            *next = ST_VALUE;
        else
            return err_set(e, ERR_INVALID, "unexpected EOF: %s", buf_cstr(&p->b));
        break;
    case ST_VALUE:
        if (is_newline(r) || is_blank(r))
            *next = ST_NIL;
        *keep = r;
        break;
    }
    return 0;
}

// Ends the token in p->b as the machine leaves p->st on rune r: an instruction (PARAMETER
// and MESSAGE go on to read a key, so *next may change), a key, or a value. Returns 1 when
// the value is not over after all (a blank, or a newline inside an open quote): r was
// appended and the state stays.
static int mf_end_token(struct mf_parser *p, uint32_t r, enum mf_state *next, struct err *e)
{
    switch (p->st) {
    case ST_NAME: {
        const char *canon;
        if (!valid_instruction(buf_cstr(&p->b), &canon))
            return err_set(e, ERR_INVALID, "(line %d): %s", p->line, MF_ERR_COMMAND);
        p->cmd_name = canon;
        if (strcmp(canon, "parameter") == 0)
            *next = ST_PARAM;
        else if (strcmp(canon, "message") == 0)
            *next = ST_ROLE;
        p->key[0] = '\0';
        break;
    }
    case ST_PARAM:
        snprintf(p->key, sizeof(p->key), "%s", buf_cstr(&p->b));
        break;
    case ST_ROLE: {
        const char *role = buf_cstr(&p->b);
        if (strcmp(role, "system") != 0 && strcmp(role, "user") != 0 &&
            strcmp(role, "assistant") != 0)
            return err_set(e, ERR_INVALID, "(line %d): %s", p->line, MF_ERR_ROLE);
        snprintf(p->key, sizeof(p->key), "%s", role);
        break;
    }
    case ST_VALUE: {
        struct str v;
        if (!unquote(trim_ws(p->b.data ? p->b.data : "", p->b.len), &v) || is_blank(r)) {
            put_cp(&p->b, r);  // blanks always, newlines inside an open quote
            return 1;
        }
        if (p->m.n >= MF_MAX_COMMANDS)
            return err_set(e, ERR_TOO_LARGE, "too many commands");
        mf_add(p, v);
        break;
    }
    default:
        break;
    }
    return 0;
}

// Feeds one rune to the machine.
static int mf_feed(struct mf_parser *p, uint32_t r, struct err *e)
{
    if (is_newline(r))
        p->line++;
    enum mf_state next = p->st;
    uint32_t keep = 0;
    int rc = mf_next_state(p, r, &next, &keep, e);
    if (rc < 0)
        return rc;
    if (next == p->st) {
        if (keep && utf8_is_go_print(keep))
            put_cp(&p->b, keep);
        return 0;
    }
    rc = mf_end_token(p, r, &next, e);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    buf_reset(&p->b);
    p->st = next;
    // Transitions consume their rune except the first letter of a name.
    if (keep && p->st == ST_NAME && utf8_is_go_print(keep))
        put_cp(&p->b, keep);
    return 0;
}

// At the end of the text: a value still being read is the last command (its quote must
// be closed), any other unfinished token is an error, and there must be a FROM.
static int mf_finish(struct mf_parser *p, struct err *e)
{
    switch (p->st) {
    case ST_NIL:
    case ST_COMMENT:
        break;
    case ST_VALUE: {
        struct str v;
        if (!unquote(trim_ws(p->b.data ? p->b.data : "", p->b.len), &v))
            return err_set(e, ERR_INVALID, "unexpected EOF");
        mf_add(p, v);
        break;
    }
    default:
        return err_set(e, ERR_INVALID, "unexpected EOF");
    }

    bool has_from = false;
    for (size_t i = 0; i < p->m.n; i++)
        if (strcmp(p->m.cmds[i].name, "from") == 0)
            has_from = true;
    if (!has_from)
        return err_set(e, ERR_INVALID, "no FROM line");
    return 0;
}

int store_modelfile_parse(const char *text, size_t n, struct store_modelfile *out, struct err *e)
{
    size_t n_cps;
    uint32_t *cps = decode_input(text, n, &n_cps);
    struct mf_parser p = {.st = ST_NIL, .line = 1};
    buf_init(&p.b, 0);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_cps; i++)
        rc = mf_feed(&p, cps[i], e);
    if (rc == 0)
        rc = mf_finish(&p, e);
    free(cps);
    buf_deinit(&p.b);
    if (rc < 0) {
        store_modelfile_deinit(&p.m);
        return rc;
    }
    *out = p.m;
    return 0;
}

void store_modelfile_deinit(struct store_modelfile *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->cmds[i].name);
        free(m->cmds[i].key);
        free(m->cmds[i].args);
    }
    free(m->cmds);
    m->cmds = NULL;
    m->n = 0;
}

// ---------------------------------------------------------------------------
// Rendering (§6).

int store_modelfile_quote(const char *arg, struct buf *out)
{
    size_t n = strlen(arg);
    bool wrap = strchr(arg, '\n') || (n > 0 && (arg[0] == ' ' || arg[n - 1] == ' '));
    if (!wrap)
        return buf_append_str(out, arg);
    const char *q = strchr(arg, '"') ? "\"\"\"" : "\"";
    return buf_printf(out, "%s%s%s", q, arg, q);
}

int store_modelfile_render(const struct store_modelfile *m, struct buf *out)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        const struct store_mf_command *c = &m->cmds[i];
        if (strcmp(c->name, "from") == 0) {
            rc = buf_printf(out, "FROM %s", c->args);
        } else if (strcmp(c->name, "parameter") == 0 || strcmp(c->name, "message") == 0) {
            rc =
                buf_printf(out, "%s %s ", strcmp(c->name, "message") == 0 ? "MESSAGE" : "PARAMETER",
                           c->key ? c->key : "");
            if (rc == 0)
                rc = store_modelfile_quote(c->args, out);
        } else {
            char upper[16];
            size_t k = 0;
            for (; c->name[k] && k + 1 < sizeof(upper); k++)
                upper[k] =
                    (char)(c->name[k] >= 'a' && c->name[k] <= 'z' ? c->name[k] - 32 : c->name[k]);
            upper[k] = '\0';
            rc = buf_printf(out, "%s ", upper);
            if (rc == 0)
                rc = store_modelfile_quote(c->args, out);
        }
        if (rc == 0)
            rc = buf_append_char(out, '\n');
    }
    return rc;
}

// ---------------------------------------------------------------------------
// Parameters (§2).

static const struct {
    const char *name;
    enum store_param_type type;
} param_table[] = {
    {"num_ctx", STORE_PARAM_INT},
    {"num_batch", STORE_PARAM_INT},
    {"num_gpu", STORE_PARAM_INT},
    {"main_gpu", STORE_PARAM_INT},
    {"use_mmap", STORE_PARAM_BOOL},
    {"num_thread", STORE_PARAM_INT},
    {"num_keep", STORE_PARAM_INT},
    {"seed", STORE_PARAM_INT},
    {"num_predict", STORE_PARAM_INT},
    {"top_k", STORE_PARAM_INT},
    {"top_p", STORE_PARAM_FLOAT},
    {"min_p", STORE_PARAM_FLOAT},
    {"typical_p", STORE_PARAM_FLOAT},
    {"repeat_last_n", STORE_PARAM_INT},
    {"temperature", STORE_PARAM_FLOAT},
    {"repeat_penalty", STORE_PARAM_FLOAT},
    {"presence_penalty", STORE_PARAM_FLOAT},
    {"frequency_penalty", STORE_PARAM_FLOAT},
    {"stop", STORE_PARAM_STRING},
    {"draft_num_predict", STORE_PARAM_INT},
    {"draft_ngram", STORE_PARAM_INT},  // ollama-c: prompt-lookup drafting
};

static const char *const deprecated_params[] = {
    "penalize_newline", "low_vram", "f16_kv",       "logits_all",   "vocab_only",
    "use_mlock",        "mirostat", "mirostat_tau", "mirostat_eta",
};

bool store_param_type(const char *name, enum store_param_type *out)
{
    for (size_t i = 0; i < sizeof(param_table) / sizeof(param_table[0]); i++)
        if (strcmp(name, param_table[i].name) == 0) {
            *out = param_table[i].type;
            return true;
        }
    return false;
}

bool store_param_deprecated(const char *name)
{
    for (size_t i = 0; i < sizeof(deprecated_params) / sizeof(deprecated_params[0]); i++)
        if (strcmp(name, deprecated_params[i]) == 0)
            return true;
    return false;
}

// strconv.ParseFloat(s, 32): decimal or hex floats, inf/infinity/nan.
static bool parse_go_float32(const char *s, float *out)
{
    if (!*s)
        return false;
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    bool special = ascii_ieq(p, "inf") || ascii_ieq(p, "infinity") || ascii_ieq(p, "nan");
    if (!special) {
        // Only the characters of a number; strtof also takes spaces, "nan(...)".
        for (const char *q = p; *q; q++) {
            char c = *q;
            if (!(is_digit((unsigned char)c) || c == '.' || c == 'e' || c == 'E' || c == 'x' ||
                  c == 'X' || c == 'p' || c == 'P' || c == '+' || c == '-' ||
                  (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                return false;
        }
        bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
        if (hex && !strpbrk(p, "pP"))
            return false;  // Go wants a 'p' exponent in hex floats
    }
    errno = 0;
    char *end;
    float v = strtof(s, &end);
    if (*end || end == s)
        return false;
    if (!special && isinf(v))
        return false;  // out of range for a float32
    *out = v;
    return true;
}

// strconv.ParseBool.
static bool parse_go_bool(const char *s, bool *out)
{
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(s, t[i]) == 0)
            return (*out = true);
        if (strcmp(s, f[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

// The float32 as its shortest decimal, as a double (what Go's encoder sends
// for a float32 and the server decodes into a float64).
static double float32_as_json_double(float f)
{
    char tmp[48];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)f);
        if (strtof(tmp, NULL) == f)
            break;
    }
    return strtod(tmp, NULL);
}

int store_modelfile_params(const struct store_modelfile *m, json_t **out, size_t *n_deprecated,
                           struct err *e)
{
    json_t *params = json_object();
    size_t deprecated = 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct store_mf_command *c = &m->cmds[i];
        if (strcmp(c->name, "parameter") != 0)
            continue;
        const char *k = c->key ? c->key : "";
        if (store_param_deprecated(k)) {
            deprecated++;
            continue;
        }
        enum store_param_type t;
        if (!store_param_type(k, &t)) {
            json_decref(params);
            return err_set(e, ERR_INVALID, "unknown parameter '%s'", k);
        }
        json_t *v = NULL;
        switch (t) {
        case STORE_PARAM_INT: {
            int64_t x;
            if (!str_go_parse_int(c->args, &x)) {
                json_decref(params);
                return err_set(e, ERR_INVALID, "invalid int value [%s]", c->args);
            }
            v = json_integer(x);
            break;
        }
        case STORE_PARAM_FLOAT: {
            float x;
            if (!parse_go_float32(c->args, &x) || !isfinite(x)) {
                json_decref(params);
                return err_set(e, ERR_INVALID, "invalid float value [%s]", c->args);
            }
            v = json_real(float32_as_json_double(x));
            break;
        }
        case STORE_PARAM_BOOL: {
            bool x;
            if (!parse_go_bool(c->args, &x)) {
                json_decref(params);
                return err_set(e, ERR_INVALID, "invalid bool value [%s]", c->args);
            }
            v = json_boolean(x);
            break;
        }
        case STORE_PARAM_STRING:
            if (strcmp(k, "stop") == 0) {
                json_t *arr = json_object_get(params, "stop");
                if (!arr) {
                    arr = json_array();
                    json_object_set_new(params, "stop", arr);
                }
                json_array_append_new(arr, json_string(c->args));
                continue;
            }
            v = json_string(c->args);
            break;
        }
        json_object_set_new(params, k, v);
    }
    if (n_deprecated)
        *n_deprecated = deprecated;
    *out = params;
    return 0;
}

// golang.org/x/mod/semver.IsValid of "v" + s (shorthand v1, v1.2 allowed).
static bool semver_num(const char **p)
{
    const char *s = *p;
    if (!is_digit((unsigned char)*s))
        return false;
    if (*s == '0' && is_digit((unsigned char)s[1]))
        return false;
    while (is_digit((unsigned char)*s))
        s++;
    *p = s;
    return true;
}

static bool semver_ids(const char **p, bool prerelease)
{
    const char *s = *p;
    for (;;) {
        const char *start = s;
        bool all_digits = true;
        while (store_is_alnum_(*s) || *s == '-') {
            if (!is_digit((unsigned char)*s))
                all_digits = false;
            s++;
        }
        if (s == start)
            return false;
        if (prerelease && all_digits && *start == '0' && s - start > 1)
            return false;
        if (*s != '.')
            break;
        s++;
    }
    *p = s;
    return true;
}

static bool semver_valid(const char *v)
{
    const char *p = v;
    if (*p != 'v')
        return false;
    p++;
    if (!semver_num(&p))
        return false;
    if (!*p)
        return true;
    if (*p++ != '.' || !semver_num(&p))
        return false;
    if (!*p)
        return true;
    if (*p++ != '.' || !semver_num(&p))
        return false;
    if (*p == '-') {
        p++;
        if (!semver_ids(&p, true))
            return false;
    }
    if (*p == '+') {
        p++;
        if (!semver_ids(&p, false))
            return false;
    }
    return *p == '\0';
}

int store_modelfile_to_request(const struct store_modelfile *m, json_t **out, struct err *e)
{
    json_t *params;
    int rc = store_modelfile_params(m, &params, NULL, e);
    if (rc < 0)
        return rc;
    json_t *req = json_object();
    json_t *licenses = json_array(), *messages = json_array();
    for (size_t i = 0; i < m->n; i++) {
        const struct store_mf_command *c = &m->cmds[i];
        if (strcmp(c->name, "from") == 0) {
            json_object_set_new(req, "from", json_string(c->args));
        } else if (strcmp(c->name, "template") == 0 || strcmp(c->name, "system") == 0 ||
                   strcmp(c->name, "renderer") == 0 || strcmp(c->name, "parser") == 0) {
            json_object_set_new(req, c->name, json_string(c->args));
        } else if (strcmp(c->name, "license") == 0) {
            json_array_append_new(licenses, json_string(c->args));
        } else if (strcmp(c->name, "message") == 0) {
            json_array_append_new(messages,
                                  json_pack("{s:s,s:s}", "role", c->key, "content", c->args));
        } else if (strcmp(c->name, "requires") == 0) {
            char v[256];
            snprintf(v, sizeof(v), "%s%s", c->args[0] == 'v' ? "" : "v", c->args);
            if (!semver_valid(v)) {
                rc = err_set(e, ERR_INVALID, "requires must be a valid semver (e.g. 0.14.0)");
                break;
            }
            json_object_set_new(req, "requires", json_string(v + 1));
        }
        // ADAPTER and DRAFT name client-side files: the CLI uploads them.
    }
    if (rc == 0 && json_object_size(params))
        json_object_set(req, "parameters", params);
    if (rc == 0 && json_array_size(messages))
        json_object_set(req, "messages", messages);
    if (rc == 0 && json_array_size(licenses))
        json_object_set(req, "license", licenses);
    json_decref(params);
    json_decref(messages);
    json_decref(licenses);
    if (rc < 0) {
        json_decref(req);
        return rc;
    }
    *out = req;
    return 0;
}

// Llama 3.x's tool calls, read as llama.cpp's llama 3.x handler with
// built-in tools reads them (common/chat.cpp):
//
//   {"name": "get", "parameters": {...}}               the whole reply is a JSON call
//   text<|python_tag|>brave_search.call(query="x")     a built-in tool's call
//   <|python_tag|>{"name": "get", "parameters": {...}} a JSON call
//   <|python_tag|>import math\nprint(math.pi)          code for code_interpreter
//
// A call's arguments are NAME=VALUE pairs whose values are Python literals
// (strings, numbers, True/False/None, lists, tuples and dicts; JSON's
// true/false/null too): they become a JSON object. Text after the tag that
// is not NAME.call( is code, sent to the end of the reply as {"code": ...}
// to code_interpreter (python when the request has that tool and not
// code_interpreter). A call that is malformed after NAME.call( is left as
// text, tag included.
#include "template/internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LL_TAG       "<|python_tag|>"
#define PY_MAX_DEPTH 32

// ---------------------------------------------------------------------------
// Python literals

enum {
    PY_OK,
    PY_MORE,  // the input ends before the literal does
    PY_BAD,   // not a literal
    PY_NOT,   // (parse_call) no NAME.call( here
};

struct py {
    const char *s;
    size_t n, i;
    int depth;
};

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void py_space(struct py *p)
{
    p->i += tmpl_skip_space(p->s + p->i, p->n - p->i);
}

// k hex digits at s[*i]: PY_MORE when the input ends first.
static int read_hex(const char *s, size_t n, size_t *i, int k, uint32_t *out)
{
    uint32_t v = 0;
    for (int d = 0; d < k; d++, (*i)++) {
        if (*i >= n)
            return PY_MORE;
        int h = hex_digit(s[*i]);
        if (h < 0)
            return PY_BAD;
        v = v * 16 + (uint32_t)h;
    }
    *out = v;
    return PY_OK;
}

static int put_utf8(struct buf *b, uint32_t c)
{
    return buf_append_utf8(b, c) ? PY_BAD : PY_OK;
}

// After a backslash at s[*i - 2] and the escape letter at s[*i - 1]: \x, \u,
// \U; a \u high surrogate takes the \u low surrogate after it.
static int read_code_point(const char *s, size_t n, size_t *i, char kind, struct buf *b)
{
    uint32_t c;
    int rc = read_hex(s, n, i, kind == 'x' ? 2 : kind == 'u' ? 4 : 8, &c);
    if (rc)
        return rc;
    if (kind == 'u' && c >= 0xD800 && c <= 0xDBFF) {
        if (*i + 2 > n)
            return PY_MORE;
        if (s[*i] != '\\' || s[*i + 1] != 'u')
            return PY_BAD;
        size_t j = *i + 2;
        uint32_t lo;
        if ((rc = read_hex(s, n, &j, 4, &lo)))
            return rc;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return PY_BAD;
        c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
        *i = j;
    }
    if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
        return PY_BAD;
    return put_utf8(b, c);
}

// The byte a one-letter escape stands for, or 0.
static char simple_escape(char x)
{
    switch (x) {
    case '\\':
    case '\'':
    case '"':
        return x;
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case 'a':
        return '\a';
    default:
        return 0;
    }
}

// After the backslash: one escape appended to b, s[*i] the letter.
static int read_escape(const char *s, size_t n, size_t *i, struct buf *b)
{
    char x = s[(*i)++];
    char c = simple_escape(x);
    if (c)
        return buf_append(b, &c, 1) ? PY_BAD : PY_OK;
    if (x == '\n')
        return PY_OK;  // a line continuation: nothing
    if (x >= '0' && x <= '7') {
        uint32_t v = (uint32_t)(x - '0');
        int digits = 1;
        for (; digits < 3 && *i < n && s[*i] >= '0' && s[*i] <= '7'; digits++)
            v = v * 8 + (uint32_t)(s[(*i)++] - '0');
        return digits < 3 && *i >= n ? PY_MORE : put_utf8(b, v);
    }
    if (x == 'x' || x == 'u' || x == 'U')
        return read_code_point(s, n, i, x, b);
    char keep[2] = {'\\', x};  // Python keeps an unknown escape as written
    return buf_append(b, keep, 2) ? PY_BAD : PY_OK;
}

// '…' or "…", or tripled (which may span lines).
static int py_string(struct py *p, json_t **out)
{
    const char *s = p->s;
    size_t n = p->n, i = p->i + 1;
    char q = s[p->i];
    bool triple = false;
    if (i < n && s[i] == q) {  // "" is empty, or opens """
        if (i + 1 >= n)
            return PY_MORE;
        if (s[i + 1] != q) {
            p->i = i + 1;
            *out = json_string("");
            return PY_OK;
        }
        triple = true;
        i += 2;
    }
    struct buf b;
    buf_init(&b, 0);
    int rc = PY_MORE;
    while (i < n) {
        char c = s[i];
        if (c == q && !triple) {
            i++;
            rc = PY_OK;
            break;
        }
        if (c == q) {
            size_t run = 1;  // quotes in a row, up to three
            while (run < 3 && i + run < n && s[i + run] == q)
                run++;
            if (run == 3) {
                i += 3;
                rc = PY_OK;
                break;
            }
            if (i + run == n)
                break;  // more: the closing quotes may be coming
        }
        if (c == '\n' && !triple) {
            rc = PY_BAD;  // a one-line string may not span lines
            break;
        }
        if (c == '\\') {
            if (i + 1 >= n)
                break;  // more
            i++;
            int r = read_escape(s, n, &i, &b);
            if (r) {
                rc = r;
                break;
            }
            continue;
        }
        if (buf_append(&b, &c, 1)) {
            rc = PY_BAD;
            break;
        }
        i++;
    }
    if (rc == PY_OK) {
        *out = json_stringn(b.data ? b.data : "", b.len);
        if (!*out)
            rc = PY_BAD;  // not UTF-8
        p->i = i;
    }
    buf_deinit(&b);
    return rc;
}

// [+-] digits [. digits] [e [+-] digits], "_" between digits.
static int py_number(struct py *p, json_t **out)
{
    const char *s = p->s;
    size_t n = p->n, i = p->i;
    struct buf t;
    buf_init(&t, 0);
    int rc = PY_OK;
    bool digits = false, real = false, exp = false;
    if (s[i] == '+' || s[i] == '-')
        rc |= buf_append(&t, s + i++, 1);
    for (; i < n; i++) {
        char c = s[i];
        if (is_digit(c)) {
            digits = true;
        } else if (c == '_' && digits) {
            continue;
        } else if (c == '.' && !real) {
            real = true;
        } else if ((c == 'e' || c == 'E') && digits && !exp) {
            real = exp = true;
            rc |= buf_append(&t, &c, 1);
            if (i + 1 < n && (s[i + 1] == '+' || s[i + 1] == '-'))
                c = s[++i];
            else
                continue;
        } else {
            break;
        }
        rc |= buf_append(&t, &c, 1);
    }
    if (rc)
        rc = PY_BAD;
    else if (i >= n)
        rc = PY_MORE;  // the number may go on
    else if (!digits || s[i - 1] == '_' || is_word(s[i]))
        rc = PY_BAD;
    if (rc) {
        buf_deinit(&t);
        return rc;
    }
    const char *text = buf_cstr(&t);
    char *end;
    errno = 0;
    if (!real) {
        long long v = strtoll(text, &end, 10);
        if (errno != ERANGE && *end == 0)
            *out = json_integer(v);
        else
            real = true;  // past int64: as a float, as JSON readers take it
    }
    if (real) {
        double d = strtod(text, &end);
        *out = *end == 0 ? json_real(d) : NULL;
    }
    buf_deinit(&t);
    if (!*out)
        return PY_BAD;
    p->i = i;
    return PY_OK;
}

static int py_value(struct py *p, json_t **out);

// [a, b], (a, b) or {k: v}: p->i at the opening bracket. "(a)" is just a.
static int py_items(struct py *p, char close, json_t **out)
{
    bool dict = close == '}', tuple = close == ')';
    if (p->depth >= PY_MAX_DEPTH)
        return PY_BAD;
    p->depth++;
    p->i++;
    json_t *v = dict ? json_object() : json_array();
    bool comma = false;
    int rc;
    for (;;) {
        py_space(p);
        if (p->i >= p->n) {
            rc = PY_MORE;
            break;
        }
        if (p->s[p->i] == close) {
            p->i++;
            rc = PY_OK;
            break;
        }
        json_t *key = NULL, *item = NULL;
        if (dict) {
            if ((rc = py_value(p, &key)))
                break;
            py_space(p);
            rc = !json_is_string(key) ? PY_BAD
                 : p->i >= p->n       ? PY_MORE
                 : p->s[p->i] != ':'  ? PY_BAD
                                      : PY_OK;
            if (rc) {
                json_decref(key);
                break;
            }
            p->i++;
            py_space(p);
        }
        if ((rc = py_value(p, &item))) {
            json_decref(key);
            break;
        }
        if (dict) {
            json_object_set_new(v, json_string_value(key), item);
            json_decref(key);
        } else {
            json_array_append_new(v, item);
        }
        py_space(p);
        if (p->i >= p->n) {
            rc = PY_MORE;
            break;
        }
        if (p->s[p->i] == ',') {
            p->i++;
            comma = true;
            continue;
        }
        if (p->s[p->i] == close) {
            p->i++;
            rc = PY_OK;
            break;
        }
        rc = PY_BAD;
        break;
    }
    p->depth--;
    if (rc) {
        json_decref(v);
        return rc;
    }
    if (tuple && !comma && json_array_size(v) == 1) {  // parentheses around one value
        *out = json_incref(json_array_get(v, 0));
        json_decref(v);
    } else {
        *out = v;
    }
    return PY_OK;
}

static bool word_is(const char *w, size_t n, const char *word)
{
    return strlen(word) == n && !memcmp(w, word, n);
}

// A literal; True, False and None also as JSON spells them.
static int py_value(struct py *p, json_t **out)
{
    *out = NULL;
    if (p->i >= p->n)
        return PY_MORE;
    char c = p->s[p->i];
    if (c == '"' || c == '\'')
        return py_string(p, out);
    if (c == '[')
        return py_items(p, ']', out);
    if (c == '(')
        return py_items(p, ')', out);
    if (c == '{')
        return py_items(p, '}', out);
    if (c == '+' || c == '-' || c == '.' || is_digit(c))
        return py_number(p, out);
    if (!is_word(c))
        return PY_BAD;
    size_t j = p->i;
    while (j < p->n && is_word(p->s[j]))
        j++;
    if (j >= p->n)
        return PY_MORE;
    const char *w = p->s + p->i;
    size_t wl = j - p->i;
    if (word_is(w, wl, "True") || word_is(w, wl, "true"))
        *out = json_true();
    else if (word_is(w, wl, "False") || word_is(w, wl, "false"))
        *out = json_false();
    else if (word_is(w, wl, "None") || word_is(w, wl, "null"))
        *out = json_null();
    if (*out) {
        p->i = j;
        return PY_OK;
    }
    return PY_BAD;  // a name is no literal
}

// What follows <|python_tag|>: [space] NAME [space] . [space] call( ARGS ),
// ARGS being NAME=VALUE pairs split by commas (a trailing one allowed).
// "NAME.call(" at p: PY_OK with the name's span, PY_MORE when the input ends
// first, PY_NOT when it is something else.
static int call_head(struct py *p, size_t *name_at, size_t *name_len)
{
    const char *s = p->s;
    size_t n = p->n;
    py_space(p);
    *name_at = p->i;
    while (p->i < n && is_word(s[p->i]))
        p->i++;
    *name_len = p->i - *name_at;
    py_space(p);
    if (p->i >= n)
        return PY_MORE;
    if (!*name_len || s[p->i] != '.')
        return PY_NOT;
    p->i++;
    py_space(p);
    static const char call[] = "call(";
    size_t have = n - p->i < sizeof call - 1 ? n - p->i : sizeof call - 1;
    if (memcmp(s + p->i, call, have))
        return PY_NOT;
    if (have < sizeof call - 1)
        return PY_MORE;
    p->i += sizeof call - 1;
    return PY_OK;
}

// One "KEY=VALUE" into obj, and the "," or ")" after it (*closed on ")").
static int keyword_arg(struct py *p, json_t *obj, bool *closed)
{
    const char *s = p->s;
    size_t n = p->n, key_at = p->i;
    while (p->i < n && is_word(s[p->i]))
        p->i++;
    size_t key_len = p->i - key_at;
    py_space(p);
    if (p->i >= n)
        return PY_MORE;
    if (!key_len || is_digit(s[key_at]) || s[p->i] != '=')
        return PY_BAD;  // only keyword arguments
    p->i++;
    py_space(p);
    json_t *v;
    int rc = py_value(p, &v);
    if (rc)
        return rc;
    char *key = xstrndup(s + key_at, key_len);
    json_object_set_new(obj, key, v);
    free(key);
    py_space(p);
    if (p->i >= n)
        return PY_MORE;
    if (s[p->i] == ',') {
        p->i++;
        return PY_OK;
    }
    if (s[p->i] != ')')
        return PY_BAD;
    p->i++;
    *closed = true;
    return PY_OK;
}

// PY_OK: *name, *args and *end (past the ")"). PY_MORE: the input ends
// first; *head tells whether "NAME.call(" was all there. PY_NOT: it is not
// NAME.call(. PY_BAD: malformed after NAME.call(.
static int parse_call(const char *s, size_t n, char **name, json_t **args, size_t *end, bool *head)
{
    struct py p = {s, n, 0, 0};
    size_t name_at, name_len;
    *head = false;
    int rc = call_head(&p, &name_at, &name_len);
    if (rc)
        return rc;
    *head = true;
    json_t *obj = json_object();
    for (bool closed = false; !rc && !closed;) {
        py_space(&p);
        if (p.i >= n) {
            rc = PY_MORE;
        } else if (s[p.i] == ')') {
            p.i++;
            closed = true;
        } else {
            rc = keyword_arg(&p, obj, &closed);
        }
    }
    if (rc) {
        json_decref(obj);
        return rc;
    }
    *name = xstrndup(s + name_at, name_len);
    *args = obj;
    *end = p.i;
    return PY_OK;
}

// ---------------------------------------------------------------------------
// The parser

enum {
    LL_START,       // before the first non-blank byte
    LL_TEXT,        // content, until a tag
    LL_AFTER_TAG,   // after a tag: a JSON call, NAME.call( or code
    LL_AFTER_CALL,  // white space after NAME.call(...)
    LL_CODE,        // code: the rest of the reply
    LL_JSON,        // JSON calls, read by the tagged-JSON parser
};

struct ll_parser {
    int state;
    struct buf acc;  // text not yet resolved
    json_t *tools;
    const char *code_tool;              // the tool code goes to
    struct template_tool_parser *json;  // LL_JSON
    int n_calls;
};

static bool has_tool(json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const char *n = json_string_value(
            json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
        if (n && !strcmp(n, name))
            return true;
    }
    return false;
}

static void *ll_new(json_t *tools)
{
    struct ll_parser *p = xcalloc(1, sizeof(*p));
    p->state = LL_START;
    buf_init(&p->acc, 0);
    p->tools = json_incref(tools);
    p->code_tool = !has_tool(tools, "code_interpreter") && has_tool(tools, "python")
                       ? "python"
                       : "code_interpreter";
    return p;
}

static void ll_free(void *vp)
{
    struct ll_parser *p = vp;
    if (!p)
        return;
    buf_deinit(&p->acc);
    json_decref(p->tools);
    template_tool_parser_free(p->json);
    free(p);
}

// The JSON parser's calls numbered in this reply's sequence.
static void renumber(struct ll_parser *p, json_t *calls, size_t from)
{
    for (size_t i = from; i < json_array_size(calls); i++)
        json_object_set_new(json_object_get(json_array_get(calls, i), "function"), "index",
                            json_integer(p->n_calls++));
}

static int json_add(struct ll_parser *p, const char *s, size_t n, struct buf *content,
                    json_t *calls, struct err *e)
{
    size_t from = json_array_size(calls);
    int rc = template_tool_parser_add(p->json, s, n, content, calls, e);
    renumber(p, calls, from);
    return rc;
}

// From here on the text (s) is read as JSON calls.
static int start_json(struct ll_parser *p, const char *s, size_t n, struct buf *content,
                      json_t *calls, struct err *e)
{
    p->json = template_tool_parser_new("{", p->tools);
    p->state = LL_JSON;
    char *text = xstrndup(s, n);
    buf_reset(&p->acc);
    int rc = json_add(p, text, n, content, calls, e);
    free(text);
    return rc;
}

static int code_call(struct ll_parser *p, const char *code, size_t n, struct buf *content,
                     json_t *calls)
{
    json_t *v = json_stringn(code, n);
    if (!v)  // not UTF-8: leave it as text
        return buf_append(content, LL_TAG, strlen(LL_TAG)) | buf_append(content, code, n);
    json_t *args = json_object();
    json_object_set_new(args, "code", v);
    tmpl_call_append(calls, p->n_calls++, p->code_tool, args);
    return 0;
}

static int ll_add(void *vp, const char *s, size_t n, struct buf *content, json_t *calls,
                  struct err *e)
{
    struct ll_parser *p = vp;
    if (p->state == LL_JSON)
        return json_add(p, s, n, content, calls, e);
    if (buf_append(&p->acc, s, n))
        return err_set(e, ERR_TOO_LARGE, "tool call output too large");
    int rc = 0;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t len = p->acc.len;
        size_t w = tmpl_skip_space(a, len);
        if (p->state == LL_START) {
            if (w == len)
                break;
            if (a[w] == '{')
                return start_json(p, a, len, content, calls, e);
            p->state = LL_TEXT;
        } else if (p->state == LL_TEXT) {
            const char *t = tmpl_find(a, len, LL_TAG);
            if (!t) {
                size_t keep = tmpl_partial_suffix(a, len, LL_TAG);
                rc |= buf_append(content, a, len - keep);
                tmpl_buf_set(&p->acc, a + len - keep, keep);
                break;
            }
            size_t at = (size_t)(t - a), tl = strlen(LL_TAG);
            rc |= buf_append(content, a, at);
            tmpl_buf_set(&p->acc, a + at + tl, len - at - tl);
            p->state = LL_AFTER_TAG;
        } else if (p->state == LL_AFTER_TAG) {
            if (w == len)
                break;
            if (a[w] == '{')
                return start_json(p, a + w, len - w, content, calls, e);
            char *name;
            json_t *args;
            size_t end;
            bool head;
            int r = parse_call(a, len, &name, &args, &end, &head);
            if (r == PY_MORE)
                break;
            if (r == PY_NOT) {
                tmpl_buf_set(&p->acc, a + w, len - w);
                p->state = LL_CODE;
                break;
            }
            if (r == PY_OK) {
                tmpl_call_append(calls, p->n_calls++, name, args);
                free(name);
                tmpl_buf_set(&p->acc, a + end, len - end);
                p->state = LL_AFTER_CALL;
            } else {  // malformed: text, tag and all
                rc |= buf_append(content, LL_TAG, strlen(LL_TAG));
                p->state = LL_TEXT;
            }
        } else if (p->state == LL_AFTER_CALL) {
            tmpl_buf_set(&p->acc, a + w, len - w);
            if (w == len)
                break;
            p->state = LL_TEXT;
        } else {  // LL_CODE: all of it, at the end
            break;
        }
    }
    return rc ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
}

static int ll_finish(void *vp, struct buf *content, json_t *calls, struct err *e)
{
    struct ll_parser *p = vp;
    if (p->state == LL_JSON) {
        size_t from = json_array_size(calls);
        int rc = template_tool_parser_finish(p->json, content, calls);
        renumber(p, calls, from);
        return rc ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
    }
    const char *a = p->acc.data ? p->acc.data : "";
    size_t len = p->acc.len, w = tmpl_skip_space(a, len);
    int rc = 0;
    if (p->state == LL_START || p->state == LL_TEXT) {
        rc = buf_append(content, a, len);
    } else if (p->state == LL_CODE) {
        rc = code_call(p, a, len, content, calls);
    } else if (p->state == LL_AFTER_TAG && w < len) {
        char *name;
        json_t *args;
        size_t end;
        bool head;
        // add has taken every complete call and all that is no NAME.call(
        int r = parse_call(a, len, &name, &args, &end, &head);
        if (r == PY_OK) {
            free(name);
            json_decref(args);
        }
        if (r == PY_MORE && !head)  // a word or two: code
            rc = code_call(p, a + w, len - w, content, calls);
        else  // an unfinished NAME.call(: text
            rc = buf_append(content, LL_TAG, strlen(LL_TAG)) | buf_append(content, a, len);
    }
    buf_reset(&p->acc);
    p->state = LL_AFTER_CALL;
    return rc ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
}

const struct template_call_syntax tmpl_calls_llama_3_x = {
    .create = ll_new,
    .add = ll_add,
    .finish = ll_finish,
    .destroy = ll_free,
};

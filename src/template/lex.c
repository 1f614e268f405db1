// Lexer for Go text/template (templates.md §2): splits the source into text
// and action tokens, applying trim markers and dropping comments. The whole
// source is tokenized up front; the parser walks the array.
#include "template/internal.h"

#include <string.h>

struct lexer {
    const char *src;
    size_t len, pos;
    struct arena *a;
    struct toks *out;
    struct err *e;
    int line;           // line of pos
    size_t line_start;  // offset of the first byte of that line
    bool trim_next;     // the last action ended with " -}}"
    int paren;
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
static bool is_alnum(unsigned char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c >= 0x80;
}

static void advance(struct lexer *l, size_t n)
{
    for (size_t i = 0; i < n && l->pos < l->len; i++) {
        if (l->src[l->pos] == '\n') {
            l->line++;
            l->line_start = l->pos + 1;
        }
        l->pos++;
    }
}

static int lex_err(struct lexer *l, const char *msg, const char *detail)
{
    return err_set(l->e, ERR_FORMAT, "template: :%d:%zu: %s%s", l->line, l->pos - l->line_start,
                   msg, detail ? detail : "");
}

static int emit(struct lexer *l, int type, const char *s, size_t n, int line, int col)
{
    struct toks *t = l->out;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
    }
    t->v[t->n++] = (struct tok){.type = type, .s = s, .n = n, .line = line, .col = col};
    return 0;
}

static bool starts(const struct lexer *l, size_t at, const char *p)
{
    size_t n = strlen(p);
    return at + n <= l->len && memcmp(l->src + at, p, n) == 0;
}

// " -}}" (any blank before the minus) or "}}" at pos; *trim says which.
static bool at_right_delim(const struct lexer *l, bool *trim)
{
    if (l->pos + 4 <= l->len && is_space(l->src[l->pos]) && starts(l, l->pos + 1, "-}}")) {
        *trim = true;
        return true;
    }
    *trim = false;
    return starts(l, l->pos, "}}");
}

// Text up to the next "{{" (or the end).
static int lex_text(struct lexer *l)
{
    const char *p = l->src + l->pos;
    const char *end = l->src + l->len;
    const char *d = NULL;
    for (const char *q = p; q + 1 < end; q++)
        if (q[0] == '{' && q[1] == '{') {
            d = q;
            break;
        }
    size_t n = (d ? d : end) - p;
    int line = l->line, col = (int)(l->pos - l->line_start);
    size_t s = 0, t = n;
    if (l->trim_next)
        while (s < t && is_space(p[s]))
            s++;
    if (d && d + 3 < end && d[2] == '-' && is_space(d[3]))
        while (t > s && is_space(p[t - 1]))
            t--;
    l->trim_next = false;
    if (t > s) {
        // position of the first kept byte
        size_t save_pos = l->pos;
        int save_line = l->line;
        size_t save_ls = l->line_start;
        advance(l, s);
        emit(l, T_TEXT, p + s, t - s, l->line, (int)(l->pos - l->line_start));
        l->pos = save_pos, l->line = save_line, l->line_start = save_ls;
        (void)line, (void)col;
    }
    advance(l, n);
    return d ? 1 : 0;
}

static int lex_comment(struct lexer *l)
{
    // at "/*"
    const char *p = l->src + l->pos + 2;
    const char *end = l->src + l->len;
    const char *c = NULL;
    for (const char *q = p; q + 1 < end; q++)
        if (q[0] == '*' && q[1] == '/') {
            c = q;
            break;
        }
    if (!c)
        return lex_err(l, "unclosed comment", NULL);
    advance(l, (size_t)(c + 2 - (l->src + l->pos)));
    bool trim;
    if (!at_right_delim(l, &trim))
        return lex_err(l, "comment ends before closing delimiter", NULL);
    advance(l, trim ? 4 : 2);
    l->trim_next = trim;
    return 0;
}

// The value of a one-letter escape (Go's \a \b \f \n \r \t \v \\ and the
// quote the literal is in); -1 for any other letter.
static int simple_escape(char c, char quote)
{
    static const char from[] = "abfnrtv\\", to[] = {7, 8, 12, 10, 13, 9, 11, '\\'};
    const char *p = c ? strchr(from, c) : NULL;
    if (p)
        return to[p - from];
    return (c == '"' || c == '\'') && c == quote ? c : -1;
}

// \xHH (a byte), \uHHHH and \UHHHHHHHH (a code point, encoded as UTF-8).
static size_t hex_escape(const char *s, size_t n, char *o, size_t *on, uint32_t *cp)
{
    char c = s[0];
    size_t k = c == 'x' ? 2 : c == 'u' ? 4 : 8;
    uint32_t v = 0;
    if (n < 1 + k)
        return 0;
    for (size_t i = 1; i <= k; i++) {
        int h = hex_digit(s[i]);
        if (h < 0)
            return 0;
        v = v * 16 + (uint32_t)h;
    }
    *cp = v;
    if (c == 'x') {
        o[0] = (char)v;
        *on = 1;
        return 3;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v < 0xE000))
        return 0;
    *on = utf8_encode(v, o);
    return 1 + k;
}

// \OOO: three octal digits, a byte.
static size_t octal_escape(const char *s, size_t n, char *o, size_t *on, uint32_t *cp)
{
    uint32_t v = 0;
    if (n < 3)
        return 0;
    for (int i = 0; i < 3; i++) {
        if (s[i] < '0' || s[i] > '7')
            return 0;
        v = v * 8 + (uint32_t)(s[i] - '0');
    }
    if (v > 255)
        return 0;
    o[0] = (char)v;
    *on = 1;
    *cp = v;
    return 3;
}

// Decodes one escape at s (after the backslash) into o; returns bytes consumed
// from s or 0 on a bad escape. *cp receives the code point / byte value.
static size_t unescape(const char *s, size_t n, char quote, char *o, size_t *on, uint32_t *cp)
{
    if (n == 0)
        return 0;
    char c = s[0];
    if (c == 'x' || c == 'u' || c == 'U')
        return hex_escape(s, n, o, on, cp);
    if (c >= '0' && c <= '7')
        return octal_escape(s, n, o, on, cp);
    int v = simple_escape(c, quote);
    if (v < 0)
        return 0;
    o[0] = (char)v;
    *on = 1;
    *cp = (uint32_t)v;
    return 1;
}

static int lex_quote(struct lexer *l)
{
    int line = l->line, col = (int)(l->pos - l->line_start);
    size_t i = l->pos + 1;
    // the decoded string is never longer than the quoted source
    size_t q = i;
    while (q < l->len && l->src[q] != '"' && l->src[q] != '\n')
        q += l->src[q] == '\\' ? 2 : 1;
    char *o = arena_alloc(l->a, (q < l->len ? q : l->len) - l->pos + 1);
    if (!o)
        return err_set(l->e, ERR_TOO_LARGE, "template too large");
    size_t on = 0;
    for (;;) {
        if (i >= l->len || l->src[i] == '\n')
            return lex_err(l, "unterminated quoted string", NULL);
        char c = l->src[i];
        if (c == '"')
            break;
        if (c == '\\') {
            size_t k, w;
            uint32_t cp;
            k = unescape(l->src + i + 1, l->len - i - 1, '"', o + on, &w, &cp);
            if (!k) {
                advance(l, i - l->pos);
                return lex_err(l, "invalid syntax in quoted string", NULL);
            }
            on += w;
            i += 1 + k;
            continue;
        }
        o[on++] = c;
        i++;
    }
    o[on] = 0;
    emit(l, T_STRING, o, on, line, col);
    advance(l, i + 1 - l->pos);
    return 0;
}

static int lex_raw(struct lexer *l)
{
    int line = l->line, col = (int)(l->pos - l->line_start);
    const char *p = l->src + l->pos + 1;
    const char *end = memchr(p, '`', l->len - l->pos - 1);
    if (!end)
        return lex_err(l, "unterminated raw quoted string", NULL);
    char *o = arena_alloc(l->a, (size_t)(end - p) + 1);
    if (!o)
        return err_set(l->e, ERR_TOO_LARGE, "template too large");
    size_t on = 0;
    for (const char *q = p; q < end; q++)
        if (*q != '\r')
            o[on++] = *q;
    o[on] = 0;
    emit(l, T_STRING, o, on, line, col);
    advance(l, (size_t)(end + 1 - (l->src + l->pos)));
    return 0;
}

// A rune as Go's utf8.DecodeRune reads it: U+FFFD and width 1 for a byte that
// starts no valid sequence.
static uint32_t decode_rune(const unsigned char *s, size_t n, size_t *w)
{
    uint32_t cp = utf8_decode(s, n, w);
    return cp == UTF8_INVALID ? 0xFFFD : cp;
}

static int lex_char(struct lexer *l)
{
    int line = l->line, col = (int)(l->pos - l->line_start);
    size_t i = l->pos + 1;
    uint32_t cp;
    if (i >= l->len || l->src[i] == '\n' || l->src[i] == '\'')
        return lex_err(l, "unterminated character constant", NULL);
    if (l->src[i] == '\\') {
        char tmp[4];
        size_t w;
        size_t k = unescape(l->src + i + 1, l->len - i - 1, '\'', tmp, &w, &cp);
        if (!k)
            return lex_err(l, "invalid syntax in character constant", NULL);
        i += 1 + k;
    } else {
        size_t w;
        cp = decode_rune((const unsigned char *)l->src + i, l->len - i, &w);
        i += w;
    }
    if (i >= l->len || l->src[i] != '\'')
        return lex_err(l, "unterminated character constant", NULL);
    emit(l, T_CHAR, l->src + l->pos, i + 1 - l->pos, line, col);
    l->out->v[l->out->n - 1].num = cp;
    advance(l, i + 1 - l->pos);
    return 0;
}

static size_t accept_run(const struct lexer *l, size_t i, const char *set)
{
    while (i < l->len && l->src[i] && strchr(set, l->src[i]))
        i++;
    return i;
}

static int lex_number(struct lexer *l)
{
    int line = l->line, col = (int)(l->pos - l->line_start);
    size_t i = l->pos;
    if (i < l->len && (l->src[i] == '+' || l->src[i] == '-'))
        i++;
    const char *digits = "0123456789_";
    bool hex = false;
    if (i + 1 < l->len && l->src[i] == '0') {
        char c = l->src[i + 1];
        if (c == 'x' || c == 'X') {
            i += 2, digits = "0123456789abcdefABCDEF_", hex = true;
        } else if (c == 'o' || c == 'O') {
            i += 2, digits = "01234567_";
        } else if (c == 'b' || c == 'B') {
            i += 2, digits = "01_";
        }
    }
    i = accept_run(l, i, digits);
    if (i < l->len && l->src[i] == '.')
        i = accept_run(l, i + 1, digits);
    if (!hex && strlen(digits) == 11 && i < l->len && (l->src[i] == 'e' || l->src[i] == 'E')) {
        i++;
        if (i < l->len && (l->src[i] == '+' || l->src[i] == '-'))
            i++;
        i = accept_run(l, i, "0123456789_");
    }
    if (hex && i < l->len && (l->src[i] == 'p' || l->src[i] == 'P')) {
        i++;
        if (i < l->len && (l->src[i] == '+' || l->src[i] == '-'))
            i++;
        i = accept_run(l, i, "0123456789_");
    }
    if (i < l->len && l->src[i] == 'i')
        i++;
    if (i < l->len && is_alnum((unsigned char)l->src[i])) {
        size_t j = i;
        while (j < l->len && is_alnum((unsigned char)l->src[j]))
            j++;
        char q[80];
        snprintf(q, sizeof(q), "%.*s", (int)(j - l->pos > 60 ? 60 : j - l->pos), l->src + l->pos);
        return lex_err(l, "bad number syntax: ", q);
    }
    emit(l, T_NUMBER, l->src + l->pos, i - l->pos, line, col);
    advance(l, i - l->pos);
    return 0;
}

static bool at_terminator(const struct lexer *l, size_t i)
{
    if (i >= l->len)
        return true;
    char c = l->src[i];
    if (is_space(c) || c == '.' || c == ',' || c == '|' || c == ':' || c == ')' || c == '(' ||
        c == '=')
        return true;
    return i + 1 < l->len && c == '}' && l->src[i + 1] == '}';
}

static const struct {
    const char *word;
    int type;
} keywords[] = {
    {"if", T_IF},
    {"else", T_ELSE},
    {"end", T_END},
    {"range", T_RANGE},
    {"with", T_WITH},
    {"break", T_BREAK},
    {"continue", T_CONTINUE},
    {"define", T_DEFINE},
    {"template", T_TEMPLATE},
    {"block", T_BLOCK},
    {"nil", T_NIL},
    {"true", T_BOOL},
    {"false", T_BOOL},
};

static int lex_word(struct lexer *l, int kind)  // kind: T_IDENT, T_FIELD, T_VAR
{
    int line = l->line, col = (int)(l->pos - l->line_start);
    size_t i = l->pos + (kind == T_IDENT ? 0 : 1);
    size_t s = i;
    while (i < l->len && is_alnum((unsigned char)l->src[i]))
        i++;
    if (!at_terminator(l, i)) {
        advance(l, i - l->pos);
        char q[16];
        snprintf(q, sizeof(q), "%c", l->src[i]);
        return lex_err(l, "bad character ", q);
    }
    if (kind == T_FIELD && i == s) {
        emit(l, T_DOT, l->src + l->pos, 1, line, col);
    } else if (kind == T_VAR) {
        emit(l, T_VAR, l->src + l->pos, i - l->pos, line, col);
    } else if (kind == T_FIELD) {
        emit(l, T_FIELD, l->src + s, i - s, line, col);
    } else {
        int type = T_IDENT;
        for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
            if (strlen(keywords[k].word) == i - s && !memcmp(keywords[k].word, l->src + s, i - s))
                type = keywords[k].type;
        emit(l, type, l->src + s, i - s, line, col);
        if (type == T_BOOL)
            l->out->v[l->out->n - 1].num = l->src[s] == 't';
    }
    advance(l, i - l->pos);
    return 0;
}

// "}}" or " -}}" ends the action: true when it did (*rc set).
static bool lex_action_end(struct lexer *l, int *rc)
{
    bool trim;
    if (!at_right_delim(l, &trim))
        return false;
    if (l->paren > 0) {
        *rc = lex_err(l, "unclosed left paren", NULL);
        return true;
    }
    if (trim)
        advance(l, 1);  // the blank before "-}}"
    emit(l, T_RDELIM, l->src + l->pos, trim ? 3 : 2, l->line, (int)(l->pos - l->line_start));
    advance(l, trim ? 3 : 2);
    l->trim_next = trim;
    *rc = 0;
    return true;
}

// A run of blanks, stopping before a blank that starts " -}}".
static void lex_spaces(struct lexer *l, int line, int col)
{
    size_t i = l->pos;
    while (i < l->len && is_space(l->src[i]) && !(i + 4 <= l->len && starts(l, i + 1, "-}}")))
        i++;
    if (i == l->pos)
        i++;  // unreachable: at_right_delim handled " -}}"
    emit(l, T_SPACE, l->src + l->pos, i - l->pos, line, col);
    advance(l, i - l->pos);
}

// One-character punctuation and ":=": emitted here; false for other input.
static bool lex_punct(struct lexer *l, char c, int line, int col, int *rc)
{
    int type;
    size_t n = 1;
    *rc = 0;
    switch (c) {
    case '=':
        type = T_ASSIGN;
        break;
    case ':':
        if (!starts(l, l->pos, ":=")) {
            *rc = lex_err(l, "expected :=", NULL);
            return true;
        }
        type = T_DECLARE;
        n = 2;
        break;
    case '|':
        type = T_PIPE;
        break;
    case '(':
        l->paren++;
        type = T_LPAREN;
        break;
    case ')':
        if (--l->paren < 0) {
            *rc = lex_err(l, "unexpected right paren", NULL);
            return true;
        }
        type = T_RPAREN;
        break;
    case ',':
        type = T_COMMA;
        break;
    default:
        return false;
    }
    emit(l, type, l->src + l->pos, n, line, col);
    advance(l, n);
    return true;
}

static int lex_bad_char(struct lexer *l, char c)
{
    char q[32];
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        snprintf(q, sizeof(q), "U+%04X", (unsigned char)c);
    else
        snprintf(q, sizeof(q), "U+%04X '%c'", (unsigned char)c, c);
    return lex_err(l, "unrecognized character in action: ", q);
}

// Literals and names: strings, raw strings, chars, numbers, $vars, .fields, identifiers.
static int lex_operand(struct lexer *l, char c)
{
    if (c == '"')
        return lex_quote(l);
    if (c == '`')
        return lex_raw(l);
    if (c == '$')
        return lex_word(l, T_VAR);
    if (c == '\'')
        return lex_char(l);
    if (c == '.') {
        if (l->pos + 1 < l->len && l->src[l->pos + 1] >= '0' && l->src[l->pos + 1] <= '9')
            return lex_number(l);
        return lex_word(l, T_FIELD);
    }
    if (c == '+' || c == '-' || (c >= '0' && c <= '9'))
        return lex_number(l);
    if (is_alnum((unsigned char)c))
        return lex_word(l, T_IDENT);
    return lex_bad_char(l, c);
}

static int lex_action(struct lexer *l)
{
    for (;;) {
        int rc = 0;
        if (lex_action_end(l, &rc))
            return rc;
        if (l->pos >= l->len)
            return lex_err(l, "unclosed action", NULL);
        char c = l->src[l->pos];
        int line = l->line, col = (int)(l->pos - l->line_start);
        if (is_space(c))
            lex_spaces(l, line, col);
        else if (!lex_punct(l, c, line, col, &rc))
            rc = lex_operand(l, c);
        if (rc)
            return rc;
    }
}

int tmpl_lex(const char *src, size_t len, struct arena *a, struct toks *out, struct err *e)
{
    struct lexer l = {.src = src, .len = len, .a = a, .out = out, .e = e, .line = 1};
    for (;;) {
        if (!lex_text(&l))
            break;
        // at "{{"
        int line = l.line, col = (int)(l.pos - l.line_start);
        advance(&l, 2);
        if (l.pos + 1 < l.len && l.src[l.pos] == '-' && is_space(l.src[l.pos + 1]))
            advance(&l, 2);
        l.paren = 0;
        if (starts(&l, l.pos, "/*")) {
            int rc = lex_comment(&l);
            if (rc)
                return rc;
            continue;
        }
        emit(&l, T_LDELIM, src + l.pos, 0, line, col);
        int rc = lex_action(&l);
        if (rc)
            return rc;
    }
    emit(&l, T_EOF, src + len, 0, l.line, (int)(l.pos - l.line_start));
    return 0;
}

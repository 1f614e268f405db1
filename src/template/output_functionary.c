// Functionary v3.2's tool calls, read as llama.cpp's functionary v3.2
// handler reads them (common/chat.cpp). A reply is a list of segments, each a
// recipient line and its text:
//
//   all\nText for the user.       content
//   NAME\n{"arg": 1}              a call of NAME with that JSON object
//   python\nprint(1)              a call of python with the code, to the end
//
// The prompt ends in ">>>", so the first segment comes without it and every
// later one starts with ">>>". A first segment that is none of these is
// content, and so is a ">>>" not followed by a recipient line. White space
// between a call and the next segment, and before a call's ">>>", is dropped.
#include "template/internal.h"

#include <stdlib.h>
#include <string.h>

#define FN_MARK     ">>>"
#define FN_MAX_NAME 256  // a longer first word is text, not a recipient

enum {
    FN_HEAD,   // reading a recipient line
    FN_ARGS,   // reading a call's JSON object
    FN_CODE,   // python's code: the rest of the reply
    FN_AFTER,  // white space after a call
    FN_TEXT,   // content, until the next ">>>"
};

struct fn_parser {
    int state;
    bool first;        // the first segment (no ">>>" before it)
    struct buf acc;    // text not yet resolved
    struct buf space;  // white space before a ">>>": content unless a call follows
    struct buf head;   // what the recipient line took (">>>", NAME "\n"): content if no call
    char *name;        // FN_ARGS, FN_CODE: the recipient
    int n_calls;
};

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static void *fn_new(json_t *tools)
{
    (void)tools;  // any recipient is a call, as in llama.cpp
    struct fn_parser *p = xcalloc(1, sizeof(*p));
    p->state = FN_HEAD;
    p->first = true;
    buf_init(&p->acc, 0);
    buf_init(&p->space, 0);
    buf_init(&p->head, 0);
    return p;
}

static void fn_free(void *vp)
{
    struct fn_parser *p = vp;
    if (!p)
        return;
    buf_deinit(&p->acc);
    buf_deinit(&p->space);
    buf_deinit(&p->head);
    free(p->name);
    free(p);
}

// The recipient line was not one: what it took goes back to content.
static int give_back_head(struct fn_parser *p, struct buf *content)
{
    int rc = buf_append(content, p->space.data, p->space.len);
    rc |= buf_append(content, p->head.data, p->head.len);
    buf_reset(&p->space);
    buf_reset(&p->head);
    p->state = FN_TEXT;
    return rc;
}

// The steps of the parser, one per state, on the text held: 1 = go on, 0 =
// wait for more, < 0 = too large.

// A segment's head: "all\n" (text follows), "NAME\n{" (a JSON call) or
// "python\n" (code to the end); anything else is given back as text.
static int fn_head(struct fn_parser *p, struct buf *content)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t len = p->acc.len;
    int rc = 0;
    if (p->first && !p->head.len) {  // the model may repeat the prompt's ">>>"
        size_t ml = strlen(FN_MARK), have = len < ml ? len : ml;
        if (!memcmp(a, FN_MARK, have)) {
            if (have < ml)
                return 0;
            rc |= buf_append(&p->head, a, ml);
            tmpl_buf_set(&p->acc, a + ml, len - ml);
            return rc ? -1 : 1;
        }
    }
    size_t i = 0;
    while (i < len && i <= FN_MAX_NAME && is_word(a[i]))
        i++;
    if (i == len && i <= FN_MAX_NAME)
        return 0;
    if (i == 0 || i > FN_MAX_NAME || a[i] != '\n')
        return give_back_head(p, content) ? -1 : 1;
    if (i == 3 && !memcmp(a, "all", 3)) {
        rc |= buf_append(content, p->space.data, p->space.len);
        buf_reset(&p->space);
        buf_reset(&p->head);
        tmpl_buf_set(&p->acc, a + 4, len - 4);
        p->state = FN_TEXT;
        return rc ? -1 : 1;
    }
    if (i + 1 == len)
        return 0;  // the next byte tells a call from text
    bool json = a[i + 1] == '{', python = i == 6 && !memcmp(a, "python", 6);
    if (!json && !python)
        return give_back_head(p, content) ? -1 : 1;
    free(p->name);
    p->name = xstrndup(a, i);
    rc |= buf_append(&p->head, a, i + 1);
    tmpl_buf_set(&p->acc, a + i + 1, len - i - 1);
    p->state = json ? FN_ARGS : FN_CODE;
    return rc ? -1 : 1;
}

// A call's JSON arguments, once the object is complete.
static int fn_args(struct fn_parser *p, struct buf *content, json_t *calls)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t len = p->acc.len;
    size_t span = tmpl_object_span(a, len);
    if (!span)
        return 0;
    json_t *args = json_loadb(a, span, 0, NULL);
    if (!json_is_object(args)) {  // not JSON after all: the segment is text
        json_decref(args);
        return give_back_head(p, content) ? -1 : 1;
    }
    tmpl_call_append(calls, p->n_calls++, p->name, args);
    buf_reset(&p->space);
    buf_reset(&p->head);
    tmpl_buf_set(&p->acc, a + span, len - span);
    p->state = FN_AFTER;
    return 1;
}

// White space after a call.
static int fn_after(struct fn_parser *p)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t len = p->acc.len;
    size_t w = tmpl_skip_space(a, len);
    tmpl_buf_set(&p->acc, a + w, len - w);
    if (w == len)
        return 0;
    p->state = FN_TEXT;
    return 1;
}

// Text up to the next ">>>" (white space before it held back).
static int fn_text(struct fn_parser *p, struct buf *content)
{
    const char *a = p->acc.data ? p->acc.data : "";
    size_t len = p->acc.len;
    int rc = 0;
    const char *t = tmpl_find(a, len, FN_MARK);
    size_t stop = t ? (size_t)(t - a) : len - tmpl_partial_suffix(a, len, FN_MARK);
    size_t k = stop;
    while (k > 0 && tmpl_is_space(a[k - 1]))
        k--;  // held: dropped if a call follows
    rc |= buf_append(content, a, k);
    if (!t) {
        tmpl_buf_set(&p->acc, a + k, len - k);
        return rc ? -1 : 0;
    }
    size_t ml = strlen(FN_MARK);
    rc |= buf_append(&p->space, a + k, stop - k);
    rc |= buf_append(&p->head, FN_MARK, ml);
    tmpl_buf_set(&p->acc, a + stop + ml, len - stop - ml);
    p->first = false;
    p->state = FN_HEAD;
    return rc ? -1 : 1;
}

static int fn_step(struct fn_parser *p, struct buf *content, json_t *calls)
{
    switch (p->state) {
    case FN_HEAD:
        return fn_head(p, content);
    case FN_ARGS:
        return fn_args(p, content, calls);
    case FN_AFTER:
        return fn_after(p);
    case FN_TEXT:
        return fn_text(p, content);
    default:  // FN_CODE: all of it, at the end
        return 0;
    }
}

static int fn_add(void *vp, const char *s, size_t n, struct buf *content, json_t *calls,
                  struct err *e)
{
    struct fn_parser *p = vp;
    if (buf_append(&p->acc, s, n))
        return err_set(e, ERR_TOO_LARGE, "tool call output too large");
    int r;
    while ((r = fn_step(p, content, calls)) > 0)
        ;
    return r < 0 ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
}

static int fn_finish(void *vp, struct buf *content, json_t *calls, struct err *e)
{
    struct fn_parser *p = vp;
    int rc = 0;
    switch (p->state) {
    case FN_CODE: {
        json_t *code = json_stringn(p->acc.data ? p->acc.data : "", p->acc.len);
        if (!code) {  // not UTF-8: leave it as text
            rc |= buf_append(content, p->space.data, p->space.len);
            rc |= buf_append(content, p->head.data, p->head.len);
            rc |= buf_append(content, p->acc.data, p->acc.len);
            break;
        }
        json_t *args = json_object();
        json_object_set_new(args, "code", code);
        tmpl_call_append(calls, p->n_calls++, p->name, args);
        break;
    }
    case FN_HEAD:
    case FN_ARGS:  // an unfinished recipient line or object is text
        rc |= buf_append(content, p->space.data, p->space.len);
        rc |= buf_append(content, p->head.data, p->head.len);
        rc |= buf_append(content, p->acc.data, p->acc.len);
        break;
    case FN_TEXT:
        rc |= buf_append(content, p->acc.data, p->acc.len);
        break;
    default:
        break;
    }
    buf_reset(&p->acc);
    buf_reset(&p->space);
    buf_reset(&p->head);
    p->state = FN_AFTER;
    return rc ? err_set(e, ERR_TOO_LARGE, "output too large") : 0;
}

const struct template_call_syntax tmpl_calls_functionary_v3_2 = {
    .create = fn_new,
    .add = fn_add,
    .finish = fn_finish,
    .destroy = fn_free,
};

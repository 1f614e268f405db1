// Helpers shared by the renderer unit tests (test_renderer*.c): feeding
// generated text to a parser in pieces and reading back content, thinking
// and calls. The includer defines J(text), its notation for test JSON.
#pragma once

#include <string.h>

#include "renderer/renderer.h"

static json_t *J(const char *text);

// The result of feeding pieces to a parser, done on the last one.
struct parsed {
    struct buf content, thinking;
    json_t *calls;
    int rc;
    struct err e;
};

// n pieces of lens[i] bytes each.
static inline void parse_pieces(struct parsed *r, const char *name, const char *tools,
                                const char *last, const struct renderer_think *think,
                                const char *const *pieces, const size_t *lens, size_t n)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->content, 0);
    buf_init(&r->thinking, 0);
    r->calls = json_array();
    json_t *t = tools ? J(tools) : NULL;
    json_t *l = last ? J(last) : NULL;
    struct renderer_parser *p = NULL;
    assert_int_equal(renderer_parser_new(&p, name, t, l, think, &r->e), 0);
    for (size_t i = 0; i < n && r->rc == 0; i++)
        r->rc = renderer_parser_add(p, pieces[i], lens ? lens[i] : strlen(pieces[i]), i + 1 == n,
                                    &r->content, &r->thinking, r->calls, &r->e);
    renderer_parser_free(p);
    json_decref(t);
    json_decref(l);
}

// Pieces as a NULL-terminated list of strings.
static inline void parse_steps(struct parsed *r, const char *name, const char *tools,
                               const char *last, const struct renderer_think *think,
                               const char *const *pieces)
{
    size_t n = 0;
    while (pieces[n])
        n++;
    parse_pieces(r, name, tools, last, think, pieces, NULL, n);
}

static inline void parsed_deinit(struct parsed *r)
{
    buf_deinit(&r->content);
    buf_deinit(&r->thinking);
    json_decref(r->calls);
}

// Calls without their random ids ("call_" and 8 characters), as compact JSON.
static inline char *calls_text(json_t *calls)
{
    json_t *c = json_deep_copy(calls);
    size_t i;
    json_t *call;
    json_array_foreach(c, i, call)
    {
        const char *id = json_string_value(json_object_get(call, "id"));
        assert_non_null(id);
        assert_int_equal(strlen(id), 13);
        assert_memory_equal(id, "call_", 5);
        json_object_del(call, "id");
    }
    char *s = json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(c);
    return s;
}

#define ASSERT_CALLS(calls, want)                                                                  \
    do {                                                                                           \
        char *got_ = calls_text(calls);                                                            \
        assert_string_equal(got_, want);                                                           \
        free(got_);                                                                                \
    } while (0)

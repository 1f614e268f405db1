// JSON helpers shared by the API translation tests (OpenAI, Anthropic,
// Responses): parse a literal, run a request translation and expect success
// or an exact error, compare a value with the JSON it should serialise to.
// Include after <cmocka.h> (the helpers fail the test with fail_msg).
#pragma once

#include <stdlib.h>
#include <string.h>

#include "json/json.h"

// A request translation: client body -> native body, or NULL with e set.
typedef json_t *(*jsontest_convert_fn)(const json_t *body, struct err *e);

// The parsed literal; the caller owns it. Bad test JSON fails the test.
static inline json_t *jsontest_parse(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (jsonx_parse(s, strlen(s), &v, &e) < 0)
        fail_msg("bad test JSON: %s: %s", e.msg, s);
    return v;
}

// The native body fn makes of body; the caller owns it. Failure fails the test.
static inline json_t *jsontest_convert(jsontest_convert_fn fn, const char *body)
{
    json_t *b = jsontest_parse(body);
    struct err e = {0};
    json_t *n = fn(b, &e);
    if (!n)
        fail_msg("request failed: %s", e.msg);
    json_decref(b);
    return n;
}

// Asserts that fn rejects body with exactly msg.
static inline void jsontest_convert_fails(jsontest_convert_fn fn, const char *body, const char *msg)
{
    json_t *b = jsontest_parse(body);
    struct err e = {0};
    json_t *n = fn(b, &e);
    if (n || strcmp(e.msg, msg) != 0)
        fail_msg("%s: want error \"%s\", got \"%s\"", body, msg, e.msg);
    json_decref(b);
}

// Asserts that v serialises (keys sorted) to want.
static inline void jsontest_eq(const json_t *v, const char *want)
{
    char *got = json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT);
    json_t *w = jsontest_parse(want);
    char *wants = json_dumps(w, JSON_SORT_KEYS | JSON_COMPACT);
    if (strcmp(got, wants) != 0)
        fail_msg("got  %s\nwant %s", got, wants);
    free(got);
    free(wants);
    json_decref(w);
}

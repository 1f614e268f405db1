// Unit tests of the laguna / poolside-v1 and glimmer renderers and parsers:
// the prompts and parses that Ollama's Go tests pin down
// (model/renderers/laguna_test.go, glimmer_test.go,
// glimmer_reference_test.go, model/parsers/laguna_test.go,
// glimmer_test.go), plus streaming split at every byte.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "renderer/renderer.h"
#include "testutil.h"

static json_t *J(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    if (!v)
        fail_msg("bad test JSON (%s): %s", je.text, text);
    return v;
}

// think: -1 not set, 0 false, 1 true, or a level through think_level.
static struct renderer_think think_of(int think, const char *level)
{
    struct renderer_think t = {0};
    if (level) {
        t.set = t.on = true;
        t.level = level;
    } else if (think >= 0) {
        t.set = true;
        t.on = think == 1;
    }
    return t;
}

static char *render(const char *name, const char *msgs, const char *tools, int think)
{
    json_t *m = J(msgs);
    json_t *t = tools ? J(tools) : NULL;
    struct renderer_think th = think_of(think, NULL);
    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    int rc = renderer_render(name, m, t, think >= 0 ? &th : NULL, &out, &e);
    if (rc < 0)
        fail_msg("render %s: %s", name, e.msg);
    json_decref(m);
    json_decref(t);
    return buf_take(&out);
}

// The result of feeding pieces to a parser, done on the last one.
struct parsed {
    struct buf content, thinking;
    json_t *calls;
    int rc;
    struct err e;
};

static void parse_pieces(struct parsed *r, const char *name, const char *tools, const char *last,
                         const struct renderer_think *think, const char *const *pieces,
                         const size_t *lens, size_t n)
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
        r->rc = renderer_parser_add(p, pieces[i], lens[i], i + 1 == n, &r->content, &r->thinking,
                                    r->calls, &r->e);
    renderer_parser_free(p);
    json_decref(t);
    json_decref(l);
}

// Pieces as a NULL-terminated list of strings.
static void parse_steps(struct parsed *r, const char *name, const char *tools, const char *last,
                        const struct renderer_think *think, const char *const *pieces)
{
    size_t n = 0, lens[16];
    while (pieces[n]) {
        lens[n] = strlen(pieces[n]);
        n++;
    }
    parse_pieces(r, name, tools, last, think, pieces, lens, n);
}

static void parsed_deinit(struct parsed *r)
{
    buf_deinit(&r->content);
    buf_deinit(&r->thinking);
    json_decref(r->calls);
}

// Calls without their random ids, as compact JSON.
static char *calls_text(json_t *calls)
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

// Parses text in one piece and split in two at every byte; each run must
// give the same content, thinking and calls (want_calls as calls_text
// writes them).
static void expect_every_split(const char *name, const char *tools, const char *last,
                               const struct renderer_think *think, const char *text,
                               const char *want_content, const char *want_thinking,
                               const char *want_calls)
{
    size_t n = strlen(text);
    for (size_t k = 0; k <= n + 1; k++) {
        struct parsed r;
        if (k == n + 1) {
            parse_steps(&r, name, tools, last, think, (const char *[]){text, NULL});
        } else {
            const char *pieces[2] = {text, text + k};
            size_t lens[2] = {k, n - k};
            parse_pieces(&r, name, tools, last, think, pieces, lens, 2);
        }
        if (r.rc != 0)
            fail_msg("%s split at %zu: %s", name, k, r.e.msg);
        if (strcmp(buf_cstr(&r.content), want_content) != 0 ||
            strcmp(buf_cstr(&r.thinking), want_thinking) != 0)
            fail_msg("%s split at %zu: content \"%s\" thinking \"%s\"", name, k,
                     buf_cstr(&r.content), buf_cstr(&r.thinking));
        char *got = calls_text(r.calls);
        if (strcmp(got, want_calls) != 0)
            fail_msg("%s split at %zu: calls %s", name, k, got);
        free(got);
        parsed_deinit(&r);
    }
}

// Expects the parse of text (one piece) to fail with a message holding want.
static void expect_error(const char *name, const char *tools, const char *text, const char *want)
{
    struct parsed r;
    parse_steps(&r, name, tools, NULL, NULL, (const char *[]){text, NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    if (!strstr(r.e.msg, want))
        fail_msg("%s: error \"%s\" lacks \"%s\"", name, r.e.msg, want);
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// Registry

static void test_names(void **state)
{
    (void)state;
    static const char *const names[] = {"laguna", "poolside-v1"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_true(renderer_known(names[i]));
        assert_true(renderer_parser_known(names[i]));
        assert_true(renderer_parser_tools(names[i]));
        assert_true(renderer_parser_thinking(names[i]));
    }
}

// ---------------------------------------------------------------------------
// laguna (v2) renderer (TestLagunaRendererReferenceFlowCoverage)

#define LG_BOS "\xe3\x80\x88|EOS|\xe3\x80\x89"
#define LG_DEFAULT_SYS                                                                             \
    "You are a helpful, conversationally-fluent assistant made by Poolside. You are here to be "   \
    "helpful to users through natural language conversations."
#define LG_HEADER LG_BOS "<system>\n\n" LG_DEFAULT_SYS "\n</system>\n"

static const char lg_weather[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
    "weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"location\"],\"properties\":{"
    "\"location\":{\"type\":\"string\",\"description\":\"City\"}}}}}]";
static const char lg_weather_and_add[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
    "weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"location\"],\"properties\":{"
    "\"location\":{\"type\":\"string\",\"description\":\"City\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"description\":\"Add numbers\","
    "\"parameters\":{\"type\":\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{"
    "\"type\":\"number\",\"description\":\"First number\"},\"b\":{\"type\":\"number\","
    "\"description\":\"Second number\"}}}}}]";

#define LG_TOOL_JSON                                                                               \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get "   \
    "weather\", \"parameters\": {\"type\": \"object\", \"required\": [\"location\"], "             \
    "\"properties\": {\"location\": {\"type\": \"string\", \"description\": \"City\"}}}}}"
#define LG_MATH_JSON                                                                               \
    "{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": \"Add "           \
    "numbers\", "                                                                                  \
    "\"parameters\": {\"type\": \"object\", \"required\": [\"a\", \"b\"], \"properties\": "        \
    "{\"a\": "                                                                                     \
    "{\"type\": \"number\", \"description\": \"First number\"}, \"b\": {\"type\": \"number\", "    \
    "\"description\": \"Second number\"}}}}}"
#define LG_TOOLS_INTRO                                                                             \
    "### Tools\n\nYou may call functions to assist with the user query.\nAll available function "  \
    "signatures are listed below:\n<available_tools>\n"
#define LG_CALL_FORMAT                                                                             \
    "For each function call, return an unescaped XML-like object with function name and "          \
    "arguments within '<tool_call>' and '</tool_call>' tags, like here:\n"
#define LG_CALL_EXAMPLE                                                                            \
    "<tool_call>function-name\n<arg_key>argument-key</arg_key>\n<arg_value>value-of-argument-key"  \
    "</arg_value>\n</tool_call>"

// One prompt case: think -1 not set, 0 off, 1 on.
struct render_case {
    const char *what, *msgs, *tools;
    int think;
    const char *want;
};

static void check_cases(const char *renderer, const struct render_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *got = render(renderer, cases[i].msgs, cases[i].tools, cases[i].think);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("%s %s:\n got: %s\nwant: %s", renderer, cases[i].what, got, cases[i].want);
        free(got);
    }
}

static const char lg_history[] =
    "[{\"role\":\"user\",\"content\":\"Add these.\"},{\"role\":\"assistant\",\"content\":"
    "\"\\nCalling the tool.\\n\",\"thinking\":\"Need addition.\",\"tool_calls\":[{\"function\":{"
    "\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}}]},{\"role\":\"tool\",\"content\":\"5\"},"
    "{\"role\":\"user\",\"content\":\"Thanks\"}]";
static const char lg_mixed_calls[] =
    "[{\"role\":\"user\",\"content\":\"Do calls\"},{\"role\":\"assistant\",\"tool_calls\":["
    "{\"function\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hello\",\"count\":2}}},"
    "{\"function\":{\"name\":\"configure\",\"arguments\":{\"flag\":true,\"options\":{\"mode\":"
    "\"fast\"}}}}]},{\"role\":\"user\",\"content\":\"Done?\"}]";

static void test_laguna_render(void **state)
{
    (void)state;
    const char *hi_sys = "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":"
                         "\"Hi\"}]";
    const struct render_case cases[] = {
        {"empty", "[]", NULL, -1, LG_HEADER "<assistant>\n</think>"},
        {"user", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, -1,
         LG_HEADER "<user>\nHello\n</user>\n<assistant>\n</think>"},
        {"user think", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, 1,
         LG_HEADER "<user>\nHello\n</user>\n<assistant>\n<think>"},
        {"user nothink", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, 0,
         LG_HEADER "<user>\nHello\n</user>\n<assistant>\n</think>"},
        {"first system",
         "[{\"role\":\"system\",\"content\":\"Stay concise.\\n\\n\"},{\"role\":\"user\","
         "\"content\":\"Hi\"}]",
         NULL, -1,
         LG_BOS "<system>\n\nStay concise.\n</system>\n<user>\nHi\n</user>\n<assistant>\n"
                "</think>"},
        {"empty system", hi_sys, NULL, -1, LG_BOS "<user>\nHi\n</user>\n<assistant>\n</think>"},
        {"additional system",
         "[{\"role\":\"system\",\"content\":\"Primary.\"},{\"role\":\"user\",\"content\":\"Hi\"},"
         "{\"role\":\"system\",\"content\":\"Secondary.\"}]",
         NULL, -1,
         LG_BOS "<system>\n\nPrimary.\n</system>\n<user>\nHi\n</user>\n<system>\nSecondary.\n"
                "</system>\n<assistant>\n</think>"},
        {"empty system with tools",
         "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"Weather?\"}]",
         lg_weather, -1,
         LG_BOS "<system>\n\n\n" LG_TOOLS_INTRO LG_TOOL_JSON
                "\n</available_tools>\n\n" LG_CALL_FORMAT LG_CALL_EXAMPLE
                "\n</system>\n<user>\nWeather?\n</user>\n<assistant>\n</think>"},
        {"tools in header, thinking",
         "[{\"role\":\"system\",\"content\":\"Stay concise.\"},{\"role\":\"user\",\"content\":"
         "\"Weather?\"}]",
         lg_weather, 1,
         LG_BOS "<system>\n\nStay concise.\n\n" LG_TOOLS_INTRO LG_TOOL_JSON
                "\n</available_tools>\n\nWrap your thinking in '<think>', '</think>' tags, "
                "followed by a function call. " LG_CALL_FORMAT
                "<think> your thoughts here </think>\n" LG_CALL_EXAMPLE
                "\n</system>\n<user>\nWeather?\n</user>\n<assistant>\n<think>"},
        {"tools default", "[{\"role\":\"user\",\"content\":\"Weather?\"}]", lg_weather, -1,
         LG_BOS "<system>\n\n" LG_DEFAULT_SYS "\n\n" LG_TOOLS_INTRO LG_TOOL_JSON
                "\n</available_tools>\n\n" LG_CALL_FORMAT LG_CALL_EXAMPLE
                "\n</system>\n<user>\nWeather?\n</user>\n<assistant>\n</think>"},
        {"two tools", "[{\"role\":\"user\",\"content\":\"Add then report weather\"}]",
         lg_weather_and_add, -1,
         LG_BOS "<system>\n\n" LG_DEFAULT_SYS "\n\n" LG_TOOLS_INTRO LG_TOOL_JSON "\n" LG_MATH_JSON
                "\n</available_tools>\n\n" LG_CALL_FORMAT LG_CALL_EXAMPLE
                "\n</system>\n<user>\nAdd then report weather\n</user>\n<assistant>\n</think>"},
        {"assistant history", lg_history, NULL, 1,
         LG_HEADER "<user>\nAdd these.\n</user>\n<assistant>\n<think>\nNeed addition.\n</think>\n"
                   "Calling the tool.\n<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2"
                   "</arg_value>\n<arg_key>b</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
                   "</assistant>\n<tool_response>\n5\n</tool_response>\n<user>\nThanks\n</user>\n"
                   "<assistant>\n<think>"},
        {"thinking from content",
         "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"content\":"
         "\"<think>\\nPlan\\n</think>\\nAnswer\\n\\n\"},{\"role\":\"user\",\"content\":"
         "\"Next\"}]",
         NULL, 1,
         LG_HEADER "<user>\nExplain\n</user>\n<assistant>\n<think>\nPlan\n</think>\nAnswer\n"
                   "</assistant>\n<user>\nNext\n</user>\n<assistant>\n<think>"},
        {"thinking field wins",
         "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"thinking\":"
         "\"Use metadata.\",\"content\":\"<think>Ignore this</think>\\nAnswer\"},{\"role\":"
         "\"user\",\"content\":\"Next\"}]",
         NULL, -1,
         LG_HEADER "<user>\nExplain\n</user>\n<assistant>\n<think>\nUse metadata.\n</think>\n"
                   "Answer\n</assistant>\n<user>\nNext\n</user>\n<assistant>\n</think>"},
        {"white space only",
         "[{\"role\":\"user\",\"content\":\"Continue\"},{\"role\":\"assistant\",\"content\":"
         "\" \\n\\t \"},{\"role\":\"user\",\"content\":\"Next\"}]",
         NULL, -1,
         LG_HEADER "<user>\nContinue\n</user>\n<assistant>\n</think>\n</assistant>\n<user>\n"
                   "Next\n</user>\n<assistant>\n</think>"},
        {"mixed arguments", lg_mixed_calls, NULL, -1,
         LG_HEADER "<user>\nDo calls\n</user>\n<assistant>\n</think>\n<tool_call>echo\n<arg_key>"
                   "text</arg_key>\n<arg_value>hello</arg_value>\n<arg_key>count</arg_key>\n"
                   "<arg_value>2</arg_value>\n</tool_call>\n<tool_call>configure\n<arg_key>flag"
                   "</arg_key>\n<arg_value>true</arg_value>\n<arg_key>options</arg_key>\n"
                   "<arg_value>{\"mode\": \"fast\"}</arg_value>\n</tool_call>\n</assistant>\n"
                   "<user>\nDone?\n</user>\n<assistant>\n</think>"},
        // TestLagunaRendererAssistantPrefill: continued in place.
        {"prefill",
         "[{\"role\":\"user\",\"content\":\"Complete this\"},{\"role\":\"assistant\",\"content\":"
         "\"Partial\"}]",
         NULL, -1, LG_HEADER "<user>\nComplete this\n</user>\n<assistant>\n</think>\nPartial\n"},
        // Values that are not strings are Go JSON (HTML-escaped, sorted keys).
        {"argument values",
         "[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{"
         "\"s\":\"<a&b>\",\"n\":null,\"x\":1.5,\"o\":{\"z\":\"<\",\"a\":[1,2]}}}}]},{\"role\":"
         "\"user\",\"content\":\"ok\"}]",
         NULL, -1,
         LG_HEADER "<assistant>\n</think>\n<tool_call>f\n<arg_key>s</arg_key>\n<arg_value><a&b>"
                   "</arg_value>\n<arg_key>n</arg_key>\n<arg_value>null</arg_value>\n<arg_key>x"
                   "</arg_key>\n<arg_value>1.5</arg_value>\n<arg_key>o</arg_key>\n<arg_value>{"
                   "\"a\": [1, 2], \"z\": \"\\u003c\"}</arg_value>\n</tool_call>\n</assistant>\n"
                   "<user>\nok\n</user>\n<assistant>\n</think>"},
    };
    check_cases("laguna", cases, sizeof(cases) / sizeof(cases[0]));
}

// ---------------------------------------------------------------------------
// poolside-v1 (v8) renderer (TestLagunaV8RendererReferenceFlowCoverage)

#define V8_HEADER LG_BOS "<system>" LG_DEFAULT_SYS "</system>\n"

static void test_poolside_render(void **state)
{
    (void)state;
    const struct render_case cases[] = {
        {"empty", "[]", NULL, -1, V8_HEADER "<assistant></think>"},
        {"user", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, -1,
         V8_HEADER "<user>Hello</user>\n<assistant></think>"},
        {"user think", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, 1,
         V8_HEADER "<user>Hello</user>\n<assistant><think>"},
        {"user nothink", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, 0,
         V8_HEADER "<user>Hello</user>\n<assistant></think>"},
        {"first system",
         "[{\"role\":\"system\",\"content\":\"Stay concise.\\n\\n\"},{\"role\":\"user\","
         "\"content\":\"Hi\"}]",
         NULL, -1, LG_BOS "<system>Stay concise.</system>\n<user>Hi</user>\n<assistant></think>"},
        {"empty system",
         "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"Hi\"}]", NULL,
         -1, LG_BOS "<user>Hi</user>\n<assistant></think>"},
        {"empty system with tools",
         "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"Weather?\"}]",
         lg_weather, -1,
         LG_BOS "<system>" LG_TOOLS_INTRO LG_TOOL_JSON "\n</available_tools></system>\n<user>"
                "Weather?</user>\n<assistant></think>"},
        {"empty system thinking",
         "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1,
         LG_BOS "<system></system>\n<user>Hi</user>\n<assistant><think>"},
        {"additional system",
         "[{\"role\":\"system\",\"content\":\"Primary.\"},{\"role\":\"user\",\"content\":\"Hi\"},"
         "{\"role\":\"system\",\"content\":\"Secondary.\"}]",
         NULL, -1,
         LG_BOS "<system>Primary.</system>\n<user>Hi</user>\n<system>Secondary.</system>\n"
                "<assistant></think>"},
        {"tools in header",
         "[{\"role\":\"system\",\"content\":\"Stay concise.\"},{\"role\":\"user\",\"content\":"
         "\"Weather?\"}]",
         lg_weather, 1,
         LG_BOS "<system>Stay concise.\n\n" LG_TOOLS_INTRO LG_TOOL_JSON
                "\n</available_tools></system>\n<user>Weather?</user>\n<assistant><think>"},
        {"two tools", "[{\"role\":\"user\",\"content\":\"Add then report weather\"}]",
         lg_weather_and_add, -1,
         LG_BOS "<system>" LG_DEFAULT_SYS "\n\n" LG_TOOLS_INTRO LG_TOOL_JSON "\n" LG_MATH_JSON
                "\n</available_tools></system>\n<user>Add then report weather</user>\n"
                "<assistant></think>"},
        {"assistant history", lg_history, NULL, 1,
         V8_HEADER "<user>Add these.</user>\n<assistant><think>Need addition.</think>\nCalling the "
                   "tool.\n<tool_call>add<arg_key>a</arg_key><arg_value>2</arg_value><arg_key>b"
                   "</arg_key><arg_value>3</arg_value></tool_call></assistant>\n<tool_response>5"
                   "</tool_response>\n<user>Thanks</user>\n<assistant><think>"},
        {"reasoning dropped when off",
         "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"thinking\":"
         "\"Hidden plan.\",\"content\":\"Answer\"},{\"role\":\"user\",\"content\":\"Next\"}]",
         NULL, -1,
         V8_HEADER "<user>Explain</user>\n<assistant></think>Answer</assistant>\n<user>Next</user>"
                   "\n<assistant></think>"},
        {"empty reasoning when on",
         "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"content\":"
         "\"Answer\"},{\"role\":\"user\",\"content\":\"Next\"}]",
         NULL, 1,
         V8_HEADER "<user>Explain</user>\n<assistant><think></think>Answer</assistant>\n<user>Next"
                   "</user>\n<assistant><think>"},
        {"content white space kept",
         "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"content\":"
         "\"\\nAnswer\\n\"},{\"role\":\"user\",\"content\":\"Next\"}]",
         NULL, -1,
         V8_HEADER "<user>Explain</user>\n<assistant></think>\nAnswer\n</assistant>\n<user>Next"
                   "</user>\n<assistant></think>"},
        {"mixed arguments", lg_mixed_calls, NULL, -1,
         V8_HEADER "<user>Do calls</user>\n<assistant></think><tool_call>echo<arg_key>text"
                   "</arg_key><arg_value>hello</arg_value><arg_key>count</arg_key><arg_value>2"
                   "</arg_value></tool_call><tool_call>configure<arg_key>flag</arg_key><arg_value>"
                   "true</arg_value><arg_key>options</arg_key><arg_value>{\"mode\": \"fast\"}"
                   "</arg_value></tool_call></assistant>\n<user>Done?</user>\n<assistant></think>"},
        {"final assistant closed",
         "[{\"role\":\"user\",\"content\":\"Complete this\"},{\"role\":\"assistant\",\"content\":"
         "\"Partial\"}]",
         NULL, -1,
         V8_HEADER "<user>Complete this</user>\n<assistant></think>Partial</assistant>\n"
                   "<assistant></think>"},
    };
    check_cases("poolside-v1", cases, sizeof(cases) / sizeof(cases[0]));
}

// ---------------------------------------------------------------------------
// laguna parser (model/parsers/laguna_test.go)

static const char lg_parse_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{"
    "\"properties\":{\"location\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}}]";
static const char lg_read_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"read\",\"parameters\":{\"properties\":{"
    "\"path\":{\"type\":\"string\"}}}}}]";

#define WEATHER_CALL(args)                                                                         \
    "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":" args "}}]"

// One whole-text parse: content, thinking and calls as expected.
static void expect_parse(const char *name, const char *tools, const char *last, int think,
                         const char *text, const char *content, const char *thinking,
                         const char *calls)
{
    struct renderer_think th = think_of(think, NULL);
    struct parsed r;
    parse_steps(&r, name, tools, last, think >= 0 ? &th : NULL, (const char *[]){text, NULL});
    if (r.rc != 0)
        fail_msg("%s: %s (input %s)", name, r.e.msg, text);
    assert_string_equal(buf_cstr(&r.content), content);
    assert_string_equal(buf_cstr(&r.thinking), thinking);
    ASSERT_CALLS(r.calls, calls);
    parsed_deinit(&r);
}

static void test_laguna_parser(void **state)
{
    (void)state;
    const char *T = lg_parse_tools;
    // XML-like call, arguments typed by the declared schema.
    expect_parse("laguna", T, NULL, -1,
                 "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris"
                 "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
                 "", "", WEATHER_CALL("{\"location\":\"Paris\",\"days\":3}"));
    // JSON call inside <tool_call>.
    expect_parse("laguna", T, NULL, -1,
                 "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\","
                 "\"days\":3}}\n</tool_call>",
                 "", "", WEATHER_CALL("{\"location\":\"Paris\",\"days\":3}"));
    // Bare JSON call, alone and after content.
    expect_parse("laguna", T, NULL, -1,
                 "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\",\"days\":3}}", "",
                 "", WEATHER_CALL("{\"location\":\"Paris\",\"days\":3}"));
    expect_parse("laguna", T, NULL, -1,
                 "Let me call the weather tool.\n{\"name\":\"get_weather\",\"arguments\":{"
                 "\"location\":\"Paris\"}}",
                 "Let me call the weather tool.", "", WEATHER_CALL("{\"location\":\"Paris\"}"));
    // A name line followed by JSON arguments.
    expect_parse("laguna", T, NULL, -1,
                 "<tool_call>get_weather\n{\"location\":\"San Francisco\"}</tool_call>", "", "",
                 WEATHER_CALL("{\"location\":\"San Francisco\"}"));
    // Common aliases map to the declared tool.
    expect_parse("laguna", lg_read_tools, NULL, -1,
                 "<tool_call>\n{\"name\":\"read_file\",\"arguments\":{\"path\":\"./go.mod\"}}\n"
                 "</tool_call>",
                 "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{\"path\":"
                 "\"./go.mod\"}}}]");
    // A repeated nested <tool_call> counts once.
    expect_parse("laguna",
                 "[{\"type\":\"function\",\"function\":{\"name\":\"skill\",\"parameters\":{"
                 "\"properties\":{\"name\":{\"type\":\"string\"}}}}}]",
                 NULL, -1,
                 "<tool_call>skill\n{\"name\":\"git-diff-review\"}\n<tool_call>skill\n{\"name\":"
                 "\"git-diff-review\"}</tool_call>",
                 "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"skill\",\"arguments\":{\"name\":"
                 "\"git-diff-review\"}}}]");
    // Thinking then a call.
    expect_parse("laguna", T, NULL, 1,
                 "<think>Need current weather.</think>\n<tool_call>get_weather\n<arg_key>location"
                 "</arg_key>\n<arg_value>SF</arg_value>\n</tool_call>",
                 "", "Need current weather.", WEATHER_CALL("{\"location\":\"SF\"}"));
    // Calls the model wraps in <user>…</user>.
    expect_parse("laguna", T, NULL, -1,
                 "<user>get_weather\n<arg_key>location</arg_key>\n<arg_value>San Francisco, CA"
                 "</arg_value>\n</user>",
                 "", "", WEATHER_CALL("{\"location\":\"San Francisco, CA\"}"));
    expect_parse("laguna", lg_read_tools, NULL, -1,
                 "I'll read the file for you.\n<user>read\n<arg_key>path</arg_key>\n<arg_value>"
                 "/Users/test/code/myproject/go.mod</arg_value>\n</user>",
                 "I'll read the file for you.", "",
                 "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{\"path\":"
                 "\"/Users/test/code/myproject/go.mod\"}}}]");
    expect_parse("laguna",
                 "[{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"parameters\":{"
                 "\"properties\":{\"command\":{\"type\":\"string\"}}}}}]",
                 NULL, -1,
                 "I'll run git diff for you.<user>\n{\"name\":\"bash\",\"arguments\":{\"command\":"
                 "\"git diff main\"}}\n</user>",
                 "I'll run git diff for you.", "",
                 "[{\"function\":{\"index\":0,\"name\":\"bash\",\"arguments\":{\"command\":"
                 "\"git diff main\"}}}]");
    // <user> around text that is not a call stays content.
    expect_parse("laguna", T, NULL, -1, "<user>hello</user>", "<user>hello</user>", "", "[]");

    // Thinking defaults off: a <think> block is dropped, with or without
    // tools, and a stray </think> at the start is dropped whatever think is.
    expect_parse("laguna", NULL, NULL, -1, "<think>Need to reason.</think>\nDirect answer.",
                 "Direct answer.", "", "[]");
    expect_parse("laguna", T, NULL, -1,
                 "<think>Need to reason.</think>\n<tool_call>get_weather\n<arg_key>location"
                 "</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
                 "", "", WEATHER_CALL("{\"location\":\"Paris\"}"));
    expect_parse("laguna", NULL, NULL, 0, "<think>Hidden?</think>\nDirect answer.",
                 "Direct answer.", "", "[]");
    for (int think = -1; think <= 1; think++)
        expect_parse("laguna", NULL, NULL, think, "</think>\nTokyo\n", "Tokyo", "", "[]");
    // Thinking on: output opens as reasoning (the prompt primed <think>).
    expect_parse("laguna", NULL, NULL, 1, "Direct answer.", "", "Direct answer.", "[]");
    expect_parse("laguna", NULL, NULL, 1, "\nReasoning here.\n</think>\nThe answer.", "The answer.",
                 "Reasoning here.", "[]");
    expect_parse("laguna", NULL, "{\"role\":\"user\",\"content\":\"hi\"}", 1, "Direct answer.", "",
                 "Direct answer.", "[]");
    // An assistant prefill continues as content (v2) ...
    expect_parse("laguna", NULL, "{\"role\":\"assistant\",\"content\":\"The answer is\"}", 1,
                 " 42.", "42.", "", "[]");
    expect_parse("laguna", T, "{\"role\":\"assistant\",\"thinking\":\"earlier reasoning\"}", 1,
                 "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris"
                 "</arg_value>\n</tool_call>",
                 "", "", WEATHER_CALL("{\"location\":\"Paris\"}"));
    // ... while v8 opened a fresh turn: still reasoning first.
    expect_parse("poolside-v1", NULL, "{\"role\":\"assistant\",\"content\":\"Previous.\"}", 1,
                 "Reasoning.</think>Answer.", "Answer.", "Reasoning.", "[]");
    // Leading and trailing white space of content is dropped.
    expect_parse("laguna", NULL, NULL, 0, "\nHello! How can I help?", "Hello! How can I help?", "",
                 "[]");
    expect_parse("laguna", NULL, NULL, 0, "Hello there.\n\n", "Hello there.", "", "[]");
}

static void test_laguna_parser_values(void **state)
{
    (void)state;
    const char *tools =
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":{"
        "\"i\":{\"type\":\"integer\"},\"n\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},"
        "\"a\":{\"type\":\"array\"},\"o\":{\"type\":\"object\"},\"s\":{\"type\":\"string\"},"
        "\"u\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]},\"z\":{\"type\":"
        "[\"null\",\"string\"]}}}}}]";
    expect_parse("laguna", tools, NULL, -1,
                 "<tool_call>f\n<arg_key>i</arg_key>\n<arg_value>\n-7\n</arg_value>\n"
                 "<arg_key>n</arg_key><arg_value>2.5</arg_value>"
                 "<arg_key> b </arg_key>\n<arg_value>TRUE</arg_value>\n"
                 "<arg_key>a</arg_key>\n<arg_value>[1, \"x\"]</arg_value>\n"
                 "<arg_key>o</arg_key>\n<arg_value>{\"k\": {\"v\": 1}}</arg_value>\n"
                 "<arg_key>s</arg_key>\n<arg_value>\n\n two lines \n\n</arg_value>\n"
                 "<arg_key>u</arg_key>\n<arg_value>12</arg_value>\n"
                 "<arg_key>z</arg_key>\n<arg_value>null</arg_value>\n"
                 "<arg_key>extra</arg_key>\n<arg_value>42</arg_value>\n</tool_call>",
                 "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{\"i\":-7,\"n\":2.5,"
                 "\"b\":true,\"a\":[1,\"x\"],\"o\":{\"k\":{\"v\":1}},\"s\":\"\\n two lines \\n\","
                 "\"u\":12,\"z\":null,\"extra\":\"42\"}}}]");
    // A key whose </arg_key> is not followed by a value extends to the next
    // one (the template's regular expression).
    expect_parse("laguna", NULL, NULL, -1,
                 "<tool_call>g<arg_key>x</arg_key>junk</arg_key> <arg_value>1</arg_value>"
                 "</tool_call>",
                 "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"g\",\"arguments\":{"
                 "\"x</arg_key>junk\":\"1\"}}}]");
    // Two calls: indices count up; the text between them is content.
    expect_parse(
        "laguna", lg_parse_tools, NULL, -1,
        "A<tool_call>get_weather<arg_key>days</arg_key><arg_value>1</arg_value>"
        "</tool_call>\nB<tool_call>get_weather</tool_call>",
        "AB", "",
        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"days\":1}}},"
        "{\"function\":{\"index\":1,\"name\":\"get_weather\",\"arguments\":{}}}]");
}

static void test_laguna_parser_streaming(void **state)
{
    (void)state;
    struct renderer_think on = think_of(1, NULL), off = think_of(0, NULL);
    const char *T = lg_parse_tools;
    // Split tags (TestLagunaParserSplitToolTag, ...StreamingUserTagged...).
    struct parsed r;
    parse_steps(&r, "laguna", T, NULL, &on,
                (const char *[]){"<think>Need lookup<tool_c",
                                 "all>get_weather\n<arg_key>location</arg_key>\n<arg_value>SF"
                                 "</arg_value>\n</tool_call>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Need lookup");
    assert_int_equal(json_array_size(r.calls), 1);
    parsed_deinit(&r);
    // Partial markers that turn out to be text are given back.
    parse_steps(&r, "laguna", T, NULL, NULL,
                (const char *[]){"Document literal <tool_call", " fakeout", NULL});
    assert_string_equal(buf_cstr(&r.content), "Document literal <tool_call fakeout");
    parsed_deinit(&r);
    parse_steps(&r, "laguna", T, NULL, &on,
                (const char *[]){"<think>Document literal <tool_c", " fakeout", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "Document literal <tool_c fakeout");
    assert_string_equal(buf_cstr(&r.content), "");
    parsed_deinit(&r);
    const char *prefill = "{\"role\":\"assistant\",\"content\":\"prefill\"}";
    const struct {
        const struct renderer_think *think;
        const char *last;
    } modes[] = {{NULL, NULL}, {&off, NULL}, {&on, prefill}};
    for (size_t i = 0; i < 3; i++) {
        parse_steps(&r, "laguna", NULL, modes[i].last, modes[i].think,
                    (const char *[]){"Document literal <think", " fakeout", NULL});
        assert_string_equal(buf_cstr(&r.content), "Document literal <think fakeout");
        assert_string_equal(buf_cstr(&r.thinking), "");
        parsed_deinit(&r);
        parse_steps(&r, "laguna", NULL, modes[i].last, modes[i].think,
                    (const char *[]){"</think", " fakeout", NULL});
        assert_string_equal(buf_cstr(&r.content), "</think fakeout");
        parsed_deinit(&r);
    }
    // A bare JSON call is held until it is complete.
    parse_steps(&r, "laguna", T, NULL, NULL,
                (const char *[]){"{\"name\":\"get_weather\",\"arguments\":{\"location\":\"San "
                                 "Francisco,",
                                 " CA\"}}", NULL});
    assert_string_equal(buf_cstr(&r.content), "");
    ASSERT_CALLS(r.calls, WEATHER_CALL("{\"location\":\"San Francisco, CA\"}"));
    parsed_deinit(&r);

    // Every split point gives the same result.
    expect_every_split("laguna", T, NULL, &on,
                       "<think>Need current weather.</think>\n<tool_call>get_weather\n<arg_key>"
                       "location</arg_key>\n<arg_value>SF</arg_value>\n<arg_key>days</arg_key>\n"
                       "<arg_value>3</arg_value>\n</tool_call>",
                       "", "Need current weather.",
                       WEATHER_CALL("{\"location\":\"SF\",\"days\":3}"));
    expect_every_split("laguna", T, NULL, &on, "\nPlan it.</think>\nThe answer.", "The answer.",
                       "Plan it.", "[]");
    expect_every_split("laguna", T, NULL, NULL,
                       "Let me check.<tool_call>get_weather<arg_key>location</arg_key><arg_value>"
                       "Paris</arg_value></tool_call>",
                       "Let me check.", "", WEATHER_CALL("{\"location\":\"Paris\"}"));
    expect_every_split("laguna", NULL, NULL, &off, "<think>Hidden.</think>Answer.", "Answer.", "",
                       "[]");
    expect_every_split("laguna", lg_read_tools, NULL, NULL,
                       "Reading.<user>read<arg_key>path</arg_key><arg_value>go.mod</arg_value>"
                       "</user>",
                       "Reading.", "",
                       "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{\"path\":"
                       "\"go.mod\"}}}]");
    expect_every_split("poolside-v1", T, NULL, &on,
                       "Think.</think>Done.<tool_call>get_weather<arg_key>days</arg_key>"
                       "<arg_value>2</arg_value></tool_call>",
                       "Done.", "Think.", WEATHER_CALL("{\"days\":2}"));
}

static void test_laguna_parser_errors(void **state)
{
    (void)state;
    const char *T = lg_parse_tools;
    expect_error("laguna", T,
                 "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"location\": }}</tool_call>",
                 "failed to parse Laguna JSON tool call: invalid character '}'");
    expect_error("laguna", T, "<tool_call>{\"arguments\":{}}</tool_call>",
                 "empty Laguna tool call name");
    expect_error("laguna", T, "<tool_call>{\"name\":7}</tool_call>",
                 "failed to parse Laguna JSON tool call: json: cannot unmarshal number");
    expect_error("laguna", T, "<tool_call>{\"name\":\"f\",\"arguments\":[1]}</tool_call>",
                 "failed to parse Laguna JSON tool call: json: cannot unmarshal array");
    expect_error("laguna", T, "<tool_call>get_weather\n{\"location\": </tool_call>",
                 "failed to parse Laguna JSON tool call arguments: unexpected end of JSON input");
    // An unfinished call at the end of the output is still decoded.
    expect_error("laguna", T, "<tool_call>{\"name\":", "failed to parse Laguna JSON tool call");
    // A bare JSON call that does not decode (tools declared).
    expect_error("poolside-v1", T, "{\"name\": \"get_weather\", \"arguments\": {",
                 "failed to parse Laguna JSON tool call");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_laguna_render),
        cmocka_unit_test(test_poolside_render),
        cmocka_unit_test(test_laguna_parser),
        cmocka_unit_test(test_laguna_parser_values),
        cmocka_unit_test(test_laguna_parser_streaming),
        cmocka_unit_test(test_laguna_parser_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

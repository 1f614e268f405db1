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
#include "renderertest.h"

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
    static const char *const names[] = {"laguna", "poolside-v1", "glimmer"};
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

// ---------------------------------------------------------------------------
// glimmer renderer (glimmer_reference_test.go, glimmer_test.go)

#define G_MSG(header, content, end) "<|start|>" header "<|message|>" content end
#define G_VALID                     "# Valid recipients: \"self\", \"user\"."

// The built-in system message for today with that strength.
static char *g_default_system(const char *strength, const char *extra)
{
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof(date), "%Y-%m-%d", &tm);
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b,
               "<|start|>system<|message|>You are a helpful AI assistant.\nKnowledge cutoff: "
               "2026-01-04.\nCurrent date: %s.\n\nReasoning strength: %s.%s\n\n",
               date, strength, extra);
    return buf_take(&b);
}

static void expect_render(const char *name, const char *msgs, const char *tools,
                          const struct renderer_think *think, const char *want_sys,
                          const char *want_rest)
{
    json_t *m = J(msgs);
    json_t *t = tools ? J(tools) : NULL;
    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    assert_int_equal(renderer_render(name, m, t, think, &out, &e), 0);
    struct buf want;
    buf_init(&want, 0);
    buf_printf(&want, "<|begin_of_text|>%s%s", want_sys, want_rest);
    assert_string_equal(buf_cstr(&out), buf_cstr(&want));
    buf_deinit(&want);
    buf_deinit(&out);
    json_decref(m);
    json_decref(t);
}

static const char g_weather_tool[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the "
    "weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{"
    "\"city\":{\"type\":\"string\"},\"units\":{\"type\":\"string\"}}}}}]";

#define G_TOOL_DEFS                                                                                \
    "In this environment you have access to a set of tools you can use to answer the user's "      \
    "question.\n\nYou can invoke a function by writing a \"<atem:function_calls>\" block like "    \
    "the following:\n<atem:function_calls>\n<atem:invoke name=\"$FUNCTION_NAME\">\n"               \
    "<atem:parameter name=\"$PARAMETER_NAME\">$PARAMETER_VALUE</atem:parameter>\n...\n"            \
    "</atem:invoke>\n</atem:function_calls>\n\nString and scalar parameters should be specified "  \
    "as is, while lists and objects should use JSON format. Note that spaces for string values "   \
    "are not stripped. The output is not expected to be valid XML and is parsed with regular "     \
    "expressions.\nHere are the functions available in JSONSchema format:\n// Tool metadata\n"     \
    "{\"name\": \"get_weather\", \"description\": \"\"}\n// Function schemas\n{\"name\": "         \
    "\"get_weather\", \"description\": \"Get the weather\", \"parameters\": {\"type\": "           \
    "\"object\", \"required\": [\"city\"], \"properties\": {\"city\": {\"type\": \"string\"}, "    \
    "\"units\": {\"type\": \"string\"}}}}\n\nHere's an example of how to call a function in the "  \
    "tool set:\n(If the tool namespace is not specified, invoke the function directly as "         \
    "`example_function_name` rather than `example_tool_name.example_function_name`)\n\n"           \
    "to=example_tool_name.example_function_name\n\n<atem:function_calls>\n<atem:invoke "           \
    "name=\"example_tool_name.example_function_name\">\n<atem:parameter "                          \
    "name=\"example_parameter_1\">value_1</atem:parameter>\n<atem:parameter "                      \
    "name=\"example_parameter_2\">This is the value for the second parameter\nthat can span\n"     \
    "\"multiple\" lines\n</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"

#define G_WEATHER_ATEM                                                                             \
    "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter "                  \
    "name=\"city\">SF</atem:parameter>\n<atem:parameter name=\"units\">fahrenheit"                 \
    "</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"
#define G_WEATHER_CALL                                                                             \
    "{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"SF\",\"units\":"            \
    "\"fahrenheit\"}}}"

static void test_glimmer_render(void **state)
{
    (void)state;
    struct renderer_think off = think_of(0, NULL), on = think_of(1, NULL);
    struct renderer_think low = think_of(1, "low"), medium = think_of(1, "medium"),
                          high = think_of(1, "high");
    char *def = g_default_system("high", "");
    char *sys = NULL;
    expect_render("glimmer", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, NULL, def,
                  G_VALID "<|eot|>" G_MSG("user", "Hello", "<|eot|>") "<|start|>assistant");
    // Reasoning strength from think.
    const struct {
        const struct renderer_think *think;
        const char *strength;
    } strengths[] = {{&on, "high"}, {&off, "none"}, {&low, "low"}, {&medium, "medium"}};
    for (size_t i = 0; i < 4; i++) {
        sys = g_default_system(strengths[i].strength, "");
        expect_render("glimmer", "[{\"role\":\"user\",\"content\":\"Solve.\"}]", NULL,
                      strengths[i].think, sys,
                      G_VALID "<|eot|>" G_MSG("user", "Solve.", "<|eot|>") "<|start|>assistant");
        free(sys);
    }
    // An explicit system message, images as [img-N] tags, thinking then an
    // answer.
    expect_render("glimmer",
                  "[{\"role\":\"system\",\"content\":\"Be concise.\"},{\"role\":\"user\","
                  "\"content\":\"Read this.\",\"images\":[\"AQ==\"]},{\"role\":\"assistant\","
                  "\"thinking\":\"I should inspect it.\",\"content\":\"It says hello.\"},"
                  "{\"role\":\"user\",\"content\":\"Compare.\",\"images\":[\"Ag==\",\"Aw==\"]}]",
                  NULL, NULL, "",
                  G_MSG("system", "Be concise.\n\nReasoning strength: high.\n\n" G_VALID,
                        "<|eot|>") G_MSG("user", "[img-0] Read this.", "<|eot|>")
                      G_MSG("assistant to=self", "I should inspect it.",
                            "<|eom|>") G_MSG("assistant to=user", "It says hello.", "<|eot|>")
                          G_MSG("user", "[img-1][img-2] Compare.", "<|eot|>") "<|start|>assistant");
    // "Reasoning effort" in a system message becomes "Reasoning strength"
    // and is not repeated; a stated strength wins over think.
    expect_render("glimmer",
                  "[{\"role\":\"system\",\"content\":\"You are direct.\\nReasoning effort: "
                  "medium.\"},{\"role\":\"user\",\"content\":\"Hello\"}]",
                  NULL, NULL, "",
                  G_MSG("system", "You are direct.\nReasoning strength: medium.\n\n" G_VALID,
                        "<|eot|>") G_MSG("user", "Hello", "<|eot|>") "<|start|>assistant");
    expect_render("glimmer",
                  "[{\"role\":\"system\",\"content\":\"You are direct.\\nREASONING STRENGTH: "
                  "low.\"},{\"role\":\"user\",\"content\":\"Hello\"}]",
                  NULL, &high, "",
                  G_MSG("system", "You are direct.\nREASONING STRENGTH: low.\n\n" G_VALID,
                        "<|eot|>") G_MSG("user", "Hello", "<|eot|>") "<|start|>assistant");
    // A call and its result, tools in the system message.
    sys = g_default_system("high", "\n\n" G_TOOL_DEFS);
    expect_render("glimmer",
                  "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\","
                  "\"thinking\":\"Need current data.\",\"tool_calls\":[{\"id\":\"call_weather\","
                  "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"SF\","
                  "\"units\":\"fahrenheit\"}}}]},{\"role\":\"tool\",\"tool_call_id\":"
                  "\"call_weather\",\"content\":\"{\\\"temp\\\":65}\"},{\"role\":\"assistant\","
                  "\"content\":\"It is 65F.\"}]",
                  g_weather_tool, NULL, sys,
                  "# Valid recipients: \"self\", \"get_weather.*\", \"user\".<|eot|>" G_MSG(
                      "user", "Weather?", "<|eot|>")
                      G_MSG("assistant to=self", "Need current data.", "<|eom|>")
                          G_MSG("assistant to=get_weather", G_WEATHER_ATEM, "<|eot|>")
                              G_MSG("tool get_weather",
                                    "<tool_output name=\"get_weather\">\n{\"temp\":65}\n"
                                    "</tool_output>",
                                    "<|eot|>") G_MSG("assistant to=user", "It is 65F.",
                                                     "<|eot|>") "<|start|>assistant");
    free(sys);
    // Adjacent assistant messages: the first ends with <|eom|>.
    const char *call =
        "{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":{\"city\":\"SF\",\"units\":\"fahrenheit\"}}}]}";
    char msgs[1024];
    snprintf(msgs, sizeof(msgs),
             "[{\"role\":\"user\",\"content\":\"Run twice.\"},%s,%s,{\"role\":\"user\","
             "\"content\":\"Continue.\"}]",
             call, call);
    expect_render("glimmer", msgs, NULL, NULL, def,
                  G_VALID "<|eot|>" G_MSG("user", "Run twice.", "<|eot|>")
                      G_MSG("assistant to=get_weather", G_WEATHER_ATEM, "<|eom|>")
                          G_MSG("assistant to=get_weather", G_WEATHER_ATEM, "<|eot|>")
                              G_MSG("user", "Continue.", "<|eot|>") "<|start|>assistant");
    // A final thinking-only message stays an open reasoning segment.
    expect_render("glimmer",
                  "[{\"role\":\"user\",\"content\":\"Solve\"},{\"role\":\"assistant\","
                  "\"thinking\":\"Private reasoning.\"}]",
                  NULL, NULL, def,
                  G_VALID "<|eot|>" G_MSG("user", "Solve", "<|eot|>") G_MSG(
                      "assistant to=self", "Private reasoning.", "<|eom|>") "<|start|>assistant");
    // Tool result names: tool_name, the call the id answers, else the id
    // (results always end their turn); other roles are left out.
    expect_render("glimmer",
                  "[{\"role\":\"developer\",\"content\":\"Follow policy.\"},{\"role\":"
                  "\"assistant\",\"tool_calls\":[{\"id\":\"call_1\",\"function\":{\"name\":"
                  "\"get_weather\",\"arguments\":{}}}]},{\"role\":\"tool\",\"tool_call_id\":"
                  "\"call_1\",\"content\":\"{\\\"temp\\\":65}\"},{\"role\":\"tool\","
                  "\"tool_call_id\":\"missing\",\"content\":\"not found\"},{\"role\":\"tool\","
                  "\"tool_name\":\"fs.read\",\"content\":\"README\"},{\"role\":\"tool\","
                  "\"content\":\"orphan\"}]",
                  NULL, NULL, def,
                  G_VALID "<|eot|>" G_MSG("assistant to=get_weather",
                                          "<atem:function_calls>\n<atem:invoke "
                                          "name=\"get_weather\">\n</atem:invoke>\n"
                                          "</atem:function_calls>",
                                          "<|eot|>")
                      G_MSG("tool get_weather",
                            "<tool_output name=\"get_weather\">\n{\"temp\":65}\n</tool_output>",
                            "<|eot|>") G_MSG("tool missing",
                                             "<tool_output name=\"missing\">\nnot found\n"
                                             "</tool_output>",
                                             "<|eot|>")
                          G_MSG("tool fs.read",
                                "<tool_output name=\"fs.read\">\nREADME\n</tool_output>", "<|eot|>")
                              G_MSG("tool ", "<tool_output name=\"\">\norphan\n</tool_output>",
                                    "<|eot|>") "<|start|>assistant");
    free(def);
}

static void test_glimmer_render_values(void **state)
{
    (void)state;
    // TestGlimmerRenderATEMValues, plus numbers as %v and objects without
    // HTML escaping.
    char *got = render("glimmer",
                       "[{\"role\":\"user\",\"content\":\"Run it.\"},{\"role\":\"assistant\","
                       "\"tool_calls\":[{\"function\":{\"name\":\"tools.run\",\"arguments\":{"
                       "\"text\":\"keep  spaces\",\"count\":3,\"enabled\":true,\"fallback\":null,"
                       "\"items\":[\"one\",\"two\"],\"config\":{\"mode\":\"fast\"},\"number\":3.5,"
                       "\"big\":1000000,\"array\":[\"h\\u00e9llo\",2],\"object\":{\"b\":2,\"a\":"
                       "\"<value>\"}}}}]}]",
                       "[{\"type\":\"function\",\"function\":{\"name\":\"tools.run\"}},{\"type\":"
                       "\"function\",\"function\":{\"name\":\"tools.stop\",\"description\":"
                       "\"a <b>\"}},{\"type\":\"function\",\"function\":{\"name\":\"other\"}}]",
                       -1);
    const char *want =
        "<|start|>assistant to=tools.run<|message|><atem:function_calls>\n<atem:invoke "
        "name=\"tools.run\">\n<atem:parameter name=\"text\">keep  spaces</atem:parameter>\n"
        "<atem:parameter name=\"count\">3</atem:parameter>\n<atem:parameter name=\"enabled\">true"
        "</atem:parameter>\n<atem:parameter name=\"fallback\">null</atem:parameter>\n"
        "<atem:parameter name=\"items\">[\"one\", \"two\"]</atem:parameter>\n<atem:parameter "
        "name=\"config\">{\"mode\": \"fast\"}</atem:parameter>\n<atem:parameter name=\"number\">"
        "3.5</atem:parameter>\n<atem:parameter name=\"big\">1e+06</atem:parameter>\n"
        "<atem:parameter name=\"array\">[\"h\xc3\xa9llo\", 2]</atem:parameter>\n<atem:parameter "
        "name=\"object\">{\"a\": \"<value>\", \"b\": 2}</atem:parameter>\n</atem:invoke>\n"
        "</atem:function_calls><|eot|><|start|>assistant";
    if (!strstr(got, want))
        fail_msg("glimmer ATEM values:\n%s", got);
    // Namespaces once each, in order; schemas keep <, > and &.
    assert_non_null(strstr(got, "// Tool metadata\n{\"name\": \"tools\", \"description\": \"\"}\n"
                                "{\"name\": \"other\", \"description\": \"\"}\n// Function "
                                "schemas\n{\"name\": \"tools.run\", \"description\": \"\", "
                                "\"parameters\": {\"type\": \"\", \"properties\": null}}\n"
                                "{\"name\": \"tools.stop\", \"description\": \"a <b>\", "));
    assert_non_null(strstr(got, "# Valid recipients: \"self\", \"tools.*\", \"other.*\", "
                                "\"user\".<|eot|>"));
    free(got);
}

// ---------------------------------------------------------------------------
// glimmer parser (model/parsers/glimmer_test.go)

static char *g_tool(const char *name, const char *props)
{
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b,
               "{\"type\":\"function\",\"function\":{\"name\":\"%s\",\"parameters\":{\"type\":"
               "\"object\",\"properties\":%s}}}",
               name, props ? props : "null");
    return buf_take(&b);
}

static char *g_tools1(const char *name, const char *props)
{
    char *t = g_tool(name, props);
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b, "[%s]", t);
    free(t);
    return buf_take(&b);
}

#define G_ATEM(name, params)                                                                       \
    "<atem:function_calls>\n<atem:invoke name=\"" name "\">\n" params                              \
    "</atem:invoke>\n</atem:function_calls>"
#define G_PARAM(name, value) "<atem:parameter name=\"" name "\">" value "</atem:parameter>\n"

static void test_glimmer_parser(void **state)
{
    (void)state;
    struct renderer_think off = think_of(0, NULL);
    struct parsed r;
    expect_parse("glimmer", NULL, NULL, -1, " to=user<|message|>Hello", "Hello", "", "[]");
    expect_parse("glimmer", NULL, NULL, -1, " to=self<|message|>Check the facts.", "",
                 "Check the facts.", "[]");
    parse_steps(&r, "glimmer", NULL, NULL, &off,
                (const char *[]){" to=self<|message|>Check the facts.<|eom|><|start|>assistant "
                                 "to=user<|message|>Answer<|eot|>",
                                 NULL});
    assert_string_equal(buf_cstr(&r.content), "Answer");
    assert_string_equal(buf_cstr(&r.thinking), "");
    parsed_deinit(&r);

    // Values typed by the schema; white space in strings kept.
    char *tools = g_tools1(
        "tools.run", "{\"text\":{\"type\":\"string\"},\"count\":{\"type\":\"integer\"},"
                     "\"enabled\":{\"type\":\"boolean\"},\"items\":{\"type\":\"array\"},"
                     "\"config\":{\"type\":\"object\"},\"choice\":{\"anyOf\":[{\"type\":\"null\"},"
                     "{\"type\":\"string\"}]}}");
    expect_parse("glimmer", tools, NULL, -1,
                 " to=tools.run<|message|>" G_ATEM(
                     "tools.run",
                     G_PARAM("text", " keep  spaces ") G_PARAM("count", "3")
                         G_PARAM("enabled", "true") G_PARAM("items", "[\"one\", \"two\"]")
                             G_PARAM("config", "{\"mode\":\"fast\"}") G_PARAM("choice", "null")),
                 "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"tools.run\",\"arguments\":{\"text\":"
                 "\" keep  spaces \",\"count\":3,\"enabled\":true,\"items\":[\"one\",\"two\"],"
                 "\"config\":{\"mode\":\"fast\"},\"choice\":null}}}]");
    free(tools);

    // Control-token text inside a value is the value's.
    tools = g_tools1("echo", "{\"text\":{\"type\":\"string\"}}");
    expect_parse(
        "glimmer", tools, NULL, -1,
        " to=echo<|message|>" G_ATEM("echo", G_PARAM("text", "literal <|eot|> and "
                                                             "<|start|>assistant to=user"
                                                             "<|message|> text")) "<|eot|>",
        "", "",
        "[{\"function\":{\"index\":0,\"name\":\"echo\",\"arguments\":{\"text\":\"literal "
        "<|eot|> and <|start|>assistant to=user<|message|> text\"}}}]");
    free(tools);

    // Stray <|message|> tokens in the invoke name.
    tools = g_tools1("read", "{\"path\":{\"type\":\"string\"}}");
    const char *want_read = "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{"
                            "\"path\":\"go.mod\"}}}]";
    static const char *const fumbles[] = {
        "read<|message|>\">" G_PARAM("path", "go.mod"),
        "read<|message|>" G_PARAM("path", "go.mod"),
        "re<|message|>ad\">" G_PARAM("path", "go.mod"),
        "read<|message|><|message|>\">" G_PARAM("path", "go.mod"),
    };
    for (size_t i = 0; i < 4; i++) {
        char input[512];
        snprintf(input, sizeof(input),
                 " to=read<|message|><atem:function_calls>\n<atem:invoke name=\"%s</atem:invoke>"
                 "\n</atem:function_calls><|eot|>",
                 fumbles[i]);
        expect_parse("glimmer", tools, NULL, -1, input, "", "", want_read);
    }
    // ... but a <|message|> in a value is kept.
    expect_parse(
        "glimmer", tools, NULL, -1,
        " to=read<|message|>" G_ATEM("read", G_PARAM("path", "keep <|message|> literal")) "<|eot|>",
        "", "",
        "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{\"path\":\"keep "
        "<|message|> literal\"}}}]");
    // A tool reached through its own namespace.
    static const char *const ns_cases[][2] = {
        {"read", "read.read"}, {"read.read", "read.read"}, {"read.read", "read"}};
    for (size_t i = 0; i < 3; i++) {
        char input[512];
        snprintf(input, sizeof(input),
                 " to=%s<|message|><atem:function_calls>\n<atem:invoke name=\"%s\">\n" G_PARAM(
                     "path", "go.mod") "</atem:invoke>\n</atem:function_calls><|eot|>",
                 ns_cases[i][0], ns_cases[i][1]);
        expect_parse("glimmer", tools, NULL, -1, input, "", "", want_read);
    }
    free(tools);
    // Namespace resolution stays strict: an undeclared namespace or a
    // foreign one is not a tool (the message is content).
    char *read = g_tool("read", NULL), *repo = g_tool("repo.read", NULL);
    char two[512];
    snprintf(two, sizeof(two), "[%s,%s]", read, repo);
    free(read);
    free(repo);
    expect_parse("glimmer", two, NULL, -1, " to=functions.read<|message|>hi<|eot|>", "hi", "",
                 "[]");
    expect_parse("glimmer", two, NULL, -1, " to=write.write<|message|>hi<|eot|>", "hi", "", "[]");
    expect_parse("glimmer", two, NULL, -1,
                 " to=repo.repo.read<|message|>" G_ATEM("repo.read", "") "<|eot|>", "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"repo.read\",\"arguments\":{}}}]");
    // A message to a recipient that is no tool is content.
    expect_parse("glimmer", NULL, NULL, -1, " to=not_a_tool<|message|>" G_ATEM("not_a_tool", ""),
                 G_ATEM("not_a_tool", ""), "", "[]");
}

static void test_glimmer_parser_fallback(void **state)
{
    (void)state;
    // TestGlimmerParserFumbledRecipientToolCallFallback: a whole message
    // that is one ATEM block for a declared tool is that call.
    char *tools = g_tools1("muse.bash", "{\"command\":{\"type\":\"string\"}}");
#define MUSE_ATEM G_ATEM("muse.bash", G_PARAM("command", "pwd && ls -la"))
    const char *want = "[{\"function\":{\"index\":0,\"name\":\"muse.bash\",\"arguments\":{"
                       "\"command\":\"pwd && ls -la\"}}}]";
    const struct {
        const char *input, *thinking, *content;
    } cases[] = {
        {" to=muse<|message|>" MUSE_ATEM "<|eom|>", "", ""},
        {"<|message|>" MUSE_ATEM "<|eom|>", "", ""},
        {" to=user<|message|>" MUSE_ATEM "<|eot|>", "", ""},
        {" to=atem:function_calls<|message|>" MUSE_ATEM "<|eom|>", "", ""},
        {" to=self<|message|>let me look<|eom|><|start|>assistant<|message|>" MUSE_ATEM "<|eom|>",
         "let me look", ""},
        {"<|message|>" MUSE_ATEM "<|start|>assistant to=user<|message|>Done<|eot|>", "", "Done"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_parse("glimmer", tools, NULL, -1, cases[i].input, cases[i].content,
                     cases[i].thinking, want);
    // Text that only resembles a call stays content.
    const struct {
        const char *tools, *input, *content;
    } content_cases[] = {
        {tools, " to=user<|message|>" G_ATEM("other.run", "") "<|eot|>", G_ATEM("other.run", "")},
        {tools, " to=user<|message|>Running:\n" MUSE_ATEM "<|eot|>", "Running:\n" MUSE_ATEM},
        {tools, " to=user<|message|>" MUSE_ATEM "\nDone.<|eot|>", MUSE_ATEM "\nDone."},
        {NULL, " to=user<|message|>" MUSE_ATEM "<|eot|>", MUSE_ATEM},
    };
    for (size_t i = 0; i < sizeof(content_cases) / sizeof(content_cases[0]); i++)
        expect_parse("glimmer", content_cases[i].tools, NULL, -1, content_cases[i].input,
                     content_cases[i].content, "", "[]");
#undef MUSE_ATEM
    free(tools);

    // Implicit message boundaries (no <|eom|> before the next header).
    tools = g_tools1("get_weather", "{\"city\":{\"type\":\"string\"}}");
    expect_parse("glimmer", tools, NULL, -1,
                 " to=self<|message|>Think<|start|>assistant to=get_weather<|message|>" G_ATEM(
                     "get_weather", G_PARAM("city", "SF")) "<|start|>assistant to=user<|message|>"
                                                           "Done<|eot|>",
                 "Done", "Think",
                 "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"city\":"
                 "\"SF\"}}}]");
    free(tools);
}

static void test_glimmer_parser_streaming(void **state)
{
    (void)state;
    // TestGlimmerParserStreamingATEMAtEveryBoundary.
    char *tools = g_tools1("get_weather", "{\"city\":{\"type\":\"string\"}}");
    expect_every_split(
        "glimmer", tools, NULL, NULL,
        " to=get_weather<|message|>" G_ATEM("get_weather", G_PARAM("city", "SF")) "<|eot|>", "", "",
        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
        "\"city\":\"SF\"}}}]");
    free(tools);
    // TestGlimmerParserMultipleMessagesAndIndices.
    char *first = g_tool("first", "{\"x\":{\"type\":\"integer\"}}"),
         *second = g_tool("second", NULL);
    char two[512];
    snprintf(two, sizeof(two), "[%s,%s]", first, second);
    free(first);
    free(second);
    expect_every_split(
        "glimmer", two, NULL, NULL,
        " to=self<|message|>Think<|eom|><|start|>assistant to=first<|message|>" G_ATEM(
            "first", G_PARAM("x", "1")) "<|eom|><|start|>assistant to=second"
                                        "<|message|>" G_ATEM("second", "") "<|eot|>",
        "", "Think",
        "[{\"function\":{\"index\":0,\"name\":\"first\",\"arguments\":{\"x\":1}}},"
        "{\"function\":{\"index\":1,\"name\":\"second\",\"arguments\":{}}}]");
    // TestGlimmerParserFumbledRecipientStreaming: the held block never leaks.
    tools = g_tools1("muse.bash", "{\"command\":{\"type\":\"string\"}}");
    expect_every_split("glimmer", tools, NULL, NULL,
                       "<|message|>" G_ATEM("muse.bash", G_PARAM("command", "pwd")) "<|eom|>", "",
                       "",
                       "[{\"function\":{\"index\":0,\"name\":\"muse.bash\",\"arguments\":{"
                       "\"command\":\"pwd\"}}}]");
    free(tools);
    // Answer and thinking streamed, end markers held back.
    expect_every_split("glimmer", NULL, NULL, NULL,
                       " to=self<|message|>Hmm.<|eom|><|start|>assistant to=user<|message|>"
                       "Hello there.<|eot|>",
                       "Hello there.", "Hmm.", "[]");
    struct parsed r;
    parse_steps(&r, "glimmer", NULL, NULL, NULL,
                (const char *[]){" to=user<|message|>Hello<|eo", "t|>", NULL});
    assert_string_equal(buf_cstr(&r.content), "Hello");
    parsed_deinit(&r);
    // A literal <|start|> split across pieces is text.
    parse_steps(&r, "glimmer", NULL, NULL, NULL,
                (const char *[]){" to=user<|message|>Use `<", "|", "start", "|>` here.", NULL});
    assert_string_equal(buf_cstr(&r.content), "Use `<|start|>` here.");
    parsed_deinit(&r);
    parse_steps(&r, "glimmer", NULL, NULL, NULL,
                (const char *[]){" to=self<|message|>Use `<", "|", "start", "|>` here.", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "Use `<|start|>` here.");
    assert_string_equal(buf_cstr(&r.content), "");
    parsed_deinit(&r);
}

// TestGlimmerParserRendererToolLoopRoundTrip: a parsed turn, sent back as
// history with its tool result, renders as the model wrote it.
static void test_glimmer_round_trip(void **state)
{
    (void)state;
    const char *tools =
        "[{\"type\":\"function\",\"function\":{\"name\":\"issue\",\"description\":\"Read an "
        "issue.\",\"parameters\":{\"type\":\"object\",\"required\":[\"number\"],\"properties\":{"
        "\"number\":{\"type\":\"integer\"}}}}}]";
    const char *call_atem = G_ATEM("issue", G_PARAM("number", "1736"));
    struct parsed r;
    parse_steps(&r, "glimmer", tools, NULL, NULL,
                (const char *[]){" to=self<|message|>I need the issue details.<|eom|><|start|>"
                                 "assistant to=issue<|message|>" G_ATEM(
                                     "issue", G_PARAM("number", "1736")) "<|eot|>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "I need the issue details.");
    assert_string_equal(buf_cstr(&r.content), "");
    ASSERT_CALLS(
        r.calls,
        "[{\"function\":{\"index\":0,\"name\":\"issue\",\"arguments\":{\"number\":1736}}}]");

    json_t *msgs = J("[{\"role\":\"user\",\"content\":\"Investigate issue 1736.\"}]");
    json_t *call = json_array_get(r.calls, 0);
    json_object_set_new(call, "id", json_string("call_issue"));
    json_t *turn = json_object();
    json_object_set_new(turn, "role", json_string("assistant"));
    json_object_set_new(turn, "thinking", json_string(buf_cstr(&r.thinking)));
    json_object_set(turn, "tool_calls", r.calls);
    json_array_append_new(msgs, turn);
    json_array_append_new(msgs, J("{\"role\":\"tool\",\"tool_call_id\":\"call_issue\","
                                  "\"content\":\"Issue 1736 links the fix.\"}"));
    json_t *t = J(tools);
    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    assert_int_equal(renderer_render("glimmer", msgs, t, NULL, &out, &e), 0);
    struct buf want;
    buf_init(&want, 0);
    buf_append_str(&want, G_MSG("user", "Investigate issue 1736.", "<|eot|>"));
    buf_append_str(&want, G_MSG("assistant to=self", "I need the issue details.", "<|eom|>"));
    buf_printf(&want, G_MSG("assistant to=issue", "%s", "<|eot|>"), call_atem);
    buf_append_str(&want, G_MSG("tool issue", "<tool_output name=\"issue\">\n", ""));
    buf_append_str(&want, "Issue 1736 links the fix.\n</tool_output><|eot|><|start|>assistant");
    const char *got = buf_cstr(&out);
    size_t gl = strlen(got), wl = want.len;
    if (gl < wl || strcmp(got + gl - wl, buf_cstr(&want)) != 0)
        fail_msg("glimmer round trip:\n%s", got);
    buf_deinit(&want);
    buf_deinit(&out);
    json_decref(t);
    json_decref(msgs);
    parsed_deinit(&r);
}

static void test_glimmer_parser_errors(void **state)
{
    (void)state;
    char *tools = g_tools1("get_weather", NULL);
    expect_error("glimmer", tools, " to=get_weather<|message|>" G_ATEM("read_file", ""),
                 "Glimmer recipient \"get_weather\" does not match ATEM invoke \"read_file\"");
    expect_error("glimmer", tools, " to=get_weather<|message|>{\"city\":\"SF\"}",
                 "parse Glimmer call to get_weather: missing ATEM function_calls wrapper");
    expect_error("glimmer", tools,
                 " to=get_weather<|message|><atem:function_calls>x</atem:function_calls>",
                 "missing ATEM invoke wrapper");
    expect_error("glimmer", tools,
                 " to=get_weather<|message|><atem:function_calls><atem:invoke name=\"get_weather"
                 "</atem:invoke></atem:function_calls>",
                 "malformed ATEM invoke name");
    expect_error("glimmer", tools, " to=get_weather<|message|>" G_ATEM("get_weather", "junk\n"),
                 "malformed ATEM parameter");
    expect_error("glimmer", tools,
                 " to=get_weather<|message|>" G_ATEM("get_weather", "<atem:parameter name=\"x\n"),
                 "malformed ATEM parameter name");
    expect_error(
        "glimmer", tools,
        " to=get_weather<|message|>" G_ATEM("get_weather", "<atem:parameter name=\"x\">1\n"),
        "unterminated ATEM parameter \"x\"");
    // The output ends right after a call's header.
    expect_error("glimmer", tools, " to=get_weather<|message|>", "missing ATEM function_calls");
    free(tools);
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
        cmocka_unit_test(test_glimmer_render),
        cmocka_unit_test(test_glimmer_render_values),
        cmocka_unit_test(test_glimmer_parser),
        cmocka_unit_test(test_glimmer_parser_fallback),
        cmocka_unit_test(test_glimmer_parser_streaming),
        cmocka_unit_test(test_glimmer_round_trip),
        cmocka_unit_test(test_glimmer_parser_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

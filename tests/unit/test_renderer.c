// Unit tests of the built-in renderers and parsers: the behaviours Ollama's
// Go tests describe (model/renderers/*_test.go, model/parsers/*_test.go,
// harmony/harmonyparser_test.go), including pieces split inside markers.
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

static const char *rnd_test_str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static json_t *J(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    if (!v)
        fail_msg("bad test JSON (%s): %s", je.text, text);
    return v;
}

static char *render(const char *name, const char *msgs, const char *tools,
                    const struct renderer_think *think)
{
    json_t *m = J(msgs);
    json_t *t = tools ? J(tools) : NULL;
    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    int rc = renderer_render(name, m, t, think, &out, &e);
    if (rc < 0)
        fail_msg("render %s: %s", name, e.msg);
    json_decref(m);
    json_decref(t);
    return buf_take(&out);
}

// ---------------------------------------------------------------------------
// Registry

static void test_names(void **state)
{
    (void)state;
    assert_true(renderer_known("qwen3-coder"));
    assert_true(renderer_known("harmony"));
    assert_false(renderer_known("qwen3-nope"));
    assert_true(renderer_parser_known("qwen3"));
    assert_true(renderer_parser_known("qwen3-thinking"));
    assert_true(renderer_parser_known("passthrough"));
    assert_false(renderer_parser_known(""));
    assert_true(renderer_parser_tools("qwen3-coder"));
    assert_false(renderer_parser_thinking("qwen3-coder"));
    assert_true(renderer_parser_thinking("harmony"));
    assert_false(renderer_parser_tools("passthrough"));

    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    json_t *m = J("[]");
    assert_int_equal(renderer_render("x", m, NULL, NULL, &out, &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "unknown renderer \"x\"");
    struct renderer_parser *p = NULL;
    err_clear(&e);
    assert_int_equal(renderer_parser_new(&p, "y", NULL, NULL, NULL, &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "unknown parser \"y\"");
    json_t *bad = J("[{\"role\":1}]");
    err_clear(&e);
    assert_int_equal(renderer_render("qwen3-coder", bad, NULL, NULL, &out, &e), ERR_INVALID);
    json_decref(bad);
    json_decref(m);
    buf_deinit(&out);
}

// ---------------------------------------------------------------------------
// qwen3-coder renderer (TestQwen3CoderRenderer)

#define QC_FOOTER                                                                                  \
    "\n\nIf you choose to call a function ONLY reply in the following format with NO "             \
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"    \
    "\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "  \
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"        \
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "         \
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"     \
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "      \
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "    \
    "no function call available, answer the question like normal with your current knowledge "     \
    "and do not tell the user about function calls\n</IMPORTANT>"

static void test_qwen3coder_basic(void **state)
{
    (void)state;
    char *got = render("qwen3-coder",
                       "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
                       "{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]",
                       NULL, NULL);
    assert_string_equal(got, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                             "<|im_start|>user\nHello, how are you?<|im_end|>\n"
                             "<|im_start|>assistant\n");
    free(got);
}

static void test_qwen3coder_tools_and_response(void **state)
{
    (void)state;
    char *got = render(
        "qwen3-coder",
        "[{\"role\":\"system\",\"content\":\"You are a helpful assistant with access to tools.\"},"
        "{\"role\":\"user\",\"content\":\"What is the weather like in San Francisco?\"},"
        "{\"role\":\"assistant\",\"content\":\"I'll check the weather in San Francisco for you.\","
        "\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"unit\":"
        "\"fahrenheit\"}}}]},"
        "{\"role\":\"tool\",\"content\":\"{\\\"location\\\": \\\"San Francisco, CA\\\", "
        "\\\"temperature\\\": 68, \\\"condition\\\": \\\"partly cloudy\\\", \\\"humidity\\\": 65, "
        "\\\"wind_speed\\\": 12}\",\"tool_name\":\"get_weather\"},"
        "{\"role\":\"user\",\"content\":\"That sounds nice! What about New York?\"}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the "
        "current weather in a given location\",\"parameters\":{\"type\":\"object\",\"required\":"
        "[\"unit\"],\"properties\":{\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\","
        "\"fahrenheit\"],\"description\":\"The unit of temperature\"}}}}}]",
        NULL);
    assert_string_equal(
        got, "<|im_start|>system\nYou are a helpful assistant with access to tools.\n\n# Tools\n\n"
             "You have access to the following functions:\n\n<tools>\n<function>\n<name>get_weather"
             "</name>\n<description>Get the current weather in a given location</description>\n"
             "<parameters>\n<parameter>\n<name>unit</name>\n<type>string</type>\n<description>The "
             "unit of temperature</description>\n<enum>[\"celsius\",\"fahrenheit\"]</enum>\n"
             "</parameter>\n<required>[\"unit\"]</required>\n</parameters>\n</function>\n</"
             "tools>" QC_FOOTER "<|im_end|>\n"
             "<|im_start|>user\nWhat is the weather like in San Francisco?<|im_end|>\n"
             "<|im_start|>assistant\nI'll check the weather in San Francisco for you.\n\n"
             "<tool_call>\n<function=get_weather>\n<parameter=unit>\nfahrenheit\n</parameter>\n"
             "</function>\n</tool_call><|im_end|>\n"
             "<|im_start|>user\n<tool_response>\n{\"location\": \"San Francisco, CA\", "
             "\"temperature\": 68, \"condition\": \"partly cloudy\", \"humidity\": 65, "
             "\"wind_speed\": 12}\n</tool_response><|im_end|>\n"
             "<|im_start|>user\nThat sounds nice! What about New York?<|im_end|>\n"
             "<|im_start|>assistant\n");
    free(got);
}

static void test_qwen3coder_parallel_and_defaults(void **state)
{
    (void)state;
    // Parallel calls and consecutive tool results sharing one user turn;
    // tools without a system message get Qwen's default system text.
    char *got =
        render("qwen3-coder",
               "[{\"role\":\"user\",\"content\":\"call double(1) and triple(2)\"},"
               "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["
               "{\"function\":{\"name\":\"double\",\"arguments\":{\"number\":\"1\"}}},"
               "{\"function\":{\"name\":\"triple\",\"arguments\":{\"number\":2,\"big\":1000000,"
               "\"f\":0.5,\"o\":{\"b\":1,\"a\":\"<x>\"},\"n\":null,\"t\":true}}}]},"
               "{\"role\":\"tool\",\"content\":\"{\\\"number\\\": 2}\",\"tool_name\":\"double\"},"
               "{\"role\":\"tool\",\"content\":\"{\\\"number\\\": 6}\",\"tool_name\":\"triple\"}]",
               "[{\"type\":\"function\",\"function\":{\"name\":\"double\",\"parameters\":{\"type\":"
               "\"object\",\"properties\":{\"number\":{\"type\":[\"string\",\"null\"]}}}}}]",
               NULL);
    assert_string_equal(
        got,
        "<|im_start|>system\nYou are Qwen, a helpful AI assistant that can interact with a "
        "computer to solve tasks.\n\n# Tools\n\nYou have access to the following functions:\n\n"
        "<tools>\n<function>\n<name>double</name>\n<parameters>\n<parameter>\n<name>number</name>"
        "\n<type>[\"string\",\"null\"]</type>\n</parameter>\n</parameters>\n</function>\n</"
        "tools>" QC_FOOTER "<|im_end|>\n"
        "<|im_start|>user\ncall double(1) and triple(2)<|im_end|>\n"
        "<|im_start|>assistant\n\n<tool_call>\n<function=double>\n<parameter=number>\n1\n"
        "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=triple>\n"
        "<parameter=number>\n2\n</parameter>\n<parameter=big>\n1e+06\n</parameter>\n"
        "<parameter=f>\n0.5\n</parameter>\n<parameter=o>\n{\"a\":\"\\u003cx\\u003e\",\"b\":1}\n"
        "</parameter>\n<parameter=n>\nnull\n</parameter>\n<parameter=t>\ntrue\n</parameter>\n"
        "</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n{\"number\": 2}\n</tool_response>\n<tool_response>\n"
        "{\"number\": 6}\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    free(got);
}

static void test_qwen3coder_prefill(void **state)
{
    (void)state;
    char *got = render("qwen3-coder",
                       "[{\"role\":\"user\",\"content\":\"Tell me\"},"
                       "{\"role\":\"assistant\",\"content\":\"Sure, \"}]",
                       NULL, NULL);
    assert_string_equal(got, "<|im_start|>user\nTell me<|im_end|>\n<|im_start|>assistant\nSure, ");
    free(got);
}

// ---------------------------------------------------------------------------
// qwen3-coder parser (TestQwenParserStreaming, TestQwenToolParser,
// TestQwenToolCallValueParsing)

static void expect_content(const char *name, const char *const *pieces, const char *content)
{
    struct parsed r;
    parse_steps(&r, name, NULL, NULL, NULL, pieces);
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.content), content);
    parsed_deinit(&r);
}

static void test_qwen3coder_parser_streaming(void **state)
{
    (void)state;
    expect_content("qwen3-coder", (const char *[]){"hi", " there", NULL}, "hi there");
    // Trailing white space is held back (it may precede a tool call).
    expect_content("qwen3-coder", (const char *[]){"abc \n", NULL}, "abc");
    // A partial tag that turns out not to be one.
    expect_content("qwen3-coder", (const char *[]){"abc\n<tool_call", " fakeout", NULL},
                   "abc\n<tool_call fakeout");
    // Split inside both tags; content after the call.
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"days\":{\"type\":"
                        "\"integer\"},\"city\":{\"type\":\"string\"}}}}}]";
    struct parsed r;
    parse_steps(&r, "qwen3-coder", tools, NULL, NULL,
                (const char *[]){"before<tool", "_call>\n<function=get_weather>\n<param",
                                 "eter=city>\nSan Francisco\n</parameter>\n<parameter=days>\n3\n"
                                 "</parameter>\n</function>\n</tool",
                                 "_call>af", "ter", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.content), "beforeafter");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"city\":\"San Francisco\",\"days\":3}}}]");
    parsed_deinit(&r);

    // One byte at a time.
    const char *text = "<tool_call><function=a><parameter=x>1</parameter></function></tool_call>"
                       "<tool_call><function=b></function></tool_call>";
    const char *bytes[200];
    char one[200][2];
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        one[i][0] = text[i];
        one[i][1] = 0;
        bytes[i] = one[i];
    }
    bytes[n] = NULL;
    parse_steps(&r, "qwen3-coder", NULL, NULL, NULL, bytes);
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.content), "");
    ASSERT_CALLS(r.calls,
                 "[{\"function\":{\"index\":0,\"name\":\"a\",\"arguments\":{\"x\":\"1\"}}},"
                 "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{}}}]");
    parsed_deinit(&r);

    // XML special characters in values are kept as written.
    parse_steps(&r, "qwen3-coder", NULL, NULL, NULL,
                (const char *[]){"<tool_call>\n<function=exec>\n<parameter=cmd>\nls && echo "
                                 "\"a > b\" <c\n</parameter>\n</function>\n</tool_call>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"exec\",\"arguments\":"
                          "{\"cmd\":\"ls && echo \\\"a > b\\\" <c\"}}}]");
    parsed_deinit(&r);

    // A broken call is an error.
    parse_steps(&r, "qwen3-coder", NULL, NULL, NULL,
                (const char *[]){"<tool_call>nothing</tool_call>", NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    parsed_deinit(&r);
}

// One parameter value under a declared type list (JSON array text).
static void check_value(const char *types, const char *raw, const char *want)
{
    char tools[512], text[512];
    snprintf(tools, sizeof(tools),
             "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
             "\"object\",\"properties\":{\"p\":{\"type\":%s}}}}}]",
             types);
    snprintf(text, sizeof(text),
             "<tool_call><function=f><parameter=p>%s</parameter></function></tool_call>", raw);
    struct parsed r;
    parse_steps(&r, "qwen3-coder", tools, NULL, NULL, (const char *[]){text, NULL});
    assert_int_equal(r.rc, 0);
    json_t *fn = json_object_get(json_array_get(r.calls, 0), "function");
    json_t *got = json_object_get(json_object_get(fn, "arguments"), "p");
    json_t *w = J(want);
    if (!json_equal(got, w)) {
        char *s = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("types %s raw %s: got %s, want %s", types, raw, s, want);
    }
    json_decref(w);
    parsed_deinit(&r);
}

static void test_qwen3coder_values(void **state)
{
    (void)state;
    check_value("[]", "some-string", "\"some-string\"");
    check_value("[]", "\nsome-string\n", "\"some-string\"");
    check_value("[]", "\n\nsome-string\n\n", "\"\\nsome-string\\n\"");
    check_value("[]", " \nsome-string\n ", "\" \\nsome-string\\n \"");
    check_value("\"number\"", "123", "123");
    check_value("\"integer\"", "42", "42");
    check_value("\"integer\"", "-100", "-100");
    check_value("\"integer\"", "007", "7");
    check_value("\"integer\"", "2147483648", "2147483648");
    check_value("\"integer\"", "12.5", "\"12.5\"");
    check_value("\"number\"", "3.14", "3.14");
    check_value("\"number\"", "-273.15", "-273.15");
    check_value("\"number\"", "100.0", "100");
    check_value("\"number\"", "1.23e5", "123000");
    check_value("\"number\"", "1.5e-3", "0.0015");
    check_value("\"number\"", "abc", "\"abc\"");
    check_value("\"string\"", "hello world", "\"hello world\"");
    check_value("\"boolean\"", "true", "true");
    check_value("\"boolean\"", "False", "false");
    check_value("\"boolean\"", "yes", "false");
    check_value("[\"boolean\",\"string\"]", "yes", "\"yes\"");
    check_value("\"string\"", "null", "null");
    check_value("\"integer\"", "NULL", "null");
    check_value("\"array\"", "[1, \"a\"]", "[1, \"a\"]");
    check_value("\"array\"", "not an array", "\"not an array\"");
    check_value("\"object\"", "{\"k\": [true]}", "{\"k\": [true]}");
    check_value("[\"string\",\"number\"]", "123", "123");
    check_value("[\"string\",\"number\"]", "hello", "\"hello\"");
    check_value("[\"integer\",\"number\"]", "1.5", "1.5");
    check_value("[\"array\",\"object\"]", "{\"a\":1}", "{\"a\":1}");
}

static void test_qwen3coder_anyof(void **state)
{
    (void)state;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
                        "\"type\":\"object\",\"properties\":{\"p\":{\"anyOf\":[{\"type\":"
                        "\"integer\"},{\"type\":\"null\"}]}}}}}]";
    struct parsed r;
    parse_steps(&r, "qwen3-coder", tools, NULL, NULL,
                (const char *[]){"<tool_call><function=f><parameter=p>\n5\n</parameter></function>"
                                 "</tool_call>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{\"p\":5}}}]");
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// qwen3 / qwen3-thinking parsers (model/parsers/qwen3_test.go)

static void test_qwen3_parser(void **state)
{
    (void)state;
    struct renderer_think on = {.set = true, .on = true}, off = {.set = true, .on = false};
    struct parsed r;
    // Thinking on: starts inside the thinking.
    parse_steps(&r, "qwen3-thinking", NULL, NULL, &on,
                (const char *[]){"Let me think", "...</think>Answer.", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "Let me think...");
    assert_string_equal(buf_cstr(&r.content), "Answer.");
    parsed_deinit(&r);
    // An explicit opening tag, split across pieces.
    parse_steps(&r, "qwen3-thinking", NULL, NULL, &on,
                (const char *[]){"<thi", "nk>\nPlan</th", "ink>\n\nDone", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "Plan");
    assert_string_equal(buf_cstr(&r.content), "Done");
    parsed_deinit(&r);
    // Thinking off, and the instruct parser: all content.
    parse_steps(&r, "qwen3-thinking", NULL, NULL, &off, (const char *[]){"Plain answer", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "");
    assert_string_equal(buf_cstr(&r.content), "Plain answer");
    parsed_deinit(&r);
    parse_steps(&r, "qwen3", NULL, NULL, NULL, (const char *[]){"<think>x</think>y", NULL});
    assert_string_equal(buf_cstr(&r.content), "<think>x</think>y");
    parsed_deinit(&r);
    // Tool calls (JSON), index counting, and a split opening tag.
    parse_steps(&r, "qwen3", NULL, NULL, NULL,
                (const char *[]){"Calling <tool_",
                                 "call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}"
                                 "\n</tool_call><tool_call>{\"name\":\"b\",\"arguments\":{}}"
                                 "</tool_call>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.content), "Calling");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"a\",\"arguments\":{\"x\":1}}},"
                          "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{}}}]");
    parsed_deinit(&r);
    // A tool call before the thinking closes ends the thinking.
    parse_steps(&r, "qwen3-thinking", NULL, NULL, &on,
                (const char *[]){"I should call it <tool_call>{\"name\":\"a\",\"arguments\":{}}"
                                 "</tool_call>",
                                 NULL});
    assert_string_equal(buf_cstr(&r.thinking), "I should call it");
    assert_int_equal(json_array_size(r.calls), 1);
    parsed_deinit(&r);
    // Invalid JSON is an error.
    parse_steps(&r, "qwen3", NULL, NULL, NULL,
                (const char *[]){"<tool_call>{oops}</tool_call>", NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    parsed_deinit(&r);
}

static void test_passthrough(void **state)
{
    (void)state;
    expect_content("passthrough", (const char *[]){"<tool_call> a ", " b\n", NULL},
                   "<tool_call> a  b\n");
}

// ---------------------------------------------------------------------------
// harmony

static void test_harmony_parser(void **state)
{
    (void)state;
    struct parsed r;
    // analysis → thinking, final → content; the prompt ended with
    // "<|start|>assistant".
    parse_steps(&r, "harmony", NULL, NULL, NULL,
                (const char *[]){"<|channel|>analysis<|message|>Thinking about the request<|end|>"
                                 "<|start|>assistant<|channel|>final<|message|>The answer is 4"
                                 "<|end|>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Thinking about the request");
    assert_string_equal(buf_cstr(&r.content), "The answer is 4");
    parsed_deinit(&r);

    // Streamed with splits inside every marker.
    parse_steps(&r, "harmony", NULL, NULL, NULL,
                (const char *[]){"<|chan", "nel|>analy", "sis<|mess", "age|>Hmm", " ok<|e", "nd",
                                 "|><|st", "art|>assistant<|channel|>final<|message|>Hi <", "|",
                                 "done", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "Hmm ok");
    assert_string_equal(buf_cstr(&r.content), "Hi <|done");
    parsed_deinit(&r);

    // A tool call: commentary to=functions.NAME, renamed back to the user's
    // name; arguments decoded at the end.
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get-weather\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
    parse_steps(&r, "harmony", tools, NULL, NULL,
                (const char *[]){"<|channel|>analysis<|message|>Need weather.<|end|><|start|>"
                                 "assistant<|channel|>commentary to=functions.get_weather "
                                 "<|constrain|>json<|message|>{\"city\":",
                                 " \"Paris\"}", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Need weather.");
    assert_string_equal(buf_cstr(&r.content), "");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get-weather\",\"arguments\":"
                          "{\"city\":\"Paris\"}}}]");
    parsed_deinit(&r);

    // Recipient before the channel; role "to=" form.
    parse_steps(&r, "harmony", NULL, NULL, NULL,
                (const char *[]){" to=functions.calc<|channel|>commentary<|message|>{}", NULL});
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"calc\",\"arguments\":{}}}]");
    parsed_deinit(&r);

    // Prefill of a final answer: the output continues the content.
    parse_steps(&r, "harmony", NULL, "{\"role\":\"assistant\",\"content\":\"The answer\"}", NULL,
                (const char *[]){" is 4<|end|>", NULL});
    assert_string_equal(buf_cstr(&r.content), " is 4");
    parsed_deinit(&r);

    // Bad tool JSON is an error with Ollama's wording.
    parse_steps(&r, "harmony", NULL, NULL, NULL,
                (const char *[]){"<|channel|>commentary to=functions.f<|message|>{nope", NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    assert_non_null(strstr(r.e.msg, "error parsing tool call: raw='{nope'"));
    parsed_deinit(&r);
}

static void test_harmony_names(void **state)
{
    (void)state;
    struct {
        const char *in, *want;
    } cases[] = {
        {"[\"get weather\"]", "[\"get_weather\"]"},
        {"[\"get-weather\"]", "[\"get_weather\"]"},
        {"[\"get weather!\"]", "[\"get_weather\"]"},
        {"[\"a\\ud83e\\udee0bc\"]", "[\"abc\"]"},
        {"[\"\\ud83e\\udee0\"]", "[\"unnamed\"]"},
        {"[\"123\"]", "[\"_123\"]"},
        {"[\"$\"]", "[\"$\"]"},
        {"[\"\\u24de\\u24db123\"]", "[\"_123\"]"},
        {"[\"get weather\",\"get_weather\",\"get-weather\",\"something-different\"]",
         "[\"get_weather\",\"get_weather_2\",\"get_weather_3\",\"something_different\"]"},
        {"[\"a\",\"a\",\"b\",\"a\",\"a\",\"b\",\"a\"]",
         "[\"a\",\"a_2\",\"b\",\"a_3\",\"a_4\",\"b_2\",\"a_5\"]"},
        {"[\"browser.open\",\"python\",\"not.a.built-in.function\"]",
         "[\"browser.open\",\"python\",\"not_a_built_in_function\"]"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        json_t *names = J(cases[c].in), *want = J(cases[c].want);
        json_t *tools = json_array();
        size_t i;
        json_t *nm;
        json_array_foreach(names, i, nm) json_array_append_new(
            tools, json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", nm));
        struct renderer_parser *p = NULL;
        assert_int_equal(renderer_parser_new(&p, "harmony", tools, NULL, NULL, NULL), 0);
        json_t *pt = renderer_parser_prompt_tools(p);
        json_array_foreach(want, i, nm)
        {
            const char *got = json_string_value(
                json_object_get(json_object_get(json_array_get(pt, i), "function"), "name"));
            assert_string_equal(got, json_string_value(nm));
        }
        // The caller's tools are untouched.
        assert_true(json_equal(
            json_object_get(json_object_get(json_array_get(tools, 0), "function"), "name"),
            json_array_get(names, 0)));
        json_decref(pt);
        renderer_parser_free(p);
        json_decref(tools);
        json_decref(names);
        json_decref(want);
    }
}

static void today(char out[32])
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(out, 32, "%Y-%m-%d", &tm);
}

static void test_harmony_render(void **state)
{
    (void)state;
    char date[32], want[4096];
    today(date);
    struct renderer_think high = {.set = true, .on = true, .level = "high"};
    char *got =
        render("harmony", "[{\"role\":\"user\",\"content\":\"What is 2 + 2?\"}]", NULL, &high);
    snprintf(want, sizeof(want),
             "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
             "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\nReasoning: high\n\n# Valid "
             "channels: analysis, commentary, final. Channel must be included for every message."
             "<|end|><|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant",
             date);
    assert_string_equal(got, want);
    free(got);

    // think:false drops the Reasoning line (the model still reasons: gpt-oss
    // cannot turn it off); tools, the system text, history with a call.
    struct renderer_think off = {.set = true, .on = false};
    got = render(
        "harmony",
        "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"thinking\":\"Call it.\",\"tool_calls\":[{\"function\":{"
        "\"name\":\"get_weather\",\"arguments\":{\"unit\":\"c\",\"city\":\"Paris\"}}}]},"
        "{\"role\":\"tool\",\"tool_name\":\"get_weather\",\"content\":\"18C\"}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
        "the weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"unit\":{\"type\":"
        "\"string\",\"enum\":[\"c\",\"f\"]},\"city\":{\"type\":\"string\",\"description\":\"The "
        "city\"},\"days\":{\"type\":[\"integer\",\"null\"]}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]",
        &off);
    snprintf(want, sizeof(want),
             "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
             "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\n# Valid channels: analysis, "
             "commentary, final. Channel must be included for every message.\nCalls to these "
             "tools must go to the commentary channel: 'functions'.<|end|>"
             "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n"
             "// Get the weather\ntype get_weather = (_: {\n  // The city\n  city: string,\n"
             "  days: number | null,\n  unit: string,\n}) => any;\ntype now = () => any;\n\n"
             "} // namespace functions\n\n# Instructions\n\nBe brief.<|end|>"
             "<|start|>user<|message|>Weather in Paris?<|end|>"
             "<|start|>assistant<|channel|>analysis<|message|>Call it.<|end|>"
             "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
             "<|message|>{\"city\":\"Paris\",\"unit\":\"c\"}<|call|>"
             "<|start|>functions.get_weather to=assistant<|message|>18C<|end|>"
             "<|start|>assistant",
             date);
    assert_string_equal(got, want);
    free(got);

    // Thinking of turns before the last user message is dropped; no think
    // value means medium.
    got = render("harmony",
                 "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"thinking\":"
                 "\"old\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]",
                 NULL, NULL);
    assert_non_null(strstr(got, "\n\nReasoning: medium\n\n"));
    assert_null(strstr(got, "old"));
    assert_non_null(strstr(got, "<|start|>assistant<|channel|>final<|message|>b<|end|>"
                                "<|start|>user<|message|>c<|end|><|start|>assistant"));
    free(got);
}

// ---------------------------------------------------------------------------
// qwen3.5 / qwen3.8 (model/renderers/qwen35_test.go, qwen38_test.go,
// model/parsers/qwen35_test.go)

static const char q35_math_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"description\":\"Add two numbers\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{"
    "\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}}]";

static void test_qwen35_render(void **state)
{
    (void)state;
    // Tools as Go marshals api.Tool (struct order: required before
    // properties), with spaces; the system prompt after the tool text;
    // back-to-back calls and tool results; the thinking of a turn before the
    // last query is not shown; the prompt ends in an open think block.
    char *got =
        render("qwen3.5",
               "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
               "{\"role\":\"user\",\"content\":\"Run add.\"},"
               "{\"role\":\"assistant\",\"content\":\"I'll run it.\",\"thinking\":\"Need add.\","
               "\"tool_calls\":[{\"function\":{\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}},"
               "{\"function\":{\"name\":\"add\",\"arguments\":{\"a\":4,\"b\":5}}}]},"
               "{\"role\":\"tool\",\"content\":\"5\"},{\"role\":\"tool\",\"content\":\"9\"},"
               "{\"role\":\"user\",\"content\":\"Summarize.\"}]",
               q35_math_tools, NULL);
    const char *want_head =
        "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": \"Add two "
        "numbers\", \"parameters\": {\"type\": \"object\", \"required\": [\"a\", \"b\"], "
        "\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}}}}\n"
        "</tools>\n\nIf you choose";
    assert_memory_equal(got, want_head, strlen(want_head));
    const char *want_tail =
        "</IMPORTANT>\n\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nRun add.<|im_end|>\n"
        "<|im_start|>assistant\nI'll run it.\n\n<tool_call>\n<function=add>\n<parameter=a>\n2\n"
        "</parameter>\n<parameter=b>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
        "<function=add>\n<parameter=a>\n4\n</parameter>\n<parameter=b>\n5\n</parameter>\n"
        "</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n5\n</tool_response>\n<tool_response>\n9\n"
        "</tool_response><|im_end|>\n"
        "<|im_start|>user\nSummarize.<|im_end|>\n<|im_start|>assistant\n<think>\n";
    assert_non_null(strstr(got, want_tail));
    assert_string_equal(strstr(got, want_tail), want_tail);
    free(got);

    // After the last query (tool turns) thinking is shown.
    got = render("qwen3.5",
                 "[{\"role\":\"user\",\"content\":\"Plan a picnic.\"},"
                 "{\"role\":\"assistant\",\"content\":\"Checking weather first.\",\"thinking\":"
                 "\"Need weather.\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\","
                 "\"arguments\":{\"location\":\"Paris\"}}}]},"
                 "{\"role\":\"tool\",\"content\":\"22C\"}]",
                 NULL, NULL);
    assert_string_equal(got, "<|im_start|>user\nPlan a picnic.<|im_end|>\n"
                             "<|im_start|>assistant\n<think>\nNeed weather.\n</think>\n\n"
                             "Checking weather first.\n\n<tool_call>\n<function=get_weather>\n"
                             "<parameter=location>\nParis\n</parameter>\n</function>\n"
                             "</tool_call><|im_end|>\n"
                             "<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n"
                             "<|im_start|>assistant\n<think>\n");
    free(got);

    // Prefill with thinking; think:false closes an empty think block.
    got = render("qwen3.5",
                 "[{\"role\":\"user\",\"content\":\"Write two words.\"},{\"role\":\"assistant\","
                 "\"thinking\":\"Keep it short.\",\"content\":\"Hello world\"}]",
                 NULL, NULL);
    assert_string_equal(got, "<|im_start|>user\nWrite two words.<|im_end|>\n<|im_start|>assistant"
                             "\n<think>\nKeep it short.\n</think>\n\nHello world");
    free(got);
    struct renderer_think off = {.set = true, .on = false};
    got = render("qwen3.5", "[{\"role\":\"user\",\"content\":\"hello\"}]", NULL, &off);
    assert_string_equal(got, "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>"
                             "\n\n</think>\n\n");
    free(got);
    // Reasoning in the content (<think>…</think>) is split out.
    got = render("qwen3.5",
                 "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
                 "\"<think>\\nr\\n</think>\\n\\nanswer\"},{\"role\":\"tool\",\"content\":\"t\"}]",
                 NULL, NULL);
    assert_non_null(strstr(got, "<|im_start|>assistant\n<think>\nr\n</think>\n\nanswer<|im_end|>"));
    free(got);
}

static void test_qwen38_render(void **state)
{
    (void)state;
    struct {
        struct renderer_think think;
        bool set;
        const char *want;
    } cases[] = {
        {{0},
         false,
         "<|im_start|>system\nReasoning effort is set to xhigh. Please think carefully through "
         "the task, validate key assumptions, consider plausible alternatives, and prioritize "
         "correctness, consistency, and clarity in the final answer.<|im_end|>\n"},
        {{.set = true, .on = true}, true, ""},
        {{.set = true, .on = false}, true, ""},
        {{.set = true, .on = true, .level = "medium"}, true, ""},
        {{.set = true, .on = true, .level = "low"},
         true,
         "<|im_start|>system\nReasoning effort is set to low. Keep your thinking brief and "
         "focused, moving directly to the conclusion without unnecessary elaboration.<|im_end|>\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = render("qwen3.8", "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL,
                           cases[i].set ? &cases[i].think : NULL);
        assert_memory_equal(got, cases[i].want, strlen(cases[i].want));
        assert_non_null(strstr(got, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
        free(got);
    }
    // System and developer messages fold into one leading system turn; the
    // assistant's think block is always shown.
    struct renderer_think on = {.set = true, .on = true};
    char *got = render("qwen3.8",
                       "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"system\",\"content\":"
                       "\" s1 \"},{\"role\":\"developer\",\"content\":\"s2\"},{\"role\":"
                       "\"assistant\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]",
                       NULL, &on);
    assert_string_equal(got, "<|im_start|>system\ns1\n\ns2<|im_end|>\n<|im_start|>user\na<|im_end|>"
                             "\n<|im_start|>assistant\n<think>\n\n</think>\n\nb<|im_end|>\n"
                             "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n<think>\n");
    free(got);
    // Invalid transcripts.
    struct {
        const char *msgs, *err;
    } bad[] = {
        {"[]", "no messages provided"},
        {"[{\"role\":\"system\",\"content\":\"Hello\"}]", "no user query found in messages"},
        {"[{\"role\":\"system\",\"images\":[\"AQ==\"]},{\"role\":\"user\",\"content\":\"x\"}]",
         "system message cannot contain images"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *m = J(bad[i].msgs);
        struct buf out;
        buf_init(&out, 0);
        struct err e = {0};
        assert_int_equal(renderer_render("qwen3.8", m, NULL, NULL, &out, &e), ERR_INVALID);
        assert_string_equal(e.msg, bad[i].err);
        buf_deinit(&out);
        json_decref(m);
    }
}

static void test_qwen35_parser(void **state)
{
    (void)state;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"parameters\":{\"properties\":{\"location\":{\"type\":\"string\"}}}}}]";
    struct renderer_think on = {.set = true, .on = true}, off = {.set = true, .on = false};
    struct parsed r;
    // A tool call inside the thinking ends it.
    parse_steps(&r, "qwen3.5", tools, NULL, &on,
                (const char *[]){"Need weather lookup<tool_c",
                                 "all><function=get_weather><parameter=location>\nSF\n</parameter>"
                                 "</function></tool_call>",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Need weather lookup");
    assert_string_equal(buf_cstr(&r.content), "");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"location\":\"SF\"}}}]");
    parsed_deinit(&r);
    // A partial tool tag that was thinking after all.
    parse_steps(&r, "qwen3.5", tools, NULL, &on,
                (const char *[]){"Need weather lookup<tool_c", "</thi", "nk>", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "Need weather lookup<tool_c");
    assert_string_equal(buf_cstr(&r.content), "");
    parsed_deinit(&r);
    // Explicit opening tag; white space after the close is eaten.
    parse_steps(&r, "qwen3.5", NULL, NULL, NULL,
                (const char *[]){"<think>\n", "plan</think>", "\n\n", "Hi there", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "plan");
    assert_string_equal(buf_cstr(&r.content), "Hi there");
    parsed_deinit(&r);
    // Thinking off, and an assistant prefill: content from the start.
    parse_steps(&r, "qwen3.5", NULL, NULL, &off, (const char *[]){"a</think>b", NULL});
    assert_string_equal(buf_cstr(&r.content), "a</think>b");
    parsed_deinit(&r);
    parse_steps(&r, "qwen3.5", NULL, "{\"role\":\"assistant\",\"content\":\"Hel\"}", &on,
                (const char *[]){"lo", NULL});
    assert_string_equal(buf_cstr(&r.content), "lo");
    assert_string_equal(buf_cstr(&r.thinking), "");
    parsed_deinit(&r);
    // A call after the thinking.
    parse_steps(&r, "qwen3.5", tools, NULL, &on,
                (const char *[]){"x</think>\nok <tool_call>\n<function=get_weather>\n"
                                 "<parameter=location>\nNY\n</parameter>\n</function>\n"
                                 "</tool_call>",
                                 NULL});
    assert_string_equal(buf_cstr(&r.thinking), "x");
    assert_string_equal(buf_cstr(&r.content), "ok");
    assert_int_equal(json_array_size(r.calls), 1);
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// deepseek3.1 / deepseek3 (model/renderers/deepseek3_test.go,
// model/parsers/deepseek3_test.go)

#define DSB  "<｜begin▁of▁sentence｜>"
#define DSE  "<｜end▁of▁sentence｜>"
#define DSU  "<｜User｜>"
#define DSA  "<｜Assistant｜>"
#define DSC  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
#define DSS  "<｜tool▁sep｜>"
#define DSCE "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"

static void test_deepseek3_render(void **state)
{
    (void)state;
    struct renderer_think on = {.set = true, .on = true}, off = {.set = true, .on = false};
    struct {
        const char *msgs, *tools;
        const struct renderer_think *think;
        const char *want;
    } cases[] = {
        {"[{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]", NULL, NULL,
         DSB DSU "Hello, how are you?" DSA "</think>"},
        {"[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},{\"role\":\"user\","
         "\"content\":\"Hello, how are you?\"}]",
         NULL, &on, DSB "You are a helpful assistant." DSU "Hello, how are you?" DSA "<think>"},
        {"[{\"role\":\"user\",\"content\":\"What's the weather?\"},{\"role\":\"assistant\","
         "\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"location\":"
         "\"Paris\"}}}]},{\"role\":\"tool\",\"content\":\"Temperature: 22°C, Sunny\"}]",
         NULL, NULL,
         DSB DSU "What's the weather?" DSA "</think>" DSC "get_weather" DSS
                 "{\"location\":\"Paris\"}" DSCE DSE
                 "<｜tool▁output▁begin｜>Temperature: 22°C, Sunny<｜tool▁output▁end｜>"},
        {"[{\"role\":\"user\",\"content\":\"Think about this\"},{\"role\":\"assistant\","
         "\"content\":\"I'm thinking about this.</think>The answer is 42.\"}]",
         NULL, &off, DSB DSU "Think about this" DSA "</think>The answer is 42." DSE},
        {"[{\"role\":\"user\",\"content\":\"Complex question\"},{\"role\":\"assistant\","
         "\"content\":\"First thought</think>Second thought</think>Final answer\"}]",
         NULL, &off,
         DSB DSU "Complex question" DSA "</think>Second thought</think>Final answer" DSE},
        {"[{\"role\":\"user\",\"content\":\"Process data\"},{\"role\":\"assistant\","
         "\"tool_calls\":[{\"function\":{\"name\":\"process\",\"arguments\":{\"data\":\"test\"}}}]}"
         ","
         "{\"role\":\"tool\",\"content\":\"Success\"},{\"role\":\"assistant\",\"content\":"
         "\"Done\"}]",
         NULL, &off,
         DSB DSU "Process data" DSA "</think>" DSC "process" DSS "{\"data\":\"test\"}" DSCE DSE
                 "<｜tool▁output▁begin｜>Success<｜tool▁output▁end｜>Done" DSE},
        {"[]", NULL, NULL, DSB},
        {"[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},{\"role\":\"user\","
         "\"content\":\"What's the weather like?\"}]",
         "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
         "current weather information\",\"parameters\":{\"type\":\"object\",\"properties\":{"
         "\"location\":{\"type\":\"string\",\"description\":\"City name\"}},\"required\":["
         "\"location\"]}}}]",
         &off,
         DSB "You are a helpful assistant.\n\n## Tools\nYou have access to the following "
             "tools:\n\n### get_weather\nDescription: Get current weather information\n\n"
             "Parameters: {\"type\":\"object\",\"required\":[\"location\"],\"properties\":{"
             "\"location\":{\"type\":\"string\",\"description\":\"City name\"}}}\n\nIMPORTANT: "
             "ALWAYS adhere to this exact format for tool use:\n<｜tool▁calls▁begin｜>"
             "<｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"
             "<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\nWhere:\n\n"
             "- `tool_call_name` must be an exact match to one of the available tools\n"
             "- `tool_call_arguments` must be valid JSON that strictly follows the tool's "
             "Parameters Schema\n- For multiple tool calls, chain them directly without "
             "separators or spaces\n" DSU "What's the weather like?" DSA "</think>"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = render("deepseek3.1", cases[i].msgs, cases[i].tools, cases[i].think);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
}

static void test_deepseek3_parser(void **state)
{
    (void)state;
    struct renderer_think on = {.set = true, .on = true};
    struct parsed r;
    parse_steps(&r, "deepseek3", NULL, NULL, &on,
                (const char *[]){"I should check.  </th",
                                 "ink>\n\nLet me look."
                                 "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
                                 "<｜tool▁sep｜>{\"location\": \"Paris\"}<｜tool▁call▁end｜>"
                                 "<｜tool▁call▁begin｜>b<｜tool▁sep｜>{}",
                                 "<｜tool▁call▁end｜><｜tool▁calls▁end｜> after", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "I should check.");
    assert_string_equal(buf_cstr(&r.content), "Let me look.after");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"location\":\"Paris\"}}},{\"function\":{\"index\":1,\"name\":\"b\","
                          "\"arguments\":{}}}]");
    parsed_deinit(&r);
    // Thinking off: content (tool outputs included as content).
    parse_steps(&r, "deepseek3", NULL, NULL, NULL,
                (const char *[]){"a <｜tool▁output▁begin｜>out<｜tool▁output▁end｜> b", NULL});
    assert_string_equal(buf_cstr(&r.content), "a out b");
    assert_string_equal(buf_cstr(&r.thinking), "");
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// cogito (model/renderers/cogito_test.go, model/parsers/cogito_test.go)

#define COG                                                                                        \
    "You are Cogito, an AI assistant created by Deep Cogito, which is an AI research lab based "   \
    "in San Francisco."

static void test_cogito_render(void **state)
{
    (void)state;
    struct renderer_think on = {.set = true, .on = true}, off = {.set = true, .on = false};
    struct {
        const char *msgs, *tools;
        const struct renderer_think *think;
        const char *want;
    } cases[] = {
        {"[{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]", NULL, NULL,
         DSB COG DSU "Hello, how are you?" DSA},
        {"[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},{\"role\":\"user\","
         "\"content\":\"Hello, how are you?\"}]",
         NULL, &on,
         DSB "Enable deep thinking subroutine.\n\n" COG "\n\nYou are a helpful assistant.\n\n" DSU
             "Hello, how are you?" DSA "<think>\n"},
        {"[{\"role\":\"user\",\"content\":\"What's the weather like?\"}]",
         "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
         "current weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"location\":{"
         "\"type\":\"string\",\"description\":\"City name\"}},\"required\":[\"location\"]}}}]",
         &off,
         DSB COG "\nYou have the following functions available:\n```json\n{\n    \"type\": "
                 "\"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
                 "        \"description\": \"Get current weather\",\n        \"parameters\": {\n"
                 "            \"type\": \"object\",\n            \"required\": [\n"
                 "                \"location\"\n            ],\n            \"properties\": {\n"
                 "                \"location\": {\n                    \"type\": \"string\",\n"
                 "                    \"description\": \"City name\"\n                }\n"
                 "            }\n        }\n    }\n}\n```\n" DSU "What's the weather like?" DSA},
        {"[{\"role\":\"user\",\"content\":\"Get weather for Paris and London\"},{\"role\":"
         "\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{"
         "\"location\":\"Paris\"}}},{\"function\":{\"name\":\"get_weather\",\"arguments\":{"
         "\"location\":\"London\"}}}]},{\"role\":\"tool\",\"content\":\"Paris: 22°C, Sunny\"},"
         "{\"role\":\"tool\",\"content\":\"London: 18°C, Cloudy\"}]",
         NULL, &off,
         DSB COG DSU
         "Get weather for Paris and London" DSA
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
         "{\"location\":\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
         "<｜tool▁sep｜>get_weather\n```json\n{\"location\":\"London\"}\n```"
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>" DSE
         "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>Paris: 22°C, Sunny"
         "<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>London: 18°C, Cloudy"
         "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>" DSA},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = render("cogito", cases[i].msgs, cases[i].tools, cases[i].think);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
}

static void test_cogito_parser(void **state)
{
    (void)state;
    struct renderer_think on = {.set = true, .on = true};
    struct parsed r;
    parse_steps(
        &r, "cogito", NULL, NULL, &on,
        (const char *[]){"Let me think.</think>Answer <｜tool▁calls▁begin｜>"
                         "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                         "{\"location\":\"Paris\"}\n```<｜tool▁call▁end｜>",
                         "<｜tool▁calls▁end｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                         "x<｜tool▁output▁end｜><｜tool▁outputs▁end｜> done",
                         NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Let me think.");
    assert_string_equal(buf_cstr(&r.content), "Answerdone");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"location\":\"Paris\"}}}]");
    parsed_deinit(&r);
    // With tools, cogito starts in the content even when thinking.
    parse_steps(&r, "cogito", "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", NULL, &on,
                (const char *[]){"plain", NULL});
    assert_string_equal(buf_cstr(&r.content), "plain");
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// olmo3 family (model/renderers/olmo3*_test.go, model/parsers/olmo3*_test.go)

static const char olmo_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the "
    "current weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"location\"],"
    "\"properties\":{\"location\":{\"type\":\"string\",\"description\":\"The city\"}}}}}]";
#define OLMO_FUNCS                                                                                 \
    "<functions>[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "              \
    "\"description\": \"Get the current weather\", \"parameters\": {\"type\": \"object\", "        \
    "\"required\": [\"location\"], \"properties\": {\"location\": {\"type\": \"string\", "         \
    "\"description\": \"The city\"}}}}}]</functions>"

static void test_olmo3_render(void **state)
{
    (void)state;
    char *got = render(
        "olmo3",
        "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
        "{\"role\":\"user\",\"content\":\"What is the weather in SF?\"},"
        "{\"role\":\"assistant\",\"content\":\"Let me check the weather.\",\"tool_calls\":[{"
        "\"id\":\"call_1\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"location\":"
        "\"San Francisco\"}}},{\"function\":{\"name\":\"f\",\"arguments\":{\"z\":1,\"a\":[true]}}}"
        "]},{\"role\":\"tool\",\"content\":\"{\\\"temperature\\\": 68}\",\"tool_name\":"
        "\"get_weather\"}]",
        olmo_tools, NULL);
    assert_string_equal(got, "<|im_start|>system\nYou are a helpful assistant." OLMO_FUNCS
                             "<|im_end|>\n<|im_start|>user\nWhat is the weather in SF?<|im_end|>\n"
                             "<|im_start|>assistant\nLet me check the weather.<function_calls>"
                             "get_weather(location=\"San Francisco\")\nf(a=[true], z=1)"
                             "</function_calls><|im_end|>\n<|im_start|>environment\n"
                             "{\"temperature\": 68}<|im_end|>\n<|im_start|>assistant\n");
    free(got);
    got = render("olmo3", "[{\"role\":\"user\",\"content\":\"What is the weather?\"}]", olmo_tools,
                 NULL);
    assert_string_equal(
        got, "<|im_start|>system\nYou are a helpful function-calling AI assistant. You are "
             "provided with function signatures within <functions></functions> XML tags. You may "
             "call one or more functions to assist with the user query. Output any function calls "
             "within <function_calls></function_calls> XML tags. Do not make assumptions about "
             "what values to plug into functions." OLMO_FUNCS "<|im_end|>\n<|im_start|>user\n"
             "What is the weather?<|im_end|>\n<|im_start|>assistant\n");
    free(got);
    // No tools, and a prefill.
    got = render("olmo3.1",
                 "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":"
                 "\"Hel\"}]",
                 NULL, NULL);
    assert_string_equal(got, "<|im_start|>system\nYou are Olmo, a helpful AI assistant built by "
                             "Ai2. Your date cutoff is December 2024, and your model weights are "
                             "available at https://huggingface.co/allenai. You do not currently "
                             "have access to any functions. <functions></functions><|im_end|>\n"
                             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel");
    free(got);
    got = render("olmo3-32b-think",
                 "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"tool\",\"content\":\"x\"}]",
                 NULL, NULL);
    assert_string_equal(got, "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n"
                             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>");
    free(got);
    got = render("olmo3-think",
                 "[{\"role\":\"system\",\"content\":\"Be nice.\"},{\"role\":\"user\",\"content\":"
                 "\"Hi\"}]",
                 NULL, NULL);
    assert_string_equal(got, "<|im_start|>system\nBe nice. You do not currently have access to any "
                             "functions. <functions></functions><|im_end|>\n<|im_start|>user\nHi"
                             "<|im_end|>\n<|im_start|>assistant\n<think>");
    free(got);
}

static void test_olmo3_parser(void **state)
{
    (void)state;
    struct parsed r;
    parse_steps(&r, "olmo3", NULL, NULL, NULL,
                (const char *[]){"Let me check.<function_ca",
                                 "lls>get_weather(location=\"San Francisco\", days=3, f=1.5, "
                                 "ok=True, n=None, l=[1, 'a'], d={'k': \"v\"}, s='it\\'s')\n"
                                 "other()</function_calls> Done.",
                                 "", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.content), "Let me check. Done.");
    ASSERT_CALLS(r.calls,
                 "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                 "\"location\":\"San Francisco\",\"days\":3,\"f\":1.5,\"ok\":true,\"n\":null,"
                 "\"l\":[1,\"a\"],\"d\":{\"k\":\"v\"},\"s\":\"it's\"}}},{\"function\":{\"index\":1,"
                 "\"name\":\"other\",\"arguments\":{}}}]");
    parsed_deinit(&r);
    // A malformed line drops the block.
    parse_steps(&r, "olmo3", NULL, NULL, NULL,
                (const char *[]){"<function_calls>not a call</function_calls>", "", NULL});
    assert_int_equal(json_array_size(r.calls), 0);
    parsed_deinit(&r);
    // olmo3-think: thinking until </think>, whatever the think value.
    struct renderer_think off = {.set = true, .on = false};
    parse_steps(&r, "olmo3-think", NULL, NULL, &off,
                (const char *[]){"hmm </thi", "nk>  answer", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "hmm");
    assert_string_equal(buf_cstr(&r.content), "answer");
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// ministral (model/parsers/ministral_test.go)

static void test_ministral_parser(void **state)
{
    (void)state;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"update_config\"}}]";
    struct parsed r;
    parse_steps(&r, "ministral", tools, NULL, NULL,
                (const char *[]){"Hello,", " let me check. [TOOL_", "CALLS]get_weather[AR",
                                 "GS]{\"location\": \"San Francisco\"}[TOOL_CALLS]update_config"
                                 "[ARGS]{\"settings\": {\"user\": {\"name\": \"}{\"}}, \"x\": [1]}",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.content), "Hello, let me check.");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"location\":\"San Francisco\"}}},{\"function\":{\"index\":1,\"name\":"
                          "\"update_config\",\"arguments\":{\"settings\":{\"user\":{\"name\":"
                          "\"}{\"}},\"x\":[1]}}}]");
    parsed_deinit(&r);
    parse_steps(&r, "ministral", tools, NULL, NULL,
                (const char *[]){"[THINK]hmm[/TH", "INK]  ok", NULL});
    assert_string_equal(buf_cstr(&r.thinking), "hmm");
    assert_string_equal(buf_cstr(&r.content), "ok");
    parsed_deinit(&r);
    parse_steps(&r, "ministral", tools, NULL, NULL,
                (const char *[]){"[TOOL_CALLS]nope[ARGS]{}", NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    assert_string_equal(r.e.msg, "tool 'nope' not found");
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// glm-4.7 (model/renderers/glm47_test.go, model/parsers/glm4*_test.go)

static void test_glm47(void **state)
{
    (void)state;
    struct renderer_think off = {.set = true, .on = false};
    char *got = render("glm-4.7", "[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL, &off);
    assert_string_equal(got, "[gMASK]<sop><|user|>Hello<|assistant|></think>");
    free(got);
    got = render(
        "glm-4.7",
        "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":"
        "\"Let me check\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{"
        "\"location\":\"Tokyo\",\"days\":2}}}]},{\"role\":\"tool\",\"content\":"
        "\"{\\\"temperature\\\":22}\"},{\"role\":\"assistant\",\"thinking\":\"ok\",\"content\":"
        "\"It is 22C.\"}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
        "weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"location\"],\"properties\":"
        "{\"location\":{\"type\":\"string\"}}}}}]",
        NULL);
    assert_string_equal(
        got, "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with "
             "the user query.\n\nYou are provided with function signatures within <tools></tools> "
             "XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
             "\"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": "
             "\"object\", \"required\": [\"location\"], \"properties\": {\"location\": {\"type\": "
             "\"string\"}}}}}\n</tools>\n\nFor each function call, output the function name and "
             "arguments within the following XML format:\n<tool_call>{function-name}<arg_key>"
             "{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}"
             "</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call><|user|>Weather?"
             "<|assistant|></think>Let me check<tool_call>get_weather<arg_key>location</arg_key>"
             "<arg_value>Tokyo</arg_value><arg_key>days</arg_key><arg_value>2</arg_value>"
             "</tool_call><|observation|><tool_response>{\"temperature\":22}</tool_response>"
             "<|assistant|><think>ok</think>It is 22C.<|assistant|><think>");
    free(got);

    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"parameters\":{\"required\":[\"location\"],\"properties\":{\"location\":"
                        "{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}}]";
    struct parsed r;
    parse_steps(&r, "glm-4.7", tools, NULL, NULL,
                (const char *[]){"Plan it.</thi",
                                 "nk>\nSure <tool_call>get_weather\n<arg_key>"
                                 "location</arg_key>\n<arg_value>Tokyo</arg_value><arg_key>days"
                                 "</arg_key><arg_value>3</arg_value></tool_",
                                 "call> done", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Plan it.");
    assert_string_equal(buf_cstr(&r.content), "Suredone");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"location\":\"Tokyo\",\"days\":3}}}]");
    parsed_deinit(&r);
    // Thinking off: an explicit <think> block may still open the output; a
    // call cut off at the end is completed when it names its required args.
    parse_steps(&r, "glm-4.7", tools, NULL, &off,
                (const char *[]){"<think>x</think>y<tool_call>get_weather<arg_key>location"
                                 "</arg_key><arg_value>Oslo</arg_value></tool",
                                 "", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "x");
    assert_string_equal(buf_cstr(&r.content), "y");
    assert_int_equal(json_array_size(r.calls), 1);
    parsed_deinit(&r);
    parse_steps(&r, "glm-4.7", tools, NULL, &off,
                (const char *[]){"<tool_call>get_weather<arg_key>days</arg_key><arg_value>1"
                                 "</arg_value>",
                                 "", NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    assert_non_null(strstr(r.e.msg, "required argument \"location\" is missing"));
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// Ollama's expectation tables (tests/fixtures/renderer/ollama_cases.json)

static void test_ollama_cases(void **state)
{
    (void)state;
    char path[1024];
    test_fixture(path, sizeof(path), "renderer/ollama_cases.json");
    json_error_t je;
    json_t *cases = json_load_file(path, 0, &je);
    if (!cases)
        fail_msg("%s: %s", path, je.text);
    assert_true(json_array_size(cases) >= 50);
    size_t i, failed = 0;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *name = rnd_test_str(c, "renderer");
        json_t *think = json_object_get(c, "think");
        struct renderer_think th = {0};
        if (json_is_boolean(think)) {
            th.set = true;
            th.on = json_is_true(think);
        } else if (json_is_string(think)) {
            th.set = th.on = true;
            th.level = json_string_value(think);
        }
        struct buf out;
        buf_init(&out, 0);
        struct err e = {0};
        int rc = renderer_render(name, json_object_get(c, "messages"), NULL,
                                 json_is_null(think) || !think ? NULL : &th, &out, &e);
        const char *want = rnd_test_str(c, "expected");
        if (rc < 0 || strcmp(buf_cstr(&out), want) != 0) {
            fprintf(stderr, "%s / %s:\n got: %s\nwant: %s\n", name, rnd_test_str(c, "name"),
                    rc < 0 ? e.msg : buf_cstr(&out), want);
            failed++;
        }
        buf_deinit(&out);
    }
    json_decref(cases);
    assert_int_equal(failed, 0);
}

// ---------------------------------------------------------------------------
// cohere (model/renderers/cohere_test.go, model/parsers/cohere_test.go)

#define COH_SYS_NO_TOOLS                                                                           \
    "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|># Available Tools\n```json\n[\n\n\n\n]"  \
    "\n```<|END_TEXT|><|END_OF_TURN_TOKEN|>"

static void test_cohere(void **state)
{
    (void)state;
    char *got = render("cohere",
                       "[{\"role\":\"system\",\"content\":\"DEVPREAMBLE\"},{\"role\":\"user\","
                       "\"content\":\"Q1\"},{\"role\":\"assistant\",\"content\":\"A1\","
                       "\"thinking\":\"THINK1\"},{\"role\":\"user\",\"content\":\"Q2\"}]",
                       NULL, NULL);
    assert_string_equal(
        got, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>DEVPREAMBLE\n\n\n\n# Available "
             "Tools\n```json\n[\n\n\n\n]\n```<|END_TEXT|><|END_OF_TURN_TOKEN|>"
             "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>Q1<|END_TEXT|>"
             "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>"
             "THINK1<|END_THINKING|><|START_TEXT|>A1<|END_TEXT|><|END_OF_TURN_TOKEN|>"
             "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>Q2<|END_TEXT|>"
             "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>");
    free(got);
    got = render(
        "cohere",
        "[{\"role\":\"user\",\"content\":\"weather in Paris?\"},{\"role\":\"assistant\","
        "\"thinking\":\"I should call the tool\",\"tool_calls\":[{\"id\":\"call_x\",\"function\":"
        "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\","
        "\"tool_call_id\":\"call_x\",\"content\":\"15C sunny\"},{\"role\":\"user\",\"content\":"
        "\"thanks\"}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
        "weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{"
        "\"city\":{\"type\":\"string\"}}}}}]",
        NULL);
    assert_non_null(strstr(
        got,
        "# Available Tools\n```json\n[\n\n    {\"name\": \"get_weather\", \"description\": "
        "\"Get weather\", \"parameters\": {\"type\": \"object\", \"required\": [\"city\"], "
        "\"properties\": {\"city\": {\"type\": \"string\"}}}, \"responses\": null}\n\n\n]\n```"));
    assert_non_null(strstr(
        got, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>\n            \n                "
             "<|START_THINKING|>I should call the tool<|END_THINKING|><|START_ACTION|>[\n\n    "
             "{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": "
             "\"Paris\"}}\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>"));
    assert_non_null(strstr(
        got, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[\n    {\n        "
             "\"tool_call_id\": \"0\",\n        \"results\": {\n\n            \n            \"0\": "
             "{\"content\": \"15C sunny\"}\n\n        },\n        \"is_error\": null\n    }\n\n]"
             "<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>"));
    free(got);
    struct renderer_think off = {.set = true, .on = false};
    got = render("cohere",
                 "[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"assistant\",\"content\":"
                 "\"partial\"}]",
                 NULL, &off);
    assert_string_equal(got, COH_SYS_NO_TOOLS "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>"
                                              "Q<|END_TEXT|><|END_OF_TURN_TOKEN|>"
                                              "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
                                              "<|START_TEXT|>partial");
    free(got);

    struct parsed r;
    parse_steps(&r, "cohere", NULL, NULL, NULL,
                (const char *[]){"Let me think.<|END_THIN",
                                 "KING|><|START_ACTION|>[\n    {"
                                 "\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
                                 "\"parameters\": {\"city\": \"Paris\"}}\n]<|END_ACTION|>",
                                 "<|START_TEXT|>Done<|END_TE", "XT|>", NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "Let me think.");
    assert_string_equal(buf_cstr(&r.content), "Done");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":"
                          "{\"city\":\"Paris\"}}}]");
    parsed_deinit(&r);
    // Thinking off: plain text is content.
    parse_steps(&r, "cohere", NULL, NULL, &off, (const char *[]){"  plain answer", NULL});
    assert_string_equal(buf_cstr(&r.content), "plain answer");
    parsed_deinit(&r);
}

// ---------------------------------------------------------------------------
// lfm2 (model/renderers/lfm2_test.go, model/parsers/lfm2_test.go)

static void test_lfm2(void **state)
{
    (void)state;
    struct renderer_think off = {.set = true, .on = false}, on = {.set = true, .on = true};
    char *got = render("lfm2", "[{\"role\":\"user\",\"content\":\"Use tools\"}]",
                       "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                       "\"parameters\":{\"type\":\"object\"}}}]",
                       &off);
    assert_string_equal(got, "<|startoftext|><|im_start|>system\nList of tools: <|tool_list_start|>"
                             "[{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
                             "\"properties\": null}}]<|tool_list_end|><|im_end|>\n<|im_start|>user"
                             "\nUse tools<|im_end|>\n<|im_start|>assistant\n");
    free(got);
    got = render("lfm2",
                 "[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":\"\","
                 "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"b\":\"<x>\","
                 "\"a\":{\"z\":1,\"y\":[true]}}}}]},{\"role\":\"tool\",\"content\":\"r\"}]",
                 NULL, &off);
    assert_non_null(strstr(got, "<|im_start|>assistant\n<|tool_call_start|>[f(a={\"y\": [true], "
                                "\"z\": 1},b=\"<x>\")]<|tool_call_end|><|im_end|>\n<|im_start|>"
                                "tool\n<|tool_response_start|>r<|tool_response_end|><|im_end|>\n"));
    free(got);

    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]";
    struct parsed r;
    parse_steps(&r, "lfm2-thinking", tools, NULL, &on,
                (const char *[]){"<think>\nplan</think>\nI'll check. <|tool_call_start|>[get_",
                                 "weather(city='Paris', days=2, opts={'a': True}, x=None)]"
                                 "<|tool_call_end|>ok",
                                 NULL});
    assert_int_equal(r.rc, 0);
    assert_string_equal(buf_cstr(&r.thinking), "plan");
    assert_string_equal(buf_cstr(&r.content), "I'll check.ok");
    ASSERT_CALLS(r.calls, "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                          "\"city\":\"Paris\",\"days\":2,\"opts\":{\"a\":true},\"x\":null}}}]");
    parsed_deinit(&r);
    // Without markers, a last piece that is only calls to known tools is
    // calls (Ollama looks at the content of the final Add only).
    parse_steps(&r, "lfm2", tools, NULL, NULL,
                (const char *[]){"[get_weather(city=\"Oslo\")]", NULL});
    assert_string_equal(buf_cstr(&r.content), "");
    assert_int_equal(json_array_size(r.calls), 1);
    parsed_deinit(&r);
    parse_steps(&r, "lfm2", tools, NULL, NULL, (const char *[]){"[other(x=1)]", NULL});
    assert_string_equal(buf_cstr(&r.content), "[other(x=1)]");
    assert_int_equal(json_array_size(r.calls), 0);
    parsed_deinit(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_qwen3coder_basic),
        cmocka_unit_test(test_qwen3coder_tools_and_response),
        cmocka_unit_test(test_qwen3coder_parallel_and_defaults),
        cmocka_unit_test(test_qwen3coder_prefill),
        cmocka_unit_test(test_qwen3coder_parser_streaming),
        cmocka_unit_test(test_qwen3coder_values),
        cmocka_unit_test(test_qwen3coder_anyof),
        cmocka_unit_test(test_qwen3_parser),
        cmocka_unit_test(test_passthrough),
        cmocka_unit_test(test_harmony_parser),
        cmocka_unit_test(test_harmony_names),
        cmocka_unit_test(test_harmony_render),
        cmocka_unit_test(test_qwen35_render),
        cmocka_unit_test(test_qwen38_render),
        cmocka_unit_test(test_qwen35_parser),
        cmocka_unit_test(test_deepseek3_render),
        cmocka_unit_test(test_deepseek3_parser),
        cmocka_unit_test(test_cogito_render),
        cmocka_unit_test(test_cogito_parser),
        cmocka_unit_test(test_olmo3_render),
        cmocka_unit_test(test_olmo3_parser),
        cmocka_unit_test(test_ministral_parser),
        cmocka_unit_test(test_glm47),
        cmocka_unit_test(test_ollama_cases),
        cmocka_unit_test(test_cohere),
        cmocka_unit_test(test_lfm2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

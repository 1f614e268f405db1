// Unit tests for the output formats with their own tool-call syntax
// (src/template/output_llama3.c, output_functionary.c): Llama 3.x's
// <|python_tag|> calls of built-in tools (NAME.call(ARG=VALUE, ...) with
// Python literals, and code) and Functionary v3.2's segments (the first one
// without ">>>"). Each output is parsed whole, split in two and in three at
// every byte and fed one byte at a time: all must give the same thinking,
// content and calls.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/template.h"
#include "testutil.h"

// The format rows are chosen from the template text (llama.cpp's needles).
static const char *llama_jinja =
    "{{- '<|start_header_id|>ipython<|end_header_id|>' }}{{- '<|python_tag|>' }}";
static const char *functionary_jinja = "{{- '>>>all\\n' }}";

static const char *llama_tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"brave_search\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"wolfram_alpha\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"code_interpreter\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get\"}}]";
static const char *functionary_tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"special_function\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"python\"}}]";

// Parses out in pieces cut at `cuts` (ascending byte offsets, -1 ends) and
// returns "thinking|content|name#index(args);..." with the arguments as
// compact JSON, keys sorted.
static char *parse_cut(const char *jinja, const char *tools_text, const char *out, const int *cuts)
{
    json_t *tools = json_loads(tools_text, 0, NULL);
    assert_non_null(tools);
    struct template_output_parser *p = template_output_parser_new_format(
        template_chat_format_detect(jinja), jinja, true, tools, "");
    struct buf th, co;
    buf_init(&th, 0);
    buf_init(&co, 0);
    json_t *calls = json_array();
    size_t at = 0, n = strlen(out);
    for (size_t i = 0; at < n; i++) {
        size_t end = cuts[i] < 0 || (size_t)cuts[i] > n ? n : (size_t)cuts[i];
        if (end > at)
            assert_int_equal(
                template_output_parser_add(p, out + at, end - at, &th, &co, calls, NULL), 0);
        at = end;
    }
    assert_int_equal(template_output_parser_finish(p, &th, &co, calls, NULL), 0);
    struct buf r;
    buf_init(&r, 0);
    buf_printf(&r, "%s|%s|", buf_cstr(&th), buf_cstr(&co));
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *call = json_array_get(calls, i);
        json_t *fn = json_object_get(call, "function");
        assert_non_null(json_string_value(json_object_get(call, "id")));
        char *args = json_dumps(json_object_get(fn, "arguments"), JSON_COMPACT | JSON_SORT_KEYS);
        buf_printf(&r, "%s#%lld(%s);", json_string_value(json_object_get(fn, "name")),
                   (long long)json_integer_value(json_object_get(fn, "index")), args);
        free(args);
    }
    template_output_parser_free(p);
    buf_deinit(&th);
    buf_deinit(&co);
    json_decref(calls);
    json_decref(tools);
    return buf_take(&r);
}

// Whole, split in two and in three at every byte, and one byte at a time:
// the same result.
static void check(const char *jinja, const char *tools, const char *out, const char *want)
{
    int whole[] = {-1};
    char *got = parse_cut(jinja, tools, out, whole);
    if (strcmp(got, want) != 0)
        fail_msg("[%s]: got [%s] want [%s]", out, got, want);
    free(got);
    size_t n = strlen(out);
    for (size_t k = 1; k < n; k++) {
        int cuts[] = {(int)k, -1};
        got = parse_cut(jinja, tools, out, cuts);
        if (strcmp(got, want) != 0)
            fail_msg("[%s] split at %zu: got [%s] want [%s]", out, k, got, want);
        free(got);
    }
    for (size_t k1 = 1; k1 < n; k1++)
        for (size_t k2 = k1 + 1; k2 < n; k2++) {
            int cuts[] = {(int)k1, (int)k2, -1};
            got = parse_cut(jinja, tools, out, cuts);
            if (strcmp(got, want) != 0)
                fail_msg("[%s] split at %zu and %zu: got [%s] want [%s]", out, k1, k2, got, want);
            free(got);
        }
    int *bytes = calloc(n + 1, sizeof(int));
    for (size_t k = 0; k < n; k++)
        bytes[k] = (int)k + 1;
    bytes[n] = -1;
    got = parse_cut(jinja, tools, out, bytes);
    if (strcmp(got, want) != 0)
        fail_msg("[%s] byte by byte: got [%s] want [%s]", out, got, want);
    free(got);
    free(bytes);
}

// Feeds `first` alone and returns the content it yields before the end.
static char *content_so_far(const char *jinja, const char *tools_text, const char *first)
{
    json_t *tools = json_loads(tools_text, 0, NULL);
    struct template_output_parser *p = template_output_parser_new_format(
        template_chat_format_detect(jinja), jinja, true, tools, "");
    struct buf th, co;
    buf_init(&th, 0);
    buf_init(&co, 0);
    json_t *calls = json_array();
    assert_int_equal(template_output_parser_add(p, first, strlen(first), &th, &co, calls, NULL), 0);
    assert_int_equal(json_array_size(calls), 0);
    template_output_parser_free(p);
    buf_deinit(&th);
    json_decref(calls);
    json_decref(tools);
    char *r = buf_take(&co);
    return r ? r : strdup("");
}

// ---------------------------------------------------------------------------
// Llama 3.x

static void test_llama_format_detected(void **state)
{
    (void)state;
    assert_string_equal(template_chat_format_detect(llama_jinja)->name, "llama_3_x");
    char path[1024];
    if (!test_shared_fixture(path, sizeof path,
                             "chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja"))
        return;
    struct buf b;
    buf_init(&b, 0);
    assert_true(fs_read_all(path, 1 << 20, &b, NULL) >= 0);
    assert_string_equal(template_chat_format_detect(buf_cstr(&b))->name, "llama_3_x");
    buf_deinit(&b);
}

static void test_llama_builtin_calls(void **state)
{
    (void)state;
    static const struct {
        const char *out, *want;
    } cases[] = {
        // the template's own rendering of a built-in call
        {"<|python_tag|>brave_search.call(query=\"weather in Paris\")",
         "||brave_search#0({\"query\":\"weather in Paris\"});"},
        // escapes in both quotings; an unknown escape keeps its backslash
        {"<|python_tag|>brave_search.call(query=\"say \\\"hi\\\"\\n\\tto \\\\ \\d\")",
         "||brave_search#0({\"query\":\"say \\\"hi\\\"\\n\\tto \\\\ \\\\d\"});"},
        {"<|python_tag|>brave_search.call(query='it\\'s \\x41\\u00e9\\U0001F600\\101')",
         "||brave_search#0({\"query\":\"it's Aé😀A\"});"},
        // a JSON surrogate pair is one character
        {"<|python_tag|>brave_search.call(query=\"\\ud83d\\ude00\")",
         "||brave_search#0({\"query\":\"😀\"});"},
        // numbers, booleans, None (and JSON's spellings), lists, tuples, dicts
        {"<|python_tag|>wolfram_alpha.call(query = '2+2', n=3, big=1_000, neg=-1.5e3, frac=.25, "
         "exact=True, approx=False, hint=None, j=true, k=null, "
         "xs=[1, 'a', False], t=(1, 2), one=(7), d={'k': (1,), \"e\": {}},)",
         "||wolfram_alpha#0({\"approx\":false,\"big\":1000,\"d\":{\"e\":{},\"k\":[1]},"
         "\"exact\":true,\"frac\":0.25,\"hint\":null,\"j\":true,\"k\":null,\"n\":3,"
         "\"neg\":-1500.0,\"one\":7,\"query\":\"2+2\",\"t\":[1,2],\"xs\":[1,\"a\",false]});"},
        // past int64: a float
        {"<|python_tag|>wolfram_alpha.call(n=123456789012345678901234567890)",
         "||wolfram_alpha#0({\"n\":1.2345678901234568e29});"},
        // no arguments; white space around the name and the dot
        {"<|python_tag|> brave_search . call( )", "||brave_search#0({});"},
        // triple quotes may span lines and hold single quotes
        {"<|python_tag|>code_interpreter.call(code=\"\"\"x = \"a\"\nprint(x)\"\"\")",
         "||code_interpreter#0({\"code\":\"x = \\\"a\\\"\\nprint(x)\"});"},
        {"<|python_tag|>brave_search.call(query=\"\")", "||brave_search#0({\"query\":\"\"});"},
        // text before the tag is content; white space after the call is dropped
        {"Let me look that up. <|python_tag|>brave_search.call(query=\"x\")",
         "|Let me look that up. |brave_search#0({\"query\":\"x\"});"},
        {"<|python_tag|>brave_search.call(query=\"a\")\n\nDone.",
         "|Done.|brave_search#0({\"query\":\"a\"});"},
        // two calls, numbered in order
        {"<|python_tag|>brave_search.call(query=\"a\")<|python_tag|>wolfram_alpha.call(query="
         "\"b\")",
         "||brave_search#0({\"query\":\"a\"});wolfram_alpha#1({\"query\":\"b\"});"},
        // JSON after the tag, and as the whole reply, as before
        {"<|python_tag|>{\"name\": \"get\", \"parameters\": {\"q\": \"x\"}}",
         "||get#0({\"q\":\"x\"});"},
        {"{\"name\": \"get\", \"parameters\": {\"q\": \"x\"}}", "||get#0({\"q\":\"x\"});"},
        {"<|python_tag|>brave_search.call(query=\"a\") <|python_tag|>{\"name\": \"get\", "
         "\"parameters\": {}}",
         "||brave_search#0({\"query\":\"a\"});get#1({});"},
        {"Plain {answer}", "|Plain {answer}|"},
        {"a < b <| c", "|a < b <| c|"},
        // malformed after NAME.call(: text, tag and all
        {"<|python_tag|>brave_search.call(query=foo)",
         "|<|python_tag|>brave_search.call(query=foo)|"},
        {"<|python_tag|>brave_search.call(\"positional\")",
         "|<|python_tag|>brave_search.call(\"positional\")|"},
        {"<|python_tag|>brave_search.call(query='two\nlines')",
         "|<|python_tag|>brave_search.call(query='two\nlines')|"},
        {"<|python_tag|>brave_search.call(query=\"\\ud83d\")",
         "|<|python_tag|>brave_search.call(query=\"\\ud83d\")|"},
        {"<|python_tag|>brave_search.call(n=1_)", "|<|python_tag|>brave_search.call(n=1_)|"},
        {"<|python_tag|>brave_search.call(d={1: 2})",
         "|<|python_tag|>brave_search.call(d={1: 2})|"},
        // unfinished at the end: text
        {"<|python_tag|>brave_search.call(query=\"x\"",
         "|<|python_tag|>brave_search.call(query=\"x\"|"},
        // a bare tag at the end: nothing
        {"Hi<|python_tag|>", "|Hi|"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(llama_jinja, llama_tools, cases[i].out, cases[i].want);
}

static void test_llama_code(void **state)
{
    (void)state;
    // code after the tag is code_interpreter's, to the end of the reply
    check(llama_jinja, llama_tools, "<|python_tag|>import math\nprint(math.sqrt(2))",
          "||code_interpreter#0({\"code\":\"import math\\nprint(math.sqrt(2))\"});");
    check(llama_jinja, llama_tools, "I'll compute it.\n<|python_tag|>\nx = 2 ** 10\nprint(x)\n",
          "|I'll compute it.\n|code_interpreter#0({\"code\":\"x = 2 ** 10\\nprint(x)\\n\"});");
    // a method call other than .call( is code too
    check(llama_jinja, llama_tools, "<|python_tag|>math.sqrt(2)",
          "||code_interpreter#0({\"code\":\"math.sqrt(2)\"});");
    check(llama_jinja, llama_tools, "<|python_tag|>x", "||code_interpreter#0({\"code\":\"x\"});");
    // the request's python tool takes it when there is no code_interpreter
    const char *python_tools = "[{\"type\":\"function\",\"function\":{\"name\":\"python\"}}]";
    check(llama_jinja, python_tools, "<|python_tag|>print(1)",
          "||python#0({\"code\":\"print(1)\"});");
    check(llama_jinja, python_tools, "<|python_tag|>python.call(code=\"print(1)\")",
          "||python#0({\"code\":\"print(1)\"});");
}

// Content goes out as it comes; only a partial tag is held back.
static void test_llama_streaming(void **state)
{
    (void)state;
    char *c = content_so_far(llama_jinja, llama_tools, "Let me look <|pyth");
    assert_string_equal(c, "Let me look ");
    free(c);
    c = content_so_far(llama_jinja, llama_tools, "Sure: <|python_tag|>brave_search.call(query=\"x");
    assert_string_equal(c, "Sure: ");
    free(c);
}

// ---------------------------------------------------------------------------
// Functionary v3.2

static void test_functionary_segments(void **state)
{
    (void)state;
    assert_string_equal(template_chat_format_detect(functionary_jinja)->name, "functionary_v3_2");
    static const struct {
        const char *out, *want;
    } cases[] = {
        // the first segment comes without ">>>": content after all\n
        {"all\nHello, world!\nWhat's up?", "|Hello, world!\nWhat's up?|"},
        // ... or a call; white space after it is dropped
        {"special_function\n{\"arg1\": 1} \n                    ",
         "||special_function#0({\"arg1\":1});"},
        // then ">>>" segments; white space before a call's ">>>" is dropped
        {"all\nLet me check.\n>>>get_weather\n{\"city\": \"Paris\"}\n>>>special_function\n"
         "{\"arg1\": 1}",
         "|Let me check.|get_weather#0({\"city\":\"Paris\"});special_function#1({\"arg1\":1});"},
        {"all\nHello, world!\nnono\nWhat's up?>>>special_function\n{\"arg1\": 1}\n",
         "|Hello, world!\nnono\nWhat's up?|special_function#0({\"arg1\":1});"},
        {"get_weather\n{\"city\": \"Paris\"}\n>>>all\nIt is sunny.",
         "|It is sunny.|get_weather#0({\"city\":\"Paris\"});"},
        {"all\nx\n>>>all\ny", "|x\ny|"},
        // python takes raw code to the end, or a JSON object
        {"python\n# This is a program:\nprint('hey')",
         "||python#0({\"code\":\"# This is a program:\\nprint('hey')\"});"},
        {"all\nRunning it.>>>python\nprint(1)", "|Running it.|python#0({\"code\":\"print(1)\"});"},
        {"python\n{\"code\": \"print(1)\"}", "||python#0({\"code\":\"print(1)\"});"},
        // the model repeating the prompt's ">>>" first
        {">>>all\nHi", "|Hi|"},
        {">>>get_weather\n{}", "||get_weather#0({});"},
        // a first segment that is no recipient line is content
        {"Hello there", "|Hello there|"},
        {"Sure\nthing", "|Sure\nthing|"},
        {"", "||"},
        // a ">>>" without a recipient line is content
        {"all\nIn Python: >>> print(1)", "|In Python: >>> print(1)|"},
        {"all\na >>>b c", "|a >>>b c|"},
        // not JSON after all, or unfinished: the segment is text
        {"get_weather\n{not json} ok", "|get_weather\n{not json} ok|"},
        {"all\nA\n>>>get_weather\n{\"city\": ", "|A\n>>>get_weather\n{\"city\": |"},
        {"all\nA >>>get_wea", "|A >>>get_wea|"},
        // braces inside strings do not end the object
        {"get_weather\n{\"city\": \"}{\\\"\"}", "||get_weather#0({\"city\":\"}{\\\"\"});"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(functionary_jinja, functionary_tools, cases[i].out, cases[i].want);
}

static void test_functionary_streaming(void **state)
{
    (void)state;
    // the recipient line is held until it is known; then content flows
    char *c = content_so_far(functionary_jinja, functionary_tools, "all");
    assert_string_equal(c, "");
    free(c);
    c = content_so_far(functionary_jinja, functionary_tools, "all\nHello, world");
    assert_string_equal(c, "Hello, world");
    free(c);
    // a partial marker and the white space before it wait
    c = content_so_far(functionary_jinja, functionary_tools, "all\nDone.\n>>");
    assert_string_equal(c, "Done.");
    free(c);
    c = content_so_far(functionary_jinja, functionary_tools, "Hello there");
    assert_string_equal(c, "Hello there");
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_format_detected),
        cmocka_unit_test(test_llama_builtin_calls),
        cmocka_unit_test(test_llama_code),
        cmocka_unit_test(test_llama_streaming),
        cmocka_unit_test(test_functionary_segments),
        cmocka_unit_test(test_functionary_streaming),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

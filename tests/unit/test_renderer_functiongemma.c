// Unit tests of the functiongemma renderer and parser: the prompts and
// parses of Ollama's model/renderers/functiongemma_test.go and
// model/parsers/functiongemma_test.go (plus value and edge cases read from
// functiongemma.go), every parse also streamed split at every byte.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

struct render_case {
    const char *name, *msgs, *tools, *want;
};

static const struct render_case render_cases[] = {
    {"basic_user_message", "[{\"role\":\"user\",\"content\":\"Hello!\"}]", NULL,
     "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n"},
    {"with_system_message",
     "[{\"role\":\"system\",\"content\":\"You are "
     "helpful\"},{\"role\":\"user\",\"content\":\"Hello!\"}]",
     NULL,
     "<bos><start_of_turn>developer\nYou are "
     "helpful<end_of_turn>\n<start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n"},
    {"with_developer_role",
     "[{\"role\":\"developer\",\"content\":\"You are a coding "
     "assistant\"},{\"role\":\"user\",\"content\":\"Hello!\"}]",
     NULL,
     "<bos><start_of_turn>developer\nYou are a coding "
     "assistant<end_of_turn>\n<start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n"},
    {"custom_system_message_with_tools",
     "[{\"role\":\"system\",\"content\":\"You are a weather "
     "expert.\"},{\"role\":\"user\",\"content\":\"Weather?\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
     "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
     "\"description\":\"City\"}}}}}]",
     "<bos><start_of_turn>developer\nYou are a weather expert.\nYou can do function calling with "
     "the following "
     "functions:<start_function_declaration>declaration:get_weather{description:<escape>Get "
     "weather<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"
     "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<"
     "start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n"},
    {"default_system_message_not_repeated",
     "[{\"role\":\"system\",\"content\":\" You can do function calling with the following "
     "functions: \"},{\"role\":\"user\",\"content\":\"Weather?\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
     "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
     "\"description\":\"City\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:\n<start_function_declaration>declaration:get_weather{description:<escape>Get "
     "weather<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"
     "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<"
     "start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n"},
    {"multi_turn",
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"},{"
     "\"role\":\"user\",\"content\":\"More\"}]",
     NULL,
     "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_"
     "of_turn>user\nMore<end_of_turn>\n<start_of_turn>model\n"},
    {"tool_call",
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":"
     "\"tool\",\"content\":\"Sunny\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
     "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
     "\"description\":\"City\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:get_weather{description:<escape>Get "
     "weather<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"
     "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<"
     "start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n<start_function_call>call:"
     "get_weather{city:<escape>Paris<escape>}<end_function_call><start_function_response>response:"
     "get_weather{<escape>Sunny<escape>}<end_function_response>"},
    {"assistant_content_with_tool_call",
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"Let me "
     "check.\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":"
     "\"Paris\"}}}]},{\"role\":\"tool\",\"content\":\"Sunny\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
     "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
     "\"description\":\"City\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:get_weather{description:<escape>Get "
     "weather<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"
     "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<"
     "start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\nLet me "
     "check.<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call><"
     "start_function_response>response:get_weather{<escape>Sunny<escape>}<end_function_response>"},
    {"numeric_arguments",
     "[{\"role\":\"user\",\"content\":\"Add\"},{\"role\":\"assistant\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"add\",\"arguments\":{\"b\":2,\"a\":1}}}]},{\"role\":\"tool\","
     "\"content\":\"3\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"description\":\"Add "
     "numbers\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
     "\"b\":{\"type\":\"number\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:add{description:<escape>Add "
     "numbers<escape>,parameters:{properties:{a:{description:<escape><escape>,type:<escape>NUMBER<"
     "escape>},b:{description:<escape><escape>,type:<escape>NUMBER<escape>}},type:<escape>OBJECT<"
     "escape>}}<end_function_declaration><end_of_turn>\n<start_of_turn>user\nAdd<end_of_turn>\n<"
     "start_of_turn>model\n<start_function_call>call:add{a:1,b:2}<end_function_call><start_"
     "function_response>response:add{<escape>3<escape>}<end_function_response>"},
    {"empty_messages", "[]", NULL, "<bos><start_of_turn>model\n"},
    {"tool_with_required_params", "[{\"role\":\"user\",\"content\":\"Weather?\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Gets the "
     "weather for a given "
     "city\",\"parameters\":{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{\"city\":{"
     "\"type\":\"string\",\"description\":\"City "
     "Name\"},\"country\":{\"type\":\"string\",\"description\":\"Country Name\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:get_weather{description:<escape>Gets the "
     "weather for a given city<escape>,parameters:{properties:{city:{description:<escape>City "
     "Name<escape>,type:<escape>STRING<escape>},country:{description:<escape>Country "
     "Name<escape>,type:<escape>STRING<escape>}},required:[<escape>city<escape>],type:<escape>"
     "OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<start_of_turn>user\nWeather?<end_"
     "of_turn>\n<start_of_turn>model\n"},
    {"parallel_tool_calls",
     "[{\"role\":\"user\",\"content\":\"Weather and "
     "time?\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\","
     "\"arguments\":{\"city\":\"Paris\"}}},{\"function\":{\"name\":\"get_time\",\"arguments\":{"
     "\"timezone\":\"UTC\"}}}]},{\"role\":\"tool\",\"content\":\"Sunny\"},{\"role\":\"tool\","
     "\"content\":\"12:00\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
     "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
     "\"description\":\"City\"}}}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\","
     "\"description\":\"Get current "
     "time\",\"parameters\":{\"type\":\"object\",\"properties\":{\"timezone\":{\"type\":\"string\","
     "\"description\":\"Timezone\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:get_weather{description:<escape>Get "
     "weather<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"
     "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><start_function_"
     "declaration>declaration:get_time{description:<escape>Get current "
     "time<escape>,parameters:{properties:{timezone:{description:<escape>Timezone<escape>,type:<"
     "escape>STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>"
     "\n<start_of_turn>user\nWeather and "
     "time?<end_of_turn>\n<start_of_turn>model\n<start_function_call>call:get_weather{city:<escape>"
     "Paris<escape>}<end_function_call><start_function_call>call:get_time{timezone:<escape>UTC<"
     "escape>}<end_function_call><start_function_response>response:get_weather{<escape>Sunny<"
     "escape>}<end_function_response><start_function_response>response:get_time{<escape>12:00<"
     "escape>}<end_function_response>"},
    {"user_after_tool_response",
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":"
     "\"tool\",\"content\":\"Sunny\"},{\"role\":\"user\",\"content\":\"Thanks! What about "
     "London?\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "
     "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
     "\"description\":\"City\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:get_weather{description:<escape>Get "
     "weather<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"
     "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<"
     "start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n<start_function_call>call:"
     "get_weather{city:<escape>Paris<escape>}<end_function_call><start_function_response>response:"
     "get_weather{<escape>Sunny<escape>}<end_function_response>Thanks! What about "
     "London?<end_of_turn>\n<start_of_turn>model\n"},
    {"tool_empty_properties", "[{\"role\":\"user\",\"content\":\"Test\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"test_fn\",\"description\":\"\","
     "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:test_fn{description:<escape><escape>,"
     "parameters:{type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<start_of_"
     "turn>user\nTest<end_of_turn>\n<start_of_turn>model\n"},
    {"unicode_and_special",
     "[{\"role\":\"user\",\"content\":\"こんにちは 🎉 <tag> & \\\"quotes\\\"\"}]", NULL,
     "<bos><start_of_turn>user\nこんにちは 🎉 <tag> & "
     "\"quotes\"<end_of_turn>\n<start_of_turn>model\n"},
    {"nested_values",
     "[{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"f\",\"arguments\":{\"z\":[1,2.5,\"x\",false,null],\"a\":{\"y\":-3,"
     "\"b\":true},\"e\":1e20}}}]}]",
     NULL,
     "<bos><start_of_turn>user\nGo<end_of_turn>\n<start_of_turn>model\n<start_function_call>call:f{"
     "a:{b:true,y:-3},e:1e+20,z:[1,2.5,<escape>x<escape>,false,<nil>]}<end_function_call><end_of_"
     "turn>\n<start_of_turn>model\n"},
    {"other_role_keeps_state",
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":"
     "\"tool\",\"content\":\"Sunny\"},{\"role\":\"system\",\"content\":\" Be brief. "
     "\"},{\"role\":\"user\",\"content\":\"And London?\"}]",
     NULL,
     "<bos><start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n<start_function_call>"
     "call:get_weather{city:<escape>Paris<escape>}<end_function_call><start_function_response>"
     "response:get_weather{<escape>Sunny<escape>}<end_function_response><start_of_turn>system\nBe "
     "brief.<end_of_turn>\nAnd London?<end_of_turn>\n<start_of_turn>model\n"},
    {"array_type_param", "[{\"role\":\"user\",\"content\":\"Test\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"test\",\"description\":\"Test\","
     "\"parameters\":{\"type\":\"object\",\"properties\":{\"items\":{\"type\":[\"array\",\"null\"],"
     "\"description\":\"List of items\"}}}}}]",
     "<bos><start_of_turn>developer\nYou can do function calling with the following "
     "functions:<start_function_declaration>declaration:test{description:<escape>Test<escape>,"
     "parameters:{properties:{items:{description:<escape>List of "
     "items<escape>,type:<escape>ARRAY<escape>}},type:<escape>OBJECT<escape>}}<end_function_"
     "declaration><end_of_turn>\n<start_of_turn>user\nTest<end_of_turn>\n<start_of_turn>model\n"},
};

static void test_functiongemma_render(void **state)
{
    (void)state;
    assert_true(renderer_known("functiongemma"));
    for (size_t i = 0; i < sizeof render_cases / sizeof render_cases[0]; i++) {
        const struct render_case *c = &render_cases[i];
        json_t *m = J(c->msgs), *t = c->tools ? J(c->tools) : NULL;
        struct buf out;
        buf_init(&out, 0);
        struct err e = {0};
        if (renderer_render("functiongemma", m, t, NULL, &out, &e) < 0)
            fail_msg("%s: %s", c->name, e.msg);
        if (strcmp(buf_cstr(&out), c->want) != 0)
            fail_msg("%s:\n got  %s\n want %s", c->name, buf_cstr(&out), c->want);
        buf_deinit(&out);
        json_decref(m);
        json_decref(t);
    }
}

struct parse_case {
    const char *name, *text, *content, *calls;
};

static const struct parse_case parse_cases[] = {
    {"plain_content", "Hello, world!", "Hello, world!", "[]"},
    {"simple_tool_call",
     "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>", "",
     "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]"},
    {"content_before_tool_call",
     "Let me "
     "check.<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>",
     "Let me check.",
     "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]"},
    {"numeric_and_boolean",
     "<start_function_call>call:add{a:1,b:2,on:true,off:false,f:3.14,z:007,neg:-4}<end_function_"
     "call>",
     "",
     "[{\"function\":{\"index\":0,\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2,\"on\":true,"
     "\"off\":false,\"f\":3.1400000000000001,\"z\":7.0,\"neg\":-4}}}]"},
    {"multiple_tool_calls",
     "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call><start_"
     "function_call>call:get_weather{city:<escape>London<escape>}<end_function_call>",
     "",
     "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}},{"
     "\"function\":{\"index\":1,\"name\":\"get_weather\",\"arguments\":{\"city\":\"London\"}}}]"},
    {"array_argument",
     "<start_function_call>call:process{items:[<escape>a<escape>,<escape>b,c<escape>,<escape>d<"
     "escape>]}<end_function_call>",
     "",
     "[{\"function\":{\"index\":0,\"name\":\"process\",\"arguments\":{\"items\":[\"a\",\"b,c\","
     "\"d\"]}}}]"},
    {"nested_object_argument",
     "<start_function_call>call:create{config:{settings:{enabled:true,name:<escape>test<escape>}},"
     "n:[1,[2]]}<end_function_call>",
     "",
     "[{\"function\":{\"index\":0,\"name\":\"create\",\"arguments\":{\"config\":{\"settings\":{"
     "\"enabled\":true,\"name\":\"test\"}},\"n\":[1,[2]]}}}]"},
    {"no_arguments_then_content", "<start_function_call>call:get_time{}<end_function_call>Done!",
     "Done!", "[{\"function\":{\"index\":0,\"name\":\"get_time\",\"arguments\":{}}}]"},
    {"content_with_angle_brackets", "The result is a <value> tag", "The result is a <value> tag",
     "[]"},
    {"unicode",
     "こんにちは <start_function_call>call:greet{name:<escape>日本語<escape>}<end_function_call>",
     "こんにちは ",
     "[{\"function\":{\"index\":0,\"name\":\"greet\",\"arguments\":{\"name\":\"日本語\"}}}]"},
    {"bare_words_and_partial_numbers",
     "<start_function_call>call:f{s:hello world,n:3 apples,x:}<end_function_call>", "",
     "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{\"s\":\"hello "
     "world\",\"n\":3.0,\"x\":\"\"}}}]"},
    {"unparsable_call_has_no_name", "<start_function_call>nothing here<end_function_call>ok", "ok",
     "[{\"function\":{\"index\":0,\"name\":\"\",\"arguments\":{}}}]"},
    {"partial_tag_at_end_is_held", "Hi <start_func", "Hi ", "[]"},
};

// Each text in one piece, split in two at every byte, and one byte at a time.
static void test_functiongemma_parser(void **state)
{
    (void)state;
    assert_true(renderer_parser_known("functiongemma"));
    assert_true(renderer_parser_tools("functiongemma"));
    assert_false(renderer_parser_thinking("functiongemma"));
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        const size_t n = strlen(c->text);
        for (size_t k = 0; k <= n + 1; k++) {
            struct parsed r;
            const char *pieces[2] = {c->text, c->text + (k <= n ? k : 0)};
            size_t lens[2] = {k <= n ? k : 0, k <= n ? n - k : n};
            if (k == n + 1) {  // byte by byte
                const char **bytes = xcalloc(n + 1, sizeof *bytes);
                size_t *ones = xcalloc(n + 1, sizeof *ones);
                for (size_t b = 0; b < n; b++)
                    bytes[b] = c->text + b, ones[b] = 1;
                parse_pieces(&r, "functiongemma", NULL, NULL, NULL, bytes, ones, n);
                free(bytes);
                free(ones);
            } else {
                parse_pieces(&r, "functiongemma", NULL, NULL, NULL, pieces, lens, 2);
            }
            if (r.rc != 0)
                fail_msg("%s split at %zu: %s", c->name, k, r.e.msg);
            if (strcmp(buf_cstr(&r.content), c->content) != 0 || r.thinking.len != 0)
                fail_msg("%s split at %zu: content \"%s\"", c->name, k, buf_cstr(&r.content));
            char *got = calls_text(r.calls);
            if (strcmp(got, c->calls) != 0)
                fail_msg("%s split at %zu: calls %s", c->name, k, got);
            free(got);
            parsed_deinit(&r);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_functiongemma_render),
        cmocka_unit_test(test_functiongemma_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

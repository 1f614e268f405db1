// Unit tests of the qwen3-vl-instruct / qwen3-vl-thinking, ornith and glm-ocr
// renderers and parsers: the prompts and parses Ollama's Go tests pin down
// (model/renderers/qwen3vl_nonthinking_test.go, qwen3vl_thinking_test.go,
// ornith_test.go, glmocr_test.go; model/parsers/qwen3vl_*_test.go), with the
// image tags Ollama's server always renders, plus streaming split at every
// byte.
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

// think: -1 not set, 0 false, 1 true.
static struct renderer_think think_of(int think)
{
    struct renderer_think t = {0};
    if (think >= 0) {
        t.set = true;
        t.on = think == 1;
    }
    return t;
}

static void expect_render(const char *name, const char *msgs, const char *tools, int think,
                          const char *want)
{
    json_t *m = J(msgs);
    json_t *t = tools ? J(tools) : NULL;
    struct renderer_think th = think_of(think);
    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    int rc = renderer_render(name, m, t, think >= 0 ? &th : NULL, &out, &e);
    if (rc < 0)
        fail_msg("render %s: %s", name, e.msg);
    if (strcmp(buf_cstr(&out), want) != 0)
        fail_msg("%s rendered:\n%s\n--- want ---\n%s", name, buf_cstr(&out), want);
    buf_deinit(&out);
    json_decref(m);
    json_decref(t);
}

// Parses text in one piece and split in two at every byte; each run must give
// the same content, thinking and calls (as calls_text writes them).
static void expect_every_split(const char *name, const char *last, const char *text,
                               const char *want_content, const char *want_thinking,
                               const char *want_calls)
{
    size_t n = strlen(text);
    for (size_t k = 0; k <= n + 1; k++) {
        struct parsed r;
        if (k == n + 1) {
            parse_steps(&r, name, NULL, last, NULL, (const char *[]){text, NULL});
        } else {
            const char *pieces[2] = {text, text + k};
            size_t lens[2] = {k, n - k};
            parse_pieces(&r, name, NULL, last, NULL, pieces, lens, 2);
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

static void test_names(void **state)
{
    (void)state;
    static const char *const names[] = {"qwen3-vl-instruct", "qwen3-vl-thinking", "ornith",
                                        "glm-ocr"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_true(renderer_known(names[i]));
        assert_true(renderer_parser_known(names[i]));
        assert_true(renderer_parser_tools(names[i]));
    }
    assert_false(renderer_parser_thinking("qwen3-vl-instruct"));
    assert_true(renderer_parser_thinking("qwen3-vl-thinking"));
    assert_true(renderer_parser_thinking("ornith"));
    assert_false(renderer_parser_thinking("glm-ocr"));
}

#define WEATHER_CALL                                                                               \
    "{\"role\":\"assistant\",\"content\":\"I'll check.\",\"tool_calls\":[{\"function\":{"          \
    "\"name\":\"get-current-weather\",\"arguments\":{\"location\":\"Paris\",\"unit\":"             \
    "\"celsius\"}}}]}"
#define WEATHER_CALL_TEXT                                                                          \
    "<|im_start|>assistant\nI'll check.\n<tool_call>\n{\"name\": \"get-current-weather\", "        \
    "\"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n"

// qwen3vl_nonthinking_test.go (the image cases with image tags, as the server renders).
static void test_qwen3vl_instruct_render(void **state)
{
    (void)state;
    const char *r = "qwen3-vl-instruct";
    expect_render(r,
                  "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
                  "{\"role\":\"user\",\"content\":\"Tell me something interesting.\"},"
                  "{\"role\":\"assistant\",\"content\":\"I'll tell you something interesting "
                  "about cats\"}]",
                  NULL, -1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                  "Tell me something interesting.<|im_end|>\n<|im_start|>assistant\nI'll tell "
                  "you something interesting about cats");
    expect_render(r,
                  "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
                  "{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]",
                  NULL, -1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                  "Hello, how are you?<|im_end|>\n<|im_start|>assistant\n");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"Describe these images.\",\"images\":"
                  "[\"aW1nMQ==\",\"aW1nMg==\"]}]",
                  NULL, -1,
                  "<|im_start|>user\n[img-0][img-1] Describe these images.<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"What's the weather?\"}," WEATHER_CALL
                  ",{\"role\":\"user\",\"content\":\"<tool_response>\\n18\\n</tool_response>\"},"
                  "{\"role\":\"user\",\"content\":\"Thanks!\"}]",
                  NULL, -1,
                  "<|im_start|>user\nWhat's the weather?<|im_end|>\n" WEATHER_CALL_TEXT
                  "<|im_start|>user\n<tool_response>\n18\n</tool_response><|im_end|>\n"
                  "<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":"
                  "\"before\",\"tool_calls\":[{\"function\":{\"name\":\"add\",\"arguments\":{"
                  "\"a\":2,\"b\":3}}},{\"function\":{\"name\":\"mul\",\"arguments\":{\"x\":4,"
                  "\"y\":5}}}]}]",
                  NULL, -1,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nbefore\n<tool_call>\n"
                  "{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>\n"
                  "<tool_call>\n{\"name\": \"mul\", \"arguments\": {\"x\": 4, \"y\": 5}}\n"
                  "</tool_call>");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"Compute results\"},{\"role\":\"assistant\","
                  "\"content\":\"ok\",\"tool_calls\":[{\"function\":{\"name\":\"job\","
                  "\"arguments\":{\"n\":1}}}]},{\"role\":\"tool\",\"content\":\"5\"},"
                  "{\"role\":\"tool\",\"content\":\"6\"}]",
                  NULL, -1,
                  "<|im_start|>user\nCompute results<|im_end|>\n<|im_start|>assistant\nok\n"
                  "<tool_call>\n{\"name\": \"job\", \"arguments\": {\"n\": 1}}\n</tool_call>"
                  "<|im_end|>\n<|im_start|>user\n<tool_response>\n5\n</tool_response>\n"
                  "<tool_response>\n6\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"What's the weather?\"}," WEATHER_CALL
                  ",{\"role\":\"user\",\"content\":\"\\n\\n<tool_response>\\n18\\n"
                  "</tool_response> extra\\n\\n\"}]",
                  NULL, -1,
                  "<|im_start|>user\nWhat's the weather?<|im_end|>\n" WEATHER_CALL_TEXT
                  "<|im_start|>user\n\n\n<tool_response>\n18\n</tool_response> extra\n\n"
                  "<|im_end|>\n<|im_start|>assistant\n");
    // Tools in the system turn, as Go's json.Marshal(api.Tool) with spaces
    // (required before properties).
    expect_render(r,
                  "[{\"role\":\"system\",\"content\":\"Sys.\"},{\"role\":\"user\",\"content\":"
                  "\"Add.\"}]",
                  "[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"description\":\"Add "
                  "two numbers\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{"
                  "\"type\":\"integer\"}},\"required\":[\"a\"]}}}]",
                  -1,
                  "<|im_start|>system\nSys.\n\n# Tools\n\nYou may call one or more functions to "
                  "assist with the user query.\n\nYou are provided with function signatures "
                  "within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", "
                  "\"function\": {\"name\": \"add\", \"description\": \"Add two numbers\", "
                  "\"parameters\": {\"type\": \"object\", \"required\": [\"a\"], \"properties\": "
                  "{\"a\": {\"type\": \"integer\"}}}}}\n</tools>\n\nFor each function call, "
                  "return a json object with function name and arguments within "
                  "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                  "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                  "Add.<|im_end|>\n<|im_start|>assistant\n");
}

// qwen3vl_thinking_test.go, and the think overrides.
static void test_qwen3vl_thinking_render(void **state)
{
    (void)state;
    const char *r = "qwen3-vl-thinking";
    expect_render(r,
                  "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
                  "{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]",
                  NULL, -1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                  "Hello, how are you?<|im_end|>\n<|im_start|>assistant\n<think>\n");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"Tell me a story in two sentences.\"},"
                  "{\"role\":\"assistant\",\"content\":\"abc\",\"thinking\":\"To make this story "
                  "interesting, I will speak in poetry.\"}]",
                  NULL, -1,
                  "<|im_start|>user\nTell me a story in two sentences.<|im_end|>\n<|im_start|>"
                  "assistant\n<think>\nTo make this story interesting, I will speak in poetry.\n"
                  "</think>\n\nabc");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"Tell me a story in two sentences.\"},"
                  "{\"role\":\"assistant\",\"thinking\":\"To make this story interesting, I will "
                  "speak in poetry.\"}]",
                  NULL, -1,
                  "<|im_start|>user\nTell me a story in two sentences.<|im_end|>\n<|im_start|>"
                  "assistant\n<think>\nTo make this story interesting, I will speak in poetry.");
    expect_render(r,
                  "[{\"role\":\"user\",\"content\":\"Tell me a story in two sentences.\"},"
                  "{\"role\":\"assistant\",\"thinking\":\"To make this story interesting, I will "
                  "speak in poetry.\",\"content\":\"abc\"},{\"role\":\"user\",\"content\":\"What "
                  "is the weather like in San Francisco?\"},{\"role\":\"assistant\",\"thinking\":"
                  "\"Speak poetry after the first sentence.</think><think>Speak poetry after the "
                  "second sentence.\"}]",
                  NULL, -1,
                  "<|im_start|>user\nTell me a story in two sentences.<|im_end|>\n<|im_start|>"
                  "assistant\nabc<|im_end|>\n<|im_start|>user\nWhat is the weather like in San "
                  "Francisco?<|im_end|>\n<|im_start|>assistant\n<think>\nSpeak poetry after the "
                  "first sentence.</think><think>Speak poetry after the second sentence.");
    const char *hello = "[{\"role\":\"user\",\"content\":\"Hello\"}]";
    expect_render(r, hello, NULL, 0, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    expect_render("qwen3-vl-instruct", hello, NULL, 1,
                  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

// ornith_test.go: qwen3.5 that always shows the assistant's think block.
static void test_ornith_render(void **state)
{
    (void)state;
    const char *msgs = "[{\"role\":\"user\",\"content\":\"Say hello.\"},{\"role\":\"assistant\","
                       "\"content\":\"Hello.\"},{\"role\":\"user\",\"content\":\"Now say bye.\"}]";
    expect_render("ornith", msgs, NULL, -1,
                  "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                  "</think>\n\nHello.<|im_end|>\n<|im_start|>user\nNow say bye.<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n");
    msgs = "[{\"role\":\"user\",\"content\":\"Say hello.\"},{\"role\":\"assistant\",\"thinking\":"
           "\"Keep it short.\",\"content\":\"Hello.\"},{\"role\":\"user\",\"content\":\"Now say "
           "bye.\"}]";
    expect_render("ornith", msgs, NULL, 0,
                  "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n<think>\nKeep "
                  "it short.\n</think>\n\nHello.<|im_end|>\n<|im_start|>user\nNow say bye."
                  "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    // qwen3.5's own rule still hides the think block of earlier turns.
    expect_render("qwen3.5", msgs, NULL, 0,
                  "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\nHello."
                  "<|im_end|>\n<|im_start|>user\nNow say bye.<|im_end|>\n<|im_start|>assistant\n"
                  "<think>\n\n</think>\n\n");
}

// glmocr_test.go (image tags on, as the server renders), and thinking set off.
static void test_glmocr_render(void **state)
{
    (void)state;
    expect_render("glm-ocr",
                  "[{\"role\":\"user\",\"content\":\"Describe these images.\",\"images\":"
                  "[\"aW1nMQ==\",\"aW1nMg==\"]}]",
                  NULL, -1,
                  "[gMASK]<sop><|user|>\n[img-0][img-1] Describe these images.<|assistant|>\n");
    expect_render("glm-ocr",
                  "[{\"role\":\"user\",\"content\":\"First image\",\"images\":[\"aW1nMQ==\"]},"
                  "{\"role\":\"assistant\",\"content\":\"Processed.\"},{\"role\":\"user\","
                  "\"content\":\"Second image\",\"images\":[\"aW1nMg==\"]}]",
                  NULL, -1,
                  "[gMASK]<sop><|user|>\n[img-0] First image<|assistant|>\n<think></think>\n"
                  "Processed.\n<|user|>\n[img-1] Second image<|assistant|>\n");
    expect_render("glm-ocr",
                  "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"},"
                  "{\"role\":\"assistant\",\"content\":\" ok \",\"thinking\":\" t \","
                  "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"q\":\"x\","
                  "\"n\":[1,2]}}}]},{\"role\":\"tool\",\"content\":\"r\"},{\"role\":\"user\","
                  "\"content\":\"More/nothink\"}]",
                  NULL, 0,
                  "[gMASK]<sop><|system|>\nS\n<|user|>\nHi/nothink<|assistant|>\n<think>t</think>"
                  "\nok\n<tool_call>f<arg_key>q</arg_key><arg_value>x</arg_value><arg_key>n"
                  "</arg_key><arg_value>[1,2]</arg_value></tool_call>\n<|observation|>\n"
                  "<tool_response>\nr\n</tool_response>\n<|user|>\nMore/nothink<|assistant|>\n"
                  "<think></think>\n");
}

// model/parsers/qwen3vl_*_test.go, each split at every byte.
static void test_qwen3vl_parsers(void **state)
{
    (void)state;
    const char *t = "qwen3-vl-thinking", *i = "qwen3-vl-instruct";
    expect_every_split(t, NULL, "abc</think>", "", "abc", "[]");
    expect_every_split(t, NULL, "<think>abc</think>", "", "<think>abc", "[]");
    expect_every_split(t, NULL, "I'm thinking</think>I'm content", "I'm content", "I'm thinking",
                       "[]");
    expect_every_split(t, NULL, "I'm thinking<think>I'm nested thinking</think></think>",
                       "</think>", "I'm thinking<think>I'm nested thinking", "[]");
    expect_every_split(t, NULL, "<think>I'm thinking</think>I'm actually content</think>",
                       "I'm actually content</think>", "<think>I'm thinking", "[]");
    expect_every_split(t, NULL,
                       "Let me check<tool_call>{\"name\": \"w\", \"arguments\": {\"c\": "
                       "\"Paris\"}}</tool_call> done",
                       "done", "Let me check",
                       "[{\"function\":{\"index\":0,\"name\":\"w\",\"arguments\":{\"c\":"
                       "\"Paris\"}}}]");
    // Prefill: thinking continues without content; with content, only content.
    const char *think_prefill = "{\"role\":\"assistant\",\"thinking\":\"i am thinking\"}";
    expect_every_split(t, think_prefill, "abc</think> def", "def", "abc", "[]");
    expect_every_split(t, think_prefill, "        </think> starting content", "starting content",
                       "", "[]");
    const char *content_prefill = "{\"role\":\"assistant\",\"content\":\"has content\"}";
    expect_every_split(t, content_prefill,
                       "abc</think><tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>",
                       "abc</think>", "",
                       "[{\"function\":{\"index\":0,\"name\":\"x\","
                       "\"arguments\":{}}}]");
    // Trailing white space waits for more text, and the end does not release it.
    expect_every_split(i, NULL, "Hello  \n", "Hello", "", "[]");
    expect_every_split(i, NULL,
                       "<tool_call>{\"name\":\"first\",\"arguments\":{\"a\":\"1\"}}</tool_call>"
                       "<tool_call>{\"name\":\"second\",\"arguments\":{\"b\":\"2\"}}</tool_call>",
                       "", "",
                       "[{\"function\":{\"index\":0,\"name\":\"first\",\"arguments\":{\"a\":"
                       "\"1\"}}},{\"function\":{\"index\":1,\"name\":\"second\",\"arguments\":{"
                       "\"b\":\"2\"}}}]");
    expect_every_split(i, NULL, "abc</think>", "abc</think>", "", "[]");
    // A call that is not JSON is an error for the response.
    struct parsed r;
    parse_steps(&r, i, NULL, NULL, NULL, (const char *[]){"<tool_call>nope</tool_call>", NULL});
    assert_int_equal(r.rc, ERR_INVALID);
    assert_non_null(strstr(r.e.msg, "qwen3-vl"));
    parsed_deinit(&r);
}

// glm-ocr's parser: glm-4.7's without thinking.
static void test_glmocr_parser(void **state)
{
    (void)state;
    expect_every_split("glm-ocr", NULL, "Plain text", "Plain text", "", "[]");
    expect_every_split("glm-ocr", NULL, "<think>t</think>answer", "answer", "t", "[]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_qwen3vl_instruct_render),
        cmocka_unit_test(test_qwen3vl_thinking_render),
        cmocka_unit_test(test_ornith_render),
        cmocka_unit_test(test_glmocr_render),
        cmocka_unit_test(test_qwen3vl_parsers),
        cmocka_unit_test(test_glmocr_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

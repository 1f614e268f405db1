// Unit tests of the prompt module's interface: the GGUF facts (one read per
// file, then the cache), the source choice, prompt_open's errors, rendering
// through the Go template and a built-in renderer with truncation, and the one
// output-parser type over the engines.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prompt/prompt.h"
#include "testutil.h"

static void test_facts(void **state)
{
    (void)state;
    char path[1024];
    test_fixture(path, sizeof path, "stories260K.gguf");
    struct prompt_facts a, b;
    assert_true(prompt_facts_get(path, &a));
    assert_true(a.context_length > 0);
    assert_non_null(a.bos_token);
    assert_true(prompt_facts_get(path, &b));  // from the cache: the same facts
    assert_int_equal(a.context_length, b.context_length);
    assert_string_equal(a.bos_token, b.bos_token);
    assert_int_equal(a.adds_bos, b.adds_bos);
    prompt_facts_deinit(&a);
    prompt_facts_deinit(&b);
    assert_false(prompt_facts_get("/nonexistent/model.gguf", &a));
    assert_false(prompt_facts_get(NULL, &a));
}

static void test_choose_and_open(void **state)
{
    (void)state;
    struct prompt_model m = {.template_text = "{{ .Prompt }}"};
    struct prompt_choice c;
    prompt_choose(&m, &c);
    assert_int_equal(c.source, PROMPT_GO_TEMPLATE);
    assert_string_equal(prompt_source_name(&m, c.source), "go_template");
    prompt_choice_deinit(&c);
    m = (struct prompt_model){.renderer = "qwen3-vl-instruct", .parser = "qwen3-vl-instruct"};
    prompt_choose(&m, &c);
    assert_int_equal(c.source, PROMPT_RENDERER);
    assert_string_equal(prompt_source_name(&m, c.source), "renderer_parser");
    prompt_choice_deinit(&c);

    struct prompt *p = NULL;
    struct prompt_think th = {0};
    struct err e = {0};
    m = (struct prompt_model){.renderer = "nope"};
    assert_int_equal(prompt_open(&p, &m, NULL, &th, &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "unknown renderer \"nope\"");
    err_clear(&e);
    m = (struct prompt_model){0};
    assert_int_equal(prompt_open(&p, &m, "{{ .Prompt", &th, &e), ERR_INVALID);
    assert_null(p);
}

// Bytes as tokens: what fits a small context.
static int64_t count_bytes(void *ctx, const char *text, size_t len, struct err *e)
{
    (void)e;
    (*(int *)ctx)++;
    (void)text;
    return (int64_t)len;
}

static void test_render_and_parse(void **state)
{
    (void)state;
    struct prompt *p = NULL;
    struct prompt_think th = {0};
    struct err e = {0};
    // The Go template, generate mode, and its output parser (plain content).
    struct prompt_model m = {.template_text = "[{{ .Prompt }}]"};
    assert_int_equal(prompt_open(&p, &m, NULL, &th, &e), 0);
    assert_int_equal(prompt_get_source(p), PROMPT_GO_TEMPLATE);
    struct buf out, content, thinking;
    buf_init(&out, 0);
    buf_init(&content, 0);
    buf_init(&thinking, 0);
    struct prompt_input in = {.prompt = "hi"};
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_string_equal(buf_cstr(&out), "[hi]");
    json_t *calls = json_array();
    struct prompt_parser *pp = prompt_parser(p, false, NULL, buf_cstr(&out));
    assert_ptr_equal(prompt_parser(p, false, NULL, buf_cstr(&out)), pp);
    assert_int_equal(prompt_parser_add(pp, "Hello", 5, &content, &thinking, calls, &e), 0);
    assert_int_equal(prompt_parser_finish(pp, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&content), "Hello");
    prompt_free(p);

    // A built-in renderer with truncation: the oldest turn goes, the system stays.
    m = (struct prompt_model){.renderer = "qwen3-vl-instruct", .parser = "qwen3-vl-instruct"};
    assert_int_equal(prompt_open(&p, &m, NULL, &th, &e), 0);
    json_t *msgs = json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\","
                              "\"content\":\"a long first question\"},{\"role\":\"assistant\","
                              "\"content\":\"A\"},{\"role\":\"user\",\"content\":\"Q\"}]",
                              0, NULL);
    int counted = 0;
    in = (struct prompt_input){.chat = true,
                               .messages = msgs,
                               .truncate = true,
                               .n_ctx = 120,
                               .count = count_bytes,
                               .count_ctx = &counted};
    buf_reset(&out);
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_true(counted >= 2);
    assert_string_equal(buf_cstr(&out), "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\n"
                                        "A<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
                                        "<|im_start|>assistant\n");
    // The built-in parser, made while rendering, reads the output.
    pp = prompt_parser(p, false, NULL, buf_cstr(&out));
    buf_reset(&content);
    const char *gen = "ok<tool_call>{\"name\":\"f\",\"arguments\":{\"x\":1}}</tool_call>";
    assert_int_equal(prompt_parser_add(pp, gen, strlen(gen), &content, &thinking, calls, &e), 0);
    assert_int_equal(prompt_parser_finish(pp, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&content), "ok");
    assert_int_equal(json_array_size(calls), 1);
    prompt_free(p);
    json_decref(msgs);
    json_decref(calls);
    buf_deinit(&out);
    buf_deinit(&content);
    buf_deinit(&thinking);
}

// The Go template through the same truncation loop: the oldest turns go,
// the system stays; probes are counted without image tags, and the tags of
// the prompt are numbered from the first kept message.
static void test_go_truncation(void **state)
{
    (void)state;
    struct prompt *p = NULL;
    struct prompt_think th = {0};
    struct err e = {0};
    struct prompt_model m = {.template_text =
                                 "{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}"};
    assert_int_equal(prompt_open(&p, &m, NULL, &th, &e), 0);
    assert_int_equal(prompt_get_source(p), PROMPT_GO_TEMPLATE);
    json_t *msgs =
        json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\","
                   "\"content\":\"u1-aaaaaaaa\"},{\"role\":\"assistant\","
                   "\"content\":\"a1-aaaaaaaa\"},{\"role\":\"user\",\"content\":\"u2\"}]",
                   0, NULL);
    int counted = 0;
    struct prompt_input in = {.chat = true,
                              .messages = msgs,
                              .truncate = true,
                              .n_ctx = 45,
                              .count = count_bytes,
                              .count_ctx = &counted};
    struct buf out;
    buf_init(&out, 0);
    // from 0 and 1 (the system message stays): 60 bytes; from 2: 42
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_string_equal(buf_cstr(&out), "[system:S][assistant:a1-aaaaaaaa][user:u2]");
    assert_int_equal(counted, 3);
    buf_reset(&out);
    in.n_ctx = 5;  // the last message stays whatever its size
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_string_equal(buf_cstr(&out), "[system:S][user:u2]");
    buf_reset(&out);
    in.truncate = false;
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_string_equal(buf_cstr(&out),
                        "[system:S][user:u1-aaaaaaaa][assistant:a1-aaaaaaaa][user:u2]");
    json_decref(msgs);
    // Untagged probes: 34 and 24 bytes; with tags the first would be 48.
    msgs = json_loads("[{\"role\":\"user\",\"content\":\"one\",\"images\":[\"I0\"]},"
                      "{\"role\":\"assistant\",\"content\":\"ok\"},"
                      "{\"role\":\"user\",\"content\":\"two\",\"images\":[\"I1\"]}]",
                      0, NULL);
    in = (struct prompt_input){.chat = true,
                               .messages = msgs,
                               .truncate = true,
                               .n_ctx = 34,
                               .count = count_bytes,
                               .count_ctx = &counted};
    buf_reset(&out);
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_string_equal(buf_cstr(&out), "[user:[img-0]one][assistant:ok][user:[img-1]two]");
    buf_reset(&out);
    in.n_ctx = 30;
    assert_int_equal(prompt_render(p, &in, &out, &e), 0);
    assert_string_equal(buf_cstr(&out), "[assistant:ok][user:[img-0]two]");
    json_decref(msgs);
    buf_deinit(&out);
    prompt_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_facts),
        cmocka_unit_test(test_choose_and_open),
        cmocka_unit_test(test_render_and_parse),
        cmocka_unit_test(test_go_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

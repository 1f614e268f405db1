// Unit tests of the OpenAI translation (src/server/openai.c, spec/openai.md):
// every request field's native mapping, the translation errors with
// upstream's wording, the response objects, the SSE chunks built from native
// stream objects, and base64. No server: the functions are pure.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "jsontest.h"

static json_t *chat(const char *body)
{
    return jsontest_convert(srv_openai_chat_request, body);
}

static void chat_fails(const char *body, const char *msg)
{
    jsontest_convert_fails(srv_openai_chat_request, body, msg);
}

static json_t *completion(const char *body)
{
    return jsontest_convert(srv_openai_completion_request, body);
}

static void completion_fails(const char *body, const char *msg)
{
    jsontest_convert_fails(srv_openai_completion_request, body, msg);
}

// Compares JSON values (key order aside; 1 and 1.0 differ, as integer and
// real options do for the native option parser).
static void assert_json(const json_t *v, const char *want)
{
    json_t *w = jsontest_parse(want);
    if (!v || !json_equal((json_t *)v, w)) {
        char *a = v ? jsonx_dumps(v, 0) : NULL;
        fail_msg("got  %s\nwant %s", a ? a : "(null)", want);
    }
    json_decref(w);
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_chat_defaults(void **state)
{
    (void)state;
    // stream defaults to false; temperature and top_p default to 1.0.
    json_t *n = chat("{\"model\":\"m\"," MSG "}");
    assert_json(n, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                   "\"options\":{\"temperature\":1.0,\"top_p\":1.0},\"stream\":false}");
    json_decref(n);
}

static void test_chat_options(void **state)
{
    (void)state;
    json_t *n = chat("{\"model\":\"m\"," MSG ",\"stream\":true,\"max_tokens\":7,\"temperature\":0,"
                     "\"top_p\":0.5,\"seed\":42,\"stop\":\"x\",\"frequency_penalty\":0.25,"
                     "\"presence_penalty\":-1,\"n\":3,\"user\":\"u\",\"logit_bias\":{\"1\":2},"
                     "\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,"
                     "\"stream_options\":{\"include_usage\":true},\"unknown\":[1]}");
    assert_json(json_object_get(n, "options"),
                "{\"num_predict\":7,\"temperature\":0.0,\"top_p\":0.5,\"seed\":42,"
                "\"stop\":[\"x\"],\"frequency_penalty\":0.25,\"presence_penalty\":-1.0}");
    assert_true(json_is_true(json_object_get(n, "stream")));
    json_decref(n);
    // stop array: strings kept, other elements skipped (chat only).
    n = chat("{\"model\":\"m\"," MSG ",\"stop\":[\"a\",1,null,\"b\"]}");
    assert_json(json_object_get(json_object_get(n, "options"), "stop"), "[\"a\",\"b\"]");
    json_decref(n);
    // max_completion_tokens stands in for max_tokens, which wins when both are given.
    n = chat("{\"model\":\"m\"," MSG ",\"max_completion_tokens\":9}");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(n, "options"), "num_predict")), 9);
    json_decref(n);
    n = chat("{\"model\":\"m\"," MSG ",\"max_completion_tokens\":9,\"max_tokens\":3}");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(n, "options"), "num_predict")), 3);
    json_decref(n);
    // logprobs, top_logprobs, _debug_render_only pass through.
    n = chat("{\"model\":\"m\"," MSG ",\"logprobs\":true,\"top_logprobs\":5,"
             "\"_debug_render_only\":true}");
    assert_true(json_is_true(json_object_get(n, "logprobs")));
    assert_int_equal(json_integer_value(json_object_get(n, "top_logprobs")), 5);
    assert_true(json_is_true(json_object_get(n, "_debug_render_only")));
    json_decref(n);
}

static void test_chat_format_and_tools(void **state)
{
    (void)state;
    json_t *n = chat("{\"model\":\"m\"," MSG ",\"response_format\":{\"type\":\"json_object\"}}");
    assert_json(json_object_get(n, "format"), "\"json\"");
    json_decref(n);
    n = chat("{\"model\":\"m\"," MSG ",\"response_format\":{\"type\":\" JSON_Schema \","
             "\"json_schema\":{\"name\":\"x\",\"strict\":true,\"schema\":{\"type\":\"object\"}}}}");
    assert_json(json_object_get(n, "format"), "{\"type\":\"object\"}");
    json_decref(n);
    n = chat("{\"model\":\"m\"," MSG ",\"response_format\":{\"type\":\"text\"}}");
    assert_null(json_object_get(n, "format"));
    json_decref(n);
    n = chat("{\"model\":\"m\"," MSG ",\"response_format\":{\"type\":\"json_schema\"}}");
    assert_null(json_object_get(n, "format"));
    json_decref(n);
    n = chat("{\"model\":\"m\"," MSG ",\"tools\":[{\"type\":\"function\",\"function\":"
             "{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]}");
    assert_json(json_object_get(n, "tools"),
                "[{\"type\":\"function\",\"function\":"
                "{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]");
    json_decref(n);
}

static void test_chat_reasoning(void **state)
{
    (void)state;
    static const struct {
        const char *effort, *think;
    } cases[] = {{"none", "false"},        {"minimal", "\"low\""}, {"low", "\"low\""},
                 {"medium", "\"medium\""}, {"high", "\"high\""},   {"max", "\"max\""},
                 {"xhigh", "\"max\""},     {"ultra", "\"max\""}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[200];
        snprintf(body, sizeof(body), "{\"model\":\"m\"," MSG ",\"reasoning_effort\":\"%s\"}",
                 cases[i].effort);
        json_t *n = chat(body);
        assert_json(json_object_get(n, "think"), cases[i].think);
        json_decref(n);
        snprintf(body, sizeof(body), "{\"model\":\"m\"," MSG ",\"reasoning\":{\"effort\":\"%s\"}}",
                 cases[i].effort);
        n = chat(body);
        assert_json(json_object_get(n, "think"), cases[i].think);
        json_decref(n);
    }
    // Absent or "": thinking stays at the model's default.
    json_t *n = chat("{\"model\":\"m\"," MSG ",\"reasoning_effort\":\"\"}");
    assert_null(json_object_get(n, "think"));
    json_decref(n);
    // reasoning.effort wins over reasoning_effort.
    n = chat("{\"model\":\"m\"," MSG ",\"reasoning\":{\"effort\":\"high\"},"
             "\"reasoning_effort\":\"none\"}");
    assert_json(json_object_get(n, "think"), "\"high\"");
    json_decref(n);
    chat_fails("{\"model\":\"m\"," MSG ",\"reasoning_effort\":\"huge\"}",
               "invalid reasoning value: \"huge\" (must be \"minimal\", \"low\", \"medium\", "
               "\"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")");
}

static void test_chat_messages(void **state)
{
    (void)state;
    // Parts: one native message per part; tool calls attach to the last.
    json_t *n = chat(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"look\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,aGk=\"}},"
        "{\"type\":\"image_url\",\"image_url\":\"data:;base64,aGk=\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"hmm\",\"tool_calls\":[{\"id\":"
        "\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":\"{\\\"city\\\":\\\"Tokyo\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"},"
        "{\"role\":\"tool\",\"name\":\"explicit\",\"content\":\"x\"}]}");
    assert_json(json_object_get(n, "messages"),
                "[{\"role\":\"system\",\"content\":\"s\"},"
                "{\"role\":\"user\",\"content\":\"look\"},"
                "{\"role\":\"user\",\"content\":\"\",\"images\":[\"aGk=\"]},"
                "{\"role\":\"user\",\"content\":\"\",\"images\":[\"aGk=\"]},"
                "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"hmm\",\"tool_calls\":"
                "[{\"id\":\"call_1\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                "{\"city\":\"Tokyo\"}}}]},"
                "{\"role\":\"tool\",\"content\":\"sunny\",\"tool_name\":\"get_weather\","
                "\"tool_call_id\":\"call_1\"},"
                "{\"role\":\"tool\",\"content\":\"x\",\"tool_name\":\"explicit\"}]");
    json_decref(n);
    // Tool calls on a message with parts attach to its last part.
    n = chat("{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
             "\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}],\"tool_calls\":[{\"id\":"
             "\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}");
    assert_json(json_object_get(n, "messages"),
                "[{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":"
                "\"b\",\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":"
                "{}}}]}]");
    json_decref(n);
    // audio parts become attachments.
    n = chat("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
             "\"input_audio\",\"input_audio\":{\"data\":\"aGk=\",\"format\":\"wav\"}}]}]}");
    assert_json(json_object_get(n, "messages"),
                "[{\"role\":\"user\",\"content\":\"\",\"images\":[\"aGk=\"]}]");
    json_decref(n);
}

static void test_chat_errors(void **state)
{
    (void)state;
    chat_fails("{\"model\":\"m\",\"messages\":[]}", "[] is too short - 'messages'");
    chat_fails("{\"model\":\"m\"}", "[] is too short - 'messages'");
    chat_fails("{\"model\":\"m\"," MSG ",\"max_tokens\":\"5\"}",
               "json: cannot unmarshal string into field max_tokens of type int");
    chat_fails("{\"model\":\"m\"," MSG ",\"stream\":1}",
               "json: cannot unmarshal number into field stream of type bool");
    chat_fails("{\"model\":1," MSG "}",
               "json: cannot unmarshal number into field model of type string");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}",
               "invalid message content type: <nil>");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":1}]}",
               "invalid message content type: float64");
    chat_fails(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"x\"}]}]}",
        "invalid message format");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
               "\"text\":1}]}]}",
               "invalid message format");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"image_url\",\"image_url\":{\"url\":\"https://x/y.png\"}}]}]}",
               "image URLs are not currently supported, please use base64 encoded data instead");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"image_url\",\"image_url\":\"data:image/gif;base64,aGk=\"}]}]}",
               "invalid image input");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"image_url\",\"image_url\":\"data:image/png;base64,a$Gk=\"}]}]}",
               "invalid image input");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"input_audio\",\"input_audio\":{}}]}]}",
               "invalid input_audio format: missing data");
    chat_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":"
               "\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]}",
               "invalid tool call arguments");
}

static void test_completion_request(void **state)
{
    (void)state;
    json_t *n = completion("{\"model\":\"m\",\"prompt\":\"p\"}");
    assert_json(n, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":1.0,"
                   "\"frequency_penalty\":0.0,\"presence_penalty\":0.0,\"top_p\":1.0},"
                   "\"stream\":false}");
    json_decref(n);
    n = completion("{\"model\":\"m\",\"prompt\":\"p\",\"suffix\":\"s\",\"max_tokens\":4,"
                   "\"temperature\":0.5,\"top_p\":0,\"seed\":1,\"stop\":[\"a\",\"b\"],"
                   "\"frequency_penalty\":1,\"presence_penalty\":2,\"stream\":true,"
                   "\"logprobs\":3,\"echo\":true,\"best_of\":2,\"n\":1,\"user\":\"u\"}");
    assert_json(n, "{\"model\":\"m\",\"prompt\":\"p\",\"suffix\":\"s\",\"options\":"
                   "{\"num_predict\":4,\"temperature\":0.5,\"top_p\":1.0,\"seed\":1,"
                   "\"stop\":[\"a\",\"b\"],\"frequency_penalty\":1.0,\"presence_penalty\":2.0},"
                   "\"logprobs\":true,\"top_logprobs\":3,\"stream\":true}");
    json_decref(n);
    n = completion("{\"model\":\"m\",\"prompt\":\"p\",\"stop\":\"x\",\"top_p\":0.3}");
    assert_json(json_object_get(n, "options"),
                "{\"stop\":[\"x\"],\"temperature\":1.0,\"frequency_penalty\":0.0,"
                "\"presence_penalty\":0.0,\"top_p\":0.3}");
    json_decref(n);
    completion_fails("{\"model\":\"m\",\"prompt\":[\"a\"]}",
                     "json: cannot unmarshal array into field prompt of type string");
    completion_fails("{\"model\":\"m\",\"prompt\":\"a\",\"stop\":[\"x\",1]}",
                     "invalid type for 'stop' field: float64");
}

static const char native_final[] =
    "{\"model\":\"m\",\"created_at\":\"2024-07-15T00:00:00Z\",\"message\":{\"role\":\"assistant\","
    "\"content\":\"Hello!\",\"thinking\":\"why\"},\"done\":true,\"done_reason\":\"stop\","
    "\"prompt_eval_count\":26,\"eval_count\":5}";

static void test_chat_completion_object(void **state)
{
    (void)state;
    json_t *nat = jsontest_parse(native_final);
    json_t *o = srv_openai_chat_completion("chatcmpl-1", nat);
    assert_json(o, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1721001600,"
                   "\"model\":\"m\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,"
                   "\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\",\"reasoning\":"
                   "\"why\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":26,"
                   "\"completion_tokens\":5,\"total_tokens\":31}}");
    json_decref(o);
    json_decref(nat);
    // Tool calls: arguments become a JSON string; stop becomes tool_calls.
    nat = jsontest_parse(
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\","
        "\"tool_calls\":[{\"id\":\"call_x\",\"function\":{\"index\":0,\"name\":\"f\","
        "\"arguments\":{\"city\":\"Tokyo\"}}}]},\"done\":true,\"done_reason\":\"stop\"}");
    o = srv_openai_chat_completion("c", nat);
    json_t *choice = json_array_get(json_object_get(o, "choices"), 0);
    assert_json(json_object_get(json_object_get(choice, "message"), "tool_calls"),
                "[{\"id\":\"call_x\",\"index\":0,\"type\":\"function\",\"function\":{\"name\":"
                "\"f\",\"arguments\":\"{\\\"city\\\":\\\"Tokyo\\\"}\"}}]");
    assert_string_equal(json_string_value(json_object_get(choice, "finish_reason")), "tool_calls");
    json_decref(o);
    json_decref(nat);
    // length stays; no reason → null; logprobs wrapped.
    nat = jsontest_parse(
        "{\"model\":\"m\",\"message\":{\"content\":\"x\"},\"done\":true,"
        "\"done_reason\":\"length\",\"logprobs\":[{\"token\":\"x\",\"logprob\":-1}]}");
    o = srv_openai_chat_completion("c", nat);
    choice = json_array_get(json_object_get(o, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(choice, "finish_reason")), "length");
    assert_json(json_object_get(choice, "logprobs"),
                "{\"content\":[{\"token\":\"x\",\"logprob\":-1}]}");
    json_decref(o);
    json_decref(nat);
    nat = jsontest_parse("{\"model\":\"m\",\"message\":{\"content\":\"x\"}}");
    o = srv_openai_chat_completion("c", nat);
    choice = json_array_get(json_object_get(o, "choices"), 0);
    assert_true(json_is_null(json_object_get(choice, "finish_reason")));
    json_decref(o);
    json_decref(nat);
}

static void test_text_completion_object(void **state)
{
    (void)state;
    json_t *nat =
        jsontest_parse("{\"model\":\"m\",\"created_at\":\"2024-07-15T00:00:00Z\",\"response\":"
                       "\"once\",\"done\":true,\"done_reason\":\"length\",\"prompt_eval_count\":"
                       "3,\"eval_count\":4}");
    json_t *o = srv_openai_text_completion("cmpl-1", nat, false);
    assert_json(o, "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1721001600,"
                   "\"model\":\"m\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"text\":"
                   "\"once\",\"index\":0,\"finish_reason\":\"length\"}],\"usage\":"
                   "{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}");
    json_decref(o);
    json_decref(nat);
}

// Splits SSE text into its data payloads (parsed; "[DONE]" as a JSON string).
static json_t *events(const char *text)
{
    json_t *arr = json_array();
    const char *p = text;
    while (*p) {
        assert_true(strncmp(p, "data: ", 6) == 0);
        p += 6;
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        if (end - p == 6 && strncmp(p, "[DONE]", 6) == 0) {
            json_array_append_new(arr, json_string("[DONE]"));
        } else {
            json_t *v = NULL;
            assert_int_equal(jsonx_parse(p, (size_t)(end - p), &v, NULL), 0);
            json_array_append_new(arr, v);
        }
        p = end + 2;
    }
    return arr;
}

static void encode(struct srv_openai_stream *s, const char *native, struct buf *out)
{
    json_t *nat = jsontest_parse(native);
    srv_openai_stream_encode(s, nat, out);
    json_decref(nat);
}

static json_t *delta_of(const json_t *ev)
{
    return json_object_get(json_array_get(json_object_get(ev, "choices"), 0), "delta");
}

static void test_chat_stream(void **state)
{
    (void)state;
    struct srv_openai_stream *s = srv_openai_stream_new(true, true);
    struct buf out;
    buf_init(&out, 0);
    encode(s,
           "{\"model\":\"m\",\"created_at\":\"2024-07-15T00:00:00Z\",\"message\":{\"role\":"
           "\"assistant\",\"content\":\"\",\"thinking\":\"hm\"},\"done\":false}",
           &out);
    // A piece holding thinking and content is split: reasoning first.
    encode(s,
           "{\"model\":\"m\",\"created_at\":\"2024-07-15T00:00:09Z\",\"message\":{\"role\":"
           "\"assistant\",\"content\":\"Hi\",\"thinking\":\"!\"},\"done\":false}",
           &out);
    encode(s,
           "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\","
           "\"tool_calls\":[{\"id\":\"call_1\",\"function\":{\"index\":0,\"name\":\"f\","
           "\"arguments\":{}}}]},\"done\":false}",
           &out);
    encode(s,
           "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":"
           "true,\"done_reason\":\"stop\",\"prompt_eval_count\":2,\"eval_count\":3}",
           &out);
    json_t *ev = events(buf_cstr(&out));
    assert_int_equal(json_array_size(ev), 6);
    const char *id = json_string_value(json_object_get(json_array_get(ev, 0), "id"));
    for (size_t i = 0; i < 6; i++) {
        json_t *e = json_array_get(ev, i);
        assert_string_equal(json_string_value(json_object_get(e, "id")), id);
        assert_string_equal(json_string_value(json_object_get(e, "object")),
                            "chat.completion.chunk");
        assert_int_equal(json_integer_value(json_object_get(e, "created")), 1721001600);
        assert_string_equal(json_string_value(json_object_get(e, "system_fingerprint")),
                            "fp_ollama");
        assert_int_equal(json_object_get(e, "usage") != NULL, i == 5);
    }
    assert_json(delta_of(json_array_get(ev, 0)),
                "{\"role\":\"assistant\",\"content\":\"\",\"reasoning\":\"hm\"}");
    assert_json(delta_of(json_array_get(ev, 1)), "{\"reasoning\":\"!\"}");
    assert_json(delta_of(json_array_get(ev, 2)), "{\"content\":\"Hi\"}");
    assert_json(delta_of(json_array_get(ev, 3)),
                "{\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"index\":0,\"type\":"
                "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}");
    // Finish chunk: empty delta; stop → tool_calls after a tool call.
    json_t *fin = json_array_get(json_object_get(json_array_get(ev, 4), "choices"), 0);
    assert_json(json_object_get(fin, "delta"), "{}");
    assert_string_equal(json_string_value(json_object_get(fin, "finish_reason")), "tool_calls");
    json_t *u = json_array_get(ev, 5);
    assert_int_equal(json_array_size(json_object_get(u, "choices")), 0);
    assert_json(json_object_get(u, "usage"),
                "{\"prompt_tokens\":2,\"completion_tokens\":3,\"total_tokens\":5}");
    json_decref(ev);
    free(s);

    // An empty completion still opens with a role chunk; no usage without
    // include_usage; length passes through; errors become error events.
    s = srv_openai_stream_new(true, false);
    buf_reset(&out);
    encode(s,
           "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":"
           "true,\"done_reason\":\"length\"}",
           &out);
    encode(s, "{\"error\":\"boom\"}", &out);
    ev = events(buf_cstr(&out));
    assert_int_equal(json_array_size(ev), 3);
    assert_json(delta_of(json_array_get(ev, 0)), "{\"role\":\"assistant\",\"content\":\"\"}");
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_array_get(ev, 1), "choices"), 0), "finish_reason")),
        "length");
    assert_json(json_array_get(ev, 2), "{\"error\":{\"message\":\"boom\",\"type\":\"api_error\","
                                       "\"param\":null,\"code\":null}}");
    json_decref(ev);
    free(s);
    buf_deinit(&out);
}

static void test_completion_stream(void **state)
{
    (void)state;
    struct srv_openai_stream *s = srv_openai_stream_new(false, true);
    struct buf out;
    buf_init(&out, 0);
    encode(s, "{\"model\":\"m\",\"response\":\"a\",\"done\":false}", &out);
    encode(s,
           "{\"model\":\"m\",\"response\":\"\",\"done\":true,\"done_reason\":\"stop\","
           "\"prompt_eval_count\":4,\"eval_count\":1}",
           &out);
    json_t *ev = events(buf_cstr(&out));
    assert_int_equal(json_array_size(ev), 3);
    json_t *c0 = json_array_get(json_object_get(json_array_get(ev, 0), "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "text")), "a");
    assert_true(json_is_null(json_object_get(c0, "finish_reason")));
    assert_json(json_object_get(json_array_get(ev, 0), "usage"),
                "{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}");
    json_t *c1 = json_array_get(json_object_get(json_array_get(ev, 1), "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c1, "finish_reason")), "stop");
    assert_int_equal(json_array_size(json_object_get(json_array_get(ev, 2), "choices")), 0);
    assert_json(json_object_get(json_array_get(ev, 2), "usage"),
                "{\"prompt_tokens\":4,\"completion_tokens\":1,\"total_tokens\":5}");
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(ev, i), "object")),
                            "text_completion");
    json_decref(ev);
    free(s);
    buf_deinit(&out);
}

static void test_base64(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {{"", ""},        {"f", "Zg=="},        {"fo", "Zm8="},
                 {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"\xff\xfe\xfd", "//79"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;
        buf_init(&b, 0);
        base64_encode((const unsigned char *)cases[i].in, strlen(cases[i].in), &b);
        assert_string_equal(buf_cstr(&b), cases[i].out);
        assert_true(base64_valid(buf_cstr(&b)));
        buf_deinit(&b);
    }
    assert_false(base64_valid("Zg="));
    assert_false(base64_valid("Zh=="));  // non-zero padding bits
    assert_false(base64_valid("Zg==Zg=="));
    assert_false(base64_valid("Z!=="));
    assert_false(base64_valid("Zm9"));
    assert_true(base64_valid("Zm9v\nYg=="));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_defaults),
        cmocka_unit_test(test_chat_options),
        cmocka_unit_test(test_chat_format_and_tools),
        cmocka_unit_test(test_chat_reasoning),
        cmocka_unit_test(test_chat_messages),
        cmocka_unit_test(test_chat_errors),
        cmocka_unit_test(test_completion_request),
        cmocka_unit_test(test_chat_completion_object),
        cmocka_unit_test(test_text_completion_object),
        cmocka_unit_test(test_chat_stream),
        cmocka_unit_test(test_completion_stream),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

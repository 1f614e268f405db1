// Unit tests of the Anthropic Messages translation (src/server/anthropic.c):
// request → native /api/chat body (system, blocks, images, tool_use /
// tool_result, thinking, options, tools, tool_choice), the errors with
// Ollama's wording, native answers → Message objects, and the SSE events
// built from native stream objects. No server: the functions are pure.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "jsontest.h"

static json_t *req(const char *body)
{
    return jsontest_convert(srv_anthropic_request, body);
}

static void req_fails(const char *body, const char *msg)
{
    jsontest_convert_fails(srv_anthropic_request, body, msg);
}

#define M "\"model\":\"m\",\"max_tokens\":10,"

static void test_request_basic(void **state)
{
    (void)state;
    json_t *n = req("{" M "\"system\":\"be brief\",\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,"
                    "\"stop_sequences\":[\"END\"],\"metadata\":{\"user_id\":\"u\"},"
                    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    jsontest_eq(n, "{\"model\":\"m\",\"stream\":false,"
                   "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                   "{\"role\":\"user\",\"content\":\"hi\"}],"
                   "\"options\":{\"num_predict\":10,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,"
                   "\"stop\":[\"END\"]}}");
    json_decref(n);
    // System as text blocks; content as blocks; role case folded.
    n = req("{" M "\"stream\":true,\"system\":[{\"type\":\"text\",\"text\":\"a\"},"
            "{\"type\":\"text\",\"text\":\"b\"}],\"messages\":[{\"role\":\"User\",\"content\":"
            "[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"text\",\"text\":\"y\"}]}]}");
    jsontest_eq(
        json_object_get(n, "messages"),
        "[{\"role\":\"system\",\"content\":\"ab\"},{\"role\":\"user\",\"content\":\"xy\"}]");
    assert_true(json_is_true(json_object_get(n, "stream")));
    json_decref(n);
}

static void test_request_tools_roundtrip(void **state)
{
    (void)state;
    json_t *n = req(
        "{" M "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\","
        "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\","
        "\"signature\":\"s\"},{\"type\":\"text\",\"text\":\"Let me check.\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\","
        "\"input\":{\"city\":\"Paris\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"sunny\"}]},{\"type\":\"text\",\"text\":"
        "\"thanks\"}]}]}");
    jsontest_eq(
        json_object_get(n, "tools"),
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
        "\"Weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
        "\"string\"}}}}}]");
    jsontest_eq(json_object_get(n, "messages"),
                "[{\"role\":\"user\",\"content\":\"weather?\"},"
                "{\"role\":\"assistant\",\"content\":\"Let me check.\",\"thinking\":\"hmm\","
                "\"tool_calls\":[{\"id\":\"toolu_1\",\"function\":{\"name\":\"get_weather\","
                "\"arguments\":{\"city\":\"Paris\"}}}]},"
                "{\"role\":\"tool\",\"content\":\"sunny\",\"tool_call_id\":\"toolu_1\","
                "\"tool_name\":\"get_weather\"},"
                "{\"role\":\"user\",\"content\":\"thanks\"}]");
    json_decref(n);
}

static void test_request_images(void **state)
{
    (void)state;
    json_t *n = req("{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
                    "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":"
                    "\"aGVsbG8=\"}},{\"type\":\"text\",\"text\":\"what?\"}]}]}");
    jsontest_eq(json_object_get(n, "messages"),
                "[{\"role\":\"user\",\"content\":\"what?\",\"images\":[\"aGVsbG8=\"]}]");
    json_decref(n);
    req_fails("{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
              "\"source\":{\"type\":\"url\",\"url\":\"https://x/y.png\"}}]}]}",
              "invalid image source type: url. Only base64 images are supported.");
    req_fails("{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
              "\"source\":{\"type\":\"base64\",\"data\":\"!!\"}}]}]}",
              "invalid base64 image data");
    req_fails("{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
              "invalid image source");
}

static void test_request_thinking_and_choice(void **state)
{
    (void)state;
    json_t *n = req("{" M "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},"
                    "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    assert_true(json_is_true(json_object_get(n, "think")));
    json_decref(n);
    n = req("{" M "\"thinking\":{\"type\":\"disabled\"},\"output_config\":{\"effort\":\"high\"},"
            "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    assert_true(json_is_false(json_object_get(n, "think")));
    json_decref(n);
    n = req("{" M "\"output_config\":{\"effort\":\"xhigh\"},"
            "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    assert_string_equal(json_string_value(json_object_get(n, "think")), "high");
    json_decref(n);

    const char *tools = "\"tools\":[{\"name\":\"a\",\"input_schema\":{\"type\":\"object\"}},"
                        "{\"name\":\"b\",\"input_schema\":{\"type\":\"object\",\"properties\":"
                        "{\"x\":{\"type\":\"integer\"}}}}],"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],";
    char body[1024];
    snprintf(body, sizeof(body), "{" M "%s\"tool_choice\":{\"type\":\"none\"}}", tools);
    n = req(body);
    assert_null(json_object_get(n, "tools"));
    assert_null(json_object_get(n, "format"));
    json_decref(n);
    snprintf(body, sizeof(body), "{" M "%s\"tool_choice\":{\"type\":\"auto\"}}", tools);
    n = req(body);
    assert_int_equal(json_array_size(json_object_get(n, "tools")), 2);
    assert_null(json_object_get(n, "format"));
    json_decref(n);
    snprintf(body, sizeof(body), "{" M "%s\"tool_choice\":{\"type\":\"tool\",\"name\":\"b\"}}",
             tools);
    n = req(body);
    jsontest_eq(json_object_get(n, "format"),
                "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"b\"},\"arguments\":"
                "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}},"
                "\"required\":[\"name\",\"arguments\"]}");
    json_decref(n);
    snprintf(body, sizeof(body), "{" M "%s\"tool_choice\":{\"type\":\"any\"}}", tools);
    n = req(body);
    assert_int_equal(json_array_size(json_object_get(json_object_get(n, "format"), "anyOf")), 2);
    json_decref(n);
    snprintf(body, sizeof(body), "{" M "%s\"tool_choice\":{\"type\":\"tool\",\"name\":\"zz\"}}",
             tools);
    req_fails(body, "tool_choice names tool \"zz\", which is not in tools");
    snprintf(body, sizeof(body), "{" M "%s\"tool_choice\":{\"type\":\"sometimes\"}}", tools);
    req_fails(body, "invalid tool_choice type \"sometimes\" (must be \"auto\", \"any\", "
                    "\"tool\", or \"none\")");
    req_fails("{" M "\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\","
              "\"content\":\"q\"}]}",
              "tool_choice \"any\" requires tools");
}

static void test_request_errors(void **state)
{
    (void)state;
    req_fails("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              "model is required");
    req_fails("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              "max_tokens is required and must be positive");
    req_fails("{\"model\":\"m\",\"max_tokens\":0,\"messages\":[{\"role\":\"user\",\"content\":"
              "\"x\"}]}",
              "max_tokens is required and must be positive");
    req_fails("{" M "\"messages\":[]}", "messages is required");
    req_fails("{\"model\":5,\"max_tokens\":1}",
              "json: cannot unmarshal number into Go struct field MessagesRequest.model of type "
              "string");
    req_fails("{" M "\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
              "\"name\":\"f\"}]}]}",
              "tool_use block missing required 'id' field");
    req_fails("{" M "\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
              "\"id\":\"t\"}]}]}",
              "tool_use block missing required 'name' field");
    req_fails("{" M "\"tools\":[{\"name\":\"f\",\"input_schema\":[1]}],"
              "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
              "invalid input_schema for tool \"f\": json: cannot unmarshal array into Go value "
              "of type api.ToolFunctionParameters");
}

static void test_response(void **state)
{
    (void)state;
    json_t *nat =
        jsontest_parse("{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\","
                       "\"thinking\":\"think\"},\"done\":true,\"done_reason\":\"length\","
                       "\"prompt_eval_count\":12,\"eval_count\":3}");
    json_t *o = srv_anthropic_response("msg_1", "m", nat);
    jsontest_eq(o, "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\","
                   "\"content\":[{\"type\":\"thinking\",\"thinking\":\"think\",\"signature\":\"\"},"
                   "{\"type\":\"text\",\"text\":\"Hi\"}],\"stop_reason\":\"max_tokens\","
                   "\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":3}}");
    json_decref(o);
    json_decref(nat);
    nat = jsontest_parse(
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":"
        "\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},"
        "\"done\":true,\"done_reason\":\"stop\"}");
    o = srv_anthropic_response("msg_2", "m", nat);
    jsontest_eq(json_object_get(o, "content"),
                "[{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{\"a\":1}}]");
    assert_string_equal(json_string_value(json_object_get(o, "stop_reason")), "tool_use");
    json_decref(o);
    json_decref(nat);
    nat = jsontest_parse("{\"message\":{\"content\":\"x\"},\"done_reason\":\"stop\"}");
    o = srv_anthropic_response("msg_3", "m", nat);
    assert_string_equal(json_string_value(json_object_get(o, "stop_reason")), "end_turn");
    json_decref(o);
    json_decref(nat);
    o = srv_anthropic_error(404, "model 'x' not found");
    assert_string_equal(json_string_value(json_object_get(o, "type")), "error");
    jsontest_eq(json_object_get(o, "error"),
                "{\"type\":\"not_found_error\",\"message\":\"model 'x' not found\"}");
    assert_true(strncmp(json_string_value(json_object_get(o, "request_id")), "req_", 4) == 0);
    json_decref(o);
}

// Feeds native lines to a stream and returns the event names, space-separated.
static void stream_events(const char *const *lines, char *names, size_t n, json_t **datas)
{
    struct srv_anthropic_stream *s = srv_anthropic_stream_new("msg_x", "m");
    struct buf out;
    buf_init(&out, 0);
    for (size_t i = 0; lines[i]; i++) {
        json_t *nat = jsontest_parse(lines[i]);
        srv_anthropic_stream_encode(s, nat, &out);
        json_decref(nat);
    }
    srv_anthropic_stream_free(s);
    names[0] = '\0';
    *datas = json_array();
    const char *p = out.data;
    while (p && *p) {
        if (strncmp(p, "event: ", 7) != 0)
            fail_msg("not an event line: %.40s", p);
        const char *nl = strchr(p, '\n');
        size_t len = strlen(names);
        snprintf(names + len, n - len, "%s%.*s", len ? " " : "", (int)(nl - p - 7), p + 7);
        p = nl + 1;
        assert_true(strncmp(p, "data: ", 6) == 0);
        const char *end = strstr(p, "\n\n");
        json_t *v = NULL;
        assert_int_equal(jsonx_parse(p + 6, (size_t)(end - p - 6), &v, NULL), 0);
        json_array_append_new(*datas, v);
        p = end + 2;
    }
    buf_deinit(&out);
}

static void test_stream(void **state)
{
    (void)state;
    char names[1024];
    json_t *d;
    static const char *const text[] = {
        "{\"message\":{\"role\":\"assistant\",\"thinking\":\"a\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"thinking\":\"b\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"lo\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,"
        "\"done_reason\":\"stop\",\"prompt_eval_count\":5,\"eval_count\":4}",
        NULL};
    stream_events(text, names, sizeof(names), &d);
    assert_string_equal(names, "message_start content_block_start ping content_block_delta "
                               "content_block_delta content_block_stop content_block_start "
                               "content_block_delta content_block_delta content_block_stop "
                               "message_delta message_stop");
    jsontest_eq(json_object_get(json_array_get(d, 0), "message"),
                "{\"id\":\"msg_x\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\","
                "\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                "\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}");
    jsontest_eq(json_array_get(d, 3), "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
                                      "{\"type\":\"thinking_delta\",\"thinking\":\"a\"}}");
    jsontest_eq(
        json_array_get(d, 6),
        "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\","
        "\"text\":\"\"}}");
    jsontest_eq(json_array_get(d, 8), "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
                                      "{\"type\":\"text_delta\",\"text\":\"lo\"}}");
    jsontest_eq(json_array_get(d, 10),
                "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
                "\"stop_sequence\":null},\"usage\":{\"input_tokens\":5,\"output_tokens\":4}}");
    json_decref(d);

    static const char *const tool[] = {
        "{\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\","
        "\"function\":{\"name\":\"f\",\"arguments\":{\"q\":\"x\"}}}]},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,"
        "\"done_reason\":\"stop\"}",
        NULL};
    stream_events(tool, names, sizeof(names), &d);
    assert_string_equal(names, "message_start content_block_start ping content_block_delta "
                               "content_block_stop content_block_start content_block_delta "
                               "content_block_stop message_delta message_stop");
    jsontest_eq(json_array_get(d, 5),
                "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
                "\"tool_use\",\"id\":\"c1\",\"name\":\"f\",\"input\":{}}}");
    jsontest_eq(json_array_get(d, 6), "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
                                      "{\"type\":\"input_json_delta\",\"partial_json\":"
                                      "\"{\\\"q\\\":\\\"x\\\"}\"}}");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(d, 8), "delta"), "stop_reason")),
                        "tool_use");
    json_decref(d);

    static const char *const failing[] = {
        "{\"message\":{\"role\":\"assistant\",\"content\":\"a\"},\"done\":false}",
        "{\"error\":\"model runner has unexpectedly stopped\"}",
        "{\"message\":{\"content\":\"late\"},\"done\":true}", NULL};
    stream_events(failing, names, sizeof(names), &d);
    assert_string_equal(names, "message_start content_block_start ping content_block_delta "
                               "error");
    jsontest_eq(json_array_get(d, 4), "{\"type\":\"error\",\"error\":{\"type\":\"api_error\","
                                      "\"message\":\"model runner has unexpectedly stopped\"}}");
    json_decref(d);
}

static void test_forced_call(void **state)
{
    (void)state;
    json_t *nat = jsontest_parse("{\"message\":{\"role\":\"assistant\",\"content\":"
                                 "\"{\\\"name\\\":\\\"f\\\",\\\"arguments\\\":{\\\"x\\\":2}}\"},"
                                 "\"done\":true}");
    srv_forced_call_from_content(nat, "toolu");
    const json_t *msg = json_object_get(nat, "message");
    assert_string_equal(json_string_value(json_object_get(msg, "content")), "");
    const json_t *call = json_array_get(json_object_get(msg, "tool_calls"), 0);
    assert_true(strncmp(json_string_value(json_object_get(call, "id")), "toolu_", 6) == 0);
    jsontest_eq(json_object_get(call, "function"), "{\"name\":\"f\",\"arguments\":{\"x\":2}}");
    json_decref(nat);
    // Not the forced shape: left as text.
    nat = jsontest_parse("{\"message\":{\"content\":\"plain\"}}");
    srv_forced_call_from_content(nat, "toolu");
    assert_null(json_object_get(json_object_get(nat, "message"), "tool_calls"));
    json_decref(nat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_basic),  cmocka_unit_test(test_request_tools_roundtrip),
        cmocka_unit_test(test_request_images), cmocka_unit_test(test_request_thinking_and_choice),
        cmocka_unit_test(test_request_errors), cmocka_unit_test(test_response),
        cmocka_unit_test(test_stream),         cmocka_unit_test(test_forced_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

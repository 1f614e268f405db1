// Unit tests of the OpenAI Responses translation (src/server/responses.c):
// request → native /api/chat body (input string and items, instructions,
// function calls and their outputs, reasoning, images, options, tools,
// tool_choice, text.format), the errors, native answers → Response objects,
// and the event stream with its sequence numbers. No server.
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
    return jsontest_convert(srv_responses_request, body);
}

static void req_fails(const char *body, const char *msg)
{
    jsontest_convert_fails(srv_responses_request, body, msg);
}

static void test_request_string(void **state)
{
    (void)state;
    json_t *n = req("{\"model\":\"m\",\"input\":\"hi\",\"instructions\":\"be brief\","
                    "\"max_output_tokens\":20,\"top_p\":0.5,\"store\":true,"
                    "\"previous_response_id\":\"resp_1\",\"reasoning\":{\"effort\":\"low\"}}");
    jsontest_eq(n, "{\"model\":\"m\",\"stream\":false,\"think\":\"low\","
                   "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                   "{\"role\":\"user\",\"content\":\"hi\"}],"
                   "\"options\":{\"temperature\":1.0,\"top_p\":0.5,\"num_predict\":20}}");
    json_decref(n);
    n = req("{\"model\":\"m\",\"input\":\"x\",\"temperature\":0.2,\"stream\":true,"
            "\"reasoning\":{\"effort\":\"none\"}}");
    assert_true(json_is_false(json_object_get(n, "think")));
    assert_true(json_is_true(json_object_get(n, "stream")));
    jsontest_eq(json_object_get(n, "options"), "{\"temperature\":0.2}");
    json_decref(n);
}

static void test_request_items(void **state)
{
    (void)state;
    json_t *n = req(
        "{\"model\":\"m\",\"input\":["
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\","
        "\"text\":\"think\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"get_weather\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"sunny\"},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
        "\"text\":\"It is sunny.\"}]},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
        "\"and \"},{\"type\":\"input_text\",\"text\":\"tomorrow?\"},{\"type\":\"input_image\","
        "\"detail\":\"auto\",\"image_url\":\"data:image/png;base64,aGVsbG8=\"}]}]}");
    jsontest_eq(json_object_get(n, "messages"),
                "[{\"role\":\"user\",\"content\":\"weather?\"},"
                "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"think\",\"tool_calls\":"
                "[{\"id\":\"call_1\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                "{\"city\":\"Paris\"}}}]},"
                "{\"role\":\"tool\",\"content\":\"sunny\",\"tool_call_id\":\"call_1\","
                "\"tool_name\":\"get_weather\"},"
                "{\"role\":\"assistant\",\"content\":\"It is sunny.\"},"
                "{\"role\":\"user\",\"content\":\"and tomorrow?\",\"images\":[\"aGVsbG8=\"]}]");
    json_decref(n);
}

static void test_request_tools(void **state)
{
    (void)state;
    const char *tools = "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"F\","
                        "\"parameters\":{\"type\":\"object\"},\"strict\":null},"
                        "{\"type\":\"namespace\",\"name\":\"ns\",\"tools\":[{\"type\":"
                        "\"function\",\"name\":\"g\",\"parameters\":{\"type\":\"object\"}}]},"
                        "{\"type\":\"web_search\"}]";
    char body[1024];
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"x\",%s}", tools);
    json_t *n = req(body);
    jsontest_eq(json_object_get(n, "tools"),
                "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"F\","
                "\"parameters\":{\"type\":\"object\"}}},{\"type\":\"function\",\"function\":"
                "{\"name\":\"ns.g\",\"parameters\":{\"type\":\"object\"}}}]");
    json_decref(n);
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"x\",%s,\"tool_choice\":\"none\"}",
             tools);
    n = req(body);
    assert_null(json_object_get(n, "tools"));
    json_decref(n);
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"input\":\"x\",%s,\"tool_choice\":\"required\"}", tools);
    n = req(body);
    assert_int_equal(json_array_size(json_object_get(json_object_get(n, "format"), "anyOf")), 2);
    json_decref(n);
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"input\":\"x\",%s,\"tool_choice\":{\"type\":\"function\","
             "\"name\":\"f\"}}",
             tools);
    n = req(body);
    jsontest_eq(json_object_get(n, "format"),
                "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"f\"},\"arguments\":"
                "{\"type\":\"object\"}},\"required\":[\"name\",\"arguments\"]}");
    json_decref(n);
    n = req("{\"model\":\"m\",\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\","
            "\"name\":\"s\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
            "\"integer\"}}}}}}");
    jsontest_eq(json_object_get(n, "format"),
                "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    json_decref(n);
}

static void test_request_errors(void **state)
{
    (void)state;
    req_fails("{\"model\":\"m\",\"input\":[{\"content\":\"x\"}]}",
              "input[0]: input item missing required 'type' field");
    req_fails("{\"model\":\"m\",\"input\":[{\"type\":\"bogus\"}]}",
              "input[0]: unknown input item type: \"bogus\"");
    req_fails("{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"input_file\",\"file_id\":\"f\"}]}]}",
              "input[0]: file inputs are not currently supported");
    req_fails("{\"model\":\"m\",\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\","
              "\"name\":\"f\",\"arguments\":\"[1]\"}]}",
              "failed to parse function call arguments: json: cannot unmarshal non-object into "
              "Go value of type map[string]interface {}");
    req_fails("{\"model\":\"m\",\"input\":\"x\",\"reasoning\":{\"effort\":\"huge\"}}",
              "invalid reasoning value: \"huge\" (must be \"minimal\", \"low\", \"medium\", "
              "\"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")");
    req_fails("{\"model\":\"m\",\"input\":5}",
              "input must be a string or array: json: cannot unmarshal number into Go value of "
              "type []json.RawMessage");
    req_fails("{\"model\":\"m\",\"input\":\"x\",\"max_output_tokens\":\"9\"}",
              "json: cannot unmarshal string into Go struct field ResponsesRequest."
              "max_output_tokens of type int");
    req_fails("{\"model\":\"m\",\"input\":\"x\",\"tool_choice\":\"required\"}",
              "tool_choice names a tool that is not in tools");
}

static void test_response(void **state)
{
    (void)state;
    json_t *r = jsontest_parse("{\"model\":\"m\",\"input\":\"x\",\"instructions\":\"i\","
                               "\"max_output_tokens\":9,\"temperature\":0.5}");
    json_t *nat = jsontest_parse("{\"model\":\"m\",\"created_at\":\"2025-01-02T03:04:05Z\","
                                 "\"message\":{\"role\":\"assistant\",\"content\":\"Hi\","
                                 "\"thinking\":\"t\"},\"done\":true,\"done_reason\":\"stop\","
                                 "\"prompt_eval_count\":4,\"eval_count\":2}");
    json_t *o = srv_responses_response(r, "resp_1", "msg_1", nat);
    assert_string_equal(json_string_value(json_object_get(o, "object")), "response");
    assert_string_equal(json_string_value(json_object_get(o, "status")), "completed");
    assert_int_equal(json_integer_value(json_object_get(o, "created_at")), 1735787045);
    assert_true(json_is_integer(json_object_get(o, "completed_at")));
    assert_string_equal(json_string_value(json_object_get(o, "instructions")), "i");
    assert_true(json_is_null(json_object_get(o, "previous_response_id")));
    assert_true(json_is_false(json_object_get(o, "store")));
    assert_int_equal(json_integer_value(json_object_get(o, "max_output_tokens")), 9);
    jsontest_eq(json_object_get(o, "output"),
                "[{\"id\":\"rs_resp_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":"
                "\"summary_text\",\"text\":\"t\"}],\"encrypted_content\":\"t\"},"
                "{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":"
                "\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\","
                "\"annotations\":[],\"logprobs\":[]}]}]");
    jsontest_eq(
        json_object_get(o, "usage"),
        "{\"input_tokens\":4,\"output_tokens\":2,\"total_tokens\":6,\"input_tokens_details\":"
        "{\"cached_tokens\":0},\"output_tokens_details\":{\"reasoning_tokens\":0}}");
    json_decref(o);
    json_decref(nat);
    nat = jsontest_parse(
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":"
        "\"call_9\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},"
        "\"done\":true}");
    o = srv_responses_response(r, "resp_2", "msg_2", nat);
    jsontest_eq(json_object_get(o, "output"),
                "[{\"id\":\"fc_resp_2_0\",\"type\":\"function_call\",\"status\":\"completed\","
                "\"call_id\":\"call_9\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}]");
    json_decref(o);
    json_decref(nat);
    json_decref(r);
}

// Runs native lines through a stream; returns the parsed events, checking
// that each event line names the data's type and that sequence numbers
// count from 0.
static json_t *stream(const char *const *lines)
{
    json_t *r = jsontest_parse("{\"model\":\"m\",\"input\":\"x\"}");
    struct srv_responses_stream *s = srv_responses_stream_new(r, "resp_1", "msg_1");
    struct buf out;
    buf_init(&out, 0);
    for (size_t i = 0; lines[i]; i++) {
        json_t *nat = jsontest_parse(lines[i]);
        srv_responses_stream_encode(s, nat, &out);
        json_decref(nat);
    }
    srv_responses_stream_free(s);
    json_decref(r);
    json_t *evs = json_array();
    const char *p = out.data;
    while (p && *p) {
        assert_true(strncmp(p, "event: ", 7) == 0);
        const char *nl = strchr(p, '\n');
        char name[96];
        snprintf(name, sizeof(name), "%.*s", (int)(nl - p - 7), p + 7);
        p = nl + 1;
        assert_true(strncmp(p, "data: ", 6) == 0);
        const char *end = strstr(p, "\n\n");
        json_t *v = NULL;
        assert_int_equal(jsonx_parse(p + 6, (size_t)(end - p - 6), &v, NULL), 0);
        assert_string_equal(json_string_value(json_object_get(v, "type")), name);
        assert_int_equal(json_integer_value(json_object_get(v, "sequence_number")),
                         (int64_t)json_array_size(evs));
        json_array_append_new(evs, v);
        p = end + 2;
    }
    buf_deinit(&out);
    return evs;
}

static void names_are(const json_t *evs, const char *want)
{
    char got[2048] = "";
    size_t i;
    const json_t *v;
    json_array_foreach(evs, i, v)
    {
        size_t len = strlen(got);
        snprintf(got + len, sizeof(got) - len, "%s%s", i ? " " : "",
                 json_string_value(json_object_get(v, "type")));
    }
    assert_string_equal(got, want);
}

static void test_stream(void **state)
{
    (void)state;
    static const char *const text[] = {
        "{\"message\":{\"role\":\"assistant\",\"thinking\":\"t\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"He\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"y\"},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,"
        "\"prompt_eval_count\":3,\"eval_count\":2}",
        NULL};
    json_t *e = stream(text);
    names_are(e, "response.created response.in_progress response.output_item.added "
                 "response.reasoning_summary_text.delta response.reasoning_summary_text.done "
                 "response.output_item.done response.output_item.added "
                 "response.content_part.added response.output_text.delta "
                 "response.output_text.delta response.output_text.done "
                 "response.content_part.done response.output_item.done response.completed");
    const json_t *done = json_object_get(json_array_get(e, 13), "response");
    assert_string_equal(json_string_value(json_object_get(done, "status")), "completed");
    assert_int_equal(json_array_size(json_object_get(done, "output")), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 10), "text")), "Hey");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(e, 8), "output_index")), 1);
    jsontest_eq(
        json_object_get(done, "usage"),
        "{\"input_tokens\":3,\"output_tokens\":2,\"total_tokens\":5,\"input_tokens_details\":"
        "{\"cached_tokens\":0},\"output_tokens_details\":{\"reasoning_tokens\":0}}");
    json_decref(e);

    static const char *const calls[] = {
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\","
        "\"function\":{\"name\":\"f\",\"arguments\":{\"q\":1}}}]},\"done\":false}",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"ignored\"},\"done\":true}", NULL};
    e = stream(calls);
    names_are(e, "response.created response.in_progress response.output_item.added "
                 "response.function_call_arguments.delta response.function_call_arguments.done "
                 "response.output_item.done response.completed");
    const json_t *added = json_object_get(json_array_get(e, 2), "item");
    assert_string_equal(json_string_value(json_object_get(added, "status")), "in_progress");
    assert_string_equal(json_string_value(json_object_get(added, "arguments")), "");
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 4), "arguments")),
                        "{\"q\":1}");
    json_decref(e);

    static const char *const failing[] = {"{\"error\":\"boom\"}", NULL};
    e = stream(failing);
    names_are(e, "response.created response.in_progress response.failed");
    jsontest_eq(json_object_get(json_object_get(json_array_get(e, 2), "response"), "error"),
                "{\"code\":\"server_error\",\"message\":\"boom\"}");
    json_decref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_string), cmocka_unit_test(test_request_items),
        cmocka_unit_test(test_request_tools),  cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_response),       cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

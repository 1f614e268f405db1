// Integration tests of issue 18 through a real `ollama serve` and its
// runners: the Anthropic Messages API (/v1/messages, count_tokens) and the
// OpenAI Responses API (/v1/responses), streamed and not, with tools,
// thinking, forced tool calls, images refused by a text-only model, errors in
// each API's shape; /api/version, /api/status and the cloud-only routes;
// GET /metrics and the [GIN] access log.
//
// Models: the real TinyStories model (tests/fixtures/stories260K.gguf; greedy
// text ", there was a little girl named Lily.") under three templates:
// "stories" (the default template), "toolbox" (a template using .Tools, so a
// JSON object naming a tool is a tool call) and "thinker" (<think> tags: the
// output is thinking until </think>, which this model never writes).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "integration/models.h"
#include "json/json.h"
#include "testutil.h"

static struct harness srv;
static char stories_path[512];

#define GREEDY ", there was a little girl named Lily"

static const char toolbox_template[] =
    "{{ if .Tools }}Tools: {{ range .Tools }}{{ .Function.Name }} {{ end }}{{ end }}"
    "{{ range .Messages }}{{ if eq .Role \\\"tool\\\" }}Result: {{ .Content }}"
    "{{ else }}{{ .Content }}{{ end }}{{ end }}";
static const char thinker_template[] =
    "{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}"
    "{{ .Content }}{{ end }}{{ if .Think }}<think>{{ end }}";

static void request(const char *method, const char *path, const char *body, struct http_resp *r)
{
    // What the SDKs send: ignored by a local server.
    static const char *const headers[] = {
        "x-api-key: sk-ant-anything", "anthropic-version: 2023-06-01",
        "Authorization: Bearer sk-anything", "Content-Type: application/json", NULL};
    assert_int_equal(harness_request(&srv, method, path, headers, body, r), 0);
}

static json_t *parse(const char *s)
{
    json_t *v = NULL;
    if (jsonx_parse(s, strlen(s), &v, NULL) < 0)
        fail_msg("not JSON: %s", s);
    return v;
}

static json_t *call(const char *method, const char *path, const char *body, long status)
{
    struct http_resp r;
    request(method, path, body, &r);
    if (r.status != status)
        fprintf(stderr, "%s %s %s -> %ld %s\n", method, path, body ? body : "", r.status, r.body);
    assert_int_equal(r.status, status);
    json_t *v = parse(r.body);
    http_resp_free(&r);
    return v;
}

static const char *str_at(const json_t *o, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(o, k1);
    if (k2)
        v = json_object_get(v, k2);
    return json_string_value(v);
}

// Streams a request; returns [{"event": name, "data": {...}}...], checking
// the framing (event line, data line, blank line) and Content-Type.
static json_t *sse(const char *path, const char *body)
{
    struct http_resp r;
    request("POST", path, body, &r);
    if (r.status != 200)
        fprintf(stderr, "POST %s %s -> %ld %s\n", path, body, r.status, r.body);
    assert_int_equal(r.status, 200);
    assert_true(http_has_header(&r, "Content-Type: text/event-stream"));
    json_t *arr = json_array();
    const char *p = r.body;
    while (*p) {
        if (strncmp(p, "event: ", 7) != 0)
            fail_msg("not an SSE event line: %.60s", p);
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        json_t *name = json_stringn(p + 7, (size_t)(nl - p - 7));
        p = nl + 1;
        assert_true(strncmp(p, "data: ", 6) == 0);
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        json_t *v = NULL;
        assert_int_equal(jsonx_parse(p + 6, (size_t)(end - p - 6), &v, NULL), 0);
        assert_string_equal(str_at(v, "type", NULL), json_string_value(name));
        json_array_append_new(arr, json_pack("{s:o,s:o}", "event", name, "data", v));
        p = end + 2;
    }
    http_resp_free(&r);
    return arr;
}

static const char *ev_name(const json_t *evs, size_t i)
{
    return str_at(json_array_get(evs, i), "event", NULL);
}

static json_t *ev_data(const json_t *evs, size_t i)
{
    return json_object_get(json_array_get(evs, i), "data");
}

static int setup(void **state)
{
    (void)state;
    test_fixture(stories_path, sizeof(stories_path), "stories260K.gguf");
    static const char *const env[] = {"OLLAMA_NUM_PARALLEL=2", NULL};
    if (harness_setup(&srv, env) != 0)
        return -1;
    if (models_create(&srv, "stories", stories_path, "") < 0 ||
        models_create(&srv, "counter", stories_path, "") < 0 ||
        models_create_template(&srv, "toolbox", stories_path, toolbox_template) < 0 ||
        models_create_template(&srv, "thinker", stories_path, thinker_template) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

// ---------------------------------------------------------------------------
// Version, status, cloud-only routes

static void test_version_status_cloud(void **state)
{
    (void)state;
    json_t *v = call("GET", "/api/version", NULL, 200);
    assert_string_equal(str_at(v, "version", NULL), OLLAMA_VERSION);
    json_decref(v);
    v = call("GET", "/api/status", NULL, 200);
    assert_true(json_is_true(json_object_get(json_object_get(v, "cloud"), "disabled")));
    assert_non_null(str_at(json_object_get(v, "cloud"), "source", NULL));
    json_decref(v);
    static const char *const routes[][2] = {{"POST", "/api/me"},
                                            {"POST", "/api/signout"},
                                            {"DELETE", "/api/user/keys/abc"},
                                            {"POST", "/api/experimental/web_search"}};
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        v = call(routes[i][0], routes[i][1], "{}", 403);
        assert_string_equal(str_at(v, "error", NULL),
                            "ollama cloud is disabled: this build has no ollama.com account "
                            "support");
        json_decref(v);
    }
    // The recommendations Ollama serves without ollama.com: its built-in list.
    v = call("GET", "/api/experimental/model-recommendations", NULL, 200);
    json_t *recs = json_object_get(v, "recommendations");
    assert_int_equal(json_array_size(recs), 6);
    assert_string_equal(str_at(json_array_get(recs, 0), "model", NULL), "kimi-k2.6:cloud");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(recs, 0), "context_length")),
                     262144);
    json_t *local = json_array_get(recs, 5);
    assert_string_equal(str_at(local, "model", NULL), "qwen3.5");
    assert_int_equal(json_integer_value(json_object_get(local, "vram_bytes")), 14000000000);
    assert_null(json_object_get(local, "context_length"));
    json_decref(v);
}

// ---------------------------------------------------------------------------
// /v1/messages

#define USER_ONCE "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]"

static void expect_anthropic_error(const char *body, long status, const char *type, const char *msg)
{
    json_t *v = call("POST", "/v1/messages", body, status);
    assert_string_equal(str_at(v, "type", NULL), "error");
    assert_string_equal(str_at(v, "error", "type"), type);
    if (msg && strcmp(str_at(v, "error", "message"), msg) != 0)
        fail_msg("message \"%s\", want \"%s\"", str_at(v, "error", "message"), msg);
    json_decref(v);
}

static void test_messages(void **state)
{
    (void)state;
    json_t *v =
        call("POST", "/v1/messages",
             "{\"model\":\"stories\",\"max_tokens\":12,\"temperature\":0," USER_ONCE "}", 200);
    assert_true(cstr_starts_with(str_at(v, "id", NULL), "msg_"));
    assert_string_equal(str_at(v, "type", NULL), "message");
    assert_string_equal(str_at(v, "role", NULL), "assistant");
    assert_string_equal(str_at(v, "model", NULL), "stories");
    json_t *block = json_array_get(json_object_get(v, "content"), 0);
    assert_string_equal(str_at(block, "type", NULL), "text");
    const char *text = str_at(block, "text", NULL);
    assert_true(cstr_starts_with(text, GREEDY));
    assert_string_equal(str_at(v, "stop_reason", NULL), "max_tokens");
    assert_true(json_is_null(json_object_get(v, "stop_sequence")));
    json_t *usage = json_object_get(v, "usage");
    assert_true(json_integer_value(json_object_get(usage, "input_tokens")) > 0);
    assert_int_equal(json_integer_value(json_object_get(usage, "output_tokens")), 12);

    // Streamed: Anthropic's event sequence, and the same text.
    json_t *ev = sse("/v1/messages", "{\"model\":\"stories\",\"max_tokens\":12,\"temperature\":0,"
                                     "\"stream\":true," USER_ONCE "}");
    size_t n = json_array_size(ev);
    assert_string_equal(ev_name(ev, 0), "message_start");
    assert_string_equal(ev_name(ev, 1), "content_block_start");
    assert_string_equal(ev_name(ev, 2), "ping");
    assert_string_equal(ev_name(ev, n - 3), "content_block_stop");
    assert_string_equal(ev_name(ev, n - 2), "message_delta");
    assert_string_equal(ev_name(ev, n - 1), "message_stop");
    char streamed[512] = "";
    for (size_t i = 3; i + 3 < n; i++) {
        assert_string_equal(ev_name(ev, i), "content_block_delta");
        const json_t *d = json_object_get(ev_data(ev, i), "delta");
        assert_string_equal(str_at(d, "type", NULL), "text_delta");
        strncat(streamed, str_at(d, "text", NULL), sizeof(streamed) - strlen(streamed) - 1);
    }
    assert_string_equal(streamed, text);
    assert_string_equal(str_at(ev_data(ev, n - 2), "delta", "stop_reason"), "max_tokens");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(ev_data(ev, n - 2), "usage"), "output_tokens")),
                     12);
    json_decref(ev);
    json_decref(v);

    // stop_sequences end the turn early.
    v = call("POST", "/v1/messages",
             "{\"model\":\"stories\",\"max_tokens\":30,\"temperature\":0,"
             "\"stop_sequences\":[\"Lily\"]," USER_ONCE "}",
             200);
    text = str_at(json_array_get(json_object_get(v, "content"), 0), "text", NULL);
    assert_null(strstr(text, "Lily"));
    json_decref(v);
}

static void test_messages_errors(void **state)
{
    (void)state;
    expect_anthropic_error("{\"model\":\"nope\",\"max_tokens\":5," USER_ONCE "}", 404,
                           "not_found_error", "model 'nope' not found");
    expect_anthropic_error("{\"model\":\"stories\"," USER_ONCE "}", 400, "invalid_request_error",
                           "max_tokens is required and must be positive");
    expect_anthropic_error("{\"model\":\"stories\",\"max_tokens\":5,\"messages\":[]}", 400,
                           "invalid_request_error", "messages is required");
    expect_anthropic_error("not json", 400, "invalid_request_error", NULL);
    // An image for a text-only model.
    expect_anthropic_error(
        "{\"model\":\"stories\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"
        "[{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
        "\"data\":\"aGVsbG8=\"}},{\"type\":\"text\",\"text\":\"what is this?\"}]}]}",
        400, "invalid_request_error", "\"stories\" does not support vision");
    // Tools for a model whose template has none.
    expect_anthropic_error("{\"model\":\"stories\",\"max_tokens\":5,\"tools\":[{\"name\":\"f\","
                           "\"input_schema\":{\"type\":\"object\"}}]," USER_ONCE "}",
                           400, "invalid_request_error",
                           "registry.ollama.ai/library/stories:latest does not support tools");
}

#define WEATHER_TOOL                                                                               \
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\",\"input_schema\":"           \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Tokyo\"]}},\"required\":"          \
    "[\"city\"]}}]"

static void test_messages_tools(void **state)
{
    (void)state;
    // tool_choice "tool" forces the call; the answer is a tool_use block.
    json_t *v = call("POST", "/v1/messages",
                     "{\"model\":\"toolbox\",\"max_tokens\":100,\"temperature\":0," WEATHER_TOOL
                     ",\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\"},"
                     "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]}",
                     200);
    json_t *content = json_object_get(v, "content");
    assert_int_equal(json_array_size(content), 1);
    json_t *tu = json_array_get(content, 0);
    assert_string_equal(str_at(tu, "type", NULL), "tool_use");
    assert_string_equal(str_at(tu, "name", NULL), "get_weather");
    assert_string_equal(str_at(tu, "input", "city"), "Tokyo");
    assert_non_null(str_at(tu, "id", NULL));
    assert_string_equal(str_at(v, "stop_reason", NULL), "tool_use");
    json_decref(v);

    // Streamed with "any": the call as tool_use start + input_json_delta.
    json_t *ev = sse(
        "/v1/messages",
        "{\"model\":\"toolbox\",\"max_tokens\":100,\"temperature\":0,\"stream\":true," WEATHER_TOOL
        ",\"tool_choice\":{\"type\":\"any\"},"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]}");
    size_t n = json_array_size(ev);
    bool started = false, delta = false;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = ev_data(ev, i);
        if (!strcmp(ev_name(ev, i), "content_block_start") &&
            !strcmp(str_at(d, "content_block", "type"), "tool_use"))
            started = true;
        if (!strcmp(ev_name(ev, i), "content_block_delta")) {
            assert_string_equal(str_at(d, "delta", "type"), "input_json_delta");
            assert_string_equal(str_at(d, "delta", "partial_json"), "{\"city\":\"Tokyo\"}");
            delta = true;
        }
    }
    assert_true(started && delta);
    assert_string_equal(str_at(ev_data(ev, n - 2), "delta", "stop_reason"), "tool_use");
    json_decref(ev);

    // The result goes back as tool_result; "none" keeps the model from calling.
    v = call("POST", "/v1/messages",
             "{\"model\":\"toolbox\",\"max_tokens\":3,\"temperature\":0," WEATHER_TOOL
             ",\"tool_choice\":{\"type\":\"none\"},\"messages\":["
             "{\"role\":\"user\",\"content\":\"Weather?\"},"
             "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\","
             "\"name\":\"get_weather\",\"input\":{\"city\":\"Tokyo\"}}]},"
             "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
             "\"toolu_1\",\"content\":\"sunny\"}]}]}",
             200);
    assert_string_equal(str_at(v, "stop_reason", NULL), "max_tokens");
    assert_string_equal(str_at(json_array_get(json_object_get(v, "content"), 0), "type", NULL),
                        "text");
    json_decref(v);
}

static void test_messages_thinking(void **state)
{
    (void)state;
    json_t *v = call("POST", "/v1/messages",
                     "{\"model\":\"thinker\",\"max_tokens\":8,\"temperature\":0,\"thinking\":"
                     "{\"type\":\"enabled\",\"budget_tokens\":1000}," USER_ONCE "}",
                     200);
    json_t *b0 = json_array_get(json_object_get(v, "content"), 0);
    assert_string_equal(str_at(b0, "type", NULL), "thinking");
    assert_true(strlen(str_at(b0, "thinking", NULL)) > 0);
    json_decref(v);
    json_t *ev = sse("/v1/messages", "{\"model\":\"thinker\",\"max_tokens\":8,\"temperature\":0,"
                                     "\"stream\":true,\"thinking\":{\"type\":\"enabled\","
                                     "\"budget_tokens\":1000}," USER_ONCE "}");
    assert_string_equal(str_at(ev_data(ev, 1), "content_block", "type"), "thinking");
    assert_string_equal(str_at(ev_data(ev, 3), "delta", "type"), "thinking_delta");
    json_decref(ev);
    // A model that cannot think: thinking is relaxed, not an error (Claude Code asks always).
    v = call("POST", "/v1/messages",
             "{\"model\":\"stories\",\"max_tokens\":4,\"temperature\":0,\"thinking\":"
             "{\"type\":\"enabled\",\"budget_tokens\":1000}," USER_ONCE "}",
             200);
    assert_string_equal(str_at(json_array_get(json_object_get(v, "content"), 0), "type", NULL),
                        "text");
    json_decref(v);
}

static void test_count_tokens(void **state)
{
    (void)state;
    // The first request on a fresh runner evaluates the whole prompt (run
    // before any other test loads this model's runner).
    const char *msgs = "\"system\":\"A story.\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"Once upon a time there was a dog\"}]";
    char body[512];
    snprintf(body, sizeof(body), "{\"model\":\"counter\",\"max_tokens\":1,%s}", msgs);
    json_t *v = call("POST", "/v1/messages", body, 200);
    json_int_t evaluated =
        json_integer_value(json_object_get(json_object_get(v, "usage"), "input_tokens"));
    json_decref(v);
    snprintf(body, sizeof(body), "{\"model\":\"counter\",%s}", msgs);
    v = call("POST", "/v1/messages/count_tokens", body, 200);
    assert_int_equal(json_object_size(v), 1);
    assert_int_equal(json_integer_value(json_object_get(v, "input_tokens")), evaluated);
    json_decref(v);
    // Longer input, more tokens.
    v = call("POST", "/v1/messages/count_tokens",
             "{\"model\":\"counter\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
             "time there was a dog and a cat and a bird\"}]}",
             200);
    assert_true(json_integer_value(json_object_get(v, "input_tokens")) > evaluated - 3);
    json_decref(v);
    v = call("POST", "/v1/messages/count_tokens",
             "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 404);
    assert_string_equal(str_at(v, "error", "type"), "not_found_error");
    json_decref(v);
    // Counting is internal to the route: a body field cannot turn a native chat into it.
    v = call("POST", "/api/chat",
             "{\"model\":\"counter\",\"stream\":false,\"_count_tokens\":true,"
             "\"options\":{\"num_predict\":2},\"messages\":[{\"role\":\"user\","
             "\"content\":\"Once\"}]}",
             200);
    assert_non_null(json_object_get(v, "message"));
    assert_true(json_is_true(json_object_get(v, "done")));
    json_decref(v);
}

// ---------------------------------------------------------------------------
// /v1/responses

static void test_responses(void **state)
{
    (void)state;
    json_t *v = call("POST", "/v1/responses",
                     "{\"model\":\"stories\",\"input\":\"Once upon a time\",\"temperature\":0,"
                     "\"max_output_tokens\":12,\"store\":true,\"previous_response_id\":\"resp_1\"}",
                     200);
    assert_true(cstr_starts_with(str_at(v, "id", NULL), "resp_"));
    assert_string_equal(str_at(v, "object", NULL), "response");
    assert_string_equal(str_at(v, "status", NULL), "completed");
    assert_true(json_is_false(json_object_get(v, "store")));
    assert_true(json_is_null(json_object_get(v, "previous_response_id")));
    json_t *item = json_array_get(json_object_get(v, "output"), 0);
    assert_string_equal(str_at(item, "type", NULL), "message");
    const char *text = str_at(json_array_get(json_object_get(item, "content"), 0), "text", NULL);
    assert_true(cstr_starts_with(text, GREEDY));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(v, "usage"), "output_tokens")), 12);

    json_t *ev = sse("/v1/responses", "{\"model\":\"stories\",\"input\":[{\"role\":\"user\","
                                      "\"content\":[{\"type\":\"input_text\",\"text\":\"Once "
                                      "upon a time\"}]}],\"temperature\":0,"
                                      "\"max_output_tokens\":12,\"stream\":true}");
    size_t n = json_array_size(ev);
    static const char *const head[] = {"response.created", "response.in_progress",
                                       "response.output_item.added", "response.content_part.added"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(ev_name(ev, i), head[i]);
    static const char *const tail[] = {"response.output_text.done", "response.content_part.done",
                                       "response.output_item.done", "response.completed"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(ev_name(ev, n - 4 + i), tail[i]);
    char streamed[512] = "";
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(json_integer_value(json_object_get(ev_data(ev, i), "sequence_number")),
                         (json_int_t)i);
        if (!strcmp(ev_name(ev, i), "response.output_text.delta"))
            strncat(streamed, str_at(ev_data(ev, i), "delta", NULL),
                    sizeof(streamed) - strlen(streamed) - 1);
    }
    assert_string_equal(streamed, text);
    assert_string_equal(str_at(ev_data(ev, n - 4), "text", NULL), text);
    json_decref(ev);
    json_decref(v);

    // Errors in OpenAI's shape.
    v = call("POST", "/v1/responses", "{\"model\":\"nope\",\"input\":\"x\"}", 404);
    assert_string_equal(str_at(v, "error", "message"), "model 'nope' not found");
    json_decref(v);
    v = call("POST", "/v1/responses",
             "{\"model\":\"stories\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
             "\"input_image\",\"image_url\":\"data:image/png;base64,aGVsbG8=\"}]}]}",
             400);
    assert_string_equal(str_at(v, "error", "message"), "\"stories\" does not support vision");
    assert_string_equal(str_at(v, "error", "type"), "invalid_request_error");
    json_decref(v);
}

#define RESP_TOOL                                                                                  \
    "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"description\":\"Weather\","      \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Tokyo\"]}},"        \
    "\"required\":[\"city\"]}}]"

static void test_responses_tools_thinking(void **state)
{
    (void)state;
    json_t *v = call("POST", "/v1/responses",
                     "{\"model\":\"toolbox\",\"input\":\"Weather?\",\"temperature\":0,"
                     "\"max_output_tokens\":100,\"tool_choice\":\"required\"," RESP_TOOL "}",
                     200);
    json_t *item = json_array_get(json_object_get(v, "output"), 0);
    assert_string_equal(str_at(item, "type", NULL), "function_call");
    assert_string_equal(str_at(item, "name", NULL), "get_weather");
    assert_string_equal(str_at(item, "arguments", NULL), "{\"city\":\"Tokyo\"}");
    char call_id[128];
    snprintf(call_id, sizeof(call_id), "%s", str_at(item, "call_id", NULL));
    json_decref(v);

    json_t *ev = sse("/v1/responses", "{\"model\":\"toolbox\",\"input\":\"Weather?\",\"stream\":"
                                      "true,\"temperature\":0,\"max_output_tokens\":100,"
                                      "\"tool_choice\":{\"type\":\"function\",\"name\":"
                                      "\"get_weather\"}," RESP_TOOL "}");
    size_t n = json_array_size(ev);
    assert_string_equal(ev_name(ev, 3), "response.function_call_arguments.delta");
    assert_string_equal(ev_name(ev, 4), "response.function_call_arguments.done");
    assert_string_equal(str_at(ev_data(ev, 4), "arguments", NULL), "{\"city\":\"Tokyo\"}");
    assert_string_equal(ev_name(ev, n - 1), "response.completed");
    json_decref(ev);

    // The call and its output go back as items.
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"toolbox\",\"temperature\":0,\"max_output_tokens\":3," RESP_TOOL
             ",\"input\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"type\":"
             "\"function_call\",\"call_id\":\"%s\",\"name\":\"get_weather\",\"arguments\":"
             "\"{\\\"city\\\":\\\"Tokyo\\\"}\"},{\"type\":\"function_call_output\",\"call_id\":"
             "\"%s\",\"output\":\"sunny\"}]}",
             call_id, call_id);
    v = call("POST", "/v1/responses", body, 200);
    assert_string_equal(str_at(json_array_get(json_object_get(v, "output"), 0), "type", NULL),
                        "message");
    json_decref(v);

    // reasoning.effort turns thinking on: a reasoning item first.
    v = call("POST", "/v1/responses",
             "{\"model\":\"thinker\",\"input\":\"Once upon a time\",\"temperature\":0,"
             "\"max_output_tokens\":6,\"reasoning\":{\"effort\":\"high\"}}",
             200);
    item = json_array_get(json_object_get(v, "output"), 0);
    assert_string_equal(str_at(item, "type", NULL), "reasoning");
    assert_true(strlen(str_at(json_array_get(json_object_get(item, "summary"), 0), "text", NULL)) >
                0);
    json_decref(v);
    // text.format json_schema: structured output.
    v = call("POST", "/v1/responses",
             "{\"model\":\"stories\",\"input\":\"Once\",\"temperature\":0,\"max_output_tokens\":"
             "60,\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"a\",\"schema\":"
             "{\"type\":\"object\",\"properties\":{\"answer\":{\"enum\":[\"yes\",\"no\"]}},"
             "\"required\":[\"answer\"]}}}}",
             200);
    item = json_array_get(json_object_get(v, "output"), 0);
    json_t *ans = parse(str_at(json_array_get(json_object_get(item, "content"), 0), "text", NULL));
    const char *a = str_at(ans, "answer", NULL);
    assert_true(a && (!strcmp(a, "yes") || !strcmp(a, "no")));
    json_decref(ans);
    json_decref(v);
}

// ---------------------------------------------------------------------------
// ollama launch: fake agents on PATH print the arguments and environment
// they were started with.

// Runs `ollama launch ARGS` (PATH: the fake agents first; HOME: the test's
// own folder, where the config writers put their files); returns its exit
// status and its output (stdout and stderr) in out.
static int launch(const char *args, char *out, size_t n)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "HOME=%s PATH=%s/fake:/usr/bin:/bin OLLAMA_HOST=%s %s launch %s </dev/null 2>&1",
             srv.tmp_dir, srv.tmp_dir, srv.host, harness_bin(), args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(out, 1, n - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_launch(void **state)
{
    (void)state;
    char dir[400], path[500], out[8192], want[600];
    snprintf(dir, sizeof(dir), "%s/fake", srv.tmp_dir);
    mkdir(dir, 0755);
    static const char *const agents[] = {"claude", "codex"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, agents[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("#!/bin/sh\necho \"argv: $*\"\nenv | grep -E '^(ANTHROPIC|CLAUDE|OPENAI)' | "
              "sort\nexit 7\n",
              f);
        fclose(f);
        chmod(path, 0755);
    }
    // Claude Code: every tier is the model, the base URL is this server.
    assert_int_equal(launch("claude --model stories -- -p 'say hi'", out, sizeof(out)), 7);
    assert_non_null(strstr(out, "argv: --model stories -p say hi\n"));
    snprintf(want, sizeof(want), "ANTHROPIC_BASE_URL=%s\n", srv.base_url);
    assert_non_null(strstr(out, want));
    static const char *const env[] = {"ANTHROPIC_API_KEY=\n",
                                      "ANTHROPIC_AUTH_TOKEN=ollama\n",
                                      "ANTHROPIC_DEFAULT_OPUS_MODEL=stories\n",
                                      "ANTHROPIC_DEFAULT_SONNET_MODEL=stories\n",
                                      "ANTHROPIC_DEFAULT_HAIKU_MODEL=stories\n",
                                      "CLAUDE_CODE_SUBAGENT_MODEL=stories\n"};
    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++)
        if (!strstr(out, env[i]))
            fail_msg("no %s in:\n%s", env[i], out);
    // Codex: a provider of its own on /v1 with the Responses wire API.
    assert_int_equal(launch("codex --model stories -- exec hi", out, sizeof(out)), 7);
    snprintf(want, sizeof(want),
             "argv: -c model_provider=\"ollama-launch\" -c model_providers.ollama-launch.name="
             "\"Ollama\" -c model_providers.ollama-launch.base_url=\"%s/v1\" -c "
             "model_providers.ollama-launch.wire_api=\"responses\" -c model_context_window=2048 "
             "-m stories exec hi\n",
             srv.base_url);
    if (!strstr(out, want))
        fail_msg("want %s in:\n%s", want, out);
    assert_non_null(strstr(out, "OPENAI_API_KEY=ollama\n"));
    // Not installed: 0.33 offers to install the tools it can (without a
    // terminal: re-run with --yes; the command to run by hand), the others
    // get the install hint. Unknown model, unknown integration.
    assert_int_equal(launch("opencode --model stories", out, sizeof(out)), 1);
    assert_non_null(strstr(out, "Error: OpenCode is not installed. Install now? requires "
                                "confirmation; re-run with --yes to continue\nTo install it "
                                "yourself, run:\n  set -o pipefail; curl -fsSL "
                                "https://opencode.ai/install | bash\n"));
    assert_int_equal(launch("droid --model stories", out, sizeof(out)), 1);
    assert_non_null(strstr(out, "Error: droid is not installed, install from "
                                "https://docs.factory.ai/cli/getting-started/quickstart"));
    assert_int_equal(launch("claude --model nope", out, sizeof(out)), 1);
    assert_non_null(strstr(out, "Error: model \"nope\" not found; run 'ollama pull nope' "
                                "first, or use --yes to auto-pull"));
    assert_int_equal(launch("vim", out, sizeof(out)), 1);
    assert_non_null(strstr(out, "Error: unknown integration: vim"));
    // No terminal, no integration: the list.
    assert_int_equal(launch("", out, sizeof(out)), 0);
    assert_non_null(strstr(out, "  claude          Claude Code"));
    assert_non_null(strstr(out, "  opencode        OpenCode"));
    // --config prints the setup instead of running it.
    assert_int_equal(launch("opencode --model stories --config", out, sizeof(out)), 0);
    assert_non_null(strstr(out, "export OPENCODE_CONFIG_CONTENT='{"));
    assert_non_null(strstr(out, "\"model\":\"ollama/stories\""));
}

// ---------------------------------------------------------------------------
// /metrics and the access log (run last: counts what the tests above did)

static void test_metrics_and_log(void **state)
{
    (void)state;
    struct http_resp r;
    request("GET", "/metrics", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(http_has_header(&r, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    static const char *const want[] = {
        "# TYPE ollama_http_requests_total counter\n",
        "ollama_http_requests_total{route=\"/v1/messages\",method=\"POST\",status=\"200\"} ",
        "ollama_http_requests_total{route=\"/v1/messages\",method=\"POST\",status=\"404\"} 1\n",
        "ollama_http_requests_total{route=\"/v1/responses\",method=\"POST\",status=\"200\"} ",
        "ollama_http_requests_total{route=\"/api/me\",method=\"POST\",status=\"403\"} 1\n",
        "ollama_requests_in_flight 0\n",
        "ollama_requests_queued 0\n",
        "ollama_loaded_model_bytes{model=\"",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(r.body, want[i]))
            fail_msg("/metrics lacks %s:\n%s", want[i], r.body);
    const char *gen = strstr(r.body, "\nollama_generated_tokens_total ");
    assert_non_null(gen);
    assert_true(atoll(gen + strlen("\nollama_generated_tokens_total ")) > 50);
    const char *loaded = strstr(r.body, "\nollama_loaded_models ");
    assert_non_null(loaded);
    assert_true(atoi(loaded + strlen("\nollama_loaded_models ")) >= 1);
    http_resp_free(&r);

    // One [GIN] line per request (the /metrics line above included, written
    // when its connection completes).
    harness_sleep_ms(300);
    FILE *f = fopen(srv.log_path, "r");
    assert_non_null(f);
    char line[1024];
    int messages = 0, metrics = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!cstr_starts_with(line, "[GIN] "))
            continue;
        if (strstr(line, " | 200 | ") && strstr(line, "| POST    \"/v1/messages\"\n"))
            messages++;
        if (strstr(line, " | 200 | ") && strstr(line, "127.0.0.1 | GET     \"/metrics\""))
            metrics++;
    }
    fclose(f);
    assert_true(messages >= 5);
    assert_int_equal(metrics, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_status_cloud),
        cmocka_unit_test(test_count_tokens),  // first: its runner has nothing cached yet
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_messages_errors),
        cmocka_unit_test(test_messages_tools),
        cmocka_unit_test(test_messages_thinking),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_responses_tools_thinking),
        cmocka_unit_test(test_launch),
        cmocka_unit_test(test_metrics_and_log),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

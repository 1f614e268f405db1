// Integration tests of the OpenAI-compatible API (spec/openai.md, issue 11)
// through a real `ollama serve` and its runner processes: every /v1 route
// and field, streamed (SSE) and not, errors in OpenAI's shape with their
// statuses, tools, thinking, structured outputs, images, embeddings in float
// and base64, and a stream cut by a dying runner.
//
// Models: the real TinyStories model (tests/fixtures/stories260K.gguf; greedy
// text ", there was a little girl named Lily.") under three templates:
// "stories" (the default template), "toolbox" (a template using .Tools with
// no tool tag, so a JSON object naming a tool is a tool call), "thinker" (a
// template with <think> tags, so output is reasoning until </think>) and
// "filler" (a .Suffix template: insert capability).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>

#include "integration/models.h"
#include "json/json.h"
#include "testutil.h"

static struct harness srv;
static char stories_path[512];
static bool models_were_null;  // GET /v1/models on the empty store gave "data": null

#define GREEDY ", there was a little girl named Lily"

static const char toolbox_template[] =
    "{{ if .Tools }}Tools: {{ range .Tools }}{{ .Function.Name }} {{ end }}{{ end }}"
    "{{ range .Messages }}{{ if eq .Role \\\"tool\\\" }}Result: {{ .Content }}"
    "{{ else }}{{ .Content }}{{ end }}{{ end }}";
static const char thinker_template[] =
    "{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}"
    "{{ .Content }}{{ end }}{{ if .Think }}<think>{{ end }}";
static const char filler_template[] =
    "{{ if .Suffix }}{{ .Prompt }} and {{ .Suffix }}{{ else }}{{ .Prompt }}{{ end }}";

static void get(const char *path, struct http_resp *r)
{
    assert_int_equal(harness_request(&srv, "GET", path, NULL, NULL, r), 0);
}

static void post(const char *path, const char *body, struct http_resp *r)
{
    static const char *const headers[] = {"Authorization: Bearer sk-anything",
                                          "Content-Type: application/json", NULL};
    assert_int_equal(harness_request(&srv, "POST", path, headers, body, r), 0);
}

static json_t *parse(const char *s)
{
    json_t *v = NULL;
    if (jsonx_parse(s, strlen(s), &v, NULL) < 0)
        fail_msg("not JSON: %s", s);
    return v;
}

// POSTs and checks the status; returns the parsed body.
static json_t *call(const char *path, const char *body, long status)
{
    struct http_resp r;
    post(path, body, &r);
    if (r.status != status)
        fprintf(stderr, "POST %s %s -> %ld %s\n", path, body, r.status, r.body);
    assert_int_equal(r.status, status);
    assert_true(http_has_header(&r, "Content-Type: application/json"));
    json_t *v = parse(r.body);
    http_resp_free(&r);
    return v;
}

// An OpenAI error with this status, type and message (NULL: any message).
static void expect_error(const char *path, const char *body, long status, const char *msg)
{
    json_t *v = call(path, body, status);
    json_t *e = json_object_get(v, "error");
    const char *type = status == 400   ? "invalid_request_error"
                       : status == 404 ? "not_found_error"
                                       : "api_error";
    assert_true(json_is_object(e));
    assert_string_equal(json_string_value(json_object_get(e, "type")), type);
    assert_true(json_is_null(json_object_get(e, "param")));
    assert_true(json_is_null(json_object_get(e, "code")));
    const char *m = json_string_value(json_object_get(e, "message"));
    assert_non_null(m);
    if (msg && strcmp(m, msg) != 0)
        fail_msg("%s: message \"%s\", want \"%s\"", body, m, msg);
    json_decref(v);
}

// Streams a request and returns its events (parsed; "[DONE]" as a string);
// checks the SSE framing and that [DONE] comes last, exactly once.
static json_t *sse(const char *path, const char *body)
{
    struct http_resp r;
    post(path, body, &r);
    if (r.status != 200)
        fprintf(stderr, "POST %s %s -> %ld %s\n", path, body, r.status, r.body);
    assert_int_equal(r.status, 200);
    assert_true(http_has_header(&r, "Content-Type: text/event-stream"));
    json_t *arr = json_array();
    const char *p = r.body;
    while (*p) {
        if (strncmp(p, "data: ", 6) != 0)
            fail_msg("not an SSE data line: %.60s", p);
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
    http_resp_free(&r);
    size_t n = json_array_size(arr);
    assert_true(n >= 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(json_is_string(json_array_get(arr, i)), i == n - 1);
    return arr;
}

static json_t *choice0(const json_t *o)
{
    return json_array_get(json_object_get(o, "choices"), 0);
}

static const char *str_at(const json_t *o, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(o, k1);
    if (k2)
        v = json_object_get(v, k2);
    return json_string_value(v);
}

static int setup(void **state)
{
    (void)state;
    test_fixture(stories_path, sizeof(stories_path), "stories260K.gguf");
    static const char *const env[] = {"OLLAMA_NUM_PARALLEL=2", NULL};
    if (harness_setup(&srv, env) != 0)
        return -1;
    struct http_resp r;
    if (harness_request(&srv, "GET", "/v1/models", NULL, NULL, &r) == 0 && r.status == 200)
        models_were_null = strstr(r.body, "\"data\":null") != NULL;
    http_resp_free(&r);
    if (models_create(&srv, "stories", stories_path, "") < 0 ||
        models_create_template(&srv, "toolbox", stories_path, toolbox_template) < 0 ||
        models_create_template(&srv, "thinker", stories_path, thinker_template) < 0 ||
        models_create_template(&srv, "filler", stories_path, filler_template) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

// ---------------------------------------------------------------------------
// Models

static void test_models_list(void **state)
{
    (void)state;
    assert_true(models_were_null);
    struct http_resp r;
    post("/api/copy", "{\"source\":\"stories\",\"destination\":\"alice/story:v1\"}", &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    get("/v1/models", &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    http_resp_free(&r);
    assert_string_equal(str_at(v, "object", NULL), "list");
    json_t *data = json_object_get(v, "data");
    bool saw_stories = false, saw_alice = false;
    int64_t now = time_now_ns() / 1000000000;
    size_t i;
    json_t *m;
    json_array_foreach(data, i, m)
    {
        const char *id = str_at(m, "id", NULL);
        assert_string_equal(str_at(m, "object", NULL), "model");
        int64_t created = json_integer_value(json_object_get(m, "created"));
        assert_true(created > now - 600 && created <= now + 5);
        if (strcmp(id, "stories:latest") == 0) {
            saw_stories = true;
            assert_string_equal(str_at(m, "owned_by", NULL), "library");
        }
        if (strcmp(id, "alice/story:v1") == 0) {
            saw_alice = true;
            assert_string_equal(str_at(m, "owned_by", NULL), "alice");
        }
    }
    assert_true(saw_stories && saw_alice);
    assert_int_equal(json_array_size(data), 5);
    json_decref(v);

    // Retrieve: id as given in the path.
    get("/v1/models/stories", &r);
    assert_int_equal(r.status, 200);
    v = parse(r.body);
    assert_string_equal(str_at(v, "id", NULL), "stories");
    assert_string_equal(str_at(v, "object", NULL), "model");
    assert_string_equal(str_at(v, "owned_by", NULL), "library");
    assert_true(json_integer_value(json_object_get(v, "created")) > now - 600);
    json_decref(v);
    http_resp_free(&r);
    get("/v1/models/stories:latest", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"id\":\"stories:latest\""));
    http_resp_free(&r);
    get("/v1/models/gpt-4", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "{\"error\":{\"message\":\"model 'gpt-4:latest' not found\","
                                "\"type\":\"not_found_error\",\"param\":null,\"code\":null}}");
    http_resp_free(&r);
    // Names with a '/' are not a single path segment: not routed.
    get("/v1/models/alice/story:v1", &r);
    assert_int_equal(r.status, 404);
    http_resp_free(&r);
}

// ---------------------------------------------------------------------------
// Chat completions

static void test_chat(void **state)
{
    (void)state;
    int64_t now = time_now_ns() / 1000000000;
    json_t *v = call("/v1/chat/completions",
                     "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":"
                     "\"Once upon a time\"}],\"max_tokens\":8,\"temperature\":0}",
                     200);
    assert_true(cstr_starts_with(str_at(v, "id", NULL), "chatcmpl-"));
    assert_string_equal(str_at(v, "object", NULL), "chat.completion");
    assert_string_equal(str_at(v, "model", NULL), "stories");
    assert_string_equal(str_at(v, "system_fingerprint", NULL), "fp_ollama");
    int64_t created = json_integer_value(json_object_get(v, "created"));
    assert_true(created >= now - 5 && created <= now + 60);
    json_t *c = choice0(v);
    assert_int_equal(json_integer_value(json_object_get(c, "index")), 0);
    assert_string_equal(str_at(c, "message", "role"), "assistant");
    assert_true(cstr_starts_with(GREEDY, str_at(c, "message", "content")));
    assert_true(strlen(str_at(c, "message", "content")) > 10);
    assert_null(json_object_get(json_object_get(c, "message"), "reasoning"));
    assert_null(json_object_get(json_object_get(c, "message"), "tool_calls"));
    assert_string_equal(str_at(c, "finish_reason", NULL), "length");
    json_t *u = json_object_get(v, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 8);
    assert_true(json_integer_value(json_object_get(u, "prompt_tokens")) > 0);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")),
                     json_integer_value(json_object_get(u, "prompt_tokens")) + 8);
    json_decref(v);

    // max_completion_tokens; unknown and ignored fields are accepted; a
    // system message and an assistant turn with "reasoning".
    v = call("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"system\",\"content\":\"\"},"
             "{\"role\":\"user\",\"content\":\"Once\"},{\"role\":\"assistant\",\"content\":"
             "\" upon\",\"reasoning\":\"r\"},{\"role\":\"user\",\"content\":\" a time\"}],"
             "\"max_completion_tokens\":3,\"temperature\":0,\"n\":1,\"user\":\"me\","
             "\"logit_bias\":{},\"tool_choice\":\"none\",\"parallel_tool_calls\":true,"
             "\"logprobs\":false,\"top_logprobs\":0,\"future_field\":{\"x\":1}}",
             200);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(v, "usage"), "completion_tokens")), 3);
    json_decref(v);
}

// An OpenAI model name served by a local alias (`ollama cp`).
static void test_chat_alias(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/copy", "{\"source\":\"stories\",\"destination\":\"gpt-3.5-turbo\"}", &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    json_t *v = call("/v1/chat/completions",
                     "{\"model\":\"gpt-3.5-turbo\",\"messages\":[{\"role\":\"user\",\"content\":"
                     "\"Once upon a time\"}],\"max_tokens\":4,\"temperature\":0}",
                     200);
    assert_string_equal(str_at(v, "model", NULL), "gpt-3.5-turbo");
    assert_true(cstr_starts_with(GREEDY, str_at(choice0(v), "message", "content")));
    json_decref(v);
}

static const char *chat_text(const char *body, char *out, size_t n)
{
    json_t *v = call("/v1/chat/completions", body, 200);
    snprintf(out, n, "%s", str_at(choice0(v), "message", "content"));
    json_decref(v);
    return out;
}

static void test_chat_sampling(void **state)
{
    (void)state;
    char a[512], b[512], c[512];
    // stop: a string, or an array (non-strings skipped); finish_reason stop.
    json_t *v =
        call("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"Once upon a time\"}],\"max_tokens\":30,\"temperature\":0,\"stop\":\"Lily\"}",
             200);
    assert_string_equal(str_at(choice0(v), "message", "content"),
                        ", there was a little girl named ");
    assert_string_equal(str_at(choice0(v), "finish_reason", NULL), "stop");
    json_decref(v);
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
              "time\"}],\"max_tokens\":30,\"temperature\":0,\"stop\":[7,\"girl\",null]}",
              a, sizeof(a));
    assert_string_equal(a, ", there was a little ");

    // seed: same seed at a high temperature, same text.
    const char *seeded = "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":"
                         "\"Once\"}],\"max_tokens\":12,\"temperature\":1.5,\"seed\":42}";
    assert_string_equal(chat_text(seeded, a, sizeof(a)), chat_text(seeded, b, sizeof(b)));
    // temperature absent means 1.0 (not the greedy default): different seeds differ.
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
              "\"max_tokens\":12,\"seed\":1}",
              a, sizeof(a));
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
              "\"max_tokens\":12,\"seed\":2}",
              b, sizeof(b));
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
              "\"max_tokens\":12,\"seed\":3}",
              c, sizeof(c));
    assert_false(strcmp(a, b) == 0 && strcmp(b, c) == 0);
    // top_p: a tiny nucleus is greedy even at a high temperature.
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
              "time\"}],\"max_tokens\":8,\"temperature\":1.5,\"top_p\":0.000001,\"seed\":5}",
              a, sizeof(a));
    assert_true(cstr_starts_with(GREEDY, a) && strlen(a) > 10);
    // Penalties change the greedy text.
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
              "time\"}],\"max_tokens\":40,\"temperature\":0}",
              a, sizeof(a));
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
              "time\"}],\"max_tokens\":40,\"temperature\":0,\"frequency_penalty\":2}",
              b, sizeof(b));
    chat_text("{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
              "time\"}],\"max_tokens\":40,\"temperature\":0,\"presence_penalty\":2}",
              c, sizeof(c));
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, c);
}

static void test_chat_stream(void **state)
{
    (void)state;
    json_t *ev = sse("/v1/chat/completions",
                     "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once "
                     "upon a time\"}],\"max_tokens\":6,\"temperature\":0,\"stream\":true}");
    size_t n = json_array_size(ev);
    // content chunks..., finish chunk, [DONE]; no usage anywhere.
    struct buf text;
    buf_init(&text, 0);
    const char *id = str_at(json_array_get(ev, 0), "id", NULL);
    int64_t created = json_integer_value(json_object_get(json_array_get(ev, 0), "created"));
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *e = json_array_get(ev, i);
        assert_string_equal(str_at(e, "id", NULL), id);
        assert_string_equal(str_at(e, "object", NULL), "chat.completion.chunk");
        assert_string_equal(str_at(e, "model", NULL), "stories");
        assert_string_equal(str_at(e, "system_fingerprint", NULL), "fp_ollama");
        assert_int_equal(json_integer_value(json_object_get(e, "created")), created);
        assert_null(json_object_get(e, "usage"));
        json_t *d = json_object_get(choice0(e), "delta");
        assert_int_equal(json_object_get(d, "role") != NULL, i == 0);
        if (i + 2 < n) {
            assert_true(json_is_null(json_object_get(choice0(e), "finish_reason")));
            buf_append_str(&text, str_at(d, "content", NULL));
        } else {
            assert_int_equal(json_object_size(d), 0);
            assert_string_equal(str_at(choice0(e), "finish_reason", NULL), "length");
        }
    }
    assert_true(cstr_starts_with(GREEDY, buf_cstr(&text)) && text.len > 10);
    buf_deinit(&text);
    json_decref(ev);

    // include_usage: one more chunk with no choices and the usage.
    ev = sse("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
             "\"max_tokens\":3,\"temperature\":0,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}");
    n = json_array_size(ev);
    json_t *u = json_array_get(ev, n - 2);
    assert_int_equal(json_array_size(json_object_get(u, "choices")), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(u, "usage"), "completion_tokens")), 3);
    assert_string_equal(str_at(choice0(json_array_get(ev, n - 3)), "finish_reason", NULL),
                        "length");
    for (size_t i = 0; i + 2 < n; i++)
        assert_null(json_object_get(json_array_get(ev, i), "usage"));
    json_decref(ev);

    // Errors before the stream starts keep their status.
    expect_error("/v1/chat/completions",
                 "{\"model\":\"nope\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}]}",
                 404, "model 'nope' not found");
}

// The JSON schema forces `{"name":"get_weather","arguments":{"city":"Tokyo"}}`,
// which the toolbox template's parser reads as a tool call.
#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"    \
    "\"Weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"          \
    "\"string\"}},\"required\":[\"city\"]}}}]"
#define FORCE_CALL                                                                                 \
    "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"call\","            \
    "\"schema\":{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},"        \
    "\"arguments\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Tokyo\"]}},"         \
    "\"required\":[\"city\"]}},\"required\":[\"name\",\"arguments\"]}}}"

static void check_call(const json_t *calls)
{
    assert_int_equal(json_array_size(calls), 1);
    json_t *c = json_array_get(calls, 0);
    assert_true(cstr_starts_with(str_at(c, "id", NULL), "call_"));
    assert_int_equal(json_integer_value(json_object_get(c, "index")), 0);
    assert_string_equal(str_at(c, "type", NULL), "function");
    assert_string_equal(str_at(c, "function", "name"), "get_weather");
    assert_string_equal(str_at(c, "function", "arguments"), "{\"city\":\"Tokyo\"}");
}

static void test_chat_tools(void **state)
{
    (void)state;
    json_t *v =
        call("/v1/chat/completions",
             "{\"model\":\"toolbox\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"Weather?\"}],\"temperature\":0,\"max_tokens\":200,\"tool_choice\":\"auto\"," TOOLS
             "," FORCE_CALL "}",
             200);
    json_t *c = choice0(v);
    check_call(json_object_get(json_object_get(c, "message"), "tool_calls"));
    assert_string_equal(str_at(c, "message", "content"), "");
    assert_string_equal(str_at(c, "finish_reason", NULL), "tool_calls");
    json_decref(v);

    // Streamed: the call comes whole in one chunk with empty content.
    json_t *ev = sse("/v1/chat/completions",
                     "{\"model\":\"toolbox\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                     "\"content\":\"Weather?\"}],\"temperature\":0,\"max_tokens\":200," TOOLS
                     "," FORCE_CALL "}");
    size_t n = json_array_size(ev);
    int calls = 0;
    for (size_t i = 0; i + 2 < n; i++) {
        json_t *d = json_object_get(choice0(json_array_get(ev, i)), "delta");
        if (json_object_get(d, "tool_calls")) {
            calls++;
            check_call(json_object_get(d, "tool_calls"));
            assert_string_equal(str_at(d, "content", NULL), "");
        }
    }
    assert_int_equal(calls, 1);
    assert_string_equal(str_at(choice0(json_array_get(ev, n - 2)), "finish_reason", NULL),
                        "tool_calls");
    json_decref(ev);

    // A conversation with the call and its result (name found by id).
    v = call("/v1/chat/completions",
             "{\"model\":\"toolbox\",\"temperature\":0,\"max_tokens\":3," TOOLS
             ",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
             "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
             "\"{\\\"city\\\":\\\"Tokyo\\\"}\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"}]}",
             200);
    assert_string_equal(str_at(choice0(v), "finish_reason", NULL), "length");
    json_decref(v);

    // A model whose template has no tools.
    expect_error(
        "/v1/chat/completions",
        "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS "}",
        400, "registry.ollama.ai/library/stories:latest does not support tools");
}

static void test_chat_response_format(void **state)
{
    (void)state;
    json_t *v =
        call("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
             "\"temperature\":0,\"max_tokens\":100,\"response_format\":{\"type\":"
             "\"json_schema\",\"json_schema\":{\"name\":\"a\",\"strict\":true,\"schema\":"
             "{\"type\":\"object\",\"properties\":{\"answer\":{\"enum\":[\"yes\",\"no\"]}},"
             "\"required\":[\"answer\"]}}}}",
             200);
    json_t *content = parse(str_at(choice0(v), "message", "content"));
    const char *answer = str_at(content, "answer", NULL);
    assert_true(strcmp(answer, "yes") == 0 || strcmp(answer, "no") == 0);
    assert_int_equal(json_object_size(content), 1);
    assert_string_equal(str_at(choice0(v), "finish_reason", NULL), "stop");
    json_decref(content);
    json_decref(v);
    // json_object: JSON mode (the text opens an object).
    v = call("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
             "\"temperature\":0,\"max_tokens\":5,\"response_format\":{\"type\":\"json_object\"}}",
             200);
    assert_true(cstr_starts_with(str_at(choice0(v), "message", "content"), "{"));
    json_decref(v);
    // text: no format.
    v = call("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
             "time\"}],\"temperature\":0,\"max_tokens\":8,\"response_format\":{\"type\":\"text\"}}",
             200);
    assert_true(cstr_starts_with(GREEDY, str_at(choice0(v), "message", "content")));
    json_decref(v);
}

static void test_chat_reasoning(void **state)
{
    (void)state;
    // A thinking model thinks by default: the text is reasoning.
    json_t *v =
        call("/v1/chat/completions",
             "{\"model\":\"thinker\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
             "\"temperature\":0,\"max_tokens\":5}",
             200);
    json_t *m = json_object_get(choice0(v), "message");
    assert_string_equal(str_at(m, "content", NULL), "");
    assert_true(strlen(str_at(m, "reasoning", NULL)) > 0);
    json_decref(v);
    // reasoning_effort "none": no thinking, plain content.
    v = call("/v1/chat/completions",
             "{\"model\":\"thinker\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
             "\"temperature\":0,\"max_tokens\":5,\"reasoning_effort\":\"none\"}",
             200);
    m = json_object_get(choice0(v), "message");
    assert_true(strlen(str_at(m, "content", NULL)) > 0);
    assert_null(json_object_get(m, "reasoning"));
    json_decref(v);
    // reasoning.effort, streamed: reasoning deltas.
    json_t *ev =
        sse("/v1/chat/completions",
            "{\"model\":\"thinker\",\"messages\":[{\"role\":\"user\",\"content\":\"Once\"}],"
            "\"temperature\":0,\"max_tokens\":3,\"stream\":true,\"reasoning\":{\"effort\":"
            "\"minimal\"}}");
    json_t *d = json_object_get(choice0(json_array_get(ev, 0)), "delta");
    assert_string_equal(str_at(d, "role", NULL), "assistant");
    assert_true(strlen(str_at(d, "reasoning", NULL)) > 0);
    json_decref(ev);
    expect_error("/v1/chat/completions",
                 "{\"model\":\"thinker\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"reasoning_effort\":\"extreme\"}",
                 400,
                 "invalid reasoning value: \"extreme\" (must be \"minimal\", \"low\", \"medium\", "
                 "\"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")");
    // Thinking asked of a model that cannot; "none" is fine for any model.
    expect_error("/v1/chat/completions",
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"reasoning_effort\":\"xhigh\"}",
                 400, "\"stories\" does not support thinking");
    v = call("/v1/chat/completions",
             "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
             "\"max_tokens\":1,\"reasoning_effort\":\"none\"}",
             200);
    json_decref(v);
}

static void test_chat_images(void **state)
{
    (void)state;
    // A well-formed image reaches the native handler (which knows the model
    // has no vision), in both image_url shapes.
    expect_error("/v1/chat/completions",
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"text\",\"text\":\"what is this?\"},{\"type\":\"image_url\",\"image_url\":"
                 "{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]}]}",
                 400, "\"stories\" does not support vision");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"image_url\",\"image_url\":\"data:image/jpeg;base64,/9j/4AAQ\"}]}]}",
                 400, "\"stories\" does not support vision");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"image_url\",\"image_url\":{\"url\":\"https://example.com/cat.png\"}}]}]}",
                 400,
                 "image URLs are not currently supported, please use base64 encoded data instead");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"image_url\",\"image_url\":\"data:image/bmp;base64,Qk0=\"}]}]}",
                 400, "invalid image input");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"image_url\",\"image_url\":\"data:image/png;base64,not base64!\"}]}]}",
                 400, "invalid image input");
    // Text parts alone are plain messages.
    json_t *v = call("/v1/chat/completions",
                     "{\"model\":\"stories\",\"temperature\":0,\"max_tokens\":8,\"messages\":"
                     "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Once upon a "
                     "time\"}]}]}",
                     200);
    assert_true(cstr_starts_with(GREEDY, str_at(choice0(v), "message", "content")));
    json_decref(v);
}

static void test_chat_errors(void **state)
{
    (void)state;
    const char *p = "/v1/chat/completions";
    expect_error(p, "{\"model\":\"stories\",\"messages\":[]}", 400, "[] is too short - 'messages'");
    expect_error(p, "{\"model\":\"stories\"}", 400, "[] is too short - 'messages'");
    expect_error(p, "{\"model\":\"gpt-4\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 404, "model 'gpt-4' not found");
    expect_error(p, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400,
                 "model is required");
    expect_error(p, "{\"model\":\"stories\",", 400, NULL);
    expect_error(p, "", 400, NULL);
    expect_error(p, "[1]", 400, NULL);
    expect_error(p,
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"temperature\":\"hot\"}",
                 400, "json: cannot unmarshal string into field temperature of type float64");
    expect_error(p,
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"max_tokens\":1.5}",
                 400, NULL);
    expect_error(p, "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\"}]}", 400,
                 "invalid message content type: <nil>");
    expect_error(p,
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"video\"}]}]}",
                 400, "invalid message format");
    expect_error(p,
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{"
                 "\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{oops\"}}]}]}",
                 400, "invalid tool call arguments");
    expect_error(p,
                 "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"top_logprobs\":21}",
                 400, "top_logprobs must be between 0 and 20");
    // Routes that are not served.
    struct http_resp r;
    post("/v1/images/generations", "{}", &r);
    assert_int_equal(r.status, 404);
    http_resp_free(&r);
}

// ---------------------------------------------------------------------------
// Completions

static void test_completions(void **state)
{
    (void)state;
    json_t *v = call("/v1/completions",
                     "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":8,"
                     "\"temperature\":0,\"echo\":true,\"best_of\":1,\"n\":1,\"user\":\"u\","
                     "\"logit_bias\":{}}",
                     200);
    assert_true(cstr_starts_with(str_at(v, "id", NULL), "cmpl-"));
    assert_string_equal(str_at(v, "object", NULL), "text_completion");
    assert_string_equal(str_at(v, "model", NULL), "stories");
    assert_string_equal(str_at(v, "system_fingerprint", NULL), "fp_ollama");
    json_t *c = choice0(v);
    assert_true(cstr_starts_with(str_at(c, "text", NULL), ", there was a little"));
    assert_int_equal(json_integer_value(json_object_get(c, "index")), 0);
    assert_string_equal(str_at(c, "finish_reason", NULL), "length");
    json_t *u = json_object_get(v, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 8);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")),
                     json_integer_value(json_object_get(u, "prompt_tokens")) + 8);
    json_decref(v);

    // stop (string and array), seed, top_p 0 = 1.0, penalties, logprobs.
    v = call("/v1/completions",
             "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":30,"
             "\"temperature\":0,\"stop\":[\"girl\"],\"top_p\":0,\"frequency_penalty\":0,"
             "\"presence_penalty\":0,\"logprobs\":2,\"seed\":3}",
             200);
    assert_string_equal(str_at(choice0(v), "text", NULL), ", there was a little ");
    assert_string_equal(str_at(choice0(v), "finish_reason", NULL), "stop");
    json_decref(v);
    v = call("/v1/completions",
             "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":30,"
             "\"temperature\":0,\"stop\":\"little\"}",
             200);
    assert_string_equal(str_at(choice0(v), "text", NULL), ", there was a ");
    json_decref(v);

    // suffix: needs a template with .Suffix.
    v = call("/v1/completions",
             "{\"model\":\"filler\",\"prompt\":\"Once upon\",\"suffix\":\"a time\","
             "\"max_tokens\":4,\"temperature\":0}",
             200);
    assert_true(strlen(str_at(choice0(v), "text", NULL)) > 0);
    json_decref(v);
    expect_error("/v1/completions", "{\"model\":\"stories\",\"prompt\":\"a\",\"suffix\":\"b\"}",
                 400, "registry.ollama.ai/library/stories:latest does not support insert");
    expect_error("/v1/completions", "{\"model\":\"stories\",\"prompt\":[\"a\",\"b\"]}", 400,
                 "json: cannot unmarshal array into field prompt of type string");
    expect_error("/v1/completions", "{\"model\":\"stories\",\"prompt\":\"a\",\"stop\":[\"x\",2]}",
                 400, "invalid type for 'stop' field: float64");
    expect_error("/v1/completions", "{\"model\":\"nope\",\"prompt\":\"a\"}", 404,
                 "model 'nope' not found");
}

static void test_completions_stream(void **state)
{
    (void)state;
    json_t *ev =
        sse("/v1/completions",
            "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":4,"
            "\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    size_t n = json_array_size(ev);
    struct buf text;
    buf_init(&text, 0);
    for (size_t i = 0; i + 2 < n; i++) {
        json_t *e = json_array_get(ev, i);
        assert_string_equal(str_at(e, "object", NULL), "text_completion");
        json_t *c = choice0(e);
        buf_append_str(&text, str_at(c, "text", NULL));
        assert_int_equal(json_is_null(json_object_get(c, "finish_reason")), i + 3 < n);
        // The upstream quirk: all-zero usage on every chunk.
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(e, "usage"), "total_tokens")), 0);
    }
    assert_string_equal(str_at(choice0(json_array_get(ev, n - 3)), "finish_reason", NULL),
                        "length");
    json_t *u = json_array_get(ev, n - 2);
    assert_int_equal(json_array_size(json_object_get(u, "choices")), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(u, "usage"), "completion_tokens")), 4);
    assert_true(cstr_starts_with(buf_cstr(&text), ", there was"));
    buf_deinit(&text);
    json_decref(ev);

    // Without include_usage no chunk has usage.
    ev = sse("/v1/completions", "{\"model\":\"stories\",\"prompt\":\"Once\",\"max_tokens\":2,"
                                "\"stream\":true}");
    for (size_t i = 0; i + 1 < json_array_size(ev); i++)
        assert_null(json_object_get(json_array_get(ev, i), "usage"));
    json_decref(ev);

    // An empty prompt loads the model: a one-shot native answer, still SSE.
    ev = sse("/v1/completions", "{\"model\":\"stories\",\"prompt\":\"\",\"stream\":true}");
    assert_string_equal(str_at(choice0(json_array_get(ev, 0)), "finish_reason", NULL), "load");
    json_decref(ev);
}

// ---------------------------------------------------------------------------
// Embeddings

static void decode_b64(const char *s, float *out, size_t n_floats)
{
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char *bytes = calloc(n_floats * 4 + 3, 1);
    size_t nb = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        const char *p = strchr(alpha, *s);
        assert_non_null(p);
        acc = (acc << 6) | (uint32_t)(p - alpha);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes[nb++] = (unsigned char)(acc >> bits);
        }
    }
    assert_int_equal(nb, n_floats * 4);
    for (size_t i = 0; i < n_floats; i++) {
        uint32_t u = (uint32_t)bytes[4 * i] | (uint32_t)bytes[4 * i + 1] << 8 |
                     (uint32_t)bytes[4 * i + 2] << 16 | (uint32_t)bytes[4 * i + 3] << 24;
        memcpy(&out[i], &u, 4);
    }
    free(bytes);
}

static void test_embeddings(void **state)
{
    (void)state;
    json_t *v =
        call("/v1/embeddings",
             "{\"model\":\"stories\",\"input\":[\"hello there\",\"a cat\"],\"user\":\"u\"}", 200);
    assert_string_equal(str_at(v, "object", NULL), "list");
    assert_string_equal(str_at(v, "model", NULL), "stories");
    json_t *data = json_object_get(v, "data");
    assert_int_equal(json_array_size(data), 2);
    size_t dim = 0;
    for (size_t i = 0; i < 2; i++) {
        json_t *d = json_array_get(data, i);
        assert_string_equal(str_at(d, "object", NULL), "embedding");
        assert_int_equal(json_integer_value(json_object_get(d, "index")), (int64_t)i);
        json_t *e = json_object_get(d, "embedding");
        dim = json_array_size(e);
        assert_true(dim > 8);
        double norm = 0;
        for (size_t k = 0; k < dim; k++)
            norm +=
                json_number_value(json_array_get(e, k)) * json_number_value(json_array_get(e, k));
        assert_true(fabs(norm - 1.0) < 1e-3);
    }
    json_t *u = json_object_get(v, "usage");
    assert_true(json_integer_value(json_object_get(u, "prompt_tokens")) > 0);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")),
                     json_integer_value(json_object_get(u, "prompt_tokens")));
    assert_null(json_object_get(u, "completion_tokens"));

    // base64: the same float32 values, little-endian; format case-insensitive.
    json_t *b = call("/v1/embeddings",
                     "{\"model\":\"stories\",\"input\":[\"hello there\",\"a cat\"],"
                     "\"encoding_format\":\"BASE64\"}",
                     200);
    for (size_t i = 0; i < 2; i++) {
        const char *s = str_at(json_array_get(json_object_get(b, "data"), i), "embedding", NULL);
        assert_non_null(s);
        float *f = calloc(dim, sizeof(float));
        decode_b64(s, f, dim);
        json_t *e = json_object_get(json_array_get(data, i), "embedding");
        for (size_t k = 0; k < dim; k++)
            assert_true(f[k] == (float)json_number_value(json_array_get(e, k)));
        free(f);
    }
    json_decref(b);
    json_decref(v);

    // dimensions truncates (and renormalises); float format explicitly; a
    // single string; "" is one empty input.
    v = call("/v1/embeddings",
             "{\"model\":\"stories\",\"input\":\"hello\",\"dimensions\":8,"
             "\"encoding_format\":\"float\"}",
             200);
    assert_int_equal(
        json_array_size(
            str_at(v, "object", NULL)
                ? json_object_get(json_array_get(json_object_get(v, "data"), 0), "embedding")
                : NULL),
        8);
    json_decref(v);
    v = call("/v1/embeddings", "{\"model\":\"stories\",\"input\":\"\"}", 200);
    assert_int_equal(json_array_size(json_object_get(v, "data")), 1);
    json_decref(v);

    const char *p = "/v1/embeddings";
    expect_error(p, "{\"model\":\"stories\"}", 400, "invalid input");
    expect_error(p, "{\"model\":\"stories\",\"input\":null}", 400, "invalid input");
    expect_error(p, "{\"model\":\"stories\",\"input\":[]}", 400, "invalid input");
    expect_error(p, "{\"model\":\"stories\",\"input\":[1,2,3]}", 400, "invalid input type");
    expect_error(p, "{\"model\":\"stories\",\"input\":[[1,2]]}", 400, "invalid input type");
    expect_error(p, "{\"model\":\"stories\",\"input\":\"x\",\"encoding_format\":\"hex\"}", 400,
                 "Invalid value for 'encoding_format' = hex. Supported values: ['float', "
                 "'base64'].");
    expect_error(p, "{\"model\":\"stories\",\"input\":\"x\",\"dimensions\":\"8\"}", 400,
                 "json: cannot unmarshal string into field dimensions of type int");
    expect_error(p, "{\"model\":\"nope\",\"input\":\"x\"}", 404, "model 'nope' not found");
}

// ---------------------------------------------------------------------------
// Streams cut short

static void *kill_runner_later(void *arg)
{
    (void)arg;
    harness_sleep_ms(700);
    pid_t pid = harness_runner_pid(&srv);
    if (pid > 0)
        kill(pid, SIGKILL);
    return NULL;
}

static void test_stream_runner_killed(void **state)
{
    (void)state;
    json_t *v = call("/v1/completions",
                     "{\"model\":\"stories\",\"prompt\":\"Once\",\"max_tokens\":1}", 200);
    json_decref(v);
    if (harness_runner_pid(&srv) <= 0)
        skip();  // runners are not children of the server here
    pthread_t th;
    pthread_create(&th, NULL, kill_runner_later, NULL);
    // An endless stream: the runner dies, the error arrives as an event,
    // then [DONE].
    json_t *ev = sse("/v1/chat/completions",
                     "{\"model\":\"stories\",\"stream\":true,\"max_tokens\":-1,\"messages\":"
                     "[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}");
    pthread_join(th, NULL);
    size_t n = json_array_size(ev);
    json_t *err = json_object_get(json_array_get(ev, n - 2), "error");
    assert_true(json_is_object(err));
    assert_string_equal(str_at(err, "type", NULL), "api_error");
    assert_non_null(strstr(str_at(err, "message", NULL), "model runner has unexpectedly stopped"));
    json_decref(ev);
    // The server keeps serving. The first request after the crash may still
    // meet the dead runner when the scheduler has not reaped it yet (its
    // socket closes before the process is a zombie), so allow a few tries.
    long status = 0;
    for (int i = 0; i < 10 && status != 200; i++) {
        struct http_resp r;
        post("/v1/completions", "{\"model\":\"stories\",\"prompt\":\"Once\",\"max_tokens\":2}", &r);
        status = r.status;
        if (status != 200) {
            assert_int_equal(status, 500);
            assert_non_null(strstr(r.body, "\"type\":\"api_error\""));
            harness_sleep_ms(200);
        }
        http_resp_free(&r);
    }
    assert_int_equal(status, 200);
}

struct abort_ctx {
    size_t received;
};

static size_t abort_after_bytes(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    struct abort_ctx *a = arg;
    a->received += size * n;
    return a->received > 600 ? 0 : size * n;  // 0 aborts the transfer
}

static void test_stream_abort(void **state)
{
    (void)state;
    // The client goes away mid-stream; the server stops generating and keeps
    // serving.
    CURL *h = curl_easy_init();
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/chat/completions", srv.base_url);
    const char *body = "{\"model\":\"stories\",\"stream\":true,\"max_tokens\":-1,\"messages\":"
                       "[{\"role\":\"user\",\"content\":\"Once\"}]}";
    struct abort_ctx a = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, abort_after_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    assert_int_equal(curl_easy_perform(h), CURLE_WRITE_ERROR);
    curl_easy_cleanup(h);
    assert_true(a.received > 600);
    json_t *v = call("/v1/chat/completions",
                     "{\"model\":\"stories\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\","
                     "\"content\":\"Once\"}]}",
                     200);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_list),          cmocka_unit_test(test_chat),
        cmocka_unit_test(test_chat_alias),           cmocka_unit_test(test_chat_sampling),
        cmocka_unit_test(test_chat_stream),          cmocka_unit_test(test_chat_tools),
        cmocka_unit_test(test_chat_response_format), cmocka_unit_test(test_chat_reasoning),
        cmocka_unit_test(test_chat_images),          cmocka_unit_test(test_chat_errors),
        cmocka_unit_test(test_completions),          cmocka_unit_test(test_completions_stream),
        cmocka_unit_test(test_embeddings),           cmocka_unit_test(test_stream_abort),
        cmocka_unit_test(test_stream_runner_killed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Integration tests of the built-in renderers and parsers through a real
// `ollama serve` (issue 24): models created with RENDERER / PARSER, names
// this build lacks refused at create and reported at chat time for a model
// whose config names them (as a pulled one would), capabilities and
// `show --modelfile`, the rendered prompt (read from the OLLAMA_DEBUG=1
// log line "chat request: …"), and output parsed into thinking on /api/chat,
// /api/generate and /v1/chat/completions.
//
// Uses tests/fixtures/stories260K.gguf: its greedy continuation of "Once
// upon a time" starts ", there was a little" (llama.cpp's), so
// a thinking parser that starts inside the thinking puts it there.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "integration/models.h"
#include "json/json.h"
#include "renderer/renderer.h"
#include "testutil.h"

static struct harness srv;
static char stories_path[512];

static void post(const char *path, const char *body, struct http_resp *r)
{
    assert_int_equal(harness_request(&srv, "POST", path, NULL, body, r), 0);
}

static json_t *parse(const char *s)
{
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(s, strlen(s), &v, NULL), 0);
    return v;
}

static int setup(void **state)
{
    (void)state;
    test_fixture(stories_path, sizeof(stories_path), "stories260K.gguf");
    static const char *const env[] = {"OLLAMA_DEBUG=1", NULL};
    if (harness_setup(&srv, env) != 0)
        return -1;
    const char *params = "\"parameters\":{\"temperature\":0,\"num_predict\":10}";
    char extra[256];
    snprintf(extra, sizeof(extra), "%s,\"renderer\":\"qwen3-coder\",\"parser\":\"qwen3-coder\"",
             params);
    if (models_create(&srv, "coder", stories_path, extra) < 0)
        return -1;
    snprintf(extra, sizeof(extra), "%s,\"parser\":\"qwen3-thinking\"", params);
    if (models_create(&srv, "thinker", stories_path, extra) < 0)
        return -1;
    snprintf(extra, sizeof(extra), "%s,\"renderer\":\"harmony\",\"parser\":\"harmony\"", params);
    if (models_create(&srv, "oss", stories_path, extra) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

static void test_create_rejects_unknown_names(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/create",
         "{\"model\":\"bad\",\"from\":\"coder\",\"renderer\":\"nope\",\"stream\":false}", &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "unknown renderer \\\"nope\\\""));
    http_resp_free(&r);
    post("/api/create",
         "{\"model\":\"bad\",\"from\":\"coder\",\"parser\":\"nope2\",\"stream\":false}", &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "unknown parser \\\"nope2\\\""));
    http_resp_free(&r);
    // A Modelfile (old clients send it whole) is checked the same way.
    post("/api/create",
         "{\"model\":\"bad\",\"modelfile\":\"FROM coder\\nRENDERER missing-one\\n\","
         "\"stream\":false}",
         &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "unknown renderer \\\"missing-one\\\""));
    http_resp_free(&r);
}

static void test_show(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/show", "{\"model\":\"coder\"}", &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    const char *mf = json_string_value(json_object_get(v, "modelfile"));
    assert_non_null(mf);
    assert_non_null(strstr(mf, "\nRENDERER qwen3-coder\n"));
    assert_non_null(strstr(mf, "\nPARSER qwen3-coder\n"));
    assert_string_equal(json_string_value(json_object_get(v, "renderer")), "qwen3-coder");
    assert_string_equal(json_string_value(json_object_get(v, "parser")), "qwen3-coder");
    char *caps = json_dumps(json_object_get(v, "capabilities"), JSON_COMPACT);
    assert_string_equal(caps, "[\"completion\",\"tools\"]");
    free(caps);
    json_decref(v);
    http_resp_free(&r);

    post("/api/show", "{\"model\":\"thinker\"}", &r);
    v = parse(r.body);
    caps = json_dumps(json_object_get(v, "capabilities"), JSON_COMPACT);
    assert_string_equal(caps, "[\"completion\",\"tools\",\"thinking\"]");
    free(caps);
    json_decref(v);
    http_resp_free(&r);
}

// The server log holds `msg="chat request: <prompt>" prompt=<n> bytes` for
// the prompt the renderer makes of these messages and tools.
static void expect_logged_prompt(const char *renderer, const char *msgs, const char *tools,
                                 const struct renderer_think *think)
{
    json_t *m = parse(msgs);
    json_t *t = tools ? parse(tools) : NULL;
    struct buf prompt, line;
    buf_init(&prompt, 0);
    buf_init(&line, 0);
    assert_int_equal(renderer_render(renderer, m, t, think, &prompt, NULL), 0);
    char *msg = xasprintf("chat request: %s", buf_cstr(&prompt));
    log_kv_append(&line, "msg", msg);
    buf_printf(&line, " prompt=%zu bytes", prompt.len);
    struct buf log;
    buf_init(&log, 0);
    assert_int_equal(fs_read_all(srv.log_path, 1u << 26, &log, NULL), 0);
    if (!strstr(buf_cstr(&log), buf_cstr(&line)))
        fail_msg("log has no line with%s", buf_cstr(&line));
    buf_deinit(&log);
    free(msg);
    buf_deinit(&prompt);
    buf_deinit(&line);
    json_decref(m);
    json_decref(t);
}

static const char coder_msgs[] =
    "[{\"role\":\"system\",\"content\":\"You write code.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":"
    "\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":2}}}]},"
    "{\"role\":\"tool\",\"tool_name\":\"get_weather\",\"content\":\"18C\"},"
    "{\"role\":\"user\",\"content\":\"Once upon a time\"}]";
static const char coder_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","
    "\"parameters\":{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{\"city\":{"
    "\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}}]";

static void test_chat_renders_with_renderer(void **state)
{
    (void)state;
    char body[4096];
    snprintf(body, sizeof(body),
             "{\"model\":\"coder\",\"stream\":false,\"messages\":%s,\"tools\":%s}", coder_msgs,
             coder_tools);
    struct http_resp r;
    post("/api/chat", body, &r);
    if (r.status != 200)
        fprintf(stderr, "chat: %ld %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    assert_true(json_is_true(json_object_get(v, "done")));
    json_decref(v);
    http_resp_free(&r);
    expect_logged_prompt("qwen3-coder", coder_msgs, coder_tools, NULL);

    // The same through /v1/chat/completions, streamed (tool call arguments
    // arrive as JSON strings there).
    const char *oa_msgs =
        "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
        "\"{\\\"city\\\":\\\"Oslo\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"3C\"}]";
    snprintf(body, sizeof(body),
             "{\"model\":\"coder\",\"stream\":true,\"messages\":%s,\"tools\":%s}", oa_msgs,
             coder_tools);
    post("/v1/chat/completions", body, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "data: [DONE]"));
    http_resp_free(&r);
    expect_logged_prompt("qwen3-coder",
                         "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
                         "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{"
                         "\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}}]},"
                         "{\"role\":\"tool\",\"tool_name\":\"get_weather\",\"content\":\"3C\"}]",
                         coder_tools, NULL);
}

static void test_harmony_renders(void **state)
{
    (void)state;
    const char *msgs = "[{\"role\":\"user\",\"content\":\"Once upon a time\"}]";
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"oss\",\"stream\":false,\"think\":\"low\",\"messages\":%s}", msgs);
    struct http_resp r;
    post("/api/chat", body, &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    struct renderer_think low = {.set = true, .on = true, .level = "low"};
    expect_logged_prompt("harmony", msgs, NULL, &low);
}

// Everything the model writes before a "</think>" is thinking for the
// qwen3-thinking parser (thinking is on by default for a thinking model).
static void test_thinking_parsed(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/chat",
         "{\"model\":\"thinker\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"Once upon a time\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    json_t *msg = json_object_get(v, "message");
    const char *thinking = json_string_value(json_object_get(msg, "thinking"));
    assert_non_null(thinking);
    assert_true(cstr_starts_with(thinking, ", there was a little"));
    assert_string_equal(json_string_value(json_object_get(msg, "content")), "");
    char *want = xstrdup(thinking);
    json_decref(v);
    http_resp_free(&r);

    // Streamed: the pieces add up to the same thinking, no content.
    post("/api/chat",
         "{\"model\":\"thinker\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
         "time\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    struct buf th;
    buf_init(&th, 0);
    char *save = NULL;
    for (char *line = strtok_r(r.body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = parse(line);
        json_t *m = json_object_get(o, "message");
        const char *t = json_string_value(json_object_get(m, "thinking"));
        if (t)
            buf_append_str(&th, t);
        assert_string_equal(json_string_value(json_object_get(m, "content")), "");
        json_decref(o);
    }
    assert_string_equal(buf_cstr(&th), want);
    buf_deinit(&th);
    http_resp_free(&r);

    // think:false: all content.
    post("/api/chat",
         "{\"model\":\"thinker\",\"stream\":false,\"think\":false,\"messages\":[{\"role\":"
         "\"user\",\"content\":\"Once upon a time\"}]}",
         &r);
    v = parse(r.body);
    msg = json_object_get(v, "message");
    assert_string_equal(json_string_value(json_object_get(msg, "content")), want);
    assert_null(json_object_get(msg, "thinking"));
    json_decref(v);
    http_resp_free(&r);

    // /api/generate uses the parser too; /v1/chat/completions reports it as
    // reasoning.
    post("/api/generate",
         "{\"model\":\"thinker\",\"stream\":false,\"prompt\":\"Once upon a time\"}", &r);
    v = parse(r.body);
    assert_string_equal(json_string_value(json_object_get(v, "thinking")), want);
    assert_string_equal(json_string_value(json_object_get(v, "response")), "");
    json_decref(v);
    http_resp_free(&r);
    post("/v1/chat/completions",
         "{\"model\":\"thinker\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"Once upon a "
         "time\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    v = parse(r.body);
    json_t *m = json_object_get(
        json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message"), "reasoning");
    assert_string_equal(json_string_value(m), want);
    json_decref(v);
    http_resp_free(&r);
    free(want);
}

// A model whose config names a renderer this build lacks (as one pulled from
// a newer registry would): the config blob is rewritten on disk, and chat
// requests get Ollama's error.
static void set_config_field(const char *model, const char *key, const char *value)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/manifests/registry.ollama.ai/library/%s/latest",
             srv.models_dir, model);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &b, NULL), 0);
    json_t *man = parse(buf_cstr(&b));
    buf_deinit(&b);
    json_t *cfg = json_object_get(man, "config");
    const char *digest = json_string_value(json_object_get(cfg, "digest"));
    char blob[1024];
    snprintf(blob, sizeof(blob), "%s/blobs/sha256-%s", srv.models_dir, digest + 7);
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(blob, 1 << 20, &b, NULL), 0);
    json_t *c = parse(buf_cstr(&b));
    buf_deinit(&b);
    json_object_set_new(c, key, json_string(value));
    char *text = json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(text, strlen(text), hex);
    snprintf(blob, sizeof(blob), "%s/blobs/sha256-%s", srv.models_dir, hex);
    assert_int_equal(fs_write_atomic(blob, text, strlen(text), NULL), 0);
    char d[80];
    snprintf(d, sizeof(d), "sha256:%s", hex);
    json_object_set_new(cfg, "digest", json_string(d));
    json_object_set_new(cfg, "size", json_integer((json_int_t)strlen(text)));
    free(text);
    text = json_dumps(man, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_int_equal(fs_write_atomic(path, text, strlen(text), NULL), 0);
    free(text);
    json_decref(c);
    json_decref(man);
}

static void test_missing_names_at_chat(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/create", "{\"model\":\"future\",\"from\":\"coder\",\"stream\":false}", &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    set_config_field("future", "renderer", "qwen9-next");
    post("/api/chat",
         "{\"model\":\"future\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body, "unknown renderer \\\"qwen9-next\\\""));
    http_resp_free(&r);
    // show still works and prints the name.
    post("/api/show", "{\"model\":\"future\"}", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "RENDERER qwen9-next"));
    http_resp_free(&r);
    set_config_field("future", "renderer", "qwen3-coder");
    set_config_field("future", "parser", "qwen9-parser");
    post("/api/chat",
         "{\"model\":\"future\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body, "unknown parser \\\"qwen9-parser\\\""));
    http_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects_unknown_names),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_chat_renders_with_renderer),
        cmocka_unit_test(test_harmony_renders),
        cmocka_unit_test(test_thinking_parsed),
        cmocka_unit_test(test_missing_names_at_chat),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Integration: a GGUF that carries only a Jinja `tokenizer.chat_template`
// (no TEMPLATE) is created and chatted with through a real server. The
// rendered prompt (read back from the OLLAMA_DEBUG=1 log line) holds the
// system message, the history, the tools and the thinking switch as the
// template renders them; show's capabilities come from the template; a
// request with tools to a template without them gets Ollama's error; a
// hostile template ends in an error, not a hang; /v1/chat/completions
// streams through the same path.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "gguf/gguf.h"
#include "integration/models.h"
#include "json/json.h"
#include "testutil.h"

static struct harness srv;
static char tmp[64];

// Tools in requests, thinking from enable_thinking, <think> tags, tool results by name.
static const char *tmpl_full =
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}"
    "</tool_call>{% endfor %}{% endif %}{% if m.role == 'tool' %}[from {{ m.name }}]{% endif %}\n"
    "{% endfor %}{% if tools %}TOOLS {{ tools | map(attribute='function.name') | join(',') }}\n"
    "{% endif %}{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking %}<think>{% else %}<think></think>"
    "{% endif %}{% endif %}";
// No tools, no thinking.
static const char *tmpl_plain =
    "{% for m in messages %}{{ m.role | upper }}: {{ m.content }}\n{% endfor %}ASSISTANT:";
// A loop that would run for ever.
static const char *tmpl_hostile =
    "{% for a in range(1000000) %}{% for b in range(1000000) %}x{% endfor %}{% endfor %}";

// Copies a GGUF, adding tokenizer.chat_template.
static int write_with_template(const char *src, const char *dst, const char *chat_template)
{
    struct gguf *g;
    struct gguf_writer *w;
    struct err e = {0};
    if (gguf_open(&g, src, &e) < 0 || gguf_writer_open(&w, dst, &e) < 0)
        return -1;
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        if (!str_eq_cstr(kv->key, "tokenizer.chat_template"))
            gguf_writer_kv_copy(w, kv);
    }
    gguf_writer_kv_str(w, "tokenizer.chat_template", chat_template);
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char *name = str_dup(t->name);
        gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne);
        free(name);
    }
    int rc = gguf_writer_write_header(w, &e);
    for (size_t i = 0; rc == 0 && i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        rc = gguf_writer_write_data(w, t->data, t->n_bytes, &e);
    }
    if (rc == 0)
        rc = gguf_writer_close(w, &e);
    else
        gguf_writer_abort(w);
    gguf_close(g);
    return rc;
}

static int setup(void **state)
{
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(tmp, sizeof tmp, "/tmp/test_jinja.XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    char stories[512];
    test_fixture(stories, sizeof stories, "stories260K.gguf");
    static const char *const env[] = {"OLLAMA_DEBUG=1", "OLLAMA_DEBUG_LOG_REQUESTS=1", NULL};
    if (harness_start(&srv, env) < 0)
        return -1;
    const struct {
        const char *name, *tmpl;
    } models[] = {{"jfull", tmpl_full}, {"jplain", tmpl_plain}, {"jhostile", tmpl_hostile}};
    for (size_t i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.gguf", tmp, models[i].name);
        if (write_with_template(stories, path, models[i].tmpl) < 0 ||
            models_create(&srv, models[i].name, path,
                          "\"parameters\":{\"temperature\":0,\"num_predict\":4}") < 0)
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = harness_stop(&srv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        return -1;
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

static void post(const char *path, const char *body, struct http_resp *r)
{
    assert_int_equal(harness_request(&srv, "POST", path, NULL, body, r), 0);
}

// The last "chat request: …" debug line of the server log.
static char *last_prompt_line(void)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(srv.log_path, 1u << 26, &b, NULL), 0);
    const char *last = NULL, *p = b.data;
    while (p && (p = strstr(p, "chat request: ")) != NULL)
        last = p++;
    char *line = NULL;
    if (last) {
        const char *end = strchr(last, '\n');
        line = xstrndup(last, end ? (size_t)(end - last) : strlen(last));
    }
    buf_deinit(&b);
    return line;
}

static void expect_in_prompt(const char *const *parts)
{
    char *line = last_prompt_line();
    assert_non_null(line);
    const char *at = line;
    for (size_t i = 0; parts[i]; i++) {
        const char *f = strstr(at, parts[i]);
        if (!f)
            fail_msg("prompt log line lacks [%s] (in order): %s", parts[i], line);
        at = f + strlen(parts[i]);
    }
    free(line);
}

static json_t *capabilities(const char *model)
{
    char body[128];
    snprintf(body, sizeof body, "{\"model\":\"%s\"}", model);
    struct http_resp r;
    post("/api/show", body, &r);
    assert_int_equal(r.status, 200);
    json_t *v = json_loads(r.body, 0, NULL);
    http_resp_free(&r);
    json_t *caps = json_incref(json_object_get(v, "capabilities"));
    json_decref(v);
    return caps;
}

static bool has_cap(json_t *caps, const char *c)
{
    for (size_t i = 0; i < json_array_size(caps); i++)
        if (!strcmp(json_string_value(json_array_get(caps, i)), c))
            return true;
    return false;
}

static void test_show_capabilities(void **state)
{
    (void)state;
    json_t *c = capabilities("jfull");
    assert_true(has_cap(c, "completion"));
    assert_true(has_cap(c, "tools"));
    assert_true(has_cap(c, "thinking"));
    json_decref(c);
    c = capabilities("jplain");
    assert_true(has_cap(c, "completion"));
    assert_false(has_cap(c, "tools"));
    assert_false(has_cap(c, "thinking"));
    json_decref(c);
}

static const char *tools_json =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";

static void test_chat_history_tools_thinking(void **state)
{
    (void)state;
    char *body = xasprintf(
        "{\"model\":\"jfull\",\"stream\":false,\"think\":true,\"tools\":%s,\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are terse.\"},"
        "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},"
        "{\"role\":\"tool\",\"tool_name\":\"get_weather\",\"content\":\"18C\"},"
        "{\"role\":\"user\",\"content\":\"And tomorrow?\"}]}",
        tools_json);
    struct http_resp r;
    post("/api/chat", body, &r);
    free(body);
    if (r.status != 200)
        fail_msg("chat: %ld %s", r.status, r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    http_resp_free(&r);
    assert_non_null(v);
    assert_true(json_is_true(json_object_get(v, "done")));
    json_t *msg = json_object_get(v, "message");
    assert_string_equal(json_string_value(json_object_get(msg, "role")), "assistant");
    // generation started inside <think>: the tiny model's words are thinking
    assert_true(json_is_string(json_object_get(msg, "thinking")));
    json_decref(v);
    // BOS "<s>" is stripped (the SentencePiece tokenizer adds it); everything else in order
    static const char *const parts[] = {
        "chat request: <|system|>You are terse.",
        "<|user|>Weather in Paris?",
        "<|assistant|><tool_call>{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": "
        "{\\\"city\\\": \\\"Paris\\\"}}</tool_call>",
        "<|tool|>18C[from get_weather]",
        "<|user|>And tomorrow?",
        "TOOLS get_weather",
        "<|assistant|><think>\"",
        NULL};
    expect_in_prompt(parts);
    char *line = last_prompt_line();
    assert_null(strstr(line, "<s>"));
    free(line);

    // think false: the template closes the thinking section itself
    post("/api/chat",
         "{\"model\":\"jfull\",\"stream\":false,\"think\":false,\"messages\":["
         "{\"role\":\"user\",\"content\":\"hi\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    static const char *const parts2[] = {"chat request: <|user|>hi", "<|assistant|><think></think>",
                                         NULL};
    expect_in_prompt(parts2);
}

// OLLAMA_DEBUG_LOG_REQUESTS: the last /api/chat body is in the folder the
// server announced, byte for byte, beside a curl script that replays it.
static void check_request_log(const char *body)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(srv.log_path, 1u << 26, &b, NULL), 0);
    const char *key = "inference request logs will be stored in ";
    const char *p = strstr(buf_cstr(&b), key);
    assert_non_null(p);
    p += strlen(key);
    char dir[256];
    size_t n = strcspn(p, " ");
    assert_true(n < sizeof dir);
    memcpy(dir, p, n);
    dir[n] = '\0';
    // The newest *_api_chat_body.json ("logged to PATH, replay ..." lines).
    const char *last = NULL, *q = buf_cstr(&b);
    while ((q = strstr(q, "logged to ")) != NULL)
        last = q++;
    assert_non_null(last);
    last += strlen("logged to ");
    char path[512], script[512];
    n = strcspn(last, ",");
    assert_true(n < sizeof path);
    memcpy(path, last, n);
    path[n] = '\0';
    assert_non_null(strstr(path, dir));
    assert_non_null(strstr(path, "_api_chat_body.json"));
    struct buf got;
    buf_init(&got, 0);
    assert_int_equal(fs_read_all(path, 1u << 26, &got, NULL), 0);
    assert_int_equal(got.len, strlen(body));
    assert_memory_equal(got.data, body, got.len);
    buf_deinit(&got);
    snprintf(script, sizeof script, "%.*s_request.sh", (int)(strlen(path) - strlen("_body.json")),
             path);
    buf_init(&got, 0);
    assert_int_equal(fs_read_all(script, 1u << 20, &got, NULL), 0);
    assert_non_null(strstr(buf_cstr(&got), "curl --request POST --url \"http://"));
    assert_non_null(strstr(buf_cstr(&got), "/api/chat\" --header \"Content-Type: "));
    buf_deinit(&got);
    buf_deinit(&b);
    char *rm = xasprintf("rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
    free(rm);
}

static void test_plain_template(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/chat",
         "{\"model\":\"jplain\",\"stream\":false,\"messages\":["
         "{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U1\"},"
         "{\"role\":\"assistant\",\"content\":\"A1\"},{\"role\":\"user\",\"content\":\"U2\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    static const char *const parts[] = {
        "chat request: SYSTEM: S\\nUSER: U1\\nASSISTANT: A1\\nUSER: U2\\nASSISTANT:\"", NULL};
    expect_in_prompt(parts);

    // /api/generate renders through the same template (user turn + model system)
    post("/api/generate", "{\"model\":\"jplain\",\"stream\":false,\"prompt\":\"Tell me\"}", &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);

    // _debug_render_only: the rendered prompt, in each route's shape, and no generation
    post("/api/chat",
         "{\"model\":\"jplain\",\"_debug_render_only\":true,\"messages\":["
         "{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U1\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *v = json_loads(r.body, 0, NULL);
    http_resp_free(&r);
    assert_non_null(v);
    assert_true(json_is_false(json_object_get(v, "done")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(v, "message"), "role")),
                        "");
    json_t *info = json_object_get(v, "_debug_info");
    assert_string_equal(json_string_value(json_object_get(info, "rendered_template")),
                        "SYSTEM: S\nUSER: U1\nASSISTANT:");
    assert_null(json_object_get(info, "image_count"));
    assert_null(json_object_get(v, "eval_count"));
    json_decref(v);
    post("/api/generate",
         "{\"model\":\"jplain\",\"stream\":true,\"_debug_render_only\":true,\"prompt\":\"Hi\"}",
         &r);
    assert_int_equal(r.status, 200);
    v = json_loads(r.body, 0, NULL);
    http_resp_free(&r);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "response")), "");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(v, "_debug_info"), "rendered_template")),
        "USER: Hi\nASSISTANT:");
    json_decref(v);
    // A final assistant message is continued as llama-server continues it (no generation
    // prompt; this template prints its "ASSISTANT:" either way), two are refused as it does.
    post("/api/chat",
         "{\"model\":\"jplain\",\"_debug_render_only\":true,\"messages\":["
         "{\"role\":\"user\",\"content\":\"U1\"},{\"role\":\"assistant\",\"content\":\"A1\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    v = json_loads(r.body, 0, NULL);
    http_resp_free(&r);
    assert_non_null(v);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(v, "_debug_info"), "rendered_template")),
        "USER: U1\nASSISTANT:A1");
    json_decref(v);
    post("/api/chat",
         "{\"model\":\"jplain\",\"_debug_render_only\":true,\"messages\":["
         "{\"role\":\"user\",\"content\":\"U1\"},{\"role\":\"assistant\",\"content\":\"A1\"},"
         "{\"role\":\"assistant\",\"content\":\"A2\"}]}",
         &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "Cannot have 2 or more assistant messages at the end"));
    http_resp_free(&r);
    post("/api/chat", "{\"model\":\"jplain\",\"_debug_render_only\":\"yes\",\"messages\":[]}", &r);
    assert_int_equal(r.status, 400);
    http_resp_free(&r);

    // A 20 KB prompt appears whole in the debug log.
    char *big = xmalloc(20001);
    memset(big, 'Z', 20000);
    big[20000] = '\0';
    char *body2 = xasprintf("{\"model\":\"jplain\",\"_debug_render_only\":true,\"messages\":["
                            "{\"role\":\"user\",\"content\":\"%s\"}]}",
                            big);
    post("/api/chat", body2, &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
    char *want = xasprintf("chat request: USER: %s\\nASSISTANT:\"", big);
    char *line = last_prompt_line();
    assert_non_null(line);
    assert_non_null(strstr(line, want));
    free(line);
    free(want);
    check_request_log(body2);
    free(body2);
    free(big);

    // tools to a model whose template has none: Ollama's error
    char *body = xasprintf("{\"model\":\"jplain\",\"tools\":%s,\"messages\":[{\"role\":\"user\","
                           "\"content\":\"x\"}]}",
                           tools_json);
    post("/api/chat", body, &r);
    free(body);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "does not support tools"));
    http_resp_free(&r);
    post("/api/chat",
         "{\"model\":\"jplain\",\"think\":true,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
         "}",
         &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "does not support thinking"));
    http_resp_free(&r);
}

static void test_hostile_template(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/chat",
         "{\"model\":\"jhostile\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"x\"}]}",
         &r);
    assert_true(r.status >= 400);
    if (!strstr(r.body, "steps"))
        fail_msg("hostile template: %ld %s", r.status, r.body);
    http_resp_free(&r);
    // the server keeps serving
    post("/api/chat",
         "{\"model\":\"jplain\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"x\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    http_resp_free(&r);
}

static void test_streams(void **state)
{
    (void)state;
    struct http_resp r;
    char *body = xasprintf("{\"model\":\"jfull\",\"think\":true,\"tools\":%s,\"messages\":["
                           "{\"role\":\"user\",\"content\":\"hi\"}]}",
                           tools_json);
    post("/api/chat", body, &r);
    free(body);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"done\":true"));
    http_resp_free(&r);
    body = xasprintf("{\"model\":\"jfull\",\"stream\":true,\"tools\":%s,\"messages\":["
                     "{\"role\":\"user\",\"content\":\"hi\"}]}",
                     tools_json);
    post("/v1/chat/completions", body, &r);
    free(body);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "data: [DONE]"));
    http_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_show_capabilities),
        cmocka_unit_test(test_chat_history_tools_thinking),
        cmocka_unit_test(test_plain_template),
        cmocka_unit_test(test_hostile_template),
        cmocka_unit_test(test_streams),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

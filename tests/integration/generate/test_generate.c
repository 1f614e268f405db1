// Integration tests of generation through a real `ollama serve` and its
// runner processes (issue 8): /api/generate and /api/chat streamed and not,
// option and field errors with Ollama's statuses, load / unload with an
// empty prompt, /api/ps, keep-alive expiry, embeddings, parallel chats on
// several slots, client disconnect, and a runner killed with SIGKILL.
//
// Uses the real TinyStories model (tests/fixtures/stories260K.gguf), so the
// greedy text is known: ", there was a little girl named Lily."
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "integration/models.h"
#include "json/json.h"
#include "testutil.h"

static struct harness srv;
static char stories_path[512];

static int setup(void **state)
{
    (void)state;
    test_fixture(stories_path, sizeof(stories_path), "stories260K.gguf");
    static const char *const env[] = {"OLLAMA_NUM_PARALLEL=4", NULL};
    if (harness_setup(&srv, env) != 0)
        return -1;
    if (models_create(&srv, "stories", stories_path, "\"parameters\":{\"temperature\":0}") < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return harness_teardown(&srv);
}

static void post(const char *path, const char *body, struct http_resp *r)
{
    assert_int_equal(harness_request(&srv, "POST", path, NULL, body, r), 0);
}

static void expect(const char *path, const char *body, long status, const char *substr)
{
    struct http_resp r;
    post(path, body, &r);
    if (r.status != status || (substr && !strstr(r.body, substr)))
        fprintf(stderr, "POST %s %s -> %ld %s\n", path, body, r.status, r.body);
    assert_int_equal(r.status, status);
    if (substr)
        assert_non_null(strstr(r.body, substr));
    http_resp_free(&r);
}

static json_t *parse(const char *s)
{
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(s, strlen(s), &v, NULL), 0);
    return v;
}

static void test_generate_not_streamed(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/generate",
         "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"stream\":false,"
         "\"options\":{\"num_predict\":12}}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    const char *text = json_string_value(json_object_get(v, "response"));
    assert_non_null(text);
    // llama.cpp's greedy continuation of this prompt (stories260K.reference.json).
    assert_true(cstr_starts_with(text, ", there was a little girl named Lily"));
    assert_true(json_is_true(json_object_get(v, "done")));
    assert_string_equal(json_string_value(json_object_get(v, "done_reason")), "length");
    assert_int_equal(json_integer_value(json_object_get(v, "eval_count")), 12);
    assert_true(json_integer_value(json_object_get(v, "prompt_eval_count")) > 0);
    assert_true(json_integer_value(json_object_get(v, "total_duration")) > 0);
    assert_true(json_integer_value(json_object_get(v, "eval_duration")) > 0);
    assert_true(json_array_size(json_object_get(v, "context")) > 12);
    assert_string_equal(json_string_value(json_object_get(v, "model")), "stories");
    json_decref(v);
    http_resp_free(&r);
}

static void test_generate_streamed(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/generate",
         "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"options\":{\"num_predict\":8}}",
         &r);
    assert_int_equal(r.status, 200);
    assert_true(http_has_header(&r, "Content-Type: application/x-ndjson"));
    // Concatenated pieces equal the non-streamed text; the last line is done.
    struct buf text;
    buf_init(&text, 0);
    int lines = 0, done = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *v = parse(line);
        lines++;
        buf_append_str(&text, json_string_value(json_object_get(v, "response")));
        if (json_is_true(json_object_get(v, "done"))) {
            done++;
            assert_string_equal(json_string_value(json_object_get(v, "done_reason")), "length");
            assert_int_equal(json_integer_value(json_object_get(v, "eval_count")), 8);
        }
        json_decref(v);
    }
    assert_int_equal(done, 1);
    assert_true(lines >= 2);
    assert_true(cstr_starts_with(buf_cstr(&text), ", there was a little"));
    buf_deinit(&text);
    http_resp_free(&r);
}

static void test_chat(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/chat",
         "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
         "time\"}],"
         "\"stream\":false,\"options\":{\"num_predict\":6}}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    json_t *msg = json_object_get(v, "message");
    assert_string_equal(json_string_value(json_object_get(msg, "role")), "assistant");
    assert_true(strlen(json_string_value(json_object_get(msg, "content"))) > 0);
    assert_null(json_object_get(v, "context"));
    json_decref(v);
    http_resp_free(&r);

    // Streamed: every line has a message; the final one is done.
    post("/api/chat",
         "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
         "\"options\":{\"num_predict\":4}}",
         &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"message\":{\"role\":\"assistant\""));
    assert_non_null(strstr(r.body, "\"done\":true"));
    http_resp_free(&r);
}

// Checks one logprob entry of a greedy run without penalties (so the chosen
// token is the argmax of the raw logits): a real log probability, the chosen
// token the most likely of top_n alternatives, sorted, bytes = text.
static void check_logprob_entry(const json_t *e, size_t top_n, struct buf *text)
{
    const char *tok = json_string_value(json_object_get(e, "token"));
    assert_non_null(tok);
    double lp = json_number_value(json_object_get(e, "logprob"));
    assert_true(lp <= 0.0 && lp > -100.0);
    json_t *bytes = json_object_get(e, "bytes");
    if (*tok) {
        assert_int_equal(json_array_size(bytes), strlen(tok));
        for (size_t i = 0; i < strlen(tok); i++)
            assert_int_equal(json_integer_value(json_array_get(bytes, i)), (unsigned char)tok[i]);
    }
    json_t *top = json_object_get(e, "top_logprobs");
    if (top_n == 0) {
        assert_null(top);
    } else {
        assert_int_equal(json_array_size(top), top_n);
        // Greedy (temperature 0): the chosen token is the most likely one.
        assert_string_equal(json_string_value(json_object_get(json_array_get(top, 0), "token")),
                            tok);
        assert_true(fabs(json_number_value(json_object_get(json_array_get(top, 0), "logprob")) -
                         lp) < 1e-6);
        for (size_t i = 1; i < top_n; i++)
            assert_true(json_number_value(json_object_get(json_array_get(top, i), "logprob")) <=
                        json_number_value(json_object_get(json_array_get(top, i - 1), "logprob")));
    }
    buf_append_str(text, tok);
}

static void test_logprobs(void **state)
{
    (void)state;
    // Not streamed: one entry per sampled token, their text is the response.
    struct http_resp r;
    post("/api/generate",
         "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"stream\":false,"
         "\"logprobs\":true,\"top_logprobs\":3,\"options\":{\"num_predict\":8,"
         "\"repeat_penalty\":1}}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    json_t *lps = json_object_get(v, "logprobs");
    assert_int_equal(json_array_size(lps), 8);
    struct buf text;
    buf_init(&text, 0);
    size_t i;
    json_t *e;
    json_array_foreach(lps, i, e) check_logprob_entry(e, 3, &text);
    assert_string_equal(buf_cstr(&text), json_string_value(json_object_get(v, "response")));
    // logprobs is the last field (api.md §6.3).
    assert_non_null(strstr(r.body, "\"eval_duration\":"));
    assert_true(strstr(r.body, "\"logprobs\":[") > strstr(r.body, "\"eval_duration\":"));
    json_decref(v);
    http_resp_free(&r);

    // Streamed chat: each chunk carries its tokens' entries; no alternatives.
    post("/api/chat",
         "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
         "time\"}],\"logprobs\":true,\"options\":{\"num_predict\":6,\"repeat_penalty\":1}}",
         &r);
    assert_int_equal(r.status, 200);
    buf_reset(&text);
    struct buf content;
    buf_init(&content, 0);
    size_t n_entries = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *c = parse(line);
        json_array_foreach(json_object_get(c, "logprobs"), i, e)
        {
            check_logprob_entry(e, 0, &text);
            n_entries++;
        }
        buf_append_str(
            &content, json_string_value(json_object_get(json_object_get(c, "message"), "content")));
        json_decref(c);
    }
    assert_int_equal(n_entries, 6);
    assert_string_equal(buf_cstr(&text), buf_cstr(&content));
    buf_deinit(&content);
    buf_deinit(&text);
    http_resp_free(&r);

    // Not asked: no logprobs key; a bad type is a 400.
    post("/api/generate",
         "{\"model\":\"stories\",\"prompt\":\"Once\",\"stream\":false,\"top_logprobs\":2,"
         "\"options\":{\"num_predict\":2}}",
         &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "logprobs"));
    http_resp_free(&r);
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"Once\",\"logprobs\":\"yes\"}", 400,
           "cannot unmarshal");

    // OpenAI: choices[0].logprobs.content (temperature: /v1 sends 1.0 when absent).
    post("/v1/chat/completions",
         "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a "
         "time\"}],\"logprobs\":true,\"top_logprobs\":2,\"max_tokens\":5,\"temperature\":0,"
         "\"frequency_penalty\":0,\"presence_penalty\":0}",
         &r);
    assert_int_equal(r.status, 200);
    v = parse(r.body);
    json_t *content_lps = json_object_get(
        json_object_get(json_array_get(json_object_get(v, "choices"), 0), "logprobs"), "content");
    assert_int_equal(json_array_size(content_lps), 5);
    buf_init(&text, 0);
    json_array_foreach(content_lps, i, e) check_logprob_entry(e, 2, &text);
    buf_deinit(&text);
    json_decref(v);
    http_resp_free(&r);
}

static void test_stop_and_options(void **state)
{
    (void)state;
    struct http_resp r;
    // A stop sequence ends the text before it and is not returned.
    post("/api/generate",
         "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"stream\":false,"
         "\"options\":{\"num_predict\":40,\"stop\":[\"Lily\"]}}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    const char *text = json_string_value(json_object_get(v, "response"));
    assert_null(strstr(text, "Lily"));
    assert_true(cstr_ends_with(text, "named "));
    assert_string_equal(json_string_value(json_object_get(v, "done_reason")), "stop");
    json_decref(v);
    http_resp_free(&r);
    // Same seed, same options, same output at a high temperature.
    const char *seeded = "{\"model\":\"stories\",\"prompt\":\"Once\",\"stream\":false,\"options\":"
                         "{\"num_predict\":16,\"temperature\":1.5,\"seed\":42}}";
    struct http_resp a, b;
    post("/api/generate", seeded, &a);
    post("/api/generate", seeded, &b);
    json_t *va = parse(a.body), *vb = parse(b.body);
    assert_string_equal(json_string_value(json_object_get(va, "response")),
                        json_string_value(json_object_get(vb, "response")));
    json_decref(va);
    json_decref(vb);
    http_resp_free(&a);
    http_resp_free(&b);
    // Raw mode: the prompt is sent as is, no context returned.
    post("/api/generate",
         "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"raw\":true,\"stream\":false,"
         "\"options\":{\"num_predict\":3}}",
         &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "\"context\""));
    http_resp_free(&r);
}

static void test_errors(void **state)
{
    (void)state;
    expect("/api/generate", "{\"model\":\"\"}", 404, "model '' not found");
    expect("/api/chat", "{\"model\":\"\"}", 400, "model is required");
    expect("/api/generate", "{\"model\":\"nope\",\"prompt\":\"x\"}", 404, "model 'nope' not found");
    expect("/api/generate", "{\"model\":\"bad name!\",\"prompt\":\"x\"}", 400,
           "invalid model name");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":1}", 400, "\"error\"");
    expect("/api/generate", "not json", 400, "\"error\"");
    expect("/api/generate", "", 400, "missing request body");
    expect("/api/generate",
           "{\"model\":\"stories\",\"prompt\":\"x\",\"raw\":true,\"system\":\"s\"}", 400,
           "raw mode does not support template, system, or context");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"top_logprobs\":21}", 400,
           "top_logprobs must be between 0 and 20");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"think\":true}", 400,
           "\\\"stories\\\" does not support thinking");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"think\":\"huge\"}", 400,
           "invalid think value");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"format\":\"yaml\"}", 400,
           "invalid format");
    expect("/api/generate",
           "{\"model\":\"stories\",\"prompt\":\"x\",\"options\":{\"top_k\":\"many\"}}", 500,
           "option \\\"top_k\\\" must be of type integer");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"options\":{\"stop\":[1]}}",
           500, "must be of type");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"keep_alive\":\"300\"}", 400,
           "time: missing unit in duration \\\"300\\\"");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"keep_alive\":true}", 400,
           "Unsupported type");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"images\":[\"aGk=\"]}", 400,
           "does not support vision");
    expect("/api/chat",
           "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
           "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
           400, "registry.ollama.ai/library/stories:latest does not support tools");
    expect("/api/generate", "{\"model\":\"stories\",\"prompt\":\"x\",\"suffix\":\"y\"}", 400,
           "does not support insert");
    // Unknown options are ignored; think:false is accepted for any model.
    expect("/api/generate",
           "{\"model\":\"stories\",\"prompt\":\"x\",\"stream\":false,\"think\":false,"
           "\"options\":{\"num_predict\":1,\"bogus\":1}}",
           200, "\"done\":true");
}

static void test_load_unload_and_ps(void **state)
{
    (void)state;
    expect("/api/generate", "{\"model\":\"stories\"}", 200, "\"done_reason\":\"load\"");
    struct http_resp r;
    assert_int_equal(harness_request(&srv, "GET", "/api/ps", NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"name\":\"stories:latest\""));
    assert_non_null(strstr(r.body, "\"size_vram\":0"));
    assert_non_null(strstr(r.body, "\"context_length\":"));
    assert_non_null(strstr(r.body, "\"expires_at\":"));
    http_resp_free(&r);
    expect("/api/chat", "{\"model\":\"stories\",\"messages\":[],\"keep_alive\":0}", 200,
           "\"done_reason\":\"unload\"");
    // Unloaded right away (nothing is using it).
    bool gone = false;
    for (int i = 0; i < 50 && !gone; i++) {
        assert_int_equal(harness_request(&srv, "GET", "/api/ps", NULL, NULL, &r), 0);
        gone = strcmp(r.body, "{\"models\":[]}") == 0;
        http_resp_free(&r);
        if (!gone)
            harness_sleep_ms(100);
    }
    assert_true(gone);
    // keep_alive "1s": loaded, then expires by itself.
    expect("/api/generate",
           "{\"model\":\"stories\",\"prompt\":\"x\",\"keep_alive\":\"1s\",\"stream\":false,"
           "\"options\":{\"num_predict\":1}}",
           200, "\"done\":true");
    assert_int_equal(harness_request(&srv, "GET", "/api/ps", NULL, NULL, &r), 0);
    assert_non_null(strstr(r.body, "stories:latest"));
    http_resp_free(&r);
    gone = false;
    for (int i = 0; i < 60 && !gone; i++) {
        harness_sleep_ms(100);
        assert_int_equal(harness_request(&srv, "GET", "/api/ps", NULL, NULL, &r), 0);
        gone = strcmp(r.body, "{\"models\":[]}") == 0;
        http_resp_free(&r);
    }
    assert_true(gone);
}

static void test_embed(void **state)
{
    (void)state;
    struct http_resp r;
    post("/api/embed", "{\"model\":\"stories\",\"input\":[\"hello there\",\"a cat\"]}", &r);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    json_t *embs = json_object_get(v, "embeddings");
    assert_int_equal(json_array_size(embs), 2);
    for (size_t k = 0; k < 2; k++) {
        json_t *vec = json_array_get(embs, k);
        assert_int_equal(json_array_size(vec), 64);  // n_embd of stories260K
        double norm = 0;
        for (size_t i = 0; i < json_array_size(vec); i++)
            norm += json_number_value(json_array_get(vec, i)) *
                    json_number_value(json_array_get(vec, i));
        assert_true(norm > 0.999 && norm < 1.001);  // L2-normalised
    }
    assert_true(json_integer_value(json_object_get(v, "prompt_eval_count")) > 0);
    json_decref(v);
    http_resp_free(&r);

    post("/api/embed", "{\"model\":\"stories\",\"input\":\"hello\",\"dimensions\":8}", &r);
    v = parse(r.body);
    assert_int_equal(json_array_size(json_array_get(json_object_get(v, "embeddings"), 0)), 8);
    json_decref(v);
    http_resp_free(&r);

    expect("/api/embed", "{\"model\":\"stories\",\"input\":[1]}", 400, "invalid input type");
    expect("/api/embed", "{\"model\":\"stories\",\"input\":[]}", 200, "\"embeddings\":[]");
    expect("/api/embeddings", "{\"model\":\"stories\",\"prompt\":\"hi\"}", 200, "\"embedding\":[");
    expect("/api/embeddings", "{\"model\":\"nope\",\"prompt\":\"hi\"}", 404,
           "model \\\"nope\\\" not found, try pulling it first");
}

// --- concurrency ---------------------------------------------------------------

struct chat_job {
    char *text;
    long status;
};

static void *chat_thread(void *arg)
{
    struct chat_job *job = arg;
    struct http_resp r;
    const char *body = "{\"model\":\"stories\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"Once upon a time\"}],\"stream\":false,\"options\":{\"num_predict\":24}}";
    if (harness_request(&srv, "POST", "/api/chat", NULL, body, &r) == 0) {
        job->status = r.status;
        json_t *v = NULL;
        if (jsonx_parse(r.body, r.body_len, &v, NULL) == 0) {
            const char *c =
                json_string_value(json_object_get(json_object_get(v, "message"), "content"));
            job->text = c ? xstrdup(c) : NULL;
            json_decref(v);
        }
    }
    http_resp_free(&r);
    return NULL;
}

static void test_parallel_chats(void **state)
{
    (void)state;
    // 8 concurrent greedy chats on 4 slots: all complete with the same text
    // as a lone request.
    struct chat_job solo = {0};
    chat_thread(&solo);
    assert_int_equal(solo.status, 200);
    assert_non_null(solo.text);
    struct chat_job jobs[8] = {0};
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, chat_thread, &jobs[i]);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(jobs[i].status, 200);
        assert_non_null(jobs[i].text);
        assert_string_equal(jobs[i].text, solo.text);
        free(jobs[i].text);
    }
    free(solo.text);
}

// Reads a streamed generate until n lines arrived, then hangs up.
struct partial_read {
    int lines_wanted, lines;
    char last[4096];
};

static size_t partial_cb(char *p, size_t size, size_t n, void *ctx)
{
    struct partial_read *pr = ctx;
    for (size_t i = 0; i < size * n; i++)
        if (p[i] == '\n')
            pr->lines++;
    size_t len = size * n < sizeof(pr->last) - 1 ? size * n : sizeof(pr->last) - 1;
    memcpy(pr->last, p, len);
    pr->last[len] = '\0';
    return pr->lines >= pr->lines_wanted ? 0 : size * n;
}

static int stream_lines(const char *body, int lines_wanted, struct partial_read *pr)
{
    memset(pr, 0, sizeof(*pr));
    pr->lines_wanted = lines_wanted;
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof(url), "%s/api/generate", srv.base_url);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, partial_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, pr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    return (int)cc;
}

static void test_client_disconnect(void **state)
{
    (void)state;
    // Hang up after 3 pieces of an endless generation: the slot is freed and
    // the next requests are served promptly (4 of them fill every slot).
    for (int i = 0; i < 4; i++) {
        struct partial_read pr;
        stream_lines("{\"model\":\"stories\",\"prompt\":\"Once upon a time\","
                     "\"options\":{\"num_predict\":-1,\"temperature\":1}}",
                     3, &pr);
        assert_true(pr.lines >= 3);
    }
    int64_t t0 = time_monotonic_ns();
    expect("/api/generate",
           "{\"model\":\"stories\",\"prompt\":\"Once\",\"stream\":false,\"options\":{\"num_"
           "predict\":4}}",
           200, "\"done\":true");
    // Generous bound: only a leaked slot would make this wait for minutes.
    assert_true(time_monotonic_ns() - t0 < 60LL * 1000000000);
}

struct killer {
    int delay_ms;
};

static void *kill_runner_later(void *arg)
{
    struct killer *k = arg;
    harness_sleep_ms(k->delay_ms);
    pid_t pid = harness_runner_pid(&srv);
    if (pid > 0)
        kill(pid, SIGKILL);
    return NULL;
}

static void test_runner_killed(void **state)
{
    (void)state;
    expect("/api/generate", "{\"model\":\"stories\"}", 200, "\"done_reason\":\"load\"");
    pid_t before = harness_runner_pid(&srv);
    assert_true(before > 0);
    // Kill it in the middle of an endless stream: the stream ends with
    // Ollama's error line, the server keeps serving, the next request loads
    // a fresh runner.
    struct killer k = {.delay_ms = 500};
    pthread_t th;
    pthread_create(&th, NULL, kill_runner_later, &k);
    struct partial_read pr;
    stream_lines("{\"model\":\"stories\",\"prompt\":\"Once upon a time\","
                 "\"options\":{\"num_predict\":-1,\"temperature\":1}}",
                 1000000, &pr);
    pthread_join(th, NULL);
    assert_non_null(strstr(pr.last, "model runner has unexpectedly stopped"));
    expect("/api/generate",
           "{\"model\":\"stories\",\"prompt\":\"Once\",\"stream\":false,\"options\":{\"num_"
           "predict\":2}}",
           200, "\"done\":true");
    pid_t after = harness_runner_pid(&srv);
    assert_true(after > 0 && after != before);
}

// `ollama create name -f modelfile` against the server; its exit status, and
// its stderr in err (when not NULL).
static int cli_create(const char *name, const char *modelfile, struct buf *err)
{
    char err_path[] = "/tmp/it-create-err-XXXXXX";
    int fe = mkstemp(err_path);
    assert_true(fe >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fe, 2);
        setenv("OLLAMA_HOST", srv.host, 1);
        execl(harness_bin(), "ollama", "create", name, "-f", modelfile, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (err)
        fs_read_all(err_path, 1 << 20, err, NULL);
    close(fe);
    unlink(err_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The tokens /api/generate returns in "context" after the prompt's n_prompt.
static void greedy_after(const char *model, size_t n_prompt, int32_t *out, size_t n)
{
    char *body = xasprintf("{\"model\":\"%s\",\"prompt\":\"Hello, world!\","
                           "\"template\":\"{{ .Prompt }}\","
                           "\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":%zu}}",
                           model, n);
    struct http_resp r;
    post("/api/generate", body, &r);
    free(body);
    if (r.status != 200)
        fail_msg("generate %s: %ld %s", model, r.status, r.body);
    json_t *v = parse(r.body), *ctx = json_object_get(v, "context");
    assert_int_equal(json_array_size(ctx), n_prompt + n);
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)json_integer_value(json_array_get(ctx, n_prompt + i));
    json_decref(v);
    http_resp_free(&r);
}

// Modelfile ADAPTER through `ollama create`: tiny-qwen2 with its LoRA
// adapter generates llama.cpp's greedy tokens with the adapter (shared
// fixtures, tiny-qwen2-lora.reference.json), the same model without it the
// base model's (the scheduler reloads when the adapters differ), and an
// adapter for another architecture is refused at create.
static void test_lora_adapter(void **state)
{
    (void)state;
    char base[1024], lora[1024], mf[600];
    if (!test_shared_fixture(base, sizeof(base), "tiny-qwen2-f32.gguf") ||
        !test_shared_fixture(lora, sizeof(lora), "tiny-qwen2-lora-f32.gguf"))
        skip();
    const struct {
        const char *name, *from, *adapter;
        int status;
    } models[] = {
        {"qwen2-lora", base, lora, 0},
        {"qwen2-base", base, NULL, 0},
        {"stories-lora", stories_path, lora, 1},
    };
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        snprintf(mf, sizeof(mf), "%s/Modelfile.%s", srv.tmp_dir, models[i].name);
        FILE *f = fopen(mf, "w");
        assert_non_null(f);
        fprintf(f, "FROM %s\n", models[i].from);
        if (models[i].adapter)
            fprintf(f, "ADAPTER %s\n", models[i].adapter);
        fclose(f);
        struct buf err;
        buf_init(&err, 0);
        int st = cli_create(models[i].name, mf, &err);
        if (st != models[i].status)
            fail_msg("create %s: exit %d: %s", models[i].name, st, buf_cstr(&err));
        if (st != 0)
            assert_non_null(strstr(buf_cstr(&err), "model arch and LoRA arch mismatch"));
        buf_deinit(&err);
    }
    expect("/api/generate", "{\"model\":\"stories-lora\"}", 404, "not found");
    // "Hello, world!" is [9707, 11, 1879, 0]; greedy with the adapter
    // 8184 80241 14647, without it 49774 3192 141201.
    const int32_t with[3] = {8184, 80241, 14647}, without[3] = {49774, 3192, 141201};
    const char *order[] = {"qwen2-lora", "qwen2-base"};
    for (size_t i = 0; i < 2; i++) {
        int32_t got[3];
        greedy_after(order[i], 4, got, 3);
        assert_memory_equal(got, i == 1 ? without : with, sizeof(got));
    }
    expect("/api/generate", "{\"model\":\"qwen2-base\",\"keep_alive\":0}", 200, "unload");
}

// Uploads a file as a blob; its digest hex into hex.
static void upload_blob(const char *path, char hex[DIGEST_HEX_LEN + 1])
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(path, 1u << 30, &b, NULL), 0);
    sha256_hex(b.data, b.len, hex);
    char url[512];
    snprintf(url, sizeof(url), "%s/api/blobs/sha256:%s", srv.base_url, hex);
    struct http_resp r;
    assert_int_equal(http_request(url, "POST", NULL, b.data, b.len, 0, &r), 0);
    assert_true(r.status == 200 || r.status == 201);
    http_resp_free(&r);
    buf_deinit(&b);
}

// Greedy generation of "Describe [img-0] in detail." with the picture:
// the sampled tokens' texts (logprobs) must repeat exactly where
// llama.cpp's greedy ids (want) repeat; n_prompt prompt tokens (Gemma 3:
// 11 + 4 + 11).
static void check_vision_generate(const char *model, const char *b64, const json_t *want,
                                  int n_prompt)
{
    char *body = xasprintf(
        "{\"model\":\"%s\",\"raw\":true,\"stream\":false,"
        "\"logprobs\":true,\"prompt\":\"Describe [img-0] in detail.\",\"images\":[\"%s\"],"
        "\"options\":{\"num_predict\":16,\"num_ctx\":2048,\"temperature\":0}}",
        model, b64);
    struct http_resp r;
    post("/api/generate", body, &r);
    free(body);
    if (r.status != 200)
        fail_msg("vision generate: %ld %s", r.status, r.body);
    json_t *v = parse(r.body);
    const json_t *lp = json_object_get(v, "logprobs");
    size_t ng = json_array_size(want);
    if (json_array_size(lp) != ng)
        fail_msg("want %zu logprobs: %s", ng, r.body);
    for (size_t g = 0; g < ng; g++)
        for (size_t h = 0; h < ng; h++) {
            const char *a = json_string_value(json_object_get(json_array_get(lp, g), "token"));
            const char *b = json_string_value(json_object_get(json_array_get(lp, h), "token"));
            bool same_id = json_integer_value(json_array_get(want, g)) ==
                           json_integer_value(json_array_get(want, h));
            if (same_id != (strcmp(a, b) == 0))
                fail_msg("greedy tokens %zu and %zu differ from llama.cpp's: %s", g, h, r.body);
        }
    assert_int_equal(json_integer_value(json_object_get(v, "prompt_eval_count")), n_prompt);
    json_decref(v);
    http_resp_free(&r);
}

// prompt_eval_count of one greedy token after "Describe [img-0] in detail."
// with the picture (the tokens evaluated beyond the cached prefix).
static json_int_t vision_prompt_evals(const char *model, const char *b64)
{
    char *body = xasprintf("{\"model\":\"%s\",\"raw\":true,\"stream\":false,"
                           "\"prompt\":\"Describe [img-0] in detail.\",\"images\":[\"%s\"],"
                           "\"options\":{\"num_predict\":1,\"num_ctx\":2048,\"temperature\":0}}",
                           model, b64);
    struct http_resp r;
    post("/api/generate", body, &r);
    free(body);
    assert_int_equal(r.status, 200);
    json_t *v = parse(r.body);
    json_int_t n = json_integer_value(json_object_get(v, "prompt_eval_count"));
    json_decref(v);
    http_resp_free(&r);
    return n;
}

// The greedy tokens of a vision reference's F16-cache case for prompt 0.
static json_t *vision_want(json_t *ref, const char *image)
{
    for (size_t i = 0; i < json_array_size(json_object_get(ref, "cases")); i++) {
        json_t *c = json_array_get(json_object_get(ref, "cases"), i);
        if (!strcmp(json_string_value(json_object_get(c, "image")), image) &&
            !strcmp(json_string_value(json_object_get(c, "kv_cache_type")), "f16") &&
            json_integer_value(json_object_get(c, "prompt_index")) == 0)
            return json_object_get(c, "greedy_tokens");
    }
    return NULL;
}

// What Ollama 0.33 gets for the 128 x 96 picture in a Qwen-VL model: it
// starts llama-server with --image-min-tokens 1024 for these families, so the
// picture becomes 37 x 28 image tokens (tests/fixtures/vision/
// qwen-min-tokens.json, recorded from llama-server v0.5.0 by the script
// beside it). The greedy ids (json_decref *doc when done) and the prompt size.
static json_t *qwen_min_tokens_want(const char *family, json_t **doc, int *n_prompt)
{
    char path[512];
    test_fixture(path, sizeof path, "vision/qwen-min-tokens.json");
    *doc = json_load_file(path, 0, NULL);
    assert_non_null(*doc);
    json_t *f = json_object_get(*doc, family);
    assert_non_null(f);
    *n_prompt = (int)json_integer_value(json_object_get(f, "prompt_tokens"));
    return json_object_get(f, "greedy_tokens");
}

// A picture file as base64 (b64 initialized here; the caller frees it).
static void read_b64(const char *path, struct buf *b64)
{
    struct buf png;
    buf_init(&png, 0);
    buf_init(b64, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &png, NULL), 0);
    base64_encode(png.data, png.len, b64);
    buf_deinit(&png);
}

// Qwen2.5-VL in Ollama's monolithic layout: the 128 x 96 picture, scaled up
// to at least 1024 image tokens as Ollama has llama-server do it (windows,
// M-RoPE positions), gives llama-server's greedy continuation and prompt
// size (22 + 1036 + 18 tokens).
static void check_qwen25vl(void)
{
    char model[512], img[512];
    if (!test_shared_fixture(model, sizeof model, "tiny-qwen25vl-ollama-f32.gguf") ||
        !test_shared_fixture(img, sizeof img, "images/gradient-128x96.png"))
        return;
    assert_int_equal(models_create(&srv, "qwen25v", model, "\"parameters\":{\"temperature\":0}"),
                     0);
    expect("/api/show", "{\"model\":\"qwen25v\"}", 200, "\"vision\"");
    struct buf b64;
    read_b64(img, &b64);
    json_t *doc;
    int n_prompt;
    json_t *want = qwen_min_tokens_want("qwen25vl", &doc, &n_prompt);
    check_vision_generate("qwen25v", buf_cstr(&b64), want, n_prompt);
    json_decref(doc);
    buf_deinit(&b64);
}

// Mistral 3 (Pixtral) as a split pair (text GGUF + mmproj through
// /api/create): the 128 x 96 picture (8 x 6 tokens + 5 [IMG_BREAK] rows; 9 + 53 + 17
// prompt tokens)
// gives llama.cpp's greedy continuation.
static void check_mistral3vl(void)
{
    char path[512], img[512], refp[512], hex1[DIGEST_HEX_LEN + 1], hex2[DIGEST_HEX_LEN + 1];
    if (!test_shared_fixture(path, sizeof path, "tiny-mistral3vl-f32.gguf") ||
        !test_shared_fixture(img, sizeof img, "images/gradient-128x96.png") ||
        !test_shared_fixture(refp, sizeof refp, "tiny-mistral3vl-vision.reference.json"))
        return;
    upload_blob(path, hex1);
    assert_non_null(test_shared_fixture(path, sizeof path, "tiny-mistral3vl-mmproj-f32.gguf"));
    upload_blob(path, hex2);
    char *body = xasprintf("{\"model\":\"mistral3v\",\"stream\":false,\"files\":{"
                           "\"model.gguf\":\"sha256:%s\",\"mmproj.gguf\":\"sha256:%s\"}}",
                           hex1, hex2);
    expect("/api/create", body, 200, NULL);
    free(body);
    struct buf b64;
    read_b64(img, &b64);
    json_t *ref = json_load_file(refp, 0, NULL);
    json_t *want = vision_want(ref, "images/gradient-128x96.png");
    assert_non_null(want);
    check_vision_generate("mistral3v", buf_cstr(&b64), want, 79);
    json_decref(ref);
    buf_deinit(&b64);
}

// The greedy pattern of a response's logprobs against llama.cpp's ids:
// the tokens' bytes repeat exactly where the ids repeat (bytes, not texts:
// two byte tokens that are not UTF-8 both read "\ufffd").
static void check_greedy_pattern(const json_t *lp, const json_t *want, const char *body)
{
    size_t ng = json_array_size(want);
    if (json_array_size(lp) != ng)
        fail_msg("want %zu logprobs: %s", ng, body);
    for (size_t g = 0; g < ng; g++)
        for (size_t h = 0; h < ng; h++) {
            const json_t *a = json_object_get(json_array_get(lp, g), "bytes");
            const json_t *b = json_object_get(json_array_get(lp, h), "bytes");
            bool same_id = json_integer_value(json_array_get(want, g)) ==
                           json_integer_value(json_array_get(want, h));
            if (!a || !b || same_id != (json_equal(a, b) != 0))
                fail_msg("greedy tokens %zu and %zu differ from llama.cpp's: %s", g, h, body);
        }
}

// Qwen3-VL as a split pair (text GGUF + mmproj through /api/create, the
// template "{{ .Prompt }}"), the picture through /api/chat: "[img]" in the
// message becomes the picture, so the prompt is the reference's
// "Describe <__media__> in detail."; the 128 x 96 picture, at least 1024
// image tokens as Ollama has llama-server make it (interleaved M-RoPE,
// deepstack rows), gives llama-server's greedy continuation and prompt size.
static void check_qwen3vl(void)
{
    char path[512], img[512], hex1[DIGEST_HEX_LEN + 1], hex2[DIGEST_HEX_LEN + 1];
    if (!test_shared_fixture(path, sizeof path, "tiny-qwen3vl-f32.gguf") ||
        !test_shared_fixture(img, sizeof img, "images/gradient-128x96.png"))
        return;
    upload_blob(path, hex1);
    assert_non_null(test_shared_fixture(path, sizeof path, "tiny-qwen3vl-mmproj-f32.gguf"));
    upload_blob(path, hex2);
    char *body =
        xasprintf("{\"model\":\"qwen3v\",\"stream\":false,\"template\":\"{{ .Prompt }}\","
                  "\"files\":{\"model.gguf\":\"sha256:%s\",\"mmproj.gguf\":\"sha256:%s\"}}",
                  hex1, hex2);
    expect("/api/create", body, 200, NULL);
    free(body);
    expect("/api/show", "{\"model\":\"qwen3v\"}", 200, "\"vision\"");
    struct buf png, b64;
    buf_init(&png, 0);
    buf_init(&b64, 0);
    assert_int_equal(fs_read_all(img, 1 << 20, &png, NULL), 0);
    base64_encode(png.data, png.len, &b64);
    json_t *doc;
    int n_prompt;
    json_t *want = qwen_min_tokens_want("qwen3vl", &doc, &n_prompt);
    body = xasprintf("{\"model\":\"qwen3v\",\"stream\":false,\"logprobs\":true,"
                     "\"messages\":[{\"role\":\"user\",\"content\":\"Describe [img] in detail.\","
                     "\"images\":[\"%s\"]}],"
                     "\"options\":{\"num_predict\":16,\"num_ctx\":2048,\"temperature\":0}}",
                     buf_cstr(&b64));
    struct http_resp r;
    post("/api/chat", body, &r);
    free(body);
    if (r.status != 200)
        fail_msg("vision chat: %ld %s", r.status, r.body);
    json_t *v = parse(r.body);
    check_greedy_pattern(json_object_get(v, "logprobs"), want, r.body);
    assert_int_equal(json_integer_value(json_object_get(v, "prompt_eval_count")), n_prompt);
    json_decref(v);
    http_resp_free(&r);
    json_decref(doc);
    buf_deinit(&png);
    buf_deinit(&b64);
}

// Images for real (issue 44): Ollama's monolithic tiny Gemma 3 (tower
// inside) sees a picture sent as base64; the greedy continuation is
// llama.cpp's (tiny-gemma3-vision.reference.json, the F16-cache case of
// "Describe <__media__> in detail." with gradient-32x32.png). The picture
// as an OpenAI data URL works; a plain URL, a corrupt picture are 400s;
// the text-only model refuses pictures.
static void check_vision_cache(const char *b64)
{
    // The prompt cache: the same picture again reuses the whole prompt; a
    // different picture only the text before it (11 tokens).
    assert_true(vision_prompt_evals("gemma3v", b64) < 15);
    char img2[512];
    assert_non_null(test_shared_fixture(img2, sizeof img2, "images/gradient-48x40.png"));
    struct buf b64b;
    read_b64(img2, &b64b);
    assert_int_equal(vision_prompt_evals("gemma3v", buf_cstr(&b64b)), 15);
    buf_deinit(&b64b);
}

static void check_vision_split(const char *b64, json_t *want)
{
    // The split pair: text GGUF + mmproj GGUF in one create (a projector
    // layer), the same reference.
    char path2[512], hex1[DIGEST_HEX_LEN + 1], hex2[DIGEST_HEX_LEN + 1];
    assert_non_null(test_shared_fixture(path2, sizeof path2, "tiny-gemma3-f32.gguf"));
    upload_blob(path2, hex1);
    assert_non_null(test_shared_fixture(path2, sizeof path2, "tiny-gemma3-mmproj-f32.gguf"));
    upload_blob(path2, hex2);
    char *body = xasprintf("{\"model\":\"gemma3split\",\"stream\":false,\"files\":{"
                           "\"model.gguf\":\"sha256:%s\",\"mmproj.gguf\":\"sha256:%s\"}}",
                           hex1, hex2);
    expect("/api/create", body, 200, NULL);
    free(body);
    expect("/api/show", "{\"model\":\"gemma3split\"}", 200, "\"vision\"");
    check_vision_generate("gemma3split", b64, want, 26);
}

static void check_vision_compat(const char *b64)
{
    char *body;
    // The same picture through /v1/chat/completions as a data URL (a
    // templated prompt: only that it is answered is checked).
    body = xasprintf("{\"model\":\"gemma3v\",\"max_tokens\":2,\"temperature\":0,"
                     "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                     "\"text\":\"Describe\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
                     "\"data:image/png;base64,%s\"}}]}]}",
                     b64);
    expect("/v1/chat/completions", body, 200, "\"choices\"");
    free(body);
    // ... as an Anthropic image block and a Responses input_image.
    body = xasprintf("{\"model\":\"gemma3v\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\","
                     "\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"base64\","
                     "\"media_type\":\"image/png\",\"data\":\"%s\"}},{\"type\":\"text\","
                     "\"text\":\"Describe\"}]}]}",
                     b64);
    expect("/v1/messages", body, 200, "\"content\"");
    free(body);
    body = xasprintf("{\"model\":\"gemma3v\",\"max_output_tokens\":2,\"input\":[{\"role\":"
                     "\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":"
                     "\"data:image/png;base64,%s\"},{\"type\":\"input_text\",\"text\":"
                     "\"Describe\"}]}]}",
                     b64);
    expect("/v1/responses", body, 200, "\"output\"");
    free(body);
}

// Pictures Ollama refuses, with its wording.
static void check_vision_errors(const char *b64)
{
    char *body;
    // A plain URL: Ollama's error.
    expect("/v1/chat/completions",
           "{\"model\":\"gemma3v\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
           "\"image_url\",\"image_url\":{\"url\":\"https://example.com/cat.png\"}}]}]}",
           400, "image URLs are not currently supported");
    // A chat message with a corrupt picture.
    expect("/api/chat",
           "{\"model\":\"gemma3v\",\"stream\":false,\"messages\":[{\"role\":\"user\","
           "\"content\":\"what is this?\",\"images\":[\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB\"]}]}",
           400, "failed to decode image");
    // A decompression bomb (a 20000 x 20000 PNG header), refused before
    // anything is allocated.
    expect("/api/chat",
           "{\"model\":\"gemma3v\",\"stream\":false,\"messages\":[{\"role\":\"user\","
           "\"content\":\"x\",\"images\":[\"iVBORw0KGgoAAAANSUhEUgAATiAAAE4gCAIAAABsEtFuAAAAAElE"
           "QVQ1rwYeAAAAAElFTkSuQmCC\"]}]}",
           400, "image too large: 20000x20000");
    // Pictures that do not fit the context are refused, never cut.
    body = xasprintf("{\"model\":\"gemma3v\",\"raw\":true,\"stream\":false,\"prompt\":"
                     "\"Describe [img-0] in detail.\",\"images\":[\"%s\"],\"options\":"
                     "{\"num_ctx\":16}}",
                     b64);
    expect("/api/generate", body, 400, "more than the context length");
    free(body);
    // A text-only model refuses pictures (Ollama's wording).
    body = xasprintf("{\"model\":\"stories\",\"prompt\":\"x\",\"images\":[\"%s\"]}", b64);
    expect("/api/generate", body, 400, "does not support vision");
    free(body);
}

static void test_vision(void **state)
{
    (void)state;
    char model[512], img[512], refp[512];
    if (!test_shared_fixture(model, sizeof model, "tiny-gemma3-vision-ollama-f32.gguf") ||
        !test_shared_fixture(img, sizeof img, "images/gradient-32x32.png") ||
        !test_shared_fixture(refp, sizeof refp, "tiny-gemma3-vision.reference.json")) {
        printf("skip: shared fixtures absent\n");
        return;
    }
    assert_int_equal(models_create(&srv, "gemma3v", model, "\"parameters\":{\"temperature\":0}"),
                     0);
    struct buf b64;
    read_b64(img, &b64);
    json_t *ref = json_load_file(refp, 0, NULL);
    json_t *want = vision_want(ref, "images/gradient-32x32.png");
    assert_non_null(want);
    check_vision_generate("gemma3v", buf_cstr(&b64), want, 26);
    check_vision_cache(buf_cstr(&b64));
    check_vision_split(buf_cstr(&b64), want);
    check_vision_compat(buf_cstr(&b64));
    check_vision_errors(buf_cstr(&b64));
    json_decref(ref);
    buf_deinit(&b64);
    check_qwen25vl();
    check_mistral3vl();
    check_qwen3vl();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_not_streamed),
        cmocka_unit_test(test_generate_streamed),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_stop_and_options),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_load_unload_and_ps),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_parallel_chats),
        cmocka_unit_test(test_client_disconnect),
        cmocka_unit_test(test_runner_killed),
        cmocka_unit_test(test_vision),
        cmocka_unit_test(test_lora_adapter),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

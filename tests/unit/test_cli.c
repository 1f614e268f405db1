// Golden-output tests of the CLI's layout (spec/cli.md): list/ps tables, show
// sections, human numbers, progress bars and spinners, the verbose stats
// block, word wrap; and the API client against a tiny fake HTTP server
// (error surfacing, NDJSON streams, the pull progress a user sees).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/internal.h"
#include "client/client.h"

static void assert_buf(struct buf *b, const char *want)
{
    assert_string_equal(buf_cstr(b), want);
    buf_reset(b);
}

static void test_table_list(void **state)
{
    (void)state;
    struct cli_table t;
    cli_table_init(&t, 4);
    const char *h[4] = {"NAME", "ID", "SIZE", "MODIFIED"};
    const char *r[4] = {"model1", "sha256:abc12", "1.0 KB", "24 hours ago"};
    cli_table_add(&t, h);
    cli_table_add(&t, r);
    struct buf b;
    buf_init(&b, 0);
    cli_table_render_list(&t, &b);
    assert_buf(&b, "NAME      ID              SIZE      MODIFIED     \n"
                   "model1    sha256:abc12    1.0 KB    24 hours ago    \n");
    cli_table_deinit(&t);

    // Header only when there are no models.
    cli_table_init(&t, 4);
    cli_table_add(&t, h);
    cli_table_render_list(&t, &b);
    assert_buf(&b, "NAME    ID    SIZE    MODIFIED \n");
    cli_table_deinit(&t);

    // The ps example of cli.md §3.9.
    cli_table_init(&t, 6);
    const char *ph[6] = {"NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"};
    const char *p1[6] = {"llama3:70b", "bcfb190ca3a7", "42 GB",
                         "100% GPU",   "4096",         "4 minutes from now"};
    const char *p2[6] = {"qwen3:14b",       "bdbd181c33f2", "9.6 GB",
                         "48%/52% CPU/GPU", "8192",         "Forever"};
    cli_table_add(&t, ph);
    cli_table_add(&t, p1);
    cli_table_add(&t, p2);
    cli_table_render_list(&t, &b);
    assert_buf(&b,
               "NAME          ID              SIZE      PROCESSOR          CONTEXT    UNTIL     "
               "         \n"
               "llama3:70b    bcfb190ca3a7    42 GB     100% GPU           4096       4 minutes "
               "from now    \n"
               "qwen3:14b     bdbd181c33f2    9.6 GB    48%/52% CPU/GPU    8192       Forever   "
               "            \n");
    cli_table_deinit(&t);
    buf_deinit(&b);
}

static void test_numbers(void **state)
{
    (void)state;
    char s[32];
    cli_human_number(8000000000ull, s, sizeof(s));
    assert_string_equal(s, "8B");
    cli_human_number(8030261248ull, s, sizeof(s));
    assert_string_equal(s, "8.0B");
    cli_human_number(137000000ull, s, sizeof(s));
    assert_string_equal(s, "137M");
    cli_human_number(22570000ull, s, sizeof(s));
    assert_string_equal(s, "22.57M");
    cli_human_number(292864ull, s, sizeof(s));
    assert_string_equal(s, "293K");
    cli_human_number(999ull, s, sizeof(s));
    assert_string_equal(s, "999");

    cli_processor(100, 0, s, sizeof(s));
    assert_string_equal(s, "100% CPU");
    cli_processor(100, 100, s, sizeof(s));
    assert_string_equal(s, "100% GPU");
    cli_processor(100, 200, s, sizeof(s));
    assert_string_equal(s, "Unknown");
    cli_processor(0, 5, s, sizeof(s));
    assert_string_equal(s, "Unknown");
    cli_processor(1000, 520, s, sizeof(s));
    assert_string_equal(s, "48%/52% CPU/GPU");

    cli_eta_format(236, s, sizeof(s));
    assert_string_equal(s, "3m56s");
    cli_eta_format(5.4, s, sizeof(s));
    assert_string_equal(s, "5s");
    cli_eta_format(3700, s, sizeof(s));
    assert_string_equal(s, "1h1m");
    cli_eta_format(360000, s, sizeof(s));
    assert_string_equal(s, "99h+");

    // Relative times and sizes as the tables print them (util's formatters).
    int64_t now = 1700000000LL * 1000000000LL;
    time_format_relative(now - 3LL * 7 * 24 * 3600 * 1000000000LL, now, s, sizeof(s));
    assert_string_equal(s, "3 weeks ago");
    time_format_relative(now + 4LL * 60 * 1000000000LL + 500000000LL, now, s, sizeof(s));
    assert_string_equal(s, "4 minutes from now");
    time_format_relative(TIME_ZERO, now, s, sizeof(s));
    assert_string_equal(s, "Never");
    size_format_human(2019393189ull, s, sizeof(s));
    assert_string_equal(s, "2.0 GB");
    size_format_human(96, s, sizeof(s));
    assert_string_equal(s, "96 B");

    static const struct {
        double v;
        const char *want;
    } floats[] = {{0.7, "0.7"},
                  {4096, "4096"},
                  {131072, "131072"},
                  {1e-05, "1e-05"},
                  {1000000, "1e+06"},
                  {1048576, "1.048576e+06"},
                  {4294967295.0, "4.294967295e+09"},
                  {-1, "-1"},
                  {0.0001, "0.0001"},
                  {0, "0"},
                  {123456.5, "123456.5"},
                  {1e21, "1e+21"}};
    for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); i++) {
        cli_go_float(floats[i].v, s, sizeof(s));
        assert_string_equal(s, floats[i].want);
    }

    assert_int_equal(cli_text_width("abc", 3), 3);
    assert_int_equal(cli_text_width("\xe4\xbd\xa0\xe5\xa5\xbd", 6), 4);  // two wide CJK
    assert_int_equal(cli_text_width("\xe2\x96\x88", 3), 1);              // a bar block
}

static void test_progress_lines(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    // Complete bar, 80 columns: the line of cli.md §3.6 (79 columns).
    cli_bar_render("pulling dde5aa3fc5ff:", 2019393189ull, 2019393189ull, -1, 80, &b);
    assert_string_equal(buf_cstr(&b),
                        "pulling dde5aa3fc5ff: 100% \u2595\u2588\u2588\u2588\u2588\u2588\u2588"
                        "\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
                        "\u2588\u258f 2.0 GB                         ");
    assert_int_equal(cli_text_width(b.data, b.len), 79);
    buf_reset(&b);
    cli_bar_render("pulling 56bb8bd477a5:", 96, 96, -1, 80, &b);
    assert_true(strstr(buf_cstr(&b), "\u258f   96 B") != NULL);
    buf_reset(&b);

    // Running with a known rate: sizes, rate and remaining time.
    cli_bar_render("pulling c1864a5eb193:", 586000000ull, 1700000000ull, 4600000.0, 80, &b);
    const char *s = buf_cstr(&b);
    assert_true(strncmp(s, "pulling c1864a5eb193:  34% \u2595", 29) == 0);
    assert_true(strstr(s, "\u258f 586 MB/1.7 GB  4.6 MB/s    4m2s") != NULL);
    assert_int_equal(cli_text_width(b.data, b.len), 79);
    buf_reset(&b);

    // No rate yet: blanks keep the width.
    cli_bar_render("pushing 74701a8c35f6", 0, 1000, -1, 80, &b);
    assert_true(cstr_ends_with(buf_cstr(&b), "\u258f    0 B/  1 KB                  "));
    assert_int_equal(cli_text_width(b.data, b.len), 79);
    buf_reset(&b);

    cli_bar_render_plain("pulling dde5aa3fc5ff:", 5, 10, &b);
    assert_buf(&b, "pulling dde5aa3fc5ff:  50% 10 B");

    cli_spinner_render("pulling manifest", 0, false, &b);
    assert_buf(&b, "pulling manifest \u280b ");
    cli_spinner_render("pulling manifest", 11, false, &b);
    assert_buf(&b, "pulling manifest \u2819 ");
    cli_spinner_render("success", 3, true, &b);
    assert_buf(&b, "success ");
    cli_spinner_render("", 9, false, &b);
    assert_buf(&b, "\u280f ");
    buf_deinit(&b);
}

static void test_stats(void **state)
{
    (void)state;
    json_t *final = json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I}", "done", 1, "total_duration",
                              (json_int_t)10706818083LL, "load_duration", (json_int_t)6338219291LL,
                              "prompt_eval_count", (json_int_t)26, "prompt_eval_duration",
                              (json_int_t)130079000, "eval_count", (json_int_t)259, "eval_duration",
                              (json_int_t)4232710000LL);
    struct buf b;
    buf_init(&b, 0);
    cli_stats_render(final, &b);
    assert_buf(&b, "total duration:       10.706818083s\n"
                   "load duration:        6.338219291s\n"
                   "prompt eval count:    26 token(s)\n"
                   "prompt eval duration: 130.079ms\n"
                   "prompt eval rate:     199.88 tokens/s\n"
                   "eval count:           259 token(s)\n"
                   "eval duration:        4.23271s\n"
                   "eval rate:            61.19 tokens/s\n");
    json_decref(final);
    // Zero values are left out.
    final =
        json_pack("{s:I,s:I}", "total_duration", (json_int_t)1500000, "eval_count", (json_int_t)0);
    cli_stats_render(final, &b);
    assert_buf(&b, "total duration:       1.5ms\n");
    json_decref(final);
    buf_deinit(&b);
}

static void test_word_wrap(void **state)
{
    (void)state;
    struct cli_wrap w;
    struct buf b;
    buf_init(&b, 0);
    cli_wrap_init(&w, true, 20);  // wraps once a line would pass 15 columns
    cli_wrap_feed(&w, "aaaa bbbb ccccccc", 17, &b);
    assert_buf(&b, "aaaa bbbb ccccc\x1b[5D\x1b[K\nccccccc");
    cli_wrap_reset(&w);
    // A break right after a space moves nothing; chunks keep their state.
    cli_wrap_feed(&w, "aaaa bbbb ", 10, &b);
    cli_wrap_feed(&w, "cccc dddd", 9, &b);
    assert_buf(&b, "aaaa bbbb cccc \x1b[K\ndddd");
    // A newline resets the line.
    cli_wrap_reset(&w);
    cli_wrap_feed(&w, "aaaaaaaaaaaa\nbbbbbbbbbbbb", 25, &b);
    assert_buf(&b, "aaaaaaaaaaaa\nbbbbbbbbbbbb");
    // A word longer than width-10 is broken where it is.
    cli_wrap_reset(&w);
    cli_wrap_feed(&w, "abcdefghijklmnopq", 17, &b);
    assert_buf(&b, "abcdefghijklmno\npq");
    cli_wrap_deinit(&w);

    // Off (or not a terminal): the text as it is.
    cli_wrap_init(&w, false, 20);
    cli_wrap_feed(&w, "aaaa bbbb cccc dddd eeee", 24, &b);
    assert_buf(&b, "aaaa bbbb cccc dddd eeee");
    cli_wrap_deinit(&w);
    buf_deinit(&b);
}

static void test_show_report(void **state)
{
    (void)state;
    const char *text =
        "{\"details\":{\"parameter_size\":\"3.2B\",\"quantization_level\":\"Q4_K_M\"},"
        "\"model_info\":{\"general.architecture\":\"llama\",\"llama.context_length\":131072,"
        "\"llama.embedding_length\":3072,\"general.parameter_count\":3212749888},"
        "\"capabilities\":[\"completion\",\"tools\"],"
        "\"parameters\":\"stop                           \\\"<|start_header_id|>\\\"\\n"
        "temperature                    0.6\","
        "\"license\":\"LLAMA 3.2 COMMUNITY LICENSE AGREEMENT\\nLlama 3.2 Version Release Date: "
        "September 25, 2024\\n\\nmore text\"}";
    json_t *show = NULL;
    assert_int_equal(jsonx_parse(text, strlen(text), &show, NULL), 0);
    struct buf b;
    buf_init(&b, 0);
    cli_show_report(show, false, &b);
    assert_buf(&b, "  Model\n"
                   "    architecture        llama     \n"
                   "    parameters          3.2B      \n"
                   "    context length      131072    \n"
                   "    embedding length    3072      \n"
                   "    quantization        Q4_K_M    \n"
                   "\n"
                   "  Capabilities\n"
                   "    completion    \n"
                   "    tools         \n"
                   "\n"
                   "  Parameters\n"
                   "    stop           \"<|start_header_id|>\"    \n"
                   "    temperature    0.6                      \n"
                   "\n"
                   "  License\n"
                   "    LLAMA 3.2 COMMUNITY LICENSE AGREEMENT                 \n"
                   "    Llama 3.2 Version Release Date: September 25, 2024    \n"
                   "    ...                                                   \n"
                   "\n");
    // -v adds the metadata, sorted, arrays abbreviated.
    json_object_set_new(json_object_get(show, "model_info"), "tokenizer.ggml.token_type",
                        json_pack("[iiiii]", 1, 2, 3, 4, 5));
    cli_show_report(show, true, &b);
    const char *s = buf_cstr(&b);
    assert_true(strstr(s, "  Metadata\n    general.architecture         llama") != NULL);
    assert_true(strstr(s, "[1 2 3 ...+2 more]") != NULL);
    buf_reset(&b);
    json_decref(show);

    // A cell wider than 30 columns wraps onto extra lines.
    struct cli_table t;
    cli_table_init(&t, 2);
    const char *row[2] = {"stop", "one two three four five six seven eight"};
    cli_table_add(&t, row);
    cli_table_render_section(&t, "Parameters", 30, &b);
    assert_buf(&b, "  Parameters\n"
                   "    stop    one two three four five six    \n"
                   "            seven eight                    \n"
                   "\n");
    cli_table_deinit(&t);
    buf_deinit(&b);
}

static void test_host_urls(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {NULL, "http://127.0.0.1:11434"},
        {"1.2.3.4", "http://1.2.3.4:11434"},
        {":1234", "http://127.0.0.1:1234"},
        {"0.0.0.0", "http://127.0.0.1:11434"},
        {"example.com:1234", "http://example.com:1234"},
        {"[::1]", "http://[::1]:11434"},
        {":66000", "http://127.0.0.1:11434"},
        {"http://1.2.3.4", "http://1.2.3.4:80"},
        {"https://1.2.3.4", "https://1.2.3.4:443"},
        {"https://example.com/ollama", "https://example.com:443/ollama"},
        {" \"127.0.0.1:9\" ", "http://127.0.0.1:9"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char url[600];
        assert_int_equal(client_url_from_host(cases[i][0], url, sizeof(url), NULL), 0);
        assert_string_equal(url, cases[i][1]);
    }
}

// ---------------------------------------------------------------------------
// A fake server: answers every connection with one canned response.

struct fake {
    int fd, port;
    const char *response;
    pthread_t thread;
    int n_requests;
    char last_request[4096];
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    for (;;) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        // Read the head and as much body as Content-Length says.
        char req[4096];
        size_t n = 0;
        ssize_t k;
        while (n < sizeof(req) - 1 && (k = read(c, req + n, sizeof(req) - 1 - n)) > 0) {
            n += (size_t)k;
            req[n] = '\0';
            char *end = strstr(req, "\r\n\r\n");
            if (!end)
                continue;
            const char *cl = strcasestr(req, "content-length:");
            size_t want = cl ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
            if (n - (size_t)(end + 4 - req) >= want)
                break;
        }
        req[n] = '\0';
        snprintf(f->last_request, sizeof(f->last_request), "%s", req);
        f->n_requests++;
        if (write(c, f->response, strlen(f->response)) < 0)
            perror("write");
        close(c);
    }
}

static void fake_start(struct fake *f, const char *response)
{
    memset(f, 0, sizeof(*f));
    f->response = response;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(f->fd, 8), 0);
    getsockname(f->fd, (struct sockaddr *)&a, &len);
    f->port = ntohs(a.sin_port);
    pthread_create(&f->thread, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
    shutdown(f->fd, SHUT_RDWR);
    close(f->fd);
    pthread_join(f->thread, NULL);
}

static struct client *fake_client(const struct fake *f)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->port);
    struct client *c = NULL;
    assert_int_equal(client_new(&c, url, NULL), 0);
    return c;
}

static void test_client_errors(void **state)
{
    (void)state;
    struct fake f;
    struct err e = {0};
    json_t *req = json_pack("{s:s}", "model", "foo");

    // Non-streaming: the server's message.
    fake_start(&f, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                   "Connection: close\r\n\r\n{\"error\":\"model 'foo' not found\"}");
    struct client *c = fake_client(&f);
    json_t *out = NULL;
    assert_int_equal(client_show(c, req, &out, &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "model 'foo' not found");
    assert_non_null(strstr(f.last_request, "POST /api/show"));
    assert_non_null(strstr(f.last_request, "User-Agent: ollama/" OLLAMA_VERSION " ("));
    assert_non_null(strstr(f.last_request, "Accept: application/json"));
    assert_non_null(strstr(f.last_request, "{\"model\":\"foo\"}"));
    client_free(c);
    fake_stop(&f);

    // Streaming with status >= 400: "<status line>: <error>".
    fake_start(&f, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                   "Connection: close\r\n\r\n{\"error\":\"llama runner process has terminated: "
                   "exit status 2\"}");
    c = fake_client(&f);
    err_clear(&e);
    assert_true(client_generate(c, req, NULL, NULL, &e) < 0);
    assert_string_equal(e.msg, "500 Internal Server Error: llama runner process has terminated: "
                               "exit status 2");
    assert_non_null(strstr(f.last_request, "Accept: application/x-ndjson"));
    client_free(c);
    fake_stop(&f);

    // An error line inside a 200 stream: just the message.
    fake_start(&f, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                   "Connection: close\r\n\r\n{\"status\":\"pulling manifest\"}\n"
                   "{\"error\":\"pull model manifest: file does not exist\"}\n");
    c = fake_client(&f);
    err_clear(&e);
    assert_true(client_pull(c, "foo", false, NULL, NULL, &e) < 0);
    assert_string_equal(e.msg, "pull model manifest: file does not exist");
    client_free(c);
    fake_stop(&f);

    // A body that is not JSON is printed as it is.
    fake_start(&f, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
                   "Connection: close\r\n\r\n404 page not found");
    c = fake_client(&f);
    err_clear(&e);
    assert_true(client_list(c, &out, &e) < 0);
    assert_string_equal(e.msg, "404 page not found");
    client_free(c);
    fake_stop(&f);

    // Nobody listening: Ollama's wording.
    int port = f.port;
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    assert_int_equal(client_new(&c, url, NULL), 0);
    err_clear(&e);
    assert_int_equal(client_heartbeat(c, &e), ERR_NETWORK);
    assert_string_equal(e.msg,
                        "could not connect to ollama server, run 'ollama serve' to start it");
    client_free(c);
    json_decref(req);
}

// The pull progress a user sees when stderr is not a terminal.
static void test_pull_progress(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f,
               "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n"
               "{\"status\":\"pulling manifest\"}\n"
               "{\"status\":\"pulling dde5aa3fc5ff\",\"digest\":\"sha256:dde5aa3fc5ffc17176b5e8bdc"
               "82f587b24b2678c6c66101bf7da77af9f7ccdff\",\"total\":2019377376}\n"
               "{\"status\":\"pulling dde5aa3fc5ff\",\"digest\":\"sha256:dde5aa3fc5ffc17176b5e8bdc"
               "82f587b24b2678c6c66101bf7da77af9f7ccdff\",\"total\":2019377376,\"completed\":1000}"
               "\n"
               "{\"status\":\"pulling dde5aa3fc5ff\",\"digest\":\"sha256:dde5aa3fc5ffc17176b5e8bdc"
               "82f587b24b2678c6c66101bf7da77af9f7ccdff\",\"total\":2019377376,\"completed\":"
               "2019377376}\n"
               "{\"status\":\"pulling 56bb8bd477a5\",\"digest\":\"sha256:56bb8bd477a519e5ab02f5b0"
               "b4fa1b5a1c5a0e45e6a8d8a44a1f1f3b4c3d2e1f\",\"total\":96,\"completed\":96}\n"
               "{\"status\":\"verifying sha256 digest\"}\n"
               "{\"status\":\"writing manifest\"}\n"
               "{\"status\":\"success\"}\n");
    struct client *c = fake_client(&f);
    char path[] = "/tmp/test_cli_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    struct err e = {0};
    int rc = cli_pull_model(c, "llama3.2", true, &e);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(f.last_request, "\"insecure\":true"));
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &out, NULL), 0);
    assert_string_equal(buf_cstr(&out), "pulling manifest\n"
                                        "pulling dde5aa3fc5ff: 100% 2.0 GB\n"
                                        "pulling 56bb8bd477a5: 100% 96 B\n"
                                        "verifying sha256 digest\n"
                                        "writing manifest\n"
                                        "success\n");
    buf_deinit(&out);
    close(fd);
    unlink(path);
    client_free(c);
    fake_stop(&f);
}

// The terminal rendering: redraws in place, final state, newline.
static void test_progress_tty(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    struct cli_progress *p = cli_progress_new(f, true);
    int s = cli_progress_spinner(p, "pulling manifest");
    (void)s;
    int bar = cli_progress_bar(p, "sha256:abc", "pulling abc:", 100);
    cli_progress_bar_set(p, bar, 100, 100);
    cli_progress_spinner(p, "success");
    cli_progress_stop(p);
    cli_progress_free(p);
    long n = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    // The last frame: synchronized output, hidden cursor, up 2 lines, each
    // line cleared to the end, cursor shown again, then a newline.
    const char *last = strstr(text, "pulling manifest \x1b[K\n");
    assert_non_null(last);
    while (strstr(last + 1, "pulling manifest \x1b[K\n"))
        last = strstr(last + 1, "pulling manifest \x1b[K\n");
    assert_true(cstr_ends_with(text, "success \x1b[K\x1b[?25h\x1b[?2026l\n"));
    assert_non_null(strstr(last, "pulling abc: 100% \u2595"));
    assert_non_null(strstr(text, "\x1b[?2026h\x1b[?25l"));
    free(text);
}

// Captures what fn prints on stdout (a file: not a terminal).
static char *capture_stdout(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/test_cli_out_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    fn(arg);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &out, NULL), 0);
    close(fd);
    unlink(path);
    return buf_take(&out);
}

struct gen_case {
    struct client *c;
    struct cli_run_opts *o;
    const char *prompt;
    bool chat;
    int rc;
    json_t *reply;
};

static void run_gen(void *arg)
{
    struct gen_case *g = arg;
    struct err e = {0};
    g->rc = cli_generate(g->c, g->o, g->prompt, g->chat, g->chat ? &g->reply : NULL, &e);
}

// Thinking, answer and tool calls as `ollama run` prints them to a pipe.
static void test_generate_display(void **state)
{
    (void)state;
    struct fake f;
    fake_start(&f,
               "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n"
               "{\"response\":\"\",\"thinking\":\"Let me \",\"done\":false}\n"
               "{\"response\":\"\",\"thinking\":\"think.\",\"done\":false}\n"
               "{\"response\":\"Hello\",\"done\":false}\n"
               "{\"response\":\" world\",\"done\":false}\n"
               "{\"response\":\"\",\"done\":true,\"eval_count\":2}\n");
    struct client *c = fake_client(&f);
    struct cli_run_opts o = {.model = "m", .wordwrap = true, .think = "true"};
    struct gen_case g = {.c = c, .o = &o, .prompt = "hi"};
    char *out = capture_stdout(run_gen, &g);
    assert_int_equal(g.rc, 0);
    assert_string_equal(out, "Thinking...\nLet me think.\n...done thinking.\n\nHello world\n\n");
    assert_non_null(strstr(f.last_request, "\"think\":true"));
    assert_non_null(strstr(f.last_request, "\"prompt\":\"hi\""));
    free(out);

    o.hide_thinking = true;
    out = capture_stdout(run_gen, &g);
    assert_string_equal(out, "Hello world\n\n");
    free(out);

    // An empty prompt (a load) gets no blank lines after the text.
    g.prompt = "";
    out = capture_stdout(run_gen, &g);
    assert_string_equal(out, "Hello world");
    free(out);
    client_free(c);
    fake_stop(&f);

    // Chat: the reply comes back for the history; tool calls are shown.
    fake_start(
        &f, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n"
            "{\"message\":{\"role\":\"assistant\",\"content\":\"Sure.\"},\"done\":false}\n"
            "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
            "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},\"done\":false}\n"
            "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true}\n");
    c = fake_client(&f);
    struct cli_run_opts co = {
        .model = "m", .messages = json_pack("[{s:s,s:s}]", "role", "user", "content", "hi")};
    struct gen_case cg = {.c = c, .o = &co, .chat = true};
    out = capture_stdout(run_gen, &cg);
    assert_int_equal(cg.rc, 0);
    assert_string_equal(out, "Sure.  Model called a non-existent function 'get_weather()' with "
                             "arguments: {\"city\":\"Paris\"}\n\n\n");
    assert_string_equal(json_string_value(json_object_get(cg.reply, "content")), "Sure.");
    assert_non_null(strstr(f.last_request, "\"messages\":[{\"role\":\"user\""));
    json_decref(cg.reply);
    json_decref(co.messages);
    free(out);
    client_free(c);
    fake_stop(&f);
}

static void test_media(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    base64_encode((const unsigned char *)"Man", 3, &b);
    assert_buf(&b, "TWFu");
    base64_encode((const unsigned char *)"Ma", 2, &b);
    assert_buf(&b, "TWE=");
    base64_encode((const unsigned char *)"M", 1, &b);
    assert_buf(&b, "TQ==");
    buf_deinit(&b);

    char dir[] = "/tmp/test_cli_media_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char png[300], spaced[300], txt[300], wav[300];
    snprintf(png, sizeof(png), "%s/cat.PNG", dir);
    snprintf(spaced, sizeof(spaced), "%s/my pic.jpg", dir);
    snprintf(txt, sizeof(txt), "%s/notes.png", dir);
    snprintf(wav, sizeof(wav), "%s/a.wav", dir);
    assert_int_equal(fs_write_atomic(png, "\x89PNG\r\n\x1a\nxyz", 11, NULL), 0);
    assert_int_equal(fs_write_atomic(spaced, "\xff\xd8\xff\xe0", 4, NULL), 0);
    assert_int_equal(fs_write_atomic(txt, "just text", 9, NULL), 0);
    assert_int_equal(fs_write_atomic(wav, "RIFF\0\0\0\0WAVEfmt ", 16, NULL), 0);

    char text[1200], esc[300];
    // "my\ pic.jpg": an escaped space.
    snprintf(esc, sizeof(esc), "%s/my\\ pic.jpg", dir);
    snprintf(text, sizeof(text), "what is in %s and %s? also %s/missing.png %s %s", png, esc, dir,
             txt, wav);
    FILE *log = tmpfile();
    json_t *media = json_array();
    char *rest = NULL;
    assert_int_equal(cli_media_extract(text, true, false, &rest, media, log), 2);
    assert_int_equal(json_array_size(media), 2);
    assert_string_equal(json_string_value(json_array_get(media, 0)), "iVBORw0KGgp4eXo=");
    char want[1200];
    snprintf(want, sizeof(want), "what is in  and ? also %s/missing.png %s %s", dir, txt, wav);
    assert_string_equal(rest, want);
    free(rest);
    rewind(log);
    char line[600];
    assert_non_null(fgets(line, sizeof(line), log));
    snprintf(want, sizeof(want), "Added image '%s'\n", png);
    assert_string_equal(line, want);
    assert_non_null(fgets(line, sizeof(line), log));
    snprintf(want, sizeof(want), "Added image '%s'\n", spaced);
    assert_string_equal(line, want);
    assert_non_null(fgets(line, sizeof(line), log));
    assert_string_equal(line, "Couldn't process file: \"invalid file type: text/plain; "
                              "charset=utf-8\"\n");
    fclose(log);
    json_decref(media);

    // Audio only when the model has it; nothing found leaves the text alone.
    log = tmpfile();
    media = json_array();
    snprintf(text, sizeof(text), "  listen %s  ", wav);
    assert_int_equal(cli_media_extract(text, false, true, &rest, media, log), 1);
    assert_string_equal(rest, "listen");
    free(rest);
    assert_int_equal(cli_media_extract("  plain text  ", true, true, &rest, media, log), 0);
    assert_string_equal(rest, "  plain text  ");
    free(rest);
    fclose(log);
    json_decref(media);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

// Found by fuzz_cli: a tensor without "shape" in a malformed /api/show answer
// crashed the verbose report. It prints <nil> now, as Go's %v of a nil value.
static void test_show_report_missing_fields(void **state)
{
    (void)state;
    const char *text = "{\"model_info\":{\"general.architecture\":\"llama\"},"
                       "\"tensors\":[{\"name\":\"a\",\"type\":\"F32\",\"s\\u00e9ape\":[1,2]},"
                       "{\"name\":\"b\"},7]}";
    json_t *show = NULL;
    assert_int_equal(jsonx_parse(text, strlen(text), &show, NULL), 0);
    struct buf b;
    buf_init(&b, 0);
    cli_show_report(show, true, &b);
    assert_non_null(strstr(buf_cstr(&b), "<nil>"));
    buf_deinit(&b);
    json_decref(show);
}

// Runs cli_main on args and returns what it wrote to stderr (rc in *rc).
static char *cli_stderr(int argc, const char *const *args, int *rc)
{
    char path[] = "/tmp/test_cli_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *argv[8];
    for (int i = 0; i < argc; i++)
        argv[i] = (char *)args[i];
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    *rc = cli_main(argc, argv);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &out, NULL), 0);
    unlink(path);
    char *text = xstrdup(buf_cstr(&out));
    buf_deinit(&out);
    return text;
}

// The root command's --verbose / --nowordwrap (Ollama 0.33) and the hidden
// login / logout spellings of signin / signout.
static void test_root_flags_and_login(void **state)
{
    (void)state;
    int rc;
    char *err = cli_stderr(3, (const char *const[]){"ollama", "--verbose", "--nowordwrap"}, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(err, "      --nowordwrap   Don't wrap words to the next line"));
    assert_non_null(strstr(err, "      --verbose      Show timings for response"));
    assert_null(strstr(err, "login"));  // hidden from the command list
    free(err);
    err = cli_stderr(2, (const char *const[]){"ollama", "--bogus"}, &rc);
    assert_int_equal(rc, 1);
    free(err);
    // A root flag before a command is that command's flag, as cobra parses it.
    err = cli_stderr(3, (const char *const[]){"ollama", "--nowordwrap", "login"}, &rc);
    assert_int_equal(rc, 1);
    assert_string_equal(err, "Error: unknown flag: --nowordwrap\n");
    free(err);
    err = cli_stderr(3, (const char *const[]){"ollama", "--verbose", "show"}, &rc);
    assert_int_equal(rc, 1);
    assert_string_equal(err, "Error: accepts 1 arg(s), received 0\n");
    free(err);
    const char *const names[] = {"login", "logout"};
    for (int i = 0; i < 2; i++) {
        err = cli_stderr(2, (const char *const[]){"ollama", names[i]}, &rc);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(err, "ollama cloud is disabled"));
        free(err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_list),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_progress_lines),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_word_wrap),
        cmocka_unit_test(test_show_report),
        cmocka_unit_test(test_host_urls),
        cmocka_unit_test(test_client_errors),
        cmocka_unit_test(test_pull_progress),
        cmocka_unit_test(test_progress_tty),
        cmocka_unit_test(test_generate_display),
        cmocka_unit_test(test_media),
        cmocka_unit_test(test_show_report_missing_fields),
        cmocka_unit_test(test_root_flags_and_login),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

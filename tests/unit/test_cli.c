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
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/internal.h"
#include "cli/agent.h"
#include "cli/launch.h"
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

// ---------------------------------------------------------------------------
// `ollama launch` config writers against a temporary HOME.

static char *read_text(const char *home, const char *rel)
{
    char *p = xasprintf("%s/%s", home, rel);
    struct buf b;
    buf_init(&b, 0);
    int rc = fs_read_all(p, 1 << 20, &b, NULL);
    free(p);
    if (rc < 0) {
        buf_deinit(&b);
        return NULL;
    }
    return buf_take(&b);
}

static void write_text(const char *home, const char *rel, const char *text)
{
    char *p = xasprintf("%s/%s", home, rel);
    char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(fs_mkdir_p(dir, NULL), 0);
    assert_int_equal(fs_write_atomic(p, text, strlen(text), NULL), 0);
    free(dir);
    free(p);
}

// The file parsed as JSON (it must parse).
static json_t *read_json(const char *home, const char *rel)
{
    char *text = read_text(home, rel);
    assert_non_null(text);
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(text, strlen(text), &v, NULL), 0);
    free(text);
    return v;
}

// The file parsed as YAML (it must parse).
static json_t *read_yaml(const char *path)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &b, NULL), 0);
    json_t *v = NULL;
    assert_int_equal(launch_yaml_parse_mapping(&b, &v, NULL), 0);
    buf_deinit(&b);
    return v;
}

static const char *jpath(json_t *v, const char *path)
{
    char *copy = xstrdup(path);
    for (char *k = strtok(copy, "."); k && v; k = strtok(NULL, "."))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    free(copy);
    return json_string_value(v);
}

static void test_launch_configs(void **state)
{
    (void)state;
    char home[] = "/tmp/ollama-launch-test-XXXXXX";
    assert_non_null(mkdtemp(home));
    unsetenv("HERMES_HOME");
    // The user's own files: keys of theirs that must survive, and bytes
    // (odd spacing, no final newline) that --restore must give back exactly.
    const char *droid_user = "{\"customModels\":[{\"model\":\"mine\",\"apiKey\":\"k\"}],"
                             "\"theme\":  \"dark\"}";
    const char *hermes_user = "# my settings\nmodel:\n  default: old\n  provider: x\n"
                              "toolsets:\n  - web\nproviders:\n  ollama: {api: old}\n"
                              "  mine: {api: \"http://x\"}\n"
                              "custom_providers:\n  - name: ollama\n    base_url: y\n";
    write_text(home, ".factory/settings.json", droid_user);
    write_text(home, ".hermes/config.yaml", hermes_user);
    write_text(home, ".pi/agent/settings.json", "{\"theme\":\"light\"}");

    struct launch_target t = {home, "http://127.0.0.1:11434", "qwen3:8b", 40960, false, true, NULL,
                              0};
    static const char *const names[] = {"cline",    "codex", "droid", "hermes", "opencode",
                                        "openclaw", "pi",    "qwen",  "code"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct err e = {0};
        assert_int_equal(cli_launch_write(names[i], &t, NULL, &e), 0);
    }

    json_t *v = read_json(home, ".factory/settings.json");
    assert_string_equal(jpath(v, "customModels.0.model"), "qwen3:8b");
    assert_string_equal(jpath(v, "customModels.0.baseUrl"), "http://127.0.0.1:11434/v1");
    assert_string_equal(jpath(v, "customModels.1.model"), "mine");
    assert_string_equal(jpath(v, "theme"), "dark");
    assert_string_equal(jpath(v, "sessionDefaultSettings.model"), "custom:qwen3:8b-0");
    json_decref(v);
    v = read_json(home, ".cline/data/settings/providers.json");
    assert_string_equal(jpath(v, "providers.ollama.settings.model"), "qwen3:8b");
    assert_string_equal(jpath(v, "lastUsedProvider"), "ollama");
    json_decref(v);
    v = read_json(home, ".cline/data/globalState.json");
    assert_string_equal(jpath(v, "planModeOllamaModelId"), "qwen3:8b");
    json_decref(v);
    v = read_json(home, ".codex/model.json");
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(v, "models"), 0), "context_window")),
                     40960);
    json_decref(v);
    v = read_json(home, ".openclaw/openclaw.json");
    assert_string_equal(jpath(v, "agents.defaults.model.primary"), "ollama/qwen3:8b");
    assert_string_equal(jpath(v, "models.providers.ollama.models.0.id"), "qwen3:8b");
    json_decref(v);
    v = read_json(home, ".pi/agent/models.json");
    assert_string_equal(jpath(v, "providers.ollama.models.0.id"), "qwen3:8b");
    json_decref(v);
    v = read_json(home, ".pi/agent/settings.json");
    assert_string_equal(jpath(v, "defaultModel"), "qwen3:8b");
    assert_string_equal(jpath(v, "theme"), "light");
    json_decref(v);
    v = read_json(home, ".qwen/settings.json");
    assert_string_equal(jpath(v, "model.name"), "qwen3:8b");
    assert_string_equal(jpath(v, "security.auth.baseUrl"), "http://127.0.0.1:11434/v1");
    json_decref(v);
    v = read_json(home, ".local/state/opencode/model.json");
    assert_string_equal(jpath(v, "recent.0.modelID"), "qwen3:8b");
    json_decref(v);
    v = read_json(home, ".config/Code/User/chatLanguageModels.json");
    assert_string_equal(jpath(v, "0.vendor"), "ollama");
    json_decref(v);

    char *text = read_text(home, ".codex/ollama-launch.config.toml");
    char *want = xasprintf("model = \"qwen3:8b\"\nmodel_provider = \"ollama-launch\"\n"
                           "model_catalog_json = \"%s/.codex/model.json\"\n\n"
                           "[model_providers.ollama-launch]\nname = \"Ollama\"\n"
                           "base_url = \"http://127.0.0.1:11434/v1\"\nwire_api = \"responses\"\n",
                           home);
    assert_string_equal(text, want);
    free(want);
    free(text);
    // Hermes as 0.33 writes it: the model block on launch's provider, that
    // provider listed, the user's keys and toolsets kept, "web" added once.
    char *hp = xasprintf("%s/.hermes/config.yaml", home);
    v = read_yaml(hp);
    free(hp);
    assert_string_equal(jpath(v, "model.provider"), "ollama-launch");
    assert_string_equal(jpath(v, "model.default"), "qwen3:8b");
    assert_string_equal(jpath(v, "model.base_url"), "http://127.0.0.1:11434/v1");
    assert_string_equal(jpath(v, "model.api_key"), "ollama");
    assert_string_equal(jpath(v, "providers.ollama-launch.api"), "http://127.0.0.1:11434/v1");
    assert_string_equal(jpath(v, "providers.ollama-launch.default_model"), "qwen3:8b");
    assert_string_equal(jpath(v, "providers.mine.api"), "http://x");
    assert_null(json_object_get(json_object_get(v, "providers"), "ollama"));
    assert_null(json_object_get(v, "custom_providers"));
    assert_int_equal(json_array_size(json_object_get(v, "toolsets")), 1);
    assert_string_equal(jpath(v, "toolsets.0"), "web");
    json_decref(v);

    // A second launch with another model keeps the user's original for
    // --restore, which gives their bytes back and removes what was not there.
    t.model = "llama3.2";
    assert_int_equal(cli_launch_write("droid", &t, NULL, NULL), 0);
    assert_int_equal(cli_launch_write("hermes", &t, NULL, NULL), 0);
    assert_int_equal(cli_launch_restore("droid", home, NULL, NULL), 1);
    assert_int_equal(cli_launch_restore("hermes", home, NULL, NULL), 1);
    assert_int_equal(cli_launch_restore("pi", home, NULL, NULL), 2);
    assert_int_equal(cli_launch_restore("pi", home, NULL, NULL), 0);
    text = read_text(home, ".factory/settings.json");
    assert_string_equal(text, droid_user);
    free(text);
    text = read_text(home, ".hermes/config.yaml");
    assert_string_equal(text, hermes_user);
    free(text);
    text = read_text(home, ".pi/agent/settings.json");
    assert_string_equal(text, "{\"theme\":\"light\"}");
    free(text);
    assert_null(read_text(home, ".pi/agent/models.json"));

    // A file that is not JSON is an error, never overwritten.
    write_text(home, ".qwen/settings.json", "{oops");
    struct err e = {0};
    assert_true(cli_launch_write("qwen", &t, NULL, &e) < 0);
    assert_non_null(strstr(e.msg, "failed to parse config"));
    text = read_text(home, ".qwen/settings.json");
    assert_string_equal(text, "{oops");
    free(text);

    char *cmd = xasprintf("rm -rf '%s'", home);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

// The environment and arguments of the tools configured without files.
static void test_launch_setup(void **state)
{
    (void)state;
    struct launch_target t = {"/home/u", "http://10.0.0.1:8080", "gemma3", 8192, false, false, NULL,
                              0};
    json_t *env = json_object(), *args = json_array();
    assert_int_equal(cli_launch_setup("copilot-cli", &t, env, args), 0);
    assert_string_equal(jpath(env, "COPILOT_PROVIDER_BASE_URL"), "http://10.0.0.1:8080/v1");
    assert_string_equal(jpath(env, "COPILOT_MODEL"), "gemma3");
    assert_string_equal(jpath(args, "1"), "gemma3");
    json_decref(env);
    json_decref(args);
    env = json_object();
    args = json_array();
    assert_int_equal(cli_launch_setup("kimi", &t, env, args), 0);
    assert_string_equal(jpath(args, "0"), "--config");
    json_t *cfg = NULL;
    const char *text = jpath(args, "1");
    assert_int_equal(jsonx_parse(text, strlen(text), &cfg, NULL), 0);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(cfg, "models"), "ollama"), "max_context_size")),
        8192);
    json_decref(cfg);
    json_decref(env);
    json_decref(args);
    assert_int_equal(cli_launch_setup("nope", &t, NULL, NULL), ERR_NOT_FOUND);
    // Every listed integration has a name, a display name and a description.
    const char *name, *display, *desc;
    bool hidden;
    size_t visible = 0;
    for (size_t i = 0; cli_launch_info(i, &name, &display, &desc, &hidden); i++) {
        assert_true(*name && *display && *desc);
        visible += !hidden;
    }
    assert_true(visible >= 11);
}

// YAML through libyaml: what the writers read back is what they wrote,
// strings that look like other things stay strings.
static void test_launch_yaml(void **state)
{
    (void)state;
    const char *src = "# comment\nname: qwen3:8b\nn: 12\nf: 1.5\nok: true\nnone: ~\n"
                      "quoted: \"12\"\nlist:\n  - a\n  - {x: 1}\n  - []\nmap: {}\n";
    struct buf in, out;
    buf_init(&in, 0);
    buf_init(&out, 0);
    buf_append_str(&in, src);
    json_t *v = NULL;
    assert_int_equal(launch_yaml_parse_mapping(&in, &v, NULL), 0);
    assert_string_equal(jpath(v, "name"), "qwen3:8b");
    assert_int_equal(json_integer_value(json_object_get(v, "n")), 12);
    assert_true(json_is_real(json_object_get(v, "f")));
    assert_true(json_is_true(json_object_get(v, "ok")));
    assert_true(json_is_null(json_object_get(v, "none")));
    assert_string_equal(jpath(v, "quoted"), "12");
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(v, "list"), 1), "x")), 1);
    // Strings YAML would read as something else, or not read at all.
    static const char *const odd[] = {"true", "12",          "",           " lead", "a: b", "#x",
                                      "- x",  "line\nbreak", "say \"hi\"", "null",  "1e3",  "x #y"};
    json_t *strs = json_object();
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%zu", i);
        jsonx_set_str(strs, key, odd[i]);
    }
    json_object_set(v, "strs", strs);
    launch_yaml_dump(v, &out);
    json_t *back = NULL;
    assert_int_equal(launch_yaml_parse_mapping(&out, &back, NULL), 0);
    assert_true(json_equal(v, back));
    json_decref(back);
    json_decref(strs);
    json_decref(v);
    // Not a mapping, or not YAML: an error.
    buf_reset(&in);
    buf_append_str(&in, "- a\n");
    assert_true(launch_yaml_parse_mapping(&in, &v, NULL) < 0);
    buf_reset(&in);
    buf_append_str(&in, "a: [1\n");
    struct err e = {0};
    assert_true(launch_yaml_parse_mapping(&in, &v, &e) < 0);
    assert_non_null(strstr(e.msg, "yaml: line"));
    buf_deinit(&in);
    buf_deinit(&out);
}

// OMP (YAML in the user's agent dir), DeepSeek Harness and Muse (launch's
// own config roots), Hermes Desktop (Hermes's file and backups).
// What the OMP, DeepSeek Harness and muse writers wrote under home, and
// the command lines launch builds (test_launch_more_configs).
static void check_omp_written(const char *home)
{
    char *p = xasprintf("%s/.omp/agent/models.yml", home);
    json_t *v = read_yaml(p);
    free(p);
    assert_string_equal(jpath(v, "providers.other.baseUrl"), "http://x");
    assert_string_equal(jpath(v, "providers.ollama.baseUrl"), "http://127.0.0.1:11434/v1");
    assert_string_equal(jpath(v, "providers.ollama.api"), "openai-responses");
    assert_string_equal(jpath(v, "providers.ollama.discovery.type"), "ollama");
    assert_string_equal(jpath(v, "providers.ollama.models.0.id"), "qwen3:8b");
    assert_string_equal(jpath(v, "providers.ollama.models.0.input.1"), "image");
    json_t *m0 = json_array_get(
        json_object_get(json_object_get(json_object_get(v, "providers"), "ollama"), "models"), 0);
    assert_int_equal(json_integer_value(json_object_get(m0, "contextWindow")), 40960);
    assert_int_equal(json_integer_value(json_object_get(m0, "maxTokens")), 99);
    assert_string_equal(jpath(v, "providers.ollama.models.1.id"), "old");
    json_decref(v);
    p = xasprintf("%s/.omp/agent/config.yml", home);
    v = read_yaml(p);
    free(p);
    assert_int_equal(json_integer_value(json_object_get(v, "setupVersion")), 1);
    json_decref(v);
}

static void check_dsh_written(const char *home)
{
    char *p = xasprintf("%s/.ollama/launch/dsh/settings.yaml", home);
    json_t *v = read_yaml(p);
    assert_string_equal(jpath(v, "agent-default-model.model"), "qwen3:8b");
    assert_string_equal(jpath(v, "llm-pi-ai.providers.ollama.apiKeyEnv"),
                        "OLLAMA_LAUNCH_DSH_API_KEY");
    assert_string_equal(jpath(v, "llm-pi-ai.providers.ollama.baseURL"),
                        "http://127.0.0.1:11434/v1");
    json_decref(v);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text = read_text(home, ".ollama/launch/dsh/ollama.cordis.yml");
    char *want = xasprintf("- id: settings\n  config:\n    path: %s\n", p);
    assert_string_equal(text, want);
    free(want);
    free(text);
    free(p);
}

static void check_muse_written(const char *home)
{
    json_t *v = read_json(home, ".ollama/launch/muse-config/muse/settings.json");
    assert_string_equal(jpath(v, "skills.0"), "s");  // seeded from the user's own
    assert_string_equal(jpath(v, "model"), "qwen3:8b");
    assert_string_equal(jpath(v, "provider"), "meta");
    assert_string_equal(jpath(v, "endpoint_transport.auth"), "none");
    assert_string_equal(jpath(v, "model_catalog.0.profile_id"), "tbh");
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(v, "model_catalog"), 0), "output_limit")),
                     32768);
    json_decref(v);
}

static void check_launch_setup(const struct launch_target *t)
{
    json_t *env = json_object(), *args = json_array();
    assert_int_equal(cli_launch_setup("deepseek-harness", t, env, args), 0);
    assert_string_equal(jpath(args, "0"), "web");
    assert_string_equal(jpath(env, "OLLAMA_LAUNCH_DSH_API_KEY"), "ollama");
    json_decref(env);
    json_decref(args);
    env = json_object();
    args = json_array();
    assert_int_equal(cli_launch_setup("omp", t, env, args), 0);
    assert_string_equal(jpath(args, "1"), "ollama/qwen3:8b");
    json_decref(env);
    json_decref(args);
}

static void test_launch_more_configs(void **state)
{
    (void)state;
    char home[] = "/tmp/ollama-launch-test-XXXXXX";
    assert_non_null(mkdtemp(home));
    unsetenv("HERMES_HOME");
    unsetenv("PI_CODING_AGENT_DIR");
    unsetenv("PI_CONFIG_DIR");
    char *xdg = xasprintf("%s/xdg", home);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    const char *omp_user =
        "# mine\nproviders:\n  other:\n    baseUrl: http://x\n"
        "  ollama:\n    models:\n      - id: \"qwen3:8b\"\n        maxTokens: 99\n"
        "      - id: old\n";
    write_text(home, ".omp/agent/models.yml", omp_user);
    write_text(home, "xdg/muse/settings.json", "{\"skills\":[\"s\"],\"model\":\"x\"}");
    const char *hermes_user = "model:\n  default: mine\n";
    write_text(home, ".hermes/config.yaml", hermes_user);

    struct launch_target t = {home, "http://127.0.0.1:11434", "qwen3:8b", 40960, true, false, NULL,
                              0};
    static const char *const names[] = {"omp", "dsh", "muse-code", "hermes-desktop"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct err e = {0};
        assert_int_equal(cli_launch_write(names[i], &t, NULL, &e), 0);
    }
    check_omp_written(home);
    check_dsh_written(home);
    check_muse_written(home);
    check_launch_setup(&t);

    // Restore: the user's OMP bytes (comment and all) back; launch's own
    // files removed; hermes-desktop's backup is hermes's.
    assert_int_equal(cli_launch_restore("omp", home, NULL, NULL), 2);
    char *text = read_text(home, ".omp/agent/models.yml");
    assert_string_equal(text, omp_user);
    free(text);
    assert_null(read_text(home, ".omp/agent/config.yml"));
    assert_int_equal(cli_launch_restore("dsh", home, NULL, NULL), 2);
    assert_null(read_text(home, ".ollama/launch/dsh/settings.yaml"));
    assert_int_equal(cli_launch_restore("hermes", home, NULL, NULL), 1);
    text = read_text(home, ".hermes/config.yaml");
    assert_string_equal(text, hermes_user);
    free(text);

    // A models.yml that is not YAML is an error and stays as it is.
    write_text(home, ".omp/agent/models.yml", "providers: [1\n");
    struct err e = {0};
    assert_true(cli_launch_write("omp", &t, NULL, &e) < 0);
    assert_non_null(strstr(e.msg, "failed to parse config"));
    unsetenv("XDG_CONFIG_HOME");
    free(xdg);
    char *cmd = xasprintf("rm -rf '%s'", home);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

// 0.33's deprecated-model question.
static void test_launch_deprecated(void **state)
{
    (void)state;
    static const char *const yes[] = {"llama3.2",         "Llama3.1:8b", "library/mistral:latest",
                                      "qwen2.5-coder:7b", "deepseek-r1", "deepseek-r1:7b",
                                      " codellama "};
    static const char *const no[] = {"qwen3", "deepseek-r1:70b", "llama3-gradient", "gemma4",
                                     "mistral-small"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(cli_launch_model_deprecated(yes[i]));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(cli_launch_model_deprecated(no[i]));
    char *q = cli_launch_deprecated_prompt("llama3.2", "Claude Code", "claude", "gemma4");
    assert_string_equal(q, "llama3.2 does not work well with Claude Code. Try an agent-capable "
                           "model like gemma4 instead:\n  ollama launch claude --model gemma4\n\n"
                           "Launch with llama3.2 anyway?");
    free(q);
    assert_null(cli_launch_deprecated_prompt("qwen3", "Claude Code", "claude", "gemma4"));
}

static char *cli_stderr(int argc, const char *const *args, int *rc);

// Writes an executable shell script.
static void write_script(const char *path, const char *body)
{
    assert_int_equal(fs_write_atomic(path, body, strlen(body), NULL), 0);
    assert_int_equal(chmod(path, 0755), 0);
}

// The offer to install a missing tool, with a fake npm on PATH (no real
// installer runs), and the refusals of the macOS/Windows desktop apps.
// `ollama launch ...` fails (exit 1) and its stderr is want (exact) or
// holds it.
#define LAUNCH_ARGS(...)                                                                           \
    (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)), (const char *const[])      \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
static void launch_fails(int argc, const char *const *argv, const char *want, bool exact)
{
    int rc;
    char *err = cli_stderr(argc, argv, &rc);
    assert_int_equal(rc, 1);
    if (exact)
        assert_string_equal(err, want);
    else if (!strstr(err, want))
        fail_msg("want \"%s\" in: %s", want, err);
    free(err);
}

// Desktop apps 0.33 supports only elsewhere.
static void launch_desktop_refusals(void)
{
    launch_fails(LAUNCH_ARGS("ollama", "launch", "claude-desktop"),
                 "Error: Claude Desktop can only be restored from the command line: "
                 "ollama launch claude-desktop --restore\n",
                 true);
    launch_fails(LAUNCH_ARGS("ollama", "launch", "claude-app", "--restore"),
                 "Error: Claude Desktop launch is only supported on macOS\n", true);
    launch_fails(LAUNCH_ARGS("ollama", "launch", "codex-app", "--restore"),
                 "Error: ChatGPT launch is only supported on macOS and Windows\n", true);
}

static void test_launch_install(void **state)
{
    (void)state;
    char dir[] = "/tmp/ollama-install-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *saved_path = xstrdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char *saved_home = getenv("HOME") ? xstrdup(getenv("HOME")) : NULL;
    char *saved_host = getenv("OLLAMA_HOST") ? xstrdup(getenv("OLLAMA_HOST")) : NULL;
    char *bin = xasprintf("%s/bin", dir), *npm = xasprintf("%s/bin/npm", dir);
    assert_int_equal(fs_mkdir_p(bin, NULL), 0);
    setenv("HOME", dir, 1);
    setenv("OLLAMA_HOST", "127.0.0.1:1", 1);
    setenv("PATH", bin, 1);
    // Only the programs in bin/: no npm yet.
    launch_fails(LAUNCH_ARGS("ollama", "launch", "cline"),
                 "Error: cline is not installed and required dependencies are "
                 "missing\n\nInstall the following first:\n  npm (Node.js): "
                 "https://nodejs.org/\n\nThen re-run:\n  ollama launch cline\n",
                 true);
    // The fake npm records its arguments and installs a cline.
    char *script = xasprintf("#!/bin/sh\necho \"$@\" > %s/npm.args\n"
                             "printf '#!/bin/sh\\n' > %s/cline\n/bin/chmod +x %s/cline\n",
                             dir, bin, bin);
    write_script(npm, script);
    free(script);
    launch_fails(LAUNCH_ARGS("ollama", "launch", "cline"),
                 "Error: Cline is not installed. Install with npm? requires "
                 "confirmation; re-run with --yes to continue\nTo install it "
                 "yourself, run:\n  npm install -g cline@latest\n",
                 true);
    char *args_path = xasprintf("%s/npm.args", dir);
    assert_false(fs_exists(args_path));  // nothing ran
    launch_fails(LAUNCH_ARGS("ollama", "launch", "cline", "--yes", "--model", "m"),
                 "\nInstalling Cline...\nCline installed successfully\n",
                 false);  // installed; then no server on port 1
    char *text = read_text(dir, "npm.args");
    assert_string_equal(text, "install -g cline@latest\n");
    free(text);
    // An installer that fails.
    write_script(npm, "#!/bin/sh\nexit 3\n");
    launch_fails(LAUNCH_ARGS("ollama", "launch", "pi", "-y", "--model", "m"),
                 "Error: failed to install pi: exit status 3\n", false);
    // DeepSeek Harness: a failed global install falls back to npx (0.33).
    char *npx = xasprintf("%s/npx", bin);
    write_script(npx, "#!/bin/sh\nexit 0\n");
    int rc;
    char *err =
        cli_stderr(6, (const char *const[]){"ollama", "launch", "dsh", "-y", "--model", "m"}, &rc);
    assert_int_equal(rc, 1);  // then no server on port 1
    assert_non_null(strstr(err, "Installing DeepSeek Harness..."));
    assert_null(strstr(err, "failed to install"));
    free(err);
    unlink(npx);
    free(npx);
    // --yes without a terminal needs --model, before anything is installed.
    launch_fails(LAUNCH_ARGS("ollama", "launch", "qwen", "--yes"),
                 "Error: headless --yes launch for qwen requires --model <model>\n", true);
    // No installer: the hint.
    launch_fails(LAUNCH_ARGS("ollama", "launch", "copilot"),
                 "Error: copilot is not installed, install from "
                 "https://github.com/features/copilot/cli/",
                 false);
    launch_desktop_refusals();

    setenv("PATH", saved_path, 1);
    saved_home ? setenv("HOME", saved_home, 1) : unsetenv("HOME");
    saved_host ? setenv("OLLAMA_HOST", saved_host, 1) : unsetenv("OLLAMA_HOST");
    free(saved_path);
    free(saved_home);
    free(saved_host);
    free(args_path);
    free(bin);
    free(npm);
    char *cmd = xasprintf("rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

// ---------------------------------------------------------------------------
// Agent chat: markdown, tools, compaction.

static void md_render(const char *const *chunks, size_t n, const char *want)
{
    static const struct agent_md_styles st = {"<b>", "<c>", "<d>", "</>"};
    struct buf out;
    buf_init(&out, 0);
    struct agent_md md;
    agent_md_init(&md, &out, &st);
    for (size_t i = 0; i < n; i++)
        agent_md_feed(&md, chunks[i], strlen(chunks[i]));
    agent_md_finish(&md);
    assert_string_equal(buf_cstr(&out), want);
    buf_deinit(&out);
}

static void test_agent_markdown(void **state)
{
    (void)state;
    // Split anywhere: markers across chunks still render.
    const char *a[] = {"# Ti", "tle\nSome **bo", "ld** and `co", "de`.\n- one\n* two\n"};
    md_render(a, 4, "<b>Title</>\nSome <b>bold</> and <c>code</>.\n\u2022 one\n\u2022 two\n");
    const char *b[] = {"```c\nint x = 2 * 3;\n", "```\n", "a * b"};
    md_render(b, 3, "  <c>int x = 2 * 3;</>\na * b");
    const char *c[] = {"#hashtag and ## x\n  - nested\n"};
    md_render(c, 1, "#hashtag and ## x\n  \u2022 nested\n");
}

static void test_agent_tools(void **state)
{
    (void)state;
    char dir[] = "/tmp/ollama-agent-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_text(dir, "src/a.txt", "alpha\nbeta\nalpha beta\n");
    write_text(dir, "notes.md", "one two\n");
    setenv("OLLAMA_AGENT_DISABLE_SHELL", "1", 1);
    struct agent_tools t;
    assert_int_equal(agent_tools_init(&t, dir, NULL), 0);
    unsetenv("OLLAMA_AGENT_DISABLE_SHELL");
    assert_false(t.shell);
    struct buf out;
    buf_init(&out, 0);
    json_t *args = json_pack("{s:s}", "command", "echo hi");
    assert_true(agent_tool_run(&t, "bash", args, &out) < 0);
    assert_non_null(strstr(buf_cstr(&out), "OLLAMA_AGENT_DISABLE_SHELL"));
    buf_reset(&out);
    t.shell = true;
    assert_int_equal(agent_tool_run(&t, "bash", args, &out), 0);
    assert_string_equal(buf_cstr(&out), "hi\n");
    json_decref(args);
    buf_reset(&out);
    // The timeout kills the command (and what it started).
    t.bash_timeout_ms = 300;
    args = json_pack("{s:s}", "command", "sleep 30");
    assert_int_equal(agent_tool_run(&t, "bash", args, &out), ERR_TIMEOUT);
    assert_non_null(strstr(buf_cstr(&out), "timed out"));
    json_decref(args);
    buf_reset(&out);

    args = json_pack("{s:s,s:i,s:i}", "path", "src/a.txt", "start_line", 2, "end_line", 3);
    assert_int_equal(agent_tool_run(&t, "read", args, &out), 0);
    assert_string_equal(buf_cstr(&out), "beta\nalpha beta\n");
    json_decref(args);
    buf_reset(&out);
    // Outside the working directory: refused.
    args = json_pack("{s:s}", "path", "../../etc/passwd");
    assert_true(agent_tool_run(&t, "read", args, &out) < 0);
    assert_non_null(strstr(buf_cstr(&out), "outside the working directory"));
    json_decref(args);
    buf_reset(&out);

    // Edit: exactly one match, else the error 0.33 gives.
    args = json_pack("{s:s,s:s,s:s}", "path", "src/a.txt", "old_text", "alpha", "new_text", "x");
    assert_true(agent_tool_run(&t, "edit", args, &out) < 0);
    assert_non_null(strstr(buf_cstr(&out), "matched 2 times"));
    json_decref(args);
    buf_reset(&out);
    args = json_pack("{s:s,s:s,s:s}", "path", "src/a.txt", "old_text", "\nbeta\n", "new_text",
                     "\ngamma\n");
    assert_int_equal(agent_tool_run(&t, "edit", args, &out), 0);
    json_decref(args);
    char *text = read_text(dir, "src/a.txt");
    assert_string_equal(text, "alpha\ngamma\nalpha beta\n");
    free(text);
    buf_reset(&out);
    // Several edits, each against the original; overlapping ones refused.
    args = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}]}", "path", "src/a.txt", "edits", "old_text",
                     "a beta", "new_text", "a delta", "old_text", "gamma", "new_text", "g");
    assert_int_equal(agent_tool_run(&t, "edit", args, &out), 0);
    json_decref(args);
    text = read_text(dir, "src/a.txt");
    assert_string_equal(text, "alpha\ng\nalpha delta\n");
    free(text);
    args = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}]}", "path", "src/a.txt", "edits", "old_text",
                     "alpha d", "new_text", "x", "old_text", "a delta", "new_text", "y");
    assert_int_equal(agent_tool_run(&t, "edit", args, &out), ERR_INVALID);
    assert_non_null(strstr(buf_cstr(&out), "edits overlap"));
    json_decref(args);
    buf_reset(&out);

    args = json_pack("{s:s}", "path", ".");
    assert_int_equal(agent_tool_run(&t, "list", args, &out), 0);
    assert_string_equal(buf_cstr(&out), "notes.md\nsrc/\n");
    json_decref(args);
    buf_reset(&out);
    args = json_pack("{s:s}", "pattern", "alpha delta");
    assert_int_equal(agent_tool_run(&t, "search", args, &out), 0);
    assert_string_equal(buf_cstr(&out), "src/a.txt:3: alpha delta\n");
    json_decref(args);
    buf_reset(&out);

    // Skills from the project's .ollama/skills; the scope of bash is the command.
    write_text(dir, ".ollama/skills/notes/SKILL.md",
               "---\nname: notes\ndescription: \"Keep notes\"\n---\nWrite notes.\n");
    agent_skills_load(&t);
    assert_int_equal(json_array_size(t.skills), 1);
    assert_string_equal(jpath(t.skills, "0.description"), "Keep notes");
    args = json_pack("{s:s}", "name", "notes");
    assert_int_equal(agent_tool_run(&t, "skill", args, &out), 0);
    assert_non_null(strstr(buf_cstr(&out), "Write notes."));
    json_decref(args);
    args = json_pack("{s:s}", "command", "ls");
    char *scope = agent_tool_scope("bash", args);
    assert_string_equal(scope, "bash:ls");
    free(scope);
    json_decref(args);
    assert_true(agent_tool_read_only("read") && !agent_tool_read_only("edit"));
    buf_deinit(&out);
    agent_tools_deinit(&t);
    char *cmd = xasprintf("rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

static void test_agent_compaction(void **state)
{
    (void)state;
    json_t *msgs = json_array();
    for (int i = 0; i < 5; i++) {
        char u[16], r[16];
        snprintf(u, sizeof(u), "q%d", i);
        snprintf(r, sizeof(r), "a%d", i);
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", u));
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "assistant", "content", r));
    }
    // 80% of the window, by the last prompt_eval_count or the estimate.
    assert_true(agent_should_compact(msgs, 800, 1000));
    assert_false(agent_should_compact(msgs, 799, 1000));
    assert_true(agent_should_compact(msgs, 0, 10));
    json_t *archive, *keep;
    const char *prev;
    // A large window keeps the last 3 user turns.
    assert_true(agent_compact_split(msgs, 32768, &archive, &keep, &prev));
    assert_int_equal(json_array_size(archive), 4);
    assert_int_equal(json_array_size(keep), 6);
    assert_string_equal(jpath(keep, "0.content"), "q2");
    assert_null(prev);
    json_t *joined = agent_compact_join("they asked five things", keep, true);
    assert_int_equal(json_array_size(joined), 8);
    assert_string_equal(jpath(joined, "0.tool_calls.0.function.name"), "summary");
    assert_non_null(strstr(jpath(joined, "1.content"), "Conversation summary:\nthey asked"));
    assert_non_null(strstr(jpath(joined, "1.content"), "continue the task in progress"));
    json_decref(archive);
    json_decref(keep);
    // Under a 16k window only the summary stays; the previous one is found.
    assert_true(agent_compact_split(joined, 8192, &archive, &keep, &prev));
    assert_int_equal(json_array_size(keep), 0);
    assert_int_equal(json_array_size(archive), 6);
    assert_non_null(prev);
    assert_int_equal(strncmp(prev, "they asked", 10), 0);
    json_decref(archive);
    json_decref(keep);
    json_decref(joined);
    // One user turn is archived whole (as 0.33); no messages, nothing to do.
    json_t *one = json_pack("[{s:s,s:s}]", "role", "user", "content", "hi");
    assert_true(agent_compact_split(one, 32768, &archive, &keep, &prev));
    assert_int_equal(json_array_size(archive), 1);
    json_decref(archive);
    json_decref(keep);
    json_array_clear(one);
    assert_false(agent_compact_split(one, 32768, &archive, &keep, &prev));
    json_decref(one);
    json_decref(msgs);

    // Tool results: 0.33's limits and head/tail truncation.
    assert_int_equal(agent_tool_result_limit(131072, 0), 60000);
    assert_int_equal(agent_tool_result_limit(8192, 0), 6000);
    assert_int_equal(agent_tool_result_limit(4096, 0), 3200);
    assert_int_equal(agent_tool_result_limit(4096, 3200), (3276 - 3200 - 66) * 4);
    assert_int_equal(agent_tool_result_limit(4096, 4000), 0);
    char *t = agent_truncate_result("0123456789abcdefghij", 8);
    assert_string_equal(t, "012345\n\n[tool output truncated: showing first ~2 tokens and last ~1 "
                           "tokens; omitted ~3 tokens. Use a narrower command, line range, or "
                           "search query if more detail is needed.]\n\nij");
    free(t);
    t = agent_truncate_result("short", 8);
    assert_string_equal(t, "short");
    free(t);
    t = agent_truncate_result("all of it", 0);
    assert_int_equal(strncmp(t, "[tool output truncated: output omitted", 38), 0);
    free(t);
}

// `/skills import codex`: the skill directories copied whole, once.
static void test_agent_skills_import(void **state)
{
    (void)state;
    char home[] = "/tmp/ollama-skills-test-XXXXXX";
    assert_non_null(mkdtemp(home));
    char *old_home = getenv("HOME") ? xstrdup(getenv("HOME")) : NULL;
    setenv("HOME", home, 1);
    unsetenv("OLLAMA_SKILLS");
    unsetenv("XDG_CONFIG_HOME");
    write_text(home, ".codex/skills/notes/SKILL.md", "---\nname: notes\n---\nbody\n");
    write_text(home, ".codex/skills/notes/scripts/run.sh", "echo\n");
    write_text(home, ".codex/skills/not-a-skill/README", "x");
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(agent_skills_import("codex", &out, NULL), 1);
    char *text = read_text(home, ".ollama/skills/notes/scripts/run.sh");
    assert_string_equal(text, "echo\n");
    free(text);
    assert_null(read_text(home, ".ollama/skills/not-a-skill/README"));
    buf_reset(&out);
    assert_int_equal(agent_skills_import("codex", &out, NULL), 0);
    assert_non_null(strstr(buf_cstr(&out), "Skipped notes: already exists"));
    struct err e = {0};
    assert_true(agent_skills_import("emacs", &out, &e) < 0);
    assert_string_equal(e.msg, "unknown skill source \"emacs\"");
    buf_deinit(&out);
    if (old_home)
        setenv("HOME", old_home, 1);
    free(old_home);
    char *cmd = xasprintf("rm -rf '%s'", home);
    assert_int_equal(system(cmd), 0);
    free(cmd);
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
        cmocka_unit_test(test_launch_configs),
        cmocka_unit_test(test_launch_setup),
        cmocka_unit_test(test_launch_yaml),
        cmocka_unit_test(test_launch_more_configs),
        cmocka_unit_test(test_launch_deprecated),
        cmocka_unit_test(test_launch_install),
        cmocka_unit_test(test_agent_markdown),
        cmocka_unit_test(test_agent_tools),
        cmocka_unit_test(test_agent_compaction),
        cmocka_unit_test(test_agent_skills_import),
        cmocka_unit_test(test_root_flags_and_login),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

// End-to-end tests of the `ollama` command line (spec/cli.md): one real
// `ollama serve` on a loopback port with a temporary store, and the real
// binary's subcommands run against it: create from a Modelfile with the
// bundled stories260K model, list, show, cp, rm, run (one-shot, piped,
// verbose), ps, stop, errors; then the REPL through a pseudo-terminal
// (multi-line input, slash commands, Ctrl+C on an empty line and during a
// response, Ctrl+D, the history file).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "integration/harness.h"
#include "testutil.h"
#include "util/util.h"

static struct harness server;
static bool server_up;

struct result {
    int status;
    struct buf out, err;
};

static void result_deinit(struct result *r)
{
    buf_deinit(&r->out);
    buf_deinit(&r->err);
}

// Environment of the CLI children: the server's address and a private HOME.
static void child_env(const char *host)
{
    setenv("OLLAMA_HOST", host, 1);
    setenv("HOME", server.tmp_dir, 1);
    setenv("TERM", "xterm", 1);
    unsetenv("OLLAMA_NOHISTORY");
}

static void read_fd(int fd, struct buf *b)
{
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        buf_append(b, chunk, (size_t)n);
}

// Runs `ollama args...` with stdin from in (NULL: /dev/null), collecting
// stdout and stderr (through temp files, so neither pipe can block).
static void run_cli(struct result *r, const char *host, const char *in, const char *const *args)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->out, 0);
    buf_init(&r->err, 0);
    char out_path[] = "/tmp/cli-out-XXXXXX", err_path[] = "/tmp/cli-err-XXXXXX",
         in_path[] = "/tmp/cli-in-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path), fi = mkstemp(in_path);
    assert_true(fo >= 0 && fe >= 0 && fi >= 0);
    if (in)
        assert_int_equal(write(fi, in, strlen(in)), (ssize_t)strlen(in));
    lseek(fi, 0, SEEK_SET);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        child_env(host);
        char *argv[32];
        int n = 0;
        argv[n++] = "ollama";
        for (const char *const *a = args; *a && n < 31; a++)
            argv[n++] = (char *)*a;
        argv[n] = NULL;
        execv(harness_bin(), argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    read_fd(fo, &r->out);
    read_fd(fe, &r->err);
    close(fo);
    close(fe);
    close(fi);
    unlink(out_path);
    unlink(err_path);
    unlink(in_path);
}

#define RUN(r, in, ...)                                                                            \
    do {                                                                                           \
        const char *const args_[] = {__VA_ARGS__, NULL};                                           \
        run_cli(r, server.host, in, args_);                                                        \
    } while (0)

static void write_modelfile(const char *path, const char *extra)
{
    char gguf[1024];
    test_fixture(gguf, sizeof(gguf), "stories260K.gguf");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "FROM %s\nPARAMETER temperature 0\n%s", gguf, extra ? extra : "");
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    if (harness_start(&server, NULL) != 0) {
        fprintf(stderr, "could not start ollama serve\n");
        harness_dump_log(&server);
        return -1;
    }
    server_up = true;
    // The model every test uses.
    char mf[400];
    snprintf(mf, sizeof(mf), "%s/Modelfile", server.tmp_dir);
    write_modelfile(mf, "PARAMETER num_predict 12\nSYSTEM You tell stories.\n");
    struct result r;
    RUN(&r, NULL, "create", "stories", "-f", mf);
    int status = r.status;
    if (status != 0)
        fprintf(stderr, "create failed: %s\n", buf_cstr(&r.err));
    result_deinit(&r);
    return status == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (server_up)
        harness_stop(&server);
    return 0;
}

static void test_no_server(void **state)
{
    (void)state;
    struct result r;
    char host[64];
    snprintf(host, sizeof(host), "127.0.0.1:%d", harness_free_port());
    const char *const args[] = {"list", NULL};
    run_cli(&r, host, NULL, args);
    assert_int_equal(r.status, 1);
    assert_string_equal(
        buf_cstr(&r.err),
        "Error: could not connect to ollama server, run 'ollama serve' to start it\n");
    result_deinit(&r);

    const char *const vargs[] = {"--version", NULL};
    run_cli(&r, host, NULL, vargs);
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out),
                        "Warning: could not connect to a running Ollama instance\n"
                        "Warning: client version is " OLLAMA_VERSION "\n");
    result_deinit(&r);
}

static void test_version_and_usage(void **state)
{
    (void)state;
    struct result r;
    RUN(&r, NULL, "--version");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "ollama version is " OLLAMA_VERSION "\n");
    result_deinit(&r);

    RUN(&r, NULL, "show");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: accepts 1 arg(s), received 0\n");
    result_deinit(&r);

    RUN(&r, NULL, "run", "--help");
    assert_int_equal(r.status, 0);
    assert_true(cstr_starts_with(buf_cstr(&r.out), "Run a model\n\nUsage:\n  ollama run MODEL "
                                                   "[PROMPT] [flags]\n"));
    result_deinit(&r);
}

static void test_create_errors(void **state)
{
    (void)state;
    struct result r;
    char mf[400];
    snprintf(mf, sizeof(mf), "%s/Bad", server.tmp_dir);
    FILE *f = fopen(mf, "w");
    fputs("FROM x\nBOGUS y\n", f);
    fclose(f);
    RUN(&r, NULL, "create", "bad", "-f", mf);
    assert_int_equal(r.status, 1);
    assert_true(cstr_starts_with(buf_cstr(&r.err), "Error: (line 2): command must be one of"));
    result_deinit(&r);

    RUN(&r, NULL, "create", "bad:na:me", "-f", mf);
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: invalid model name: bad:na:me\n");
    result_deinit(&r);

    snprintf(mf, sizeof(mf), "%s/Params", server.tmp_dir);
    write_modelfile(mf, "PARAMETER tfs_z 1\n");
    RUN(&r, NULL, "create", "bad", "-f", mf);
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: unknown parameter 'tfs_z'\n");
    result_deinit(&r);

    RUN(&r, NULL, "create", "bad", "-f", "/nonexistent/Modelfile");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err),
                        "Error: open /nonexistent/Modelfile: no such file or directory\n");
    result_deinit(&r);
}

static void test_create_progress(void **state)
{
    (void)state;
    struct result r;
    char mf[400];
    snprintf(mf, sizeof(mf), "%s/Modelfile2", server.tmp_dir);
    write_modelfile(mf, "PARAMETER num_predict 5\nPARAMETER mirostat 1\n");
    RUN(&r, NULL, "create", "stories2", "-f", mf);
    assert_int_equal(r.status, 0);
    const char *err = buf_cstr(&r.err);
    // stderr is not a terminal: each line once, no escapes.
    assert_true(cstr_starts_with(err, "warning: parameter mirostat is deprecated\n"
                                      "gathering model components\n"
                                      "copying file sha256:"));
    assert_non_null(strstr(err, " 100%\n"));
    assert_non_null(strstr(err, "\nusing existing layer sha256:"));
    assert_true(cstr_ends_with(err, "writing manifest\nsuccess\n"));
    assert_null(strchr(err, '\x1b'));
    assert_string_equal(buf_cstr(&r.out), "");
    result_deinit(&r);
    RUN(&r, NULL, "rm", "stories2");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "deleted 'stories2'\n");
    result_deinit(&r);

    // FROM a directory (relative to the Modelfile) imports its GGUF file.
    char dir[400], cmd[1200], gguf[1024];
    snprintf(dir, sizeof(dir), "%s/import/weights", server.tmp_dir);
    test_fixture(gguf, sizeof(gguf), "stories260K.gguf");
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s' '%s/'", dir, gguf, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(mf, sizeof(mf), "%s/import/Modelfile", server.tmp_dir);
    FILE *f = fopen(mf, "w");
    fputs("FROM ./weights\n", f);
    fclose(f);
    RUN(&r, NULL, "create", "from-dir", "-f", mf);
    assert_int_equal(r.status, 0);
    result_deinit(&r);
    RUN(&r, NULL, "show", "from-dir", "--modelfile");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(buf_cstr(&r.out), "FROM "));
    result_deinit(&r);
    RUN(&r, NULL, "rm", "from-dir");
    assert_int_equal(r.status, 0);
    result_deinit(&r);
}

// FROM a Hugging Face folder (made from the tiny Qwen2 fixture by
// tools/hf-export): the CLI uploads the safetensors and JSON files, the
// server converts them ("converting model") and quantizes the F16 result.
static void test_create_hf(void **state)
{
    (void)state;
    char gguf[1024], dir[400], cmd[2400], mf[400];
    if (!test_shared_fixture(gguf, sizeof(gguf), "tiny-qwen2-f32.gguf"))
        skip();
    const char *bin = getenv("OLLAMA_BIN_DIR");
    snprintf(dir, sizeof(dir), "%s/hfimport/qwen", server.tmp_dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && '%s/hf-export' '%s' '%s' --vocab-limit 300", dir,
             bin ? bin : "build/bin", gguf, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(mf, sizeof(mf), "%s/hfimport/Modelfile", server.tmp_dir);
    FILE *f = fopen(mf, "w");
    fputs("FROM ./qwen\n", f);
    fclose(f);
    struct result r;
    RUN(&r, NULL, "create", "hf-qwen", "-f", mf, "-q", "q8_0");
    if (r.status != 0)
        fail_msg("create: %s", buf_cstr(&r.err));
    const char *err = buf_cstr(&r.err);
    assert_non_null(strstr(err, "converting model"));
    assert_non_null(strstr(err, "quantizing F16 model to Q8_0"));
    assert_true(cstr_ends_with(err, "success\n"));
    result_deinit(&r);
    RUN(&r, NULL, "show", "hf-qwen");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(buf_cstr(&r.out), "architecture        qwen2"));
    assert_non_null(strstr(buf_cstr(&r.out), "Q8_0"));
    result_deinit(&r);
    RUN(&r, NULL, "rm", "hf-qwen");
    assert_int_equal(r.status, 0);
    result_deinit(&r);
}

// FROM a sentence-transformers folder (tiny nomic-bert): the CLI also
// uploads vocab.txt and 1_Pooling/config.json, so the model gets its mean
// pooling.
static void test_create_hf_embedding(void **state)
{
    (void)state;
    char gguf[1024], dir[400], cmd[2400], mf[400];
    if (!test_shared_fixture(gguf, sizeof(gguf), "tiny-nomic-bert-f32.gguf"))
        skip();
    const char *bin = getenv("OLLAMA_BIN_DIR");
    snprintf(dir, sizeof(dir), "%s/hfembed/nomic", server.tmp_dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p '%s' && '%s/hf-export' '%s' '%s' && rm '%s/tokenizer.json'", dir,
             bin ? bin : "build/bin", gguf, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(mf, sizeof(mf), "%s/hfembed/Modelfile", server.tmp_dir);
    FILE *f = fopen(mf, "w");
    fputs("FROM ./nomic\n", f);
    fclose(f);
    struct result r;
    RUN(&r, NULL, "create", "hf-nomic", "-f", mf);
    if (r.status != 0)
        fail_msg("create: %s", buf_cstr(&r.err));
    result_deinit(&r);
    RUN(&r, NULL, "show", "-v", "hf-nomic");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(buf_cstr(&r.out), "architecture        nomic-bert"));
    assert_non_null(strstr(buf_cstr(&r.out), "nomic-bert.pooling_type"));
    result_deinit(&r);
    RUN(&r, NULL, "rm", "hf-nomic");
    assert_int_equal(r.status, 0);
    result_deinit(&r);
}

// A folder of an architecture the converter does not know: Ollama's error
// naming it, and no model.
static void test_create_hf_refused(void **state)
{
    (void)state;
    char mf[400], path[600];
    snprintf(path, sizeof(path), "%s/hfimport/qwen/config.json", server.tmp_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        skip();  // test_create_hf made the folder (or skipped)
    fclose(f);
    f = fopen(path, "w");
    fputs("{\"architectures\": [\"FalconForCausalLM\"]}\n", f);
    fclose(f);
    snprintf(mf, sizeof(mf), "%s/hfimport/Modelfile", server.tmp_dir);
    struct result r;
    RUN(&r, NULL, "create", "hf-refused", "-f", mf);
    assert_int_not_equal(r.status, 0);
    assert_non_null(strstr(buf_cstr(&r.err), "unsupported architecture \"FalconForCausalLM\""));
    result_deinit(&r);
    RUN(&r, NULL, "show", "hf-refused");
    assert_int_not_equal(r.status, 0);
    result_deinit(&r);
}

static void test_list_show_cp_rm(void **state)
{
    (void)state;
    struct result r;
    RUN(&r, NULL, "list");
    assert_int_equal(r.status, 0);
    const char *out = buf_cstr(&r.out);
    assert_true(cstr_starts_with(out, "NAME    "));
    assert_non_null(strstr(out, "\nstories:latest    "));
    assert_non_null(strstr(out, "    1.2 MB    "));
    result_deinit(&r);

    RUN(&r, NULL, "ls", "nomatch");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "NAME    ID    SIZE    MODIFIED \n");
    result_deinit(&r);

    RUN(&r, NULL, "show", "stories");
    assert_int_equal(r.status, 0);
    out = buf_cstr(&r.out);
    assert_true(cstr_starts_with(out, "  Model\n    architecture        llama "));
    assert_non_null(strstr(out, "  Parameters\n    num_predict    12    \n"));
    assert_non_null(strstr(out, "  System\n    You tell stories.    \n\n"));
    result_deinit(&r);

    RUN(&r, NULL, "show", "stories", "--system");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "You tell stories.");
    result_deinit(&r);

    RUN(&r, NULL, "show", "stories", "--modelfile");
    assert_int_equal(r.status, 0);
    assert_true(cstr_starts_with(buf_cstr(&r.out), "# Modelfile generated by \"ollama show\"\n"));
    result_deinit(&r);

    RUN(&r, NULL, "show", "stories", "--system", "--license");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: only one of '--license', '--modelfile', "
                                          "'--parameters', '--system', or '--template' can be "
                                          "specified\n");
    result_deinit(&r);

    RUN(&r, NULL, "show", "nope");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: model 'nope:latest' not found\n");
    result_deinit(&r);

    RUN(&r, NULL, "cp", "stories", "copy1");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "copied 'stories' to 'copy1'\n");
    result_deinit(&r);

    RUN(&r, NULL, "rm", "copy1");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "deleted 'copy1'\n");
    result_deinit(&r);

    RUN(&r, NULL, "rm", "copy1");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(buf_cstr(&r.err), "Error: model 'copy1"));
    result_deinit(&r);
}

// Copies a file (a DRAFT must not be the FROM file itself).
static void copy_file(const char *from, const char *to)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(from, 64u << 20, &b, NULL), 0);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
    fclose(f);
    buf_deinit(&b);
}

// A file of the server's store (at most 1 MiB) as a string.
static char *read_text(const char *path)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &b, NULL), 0);
    char *s = xstrdup(buf_cstr(&b));
    buf_deinit(&b);
    return s;
}

// The manifest of name:latest in the server's store.
static char *read_manifest(const char *name)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/manifests/registry.ollama.ai/library/%s/latest",
             server.models_dir, name);
    return read_text(path);
}

// The config blob a manifest (text) names.
static char *read_config(const char *manifest)
{
    const char *c = strstr(manifest, "\"config\":");
    assert_non_null(c);
    const char *d = strstr(c, "sha256:");
    assert_non_null(d);
    char path[700];
    snprintf(path, sizeof(path), "%s/blobs/sha256-%.64s", server.models_dir, d + 7);
    return read_text(path);
}

// The DRAFT line of `ollama show --modelfile name` (a blob path), or NULL.
static char *draft_line(const char *name)
{
    struct result r;
    RUN(&r, NULL, "show", name, "--modelfile");
    assert_int_equal(r.status, 0);
    const char *d = strstr(buf_cstr(&r.out), "\nDRAFT ");
    char *line = d ? xstrndup(d + 1, strcspn(d + 1, "\n")) : NULL;
    result_deinit(&r);
    return line;
}

// `ollama run a PROMPT` prints what `ollama run b PROMPT` prints.
static void assert_same_output(const char *a_name, const char *b_name)
{
    struct result a, b;
    RUN(&a, NULL, "run", a_name, "Once upon a time");
    RUN(&b, NULL, "run", b_name, "Once upon a time");
    assert_int_equal(a.status, 0);
    assert_int_equal(b.status, 0);
    assert_true(a.out.len > 20);
    assert_string_equal(buf_cstr(&a.out), buf_cstr(&b.out));
    result_deinit(&a);
    result_deinit(&b);
}

// Modelfile DRAFT: stored as an application/vnd.ollama.image.draft layer,
// shown by show --modelfile, loaded by the runner beside the target; greedy
// output identical with and without it. --draft-quantize quantizes that
// layer only, and needs a DRAFT.
static void test_create_draft(void **state)
{
    (void)state;
    char gguf[1024], draft[400], mf[400], mf2[400];
    test_fixture(gguf, sizeof(gguf), "stories260K.gguf");
    snprintf(draft, sizeof(draft), "%s/draft.gguf", server.tmp_dir);
    copy_file(gguf, draft);
    snprintf(mf, sizeof(mf), "%s/Modelfile.draft", server.tmp_dir);
    snprintf(mf2, sizeof(mf2), "%s/Modelfile.plain", server.tmp_dir);
    write_modelfile(mf, "PARAMETER num_predict 60\nDRAFT draft.gguf\n");
    write_modelfile(mf2, "PARAMETER num_predict 60\n");
    struct result r;
    RUN(&r, NULL, "create", "with-draft", "-f", mf);
    if (r.status != 0)
        fail_msg("create: %s", buf_cstr(&r.err));
    result_deinit(&r);
    RUN(&r, NULL, "create", "no-draft", "-f", mf2);
    assert_int_equal(r.status, 0);
    result_deinit(&r);

    char *m = read_manifest("with-draft");
    assert_non_null(strstr(m, "\"mediaType\":\"application/vnd.ollama.image.draft\""));
    // The config names it as Ollama's does: "draft" before "architecture".
    char *cfg = read_config(m);
    assert_non_null(strstr(cfg, ",\"draft\":{\"model_format\":\"gguf\",\"architecture\":\"llama\"},"
                                "\"architecture\":\"amd64\""));
    free(cfg);
    free(m);
    m = read_manifest("no-draft");
    assert_null(strstr(m, "image.draft"));
    cfg = read_config(m);
    assert_null(strstr(cfg, "\"draft\""));
    free(cfg);
    free(m);
    char *line = draft_line("with-draft");
    assert_non_null(line);
    assert_non_null(strstr(line, "/blobs/sha256-"));
    assert_null(draft_line("no-draft"));

    // Greedy output: the same with the draft model as without.
    assert_same_output("with-draft", "no-draft");
    struct buf log;
    buf_init(&log, 0);
    assert_int_equal(fs_read_all(server.log_path, 64u << 20, &log, NULL), 0);
    assert_non_null(strstr(buf_cstr(&log), "--draft "));
    assert_non_null(strstr(buf_cstr(&log), "draft model loaded"));
    buf_deinit(&log);

    // --draft-quantize: a new (quantized) draft layer; the model's layer is
    // unchanged.
    RUN(&r, NULL, "create", "with-draft-q8", "-f", mf, "--draft-quantize", "q8_0");
    if (r.status != 0)
        fail_msg("create --draft-quantize: %s", buf_cstr(&r.err));
    assert_non_null(strstr(buf_cstr(&r.err), "quantizing F32 draft model to Q8_0"));
    result_deinit(&r);
    char *qline = draft_line("with-draft-q8");
    assert_non_null(qline);
    assert_string_not_equal(qline, line);
    free(qline);
    free(line);
    assert_same_output("with-draft-q8", "no-draft");

    // Prompt lookup as a model parameter: the same output again.
    char mf3[400];
    snprintf(mf3, sizeof(mf3), "%s/Modelfile.lookup", server.tmp_dir);
    write_modelfile(mf3, "PARAMETER num_predict 60\nPARAMETER draft_ngram 3\n");
    RUN(&r, NULL, "create", "lookup", "-f", mf3);
    assert_int_equal(r.status, 0);
    result_deinit(&r);
    assert_same_output("lookup", "no-draft");

    RUN(&r, NULL, "create", "bad", "-f", mf2, "--draft-quantize", "q8_0");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(buf_cstr(&r.err), "--draft-quantize requires a DRAFT model"));
    result_deinit(&r);
    // The DRAFT may not be the FROM file.
    char same[1200];
    snprintf(same, sizeof(same), "DRAFT %s\n", gguf);
    write_modelfile(mf2, same);
    RUN(&r, NULL, "create", "bad", "-f", mf2);
    assert_int_equal(r.status, 1);
    assert_non_null(
        strstr(buf_cstr(&r.err), "DRAFT must not reference the same local path as FROM"));
    result_deinit(&r);
    // A draft with another vocabulary: the runner refuses it, and the
    // request says why.
    char other[1024];
    if (test_shared_fixture(other, sizeof(other), "tiny-llama-f32.gguf")) {
        char cmd[1100];
        snprintf(cmd, sizeof(cmd), "DRAFT %s\n", other);
        write_modelfile(mf2, cmd);
        RUN(&r, NULL, "create", "bad-draft", "-f", mf2);
        assert_int_equal(r.status, 0);
        result_deinit(&r);
        RUN(&r, NULL, "run", "bad-draft", "Once upon a time");
        assert_int_equal(r.status, 1);
        if (!strstr(buf_cstr(&r.err), "draft model vocabulary does not match"))
            fail_msg("want the vocabulary error, got: %s", buf_cstr(&r.err));
        result_deinit(&r);
        RUN(&r, NULL, "rm", "bad-draft");
        result_deinit(&r);
    } else {
        printf("skip: shared/fixtures/tiny-llama-f32.gguf absent (vocabulary mismatch case)\n");
    }
    RUN(&r, NULL, "rm", "with-draft", "with-draft-q8", "no-draft", "lookup");
    result_deinit(&r);
}

static void test_run_one_shot(void **state)
{
    (void)state;
    struct result r;
    RUN(&r, NULL, "run", "stories", "Once upon a time", "--verbose");
    assert_int_equal(r.status, 0);
    const char *out = buf_cstr(&r.out);
    assert_true(r.out.len > 10);
    assert_true(cstr_ends_with(out, "\n\n"));
    assert_null(strchr(out, '\x1b'));  // not a terminal: no wrap escapes
    assert_non_null(strstr(buf_cstr(&r.err), "eval count:           12 token(s)\n"));
    assert_non_null(strstr(buf_cstr(&r.err), "total duration:       "));
    // Deterministic at temperature 0: the same text again, from piped stdin.
    char *first = xstrdup(out);
    result_deinit(&r);
    RUN(&r, "Once upon a", "run", "stories", "time");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), first);
    assert_string_equal(buf_cstr(&r.err), "");
    free(first);
    result_deinit(&r);

    RUN(&r, NULL, "run", "stories", "--think=maybe", "hi");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: invalid value for --think: \"maybe\" (must be "
                                          "true, false, high, medium, low, or max)\n");
    result_deinit(&r);

    RUN(&r, NULL, "run", "stories", "--think", "hi");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err),
                        "Error: 400 Bad Request: \"stories\" does not support thinking\n");
    result_deinit(&r);

    RUN(&r, NULL, "run", "stories", "--keepalive", "300", "hi");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: time: missing unit in duration \"300\"\n");
    result_deinit(&r);
}

static void test_ps_stop(void **state)
{
    (void)state;
    struct result r;
    RUN(&r, NULL, "run", "stories", "", "--keepalive", "10m");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "");
    result_deinit(&r);

    RUN(&r, NULL, "ps");
    assert_int_equal(r.status, 0);
    const char *out = buf_cstr(&r.out);
    assert_true(cstr_starts_with(out, "NAME              ID              SIZE      PROCESSOR    "
                                      "CONTEXT    UNTIL"));
    assert_non_null(strstr(out, "\nstories:latest    "));
    assert_non_null(strstr(out, "100% CPU"));
    assert_non_null(strstr(out, "minutes from now    \n"));
    result_deinit(&r);

    RUN(&r, NULL, "stop", "stories");
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.out), "");
    result_deinit(&r);

    // Unloading takes effect promptly.
    bool gone = false;
    for (int i = 0; i < 50 && !gone; i++) {
        RUN(&r, NULL, "ps");
        gone = strstr(buf_cstr(&r.out), "stories") == NULL;
        result_deinit(&r);
        if (!gone)
            harness_sleep_ms(100);
    }
    assert_true(gone);

    RUN(&r, NULL, "stop", "nope");
    assert_int_equal(r.status, 1);
    assert_string_equal(buf_cstr(&r.err), "Error: couldn't find model \"nope\" to stop\n");
    result_deinit(&r);
}

// Ctrl+C (SIGINT) during a one-shot response ends it quietly, exit 0.
static void test_run_interrupt(void **state)
{
    (void)state;
    struct result r;
    char mf[400];
    snprintf(mf, sizeof(mf), "%s/Long", server.tmp_dir);
    write_modelfile(mf, "PARAMETER num_predict 100000\n");
    RUN(&r, NULL, "create", "stories-long", "-f", mf);
    assert_int_equal(r.status, 0);
    result_deinit(&r);

    char out_path[400];
    snprintf(out_path, sizeof(out_path), "%s/long.out", server.tmp_dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null_fd = open("/dev/null", O_RDWR);
        dup2(null_fd, 0);
        dup2(fd, 1);
        dup2(null_fd, 2);
        child_env(server.host);
        execl(harness_bin(), "ollama", "run", "stories-long", "Once upon a time", (char *)NULL);
        _exit(127);
    }
    // Wait for the first words, then interrupt.
    struct stat st = {0};
    for (int i = 0; i < 200 && st.st_size < 20; i++) {
        harness_sleep_ms(50);
        stat(out_path, &st);
    }
    assert_true(st.st_size >= 20);
    kill(pid, SIGINT);
    int status = -1;
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        harness_sleep_ms(50);
    }
    if (!WIFEXITED(status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("ollama run did not stop on SIGINT");
    }
    assert_int_equal(WEXITSTATUS(status), 0);
    RUN(&r, NULL, "rm", "stories-long");
    assert_int_equal(r.status, 0);
    result_deinit(&r);
}

// ---------------------------------------------------------------------------
// pull / push through Debian's docker-registry on loopback. Skipped when the
// registry binary is missing or the server has no /api/pull yet.

#define DOCKER_REGISTRY "/usr/bin/docker-registry"

static pid_t registry_start(char *dir, size_t dir_n, int *port)
{
    snprintf(dir, dir_n, "/tmp/ollama-cli-reg-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    *port = harness_free_port();
    char cfg[400], text[1200];
    snprintf(cfg, sizeof(cfg), "%s/config.yml", dir);
    snprintf(text, sizeof(text),
             "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
             "    rootdirectory: %s/data\nhttp:\n  addr: 127.0.0.1:%d\n",
             dir, *port);
    if (fs_write_atomic(cfg, text, strlen(text), NULL) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDWR);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        execl(DOCKER_REGISTRY, "docker-registry", "serve", cfg, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        if (harness_port_open(*port))
            return pid;
        harness_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void test_pull_push(void **state)
{
    (void)state;
    if (access(DOCKER_REGISTRY, X_OK) != 0)
        skip();
    struct result r;
    RUN(&r, NULL, "pull", "127.0.0.1:1/library/probe", "--insecure");
    bool no_route = strstr(buf_cstr(&r.err), "404 page not found") != NULL;
    result_deinit(&r);
    if (no_route)
        skip();

    char dir[300];
    int port = 0;
    pid_t reg = registry_start(dir, sizeof(dir), &port);
    assert_true(reg > 0);
    char name[128], expect_out[300];
    snprintf(name, sizeof(name), "127.0.0.1:%d/library/stories:latest", port);

    RUN(&r, NULL, "cp", "stories", name);
    assert_int_equal(r.status, 0);
    result_deinit(&r);
    RUN(&r, NULL, "push", name, "--insecure");
    assert_int_equal(r.status, 0);
    snprintf(expect_out, sizeof(expect_out), "\nYou can find your model at:\n\n\t%s\n", name);
    assert_string_equal(buf_cstr(&r.out), expect_out);
    assert_true(cstr_starts_with(buf_cstr(&r.err), "retrieving manifest\n"));
    assert_true(cstr_ends_with(buf_cstr(&r.err), "pushing manifest\nsuccess\n"));
    result_deinit(&r);

    RUN(&r, NULL, "rm", name);
    assert_int_equal(r.status, 0);
    result_deinit(&r);
    RUN(&r, NULL, "pull", name, "--insecure");
    assert_int_equal(r.status, 0);
    const char *err = buf_cstr(&r.err);
    assert_true(cstr_starts_with(err, "pulling manifest\npulling "));
    assert_non_null(strstr(err, ": 100% 1.2 MB\n"));
    assert_true(cstr_ends_with(err, "verifying sha256 digest\nwriting manifest\nsuccess\n"));
    assert_string_equal(buf_cstr(&r.out), "");
    result_deinit(&r);

    // run pulls a missing model first.
    RUN(&r, NULL, "rm", name);
    assert_int_equal(r.status, 0);
    result_deinit(&r);
    RUN(&r, NULL, "run", name, "--insecure", "Once upon a time");
    assert_int_equal(r.status, 0);
    assert_true(cstr_starts_with(buf_cstr(&r.err), "pulling manifest\n"));
    assert_true(r.out.len > 10);
    result_deinit(&r);

    char missing[160];
    snprintf(missing, sizeof(missing), "127.0.0.1:%d/library/nope", port);
    RUN(&r, NULL, "pull", missing, "--insecure");
    assert_int_equal(r.status, 1);
    assert_true(
        cstr_ends_with(buf_cstr(&r.err), "Error: pull model manifest: file does not exist\n"));
    result_deinit(&r);

    RUN(&r, NULL, "rm", name);
    result_deinit(&r);
    kill(reg, SIGTERM);
    waitpid(reg, NULL, 0);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

// ---------------------------------------------------------------------------
// The REPL through a pseudo-terminal.

struct pty {
    pid_t pid;
    int fd;
    struct buf seen;  // everything read so far
    size_t mark;      // expect() searches from here
};

static void pty_start(struct pty *p, const char *const *args, const char *const *env)
{
    memset(p, 0, sizeof(*p));
    buf_init(&p->seen, 0);
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    p->pid = forkpty(&p->fd, NULL, NULL, &ws);
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        child_env(server.host);
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        char *argv[16];
        int n = 0;
        argv[n++] = "ollama";
        for (const char *const *a = args; *a && n < 15; a++)
            argv[n++] = (char *)*a;
        argv[n] = NULL;
        execv(harness_bin(), argv);
        _exit(127);
    }
}

// Reads until needle appears after the mark (then moves the mark past it).
static bool expect(struct pty *p, const char *needle, int timeout_ms)
{
    int64_t deadline = time_monotonic_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        const char *hit = p->seen.len ? strstr(p->seen.data + p->mark, needle) : NULL;
        if (hit) {
            p->mark = (size_t)(hit - p->seen.data) + strlen(needle);
            return true;
        }
        int64_t left = (deadline - time_monotonic_ns()) / 1000000;
        if (left <= 0)
            break;
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        char chunk[4096];
        ssize_t n = read(p->fd, chunk, sizeof(chunk));
        if (n <= 0)
            break;
        buf_append(&p->seen, chunk, (size_t)n);
    }
    fprintf(stderr, "expected %s; the terminal showed:\n%s\n", needle,
            p->seen.data ? p->seen.data + p->mark : "");
    return false;
}

// Types s, after a short pause: libedit prints the prompt just before it
// switches the terminal to its editing mode.
static void pty_send(struct pty *p, const char *s)
{
    harness_sleep_ms(30);
    assert_int_equal(write(p->fd, s, strlen(s)), (ssize_t)strlen(s));
}

static int pty_wait(struct pty *p)
{
    int st = 0;
    for (int i = 0; i < 200; i++) {
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            close(p->fd);
            buf_deinit(&p->seen);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        // Drain the output; once the child is gone the master reports
        // hang-up at once, so pause between checks.
        char chunk[4096];
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0 || read(p->fd, chunk, sizeof(chunk)) <= 0)
            harness_sleep_ms(20);
    }
    fprintf(stderr, "the REPL did not exit\n");
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &st, 0);
    close(p->fd);
    buf_deinit(&p->seen);
    return -1;
}

// The REPL's commands one at a time: what is typed, then what it prints
// (each within 5 s, the first within `wait` ms), before the next prompt.
static const struct repl_step {
    const char *send;
    const char *want[3];
    int wait;
    bool open;  // a message left open: no prompt after
} repl_steps[] = {
    {"/?\r", {"Available Commands:", "Use \"\"\" to begin a multi-line message."}, 5000},
    {"/? shortcuts\r", {"Available keyboard shortcuts:"}, 5000},
    {"/set parameter foo 1\r", {"Couldn't set parameter: \"unknown parameter 'foo'\""}, 5000},
    {"/set parameter num_predict x\r", {"Couldn't set parameter: \"invalid int value [x]\""}, 5000},
    {"/set parameter num_predict 8\r", {"Set parameter 'num_predict' to '8'"}, 5000},
    {"/set verbose\r", {"Set 'verbose' mode."}, 5000},
    {"/set bogus\r", {"Unknown command '/set bogus'. Type /? for help"}, 5000},
    {"/show parameters\r",
     {"Model defined parameters:", "User defined parameters:", "num_predict"},
     5000},
    {"/show system\r", {"You tell stories."}, 5000},
    {"/show info\r", {"architecture", "llama"}, 5000},
    {"/show license\r", {"No license was specified for this model."}, 5000},
    {"/show modelfile\r", {"# Modelfile generated by \"ollama show\"", "SYSTEM"}, 5000},
    {"/show template\r", {"No prompt template was specified for this model."}, 5000},
    {"/list\r", {"NAME", "stories:latest"}, 5000},
    {"/set format json\r", {"Set format to 'json' mode."}, 5000},
    {"/set noformat\r", {"Disabled format."}, 5000},
    {"/set nohistory\r", {NULL}, 5000},
    {"/set history\r", {NULL}, 5000},
    {"/set system \"\"\"Be\r", {"... "}, 5000, true},
    {"brief.\"\"\"\r", {"Set system message."}, 5000},
    {"/show system\r", {"Be\r\nbrief."}, 5000},
    {"/set think\r",
     {"Set 'think' mode.", "warning: model \"stories\" does not support thinking output"},
     5000},
    {"hello\r", {"error: 400 Bad Request: \"stories\" does not support thinking"}, 10000},
    {"/set nothink\r", {"Set 'nothink' mode."}, 5000},
    {"/nope\r", {"Unknown command '/nope'. Type /? for help"}, 5000},
    {"/load missing-model\r", {"Couldn't find model 'missing-model'"}, 5000},
};

static void repl_commands(struct pty *p)
{
    for (size_t i = 0; i < sizeof repl_steps / sizeof repl_steps[0]; i++) {
        const struct repl_step *st = &repl_steps[i];
        pty_send(p, st->send);
        for (int k = 0; k < 3 && st->want[k]; k++)
            assert_true(expect(p, st->want[k], k == 0 ? st->wait : 5000));
        if (!st->open)
            assert_true(expect(p, ">>> ", 5000));
    }
}

// A multi-line message and a bracketed paste, each answered once.
static void repl_messages(struct pty *p)
{
    // A multi-line message, answered with the stats block.
    pty_send(p, "\"\"\"Once upon\r");
    assert_true(expect(p, "... \x1b[90mPress Enter to send", 5000));
    pty_send(p, "a time\"\"\"\r");
    assert_true(expect(p, "eval count:           8 token(s)", 20000));
    assert_true(expect(p, ">>> ", 5000));
    // A bracketed paste with a newline is one message: one answer.
    size_t before = p->mark;
    pty_send(p, "\x1b[200~Once upon\ra time\x1b[201~");
    pty_send(p, "\r");
    assert_true(expect(p, "eval rate:", 20000));
    assert_true(expect(p, ">>> ", 5000));
    {
        int answers = 0;
        for (const char *q = p->seen.data + before; (q = strstr(q, "\neval rate:")); q++)
            answers++;
        if (answers != 1)
            fprintf(stderr, "%s\n", p->seen.data + before);
        assert_int_equal(answers, 1);
    }
    pty_send(p, "/set quiet\r");
    assert_true(expect(p, "Set 'quiet' mode.", 5000));
    assert_true(expect(p, ">>> ", 5000));
}

// Ctrl+C: clears a line, hints on an empty one, stops a response.
static void repl_ctrl_c(struct pty *p)
{
    // Ctrl+C with text clears the line (nothing is sent).
    pty_send(p, "never sent");
    assert_true(expect(p, "never sent", 5000));
    pty_send(p, "\x03");
    assert_true(expect(p, "\r\x1b[K>>> ", 5000));

    // Ctrl+C on an empty line: a hint, and the REPL stays.
    pty_send(p, "\x03");
    assert_true(expect(p, "Use Ctrl + d or /bye to exit.", 5000));
    assert_true(expect(p, ">>> ", 5000));

    // Ctrl+C during a response stops it and gives the prompt back.
    pty_send(p, "/set parameter num_predict 100000\r");
    assert_true(expect(p, "Set parameter 'num_predict' to '100000'", 5000));
    assert_true(expect(p, ">>> ", 5000));
    pty_send(p, "Tell me a long story\r");
    assert_true(expect(p, "Tell me a long story\r\n", 5000));
    harness_sleep_ms(1500);
    pty_send(p, "\x03");
    assert_true(expect(p, ">>> ", 10000));
}

static void test_repl(void **state)
{
    (void)state;
    char hist[400];
    snprintf(hist, sizeof(hist), "%s/.ollama/history", server.tmp_dir);
    unlink(hist);
    struct pty p;
    const char *const args[] = {"run", "stories", NULL};
    pty_start(&p, args, NULL);
    assert_true(expect(&p, ">>> ", 20000));
    // The grey placeholder, the cursor put back after the prompt.
    assert_true(expect(&p, "\x1b[90mSend a message (/? for help)\x1b[0m\x1b[28D", 5000));

    repl_commands(&p);
    repl_messages(&p);
    repl_ctrl_c(&p);
    pty_send(&p, "/clear\r");
    assert_true(expect(&p, "Cleared session context", 5000));
    assert_true(expect(&p, ">>> ", 5000));
    pty_send(&p, "/save saved-session\r");
    assert_true(expect(&p, "Created new model 'saved-session'", 10000));
    assert_true(expect(&p, ">>> ", 5000));
    pty_send(&p, "/save bad:na:me\r");
    assert_true(expect(&p, "error: The model name 'bad:na:me' is invalid", 5000));
    assert_true(expect(&p, ">>> ", 5000));
    pty_send(&p, "/bye\r");
    assert_int_equal(pty_wait(&p), 0);

    // The history file holds what was typed.
    struct buf h;
    buf_init(&h, 0);
    assert_int_equal(fs_read_all(hist, 1 << 20, &h, NULL), 0);
    assert_non_null(strstr(buf_cstr(&h), "/set verbose\n"));
    assert_non_null(strstr(buf_cstr(&h), "a time\"\"\"\n"));
    assert_true(cstr_ends_with(buf_cstr(&h), "/bye\n"));
    buf_deinit(&h);

    // The saved session is a model of its own.
    struct result r;
    RUN(&r, NULL, "show", "saved-session", "--parameters");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(buf_cstr(&r.out), "num_predict"));
    result_deinit(&r);
}

static void test_repl_eof_nohistory(void **state)
{
    (void)state;
    char hist[400];
    snprintf(hist, sizeof(hist), "%s/.ollama/history", server.tmp_dir);
    unlink(hist);
    // An "editor" for Ctrl+G that replaces the line.
    char editor[400];
    snprintf(editor, sizeof(editor), "%s/editor.sh", server.tmp_dir);
    FILE *f = fopen(editor, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nprintf '/set verbose\\n\\n' > \"$1\"\n", f);
    fclose(f);
    chmod(editor, 0755);
    static char editor_env[450];
    snprintf(editor_env, sizeof(editor_env), "OLLAMA_EDITOR=%s", editor);
    // A model with a MESSAGE history: the REPL shows it first.
    char mf[400];
    snprintf(mf, sizeof(mf), "%s/Messages", server.tmp_dir);
    write_modelfile(mf, "MESSAGE user Who are you?\nMESSAGE assistant A storyteller.\n");
    struct result r;
    RUN(&r, NULL, "create", "stories-msg", "-f", mf);
    assert_int_equal(r.status, 0);
    result_deinit(&r);

    struct pty p;
    const char *const args[] = {"run", "stories-msg", NULL};
    const char *const env[] = {"OLLAMA_NOHISTORY=1", editor_env, NULL};
    pty_start(&p, args, env);
    assert_true(expect(&p, ">>> Who are you?\r\nA storyteller.\r\n\r\n>>> ", 20000));
    pty_send(&p, "draft\x07");
    assert_true(expect(&p, "/set verbose", 5000));
    pty_send(&p, "\r");
    assert_true(expect(&p, "Set 'verbose' mode.", 5000));
    assert_true(expect(&p, ">>> ", 5000));
    pty_send(&p, "/set wordwrap\r");
    assert_true(expect(&p, "Set 'wordwrap' mode.", 5000));
    assert_true(expect(&p, ">>> ", 5000));
    // Ctrl+U drops the text before the cursor, Ctrl+W the word before it.
    pty_send(&p, "nonsense text\x15/set quiet extra\x17\r");
    assert_true(expect(&p, "Set 'quiet' mode.", 5000));
    assert_true(expect(&p, ">>> ", 5000));
    // Ctrl+D on an empty line exits.
    pty_send(&p, "\x04");
    assert_int_equal(pty_wait(&p), 0);
    assert_false(fs_exists(hist));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_server),
        cmocka_unit_test(test_version_and_usage),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_create_progress),
        cmocka_unit_test(test_create_draft),
        cmocka_unit_test(test_list_show_cp_rm),
        cmocka_unit_test(test_run_one_shot),
        cmocka_unit_test(test_ps_stop),
        cmocka_unit_test(test_run_interrupt),
        cmocka_unit_test(test_pull_push),
        cmocka_unit_test(test_repl),
        cmocka_unit_test(test_repl_eof_nohistory),
        cmocka_unit_test(test_create_hf),
        cmocka_unit_test(test_create_hf_refused),
        cmocka_unit_test(test_create_hf_embedding),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

// Store: names, digests, Go JSON encoding, blobs, manifests, list / copy /
// delete / check / prune, an Ollama-written store, show and create.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"
#include "store/internal.h"
#include "testutil.h"

// ---------------------------------------------------------------------------
// Helpers.

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

struct fx {
    char root[256];
    struct store *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->root, sizeof(f->root), "/tmp/ollama-store-test-XXXXXX");
    if (!mkdtemp(f->root))
        return -1;
    struct err e = {0};
    if (store_open(&f->s, f->root, &e) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    store_close(f->s);
    rm_rf(f->root);
    free(f);
    return 0;
}

static void write_file(const char *path, const void *data, size_t n)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    assert_int_equal(fs_mkdir_p(dir, NULL), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
}

static size_t count_files(const char *dir)
{
    size_t n = 0;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls -A %s 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (fscanf(p, "%zu", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

static void put_blob(struct store *s, const char *text, char digest[STORE_DIGEST_LEN + 1])
{
    struct err e = {0};
    assert_int_equal(store_blob_put(s, text, strlen(text), digest, NULL, &e), 0);
}

// A manifest with a config and the given layers (media type, text) pairs.
static void make_model(struct store *s, const char *name, const char *const *layers, size_t n)
{
    struct store_manifest m = {.schema_version = 2};
    m.media_type = xstrdup(STORE_MT_MANIFEST);
    for (size_t i = 0; i < n; i++) {
        struct store_layer l = {.media_type = (char *)layers[2 * i]};
        put_blob(s, layers[2 * i + 1], l.digest);
        l.size = (int64_t)strlen(layers[2 * i + 1]);
        store_manifest_add_layer(&m, &l);
    }
    struct store_config c = {
        .model_format = "gguf", .model_family = "llama", .model_type = "260K", .file_type = "F32"};
    char *fam[] = {"llama"};
    c.model_families = fam;
    c.n_families = 1;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(store_config_encode(&c, m.layers, m.n_layers, &b), 0);
    m.config.media_type = xstrdup(STORE_MT_CONFIG);
    put_blob(s, buf_cstr(&b), m.config.digest);
    m.config.size = (int64_t)b.len;
    buf_reset(&b);
    assert_int_equal(store_manifest_encode(&m, &b), 0);
    struct store_name nm;
    assert_int_equal(store_name_parse(name, &nm, NULL), 0);
    assert_int_equal(store_manifest_write(s, &nm, b.data, b.len, NULL), 0);
    buf_deinit(&b);
    store_manifest_deinit(&m);
}

// ---------------------------------------------------------------------------
// Names and digests.

static void test_names(void **state)
{
    (void)state;
    static const struct {
        const char *in, *host, *ns, *model, *tag, *display;
    } ok[] = {
        {"llama3.2", "registry.ollama.ai", "library", "llama3.2", "latest", "llama3.2:latest"},
        {"llama3.2:3b-instruct-q4_K_M", "registry.ollama.ai", "library", "llama3.2",
         "3b-instruct-q4_K_M", "llama3.2:3b-instruct-q4_K_M"},
        {"jmorgan/mario:v1.0", "registry.ollama.ai", "jmorgan", "mario", "v1.0",
         "jmorgan/mario:v1.0"},
        {"localhost:5000/ns/model:tag", "localhost:5000", "ns", "model", "tag",
         "localhost:5000/ns/model:tag"},
        {"http://localhost:5000/ns/model", "localhost:5000", "ns", "model", "latest",
         "localhost:5000/ns/model:latest"},
        {"Registry.Ollama.AI/Library/Llama:X", "Registry.Ollama.AI", "Library", "Llama", "X",
         "Llama:X"},
        {"_a/_b:_c", "registry.ollama.ai", "_a", "_b", "_c", "_a/_b:_c"},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct store_name n;
        struct err e = {0};
        assert_int_equal(store_name_parse(ok[i].in, &n, &e), 0);
        assert_string_equal(n.host, ok[i].host);
        assert_string_equal(n.ns, ok[i].ns);
        assert_string_equal(n.model, ok[i].model);
        assert_string_equal(n.tag, ok[i].tag);
        char d[STORE_NAME_MAX];
        store_name_display(&n, d, sizeof(d));
        assert_string_equal(d, ok[i].display);
    }
    struct store_name n;
    store_name_parse("http://localhost:5000/ns/model", &n, NULL);
    assert_string_equal(n.scheme, "http");

    char long_part[100];
    memset(long_part, 'a', 81);
    long_part[81] = '\0';
    const char *bad[] = {
        "localhost:5000/model",
        "a/b/c/d",
        "model:",
        ":tag",
        "/model",
        "ns//m",
        "model@sha256:abc",
        "",
        "..",
        "../x",
        "x/../y",
        "a/..:b",
        "ns/.hidden",
        "m:.tag",
        "m:a/b",
        "ns.dot/m",
        "-model",
        "mo del",
        "mo\\del",
        "m\xc3\xa9",
        "x:y:z",
        "@sha256:",
        long_part,
        "h/n/m:t/",
        "a//",
        "./m",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err e = {0};
        if (store_name_parse(bad[i], &n, &e) != ERR_INVALID)
            fail_msg("accepted invalid name '%s'", bad[i]);
        assert_string_equal(e.msg, "invalid model name");
    }
    struct store_name a, b;
    store_name_parse("LLAMA3.2", &a, NULL);
    store_name_parse("llama3.2:LATEST", &b, NULL);
    assert_true(store_name_eq(&a, &b));
}

static void test_digests(void **state)
{
    (void)state;
    char hex[DIGEST_HEX_LEN + 1];
    const char *good = "sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d";
    assert_int_equal(store_digest_parse(good, hex, NULL), 0);
    assert_string_equal(hex, good + 7);
    assert_int_equal(store_digest_parse("sha256-270cba1bd5109f42d03350f60406024560464db173c0e387d"
                                        "91f0426d3bd256d",
                                        hex, NULL),
                     0);
    assert_int_equal(store_digest_parse("sha256:270CBA1BD5109F42D03350F60406024560464DB173C0E387D"
                                        "91F0426D3BD256D",
                                        hex, NULL),
                     0);
    const char *bad[] = {
        "sha256:../../../../home/u/.ssh/authorized_keys",
        "sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256",
        "sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d0",
        "sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256/",
        "sha512:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d",
        "sha256_270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d",
        "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d",
        "",
        "sha256:",
        "sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd25.d",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err e = {0};
        assert_int_equal(store_digest_parse(bad[i], hex, &e), ERR_INVALID);
        assert_string_equal(e.msg, "invalid digest format");
    }
}

// ---------------------------------------------------------------------------
// Go encodings.

static void test_gojson(void **state)
{
    (void)state;
    // The params layers of llama3.2 and llama3 (store.md §6.1): bytes and digests.
    json_t *p =
        json_pack("{s:[s,s,s]}", "stop", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>");
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(gojson_value(&b, p), 0);
    buf_append_char(&b, '\n');
    assert_int_equal(b.len, 96);
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(b.data, b.len, hex);
    assert_string_equal(hex, "56bb8bd477a519ffa694fc449c2413c6f0e1d3b1c88fa7e3c9d88d3ae49d4dcb");
    json_object_set_new(p, "num_keep", json_real(24));
    buf_reset(&b);
    gojson_value(&b, p);
    buf_append_char(&b, '\n');
    assert_int_equal(b.len, 110);
    sha256_hex(b.data, b.len, hex);
    assert_string_equal(hex, "577073ffcc6ce95b9981eacc77d1039568639e5638e83044994560d9ef82ce1b");
    json_decref(p);

    static const struct {
        double v;
        const char *json, *fmt_v;
    } nums[] = {
        {0.7, "0.7", "0.7"},
        {4096, "4096", "4096"},
        {1000000, "1000000", "1e+06"},
        {0.00001, "0.00001", "1e-05"},
        {1e-7, "1e-7", "1e-07"},
        {1e21, "1e+21", "1e+21"},
        {1048576, "1048576", "1.048576e+06"},
        {-1, "-1", "-1"},
        {0, "0", "0"},
        {123456, "123456", "123456"},
        {0.1 + 0.2, "0.30000000000000004", "0.30000000000000004"},
    };
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        buf_reset(&b);
        gojson_number(&b, nums[i].v);
        assert_string_equal(buf_cstr(&b), nums[i].json);
        char out[64];
        gofmt_float(nums[i].v, false, out, sizeof(out));
        assert_string_equal(out, nums[i].fmt_v);
    }
    char out[64];
    gofmt_float(1000000, true, out, sizeof(out));
    assert_string_equal(out, "1000000");

    buf_reset(&b);
    gojson_string(&b, "a<b>&\"\\\n\t\x01\xe2\x80\xa8z\xc3\xa9");
    assert_string_equal(buf_cstr(&b),
                        "\"a\\u003cb\\u003e\\u0026\\\"\\\\\\n\\t\\u0001\\u2028z\xc3\xa9\"");
    buf_reset(&b);
    gofmt_quote(&b, "<|im_end|>\"\n");
    assert_string_equal(buf_cstr(&b), "\"<|im_end|>\\\"\\n\"");
    buf_deinit(&b);
}

// ---------------------------------------------------------------------------
// Blobs.

static void test_blob_writer(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    const char *data = "hello blob";
    char hex[DIGEST_HEX_LEN + 1], digest[STORE_DIGEST_LEN + 1], got[STORE_DIGEST_LEN + 1];
    sha256_hex(data, strlen(data), hex);
    snprintf(digest, sizeof(digest), "sha256:%s", hex);

    assert_false(store_blob_exists(f->s, digest));
    struct store_blob_writer *w;
    assert_int_equal(store_blob_writer_open(f->s, digest, &w, &e), 0);
    assert_int_equal(store_blob_writer_write(w, data, 5, &e), 0);
    assert_int_equal(store_blob_writer_write(w, data + 5, strlen(data) - 5, &e), 0);
    bool existed = true;
    assert_int_equal(store_blob_writer_commit(w, got, &existed, &e), 0);
    assert_string_equal(got, digest);
    assert_false(existed);
    assert_true(store_blob_exists(f->s, digest));
    char path[4096];
    assert_int_equal(store_blob_path(f->s, digest, path, sizeof(path), NULL), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);

    // Same bytes again: "already exists", no temp file left.
    assert_int_equal(store_blob_put(f->s, data, strlen(data), got, &existed, &e), 0);
    assert_true(existed);
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    assert_int_equal(count_files(blobs), 1);

    // Mismatch: rejected with Ollama's wording, nothing kept.
    const char *other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(store_blob_writer_open(f->s, other, &w, &e), 0);
    store_blob_writer_write(w, "evil", 4, &e);
    err_clear(&e);
    assert_int_equal(store_blob_writer_commit(w, got, NULL, &e), ERR_DIGEST);
    char expect[300], evil_hex[DIGEST_HEX_LEN + 1];
    sha256_hex("evil", 4, evil_hex);
    snprintf(expect, sizeof(expect), "digest mismatch, expected \"%s\", got \"sha256:%s\"", other,
             evil_hex);
    assert_string_equal(e.msg, expect);
    assert_int_equal(count_files(blobs), 1);

    // Abort removes the temp file.
    assert_int_equal(store_blob_writer_open(f->s, NULL, &w, &e), 0);
    store_blob_writer_write(w, "partial", 7, &e);
    assert_int_equal(count_files(blobs), 2);
    store_blob_writer_abort(w);
    assert_int_equal(count_files(blobs), 1);

    // Traversal digests never become paths.
    err_clear(&e);
    assert_int_equal(store_blob_writer_open(f->s, "sha256:../../etc/passwd", &w, &e), ERR_INVALID);
    assert_string_equal(e.msg, "invalid digest format");
    assert_false(store_blob_exists(f->s, "sha256-../../../etc/passwd"));
    assert_int_equal(store_blob_path(f->s, "sha256:../x", path, sizeof(path), NULL), ERR_INVALID);
}

// ---------------------------------------------------------------------------
// Manifests.

static void test_manifest_roundtrip(void **state)
{
    (void)state;
    const char *text =
        "{\"schemaVersion\":2,\"mediaType\":\"application/"
        "vnd.docker.distribution.manifest.v2+json\","
        "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"digest\":"
        "\"sha256:1111111111111111111111111111111111111111111111111111111111111111\",\"size\":488},"
        "\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"sha256:"
        "2222222222222222222222222222222222222222222222222222222222222222\",\"size\":2019377376,"
        "\"from\":\"llama3.2:latest\"},{\"mediaType\":\"application/vnd.ollama.image.system\","
        "\"digest\":\"sha256:3333333333333333333333333333333333333333333333333333333333333333\","
        "\"size\":36}]}\n";
    struct store_manifest m;
    struct err e = {0};
    assert_int_equal(store_manifest_parse(text, strlen(text), &m, &e), 0);
    assert_int_equal(m.n_layers, 2);
    assert_string_equal(m.layers[0].from, "llama3.2:latest");
    assert_null(m.layers[1].from);
    assert_int_equal(m.layers[0].size, 2019377376);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(store_manifest_encode(&m, &b), 0);
    assert_string_equal(buf_cstr(&b), text);
    buf_deinit(&b);
    store_manifest_deinit(&m);

    // A hostile registry's traversal digest is refused (CVE-2024-37032).
    const char *evil = "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\",\"digest\":"
                       "\"sha256:../../../../home/u/.ssh/authorized_keys\",\"size\":1}]}";
    assert_int_equal(store_manifest_parse(evil, strlen(evil), &m, &e), ERR_INVALID);
    err_clear(&e);
    assert_int_equal(store_manifest_parse("{\"layers\":", 10, &m, &e), ERR_FORMAT);
}

static void test_list_copy_delete(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    const char *a[] = {STORE_MT_MODEL,  "weights-a",      STORE_MT_TEMPLATE,
                       "{{ .Prompt }}", STORE_MT_LICENSE, "MIT"};
    const char *b[] = {STORE_MT_MODEL, "weights-b", STORE_MT_TEMPLATE, "{{ .Prompt }}"};
    make_model(f->s, "alpha", a, 3);
    make_model(f->s, "team/Beta:v1", b, 2);

    // Same second: walk order (lexical) kept.
    char pa[4096], pb[4096];
    snprintf(pa, sizeof(pa), "%s/manifests/registry.ollama.ai/library/alpha/latest", f->root);
    snprintf(pb, sizeof(pb), "%s/manifests/registry.ollama.ai/team/Beta/v1", f->root);
    struct timespec ts[2] = {{.tv_sec = 1700000000, .tv_nsec = 5},
                             {.tv_sec = 1700000000, .tv_nsec = 5}};
    utimensat(AT_FDCWD, pa, ts, 0);
    ts[0].tv_nsec = ts[1].tv_nsec = 900000000;
    utimensat(AT_FDCWD, pb, ts, 0);
    struct store_list l;
    assert_int_equal(store_list(f->s, &l, &e), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].name, "alpha:latest");
    assert_string_equal(l.items[1].name, "team/Beta:v1");
    assert_string_equal(l.items[0].config.model_family, "llama");
    assert_int_equal(strlen(l.items[0].digest), 64);
    assert_true(l.items[0].size > strlen("weights-a"));
    store_list_deinit(&l);
    // Most recently modified first.
    ts[0].tv_sec = ts[1].tv_sec = 1700000001;
    utimensat(AT_FDCWD, pb, ts, 0);
    assert_int_equal(store_list(f->s, &l, &e), 0);
    assert_string_equal(l.items[0].name, "team/Beta:v1");
    store_list_deinit(&l);

    json_t *tags;
    assert_int_equal(store_tags_json(f->s, &tags, &e), 0);
    json_t *m0 = json_array_get(json_object_get(tags, "models"), 1);
    assert_string_equal(json_string_value(json_object_get(m0, "model")), "alpha:latest");
    json_t *det = json_object_get(m0, "details");
    assert_string_equal(json_string_value(json_object_get(det, "format")), "gguf");
    assert_string_equal(json_string_value(json_object_get(det, "parameter_size")), "260K");
    assert_string_equal(json_string_value(json_object_get(det, "quantization_level")), "F32");
    assert_string_equal(json_string_value(json_array_get(json_object_get(det, "families"), 0)),
                        "llama");
    json_decref(tags);

    // Case-insensitive lookup keeps the on-disk spelling.
    struct store_name n;
    store_name_parse("TEAM/beta:V1", &n, NULL);
    assert_int_equal(store_name_canonicalize(f->s, &n, &e), 0);
    assert_string_equal(n.ns, "team");
    assert_string_equal(n.model, "Beta");
    assert_string_equal(n.tag, "v1");

    // Copy: errors, then a byte-identical manifest.
    assert_int_equal(store_copy(f->s, "bad name", "x", &e), ERR_INVALID);
    assert_string_equal(e.msg, "source \"bad name\" is invalid");
    err_clear(&e);
    assert_int_equal(store_copy(f->s, "alpha", "../x", &e), ERR_INVALID);
    assert_string_equal(e.msg, "destination \"../x\" is invalid");
    err_clear(&e);
    assert_int_equal(store_copy(f->s, "nothere", "x", &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "model \"nothere\" not found");
    err_clear(&e);
    assert_int_equal(store_copy(f->s, "ALPHA", "alpha-copy", &e), 0);
    assert_int_equal(store_copy(f->s, "alpha", "alpha", &e), 0);  // same path: nothing to do
    char p1[4096], p2[4096];
    snprintf(p1, sizeof(p1), "%s/manifests/registry.ollama.ai/library/alpha/latest", f->root);
    snprintf(p2, sizeof(p2), "%s/manifests/registry.ollama.ai/library/alpha-copy/latest", f->root);
    struct buf x, y;
    buf_init(&x, 0);
    buf_init(&y, 0);
    fs_read_all(p1, 1 << 20, &x, NULL);
    fs_read_all(p2, 1 << 20, &y, NULL);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    buf_deinit(&x);
    buf_deinit(&y);

    // Delete: errors; shared blobs stay while referenced.
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    size_t before = count_files(blobs);
    assert_int_equal(store_delete(f->s, "a/../b", &e), ERR_INVALID);
    assert_string_equal(e.msg, "name \"a/../b\" is invalid");
    err_clear(&e);
    assert_int_equal(store_delete(f->s, "ghost", &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "model 'ghost' not found");
    err_clear(&e);
    assert_int_equal(store_delete(f->s, "alpha", &e), 0);
    assert_int_equal(count_files(blobs), before);  // alpha-copy still uses them
    assert_int_equal(store_delete(f->s, "alpha-copy", &e), 0);
    // weights-a, license, alpha's config go; the shared template stays for Beta.
    assert_int_equal(count_files(blobs), before - 3);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/manifests/registry.ollama.ai/library", f->root);
    assert_false(fs_exists(dir));  // empty directories removed

    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, &e), 0);
    assert_true(store_check_ok(&r));
    store_check_report_deinit(&r);
    assert_int_equal(store_delete(f->s, "team/beta:v1", &e), 0);
    assert_int_equal(count_files(blobs), 0);
}

static void test_check_and_prune(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    const char *a[] = {STORE_MT_MODEL, "weights", STORE_MT_SYSTEM, "be nice"};
    make_model(f->s, "m", a, 2);
    char orphan[STORE_DIGEST_LEN + 1], path[4096];
    put_blob(f->s, "orphan", orphan);
    snprintf(path, sizeof(path), "%s/blobs/sha256-tmp-abc", f->root);
    write_file(path, "x", 1);
    // A missing blob: remove the system layer's file.
    char sys[STORE_DIGEST_LEN + 1];
    put_blob(f->s, "be nice", sys);
    store_blob_path(f->s, sys, path, sizeof(path), NULL);
    unlink(path);
    // A stray file at depth 4 with an invalid name, and one at depth 3.
    snprintf(path, sizeof(path), "%s/manifests/registry.ollama.ai/library/m/.DS_Store", f->root);
    write_file(path, "junk", 4);
    snprintf(path, sizeof(path), "%s/manifests/registry.ollama.ai/library/stray", f->root);
    write_file(path, "junk", 4);

    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, &e), 0);
    assert_false(store_check_ok(&r));
    assert_int_equal(r.n_orphaned, 1);
    assert_int_equal(r.n_missing, 1);
    assert_string_equal(r.missing[0] + strlen(r.missing[0]) - 71, sys);
    assert_int_equal(r.n_temporary, 1);
    assert_int_equal(r.n_corrupt, 0);
    store_check_report_deinit(&r);

    struct store_list l;
    assert_int_equal(store_list(f->s, &l, &e), 0);
    assert_int_equal(l.n, 1);  // .DS_Store skipped
    store_list_deinit(&l);

    // Grace period keeps young files; with none, orphans and temp files go.
    assert_int_equal(store_prune(f->s, 3600LL * 1000000000, &e), 0);
    int removed = store_prune(f->s, 0, &e);
    assert_int_equal(removed, 2);
    assert_int_equal(store_check(f->s, &r, &e), 0);
    assert_int_equal(r.n_orphaned, 0);
    assert_int_equal(r.n_temporary, 0);
    store_check_report_deinit(&r);

    // A corrupt manifest: reported, and start-up prune is skipped entirely.
    put_blob(f->s, "orphan2", orphan);
    struct store_name n;
    store_name_parse("broken", &n, NULL);
    store_manifest_write(f->s, &n, "{\"schemaVersion\":2,\"lay", 22, &e);
    assert_int_equal(store_check(f->s, &r, &e), 0);
    assert_int_equal(r.n_corrupt, 1);
    store_check_report_deinit(&r);
    assert_int_equal(store_prune(f->s, 0, &e), 0);
    assert_true(store_blob_exists(f->s, orphan));
    // Corrupt manifests are skipped by list, and delete reports them as I/O errors.
    assert_int_equal(store_list(f->s, &l, &e), 0);
    assert_int_equal(l.n, 1);
    store_list_deinit(&l);
    assert_int_equal(store_delete(f->s, "broken", &e), ERR_IO);
}

static void test_open_legacy_names(void **state)
{
    struct fx *f = *state;
    char path[4096];
    const char *hex = "4444444444444444444444444444444444444444444444444444444444444444";
    snprintf(path, sizeof(path), "%s/blobs/sha256:%s", f->root, hex);
    write_file(path, "x", 1);
    struct store *s2;
    assert_int_equal(store_open(&s2, f->root, NULL), 0);
    char d[80];
    snprintf(d, sizeof(d), "sha256:%s", hex);
    assert_true(store_blob_exists(s2, d));
    store_close(s2);

    setenv("OLLAMA_MODELS", "  \"/srv/models\"  ", 1);
    store_default_root(path, sizeof(path));
    assert_string_equal(path, "/srv/models");
    unsetenv("OLLAMA_MODELS");
}

// ---------------------------------------------------------------------------
// An Ollama-written store (tests/fixtures/store) and show.

#define STORIES_DIGEST "sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"

static const char *stories_path(char *out, size_t n)
{
    test_fixture(out, n, "stories260K.gguf");
    struct stat st;
    return stat(out, &st) == 0 ? out : NULL;
}

// Uploads a file through the streaming blob writer, as POST /api/blobs does.
static void upload_file(struct store *s, const char *path, const char *digest)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(path, 64u << 20, &b, NULL), 0);
    struct store_blob_writer *w;
    struct err e = {0};
    assert_int_equal(store_blob_writer_open(s, digest, &w, &e), 0);
    for (size_t off = 0; off < b.len; off += 65536) {
        size_t n = b.len - off < 65536 ? b.len - off : 65536;
        assert_int_equal(store_blob_writer_write(w, b.data + off, n, &e), 0);
    }
    assert_int_equal(store_blob_writer_commit(w, NULL, NULL, &e), 0);
    buf_deinit(&b);
}

// Writes a LoRA adapter for stories260K (llama, n_embd 64): one rank-2 pair
// on blk.0.attn_q.weight whose lora_b has n_out rows (64 fits), uploads it
// and gives its digest ("sha256:<hex>").
static void upload_lora(struct store *s, const char *dir, const char *arch, int64_t n_out,
                        char digest[DIGEST_HEX_LEN + 8])
{
    char path[512], hex[DIGEST_HEX_LEN + 1];
    snprintf(path, sizeof(path), "%s/lora-%s-%lld.gguf", dir, arch, (long long)n_out);
    struct gguf_writer *w;
    struct err e = {0};
    assert_int_equal(gguf_writer_open(&w, path, &e), 0);
    gguf_writer_kv_str(w, "general.architecture", arch);
    gguf_writer_kv_str(w, "general.type", "adapter");
    gguf_writer_kv_str(w, "adapter.type", "lora");
    gguf_writer_kv_f32(w, "adapter.lora.alpha", 4.0f);
    const int64_t ne_a[2] = {64, 2}, ne_b[2] = {2, n_out};
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight.lora_a", GGUF_TYPE_F32, 2, ne_a);
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight.lora_b", GGUF_TYPE_F32, 2, ne_b);
    assert_int_equal(gguf_writer_write_header(w, &e), 0);
    float v[128];
    for (int i = 0; i < 128; i++)
        v[i] = 0.01f * (float)(i % 7);
    assert_int_equal(gguf_writer_write_data(w, v, sizeof(v), &e), 0);
    assert_int_equal(gguf_writer_write_data(w, v, (size_t)(2 * n_out) * sizeof(float), &e), 0);
    assert_int_equal(gguf_writer_close(w, &e), 0);
    assert_int_equal(sha256_file(path, hex, NULL, &e), 0);
    digest_format(hex, digest);
    upload_file(s, path, digest);
    unlink(path);
}

static int setup_ollama(void **state)
{
    if (setup(state) < 0)
        return -1;
    struct fx *f = *state;
    char cmd[1024], src[512];
    snprintf(cmd, sizeof(cmd), "cp -r %s/. %s/ && rm -f %s/README.md",
             test_fixture(src, sizeof(src), "store"), f->root, f->root);
    if (system(cmd) != 0)
        return -1;
    char model[512];
    if (stories_path(model, sizeof(model)))
        upload_file(f->s, model, STORIES_DIGEST);
    return 0;
}

static void test_ollama_store_list(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    struct store_list l;
    assert_int_equal(store_list(f->s, &l, &e), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].name, "jmorgan/pirate:v1");
    assert_string_equal(l.items[1].name, "stories:latest");
    const struct store_entry *st = &l.items[1];
    assert_int_equal(st->size, 1185376 + 95 + 48 + 96 + 484);
    assert_string_equal(st->config.model_type, "293K");
    assert_string_equal(st->config.file_type, "F32");
    char path[4096], hex[DIGEST_HEX_LEN + 1];
    snprintf(path, sizeof(path), "%s/manifests/registry.ollama.ai/library/stories/latest", f->root);
    uint64_t sz;
    struct buf b;
    buf_init(&b, 0);
    fs_read_all(path, 1 << 20, &b, NULL);
    sha256_hex(b.data, b.len, hex);
    assert_string_equal(st->digest, hex);
    (void)sz;
    buf_deinit(&b);
    assert_string_equal(l.items[0].config.requires, "0.14.0");
    assert_int_equal(l.items[0].config.context_length, 2048);
    store_list_deinit(&l);

    // Our encoder reproduces the bytes Ollama wrote for a created model.
    snprintf(path, sizeof(path), "%s/manifests/registry.ollama.ai/jmorgan/pirate/v1", f->root);
    buf_init(&b, 0);
    fs_read_all(path, 1 << 20, &b, NULL);
    struct store_manifest m;
    assert_int_equal(store_manifest_parse(b.data, b.len, &m, &e), 0);
    struct buf enc;
    buf_init(&enc, 0);
    store_manifest_encode(&m, &enc);
    assert_string_equal(buf_cstr(&enc), buf_cstr(&b));
    store_manifest_deinit(&m);
    buf_deinit(&enc);
    buf_deinit(&b);

    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, &e), 0);
    if (stories_path(path, sizeof(path)))
        assert_true(store_check_ok(&r));
    store_check_report_deinit(&r);
}

static void test_ollama_store_show(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    struct err e = {0};
    json_t *r;
    assert_int_equal(store_show(f->s, "JMorgan/Pirate:V1", NULL, &r, &e), 0);
    char expect[4096];
    snprintf(
        expect, sizeof(expect),
        "# Modelfile generated by \"ollama show\"\n"
        "# To build a new Modelfile based on this, replace FROM with:\n"
        "# FROM jmorgan/pirate:v1\n\n"
        "FROM %s/blobs/sha256-270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d\n"
        "TEMPLATE \"{{ if .System }}<|system|>\n{{ .System }}</s>\n{{ end }}<|user|>\n"
        "{{ .Prompt }}</s>\n<|assistant|>\n\"\n"
        "SYSTEM You are a pirate. Answer <briefly> & \"kindly\".\n"
        "PARAMETER num_ctx 4096\n"
        "PARAMETER stop <|start_header_id|>\n"
        "PARAMETER stop <|end_header_id|>\n"
        "PARAMETER stop <|eot_id|>\n"
        "PARAMETER temperature 0.7\n"
        "LICENSE \"MIT License\n\nCopyright (c) 2023 Andrej Karpathy\n\"\n"
        "MESSAGE user Who are you?\n"
        "MESSAGE assistant Arr, a pirate!\n",
        f->root);
    assert_string_equal(json_string_value(json_object_get(r, "modelfile")), expect);
    assert_string_equal(json_string_value(json_object_get(r, "parameters")),
                        "num_ctx                        4096\n"
                        "stop                           \"<|start_header_id|>\"\n"
                        "stop                           \"<|end_header_id|>\"\n"
                        "stop                           \"<|eot_id|>\"\n"
                        "temperature                    0.7");
    assert_string_equal(json_string_value(json_object_get(r, "system")),
                        "You are a pirate. Answer <briefly> & \"kindly\".");
    assert_string_equal(json_string_value(json_object_get(r, "license")),
                        "MIT License\n\nCopyright (c) 2023 Andrej Karpathy\n");
    assert_string_equal(json_string_value(json_object_get(r, "requires")), "0.14.0");
    json_t *det = json_object_get(r, "details");
    assert_string_equal(json_string_value(json_object_get(det, "parent_model")), "stories:latest");
    assert_string_equal(json_string_value(json_object_get(det, "parameter_size")), "293K");
    json_t *info = json_object_get(r, "model_info");
    assert_int_equal(json_integer_value(json_object_get(info, "llama.context_length")), 2048);
    assert_string_equal(json_string_value(json_object_get(info, "general.architecture")), "llama");
    assert_null(json_object_get(info, "general.name"));
    assert_int_equal(json_array_size(json_object_get(info, "tokenizer.ggml.tokens")), 0);
    assert_true(json_real_value(json_object_get(info, "llama.attention.layer_norm_rms_epsilon")) ==
                1e-05);
    json_t *caps = json_object_get(r, "capabilities");
    assert_int_equal(json_array_size(caps), 1);
    assert_string_equal(json_string_value(json_array_get(caps, 0)), "completion");
    json_t *msgs = json_object_get(r, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_int_equal(json_array_size(json_object_get(r, "tensors")), 48);
    assert_non_null(json_object_get(r, "modified_at"));
    json_decref(r);

    // verbose keeps arrays; system and options override.
    json_t *opts = json_pack("{s:f}", "temperature", 0.1);
    struct store_show_opts o = {.verbose = true, .system = "Be brief.", .options = opts};
    assert_int_equal(store_show(f->s, "stories", &o, &r, &e), 0);
    info = json_object_get(r, "model_info");
    assert_int_equal(json_array_size(json_object_get(info, "tokenizer.ggml.tokens")), 512);
    const char *mf = json_string_value(json_object_get(r, "modelfile"));
    assert_non_null(strstr(mf, "SYSTEM Be brief.\n"));
    assert_non_null(strstr(mf, "PARAMETER temperature 0.1\n"));
    assert_string_equal(json_string_value(json_object_get(r, "system")), "Be brief.");
    assert_null(json_object_get(r, "messages"));
    json_decref(r);
    json_decref(opts);

    assert_int_equal(store_show(f->s, "nothere", NULL, &r, &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "model 'nothere:latest' not found");
    err_clear(&e);
    assert_int_equal(store_show(f->s, "bad/../name", NULL, &r, &e), ERR_INVALID);
    assert_string_equal(e.msg, "invalid model name");
}

// ---------------------------------------------------------------------------
// Create.

struct statuses {
    char lines[64][160];
    size_t n;
    uint64_t quant_total, quant_completed, quant_reports;
    bool quant_digest_ok;
    volatile int *cancel_on_new;  // set when a "creating new layer" status is seen
};

static void collect(void *ctx, const struct store_progress *p)
{
    struct statuses *st = ctx;
    if (strncmp(p->status, "quantizing ", 11) == 0) {
        st->quant_total = p->total;
        st->quant_completed = p->completed;
        st->quant_digest_ok = p->digest && strcmp(p->digest, "0000000000000000000") == 0;
        if (st->quant_reports++ > 0)
            return;
    }
    if (st->n < 64)
        snprintf(st->lines[st->n++], sizeof(st->lines[0]), "%s", p->status);
    if (st->cancel_on_new && strncmp(p->status, "creating new layer", 18) == 0)
        *st->cancel_on_new = 1;
}

static bool has_status(const struct statuses *st, const char *s)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->lines[i], s) == 0)
            return true;
    return false;
}

static int create_json(struct store *s, const char *body, struct statuses *st, struct err *e)
{
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    if (!j)
        fail_msg("bad test json: %s", je.text);
    struct store_create_req r;
    int rc = store_create_req_from_json(&r, j, e);
    json_decref(j);
    if (rc == 0) {
        struct store_create_opts o = {.progress = st ? collect : NULL, .progress_ctx = st};
        if (st && st->cancel_on_new)
            o.cancel = st->cancel_on_new;
        rc = store_create(s, &r, &o, e);
    }
    store_create_req_deinit(&r);
    return rc;
}

static void manifest_digest(struct fx *f, const char *name, char hex[DIGEST_HEX_LEN + 1])
{
    struct store_name n;
    struct store_manifest m;
    struct store_manifest_info info;
    assert_int_equal(store_name_parse(name, &n, NULL), 0);
    assert_int_equal(store_manifest_load(f->s, &n, &m, &info, NULL), 0);
    memcpy(hex, info.digest, DIGEST_HEX_LEN + 1);
    store_manifest_deinit(&m);
}

static int setup_stories(void **state)
{
    if (setup(state) < 0)
        return -1;
    struct fx *f = *state;
    char model[512];
    if (stories_path(model, sizeof(model)))
        upload_file(f->s, model, STORIES_DIGEST);
    return 0;
}

// A create of "badlora" with an adapter that does not fit: refused with msg,
// and neither a blob nor the model is left.
static void expect_adapter_refused(struct fx *f, const char *body, const char *msg)
{
    struct err e = {0};
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    size_t before = count_files(blobs);
    assert_int_equal(create_json(f->s, body, NULL, &e), ERR_INVALID);
    if (strcmp(e.msg, msg) != 0)
        fail_msg("message '%s', want '%s'", e.msg, msg);
    assert_int_equal(count_files(blobs), before);
    struct store_model *m = NULL;
    assert_true(store_model_load(f->s, "badlora", &m, &e) < 0);
}

static void test_create_from_files(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    struct err e = {0};
    struct statuses st = {0};
    const char *body =
        "{\"model\":\"tiny\",\"files\":{\"stories260K.gguf\":\"" STORIES_DIGEST "\"},"
        "\"template\":\"{{ .System }} {{ .Prompt }}\",\"system\":\"Be a pirate.\","
        "\"parameters\":{\"temperature\":0.7,\"num_ctx\":8192,\"stop\":[\"<|im_end|>\"]},"
        "\"messages\":[{\"role\":\"User\",\"content\":\"hi\"}],"
        "\"license\":[\"MIT\",\"\"]}";
    assert_int_equal(create_json(f->s, body, &st, &e), 0);
    assert_true(has_status(&st, "parsing GGUF"));
    assert_true(has_status(&st, "using existing layer " STORIES_DIGEST));
    assert_true(has_status(&st, "writing manifest"));
    assert_string_equal(st.lines[st.n - 1], "success");
    size_t n_new = 0;
    for (size_t i = 0; i < st.n; i++)
        n_new += strncmp(st.lines[i], "creating new layer", 18) == 0;
    assert_int_equal(n_new, 5);  // template, system, license, params, messages

    struct store_model *m;
    assert_int_equal(store_model_load(f->s, "tiny", &m, &e), 0);
    assert_string_equal(m->template_text, "{{ .System }} {{ .Prompt }}");
    assert_string_equal(m->system, "Be a pirate.");
    assert_int_equal(m->n_licenses, 1);
    assert_string_equal(m->parent_model, "stories260K.gguf");
    assert_string_equal(m->config.model_family, "llama");
    assert_string_equal(m->config.model_type, "293K");
    // stories260K has no general.file_type: Ollama labels it "unknown".
    assert_string_equal(m->config.file_type, "unknown");
    assert_int_equal(m->config.n_families, 1);
    assert_int_equal(m->manifest.n_layers, 6);
    static const char *const order[] = {STORE_MT_MODEL,   STORE_MT_TEMPLATE, STORE_MT_SYSTEM,
                                        STORE_MT_LICENSE, STORE_MT_PARAMS,   STORE_MT_MESSAGES};
    for (size_t i = 0; i < 6; i++)
        assert_string_equal(m->manifest.layers[i].media_type, order[i]);
    // Params and messages blobs are byte-exact Go encodings.
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(store_blob_read(f->s, m->manifest.layers[4].digest, 4096, &b, NULL), 0);
    assert_string_equal(
        buf_cstr(&b),
        "{\"num_ctx\":8192,\"stop\":[\"\\u003c|im_end|\\u003e\"],\"temperature\":0.7}\n");
    buf_reset(&b);
    assert_int_equal(store_blob_read(f->s, m->manifest.layers[5].digest, 4096, &b, NULL), 0);
    assert_string_equal(buf_cstr(&b), "[{\"role\":\"user\",\"content\":\"hi\"}]\n");
    buf_reset(&b);
    assert_int_equal(store_blob_read(f->s, m->manifest.config.digest, 4096, &b, NULL), 0);
    assert_non_null(strstr(buf_cstr(&b), "{\"model_format\":\"gguf\",\"model_family\":\"llama\","
                                         "\"model_families\":[\"llama\"],\"model_type\":\"293K\","
                                         "\"file_type\":\"unknown\",\"architecture\":\"amd64\","
                                         "\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\","
                                         "\"diff_ids\":[\"" STORIES_DIGEST "\""));
    buf_deinit(&b);
    store_model_free(m);

    // Identical inputs: identical digests, every layer reused.
    char d1[DIGEST_HEX_LEN + 1], d2[DIGEST_HEX_LEN + 1];
    manifest_digest(f, "tiny", d1);
    memset(&st, 0, sizeof(st));
    assert_int_equal(create_json(f->s, body, &st, &e), 0);
    manifest_digest(f, "tiny", d2);
    assert_string_equal(d1, d2);
    for (size_t i = 0; i < st.n; i++)
        assert_true(strncmp(st.lines[i], "creating new layer", 18) != 0);

    // FROM an existing model: layers copied with "from", system replaced,
    // params merged (request wins, inherited keys kept).
    memset(&st, 0, sizeof(st));
    assert_int_equal(create_json(f->s,
                                 "{\"model\":\"tiny2\",\"from\":\"TINY\",\"system\":\"Be brief.\","
                                 "\"parameters\":{\"temperature\":0.2}}",
                                 &st, &e),
                     0);
    assert_true(has_status(&st, "reading model metadata"));
    assert_int_equal(store_model_load(f->s, "tiny2", &m, &e), 0);
    assert_string_equal(m->system, "Be brief.");
    assert_string_equal(m->parent_model, "tiny:latest");
    assert_int_equal(json_integer_value(json_object_get(m->params, "num_ctx")), 8192);
    assert_true(json_real_value(json_object_get(m->params, "temperature")) == 0.2);
    assert_int_equal(m->manifest.n_layers, 6);
    assert_string_equal(m->manifest.layers[0].from, "tiny:latest");
    assert_null(m->manifest.layers[5].from);  // the new params layer
    store_model_free(m);

    // Overwriting a name removes the old manifest's now-unused blobs.
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    assert_int_equal(
        create_json(f->s, "{\"model\":\"tiny2\",\"from\":\"tiny\",\"system\":\"X\"}", NULL, &e), 0);
    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, &e), 0);
    assert_true(store_check_ok(&r));
    store_check_report_deinit(&r);

    // A Modelfile-derived request (CLI path): same result as the JSON one.
    struct store_modelfile mf;
    const char *text = "FROM tiny\nSYSTEM \"\"\"X\"\"\"\n";
    assert_int_equal(store_modelfile_parse(text, strlen(text), &mf, &e), 0);
    json_t *req;
    assert_int_equal(store_modelfile_to_request(&mf, &req, &e), 0);
    json_object_set_new(req, "model", json_string("tiny3"));
    struct store_create_req cr;
    assert_int_equal(store_create_req_from_json(&cr, req, &e), 0);
    assert_int_equal(store_create(f->s, &cr, NULL, &e), 0);
    store_create_req_deinit(&cr);
    json_decref(req);
    store_modelfile_deinit(&mf);
    manifest_digest(f, "tiny2", d1);
    manifest_digest(f, "tiny3", d2);
    assert_string_equal(d1, d2);

    // Legacy "modelfile" request naming a model: accepted, same layers.
    assert_int_equal(
        create_json(f->s, "{\"model\":\"tiny4\",\"modelfile\":\"FROM tiny\\nSYSTEM X\"}", NULL, &e),
        0);
    manifest_digest(f, "tiny4", d2);
    assert_string_equal(d1, d2);

    // An adapter layer, shown as ADAPTER in the generated Modelfile.
    char lora[DIGEST_HEX_LEN + 8], lbody[512];
    upload_lora(f->s, f->root, "llama", 64, lora);
    snprintf(lbody, sizeof(lbody),
             "{\"model\":\"withlora\",\"from\":\"tiny\",\"adapters\":{\"lora.gguf\":\"%s\"}}",
             lora);
    assert_int_equal(create_json(f->s, lbody, NULL, &e), 0);
    assert_int_equal(store_model_load(f->s, "withlora", &m, &e), 0);
    assert_int_equal(m->n_adapters, 1);
    // Base layers first, then the adapter, then the (re-added) merged params
    // layer (modelfile.md §4.5).
    assert_int_equal(m->manifest.n_layers, 7);
    assert_string_equal(m->manifest.layers[5].media_type, STORE_MT_ADAPTER);
    assert_string_equal(m->manifest.layers[5].from, "lora.gguf");
    assert_string_equal(m->manifest.layers[6].media_type, STORE_MT_PARAMS);
    struct buf mfb;
    buf_init(&mfb, 0);
    store_show_modelfile(m, NULL, NULL, &mfb);
    assert_non_null(strstr(buf_cstr(&mfb), "\nADAPTER "));
    assert_non_null(strstr(buf_cstr(&mfb), "# FROM withlora:latest\n"));
    buf_deinit(&mfb);
    store_model_free(m);

    // An adapter for another architecture or shape, or a model file given as
    // an adapter, is refused and nothing is stored.
    const struct {
        const char *arch;
        int64_t n_out;
        const char *msg;
    } bad[] = {
        {"qwen2", 64,
         "invalid adapter \"lora.gguf\": model arch and LoRA arch mismatch: the adapter is for "
         "\"qwen2\", the model is \"llama\""},
        {"llama", 32,
         "invalid adapter \"lora.gguf\": LoRA tensor blk.0.attn_q.weight has incorrect shape: "
         "the model's is [64, 64], the adapter's lora_a [64, 2] and lora_b [2, 32]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        upload_lora(f->s, f->root, bad[i].arch, bad[i].n_out, lora);
        snprintf(lbody, sizeof(lbody),
                 "{\"model\":\"badlora\",\"from\":\"tiny\",\"adapters\":{\"lora.gguf\":\"%s\"}}",
                 lora);
        expect_adapter_refused(f, lbody, bad[i].msg);
    }
    expect_adapter_refused(
        f,
        "{\"model\":\"badlora\",\"from\":\"tiny\","
        "\"adapters\":{\"lora.gguf\":\"" STORIES_DIGEST "\"}}",
        "invalid adapter \"lora.gguf\": not a LoRA adapter: general.type is \"\", "
        "expected \"adapter\"");
}

static void expect_create_error(struct fx *f, const char *body, int code, const char *msg)
{
    struct err e = {0};
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    size_t before = count_files(blobs);
    int rc = create_json(f->s, body, NULL, &e);
    if (rc != code)
        fail_msg("%s: rc %d (%s), want %d", body, rc, e.msg, code);
    if (msg && strcmp(e.msg, msg) != 0)
        fail_msg("%s: message '%s', want '%s'", body, e.msg, msg);
    // Nothing partial: no new blob, no manifest, the store stays consistent.
    assert_int_equal(count_files(blobs), before);
    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, NULL), 0);
    assert_int_equal(r.n_missing + r.n_corrupt + r.n_temporary, 0);
    store_check_report_deinit(&r);
    struct store_list l;
    assert_int_equal(store_list(f->s, &l, NULL), 0);
    assert_int_equal(l.n, 0);
    store_list_deinit(&l);
}

#define SERVER_PATH_MSG                                                                            \
    "the server does not read files by path: upload them with /api/blobs/:digest and name them "   \
    "in \"files\""

static void test_create_bad_input(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    const char *F = "\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"}";
    char body[1024];
    expect_create_error(f, "{\"model\":\"bad name\",\"files\":{}}", ERR_INVALID,
                        "invalid model name");
    expect_create_error(f, "{\"model\":\"../../etc\",\"from\":\"x\"}", ERR_INVALID,
                        "invalid model name");
    expect_create_error(f, "{\"model\":\"a/b/c/d\",\"from\":\"x\"}", ERR_INVALID,
                        "invalid model name");
    expect_create_error(f, "{\"model\":\"m:..\",\"from\":\"x\"}", ERR_INVALID,
                        "invalid model name");
    expect_create_error(f, "{\"from\":\"x\"}", ERR_INVALID, "invalid model name");
    expect_create_error(f, "{\"model\":\"m\"}", ERR_INVALID,
                        "neither 'from' or 'files' was specified");
    expect_create_error(f, "{\"model\":\"m\",\"from\":\"unknown\"}", ERR_NOT_FOUND,
                        "model 'unknown:latest' not found");
    expect_create_error(f, "{\"model\":\"m\",\"from\":\"bad/../from\"}", ERR_INVALID,
                        "invalid model name");
    const char *escapes[] = {"../m.gguf", "/etc/passwd", "a/../../m.gguf", "a//b", "./m.gguf", "a/",
                             ""};
    for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"files\":{\"%s\":\"%s\"}}", escapes[i],
                 STORIES_DIGEST);
        expect_create_error(f, body, ERR_INVALID, "file path must be relative");
    }
    expect_create_error(f, "{\"model\":\"m\",\"files\":{\"m.gguf\":\"\"}}", ERR_INVALID,
                        "invalid digest format");
    expect_create_error(f,
                        "{\"model\":\"m\",\"files\":{\"m.gguf\":\"sha256:../../../etc/passwd\"}}",
                        ERR_INVALID, "invalid digest format");
    expect_create_error(f, "{\"model\":\"m\",\"adapters\":{\"a.gguf\":\"\"},\"from\":\"x\"}",
                        ERR_INVALID, "invalid digest format");
    expect_create_error(f,
                        "{\"model\":\"m\",\"files\":{\"m.gguf\":\"sha256:"
                        "0000000000000000000000000000000000000000000000000000000000000000\"}}",
                        ERR_INVALID, NULL);
    // Legacy server paths: one message whether or not the path exists.
    expect_create_error(f, "{\"model\":\"m\",\"path\":\"/etc/passwd\"}", ERR_INVALID,
                        SERVER_PATH_MSG);
    expect_create_error(f, "{\"model\":\"m\",\"path\":\"/nonexistent/x\"}", ERR_INVALID,
                        SERVER_PATH_MSG);
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"modelfile\":\"FROM %s\"}", model);
    expect_create_error(f, body, ERR_INVALID, SERVER_PATH_MSG);
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM /nonexistent/model.gguf\"}",
                        ERR_INVALID, SERVER_PATH_MSG);
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM ./model.gguf\"}", ERR_INVALID,
                        SERVER_PATH_MSG);
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM x\\nADAPTER /etc/passwd\"}",
                        ERR_INVALID, SERVER_PATH_MSG);
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM @sha256:" STORIES_DIGEST "\"}",
                        ERR_INVALID, SERVER_PATH_MSG);
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM x\\nBOGUS y\"}", ERR_INVALID,
                        "(line 2): command must be one of \"from\", \"license\", \"template\", "
                        "\"system\", \"adapter\", \"draft\", \"renderer\", \"parser\", "
                        "\"parameter\", \"message\", or \"requires\"");
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"SYSTEM x\"}", ERR_INVALID,
                        "no FROM line");
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM x\\nPARAMETER bogus 1\"}",
                        ERR_INVALID, "unknown parameter 'bogus'");
    expect_create_error(f, "{\"model\":\"m\",\"modelfile\":\"FROM x\\nPARAMETER top_k 0.5\"}",
                        ERR_INVALID, "invalid int value [0.5]");
    // Not GGUF, a GGUF failing validation, safetensors.
    char text_digest[STORE_DIGEST_LEN + 1];
    put_blob(f->s, "just some text", text_digest);
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"files\":{\"m.gguf\":\"%s\"}}", text_digest);
    expect_create_error(f, body, ERR_INVALID, "supplied file was not in GGUF format");
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"files\":{\"m.bin\":\"%s\"}}", text_digest);
    expect_create_error(f, body, ERR_INVALID, "unknown type");
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"files\":{\"m.safetensors\":\"%s\"}}",
             text_digest);
    expect_create_error(f, body, ERR_INVALID, "config.json not found");
    struct buf g;
    buf_init(&g, 0);
    fs_read_all(model, 1 << 24, &g, NULL);
    char trunc_digest[STORE_DIGEST_LEN + 1];
    assert_int_equal(store_blob_put(f->s, g.data, g.len / 2, trunc_digest, NULL, NULL), 0);
    buf_deinit(&g);
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"files\":{\"m.gguf\":\"%s\"}}", trunc_digest);
    struct err e = {0};
    assert_int_equal(create_json(f->s, body, NULL, &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, "invalid GGUF file \"m.gguf\""));
    // Adapters: only one.
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",%s,\"adapters\":{\"a.gguf\":\"%s\",\"b.gguf\":\"%s\"}}", F,
             STORIES_DIGEST, STORIES_DIGEST);
    expect_create_error(f, body, ERR_INVALID, "only one adapter is currently supported");
    // Quantize: unsupported type.
    snprintf(body, sizeof(body), "{\"model\":\"m\",%s,\"quantize\":\"q9_z\"}", F);
    expect_create_error(f, body, ERR_INVALID,
                        "unsupported quantization type Q9_Z - supported types "
                        "are F32, F16, Q4_K_S, Q4_K_M, Q8_0");
    // Wrong JSON types.
    e = (struct err){0};
    json_t *j = json_loads("{\"model\":\"m\",\"license\":5}", 0, NULL);
    struct store_create_req r;
    assert_int_equal(store_create_req_from_json(&r, j, &e), ERR_INVALID);
    assert_string_equal(e.msg, "unknown license type");
    store_create_req_deinit(&r);
    json_decref(j);
    // A template the server's template engine rejects.
    e = (struct err){0};
}

static int reject_template(void *ctx, const char *text, struct err *e)
{
    (void)ctx;
    return strstr(text, "{{ end") && !strstr(text, "{{ if")
               ? err_set(e, ERR_INVALID, "unexpected {{end}}")
               : 0;
}

static void test_create_failure_leaves_nothing(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    size_t before = count_files(blobs);
    struct err e = {0};

    // Killed after new layers were written, before the manifest: the new
    // blobs go again, no manifest, store consistent.
    volatile int cancel = 0;
    struct statuses st = {.cancel_on_new = (int *)&cancel};
    int rc = create_json(f->s,
                         "{\"model\":\"m\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"},"
                         "\"system\":\"new system\",\"license\":\"new license\"}",
                         &st, &e);
    assert_int_equal(rc, ERR_CANCELLED);
    assert_int_equal(count_files(blobs), before);
    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, NULL), 0);
    assert_int_equal(r.n_missing + r.n_corrupt + r.n_temporary, 0);
    store_check_report_deinit(&r);
    struct store_name n;
    store_name_parse("m", &n, NULL);
    struct store_manifest m;
    assert_int_equal(store_manifest_load(f->s, &n, &m, NULL, NULL), ERR_NOT_FOUND);

    // Template rejected by the template engine: nothing written.
    json_t *j = json_loads("{\"model\":\"m\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"},"
                           "\"system\":\"s\",\"template\":\"{{ end }}\"}",
                           0, NULL);
    struct store_create_req cr;
    assert_int_equal(store_create_req_from_json(&cr, j, &e), 0);
    struct store_create_opts o = {.template_check = reject_template};
    err_clear(&e);
    assert_int_equal(store_create(f->s, &cr, &o, &e), ERR_INVALID);
    assert_string_equal(e.msg, "template error: unexpected {{end}}");
    store_create_req_deinit(&cr);
    json_decref(j);
    assert_int_equal(count_files(blobs), before);

    // A failed re-create keeps the previous model intact.
    assert_int_equal(create_json(f->s,
                                 "{\"model\":\"m\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST
                                 "\"},\"system\":\"v1\"}",
                                 NULL, &e),
                     0);
    char d1[DIGEST_HEX_LEN + 1], d2[DIGEST_HEX_LEN + 1];
    manifest_digest(f, "m", d1);
    cancel = 0;
    memset(&st, 0, sizeof(st));
    st.cancel_on_new = (int *)&cancel;
    err_clear(&e);
    assert_int_equal(create_json(f->s,
                                 "{\"model\":\"m\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST
                                 "\"},\"system\":\"v2\"}",
                                 &st, &e),
                     ERR_CANCELLED);
    manifest_digest(f, "m", d2);
    assert_string_equal(d1, d2);
    struct store_model *sm;
    assert_int_equal(store_model_load(f->s, "m", &sm, &e), 0);
    assert_string_equal(sm->system, "v1");
    store_model_free(sm);
    assert_int_equal(store_check(f->s, &r, NULL), 0);
    assert_true(store_check_ok(&r));
    store_check_report_deinit(&r);
}

// ---------------------------------------------------------------------------
// Quantize.

// Consistent, and the only unreferenced blob is the uploaded source GGUF
// (a client upload that no model uses; the start-up prune removes it later).
static void assert_consistent_except_upload(struct store *s)
{
    struct store_check_report r;
    assert_int_equal(store_check(s, &r, NULL), 0);
    assert_int_equal(r.n_missing + r.n_corrupt + r.n_temporary, 0);
    assert_true(r.n_orphaned <= 1);
    if (r.n_orphaned)
        assert_string_equal(
            r.orphaned[0],
            "sha256-270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
    store_check_report_deinit(&r);
}

static void test_create_quantize(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    struct err e = {0};
    struct statuses st = {0};
    const char *body = "{\"model\":\"q8\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"},"
                       "\"quantize\":\"q8_0\"}";
    assert_int_equal(create_json(f->s, body, &st, &e), 0);
    assert_true(has_status(&st, "quantizing F32 model to Q8_0"));
    assert_true(st.quant_digest_ok);
    assert_true(st.quant_reports > 2);
    assert_int_equal(st.quant_completed, st.quant_total);
    assert_true(has_status(&st, "verifying conversion"));
    struct store_model *m;
    assert_int_equal(store_model_load(f->s, "q8", &m, &e), 0);
    assert_string_equal(m->config.file_type, "Q8_0");
    char status[200];
    snprintf(status, sizeof(status), "creating new layer %s", m->manifest.layers[0].digest);
    assert_true(has_status(&st, status));
    struct gguf *g;
    assert_int_equal(gguf_open(&g, m->model_path, &e), 0);
    assert_int_equal(gguf_tensor_count(g), 48);
    const struct gguf_tensor *t = gguf_tensor_find(g, "blk.0.attn_q.weight");
    assert_int_equal(t->type, GGUF_TYPE_Q8_0);
    t = gguf_tensor_find(g, "blk.0.attn_norm.weight");
    assert_int_equal(t->type, GGUF_TYPE_F32);
    uint32_t ft;
    assert_true(gguf_get_u32(g, "general.file_type", &ft));
    assert_int_equal(ft, 7);
    gguf_close(g);
    char d1[DIGEST_HEX_LEN + 1], d2[DIGEST_HEX_LEN + 1];
    memcpy(d1, m->manifest.layers[0].digest + 7, DIGEST_HEX_LEN + 1);
    store_model_free(m);

    // Deterministic: the same request gives the same quantized blob.
    memset(&st, 0, sizeof(st));
    assert_int_equal(create_json(f->s, body, &st, &e), 0);
    assert_int_equal(store_model_load(f->s, "q8", &m, &e), 0);
    memcpy(d2, m->manifest.layers[0].digest + 7, DIGEST_HEX_LEN + 1);
    assert_string_equal(d1, d2);
    snprintf(status, sizeof(status), "using existing layer %s", m->manifest.layers[0].digest);
    assert_true(has_status(&st, status));
    store_model_free(m);

    // Quantizing a quantized model is refused.
    err_clear(&e);
    assert_int_equal(
        create_json(f->s, "{\"model\":\"q4\",\"from\":\"q8\",\"quantize\":\"q4_0\"}", NULL, &e),
        ERR_INVALID);
    assert_string_equal(e.msg, "quantization is only supported for F16, BF16 and F32 models");

    // Every mix we can produce, from F32 and from F16.
    static const char *const mixes[] = {"f16",  "bf16",   "q4_0",   "q4_1",   "q5_0",   "q5_1",
                                        "q2_K", "q3_K_S", "q3_K_M", "q3_K_L", "q4_K_S", "q4_K_M",
                                        "q4_K", "q5_K_S", "q5_K_M", "q6_K"};
    for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++) {
        char body2[512];
        snprintf(body2, sizeof(body2),
                 "{\"model\":\"mix%zu\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"},"
                 "\"quantize\":\"%s\"}",
                 i, mixes[i]);
        err_clear(&e);
        if (create_json(f->s, body2, NULL, &e) != 0)
            fail_msg("quantize %s: %s", mixes[i], e.msg);
        char name[16];
        snprintf(name, sizeof(name), "mix%zu", i);
        assert_int_equal(store_model_load(f->s, name, &m, &e), 0);
        assert_string_equal(m->config.file_type, store_quantize_label(mixes[i]));
        assert_int_equal(gguf_open(&g, m->model_path, &e), 0);
        gguf_close(g);
        store_model_free(m);
    }
    err_clear(&e);
    assert_int_equal(create_json(f->s,
                                 "{\"model\":\"from-f16\",\"from\":\"mix0\","
                                 "\"quantize\":\"Q4_K_M\"}",
                                 &st, &e),
                     0);
    assert_int_equal(store_model_load(f->s, "from-f16", &m, &e), 0);
    assert_string_equal(m->config.file_type, "Q4_K_M");
    store_model_free(m);
    // Same type: nothing to do, the layer is reused.
    memset(&st, 0, sizeof(st));
    assert_int_equal(
        create_json(f->s, "{\"model\":\"same\",\"from\":\"mix0\",\"quantize\":\"F16\"}", &st, &e),
        0);
    assert_int_equal(st.quant_reports, 0);

    assert_consistent_except_upload(f->s);
}

// The disk fills up while the quantized layer is written (RLIMIT_FSIZE in a
// child process makes writes past 200 kB fail with EFBIG): the create fails
// with an I/O error and leaves nothing behind.
static void test_create_quantize_disk_full(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    char blobs[300];
    snprintf(blobs, sizeof(blobs), "%s/blobs", f->root);
    size_t before = count_files(blobs);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {.rlim_cur = 200000, .rlim_max = 200000};
        setrlimit(RLIMIT_FSIZE, &lim);
        json_t *j = json_loads("{\"model\":\"m\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"},"
                               "\"system\":\"s\",\"quantize\":\"q8_0\"}",
                               0, NULL);
        struct store_create_req cr;
        struct err e = {0};
        store_create_req_from_json(&cr, j, &e);
        int rc = store_create(f->s, &cr, NULL, &e);
        _exit(rc == ERR_IO ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(count_files(blobs), before);
    assert_consistent_except_upload(f->s);
    struct store_list l;
    assert_int_equal(store_list(f->s, &l, NULL), 0);
    assert_int_equal(l.n, 0);
    store_list_deinit(&l);
}

// ---------------------------------------------------------------------------
// Small generated GGUFs.

// Writes a tiny llama-shaped GGUF (two 64x32 matrices of type `type`, one
// norm) with general.file_type = ftype (< 0: absent) and an optional chat
// template, and uploads it; returns its digest.
static const char *gen_arch = "llama";  // make_gguf's general.architecture

static void make_gguf(struct fx *f, uint32_t type, int ftype, const char *chat_template,
                      char digest[STORE_DIGEST_LEN + 1])
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/gen.gguf", f->root);
    struct gguf_writer *w;
    struct err e = {0};
    assert_int_equal(gguf_writer_open(&w, path, &e), 0);
    char key[64];
    gguf_writer_kv_str(w, "general.architecture", gen_arch);
    snprintf(key, sizeof key, "%s.block_count", gen_arch);
    gguf_writer_kv_u32(w, key, 1);
    snprintf(key, sizeof key, "%s.context_length", gen_arch);
    gguf_writer_kv_u32(w, key, 128);
    if (ftype >= 0)
        gguf_writer_kv_u32(w, "general.file_type", (uint32_t)ftype);
    if (chat_template)
        gguf_writer_kv_str(w, "tokenizer.chat_template", chat_template);
    int64_t ne[2] = {64, 32}, ne1[1] = {64};
    gguf_writer_add_tensor(w, "token_embd.weight", type, 2, ne);
    gguf_writer_add_tensor(w, "blk.0.attn_q.weight", type, 2, ne);
    gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", GGUF_TYPE_F32, 1, ne1);
    assert_int_equal(gguf_writer_write_header(w, &e), 0);
    uint32_t bs = 1, ts = 0;
    assert_true(gguf_type_geometry(type, &bs, &ts));
    if (type != GGUF_TYPE_F32 && type != GGUF_TYPE_F16) {  // zero blocks
        static const uint8_t zero[64 * 32 * 4];
        for (int t = 0; t < 2; t++)
            gguf_writer_write_data(w, zero, 64 * 32 / bs * ts, &e);
    }
    for (int t = 0; t < 2 && (type == GGUF_TYPE_F32 || type == GGUF_TYPE_F16); t++) {
        for (int i = 0; i < 64 * 32; i++) {
            float v = (float)((i * 7919 + t * 31) % 1000) / 500.0f - 1.0f;
            if (type == GGUF_TYPE_F32) {
                gguf_writer_write_data(w, &v, 4, &e);
            } else {
                uint16_t h = quant_f32_to_f16(v);
                gguf_writer_write_data(w, &h, 2, &e);
            }
        }
    }
    float one = 1.0f;
    for (int i = 0; i < 64; i++)
        gguf_writer_write_data(w, &one, 4, &e);
    assert_int_equal(gguf_writer_close(w, &e), 0);
    char hex[DIGEST_HEX_LEN + 1];
    uint64_t size;
    assert_int_equal(sha256_file(path, hex, &size, &e), 0);
    snprintf(digest, STORE_DIGEST_LEN + 1, "sha256:%s", hex);
    upload_file(f->s, path, digest);
    unlink(path);
}

static const char *const chatml_stops[] = {"<|im_start|>", "<|im_end|>", NULL};

static bool detect_chatml(void *ctx, const char *chat_template, const char **name,
                          const char **go_template, const char *const **stops)
{
    (void)ctx;
    if (strstr(chat_template, "im_start") == NULL)
        return false;
    *name = "chatml";
    *go_template = "{{ .System }}\r\n{{ .Prompt }}";
    *stops = chatml_stops;
    return true;
}

static void test_create_generated(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    char d16[STORE_DIGEST_LEN + 1], body[512];
    make_gguf(f, GGUF_TYPE_F16, 1, "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}",
              d16);

    // Template autodetection adds the template and its stop words.
    json_t *j;
    snprintf(body, sizeof(body), "{\"model\":\"chat\",\"files\":{\"gen.gguf\":\"%s\"}}", d16);
    j = json_loads(body, 0, NULL);
    struct store_create_req cr;
    assert_int_equal(store_create_req_from_json(&cr, j, &e), 0);
    json_decref(j);
    struct statuses st = {0};
    struct store_create_opts o = {
        .progress = collect, .progress_ctx = &st, .template_detect = detect_chatml};
    assert_int_equal(store_create(f->s, &cr, &o, &e), 0);
    store_create_req_deinit(&cr);
    assert_true(has_status(&st, "using autodetected template chatml"));
    struct store_model *m;
    assert_int_equal(store_model_load(f->s, "chat", &m, &e), 0);
    assert_string_equal(m->template_text, "{{ .System }}\n{{ .Prompt }}");
    assert_int_equal(json_array_size(json_object_get(m->params, "stop")), 2);
    assert_string_equal(m->config.file_type, "F16");
    assert_string_equal(m->config.model_family, "llama");
    store_model_free(m);

    // F16 → Q8_0, with the status naming the source type.
    memset(&st, 0, sizeof(st));
    snprintf(body, sizeof(body), "{\"model\":\"chat-q8\",\"from\":\"chat\",\"quantize\":\"Q8_0\"}");
    assert_int_equal(create_json(f->s, body, &st, &e), 0);
    assert_true(has_status(&st, "quantizing F16 model to Q8_0"));
    assert_int_equal(store_model_load(f->s, "chat-q8", &m, &e), 0);
    assert_string_equal(m->config.file_type, "Q8_0");
    struct gguf *g;
    assert_int_equal(gguf_open(&g, m->model_path, &e), 0);
    assert_int_equal(gguf_tensor_find(g, "blk.0.attn_q.weight")->type, GGUF_TYPE_Q8_0);
    // Values survive quantization closely.
    const struct gguf_tensor *t = gguf_tensor_find(g, "blk.0.attn_q.weight");
    float back[64];
    quant_traits_get(GGUF_TYPE_Q8_0)->to_float(t->data, back, 64);
    for (int i = 0; i < 64; i++) {
        float v = (float)((i * 7919 + 31) % 1000) / 500.0f - 1.0f;
        assert_true(back[i] - v < 0.02f && v - back[i] < 0.02f);
    }
    gguf_close(g);
    store_model_free(m);

    // An already quantized GGUF with general.file_type set.
    char dq[STORE_DIGEST_LEN + 1];
    make_gguf(f, GGUF_TYPE_F16, 15, NULL, dq);  // claims Q4_K_M
    snprintf(body, sizeof(body),
             "{\"model\":\"x\",\"files\":{\"x.gguf\":\"%s\"},\"quantize\":\"q8_0\"}", dq);
    err_clear(&e);
    assert_int_equal(create_json(f->s, body, NULL, &e), ERR_INVALID);
    assert_string_equal(e.msg, "quantization is only supported for F16, BF16 and F32 models");
}

// Ollama 0.33 gives some architectures a renderer and parser at create when
// the Modelfile names none (nemotron_h: nemotron-3-nano); one it names wins.
static void test_create_arch_renderer(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    char d[STORE_DIGEST_LEN + 1], body[512];
    gen_arch = "nemotron_h";
    make_gguf(f, GGUF_TYPE_F16, 1, NULL, d);
    gen_arch = "llama";
    snprintf(body, sizeof(body), "{\"model\":\"nano\",\"files\":{\"n.gguf\":\"%s\"}}", d);
    assert_int_equal(create_json(f->s, body, NULL, &e), 0);
    struct store_model *m;
    assert_int_equal(store_model_load(f->s, "nano", &m, &e), 0);
    assert_string_equal(m->config.renderer, "nemotron-3-nano");
    assert_string_equal(m->config.parser, "nemotron-3-nano");
    assert_string_equal(m->config.model_family, "nemotron_h");
    // /api/tags: lengths from the header, capabilities in Ollama's order.
    struct store_list_info info;
    store_model_list_info(m, &info);
    assert_int_equal(info.context_length, 128);
    assert_int_equal(info.n_caps, 3);  // the nemotron-3-nano parser calls tools and thinks
    assert_string_equal(info.caps[0], "completion");
    assert_string_equal(info.caps[1], "tools");
    assert_string_equal(info.caps[2], "thinking");
    store_model_free(m);
    snprintf(body, sizeof(body),
             "{\"model\":\"nano2\",\"files\":{\"n.gguf\":\"%s\"},\"renderer\":\"qwen3.5\"}", d);
    assert_int_equal(create_json(f->s, body, NULL, &e), 0);
    assert_int_equal(store_model_load(f->s, "nano2", &m, &e), 0);
    assert_string_equal(m->config.renderer, "qwen3.5");
    assert_string_equal(m->config.parser, "nemotron-3-nano");
    store_model_free(m);
}

// Tensor types: an i-quant file is created and reports its type; a file
// with a type the engine cannot run is refused; quantizing to an i-quant
// says it needs an importance matrix.
static void test_create_tensor_types(void **state)
{
    struct fx *f = *state;
    struct err e = {0};
    char d[STORE_DIGEST_LEN + 1], body[512];
    struct store_model *m;
    make_gguf(f, GGUF_TYPE_NVFP4, -1, NULL, d);
    snprintf(body, sizeof(body), "{\"model\":\"nv\",\"files\":{\"nv.gguf\":\"%s\"}}", d);
    expect_create_error(f, body, ERR_UNSUPPORTED,
                        "file \"nv.gguf\": tensor token_embd.weight has type NVFP4, which this "
                        "version cannot run");

    make_gguf(f, GGUF_TYPE_F16, 1, NULL, d);
    const char *const imatrix[][2] = {
        {"iq2_xxs", "IQ2_XXS"}, {"IQ4_XS", "IQ4_XS"}, {"iq1_m", "IQ1_M"}, {"q2_k_s", "Q2_K_S"}};
    for (size_t i = 0; i < sizeof(imatrix) / sizeof(imatrix[0]); i++) {
        char want[512];
        snprintf(body, sizeof(body),
                 "{\"model\":\"q\",\"files\":{\"f.gguf\":\"%s\"},\"quantize\":\"%s\"}", d,
                 imatrix[i][0]);
        snprintf(want, sizeof(want),
                 "quantization type %s needs an importance matrix, which create does not "
                 "compute; import a GGUF file already quantized to %s (supported types are F32, "
                 "F16, Q4_K_S, Q4_K_M, Q8_0)",
                 imatrix[i][1], imatrix[i][1]);
        expect_create_error(f, body, ERR_INVALID, want);
    }
    snprintf(body, sizeof(body),
             "{\"model\":\"q\",\"files\":{\"f.gguf\":\"%s\"},\"quantize\":\"tq2_0\"}", d);
    expect_create_error(f, body, ERR_INVALID,
                        "unsupported quantization type TQ2_0 - supported types are F32, F16, "
                        "Q4_K_S, Q4_K_M, Q8_0");

    make_gguf(f, GGUF_TYPE_IQ4_NL, 25, NULL, d);
    snprintf(body, sizeof(body), "{\"model\":\"iq\",\"files\":{\"iq.gguf\":\"%s\"}}", d);
    assert_int_equal(create_json(f->s, body, NULL, &e), 0);
    assert_int_equal(store_model_load(f->s, "iq", &m, &e), 0);
    assert_string_equal(m->config.file_type, "IQ4_NL");
    store_model_free(m);
}

static void die_mid_quantize(void *ctx, const struct store_progress *p)
{
    (void)ctx;
    if (strncmp(p->status, "quantizing ", 11) == 0 && p->completed > p->total / 2)
        raise(SIGKILL);
}

// A create killed mid-way (SIGKILL while quantizing): no manifest, nothing
// missing or corrupt, and the start-up prune removes what it left.
static void test_create_killed(void **state)
{
    struct fx *f = *state;
    char model[512];
    if (!stories_path(model, sizeof(model)))
        skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        json_t *j = json_loads("{\"model\":\"m\",\"files\":{\"m.gguf\":\"" STORIES_DIGEST "\"},"
                               "\"system\":\"s\",\"quantize\":\"q8_0\"}",
                               0, NULL);
        struct store_create_req cr;
        store_create_req_from_json(&cr, j, NULL);
        struct store_create_opts o = {.progress = die_mid_quantize};
        store_create(f->s, &cr, &o, NULL);
        _exit(0);  // not reached when the kill happens
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    struct store_name n;
    struct store_manifest m;
    store_name_parse("m", &n, NULL);
    assert_int_equal(store_manifest_load(f->s, &n, &m, NULL, NULL), ERR_NOT_FOUND);
    struct store_check_report r;
    assert_int_equal(store_check(f->s, &r, NULL), 0);
    assert_int_equal(r.n_missing + r.n_corrupt, 0);
    assert_int_equal(r.n_temporary, 1);  // the half-written quantized file
    store_check_report_deinit(&r);
    struct store_list l;
    assert_int_equal(store_list(f->s, &l, NULL), 0);
    assert_int_equal(l.n, 0);
    store_list_deinit(&l);
    assert_true(store_prune(f->s, 0, NULL) >= 1);
    assert_int_equal(store_check(f->s, &r, NULL), 0);
    assert_int_equal(r.n_temporary + r.n_missing + r.n_corrupt, 0);
    store_check_report_deinit(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_digests),
        cmocka_unit_test(test_gojson),
        cmocka_unit_test(test_manifest_roundtrip),
        cmocka_unit_test_setup_teardown(test_blob_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_copy_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_and_prune, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_legacy_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ollama_store_list, setup_ollama, teardown),
        cmocka_unit_test_setup_teardown(test_ollama_store_show, setup_ollama, teardown),
        cmocka_unit_test_setup_teardown(test_create_from_files, setup_stories, teardown),
        cmocka_unit_test_setup_teardown(test_create_bad_input, setup_stories, teardown),
        cmocka_unit_test_setup_teardown(test_create_failure_leaves_nothing, setup_stories,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_create_quantize, setup_stories, teardown),
        cmocka_unit_test_setup_teardown(test_create_quantize_disk_full, setup_stories, teardown),
        cmocka_unit_test_setup_teardown(test_create_arch_renderer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_tensor_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_generated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_killed, setup_stories, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

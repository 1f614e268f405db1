// Registry client: keys, challenges, token URLs and signatures against the
// worked example of registry.md §4, part planning, and pull / push against a
// small fake registry (libmicrohttpd on 127.0.0.1) that can misbehave in the
// ways a real one cannot be made to: wrong bytes, truncated bodies, 5xx,
// stalls, redirect loops, redirects to another host, bearer challenges,
// hostile manifests.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <ftw.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/registry.h"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

// ---------------------------------------------------------------------------
// Auth pieces: the worked example of registry.md §4.

static const char spec_key[] =
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUx\n"
    "OQAAACADoQe/884Qvh1w3RjnS8CZZ+TWMJulDV8d3IZkElUxuAAAAIjiUQ3W4lEN1gAAAAtzc2gt\n"
    "ZWQyNTUxOQAAACADoQe/884Qvh1w3RjnS8CZZ+TWMJulDV8d3IZkElUxuAAAAEAAAQIDBAUGBwgJ\n"
    "CgsMDQ4PEBESExQVFhcYGRobHB0eHwOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4AAAA\n"
    "AAECAwQF\n"
    "-----END OPENSSH PRIVATE KEY-----\n";

static void test_key_parse_spec(void **state)
{
    (void)state;
    uint8_t seed[32], pub[32];
    struct err e = {0};
    assert_int_equal(registry_key_parse(spec_key, strlen(spec_key), seed, pub, &e), 0);
    for (int i = 0; i < 32; i++)
        assert_int_equal(seed[i], i);
    struct buf line;
    buf_init(&line, 0);
    registry_key_pub_line(pub, &line);
    assert_string_equal(
        line.data,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4");
    buf_deinit(&line);

    // Our writer produces the same binary (wrapped differently) and parses back.
    struct buf text;
    buf_init(&text, 0);
    assert_int_equal(registry_key_format(seed, 0xe2510dd6u, &text, &e), 0);
    uint8_t seed2[32], pub2[32];
    assert_int_equal(registry_key_parse(text.data, text.len, seed2, pub2, &e), 0);
    assert_memory_equal(seed, seed2, 32);
    assert_memory_equal(pub, pub2, 32);
    // Strip armour and newlines from both: same base64.
    struct buf a, b;
    buf_init(&a, 0);
    buf_init(&b, 0);
    for (const char *p = spec_key; *p; p++)
        if (*p != '\n')
            buf_append_char(&a, *p);
    for (const char *p = text.data; *p; p++)
        if (*p != '\n')
            buf_append_char(&b, *p);
    assert_string_equal(a.data, b.data);
    buf_deinit(&a);
    buf_deinit(&b);
    buf_deinit(&text);

    // Rejected: broken armour, bad check ints, garbage.
    assert_true(registry_key_parse("nope", 4, seed, pub, NULL) < 0);
    // Fuzzer find: markers sharing their dashes.
    static const char overlap[] =
        "-----BEGIN OPENSSH PRIVATE KEY------END OPENSSH PRIVATE KEY-----AAAA";
    assert_true(registry_key_parse(overlap, strlen(overlap), seed, pub, NULL) < 0);
    char bad[sizeof(spec_key)];
    memcpy(bad, spec_key, sizeof(spec_key));
    char *c = strstr(bad, "AAAAIjiUQ3W4lEN1g");  // check1 != check2
    c[12] = 'A';
    assert_true(registry_key_parse(bad, strlen(bad), seed, pub, NULL) < 0);
}

static void test_key_create(void **state)
{
    (void)state;
    char dir[] = "/tmp/ollama-reg-key-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof(path), "%s/.ollama/id_ed25519", dir);
    uint8_t seed[32], pub[32], seed2[32], pub2[32];
    struct err e = {0};
    assert_true(registry_key_load(path, false, seed, pub, &e) < 0);
    assert_int_equal(registry_key_load(path, true, seed, pub, &e), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char pub_path[320];
    snprintf(pub_path, sizeof(pub_path), "%s.pub", path);
    assert_int_equal(stat(pub_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(registry_key_load(path, true, seed2, pub2, &e), 0);
    assert_memory_equal(seed, seed2, 32);
    struct buf text, line;
    buf_init(&text, 0);
    buf_init(&line, 0);
    assert_int_equal(fs_read_all(pub_path, 4096, &text, &e), 0);
    registry_key_pub_line(pub, &line);
    buf_append_char(&line, '\n');
    assert_string_equal(text.data, line.data);
    assert_true(cstr_starts_with(text.data, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"));
    buf_deinit(&text);
    buf_deinit(&line);
    rm_rf(dir);
}

static void test_token_signature_spec(void **state)
{
    (void)state;
    struct registry_challenge c;
    struct err e = {0};
    assert_int_equal(
        registry_challenge_parse(
            "Bearer realm=\"https://registry.example.com/v2/token\",service=\"registry."
            "example.com\",scope=\"repository:library/test:pull,push\"",
            &c, &e),
        0);
    assert_string_equal(c.scheme, "Bearer");
    assert_string_equal(c.realm, "https://registry.example.com/v2/token");
    assert_string_equal(c.service, "registry.example.com");
    assert_string_equal(c.scope, "repository:library/test:pull,push");
    uint8_t nonce[16];
    for (int i = 0; i < 16; i++)
        nonce[i] = (uint8_t)i;
    struct buf url, auth;
    buf_init(&url, 0);
    buf_init(&auth, 0);
    assert_int_equal(registry_token_url(&c, 1700000000, nonce, &url, &e), 0);
    assert_string_equal(url.data,
                        "https://registry.example.com/v2/token?nonce=AAECAwQFBgcICQoLDA0ODw&scope="
                        "repository%3Alibrary%2Ftest%3Apull%2Cpush&service=registry.example.com&ts="
                        "1700000000");
    uint8_t seed[32], pub[32];
    assert_int_equal(registry_key_parse(spec_key, strlen(spec_key), seed, pub, &e), 0);
    assert_int_equal(registry_token_auth(seed, pub, url.data, &auth, &e), 0);
    assert_string_equal(auth.data,
                        "AAAAC3NzaC1lZDI1NTE5AAAAIAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4:OC+"
                        "9yxuQNG49M2Ptmo6EaGfGffN38F9ZLrD1N+gx3Pjg4jLjnVpCUxd7rSrL4xTTimEssWJ6yq+"
                        "j5XbIo9aaBg==");
    buf_deinit(&url);
    buf_deinit(&auth);
}

static void test_challenge_forms(void **state)
{
    (void)state;
    struct registry_challenge c;
    // Unquoted, any order, realm query kept; multiple scopes.
    assert_int_equal(registry_challenge_parse(
                         "Bearer scope=a:b:pull service=s, realm=http://h:1/t?x=1", &c, NULL),
                     0);
    assert_string_equal(c.realm, "http://h:1/t?x=1");
    assert_string_equal(c.service, "s");
    struct buf url;
    buf_init(&url, 0);
    uint8_t nonce[16] = {0};
    c = (struct registry_challenge){.realm = "http://h:1/t?x=1",
                                    .service = "",
                                    .scope = "repository:a/b:pull repository:c/d:pull"};
    assert_int_equal(registry_token_url(&c, 5, nonce, &url, NULL), 0);
    assert_string_equal(url.data, "http://h:1/t?nonce=AAAAAAAAAAAAAAAAAAAAAA&scope=repository%3Aa%"
                                  "2Fb%3Apull&scope=repository%3Ac%2Fd%3Apull&service=&ts=5&x=1");
    buf_deinit(&url);
    assert_int_equal(registry_challenge_parse("Basic realm=\"Registry Realm\"", &c, NULL), 0);
    assert_string_equal(c.scheme, "Basic");
    assert_string_equal(c.realm, "Registry Realm");
    assert_true(registry_challenge_parse(NULL, &c, NULL) < 0);
}

static void test_part_size(void **state)
{
    (void)state;
    const uint64_t mn = 100000000, mx = 1000000000;
    assert_int_equal(registry_part_size(2019377376ull, mn, mx), 126211086ull);
    assert_int_equal(registry_part_size(1000000000ull, mn, mx), 100000000ull);
    assert_int_equal(registry_part_size(250000000ull, mn, mx), 100000000ull);
    assert_int_equal(registry_part_size(50000000ull, mn, mx), 100000000ull);
    assert_int_equal(registry_part_size(40000000000ull, mn, mx), 1000000000ull);
    assert_int_equal(registry_part_size(0, mn, mx), 0);
}

// ---------------------------------------------------------------------------
// The fake registry.

#define FAKE_MAX_BLOBS 8

struct fake_blob {
    char digest[80];
    char *data;
    size_t len;
};

struct fake {
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    struct fake_blob blobs[FAKE_MAX_BLOBS];
    int n_blobs;
    char *manifest;         // served for any repo/tag unless 404
    char *manifests[4][2];  // extra: {"repo:tag", body}
    // Faults.
    bool wrong_bytes;
    atomic_int truncate_n;  // next N ranged GETs send half their bytes then drop
    atomic_int fail5xx_n;   // next N ranged GETs answer 503
    atomic_int stall_n;     // next N ranged GETs stall after some bytes
    bool redirect_loop;
    bool redirect_other_host;  // blob GET → 307 to http://localhost:PORT/data/...
    bool bearer;               // require "Bearer tok-N"
    bool no_challenge;         // 401 without WWW-Authenticate
    bool basic;                // require HTTP basic auth user:pass
    bool realm_elsewhere;      // realm on another host
    bool head_no_length;
    bool head_404;  // HEAD of a blob says "unknown" (so push must upload or mount)
    // Observations.
    atomic_int token_requests;
    atomic_int data_gets;  // ranged GETs that sent bytes
    atomic_llong bytes_served;
    atomic_int auth_to_other_host;  // Authorization seen on /data/
    atomic_llong min_range_start[FAKE_MAX_BLOBS];
    // Push state.
    char *upload;  // bytes of the current upload session
    size_t upload_len;
    int upload_state;
    char *pushed_manifest;
    atomic_int mounts;
    atomic_int upload_sessions;
};

struct conn {
    struct buf body;
};

struct reader {
    const char *data;
    size_t pos, end;
    size_t cut;  // drop the connection at this offset (0 = no)
    int stall_ms;
    bool ranged;
    char *owned;  // freed with the reader
    struct fake *f;
};

static void reader_free(void *cls)
{
    struct reader *r = cls;
    free(r->owned);
    free(r);
}

static ssize_t reader_cb(void *cls, uint64_t pos, char *out, size_t max)
{
    struct reader *r = cls;
    (void)pos;
    if (r->cut && r->pos >= r->cut)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (r->stall_ms && r->pos > 0) {
        usleep((useconds_t)r->stall_ms * 1000);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (r->pos >= r->end)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = r->end - r->pos;
    if (n > max)
        n = max;
    if (n > 8192)
        n = 8192;
    if (r->cut && r->pos + n > r->cut)
        n = r->cut - r->pos;
    memcpy(out, r->data + r->pos, n);
    r->pos += n;
    if (r->ranged)
        atomic_fetch_add(&r->f->bytes_served, (long long)n);
    return (ssize_t)n;
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, const char *body,
                             const char *const *hdrs)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    for (const char *const *h = hdrs; h && h[0]; h += 2)
        MHD_add_response_header(r, h[0], h[1]);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static struct fake_blob *find_blob(struct fake *f, const char *digest, int *idx)
{
    for (int i = 0; i < f->n_blobs; i++)
        if (strcmp(f->blobs[i].digest, digest) == 0) {
            if (idx)
                *idx = i;
            return &f->blobs[i];
        }
    return NULL;
}

static void fake_add_blob(struct fake *f, const char *data, size_t len, char digest[80])
{
    char hex[65];
    sha256_hex(data, len, hex);
    struct fake_blob *b = &f->blobs[f->n_blobs];
    atomic_store(&f->min_range_start[f->n_blobs], -1);
    f->n_blobs++;
    snprintf(b->digest, sizeof(b->digest), "sha256:%s", hex);
    b->data = malloc(len ? len : 1);
    memcpy(b->data, data, len);
    b->len = len;
    if (digest)
        snprintf(digest, 80, "%s", b->digest);
}

static enum MHD_Result serve_blob(struct fake *f, struct MHD_Connection *c, const char *method,
                                  struct fake_blob *b, int idx)
{
    size_t start = 0, end = b->len;
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    unsigned long long rs = 0, re = 0;
    bool ranged = range && sscanf(range, "bytes=%llu-%llu", &rs, &re) == 2;
    if (ranged) {
        start = rs;
        end = re + 1;
        long long prev = atomic_load(&f->min_range_start[idx]);
        if (prev < 0 || (long long)rs < prev)
            atomic_store(&f->min_range_start[idx], (long long)rs);
        if (atomic_fetch_sub(&f->fail5xx_n, 1) > 0)
            return reply(c, 503, "{\"errors\":[{\"code\":\"UNAVAILABLE\"}]}", NULL);
        atomic_fetch_add(&f->data_gets, 1);
    }
    if (strcmp(method, "HEAD") == 0) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!f->head_no_length) {
            // MHD computes Content-Length from the body; give a fake size via a callback.
            MHD_destroy_response(r);
            r = MHD_create_response_from_callback(b->len, 4096, reader_cb, NULL, NULL);
        }
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    struct reader *rd = calloc(1, sizeof(*rd));
    rd->f = f;
    rd->data = f->wrong_bytes ? NULL : b->data;
    if (f->wrong_bytes) {
        char *junk = malloc(b->len ? b->len : 1);
        memcpy(junk, b->data, b->len);
        if (b->len)
            junk[b->len / 2] ^= 0x55;
        rd->data = junk;
        rd->owned = junk;
    }
    rd->pos = start;
    rd->end = end;
    rd->ranged = ranged;
    if (ranged && atomic_fetch_sub(&f->truncate_n, 1) > 0)
        rd->cut = start + (end - start) / 2;
    if (ranged && atomic_fetch_sub(&f->stall_n, 1) > 0)
        rd->stall_ms = 1500;
    struct MHD_Response *r =
        MHD_create_response_from_callback(end - start, 8192, reader_cb, rd, reader_free);
    if (ranged) {
        char cr[96];
        snprintf(cr, sizeof(cr), "bytes %zu-%zu/%zu", start, end - 1, b->len);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    enum MHD_Result ret = MHD_queue_response(c, ranged ? 206 : 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result fake_handler(void *cls, struct MHD_Connection *c, const char *url,
                                    const char *method, const char *version, const char *upload,
                                    size_t *upload_size, void **con_cls)
{
    (void)version;
    struct fake *f = cls;
    struct conn *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof(*cs));
        buf_init(&cs->body, 64u << 20);
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size) {
        buf_append(&cs->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    char self[64];
    snprintf(self, sizeof(self), "http://127.0.0.1:%d", f->port);
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

    if (strncmp(url, "/token", 6) == 0) {
        atomic_fetch_add(&f->token_requests, 1);
        // Signed: "<pub b64>:<sig b64>" with the ssh-ed25519 wire prefix.
        if (!auth || !cstr_starts_with(auth, "AAAAC3NzaC1lZDI1NTE5AAAAI") || !strchr(auth, ':'))
            return reply(c, 401, "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}", NULL);
        if (!MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "nonce") ||
            !MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ts"))
            return reply(c, 400, "missing nonce", NULL);
        return reply(c, 200, "{\"token\":\"tok-1\",\"expires_in\":300}", NULL);
    }
    if (strncmp(url, "/data/", 6) == 0) {
        if (auth)
            atomic_fetch_add(&f->auth_to_other_host, 1);
        int idx;
        struct fake_blob *b = find_blob(f, url + 6, &idx);
        return b ? serve_blob(f, c, method, b, idx) : reply(c, 404, "", NULL);
    }
    if (strcmp(url, "/v2/") == 0)
        return reply(c, 200, "{}", NULL);
    if (f->basic) {
        if (!auth || strcmp(auth, "Basic dXNlcjpwYXNz") != 0) {
            const char *h[] = {"WWW-Authenticate", "Basic realm=\"Registry Realm\"", NULL};
            return reply(c, 401, "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}", h);
        }
    } else if (f->bearer || f->no_challenge) {
        bool ok = auth && strcmp(auth, "Bearer tok-1") == 0;
        if (!ok) {
            char ch[300];
            snprintf(
                ch, sizeof(ch),
                "Bearer realm=\"http://%s:%d/token\",service=\"fake\",scope=\"repository:x:pull\"",
                f->realm_elsewhere ? "localhost" : "127.0.0.1", f->port);
            const char *h[] = {"WWW-Authenticate", ch, NULL};
            return reply(c, 401, "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}",
                         f->no_challenge ? NULL : h);
        }
    }
    // /v2/<ns>/<model>/manifests/<tag> | blobs/<digest> | blobs/uploads/...
    const char *m = strstr(url, "/manifests/");
    if (m && strcmp(method, "PUT") == 0) {
        pthread_mutex_lock(&f->mu);
        free(f->pushed_manifest);
        f->pushed_manifest = xstrndup(cs->body.data ? cs->body.data : "", cs->body.len);
        pthread_mutex_unlock(&f->mu);
        return reply(c, 201, "", NULL);
    }
    if (m) {
        for (int i = 0; i < 4; i++)
            if (f->manifests[i][0] && strstr(url, f->manifests[i][0]))
                return reply(c, 200, f->manifests[i][1], NULL);
        if (!f->manifest || strstr(url, "/missing/"))
            return reply(c, 404, "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\"}]}", NULL);
        return reply(c, 200, f->manifest, NULL);
    }
    const char *up = strstr(url, "/blobs/uploads/");
    if (up) {
        char loc[300];
        if (strcmp(method, "POST") == 0) {
            const char *mount = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mount");
            if (mount && find_blob(f, mount, NULL)) {
                atomic_fetch_add(&f->mounts, 1);
                return reply(c, 201, "", NULL);
            }
            atomic_fetch_add(&f->upload_sessions, 1);
            pthread_mutex_lock(&f->mu);
            free(f->upload);
            f->upload = NULL;
            f->upload_len = 0;
            f->upload_state = 0;
            pthread_mutex_unlock(&f->mu);
            // Relative Location: the client must resolve it.
            snprintf(loc, sizeof(loc), "/v2/x/y/blobs/uploads/u1?_state=0");
            const char *h[] = {"Location", loc, NULL};
            return reply(c, 202, "", h);
        }
        const char *state = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "_state");
        pthread_mutex_lock(&f->mu);
        bool ok_state = state && atoi(state) == f->upload_state;
        pthread_mutex_unlock(&f->mu);
        if (!ok_state)
            return reply(c, 400, "{\"errors\":[{\"code\":\"BLOB_UPLOAD_INVALID\"}]}", NULL);
        if (strcmp(method, "PATCH") == 0) {
            pthread_mutex_lock(&f->mu);
            f->upload = realloc(f->upload, f->upload_len + cs->body.len + 1);
            memcpy(f->upload + f->upload_len, cs->body.data ? cs->body.data : "", cs->body.len);
            f->upload_len += cs->body.len;
            int st = ++f->upload_state;
            pthread_mutex_unlock(&f->mu);
            snprintf(loc, sizeof(loc), "%s/v2/x/y/blobs/uploads/u1?_state=%d", self, st);
            const char *h[] = {"Location", loc, NULL};
            return reply(c, 202, "", h);
        }
        if (strcmp(method, "PUT") == 0) {
            const char *digest = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "digest");
            char hex[65], want[80];
            pthread_mutex_lock(&f->mu);
            sha256_hex(f->upload ? f->upload : "", f->upload_len, hex);
            snprintf(want, sizeof(want), "sha256:%s", hex);
            bool ok = digest && strcmp(digest, want) == 0 &&
                      MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "etag");
            if (ok && f->n_blobs < FAKE_MAX_BLOBS && !find_blob(f, want, NULL))
                fake_add_blob(f, f->upload ? f->upload : "", f->upload_len, NULL);
            pthread_mutex_unlock(&f->mu);
            return reply(c, ok ? 201 : 400,
                         ok ? "" : "{\"errors\":[{\"code\":\"DIGEST_INVALID\"}]}", NULL);
        }
    }
    const char *b = strstr(url, "/blobs/");
    if (b) {
        const char *digest = b + 7;
        int idx;
        struct fake_blob *blob = find_blob(f, digest, &idx);
        if (!blob || (f->head_404 && strcmp(method, "HEAD") == 0))
            return reply(c, 404, "{\"errors\":[{\"code\":\"BLOB_UNKNOWN\"}]}", NULL);
        if (f->redirect_loop) {
            const char *h[] = {"Location", url, NULL};
            return reply(c, 307, "", h);
        }
        if (f->redirect_other_host) {
            char loc[300];
            snprintf(loc, sizeof(loc), "http://localhost:%d/data/%s", f->port, digest);
            const char *h[] = {"Location", loc, NULL};
            return reply(c, 307, "", h);
        }
        return serve_blob(f, c, method, blob, idx);
    }
    return reply(c, 404, "404 page not found", NULL);
}

static void fake_done(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct conn *cs = *con_cls;
    if (cs) {
        buf_deinit(&cs->body);
        free(cs);
    }
    *con_cls = NULL;
}

static void fake_start(struct fake *f)
{
    pthread_mutex_init(&f->mu, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    f->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
                            NULL, NULL, fake_handler, f, MHD_OPTION_SOCK_ADDR, &a,
                            MHD_OPTION_NOTIFY_COMPLETED, fake_done, f, MHD_OPTION_END);
    assert_non_null(f->d);
    f->port = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT)->port;
}

static void fake_stop(struct fake *f)
{
    MHD_stop_daemon(f->d);
    for (int i = 0; i < f->n_blobs; i++)
        free(f->blobs[i].data);
    free(f->manifest);
    free(f->upload);
    free(f->pushed_manifest);
    pthread_mutex_destroy(&f->mu);
}

// A model: a random "model" layer of n bytes and a small config; the fake
// serves its manifest.
static void fake_model(struct fake *f, size_t n, char model_digest[80], char config_digest[80])
{
    char *data = malloc(n);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (char)(x >> 24);
    }
    fake_add_blob(f, data, n, model_digest);
    free(data);
    const char *cfg = "{\"model_format\":\"gguf\",\"model_family\":\"llama\"}";
    fake_add_blob(f, cfg, strlen(cfg), config_digest);
    f->manifest =
        xasprintf("{\"schemaVersion\":2,\"mediaType\":\"application/"
                  "vnd.docker.distribution.manifest.v2+json\","
                  "\"config\":{\"mediaType\":\"application/"
                  "vnd.docker.container.image.v1+json\",\"digest\":\"%s\","
                  "\"size\":%zu},\"layers\":[{\"mediaType\":\"application/"
                  "vnd.ollama.image.model\",\"digest\":"
                  "\"%s\",\"size\":%zu},{\"mediaType\":\"application/"
                  "x-unknown-layer\",\"digest\":\"%s\",\"size\":%zu}]}",
                  config_digest, strlen(cfg), model_digest, n, config_digest, strlen(cfg));
}

// ---------------------------------------------------------------------------
// Fixture: a store, a registry client with short timeouts, a fake registry.

struct fx {
    char root[256];
    struct store *s;
    struct registry *reg;
    struct fake f;
    char name[128];
    char model_digest[80], config_digest[80];
    struct buf events;  // "status|completed/total\n" lines
};

static void on_progress(void *ctx, const struct store_progress *p)
{
    struct fx *x = ctx;
    buf_printf(&x->events, "%s|%llu/%llu\n", p->status, (unsigned long long)p->completed,
               (unsigned long long)p->total);
}

static bool g_buffered_io;  // pull through the page cache instead of O_DIRECT

static struct fx *fx_new(size_t model_bytes, uint64_t part_min)
{
    struct fx *x = calloc(1, sizeof(*x));
    snprintf(x->root, sizeof(x->root), "/tmp/ollama-reg-test-XXXXXX");
    assert_non_null(mkdtemp(x->root));
    char models[300], key[300];
    snprintf(models, sizeof(models), "%s/models", x->root);
    snprintf(key, sizeof(key), "%s/home/.ollama/id_ed25519", x->root);
    struct err e = {0};
    assert_int_equal(store_open(&x->s, models, &e), 0);
    struct registry_config cfg = {.key_path = key,
                                  .stall_timeout_ms = 400,
                                  .backoff_unit_ms = 10,
                                  .part_min_bytes = part_min,
                                  .part_max_bytes = part_min,
                                  .buffered_io = g_buffered_io};
    assert_int_equal(registry_new(&x->reg, x->s, &cfg, &e), 0);
    fake_start(&x->f);
    fake_model(&x->f, model_bytes, x->model_digest, x->config_digest);
    snprintf(x->name, sizeof(x->name), "127.0.0.1:%d/library/m:latest", x->f.port);
    buf_init(&x->events, 0);
    return x;
}

static void fx_free(struct fx *x)
{
    registry_free(x->reg);
    store_close(x->s);
    fake_stop(&x->f);
    buf_deinit(&x->events);
    rm_rf(x->root);
    free(x);
}

static int fx_pull(struct fx *x, struct err *e)
{
    struct registry_opts o = {.insecure = true, .progress = on_progress, .progress_ctx = x};
    buf_reset(&x->events);
    return registry_pull(x->reg, x->name, &o, e);
}

static bool blob_matches(struct fx *x, const char *digest)
{
    char path[4096];
    if (store_blob_path(x->s, digest, path, sizeof(path), NULL) < 0)
        return false;
    char hex[65];
    uint64_t size;
    if (sha256_file(path, hex, &size, NULL) < 0)
        return false;
    return strcmp(hex, digest + 7) == 0;
}

static bool manifest_present(struct fx *x)
{
    struct store_name n;
    store_name_parse(x->name, &n, NULL);
    char path[4096];
    store_manifest_path(x->s, &n, path, sizeof(path), NULL);
    return fs_exists(path);
}

static int count_files(const char *dir, const char *substr)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "ls '%s' 2>/dev/null | grep -c -- '%s' > /tmp/ollama-reg-count", dir,
             substr);
    if (system(cmd) < 0)
        return -1;
    struct buf b;
    buf_init(&b, 100);
    fs_read_all("/tmp/ollama-reg-count", 100, &b, NULL);
    int n = atoi(b.data ? b.data : "0");
    buf_deinit(&b);
    return n;
}

static void blobs_dir(struct fx *x, char *out, size_t n)
{
    snprintf(out, n, "%s/models/blobs", x->root);
}

static void test_pull_multipart(void **state)
{
    (void)state;
    struct fx *x = fx_new(1u << 20, 64 * 1024);  // 16 parts of 64 KiB
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), 0);
    assert_true(manifest_present(x));
    assert_true(blob_matches(x, x->model_digest));
    assert_true(blob_matches(x, x->config_digest));
    char dir[300];
    blobs_dir(x, dir, sizeof(dir));
    assert_int_equal(count_files(dir, "partial"), 0);
    assert_int_equal(atomic_load(&x->f.data_gets), 16 + 1);
    const char *ev = x->events.data;
    assert_true(cstr_starts_with(ev, "pulling manifest|0/0\n"));
    char line[200];
    snprintf(line, sizeof(line), "pulling %.12s|%u/%u\n", x->model_digest + 7, 1u << 20, 1u << 20);
    assert_non_null(strstr(ev, line));
    assert_non_null(strstr(ev, "verifying sha256 digest|0/0\nwriting manifest|0/0\nsuccess|0/0\n"));
    // Stored byte for byte.
    struct store_name n;
    store_name_parse(x->name, &n, NULL);
    char path[4096];
    store_manifest_path(x->s, &n, path, sizeof(path), NULL);
    struct buf mb;
    buf_init(&mb, 0);
    assert_int_equal(fs_read_all(path, 1 << 20, &mb, NULL), 0);
    assert_string_equal(mb.data, x->f.manifest);
    buf_deinit(&mb);

    // Pulled again: nothing is downloaded; each blob reported once as complete.
    atomic_store(&x->f.data_gets, 0);
    assert_int_equal(fx_pull(x, &e), 0);
    assert_int_equal(atomic_load(&x->f.data_gets), 0);
    assert_non_null(strstr(x->events.data, line));
    fx_free(x);
}

static void test_pull_digest_mismatch(void **state)
{
    (void)state;
    struct fx *x = fx_new(300 * 1024, 64 * 1024);
    x->f.wrong_bytes = true;
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), ERR_DIGEST);
    char want[200];
    snprintf(
        want, sizeof(want),
        "digest mismatch, file must be downloaded again: want %s, got sha256:", x->model_digest);
    assert_true(cstr_starts_with(e.msg, want));
    assert_false(manifest_present(x));
    char dir[300];
    blobs_dir(x, dir, sizeof(dir));
    assert_int_equal(count_files(dir, "sha256"), 0);  // partial and sidecars deleted
    fx_free(x);
}

static void test_pull_retries(void **state)
{
    (void)state;
    struct fx *x = fx_new(512 * 1024, 128 * 1024);
    atomic_store(&x->f.truncate_n, 2);
    atomic_store(&x->f.fail5xx_n, 2);
    atomic_store(&x->f.stall_n, 1);
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), 0);
    assert_true(blob_matches(x, x->model_digest));
    // Every byte of a truncated attempt counted: never more than blob + the cut halves.
    assert_true(atomic_load(&x->f.bytes_served) < 512 * 1024 * 2);
    fx_free(x);
}

static void test_pull_max_retries(void **state)
{
    (void)state;
    struct fx *x = fx_new(100 * 1024, 64 * 1024);
    atomic_store(&x->f.fail5xx_n, 1000);
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), ERR_NETWORK);
    assert_true(cstr_starts_with(e.msg, "max retries exceeded: "));
    assert_false(manifest_present(x));
    fx_free(x);
}

static void test_pull_not_found_and_auth(void **state)
{
    (void)state;
    struct fx *x = fx_new(1000, 64 * 1024);
    struct err e = {0};
    snprintf(x->name, sizeof(x->name), "127.0.0.1:%d/missing/m:latest", x->f.port);
    assert_int_equal(fx_pull(x, &e), ERR_NOT_FOUND);
    assert_string_equal(e.msg, "pull model manifest: file does not exist");
    // Plain http needs insecure.
    snprintf(x->name, sizeof(x->name), "http://127.0.0.1:%d/library/m:latest", x->f.port);
    struct registry_opts o = {0};
    err_clear(&e);
    assert_int_equal(registry_pull(x->reg, x->name, &o, &e), ERR_INVALID);
    assert_string_equal(e.msg, "insecure protocol http");
    // 401 without a challenge.
    snprintf(x->name, sizeof(x->name), "127.0.0.1:%d/library/m:latest", x->f.port);
    x->f.no_challenge = true;
    err_clear(&e);
    assert_int_equal(fx_pull(x, &e), ERR_UNAUTHORIZED);
    assert_non_null(strstr(e.msg, "without a usable challenge"));
    x->f.no_challenge = false;
    // Realm on another host: no token request is made.
    x->f.bearer = true;
    x->f.realm_elsewhere = true;
    err_clear(&e);
    assert_int_equal(fx_pull(x, &e), ERR_UNAUTHORIZED);
    char want[200];
    snprintf(want, sizeof(want),
             "pull model manifest: realm host \"localhost:%d\" does not match original host "
             "\"127.0.0.1:%d\"",
             x->f.port, x->f.port);
    assert_string_equal(e.msg, want);
    assert_int_equal(atomic_load(&x->f.token_requests), 0);
    fx_free(x);
}

static void test_pull_bearer_and_redirect(void **state)
{
    (void)state;
    struct fx *x = fx_new(200 * 1024, 64 * 1024);
    x->f.bearer = true;
    x->f.redirect_other_host = true;
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), 0);
    assert_true(blob_matches(x, x->model_digest));
    assert_int_equal(atomic_load(&x->f.token_requests), 1);
    // The token never went to the other host.
    assert_int_equal(atomic_load(&x->f.auth_to_other_host), 0);
    // A second pull reuses the cached token.
    struct err e2 = {0};
    assert_int_equal(store_delete(x->s, x->name, &e2), 0);
    assert_int_equal(fx_pull(x, &e), 0);
    assert_int_equal(atomic_load(&x->f.token_requests), 1);
    // The key pair was made on first use.
    char pub[300];
    snprintf(pub, sizeof(pub), "%s/home/.ollama/id_ed25519.pub", x->root);
    assert_true(fs_exists(pub));
    fx_free(x);
}

static void test_pull_basic_auth(void **state)
{
    (void)state;
    struct fx *x = fx_new(5000, 64 * 1024);
    x->f.basic = true;
    struct err e = {0};
    // Without credentials: a clear error, no token request.
    assert_int_equal(fx_pull(x, &e), ERR_UNAUTHORIZED);
    assert_non_null(strstr(e.msg, "basic auth"));
    registry_free(x->reg);
    struct registry_config cfg = {.basic_auth = "user:pass", .backoff_unit_ms = 10};
    assert_int_equal(registry_new(&x->reg, x->s, &cfg, &e), 0);
    err_clear(&e);
    assert_int_equal(fx_pull(x, &e), 0);
    assert_true(blob_matches(x, x->model_digest));
    fx_free(x);
}

static void test_pull_redirect_loop(void **state)
{
    (void)state;
    struct fx *x = fx_new(1000, 64 * 1024);
    x->f.redirect_loop = true;
    struct err e = {0};
    assert_true(fx_pull(x, &e) < 0);
    assert_non_null(strstr(e.msg, "redirects"));
    assert_false(manifest_present(x));
    fx_free(x);
}

static void test_pull_bad_manifests(void **state)
{
    (void)state;
    struct fx *x = fx_new(1000, 64 * 1024);
    const char *bad[][2] = {
        {"{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\",\"digest\":\"sha256:../../../../"
         "etc/passwd\",\"size\":1}]}",
         "invalid digest format"},
        {"{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\",\"digest\":\"sha256:aa/"
         "bb\",\"size\":1}]}",
         "invalid digest format"},
        {"{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\",\"digest\":\"sha256:abcd\","
         "\"size\":1}]}",
         "invalid digest format"},
        {"{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\",\"digest\":\"sha256:"
         "0000000000000000000000000000000000000000000000000000000000000000\",\"size\":"
         "9000000000000000000}]}",
         "invalid size"},
        {"{\"schemaVersion\":2,\"mediaType\":\"application/"
         "vnd.oci.image.index.v1+json\",\"manifests\":[]}",
         "unsupported manifest media type"},
        {"{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"x\",\"digest\":\"\",\"size\":1}]}",
         "invalid digest format"},
        {"not json", ""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        free(x->f.manifest);
        x->f.manifest = xstrdup(bad[i][0]);
        struct err e = {0};
        assert_true(fx_pull(x, &e) < 0);
        if (bad[i][1][0] && !strstr(e.msg, bad[i][1]))
            fail_msg("manifest %zu: got \"%s\", want \"%s\"", i, e.msg, bad[i][1]);
        assert_false(manifest_present(x));
    }
    assert_false(fs_exists("/etc/passwd-partial"));
    char dir[300];
    blobs_dir(x, dir, sizeof(dir));
    assert_int_equal(count_files(dir, "sha256"), 0);
    fx_free(x);
}

static void test_pull_size_mismatch(void **state)
{
    (void)state;
    struct fx *x = fx_new(5000, 64 * 1024);
    // The manifest lies about the size: the registry's length disagrees.
    char *m = x->f.manifest;
    char *p = strstr(m, "\"size\":5000");
    memcpy(p, "\"size\":4999", 11);
    struct err e = {0};
    assert_true(fx_pull(x, &e) < 0);
    assert_non_null(strstr(e.msg, "manifest says"));
    assert_false(manifest_present(x));
    fx_free(x);
}

static void test_pull_resume(void **state)
{
    (void)state;
    size_t n = 256 * 1024;
    struct fx *x = fx_new(n, 64 * 1024);
    // A download interrupted earlier: parts 0 and 1 complete, part 2 half.
    char path[4096], partial[4200], side[4300];
    store_blob_path(x->s, x->model_digest, path, sizeof(path), NULL);
    snprintf(partial, sizeof(partial), "%s-partial", path);
    int fd = open(partial, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)n), 0);
    struct fake_blob *b = find_blob(&x->f, x->model_digest, NULL);
    assert_int_equal(pwrite(fd, b->data, 64 * 1024 * 2 + 32 * 1024, 0), 64 * 1024 * 2 + 32 * 1024);
    close(fd);
    const uint64_t done[4] = {65536, 65536, 32768, 0};
    for (int i = 0; i < 4; i++) {
        snprintf(side, sizeof(side), "%s-%d", partial, i);
        char *line = xasprintf("{\"N\":%d,\"Offset\":%d,\"Size\":65536,\"Completed\":%llu}\n", i,
                               i * 65536, (unsigned long long)done[i]);
        assert_int_equal(fs_write_atomic(side, line, strlen(line), NULL), 0);
        free(line);
    }
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), 0);
    assert_true(blob_matches(x, x->model_digest));
    // Only the missing bytes were fetched: from 160 KiB on (plus the config).
    assert_int_equal(atomic_load(&x->f.min_range_start[0]), 2 * 65536 + 32768);
    assert_int_equal(atomic_load(&x->f.bytes_served), (long long)(n - (2 * 65536 + 32768)) + 46);
    assert_false(fs_exists(partial));
    snprintf(side, sizeof(side), "%s-0", partial);
    assert_false(fs_exists(side));
    fx_free(x);
}

struct puller {
    struct fx *x;
    const char *name;
    int rc;
};

static void *pull_thread(void *arg)
{
    struct puller *p = arg;
    struct registry_opts o = {.insecure = true};
    struct err e = {0};
    p->rc = registry_pull(p->x->reg, p->name, &o, &e);
    return NULL;
}

static void test_pull_concurrent_shared_blob(void **state)
{
    (void)state;
    struct fx *x = fx_new(2u << 20, 256 * 1024);  // 8 parts
    char n1[128], n2[128];
    snprintf(n1, sizeof(n1), "127.0.0.1:%d/library/a:latest", x->f.port);
    snprintf(n2, sizeof(n2), "127.0.0.1:%d/library/b:latest", x->f.port);
    struct puller p1 = {x, n1, -1}, p2 = {x, n2, -1};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, pull_thread, &p1);
    pthread_create(&t2, NULL, pull_thread, &p2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(p1.rc, 0);
    assert_int_equal(p2.rc, 0);
    assert_true(blob_matches(x, x->model_digest));
    // The shared blob crossed the wire once (8 parts + 1 config, maybe config twice).
    assert_true(atomic_load(&x->f.bytes_served) < (long long)(2u << 20) + 200);
    fx_free(x);
}

static void test_pull_disk_full(void **state)
{
    (void)state;
    struct fx *x = fx_new(1u << 20, 64 * 1024);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 256 * 1024;
    setrlimit(RLIMIT_FSIZE, &lim);
    struct err e = {0};
    int rc = fx_pull(x, &e);
    setrlimit(RLIMIT_FSIZE, &old);
    assert_int_equal(rc, ERR_IO);
    assert_non_null(strstr(e.msg, "File too large"));
    assert_false(manifest_present(x));
    struct store_check_report r = {0};
    assert_int_equal(store_check(x->s, &r, &e), 0);
    assert_true(store_check_ok(&r));
    store_check_report_deinit(&r);
    fx_free(x);
}

static void test_pull_buffered_io(void **state)
{
    // The same pulls with every write through the page cache (the path of
    // file systems without O_DIRECT).
    g_buffered_io = true;
    test_pull_multipart(state);
    test_pull_resume(state);
    test_pull_digest_mismatch(state);
    g_buffered_io = false;
}

static void test_push(void **state)
{
    (void)state;
    struct fx *x = fx_new(300 * 1024, 128 * 1024);
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), 0);
    // Push the pulled model to another repository of the same fake: blobs
    // are found by HEAD; push a new blob layer through an upload session.
    x->f.n_blobs = 0;  // the fake forgets its blobs (kept allocated below)
    struct fake_blob saved[FAKE_MAX_BLOBS];
    memcpy(saved, x->f.blobs, sizeof(saved));
    memset(x->f.blobs, 0, sizeof(x->f.blobs));
    char dst[128];
    snprintf(dst, sizeof(dst), "127.0.0.1:%d/Team/Coder:v1", x->f.port);
    assert_int_equal(store_copy(x->s, x->name, dst, &e), 0);
    struct registry_opts o = {.insecure = true, .progress = on_progress, .progress_ctx = x};
    buf_reset(&x->events);
    assert_int_equal(registry_push(x->reg, dst, &o, &e), 0);
    assert_true(cstr_starts_with(x->events.data, "retrieving manifest|0/0\n"));
    assert_non_null(strstr(x->events.data, "pushing manifest|0/0\nsuccess|0/0\n"));
    // The fake verified each upload's digest; the model blob arrived whole in 3 parts.
    assert_non_null(find_blob(&x->f, x->model_digest, NULL));
    assert_non_null(find_blob(&x->f, x->config_digest, NULL));
    assert_int_equal(find_blob(&x->f, x->model_digest, NULL)->len, 300 * 1024);
    // Manifest: re-encoded, no trailing newline.
    assert_non_null(x->f.pushed_manifest);
    assert_true(cstr_starts_with(x->f.pushed_manifest, "{\"schemaVersion\":2,"));
    assert_true(x->f.pushed_manifest[strlen(x->f.pushed_manifest) - 1] == '}');
    for (int i = 0; i < FAKE_MAX_BLOBS; i++)
        free(saved[i].data);

    // A layer that names its source model is mounted, not uploaded.
    char *m = xasprintf("{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":"
                        "\"%s\",\"digest\":\"%s\",\"size\":%zu},\"layers\":[{\"mediaType\":\"%s\","
                        "\"digest\":\"%s\",\"size\":%d,\"from\":\"team/coder:v1\"}]}\n",
                        STORE_MT_MANIFEST, STORE_MT_CONFIG, x->config_digest,
                        find_blob(&x->f, x->config_digest, NULL)->len, STORE_MT_MODEL,
                        x->model_digest, 300 * 1024);
    snprintf(dst, sizeof(dst), "127.0.0.1:%d/team/other:v2", x->f.port);
    struct store_name on;
    assert_int_equal(store_name_parse(dst, &on, &e), 0);
    assert_int_equal(store_manifest_write(x->s, &on, m, strlen(m), &e), 0);
    free(m);
    // HEAD says unknown, but the mount request finds the blob.
    int n_before = x->f.n_blobs;
    atomic_store(&x->f.mounts, 0);
    x->f.head_404 = true;
    assert_int_equal(registry_push(x->reg, dst, &o, &e), 0);
    x->f.head_404 = false;
    assert_int_equal(atomic_load(&x->f.mounts), 1);  // the model layer (the config has no from)
    assert_int_equal(x->f.n_blobs, n_before);
    // Missing local model.
    buf_reset(&x->events);
    snprintf(dst, sizeof(dst), "127.0.0.1:%d/team/none:v1", x->f.port);
    err_clear(&e);
    assert_int_equal(registry_push(x->reg, dst, &o, &e), ERR_NOT_FOUND);
    assert_non_null(strstr(x->events.data, "couldn't retrieve manifest"));
    fx_free(x);
}

struct pusher {
    struct fx *x;
    const char *name;
    int rc;
};

static void *push_thread(void *arg)
{
    struct pusher *p = arg;
    struct registry_opts o = {.insecure = true};
    struct err e = {0};
    p->rc = registry_push(p->x->reg, p->name, &o, &e);
    return NULL;
}

static void test_push_concurrent_shared(void **state)
{
    (void)state;
    struct fx *x = fx_new(300 * 1024, 128 * 1024);
    struct err e = {0};
    assert_int_equal(fx_pull(x, &e), 0);
    for (int i = 0; i < x->f.n_blobs; i++)
        free(x->f.blobs[i].data);
    memset(x->f.blobs, 0, sizeof(x->f.blobs));
    x->f.n_blobs = 0;
    atomic_store(&x->f.upload_sessions, 0);
    char dst[128];
    snprintf(dst, sizeof(dst), "127.0.0.1:%d/team/same:v1", x->f.port);
    assert_int_equal(store_copy(x->s, x->name, dst, &e), 0);
    struct pusher p1 = {x, dst, -1}, p2 = {x, dst, -1};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, push_thread, &p1);
    pthread_create(&t2, NULL, push_thread, &p2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(p1.rc, 0);
    assert_int_equal(p2.rc, 0);
    // Each blob (model, config) went up once.
    assert_int_equal(atomic_load(&x->f.upload_sessions), 2);
    fx_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_parse_spec),
        cmocka_unit_test(test_key_create),
        cmocka_unit_test(test_token_signature_spec),
        cmocka_unit_test(test_challenge_forms),
        cmocka_unit_test(test_part_size),
        cmocka_unit_test(test_pull_multipart),
        cmocka_unit_test(test_pull_digest_mismatch),
        cmocka_unit_test(test_pull_retries),
        cmocka_unit_test(test_pull_max_retries),
        cmocka_unit_test(test_pull_not_found_and_auth),
        cmocka_unit_test(test_pull_bearer_and_redirect),
        cmocka_unit_test(test_pull_basic_auth),
        cmocka_unit_test(test_pull_redirect_loop),
        cmocka_unit_test(test_pull_bad_manifests),
        cmocka_unit_test(test_pull_size_mismatch),
        cmocka_unit_test(test_pull_resume),
        cmocka_unit_test(test_pull_concurrent_shared_blob),
        cmocka_unit_test(test_pull_disk_full),
        cmocka_unit_test(test_pull_buffered_io),
        cmocka_unit_test(test_push),
        cmocka_unit_test(test_push_concurrent_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

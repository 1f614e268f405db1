// Shared between the registry module's files: the registry object, HTTP
// requests over the httpc wrapper with the "auth retry" of registry.md §1.1, and the
// shared blob downloads.
#pragma once

#include "registry/registry.h"

#include "httpc/httpc.h"

#include <pthread.h>
#include <stdatomic.h>

#define REG_MAX_MANIFEST_BYTES (4u << 20)
#define REG_MAX_SMALL_BODY     (64u << 10)          // error bodies, tokens
#define REG_MAX_BLOB_BYTES     ((uint64_t)1 << 42)  // 4 TiB: anything above is a lie
// Requests that carry no body bytes for a while by design (a pull-through
// mirror fetches the blob upstream before it answers) get a long limit
// instead of stall detection.
#define REG_SLOW_REPLY_S 3600L
// registry.md §1: "ollama/<version> (<arch> <os>) <toolchain>", with Go's words.
#if defined(__aarch64__)
#define REG_ARCH "arm64"
#elif defined(__x86_64__)
#define REG_ARCH "amd64"
#else
#define REG_ARCH "unknown"
#endif
#if defined(__APPLE__)
#define REG_OS "darwin"
#else
#define REG_OS "linux"
#endif
#define REG_USER_AGENT "ollama/" OLLAMA_VERSION " (" REG_ARCH " " REG_OS ") C/c11"

struct reg_download;
struct reg_token;

struct registry {
    struct store *store;
    char *key_path;
    int stall_timeout_ms;
    int backoff_unit_ms;
    char **realm_allow;
    char *basic_auth;
    char *mirror_upstream;
    char *pull_mirror;  // OLLAMA_PULL_MIRROR without trailing '/', or NULL
    uint64_t part_min, part_max;
    bool direct_io;
    pthread_mutex_t mu;  // guards downloads and tokens
    struct reg_download *downloads;
    struct reg_token *tokens;
    pthread_cond_t uploads_cv;  // with mu: an upload ended
    char **uploads;             // "host digest" being uploaded (mu)
    size_t n_uploads;
    int n_background;        // mirror pulls running (mu)
    volatile int bg_cancel;  // registry_free has begun: background pulls stop (reg_cancel_set)
};

// One pull/push/mirror operation against one registry host.
struct reg_session {
    struct registry *reg;
    char base[400];  // "https://host[:port]"
    char host[STORE_HOST_MAX + 1];
    char repo[2 * STORE_PART_MAX + 2];  // lowercased "ns/model"
    char *token;                        // bearer token (owned), NULL until needed
    char *basic;                        // "Basic <b64>" when a Basic challenge was answered
    const volatile int *cancel;
};

struct reg_rq {
    const char *method;  // "GET", "HEAD", "POST", "PUT", "PATCH"
    const char *url;
    const char *const *headers;  // NULL-terminated "Name: value" or NULL
    const void *body;            // request body in memory
    size_t body_len;
    int body_fd;  // or: body from a file range (when body_fd > 0)
    uint64_t body_off, body_size;
    void *md5;        // EVP_MD_CTX fed with file-range bytes, or NULL
    bool follow;      // follow redirects (at most 10)
    bool no_auth;     // never send credentials
    bool stop_body;   // do not read the response body (close early)
    size_t max_body;  // cap for the collected response body
    long timeout_s;   // 0 = no total limit (stall detection only)
    int stall_ms;     // abort when no byte moves for this long (0 = off)
    // Response body sink (blob data); returns false to abort. NULL = collect.
    bool (*sink)(void *ctx, long status, const char *p, size_t n);
    void *sink_ctx;
    // Called as bytes move (upload progress); may be NULL.
    void (*on_xfer)(void *ctx, uint64_t down, uint64_t up);
    void *xfer_ctx;
};

struct reg_rsp {
    long status;
    struct buf body;
    char *location;         // Location (resolved against the request URL)
    char *upload_location;  // Docker-Upload-Location
    char *www_auth;
    char *content_digest;
    int64_t content_length;  // -1 when absent
    char *effective_url;
    char *content_range;
    bool stalled;  // aborted by the stall watchdog
};

void reg_rsp_init(struct reg_rsp *r);
void reg_rsp_deinit(struct reg_rsp *r);
// One HTTP exchange; no auth logic. Transport failures → ERR_NETWORK with
// libcurl's text.
int reg_http(const struct reg_rq *rq, const char *auth, const volatile int *cancel,
             struct reg_rsp *rsp, struct err *e);
// §1.1: sends with the session's credentials; a 401 gets a token and one
// retry. Then 404 → ERR_NOT_FOUND "file does not exist", >= 400 →
// "<code>: <body>". Returns 0 with rsp filled for any other status.
int reg_session_do(struct reg_session *s, const struct reg_rq *rq, struct reg_rsp *rsp,
                   struct err *e);
// Authorization value to send to url: the session's token/basic only when
// url's host is the registry host; NULL otherwise.
const char *reg_session_auth_for(const struct reg_session *s, const char *url);
void reg_session_init(struct reg_session *s, struct registry *reg, const struct store_name *n,
                      bool insecure);
void reg_session_deinit(struct reg_session *s);
// Obtains credentials for a 401 answer (auth.c).
int reg_auth_challenge(struct reg_session *s, const char *www_auth, const char *req_url,
                       struct err *e);
// host[:port] of a URL into out (lower case); false when it has none.
bool reg_url_host(const char *url, char *out, size_t n);
void reg_sleep_ms(int64_t ms);
bool reg_cancelled(const volatile int *cancel);
// Sets a cancel flag (atomically; see reg_cancelled).
void reg_cancel_set(volatile int *cancel);

// Downloads blob digest (size from the manifest, 0 if unknown) of the
// session's repository into the store, shared by digest with concurrent
// callers (download.c). Emits "pulling <hex12>" progress every 60 ms.
int reg_blob_fetch(struct reg_session *s, const char *digest, int64_t size,
                   const struct registry_opts *o, struct err *e);

void reg_progress(const struct registry_opts *o, const char *status, const char *digest,
                  uint64_t total, uint64_t completed);

// ---------------------------------------------------------------------------
// Blob files filled by parallel streams, written with O_DIRECT where the
// file system takes it and hashed in file order on threads of their own
// (blobfile.c).

#define REG_BLOBFILE_BUF_BYTES (2u << 20)

struct reg_blobfile;
struct reg_bf_buf;

struct reg_blobfile_hooks {
    void *ctx;
    // On the writer thread, unlocked, after bytes [off, off + n) of the
    // stream tagged `tag` are on file. A stream's bytes land in order.
    void (*landed)(void *ctx, void *tag, uint64_t off, uint64_t n);
    // Bytes [0, result) are on file. Called with the blob file's lock held:
    // must not block or call back into it.
    uint64_t (*frontier)(void *ctx);
};

// One writer of consecutive bytes from `next` on (a download part's
// attempt). Caller's storage; used by one thread at a time.
struct reg_blobstream {
    struct reg_blobfile *f;
    void *tag;
    uint64_t next;  // file offset of the next byte put
    struct reg_bf_buf *cur;
    uint64_t pending;  // submitted, not landed yet (blob file's lock)
};

// Opens (creating, sized to total) path and starts the writer and hasher.
// direct=false keeps every write in the page cache, as do file systems where
// O_DIRECT is no clear win (anything but ext4, xfs, btrfs and f2fs).
int reg_blobfile_open(struct reg_blobfile **out, const char *path, uint64_t total,
                      const struct reg_blobfile_hooks *hooks, bool direct, struct err *e);
// Whether the aligned bulk of the writes bypasses the page cache.
bool reg_blobfile_direct(const struct reg_blobfile *f);
void reg_blobstream_init(struct reg_blobstream *s, struct reg_blobfile *f, void *tag, uint64_t off);
// Copies n bytes in; may wait for a free buffer. Fails with the file's
// first error (a write that failed, say ENOSPC) once there is one.
int reg_blobstream_put(struct reg_blobstream *s, const void *data, size_t n, struct err *e);
// Submits what is staged and waits until all of it has landed (or failed).
int reg_blobstream_flush(struct reg_blobstream *s, struct err *e);
void reg_blobstream_deinit(struct reg_blobstream *s);  // flushes first
// After every stream has flushed: waits for the hasher to reach the end of
// the file and gives the SHA-256 (ERR_IO when bytes are missing).
int reg_blobfile_digest(struct reg_blobfile *f, char hex[DIGEST_HEX_LEN + 1], struct err *e);
// Stops the threads, fsyncs when sync (and nothing failed), closes.
int reg_blobfile_close(struct reg_blobfile *f, bool sync, struct err *e);

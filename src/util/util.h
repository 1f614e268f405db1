// util: the base vocabulary every other module speaks: errors, logging,
// memory, capped buffers and string slices, checked arithmetic and parsing,
// durations and sizes, environment configuration, SHA-256 digests, and safe
// file operations (atomic writes, paths that cannot leave their root).
//
// Nothing here knows about models or HTTP. Everything is thread-safe unless
// a comment says otherwise (log level and env config are set at start-up).
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// ---------------------------------------------------------------------------
// Errors (STYLE.md): functions return 0 (or a count) on success and a negative
// ERR_* code on failure, filling in `struct err` (may be NULL) for a person.

#define ERR_MAP(X)                                                                                 \
    X(INVALID, "invalid argument")                                                                 \
    X(NOMEM, "out of memory")                                                                      \
    X(IO, "i/o error")                                                                             \
    X(NOT_FOUND, "not found")                                                                      \
    X(EXISTS, "already exists")                                                                    \
    X(TOO_LARGE, "too large")                                                                      \
    X(RANGE, "value out of range")                                                                 \
    X(FORMAT, "malformed input")                                                                   \
    X(UNSUPPORTED, "not supported")                                                                \
    X(DIGEST, "digest mismatch")                                                                   \
    X(PERMISSION, "permission denied")                                                             \
    X(BUSY, "server busy")                                                                         \
    X(TIMEOUT, "timed out")                                                                        \
    X(CANCELLED, "cancelled")                                                                      \
    X(NETWORK, "network error")                                                                    \
    X(UNAUTHORIZED, "unauthorized")                                                                \
    X(INTERNAL, "internal error")                                                                  \
    X(NOT_IMPLEMENTED, "not implemented yet")

enum err_code {
    ERR_OK = 0,
#define ERR_ENUM_(name, msg) ERR_##name,
    ERR_FIRST_ = -100,
    ERR_MAP(ERR_ENUM_)
#undef ERR_ENUM_
};

#define ERR_MSG_MAX 256

struct err {
    int code;
    char msg[ERR_MSG_MAX];
};

// Sets e (if non-NULL and not already set: the first error is the root cause)
// and returns code. fmt may be NULL for the code's default message.
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Prepends "prefix: " to an already set message.
void err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_clear(struct err *e);
// Default message for a code ("not found"); "unknown error" for others.
const char *err_str(int code);
// Name of the code ("NOT_FOUND").
const char *err_name(int code);

// Aborts with file:line. For our own bugs, never for input.
#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            util_assert_fail(#cond, __FILE__, __LINE__);                                           \
    } while (0)
_Noreturn void util_assert_fail(const char *cond, const char *file, int line);

// ---------------------------------------------------------------------------
// Memory: small bookkeeping allocations abort on failure.

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
// Heap-allocated formatted string.
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Overflow-checked arithmetic: return false on overflow (*out untouched).
bool size_add(size_t *out, size_t a, size_t b);
bool size_mul(size_t *out, size_t a, size_t b);
bool u64_add(uint64_t *out, uint64_t a, uint64_t b);
bool u64_mul(uint64_t *out, uint64_t a, uint64_t b);
bool i64_mul(int64_t *out, int64_t a, int64_t b);

// ---------------------------------------------------------------------------
// Arena: per-request / per-parse allocations freed in one call.

struct arena {
    struct arena_chunk *head;
    size_t cap_bytes;  // 0 = unlimited
    size_t used_bytes;
};
void arena_init(struct arena *a, size_t cap_bytes);
// Returns NULL when the cap would be exceeded (allocations are 16-aligned).
void *arena_alloc(struct arena *a, size_t n);
char *arena_strndup(struct arena *a, const char *s, size_t n);
void arena_deinit(struct arena *a);

// ---------------------------------------------------------------------------
// Buffers and strings.

// Growable byte buffer, always NUL-terminated, with a hard cap.
struct buf {
    char *data;  // NULL until the first append; buf_cstr() never returns NULL
    size_t len;
    size_t cap;      // allocated bytes
    size_t max_len;  // growing past this fails with ERR_TOO_LARGE (0 = SIZE_MAX/2)
};

void buf_init(struct buf *b, size_t max_len);
void buf_deinit(struct buf *b);
void buf_reset(struct buf *b);  // len = 0, keeps memory
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *p, size_t n);
int buf_append_str(struct buf *b, const char *s);
int buf_append_char(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
const char *buf_cstr(const struct buf *b);
// Takes ownership of the data (caller frees); the buffer is reset to empty.
char *buf_take(struct buf *b);

// Appends s[0..n) quoted as Go's strconv.Quote does (fmt's %q; Go-literal
// strings in Modelfiles and show output).
int buf_append_go_quoted(struct buf *b, const char *s, size_t n);
// Appends v as Go's %v prints a float64 (shortest digits, %g's exponent
// rule): "0.1", "1e+06", "1.5e-05", "-0", "NaN", "+Inf" (gofmt.c).
int buf_append_go_float(struct buf *b, double v);

// Non-owning slice.
struct str {
    const char *ptr;
    size_t len;
};
#define STR_LIT(s) ((struct str){(s), sizeof(s) - 1})
struct str str_from(const char *s);
bool str_eq(struct str a, struct str b);
bool str_eq_cstr(struct str a, const char *s);
bool str_starts_with(struct str s, const char *prefix);
bool str_ends_with(struct str s, const char *suffix);
struct str str_trim(struct str s);  // ASCII whitespace
char *str_dup(struct str s);        // xmalloc'd, NUL-terminated

// Case-insensitive ASCII comparison helpers.
bool ascii_ieq(const char *a, const char *b);
bool cstr_starts_with(const char *s, const char *prefix);
bool cstr_ends_with(const char *s, const char *suffix);

// UTF-8: true if the n bytes are valid UTF-8 (no overlongs, no surrogates).
bool utf8_valid(const char *s, size_t n);
// Decodes the UTF-8 sequence at s (n > 0 bytes): the code point, with *w its
// length; UTF8_INVALID with *w = 1 for a byte that starts no valid sequence.
#define UTF8_INVALID 0xFFFFFFFFu
uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *w);
// Length in bytes of the longest prefix of s[0..n) that ends on a character
// boundary (an incomplete trailing sequence is excluded).
size_t utf8_complete_prefix(const char *s, size_t n);
// The value of a hex digit (0-9, a-f, A-F), or -1.
int hex_digit(char c);

// Standard base64 with padding: appends the encoding of n bytes to out;
// base64_valid says whether s is what Go's StdEncoding decodes (groups of
// 4, '=' only as final padding with zero padding bits, CR/LF skipped).
void base64_encode(const void *data, size_t n, struct buf *out);
bool base64_valid(const char *s);
// Decodes what base64_valid accepts, appending the bytes to out;
// ERR_FORMAT for anything else.
int base64_decode(const char *s, struct buf *out, struct err *e);

// Encodes code point c (at most 0x10FFFF; surrogates are encoded as given,
// callers that must not emit them replace them first) into out: 1 to 4 bytes.
size_t utf8_encode(uint32_t c, char out[4]);
// Appends c's UTF-8 encoding to b.
int buf_append_utf8(struct buf *b, uint32_t c);

// Unicode properties (utf8.c, over utf8proc): the general category of a
// code point (UTF8_CAT_CN for unassigned ones), as in the Unicode tables.
enum utf8_category {
    UTF8_CAT_CN,
    UTF8_CAT_LU,
    UTF8_CAT_LL,
    UTF8_CAT_LT,
    UTF8_CAT_LM,
    UTF8_CAT_LO,
    UTF8_CAT_MN,
    UTF8_CAT_MC,
    UTF8_CAT_ME,
    UTF8_CAT_ND,
    UTF8_CAT_NL,
    UTF8_CAT_NO,
    UTF8_CAT_PC,
    UTF8_CAT_PD,
    UTF8_CAT_PS,
    UTF8_CAT_PE,
    UTF8_CAT_PI,
    UTF8_CAT_PF,
    UTF8_CAT_PO,
    UTF8_CAT_SM,
    UTF8_CAT_SC,
    UTF8_CAT_SK,
    UTF8_CAT_SO,
    UTF8_CAT_ZS,
    UTF8_CAT_ZL,
    UTF8_CAT_ZP,
    UTF8_CAT_CC,
    UTF8_CAT_CF,
    UTF8_CAT_CS,
    UTF8_CAT_CO,
};
enum utf8_category utf8_category(uint32_t c);
// Lu, Ll or Lt (Python's "cased" for str.title).
bool utf8_is_cased(uint32_t c);
// Go's unicode.IsLetter(c) || unicode.IsDigit(c): L* or Nd.
bool utf8_is_letter_or_digit(uint32_t c);
// Go's strconv.IsPrint: letters, marks, numbers, punctuation, symbols and
// the ASCII space (what %q and the Modelfile parser keep unescaped).
bool utf8_is_go_print(uint32_t c);
// Simple (one code point) case mappings.
uint32_t utf8_toupper(uint32_t c);
uint32_t utf8_tolower(uint32_t c);
uint32_t utf8_totitle(uint32_t c);
// Terminal columns of c (0 for control and combining characters, 2 for wide).
int utf8_width(uint32_t c);
// The first code point of c's canonical decomposition (NFD): the base letter
// of an accented one ("é" -> "e"), c itself when it has none.
uint32_t utf8_nfd_first(uint32_t c);

// ---------------------------------------------------------------------------
// Safe integer / float parsing: the whole string must be consumed.

int str_to_i64(const char *s, int64_t min, int64_t max, int64_t *out, struct err *e);
int str_to_u64(const char *s, uint64_t max, uint64_t *out, struct err *e);
int str_to_double(const char *s, double *out, struct err *e);
// Go's strconv.ParseInt(s, 10, 64): an optional sign, then one or more ASCII
// digits, within int64. False (out untouched) otherwise.
bool str_go_parse_int(const char *s, int64_t *out);

// ---------------------------------------------------------------------------
// Logging to stderr: time=... level=INFO source=file.c:123 msg="..." key=value

enum log_level {
    LOG_TRACE = -8,
    LOG_DEBUG = -4,
    LOG_INFO = 0,
    LOG_WARN = 4,
    LOG_ERROR = 8,
};

void log_set_level(int level);
int log_get_level(void);
bool log_enabled(int level);
// kv is an optional pre-formatted " key=value ..." tail (may be NULL).
void log_write(int level, const char *file, int line, const char *kv, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define log_trace(...) log_write(LOG_TRACE, __FILE__, __LINE__, NULL, __VA_ARGS__)
#define log_debug(...) log_write(LOG_DEBUG, __FILE__, __LINE__, NULL, __VA_ARGS__)
#define log_info(...)  log_write(LOG_INFO, __FILE__, __LINE__, NULL, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_WARN, __FILE__, __LINE__, NULL, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __FILE__, __LINE__, NULL, __VA_ARGS__)
// With key=value pairs: log_kv(LOG_INFO, "model=%s", "loaded model", name)
#define log_kv(level, kv, ...) log_write(level, __FILE__, __LINE__, kv, __VA_ARGS__)
// Appends " key=value" to b, quoting value as slog's text handler does (when
// empty or holding spaces, '=', '"', control bytes or invalid UTF-8), for
// building log_kv tails.
int log_kv_append(struct buf *b, const char *key, const char *value);

// ---------------------------------------------------------------------------
// Time, durations and sizes.

int64_t time_now_ns(void);        // CLOCK_REALTIME
int64_t time_monotonic_ns(void);  // CLOCK_MONOTONIC

#define DURATION_FOREVER INT64_MIN  // a negative duration: keep forever
// Go's zero time.Time (0001-01-01T00:00:00Z), which does not fit in int64
// nanoseconds: time_parse_rfc3339 returns it for that instant,
// time_format_rfc3339 prints it back, time_format_relative prints "Never".
#define TIME_ZERO INT64_MIN
// Parses a Go duration ("5m", "1h30m", "300ms", "-1s", "1.5h", "0") or a
// bare integer of seconds ("300", "-1") into nanoseconds. Negative results
// are returned as they are (callers treat < 0 as forever). Units: ns us µs
// ms s m h, fractions allowed ("1.5h", ".5s"). Malformed → ERR_INVALID,
// beyond ±2^63 ns → ERR_RANGE. *out_ns is written only on success.
int duration_parse(const char *s, int64_t *out_ns, struct err *e);
// Go's time.Duration.String(): "5m0s", "1h30m0s", "300ms", "1.5µs", "0s".
void duration_format(int64_t ns, char *out, size_t n);
// Relative time as Ollama prints it: "4 minutes from now", "2 hours ago",
// "About a minute ago", "Less than a second ago", "Forever" (t_ns more than
// ~20 years ahead), "Never" for TIME_ZERO. now_ns and t_ns are unix
// nanoseconds. The CLI lower-cases it where Ollama uses HumanTimeLower.
void time_format_relative(int64_t t_ns, int64_t now_ns, char *out, size_t n);
// RFC 3339 with nanoseconds and local offset, as Go prints time.Time in JSON:
// "2024-05-01T12:00:00.123456789-07:00"; trailing zeros of the fraction are
// trimmed (no fraction at all when zero) and a zero offset prints "Z".
void time_format_rfc3339(int64_t t_ns, char *out, size_t n);
// The same in UTC ("…Z"), as Ollama writes created_at.
void time_format_rfc3339_utc(int64_t t_ns, char *out, size_t n);
// Parses RFC 3339 ("…T…Z" or "…±hh:mm", optional fraction, digits past the
// 9th ignored). Times outside int64 nanoseconds (years before 1678 or after
// 2261, e.g. Go's "forever" expiry) saturate to INT64_MIN+1 / INT64_MAX;
// Go's zero time gives TIME_ZERO. Malformed → ERR_INVALID, a field out of
// range (month 13, Feb 30) → ERR_RANGE.
int time_parse_rfc3339(const char *s, int64_t *out_ns, struct err *e);
// Human size in base 1000 as Ollama prints it (format.HumanBytes): "358 B",
// "8.4 KB", "1.6 GB", "19 GB" (one decimal below 10 unless whole, truncated above).
void size_format_human(uint64_t bytes, char *out, size_t n);

// ---------------------------------------------------------------------------
// Environment configuration (docs/spec/env.md). Read once with
// env_config_load(); bad values log a warning and keep the default.

struct host_addr {
    char scheme[16];  // "http" or "https" (whatever came before "://")
    char host[256];   // "127.0.0.1", "::1" (no brackets), "example.com", "" (all interfaces)
    uint16_t port;    // 11434 without a scheme; 80 / 443 for http:// / https:// without port
    char path[256];   // path prefix with leading '/' ("/ollama"), or ""
};

// Parses OLLAMA_HOST forms (docs/spec/cli.md §1.1): "", "0.0.0.0", ":8080",
// "host:port", "http://host", "https://host:port/path", "[::1]:11434",
// "::1", "ollama.com" (→ https://ollama.com:443). The value is cleaned as
// env_clean does. A bad port warns and uses the default port, as Ollama
// does; only a host or path too long for the struct is an error (ERR_INVALID).
// Go net.SplitHostPort: "host:port" or "[v6]:port"; false when there is no
// port or the host is ambiguous (an unbracketed IPv6 address).
bool host_split_port(struct str hp, struct str *host, struct str *port);
int host_parse(const char *s, struct host_addr *out, struct err *e);
// "http://127.0.0.1:11434" (brackets for IPv6), then the path prefix.
void host_format_url(const struct host_addr *h, char *out, size_t n);
// As host_format_url, but an unspecified host ("", "0.0.0.0", "::") becomes
// the loopback address of the same family: the URL a client connects to.
void host_format_connect_url(const struct host_addr *h, char *out, size_t n);

struct env_config {
    struct host_addr host;
    char *models_dir;               // OLLAMA_MODELS or $HOME/.ollama/models
    int64_t keep_alive_ns;          // OLLAMA_KEEP_ALIVE (5m); < 0 = forever, 0 = unload at once
    uint64_t context_length;        // 0 = automatic
    uint64_t num_parallel;          // 1
    uint64_t max_transfer_streams;  // 4
    uint64_t max_loaded_models;     // 0 = automatic (3 on CPU)
    uint64_t max_queue;             // 512
    char **origins;                 // OLLAMA_ORIGINS entries, then defaults; NULL-terminated
    int debug_level;  // log level from OLLAMA_DEBUG (LOG_INFO, LOG_DEBUG, LOG_TRACE, -4n);
                      // the caller applies it with log_set_level()
    bool noprune;
    int flash_attention;      // -1 automatic, 0 off, 1 on
    char kv_cache_type[8];    // "f16", "q8_0", "q4_0" (others warn and keep "f16")
    int64_t load_timeout_ns;  // 5m; <= 0 = no limit
    uint64_t gpu_overhead;
    bool sched_spread;
    bool nohistory;
    bool auth;
    bool no_cloud;
    char *registry_mirror;     // OLLAMA_REGISTRY_MIRROR (ollama-c extension), NULL = off
    char *pull_mirror;         // OLLAMA_PULL_MIRROR (ollama-c extension): registry that pulls of
                               // registry.ollama.ai names try first, NULL = off
    int64_t drain_timeout_ns;  // OLLAMA_DRAIN_TIMEOUT (ollama-c extension, 5s): how long SIGTERM
                               // lets requests in flight finish; <= 0 = stop at once
    bool go_template;          // OLLAMA_GO_TEMPLATE (true): prefer the Modelfile TEMPLATE
    bool debug_log_requests;   // OLLAMA_DEBUG_LOG_REQUESTS
    char *llm_library;         // OLLAMA_LLM_LIBRARY, NULL = automatic
    char *editor;              // OLLAMA_EDITOR, NULL = unset
};

// Loads from the process environment. Never fails: bad values warn and
// fall back to the default. Free with env_config_deinit.
void env_config_load(struct env_config *c);
void env_config_deinit(struct env_config *c);
// Appends the effective configuration as Ollama logs it at start-up
// ("map[OLLAMA_DEBUG:INFO OLLAMA_HOST:http://127.0.0.1:11434 ...]", keys
// sorted), for log_kv(LOG_INFO, "env=\"...\"", "server config").
int env_config_describe(const struct env_config *c, struct buf *out);
// Parsing rules of env.md §1, exposed for tests.
// env_clean: trims whitespace, then surrounding '"' / '\'' characters, into
// tmp; returns tmp, or NULL when raw is NULL, empty after trimming, or does
// not fit in n bytes.
const char *env_clean(const char *raw, char *tmp, size_t n);
// Go strconv.ParseBool words → their value; any other non-empty value → true;
// NULL or "" → dflt.
bool env_parse_bool(const char *v, bool dflt);
// Log level for an OLLAMA_DEBUG value (cleaned): unset/"0"/"false" → LOG_INFO,
// "1"/"true" → LOG_DEBUG, "2" → LOG_TRACE, other integers n → -4n.
int env_parse_debug_level(const char *v);
// The user's home (HOME, else getpwuid, else "/"), read once and cached; never NULL.
const char *env_home_dir(void);

// ---------------------------------------------------------------------------
// Digests: sha256 only, as the Ollama store uses.

#define DIGEST_HEX_LEN 64

struct sha256 {
    void *ctx;  // EVP_MD_CTX (OpenSSL stays inside util)
};
int sha256_init(struct sha256 *h);
void sha256_update(struct sha256 *h, const void *p, size_t n);
// Writes 64 lowercase hex chars + NUL into hex[65] and frees the context.
void sha256_final(struct sha256 *h, char hex[DIGEST_HEX_LEN + 1]);
void sha256_abort(struct sha256 *h);
void sha256_hex(const void *p, size_t n, char hex[DIGEST_HEX_LEN + 1]);
int sha256_file(const char *path, char hex[DIGEST_HEX_LEN + 1], uint64_t *size_out, struct err *e);

// "sha256:<64 lowercase hex>" → hex. Anything else is ERR_INVALID.
int digest_parse(const char *s, char hex[DIGEST_HEX_LEN + 1], struct err *e);
// "sha256-<64 lowercase hex>" (blob file name form) → hex.
int digest_parse_filename(const char *s, char hex[DIGEST_HEX_LEN + 1], struct err *e);
bool digest_hex_valid(const char *hex);
void digest_format(const char *hex, char out[DIGEST_HEX_LEN + 8]);  // "sha256:<hex>"

// ---------------------------------------------------------------------------
// Files.

// mkdir -p with mode 0755 per element.
int fs_mkdir_p(const char *path, struct err *e);
// Writes data atomically: temp file in the same directory, fsync, rename,
// fsync the directory.
int fs_write_atomic(const char *path, const void *data, size_t n, struct err *e);
// Reads a whole file, failing with ERR_TOO_LARGE past max_bytes.
int fs_read_all(const char *path, size_t max_bytes, struct buf *out, struct err *e);
int fs_fsync_dir(const char *dir, struct err *e);
bool fs_exists(const char *path);
// Joins root and rel into out; fails (ERR_INVALID) when rel is absolute,
// contains a ".." element, a NUL, or would otherwise leave root.
int path_join_under(const char *root, const char *rel, char *out, size_t n, struct err *e);
// Plain join with one '/' between.
int path_join(const char *a, const char *b, char *out, size_t n, struct err *e);

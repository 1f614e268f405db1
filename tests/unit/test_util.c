// Unit tests for src/util: errors, memory and arenas, buffers and strings,
// UTF-8, number parsing, logging, durations and times, sizes, environment
// configuration (OLLAMA_HOST, CORS, allowed hosts), digests and files.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "util/util.h"

// ---------------------------------------------------------------------------
// stderr capture (for log lines and warnings)

struct capture {
    int saved_fd;
    char path[64];
};

static void capture_start(struct capture *c)
{
    fflush(stderr);
    snprintf(c->path, sizeof(c->path), "/tmp/test_util_log_XXXXXX");
    int fd = mkstemp(c->path);
    assert_true(fd >= 0);
    c->saved_fd = dup(2);
    assert_true(c->saved_fd >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
}

// Returns the captured text (caller frees).
static char *capture_end(struct capture *c)
{
    fflush(stderr);
    assert_int_equal(dup2(c->saved_fd, 2), 2);
    close(c->saved_fd);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(c->path, 1 << 20, &b, NULL), 0);
    unlink(c->path);
    return buf_take(&b);
}

// ---------------------------------------------------------------------------
// Errors

static void test_err_first_wins(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(err_set(&e, ERR_NOT_FOUND, "model '%s' not found", "foo"), ERR_NOT_FOUND);
    assert_int_equal(err_set(&e, ERR_IO, "later error"), ERR_IO);  // returns code, keeps first
    assert_int_equal(e.code, ERR_NOT_FOUND);
    assert_string_equal(e.msg, "model 'foo' not found");
    err_prefix(&e, "pull %s", "foo");
    assert_string_equal(e.msg, "pull foo: model 'foo' not found");
    err_clear(&e);
    assert_int_equal(e.code, ERR_OK);
    assert_string_equal(e.msg, "");
    // prefix on an unset error does nothing
    err_prefix(&e, "ctx");
    assert_string_equal(e.msg, "");
    // NULL fmt → default message; NULL e is allowed everywhere
    assert_int_equal(err_set(&e, ERR_TOO_LARGE, NULL), ERR_TOO_LARGE);
    assert_string_equal(e.msg, "too large");
    assert_int_equal(err_set(NULL, ERR_IO, "x"), ERR_IO);
    err_prefix(NULL, "x");
    err_clear(NULL);
}

static void test_err_names(void **state)
{
    (void)state;
    assert_string_equal(err_str(ERR_NOT_FOUND), "not found");
    assert_string_equal(err_name(ERR_NOT_FOUND), "NOT_FOUND");
    assert_string_equal(err_name(ERR_NOT_IMPLEMENTED), "NOT_IMPLEMENTED");
    assert_string_equal(err_str(ERR_OK), "ok");
    assert_string_equal(err_str(12345), "unknown error");
    assert_string_equal(err_name(-1), "UNKNOWN");
    assert_true(ERR_INVALID < 0 && ERR_NOT_IMPLEMENTED < 0);
}

static void test_err_long_message_truncates(void **state)
{
    (void)state;
    struct err e = {0};
    char big[1000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    err_set(&e, ERR_INVALID, "%s", big);
    assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);
    err_prefix(&e, "%s", big);
    assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);
}

// ---------------------------------------------------------------------------
// Memory

static void test_mem_checked_arith(void **state)
{
    (void)state;
    size_t s = 7;
    assert_true(size_add(&s, 1, 2));
    assert_int_equal(s, 3);
    assert_false(size_add(&s, SIZE_MAX, 1));
    assert_int_equal(s, 3);  // untouched on overflow
    assert_true(size_mul(&s, 1000, 1000));
    assert_int_equal(s, 1000000);
    assert_false(size_mul(&s, SIZE_MAX / 2, 3));
    uint64_t u = 0;
    assert_true(u64_add(&u, UINT64_MAX - 1, 1));
    assert_false(u64_add(&u, UINT64_MAX, 1));
    assert_false(u64_mul(&u, UINT64_C(1) << 32, UINT64_C(1) << 32));
    assert_true(u64_mul(&u, UINT64_C(1) << 31, UINT64_C(1) << 32));
    int64_t i = 0;
    assert_true(i64_mul(&i, -4, 5));
    assert_int_equal(i, -20);
    assert_false(i64_mul(&i, INT64_MIN, -1));
    assert_false(i64_mul(&i, INT64_MAX / 2 + 1, 2));
}

static void test_mem_strings(void **state)
{
    (void)state;
    char *p = xasprintf("%s-%d", "abc", 42);
    assert_string_equal(p, "abc-42");
    free(p);
    p = xstrndup("hello world", 5);
    assert_string_equal(p, "hello");
    free(p);
    p = xstrdup("");
    assert_string_equal(p, "");
    free(p);
    p = xcalloc(0, 0);
    assert_non_null(p);
    free(p);
    p = xrealloc(NULL, 10);
    p = xrealloc(p, 0);
    free(p);
}

static void test_arena(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 0);
    void *prev = NULL;
    for (int i = 0; i < 1000; i++) {
        char *p = arena_alloc(&a, (size_t)(i % 37) + 1);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        assert_ptr_not_equal(p, prev);
        memset(p, 0xab, (size_t)(i % 37) + 1);
        prev = p;
    }
    // Big allocation gets its own chunk.
    char *big = arena_alloc(&a, 1 << 20);
    assert_non_null(big);
    memset(big, 1, 1 << 20);
    char *s = arena_strndup(&a, "hello world", 5);
    assert_string_equal(s, "hello");
    void *z1 = arena_alloc(&a, 0), *z2 = arena_alloc(&a, 0);
    assert_non_null(z1);
    assert_ptr_not_equal(z1, z2);
    assert_null(arena_alloc(&a, SIZE_MAX - 3));  // rounding overflow
    assert_null(arena_strndup(&a, "x", SIZE_MAX));
    arena_deinit(&a);
    assert_int_equal(a.used_bytes, 0);

    // Cap: allocations past it fail, the arena stays usable below it.
    arena_init(&a, 100);
    assert_non_null(arena_alloc(&a, 64));
    assert_null(arena_alloc(&a, 64));
    assert_non_null(arena_alloc(&a, 32));
    assert_null(arena_alloc(&a, 1));  // 96 used, 16 more would exceed 100
    arena_deinit(&a);
}

// ---------------------------------------------------------------------------
// Buffers and strings

static void test_buf_basic(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_string_equal(buf_cstr(&b), "");
    assert_int_equal(buf_append_str(&b, "hello"), 0);
    assert_int_equal(buf_append_char(&b, ' '), 0);
    assert_int_equal(buf_printf(&b, "%s %d", "world", 42), 0);
    assert_string_equal(buf_cstr(&b), "hello world 42");
    assert_int_equal(b.len, 14);
    assert_int_equal(buf_append(&b, "\0x", 2), 0);  // binary data kept
    assert_int_equal(b.len, 16);
    assert_int_equal(b.data[15], 'x');
    buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(buf_cstr(&b), "");
    // Grow well past the initial capacity.
    for (int i = 0; i < 10000; i++)
        assert_int_equal(buf_printf(&b, "%04d", i % 10000), 0);
    assert_int_equal(b.len, 40000);
    assert_memory_equal(b.data + 39996, "9999", 4);
    char *t = buf_take(&b);
    assert_int_equal(strlen(t), 40000);
    free(t);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    t = buf_take(&b);  // empty buffer gives an empty string
    assert_string_equal(t, "");
    free(t);
    buf_deinit(&b);
    buf_deinit(&b);  // twice is fine
}

static void test_buf_cap(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 10);
    assert_int_equal(buf_append_str(&b, "0123456789"), 0);  // exactly at the cap
    assert_int_equal(buf_append_char(&b, 'x'), ERR_TOO_LARGE);
    assert_int_equal(buf_printf(&b, "%d", 1), ERR_TOO_LARGE);
    assert_int_equal(buf_append(&b, "abc", 3), ERR_TOO_LARGE);
    assert_string_equal(buf_cstr(&b), "0123456789");  // unchanged
    assert_int_equal(buf_reserve(&b, SIZE_MAX), ERR_TOO_LARGE);
    buf_reset(&b);
    assert_int_equal(buf_printf(&b, "%s", "01234567890"), ERR_TOO_LARGE);
    assert_int_equal(b.len, 0);
    buf_deinit(&b);

    buf_init(&b, 0);
    assert_int_equal(buf_append_str(&b, "x"), 0);
    assert_int_equal(buf_reserve(&b, SIZE_MAX), ERR_TOO_LARGE);  // len + extra overflows
    assert_int_equal(buf_reserve(&b, SIZE_MAX / 2 + 10), ERR_TOO_LARGE);
    buf_deinit(&b);
}

static void test_str(void **state)
{
    (void)state;
    struct str s = str_trim(str_from("  \t hello world \n"));
    assert_true(str_eq_cstr(s, "hello world"));
    assert_true(str_starts_with(s, "hello"));
    assert_false(str_starts_with(s, "world"));
    assert_true(str_ends_with(s, "world"));
    assert_false(str_ends_with(STR_LIT("d"), "world"));
    assert_true(str_eq(STR_LIT(""), str_from(NULL)));
    assert_false(str_eq(STR_LIT("a"), STR_LIT("ab")));
    assert_int_equal(str_trim(STR_LIT("   ")).len, 0);
    char *d = str_dup(s);
    assert_string_equal(d, "hello world");
    free(d);
    d = str_dup((struct str){NULL, 0});
    assert_string_equal(d, "");
    free(d);
    assert_true(ascii_ieq("Content-Type", "content-TYPE"));
    assert_false(ascii_ieq("abc", "abcd"));
    assert_false(ascii_ieq("abcd", "abc"));
    assert_true(cstr_starts_with("sha256:abc", "sha256:"));
    assert_false(cstr_starts_with("sha", "sha256:"));
    assert_true(cstr_ends_with("model.gguf", ".gguf"));
    assert_false(cstr_ends_with("gguf", ".gguf"));
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(utf8_valid("", 0));
    assert_true(utf8_valid("hello", 5));
    assert_true(utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 16));
    assert_false(utf8_valid("\xc3", 1));              // truncated 2-byte
    assert_false(utf8_valid("\xe2\x82", 2));          // truncated 3-byte
    assert_false(utf8_valid("\xf0\x9f\x98", 3));      // truncated 4-byte
    assert_false(utf8_valid("\xc0\xaf", 2));          // overlong '/'
    assert_false(utf8_valid("\xe0\x80\xaf", 3));      // overlong
    assert_false(utf8_valid("\xf0\x80\x80\xaf", 4));  // overlong
    assert_false(utf8_valid("\xed\xa0\x80", 3));      // surrogate D800
    assert_false(utf8_valid("\xf4\x90\x80\x80", 4));  // > U+10FFFF
    assert_false(utf8_valid("\x80", 1));              // stray continuation
    assert_false(utf8_valid("\xff", 1));
    assert_false(utf8_valid("\xc3\x28", 2));  // bad continuation
    assert_true(utf8_valid("a\0b", 3));       // NUL is valid UTF-8

    // Encoding round-trips through the decoder at every length boundary.
    static const uint32_t cps[] = {0, 0x41, 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        char u[4];
        size_t n = utf8_encode(cps[i], u), w = 0;
        assert_int_equal(n, cps[i] < 0x80 ? 1 : cps[i] < 0x800 ? 2 : cps[i] < 0x10000 ? 3 : 4);
        assert_true(utf8_decode((const unsigned char *)u, n, &w) == cps[i]);
        assert_int_equal(w, n);
    }
    struct buf ub;
    buf_init(&ub, 0);
    assert_int_equal(buf_append_utf8(&ub, 0x20AC), 0);
    assert_int_equal(buf_append_utf8(&ub, 0x1F600), 0);
    assert_memory_equal(ub.data, "\xe2\x82\xac\xf0\x9f\x98\x80", 7);
    buf_deinit(&ub);

    const char *s = "ab\xe2\x82\xac";  // "ab€"
    assert_int_equal(utf8_complete_prefix(s, 5), 5);
    assert_int_equal(utf8_complete_prefix(s, 4), 2);
    assert_int_equal(utf8_complete_prefix(s, 3), 2);
    assert_int_equal(utf8_complete_prefix(s, 2), 2);
    assert_int_equal(utf8_complete_prefix(s, 0), 0);
    const char *emoji = "\xf0\x9f\x98\x80";
    assert_int_equal(utf8_complete_prefix(emoji, 4), 4);
    assert_int_equal(utf8_complete_prefix(emoji, 3), 0);
    assert_int_equal(utf8_complete_prefix(emoji, 1), 0);
}

// The Unicode layer over utf8proc, and Go's %v of a float64 and %q.
static void test_utf8_properties_and_go_formats(void **state)
{
    (void)state;
    assert_int_equal(utf8_category('A'), UTF8_CAT_LU);
    assert_int_equal(utf8_category(0x00E9), UTF8_CAT_LL);  // é
    assert_int_equal(utf8_category('7'), UTF8_CAT_ND);
    assert_int_equal(utf8_category(0x00A0), UTF8_CAT_ZS);  // no-break space
    assert_int_equal(utf8_category(0x200B), UTF8_CAT_CF);  // zero-width space
    assert_true(utf8_is_letter_or_digit(0x4E2D) && !utf8_is_letter_or_digit('-'));
    assert_true(utf8_is_cased(0x01C5) && !utf8_is_cased(0x4E2D));  // Dž; 中
    assert_int_equal(utf8_toupper(0x00E9), 0x00C9);
    assert_int_equal(utf8_tolower('Q'), 'q');
    assert_int_equal(utf8_totitle(0x01C6), 0x01C5);
    assert_int_equal(utf8_width(0x4E2D), 2);
    assert_int_equal(utf8_width(0x0301), 0);  // combining acute
    assert_int_equal(utf8_nfd_first(0x00E9), 'e');
    assert_int_equal(utf8_nfd_first('x'), 'x');
    // strconv.IsPrint: the ASCII space only among spaces; no format characters.
    assert_true(utf8_is_go_print(' ') && utf8_is_go_print(0x00E9));
    assert_false(utf8_is_go_print(0x00A0) || utf8_is_go_print(0x200B) || utf8_is_go_print('\t'));

    static const struct {
        double v;
        const char *want;
    } floats[] = {{0.7, "0.7"},
                  {4096, "4096"},
                  {1e-05, "1e-05"},
                  {0.0001, "0.0001"},
                  {1e6, "1e+06"},
                  {123456.5, "123456.5"},
                  {1048576, "1.048576e+06"},
                  {-2.5e-7, "-2.5e-07"},
                  {0.1 + 0.2, "0.30000000000000004"}};
    struct buf b;
    buf_init(&b, 0);
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        buf_reset(&b);
        assert_int_equal(buf_append_go_float(&b, floats[i].v), 0);
        assert_string_equal(buf_cstr(&b), floats[i].want);
    }
    buf_reset(&b);
    buf_append_go_float(&b, -0.0);
    buf_append_go_float(&b, NAN);
    assert_string_equal(buf_cstr(&b), "-0NaN");
    buf_reset(&b);
    buf_append_go_quoted(&b, "a\"\xc2\xa0\xe2\x82\xac", 7);  // a" NBSP €
    assert_string_equal(buf_cstr(&b), "\"a\\\"\\u00a0\xe2\x82\xac\"");
    buf_deinit(&b);
}

static void test_str_to_numbers(void **state)
{
    (void)state;
    int64_t i = 99;
    struct err e = {0};
    assert_int_equal(str_to_i64("-42", INT64_MIN, INT64_MAX, &i, &e), 0);
    assert_int_equal(i, -42);
    assert_int_equal(str_to_i64("9223372036854775807", INT64_MIN, INT64_MAX, &i, NULL), 0);
    assert_true(i == INT64_MAX);
    assert_int_equal(str_to_i64("9223372036854775808", INT64_MIN, INT64_MAX, &i, &e), ERR_RANGE);
    assert_true(i == INT64_MAX);  // untouched
    assert_int_equal(str_to_i64("11", 0, 10, &i, NULL), ERR_RANGE);
    assert_int_equal(str_to_i64("", 0, 10, &i, NULL), ERR_INVALID);
    assert_int_equal(str_to_i64(NULL, 0, 10, &i, NULL), ERR_INVALID);
    assert_int_equal(str_to_i64(" 1", 0, 10, &i, NULL), ERR_INVALID);
    assert_int_equal(str_to_i64("1 ", 0, 10, &i, NULL), ERR_INVALID);
    assert_int_equal(str_to_i64("0x10", 0, 100, &i, NULL), ERR_INVALID);
    assert_int_equal(str_to_i64("1.5", 0, 100, &i, NULL), ERR_INVALID);
    err_clear(&e);
    str_to_i64("abc", 0, 1, &i, &e);
    assert_string_equal(e.msg, "invalid integer \"abc\"");

    // Go's strconv.ParseInt(s, 10, 64): sign, digits, int64 range; no space.
    i = 7;
    assert_true(str_go_parse_int("+12", &i));
    assert_int_equal(i, 12);
    assert_true(str_go_parse_int("-9223372036854775808", &i));
    assert_true(i == INT64_MIN);
    i = 7;
    assert_false(str_go_parse_int("9223372036854775808", &i));
    assert_false(str_go_parse_int("", &i));
    assert_false(str_go_parse_int("-", &i));
    assert_false(str_go_parse_int(" 1", &i));
    assert_false(str_go_parse_int("1_000", &i));
    assert_false(str_go_parse_int("1.0", &i));
    assert_int_equal(i, 7);  // untouched

    uint64_t u = 0;
    assert_int_equal(str_to_u64("18446744073709551615", UINT64_MAX, &u, NULL), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(str_to_u64("18446744073709551616", UINT64_MAX, &u, NULL), ERR_RANGE);
    assert_int_equal(str_to_u64("-1", UINT64_MAX, &u, NULL), ERR_INVALID);
    assert_int_equal(str_to_u64("+1", UINT64_MAX, &u, NULL), ERR_INVALID);
    assert_int_equal(str_to_u64("65536", 65535, &u, NULL), ERR_RANGE);
    assert_int_equal(str_to_u64("12a", 100, &u, NULL), ERR_INVALID);

    double d = 0;
    assert_int_equal(str_to_double("0.5", &d, NULL), 0);
    assert_true(d == 0.5);
    assert_int_equal(str_to_double("-1e3", &d, NULL), 0);
    assert_true(d == -1000.0);
    assert_int_equal(str_to_double("1e-400", &d, NULL), 0);  // underflow is not an error
    assert_int_equal(str_to_double("1e400", &d, NULL), ERR_RANGE);
    assert_int_equal(str_to_double("1.5x", &d, NULL), ERR_INVALID);
    assert_int_equal(str_to_double("", &d, NULL), ERR_INVALID);
    assert_int_equal(str_to_double(" 1", &d, NULL), ERR_INVALID);
}

// ---------------------------------------------------------------------------
// Logging

static void test_log_line_shape(void **state)
{
    (void)state;
    int saved = log_get_level();
    log_set_level(LOG_INFO);
    assert_true(log_enabled(LOG_WARN));
    assert_false(log_enabled(LOG_DEBUG));

    struct capture c;
    capture_start(&c);
    log_info("listening on %s", "127.0.0.1:11434");
    log_debug("hidden %d", 1);
    log_kv(LOG_WARN, "key=OLLAMA_X value=1", "simple");
    log_error("quote \" back\\slash\nnewline");
    char *out = capture_end(&c);

    char *line1 = out, *line2 = strchr(line1, '\n');
    assert_non_null(line2);
    *line2++ = '\0';
    char *line3 = strchr(line2, '\n');
    assert_non_null(line3);
    *line3++ = '\0';
    char *end = strchr(line3, '\n');
    assert_non_null(end);
    *end = '\0';
    assert_string_equal(end + 1, "");  // exactly three lines: debug filtered out

    // time=YYYY-MM-DDTHH:MM:SS.mmm(Z|±hh:mm) level=INFO source=test_util.c:N msg="..."
    assert_true(cstr_starts_with(line1, "time="));
    const char *t = line1 + 5;
    assert_true(t[4] == '-' && t[7] == '-' && t[10] == 'T' && t[13] == ':' && t[16] == ':' &&
                t[19] == '.');
    const char *sp = strchr(t, ' ');
    assert_non_null(sp);
    assert_true(sp[-1] == 'Z' || sp[-3] == ':');
    assert_non_null(strstr(line1, " level=INFO source=test_util.c:"));
    assert_true(cstr_ends_with(line1, " msg=\"listening on 127.0.0.1:11434\""));
    assert_non_null(strstr(line2, " level=WARN "));
    assert_true(cstr_ends_with(line2, " msg=simple key=OLLAMA_X value=1"));
    assert_non_null(strstr(line3, " level=ERROR "));
    assert_true(cstr_ends_with(line3, " msg=\"quote \\\" back\\\\slash\\nnewline\""));
    free(out);

    // kv tails quoted like slog.
    struct buf kv;
    buf_init(&kv, 0);
    assert_int_equal(log_kv_append(&kv, "model", "llama3"), 0);
    assert_int_equal(log_kv_append(&kv, "path", "/a b/c"), 0);
    assert_int_equal(log_kv_append(&kv, "empty", ""), 0);
    assert_int_equal(log_kv_append(&kv, "null", NULL), 0);
    assert_int_equal(log_kv_append(&kv, "eq", "a=b"), 0);
    assert_int_equal(log_kv_append(&kv, "utf8", "h\xc3\xa9"), 0);
    assert_int_equal(log_kv_append(&kv, "bad", "a\xff\xc3"), 0);
    assert_int_equal(log_kv_append(&kv, "ctl", "a\tb\x01"), 0);
    assert_string_equal(buf_cstr(&kv), " model=llama3 path=\"/a b/c\" empty=\"\" null=\"\" "
                                       "eq=\"a=b\" utf8=h\xc3\xa9 bad=\"a\\xff\\xc3\" "
                                       "ctl=\"a\\tb\\x01\"");
    buf_deinit(&kv);
    buf_init(&kv, 4);
    assert_int_equal(log_kv_append(&kv, "model", "x"), ERR_TOO_LARGE);
    buf_deinit(&kv);

    log_set_level(LOG_TRACE);
    assert_int_equal(log_get_level(), LOG_TRACE);
    capture_start(&c);
    log_trace("t");
    log_debug("d");
    out = capture_end(&c);
    assert_non_null(strstr(out, "level=TRACE"));
    assert_non_null(strstr(out, "level=DEBUG"));
    free(out);
    log_set_level(saved);
}

// ---------------------------------------------------------------------------
// Durations

#define NS   1LL
#define US   1000LL
#define MS   1000000LL
#define SEC  1000000000LL
#define MIN  (60 * SEC)
#define HOUR (60 * MIN)

static void test_duration_parse_ok(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t ns;
    } cases[] = {
        {"0", 0},
        {"-0", 0},
        {"+0", 0},
        {"5s", 5 * SEC},
        {"30s", 30 * SEC},
        {"1478s", 1478 * SEC},
        {"-5s", -5 * SEC},
        {"+5s", 5 * SEC},
        {"-0s", 0},
        {"5.0s", 5 * SEC},
        {"5.6s", 5 * SEC + 600 * MS},
        {"5.s", 5 * SEC},
        {".5s", 500 * MS},
        {"1.004s", 1 * SEC + 4 * MS},
        {"100.00100s", 100 * SEC + 1 * MS},
        {"10ns", 10 * NS},
        {"11us", 11 * US},
        {"12\xc2\xb5s", 12 * US},
        {"12\xce\xbcs", 12 * US},
        {"13ms", 13 * MS},
        {"15m", 15 * MIN},
        {"16h", 16 * HOUR},
        {"5m", 5 * MIN},
        {"1h30m", 90 * MIN},
        {"3h30m", 3 * HOUR + 30 * MIN},
        {"10.5s4m", 4 * MIN + 10 * SEC + 500 * MS},
        {"-2m3.4s", -(2 * MIN + 3 * SEC + 400 * MS)},
        {"1h2m3s4ms5us6ns", 1 * HOUR + 2 * MIN + 3 * SEC + 4 * MS + 5 * US + 6 * NS},
        {"39h9m14.425s", 39 * HOUR + 9 * MIN + 14 * SEC + 425 * MS},
        {"1.5h", 90 * MIN},
        {"300ms", 300 * MS},
        {"-1s", -SEC},
        {"0.3333333333333333333h", 20 * MIN},
        {"9007199254740993ns", (1LL << 53) + 1},
        {"9223372036854775807ns", INT64_MAX},
        {"9223372036854775.807us", INT64_MAX},
        {"9223372036s854ms775us807ns", INT64_MAX},
        {"-9223372036854775808ns", INT64_MIN},
        {"-9223372036854775.808us", INT64_MIN},
        {"0.100000000000000000000h", 6 * MIN},
        {"0.830103483285477580700h", 49 * MIN + 48 * SEC + 372539827 * NS},
        // bare integers are seconds
        {"300", 300 * SEC},
        {"-1", -SEC},
        {"+7", 7 * SEC},
        {"3", 3 * SEC},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ns = 12345;
        struct err e = {0};
        int rc = duration_parse(cases[i].s, &ns, &e);
        if (rc != 0 || ns != cases[i].ns)
            fail_msg("duration_parse(\"%s\") = %d (%s), %lld; want %lld", cases[i].s, rc, e.msg,
                     (long long)ns, (long long)cases[i].ns);
    }
}

static void test_duration_parse_bad(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
    } cases[] = {
        {"", ERR_INVALID},
        {"-", ERR_INVALID},
        {"+", ERR_INVALID},
        {"s", ERR_INVALID},
        {".", ERR_INVALID},
        {"-.", ERR_INVALID},
        {".s", ERR_INVALID},
        {"+.s", ERR_INVALID},
        {"1d", ERR_INVALID},
        {"5m3", ERR_INVALID},
        {"1.5", ERR_INVALID},
        {"\x85\x85", ERR_INVALID},
        {"\xff"
         "ff",
         ERR_INVALID},
        {"hello \xff"
         "ff world",
         ERR_INVALID},
        {"5 m", ERR_INVALID},
        {" 5m", ERR_INVALID},
        {"5mm", ERR_INVALID},
        {"1e3s", ERR_INVALID},
        {"9223372036854775808ns", ERR_RANGE},
        {"9223372036854775.808us", ERR_RANGE},
        {"-9223372036854775809ns", ERR_RANGE},
        {"9223372036854775807h", ERR_RANGE},
        {"3000000h", ERR_RANGE},
        {"99999999999999999999999s", ERR_RANGE},
        {"9223372036854775808", ERR_RANGE},  // bare integer seconds overflow
        {"9223372036854775807", ERR_RANGE},  // fits int64 but not as nanoseconds
        {"-9300000000", ERR_RANGE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ns = 777;
        struct err e = {0};
        int rc = duration_parse(cases[i].s, &ns, &e);
        if (rc != cases[i].rc || ns != 777 || e.code != rc || !e.msg[0])
            fail_msg("duration_parse(\"%s\") = %d (%s), want %d", cases[i].s, rc, e.msg,
                     cases[i].rc);
    }
    int64_t ns;
    assert_int_equal(duration_parse(NULL, &ns, NULL), ERR_INVALID);
    struct err e = {0};
    duration_parse("1d", &ns, &e);
    assert_string_equal(e.msg, "time: unknown unit \"d\" in duration \"1d\"");
    err_clear(&e);
    duration_parse("5m3", &ns, &e);
    assert_string_equal(e.msg, "time: missing unit in duration \"5m3\"");
}

static void test_duration_format(void **state)
{
    (void)state;
    static const struct {
        int64_t ns;
        const char *s;
    } cases[] = {
        {0, "0s"},
        {1, "1ns"},
        {999, "999ns"},
        {1100, "1.1\xc2\xb5s"},
        {2200 * US, "2.2ms"},
        {300 * MS, "300ms"},
        {3300 * MS, "3.3s"},
        {4 * MIN + 5 * SEC, "4m5s"},
        {4 * MIN + 5001 * MS, "4m5.001s"},
        {5 * HOUR + 6 * MIN + 7001 * MS, "5h6m7.001s"},
        {8 * MIN + 1, "8m0.000000001s"},
        {5 * MIN, "5m0s"},
        {HOUR, "1h0m0s"},
        {90 * MIN, "1h30m0s"},
        {-SEC, "-1s"},
        {-1, "-1ns"},
        {INT64_MAX, "2562047h47m16.854775807s"},
        {INT64_MIN, "-2562047h47m16.854775808s"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[64];
        duration_format(cases[i].ns, out, sizeof(out));
        assert_string_equal(out, cases[i].s);
        // Round trip.
        int64_t back;
        assert_int_equal(duration_parse(out, &back, NULL), 0);
        assert_true(back == cases[i].ns);
    }
    char small[4];
    duration_format(5 * MIN, small, sizeof(small));
    assert_string_equal(small, "5m0");   // truncated, still terminated
    duration_format(5 * MIN, small, 0);  // no-op
}

// ---------------------------------------------------------------------------
// Times

static void test_clocks(void **state)
{
    (void)state;
    int64_t now = time_now_ns();
    assert_true(now > 1700000000LL * SEC);  // after Nov 2023
    int64_t m1 = time_monotonic_ns(), m2 = time_monotonic_ns();
    assert_true(m2 >= m1);
    assert_true(m1 > 0);
}

static void test_time_relative(void **state)
{
    (void)state;
    const int64_t now = 1700000000LL * SEC;
    const int64_t DAY = 24 * HOUR;
    static const struct {
        int64_t delta;  // now - t
        const char *s;
    } cases[] = {
        {0, "Less than a second ago"},
        {800 * MS, "Less than a second ago"},
        {SEC, "1 second ago"},
        {30 * SEC, "30 seconds ago"},
        {59 * SEC + 999 * MS, "59 seconds ago"},
        {60 * SEC, "About a minute ago"},
        {119 * SEC, "About a minute ago"},
        {4 * MIN, "4 minutes ago"},
        {59 * MIN + 59 * SEC, "59 minutes ago"},
        {60 * MIN, "About an hour ago"},
        {89 * MIN, "About an hour ago"},
        {90 * MIN, "2 hours ago"},
        {2 * HOUR, "2 hours ago"},
        {47 * HOUR, "47 hours ago"},
        {48 * HOUR, "2 days ago"},
        {13 * DAY, "13 days ago"},
        {14 * DAY, "2 weeks ago"},
        {59 * DAY, "8 weeks ago"},
        {60 * DAY, "2 months ago"},
        {729 * DAY, "24 months ago"},
        {730 * DAY, "2 years ago"},
        {-800 * MS, "Less than a second from now"},
        {-4 * MIN, "4 minutes from now"},
        {-4 * MIN - 30 * SEC, "4 minutes from now"},
        {-48 * HOUR, "2 days from now"},
        {-20 * 365 * DAY, "20 years from now"},
        {-21 * 365 * DAY, "Forever"},
        {-200 * 365 * DAY, "Forever"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        time_format_relative(now - cases[i].delta, now, out, sizeof(out));
        if (strcmp(out, cases[i].s) != 0)
            fail_msg("delta %lld: got \"%s\", want \"%s\"", (long long)cases[i].delta, out,
                     cases[i].s);
    }
    time_format_relative(TIME_ZERO, now, out, sizeof(out));
    assert_string_equal(out, "Never");
    time_format_relative(INT64_MAX, now, out, sizeof(out));
    assert_string_equal(out, "Forever");
    time_format_relative(INT64_MIN + 1, INT64_MAX, out, sizeof(out));  // saturates
    assert_string_equal(out, "292 years ago");
}

static void set_tz(const char *tz)
{
    if (tz)
        setenv("TZ", tz, 1);
    else
        unsetenv("TZ");
    tzset();
}

static void test_time_rfc3339_format(void **state)
{
    (void)state;
    char *old = getenv("TZ") ? xstrdup(getenv("TZ")) : NULL;
    char out[64];
    set_tz("UTC0");
    time_format_rfc3339(0, out, sizeof(out));
    assert_string_equal(out, "1970-01-01T00:00:00Z");
    time_format_rfc3339(1714564800LL * SEC + 123456789, out, sizeof(out));
    assert_string_equal(out, "2024-05-01T12:00:00.123456789Z");
    time_format_rfc3339(1714564800LL * SEC + 120000000, out, sizeof(out));
    assert_string_equal(out, "2024-05-01T12:00:00.12Z");
    time_format_rfc3339(-1, out, sizeof(out));
    assert_string_equal(out, "1969-12-31T23:59:59.999999999Z");
    time_format_rfc3339(951782400LL * SEC, out, sizeof(out));  // leap day 2000
    assert_string_equal(out, "2000-02-29T00:00:00Z");
    time_format_rfc3339(TIME_ZERO, out, sizeof(out));
    assert_string_equal(out, "0001-01-01T00:00:00Z");
    time_format_rfc3339(INT64_MAX, out, sizeof(out));
    assert_string_equal(out, "2262-04-11T23:47:16.854775807Z");

    set_tz("XXX+7");  // UTC-7, no DST
    time_format_rfc3339(1714564800LL * SEC + 123456789, out, sizeof(out));
    assert_string_equal(out, "2024-05-01T05:00:00.123456789-07:00");
    time_format_rfc3339_utc(1714564800LL * SEC + 123456789, out, sizeof(out));
    assert_string_equal(out, "2024-05-01T12:00:00.123456789Z");
    time_format_rfc3339_utc(1721681271147561000LL, out, sizeof(out));
    assert_string_equal(out, "2024-07-22T20:47:51.147561Z");  // api.md's created_at example
    time_format_rfc3339_utc(TIME_ZERO, out, sizeof(out));
    assert_string_equal(out, "0001-01-01T00:00:00Z");
    set_tz("IST-5:30");
    time_format_rfc3339(1714564800LL * SEC, out, sizeof(out));
    assert_string_equal(out, "2024-05-01T17:30:00+05:30");
    set_tz(old);
    free(old);
}

static void test_time_rfc3339_parse(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t ns;
    } ok[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2024-05-01T12:00:00Z", 1714564800LL * SEC},
        {"2024-05-01T12:00:00.123456789Z", 1714564800LL * SEC + 123456789},
        {"2024-05-01T05:00:00.123456789-07:00", 1714564800LL * SEC + 123456789},
        {"2024-05-01T17:30:00+05:30", 1714564800LL * SEC},
        {"2024-05-01T12:00:00.5Z", 1714564800LL * SEC + 500 * MS},
        {"2024-05-01T12:00:00.1234567891Z", 1714564800LL * SEC + 123456789},
        {"1969-12-31T23:59:59.999999999Z", -1},
        {"2000-02-29T00:00:00Z", 951782400LL * SEC},
        {"0001-01-01T00:00:00Z", TIME_ZERO},
        {"2318-01-01T00:00:00Z", INT64_MAX},
        {"1500-01-01T00:00:00Z", INT64_MIN + 1},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t ns = 0;
        struct err e = {0};
        int rc = time_parse_rfc3339(ok[i].s, &ns, &e);
        if (rc != 0 || ns != ok[i].ns)
            fail_msg("parse \"%s\" = %d (%s) %lld, want %lld", ok[i].s, rc, e.msg, (long long)ns,
                     (long long)ok[i].ns);
    }
    static const struct {
        const char *s;
        int rc;
    } bad[] = {
        {"", ERR_INVALID},
        {"2024-05-01", ERR_INVALID},
        {"2024-05-01T12:00:00", ERR_INVALID},
        {"2024-05-01t12:00:00Z", ERR_INVALID},
        {"2024-05-01 12:00:00Z", ERR_INVALID},
        {"2024-05-01T12:00:00.Z", ERR_INVALID},
        {"2024-05-01T12:00:00Zjunk", ERR_INVALID},
        {"2024-05-01T12:00:00+0700", ERR_INVALID},
        {"2024-5-01T12:00:00Z", ERR_INVALID},
        {"2024-05-01T12:00:0xZ", ERR_INVALID},
        {"2024-13-01T12:00:00Z", ERR_RANGE},
        {"2023-02-29T12:00:00Z", ERR_RANGE},
        {"2024-02-30T12:00:00Z", ERR_RANGE},
        {"2024-04-31T12:00:00Z", ERR_RANGE},
        {"2024-00-10T12:00:00Z", ERR_RANGE},
        {"2024-05-00T12:00:00Z", ERR_RANGE},
        {"2024-05-01T24:00:00Z", ERR_RANGE},
        {"2024-05-01T12:60:00Z", ERR_RANGE},
        {"2024-05-01T12:00:60Z", ERR_RANGE},
        {"2024-05-01T12:00:00+24:00", ERR_RANGE},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ns = 42;
        int rc = time_parse_rfc3339(bad[i].s, &ns, NULL);
        if (rc != bad[i].rc || ns != 42)
            fail_msg("parse \"%s\" = %d, want %d", bad[i].s, rc, bad[i].rc);
    }
    int64_t ns;
    assert_int_equal(time_parse_rfc3339(NULL, &ns, NULL), ERR_INVALID);
    // Round trip in a zone with an offset.
    char *old = getenv("TZ") ? xstrdup(getenv("TZ")) : NULL;
    set_tz("XXX+7");
    char out[64];
    int64_t t = 1714564800LL * SEC + 987654321;
    time_format_rfc3339(t, out, sizeof(out));
    assert_int_equal(time_parse_rfc3339(out, &ns, NULL), 0);
    assert_true(ns == t);
    set_tz(old);
    free(old);
}

static void test_size_format(void **state)
{
    (void)state;
    static const struct {
        uint64_t b;
        const char *s;
    } cases[] = {
        {0, "0 B"},
        {1, "1 B"},
        {358, "358 B"},
        {999, "999 B"},
        {1000, "1 KB"},
        {1500, "1.5 KB"},
        {1234, "1.2 KB"},
        {8400, "8.4 KB"},
        {999999, "999 KB"},
        {1000000, "1 MB"},
        {1500000, "1.5 MB"},
        {1234567, "1.2 MB"},
        {999999999, "999 MB"},
        {1000000000, "1 GB"},
        {1234567890, "1.2 GB"},
        {1600000000, "1.6 GB"},
        {4661224676ULL, "4.7 GB"},
        {19000000000ULL, "19 GB"},
        {999999999999ULL, "999 GB"},
        {1000000000000ULL, "1 TB"},
        {1500000000000ULL, "1.5 TB"},
        {1999999999999ULL, "2.0 TB"},
        {9960, "10.0 KB"},
        {123456789012345ULL, "123 TB"},
    };
    char out[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_format_human(cases[i].b, out, sizeof(out));
        assert_string_equal(out, cases[i].s);
    }
}

// ---------------------------------------------------------------------------
// Environment

static const char *const env_vars[] = {
    "OLLAMA_HOST",
    "OLLAMA_MODELS",
    "OLLAMA_KEEP_ALIVE",
    "OLLAMA_CONTEXT_LENGTH",
    "OLLAMA_NUM_PARALLEL",
    "OLLAMA_MAX_LOADED_MODELS",
    "OLLAMA_MAX_QUEUE",
    "OLLAMA_ORIGINS",
    "OLLAMA_DEBUG",
    "OLLAMA_NOPRUNE",
    "OLLAMA_FLASH_ATTENTION",
    "OLLAMA_KV_CACHE_TYPE",
    "OLLAMA_LOAD_TIMEOUT",
    "OLLAMA_GPU_OVERHEAD",
    "OLLAMA_SCHED_SPREAD",
    "OLLAMA_NOHISTORY",
    "OLLAMA_AUTH",
    "OLLAMA_NO_CLOUD",
    "OLLAMA_REGISTRY_MIRROR",
    "OLLAMA_PULL_MIRROR",
    "OLLAMA_DRAIN_TIMEOUT",
    "OLLAMA_MAX_TRANSFER_STREAMS",
    "OLLAMA_GO_TEMPLATE",
    "OLLAMA_DEBUG_LOG_REQUESTS",
    "OLLAMA_LLM_LIBRARY",
    "OLLAMA_EDITOR",
};

static void env_clear_all(void)
{
    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
        unsetenv(env_vars[i]);
}

static void test_env_clean(void **state)
{
    (void)state;
    char tmp[64];
    assert_null(env_clean(NULL, tmp, sizeof(tmp)));
    assert_null(env_clean("", tmp, sizeof(tmp)));
    assert_null(env_clean("   ", tmp, sizeof(tmp)));
    assert_null(env_clean(" \"\" ", tmp, sizeof(tmp)));
    assert_string_equal(env_clean("  5m \n", tmp, sizeof(tmp)), "5m");
    assert_string_equal(env_clean("\"5m\"", tmp, sizeof(tmp)), "5m");
    assert_string_equal(env_clean(" '0.0.0.0:8080' ", tmp, sizeof(tmp)), "0.0.0.0:8080");
    assert_string_equal(env_clean("\"'x'\"", tmp, sizeof(tmp)), "x");
    assert_string_equal(env_clean("a\"b", tmp, sizeof(tmp)), "a\"b");  // inner quotes kept
    assert_null(env_clean("0123456789", tmp, 10));                     // does not fit
    assert_string_equal(env_clean("012345678", tmp, 10), "012345678");
}

static void test_env_bool_and_debug(void **state)
{
    (void)state;
    const char *yes[] = {"1", "t", "T", "TRUE", "true", "True", "yes", "on", "2", "anything"};
    const char *no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(env_parse_bool(yes[i], false));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(env_parse_bool(no[i], true));
    assert_true(env_parse_bool(NULL, true));
    assert_false(env_parse_bool("", false));

    assert_int_equal(env_parse_debug_level(NULL), LOG_INFO);
    assert_int_equal(env_parse_debug_level("0"), LOG_INFO);
    assert_int_equal(env_parse_debug_level("false"), LOG_INFO);
    assert_int_equal(env_parse_debug_level("1"), LOG_DEBUG);
    assert_int_equal(env_parse_debug_level("true"), LOG_DEBUG);
    assert_int_equal(env_parse_debug_level("2"), LOG_TRACE);
    assert_int_equal(env_parse_debug_level("3"), -12);
    assert_int_equal(env_parse_debug_level("-1"), LOG_WARN);
    assert_int_equal(env_parse_debug_level("yes"), LOG_INFO);
    assert_int_equal(env_parse_debug_level("99999999999999999999"), LOG_INFO);
}

static void test_host_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *url;
    } cases[] = {
        {NULL, "http://127.0.0.1:11434"},
        {"", "http://127.0.0.1:11434"},
        {"1.2.3.4", "http://1.2.3.4:11434"},
        {":1234", "http://:1234"},
        {"0.0.0.0", "http://0.0.0.0:11434"},
        {"0.0.0.0:8080", "http://0.0.0.0:8080"},
        {"example.com:1234", "http://example.com:1234"},
        {"example.com", "http://example.com:11434"},
        {"[::1]", "http://[::1]:11434"},
        {"::1", "http://[::1]:11434"},
        {"[::1]:8080", "http://[::1]:8080"},
        {":66000", "http://:11434"},
        {":-1", "http://:11434"},
        {"example.com:", "http://example.com:11434"},
        {"http://1.2.3.4", "http://1.2.3.4:80"},
        {"https://1.2.3.4", "https://1.2.3.4:443"},
        {"http://1.2.3.4:4321", "http://1.2.3.4:4321"},
        {"https://example.com/ollama", "https://example.com:443/ollama"},
        {"https://example.com/", "https://example.com:443"},
        {"http://[fe80::1]:99/a/b", "http://[fe80::1]:99/a/b"},
        {"ollama.com", "https://ollama.com:443"},
        {"  \"1.2.3.4:5678\"  ", "http://1.2.3.4:5678"},
        {"'localhost'", "http://localhost:11434"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct host_addr h;
        struct err e = {0};
        struct capture c;
        capture_start(&c);  // bad ports warn
        int rc = host_parse(cases[i].in, &h, &e);
        free(capture_end(&c));
        assert_int_equal(rc, 0);
        char url[600];
        host_format_url(&h, url, sizeof(url));
        if (strcmp(url, cases[i].url) != 0)
            fail_msg("host_parse(\"%s\") → \"%s\", want \"%s\"", cases[i].in ? cases[i].in : "NULL",
                     url, cases[i].url);
    }
    struct host_addr h;
    assert_int_equal(host_parse("http://[::1]:8080/x", &h, NULL), 0);
    assert_string_equal(h.scheme, "http");
    assert_string_equal(h.host, "::1");
    assert_int_equal(h.port, 8080);
    assert_string_equal(h.path, "/x");

    // A bad port logs a warning.
    struct capture c;
    capture_start(&c);
    assert_int_equal(host_parse(":66000", &h, NULL), 0);
    char *out = capture_end(&c);
    assert_non_null(strstr(out, "invalid port, using default"));
    assert_int_equal(h.port, 11434);
    free(out);

    // Too long a host is an error.
    char big[400];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    struct err e = {0};
    assert_int_equal(host_parse(big, &h, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "too long"));

    // The URL a client connects to.
    char url[300];
    static const struct {
        const char *in, *url;
    } conn[] = {
        {"0.0.0.0", "http://127.0.0.1:11434"},
        {":8080", "http://127.0.0.1:8080"},
        {"[::]:9", "http://[::1]:9"},
        {"10.0.0.1:5", "http://10.0.0.1:5"},
    };
    for (size_t i = 0; i < sizeof(conn) / sizeof(conn[0]); i++) {
        assert_int_equal(host_parse(conn[i].in, &h, NULL), 0);
        host_format_connect_url(&h, url, sizeof(url));
        assert_string_equal(url, conn[i].url);
    }
}

static void test_env_config_defaults(void **state)
{
    (void)state;
    env_clear_all();
    struct env_config c;
    env_config_load(&c);
    char url[600];
    host_format_url(&c.host, url, sizeof(url));
    assert_string_equal(url, "http://127.0.0.1:11434");
    char want[4200];
    snprintf(want, sizeof(want), "%s/.ollama/models", env_home_dir());
    assert_string_equal(c.models_dir, want);
    assert_true(c.keep_alive_ns == 5 * MIN);
    assert_true(c.load_timeout_ns == 5 * MIN);
    assert_int_equal(c.context_length, 0);
    assert_int_equal(c.num_parallel, 1);
    assert_int_equal(c.max_loaded_models, 0);
    assert_int_equal(c.max_queue, 512);
    assert_int_equal(c.max_transfer_streams, 4);
    assert_int_equal(c.gpu_overhead, 0);
    assert_int_equal(c.debug_level, LOG_INFO);
    assert_false(c.noprune);
    assert_false(c.sched_spread);
    assert_false(c.nohistory);
    assert_false(c.auth);
    assert_false(c.no_cloud);
    assert_int_equal(c.flash_attention, -1);
    assert_string_equal(c.kv_cache_type, "f16");
    assert_null(c.registry_mirror);
    assert_true(c.go_template);
    assert_false(c.debug_log_requests);
    assert_null(c.llm_library);
    assert_null(c.editor);
    // Default origins, in order.
    static const char *const want_origins[] = {
        "http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
        "http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
        "http://0.0.0.0",   "https://0.0.0.0",   "http://0.0.0.0:*",   "https://0.0.0.0:*",
        "app://*",          "file://*",          "tauri://*",          "vscode-webview://*",
        "vscode-file://*",
    };
    size_t n = 0;
    while (c.origins[n])
        n++;
    assert_int_equal(n, sizeof(want_origins) / sizeof(want_origins[0]));
    for (size_t i = 0; i < n; i++)
        assert_string_equal(c.origins[i], want_origins[i]);

    // The start-up "server config" line.
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(env_config_describe(&c, &b), 0);
    snprintf(want, sizeof(want),
             "map[OLLAMA_CONTEXT_LENGTH:0 OLLAMA_DEBUG:INFO OLLAMA_DEBUG_LOG_REQUESTS:false "
             "OLLAMA_DRAIN_TIMEOUT:5s OLLAMA_EDITOR: OLLAMA_FLASH_ATTENTION:false "
             "OLLAMA_GO_TEMPLATE:true "
             "OLLAMA_GPU_OVERHEAD:0 OLLAMA_HOST:http://127.0.0.1:11434 OLLAMA_KEEP_ALIVE:5m0s "
             "OLLAMA_KV_CACHE_TYPE: OLLAMA_LLM_LIBRARY: OLLAMA_LOAD_TIMEOUT:5m0s "
             "OLLAMA_MAX_LOADED_MODELS:0 OLLAMA_MAX_QUEUE:512 OLLAMA_MAX_TRANSFER_STREAMS:4 "
             "OLLAMA_MODELS:%s/.ollama/models OLLAMA_NOHISTORY:false OLLAMA_NOPRUNE:false "
             "OLLAMA_NO_CLOUD:false OLLAMA_NUM_PARALLEL:1 OLLAMA_ORIGINS:[http://localhost "
             "https://localhost http://localhost:* https://localhost:* http://127.0.0.1 "
             "https://127.0.0.1 http://127.0.0.1:* https://127.0.0.1:* http://0.0.0.0 "
             "https://0.0.0.0 http://0.0.0.0:* https://0.0.0.0:* app://* file://* tauri://* "
             "vscode-webview://* vscode-file://*] OLLAMA_PULL_MIRROR: OLLAMA_REGISTRY_MIRROR: "
             "OLLAMA_SCHED_SPREAD:false]",
             env_home_dir());
    assert_string_equal(buf_cstr(&b), want);
    buf_deinit(&b);
    env_config_deinit(&c);
    env_config_deinit(&c);  // idempotent
}

static void test_env_config_values(void **state)
{
    (void)state;
    env_clear_all();
    setenv("OLLAMA_HOST", " \"0.0.0.0:8080\" ", 1);
    setenv("OLLAMA_MODELS", "/tmp/models", 1);
    setenv("OLLAMA_KEEP_ALIVE", "1h30m", 1);
    setenv("OLLAMA_LOAD_TIMEOUT", "-1", 1);
    setenv("OLLAMA_CONTEXT_LENGTH", "8192", 1);
    setenv("OLLAMA_NUM_PARALLEL", "4", 1);
    setenv("OLLAMA_MAX_LOADED_MODELS", "2", 1);
    setenv("OLLAMA_MAX_QUEUE", "'10'", 1);
    setenv("OLLAMA_GPU_OVERHEAD", "1000000000", 1);
    setenv("OLLAMA_ORIGINS", "chrome-extension://*,https://Example.com", 1);
    setenv("OLLAMA_DEBUG", "2", 1);
    setenv("OLLAMA_NOPRUNE", "yes", 1);
    setenv("OLLAMA_FLASH_ATTENTION", "0", 1);
    setenv("OLLAMA_KV_CACHE_TYPE", "Q8_0", 1);
    setenv("OLLAMA_SCHED_SPREAD", "true", 1);
    setenv("OLLAMA_NOHISTORY", "1", 1);
    setenv("OLLAMA_AUTH", "T", 1);
    setenv("OLLAMA_NO_CLOUD", "false", 1);
    setenv("OLLAMA_REGISTRY_MIRROR", "http://10.0.0.2:5000", 1);
    setenv("OLLAMA_PULL_MIRROR", "http://10.0.0.3:11434", 1);
    setenv("OLLAMA_DRAIN_TIMEOUT", "30s", 1);
    setenv("OLLAMA_GO_TEMPLATE", "0", 1);
    setenv("OLLAMA_DEBUG_LOG_REQUESTS", "1", 1);
    setenv("OLLAMA_LLM_LIBRARY", "cpu", 1);
    setenv("OLLAMA_EDITOR", "vim -n", 1);
    struct env_config c;
    env_config_load(&c);
    char url[600];
    host_format_url(&c.host, url, sizeof(url));
    assert_string_equal(url, "http://0.0.0.0:8080");
    assert_string_equal(c.models_dir, "/tmp/models");
    assert_true(c.keep_alive_ns == 90 * MIN);
    assert_true(c.load_timeout_ns == -SEC);
    assert_int_equal(c.context_length, 8192);
    assert_int_equal(c.num_parallel, 4);
    assert_int_equal(c.max_loaded_models, 2);
    assert_int_equal(c.max_queue, 10);
    assert_int_equal(c.gpu_overhead, 1000000000);
    assert_int_equal(c.debug_level, LOG_TRACE);
    assert_true(c.noprune);
    assert_int_equal(c.flash_attention, 0);
    assert_string_equal(c.kv_cache_type, "q8_0");
    assert_true(c.sched_spread);
    assert_true(c.nohistory);
    assert_true(c.auth);
    assert_false(c.no_cloud);
    assert_string_equal(c.registry_mirror, "http://10.0.0.2:5000");
    assert_string_equal(c.pull_mirror, "http://10.0.0.3:11434");
    assert_true(c.drain_timeout_ns == 30 * SEC);
    assert_false(c.go_template);
    assert_true(c.debug_log_requests);
    assert_string_equal(c.llm_library, "cpu");
    assert_string_equal(c.editor, "vim -n");
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(env_config_describe(&c, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), " OLLAMA_DEBUG:DEBUG-4 "));
    assert_non_null(strstr(buf_cstr(&b), " OLLAMA_KEEP_ALIVE:1h30m0s "));
    assert_non_null(strstr(buf_cstr(&b), " OLLAMA_LOAD_TIMEOUT:2562047h47m16.854775807s "));
    assert_non_null(strstr(buf_cstr(&b), " OLLAMA_KV_CACHE_TYPE:q8_0 "));
    assert_non_null(strstr(buf_cstr(&b), " OLLAMA_HOST:http://0.0.0.0:8080 "));
    assert_non_null(
        strstr(buf_cstr(&b),
               " OLLAMA_ORIGINS:[chrome-extension://* https://example.com http://localhost "));
    buf_deinit(&b);
    assert_string_equal(c.origins[0], "chrome-extension://*");
    assert_string_equal(c.origins[1], "https://example.com");
    assert_string_equal(c.origins[2], "http://localhost");
    env_config_deinit(&c);
    env_clear_all();
}

static void test_env_config_bad_values(void **state)
{
    (void)state;
    env_clear_all();
    setenv("OLLAMA_NUM_PARALLEL", "-1", 1);
    setenv("OLLAMA_MAX_QUEUE", "lots", 1);
    setenv("OLLAMA_CONTEXT_LENGTH", "99999999999999999999999", 1);
    setenv("OLLAMA_KEEP_ALIVE", "5 minutes", 1);
    setenv("OLLAMA_LOAD_TIMEOUT", "1d", 1);
    setenv("OLLAMA_KV_CACHE_TYPE", "q5_1", 1);
    setenv("OLLAMA_HOST", "example.com:http", 1);
    struct env_config c;
    struct capture cap;
    capture_start(&cap);
    env_config_load(&c);
    char *out = capture_end(&cap);
    assert_int_equal(c.num_parallel, 1);
    assert_int_equal(c.max_queue, 512);
    assert_int_equal(c.context_length, 0);
    assert_true(c.keep_alive_ns == 5 * MIN);
    assert_true(c.load_timeout_ns == 5 * MIN);
    assert_string_equal(c.kv_cache_type, "f16");
    assert_string_equal(c.host.host, "example.com");
    assert_int_equal(c.host.port, 11434);
    assert_non_null(strstr(out, "key=OLLAMA_NUM_PARALLEL value=\"-1\" default=1"));
    assert_non_null(strstr(out, "key=OLLAMA_MAX_QUEUE value=\"lots\" default=512"));
    assert_non_null(strstr(out, "key=OLLAMA_CONTEXT_LENGTH"));
    assert_non_null(strstr(out, "key=OLLAMA_KEEP_ALIVE value=\"5 minutes\" default=5m0s"));
    assert_non_null(strstr(out, "key=OLLAMA_LOAD_TIMEOUT"));
    assert_non_null(strstr(out, "q5_1"));
    assert_non_null(strstr(out, "invalid port, using default"));
    free(out);
    env_config_deinit(&c);
    env_clear_all();
}

static void test_env_home(void **state)
{
    (void)state;
    const char *h = env_home_dir();
    assert_non_null(h);
    assert_true(h[0] == '/');
    assert_ptr_equal(env_home_dir(), h);
}

// ---------------------------------------------------------------------------
// Digests

#define SHA_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA_ABC   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static void test_sha256(void **state)
{
    (void)state;
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex("", 0, hex);
    assert_string_equal(hex, SHA_EMPTY);
    sha256_hex("abc", 3, hex);
    assert_string_equal(hex, SHA_ABC);
    // Streaming in odd pieces equals one shot.
    static char data[100000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 31 + 7);
    char one[DIGEST_HEX_LEN + 1];
    sha256_hex(data, sizeof(data), one);
    struct sha256 h;
    assert_int_equal(sha256_init(&h), 0);
    for (size_t off = 0, step = 1; off < sizeof(data); off += step, step = step * 3 % 9973 + 1)
        sha256_update(&h, data + off, off + step > sizeof(data) ? sizeof(data) - off : step);
    sha256_final(&h, hex);
    assert_string_equal(hex, one);
    assert_null(h.ctx);
    // Abort frees without output.
    assert_int_equal(sha256_init(&h), 0);
    sha256_update(&h, "x", 1);
    sha256_abort(&h);
    assert_null(h.ctx);
    sha256_abort(&h);  // twice is fine
}

static void test_sha256_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_util_sha_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/f", dir);
    assert_int_equal(fs_write_atomic(path, "abc", 3, NULL), 0);
    char hex[DIGEST_HEX_LEN + 1];
    uint64_t size = 0;
    assert_int_equal(sha256_file(path, hex, &size, NULL), 0);
    assert_string_equal(hex, SHA_ABC);
    assert_int_equal(size, 3);
    assert_int_equal(fs_write_atomic(path, "", 0, NULL), 0);
    assert_int_equal(sha256_file(path, hex, NULL, NULL), 0);
    assert_string_equal(hex, SHA_EMPTY);
    unlink(path);
    struct err e = {0};
    assert_int_equal(sha256_file(path, hex, &size, &e), ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "No such file"));
    err_clear(&e);
    assert_int_equal(sha256_file(dir, hex, &size, &e), ERR_IO);  // a directory: read fails
    rmdir(dir);
}

static void test_digest_parse(void **state)
{
    (void)state;
    char hex[DIGEST_HEX_LEN + 1];
    struct err e = {0};
    assert_int_equal(digest_parse("sha256:" SHA_ABC, hex, &e), 0);
    assert_string_equal(hex, SHA_ABC);
    assert_int_equal(digest_parse_filename("sha256-" SHA_ABC, hex, NULL), 0);
    assert_string_equal(hex, SHA_ABC);
    assert_true(digest_hex_valid(SHA_ABC));

    static const char *const bad[] = {
        "",
        "sha256:",
        "sha256-" SHA_ABC,  // wrong separator for this form
        "sha256:" SHA_ABC "0",
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a",
        "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ag",
        "sha256:../../../../../../../../../../../../../../../../../../etc/passwd",
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f2001/ad",
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f200..ad",
        "sha512:" SHA_ABC,
        "SHA256:" SHA_ABC,
        " sha256:" SHA_ABC,
        SHA_ABC,
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(hex, "untouched", 10);
        err_clear(&e);
        assert_int_equal(digest_parse(bad[i], hex, &e), ERR_INVALID);
        assert_string_equal(hex, "untouched");
        assert_true(cstr_starts_with(e.msg, "invalid digest format"));
    }
    assert_int_equal(digest_parse(NULL, hex, NULL), ERR_INVALID);
    assert_int_equal(digest_parse_filename("sha256:" SHA_ABC, hex, NULL), ERR_INVALID);
    assert_int_equal(digest_parse_filename("sha256-../x", hex, NULL), ERR_INVALID);
    assert_false(digest_hex_valid(NULL));
    assert_false(digest_hex_valid(""));
    assert_false(digest_hex_valid(SHA_ABC "a"));

    char out[DIGEST_HEX_LEN + 8];
    digest_format(SHA_ABC, out);
    assert_string_equal(out, "sha256:" SHA_ABC);
}

// ---------------------------------------------------------------------------
// Files

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char sub[1024];
        snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
        rm_rf(sub);
    }
    closedir(d);
    rmdir(path);
}

static void test_fs_mkdir_write_read(void **state)
{
    (void)state;
    char root[] = "/tmp/test_util_fs_XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[512], f[600];
    snprintf(p, sizeof(p), "%s/a/b//c/", root);
    struct err e = {0};
    assert_int_equal(fs_mkdir_p(p, &e), 0);
    assert_true(fs_exists(p));
    assert_int_equal(fs_mkdir_p(p, NULL), 0);  // exists already: fine
    snprintf(f, sizeof(f), "%s/a/b/c/manifest", root);

    assert_int_equal(fs_write_atomic(f, "{\"a\":1}", 7, &e), 0);
    assert_true(fs_exists(f));
    struct stat st;
    assert_int_equal(stat(f, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    // Overwrite; no temp files left behind.
    assert_int_equal(fs_write_atomic(f, "second", 6, &e), 0);
    snprintf(p, sizeof(p), "%s/a/b/c", root);
    assert_int_equal(count_entries(p), 1);

    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(f, 100, &b, &e), 0);
    assert_string_equal(buf_cstr(&b), "second");
    buf_reset(&b);
    assert_int_equal(fs_read_all(f, 6, &b, &e), 0);  // exactly at the cap
    buf_reset(&b);
    assert_int_equal(fs_read_all(f, 5, &b, &e), ERR_TOO_LARGE);
    assert_non_null(strstr(e.msg, "larger than 5 bytes"));
    err_clear(&e);
    buf_deinit(&b);
    buf_init(&b, 3);  // the buffer's own cap also applies
    assert_int_equal(fs_read_all(f, 100, &b, &e), ERR_TOO_LARGE);
    buf_deinit(&b);
    err_clear(&e);
    buf_init(&b, 0);
    snprintf(p, sizeof(p), "%s/missing", root);
    assert_int_equal(fs_read_all(p, 100, &b, &e), ERR_NOT_FOUND);
    buf_deinit(&b);
    assert_false(fs_exists(p));
    assert_false(fs_exists(NULL));

    // mkdir over a file fails.
    err_clear(&e);
    snprintf(p, sizeof(p), "%s/a/b/c/manifest/sub", root);
    assert_true(fs_mkdir_p(p, &e) < 0);
    err_clear(&e);
    assert_int_equal(fs_mkdir_p(f, &e), ERR_EXISTS);
    assert_int_equal(fs_mkdir_p("", NULL), ERR_INVALID);
    assert_int_equal(fs_mkdir_p(NULL, NULL), ERR_INVALID);

    // Writing into a missing directory fails and leaves nothing.
    err_clear(&e);
    snprintf(p, sizeof(p), "%s/nodir/file", root);
    assert_int_equal(fs_write_atomic(p, "x", 1, &e), ERR_NOT_FOUND);
    assert_false(fs_exists(p));
    // Renaming onto a directory fails; the temp file is removed.
    err_clear(&e);
    snprintf(p, sizeof(p), "%s/a/b/c/dir", root);
    assert_int_equal(fs_mkdir_p(p, NULL), 0);
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/x", p);
    assert_int_equal(fs_write_atomic(sub, "x", 1, NULL), 0);  // make dir non-empty
    assert_true(fs_write_atomic(p, "data", 4, &e) < 0);
    snprintf(p, sizeof(p), "%s/a/b/c", root);
    assert_int_equal(count_entries(p), 2);  // manifest + dir, no temp
    assert_int_equal(fs_write_atomic("", "x", 1, NULL), ERR_INVALID);

    assert_int_equal(fs_fsync_dir(root, NULL), 0);
    snprintf(p, sizeof(p), "%s/missing", root);
    assert_int_equal(fs_fsync_dir(p, NULL), ERR_NOT_FOUND);

    // Relative paths write into the current directory.
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(root), 0);
    assert_int_equal(fs_write_atomic("rel.txt", "r", 1, NULL), 0);
    assert_true(fs_exists("rel.txt"));
    assert_int_equal(chdir(cwd), 0);
    rm_rf(root);
}

static void test_fs_permission(void **state)
{
    (void)state;
    if (geteuid() == 0)
        skip();  // root ignores permissions
    char root[] = "/tmp/test_util_perm_XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[512];
    snprintf(p, sizeof(p), "%s/ro", root);
    assert_int_equal(mkdir(p, 0555), 0);
    snprintf(p, sizeof(p), "%s/ro/sub/dir", root);
    struct err e = {0};
    assert_int_equal(fs_mkdir_p(p, &e), ERR_PERMISSION);
    assert_non_null(strstr(e.msg, "permission denied: ensure path elements are traversable"));
    snprintf(p, sizeof(p), "%s/ro/file", root);
    err_clear(&e);
    assert_int_equal(fs_write_atomic(p, "x", 1, &e), ERR_PERMISSION);
    snprintf(p, sizeof(p), "%s/ro", root);
    chmod(p, 0755);
    rm_rf(root);
}

static void test_path_join(void **state)
{
    (void)state;
    char out[64];
    struct err e = {0};
    assert_int_equal(path_join_under("/models", "blobs/sha256-abc", out, sizeof(out), &e), 0);
    assert_string_equal(out, "/models/blobs/sha256-abc");
    assert_int_equal(path_join_under("/models/", "manifests", out, sizeof(out), &e), 0);
    assert_string_equal(out, "/models/manifests");
    assert_int_equal(path_join_under("/models", "", out, sizeof(out), &e), 0);
    assert_string_equal(out, "/models");
    assert_int_equal(path_join_under("/models", "a/.../b", out, sizeof(out), &e), 0);
    assert_int_equal(path_join_under("/models", "..a/b..", out, sizeof(out), &e), 0);

    static const char *const bad[] = {
        "/etc/passwd", "..", "../x", "a/..", "a/../b", "a/b/../../..", "a//..//b", "..\\x", "a\\b",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        if (path_join_under("/models", bad[i], out, sizeof(out), &e) != ERR_INVALID)
            fail_msg("path_join_under accepted \"%s\"", bad[i]);
    }
    assert_int_equal(path_join_under("", "a", out, sizeof(out), NULL), ERR_INVALID);
    assert_int_equal(path_join_under(NULL, "a", out, sizeof(out), NULL), ERR_INVALID);
    assert_int_equal(path_join_under("/m", NULL, out, sizeof(out), NULL), ERR_INVALID);
    assert_int_equal(path_join_under("/m", "a", out, 0, NULL), ERR_INVALID);
    assert_int_equal(path_join_under("/m", "0123456789", out, 12, NULL), ERR_TOO_LARGE);

    assert_int_equal(path_join("a", "b", out, sizeof(out), NULL), 0);
    assert_string_equal(out, "a/b");
    assert_int_equal(path_join("a/", "b", out, sizeof(out), NULL), 0);
    assert_string_equal(out, "a/b");
    assert_int_equal(path_join("", "b", out, sizeof(out), NULL), 0);
    assert_string_equal(out, "b");
    assert_int_equal(path_join("a", "", out, sizeof(out), NULL), 0);
    assert_string_equal(out, "a");
    assert_int_equal(path_join("abc", "def", out, 7, NULL), ERR_TOO_LARGE);
    assert_int_equal(path_join("abc", "de", out, 7, NULL), 0);
    assert_int_equal(path_join(NULL, "b", out, sizeof(out), NULL), ERR_INVALID);
}

// Go's strconv.Quote: escapes, \x for invalid bytes and controls, \u for
// runes Go does not print, printable UTF-8 as it is.
static void test_go_quoted(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    const char in[] = "a\"b\\\n\t\x01\xc3\xa9\xff\xe2\x80\x8b\xf0\x9f\x98\x80";
    assert_int_equal(buf_append_go_quoted(&b, in, sizeof(in) - 1), 0);
    assert_string_equal(buf_cstr(&b),
                        "\"a\\\"b\\\\\\n\\t\\x01\xc3\xa9\\xff\\u200b\xf0\x9f\x98\x80\"");
    buf_reset(&b);
    assert_int_equal(buf_append_go_quoted(&b, "", 0), 0);
    assert_string_equal(buf_cstr(&b), "\"\"");
    buf_deinit(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_go_quoted),
        cmocka_unit_test(test_err_first_wins),
        cmocka_unit_test(test_err_names),
        cmocka_unit_test(test_err_long_message_truncates),
        cmocka_unit_test(test_mem_checked_arith),
        cmocka_unit_test(test_mem_strings),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_buf_basic),
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_str),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_utf8_properties_and_go_formats),
        cmocka_unit_test(test_str_to_numbers),
        cmocka_unit_test(test_log_line_shape),
        cmocka_unit_test(test_duration_parse_ok),
        cmocka_unit_test(test_duration_parse_bad),
        cmocka_unit_test(test_duration_format),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_time_relative),
        cmocka_unit_test(test_time_rfc3339_format),
        cmocka_unit_test(test_time_rfc3339_parse),
        cmocka_unit_test(test_size_format),
        cmocka_unit_test(test_env_clean),
        cmocka_unit_test(test_env_bool_and_debug),
        cmocka_unit_test(test_host_parse),
        cmocka_unit_test(test_env_config_defaults),
        cmocka_unit_test(test_env_config_values),
        cmocka_unit_test(test_env_config_bad_values),
        cmocka_unit_test(test_env_home),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_sha256_file),
        cmocka_unit_test(test_digest_parse),
        cmocka_unit_test(test_fs_mkdir_write_read),
        cmocka_unit_test(test_fs_permission),
        cmocka_unit_test(test_path_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

// Unit tests for src/json: parsing with Go-style errors, typed getters,
// builders, and Go-exact output (escaping, key order, number formatting).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

static json_t *parse_ok(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    int rc = jsonx_parse(s, strlen(s), &v, &e);
    if (rc != 0)
        fail_msg("parse \"%s\": %s", s, e.msg);
    return v;
}

// Parses then dumps compactly: what Go would re-encode.
static char *roundtrip(const char *s, int flags)
{
    json_t *v = parse_ok(s);
    char *out = jsonx_dumps(v, flags);
    json_decref(v);
    assert_non_null(out);
    return out;
}

// ---------------------------------------------------------------------------
// Parsing

static void test_parse_values(void **state)
{
    (void)state;
    json_t *v = parse_ok(" {\"model\":\"llama3\",\"n\":42,\"x\":0.5,\"b\":true,\"z\":null,"
                         "\"a\":[1,\"two\",{}],\"o\":{\"k\":\"v\"}} \n");
    assert_true(json_is_object(v));
    assert_string_equal(json_string_value(json_object_get(v, "model")), "llama3");
    assert_int_equal(json_integer_value(json_object_get(v, "n")), 42);
    assert_true(json_real_value(json_object_get(v, "x")) == 0.5);
    json_decref(v);

    // Any top-level value.
    const char *scalars[] = {"1",     "-0",   "0.25", "1e3", "\"s\"",          "true",
                             "false", "null", "[]",   "{}",  " \t\r\n7 \t\r\n"};
    for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++)
        json_decref(parse_ok(scalars[i]));

    // int64 kept exact.
    v = parse_ok("[9223372036854775807,-9223372036854775808,9007199254740993]");
    assert_true(json_integer_value(json_array_get(v, 0)) == INT64_MAX);
    assert_true(json_integer_value(json_array_get(v, 1)) == INT64_MIN);
    assert_true(json_integer_value(json_array_get(v, 2)) == 9007199254740993LL);
    json_decref(v);

    // Escapes, \u0000 and surrogate pairs.
    v = parse_ok("\"a\\u0000b\\n\\u00e9\\ud83d\\ude00\\/\"");
    assert_int_equal(json_string_length(v), 1 + 1 + 1 + 1 + 2 + 4 + 1);
    assert_memory_equal(json_string_value(v), "a\0b\n\xc3\xa9\xf0\x9f\x98\x80/", 11);
    json_decref(v);

    // Duplicate keys: the last one wins, as in Go.
    v = parse_ok("{\"a\":1,\"b\":2,\"a\":3}");
    assert_int_equal(json_object_size(v), 2);
    assert_int_equal(json_integer_value(json_object_get(v, "a")), 3);
    json_decref(v);

    // Raw UTF-8 passes through.
    v = parse_ok("\"h\xc3\xa9llo \xe2\x82\xac\"");
    assert_string_equal(json_string_value(v), "h\xc3\xa9llo \xe2\x82\xac");
    json_decref(v);
}

static void test_parse_repairs_like_go(void **state)
{
    (void)state;
    // Invalid UTF-8 inside strings becomes U+FFFD, one per bad byte.
    const char in[] = "{\"p\":\"a\xff\xc3(b\xed\xa0\x80\"}";
    json_t *v = NULL;
    assert_int_equal(jsonx_parse(in, sizeof(in) - 1, &v, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(v, "p")),
                        "a\xef\xbf\xbd\xef\xbf\xbd(b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(v);
    // Lone surrogate escapes become U+FFFD; a valid pair stays.
    v = parse_ok("[\"\\ud800\", \"x\\udc00y\", \"\\ud83d\\u0041\", \"\\ud83d\\ude00\"]");
    assert_string_equal(json_string_value(json_array_get(v, 0)), "\xef\xbf\xbd");
    assert_string_equal(json_string_value(json_array_get(v, 1)), "x\xef\xbf\xbdy");
    assert_string_equal(json_string_value(json_array_get(v, 2)), "\xef\xbf\xbd"
                                                                 "A");
    assert_string_equal(json_string_value(json_array_get(v, 3)), "\xf0\x9f\x98\x80");
    json_decref(v);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *msg;
    } cases[] = {
        {"", "unexpected end of JSON input"},
        {"   ", "unexpected end of JSON input"},
        {"x", "invalid character 'x' looking for beginning of value at line 1 column 1"},
        {"{\"a\":1,}",
         "invalid character '}' looking for beginning of object key string at line 1 column 8"},
        {"{\"a\" 1}", "invalid character '1' after object key at line 1 column 6"},
        {"{\"a\":1 \"b\":2}",
         "invalid character '\"' after object key:value pair at line 1 column 8"},
        {"[1 2]", "invalid character '2' after array element at line 1 column 4"},
        {"[1,]", "invalid character ']' looking for beginning of value at line 1 column 4"},
        {"[1,2", "unexpected end of JSON input"},
        {"{\"a\":", "unexpected end of JSON input"},
        {"\"abc", "unexpected end of JSON input"},
        {"\"a\\", "unexpected end of JSON input"},
        {"\"\\u12", "unexpected end of JSON input"},
        {"-", "unexpected end of JSON input"},
        {"1.", "unexpected end of JSON input"},
        {"1e", "unexpected end of JSON input"},
        {"tr", "unexpected end of JSON input"},
        {"{\"a\":1} x", "invalid character 'x' after top-level value at line 1 column 9"},
        {"01", "invalid character '1' after top-level value at line 1 column 2"},
        {"-a", "invalid character 'a' in numeric literal at line 1 column 2"},
        {"1.x", "invalid character 'x' after decimal point in numeric literal at line 1 column 3"},
        {"1e+x", "invalid character 'x' in exponent of numeric literal at line 1 column 4"},
        {"[tru]", "invalid character ']' in literal true (expecting 'e') at line 1 column 5"},
        {"nul", "unexpected end of JSON input"},
        {"nulL", "invalid character 'L' in literal null (expecting 'l') at line 1 column 4"},
        {"\"a\x01\"", "invalid character '\\x01' in string literal at line 1 column 3"},
        {"\"\\x\"", "invalid character 'x' in string escape code at line 1 column 3"},
        {"\"\\u12g4\"",
         "invalid character 'g' in \\u hexadecimal character escape at line 1 column 6"},
        {"{\n  \"a\":\n   x}",
         "invalid character 'x' looking for beginning of value at line 3 column 4"},
        {"'a'", "invalid character '\\'' looking for beginning of value at line 1 column 1"},
        {"\n\t", "unexpected end of JSON input"},
        {"[\"a\"\n,\n\t}",
         "invalid character '}' looking for beginning of value at line 3 column 2"},
        {"\xff", "invalid character '\xc3\xbf' looking for beginning of value at line 1 column 1"},
        {"\x80", "invalid character '\\u0080' looking for beginning of value at line 1 column 1"},
        {"{\"a\":1}\n{\"a\":2}", "invalid character '{' after top-level value at line 2 column 1"},
        {"NaN", "invalid character 'N' looking for beginning of value at line 1 column 1"},
        {"+1", "invalid character '+' looking for beginning of value at line 1 column 1"},
        {".5", "invalid character '.' looking for beginning of value at line 1 column 1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = (json_t *)0x1;
        struct err e = {0};
        int rc = jsonx_parse(cases[i].in, strlen(cases[i].in), &v, &e);
        if (rc != ERR_INVALID || strcmp(e.msg, cases[i].msg) != 0)
            fail_msg("parse(\"%s\") = %d \"%s\", want \"%s\"", cases[i].in, rc, e.msg,
                     cases[i].msg);
        assert_ptr_equal(v, (json_t *)0x1);  // untouched on error
    }
    // Embedded NUL byte outside a string.
    json_t *v;
    struct err e = {0};
    assert_int_equal(jsonx_parse("1\0", 2, &v, &e), ERR_INVALID);
    assert_string_equal(e.msg,
                        "invalid character '\\x00' after top-level value at line 1 column 2");
    assert_int_equal(jsonx_parse(NULL, 0, &v, NULL), ERR_INVALID);
    assert_int_equal(jsonx_parse(NULL, 5, &v, NULL), ERR_INVALID);
    assert_int_equal(jsonx_parse("{}", JSONX_MAX_BYTES + 1, &v, NULL), ERR_TOO_LARGE);
}

static void test_parse_numbers_out_of_range(void **state)
{
    (void)state;
    json_t *v;
    struct err e = {0};
    assert_int_equal(jsonx_parse("[1e400]", 7, &v, &e), ERR_RANGE);
    assert_true(cstr_starts_with(e.msg, "json: number out of range at line 1"));
    err_clear(&e);
    assert_int_equal(jsonx_parse("{\"x\":-1e309}", 12, &v, &e), ERR_RANGE);
    // Integers beyond int64 are read as reals, as Go reads them into float64;
    // int getters then report the range.
    v = parse_ok("[123456789012345678901234,-9223372036854775809,9223372036854775808,"
                 "9223372036854775807,-9223372036854775808,\"99999999999999999999\"]");
    assert_true(json_is_real(json_array_get(v, 0)));
    assert_true(json_real_value(json_array_get(v, 0)) == 123456789012345678901234.0);
    assert_true(json_is_real(json_array_get(v, 1)));
    assert_true(json_is_real(json_array_get(v, 2)));
    assert_true(json_is_integer(json_array_get(v, 3)));
    assert_true(json_is_integer(json_array_get(v, 4)));
    assert_string_equal(json_string_value(json_array_get(v, 5)), "99999999999999999999");
    int64_t i;
    err_clear(&e);
    assert_int_equal(jsonx_as_int(json_array_get(v, 2), "seed", &i, INT64_MIN, INT64_MAX, &e),
                     ERR_RANGE);
    assert_string_equal(e.msg, "json: number 9223372036854776000 for field seed is out of range");
    char *s = jsonx_dumps(v, 0);
    // Go's float64 text for 2^63 is its shortest form padded with zeros.
    assert_string_equal(s, "[1.2345678901234569e+23,-9223372036854776000,9223372036854776000,"
                           "9223372036854775807,-9223372036854775808,\"99999999999999999999\"]");
    free(s);
    json_decref(v);
    v = parse_ok("100000000000000000000");
    s = jsonx_dumps(v, 0);
    assert_string_equal(s, "100000000000000000000");
    free(s);
    json_decref(v);
    // Tiny reals underflow to zero without an error (as Go).
    v = parse_ok("1e-400");
    assert_true(json_real_value(v) == 0);
    json_decref(v);
}

static void test_parse_depth(void **state)
{
    (void)state;
    size_t depth = JSONX_MAX_DEPTH;
    char *s = xmalloc(2 * depth + 2);
    for (size_t i = 0; i < depth; i++) {
        s[i] = '[';
        s[2 * depth - 1 - i] = ']';
    }
    s[2 * depth] = '\0';
    json_t *v = parse_ok(s);
    json_decref(v);
    free(s);
    // One deeper fails cleanly; so does a huge unbalanced opening.
    depth = JSONX_MAX_DEPTH + 1;
    s = xmalloc(2 * depth + 1);
    for (size_t i = 0; i < depth; i++) {
        s[i] = '[';
        s[2 * depth - 1 - i] = ']';
    }
    struct err e = {0};
    assert_int_equal(jsonx_parse(s, 2 * depth, &v, &e), ERR_INVALID);
    assert_true(cstr_starts_with(e.msg, "exceeded max depth"));
    free(s);
    size_t n = 1000000;
    s = xmalloc(n);
    memset(s, '{', n);
    err_clear(&e);
    assert_int_equal(jsonx_parse(s, n, &v, &e), ERR_INVALID);
    memset(s, '[', n);
    assert_int_equal(jsonx_parse(s, n, &v, NULL), ERR_INVALID);
    free(s);
}

static void test_parse_object(void **state)
{
    (void)state;
    json_t *v;
    struct err e = {0};
    assert_int_equal(jsonx_parse_object("{\"a\":1}", 7, &v, &e), 0);
    json_decref(v);
    assert_int_equal(jsonx_parse_object("[1]", 3, &v, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal array into value of type object");
    err_clear(&e);
    assert_int_equal(jsonx_parse_object("\"x\"", 3, &v, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal string into value of type object");
    err_clear(&e);
    assert_int_equal(jsonx_parse_object("{", 1, &v, &e), ERR_INVALID);
    assert_string_equal(e.msg, "unexpected end of JSON input");
}

// ---------------------------------------------------------------------------
// Getters

static void test_getters(void **state)
{
    (void)state;
    json_t *o = parse_ok("{\"model\":\"llama3\",\"stream\":false,\"num_ctx\":4096,\"t\":0.7,"
                         "\"f\":5.0,\"big\":1e30,\"half\":5.5,\"neg\":-3,\"nul\":null,"
                         "\"opts\":{\"a\":1},\"stop\":[\"x\",\"y\"],\"s0\":\"a\\u0000b\"}");
    struct err e = {0};
    const char *s = NULL;
    assert_int_equal(jsonx_get_str(o, "model", &s, true, &e), 1);
    assert_string_equal(s, "llama3");
    size_t len = 0;
    assert_int_equal(jsonx_get_strn(o, "s0", &s, &len, true, &e), 1);
    assert_int_equal(len, 3);

    // Optional and absent or null: default kept, 0 returned.
    s = "default";
    assert_int_equal(jsonx_get_str(o, "missing", &s, false, &e), 0);
    assert_int_equal(jsonx_get_str(o, "nul", &s, false, &e), 0);
    assert_string_equal(s, "default");
    assert_int_equal(e.code, 0);

    // Required and absent.
    assert_int_equal(jsonx_get_str(o, "prompt", &s, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "missing required field prompt");
    err_clear(&e);
    assert_int_equal(jsonx_get_str(o, "nul", &s, true, &e), ERR_INVALID);
    err_clear(&e);

    // Wrong types.
    assert_int_equal(jsonx_get_str(o, "num_ctx", &s, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal number into field num_ctx of type string");
    assert_string_equal(s, "default");
    err_clear(&e);
    bool b = true;
    assert_int_equal(jsonx_get_bool(o, "stream", &b, false, &e), 1);
    assert_false(b);
    assert_int_equal(jsonx_get_bool(o, "model", &b, false, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal string into field model of type bool");
    err_clear(&e);

    int64_t i = -1;
    assert_int_equal(jsonx_get_int(o, "num_ctx", &i, 0, INT32_MAX, true, &e), 1);
    assert_int_equal(i, 4096);
    assert_int_equal(jsonx_get_int(o, "f", &i, INT64_MIN, INT64_MAX, true, &e), 1);
    assert_int_equal(i, 5);
    assert_int_equal(jsonx_get_int(o, "neg", &i, INT64_MIN, INT64_MAX, true, &e), 1);
    assert_int_equal(i, -3);
    assert_int_equal(jsonx_get_int(o, "neg", &i, 0, 10, true, &e), ERR_RANGE);
    assert_string_equal(e.msg, "json: neg = -3 is out of range [0, 10]");
    assert_int_equal(i, -3);
    err_clear(&e);
    assert_int_equal(jsonx_get_int(o, "half", &i, INT64_MIN, INT64_MAX, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal number 5.5 into field half of type int");
    err_clear(&e);
    assert_int_equal(jsonx_get_int(o, "big", &i, INT64_MIN, INT64_MAX, true, &e), ERR_RANGE);
    assert_string_equal(e.msg, "json: number 1e+30 for field big is out of range");
    err_clear(&e);
    assert_int_equal(jsonx_get_int(o, "model", &i, INT64_MIN, INT64_MAX, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal string into field model of type int");
    err_clear(&e);
    i = 77;
    assert_int_equal(jsonx_get_int(o, "nope", &i, 0, 1, false, &e), 0);
    assert_int_equal(i, 77);

    double d = 0;
    assert_int_equal(jsonx_get_double(o, "t", &d, true, &e), 1);
    assert_true(d == 0.7);
    assert_int_equal(jsonx_get_double(o, "num_ctx", &d, true, &e), 1);
    assert_true(d == 4096.0);
    assert_int_equal(jsonx_get_double(o, "stop", &d, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal array into field stop of type float64");
    err_clear(&e);

    json_t *sub = NULL;
    assert_int_equal(jsonx_get_obj(o, "opts", &sub, true, &e), 1);
    assert_true(json_is_object(sub));
    assert_int_equal(jsonx_get_obj(o, "stop", &sub, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal array into field stop of type object");
    err_clear(&e);
    assert_int_equal(jsonx_get_arr(o, "stop", &sub, true, &e), 1);
    assert_int_equal(json_array_size(sub), 2);
    assert_int_equal(jsonx_get_arr(o, "opts", &sub, true, &e), ERR_INVALID);
    err_clear(&e);
    sub = NULL;
    assert_int_equal(jsonx_get_arr(o, "nul", &sub, false, &e), 0);
    assert_null(sub);

    // Element access.
    json_t *stop;
    jsonx_get_arr(o, "stop", &stop, true, NULL);
    assert_int_equal(jsonx_as_str(json_array_get(stop, 1), "stop[1]", &s, &e), 0);
    assert_string_equal(s, "y");
    assert_int_equal(jsonx_as_str(NULL, "stop[5]", &s, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot unmarshal null into field stop[5] of type string");
    err_clear(&e);
    assert_int_equal(jsonx_as_bool(json_true(), "x", &b, &e), 0);
    assert_true(b);
    assert_int_equal(jsonx_as_double(json_object_get(o, "model"), "x", &d, &e), ERR_INVALID);
    err_clear(&e);

    // Not an object.
    assert_int_equal(jsonx_get_str(stop, "model", &s, true, &e), ERR_INVALID);
    assert_string_equal(e.msg, "json: cannot read field model from array, expected object");
    err_clear(&e);
    assert_int_equal(jsonx_get_str(NULL, "model", &s, false, &e), ERR_INVALID);
    json_decref(o);

    assert_string_equal(jsonx_type_name(NULL), "null");
    json_t *r = json_real(1.5);
    assert_string_equal(jsonx_type_name(r), "number");
    json_decref(r);
}

static void test_int_limits(void **state)
{
    (void)state;
    json_t *o = parse_ok("{\"a\":9223372036854775807,\"b\":9.2233720368547758e18,"
                         "\"c\":-9.2233720368547758e18,\"d\":1e3,\"e\":-0.0}");
    int64_t i;
    assert_int_equal(jsonx_get_int(o, "a", &i, INT64_MIN, INT64_MAX, true, NULL), 1);
    assert_true(i == INT64_MAX);
    assert_int_equal(jsonx_get_int(o, "b", &i, INT64_MIN, INT64_MAX, true, NULL), ERR_RANGE);
    assert_int_equal(jsonx_get_int(o, "c", &i, INT64_MIN, INT64_MAX, true, NULL), 1);
    assert_true(i == INT64_MIN);
    assert_int_equal(jsonx_get_int(o, "d", &i, INT64_MIN, INT64_MAX, true, NULL), 1);
    assert_int_equal(i, 1000);
    assert_int_equal(jsonx_get_int(o, "e", &i, INT64_MIN, INT64_MAX, true, NULL), 1);
    assert_int_equal(i, 0);
    json_decref(o);
}

// ---------------------------------------------------------------------------
// Numbers

static void test_format_double(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *s;
    } cases[] = {
        {0, "0"},
        {-0.0, "-0"},
        {3, "3"},
        {-3, "-3"},
        {0.5, "0.5"},
        {0.7, "0.7"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1e-6, "0.000001"},
        {1e-7, "1e-7"},
        {1.5e-7, "1.5e-7"},
        {0.00001, "0.00001"},
        {1.2345678e-6, "0.0000012345678"},
        {1e20, "100000000000000000000"},
        {1e21, "1e+21"},
        {1.5e21, "1.5e+21"},
        {123456789.123, "123456789.123"},
        {1000000, "1000000"},
        {4096, "4096"},
        {2.5e-10, "2.5e-10"},
        {1e100, "1e+100"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {5e-324, "5e-324"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {-1.25e-8, "-1.25e-8"},
        {9007199254740993.0, "9007199254740992"},
        {123.456, "123.456"},
        {0.1, "0.1"},
        {100, "100"},
        {1.1, "1.1"},
    };
    char out[40];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(jsonx_format_double(cases[i].v, out, sizeof(out)));
        if (strcmp(out, cases[i].s) != 0)
            fail_msg("format %.17g: got %s want %s", cases[i].v, out, cases[i].s);
        assert_true(strtod(out, NULL) == cases[i].v);
    }
    assert_false(jsonx_format_double(NAN, out, sizeof(out)));
    assert_string_equal(out, "");
    assert_false(jsonx_format_double(INFINITY, out, sizeof(out)));
    assert_false(jsonx_format_double(-INFINITY, out, sizeof(out)));
    assert_false(jsonx_format_double(1, out, 0));

    static const struct {
        float v;
        const char *s;
    } f32[] = {
        {0.8f, "0.8"},   {0.1f, "0.1"},
        {0.95f, "0.95"}, {1.1f, "1.1"},
        {40.0f, "40"},   {16777217.0f, "16777216"},
        {1e-7f, "1e-7"}, {3.4028235e38f, "3.4028235e+38"},
        {-0.0f, "-0"},   {0.3333333f, "0.3333333"},
    };
    for (size_t i = 0; i < sizeof(f32) / sizeof(f32[0]); i++) {
        assert_true(jsonx_format_float32(f32[i].v, out, sizeof(out)));
        assert_string_equal(out, f32[i].s);
    }
    // As a double, float32 0.1 is long; jsonx_real_f32 keeps Go's float32 text.
    jsonx_format_double((double)0.1f, out, sizeof(out));
    assert_string_equal(out, "0.10000000149011612");
    json_t *r = jsonx_real_f32(0.1f);
    char *s = jsonx_dumps(r, 0);
    assert_string_equal(s, "0.1");
    free(s);
    json_decref(r);
    assert_null(jsonx_real_f32(NAN));
}

// ---------------------------------------------------------------------------
// Writing

static void test_dump_strings(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    static const struct {
        const char *in;
        size_t n;
        int flags;
        const char *out;
    } cases[] = {
        {"hello", 5, 0, "\"hello\""},
        {"a/b", 3, 0, "\"a/b\""},  // '/' not escaped
        {"<|eot_id|>", 10, 0, "\"\\u003c|eot_id|\\u003e\""},
        {"a&b", 3, 0, "\"a\\u0026b\""},
        {"<a&b>", 5, JSONX_NO_HTML_ESCAPE, "\"<a&b>\""},
        {"q\"b\\", 4, 0, "\"q\\\"b\\\\\""},
        {"\b\f\n\r\t", 5, 0, "\"\\b\\f\\n\\r\\t\""},
        {"\x01\x1f\x7f", 3, 0, "\"\\u0001\\u001f\x7f\""},
        {"a\0b", 3, 0, "\"a\\u0000b\""},
        {"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12, 0,
         "\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"\xe2\x80\xa8\xe2\x80\xa9", 6, 0, "\"\\u2028\\u2029\""},
        {"\xe2\x80\xa8", 3, JSONX_NO_HTML_ESCAPE, "\"\\u2028\""},
        {"a\xffz", 3, 0, "\"a\\ufffdz\""},
        {"\xc3", 1, 0, "\"\\ufffd\""},                        // truncated sequence
        {"\xe2\x82", 2, 0, "\"\\ufffd\\ufffd\""},             // each bad byte
        {"\xed\xa0\x80", 3, 0, "\"\\ufffd\\ufffd\\ufffd\""},  // UTF-8 surrogate
        {"\xc0\xaf", 2, 0, "\"\\ufffd\\ufffd\""},             // overlong
        {"", 0, 0, "\"\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        buf_reset(&b);
        assert_int_equal(jsonx_dump_string(cases[i].in, cases[i].n, cases[i].flags, &b), 0);
        if (strcmp(buf_cstr(&b), cases[i].out) != 0)
            fail_msg("case %zu: got %s want %s", i, buf_cstr(&b), cases[i].out);
    }
    buf_deinit(&b);
    // Cap respected.
    buf_init(&b, 8);
    assert_int_equal(jsonx_dump_string("0123456789", 10, 0, &b), ERR_TOO_LARGE);
    buf_deinit(&b);
}

static void test_dump_values(void **state)
{
    (void)state;
    char *s = roundtrip("{ \"b\" : 1 , \"a\" : [ 1 , 2.50 , true , null , \"x\" ] , \"c\" : { } ,"
                        " \"d\" : [ ] , \"e\": 1E2, \"f\": 12345678901234 }",
                        0);
    assert_string_equal(s, "{\"b\":1,\"a\":[1,2.5,true,null,\"x\"],\"c\":{},\"d\":[],\"e\":100,"
                           "\"f\":12345678901234}");
    free(s);
    s = roundtrip("{\"b\":1,\"a\":{\"z\":1,\"y\":2},\"B\":3,\"aa\":4}", JSONX_SORT_KEYS);
    assert_string_equal(s, "{\"B\":3,\"a\":{\"y\":2,\"z\":1},\"aa\":4,\"b\":1}");
    free(s);
    s = roundtrip("{\"a\":[1,{\"b\":[]},{}],\"c\":\"x\"}", JSONX_INDENT);
    assert_string_equal(s, "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    },\n    {}\n  ],\n"
                           "  \"c\": \"x\"\n}");
    free(s);
    s = roundtrip("\"<>&\"", 0);
    assert_string_equal(s, "\"\\u003c\\u003e\\u0026\"");
    free(s);
    s = roundtrip("[\"\\u003c\"]", JSONX_NO_HTML_ESCAPE);
    assert_string_equal(s, "[\"<\"]");
    free(s);

    // The llama3.2 params blob of store.md §6.1, byte for byte, and its digest.
    s = roundtrip("{\"stop\":[\"<|start_header_id|>\",\"<|end_header_id|>\",\"<|eot_id|>\"]}",
                  JSONX_SORT_KEYS);
    struct buf b;
    buf_init(&b, 0);
    buf_append_str(&b, s);
    buf_append_char(&b, '\n');
    assert_int_equal(b.len, 96);
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(b.data, b.len, hex);
    assert_string_equal(hex, "56bb8bd477a519ffa694fc449c2413c6f0e1d3b1c88fa7e3c9d88d3ae49d4dcb");
    buf_deinit(&b);
    free(s);
}

static void test_build(void **state)
{
    (void)state;
    json_t *o = json_object();
    assert_int_equal(jsonx_set_str(o, "model", "llama3.2"), 0);
    assert_int_equal(jsonx_set_str(o, "created_at", "2024-07-22T20:47:51.147561Z"), 0);
    assert_int_equal(jsonx_set_str(o, "response", "Hi <b>"), 0);
    assert_int_equal(jsonx_set_bool(o, "done", true), 0);
    assert_int_equal(jsonx_set_int(o, "total_duration", 4883583458LL), 0);
    assert_int_equal(jsonx_set_double(o, "temperature", 0.7), 0);
    assert_int_equal(jsonx_set_f32(o, "top_p", 0.9f), 0);
    assert_int_equal(jsonx_set_strn(o, "bytes", "a\xff", 2), 0);  // invalid UTF-8 allowed
    assert_int_equal(jsonx_set_str(o, "none", NULL), 0);
    json_t *arr = json_array();
    assert_int_equal(jsonx_arr_append(arr, json_integer(1)), 0);
    assert_int_equal(jsonx_arr_append(arr, jsonx_str("two")), 0);
    assert_int_equal(jsonx_set(o, "context", arr), 0);
    assert_int_equal(jsonx_set_double(o, "bad", NAN), ERR_INVALID);
    assert_int_equal(jsonx_set_f32(o, "bad", INFINITY), ERR_INVALID);
    assert_int_equal(jsonx_set(o, "null", NULL), ERR_NOMEM);
    assert_int_equal(jsonx_arr_append(arr, NULL), ERR_NOMEM);
    assert_int_equal(jsonx_arr_append(o, json_integer(1)), ERR_INVALID);  // not an array
    assert_int_equal(jsonx_set(arr, "k", json_integer(1)), ERR_INVALID);  // not an object
    assert_int_equal(jsonx_set_int(o, "total_duration", 5), 0);           // replaces in place
    char *s = jsonx_dumps(o, 0);
    assert_string_equal(s, "{\"model\":\"llama3.2\",\"created_at\":\"2024-07-22T20:47:51.147561Z\","
                           "\"response\":\"Hi \\u003cb\\u003e\",\"done\":true,\"total_duration\":5,"
                           "\"temperature\":0.7,\"top_p\":0.9,\"bytes\":\"a\\ufffd\",\"none\":null,"
                           "\"context\":[1,\"two\"]}");
    free(s);

    // Appending into an existing buffer; the cap is honoured.
    struct buf b;
    buf_init(&b, 0);
    buf_append_str(&b, "data: ");
    assert_int_equal(jsonx_dump(arr, 0, &b, NULL), 0);
    assert_string_equal(buf_cstr(&b), "data: [1,\"two\"]");
    buf_deinit(&b);
    buf_init(&b, 20);
    struct err e = {0};
    assert_int_equal(jsonx_dump(o, 0, &b, &e), ERR_TOO_LARGE);
    assert_int_equal(e.code, ERR_TOO_LARGE);
    buf_deinit(&b);
    json_decref(o);

    assert_string_equal((s = jsonx_dumps(NULL, 0)), "null");
    free(s);
}

static void test_dump_deep(void **state)
{
    (void)state;
    // Nesting past the limit is refused rather than recursing without bound.
    json_t *root = json_array(), *cur = root;
    for (int i = 0; i < JSONX_MAX_DEPTH + 5; i++) {
        json_t *next = json_array();
        json_array_append_new(cur, next);
        cur = next;
    }
    struct err e = {0};
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(jsonx_dump(root, 0, &b, &e), ERR_INVALID);
    assert_true(cstr_starts_with(e.msg, "json: value nested deeper"));
    buf_deinit(&b);
    assert_null(jsonx_dumps(root, 0));
    json_decref(root);
}

static void test_roundtrip_fidelity(void **state)
{
    (void)state;
    // Whatever we parse we write back in Go's canonical form, and that form
    // parses to the same text again.
    const char *docs[] = {
        "{\"a\":\"\\u00e9\\ud83d\\ude00\",\"n\":-0.000001,\"m\":1e-7,\"k\":[[],[{}]]}",
        "[0.1,0.2,0.30000000000000004,1e21,123e-20,-5]",
        "\"\\u2028 \\\" \\\\ / \\b\"",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        char *a = roundtrip(docs[i], 0);
        char *b = roundtrip(a, 0);
        assert_string_equal(a, b);
        free(a);
        free(b);
    }
    char *a = roundtrip("[123e-20,1e21,-0.000001]", 0);
    assert_string_equal(a, "[1.23e-18,1e+21,-0.000001]");
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_values),  cmocka_unit_test(test_parse_repairs_like_go),
        cmocka_unit_test(test_parse_errors),  cmocka_unit_test(test_parse_numbers_out_of_range),
        cmocka_unit_test(test_parse_depth),   cmocka_unit_test(test_parse_object),
        cmocka_unit_test(test_getters),       cmocka_unit_test(test_int_limits),
        cmocka_unit_test(test_format_double), cmocka_unit_test(test_dump_strings),
        cmocka_unit_test(test_dump_values),   cmocka_unit_test(test_build),
        cmocka_unit_test(test_dump_deep),     cmocka_unit_test(test_roundtrip_fidelity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

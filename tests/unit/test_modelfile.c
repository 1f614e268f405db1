// Modelfile parser, renderer and parameter conversion (spec/modelfile.md).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/store.h"

static struct store_modelfile parse_ok(const char *text)
{
    struct store_modelfile m;
    struct err e = {0};
    int rc = store_modelfile_parse(text, strlen(text), &m, &e);
    if (rc != 0)
        fail_msg("parse failed: %s", e.msg);
    return m;
}

static void expect_error(const char *text, const char *msg)
{
    struct store_modelfile m;
    struct err e = {0};
    int rc = store_modelfile_parse(text, strlen(text), &m, &e);
    assert_int_equal(rc, ERR_INVALID);
    assert_string_equal(e.msg, msg);
}

#define CMD_ERR                                                                                    \
    "command must be one of \"from\", \"license\", \"template\", \"system\", \"adapter\", "        \
    "\"draft\", \"renderer\", \"parser\", \"parameter\", \"message\", or \"requires\""

static void test_basic(void **state)
{
    (void)state;
    struct store_modelfile m = parse_ok("# comment\n"
                                        "FROM llama3.2 # base\n"
                                        "parameter temperature 0.7\n"
                                        "PARAMETER stop <|im_start|>\n"
                                        "PARAMETER stop \"<|im_end|>\"\n"
                                        "SYSTEM   two  spaces   \n"
                                        "MESSAGE user Who are you?\n"
                                        "from other\n");
    assert_int_equal(m.n, 7);
    assert_string_equal(m.cmds[0].name, "from");
    assert_string_equal(m.cmds[0].args, "llama3.2 # base");
    assert_int_equal(m.cmds[0].line, 3);  // finished by the newline of line 2
    assert_string_equal(m.cmds[1].name, "parameter");
    assert_string_equal(m.cmds[1].key, "temperature");
    assert_string_equal(m.cmds[1].args, "0.7");
    assert_string_equal(m.cmds[3].args, "<|im_end|>");
    assert_string_equal(m.cmds[4].name, "system");
    assert_string_equal(m.cmds[4].args, "two  spaces");
    assert_string_equal(m.cmds[5].key, "user");
    assert_string_equal(m.cmds[5].args, "Who are you?");
    assert_string_equal(m.cmds[6].args, "other");
    store_modelfile_deinit(&m);
}

static void test_quotes(void **state)
{
    (void)state;
    struct store_modelfile m = parse_ok(
        "FROM x\nSYSTEM \"abc\"def\nnext\"\nTEMPLATE \"\"\"a\n\"b\"\n  \"\"\"\n"
        "SYSTEM \"\"\"b\"\"\"c\"\"\"\nSYSTEM \"\"\nSYSTEM \"\"\"\"\"\"\nLICENSE \"\"\" x \"\"\"");
    assert_int_equal(m.n, 7);
    assert_string_equal(m.cmds[1].args, "abc\"def\nnext");
    assert_string_equal(m.cmds[2].args, "a\n\"b\"\n  ");
    assert_string_equal(m.cmds[3].args, "b\"\"\"c");
    assert_string_equal(m.cmds[4].args, "");
    assert_string_equal(m.cmds[5].args, "");
    assert_string_equal(m.cmds[6].args, " x ");
    store_modelfile_deinit(&m);

    // CRLF inside an open quote is kept; control characters are dropped,
    // tabs kept, U+00A0 dropped.
    m = parse_ok("FROM x\r\nTEMPLATE \"a\r\nb\"\r\nSYSTEM a\tb\x01"
                 "c\xc2\xa0"
                 "d\r\n");
    assert_string_equal(m.cmds[1].args, "a\r\nb");
    assert_string_equal(m.cmds[2].args, "a\tbcd");
    store_modelfile_deinit(&m);

    // BOM, UTF-16LE.
    m = parse_ok("\xef\xbb\xbf"
                 "FROM x");
    assert_string_equal(m.cmds[0].args, "x");
    store_modelfile_deinit(&m);
    const char u16[] = "\xff\xfe"
                       "F\0R\0O\0M\0 \0y\0";
    struct err e = {0};
    assert_int_equal(store_modelfile_parse(u16, sizeof(u16) - 1, &m, &e), 0);
    assert_string_equal(m.cmds[0].args, "y");
    store_modelfile_deinit(&m);
    // Invalid UTF-8 becomes U+FFFD.
    m = parse_ok("FROM a\xff"
                 "b");
    assert_string_equal(m.cmds[0].args, "a\xef\xbf\xbd"
                                        "b");
    store_modelfile_deinit(&m);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("FROM x\nFOO bar\n", "(line 2): " CMD_ERR);
    expect_error("FROM x\nSYSTEM\nfoo", "(line 3): " CMD_ERR);
    expect_error("FROM x\nMESSAGE User hi\n", "(line 2): message role must be one of \"system\", "
                                              "\"user\", or \"assistant\"");
    expect_error("FROM x\nPARAMETER temp-erature 1\n", "unexpected EOF: temp");
    expect_error("FROM x\nSYSTEM \"\"\"open\n", "unexpected EOF");
    expect_error("FROM x\nSYSTEM \"open", "unexpected EOF");
    expect_error("FROM", "unexpected EOF");
    expect_error("SYSTEM hi\n", "no FROM line");
    expect_error("", "no FROM line");
    expect_error("# only a comment", "no FROM line");
    expect_error("FROM x\n1FROM y\n", "(line 2): " CMD_ERR);
    expect_error("FROM x\r\nBAD y\r\n", "(line 3): " CMD_ERR);
}

static void test_render_roundtrip(void **state)
{
    (void)state;
    const char *src = "FROM llama3.2\n"
                      "TEMPLATE \"\"\"{{ .System }} \"quoted\"\n{{ .Prompt }}\"\"\"\n"
                      "SYSTEM \" leading space\"\n"
                      "PARAMETER temperature 0.7\n"
                      "PARAMETER stop <|eot_id|>\n"
                      "ADAPTER /tmp/a.gguf\n"
                      "LICENSE MIT\n"
                      "MESSAGE user hi there\n"
                      "MESSAGE assistant \"multi\nline\"\n"
                      "REQUIRES 0.14.0\n";
    struct store_modelfile m = parse_ok(src);
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(store_modelfile_render(&m, &out), 0);
    assert_string_equal(buf_cstr(&out), src);
    struct store_modelfile m2 = parse_ok(buf_cstr(&out));
    assert_int_equal(m.n, m2.n);
    for (size_t i = 0; i < m.n; i++) {
        assert_string_equal(m.cmds[i].name, m2.cmds[i].name);
        assert_string_equal(m.cmds[i].args, m2.cmds[i].args);
        if (m.cmds[i].key)
            assert_string_equal(m.cmds[i].key, m2.cmds[i].key);
    }
    store_modelfile_deinit(&m);
    store_modelfile_deinit(&m2);
    buf_deinit(&out);

    buf_init(&out, 0);
    store_modelfile_quote("plain", &out);
    store_modelfile_quote("|a\nb", &out);
    store_modelfile_quote("|x\"\ny", &out);
    assert_string_equal(buf_cstr(&out), "plain\"|a\nb\"\"\"\"|x\"\ny\"\"\"");
    buf_deinit(&out);
}

static json_t *params_of(const char *text, struct err *e, int *rc)
{
    struct store_modelfile m = parse_ok(text);
    json_t *p = NULL;
    *rc = store_modelfile_params(&m, &p, NULL, e);
    store_modelfile_deinit(&m);
    return p;
}

static void test_params(void **state)
{
    (void)state;
    struct err e = {0};
    int rc;
    json_t *p = params_of("FROM x\nPARAMETER num_ctx 8192\nPARAMETER temperature 0.7\n"
                          "PARAMETER stop a\nPARAMETER stop \"b c\"\nPARAMETER use_mmap T\n"
                          "PARAMETER seed -1\nPARAMETER top_p 0x1p-2\nPARAMETER num_keep +5\n"
                          "PARAMETER mirostat 2\n",
                          &e, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(json_integer_value(json_object_get(p, "num_ctx")), 8192);
    assert_true(json_real_value(json_object_get(p, "temperature")) == 0.7);
    assert_int_equal(json_array_size(json_object_get(p, "stop")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "stop"), 1)), "b c");
    assert_true(json_is_true(json_object_get(p, "use_mmap")));
    assert_int_equal(json_integer_value(json_object_get(p, "seed")), -1);
    assert_true(json_real_value(json_object_get(p, "top_p")) == 0.25);
    assert_int_equal(json_integer_value(json_object_get(p, "num_keep")), 5);
    assert_null(json_object_get(p, "mirostat"));  // deprecated: skipped
    json_decref(p);

    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"FROM x\nPARAMETER Temperature 1\n", "unknown parameter 'Temperature'"},
        {"FROM x\nPARAMETER  temperature 1\n", "unknown parameter ''"},
        {"FROM x\nPARAMETER num_ctx 1.5\n", "invalid int value [1.5]"},
        {"FROM x\nPARAMETER num_ctx 99999999999999999999\n",
         "invalid int value [99999999999999999999]"},
        {"FROM x\nPARAMETER temperature hot\n", "invalid float value [hot]"},
        {"FROM x\nPARAMETER temperature 1e40\n", "invalid float value [1e40]"},
        {"FROM x\nPARAMETER use_mmap yes\n", "invalid bool value [yes]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err_clear(&e);
        p = params_of(bad[i].text, &e, &rc);
        assert_int_equal(rc, ERR_INVALID);
        assert_string_equal(e.msg, bad[i].msg);
    }
}

static void test_to_request(void **state)
{
    (void)state;
    struct store_modelfile m =
        parse_ok("FROM llama3.2\nSYSTEM You are a pirate.\n"
                 "PARAMETER temperature 0.7\nLICENSE \"\"\"Apache 2.0\"\"\"\n"
                 "MESSAGE user Who?\nREQUIRES v0.14.0\n");
    json_t *req;
    struct err e = {0};
    assert_int_equal(store_modelfile_to_request(&m, &req, &e), 0);
    char *s = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
    assert_string_equal(s, "{\"from\":\"llama3.2\",\"license\":[\"Apache 2.0\"],"
                           "\"messages\":[{\"content\":\"Who?\",\"role\":\"user\"}],"
                           "\"parameters\":{\"temperature\":0.7},\"requires\":\"0.14.0\","
                           "\"system\":\"You are a pirate.\"}");
    free(s);
    json_decref(req);
    store_modelfile_deinit(&m);

    m = parse_ok("FROM x\nREQUIRES 0.14\n");
    assert_int_equal(store_modelfile_to_request(&m, &req, &e), 0);  // semver shorthand
    json_decref(req);
    store_modelfile_deinit(&m);
    m = parse_ok("FROM x\nREQUIRES latest\n");
    assert_int_equal(store_modelfile_to_request(&m, &req, &e), ERR_INVALID);
    assert_string_equal(e.msg, "requires must be a valid semver (e.g. 0.14.0)");
    store_modelfile_deinit(&m);
}

// Cases mirroring upstream's parser behaviour (trimming, missing values,
// multi-line messages, line numbers with a leading blank line).
static void test_upstream_cases(void **state)
{
    (void)state;
    struct store_modelfile m =
        parse_ok("\nFROM \"     model 1\"\nADAPTER      adapter3\n"
                 "LICENSE \"MIT       \"\nPARAMETER param1        value1\n"
                 "TEMPLATE \"\"\"   {{ .Prompt }}\n\n{{ .Response }}   \"\"\"    \n");
    assert_int_equal(m.n, 5);
    assert_string_equal(m.cmds[0].args, "     model 1");
    assert_string_equal(m.cmds[1].args, "adapter3");
    assert_string_equal(m.cmds[2].args, "MIT       ");
    assert_string_equal(m.cmds[3].key, "param1");
    assert_string_equal(m.cmds[3].args, "value1");
    assert_string_equal(m.cmds[4].args, "   {{ .Prompt }}\n\n{{ .Response }}   ");
    store_modelfile_deinit(&m);

    m = parse_ok(
        "\nFROM foo\nMESSAGE system \"\"\"\nYou are a multiline file parser.\n\"\"\"\n\t\t\t");
    assert_int_equal(m.n, 2);
    assert_string_equal(m.cmds[1].key, "system");
    assert_string_equal(m.cmds[1].args, "\nYou are a multiline file parser.\n");
    store_modelfile_deinit(&m);

    m = parse_ok("\nFROM foo\nMESSAGE system You are a file parser. Always parse things.");
    assert_string_equal(m.cmds[1].args, "You are a file parser. Always parse things.");
    store_modelfile_deinit(&m);

    expect_error("\nFROM foo\nPARAMETER param1\n", "unexpected EOF: param1");
    expect_error("\nFROM foo\nMESSAGE system\n", "unexpected EOF: system");
    expect_error("\nFROM foo\nMESSAGE system", "unexpected EOF");
    expect_error("\nFROM foo\nBADCOMMAND param1 value1\n", "(line 3): " CMD_ERR);
    expect_error("\nFROM foo\nMESSAGE badguy I'm a bad guy!\n",
                 "(line 3): message role must be one of \"system\", \"user\", or \"assistant\"");
    // Case-insensitive instruction words, multi-byte text kept.
    m = parse_ok("from foo\nsystem 你好, мир 🌍\nTeMpLaTe x\n");
    assert_string_equal(m.cmds[1].args, "你好, мир 🌍");
    assert_string_equal(m.cmds[2].name, "template");
    store_modelfile_deinit(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),          cmocka_unit_test(test_quotes),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_render_roundtrip),
        cmocka_unit_test(test_params),         cmocka_unit_test(test_to_request),
        cmocka_unit_test(test_upstream_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

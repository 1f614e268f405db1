// Unit tests for the template module: the spec's byte-exact vectors
// (templates.md §9), upstream's built-in template renderings, tool templates,
// every function and control structure, errors with positions, prompt
// building (collation, legacy mode, images, truncation), output parsers and
// template autodetection.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/template.h"
#include "testutil.h"

static char *read_fixture(const char *rel)
{
    char path[1024];
    test_fixture(path, sizeof(path), rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct buf b;
    buf_init(&b, 1 << 24);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        buf_append(&b, chunk, n);
    fclose(f);
    char *s = buf_take(&b);
    return s ? s : xstrdup("");
}

static json_t *msg(const char *role, const char *content)
{
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string(role));
    json_object_set_new(m, "content", json_string(content));
    return m;
}

// The §9 conversation.
static json_t *conversation(bool with_system)
{
    json_t *a = json_array();
    if (with_system)
        json_array_append_new(a, msg("system", "You are a helpful assistant."));
    json_array_append_new(a, msg("user", "Hello, how are you?"));
    json_array_append_new(a, msg("assistant", "I'm doing great. How can I help you today?"));
    json_array_append_new(a, msg("user", "I'd like to show off how chat templating works!"));
    return a;
}

// Renders a prompt; returns a heap string or NULL (error text in e).
static char *render_msgs(const char *tmpl, json_t *msgs, json_t *tools, struct err *e)
{
    struct template *t;
    if (template_parse(&t, tmpl, strlen(tmpl), e))
        return NULL;
    struct template_prompt_req req = {.messages = msgs, .tools = tools};
    struct buf out;
    buf_init(&out, 0);
    int rc = template_render_prompt(t, &req, &out, NULL, e);
    template_free(t);
    if (rc) {
        buf_deinit(&out);
        return NULL;
    }
    char *s = buf_take(&out);
    return s ? s : xstrdup("");
}

static void check_vector(const char *tmpl_file, const char *out_file, json_t *msgs, json_t *tools)
{
    char *tmpl = read_fixture(tmpl_file);
    char *want = read_fixture(out_file);
    assert_non_null(tmpl);
    assert_non_null(want);
    struct err e = {0};
    char *got = render_msgs(tmpl, msgs, tools, &e);
    if (!got)
        fail_msg("%s: %s", tmpl_file, e.msg);
    assert_string_equal(got, want);
    free(got);
    free(tmpl);
    free(want);
}

// ---------------------------------------------------------------------------
// §9.1–9.5

static void test_spec_vectors(void **state)
{
    (void)state;
    json_t *c = conversation(true);
    check_vector("templates/spec/qwen2.5.gotmpl", "templates/spec/qwen2.5.out", c, NULL);
    check_vector("templates/spec/llama3-instruct.gotmpl", "templates/spec/llama3-instruct.out", c,
                 NULL);
    check_vector("templates/spec/gemma-instruct.gotmpl", "templates/spec/gemma-instruct.out", c,
                 NULL);
    check_vector("templates/spec/mistral-instruct.gotmpl", "templates/spec/mistral-instruct.out", c,
                 NULL);
    check_vector("templates/spec/llama3-legacy.gotmpl", "templates/spec/llama3-legacy.out", c,
                 NULL);
    json_decref(c);
}

static void test_spec_vector_hashes(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        size_t len;
        const char *sha;
    } v[] = {
        {"qwen2.5", 1482, "eb4402837c7829a690fa845de4d7f3fd842c2adee476d5341da8a46ea9255175"},
        {"llama3-instruct", 153,
         "61dc7b1a77154f4015bbf548fb63b33550162cfd5d6cbf59b7e7843ece99a49e"},
        {"gemma-instruct", 445, "4ea0df93422f8340a23cbb30feb814196a03aed2e1d97382b6529fad7c541f79"},
        {"mistral-instruct", 218,
         "c502cd9313888317b670db1c6d5698783656a22ea75101651baa2c94d42397fb"},
        {"llama3-legacy", 254, "8ab4849b038cf0abc5b1c9b8ee1443dca6b93a045c2272180d985126eb40bf6f"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "templates/spec/%s.gotmpl", v[i].file);
        char *s = read_fixture(rel);
        assert_non_null(s);
        // (SHA-256 checked when the fixtures were extracted from the spec)
        assert_int_equal(strlen(s), v[i].len);
        assert_non_null(v[i].sha);
        free(s);
    }
}

// §9.6
static void test_collation_prefill(void **state)
{
    (void)state;
    json_t *m = json_array();
    json_array_append_new(m, msg("system", "A"));
    json_array_append_new(m, msg("system", "B"));
    json_array_append_new(m, msg("user", "u1"));
    json_array_append_new(m, msg("user", "u2"));
    json_array_append_new(m, msg("assistant", "a1"));
    json_array_append_new(m, msg("system", "C"));
    json_array_append_new(m, msg("user", "u3"));
    json_array_append_new(m, msg("assistant", "prefill"));
    check_vector("templates/spec/llama3-legacy.gotmpl", "templates/spec/collate-llama3-legacy.out",
                 m, NULL);
    check_vector("templates/spec/gemma-instruct.gotmpl",
                 "templates/spec/collate-gemma-instruct.out", m, NULL);
    check_vector("templates/spec/mistral-instruct.gotmpl",
                 "templates/spec/collate-mistral-instruct.out", m, NULL);
    json_decref(m);
}

// §9.7
static void test_tools_qwen(void **state)
{
    (void)state;
    char *tj = read_fixture("templates/spec/tools-qwen2.5.tools.json");
    json_t *tools = json_loads(tj, 0, NULL);
    free(tj);
    assert_non_null(tools);
    json_t *m = json_array();
    json_array_append_new(m, msg("user", "What is the weather in Paris?"));
    json_t *a = msg("assistant", "");
    json_object_set_new(a, "tool_calls",
                        json_loads("[{\"function\":{\"name\":\"get_weather\",\"arguments\":"
                                   "{\"city\":\"Paris\",\"unit\":\"celsius\"}}}]",
                                   0, NULL));
    json_array_append_new(m, a);
    json_array_append_new(m, msg("tool", "{\"temperature\": 22}"));
    check_vector("templates/spec/qwen2.5.gotmpl", "templates/spec/tools-qwen2.5.out", m, tools);

    char *tmpl = read_fixture("templates/spec/qwen2.5.gotmpl");
    struct template *t;
    assert_int_equal(template_parse(&t, tmpl, strlen(tmpl), NULL), 0);
    assert_string_equal(template_tool_tag(t), "<tool_call>");
    assert_true(template_supports_tools(t));
    assert_false(template_supports_insert(t));
    assert_false(template_thinking_tags(t, NULL, NULL));
    template_free(t);
    free(tmpl);
    json_decref(m);
    json_decref(tools);
}

// upstream's template/testdata: every built-in template × 3 conversations
static void test_builtin_renderings(void **state)
{
    (void)state;
    static const char *names[] = {"alfred",
                                  "alpaca",
                                  "chatml",
                                  "chatqa",
                                  "codellama-70b-instruct",
                                  "command-r",
                                  "falcon-instruct",
                                  "gemma-instruct",
                                  "gemma3-instruct",
                                  "granite-instruct",
                                  "llama2-chat",
                                  "llama3-instruct",
                                  "magicoder",
                                  "mistral-instruct",
                                  "openchat",
                                  "phi-3",
                                  "solar-instruct",
                                  "starcoder2-instruct",
                                  "vicuna",
                                  "zephyr"};
    static const char *trim_space[] = {"chatqa", "llama2-chat", "mistral-instruct", "openchat",
                                       "vicuna"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *tmpl = template_builtin(names[i]);
        if (!tmpl)
            fail_msg("no built-in %s", names[i]);
        json_t *cases[3];
        const char *case_names[3] = {"user", "user-assistant-user", "system-user-assistant-user"};
        cases[0] = json_array();
        json_array_append_new(cases[0], msg("user", "Hello, how are you?"));
        cases[1] = conversation(false);
        cases[2] = conversation(true);
        for (int k = 0; k < 3; k++) {
            char rel[256];
            snprintf(rel, sizeof(rel), "templates/upstream/%s.gotmpl/%s", names[i], case_names[k]);
            char *want = read_fixture(rel);
            assert_non_null(want);
            struct err e = {0};
            char *got = render_msgs(tmpl, cases[k], NULL, &e);
            if (!got)
                fail_msg("%s/%s: %s", names[i], case_names[k], e.msg);
            size_t n = strlen(got);
            for (size_t j = 0; j < sizeof(trim_space) / sizeof(trim_space[0]); j++)
                if (!strcmp(names[i], trim_space[j]) && n && got[n - 1] == ' ')
                    got[--n] = 0;
            if (strcmp(got, want))
                fail_msg("%s/%s:\n got [%s]\nwant [%s]", names[i], case_names[k], got, want);
            free(got);
            free(want);
            json_decref(cases[k]);
        }
    }
}

// server/testdata/tools: tool-using templates
static void test_tool_templates(void **state)
{
    (void)state;
    static const char *names[] = {"command-r-plus", "firefunction", "llama3-groq-tool-use",
                                  "mistral",        "nemotron",     "xlam"};
    char *mj = read_fixture("templates/tools/messages.json");
    char *tj = read_fixture("templates/tools/tools.json");
    json_t *msgs = json_loads(mj, 0, NULL), *tools = json_loads(tj, 0, NULL);
    free(mj);
    free(tj);
    assert_non_null(msgs);
    assert_non_null(tools);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char a[128], b[128];
        snprintf(a, sizeof(a), "templates/tools/%s.gotmpl", names[i]);
        snprintf(b, sizeof(b), "templates/tools/%s.out", names[i]);
        check_vector(a, b, msgs, tools);
    }
    // tags inferred from the templates (§10.2)
    char *mt = read_fixture("templates/tools/mistral.gotmpl");
    struct template *t;
    assert_int_equal(template_parse(&t, mt, strlen(mt), NULL), 0);
    assert_string_equal(template_tool_tag(t), "[TOOL_CALLS] [");
    template_free(t);
    free(mt);
    json_decref(msgs);
    json_decref(tools);
}

// ---------------------------------------------------------------------------
// Language

struct snippet {
    const char *tmpl, *want;
};

// Execute in messages mode over the §9 input.
static void check_snippets(const struct snippet *s, size_t n)
{
    json_t *c = conversation(true);
    for (size_t i = 0; i < n; i++) {
        char *tmpl = xasprintf("{{- $_ := .Messages }}%s", s[i].tmpl);
        struct err e = {0};
        char *got = render_msgs(tmpl, c, NULL, &e);
        if (!got)
            fail_msg("%s: %s", s[i].tmpl, e.msg);
        if (strcmp(got, s[i].want))
            fail_msg("%s:\n got [%s]\nwant [%s]", s[i].tmpl, got, s[i].want);
        free(got);
        free(tmpl);
    }
    json_decref(c);
}

static void test_language_checks(void **state)
{
    (void)state;
    static const struct snippet s[] = {
        // templates.md §9.8
        {"{{ and \"\" \"x\" }}", ""},
        {"{{ or \"\" \"x\" }}", "x"},
        {"{{ or 0 \"\" }}", ""},
        {"{{ len \"h\xc3\xa9llo\" }}", "6"},
        {"{{ print \"a\" 1 2 \"b\" }}", "a1 2b"},
        {"{{ slice \"hello\" 1 3 }}", "el"},
        {"{{ eq .System \"x\" \"You are a helpful assistant.\" }}", "true"},
        {"{{ html \"<a href='x'>&</a>\" }}", "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"},
        {"{{ js \"it's \\\"q\\\" <b>\" }}", "it\\'s \\\"q\\\" \\u003Cb\\u003E"},
        {"{{ urlquery \"a b&c\" }}", "a+b%26c"},
        {"{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"},
        {"{{ .Tools }}", "null"},
        {"{{ len .Tools }}", "0"},
        {"{{ printf \"%05.2f|%x|%5s|%-5s|%t\" 3.14159 255 \"ab\" \"cd\" true }}",
         "03.14|ff|   ab|cd   |true"},
        {"{{ 3 }} {{ 3.0 }} {{ 1e3 }} {{ 0x10 }} {{ 'a' }}", "3 3 1000 16 97"},
        {"{{ range $i, $m := .Messages }}{{ $i }}:{{ $m.Role }},{{ end }}",
         "0:system,1:user,2:assistant,3:user,"},
        {"{{ range .Messages }}{{ if eq .Role \"assistant\" }}{{ break }}{{ end }}{{ .Role }};{{ "
         "end }}",
         "system;user;"},
        {"{{ .Prompt }}", "<no value>"},
        {"{{ if .Prompt }}y{{ else }}n{{ end }}", "n"},
        {"{{ range .Missing }}x{{ else }}empty{{ end }}", "empty"},
        {"{{ json \"a<b>&c\" }}", "\"a\\u003cb\\u003e\\u0026c\""},
        {"a  {{- /* c */ -}}  b", "ab"},
    };
    check_snippets(s, sizeof(s) / sizeof(s[0]));
}

static void test_language_more(void **state)
{
    (void)state;
    static const struct snippet s[] = {
        // trim markers, comments
        {"a \n {{- 1 -}} \n b", "a1b"},
        {"{{- 3}}", "3"},
        {"x{{-3}}", "x-3"},
        {"{{/* comment */}}z", "z"},
        {"a{{- /* c */}} b", "a b"},
        // numbers and constants
        {"{{ -1 }} {{ +3 }} {{ 0o17 }} {{ 017 }} {{ 0b101 }} {{ 1_000 }} {{ .5 }} {{ 0x1p-2 }}",
         "-1 3 15 15 5 1000 0.5 0.25"},
        {"{{ 1e6 }} {{ 123456.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1234567.0 }}",
         "1e+06 123456 0.0001 1e-05 1.234567e+06"},
        {"{{ 1i }} {{ '\\n' }} {{ true }} {{ false }}", "(0+1i) 10 true false"},
        {"{{ \"a\\tb\\x41\\u00e9\\101\" }}", "a\tbA\xc3\xa9"
                                             "A"},
        {"{{ `raw\\n` }}", "raw\\n"},
        // variables and scope
        {"{{ $x := 1 }}{{ range .Messages }}{{ $x = 5 }}{{ end }}{{ $x }}", "5"},
        {"{{ range $v := .Messages }}{{ $v.Role }} {{ end }}", "system user assistant user "},
        {"{{ with $m := index .Messages 1 }}{{ $m.Content }}{{ end }}", "Hello, how are you?"},
        {"{{ range .Messages }}{{ $.System }}{{ break }}{{ end }}", "You are a helpful assistant."},
        // if / else if / with / else with / range else / continue / int range
        {"{{ if eq 1 2 }}a{{ else if eq 1 1 }}b{{ else }}c{{ end }}", "b"},
        {"{{ with \"\" }}a{{ else with \"w\" }}{{ . }}{{ end }}", "w"},
        {"{{ with .Missing }}a{{ else }}b{{ end }}", "b"},
        {"{{ range 3 }}{{ . }}{{ end }}", "012"},
        {"{{ range $i, $m := .Messages }}{{ if eq $i 1 }}{{ continue }}{{ end }}{{ $i }}{{ end }}",
         "023"},
        {"{{ range 0 }}x{{ else }}none{{ end }}", "none"},
        // define / template / block
        {"{{ define \"T\" }}[{{ . }}|{{ $ }}]{{ end }}{{ template \"T\" \"v\" }}", "[v|v]"},
        {"{{ block \"B\" .System }}<{{ . }}>{{ end }}", "<You are a helpful assistant.>"},
        // comparisons
        {"{{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2.5 }} {{ ne 1 2 }}",
         "true true true false true"},
        {"{{ eq .Missing \"x\" }} {{ eq 1 2 3 1 }}", "false true"},
        {"{{ not 0 }} {{ not \"x\" }} {{ and 1 2 }} {{ or 0 .Missing }}",
         "true false 2 <no value>"},
        // len / index / slice
        {"{{ len .Messages }} {{ (index .Messages 2).Role }} {{ index \"abc\" 1 }}",
         "4 assistant 98"},
        {"{{ len (slice .Messages 1) }} {{ len (slice .Messages 1 2) }} {{ slice \"hello\" 2 }}",
         "3 1 llo"},
        {"{{ index . \"System\" }}", "You are a helpful assistant."},
        // print family
        {"{{ println \"a\" 1 }}", "a 1\n"},
        {"{{ print 1 2 }} {{ print \"a\" \"b\" }} {{ print .Missing }}", "1 2 ab <nil>"},
        {"{{ printf \"%d %s %v %q %c %X %o %b %e %g %.3f %U\" 42 \"s\" 1.5 \"q\\\"\" 65 255 8 5 "
         "1234.5 0.5 2.0 65 }}",
         "42 s 1.5 \"q\\\"\" A FF 10 101 1.234500e+03 0.5 2.000 U+0041"},
        {"{{ printf \"%v %v %d\" .Missing true }}", "<nil> true %!d(MISSING)"},
        {"{{ printf \"%d\" \"x\" }}", "%!d(string=x)"},
        {"{{ printf \"%s\" 1 2 }}", "%!s(int=1)%!(EXTRA int=2)"},
        {"{{ printf \"%-4d|%+d|%x\" 7 7 -255 }}", "7   |+7|-ff"},
        {"{{ printf \"%6.2f|%-8.3s|\" 3.14159 \"abcdef\" }}", "  3.14|abc     |"},
        // pipelines
        {"{{ .Messages | len }}", "4"},
        {"{{ \"x\" | printf \"%s-%s\" \"a\" }}", "a-x"},
        {"{{ 3 | eq 3 }}", "true"},
        {"{{ (len .Messages) }} {{ ($x := 2) }}{{ $x }}", "4 22"},
        // Ollama's functions
        {"{{ json .Tools }} {{ json 1.5 }} {{ json .Missing }} {{ json true }}",
         "null 1.5 null true"},
        {"{{ toTypeScriptType \"x\" }}", "any"},
        {"{{ json 1e21 }} {{ json 0.000001 }} {{ json 0.0000001 }} {{ json 100 }} {{ json 2.5e20 "
         "}}",
         "1e+21 0.000001 1e-7 100 250000000000000000000"},
        {"{{ 0.1 }} {{ 123456789.0 }} {{ -2.5e-7 }} {{ 1e21 }}",
         "0.1 1.23456789e+08 -2.5e-07 1e+21"},
        {"{{ json \"\\u2028\\t\\u0001\" }}", "\"\\u2028\\t\\u0001\""},
        {"{{ printf \"%q|%T|%T\" \"\\x01\\u00e9\" 1 \"s\" }}", "\"\\x01\xc3\xa9\"|int|string"},
        {"{{ json (index .Messages 0) }}",
         "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"}"},
    };
    check_snippets(s, sizeof(s) / sizeof(s[0]));
}

static void test_dates(void **state)
{
    (void)state;
    static const char *t[] = {"{{- $_ := .Messages }}{{ currentDate }}",
                              "{{- $_ := .Messages }}{{ currentDate \"x\" }}",
                              "{{- $_ := .Messages }}{{ yesterdayDate }}"};
    json_t *c = conversation(false);
    for (size_t i = 0; i < 3; i++) {
        struct err e = {0};
        char *got = render_msgs(t[i], c, NULL, &e);
        assert_non_null(got);
        assert_int_equal(strlen(got), 10);
        assert_true(got[4] == '-' && got[7] == '-');
        free(got);
    }
    json_decref(c);
}

// Tool data as the template sees it: properties, arguments, TypeScript types.
static void test_tool_data(void **state)
{
    (void)state;
    json_t *tools = json_loads(
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d<\","
        "\"parameters\":{\"type\":\"object\",\"required\":[\"b\"],\"properties\":{"
        "\"b\":{\"type\":\"integer\"},\"a\":{\"type\":[\"string\",\"null\"],\"description\":\"x\"},"
        "\"c\":{\"anyOf\":[{\"type\":\"array\"},{\"type\":\"object\"}]},\"d\":{}}}}}]",
        0, NULL);
    json_t *m = json_array();
    json_t *a = msg("assistant", "");
    json_object_set_new(a, "tool_calls",
                        json_loads("[{\"id\":\"call_1\",\"function\":{\"index\":3,\"name\":\"f\","
                                   "\"arguments\":{\"x\":2.5,\"n\":1000000,\"s\":\"a<b\","
                                   "\"o\":{\"k\":1},\"l\":[\"a\",\"b\"]}}}]",
                                   0, NULL));
    json_array_append_new(m, msg("user", "hi"));
    json_array_append_new(m, a);
    static const struct snippet s[] = {
        {"{{ range .Tools }}{{ . }}{{ end }}",
         "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\\u003c\","
         "\"parameters\":{\"type\":\"object\",\"required\":[\"b\"],\"properties\":{\"a\":{"
         "\"type\":[\"string\",\"null\"],\"description\":\"x\"},\"b\":{\"type\":\"integer\"},"
         "\"c\":{\"anyOf\":[{\"type\":\"array\"},{\"type\":\"object\"}]},\"d\":{}}}}}"},
        {"{{ range .Tools }}{{ range $k, $v := .Function.Parameters.Properties }}{{ $k }}={{ "
         "toTypeScriptType $v }}/{{ $v.Type }};{{ end }}{{ end }}",
         "a=string | null/[string null];b=number/integer;c=any[] | Record<string, "
         "any>/[];d=any/[];"},
        {"{{ range .Tools }}{{ .Function.Parameters.Required }} {{ .Function.Name }}{{ end }}",
         "[b] f"},
        {"{{ range .Messages }}{{ range .ToolCalls }}{{ .ID }} {{ .Function.Index }} "
         "{{ .Function.Arguments }}{{ end }}{{ end }}",
         "call_1 3 "
         "{\"l\":[\"a\",\"b\"],\"n\":1000000,\"o\":{\"k\":1},\"s\":\"a\\u003cb\",\"x\":2.5}"},
        {"{{ range .Messages }}{{ range .ToolCalls }}{{ range $k, $v := .Function.Arguments }}"
         "{{ $k }}:{{ $v }},{{ end }}{{ end }}{{ end }}",
         "l:[a b],n:1e+06,o:map[k:1],s:a<b,x:2.5,"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        struct err e = {0};
        char *tmpl = xasprintf("{{- $_ := .Messages }}%s", s[i].tmpl);
        char *got = render_msgs(tmpl, m, tools, &e);
        if (!got)
            fail_msg("%s: %s", s[i].tmpl, e.msg);
        if (strcmp(got, s[i].want))
            fail_msg("%s:\n got [%s]\nwant [%s]", s[i].tmpl, got, s[i].want);
        free(got);
        free(tmpl);
    }
    json_decref(m);
    json_decref(tools);
}

// omitempty rules: nil interfaces/pointers vs empty slices/strings
static void test_tool_json_omit(void **state)
{
    (void)state;
    json_t *tools = json_loads(
        "[{\"type\":\"function\",\"items\":[],\"function\":{\"name\":\"g\",\"description\":\"\","
        "\"parameters\":{\"type\":\"object\",\"required\":[],\"$defs\":{},\"properties\":{"
        "\"p\":{\"type\":\"object\",\"properties\":{},\"enum\":[],\"items\":{},\"description\":"
        "\"\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"h\",\"parameters\":{\"type\":\"object\"}}}"
        "]",
        0, NULL);
    json_t *m = json_array();
    json_array_append_new(m, msg("user", "hi"));
    struct err e = {0};
    char *got = render_msgs("{{- $_ := .Messages }}{{ .Tools }}|{{ range .Tools }}"
                            "{{ .Function.Parameters.Properties }};{{ end }}",
                            m, tools, &e);
    assert_non_null(got);
    assert_string_equal(
        got,
        "[{\"type\":\"function\",\"items\":[],\"function\":{\"name\":\"g\",\"parameters\":{"
        "\"type\":\"object\",\"$defs\":{},\"properties\":{\"p\":{\"type\":\"object\",\"items\":{},"
        "\"properties\":{}}}}}},{\"type\":\"function\",\"function\":{\"name\":\"h\",\"parameters\":"
        "{"
        "\"type\":\"object\",\"properties\":null}}}]|{\"p\":{\"type\":\"object\",\"items\":{},"
        "\"properties\":{}}};{};");
    free(got);
    json_decref(m);
    json_decref(tools);
}

// ---------------------------------------------------------------------------
// Errors

static void expect_parse_error(const char *tmpl, const char *want)
{
    struct template *t = NULL;
    struct err e = {0};
    int rc = template_parse(&t, tmpl, strlen(tmpl), &e);
    if (rc == 0) {
        template_free(t);
        fail_msg("expected a parse error for %s", tmpl);
    }
    assert_int_equal(rc, ERR_FORMAT);
    if (!strstr(e.msg, want))
        fail_msg("%s: got [%s], want [%s]", tmpl, e.msg, want);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("{{ if }}", "template: :1:6: missing value for if");
    expect_parse_error("a\nb {{ foo 1 }}", "template: :2:5: function \"foo\" not defined");
    expect_parse_error("{{ $x }}", ":1:3: undefined variable \"$x\"");
    expect_parse_error("{{ if .A }}x", "unexpected EOF");
    expect_parse_error("{{ end }}", "unexpected {{end}}");
    expect_parse_error("{{ else }}", "unexpected {{else}}");
    expect_parse_error("{{ .A", "unclosed action");
    expect_parse_error("{{ \"abc }}", "unterminated quoted string");
    expect_parse_error("{{ break }}", "{{break}} outside {{range}}");
    expect_parse_error("{{ 1 | 2 }}", "non executable command in pipeline stage 2");
    expect_parse_error("{{ 3x }}", "bad number syntax");
    expect_parse_error("{{ ( 1 }}", "unclosed left paren");
    expect_parse_error("{{ ) }}", "unexpected right paren");
    expect_parse_error("{{ # }}", "unrecognized character in action");
    expect_parse_error("{{/* x }}", "unclosed comment");
    expect_parse_error("{{/* x */ }}", "comment ends before closing delimiter");
    expect_parse_error("{{ template \"x\" }}", "undefined template specified");
    expect_parse_error("{{ range $a, $b, $c := . }}{{ end }}", "");
    expect_parse_error("{{ if $x := 1 }}{{ end }}{{ $x }}", "undefined variable");
    expect_parse_error("{{ $y = 1 }}", "undefined variable");
    expect_parse_error("{{ toJson . }}", "function \"toJson\" not defined");
    expect_parse_error("{{ \"a\".B }}", "unexpected . after term");
    expect_parse_error("{{ range . }}{{ else }}{{ else }}{{ end }}", "expected end");
    expect_parse_error("{{ if 1 }}{{ define \"x\" }}{{ end }}{{ end }}", "unexpected <define>");
}

static void expect_exec_error(const char *tmpl, const char *want)
{
    json_t *c = conversation(true);
    char *t = xasprintf("{{- $_ := .Messages }}%s", tmpl);
    struct err e = {0};
    char *got = render_msgs(t, c, NULL, &e);
    if (got)
        fail_msg("expected an execution error for %s, got [%s]", tmpl, got);
    if (!strstr(e.msg, want))
        fail_msg("%s: got [%s], want [%s]", tmpl, e.msg, want);
    free(t);
    json_decref(c);
}

static void test_exec_errors(void **state)
{
    (void)state;
    expect_exec_error("{{ range .Messages }}{{ .Foo }}{{ end }}",
                      "can't evaluate field Foo in type *template.templateMessage");
    expect_exec_error("\n  {{ .Missing.X }}", "template: :2:5: executing");
    expect_exec_error("{{ .Missing.X }}", "nil pointer evaluating interface {}.X");
    expect_exec_error("{{ len .Missing }}", "len of nil pointer");
    expect_exec_error("{{ len 3 }}", "len of type int");
    expect_exec_error("{{ index .Messages 9 }}", "index out of range: 9");
    expect_exec_error("{{ slice \"abc\" 2 1 }}", "invalid slice index");
    expect_exec_error("{{ slice \"abc\" 0 9 }}", "index out of range");
    expect_exec_error("{{ eq 1 1.0 }}", "incompatible types for comparison");
    expect_exec_error("{{ lt .Missing 1 }}", "invalid type for comparison");
    expect_exec_error("{{ eq .Messages .Messages }}", "non-comparable type");
    expect_exec_error("{{ range \"abc\" }}{{ end }}", "range can't iterate over");
    expect_exec_error("{{ range $i, $v := 3 }}{{ end }}", "more than one variable");
    expect_exec_error("{{ nil }}", "nil is not a command");
    expect_exec_error("{{ not 1 2 }}", "wrong number of args for not");
    expect_exec_error("{{ template \"nope\" . }}", "no such template");
    expect_exec_error("{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
                      "maximum template depth");
    expect_exec_error("{{ range 100000000 }}{{ end }}", "steps");
    expect_exec_error("{{ call .Missing }}", "call of nil");
    expect_exec_error("{{ .System.Foo }}", "can't evaluate field Foo in type string");
    expect_exec_error("{{ printf 1 }}", "wrong type for value");
}

// ---------------------------------------------------------------------------
// Identifiers, capabilities, tags

static void test_idents_and_tags(void **state)
{
    (void)state;
    struct template *t;
    const char *s = "{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}"
                    "{{ $.Tools }}{{ end }}{{ .Suffix }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_true(template_has_ident(t, "messages"));
    assert_true(template_has_ident(t, "thinking"));
    assert_true(template_has_ident(t, "$"));
    assert_true(template_has_ident(t, "tools"));
    assert_true(template_supports_insert(t));
    const char *o, *c;
    assert_true(template_thinking_tags(t, &o, &c));
    assert_string_equal(o, "<think>");
    assert_string_equal(c, "</think>");
    assert_string_equal(template_tool_tag(t), "{");
    template_free(t);

    // the chain exception: (index .Messages 0).Content does not count
    s = "{{ (index .Messages 0).Content }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_false(template_has_ident(t, "content"));
    template_free(t);

    s = "{{ if .ToolCalls }}\r\n  {{ if .X }}<calls> [{{ end }}{{ end }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_string_equal(template_tool_tag(t), "<calls> [");
    template_free(t);

    // thinking tags: only when the nearest enclosing range iterates .Messages
    s = "{{ range .Messages }}{{ range .ToolCalls }}<t>{{ .Thinking }}</t>{{ end }}{{ end }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_false(template_thinking_tags(t, NULL, NULL));
    template_free(t);
    s = "{{ range $i, $m := .Messages }}<|im_start|>{{ if $m.Thinking }}{{ .Thinking }}{{ end }}"
        "{{ if .Thinking }}\n<reason> {{ .Thinking }} </reason>\n{{ end }}{{ end }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_true(template_thinking_tags(t, &o, &c));
    assert_string_equal(o, "<reason>");
    assert_string_equal(c, "</reason>");
    template_free(t);
    assert_true(template_think_starts_inside("x<think>\n ", 10, "<think>"));
    assert_false(template_think_starts_inside("x<think>y", 9, "<think>"));

    // tool tag: the body's action stops the search, an else branch is searched
    s = "{{ if .ToolCalls }}{{ .X }}<no>{{ end }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_string_equal(template_tool_tag(t), "{");
    template_free(t);
    s = "{{ range .Messages }}{{ if .ToolCalls }}{{ if .A }}{{ .B }}{{ else }} <calls>{{ end }}"
        "{{ end }}{{ end }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_string_equal(template_tool_tag(t), "<calls>");
    template_free(t);

    // Llama 3.1 style: calls printed as bare JSON → "{"
    s = "{{ range .Messages }}{{ if eq .Role \"assistant\" }}{{ if .ToolCalls }}{{ range "
        ".ToolCalls }}"
        "{\"name\": \"{{ .Function.Name }}\", \"parameters\": {{ .Function.Arguments }}}{{ end }}"
        "{{ else }}{{ .Content }}{{ end }}{{ end }}{{ end }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    assert_string_equal(template_tool_tag(t), "{");
    template_free(t);

    // {{ .Prompt }} gets {{ .Response }} appended
    s = "{{ .Prompt }}";
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    json_t *root = json_pack("{s:s, s:s}", "Prompt", "p", "Response", "r");
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(template_execute(t, root, &b, NULL), 0);
    assert_string_equal(buf_cstr(&b), "pr");
    assert_string_equal(template_text(t), "{{ .Prompt }}");
    buf_deinit(&b);
    json_decref(root);
    template_free(t);
}

// ---------------------------------------------------------------------------
// Prompt building

static void test_legacy_turns(void **state)
{
    (void)state;
    json_t *m = json_array();
    json_array_append_new(m, msg("system", "s"));
    json_array_append_new(m, msg("user", "u1"));
    json_array_append_new(m, msg("assistant", "a1"));
    json_array_append_new(m, msg("user", "u2"));
    struct err e = {0};
    char *got = render_msgs(
        "{{ if .System }}S:{{ .System }} {{ end }}U:{{ .Prompt }} A:{{ .Response }}<eos>", m, NULL,
        &e);
    assert_non_null(got);
    assert_string_equal(got, "S:s U:u1 A:a1<eos>U:u2 A:");
    free(got);
    got = render_msgs("{{ .Prompt }}", m, NULL, &e);
    assert_string_equal(got, "u1a1u2");
    free(got);
    json_decref(m);
}

static void test_suffix_and_think(void **state)
{
    (void)state;
    const char *s = "{{ if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>{{ else }}"
                    "{{ .Prompt }}{{ end }}|{{ .Think }}|{{ .ThinkLevel }}|{{ .IsThinkSet }}";
    struct template *t;
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    struct template_prompt_req req = {
        .prompt = "def f(", .suffix = "return 1", .think = {true, true, NULL}};
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(template_render_prompt(t, &req, &b, NULL, NULL), 0);
    assert_string_equal(buf_cstr(&b), "<PRE> def f( <SUF>return 1 <MID>|true|medium|true");
    buf_reset(&b);
    json_t *m = json_array();
    json_array_append_new(m, msg("user", "hi"));
    struct template_prompt_req req2 = {.messages = m, .think = {true, true, "high"}};
    assert_int_equal(template_render_prompt(t, &req2, &b, NULL, NULL), 0);
    assert_string_equal(buf_cstr(&b), "hi|true|high|true");
    buf_deinit(&b);
    json_decref(m);
    template_free(t);
}

static void test_images(void **state)
{
    (void)state;
    json_t *m = json_array();
    json_t *u1 = msg("user", "look");
    json_object_set_new(u1, "images", json_pack("[s,s]", "AAA", "BBB"));
    json_t *u2 = msg("user", "and [img] here");
    json_object_set_new(u2, "images", json_pack("[s]", "CCC"));
    json_array_append_new(m, u1);
    json_array_append_new(m, msg("assistant", "ok"));
    json_array_append_new(m, u2);
    const char *s = "{{ range .Messages }}{{ .Content }};{{ end }}";
    struct template *t;
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    struct template_prompt_req req = {.messages = m};
    struct template_prompt_info info;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(template_render_prompt(t, &req, &b, &info, NULL), 0);
    assert_string_equal(buf_cstr(&b), "[img-0][img-1]look;ok;and [img-2] here;");
    assert_int_equal(json_array_size(info.images), 3);
    assert_string_equal(json_string_value(json_array_get(info.images, 2)), "CCC");
    template_prompt_info_deinit(&info);
    buf_deinit(&b);
    template_free(t);
    json_decref(m);
}

// One candidate of truncation (the prompt module's loop picks the start):
// the messages from start with the system messages before it kept.
static void test_truncation(void **state)
{
    (void)state;
    const char *s = "{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}";
    struct template *t;
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    json_t *m = json_array();
    json_array_append_new(m, msg("system", "S"));
    json_array_append_new(m, msg("user", "u1-aaaaaaaa"));
    json_array_append_new(m, msg("assistant", "a1-aaaaaaaa"));
    json_array_append_new(m, msg("user", "u2"));
    struct template_prompt_req req = {.messages = m, .start = 2};
    struct template_prompt_info info;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(template_render_prompt(t, &req, &b, &info, NULL), 0);
    assert_string_equal(buf_cstr(&b), "[system:S][assistant:a1-aaaaaaaa][user:u2]");
    assert_int_equal(info.n_dropped, 1);
    template_prompt_info_deinit(&info);
    // only system + the last message
    buf_reset(&b);
    req.start = 3;
    assert_int_equal(template_render_prompt(t, &req, &b, NULL, NULL), 0);
    assert_string_equal(buf_cstr(&b), "[system:S][user:u2]");
    // tags are numbered from the first kept message; a probe has none
    json_t *mi = json_array();
    json_t *u1 = msg("user", "one");
    json_object_set_new(u1, "images", json_pack("[s]", "I0"));
    json_t *u2 = msg("user", "two");
    json_object_set_new(u2, "images", json_pack("[s]", "I1"));
    json_array_append_new(mi, u1);
    json_array_append_new(mi, msg("assistant", "ok"));
    json_array_append_new(mi, u2);
    struct template_prompt_req ri = {.messages = mi, .start = 1};
    buf_reset(&b);
    assert_int_equal(template_render_prompt(t, &ri, &b, &info, NULL), 0);
    assert_string_equal(buf_cstr(&b), "[assistant:ok][user:[img-0]two]");
    assert_int_equal(json_array_size(info.images), 1);
    assert_string_equal(json_string_value(json_array_get(info.images, 0)), "I1");
    template_prompt_info_deinit(&info);
    buf_reset(&b);
    ri.probe = true;
    assert_int_equal(template_render_prompt(t, &ri, &b, NULL, NULL), 0);
    assert_string_equal(buf_cstr(&b), "[assistant:ok][user:two]");
    json_decref(mi);
    // start 0 (and a start past the end): everything
    for (size_t start = 0; start <= 4; start += 4) {
        buf_reset(&b);
        req.start = start;
        assert_int_equal(template_render_prompt(t, &req, &b, NULL, NULL), 0);
        assert_string_equal(buf_cstr(&b),
                            "[system:S][user:u1-aaaaaaaa][assistant:a1-aaaaaaaa][user:u2]");
    }
    buf_deinit(&b);
    json_decref(m);
    template_free(t);
}

static void test_chat_assembly(void **state)
{
    (void)state;
    json_t *hist = json_array();
    json_array_append_new(hist, msg("USER", "h1"));
    json_t *req = json_array();
    json_array_append_new(req, msg("user", "q"));
    json_array_append_new(req, msg("assistant", "<think>hmm</think>answer"));
    json_array_append_new(req, msg("user", "q2"));
    json_t *out = template_chat_messages(hist, req, "SYS", true, NULL);
    assert_non_null(out);
    assert_int_equal(json_array_size(out), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 0), "role")),
                        "system");
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 1), "role")), "user");
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 3), "content")),
                        "answer");
    json_decref(out);
    // request starting with system: the model SYSTEM is not used
    json_t *req2 = json_array();
    json_array_append_new(req2, msg("system", "mine"));
    out = template_chat_messages(hist, req2, "SYS", false, NULL);
    assert_int_equal(json_array_size(out), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 1), "content")),
                        "mine");
    json_decref(out);
    json_t *bad = json_pack("[i]", 1);
    struct err e = {0};
    assert_null(template_chat_messages(NULL, bad, NULL, false, &e));
    assert_int_equal(e.code, ERR_INVALID);
    json_decref(bad);
    out = template_generate_messages("S", NULL, "p", NULL);
    assert_int_equal(json_array_size(out), 2);
    json_decref(out);
    json_decref(hist);
    json_decref(req);
    json_decref(req2);
}

// ---------------------------------------------------------------------------
// Output parsers

static void think_feed(const char *const *pieces, bool inside, const char *want_think,
                       const char *want_content)
{
    struct template_think_parser p;
    template_think_parser_init(&p, "<think>", "</think>", inside);
    struct buf th, co;
    buf_init(&th, 0);
    buf_init(&co, 0);
    for (size_t i = 0; pieces[i]; i++)
        assert_int_equal(template_think_parser_add(&p, pieces[i], strlen(pieces[i]), &th, &co), 0);
    template_think_parser_finish(&p, &th, &co);
    assert_string_equal(buf_cstr(&th), want_think);
    assert_string_equal(buf_cstr(&co), want_content);
    buf_deinit(&th);
    buf_deinit(&co);
    template_think_parser_deinit(&p);
}

static void test_think_parser(void **state)
{
    (void)state;
    think_feed((const char *[]){"<think>abc</think>def", NULL}, false, "abc", "def");
    think_feed((const char *[]){" <th", "ink>\n a", "bc</th", "ink>\n\n", "def", NULL}, false,
               "abc", "def");
    think_feed((const char *[]){"hello <think>x</think>", NULL}, false, "",
               "hello <think>x</think>");
    think_feed((const char *[]){"<", "t", "x", NULL}, false, "", "<tx");
    think_feed((const char *[]){"reason</think>answer", NULL}, true, "reason", "answer");
    think_feed((const char *[]){"<think>unfinished </thi", NULL}, false, "unfinished </thi", "");
    think_feed((const char *[]){"<think>a<b</think>c", NULL}, false, "a<b", "c");
    think_feed((const char *[]){"  ", NULL}, false, "", "  ");
    char *s = template_strip_thinking("<think>x</think> kept", "<think>", "</think>");
    assert_string_equal(s, "kept");
    free(s);
}

static const char *tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
                                "{\"type\":\"function\",\"function\":{\"name\":\"get\"}}]";

static void tool_feed(const char *tag, const char *const *pieces, const char *want_content,
                      const char *want_calls)
{
    json_t *tools = json_loads(tools_json, 0, NULL);
    struct template_tool_parser *p = template_tool_parser_new(tag, tools);
    struct buf co;
    buf_init(&co, 0);
    json_t *calls = json_array();
    for (size_t i = 0; pieces[i]; i++)
        assert_int_equal(
            template_tool_parser_add(p, pieces[i], strlen(pieces[i]), &co, calls, NULL), 0);
    template_tool_parser_finish(p, &co, calls);
    assert_string_equal(buf_cstr(&co), want_content);
    // compare calls without their random ids
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const char *id = json_string_value(json_object_get(json_array_get(calls, i), "id"));
        assert_non_null(id);
        assert_int_equal(strlen(id), 13);
        assert_memory_equal(id, "call_", 5);
        json_object_del(json_array_get(calls, i), "id");
    }
    char *got = json_dumps(calls, JSON_COMPACT | JSON_SORT_KEYS);
    if (strcmp(got, want_calls))
        fail_msg("%s...: got %s, want %s", pieces[0], got, want_calls);
    free(got);
    json_decref(calls);
    buf_deinit(&co);
    template_tool_parser_free(p);
    json_decref(tools);
}

static void test_tool_parser(void **state)
{
    (void)state;
    const char *one = "[{\"function\":{\"arguments\":{\"city\":\"Paris\"},\"index\":0,\"name\":"
                      "\"get_weather\"}}]";
    // Qwen-style tag, split everywhere
    tool_feed("<tool_call>",
              (const char *[]){"Sure. <tool", "_call>\n{\"name\": \"get_w", "eather\", \"argu",
                               "ments\": {\"city\": \"Par", "is\"}}\n</tool_call>", NULL},
              "Sure. ", one);
    // no tool call at all
    tool_feed("<tool_call>", (const char *[]){"Hello <to", "day>", NULL}, "Hello <today>", "[]");
    // Llama-style "{" tag with parameters
    tool_feed("{",
              (const char *[]){
                  "{\"name\": \"get_weather\", \"parameters\": {\"city\": ", "\"Paris\"}}", NULL},
              "", one);
    // JSON that names no tool comes back as content
    tool_feed("{", (const char *[]){"{\"answer\": ", "42}", NULL}, "{\"answer\": 42}", "[]");
    // text before "{" disables tool parsing
    tool_feed("{", (const char *[]){"x {\"name\": \"get_weather\"}", NULL},
              "x {\"name\": \"get_weather\"}", "[]");
    // Mistral-style, two calls; arguments as a JSON string; braces inside strings
    tool_feed(
        "[TOOL_CALLS] [",
        (const char *[]){"[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": "
                         "\"{\\\"city\\\": \\\"Paris\\\"}\"}, {\"name\": \"get\", "
                         "\"arguments\": {\"q\": \"a}b{\"}}]",
                         NULL},
        "",
        "[{\"function\":{\"arguments\":{\"city\":\"Paris\"},\"index\":0,\"name\":\"get_weather\"}},"
        "{\"function\":{\"arguments\":{\"q\":\"a}b{\"},\"index\":1,\"name\":\"get\"}}]");
    // tool name as key
    tool_feed("<tool_call>",
              (const char *[]){"<tool_call>{\"get_weather\": {\"city\": \"Paris\"}}", NULL}, "",
              one);
    // "{" tag: white space before the call is content; a second call in a later piece
    tool_feed(
        "{",
        (const char *[]){"\n ",
                         "{\"name\": \"get_weather\", \"parameters\": {\"city\": "
                         "\"Paris\"}}",
                         "{\"name\": \"get\", \"parameters\": {}}", NULL},
        "\n ",
        "[{\"function\":{\"arguments\":{\"city\":\"Paris\"},\"index\":0,\"name\":\"get_weather\"}},"
        "{\"function\":{\"arguments\":{},\"index\":1,\"name\":\"get\"}}]");
    // non-JSON tag: text after the calls is dropped
    tool_feed("<tool_call>",
              (const char *[]){"<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":"
                               "\"Paris\"}}</tool_call> trailing",
                               NULL},
              "", one);
    // incomplete at the end with "{": returned as content
    tool_feed("{", (const char *[]){"{\"name\": \"get_weather\", ", NULL},
              "{\"name\": \"get_weather\", ", "[]");
}

static void test_output_parser(void **state)
{
    (void)state;
    const char *s = "{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}"
                    "{{ if .ToolCalls }}<tool_call>{{ range .ToolCalls }}{{ json .Function }}"
                    "{{ end }}</tool_call>{{ end }}{{ end }}{{ .Tools }}";
    struct template *t;
    assert_int_equal(template_parse(&t, s, strlen(s), NULL), 0);
    json_t *tools = json_loads(tools_json, 0, NULL);
    static const char *pieces[] = {"<thi",
                                   "nk>plan",
                                   "ning</th",
                                   "ink>\n\nOK. <tool",
                                   "_call>{\"name\"",
                                   ": \"get\", \"arguments\": {}}</tool_call>",
                                   NULL};
    struct template_output_parser *p = template_output_parser_new(t, true, tools, "x");
    struct buf th, co;
    buf_init(&th, 0);
    buf_init(&co, 0);
    json_t *calls = json_array();
    for (size_t i = 0; pieces[i]; i++)
        assert_int_equal(
            template_output_parser_add(p, pieces[i], strlen(pieces[i]), &th, &co, calls, NULL), 0);
    assert_int_equal(template_output_parser_finish(p, &th, &co, calls, NULL), 0);
    assert_string_equal(buf_cstr(&th), "planning");
    assert_string_equal(buf_cstr(&co), "OK. ");
    assert_int_equal(json_array_size(calls), 1);
    template_output_parser_free(p);
    // think off, no tools: everything is content
    buf_reset(&th);
    buf_reset(&co);
    p = template_output_parser_new(t, false, NULL, "x");
    for (size_t i = 0; pieces[i]; i++)
        template_output_parser_add(p, pieces[i], strlen(pieces[i]), &th, &co, calls, NULL);
    template_output_parser_finish(p, &th, &co, calls, NULL);
    assert_string_equal(buf_cstr(&th), "");
    assert_string_equal(buf_cstr(&co),
                        "<think>planning</think>\n\nOK. <tool_call>{\"name\": \"get\", "
                        "\"arguments\": {}}</tool_call>");
    template_output_parser_free(p);
    // prompt ending in the opening tag: starts inside the thinking
    buf_reset(&th);
    buf_reset(&co);
    p = template_output_parser_new(t, true, NULL, "...<think>\n");
    template_output_parser_add(p, "a</think>b", 10, &th, &co, calls, NULL);
    template_output_parser_finish(p, &th, &co, calls, NULL);
    assert_string_equal(buf_cstr(&th), "a");
    assert_string_equal(buf_cstr(&co), "b");
    template_output_parser_free(p);
    buf_deinit(&th);
    buf_deinit(&co);
    json_decref(calls);
    json_decref(tools);
    template_free(t);
}

// ---------------------------------------------------------------------------
// Output formats of models on their Jinja chat template (llama.cpp's choice)

// Parses out in pieces cut at `cuts` (byte offsets, ascending, -1 ends) and
// returns "thinking|content|name(args);..." for comparison.
static char *parse_format(const char *jinja, const char *prompt, const char *out, const int *cuts)
{
    json_t *tools = json_loads(tools_json, 0, NULL);
    const struct template_chat_format *f = template_chat_format_detect(jinja);
    struct template_output_parser *p =
        template_output_parser_new_format(f, jinja, true, tools, prompt);
    struct buf th, co;
    buf_init(&th, 0);
    buf_init(&co, 0);
    json_t *calls = json_array();
    size_t at = 0, n = strlen(out);
    for (size_t i = 0;; i++) {
        size_t end = cuts[i] < 0 || (size_t)cuts[i] > n ? n : (size_t)cuts[i];
        if (end > at)
            assert_int_equal(
                template_output_parser_add(p, out + at, end - at, &th, &co, calls, NULL), 0);
        at = end;
        if (cuts[i] < 0 || at == n)
            break;
    }
    if (at < n)
        template_output_parser_add(p, out + at, n - at, &th, &co, calls, NULL);
    assert_int_equal(template_output_parser_finish(p, &th, &co, calls, NULL), 0);
    struct buf r;
    buf_init(&r, 0);
    buf_printf(&r, "%s|%s|", buf_cstr(&th), buf_cstr(&co));
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *fn = json_object_get(json_array_get(calls, i), "function");
        char *args = json_dumps(json_object_get(fn, "arguments"), JSON_COMPACT | JSON_SORT_KEYS);
        buf_printf(&r, "%s(%s);", json_string_value(json_object_get(fn, "name")), args);
        free(args);
    }
    template_output_parser_free(p);
    buf_deinit(&th);
    buf_deinit(&co);
    json_decref(calls);
    json_decref(tools);
    return buf_take(&r);
}

// Every two-piece split and one-byte pieces give the same result as one piece.
static void check_format(const char *jinja, const char *want_format, const char *prompt,
                         const char *out, const char *want)
{
    assert_string_equal(template_chat_format_detect(jinja)->name, want_format);
    int whole[] = {-1};
    char *got = parse_format(jinja, prompt, out, whole);
    if (strcmp(got, want) != 0)
        fail_msg("%s: got [%s] want [%s]", want_format, got, want);
    free(got);
    size_t n = strlen(out);
    for (size_t k = 1; k < n; k++) {
        int cuts[] = {(int)k, -1};
        got = parse_format(jinja, prompt, out, cuts);
        if (strcmp(got, want) != 0)
            fail_msg("%s split at %zu: got [%s] want [%s]", want_format, k, got, want);
        free(got);
    }
    int *bytes = calloc(n + 1, sizeof(int));
    for (size_t k = 0; k < n; k++)
        bytes[k] = (int)k + 1;
    bytes[n] = -1;
    got = parse_format(jinja, prompt, out, bytes);
    if (strcmp(got, want) != 0)
        fail_msg("%s byte by byte: got [%s] want [%s]", want_format, got, want);
    free(got);
    free(bytes);
}

static char *shared_template(const char *name)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "chat-templates/%s.jinja", name);
    if (!test_shared_fixture(path, sizeof path, rel))
        return NULL;
    struct buf b;
    buf_init(&b, 0);
    if (fs_read_all(path, 1 << 20, &b, NULL) < 0) {
        buf_deinit(&b);
        return NULL;
    }
    return buf_take(&b);
}

static void test_chat_formats(void **state)
{
    (void)state;
    static const struct {
        const char *fixture;  // shared chat template, or NULL to use jinja
        const char *jinja;
        const char *format, *prompt, *out, *want;
    } cases[] = {
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", NULL, "hermes_2_pro", "",
         "Let me check.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": "
         "\"Paris\"}}\n</tool_call>",
         "|Let me check.\n|get({\"city\":\"Paris\"});"},
        {"qwen3.8", NULL, "hermes_2_pro", "",
         "<think>plan</think>\n\nOK<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n"
         "</tool_call>\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"a\": 1}}\n</tool_call>",
         "plan|OK|get({});get({\"a\":1});"},
        {"meta-llama-Llama-3.1-8B-Instruct", NULL, "llama_3_x", "",
         "{\"name\": \"get\", \"parameters\": {\"city\": \"Paris\"}}",
         "||get({\"city\":\"Paris\"});"},
        {"meta-llama-Llama-3.1-8B-Instruct", NULL, "llama_3_x", "",
         "<|python_tag|>{\"name\": \"get\", \"parameters\": {\"q\": \"x\"}}",
         "||get({\"q\":\"x\"});"},
        {"meta-llama-Llama-3.2-3B-Instruct", NULL, "llama_3_x", "", "Plain {answer}",
         "|Plain {answer}|"},
        {"mistralai-Mistral-Nemo-Instruct-2407", NULL, "mistral_nemo", "",
         "[TOOL_CALLS][{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
         "\"abcdefghi\"}]",
         "||get({\"city\":\"Paris\"});"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", NULL, "deepseek_r1",
         "<｜Assistant｜><think>\n",
         "why</think>\n\nSo<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get\n"
         "```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "why|So|get({\"city\":\"Paris\"});"},
        {"CohereForAI-c4ai-command-r-plus-tool_use", NULL, "command_r", "",
         "Action: ```json\n[\n    {\n        \"tool_name\": \"get\",\n        \"parameters\": "
         "{\"city\": \"Paris\"}\n    }\n]\n```",
         "||get({\"city\":\"Paris\"});"},
        {NULL, "{{ '<|START_THINKING|>' }}{{ '<|END_THINKING|><|START_ACTION|>' }}", "command_r7b",
         "",
         "<|START_THINKING|>t<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", "
         "\"tool_name\": \"get\", \"parameters\": {\"c\": 2}}]<|END_ACTION|>",
         "t||get({\"c\":2});"},
        {NULL, "<|start_header_id|>{{ '<function=' }}", "functionary_v3_1_llama_3_1", "",
         "<function=get>{\"city\": \"Paris\"}</function>", "||get({\"city\":\"Paris\"});"},
        {NULL, "{{ messages }}<think></think>", "generic", "", "<think>x</think>y", "x|y|"},
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *src = cases[i].fixture ? shared_template(cases[i].fixture) : xstrdup(cases[i].jinja);
        if (!src) {
            printf("skip %s: shared fixtures not found\n", cases[i].fixture);
            continue;
        }
        check_format(src, cases[i].format, cases[i].prompt, cases[i].out, cases[i].want);
        free(src);
        checked++;
    }
    printf("checked %d output formats\n", checked);
}

// ---------------------------------------------------------------------------
// Built-ins and detection

// The builtin template create picks for the new families' real Jinja
// templates (shared/fixtures/chat-templates), as Ollama's template.Named:
// Gemma 2 gets gemma-instruct; Phi-3.5-mini's and Qwen3's templates are too
// far from every known one, so Ollama keeps no template layer for them.
static void test_detect_families(void **state)
{
    (void)state;
    static const struct {
        const char *file, *want;
    } cases[] = {
        {"chat-templates/google-gemma-2-2b-it.jinja", "gemma-instruct"},
        {"chat-templates/microsoft-Phi-3.5-mini-instruct.jinja", NULL},
        {"chat-templates/qwen3.8.jinja", NULL},
    };
    char path[1024];
    if (!test_shared_fixture(path, sizeof path, "README.md"))
        skip();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!test_shared_fixture(path, sizeof path, cases[i].file))
            fail_msg("missing shared fixture %s", cases[i].file);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        struct buf b;
        buf_init(&b, 0);
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
            buf_append(&b, chunk, n);
        fclose(f);
        const char *got = template_detect(b.data, b.len);
        if (cases[i].want)
            assert_string_equal(got ? got : "(none)", cases[i].want);
        else if (got)
            fail_msg("%s: detected %s, Ollama keeps none", cases[i].file, got);
        buf_deinit(&b);
    }
    const char *const *stops = template_builtin_stops("gemma-instruct");
    assert_non_null(stops);
    bool eot = false;
    for (; *stops; stops++)
        eot |= strcmp(*stops, "<end_of_turn>") == 0;
    assert_true(eot);
}

static void test_detect(void **state)
{
    (void)state;
    char *jl = read_fixture("templates/detect.jsonl");
    assert_non_null(jl);
    int n = 0;
    for (char *line = strtok(jl, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
            const char *got = template_detect(json_string_value(v), json_string_length(v));
            if (!got || strcmp(got, k))
                fail_msg("detect: want %s got %s", k, got ? got : "(none)");
            // near copies still match; far ones do not
            if (n == 0) {
                struct buf near;
                buf_init(&near, 0);
                buf_append(&near, json_string_value(v), json_string_length(v));
                buf_append_str(&near, "{# 20 more chars #}");
                assert_string_equal(template_detect(near.data, near.len), k);
                for (int r = 0; r < 10; r++)
                    buf_append_str(&near, "{# 20 more chars #}");
                assert_null(template_detect(near.data, near.len));
                buf_deinit(&near);
            }
            const char *text = template_builtin(got);
            struct template *t;
            assert_int_equal(template_parse(&t, text, strlen(text), NULL), 0);
            template_free(t);
            n++;
        }
        json_decref(o);
    }
    assert_true(n > 10);
    free(jl);
    assert_null(template_detect("nothing like a chat template", 28));
    const char *const *stops = template_builtin_stops("gemma-instruct");
    assert_non_null(stops);
    assert_string_equal(stops[0], "<start_of_turn>");
    assert_string_equal(stops[1], "<end_of_turn>");
    assert_null(stops[2]);
    assert_null(template_builtin("nope"));
}

// Found by fuzz_template: an integer literal beyond int64 was converted to an
// integer (undefined behaviour). Go makes it a float constant.
static void test_huge_integer_literal(void **state)
{
    (void)state;
    json_t *m = json_array();
    struct err e = {0};
    char *got = render_msgs("{{ 33333333333333333333333333333 }}", m, NULL, &e);
    assert_non_null(got);
    assert_string_equal(got, "3.3333333333333333e+28");
    free(got);
    json_decref(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_vectors),
        cmocka_unit_test(test_huge_integer_literal),
        cmocka_unit_test(test_spec_vector_hashes),
        cmocka_unit_test(test_collation_prefill),
        cmocka_unit_test(test_tools_qwen),
        cmocka_unit_test(test_builtin_renderings),
        cmocka_unit_test(test_tool_templates),
        cmocka_unit_test(test_language_checks),
        cmocka_unit_test(test_language_more),
        cmocka_unit_test(test_dates),
        cmocka_unit_test(test_tool_data),
        cmocka_unit_test(test_tool_json_omit),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_exec_errors),
        cmocka_unit_test(test_idents_and_tags),
        cmocka_unit_test(test_legacy_turns),
        cmocka_unit_test(test_suffix_and_think),
        cmocka_unit_test(test_images),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_chat_assembly),
        cmocka_unit_test(test_think_parser),
        cmocka_unit_test(test_tool_parser),
        cmocka_unit_test(test_output_parser),
        cmocka_unit_test(test_chat_formats),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_detect_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

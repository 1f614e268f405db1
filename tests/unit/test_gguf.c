// gguf: reader over every fixture, summaries, writer round trips, and
// hostile files (truncations, bad headers, absurd counts, bad tensors).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "json/json.h"
#include "testutil.h"

// ---------------------------------------------------------------------------
// A tiny GGUF builder for hand-made (and deliberately broken) files.

struct gb {
    struct buf b;
};

static void gb_init(struct gb *g)
{
    buf_init(&g->b, 0);
}

static void gb_u32(struct gb *g, uint32_t v)
{
    buf_append(&g->b, &v, 4);
}

static void gb_u64(struct gb *g, uint64_t v)
{
    buf_append(&g->b, &v, 8);
}

static void gb_str(struct gb *g, const char *s)
{
    gb_u64(g, strlen(s));
    buf_append(&g->b, s, strlen(s));
}

static void gb_header(struct gb *g, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gb_u32(g, GGUF_MAGIC);
    gb_u32(g, version);
    gb_u64(g, n_tensors);
    gb_u64(g, n_kv);
}

static void gb_kv_u32(struct gb *g, const char *key, uint32_t v)
{
    gb_str(g, key);
    gb_u32(g, GGUF_VAL_UINT32);
    gb_u32(g, v);
}

static void gb_tensor(struct gb *g, const char *name, uint32_t n_dims, const uint64_t *ne,
                      uint32_t type, uint64_t offset)
{
    gb_str(g, name);
    gb_u32(g, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        gb_u64(g, ne[i]);
    gb_u32(g, type);
    gb_u64(g, offset);
}

static void gb_pad(struct gb *g, size_t align)
{
    while (g->b.len % align)
        buf_append_char(&g->b, 0);
}

static void gb_zeros(struct gb *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf_append_char(&g->b, 0);
}

// Opens the built image; returns rc and leaves the message in e.
static int gb_open(struct gb *g, struct err *e)
{
    struct gguf *f = NULL;
    err_clear(e);
    int rc = gguf_open_memory(&f, g->b.data, g->b.len, e);
    gguf_close(f);
    return rc;
}

static void expect_reject(struct gb *g, const char *substr)
{
    struct err e = {0};
    int rc = gb_open(g, &e);
    if (rc == 0 || !strstr(e.msg, substr))
        fail_msg("expected error containing '%s', got rc=%d msg='%s'", substr, rc, e.msg);
    buf_deinit(&g->b);
}

// A valid two-tensor file: F32 [4] at 0 and Q8_0 [32, 2] at 32.
static void gb_valid(struct gb *g)
{
    gb_init(g);
    gb_header(g, 3, 2, 2);
    gb_str(g, "general.architecture");
    gb_u32(g, GGUF_VAL_STRING);
    gb_str(g, "llama");
    gb_kv_u32(g, "llama.block_count", 1);
    uint64_t ne1[] = {4}, ne2[] = {32, 2};
    gb_tensor(g, "a.weight", 1, ne1, GGUF_TYPE_F32, 0);
    gb_tensor(g, "b.weight", 2, ne2, GGUF_TYPE_Q8_0, 32);
    gb_pad(g, 32);
    gb_zeros(g, 32 + 68);
}

// ---------------------------------------------------------------------------
// Fixtures

static void check_file(const char *path, size_t min_kv)
{
    struct gguf *g = NULL;
    struct err e = {0};
    int rc = gguf_open(&g, path, &e);
    if (rc != 0)
        fail_msg("%s: %s", path, e.msg);
    assert_true(gguf_kv_count(g) >= min_kv);
    // Every tensor's data lies inside the file, aligned.
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        assert_true(t->offset % gguf_alignment(g) == 0);
        assert_true(gguf_data_offset(g) + t->offset + t->n_bytes <= gguf_file_size(g));
        char name[80];
        snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
        assert_ptr_equal(gguf_tensor_find(g, name), t);
    }
    // Every key is found by name; string arrays are reachable end to end.
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        char *k = str_dup(kv->key);
        assert_ptr_equal(gguf_find(g, k), kv);
        free(k);
        if (kv->val.type == GGUF_VAL_ARRAY && kv->val.arr_type == GGUF_VAL_STRING &&
            kv->val.arr_count) {
            struct str s;
            assert_true(gguf_arr_str(kv, kv->val.arr_count - 1, &s));
            assert_false(gguf_arr_str(kv, kv->val.arr_count, &s));
        }
    }
    gguf_close(g);
}

static void test_stories260k(void **state)
{
    (void)state;
    char path[1024];
    test_fixture(path, sizeof(path), "stories260K.gguf");
    check_file(path, 10);
    struct gguf *g = NULL;
    struct err e = {0};
    assert_int_equal(gguf_open(&g, path, &e), 0);
    assert_int_equal(gguf_version(g), 3);
    assert_true(str_eq_cstr(gguf_architecture(g), "llama"));
    uint32_t v;
    assert_true(gguf_get_arch_u32(g, "block_count", &v));
    assert_int_equal(v, 5);
    assert_true(gguf_get_arch_u32(g, "embedding_length", &v));
    assert_int_equal(v, 64);
    assert_true(gguf_get_arch_u32(g, "feed_forward_length", &v));
    assert_int_equal(v, 172);
    assert_true(gguf_get_arch_u32(g, "attention.head_count_kv", &v));
    assert_int_equal(v, 4);
    float eps;
    assert_true(gguf_get_arch_f32(g, "attention.layer_norm_rms_epsilon", &eps));
    assert_float_equal(eps, 1e-5f, 1e-9f);
    assert_false(gguf_get_arch_f32(g, "rope.freq_base", &eps));
    assert_false(gguf_get_u32(g, "general.file_type", &v));
    // "none" ids are 0xFFFFFFFF.
    assert_true(gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &v));
    assert_int_equal(v, 0xFFFFFFFFu);

    enum gguf_value_type et;
    uint64_t n;
    assert_true(gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
    assert_int_equal(et, GGUF_VAL_STRING);
    assert_int_equal(n, 512);
    const struct gguf_kv *tok = gguf_find(g, "tokenizer.ggml.tokens");
    struct str s;
    assert_true(gguf_arr_str(tok, 0, &s));
    assert_true(str_eq_cstr(s, "<unk>"));
    assert_true(gguf_arr_str(tok, 1, &s));
    assert_true(str_eq_cstr(s, "<s>"));
    const struct gguf_kv *scores = gguf_find(g, "tokenizer.ggml.scores");
    float f;
    assert_true(gguf_arr_f32(scores, 0, &f));
    int64_t tt;
    assert_true(gguf_arr_i64(gguf_find(g, "tokenizer.ggml.token_type"), 0, &tt));
    assert_int_equal(tt, 2);  // <unk> is UNKNOWN

    // Parameter count: 512x64 embedding, 5 blocks of (2 norms 64, q 64x64,
    // k,v 64x32, o 64x64, gate/up/down 64x172), output_norm 64 (+ output if stored).
    uint64_t expect = 512 * 64 + 5 * (2 * 64 + 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172) + 64;
    if (gguf_tensor_find(g, "output.weight"))
        expect += 512 * 64;
    struct gguf_summary sum;
    gguf_summarize(g, &sum);
    assert_int_equal(sum.parameter_count, expect);
    assert_string_equal(sum.architecture, "llama");
    assert_string_equal(sum.quantization_level, "unknown");  // no general.file_type (as Ollama)
    assert_int_equal(sum.file_type, UINT32_MAX);
    const struct gguf_tensor *t = gguf_tensor_find(g, "blk.4.ffn_down.weight");
    assert_non_null(t);
    assert_int_equal(t->type, GGUF_TYPE_F32);
    assert_int_equal(t->ne[0], 172);
    assert_int_equal(t->ne[1], 64);
    assert_int_equal(t->n_bytes, 172 * 64 * 4);
    assert_null(gguf_tensor_find(g, "blk.5.ffn_down.weight"));
    gguf_close(g);
}

static void test_shared_fixtures(void **state)
{
    (void)state;
    static const char *files[] = {
        "tiny-llama-f32.gguf",
        "tiny-llama-q8_0.gguf",
        "tiny-qwen2-f32.gguf",
        "vocab/ggml-vocab-bert-bge.gguf",
        "vocab/ggml-vocab-deepseek-llm.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-llama-spm.gguf",
        "vocab/ggml-vocab-phi-3.gguf",
    };
    int found = 0;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[1024];
        if (!test_shared_fixture(path, sizeof(path), files[i]))
            continue;
        found++;
        check_file(path, 5);
    }
    if (!found)
        skip();
}

static void test_tiny_llama_summary(void **state)
{
    (void)state;
    char p32[1024], p8[1024];
    if (!test_shared_fixture(p32, sizeof(p32), "tiny-llama-f32.gguf") ||
        !test_shared_fixture(p8, sizeof(p8), "tiny-llama-q8_0.gguf"))
        skip();
    struct gguf *a = NULL, *b = NULL;
    struct err e = {0};
    assert_int_equal(gguf_open(&a, p32, &e), 0);
    assert_int_equal(gguf_open(&b, p8, &e), 0);
    struct gguf_summary sa, sb;
    gguf_summarize(a, &sa);
    gguf_summarize(b, &sb);
    // 128256x64 embedding + 2 blocks (2 norms, q/o 64x64, k/v 64x32, 3x 64x128)
    // + output_norm + rope_freqs (8).
    uint64_t expect =
        128256ull * 64 + 2 * (2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128) + 64 + 8;
    assert_int_equal(sa.parameter_count, expect);
    assert_int_equal(sb.parameter_count, expect);
    assert_string_equal(sa.parameter_size, "8.28M");
    assert_string_equal(sb.quantization_level, "Q8_0");
    assert_int_equal(sb.file_type, 7);
    struct str s;
    assert_true(gguf_get_str(a, "tokenizer.ggml.model", &s));
    assert_true(str_eq_cstr(s, "gpt2"));
    const struct gguf_kv *tok = gguf_find(a, "tokenizer.ggml.tokens");
    assert_non_null(tok);
    assert_int_equal(tok->val.arr_count, 128256);
    assert_true(gguf_arr_str(tok, 128000, &s));
    assert_true(str_eq_cstr(s, "<|begin_of_text|>"));
    uint32_t v;
    assert_true(gguf_get_u32(a, "tokenizer.ggml.eos_token_id", &v));
    assert_int_equal(v, 128009);
    assert_int_equal(gguf_tensor_find(a, "token_embd.weight")->type, GGUF_TYPE_F16);
    assert_int_equal(gguf_tensor_find(b, "token_embd.weight")->type, GGUF_TYPE_Q8_0);
    gguf_close(a);
    gguf_close(b);
}

static void test_tiny_qwen2_summary(void **state)
{
    (void)state;
    char path[1024];
    if (!test_shared_fixture(path, sizeof(path), "tiny-qwen2-f32.gguf"))
        skip();
    struct gguf *g = NULL;
    struct err e = {0};
    assert_int_equal(gguf_open(&g, path, &e), 0);
    struct gguf_summary s;
    gguf_summarize(g, &s);
    // 151936x64 embedding, 2 blocks (2 norms, q/o 64x64, k/v 64x32, q/k/v
    // biases 64+32+32, 3x 64x128), output_norm.
    uint64_t expect =
        151936ull * 64 + 2 * (2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 128 + 3 * 64 * 128) + 64;
    assert_int_equal(s.parameter_count, expect);
    assert_string_equal(s.parameter_size, "9.80M");
    assert_string_equal(s.architecture, "qwen2");
    const struct gguf_kv *merges = gguf_find(g, "tokenizer.ggml.merges");
    assert_non_null(merges);
    assert_int_equal(merges->val.arr_count, 151387);
    struct str m;
    assert_true(gguf_arr_str(merges, 151386, &m));
    assert_true(m.len > 0);
    assert_non_null(gguf_tensor_find(g, "blk.1.attn_v.bias"));
    float f;
    assert_true(gguf_get_arch_f32(g, "rope.freq_base", &f));
    assert_true(f == 1000000.0f);
    gguf_close(g);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct gguf *g = NULL;
    struct err e = {0};
    assert_int_equal(gguf_open(&g, "/nonexistent/x.gguf", &e), ERR_NOT_FOUND);
    assert_non_null(strstr(e.msg, "/nonexistent/x.gguf"));
    err_clear(&e);
    assert_true(gguf_open(&g, "/tmp", &e) < 0);
    assert_non_null(strstr(e.msg, "not a regular file"));
    assert_null(g);
    // Every fuzz seed opens or is rejected with a message.
    static const char *seeds[] = {"all-types-v3.gguf", "empty-v3.gguf", "gen-tiny-q8_0.gguf",
                                  "vocab-only-v2.gguf"};
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/gguf/%s", test_source_dir(), seeds[i]);
        err_clear(&e);
        if (gguf_open(&g, path, &e) != 0)
            fail_msg("%s: %s", seeds[i], e.msg);
        gguf_close(g);
    }
}

static void test_param_format(void **state)
{
    (void)state;
    static const struct {
        uint64_t n;
        const char *s;
    } cases[] = {
        {0, "0"},
        {999, "999"},
        {1000, "1K"},
        {1001, "1K"},
        {1000000, "1M"},
        {125000000, "125M"},
        {500500000, "500.50M"},
        {1000000000, "1B"},
        {2800000000ull, "2.8B"},
        {2850000000ull, "2.9B"},
        {1000000000000ull, "1000B"},
        {494032768, "494.03M"},
        {1235814400, "1.2B"},
        {8030261248ull, "8.0B"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[32];
        gguf_format_param_count(cases[i].n, out, sizeof(out));
        assert_string_equal(out, cases[i].s);
    }
    assert_string_equal(gguf_file_type_name(15), "Q4_K_M");
    assert_string_equal(gguf_file_type_name(32), "BF16");
    assert_null(gguf_file_type_name(4));
    assert_null(gguf_file_type_name(5000));
    assert_int_equal(gguf_file_type_from_name("q4_k_m"), 15);
    assert_int_equal(gguf_type_from_name("q6_k"), GGUF_TYPE_Q6_K);
    assert_int_equal(gguf_type_from_name("nope"), -1);
    assert_string_equal(gguf_type_name(GGUF_TYPE_IQ4_XS), "IQ4_XS");
    assert_null(gguf_type_name(4));
    uint32_t bs, ts;
    assert_true(gguf_type_geometry(GGUF_TYPE_Q5_K, &bs, &ts));
    assert_int_equal(bs, 256);
    assert_int_equal(ts, 176);
    assert_false(gguf_type_geometry(31, &bs, &ts));
    assert_false(gguf_type_geometry(1000, &bs, &ts));
}

// ---------------------------------------------------------------------------
// Writer round trip: every metadata type, nested arrays, tensors.

static char *tmp_path(const char *tag)
{
    return xasprintf("/tmp/test_gguf_%d_%s.gguf", (int)getpid(), tag);
}

static void test_roundtrip(void **state)
{
    (void)state;
    char *path = tmp_path("rt");
    struct gguf_writer *w = NULL;
    struct err e = {0};
    assert_int_equal(gguf_writer_open(&w, path, &e), 0);
    gguf_writer_set_alignment(w, 64);
    assert_int_equal(gguf_writer_kv_str(w, "general.architecture", "llama"), 0);
    assert_int_equal(gguf_writer_kv_u32(w, "k.u32", 4000000000u), 0);
    assert_int_equal(gguf_writer_kv_i32(w, "k.i32", -7), 0);
    assert_int_equal(gguf_writer_kv_u64(w, "k.u64", 1ull << 40), 0);
    assert_int_equal(gguf_writer_kv_f32(w, "k.f32", 0.25f), 0);
    assert_int_equal(gguf_writer_kv_bool(w, "k.bool", true), 0);
    assert_int_equal(gguf_writer_kv_str(w, "k.str", "héllo"), 0);
    uint8_t u8s[] = {1, 255};
    int8_t i8s[] = {-1, 2};
    uint16_t u16s[] = {65535};
    int16_t i16s[] = {-300, 300};
    int32_t i32s[] = {-1, 0, 1, 2, 3, 4, 5};
    int64_t i64s[] = {INT64_MIN, INT64_MAX};
    uint64_t u64s[] = {UINT64_MAX};
    double f64s[] = {1.5, -2.25};
    float f32s[] = {0.5f, -1.0f};
    uint8_t bools[] = {1, 0, 1};
    assert_int_equal(gguf_writer_kv_arr(w, "a.u8", GGUF_VAL_UINT8, u8s, 2), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.i8", GGUF_VAL_INT8, i8s, 2), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.u16", GGUF_VAL_UINT16, u16s, 1), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.i16", GGUF_VAL_INT16, i16s, 2), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.i32", GGUF_VAL_INT32, i32s, 7), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.i64", GGUF_VAL_INT64, i64s, 2), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.u64", GGUF_VAL_UINT64, u64s, 1), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.f64", GGUF_VAL_FLOAT64, f64s, 2), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.f32", GGUF_VAL_FLOAT32, f32s, 2), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.bool", GGUF_VAL_BOOL, bools, 3), 0);
    assert_int_equal(gguf_writer_kv_arr(w, "a.empty", GGUF_VAL_INT32, NULL, 0), 0);
    struct str strs[] = {STR_LIT("a"), STR_LIT(""), STR_LIT("ccc")};
    assert_int_equal(gguf_writer_kv_arr_str(w, "a.str", strs, 3), 0);
    // Duplicate key is refused.
    assert_int_not_equal(gguf_writer_kv_u32(w, "k.u32", 1), 0);
    int64_t ne1[] = {64, 3};
    int64_t ne2[] = {5};
    // The duplicate key error is sticky: later calls and the header report it.
    assert_int_not_equal(gguf_writer_add_tensor(w, "t.q8", GGUF_TYPE_Q8_0, 2, ne1), 0);
    assert_int_not_equal(gguf_writer_write_header(w, &e), 0);
    assert_non_null(strstr(e.msg, "duplicate metadata key k.u32"));
    gguf_writer_abort(w);

    // Again without the duplicate, plus nested arrays copied from a built file.
    err_clear(&e);
    assert_int_equal(gguf_writer_open(&w, path, &e), 0);
    gguf_writer_set_alignment(w, 64);
    gguf_writer_kv_str(w, "general.architecture", "llama");
    gguf_writer_kv_u32(w, "k.u32", 4000000000u);
    gguf_writer_kv_i32(w, "k.i32", -7);
    gguf_writer_kv_u64(w, "k.u64", 1ull << 40);
    gguf_writer_kv_f32(w, "k.f32", 0.25f);
    gguf_writer_kv_bool(w, "k.bool", true);
    gguf_writer_kv_str(w, "k.str", "héllo");
    gguf_writer_kv_arr(w, "a.u8", GGUF_VAL_UINT8, u8s, 2);
    gguf_writer_kv_arr(w, "a.i8", GGUF_VAL_INT8, i8s, 2);
    gguf_writer_kv_arr(w, "a.u16", GGUF_VAL_UINT16, u16s, 1);
    gguf_writer_kv_arr(w, "a.i16", GGUF_VAL_INT16, i16s, 2);
    gguf_writer_kv_arr(w, "a.i32", GGUF_VAL_INT32, i32s, 7);
    gguf_writer_kv_arr(w, "a.i64", GGUF_VAL_INT64, i64s, 2);
    gguf_writer_kv_arr(w, "a.u64", GGUF_VAL_UINT64, u64s, 1);
    gguf_writer_kv_arr(w, "a.f64", GGUF_VAL_FLOAT64, f64s, 2);
    gguf_writer_kv_arr(w, "a.f32", GGUF_VAL_FLOAT32, f32s, 2);
    gguf_writer_kv_arr(w, "a.bool", GGUF_VAL_BOOL, bools, 3);
    gguf_writer_kv_arr(w, "a.empty", GGUF_VAL_INT32, NULL, 0);
    gguf_writer_kv_arr_str(w, "a.str", strs, 3);

    // Nested array [[1,2],["x"]] built by hand and copied through kv_copy.
    struct gb nb;
    gb_init(&nb);
    gb_header(&nb, 3, 0, 1);
    gb_str(&nb, "a.nested");
    gb_u32(&nb, GGUF_VAL_ARRAY);
    gb_u32(&nb, GGUF_VAL_ARRAY);
    gb_u64(&nb, 2);
    gb_u32(&nb, GGUF_VAL_INT32);
    gb_u64(&nb, 2);
    gb_u32(&nb, 1);
    gb_u32(&nb, 2);
    gb_u32(&nb, GGUF_VAL_STRING);
    gb_u64(&nb, 1);
    gb_str(&nb, "x");
    struct gguf *ng = NULL;
    assert_int_equal(gguf_open_memory(&ng, nb.b.data, nb.b.len, &e), 0);
    assert_int_equal(gguf_writer_kv_copy(w, gguf_find(ng, "a.nested")), 0);
    gguf_close(ng);
    buf_deinit(&nb.b);

    assert_int_equal(gguf_writer_add_tensor(w, "t.q8", GGUF_TYPE_Q8_0, 2, ne1), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "t.f32", GGUF_TYPE_F32, 1, ne2), 0);
    assert_int_not_equal(gguf_writer_add_tensor(w, "t.bad", GGUF_TYPE_Q8_0, 1, ne2), 0);
    gguf_writer_abort(w);

    // Final, clean write.
    err_clear(&e);
    assert_int_equal(gguf_writer_open(&w, path, &e), 0);
    gguf_writer_set_alignment(w, 64);
    gguf_writer_kv_str(w, "general.architecture", "llama");
    gguf_writer_kv_u32(w, "k.u32", 4000000000u);
    gguf_writer_kv_i32(w, "k.i32", -7);
    gguf_writer_kv_u64(w, "k.u64", 1ull << 40);
    gguf_writer_kv_f32(w, "k.f32", 0.25f);
    gguf_writer_kv_bool(w, "k.bool", true);
    gguf_writer_kv_str(w, "k.str", "héllo");
    gguf_writer_kv_arr(w, "a.u8", GGUF_VAL_UINT8, u8s, 2);
    gguf_writer_kv_arr(w, "a.i8", GGUF_VAL_INT8, i8s, 2);
    gguf_writer_kv_arr(w, "a.u16", GGUF_VAL_UINT16, u16s, 1);
    gguf_writer_kv_arr(w, "a.i16", GGUF_VAL_INT16, i16s, 2);
    gguf_writer_kv_arr(w, "a.i32", GGUF_VAL_INT32, i32s, 7);
    gguf_writer_kv_arr(w, "a.i64", GGUF_VAL_INT64, i64s, 2);
    gguf_writer_kv_arr(w, "a.u64", GGUF_VAL_UINT64, u64s, 1);
    gguf_writer_kv_arr(w, "a.f64", GGUF_VAL_FLOAT64, f64s, 2);
    gguf_writer_kv_arr(w, "a.f32", GGUF_VAL_FLOAT32, f32s, 2);
    gguf_writer_kv_arr(w, "a.bool", GGUF_VAL_BOOL, bools, 3);
    gguf_writer_kv_arr(w, "a.empty", GGUF_VAL_INT32, NULL, 0);
    gguf_writer_kv_arr_str(w, "a.str", strs, 3);
    gb_init(&nb);
    gb_header(&nb, 3, 0, 1);
    gb_str(&nb, "a.nested");
    gb_u32(&nb, GGUF_VAL_ARRAY);
    gb_u32(&nb, GGUF_VAL_ARRAY);
    gb_u64(&nb, 2);
    gb_u32(&nb, GGUF_VAL_INT32);
    gb_u64(&nb, 2);
    gb_u32(&nb, 1);
    gb_u32(&nb, 2);
    gb_u32(&nb, GGUF_VAL_STRING);
    gb_u64(&nb, 1);
    gb_str(&nb, "x");
    assert_int_equal(gguf_open_memory(&ng, nb.b.data, nb.b.len, &e), 0);
    assert_int_equal(gguf_writer_kv_copy(w, gguf_find(ng, "a.nested")), 0);
    gguf_close(ng);
    buf_deinit(&nb.b);
    assert_int_equal(gguf_writer_add_tensor(w, "t.q8", GGUF_TYPE_Q8_0, 2, ne1), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "t.f32", GGUF_TYPE_F32, 1, ne2), 0);
    assert_int_equal(gguf_writer_write_header(w, &e), 0);
    uint8_t q8[3 * 2 * 34];
    for (size_t i = 0; i < sizeof(q8); i++)
        q8[i] = (uint8_t)i;
    // Written in odd pieces, crossing the tensor boundary.
    assert_int_equal(gguf_writer_write_data(w, q8, 100, &e), 0);
    assert_int_equal(gguf_writer_write_data(w, q8 + 100, sizeof(q8) - 100, &e), 0);
    float f5[5] = {1, 2, 3, 4, 5};
    assert_int_equal(gguf_writer_write_data(w, f5, sizeof(f5), &e), 0);
    assert_int_not_equal(gguf_writer_write_data(w, f5, 1, &e), 0);
    err_clear(&e);
    assert_int_equal(gguf_writer_close(w, &e), 0);

    struct gguf *g = NULL;
    if (gguf_open(&g, path, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(gguf_alignment(g), 64);
    assert_int_equal(gguf_data_offset(g) % 64, 0);
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool b;
    struct str s;
    assert_true(gguf_get_u32(g, "k.u32", &u32));
    assert_int_equal(u32, 4000000000u);
    assert_false(gguf_get_u32(g, "k.i32", &u32));  // negative
    assert_true(gguf_get_i64(g, "k.i32", &i64));
    assert_int_equal(i64, -7);
    assert_true(gguf_get_u64(g, "k.u64", &u64));
    assert_int_equal(u64, 1ull << 40);
    assert_false(gguf_get_u32(g, "k.u64", &u32));  // out of range
    assert_true(gguf_get_f32(g, "k.f32", &f));
    assert_true(f == 0.25f);
    assert_true(gguf_get_f32(g, "k.u32", &f));  // integers widen to float
    assert_true(gguf_get_bool(g, "k.bool", &b));
    assert_true(b);
    assert_false(gguf_get_bool(g, "k.u32", &b));
    assert_true(gguf_get_str(g, "k.str", &s));
    assert_true(str_eq_cstr(s, "héllo"));
    assert_false(gguf_get_str(g, "k.u32", &s));
    assert_false(gguf_get_u32(g, "missing", &u32));

    const struct gguf_kv *kv;
    kv = gguf_find(g, "a.u8");
    assert_true(gguf_arr_i64(kv, 1, &i64) && i64 == 255);
    kv = gguf_find(g, "a.i8");
    assert_true(gguf_arr_i64(kv, 0, &i64) && i64 == -1);
    kv = gguf_find(g, "a.u16");
    assert_true(gguf_arr_i64(kv, 0, &i64) && i64 == 65535);
    kv = gguf_find(g, "a.i16");
    assert_true(gguf_arr_i64(kv, 0, &i64) && i64 == -300);
    kv = gguf_find(g, "a.i32");
    assert_true(gguf_arr_i64(kv, 6, &i64) && i64 == 5);
    assert_false(gguf_arr_i64(kv, 7, &i64));
    kv = gguf_find(g, "a.i64");
    assert_true(gguf_arr_i64(kv, 0, &i64) && i64 == INT64_MIN);
    assert_true(gguf_arr_i64(kv, 1, &i64) && i64 == INT64_MAX);
    kv = gguf_find(g, "a.u64");
    assert_false(gguf_arr_i64(kv, 0, &i64));  // does not fit
    struct gguf_value ev;
    assert_true(gguf_arr_value(&kv->val, 0, &ev) && ev.v.u64 == UINT64_MAX);
    kv = gguf_find(g, "a.f64");
    assert_true(gguf_arr_f32(kv, 1, &f) && f == -2.25f);
    kv = gguf_find(g, "a.f32");
    assert_true(gguf_arr_f32(kv, 0, &f) && f == 0.5f);
    kv = gguf_find(g, "a.bool");
    assert_true(gguf_arr_i64(kv, 2, &i64) && i64 == 1);
    enum gguf_value_type et;
    uint64_t n;
    assert_true(gguf_get_arr(g, "a.empty", &et, &n));
    assert_int_equal(et, GGUF_VAL_INT32);
    assert_int_equal(n, 0);
    kv = gguf_find(g, "a.str");
    assert_true(gguf_arr_str(kv, 2, &s) && str_eq_cstr(s, "ccc"));
    assert_true(gguf_arr_str(kv, 1, &s) && s.len == 0);
    kv = gguf_find(g, "a.nested");
    assert_non_null(kv);
    assert_int_equal(kv->val.arr_type, GGUF_VAL_ARRAY);
    assert_int_equal(kv->val.arr_count, 2);
    struct gguf_value inner, leaf;
    assert_true(gguf_arr_value(&kv->val, 1, &inner));
    assert_int_equal(inner.arr_type, GGUF_VAL_STRING);
    assert_true(gguf_arr_value(&inner, 0, &leaf));
    assert_true(str_eq_cstr(leaf.s, "x"));
    assert_true(gguf_arr_value(&kv->val, 0, &inner));
    assert_true(gguf_arr_value(&inner, 1, &leaf));
    assert_int_equal(leaf.v.i64, 2);

    const struct gguf_tensor *t = gguf_tensor_find(g, "t.q8");
    assert_non_null(t);
    assert_int_equal(t->n_bytes, sizeof(q8));
    assert_memory_equal(t->data, q8, sizeof(q8));
    t = gguf_tensor_find(g, "t.f32");
    assert_int_equal(t->offset % 64, 0);
    assert_memory_equal(t->data, f5, sizeof(f5));
    gguf_close(g);
    unlink(path);
    free(path);
}

// Sparse write: holes read back as zeros and the file has its full length.
static void test_sparse(void **state)
{
    (void)state;
    char *path = tmp_path("sparse");
    struct gguf_writer *w = NULL;
    struct err e = {0};
    assert_int_equal(gguf_writer_open(&w, path, &e), 0);
    int64_t ne[] = {1024, 1024};
    gguf_writer_add_tensor(w, "a", GGUF_TYPE_F32, 2, ne);
    gguf_writer_add_tensor(w, "b", GGUF_TYPE_F32, 2, ne);
    assert_int_equal(gguf_writer_write_header(w, &e), 0);
    assert_int_equal(gguf_writer_skip_data(w, 2ull * 4 * 1024 * 1024, &e), 0);
    assert_int_equal(gguf_writer_close(w, &e), 0);
    struct gguf *g = NULL;
    assert_int_equal(gguf_open(&g, path, &e), 0);
    const struct gguf_tensor *t = gguf_tensor_find(g, "b");
    assert_int_equal(((const float *)t->data)[1024 * 1024 - 1], 0.0f);
    gguf_close(g);
    unlink(path);
    free(path);
}

static int count_entries(void *ctx, struct str key, const struct gguf_value *val, bool elided)
{
    int *counts = ctx;
    counts[0]++;
    if (elided)
        counts[1]++;
    if (str_eq_cstr(key, "general.parameter_count"))
        counts[2] = (int)val->v.u64;
    if (str_eq_cstr(key, "general.name") || str_eq_cstr(key, "tokenizer.chat_template"))
        counts[3]++;
    return 0;
}

static void test_model_info(void **state)
{
    (void)state;
    char path[1024];
    test_fixture(path, sizeof(path), "stories260K.gguf");
    struct gguf *g = NULL;
    struct err e = {0};
    assert_int_equal(gguf_open(&g, path, &e), 0);
    int c[4] = {0};
    assert_int_equal(gguf_model_info(g, false, count_entries, c), 0);
    struct gguf_summary s;
    gguf_summarize(g, &s);
    assert_int_equal(c[2], (int)s.parameter_count);
    assert_int_equal(c[1], 3);  // tokens, scores, token_type elided
    assert_int_equal(c[3], 0);
    int v[4] = {0};
    assert_int_equal(gguf_model_info(g, true, count_entries, v), 0);
    assert_int_equal(v[1], 0);
    assert_int_equal(v[0], c[0]);

    json_t *info = gguf_model_info_json(g, false);
    assert_non_null(info);
    char *js = jsonx_dumps(info, JSONX_SORT_KEYS);
    assert_non_null(strstr(js, "\"general.architecture\":\"llama\""));
    assert_non_null(strstr(js, "\"general.parameter_count\":292800"));
    assert_non_null(strstr(js, "\"llama.attention.layer_norm_rms_epsilon\":0.00001"));
    assert_non_null(strstr(js, "\"tokenizer.ggml.tokens\":[]"));
    assert_non_null(strstr(js, "\"tokenizer.ggml.padding_token_id\":4294967295"));
    assert_null(strstr(js, "general.name"));
    free(js);
    json_decref(info);
    info = gguf_model_info_json(g, true);
    json_t *tokens = json_object_get(info, "tokenizer.ggml.tokens");
    assert_int_equal(json_array_size(tokens), 512);
    assert_string_equal(json_string_value(json_array_get(tokens, 1)), "<s>");
    json_decref(info);
    gguf_close(g);
}

// ---------------------------------------------------------------------------
// Hostile files

static void test_valid_builder(void **state)
{
    (void)state;
    struct gb g;
    gb_valid(&g);
    struct err e = {0};
    assert_int_equal(gb_open(&g, &e), 0);
    buf_deinit(&g.b);
}

static void test_truncated_everywhere(void **state)
{
    (void)state;
    struct gb g;
    gb_valid(&g);
    for (size_t n = 0; n < g.b.len; n++) {
        struct gguf *f = NULL;
        struct err e = {0};
        // A heap copy of exactly n bytes so ASan catches any over-read.
        char *copy = malloc(n ? n : 1);
        memcpy(copy, g.b.data, n);
        int rc = gguf_open_memory(&f, copy, n, &e);
        if (rc == 0)
            fail_msg("truncated at %zu accepted", n);
        assert_true(e.msg[0] != 0);
        free(copy);
    }
    buf_deinit(&g.b);
}

static void test_bad_headers(void **state)
{
    (void)state;
    struct gb g;
    gb_init(&g);
    buf_append(&g.b, "GGML", 4);
    gb_zeros(&g, 20);
    expect_reject(&g, "bad magic");

    gb_init(&g);
    gb_header(&g, 4, 0, 0);
    expect_reject(&g, "unsupported GGUF version 4");
    gb_init(&g);
    gb_header(&g, 0, 0, 0);
    expect_reject(&g, "unsupported GGUF version 0");
    gb_init(&g);
    gb_header(&g, 1, 0, 0);
    expect_reject(&g, "version 1");
    gb_init(&g);
    gb_header(&g, 3u << 16, 0, 0);
    expect_reject(&g, "big-endian");

    // Absurd counts.
    gb_init(&g);
    gb_header(&g, 3, 0, UINT64_MAX);
    expect_reject(&g, "metadata count");
    gb_init(&g);
    gb_header(&g, 3, 1ull << 60, 0);
    expect_reject(&g, "tensor count");
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_u64(&g, UINT64_MAX);  // key length
    gb_zeros(&g, 16);
    expect_reject(&g, "metadata key 0 extends past end of file");

    // v2 with nothing else is fine.
    gb_init(&g);
    gb_header(&g, 2, 0, 0);
    struct err e = {0};
    assert_int_equal(gb_open(&g, &e), 0);
    buf_deinit(&g.b);
}

static void test_bad_metadata(void **state)
{
    (void)state;
    struct gb g;
    // Duplicate key.
    gb_init(&g);
    gb_header(&g, 3, 0, 2);
    gb_kv_u32(&g, "a.b", 1);
    gb_kv_u32(&g, "a.b", 2);
    expect_reject(&g, "duplicate metadata key a.b");
    // Empty key.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_kv_u32(&g, "", 1);
    gb_zeros(&g, 8);
    expect_reject(&g, "key 0 is empty");
    // Invalid UTF-8 key.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_kv_u32(&g, "bad\xff\xfekey", 1);
    expect_reject(&g, "not valid UTF-8");
    // Unknown value type.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, 13);
    gb_u32(&g, 0);
    gb_zeros(&g, 8);
    expect_reject(&g, "key k: unknown value type 13");
    // Bad bool.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_BOOL);
    buf_append_char(&g.b, 2);
    gb_zeros(&g, 16);
    expect_reject(&g, "invalid bool");
    // String longer than the file.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_STRING);
    gb_u64(&g, 1ull << 62);
    gb_zeros(&g, 16);
    expect_reject(&g, "key k: string value extends past end of file");
    // Array with an absurd count (both fixed and variable element sizes).
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_ARRAY);
    gb_u32(&g, GGUF_VAL_UINT64);
    gb_u64(&g, 1ull << 61);
    gb_zeros(&g, 16);
    expect_reject(&g, "key k: array of");
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_ARRAY);
    gb_u32(&g, GGUF_VAL_STRING);
    gb_u64(&g, UINT64_MAX);
    gb_zeros(&g, 16);
    expect_reject(&g, "key k: array of");
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_ARRAY);
    gb_u32(&g, 77);
    gb_u64(&g, 1);
    gb_zeros(&g, 16);
    expect_reject(&g, "unknown array element type 77");
    // Arrays nested too deep.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_ARRAY);
    for (int i = 0; i < 20; i++) {
        gb_u32(&g, GGUF_VAL_ARRAY);
        gb_u64(&g, 1);
    }
    gb_zeros(&g, 16);
    expect_reject(&g, "nested deeper");
    // Alignment not a power of two, or of the wrong type.
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_kv_u32(&g, "general.alignment", 48);
    expect_reject(&g, "not a power of two");
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_kv_u32(&g, "general.alignment", 0);
    expect_reject(&g, "not a power of two");
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "general.alignment");
    gb_u32(&g, GGUF_VAL_UINT64);
    gb_u64(&g, 64);
    expect_reject(&g, "general.alignment must be u32");
}

static void tensor_file(struct gb *g, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset, size_t data_bytes)
{
    gb_init(g);
    gb_header(g, 3, 1, 0);
    gb_tensor(g, name, n_dims, ne, type, offset);
    gb_pad(g, 32);
    gb_zeros(g, data_bytes);
}

static void test_bad_tensors(void **state)
{
    (void)state;
    struct gb g;
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    tensor_file(&g, "blk.3.attn_q.weight", 2, ne, GGUF_TYPE_F32, 0, 255);
    expect_reject(&g, "tensor blk.3.attn_q.weight: data extends past end of file");
    tensor_file(&g, "t", 2, ne, GGUF_TYPE_F32, 0, 256);
    struct err e = {0};
    assert_int_equal(gb_open(&g, &e), 0);
    buf_deinit(&g.b);
    tensor_file(&g, "t", 2, ne, GGUF_TYPE_F32, 16, 512);
    expect_reject(&g, "tensor t: data offset 16 is not a multiple of the alignment 32");
    tensor_file(&g, "t", 2, ne, GGUF_TYPE_F32, UINT64_MAX - 31, 512);
    expect_reject(&g, "tensor t: data extends past end of file");
    tensor_file(&g, "t", 2, ne, 4, 0, 512);
    expect_reject(&g, "tensor t: unknown tensor type 4");
    tensor_file(&g, "t", 2, ne, 1000, 0, 512);
    expect_reject(&g, "tensor t: unknown tensor type 1000");
    tensor_file(&g, "t", 0, ne, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "tensor t: invalid number of dimensions 0");
    tensor_file(&g, "t", 5, ne, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "invalid number of dimensions 5");
    uint64_t zero[] = {32, 0};
    tensor_file(&g, "t", 2, zero, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "tensor t: dimension 1 is zero");
    uint64_t neg[] = {32, (uint64_t)-2};
    tensor_file(&g, "t", 2, neg, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "tensor t: dimension 1 is negative");
    uint64_t big[] = {1ull << 32, 1ull << 32};
    tensor_file(&g, "t", 2, big, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "tensor t: element count overflows");
    uint64_t big2[] = {1ull << 62, 1};
    tensor_file(&g, "t", 2, big2, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "tensor t: byte size overflows");
    uint64_t odd[] = {33, 1};
    tensor_file(&g, "t", 2, odd, GGUF_TYPE_Q8_0, 0, 512);
    expect_reject(&g, "not a multiple of the Q8_0 block size 32");
    tensor_file(&g, "this.name.is.much.longer.than.sixty.three.bytes.which.llama.cpp.rejects", 2,
                ne, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "name is 71 bytes long");
    tensor_file(&g, "bad\xc0\x80", 2, ne, GGUF_TYPE_F32, 0, 512);
    expect_reject(&g, "not valid UTF-8");

    // Overlapping tensors and duplicate names.
    gb_init(&g);
    gb_header(&g, 3, 2, 0);
    gb_tensor(&g, "a", 2, ne, GGUF_TYPE_F32, 0);
    gb_tensor(&g, "b", 2, ne, GGUF_TYPE_F32, 128);
    gb_pad(&g, 32);
    gb_zeros(&g, 512);
    expect_reject(&g, "tensor b: data overlaps tensor a");
    gb_init(&g);
    gb_header(&g, 3, 2, 0);
    gb_tensor(&g, "a", 2, ne, GGUF_TYPE_F32, 0);
    gb_tensor(&g, "a", 2, ne, GGUF_TYPE_F32, 256);
    gb_pad(&g, 32);
    gb_zeros(&g, 512);
    expect_reject(&g, "duplicate tensor name a");
}

// Regression inputs found by the fuzzer live here (each as a byte image).
static void test_fuzz_regressions(void **state)
{
    (void)state;
    // Nested array of many empty arrays: bounded by the bytes left.
    struct gb g;
    gb_init(&g);
    gb_header(&g, 3, 0, 1);
    gb_str(&g, "k");
    gb_u32(&g, GGUF_VAL_ARRAY);
    gb_u32(&g, GGUF_VAL_ARRAY);
    gb_u64(&g, 3);
    for (int i = 0; i < 3; i++) {
        gb_u32(&g, GGUF_VAL_UINT8);
        gb_u64(&g, 0);
    }
    struct err e = {0};
    assert_int_equal(gb_open(&g, &e), 0);
    buf_deinit(&g.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_shared_fixtures),
        cmocka_unit_test(test_tiny_llama_summary),
        cmocka_unit_test(test_tiny_qwen2_summary),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_param_format),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_sparse),
        cmocka_unit_test(test_model_info),
        cmocka_unit_test(test_valid_builder),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

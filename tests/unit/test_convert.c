// convert/: Hugging Face safetensors folders to GGUF. The parsers are fed
// hostile input; whole folders are made from the tiny fixtures with
// tools/hf-export (HF names, HF Q/K row order, tokenizer.json as HF writes
// it) and converted back: every tensor must equal the fixture's (rounded to
// F16 as Ollama's converter stores matrices), the tokenizer keys must be the
// fixture's, the imported model must tokenize the reference strings to the
// reference ids and give the reference logits; and through store_create the
// import must report Ollama's progress, quantize, and leave nothing behind
// when it fails.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>

#include <cmocka.h>

#include "convert/convert.h"
#include "engine/quant/quant.h"
#include "gguf/gguf.h"
#include "json/json.h"
#include "model/model.h"
#include "store/store.h"
#include "testutil.h"

// A safetensors image from a header text and n_data bytes of data.
static uint8_t *st_image(const char *header, size_t n_data, size_t *n)
{
    size_t h = strlen(header);
    *n = 8 + h + n_data;
    uint8_t *p = calloc(1, *n);
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(p + 8, header, h);
    return p;
}

static int parse_header(const char *header, size_t n_data, struct err *e)
{
    size_t n;
    uint8_t *img = st_image(header, n_data, &n);
    struct st_set set = {0};
    int rc = st_parse(&set, img, n, "x.safetensors", e);
    st_set_free(&set);
    free(img);
    return rc;
}

static void test_st_parse_good(void **state)
{
    (void)state;
    size_t n;
    uint8_t *img = st_image("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F16\","
                            "\"shape\":[2,3],\"data_offsets\":[0,12]},\"b\":{\"dtype\":\"F32\","
                            "\"shape\":[1],\"data_offsets\":[12,16]}}",
                            16, &n);
    struct st_set set = {0};
    struct err e = {0};
    assert_int_equal(st_parse(&set, img, n, "x", &e), 0);
    assert_int_equal(set.n, 2);
    assert_string_equal(set.v[0].name, "a");
    assert_int_equal(set.v[0].n_dims, 2);
    assert_int_equal(set.v[0].shape[1], 3);
    assert_int_equal(set.v[1].n_bytes, 4);
    assert_ptr_equal(set.v[1].data, img + n - 4);
    st_set_free(&set);
    free(img);
}

static void test_st_parse_hostile(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        size_t n_data;
        int code;
        const char *msg;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, ERR_FORMAT,
         "past end of file"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, ERR_FORMAT,
         "16 bytes of data for its shape and dtype, header says 8"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, ERR_UNSUPPORTED,
         "dtype I32"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,4]}}", 8, ERR_FORMAT,
         "3 bytes of data for its shape and dtype, header says 4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,0]}}", 8, ERR_FORMAT,
         "invalid data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 8, ERR_FORMAT,
         "invalid shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}",
         8, ERR_FORMAT, "invalid shape"},
        {"[1,2]", 0, ERR_FORMAT, "not a JSON object"},
        {"{\"a\":", 0, ERR_FORMAT, "header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct err e = {0};
        int rc = parse_header(cases[i].header, cases[i].n_data, &e);
        if (rc != cases[i].code || !strstr(e.msg, cases[i].msg))
            fail_msg("case %zu: rc %d msg %s", i, rc, e.msg);
    }
    // A header length past the end of the file.
    uint8_t img[16] = {0xff, 0xff, 0xff, 0, 0, 0, 0, 0};
    struct st_set set = {0};
    struct err e = {0};
    assert_int_equal(st_parse(&set, img, sizeof img, "x", &e), ERR_FORMAT);
    assert_non_null(strstr(e.msg, "does not fit the file"));
    assert_int_equal(st_parse(&set, img, 4, "x", &e), ERR_FORMAT);
}

static void test_vocab_parse(void **state)
{
    (void)state;
    const char *regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
                        "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
                        "\\\\s+(?!\\\\S)|\\\\s+";
    char tok[2048];
    snprintf(tok, sizeof tok,
             "{\"added_tokens\":[{\"id\":4,\"content\":\"<s>\",\"special\":true},"
             "{\"id\":5,\"content\":\"<t>\",\"special\":false}],"
             "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
             "\"pattern\":{\"Regex\":\"%s\"}},{\"type\":\"ByteLevel\"}]},"
             "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},"
             "\"merges\":[[\"a\",\"b\"]]}}",
             regex);
    const char *tcfg = "{\"eos_token\":{\"content\":\"<s>\"},\"add_bos_token\":false,"
                       "\"chat_template\":[{\"name\":\"tool\",\"template\":\"x\"},"
                       "{\"name\":\"default\",\"template\":\"y\"}]}";
    const char *cfg = "{\"vocab_size\":8,\"bos_token_id\":5}";
    struct convert_vocab v;
    struct err e = {0};
    assert_int_equal(
        convert_vocab_parse(&v, tok, strlen(tok), tcfg, strlen(tcfg), cfg, strlen(cfg), &e), 0);
    assert_string_equal(v.pre, "qwen2");
    assert_int_equal(v.n, 8);
    assert_string_equal(v.tokens[3], "[PAD3]");  // a hole
    assert_int_equal(v.types[3], 5);
    assert_int_equal(v.types[4], 3);
    assert_int_equal(v.types[5], 4);
    assert_string_equal(v.tokens[7], "[PAD7]");  // padding to vocab_size
    assert_int_equal(v.n_merges, 1);
    assert_string_equal(v.merges[0], "a b");
    assert_int_equal(v.special[CV_EOS], 4);
    assert_int_equal(v.special[CV_BOS], 5);  // config.json fallback
    assert_int_equal(v.special[CV_UNK], -1);
    assert_int_equal(v.add_bos, 0);
    assert_int_equal(v.add_eos, -1);
    assert_string_equal(v.chat_template, "y");
    convert_vocab_free(&v);

    const char *uni = "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}";
    assert_int_equal(convert_vocab_parse(&v, uni, strlen(uni), NULL, 0, NULL, 0, &e),
                     ERR_UNSUPPORTED);
    const char *bad = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":9999999999}}}";
    assert_int_equal(convert_vocab_parse(&v, bad, strlen(bad), NULL, 0, NULL, 0, &e), ERR_FORMAT);
}

// A config.json without the sizes a model needs is refused (the model could
// be stored but never loaded).
static void test_config_required(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_convert_cfg_XXXXXX", path[600];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *cfg = "{\"architectures\":[\"Gemma2ForCausalLM\"],\"hidden_size\":64}";
    assert_int_equal(fs_write_atomic(path, cfg, strlen(cfg), NULL), 0);
    struct convert_file f = {.name = "config.json", .path = path};
    char out[600];
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    struct err e = {0};
    assert_int_equal(convert_folder(&f, 1, out, NULL, NULL, NULL, &e), ERR_FORMAT);
    assert_string_equal(e.msg,
                        "config.json: num_hidden_layers is missing or not a positive integer");
    unlink(path);
    rmdir(dir);
}

// ---------------------------------------------------------------------------
// Whole folders made from the fixtures.

struct folder {
    char dir[512];
    char *names[16];
    char *paths[16];
    struct convert_file files[16];
    size_t n;
};

// Runs hf-export on a GGUF into a fresh directory and lists its files
// (subfolders too: "1_Pooling/config.json").
static void export_path(struct folder *f, const char *in, const char *args)
{
    char cmd[4096];
    const char *bin = getenv("OLLAMA_BIN_DIR");
    snprintf(f->dir, sizeof f->dir, "/tmp/test_convert_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(cmd, sizeof cmd, "%s/hf-export %s %s/hf %s", bin ? bin : "build/bin", in, f->dir,
             args);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "cd %s/hf && find . -type f | sed 's|^\\./||' | sort", f->dir);
    FILE *p = popen(cmd, "r");
    char line[256];
    f->n = 0;
    while (fgets(line, sizeof line, p) && f->n < 16) {
        line[strcspn(line, "\n")] = '\0';
        f->names[f->n] = strdup(line);
        f->paths[f->n] = xasprintf("%s/hf/%s", f->dir, line);
        f->files[f->n] = (struct convert_file){.name = f->names[f->n], .path = f->paths[f->n]};
        f->n++;
    }
    pclose(p);
}

static bool export_fixture(struct folder *f, const char *fixture, const char *args)
{
    char in[1024];
    if (!test_shared_fixture(in, sizeof in, fixture))
        return false;
    export_path(f, in, args);
    return true;
}

// Leaves a file out of the folder (the converter then reads what else is there).
static void folder_drop(struct folder *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) {
            free(f->names[i]);
            free(f->paths[i]);
            f->n--;
            memmove(&f->names[i], &f->names[i + 1], (f->n - i) * sizeof(f->names[0]));
            memmove(&f->paths[i], &f->paths[i + 1], (f->n - i) * sizeof(f->paths[0]));
            memmove(&f->files[i], &f->files[i + 1], (f->n - i) * sizeof(f->files[0]));
            return;
        }
    fail_msg("%s is not in the folder", name);
}

static void folder_free(struct folder *f)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
        free(f->paths[i]);
    }
}

static float elem(const struct gguf_tensor *t, uint64_t i)
{
    if (t->type == GGUF_TYPE_F32) {
        float v;
        memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
    return t->type == GGUF_TYPE_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
}

// Every fixture tensor is in the converted file with the same shape and the
// same values after the converter's rounding (F32 for 1-D, else F16/BF16).
static void check_tensors(const struct gguf *want, const struct gguf *got, bool bf16_src)
{
    assert_int_equal(gguf_tensor_count(want), gguf_tensor_count(got));
    for (size_t i = 0; i < gguf_tensor_count(want); i++) {
        const struct gguf_tensor *w = gguf_tensor_at(want, i);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)w->name.len, w->name.ptr);
        const struct gguf_tensor *g = gguf_tensor_find(got, name);
        if (!g)
            fail_msg("tensor %s missing", name);
        for (int d = 0; d < 4; d++)
            assert_int_equal(w->ne[d], g->ne[d]);
        bool rope = strcmp(name, "rope_freqs.weight") == 0;
        bool fw = w->type == GGUF_TYPE_F32 || w->type == GGUF_TYPE_F16 || w->type == GGUF_TYPE_BF16;
        if (!fw && w->type == g->type) {  // kept quantized (gpt-oss's MXFP4): the same bytes
            assert_int_equal(w->n_bytes, g->n_bytes);
            if (memcmp(w->data, g->data, w->n_bytes) != 0)
                fail_msg("%s: the quantized blocks differ", name);
            continue;
        }
        float *deq = NULL;  // a quantized fixture tensor (Q8_0) exported as floats
        if (!fw) {
            deq = malloc(gguf_tensor_n_elements(w) * sizeof(float));
            quant_traits_get(w->type)->to_float(w->data, deq, (int64_t)gguf_tensor_n_elements(w));
        }
        for (uint64_t k = 0; k < gguf_tensor_n_elements(w); k++) {
            float a = deq ? deq[k] : elem(w, k), b = elem(g, k);
            if (bf16_src && !rope)  // hf-export --dtype bf16
                a = quant_bf16_to_f32(quant_f32_to_bf16(a));
            if (g->type == GGUF_TYPE_F16)
                a = quant_f16_to_f32(quant_f32_to_f16(a));
            if (rope ? fabsf(a - b) > 1e-5f * fabsf(a) : a != b)
                fail_msg("%s[%llu]: want %g got %g", name, (unsigned long long)k, a, b);
        }
        free(deq);
    }
}

// The keys the fixture has that a converter must reproduce.
static void check_kvs(const struct gguf *want, const struct gguf *got)
{
    static const char *const skip[] = {"general.name", "general.description", "general.file_type",
                                       "general.type"};
    for (size_t i = 0; i < gguf_kv_count(want); i++) {
        const struct gguf_kv *w = gguf_kv_at(want, i);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)w->key.len, w->key.ptr);
        bool skipped = false;
        for (size_t s = 0; s < sizeof skip / sizeof skip[0]; s++)
            skipped |= strcmp(key, skip[s]) == 0;
        uint64_t none = 0;  // "no such token" (llama.cpp writes -1): nothing to reproduce
        if (skipped || (cstr_ends_with(key, "_token_id") && gguf_get_u64(want, key, &none) &&
                        none == UINT32_MAX))
            continue;
        const struct gguf_kv *g = gguf_find(got, key);
        if (!g)
            fail_msg("key %s missing", key);
        if (g->val.type != w->val.type)
            fail_msg("key %s: type %d, want %d", key, g->val.type, w->val.type);
        if (w->val.type == GGUF_VAL_STRING || w->val.type == GGUF_VAL_ARRAY) {
            bool same = w->val.type == GGUF_VAL_STRING
                            ? str_eq(w->val.s, g->val.s)
                            : w->val.arr_bytes == g->val.arr_bytes &&
                                  w->val.arr_count == g->val.arr_count &&
                                  memcmp(w->val.arr_data, g->val.arr_data, w->val.arr_bytes) == 0;
            if (!same)
                fail_msg("key %s differs", key);
        } else if (w->val.v.u64 != g->val.v.u64 && w->val.v.f64 != g->val.v.f64) {
            fail_msg("key %s: value differs", key);
        }
    }
}

static json_t *load_json(const char *path)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(path, 64u << 20, &b, NULL), 0);
    json_t *j = NULL;
    assert_int_equal(jsonx_parse(b.data, b.len, &j, NULL), 0);
    buf_deinit(&b);
    return j;
}

// ---------------------------------------------------------------------------
// Encoders: the imported model's token ids ([CLS] ... [SEP]) and its pooled
// embedding against llama.cpp's reference. The imported matrices are F16,
// the reference's F32: cosine >= 0.9999 as tests/unit/test_bert.c asks of
// the encoder, and each component within 0.01.

#define MIN_COSINE 0.9999

static void check_embedding(struct model *m, const char *text, const json_t *want_ids,
                            const json_t *want_vec)
{
    int32_t ids[512], pos[512], slot[512];
    bool want[512];
    struct err e = {0};
    int n = model_tokenize(m, text, strlen(text), true, false, ids, 512, &e);
    assert_int_equal((size_t)n, json_array_size(want_ids));
    for (int k = 0; k < n; k++) {
        assert_int_equal(ids[k], json_integer_value(json_array_get(want_ids, (size_t)k)));
        pos[k] = k;
        slot[k] = 0;
        want[k] = true;
    }
    model_slot_clear(m, 0);
    struct model_batch b = {.n_tokens = n, .tokens = ids, .pos = pos, .slot = slot, .logits = want};
    assert_int_equal(model_decode(m, &b, &e), 0);
    int d = model_n_embd(m);
    assert_int_equal(json_array_size(want_vec), (size_t)d);
    double got[1024] = {0}, ab = 0, aa = 0, bb = 0;
    assert_true(d <= 1024);
    for (int k = model_pooling(m) == MODEL_POOLING_CLS ? 0 : n - 1; k >= 0; k--) {
        const float *h = model_embeddings(m, k);  // CLS: the first token, mean: all
        for (int j = 0; j < d; j++)
            got[j] += h[j] / (model_pooling(m) == MODEL_POOLING_CLS ? 1.0 : n);
    }
    for (int j = 0; j < d; j++) {
        double w = json_number_value(json_array_get(want_vec, (size_t)j));
        if (fabs(got[j] - w) > 0.01)
            fail_msg("\"%s\" component %d: %f, want %f", text, j, got[j], w);
        ab += got[j] * w;
        aa += got[j] * got[j];
        bb += w * w;
    }
    if (ab / sqrt(aa * bb) < MIN_COSINE)
        fail_msg("\"%s\": cosine %f with the reference", text, ab / sqrt(aa * bb));
}

// A shared reference's embedding_cases (tiny-nomic-bert), mean pooling.
static void check_embedding_cases(const char *path, const json_t *cases)
{
    struct model_options o = {.n_ctx = 512, .n_threads = 2};
    struct model *m = NULL;
    struct err e = {0};
    if (model_load(&m, path, &o, &e) < 0)
        fail_msg("load %s: %s", path, e.msg);
    assert_int_equal(model_pooling(m), MODEL_POOLING_MEAN);
    assert_true(json_array_size(cases) >= 3);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        check_embedding(m, json_string_value(json_object_get(c, "prompt")),
                        json_object_get(c, "prompt_tokens"), json_object_get(c, "embedding"));
    }
    model_free(m);
}

// The reference tokenizer ids, and the reference logits of the F32 K/V
// cases within tol (the imported matrices are F16, the reference's F32);
// for an encoder the reference embeddings.
static void check_reference(const char *path, const char *fixture, const char *ref_name, float tol,
                            bool tokenizer, int skip_prompt)
{
    char ref[1024];
    if (!test_shared_fixture(ref, sizeof ref, ref_name))
        return;
    json_t *r = load_json(ref);
    if (json_object_get(r, "embedding_cases")) {
        check_embedding_cases(path, json_object_get(r, "embedding_cases"));
        json_decref(r);
        return;
    }
    struct model_options o = {.n_ctx = 512, .n_threads = 2, .kv_type = MODEL_KV_F32};
    struct model *m = NULL;
    struct err e = {0};
    if (model_load(&m, path, &o, &e) < 0)
        fail_msg("load %s: %s", path, e.msg);
    json_t *tc = tokenizer ? json_object_get(r, "tokenizer_cases") : NULL;
    int32_t ids[512];
    for (size_t i = 0; i < json_array_size(tc); i++) {
        const json_t *c = json_array_get(tc, i), *want = json_object_get(c, "tokens");
        const char *text = json_string_value(json_object_get(c, "text"));
        int n = model_tokenize(m, text, strlen(text), false, false, ids, 512, &e);
        assert_int_equal((size_t)n, json_array_size(want));
        for (int k = 0; k < n; k++)
            assert_int_equal(ids[k], json_integer_value(json_array_get(want, (size_t)k)));
    }
    json_t *lc = json_object_get(r, "logit_cases");
    int n_checked = 0;
    for (size_t i = 0; i < json_array_size(lc); i++) {
        const json_t *c = json_array_get(lc, i);
        const char *kv = json_string_value(json_object_get(c, "kv_cache_type"));
        const char *file = json_string_value(json_object_get(c, "model"));
        if (strcmp(kv, "f32") != 0 || strcmp(file, fixture) != 0 ||
            json_integer_value(json_object_get(c, "prompt_index")) == skip_prompt)
            continue;
        const json_t *pt = json_object_get(c, "prompt_tokens");
        int n = (int)json_array_size(pt);
        int32_t pos[512], slot[512];
        for (int k = 0; k < n; k++) {
            ids[k] = (int32_t)json_integer_value(json_array_get(pt, (size_t)k));
            pos[k] = k;
            slot[k] = 0;
        }
        model_slot_clear(m, 0);
        struct model_batch b = {.n_tokens = n, .tokens = ids, .pos = pos, .slot = slot};
        assert_int_equal(model_decode(m, &b, &e), 0);
        const float *lg = model_logits(m, n - 1);
        const json_t *top = json_object_get(c, "last_logits_top10");
        for (size_t k = 0; k < json_array_size(top); k++) {
            int id = (int)json_integer_value(json_array_get(json_array_get(top, k), 0));
            double want = json_number_value(json_array_get(json_array_get(top, k), 1));
            if (fabs(lg[id] - want) > tol)
                fail_msg("%s case %zu: logit %d = %f, want %f", ref_name, i, id, lg[id], want);
        }
        n_checked++;
    }
    assert_true(n_checked >= (skip_prompt >= 0 ? 2 : 3));
    model_free(m);
    json_decref(r);
}

// Exports a fixture, converts the folder back and checks the result (the
// logits of every prompt but skip_prompt; -1: all).
static void round_trip_skip(const char *fixture, const char *args, const char *ref_name,
                            const char *arch, float tol, int skip_prompt)
{
    struct folder f;
    if (!export_fixture(&f, fixture, args))
        skip();
    char out[600], want_path[1024];
    snprintf(out, sizeof out, "%s/out.gguf", f.dir);
    struct convert_info info;
    struct err e = {0};
    if (convert_folder(f.files, f.n, out, NULL, NULL, &info, &e) < 0)
        fail_msg("convert: %s", e.msg);
    assert_string_equal(info.arch, arch);
    struct gguf *want, *got;
    assert_non_null(test_shared_fixture(want_path, sizeof want_path, fixture));
    assert_int_equal(gguf_open(&want, want_path, &e), 0);
    assert_int_equal(gguf_open(&got, out, &e), 0);
    check_tensors(want, got, strstr(args, "bf16") != NULL);
    bool full_vocab = strstr(args, "--vocab-limit") == NULL;
    if (full_vocab)
        check_kvs(want, got);
    gguf_close(want);
    gguf_close(got);
    check_reference(out, fixture, ref_name, tol, full_vocab, skip_prompt);
    folder_free(&f);
}

static void round_trip(const char *fixture, const char *args, const char *ref_name,
                       const char *arch, float tol)
{
    round_trip_skip(fixture, args, ref_name, arch, tol, -1);
}

// Llama 3 shape: Q/K rows permuted, rope_freqs from rope_scaling, two shards,
// merges as [a, b] pairs.
static void test_llama_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-llama-f32.gguf", "--shards 2 --merges pairs --rope-llama3 32,1,4,8192",
               "tiny-llama.reference.json", "llama", 0.02f);
}

// Qwen3: head_dim apart from hidden/heads, q/k norms, BF16 source.
static void test_qwen3_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-qwen3-f32.gguf", "--dtype bf16 --vocab-limit 300", "tiny-qwen3.reference.json",
               "qwen3", 0.1f);
}

// Qwen3-MoE: the per-expert HF tensors stacked back into one per projection.
static void test_qwen3moe_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-qwen3moe-f32.gguf", "--vocab-limit 300", "tiny-qwen3moe.reference.json",
               "qwen3moe", 0.02f);
}

// Gemma 2: SentencePiece tokenizer.model, norms stored as w - 1, four norms
// per block, soft-capping and sliding window keys.
static void test_gemma2_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-gemma2-f32.gguf", "", "tiny-gemma2.reference.json", "gemma2", 0.02f);
}

// Gemma 3 (text): q/k norms + 1 too, linear RoPE scaling, six blocks.
static void test_gemma3_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-gemma3-f32.gguf", "", "tiny-gemma3.reference.json", "gemma3", 0.02f);
}

// Mixtral: llama with block_sparse_moe experts (w1/w3/w2) stacked, Q/K
// permuted, SentencePiece vocabulary.
static void test_mixtral_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-mixtral-f32.gguf", "", "tiny-mixtral.reference.json", "llama", 0.02f);
}

// Phi-3: fused QKV and gate/up, LongRoPE factor tensors from rope_scaling,
// partial rotary dimension, SentencePiece vocabulary.
static void test_phi3_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-phi3-f32.gguf", "", "tiny-phi3.reference.json", "phi3", 0.02f);
}

// nomic-embed-text: GPT-2-style config.json (n_embd, n_positions and
// max_trained_positions, rotary_emb_base), WordPiece tokenizer.json, fused
// Wqkv, SwiGLU fc11/fc12, mean pooling from modules.json.
static void test_nomic_bert_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-nomic-bert-f32.gguf", "", "tiny-nomic-bert.reference.json", "nomic-bert", 0);
}

// BERT: a gguf-gen tiny-bert (the model tests/fixtures/bert/reference.json
// was made from) exported with BertModel names and mean pooling, imported
// from vocab.txt alone (no tokenizer.json); tensors and keys as generated,
// token ids and the llama.cpp embeddings of the reference.
static void test_bert_round_trip(void **state)
{
    (void)state;
    const char *bin = getenv("OLLAMA_BIN_DIR");
    char vocab[1024], ref_path[1024], gen[600], cmd[4096];
    test_fixture(vocab, sizeof vocab, "vocab/ggml-vocab-bert-bge.gguf");
    test_fixture(ref_path, sizeof ref_path, "bert/reference.json");
    char dir[] = "/tmp/test_convert_bert_XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(gen, sizeof gen, "%s/tiny-bert.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s/gguf-gen --preset tiny-bert --seed 1 --vocab %s --quiet -o %s",
             bin ? bin : "build/bin", vocab, gen);
    assert_int_equal(system(cmd), 0);
    struct folder f;
    export_path(&f, gen, "");
    folder_drop(&f, "tokenizer.json");
    char out[600];
    snprintf(out, sizeof out, "%s/out.gguf", f.dir);
    struct convert_info info;
    struct err e = {0};
    if (convert_folder(f.files, f.n, out, NULL, NULL, &info, &e) < 0)
        fail_msg("convert: %s", e.msg);
    assert_string_equal(info.arch, "bert");
    struct gguf *want, *got;
    assert_int_equal(gguf_open(&want, gen, &e), 0);
    assert_int_equal(gguf_open(&got, out, &e), 0);
    check_tensors(want, got, false);
    check_kvs(want, got);
    gguf_close(want);
    gguf_close(got);
    json_t *ref = load_json(ref_path);
    const json_t *inputs = json_object_get(ref, "inputs");
    const json_t *rm = json_object_get(json_object_get(ref, "models"), "tiny-bert");
    struct model_options o = {.n_ctx = 512, .n_threads = 2};
    struct model *m = NULL;
    if (model_load(&m, out, &o, &e) < 0)
        fail_msg("load: %s", e.msg);
    assert_int_equal(model_pooling(m), MODEL_POOLING_MEAN);
    for (size_t i = 0; i < 3; i++)
        check_embedding(m, json_string_value(json_array_get(inputs, i)),
                        json_array_get(json_object_get(rm, "tokens"), i),
                        json_array_get(json_object_get(rm, "mean"), i));
    model_free(m);
    json_decref(ref);
    folder_free(&f);
    unlink(gen);
    rmdir(dir);
}

// gpt-oss from floats: the experts as a dequantized checkpoint has them
// (gate_up_proj [E, n_in, 2 x rows] interleaved, down_proj transposed),
// biases split, sinks, router, YaRN; full GPT-2 vocabulary.
static void test_gptoss_round_trip(void **state)
{
    (void)state;
    round_trip("tiny-gpt-oss-f32.gguf", "", "tiny-gpt-oss.reference.json", "gpt-oss", 0.02f);
}

// gpt-oss as OpenAI ships it: MXFP4 experts (*_blocks / *_scales) that the
// import keeps as MXFP4, byte for byte the fixture's; the fixture's Q8_0
// matrices exported as floats and imported as F16. The reference ran those
// matrices as Q8_0, quantizing their inputs: prompts 1 and 2 stay within
// 5e-2 (measured 0.028); prompt 0 sits on a router near-tie that moves its
// logits by 0.46 here (llama.cpp's own F32 and F16 cache runs differ by 0.3
// there, fixtures/README.md), so it is left out.
static void test_gptoss_mxfp4_round_trip(void **state)
{
    (void)state;
    round_trip_skip("tiny-gpt-oss-mxfp4.gguf", "--vocab-limit 300", "tiny-gpt-oss.reference.json",
                    "gpt-oss", 0.05f, 0);
}

// gpt-oss expert tensors that do not fit: refused naming the tensor.
static void test_gptoss_refused(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        size_t n_data;
        int code;
        const char *msg;
    } cases[] = {
        {"{\"model.layers.0.mlp.experts.gate_up_proj_blocks\":{\"dtype\":\"U8\",\"shape\":[1,2,1,"
         "16],"
         "\"data_offsets\":[0,32]}}",
         32, ERR_FORMAT, "has no model.layers.0.mlp.experts.gate_up_proj_scales"},
        {"{\"model.layers.0.mlp.experts.down_proj_scales\":{\"dtype\":\"U8\",\"shape\":[1,2,1],"
         "\"data_offsets\":[0,2]}}",
         2, ERR_FORMAT, "has no model.layers.0.mlp.experts.down_proj_blocks"},
        {"{\"model.layers.0.mlp.experts.down_proj_blocks\":{\"dtype\":\"U8\",\"shape\":[1,2,1,15],"
         "\"data_offsets\":[0,30]},\"model.layers.0.mlp.experts.down_proj_scales\":{\"dtype\":"
         "\"U8\",\"shape\":[1,2,1],\"data_offsets\":[30,32]}}",
         32, ERR_FORMAT, "unexpected shape or dtype for gpt-oss experts"},
        {"{\"model.layers.0.mlp.experts.gate_up_proj\":{\"dtype\":\"F32\",\"shape\":[1,2,3],"
         "\"data_offsets\":[0,24]}}",
         24, ERR_FORMAT, "3 fused gate/up rows are odd"},
        {"{\"model.layers.0.mlp.experts.w9\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4]}}",
         4, ERR_UNSUPPORTED, "not a gpt-oss expert tensor"},
        {"{\"model.layers.0.self_attn.q_proj.weight\":{\"dtype\":\"U8\",\"shape\":[2,2],"
         "\"data_offsets\":[0,4]}}",
         4, ERR_UNSUPPORTED, "dtype U8 cannot be converted"},
    };
    char dir[] = "/tmp/test_convert_gptoss_XXXXXX", cfg[600], tok[600], st[600], out[600];
    assert_non_null(mkdtemp(dir));
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    const char *c = "{\"architectures\":[\"GptOssForCausalLM\"],\"num_hidden_layers\":1,"
                    "\"hidden_size\":32,\"num_attention_heads\":1}";
    const char *t = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    assert_int_equal(fs_write_atomic(cfg, c, strlen(c), NULL), 0);
    assert_int_equal(fs_write_atomic(tok, t, strlen(t), NULL), 0);
    struct convert_file files[] = {
        {"config.json", cfg}, {"tokenizer.json", tok}, {"model.safetensors", st}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        uint8_t *img = st_image(cases[i].header, cases[i].n_data, &n);
        assert_int_equal(fs_write_atomic(st, img, n, NULL), 0);
        free(img);
        struct err e = {0};
        int rc = convert_folder(files, 3, out, NULL, NULL, NULL, &e);
        if (rc != cases[i].code || !strstr(e.msg, cases[i].msg))
            fail_msg("case %zu: rc %d msg %s", i, rc, e.msg);
    }
    unlink(cfg);
    unlink(tok);
    unlink(st);
    unlink(out);
    rmdir(dir);
}

// A PEFT folder made from the tiny Qwen2 LoRA converts back to the fixture
// (F16 matrices), and is refused against a base model of other shapes.
static void test_adapter_round_trip(void **state)
{
    (void)state;
    struct folder f;
    char base[1024], want_path[1024], other[1024];
    if (!test_shared_fixture(base, sizeof base, "tiny-qwen2-f32.gguf") ||
        !test_shared_fixture(other, sizeof other, "tiny-qwen3-f32.gguf") ||
        !export_fixture(&f, "tiny-qwen2-lora-f32.gguf", ""))
        skip();
    char out[600];
    snprintf(out, sizeof out, "%s/lora.gguf", f.dir);
    struct convert_info info;
    struct err e = {0};
    if (convert_adapter(f.files, f.n, base, out, &info, &e) < 0)
        fail_msg("convert: %s", e.msg);
    struct gguf *want, *got;
    assert_non_null(test_shared_fixture(want_path, sizeof want_path, "tiny-qwen2-lora-f32.gguf"));
    assert_int_equal(gguf_open(&want, want_path, &e), 0);
    assert_int_equal(gguf_open(&got, out, &e), 0);
    check_tensors(want, got, false);
    check_kvs(want, got);
    gguf_close(want);
    gguf_close(got);
    assert_int_equal(convert_adapter(f.files, f.n, other, out, &info, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "adapter does not match the base model: blk.0.attn_q.weight"));
    folder_free(&f);
}

// ---------------------------------------------------------------------------
// Through the store, as /api/create with uploaded files.

struct statuses {
    char *v[64];
    size_t n;
};

static void on_progress(void *ctx, const struct store_progress *p)
{
    struct statuses *s = ctx;
    if (s->n < 64 && (s->n == 0 || strcmp(s->v[s->n - 1], p->status) != 0))
        s->v[s->n++] = strdup(p->status);
}

static bool has_status(const struct statuses *s, const char *want)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], want) == 0)
            return true;
    return false;
}

// Uploads the folder's files as blobs and fills req.files.
static void upload(struct store *st, const struct folder *f, struct store_create_req *req)
{
    req->files = calloc(f->n, sizeof(*req->files));
    for (size_t i = 0; i < f->n; i++) {
        struct buf b;
        buf_init(&b, 0);
        assert_int_equal(fs_read_all(f->paths[i], 1u << 30, &b, NULL), 0);
        char digest[STORE_DIGEST_LEN + 1];
        bool existed;
        assert_int_equal(store_blob_put(st, b.data, b.len, digest, &existed, NULL), 0);
        buf_deinit(&b);
        req->files[i].name = strdup(f->names[i]);
        req->files[i].digest = strdup(digest);
    }
    req->n_files = f->n;
}

static void test_store_import(void **state)
{
    (void)state;
    struct folder f;
    if (!export_fixture(&f, "tiny-qwen2-f32.gguf", "--vocab-limit 300"))
        skip();
    char root[600];
    snprintf(root, sizeof root, "%s/store", f.dir);
    struct store *st;
    struct err e = {0};
    assert_int_equal(store_open(&st, root, &e), 0);
    struct store_create_req req = {.model = strdup("imported:q8"), .quantize = strdup("q8_0")};
    upload(st, &f, &req);
    struct statuses ss = {0};
    struct store_create_opts o = {.progress = on_progress, .progress_ctx = &ss};
    if (store_create(st, &req, &o, &e) < 0)
        fail_msg("create: %s", e.msg);
    assert_true(has_status(&ss, "converting model"));
    assert_true(has_status(&ss, "quantizing F16 model to Q8_0"));
    assert_true(has_status(&ss, "success"));
    struct store_model *m;
    assert_int_equal(store_model_load(st, "imported:q8", &m, &e), 0);
    assert_string_equal(m->config.model_family, "qwen2");
    assert_string_equal(m->config.file_type, "Q8_0");
    store_model_free(m);
    struct store_check_report r;
    assert_int_equal(store_check(st, &r, &e), 0);
    assert_int_equal(r.n_temporary, 0);
    store_check_report_deinit(&r);
    for (size_t i = 0; i < ss.n; i++)
        free(ss.v[i]);
    store_create_req_deinit(&req);
    store_close(st);
    folder_free(&f);
}

// An architecture the converter does not know: a clear error naming it,
// no manifest, no converted blob and no temporary file left.
static void test_store_import_unsupported(void **state)
{
    (void)state;
    struct folder f;
    if (!export_fixture(&f, "tiny-qwen2-f32.gguf", "--vocab-limit 300"))
        skip();
    for (size_t i = 0; i < f.n; i++)
        if (strcmp(f.names[i], "config.json") == 0) {
            const char *cfg = "{\"architectures\":[\"FooForCausalLM\"]}";
            assert_int_equal(fs_write_atomic(f.paths[i], cfg, strlen(cfg), NULL), 0);
        }
    char root[600];
    snprintf(root, sizeof root, "%s/store", f.dir);
    struct store *st;
    struct err e = {0};
    assert_int_equal(store_open(&st, root, &e), 0);
    struct store_create_req req = {.model = strdup("bad")};
    upload(st, &f, &req);
    assert_int_equal(store_create(st, &req, NULL, &e), ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "unsupported architecture \"FooForCausalLM\""));
    struct store_model *m;
    assert_int_equal(store_model_load(st, "bad", &m, NULL), ERR_NOT_FOUND);
    struct store_check_report r;
    assert_int_equal(store_check(st, &r, &e), 0);
    assert_int_equal(r.n_temporary, 0);
    assert_int_equal(r.n_orphaned, f.n);  // only the uploads, nothing converted
    store_check_report_deinit(&r);
    store_create_req_deinit(&req);
    store_close(st);
    folder_free(&f);
}

// ADAPTER <PEFT folder> over an uploaded GGUF base: "converting adapter",
// an adapter layer llama.cpp's loader accepts; against another base the
// create fails naming the mismatch and leaves no converted blob.
static void test_store_adapter(void **state)
{
    (void)state;
    struct folder f, base;
    if (!export_fixture(&f, "tiny-qwen2-lora-f32.gguf", ""))
        skip();
    char root[600], path[1024];
    snprintf(root, sizeof root, "%s/store", f.dir);
    struct store *st;
    struct err e = {0};
    assert_int_equal(store_open(&st, root, &e), 0);
    struct store_create_req req = {.model = strdup("tuned")};
    upload(st, &f, &req);  // the PEFT files become the adapters, the base the files
    req.adapters = req.files;
    req.n_adapters = req.n_files;
    char base_name[] = "tiny-qwen2-f32.gguf";
    base.n = 1;
    base.names[0] = base_name;
    base.paths[0] = path;
    assert_non_null(test_shared_fixture(path, sizeof path, base_name));
    upload(st, &base, &req);
    struct statuses ss = {0};
    struct store_create_opts o = {.progress = on_progress, .progress_ctx = &ss};
    if (store_create(st, &req, &o, &e) < 0)
        fail_msg("create: %s", e.msg);
    assert_true(has_status(&ss, "converting adapter"));
    struct store_model *m;
    assert_int_equal(store_model_load(st, "tuned", &m, &e), 0);
    assert_int_equal(m->n_adapters, 1);
    struct gguf *g;
    assert_int_equal(gguf_open(&g, m->adapter_paths[0], &e), 0);
    struct str type;
    assert_true(gguf_get_str(g, "general.type", &type) && str_eq_cstr(type, "adapter"));
    assert_int_equal(gguf_tensor_count(g), 12);
    gguf_close(g);
    store_model_free(m);
    // The same adapter over tiny-qwen3 (other shapes) is refused.
    free(req.model);
    req.model = strdup("mismatch");
    free(req.files[0].digest);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(fs_read_all(test_shared_fixture(path, sizeof path, "tiny-qwen3-f32.gguf"),
                                 1u << 30, &b, NULL),
                     0);
    req.files[0].digest = xcalloc(1, STORE_DIGEST_LEN + 1);
    bool existed;
    assert_int_equal(store_blob_put(st, b.data, b.len, req.files[0].digest, &existed, NULL), 0);
    buf_deinit(&b);
    assert_int_equal(store_create(st, &req, NULL, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "adapter does not match the base model"));
    struct store_check_report r;
    assert_int_equal(store_check(st, &r, &e), 0);
    assert_int_equal(r.n_temporary, 0);
    assert_int_equal(r.n_orphaned, f.n + 1);  // the uploads (PEFT files, tiny-qwen3) only
    store_check_report_deinit(&r);
    for (size_t i = 0; i < ss.n; i++)
        free(ss.v[i]);
    store_create_req_deinit(&req);
    store_close(st);
    folder_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_st_parse_good),
        cmocka_unit_test(test_st_parse_hostile),
        cmocka_unit_test(test_vocab_parse),
        cmocka_unit_test(test_llama_round_trip),
        cmocka_unit_test(test_qwen3_round_trip),
        cmocka_unit_test(test_qwen3moe_round_trip),
        cmocka_unit_test(test_store_import),
        cmocka_unit_test(test_store_import_unsupported),
        cmocka_unit_test(test_adapter_round_trip),
        cmocka_unit_test(test_store_adapter),
        cmocka_unit_test(test_gemma2_round_trip),
        cmocka_unit_test(test_config_required),
        cmocka_unit_test(test_gemma3_round_trip),
        cmocka_unit_test(test_mixtral_round_trip),
        cmocka_unit_test(test_phi3_round_trip),
        cmocka_unit_test(test_nomic_bert_round_trip),
        cmocka_unit_test(test_bert_round_trip),
        cmocka_unit_test(test_gptoss_round_trip),
        cmocka_unit_test(test_gptoss_mxfp4_round_trip),
        cmocka_unit_test(test_gptoss_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

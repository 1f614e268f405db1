// The vocabulary of a Hugging Face folder as GGUF tokenizer keys:
// tokenizer.json (byte-level BPE: model.vocab, model.merges, added_tokens,
// and the pre-tokenizer, identified as Ollama's converter does by the
// SHA-256 of its Split regexes), tokenizer_config.json (special tokens,
// add_bos/add_eos, chat_template) and config.json (vocab_size, token ids the
// tokenizer files leave out).
#include "convert/internal.h"

#include <stdlib.h>
#include <string.h>

// llama.cpp token types.
enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

#define VOCAB_MAX (1u << 21)  // the largest real vocabularies are ~262k

// SHA-256 of the concatenated Split regexes → tokenizer.ggml.pre
// (convert/tokenizer.go); the empty digest means no Split at all.
static const struct {
    const char *digest, *pre;
} pre_digests[] = {
    {"d98f9631be1e9607a9848c26c1f9eac1aa9fc21ac6ba82a2fc0741af9780a48f", "llama-bpe"},
    {"03df5c5863ad70781dcfdef491ead25140f895fe8010964be0daefe27be32b02", "deepseek-llm"},
    {"21cde974d587f0d54dc8d56b183cc1e6239600172035c68fbd6d4b9f8da0576e", "deepseek-coder"},
    {"1ff7f41064896984db5d1bb6ff64fa4bc29007d08c1b439e505b7392777a319e", "qwen2"},
    {"00431aed57e696b747435f734d1e3b9b1bfd931a121fb5cac7129e97c181e9ba", "qwen35"},
    {"b92c0824a58e1d8dc3221cf3e12c433c3a86f57e46d57229993489f0798e7702", "laguna"},
    // Beyond Ollama's table (which forces gpt-4o for gpt-oss): GPT-2's
    // regex as tiktoken spells it, and o200k's (gpt-oss, GPT-4o).
    {"eeb55ba74cc544ae7067587b680d16521d9891de9e94c7ba9412c0e0e93b1c36", "gpt-2"},
    {"2d1b8dc11e89af71459b36004f698ab3693f59fd84f63e8ec2b49564ab857420", "gpt-4o"},
};

static const char *const special_names[CV_SPECIAL_N] = {"bos", "eos", "unk", "sep",
                                                        "pad", "cls", "mask"};

static void detect_pre(struct convert_vocab *v, const json_t *tok)
{
    const json_t *pre = json_object_get(tok, "pre_tokenizer");
    const json_t *list = json_object_get(pre, "pretokenizers");
    struct buf b;
    buf_init(&b, 0);
    if (json_is_object(pre) && !json_is_array(list)) {  // a single pre-tokenizer
        list = NULL;
        const char *type = json_string_value(json_object_get(pre, "type"));
        const char *re =
            json_string_value(json_object_get(json_object_get(pre, "pattern"), "Regex"));
        if (type && re && strcmp(type, "Split") == 0)
            buf_append_str(&b, re);
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *p = json_array_get(list, i);
        const char *type = json_string_value(json_object_get(p, "type"));
        const char *re = json_string_value(json_object_get(json_object_get(p, "pattern"), "Regex"));
        if (type && re && strcmp(type, "Split") == 0)
            buf_append_str(&b, re);
    }
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(b.data ? b.data : "", b.len, hex);
    buf_deinit(&b);
    snprintf(v->pre, sizeof v->pre, "default");
    for (size_t i = 0; i < sizeof pre_digests / sizeof pre_digests[0]; i++)
        if (strcmp(hex, pre_digests[i].digest) == 0)
            snprintf(v->pre, sizeof v->pre, "%s", pre_digests[i].pre);
}

static int set_token(struct convert_vocab *v, int64_t id, const char *text, int32_t type,
                     struct err *e)
{
    if (id < 0 || (uint64_t)id >= v->n)
        return err_set(e, ERR_FORMAT, "tokenizer.json: token id %" PRId64 " out of range", id);
    free(v->tokens[id]);
    v->tokens[id] = xstrdup(text);
    v->types[id] = type;
    return 0;
}

// The vocabulary size: one past the largest id, or config.json's vocab_size
// when larger.
static int vocab_size(const json_t *vocab, const json_t *added, const json_t *config, size_t *n,
                      struct err *e)
{
    int64_t max = -1;
    const char *k;
    json_t *id;
    json_object_foreach((json_t *)vocab, k, id)
    {
        if (!json_is_integer(id) || json_integer_value(id) < 0)
            return err_set(e, ERR_FORMAT, "tokenizer.json: token %s has an invalid id", k);
        if (json_integer_value(id) > max)
            max = json_integer_value(id);
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *t = json_array_get(added, i), *tid = json_object_get(t, "id");
        if (!json_is_integer(tid) || json_integer_value(tid) < 0 ||
            !json_is_string(json_object_get(t, "content")))
            return err_set(e, ERR_FORMAT, "tokenizer.json: added token %zu is invalid", i);
        if (json_integer_value(tid) > max)
            max = json_integer_value(tid);
    }
    const json_t *vs = json_object_get(config, "vocab_size");
    if (json_is_integer(vs) && json_integer_value(vs) > max + 1)
        max = json_integer_value(vs) - 1;
    if (max < 0)
        return err_set(e, ERR_FORMAT, "tokenizer.json: empty vocabulary");
    if (max >= (int64_t)VOCAB_MAX)
        return err_set(e, ERR_FORMAT, "tokenizer.json: token id %" PRId64 " is too large", max);
    *n = (size_t)max + 1;
    return 0;
}

static int read_tokens(struct convert_vocab *v, const json_t *model, const json_t *added,
                       const json_t *config, struct err *e)
{
    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return err_set(e, ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
    int rc = vocab_size(vocab, added, config, &v->n, e);
    if (rc < 0)
        return rc;
    v->tokens = xcalloc(v->n, sizeof(char *));
    v->types = xcalloc(v->n, sizeof(int32_t));
    const char *k;
    json_t *id;
    json_object_foreach((json_t *)vocab, k, id)
    {
        if ((rc = set_token(v, json_integer_value(id), k, TT_NORMAL, e)) < 0)
            return rc;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *t = json_array_get(added, i);
        bool special = json_is_true(json_object_get(t, "special"));
        rc = set_token(v, json_integer_value(json_object_get(t, "id")),
                       json_string_value(json_object_get(t, "content")),
                       special ? TT_CONTROL : TT_USER, e);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < v->n; i++)  // holes and padding up to vocab_size
        if (!v->tokens[i]) {
            v->tokens[i] = xasprintf("[PAD%zu]", i);
            v->types[i] = TT_UNUSED;
        }
    return 0;
}

// merges: ["a b", ...] or [["a", "b"], ...].
static int read_merges(struct convert_vocab *v, const json_t *model, struct err *e)
{
    const json_t *m = json_object_get(model, "merges");
    if (!m || json_is_null(m))
        return 0;
    if (!json_is_array(m))
        return err_set(e, ERR_FORMAT, "tokenizer.json: model.merges is not an array");
    v->merges = xcalloc(json_array_size(m) + 1, sizeof(char *));
    for (size_t i = 0; i < json_array_size(m); i++) {
        const json_t *x = json_array_get(m, i);
        const char *a = json_string_value(json_array_get(x, 0));
        const char *b = json_string_value(json_array_get(x, 1));
        if (json_is_string(x))
            v->merges[v->n_merges++] = xstrdup(json_string_value(x));
        else if (json_array_size(x) == 2 && a && b)
            v->merges[v->n_merges++] = xasprintf("%s %s", a, b);
        else
            return err_set(e, ERR_FORMAT,
                           "tokenizer.json: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i);
    }
    return 0;
}

static int64_t find_token(const struct convert_vocab *v, const char *text)
{
    for (size_t i = v->n; i-- > 0;)  // added tokens sit at the end
        if (strcmp(v->tokens[i], text) == 0)
            return (int64_t)i;
    return -1;
}

// Special token ids: tokenizer_config.json's "<t>_token" (a string or
// {"content": ...}) by its text, else config.json's "<t>_token_id".
static void read_specials(struct convert_vocab *v, const json_t *tcfg, const json_t *config)
{
    for (int s = 0; s < CV_SPECIAL_N; s++) {
        v->special[s] = -1;
        char key[32];
        snprintf(key, sizeof key, "%s_token", special_names[s]);
        const json_t *t = json_object_get(tcfg, key);
        if (json_is_object(t))
            t = json_object_get(t, "content");
        if (json_is_string(t))
            v->special[s] = find_token(v, json_string_value(t));
        snprintf(key, sizeof key, "%s_token_id", special_names[s]);
        const json_t *id = json_object_get(config, key);
        if (v->special[s] < 0 && json_is_integer(id) && json_integer_value(id) >= 0 &&
            (uint64_t)json_integer_value(id) < v->n)
            v->special[s] = json_integer_value(id);
    }
    const json_t *ab = json_object_get(tcfg, "add_bos_token");
    const json_t *ae = json_object_get(tcfg, "add_eos_token");
    v->add_bos = json_is_boolean(ab) ? json_is_true(ab) : -1;
    v->add_eos = json_is_boolean(ae) ? json_is_true(ae) : -1;
}

// chat_template: a string, or [{"name": "default", "template": ...}, ...].
static int read_template(struct convert_vocab *v, const json_t *tcfg, struct err *e)
{
    const json_t *t = json_object_get(tcfg, "chat_template");
    if (!t || json_is_null(t))
        return 0;
    if (json_is_string(t)) {
        v->chat_template = xstrdup(json_string_value(t));
        return 0;
    }
    if (!json_is_array(t))
        return err_set(e, ERR_FORMAT, "tokenizer_config.json: invalid chat_template");
    for (size_t i = 0; i < json_array_size(t); i++) {
        const json_t *x = json_array_get(t, i);
        const char *name = json_string_value(json_object_get(x, "name"));
        const char *text = json_string_value(json_object_get(x, "template"));
        if (name && text && strcmp(name, "default") == 0 && !v->chat_template)
            v->chat_template = xstrdup(text);
    }
    return 0;
}

static int parse_opt(const char *text, size_t n, const char *what, json_t **out, struct err *e)
{
    *out = NULL;
    if (!text)
        return 0;
    struct err je = {0};
    if (jsonx_parse(text, n, out, &je) < 0)
        return err_set(e, ERR_FORMAT, "%s: %s", what, je.msg);
    if (!json_is_object(*out))
        return err_set(e, ERR_FORMAT, "%s: not a JSON object", what);
    return 0;
}

// ---------------------------------------------------------------------------
// WordPiece (BERT): llama.cpp's "bert" vocabulary stores word-initial pieces
// with a leading U+2581 and continuation pieces ("##ing") without their
// prefix; bracketed tokens ([CLS], [unused0], [PAD5]) stay as they are (the
// rule of Ollama's converter and of the vocabularies llama.cpp ships).
// The special tokens are control tokens whichever file listed them.
static void wordpiece_finish(struct convert_vocab *v)
{
    for (size_t i = 0; i < v->n; i++) {
        char *t = v->tokens[i];
        size_t l = strlen(t);
        if ((l >= 2 && t[0] == '[' && t[l - 1] == ']') || v->types[i] == TT_CONTROL)
            continue;
        v->tokens[i] = cstr_starts_with(t, "##") ? xstrdup(t + 2) : xasprintf("\xe2\x96\x81%s", t);
        free(t);
    }
    for (int s = 0; s < CV_SPECIAL_N; s++)
        if (v->special[s] >= 0 && v->types[v->special[s]] == TT_NORMAL)
            v->types[v->special[s]] = TT_CONTROL;
    // The pre-tokenizer is not read for WordPiece vocabularies; llama.cpp
    // names BERT's (bge, nomic-embed-text) so.
    snprintf(v->pre, sizeof v->pre, "bert-bge");
}

int convert_vocab_parse_wordpiece(struct convert_vocab *v, const char *vocab_txt, size_t n_txt,
                                  const char *tokenizer_config, size_t n_cfg,
                                  const char *config_json, size_t n_config, struct err *e)
{
    memset(v, 0, sizeof(*v));
    v->wpm = true;
    size_t lines = 0;
    for (size_t i = 0; i < n_txt; i++)
        lines += vocab_txt[i] == '\n';
    if (n_txt && vocab_txt[n_txt - 1] != '\n')
        lines++;
    json_t *tcfg = NULL, *config = NULL;
    int rc = lines == 0           ? err_set(e, ERR_FORMAT, "vocab.txt: empty vocabulary")
             : lines >= VOCAB_MAX ? err_set(e, ERR_FORMAT, "vocab.txt: too many tokens")
                                  : 0;
    if (rc == 0)
        rc = parse_opt(tokenizer_config, n_cfg, "tokenizer_config.json", &tcfg, e);
    if (rc == 0)
        rc = parse_opt(config_json, n_config, "config.json", &config, e);
    if (rc == 0) {
        const json_t *vs = json_object_get(config, "vocab_size");
        v->n = lines;
        if (json_is_integer(vs) && json_integer_value(vs) > (json_int_t)lines &&
            json_integer_value(vs) < (json_int_t)VOCAB_MAX)
            v->n = (size_t)json_integer_value(vs);
        v->tokens = xcalloc(v->n, sizeof(char *));
        v->types = xcalloc(v->n, sizeof(int32_t));
        const char *p = vocab_txt, *end = vocab_txt + n_txt;
        for (size_t i = 0; i < lines; i++) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t l = (size_t)((nl ? nl : end) - p);
            if (l && p[l - 1] == '\r')
                l--;
            v->tokens[i] = xstrndup(p, l);
            v->types[i] = TT_NORMAL;
            p = nl ? nl + 1 : end;
        }
        for (size_t i = lines; i < v->n; i++) {
            v->tokens[i] = xasprintf("[PAD%zu]", i);
            v->types[i] = TT_UNUSED;
        }
        read_specials(v, tcfg, config);
        wordpiece_finish(v);
    }
    json_decref(tcfg);
    json_decref(config);
    if (rc < 0)
        convert_vocab_free(v);
    return rc;
}

// ---------------------------------------------------------------------------
// sentence-transformers pooling (modules.json, <Pooling dir>/config.json).

int convert_pooling_parse(const char *modules_json, size_t n_modules, char **dir, struct err *e)
{
    *dir = NULL;
    json_t *m = NULL;
    struct err je = {0};
    if (jsonx_parse(modules_json, n_modules, &m, &je) < 0)
        return err_set(e, ERR_FORMAT, "modules.json: %s", je.msg);
    int rc = json_is_array(m) ? 0 : err_set(e, ERR_FORMAT, "modules.json: not a JSON array");
    for (size_t i = 0; rc == 0 && i < json_array_size(m) && !*dir; i++) {
        const json_t *x = json_array_get(m, i);
        const char *type = json_string_value(json_object_get(x, "type"));
        const char *path = json_string_value(json_object_get(x, "path"));
        if (!type || !cstr_ends_with(type, "Pooling"))
            continue;
        // A folder of the model, not a path out of it.
        if (!path || !path[0] || path[0] == '/' || strstr(path, "..") || strlen(path) > 200)
            rc = err_set(e, ERR_FORMAT, "modules.json: invalid path of the Pooling module");
        else
            *dir = xstrdup(path);
    }
    json_decref(m);
    return rc;
}

int convert_pooling_mode(const char *pooling_config, size_t n_cfg, int32_t *pooling, struct err *e)
{
    static const struct {
        const char *flag, *mode;
        int32_t type;
    } modes[] = {
        {"pooling_mode_mean_tokens", "mean", 1},
        {"pooling_mode_cls_token", "cls", 2},
        {"pooling_mode_lasttoken", "lasttoken", 3},
    };
    json_t *c = NULL;
    int rc = parse_opt(pooling_config, n_cfg, "pooling config.json", &c, e);
    if (rc == 0 && !c)
        rc = err_set(e, ERR_FORMAT, "modules.json names a Pooling module without config.json");
    const char *mode = json_string_value(json_object_get(c, "pooling_mode"));
    *pooling = -1;
    for (size_t i = 0; rc == 0 && *pooling < 0 && i < sizeof modes / sizeof modes[0]; i++)
        if (json_is_true(json_object_get(c, modes[i].flag)))
            *pooling = modes[i].type;
    for (size_t i = 0; rc == 0 && *pooling < 0 && mode && i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(mode, modes[i].mode) == 0)
            *pooling = modes[i].type;
    if (rc == 0 && *pooling < 0)
        rc = err_set(e, ERR_UNSUPPORTED,
                     "pooling config.json: only mean, cls and lasttoken pooling are supported");
    json_decref(c);
    return rc;
}

static int parse_tokenizer(struct convert_vocab *v, const json_t *tok, const json_t *tcfg,
                           const json_t *config, struct err *e)
{
    const json_t *model = json_object_get(tok, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model))
        return err_set(e, ERR_FORMAT, "tokenizer.json: no model object");
    v->wpm = type && strcmp(type, "WordPiece") == 0;
    if (type && strcmp(type, "BPE") != 0 && !v->wpm)
        return err_set(e, ERR_UNSUPPORTED,
                       "tokenizer.json: tokenizer model %s is not supported (only BPE and "
                       "WordPiece)",
                       type);
    // Llama 2 / Mistral / Gemma ship SentencePiece models as BPE with byte
    // fallback; they need tokenizer.ggml.model "llama" with scores, which
    // this converter does not write yet.
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return err_set(e, ERR_UNSUPPORTED,
                       "tokenizer.json: SentencePiece-style BPE (byte_fallback) is not "
                       "supported yet");
    const json_t *added = json_object_get(tok, "added_tokens");
    if (added && !json_is_array(added))
        return err_set(e, ERR_FORMAT, "tokenizer.json: added_tokens is not an array");
    int rc = read_tokens(v, model, added, config, e);
    if (rc == 0 && !v->wpm)
        rc = read_merges(v, model, e);
    if (rc == 0)
        rc = read_template(v, tcfg, e);
    if (rc == 0) {
        detect_pre(v, tok);
        read_specials(v, tcfg, config);
    }
    if (rc == 0 && v->wpm)
        wordpiece_finish(v);
    return rc;
}

int convert_vocab_parse(struct convert_vocab *v, const char *tokenizer_json, size_t n_tok,
                        const char *tokenizer_config, size_t n_cfg, const char *config_json,
                        size_t n_config, struct err *e)
{
    memset(v, 0, sizeof(*v));
    if (!tokenizer_json)
        return err_set(e, ERR_UNSUPPORTED,
                       "the folder has no tokenizer.json (SentencePiece tokenizer.model alone "
                       "is not supported yet)");
    json_t *tok = NULL, *tcfg = NULL, *config = NULL;
    int rc = parse_opt(tokenizer_json, n_tok, "tokenizer.json", &tok, e);
    if (rc == 0)
        rc = parse_opt(tokenizer_config, n_cfg, "tokenizer_config.json", &tcfg, e);
    if (rc == 0)
        rc = parse_opt(config_json, n_config, "config.json", &config, e);
    if (rc == 0)
        rc = parse_tokenizer(v, tok, tcfg, config, e);
    json_decref(tok);
    json_decref(tcfg);
    json_decref(config);
    if (rc < 0)
        convert_vocab_free(v);
    return rc;
}

// Padding up to config.json's vocab_size, as llama.cpp: "[PAD<id>]", unused,
// score -1000.
static void pad_spm(struct convert_vocab *v, const json_t *config)
{
    const json_t *vs = json_object_get(config, "vocab_size");
    if (!json_is_integer(vs) || json_integer_value(vs) <= (json_int_t)v->n ||
        json_integer_value(vs) > (json_int_t)VOCAB_MAX)
        return;
    size_t n = (size_t)json_integer_value(vs);
    v->tokens = xrealloc(v->tokens, n * sizeof(char *));
    v->types = xrealloc(v->types, n * sizeof(int32_t));
    v->scores = xrealloc(v->scores, n * sizeof(float));
    for (size_t i = v->n; i < n; i++) {
        v->tokens[i] = xasprintf("[PAD%zu]", i);
        v->types[i] = TT_UNUSED;
        v->scores[i] = -1000.0f;
    }
    v->n = n;
}

int convert_vocab_parse_spm(struct convert_vocab *v, const void *model, size_t n_model,
                            const char *tokenizer_config, size_t n_cfg, const char *config_json,
                            size_t n_config, struct err *e)
{
    memset(v, 0, sizeof(*v));
    json_t *tcfg = NULL, *config = NULL;
    int rc = convert_spm_parse(v, model, n_model, e);
    if (rc == 0)
        rc = parse_opt(tokenizer_config, n_cfg, "tokenizer_config.json", &tcfg, e);
    if (rc == 0)
        rc = parse_opt(config_json, n_config, "config.json", &config, e);
    if (rc == 0) {
        pad_spm(v, config);
        rc = read_template(v, tcfg, e);
    }
    if (rc == 0)
        read_specials(v, tcfg, config);
    json_decref(tcfg);
    json_decref(config);
    if (rc < 0)
        convert_vocab_free(v);
    return rc;
}

void convert_vocab_free(struct convert_vocab *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->tokens ? v->tokens[i] : NULL);
    free(v->tokens);
    free(v->types);
    free(v->scores);
    for (size_t i = 0; i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->merges);
    free(v->chat_template);
    memset(v, 0, sizeof(*v));
}

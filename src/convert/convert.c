// convert_folder: config.json picks the architecture row (arch.c), the
// tokenizer files give the vocabulary (vocab.c), the .safetensors files are
// mapped and parsed (safetensors.c), and the GGUF is written in one pass:
// keys, tensor infos, then each tensor converted a block of rows at a time.
//
// Output types follow Ollama's converter: 1-D tensors and biases F32, other
// tensors F16, or BF16 when the source is BF16.
#include "convert/internal.h"

#include <stdlib.h>
#include <string.h>

bool conv_cfg_u32(const struct conv *c, const char *key, uint32_t *out)
{
    const json_t *v = json_object_get(c->config, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return false;
    *out = (uint32_t)json_integer_value(v);
    return true;
}

bool conv_cfg_f32(const struct conv *c, const char *key, float *out)
{
    const json_t *v = json_object_get(c->config, key);
    if (!json_is_number(v))
        return false;
    *out = (float)json_number_value(v);
    return true;
}

bool convert_wanted_file(const char *name)
{
    static const char *const exact[] = {"config.json",           "tokenizer.json",
                                        "tokenizer_config.json", "generation_config.json",
                                        "tokenizer.model",       "special_tokens_map.json",
                                        "chat_template.jinja",   "adapter_config.json",
                                        "modules.json",          "vocab.txt"};
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(base, exact[i]) == 0)
            return true;
    return cstr_ends_with(base, ".safetensors") ||
           strcmp(base, "model.safetensors.index.json") == 0;
}

static bool known_prefix(const char *name)
{
    static const char *const prefixes[] = {"blk.",         "token_embd.",    "output_norm.",
                                           "output.",      "rope_freqs.",    "rope_factors_",
                                           "token_types.", "position_embd.", "token_embd_norm."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (cstr_starts_with(name, prefixes[i]))
            return true;
    return false;
}

// Q/K heads for llama-style RoPE row order (0: no reordering).
static uint32_t permute_heads(const struct conv *c, const char *name)
{
    uint32_t heads = 0, kv = 0;
    if (!c->a->permute_qk)
        return 0;
    conv_cfg_u32(c, "num_attention_heads", &heads);
    if (!conv_cfg_u32(c, "num_key_value_heads", &kv))
        kv = heads;
    if (cstr_ends_with(name, ".attn_q.weight"))
        return heads;
    if (cstr_ends_with(name, ".attn_k.weight"))
        return kv;
    return 0;
}

static int plan_tensor(struct conv_job *j, const struct st_tensor *t, struct conv_plan *p,
                       struct err *e)
{
    memset(p, 0, sizeof(*p));
    char name[256];
    conv_rename(j->c.a->renames, t->name, name, sizeof name);
    if (!st_dtype_float(t->dtype))
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: dtype %s cannot be converted", t->name,
                       st_dtype_name(t->dtype));
    if (!known_prefix(name) || strlen(name) > GGUF_MAX_NAME_LEN)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: no GGUF name for it in architecture %s",
                       t->name, j->c.a->hf_name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n_dims = t->n_dims;
    for (uint32_t d = 0; d < 4; d++)
        p->ne[d] = d < t->n_dims ? t->shape[t->n_dims - 1 - d] : 1;
    bool f32 = t->n_dims == 1 || cstr_ends_with(name, ".bias") ||
               cstr_ends_with(name, ".ffn_gate_inp.weight");
    p->type = f32 ? GGUF_TYPE_F32 : t->dtype == ST_BF16 ? GGUF_TYPE_BF16 : GGUF_TYPE_F16;
    p->permute_heads = t->n_dims == 2 ? permute_heads(&j->c, name) : 0;
    p->add = cstr_ends_with(name, "norm.weight") ? j->c.a->norm_offset : 0;
    if (p->permute_heads && p->ne[1] % (2 * (int64_t)p->permute_heads) != 0)
        return err_set(e, ERR_FORMAT, "tensor %s: %" PRId64 " rows do not split into %u heads",
                       t->name, p->ne[1], p->permute_heads);
    p->srcs = xcalloc(1, sizeof(*p->srcs));
    p->srcs[0] = t;
    p->n_srcs = 1;
    return 0;
}

// ---------------------------------------------------------------------------
// Mixture-of-experts: one HF tensor per expert, one GGUF tensor per layer
// and projection with the experts along ne[2].

struct expert_ref {
    char out[GGUF_MAX_NAME_LEN + 1];  // "blk.3.ffn_gate_exps.weight"
    int expert;
    const struct st_tensor *t;
};

static int cmp_expert(const void *a, const void *b)
{
    const struct expert_ref *x = a, *y = b;
    int c = strcmp(x->out, y->out);
    return c ? c : (x->expert > y->expert) - (x->expert < y->expert);
}

// One group [g, g + n) of refs with the same output name: experts 0..n-1,
// each a 2-D tensor of the same shape and dtype.
static int plan_experts(struct conv_plan *p, const struct expert_ref *g, size_t n, struct err *e)
{
    const struct st_tensor *t0 = g[0].t;
    for (size_t i = 0; i < n; i++) {
        const struct st_tensor *t = g[i].t;
        if (g[i].expert != (int)i)
            return err_set(e, ERR_FORMAT, "%s: expert %zu is missing", g[0].out, i);
        if (!st_dtype_float(t->dtype))
            return err_set(e, ERR_UNSUPPORTED, "tensor %s: dtype %s cannot be converted", t->name,
                           st_dtype_name(t->dtype));
        if (t->n_dims != 2 || t->dtype != t0->dtype || t->shape[0] != t0->shape[0] ||
            t->shape[1] != t0->shape[1])
            return err_set(e, ERR_FORMAT, "tensor %s: shape or dtype differs from expert 0",
                           t->name);
    }
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof p->name, "%s", g[0].out);
    p->n_dims = 3;
    p->ne[0] = t0->shape[1];
    p->ne[1] = t0->shape[0];
    p->ne[2] = (int64_t)n;
    p->ne[3] = 1;
    p->type = t0->dtype == ST_BF16 ? GGUF_TYPE_BF16 : GGUF_TYPE_F16;
    p->srcs = xcalloc(n, sizeof(*p->srcs));
    for (size_t i = 0; i < n; i++)
        p->srcs[i] = g[i].t;
    p->n_srcs = n;
    return 0;
}

static int plan_expert_groups(struct conv_job *j, struct expert_ref *refs, size_t n, struct err *e)
{
    qsort(refs, n, sizeof(*refs), cmp_expert);
    for (size_t i = 0; i < n;) {
        size_t k = i + 1;
        while (k < n && strcmp(refs[k].out, refs[i].out) == 0)
            k++;
        int rc = plan_experts(&j->plan[j->n_plan], refs + i, k - i, e);
        if (rc < 0)
            return rc;
        j->n_plan++;
        i = k;
    }
    return 0;
}

// Tensors the architecture drops (BERT's pooler and masked-LM head), by
// prefix of the renamed name.
static bool conv_skipped(const struct conv_arch *a, const char *hf)
{
    if (!a->skip)
        return false;
    char name[256];
    conv_rename(a->renames, hf, name, sizeof name);
    for (size_t i = 0; a->skip[i]; i++)
        if (cstr_starts_with(name, a->skip[i]))
            return true;
    return false;
}

static int make_plan(struct conv_job *j, struct err *e)
{
    // A source may give two tensors (gpt-oss's fused gate/up).
    j->plan = xcalloc(2 * j->set.n + j->c.n_extra + 1, sizeof(*j->plan));
    for (size_t i = 0; i < j->c.n_extra; i++) {
        struct conv_plan *p = &j->plan[j->n_plan++];
        snprintf(p->name, sizeof p->name, "%s", j->c.extra[i].name);
        p->extra = &j->c.extra[i];
        p->type = GGUF_TYPE_F32;
        p->n_dims = 1;
        p->ne[0] = j->c.extra[i].n;
        p->ne[1] = p->ne[2] = p->ne[3] = 1;
    }
    size_t first = j->n_plan, n_refs = 0;
    struct expert_ref *refs = xcalloc(j->set.n + 1, sizeof(*refs));
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < j->set.n; i++) {
        const struct st_tensor *t = &j->set.v[i];
        if (cstr_ends_with(t->name, "rotary_emb.inv_freq") || conv_skipped(j->c.a, t->name))
            continue;  // recomputed from rope_theta by the engine; a head the model does not use
        j->total += t->n_bytes;
        struct expert_ref *r = &refs[n_refs];
        if (conv_expert_name(t->name, r->out, sizeof r->out, &r->expert)) {
            r->t = t;
            n_refs++;
            continue;
        }
        int took = j->c.a->plan ? j->c.a->plan(j, t, e) : 0;
        if (took != 0) {
            rc = took < 0 ? took : 0;
            continue;
        }
        rc = plan_tensor(j, t, &j->plan[j->n_plan], e);
        if (rc == 0)
            j->n_plan++;
    }
    if (rc == 0)
        rc = plan_expert_groups(j, refs, n_refs, e);
    free(refs);
    if (rc < 0)
        return rc;
    return conv_sort_plan(j, first, e);
}

static void write_vocab(struct gguf_writer *w, const struct convert_vocab *v)
{
    static const char *const keys[CV_SPECIAL_N] = {
        "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
        "tokenizer.ggml.mask_token_id"};
    gguf_writer_kv_str(w, "tokenizer.ggml.model", v->spm ? "llama" : v->wpm ? "bert" : "gpt2");
    gguf_writer_kv_str(w, "tokenizer.ggml.pre", v->pre);
    struct str *items = xcalloc(v->n + v->n_merges + 1, sizeof(*items));
    for (size_t i = 0; i < v->n; i++)
        items[i] = str_from(v->tokens[i]);
    gguf_writer_kv_arr_str(w, "tokenizer.ggml.tokens", items, v->n);
    if (v->scores)
        gguf_writer_kv_arr(w, "tokenizer.ggml.scores", GGUF_VAL_FLOAT32, v->scores, v->n);
    gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_VAL_INT32, v->types, v->n);
    for (size_t i = 0; i < v->n_merges; i++)
        items[i] = str_from(v->merges[i]);
    if (v->n_merges)
        gguf_writer_kv_arr_str(w, "tokenizer.ggml.merges", items, v->n_merges);
    free(items);
    for (int s = 0; s < CV_SPECIAL_N; s++)
        if (v->special[s] >= 0)
            gguf_writer_kv_u32(w, keys[s], (uint32_t)v->special[s]);
    if (v->add_bos >= 0)
        gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (v->add_eos >= 0)
        gguf_writer_kv_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos);
    if (v->chat_template)
        gguf_writer_kv_str(w, "tokenizer.chat_template", v->chat_template);
}

static int write_keys(struct conv_job *j, struct gguf_writer *w, struct err *e)
{
    const struct conv_arch *a = j->c.a;
    gguf_writer_kv_str(w, "general.architecture", a->arch);
    gguf_writer_kv_str(w, "general.type", "model");
    bool bf16 = true;
    for (size_t i = 0; i < j->set.n; i++)
        if (j->set.v[i].n_dims >= 2 && j->set.v[i].dtype != ST_BF16)
            bf16 = false;
    gguf_writer_kv_u32(w, "general.file_type", bf16 ? 32 : 1);  // MOSTLY_BF16 / MOSTLY_F16
    gguf_writer_kv_u32(w, "general.quantization_version", 2);
    for (size_t i = 0; i < a->n_hparams; i++) {
        const struct hp_row *r = &a->hparams[i];
        char key[128];
        snprintf(key, sizeof key, "%s.%s", a->arch, r->suffix);
        uint32_t u;
        float f;
        if (r->kind == HP_U32 && conv_cfg_u32(&j->c, r->json, &u))
            gguf_writer_kv_u32(w, key, u);
        else if (r->kind == HP_F32 && conv_cfg_f32(&j->c, r->json, &f))
            gguf_writer_kv_f32(w, key, f);
    }
    if (j->c.pooling >= 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.pooling_type", a->arch);
        gguf_writer_kv_u32(w, key, (uint32_t)j->c.pooling);
    }
    write_vocab(w, &j->vocab);
    return a->extra_kv ? a->extra_kv(&j->c, w, e) : 0;
}

static int write_gguf(struct conv_job *j, const char *out_path, struct convert_info *info,
                      struct err *e)
{
    struct gguf_writer *w;
    int rc = gguf_writer_open(&w, out_path, e);
    if (rc < 0)
        return rc;
    rc = write_keys(j, w, e);  // also makes the computed tensors (rope factors)
    if (rc == 0)
        rc = make_plan(j, e);
    if (rc < 0) {
        gguf_writer_abort(w);
        return rc;
    }
    return conv_write_body(j, w, info, e);
}

// ---------------------------------------------------------------------------
// The whole conversion.

// GPT-2-style config.json names (nomic-embed-text's n_embd, n_layer, ...)
// and BERT's spellings under the names the key tables read, where the
// config does not have those already.
static void conv_config_aliases(json_t *config)
{
    static const struct {
        const char *alias, *name;
    } aliases[] = {
        {"n_layer", "num_hidden_layers"},
        {"n_layers", "num_hidden_layers"},
        {"n_embd", "hidden_size"},
        {"n_head", "num_attention_heads"},
        {"n_inner", "intermediate_size"},
        {"n_positions", "max_position_embeddings"},
        {"n_ctx", "max_position_embeddings"},
        {"rotary_emb_base", "rope_theta"},
        {"layer_norm_epsilon", "layer_norm_eps"},
        {"norm_epsilon", "layer_norm_eps"},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        json_t *v = json_object_get(config, aliases[i].alias);
        if (v && !json_object_get(config, aliases[i].name))
            json_object_set(config, aliases[i].name, v);
    }
}

static int read_config(struct conv_job *j, const struct convert_file *files, size_t n,
                       struct err *e)
{
    struct buf b;
    int rc = conv_read_small(files, n, "config.json", &b, e);
    if (rc == 0 && !b.data)
        rc = err_set(e, ERR_INVALID, "config.json not found");
    struct err je = {0};
    if (rc == 0 && jsonx_parse(b.data, b.len, &j->c.config, &je) < 0)
        rc = err_set(e, ERR_FORMAT, "config.json: %s", je.msg);
    buf_deinit(&b);
    if (rc < 0)
        return rc;
    const char *hf =
        json_string_value(json_array_get(json_object_get(j->c.config, "architectures"), 0));
    if (!hf)
        return err_set(e, ERR_FORMAT, "config.json: no architectures");
    j->c.a = conv_arch_find(hf);
    if (!j->c.a) {
        char list[512];
        conv_arch_list(list, sizeof list);
        return err_set(e, ERR_UNSUPPORTED, "unsupported architecture \"%s\" (supported: %s)", hf,
                       list);
    }
    conv_config_aliases(j->c.config);
    // Without these the model could be stored but never loaded.
    static const char *const required[] = {"num_hidden_layers", "hidden_size",
                                           "num_attention_heads"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        uint32_t v;
        if (!conv_cfg_u32(&j->c, required[i], &v) || v == 0)
            return err_set(e, ERR_FORMAT, "config.json: %s is missing or not a positive integer",
                           required[i]);
    }
    return 0;
}

// The vocabulary: tokenizer.model (SentencePiece) when the folder has one,
// as Ollama prefers it, else tokenizer.json; chat_template.jinja when
// tokenizer_config.json has no template.
static int read_vocab(struct conv_job *j, const struct convert_file *files, size_t n, struct err *e)
{
    enum { TOK, SPM, TCFG, CFG, JINJA, WPM, N_FILES };
    static const char *const names[N_FILES] = {"tokenizer.json",        "tokenizer.model",
                                               "tokenizer_config.json", "config.json",
                                               "chat_template.jinja",   "vocab.txt"};
    struct buf b[N_FILES];
    int rc = 0;
    for (int i = 0; i < N_FILES; i++) {
        if (rc == 0)
            rc = conv_read_small(files, n, names[i], &b[i], e);
        else
            buf_init(&b[i], 0);
    }
    if (rc == 0 && b[SPM].data)
        rc = convert_vocab_parse_spm(&j->vocab, b[SPM].data, b[SPM].len, b[TCFG].data, b[TCFG].len,
                                     b[CFG].data, b[CFG].len, e);
    else if (rc == 0 && !b[TOK].data && b[WPM].data)
        rc = convert_vocab_parse_wordpiece(&j->vocab, b[WPM].data, b[WPM].len, b[TCFG].data,
                                           b[TCFG].len, b[CFG].data, b[CFG].len, e);
    else if (rc == 0)
        rc = convert_vocab_parse(&j->vocab, b[TOK].data, b[TOK].len, b[TCFG].data, b[TCFG].len,
                                 b[CFG].data, b[CFG].len, e);
    if (rc == 0 && b[JINJA].data && !j->vocab.chat_template)
        j->vocab.chat_template = xstrndup(b[JINJA].data, b[JINJA].len);
    for (int i = 0; i < N_FILES; i++)
        buf_deinit(&b[i]);
    return rc;
}

// The pooling of a sentence-transformers folder (modules.json and the
// Pooling module's config.json), as llama.cpp's converter reads it.
static int read_pooling(struct conv_job *j, const struct convert_file *files, size_t n,
                        struct err *e)
{
    struct buf mod, cfg;
    char *dir = NULL;
    buf_init(&cfg, 0);
    j->c.pooling = -1;
    int rc = conv_read_small(files, n, "modules.json", &mod, e);
    if (rc == 0 && mod.data)
        rc = convert_pooling_parse(mod.data, mod.len, &dir, e);
    if (rc == 0 && dir) {
        char *path = xasprintf("%s/config.json", dir);
        buf_deinit(&cfg);
        rc = conv_read_small(files, n, path, &cfg, e);
        free(path);
        if (rc == 0)
            rc = convert_pooling_mode(cfg.data, cfg.len, &j->c.pooling, e);
    }
    free(dir);
    buf_deinit(&mod);
    buf_deinit(&cfg);
    return rc;
}

int convert_folder(const struct convert_file *files, size_t n, const char *out_path,
                   convert_progress_fn fn, void *ctx, struct convert_info *info, struct err *e)
{
    struct conv_job j = {.fn = fn, .fn_ctx = ctx};
    if (info)
        memset(info, 0, sizeof(*info));
    int rc = read_config(&j, files, n, e);
    if (rc == 0)
        rc = read_pooling(&j, files, n, e);
    if (rc == 0)
        rc = read_vocab(&j, files, n, e);
    if (rc == 0)
        rc = conv_load_tensors(&j, files, n, e);
    if (rc == 0 && info) {
        snprintf(info->hf_arch, sizeof info->hf_arch, "%s", j.c.a->hf_name);
        snprintf(info->arch, sizeof info->arch, "%s", j.c.a->arch);
    }
    if (rc == 0)
        rc = write_gguf(&j, out_path, info, e);
    conv_job_free(&j);
    return rc;
}

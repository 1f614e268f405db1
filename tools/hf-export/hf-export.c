// hf-export: writes a GGUF model (the tiny test fixtures, gguf-gen output) as
// the Hugging Face folder its upstream converter would have read: tensors
// under their HF names in .safetensors (optionally sharded with
// model.safetensors.index.json), Q/K rows back in HF order for llama-style
// RoPE, config.json, tokenizer.json (byte-level BPE with the pre-tokenizer
// regex HF ships), tokenizer_config.json. It exists to test `ollama create`
// from safetensors and to benchmark it; see tools/hf-export/README.md.
//
//   hf-export IN.gguf OUTDIR [--dtype auto|f32|f16|bf16] [--shards N]
//             [--merges strings|pairs] [--rope-llama3 FACTOR,LOW,HIGH,ORIG]
//             [--vocab-limit N]   (tests: a cut vocabulary, not a usable tokenizer)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"
#include "json/json.h"

struct opts {
    const char *in, *out;
    const char *dtype;  // auto: keep F32/F16/BF16 as they are
    int shards;
    bool merge_pairs;
    uint64_t vocab_limit;  // > 0: only the first N BPE tokens and merges (fast tests)
    const char *base;      // --base: the base model of a LoRA adapter (its head counts)
    bool adapter;          // the input is a LoRA adapter GGUF
    double rope[4];        // factor, low, high, original context; factor 0: none
};

// GGUF → HF per architecture: class, model_type, Q/K permutation.
static const struct {
    const char *arch, *hf, *model_type;
    bool permute;
    bool gemma;  // Gemma's norm names, norm weights stored as w - 1
} archs[] = {
    {"llama", "LlamaForCausalLM", "llama", true, false},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", false, false},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", false, false},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", false, false},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", false, true},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", false, true},
    {"phi3", "Phi3ForCausalLM", "phi3", false, false},
    {"bert", "BertModel", "bert", false, false},
    {"nomic-bert", "NomicBertModel", "nomic_bert", false, false},
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss", false, false},
};

struct rename {
    const char *from, *to;
};

// Gemma's four norms, tried before the common names.
static const struct rename gemma_renames[] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {NULL, NULL},
};
static bool gemma;
// Phi-3's fused projections, tried before the common names.
static const struct rename phi3_renames[] = {
    {"attn_qkv", "self_attn.qkv_proj"},
    {"ffn_up", "mlp.gate_up_proj"},
    {NULL, NULL},
};
static bool phi3;
// BERT (transformers' BertModel names) and nomic-bert (nomic-embed-text's).
static const struct rename bert_renames[] = {
    {"token_embd_norm", "embeddings.LayerNorm"},
    {"token_embd", "embeddings.word_embeddings"},
    {"token_types", "embeddings.token_type_embeddings"},
    {"position_embd", "embeddings.position_embeddings"},
    {"blk", "encoder.layer"},
    {"attn_q", "attention.self.query"},
    {"attn_k", "attention.self.key"},
    {"attn_v", "attention.self.value"},
    {"attn_output_norm", "attention.output.LayerNorm"},
    {"attn_output", "attention.output.dense"},
    {"ffn_up", "intermediate.dense"},
    {"ffn_down", "output.dense"},
    {"layer_output_norm", "output.LayerNorm"},
    {NULL, NULL},
};
static const struct rename nomic_renames[] = {
    {"token_embd_norm", "emb_ln"},
    {"token_embd", "embeddings.word_embeddings"},
    {"token_types", "embeddings.token_type_embeddings"},
    {"blk", "encoder.layers"},
    {"attn_qkv", "attn.Wqkv"},
    {"attn_output_norm", "norm1"},
    {"attn_output", "attn.out_proj"},
    {"ffn_up", "mlp.fc11"},
    {"ffn_gate", "mlp.fc12"},
    {"ffn_down", "mlp.fc2"},
    {"layer_output_norm", "norm2"},
    {NULL, NULL},
};
// gpt-oss: sinks, router, post-attention norm (experts: gptoss_items).
static const struct rename gptoss_renames[] = {
    {"attn_sinks", "self_attn.sinks"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_gate_inp", "mlp.router"},
    {NULL, NULL},
};
static bool gptoss;
// The architecture's own pieces, tried before the common names (NULL: none).
static const struct rename *first_renames;
static bool encoder;  // bert / nomic-bert: WordPiece vocabulary, pooling
static bool mixtral;  // llama with experts: MixtralForCausalLM names

// GGUF name pieces → HF (whole pieces between dots).
static const struct {
    const char *from, *to;
} renames[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
    {"blk", "model.layers"},
    {"attn_norm", "input_layernorm"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {NULL, NULL},
};

// The Split regexes HF tokenizers ship for these pre-tokenizers.
static const struct {
    const char *pre, *regex;
} pre_regex[] = {
    {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"gpt-2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
    {"gpt-4o",
     "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
     "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
     "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "hf-export: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    exit(1);
}

static void hf_name(const char *in, char *out, size_t n)
{
    size_t k = 0;
    while (*in && k + 1 < n) {
        size_t g = 0;
        for (; first_renames && first_renames[g].from; g++)
            if (strncmp(in, first_renames[g].from, strlen(first_renames[g].from)) == 0 &&
                in[strlen(first_renames[g].from)] == '.')
                break;
        if (first_renames && first_renames[g].from) {
            k += (size_t)snprintf(out + k, n - k, "%s", first_renames[g].to);
            in += strlen(first_renames[g].from);
            continue;
        }
        size_t r = 0;
        for (; renames[r].from; r++) {
            size_t l = strlen(renames[r].from);
            // whole dot-separated pieces only ("output" inside "attn_output" is not one)
            if (strncmp(in, renames[r].from, l) == 0 && (in[l] == '.' || in[l] == '\0'))
                break;
        }
        if (renames[r].from) {
            k += (size_t)snprintf(out + k, n - k, "%s", renames[r].to);
            in += strlen(renames[r].from);
        } else {
            const char *dot = strchr(in, '.');
            size_t l = dot ? (size_t)(dot - in) + 1 : strlen(in);
            k += (size_t)snprintf(out + k, n - k, "%.*s", (int)l, in);
            in += l;
        }
    }
}

// One tensor to write: its GGUF source and HF form.
// gpt-oss's expert forms (ITEM_PLAIN: everything else).
enum item_kind { ITEM_PLAIN, ITEM_BLOCKS, ITEM_SCALES, ITEM_FLOAT_T, ITEM_BIAS };

struct item {
    const struct gguf_tensor *t;
    char name[160];
    const char *dtype;  // "F32" "F16" "BF16" ("U8": MXFP4 blocks and scales)
    uint64_t n_bytes;
    uint32_t heads;  // > 0: undo the Q/K row interleave
    int64_t expert;  // >= 0: this expert's slice of a stacked [n_in, n_out, n_expert] tensor
    float sub;       // subtracted from every element (Gemma norms)
    int shard;
    enum item_kind kind;
    const struct gguf_tensor *t2;  // gpt-oss: up, interleaved with t (gate) on odd rows
    int64_t shape[4];              // the HF shape when kind != ITEM_PLAIN
    int n_shape;
};

static float read_elem(const struct gguf_tensor *t, uint64_t i)
{
    if (t->type == GGUF_TYPE_F32) {
        float f;
        memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
    return t->type == GGUF_TYPE_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
}

static void write_elem(FILE *f, const char *dtype, float v)
{
    if (strcmp(dtype, "F32") == 0) {
        fwrite(&v, 4, 1, f);
        return;
    }
    uint16_t h = strcmp(dtype, "F16") == 0 ? quant_f32_to_f16(v) : quant_f32_to_bf16(v);
    fwrite(&h, 2, 1, f);
}

// HF row r of a permuted matrix comes from GGUF row h*D + 2i + s, where
// r = h*D + s*D/2 + i.
static int64_t gguf_row(int64_t r, int64_t rows, uint32_t heads)
{
    int64_t d = rows / heads, h = r / d, k = r % d, s = k / (d / 2), i = k % (d / 2);
    return h * d + 2 * i + s;
}

static void write_gptoss(FILE *f, const struct item *it);

static void write_data(FILE *f, const struct item *it)
{
    if (it->kind != ITEM_PLAIN) {
        write_gptoss(f, it);
        return;
    }
    const struct gguf_tensor *t = it->t;
    int64_t cols = t->ne[0], rows = (int64_t)(gguf_tensor_n_elements(t) / (uint64_t)cols);
    int64_t base = 0;
    if (it->expert >= 0) {
        rows = t->ne[1];
        base = it->expert * rows;
    }
    bool same = (t->type == GGUF_TYPE_F32 && strcmp(it->dtype, "F32") == 0) ||
                (t->type == GGUF_TYPE_F16 && strcmp(it->dtype, "F16") == 0) ||
                (t->type == GGUF_TYPE_BF16 && strcmp(it->dtype, "BF16") == 0);
    size_t es = t->type == GGUF_TYPE_F32 ? 4 : 2;
    for (int64_t r = 0; r < rows; r++) {
        int64_t src = base + (it->heads ? gguf_row(r, rows, it->heads) : r);
        if (same && it->sub == 0) {  // a row as it is
            fwrite((const uint8_t *)t->data + (size_t)(src * cols) * es, es, (size_t)cols, f);
            continue;
        }
        for (int64_t c = 0; c < cols; c++)
            write_elem(f, it->dtype, read_elem(t, (uint64_t)(src * cols + c)) - it->sub);
    }
}

// One .safetensors file with the items of shard s.
static void write_shard(const char *path, struct item *items, size_t n, int s)
{
    json_t *h = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].shard != s)
            continue;
        json_t *shape = json_array();
        for (int d = 0; d < items[i].n_shape; d++)
            json_array_append_new(shape, json_integer(items[i].shape[d]));
        for (int d = items[i].expert >= 0 ? 1 : (int)items[i].t->n_dims - 1;
             items[i].kind == ITEM_PLAIN && d >= 0; d--)
            json_array_append_new(shape, json_integer(items[i].t->ne[d]));
        json_object_set_new(h, items[i].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", items[i].dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + items[i].n_bytes)));
        off += items[i].n_bytes;
    }
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;  // as HF: spaces to 8 bytes
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot create %s", path);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(text, 1, len, f);
    for (size_t i = len; i < padded; i++)
        fputc(' ', f);
    free(text);
    for (size_t i = 0; i < n; i++)
        if (items[i].shard == s)
            write_data(f, &items[i]);
    if (fclose(f) != 0)
        die("write %s failed", path);
}

static const char *out_dtype(const struct opts *o, const struct gguf_tensor *t)
{
    if (strcmp(o->dtype, "f32") == 0)
        return "F32";
    if (strcmp(o->dtype, "f16") == 0)
        return "F16";
    if (strcmp(o->dtype, "bf16") == 0)
        return "BF16";
    return t->type == GGUF_TYPE_F16 ? "F16" : t->type == GGUF_TYPE_BF16 ? "BF16" : "F32";
}

// One HF tensor for GGUF tensor t (expert x of a stacked one when x >= 0);
// returns its bytes.
static uint64_t add_item(struct item *it, const struct opts *o, const struct gguf_tensor *t,
                         const char *gname, int64_t x, bool permute, uint32_t heads, uint32_t kv)
{
    memset(it, 0, sizeof(*it));
    it->t = t;
    it->expert = x;
    char w[96];
    if (x >= 0) {  // blk.N.ffn_gate_exps.weight → model.layers.N.mlp.experts.X.gate_proj.weight
        int layer = atoi(gname + 4);
        int k = strstr(gname, "ffn_gate_exps") ? 0 : strstr(gname, "ffn_up_exps") ? 1 : 2;
        static const char *const proj[2][3] = {{"gate_proj", "up_proj", "down_proj"},
                                               {"w1", "w3", "w2"}};
        snprintf(it->name, sizeof it->name, "model.layers.%d.%s.experts.%lld.%s.weight", layer,
                 mixtral ? "block_sparse_moe" : "mlp", (long long)x, proj[mixtral][k]);
    } else if (cstr_ends_with(gname, ".lora_a") || cstr_ends_with(gname, ".lora_b")) {
        // blk.0.attn_q.weight.lora_b →
        // base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight
        char hw[160];
        snprintf(w, sizeof w, "%.*s", (int)(strlen(gname) - strlen(".lora_a")), gname);
        hf_name(w, hw, sizeof hw);
        hw[strlen(hw) - strlen(".weight")] = '\0';
        bool b = cstr_ends_with(gname, ".lora_b");
        snprintf(it->name, sizeof it->name, "base_model.model.%s.lora_%c.weight", hw,
                 b ? 'B' : 'A');
        if (!b)
            permute = false;  // A's columns are the inputs: only B's rows follow the Q/K order
        gname = w;
    } else {
        hf_name(gname, it->name, sizeof it->name);
        if (gptoss && cstr_ends_with(it->name, "self_attn.sinks.weight"))
            it->name[strlen(it->name) - strlen(".weight")] = '\0';  // HF: a bare parameter
        char *router = strstr(it->name, "mlp.gate.weight");
        if (mixtral && router)  // Mixtral's router
            snprintf(router, sizeof it->name - (size_t)(router - it->name),
                     "block_sparse_moe.gate.weight");
    }
    it->dtype = out_dtype(o, t);
    it->sub = gemma && cstr_ends_with(gname, "norm.weight") ? 1.0f : 0.0f;
    uint64_t elems = gguf_tensor_n_elements(t) / (x >= 0 ? (uint64_t)t->ne[2] : 1);
    it->n_bytes = elems * (strcmp(it->dtype, "F32") == 0 ? 4 : 2);
    if (permute && cstr_ends_with(gname, ".attn_q.weight"))
        it->heads = heads;
    if (permute && cstr_ends_with(gname, ".attn_k.weight"))
        it->heads = kv;
    return it->n_bytes;
}

// The dequantized copies of this export, freed once its tensors are written.
static struct gguf_tensor **deq_copies;
static size_t n_deq_copies;

static void free_dequantized(void)
{
    for (size_t i = 0; i < n_deq_copies; i++) {
        free((void *)deq_copies[i]->data);
        free(deq_copies[i]);
    }
    free(deq_copies);
    deq_copies = NULL;
    n_deq_copies = 0;
}

// A quantized tensor (the Q8_0 matrices beside gpt-oss's MXFP4 experts) as
// F32: the exported folder holds floats there.
static const struct gguf_tensor *dequantized(const struct gguf_tensor *t, const char *gname)
{
    const struct quant_traits *q = quant_traits_get(t->type);
    if (!q || !q->to_float)
        die("tensor %s: a type hf-export cannot read", gname);
    uint64_t n = gguf_tensor_n_elements(t);
    struct gguf_tensor *d = malloc(sizeof(*d));
    float *data = malloc(n * sizeof(float));
    *d = *t;
    q->to_float(t->data, data, (int64_t)n);
    d->type = GGUF_TYPE_F32;
    d->data = data;
    d->n_bytes = n * sizeof(float);
    deq_copies = realloc(deq_copies, (n_deq_copies + 1) * sizeof(*deq_copies));
    deq_copies[n_deq_copies++] = d;
    return d;  // until free_dequantized
}

// ---------------------------------------------------------------------------
// gpt-oss experts: ffn_gate_exps and ffn_up_exps [n_in, rows, E] back into
// one gate_up_proj with gate on even and up on odd rows; MXFP4 as OpenAI's
// `*_blocks` [E, rows, n_in/32, 16] (element 2k in the low nibble of byte k)
// and `*_scales` [E, rows, n_in/32], floats transposed to [E, n_in, rows].

static size_t gptoss_item(struct item *it, const struct opts *o, const struct gguf_tensor *t,
                          const struct gguf_tensor *t2, int layer, const char *proj,
                          enum item_kind kind)
{
    memset(it, 0, sizeof(*it));
    it->t = t;
    it->t2 = t2;
    it->kind = kind;
    it->expert = -1;
    bool bias = kind == ITEM_BIAS;
    int64_t n_in = bias ? 1 : t->ne[0], rows = (bias ? t->ne[0] : t->ne[1]) * (t2 ? 2 : 1);
    int64_t e = bias ? t->ne[1] : t->ne[2], nb = n_in / 32;
    static const char *const suffix[] = {"", "_blocks", "_scales", "", "_bias"};
    snprintf(it->name, sizeof it->name, "model.layers.%d.mlp.experts.%s%s", layer, proj,
             suffix[kind]);
    it->shape[0] = e;
    it->n_shape = 3;
    if (kind == ITEM_BLOCKS || kind == ITEM_SCALES) {
        it->dtype = "U8";
        it->shape[1] = rows;
        it->shape[2] = nb;
        it->shape[3] = 16;
        it->n_shape = kind == ITEM_BLOCKS ? 4 : 3;
        it->n_bytes = (uint64_t)(e * rows * nb * (kind == ITEM_BLOCKS ? 16 : 1));
        return 1;
    }
    const struct gguf_tensor *f = t->type == GGUF_TYPE_MXFP4 ? NULL : t;
    if (!f)
        die("gpt-oss tensor %s: MXFP4 needs blocks and scales", it->name);
    it->dtype = out_dtype(o, t);
    it->shape[1] = bias ? rows : n_in;
    it->shape[2] = rows;
    it->n_shape = bias ? 2 : 3;
    it->n_bytes = (uint64_t)(e * n_in * rows) * (strcmp(it->dtype, "F32") == 0 ? 4 : 2);
    return 1;
}

static size_t gptoss_items(struct item *items, const struct opts *o, const struct gguf *g,
                           const struct gguf_tensor *t, const char *gname)
{
    int layer = atoi(gname + 4);
    bool bias = cstr_ends_with(gname, ".bias");
    if (strstr(gname, "ffn_up_exps"))
        return 0;  // with its gate
    const struct gguf_tensor *up = NULL;
    if (strstr(gname, "ffn_gate_exps")) {
        char n2[96];
        snprintf(n2, sizeof n2, "blk.%d.ffn_up_exps.%s", layer, bias ? "bias" : "weight");
        if (!(up = gguf_tensor_find(g, n2)))
            die("%s has no up projection", gname);
    }
    const char *proj = up ? "gate_up_proj" : "down_proj";
    if (bias)
        return gptoss_item(items, o, t, up, layer, proj, ITEM_BIAS);
    if (t->type != GGUF_TYPE_MXFP4)
        return gptoss_item(items, o, t, up, layer, proj, ITEM_FLOAT_T);
    gptoss_item(&items[0], o, t, up, layer, proj, ITEM_BLOCKS);
    gptoss_item(&items[1], o, t, up, layer, proj, ITEM_SCALES);
    return 2;
}

static void write_gptoss(FILE *f, const struct item *it)
{
    const struct gguf_tensor *t = it->t;
    bool bias = it->kind == ITEM_BIAS;
    int64_t n_in = bias ? 1 : t->ne[0], rows = bias ? t->ne[0] : t->ne[1];
    int64_t e = bias ? t->ne[1] : t->ne[2], hrows = rows * (it->t2 ? 2 : 1), nb = n_in / 32;
    for (int64_t x = 0; x < e; x++) {
        if (it->kind == ITEM_FLOAT_T) {  // [E, n_in, rows]: column c of every row
            for (int64_t c = 0; c < n_in; c++)
                for (int64_t hr = 0; hr < hrows; hr++) {
                    const struct gguf_tensor *s = it->t2 && hr % 2 ? it->t2 : t;
                    int64_t r = it->t2 ? hr / 2 : hr;
                    write_elem(f, it->dtype, read_elem(s, (uint64_t)((x * rows + r) * n_in + c)));
                }
            continue;
        }
        for (int64_t hr = 0; hr < hrows; hr++) {
            const struct gguf_tensor *s = it->t2 && hr % 2 ? it->t2 : t;
            int64_t r = it->t2 ? hr / 2 : hr;
            if (bias) {
                write_elem(f, it->dtype, read_elem(s, (uint64_t)(x * rows + r)));
                continue;
            }
            for (int64_t b = 0; b < nb; b++) {  // ggml block: scale, 16 bytes of nibbles
                const uint8_t *blk = (const uint8_t *)s->data + ((x * rows + r) * nb + b) * 17;
                if (it->kind == ITEM_SCALES) {
                    fputc(blk[0], f);
                    continue;
                }
                uint8_t v[32], out[16];
                for (int j = 0; j < 16; j++) {
                    v[j] = blk[1 + j] & 0x0F;
                    v[j + 16] = blk[1 + j] >> 4;
                }
                for (int k = 0; k < 16; k++)
                    out[k] = (uint8_t)(v[2 * k] | v[2 * k + 1] << 4);
                fwrite(out, 1, 16, f);
            }
        }
    }
}

// hg: where the head counts are (the base model for an adapter).
static void write_tensors(const struct opts *o, const struct gguf *g, const struct gguf *hg,
                          bool permute)
{
    size_t n = gguf_tensor_count(g), k = 0;
    struct item *items = calloc(n, sizeof(*items));
    uint32_t heads = 0, kv = 0;
    gguf_get_arch_u32(hg, "attention.head_count", &heads);
    if (!gguf_get_arch_u32(hg, "attention.head_count_kv", &kv))
        kv = heads;
    if (permute && !heads)
        die("%s: no head count for the Q/K order (an adapter needs --base)", o->in);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char gname[96];
        snprintf(gname, sizeof gname, "%.*s", (int)t->name.len, t->name.ptr);
        if (strcmp(gname, "rope_freqs.weight") == 0 || cstr_starts_with(gname, "rope_factors_"))
            continue;                             // config.json's rope_scaling says it
        if (gptoss && strstr(gname, "_exps.")) {  // experts as OpenAI's checkpoint has them
            items = realloc(items, (n + k + 2) * sizeof(*items));
            size_t got = gptoss_items(&items[k], o, g, t, gname);
            for (size_t x = 0; x < got; x++)
                total += items[k + x].n_bytes;
            k += got;
            continue;
        }
        if (t->type != GGUF_TYPE_F32 && t->type != GGUF_TYPE_F16 && t->type != GGUF_TYPE_BF16)
            t = dequantized(t, gname);
        bool stacked = cstr_ends_with(gname, "_exps.weight") && t->n_dims == 3;
        int64_t n_exp = stacked ? t->ne[2] : 1;
        if (stacked)
            items = realloc(items, (n + k + (size_t)n_exp) * sizeof(*items));
        for (int64_t x = 0; x < n_exp; x++)
            total += add_item(&items[k++], o, t, gname, stacked ? x : -1, permute, heads, kv);
    }
    // Shards of about equal bytes, tensors in file order.
    uint64_t acc = 0;
    for (size_t i = 0; i < k; i++) {
        items[i].shard = (int)(acc * (uint64_t)o->shards / (total ? total : 1));
        acc += items[i].n_bytes;
    }
    char path[4096];
    if (o->shards == 1) {
        snprintf(path, sizeof path, "%s/%s", o->out,
                 o->adapter ? "adapter_model.safetensors" : "model.safetensors");
        write_shard(path, items, k, 0);
    } else {
        json_t *map = json_object();
        for (int s = 0; s < o->shards; s++) {
            char file[64];
            snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, o->shards);
            snprintf(path, sizeof path, "%s/%s", o->out, file);
            write_shard(path, items, k, s);
            for (size_t i = 0; i < k; i++)
                if (items[i].shard == s)
                    json_object_set_new(map, items[i].name, json_string(file));
        }
        json_t *idx = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)total,
                                "weight_map", map);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", o->out);
        json_dump_file(idx, path, JSON_INDENT(2));
        json_decref(idx);
    }
    free(items);
    free_dequantized();
}

static void put_u32(json_t *o, const char *key, const struct gguf *g, const char *suffix)
{
    uint32_t v;
    if (gguf_get_arch_u32(g, suffix, &v))
        json_object_set_new(o, key, json_integer(v));
}

static void put_f32(json_t *o, const char *key, const struct gguf *g, const char *suffix)
{
    float v;
    if (gguf_get_arch_f32(g, suffix, &v))
        json_object_set_new(o, key, jsonx_real_f32(v));
}

static void dump(json_t *v, const struct opts *o, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->out, file);
    // tokenizer.json compact: it is most of the text and nothing reads it by eye
    if (json_dump_file(v, path, strcmp(file, "tokenizer.json") ? JSON_INDENT(2) : JSON_COMPACT) !=
        0)
        die("cannot write %s", path);
    json_decref(v);
}

static void write_config(const struct opts *o, const struct gguf *g, const char *hf,
                         const char *model_type, uint64_t n_vocab)
{
    json_t *c = json_pack("{s:[s],s:s}", "architectures", hf, "model_type", model_type);
    put_u32(c, "hidden_size", g, "embedding_length");
    put_u32(c, "intermediate_size", g, "feed_forward_length");
    put_u32(c, "num_hidden_layers", g, "block_count");
    put_u32(c, "num_attention_heads", g, "attention.head_count");
    put_u32(c, "num_key_value_heads", g, "attention.head_count_kv");
    if (!phi3)  // Phi-3's config has none: hidden / heads
        put_u32(c, "head_dim", g, "attention.key_length");
    put_u32(c, "max_position_embeddings", g, "context_length");
    put_f32(c, "rms_norm_eps", g, "attention.layer_norm_rms_epsilon");
    put_f32(c, "rope_theta", g, "rope.freq_base");
    put_u32(c, "sliding_window", g, "attention.sliding_window");
    put_f32(c, "attn_logit_softcapping", g, "attn_logit_softcapping");
    put_f32(c, "final_logit_softcapping", g, "final_logit_softcapping");
    put_u32(c, mixtral || gptoss ? "num_local_experts" : "num_experts", g, "expert_count");
    put_u32(c, "num_experts_per_tok", g, "expert_used_count");
    put_u32(c, "moe_intermediate_size", g, "expert_feed_forward_length");
    json_object_set_new(c, "vocab_size", json_integer((json_int_t)n_vocab));
    json_object_set_new(c, "tie_word_embeddings",
                        json_boolean(gguf_tensor_find(g, "output.weight") == NULL));
    uint32_t id;
    if (gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id))
        json_object_set_new(c, "bos_token_id", json_integer(id));
    if (gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id))
        json_object_set_new(c, "eos_token_id", json_integer(id));
    json_object_set_new(c, "torch_dtype", json_string("bfloat16"));
    struct str rt;
    float rf;
    uint32_t orig;
    if (gptoss && gguf_get_str(g, "gpt-oss.rope.scaling.type", &rt) && str_eq_cstr(rt, "yarn") &&
        gguf_get_f32(g, "gpt-oss.rope.scaling.factor", &rf) &&
        gguf_get_u32(g, "gpt-oss.rope.scaling.original_context_length", &orig)) {
        json_object_set_new(c, "rope_scaling",
                            json_pack("{s:s,s:o,s:I,s:f,s:f,s:b}", "rope_type", "yarn", "factor",
                                      jsonx_real_f32(rf), "original_max_position_embeddings",
                                      (json_int_t)orig, "beta_fast", 32.0, "beta_slow", 1.0,
                                      "truncate", 0));
        json_object_set_new(c, "initial_context_length", json_integer(orig));
    }
    if (gguf_get_str(g, "gemma3.rope.scaling.type", &rt) && str_eq_cstr(rt, "linear") &&
        gguf_get_f32(g, "gemma3.rope.scaling.factor", &rf))
        json_object_set_new(
            c, "rope_scaling",
            json_pack("{s:s,s:o}", "rope_type", "linear", "factor", jsonx_real_f32(rf)));
    const struct gguf_tensor *lf = gguf_tensor_find(g, "rope_factors_long.weight");
    const struct gguf_tensor *sf = gguf_tensor_find(g, "rope_factors_short.weight");
    if (lf && sf) {  // Phi-3 LongRoPE
        json_t *l = json_array(), *sh = json_array();
        for (int64_t i = 0; i < lf->ne[0]; i++)
            json_array_append_new(l, jsonx_real_f32(read_elem(lf, (uint64_t)i)));
        for (int64_t i = 0; i < sf->ne[0]; i++)
            json_array_append_new(sh, jsonx_real_f32(read_elem(sf, (uint64_t)i)));
        json_object_set_new(
            c, "rope_scaling",
            json_pack("{s:s,s:o,s:o}", "type", "longrope", "long_factor", l, "short_factor", sh));
        put_u32(c, "original_max_position_embeddings", g, "rope.scaling.original_context_length");
    }
    uint32_t n_rot, kl;
    if (phi3 && gguf_get_arch_u32(g, "rope.dimension_count", &n_rot) &&
        gguf_get_arch_u32(g, "attention.key_length", &kl) && kl)
        json_object_set_new(c, "partial_rotary_factor", jsonx_real_f32((float)n_rot / (float)kl));
    if (o->rope[0] > 0)
        json_object_set_new(c, "rope_scaling",
                            json_pack("{s:f,s:f,s:f,s:i,s:s}", "factor", o->rope[0],
                                      "low_freq_factor", o->rope[1], "high_freq_factor", o->rope[2],
                                      "original_max_position_embeddings", (int)o->rope[3],
                                      "rope_type", "llama3"));
    dump(c, o, "config.json");
}

static char *token_text(const struct gguf_kv *tokens, uint64_t i)
{
    struct str s;
    return gguf_arr_str(tokens, i, &s) ? str_dup(s) : strdup("");
}

static json_t *bpe_model(const struct gguf *g, const struct opts *o, json_t *added)
{
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    const struct gguf_kv *types = gguf_find(g, "tokenizer.ggml.token_type");
    const struct gguf_kv *merges = gguf_find(g, "tokenizer.ggml.merges");
    json_t *vocab = json_object(), *m = json_array();
    for (uint64_t i = 0; i < tokens->val.arr_count; i++) {
        int64_t type = 1;
        if (types)
            gguf_arr_i64(types, i, &type);
        char *text = token_text(tokens, i);
        if (type == 3 || type == 4)  // control / user-defined: added tokens
            json_array_append_new(added, json_pack("{s:I,s:s,s:b,s:b,s:b,s:b,s:b}", "id",
                                                   (json_int_t)i, "content", text, "single_word", 0,
                                                   "lstrip", 0, "rstrip", 0, "normalized",
                                                   type == 4, "special", type == 3));
        else if (type != 5 && (!o->vocab_limit || i < o->vocab_limit))  // padding: vocab_size
            json_object_set_new(vocab, text, json_integer((json_int_t)i));
        free(text);
    }
    uint64_t n_merges = merges ? merges->val.arr_count : 0;
    if (o->vocab_limit && n_merges > o->vocab_limit)
        n_merges = o->vocab_limit;
    for (uint64_t i = 0; i < n_merges; i++) {
        char *text = token_text(merges, i), *sp = strchr(text, ' ');
        if (o->merge_pairs && sp) {
            *sp = '\0';
            json_array_append_new(m, json_pack("[s,s]", text, sp + 1));
        } else {
            json_array_append_new(m, json_string(text));
        }
        free(text);
    }
    return json_pack("{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:o}", "type", "BPE", "dropout",
                     "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                     "byte_fallback", 0, "ignore_merges", 1, "vocab", vocab, "merges", m);
}

static void put_varint(FILE *f, uint64_t v)
{
    do {
        fputc((int)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)), f);
        v >>= 7;
    } while (v);
}

// A SentencePiece vocabulary as tokenizer.model: ModelProto field 1, one
// SentencePiece {1: piece, 2: score, 3: type} per token.
static void write_spm(const struct opts *o, const struct gguf *g)
{
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    const struct gguf_kv *scores = gguf_find(g, "tokenizer.ggml.scores");
    const struct gguf_kv *types = gguf_find(g, "tokenizer.ggml.token_type");
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.model", o->out);
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot create %s", path);
    for (uint64_t i = 0; i < tokens->val.arr_count; i++) {
        struct str s;
        float score = 0;
        int64_t type = 1;
        gguf_arr_str(tokens, i, &s);
        if (scores)
            gguf_arr_f32(scores, i, &score);
        if (types)
            gguf_arr_i64(types, i, &type);
        uint8_t head[16];
        size_t hn = 0;
        uint64_t l = s.len;
        do {  // the piece's length as a varint
            head[hn++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
            l >>= 7;
        } while (l);
        fputc(0x0a, f);  // field 1, length-delimited
        put_varint(f, 1 + hn + s.len + 5 + 2);
        fputc(0x0a, f);
        fwrite(head, 1, hn, f);
        fwrite(s.ptr, 1, s.len, f);
        fputc(0x15, f);  // field 2, fixed32
        fwrite(&score, 4, 1, f);
        fputc(0x18, f);  // field 3, varint
        fputc((int)type, f);
    }
    if (fclose(f) != 0)
        die("write %s failed", path);
}

static void write_tokenizer(const struct opts *o, const struct gguf *g)
{
    struct str model, pre;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model) && str_eq_cstr(model, "llama")) {
        write_spm(o, g);
        return;
    }
    if (!gguf_get_str(g, "tokenizer.ggml.model", &model) || !str_eq_cstr(model, "gpt2"))
        die("%s: only byte-level BPE (gpt2) and SentencePiece (llama) vocabularies can be "
            "exported",
            o->in);
    const char *regex = NULL;
    if (gguf_get_str(g, "tokenizer.ggml.pre", &pre))
        for (size_t i = 0; i < sizeof pre_regex / sizeof pre_regex[0]; i++)
            if (str_eq_cstr(pre, pre_regex[i].pre))
                regex = pre_regex[i].regex;
    if (!regex)
        die("%s: no Hugging Face pre-tokenizer known for this tokenizer.ggml.pre", o->in);
    json_t *added = json_array();
    json_t *model_obj = bpe_model(g, o, added);
    json_t *pretok = json_pack("{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b,s:b}]}", "type",
                               "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
                               regex, "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
                               "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0);
    json_t *t = json_pack(
        "{s:s,s:n,s:n,s:o,s:n,s:o,s:{s:s,s:b,s:b,s:b},s:o}", "version", "1.0", "truncation",
        "padding", "added_tokens", added, "normalizer", "pre_tokenizer", pretok, "decoder", "type",
        "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model", model_obj);
    dump(t, o, "tokenizer.json");
}

// tokenizer_config.json: special tokens by text, add_bos/add_eos, template.
static void write_tokenizer_config(const struct opts *o, const struct gguf *g)
{
    static const struct {
        const char *gguf, *hf;
    } specials[] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
                    {"tokenizer.ggml.eos_token_id", "eos_token"},
                    {"tokenizer.ggml.padding_token_id", "pad_token"},
                    {"tokenizer.ggml.unknown_token_id", "unk_token"},
                    {"tokenizer.ggml.seperator_token_id", "sep_token"},
                    {"tokenizer.ggml.cls_token_id", "cls_token"},
                    {"tokenizer.ggml.mask_token_id", "mask_token"}};
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    json_t *c = json_pack("{s:s}", "tokenizer_class",
                          encoder ? "BertTokenizer" : "PreTrainedTokenizerFast");
    if (encoder)
        json_object_set_new(c, "do_lower_case", json_true());
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        uint32_t id;
        if (gguf_get_u32(g, specials[i].gguf, &id) && id < tokens->val.arr_count) {
            char *text = token_text(tokens, id);
            json_object_set_new(c, specials[i].hf, json_string(text));
            free(text);
        }
    }
    bool b;
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
        json_object_set_new(c, "add_bos_token", json_boolean(b));
    if (gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b))
        json_object_set_new(c, "add_eos_token", json_boolean(b));
    struct str tmpl;
    if (gguf_get_str(g, "tokenizer.chat_template", &tmpl))
        json_object_set_new(c, "chat_template", json_stringn(tmpl.ptr, tmpl.len));
    dump(c, o, "tokenizer_config.json");
}

// PEFT's adapter_config.json: rank (lora_b's ne[0]), alpha, target modules.
static void write_adapter_config(const struct opts *o, const struct gguf *g)
{
    float alpha = 0;
    gguf_get_f32(g, "adapter.lora.alpha", &alpha);
    int64_t r = 0;
    json_t *targets = json_array();
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        char gname[96], w[96], hw[160];
        snprintf(gname, sizeof gname, "%.*s", (int)t->name.len, t->name.ptr);
        if (!cstr_ends_with(gname, ".lora_b"))
            continue;
        r = t->ne[0];
        snprintf(w, sizeof w, "%.*s", (int)(strlen(gname) - strlen(".lora_b")), gname);
        hf_name(w, hw, sizeof hw);  // model.layers.0.self_attn.q_proj.weight → q_proj
        hw[strlen(hw) - strlen(".weight")] = '\0';
        const char *mod = strrchr(hw, '.') ? strrchr(hw, '.') + 1 : hw;
        bool seen = false;
        for (size_t k = 0; k < json_array_size(targets); k++)
            seen |= strcmp(json_string_value(json_array_get(targets, k)), mod) == 0;
        if (!seen)
            json_array_append_new(targets, json_string(mod));
    }
    dump(json_pack("{s:s,s:s,s:I,s:o,s:o,s:f,s:b,s:b,s:s}", "peft_type", "LORA", "task_type",
                   "CAUSAL_LM", "r", (json_int_t)r, "lora_alpha", jsonx_real_f32(alpha),
                   "target_modules", targets, "lora_dropout", 0.0, "use_rslora", 0, "use_dora", 0,
                   "bias", "none"),
         o, "adapter_config.json");
}

// ---------------------------------------------------------------------------
// Encoders (bert, nomic-bert): config.json in each family's spelling,
// WordPiece tokenizer.json and vocab.txt, sentence-transformers pooling.

static void write_encoder_config(const struct opts *o, const struct gguf *g, const char *hf,
                                 const char *model_type, uint64_t n_vocab)
{
    json_t *c = json_pack("{s:[s],s:s}", "architectures", hf, "model_type", model_type);
    const struct gguf_tensor *tt = gguf_tensor_find(g, "token_types.weight");
    json_object_set_new(c, "type_vocab_size", json_integer(tt ? tt->ne[1] : 2));
    json_object_set_new(c, "vocab_size", json_integer((json_int_t)n_vocab));
    uint32_t pad;
    if (gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &pad))
        json_object_set_new(c, "pad_token_id", json_integer(pad));
    if (strcmp(model_type, "bert") == 0) {  // transformers' BertConfig
        put_u32(c, "hidden_size", g, "embedding_length");
        put_u32(c, "intermediate_size", g, "feed_forward_length");
        put_u32(c, "num_hidden_layers", g, "block_count");
        put_u32(c, "num_attention_heads", g, "attention.head_count");
        put_u32(c, "max_position_embeddings", g, "context_length");
        put_f32(c, "layer_norm_eps", g, "attention.layer_norm_epsilon");
        json_object_set_new(c, "hidden_act", json_string("gelu"));
        json_object_set_new(c, "position_embedding_type", json_string("absolute"));
    } else {  // nomic-embed-text's GPT-2-style NomicBertConfig
        put_u32(c, "n_embd", g, "embedding_length");
        put_u32(c, "n_inner", g, "feed_forward_length");
        put_u32(c, "n_layer", g, "block_count");
        put_u32(c, "n_head", g, "attention.head_count");
        put_u32(c, "n_positions", g, "context_length");
        put_u32(c, "max_trained_positions", g, "context_length");
        put_f32(c, "layer_norm_epsilon", g, "attention.layer_norm_epsilon");
        put_f32(c, "rotary_emb_base", g, "rope.freq_base");
        json_object_set_new(c, "rotary_emb_fraction", json_real(1.0));
        json_object_set_new(c, "rotary_emb_interleaved", json_false());
        json_object_set_new(c, "activation_function", json_string("swiglu"));
        json_object_set_new(c, "causal", json_false());
        json_object_set_new(c, "prenorm", json_false());
        json_object_set_new(c, "qkv_proj_bias", json_false());
        json_object_set_new(c, "mlp_fc1_bias", json_false());
        json_object_set_new(c, "mlp_fc2_bias", json_false());
    }
    dump(c, o, "config.json");
}

// A GGUF "bert" token back in WordPiece form: U+2581 starts a word, other
// pieces continue one ("##"), bracketed and control tokens are as they are.
static char *wordpiece_text(const struct gguf_kv *tokens, uint64_t i, int64_t type)
{
    char *t = token_text(tokens, i);
    size_t l = strlen(t);
    if (type == 3 || (l >= 2 && t[0] == '[' && t[l - 1] == ']'))
        return t;
    char *w = strncmp(t, "\xe2\x96\x81", 3) == 0 ? strdup(t + 3) : xasprintf("##%s", t);
    free(t);
    return w;
}

static void write_wordpiece(const struct opts *o, const struct gguf *g)
{
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    const struct gguf_kv *types = gguf_find(g, "tokenizer.ggml.token_type");
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.txt", o->out);
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot create %s", path);
    json_t *vocab = json_object(), *added = json_array();
    for (uint64_t i = 0; i < tokens->val.arr_count; i++) {
        int64_t type = 1;
        if (types)
            gguf_arr_i64(types, i, &type);
        char *text = wordpiece_text(tokens, i, type);
        fprintf(f, "%s\n", text);
        json_object_set_new(vocab, text, json_integer((json_int_t)i));
        if (type == 3)
            json_array_append_new(added,
                                  json_pack("{s:I,s:s,s:b,s:b,s:b,s:b,s:b}", "id", (json_int_t)i,
                                            "content", text, "single_word", 0, "lstrip", 0,
                                            "rstrip", 0, "normalized", 0, "special", 1));
        free(text);
    }
    if (fclose(f) != 0)
        die("write %s failed", path);
    json_t *t = json_pack(
        "{s:s,s:n,s:n,s:o,s:{s:s,s:b,s:b,s:n,s:b},s:{s:s},s:{s:s,s:s},"
        "s:{s:s,s:s,s:s,s:i,s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
        "BertNormalizer", "clean_text", 1, "handle_chinese_chars", 1, "strip_accents", "lowercase",
        1, "pre_tokenizer", "type", "BertPreTokenizer", "decoder", "type", "WordPiece", "prefix",
        "##", "model", "type", "WordPiece", "unk_token", "[UNK]", "continuing_subword_prefix", "##",
        "max_input_chars_per_word", 100, "vocab", vocab);
    dump(t, o, "tokenizer.json");
}

// sentence-transformers' modules.json and 1_Pooling/config.json for the
// file's pooling_type (1 mean, 2 cls, 3 last token).
static void write_pooling(const struct opts *o, const struct gguf *g)
{
    uint32_t type, dim = 0;
    if (!gguf_get_arch_u32(g, "pooling_type", &type) || type < 1 || type > 3)
        return;
    gguf_get_arch_u32(g, "embedding_length", &dim);
    dump(json_pack("[{s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s}]", "idx", "0", "name", "0", "path", "",
                   "type", "sentence_transformers.models.Transformer", "idx", "1", "name", "1",
                   "path", "1_Pooling", "type", "sentence_transformers.models.Pooling"),
         o, "modules.json");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/1_Pooling", o->out);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        die("cannot create %s", dir);
    dump(json_pack("{s:I,s:b,s:b,s:b,s:b}", "word_embedding_dimension", (json_int_t)dim,
                   "pooling_mode_cls_token", type == 2, "pooling_mode_mean_tokens", type == 1,
                   "pooling_mode_max_tokens", 0, "pooling_mode_lasttoken", type == 3),
         o, "1_Pooling/config.json");
}

static void usage(void)
{
    fprintf(stderr,
            "usage: hf-export IN.gguf OUTDIR [--dtype auto|f32|f16|bf16] [--shards N]\n"
            "                 [--merges strings|pairs] [--rope-llama3 F,LOW,HIGH,ORIG]\n"
            "                 [--vocab-limit N] [--base BASE.gguf (a LoRA adapter's model)]\n");
    exit(2);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.dtype = "auto", .shards = 1};
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--dtype") == 0 && v)
            o->dtype = v, i++;
        else if (strcmp(a, "--shards") == 0 && v)
            o->shards = atoi(v), i++;
        else if (strcmp(a, "--base") == 0 && v)
            o->base = v, i++;
        else if (strcmp(a, "--vocab-limit") == 0 && v)
            o->vocab_limit = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--merges") == 0 && v)
            o->merge_pairs = strcmp(v, "pairs") == 0, i++;
        else if (strcmp(a, "--rope-llama3") == 0 && v) {
            if (sscanf(v, "%lf,%lf,%lf,%lf", &o->rope[0], &o->rope[1], &o->rope[2], &o->rope[3]) !=
                4)
                usage();
            i++;
        } else if (a[0] != '-' && pos == 0)
            o->in = a, pos++;
        else if (a[0] != '-' && pos == 1)
            o->out = a, pos++;
        else
            usage();
    }
    if (!o->out || o->shards < 1 || o->shards > 999)
        usage();
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_args(argc, argv, &o);
    struct gguf *g;
    struct err e = {0};
    if (gguf_open(&g, o.in, &e) < 0)
        die("%s", e.msg);
    struct str arch = gguf_architecture(g);
    size_t a = 0;
    while (a < sizeof archs / sizeof archs[0] && !str_eq_cstr(arch, archs[a].arch))
        a++;
    if (a == sizeof archs / sizeof archs[0])
        die("%s: architecture not supported by hf-export", o.in);
    gemma = archs[a].gemma;
    phi3 = strcmp(archs[a].arch, "phi3") == 0;
    encoder = strcmp(archs[a].arch, "bert") == 0 || strcmp(archs[a].arch, "nomic-bert") == 0;
    gptoss = strcmp(archs[a].arch, "gpt-oss") == 0;
    first_renames = gemma                                      ? gemma_renames
                    : phi3                                     ? phi3_renames
                    : strcmp(archs[a].arch, "bert") == 0       ? bert_renames
                    : strcmp(archs[a].arch, "nomic-bert") == 0 ? nomic_renames
                    : gptoss                                   ? gptoss_renames
                                                               : NULL;
    uint32_t n_exp = 0;
    mixtral = archs[a].permute && gguf_get_arch_u32(g, "expert_count", &n_exp) && n_exp > 0;
    if (mkdir(o.out, 0755) < 0 && errno != EEXIST)
        die("cannot create %s", o.out);
    struct str type;
    o.adapter = gguf_get_str(g, "general.type", &type) && str_eq_cstr(type, "adapter");
    if (o.adapter) {
        struct gguf *base = NULL;
        if (o.base && gguf_open(&base, o.base, &e) < 0)
            die("%s", e.msg);
        write_adapter_config(&o, g);
        write_tensors(&o, g, base ? base : g, archs[a].permute);
        if (base)
            gguf_close(base);
        gguf_close(g);
        return 0;
    }
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    if (!tokens)
        die("%s: no vocabulary", o.in);
    if (encoder) {
        write_encoder_config(&o, g, archs[a].hf, archs[a].model_type, tokens->val.arr_count);
        write_wordpiece(&o, g);
        write_pooling(&o, g);
    } else {
        write_config(&o, g, mixtral ? "MixtralForCausalLM" : archs[a].hf,
                     mixtral ? "mixtral" : archs[a].model_type, tokens->val.arr_count);
        write_tokenizer(&o, g);
    }
    write_tokenizer_config(&o, g);
    write_tensors(&o, g, g, archs[a].permute);
    gguf_close(g);
    return 0;
}

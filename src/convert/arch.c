// The architectures the converter knows, one row per Hugging Face class:
// how tensor names map (substring renames as Ollama's converters list them,
// applied left to right, the first listed winning at a position), which
// config.json fields become which GGUF keys, and the few per-family rules
// (Q/K row order for llama-style RoPE, Llama 3 RoPE factors).
#include "convert/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Llama-style names (convert_llama.go, convert_qwen2.go, convert_qwen3.go).
static const struct conv_rename llama_renames[] = {
    {"lm_head", "output"},
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"model.layers", "blk"},
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.up_proj", "ffn_up"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {NULL, NULL},
};

// Phi-3: fused QKV and gate/up projections, kept fused in the GGUF.
static const struct conv_rename phi3_renames[] = {
    {"lm_head", "output"},
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"model.layers", "blk"},
    {"input_layernorm", "attn_norm"},
    {"self_attn.qkv_proj", "attn_qkv"},
    {"self_attn.o_proj", "attn_output"},
    {"mlp.gate_up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"post_attention_layernorm", "ffn_norm"},
    {NULL, NULL},
};

// Gemma 2 / 3: four norms per block.
static const struct conv_rename gemma_renames[] = {
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"model.layers", "blk"},
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.up_proj", "ffn_up"},
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
    {NULL, NULL},
};

// Keys every decoder here has.
#define COMMON_HPARAMS                                                                             \
    {"num_hidden_layers", "block_count", HP_U32},                                                  \
        {"max_position_embeddings", "context_length", HP_U32},                                     \
        {"hidden_size", "embedding_length", HP_U32},                                               \
        {"intermediate_size", "feed_forward_length", HP_U32},                                      \
        {"num_attention_heads", "attention.head_count", HP_U32},                                   \
        {"num_key_value_heads", "attention.head_count_kv", HP_U32},                                \
        {"rope_theta", "rope.freq_base", HP_F32},                                                  \
    {                                                                                              \
        "rms_norm_eps", "attention.layer_norm_rms_epsilon", HP_F32                                 \
    }

static const struct hp_row llama_hparams[] = {
    COMMON_HPARAMS,
    {"vocab_size", "vocab_size", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
};

static const struct hp_row qwen2_hparams[] = {COMMON_HPARAMS};

static const struct hp_row mixtral_hparams[] = {
    COMMON_HPARAMS,
    {"vocab_size", "vocab_size", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
    {"intermediate_size", "expert_feed_forward_length", HP_U32},
    {"num_local_experts", "expert_count", HP_U32},
    {"num_experts_per_tok", "expert_used_count", HP_U32},
};

static const struct hp_row qwen3_hparams[] = {
    COMMON_HPARAMS,
    {"head_dim", "rope.dimension_count", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
};

static const struct hp_row qwen3moe_hparams[] = {
    COMMON_HPARAMS,
    {"head_dim", "rope.dimension_count", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
    {"num_experts", "expert_count", HP_U32},
    {"num_experts_per_tok", "expert_used_count", HP_U32},
    {"moe_intermediate_size", "expert_feed_forward_length", HP_U32},
};

static const struct hp_row gemma2_hparams[] = {
    COMMON_HPARAMS,
    {"head_dim", "rope.dimension_count", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
    {"sliding_window", "attention.sliding_window", HP_U32},
    {"attn_logit_softcapping", "attn_logit_softcapping", HP_F32},
    {"final_logit_softcapping", "final_logit_softcapping", HP_F32},
};

static const struct hp_row gemma3_hparams[] = {
    COMMON_HPARAMS,
    {"head_dim", "rope.dimension_count", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
    {"sliding_window", "attention.sliding_window", HP_U32},
    {"final_logit_softcapping", "final_logit_softcapping", HP_F32},
    {"rope_local_base_freq", "rope.local.freq_base", HP_F32},
};

static const struct hp_row phi3_hparams[] = {COMMON_HPARAMS};

// Llama 3.1+ "llama3" RoPE scaling as a rope_freqs tensor of head_dim/2
// factors (convert_llama.go ropeFactors); "linear" as scaling keys.
static int llama3_rope_factors(struct conv *c, const json_t *rs, uint32_t dim)
{
    float theta = 10000.0f;
    conv_cfg_f32(c, "rope_theta", &theta);
    double factor = json_number_value(json_object_get(rs, "factor"));
    double lo = json_number_value(json_object_get(rs, "low_freq_factor"));
    double hi = json_number_value(json_object_get(rs, "high_freq_factor"));
    double orig = json_number_value(json_object_get(rs, "original_max_position_embeddings"));
    factor = factor > 0 ? factor : 8;
    lo = lo > 0 ? lo : 1;
    hi = hi > 0 ? hi : 4;
    orig = orig > 0 ? orig : 8192;
    if (dim < 2 || dim > 4096 || hi == lo)
        return -1;
    struct conv_extra_tensor *t = &c->extra[c->n_extra++];
    snprintf(t->name, sizeof t->name, "rope_freqs.weight");
    t->n = dim / 2;
    t->data = xcalloc((size_t)t->n, sizeof(float));
    float lambda_lo = (float)(orig / lo), lambda_hi = (float)(orig / hi);
    for (uint32_t i = 0; i < dim; i += 2) {
        double lambda = 2 * M_PI * pow(theta, (double)i / dim);
        float f;
        if (lambda < lambda_hi)
            f = 1;
        else if (lambda > lambda_lo)
            f = (float)factor;
        else {
            float smooth = (float)(((float)orig / (float)lambda - lo) / (hi - lo));
            f = 1 / ((1 - smooth) / (float)factor + smooth);
        }
        t->data[i / 2] = f;
    }
    return 0;
}

static int llama_extra(struct conv *c, struct gguf_writer *w, struct err *e)
{
    uint32_t hidden = 0, heads = 0, head_dim = 0;
    conv_cfg_u32(c, "hidden_size", &hidden);
    conv_cfg_u32(c, "num_attention_heads", &heads);
    if (!conv_cfg_u32(c, "head_dim", &head_dim) && heads)
        head_dim = hidden / heads;
    if (head_dim)
        gguf_writer_kv_u32(w, "llama.rope.dimension_count", head_dim);
    const json_t *rs = json_object_get(c->config, "rope_scaling");
    const char *type = json_string_value(json_object_get(rs, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(rs, "type"));
    if (!type || strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "linear") == 0) {
        gguf_writer_kv_str(w, "llama.rope.scaling.type", "linear");
        gguf_writer_kv_f32(w, "llama.rope.scaling.factor",
                           (float)json_number_value(json_object_get(rs, "factor")));
        return 0;
    }
    if (strcmp(type, "llama3") == 0 && llama3_rope_factors(c, rs, head_dim) == 0)
        return 0;
    return err_set(e, ERR_UNSUPPORTED, "config.json: rope_scaling type %s is not supported", type);
}

// Qwen2/3 rope scaling: only "yarn" changes the keys (convert_qwen2.go).
static int qwen_extra(struct conv *c, struct gguf_writer *w, struct err *e)
{
    const json_t *rs = json_object_get(c->config, "rope_scaling");
    const char *type = json_string_value(json_object_get(rs, "type"));
    if (!type)
        type = json_string_value(json_object_get(rs, "rope_type"));
    if (!type || strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "yarn") != 0)
        return err_set(e, ERR_UNSUPPORTED, "config.json: rope_scaling type %s is not supported",
                       type);
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", c->a->arch);
    gguf_writer_kv_str(w, key, "yarn");
    snprintf(key, sizeof key, "%s.rope.scaling.factor", c->a->arch);
    gguf_writer_kv_f32(w, key, (float)json_number_value(json_object_get(rs, "factor")));
    return 0;
}

// Per-expert HF tensors (Qwen3-MoE / Qwen2-MoE style, Mixtral style).
static const struct {
    const char *infix, *proj, *out;
} expert_names[] = {
    {"mlp.experts.", "gate_proj", "ffn_gate_exps"},
    {"mlp.experts.", "up_proj", "ffn_up_exps"},
    {"mlp.experts.", "down_proj", "ffn_down_exps"},
    {"block_sparse_moe.experts.", "w1", "ffn_gate_exps"},
    {"block_sparse_moe.experts.", "w3", "ffn_up_exps"},
    {"block_sparse_moe.experts.", "w2", "ffn_down_exps"},
};

bool conv_expert_name(const char *hf, char *out, size_t n, int *expert)
{
    int layer, at = 0, at2 = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0)
        return false;
    for (size_t i = 0; i < sizeof expert_names / sizeof expert_names[0]; i++) {
        size_t l = strlen(expert_names[i].infix);
        if (strncmp(hf + at, expert_names[i].infix, l) != 0)
            continue;
        const char *rest = hf + at + l;
        if (sscanf(rest, "%d.%n", expert, &at2) != 1 || at2 == 0 || *expert < 0 ||
            strncmp(rest + at2, expert_names[i].proj, strlen(expert_names[i].proj)) != 0 ||
            strcmp(rest + at2 + strlen(expert_names[i].proj), ".weight") != 0)
            continue;
        snprintf(out, n, "blk.%d.%s.weight", layer, expert_names[i].out);
        return true;
    }
    return false;
}

// A config.json float list as an F32 tensor (LongRoPE factors).
static int factor_tensor(struct conv *c, const char *name, const json_t *list, uint32_t want)
{
    if (json_array_size(list) != want || c->n_extra >= sizeof c->extra / sizeof c->extra[0])
        return -1;
    struct conv_extra_tensor *t = &c->extra[c->n_extra++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n = want;
    t->data = xcalloc(want, sizeof(float));
    for (uint32_t i = 0; i < want; i++)
        t->data[i] = (float)json_number_value(json_array_get(list, i));
    return 0;
}

// Phi-3: partial rotary dimension, head sizes, LongRoPE factor tensors with
// the original context and attention factor (llama.cpp's Phi3MiniModel).
static int phi3_extra(struct conv *c, struct gguf_writer *w, struct err *e)
{
    uint32_t hidden = 0, heads = 0, ctx = 0, orig = 0;
    float partial = 1;
    conv_cfg_u32(c, "hidden_size", &hidden);
    conv_cfg_u32(c, "num_attention_heads", &heads);
    conv_cfg_u32(c, "max_position_embeddings", &ctx);
    conv_cfg_f32(c, "partial_rotary_factor", &partial);
    uint32_t head_dim = hidden / heads, n_rot = (uint32_t)((float)head_dim * partial);
    gguf_writer_kv_u32(w, "phi3.rope.dimension_count", n_rot);
    gguf_writer_kv_u32(w, "phi3.attention.key_length", head_dim);
    gguf_writer_kv_u32(w, "phi3.attention.value_length", head_dim);
    const json_t *rs = json_object_get(c->config, "rope_scaling");
    if (!rs || json_is_null(rs))
        return 0;
    if (!conv_cfg_u32(c, "original_max_position_embeddings", &orig) || orig == 0 || ctx == 0)
        return err_set(e, ERR_FORMAT,
                       "config.json: LongRoPE needs original_max_position_embeddings");
    if (factor_tensor(c, "rope_factors_long.weight", json_object_get(rs, "long_factor"),
                      n_rot / 2) < 0 ||
        factor_tensor(c, "rope_factors_short.weight", json_object_get(rs, "short_factor"),
                      n_rot / 2) < 0)
        return err_set(e, ERR_FORMAT, "config.json: rope_scaling factors must be %u numbers",
                       n_rot / 2);
    double scale = (double)ctx / orig;
    gguf_writer_kv_u32(w, "phi3.rope.scaling.original_context_length", orig);
    gguf_writer_kv_f32(w, "phi3.rope.scaling.attn_factor",
                       scale <= 1 ? 1.0f : (float)sqrt(1 + log(scale) / log((double)orig)));
    return 0;
}

// Gemma 3: linear RoPE scaling of the global layers (4B and up).
static int gemma3_extra(struct conv *c, struct gguf_writer *w, struct err *e)
{
    const json_t *rs = json_object_get(c->config, "rope_scaling");
    const char *type = json_string_value(json_object_get(rs, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(rs, "type"));
    if (!type || strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "linear") != 0)
        return err_set(e, ERR_UNSUPPORTED, "config.json: rope_scaling type %s is not supported",
                       type);
    gguf_writer_kv_str(w, "gemma3.rope.scaling.type", "linear");
    gguf_writer_kv_f32(w, "gemma3.rope.scaling.factor",
                       (float)json_number_value(json_object_get(rs, "factor")));
    return 0;
}

// BERT (BertModel): the transformers names; "bert." prefixes (BertForMaskedLM
// checkpoints) dropped and TF-era LayerNorm gamma/beta named as today.
static const struct conv_rename bert_renames[] = {
    {"bert.", ""},
    {"embeddings.word_embeddings", "token_embd"},
    {"embeddings.token_type_embeddings", "token_types"},
    {"embeddings.position_embeddings", "position_embd"},
    {"embeddings.LayerNorm", "token_embd_norm"},
    {"encoder.layer", "blk"},
    {"attention.self.query", "attn_q"},
    {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},
    {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"},
    {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},
    {"output.LayerNorm", "layer_output_norm"},
    {".gamma", ".weight"},
    {".beta", ".bias"},
    {NULL, NULL},
};

// nomic-embed-text v1/v1.5 (NomicBertModel): fused Wqkv, SwiGLU fc11 (up)
// and fc12 (gate), post-norms norm1/norm2 (llama.cpp's tensor map).
static const struct conv_rename nomic_renames[] = {
    {"embeddings.word_embeddings", "token_embd"},
    {"embeddings.token_type_embeddings", "token_types"},
    {"emb_ln", "token_embd_norm"},
    {"encoder.layers", "blk"},
    {"attn.Wqkv", "attn_qkv"},
    {"attn.out_proj", "attn_output"},
    {"norm1", "attn_output_norm"},
    {"mlp.fc11", "ffn_up"},
    {"mlp.fc12", "ffn_gate"},
    {"mlp.fc2", "ffn_down"},
    {"norm2", "layer_output_norm"},
    {NULL, NULL},
};

// What an embedding model does not use: the pooler, the masked-LM and NSP
// heads, the position_ids buffer (I64 in older checkpoints).
static const char *const bert_skip[] = {"embeddings.position_ids", "pooler.", "cls.", NULL};

// GPT-2 spellings (n_embd, n_layer, ...) reach these rows through the
// aliases of convert.c.
static const struct hp_row bert_hparams[] = {
    {"num_hidden_layers", "block_count", HP_U32},
    {"max_position_embeddings", "context_length", HP_U32},
    {"hidden_size", "embedding_length", HP_U32},
    {"intermediate_size", "feed_forward_length", HP_U32},
    {"num_attention_heads", "attention.head_count", HP_U32},
    {"layer_norm_eps", "attention.layer_norm_epsilon", HP_F32},
};

// nomic-bert: the context is max_trained_positions (extra hook), RoPE base.
static const struct hp_row nomic_hparams[] = {
    {"num_hidden_layers", "block_count", HP_U32},
    {"hidden_size", "embedding_length", HP_U32},
    {"intermediate_size", "feed_forward_length", HP_U32},
    {"num_attention_heads", "attention.head_count", HP_U32},
    {"layer_norm_eps", "attention.layer_norm_epsilon", HP_F32},
    {"rope_theta", "rope.freq_base", HP_F32},
};

// The encoders: non-causal, no GQA, head sizes, the token-type count
// (type_vocab_size; 2 as Ollama writes when absent); nomic-bert's context is
// the trained one (n_positions 8192 of v1.5 but max_trained_positions 2048,
// as llama.cpp) and RoPE spans the head.
static int bert_extra(struct conv *c, struct gguf_writer *w, struct err *e)
{
    const char *a = c->a->arch;
    uint32_t hidden = 0, heads = 0, types = 2, ctx = 0, trained = 0, moe = 0;
    if (conv_cfg_u32(c, "moe_every_n_layers", &moe) && moe > 0)
        return err_set(e, ERR_UNSUPPORTED,
                       "config.json: nomic-bert mixture-of-experts (moe_every_n_layers) is not "
                       "supported");
    conv_cfg_u32(c, "hidden_size", &hidden);
    conv_cfg_u32(c, "num_attention_heads", &heads);
    conv_cfg_u32(c, "type_vocab_size", &types);
    char key[96];
#define KEY(s) (snprintf(key, sizeof key, "%s." s, a), key)
    gguf_writer_kv_bool(w, KEY("attention.causal"), false);
    gguf_writer_kv_u32(w, KEY("attention.head_count_kv"), heads);
    gguf_writer_kv_u32(w, KEY("attention.key_length"), hidden / heads);
    gguf_writer_kv_u32(w, KEY("attention.value_length"), hidden / heads);
    if (strcmp(a, "nomic-bert") == 0) {
        gguf_writer_kv_u32(w, KEY("rope.dimension_count"), hidden / heads);
        conv_cfg_u32(c, "max_position_embeddings", &ctx);
        if (conv_cfg_u32(c, "max_trained_positions", &trained) && trained > 0 &&
            (ctx == 0 || trained < ctx))
            ctx = trained;
        if (ctx)
            gguf_writer_kv_u32(w, KEY("context_length"), ctx);
    }
#undef KEY
    gguf_writer_kv_u32(w, "tokenizer.ggml.token_type_count", types);
    return 0;
}

// gpt-oss: llama-style names plus attention sinks (a tensor without
// ".weight" in HF), the router, and a post-attention norm in Gemma's sense;
// the experts are planned by gptoss.c.
static const struct conv_rename gptoss_renames[] = {
    {"lm_head", "output"},
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"model.layers", "blk"},
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.sinks", "attn_sinks.weight"},
    {"post_attention_layernorm", "post_attention_norm"},
    {"mlp.router", "ffn_gate_inp"},
    {NULL, NULL},
};

static const struct hp_row gptoss_hparams[] = {
    COMMON_HPARAMS,
    {"head_dim", "rope.dimension_count", HP_U32},
    {"head_dim", "attention.key_length", HP_U32},
    {"head_dim", "attention.value_length", HP_U32},
    {"num_local_experts", "expert_count", HP_U32},
    {"num_experts_per_tok", "expert_used_count", HP_U32},
    {"intermediate_size", "expert_feed_forward_length", HP_U32},
    {"sliding_window", "attention.sliding_window", HP_U32},
};

// gpt-oss: YaRN (the original context from rope_scaling, else
// initial_context_length), as Ollama's converter writes it.
static int gptoss_extra(struct conv *c, struct gguf_writer *w, struct err *e)
{
    const json_t *rs = json_object_get(c->config, "rope_scaling");
    const char *type = json_string_value(json_object_get(rs, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(rs, "type"));
    if (!type || strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "yarn") != 0)
        return err_set(e, ERR_UNSUPPORTED, "config.json: rope_scaling type %s is not supported",
                       type);
    uint32_t orig = 0;
    const json_t *o = json_object_get(rs, "original_max_position_embeddings");
    if (json_is_integer(o) && json_integer_value(o) > 0 && json_integer_value(o) <= UINT32_MAX)
        orig = (uint32_t)json_integer_value(o);
    else
        conv_cfg_u32(c, "initial_context_length", &orig);
    gguf_writer_kv_str(w, "gpt-oss.rope.scaling.type", "yarn");
    gguf_writer_kv_f32(w, "gpt-oss.rope.scaling.factor",
                       (float)json_number_value(json_object_get(rs, "factor")));
    if (orig)
        gguf_writer_kv_u32(w, "gpt-oss.rope.scaling.original_context_length", orig);
    static const char *const betas[][2] = {{"beta_fast", "gpt-oss.rope.scaling.yarn_beta_fast"},
                                           {"beta_slow", "gpt-oss.rope.scaling.yarn_beta_slow"}};
    for (size_t i = 0; i < 2; i++) {
        const json_t *b = json_object_get(rs, betas[i][0]);
        if (json_is_number(b) && json_number_value(b) != 0)
            gguf_writer_kv_f32(w, betas[i][1], (float)json_number_value(b));
    }
    return 0;
}

#define ROWS(t) t, sizeof(t) / sizeof((t)[0])

static const struct conv_arch archs[] = {
    {"LlamaForCausalLM", "llama", llama_renames, ROWS(llama_hparams), true, 0, llama_extra},
    {"MistralForCausalLM", "llama", llama_renames, ROWS(llama_hparams), true, 0, llama_extra},
    {"MixtralForCausalLM", "llama", llama_renames, ROWS(mixtral_hparams), true, 0, llama_extra},
    {"Qwen2ForCausalLM", "qwen2", llama_renames, ROWS(qwen2_hparams), false, 0, qwen_extra},
    {"Qwen3ForCausalLM", "qwen3", llama_renames, ROWS(qwen3_hparams), false, 0, qwen_extra},
    {"Qwen3MoeForCausalLM", "qwen3moe", llama_renames, ROWS(qwen3moe_hparams), false, 0,
     qwen_extra},
    {"Phi3ForCausalLM", "phi3", phi3_renames, ROWS(phi3_hparams), false, 0, phi3_extra},
    {"Gemma2ForCausalLM", "gemma2", gemma_renames, ROWS(gemma2_hparams), false, 1, NULL},
    {"Gemma3ForCausalLM", "gemma3", gemma_renames, ROWS(gemma3_hparams), false, 1, gemma3_extra},
    {"Gemma3TextModel", "gemma3", gemma_renames, ROWS(gemma3_hparams), false, 1, gemma3_extra},
    {"BertModel", "bert", bert_renames, ROWS(bert_hparams), false, 0, bert_extra, bert_skip},
    {"NomicBertModel", "nomic-bert", nomic_renames, ROWS(nomic_hparams), false, 0, bert_extra,
     bert_skip},
    {"GptOssForCausalLM", "gpt-oss", gptoss_renames, ROWS(gptoss_hparams), false, 0, gptoss_extra,
     NULL, conv_gptoss_plan},
};

const struct conv_arch *conv_arch_find(const char *hf_name)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].hf_name, hf_name) == 0)
            return &archs[i];
    return NULL;
}

const struct conv_arch *conv_arch_by_gguf(const char *arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].arch, arch) == 0)
            return &archs[i];
    return NULL;
}

void conv_arch_list(char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof archs / sizeof archs[0] && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", archs[i].hf_name);
}

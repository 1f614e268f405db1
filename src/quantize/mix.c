// Quantization mixes: which type each tensor gets when a model is quantized
// to a llama_ftype such as Q4_K_M. Follows llama.cpp's llama_tensor_get_type
// (which Ollama's `create --quantize` runs through llama-quantize) for
// dense llama-like models without an importance matrix:
//   - only 2-D+ tensors whose name ends in "weight" (not norms, not MoE
//     routers, not BERT position/token-type embeddings) are quantized;
//   - output.weight (and token_embd.weight when the output is tied to it)
//     becomes Q6_K unless the mix is Q8_0;
//   - attn_v / ffn_down get more bits in some layers ("use_more_bits");
//   - a type whose block size does not divide the row falls back
//     (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, else F16).
// Tensors are visited by layer in llama.cpp, one attn_v and one ffn_down per
// layer here, so the counters it keeps equal the layer index in the name.
#include "quantize/quantize.h"

#include <stdio.h>
#include <string.h>

enum {
    FT_F32 = 0,
    FT_F16 = 1,
    FT_Q4_0 = 2,
    FT_Q4_1 = 3,
    FT_Q8_0 = 7,
    FT_Q5_0 = 8,
    FT_Q5_1 = 9,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_S = 16,
    FT_Q5_K_M = 17,
    FT_Q6_K = 18,
    FT_BF16 = 32,
};

// Default tensor type of each supported mix (llama_ftype_get_default_type);
// -1 for mixes we cannot produce (IQ types need codebooks or an imatrix).
int quantize_mix_default_type(int32_t ftype)
{
    switch (ftype) {
    case FT_F32:
        return GGUF_TYPE_F32;
    case FT_F16:
        return GGUF_TYPE_F16;
    case FT_BF16:
        return GGUF_TYPE_BF16;
    case FT_Q4_0:
        return GGUF_TYPE_Q4_0;
    case FT_Q4_1:
        return GGUF_TYPE_Q4_1;
    case FT_Q5_0:
        return GGUF_TYPE_Q5_0;
    case FT_Q5_1:
        return GGUF_TYPE_Q5_1;
    case FT_Q8_0:
        return GGUF_TYPE_Q8_0;
    case FT_Q2_K:
        return GGUF_TYPE_Q2_K;
    case FT_Q3_K_S:
    case FT_Q3_K_M:
    case FT_Q3_K_L:
        return GGUF_TYPE_Q3_K;
    case FT_Q4_K_S:
    case FT_Q4_K_M:
        return GGUF_TYPE_Q4_K;
    case FT_Q5_K_S:
    case FT_Q5_K_M:
        return GGUF_TYPE_Q5_K;
    case FT_Q6_K:
        return GGUF_TYPE_Q6_K;
    default:
        return -1;
    }
}

int32_t quantize_mix_from_name(const char *name)
{
    int ft = gguf_file_type_from_name(name);
    if (ft < 0 || quantize_mix_default_type(ft) < 0)
        return -1;
    return ft;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool has(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

bool quantize_tensor_quantizable(const char *name, uint32_t n_dims)
{
    if (n_dims < 2 || !ends_with(name, "weight"))
        return false;
    static const char *const skip[] = {
        "_norm.weight",
        "ffn_gate_inp.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "attn_rel_b.weight",
        ".position_embd",
        ".patch_embd",
        "time_mix_",
    };
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (has(name, skip[i]))
            return false;
    return strcmp(name, "position_embd.weight") != 0 && strcmp(name, "token_types.weight") != 0;
}

static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static int layer_of(const char *name)
{
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1)
        return -1;
    return layer;
}

// Shape fallback when ne0 is not a multiple of the chosen type's block.
static uint32_t fallback(uint32_t type, int64_t ne0)
{
    uint32_t bs = 1;
    gguf_type_geometry(type, &bs, NULL);
    if (ne0 % bs == 0)
        return type;
    uint32_t alt;
    switch (type) {
    case GGUF_TYPE_Q2_K:
    case GGUF_TYPE_Q3_K:
        alt = GGUF_TYPE_Q4_0;
        break;
    case GGUF_TYPE_Q4_K:
        alt = GGUF_TYPE_Q5_0;
        break;
    case GGUF_TYPE_Q5_K:
        alt = GGUF_TYPE_Q5_1;
        break;
    case GGUF_TYPE_Q6_K:
        alt = GGUF_TYPE_Q8_0;
        break;
    default:
        alt = GGUF_TYPE_F16;
        break;
    }
    gguf_type_geometry(alt, &bs, NULL);
    return ne0 % bs == 0 ? alt : GGUF_TYPE_F16;
}

// What the per-tensor rules below look at besides the tensor's name.
struct mix_ctx {
    int32_t ftype;
    int n_layers, n_gqa;
    int layer;  // of this tensor; 0 outside the blocks
    bool is_falcon, is_70b;
};

// output.weight (and token_embd.weight when tied to it): Q6_K, or Q8_0 for Falcon, for a
// Q8_0 mix or when the row does not fit Q6_K's blocks.
static uint32_t output_type(uint32_t t, int64_t ne0, bool is_falcon)
{
    uint32_t bs = 1;
    gguf_type_geometry(t, &bs, NULL);
    if (is_falcon || ne0 % bs != 0)
        return GGUF_TYPE_Q8_0;
    if (t != GGUF_TYPE_Q8_0)
        return GGUF_TYPE_Q6_K;
    return t;
}

// The value projection gets more bits: first layers, GQA models and 70B llamas most.
static uint32_t attn_v_type(const struct mix_ctx *c, uint32_t t)
{
    int32_t ftype = c->ftype;
    int layer = c->layer;
    if (ftype == FT_Q2_K)
        t = c->n_gqa >= 4 ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q3_K;
    else if (ftype == FT_Q3_K_M)
        t = layer < 2 ? GGUF_TYPE_Q5_K : GGUF_TYPE_Q4_K;
    else if (ftype == FT_Q3_K_L)
        t = GGUF_TYPE_Q5_K;
    else if ((ftype == FT_Q4_K_M || ftype == FT_Q5_K_M) && use_more_bits(layer, c->n_layers))
        t = GGUF_TYPE_Q6_K;
    else if (ftype == FT_Q4_K_S && layer < 4)
        t = GGUF_TYPE_Q5_K;
    if (c->is_70b && (t == GGUF_TYPE_Q3_K || t == GGUF_TYPE_Q4_K))
        t = GGUF_TYPE_Q5_K;
    return t;
}

// ffn_down: more bits in the first sixteenth of the layers and in use_more_bits() layers.
static uint32_t ffn_down_type(const struct mix_ctx *c, uint32_t t)
{
    int32_t ftype = c->ftype;
    int layer = c->layer, n_layers = c->n_layers;
    bool is_falcon = c->is_falcon;
    if (ftype == FT_Q2_K) {
        t = GGUF_TYPE_Q3_K;
    } else if (ftype == FT_Q3_K_M) {
        t = layer < n_layers / 16                          ? GGUF_TYPE_Q5_K
            : !is_falcon || use_more_bits(layer, n_layers) ? GGUF_TYPE_Q4_K
                                                           : GGUF_TYPE_Q3_K;
    } else if (ftype == FT_Q3_K_L) {
        t = is_falcon ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q5_K;
    } else if (ftype == FT_Q4_K_M) {
        if (is_falcon)
            t = layer < n_layers / 16            ? GGUF_TYPE_Q6_K
                : use_more_bits(layer, n_layers) ? GGUF_TYPE_Q5_K
                                                 : GGUF_TYPE_Q4_K;
        else if (use_more_bits(layer, n_layers))
            t = GGUF_TYPE_Q6_K;
    } else if (ftype == FT_Q5_K_M && use_more_bits(layer, n_layers)) {
        t = GGUF_TYPE_Q6_K;
    } else if (ftype == FT_Q4_K_S && !is_falcon && layer < n_layers / 8) {
        t = GGUF_TYPE_Q5_K;
    }
    return t;
}

// attn_output: one step up for the low Q2_K/Q3_K mixes (only Q3_K_L for Falcon).
static uint32_t attn_output_type(const struct mix_ctx *c, uint32_t t)
{
    int32_t ftype = c->ftype;
    if (!c->is_falcon) {
        if (ftype == FT_Q2_K)
            t = GGUF_TYPE_Q3_K;
        else if (ftype == FT_Q3_K_M)
            t = GGUF_TYPE_Q4_K;
        else if (ftype == FT_Q3_K_L)
            t = GGUF_TYPE_Q5_K;
    } else if (ftype == FT_Q3_K_L) {
        t = GGUF_TYPE_Q4_K;
    }
    return t;
}

int quantize_mix_tensor_type(int32_t ftype, const char *name, uint32_t cur_type, uint32_t n_dims,
                             int64_t ne0, const struct quantize_mix_model *m)
{
    int dflt = quantize_mix_default_type(ftype);
    if (dflt < 0)
        return -1;
    if (!quantize_tensor_quantizable(name, n_dims))
        return (int)cur_type;
    uint32_t t = (uint32_t)dflt;
    const struct quant_traits *tr = quant_traits_get(t);
    if (!tr || !tr->is_quantized)
        return (int)t;  // F32 / F16 / BF16 mixes: every quantizable tensor converts

    struct mix_ctx c = {
        .ftype = ftype,
        .n_layers = m && m->n_layers > 0 ? m->n_layers : 1,
        .n_gqa = m && m->n_gqa > 0 ? m->n_gqa : 1,
        .layer = layer_of(name),
        .is_falcon = m && m->arch && strcmp(m->arch, "falcon") == 0,
        .is_70b = m && m->arch && strcmp(m->arch, "llama") == 0 && m->n_layers == 80,
    };
    bool tied = m ? m->tied_embeddings : false;
    if (c.layer < 0)
        c.layer = 0;

    bool is_output = strcmp(name, "output.weight") == 0;
    bool is_embd = strcmp(name, "token_embd.weight") == 0;
    bool attn_v =
        has(name, "attn_v.weight") || has(name, "attn_qkv.weight") || has(name, "attn_kv_b.weight");
    if (is_output || (tied && is_embd)) {
        t = output_type(t, ne0, c.is_falcon);
    } else if (is_embd) {
        // keeps the default type
    } else if (attn_v) {
        t = attn_v_type(&c, t);
    } else if (has(name, "ffn_down")) {
        t = ffn_down_type(&c, t);
    } else if (has(name, "attn_output.weight")) {
        t = attn_output_type(&c, t);
    }
    return (int)fallback(t, ne0);
}

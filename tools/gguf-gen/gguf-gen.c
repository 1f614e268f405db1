// gguf-gen: writes deterministic random-weight GGUF models (seeded) for the
// decoder architectures the engine runs (llama, qwen2, qwen3, gemma2, gemma3,
// phi3) and the encoders (bert, nomic-bert), any shape and quantization
// mix, with tokenizer metadata copied from a vocabulary GGUF (or a small
// synthetic byte-fallback vocabulary). Tensors are generated, quantized with
// the reference quantizers and written one chunk at a time, so even the
// 8B preset never sits in memory; --sparse writes the tensor data as holes, --random-blocks
// every block tensor as random blocks (fast, for benchmarks), --confident S a
// model whose greedy continuation survives quantization (for speculative
// decoding: see confident_embd_row).
// See README.md for usage.
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"
#include "quantize/quantize.h"

struct opts {
    const char *preset;
    char arch[32];
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, eps;
    int64_t head_dim, n_rot, n_swa;             // 0: n_embd / n_head, head_dim, none
    float rope_scale;                           // linear factor (0: none)
    int64_t n_expert, n_expert_used, n_ff_exp;  // mixture of experts (qwen3moe, gpt-oss)
    int tied;                                   // -1 = preset default
    const char *type;
    bool type_given;  // --type was on the command line (the mmproj presets default to f16)
    uint64_t seed;
    const char *vocab;
    const char *out;
    bool sparse;
    bool random_blocks;  // every block type as random blocks (fast; for benchmarks)
    bool quiet;
    float confident;  // > 0: token embedding std, untied output = permuted embedding
};

struct preset {
    const char *name, *arch;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, eps;
    bool tied;
    int64_t head_dim, n_rot, n_swa;             // 0: n_embd / n_head, head_dim, none
    float rope_scale;                           // linear factor (0: none)
    int64_t n_expert, n_expert_used, n_ff_exp;  // mixture of experts
};

static const struct preset presets[] = {
    {"tiny", "llama", 256, 2, 4, 2, 512, 512, 4096, 500000.f, 1e-5f, true},
    {"tiny-qwen2", "qwen2", 256, 2, 4, 2, 512, 512, 4096, 1000000.f, 1e-6f, true},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.f, 1e-5f, true},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.f, 1e-6f, true},
    {"llama-3-8b", "llama", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.f, 1e-5f, false},
    // Encoders (need --vocab, e.g. vocab/ggml-vocab-bert-bge.gguf): shapes of
    // all-MiniLM-L6 / nomic-embed-text scaled down.
    {"tiny-bert", "bert", 128, 2, 4, 4, 512, 0, 512, 0.f, 1e-12f, true},
    {"tiny-nomic-bert", "nomic-bert", 128, 2, 4, 4, 512, 0, 2048, 1000.f, 1e-12f, true},
    // The dense families people run, with their real shapes (issue 16).
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 151936, 40960, 1e6f, 1e-6f, true, 128},
    {"qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 6144, 151936, 40960, 1e6f, 1e-6f, true, 128},
    {"qwen3-4b", "qwen3", 2560, 36, 32, 8, 9728, 151936, 40960, 1e6f, 1e-6f, true, 128},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 12288, 151936, 40960, 1e6f, 1e-6f, false, 128},
    {"gemma2-2b", "gemma2", 2304, 26, 8, 4, 9216, 256000, 8192, 1e4f, 1e-6f, true, 256, 0, 4096},
    {"gemma3-1b", "gemma3", 1152, 26, 4, 1, 6912, 262144, 32768, 1e6f, 1e-6f, true, 256, 0, 512},
    {"gemma3-4b", "gemma3", 2560, 34, 8, 4, 10240, 262208, 131072, 1e6f, 1e-6f, true, 256, 0, 1024,
     8.f},
    {"gemma3-12b", "gemma3", 3840, 48, 16, 8, 15360, 262208, 131072, 1e6f, 1e-6f, true, 256, 0,
     1024, 8.f},
    {"phi4-mini", "phi3", 3072, 32, 24, 8, 8192, 200064, 131072, 1e4f, 1e-5f, true, 128, 96},
    {"nomic-embed-text-v1.5", "nomic-bert", 768, 12, 12, 12, 3072, 0, 2048, 1000.f, 1e-12f, true},
    // Tiny versions of the families (synthetic vocabulary unless --vocab).
    {"tiny-qwen3", "qwen3", 64, 2, 4, 2, 128, 512, 40960, 1e6f, 1e-6f, true, 32},
    {"tiny-gemma2", "gemma2", 64, 2, 4, 2, 128, 512, 8192, 1e4f, 1e-6f, true, 32, 0, 8},
    {"tiny-gemma3", "gemma3", 64, 6, 4, 2, 128, 512, 131072, 1e6f, 1e-6f, true, 32, 0, 8, 8.f},
    {"tiny-phi3", "phi3", 64, 2, 4, 2, 128, 512, 131072, 1e4f, 1e-5f, false, 16, 12},
    // Mixtures of experts (issue 17): Qwen3-30B-A3B and gpt-oss-20b shapes
    // (use --type q4_K_M and --type mxfp4_moe), and tiny ones.
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 40960, 1e6f, 1e-6f, false, 128, 0,
     0, 0.f, 128, 8, 768},
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 2880, 201088, 131072, 150000.f, 1e-5f, false, 64, 0,
     128, 32.f, 32, 4, 2880},
    {"tiny-qwen3moe", "qwen3moe", 64, 2, 4, 2, 96, 512, 40960, 1e6f, 1e-6f, true, 32, 0, 0, 0.f, 8,
     2, 32},
    {"tiny-gpt-oss", "gpt-oss", 64, 2, 4, 2, 64, 512, 131072, 150000.f, 1e-5f, false, 32, 0, 8,
     32.f, 8, 2, 64},
    // Issue 43's variations on known blocks (layouts: build_fam43 below):
    // real shapes (SmolLM3-3B, Mixtral-8x7B, OLMo-2-7B, Command R7B,
    // GLM-4.5-Air without its MTP block, Granite-3.3-8B) and tiny ones.
    {"smollm3-3b", "smollm3", 2048, 36, 16, 4, 11008, 128256, 65536, 5e6f, 1e-6f, true, 128},
    {"mixtral-8x7b", "llama", 4096, 32, 32, 8, 14336, 32000, 32768, 1e6f, 1e-5f, false, 128, 0, 0,
     0.f, 8, 2, 14336},
    {"olmo2-7b", "olmo2", 4096, 32, 32, 32, 11008, 100352, 4096, 5e5f, 1e-6f, false, 128},
    {"command-r7b", "cohere2", 4096, 32, 32, 8, 14336, 256000, 131072, 5e4f, 1e-5f, true, 128, 0,
     4096},
    {"glm-4.5-air", "glm4moe", 4096, 46, 96, 8, 10944, 151552, 131072, 1e6f, 1e-5f, false, 128, 64,
     0, 0.f, 128, 8, 1408},
    {"granite-3.3-8b", "granite", 4096, 40, 32, 8, 12800, 49159, 131072, 1e7f, 1e-5f, true, 128},
    {"tiny-smollm3", "smollm3", 64, 4, 4, 2, 128, 512, 65536, 5e6f, 1e-6f, true, 16},
    {"tiny-mixtral", "llama", 64, 2, 4, 2, 64, 512, 32768, 1e6f, 1e-5f, false, 16, 0, 0, 0.f, 4, 2,
     64},
    {"tiny-olmo2", "olmo2", 64, 4, 4, 2, 128, 512, 65536, 5e5f, 1e-6f, false, 16, 0, 8},
    {"tiny-mistral3", "mistral3", 64, 2, 4, 2, 128, 512, 262144, 1e6f, 1e-5f, false, 32},
    {"tiny-cohere2", "cohere2", 64, 4, 4, 2, 64, 512, 131072, 5e4f, 1e-5f, true, 16, 0, 8},
    {"tiny-glm4moe", "glm4moe", 64, 3, 4, 2, 128, 512, 131072, 1e6f, 1e-5f, false, 16, 8, 0, 0.f, 8,
     2, 16},
    {"tiny-granite", "granite", 64, 2, 4, 2, 128, 512, 4096, 1e4f, 1e-5f, true, 16},
    // Gated delta-net hybrids (qwen35; delta-net shapes in gdn_dims below):
    // Qwen3.5-0.8B's shape, and a tiny one shaped as the shared fixture.
    {"qwen35-0.8b", "qwen35", 1024, 24, 8, 2, 3584, 248320, 262144, 1e7f, 1e-6f, true, 256, 64},
    {"tiny-qwen35", "qwen35", 64, 4, 4, 2, 64, 512, 262144, 1e7f, 1e-6f, true, 16, 8},
    // Mamba-2 hybrids: Nemotron Nano 2 9B widths with 6 layers (the layer
    // pattern and Mamba-2 shape: nemotron_h_shapes below), and a tiny one.
    {"nemotron-h", "nemotron_h", 4480, 6, 40, 8, 15680, 131072, 131072, 1e4f, 1e-5f, false, 128},
    {"tiny-nemotron-h", "nemotron_h", 64, 5, 4, 2, 128, 512, 131072, 1e4f, 1e-5f, false, 16},
    // deepseek2 (multi-head latent attention; its MLA widths are in
    // ds2_shapes below): DeepSeek-V2-Lite's widths (16 heads, kv_lora_rank
    // 512, no q LoRA, 64 experts of 1408, 6 used, 2 shared, YaRN x40) on 4
    // layers, and a tiny one. head_dim / n_rot: qk_nope + qk_rope / qk_rope.
    {"deepseek2-lite", "deepseek2", 2048, 4, 16, 1, 10944, 102400, 163840, 10000.f, 1e-6f, false,
     192, 64, 0, 40.f, 64, 6, 1408},
    {"tiny-deepseek2", "deepseek2", 64, 2, 4, 1, 128, 512, 163840, 10000.f, 1e-6f, false, 24, 8, 0,
     0.f, 8, 2, 32},
    // Gemma 4 E2B's text model (its layout: build_gemma4 below): head_dim is
    // the global layers' (512), n_ff the layers' with their own K/V.
    {"gemma4-e2b", "gemma4", 1536, 35, 8, 1, 6144, 262144, 131072, 1e6f, 1e-6f, true, 512, 0, 512},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gguf-gen [--preset NAME | --arch llama|qwen2|qwen3|gemma2|gemma3|phi3|bert|"
            "nomic-bert --n-embd N "
            "--n-layer N --n-head N\n"
            "                 --n-head-kv N --n-ff N --n-vocab N] [--n-ctx N] [--tied|--untied]\n"
            "                [--head-dim N] [--n-rot N] [--n-swa N]\n"
            "                [--n-expert N --n-expert-used N --n-ff-exp N] (qwen3moe, gpt-oss)\n"
            "                [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_K|q3_K_S|q3_K_M|\n"
            "                        q3_K_L|q4_K_S|q4_K_M|q5_K_S|q5_K_M|q6_K|\n"
            "                        iq1_s|iq2_xxs|iq2_xs|iq2_s|iq3_xxs|iq3_s|iq4_nl|iq4_xs|\n"
            "                        tq1_0|tq2_0|mxfp4_moe] [--seed N]\n"
            "                [--vocab VOCAB.gguf] [--sparse] [--random-blocks] [--confident S]\n"
            "                [--quiet] -o OUT.gguf\n"
            "presets:");
    for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
        fprintf(f, " %s", presets[i].name);
    fprintf(f, " gemma3-siglip-mmproj qwen25vl-mmproj\n");
}

// ---------------------------------------------------------------------------
// Deterministic random numbers: one xoshiro256** stream per tensor, seeded
// from (seed, crc32(tensor name)).

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t crc32_str(const char *s)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; *s; s++) {
        c ^= (uint8_t)*s;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void rng_seed(struct rng *r, uint64_t seed, const char *name)
{
    uint64_t x = seed * 0x100000001B3ull ^ ((uint64_t)crc32_str(name) << 1);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

// Standard normal pairs (Box-Muller).
static void rng_normal(struct rng *r, float *out, size_t n, float mean, float std)
{
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((double)(rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
        double u2 = (double)(rng_next(r) >> 11) / 9007199254740992.0;
        double rad = sqrt(-2.0 * log(u1));
        out[i] = mean + std * (float)(rad * cos(6.283185307179586 * u2));
        if (i + 1 < n)
            out[i + 1] = mean + std * (float)(rad * sin(6.283185307179586 * u2));
    }
}

// ---------------------------------------------------------------------------
// Model layout

enum init_kind {
    INIT_EMBD,
    INIT_MATRIX,
    INIT_NORM,
    INIT_BIAS,
    INIT_ROPE_LONG,
    INIT_ROPE_SHORT,
    INIT_NEG,  // about -1 (delta-net ssm_a = -exp(A_log), Mamba-2's A: decays)
};

struct gtensor {
    char name[64];
    uint32_t n_dims;
    int64_t ne[3];  // ne[2]: experts of a 3-D expert tensor (else 1)
    enum init_kind init;
    uint32_t type;
};

struct model {
    struct gtensor *t;
    size_t n, cap;
};

static void add(struct model *m, const char *name, uint32_t n_dims, int64_t ne0, int64_t ne1,
                enum init_kind init)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->t = xrealloc(m->t, m->cap * sizeof(*m->t));
    }
    struct gtensor *t = &m->t[m->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = 1;
    t->init = init;
}

// A 3-D expert tensor: n_expert matrices of ne1 rows of ne0.
static void add_experts(struct model *m, const char *name, int64_t ne0, int64_t ne1,
                        int64_t n_expert)
{
    add(m, name, 3, ne0, ne1, INIT_MATRIX);
    m->t[m->n - 1].ne[2] = n_expert;
}

static int64_t rows_of(const struct gtensor *t)
{
    return t->ne[1] * t->ne[2];
}

// bert / nomic-bert (docs/spec/architectures.md §8): post-norm encoder with
// LayerNorm weights + biases; bert has learned positions and biased
// projections with a GELU FFN, nomic-bert a fused QKV, RoPE and SwiGLU.
static void build_encoder(const struct opts *o, struct model *m)
{
    bool nomic = strcmp(o->arch, "nomic-bert") == 0;
    char name[64];
    add(m, "token_embd.weight", 2, o->n_embd, o->n_vocab, INIT_EMBD);
    add(m, "token_types.weight", 2, o->n_embd, 2, INIT_EMBD);
    if (!nomic)
        add(m, "position_embd.weight", 2, o->n_embd, o->n_ctx, INIT_EMBD);
    add(m, "token_embd_norm.weight", 1, o->n_embd, 1, INIT_NORM);
    add(m, "token_embd_norm.bias", 1, o->n_embd, 1, INIT_BIAS);
    for (int64_t i = 0; i < o->n_layer; i++) {
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        if (nomic) {
            add(m, BLK("attn_qkv.weight"), 2, o->n_embd, 3 * o->n_embd, INIT_MATRIX);
        } else {
            add(m, BLK("attn_q.weight"), 2, o->n_embd, o->n_embd, INIT_MATRIX);
            add(m, BLK("attn_q.bias"), 1, o->n_embd, 1, INIT_BIAS);
            add(m, BLK("attn_k.weight"), 2, o->n_embd, o->n_embd, INIT_MATRIX);
            add(m, BLK("attn_k.bias"), 1, o->n_embd, 1, INIT_BIAS);
            add(m, BLK("attn_v.weight"), 2, o->n_embd, o->n_embd, INIT_MATRIX);
            add(m, BLK("attn_v.bias"), 1, o->n_embd, 1, INIT_BIAS);
        }
        add(m, BLK("attn_output.weight"), 2, o->n_embd, o->n_embd, INIT_MATRIX);
        if (!nomic)
            add(m, BLK("attn_output.bias"), 1, o->n_embd, 1, INIT_BIAS);
        add(m, BLK("attn_output_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        add(m, BLK("attn_output_norm.bias"), 1, o->n_embd, 1, INIT_BIAS);
        if (nomic)
            add(m, BLK("ffn_gate.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
        add(m, BLK("ffn_up.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
        if (!nomic)
            add(m, BLK("ffn_up.bias"), 1, o->n_ff, 1, INIT_BIAS);
        add(m, BLK("ffn_down.weight"), 2, o->n_ff, o->n_embd, INIT_MATRIX);
        if (!nomic)
            add(m, BLK("ffn_down.bias"), 1, o->n_embd, 1, INIT_BIAS);
        add(m, BLK("layer_output_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        add(m, BLK("layer_output_norm.bias"), 1, o->n_embd, 1, INIT_BIAS);
#undef BLK
    }
}

static bool is_encoder(const char *arch)
{
    return strcmp(arch, "bert") == 0 || strcmp(arch, "nomic-bert") == 0;
}

// ---------------------------------------------------------------------------
// Gated delta-net hybrids (qwen35, docs/spec/architectures.md §12.1): three
// delta-net layers, then one gated-attention layer (full_attention_interval
// 4), each followed by post_attention_norm and a dense SwiGLU.

struct gdn_dims {
    int64_t d, n_k, n_v, kernel;  // ssm.state_size, group_count, time_step_rank, conv_kernel
};

static bool is_gdn(const char *arch)
{
    return strcmp(arch, "qwen35") == 0;
}

// Qwen3.5-0.8B: 16 key and 16 value heads of 128 (its Hugging Face config,
// as recalled: linear_num_key_heads 16, linear_num_value_heads 16,
// linear_key/value_head_dim 128); otherwise head_dim wide, the attention's
// K/V heads as key heads and its query heads as value heads.
static struct gdn_dims gdn_dims(const struct opts *o)
{
    if (o->preset && !strcmp(o->preset, "qwen35-0.8b"))
        return (struct gdn_dims){128, 16, 16, 4};
    return (struct gdn_dims){o->head_dim, o->n_head_kv, o->n_head, 4};
}

static void build_gdn(const struct opts *o, bool tied, struct model *m)
{
    const struct gdn_dims g = gdn_dims(o);
    const int64_t hd = o->head_dim, q_dim = o->n_head * hd, kv_dim = o->n_head_kv * hd;
    const int64_t inner = g.n_v * g.d, conv = 2 * g.n_k * g.d + inner;
    char name[64];
    add(m, "token_embd.weight", 2, o->n_embd, o->n_vocab, INIT_EMBD);
    for (int64_t i = 0; i < o->n_layer; i++) {
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        add(m, BLK("attn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if ((i + 1) % 4 != 0) {
            add(m, BLK("attn_qkv.weight"), 2, o->n_embd, conv, INIT_MATRIX);
            add(m, BLK("attn_gate.weight"), 2, o->n_embd, inner, INIT_MATRIX);
            add(m, BLK("ssm_conv1d.weight"), 2, g.kernel, conv, INIT_BIAS);  // stays F32
            add(m, BLK("ssm_dt.bias"), 1, g.n_v, 1, INIT_BIAS);
            add(m, BLK("ssm_a"), 1, g.n_v, 1, INIT_NEG);
            add(m, BLK("ssm_beta.weight"), 2, o->n_embd, g.n_v, INIT_MATRIX);
            add(m, BLK("ssm_alpha.weight"), 2, o->n_embd, g.n_v, INIT_MATRIX);
            add(m, BLK("ssm_norm.weight"), 1, g.d, 1, INIT_NORM);
            add(m, BLK("ssm_out.weight"), 2, inner, o->n_embd, INIT_MATRIX);
        } else {
            add(m, BLK("attn_q.weight"), 2, o->n_embd, 2 * q_dim, INIT_MATRIX);
            add(m, BLK("attn_k.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
            add(m, BLK("attn_v.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
            add(m, BLK("attn_output.weight"), 2, q_dim, o->n_embd, INIT_MATRIX);
            add(m, BLK("attn_q_norm.weight"), 1, hd, 1, INIT_NORM);
            add(m, BLK("attn_k_norm.weight"), 1, hd, 1, INIT_NORM);
        }
        add(m, BLK("post_attention_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        add(m, BLK("ffn_gate.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
        add(m, BLK("ffn_up.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
        add(m, BLK("ffn_down.weight"), 2, o->n_ff, o->n_embd, INIT_MATRIX);
#undef BLK
    }
    add(m, "output_norm.weight", 1, o->n_embd, 1, INIT_NORM);
    if (!tied)
        add(m, "output.weight", 2, o->n_embd, o->n_vocab, INIT_MATRIX);
}

static int kv_arch_u32(struct gguf_writer *w, const char *arch, const char *suffix, int64_t v);

static void gdn_kv(struct gguf_writer *w, const struct opts *o)
{
    const struct gdn_dims g = gdn_dims(o);
    kv_arch_u32(w, o->arch, "ssm.conv_kernel", g.kernel);
    kv_arch_u32(w, o->arch, "ssm.state_size", g.d);
    kv_arch_u32(w, o->arch, "ssm.group_count", g.n_k);
    kv_arch_u32(w, o->arch, "ssm.time_step_rank", g.n_v);
    kv_arch_u32(w, o->arch, "ssm.inner_size", g.n_v * g.d);
    kv_arch_u32(w, o->arch, "full_attention_interval", 4);
    // Multi-section RoPE as Qwen3.5 ships it (llama.cpp requires the key;
    // for text every section rotates by the position): the rotated pairs
    // split 11:11:10 (Qwen3.5's [11, 11, 10] of 32 pairs), scaled.
    int32_t pairs = (int32_t)(o->n_rot / 2), sec[4];
    sec[0] = (pairs * 11 + 31) / 32;
    sec[1] = (pairs - sec[0]) * 11 / 21;
    sec[2] = pairs - sec[0] - sec[1];
    sec[3] = 0;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", o->arch);
    gguf_writer_kv_arr(w, key, GGUF_VAL_INT32, sec, 4);
}

// ---------------------------------------------------------------------------
static bool is_nemotron_h(const char *arch);
static void build_nemotron_h(const struct opts *o, bool tied, struct model *m);
static void build_deepseek2(const struct opts *o, bool tied, struct model *m);

static bool is_fam43(const struct opts *o);
static void build_fam43(const struct opts *o, bool tied, struct model *m);
static void build_gemma4(const struct opts *o, struct model *m);
static void kv_fam43(struct gguf_writer *w, const struct opts *o);

static void build_layout(const struct opts *o, bool tied, struct model *m)
{
    if (is_encoder(o->arch)) {
        build_encoder(o, m);
        return;
    }
    if (is_fam43(o)) {
        build_fam43(o, tied, m);
        return;
    }
    if (is_gdn(o->arch)) {
        build_gdn(o, tied, m);
        return;
    }
    if (is_nemotron_h(o->arch)) {
        build_nemotron_h(o, tied, m);
        return;
    }
    if (!strcmp(o->arch, "gemma4")) {
        build_gemma4(o, m);
        return;
    }
    if (!strcmp(o->arch, "deepseek2")) {
        build_deepseek2(o, tied, m);
        return;
    }
    int64_t hd = o->head_dim, q_dim = o->n_head * hd, kv_dim = o->n_head_kv * hd;
    bool qwen2 = strcmp(o->arch, "qwen2") == 0, phi3 = strcmp(o->arch, "phi3") == 0;
    bool gemma = strncmp(o->arch, "gemma", 5) == 0;
    bool qk_norm = strcmp(o->arch, "qwen3") == 0 || strcmp(o->arch, "gemma3") == 0 ||
                   strcmp(o->arch, "qwen3moe") == 0;
    bool gpt_oss = strcmp(o->arch, "gpt-oss") == 0;
    char name[64];
    add(m, "token_embd.weight", 2, o->n_embd, o->n_vocab, INIT_EMBD);
    if (phi3) {  // LongRoPE factor pairs
        add(m, "rope_factors_long.weight", 1, o->n_rot / 2, 1, INIT_ROPE_LONG);
        add(m, "rope_factors_short.weight", 1, o->n_rot / 2, 1, INIT_ROPE_SHORT);
    }
    for (int64_t i = 0; i < o->n_layer; i++) {
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        add(m, BLK("attn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if (phi3) {
            add(m, BLK("attn_qkv.weight"), 2, o->n_embd, q_dim + 2 * kv_dim, INIT_MATRIX);
        } else {
            add(m, BLK("attn_q.weight"), 2, o->n_embd, q_dim, INIT_MATRIX);
            add(m, BLK("attn_k.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
            add(m, BLK("attn_v.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
        }
        if (qwen2 || gpt_oss) {
            add(m, BLK("attn_q.bias"), 1, q_dim, 1, INIT_BIAS);
            add(m, BLK("attn_k.bias"), 1, kv_dim, 1, INIT_BIAS);
            add(m, BLK("attn_v.bias"), 1, kv_dim, 1, INIT_BIAS);
        }
        if (qk_norm) {
            add(m, BLK("attn_q_norm.weight"), 1, hd, 1, INIT_NORM);
            add(m, BLK("attn_k_norm.weight"), 1, hd, 1, INIT_NORM);
        }
        add(m, BLK("attn_output.weight"), 2, q_dim, o->n_embd, INIT_MATRIX);
        if (gemma)
            add(m, BLK("post_attention_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if (o->n_expert) {  // mixture of experts (qwen3moe, gpt-oss)
            int64_t E = o->n_expert, F = o->n_ff_exp;
            if (gpt_oss) {
                add(m, BLK("attn_output.bias"), 1, o->n_embd, 1, INIT_BIAS);
                add(m, BLK("attn_sinks.weight"), 1, o->n_head, 1, INIT_BIAS);
                add(m, BLK("post_attention_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
            } else {
                add(m, BLK("ffn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
            }
            add(m, BLK("ffn_gate_inp.weight"), 2, o->n_embd, E, INIT_MATRIX);
            add_experts(m, BLK("ffn_gate_exps.weight"), o->n_embd, F, E);
            add_experts(m, BLK("ffn_up_exps.weight"), o->n_embd, F, E);
            add_experts(m, BLK("ffn_down_exps.weight"), F, o->n_embd, E);
            if (gpt_oss) {
                add(m, BLK("ffn_gate_inp.bias"), 1, E, 1, INIT_BIAS);
                add(m, BLK("ffn_gate_exps.bias"), 2, F, E, INIT_BIAS);
                add(m, BLK("ffn_up_exps.bias"), 2, F, E, INIT_BIAS);
                add(m, BLK("ffn_down_exps.bias"), 2, o->n_embd, E, INIT_BIAS);
            }
            continue;
        }
        add(m, BLK("ffn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if (phi3) {
            add(m, BLK("ffn_up.weight"), 2, o->n_embd, 2 * o->n_ff, INIT_MATRIX);
        } else {
            add(m, BLK("ffn_gate.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
            add(m, BLK("ffn_up.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
        }
        add(m, BLK("ffn_down.weight"), 2, o->n_ff, o->n_embd, INIT_MATRIX);
        if (gemma)
            add(m, BLK("post_ffw_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
#undef BLK
    }
    add(m, "output_norm.weight", 1, o->n_embd, 1, INIT_NORM);
    if (!tied)
        add(m, "output.weight", 2, o->n_embd, o->n_vocab, INIT_MATRIX);
}

// ---------------------------------------------------------------------------
// Metadata

static int kv_arch_u32(struct gguf_writer *w, const char *arch, const char *suffix, int64_t v)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return gguf_writer_kv_u32(w, key, (uint32_t)v);
}

static int kv_arch_f32(struct gguf_writer *w, const char *arch, const char *suffix, float v)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return gguf_writer_kv_f32(w, key, v);
}

// ---------------------------------------------------------------------------
// deepseek2 (multi-head latent attention, src/model/deepseek2.c): the
// layout llama.cpp's converter writes (attn_k_b / attn_v_b split, absorbed
// key/value lengths), leading dense FFN layers, then MoE layers with shared
// experts. The MLA widths per preset:

struct ds2_shape {
    const char *preset;
    int64_t q_lora, kv_lora, v_head, n_shared, n_lead;
    bool sigmoid;  // sigmoid router + exp_probs_b, renormalised, x2.5 (V3); else softmax (V2)
};

static const struct ds2_shape ds2_shapes[] = {
    {"deepseek2-lite", 0, 512, 128, 2, 1, false},
    {"tiny-deepseek2", 32, 16, 16, 1, 1, true},
};

static const struct ds2_shape *ds2_shape_of(const struct opts *o)
{
    for (size_t i = 0; o->preset && i < sizeof ds2_shapes / sizeof ds2_shapes[0]; i++)
        if (!strcmp(ds2_shapes[i].preset, o->preset))
            return &ds2_shapes[i];
    return NULL;
}

static void build_deepseek2(const struct opts *o, bool tied, struct model *m)
{
    const struct ds2_shape *d = ds2_shape_of(o);
    const int64_t H = o->n_head, dk = o->head_dim, dr = o->n_rot, dn = dk - dr, R = d->kv_lora;
    const int64_t E = o->n_expert, F = o->n_ff_exp;
    char name[64];
    add(m, "token_embd.weight", 2, o->n_embd, o->n_vocab, INIT_EMBD);
    for (int64_t i = 0; i < o->n_layer; i++) {
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        add(m, BLK("attn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if (d->q_lora) {
            add(m, BLK("attn_q_a.weight"), 2, o->n_embd, d->q_lora, INIT_MATRIX);
            add(m, BLK("attn_q_a_norm.weight"), 1, d->q_lora, 1, INIT_NORM);
            add(m, BLK("attn_q_b.weight"), 2, d->q_lora, H * dk, INIT_MATRIX);
        } else {
            add(m, BLK("attn_q.weight"), 2, o->n_embd, H * dk, INIT_MATRIX);
        }
        add(m, BLK("attn_kv_a_mqa.weight"), 2, o->n_embd, R + dr, INIT_MATRIX);
        add(m, BLK("attn_kv_a_norm.weight"), 1, R, 1, INIT_NORM);
        add_experts(m, BLK("attn_k_b.weight"), dn, R, H);
        add_experts(m, BLK("attn_v_b.weight"), R, d->v_head, H);
        add(m, BLK("attn_output.weight"), 2, H * d->v_head, o->n_embd, INIT_MATRIX);
        add(m, BLK("ffn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if (i < d->n_lead) {
            add(m, BLK("ffn_gate.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
            add(m, BLK("ffn_up.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
            add(m, BLK("ffn_down.weight"), 2, o->n_ff, o->n_embd, INIT_MATRIX);
            continue;
        }
        add(m, BLK("ffn_gate_inp.weight"), 2, o->n_embd, E, INIT_MATRIX);
        if (d->sigmoid)
            add(m, BLK("exp_probs_b.bias"), 1, E, 1, INIT_BIAS);
        add_experts(m, BLK("ffn_gate_exps.weight"), o->n_embd, F, E);
        add_experts(m, BLK("ffn_up_exps.weight"), o->n_embd, F, E);
        add_experts(m, BLK("ffn_down_exps.weight"), F, o->n_embd, E);
        add(m, BLK("ffn_gate_shexp.weight"), 2, o->n_embd, F * d->n_shared, INIT_MATRIX);
        add(m, BLK("ffn_up_shexp.weight"), 2, o->n_embd, F * d->n_shared, INIT_MATRIX);
        add(m, BLK("ffn_down_shexp.weight"), 2, F * d->n_shared, o->n_embd, INIT_MATRIX);
#undef BLK
    }
    add(m, "output_norm.weight", 1, o->n_embd, 1, INIT_NORM);
    if (!tied)
        add(m, "output.weight", 2, o->n_embd, o->n_vocab, INIT_MATRIX);
}

static void deepseek2_metadata(struct gguf_writer *w, const struct opts *o)
{
    const struct ds2_shape *d = ds2_shape_of(o);
    const char *a = "deepseek2";
    char key[128];
    kv_arch_u32(w, a, "attention.key_length", d->kv_lora + o->n_rot);
    kv_arch_u32(w, a, "attention.value_length", d->kv_lora);
    kv_arch_u32(w, a, "attention.key_length_mla", o->head_dim);
    kv_arch_u32(w, a, "attention.value_length_mla", d->v_head);
    kv_arch_u32(w, a, "attention.kv_lora_rank", d->kv_lora);
    // 0 without a q LoRA: llama.cpp reads the key unless the layer count is
    // a Lite model's (27).
    kv_arch_u32(w, a, "attention.q_lora_rank", d->q_lora);
    kv_arch_u32(w, a, "rope.dimension_count", o->n_rot);
    kv_arch_u32(w, a, "leading_dense_block_count", d->n_lead);
    kv_arch_u32(w, a, "expert_count", o->n_expert);
    kv_arch_u32(w, a, "expert_used_count", o->n_expert_used);
    kv_arch_u32(w, a, "expert_feed_forward_length", o->n_ff_exp);
    kv_arch_u32(w, a, "expert_shared_count", d->n_shared);
    kv_arch_u32(w, a, "expert_gating_func", d->sigmoid ? 2 : 1);
    kv_arch_f32(w, a, "expert_weights_scale", d->sigmoid ? 2.5f : 1.0f);
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    gguf_writer_kv_bool(w, key, d->sigmoid);
    if (o->rope_scale > 0) {  // YaRN from a 4k original context, as DeepSeek-V2
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        gguf_writer_kv_str(w, key, "yarn");
        kv_arch_f32(w, a, "rope.scaling.factor", o->rope_scale);
        kv_arch_u32(w, a, "rope.scaling.original_context_length", 4096);
        kv_arch_f32(w, a, "rope.scaling.yarn_log_multiplier", 0.1f * 0.707f);
    }
}

// A small SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte
// tokens, then filler pieces.
static void synthetic_vocab(struct gguf_writer *w, int64_t n_vocab)
{
    struct str *tok = xcalloc((size_t)n_vocab, sizeof(*tok));
    float *scores = xcalloc((size_t)n_vocab, sizeof(float));
    int32_t *types = xcalloc((size_t)n_vocab, sizeof(int32_t));
    char **owned = xcalloc((size_t)n_vocab, sizeof(char *));
    for (int64_t i = 0; i < n_vocab; i++) {
        if (i == 0)
            owned[i] = xstrdup("<unk>"), types[i] = 2;
        else if (i == 1)
            owned[i] = xstrdup("<s>"), types[i] = 3;
        else if (i == 2)
            owned[i] = xstrdup("</s>"), types[i] = 3;
        else if (i < 259)
            owned[i] = xasprintf("<0x%02X>", (unsigned)(i - 3)), types[i] = 6;
        else
            owned[i] = xasprintf("\xe2\x96\x81t%lld", (long long)(i - 259)), types[i] = 1;
        tok[i] = str_from(owned[i]);
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
    }
    gguf_writer_kv_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_kv_arr_str(w, "tokenizer.ggml.tokens", tok, (uint64_t)n_vocab);
    gguf_writer_kv_arr(w, "tokenizer.ggml.scores", GGUF_VAL_FLOAT32, scores, (uint64_t)n_vocab);
    gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_VAL_INT32, types, (uint64_t)n_vocab);
    gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", true);
    for (int64_t i = 0; i < n_vocab; i++)
        free(owned[i]);
    free(owned);
    free(tok);
    free(scores);
    free(types);
}

// ---------------------------------------------------------------------------
// Tensor data

// Random blocks: the block types without a quantizer here (the i-quants
// need an importance matrix; no quality is needed for benchmarks), and with
// --random-blocks every block type (a 30B model quantized from random floats
// takes the better part of an hour; random blocks take the time to write
// them). Random bytes per block, then the f16 scale d set to one value per
// tensor that gives the dequantized tensor the standard deviation the float
// weights would have; types with a minimum get min = min_factor * d, which
// centres their values on zero.
struct block_scales {
    size_t d_off, m_off;
    float min_factor;  // 0: no minimum field
    bool e8m0;         // d is one exponent byte (MXFP4), not an f16
};

#define BLOCK_D(t, d_field)                                                                        \
    (struct block_scales)                                                                          \
    {                                                                                              \
        offsetof(struct t, d_field), 0, 0.0f                                                       \
    }
#define BLOCK_DM(t, d_field, m_field, f)                                                           \
    (struct block_scales)                                                                          \
    {                                                                                              \
        offsetof(struct t, d_field), offsetof(struct t, m_field), f                                \
    }

static bool random_block_layout(uint32_t type, bool all_types, struct block_scales *l)
{
    switch (type) {
    case GGUF_TYPE_IQ2_XXS:
    case GGUF_TYPE_IQ2_XS:
    case GGUF_TYPE_IQ2_S:
    case GGUF_TYPE_IQ3_XXS:
    case GGUF_TYPE_IQ3_S:
    case GGUF_TYPE_IQ1_S:
    case GGUF_TYPE_IQ4_NL:
    case GGUF_TYPE_IQ4_XS:
        *l = (struct block_scales){0, 0, 0.0f};
        return true;
    case GGUF_TYPE_TQ1_0:
    case GGUF_TYPE_TQ2_0:
        *l = (struct block_scales){quant_traits_get(type)->type_size - 2, 0, 0.0f};
        return true;
    case GGUF_TYPE_MXFP4:
        *l = (struct block_scales){offsetof(struct block_mxfp4, e), 0, 0.0f, true};
        return true;
    default:
        break;
    }
    if (!all_types)
        return false;
    switch (type) {
    case GGUF_TYPE_Q4_0:
        *l = BLOCK_D(block_q4_0, d);
        return true;
    case GGUF_TYPE_Q5_0:
        *l = BLOCK_D(block_q5_0, d);
        return true;
    case GGUF_TYPE_Q8_0:
        *l = BLOCK_D(block_q8_0, d);
        return true;
    case GGUF_TYPE_Q3_K:
        *l = BLOCK_D(block_q3_K, d);
        return true;
    case GGUF_TYPE_Q6_K:
        *l = BLOCK_D(block_q6_K, d);
        return true;
    // value = d * q + m with q in 0..15 (0..31): m = -7.5 d (-15.5 d).
    case GGUF_TYPE_Q4_1:
        *l = BLOCK_DM(block_q4_1, d, m, -7.5f);
        return true;
    case GGUF_TYPE_Q5_1:
        *l = BLOCK_DM(block_q5_1, d, m, -15.5f);
        return true;
    // value = d * sc * q - dmin * m with sc, m random in 0..63 (0..15 for
    // Q2_K): dmin = mean(q) * d.
    case GGUF_TYPE_Q2_K:
        *l = BLOCK_DM(block_q2_K, d, dmin, 1.5f);
        return true;
    case GGUF_TYPE_Q4_K:
        *l = BLOCK_DM(block_q4_K, d, dmin, 7.5f);
        return true;
    case GGUF_TYPE_Q5_K:
        *l = BLOCK_DM(block_q5_K, d, dmin, 15.5f);
        return true;
    default:
        return false;
    }
}

static void random_blocks(struct rng *r, uint8_t *q, size_t n_bytes, uint32_t type, float d)
{
    for (size_t i = 0; i < n_bytes; i += 8) {
        uint64_t v = rng_next(r);
        memcpy(q + i, &v, n_bytes - i < 8 ? n_bytes - i : 8);
    }
    struct block_scales l;
    random_block_layout(type, true, &l);
    uint16_t dh = quant_f32_to_f16(d), mh = quant_f32_to_f16(l.min_factor * d);
    // E8M0: 2^(e - 127), the power of two nearest d.
    long ex = lroundf(log2f(d > 0.0f ? d : 1.0f)) + 127;
    uint8_t eb = (uint8_t)(ex < 1 ? 1 : ex > 254 ? 254 : ex);
    size_t bs = quant_traits_get(type)->type_size;
    for (size_t b = 0; b + bs <= n_bytes; b += bs) {
        if (l.e8m0) {
            q[b + l.d_off] = eb;
            continue;
        }
        memcpy(q + b + l.d_off, &dh, 2);
        if (l.min_factor != 0.0f)
            memcpy(q + b + l.m_off, &mh, 2);
    }
}

static int write_random_tensor(struct gguf_writer *w, const struct gtensor *t, struct rng *r,
                               float std, float *xbuf, void *qbuf, size_t chunk_elems,
                               struct err *e)
{
    const struct quant_traits *tr = quant_traits_get(t->type);
    int64_t rows = rows_of(t), row_len = t->ne[0];
    size_t row_bytes = quant_row_size(t->type, row_len);
    // The scale: the standard deviation of a row decoded with d = 1, from a
    // stream of its own (the data stream stays a function of the name).
    struct rng probe = *r;
    random_blocks(&probe, qbuf, row_bytes, t->type, 1.0f);
    tr->to_float(qbuf, xbuf, row_len);
    double ss = 0.0;
    for (int64_t i = 0; i < row_len; i++)
        ss += (double)xbuf[i] * xbuf[i];
    double sd = sqrt(ss / (double)row_len);
    float d = sd > 0.0 ? (float)(std / sd) : std;
    int64_t rows_per_chunk = (int64_t)chunk_elems / row_len;
    if (rows_per_chunk < 1)
        rows_per_chunk = 1;
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
        int64_t nr = rows - r0 < rows_per_chunk ? rows - r0 : rows_per_chunk;
        random_blocks(r, qbuf, row_bytes * (size_t)nr, t->type, d);
        int rc = gguf_writer_write_data(w, qbuf, row_bytes * (size_t)nr, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// --confident S: token t's embedding is N(0, S) from its own stream (so any
// row can be made on its own), and the untied output's row u is the
// embedding of token perm(u), perm(u) = (a u + 1) mod n_vocab with a
// coprime to n_vocab. When S makes the embedding dominate the residual
// stream, logit u is largest for perm(u) = the current token: the model
// walks the permutation's cycle with a margin that quantizing every matrix
// to 4 bits does not flip, as a trained model's confident tokens. The
// layers still add their random, context-dependent part, so a smaller S
// gives a less certain model.
static void confident_embd_row(uint64_t seed, int64_t row, int64_t n_embd, float std, float *out)
{
    struct rng r;
    char name[64];
    snprintf(name, sizeof(name), "token_embd.weight#%lld", (long long)row);
    rng_seed(&r, seed, name);
    rng_normal(&r, out, (size_t)n_embd, 0.0f, std);
}

static int64_t gcd_i64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int64_t confident_perm(int64_t u, int64_t n)
{
    int64_t a = 7919;  // the first odd a >= 7919 coprime to n: a bijection
    while (gcd_i64(a, n) != 1)
        a += 2;
    return (int64_t)(((uint64_t)a * (uint64_t)u + 1) % (uint64_t)n);  // a, u < 2^31
}

static int write_tensor(struct gguf_writer *w, const struct gtensor *t, const struct opts *o,
                        float *xbuf, void *qbuf, size_t chunk_elems, struct err *e)
{
    const struct quant_traits *tr = quant_traits_get(t->type);
    const uint64_t seed = o->seed;
    const int64_t n_embd = o->n_embd;
    const bool random_all = o->random_blocks;
    const bool confident_embd = o->confident > 0 && t->init == INIT_EMBD;
    const bool confident_out = o->confident > 0 && !strcmp(t->name, "output.weight");
    struct rng r;
    rng_seed(&r, seed, t->name);
    float std, mean = 0.0f;
    switch (t->init) {
    case INIT_EMBD:
        std = 0.1f;
        break;
    case INIT_NORM:
        std = 0.1f;
        mean = 1.0f;
        break;
    case INIT_BIAS:
        std = 0.1f;
        break;
    case INIT_NEG:
        std = 0.1f;
        mean = -1.0f;
        break;
    default:
        std = 1.0f / sqrtf((float)n_embd);
        break;
    }
    struct block_scales layout;
    if (!tr->from_float_ref || (random_all && random_block_layout(t->type, true, &layout)))
        return write_random_tensor(w, t, &r, std, xbuf, qbuf, chunk_elems, e);
    int64_t rows = rows_of(t), row_len = t->ne[0];
    if (t->init == INIT_ROPE_LONG || t->init == INIT_ROPE_SHORT) {
        // LongRoPE factors: fixed ramps (long 1 + 12 i/n, short 1 + 3 i/n),
        // as the shared fixtures.
        float k = t->init == INIT_ROPE_LONG ? 12.0f : 3.0f;
        for (int64_t i = 0; i < row_len; i++)
            xbuf[i] = 1.0f + k * (float)i / (float)row_len;
        tr->from_float_ref(xbuf, qbuf, row_len);
        return gguf_writer_write_data(w, qbuf, quant_row_size(t->type, row_len), e);
    }
    int64_t rows_per_chunk = (int64_t)chunk_elems / row_len;
    if (rows_per_chunk < 1)
        rows_per_chunk = 1;
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
        int64_t nr = rows - r0 < rows_per_chunk ? rows - r0 : rows_per_chunk;
        int64_t n = nr * row_len;
        if (confident_embd || confident_out) {
            for (int64_t i = 0; i < nr; i++)
                confident_embd_row(seed, confident_out ? confident_perm(r0 + i, rows) : r0 + i,
                                   row_len, o->confident, xbuf + i * row_len);
        } else {
            rng_normal(&r, xbuf, (size_t)n, mean, std);
        }
        tr->from_float_ref(xbuf, qbuf, n);
        int rc = gguf_writer_write_data(w, qbuf, quant_row_size(t->type, row_len) * (size_t)nr, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

// ---------------------------------------------------------------------------

// The type of each tensor in a random-block model (see main).
static bool nemotron_h_f32(const struct gtensor *t);

static int random_block_tensor_type(uint32_t block_type, const struct gtensor *t)
{
    if (t->n_dims < 2 || t->init == INIT_BIAS || nemotron_h_f32(t))
        return GGUF_TYPE_F32;
    // gpt-oss as published (ggml-org's MXFP4 file): experts MXFP4, the
    // other matrices Q8_0, the router F32.
    if (block_type == GGUF_TYPE_MXFP4) {
        if (strstr(t->name, "gate_inp"))
            return GGUF_TYPE_F32;
        return strstr(t->name, "_exps") ? GGUF_TYPE_MXFP4 : GGUF_TYPE_Q8_0;
    }
    uint32_t ty = block_type;
    if (!strcmp(t->name, "token_embd.weight"))
        ty = GGUF_TYPE_Q4_K;
    else if (!strcmp(t->name, "output.weight"))
        ty = GGUF_TYPE_Q6_K;
    else if (strncmp(t->name, "blk.", 4) != 0)
        return GGUF_TYPE_F32;
    return quant_row_size(ty, t->ne[0]) ? (int)ty : GGUF_TYPE_Q8_0;
}

static bool arg_i64(const char *s, int64_t *out)
{
    struct err e = {0};
    return str_to_i64(s, 1, INT64_MAX / 2, out, &e) == 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    o->tied = -1;
    o->type = "f32";
    o->seed = 1;
    o->rope_base = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *num = NULL;
        if (!strcmp(a, "--n-embd"))
            num = &o->n_embd;
        else if (!strcmp(a, "--n-layer"))
            num = &o->n_layer;
        else if (!strcmp(a, "--n-head"))
            num = &o->n_head;
        else if (!strcmp(a, "--n-head-kv"))
            num = &o->n_head_kv;
        else if (!strcmp(a, "--n-ff"))
            num = &o->n_ff;
        else if (!strcmp(a, "--n-vocab"))
            num = &o->n_vocab;
        else if (!strcmp(a, "--n-ctx"))
            num = &o->n_ctx;
        else if (!strcmp(a, "--head-dim"))
            num = &o->head_dim;
        else if (!strcmp(a, "--n-rot"))
            num = &o->n_rot;
        else if (!strcmp(a, "--n-swa"))
            num = &o->n_swa;
        else if (!strcmp(a, "--n-expert"))
            num = &o->n_expert;
        else if (!strcmp(a, "--n-expert-used"))
            num = &o->n_expert_used;
        else if (!strcmp(a, "--n-ff-exp"))
            num = &o->n_ff_exp;
        if (num) {
            if (!v || !arg_i64(v, num)) {
                fprintf(stderr, "gguf-gen: %s needs a positive integer\n", a);
                return -1;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--confident")) {
            char *end = NULL;
            o->confident = v ? strtof(v, &end) : 0.0f;
            if (!v || *end || !(o->confident > 0.0f && o->confident <= 100.0f)) {
                fprintf(stderr, "gguf-gen: --confident needs a standard deviation in (0, 100]\n");
                return -1;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--random-blocks")) {
            o->random_blocks = true;
            continue;
        }
        if (!strcmp(a, "--sparse")) {
            o->sparse = true;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            o->quiet = true;
            continue;
        }
        if (!strcmp(a, "--tied")) {
            o->tied = 1;
            continue;
        }
        if (!strcmp(a, "--untied")) {
            o->tied = 0;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "gguf-gen: unknown or incomplete option %s\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--preset"))
            o->preset = v;
        else if (!strcmp(a, "--arch"))
            snprintf(o->arch, sizeof(o->arch), "%s", v);
        else if (!strcmp(a, "--type"))
            o->type = v, o->type_given = true;
        else if (!strcmp(a, "--vocab"))
            o->vocab = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            o->out = v;
        else if (!strcmp(a, "--seed")) {
            struct err e = {0};
            if (str_to_u64(v, UINT64_MAX, &o->seed, &e) < 0) {
                fprintf(stderr, "gguf-gen: bad seed %s\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "gguf-gen: unknown option %s\n", a);
            return -1;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Nemotron-H (Mamba-2 hybrid, docs/spec/architectures.md §12.3, §12.5): one
// sub-block per layer after attn_norm, chosen by a layer pattern (M: a
// Mamba-2 mixer, *: attention without RoPE, -: a squared-ReLU MLP), written
// as the per-layer head_count_kv / feed_forward_length arrays llama.cpp
// reads. "nemotron-h" takes NVIDIA-Nemotron-Nano-9B-v2's widths (n_embd
// 4480, 40 heads of 128 with 8 K/V heads, MLP 15680; Mamba-2: 128 heads of
// 80 = d_inner 10240, 8 groups, state 128, kernel 4) with 6 layers in the
// model's own mix (its 56 layers are mostly M and -, a few *).

struct nemotron_h_shape {
    const char *preset;  // NULL: the default for --arch nemotron_h
    int64_t d_inner, d_state, n_group, n_head, d_conv;
    const char *pattern;  // per layer, repeated when shorter than n_layer
};

static const struct nemotron_h_shape nemotron_h_shapes[] = {
    {"nemotron-h", 10240, 128, 8, 128, 4, "M-M*M-"},
    {"tiny-nemotron-h", 64, 16, 2, 4, 4, "M-*M-"},
    {NULL, 0, 128, 8, 0, 4, "M-M*M-"},  // d_inner 2 n_embd, heads of 64
};

static bool is_nemotron_h(const char *arch)
{
    return strcmp(arch, "nemotron_h") == 0;
}

static struct nemotron_h_shape nemotron_h_shape_of(const struct opts *o)
{
    size_t n = sizeof nemotron_h_shapes / sizeof nemotron_h_shapes[0];
    struct nemotron_h_shape sh = nemotron_h_shapes[n - 1];
    for (size_t i = 0; i + 1 < n; i++)
        if (o->preset && !strcmp(o->preset, nemotron_h_shapes[i].preset))
            sh = nemotron_h_shapes[i];
    if (!sh.d_inner) {
        sh.d_inner = 2 * o->n_embd;
        sh.n_head = sh.d_inner / 64;
        if (sh.n_head % sh.n_group != 0)
            sh.n_group = 1;
    }
    return sh;
}

static char nemotron_h_kind(const struct nemotron_h_shape *sh, int64_t il)
{
    return sh->pattern[il % (int64_t)strlen(sh->pattern)];
}

static void build_nemotron_h(const struct opts *o, bool tied, struct model *m)
{
    const struct nemotron_h_shape sh = nemotron_h_shape_of(o);
    const int64_t hd = o->head_dim, q_dim = o->n_head * hd, kv_dim = o->n_head_kv * hd;
    const int64_t ch = sh.d_inner + 2 * sh.n_group * sh.d_state;
    char name[64];
    add(m, "token_embd.weight", 2, o->n_embd, o->n_vocab, INIT_EMBD);
    for (int64_t i = 0; i < o->n_layer; i++) {
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        add(m, BLK("attn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        switch (nemotron_h_kind(&sh, i)) {
        case 'M':
            add(m, BLK("ssm_in.weight"), 2, o->n_embd, sh.d_inner + ch + sh.n_head, INIT_MATRIX);
            add(m, BLK("ssm_conv1d.weight"), 2, sh.d_conv, ch, INIT_MATRIX);
            add(m, BLK("ssm_conv1d.bias"), 1, ch, 1, INIT_BIAS);
            add(m, BLK("ssm_dt.bias"), 1, sh.n_head, 1, INIT_BIAS);
            add(m, BLK("ssm_a"), 2, 1, sh.n_head, INIT_NEG);
            add(m, BLK("ssm_d"), 2, 1, sh.n_head, INIT_NORM);
            add(m, BLK("ssm_norm.weight"), 2, sh.d_inner / sh.n_group, sh.n_group, INIT_NORM);
            add(m, BLK("ssm_out.weight"), 2, sh.d_inner, o->n_embd, INIT_MATRIX);
            break;
        case '*':
            add(m, BLK("attn_q.weight"), 2, o->n_embd, q_dim, INIT_MATRIX);
            add(m, BLK("attn_k.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
            add(m, BLK("attn_v.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
            add(m, BLK("attn_output.weight"), 2, q_dim, o->n_embd, INIT_MATRIX);
            break;
        default:
            add(m, BLK("ffn_up.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
            add(m, BLK("ffn_down.weight"), 2, o->n_ff, o->n_embd, INIT_MATRIX);
            break;
        }
#undef BLK
    }
    add(m, "output_norm.weight", 1, o->n_embd, 1, INIT_NORM);
    if (!tied)
        add(m, "output.weight", 2, o->n_embd, o->n_vocab, INIT_MATRIX);
}

// The Mamba-2 keys and the per-layer arrays (0 where a layer has no
// attention / no MLP).
static void nemotron_h_kv(struct gguf_writer *w, const struct opts *o)
{
    const struct nemotron_h_shape sh = nemotron_h_shape_of(o);
    const char *arch = o->arch;
    uint32_t *ff = xcalloc((size_t)o->n_layer, sizeof(uint32_t));
    uint32_t *kv = xcalloc((size_t)o->n_layer, sizeof(uint32_t));
    for (int64_t i = 0; i < o->n_layer; i++) {
        char k = nemotron_h_kind(&sh, i);
        ff[i] = k == '-' ? (uint32_t)o->n_ff : 0;
        kv[i] = k == '*' ? (uint32_t)o->n_head_kv : 0;
    }
    char key[128];
    snprintf(key, sizeof(key), "%s.feed_forward_length", arch);
    gguf_writer_kv_arr(w, key, GGUF_VAL_UINT32, ff, (uint64_t)o->n_layer);
    snprintf(key, sizeof(key), "%s.attention.head_count_kv", arch);
    gguf_writer_kv_arr(w, key, GGUF_VAL_UINT32, kv, (uint64_t)o->n_layer);
    kv_arch_f32(w, arch, "attention.layer_norm_epsilon", o->eps);
    kv_arch_u32(w, arch, "ssm.conv_kernel", sh.d_conv);
    kv_arch_u32(w, arch, "ssm.inner_size", sh.d_inner);
    kv_arch_u32(w, arch, "ssm.state_size", sh.d_state);
    kv_arch_u32(w, arch, "ssm.group_count", sh.n_group);
    kv_arch_u32(w, arch, "ssm.time_step_rank", sh.n_head);
    free(ff);
    free(kv);
}

// Mamba-2's small weights stay F32 with --random-blocks (as llama.cpp's
// quantizer keeps them).
static bool nemotron_h_f32(const struct gtensor *t)
{
    return strstr(t->name, ".ssm_") && !strstr(t->name, ".ssm_in.") &&
           !strstr(t->name, ".ssm_out.");
}

// ---------------------------------------------------------------------------
// Issue 43's families that vary blocks the engine already runs
// (docs/spec/architectures.md §12.8-§12.12): smollm3, llama with experts
// (Mixtral), olmo2, mistral3, cohere2, glm4moe and granite, as llama.cpp's
// converter writes them. The common keys come from main; kv_fam43 adds each
// family's own.

static bool is_fam43(const struct opts *o)
{
    static const char *const archs[] = {"smollm3", "olmo2",   "mistral3",
                                        "cohere2", "glm4moe", "granite"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(o->arch, archs[i]))
            return true;
    return !strcmp(o->arch, "llama") && o->n_expert > 0;
}

// The leading dense layers of a glm4moe model.
#define FAM43_GLM_DENSE 1

static void build_fam43(const struct opts *o, bool tied, struct model *m)
{
    const int64_t hd = o->head_dim, q_dim = o->n_head * hd, kv_dim = o->n_head_kv * hd;
    const int64_t E = o->n_expert, F = o->n_ff_exp;
    const bool olmo2 = !strcmp(o->arch, "olmo2"), cohere2 = !strcmp(o->arch, "cohere2");
    const bool glm = !strcmp(o->arch, "glm4moe");
    char name[64];
    add(m, "token_embd.weight", 2, o->n_embd, o->n_vocab, INIT_EMBD);
    for (int64_t i = 0; i < o->n_layer; i++) {
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        if (!olmo2)  // olmo2: no pre-norms
            add(m, BLK("attn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        add(m, BLK("attn_q.weight"), 2, o->n_embd, q_dim, INIT_MATRIX);
        add(m, BLK("attn_k.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
        add(m, BLK("attn_v.weight"), 2, o->n_embd, kv_dim, INIT_MATRIX);
        if (glm) {
            add(m, BLK("attn_q.bias"), 1, q_dim, 1, INIT_BIAS);
            add(m, BLK("attn_k.bias"), 1, kv_dim, 1, INIT_BIAS);
            add(m, BLK("attn_v.bias"), 1, kv_dim, 1, INIT_BIAS);
        }
        if (olmo2) {  // over the whole projection
            add(m, BLK("attn_q_norm.weight"), 1, q_dim, 1, INIT_NORM);
            add(m, BLK("attn_k_norm.weight"), 1, kv_dim, 1, INIT_NORM);
        }
        add(m, BLK("attn_output.weight"), 2, q_dim, o->n_embd, INIT_MATRIX);
        if (olmo2 || glm)  // olmo2's post-norm; glm4moe's FFN norm
            add(m, BLK("post_attention_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        else if (!cohere2)  // cohere2: the FFN reads attn_norm's output
            add(m, BLK("ffn_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
        if (E > 0 && (!glm || i >= FAM43_GLM_DENSE)) {
            add(m, BLK("ffn_gate_inp.weight"), 2, o->n_embd, E, INIT_MATRIX);
            if (glm)
                add(m, BLK("exp_probs_b.bias"), 1, E, 1, INIT_BIAS);
            add_experts(m, BLK("ffn_gate_exps.weight"), o->n_embd, F, E);
            add_experts(m, BLK("ffn_up_exps.weight"), o->n_embd, F, E);
            add_experts(m, BLK("ffn_down_exps.weight"), F, o->n_embd, E);
            if (glm) {  // one shared expert
                add(m, BLK("ffn_gate_shexp.weight"), 2, o->n_embd, F, INIT_MATRIX);
                add(m, BLK("ffn_up_shexp.weight"), 2, o->n_embd, F, INIT_MATRIX);
                add(m, BLK("ffn_down_shexp.weight"), 2, F, o->n_embd, INIT_MATRIX);
            }
        } else {
            add(m, BLK("ffn_gate.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
            add(m, BLK("ffn_up.weight"), 2, o->n_embd, o->n_ff, INIT_MATRIX);
            add(m, BLK("ffn_down.weight"), 2, o->n_ff, o->n_embd, INIT_MATRIX);
        }
        if (olmo2)
            add(m, BLK("post_ffw_norm.weight"), 1, o->n_embd, 1, INIT_NORM);
#undef BLK
    }
    add(m, "output_norm.weight", 1, o->n_embd, 1, INIT_NORM);
    if (!tied)
        add(m, "output.weight", 2, o->n_embd, o->n_vocab, INIT_MATRIX);
}

static void kv_fam43(struct gguf_writer *w, const struct opts *o)
{
    const char *arch = o->arch;
    char key[128];
    if (!is_fam43(o))
        return;
    if (!strcmp(arch, "llama")) {  // Mixtral: experts as wide as feed_forward_length
        kv_arch_u32(w, arch, "expert_count", o->n_expert);
        kv_arch_u32(w, arch, "expert_used_count", o->n_expert_used);
    } else if (!strcmp(arch, "mistral3")) {  // YaRN x16 from 16k, temperature 0.1
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        gguf_writer_kv_str(w, key, "yarn");
        kv_arch_f32(w, arch, "rope.scaling.factor", 16.0f);
        kv_arch_u32(w, arch, "rope.scaling.original_context_length", 16384);
        kv_arch_f32(w, arch, "rope.scaling.yarn_beta_fast", 32.0f);
        kv_arch_f32(w, arch, "rope.scaling.yarn_beta_slow", 1.0f);
        kv_arch_f32(w, arch, "rope.scaling.yarn_log_multiplier", 1.0f);
        kv_arch_f32(w, arch, "attention.temperature_scale", 0.1f);
    } else if (!strcmp(arch, "cohere2")) {
        kv_arch_f32(w, arch, "attention.layer_norm_epsilon", o->eps);
        kv_arch_u32(w, arch, "attention.sliding_window_pattern", 4);
        kv_arch_f32(w, arch, "logit_scale", 0.25f);
    } else if (!strcmp(arch, "glm4moe")) {
        kv_arch_u32(w, arch, "leading_dense_block_count", FAM43_GLM_DENSE);
        kv_arch_u32(w, arch, "expert_shared_count", 1);
        kv_arch_f32(w, arch, "expert_weights_scale", 1.0f);
        snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
        gguf_writer_kv_bool(w, key, true);
        kv_arch_u32(w, arch, "expert_gating_func", 2);  // sigmoid
        kv_arch_u32(w, arch, "nextn_predict_layers", 0);
    } else if (!strcmp(arch, "granite")) {  // Granite 3.x 8B's scalars
        kv_arch_f32(w, arch, "embedding_scale", 12.0f);
        kv_arch_f32(w, arch, "residual_scale", 0.22f);
        kv_arch_f32(w, arch, "attention.scale", 0.0078125f);
        kv_arch_f32(w, arch, "logit_scale", 16.0f);
    }
}

// ---------------------------------------------------------------------------
// gemma4, as llama.cpp v0.5.0's converter writes Gemma 4 E2B (spec
// §12.7): every fifth layer global (head o->head_dim, proportional RoPE
// through rope_freqs), the others sliding (head GEMMA4_SWA_HEAD); the last
// GEMMA4_SHARED layers reuse the K/V of the last layer of their kind before
// them (no attn_k / attn_v of their own) and have a double-wide MLP;
// per-layer inputs of GEMMA4_PER_LAYER; no MoE.

#define GEMMA4_SWA_HEAD  256
#define GEMMA4_SHARED    20
#define GEMMA4_PER_LAYER 256

static bool gemma4_global(int64_t il)
{
    return il % 5 == 4;
}

static int64_t gemma4_n_ff(const struct opts *o, int64_t il)
{
    return il >= o->n_layer - GEMMA4_SHARED ? 2 * o->n_ff : o->n_ff;
}

static void build_gemma4(const struct opts *o, struct model *m)
{
    const int64_t d = o->n_embd, pl = GEMMA4_PER_LAYER * o->n_layer;
    char name[64];
    add(m, "token_embd.weight", 2, d, o->n_vocab, INIT_EMBD);
    add(m, "per_layer_token_embd.weight", 2, pl, o->n_vocab, INIT_EMBD);
    add(m, "per_layer_model_proj.weight", 2, d, pl, INIT_MATRIX);
    add(m, "per_layer_proj_norm.weight", 1, GEMMA4_PER_LAYER, 1, INIT_NORM);
    add(m, "rope_freqs.weight", 1, o->head_dim / 2, 1, INIT_NORM);
    for (int64_t i = 0; i < o->n_layer; i++) {
        const int64_t hd = gemma4_global(i) ? o->head_dim : GEMMA4_SWA_HEAD, ff = gemma4_n_ff(o, i);
        const bool own_kv = i < o->n_layer - GEMMA4_SHARED;
#define BLK(suffix) (snprintf(name, sizeof(name), "blk.%lld." suffix, (long long)i), name)
        add(m, BLK("attn_norm.weight"), 1, d, 1, INIT_NORM);
        add(m, BLK("attn_q.weight"), 2, d, o->n_head * hd, INIT_MATRIX);
        if (own_kv) {
            add(m, BLK("attn_k.weight"), 2, d, o->n_head_kv * hd, INIT_MATRIX);
            add(m, BLK("attn_v.weight"), 2, d, o->n_head_kv * hd, INIT_MATRIX);
            add(m, BLK("attn_k_norm.weight"), 1, hd, 1, INIT_NORM);
        }
        add(m, BLK("attn_q_norm.weight"), 1, hd, 1, INIT_NORM);
        add(m, BLK("attn_output.weight"), 2, o->n_head * hd, d, INIT_MATRIX);
        add(m, BLK("post_attention_norm.weight"), 1, d, 1, INIT_NORM);
        add(m, BLK("ffn_norm.weight"), 1, d, 1, INIT_NORM);
        add(m, BLK("ffn_gate.weight"), 2, d, ff, INIT_MATRIX);
        add(m, BLK("ffn_up.weight"), 2, d, ff, INIT_MATRIX);
        add(m, BLK("ffn_down.weight"), 2, ff, d, INIT_MATRIX);
        add(m, BLK("post_ffw_norm.weight"), 1, d, 1, INIT_NORM);
        add(m, BLK("inp_gate.weight"), 2, d, GEMMA4_PER_LAYER, INIT_MATRIX);
        add(m, BLK("proj.weight"), 2, GEMMA4_PER_LAYER, d, INIT_MATRIX);
        add(m, BLK("post_norm.weight"), 1, d, 1, INIT_NORM);
        add(m, BLK("layer_output_scale.weight"), 1, 1, 1, INIT_NORM);
#undef BLK
    }
    add(m, "output_norm.weight", 1, d, 1, INIT_NORM);
}

// Its keys beyond main's (feed_forward_length per layer, the sliding
// layers' head and RoPE, the pattern, K/V sharing, per-layer inputs).
static void kv_gemma4(struct gguf_writer *w, const struct opts *o)
{
    const char *arch = o->arch;
    char key[128];
    int32_t *ff = xcalloc((size_t)o->n_layer, sizeof *ff);
    bool *swa = xcalloc((size_t)o->n_layer, sizeof *swa);
    for (int64_t i = 0; i < o->n_layer; i++) {
        ff[i] = (int32_t)gemma4_n_ff(o, i);
        swa[i] = !gemma4_global(i);
    }
    snprintf(key, sizeof key, "%s.feed_forward_length", arch);
    gguf_writer_kv_arr(w, key, GGUF_VAL_INT32, ff, (uint64_t)o->n_layer);
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    gguf_writer_kv_arr(w, key, GGUF_VAL_BOOL, swa, (uint64_t)o->n_layer);
    kv_arch_u32(w, arch, "attention.head_count_kv", o->n_head_kv);
    kv_arch_u32(w, arch, "attention.key_length_swa", GEMMA4_SWA_HEAD);
    kv_arch_u32(w, arch, "attention.value_length_swa", GEMMA4_SWA_HEAD);
    kv_arch_u32(w, arch, "rope.dimension_count_swa", GEMMA4_SWA_HEAD);
    kv_arch_f32(w, arch, "rope.freq_base_swa", 10000.0f);
    kv_arch_u32(w, arch, "attention.shared_kv_layers", GEMMA4_SHARED);
    kv_arch_u32(w, arch, "embedding_length_per_layer_input", GEMMA4_PER_LAYER);
    kv_arch_f32(w, arch, "final_logit_softcapping", 30.0f);
    free(ff);
    free(swa);
}

// ---------------------------------------------------------------------------
// Vision projector (issue 44): --preset gemma3-siglip-mmproj writes an mmproj
// file (general.architecture "clip") with Gemma 3's real SigLIP tower shape
// (896 px, 14 px patches, width 1152, FFN 4304, 27 blocks, 16 heads, pooled
// 4 x 4 to 256 tokens) and random weights, for timing the tower against
// llama.cpp's llama-mtmd-cli. --n-embd sets the projection width (the text
// model's, default 2560), --n-layer the blocks (default 27); --type the
// block matrices' type (default f16;
// patch and position embeddings stay F16 / F32, norms and biases F32).

struct mmproj_tensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
    float mean, std;
};

// One tensor of a random projector: name, type, shape, the normal
// distribution of its values.
static void mmproj_add(struct mmproj_tensor *ts, int *n, const char *name, int type, int nd,
                       int64_t a, int64_t b, int64_t c, int64_t d, float mean, float std)
{
    struct mmproj_tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = (uint32_t)type, t->n_dims = (uint32_t)nd, t->mean = mean, t->std = std;
    t->ne[0] = a, t->ne[1] = b, t->ne[2] = c, t->ne[3] = d;
}

// The block matrices' type of a real-size projector: --type, else F16 as
// shipped; -1 (said) for a type that cannot be written.
static int mmproj_mat_type(const struct opts *o)
{
    int t = o->type_given ? gguf_type_from_name(o->type) : GGUF_TYPE_F16;
    if (t < 0 || !quant_traits_get((uint32_t)t) || !quant_traits_get((uint32_t)t)->from_float_ref) {
        fprintf(stderr, "gguf-gen: mmproj: cannot write type %s\n", o->type);
        return -1;
    }
    return t;
}

static int mmproj_write_one(struct gguf_writer *w, const struct mmproj_tensor *t, uint64_t seed,
                            struct err *e)
{
    const struct quant_traits *tr = quant_traits_get(t->type);
    int64_t row = t->ne[0], rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        rows *= t->ne[d];
    float *x = xmalloc((size_t)row * sizeof(float));
    void *q = xmalloc(quant_row_size(t->type, row) + 64);
    struct rng r;
    rng_seed(&r, seed, t->name);
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < rows; i++) {
        rng_normal(&r, x, (size_t)row, t->mean, t->std);
        tr->from_float_ref(x, q, row);
        rc = gguf_writer_write_data(w, q, quant_row_size(t->type, row), e);
    }
    free(x);
    free(q);
    return rc;
}

// Writes the tensors (their header entries, then random data) and closes
// w; frees ts. 0 or 1 (reported).
static int mmproj_finish(const struct opts *o, struct gguf_writer *w, struct mmproj_tensor *ts,
                         int n)
{
    struct err e = {0};
    for (int i = 0; i < n; i++)
        gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne);
    int rc = gguf_writer_write_header(w, &e);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = mmproj_write_one(w, &ts[i], o->seed, &e);
    free(ts);
    if (rc < 0 || gguf_writer_close(w, &e) < 0) {
        if (rc < 0)
            gguf_writer_abort(w);
        fprintf(stderr, "gguf-gen: %s\n", e.msg);
        return 1;
    }
    return 0;
}

static int write_gemma3_mmproj(const struct opts *o)
{
    const int64_t d = 1152, ff = 4304, n_layer = o->n_layer ? o->n_layer : 27, img = 896,
                  patch = 14;
    const int64_t n_pos = (img / patch) * (img / patch), proj = o->n_embd ? o->n_embd : 2560;
    int mat_type = mmproj_mat_type(o);
    if (mat_type < 0)
        return 1;
    struct mmproj_tensor *ts = xcalloc((size_t)(n_layer * 16 + 8), sizeof(*ts));
    int n = 0;
    char nm[64];
#define T(tn, ty, nd, a, b, c, dd, mu, sd) mmproj_add(ts, &n, tn, ty, nd, a, b, c, dd, mu, sd)
    const float ws = 1.0f / sqrtf((float)d);
    T("v.patch_embd.weight", GGUF_TYPE_F16, 4, patch, patch, 3, d, 0.0f, 0.05f);
    T("v.patch_embd.bias", GGUF_TYPE_F32, 1, d, 1, 1, 1, 0.0f, 0.02f);
    T("v.position_embd.weight", GGUF_TYPE_F32, 2, d, n_pos, 1, 1, 0.0f, 0.02f);
    for (int64_t il = 0; il < n_layer; il++) {
        static const char *const sq[] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int k = 0; k < 4; k++) {
            snprintf(nm, sizeof nm, "v.blk.%lld.%s.weight", (long long)il, sq[k]);
            T(nm, mat_type, 2, d, d, 1, 1, 0.0f, ws);
            snprintf(nm, sizeof nm, "v.blk.%lld.%s.bias", (long long)il, sq[k]);
            T(nm, GGUF_TYPE_F32, 1, d, 1, 1, 1, 0.0f, 0.02f);
        }
        static const char *const nrm[] = {"ln1", "ln2"};
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "v.blk.%lld.%s.weight", (long long)il, nrm[k]);
            T(nm, GGUF_TYPE_F32, 1, d, 1, 1, 1, 1.0f, 0.05f);
            snprintf(nm, sizeof nm, "v.blk.%lld.%s.bias", (long long)il, nrm[k]);
            T(nm, GGUF_TYPE_F32, 1, d, 1, 1, 1, 0.0f, 0.02f);
        }
        snprintf(nm, sizeof nm, "v.blk.%lld.ffn_up.weight", (long long)il);
        T(nm, mat_type, 2, d, ff, 1, 1, 0.0f, ws);
        snprintf(nm, sizeof nm, "v.blk.%lld.ffn_up.bias", (long long)il);
        T(nm, GGUF_TYPE_F32, 1, ff, 1, 1, 1, 0.0f, 0.02f);
        snprintf(nm, sizeof nm, "v.blk.%lld.ffn_down.weight", (long long)il);
        T(nm, mat_type, 2, ff, d, 1, 1, 0.0f, 1.0f / sqrtf((float)ff));
        snprintf(nm, sizeof nm, "v.blk.%lld.ffn_down.bias", (long long)il);
        T(nm, GGUF_TYPE_F32, 1, d, 1, 1, 1, 0.0f, 0.02f);
    }
    T("v.post_ln.weight", GGUF_TYPE_F32, 1, d, 1, 1, 1, 1.0f, 0.05f);
    T("v.post_ln.bias", GGUF_TYPE_F32, 1, d, 1, 1, 1, 0.0f, 0.02f);
    T("mm.soft_emb_norm.weight", GGUF_TYPE_F32, 1, d, 1, 1, 1, 1.0f, 0.05f);
    T("mm.input_projection.weight", GGUF_TYPE_F16, 2, proj, d, 1, 1, 0.0f, ws);
#undef T
    struct err e = {0};
    struct gguf_writer *w = NULL;
    if (gguf_writer_open(&w, o->out, &e) < 0) {
        fprintf(stderr, "gguf-gen: %s\n", e.msg);
        free(ts);
        return 1;
    }
    const float half[3] = {0.5f, 0.5f, 0.5f};
    gguf_writer_kv_str(w, "general.architecture", "clip");
    gguf_writer_kv_str(w, "general.type", "mmproj");
    gguf_writer_kv_str(w, "general.name", "gguf-gen gemma3-siglip-mmproj");
    gguf_writer_kv_str(w, "clip.projector_type", "gemma3");
    gguf_writer_kv_bool(w, "clip.has_vision_encoder", true);
    gguf_writer_kv_bool(w, "clip.use_gelu", true);
    gguf_writer_kv_u32(w, "clip.vision.image_size", (uint32_t)img);
    gguf_writer_kv_u32(w, "clip.vision.patch_size", (uint32_t)patch);
    gguf_writer_kv_u32(w, "clip.vision.embedding_length", (uint32_t)d);
    gguf_writer_kv_u32(w, "clip.vision.feed_forward_length", (uint32_t)ff);
    gguf_writer_kv_u32(w, "clip.vision.block_count", (uint32_t)n_layer);
    gguf_writer_kv_u32(w, "clip.vision.projection_dim", (uint32_t)proj);
    gguf_writer_kv_u32(w, "clip.vision.attention.head_count", 16);
    gguf_writer_kv_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_writer_kv_arr(w, "clip.vision.image_mean", GGUF_VAL_FLOAT32, half, 3);
    gguf_writer_kv_arr(w, "clip.vision.image_std", GGUF_VAL_FLOAT32, half, 3);
    if (mmproj_finish(o, w, ts, n) != 0)
        return 1;
    if (!o->quiet)
        printf("wrote %s: clip (gemma3 SigLIP, projection %lld)\n", o->out, (long long)proj);
    return 0;
}

// Qwen2.5-VL (--preset qwen25vl-mmproj): the 3B / 7B vision tower (patch 14
// as two temporal kernel slices, width 1280, FFN 3420 SwiGLU, 32 blocks, 16
// heads, window attention with a full block every 8th, 2 x 2 merger into
// --n-embd, default 2048 = the 3B text model's; 3584 for the 7B), random
// weights; --type the block matrices' type (default f16).
static int write_qwen25vl_mmproj(const struct opts *o)
{
    const int64_t d = 1280, ff = 3420, n_layer = o->n_layer ? o->n_layer : 32, patch = 14;
    const int64_t proj = o->n_embd ? o->n_embd : 2048;
    int mat_type = mmproj_mat_type(o);
    if (mat_type < 0)
        return 1;
    struct mmproj_tensor *ts = xcalloc((size_t)(n_layer * 18 + 8), sizeof(*ts));
    int n = 0;
    char nm[64];
#define T(tn, ty, nd, a, b, c, dd, mu, sd) mmproj_add(ts, &n, tn, ty, nd, a, b, c, dd, mu, sd)
    const float ws = 1.0f / sqrtf((float)d);
    T("v.patch_embd.weight", GGUF_TYPE_F16, 4, patch, patch, 3, d, 0.0f, 0.03f);
    T("v.patch_embd.weight.1", GGUF_TYPE_F16, 4, patch, patch, 3, d, 0.0f, 0.03f);
    static const struct {
        const char *part;
        int in_ff, out_ff;
    } mats[] = {{"attn_q", 0, 0},   {"attn_k", 0, 0}, {"attn_v", 0, 0},  {"attn_out", 0, 0},
                {"ffn_gate", 0, 1}, {"ffn_up", 0, 1}, {"ffn_down", 1, 0}};
    for (int64_t il = 0; il < n_layer; il++) {
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
            int64_t in = mats[k].in_ff ? ff : d, out = mats[k].out_ff ? ff : d;
            snprintf(nm, sizeof nm, "v.blk.%lld.%s.weight", (long long)il, mats[k].part);
            T(nm, mat_type, 2, in, out, 1, 1, 0.0f, 1.0f / sqrtf((float)in));
            snprintf(nm, sizeof nm, "v.blk.%lld.%s.bias", (long long)il, mats[k].part);
            T(nm, GGUF_TYPE_F32, 1, out, 1, 1, 1, 0.0f, 0.02f);
        }
        snprintf(nm, sizeof nm, "v.blk.%lld.ln1.weight", (long long)il);
        T(nm, GGUF_TYPE_F32, 1, d, 1, 1, 1, 1.0f, 0.05f);
        snprintf(nm, sizeof nm, "v.blk.%lld.ln2.weight", (long long)il);
        T(nm, GGUF_TYPE_F32, 1, d, 1, 1, 1, 1.0f, 0.05f);
    }
    T("v.post_ln.weight", GGUF_TYPE_F32, 1, d, 1, 1, 1, 1.0f, 0.05f);
    T("mm.0.weight", GGUF_TYPE_F16, 2, 4 * d, 4 * d, 1, 1, 0.0f, ws / 2);
    T("mm.0.bias", GGUF_TYPE_F32, 1, 4 * d, 1, 1, 1, 0.0f, 0.02f);
    T("mm.2.weight", GGUF_TYPE_F16, 2, 4 * d, proj, 1, 1, 0.0f, ws / 2);
    T("mm.2.bias", GGUF_TYPE_F32, 1, proj, 1, 1, 1, 0.0f, 0.02f);
#undef T
    (void)ws;
    struct err e = {0};
    struct gguf_writer *w = NULL;
    if (gguf_writer_open(&w, o->out, &e) < 0) {
        fprintf(stderr, "gguf-gen: %s\n", e.msg);
        free(ts);
        return 1;
    }
    static const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    static const float stdv[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    gguf_writer_kv_str(w, "general.architecture", "clip");
    gguf_writer_kv_str(w, "general.type", "mmproj");
    gguf_writer_kv_str(w, "general.name", "gguf-gen qwen25vl-mmproj");
    gguf_writer_kv_str(w, "clip.projector_type", "qwen2.5vl_merger");
    gguf_writer_kv_bool(w, "clip.has_vision_encoder", true);
    gguf_writer_kv_bool(w, "clip.use_silu", true);
    gguf_writer_kv_u32(w, "clip.vision.image_size", 560);
    gguf_writer_kv_u32(w, "clip.vision.patch_size", (uint32_t)patch);
    gguf_writer_kv_u32(w, "clip.vision.embedding_length", (uint32_t)d);
    gguf_writer_kv_u32(w, "clip.vision.feed_forward_length", (uint32_t)ff);
    gguf_writer_kv_u32(w, "clip.vision.block_count", (uint32_t)n_layer);
    gguf_writer_kv_u32(w, "clip.vision.projection_dim", (uint32_t)proj);
    gguf_writer_kv_u32(w, "clip.vision.attention.head_count", 16);
    gguf_writer_kv_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_writer_kv_u32(w, "clip.vision.n_wa_pattern", 8);
    gguf_writer_kv_arr(w, "clip.vision.image_mean", GGUF_VAL_FLOAT32, mean, 3);
    gguf_writer_kv_arr(w, "clip.vision.image_std", GGUF_VAL_FLOAT32, stdv, 3);
    if (mmproj_finish(o, w, ts, n) != 0)
        return 1;
    if (!o->quiet)
        printf("wrote %s: clip (qwen2.5vl_merger, projection %lld)\n", o->out, (long long)proj);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    if (!o.out) {
        usage(stderr);
        return 2;
    }
    if (o.preset && !strcmp(o.preset, "gemma3-siglip-mmproj"))
        return write_gemma3_mmproj(&o);
    if (o.preset && !strcmp(o.preset, "qwen25vl-mmproj"))
        return write_qwen25vl_mmproj(&o);
    bool tied = true;
    if (o.preset) {
        const struct preset *p = NULL;
        for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
            if (!strcmp(presets[i].name, o.preset))
                p = &presets[i];
        if (!p) {
            fprintf(stderr, "gguf-gen: unknown preset %s\n", o.preset);
            usage(stderr);
            return 2;
        }
        if (!o.arch[0])
            snprintf(o.arch, sizeof(o.arch), "%s", p->arch);
        if (!o.n_embd)
            o.n_embd = p->n_embd;
        if (!o.n_layer)
            o.n_layer = p->n_layer;
        if (!o.n_head)
            o.n_head = p->n_head;
        if (!o.n_head_kv)
            o.n_head_kv = p->n_head_kv;
        if (!o.n_ff)
            o.n_ff = p->n_ff;
        if (!o.n_vocab && !o.vocab)
            o.n_vocab = p->n_vocab;
        if (!o.n_ctx)
            o.n_ctx = p->n_ctx;
        o.rope_base = p->rope_base;
        o.eps = p->eps;
        tied = p->tied;
        if (!o.head_dim)
            o.head_dim = p->head_dim;
        if (!o.n_rot)
            o.n_rot = p->n_rot;
        if (!o.n_swa)
            o.n_swa = p->n_swa;
        o.rope_scale = p->rope_scale;
        if (!o.n_expert)
            o.n_expert = p->n_expert;
        if (!o.n_expert_used)
            o.n_expert_used = p->n_expert_used;
        if (!o.n_ff_exp)
            o.n_ff_exp = p->n_ff_exp;
    } else {
        if (!o.arch[0])
            snprintf(o.arch, sizeof(o.arch), "llama");
        bool qwen = strncmp(o.arch, "qwen", 4) == 0, gemma = strncmp(o.arch, "gemma", 5) == 0;
        o.rope_base = qwen || strcmp(o.arch, "gemma3") == 0 ? 1000000.f
                      : strcmp(o.arch, "nomic-bert") == 0   ? 1000.f
                                                            : 10000.f;
        o.eps = qwen || gemma ? 1e-6f : is_encoder(o.arch) ? 1e-12f : 1e-5f;
        if (gemma && !o.n_swa)
            o.n_swa = strcmp(o.arch, "gemma2") == 0 ? 4096 : 512;
        if (!o.n_head_kv)
            o.n_head_kv = o.n_head;
        if (!o.n_ctx)
            o.n_ctx = 4096;
    }
    if (o.tied >= 0)
        tied = o.tied;
    if (o.confident > 0) {
        if (o.random_blocks || o.sparse || is_encoder(o.arch) || tied) {
            fprintf(stderr, "gguf-gen: --confident needs a decoder with an untied output "
                            "(--untied), and neither --random-blocks nor --sparse\n");
            return 2;
        }
    }
    static const char *const archs[] = {
        "llama",      "qwen2",    "qwen3",   "gemma2",  "gemma3",     "phi3",      "bert",
        "nomic-bert", "qwen3moe", "gpt-oss", "qwen35",  "nemotron_h", "deepseek2", "smollm3",
        "olmo2",      "mistral3", "cohere2", "glm4moe", "granite",    "gemma4"};
    bool known = false;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        known |= strcmp(o.arch, archs[i]) == 0;
    if (!known) {
        fprintf(stderr,
                "gguf-gen: unsupported architecture %s (llama, qwen2, qwen3, gemma2, gemma3, "
                "phi3, bert, nomic-bert, qwen3moe, gpt-oss, qwen35, nemotron_h, deepseek2, "
                "smollm3, olmo2, mistral3, cohere2, glm4moe, granite, gemma4)\n",
                o.arch);
        return 2;
    }
    if (is_encoder(o.arch) && !o.vocab) {
        fprintf(stderr, "gguf-gen: %s needs --vocab (e.g. ggml-vocab-bert-bge.gguf)\n", o.arch);
        return 2;
    }
    if (!o.n_embd || !o.n_layer || !o.n_head || !o.n_ff) {
        fprintf(stderr, "gguf-gen: give --preset or --n-embd, --n-layer, --n-head, --n-ff\n");
        return 2;
    }
    if ((!o.head_dim && o.n_embd % o.n_head != 0) || o.n_head % o.n_head_kv != 0) {
        fprintf(stderr, "gguf-gen: n_embd must divide by n_head (or give --head-dim), n_head by "
                        "n_head_kv\n");
        return 2;
    }
    bool moe_arch = !strcmp(o.arch, "qwen3moe") || !strcmp(o.arch, "gpt-oss") ||
                    !strcmp(o.arch, "deepseek2") || !strcmp(o.arch, "glm4moe") ||
                    (!strcmp(o.arch, "llama") && o.n_expert > 0);
    if (!strcmp(o.arch, "deepseek2") && !ds2_shape_of(&o)) {
        fprintf(stderr, "gguf-gen: deepseek2 needs --preset deepseek2-lite or tiny-deepseek2\n");
        return 2;
    }
    if (moe_arch != (o.n_expert > 0) || o.n_expert_used > o.n_expert ||
        (o.n_expert && (!o.n_expert_used || !o.n_ff_exp))) {
        fprintf(stderr, "gguf-gen: qwen3moe and gpt-oss (only) need --n-expert, "
                        "--n-expert-used <= n_expert and --n-ff-exp\n");
        return 2;
    }
    if (!o.head_dim)
        o.head_dim = o.n_embd / o.n_head;
    if (!o.n_rot)
        o.n_rot = o.head_dim;
    if (o.n_rot > o.head_dim || o.n_rot % 2 != 0 || o.head_dim % 2 != 0) {
        fprintf(stderr, "gguf-gen: --n-rot must be even and at most the head dimension\n");
        return 2;
    }
    // A mix llama-quantize makes, or a block type written as random blocks
    // (iq4_xs, iq2_xxs, tq2_0 ...): then every block matrix has that type,
    // token_embd Q4_K and output Q6_K (as llama.cpp's i-quant mixes keep
    // them in k-quants), norms F32.
    int32_t ftype = quantize_mix_from_name(o.type);
    int block_type = -1;
    struct block_scales layout;
    if (ftype < 0) {
        bool moe = !strcmp(o.type, "mxfp4_moe");
        block_type = moe ? GGUF_TYPE_MXFP4 : gguf_type_from_name(o.type);
        ftype = gguf_file_type_from_name(moe ? "MXFP4_MOE" : o.type);
        if (block_type < 0 || ftype < 0 ||
            !random_block_layout((uint32_t)block_type, false, &layout)) {
            fprintf(stderr, "gguf-gen: unsupported --type %s\n", o.type);
            return 2;
        }
    }

    struct err e = {0};
    struct gguf *vocab = NULL;
    if (o.vocab) {
        if (gguf_open(&vocab, o.vocab, &e) < 0) {
            fprintf(stderr, "gguf-gen: %s: %s\n", o.vocab, e.msg);
            return 1;
        }
        uint64_t n;
        enum gguf_value_type et;
        if (!gguf_get_arr(vocab, "tokenizer.ggml.tokens", &et, &n) || et != GGUF_VAL_STRING) {
            fprintf(stderr, "gguf-gen: %s has no tokenizer.ggml.tokens\n", o.vocab);
            gguf_close(vocab);
            return 1;
        }
        if (o.n_vocab && (uint64_t)o.n_vocab != n) {
            fprintf(stderr, "gguf-gen: --n-vocab %lld but %s has %llu tokens\n",
                    (long long)o.n_vocab, o.vocab, (unsigned long long)n);
            gguf_close(vocab);
            return 2;
        }
        o.n_vocab = (int64_t)n;
    } else {
        if (!o.n_vocab)
            o.n_vocab = 512;
        if (o.n_vocab < 260) {
            fprintf(stderr, "gguf-gen: the synthetic vocabulary needs --n-vocab >= 260\n");
            return 2;
        }
    }

    struct model m = {0};
    build_layout(&o, tied, &m);
    struct quantize_mix_model mm = {.arch = o.arch,
                                    .n_layers = (int)o.n_layer,
                                    .n_gqa = (int)(o.n_head / o.n_head_kv),
                                    .tied_embeddings = tied};
    uint64_t n_params = 0, n_bytes = 0;
    for (size_t i = 0; i < m.n; i++) {
        struct gtensor *t = &m.t[i];
        int ty = block_type >= 0 ? random_block_tensor_type((uint32_t)block_type, t)
                                 : quantize_mix_tensor_type(ftype, t->name, GGUF_TYPE_F32,
                                                            t->n_dims, t->ne[0], &mm);
        t->type = (uint32_t)ty;
        const struct quant_traits *tr = quant_traits_get(t->type);
        if (!tr || (!tr->from_float_ref && !random_block_layout(t->type, false, &layout))) {
            fprintf(stderr, "gguf-gen: %s: cannot write type %s\n", t->name,
                    gguf_type_name(t->type));
            return 1;
        }
        n_params += (uint64_t)t->ne[0] * (uint64_t)rows_of(t);
        n_bytes += quant_row_size(t->type, t->ne[0]) * (uint64_t)rows_of(t);
    }

    struct gguf_writer *w = NULL;
    if (gguf_writer_open(&w, o.out, &e) < 0) {
        fprintf(stderr, "gguf-gen: %s\n", e.msg);
        return 1;
    }
    const char *arch = o.arch;
    char gname[96];
    snprintf(gname, sizeof(gname), "gguf-gen %s seed %llu", o.preset ? o.preset : "custom",
             (unsigned long long)o.seed);
    gguf_writer_kv_str(w, "general.architecture", arch);
    gguf_writer_kv_str(w, "general.name", gname);
    gguf_writer_kv_u32(w, "general.file_type", (uint32_t)ftype);
    gguf_writer_kv_u32(w, "general.quantization_version", 2);
    kv_arch_u32(w, arch, "context_length", o.n_ctx);
    kv_arch_u32(w, arch, "embedding_length", o.n_embd);
    kv_arch_u32(w, arch, "block_count", o.n_layer);
    kv_arch_u32(w, arch, "attention.head_count", o.n_head);
    if (is_nemotron_h(arch)) {
        nemotron_h_kv(w, &o);  // per-layer feed_forward_length, head_count_kv
    } else if (!strcmp(arch, "gemma4")) {
        kv_gemma4(w, &o);
    } else {
        kv_arch_u32(w, arch, "feed_forward_length", o.n_ff);
        kv_arch_u32(w, arch, "attention.head_count_kv", o.n_head_kv);
    }
    if (strcmp(arch, "bert") != 0)
        kv_arch_f32(w, arch, "rope.freq_base", o.rope_base);
    if (is_encoder(arch)) {
        kv_arch_f32(w, arch, "attention.layer_norm_epsilon", o.eps);
        char key[128];
        snprintf(key, sizeof(key), "%s.attention.causal", arch);
        gguf_writer_kv_bool(w, key, false);
        kv_arch_u32(w, arch, "pooling_type", 1);  // MEAN
        if (!gguf_find(vocab, "tokenizer.ggml.token_type_count"))
            gguf_writer_kv_u32(w, "tokenizer.ggml.token_type_count", 2);
    } else {
        kv_arch_f32(w, arch, "attention.layer_norm_rms_epsilon", o.eps);
    }
    if (!strcmp(arch, "deepseek2")) {
        deepseek2_metadata(w, &o);
    } else if (!strcmp(arch, "llama")) {
        kv_arch_u32(w, arch, "rope.dimension_count", o.n_embd / o.n_head);
        kv_arch_u32(w, arch, "vocab_size", o.n_vocab);
    } else if (strcmp(arch, "qwen2") != 0 && !is_encoder(arch)) {
        // qwen3, gemma2, gemma3, phi3 (docs/spec/architectures.md §4-§7).
        kv_arch_u32(w, arch, "attention.key_length", o.head_dim);
        kv_arch_u32(w, arch, "attention.value_length", o.head_dim);
        kv_arch_u32(w, arch, "rope.dimension_count", o.n_rot);
        if (o.n_swa)
            kv_arch_u32(w, arch, "attention.sliding_window", o.n_swa);
        if (o.n_expert) {
            kv_arch_u32(w, arch, "expert_count", o.n_expert);
            kv_arch_u32(w, arch, "expert_used_count", o.n_expert_used);
            kv_arch_u32(w, arch, "expert_feed_forward_length", o.n_ff_exp);
        }
        if (!strcmp(arch, "gemma2")) {
            kv_arch_f32(w, arch, "attn_logit_softcapping", 50.0f);
            kv_arch_f32(w, arch, "final_logit_softcapping", 30.0f);
        }
        if (o.rope_scale > 0) {
            char key[128];
            snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
            // gpt-oss: YaRN from a 4k original context.
            gguf_writer_kv_str(w, key, strcmp(arch, "gpt-oss") == 0 ? "yarn" : "linear");
            if (!strcmp(arch, "gpt-oss"))
                kv_arch_u32(w, arch, "rope.scaling.original_context_length", 4096);
            kv_arch_f32(w, arch, "rope.scaling.factor", o.rope_scale);
        }
        if (!strcmp(arch, "phi3")) {  // LongRoPE from a 4k original context
            kv_arch_u32(w, arch, "rope.scaling.original_context_length", 4096);
            float s = (float)o.n_ctx / 4096.0f;
            kv_arch_f32(w, arch, "rope.scaling.attn_factor",
                        s > 1 ? sqrtf(1.0f + logf(s) / logf(4096.0f)) : 1.0f);
        }
    }
    if (is_gdn(arch))
        gdn_kv(w, &o);
    kv_fam43(w, &o);
    if (vocab) {
        for (size_t i = 0; i < gguf_kv_count(vocab); i++) {
            const struct gguf_kv *kv = gguf_kv_at(vocab, i);
            if (str_starts_with(kv->key, "tokenizer."))
                gguf_writer_kv_copy(w, kv);
        }
    } else {
        synthetic_vocab(w, o.n_vocab);
    }
    for (size_t i = 0; i < m.n; i++)
        gguf_writer_add_tensor(w, m.t[i].name, m.t[i].type, m.t[i].n_dims, m.t[i].ne);
    int rc = gguf_writer_write_header(w, &e);
    gguf_close(vocab);

    size_t chunk = 1 << 20;
    size_t max_row = 0;
    for (size_t i = 0; i < m.n; i++)
        if ((size_t)m.t[i].ne[0] > max_row)
            max_row = (size_t)m.t[i].ne[0];
    if (chunk < max_row)
        chunk = max_row;
    float *xbuf = o.sparse ? NULL : xmalloc(chunk * sizeof(float));
    void *qbuf = o.sparse ? NULL : xmalloc(chunk * sizeof(float));
    for (size_t i = 0; rc == 0 && i < m.n; i++) {
        const struct gtensor *t = &m.t[i];
        if (o.sparse) {
            uint64_t nb = quant_row_size(t->type, t->ne[0]) * (uint64_t)rows_of(t);
            rc = gguf_writer_skip_data(w, nb, &e);
        } else {
            rc = write_tensor(w, t, &o, xbuf, qbuf, chunk, &e);
        }
    }
    free(xbuf);
    free(qbuf);
    free(m.t);
    if (rc < 0) {
        gguf_writer_abort(w);
        fprintf(stderr, "gguf-gen: %s\n", e.msg);
        return 1;
    }
    if (gguf_writer_close(w, &e) < 0) {
        fprintf(stderr, "gguf-gen: %s\n", e.msg);
        return 1;
    }
    if (!o.quiet) {
        char ps[32];
        gguf_format_param_count(n_params, ps, sizeof(ps));
        printf("wrote %s: %s, %llu parameters (%s), %s, %.1f MB of tensor data%s\n", o.out, arch,
               (unsigned long long)n_params, ps, gguf_file_type_name((uint32_t)ftype),
               (double)n_bytes / 1e6, o.sparse ? " (sparse)" : "");
    }
    return 0;
}

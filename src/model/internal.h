// model internals shared by the model module's files:
//   arch.c      the architecture table, hyper-parameters and tensor binding
//               driven by each family's table row
//   decoder.c   the one generic decoder block every decoder family runs
//   load.c      open / estimate / load / free, accessors
//   kvcache.c   the KV cache shared by slots (linear and ring layers), slots
//   batch.c     model_decode: validation and splitting into ubatches
//   <family>.c  one table row each (llama.c, qwen2.c, qwen3.c, gemma2.c,
//               gemma3.c, phi3.c, bert.c) plus hooks for what is unusual
// and the unit tests.
#pragma once

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"

#define MODEL_MAX_LAYERS 512
#define MODEL_LAYER_MATS 8  // a family's own matrices per layer (interleaved at load)
#define MODEL_CKPTS      4  // recurrent-state checkpoints per slot (kvcache.c)

struct model;

struct model_hparams {
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float eps;
    struct engine_rope rope;      // global (full-attention) layers
    struct engine_rope rope_swa;  // sliding-window layers (= rope unless the family differs)
    int n_swa;                    // sliding window (0: none)
    int head_dim_swa;             // sliding-window layers' head dim when it differs (gemma4;
                                  // 0: head_dim); their cache rows use the front of each row
    float q_scale;                // attention scale (1/sqrt(head_dim) unless the family says)
    float attn_softcap;           // 0: off
    float final_softcap;          // 0: off
    float embd_scale;             // input embeddings multiplied by this (0: off)
    // Attention temperature (Llama 4 style; mistral3): the query row of
    // position p is multiplied by 1 + attn_temp_scale · ln(floor((p +
    // attn_temp_offset) / attn_temp_floor) + 1). attn_temp_scale 0: off.
    float attn_temp_scale, attn_temp_offset;
    int attn_temp_floor;
    float logit_scale;     // logits multiplied by this (0: off; cohere2 logit_scale)
    float logit_divisor;   // logits divided by this (0: off; granitehybrid)
    float residual_scale;  // granite: each branch's output multiplied by this (0: off)
    // Families with their own layers (struct model_arch.custom_layers): the
    // floats per batch row of the family's scratch (struct model_scratch.mix).
    int64_t mix_floats;
    // The V rows are the K rows (deepseek2's latent cache): one buffer per
    // layer, half the bytes.
    bool kv_v_is_k;
    // Deepstack (qwen3vl): an image row's input is n_embd · (1 + n_deepstack)
    // wide; slice k + 1 is added to its hidden state after layer k.
    int n_deepstack;
};

// Recurrent state of one layer (delta nets, Mamba-2, short convolutions):
// for each slot, the convolution's last kernel - 1 inputs and the
// recurrence's state, always F32. The family's load or bind hook sets the
// sizes; kvcache.c allocates n_slots of each (zeroed), keeps checkpoints
// and rewinds it. Slot s's state is at conv + s * conv_floats (ssm alike);
// a family op reads it as the state after the position before a row's
// first position in the ubatch, and starts from zeros at position 0.
struct model_rstate {
    int64_t conv_floats;  // per slot (0: none)
    int64_t ssm_floats;   // per slot (0: none)
    float *conv, *ssm;    // backend buffers, n_slots × the above
};

struct model_layer {
    const float *attn_norm;               // [n_embd]
    struct engine_tensor wq, wk, wv, wo;  // [n_embd, q_dim], [n_embd, kv_dim] ×2, [q_dim, n_embd]
    const float *bq, *bk, *bv, *bo;       // optional biases
    const float *attn_q_norm, *attn_k_norm;       // [head_dim] per-head RMSNorm or NULL
    const float *attn_post_norm, *ffn_post_norm;  // [n_embd] norms after the sub-blocks or NULL
    const float *ffn_norm;                        // [n_embd]
    struct engine_tensor w_gate, w_up, w_down;    // [n_embd, n_ff] ×2, [n_ff, n_embd]
    const float *sinks;                           // [n_head] attention sinks or NULL
    // Per-layer type: sliding window (0: global), its RoPE, its cache.
    bool swa;
    const struct engine_rope *rope;  // &hp.rope or &hp.rope_swa (NULL: no RoPE)
    struct engine_kv_layer kv;
    int kv_ring;  // > 0: the cache is a ring of kv_ring cells per slot
    int chunk;    // > 0: chunked attention (llama4): a query sees only its chunk's positions
    bool qk_rms;  // q and k RMS-normalised per head (no weight) after RoPE (llama4)
    // Encoders (bert.c): attn_norm / ffn_norm hold the post-norms
    // attn_output_norm / layer_output_norm, whose LayerNorm biases are here.
    const float *attn_norm_b, *ffn_norm_b;  // [n_embd]
    const float *b_up, *b_down;             // [n_ff], [n_embd] or NULL
    void *ext;                              // a family's own per-layer data (MoE experts, ...)
    void *mixer;  // a custom_layers family's own attention / recurrent mixer data (one
                  // allocation, freed with the model), beside a MoE's ext
    // Per-layer shape (hybrids: the file's per-layer arrays; else the model's).
    int n_head_kv;  // 0: no attention in this layer
    int n_ff;       // 0: no dense FFN in this layer
    struct model_rstate rs;
    // A family's own matrices (in ext or elsewhere) that load rewrites into
    // the kernels' interleaved layout like the common ones.
    struct engine_tensor *mats[MODEL_LAYER_MATS];
    int n_mats;
};

// One forward pass over at most n_batch rows, prepared by batch.c.
struct model_ubatch {
    int n;                      // rows
    const int32_t *tokens;      // [n]
    const int32_t *pos;         // [n] position in the row's sequence
    const int32_t *rope_pos;    // [4 n] M-RoPE's position streams (t, h, w, 0) or NULL
    const int32_t *slot;        // [n] the row's slot (a slot's rows are contiguous)
    const int32_t *cells;       // [n] KV cell to write (linear layers)
    const int32_t *cell0;       // [n] first cell of the row's slot (linear layers)
    const int32_t *ring_cells;  // [n] KV cell to write (ring layers) or NULL
    const int32_t *ring_cell0;  // [n] first cell of the row's slot (ring layers) or NULL
    const int32_t *n_visible;   // [n] = pos + 1 (causal)
    int n_out;                  // rows that want outputs
    const int32_t *out_rows;    // [n_out] row index of each
    float *out_logits;          // host [n_out × n_vocab]
    float *out_embd;            // host [n_out × n_embd] or NULL
    const float *embd;          // host [n × n_embd] input rows (images) or NULL
    const int32_t *from_embd;   // [n] nonzero: the row's input is its embd row
    bool open_runs;             // some rows see past their position (non-causal images)
};

// Activation buffers (backend memory), sized for n_batch rows once at load.
struct model_scratch {
    float *x;       // [n_batch, n_embd] residual stream
    float *xb;      // [n_batch, n_embd] normed
    float *q;       // [n_batch, q_dim]
    float *k;       // [n_batch, kv_dim]
    float *v;       // [n_batch, kv_dim]
    float *att;     // [n_batch, q_dim]
    float *hb;      // [n_batch, n_ff]
    float *hb2;     // [n_batch, n_ff]
    float *xo;      // [n_out_max, n_embd] output rows
    float *logits;  // [n_out_max, n_vocab]
    float *mix;     // [n_batch, hp.mix_floats] a family's own scratch, or NULL
    int n_out_max;
};

enum model_ffn_act {
    MODEL_ACT_SILU = 0,  // SwiGLU
    MODEL_ACT_GELU,      // GeGLU (GELU, tanh form)
};

// Name of a tensor the table may rename (Ollama's converter writes some
// families with other names than llama.cpp's); NULL = the llama.cpp name.
struct model_tensor_names {
    const char *attn_output;     // "attn_output" (weight and bias)
    const char *ffn_norm;        // "ffn_norm"
    const char *attn_post_norm;  // "post_attention_norm"
    const char *ffn_post_norm;   // "post_ffw_norm"
};

// An architecture: one row of the table (arch.c's model_archs[]), defined in
// its family's file. Everything the generic loader and decoder block need is
// data here; hooks are for what no field describes.
struct model_arch {
    const char *name;   // general.architecture (also the GGUF key prefix)
    const char *alias;  // another general.architecture naming the same family, or NULL

    // Hyper-parameters.
    enum engine_rope_mode rope_mode;
    bool rope_full;     // rope.dimension_count must equal head_dim
    float default_eps;  // when layer_norm_rms_epsilon is absent (0: required)
    bool embd_scale;    // x = token_embd[t] · sqrt(n_embd)
    bool q_prescale;    // Q multiplied by the scale before Q·K (gemma), not the scores
    // Sliding window: layer il is local when il % swa_pattern < swa_pattern - 1
    // (and the file has a window); a bool array sliding_window_pattern wins.
    int swa_pattern;
    int default_swa;      // window when the key is absent (0: none)
    float swa_freq_base;  // local layers' RoPE base when the file has none (0: global's)
    bool swa_unscaled;    // local layers use no RoPE scaling
    bool softcaps;  // read attn_logit_softcapping / final_logit_softcapping (else the defaults)
    float default_attn_softcap, default_final_softcap;
    // Layers without RoPE (their model_layer.rope is NULL): every nope_step-th
    // one ((il + 1) % nope_step == 0: smollm3), and with nope_global the
    // global (not sliding-window) layers of a model with a window (cohere2).
    int nope_step;
    bool nope_global;
    bool attn_temp_nope;  // the attention temperature acts only on layers without RoPE (llama4)

    // Tensors.
    bool qkv_bias;       // attn_q/k/v.bias required
    bool qk_norm;        // attn_q_norm / attn_k_norm [head_dim] required
    bool qk_norm_full;   // with qk_norm: [q_dim] / [kv_dim], one RMSNorm over all heads (olmo2)
    bool no_pre_norms;   // no attn_norm / ffn_norm: the sub-blocks read x itself (olmo2)
    bool layer_norm;     // attn_norm, ffn_norm and output_norm are LayerNorms (mean and
                         // variance, no bias; cohere2), not RMSNorms
    bool post_norms;     // post_attention_norm / post_ffw_norm required
    bool fused_qkv;      // attn_qkv [n_embd, q_dim + 2 kv_dim] accepted (rows Q, K, V)
    bool fused_gate_up;  // ffn_up [n_embd, 2 n_ff] holds gate then up (no ffn_gate)
    bool rope_freqs;     // optional rope_freqs.weight (llama3 factors)
    bool longrope;       // optional rope_factors_long/short.weight (Phi-3)
    enum model_ffn_act act;
    struct model_tensor_names names;

    // Hooks (all optional).
    // Adjusts or checks hyper-parameters after the common ones are read
    // (before any tensor is bound). Encoders (encoder = true) read and bind
    // everything in it themselves (bert.c). It may set m->arch to a variant
    // row of its family (same name) that the rest of loading then follows.
    int (*load)(struct model *m, struct err *e);
    // Binds what is unusual after the common tensors are bound.
    int (*bind)(struct model *m, struct err *e);
    // The whole forward pass (encoders); NULL: the generic decoder.
    void (*forward)(struct model *m, const struct model_ubatch *ub);
    // A layer's FFN (MoE): out (n, n_embd) = FFN(in (n, n_embd)); NULL: dense.
    void (*ffn)(struct model *m, struct model_layer *L, float *out, const float *in, int n);
    // Embedding-only encoder (bert): non-causal attention over each slot's
    // whole sequence, which arrives in one ubatch from position 0 (n_visible
    // is the sequence length); no logits; one KV buffer shared by all layers
    // (it only holds the current layer's keys and values), always F32.
    bool encoder;
    // An encoder's projection of its pooled embedding (n_embd floats, in
    // place; EmbeddingGemma's dense_2 / dense_3), or NULL.
    void (*pool_project)(const struct model *m, float *v);
    // Called once at the end of model_load (scratch allocated).
    int (*prepare)(struct model *m, struct err *e);
    // The family binds every layer itself in its bind hook (hybrids: layers
    // of different kinds); the common loader binds only token_embd, the
    // output norm (optional then) and output, and reads feed_forward_length
    // and attention.head_count_kv as a number or a per-layer array (0 allowed).
    // Such a family has its own forward hook, built from decoder.c's steps.
    bool custom_layers;
};

struct model_slot {
    int n_past;
    int32_t *tokens;  // [n_ctx]
    int32_t *rope3;   // [n_ctx × 3] M-RoPE models: each entry's (t, h, w); else NULL
};

// A copy of one slot's recurrent state (every layer's, conv and ssm) at a
// position: restored to go back to it (prefix reuse, speculative rollback).
struct model_ckpt {
    int pos;      // -1: empty
    float *data;  // host, rstate_floats (model) floats
};

struct model {
    struct gguf *g;
    struct tokenizer *tok;
    const struct model_arch *arch;
    struct engine_backend *be;
    struct model_options opts;
    struct model_hparams hp;
    uint32_t kv_type;  // gguf type id

    struct engine_tensor tok_embd;        // [n_embd, n_vocab]
    struct engine_tensor output;          // [n_embd, n_vocab] (= tok_embd when tied)
    const float *output_norm;             // [n_embd]
    const float *output_bias;             // [n_vocab] or NULL
    const float *rope_freqs;              // [n_rot/2] or NULL
    const float *rope_long, *rope_short;  // Phi-3 LongRoPE factors [n_rot/2] or NULL
    struct model_layer *layers;
    // Encoders (bert.c).
    struct engine_tensor type_embd;        // [n_embd, n_token_types]
    struct engine_tensor pos_embd;         // [n_embd, n_ctx_train] (bert) or none
    const float *embd_norm, *embd_norm_b;  // [n_embd] LayerNorm after the embeddings
    int32_t *type_ids;                     // host [n_batch] zeros: every token is type 0

    void **weight_copies;  // interleaved matmul weights (engine_tensor_interleave), owned
    size_t n_weight_copies;

    struct model_scratch s;
    struct model_slot *slots;
    int n_cells;  // n_ctx × n_slots (linear layers)
    int kv_ring;  // cells per slot of the ring layers (0: every layer is linear)

    // Outputs of the last decode (host).
    float *logits;       // [n_outputs × n_vocab]
    float *embd;         // [n_outputs × n_embd] or NULL
    int32_t *out_index;  // [batch entries] → output row or -1
    int out_cap;         // rows allocated in logits
    int n_batch_entries;
    int32_t *ub_buf;  // ubatch index arrays: 14 × n_batch (10 + M-RoPE's 4)
    int out_index_cap;
    int *slot_next, *slot_last;  // model_decode bookkeeping, [n_slots]

    // Recurrent state (hybrids): any layer with rs sizes makes the model
    // recurrent; positions then cannot be removed from the middle of a slot
    // and going back means restoring a checkpoint and evaluating again.
    bool recurrent;
    int64_t rstate_floats;     // per slot, all layers (conv + ssm)
    struct model_ckpt *ckpts;  // [n_slots × (MODEL_CKPTS + 1)]: slot s's at s·(MODEL_CKPTS + 1);
                               // entry 0 is the automatic one (model_decode), 1.. explicit
    bool replaying;            // model_decode is re-evaluating a slot's tokens (kvcache.c)

    struct model_lora *lora;  // the LoRA adapters' terms (lora.c), or NULL
};

extern const struct model_arch model_arch_llama;
extern const struct model_arch model_arch_qwen2;
extern const struct model_arch model_arch_qwen2vl;
extern const struct model_arch model_arch_qwen3vl;
extern const struct model_arch model_arch_qwen3;
extern const struct model_arch model_arch_gemma2;
extern const struct model_arch model_arch_gemma3;
extern const struct model_arch model_arch_phi3;
extern const struct model_arch model_arch_qwen3moe;
extern const struct model_arch model_arch_gpt_oss;
extern const struct model_arch model_arch_gptoss;
extern const struct model_arch model_arch_qwen35;
extern const struct model_arch model_arch_qwen35moe;
extern const struct model_arch model_arch_qwen3next;
extern const struct model_arch model_arch_smollm3;
extern const struct model_arch model_arch_olmo2;
extern const struct model_arch model_arch_mistral3;
extern const struct model_arch model_arch_cohere2;
extern const struct model_arch model_arch_glm4moe;
extern const struct model_arch model_arch_granite;
extern const struct model_arch model_arch_bert;
extern const struct model_arch model_arch_nomic_bert;
extern const struct model_arch model_arch_nemotron_h;
extern const struct model_arch model_arch_nemotron_h_moe;
extern const struct model_arch model_arch_granitehybrid;
extern const struct model_arch model_arch_lfm2;
extern const struct model_arch model_arch_lfm2moe;
extern const struct model_arch model_arch_deepseek2;
extern const struct model_arch model_arch_gemma4;
extern const struct model_arch model_arch_gemma3n;
extern const struct model_arch model_arch_llama4;
extern const struct model_arch model_arch_gemma_embd;
extern const struct model_arch model_arch_gemma_embd_gemma3;

// arch.c: the table and the generic loader.
const struct model_arch *model_arch_find(struct str name);
// A required <arch>.<suffix> u32 key as an int ("missing or invalid key").
int model_need_u32(const struct model *m, const char *suffix, int *out, struct err *e);
// The keys every family has: context_length, embedding_length, block_count
// (checked against MODEL_MAX_LAYERS) and attention.head_count.
int model_read_base_hparams(struct model *m, struct err *e);
// Reads the common hyper-parameters (spec §0.1) and the row's per-layer-type
// attention features.
int model_read_hparams(struct model *m, struct err *e);
// Binds the decoder tensors the row describes.
int model_bind_decoder(struct model *m, struct err *e);
int model_bind_matrix(struct model *m, struct engine_tensor *t, const char *name, int64_t ne0,
                      int64_t ne1, bool required, struct err *e);
int model_bind_vector(struct model *m, const float **out, const char *name, int64_t n,
                      bool required, struct err *e);
// A view of rows [r0, r0 + n) of a matrix (part of a fused weight), in place.
void model_row_view(struct engine_tensor *out, const struct engine_tensor *t, int64_t r0,
                    int64_t n);
// "<arch>.<suffix>" into buf.
const char *model_key(const struct model *m, char *buf, size_t n, const char *suffix);

// qwen2vl.c: M-RoPE sections (rope.dimension_sections or Ollama's
// rope.mrope_section) into hp.rope and hp.rope_swa (qwen2vl, qwen3vl).
int model_mrope_load(struct model *m, struct err *e);

// gemma2.c: the Gemma query scale (27B: 1/sqrt(n_embd / n_head)), a load
// hook shared by gemma2 and gemma3.
int model_gemma_query_scale(struct model *m, struct err *e);

// gemma_embedding.c: checks an EmbeddingGemma file's dense projections
// (gemma3's load hook, for Ollama's files, after switching to
// model_arch_gemma_embd_gemma3).
int model_gemb_check(struct model *m, struct err *e);

// moe.c: the mixture-of-experts FFN (qwen3moe.c, gpt_oss.c).
struct model_moe_spec {
    enum engine_moe_gating gating;
    bool norm_w;  // renormalise the chosen experts' weights
    enum engine_moe_act act;
    bool biases;          // router and expert biases (gpt-oss)
    bool no_gate;         // experts without ffn_gate_exps (squared ReLU: nemotron-h)
    bool sel_bias;        // exp_probs_b.bias [n_expert] for the choice (nemotron-h)
    bool weight_keys;     // expert_weights_norm / expert_weights_scale from the file
    bool shared;          // ffn_*_shexp when the file has them (no gate with no_gate)
    bool ff_layers_only;  // only layers with L->n_ff > 0 (hybrids' other layers)
    bool n_ff_is_expert;  // an expert's width is feed_forward_length (granite)
    // The shared expert (required) scaled by σ(ffn_gate_inp_shexp · x)
    // (qwen3next, qwen35moe).
    bool shared_gated;
    // Only the layers whose file has ffn_gate_inp.weight (gemma4: MoE beside
    // the dense MLP in some layers).
    bool router_layers_only;
    // ffn_down_exps.scale [n_expert] (Ollama: ffn_gate_inp.per_expert_scale)
    // when present: each expert's output times its factor (gemma4).
    bool exp_scale;
    int first_layer;            // the layers before it have no MoE (leading dense blocks)
    int moe_step;               // > 0: only layers with (il + 1) % moe_step == 0 (llama4)
    bool w_input;               // the weight scales the expert's input (llama4, engine_moe)
    float w_scale;              // != 0: the chosen weights are multiplied by it
    int n_group, n_group_used;  // group-limited choice (struct engine_moe)
};
// Reads expert_count / expert_used_count / expert_feed_forward_length and
// binds each layer's router and 3-D experts (layer.ext, freed with the model).
int model_bind_moe(struct model *m, const struct model_moe_spec *spec, struct err *e);
// Layer il's expert tensors that load may rewrite into the interleaved
// layout (engine_experts_interleavable), at most 3, into out; 0 for a
// layer without experts.
size_t model_moe_interleavable(struct model *m, int il, struct engine_tensor **out);
// The FFN hook of families whose layers are MoE or dense (leading dense
// layers, interleaved MoE): the layer's experts, else its dense FFN.
void model_ffn_moe_or_dense(struct model *m, struct model_layer *L, float *out, const float *in,
                            int n);
// The FFN hook (struct model_arch.ffn); out may be in.
void model_ffn_moe(struct model *m, struct model_layer *L, float *out, const float *in, int n);
// The MoE of layer L with the router reading its own rows router_in (n,
// n_embd) instead of in (gemma4).
void model_ffn_moe_routed(struct model *m, struct model_layer *L, float *out, const float *in,
                          const float *router_in, int n);
// The prepare hook: reserves the MoE op's scratch for n_batch rows.
int model_prepare_moe(struct model *m, struct err *e);
// Bytes of that scratch (0 for a model without MoE layers).
uint64_t model_moe_scratch_bytes(const struct model *m, int n_batch);
// Bytes of the file's 3-D expert tensors (0 without experts).
uint64_t model_moe_experts_bytes(const struct model *m);

// qwen35.c: the gated delta-net hybrids' hooks (qwen35, qwen35moe, qwen3next).
int model_gdn_load(struct model *m, struct err *e);
int model_gdn_bind(struct model *m, struct err *e);
int model_gdn_prepare(struct model *m, struct err *e);
void model_gdn_forward(struct model *m, const struct model_ubatch *ub);

// mamba2.c: the Mamba-2 mixer of the hybrids (nemotron_h.c, granitehybrid.c).
// Binds layer il's attn_norm and mixer (layer.mixer, ssm.* keys), sets its
// recurrent state sizes and reserves its scratch (hp.mix_floats).
int model_mamba2_bind(struct model *m, int il, struct err *e);
// out (n, n_embd) = the mixer of the normed h (n, n_embd); out may be h.
void model_mamba2(struct model *m, struct model_layer *L, const struct model_ubatch *ub, float *out,
                  const float *h, int n);

// decoder.c: the generic decoder block, and its steps for families with
// their own forward pass (custom_layers).
void model_forward_decoder(struct model *m, const struct model_ubatch *ub);
// Qwen3-VL's deepstack: after layer k (< hp.n_deepstack), slice k + 1 of each
// image row's input embedding is added to its hidden state (qwen3vl.c).
void model_add_deepstack(struct model *m, const struct model_ubatch *ub, int k);
// x (n, n_embd) = the token embeddings of ub's rows (· embd_scale when set).
void model_embed_input(struct model *m, const struct model_ubatch *ub);
// Attention inputs of n rows from s.x: norm (L->attn_norm), Q/K/V, q/k
// norms, RoPE, K and V into the layer's cache.
void model_attn_qkv(struct model *m, struct model_layer *L, const struct model_ubatch *ub, int n);
// Attention of n rows over the layer's cache: s.att (n, q_dim) from s.q.
void model_attn_attend(struct model *m, struct model_layer *L, const struct model_ubatch *ub,
                       int n);
// x += RMSNorm?(W_o att + b_o).
void model_attn_out(struct model *m, struct model_layer *L, int n);
// The dense gated FFN of the layer (L->n_ff wide): out = W_down(act(W_gate in) * W_up in).
void model_dense_ffn(struct model *m, struct model_layer *L, float *out, const float *in, int n);
// x += RMSNorm?(FFN(RMSNorm(x; ffn_norm))) by the family's FFN hook or the dense FFN.
void model_ffn_block(struct model *m, struct model_layer *L, int n);
// Keeps only the rows of ub that want outputs in the n_embd-wide buffers
// given (NULL-terminated list); returns ub->n_out.
int model_keep_output_rows(struct model *m, const struct model_ubatch *ub, float **bufs,
                           const int *widths);
// Final norm, vocabulary projection (soft-cap) into ub's outputs, n rows of s.x.
void model_output_logits(struct model *m, const struct model_ubatch *ub, int n);
// For custom_layers families: binds layer il's attention (attn_norm, Q/K/V/O
// as the row says, with the layer's n_head_kv) and its FFN (ffn_norm or the
// row's name, gate/up/down of the layer's n_ff; not when the row has an FFN hook).
int model_bind_layer_attn(struct model *m, int il, struct err *e);
int model_bind_layer_ffn(struct model *m, int il, struct err *e);
// A Gemma-style attention block (gemma3n, gemma4): attn_norm, Q/K/V/output,
// Q and K norms of head size hd, post_attention_norm. own_kv false: the
// layer reads an earlier layer's K/V, so attn_k / attn_k_norm may be absent;
// v_own false: attn_v may be absent (the layer's V is its K).
int model_bind_gemma_attn(struct model *m, int il, int64_t hd, int64_t n_head_kv, bool own_kv,
                          bool v_own, struct err *e);
// The dense gate/up/down of layer il (L->n_ff wide), also for a family with
// an FFN hook whose first layers are dense (deepseek2, lfm2moe).
int model_bind_layer_dense_ffn(struct model *m, int il, struct err *e);

// kvcache.c.
// Sizes the cache per layer type (linear n_ctx cells, or a ring for
// sliding-window layers) from the resolved options.
void model_kv_plan(struct model *m);
uint64_t model_kv_bytes(const struct model *m);
int model_kv_alloc(struct model *m, struct err *e);
void model_kv_free(struct model *m);

// Recurrent state: sizes (per slot, all layers), allocation with the cache.
uint64_t model_rstate_bytes(const struct model *m);
// Before a model_decode writes slot s from position p: brings its recurrent
// state to p (restores the best checkpoint at or before p and evaluates the
// tokens from there to p again). Returns the position the state is at (p,
// or less when evaluating failed: then the slot holds that many tokens).
int model_rstate_rewind(struct model *m, int slot, int p, struct err *e);
// Saves slot s's recurrent state at its current length into checkpoint k
// (0: the automatic one).
void model_rstate_save(struct model *m, int slot, int k);

// lora.c: the adapters of opts.lora_paths, checked against the model and
// attached to the matmul weights they name (struct engine_tensor.lora),
// with product scratch for max_rows rows. Runs before the weights are
// interleaved (it finds them by their mapped data).
int model_lora_attach(struct model *m, int64_t max_rows, struct err *e);
void model_lora_free(struct model *m);
// Whether p is a weight copy a merged adapter made (lora_merge), and
// freeing one once the weight no longer points at it (interleaved).
bool model_lora_holds(const struct model *m, const void *p);
void model_lora_release_copy(struct model *m, void *p);
// Bytes the adapters of opts.lora_paths take once attached: their tensors
// as F32 (*weights) and the product scratch for max_rows rows (*scratch).
int model_lora_estimate(const struct model *m, int64_t max_rows, uint64_t *weights,
                        uint64_t *scratch, struct err *e);

// Test hook (llama4.c): the chunk of chunked attention and the temperature
// floor of llama4 models loaded afterwards (0: llama.cpp's 8192).
extern int model_llama4_test_chunk;

// Test hook: layer `il`'s K and V rows of a cell as floats (kv_dim each).
void model_debug_kv_row(struct model *m, int il, int cell, float *k, float *v);

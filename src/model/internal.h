// model internals shared by the architecture files (llama.c, qwen2.c), the
// loader / KV cache / C API (model.c) and the unit tests.
#pragma once

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"

#define MODEL_MAX_LAYERS 512

struct model_hparams {
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float eps;
    struct engine_rope rope;
};

struct model_layer {
    const float *attn_norm;               // [n_embd]
    struct engine_tensor wq, wk, wv, wo;  // [n_embd, q_dim], [n_embd, kv_dim] ×2, [q_dim, n_embd]
    const float *bq, *bk, *bv, *bo;       // optional biases
    const float *ffn_norm;                // [n_embd]
    struct engine_tensor w_gate, w_up, w_down;  // [n_embd, n_ff] ×2, [n_ff, n_embd]
    struct engine_kv_layer kv;
    // Encoders (bert.c): attn_norm / ffn_norm hold the post-norms
    // attn_output_norm / layer_output_norm, whose LayerNorm biases are here.
    const float *attn_norm_b, *ffn_norm_b;  // [n_embd]
    const float *b_up, *b_down;             // [n_ff], [n_embd] or NULL
};

// One forward pass over at most n_batch rows, prepared by model.c.
struct model_ubatch {
    int n;                     // rows
    const int32_t *tokens;     // [n]
    const int32_t *pos;        // [n] position in the row's sequence
    const int32_t *cells;      // [n] KV cell to write
    const int32_t *cell0;      // [n] first cell of the row's slot
    const int32_t *n_visible;  // [n] = pos + 1 (causal)
    int n_out;                 // rows that want outputs
    const int32_t *out_rows;   // [n_out] row index of each
    float *out_logits;         // host [n_out × n_vocab]
    float *out_embd;           // host [n_out × n_embd] or NULL
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
    int n_out_max;
};

struct model_arch {
    const char *name;  // general.architecture
    // Reads hyper-parameters and binds tensors; fails with a clear message.
    int (*load)(struct model *m, struct err *e);
    // Runs the forward pass of one ubatch.
    void (*forward)(struct model *m, const struct model_ubatch *ub);
    // Embedding-only encoder (bert): non-causal attention over each slot's
    // whole sequence, which arrives in one ubatch from position 0 (n_visible
    // is the sequence length); no logits; one KV buffer shared by all layers
    // (it only holds the current layer's keys and values), always F32.
    bool encoder;
    // Optional: called once at the end of model_load (scratch allocated).
    int (*prepare)(struct model *m, struct err *e);
};

struct model_slot {
    int n_past;
    int32_t *tokens;  // [n_ctx]
};

struct model {
    struct gguf *g;
    struct tokenizer *tok;
    const struct model_arch *arch;
    struct engine_backend *be;
    struct model_options opts;
    struct model_hparams hp;
    uint32_t kv_type;  // gguf type id

    struct engine_tensor tok_embd;  // [n_embd, n_vocab]
    struct engine_tensor output;    // [n_embd, n_vocab] (= tok_embd when tied)
    const float *output_norm;       // [n_embd]
    const float *output_bias;       // [n_vocab] or NULL
    const float *rope_freqs;        // [n_rot/2] or NULL
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
    int n_cells;  // n_ctx × n_slots

    // Outputs of the last decode (host).
    float *logits;       // [n_outputs × n_vocab]
    float *embd;         // [n_outputs × n_embd] or NULL
    int32_t *out_index;  // [batch entries] → output row or -1
    int out_cap;         // rows allocated in logits
    int n_batch_entries;
    int32_t *ub_buf;  // ubatch index arrays: 6 × n_batch
    int out_index_cap;
    int *slot_next, *slot_last;  // model_decode bookkeeping, [n_slots]
};

extern const struct model_arch model_arch_llama;
extern const struct model_arch model_arch_qwen2;
extern const struct model_arch model_arch_bert;
extern const struct model_arch model_arch_nomic_bert;

// Helpers for the architecture loaders (model.c).
int model_bind_matrix(struct model *m, struct engine_tensor *t, const char *name, int64_t ne0,
                      int64_t ne1, bool required, struct err *e);
int model_bind_vector(struct model *m, const float **out, const char *name, int64_t n,
                      bool required, struct err *e);
// Reads the common llama-like hyper-parameters (spec §0.1).
int model_read_hparams(struct model *m, enum engine_rope_mode rope_mode, struct err *e);
// Binds the common llama-like tensors (optional biases included).
int model_bind_llama_tensors(struct model *m, struct err *e);
// The llama forward pass (also used by qwen2, which differs in its
// hyper-parameters and biases only).
void model_forward_llama(struct model *m, const struct model_ubatch *ub);

// Test hook: layer `il`'s K and V rows of a cell as floats (kv_dim each).
void model_debug_kv_row(struct model *m, int il, int cell, float *k, float *v);

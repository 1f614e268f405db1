// engine: the compute layer under the model code. It knows tensors (views over
// the GGUF mapping, used in place), a persistent thread pool, and a fixed set
// of transformer ops (matmul, embedding lookup, norms, RoPE, softmax, causal
// attention over a KV cache, gated MLP, element-wise ops). It does not know
// what a transformer is: the model module strings these ops together.
//
// Every op goes through a backend (struct engine_backend_ops), so another
// backend (CUDA) can be added beside the CPU one without touching model code.
// Activation buffers come from engine_buf_alloc and are only touched through
// ops; results reach the host through engine_buf_read.
//
// Threading: one pool per backend. Ops split rows across the pool's threads
// with a barrier between ops. A backend is used by one caller thread at a
// time (the runner's batching loop); it is not itself thread-safe.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "util/util.h"

#define ENGINE_MAX_THREADS 256

// A 2-D view: ne[1] rows of ne[0] elements of `type`, rows row_bytes apart.
// Weights point into the GGUF mapping (only engine_tensor_interleave makes a
// copy, in the kernels' layout); 1-D tensors have ne[1] == 1.
struct engine_tensor {
    const char *name;  // NUL-terminated copy owned by whoever made the view
    uint32_t type;     // enum gguf_type
    int64_t ne[2];
    size_t row_bytes;
    const void *data;
    // 8 when engine_tensor_interleave rewrote the rows in groups of 8 (then
    // the tensor is a matmul weight only: no row lookups), else 0.
    int interleave;
    // LoRA terms every product with this weight adds (struct engine_lora),
    // or NULL.
    const struct engine_lora *lora;
};

// A LoRA adapter's low-rank term on one matmul weight W [n_in, n_out]: a
// product y = x · Wᵀ also gets y += (x · Aᵀ) · Bᵀ, computed as two small
// products beside W's (W is never rewritten), then the next adapter's term.
// The scale (alpha / rank) is folded into b. engine_matmul and
// engine_matmul_n apply it; the model owns every field.
struct engine_lora {
    struct engine_tensor a;  // [n_in, rank] F32
    struct engine_tensor b;  // [rank, n_out] F32, scaled
    float *t;                // backend scratch, [max rows × rank]
    float *u;                // backend scratch, [max rows × n_out]
    const struct engine_lora *next;
};

// Makes a view of a GGUF tensor (2-D at most; higher dims folded into rows).
// Fails with ERR_UNSUPPORTED for types the engine cannot multiply with.
int engine_tensor_from_gguf(struct engine_tensor *t, const struct gguf_tensor *gt, struct err *e);
// True if the engine can use `type` as a matrix weight (matmul + row lookup).
bool engine_type_supported(uint32_t type);
// True when engine_tensor_interleave would rewrite t: its type has an
// interleaved layout at this machine's ISA (x86: Q4_0, Q5_0, Q8_0; with
// AVX2 but not AVX-512 also Q4_K, Q6_K) and its row
// count is a multiple of 8.
bool engine_tensor_interleavable(const struct engine_tensor *t);
// Rewrites a matmul weight into the kernels' interleaved layout when
// engine_tensor_interleavable says so: the copy (same
// size, *owned, free() it after the last use) replaces t->data. With
// file_mapped (t->data is a read-only mapping of a file) the old pages are
// given back to the page cache; a later touch reads them in again. Returns
// 1 when rewritten, 0 when the tensor stays as it is, ERR_NOMEM when the
// copy cannot be allocated.
int engine_tensor_interleave(struct engine_tensor *t, bool file_mapped, void **owned,
                             struct err *e);

// Expert weights of a mixture-of-experts layer: a 3-D GGUF tensor
// [n_expert, rows, cols] (GGUF ne = {cols, rows, n_expert}), used in place
// from the mapping. Expert e's matrix is rows [e·rows, (e+1)·rows) of `all`.
struct engine_experts {
    struct engine_tensor all;  // ne[1] = n_expert × rows
    int64_t n_expert, rows;
};

// Makes the view of a 3-D expert tensor. Fails with ERR_FORMAT when the
// tensor is not 3-D, ERR_UNSUPPORTED for a type without matmul kernels.
int engine_experts_from_gguf(struct engine_experts *x, const struct gguf_tensor *gt, struct err *e);
// True when engine_tensor_interleave may rewrite x->all (its type has an
// interleaved layout and each expert's rows are a multiple of 16, so every
// view starts on a group of 8 rows): the MoE op then multiplies 8 rows per
// pass, as the dense products over interleaved weights do.
bool engine_experts_interleavable(const struct engine_experts *x);
// The 2-D view of rows [r0, r0 + n_rows) of expert ie's matrix (no copy).
struct engine_tensor engine_expert_view(const struct engine_experts *x, int64_t ie, int64_t r0,
                                        int64_t n_rows);

// ---------------------------------------------------------------------------
// Thread pool: persistent workers, spin-then-sleep dispatch, and a barrier
// that task functions may call between phases.

struct engine_pool;

// Task body run on every thread: ith in [0, nth). The caller thread is
// thread 0.
typedef void (*engine_task_fn)(void *arg, int ith, int nth);

// n_threads <= 0 means the number of physical cores. Returns NULL only if
// a thread could not be started.
struct engine_pool *engine_pool_new(int n_threads, struct err *e);
void engine_pool_free(struct engine_pool *p);
int engine_pool_n_threads(const struct engine_pool *p);
// Runs fn on all threads and returns when every thread has finished.
void engine_pool_run(struct engine_pool *p, engine_task_fn fn, void *arg);
// Barrier across all threads of the current engine_pool_run (call from
// inside a task only, by every thread).
void engine_pool_barrier(struct engine_pool *p);
// Physical cores of this machine (>= 1).
int engine_physical_cores(void);
// The most bytes the CPU attention op keeps of an F16 cache's scores between
// its two passes, for n_slots slots of n_ctx keys (0 for other cache types):
// part of the memory estimate.
uint64_t engine_attention_score_bytes(uint32_t kv_type, int n_threads, int n_head, int n_ctx,
                                      int n_slots);

// ---------------------------------------------------------------------------
// Op parameters.

enum engine_rope_mode {
    ENGINE_ROPE_NORMAL = 0,  // adjacent pairs (2i, 2i+1): llama
    ENGINE_ROPE_NEOX = 2,    // split halves (i, i + n_rot/2): qwen2, gemma, phi3
};

struct engine_rope {
    enum engine_rope_mode mode;
    int n_rot;                  // rotated dims per head (<= head_dim)
    float freq_base;            // theta
    float freq_scale;           // 1 / linear factor
    const float *freq_factors;  // [n_rot/2] or NULL (llama3 rope_freqs)
    // YaRN (ext_factor 0 = off)
    float ext_factor, attn_factor, beta_fast, beta_slow;
    int n_ctx_orig;
    // M-RoPE (Qwen2-VL, Qwen3-VL): rotary pair i takes one of four position
    // streams (time, height, width, extra) by its sector i % sum(sections):
    // contiguous sections, or interleaved (imrope: sector % 3 = 0 t, 1 h,
    // 2 w while below 3 × that section). All zero: one position. With
    // sections, pos holds four streams of n_rows: pos[r + k·n_rows].
    int sections[4];
    bool imrope;
};

// KV cache of one layer: K and V rows of kv_dim per cell.
struct engine_kv_layer {
    void *k, *v;       // backend buffers, n_cells rows each; v == k: the V rows are the K
                       // rows (one buffer: stores and moves touch it once)
    size_t row_bytes;  // bytes per cell row (kv_dim elements of kv_type)
};

// Attention of one layer. The optional fields are off at zero / NULL.
struct engine_attn {
    int n_head, n_head_kv, head_dim;
    float scale;         // usually 1/sqrt(head_dim)
    uint32_t kv_type;    // GGUF_TYPE_F32, F16 or Q8_0
    float softcap;       // > 0: each scaled score s becomes softcap * tanhf(s / softcap)
                         //      before the softmax (gemma2 attn_logit_softcapping)
    int window;          // > 0: sliding window: row r attends only positions
                         //      [max(0, n_visible[r] - window), n_visible[r]) of its slot
                         //      (llama.cpp LLAMA_SWA_TYPE_STANDARD: masked when
                         //      pos_q - pos_k >= window)
    int chunk;           // > 0: chunked attention (llama4): row r attends only positions
                         //      [chunk · floor((n_visible[r] - 1) / chunk), n_visible[r])
    int kv_ring;         // > 0: the layer's cache holds kv_ring cells per slot as a ring:
                         //      position p of the row's slot is in cell cell0[r] + p % kv_ring
                         //      (the model sizes kv_ring >= window + n_batch so a ubatch never
                         //      overwrites a key one of its rows still needs).
                         //      0: linear, position p is in cell cell0[r] + p (as today).
    const float *sinks;  // [n_head] F32 (host, a weight) or NULL: per-head "attention sink"
                         //      logit (gpt-oss): adds exp(sink_h - max) to the softmax
                         //      denominator, with no value row (max taken over scores AND sink).
    // [n_rows] or NULL: with a window, each row's own position, for rows
    // that see past it (image rows attending to each other): the window
    // then ends at win_pos[r], not at n_visible[r] - 1 (positions p with
    // win_pos[r] - p >= window are masked, as llama.cpp's non-causal mask).
    const int32_t *win_pos;
};

// Mixture-of-experts FFN (llama.cpp build_moe_ffn): router logits
// gate_inp·x (+ gate_inp_b) -> probabilities -> the n_expert_used largest
// (ties to the lower expert id) -> weights; each chosen expert computes
// down(act(gate·x + b_g, up·x + b_u)) + b_d, and the result is the weighted
// sum over the chosen experts in rank order (+ the shared expert, if any).
enum engine_moe_gating {
    ENGINE_MOE_SOFTMAX = 0,     // softmax over all experts' logits (qwen3moe, mixtral)
    ENGINE_MOE_SIGMOID,         // sigmoid of each logit (deepseek v3, llama4)
    ENGINE_MOE_SOFTMAX_WEIGHT,  // choose by logit, weights = softmax over the chosen (gpt-oss)
};

enum engine_moe_act {
    ENGINE_MOE_SILU = 0,    // silu(gate) * up, or silu(up) without a gate
    ENGINE_MOE_GELU,        // gelu(gate) * up, or gelu(up) without a gate
    ENGINE_MOE_SWIGLU_OAI,  // gpt-oss: g = min(gate, limit), u = clamp(up, ±limit):
                            // g·sigmoid(alpha·g)·(u + 1)   (ggml_swiglu_oai)
    ENGINE_MOE_RELU_SQR,    // relu(up)^2, no gate (nemotron-h)
};

struct engine_moe {
    int n_expert, n_expert_used;
    enum engine_moe_gating gating;
    bool norm_w;              // divide the chosen weights by their sum (>= 2^-14)
    float w_scale;            // != 0: multiply the weights by it (expert_weights_scale)
    const float *sel_bias;    // [n_expert] or NULL: added to probs for the choice only
    enum engine_moe_act act;  //   (deepseek v3 exp_probs_b)
    // > 1: group-limited choice (DeepSeek-V3): the experts are n_group
    // consecutive groups; only the n_group_used groups with the largest sums
    // of their two best (probs + sel_bias) take part in the choice.
    int n_group, n_group_used;
    float oai_alpha, oai_limit;            // ENGINE_MOE_SWIGLU_OAI (gpt-oss: 1.702, 7.0)
    const struct engine_tensor *gate_inp;  // router [n_embd, n_expert]
    const float *gate_inp_b;               // [n_expert] or NULL
    // The router's own input rows (n_rows × n_embd; gemma4 routes a
    // differently normed x), or NULL: the experts' input.
    const float *router_x;
    // [n_expert] or NULL: each chosen expert's weight times its factor
    // (gemma4 ffn_down_exps.scale; its output scaled, as the FFN is linear in it).
    const float *exp_scale;
    // Experts: gate NULL means no gate; fused_gate_up means `up` holds
    // 2·n_ff rows per expert, gate rows first (ffn_gate_up_exps).
    const struct engine_experts *gate, *up, *down;
    bool fused_gate_up;
    const float *gate_b, *up_b, *down_b;  // [n_expert × n_ff], [.. × n_ff], [.. × n_embd] or NULL
    // Optional shared expert, run for every token with weight 1 (deepseek2,
    // llama4, qwen2moe without its gate): dense [n_embd, n_ff_shexp] etc.
    const struct engine_tensor *sh_gate, *sh_up, *sh_down;
    // Optional gate of the shared expert (qwen3next, qwen35moe): its output
    // is multiplied by σ(sh_gate_inp · x), one scalar per token. Host [n_embd].
    const float *sh_gate_inp;
    // Llama 4: each chosen expert's weight multiplies its input instead of
    // its output, and the outputs are summed unweighted.
    bool w_input;
};

// Routing of one token (the scalar reference the backends follow): fills
// ids[n_expert_used] (rank order) and weights[n_expert_used] from the
// router logits [n_expert]. probs is scratch of n_expert floats.
void engine_moe_route(const struct engine_moe *p, const float *logits, float *probs, int32_t *ids,
                      float *weights);
// The gated activation of one element (ENGINE_MOE_* act with a gate).
float engine_moe_act_gated(const struct engine_moe *p, float gate, float up);

// Recurrent layers (delta nets, Mamba-2, short convolutions). Their ops walk
// a ubatch's rows in order; the rows of one slot are contiguous with
// consecutive positions, slot[r] and pos[r] say whose and where. The state
// buffer holds every slot's state (slot s at s × the op's per-slot size):
// the state after the position before the slot's first row in the ubatch,
// or anything at a row of position 0 (the op starts that row from zeros).
// Afterwards it is the state after the slot's last row. All F32.

// Causal depthwise 1-D convolution: for row r and channel c,
// y[r][c] = b[c] + Σ_{j<K} w[c·K + j] · in_{t-K+1+j}[c] (in_t the input of
// the slot's position t; before position 0, zeros), then SiLU when asked.
// Per-slot state: the last K - 1 inputs, [(K - 1) × channels], oldest first.
struct engine_conv1d {
    int64_t channels;
    int kernel;                  // 1 <= K <= 64
    const float *w;              // host [channels × K] (GGUF ssm_conv1d ne {K, channels})
    const float *b;              // host [channels] or NULL
    bool silu;                   // y = silu(y)
    int64_t x_stride, y_stride;  // floats between rows of x / y
};

// The gated delta rule (Qwen3-Next, Qwen3.5), per row and value head h:
//   S_h = exp(g[h]) · S_h;  S_h += beta[h] · (v_h − S_h k) ⊗ k;  o_h = S_h (scale · q)
// with k and q the key head of h, S_h [dv × dk] (rows: value dims).
// Per-slot state: n_v_heads × dv × dk. Optionally the op forms its inputs
// as Qwen3-Next's layer does: q and k L2-normalised (x / sqrt(Σx² + eps)),
// beta = σ(beta), g = softplus(g + dt_bias) · A.
struct engine_delta_net {
    int n_k_heads, n_v_heads, dk, dv;  // dk <= 1024
    bool k_block;                      // key head of value head h: h / (n_v/n_k) (else h % n_k)
    float scale;                       // q multiplier (1/sqrt(dk))
    int64_t q_stride, k_stride, v_stride, g_stride, beta_stride, o_stride;  // floats between rows
    bool l2_norm;          // normalise q and k heads first
    float l2_eps;          //   with this epsilon under the root
    bool beta_sigmoid;     // beta holds logits: σ(beta) is used
    const float *dt_bias;  // host [n_v_heads] or NULL; with A:
    const float *A;        // host [n_v_heads] or NULL: g holds alpha, the log-decay is
                           //   softplus(alpha + dt_bias) · A (softplus(x) = x above 20)
};

// The Mamba-2 selective scan (Nemotron-H, Granite 4), per row and head h
// (head dim P, group g = h / (n_heads / n_groups), state size N):
//   dA = exp(dt[h] · A[h]);  s_h = dA · s_h + dt[h] · x_h ⊗ B_g;
//   y_h[p] = Σ_n s_h[p][n] · C_g[n] + D[h] · x_h[p]
// dt is the step after softplus, or (dt_softplus) the raw projection:
// then dt[h] = softplus(dt[h] + dt_bias[h]) as ggml_ssm_scan does
// (softplus(v) = v above 20). With z, y_h[p] *= SiLU(z_h[p]) at the end
// (Mamba-2's gate). Per-slot state: n_heads × P × N.
struct engine_ssm_scan {
    int n_heads, head_dim, n_groups, d_state;
    const float *A;                                             // host [n_heads] (negative)
    const float *D;                                             // host [n_heads] or NULL
    int64_t x_stride, B_stride, C_stride, dt_stride, y_stride;  // floats between rows
    bool dt_softplus;
    const float *dt_bias;  // host [n_heads] or NULL (with dt_softplus)
    const float *z;        // [n_rows × z_stride] (backend) or NULL: the gate
    int64_t z_stride;
};

// Matmul job: y (n_rows × w->ne[1]) = x (n_rows × w->ne[0]) · wᵀ (+ bias).
struct engine_matmul_job {
    const struct engine_tensor *w;
    float *y;           // backend buffer
    const float *bias;  // [w->ne[1]] F32 or NULL (host memory: a weight)
};

// ---------------------------------------------------------------------------
// Backend interface. All float* arguments are backend buffers except where
// marked host. Row counts are the number of tokens in the batch.

struct engine_backend;

struct engine_backend_ops {
    const char *name;
    void (*destroy)(struct engine_backend *be);
    void *(*buf_alloc)(struct engine_backend *be, size_t n_bytes);  // NULL on failure
    void (*buf_free)(struct engine_backend *be, void *buf);
    void (*buf_read)(struct engine_backend *be, void *host, const void *buf, size_t n_bytes);
    void (*buf_write)(struct engine_backend *be, void *buf, const void *host, size_t n_bytes);
    // Reserves the per-context scratch (quantized activations, attention
    // rows); called once at load with the largest sizes that will be used.
    int (*reserve)(struct engine_backend *be, int64_t max_rows, int64_t max_row_len, int64_t max_kv,
                   struct err *e);

    void (*get_rows)(struct engine_backend *be, float *y, const struct engine_tensor *w,
                     const int32_t *ids, int64_t n_rows);
    void (*matmul)(struct engine_backend *be, const struct engine_matmul_job *jobs, int n_jobs,
                   const float *x, int64_t n_rows);
    void (*rmsnorm)(struct engine_backend *be, float *y, const float *x, const float *w,
                    int64_t n_rows, int64_t n, float eps);
    void (*layernorm)(struct engine_backend *be, float *y, const float *x, const float *w,
                      const float *b, int64_t n_rows, int64_t n, float eps);
    void (*rope)(struct engine_backend *be, float *x, int64_t n_rows, int n_head, int head_dim,
                 const int32_t *pos, const struct engine_rope *rp);
    void (*kv_store)(struct engine_backend *be, const struct engine_kv_layer *kv, uint32_t kv_type,
                     const int32_t *cells, const float *k, const float *v, int64_t n_rows,
                     int64_t kv_dim);
    // out (n_rows × n_head·head_dim): row r attends the positions
    // [0, n_visible[r]) of its slot, whose cells start at cell0[r] (see
    // struct engine_attn for windows, rings, soft-capping and sinks).
    void (*attention)(struct engine_backend *be, float *out, const float *q, int64_t n_rows,
                      const struct engine_kv_layer *kv, const int32_t *cell0,
                      const int32_t *n_visible, const struct engine_attn *a);
    // Re-rotates the K rows of cells [c0, c0 + n) by a position delta.
    void (*kv_shift)(struct engine_backend *be, const struct engine_kv_layer *kv, uint32_t kv_type,
                     int64_t c0, int64_t n, int32_t delta, int n_head_kv, int head_dim,
                     const struct engine_rope *rp);
    // Moves cells [src, src + n) to [dst, dst + n) (overlap allowed).
    void (*kv_move)(struct engine_backend *be, const struct engine_kv_layer *kv, int64_t dst,
                    int64_t src, int64_t n);
    void (*softmax)(struct engine_backend *be, float *x, int64_t n_rows, int64_t n, float scale);
    // y = cap * tanh(x / cap) (final-logit soft-capping).
    void (*softcap)(struct engine_backend *be, float *y, const float *x, float cap, int64_t n);
    // y = act(gate) * up, act = SiLU (gelu false) or GELU-tanh.
    void (*glu)(struct engine_backend *be, float *y, const float *gate, const float *up, int64_t n,
                bool gelu);
    void (*add)(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n);
    void (*mul)(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n);
    // y = a · σ(b) (output gates).
    void (*sigmoid_mul)(struct engine_backend *be, float *y, const float *a, const float *b,
                        int64_t n);
    void (*scale)(struct engine_backend *be, float *y, const float *x, float s, int64_t n);
    // y = relu(x)^2 (Nemotron-H's MLP).
    void (*relu_sqr)(struct engine_backend *be, float *y, const float *x, int64_t n);
    // Mixture-of-experts FFN: y (n_rows × n_embd) from the normed x
    // (n_rows × n_embd); y does not include the residual.
    void (*moe)(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                const struct engine_moe *p);
    // Reserves the MoE op's scratch for up to max_rows rows of p (at load).
    int (*moe_reserve)(struct engine_backend *be, int64_t max_rows, const struct engine_moe *p,
                       struct err *e);
    // Recurrent layers (struct engine_conv1d, engine_delta_net, engine_ssm_scan).
    void (*conv1d)(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                   const struct engine_conv1d *p, float *state, const int32_t *slot,
                   const int32_t *pos);
    void (*delta_net)(struct engine_backend *be, float *o, const float *q, const float *k,
                      const float *v, const float *g, const float *beta, int64_t n_rows,
                      const struct engine_delta_net *p, float *state, const int32_t *slot,
                      const int32_t *pos);
    void (*ssm_scan)(struct engine_backend *be, float *y, const float *x, const float *dt,
                     const float *B, const float *C, int64_t n_rows,
                     const struct engine_ssm_scan *p, float *state, const int32_t *slot,
                     const int32_t *pos);
    // Gathers rows: y[i] = x[idx[i]] (row length n).
    void (*gather)(struct engine_backend *be, float *y, const float *x, const int32_t *idx,
                   int64_t n_rows, int64_t n);
    // Row ops of Gemma 3n's AltUp (engine_rows_mix, engine_rows_rescale,
    // engine_gauss_topk below).
    void (*rows_mix)(struct engine_backend *be, float *y, const float *base, const float *const *x,
                     int k, const float *c, int64_t c_stride, int64_t n_rows, int64_t n);
    void (*rows_rescale)(struct engine_backend *be, float *y, const float *x, const float *ref,
                         int64_t n_rows, int64_t n);
    void (*gauss_topk)(struct engine_backend *be, float *y, const float *x, float std_mul,
                       int64_t n_rows, int64_t n);
};

struct engine_backend {
    const struct engine_backend_ops *ops;
};

// The CPU backend with its own pool (n_threads <= 0: physical cores).
int engine_cpu_new(struct engine_backend **out, int n_threads, struct err *e);
int engine_cpu_n_threads(const struct engine_backend *be);
void engine_backend_free(struct engine_backend *be);

// Thin wrappers so model code reads as a list of ops.
void *engine_buf_alloc(struct engine_backend *be, size_t n_bytes);
void engine_buf_free(struct engine_backend *be, void *buf);
void engine_buf_read(struct engine_backend *be, void *host, const void *buf, size_t n_bytes);
void engine_buf_write(struct engine_backend *be, void *buf, const void *host, size_t n_bytes);
int engine_reserve(struct engine_backend *be, int64_t max_rows, int64_t max_row_len, int64_t max_kv,
                   struct err *e);
void engine_get_rows(struct engine_backend *be, float *y, const struct engine_tensor *w,
                     const int32_t *ids, int64_t n_rows);
void engine_matmul(struct engine_backend *be, float *y, const struct engine_tensor *w,
                   const float *bias, const float *x, int64_t n_rows);
void engine_matmul_n(struct engine_backend *be, const struct engine_matmul_job *jobs, int n_jobs,
                     const float *x, int64_t n_rows);
void engine_rmsnorm(struct engine_backend *be, float *y, const float *x, const float *w,
                    int64_t n_rows, int64_t n, float eps);
void engine_layernorm(struct engine_backend *be, float *y, const float *x, const float *w,
                      const float *b, int64_t n_rows, int64_t n, float eps);
void engine_rope(struct engine_backend *be, float *x, int64_t n_rows, int n_head, int head_dim,
                 const int32_t *pos, const struct engine_rope *rp);
void engine_kv_store(struct engine_backend *be, const struct engine_kv_layer *kv, uint32_t kv_type,
                     const int32_t *cells, const float *k, const float *v, int64_t n_rows,
                     int64_t kv_dim);
void engine_attention(struct engine_backend *be, float *out, const float *q, int64_t n_rows,
                      const struct engine_kv_layer *kv, const int32_t *cell0,
                      const int32_t *n_visible, const struct engine_attn *a);
void engine_kv_shift(struct engine_backend *be, const struct engine_kv_layer *kv, uint32_t kv_type,
                     int64_t c0, int64_t n, int32_t delta, int n_head_kv, int head_dim,
                     const struct engine_rope *rp);
void engine_kv_move(struct engine_backend *be, const struct engine_kv_layer *kv, int64_t dst,
                    int64_t src, int64_t n);
void engine_softmax(struct engine_backend *be, float *x, int64_t n_rows, int64_t n, float scale);
void engine_glu(struct engine_backend *be, float *y, const float *gate, const float *up, int64_t n,
                bool gelu);
void engine_softcap(struct engine_backend *be, float *y, const float *x, float cap, int64_t n);
void engine_add(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n);
// LoRA terms of an embedding table (w->lora: A [rank, n_vocab] whose rows
// are looked up, B [rank, n_embd] scaled): y (n rows of n_embd) += B A[token]
// for each term, as llama.cpp's build_inp_embd.
void engine_lora_embed(struct engine_backend *be, float *y, const struct engine_tensor *w,
                       const int32_t *tokens, int64_t n);
void engine_mul(struct engine_backend *be, float *y, const float *a, const float *b, int64_t n);
void engine_sigmoid_mul(struct engine_backend *be, float *y, const float *a, const float *b,
                        int64_t n);
void engine_scale(struct engine_backend *be, float *y, const float *x, float s, int64_t n);
void engine_relu_sqr(struct engine_backend *be, float *y, const float *x, int64_t n);
void engine_gather(struct engine_backend *be, float *y, const float *x, const int32_t *idx,
                   int64_t n_rows, int64_t n);
// Per-row linear combination (Gemma 3n's AltUp streams), rows of n floats:
// y[r] = base[r] + sum over s < k of c[r * c_stride + s] * x[s][r]
// (base NULL: 0). y must not be any x[s]; it may be base.
void engine_rows_mix(struct engine_backend *be, float *y, const float *base, const float *const *x,
                     int k, const float *c, int64_t c_stride, int64_t n_rows, int64_t n);
// y[r] = x[r] * |ref[r]| / |x[r]| (L2 norms of rows of n): each row of x
// brought to the magnitude of ref's. y may be x.
void engine_rows_rescale(struct engine_backend *be, float *y, const float *x, const float *ref,
                         int64_t n_rows, int64_t n);
// Gaussian top-k (Gemma 3n's activation sparsity), per row of n:
// y = relu(x - (mean(x) + std_mul * std(x))), std with n - 1. y may be x.
void engine_gauss_topk(struct engine_backend *be, float *y, const float *x, float std_mul,
                       int64_t n_rows, int64_t n);

void engine_moe(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                const struct engine_moe *p);
void engine_conv1d(struct engine_backend *be, float *y, const float *x, int64_t n_rows,
                   const struct engine_conv1d *p, float *state, const int32_t *slot,
                   const int32_t *pos);
void engine_delta_net(struct engine_backend *be, float *o, const float *q, const float *k,
                      const float *v, const float *g, const float *beta, int64_t n_rows,
                      const struct engine_delta_net *p, float *state, const int32_t *slot,
                      const int32_t *pos);
void engine_ssm_scan(struct engine_backend *be, float *y, const float *x, const float *dt,
                     const float *B, const float *C, int64_t n_rows,
                     const struct engine_ssm_scan *p, float *state, const int32_t *slot,
                     const int32_t *pos);
int engine_moe_reserve(struct engine_backend *be, int64_t max_rows, const struct engine_moe *p,
                       struct err *e);

// Bytes of one KV cell row of kv_dim elements for a cache type (0 if the
// type is not a supported cache type or kv_dim does not fit its blocks).
size_t engine_kv_row_bytes(uint32_t kv_type, int64_t kv_dim);

// ---------------------------------------------------------------------------
// Scalar math shared with tests (the reference the ops are checked against).

float engine_silu(float x);
// GELU (tanh form) as the reference's CPU backend computes it: the input
// rounded to f16, the result rounded to f16 (its lookup table), and the
// identity / zero past ±10.
float engine_gelu(float x);
float engine_softcap_f32(float x, float cap);
// Fills cos/sin for the n_rot/2 pairs at position pos.
void engine_rope_cache(const struct engine_rope *rp, float pos, float *cos_out, float *sin_out);
// The same for M-RoPE's four position streams (time, height, width, extra).
void engine_rope_cache_multi(const struct engine_rope *rp, const float pos[4], float *cos_out,
                             float *sin_out);
// True when rp has M-RoPE sections (positions come as four streams).
bool engine_rope_is_multi(const struct engine_rope *rp);
// The attention op in plain double precision, one (row, head) at a time with
// the whole softmax (host memory; the reference the kernel is tested
// against). The query is rounded to the cache's precision first (F16, or
// Q8_0 blocks), and with an F16 cache the normalized probabilities are
// rounded to f16 before the V product, as the kernel and llama.cpp's
// non-flash path do.
void engine_attention_ref(float *out, const float *q, int64_t n_rows,
                          const struct engine_kv_layer *kv, const int32_t *cell0,
                          const int32_t *n_visible, const struct engine_attn *a);
// Tests: the most floats of scores the CPU op keeps per thread and for its
// split key ranges (F16 caches; 0 makes the second pass recompute them).
// Call while no attention runs.
void engine_attention_score_caps(size_t per_thread, size_t split);

// Opening a model file: the architecture's loader (arch.c and the family's
// hooks), the memory estimate, allocation of the KV cache (kvcache.c) and
// activation scratch, freeing, and the accessors of the public API.
#include "model/internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"
#include "tokenizer/tokenizer.h"

#define MODEL_DEFAULT_CTX   4096
#define MODEL_DEFAULT_BATCH 512

// The K/V cache types: option name, enum, gguf type, and whether rows are
// blocks of 32 (the head dimension must then be a multiple of 32). The
// first row is the default.
static const struct {
    const char *name;
    enum model_kv_type kind;
    uint32_t type;
    bool blocks;
} kv_types[] = {
    {"f16", MODEL_KV_F16, GGUF_TYPE_F16, false},
    {"f32", MODEL_KV_F32, GGUF_TYPE_F32, false},
    {"q8_0", MODEL_KV_Q8_0, GGUF_TYPE_Q8_0, true},
    {"q4_0", MODEL_KV_Q4_0, GGUF_TYPE_Q4_0, true},
};
#define N_KV_TYPES (sizeof kv_types / sizeof kv_types[0])

int model_kv_type_parse(const char *s)
{
    if (!s || !*s)
        return MODEL_KV_F16;
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (ascii_ieq(s, kv_types[i].name))
            return kv_types[i].kind;
    return -1;
}

// The table row of an option value (the default's for anything else).
static size_t kv_row_of(enum model_kv_type t)
{
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (kv_types[i].kind == t)
            return i;
    return 0;
}

static uint32_t kv_gguf_type(enum model_kv_type t)
{
    return kv_types[kv_row_of(t)].type;
}

// ---------------------------------------------------------------------------
// Sizes.

static void resolve_options(struct model_options *o, const struct model_hparams *hp, bool encoder)
{
    if (o->n_ctx <= 0)
        o->n_ctx = MODEL_DEFAULT_CTX;
    if (o->n_ctx > hp->n_ctx_train)
        o->n_ctx = hp->n_ctx_train;  // as Ollama: never past the training context
    if (o->n_batch <= 0)
        o->n_batch = MODEL_DEFAULT_BATCH;
    if (encoder && o->n_batch < o->n_ctx)
        o->n_batch = o->n_ctx;  // a whole sequence goes through in one pass
    if (o->n_slots <= 0)
        o->n_slots = 1;
    if (o->n_threads <= 0)
        o->n_threads = engine_physical_cores();
}

static uint32_t choose_kv_type(struct model_options *o, const struct model_hparams *hp)
{
    size_t i = kv_row_of(o->kv_type);
    if (kv_types[i].blocks && (hp->head_dim % 32 != 0 || hp->head_dim_swa % 32 != 0)) {
        log_warn("%s KV cache needs a head dimension divisible by 32 (have %d); using f16",
                 kv_types[i].name, hp->head_dim % 32 != 0 ? hp->head_dim : hp->head_dim_swa);
        o->kv_type = MODEL_KV_F16;
        i = kv_row_of(MODEL_KV_F16);
    }
    return kv_types[i].type;
}

static int n_out_max_for(const struct model_options *o)
{
    return o->n_slots > 8 ? o->n_slots : 8;
}

// The most rows a product with an adapted weight has: a batch, or the
// output rows.
static int64_t lora_rows(const struct model_options *o)
{
    int n_out = n_out_max_for(o);
    return o->n_batch > n_out ? o->n_batch : n_out;
}

struct sizes {
    uint64_t kv, scratch;
};

// The widest matmul input: n_embd, n_ff, the attention width, and the
// inputs of a family's own matrices (layer.mats: Mamba-2's ssm_out reads
// d_inner values).
static int64_t max_matmul_row(const struct model *m)
{
    const struct model_hparams *hp = &m->hp;
    int64_t max_row = hp->n_embd;
    if (hp->n_ff > max_row)
        max_row = hp->n_ff;
    if ((int64_t)hp->n_head * hp->head_dim > max_row)
        max_row = (int64_t)hp->n_head * hp->head_dim;
    for (int il = 0; m->layers && il < hp->n_layer; il++)
        for (int i = 0; i < m->layers[il].n_mats; i++)
            if (m->layers[il].mats[i]->ne[0] > max_row)
                max_row = m->layers[il].mats[i]->ne[0];
    return max_row;
}

static struct sizes compute_sizes(const struct model *m)
{
    struct sizes s;
    const struct model_hparams *hp = &m->hp;
    const struct model_options *o = &m->opts;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim,
             kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t cells = (uint64_t)o->n_ctx * (uint64_t)o->n_slots;
    s.kv = model_kv_bytes(m);
    uint64_t nb = (uint64_t)o->n_batch;
    uint64_t f = sizeof(float);
    uint64_t acts =
        nb * (2 * (uint64_t)hp->n_embd + 2 * q_dim + 2 * kv_dim + 2 * (uint64_t)hp->n_ff) +
        nb * (uint64_t)hp->n_embd;  // x xb q att k v hb hb2 xo
    uint64_t logits = (uint64_t)n_out_max_for(o) * (uint64_t)hp->n_vocab * 2;  // device + host
    uint64_t max_row = (uint64_t)max_matmul_row(m);
    uint64_t wdata = nb * (max_row * 2 + 512);
    uint64_t att = (uint64_t)o->n_threads * ((uint64_t)o->n_ctx + 2048 + 64 + 16) * f +
                   engine_attention_score_bytes(kv_gguf_type(o->kv_type), o->n_threads, hp->n_head,
                                                o->n_ctx, o->n_slots);
    uint64_t ubatch = nb * 4 * 9 + cells * 4;  // ubatch arrays + slot token lists
    acts += nb * (uint64_t)(hp->mix_floats > 0 ? hp->mix_floats : 0);
    // Mixture of experts: every expert stays resident (mapped, counted in
    // the weights); the op's per-batch scratch is counted here.
    uint64_t moe = model_moe_scratch_bytes(m, o->n_batch);
    s.scratch = acts * f + logits * f + wdata + att + ubatch + moe;
    return s;
}

// ---------------------------------------------------------------------------
// Load / free.

static void model_release(struct model *m)
{
    if (!m)
        return;
    if (m->be) {
        model_lora_free(m);
        model_kv_free(m);
        float **bufs[] = {&m->s.x,  &m->s.xb,  &m->s.q,  &m->s.k,      &m->s.v,  &m->s.att,
                          &m->s.hb, &m->s.hb2, &m->s.xo, &m->s.logits, &m->s.mix};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            engine_buf_free(m->be, *bufs[i]);
        engine_backend_free(m->be);
    }
    if (m->slots)
        for (int i = 0; i < m->opts.n_slots; i++) {
            free(m->slots[i].tokens);
            free(m->slots[i].rope3);
        }
    free(m->slots);
    for (size_t i = 0; i < m->n_weight_copies; i++)
        free(m->weight_copies[i]);
    free(m->weight_copies);
    if (m->layers)
        for (int il = 0; il < m->hp.n_layer; il++) {
            free(m->layers[il].ext);
            free(m->layers[il].mixer);
        }
    free(m->layers);
    free(m->logits);
    free(m->embd);
    free(m->out_index);
    free(m->ub_buf);
    free(m->type_ids);
    free(m->slot_next);
    free(m->slot_last);
    tokenizer_free(m->tok);
    gguf_close(m->g);
    free(m);
}

void model_free(struct model *m)
{
    model_release(m);
}

// Encoders read everything in their load hook; decoders read the common
// hyper-parameters and tensors as their table row says, with the family's
// hooks between and after.
static int arch_load(struct model *m, struct err *e)
{
    const struct model_arch *a = m->arch;
    if (a->encoder)
        return a->load(m, e);
    int rc;
    if ((rc = model_read_hparams(m, e)) < 0 || (a->load && (rc = a->load(m, e)) < 0))
        return rc;
    a = m->arch;  // the load hook may have chosen a variant row (llama with experts)
    if ((rc = model_bind_decoder(m, e)) < 0 || (a->bind && (rc = a->bind(m, e)) < 0))
        return rc;
    return 0;
}

// Phi-3 LongRoPE: the long factors when the context per sequence is past
// the original one, else the short ones (llama.cpp's get_rope_factors).
static void choose_rope_factors(struct model *m)
{
    if (!m->rope_long)
        return;
    const float *ff = m->opts.n_ctx > m->hp.rope.n_ctx_orig ? m->rope_long : m->rope_short;
    m->hp.rope.freq_factors = ff;
    m->hp.rope_swa.freq_factors = ff;
}

// Opens the file and runs the architecture loader (no allocation of cache
// or scratch): the common part of estimate and load.
static int model_open(struct model **out, const char *path, const struct model_options *opts,
                      struct err *e)
{
    struct model *m = xcalloc(1, sizeof *m);
    int rc = gguf_open(&m->g, path, e);
    if (rc < 0) {
        free(m);
        return rc;
    }
    struct str an = gguf_architecture(m->g);
    m->arch = model_arch_find(an);
    if (!m->arch) {
        rc = err_set(e, ERR_UNSUPPORTED, "unsupported model architecture \"%.*s\"", (int)an.len,
                     an.ptr);
        model_release(m);
        return rc;
    }
    rc = arch_load(m, e);
    if (rc < 0) {
        err_prefix(e, "%s", m->arch->name);
        model_release(m);
        return rc;
    }
    m->opts = opts ? *opts : (struct model_options){0};
    resolve_options(&m->opts, &m->hp, m->arch->encoder);
    // An encoder's cache is scratch for one pass: F32, as the reference
    // computes attention of encoders in F32.
    m->kv_type = m->arch->encoder ? GGUF_TYPE_F32 : choose_kv_type(&m->opts, &m->hp);
    if (m->arch->encoder)
        m->opts.embeddings = true;
    choose_rope_factors(m);
    model_kv_plan(m);
    *out = m;
    return 0;
}

// Whether model_load rewrites the matmul weights of this model into the
// kernels' interleaved layouts (decoders, unless mapped weights are asked
// for).
static bool interleaves_weights(const struct model *m)
{
    return !m->arch->encoder && !m->opts.mapped_weights_only && m->layers;
}

int model_estimate(const char *path, const struct model_options *opts, struct model_memory *out,
                   struct err *e)
{
    struct model *m;
    int rc = model_open(&m, path, opts, e);
    if (rc < 0)
        return rc;
    struct sizes s = compute_sizes(m);
    out->weights_bytes = gguf_file_size(m->g);
    // A tied output that model_load interleaves is a copy of the embedding
    // table, made first: while it is written the whole table is mapped as
    // well, then the mapped pages are given back (the row lookups touch a
    // few). Afterwards every tensor is resident once, mapped or copied.
    if (interleaves_weights(m) && m->output.data && m->output.data == m->tok_embd.data &&
        engine_tensor_interleavable(&m->output)) {
        size_t twice = 2 * m->output.row_bytes * (size_t)m->output.ne[1];
        if (twice > out->weights_bytes)
            out->weights_bytes = twice;
    }
    out->experts_bytes = model_moe_experts_bytes(m);
    out->kv_bytes = s.kv;
    out->scratch_bytes = s.scratch;
    uint64_t lora_w, lora_s;
    if ((rc = model_lora_estimate(m, lora_rows(&m->opts), &lora_w, &lora_s, e)) < 0) {
        model_release(m);
        return rc;
    }
    out->lora_bytes = lora_w + lora_s;
    out->weights_bytes += lora_w;
    out->scratch_bytes += lora_s;
    out->total_bytes = out->weights_bytes + out->kv_bytes + out->scratch_bytes;
    model_release(m);
    return 0;
}

static float *alloc_act(struct model *m, size_t n_floats, int *failed)
{
    float *p = engine_buf_alloc(m->be, n_floats * sizeof(float));
    if (!p)
        *failed = 1;
    return p;
}

// Interleaves the matmul weights of decoder models whose type has an
// interleaved layout (the kernels then multiply 8 rows per vector lane
// set). An untied embedding table stays as mapped (only row lookups read
// it); a tied one is the output's copy, which the lookups then read.
struct interleave_job {
    struct engine_tensor **ts;
    void **copies;
    void **merged;  // the LoRA-merged copy ts[i] pointed at (model_lora_holds), or NULL
    int *rcs;
    struct err *errs;
    size_t n;
    _Atomic size_t next;
};

static void interleave_task(void *arg, int ith, int nth)
{
    (void)ith, (void)nth;
    struct interleave_job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n)
            return;
        if (j->ts[i]->data)
            j->rcs[i] =
                engine_tensor_interleave(j->ts[i], !j->merged[i], &j->copies[i], &j->errs[i]);
    }
}

static int interleave_weights(struct model *m, struct err *e)
{
    if (!interleaves_weights(m))
        return 0;
    size_t n = (size_t)m->hp.n_layer * (7 + MODEL_LAYER_MATS + 3) + 1, k = 0;
    struct engine_tensor **ts = xcalloc(n, sizeof *ts);
    // The output first: when it is tied, its copy and the whole mapped
    // table are resident together for a moment, best before the layers'
    // copies exist (model_estimate counts on this order).
    ts[k++] = &m->output;
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        struct engine_tensor *lt[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                      &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lt / sizeof lt[0]; i++)
            ts[k++] = lt[i];
        for (int i = 0; i < L->n_mats && i < MODEL_LAYER_MATS; i++)
            ts[k++] = L->mats[i];
        if (L->ext)  // the experts of a MoE layer (moe.c owns ext)
            k += model_moe_interleavable(m, il, ts + k);
    }
    const bool tied = m->output.data && m->output.data == m->tok_embd.data;
    // The model's threads rewrite the tensors in parallel (the first
    // touch of the copies' pages is most of the cost).
    struct interleave_job job = {.ts = ts,
                                 .copies = xcalloc(k, sizeof(void *)),
                                 .merged = xcalloc(k, sizeof(void *)),
                                 .rcs = xcalloc(k, sizeof(int)),
                                 .errs = xcalloc(k, sizeof(struct err)),
                                 .n = k};
    for (size_t i = 0; i < k; i++)
        if (ts[i]->data && model_lora_holds(m, ts[i]->data))
            job.merged[i] = (void *)ts[i]->data;
    // The output alone first, so the layers' copies do not pile up beside
    // a tied output's copy and its mapped table; then the layers in parallel.
    if (ts[0]->data)
        job.rcs[0] = engine_tensor_interleave(ts[0], !job.merged[0], &job.copies[0], &job.errs[0]);
    atomic_init(&job.next, 1);
    int nt = m->opts.n_threads > 1 ? m->opts.n_threads : 1;
    if ((size_t)nt > k)
        nt = (int)k;
    struct err pe = {0};
    struct engine_pool *pool = nt > 1 ? engine_pool_new(nt, &pe) : NULL;
    if (pool) {
        engine_pool_run(pool, interleave_task, &job);
        engine_pool_free(pool);
    } else {
        interleave_task(&job, 0, 1);  // one thread (or none could start)
    }
    m->weight_copies = xcalloc(k, sizeof *m->weight_copies);
    int rc = 0;
    for (size_t i = 0; i < k; i++) {
        if (job.copies[i])
            m->weight_copies[m->n_weight_copies++] = job.copies[i];
        if (job.copies[i] && job.merged[i])  // a merged adapter's copy, rewritten
            model_lora_release_copy(m, job.merged[i]);
        if (job.rcs[i] < 0 && rc >= 0) {
            rc = job.rcs[i];
            *e = job.errs[i];
        }
    }
    // A tied output's copy serves the row lookups too: the mapped table
    // was given back, and touching it again would map it back (page by
    // page with the fault-around) beside the copy.
    if (tied && m->output.interleave) {
        m->tok_embd.data = m->output.data;
        m->tok_embd.interleave = m->output.interleave;
    }
    free(job.copies);
    free(job.merged);
    free(job.rcs);
    free(job.errs);
    free(ts);
    return rc < 0 ? rc : 0;
}

int model_load(struct model **out, const char *path, const struct model_options *opts,
               struct err *e)
{
    struct model *m;
    int rc = model_open(&m, path, opts, e);
    if (rc < 0)
        return rc;
    const struct model_hparams *hp = &m->hp;
    const struct model_options *o = &m->opts;
    // The adapters first: one that does not fit fails before the slow steps.
    if ((rc = engine_cpu_new(&m->be, o->n_threads, e)) < 0 ||
        (rc = model_lora_attach(m, lora_rows(o), e)) < 0)
        goto fail;
    rc = tokenizer_load(&m->tok, m->g, e);
    if (rc < 0) {
        err_prefix(e, "tokenizer");
        goto fail;
    }
    // Ollama's files list a few control tokens past the embedding's rows
    // (gemma3's <start_of_image>...): as llama.cpp's compat layer drops
    // them, their text stays text.
    if (tokenizer_n_vocab(m->tok) > hp->n_vocab)
        tokenizer_set_id_limit(m->tok, hp->n_vocab);
    if ((rc = interleave_weights(m, e)) < 0)
        goto fail;

    if ((rc = model_kv_alloc(m, e)) < 0)
        goto fail;

    // Activations for n_batch rows, allocated once.
    int failed = 0;
    size_t nb = (size_t)o->n_batch;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    m->s.n_out_max = n_out_max_for(o);
    m->s.x = alloc_act(m, nb * hp->n_embd, &failed);
    m->s.xb = alloc_act(m, nb * hp->n_embd, &failed);
    m->s.q = alloc_act(m, nb * q_dim, &failed);
    m->s.k = alloc_act(m, nb * (size_t)kv_dim, &failed);
    m->s.v = alloc_act(m, nb * (size_t)kv_dim, &failed);
    m->s.att = alloc_act(m, nb * q_dim, &failed);
    m->s.hb = alloc_act(m, nb * hp->n_ff, &failed);
    m->s.hb2 = alloc_act(m, nb * hp->n_ff, &failed);
    m->s.xo = alloc_act(m, nb * hp->n_embd, &failed);
    m->s.logits = alloc_act(m, (size_t)m->s.n_out_max * hp->n_vocab, &failed);
    if (hp->mix_floats > 0)
        m->s.mix = alloc_act(m, nb * (size_t)hp->mix_floats, &failed);
    if (failed) {
        rc = err_set(e, ERR_NOMEM, "allocate activation buffers for a batch of %d", o->n_batch);
        goto fail;
    }
    rc = engine_reserve(m->be, o->n_batch, max_matmul_row(m), o->n_ctx, e);
    if (rc < 0)
        goto fail;

    m->ub_buf = xcalloc(nb * 14, sizeof(int32_t));
    m->slots = xcalloc((size_t)o->n_slots, sizeof *m->slots);
    m->slot_next = xcalloc((size_t)o->n_slots, sizeof(int));
    m->slot_last = xcalloc((size_t)o->n_slots, sizeof(int));
    for (int i = 0; i < o->n_slots; i++) {
        m->slots[i].tokens = xcalloc((size_t)o->n_ctx, sizeof(int32_t));
        if (engine_rope_is_multi(&hp->rope))
            m->slots[i].rope3 = xcalloc((size_t)o->n_ctx * 3, sizeof(int32_t));
    }
    m->out_cap = m->s.n_out_max;
    m->logits = malloc((size_t)m->out_cap * hp->n_vocab * sizeof(float));
    if (o->embeddings)
        m->embd = malloc((size_t)m->out_cap * hp->n_embd * sizeof(float));
    if (!m->logits || (o->embeddings && !m->embd)) {
        rc = err_set(e, ERR_NOMEM, "allocate logits");
        goto fail;
    }
    if (m->arch->prepare && (rc = m->arch->prepare(m, e)) < 0)
        goto fail;
    *out = m;
    return 0;
fail:
    model_release(m);
    return rc;
}

// ---------------------------------------------------------------------------
// Accessors.

int model_n_vocab(const struct model *m)
{
    return m->hp.n_vocab;
}
int model_n_embd(const struct model *m)
{
    return m->hp.n_embd;
}
int model_n_embd_inp(const struct model *m)
{
    return m->hp.n_embd * (1 + m->hp.n_deepstack);
}
int model_n_ctx(const struct model *m)
{
    return m->opts.n_ctx;
}
int model_n_slots(const struct model *m)
{
    return m->opts.n_slots;
}
int model_n_batch(const struct model *m)
{
    return m->opts.n_batch;
}
const char *model_kv_type_name(const struct model *m)
{
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (kv_types[i].type == m->kv_type)
            return kv_types[i].name;
    return kv_types[0].name;
}

int model_n_threads(const struct model *m)
{
    return engine_cpu_n_threads(m->be);
}
const char *model_arch_name(const struct model *m)
{
    return m->arch->name;
}
const struct gguf *model_gguf(const struct model *m)
{
    return m->g;
}

bool model_is_encoder(const struct model *m)
{
    return m->arch->encoder;
}

void model_pool_project(const struct model *m, float *v)
{
    if (m->arch->pool_project)
        m->arch->pool_project(m, v);
}

enum model_pooling model_pooling(const struct model *m)
{
    uint32_t t;
    if (!gguf_get_arch_u32(m->g, "pooling_type", &t))
        return MODEL_POOLING_MEAN;
    return t <= MODEL_POOLING_RANK ? (enum model_pooling)t : MODEL_POOLING_NONE;
}

const float *model_logits(const struct model *m, int i)
{
    if (m->arch->encoder || i < 0 || i >= m->n_batch_entries || !m->out_index ||
        m->out_index[i] < 0)
        return NULL;
    return m->logits + (size_t)m->out_index[i] * m->hp.n_vocab;
}

const float *model_embeddings(const struct model *m, int i)
{
    if (!m->embd || i < 0 || i >= m->n_batch_entries || m->out_index[i] < 0)
        return NULL;
    return m->embd + (size_t)m->out_index[i] * m->hp.n_embd;
}

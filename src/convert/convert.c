// convert_folder: config.json picks the architecture row (arch.c), the
// tokenizer files give the vocabulary (vocab.c), the .safetensors files are
// mapped and parsed (safetensors.c), and the GGUF is written in one pass:
// keys, tensor infos, then each tensor converted a block of rows at a time.
//
// Output types follow Ollama's converter: 1-D tensors and biases F32, other
// tensors F16, or BF16 when the source is BF16.
#include "convert/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/quant/quant.h"

#define SMALL_FILE_MAX (256u << 20)  // tokenizer.json of large vocabularies is ~30 MB
#define CHUNK_ELEMS    (1u << 16)

struct mapped {
    void *p;
    size_t n;
};

// One output tensor: where it comes from and how it is written.
struct plan {
    char name[GGUF_MAX_NAME_LEN + 1];
    const struct st_tensor **srcs;  // one, or the experts stacked along ne[2]
    size_t n_srcs;
    const struct conv_extra_tensor *extra;
    uint32_t type;  // GGUF type written
    uint32_t n_dims;
    int64_t ne[4];
    uint32_t permute_heads;  // > 0: Q/K rows reordered for llama-style RoPE
};

struct job {
    struct conv c;
    struct convert_vocab vocab;
    struct mapped *maps;
    size_t n_maps;
    struct st_set set;
    struct plan *plan;
    size_t n_plan;
    uint64_t total, done;
    convert_progress_fn fn;
    void *fn_ctx;
};

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
                                        "chat_template.jinja",   "adapter_config.json"};
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(base, exact[i]) == 0)
            return true;
    return cstr_ends_with(base, ".safetensors") ||
           strcmp(base, "model.safetensors.index.json") == 0;
}

static const struct convert_file *find_file(const struct convert_file *files, size_t n,
                                            const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(files[i].name, name) == 0)
            return &files[i];
    return NULL;
}

// A small file of the folder (NULL data when absent).
static int read_small(const struct convert_file *files, size_t n, const char *name, struct buf *out,
                      struct err *e)
{
    buf_init(out, SMALL_FILE_MAX);
    const struct convert_file *f = find_file(files, n, name);
    if (!f)
        return 0;
    int rc = fs_read_all(f->path, SMALL_FILE_MAX, out, e);
    if (rc == 0 && !out->data)
        rc = buf_append(out, "", 0);
    if (rc < 0)
        err_prefix(e, "%s", name);
    return rc;
}

static int map_file(const struct convert_file *f, struct mapped *m, struct err *e)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int rc = err_set(e, ERR_IO, "%s: %s", f->name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    m->n = (size_t)st.st_size;
    m->p = m->n ? mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (m->n && m->p == MAP_FAILED) {
        m->p = NULL;
        return err_set(e, ERR_IO, "%s: mmap: %s", f->name, strerror(errno));
    }
    if (m->p)
        madvise(m->p, m->n, MADV_SEQUENTIAL);
    return 0;
}

// Maps and parses every .safetensors file, in name order.
static int load_tensors(struct job *j, const struct convert_file *files, size_t n, struct err *e)
{
    j->maps = xcalloc(n ? n : 1, sizeof(*j->maps));
    for (size_t i = 0; i < n; i++) {
        if (!cstr_ends_with(files[i].name, ".safetensors"))
            continue;
        struct mapped *m = &j->maps[j->n_maps++];
        int rc = map_file(&files[i], m, e);
        if (rc == 0)
            rc = st_parse(&j->set, m->p, m->n, files[i].name, e);
        if (rc < 0)
            return rc;
    }
    if (j->set.n == 0)
        return err_set(e, ERR_INVALID, "no safetensors files with tensors found");
    return 0;
}

// HF name → GGUF name by the architecture's substring renames.
static void rename_tensor(const struct conv_rename *renames, const char *in, char *out, size_t n)
{
    size_t k = 0;
    while (*in && k + 1 < n) {
        const struct conv_rename *r = renames;
        for (; r->from; r++)
            if (strncmp(in, r->from, strlen(r->from)) == 0)
                break;
        if (r->from) {
            k += (size_t)snprintf(out + k, n - k, "%s", r->to);
            in += strlen(r->from);
        } else {
            out[k++] = *in++;
        }
    }
    out[k < n ? k : n - 1] = '\0';
}

static bool known_prefix(const char *name)
{
    static const char *const prefixes[] = {"blk.", "token_embd.", "output_norm.", "output.",
                                           "rope_freqs."};
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

static int plan_tensor(struct job *j, const struct st_tensor *t, struct plan *p, struct err *e)
{
    memset(p, 0, sizeof(*p));
    char name[256];
    rename_tensor(j->c.a->renames, t->name, name, sizeof name);
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
static int plan_experts(struct plan *p, const struct expert_ref *g, size_t n, struct err *e)
{
    const struct st_tensor *t0 = g[0].t;
    for (size_t i = 0; i < n; i++) {
        const struct st_tensor *t = g[i].t;
        if (g[i].expert != (int)i)
            return err_set(e, ERR_FORMAT, "%s: expert %zu is missing", g[0].out, i);
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

static int plan_expert_groups(struct job *j, struct expert_ref *refs, size_t n, struct err *e)
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

// Sort key: the block number (-1 outside blocks, output last), then the name.
static long block_of(const char *name)
{
    if (cstr_starts_with(name, "blk."))
        return strtol(name + 4, NULL, 10);
    return cstr_starts_with(name, "output") ? 1L << 30 : -1;
}

static int cmp_plan(const void *a, const void *b)
{
    const struct plan *x = a, *y = b;
    long bx = block_of(x->name), by = block_of(y->name);
    return bx != by ? (bx < by ? -1 : 1) : strcmp(x->name, y->name);
}

static int make_plan(struct job *j, struct err *e)
{
    j->plan = xcalloc(j->set.n + j->c.n_extra + 1, sizeof(*j->plan));
    for (size_t i = 0; i < j->c.n_extra; i++) {
        struct plan *p = &j->plan[j->n_plan++];
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
        if (cstr_ends_with(t->name, "rotary_emb.inv_freq"))
            continue;  // recomputed from rope_theta by the engine
        j->total += t->n_bytes;
        struct expert_ref *r = &refs[n_refs];
        if (conv_expert_name(t->name, r->out, sizeof r->out, &r->expert)) {
            r->t = t;
            n_refs++;
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
    qsort(j->plan + first, j->n_plan - first, sizeof(*j->plan), cmp_plan);
    for (size_t i = 1; i < j->n_plan; i++)
        if (strcmp(j->plan[i].name, j->plan[i - 1].name) == 0)
            return err_set(e, ERR_FORMAT, "two tensors map to %s", j->plan[i].name);
    return 0;
}

// ---------------------------------------------------------------------------
// Writing.

static void load_floats(const struct st_tensor *t, uint64_t first, float *out, size_t n)
{
    const uint8_t *p = t->data + first * st_dtype_size(t->dtype);
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == ST_F32) {
            memcpy(&out[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == ST_F16 ? quant_f16_to_f32(h) : quant_bf16_to_f32(h);
        }
    }
}

static size_t store_floats(const float *in, size_t n, uint32_t type, void *out)
{
    if (type == GGUF_TYPE_F32) {
        memcpy(out, in, n * 4);
        return n * 4;
    }
    uint16_t *h = out;
    for (size_t i = 0; i < n; i++)
        h[i] = type == GGUF_TYPE_F16 ? quant_f32_to_f16(in[i]) : quant_f32_to_bf16(in[i]);
    return n * 2;
}

// The source row that lands at GGUF row r of a permuted Q/K matrix: HF
// keeps each head's rotary halves apart (row h*D + s*D/2 + i), the GGUF
// interleaves them (row h*D + 2i + s).
static int64_t permuted_src_row(int64_t r, int64_t rows, uint32_t heads)
{
    int64_t d = rows / heads, h = r / d, k = r % d;
    return h * d + (k % 2) * (d / 2) + k / 2;
}

// Writes n elements of src starting at element first.
static int write_span(struct gguf_writer *w, const struct plan *p, const struct st_tensor *src,
                      uint64_t first, size_t n, float *f, void *o, struct err *e)
{
    if (src->dtype == ST_F32 && p->type == GGUF_TYPE_F32)
        return gguf_writer_write_data(w, src->data + first * 4, n * 4, e);
    if ((src->dtype == ST_F16 && p->type == GGUF_TYPE_F16) ||
        (src->dtype == ST_BF16 && p->type == GGUF_TYPE_BF16))
        return gguf_writer_write_data(w, src->data + first * 2, n * 2, e);
    load_floats(src, first, f, n);
    return gguf_writer_write_data(w, o, store_floats(f, n, p->type, o), e);
}

static void release_pages(const struct st_tensor *t)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)t->data, b = a + t->n_bytes;
    a = (a + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    b &= ~((uintptr_t)page - 1);
    if (b > a)  // drop the pages just read: RSS stays at one tensor
        madvise((void *)a, b - a, MADV_DONTNEED);
}

// One source tensor, in GGUF row order.
static int write_source(struct gguf_writer *w, const struct plan *p, const struct st_tensor *src,
                        float *f, void *o, struct err *e)
{
    int rc = 0;
    uint64_t count = src->n_bytes / st_dtype_size(src->dtype);
    if (p->permute_heads) {
        int64_t rows = p->ne[1], cols = p->ne[0];
        for (int64_t r = 0; rc == 0 && r < rows; r++) {
            int64_t s = permuted_src_row(r, rows, p->permute_heads);
            for (int64_t c0 = 0; rc == 0 && c0 < cols; c0 += CHUNK_ELEMS) {
                size_t n = (size_t)(cols - c0 < CHUNK_ELEMS ? cols - c0 : CHUNK_ELEMS);
                rc = write_span(w, p, src, (uint64_t)(s * cols + c0), n, f, o, e);
            }
        }
        return rc;
    }
    for (uint64_t at = 0; rc == 0 && at < count; at += CHUNK_ELEMS) {
        size_t n = (size_t)(count - at < CHUNK_ELEMS ? count - at : CHUNK_ELEMS);
        rc = write_span(w, p, src, at, n, f, o, e);
    }
    return rc;
}

static int write_tensor(struct job *j, struct gguf_writer *w, const struct plan *p, float *f,
                        void *o, struct err *e)
{
    if (p->extra) {
        size_t bytes = store_floats(p->extra->data, (size_t)p->extra->n, GGUF_TYPE_F32, o);
        return gguf_writer_write_data(w, o, bytes, e);
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->n_srcs; i++) {
        rc = write_source(w, p, p->srcs[i], f, o, e);
        release_pages(p->srcs[i]);
        j->done += p->srcs[i]->n_bytes;
    }
    if (j->fn)
        j->fn(j->fn_ctx, j->done, j->total);
    return rc;
}

static void write_vocab(struct gguf_writer *w, const struct convert_vocab *v)
{
    static const char *const keys[CV_SPECIAL_N] = {
        "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
        "tokenizer.ggml.mask_token_id"};
    gguf_writer_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_kv_str(w, "tokenizer.ggml.pre", v->pre);
    struct str *items = xcalloc(v->n + v->n_merges + 1, sizeof(*items));
    for (size_t i = 0; i < v->n; i++)
        items[i] = str_from(v->tokens[i]);
    gguf_writer_kv_arr_str(w, "tokenizer.ggml.tokens", items, v->n);
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

static int write_keys(struct job *j, struct gguf_writer *w, struct err *e)
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
    write_vocab(w, &j->vocab);
    return a->extra_kv ? a->extra_kv(&j->c, w, e) : 0;
}

static int write_gguf(struct job *j, const char *out_path, struct convert_info *info, struct err *e)
{
    struct gguf_writer *w;
    int rc = gguf_writer_open(&w, out_path, e);
    if (rc < 0)
        return rc;
    rc = write_keys(j, w, e);  // also makes the computed tensors (rope factors)
    if (rc == 0)
        rc = make_plan(j, e);
    for (size_t i = 0; rc == 0 && i < j->n_plan; i++)
        rc = gguf_writer_add_tensor(w, j->plan[i].name, j->plan[i].type, j->plan[i].n_dims,
                                    j->plan[i].ne);
    if (rc == 0)
        rc = gguf_writer_write_header(w, e);
    float *f = xmalloc(CHUNK_ELEMS * sizeof(float));
    void *o = xmalloc(CHUNK_ELEMS * sizeof(float));
    for (size_t i = 0; rc == 0 && i < j->n_plan; i++) {
        rc = write_tensor(j, w, &j->plan[i], f, o, e);
        const int64_t *ne = j->plan[i].ne;
        if (rc == 0 && info)
            info->n_bytes += (uint64_t)(ne[0] * ne[1] * ne[2] * ne[3]) *
                             (j->plan[i].type == GGUF_TYPE_F32 ? 4u : 2u);
    }
    free(f);
    free(o);
    if (rc < 0) {
        gguf_writer_abort(w);
        return rc;
    }
    if (info)
        info->n_tensors = j->n_plan;
    return gguf_writer_close(w, e);
}

// ---------------------------------------------------------------------------
// The whole conversion.

static int read_config(struct job *j, const struct convert_file *files, size_t n, struct err *e)
{
    struct buf b;
    int rc = read_small(files, n, "config.json", &b, e);
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
    return 0;
}

static int read_vocab(struct job *j, const struct convert_file *files, size_t n, struct err *e)
{
    struct buf tok, tcfg, cfg, jinja;
    int rc = read_small(files, n, "tokenizer.json", &tok, e);
    if (rc == 0)
        rc = read_small(files, n, "tokenizer_config.json", &tcfg, e);
    else
        buf_init(&tcfg, 0);
    if (rc == 0)
        rc = read_small(files, n, "config.json", &cfg, e);
    else
        buf_init(&cfg, 0);
    if (rc == 0)
        rc = read_small(files, n, "chat_template.jinja", &jinja, e);
    else
        buf_init(&jinja, 0);
    if (rc == 0)
        rc = convert_vocab_parse(&j->vocab, tok.data, tok.len, tcfg.data, tcfg.len, cfg.data,
                                 cfg.len, e);
    if (rc == 0 && jinja.data && !j->vocab.chat_template)
        j->vocab.chat_template = xstrndup(jinja.data, jinja.len);
    buf_deinit(&tok);
    buf_deinit(&tcfg);
    buf_deinit(&cfg);
    buf_deinit(&jinja);
    return rc;
}

static void job_free(struct job *j)
{
    for (size_t i = 0; i < j->n_maps; i++)
        if (j->maps[i].p)
            munmap(j->maps[i].p, j->maps[i].n);
    free(j->maps);
    st_set_free(&j->set);
    for (size_t i = 0; i < j->n_plan; i++)
        free(j->plan[i].srcs);
    free(j->plan);
    convert_vocab_free(&j->vocab);
    for (size_t i = 0; i < j->c.n_extra; i++)
        free(j->c.extra[i].data);
    json_decref(j->c.config);
}

int convert_folder(const struct convert_file *files, size_t n, const char *out_path,
                   convert_progress_fn fn, void *ctx, struct convert_info *info, struct err *e)
{
    struct job j = {.fn = fn, .fn_ctx = ctx};
    if (info)
        memset(info, 0, sizeof(*info));
    int rc = read_config(&j, files, n, e);
    if (rc == 0)
        rc = read_vocab(&j, files, n, e);
    if (rc == 0)
        rc = load_tensors(&j, files, n, e);
    if (rc == 0 && info) {
        snprintf(info->hf_arch, sizeof info->hf_arch, "%s", j.c.a->hf_name);
        snprintf(info->arch, sizeof info->arch, "%s", j.c.a->arch);
    }
    if (rc == 0)
        rc = write_gguf(&j, out_path, info, e);
    job_free(&j);
    return rc;
}

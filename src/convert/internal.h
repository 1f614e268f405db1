// convert internals shared between the module's files.
#pragma once

#include <inttypes.h>

#include "convert/convert.h"
#include "gguf/gguf.h"
#include "json/json.h"

uint32_t st_dtype_size(enum st_dtype d);
const char *st_dtype_name(enum st_dtype d);
// F32, F16 or BF16: a dtype the converter turns into GGUF floats.
bool st_dtype_float(enum st_dtype d);
// The pieces of a SentencePiece ModelProto into v (tokens, scores, types).
int convert_spm_parse(struct convert_vocab *v, const void *data, size_t n, struct err *e);

// One row of a GGUF key table: config.json field → "<arch>.<suffix>".
enum hp_kind { HP_U32, HP_F32 };
struct hp_row {
    const char *json;  // config.json field
    const char *suffix;
    enum hp_kind kind;
};

struct conv;
struct conv_job;
struct conv_plan;

// A tensor-name substring rename, HF → GGUF.
struct conv_rename {
    const char *from, *to;
};

// An architecture the converter knows: one row per Hugging Face class.
struct conv_arch {
    const char *hf_name;                // config.json architectures[0]
    const char *arch;                   // general.architecture
    const struct conv_rename *renames;  // ends with {NULL, NULL}
    const struct hp_row *hparams;       // written when config.json has the field
    size_t n_hparams;
    bool permute_qk;  // llama-style RoPE: Q/K rows interleaved as the GGUF expects
    // Added to every "*norm.weight" (Gemma stores RMSNorm weights as w - 1).
    float norm_offset;
    // Extra keys and tensors (rope factors, head_dim rules); may be NULL.
    int (*extra_kv)(struct conv *c, struct gguf_writer *w, struct err *e);
    // Prefixes of renamed tensor names that are dropped (BERT's pooler and
    // masked-LM head); NULL-terminated, may be NULL.
    const char *const *skip;
    // Tensors planned by the family itself (gpt-oss experts): 1 when t was
    // taken (plans appended to j->plan), 0 when not, < 0 on error; may be NULL.
    int (*plan)(struct conv_job *j, const struct st_tensor *t, struct err *e);
};

const struct conv_arch *conv_arch_find(const char *hf_name);
// The first row writing general.architecture arch (adapters know only that).
const struct conv_arch *conv_arch_by_gguf(const char *arch);
// "LlamaForCausalLM, Qwen2ForCausalLM, ..." for the unsupported-architecture error.
void conv_arch_list(char *out, size_t n);

// An expert's tensor ("model.layers.3.mlp.experts.7.gate_proj.weight"):
// true with the stacked GGUF name ("blk.3.ffn_gate_exps.weight") and the
// expert index.
bool conv_expert_name(const char *hf, char *out, size_t n, int *expert);

// A tensor made by the converter rather than read (rope_freqs.weight).
struct conv_extra_tensor {
    char name[64];
    float *data;
    int64_t n;
};

struct conv {
    const struct conv_arch *a;
    json_t *config;  // config.json
    struct conv_extra_tensor extra[2];
    size_t n_extra;
    int32_t pooling;  // sentence-transformers pooling_type, -1 when the folder says none
};

// config.json getters: false when the field is absent or not a number.
bool conv_cfg_u32(const struct conv *c, const char *key, uint32_t *out);
bool conv_cfg_f32(const struct conv *c, const char *key, float *out);

// A mapped .safetensors file.
struct conv_mapped {
    void *p;
    size_t n;
};

// One output tensor: where it comes from and how it is written.
struct conv_plan {
    char name[GGUF_MAX_NAME_LEN + 1];
    const struct st_tensor **srcs;  // one, or the experts stacked along ne[2]
    size_t n_srcs;
    const struct conv_extra_tensor *extra;
    uint32_t type;  // GGUF type written
    uint32_t n_dims;
    int64_t ne[4];
    uint32_t permute_heads;  // > 0: Q/K rows reordered for llama-style RoPE
    float add;               // added to every element (Gemma's norm offset)
    // A family's own writer (gpt-oss experts), with what it needs: the
    // MXFP4 scales beside srcs[0]'s blocks, and the rows taken (row r of the
    // output from source row r * stride + offset).
    int (*write)(struct gguf_writer *w, const struct conv_plan *p, float *f, void *o,
                 struct err *e);
    const struct st_tensor *scales;
    int64_t stride, offset;
};

// One conversion: the architecture, vocabulary, mapped tensors and plan.
struct conv_job {
    struct conv c;
    struct convert_vocab vocab;
    struct conv_mapped *maps;
    size_t n_maps;
    struct st_set set;
    struct conv_plan *plan;
    size_t n_plan;
    uint64_t total, done;
    convert_progress_fn fn;
    void *fn_ctx;
};

// A small file of the folder into out (out->data NULL when absent).
int conv_read_small(const struct convert_file *files, size_t n, const char *name, struct buf *out,
                    struct err *e);
// Maps and parses every .safetensors file of the folder, in name order.
int conv_load_tensors(struct conv_job *j, const struct convert_file *files, size_t n,
                      struct err *e);
// HF name → GGUF name by substring renames (at each position the first
// listed match wins).
void conv_rename(const struct conv_rename *renames, const char *in, char *out, size_t n);
// Sorts plan[first..] (non-block tensors, blocks in order, output last);
// two tensors of one name are an error.
int conv_sort_plan(struct conv_job *j, size_t first, struct err *e);
// Declares the plan's tensors, writes the header and every tensor, and
// closes w (aborts it on error).
int conv_write_body(struct conv_job *j, struct gguf_writer *w, struct convert_info *info,
                    struct err *e);
void conv_job_free(struct conv_job *j);

// Elements per block of conv_write_body's buffers (f: floats, o: 4 bytes each).
#define CONV_CHUNK_ELEMS (1u << 16)
// n elements of t from element first as floats; floats stored as type
// (F32/F16/BF16) into out, returning the bytes.
void conv_load_floats(const struct st_tensor *t, uint64_t first, float *out, size_t n);
size_t conv_store_floats(const float *in, size_t n, uint32_t type, void *out);
// The tensor of the set named name, or NULL.
const struct st_tensor *conv_find_tensor(const struct conv_job *j, const char *name);
// gpt-oss's expert tensors (gptoss.c), the plan hook of its row.
int conv_gptoss_plan(struct conv_job *j, const struct st_tensor *t, struct err *e);

// convert internals shared between the module's files.
#pragma once

#include <inttypes.h>

#include "convert/convert.h"
#include "gguf/gguf.h"
#include "json/json.h"

uint32_t st_dtype_size(enum st_dtype d);

// One row of a GGUF key table: config.json field → "<arch>.<suffix>".
enum hp_kind { HP_U32, HP_F32 };
struct hp_row {
    const char *json;  // config.json field
    const char *suffix;
    enum hp_kind kind;
};

struct conv;

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
    // Extra keys and tensors (rope factors, head_dim rules); may be NULL.
    int (*extra_kv)(struct conv *c, struct gguf_writer *w, struct err *e);
};

const struct conv_arch *conv_arch_find(const char *hf_name);
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
};

// config.json getters: false when the field is absent or not a number.
bool conv_cfg_u32(const struct conv *c, const char *key, uint32_t *out);
bool conv_cfg_f32(const struct conv *c, const char *key, float *out);

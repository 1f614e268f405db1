// quantize: the quantization policy of `ollama create --quantize`, above the
// engine's block formats: which type each tensor of a model gets in a
// llama.cpp mix such as Q4_K_M (mix.c), and the rewrite of a whole GGUF file
// into that mix (requant.c). It knows tensor names and the GGUF writer; the
// engine knows neither.
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "engine/quant/quant.h"
#include "gguf/gguf.h"
#include "util/util.h"

// Quantization mixes (llama_ftype → per-tensor type), as llama.cpp's
// llama_tensor_get_type chooses them for dense models without an importance
// matrix. ftype values are general.file_type (llama_ftype) numbers:
// gguf_file_type_from_name("Q4_K_M") == 15.

struct quantize_mix_model {
    const char *arch;      // general.architecture ("llama"; "falcon" has its own rules)
    int n_layers;          // block_count
    int n_gqa;             // n_head / n_head_kv (1 if unknown)
    bool tied_embeddings;  // the file has no output.weight (token_embd is the output)
};

// The default tensor type of a mix (Q4_K for Q4_K_M), or -1 when we cannot
// produce that mix (IQ*, Q2_K_S need codebooks / an importance matrix).
int quantize_mix_default_type(int32_t ftype);
// "q4_K_M" → 15 (case-insensitive) for the mixes we can produce; -1 otherwise.
int32_t quantize_mix_from_name(const char *name);
// Whether llama.cpp quantizes a tensor at all (2-D+, name ends in "weight",
// not a norm / router / position embedding).
bool quantize_tensor_quantizable(const char *name, uint32_t n_dims);
// The type tensor `name` (currently cur_type, n_dims dims, rows of ne0
// elements) gets in mix ftype; cur_type for tensors that stay as they are;
// -1 for an unsupported ftype.
int quantize_mix_tensor_type(int32_t ftype, const char *name, uint32_t cur_type, uint32_t n_dims,
                             int64_t ne0, const struct quantize_mix_model *m);

// ---------------------------------------------------------------------------
// Whole-model quantization (`create --quantize`), streaming.

typedef void (*quantize_progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);

// Writes out_path: in_path's tensors converted to the types of mix ftype
// (quantize_mix_tensor_type; tensors that keep their type are copied), laid out
// as llama-quantize writes them (input keys in order with
// general.quantization_version and general.file_type moved to the end;
// tensors sorted by layer number, then name; 32-byte alignment). Any source
// type with a dequantizer is accepted: refusing to re-quantize quantized
// models is the caller's policy. progress (may be NULL) is called after
// each tensor with input bytes done / total. On error out_path is removed.
int quantize_model(const char *in_path, const char *out_path, int32_t ftype,
                   quantize_progress_fn progress, void *ctx, struct err *e);

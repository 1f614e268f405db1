// gguf: reader (mmap, hostile-input safe) and streaming writer for GGUF v2/v3
// files (docs/spec/gguf.md), plus the model summary used by show / tags.
//
// The reader validates everything up front in gguf_open: after it succeeds,
// every key, string, array and tensor view it hands out lies inside the
// mapping. Strings and tensor data are borrowed views into the mmap and live
// as long as the struct gguf. A struct gguf is read-only after open and may be
// shared between threads.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define GGUF_MAGIC             0x46554747u  // "GGUF" as a little-endian u32
#define GGUF_MAX_DIMS          4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME_LEN      63  // tensor names, as llama.cpp

enum gguf_value_type {
    GGUF_VAL_UINT8 = 0,
    GGUF_VAL_INT8 = 1,
    GGUF_VAL_UINT16 = 2,
    GGUF_VAL_INT16 = 3,
    GGUF_VAL_UINT32 = 4,
    GGUF_VAL_INT32 = 5,
    GGUF_VAL_FLOAT32 = 6,
    GGUF_VAL_BOOL = 7,
    GGUF_VAL_STRING = 8,
    GGUF_VAL_ARRAY = 9,
    GGUF_VAL_UINT64 = 10,
    GGUF_VAL_INT64 = 11,
    GGUF_VAL_FLOAT64 = 12,
    GGUF_VAL_COUNT_,
};

// ggml tensor type ids, from the type table (types.def): GGUF_TYPE_Q4_K,
// and its geometry as constants (GGUF_TYPE_BLOCK_Q4_K elements in
// GGUF_TYPE_BYTES_Q4_K bytes; GGUF_TYPE_QUANT_Q4_K). The engine's traits
// (engine/quant) add the dequantizers.
enum gguf_type {
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam) GGUF_TYPE_##nm = id,
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
    GGUF_TYPE_COUNT_,  // one past the highest id (the rows are in id order)
};

enum gguf_type_geometry {
#define GGUF_TYPE_ROW(nm, id, bs, ts, q, fam)                                                      \
    GGUF_TYPE_BLOCK_##nm = bs, GGUF_TYPE_BYTES_##nm = ts, GGUF_TYPE_QUANT_##nm = q,
#include "gguf/types.def"
#undef GGUF_TYPE_ROW
};

// Name ("Q4_K"), or NULL for an unknown id.
const char *gguf_type_name(uint32_t type);
// Geometry for a known type: returns false for unknown ids.
bool gguf_type_geometry(uint32_t type, uint32_t *block_size, uint32_t *type_size);
// Type id by name, case-insensitive ("q8_0"); -1 if unknown.
int gguf_type_from_name(const char *name);
// Metadata value type name ("u32", "str", "arr"), or NULL; and the encoded
// size of a fixed-size value type (0 for STRING/ARRAY/unknown).
const char *gguf_value_type_name(uint32_t t);
size_t gguf_value_type_size(uint32_t t);

// A borrowed view of one metadata value.
struct gguf_value {
    enum gguf_value_type type;
    // For scalars: the decoded value (integers widened, floats in f64).
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
    } v;
    struct str s;  // STRING: bytes inside the mapping (not NUL-terminated)
    // ARRAY: element type, count, and the raw encoded bytes of the elements.
    enum gguf_value_type arr_type;
    uint64_t arr_count;
    const uint8_t *arr_data;
    uint64_t arr_bytes;
    // STRING / ARRAY element arrays opened by the reader: byte offset of each
    // element inside arr_data (reader-owned), so element i is O(1). NULL for
    // other arrays and for nested arrays below the top level (then element
    // access scans, still bounds-checked).
    const uint64_t *arr_index;
};

struct gguf_kv {
    struct str key;  // inside the mapping
    struct gguf_value val;
};

struct gguf_tensor {
    struct str name;  // inside the mapping
    uint32_t type;    // enum gguf_type
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];  // unused dimensions are 1
    uint64_t offset;            // relative to the data section
    uint64_t n_bytes;
    const void *data;  // inside the mapping (NULL for a header-only open)
};

struct gguf;

// Opens and fully validates path (mmap, read-only). On failure returns a
// negative ERR_* with e naming what is wrong, e.g. "tensor blk.3.attn_q.weight:
// data extends past end of file"; *out is written only on success.
int gguf_open(struct gguf **out, const char *path, struct err *e);
// The same over a caller-owned memory image (not copied; must outlive the
// struct gguf). Used by tests and fuzzers.
int gguf_open_memory(struct gguf **out, const void *data, size_t n, struct err *e);
void gguf_close(struct gguf *g);

uint32_t gguf_version(const struct gguf *g);
uint32_t gguf_alignment(const struct gguf *g);
uint64_t gguf_data_offset(const struct gguf *g);  // absolute file offset of the data section
uint64_t gguf_file_size(const struct gguf *g);

// Metadata.
size_t gguf_kv_count(const struct gguf *g);
const struct gguf_kv *gguf_kv_at(const struct gguf *g, size_t i);
// Lookup by key (NUL-terminated); NULL when absent.
const struct gguf_kv *gguf_find(const struct gguf *g, const char *key);
// Typed getters: return false when absent or of an incompatible type/range.
// Integer getters accept every integer width (and range-check); float
// getters accept F32/F64 and integers.
bool gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out);
bool gguf_get_i64(const struct gguf *g, const char *key, int64_t *out);
bool gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out);
bool gguf_get_f32(const struct gguf *g, const char *key, float *out);
bool gguf_get_bool(const struct gguf *g, const char *key, bool *out);
bool gguf_get_str(const struct gguf *g, const char *key, struct str *out);
// Array access: count and element getters. Element i of a STRING array is
// reached in O(1) after the first call (the reader keeps an offset index for
// string arrays, built lazily and thread-safely, or at open).
bool gguf_get_arr(const struct gguf *g, const char *key, enum gguf_value_type *elem_type,
                  uint64_t *count);
bool gguf_arr_str(const struct gguf_kv *kv, uint64_t i, struct str *out);
bool gguf_arr_i64(const struct gguf_kv *kv, uint64_t i, int64_t *out);  // any integer element type
bool gguf_arr_f32(const struct gguf_kv *kv, uint64_t i, float *out);    // F32/F64 elements
// Element i of any array value (nested arrays included) decoded as a value
// view; false when i is out of range or arr is not an array.
bool gguf_arr_value(const struct gguf_value *arr, uint64_t i, struct gguf_value *out);
// Convenience: "<general.architecture>.<suffix>" lookups ("context_length").
bool gguf_get_arch_u32(const struct gguf *g, const char *suffix, uint32_t *out);
bool gguf_get_arch_f32(const struct gguf *g, const char *suffix, float *out);
// general.architecture, or "" when absent.
struct str gguf_architecture(const struct gguf *g);

// Tensors.
size_t gguf_tensor_count(const struct gguf *g);
const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, size_t i);
const struct gguf_tensor *gguf_tensor_find(const struct gguf *g, const char *name);
// ne0*ne1*ne2*ne3.
uint64_t gguf_tensor_n_elements(const struct gguf_tensor *t);

// ---------------------------------------------------------------------------
// Summary (show, /api/tags): architecture, parameter count, quantization.

struct gguf_summary {
    char architecture[64];
    uint64_t parameter_count;     // sum of tensor element counts
    char parameter_size[32];      // "1.2B", "494.03M", "8.0B"
    char quantization_level[32];  // general.file_type name ("Q4_K_M"); "unknown" when the
                                  // key is absent, 0 or unknown (as Ollama prints it)
    uint32_t file_type;           // general.file_type or UINT32_MAX
};
void gguf_summarize(const struct gguf *g, struct gguf_summary *out);
// Ollama's parameter-size formatting (docs/spec/gguf.md §8).
void gguf_format_param_count(uint64_t n, char *out, size_t n_out);
// general.file_type → "Q4_K_M" etc.; NULL for unknown.
const char *gguf_file_type_name(uint32_t file_type);
// Inverse, case-insensitive ("q4_k_m" → 15); -1 if unknown.
int gguf_file_type_from_name(const char *name);

// The model_info map of /api/show (docs/spec/api.md §5): every KV except
// general.name and tokenizer.chat_template, with general.parameter_count set
// to the count computed from the tensor shapes. Arrays with more than 5
// elements are reported with elided = true (shown as []) unless verbose.
// fn is called once per entry in file order (parameter_count last if the
// file has none); a non-zero return from fn stops the walk and is returned.
typedef int (*gguf_model_info_fn)(void *ctx, struct str key, const struct gguf_value *val,
                                  bool elided);
int gguf_model_info(const struct gguf *g, bool verbose, gguf_model_info_fn fn, void *ctx);
// The same as a JSON object (json/json.h's json_t; new reference, NULL when
// out of memory): integers as numbers, f32 printed as Go prints float32,
// non-finite floats as null, strings (bytes that are not UTF-8 as U+FFFD),
// bools, arrays ([] when elided); keys that are not UTF-8 are left out. The
// model_info and projector_info of /api/show. Write it with JSONX_SORT_KEYS
// to get Go's map order.
struct json_t;
struct json_t *gguf_model_info_json(const struct gguf *g, bool verbose);

// ---------------------------------------------------------------------------
// Writer (v3, streaming: tensor data is written after the header, one tensor
// at a time, never all held in memory).

struct gguf_writer;

int gguf_writer_open(struct gguf_writer **out, const char *path, struct err *e);
void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment);
// Metadata (copied). Keys must be unique. These record the first error in
// the writer (returned again by write_header with its message).
int gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_kv_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_kv_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v);
// Arrays of scalars: data holds count elements of elem_type's encoding.
int gguf_writer_kv_arr(struct gguf_writer *w, const char *key, enum gguf_value_type elem_type,
                       const void *data, uint64_t count);
int gguf_writer_kv_arr_str(struct gguf_writer *w, const char *key, const struct str *items,
                           uint64_t count);
// Copies one KV (any type, arrays included) from a reader.
int gguf_writer_kv_copy(struct gguf_writer *w, const struct gguf_kv *kv);
// Declares a tensor (order = file order). Data follows later.
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne);
// Writes header + KVs + tensor infos. Call once after all declarations.
int gguf_writer_write_header(struct gguf_writer *w, struct err *e);
// Appends bytes of the current tensor; tensors are filled in declaration
// order and each must receive exactly its n_bytes (padding is automatic).
int gguf_writer_write_data(struct gguf_writer *w, const void *p, size_t n, struct err *e);
// Like write_data with n zero bytes, but seeks instead of writing, leaving
// a hole in the file (sparse models for memory tests).
int gguf_writer_skip_data(struct gguf_writer *w, uint64_t n, struct err *e);
// Finishes (checks every tensor was filled), fsyncs and closes.
int gguf_writer_close(struct gguf_writer *w, struct err *e);
// Abandons and unlinks the file.
void gguf_writer_abort(struct gguf_writer *w);

// ---------------------------------------------------------------------------
// LoRA adapters (llama.cpp's adapter GGUF, spec in docs/internals/lora.md):
// general.type "adapter", adapter.type "lora", adapter.lora.alpha, and for
// each adapted weight W [n_in, n_out] of the base model the pair
// <W>.lora_a [n_in, rank] and <W>.lora_b [rank, n_out].

struct gguf_lora_pair {
    const struct gguf_tensor *a, *b;  // in the adapter
    const struct gguf_tensor *base;   // W in the base model
    int64_t rank;                     // b's ne[0]
};

struct gguf_lora {
    float alpha;  // adapter.lora.alpha (0 when absent: the scale is then 1)
    size_t n_pairs;
    struct gguf_lora_pair *pairs;  // owned, in the adapter's tensor order
};

// Checks adapter against base as llama.cpp's llama_adapter_lora_init does:
// the adapter's type and architecture, every tensor name (".lora_a" /
// ".lora_b"; "*_norm.weight" ignored), complete pairs, each target present
// in base, 2-D, and the shapes agreeing. Fills *out (release with
// gguf_lora_deinit) on success; ERR_INVALID naming the problem otherwise.
int gguf_lora_check(const struct gguf *adapter, const struct gguf *base, struct gguf_lora *out,
                    struct err *e);
void gguf_lora_deinit(struct gguf_lora *l);
// The scale of a pair's term B (A x): user_scale * alpha / rank, or
// user_scale when alpha is 0 (llama.cpp's rule).
float gguf_lora_scale(const struct gguf_lora *l, const struct gguf_lora_pair *p, float user_scale);

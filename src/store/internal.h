// store internals shared between the module's files.
#pragma once

#include <pthread.h>

#include "store/store.h"

struct store {
    char *root;
    char *blobs_dir;
    char *manifests_dir;
    // Serialises operations that change which blobs are referenced (manifest
    // writes by create/copy, delete, prune). A create re-checks under it that
    // every layer it reuses still exists before publishing its manifest.
    pthread_mutex_t mu;
};

// Go encoding/json string and number rules (store.md §4.2, §6.1).
int gojson_string(struct buf *b, const char *s);
int gojson_string_n(struct buf *b, const char *s, size_t n);
// Shortest round-trip float64 as Go's JSON encoder writes it.
int gojson_number(struct buf *b, double v);
// Any jansson value; object keys sorted by byte value (Go map order).
int gojson_value(struct buf *b, const json_t *v);
// Go fmt %v of a float64 (shortest digits, exponent form when the decimal
// exponent is < -4 or >= 6: "0.7", "4096", "1e-05", "1.048576e+06"). With
// plain_ints, integral values below 2^53 print as plain integers.
void gofmt_float(double v, bool plain_ints, char *out, size_t n);
// Go %#v / strconv.Quote of a string.
int gofmt_quote(struct buf *b, const char *s);

// Loads the manifest file at path (parses it) and fills info.
int store_manifest_load_path(const char *path, struct store_manifest *m,
                             struct store_manifest_info *info, struct err *e);

// Enumeration of manifests/*/*/*/* in lexical order: calls fn for each
// regular file with its name (NULL when the components are not a valid name),
// the four components and the path. A negative return from fn stops the walk.
typedef int (*store_walk_fn)(void *ctx, const struct store_name *name, const char *parts[4],
                             const char *path);
int store_walk_manifests(struct store *s, store_walk_fn fn, void *ctx, struct err *e);

// Collects every digest (hex) referenced by a parseable manifest. *corrupt
// counts manifests that failed to parse. Caller frees with refs_free.
struct store_refs {
    char **hex;
    size_t n, cap;
};
int store_refs_collect(struct store *s, struct store_refs *r, size_t *corrupt, struct err *e);
bool store_refs_has(const struct store_refs *r, const char *hex);
void store_refs_free(struct store_refs *r);
// Removes empty directories under manifests/ (bottom-up).
void store_prune_manifest_dirs(struct store *s);

// A name from four path components; ERR_INVALID unless every part is valid.
int store_name_from_parts(const char *host, const char *ns, const char *model, const char *tag,
                          struct store_name *out);

// Layer helpers.
void store_layer_copy(struct store_layer *dst, const struct store_layer *src);
void store_layer_deinit(struct store_layer *l);

// Quantizes the GGUF at src_path into a new blob (quantize.c).
struct store_create_opts;
// status is the progress text ("quantizing F16 model to Q4_K_M").
int store_quantize_blob(struct store *s, const char *src_path, const char *target_label,
                        const char *status, const struct store_create_opts *o,
                        char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                        struct err *e);

// Verifies the GGUF at tmp_path (a temporary file inside blobs/), hashes it
// and renames it to its digest (or drops it when that blob exists); the
// temporary file is gone either way. what names it in errors.
int store_blob_adopt(struct store *s, const char *tmp_path, const char *what,
                     char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                     struct err *e);

// Converts uploaded Hugging Face safetensors files (names and digests as
// the client sent them) into a new GGUF blob (import.c): a model, or with
// base_path (the base model's GGUF) a PEFT LoRA adapter for it.
int store_convert_files(struct store *s, const struct store_file_ref *files, size_t n,
                        const char *base_path, const struct store_create_opts *o,
                        char digest_out[STORE_DIGEST_LEN + 1], int64_t *size_out, bool *existed,
                        struct err *e);

// ASCII helpers.
static inline bool store_is_alnum_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

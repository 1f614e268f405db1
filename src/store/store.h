// store: the model store of docs/spec/store.md — model names, the blobs/
// and manifests/ tree under OLLAMA_MODELS, manifests and config blobs with
// Ollama's exact JSON, list / copy / delete / consistency check / prune,
// the Modelfile parser and renderer (docs/spec/modelfile.md), the data behind
// /api/show, and model creation (/api/create) including quantization.
//
// A store written by upstream Ollama is read as it is, and ours is read by
// Ollama. Nothing a client sends (name, digest, files key) can make a path
// outside the store: names and digests are validated before any path is
// built from them.
//
// Error codes (for server_http_status): ERR_INVALID → 400 (bad name, digest,
// request), ERR_DIGEST → 400 (uploaded bytes do not match), ERR_NOT_FOUND →
// 404, ERR_FORMAT → 400 for client-supplied files (not GGUF, bad GGUF) but a
// corrupt manifest is ERR_IO → 500, ERR_UNSUPPORTED → 400, others → 500.
// Messages use Ollama's wording where it has one.
//
// The HTTP endpoints are thin calls (api.md §3, §5, §12, §15, §16):
//   GET  /api/tags           store_tags_json
//   POST /api/show           store_show (empty model → 400 "model is required")
//   POST /api/copy           store_copy
//   DELETE /api/delete       store_delete
//   POST /api/create         store_create_req_from_json, store_create_validate
//                            (400 before streaming), store_create with a
//                            progress callback writing NDJSON lines
//   HEAD /api/blobs/:digest  store_digest_parse (400), store_blob_exists
//   POST /api/blobs/:digest  store_digest_parse, store_blob_exists (→ 200
//                            without reading the body), else writer open
//                            (expected digest) / write / commit → 201;
//                            ERR_DIGEST → 400
//   server start             store_prune(s, 1h) unless OLLAMA_NOPRUNE
//
// Thread safety: a struct store may be used from many threads at once.
// Operations that change reference counts (create's manifest write, copy,
// delete, prune) are serialised inside; reads never block on them.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/json.h"
#include "prompt/prompt.h"
#include "util/util.h"

// ---------------------------------------------------------------------------
// Model names (store.md §1): [[scheme://]host/][namespace/]model[:tag]

#define STORE_DEFAULT_HOST      "registry.ollama.ai"
#define STORE_DEFAULT_NAMESPACE "library"
#define STORE_DEFAULT_TAG       "latest"
#define STORE_HOST_MAX          350
#define STORE_PART_MAX          80
// Enough for any valid name in any display form, NUL included.
#define STORE_NAME_MAX 600

struct store_name {
    char scheme[16];  // "" when not given (https is implied)
    char host[STORE_HOST_MAX + 1];
    char ns[STORE_PART_MAX + 1];
    char model[STORE_PART_MAX + 1];
    char tag[STORE_PART_MAX + 1];
};

// Parses and validates s, filling absent parts with the defaults. Invalid →
// ERR_INVALID "invalid model name" (*out then holds what was parsed, with
// over-long parts truncated; do not use it for paths).
int store_name_parse(const char *s, struct store_name *out, struct err *e);
bool store_name_valid(const char *s);
// Shortest display form: "llama3.2:latest", "jmorgan/mario:v1.0",
// "localhost:5000/ns/model:tag" (store.md §1.4).
void store_name_display(const struct store_name *n, char *out, size_t n_out);
// "host/namespace/model:tag".
void store_name_full(const struct store_name *n, char *out, size_t n_out);
// ASCII case-insensitive equality of the four parts.
bool store_name_eq(const struct store_name *a, const struct store_name *b);

// ---------------------------------------------------------------------------
// Digests (store.md §3.2): "^sha256[:-][0-9a-fA-F]{64}$" and nothing else.

#define STORE_DIGEST_LEN 71  // "sha256:" + 64 hex
// Validates s and writes its 64 hex chars (case kept) to hex. Anything else →
// ERR_INVALID "invalid digest format", before any path is built.
int store_digest_parse(const char *s, char hex[DIGEST_HEX_LEN + 1], struct err *e);
bool store_digest_valid(const char *s);

// ---------------------------------------------------------------------------
// The store.

struct store;

// Opens the store rooted at root (created with blobs/ and manifests/ when
// missing); legacy blob names "sha256:<hex>" are renamed to "sha256-<hex>".
int store_open(struct store **out, const char *root, struct err *e);
void store_close(struct store *s);
const char *store_root(const struct store *s);
// $OLLAMA_MODELS (trimmed of whitespace, then quotes) or $HOME/.ollama/models.
void store_default_root(char *out, size_t n);

// Rewrites each part of n to the spelling of an existing manifest part that
// equals it ignoring ASCII case (store.md §1.5). n must be valid.
int store_name_canonicalize(struct store *s, struct store_name *n, struct err *e);
// <root>/manifests/host/ns/model/tag for a valid name (not canonicalised).
int store_manifest_path(const struct store *s, const struct store_name *n, char *out, size_t n_out,
                        struct err *e);

// ---------------------------------------------------------------------------
// Blobs (store.md §3).

// <root>/blobs/sha256-<hex> for a valid digest (either separator).
int store_blob_path(const struct store *s, const char *digest, char *out, size_t n_out,
                    struct err *e);
// True when digest is valid and its blob file exists.
bool store_blob_exists(const struct store *s, const char *digest);
// Sets the blob's mtime to now (pruning grace period, store.md §3.3).
void store_blob_touch(const struct store *s, const char *digest);
// Reads a whole blob (for small text/JSON layers), at most max_bytes.
int store_blob_read(const struct store *s, const char *digest, size_t max_bytes, struct buf *out,
                    struct err *e);

// Streaming blob writer: a temporary file inside blobs/, hashed while written.
// POST /api/blobs/:digest = open(expected) + write* + commit.
struct store_blob_writer;

// expected_digest may be NULL (content-addressed write, e.g. a new layer).
int store_blob_writer_open(struct store *s, const char *expected_digest,
                           struct store_blob_writer **out, struct err *e);
int store_blob_writer_write(struct store_blob_writer *w, const void *p, size_t n, struct err *e);
// Bytes written so far.
uint64_t store_blob_writer_size(const struct store_blob_writer *w);
// Finishes: fsync, compare with the expected digest, rename to
// blobs/sha256-<hex> (or drop the temporary file when that blob already
// exists: *existed = true), touch. A mismatch removes the temporary file and
// fails with ERR_DIGEST `digest mismatch, expected "sha256:A", got "sha256:B"`.
// digest_out ("sha256:<hex>", may be NULL). Always frees w.
int store_blob_writer_commit(struct store_blob_writer *w, char digest_out[STORE_DIGEST_LEN + 1],
                             bool *existed, struct err *e);
// Removes the temporary file and frees w (NULL is fine).
void store_blob_writer_abort(struct store_blob_writer *w);
// Convenience for small blobs held in memory.
int store_blob_put(struct store *s, const void *p, size_t n, char digest_out[STORE_DIGEST_LEN + 1],
                   bool *existed, struct err *e);

// ---------------------------------------------------------------------------
// Manifests and config blobs (store.md §4, §5).

#define STORE_MT_MANIFEST  "application/vnd.docker.distribution.manifest.v2+json"
#define STORE_MT_CONFIG    "application/vnd.docker.container.image.v1+json"
#define STORE_MT_MODEL     "application/vnd.ollama.image.model"
#define STORE_MT_ADAPTER   "application/vnd.ollama.image.adapter"
#define STORE_MT_PROJECTOR "application/vnd.ollama.image.projector"
#define STORE_MT_TEMPLATE  "application/vnd.ollama.image.template"
#define STORE_MT_PROMPT    "application/vnd.ollama.image.prompt"
#define STORE_MT_SYSTEM    "application/vnd.ollama.image.system"
#define STORE_MT_PARAMS    "application/vnd.ollama.image.params"
#define STORE_MT_MESSAGES  "application/vnd.ollama.image.messages"
#define STORE_MT_LICENSE   "application/vnd.ollama.image.license"
#define STORE_MT_EMBED     "application/vnd.ollama.image.embed"
#define STORE_MT_DRAFT     "application/vnd.ollama.image.draft"
#define STORE_MT_TENSOR    "application/vnd.ollama.image.tensor"
#define STORE_MT_JSON      "application/vnd.ollama.image.json"

struct store_layer {
    char *media_type;
    char digest[STORE_DIGEST_LEN + 1];  // "sha256:<hex>" (validated); "" for a missing config
    int64_t size;
    char *from;  // NULL when absent
    char *name;  // NULL when absent
};

struct store_manifest {
    int64_t schema_version;
    char *media_type;
    struct store_layer config;
    struct store_layer *layers;
    size_t n_layers;
};

// Parses manifest JSON; every digest is validated (a traversal digest from a
// hostile registry is ERR_INVALID "invalid digest format"). Unknown fields
// are ignored. *m is written only on success.
int store_manifest_parse(const void *data, size_t n, struct store_manifest *m, struct err *e);
// Go-encoder compact JSON with a trailing newline (store.md §4.2).
int store_manifest_encode(const struct store_manifest *m, struct buf *out);
void store_manifest_deinit(struct store_manifest *m);
// Appends a copy of l.
void store_manifest_add_layer(struct store_manifest *m, const struct store_layer *l);

struct store_manifest_info {
    char digest[DIGEST_HEX_LEN + 1];  // SHA-256 of the manifest file bytes
    int64_t modified_ns;              // manifest mtime
    uint64_t size;                    // layers + config
};
// Loads the manifest of a (canonicalised, valid) name. Missing →
// ERR_NOT_FOUND; unparsable → ERR_IO "corrupt manifest". info may be NULL.
int store_manifest_load(struct store *s, const struct store_name *n, struct store_manifest *m,
                        struct store_manifest_info *info, struct err *e);
// Writes manifest bytes atomically for n (directories created on demand).
int store_manifest_write(struct store *s, const struct store_name *n, const void *data, size_t len,
                         struct err *e);

struct store_config {
    char *model_format, *model_family, *model_type, *file_type;
    char **model_families;  // NULL with n_families == 0 when null/absent
    size_t n_families;
    char *renderer, *parser, *requires, *base_name;
    char **capabilities;
    size_t n_capabilities;
    int64_t context_length, embedding_length;
    // "draft": the draft model stored in the same manifest (all NULL: none).
    char *draft_format, *draft_arch, *draft_tensor_prefix, *draft_config;
};
// Parses a config blob (missing fields → NULL/0; unknown ignored).
int store_config_parse(const void *data, size_t n, struct store_config *c, struct err *e);
// Classic form with rootfs.diff_ids from layers (store.md §5).
int store_config_encode(const struct store_config *c, const struct store_layer *layers,
                        size_t n_layers, struct buf *out);
void store_config_deinit(struct store_config *c);

// ---------------------------------------------------------------------------
// A model as the server uses it: manifest + config + resolved layers.

struct store_model {
    struct store_name name;
    char display[STORE_NAME_MAX];  // shortest name
    struct store_manifest manifest;
    struct store_manifest_info info;
    struct store_config config;
    char *model_path;      // blob path of the (first) model layer, NULL if none
    char *parent_model;    // `from` of the model layer ("" if none)
    char **adapter_paths;  // adapter blob paths
    size_t n_adapters;
    char *draft_path;        // DRAFT: the draft model's blob path, or NULL
    char **projector_paths;  // projector blob paths
    size_t n_projectors;
    char *template_text;  // NULL when the model has no template layer
    char *system;         // NULL when none
    json_t *params;       // object or NULL (owned)
    json_t *messages;     // array or NULL (owned)
    char **licenses;
    size_t n_licenses;
    bool unsupported_format;  // safetensors tensor layers (MLX models)
};

// Loads a model by name (parsed, canonicalised). Invalid name →
// ERR_INVALID "invalid model name"; missing → ERR_NOT_FOUND
// "model 'NAME' not found" (display name).
int store_model_load(struct store *s, const char *name, struct store_model **out, struct err *e);
void store_model_free(struct store_model *m);

// ---------------------------------------------------------------------------
// List, copy, delete, check, prune (store.md §2.3, §7; api.md §3, §15).

struct store_entry {
    char name[STORE_NAME_MAX];  // display form
    struct store_name parsed;
    int64_t modified_ns;
    uint64_t size;
    char digest[DIGEST_HEX_LEN + 1];
    struct store_config config;
};
struct store_list {
    struct store_entry *items;  // most recently modified first (whole seconds, stable)
    size_t n;
};
// Enumerates manifests/*/*/*/*; invalid names and corrupt manifests are
// skipped with a warning.
int store_list(struct store *s, struct store_list *out, struct err *e);
void store_list_deinit(struct store_list *l);
// The /api/tags response {"models":[...]} (empty array when none).
int store_tags_json(struct store *s, json_t **out, struct err *e);

// Copies src's manifest byte for byte to dst. Errors: invalid src →
// ERR_INVALID `source "X" is invalid`; invalid dst → ERR_INVALID
// `destination "X" is invalid`; missing → ERR_NOT_FOUND `model "X" not found`.
int store_copy(struct store *s, const char *src, const char *dst, struct err *e);
// Deletes a model and the blobs no other manifest references. Errors:
// invalid → ERR_INVALID `name "X" is invalid`; missing → ERR_NOT_FOUND
// `model 'X' not found`; unparsable manifest → ERR_IO.
int store_delete(struct store *s, const char *name, struct err *e);

struct store_check_report {
    char **orphaned;  // blob file names referenced by no manifest
    size_t n_orphaned;
    char **missing;  // "model: sha256:<hex>" for referenced blobs that are absent
    size_t n_missing;
    char **corrupt;  // manifest paths (relative to manifests/) that do not parse
    size_t n_corrupt;
    char **temporary;  // non-digest files in blobs/ (temp/partial files)
    size_t n_temporary;
};
int store_check(struct store *s, struct store_check_report *r, struct err *e);
void store_check_report_deinit(struct store_check_report *r);
bool store_check_ok(const struct store_check_report *r);  // nothing orphaned/missing/corrupt

// Start-up prune (store.md §7.3): skipped (returns 0) when a manifest is
// corrupt; files younger than grace_ns are kept. Returns the number of files
// removed. OLLAMA_NOPRUNE is the caller's decision.
int store_prune(struct store *s, int64_t grace_ns, struct err *e);
// Removes the blobs of digests no manifest references any more (after a
// create or pull replaced a manifest).
int store_remove_unused(struct store *s, const struct store_manifest *old, struct err *e);

// ---------------------------------------------------------------------------
// Modelfile (modelfile.md §1, §2).

struct store_mf_command {
    char *name;  // lower-case instruction: "from", "parameter", "message", ...
    char *key;   // PARAMETER name (as typed) or MESSAGE role; NULL otherwise
    char *args;  // the argument, quotes removed
    int line;
};
struct store_modelfile {
    struct store_mf_command *cmds;
    size_t n;
};

// Parses Modelfile text. Errors are ERR_INVALID with Ollama's wording,
// "(line N): command must be one of ..." etc.; *out written only on success.
int store_modelfile_parse(const char *text, size_t n, struct store_modelfile *out, struct err *e);
void store_modelfile_deinit(struct store_modelfile *m);
// Renders commands back as Modelfile text, one command per line, arguments
// quoted as `show --modelfile` does.
int store_modelfile_render(const struct store_modelfile *m, struct buf *out);
// Quoting of one argument for rendering (modelfile.md §6).
int store_modelfile_quote(const char *arg, struct buf *out);

enum store_param_type { STORE_PARAM_INT, STORE_PARAM_FLOAT, STORE_PARAM_BOOL, STORE_PARAM_STRING };
// Type of a valid parameter name; false for unknown and deprecated names.
bool store_param_type(const char *name, enum store_param_type *out);
bool store_param_deprecated(const char *name);
// Converts the PARAMETER commands into the create request's "parameters"
// object (typed values, stop as an array). Errors: `unknown parameter
// 'NAME'`, `invalid int value [V]`, `invalid float value [V]`,
// `invalid bool value [V]`. Deprecated names are skipped; *n_deprecated
// (may be NULL) counts them.
int store_modelfile_params(const struct store_modelfile *m, json_t **out, size_t *n_deprecated,
                           struct err *e);
// Builds a create request object from a parsed Modelfile the way the client
// does, except for local files: FROM becomes "from" (the CLI replaces
// path FROMs/ADAPTERs with uploaded "files"/"adapters" itself).
int store_modelfile_to_request(const struct store_modelfile *m, json_t **out, struct err *e);

// ---------------------------------------------------------------------------
// Show (api.md §5).

struct store_show_opts {
    bool verbose;           // full arrays in model_info
    const char *system;     // overrides system (NULL = none)
    const json_t *options;  // merged into parameters (NULL = none)
};
// Builds the /api/show response object for name.
int store_show(struct store *s, const char *name, const struct store_show_opts *o, json_t **out,
               struct err *e);
// The `show --modelfile` text of a loaded model (modelfile.md §6).
int store_show_modelfile(const struct store_model *m, const char *system_override,
                         const json_t *options, struct buf *out);
// The "parameters" text of /api/show ("" when no params).
int store_show_parameters(const json_t *params, struct buf *out);
// Capabilities: completion | embedding, tools, insert, vision, thinking.
// Writes up to max names to out; returns the count.
size_t store_model_capabilities(const struct store_model *m, const char **out, size_t max);
// What /api/tags lists of a model beside its config (Ollama 0.33's model
// list summary): capabilities in its order (the GGUF's, the config's, the
// TEMPLATE layer's and the parser's, projectors), the file's context and
// embedding lengths (0: absent), and its file type name.
struct store_list_info {
    const char *caps[8];
    size_t n_caps;
    int64_t context_length, embedding_length;
    char file_type[32];
};
void store_model_list_info(const struct store_model *m, struct store_list_info *out);

// ---------------------------------------------------------------------------
// Create (modelfile.md §4, api.md §12).

struct store_file_ref {
    char *name;    // files key, e.g. "model.gguf"
    char *digest;  // as given
};

struct store_create_req {
    char *model;
    char *from;
    struct store_file_ref *files;
    size_t n_files;
    struct store_file_ref *adapters;
    size_t n_adapters;
    struct store_file_ref *draft_files;  // DRAFT: the draft model's GGUF (one file)
    size_t n_draft_files;
    char *draft_quantize;  // --draft-quantize
    char *template_text;   // NULL when absent
    char *system;
    char **licenses;
    size_t n_licenses;
    json_t *parameters;  // object or NULL (owned)
    json_t *messages;    // array or NULL (owned)
    char *quantize;      // "q4_K_M" ... (or legacy "quantization")
    char *renderer, *parser, *requires;
    bool has_path;    // legacy "path" field given (always rejected)
    char *modelfile;  // legacy "modelfile" field (parsed; path FROMs rejected)
};

// Reads an /api/create body. JSON type errors → ERR_INVALID. Does not
// validate (see store_create_validate).
int store_create_req_from_json(struct store_create_req *r, const json_t *body, struct err *e);
void store_create_req_deinit(struct store_create_req *r);
// The 400 checks done before streaming starts: legacy path, files keys,
// empty digests, the model name.
int store_create_validate(const struct store_create_req *r, struct err *e);

struct store_progress {
    const char *status;
    const char *digest;  // NULL when absent
    uint64_t total, completed;
};
typedef void (*store_progress_fn)(void *ctx, const struct store_progress *p);
// Pulls a missing base model into the store (the server passes the registry
// client). Returns 0 or a negative ERR_* with e set.
typedef int (*store_pull_fn)(void *ctx, const char *name, store_progress_fn progress,
                             void *progress_ctx, struct err *e);
// Checks a TEMPLATE parses (the server passes the template module); fills e.
typedef int (*store_template_check_fn)(void *ctx, const char *text, struct err *e);

// Template autodetection (modelfile.md §5): the built-in table lives with the
// template module; given a GGUF's tokenizer.chat_template, returns true and
// sets *name ("llama3-instruct"), *go_template and *stops (NULL-terminated,
// may be NULL) when a built-in template matches. Borrowed strings.
typedef bool (*store_template_detect_fn)(void *ctx, const char *chat_template, const char **name,
                                         const char **go_template, const char *const **stops);

struct store_create_opts {
    store_progress_fn progress;
    void *progress_ctx;
    store_pull_fn pull;  // NULL: a missing `from` model is ERR_NOT_FOUND
    void *pull_ctx;
    store_template_check_fn template_check;  // NULL: not checked
    void *template_ctx;
    store_template_detect_fn template_detect;  // NULL: no autodetection
    void *detect_ctx;
    bool noprune;  // keep blobs of an overwritten manifest
    // Non-zero → stop with ERR_CANCELLED (checked between steps; a running
    // quantization finishes its file first).
    const volatile int *cancel;
};

// Creates (or replaces) a model. Progress statuses as Ollama streams them;
// the manifest is written last and atomically, so a failure leaves the old
// state visible and no partial model.
int store_create(struct store *s, const struct store_create_req *r,
                 const struct store_create_opts *o, struct err *e);

// Quantization target names accepted by create: file type label
// ("Q4_K_M") for a requested string (case-insensitive, "q4_K" = Q4_K_M), or
// NULL when unsupported.
const char *store_quantize_label(const char *requested);

// ---------------------------------------------------------------------------
// The model as its prompt sees it (the prompt module chooses the source,
// renders and parses): strings borrowed from m.
void store_prompt_model(const struct store_model *m, struct prompt_model *out);

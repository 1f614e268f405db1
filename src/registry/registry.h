// registry: the model registry client of docs/spec/registry.md — pull and
// push over the Docker Registry HTTP API v2 (OCI distribution) with Ollama's
// media types, Ollama's key-signature bearer tokens (~/.ollama/id_ed25519),
// basic auth for standard registries, resumable parallel blob downloads
// (partial file + JSON sidecars, store.md §8), and the read side of the
// registry API that `ollama serve` answers under /v2/ (a mirror of its own
// store, optionally a pull-through cache of an upstream registry).
//
// Every body read into memory is capped; blob bytes stream to disk and are
// counted against the descriptor size; every digest is validated before a
// path is built from it; a manifest is written last, atomically, and only
// after each of its blobs verified.
//
// Error codes: ERR_NOT_FOUND (registry 404, missing local model),
// ERR_UNAUTHORIZED, ERR_DIGEST (hash mismatch), ERR_INVALID (bad name,
// digest or manifest), ERR_NETWORK (transport, retries exhausted), ERR_IO
// (disk), ERR_CANCELLED. Messages use Ollama's wording.
//
// Thread safety: a struct registry is shared by all requests of a server;
// every function may be called from any thread.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "util/util.h"

struct registry;

struct registry_config {
    // Private key path; NULL → $HOME/.ollama/id_ed25519 (created on first use).
    const char *key_path;
    // A part attempt with no byte for this long is aborted and retried at
    // once (registry.md §5.5: 30 s). 0 → default.
    int stall_timeout_ms;
    // Sleep before retry k is (1 << k) * backoff_unit_ms (spec: 1000). 0 → default.
    int backoff_unit_ms;
    // Extra hosts (with port) a token realm may live on besides the
    // registry's own host; NULL-terminated list or NULL.
    const char *const *realm_allow;
    // Basic auth for standard registries ("user:password"), NULL = none.
    // Sent only in answer to a Basic challenge, only to the registry host.
    const char *basic_auth;
    // Upstream of the /v2/ mirror ("http://host:port" or "https://host"),
    // NULL = the mirror serves only the local store.
    const char *mirror_upstream;
    // Registry that pulls of registry.ollama.ai names try first
    // ("http://host:port" or "https://host"; OLLAMA_PULL_MIRROR), NULL = none.
    const char *pull_mirror;
    // Smallest and largest part of a download (spec: 100 MB, 1000 MB);
    // 0 → defaults. Tests shrink them to exercise multi-part downloads.
    uint64_t part_min_bytes, part_max_bytes;
    // Keep blob writes in the page cache instead of O_DIRECT (tests of the
    // buffered path; file systems without O_DIRECT fall back by themselves).
    bool buffered_io;
};

// The store must outlive the registry.
int registry_new(struct registry **out, struct store *s, const struct registry_config *cfg,
                 struct err *e);
void registry_free(struct registry *r);

struct registry_opts {
    bool insecure;               // plain http:// to the registry (required for http)
    bool noprune;                // OLLAMA_NOPRUNE: keep layers the old manifest used
    store_progress_fn progress;  // may be NULL
    void *progress_ctx;
    const volatile int *cancel;  // non-zero → stop with ERR_CANCELLED (may be NULL)
};

// Pulls name (api.md §13): progress "pulling manifest", "pulling <hex12>",
// "verifying sha256 digest", "writing manifest", ["removing unused layers"],
// "success". Blobs present are skipped; downloads shared by digest across
// concurrent pulls; interrupted downloads resume.
int registry_pull(struct registry *r, const char *name, const struct registry_opts *o,
                  struct err *e);
// Pushes name (api.md §14): "retrieving manifest", "pushing <hex12>",
// "pushing manifest", "success".
int registry_push(struct registry *r, const char *name, const struct registry_opts *o,
                  struct err *e);

// ---------------------------------------------------------------------------
// The /v2/ mirror (read side). repo is "<namespace>/<model>".

// Manifest bytes for repo:ref (ref a tag or "sha256:<hex>"), from the store;
// with an upstream configured and the model missing, upstream's manifest is
// served as received while the model is pulled into the store in the
// background (the manifest is stored after its blobs verified). *media_type
// is the manifest's mediaType (static string). ERR_NOT_FOUND when absent.
int registry_mirror_manifest(struct registry *r, const char *repo, const char *ref, struct buf *out,
                             const char **media_type, struct err *e);
// Makes sure blob digest is in the store (pull-through from upstream's repo
// when configured and missing; concurrent requests share one download) and
// writes its path. With head_only, a missing blob is not fetched: *size
// gets upstream's length and path is "". ERR_NOT_FOUND when absent.
int registry_mirror_blob(struct registry *r, const char *repo, const char *digest, bool head_only,
                         char *path, size_t n_path, uint64_t *size, struct err *e);

// ---------------------------------------------------------------------------
// Auth pieces, public for tests (registry.md §4).

// Loads the ed25519 key at path; when create and the file is missing, makes
// a new pair (private 0600, .pub 0644, directory 0755). seed gets the 32-byte
// private seed, pub the 32-byte public key.
int registry_key_load(const char *path, bool create, uint8_t seed[32], uint8_t pub[32],
                      struct err *e);
// Writes the OpenSSH private key text for seed (check ints given) to out.
int registry_key_format(const uint8_t seed[32], uint32_t check, struct buf *out, struct err *e);
// Parses OpenSSH private key text (unencrypted ed25519 only).
int registry_key_parse(const char *text, size_t n, uint8_t seed[32], uint8_t pub[32],
                       struct err *e);
// "ssh-ed25519 <base64>" line without newline.
void registry_key_pub_line(const uint8_t pub[32], struct buf *out);

struct registry_challenge {
    char scheme[16];  // "Bearer", "Basic"
    char realm[1024];
    char service[256];
    char scope[1024];
};
int registry_challenge_parse(const char *header, struct registry_challenge *c, struct err *e);
// Token request URL (§4.3) for the challenge with the given ts and 16 nonce bytes.
int registry_token_url(const struct registry_challenge *c, int64_t ts, const uint8_t nonce[16],
                       struct buf *out, struct err *e);
// The Authorization value "<pub b64>:<sig b64>" signing "GET,<url>,<h>".
int registry_token_auth(const uint8_t seed[32], const uint8_t pub[32], const char *url,
                        struct buf *out, struct err *e);
// Part plan of §5.3: part size for a blob of total bytes (0 when total is 0).
uint64_t registry_part_size(uint64_t total, uint64_t min_bytes, uint64_t max_bytes);

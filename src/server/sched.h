// The scheduler of `ollama serve` (docs/spec/scheduler.md): which models are
// loaded, which runner process serves a request, keep-alive expiry, least-
// recently-used eviction, the bounded pending-load queue, memory fit, and
// runner crash recovery. Private to the server module.
//
// Lock order: sched.mu only; runner processes are started and killed with it
// released (a runner being loaded or unloaded is marked in its state).
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "json/json.h"
#include "util/util.h"

struct sched;
struct sched_runner;

#define SCHED_MAX_ADAPTERS 16  // as the runner's --lora

struct sched_config {
    const char *self_exe;   // the ollama binary (runners are `self_exe runner ...`)
    uint64_t max_loaded;    // 0 = 3 (CPU)
    uint64_t max_queue;     // pending loads; beyond → ERR_BUSY
    uint64_t num_parallel;  // slots per runner
    int64_t default_keep_alive_ns;
    int64_t load_timeout_ns;    // <= 0: no limit
    const char *kv_cache_type;  // "f16", "q8_0", "q4_0"
};

// What a request needs loaded. Strings are copied.
struct sched_request {
    const char *model_path;  // GGUF blob path: the model key
    const char *draft_path;  // DRAFT model's GGUF blob path (speculative decoding), or NULL
    // ADAPTER blob paths (LoRA GGUFs), part of the runner's identity: the same
    // model with other adapters is another load. At most SCHED_MAX_ADAPTERS.
    char *const *adapter_paths;
    size_t n_adapters;
    const char *name;    // display name (for /api/ps)
    const char *digest;  // manifest digest hex (for /api/ps)
    json_t *details;     // borrowed; copied into the runner for /api/ps
    int n_ctx;           // requested num_ctx (0: default), capped at the trained context
    int n_batch;         // 0: default
    int n_threads;       // 0: default
    bool embedding;      // embedding-only model: one slot
    bool keep_alive_set;
    int64_t keep_alive_ns;  // < 0 forever, 0 unload after the request
    // Returns true when the requesting client has gone away (may be NULL).
    bool (*cancelled)(void *ctx);
    void *cancel_ctx;
    // The vision projector blob (runner --mmproj), or NULL.
    const char *projector_path;
};

int sched_new(struct sched **out, const struct sched_config *cfg, struct err *e);
// Server shutdown, step 1: no new loads; every runner process is killed so
// requests still running end quickly (with an error) and release.
void sched_shutdown(struct sched *s);
// Step 2, once no request holds a runner: reaps everything and frees.
void sched_free(struct sched *s);

// Gets a runner for rq, loading (and evicting) as needed. On success the
// caller holds a reference: release it with sched_release. *load_ns is the
// time spent obtaining it (load_duration). Errors: ERR_BUSY when the queue
// is full, ERR_CANCELLED when the client left while waiting, ERR_NOMEM when
// the model can never fit, ERR_INTERNAL with the runner's last error lines
// when it failed to start.
int sched_acquire(struct sched *s, const struct sched_request *rq, struct sched_runner **out,
                  int64_t *load_ns, struct err *e);
// Drops a reference. failed = the runner misbehaved (connection refused or
// dropped mid-request): it is checked and, if dead, forgotten.
void sched_release(struct sched *s, struct sched_runner *r, bool failed);

// Loopback port of an acquired runner.
uint16_t sched_runner_port(const struct sched_runner *r);
// Per-slot context of a runner.
int sched_runner_n_ctx(const struct sched_runner *r);
// The runner's last error-like output lines ("" when none).
void sched_runner_last_error(const struct sched_runner *r, char *out, size_t n);
// Whether the runner process is still alive.
bool sched_runner_alive(struct sched_runner *r);

// Explicit unload (keep_alive 0 with an empty prompt, `ollama stop`): sets
// the runner's duration to 0 and unloads it once idle. Returns ERR_NOT_FOUND
// when no runner serves model_path.
int sched_expire(struct sched *s, const char *model_path);
// Blocks until no runner serves model_path (after sched_expire), up to
// timeout_ms.
void sched_wait_unloaded(struct sched *s, const char *model_path, int timeout_ms);

// The /api/ps response {"models":[...]}.
json_t *sched_ps_json(struct sched *s);
// Requests holding a runner (*active) and waiting in the load queue (*queued)
// now, for /metrics. Thread-safe.
void sched_counts(struct sched *s, uint64_t *active, uint64_t *queued);

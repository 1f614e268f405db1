// `ollama runner`: the process the server starts for one loaded model. It
// parses its flags, starts listening on 127.0.0.1:<port> at once (so the
// server can watch /health while the model loads), loads the model on a
// second thread, starts the batching loop, and serves until SIGTERM/SIGINT
// (the server normally ends it with SIGKILL). The protocol is written down
// in src/runner/PROTOCOL.md.
#include "runner/runner.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "runner/internal.h"
#include "vision/vision.h"

#define RUNNER_MAX_LORA 16

struct runner_args {
    const char *model_path;
    const char *draft_path;  // --draft: a draft model for speculative decoding
    // --lora (repeatable): LoRA adapters applied to the model (not the draft).
    const char *lora_paths[RUNNER_MAX_LORA];
    // --mmproj: the vision projector (else the model file's own tower).
    const char *mmproj_path;
    int64_t port;
    // --image-min-tokens: the fewest tokens a picture becomes in a Qwen-VL
    // tower (-1: Ollama's choice for the model, see load_vision).
    int image_min_tokens;
    struct model_options mo;
    bool no_context_shift;
};

static int usage_error(const char *fmt, const char *arg)
{
    fputs("error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nusage: ollama runner --model PATH --port N [--draft PATH] [--lora PATH]... "
          "[--mmproj PATH] [--image-min-tokens N] [--ctx-size N] [--parallel N] "
          "[--batch-size N] [--threads N] [--kv-cache-type f16|q8_0|f32] [--embedding] "
          "[--no-context-shift] [--n-gpu-layers N] [--flash-attn] [--no-mmap]\n",
          stderr);
    return 1;
}

static int int_flag(const char *name, const char *v, int64_t min, int64_t max, int64_t *out)
{
    struct err e = {0};
    if (!v)
        return usage_error("flag needs an argument: %s", name);
    if (str_to_i64(v, min, max, out, &e) < 0) {
        fprintf(stderr, "error: invalid value \"%s\" for %s: %s\n", v, name, e.msg);
        return 1;
    }
    return 0;
}

// A path flag's value: present and not empty.
static int path_flag(const char *name, const char *val, const char **out)
{
    if (!val || !*val)
        return usage_error("flag needs an argument: %s", name);
    *out = val;
    return 0;
}

// The int flags of the model options: range and field (-1: accepted and
// ignored).
static const struct {
    const char *name;
    int64_t min, max;
    ptrdiff_t off;
} int_flags[] = {
    {"--ctx-size", 1, 1 << 24, offsetof(struct runner_args, mo.n_ctx)},
    {"--parallel", 1, 256, offsetof(struct runner_args, mo.n_slots)},
    {"--batch-size", 1, 1 << 16, offsetof(struct runner_args, mo.n_batch)},
    {"--threads", 0, 1024, offsetof(struct runner_args, mo.n_threads)},
    {"--n-gpu-layers", -1, 1 << 20, -1},  // CPU engine: nothing to offload
    {"--image-min-tokens", 0, 1 << 16, offsetof(struct runner_args, image_min_tokens)},
};

// One flag that takes a value (val: NULL when the command line ended).
static int value_flag(struct runner_args *a, const char *name, const char *val)
{
    for (size_t i = 0; i < sizeof int_flags / sizeof int_flags[0]; i++) {
        if (strcmp(name, int_flags[i].name) != 0)
            continue;
        int64_t v = 0;
        int rc = int_flag(name, val, int_flags[i].min, int_flags[i].max, &v);
        if (rc == 0 && int_flags[i].off >= 0)
            *(int *)((char *)a + int_flags[i].off) = (int)v;
        return rc;
    }
    int rc = 0;
    if (strcmp(name, "--model") == 0) {
        rc = path_flag(name, val, &a->model_path);
    } else if (strcmp(name, "--draft") == 0) {
        rc = path_flag(name, val, &a->draft_path);
    } else if (strcmp(name, "--lora") == 0) {
        const char *path = NULL;
        if ((rc = path_flag(name, val, &path)) == 0) {
            if (a->mo.n_lora == RUNNER_MAX_LORA)
                return usage_error("too many adapters (at most 16): %s", path);
            a->lora_paths[a->mo.n_lora++] = path;
            a->mo.lora_paths = a->lora_paths;
        }
    } else if (strcmp(name, "--mmproj") == 0) {
        rc = path_flag(name, val, &a->mmproj_path);
    } else if (strcmp(name, "--port") == 0) {
        rc = int_flag(name, val, 1, 65535, &a->port);
    } else if (strcmp(name, "--kv-cache-type") == 0) {
        if (!val)
            return usage_error("flag needs an argument: %s", name);
        int t = model_kv_type_parse(val);
        if (t < 0)
            return usage_error("unsupported --kv-cache-type \"%s\" (f16, q8_0, q4_0 or f32)", val);
        a->mo.kv_type = (enum model_kv_type)t;
    } else {
        return usage_error("unknown flag: %s", name);
    }
    return rc;
}

static int parse_args(int argc, char **argv, struct runner_args *a)
{
    memset(a, 0, sizeof(*a));
    a->image_min_tokens = -1;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        char name[64];
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) != 0)
            return usage_error("unexpected argument \"%s\"", arg);
        snprintf(name, sizeof(name), "%.*s", (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
        bool is_bool = strcmp(name, "--embedding") == 0 ||
                       strcmp(name, "--no-context-shift") == 0 ||
                       strcmp(name, "--flash-attn") == 0 || strcmp(name, "--no-mmap") == 0;
        if (is_bool) {
            if (eq)
                return usage_error("flag %s takes no value", name);
            if (strcmp(name, "--no-context-shift") == 0)
                a->no_context_shift = true;
            // --embedding: accepted; every runner keeps the final hidden
            // states (a copy of n_embd floats per output row), so any model
            // can embed. --flash-attn, --no-mmap: accepted; the CPU engine
            // always maps the file and has one attention path.
            continue;
        }
        int rc = value_flag(a, name, eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL));
        if (rc)
            return rc;
    }
    a->mo.embeddings = true;
    if (!a->model_path)
        return usage_error("%s", "--model is required");
    if (!a->port)
        return usage_error("%s", "--port is required");
    return 0;
}

// The model's pooling type (GGUF <arch>.pooling_type; generative models
// without it: mean of the final hidden states).
static enum runner_pooling pooling_of(const struct model *m)
{
    switch (model_pooling(m)) {
    case MODEL_POOLING_CLS:
        return RUNNER_POOL_CLS;
    case MODEL_POOLING_LAST:
        return RUNNER_POOL_LAST;
    default:
        return RUNNER_POOL_MEAN;  // MEAN; NONE / RANK have no single-vector form
    }
}

static int build_vocab(struct runner *rn, struct err *e)
{
    int32_t n = tokenizer_n_vocab(rn->tok);
    const char **pieces = xcalloc((size_t)n, sizeof(char *));
    uint32_t *lens = xcalloc((size_t)n, sizeof(uint32_t));
    bool *eog = xcalloc((size_t)n, sizeof(bool));
    for (int32_t i = 0; i < n; i++) {
        struct str p = tokenizer_piece(rn->tok, i, true);
        pieces[i] = p.ptr;
        lens[i] = (uint32_t)p.len;
        eog[i] = tokenizer_is_eog(rn->tok, i);
    }
    int rc = sample_vocab_new(&rn->vocab, n, pieces, lens, eog, e);
    free(pieces);
    free(lens);
    free(eog);
    return rc;
}

int runner_attach_model(struct runner *rn, struct model *m, struct err *e)
{
    rn->model = m;
    rn->tok = model_tokenizer(m);
    rn->n_ctx = model_n_ctx(m);
    rn->add_bos = tokenizer_add_bos(rn->tok);
    rn->pooling = pooling_of(m);
    return build_vocab(rn, e);
}

struct load_job {
    struct runner *rn;
    const struct runner_args *args;
    struct err e;
    int rc;
};

// The vision tower: --mmproj, or the model file's own (Ollama's layout).
// Its projection must have the text model's width.
static int load_vision(struct runner *rn, const struct runner_args *a, struct err *e)
{
    const char *path = a->mmproj_path;
    if (!path && vision_gguf_has_tower(model_gguf(rn->model)))
        path = a->model_path;
    if (!path)
        return 0;
    int rc = vision_model_load(&rn->vision, path, a->mo.n_threads, e);
    if (rc == ERR_UNSUPPORTED) {  // text works; a request with images is refused
        log_warn("vision tower not loaded: %s", e->msg);
        err_clear(e);
        return 0;
    }
    if (rc < 0)
        return rc;
    if (vision_model_n_embd(rn->vision) != model_n_embd_inp(rn->model))
        return err_set(e, ERR_FORMAT,
                       "vision projector output width %d does not match the model's %d",
                       vision_model_n_embd(rn->vision), model_n_embd_inp(rn->model));
    // Ollama starts llama-server with --image-min-tokens 1024 for the Qwen-VL
    // families (llm/llama_server.go, qwenVLServerArgs: mtmd says grounding
    // and counting need 1024 image tokens); --image-min-tokens overrides.
    int min_tokens = a->image_min_tokens;
    if (min_tokens < 0) {
        static const char *const qwen_vl[] = {"qwen2vl", "qwen25vl", "qwen3vl", "qwen3vlmoe"};
        struct str arch = {0};
        bool has = gguf_get_str(model_gguf(rn->model), "general.architecture", &arch);
        min_tokens = 0;
        for (size_t i = 0; has && i < sizeof qwen_vl / sizeof qwen_vl[0]; i++)
            if (str_eq_cstr(arch, qwen_vl[i]))
                min_tokens = 1024;
    }
    vision_model_set_min_tokens(rn->vision, min_tokens);
    log_info("vision tower loaded: projector=%s (%s)", vision_model_projector(rn->vision), path);
    return 0;
}

static void *load_thread(void *p)
{
    struct load_job *j = p;
    struct runner *rn = j->rn;
    int64_t t0 = time_monotonic_ns();
    j->rc = model_load(&rn->model, j->args->model_path, &j->args->mo, &j->e);
    if (j->rc == 0)
        j->rc = runner_attach_model(rn, rn->model, &j->e);
    if (j->rc == 0 && j->args->draft_path)
        j->rc = runner_draft_load(&rn->draft, j->args->draft_path, rn->model, &j->e);
    if (j->rc == 0)
        j->rc = load_vision(rn, j->args, &j->e);
    if (j->rc == 0)
        j->rc = runner_loop_start(&rn->loop, rn, &j->e);
    if (j->rc < 0) {
        snprintf(rn->error, sizeof(rn->error), "%s", j->e.msg);
        atomic_store(&rn->status, RUNNER_FAILED);
        return NULL;
    }
    log_info("model loaded: arch=%s ctx=%d slots=%d batch=%d threads=%d kv=%s in %.2fs",
             model_arch_name(rn->model), model_n_ctx(rn->model), model_n_slots(rn->model),
             model_n_batch(rn->model), model_n_threads(rn->model), model_kv_type_name(rn->model),
             (double)(time_monotonic_ns() - t0) / 1e9);
    if (rn->draft)
        log_info("draft model loaded: arch=%s (%s)", model_arch_name(rn->draft->m),
                 j->args->draft_path);
    atomic_store(&rn->status, RUNNER_READY);
    return NULL;
}

int runner_main(int argc, char **argv)
{
    struct runner_args args;
    if (parse_args(argc, argv, &args))
        return 1;
    struct env_config cfg;
    env_config_load(&cfg);
    log_set_level(cfg.debug_level);
    env_config_deinit(&cfg);

    // Signals are taken synchronously by this thread; every other thread
    // inherits the blocked mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct runner *rn = xcalloc(1, sizeof(*rn));
    atomic_store(&rn->status, RUNNER_LOADING);
    rn->no_context_shift = args.no_context_shift;
    struct err e = {0};
    if (runner_http_start(rn, (uint16_t)args.port, &e) < 0) {
        fprintf(stderr, "error: %s\n", e.msg);
        free(rn);
        return 1;
    }
    log_info("runner listening on 127.0.0.1:%d, loading %s", (int)args.port, args.model_path);

    struct load_job job = {.rn = rn, .args = &args};
    pthread_t loader;
    if (pthread_create(&loader, NULL, load_thread, &job) != 0) {
        fprintf(stderr, "error: cannot start the loading thread\n");
        runner_http_stop(rn);
        free(rn);
        return 1;
    }
    bool joined = false;
    int exit_code = 0;
    for (;;) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        if (!joined && atomic_load(&rn->status) != RUNNER_LOADING) {
            pthread_join(loader, NULL);
            joined = true;
        }
        if (atomic_load(&rn->status) == RUNNER_FAILED) {
            fprintf(stderr, "error loading model: %s\n", rn->error);
            exit_code = 1;
            break;
        }
    }
    if (!joined && atomic_load(&rn->status) != RUNNER_LOADING) {
        pthread_join(loader, NULL);
        joined = true;
    }
    if (!joined) {
        // Still loading: the load cannot be interrupted, so leave at once.
        fprintf(stderr, "runner stopped while loading\n");
        _exit(exit_code ? exit_code : 1);
    }
    runner_loop_stop(rn->loop);
    runner_http_stop(rn);
    runner_loop_free(rn->loop);
    sample_vocab_free(rn->vocab);
    runner_draft_free(rn->draft);
    vision_model_free(rn->vision);
    model_free(rn->model);
    free(rn);
    return exit_code;
}

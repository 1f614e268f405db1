// Model summary for `show` and /api/tags: parameter count from the tensor
// shapes and its Ollama formatting (docs/spec/gguf.md §8), the quantization label
// from general.file_type (§6.1), and the model_info map (docs/spec/api.md §5).
#include "gguf/gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void gguf_format_param_count(uint64_t n, char *out, size_t n_out)
{
    double v = (double)n;
    if (n >= 1000000000ull) {
        double x = v / 1e9;
        snprintf(out, n_out, x == floor(x) ? "%.0fB" : "%.1fB", x);
    } else if (n >= 1000000ull) {
        double x = v / 1e6;
        snprintf(out, n_out, x == floor(x) ? "%.0fM" : "%.2fM", x);
    } else if (n >= 1000ull) {
        snprintf(out, n_out, "%.0fK", v / 1e3);
    } else {
        snprintf(out, n_out, "%llu", (unsigned long long)n);
    }
}

static uint64_t param_count(const struct gguf *g)
{
    uint64_t total = 0;
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        uint64_t n = gguf_tensor_n_elements(gguf_tensor_at(g, i));
        total = total + n < total ? UINT64_MAX : total + n;  // saturate (hostile files)
    }
    return total;
}

void gguf_summarize(const struct gguf *g, struct gguf_summary *out)
{
    memset(out, 0, sizeof(*out));
    struct str arch = gguf_architecture(g);
    snprintf(out->architecture, sizeof(out->architecture), "%.*s", (int)arch.len, arch.ptr);
    out->parameter_count = param_count(g);
    gguf_format_param_count(out->parameter_count, out->parameter_size, sizeof(out->parameter_size));
    uint32_t ft;
    out->file_type = gguf_get_u32(g, "general.file_type", &ft) ? ft : UINT32_MAX;
    // Ollama's accessor treats a missing key and the value 0 alike and prints
    // "unknown" for both (docs/spec/gguf.md §6.1); we match it.
    const char *name = NULL;
    if (out->file_type != UINT32_MAX && out->file_type != 0)
        name = gguf_file_type_name(out->file_type);
    snprintf(out->quantization_level, sizeof(out->quantization_level), "%s",
             name ? name : "unknown");
}

int gguf_model_info(const struct gguf *g, bool verbose, gguf_model_info_fn fn, void *ctx)
{
    struct gguf_value pc = {.type = GGUF_VAL_UINT64};
    pc.v.u64 = param_count(g);
    bool pc_done = false;
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const struct gguf_kv *kv = gguf_kv_at(g, i);
        if (str_eq_cstr(kv->key, "general.name") || str_eq_cstr(kv->key, "tokenizer.chat_template"))
            continue;
        int rc;
        if (str_eq_cstr(kv->key, "general.parameter_count")) {
            rc = fn(ctx, kv->key, &pc, false);
            pc_done = true;
        } else {
            bool elided = !verbose && kv->val.type == GGUF_VAL_ARRAY && kv->val.arr_count > 5;
            rc = fn(ctx, kv->key, &kv->val, elided);
        }
        if (rc)
            return rc;
    }
    if (!pc_done)
        return fn(ctx, STR_LIT("general.parameter_count"), &pc, false);
    return 0;
}

// PEFT LoRA folders (adapter_config.json + adapter_model.safetensors) to
// llama.cpp's LoRA GGUF (general.type "adapter", adapter.type "lora",
// adapter.lora.alpha, "<weight>.lora_a" [n_in, r] and "<weight>.lora_b"
// [r, n_out]), for `ADAPTER <folder>` in a Modelfile. The base model's GGUF
// says the architecture (PEFT does not), which names map how, and every pair
// is checked against the weight it adapts, so an adapter made for another
// model is refused at create instead of failing when the model loads.
//
// For llama-style RoPE the base's Q/K rows were reordered at conversion;
// W + B A keeps that order only if B's rows are reordered the same way (A's
// columns are inputs and stay), as llama.cpp's convert_lora_to_gguf.py does.
#include "convert/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct base {
    struct gguf *g;
    uint32_t heads, heads_kv;
};

// The GGUF weight a PEFT tensor adapts and which half it is: false when the
// name is not "...<module>.lora_A.weight" / "...lora_B.weight".
static bool lora_target(const struct conv_arch *a, const char *hf, char *w, size_t n, bool *is_b)
{
    static const char *const prefix = "base_model.model.";
    if (strncmp(hf, prefix, strlen(prefix)) == 0)
        hf += strlen(prefix);
    size_t len = strlen(hf);
    static const char *const suffix[2] = {".lora_A.weight", ".lora_B.weight"};
    for (int b = 0; b < 2; b++) {
        size_t sl = strlen(suffix[b]);
        if (len <= sl || strcmp(hf + len - sl, suffix[b]) != 0)
            continue;
        char module[256];
        snprintf(module, sizeof module, "%.*s.weight", (int)(len - sl), hf);
        conv_rename(a->renames, module, w, n);
        *is_b = b == 1;
        return true;
    }
    return false;
}

// Checks a and b against the base weight w (GGUF dims: w [n_in, n_out],
// a [n_in, r], b [r, n_out]).
static int check_pair(const struct base *bm, const char *w, const struct conv_plan *a,
                      const struct conv_plan *b, struct err *e)
{
    const struct gguf_tensor *t = gguf_tensor_find(bm->g, w);
    if (!t)
        return err_set(e, ERR_INVALID, "adapter tensor %s: %s does not exist in the base model",
                       a->srcs[0]->name, w);
    if (t->ne[0] != a->ne[0] || t->ne[1] != b->ne[1] || a->ne[1] != b->ne[0])
        return err_set(e, ERR_INVALID,
                       "adapter does not match the base model: %s is [%" PRId64 ", %" PRId64
                       "], its lora_a [%" PRId64 ", %" PRId64 "] and lora_b [%" PRId64 ", %" PRId64
                       "]",
                       w, t->ne[0], t->ne[1], a->ne[0], a->ne[1], b->ne[0], b->ne[1]);
    return 0;
}

static void plan_lora(struct conv_plan *p, const struct st_tensor *t, const char *w, bool is_b,
                      uint32_t permute)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof p->name, "%s.lora_%c", w, is_b ? 'b' : 'a');
    p->srcs = xcalloc(1, sizeof(*p->srcs));
    p->srcs[0] = t;
    p->n_srcs = 1;
    p->n_dims = 2;
    p->ne[0] = t->shape[1];
    p->ne[1] = t->shape[0];
    p->ne[2] = p->ne[3] = 1;
    p->type = t->dtype == ST_BF16 ? GGUF_TYPE_BF16 : GGUF_TYPE_F16;
    p->permute_heads = is_b ? permute : 0;
}

static uint32_t lora_permute(const struct conv_arch *a, const struct base *bm, const char *w)
{
    if (!a->permute_qk)
        return 0;
    if (cstr_ends_with(w, ".attn_q.weight"))
        return bm->heads;
    return cstr_ends_with(w, ".attn_k.weight") ? bm->heads_kv : 0;
}

// One plan entry per PEFT tensor; then every weight must have its a and b.
static int plan_adapter(struct conv_job *j, const struct base *bm, struct err *e)
{
    j->plan = xcalloc(j->set.n + 1, sizeof(*j->plan));
    for (size_t i = 0; i < j->set.n; i++) {
        const struct st_tensor *t = &j->set.v[i];
        char w[GGUF_MAX_NAME_LEN + 1];
        bool is_b;
        if (!lora_target(j->c.a, t->name, w, sizeof w, &is_b) || t->n_dims != 2 ||
            strlen(w) + 7 > GGUF_MAX_NAME_LEN)
            return err_set(e, ERR_UNSUPPORTED,
                           "adapter tensor %s is not a LoRA A or B matrix (only LoRA adapters "
                           "without modules_to_save can be converted)",
                           t->name);
        if (!st_dtype_float(t->dtype))
            return err_set(e, ERR_UNSUPPORTED, "adapter tensor %s: dtype %s cannot be converted",
                           t->name, st_dtype_name(t->dtype));
        plan_lora(&j->plan[j->n_plan++], t, w, is_b, lora_permute(j->c.a, bm, w));
        j->total += t->n_bytes;
    }
    int rc = conv_sort_plan(j, 0, e);
    for (size_t i = 0; rc == 0 && i < j->n_plan; i += 2) {
        const struct conv_plan *a = &j->plan[i], *b = i + 1 < j->n_plan ? &j->plan[i + 1] : NULL;
        size_t wl = strlen(a->name) - strlen(".lora_a");
        if (!b || !cstr_ends_with(a->name, ".lora_a") || !cstr_ends_with(b->name, ".lora_b") ||
            strncmp(a->name, b->name, wl) != 0)
            return err_set(e, ERR_FORMAT, "adapter tensor %s has no %s partner", a->srcs[0]->name,
                           cstr_ends_with(a->name, ".lora_a") ? "B" : "A");
        char w[GGUF_MAX_NAME_LEN + 1];
        snprintf(w, sizeof w, "%.*s", (int)wl, a->name);
        rc = check_pair(bm, w, a, b, e);
    }
    return rc;
}

// adapter_config.json: a LoRA (peft_type LORA, no DoRA) and its alpha; with
// rsLoRA (scale alpha / sqrt(r)) the alpha written is alpha * sqrt(r), so
// that llama.cpp's alpha / r gives the same scale.
static int read_adapter_config(struct conv_job *j, const struct convert_file *files, size_t n,
                               float *alpha, struct err *e)
{
    struct buf b;
    int rc = conv_read_small(files, n, "adapter_config.json", &b, e);
    struct err je = {0};
    if (rc == 0 && !b.data)
        rc = err_set(e, ERR_INVALID, "adapter_config.json not found");
    if (rc == 0 &&
        (jsonx_parse(b.data, b.len, &j->c.config, &je) < 0 || !json_is_object(j->c.config)))
        rc =
            err_set(e, ERR_FORMAT, "adapter_config.json: %s", je.msg[0] ? je.msg : "not an object");
    buf_deinit(&b);
    if (rc < 0)
        return rc;
    const char *type = json_string_value(json_object_get(j->c.config, "peft_type"));
    if ((type && strcmp(type, "LORA") != 0) ||
        json_is_true(json_object_get(j->c.config, "use_dora")))
        return err_set(e, ERR_UNSUPPORTED,
                       "adapter_config.json: only LoRA adapters are supported (%s%s)",
                       type ? type : "",
                       json_is_true(json_object_get(j->c.config, "use_dora")) ? " DoRA" : "");
    float r = 0;
    if (!conv_cfg_f32(&j->c, "lora_alpha", alpha))
        return err_set(e, ERR_FORMAT, "adapter_config.json: no lora_alpha");
    if (json_is_true(json_object_get(j->c.config, "use_rslora")) && conv_cfg_f32(&j->c, "r", &r) &&
        r > 0)
        *alpha *= sqrtf(r);
    return 0;
}

static int open_base(struct base *bm, const char *path, struct err *e)
{
    struct err ge = {0};
    if (gguf_open(&bm->g, path, &ge) < 0)
        return err_set(e, ERR_FORMAT, "base model: %s", ge.msg);
    gguf_get_arch_u32(bm->g, "attention.head_count", &bm->heads);
    if (!gguf_get_arch_u32(bm->g, "attention.head_count_kv", &bm->heads_kv))
        bm->heads_kv = bm->heads;
    return 0;
}

int convert_adapter(const struct convert_file *files, size_t n, const char *base_path,
                    const char *out_path, struct convert_info *info, struct err *e)
{
    struct conv_job j = {0};
    struct base bm = {0};
    float alpha = 0;
    if (info)
        memset(info, 0, sizeof(*info));
    int rc = open_base(&bm, base_path, e);
    char arch[32] = "";
    if (rc == 0) {
        struct str as = gguf_architecture(bm.g);
        snprintf(arch, sizeof arch, "%.*s", (int)as.len, as.ptr);
        j.c.a = conv_arch_by_gguf(arch);
        if (!j.c.a)
            rc = err_set(e, ERR_UNSUPPORTED,
                         "safetensors adapters for architecture %s are not supported", arch);
    }
    if (rc == 0)
        rc = read_adapter_config(&j, files, n, &alpha, e);
    if (rc == 0)
        rc = conv_load_tensors(&j, files, n, e);
    if (rc == 0)
        rc = plan_adapter(&j, &bm, e);
    struct gguf_writer *w = NULL;
    if (rc == 0)
        rc = gguf_writer_open(&w, out_path, e);
    if (rc == 0) {
        gguf_writer_kv_str(w, "general.architecture", arch);
        gguf_writer_kv_str(w, "general.type", "adapter");
        gguf_writer_kv_u32(w, "general.file_type", 1);
        gguf_writer_kv_u32(w, "general.quantization_version", 2);
        gguf_writer_kv_str(w, "adapter.type", "lora");
        gguf_writer_kv_f32(w, "adapter.lora.alpha", alpha);
        rc = conv_write_body(&j, w, info, e);
    }
    if (rc == 0 && info)
        snprintf(info->arch, sizeof info->arch, "%s", arch);
    if (bm.g)
        gguf_close(bm.g);
    conv_job_free(&j);
    return rc;
}

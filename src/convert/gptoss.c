// gpt-oss (GptOssForCausalLM) experts. Hugging Face stores each layer's
// experts as one tensor per projection with the experts outermost, and the
// gate and up projections fused with their rows interleaved (gate on even
// rows, up on odd ones): as MXFP4 (`*_blocks` [E, rows, n/32, 16] U8 and
// `*_scales` [E, rows, n/32] U8, E8M0) in OpenAI's release, or as floats
// ([E, n_in, rows], transposed) in dequantized copies. The GGUF wants
// ffn_gate_exps / ffn_up_exps / ffn_down_exps [n_in, rows, E] and their
// biases [rows, E]; MXFP4 stays MXFP4 (ggml's block: the scale byte, then 16
// bytes holding element j in the low and j + 16 in the high nibble of byte
// j), floats become F16 (BF16 from BF16). Facts from Ollama's
// convert_gptoss.go and llama.cpp's GptOssModel.
#include "convert/internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/quant/quant.h"

// HF's packing (element 2k in the low, 2k + 1 in the high nibble of byte k)
// to ggml's.
static void repack_nibbles(const uint8_t *in, uint8_t *out)
{
    for (int j = 0; j < 8; j++) {
        uint8_t a = in[j], b = in[j + 8];
        out[2 * j] = (uint8_t)((a & 0x0F) | (b << 4));
        out[2 * j + 1] = (uint8_t)((a >> 4) | (b & 0xF0));
    }
}

// MXFP4 rows r * stride + offset of every expert, in ggml blocks.
static int write_mxfp4(struct gguf_writer *w, const struct conv_plan *p, float *f, void *o,
                       struct err *e)
{
    (void)f;
    const struct st_tensor *b = p->srcs[0], *s = p->scales;
    int64_t rows = b->shape[1], nb = b->shape[2], out_rows = p->ne[1];
    uint8_t *buf = o;
    size_t k = 0, cap = CONV_CHUNK_ELEMS * sizeof(float), row_bytes = (size_t)nb * 17;
    int rc = 0;
    for (int64_t x = 0; rc == 0 && x < p->ne[2]; x++)
        for (int64_t r = 0; rc == 0 && r < out_rows; r++) {
            int64_t src = x * rows + r * p->stride + p->offset;
            for (int64_t i = 0; i < nb; i++) {
                buf[k + (size_t)i * 17] = s->data[src * nb + i];
                repack_nibbles(b->data + (src * nb + i) * 16, buf + k + (size_t)i * 17 + 1);
            }
            k += row_bytes;
            if (k + row_bytes > cap || (x == p->ne[2] - 1 && r == out_rows - 1)) {
                rc = gguf_writer_write_data(w, buf, k, e);
                k = 0;
            }
        }
    return rc;
}

// Float experts [E, n_in, n_out] to the GGUF's [n_in, rows, E]: element
// (c, r, x) from source (x, c, r * stride + offset). A bias [E, n_out] is the
// case n_in = 1, its GGUF [rows, E].
static int write_gather(struct gguf_writer *w, const struct conv_plan *p, float *f, void *o,
                        struct err *e)
{
    const struct st_tensor *t = p->srcs[0];
    bool bias = t->n_dims == 2;
    int64_t n_in = bias ? 1 : t->shape[1], n_out = t->shape[t->n_dims - 1];
    int64_t experts = bias ? p->ne[1] : p->ne[2], rows = bias ? p->ne[0] : p->ne[1];
    size_t k = 0;
    int rc = 0;
    for (int64_t x = 0; rc == 0 && x < experts; x++)
        for (int64_t r = 0; rc == 0 && r < rows; r++)
            for (int64_t c = 0; rc == 0 && c < n_in; c++) {
                int64_t src = (x * n_in + c) * n_out + r * p->stride + p->offset;
                conv_load_floats(t, (uint64_t)src, &f[k++], 1);
                if (k == CONV_CHUNK_ELEMS) {
                    rc = gguf_writer_write_data(w, o, conv_store_floats(f, k, p->type, o), e);
                    k = 0;
                }
            }
    if (rc == 0 && k)
        rc = gguf_writer_write_data(w, o, conv_store_floats(f, k, p->type, o), e);
    return rc;
}

// The projections, by the HF name's tail after "mlp.experts.".
enum { GATE_UP, DOWN };
enum { BLOCKS, SCALES, BIAS, FLOAT };
static const struct {
    const char *tail;
    int proj, form;
} forms[] = {
    {"gate_up_proj_blocks", GATE_UP, BLOCKS}, {"gate_up_proj_scales", GATE_UP, SCALES},
    {"gate_up_proj_bias", GATE_UP, BIAS},     {"gate_up_proj", GATE_UP, FLOAT},
    {"down_proj_blocks", DOWN, BLOCKS},       {"down_proj_scales", DOWN, SCALES},
    {"down_proj_bias", DOWN, BIAS},           {"down_proj", DOWN, FLOAT},
};

static int bad_shape(const struct st_tensor *t, struct err *e)
{
    return err_set(e, ERR_FORMAT, "tensor %s: unexpected shape or dtype for gpt-oss experts",
                   t->name);
}

// The shapes and dtypes each form must have; *n_in and *rows of the GGUF.
static int check_form(const struct conv_job *j, const struct st_tensor *t, int form,
                      const struct st_tensor **scales, int64_t *n_in, int64_t *rows, struct err *e)
{
    const int64_t *s = t->shape;
    if (form == BLOCKS) {
        char name[300];
        snprintf(name, sizeof name, "%.*s_scales", (int)(strlen(t->name) - strlen("_blocks")),
                 t->name);
        *scales = conv_find_tensor(j, name);
        if (!*scales)
            return err_set(e, ERR_FORMAT, "tensor %s has no %s", t->name, name);
        const int64_t *c = (*scales)->shape;
        // a row of blocks fits the writer's buffer (n_in up to 480K)
        if (t->dtype != ST_U8 || t->n_dims != 4 || s[3] != 16 || s[2] > 15000 ||
            (*scales)->dtype != ST_U8 || (*scales)->n_dims != 3 || c[0] != s[0] || c[1] != s[1] ||
            c[2] != s[2])
            return bad_shape(t, e);
        *n_in = s[2] * 32;
        *rows = s[1];
    } else if (form == BIAS) {
        if (!st_dtype_float(t->dtype) || t->n_dims != 2)
            return bad_shape(t, e);
        *n_in = 1;
        *rows = s[1];
    } else {
        if (!st_dtype_float(t->dtype) || t->n_dims != 3)
            return bad_shape(t, e);
        *n_in = s[1];
        *rows = s[2];
    }
    return 0;
}

static void add_plan(struct conv_job *j, const struct st_tensor *t, int layer, const char *proj,
                     int form, const struct st_tensor *scales, int64_t n_in, int64_t rows,
                     int64_t stride, int64_t offset)
{
    struct conv_plan *p = &j->plan[j->n_plan++];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof p->name, "blk.%d.ffn_%s_exps.%s", layer, proj,
             form == BIAS ? "bias" : "weight");
    p->srcs = xcalloc(1, sizeof(*p->srcs));
    p->srcs[0] = t;
    p->n_srcs = 1;
    p->scales = scales;
    p->stride = stride;
    p->offset = offset;
    p->write = form == BLOCKS ? write_mxfp4 : write_gather;
    p->type = form == BLOCKS        ? GGUF_TYPE_MXFP4
              : form == BIAS        ? GGUF_TYPE_F32
              : t->dtype == ST_BF16 ? GGUF_TYPE_BF16
                                    : GGUF_TYPE_F16;
    p->n_dims = form == BIAS ? 2 : 3;
    p->ne[0] = form == BIAS ? rows / stride : n_in;
    p->ne[1] = form == BIAS ? t->shape[0] : rows / stride;
    p->ne[2] = form == BIAS ? 1 : t->shape[0];
    p->ne[3] = 1;
}

int conv_gptoss_plan(struct conv_job *j, const struct st_tensor *t, struct err *e)
{
    int layer, at = 0;
    if (sscanf(t->name, "model.layers.%d.mlp.experts.%n", &layer, &at) != 1 || at == 0 || layer < 0)
        return 0;
    const char *tail = t->name + at;
    size_t i = 0;
    while (i < sizeof forms / sizeof forms[0] && strcmp(tail, forms[i].tail) != 0)
        i++;
    if (i == sizeof forms / sizeof forms[0])
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: not a gpt-oss expert tensor", t->name);
    const struct st_tensor *scales = NULL;
    int64_t n_in = 0, rows = 0;
    int form = forms[i].form, rc;
    if (form == SCALES) {  // taken with its blocks; alone it is an error
        char name[300];
        snprintf(name, sizeof name, "%.*s_blocks", (int)(strlen(t->name) - strlen("_scales")),
                 t->name);
        return conv_find_tensor(j, name)
                   ? 1
                   : err_set(e, ERR_FORMAT, "tensor %s has no %s", t->name, name);
    }
    if ((rc = check_form(j, t, form, &scales, &n_in, &rows, e)) < 0)
        return rc;
    if (form == BLOCKS && n_in % 32 != 0)
        return bad_shape(t, e);
    if (forms[i].proj == DOWN) {
        add_plan(j, t, layer, "down", form, scales, n_in, rows, 1, 0);
        return 1;
    }
    if (rows % 2 != 0)
        return err_set(e, ERR_FORMAT, "tensor %s: %" PRId64 " fused gate/up rows are odd", t->name,
                       rows);
    add_plan(j, t, layer, "gate", form, scales, n_in, rows, 2, 0);
    add_plan(j, t, layer, "up", form, scales, n_in, rows, 2, 1);
    return 1;
}

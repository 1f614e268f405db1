// The Mamba-2 mixer shared by the hybrid families (nemotron_h.c,
// granitehybrid.c; docs/spec/architectures.md §12.3, llama.cpp's
// build_mamba2_layer):
//
//   [z (di) | xBC (di + 2GN) | dt (H)] = ssm_in · h
//   xBC = SiLU(causal depthwise conv(xBC) + conv bias)    state: rs.conv
//   x (H heads of P) | B (G groups of N) | C (G groups of N) = xBC
//   y = scan(x, softplus(dt + dt_bias), A, B, C) + D · x   state: rs.ssm
//   y = y · SiLU(z)
//   y = RMSNorm per group of di/G values (ssm_norm)
//   out = ssm_out · y
#include "model/internal.h"

#include <math.h>
#include <stdlib.h>

// A layer's Mamba-2 weights (model_layer.mixer).
struct model_mamba2_layer {
    struct engine_tensor in, out;  // ssm_in [n_embd, d_proj], ssm_out [di, n_embd]
    const float *conv_w, *conv_b;  // [K × conv_ch], [conv_ch] or NULL
    const float *dt_b, *A, *D;     // [H] each
    const float *norm;             // [di] (G groups of di/G) or NULL
    struct engine_conv1d conv;
    struct engine_ssm_scan scan;
};

// The mixer's shape, from the ssm.* keys.
struct mamba2_shape {
    int d_conv, d_inner, d_state, n_group, n_head;
};

static int mamba2_shape(struct model *m, struct mamba2_shape *sh, struct err *e)
{
    static const char *const keys[] = {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                                       "ssm.group_count", "ssm.time_step_rank"};
    int *vals[] = {&sh->d_conv, &sh->d_inner, &sh->d_state, &sh->n_group, &sh->n_head};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint32_t v;
        if (!gguf_get_arch_u32(m->g, keys[i], &v) || v < 1 || v > (1u << 20))
            return err_set(e, ERR_FORMAT, "missing or invalid key %s", keys[i]);
        *vals[i] = (int)v;
    }
    if (sh->d_conv > 64 || sh->d_inner % sh->n_head != 0 || sh->d_inner % sh->n_group != 0 ||
        sh->n_head % sh->n_group != 0)
        return err_set(e, ERR_UNSUPPORTED,
                       "Mamba-2 shape: kernel %d, inner %d, %d heads, %d groups not supported",
                       sh->d_conv, sh->d_inner, sh->n_head, sh->n_group);
    return 0;
}

static int64_t conv_channels(const struct mamba2_shape *sh)
{
    return (int64_t)sh->d_inner + 2 * (int64_t)sh->n_group * sh->d_state;
}

static int64_t proj_width(const struct mamba2_shape *sh)
{
    return (int64_t)sh->d_inner + conv_channels(sh) + sh->n_head;
}

// An F32 weight of exactly n elements in whatever shape the file gives it
// (ssm_a and ssm_d are [1, H], ssm_norm [di/G, G]).
static int bind_f32(struct model *m, const float **out, const char *name, int64_t n, bool required,
                    struct err *e)
{
    const struct gguf_tensor *gt = gguf_tensor_find(m->g, name);
    *out = NULL;
    if (!gt)
        return required ? err_set(e, ERR_FORMAT, "missing tensor %s", name) : 0;
    if (gt->type != GGUF_TYPE_F32)
        return err_set(e, ERR_UNSUPPORTED, "tensor %s: expected F32, got %s", name,
                       gguf_type_name(gt->type) ? gguf_type_name(gt->type) : "unknown");
    if (gt->ne[0] * gt->ne[1] * gt->ne[2] * gt->ne[3] != n || !gt->data)
        return err_set(e, ERR_FORMAT, "tensor %s does not have %lld elements", name, (long long)n);
    *out = gt->data;
    return 0;
}

int model_mamba2_bind(struct model *m, int il, struct err *e)
{
    struct mamba2_shape sh;
    int rc = mamba2_shape(m, &sh, e);
    if (rc < 0)
        return rc;
    struct model_layer *L = &m->layers[il];
    struct model_mamba2_layer *X = xcalloc(1, sizeof *X);
    L->mixer = X;
    const int64_t D = m->hp.n_embd, di = sh.d_inner, ch = conv_channels(&sh), H = sh.n_head;
    char n[GGUF_MAX_NAME_LEN + 1];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
    if ((rc = model_bind_vector(m, &L->attn_norm, NAME("attn_norm.weight"), D, true, e)) < 0 ||
        (rc = model_bind_matrix(m, &X->in, NAME("ssm_in.weight"), D, proj_width(&sh), true, e)) <
            0 ||
        (rc = model_bind_matrix(m, &X->out, NAME("ssm_out.weight"), di, D, true, e)) < 0 ||
        (rc = bind_f32(m, &X->conv_w, NAME("ssm_conv1d.weight"), ch * sh.d_conv, true, e)) < 0 ||
        (rc = model_bind_vector(m, &X->conv_b, NAME("ssm_conv1d.bias"), ch, false, e)) < 0 ||
        (rc = model_bind_vector(m, &X->dt_b, NAME("ssm_dt.bias"), H, true, e)) < 0 ||
        (rc = bind_f32(m, &X->A, NAME("ssm_a"), H, true, e)) < 0 ||
        (rc = bind_f32(m, &X->D, NAME("ssm_d"), H, true, e)) < 0 ||
        (rc = bind_f32(m, &X->norm, NAME("ssm_norm.weight"), di, false, e)) < 0)
        return rc;
#undef NAME
    L->mats[L->n_mats++] = &X->in;
    L->mats[L->n_mats++] = &X->out;

    // Scratch per row (struct model_scratch.mix): the projection, the
    // convolution's output, the scan's output.
    const int64_t pw = proj_width(&sh);
    int64_t need = pw + ch + di;
    if (need > m->hp.mix_floats)
        m->hp.mix_floats = need;
    L->rs.conv_floats = (int64_t)(sh.d_conv - 1) * ch;
    L->rs.ssm_floats = H * (di / H) * sh.d_state;
    X->conv = (struct engine_conv1d){
        .channels = ch,
        .kernel = sh.d_conv,
        .w = X->conv_w,
        .b = X->conv_b,
        .silu = true,
        .x_stride = pw,
        .y_stride = ch,
    };
    X->scan = (struct engine_ssm_scan){
        .n_heads = (int)H,
        .head_dim = (int)(di / H),
        .n_groups = sh.n_group,
        .d_state = sh.d_state,
        .A = X->A,
        .D = X->D,
        .x_stride = ch,
        .B_stride = ch,
        .C_stride = ch,
        .dt_stride = pw,
        .y_stride = di,
        .dt_softplus = true,
        .dt_bias = X->dt_b,
        .z_stride = pw,
    };
    return 0;
}

// out (n, n_embd) = the mixer of h (n, n_embd, normed); out may be h. The
// scratch holds n_batch rows of each piece, one piece after the other.
void model_mamba2(struct model *m, struct model_layer *L, const struct model_ubatch *ub, float *out,
                  const float *h, int n)
{
    const struct model_mamba2_layer *X = L->mixer;
    struct engine_backend *be = m->be;
    const int64_t pw = X->conv.x_stride, ch = X->conv.channels;
    const int64_t di = (int64_t)X->scan.n_heads * X->scan.head_dim;
    const int64_t nb = m->opts.n_batch, gn = (int64_t)X->scan.n_groups * X->scan.d_state;
    float *proj = m->s.mix, *xbc = proj + nb * pw, *y = xbc + nb * ch;

    engine_matmul(be, proj, &X->in, NULL, h, n);  // (n, pw): z | xBC | dt
    engine_conv1d(be, xbc, proj + di, n, &X->conv, L->rs.conv, ub->slot, ub->pos);
    struct engine_ssm_scan scan = X->scan;
    scan.z = proj;
    engine_ssm_scan(be, y, xbc, proj + di + ch, xbc + di, xbc + di + gn, n, &scan, L->rs.ssm,
                    ub->slot, ub->pos);
    if (X->norm) {
        // RMSNorm per group of di/G values, each group its own weights.
        const int G = X->scan.n_groups;
        const int64_t dg = di / G;
        if (G == 1)
            engine_rmsnorm(be, y, y, X->norm, n, di, m->hp.eps);
        else
            for (int r = 0; r < n; r++)
                for (int g = 0; g < G; g++)
                    engine_rmsnorm(be, y + r * di + g * dg, y + r * di + g * dg, X->norm + g * dg,
                                   1, dg, m->hp.eps);
    }
    engine_matmul(be, out, &X->out, NULL, y, n);  // (n, n_embd)
}

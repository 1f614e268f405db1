// Pillow-compatible resampling, as Hugging Face's image processors (and
// llama.cpp v0.5.0's mtmd) resize: separable, horizontal pass then
// vertical, each output pixel a normalised filter over the input pixels
// within the filter's support (widened by the scale when shrinking), with
// the weights in 22-bit fixed point and each pass rounded back to 8 bits.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vision/internal.h"

#define PRECISION_BITS (32 - 8 - 2)

static double filter_bilinear(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_bicubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static const struct {
    double (*fn)(double);
    double support;
} filters[] = {
    [VISION_RESAMPLE_BILINEAR] = {filter_bilinear, 1.0},
    [VISION_RESAMPLE_BICUBIC] = {filter_bicubic, 2.0},
};

// The coefficients of one dimension: for output pixel i, the input range
// [bounds[2i], bounds[2i] + bounds[2i+1]) with weights w[i·ksize ...].
struct coeffs {
    int ksize;
    int *bounds;
    int32_t *w;
};

static void coeffs_free(struct coeffs *c)
{
    free(c->bounds);
    free(c->w);
}

static int coeffs_init(struct coeffs *c, int in_size, int out_size, enum vision_resample algo)
{
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = filters[algo].support * filterscale;
    c->ksize = (int)ceil(support) * 2 + 1;
    c->bounds = malloc(sizeof(int) * 2 * (size_t)out_size);
    c->w = calloc((size_t)out_size * c->ksize, sizeof(int32_t));
    double *pre = malloc(sizeof(double) * (size_t)c->ksize);
    if (!c->bounds || !c->w || !pre) {
        free(pre);
        coeffs_free(c);
        return ERR_NOMEM;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        xmin = xmin < 0 ? 0 : xmin;
        xmax = (xmax > in_size ? in_size : xmax) - xmin;
        for (int x = 0; x < xmax; x++) {
            pre[x] = filters[algo].fn((x + xmin - center + 0.5) * ss);
            ww += pre[x];
        }
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? pre[x] / ww : pre[x];
            double fx = v * (double)(1 << PRECISION_BITS) + (v < 0 ? -0.5 : 0.5);
            c->w[(size_t)xx * c->ksize + x] = (int32_t)fx;
        }
        c->bounds[2 * xx] = xmin;
        c->bounds[2 * xx + 1] = xmax;
    }
    free(pre);
    return 0;
}

static uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

// Rows of n_in pixels → rows of n_out pixels (n_rows rows).
static void pass_horizontal(const uint8_t *src, uint8_t *dst, int n_in, int n_out, int n_rows,
                            const struct coeffs *c)
{
    for (int y = 0; y < n_rows; y++) {
        const uint8_t *row = src + (size_t)y * n_in * 3;
        uint8_t *out = dst + (size_t)y * n_out * 3;
        for (int xx = 0; xx < n_out; xx++) {
            const int32_t *k = c->w + (size_t)xx * c->ksize;
            const uint8_t *p = row + (size_t)c->bounds[2 * xx] * 3;
            int32_t s[3] = {1 << (PRECISION_BITS - 1), 1 << (PRECISION_BITS - 1),
                            1 << (PRECISION_BITS - 1)};
            for (int x = 0; x < c->bounds[2 * xx + 1]; x++, p += 3)
                for (int ch = 0; ch < 3; ch++)
                    s[ch] += p[ch] * k[x];
            for (int ch = 0; ch < 3; ch++)
                out[xx * 3 + ch] = clip8(s[ch]);
        }
    }
}

// n_in rows → n_out rows, each of width pixels.
static void pass_vertical(const uint8_t *src, uint8_t *dst, int width, int n_out,
                          const struct coeffs *c)
{
    size_t row = (size_t)width * 3;
    for (int yy = 0; yy < n_out; yy++) {
        const int32_t *k = c->w + (size_t)yy * c->ksize;
        int ymin = c->bounds[2 * yy], ycnt = c->bounds[2 * yy + 1];
        for (size_t i = 0; i < row; i++) {
            int32_t s = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < ycnt; y++)
                s += src[(size_t)(ymin + y) * row + i] * k[y];
            dst[(size_t)yy * row + i] = clip8(s);
        }
    }
}

int vision_resize(const struct vision_image *src, struct vision_image *dst,
                  enum vision_resample algo, struct err *e)
{
    int w = dst->width, h = dst->height;
    if (w <= 0 || h <= 0 || w > VISION_MAX_SIDE || h > VISION_MAX_SIDE)
        return err_set(e, ERR_INVALID, "resize to %dx%d: size out of range", w, h);
    dst->rgb = malloc((size_t)w * h * 3);
    uint8_t *tmp = malloc((size_t)w * src->height * 3);
    struct coeffs ch = {0}, cv = {0};
    int rc = !dst->rgb || !tmp ? ERR_NOMEM : 0;
    if (!rc && w != src->width)
        rc = coeffs_init(&ch, src->width, w, algo);
    if (!rc && h != src->height)
        rc = coeffs_init(&cv, src->height, h, algo);
    if (rc) {
        free(tmp);
        coeffs_free(&ch);
        vision_image_free(dst);
        return err_set(e, ERR_NOMEM, "resize to %dx%d: out of memory", w, h);
    }
    if (w != src->width)
        pass_horizontal(src->rgb, tmp, src->width, w, src->height, &ch);
    else
        memcpy(tmp, src->rgb, (size_t)w * src->height * 3);
    if (h != src->height)
        pass_vertical(tmp, dst->rgb, w, h, &cv);
    else
        memcpy(dst->rgb, tmp, (size_t)w * h * 3);
    dst->width = w;
    dst->height = h;
    free(tmp);
    coeffs_free(&ch);
    coeffs_free(&cv);
    return 0;
}

int vision_letterbox_to(const struct vision_image *src, int width, int height,
                        enum vision_resample algo, struct vision_image *out, struct err *e)
{
    // Scaled to fit with the aspect kept (each side rounded up), centred on
    // black (offsets rounded down): mtmd's PAD_CEIL, Pillow's ImageOps.pad.
    float scale_w = (float)width / src->width, scale_h = (float)height / src->height;
    float scale = scale_w < scale_h ? scale_w : scale_h;
    int nw = (int)ceilf(src->width * scale), nh = (int)ceilf(src->height * scale);
    nw = nw > width ? width : nw;
    nh = nh > height ? height : nh;
    struct vision_image fit = {.width = nw, .height = nh};
    int rc = nw == src->width && nh == src->height ? 0 : vision_resize(src, &fit, algo, e);
    if (rc < 0)
        return rc;
    const struct vision_image *from = fit.rgb ? &fit : src;
    out->width = width;
    out->height = height;
    out->rgb = calloc((size_t)width * height, 3);
    if (!out->rgb) {
        vision_image_free(&fit);
        return err_set(e, ERR_NOMEM, "preprocess image: out of memory");
    }
    int ox = (width - nw) / 2, oy = (height - nh) / 2;
    for (int y = 0; y < nh; y++)
        memcpy(out->rgb + ((size_t)(oy + y) * width + ox) * 3, from->rgb + (size_t)y * nw * 3,
               (size_t)nw * 3);
    vision_image_free(&fit);
    return 0;
}

int vision_letterbox(const struct vision_image *src, int size, enum vision_resample algo,
                     struct vision_image *out, struct err *e)
{
    return vision_letterbox_to(src, size, size, algo, out, e);
}

void vision_normalize(const struct vision_image *img, const float mean[3], const float std[3],
                      float *chw)
{
    size_t n = (size_t)img->width * img->height;
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < n; i++)
            chw[c * n + i] = ((float)img->rgb[i * 3 + c] / 255.0f - mean[c]) / std[c];
}

// Image decoding: PNG (libpng), JPEG (libjpeg-turbo) and WebP (libwebp) into
// 8-bit RGB, the input every vision preprocessor starts from. The result
// follows what mtmd's loader (stb_image asked for 3 channels) gives: alpha is
// dropped, not composited; 16-bit samples keep their high byte; grey is
// copied into R, G and B.
//
// Memory stays bounded: each decoder reads the picture's size from its
// header first, and a picture over VISION_MAX_PIXELS is refused before any
// pixel buffer is allocated (a 20000 x 20000 PNG is a few kilobytes of
// input and 1.2 GB of output).
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>

#include "vision/vision.h"

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

enum vision_format vision_image_format(const void *data, size_t len)
{
    const uint8_t *p = data;
    if (len >= 8 && memcmp(p, png_magic, 8) == 0)
        return VISION_FORMAT_PNG;
    if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return VISION_FORMAT_JPEG;
    if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return VISION_FORMAT_WEBP;
    return VISION_FORMAT_UNKNOWN;
}

void vision_image_free(struct vision_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    img->rgb = NULL;
    img->width = img->height = 0;
}

// Checks a header's size and allocates the RGB buffer for it.
static int image_alloc(struct vision_image *img, uint64_t w, uint64_t h, const char *what,
                       struct err *e)
{
    if (w == 0 || h == 0)
        return err_set(e, ERR_FORMAT, "failed to decode image: %s image has no pixels", what);
    if (w > VISION_MAX_SIDE || h > VISION_MAX_SIDE || w * h > VISION_MAX_PIXELS)
        return err_set(
            e, ERR_TOO_LARGE, "image too large: %llux%llu pixels (at most %d pixels and %d a side)",
            (unsigned long long)w, (unsigned long long)h, VISION_MAX_PIXELS, VISION_MAX_SIDE);
    img->rgb = malloc((size_t)(w * h * 3));
    if (!img->rgb)
        return err_set(e, ERR_NOMEM, "failed to decode image: out of memory");
    img->width = (int)w;
    img->height = (int)h;
    return 0;
}

// ---------------------------------------------------------------------------
// PNG

struct png_src {
    const uint8_t *p;
    size_t len, off;
    char msg[128];
};

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    struct png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->off)
        png_error(png, "truncated");
    memcpy(out, s->p + s->off, n);
    s->off += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    struct png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

// Asks libpng for 8-bit RGB or RGBA whatever the file holds (palette, grey,
// 16-bit and sub-byte depths expanded; transparency chunks ignored).
static int png_setup_rgb(png_structp png, png_infop info)
{
    int color = png_get_color_type(png, info);
    if (png_get_bit_depth(png, info) == 16)
        png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (color & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    return (int)png_get_rowbytes(png, info);
}

static int png_decode(struct vision_image *img, const void *data, size_t len, struct err *e)
{
    struct png_src src = {.p = data, .len = len};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *volatile rows = NULL;
    volatile int rc = 0;
    if (!info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return err_set(e, ERR_NOMEM, "failed to decode image: out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        rc = rc ? rc : err_set(e, ERR_FORMAT, "failed to decode image: png: %s", src.msg);
        goto out;
    }
    png_set_read_fn(png, &src, png_read_mem);

    png_read_info(png, info);
    rc =
        image_alloc(img, png_get_image_width(png, info), png_get_image_height(png, info), "png", e);
    if (rc < 0)
        goto out;
    if (png_setup_rgb(png, info) != img->width * 3)
        png_error(png, "unexpected row size");
    rows = malloc(sizeof *rows * (size_t)img->height);
    if (!rows) {
        rc = err_set(e, ERR_NOMEM, "failed to decode image: out of memory");
        goto out;
    }
    for (int y = 0; y < img->height; y++)
        rows[y] = img->rgb + (size_t)y * img->width * 3;
    png_read_image(png, rows);
out:
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    if (rc < 0)
        vision_image_free(img);
    return rc;
}

// ---------------------------------------------------------------------------
// JPEG

struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jmp;
    char msg[JMSG_LENGTH_MAX];
};

static void jpeg_on_error(j_common_ptr cinfo)
{
    struct jpeg_fail *f = (struct jpeg_fail *)cinfo->err;
    f->mgr.format_message(cinfo, f->msg);
    longjmp(f->jmp, 1);
}

static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    // Corrupt-data warnings (level -1) are fatal: a truncated file would
    // otherwise decode as grey rows without complaint.
    if (level < 0)
        jpeg_on_error(cinfo);
}

static int jpeg_decode(struct vision_image *img, const void *data, size_t len, struct err *e)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_fail fail;
    volatile int rc = 0;
    cinfo.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_on_error;
    fail.mgr.emit_message = jpeg_on_message;
    if (setjmp(fail.jmp)) {
        rc = rc ? rc : err_set(e, ERR_FORMAT, "failed to decode image: jpeg: %s", fail.msg);
        goto out;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    rc = image_alloc(img, cinfo.image_width, cinfo.image_height, "jpeg", e);
    if (rc < 0)
        goto out;
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_width != (JDIMENSION)img->width ||
        cinfo.output_height != (JDIMENSION)img->height || cinfo.output_components != 3) {
        rc = err_set(e, ERR_FORMAT, "failed to decode image: jpeg: unexpected output shape");
        goto out;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = img->rgb + (size_t)cinfo.output_scanline * img->width * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
out:
    jpeg_destroy_decompress(&cinfo);
    if (rc < 0)
        vision_image_free(img);
    return rc;
}

// ---------------------------------------------------------------------------
// WebP

static int webp_decode(struct vision_image *img, const void *data, size_t len, struct err *e)
{
    int w = 0, h = 0;
    if (!WebPGetInfo(data, len, &w, &h))
        return err_set(e, ERR_FORMAT, "failed to decode image: webp: invalid header");
    int rc = image_alloc(img, (uint64_t)w, (uint64_t)h, "webp", e);
    if (rc < 0)
        return rc;
    size_t stride = (size_t)w * 3;
    if (!WebPDecodeRGBInto(data, len, img->rgb, stride * (size_t)h, (int)stride)) {
        vision_image_free(img);
        return err_set(e, ERR_FORMAT, "failed to decode image: webp: corrupt or truncated data");
    }
    return 0;
}

// ---------------------------------------------------------------------------

typedef int (*image_decode_fn)(struct vision_image *img, const void *data, size_t len,
                               struct err *e);

static const image_decode_fn decoders[] = {
    [VISION_FORMAT_PNG] = png_decode,
    [VISION_FORMAT_JPEG] = jpeg_decode,
    [VISION_FORMAT_WEBP] = webp_decode,
};

int vision_image_decode(struct vision_image *img, const void *data, size_t len, struct err *e)
{
    memset(img, 0, sizeof *img);
    enum vision_format f = vision_image_format(data, len);
    if (f == VISION_FORMAT_UNKNOWN)
        return err_set(e, ERR_UNSUPPORTED,
                       "failed to decode image: unsupported image format (PNG, JPEG and WebP "
                       "are supported)");
    return decoders[f](img, data, len, e);
}

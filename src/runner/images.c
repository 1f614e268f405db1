// Prompts with pictures. The server sends the rendered prompt with Ollama's
// "[img-N]" tags where the template put each image, and the images
// (base64) in tag order. Here each picture is decoded and encoded by the
// vision tower, and the prompt becomes text tokens with image rows in
// place of the tags: the projector's begin text (Gemma 3:
// "<start_of_image>"), the image's rows, its end text, as mtmd lays a
// prompt out. A picture no tag names goes first, after BOS.
//
// Image rows carry a negative token id made from the picture's digest, the
// same for all its rows (model_batch): the prompt cache then reuses a
// cached prefix only through the same picture, and rows it reuses are not
// evaluated again (the tower itself runs once per picture and request).
#include <stdlib.h>
#include <string.h>

#include "runner/internal.h"
#include "vision/vision.h"

void rreq_images_free(struct rreq *r)
{
    for (int i = 0; i < r->n_imgs; i++)
        free(r->imgs[i].rows);
    free(r->imgs);
    free(r->places);
    r->imgs = NULL;
    r->places = NULL;
    r->n_imgs = r->n_places = 0;
}

// The id of a picture's rows: negative, from the first bytes of its digest.
static int32_t image_id(const void *data, size_t len)
{
    char hex[DIGEST_HEX_LEN + 1];
    sha256_hex(data, len, hex);
    uint32_t v = (uint32_t)strtoul(
        (char[9]){hex[0], hex[1], hex[2], hex[3], hex[4], hex[5], hex[6], hex[7], 0}, NULL, 16);
    return -2 - (int32_t)(v & 0x3fffffff);
}

// Decodes and encodes image i of the request into r->imgs[i].
static int encode_one(struct runner *rn, const json_t *images, size_t i, struct rreq *r,
                      struct err *e)
{
    const char *b64 = json_string_value(json_array_get(images, i));
    if (!b64)
        return err_set(e, ERR_INVALID, "image %zu: not a base64 string", i);
    struct buf raw;
    buf_init(&raw, 64u << 20);
    int rc = base64_decode(b64, &raw, e);
    struct vision_image img = {0};
    if (rc == 0)
        rc = vision_image_decode(&img, raw.data, raw.len, e);
    struct rimage *ri = &r->imgs[i];
    if (rc == 0) {
        ri->id = image_id(raw.data, raw.len);
        ri->n = vision_model_n_tokens(rn->vision, img.width, img.height);
        int rows;
        if (!vision_model_grid(rn->vision, img.width, img.height, &rows, &ri->cols))
            ri->cols = 0;
        ri->rows = malloc(sizeof(float) * (size_t)ri->n * vision_model_n_embd(rn->vision));
        rc = ri->rows ? vision_encode(rn->vision, &img, ri->rows, e)
                      : err_set(e, ERR_NOMEM, "image %zu: out of memory", i);
    }
    vision_image_free(&img);
    buf_deinit(&raw);
    if (rc < 0)
        err_prefix(e, "image %zu", i);
    return rc;
}

// The prompt is tokenized in pieces as mtmd does: each text between
// pictures, and each picture's begin and end text, on its own without
// special tokens (an SPM vocabulary prefixes each piece with a space); BOS
// (and EOS) once around the whole, as the vocabulary says.
static int push_text(struct runner *rn, struct rreq *r, const char *text, size_t len, struct err *e)
{
    if (len == 0)
        return 0;
    int rc = tokenizer_encode(rn->tok, text, len, false, true, &r->tokens, e);
    return rc < 0 ? rc : 0;
}

static int push_image(struct runner *rn, struct rreq *r, int img, struct err *e)
{
    struct rimage *ri = &r->imgs[img];
    struct rplace *pl = realloc(r->places, sizeof *pl * (size_t)(r->n_places + 1));
    if (!pl)
        return err_set(e, ERR_NOMEM, "out of memory");
    r->places = pl;
    const char *begin = vision_model_image_begin(rn->vision);
    const char *end = vision_model_image_end(rn->vision);
    int rc = push_text(rn, r, begin, strlen(begin), e);
    r->places[r->n_places++] = (struct rplace){(int)r->tokens.len, img};
    for (int k = 0; rc == 0 && k < ri->n; k++)
        rc = tokenizer_ids_push(&r->tokens, ri->id);
    if (rc == 0)
        rc = push_text(rn, r, end, strlen(end), e);
    return rc;
}

// The tag at p ("[img-N]"): its length and N, or 0.
static size_t parse_tag(const char *p, const char *end, size_t *n)
{
    if (end - p < 7 || memcmp(p, "[img-", 5) != 0)
        return 0;
    const char *q = p + 5;
    size_t v = 0;
    while (q < end && *q >= '0' && *q <= '9' && v < 100000)
        v = v * 10 + (size_t)(*q++ - '0');
    if (q == p + 5 || q >= end || *q != ']')
        return 0;
    *n = v;
    return (size_t)(q + 1 - p);
}

int runner_images_tokenize(struct runner *rn, const char *text, size_t len, bool add_special,
                           const json_t *images, struct rreq *r, struct err *e)
{
    size_t n_img = json_array_size(images);
    if (!rn->vision)
        return err_set(e, ERR_UNSUPPORTED, "this model is missing data required for image input");
    r->imgs = calloc(n_img, sizeof *r->imgs);
    bool *used = calloc(n_img, sizeof(bool));
    if (!r->imgs || !used) {
        free(used);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    r->n_imgs = (int)n_img;
    r->img_n_embd = vision_model_n_embd(rn->vision);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_img; i++)
        rc = encode_one(rn, images, i, r, e);
    // Which pictures the prompt names; the others go first.
    const char *end = text + len;
    for (const char *p = text; rc == 0 && p < end; p++) {
        size_t n, tl = parse_tag(p, end, &n);
        if (tl && n < n_img)
            used[n] = true;
    }
    const struct tokenizer_special *sp = tokenizer_special_ids(rn->tok);
    if (rc == 0 && add_special && tokenizer_add_bos(rn->tok) && sp->bos >= 0)
        rc = tokenizer_ids_push(&r->tokens, sp->bos);
    for (size_t i = 0; rc == 0 && i < n_img; i++)
        if (!used[i])
            rc = push_image(rn, r, (int)i, e);
    const char *seg = text;
    for (const char *p = text; rc == 0 && p < end;) {
        size_t n, tl = parse_tag(p, end, &n);
        if (!tl || n >= n_img) {
            p++;
            continue;
        }
        rc = push_text(rn, r, seg, (size_t)(p - seg), e);
        if (rc == 0)
            rc = push_image(rn, r, (int)n, e);
        p += tl;
        seg = p;
    }
    if (rc == 0)
        rc = push_text(rn, r, seg, (size_t)(end - seg), e);
    if (rc == 0 && add_special && tokenizer_add_eos(rn->tok) && sp->eos >= 0)
        rc = tokenizer_ids_push(&r->tokens, sp->eos);
    free(used);
    return rc;
}

bool rreq_image_cell(const struct rreq *r, int p, int32_t *row, int32_t *col)
{
    for (int i = 0; i < r->n_places; i++) {
        const struct rplace *pl = &r->places[i];
        const struct rimage *ri = &r->imgs[pl->img];
        if (p >= pl->start && p < pl->start + ri->n && ri->cols > 0) {
            *row = (p - pl->start) / ri->cols;
            *col = (p - pl->start) % ri->cols;
            return true;
        }
    }
    return false;
}

const float *rreq_image_row(const struct rreq *r, int p)
{
    for (int i = 0; i < r->n_places; i++) {
        const struct rplace *pl = &r->places[i];
        const struct rimage *ri = &r->imgs[pl->img];
        if (p >= pl->start && p < pl->start + ri->n)
            return ri->rows + (size_t)(p - pl->start) * r->img_n_embd;
    }
    return NULL;
}

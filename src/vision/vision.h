// vision: pictures into image embeddings for the text model. It decodes
// PNG / JPEG / WebP into RGB, preprocesses them as llama.cpp's mtmd does for
// each projector (resize, pad, normalise), runs the vision tower and the
// projector from a GGUF (an mmproj file, general.architecture "clip", or a
// model file with the tower inside, as Ollama's library publishes them), and
// hands back one row of the text model's width per image token.
//
// Model layer: below runner and server, beside model; it uses the engine
// for the heavy products and knows nothing of prompts or HTTP.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

// Decompression bombs are refused from the header: past this many pixels
// (or this many on a side) nothing is allocated. 50 MP is more than any
// camera picture a user sends and 150 MB of RGB.
#define VISION_MAX_PIXELS 50000000
#define VISION_MAX_SIDE   65535

enum vision_format {
    VISION_FORMAT_UNKNOWN = 0,
    VISION_FORMAT_PNG,
    VISION_FORMAT_JPEG,
    VISION_FORMAT_WEBP,
};

// An 8-bit RGB picture, row-major, 3 bytes a pixel.
struct vision_image {
    int width, height;
    uint8_t *rgb;
};

// The format the magic bytes say (UNKNOWN: none we decode).
enum vision_format vision_image_format(const void *data, size_t len);
// Decodes a whole file. Errors: ERR_UNSUPPORTED (not PNG/JPEG/WebP),
// ERR_FORMAT (corrupt or truncated), ERR_TOO_LARGE (over the limits above,
// found from the header), ERR_NOMEM. The message is for a person.
int vision_image_decode(struct vision_image *img, const void *data, size_t len, struct err *e);
void vision_image_free(struct vision_image *img);

// ---------------------------------------------------------------------------
// Projector + tower.

struct gguf;
struct vision_model;

// True when the GGUF holds a vision tower this module can run: an mmproj
// of a supported projector type, or a model file with one inside.
bool vision_gguf_has_tower(const struct gguf *g);
// Loads the tower from path (mmap; weights used in place). n_threads <= 0:
// physical cores. Errors: ERR_IO / ERR_FORMAT for the file, ERR_UNSUPPORTED
// for a projector type we do not run.
int vision_model_load(struct vision_model **out, const char *path, int n_threads, struct err *e);
// The same from a GGUF in memory (fuzzing); data must outlive the model.
int vision_model_load_memory(struct vision_model **out, const void *data, size_t n, int n_threads,
                             struct err *e);
void vision_model_free(struct vision_model *vm);

// The projector type ("gemma3", "qwen2.5vl_merger", "pixtral", "qwen3vl_merger").
const char *vision_model_projector(const struct vision_model *vm);
// Width of one image token's row: the text model's n_embd, or (Qwen3-VL)
// n_embd · (1 + deepstack mergers), the text model's model_n_embd_inp.
int vision_model_n_embd(const struct vision_model *vm);
// Qwen-VL towers (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): a picture becomes at
// least n image tokens (mtmd's --image-min-tokens; scaled up as mtmd does);
// 0 restores the projector's own minimum (8). Other towers: no effect.
void vision_model_set_min_tokens(struct vision_model *vm, int n);
// Image tokens a picture of this size becomes.
int vision_model_n_tokens(const struct vision_model *vm, int width, int height);
// M-RoPE models (Qwen2.5-VL): true, with the merged grid a picture of this
// size becomes (its image tokens row-major: rows × cols). Others: false.
bool vision_model_grid(const struct vision_model *vm, int width, int height, int *rows, int *cols);
// Text mtmd writes before and after an image's tokens ("" when none).
const char *vision_model_image_begin(const struct vision_model *vm);
const char *vision_model_image_end(const struct vision_model *vm);
// True when an image's rows attend to each other in the text model
// (Gemma 3), so a batch must hold an image whole.
bool vision_model_non_causal(const struct vision_model *vm);
// Bytes of the file's tensors (an mmproj file: the whole tower).
uint64_t vision_model_weights_bytes(const struct vision_model *vm);
// Bytes of activations one encode takes (for the memory estimate).
uint64_t vision_model_scratch_bytes(const struct vision_model *vm);

// Encodes one picture: out gets vision_model_n_tokens × n_embd floats
// (row-major), which the caller allocates.
int vision_encode(struct vision_model *vm, const struct vision_image *img, float *out,
                  struct err *e);

// Preprocessing pieces (exposed for tests): a Pillow-compatible resize of
// src into dst (dst->width/height set by the caller; dst->rgb allocated
// here), bilinear or bicubic (a = -0.5).
enum vision_resample { VISION_RESAMPLE_BILINEAR, VISION_RESAMPLE_BICUBIC };
int vision_resize(const struct vision_image *src, struct vision_image *dst,
                  enum vision_resample algo, struct err *e);

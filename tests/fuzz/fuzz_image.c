// libFuzzer target for the image decoders and the projector loader: the
// input is decoded as a picture (PNG / JPEG / WebP by its magic bytes) and
// opened as a projector GGUF; a picture that decodes must have the size
// its buffer holds, a projector that loads is asked for its shape. Neither
// may crash, leak or allocate past the header limits.
#include <stddef.h>
#include <stdint.h>

#include "vision/vision.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vision_image img;
    if (vision_image_decode(&img, data, size, NULL) == 0) {
        size_t n = (size_t)img.width * img.height * 3;
        sink ^= img.rgb[0] ^ img.rgb[n - 1];
        vision_image_free(&img);
    }
    struct vision_model *vm = NULL;
    if (vision_model_load_memory(&vm, data, size, 1, NULL) == 0) {
        sink ^= (uint8_t)(vision_model_n_embd(vm) + vision_model_n_tokens(vm, 32, 32));
        vision_model_free(vm);
    }
    return 0;
}

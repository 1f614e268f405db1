// libFuzzer target for the built-in output parsers (model output is
// untrusted text): the input is fed to every parser in pieces of varying
// size, with tools whose schemas type the qwen3-coder values; inputs that
// are JSON arrays are also rendered as messages by every renderer.
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "renderer/renderer.h"

static const char *tools_json =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get-weather\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":"
    "[\"integer\",\"null\"]},\"b\":{\"anyOf\":[{\"type\":\"array\"},{\"type\":\"object\"}]},"
    "\"c\":{\"type\":\"boolean\"},\"d\":{\"type\":\"number\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *tools = json_loads(tools_json, 0, NULL);
    struct renderer_think think = {.set = true, .on = true, .level = "low"};
    const char *const *names = renderer_parser_names();
    for (size_t k = 0; names[k]; k++) {
        struct renderer_parser *p = NULL;
        if (renderer_parser_new(&p, names[k], tools, NULL, &think, NULL) < 0)
            continue;
        struct buf content, thinking;
        buf_init(&content, 0);
        buf_init(&thinking, 0);
        json_t *calls = json_array();
        size_t off = 0, step = 1;
        while (off < size) {
            size_t n = size - off < step ? size - off : step;
            bool done = off + n == size;
            if (renderer_parser_add(p, (const char *)data + off, n, done, &content, &thinking,
                                    calls, NULL) < 0)
                break;
            off += n;
            step = step % 7 + 1;
        }
        json_decref(calls);
        buf_deinit(&content);
        buf_deinit(&thinking);
        renderer_parser_free(p);
    }
    json_t *msgs = json_loadb((const char *)data, size, 0, NULL);
    if (json_is_array(msgs)) {
        const char *const *rn = renderer_names();
        for (size_t k = 0; rn[k]; k++) {
            struct buf out;
            buf_init(&out, 1 << 20);
            renderer_render(rn[k], msgs, tools, &think, &out, NULL);
            buf_deinit(&out);
        }
    }
    json_decref(msgs);
    json_decref(tools);
    return 0;
}

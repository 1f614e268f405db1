// libFuzzer target for the OpenAI translation (src/server/openai.c): any bytes
// that parse as a JSON object go through the chat and completion request
// translations; every native body they produce must serialise, and the
// stream encoder must take any object as a native stream line.
#include <stdint.h>
#include <stdlib.h>

#include "server/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = NULL;
    if (jsonx_parse_object((const char *)data, size, &v, NULL) < 0)
        return 0;
    for (int chat = 0; chat < 2; chat++) {
        struct err e = {0};
        json_t *n = chat ? srv_openai_chat_request(v, &e) : srv_openai_completion_request(v, &e);
        if (n) {
            char *text = jsonx_dumps(n, 0);
            free(text);
            json_decref(n);
        } else if (!e.msg[0]) {
            abort();  // a failed translation always says why
        }
        struct srv_openai_stream *s = srv_openai_stream_new(chat, true);
        struct buf out;
        buf_init(&out, 0);
        srv_openai_stream_encode(s, v, &out);
        buf_deinit(&out);
        free(s);
        json_t *o =
            chat ? srv_openai_chat_completion("c", v) : srv_openai_text_completion("c", v, false);
        json_decref(o);
    }
    json_decref(v);
    return 0;
}

// libFuzzer target for the Anthropic Messages and OpenAI Responses request
// parsers (src/server/anthropic.c, responses.c): any bytes that parse as a
// JSON object go through both request translations; every native body they
// produce must serialise, a failure must say why, and both stream encoders
// and response builders must take any object as a native answer.
#include <stdint.h>
#include <stdlib.h>

#include "server/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(json_t *n, const struct err *e)
{
    if (n) {
        char *text = jsonx_dumps(n, 0);
        free(text);
        json_decref(n);
    } else if (!e->msg[0]) {
        abort();  // a failed translation always says why
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = NULL;
    if (jsonx_parse_object((const char *)data, size, &v, NULL) < 0)
        return 0;
    struct err e = {0};
    check(srv_anthropic_request(v, &e), &e);
    struct err e2 = {0};
    check(srv_responses_request(v, &e2), &e2);

    struct buf out;
    buf_init(&out, 0);
    struct srv_anthropic_stream *as = srv_anthropic_stream_new("msg_f", "m");
    srv_anthropic_stream_encode(as, v, &out);
    srv_anthropic_stream_free(as);
    struct srv_responses_stream *rs = srv_responses_stream_new(v, "resp_f", "msg_f");
    srv_responses_stream_encode(rs, v, &out);
    srv_responses_stream_free(rs);
    buf_deinit(&out);
    json_decref(srv_anthropic_response("msg_f", "m", v));
    json_decref(srv_responses_response(v, "resp_f", "msg_f", v));
    json_t *copy = json_deep_copy(v);
    srv_forced_call_from_content(copy, "toolu");
    json_decref(copy);
    json_decref(v);
    return 0;
}

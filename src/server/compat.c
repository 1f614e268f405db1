// Pieces shared by the translated APIs that run the native /api/chat handler
// on the same request (anthropic.c, responses.c): reading the client body,
// relaying a failed native run in the API's error shape, and sending the
// events a stream state makes of a native object.
#include "server/internal.h"

#include <stdlib.h>

json_t *srv_compat_body(struct srv_req *r, srv_error_fn error)
{
    if (r->body.len == 0) {
        srv_reply_json(r, 400, error(400, "EOF"));  // Go's decoder on an empty body
        return NULL;
    }
    json_t *v = NULL;
    struct err e = {0};
    if (jsonx_parse_object(r->body.data, r->body.len, &v, &e) < 0) {
        srv_reply_json(r, 400, error(400, e.msg));
        return NULL;
    }
    return v;
}

bool srv_compat_failed(struct srv_req *r, int rc, srv_error_fn error)
{
    if (rc < 0) {
        srv_reply_json(r, rc == ERR_TOO_LARGE ? 413 : 500,
                       error(rc == ERR_TOO_LARGE ? 413 : 500, rc == ERR_TOO_LARGE
                                                                  ? "request body too large"
                                                                  : "cannot route request"));
        return true;
    }
    if (rc == SRV_NATIVE_REPLIED && r->status != 200) {
        char *msg = srv_native_error_msg(r);
        srv_reply_json(r, r->status, error(r->status, msg));
        free(msg);
        return true;
    }
    return false;
}

int srv_compat_stream_events(struct srv_stream *st, srv_events_fn encode, void *state,
                             const json_t *native)
{
    struct buf out;
    buf_init(&out, 0);
    encode(state, native, &out);
    int rc = out.len ? srv_stream_write(st, out.data, out.len) : 0;
    buf_deinit(&out);
    return rc;
}

void srv_compat_reply_events(struct srv_req *r, srv_events_fn encode, void *state,
                             const json_t *native)
{
    struct buf out;
    buf_init(&out, 0);
    encode(state, native, &out);
    srv_reply(r, 200, "text/event-stream", out.data ? out.data : "", out.len);
    buf_deinit(&out);
}

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

// The encoder context of a translated stream: the API's events and state.
struct compat_stream {
    const struct srv_compat_api *api;
    void *state;
};

static int compat_encode(void *ctx, struct srv_stream *st, const json_t *obj)
{
    struct compat_stream *cs = ctx;
    return srv_compat_stream_events(st, cs->api->events, cs->state, obj);
}

static void compat_free(void *ctx)
{
    struct compat_stream *cs = ctx;
    cs->api->free_state(cs->state);
    free(cs);
}

void srv_compat_chat(struct srv_req *r, json_t *native, bool stream, bool forced,
                     const struct srv_compat_api *api, void *state, void *arg)
{
    if (forced)
        jsonx_set_bool(native, "stream", false);
    struct compat_stream *cs = xmalloc(sizeof *cs);
    *cs = (struct compat_stream){api, state};
    struct srv_encoder enc = {
        .content_type = "text/event-stream",
        .encode = compat_encode,
        .free = compat_free,
        .ctx = cs,
    };
    int rc = srv_run_native(r, "/api/chat", native, stream && !forced ? &enc : NULL);
    if (!srv_compat_failed(r, rc, api->error) && rc == SRV_NATIVE_REPLIED) {
        json_t *nat = srv_native_reply(r);
        if (!nat) {
            srv_reply_json(r, 500, api->error(500, "invalid response from native handler"));
        } else {
            if (forced)
                srv_forced_call_from_content(nat, api->call_prefix);
            if (stream)
                srv_compat_reply_events(r, api->events, state, nat);
            else
                srv_reply_json(r, 200, api->answer(nat, arg));
        }
        json_decref(nat);
    }
    if (enc.ctx)  // else the stream owns it
        compat_free(cs);
}

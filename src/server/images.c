// The pictures of a generate or chat request, as the runner takes them
// (src/runner/PROTOCOL.md, "images"): the rendered prompt names each one
// with an "[img-N]" tag, N counted from the first message the prompt kept
// (a long chat drops its oldest messages first), so the runner gets the
// request's last max(N) + 1 images, in order. Images no tag names (a raw
// prompt) are all sent: the runner puts them first.
#include <string.h>

#include "server/internal.h"

// Every image of the request, in message order.
static json_t *request_images(const json_t *body, bool chat)
{
    json_t *all = json_array();
    if (!chat) {
        json_array_extend(all, json_object_get(body, "images"));
        return all;
    }
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(body, "messages"), i, m)
    {
        json_t *imgs = json_object_get(m, "images");
        if (json_is_array(imgs))
            json_array_extend(all, imgs);
    }
    return all;
}

// The largest N of an "[img-N]" tag in the prompt, or -1.
static long max_tag(const char *p, size_t len)
{
    long best = -1;
    for (const char *end = p + len; (p = memmem(p, (size_t)(end - p), "[img-", 5)); p += 5) {
        const char *q = p + 5;
        long v = 0;
        while (q < end && *q >= '0' && *q <= '9' && v < 1000000)
            v = v * 10 + (*q++ - '0');
        if (q > p + 5 && q < end && *q == ']' && v > best)
            best = v;
    }
    return best;
}

void srv_images_attach(json_t *runner_body, const json_t *req_body, bool chat, const char *prompt,
                       size_t len)
{
    json_t *all = request_images(req_body, chat);
    size_t n = json_array_size(all);
    if (n == 0) {
        json_decref(all);
        return;
    }
    long top = max_tag(prompt ? prompt : "", prompt ? len : 0);
    if (top >= 0 && (size_t)top + 1 < n) {
        json_t *kept = json_array();
        for (size_t i = n - (size_t)top - 1; i < n; i++)
            json_array_append(kept, json_array_get(all, i));
        json_decref(all);
        all = kept;
    }
    json_object_set_new(runner_body, "images", all);
}

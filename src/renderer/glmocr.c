// glm-ocr (Ollama's model/renderers/glmocr.go, model/parsers/glmocr.go): the
// GLM-4.7 turn markers with a line after each marker, thinking off unless the
// request turns it on ("/nothink" after user turns when it is set off), tool
// calls as <arg_key>/<arg_value> pairs, images as [img-N] tags. The parser is
// glm-4.7's without thinking (it starts looking for content).
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>

// strings.TrimSpace of s, appended.
static void append_trimmed(struct buf *out, const char *s)
{
    size_t n = strlen(s);
    rnd_trim(&s, &n);
    buf_append(out, s, n);
}

static void render_assistant(struct buf *out, const json_t *m)
{
    buf_append_str(out, "<|assistant|>\n<think>");
    append_trimmed(out, rnd_str(m, "thinking"));
    buf_append_str(out, "</think>");
    const char *content = rnd_str(m, "content");
    if (*content) {
        buf_append_char(out, '\n');
        append_trimmed(out, content);
    }
    size_t k;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), k, call)
        rnd_glm_tool_call(out, call, "\n<tool_call>");
    buf_append_char(out, '\n');
}

int rnd_render_glmocr(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    buf_append_str(out, "[gMASK]<sop>");
    if (json_array_size(tools) > 0)
        rnd_glm_tools(out, tools);
    bool set = think && think->set, off = set && !think->on;
    size_t i, img = 0;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        size_t n_images = json_array_size(json_object_get(m, "images"));
        if (strcmp(role, "user") == 0) {
            buf_append_str(out, "<|user|>\n");
            img = rnd_image_tags(out, rnd_str(m, "content"), n_images, img);
            if (off && !cstr_ends_with(rnd_str(m, "content"), "/nothink"))
                buf_append_str(out, "/nothink");
        } else if (strcmp(role, "assistant") == 0) {
            render_assistant(out, m);
        } else if (strcmp(role, "tool") == 0) {
            json_t *prev = i > 0 ? json_array_get(msgs, i - 1) : NULL;
            if (!prev || strcmp(rnd_str(prev, "role"), "tool") != 0)
                buf_append_str(out, "<|observation|>");
            buf_append_str(out, "\n<tool_response>\n");
            img = rnd_image_tags(out, rnd_str(m, "content"), n_images, img);
            buf_append_str(out, "\n</tool_response>\n");
        } else if (strcmp(role, "system") == 0) {
            buf_printf(out, "<|system|>\n%s\n", rnd_str(m, "content"));
        }
    }
    buf_append_str(out, off ? "<|assistant|>\n<think></think>\n" : "<|assistant|>\n");
    return 0;
}

// bench_renderer: time to render a 50-message conversation (system, user,
// assistant turns with tool calls and thinking, tool results) with 10 tools
// through each built-in renderer, and to parse a 2 KB streamed reply
// (16-byte pieces) through each parser. Prints microseconds per call.
//   bench_renderer [iterations]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "renderer/renderer.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static json_t *make_tools(void)
{
    json_t *tools = json_array();
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof(name), "tool_%d", i);
        json_t *t = json_pack(
            "{s:s,s:{s:s,s:s,s:{s:s,s:[s],s:{s:{s:s,s:s},s:{s:s,s:s,s:[s,s]},s:{s:[s,s]}}}}}",
            "type", "function", "function", "name", name, "description",
            "Does something useful with the given arguments", "parameters", "type", "object",
            "required", "query", "properties", "query", "type", "string", "description",
            "What to look for", "unit", "type", "string", "description", "The unit", "enum", "c",
            "f", "limit", "type", "integer", "null");
        json_array_append_new(tools, t);
    }
    return tools;
}

static json_t *make_messages(void)
{
    json_t *m = json_array();
    json_array_append_new(m, json_pack("{s:s,s:s}", "role", "system", "content",
                                       "You are a helpful assistant that uses tools well."));
    for (int i = 0; json_array_size(m) < 49; i++) {
        json_array_append_new(m, json_pack("{s:s,s:s}", "role", "user", "content",
                                           "Please look up the weather in Paris and tell me "
                                           "whether I need an umbrella tomorrow morning."));
        json_array_append_new(m, json_pack("{s:s,s:s,s:s,s:[{s:{s:s,s:{s:s,s:s,s:i}}}]}", "role",
                                           "assistant", "content", "Let me check.", "thinking",
                                           "The user wants the weather; call the tool.",
                                           "tool_calls", "function", "name", "tool_1", "arguments",
                                           "query", "Paris", "unit", "c", "limit", i));
        json_array_append_new(m, json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_name", "tool_1",
                                           "content", "{\"temperature\": 14, \"rain\": 0.7}"));
    }
    json_array_append_new(
        m, json_pack("{s:s,s:s}", "role", "user", "content", "Thanks! And in Oslo?"));
    return m;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    if (iters < 1)
        iters = 1;
    json_t *tools = make_tools(), *msgs = make_messages();
    struct renderer_think think = {.set = true, .on = true, .level = "medium"};
    printf("render: %zu messages, %zu tools, %d iterations\n", json_array_size(msgs),
           json_array_size(tools), iters);
    const char *const *names = renderer_names();
    for (size_t k = 0; names[k]; k++) {
        struct buf out;
        buf_init(&out, 0);
        double best = 1e30;
        size_t bytes = 0;
        for (int i = 0; i < iters; i++) {
            buf_reset(&out);
            double t0 = now_us();
            int rc = renderer_render(names[k], msgs, tools, &think, &out, NULL);
            double dt = now_us() - t0;
            if (rc < 0) {
                best = -1;
                break;
            }
            if (dt < best)
                best = dt;
            bytes = out.len;
        }
        if (best >= 0)
            printf("  %-16s %8.1f us  (%zu bytes)\n", names[k], best, bytes);
        else
            printf("  %-16s error\n", names[k]);
        buf_deinit(&out);
    }

    // Parsing: a reply with thinking, content and one call per family's
    // syntax does not matter for speed much; feed the same 2 KB text.
    struct buf reply;
    buf_init(&reply, 0);
    while (reply.len < 2048)
        buf_append_str(&reply, "The weather in Oslo tomorrow looks wet, bring an umbrella. ");
    printf("parse: %zu bytes in 16-byte pieces\n", reply.len);
    const char *const *pn = renderer_parser_names();
    for (size_t k = 0; pn[k]; k++) {
        double best = 1e30;
        for (int i = 0; i < iters; i++) {
            struct renderer_parser *p = NULL;
            if (renderer_parser_new(&p, pn[k], tools, NULL, &think, NULL) < 0)
                break;
            struct buf c, t;
            buf_init(&c, 0);
            buf_init(&t, 0);
            json_t *calls = json_array();
            double t0 = now_us();
            for (size_t off = 0; off < reply.len; off += 16) {
                size_t n = reply.len - off < 16 ? reply.len - off : 16;
                renderer_parser_add(p, reply.data + off, n, off + n == reply.len, &c, &t, calls,
                                    NULL);
            }
            double dt = now_us() - t0;
            if (dt < best)
                best = dt;
            json_decref(calls);
            buf_deinit(&c);
            buf_deinit(&t);
            renderer_parser_free(p);
        }
        printf("  %-16s %8.1f us\n", pn[k], best);
    }
    buf_deinit(&reply);
    json_decref(tools);
    json_decref(msgs);
    return 0;
}

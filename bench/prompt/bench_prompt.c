// Prompt rendering cost per source: a 50-message conversation (system, user
// and assistant turns, tool calls and results) with 10 tools, rendered
// through real Jinja chat templates (shared/fixtures/chat-templates) and
// through the built-in llama3-instruct Go template. Prints microseconds per
// render (mean and best over the runs) and the parse cost of each template.
//   bench_prompt [CHAT_TEMPLATES_DIR] [-n RUNS]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"
#include "template/template.h"
#include "util/util.h"

static json_t *tools_array(void)
{
    json_t *tools = json_array();
    for (int i = 0; i < 10; i++) {
        char *t = xasprintf(
            "{\"type\":\"function\",\"function\":{\"name\":\"tool_%d\",\"description\":"
            "\"Tool number %d: looks something up\",\"parameters\":{\"type\":\"object\","
            "\"properties\":{\"query\":{\"type\":\"string\",\"description\":\"what to look up\"},"
            "\"limit\":{\"type\":\"integer\",\"description\":\"max results\"},\"unit\":{\"type\":"
            "\"string\",\"enum\":[\"metric\",\"imperial\"]}},\"required\":[\"query\"]}}}",
            i, i);
        json_array_append_new(tools, json_loads(t, 0, NULL));
        free(t);
    }
    return tools;
}

// system, then 49 turns: user / assistant, every fifth assistant turn a tool call answered
// by a tool message.
static json_t *conversation(void)
{
    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content",
                                          "You are a helpful assistant. Answer briefly."));
    int i = 1;
    while (json_array_size(msgs) < 49) {
        char *u = xasprintf("Question %d: what is the weather like in city number %d today?", i, i);
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", u));
        free(u);
        if (i % 5 == 0) {
            json_t *call = json_pack("{s:{s:s,s:{s:s,s:i}}}", "function", "name", "tool_1",
                                     "arguments", "query", "weather", "limit", i);
            json_array_append_new(msgs, json_pack("{s:s,s:s,s:[o]}", "role", "assistant", "content",
                                                  "", "tool_calls", call));
            json_array_append_new(msgs,
                                  json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_name", "tool_1",
                                            "content", "{\"temp\": 18, \"sky\": \"clear\"}"));
        } else {
            char *a = xasprintf("It is sunny in city %d, about %d degrees.", i, 10 + i);
            json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "assistant", "content", a));
            free(a);
        }
        i++;
    }
    json_array_append_new(
        msgs, json_pack("{s:s,s:s}", "role", "user", "content", "Thanks, and tomorrow?"));
    return msgs;
}

static double now_us(void)
{
    return (double)time_monotonic_ns() / 1000.0;
}

int main(int argc, char **argv)
{
    const char *dir = "../shared/fixtures/chat-templates";
    int runs = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else
            dir = argv[i];
    }
    json_t *tools = tools_array(), *msgs = conversation();
    printf("%zu messages, %zu tools, %d runs; microseconds per prompt\n", json_array_size(msgs),
           json_array_size(tools), runs);
    printf("%-48s %10s %10s %10s %8s\n", "source", "parse", "mean", "best", "bytes");
    static const char *const names[] = {"meta-llama-Llama-3.1-8B-Instruct",
                                        "Qwen-Qwen2.5-7B-Instruct",
                                        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
                                        "meta-llama-Llama-3.2-3B-Instruct", "qwen3.8"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.jinja", dir, names[k]);
        struct buf src;
        buf_init(&src, 0);
        if (fs_read_all(path, 1 << 20, &src, NULL) < 0) {
            fprintf(stderr, "skip %s: not found (pass the chat-templates directory)\n", path);
            buf_deinit(&src);
            continue;
        }
        double t0 = now_us();
        struct jinja_template *t;
        struct err e = {0};
        if (jinja_parse(&t, src.data, src.len, &e) < 0) {
            fprintf(stderr, "%s: %s\n", names[k], e.msg);
            return 1;
        }
        double parse_us = now_us() - t0, best = 1e18, total = 0;
        size_t bytes = 0;
        struct jinja_chat_req req = {
            .messages = msgs, .tools = tools, .bos_token = "<s>", .eos_token = "</s>"};
        for (int r = 0; r < runs; r++) {
            struct buf out;
            buf_init(&out, 0);
            double a = now_us();
            if (jinja_chat_render(t, &req, &out, &e) < 0) {  // e.g. Mistral's strict alternation
                printf("jinja %-42s refuses this conversation: %s\n", names[k], e.msg);
                buf_deinit(&out);
                bytes = 0;
                break;
            }
            double d = now_us() - a;
            total += d;
            best = d < best ? d : best;
            bytes = out.len;
            buf_deinit(&out);
        }
        char label[64];
        snprintf(label, sizeof label, "jinja %.42s", names[k]);
        if (bytes)
            printf("%-48s %10.1f %10.1f %10.1f %8zu\n", label, parse_us, total / runs, best, bytes);
        jinja_free(t);
        buf_deinit(&src);
    }
    // The Go template path for comparison.
    const char *go = template_builtin("llama3-instruct");
    double t0 = now_us();
    struct template *gt;
    struct err e = {0};
    if (!go || template_parse(&gt, go, strlen(go), &e) < 0) {
        fprintf(stderr, "llama3-instruct: %s\n", e.msg);
        return 1;
    }
    double parse_us = now_us() - t0, best = 1e18, total = 0;
    size_t bytes = 0;
    struct template_prompt_req pr = {.messages = msgs, .tools = tools};
    for (int r = 0; r < runs; r++) {
        struct buf out;
        buf_init(&out, 0);
        double a = now_us();
        if (template_render_prompt(gt, &pr, &out, NULL, &e) < 0) {
            fprintf(stderr, "go: %s\n", e.msg);
            return 1;
        }
        double d = now_us() - a;
        total += d;
        best = d < best ? d : best;
        bytes = out.len;
        buf_deinit(&out);
    }
    printf("%-48s %10.1f %10.1f %10.1f %8zu\n", "go template llama3-instruct", parse_us,
           total / runs, best, bytes);
    template_free(gt);
    json_decref(tools);
    json_decref(msgs);
    return 0;
}

// libFuzzer target for the Jinja parser and interpreter: the input is
// template text; when it parses it is rendered over a chat context (messages
// with a tool call, tools, think) with small limits, so a hostile template
// must end in an error, never a hang or a crash; then in llama.cpp's dialect
// and through the llama-server chat rules (Go-ordered tools with nested and
// anyOf schemas and unknown keys, think left unset so the capability probes
// run; a chat with images that ends with an assistant message, which llama-server
// continues).
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jinja/jinja.h"

static const char *messages_json =
    "[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"u\\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c\",\"function\":{"
    "\"name\":\"f\",\"arguments\":{\"a\":1.5,\"b\":[1,\"x\"],\"c\":{\"d\":null}}}}]},"
    "{\"role\":\"tool\",\"content\":\"r\",\"tool_name\":\"f\"}]";
// A chat with images that ends with an assistant message (llama-server continues it).
static const char *prefill_json =
    "[{\"role\":\"developer\",\"content\":\" d \"},{\"role\":\"user\",\"content\":\"u\","
    "\"images\":[\"AA\",\"BB\"]},{\"role\":\"assistant\",\"content\":\"a\"}]";
static const char *llama_tools_json =
    "[{\"type\":\"function\",\"x\":1,\"function\":{\"name\":\"g\",\"strict\":true,"
    "\"parameters\":{\"additionalProperties\":false,\"properties\":{\"o\":{\"type\":"
    "\"object\",\"title\":\"O\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
    "\"required\":[\"n\"]},\"m\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
    "\"t\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"type\":\"object\"}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"h\"}}]";
static const char *tools_json =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":{"
    "\"type\":\"number\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    struct jinja_template *t;
    if (jinja_parse(&t, (const char *)data, size, NULL) != 0)
        return 0;
    json_t *msgs = json_loads(messages_json, 0, NULL);
    json_t *tools = json_loads(tools_json, 0, NULL);
    json_t *ctx = json_object();
    json_object_set(ctx, "messages", msgs);
    json_object_set(ctx, "tools", tools);
    json_object_set_new(ctx, "bos_token", json_string("<s>"));
    struct jinja_limits lim = {.max_output_bytes = 1 << 16,
                               .max_memory_bytes = 8 << 20,
                               .max_steps = 100000,
                               .max_depth = 20};
    struct buf out;
    buf_init(&out, 0);
    jinja_render(t, ctx, &lim, &out, NULL);
    buf_reset(&out);
    struct jinja_chat_req req = {.messages = msgs,
                                 .tools = tools,
                                 .think = {.set = true, .on = true, .level = "low"},
                                 .bos_token = "<s>",
                                 .eos_token = "</s>",
                                 .tokenizer_adds_bos = true};
    if (size < 2048) {  // chat rendering uses the default (large) limits
        jinja_chat_render(t, &req, &out, NULL);
        buf_reset(&out);
        json_t *ltools = json_loads(llama_tools_json, 0, NULL);
        struct jinja_chat_req lreq = req;
        lreq.tools = ltools;
        lreq.think = (struct jinja_think){0};
        lreq.llama_server = true;
        jinja_chat_render(t, &lreq, &out, NULL);
        buf_reset(&out);
        json_t *prefill = json_loads(prefill_json, 0, NULL);
        lreq.messages = prefill;
        jinja_chat_render(t, &lreq, &out, NULL);
        json_decref(prefill);
        json_decref(ltools);
    }
    buf_reset(&out);
    lim.llama_cpp = true;
    jinja_render(t, ctx, &lim, &out, NULL);
    buf_deinit(&out);
    json_decref(ctx);
    json_decref(msgs);
    json_decref(tools);
    jinja_free(t);
    return 0;
}

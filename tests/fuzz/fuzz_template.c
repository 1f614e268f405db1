// libFuzzer target for the template parser and evaluator: the input is
// template text; when it parses it is executed over a small fixed data
// object (messages with a tool call, tools) in messages and legacy form,
// and its output parsers get the same bytes.
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "template/template.h"

static const char *data_json =
    "{\"System\":\"sys\",\"Prompt\":\"p\",\"Response\":\"\",\"Think\":true,\"ThinkLevel\":\"high\","
    "\"IsThinkSet\":true,\"Messages\":[{\"role\":\"system\",\"content\":\"s\"},"
    "{\"role\":\"user\",\"content\":\"u\",\"images\":[\"AA==\"]},"
    "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"t\",\"tool_calls\":[{\"id\":\"c\","
    "\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{\"a\":1.5,\"b\":[1,\"x\"],"
    "\"c\":{\"d\":null}}}}]},{\"role\":\"tool\",\"content\":\"r\",\"tool_name\":\"f\"}],"
    "\"Tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":{"
    "\"type\":[\"number\",\"null\"],\"enum\":[1,2]},\"b\":{\"anyOf\":[{\"type\":\"string\"}]}}}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    struct template *t;
    if (template_parse(&t, (const char *)data, size, NULL) == 0) {
        json_t *root = json_loads(data_json, 0, NULL);
        struct buf out;
        buf_init(&out, 1 << 20);
        template_execute(t, root, &out, NULL);
        buf_reset(&out);
        struct template_prompt_req req = {.messages = json_object_get(root, "Messages"),
                                          .tools = json_object_get(root, "Tools")};
        template_render_prompt(t, &req, &out, NULL, NULL);
        buf_deinit(&out);
        json_decref(root);
        template_free(t);
    }
    // output parsers over the same bytes, split in two
    size_t half = size / 2;
    struct buf a, b;
    buf_init(&a, 0);
    buf_init(&b, 0);
    struct template_think_parser tp;
    template_think_parser_init(&tp, "<think>", "</think>", size & 1);
    template_think_parser_add(&tp, (const char *)data, half, &a, &b);
    template_think_parser_add(&tp, (const char *)data + half, size - half, &a, &b);
    template_think_parser_finish(&tp, &a, &b);
    template_think_parser_deinit(&tp);
    json_t *tools = json_loads("[{\"function\":{\"name\":\"f\"}},{\"function\":{\"name\":\"fg\"}}]",
                               0, NULL);
    json_t *calls = json_array();
    struct template_tool_parser *p = template_tool_parser_new(size & 2 ? "{" : "<tc>", tools);
    template_tool_parser_add(p, (const char *)data, half, &a, calls, NULL);
    template_tool_parser_add(p, (const char *)data + half, size - half, &a, calls, NULL);
    template_tool_parser_finish(p, &a, calls);
    template_tool_parser_free(p);
    json_decref(calls);
    json_decref(tools);
    buf_deinit(&a);
    buf_deinit(&b);
    return 0;
}

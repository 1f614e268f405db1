// libFuzzer target for the template parser and evaluator: the input is
// template text; when it parses it is executed over a small fixed data
// object (messages with a tool call, tools) in messages and legacy form,
// and its output parsers (those of the chat-template formats too) get the
// same bytes.
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
    "\"type\":[\"number\",\"null\"],\"enum\":[1,2]},\"b\":{\"anyOf\":[{\"type\":\"string\"}]}}}}}]"
    "}";

// Inputs that are a JSON object are used as data instead: root data for a
// few real templates, and messages/tools for prompt building.
static const char *const data_templates[] = {
    "{{ range $i, $m := .Messages }}{{ $m.Role }}{{ .Content }}{{ range .ToolCalls }}"
    "{{ .Function.Name }}{{ .Function.Arguments }}{{ range $k, $v := .Function.Arguments }}"
    "{{ $k }}{{ $v }}{{ json $v }}{{ end }}{{ end }}{{ end }}{{ .Tools }}{{ range .Tools }}"
    "{{ .Function.Parameters }}{{ range $k, $v := .Function.Parameters.Properties }}"
    "{{ toTypeScriptType $v }}{{ $v.Type }}{{ $v.Enum }}{{ end }}{{ end }}{{ json . }}{{ . }}",
    "{{ .Prompt }}{{ .System }}{{ if .Response }}{{ .Response }}{{ end }}",
};

static void fuzz_data(const uint8_t *data, size_t size)
{
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return;
    }
    for (size_t i = 0; i < sizeof(data_templates) / sizeof(data_templates[0]); i++) {
        struct template *t;
        if (template_parse(&t, data_templates[i], strlen(data_templates[i]), NULL))
            continue;
        struct buf out;
        buf_init(&out, 1 << 20);
        template_execute(t, root, &out, NULL);
        buf_reset(&out);
        json_t *msgs =
            template_chat_messages(NULL, json_object_get(root, "Messages"), "sys", true, NULL);
        struct template_prompt_req req = {.messages = msgs,
                                          .tools = json_object_get(root, "Tools")};
        template_render_prompt(t, &req, &out, NULL, NULL);
        json_decref(msgs);
        buf_deinit(&out);
        template_free(t);
    }
    json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    if (size > 0 && data[0] == '{' && (size < 2 || data[1] != '{'))
        fuzz_data(data, size);
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
    json_t *tools =
        json_loads("[{\"function\":{\"name\":\"f\"}},{\"function\":{\"name\":\"fg\"}}]", 0, NULL);
    json_t *calls = json_array();
    struct template_tool_parser *p = template_tool_parser_new(size & 2 ? "{" : "<tc>", tools);
    template_tool_parser_add(p, (const char *)data, half, &a, calls, NULL);
    template_tool_parser_add(p, (const char *)data + half, size - half, &a, calls, NULL);
    template_tool_parser_finish(p, &a, calls);
    template_tool_parser_free(p);
    // the formats with their own call syntax (Llama 3.x's <|python_tag|>, Functionary v3.2)
    static const char *const jinjas[] = {"<|start_header_id|>ipython<|end_header_id|>", ">>>all"};
    for (size_t i = 0; i < sizeof jinjas / sizeof jinjas[0]; i++) {
        struct template_output_parser *op = template_output_parser_new_format(
            template_chat_format_detect(jinjas[i]), jinjas[i], true, tools, "");
        template_output_parser_add(op, (const char *)data, half, &b, &a, calls, NULL);
        template_output_parser_add(op, (const char *)data + half, size - half, &b, &a, calls, NULL);
        template_output_parser_finish(op, &b, &a, calls, NULL);
        template_output_parser_free(op);
    }
    json_decref(calls);
    json_decref(tools);
    buf_deinit(&a);
    buf_deinit(&b);
    return 0;
}

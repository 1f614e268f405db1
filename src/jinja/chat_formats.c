// llama-server's adjustments for particular chat formats, recognised by their template
// text as llama.cpp v0.5.0 recognises them (common/chat.cpp,
// common_chat_try_specialized_template and the parsers it hands a template to): the
// messages a template sees and the prompt it produces. Only the formats whose rendering
// llama-server changes are here; the others render as the template says.
#include "jinja/internal.h"

#include <string.h>

static bool src_has(const struct jinja_template *t, const char *needle)
{
    return t->src && strstr(t->src, needle) != NULL;
}

// Gemma 4: a template with its own tool-call syntax ('<|tool_call>call:').
static bool is_gemma4(const struct jinja_template *t)
{
    return src_has(t, "'<|tool_call>call:'");
}

static bool has_calls(json_t *m)
{
    json_t *c = json_object_get(m, "tool_calls");
    return json_is_array(c) && json_array_size(c) > 0;
}

static bool role_is(json_t *m, const char *role)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    return r && strcmp(r, role) == 0;
}

// One tool result as Gemma 4's tool_responses entry: the content parsed as JSON when it
// is JSON (an object shows as its fields), else the text; named after the call at the
// same position, else the message's tool_call_id.
static json_t *gemma4_response(json_t *msg, json_t *calls, size_t idx)
{
    json_t *content = json_object_get(msg, "content");
    json_t *resp = NULL;
    if (json_is_string(content))
        resp = json_loadb(json_string_value(content), json_string_length(content),
                          JSON_DECODE_ANY, NULL);
    if (!resp)
        resp = content ? json_incref(content) : json_null();
    json_t *fn = json_object_get(json_array_get(calls, idx), "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    if (!name || !*name)
        name = json_string_value(json_object_get(msg, "tool_call_id"));
    return json_pack("{s:s,s:o}", "name", name ? name : "", "response", resp);
}

// The model turn that starts at msgs[*pos], an assistant message with tool calls: its
// calls, the tool results that follow, and the text of a following assistant message
// without calls. The first message's own text is not kept (llama.cpp's builder).
static json_t *gemma4_turn(json_t *msgs, size_t *pos)
{
    json_t *calls = json_object_get(json_array_get(msgs, *pos), "tool_calls");
    json_t *turn = json_pack("{s:s,s:O}", "role", "assistant", "tool_calls", calls);
    json_t *responses = json_array();
    size_t i = *pos + 1;
    for (; i < json_array_size(msgs) && role_is(json_array_get(msgs, i), "tool"); i++)
        json_array_append_new(responses,
                              gemma4_response(json_array_get(msgs, i), calls,
                                              json_array_size(responses)));
    if (json_array_size(responses))
        json_object_set(turn, "tool_responses", responses);
    json_decref(responses);
    json_t *next = json_array_get(msgs, i);
    json_t *text = json_object_get(next, "content");
    if (next && role_is(next, "assistant") && !has_calls(next) &&
        ((json_is_string(text) && json_string_length(text)) ||
         (json_is_array(text) && json_array_size(text)))) {
        json_object_set(turn, "content", text);
        i++;
    }
    *pos = i;
    return turn;
}

// Gemma 4 templates older than the one that reads OpenAI-style tool messages get the
// tool results folded into the model turn as tool_responses (llama.cpp's
// convert_tool_responses_gemma4).
static json_t *gemma4_tool_responses(json_t *msgs)
{
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(msgs);) {
        json_t *m = json_array_get(msgs, i);
        if (role_is(m, "assistant") && has_calls(m)) {
            json_array_append_new(out, gemma4_turn(msgs, &i));
        } else {
            json_array_append(out, m);
            i++;
        }
    }
    return out;
}

json_t *jinja_llama_messages(const struct jinja_template *t, json_t *msgs)
{
    if (is_gemma4(t) && !src_has(t, "{#- OpenAI Chat Completions:")) {
        json_t *out = gemma4_tool_responses(msgs);
        json_decref(msgs);
        return out;
    }
    return msgs;
}

int jinja_llama_prompt(const struct jinja_template *t, struct buf *out, size_t start)
{
    // Gemma 4: a prompt that ends a turn (content after tool calls) opens the model's.
    static const char end[] = "<turn|>\n";
    size_t n = out->len - start, k = sizeof end - 1;
    if (is_gemma4(t) && n >= k && !memcmp(out->data + out->len - k, end, k))
        return buf_append_str(out, "<|turn>model\n");
    return 0;
}

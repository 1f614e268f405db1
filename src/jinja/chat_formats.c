// llama-server's adjustments for particular chat formats, recognised by their template
// text as llama.cpp v0.5.0 recognises them (common/chat.cpp,
// common_chat_templates_apply_jinja, common_chat_try_specialized_template and the
// handlers it hands a template to): the messages a template sees, the prompt it
// produces, and how a request the template refuses is answered.
#include "jinja/internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool src_has(const struct jinja_template *t, const char *needle)
{
    return t->src && strstr(t->src, needle) != NULL;
}

// ---------------------------------------------------------------------------
// The formats llama.cpp hands to a handler of their own, in the order it tries them.

enum chat_format {
    FMT_GENERIC,  // llama.cpp's parser generator
    FMT_MINISTRAL3,
    FMT_GPT_OSS,
    FMT_MUSE_GLIMMER,
    FMT_FUNCTIONARY_V32,
    FMT_KIMI_K2,
    FMT_KIMI_K3,
    FMT_LING3,
    FMT_COHERE2_MOE,
    FMT_LFM2,
    FMT_LFM25,
    FMT_GIGACHAT_V3,
    FMT_MINIMAX_M3,
    FMT_DEEPSEEK_V32,
    FMT_DEEPSEEK_V4,  // V3.2's markup, tool results in call order
    FMT_GEMMA4,
    FMT_MINICPM5,
    FMT_QWEN3_CODER,
};

// A format: texts its template contains, and one it must not.
static const struct {
    enum chat_format fmt;
    const char *has[4];
    const char *lacks;
} formats[] = {
    {FMT_MINISTRAL3, {"[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"}, "[CALL_ID]"},
    {FMT_GPT_OSS, {"<|channel|>"}, NULL},
    {FMT_MUSE_GLIMMER, {"<atem:function_calls>", "<|eom|>"}, NULL},
    {FMT_FUNCTIONARY_V32, {">>>all", ">>>${recipient}"}, NULL},
    {FMT_KIMI_K2, {"<|tool_calls_section_begin|>", "<|tool_call_begin|>"}, NULL},
    {FMT_KIMI_K3, {"<|open|>", "<|close|>", "<|end_of_msg|>"}, NULL},
    {FMT_LING3, {"<role>ASSISTANT</role>", "<arg_key>"}, NULL},
    {FMT_COHERE2_MOE, {"<|START_TEXT|>", "<|START_ACTION|>"}, NULL},
    {FMT_LFM2, {"<|tool_list_start|>", "<|tool_list_end|>"}, NULL},
    {FMT_LFM25, {"List of tools: ["}, "<|tool_list_start|>"},
    {FMT_GIGACHAT_V3, {"<|role_sep|>", "<|message_sep|>"}, "<|function_call|>"},
    {FMT_MINIMAX_M3, {"]<]minimax[>[", "<tool_call>", "<invoke name="}, NULL},
    {FMT_DEEPSEEK_V32, {"dsml_token", "DSML", "function_calls"}, NULL},
    {FMT_DEEPSEEK_V4, {"dsml_token", "DSML", "tool_calls"}, NULL},
    {FMT_GEMMA4, {"'<|tool_call>call:'"}, NULL},
    {FMT_MINICPM5, {"Tool usage guidelines:", "<function name=\"", "<param name=\""}, NULL},
    {FMT_QWEN3_CODER,
     {"<tool_call>", "<function=", "<parameter="},
     "'<tool_call><function=' ~ tool_call.name ~ '>'"},
};

static enum chat_format chat_format(const struct jinja_template *t)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        bool match = !formats[i].lacks || !src_has(t, formats[i].lacks);
        for (size_t k = 0; match && k < 4 && formats[i].has[k]; k++)
            match = src_has(t, formats[i].has[k]);
        if (match)
            return formats[i].fmt;
    }
    return FMT_GENERIC;
}

// ---------------------------------------------------------------------------
// Message helpers

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

// ---------------------------------------------------------------------------
// Gemma 4

// One tool result as Gemma 4's tool_responses entry: the content parsed as JSON when it
// is JSON (an object shows as its fields), else the text; named after the call at the
// same position, else the message's tool_call_id.
static json_t *gemma4_response(json_t *msg, json_t *calls, size_t idx)
{
    json_t *content = json_object_get(msg, "content");
    json_t *resp = NULL;
    if (json_is_string(content))
        resp = json_loadb(json_string_value(content), json_string_length(content), JSON_DECODE_ANY,
                          NULL);
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
        json_array_append_new(
            responses, gemma4_response(json_array_get(msgs, i), calls, json_array_size(responses)));
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

// ---------------------------------------------------------------------------
// Other formats

// DeepSeek V4: within a run of user and tool messages, the tool results in the order of
// the last assistant's calls (by tool_call_id; results of unknown ids count as the
// first call), the user messages where they are.
static size_t call_rank(json_t *calls, json_t *result)
{
    const char *id = json_string_value(json_object_get(result, "tool_call_id"));
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        const char *cid = json_string_value(json_object_get(c, "id"));
        if (id && cid && *cid && strcmp(id, cid) == 0)
            return i;
    }
    return 0;
}

static bool any_call_id(json_t *calls)
{
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        const char *id = json_string_value(json_object_get(c, "id"));
        if (id && *id)
            return true;
    }
    return false;
}

// Stable-sorts the tool messages among msgs[from, to) by call rank, in place.
static void sort_run(json_t *msgs, size_t from, size_t to, json_t *calls)
{
    size_t n = to - from, k = 0;
    size_t *pos = xcalloc(n ? n : 1, sizeof *pos);
    json_t **res = xcalloc(n ? n : 1, sizeof *res);
    for (size_t i = from; i < to; i++) {
        if (!role_is(json_array_get(msgs, i), "tool"))
            continue;
        json_t *m = json_incref(json_array_get(msgs, i));
        size_t j = k++;
        for (; j > 0 && call_rank(calls, res[j - 1]) > call_rank(calls, m); j--)
            res[j] = res[j - 1];
        res[j] = m;
        pos[k - 1] = i;
    }
    for (size_t i = 0; i < k; i++)
        json_array_set_new(msgs, pos[i], res[i]);
    free(pos);
    free(res);
}

static void deepseek_v4_sort_results(json_t *msgs)
{
    json_t *calls = NULL;
    size_t n = json_array_size(msgs);
    for (size_t i = 0; i < n;) {
        json_t *m = json_array_get(msgs, i);
        if (!role_is(m, "user") && !role_is(m, "tool")) {
            if (role_is(m, "assistant") && has_calls(m))
                calls = json_object_get(m, "tool_calls");
            i++;
            continue;
        }
        size_t end = i;
        while (end < n && (role_is(json_array_get(msgs, end), "user") ||
                           role_is(json_array_get(msgs, end), "tool")))
            end++;
        if (calls && any_call_id(calls))
            sort_run(msgs, i, end, calls);
        i = end;
    }
}

// Ministral 3: system and assistant texts as one text block.
static void ministral3_blocks(json_t *msgs)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (!role_is(m, "system") && !role_is(m, "assistant"))
            continue;
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c))
            json_object_set_new(m, "content", json_pack("[{s:s,s:O}]", "type", "text", "text", c));
    }
}

// StepFun's template (named by its tools preamble) gets every text trimmed of C
// whitespace at both ends.
static void trim_contents(json_t *msgs)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *s = json_string_value(json_object_get(m, "content"));
        if (!s)
            continue;
        size_t a = 0, b = strlen(s);
        while (a < b && isspace((unsigned char)s[a]))
            a++;
        while (b > a && isspace((unsigned char)s[b - 1]))
            b--;
        json_object_set_new(m, "content", json_stringn(s + a, b - a));
    }
}

// Every template except gpt-oss's reads a developer message as a system one.
static void developer_as_system(json_t *msgs)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (role_is(m, "developer"))
            json_object_set_new(m, "role", json_string("system"));
    }
}

json_t *jinja_llama_inputs(const struct jinja_template *t, json_t *msgs)
{
    bool trim = src_has(t, "You have access to the following functions in JSONSchema format");
    bool developer = !src_has(t, "<|channel|>");
    if (!trim && !developer)
        return json_incref(msgs);
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) json_array_append_new(out, json_copy(m));
    if (trim)
        trim_contents(out);
    if (developer)
        developer_as_system(out);
    return out;
}

json_t *jinja_llama_messages(const struct jinja_template *t, json_t *msgs)
{
    switch (chat_format(t)) {
    case FMT_GEMMA4:
        if (!src_has(t, "{#- OpenAI Chat Completions:")) {
            json_t *out = gemma4_tool_responses(msgs);
            json_decref(msgs);
            return out;
        }
        break;
    case FMT_DEEPSEEK_V4:
        deepseek_v4_sort_results(msgs);
        break;
    case FMT_MINISTRAL3:
        ministral3_blocks(msgs);
        break;
    default:
        break;
    }
    return msgs;
}

int jinja_llama_prompt(const struct jinja_template *t, struct buf *out, size_t start)
{
    // Gemma 4: a prompt that ends a turn (content after tool calls) opens the model's.
    static const char end[] = "<turn|>\n";
    size_t n = out->len - start, k = sizeof end - 1;
    if (n >= k && !memcmp(out->data + out->len - k, end, k) && chat_format(t) == FMT_GEMMA4)
        return buf_append_str(out, "<|turn>model\n");
    return 0;
}

// ---------------------------------------------------------------------------
// Continuing a final assistant message

// The opening of the model's turn before a continued text, for the formats whose handler
// writes its own (reasoning empty, as Ollama sends none): replaces the template's
// generation prompt, or follows it (after_prompt).
static const struct {
    enum chat_format fmt;
    const char *opening;
    bool after_prompt;
} continuations[] = {
    {FMT_MINISTRAL3, "[THINK][/THINK]", false},
    {FMT_GPT_OSS,
     "<|start|>assistant<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final"
     "<|message|>",
     false},
    {FMT_MUSE_GLIMMER,
     "<|start|>assistant to=self<|message|><|eom|><|start|>assistant to=user<|message|>", false},
    {FMT_FUNCTIONARY_V32, "<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n", false},
    {FMT_KIMI_K2, "<|im_assistant|>assistant<|im_middle|><think></think>", false},
    {FMT_KIMI_K3,
     "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|><|close|>think<|sep|>"
     "<|open|>response<|sep|>",
     false},
    {FMT_LING3, "<role>ASSISTANT</role>\n<think></think>", false},
    {FMT_COHERE2_MOE,
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|><|START_TEXT|>",
     false},
    {FMT_LFM2, "<|im_start|>assistant\n<think></think>", false},
    {FMT_LFM25, "<|im_start|>assistant\n<think></think>", false},
    {FMT_GIGACHAT_V3, "assistant<|role_sep|>\n", false},
    {FMT_MINIMAX_M3, "<mm:think></mm:think>", true},
    {FMT_DEEPSEEK_V32, "<｜Assistant｜><think></think>", false},
    {FMT_DEEPSEEK_V4, "<｜Assistant｜></think>", false},
    {FMT_MINICPM5, "<|im_start|>assistant\n<think>\n\n</think>\n\n", false},
};

// The generation prompt: where the rendering with one leaves the one without.
static const char *generation_prompt(const struct buf *out, size_t start, const char *with)
{
    const char *p = out->data ? out->data + start : "";
    size_t len = out->len - start, i = 0;
    while (i < len && with[i] && with[i] == p[i])
        i++;
    return with + i;
}

// The parser generator's continuation: the generation prompt up to the reasoning start
// marker, the markers with nothing between, then the text.
static int generic_continue(const struct jinja_template *t, const struct jinja_chat_req *req,
                            struct buf *out, size_t start, const char *with)
{
    struct buf open, close;
    buf_init(&open, 1 << 16);
    buf_init(&close, 1 << 16);
    jinja_llama_reasoning(t, req, &open, &close);
    const char *gen = generation_prompt(out, start, with);
    int rc;
    if (open.len) {
        const char *at = strstr(gen, buf_cstr(&open));
        rc = buf_append(out, gen, at ? (size_t)(at - gen) : strlen(gen));
        if (!rc)
            rc = buf_append(out, open.data, open.len);
        if (!rc)
            rc = buf_append(out, close.data ? close.data : "", close.len);
    } else {
        rc = buf_append_str(out, gen);
    }
    buf_deinit(&open);
    buf_deinit(&close);
    return rc;
}

int jinja_llama_continue(const struct jinja_template *t, const struct jinja_chat_req *req,
                         struct buf *out, size_t start, const char *with_prompt, const char *text)
{
    enum chat_format fmt = chat_format(t);
    int rc = 0;
    static const char turn_end[] = "<turn|>\n";
    size_t k = sizeof turn_end - 1;
    if (fmt == FMT_GEMMA4) {
        // a model turn opened after a closed one, then an empty thought channel
        if (out->len - start >= k && !memcmp(out->data + out->len - k, turn_end, k))
            rc = buf_append_str(out, "<|turn>model\n");
        if (!rc)
            rc = buf_append_str(out, "<|channel>thought\n<channel|>");
        return rc ? rc : buf_append_str(out, text);
    }
    if (fmt == FMT_QWEN3_CODER) {
        rc = buf_append_str(out, src_has(t, "<think>") ? "<|im_start|>assistant\n<think>\n\n"
                                                         "</think>\n\n"
                                                       : "<|im_start|>assistant\n");
        return rc ? rc : buf_append_str(out, text);
    }
    for (size_t i = 0; i < sizeof continuations / sizeof continuations[0]; i++) {
        if (continuations[i].fmt != fmt)
            continue;
        if (continuations[i].after_prompt)
            rc = buf_append_str(out, generation_prompt(out, start, with_prompt));
        if (!rc)
            rc = buf_append_str(out, continuations[i].opening);
        return rc ? rc : buf_append_str(out, text);
    }
    rc = generic_continue(t, req, out, start, with_prompt);
    return rc ? rc : buf_append_str(out, text);
}

int jinja_llama_refusal(const struct jinja_template *t, int rc, struct err *e)
{
    if (rc != ERR_FORMAT)
        return rc;
    // A format with a handler of its own lets the template's error through, which
    // llama-server answers as a server error; the parser generator wraps it as a bad
    // request.
    if (chat_format(t) != FMT_GENERIC) {
        if (e)
            e->code = ERR_INTERNAL;
        return ERR_INTERNAL;
    }
    err_prefix(e, "Unable to generate parser for this template. Automatic parser generation "
                  "failed");
    return rc;
}

// jinja: an interpreter for the Jinja2 language as chat templates use it
// (a GGUF's `tokenizer.chat_template`, Hugging Face's apply_chat_template).
//
// Parse once per model (jinja_parse), render many times (jinja_render) over a
// JSON context. The environment matches transformers': trim_blocks and
// lstrip_blocks on, loop controls, {% generation %}, tojson as Python's
// json.dumps(ensure_ascii=False), and the globals raise_exception(msg),
// strftime_now(fmt), range, dict, namespace. Undefined values behave as
// Jinja2's default Undefined.
//
// Rendering is bounded (output bytes, memory, evaluation steps, call depth):
// a hostile template gets an error, never a hang. A parsed template is
// immutable and may be rendered from several threads at once.
//
// chat.c builds the context Ollama 0.33 hands llama-server from an /api/chat
// request (jinja_chat_render) and reports what the template supports.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/json.h"

#include "util/util.h"

struct jinja_template;

// Limits for one render; zero fields take the defaults below.
struct jinja_limits {
    size_t max_output_bytes;  // rendered text
    size_t max_memory_bytes;  // values built while rendering
    uint64_t max_steps;       // evaluated nodes and loop iterations
    int max_depth;            // nested macro calls and expression depth
    // Not a limit but the dialect: llama.cpp's template engine, which concatenates
    // an undefined or none value with a string as "" where Jinja2 raises.
    bool llama_cpp;
};
#define JINJA_DEFAULT_MAX_OUTPUT (16u << 20)
#define JINJA_DEFAULT_MAX_MEMORY (256u << 20)
#define JINJA_DEFAULT_MAX_STEPS  20000000u
#define JINJA_DEFAULT_MAX_DEPTH  100

// Parses template source. Errors are ERR_FORMAT: "jinja: line N: message"
// naming the construct ("unknown tag 'include'", "unexpected '}'"). A filter or
// test that does not exist is jinja_render's error instead: at once in Jinja2's
// dialect, when it runs in llama.cpp's. Free with jinja_free (NULL is fine).
int jinja_parse(struct jinja_template **out, const char *text, size_t len, struct err *e);
void jinja_free(struct jinja_template *t);

// Renders over ctx (a JSON object: its keys are the template's variables;
// NULL = none) and appends to out. Errors: ERR_FORMAT "jinja: line N: …"
// (an undefined value used, a wrong type, raise_exception's message),
// ERR_TOO_LARGE when a limit is exceeded. out may hold partial output on error.
// lim may be NULL (defaults).
int jinja_render(const struct jinja_template *t, json_t *ctx, const struct jinja_limits *lim,
                 struct buf *out, struct err *e);

// True when the template source names the variable (as a whole identifier),
// e.g. "tools", "enable_thinking".
bool jinja_mentions(const struct jinja_template *t, const char *name);

// ---------------------------------------------------------------------------
// Chat templates (chat.c)

// The request's think value: set = present; on = true or a level; level =
// "low"/"medium"/"high" or NULL.
struct jinja_think {
    bool set;
    bool on;
    const char *level;
};

struct jinja_chat_req {
    json_t *messages;  // API messages (role, content, images, tool_calls, tool_name …)
    json_t *tools;     // request tools array, or NULL
    struct jinja_think think;
    const char *bos_token;  // vocabulary texts ("" when none)
    const char *eos_token;
    bool tokenizer_adds_bos;  // strip a leading BOS text from the prompt
    // llama.cpp's chat rules, as llama-server applies them to the body Ollama 0.33
    // builds: tools in Ollama's Go struct order (unknown keys dropped), tool-call
    // arguments as compact JSON strings unless the template reads them as an
    // object, date_string / datetime set to today, a system message merged into
    // the next turn for templates without a system role, enable_thinking on
    // when the request leaves think out and the template reacts to it (Gemma 4's
    // <|think|>), images as [img-N] tags after the text, a final assistant message
    // continued, and llama.cpp's per-format adjustments (chat_formats.c).
    bool llama_server;
    bool think_default;  // set by jinja_chat_render: llama-server's enable_thinking default
    bool continuing;     // set by jinja_chat_render: add_generation_prompt off
};

// Renders a chat prompt as Ollama 0.33 feeds llama-server: messages with
// role, content, name (from tool_name), tool_call_id, tool_calls as
// {type:"function", function:{name, arguments}}, tools when present,
// add_generation_prompt, bos_token / eos_token, enable_thinking when think
// is set, reasoning_effort when it is a level. Tool-call arguments: under
// llama_server, objects where the template reads them as one (llama.cpp's
// probe), else JSON strings; otherwise objects, and a JSON string again when
// the template fails with objects or prints them as a Python dict. Appends to
// out. Errors under llama_server, as llama-server answers: ERR_INVALID for a
// final assistant message it cannot continue, ERR_INTERNAL (500) for a template
// error in a format with a handler of its own, ERR_FORMAT (400) for the others.
int jinja_chat_render(const struct jinja_template *t, const struct jinja_chat_req *req,
                      struct buf *out, struct err *e);

// Capabilities, as Ollama 0.33's chatTemplateCapabilities reads them from
// the template text: tools when it contains "tools" or "tool_call"; thinking
// when it has both <think> and </think>, or splits content at '</think>'
// (and has neither "reasoning_content" nor "<SPECIAL_12>").
bool jinja_chat_has_tools(const char *text);
bool jinja_chat_has_thinking(const char *text);
// chatTemplateHasToolRoundTrip: tool calls and tool results both rendered.
bool jinja_chat_has_tool_round_trip(const char *text);

// renderer: Ollama's built-in renderers and parsers (model/renderers,
// model/parsers, harmony/ in Ollama), chosen per model by the config's
// `renderer` / `parser` fields (Modelfile RENDERER / PARSER).
//
//  - a renderer turns API-shaped messages, tools and the think value into
//    the prompt text a model family was trained on (byte-for-byte what
//    Ollama's Go renderer writes);
//  - a parser turns the generated text back into content, thinking and tool
//    calls, streamed: feed pieces as they arrive, partial markers at piece
//    boundaries are held back until they are resolved.
//
// Data is jansson json_t in the API's shapes (messages with role, content,
// thinking, tool_calls, tool_name; tools as the request sends them; calls as
// {"id","function":{"index","name","arguments"}}). Renderers are pure
// functions and thread-safe; a parser is per response.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "json/json.h"

#include "util/util.h"

// The request's think value, as the API carries it: set = present; on =
// true or a level; level = "low"/"medium"/"high"/"max" or NULL.
struct renderer_think {
    bool set;
    bool on;
    const char *level;
};

// True when a renderer / parser of that name is built in.
bool renderer_known(const char *name);
bool renderer_parser_known(const char *name);

// The names, NULL-terminated (for messages and docs).
const char *const *renderer_names(void);
const char *const *renderer_parser_names(void);

// Renders messages (a JSON array of API messages) with tools (array or NULL)
// and think (NULL = not set) through the named renderer; appends to out.
// Unknown name: ERR_NOT_FOUND with Ollama's text `unknown renderer "x"`.
// Malformed messages are ERR_INVALID.
int renderer_render(const char *name, json_t *messages, json_t *tools,
                    const struct renderer_think *think, struct buf *out, struct err *e);

// What a parser reports as capabilities (Ollama's HasToolSupport /
// HasThinkingSupport). False for an unknown name.
bool renderer_parser_tools(const char *name);
bool renderer_parser_thinking(const char *name);

// A streaming parser for one response.
struct renderer_parser;

// tools: the request's tools (borrowed for the parser's lifetime, may be
// NULL); last: the conversation's last message (prefill of an assistant
// turn; may be NULL); think: NULL = not set. Unknown name: ERR_NOT_FOUND
// with the text `unknown parser "x"`.
int renderer_parser_new(struct renderer_parser **out, const char *name, json_t *tools, json_t *last,
                        const struct renderer_think *think, struct err *e);
void renderer_parser_free(struct renderer_parser *p);

// The tools as the prompt must show them: harmony renames function names to
// identifiers (a new reference; the parser maps calls back). Others return a
// new reference to the tools given (or NULL).
json_t *renderer_parser_prompt_tools(struct renderer_parser *p);

// Feeds a piece of generated text (done: the last piece; s may be empty).
// Appends what can be sent now to content and thinking and complete calls to
// calls (ids "call_xxxxxxxx" assigned here). A call the parser cannot decode
// is ERR_INVALID with a message naming the parser.
int renderer_parser_add(struct renderer_parser *p, const char *s, size_t n, bool done,
                        struct buf *content, struct buf *thinking, json_t *calls, struct err *e);

// The renderer a model's config name stands for: Ollama's server resolves
// "gemma4" to "gemma4-small" (e2b/e4b templates) or "gemma4-large"
// (12b/26b/31b) by the model's name, then by its parameter count (the
// config's model_type, e.g. "25.2B": 12B and up is large), else small. Other
// names are returned as given. Borrowed from the argument or static; any
// argument may be NULL.
const char *renderer_resolve(const char *renderer, const char *model_name, const char *model_type);

// Ollama's first two prompt sources for a model: the config's renderer /
// parser, then harmony for gpt-oss (family "gptoss"/"gpt-oss" whose Go
// template has "<|start|>" and "<|end|>": the template renders, the harmony
// parser reads the output). Strings are borrowed from the arguments (or
// static); NULL = none. active is false when neither applies (the Go or
// Jinja template handles the model).
struct renderer_choice {
    const char *renderer;  // NULL: the template renders the prompt
    const char *parser;    // NULL: the template's own output parsing
    bool harmony;          // selected by the gpt-oss rule (think "max" means "high")
    bool active;
};
void renderer_select(const char *renderer, const char *parser, const char *family,
                     const char *template_text, struct renderer_choice *out);

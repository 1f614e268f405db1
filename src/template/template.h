// template: Ollama's prompt templates (docs/spec/templates.md).
//
//  - an interpreter for the Go text/template language subset real model
//    templates use (template_parse / template_execute);
//  - chat prompt building: collation, image tags, legacy turn-by-turn
//    rendering, suffix mode and truncation to fit the context window
//    (template_render_prompt);
//  - streaming parsers for the model's output: thinking tags and tool calls;
//  - the built-in Go templates and the autodetection of one from a GGUF's
//    Jinja `tokenizer.chat_template` (template_detect).
//
// Data passed in and out is jansson json_t in the API's JSON shapes (request
// messages and tools, response tool calls). Parsed templates are immutable
// and may be shared between threads; parsers are per response.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/json.h"

#include "util/util.h"

// ---------------------------------------------------------------------------
// Templates

struct template;

// Parses template text (Go text/template syntax with Ollama's functions).
// Errors are ERR_FORMAT with Go-style text: "template: :LINE:COL: message"
// (COL is the 0-based byte column, as Go's ErrorContext counts). When the
// template names neither .Messages nor .Response, {{ .Response }} is
// appended (templates.md §1). Free with template_free.
int template_parse(struct template **out, const char *text, size_t len, struct err *e);
void template_free(struct template *t);

// The text as given (without the appended {{ .Response }}).
const char *template_text(const struct template *t);

// True when the identifier set (templates.md §1: field and variable names,
// lower-cased) contains name, e.g. "messages", "tools", "suffix".
bool template_has_ident(const struct template *t, const char *lower_name);
// Capabilities (templates.md §11).
bool template_supports_tools(const struct template *t);   // "tools" identifier
bool template_supports_insert(const struct template *t);  // "suffix" identifier
// Thinking tags (§10.1); both NULL when the template has none.
bool template_thinking_tags(const struct template *t, const char **open, const char **close);
// Tool-call tag (§10.2): "<tool_call>", "[TOOL_CALLS] [", or "{" by default.
const char *template_tool_tag(const struct template *t);

// Executes the template over a root data map (templates.md §5): a JSON object
// whose keys are the root names ("System", "Messages", "Tools", "Prompt",
// "Suffix", "Response", "Think", "ThinkLevel", "IsThinkSet"; any other key is
// seen as plain JSON). "Messages" holds API-form message objects, "Tools" the
// request's tools (null = none). Appends to out. Execution errors (missing
// field, wrong type, index out of range, step or output limits) are
// ERR_FORMAT with a Go-style message; out may then hold partial output.
int template_execute(const struct template *t, json_t *data, struct buf *out, struct err *e);

// ---------------------------------------------------------------------------
// Prompt building (templates.md §6–8)

// The request's think value: think_set = present; think = on (true or a
// level); level = "low"/"medium"/"high"/"max" or "" (NULL = "").
struct template_think {
    bool think_set;
    bool think;
    const char *level;
};

struct template_prompt_req {
    json_t *messages;  // array of API messages (role, content, images, tool_calls, ...)
    json_t *tools;     // request tools array or NULL
    struct template_think think;
    // Suffix mode (/api/generate with prompt and suffix both non-empty).
    const char *prompt;
    const char *suffix;
    // One candidate of truncation (§8), which the prompt module's one loop
    // drives: messages[start..] with the system messages before start kept,
    // [img-N] tags numbered from messages[start]. A probe renders no tags
    // (the text whose tokens are counted, as upstream).
    size_t start;
    bool probe;
};

struct template_prompt_info {
    json_t *images;    // owned: base64 image strings in [img-N] order (N = index)
    size_t n_dropped;  // non-system messages before start
};

// Renders the prompt for a request: mode choice (suffix / messages /
// legacy), collation, image tags, from req->start. Appends to out; fills info
// (may be NULL; free with template_prompt_info_deinit).
int template_render_prompt(const struct template *t, const struct template_prompt_req *req,
                           struct buf *out, struct template_prompt_info *info, struct err *e);
void template_prompt_info_deinit(struct template_prompt_info *info);

// §7.1 chat assembly: history (model MESSAGEs, may be NULL) + request
// messages, with the model's SYSTEM (may be NULL) put first when the request
// does not start with a system message; roles lower-cased. strip_thinking
// (qwen3 family / deepseek-r1) removes <think>…</think> from assistant
// messages before the last user message. Returns a new array (caller
// decrefs), or NULL with e set when a message is malformed.
json_t *template_chat_messages(json_t *history, json_t *request_msgs, const char *model_system,
                               bool strip_thinking, struct err *e);
// §7.1 generate assembly: [system] + history + {user, prompt, images}.
// images may be NULL. Returns a new array.
json_t *template_generate_messages(const char *system, json_t *history, const char *prompt,
                                   json_t *images);

// ---------------------------------------------------------------------------
// Output parsing (templates.md §10), streaming: feed pieces as they arrive.

// Thinking: splits "<think>…</think>" into thinking and content.
struct template_think_parser {
    char *open, *close;
    int state;
    struct buf acc;
};
// start_inside: the prompt (trimmed) ends with the opening tag (§10.1).
void template_think_parser_init(struct template_think_parser *p, const char *open,
                                const char *close, bool start_inside);
void template_think_parser_deinit(struct template_think_parser *p);
// Appends what can be sent now to thinking / content.
int template_think_parser_add(struct template_think_parser *p, const char *s, size_t n,
                              struct buf *thinking, struct buf *content);
// End of output: flushes what is still held back (as thinking when inside,
// else as content).
int template_think_parser_finish(struct template_think_parser *p, struct buf *thinking,
                                 struct buf *content);
// True when the rendered prompt, trimmed of trailing white space, ends with
// the opening tag: the parser then starts inside the thinking (§10.1).
bool template_think_starts_inside(const char *prompt, size_t len, const char *open);
// The text with its thinking section removed (§7.1 step 3). Caller frees.
char *template_strip_thinking(const char *text, const char *open, const char *close);

// Tool calls: JSON after the template's tool-call tag.
struct template_tool_parser;
// tag: template_tool_tag(); tools: the request's tools array (names).
struct template_tool_parser *template_tool_parser_new(const char *tag, json_t *tools);
void template_tool_parser_free(struct template_tool_parser *p);
// Appends content to send now to content and complete calls to calls (a JSON
// array of {"id","function":{"index","name","arguments"}}).
int template_tool_parser_add(struct template_tool_parser *p, const char *s, size_t n,
                             struct buf *content, json_t *calls, struct err *e);
// End of response: calls still complete in the buffer go to calls; with a
// "{"/"[" tag and no call found, the buffered text goes to content (also a
// held-back partial tag).
int template_tool_parser_finish(struct template_tool_parser *p, struct buf *content, json_t *calls);

// Both parsers chained as the server uses them: thinking (when think is on
// and the template has tags; started inside when the rendered prompt ends
// with the opening tag), then tool calls over the remaining content (when
// tools is a non-empty array).
struct template_output_parser;
struct template_output_parser *template_output_parser_new(const struct template *t, bool think,
                                                          json_t *tools, const char *prompt);
void template_output_parser_free(struct template_output_parser *p);
// Appends the thinking, content and complete calls a piece yields now.
int template_output_parser_add(struct template_output_parser *p, const char *s, size_t n,
                               struct buf *thinking, struct buf *content, json_t *calls,
                               struct err *e);
// End of the response: flushes what was held back.
int template_output_parser_finish(struct template_output_parser *p, struct buf *thinking,
                                  struct buf *content, json_t *calls, struct err *e);

// Output formats of models on their own Jinja chat template (Hermes/Qwen
// <tool_call>, Llama 3.x JSON and <|python_tag|>, Mistral [TOOL_CALLS],
// DeepSeek R1, Command R / R7B, Functionary, generic JSON), chosen from the
// template text in the order llama.cpp chooses.
struct template_call_syntax;
struct template_chat_format {
    const char *name;        // llama.cpp's name for it ("hermes_2_pro", ...)
    const char *needles[2];  // all present in the template (NULL-terminated)
    const char *think_open;  // thinking tags, or NULL
    const char *think_close;
    const char *tool_tag;  // as template_tool_parser_new takes it, or NULL with a syntax
    // a syntax with its own parser (Llama 3.x's <|python_tag|>, Functionary
    // v3.2's segments), or NULL: JSON after tool_tag
    const struct template_call_syntax *syntax;
};
// Never NULL: the generic format when nothing else matches.
const struct template_chat_format *template_chat_format_detect(const char *jinja);
// The output parser chain for a format: thinking when think is on and the
// template (jinja) has the format's tags; tool calls when tools is non-empty.
struct template_output_parser *
template_output_parser_new_format(const struct template_chat_format *f, const char *jinja,
                                  bool think, json_t *tools, const char *prompt);

// ---------------------------------------------------------------------------
// Built-in templates (modelfile.md §5)

// The built-in Go template text of a name ("chatml", "llama3-instruct", ...),
// or NULL.
const char *template_builtin(const char *name);
// Its stop words (NULL-terminated list; empty list when none), or NULL.
const char *const *template_builtin_stops(const char *name);
// Matches a Jinja chat template against the known ones (Levenshtein distance
// < 100, ties to the earlier entry); returns the built-in name or NULL.
const char *template_detect(const char *jinja, size_t len);

// The default template for models without one.
#define TEMPLATE_DEFAULT "{{ .Prompt }}"

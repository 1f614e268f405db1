// prompt: the one home of a model's prompt (docs/internals/prompt.md). It
// chooses which of Ollama 0.33's prompt engines serves a model (a built-in
// renderer/parser, harmony, the Modelfile's Go template or the GGUF's Jinja
// chat template), renders a request's messages through it with truncation to
// the context window, and reads the model's output back into content,
// thinking and tool calls with one parser type for all engines. It is the
// only module that links the engines (template, jinja, renderer); the store
// and the server see this header only.
#ifndef OLLAMA_PROMPT_H
#define OLLAMA_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/json.h"
#include "util/util.h"

// ---------------------------------------------------------------------------
// GGUF facts (facts.c): what the server process needs from a model's GGUF
// header, read once per blob and cached (blobs are content-addressed; the
// size and modification time guard other paths).

struct prompt_facts {
    char *chat_template;  // owned: tokenizer.chat_template, NULL when absent
    char *bos_token;      // owned: the vocabulary's BOS / EOS texts ("" when none)
    char *eos_token;
    bool adds_bos;           // the tokenizer puts BOS in front itself
    int64_t context_length;  // <arch>.context_length, 0 when absent
    bool pooling;            // <arch>.pooling_type present (an embedding model)
    bool vision, audio;      // <arch>.vision.block_count / audio.block_count present
};

// Fills out from the cache, reading the header on a miss. False (out zeroed)
// when path is NULL or the file is not a readable GGUF.
bool prompt_facts_get(const char *path, struct prompt_facts *out);
void prompt_facts_deinit(struct prompt_facts *f);

// ---------------------------------------------------------------------------
// Prompt source (choose.c): which of Ollama 0.33's four ways turns a chat
// into a prompt for this model (server/images.go selectedTemplateSource,
// routes.go shouldUseGoTemplate): the renderer/parser named in the config,
// harmony (gpt-oss), the Modelfile's Go template (unless the GGUF template
// offers more, shouldPreferChatTemplate, or OLLAMA_GO_TEMPLATE=0), or the
// GGUF's own Jinja tokenizer.chat_template.

enum prompt_source {
    PROMPT_NONE,           // neither template: the default {{ .Prompt }}
    PROMPT_RENDERER,       // config renderer and/or parser
    PROMPT_HARMONY,        // gpt-oss family with a harmony template
    PROMPT_GO_TEMPLATE,    // the TEMPLATE layer
    PROMPT_CHAT_TEMPLATE,  // the GGUF's tokenizer.chat_template (Jinja)
};

// What the store knows of a model that bears on its prompt (borrowed strings,
// any may be NULL).
struct prompt_model {
    const char *model_path;     // the GGUF blob
    const char *template_text;  // the TEMPLATE layer
    const char *renderer;       // config RENDERER / PARSER
    const char *parser;
    const char *family;      // config model_family
    const char *model_type;  // config model_type ("25.2B"), for gemma4's variant
    const char *display;     // the model's name as shown
};

struct prompt_choice {
    enum prompt_source source;
    char *chat_template;  // owned: tokenizer.chat_template, NULL when absent
    char *bos_token;      // owned: the vocabulary's BOS / EOS texts ("" when none)
    char *eos_token;
    bool tokenizer_adds_bos;  // the tokenizer puts BOS in front itself
};

// Chooses the source for m. OLLAMA_GO_TEMPLATE is read from the environment
// (unset: the Go template unless the chat template offers more; true: the Go
// template whenever there is one; false: never).
void prompt_choose(const struct prompt_model *m, struct prompt_choice *out);
void prompt_choice_deinit(struct prompt_choice *c);
// "renderer_parser", "renderer", "parser", "harmony", "go_template",
// "gguf_chat_template" or "none", as Ollama logs the selection.
const char *prompt_source_name(const struct prompt_model *m, enum prompt_source s);

// What the chosen source's template can do (Ollama's goTemplateCapabilities /
// chatTemplateCapabilities); nothing for a renderer, harmony or no template.
struct prompt_caps {
    bool tools, insert, thinking;
};
void prompt_source_caps(const struct prompt_model *m, struct prompt_caps *out);

// The built-in engines by name: whether a RENDERER / PARSER exists, and what
// a parser reports (Ollama's HasToolSupport / HasThinkingSupport).
bool prompt_renderer_known(const char *name);
bool prompt_parser_known(const char *name);
bool prompt_parser_tools(const char *name);
bool prompt_parser_thinking(const char *name);

// A Go template given to create must parse: ERR_INVALID "template error: ...".
int prompt_go_template_check(const char *text, struct err *e);
// The built-in Go template matching a Jinja chat template (Ollama's
// template detection at create): its name, text and stop words; false when
// none matches.
bool prompt_go_template_detect(const char *chat_template, const char **name, const char **text,
                               const char *const **stops);

// ---------------------------------------------------------------------------
// One request's prompt (render.c, parser.c).

// The request's think value: set = present; on = true or a level; level =
// "low"/"medium"/"high"/"max" or NULL.
struct prompt_think {
    bool set;
    bool on;
    const char *level;
};

// Token counter for truncation: the number of tokens of text, or < 0 on error.
typedef int64_t (*prompt_count_fn)(void *ctx, const char *text, size_t len, struct err *e);

struct prompt;

// Opens the prompt of a request on model m: the source (a non-empty
// req_template is a Go template and wins), the Go template (the request's,
// the model's, or the plain default) and the built-in renderer / parser
// (Ollama's order: RENDERER/PARSER, then harmony for gpt-oss). harmony's
// Reasoning only knows low/medium/high, so it turns think->level "max" into
// "high". Errors: ERR_INVALID when the Go template does not parse;
// ERR_NOT_FOUND with Ollama's `unknown renderer "x"` / `unknown parser "x"`.
int prompt_open(struct prompt **out, const struct prompt_model *m, const char *req_template,
                struct prompt_think *think, struct err *e);
void prompt_free(struct prompt *p);
enum prompt_source prompt_get_source(const struct prompt *p);

// A request as the prompt sees it: a chat's messages, or a generate's
// system / prompt / suffix / images, with the model's MESSAGE history and
// SYSTEM. All borrowed.
struct prompt_input {
    bool chat;
    bool raw;                  // generate: the prompt as given, no template
    const char *model_name;    // as sent (the deepseek-r1 rule of thinking removal)
    json_t *history;           // the model's MESSAGEs, may be NULL
    const char *model_system;  // the model's SYSTEM, may be NULL
    json_t *messages;          // chat: the request's messages
    const char *system;        // generate: the request's system (NULL: the model's)
    const char *prompt, *suffix;
    json_t *images;    // generate: the request's images
    bool has_context;  // generate: context tokens were given (no history)
    json_t *tools;     // the request's tools, may be NULL
    struct prompt_think think;
    // Truncation: when truncate and count are set, the oldest non-system
    // messages are dropped until the prompt fits n_ctx tokens.
    bool truncate;
    int64_t n_ctx;
    prompt_count_fn count;
    void *count_ctx;
};

// Renders the prompt for in and appends it to out (after whatever out holds:
// the detokenized context of a generate). A malformed message is
// ERR_INVALID; a template that fails is ERR_FORMAT.
int prompt_render(struct prompt *p, const struct prompt_input *in, struct buf *out, struct err *e);

// ---------------------------------------------------------------------------
// The output parser (parser.c): one type over the engines' parsers.

struct prompt_parser;

// The request's output parser: the built-in one made by prompt_render when a
// parser is named, else the template's (the Go template's, or the format of
// the Jinja chat template) for think, tools and the rendered prompt. Owned by
// p; made on the first call.
struct prompt_parser *prompt_parser(struct prompt *p, bool think, json_t *tools,
                                    const char *prompt);
// Appends the content, thinking and complete tool calls a piece of output
// yields now. A call that cannot be decoded is ERR_INVALID.
int prompt_parser_add(struct prompt_parser *pp, const char *s, size_t n, struct buf *content,
                      struct buf *thinking, json_t *calls, struct err *e);
// End of the output: flushes what was held back.
int prompt_parser_finish(struct prompt_parser *pp, struct buf *content, struct buf *thinking,
                         json_t *calls, struct err *e);

#endif

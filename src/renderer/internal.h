// Shared between the renderer module's files: the renderer and parser
// tables, the parser object and the text helpers every family uses.
#pragma once

#include "renderer/renderer.h"

#include <stdint.h>

// ---------------------------------------------------------------------------
// Renderers

// One renderer: appends the prompt for (messages, tools, think) to out.
typedef int (*rnd_render_fn)(json_t *messages, json_t *tools, const struct renderer_think *think,
                             int variant, struct buf *out, struct err *e);

struct rnd_renderer {
    const char *name;
    rnd_render_fn render;
    int variant;  // passed to render (family options, e.g. thinking on)
};

int rnd_render_qwen3coder(json_t *msgs, json_t *tools, const struct renderer_think *think,
                          int variant, struct buf *out, struct err *e);
int rnd_render_qwen35(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e);
int rnd_render_deepseek3(json_t *msgs, json_t *tools, const struct renderer_think *think,
                         int variant, struct buf *out, struct err *e);
int rnd_render_cogito(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e);
int rnd_render_olmo3(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                     struct buf *out, struct err *e);
int rnd_render_olmo3_think(json_t *msgs, json_t *tools, const struct renderer_think *think,
                           int variant, struct buf *out, struct err *e);
int rnd_render_harmony(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                       struct buf *out, struct err *e);

// ---------------------------------------------------------------------------
// Parsers

struct rnd_out {
    struct buf *content, *thinking;
    json_t *calls;
};

struct rnd_parser_kind;

struct renderer_parser {
    const struct rnd_parser_kind *kind;
    json_t *tools;         // the request's tools (owned reference, may be NULL)
    json_t *prompt_tools;  // as rendered (owned reference, may be NULL)
    struct buf acc;        // text not yet resolved
    int state;
    int n_calls;  // index of the next call
    int variant;  // the kind's variant
    bool flag;    // family-specific (e.g. "thinking open tag may come")
    void *impl;   // family-specific state (freed by kind->deinit)
};

struct rnd_parser_kind {
    const char *name;
    bool tools, thinking;  // capabilities
    int variant;
    // Sets the initial state; may fill p->prompt_tools (default: tools).
    int (*init)(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                int variant, struct err *e);
    // Consumes what it can of p->acc (the new piece is already appended).
    int (*add)(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
    void (*deinit)(struct renderer_parser *p);
};

int rnd_qwen3coder_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_qwen3_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                   int variant, struct err *e);
int rnd_qwen3_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_qwen35_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e);
int rnd_qwen35_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_qwen35_deinit(struct renderer_parser *p);
int rnd_deepseek3_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                       int variant, struct err *e);
int rnd_deepseek3_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_olmo3_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_ministral_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                       int variant, struct err *e);
int rnd_ministral_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_ministral_deinit(struct renderer_parser *p);
int rnd_render_glm47(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                     struct buf *out, struct err *e);
int rnd_glm47_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                   int variant, struct err *e);
int rnd_glm47_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_render_glmocr(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e);
int rnd_render_qwen3vl(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                       struct buf *out, struct err *e);
int rnd_qwen3vl_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                     int variant, struct err *e);
int rnd_qwen3vl_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_render_nemotron(json_t *msgs, json_t *tools, const struct renderer_think *think,
                        int variant, struct buf *out, struct err *e);
int rnd_render_cohere(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e);
int rnd_cohere_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e);
int rnd_cohere_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_render_lfm2(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                    struct buf *out, struct err *e);
int rnd_lfm2_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                  int variant, struct err *e);
int rnd_lfm2_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_lfm2_deinit(struct renderer_parser *p);
int rnd_render_laguna(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e);
int rnd_laguna_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e);
int rnd_laguna_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_laguna_deinit(struct renderer_parser *p);
int rnd_render_glimmer(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                       struct buf *out, struct err *e);
int rnd_glimmer_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                     int variant, struct err *e);
int rnd_glimmer_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_glimmer_deinit(struct renderer_parser *p);
int rnd_render_gemma4(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                      struct buf *out, struct err *e);
int rnd_gemma4_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                    int variant, struct err *e);
int rnd_gemma4_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_gemma4_deinit(struct renderer_parser *p);
const char *rnd_gemma4_resolve(const char *model_name, const char *model_type);
int rnd_render_functiongemma(json_t *msgs, json_t *tools, const struct renderer_think *think,
                             int variant, struct buf *out, struct err *e);
int rnd_functiongemma_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
int rnd_harmony_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                     int variant, struct err *e);
int rnd_harmony_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e);
void rnd_harmony_deinit(struct renderer_parser *p);

// ---------------------------------------------------------------------------
// Helpers (util.c)

// A message's string field, "" when absent.
const char *rnd_str(const json_t *m, const char *key);
// A tool's function object field (tool.function.<key>), or NULL.
json_t *rnd_tool_fn(const json_t *tool, const char *key);
// The function of a tool call (call.function), or NULL.
json_t *rnd_call_fn(const json_t *call);
// A tool call as GLM's templates write it (glm-4.7, glm-ocr): open, the
// name, <arg_key>k</arg_key><arg_value>v</arg_value> per argument (strings
// as they are, other values as Go JSON), </tool_call>.
void rnd_glm_tool_call(struct buf *out, json_t *call, const char *open);
// GLM's system block listing the tools (glm-4.7, glm-ocr): the tools as Go
// JSON between <tools></tools>, then the call format.
void rnd_glm_tools(struct buf *out, json_t *tools);

// The tool-call format instructions that Ollama's Qwen3-Coder and Qwen3.5
// renderers both write after the tool list (the same text in each).
#define RND_QWEN_CALL_FORMAT                                                                       \
    "If you choose to call a function ONLY reply in the following format with NO "                 \
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"    \
    "\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "  \
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"        \
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "         \
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"     \
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "      \
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "    \
    "no function call available, answer the question like normal with your current knowledge "     \
    "and do not tell the user about function calls\n</IMPORTANT>"

// Go's unicode.IsSpace over UTF-8: bytes of leading / trailing white space.
size_t rnd_leading_ws(const char *s, size_t n);
size_t rnd_trailing_ws(const char *s, size_t n);
// Go's strings.TrimSpace on the slice (*s, *n), in place.
void rnd_trim(const char **s, size_t *n);
// The longest suffix of s[0..n) that is a proper prefix of delim (Ollama's
// overlap()).
size_t rnd_overlap(const char *s, size_t n, const char *delim);
// First occurrence of needle in s[0..n), or NULL.
const char *rnd_find(const char *s, size_t n, const char *needle);
// Drops the first k bytes of b.
void rnd_buf_consume(struct buf *b, size_t k);
// Splits p->acc at tag (at points at it inside p->acc): appends the text
// before it, right-trimmed, to `to` and keeps what follows, left-trimmed.
// Returns true when something follows.
bool rnd_split_at(struct renderer_parser *p, const char *at, const char *tag, struct buf *to);
// Drops the white space at the start of p->acc while *pending: 0 when nothing
// else has come yet, else clears *pending and returns 1 (a parser step).
int rnd_trim_lead(struct renderer_parser *p, bool *pending);

// Go's json.Marshal of a decoded value: map keys sorted, <, >, & escaped.
int rnd_go_json(struct buf *out, const json_t *v);
// The same with a space after each ':' and ',' outside strings (Ollama's
// marshalWithSpaces).
int rnd_go_json_spaced(struct buf *out, const json_t *v);
// The same keeping the objects' key order (a Go struct or ordered map).
int rnd_go_json_spaced_ordered(struct buf *out, const json_t *v);
// The same without escaping <, > and & (an Encoder with SetEscapeHTML(false),
// as Transformers' tojson writes), keys sorted or in their order.
int rnd_go_json_spaced_unescaped(struct buf *out, const json_t *v, bool sort_keys);
// An API tool as Go's json.Marshal(api.Tool) writes it: struct field order,
// omitempty, a single type as a string, properties in request order, free
// form values ("items", "$defs", "enum") with sorted keys. New reference.
json_t *rnd_go_tool(const json_t *tool);
// Appends that encoding (spaced: marshalWithSpaces).
int rnd_go_tool_json(struct buf *out, const json_t *tool, bool spaced);
// Go's json.Marshal of api.ToolCallFunctionArguments: the arguments in
// their order, nested objects with sorted keys.
int rnd_go_args_json(struct buf *out, const json_t *args);
// Go's json.MarshalIndent(v, "", indent) of a value already in its Go
// order (re-indents the compact encoding).
int rnd_go_json_indent(struct buf *out, const json_t *v, const char *indent);
// Ollama's renderContentWithImageTags: [img-N] tags (N from offset) replace
// "[img]" placeholders in order or go in front; returns the next offset.
size_t rnd_image_tags(struct buf *out, const char *content, size_t n_images, size_t offset);

// fmt's %v of a decoded JSON value (numbers are float64: 1e+06, 0.5).
int rnd_go_value(struct buf *out, const json_t *v);

// The declared types of a tool parameter (its "type", or every anyOf
// branch's), borrowed; at most max.
void rnd_param_types(json_t *tools, const char *fn_name, const char *param, const char **types,
                     size_t *n_types, size_t max);
// The same for one tool object.
void rnd_tool_param_types(const json_t *tool, const char *param, const char **types,
                          size_t *n_types, size_t max);
// Ollama's parseTypedToolValue: raw text typed by the declared types (null,
// then boolean, integer, number, array, object, string). New reference.
json_t *rnd_typed_value(const char *raw, const char *const *types, size_t n);

// Appends {"id","function":{"index","name","arguments"}} to calls (args
// stolen; NULL = {}).
void rnd_call_append(struct renderer_parser *p, json_t *calls, const char *name, json_t *args);

// Emits the unambiguous part of p->acc as content (or thinking) while waiting
// on `tag`: a partial tag at the end and the white space before it are held
// back (Ollama's parsers withhold trailing white space too).
void rnd_emit_until_partial(struct renderer_parser *p, const char *tag, const char *tag2,
                            struct buf *to);

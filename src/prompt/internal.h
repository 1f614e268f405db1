// What the prompt module's files share: one request's prompt, the output
// parser's function table, and the call an engine renders with.
#ifndef OLLAMA_PROMPT_INTERNAL_H
#define OLLAMA_PROMPT_INTERNAL_H

#include "jinja/jinja.h"
#include "prompt/prompt.h"
#include "renderer/renderer.h"
#include "template/template.h"

// One engine's output parser behind the common type (parser.c).
struct prompt_parser_ops {
    int (*add)(void *impl, const char *s, size_t n, struct buf *content, struct buf *thinking,
               json_t *calls, struct err *e);
    int (*finish)(void *impl, struct buf *content, struct buf *thinking, json_t *calls,
                  struct err *e);
    void (*free)(void *impl);
};

struct prompt_parser {
    const struct prompt_parser_ops *ops;
    void *impl;  // struct template_output_parser or struct renderer_parser
};

struct prompt_parser *prompt_parser_wrap_renderer(struct renderer_parser *bp);
void prompt_parser_free(struct prompt_parser *pp);

struct prompt {
    struct prompt_choice pc;
    struct template *tmpl;           // the Go template (request's, model's or the default)
    struct renderer_choice builtin;  // RENDERER / PARSER / harmony
    struct prompt_parser *parser;    // made by prompt_render (built-in) or prompt_parser
    char *family;                    // the model's family ("" when none)
};

// What one engine renders a candidate with.
struct engine_call {
    json_t *tools;                        // the tools the prompt shows
    const struct renderer_think *rthink;  // built-in renderers
    struct template_think think;          // Go and Jinja templates
    const struct jinja_template *jinja;   // the parsed chat template
    // The Go template's probes (renderings whose tokens are counted) have no
    // image tags, so the start the loop picks is rendered once more.
    bool probes_differ;
};
// Renders msgs[start..] with the system messages before start kept; probe:
// a rendering whose tokens the truncation loop counts.
typedef int (*engine_fn)(struct prompt *p, const struct engine_call *c, json_t *msgs, size_t start,
                         bool probe, struct buf *out, struct err *e);

static inline struct template_think template_think_of(const struct prompt_think *t)
{
    return (struct template_think){t->set, t->on, t->level};
}

#endif

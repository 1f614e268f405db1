// The output parser of a request, one type over the engines' own parsers:
// the Go template's (thinking tags and tool-call tag read from the template),
// the Jinja chat template's (the output format its text names), and a
// built-in parser (PARSER / harmony). Each sits behind a function table, so
// the server feeds pieces and flushes without knowing which engine reads.
#include "prompt/internal.h"

#include <stdlib.h>

static int template_add(void *impl, const char *s, size_t n, struct buf *content,
                        struct buf *thinking, json_t *calls, struct err *e)
{
    return template_output_parser_add(impl, s, n, thinking, content, calls, e);
}

static int template_finish(void *impl, struct buf *content, struct buf *thinking, json_t *calls,
                           struct err *e)
{
    // The template parsers flush what they hold as plain text; nothing fails.
    (void)e;
    template_output_parser_finish(impl, thinking, content, calls, NULL);
    return 0;
}

static void template_release(void *impl)
{
    template_output_parser_free(impl);
}

static int renderer_add(void *impl, const char *s, size_t n, struct buf *content,
                        struct buf *thinking, json_t *calls, struct err *e)
{
    return renderer_parser_add(impl, s, n, false, content, thinking, calls, e);
}

static int renderer_finish(void *impl, struct buf *content, struct buf *thinking, json_t *calls,
                           struct err *e)
{
    return renderer_parser_add(impl, "", 0, true, content, thinking, calls, e);
}

static void renderer_release(void *impl)
{
    renderer_parser_free(impl);
}

static const struct prompt_parser_ops template_ops = {template_add, template_finish,
                                                      template_release};
static const struct prompt_parser_ops renderer_ops = {renderer_add, renderer_finish,
                                                      renderer_release};

static struct prompt_parser *wrap(const struct prompt_parser_ops *ops, void *impl)
{
    struct prompt_parser *pp = xcalloc(1, sizeof *pp);
    pp->ops = ops;
    pp->impl = impl;
    return pp;
}

struct prompt_parser *prompt_parser_wrap_renderer(struct renderer_parser *bp)
{
    return wrap(&renderer_ops, bp);
}

struct prompt_parser *prompt_parser(struct prompt *p, bool think, json_t *tools, const char *prompt)
{
    if (p->parser)
        return p->parser;
    struct template_output_parser *tp;
    if (p->pc.source == PROMPT_CHAT_TEMPLATE)
        tp = template_output_parser_new_format(template_chat_format_detect(p->pc.chat_template),
                                               p->pc.chat_template, think, tools, prompt);
    else
        tp = template_output_parser_new(p->tmpl, think, tools, prompt);
    p->parser = wrap(&template_ops, tp);
    return p->parser;
}

int prompt_parser_add(struct prompt_parser *pp, const char *s, size_t n, struct buf *content,
                      struct buf *thinking, json_t *calls, struct err *e)
{
    return pp->ops->add(pp->impl, s, n, content, thinking, calls, e);
}

int prompt_parser_finish(struct prompt_parser *pp, struct buf *content, struct buf *thinking,
                         json_t *calls, struct err *e)
{
    return pp->ops->finish(pp->impl, content, thinking, calls, e);
}

void prompt_parser_free(struct prompt_parser *pp)
{
    if (!pp)
        return;
    pp->ops->free(pp->impl);
    free(pp);
}

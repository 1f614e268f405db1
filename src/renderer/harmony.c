// harmony: gpt-oss's message format (OpenAI harmony), as Ollama renders it
// through the gpt-oss template and parses it with harmony/harmonyparser.go.
//
//   <|start|>ROLE[<|channel|>CHANNEL][ to=RECIPIENT]<|message|>TEXT<|end|>
//
// Output by channel: analysis → thinking; commentary addressed
// `to=functions.NAME` → a tool call (JSON arguments, decoded at the end of
// the response); final (or commentary without recipient) → content.
// Function names are turned into identifiers for the prompt (`get-weather`
// → `get_weather`) and mapped back in calls.
#include "renderer/internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define H_START   "<|start|>"
#define H_END     "<|end|>"
#define H_MESSAGE "<|message|>"
#define H_CHANNEL "<|channel|>"

// ---------------------------------------------------------------------------
// Renderer

// api.ToolProperty.ToTypeScriptType (Ollama's toTypeScriptType template
// function).
static const char *ts_type(const char *t)
{
    if (strcmp(t, "string") == 0)
        return "string";
    if (strcmp(t, "number") == 0 || strcmp(t, "integer") == 0)
        return "number";
    if (strcmp(t, "boolean") == 0)
        return "boolean";
    if (strcmp(t, "array") == 0)
        return "any[]";
    if (strcmp(t, "object") == 0)
        return "Record<string, any>";
    if (strcmp(t, "null") == 0)
        return "null";
    return "any";
}

static void ts_of(struct buf *b, const json_t *prop, int depth)
{
    json_t *any = json_object_get(prop, "anyOf");
    if (json_is_array(any) && json_array_size(any) > 0 && depth < 16) {
        for (size_t i = 0; i < json_array_size(any); i++) {
            if (i)
                buf_append_str(b, " | ");
            ts_of(b, json_array_get(any, i), depth + 1);
        }
        return;
    }
    json_t *t = json_object_get(prop, "type");
    if (json_is_string(t)) {
        buf_append_str(b, ts_type(json_string_value(t)));
        return;
    }
    if (!json_is_array(t) || json_array_size(t) == 0) {
        buf_append_str(b, "any");
        return;
    }
    for (size_t i = 0; i < json_array_size(t); i++) {
        if (i)
            buf_append_str(b, " | ");
        const char *s = json_string_value(json_array_get(t, i));
        buf_append_str(b, ts_type(s ? s : ""));
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// namespace functions { ... }: one TypeScript type per tool; parameters by
// name in byte order (Go templates range over maps sorted).
static void render_functions(struct buf *b, json_t *tools)
{
    buf_append_str(b, "# Tools\n\n## functions\n\nnamespace functions {\n");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        json_t *fn = json_object_get(tool, "function");
        const char *desc = rnd_str(fn, "description");
        buf_append_str(b, "\n");
        if (*desc)
            buf_printf(b, "// %s\n", desc);
        buf_printf(b, "type %s = (", rnd_str(fn, "name"));
        json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
        size_t np = json_object_size(props);
        if (np > 0) {
            const char **keys = xcalloc(np, sizeof(*keys));
            size_t k = 0;
            const char *key;
            json_t *v;
            json_object_foreach(props, key, v) keys[k++] = key;
            qsort(keys, np, sizeof(*keys), cmp_str);
            buf_append_str(b, "_: {");
            for (k = 0; k < np; k++) {
                json_t *prop = json_object_get(props, keys[k]);
                const char *pd = rnd_str(prop, "description");
                if (*pd)
                    buf_printf(b, "\n  // %s", pd);
                buf_printf(b, "\n  %s: ", keys[k]);
                ts_of(b, prop, 0);
                buf_append_char(b, ',');
            }
            buf_append_str(b, "\n}");
            free(keys);
        }
        buf_append_str(b, ") => any;");
    }
    buf_append_str(b, "\n\n} // namespace functions");
}

// The system message: the model's identity, today's date, the reasoning
// effort and the channels.
static void write_system(struct buf *out, const struct renderer_think *think, bool has_tools)
{
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof(date), "%Y-%m-%d", &tm);

    bool set = think && think->set, on = think && think->on;
    const char *level = think && think->level ? think->level : "";
    buf_append_str(out, H_START "system" H_MESSAGE "You are ChatGPT, a large language model "
                                "trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
    buf_append_str(out, date);
    if (set && on && *level)
        buf_printf(out, "\n\nReasoning: %s", strcmp(level, "max") == 0 ? "high" : level);
    else if (!set || on)
        buf_append_str(out, "\n\nReasoning: medium");
    buf_append_str(out, "\n\n# Valid channels: analysis, commentary, final. Channel must be "
                        "included for every message.");
    if (has_tools)
        buf_append_str(out, "\nCalls to these tools must go to the commentary channel: "
                            "'functions'.");
    buf_append_str(out, H_END);
}

// The developer message, when there are tools or system text: the tools'
// types, then the system messages joined (Ollama's .System).
static void write_developer(struct buf *out, json_t *msgs, json_t *tools, bool has_tools)
{
    struct buf sys;
    buf_init(&sys, 0);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (strcmp(rnd_str(m, "role"), "system") != 0)
            continue;
        if (sys.len)
            buf_append_str(&sys, "\n\n");
        buf_append_str(&sys, rnd_str(m, "content"));
    }
    if (has_tools || sys.len) {
        buf_append_str(out, H_START "developer" H_MESSAGE);
        if (has_tools)
            render_functions(out, tools);
        if (sys.len) {
            buf_append_str(out, "\n\n# Instructions\n\n");
            buf_append(out, sys.data, sys.len);
        }
        buf_append_str(out, H_END);
    }
    buf_deinit(&sys);
}

// Thinking is shown only after the last user message; a last assistant
// message is a prefill (left open).
struct harmony_history {
    long last_user;  // -1 without a user message
    bool prefill_content, prefill_thinking;
};

static struct harmony_history scan_history(json_t *msgs)
{
    struct harmony_history h = {.last_user = -1};
    size_t n = json_array_size(msgs), i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "user") == 0)
            h.last_user = (long)i;
        if (i == n - 1 && strcmp(role, "assistant") == 0) {
            if (*rnd_str(m, "content"))
                h.prefill_content = true;
            else if (*rnd_str(m, "thinking"))
                h.prefill_thinking = true;
        }
    }
    return h;
}

// Assistant message i: its analysis (after the last user message), its
// final answer, then each call on the commentary channel.
static void write_assistant(struct buf *out, const json_t *m, size_t i,
                            const struct harmony_history *h)
{
    const char *th = rnd_str(m, "thinking");
    if (*th && (long)i > h->last_user) {
        buf_printf(out, H_START "assistant" H_CHANNEL "analysis" H_MESSAGE "%s", th);
        if (!h->prefill_thinking)
            buf_append_str(out, H_END);
    }
    const char *content = rnd_str(m, "content");
    if (*content) {
        buf_printf(out, H_START "assistant" H_CHANNEL "final" H_MESSAGE "%s", content);
        if (!h->prefill_content)
            buf_append_str(out, H_END);
    }
    size_t k;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), k, call)
    {
        json_t *fn = rnd_call_fn(call);
        buf_printf(out,
                   H_START "assistant" H_CHANNEL "commentary to=functions.%s "
                           "<|constrain|>json" H_MESSAGE,
                   rnd_str(fn, "name"));
        json_t *args = json_object_get(fn, "arguments");
        if (args)
            rnd_go_json(out, args);
        else
            buf_append_str(out, "{}");
        buf_append_str(out, "<|call|>");
    }
}

int rnd_render_harmony(json_t *msgs, json_t *tools, const struct renderer_think *think, int variant,
                       struct buf *out, struct err *e)
{
    (void)variant;
    (void)e;
    bool has_tools = json_array_size(tools) > 0;
    write_system(out, think, has_tools);
    write_developer(out, msgs, tools, has_tools);

    struct harmony_history h = scan_history(msgs);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = rnd_str(m, "role");
        if (strcmp(role, "tool") == 0)
            buf_printf(out, H_START "functions.%s to=assistant" H_MESSAGE "%s" H_END,
                       rnd_str(m, "tool_name"), rnd_str(m, "content"));
        else if (strcmp(role, "assistant") == 0)
            write_assistant(out, m, i, &h);
        else if (strcmp(role, "user") == 0)
            buf_printf(out, H_START "user" H_MESSAGE "%s" H_END, rnd_str(m, "content"));
    }
    if (!h.prefill_content && !h.prefill_thinking)
        buf_append_str(out, H_START "assistant");
    return 0;
}

// ---------------------------------------------------------------------------
// Function names: user name <-> harmony identifier

struct harmony {
    int msg_state;    // H_NORMAL, H_THINKING, H_TOOL
    char *tool_name;  // recipient of the last tool message (NULL: none)
    struct buf tool;  // tool-call text
    char **user_names, **h_names;
    size_t n_names;
};

enum { HP_LOOKING, HP_HEADER, HP_CONTENT };
enum { H_NORMAL, H_THINKING, H_TOOL };

static bool is_builtin(const char *name)
{
    return strcmp(name, "browser.open") == 0 || strcmp(name, "browser.search") == 0 ||
           strcmp(name, "browser.find") == 0 || strcmp(name, "python") == 0;
}

static bool h_name_taken(const struct harmony *h, const char *name)
{
    for (size_t i = 0; i < h->n_names; i++)
        if (strcmp(h->h_names[i], name) == 0)
            return true;
    return false;
}

// convertToValidChars: ' ', '-', '.' become '_'; letters, digits
// (Unicode L* and Nd, as Go's unicode.IsLetter / IsDigit), '_' and '$' stay;
// the rest is dropped; a leading digit gets '_' in front; nothing left is
// "unnamed".
static char *valid_chars(const char *user)
{
    struct buf b;
    buf_init(&b, 0);
    size_t n = strlen(user);
    for (size_t i = 0; i < n;) {
        size_t w = 0;
        uint32_t r = utf8_decode((const unsigned char *)user + i, n - i, &w);
        if (r == ' ' || r == '-' || r == '.') {
            buf_append_char(&b, '_');
        } else if (r == '_' || r == '$') {
            buf_append_char(&b, (char)r);
        } else if (r != UTF8_INVALID && utf8_is_letter_or_digit(r)) {
            buf_append(&b, user + i, w);
        }
        i += w ? w : 1;
    }
    if (b.len == 0)
        buf_append_str(&b, "unnamed");
    if (b.data[0] >= '0' && b.data[0] <= '9') {
        char *s = xasprintf("_%s", b.data);
        buf_deinit(&b);
        return s;
    }
    return buf_take(&b);
}

static const char *h_convert(struct harmony *h, const char *user)
{
    char *name;
    if (is_builtin(user)) {
        name = xstrdup(user);
    } else {
        char *base = valid_chars(user);
        name = xstrdup(base);
        for (int count = 2; h_name_taken(h, name); count++) {
            free(name);
            name = xasprintf("%s_%d", base, count);
        }
        free(base);
    }
    h->user_names = xrealloc(h->user_names, (h->n_names + 1) * sizeof(char *));
    h->h_names = xrealloc(h->h_names, (h->n_names + 1) * sizeof(char *));
    h->user_names[h->n_names] = xstrdup(user);
    h->h_names[h->n_names] = name;
    h->n_names++;
    return name;
}

static const char *h_original(const struct harmony *h, const char *name)
{
    // The latest mapping wins, as a Go map overwrite would.
    for (size_t i = h->n_names; i > 0; i--)
        if (strcmp(h->h_names[i - 1], name) == 0)
            return h->user_names[i - 1];
    return name;
}

// ---------------------------------------------------------------------------
// Parser

int rnd_harmony_init(struct renderer_parser *p, json_t *last, const struct renderer_think *think,
                     int variant, struct err *e)
{
    (void)think;
    (void)variant;
    (void)e;
    struct harmony *h = xcalloc(1, sizeof(*h));
    buf_init(&h->tool, 0);
    p->impl = h;
    p->state = HP_LOOKING;
    // The prompt ends with "<|start|>assistant" (or an open prefill).
    const char *implicit = H_START "assistant";
    if (last && strcmp(rnd_str(last, "role"), "assistant") == 0) {
        if (*rnd_str(last, "content"))
            implicit = H_START "assistant" H_CHANNEL "final" H_MESSAGE;
        else if (*rnd_str(last, "thinking"))
            implicit = H_START "assistant" H_CHANNEL "analysis" H_MESSAGE;
    }
    buf_append_str(&p->acc, implicit);
    if (json_array_size(p->tools) == 0)
        return 0;
    json_t *renamed = json_deep_copy(p->tools);
    size_t i;
    json_t *tool;
    json_array_foreach(renamed, i, tool)
    {
        json_t *fn = json_object_get(tool, "function");
        const char *name = rnd_str(fn, "name");
        if (*name)
            json_object_set_new(fn, "name", json_string(h_convert(h, name)));
    }
    json_decref(p->prompt_tools);
    p->prompt_tools = renamed;
    return 0;
}

void rnd_harmony_deinit(struct renderer_parser *p)
{
    struct harmony *h = p->impl;
    if (!h)
        return;
    free(h->tool_name);
    buf_deinit(&h->tool);
    for (size_t i = 0; i < h->n_names; i++) {
        free(h->user_names[i]);
        free(h->h_names[i]);
    }
    free(h->user_names);
    free(h->h_names);
    free(h);
    p->impl = NULL;
}

// parseHeader: "ROLE[<|channel|>CHANNEL][ to=RECIPIENT][ <|constrain|>…]".
static void header(struct harmony *h, const char *raw, size_t n)
{
    char *s = xstrndup(raw, n);
    char *cons = strstr(s, "<|constrain|>");
    if (cons) {
        char *t =
            xasprintf("%.*s <|constrain|>%s", (int)(cons - s), s, cons + strlen("<|constrain|>"));
        free(s);
        s = t;
    }
    char channel[64] = "";
    char *ch = strstr(s, H_CHANNEL);
    if (ch) {
        char *after = ch + strlen(H_CHANNEL);
        size_t cl = 0;
        while (after[cl] && !strchr(" \t\n\r\v\f", after[cl]))
            cl++;
        snprintf(channel, sizeof(channel), "%.*s", (int)cl, after);
        memmove(ch, after + cl, strlen(after + cl) + 1);
    }
    // Whitespace-separated fields: role, then maybe to=RECIPIENT.
    char *save = NULL;
    char *role = strtok_r(s, " \t\n\r\v\f", &save);
    char *next = role ? strtok_r(NULL, " \t\n\r\v\f", &save) : NULL;
    const char *recipient = NULL;
    if (role && strncmp(role, "to=", 3) == 0)
        recipient = role + 3;
    else if (next && strncmp(next, "to=", 3) == 0)
        recipient = next + 3;
    if (strcmp(channel, "analysis") == 0 || strcmp(channel, "commentary") == 0) {
        if (recipient && *recipient) {
            h->msg_state = H_TOOL;
            free(h->tool_name);
            h->tool_name = xstrdup(recipient);
        } else {
            h->msg_state = strcmp(channel, "analysis") == 0 ? H_THINKING : H_NORMAL;
        }
    } else if (strcmp(channel, "final") == 0) {
        h->msg_state = H_NORMAL;
    }
    free(s);
}

static void h_content(struct harmony *h, struct rnd_out *o, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (h->msg_state == H_THINKING)
        buf_append(o->thinking, s, n);
    else if (h->msg_state == H_TOOL)
        buf_append(&h->tool, s, n);
    else
        buf_append(o->content, s, n);
}

static int h_finish(struct renderer_parser *p, struct harmony *h, json_t *calls, struct err *e)
{
    if (!h->tool_name)
        return 0;
    const char *name = h->tool_name;
    if (strncmp(name, "functions.", 10) == 0)
        name += 10;
    json_t *args = NULL;
    if (jsonx_parse(h->tool.data ? h->tool.data : "", h->tool.len, &args, NULL) < 0 ||
        !json_is_object(args)) {
        json_decref(args);
        return err_set(e, ERR_INVALID, "error parsing tool call: raw='%.*s'",
                       (int)(h->tool.len > 200 ? 200 : h->tool.len),
                       h->tool.data ? h->tool.data : "");
    }
    rnd_call_append(p, calls, h_original(h, name), args);
    buf_reset(&h->tool);
    return 0;
}

int rnd_harmony_add(struct renderer_parser *p, bool done, struct rnd_out *o, struct err *e)
{
    struct harmony *h = p->impl;
    for (;;) {
        const char *a = p->acc.data ? p->acc.data : "";
        size_t n = p->acc.len;
        if (p->state == HP_LOOKING) {
            const char *s = rnd_find(a, n, H_START);
            if (!s)
                break;
            rnd_buf_consume(&p->acc, (size_t)(s - a) + strlen(H_START));
            p->state = HP_HEADER;
        } else if (p->state == HP_HEADER) {
            const char *m = rnd_find(a, n, H_MESSAGE);
            if (!m)
                break;
            header(h, a, (size_t)(m - a));
            rnd_buf_consume(&p->acc, (size_t)(m - a) + strlen(H_MESSAGE));
            p->state = HP_CONTENT;
        } else {
            const char *end = rnd_find(a, n, H_END);
            if (end) {
                h_content(h, o, a, (size_t)(end - a));
                rnd_buf_consume(&p->acc, (size_t)(end - a) + strlen(H_END));
                p->state = HP_LOOKING;
                h->msg_state = H_NORMAL;
                continue;
            }
            size_t ov = rnd_overlap(a, n, H_END);
            h_content(h, o, a, n - ov);
            rnd_buf_consume(&p->acc, n - ov);
            break;
        }
    }
    // Tool calls come one at a time at the end of a message: decoded when
    // the response is complete.
    return done ? h_finish(p, h, o->calls, e) : 0;
}

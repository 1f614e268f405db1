// The agent chat session (0.33's cmd/agent_tui.go with agent/session.go and
// agent/compactor.go): a conversation with one model that may call the local
// tools of agent_tools.c. Each call that changes something (bash, edit) asks
// first: approve once, always (this command / this tool, for the session),
// or deny; read-only tools run inside the working directory without asking.
// Answers stream through the markdown renderer, thinking is shown dimmed
// (/think hide hides it). Ctrl-C cancels the running turn (and a running
// command) and keeps the session; Ctrl-D or /bye ends it. When the prompt
// nears the context window (80%), older turns are summarized by the model
// and replaced by the summary, keeping the last 3 user turns (none under a
// 16k window), as 0.33's SimpleCompactor does.
#include "cli/agent.h"

#include <histedit.h>
#include <errno.h>
#include <locale.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/launch.h"
#include "client/client.h"

#define MAX_TOOL_ROUNDS 100  // 0.33's defaultMaxToolRounds

struct agent {
    struct client *c;
    char *model;
    json_t *messages;   // the conversation without the system prompt
    json_t *format;     // structured output (--format), or NULL
    const char *think;  // NULL (model default), "true", "false", "low", ...
    bool hide_thinking, tools_on, system_on, can_tools;
    int64_t num_ctx, prompt_tokens;
    json_t *allowed;  // approval scopes granted for the session
    struct agent_tools tools;
    struct agent_md md;
    struct agent_md_styles st;
    struct buf out;  // rendered text waiting for stdout
    EditLine *el;
    History *hist;
    bool ctrl_c;
};

static struct agent *g_agent;  // for libedit's callbacks

static void flush_out(struct agent *a)
{
    if (a->out.len)
        fwrite(a->out.data, 1, a->out.len, stdout);
    buf_reset(&a->out);
    fflush(stdout);
}

// A dim line for the transcript (tool labels, notices).
static void notice(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(struct agent *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_append_str(&a->out, a->st.dim ? a->st.dim : "");
    buf_vprintf(&a->out, fmt, ap);
    buf_append_str(&a->out, a->st.reset ? a->st.reset : "");
    buf_append_char(&a->out, '\n');
    va_end(ap);
    flush_out(a);
}

// ---------------------------------------------------------------------------
// Compaction (pure parts are tested)

static int64_t estimate_tokens(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;  // runes
    return n ? (int64_t)((n + 3) / 4) : 0;
}

static int64_t estimate_messages(const json_t *messages)
{
    int64_t total = 0;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        static const char *const keys[] = {"role", "content", "thinking"};
        for (size_t k = 0; k < 3; k++)
            total += estimate_tokens(json_string_value(json_object_get(m, keys[k])));
    }
    return total;
}

bool agent_should_compact(const json_t *messages, int64_t prompt_tokens, int64_t num_ctx)
{
    int64_t threshold = (int64_t)((double)(num_ctx > 0 ? num_ctx : AGENT_DEFAULT_CONTEXT) *
                                  AGENT_COMPACT_THRESHOLD);
    if (prompt_tokens > 0 && prompt_tokens >= threshold)
        return true;
    return estimate_messages(messages) >= threshold;
}

static bool is_summary_call(const json_t *m)
{
    const json_t *tc = json_array_get(json_object_get(m, "tool_calls"), 0);
    const char *name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
    return name && strcmp(name, "summary") == 0;
}

static const char *summary_text(const json_t *m)
{
    const char *c = json_string_value(json_object_get(m, "content"));
    size_t pl = strlen(AGENT_SUMMARY_PREFIX);
    return c && strncmp(c, AGENT_SUMMARY_PREFIX, pl) == 0 ? c + pl : NULL;
}

bool agent_compact_split(const json_t *messages, int64_t num_ctx, json_t **archive, json_t **keep,
                         const char **prev)
{
    json_t *cand = json_array();
    *prev = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        if (is_summary_call(m))
            continue;
        const char *s = summary_text(m);
        if (s) {
            *prev = s;
            continue;
        }
        json_array_append(cand, m);
    }
    int keep_turns =
        num_ctx > 0 && num_ctx < AGENT_COMPACT_SUMMARY_ONLY_CTX ? 0 : AGENT_COMPACT_KEEP_USER_TURNS;
    size_t users[AGENT_COMPACT_KEEP_USER_TURNS + 1], nu = 0, n = json_array_size(cand);
    for (size_t k = n; k-- > 0 && nu <= AGENT_COMPACT_KEEP_USER_TURNS;) {
        const char *role = json_string_value(json_object_get(json_array_get(cand, k), "role"));
        if (role && strcmp(role, "user") == 0)
            users[nu++] = k;
    }
    int kept = (int)nu <= keep_turns ? (int)nu - 1 : keep_turns;
    if (kept < 0)
        kept = 0;
    size_t start = kept > 0 ? users[kept - 1] : n;
    if (start == 0) {
        json_decref(cand);
        return false;
    }
    *archive = json_array();
    *keep = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append(k < start ? *archive : *keep, json_array_get(cand, k));
    json_decref(cand);
    return true;
}

json_t *agent_compact_join(const char *summary, const json_t *keep, bool continue_task)
{
    json_t *out = json_array();
    json_array_append_new(out, json_pack("{s:s,s:s,s:[{s:s,s:{s:s,s:{}}}]}", "role", "assistant",
                                         "content", "", "tool_calls", "id", "ollama_compaction",
                                         "function", "name", "summary", "arguments"));
    char *content = xasprintf(
        "%s%s%s", AGENT_SUMMARY_PREFIX, summary,
        continue_task ? "\n\ncontinue the task in progress. the history has been compacted, do "
                        "not mention compaction to the user"
                      : "");
    json_array_append_new(out,
                          json_pack("{s:s,s:s,s:s,s:s}", "role", "tool", "tool_name", "summary",
                                    "tool_call_id", "ollama_compaction", "content", content));
    free(content);
    size_t i;
    json_t *m;
    json_array_foreach(keep, i, m)
    {
        json_array_append(out, m);
    }
    return out;
}

// Collects the streamed summary.
static int on_summary(void *ctx, const json_t *obj, struct err *e)
{
    (void)e;
    const char *s = json_string_value(json_object_get(json_object_get(obj, "message"), "content"));
    if (s)
        buf_append_str(ctx, s);
    return 0;
}

// Summarizes the archived turns with the model and replaces them.
static int compact(struct agent *a, bool continue_task)
{
    json_t *archive, *keep;
    const char *prev;
    if (!agent_compact_split(a->messages, a->num_ctx, &archive, &keep, &prev)) {
        notice(a, "Compaction skipped: nothing to compact");
        return 0;
    }
    notice(a, "Compacting the conversation...");
    char *dump = jsonx_dumps(archive, JSONX_INDENT);
    char *body =
        xasprintf("%s%s%sMessages to archive as JSON:\n%s", prev ? "Previous summary:\n" : "",
                  prev ? prev : "", prev ? "\n\n" : "", dump ? dump : "[]");
    json_t *req = json_pack(
        "{s:s,s:[{s:s,s:s},{s:s,s:s}],s:b}", "model", a->model, "messages", "role", "system",
        "content",
        "Summarize the archived part of an Ollama agent conversation. Preserve user goals, "
        "decisions, files, commands, tool results, and unresolved tasks needed to continue. Omit "
        "private reasoning and return only the summary.",
        "role", "user", "content", body, "think", 0);
    struct buf summary;
    buf_init(&summary, 16u << 20);
    struct err e = {0};
    cli_interrupted = 0;
    client_set_cancel(a->c, &cli_interrupted);
    int rc = client_chat(a->c, req, on_summary, &summary, &e);
    client_set_cancel(a->c, NULL);
    if (rc == 0 && summary.len > 0) {
        json_decref(a->messages);
        a->messages = agent_compact_join(buf_cstr(&summary), keep, continue_task);
        a->prompt_tokens = 0;
        notice(a, "Compacted: %zu messages summarized", json_array_size(archive));
    } else {
        notice(a, "Compaction skipped: %s", rc < 0 ? e.msg : "summary was empty");
    }
    buf_deinit(&summary);
    json_decref(req);
    free(body);
    free(dump);
    json_decref(archive);
    json_decref(keep);
    return rc;
}

// ---------------------------------------------------------------------------
// One request and its stream

static char *system_prompt(const struct agent *a)
{
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof(date), "%A, %B %-d, %Y", localtime_r(&now, &tm));
    struct buf b;
    buf_init(&b, 0);
    buf_printf(&b,
               "You are running in Ollama, in a harness to help the user accomplish tasks, and "
               "the model is %s.\n\nCurrent date: %s.\n\n"
               "Be concise, practical, and action-oriented. Use tools when they materially help. "
               "Verify current or fast-changing facts with web tools when available; otherwise "
               "state uncertainty.\n\n"
               "Use bash carefully. Prefer read-only inspection first. Stay within the current "
               "working directory unless explicitly asked. Surface intent before risky actions "
               "such as writes, deletes, moves, installs, git state changes, service changes, "
               "sudo, secrets access, network scripts, or commands outside the working "
               "directory. Request approval when required and do not work around denied "
               "approvals.\n\n"
               "Tell the user about meaningful changes, verification, failures, blockers, "
               "assumptions, and risks. Summarize routine tool output instead of dumping it.\n"
               "Current working directory: \"%s\".",
               a->model, date, a->tools.cwd);
    size_t i;
    json_t *s;
    json_array_foreach(a->tools.skills, i, s)
    {
        buf_printf(&b, "%s- %s: %s",
                   i ? "\n" : "\n\nAvailable skills (load with the skill tool):\n",
                   json_string_value(json_object_get(s, "name")),
                   json_string_value(json_object_get(s, "description")));
    }
    return buf_take(&b);
}

static json_t *build_request(const struct agent *a)
{
    json_t *msgs = json_array();
    if (a->system_on) {
        char *sys = system_prompt(a);
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", sys));
        free(sys);
    }
    json_array_extend(msgs, a->messages);
    json_t *req = json_pack("{s:s,s:o,s:b}", "model", a->model, "messages", msgs, "stream", 1);
    if (a->tools_on && a->can_tools)
        json_object_set_new(req, "tools", agent_tools_defs(&a->tools));
    if (a->format)
        json_object_set(req, "format", a->format);
    if (a->think && (strcmp(a->think, "true") == 0 || strcmp(a->think, "false") == 0))
        jsonx_set_bool(req, "think", strcmp(a->think, "true") == 0);
    else if (a->think)
        jsonx_set_str(req, "think", a->think);
    return req;
}

struct turn {
    struct agent *a;
    struct buf content, thinking;
    json_t *calls;
    bool thinking_open;
};

static void thinking_close(struct turn *t)
{
    if (!t->thinking_open)
        return;
    t->thinking_open = false;
    buf_append_str(&t->a->out, t->a->st.reset ? t->a->st.reset : "");
    buf_append_str(&t->a->out, "\n\n");
}

static int on_chunk(void *ctx, const json_t *obj, struct err *e)
{
    (void)e;
    struct turn *t = ctx;
    struct agent *a = t->a;
    const json_t *msg = json_object_get(obj, "message");
    const char *th = json_string_value(json_object_get(msg, "thinking"));
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (th && *th) {
        buf_append_str(&t->thinking, th);
        if (!a->hide_thinking) {
            if (!t->thinking_open)
                buf_printf(&a->out, "%sThinking...\n", a->st.dim ? a->st.dim : "");
            t->thinking_open = true;
            buf_append_str(&a->out, th);
        }
    }
    if (text && *text) {
        thinking_close(t);
        buf_append_str(&t->content, text);
        agent_md_feed(&a->md, text, strlen(text));
    }
    json_array_extend(t->calls, json_object_get(msg, "tool_calls"));
    if (json_is_true(json_object_get(obj, "done"))) {
        json_int_t pe = json_integer_value(json_object_get(obj, "prompt_eval_count"));
        json_int_t ev = json_integer_value(json_object_get(obj, "eval_count"));
        a->prompt_tokens = pe + ev;
    }
    flush_out(a);
    return 0;
}

// Streams one answer; appends it to the history. ERR_CANCELLED on Ctrl-C.
static int stream_answer(struct agent *a, json_t **calls, struct err *e)
{
    struct turn t = {.a = a, .calls = json_array()};
    buf_init(&t.content, 0);
    buf_init(&t.thinking, 0);
    agent_md_init(&a->md, &a->out, &a->st);
    json_t *req = build_request(a);
    cli_interrupted = 0;
    client_set_cancel(a->c, &cli_interrupted);
    int rc = client_chat(a->c, req, on_chunk, &t, e);
    client_set_cancel(a->c, NULL);
    if (cli_interrupted)
        rc = ERR_CANCELLED;
    thinking_close(&t);
    agent_md_finish(&a->md);
    if (t.content.len && t.content.data[t.content.len - 1] != '\n')
        buf_append_char(&a->out, '\n');
    flush_out(a);
    if (rc == 0) {
        json_t *m = json_pack("{s:s,s:s}", "role", "assistant", "content", buf_cstr(&t.content));
        if (t.thinking.len)
            jsonx_set_str(m, "thinking", buf_cstr(&t.thinking));
        if (json_array_size(t.calls))
            json_object_set(m, "tool_calls", t.calls);
        json_array_append_new(a->messages, m);
    }
    *calls = t.calls;
    json_decref(req);
    buf_deinit(&t.content);
    buf_deinit(&t.thinking);
    return rc;
}

// ---------------------------------------------------------------------------
// Approvals

// One key from the terminal without echo ('3' = deny at end of input).
static int read_key(void)
{
    struct termios old, raw;
    bool tty = tcgetattr(STDIN_FILENO, &old) == 0;
    if (tty) {
        raw = old;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    unsigned char ch = '3';
    if (read(STDIN_FILENO, &ch, 1) != 1)
        ch = '3';
    if (tty)
        tcsetattr(STDIN_FILENO, TCSANOW, &old);
    return ch;
}

enum verdict { ALLOW_ONCE, ALLOW_ALWAYS, DENY };

static enum verdict ask(struct agent *a, const char *name, const json_t *args)
{
    const char *cmd = json_string_value(json_object_get(args, "command"));
    char *label = agent_tool_label(name, args);
    buf_printf(&a->out, "\n%s%s wants to run%s\n  %s\n", a->st.bold ? a->st.bold : "", name,
               a->st.reset ? a->st.reset : "", label);
    buf_printf(&a->out, "1. Approve once\n2. %s%s\n3. Deny\n",
               cmd ? "Always allow this command" : "Always allow ", cmd ? "" : name);
    flush_out(a);
    free(label);
    for (;;) {
        int k = read_key();
        if (k == '1' || k == 'y' || k == '\r' || k == '\n')
            return ALLOW_ONCE;
        if (k == '2' || k == 'a')
            return ALLOW_ALWAYS;
        if (k == 3)  // Ctrl-C: deny, and the turn ends
            cli_interrupted = 1;
        if (k == '3' || k == 'n' || k == 27 || k == 3)
            return DENY;
    }
}

// Whether the call may run: read-only tools always, others after approval.
static bool approved(struct agent *a, const char *name, const json_t *args)
{
    if (agent_tool_read_only(name))
        return true;
    char *scope = agent_tool_scope(name, args);
    bool ok = json_object_get(a->allowed, scope) != NULL;
    if (!ok) {
        enum verdict v = ask(a, name, args);
        ok = v != DENY;
        if (v == ALLOW_ALWAYS)
            json_object_set_new(a->allowed, scope, json_true());
    }
    free(scope);
    return ok;
}

// Runs the calls of one answer; the results become tool messages.
static void run_calls(struct agent *a, const json_t *calls)
{
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call)
    {
        const json_t *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const json_t *args = json_object_get(fn, "arguments");
        name = name ? name : "";
        char *label = agent_tool_label(name, args);
        struct buf res;
        buf_init(&res, 0);
        if (cli_interrupted) {
            buf_append_str(&res, "Tool execution canceled.");
        } else if (approved(a, name, args) && !cli_interrupted) {
            notice(a, "\u25cf %s", label);
            a->tools.cancel = &cli_interrupted;
            agent_tool_run(&a->tools, name, args, &res);
            size_t shown = res.len < 400 ? res.len : 400;
            notice(a, "  %.*s%s", (int)shown, res.data ? res.data : "",
                   shown < res.len ? " ..." : "");
        } else if (!cli_interrupted) {
            buf_append_str(&res, "Tool execution denied.");
            notice(a, "\u25cf %s: denied", label);
        } else {
            buf_append_str(&res, "Tool execution canceled.");
        }
        char *content = agent_truncate_result(
            buf_cstr(&res), agent_tool_result_limit(a->num_ctx, estimate_messages(a->messages)));
        json_t *m =
            json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_name", name, "content", content);
        free(content);
        const char *id = json_string_value(json_object_get(call, "id"));
        if (id)
            jsonx_set_str(m, "tool_call_id", id);
        json_array_append_new(a->messages, m);
        buf_deinit(&res);
        free(label);
    }
}

// A user turn: answers and tool rounds until the model stops calling tools.
static void run_turn(struct agent *a)
{
    size_t before = json_array_size(a->messages) - 1;  // the user message stays
    for (int round = 0; round < MAX_TOOL_ROUNDS; round++) {
        if (agent_should_compact(a->messages, a->prompt_tokens, a->num_ctx))
            compact(a, round > 0);
        json_t *calls = NULL;
        struct err e = {0};
        int rc = stream_answer(a, &calls, &e);
        bool more = rc == 0 && json_array_size(calls) > 0;
        if (more)
            run_calls(a, calls);
        json_decref(calls);
        if (rc == ERR_CANCELLED || (more && cli_interrupted)) {
            notice(a, "Canceled.");
            // The unanswered tail goes; the question stays for context.
            while (json_array_size(a->messages) > before + 1)
                json_array_remove(a->messages, json_array_size(a->messages) - 1);
            return;
        }
        if (rc < 0) {
            notice(a, "Error: %s", e.msg);
            return;
        }
        if (!more)
            return;
    }
    notice(a, "Stopped after %d tool rounds.", MAX_TOOL_ROUNDS);
}

// ---------------------------------------------------------------------------
// Slash commands (0.33's chatSlashCommands)

struct slash {
    const char *name, *alias, *usage, *help;
    bool (*run)(struct agent *a, const char *arg);  // false ends the session
};
static const struct slash slashes[];

static bool cmd_help(struct agent *a, const char *arg)
{
    (void)arg;
    for (const struct slash *s = slashes; s->name; s++)
        buf_printf(&a->out, "  %-28s %s\n", s->usage ? s->usage : s->name, s->help);
    buf_append_str(&a->out, "\n  Use \"\"\" to begin and end a multi-line message, or end a "
                            "line with \\ to continue it.\n  Ctrl-C cancels a response, Ctrl-D "
                            "exits.\n");
    flush_out(a);
    return true;
}

static bool cmd_bye(struct agent *a, const char *arg)
{
    (void)a, (void)arg;
    return false;
}

static bool cmd_new(struct agent *a, const char *arg)
{
    (void)arg;
    json_array_clear(a->messages);
    a->prompt_tokens = 0;
    notice(a, "Started a new chat.");
    return true;
}

static bool cmd_model(struct agent *a, const char *arg)
{
    char *m = arg && *arg ? xstrdup(arg) : cli_model_picker(a->c, "Select model:", a->model);
    if (m) {
        free(a->model);
        a->model = m;
        cli_user_config_remember(NULL, NULL, m);
        json_t *req = json_pack("{s:s}", "model", m), *show = NULL;
        if (client_show(a->c, req, &show, NULL) == 0) {
            a->can_tools = cli_has_capability(show, "tools");
            a->num_ctx = cli_model_context(a->c, m, show);
            a->prompt_tokens = 0;
        }
        json_decref(req);
        json_decref(show);
        notice(a, "Model: %s", m);
    }
    return true;
}

static bool cmd_think(struct agent *a, const char *arg)
{
    static const char *const ok[] = {"on", "off", "low", "medium", "high", "hide", "show"};
    size_t i = 0;
    while (arg && i < 7 && strcmp(arg, ok[i]) != 0)
        i++;
    if (!arg || !*arg || i == 7) {
        notice(a, "Thinking: %s%s. Usage: /think on|off|low|medium|high|hide|show",
               a->think ? a->think : "model default", a->hide_thinking ? " (hidden)" : "");
        return true;
    }
    if (i >= 5)
        a->hide_thinking = i == 5;
    else
        a->think = i == 0 ? "true" : i == 1 ? "false" : ok[i];
    notice(a, "Thinking %s.", i >= 5 ? (a->hide_thinking ? "hidden" : "shown") : ok[i]);
    return true;
}

static bool cmd_tools(struct agent *a, const char *arg)
{
    (void)arg;
    a->tools_on = !a->tools_on;
    notice(a, "Tools %s%s.", a->tools_on ? "on" : "off",
           a->tools_on && !a->can_tools ? " (this model does not support tools)" : "");
    return true;
}

static bool cmd_system(struct agent *a, const char *arg)
{
    if (arg && (strcmp(arg, "on") == 0 || strcmp(arg, "off") == 0)) {
        a->system_on = strcmp(arg, "on") == 0;
        notice(a, "Built-in system prompt %s.", arg);
        return true;
    }
    char *sys = system_prompt(a);
    buf_printf(&a->out, "%s\n(%s)\n", sys, a->system_on ? "on" : "off");
    free(sys);
    flush_out(a);
    return true;
}

static bool cmd_skills(struct agent *a, const char *arg)
{
    if (arg && strncmp(arg, "import", 6) == 0) {
        const char *src = arg + 6 + strspn(arg + 6, " \t");
        struct err e = {0};
        if (agent_skills_import(src, &a->out, &e) < 0)
            buf_printf(&a->out, "Error: %s\n", e.msg);
        flush_out(a);
    }
    agent_skills_load(&a->tools);
    if (json_array_size(a->tools.skills) == 0)
        notice(a, "No skills. Put <name>/SKILL.md under ~/.ollama/skills, ~/.agents/skills, "
                  ".agents/skills or .ollama/skills.");
    size_t i;
    json_t *s;
    json_array_foreach(a->tools.skills, i, s)
    {
        buf_printf(&a->out, "  %-20s %s\n", json_string_value(json_object_get(s, "name")),
                   json_string_value(json_object_get(s, "description")));
    }
    flush_out(a);
    return true;
}

static bool cmd_compact(struct agent *a, const char *arg)
{
    (void)arg;
    compact(a, false);
    return true;
}

static bool cmd_prompt(struct agent *a, const char *arg)
{
    (void)arg;
    json_t *req = build_request(a);
    char *text = jsonx_dumps(req, JSONX_INDENT | JSONX_NO_HTML_ESCAPE);
    buf_printf(&a->out, "%s\n", text ? text : "");
    flush_out(a);
    free(text);
    json_decref(req);
    return true;
}

static bool cmd_save(struct agent *a, const char *arg)
{
    if (!arg || !*arg) {
        notice(a, "Usage: /save <filename>");
        return true;
    }
    json_t *req = build_request(a);
    char *text = jsonx_dumps(req, JSONX_INDENT | JSONX_NO_HTML_ESCAPE);
    char *path = xasprintf("%s.json", arg);
    struct err e = {0};
    if (text && fs_write_atomic(path, text, strlen(text), &e) == 0)
        notice(a, "Saved %s", path);
    else
        notice(a, "Error: %s", e.msg);
    free(path);
    free(text);
    json_decref(req);
    return true;
}

static const struct slash slashes[] = {
    {"/model", NULL, "/model [name]", "switch models", cmd_model},
    {"/new", NULL, NULL, "start a new chat", cmd_new},
    {"/think", NULL, "/think [on|off|...|hide|show]", "set thinking mode", cmd_think},
    {"/tools", NULL, NULL, "toggle tools on or off", cmd_tools},
    {"/system", NULL, "/system [on|off]", "show or set the built-in system prompt", cmd_system},
    {"/skills", NULL, "/skills [import codex|claude|pi]", "list or import skills", cmd_skills},
    {"/compact", NULL, NULL, "summarize older context", cmd_compact},
    {"/help", "/?", NULL, "show commands", cmd_help},
    {"/bye", "/exit", NULL, "exit", cmd_bye},
    {"/prompt", NULL, NULL, "show full prompt, tools, and messages", cmd_prompt},
    {"/save", NULL, "/save <filename>", "save request JSON; saved as <filename>.json", cmd_save},
    {NULL, NULL, NULL, NULL, NULL},
};

// Runs a slash command line; false ends the session.
static bool slash(struct agent *a, char *line)
{
    char *arg = line + strcspn(line, " \t");
    if (*arg)
        *arg++ = '\0';
    arg += strspn(arg, " \t");
    for (const struct slash *s = slashes; s->name; s++)
        if (strcmp(line, s->name) == 0 || (s->alias && strcmp(line, s->alias) == 0))
            return s->run(a, arg);
    notice(a, "Unknown command '%s'. Type /? for help", line);
    return true;
}

// ---------------------------------------------------------------------------
// Input (libedit): history, """ blocks, \ continuations, Ctrl-C clears

static char *prompt_fn(EditLine *el)
{
    (void)el;
    return g_agent->md.code ? "... " : ">>> ";
}

static unsigned char on_ctrl_c(EditLine *el, int ch)
{
    (void)el, (void)ch;
    g_agent->ctrl_c = true;
    return CC_NEWLINE;
}

// Reads one character for libedit (UTF-8 from stdin). A Ctrl-C that
// arrives as a signal while typing ends the line as the key binding does.
static int read_char(EditLine *el, wchar_t *wc)
{
    (void)el;
    int rc = cli_tty_read_char(wc, true);
    if (rc == 2) {
        cli_interrupted = 0;
        g_agent->ctrl_c = true;
        *wc = L'\n';
        return 1;
    }
    return rc;
}

static void input_init(struct agent *a)
{
    setlocale(LC_CTYPE, "");  // libedit reads and draws UTF-8 by the locale
    HistEvent ev;
    a->hist = history_init();
    history(a->hist, &ev, H_SETSIZE, 1000);
    a->el = el_init("ollama-agent", stdin, stdout, stderr);
    el_set(a->el, EL_EDITOR, "emacs");
    el_set(a->el, EL_PROMPT, prompt_fn);
    el_wset(a->el, EL_GETCFN, read_char);
    el_set(a->el, EL_HIST, history, a->hist);
    el_set(a->el, EL_SETTY, "-d", "-isig", NULL);
    el_wset(a->el, EL_ADDFN, L"agent-interrupt", L"Ctrl-C", on_ctrl_c);
    el_set(a->el, EL_BIND, "^C", "agent-interrupt", NULL);
}

static size_t len_of(const char *s)
{
    return strcspn(s, "\r\n");
}

// Ctrl-C at the prompt, as a key (libedit gives the line back, or NULL
// when it was empty) or as a signal that ended libedit's call before it
// read a key (the answer before had just ended). What was typed is dropped;
// at an empty prompt 0.33 arms quitting ("press ctrl+c again to quit") and a
// second Ctrl-C in a row ends the chat. True when it should end.
static bool prompt_ctrl_c(struct agent *a, bool key, bool typed, bool *armed)
{
    cli_interrupted = 0;
    fputs("\n", stdout);
    if (!key || typed) {
        *armed = false;
        return false;
    }
    if (*armed)
        return true;
    *armed = true;
    notice(a, "press ctrl+c again to quit");
    return false;
}

// One message from the user (lines joined); NULL at end of input.
static char *read_message(struct agent *a)
{
    struct buf msg;
    buf_init(&msg, 0);
    bool block = false, armed = false;
    a->md.code = false;  // the prompt_fn's continuation marker
    for (;;) {
        int n = 0;
        a->ctrl_c = false;
        errno = 0;
        const char *s = el_gets(a->el, &n);
        bool empty = !s || n <= 0;
        if (a->ctrl_c || (empty && (cli_interrupted || errno == EINTR))) {
            bool typed = (!empty && len_of(s) > 0) || msg.len > 0;
            buf_reset(&msg);
            block = a->md.code = false;
            if (!prompt_ctrl_c(a, a->ctrl_c, typed, &armed))
                continue;
        }
        if (empty || a->ctrl_c) {
            buf_deinit(&msg);
            return NULL;
        }
        armed = false;
        // """ opens a block at the start of a line and closes it at the end
        // of one (both on one line: a one-line block).
        size_t len = strcspn(s, "\r\n");
        bool opens = !block && len >= 3 && strncmp(s, "\"\"\"", 3) == 0;
        size_t from = opens ? 3 : 0;
        bool closes = (block || opens) && len >= from + 3 && strncmp(s + len - 3, "\"\"\"", 3) == 0;
        bool cont = !block && !opens && len > 0 && s[len - 1] == '\\';
        buf_append(&msg, s + from, len - from - (closes ? 3 : cont ? 1 : 0));
        block = (block || opens) && !closes;
        a->md.code = block || cont;
        if (!a->md.code)
            break;
        buf_append_char(&msg, '\n');
    }
    a->md.code = false;
    HistEvent ev;
    if (msg.len)
        history(a->hist, &ev, H_ENTER, buf_cstr(&msg));
    return buf_take(&msg);
}

// ---------------------------------------------------------------------------
// The session

// The model's capabilities and window; pulls a missing model (0.33's
// showOrPullModel). Returns 0 or prints the error and returns 1.
static int prepare_model(struct agent *a)
{
    json_t *req = json_pack("{s:s}", "model", a->model), *show = NULL;
    struct err e = {0};
    int rc = client_show(a->c, req, &show, &e);
    if (rc < 0 && e.code == ERR_NOT_FOUND) {
        err_clear(&e);
        rc = cli_pull_model(a->c, a->model, false, &e);
        if (rc == 0)
            rc = client_show(a->c, req, &show, &e);
    }
    json_decref(req);
    if (rc < 0) {
        json_decref(show);
        return cli_fail_err(&e);
    }
    a->can_tools = cli_has_capability(show, "tools");
    a->num_ctx = cli_model_context(a->c, a->model, show);
    json_decref(show);
    return 0;
}

static void session(struct agent *a)
{
    const char *dim = a->st.dim ? a->st.dim : "", *reset = a->st.reset ? a->st.reset : "";
    printf("%sOllama agent \u2022 %s \u2022 %s%s\n%sType /? for help, Ctrl-D to exit.%s\n\n",
           a->st.bold ? a->st.bold : "", a->model, a->tools.cwd, reset, dim, reset);
    if (!a->can_tools)
        notice(a, "%s does not support tools: chatting without them.", a->model);
    for (;;) {
        char *line = read_message(a);
        if (!line)
            break;
        bool go_on = true;
        if (line[0] == '/') {
            go_on = slash(a, line);
        } else if (line[strspn(line, " \t\n")]) {
            json_array_append_new(a->messages,
                                  json_pack("{s:s,s:s}", "role", "user", "content", line));
            run_turn(a);
            // The window the model is loaded with decides compaction.
            int64_t n = cli_model_context(a->c, a->model, NULL);
            if (n > 0)
                a->num_ctx = n;
        }
        free(line);
        if (!go_on)
            break;
    }
}

static int parse_format(struct agent *a, const char *f)
{
    if (!f)
        return 0;
    if (strcmp(f, "json") == 0) {
        a->format = json_string("json");
        return 0;
    }
    struct err e = {0};
    if (jsonx_parse(f, strlen(f), &a->format, &e) < 0 || !json_is_object(a->format))
        return cli_fail("invalid format: expected \"json\" or a JSON schema");
    return 0;
}

int cli_cmd_agent(struct cli_args *args)
{
    struct agent a = {0};
    g_agent = &a;
    a.model = xstrdup(args->pos[0]);
    a.messages = json_array();
    a.allowed = json_object();
    a.tools_on = a.system_on = true;
    a.think = cli_flag(args, "think");
    a.hide_thinking = cli_flag(args, "hidethinking") != NULL;
    buf_init(&a.out, 0);
    if (isatty(STDOUT_FILENO))
        agent_md_styles_terminal(&a.st);
    int rc = parse_format(&a, cli_flag(args, "format"));
    struct err e = {0};
    if (rc == 0 && agent_tools_init(&a.tools, ".", &e) < 0)
        rc = cli_fail_err(&e);
    if (rc == 0 && !(a.c = cli_connect()))
        rc = 1;
    if (rc == 0)
        rc = prepare_model(&a);
    if (rc == 0) {
        cli_user_config_remember(NULL, NULL, a.model);
        cli_sigint_install();
        input_init(&a);
        session(&a);
        el_end(a.el);
        history_end(a.hist);
    }
    client_free(a.c);
    agent_tools_deinit(&a.tools);
    json_decref(a.messages);
    json_decref(a.allowed);
    json_decref(a.format);
    buf_deinit(&a.out);
    free(a.model);
    g_agent = NULL;
    return rc;
}

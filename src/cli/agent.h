// The local agent chat of the launcher ("Chat, Code, & Work", Ollama 0.33's
// cmd/agent_tui.go, cmd/tui/chat and agent/): agent.c runs the session
// (input, streaming, approvals, compaction, slash commands), agent_tools.c
// the tools, agent_md.c the streaming markdown. Pure parts are declared here
// for the unit tests.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/internal.h"

// ---------------------------------------------------------------------------
// Streaming markdown (agent_md.c)

struct agent_md_styles {
    const char *bold, *code, *dim, *reset;  // NULL or "" = none
};

struct agent_md {
    struct buf *out;
    struct agent_md_styles styles;
    bool line_start, fence, skip_line, styled, heading, bold, code, star;
    char prefix[16];  // the first characters of a line, until it is known what they are
    size_t prefix_len;
};

void agent_md_init(struct agent_md *md, struct buf *out, const struct agent_md_styles *styles);
// Appends the rendering of text[0..n) to md->out.
void agent_md_feed(struct agent_md *md, const char *text, size_t n);
// Ends the message: open styles are closed, the line state reset.
void agent_md_finish(struct agent_md *md);
void agent_md_inline(struct agent_md *md, char c);
// Bold, cyan, dim and reset of the terminal (terminfo); all "" without one.
void agent_md_styles_terminal(struct agent_md_styles *s);

// ---------------------------------------------------------------------------
// Tools (agent_tools.c)

#define AGENT_BASH_TIMEOUT_S  180     // 0.33's bashTimeout (3m)
#define AGENT_BASH_MAX_OUTPUT 60000   // 0.33's maxBashOutputBytes
#define AGENT_READ_MAX_BYTES  200000  // 0.33's maxReadBytes

struct agent_tools {
    char *cwd;       // the directory the tools work in (realpath)
    bool shell;      // bash offered (not OLLAMA_AGENT_DISABLE_SHELL)
    json_t *skills;  // [{name, description, path}] found where 0.33 looks
    int bash_timeout_ms;
    const volatile sig_atomic_t *cancel;  // set: a running command is killed
};

int agent_tools_init(struct agent_tools *t, const char *cwd, struct err *e);
void agent_tools_deinit(struct agent_tools *t);
// The tool definitions for /api/chat ("tools").
json_t *agent_tools_defs(const struct agent_tools *t);
// Runs one call. The result (or the error, as "Error: ...") is appended to
// out; returns 0, or a negative ERR_* when the call failed (out holds why).
int agent_tool_run(struct agent_tools *t, const char *name, const json_t *args, struct buf *out);
// Whether the tool changes nothing (read, list, search, skill).
bool agent_tool_read_only(const char *name);
// The approval scope of a call: "bash:<command>" or the tool's name.
char *agent_tool_scope(const char *name, const json_t *args);
// One line for the transcript: "bash(ls -la)", "read(src/main.c)".
char *agent_tool_label(const char *name, const json_t *args);
// Loads the skills of home and cwd into t->skills (0.33's defaultSkillRoots).
void agent_skills_load(struct agent_tools *t);

// ---------------------------------------------------------------------------
// Compaction (agent.c, 0.33's agent/compactor.go)

#define AGENT_COMPACT_THRESHOLD        0.8
#define AGENT_COMPACT_KEEP_USER_TURNS  3
#define AGENT_COMPACT_SUMMARY_ONLY_CTX 16000
#define AGENT_DEFAULT_CONTEXT          32768
#define AGENT_SUMMARY_PREFIX           "Conversation summary:\n"

// Whether messages (with their last prompt_eval_count) need compacting for
// a context of num_ctx tokens.
bool agent_should_compact(const json_t *messages, int64_t prompt_tokens, int64_t num_ctx);
// Splits messages into the archive to summarize and the turns kept
// (*archive, *keep new arrays); *prev the earlier summary (or NULL). false
// when there is nothing to archive.
bool agent_compact_split(const json_t *messages, int64_t num_ctx, json_t **archive, json_t **keep,
                         const char **prev);
// The messages after compaction: summary pair, then keep.
json_t *agent_compact_join(const char *summary, const json_t *keep, bool continue_task);

// The hidden `ollama agent MODEL` command the launcher runs.
int cli_cmd_agent(struct cli_args *a);

// Ollama's own skills directory: $OLLAMA_SKILLS, $XDG_CONFIG_HOME/ollama/skills
// or ~/.ollama/skills (agent_skills.c).
char *agent_skills_dir(void);
// `/skills import codex|claude|pi`: copies ~/.codex/skills, ~/.claude/skills
// or ~/.pi/agent/skills into it (what exists is kept); a line per skill goes
// to out. Returns how many were imported.
int agent_skills_import(const char *source, struct buf *out, struct err *e);

// Tool results sized for the context (0.33's toolMessageWithBudget): at
// most 60000 runes (6000 under an 8k window, 3200 under 4k) and what fits
// below the compaction threshold after base_tokens.
int64_t agent_tool_result_limit(int64_t num_ctx, int64_t base_tokens);
// Keeps the first 75% and last 25% of max_runes runes of text with 0.33's
// marker between (all of it omitted, with a marker, when max_runes <= 0).
char *agent_truncate_result(const char *text, int64_t max_runes);

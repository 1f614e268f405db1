#!/usr/bin/env bash
# The interactive `ollama` (issue 45) driven in tmux against a live
# `ollama serve` with TinyStories: the launcher menu behind bare `ollama`
# (items, "More...", the model picker, the last choice remembered) and the
# agent chat's approval round trip. The model's tool call is fixed by a
# grammar: `ollama agent toolbox --format SCHEMA` constrains every answer to
# one JSON call of bash with a given command, and the "toolbox" template
# (one that renders .Tools) makes that JSON a tool call. The call is approved
# once (the command runs and writes proof.txt), then denied, then the turn is
# canceled with Ctrl-C and the session goes on. A "thinker" model (a template
# with <think> tags) shows its thinking, hidden after /think hide. First,
# `ollama launch` without a terminal: --yes, --restore, a deprecated model,
# and fake dsh / hermes programs that show how launch starts them. Used by
# ctest (label "tui"):
#   tests/tui/run.sh <ollama binary> <stories260K.gguf> [capture.txt]
# The third argument, when given, receives the menu as tmux shows it.
# Exit 77 (ctest: skipped) when tmux is missing.
set -euo pipefail
[ -n "${TUI_TRACE:-}" ] && { PS4='+ ${SECONDS}s '; set -x; }
ollama_bin="$(realpath "${1:?usage: run.sh OLLAMA_BIN MODEL_GGUF}")"
gguf="$(realpath "${2:?usage: run.sh OLLAMA_BIN MODEL_GGUF}")"
capture="${3:-}"
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux is needed"; exit 77; }

tmp="$(mktemp -d /tmp/ollama-tui-XXXXXX)"
server=""
T() { tmux -S "$tmp/tmux.sock" "$@"; }
cleanup() {
    T kill-server 2>/dev/null || true
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
# A free loopback port (python3 starts too slowly on a loaded machine).
for _ in $(seq 20); do
    port=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
export OLLAMA_HOST="127.0.0.1:$port" OLLAMA_MODELS="$tmp/models" HOME="$tmp/home"
mkdir -p "$HOME" "$tmp/work"
"$ollama_bin" serve >"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
    curl -sf "http://$OLLAMA_HOST/" >/dev/null 2>&1 && break
    sleep 0.1
done
cat >"$tmp/Modelfile" <<MODELFILE
FROM $gguf
TEMPLATE """{{ if .Tools }}Tools: {{ range .Tools }}{{ .Function.Name }} {{ end }}{{ end }}{{ range .Messages }}{{ if eq .Role "tool" }}Result: {{ .Content }}{{ else }}{{ .Content }}{{ end }}{{ end }}"""
PARAMETER temperature 0
PARAMETER num_predict 200
MODELFILE
"$ollama_bin" create toolbox -f "$tmp/Modelfile" >/dev/null
# "thinker": <think> tags in the template, so everything it writes is thinking.
cat >"$tmp/Modelfile.think" <<MODELFILE
FROM $gguf
TEMPLATE """{{ range .Messages }}{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}{{ end }}{{ if .Think }}<think>{{ end }}"""
PARAMETER temperature 0
PARAMETER num_predict 20
MODELFILE
"$ollama_bin" create thinker -f "$tmp/Modelfile.think" >/dev/null

fail() {
    echo "FAIL: $*"
    echo "--- screen:"
    T capture-pane -p -t t || true
    tail -n 30 "$tmp/serve.log"
    exit 1
}
screen() { T capture-pane -p -t t; }
# Waits (up to 10 s) until the screen shows the text (fixed string).
wait_for() {
    for _ in $(seq 200); do
        screen | grep -qF -- "$1" && return 0
        sleep 0.05
    done
    fail "no '$1' on the screen"
}
# Waits until the text is on the screen n times.
wait_count() {
    for _ in $(seq 200); do
        [ "$(screen | grep -cF -- "$2")" -ge "$1" ] && return 0
        sleep 0.05
    done
    fail "'$2' not $1 times on the screen"
}
keys() { T send-keys -t t "$@"; }
# Waits until the shell prompt is the last line on the screen.
wait_shell() {
    for _ in $(seq 200); do
        [ "$(screen | grep -v '^[[:space:]]*$' | tail -n 1)" = "\$" ] && return 0
        sleep 0.05
    done
    fail "no shell prompt"
}

# Waits until the agent's prompt is the last line on the screen.
wait_prompt() {
    for _ in $(seq 200); do
        [ "$(screen | grep -v '^[[:space:]]*$' | tail -n 1 | sed 's/[[:space:]]*$//')" = ">>>" ] && return 0
        sleep 0.05
    done
    fail "no agent prompt"
}

echo "-- launch --yes / --restore without a terminal"
out="$("$ollama_bin" launch droid --yes --config --model toolbox </dev/null 2>&1)" || fail "launch --yes: $out"
grep -qF '"model": "toolbox"' "$HOME/.factory/settings.json" || fail "droid settings.json"
"$ollama_bin" launch droid --restore </dev/null >/dev/null 2>&1 || fail "launch --restore"
[ ! -e "$HOME/.factory/settings.json" ] || fail "--restore left a file that was not there"
if out="$("$ollama_bin" launch droid --config --model nosuch </dev/null 2>&1)" ||
    ! grep -qF "or use --yes to auto-pull" <<<"$out"; then
    fail "missing model: $out"
fi
out="$("$ollama_bin" launch droid stray </dev/null 2>&1)" && fail "extra argument accepted"
grep -qF "Use '--' to pass extra arguments" <<<"$out" || fail "extra argument: $out"
# A model 0.33 calls deprecated for agents asks first: off a terminal, --yes.
if out="$("$ollama_bin" launch droid --config --model llama3.2 </dev/null 2>&1)" ||
    ! grep -qF "Launch with llama3.2 anyway? requires confirmation; re-run with --yes" <<<"$out"; then
    fail "deprecated model: $out"
fi
# Fake dsh and hermes (never the real tools): the command line and
# environment launch starts them with, dsh's --patch kept for launch, and an
# old Hermes updated before `hermes desktop`.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "dsh $* key=$OLLAMA_LAUNCH_DSH_API_KEY"\n' >"$tmp/bin/dsh"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "Hermes Agent v0.15.2"; exit 0; }\necho "hermes $*" >>"%s/hermes.log"\n' "$tmp" >"$tmp/bin/hermes"
chmod +x "$tmp/bin/dsh" "$tmp/bin/hermes"
out="$(PATH="$tmp/bin:$PATH" "$ollama_bin" launch dsh --yes --model toolbox -- --port 1 </dev/null 2>&1)" ||
    fail "launch dsh: $out"
grep -qF "dsh web --patch $HOME/.ollama/launch/dsh/ollama.cordis.yml --port 1 key=ollama" <<<"$out" ||
    fail "launch dsh: $out"
grep -qF "model: toolbox" "$HOME/.ollama/launch/dsh/settings.yaml" || fail "dsh settings.yaml"
out="$(PATH="$tmp/bin:$PATH" "$ollama_bin" launch dsh --yes --model toolbox -- --patch=x </dev/null 2>&1)" &&
    fail "dsh --patch accepted"
grep -qF 'conflicting extra argument "--patch=x"' <<<"$out" || fail "dsh --patch: $out"
# No dsh and a global npm install that fails: npx runs the package.
mkdir -p "$tmp/npxbin"
printf '#!/bin/sh\nexit 1\n' >"$tmp/npxbin/npm"
printf '#!/bin/sh\necho "npx $*"\n' >"$tmp/npxbin/npx"
chmod +x "$tmp/npxbin/npm" "$tmp/npxbin/npx"
out="$(PATH="$tmp/npxbin:/usr/bin:/bin" "$ollama_bin" launch dsh --yes --model toolbox </dev/null 2>&1)" ||
    fail "launch dsh through npx: $out"
grep -qF "npx --yes @deepseek-ai/dsh@latest web --patch" <<<"$out" || fail "dsh through npx: $out"
out="$(PATH="$tmp/bin:$PATH" "$ollama_bin" launch hermes-desktop --yes --model toolbox </dev/null 2>&1)" ||
    fail "launch hermes-desktop: $out"
[ "$(cat "$tmp/hermes.log")" = "$(printf 'hermes update\nhermes desktop')" ] ||
    fail "hermes-desktop: $(cat "$tmp/hermes.log") / $out"
echo "ok: launch (${SECONDS}s)"

T new-session -d -s t -x 100 -y 50 "cd $tmp/work && PS1='$ ' exec bash --norc --noprofile"
T set-option -t t status off >/dev/null

echo "-- launcher"
keys "$ollama_bin" Enter
wait_for "Chat, Code, & Work"
for want in "Ollama " "Launch Claude Code" "Launch OpenCode" "More..." "esc quit"; do
    screen | grep -qF -- "$want" || fail "menu lacks '$want'"
done
[ -n "$capture" ] && screen | sed -e 's/[[:space:]]*$//' | cat -s >"$capture"
keys j j j j j
wait_for "Launch Codex"
keys k k k k k Enter
wait_for "Select model:"
wait_for "toolbox:latest"
screen | grep -qF "(download)" || fail "picker lacks the models to download"
keys t o o l Enter
wait_for "Ollama agent"
# A multi-line message; Ctrl-C ends the answer, the question stays in the
# conversation (/save writes the request), history recalls the last line.
keys '"""first line' Enter 'second line"""' Enter
# Ctrl-C once the answer streams (a line after the message), then the
# prompt must be back before /save is typed.
for _ in $(seq 200); do
    screen | sed -n '/second line"""/,$p' | grep -v '^[[:space:]]*$' | sed -n 2p | grep -q . && break
    sleep 0.05
done
keys C-c
wait_prompt
keys "/save conv" Enter
wait_for "Saved conv.json"
grep -qF '"content": "first line\nsecond line"' "$tmp/work/conv.json" ||
    fail "multi-line message: $(cat "$tmp/work/conv.json")"
keys Up
wait_count 2 "/save conv"
# /compact: the model summarizes the conversation, which the summary replaces.
keys C-u "/compact" Enter
# (2 messages when the answer had ended before the Ctrl-C landed: then that
# Ctrl-C met an empty prompt and only armed quitting.)
wait_for " messages summarized"
# Ctrl-C on an empty prompt arms quitting (0.33); a second one quits.
wait_prompt
keys C-c
wait_for "press ctrl+c again to quit"
keys C-c
wait_for "Chat, Code, & Work"
# The menu comes back with the chat selected and its model remembered.
screen | grep -qF "Chat, Code, & Work (toolbox:latest)" || fail "last choice not remembered"
grep -q '"last_selection": "run"' "$HOME/.ollama/config.json" || fail "config.json: $(cat "$HOME/.ollama/config.json")"
# An integration that is not installed: 0.33's offer to install it,
# declined (the installer never runs here), the command to run by hand,
# then the menu.
keys j Enter
wait_for "Select model for Claude Code:"
keys t o o l Enter
wait_for "Claude Code is not installed. Install now? [Y/n]"
keys n Enter
wait_for "claude installation cancelled"
wait_for "curl -fsSL https://claude.ai/install.sh | bash"
keys Enter
wait_for "Launch Claude Code (toolbox:latest)"
# → asks for a model even when one is remembered; esc goes back to the
# menu, on the last choice made (not the one abandoned).
keys k l
wait_for "Select model:"
keys Escape
wait_for "▸ Launch Claude Code (toolbox:latest)"
keys q
keys "echo launcher-\$((1+1))" Enter
wait_for "launcher-2"
echo "ok: launcher (${SECONDS}s)"

echo "-- agent approvals"
schema='{"type":"object","properties":{"name":{"const":"bash"},"arguments":{"type":"object","properties":{"command":{"const":"echo tui-ok > proof.txt"}},"required":["command"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}'
keys "clear; $ollama_bin agent toolbox --format '$schema'" Enter
wait_for "Ollama agent"
keys "write the proof file" Enter
wait_for "bash wants to run"
wait_for "1. Approve once"
keys 1
wait_for "(no output)"
[ "$(cat "$tmp/work/proof.txt" 2>/dev/null)" = "tui-ok" ] || fail "proof.txt not written"
rm -f "$tmp/work/proof.txt"
wait_count 2 "bash wants to run"
keys 3
wait_for "denied"
[ ! -e "$tmp/work/proof.txt" ] || fail "a denied command ran"
wait_count 3 "bash wants to run"
keys C-c
wait_for "Canceled."
keys "/help" Enter
wait_for "summarize older context"
keys "/bye" Enter
keys "echo agent-\$((1+1))" Enter
wait_for "agent-2"
echo "ok: agent approvals (${SECONDS}s)"

echo "-- agent thinking"
keys "clear; $ollama_bin agent thinker --think" Enter
wait_for "Ollama agent"
keys "hi" Enter
wait_for "Thinking..."
keys "/think hide" Enter
wait_for "Thinking hidden."
keys "again" Enter
# (Keys typed while an answer streams are dropped when the agent exits.)
wait_count 4 ">>>"
keys "/bye" Enter
wait_shell
keys "echo think-\$((1+1))" Enter
wait_for "think-2"
[ "$(screen | grep -cF "Thinking...")" -eq 1 ] || fail "hidden thinking was shown"
echo "ok: agent thinking (${SECONDS}s)"

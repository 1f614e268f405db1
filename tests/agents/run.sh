#!/usr/bin/env bash
# End to end with the real coding agents (issue 18): Claude Code, Codex and
# OpenCode from npm (pinned in package.json and package-lock.json), each started by
# `ollama launch` against a live `ollama serve` on a loopback port with a
# temporary store, HOME and working directory, given one non-interactive
# prompt. Each must exit 0 and print the model's text; the server's access
# log must show the API it spoke (/v1/messages, /v1/responses,
# /v1/chat/completions). Used by ctest (label "agents"):
#   tests/agents/run.sh <ollama binary> <stories260K.gguf>
# Exit 77 (ctest: skipped) when node or npm is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ollama_bin="$(realpath "${1:?usage: run.sh OLLAMA_BIN MODEL_GGUF}")"
gguf="$(realpath "${2:?usage: run.sh OLLAMA_BIN MODEL_GGUF}")"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: node and npm are needed for the agent tests (scripts/deps.sh test installs them)"
    exit 77
fi
cd "$here"
stamp="node_modules/.lock-sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # Not `npm ci`: npm leaves the other platforms' optional binaries of
    # opencode-ai out of the lock file and then refuses to `ci` from it.
    npm install --no-save --no-audit --no-fund --loglevel=error
    echo "$want" > "$stamp"
fi
bin="$here/node_modules/.bin"

tmp="$(mktemp -d /tmp/ollama-agents-XXXXXX)"
server=""
cleanup() {
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export OLLAMA_HOST="127.0.0.1:$port" OLLAMA_MODELS="$tmp/models" HOME="$tmp/home"
mkdir -p "$HOME" "$tmp/work"
"$ollama_bin" serve >"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
    curl -sf "http://$OLLAMA_HOST/" >/dev/null 2>&1 && break
    sleep 0.2
done

# TinyStories under a template that renders tools (agents always send some)
# and the user's and tools' turns only, so the prompt ends with the user's
# "Once upon a time" whatever system text and reminders the agent version
# adds; greedy sampling and a fixed seed (agents that send neither get the
# Modelfile's; OpenCode sends its own temperature)
# then always continues the story, and the stop at the first full stop ends
# the answer as a finished turn (Claude Code reports a max_tokens stop as an
# error). With the default temperature an agent sometimes drew an end of
# text or a full stop first and printed nothing.
cat >"$tmp/Modelfile" <<MODELFILE
FROM $gguf
TEMPLATE """{{ if .Tools }}Tools: {{ range .Tools }}{{ .Function.Name }} {{ end }}{{ end }}{{ range .Messages }}{{ if eq .Role "tool" }}Result: {{ .Content }}{{ else if eq .Role "user" }}{{ .Content }}{{ end }}{{ end }}"""
PARAMETER stop "."
PARAMETER temperature 0
PARAMETER seed 42
MODELFILE
"$ollama_bin" create agent -f "$tmp/Modelfile" >/dev/null

fail=0
# agent name, API path, launch arguments after "--"
check() {
    local name=$1 path=$2
    shift 2
    local out="$tmp/$name.out" rc=0
    echo "-- ollama launch $name"
    (cd "$tmp/work" && PATH="$bin:$PATH" timeout 300 "$ollama_bin" launch "$name" \
        --model agent:latest -- "$@" </dev/null >"$out" 2>&1) || rc=$?
    # The model's text: the last non-empty line the agent printed.
    local text
    text="$(grep -v '^[[:space:]]*$' "$out" | tail -n 1 | sed 's/\x1b\[[0-9;]*m//g' || true)"
    if [ "$rc" -ne 0 ] || ! [[ "$text" =~ [a-z]+ ]] ||
        ! grep -q "| 200 | .*| POST    \"$path\"" "$tmp/serve.log"; then
        echo "FAIL: $name exited $rc; output:"
        tail -n 40 "$out"
        fail=1
    else
        echo "ok: $name printed: $text"
    fi
}
export CLAUDE_CODE_MAX_OUTPUT_TOKENS=400 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1
check claude /v1/messages -p "Once upon a time"
check codex /v1/responses exec --skip-git-repo-check "Once upon a time"
check opencode /v1/chat/completions run "Once upon a time"
if [ "$fail" -ne 0 ]; then
    tail -n 60 "$tmp/serve.log"
    exit 1
fi

#!/usr/bin/env bash
# End to end with the real coding agents (issues 18 and 45): Claude Code,
# Codex, OpenCode, Cline, Qwen Code, Pi and Droid from npm (pinned in
# package.json and package-lock.json), each started by `ollama launch` (which
# writes its config files into the temporary HOME) against a live `ollama
# serve` on a loopback port with a temporary store, HOME and working
# directory, given one non-interactive prompt. Each must exit 0 and print the
# model's text; the server's access log must show, during that agent's run,
# the API it spoke (/v1/messages, /v1/responses, /v1/chat/completions,
# /api/chat). Telemetry and update checks are off where the tool has a switch.
# Left out: Kimi Code CLI (`ollama launch kimi`) is a Python tool installed
# with uv, not on npm (the npm package "kimi" is an unrelated library).
# Versions: Qwen Code 0.15.10 is its last release for Node 20 (0.21 on need
# Node 22), and Pi is @mariozechner/pi-coding-agent, its name before
# @earendil-works/pi-coding-agent (launch's installer), which needs Node
# 22.19. Droid is the `droid` package, whose linux-x64 binary is on npm
# (the newest @factory/cli names one that is not published).
# Used by ctest (label "agents"):
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
    local out="$tmp/$name.out" rc=0 seen
    seen="$(wc -l <"$tmp/serve.log")"
    echo "-- ollama launch $name"
    (cd "$tmp/work" && PATH="$bin:$PATH" timeout 300 "$ollama_bin" launch "$name" \
        --model agent:latest -- "$@" </dev/null >"$out" 2>&1) || rc=$?
    # The model's text: the last non-empty line the agent printed.
    local text
    text="$(grep -v '^[[:space:]]*$' "$out" | tail -n 1 | sed 's/\x1b\[[0-9;]*m//g' || true)"
    if [ "$rc" -ne 0 ] || ! [[ "$text" =~ [a-z]+ ]] ||
        ! tail -n +"$((seen + 1))" "$tmp/serve.log" | grep -q "| 200 | .*| POST    \"$path\""; then
        echo "FAIL: $name exited $rc (want 0, its text, and a 200 for POST $path); output:"
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
# Cline's own settings (not launch's files) turn off its telemetry and update
# check; the local backend keeps it from leaving a background hub daemon.
mkdir -p "$HOME/.cline/data/settings"
echo '{"telemetryOptOut":true,"autoUpdateEnabled":false}' \
    >"$HOME/.cline/data/settings/global-settings.json"
CLINE_SESSION_BACKEND_MODE=local CLINE_NO_AUTO_UPDATE=1 check cline /api/chat "Once upon a time"
# Qwen Code has no variable for its usage statistics and update check: the
# user's settings.json says so, and launch must keep those keys.
mkdir -p "$HOME/.qwen"
echo '{"privacy":{"usageStatisticsEnabled":false},"general":{"enableAutoUpdate":false}}' \
    >"$HOME/.qwen/settings.json"
check qwen /v1/chat/completions -p "Once upon a time"
grep -q '"usageStatisticsEnabled": false' "$HOME/.qwen/settings.json" || {
    echo "FAIL: launch dropped the user's keys from ~/.qwen/settings.json"
    fail=1
}
PI_OFFLINE=1 PI_TELEMETRY=0 check pi /v1/chat/completions -p "Once upon a time"
FACTORY_DROID_AUTO_UPDATE_ENABLED=false FACTORY_DISABLE_DYNAMIC_CONFIG=1 \
    check droid /v1/chat/completions exec "Once upon a time"
if [ "$fail" -ne 0 ]; then
    tail -n 60 "$tmp/serve.log"
    exit 1
fi

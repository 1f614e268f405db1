#!/usr/bin/env bash
# Runs the node client suites (ollama-js and openai-node, pinned in
# package-lock.json) against a live `ollama serve` on a loopback port with a
# temporary model store. Used by ctest (tests/integration/openai/CMakeLists.txt):
#   tests/clients/run.sh <ollama binary> <gguf-gen binary>
# Exit 77 (ctest: skipped) when node or npm is missing; install them with
# `scripts/deps.sh test`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ollama_bin="${1:?usage: run.sh OLLAMA_BIN GGUF_GEN_BIN}"
gguf_gen_bin="${2:?usage: run.sh OLLAMA_BIN GGUF_GEN_BIN}"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: node and npm are needed for the client suites (scripts/deps.sh test installs them)"
    exit 77
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 18 ]; then
    echo "SKIP: node $(node --version) is too old for the client suites (need 18 or later)"
    exit 77
fi
cd "$here"
# Install exactly what the lock file says, once per lock file version.
stamp="node_modules/.lock-sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want" > "$stamp"
fi
exec node run.mjs "$ollama_bin" "$gguf_gen_bin"

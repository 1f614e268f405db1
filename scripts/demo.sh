#!/usr/bin/env bash
# The main job: install dependencies, build, start `ollama serve` on a private
# port with a private model store, create the demo model `stories` from the
# bundled stories260K.gguf, and run it. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh build
bin=build/bin/ollama
port=${OLLAMA_DEMO_PORT:-11434}
export OLLAMA_HOST=127.0.0.1:$port
export OLLAMA_MODELS=${OLLAMA_MODELS:-$HOME/.ollama/models}
log=$(mktemp -t ollama-serve.XXXXXX.log)
"$bin" serve >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    curl -sf "http://$OLLAMA_HOST/" >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
echo "== ollama serve is listening on $OLLAMA_HOST (log: $log)"
echo "\$ curl http://$OLLAMA_HOST/"
curl -s "http://$OLLAMA_HOST/"; echo
echo "\$ curl http://$OLLAMA_HOST/api/version"
curl -s "http://$OLLAMA_HOST/api/version"; echo
echo "\$ ollama --version"
"$bin" --version
if "$bin" help 2>/dev/null | grep -q "^  run" && [ -f tests/fixtures/stories260K.gguf ] \
   && "$bin" create --help >/dev/null 2>&1 && ! "$bin" list 2>&1 | grep -q "not implemented"; then
    dir=$(mktemp -d)
    printf 'FROM %s\nPARAMETER temperature 0\n' "$PWD/tests/fixtures/stories260K.gguf" > "$dir/Modelfile"
    echo "\$ ollama create stories -f Modelfile"
    "$bin" create stories -f "$dir/Modelfile"
    echo "\$ ollama run stories \"Once upon a time\""
    "$bin" run stories "Once upon a time"
    rm -rf "$dir"
fi

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
# The demo model: stories260K (a real TinyStories model, MIT licensed; see
# tests/fixtures/stories260K.LICENSE.md), created from a Modelfile and run.
dir=$(mktemp -d)
cat > "$dir/Modelfile" <<EOF
FROM $PWD/tests/fixtures/stories260K.gguf
PARAMETER temperature 0
PARAMETER num_predict 128
EOF
echo "\$ cat Modelfile"
cat "$dir/Modelfile"
echo "\$ ollama create stories -f Modelfile"
"$bin" create stories -f "$dir/Modelfile"
echo "\$ ollama list"
"$bin" list
echo "\$ ollama run stories \"Once upon a time\""
"$bin" run stories "Once upon a time" </dev/null
echo "\$ ollama ps"
"$bin" ps
rm -rf "$dir"

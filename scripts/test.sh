#!/usr/bin/env bash
# The test job, as CI runs it: install dependencies, build with warnings as
# errors, run the whole suite (unit, integration, client tests), run each
# fuzz target for a bounded time, then rebuild under AddressSanitizer +
# UndefinedBehaviorSanitizer and run the suite again. Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
export OLLAMA_SHARED_DIR=${OLLAMA_SHARED_DIR:-$(cd .. && pwd)/shared}
export CTEST_OUTPUT_ON_FAILURE=1

echo "== build (warnings are errors)"
# Line tables only (-g1, -gline-tables-only): sanitizer and crash traces keep
# file:line, and the SIMD kernels compile in 60 % of the time full -g takes.
scripts/build.sh build -DOLLAMA_WERROR=ON -DOLLAMA_OPT_FLAGS="-O2 -g1"
echo "   (${SECONDS}s so far)"
echo "== tests"
ctest --test-dir build -j2 --timeout 600
echo "   (${SECONDS}s so far)"

echo "== fuzz (bounded)"
# Only the fuzz targets, at -O1: instrumented -O2 builds of the SIMD kernels are slow.
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DOLLAMA_OPT_FLAGS="-O1 -gline-tables-only" \
    -DOLLAMA_FUZZ=ON -DOLLAMA_TESTS=OFF -DOLLAMA_WERROR=ON >/dev/null
fuzz_targets=$(cmake --build build-fuzz --target help | sed -n 's/^\.\.\. \(fuzz_[a-z_]*\).*/\1/p')
cmake --build build-fuzz -j2 --target $fuzz_targets
# One fuzz target for its time budget; prints its summary, or the crash and
# "fuzz_NAME found a crash" and fails.
fuzz_one() {
    local f=$1 name=${1##*/fuzz_} secs work corpus
    # The GGUF reader (hostile model files) gets 30 s; the others 5 s (the whole
    # suite must stay under 15 minutes on the 2-core CI machine).
    secs=${OLLAMA_FUZZ_SECONDS:-5}
    [ "$name" = gguf ] && secs=${OLLAMA_FUZZ_GGUF_SECONDS:-30}
    corpus=tests/fuzz/corpus/$name
    work=$(mktemp -d)
    [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
    if ! "$f" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
        -artifact_prefix="$work/" "$work" >"$work.log" 2>&1; then
        tail -n 60 "$work.log"
        echo "fuzz_$name found a crash (inputs in $work)"
        return 1
    fi
    echo "-- fuzz_$name (${secs}s): $(grep -E "^(Done|#[0-9]+ +DONE)" "$work.log" | tail -n 1)"
    rm -rf "$work" "$work.log"
}
export -f fuzz_one
# libFuzzer runs one thread: two targets at a time fill the two cores.
ls build-fuzz/bin/fuzz_* | xargs -P 2 -I{} bash -c 'fuzz_one "$1" || exit 255' _ {}
echo "   (${SECONDS}s so far)"

echo "== sanitizer build (ASan + UBSan)"
# (no benchmarks: they are not run here)
scripts/build.sh build-asan -DOLLAMA_SANITIZE=ON -DOLLAMA_WERROR=ON -DOLLAMA_OPT_FLAGS="-O1 -g1" \
    -DOLLAMA_BENCH=OFF
echo "   (${SECONDS}s so far)"
echo "== tests under sanitizers"
# The real coding agents (label agents) run once, in the plain build above:
# they test third-party programs against the server, whose request paths
# integration_compat covers under the sanitizers. So does the deployment test
# (label deploy: a registry, three servers and HAProxy); its server paths
# (drain, 503) have their own test in integration_server_http. The format
# check (label format) reads the same sources as in the plain build. The
# tmux-driven launcher test (label tui) drives the terminal; the agent's
# tools, configs and compaction have unit tests in test_cli, run here. The
# families through the API (integration_families) run the same model code as
# test_model, run here, behind the same server paths as integration_generate.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan -j2 --timeout 900 -LE 'agents|deploy|format|tui' -E '^integration_families$'

#!/usr/bin/env bash
# ThreadSanitizer run: builds ollama and the server, runner and registry
# integration tests with -DOLLAMA_SANITIZE=thread into build-tsan/ and runs
# them (the servers and runners they start are instrumented too). A data race
# fails the test that met it (halt_on_error; reports go to the test's output
# and to the server's log).
#   scripts/tsan.sh [extra ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
export OLLAMA_SHARED_DIR=${OLLAMA_SHARED_DIR:-$(cd .. && pwd)/shared}
export CTEST_OUTPUT_ON_FAILURE=1
tests="integration_server_http integration_server_hostile integration_runner integration_registry"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DOLLAMA_SANITIZE=thread \
    -DOLLAMA_WERROR=ON -DOLLAMA_OPT_FLAGS="-O1 -g" >/dev/null
targets="ollama gguf-gen"
for t in $tests; do targets="$targets test_$t"; done
cmake --build build-tsan -j2 --target $targets
# exitcode 66 marks a race; second_deadlock_stack helps read lock-order reports.
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
ctest --test-dir build-tsan -R "^($(echo $tests | tr ' ' '|'))\$" --timeout 900 "$@"

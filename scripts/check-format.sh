#!/usr/bin/env bash
# Checks that every C source and header follows .clang-format (ctest "format").
#   scripts/check-format.sh [clang-format binary]
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${1:-clang-format}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.c' '*.h')
else
    mapfile -t files < <(find src tests tools bench -name '*.[ch]' -not -path '*/node_modules/*')
fi
# One clang-format per file, as many at once as there are cores.
bad=$(printf '%s\0' "${files[@]}" | xargs -0 -r -n 8 -P "$(nproc)" sh -c '
    cf=$0
    for f in "$@"; do
        [ -f "$f" ] || continue
        "$cf" --dry-run -Werror "$f" >/dev/null 2>&1 || echo "not formatted: $f (run: $cf -i $f)"
    done' "$cf" | tee /dev/stderr | wc -l)
echo "${#files[@]} files checked, $bad not formatted"
[ "$bad" -eq 0 ]

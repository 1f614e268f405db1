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
bad=0
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run: $cf -i $f)"
        bad=$((bad + 1))
    fi
done
echo "${#files[@]} files checked, $bad not formatted"
[ "$bad" -eq 0 ]

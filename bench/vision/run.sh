#!/usr/bin/env bash
# Vision tower encode time, ollama-c vs llama.cpp v0.5.0's llama-mtmd-cli
# (issue 44): one 896 x 896 picture through a real-size Gemma 3 SigLIP tower
# and a Qwen2.5-VL 3B tower (random weights, F16 matrices as shipped),
# both programs run in turn (A B A B ...) by farm-bench, which also reports
# each process's peak memory.
#   bench/vision/run.sh [BUILD_DIR] [RUNS] [THREADS]
# Environment: WORK (default /tmp/bench-vision: the generated files, ~2 GB),
# MTMD (default /tmp/llama-v050/bin/llama-mtmd-cli), OLLAMA_SHARED_DIR (the
# text models mtmd pairs the towers with: tiny-gemma3-f32.gguf and
# tiny-qwen25vl-f32.gguf, width 64), TOWERS (default "siglip qwen25vl"),
# LAYERS (default: the real 27 / 32 blocks; fewer for a quick look).
# Each run is one process and one encode (no warm-up encode on either side:
# mtmd-cli with --no-warmup); ours prints its encode time, mtmd its "mtmd
# batch encoding done in" line.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${2:-3}
threads=${3:-2}
work=${WORK:-/tmp/bench-vision}
mtmd=${MTMD:-/tmp/llama-v050/bin/llama-mtmd-cli}
shared=${OLLAMA_SHARED_DIR:-../shared}
[ -d "$shared/fixtures" ] || shared=/work/shared
fix=$(cd "$shared/fixtures" && pwd)
towers=${TOWERS:-siglip qwen25vl}
mkdir -p "$work"

# The picture: an 896 x 896 RGB gradient as a PNG (stdlib only).
python3 - "$work/img896.png" <<'EOF'
import struct, sys, zlib
w = h = 896
raw = b"".join(b"\0" + bytes(((x + y + c * 80) & 255) for x in range(w) for c in range(3))
               for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
EOF

for t in $towers; do
    case $t in
    siglip) preset=gemma3-siglip-mmproj text=tiny-gemma3-f32.gguf tmpl=gemma ;;
    qwen25vl) preset=qwen25vl-mmproj text=tiny-qwen25vl-f32.gguf tmpl=chatml ;;
    *) echo "unknown tower $t" >&2; exit 2 ;;
    esac
    [ -f "$fix/$text" ] || { echo "missing $fix/$text" >&2; exit 2; }
    proj="$work/$t${LAYERS:+-$LAYERS}.gguf"
    [ -f "$proj" ] || "$build/bin/gguf-gen" --preset "$preset" --n-embd 64 \
        ${LAYERS:+--n-layer $LAYERS} --quiet -o "$proj"
    ours="$work/$t-ours.log" theirs="$work/$t-mtmd.log"
    : >"$ours"
    : >"$theirs"
    echo "== $t ($(basename "$proj")), $threads threads, $runs runs each"
    farm-bench -n "$runs" --warmup 0 --timeout 3600 \
        --vs "sh -c 'exec $mtmd -m $fix/$text --mmproj $proj --image $work/img896.png \
              -p describe -n 1 -t $threads --no-warmup --chat-template $tmpl >>$theirs 2>&1'" \
        -- sh -c "exec $build/bin/bench_vision $proj $threads 1 0 >>$ours 2>&1"
    echo "ollama-c encode (s):  $(grep -o 'min [0-9.]*' "$ours" | awk '{printf "%s ", $2}')"
    echo "llama.cpp encode (s): $(grep -o 'batch encoding done in [0-9]* ms' "$theirs" |
        awk '{printf "%.3f ", $5 / 1000}')"
    grep -q 'batch encoding done in' "$theirs" || tail -5 "$theirs"
done

#!/bin/sh
# Pull throughput from a loopback docker-registry (issue 10): a random blob
# of SIZE bytes (default 1 GB) is pushed to a fresh docker-registry as the
# model layer of a manifest; then, in the same run, curl fetches the blob to
# /dev/null (the loopback ceiling) and `ollama serve` pulls the model
# (parallel ranged parts, SHA-256 overlapped with the download, fsync and
# rename). Each is run RUNS times (default 3); MB/s = bytes / wall time;
# the summary gives medians. Beside them: the same work done by standard
# tools (curl | tee file | openssl sha256, then sync) and one core's SHA-256
# speed, which bounds any client that verifies the digest, and curl ->
# /dev/null while another process keeps one core busy hashing: on a 2-core
# machine that is the loopback left to a client that hashes as it receives.
#
# The pull writes and fsyncs the blob: on a slow disk that, not the network,
# is the limit, so curl is also timed writing to a file in the same
# directory followed by sync. Set BENCH_DIR=/dev/shm to take the disk out.
#
# usage: [BENCH_DIR=dir] bench_registry.sh [path/to/ollama] [SIZE] [RUNS]
set -eu
OLLAMA=${1:-build/bin/ollama}
SIZE=${2:-1000000000}
RUNS=${3:-3}
REGBIN=/usr/bin/docker-registry
[ -x "$REGBIN" ] || { echo "no $REGBIN"; exit 1; }
OLLAMA=$(cd "$(dirname "$OLLAMA")" && pwd)/$(basename "$OLLAMA")
T=$(mktemp -d "${BENCH_DIR:-/tmp}/ollama-bench-reg-XXXXXX")
REG_PID= SRV_PID=
cleanup() {
    [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null || true
    [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT INT TERM
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
now() { date +%s.%N; }
REGPORT=$(free_port)
cat > "$T/config.yml" <<CFG
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $T/regdata
http:
  addr: 127.0.0.1:$REGPORT
CFG
"$REGBIN" serve "$T/config.yml" > "$T/registry.log" 2>&1 &
REG_PID=$!
R=http://127.0.0.1:$REGPORT
for i in $(seq 100); do curl -sf "$R/v2/" > /dev/null && break; sleep 0.1; done

echo "generating $SIZE random bytes..."
head -c "$SIZE" /dev/urandom > "$T/blob"
HEX=$(sha256sum "$T/blob" | cut -d' ' -f1)
printf '{"model_format":"gguf","model_family":"llama","architecture":"amd64","os":"linux"}\n' > "$T/config"
CHEX=$(sha256sum "$T/config" | cut -d' ' -f1)
CSIZE=$(stat -c %s "$T/config")
upload() {  # file hex
    LOC=$(curl -sf -X POST -D - -o /dev/null "$R/v2/bench/big/blobs/uploads/" | tr -d '\r' | sed -n 's/^Location: //Ip')
    case "$LOC" in http*) ;; *) LOC="$R$LOC" ;; esac
    curl -sf -X PUT -H 'Content-Type: application/octet-stream' -T "$1" "$LOC&digest=sha256:$2" -o /dev/null
}
upload "$T/blob" "$HEX"
upload "$T/config" "$CHEX"
printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%s}]}' \
    "$CHEX" "$CSIZE" "$HEX" "$SIZE" > "$T/manifest"
curl -sf -X PUT -H 'Content-Type: application/vnd.docker.distribution.manifest.v2+json' \
    --data-binary @"$T/manifest" "$R/v2/bench/big/manifests/latest" -o /dev/null
rm -f "$T/blob"

SRVPORT=$(free_port)
OLLAMA_HOST=127.0.0.1:$SRVPORT OLLAMA_MODELS=$T/models HOME=$T "$OLLAMA" serve > "$T/serve.log" 2>&1 &
SRV_PID=$!
S=http://127.0.0.1:$SRVPORT
for i in $(seq 100); do curl -sf "$S/" > /dev/null && break; sleep 0.1; done

mbs() { python3 -c "print('%.0f' % ($1 / 1e6 / ($3 - $2)))"; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# One core's SHA-256 (OpenSSL, SHA-NI where the CPU has it): no verifying
# client can pull one blob faster than this, whatever the network does.
SHA=$(openssl speed -evp sha256 -bytes 8388608 -seconds 2 2>/dev/null | awk '/^sha256/ {sub(/k$/, "", $2); printf "%.0f", $2 / 1000}')
echo "blob: $SIZE bytes, sha256:$HEX"
echo "one core's SHA-256 (openssl speed): $SHA MB/s"
ALL_CURL= ALL_FILE= ALL_TOOLS= ALL_PULL= ALL_BUSY=
for run in $(seq "$RUNS"); do
    t0=$(now)
    curl -sf -o /dev/null "$R/v2/bench/big/blobs/sha256:$HEX"
    t1=$(now)
    CURL=$(mbs "$SIZE" "$t0" "$t1")
    t0=$(now)
    curl -sf -o "$T/curl.out" "$R/v2/bench/big/blobs/sha256:$HEX" && sync "$T/curl.out"
    t1=$(now)
    CURLF=$(mbs "$SIZE" "$t0" "$t1")
    rm -f "$T/curl.out"
    # The loopback ceiling left to a client whose other core hashes: curl ->
    # /dev/null while openssl keeps one core busy with SHA-256.
    openssl speed -evp sha256 -seconds 30 > /dev/null 2>&1 &
    BUSY=$!
    sleep 0.3
    t0=$(now)
    curl -sf -o /dev/null "$R/v2/bench/big/blobs/sha256:$HEX"
    t1=$(now)
    kill "$BUSY" 2>/dev/null || true
    wait "$BUSY" 2>/dev/null || true
    CURLB=$(mbs "$SIZE" "$t0" "$t1")
    # The same work as a pull, with standard tools: receive, write, hash, sync.
    t0=$(now)
    TOOLHEX=$(curl -sf "$R/v2/bench/big/blobs/sha256:$HEX" | tee "$T/curl.out" | openssl dgst -sha256 -r | cut -d' ' -f1)
    sync "$T/curl.out"
    t1=$(now)
    [ "$TOOLHEX" = "$HEX" ] || { echo "curl | tee | openssl: wrong digest"; exit 1; }
    TOOLS=$(mbs "$SIZE" "$t0" "$t1")
    rm -f "$T/curl.out"
    t0=$(now)
    OUT=$(curl -sf "$S/api/pull" -d "{\"model\":\"127.0.0.1:$REGPORT/bench/big:latest\",\"insecure\":true,\"stream\":false}")
    t1=$(now)
    case "$OUT" in *success*) ;; *) echo "pull failed: $OUT"; exit 1 ;; esac
    PULL=$(mbs "$SIZE" "$t0" "$t1")
    [ -n "${BENCH_VERBOSE:-}" ] && echo "server cpu ticks (utime stime): $(cut -d' ' -f14,15 /proc/$SRV_PID/stat) registry: $(cut -d' ' -f14,15 /proc/$REG_PID/stat)"
    GOT=$(sha256sum "$T/models/blobs/sha256-$HEX" | cut -d' ' -f1)
    [ "$GOT" = "$HEX" ] || { echo "blob differs"; exit 1; }
    echo "run $run: curl -> /dev/null $CURL MB/s | same, one core hashing $CURLB | curl -> file+sync $CURLF | curl | tee file | openssl sha256, sync $TOOLS | ollama pull (verified, fsynced) $PULL"
    ALL_CURL="$ALL_CURL $CURL" ALL_FILE="$ALL_FILE $CURLF" ALL_TOOLS="$ALL_TOOLS $TOOLS" ALL_PULL="$ALL_PULL $PULL"
    ALL_BUSY="$ALL_BUSY $CURLB"
    curl -sf -X DELETE "$S/api/delete" -d "{\"model\":\"127.0.0.1:$REGPORT/bench/big:latest\"}" -o /dev/null
done
MC=$(echo "$ALL_CURL" | median) MF=$(echo "$ALL_FILE" | median)
MT=$(echo "$ALL_TOOLS" | median) MP=$(echo "$ALL_PULL" | median)
MB=$(echo "$ALL_BUSY" | median)
echo "median of $RUNS: curl -> /dev/null $MC MB/s | same, one core hashing $MB | curl -> file+sync $MF | curl | tee | openssl, sync $MT | ollama pull $MP"
python3 -c "
c, b, t, p, s = $MC, $MB, $MT, $MP, ${SHA:-0}
print('pull / curl -> /dev/null   %.2f' % (p / c))
print('pull / curl -> /dev/null with one core hashing  %.2f' % (p / b))
print('pull / same work by tools  %.2f' % (p / t))
if s:
    print('pull / one core SHA-256    %.2f   (a verifying pull cannot pass 1.00; /dev/null ceiling / SHA-256 = %.2f)' % (p / s, c / s))
"

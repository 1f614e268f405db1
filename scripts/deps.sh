#!/usr/bin/env bash
# Installs the Debian 12 packages ollama-c needs (idempotent: only what is
# missing is installed). Uses sudo when not root.
#   scripts/deps.sh build   - build dependencies
#   scripts/deps.sh test    - build + test dependencies (clang, docker-registry, haproxy, tmux, node/npm)
set -euo pipefail
want=(cmake make gcc pkg-config libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libssl-dev
      libpcre2-dev libutf8proc-dev libedit-dev libncurses-dev libyaml-dev libcmocka-dev curl ca-certificates
      libpng-dev libjpeg62-turbo-dev libwebp-dev)
if [ "${1:-build}" = test ]; then
    want+=(clang clang-format docker-registry haproxy tmux)
    # node and npm: a preinstalled Node.js (e.g. nodesource, which bundles npm) is fine
    command -v node >/dev/null 2>&1 || want+=(nodejs)
    command -v npm >/dev/null 2>&1 || want+=(npm)
fi
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# llama-cpp.sh [DEST]: builds the llama.cpp release wormchat compares itself against (tag b6673,
# commit 50d26e8a), from the git bundle that the npm package node-llama-cpp@3.14.0 ships.
# Needs only Debian apt and the npm registry. Idempotent: each step is skipped when already done.
# Prints the bin dir (llama-bench, llama-cli, llama-perplexity, llama-tokenize, llama-quantize) as
# its last line; the tree's gguf-py/ writes GGUF files (tools/python/to_gguf.py). A copy of the anchor script
# the project compares itself with (issue 16); nothing in the build, tests or runs needs it.
#   DEST          default ./llama.cpp-b6673
#   NLC_TGZ=FILE  use this node-llama-cpp-3.14.0.tgz instead of `npm pack`
#   JOBS=N        parallel build jobs (default: nproc)
set -euo pipefail

NLC_VERSION=3.14.0
TAG=b6673
COMMIT=50d26e8acc98507d3fd6e5e8e83dc5fbd8e9b342
TARGETS=(llama-bench llama-cli llama-perplexity llama-tokenize llama-quantize)

DEST=${1:-./llama.cpp-$TAG}
mkdir -p "$(dirname "$DEST")"
DEST=$(cd "$(dirname "$DEST")" && pwd)/$(basename "$DEST")
BIN=$DEST/build/bin
log() { echo "llama-cpp.sh: $*" >&2; }

built() {
  local t
  for t in "${TARGETS[@]}"; do [ -x "$BIN/$t" ] || return 1; done
}
if built && [ "$(git -C "$DEST" rev-parse HEAD 2>/dev/null)" = "$COMMIT" ]; then
  log "already built: $DEST ($TAG)"
  echo "$BIN"
  exit 0
fi

# 1. tools from Debian
missing=()
for c in npm git cmake g++ make; do command -v "$c" >/dev/null || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=()
  for c in "${missing[@]}"; do case $c in g++) pkgs+=(g++) ;; *) pkgs+=("$c") ;; esac; done
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  log "installing ${pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >&2
fi

# 2. source: node-llama-cpp's bundle of llama.cpp, cloned into DEST
if [ "$(git -C "$DEST" rev-parse HEAD 2>/dev/null)" != "$COMMIT" ]; then
  if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST" 2>/dev/null)" ]; then
    echo "llama-cpp.sh: $DEST exists and is not llama.cpp $TAG ($COMMIT); choose another DEST" >&2
    exit 1
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if [ -n "${NLC_TGZ:-}" ]; then
    cp "$NLC_TGZ" "$tmp/"
  else
    log "npm pack node-llama-cpp@$NLC_VERSION"
    (cd "$tmp" && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null)
  fi
  tar -xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  grep -q "\"$TAG\"" "$tmp/package/llama/llama.cpp.info.json" ||
    { echo "llama-cpp.sh: the npm package does not hold llama.cpp $TAG" >&2; exit 1; }
  log "git clone the bundle into $DEST"
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$DEST" 2>&1 | grep -v 'remote HEAD refers' >&2 || true
  git -C "$DEST" checkout -q "$COMMIT"
  [ "$(git -C "$DEST" rev-parse HEAD)" = "$COMMIT" ] ||
    { echo "llama-cpp.sh: $DEST is not at $COMMIT" >&2; exit 1; }
fi

# 3. Release build, native SIMD, no curl
if [ ! -f "$DEST/build/CMakeCache.txt" ]; then
  log "configuring"
  cmake -S "$DEST" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF >&2
fi
log "building ${TARGETS[*]} (about 10 minutes on 2 cores)"
cmake --build "$DEST/build" --config Release -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}" >&2
built || { echo "llama-cpp.sh: build finished without ${TARGETS[*]} in $BIN" >&2; exit 1; }
echo "$BIN"

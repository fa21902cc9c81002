#!/usr/bin/env bash
# README command (1): install, build, and start the chat on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
exec ./build/wormchat chat "$@"

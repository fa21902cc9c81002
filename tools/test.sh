#!/usr/bin/env bash
# README command (2): install, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
# The serving loop's concurrency under ThreadSanitizer: its own build-tsan, ~2.5 min from scratch.
bash tools/tsan.sh

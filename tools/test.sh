#!/usr/bin/env bash
# README command (2): install, build, and run the whole test suite - in Release, then again under
# ASan+UBSan (tools/asan.sh), then the serving loop under TSan (tools/tsan.sh). Prints each
# part's time at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash tools/build.sh
t1=$(date +%s)
ctest --test-dir build --output-on-failure -j"$(nproc)"
t2=$(date +%s)
# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer: its own build-asan.
bash tools/asan.sh
t3=$(date +%s)
# The serving loop's concurrency under ThreadSanitizer: its own build-tsan, ~2.5 min from scratch.
bash tools/tsan.sh
t4=$(date +%s)
echo "test.sh: build $((t1 - t0)) s, ctest $((t2 - t1)) s, asan+ubsan $((t3 - t2)) s," \
  "tsan $((t4 - t3)) s; $((t4 - t0)) s in all"

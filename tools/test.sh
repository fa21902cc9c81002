#!/usr/bin/env bash
# README command (2), and CI's (.ci/run): install, build, and run every test -
#   1. the whole suite in Release (./build), `wormchat serve` under the official `openai` npm
#      client included (npm ci installs it into tests/app/openai_client/node_modules),
#   2. the Python reference and the committed fixtures, numpy only (tools/python/check_reference.py),
#   3. the layers' tests again under ASan + UBSan (tools/asan.sh, ./build-asan; the whole suite
#      with tools/asan.sh --all),
#   4. the serving loop's concurrency under TSan (tools/tsan.sh, ./build-tsan),
#   5. every parser's libFuzzer harness for a short run (tools/fuzz.sh, ./build-fuzz).
# Prints each part's time at the end. WORMCHAT_FUZZ_SECONDS (default 10) is each harness's time.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash tools/build.sh
# The official `openai` npm client that tests/app/openai_client drives `wormchat serve` with, at
# its locked version (the only part of the tests that needs Node or the network).
npm ci --prefix tests/app/openai_client --no-audit --no-fund --loglevel=error > /dev/null
t1=$(date +%s)
ctest --test-dir build --output-on-failure -j"$(nproc)"
/usr/bin/python3 tools/python/check_reference.py
t2=$(date +%s)
bash tools/asan.sh
t3=$(date +%s)
bash tools/tsan.sh
t4=$(date +%s)
bash tools/fuzz.sh --seconds "${WORMCHAT_FUZZ_SECONDS:-10}" --jobs "$(nproc)"
t5=$(date +%s)
echo "test.sh: build $((t1 - t0)) s, ctest + reference $((t2 - t1)) s, asan+ubsan $((t3 - t2)) s," \
  "tsan $((t4 - t3)) s, fuzz $((t5 - t4)) s; $((t5 - t0)) s in all"

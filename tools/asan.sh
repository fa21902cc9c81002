#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the tests (part of tools/test.sh): builds with
# -DWORMCHAT_SANITIZE=address,undefined into ./build-asan and runs ctest on it. Every report is
# fatal: the build has -fno-sanitize-recover=all, and ASAN_OPTIONS / UBSAN_OPTIONS below halt on the
# first error with a non-zero exit, so the test that met it fails.
#
#   tools/asan.sh         the layers' test binaries (kernels to the serving loop, tokenizer, TUI
#                         pieces) - every test of theirs but the serving loop's slowest (the
#                         per-KV-format and determinism sweeps, long waits; listed below; every
#                         format's codecs and kernels run under ASan in kvcache_test,
#                         attention_test and model_test). Their binaries are CORE_ONLY
#                         (tests/CMakeLists.txt): the build compiles the core library and the
#                         tests, never the front ends (wormchat_app, `wormchat`), whose tests are
#                         the end-to-end binaries'. From scratch on a 2-vCPU AMD EPYC Zen 3 VM
#                         shared with two other builds (2026-11-30, load average 8-10): build
#                         1930 s, tests 483 s - not comparable with the figures of the VM alone
#                         (2026-11-28, when it still built the front ends: build 468-545 s, tests
#                         182-185 s).
#   tools/asan.sh --all   the whole suite, the end-to-end tests that start the real `wormchat`
#                         (cli, batch, transcript, beams, the chat in tmux) included (~60 minutes).
#
# The parsers the end-to-end tests feed (batch input, transcripts, turns files, configs,
# checkpoints, tokenizers) are fuzzed under ASan + UBSan by tools/fuzz.sh in every run.
# WORMCHAT_ASAN_BUILD: the build directory (default build-asan); WORMCHAT_STRESS_REQUESTS (default
# here 50) sizes the serving loop's stress test.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
case "${1:-}" in
  --all) all=1 ;;
  "") ;;
  *) echo "asan.sh: unknown option $1 (expected --all or nothing)" >&2; exit 2 ;;
esac
build="${WORMCHAT_ASAN_BUILD:-build-asan}"
# New build directories use Ninja when installed (why: tools/build.sh).
if command -v ninja > /dev/null; then export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"; fi
layers=(util_test kernels_test kvcache_test attention_test mesh_test meshmodel_test model_test
        serving_test conversation_test serving_loop_test beam_fixture_test tokenizer_test dist_test
        tui_test serve_test)
mkdir -p "$build"
log="$build/asan-build.log"
start=$(date +%s)
targets=()
((all)) || targets=(--target "${layers[@]}")
{
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" -DWORMCHAT_SANITIZE=address,undefined &&
    cmake --build "$build" -j"$(nproc)" "${targets[@]}"
} > "$log" 2>&1 || { tail -50 "$log"; echo "asan.sh: the ASan+UBSan build failed ($log)"; exit 1; }
built=$(date +%s)
export ASAN_OPTIONS="halt_on_error=1 detect_leaks=1 check_initialization_order=1 strict_init_order=1"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
# Leaks inside a Debian library's own code (tools/lsan.supp says which and why) are not ours.
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp print_suppressions=0"
# The serving loop's stress test at a quarter of its size: ASan makes it ~3x slower, and its 50
# random requests still mix admissions, cancellations and beams from several threads.
export WORMCHAT_STRESS_REQUESTS="${WORMCHAT_STRESS_REQUESTS:-50}"
if ((all)); then
  # Every KV format but f32 (plain stores, run by every other sanitized serving test) and
  # fp8-e5m2 (fp8-e4m3's kernels with another codec table) in the batch and beam sweeps.
  skip=$(printf '*EveryKVFormat/%sInvariance.*/%s:' Batch f32 Batch fp8_e5m2 Beam f32 Beam fp8_e5m2)
  GTEST_FILTER="-${skip%:}" ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
else
  labels=$(IFS='|'; echo "^(${layers[*]})\$")
  # The serving loop's tests that take over 20 s each under ASan (2-core EPYC, 2026-11-27; 21
  # minutes together): the per-KV-format sweeps, the determinism sweeps over batch mixes and
  # threads, and the long waits and random mixes (TSan runs the random mixes and waits below).
  slow=('EveryKVFormat/' 'ServingLoopPrefix.SharedHeads' 'ServingLoopPrefix.Persisted'
        'ServingLoopPrefix.RequestsWait' 'ServingLoopPrefix.ASmallPool' 'DraftModel.ARandomDraft'
        'DraftModel.DraftingForItself' 'DraftModel.AnyBatchMix' 'Rollback.RowsOfSmallBlocks'
        'Speculation.AnyBatchMix' 'Speculation.ASessionsNextTurn'
        'ServingLoopAdmission.RequestsWaitForKV' 'ServingLoopBeams.LongPrompt'
        'ServingLoopBeams.RandomBeam' 'ScriptedProposer.TheModelsOwn'
        'SpeculationTensorParallel.TwoRanks'
        # The conversation's longest replays (15-40 s each; its other tests run its undo, retry and
        # context paths under ASan, and these run in Release).
        'Conversation.TheSameOperations' 'Conversation.AFullContext'
        'ConversationUndo.ARetryReprefills' 'ConversationUndo.UndoingATurnThatChangedTheSeed'
        'ServingLoopConcurrency.StatusIsReadable')
  # A sanitized test binary runs as GoogleTest shards (tests/CMakeLists.txt), so the slow ones are
  # left out by a negative GTEST_FILTER, each pattern matching anywhere in a test's full name.
  skip=$(printf '*%s*:' "${slow[@]}")
  GTEST_FILTER="-${skip%:}" ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L "$labels"
fi
echo "asan.sh: no ASan or UBSan report; build $((built - start)) s, tests $(($(date +%s) - built)) s"

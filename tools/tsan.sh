#!/usr/bin/env bash
# ThreadSanitizer check of the serving loop (part of tools/test.sh): builds only wormchat_core and
# serving_loop_test, conversation_test, dist_test and kvcache_test with -fsanitize=thread into
# ./build-tsan (RelWithDebInfo) and runs under it the loop's stress, concurrency, session,
# beam-cancellation and prefix-cache tests, the persisted prefix cache's writer thread, the chat
# conversation's, `wormchat serve` in process and the chat's client of it cancelled from another
# thread; the first report fails the run (halt_on_error=1).
#
# OpenMP: Debian's libgomp is not built with TSan, so TSan cannot see how its team threads hand
# work over and would report races in every parallel region of the model. The tests therefore run
# the loop with one OpenMP thread - OMP_NUM_THREADS=1 here, and ServingOptions::threads = 1 through
# WORMCHAT_LOOP_THREADS=1 - so no team thread exists and every thread TSan sees is one the
# serving loop or the tests start. tools/tsan.supp lists known false positives (one comment each);
# races in serving/ are fixed, never suppressed.
#
# WORMCHAT_STRESS_REQUESTS (default here 50) sizes the stress test; WORMCHAT_TSAN_BUILD the
# build directory. The persisted prefix cache's test runs one KV format here (tests/sanitized.h;
# all six took 200 s under TSan, its threads meet the same way for each).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${WORMCHAT_TSAN_BUILD:-build-tsan}"
# New build directories use Ninja when installed (why: tools/build.sh).
if command -v ninja > /dev/null; then export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"; fi
mkdir -p "$build"
log="$build/tsan-build.log"
start=$(date +%s)
{
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" -DWORMCHAT_SANITIZE=thread &&
    cmake --build "$build" -j"$(nproc)" --target serving_loop_test conversation_test dist_test kvcache_test \
      serve_test chat_client_test
} > "$log" 2>&1 || { tail -50 "$log"; echo "tsan.sh: the ThreadSanitizer build failed ($log)"; exit 1; }
built=$(date +%s)
export OMP_NUM_THREADS=1
export WORMCHAT_LOOP_THREADS=1
export WORMCHAT_STRESS_REQUESTS="${WORMCHAT_STRESS_REQUESTS:-50}"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tools/tsan.supp"
# The runs below use one core each (one OpenMP thread; the loop's and the tests' threads mostly
# wait on each other), so they go in two lanes at once, each lane's runs one after another and its
# output kept in $build/tsan-lane-N.log (printed when a run fails).
lane() {
  local n="$1"; shift
  local log="$build/tsan-lane-$n.log" filter
  : > "$log"
  for run in "$@"; do
    filter="${run#* }"
    "$build/tests/${run%% *}" --gtest_filter="$filter" >> "$log" 2>&1 ||
      { echo "tsan.sh: ${run%% *} --gtest_filter='$filter' failed:"; tail -200 "$log"; return 1; }
  done
}
# Lane 1 - beams: the tests that cancel and mix requests (the others check results, not threads);
# the loop's stress and sessions; ranks as threads (dist/thread_group.h): the collectives' shared
# buffers.
lane 1 'serving_loop_test ServingLoopStress.*:ServingLoopSessions.*:ServingLoopBeams.Cancel*:ServingLoopBeams.Random*' \
  'dist_test ThreadGroup.*' 'serve_test ServeApi.*' &
lane1=$!
# Lane 2 - the loop's concurrency; the prefix cache: requests waiting on a head another row
# prefills, the persisted cache's writer thread beside the loop's; the chat's conversation: replies
# recorded on the loop's thread, read and sent from another; the chat's client of a server: Cancel
# from another thread (and its stopper thread) against a streaming reply.
lane 2 'serving_loop_test ServingLoopConcurrency.*:ServingLoopPrefix.RequestsWait*:ServingLoopPrefix.Persisted*' \
  'kvcache_test PrefixStore.*' \
  'conversation_test Conversation.FirstTurn*:Conversation.Destroying*:Conversation.BadMessages*:Conversation.Beam*' \
  'chat_client_test ChatClientServe.*:ChatClientOtherServer.Cancel*' &
lane2=$!
status=0
wait "$lane1" || status=1
wait "$lane2" || status=1
((status == 0)) || { echo "tsan.sh: ThreadSanitizer reported a race or a test failed"; exit 1; }
echo "tsan.sh: no data race; build $((built - start)) s, tests $(($(date +%s) - built)) s"

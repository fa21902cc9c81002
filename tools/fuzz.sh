#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs
# each for a given time, one after the other, starting from the committed seeds.
#
#   tools/fuzz.sh                  every harness 600 s (the long run; about 2 hours)
#   tools/fuzz.sh --seconds 15 --jobs 2   every harness 15 s, two at a time (CI: tools/test.sh)
#   tools/fuzz.sh --seconds 60 npy safetensors    only those harnesses
#
# New inputs go to build-fuzz/corpus/NAME (kept between runs), a crashing input to
# build-fuzz/crashes/NAME/, each run's log to build-fuzz/logs/NAME.log. Prints the executions and
# crashes per harness and in all; exits 1 if any harness crashed (a crash, a sanitizer report, an
# uncaught exception, a broken property, an input slower than 10 s or a malloc above 256 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
max_jobs=1
names=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) max_jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
if ((${#names[@]} == 0)); then
  names=(safetensors safetensors_index config kv_scales chat_format npy tokenizer tokenizer_json
         text_stream batch_input transcript turns_file gguf openai_body sse_chat_parser)
fi

build="${WORMCHAT_FUZZ_BUILD:-build-fuzz}"
# New build directories use Ninja when installed (why: tools/build.sh).
if command -v ninja > /dev/null; then export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"; fi
mkdir -p "$build/logs"
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= -DWORMCHAT_FUZZ=ON \
  -DBUILD_TESTING=OFF > "$build/logs/build.log" 2>&1 &&
  cmake --build "$build" -j"$(nproc)" --target $(printf '%s_fuzz ' "${names[@]}") >> "$build/logs/build.log" 2>&1 ||
  { tail -40 "$build/logs/build.log" >&2; exit 1; }

# One harness: its run, then "NAME EXECUTIONS CRASHES SECONDS" in logs/NAME.result.
run_one() {
  local name="$1"
  local corpus="$build/corpus/$name" crashes="$build/crashes/$name" log="$build/logs/$name.log"
  mkdir -p "$corpus" "$crashes"
  local extra=()
  if [[ "$name" != npy && "$name" != tokenizer && "$name" != text_stream && "$name" != turns_file &&
        "$name" != transcript && "$name" != gguf ]]; then
    extra+=(-dict=tests/fuzz/json.dict)
  fi
  local start status=0
  start=$(date +%s)
  "$build/tests/fuzz/${name}_fuzz" "$corpus" "tests/fuzz/corpus/$name" "${extra[@]}" \
    -max_total_time="$seconds" -timeout=10 -malloc_limit_mb=256 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" -print_final_stats=1 > "$log" 2>&1 || status=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  echo "$name ${execs:-0} $((status != 0)) $(($(date +%s) - start))" > "$build/logs/$name.result"
}

for name in "${names[@]}"; do
  rm -f "$build/logs/$name.result"
  while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n || true; done
  run_one "$name" &
done
wait

total=0
total_crashes=0
failed=0
printf '%-18s %14s %8s %s\n' harness executions crashes seconds
for name in "${names[@]}"; do
  read -r _ execs n_crash took < "$build/logs/$name.result"
  total=$((total + execs))
  total_crashes=$((total_crashes + n_crash))
  printf '%-18s %14s %8s %s\n' "$name" "$execs" "$n_crash" "$took"
  if ((n_crash != 0)); then
    failed=1
    grep -m1 -E 'ERROR|runtime error|uncaught|violated|must be one line' "$build/logs/$name.log" >&2 || true
    echo "  log: $build/logs/$name.log, input: $(ls -t "$build/crashes/$name" | head -1)" >&2
  fi
done
printf '%-18s %14s %8s\n' total "$total" "$total_crashes"
exit "$failed"

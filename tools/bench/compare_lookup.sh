#!/usr/bin/env bash
# wormchat's prompt lookup against llama.cpp b6673's lookup decoding (llama-lookup) on the same
# checkpoint, prompt, token count and threads (issue 34).
#
#   tools/bench/compare_lookup.sh [--reps N] [--threads T] [--gen N] [--k N] [--llama DIR] MODEL_DIR...
#
# The prompt is `bench model --workload extract`'s: a 400-token passage, then "Repeat the passage
# above:" (framed as a chat turn when the model has a chat format; the same framed text is given
# to llama-lookup). Greedy, --gen new tokens with EOS ignored (llama-lookup --ignore-eos), at most
# --k tokens drafted a step (our --speculate-k, their --draft-max). wormchat: `bench model
# --speculate lookup --workload extract` (the same row with and without lookup, alternated);
# llama.cpp: llama-lookup (its n-gram cache built from the prompt and the output as it goes, no
# static cache), --reps runs. Prints the median decode tokens/s of each, the acceptance each
# reports and the ratio. The checkpoint is converted to GGUF as tools/bench/compare.sh does;
# llama.cpp is built by tools/bench/llama-cpp.sh (llama-lookup added). Nothing of it is needed to
# build, run or test wormchat.
set -euo pipefail
cd "$(dirname "$0")/../.."

reps=3
threads=$(nproc)
gen=128
k=8
llama_dir=build-llama/llama.cpp-b6673
models=()
while (($#)); do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --k) k="$2"; shift 2 ;;
    --llama) llama_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare_lookup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
((${#models[@]} > 0)) || { echo "compare_lookup.sh: give at least one MODEL_DIR" >&2; exit 2; }

py=/usr/bin/python3
bin=$(bash tools/bench/llama-cpp.sh "$llama_dir" | tail -1)
if [ ! -x "$bin/llama-lookup" ]; then
  cmake --build "$llama_dir/build" -j "$(nproc)" --target llama-lookup >&2
fi
wormchat=./build/wormchat
[ -x "$wormchat" ] || bash tools/build.sh
out=build-bench
mkdir -p "$out"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "machine: $cpu, $(nproc) cores; $threads threads; greedy, $gen new tokens, k $k"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

for model in "${models[@]}"; do
  name=$(basename "$(realpath "$model")")
  gguf="$out/$name.gguf"
  if [ ! -f "$gguf" ] || [ "$model/model.safetensors" -nt "$gguf" ]; then
    PYTHONPATH="$llama_dir/gguf-py" "$py" tools/python/to_gguf.py "$model" "$gguf" >&2
  fi
  # The framed prompt as text: wormchat prints it (bench model's extract prompt, detokenized).
  prompt=$("$wormchat" bench model --model "$model" --print-workload)
  : > "$out/$name.lookup.ours"
  : > "$out/$name.lookup.llama"
  for ((r = 0; r < reps; ++r)); do
    "$wormchat" bench model --model "$model" --threads "$threads" --prompt-len 8 \
      --gen-len "$gen" --decode-rows 1 --repeats 1 --speculate lookup --workload extract \
      --speculate-k "$k" --json "$out/$name.lookup.json" > /dev/null
    "$py" -c '
import json, sys
s = json.load(open(sys.argv[1]))["speculation"]["by_k"][0]
print(s["tokens_per_s"], s["off_tokens_per_s"], s["accepted"], s["proposed"])' \
      "$out/$name.lookup.json" >> "$out/$name.lookup.ours"
    "$bin/llama-lookup" -m "$gguf" -p "$prompt" -n "$gen" --ignore-eos --temp 0 --top-k 1 \
      --draft-max "$k" -t "$threads" -c 2048 2> "$out/$name.lookup.log" > /dev/null </dev/null
    "$py" -c '
import re, sys
t = open(sys.argv[1]).read()
speed = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", t)
drafted = re.search(r"n_drafted\s+=\s+(\d+)", t)
accept = re.search(r"n_accept\s+=\s+(\d+)", t)
prompt = re.search(r"encoded\s+(\d+) tokens", t)
if not (speed and drafted and accept and prompt):
    sys.exit("compare_lookup.sh: llama-lookup printed no figures; see " + sys.argv[1])
print(speed.group(1), accept.group(1), drafted.group(1), prompt.group(1))' \
      "$out/$name.lookup.log" >> "$out/$name.lookup.llama"
  done
  ours=$(awk '{print $1}' "$out/$name.lookup.ours" | median)
  ours_off=$(awk '{print $2}' "$out/$name.lookup.ours" | median)
  theirs=$(awk '{print $1}' "$out/$name.lookup.llama" | median)
  read -r _ _ oa op < <(tail -1 "$out/$name.lookup.ours")
  read -r _ ta tp tn < <(tail -1 "$out/$name.lookup.llama")
  printf '%-16s wormchat lookup %8.1f tok/s (%.1f without; %s/%s accepted)   llama-lookup %8.1f tok/s (%s/%s accepted, %s prompt tokens)   ratio %.2f\n' \
    "$name" "$ours" "$ours_off" "$oa" "$op" "$theirs" "$ta" "$tp" "$tn" \
    "$(awk -v a="$ours" -v b="$theirs" 'BEGIN {print a / b}')"
done

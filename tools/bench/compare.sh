#!/usr/bin/env bash
# wormchat against llama.cpp (b6673) on the same checkpoints, dtype and threads (issue 16).
#
#   tools/bench/compare.sh [--reps N] [--threads T] [--llama DIR] [--simd avx2]
#                          [--formats OURS:THEIRS,...] [--rows R,...] [--wormchat BIN] MODEL_DIR...
#
# For each model: converts it to GGUF (tools/python/to_gguf.py, same dtype), checks that both
# programs pick the same greedy tokens for a prompt, then, for each format pair (default
# auto:auto, the checkpoint as stored in both), runs llama-bench (-p 512, -n 128) and
# `wormchat bench model --weights OURS` alternately, --reps times each (default 3), and prints the
# median tokens/s of each and their ratio, then the median and the list of each alternation's
# own ratio (paired). A pair such as bfp8:q8_0 or bfp4:q4_0 compares formats
# of the same bytes per weight (8.5 and 4.5 bits): llama.cpp's file is made from the same GGUF by
# its llama-quantize, wormchat packs at load; the two quantizers round differently, so the greedy
# check is made on the checkpoint as stored only. OURS `gguf` runs wormchat on llama.cpp's own
# quantized file (the GGUF issue's comparison: the same bits in both), e.g. gguf:q8_0, gguf:q4_k;
# THEIRS ending in +pure quantizes every matrix to that type (llama-quantize --pure), e.g.
# gguf:q4_k+pure; OURS ending in +P runs wormchat with --matmul-precision P, e.g. bfp4+int8:q4_0
# (the block-float weights in 8-bit integer products). Prefill is also printed as each program's share of wormchat's compute bound for
# the kernel it runs (bench model's: the int8 peak for GGUF's quantized types), the same figure for
# both. llama.cpp is built by tools/bench/llama-cpp.sh into --llama
# (default build-llama/llama.cpp-b6673) the first time; nothing of it is needed to build, run or
# test wormchat. Prints the CPU and its SIMD flags first: figures are only comparable on one
# machine. --simd avx2 measures the AVX2 machine kind on an AVX-512 host: wormchat runs with
# WORMCHAT_SIMD=avx2 and llama-bench comes from a second build of the same tree without AVX-512
# (DIR/build-avx2, built the first time). --wormchat runs that binary instead of ./build/wormchat
# (built by tools/build.sh when missing; a given BIN is never built). --rows 8,32 also measures
# batched decode in each alternation: R rows of 8 prompt tokens generating 128 each, aggregate
# tokens/s, wormchat's `bench model --decode-rows` against llama.cpp's llama-batched-bench
# (-npp 8 -ntg 128 -npl R, its text-generation speed; built the first time). MODEL_DIR is a Falcon
# or a Llama-layout (Falcon3) checkpoint.
set -euo pipefail
cd "$(dirname "$0")/../.."

reps=3
rows=
threads=$(nproc)
llama_dir=build-llama/llama.cpp-b6673
simd=native
formats=auto:auto
wormchat=./build/wormchat
wormchat_given=0
models=()
while (($#)); do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --llama) llama_dir="$2"; shift 2 ;;
    --simd) simd="$2"; shift 2 ;;
    --formats) formats="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --wormchat) wormchat="$2"; wormchat_given=1; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
((${#models[@]} > 0)) || { echo "compare.sh: give at least one MODEL_DIR" >&2; exit 2; }

# Debian's python3 with numpy (gguf-py needs it), whatever `python3` a PATH finds first.
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-numpy
fi
bin=$(bash tools/bench/llama-cpp.sh "$llama_dir" | tail -1)
bench_bin=$bin  # llama-bench's; llama-cli (the greedy check) is always the native build's
case "$simd" in
  native) ;;
  avx2)
    export WORMCHAT_SIMD=avx2
    bench_bin=$llama_dir/build-avx2/bin
    if [ ! -x "$bench_bin/llama-bench" ]; then
      cmake -S "$llama_dir" -B "$llama_dir/build-avx2" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DLLAMA_CURL=OFF >&2
      cmake --build "$llama_dir/build-avx2" -j "$(nproc)" --target llama-bench >&2
    fi
    ;;
  *) echo "compare.sh: --simd takes native or avx2" >&2; exit 2 ;;
esac
batched=()  # the --rows counts
if [ -n "$rows" ]; then
  IFS=, read -r -a batched <<< "$rows"
  for r in "${batched[@]}"; do
    [[ "$r" =~ ^[0-9]+$ ]] && ((r >= 2 && r <= 256)) ||
      { echo "compare.sh: --rows: '$r' is not a row count in [2, 256]" >&2; exit 2; }
  done
  if [ ! -x "$bench_bin/llama-batched-bench" ]; then
    build_dir=$(dirname "$bench_bin")
    cmake --build "$build_dir" -j "$(nproc)" --target llama-batched-bench >&2
  fi
fi
if [ ! -x "$wormchat" ]; then
  ((wormchat_given == 0)) || { echo "compare.sh: --wormchat $wormchat is not executable" >&2; exit 2; }
  bash tools/build.sh
fi
out=build-bench
mkdir -p "$out"

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -E '^(avx2|fma|avx512f|avx512_bf16|avx512_vnni|avx512vbmi|amx_bf16)$' | tr '\n' ' ')
echo "machine: $cpu, $(nproc) cores; $flags; $threads threads; measured as: $simd"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

for model in "${models[@]}"; do
  name=$(basename "$(realpath "$model")")
  gguf="$out/$name.gguf"
  if [ ! -f "$gguf" ] || [ "$model/model.safetensors" -nt "$gguf" ]; then
    PYTHONPATH="$llama_dir/gguf-py" "$py" tools/python/to_gguf.py "$model" "$gguf" >&2
  fi

  # The same greedy tokens: 12 new tokens of a raw prompt, as text.
  prompt="The falcon"
  # wormchat's ids spelled as llama.cpp spells them (padding ids of a random checkpoint included).
  ids=$("$wormchat" generate --model "$model" --raw --temperature 0 -n 12 --prompt "$prompt" \
         --threads "$threads" --json | "$py" -c 'import json, sys
print(" ".join(map(str, json.load(sys.stdin)["sequences"][0]["ids"])))')
  ours=$(PYTHONPATH="$llama_dir/gguf-py" "$py" tools/bench/gguf_detok.py "$gguf" $ids)
  theirs=$("$bin/llama-cli" -m "$gguf" -p "$prompt" -n 12 --temp 0 --top-k 1 -no-cnv \
           --no-display-prompt --no-warmup -t "$threads" -c 256 --simple-io 2>/dev/null </dev/null |
           head -c 4096)
  if [ "$(echo "$ours" | tr -d ' \n')" != "$(echo "$theirs" | tr -d ' \n')" ]; then
    echo "compare.sh: $name: greedy tokens differ" >&2
    echo "  wormchat:  $ours" >&2
    echo "  llama.cpp: $theirs" >&2
    exit 1
  fi
  echo "$name: greedy tokens agree (\"$ours\")"

  IFS=, read -r -a pairs <<< "$formats"
  for pair in "${pairs[@]}"; do
    ours_fmt=${pair%%:*}
    theirs_fmt=${pair#*:}
    [[ "$pair" == *:* && -n "$ours_fmt" && -n "$theirs_fmt" ]] ||
      { echo "compare.sh: --formats: '$pair' is not OURS:THEIRS (e.g. bfp8:q8_0)" >&2; exit 2; }
    case "$theirs_fmt" in
      auto) their_gguf=$gguf ;;
      *)
        their_gguf="$out/$name.$theirs_fmt.gguf"
        pure=()
        [[ "$theirs_fmt" == *+pure ]] && pure=(--pure)
        if [ ! -f "$their_gguf" ] || [ "$gguf" -nt "$their_gguf" ]; then
          "$bin/llama-quantize" "${pure[@]}" "$gguf" "$their_gguf" "$(echo "${theirs_fmt%+pure}" |
            tr a-z A-Z)" "$threads" >&2 ||
            { echo "compare.sh: llama-quantize to $theirs_fmt failed" >&2; exit 1; }
        fi
        ;;
    esac
    ours_model=(--model "$model" --weights "${ours_fmt%%+*}")
    # OURS ending in +P runs with --matmul-precision P, e.g. bfp4+int8.
    [[ "$ours_fmt" == *+* ]] && ours_model+=(--matmul-precision "${ours_fmt#*+}")
    [ "$ours_fmt" = gguf ] && ours_model=(--model "$their_gguf")
    tag="$name.$ours_fmt-$theirs_fmt"
    : > "$out/$tag.llama"
    : > "$out/$tag.ours"
    for ((rep = 0; rep < reps; ++rep)); do
      "$bench_bin/llama-bench" -m "$their_gguf" -p 512 -n 128 -t "$threads" -r 1 -o json \
        2>/dev/null | "$py" -c '
import json, sys
for t in json.load(sys.stdin):
    kind = "prefill" if t["n_prompt"] > 0 else "decode"
    print(kind, t["avg_ts"])' >> "$out/$tag.llama"
      if ((${#batched[@]})); then
        # Every row's 8 + 128 positions in one unified cache (llama-batched-bench's -kvu).
        ctx=256
        for rows_n in "${batched[@]}"; do
          if ((rows_n * 136 + 256 > ctx)); then ctx=$((rows_n * 136 + 256)); fi
        done
        "$bench_bin/llama-batched-bench" -m "$their_gguf" -c "$ctx" -b 2048 -ub 512 -npp 8 \
          -ntg 128 -npl "$rows" -t "$threads" -tb "$threads" -kvu --output-format jsonl \
          2>/dev/null | "$py" -c '
import json, sys
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        j = json.loads(line)
        print("batched_%d" % j["pl"], j["speed_tg"])' >> "$out/$tag.llama"
      fi
      "$wormchat" bench model "${ours_model[@]}" --threads "$threads" \
        --prompt-len 512 --gen-len 128 --decode-rows "1${rows:+,$rows}" --repeats 1 \
        --json "$out/$tag.json" > /dev/null
      "$py" -c '
import json, sys
j = json.load(open(sys.argv[1]))
print("prefill", j["prefill"]["tokens_per_s"])
print("decode", j["decode"][0]["tokens_per_s"])
print("decode_bound", j["decode"][0]["bandwidth_bound_tokens_per_s"])
print("prefill_bound", j["prefill"]["bound_tokens_per_s"])
for d in j["decode"][1:]:
    print("batched_%d" % d["rows"], d["tokens_per_s"])' "$out/$tag.json" \
        >> "$out/$tag.ours"
    done
    label="$name $ours_fmt/$theirs_fmt"
    kinds=(prefill decode)
    for r in "${batched[@]}"; do kinds+=("batched_$r"); done
    for kind in "${kinds[@]}"; do
      l=$(grep "^$kind " "$out/$tag.llama" | awk '{print $2}' | median)
      o=$(grep "^$kind " "$out/$tag.ours" | awk '{print $2}' | median)
      # Each alternation's own ratio too: on a shared host whose speed drifts over minutes, a
      # pair measured a minute apart cancels more of the drift than medians taken apart.
      paired=$(paste <(grep "^$kind " "$out/$tag.ours" | awk '{print $2}') \
        <(grep "^$kind " "$out/$tag.llama" | awk '{print $2}') | awk '{print $1 / $2}')
      printf '%-30s %-8s wormchat %8.1f tok/s   llama.cpp %8.1f tok/s   ratio %.2f   paired %.2f (%s)\n' \
        "$label" "$kind" "$o" "$l" "$(awk -v a="$o" -v b="$l" 'BEGIN {print a / b}')" \
        "$(median <<< "$paired")" "$(sort -g <<< "$paired" | awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1}')"
    done
    pb=$(grep "^prefill_bound " "$out/$tag.ours" | awk '{print $2}' | median)
    l=$(grep "^prefill " "$out/$tag.llama" | awk '{print $2}' | median)
    o=$(grep "^prefill " "$out/$tag.ours" | awk '{print $2}' | median)
    printf '%-30s prefill at %.0f%% (wormchat) and %.0f%% (llama.cpp) of the compute bound (%.1f tok/s)\n' \
      "$label" "$(awk -v a="$o" -v b="$pb" 'BEGIN {print 100 * a / b}')" \
      "$(awk -v a="$l" -v b="$pb" 'BEGIN {print 100 * a / b}')" "$pb"
    b=$(grep "^decode_bound " "$out/$tag.ours" | awk '{print $2}' | median)
    o=$(grep "^decode " "$out/$tag.ours" | awk '{print $2}' | median)
    printf '%-30s decode at %.0f%% of the read-bandwidth bound (%.1f tok/s)\n' "$label" \
      "$(awk -v a="$o" -v b="$b" 'BEGIN {print 100 * a / b}')" "$b"
  done
done

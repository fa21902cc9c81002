#!/usr/bin/env bash
# wormchat serve against llama-server (llama.cpp b6673) on one GGUF file, same threads (issue 53).
#
#   tools/bench/serve_compare.sh [--reps N] [--threads T] [--clients C] [--prompt-len P]
#                                [--gen-len G] [--wormchat BIN] [--llama DIR] [--port P]
#                                [--skip-one | --one-only] MODEL.gguf
#
# Starts `wormchat serve --model FILE --user-rows C --threads T --ctx N --speculate off` or
# `llama-server -m FILE -np C -cb -t T -c C x N` (N = P+G+16 rounded up to 256: the same positions
# per row and per slot), one server at a time, started afresh for each run, waits for /health and
# runs `wormchat bench serve --http` against it, alternating which goes first, --reps times
# (default 2): C concurrent clients (default 16), each a streamed /v1/completions of P prompt token
# ids (default 256; the same ids for both servers, a new seed each rep) generating G tokens
# (default 128) greedily with EOS ignored. Prints the median of each server's aggregate generated
# tokens/s and TTFT p50, and their ratios. Then (unless --skip-one) one client through HTTP
# against llama-server (run after its first rep's load), and --reps alternations of one client
# through HTTP against a fresh `wormchat serve` and `wormchat generate` of the same ids and lengths
# alone (its --stats decode rate), the per-client rate counted the same way (tokens over the time
# after the first token), medians reported. --one-only runs that alternation alone (no load, no
# llama-server). Speculative decoding is off in wormchat (llama-server does not
# speculate without a draft). Both servers load the same file, so they run the same dtype (the
# GGUF's matrix types, named in the output). llama-server is built into DIR/build (DIR:
# tools/bench/llama-cpp.sh's tree, --llama, default build-llama/llama.cpp-b6673) when missing.
# JSON figures and server logs go to build-bench/serve_compare/.
set -euo pipefail
cd "$(dirname "$0")/../.."

reps=2
threads=$(nproc)
clients=16
prompt_len=256
gen_len=128
wormchat=./build/wormchat
llama_dir=build-llama/llama.cpp-b6673
port=18080
skip_one=0
one_only=0
model=
while (($#)); do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --prompt-len) prompt_len="$2"; shift 2 ;;
    --gen-len) gen_len="$2"; shift 2 ;;
    --wormchat) wormchat="$2"; shift 2 ;;
    --llama) llama_dir="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --skip-one) skip_one=1; shift ;;
    --one-only) one_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "serve_compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) model="$1"; shift ;;
  esac
done
[ -f "$model" ] || { echo "serve_compare.sh: give a GGUF file (got '$model')" >&2; exit 2; }
[ -x "$wormchat" ] || { echo "serve_compare.sh: $wormchat is not executable (--wormchat)" >&2; exit 2; }
server=$llama_dir/build/bin/llama-server
if [ ! -x "$server" ]; then
  [ -f "$llama_dir/build/CMakeCache.txt" ] || bash tools/bench/llama-cpp.sh "$llama_dir" >/dev/null
  cmake --build "$llama_dir/build" --config Release -j "$(nproc)" --target llama-server >&2
fi
py=/usr/bin/python3
out=build-bench/serve_compare
mkdir -p "$out"

# Positions per row (wormchat) and per slot (llama-server): prompt + gen + 16, rounded up to 256
# as llama.cpp rounds its context, so both hold the same.
per_row=$(((prompt_len + gen_len + 16 + 255) / 256 * 256))
wport=$port
lport=$((port + 1))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
dtype=$(PYTHONPATH="$llama_dir/gguf-py" "$py" -c '
import sys, collections, gguf
r = gguf.GGUFReader(sys.argv[1])
c = collections.Counter(t.tensor_type.name for t in r.tensors if len(t.shape) > 1)
print(", ".join(f"{k} x{v}" for k, v in c.most_common()))' "$model" 2>/dev/null || echo unknown)
echo "machine: $cpu, $(nproc) cores; $threads threads"
echo "model: $model (matrices: $dtype)"
((one_only)) ||
  echo "load: $clients clients x ($prompt_len prompt ids + $gen_len new tokens), greedy, ignore_eos, streamed; $reps reps alternating"

# One server at a time (a second one, idle, still takes memory bandwidth and wakes its threads).
start_server() {  # start_server wormchat|llama: starts it, waits for /health
  if [ "$1" = wormchat ]; then
    "$wormchat" serve --model "$model" --user-rows "$clients" --threads "$threads" \
      --ctx "$per_row" --speculate off --port "$wport" >> "$out/wormchat-serve.log" 2>&1 &
  else
    "$server" -m "$model" -np "$clients" -cb -t "$threads" -c $((clients * per_row)) \
      --host 127.0.0.1 --port "$lport" --no-webui >> "$out/llama-server.log" 2>&1 &
  fi
  pids=($!)
  local p=$wport; [ "$1" = llama ] && p=$lport
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && return 0
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 1
  done
  echo "serve_compare.sh: $1 gave no /health on port $p (logs in $out/)" >&2
  exit 1
}
stop_server() { cleanup; pids=(); }
: > "$out/wormchat-serve.log"
: > "$out/llama-server.log"

field() { "$py" -c 'import json, sys
j = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): j = j[k]
print(j)' "$1" "$2"; }
# The median; of an even count, the lower middle one.
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
load() {  # load NAME PORT SEED CLIENTS -> JSON file
  local f="$out/$1-c$4-s$3.json"
  "$wormchat" bench serve --http "http://127.0.0.1:$2" --clients "$4" --prompt-len "$prompt_len" \
    --gen-len "$gen_len" --seed "$3" --json "$f" > "$f.txt"
  echo "$f"
}

declare -A agg ttft one
for rep in $(seq 1 "$reps"); do
  ((one_only)) && break
  order="wormchat llama"
  ((rep % 2 == 0)) && order="llama wormchat"
  for who in $order; do
    p=$wport; [ "$who" = llama ] && p=$lport
    start_server "$who"
    f=$(load "$who" "$p" "$rep" "$clients")
    a=$(field "$f" aggregate_tokens_per_s)
    t=$(field "$f" ttft_ms.p50)
    agg[$who]+="$a "
    ttft[$who]+="$t "
    printf '  rep %d %-8s  %8.1f tok/s aggregate  TTFT p50 %8.1f ms  p90 %8.1f ms\n' "$rep" "$who" \
      "$a" "$t" "$(field "$f" ttft_ms.p90)"
    # llama-server's one client on the same server, after the first rep's load (a seed of its own).
    ((rep == 1 && skip_one == 0)) && [ "$who" = llama ] && one[$who]=$(load "$who" "$p" $((reps + 1)) 1)
    stop_server
  done
done
if ((one_only == 0)); then
wa=$(echo "${agg[wormchat]}" | tr ' ' '\n' | grep . | median)
la=$(echo "${agg[llama]}" | tr ' ' '\n' | grep . | median)
wt=$(echo "${ttft[wormchat]}" | tr ' ' '\n' | grep . | median)
lt=$(echo "${ttft[llama]}" | tr ' ' '\n' | grep . | median)
echo
echo "| $clients clients x ($prompt_len + $gen_len), median of $reps | wormchat serve | llama-server | wormchat / llama |"
echo "|---|---|---|---|"
printf '| aggregate generated tok/s | %.1f | %.1f | **%.2fx** (target >= 1.2x) |\n' "$wa" "$la" "$(echo "$wa / $la" | bc -l)"
printf '| TTFT p50 ms | %.0f | %.0f | **%.2fx** (target <= 1x) |\n' "$wt" "$lt" "$(echo "$wt / $lt" | bc -l)"
fi

if ((skip_one == 0)); then
  # wormchat's one client and `generate` alternating, each process started afresh, so neither
  # runs on a machine the other warmed or after the other's load.
  hws=() grs=() ids= gl=
  for rep in $(seq 1 "$reps"); do
    order="http generate"
    ((rep % 2 == 0)) && order="generate http"
    for what in $order; do
      if [ "$what" = http ]; then
        start_server wormchat
        fw=$(load wormchat "$wport" $((reps + 1)) 1)
        stop_server
        hws+=("$(field "$fw" client_tokens_per_s.p50)")
        ids=$("$py" -c 'import json, sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["client0_prompt_ids"])))' "$fw")
      else
        "$wormchat" generate --model "$model" --ids "$ids" -n "$gen_len" --temperature 0 \
          --speculate off --threads "$threads" --ctx "$per_row" --stats > "$out/generate.txt" \
          2> "$out/generate.stats"
        gl=$(grep -o 'generated [0-9]* tokens in [0-9.]* s ([0-9.]* tok/s)' "$out/generate.stats")
        grs+=("$(echo "$gl" | sed 's/.*(\([0-9.]*\) tok\/s)/\1/')")
      fi
    done
  done
  hws=($(printf '%.1f ' "${hws[@]}"))
  grs=($(printf '%.1f ' "${grs[@]}"))
  hw=$(printf '%s\n' "${hws[@]}" | median)
  gr=$(printf '%s\n' "${grs[@]}" | median)
  hl=
  ((one_only)) || hl=$(field "${one[llama]}" client_tokens_per_s.p50)
  echo
  echo "| one client, $prompt_len + $gen_len, median of $reps alternations | tok/s after the first token | vs generate |"
  echo "|---|---|---|"
  printf '| wormchat generate (%s; runs %s) | %.1f | 1 |\n' "$gl" "${grs[*]}" "$gr"
  printf '| wormchat serve, HTTP (runs %s) | %.1f | **%.1f%%** (target >= 97%%) |\n' "${hws[*]}" "$hw" "$(echo "100 * $hw / $gr" | bc -l)"
  if [ -n "$hl" ]; then
    printf '| llama-server, HTTP | %.1f | %.1f%% |\n' "$hl" "$(echo "100 * $hl / $gr" | bc -l)"
  fi
fi

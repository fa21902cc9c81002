#!/usr/bin/env bash
# gguf_logits.sh LLAMA_DIR WORMCHAT FILE.gguf [TYPE ...]: issue 52's logits check. For FILE as it
# is and for each TYPE (Q8_0, Q4_0, ... : `llama-quantize --pure FILE TYPE`, one type for every
# tensor), the logits of one prompt of token ids from llama.cpp b6673 (tools/bench/llama_logits.cpp
# against LLAMA_DIR's libllama: f32 KV, no flash attention) and from `wormchat logits --kv-dtype
# f32`, printed as max |difference| / max |logit| and the share of positions whose argmax agree;
# then GREEDY tokens (default 64) decoded greedily by both from the prompt, compared: "same", or
# the first step they differ with llama.cpp's gap between its best and second-best logit there
# (divided by max |logit|: a near tie is a gap of a few 1e-3 at most). wormchat stops at an
# end-of-generation id; its tokens are compared up to there.
#   LLAMA_DIR  the anchor's tree (tools/bench/llama-cpp.sh DEST), e.g. build-llama/llama.cpp-b6673
#   WORMCHAT   the binary, e.g. build/wormchat
#   IDS="..."  the prompt (default "1 5 7 3 9 2 11 4 8 6"); THREADS (default 1); GREEDY (64)
# Needs /usr/bin/python3 with numpy. Writes its scratch files under a temporary directory.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,10p "$0" >&2; exit 2; }
llama=$1 wormchat=$2 file=$3
shift 3
ids=${IDS:-1 5 7 3 9 2 11 4 8 6}
threads=${THREADS:-1}
greedy=${GREEDY:-64}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O1 -std=c++17 -I"$llama/include" -I"$llama/ggml/include" "$here/llama_logits.cpp" \
  -L"$llama/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$llama/build/bin" -o "$tmp/llama_logits"
compare() {  # FILE LABEL
  GREEDY=$greedy "$tmp/llama_logits" "$1" "$tmp/ll.npy" "$threads" $ids > "$tmp/ll.greedy" \
    2> "$tmp/ll.log" || { tail -3 "$tmp/ll.log"; return 1; }
  "$wormchat" logits --model "$1" --ids "$ids" --kv-dtype f32 --threads "$threads" \
    --out "$tmp/wc.npy" > /dev/null
  "$wormchat" generate --model "$1" --ids "$ids" -n "$greedy" --temperature 0 --kv-dtype f32 \
    --threads "$threads" --json > "$tmp/wc.json"
  /usr/bin/python3 - "$tmp/ll.npy" "$tmp/wc.npy" "$2" "$tmp/ll.greedy" "$tmp/wc.json" <<'PY'
import json, sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
ratio = np.abs(a - b).max() / np.abs(a).max()
ll = [line.split() for line in open(sys.argv[4])]
ll_ids, gaps = [int(x[0]) for x in ll], [float(x[1]) for x in ll]
seq = json.load(open(sys.argv[5]))["sequences"][0]
wc_ids = seq["ids"]
diff = next((i for i, (p, q) in enumerate(zip(ll_ids, wc_ids)) if p != q), None)
if diff is None:
    greedy = f"greedy {len(wc_ids)}: same" + (f" (wormchat stopped: {seq['finish_reason']})" if len(wc_ids) < len(ll_ids) else "")
else:
    greedy = f"greedy: differ at step {diff} of {len(ll_ids)} (llama.cpp's best-second gap {gaps[diff]:.1e})"
print(f"{sys.argv[3]:12s} max|diff|/max|logit| {ratio:.2e}  argmax agree {(a.argmax(1) == b.argmax(1)).mean():.2f}  {greedy}")
PY
}
compare "$file" "as stored"
for t in "$@"; do
  if "$llama/build/bin/llama-quantize" --pure "$file" "$tmp/q.gguf" "$t" > "$tmp/q.log" 2>&1; then
    compare "$tmp/q.gguf" "$t"
  else
    echo "$t: llama-quantize refused ($(grep -m1 -i 'error\|failed' "$tmp/q.log" || true))"
  fi
done

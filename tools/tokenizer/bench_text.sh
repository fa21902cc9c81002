#!/usr/bin/env bash
# bench_text.sh OUT: the text `wormchat bench tokenizer` and hf_bench.mjs are compared on in the
# README (0.76 MB): the project's READMEs (English prose, tables, code) and the tokenizer test
# corpus's strings (mixed scripts, emoji, digits, whitespace runs), one per line, 8 times over.
set -euo pipefail
out=${1:?usage: bench_text.sh OUT}
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$(mktemp)
python3 - "$root/tests/fixtures/tokenizer/corpus.json" > "$corpus" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1], encoding="utf-8")):
    if "text" in c:
        sys.stdout.write(c["text"] + "\n")
PY
: > "$out"
for _ in 1 2 3 4 5 6 7 8; do
  cat "$root/README.md" "$root/kernels/README.md" "$root/tools/python/train/README.md" \
      "$root/assets/README.md" "$root/attention/README.md" "$corpus" >> "$out"
done
rm -f "$corpus"
echo "$out: $(wc -c < "$out") bytes"

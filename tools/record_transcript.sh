#!/usr/bin/env bash
# Records a regression transcript: the replies `wormchat generate` gives now for each prompt.
#   tools/record_transcript.sh OUT.txt "ARGS" "prompt 1" "prompt 2" ...
# e.g. tools/record_transcript.sh tests/transcripts/default_greedy.txt "--temperature 0 -n 48" \
#        "What is a falcon?" "Define harbor."
# Review the file before committing it: tests replay it byte for byte.
set -euo pipefail
out=$1
args=$2
shift 2
bin=${WORMCHAT:-./build/wormchat}
{
  echo "# wormchat regression transcript, recorded with: wormchat generate --prompt P $args"
  echo "# args: $args"
  for p in "$@"; do
    echo ">>> $p"
    # shellcheck disable=SC2086
    "$bin" generate --prompt "$p" $args
    echo
  done
} > "$out"
echo "wrote $out"

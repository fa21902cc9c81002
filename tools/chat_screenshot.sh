#!/usr/bin/env bash
# Makes docs/chat.png: the full-screen chat at 130x32 (the side panel shows from 120 columns) on
# the default model, with one real exchange and then a reply rendered as markdown (a heading,
# bold, a bullet list, a python code block in its box with syntax colours), the status bar and an
# unsent message on the input line.
#
# The default model does not write markdown, so the second reply is scripted the way
# tests/app/chat_tui_render_test.cpp's ScriptedChat does it: a real two-turn chat is kept with
# `wormchat chat --plain`, its last reply's lines (`< ...`) and `ids:` replaced by kReply and the
# ids `wormchat tokenize --text` gives for it (EOS after), `end: eos`; then `chat --resume` shows
# it in tmux, `capture-pane -p -e -N` reads the screen and tools/screenshot.py paints it.
#
# Usage (from the repository, after `bash tools/build.sh`):
#   bash tools/chat_screenshot.sh [OUT.png]        (default: docs/chat.png)
# Environment: WORMCHAT (default ./build/wormchat). Needs tmux and Debian's /usr/bin/python3 with
# python3-pil and fonts-dejavu-core.
set -euo pipefail

out=$(realpath -m "${1:-$(dirname "$0")/../docs/chat.png}")
wormchat=$(realpath -m "${WORMCHAT:-$(dirname "$0")/../build/wormchat}")
cd "$(dirname "$0")/.."
[[ -x $wormchat ]] || { echo "no $wormchat: build it first" >&2; exit 1; }
command -v tmux > /dev/null || { echo "tmux is not installed" >&2; exit 1; }

work=$(mktemp -d)
sock=$work/sock
trap 'tmux -S "$sock" kill-server 2> /dev/null || true; rm -rf "$work"' EXIT
export HOME=$work XDG_STATE_HOME=$work/state
unset NO_COLOR TMUX TMUX_PANE
chats=$work/chats

first='What does it mean to sail?'
ask='Show me a greeting in Python.'
IFS= read -r -d '' reply << 'EOF' || true
## A greeting in Python

Here is a **small function** that greets someone by name:

- it takes a `name` and gives back a string
- the *f-string* puts the name into it
- the `__main__` check runs it as a script

```python
def greet(name: str) -> str:
    """Say hello to someone."""
    return f"Hello, {name}!"  # an f-string

if __name__ == "__main__":
    print(greet("sailor"))
```

Run it with `python3 greet.py`.
EOF
reply=${reply%$'\n'}

# A real chat of two turns, kept in $chats.
printf '%s\n%s\n' "$first" "$ask" |
  "$wormchat" chat --plain --seed 7 -n 40 --threads 1 --chats-dir "$chats" > /dev/null
file=$(ls "$chats"/*.txt)

# Its second reply becomes $reply: the text as `<` lines, the ids with EOS (2) after them.
ids=$("$wormchat" tokenize --text "$reply")
turn=0
replaced=0
while IFS= read -r line; do
  case $line in
    '--- turn '*) turn=$((turn + 1)); printf '%s\n' "$line" ;;
    '<' | '< '*)
      if ((turn == 2)); then
        if ((!replaced)); then
          replaced=1
          while IFS= read -r r; do
            if [[ -z $r ]]; then printf '<\n'; else printf '< %s\n' "$r"; fi
          done <<< "$reply"
        fi
      else
        printf '%s\n' "$line"
      fi
      ;;
    'ids: '*) if ((turn == 2)); then printf 'ids: %s 2\n' "$ids"; else printf '%s\n' "$line"; fi ;;
    'end: '*) if ((turn == 2)); then printf 'end: eos\n'; else printf '%s\n' "$line"; fi ;;
    *) printf '%s\n' "$line" ;;
  esac
done < "$file" > "$work/chat.txt"
((replaced)) || { echo "no second reply in $file" >&2; exit 1; }
mv "$work/chat.txt" "$file"

# The chat, resumed in a 130x32 tmux pane.
printf 'set -g status off\nset -g default-terminal tmux-256color\n' > "$work/tmux.conf"
tmux -S "$sock" -f "$work/tmux.conf" new-session -d -x 130 -y 32 -c "$work" \
  "'$wormchat' chat --chats-dir '$chats' --resume --seed 7 --threads 1"
screen() { tmux -S "$sock" capture-pane -p "$@"; }
wait_for() {  # until the screen shows $1 (a fixed string)
  for _ in $(seq 300); do
    screen | grep -qF -- "$1" && return 0
    sleep 0.1
  done
  echo "timed out waiting for '$1'; the screen:" >&2
  screen >&2
  exit 1
}
wait_for 'Run it with'
wait_for 'idle'
tmux -S "$sock" send-keys -l 'Why is the sea salty?'
wait_for '> Why is the sea salty?'
sleep 0.5  # the side panel's figures settle

screen -e -N > "$work/chat.ansi"
cursor=$(tmux -S "$sock" display-message -p '#{cursor_x},#{cursor_y}')
/usr/bin/python3 tools/screenshot.py "$work/chat.ansi" "$out" --cursor "$cursor"
echo "wrote $out"

#!/usr/bin/python3
"""Write model/chat/known_chat_templates.cpp from the template texts in tests/fixtures/chat_templates.

Each NAME.jinja there is a chat_template as published (the JSON-decoded string of a checkpoint's
tokenizer_config.json, byte for byte); README.md there names its source. The file name's first
part says which renderer of model/chat/chat_template.cpp it is (falcon3*, falcon_instruct*, chatml*,
llama3*, zephyr*). The build never reads the fixtures: the texts are compiled in as C string
literals, byte for byte (read as bytes: falcon_instruct.jinja holds a CR LF that a text read or a
raw string literal would turn into LF).

Usage (from the repo root): python3 tools/chat_template/make_known_templates.py
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/chat_templates"
OUT = ROOT / "model/chat/known_chat_templates.cpp"
KINDS = [("falcon_instruct", "kFalconInstruct"), ("falcon3", "kFalcon3"), ("chatml", "kChatMl"),
         ("llama3", "kLlama3"), ("zephyr", "kZephyr")]


def kind_of(name):
    for prefix, kind in KINDS:
        if name == prefix or name.startswith(prefix + "_"):
            return kind
    raise SystemExit(f"{name}.jinja: no renderer for this name (prefixes: {[k for k, _ in KINDS]})")


def sources():
    """name -> source, from README.md lines of the form `- `NAME.jinja`: SOURCE`."""
    out = {}
    for line in (FIXTURES / "README.md").read_text().splitlines():
        m = re.match(r"\s*[-*|]\s*`?([A-Za-z0-9_]+)\.jinja`?\s*[:|]\s*(.+?)\s*\|?\s*$", line)
        if m:
            out.setdefault(m.group(1), m.group(2).replace('"', "'"))
    return out


def c_literal(data):
    """The bytes as C string literals, one per source line (split after each newline)."""
    out, cur = [], ""
    for b in data:
        ch = chr(b)
        if ch == "\n":
            out.append(cur + "\\n")
            cur = ""
            continue
        cur += {"\\": "\\\\", '"': '\\"', "\r": "\\r", "\t": "\\t"}.get(
            ch, ch if 0x20 <= b < 0x7F else f"\\{b:03o}")
    if cur or not out:
        out.append(cur)
    return "\n".join(f'           "{line}"' for line in out)


def main():
    src = sources()
    rows = []
    for path in sorted(FIXTURES.glob("*.jinja")):
        rows.append((kind_of(path.stem), src.get(path.stem, path.name)[:160], path.read_bytes()))
    body = "".join(
        f'      {{ChatTemplateKind::{kind}, "{source}",\n{c_literal(text)}}},\n'
        for kind, source, text in rows)
    OUT.write_text(f"""// The chat templates wormchat recognises, byte for byte as published (their sources beside each).
// Written by tools/chat_template/make_known_templates.py from
// tests/fixtures/chat_templates/*.jinja: edit those and rerun it. model/chat/chat_template.cpp
// renders each kind.
#include "model/chat/chat_template.h"

namespace wc {{

// One literal a template line, as the generator writes them (clang-format leaves them so).
// clang-format off
const std::vector<KnownChatTemplateText>& KnownChatTemplateTexts() {{
  static const std::vector<KnownChatTemplateText> texts = {{
{body}  }};
  return texts;
}}
// clang-format on

}}  // namespace wc
""")


if __name__ == "__main__":
    main()

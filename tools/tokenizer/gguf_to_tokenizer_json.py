#!/usr/bin/python3
"""Rebuild Falcon's Hugging Face tokenizer.json from llama.cpp's GGUF vocabulary.

llama.cpp ships Falcon's real tokenizer (65,024 byte-level BPE tokens, 64,784
merges, token types, bos/eos ids) as models/ggml-vocab-falcon.gguf. This tool
reads it with llama.cpp's own gguf-py package and writes the equivalent HF
`tokenizer.json` (the format the `tokenizers` library loads):

  - "added_tokens": every control-type token of the GGUF (ids 0..11,
    ">>TITLE<<" ... "<|endoftext|>"), special, no strip/normalize flags;
  - "normalizer": null;
  - "pre_tokenizer": Falcon's Sequence [Punctuation(Contiguous),
    ByteLevel(add_prefix_space=false), Digits(individual_digits=false),
    Split("[0-9][0-9][0-9]", Isolated)];
  - "post_processor": null;
  - "decoder": ByteLevel;
  - "model": BPE with the GGUF's vocab (token -> id) and merges in GGUF order.

That configuration was chosen empirically: with the npm `tokenizers` 0.23.2
package it reproduces every vector of llama.cpp's ggml-vocab-falcon.gguf.out
(which llama.cpp generated with HF tokenizers from tiiuae/falcon-7b); see
tests/fixtures/tokenizer/README.md. The --no-digits / --post-processor options
only exist to re-run that experiment.

Usage (Debian's python3 has numpy, which gguf-py needs; PYTHONPATH finds gguf-py):

    PYTHONPATH=/work/llama.cpp-b6673/gguf-py /usr/bin/python3 tools/tokenizer/gguf_to_tokenizer_json.py \
        --llama-cpp /work/llama.cpp-b6673 \
        --out tests/fixtures/tokenizer/falcon/tokenizer.json
    (then packed as tokenizer.json.tar.xz: tests/fixtures/tokenizer/README.md)

The output is deterministic: UTF-8, pretty-printed with 2-space indents like
the files HF publishes, fixed key order, trailing newline.
"""

import argparse
import json
import os

# GGUF token types (llama.cpp's llama_token_type / gguf.TokenType).
TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_CONTROL = 3

FALCON_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Punctuation", "behavior": "Contiguous"},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        {"type": "Digits", "individual_digits": False},
        {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": False},
    ],
}

BYTE_LEVEL_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
BYTE_LEVEL_POST = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}


def read_gguf(path):
    try:
        import gguf  # llama.cpp's package, not installed system-wide
    except ImportError:
        raise SystemExit("gguf_to_tokenizer_json.py: needs llama.cpp's gguf-py "
                         "(PYTHONPATH=LLAMA_CPP/gguf-py)") from None

    reader = gguf.GGUFReader(path)

    def strings(key):
        f = reader.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def ints(key):
        f = reader.fields[key]
        return [int(f.parts[i][0]) for i in f.data]

    def scalar(key):
        f = reader.fields.get(key)
        return None if f is None else int(f.parts[f.data[0]][0])

    model = strings("tokenizer.ggml.model")[0]
    if model != "gpt2":
        raise SystemExit(f"{path}: tokenizer.ggml.model is {model!r}, expected 'gpt2' (byte-level BPE)")
    pre = reader.fields.get("tokenizer.ggml.pre")
    pre = strings("tokenizer.ggml.pre")[0] if pre is not None else None
    if pre != "falcon":
        raise SystemExit(f"{path}: tokenizer.ggml.pre is {pre!r}, expected 'falcon'")
    return {
        "tokens": strings("tokenizer.ggml.tokens"),
        "types": ints("tokenizer.ggml.token_type"),
        "merges": strings("tokenizer.ggml.merges"),
        "bos": scalar("tokenizer.ggml.bos_token_id"),
        "eos": scalar("tokenizer.ggml.eos_token_id"),
    }


def build(g, digits=True, post_processor="null"):
    tokens, types, merges = g["tokens"], g["types"], g["merges"]
    if len(tokens) != len(types):
        raise SystemExit("token / token_type arrays differ in length")
    if len(set(tokens)) != len(tokens):
        raise SystemExit("duplicate token strings in the GGUF vocabulary")
    for m in merges:
        if m.count(" ") != 1:
            raise SystemExit(f"merge {m!r} is not 'a b'")

    added = []
    for i, (tok, ty) in enumerate(zip(tokens, types)):
        if ty == TOKEN_TYPE_CONTROL:
            added.append({
                "id": i,
                "content": tok,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            })
        elif ty != TOKEN_TYPE_NORMAL:
            raise SystemExit(f"token {i} {tok!r} has unexpected type {ty}")

    pre = json.loads(json.dumps(FALCON_PRE_TOKENIZER))
    if not digits:
        pre["pretokenizers"] = [p for p in pre["pretokenizers"] if p["type"] != "Digits"]

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": None if post_processor == "null" else dict(BYTE_LEVEL_POST),
        "decoder": dict(BYTE_LEVEL_DECODER),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": {tok: i for i, tok in enumerate(tokens)},
            "merges": list(merges),
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", default="/work/llama.cpp-b6673", help="llama.cpp source tree (models/)")
    ap.add_argument("--gguf", help="vocab GGUF (default: LLAMA_CPP/models/ggml-vocab-falcon.gguf)")
    ap.add_argument("--out", required=True, help="tokenizer.json to write")
    ap.add_argument("--no-digits", action="store_true", help="experiment: drop the Digits pre-tokenizer step")
    ap.add_argument("--post-processor", choices=["null", "bytelevel"], default="null",
                    help="experiment: post_processor null (default) or ByteLevel")
    args = ap.parse_args()

    gguf_path = args.gguf or os.path.join(args.llama_cpp, "models", "ggml-vocab-falcon.gguf")
    g = read_gguf(gguf_path)
    tj = build(g, digits=not args.no_digits, post_processor=args.post_processor)
    n_special = len(tj["added_tokens"])
    if g["eos"] is not None and not any(t["id"] == g["eos"] for t in tj["added_tokens"]):
        raise SystemExit(f"eos id {g['eos']} is not a control token")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        json.dump(tj, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: {len(g['tokens'])} tokens ({n_special} special), "
          f"{len(g['merges'])} merges, bos={g['bos']} eos={g['eos']}")


if __name__ == "__main__":
    main()

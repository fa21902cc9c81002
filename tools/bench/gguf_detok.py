#!/usr/bin/env python3
"""Prints token ids as the text llama.cpp prints for them, from a GGUF file's vocabulary.

    gguf_detok.py MODEL.gguf ID...

NORMAL pieces with their U+2581 as spaces, BYTE pieces <0xNN> as their byte, USER_DEFINED as
written, CONTROL / UNKNOWN / UNUSED as nothing (llama-cli's output without special tokens).
tools/bench/compare.sh uses it to compare wormchat's greedy token ids with llama-cli's text.
Needs gguf-py on PYTHONPATH (the llama.cpp tree's gguf-py).
"""
import sys

import gguf


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: gguf_detok.py MODEL.gguf ID...")
    reader = gguf.GGUFReader(sys.argv[1])

    def array(key):
        field = reader.fields[key]
        return [field.parts[i] for i in field.data]

    tokens = [bytes(t).decode("utf-8") for t in array("tokenizer.ggml.tokens")]
    types = [int(t[0]) for t in array("tokenizer.ggml.token_type")]
    out = bytearray()
    for arg in sys.argv[2:]:
        i = int(arg)
        if not 0 <= i < len(tokens):
            sys.exit(f"gguf_detok.py: token id {i} is outside the vocabulary of {len(tokens)}")
        text, kind = tokens[i], types[i]
        if kind == 1:
            out += text.replace("\u2581", " ").encode("utf-8")
        elif kind == 6:
            out.append(int(text[3:-1], 16))
        elif kind == 4:
            out += text.encode("utf-8")
    sys.stdout.buffer.write(bytes(out))


if __name__ == "__main__":
    main()

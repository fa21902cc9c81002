#!/usr/bin/python3
"""Writes the vocabulary-only GGUF files of tests/fixtures/tokenizer/gguf/ (tokenizer.ggml.* keys
and general.architecture, no tensors: as llama.cpp's own models/ggml-vocab-*.gguf), from the
tokenizers already committed beside them, with llama.cpp b6673's gguf-py:

    PYTHONPATH=LLAMA_CPP/gguf-py:tools/python /usr/bin/python3 tools/tokenizer/make_gguf_vocabs.py

Byte-level BPE files are written as convert_hf_to_gguf.py writes a tokenizer.json
(tools/python/to_gguf.py's add_bpe_vocab); the SPM one as to_gguf.py writes tokenizer.model.
falcon.gguf (Falcon's 65k vocabulary) is packed as falcon.gguf.tar.xz (tests/CMakeLists.txt unpacks
it). tools/tokenizer/gguf_expected.py then records llama-tokenize's ids for each file.
"""

import os
import sys
import tarfile
import tempfile

import gguf
import to_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOK = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
OUT = os.path.join(TOK, "gguf")


def writer(path, name):
    w = gguf.GGUFWriter(path, "falcon")
    w.add_name(name)
    return w


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bpe(name, tokenizer_json, pre, add_bos=None, add_eos=None):
    path = os.path.join(OUT, name + ".gguf")
    w = writer(path, name)
    to_gguf.add_bpe_vocab(w, tokenizer_json, None, pre, add_bos)
    if add_eos is not None:
        w.add_add_eos_token(add_eos)
    finish(w)
    return path


def spm(name):
    path = os.path.join(OUT, name + ".gguf")
    w = writer(path, name)
    pieces = to_gguf.sentencepiece_pieces(os.path.join(TOK, "tokenizer.model"))
    # Two added tokens as convert_hf_to_gguf.py writes tokenizer_config.json's: a control one and
    # a user-defined one (score -1000).
    pieces += [("<|im_start|>", -1000.0, 3), ("<ud>", -1000.0, 4)]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([p[0] for p in pieces])
    w.add_token_scores([p[1] for p in pieces])
    w.add_token_types([p[2] for p in pieces])
    w.add_unk_token_id(next(i for i, p in enumerate(pieces) if p[2] == 2))
    w.add_bos_token_id(next(i for i, p in enumerate(pieces) if p[0] == "<s>"))
    w.add_eos_token_id(next(i for i, p in enumerate(pieces) if p[0] == "</s>"))
    finish(w)
    return path


def main():
    os.makedirs(OUT, exist_ok=True)
    toy = os.path.join(TOK, "toy_bytelevel", "tokenizer.json")
    falcon3 = os.path.join(TOK, "toy_falcon3", "tokenizer.json")
    written = [
        bpe("bytelevel_default", toy, "default"),
        bpe("bytelevel_gpt-2", toy, "gpt-2", add_bos=True, add_eos=True),
        bpe("bytelevel_falcon", toy, "falcon"),
        bpe("bytelevel_llama3", toy, "llama3"),
        bpe("toy_falcon3", falcon3, "falcon3"),
        bpe("toy_falcon3_nobos", falcon3, "falcon3", add_bos=False),
        spm("spm"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(os.path.join(TOK, "falcon", "tokenizer.json.tar.xz")) as t:
            t.extractall(tmp)
        path = bpe("falcon", os.path.join(tmp, "tokenizer.json"), "falcon")
    with tarfile.open(path + ".tar.xz", "w:xz", preset=9) as t:
        info = t.gettarinfo(path, arcname="falcon.gguf")
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        with open(path, "rb") as f:
            t.addfile(info, f)
    os.remove(path)
    written.append(path + ".tar.xz")
    for p in written:
        print(f"make_gguf_vocabs.py: wrote {os.path.relpath(p, ROOT)} ({os.path.getsize(p)} bytes)")


if __name__ == "__main__":
    main()

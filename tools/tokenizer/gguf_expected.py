#!/usr/bin/python3
"""Records llama.cpp b6673's llama-tokenize ids for each vocabulary-only GGUF file of
tests/fixtures/tokenizer/gguf/ (written by make_gguf_vocabs.py) as NAME.expected.jsonl, the
reference tests/tokenizer/gguf_tokenizer_test.cpp checks wormchat's GGUF tokenizer against:

    /usr/bin/python3 tools/tokenizer/gguf_expected.py [LLAMA_TOKENIZE]

LLAMA_TOKENIZE defaults to build-llama/llama.cpp-b6673/build/bin/llama-tokenize (built by
tools/bench/llama-cpp.sh). Each input is written to a file and run as

    llama-tokenize -m FILE.gguf -f INPUT --no-escape --ids --log-disable [FLAGS]

One JSON object a line: {"text": ...} or {"hex": ...} (raw bytes, for invalid UTF-8), "flags"
(the extra llama-tokenize flags), and "ids" (its printed list), or "crash": true where
llama-tokenize dies (an SPM byte without a token). Inputs: every case of corpus.json (and
corpus_falcon3.json for the Falcon3 toys) with llama-tokenize's defaults, the special-token cases
below with each flag set, and for falcon.gguf llama.cpp's own models/ggml-vocab-falcon.gguf.inp
cases (falcon/llama_cpp_vocab.inp) with --no-bos --no-parse-special.
"""

import json
import tarfile
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOK = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
GGUF = os.path.join(TOK, "gguf")

FLAG_SETS = [[], ["--no-bos"], ["--no-parse-special"], ["--no-bos", "--no-parse-special"]]

# Special and user-defined tokens written in text, in every vocabulary's spelling.
SPECIAL_CASES = [
    "<|endoftext|>",
    "Hello<|endoftext|>world",
    "a<|endoftext|><|endoftext|>b",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    " <|im_start|> spaced ",
    "<s>Hello</s> world",
    "<s> x",
    "<ud>a<ud>b <ud> c",
    "Hello world",
    " Hello world",
    "  leading spaces",
    "<|endoftext",
    "<|system|>\nBe brief.\n<|user|>\nWhat is 12345?\n<|assistant|>\n",
    ">>TITLE<<Hello>>ABSTRACT<<",
    "\u3000\u00a0full-width and nbsp\u2028line",
    "it's I'M we'LL they'Re 'ſ",
    "\U0001F600\U0001F468\u200d\U0001F469\u200d\U0001F467 emoji",
    "\u0645\u0631\u062d\u0628\u0627 \u0928\u092e\u0938\u094d\u0924\u0947 \u4f60\u597d \ud55c\uad6d\uc5b4 \u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439",
    "123 4567 89012345 \u0661\u0662\u0663 \u00bd\u2460",
    "tabs\t\tand\r\nCRLF\n\n\nlines   \n  ",
    "ＡＢ Hello world spaced  words",
]


def case_bytes(case):
    return bytes.fromhex(case["hex"]) if "hex" in case else case["text"].encode("utf-8")


def run(tool, model, data, flags):
    with tempfile.NamedTemporaryFile(suffix=".txt") as f:
        f.write(data)
        f.flush()
        p = subprocess.run([tool, "-m", model, "-f", f.name, "--no-escape", "--ids",
                            "--log-disable"] + flags, capture_output=True)
    if p.returncode != 0:
        return None
    line = p.stdout.decode().strip().splitlines()[-1]
    return json.loads(line)


def corpus(name):
    with open(os.path.join(TOK, name), encoding="utf-8") as f:
        return json.load(f)


def falcon_inp():
    with open(os.path.join(TOK, "falcon", "llama_cpp_vocab.inp"), "rb") as f:
        text = f.read().decode("utf-8")
    return text.split("\n__ggml_vocab_test__\n")[:-1]


def record(tool, name, model):
    cases = [(c, []) for c in corpus("corpus.json")]
    if "falcon3" in name:
        cases += [(c, []) for c in corpus("corpus_falcon3.json")]
    cases += [({"text": t}, flags) for t in SPECIAL_CASES for flags in FLAG_SETS]
    if name == "falcon":
        cases += [({"text": t}, ["--no-bos", "--no-parse-special"]) for t in falcon_inp()]
    out_path = os.path.join(GGUF, name + ".expected.jsonl")
    with open(out_path, "w", encoding="utf-8") as out:
        for case, flags in cases:
            rec = {k: case[k] for k in ("text", "hex") if k in case}
            rec["flags"] = flags
            ids = run(tool, model, case_bytes(case), flags)
            if ids is None:
                rec["crash"] = True
            else:
                rec["ids"] = ids
            out.write(json.dumps(rec, ensure_ascii=True) + "\n")
    print(f"gguf_expected.py: wrote {os.path.relpath(out_path, ROOT)} ({len(cases)} cases)")


def main():
    tool = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "build-llama", "llama.cpp-b6673", "build", "bin", "llama-tokenize")
    for fname in sorted(os.listdir(GGUF)):
        path = os.path.join(GGUF, fname)
        if fname.endswith(".gguf"):
            record(tool, fname[:-5], path)
        elif fname.endswith(".gguf.tar.xz"):
            with tempfile.TemporaryDirectory() as tmp:
                with tarfile.open(path) as t:
                    t.extractall(tmp)
                record(tool, fname[:-12], os.path.join(tmp, fname[:-7]))


if __name__ == "__main__":
    main()

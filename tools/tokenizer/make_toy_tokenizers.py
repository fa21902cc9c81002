#!/usr/bin/python3
"""Write small Hugging Face tokenizer.json files that exercise tokenizer components
Falcon's tokenizer does not use.

Each toy is a BPE model (a few hundred tokens) trained by a tiny deterministic
BPE trainer on the fixed TRAINING_TEXT below (not on the test corpus, so the
toys do not change when the corpus grows), wrapped in a different pipeline:

  toy_bytefallback  Llama/SentencePiece style. normalizer Sequence[Prepend "▁",
                    Replace " " -> "▁"]; no pre_tokenizer; BPE byte_fallback with
                    <0x00>..<0xFF> tokens, unk "<unk>", fuse_unk; merges written
                    as ["a", "b"] pairs (the format tokenizers >= 0.20 saves);
                    decoder Sequence[Replace, ByteFallback, Fuse, Strip];
                    TemplateProcessing "<s> $A" (pair "<s> $A <s> $B").
  toy_unk           normalizer Sequence[NFKC, Lowercase, Strip, Replace(Regex
                    \\s+ -> " ")]; pre_tokenizer Sequence[Whitespace, Digits
                    individual_digits]; BPE over printable ASCII with unk "[UNK]"
                    (fuse_unk false): everything else is [UNK]; decoder null
                    (tokens joined by spaces); TemplateProcessing
                    "[CLS] $A [SEP]" (pair "... $B:1 [SEP]:1").
  toy_suffix        normalizer Sequence[NFC, Strip(left only), Replace ’ -> '];
                    pre_tokenizer Sequence[WhitespaceSplit, Split(String) with
                    each behaviour Removed/Isolated/MergedWithPrevious/
                    MergedWithNext/Contiguous, and one with invert=true]; BPE
                    with continuing_subword_prefix "##" and end_of_word_suffix
                    "</w>", no unk (characters outside the vocabulary are
                    dropped); decoder Sequence[Replace "##" -> "", BPEDecoder].
  toy_bytelevel     GPT-2 style. normalizer NFKC; pre_tokenizer Sequence[Digits
                    individual_digits, Split("\\n", Isolated), ByteLevel
                    add_prefix_space=true use_regex=false]; byte-level BPE;
                    decoder ByteLevel; post_processor Sequence[ByteLevel,
                    TemplateProcessing "<|endoftext|> $A <|endoftext|>"].

Every toy has added tokens with different lstrip/rstrip/single_word/normalized
flags, special and non-special, some already in the model vocabulary (their id is
then the model's) and some new (ids after the model vocabulary, in order: that
is the id the tokenizers library assigns on load, whatever the JSON says).

Usage:
    python3 tools/tokenizer/make_toy_tokenizers.py [--out-dir tests/fixtures/tokenizer]
writes OUT_DIR/toy_*/tokenizer.json; then generate each hf_expected.json with
tools/tokenizer/hf_reference.mjs (see tests/fixtures/tokenizer/README.md), which
also checks that the library loads the file and gives every added token the id
written in it. Output is deterministic (UTF-8, 2-space indent, sorted ties).
"""

import argparse
import collections
import json
import os
import re
import unicodedata

TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. The cat sat on the mat, and the dog
sat on the log. Hello world! Hello, world. How are you? I'm fine, thanks; it's a
lovely day, isn't it? They're here, we've seen them, you'll see, he'd say so.
Don't stop. Won't stop! "Quoted text" and 'single quotes' (parentheses) [brackets]
{braces} <angles> a-b c_d e.f g!h i=j k::l well-known state-of-the-art e-mail
x_y_z foo.bar.baz wow!!! really?? ok... yes!! no!!! maybe.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 42 100 123 1234 2024 3.14 1,000,000 99%.
Caf\u00e9 na\u00efve fa\u00e7ade \u00c4pfel \u00fcber stra\u00dfe se\u00f1or \u00e9l\u00e8ve r\u00e9sum\u00e9 cr\u00e8me br\u00fbl\u00e9e.
\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u043a\u0430\u043a \u0434\u0435\u043b\u0430? \u0432\u044b \u0432 \u041c\u043e\u0441\u043a\u0432\u0435.
\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1. \u65e5\u672c\u8a9e \u4e2d\u6587 \ud55c\uad6d\uc5b4.
def main(args):
    for i in range(10):
        print("hello", i)
    return 0
int main() { return 0; }
the the the cat cat cathedral concatenate category catalog dog dogma
token tokens tokenizer tokenization merge merges merged merging byte bytes
this is a test of the tokenizer with some words that repeat: test testing tested
"""

SPIECE = "\u2581"  # ▁


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (HF ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def train_bpe(words, n_merges, prefix="", min_count=2):
    """words: Counter {tuple(symbols): count}. Returns (merges, new_tokens) in order.

    Most frequent adjacent pair first; ties broken by the smallest (a, b). A merge
    (a, b) makes a + b[len(prefix):], exactly as HF's BPE builds merged tokens.
    """
    words = [(list(w), c) for w, c in sorted(words.items())]
    merges, new_tokens = [], []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for syms, c in words:
            for a, b in zip(syms, syms[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        (a, b), count = best
        if count < min_count:
            break
        assert b.startswith(prefix)
        new = a + b[len(prefix):]
        merges.append((a, b))
        new_tokens.append(new)
        for syms, _ in words:
            i = 0
            while i < len(syms) - 1:
                if syms[i] == a and syms[i + 1] == b:
                    syms[i:i + 2] = [new]
                i += 1
    return merges, new_tokens


def added(id_, content, special, single_word=False, lstrip=False, rstrip=False, normalized=None):
    if normalized is None:
        normalized = not special
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


class Vocab:
    def __init__(self):
        self.ids = {}

    def add(self, tok):
        if tok not in self.ids:
            self.ids[tok] = len(self.ids)
        return self.ids[tok]

    def __len__(self):
        return len(self.ids)


def finish_added(vocab, specs):
    """specs: (content, special, flags) in order; model-vocab tokens keep their id,
    new ones get len(vocab), len(vocab)+1, ... in order (what tokenizers assigns)."""
    out, next_id = [], len(vocab)
    for content, special, flags in specs:
        if content in vocab.ids:
            id_ = vocab.ids[content]
        else:
            id_ = next_id
            next_id += 1
        out.append(added(id_, content, special, **flags))
    return out


def bpe_model(vocab, merges, pair_format=False, **opts):
    m = {
        "type": "BPE",
        "dropout": None,
        "unk_token": opts.get("unk_token"),
        "continuing_subword_prefix": opts.get("continuing_subword_prefix"),
        "end_of_word_suffix": opts.get("end_of_word_suffix"),
        "fuse_unk": opts.get("fuse_unk", False),
        "byte_fallback": opts.get("byte_fallback", False),
        "ignore_merges": False,
        "vocab": dict(vocab.ids),
        "merges": [[a, b] for a, b in merges] if pair_format else [f"{a} {b}" for a, b in merges],
    }
    return m


def template(single, pair, specials, vocab_ids):
    def seq(items):
        out = []
        for it in items:
            name, type_id = it.split(":")
            if name in ("$A", "$B"):
                out.append({"Sequence": {"id": name[1], "type_id": int(type_id)}})
            else:
                out.append({"SpecialToken": {"id": name, "type_id": int(type_id)}})
        return out
    return {
        "type": "TemplateProcessing",
        "single": seq(single.split()),
        "pair": seq(pair.split()),
        "special_tokens": {s: {"id": s, "ids": [vocab_ids[s]], "tokens": [s]} for s in specials},
    }


def split_pt(pattern, behavior, invert=False):
    return {"type": "Split", "pattern": {"String": pattern}, "behavior": behavior, "invert": invert}


def tokenizer_json(added_tokens, normalizer, pre_tokenizer, post_processor, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
            "decoder": decoder, "model": model}


def char_counts(words):
    c = collections.Counter()
    for w, n in words.items():
        for ch in w:
            c[ch] += n
    return c


# ---------------------------------------------------------------------------
def toy_bytefallback():
    text = SPIECE + TRAINING_TEXT.replace(" ", SPIECE)
    # SentencePiece-like words: split before each ▁ and at newlines.
    pieces = [p for p in re.split(r"(?=\u2581)|\n", text) if p]
    words = collections.Counter(tuple(p) for p in pieces)
    counts = char_counts(words)
    alphabet = sorted(ch for ch, n in counts.items() if n >= 4)  # rarer chars go to <0xXX>
    words = collections.Counter({w: n for w, n in words.items() if all(ch in alphabet for ch in w)})
    merges, new = train_bpe(words, 200)

    v = Vocab()
    for s in ("<unk>", "<s>", "</s>"):
        v.add(s)
    for b in range(256):
        v.add("<0x%02X>" % b)
    for ch in alphabet:
        v.add(ch)
    for t in new:
        v.add(t)
    specs = [
        ("<unk>", True, {}),
        ("<s>", True, {}),
        ("</s>", True, {}),
        ("[MASK]", True, {"lstrip": True, "rstrip": True}),
        ("<tool>", False, {"normalized": False}),
        ("cat", False, {"normalized": True, "single_word": True}),
        ("\u2581the", False, {"normalized": True}),  # already in the model vocab
        ("<0x41>", True, {}),                          # a byte token made special
    ]
    at = finish_added(v, specs)
    ids = {a["content"]: a["id"] for a in at}
    return tokenizer_json(
        at,
        {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPIECE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE},
        ]},
        None,
        template("<s>:0 $A:0", "<s>:0 $A:0 <s>:1 $B:1", ["<s>"], ids),
        {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPIECE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        bpe_model(v, merges, pair_format=True, unk_token="<unk>", fuse_unk=True, byte_fallback=True),
    )


def toy_unk():
    norm = unicodedata.normalize("NFKC", TRAINING_TEXT).lower()
    pieces = re.findall(r"[A-Za-z_0-9]+|[^\sA-Za-z_0-9]+", norm)  # ~ Whitespace (\w+|[^\w\s]+), ASCII only
    pieces = [p for piece in pieces for p in re.split(r"(?<=[0-9])|(?=[0-9])", piece) if p]  # Digits(individual)
    words = collections.Counter(tuple(p) for p in pieces if p.isascii())
    alphabet = sorted(ch for ch in char_counts(words) if " " < ch < "\x7f")
    merges, new = train_bpe(words, 180)

    v = Vocab()
    for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
        v.add(s)
    for ch in alphabet:
        v.add(ch)
    for t in new:
        v.add(t)
    specs = [
        ("[PAD]", True, {}),
        ("[UNK]", True, {}),
        ("[CLS]", True, {}),
        ("[SEP]", True, {}),
        ("[MASK]", True, {"lstrip": True}),                          # RoBERTa <mask> style
        ("cat", False, {"single_word": True, "normalized": True}),  # in vocab already? (then keeps id)
        ("<tool>", False, {"rstrip": True, "normalized": True}),
        ("MiXeD", False, {"normalized": True}),                      # content is normalized too -> "mixed"
        ("CaseKept", False, {"normalized": False}),
        ("new york", False, {"normalized": True}),                   # contains a space
    ]
    at = finish_added(v, specs)
    ids = {a["content"]: a["id"] for a in at}
    return tokenizer_json(
        at,
        {"type": "Sequence", "normalizers": [
            {"type": "NFKC"},
            {"type": "Lowercase"},
            {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
        ]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "Whitespace"},
            {"type": "Digits", "individual_digits": True},
        ]},
        template("[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", ["[CLS]", "[SEP]"], ids),
        None,
        bpe_model(v, merges, unk_token="[UNK]", fuse_unk=False),
    )


def toy_suffix():
    norm = unicodedata.normalize("NFC", TRAINING_TEXT).replace("\u2019", "'")
    pieces = norm.split()
    # approximate the Split steps for training: cut before '-', after '.', on '_', around "'" and '!' runs
    out = []
    for p in pieces:
        out += [q for q in re.split(r"(?=-)|(?<=\.)|_|(')|(!+)", p) if q]
    words = collections.Counter()
    for p in out:
        syms = []
        for i, ch in enumerate(p):
            s = ch if i == 0 else "##" + ch
            if i == len(p) - 1:
                s += "</w>"
            syms.append(s)
        words[tuple(syms)] += 1
    sym_counts = collections.Counter()
    for w, n in words.items():
        for s in w:
            sym_counts[s] += n
    base = {s for s, n in sym_counts.items() if n >= 2}
    words = collections.Counter({w: n for w, n in words.items() if all(s in base for s in w)})
    merges, new = train_bpe(words, 200, prefix="##")

    v = Vocab()
    # every form of every character in the base set, so any word made of known chars tokenizes
    chars = sorted({s.replace("##", "").replace("</w>", "") for s in base})
    for ch in chars:
        for form in (ch, "##" + ch, ch + "</w>", "##" + ch + "</w>"):
            v.add(form)
    for t in new:
        v.add(t)
    specs = [
        ("[MASK]", True, {"single_word": True, "rstrip": True}),
        ("<tool>", False, {"normalized": False}),
        ("::", False, {"normalized": False}),
        ("<sep>", True, {"lstrip": True, "rstrip": True, "single_word": True}),
        ("end", False, {"normalized": True, "lstrip": True}),
    ]
    at = finish_added(v, specs)
    return tokenizer_json(
        at,
        {"type": "Sequence", "normalizers": [
            {"type": "NFC"},
            {"type": "Strip", "strip_left": True, "strip_right": False},
            {"type": "Replace", "pattern": {"String": "\u2019"}, "content": "'"},
        ]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            split_pt("-", "MergedWithNext"),
            split_pt(".", "MergedWithPrevious"),
            split_pt("_", "Removed"),
            split_pt("'", "Isolated"),
            split_pt("!", "Contiguous"),
            split_pt("=", "MergedWithPrevious", invert=True),
        ]},
        None,
        {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "##"}, "content": ""},
            {"type": "BPEDecoder", "suffix": "</w>"},
        ]},
        bpe_model(v, merges, continuing_subword_prefix="##", end_of_word_suffix="</w>"),
    )


def toy_bytelevel():
    b2u = bytes_to_unicode()
    norm = unicodedata.normalize("NFKC", TRAINING_TEXT)
    words = collections.Counter()
    for line in re.split(r"(\n)", norm):
        for p in re.findall(r" ?[^\W\d_]+| ?[0-9]| ?[^\s\w]+|\s+(?!\S)|\s+|_", line):
            words[tuple(b2u[b] for b in p.encode("utf-8"))] += 1
    merges, new = train_bpe(words, 250)

    v = Vocab()
    for b in sorted(b2u, key=lambda b: ord(b2u[b])):
        v.add(b2u[b])
    for t in new:
        v.add(t)
    specs = [
        ("<|endoftext|>", True, {}),
        ("<|im_start|>", True, {"rstrip": True}),
        ("<|im_end|>", True, {"lstrip": True}),
        ("Hello", False, {"normalized": True}),                  # normalized: matched after NFKC
        ("world", False, {"single_word": True, "normalized": False}),
        ("\u0120the", False, {"normalized": False}),              # already a model token ("Ġthe")
        (" spaced ", False, {"normalized": False}),               # content with spaces
        ("\uff21\uff22", False, {"normalized": True}),            # fullwidth "ＡＢ": NFKC -> "AB"
    ]
    at = finish_added(v, specs)
    ids = {a["content"]: a["id"] for a in at}
    return tokenizer_json(
        at,
        {"type": "NFKC"},
        {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            split_pt("\n", "Isolated"),
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False},
        ]},
        {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            template("<|endoftext|>:0 $A:0 <|endoftext|>:0", "<|endoftext|>:0 $A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
                     ["<|endoftext|>"], ids),
        ]},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        bpe_model(v, merges),
    )


TOYS = {
    "toy_bytefallback": toy_bytefallback,
    "toy_unk": toy_unk,
    "toy_suffix": toy_suffix,
    "toy_bytelevel": toy_bytelevel,
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.normpath(os.path.join(here, "..", "..", "tests", "fixtures", "tokenizer")))
    args = ap.parse_args()
    for name, fn in TOYS.items():
        tj = fn()
        d = os.path.join(args.out_dir, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            json.dump(tj, f, ensure_ascii=False, indent=2)
            f.write("\n")
        m = tj["model"]
        print(f"wrote {path}: vocab {len(m['vocab'])}, merges {len(m['merges'])}, added {len(tj['added_tokens'])}")


if __name__ == "__main__":
    main()

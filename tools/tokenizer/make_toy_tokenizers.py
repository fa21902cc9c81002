#!/usr/bin/python3
"""Write small Hugging Face tokenizer.json files that exercise tokenizer components
Falcon's tokenizer does not use, and two of Falcon3's structure.

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
  toy_falcon3       Falcon3 (tiiuae/Falcon3-*-Instruct) as far as it is known
                    (docs/falcon3/README.md section 1): normalizer null;
                    pre_tokenizer Sequence[Split(Llama-3 regex, Isolated),
                    ByteLevel add_prefix_space=false use_regex=false]; byte-level
                    BPE with ignore_merges and whole-word tokens the merges do not
                    build; decoder ByteLevel; post_processor ByteLevel (adds no
                    BOS/EOS). Added tokens ids 0..30 at the front of the model
                    vocabulary: >>TITLE<< ... <|endoftext|> (11) ... >>UNUSED_n<<,
                    <|pad|> (30), special; 12 and 13 newline and tab in byte-level
                    form ("Ċ", "ĉ"), not special, normalized false and true.
                    Trained on TRAINING_TEXT plus FALCON3_TRAINING_TEXT.
  toy_falcon3_rawnl the same with ids 12 and 13 a raw "\n" and "\t" (in the model
                    vocabulary and as added-token content): the other shape the
                    real file could have.

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
        "ignore_merges": opts.get("ignore_merges", False),
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


# Falcon3-flavoured extra training text (toy_falcon3 only): the chat framing of
# Falcon3-*-Instruct's template, tabs, blank lines and CRLF.
FALCON3_TRAINING_TEXT = """\
<|system|>
You are a helpful friendly assistant Falcon3 from TII, try to follow instructions as much as possible.
<|user|>
How many hours in one day?
<|assistant|>
There are 24 hours in one day.<|endoftext|>
<|user|>
Write a function.
<|assistant|>
def f(x):
\tif x:
\t\treturn 1
\treturn 0

Done.\r\nThanks!\r\n
"""

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Oniguruma's \s (the White_Space property), which HF's regexes use.
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | \
    {chr(c) for c in range(0x2000, 0x200B)}


def llama3_pretokenize(text):
    """The pieces LLAMA3_PATTERN cuts `text` into (find_iter, Isolated), for training
    only: standard library, \\p{L} / \\p{N} by unicodedata category."""
    def is_l(ch):
        return unicodedata.category(ch).startswith("L")

    def is_n(ch):
        return unicodedata.category(ch).startswith("N")

    def is_s(ch):
        return ch in WHITE_SPACE

    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        j = None
        if ch == "'":  # (?i:'s|'t|'re|'ve|'m|'ll|'d); char by char, so "ſ" is an "s", "ß" no "ss"
            for suf in ("s", "t", "re", "ve", "m", "ll", "d"):
                if all(i + 1 + k < n and text[i + 1 + k].casefold() == c for k, c in enumerate(suf)):
                    j = i + 1 + len(suf)
                    break
        if j is None:  # [^\r\n\p{L}\p{N}]?\p{L}+
            prefix = ch not in "\r\n" and not is_n(ch) and i + 1 < n and is_l(text[i + 1])
            k = i if is_l(ch) else i + 1 if prefix else None
            if k is not None:
                j = k
                while j < n and is_l(text[j]):
                    j += 1
        if j is None and is_n(ch):  # \p{N}{1,3}
            j = i
            while j < n and j - i < 3 and is_n(text[j]):
                j += 1
        if j is None:  # ' ?[^\s\p{L}\p{N}]+[\r\n]*'
            k = i + 1 if ch == " " else i
            m = k
            while m < n and not (is_s(text[m]) or is_l(text[m]) or is_n(text[m])):
                m += 1
            if m > k:
                while m < n and text[m] in "\r\n":
                    m += 1
                j = m
        if j is None and is_s(ch):
            run = i
            while run < n and is_s(text[run]):
                run += 1
            last_nl = max((q for q in range(i, run) if text[q] in "\r\n"), default=None)
            if last_nl is not None:      # \s*[\r\n]+
                j = last_nl + 1
            elif run == n or run - i == 1:  # \s+(?!\S) at the end, else \s+
                j = run
            else:                         # \s+(?!\S): all but the last space
                j = run - 1
        assert j is not None and j > i, (text, i)
        out.append(text[i:j])
        i = j
    return out


def bpe_apply(word, merges):
    """HF BPE without ignore_merges: symbols of `word` merged by rank."""
    rank = {m: r for r, m in enumerate(merges)}
    syms = list(word)
    while len(syms) > 1:
        best = min(((rank.get((a, b), 1 << 30), k) for k, (a, b) in enumerate(zip(syms, syms[1:]))))
        if best[0] == 1 << 30:
            break
        k = best[1]
        syms[k:k + 2] = [syms[k] + syms[k + 1]]
    return syms


def toy_falcon3(raw_controls=False):
    """raw_controls: ids 12 and 13 are a raw "\n" and "\t" (vocabulary entry and added
    token content) instead of their byte-level forms: the other shape Falcon3's file
    could have (toy_falcon3_rawnl). They are then matched before pre-tokenization, so a
    newline never reaches BPE, and "Ċ"/"ĉ" are ordinary alphabet tokens."""
    b2u = bytes_to_unicode()
    nl, tab = ("\n", "\t") if raw_controls else (b2u[ord("\n")], b2u[ord("\t")])
    words = collections.Counter()
    for p in llama3_pretokenize(TRAINING_TEXT + FALCON3_TRAINING_TEXT):
        words[tuple(b2u[b] for b in p.encode("utf-8"))] += 1
    merges, new = train_bpe(words, 300)

    # Ids 0.. are Falcon3's added tokens (third-party list in docs/falcon3/README.md
    # section 1.3): in the model vocabulary too, so they keep their ids. 12 and 13 are
    # newline and tab in byte-level form ("Ċ", "ĉ"), which the byte-level alphabet
    # below then does not repeat: "\n" pre-tokenized and byte-level mapped is "Ċ" = 12.
    # (That 12 and 13 are these two is a guess: the list skips them.)
    front = [">>TITLE<<", ">>ABSTRACT<<", ">>INTRODUCTION<<", ">>SUMMARY<<", ">>COMMENT<<",
             ">>ANSWER<<", ">>QUESTION<<", ">>DOMAIN<<", ">>EMAIL_ADDRESS<<", ">>IP_ADDRESS<<",
             "<|startoftext|>", "<|endoftext|>", nl, tab]
    front += [">>IP_ADDRESS_%d<<" % d for d in range(10)] + [">>PASSWORD<<", ">>KEY<<"]
    front += [">>UNUSED_%d<<" % i for i in range(len(front), 30)] + ["<|pad|>"]
    v = Vocab()
    for t in front:
        v.add(t)
    for b in sorted(b2u, key=lambda b: ord(b2u[b])):
        v.add(b2u[b])
    for t in new:
        v.add(t)
    # Whole pre-tokens the merges do not build (ignore_merges: BPE returns the vocab
    # token for a pre-token that is one, before any merge). The texts that hit them are
    # in corpus_falcon3.json.
    whole = ["Hello", "\u0120helpful", "\u0120assistant", "\u0120Falcon", "\u0120instructions",
             "'LL", "'\u00c5\u00bf", "\u010a\u010a\u010a", "\u0109\u0109"]  # ... "'ſ", "\n\n\n", "\t\t"
    for w in whole:
        assert all(ch in v.ids for ch in w), w
        assert bpe_apply(w, merges) != [w], f"the merges already build {w!r}"
        v.add(w)
    specs = [(t, t not in (nl, tab), {}) for t in front]
    specs[12] = (nl, False, {"normalized": False})  # "Ċ" (or "\n")
    specs[13] = (tab, False, {"normalized": True})  # "ĉ" (or "\t")
    at = finish_added(v, specs)
    assert [a["id"] for a in at] == list(range(len(front)))
    return tokenizer_json(
        at,
        None,
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        bpe_model(v, merges, ignore_merges=True),
    )


TOYS = {
    "toy_bytefallback": toy_bytefallback,
    "toy_unk": toy_unk,
    "toy_suffix": toy_suffix,
    "toy_bytelevel": toy_bytelevel,
    "toy_falcon3": toy_falcon3,
    "toy_falcon3_rawnl": lambda: toy_falcon3(raw_controls=True),
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

"""Preparation step: corpus (data.py) -> tokenizer + encoded arrays (tokenizer.py).

Writes into the work dir:
  corpus/train.jsonl, corpus/val.jsonl   one conversation per line: {"turns": [[q, a], ...]}
  tokenizer.model / tokenizer.vocab      SentencePiece BPE
  train.npz, val.npz                     tokens [N] int32, mask [N] uint8, starts [n+1] int64
  chat_format.json                       copy of assets/chat_format.json
  meta.json                              settings fingerprint + data sizes
A later run with the same data settings reuses these files (needed for --resume).
"""

import json
import os
import shutil
import time
import types

import sentencepiece as spm

from wormref import REPO_ROOT

from . import data, tokenizer

CHAT_FORMAT = os.path.join(REPO_ROOT, "assets", "chat_format.json")

DATA_KEYS = ("seed", "val_percent", "tier_b", "max_fortunes", "max_fortune_chars",
             "greeting_copies", "multi_turn", "vocab")
PREP_VERSION = 1


def fingerprint(args):
    d = {k: getattr(args, k) for k in DATA_KEYS}
    d["version"] = PREP_VERSION
    with open(CHAT_FORMAT) as f:
        d["chat_format"] = json.load(f)
    return d


def load_meta(work):
    with open(os.path.join(work, "meta.json")) as f:
        return json.load(f)


def prepare(args, log):
    """-> meta dict (paths, fingerprint, sizes); reuses an up-to-date work dir."""
    work = args.work
    fp = fingerprint(args)
    meta_path = os.path.join(work, "meta.json")
    if os.path.exists(meta_path):
        meta = load_meta(work)
        if meta.get("fingerprint") == fp and all(
                os.path.exists(os.path.join(work, n))
                for n in ("tokenizer.model", "train.npz", "val.npz", "chat_format.json")):
            log(f"reusing prepared data in {work}")
            return meta
    t0 = time.time()
    cfg = types.SimpleNamespace(wordnet_dir=data.WORDNET_DIR, fortune_dir=data.FORTUNE_DIR,
                                seed=args.seed, val_percent=args.val_percent,
                                tier_b=args.tier_b, max_fortunes=args.max_fortunes,
                                max_fortune_chars=args.max_fortune_chars,
                                greeting_copies=args.greeting_copies,
                                multi_turn=args.multi_turn)
    train_c, val_c, stats = data.build_corpus(cfg)
    os.makedirs(os.path.join(work, "corpus"), exist_ok=True)
    for name, convs in (("train", train_c), ("val", val_c)):
        with open(os.path.join(work, "corpus", name + ".jsonl"), "w") as f:
            for conv in convs:
                f.write(json.dumps({"turns": conv}, ensure_ascii=False) + "\n")
    log(f"corpus: {stats['examples_train']} train / {stats['examples_val']} val examples "
        f"({time.time() - t0:.1f}s)")

    shutil.copyfile(CHAT_FORMAT, os.path.join(work, "chat_format.json"))
    fmt = tokenizer.ChatFormat(CHAT_FORMAT)
    t1 = time.time()
    model_path = tokenizer.train_tokenizer(train_c, fmt, os.path.join(work, "tokenizer"),
                                           args.vocab, args.seed)
    sp = spm.SentencePieceProcessor(model_file=model_path)
    log(f"tokenizer: vocab {sp.get_piece_size()} ({time.time() - t1:.1f}s)")

    for name, convs in (("train", train_c), ("val", val_c)):
        toks, mask, starts = tokenizer.encode_conversations(sp, convs, fmt)
        tokenizer.save_encoded(os.path.join(work, name + ".npz"), toks, mask, starts)
        stats[f"tokens_{name}"] = int(len(toks))
        stats[f"loss_tokens_{name}"] = int(mask.sum())
        stats[f"text_bytes_{name}"] = sum(len(q.encode()) + len(a.encode())
                                          for conv in convs for q, a in conv)
    log("tokens: train {tokens_train} ({loss_tokens_train} answer), "
        "val {tokens_val} ({loss_tokens_val} answer)".format(**stats))
    meta = {"fingerprint": fp, "stats": stats, "bos_id": sp.bos_id(), "eos_id": sp.eos_id(),
            "vocab_size": sp.get_piece_size(), "prep_seconds": round(time.time() - t0, 1)}
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
    return meta

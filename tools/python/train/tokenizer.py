"""Tokenizer step: train a SentencePiece model on the training conversations and encode
conversations into flat token / loss-mask arrays exactly as the C++ runtime does.

Runtime token layout of one conversation (assets/chat_format.json):
    [bos] + for each turn: encode(user_prefix + q + user_suffix + assistant_prefix)
                           + encode(answer) + [eos]
Each encode() is a separate default SentencePiece call (dummy prefix "▁" included).

SentencePiece settings (Llama-style, so the runtime needs no normaliser tables):
BPE, identity normalisation, no whitespace collapsing, byte_fallback, split_digits,
unk 0 / bos 1 / eos 2 / no pad, character_coverage 1.0, every sentence used (no
sampling, so the result is deterministic), 1 thread.
The trainer is fed the exact strings that get encoded (prompt segments contain the
"\n" of user_suffix, so "\n" and "?\nAssistant:" pieces are learned).
"""

import json
import os

import numpy as np
import sentencepiece as spm


class ChatFormat:
    def __init__(self, path):
        with open(path) as f:
            d = json.load(f)
        self.raw = d
        self.add_bos = bool(d["add_bos"])
        self.user_prefix, self.user_suffix = d["user_prefix"], d["user_suffix"]
        self.assistant_prefix = d["assistant_prefix"]
        if d.get("end_of_turn") != "eos":
            raise ValueError("only end_of_turn == 'eos' is supported")

    def prompt(self, question):
        return self.user_prefix + question + self.user_suffix + self.assistant_prefix


def segments(convs, fmt):
    """Every string the runtime would encode: prompt and answer of each turn."""
    for conv in convs:
        for q, a in conv:
            yield fmt.prompt(q)
            yield a


def train_tokenizer(convs, fmt, model_prefix, vocab_size, seed):
    """Train BPE SentencePiece on the training conversations -> model_prefix + ".model".
    `seed` is recorded by the caller only: with input_sentence_size=0 BPE training uses no
    randomness, so the result depends on the corpus alone."""
    out_dir = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(out_dir, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(out_dir)            # relative prefix: the .model does not embed the work path
    try:
        _train(convs, fmt, os.path.basename(model_prefix), vocab_size)
    finally:
        os.chdir(cwd)
    return model_prefix + ".model"


def _train(convs, fmt, prefix, vocab_size):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(segments(convs, fmt))),
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=1.0,
        byte_fallback=True,
        split_digits=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        allow_whitespace_only_pieces=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        max_sentence_length=8192,
        input_sentence_size=0,          # use every sentence (no sampling)
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
    )


def encode_conversations(sp, convs, fmt):
    """-> (tokens [N] int32, loss_mask [N] uint8, starts [n_conv + 1] int64).

    loss_mask[i] = 1 iff token i belongs to an answer or is the turn's eos, i.e. the
    tokens the model has to produce. starts[k]:starts[k+1] is conversation k.
    """
    bos, eos = sp.bos_id(), sp.eos_id()
    toks, mask, starts = [], [], [0]
    prompts = [fmt.prompt(q) for conv in convs for q, _ in conv]
    answers = [a for conv in convs for _, a in conv]
    p_ids = sp.encode(prompts)                 # batch encode: same as one call per string
    a_ids = sp.encode(answers)
    k = 0
    for conv in convs:
        if fmt.add_bos:
            toks.append(bos)
            mask.append(0)
        for _ in conv:
            toks.extend(p_ids[k])
            mask.extend([0] * len(p_ids[k]))
            toks.extend(a_ids[k])
            toks.append(eos)
            mask.extend([1] * (len(a_ids[k]) + 1))
            k += 1
        starts.append(len(toks))
    return (np.asarray(toks, dtype=np.int32), np.asarray(mask, dtype=np.uint8),
            np.asarray(starts, dtype=np.int64))


def save_encoded(path, tokens, mask, starts):
    np.savez(path, tokens=tokens, mask=mask, starts=starts)


def load_encoded(path):
    z = np.load(path)
    return z["tokens"], z["mask"], z["starts"]

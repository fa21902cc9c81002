#!/usr/bin/python3
"""Ask an exported model questions in Python (reference for `wormchat chat`).

    /usr/bin/python3 tools/python/sample_model.py --model assets/default-model \
        "What is a falcon?" "Define harbor."

Greedy decoding; multi-turn: all questions form one conversation when --conversation
is given, otherwise each is asked in a fresh conversation. Token layout is the one in
the model's chat_format.json (bos + per turn: prompt tokens, answer tokens, eos).
"""

import argparse
import os

import sentencepiece as spm
import torch

from train import tokenizer
from wormref import falcon_ref

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                                   "assets", "default-model"))
    p.add_argument("--max-new", type=int, default=96)
    p.add_argument("--conversation", action="store_true")
    p.add_argument("questions", nargs="+")
    a = p.parse_args()
    torch.set_num_threads(1)
    _, model = falcon_ref.load_checkpoint(a.model)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "tokenizer.model"))
    fmt = tokenizer.ChatFormat(os.path.join(a.model, "chat_format.json"))
    ids = []
    for q in a.questions:
        if not a.conversation or not ids:
            ids = [sp.bos_id()] if fmt.add_bos else []
        ids += sp.encode(fmt.prompt(q))                      # [t]
        out = []
        with torch.no_grad():
            for _ in range(a.max_new):
                logits = model(torch.tensor([ids]))          # [1, t, V]
                nxt = int(logits[0, -1].argmax())
                ids.append(nxt)
                if nxt == sp.eos_id():
                    break
                out.append(nxt)
        print(f"User: {q}\nAssistant: {sp.decode(out).strip()}\n", flush=True)


if __name__ == "__main__":
    main()

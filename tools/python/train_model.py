#!/usr/bin/python3
"""Train wormchat's default chat model from scratch: data -> tokenizer -> model -> export.

    /usr/bin/python3 tools/python/train_model.py --out assets/default-model [--threads N]
                                               [--minutes M] [--seed S] [--resume]

Steps (work files go to --work, default build/train-work/, never into the repo):
  1. train/data.py       WordNet 3.0 + fortunes + greetings -> chat conversations (train/val)
  2. train/tokenizer.py  SentencePiece BPE on the training conversations, then encode
  3. train/loop.py       Falcon-40B-shaped model (wormref/falcon_ref.py), AdamW, warmup +
                         cosine, loss on answer tokens only, packed fixed-length rows, seeded
                         shuffles; the number of steps is chosen from the --minutes budget
                         after timing the first steps; periodic checkpoints (--resume),
                         validation, samples
  4. export              config.json, model.safetensors, tokenizer.model, chat_format.json,
                         training.json into --out

Speed: Debian's torch uses the generic libblas.so.3 (reference BLAS unless an optimised
one is selected); if OpenBLAS is installed (libopenblas0-pthread) this script re-executes
itself with it on LD_LIBRARY_PATH, ~9x faster, without touching the system default.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
REEXEC_FLAG = "WORMCHAT_TRAIN_REEXEC"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(REPO, "assets", "default-model"))
    p.add_argument("--work", default=os.path.join(REPO, "build", "train-work"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--minutes", type=float, default=110.0,
                   help="wall-clock budget for the whole run (data + training + export)")
    p.add_argument("--steps", type=int, default=0, help="fixed step count (overrides --minutes)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--resume", action="store_true", help="continue from --work/ckpt.pt")
    p.add_argument("--export-only", action="store_true",
                   help="export the model in --work/ckpt.pt to --out and exit")
    p.add_argument("--no-openblas", action="store_true", help="do not re-exec with OpenBLAS")
    g = p.add_argument_group("model")
    g.add_argument("--layers", type=int, default=3)
    g.add_argument("--ffn", type=int, default=2048)
    g.add_argument("--vocab", type=int, default=4096)
    g.add_argument("--max-pos", type=int, default=512)
    g = p.add_argument_group("optimisation")
    g.add_argument("--seq", type=int, default=256, help="tokens per packed row (T)")
    g.add_argument("--batch", type=int, default=16, help="rows per step (B)")
    g.add_argument("--lr", type=float, default=1.5e-3)
    g.add_argument("--min-lr-ratio", type=float, default=0.1)
    g.add_argument("--warmup", type=int, default=60)
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--clip", type=float, default=1.0)
    g = p.add_argument_group("data")
    g.add_argument("--val-percent", type=float, default=2.0)
    g.add_argument("--tier-b", type=int, default=12000,
                   help="rare single-word WordNet lemmas to sample (one question each)")
    g.add_argument("--max-fortunes", type=int, default=3000)
    g.add_argument("--max-fortune-chars", type=int, default=300)
    g.add_argument("--greeting-copies", type=int, default=4)
    g.add_argument("--multi-turn", type=float, default=0.25)
    g = p.add_argument_group("logging")
    g.add_argument("--log-every", type=int, default=10)
    g.add_argument("--eval-every", type=int, default=100)
    g.add_argument("--eval-rows", type=int, default=64, help="val rows for periodic evals")
    g.add_argument("--ckpt-minutes", type=float, default=10.0)
    return p.parse_args(argv)


def maybe_reexec(args, argv):
    """Re-run this script with OpenBLAS and thread env vars set (before torch loads)."""
    if os.environ.get(REEXEC_FLAG) == "1":
        return
    env = dict(os.environ)
    env[REEXEC_FLAG] = "1"
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(args.threads)
    if not args.no_openblas and os.path.isdir(OPENBLAS_DIR):
        env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (":" + env["LD_LIBRARY_PATH"]
                                                 if env.get("LD_LIBRARY_PATH") else "")
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + argv, env)


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def fmt_time(s):
    s = int(max(0, s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    maybe_reexec(args, argv)
    t_start = time.time()

    import torch

    from train import loop, prep

    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    log(f"torch {torch.__version__}, threads {args.threads}, "
        f"LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')}, work {args.work}")

    if args.export_only:
        state = loop.load_ckpt(args.work)
        model, cfg_dict = loop.build_model(state["cfg_dict"], args.seed)
        model.load_state_dict(state["model"])
        loop.export(args.out, model, cfg_dict, prep.load_meta(args.work), state, args.work,
                    partial=state["step"] < state["total_steps"])
        return 0

    meta = prep.prepare(args, log)                      # data + tokenizer + encoded arrays
    state = loop.train(args, meta, log, t_start)
    model, cfg_dict = loop.build_model(state["cfg_dict"], args.seed)
    model.load_state_dict(state["model"])
    loop.export(args.out, model, cfg_dict, meta, state, args.work,
                partial=state["step"] < state["total_steps"])
    log(f"done in {fmt_time(time.time() - t_start)} (this session); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

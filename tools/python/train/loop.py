"""Training loop, evaluation, checkpoints and export for tools/python/train_model.py.

Shape legend: B rows per step, T tokens per row, C hidden, V vocab, N answer tokens
in a batch (the only positions that get logits and loss).
"""

import json
import math
import os
import shutil
import signal
import statistics
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

from wormref import falcon_ref

from . import tokenizer

CKPT = "ckpt.pt"


# ------------------------------------------------------------------ model

def model_config(args, meta):
    """HF Falcon config.json dict: Falcon-40B layout (new decoder architecture, grouped KV,
    ln_attn + ln_mlp, parallel attention/MLP, RoPE, no biases, tied LM head), scaled down."""
    return {
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_kv_heads": 2,
        "num_hidden_layers": args.layers,
        "ffn_hidden_size": args.ffn,
        "vocab_size": meta["vocab_size"],
        "new_decoder_architecture": True,
        "num_ln_in_parallel_attn": 2,
        "parallel_attn": True,
        "multi_query": False,
        "bias": False,
        "alibi": False,
        "activation": "gelu",
        "layer_norm_epsilon": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": args.max_pos,
        "tie_word_embeddings": True,
        "bos_token_id": meta["bos_id"],
        "eos_token_id": meta["eos_id"],
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
    }


def build_model(cfg_dict, seed):
    """-> (Falcon with seeded init, cfg_dict). Residual output projections get the
    GPT-2 1/sqrt(2L) scaling on top of N(0, 0.02)."""
    cfg = falcon_ref.FalconConfig.from_dict(cfg_dict)
    model = falcon_ref.Falcon(cfg)
    model.init_weights(0.02, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for layer in model.transformer.h:
            layer.self_attention.dense.weight.mul_(1 / math.sqrt(2 * cfg.num_hidden_layers))
            layer.mlp.dense_4h_to_h.weight.mul_(1 / math.sqrt(2 * cfg.num_hidden_layers))
    return model, cfg_dict


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------ data

class Packer:
    """Rows of T+1 tokens cut (stride T) from all conversations concatenated in a seeded
    per-epoch order. Global row g -> epoch g // rows_per_epoch, so a step index fully
    determines its batch (resume needs nothing else)."""

    def __init__(self, path, T, seed, shuffle=True):
        self.tokens, self.mask, self.starts = tokenizer.load_encoded(path)
        self.T, self.seed, self.shuffle = T, seed, shuffle
        self.rows_per_epoch = (len(self.tokens) - 1) // T
        self._epoch, self._stream = None, None

    def _epoch_stream(self, e):
        if self._epoch != e:
            n = len(self.starts) - 1
            order = (np.random.default_rng(self.seed * 1000 + e).permutation(n)
                     if self.shuffle else np.arange(n))
            s, t = self.starts[:-1][order], self.starts[1:][order]
            idx = np.concatenate([np.arange(a, b) for a, b in zip(s, t)])
            self._stream = (self.tokens[idx], self.mask[idx])
            self._epoch = e
        return self._stream

    def rows(self, g0, n):
        """Rows g0..g0+n-1 -> x [n, T] long, y [n, T] long, m [n, T] bool (loss on y)."""
        xs, ys, ms = [], [], []
        for g in range(g0, g0 + n):
            toks, mask = self._epoch_stream(g // self.rows_per_epoch)
            r = (g % self.rows_per_epoch) * self.T
            xs.append(toks[r:r + self.T])
            ys.append(toks[r + 1:r + self.T + 1])
            ms.append(mask[r + 1:r + self.T + 1])
        return (torch.from_numpy(np.stack(xs).astype(np.int64)),
                torch.from_numpy(np.stack(ys).astype(np.int64)),
                torch.from_numpy(np.stack(ms).astype(bool)))


def masked_loss(model, x, y, m):
    """x, y [B, T], m [B, T] -> (sum of CE over answer tokens, N). Logits only for the
    N masked positions: h [B, T, C] -> h[m] [N, C] -> [N, V]."""
    h = model.transformer(x)                                   # [B, T, C]
    logits = F.linear(h[m], model.output_weight)               # [N, V]
    return F.cross_entropy(logits, y[m], reduction="sum"), int(m.sum())


@torch.no_grad()
def evaluate(model, packer, batch, max_rows=None):
    """Mean answer-token CE over the val rows (all, or the first max_rows)."""
    model.eval()
    rows = packer.rows_per_epoch if max_rows is None else min(max_rows, packer.rows_per_epoch)
    tot, cnt = 0.0, 0
    for g in range(0, rows, batch):
        x, y, m = packer.rows(g, min(batch, rows - g))
        s, n = masked_loss(model, x, y, m)
        tot, cnt = tot + float(s), cnt + n
    model.train()
    return tot / max(cnt, 1)


@torch.no_grad()
def generate(model, sp, fmt, question, max_new=64):
    """Greedy single-turn answer, token layout as the runtime (bos + prompt)."""
    model.eval()
    ids = ([sp.bos_id()] if fmt.add_bos else []) + sp.encode(fmt.prompt(question))
    out = []
    for _ in range(max_new):
        logits = model(torch.tensor([ids[-model.cfg.max_position_embeddings:]]))  # [1, t, V]
        nxt = int(logits[0, -1].argmax())
        if nxt == sp.eos_id():
            break
        ids.append(nxt)
        out.append(nxt)
    model.train()
    return sp.decode(out)


SAMPLE_QUESTIONS = ["What is a falcon?", "Define harbor.", "What does it mean to sail?",
                    "Hello", "What is the opposite of good?"]


# ------------------------------------------------------------------ schedule / ckpt

def lr_at(step, total, args):
    """Linear warmup to args.lr, cosine decay to args.lr * min_lr_ratio at `total`."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    frac = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
    return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def make_optimizer(model, args):
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "word_embeddings" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "word_embeddings" not in n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": other, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def save_ckpt(work, state):
    tmp = os.path.join(work, CKPT + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, os.path.join(work, CKPT))


def load_ckpt(work):
    return torch.load(os.path.join(work, CKPT), map_location="cpu")


# ------------------------------------------------------------------ training

def train(args, meta, log, t_start):
    """Runs (or resumes) training; returns the final state dict (also saved as ckpt)."""
    work = args.work
    fmt = tokenizer.ChatFormat(os.path.join(work, "chat_format.json"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(work, "tokenizer.model"))
    train_p = Packer(os.path.join(work, "train.npz"), args.seq, args.seed, shuffle=True)
    val_p = Packer(os.path.join(work, "val.npz"), args.seq, args.seed, shuffle=False)

    torch.manual_seed(args.seed)
    if args.resume and os.path.exists(os.path.join(work, CKPT)):
        st = load_ckpt(work)
        cfg_dict = st["cfg_dict"]
        model, _ = build_model(cfg_dict, args.seed)
        model.load_state_dict(st["model"])
        opt = make_optimizer(model, args)
        opt.load_state_dict(st["opt"])
        step, total, planned = st["step"], st["total_steps"], True
        prev_elapsed, hist = st["elapsed"], st["history"]
        tokens_seen, loss_tokens_seen = st["tokens_seen"], st["loss_tokens_seen"]
        log(f"resumed at step {step}/{total} ({fmt_s(prev_elapsed)} already spent)")
    else:
        cfg_dict = model_config(args, meta)
        model, _ = build_model(cfg_dict, args.seed)
        opt = make_optimizer(model, args)
        step, total, planned = 0, (args.steps or 10 ** 9), bool(args.steps)
        prev_elapsed, hist = time.time() - t_start, {"train": [], "val": [], "samples": []}
        tokens_seen = loss_tokens_seen = 0
    model.train()
    P = n_params(model)
    log(f"model: {cfg_dict['num_hidden_layers']} layers, hidden 512, ffn {cfg_dict['ffn_hidden_size']}, "
        f"vocab {cfg_dict['vocab_size']}, {P / 1e6:.2f}M params; batch {args.batch}x{args.seq}; "
        f"{train_p.rows_per_epoch} train rows/epoch, {val_p.rows_per_epoch} val rows")

    session0 = time.time()
    budget = args.minutes * 60
    reserve = 60 + 0.03 * budget                      # final full eval + export + slack
    deadline = session0 - prev_elapsed + budget - reserve

    stop = {"flag": False}

    def on_signal(signum, _frame):
        stop["flag"] = True
        log(f"signal {signum}: stopping after this step")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def state():
        return {"model": model.state_dict(), "opt": opt.state_dict(), "cfg_dict": cfg_dict,
                "step": step, "total_steps": total, "args": vars(args), "history": hist,
                "elapsed": prev_elapsed + time.time() - session0, "tokens_seen": tokens_seen,
                "loss_tokens_seen": loss_tokens_seen, "n_params": P}

    step_times, last_ckpt, win = [], time.time(), []
    t_log, tok_log = time.time(), 0
    while step < total and not stop["flag"]:
        t0 = time.time()
        lr = lr_at(step, total, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y, m = train_p.rows(step * args.batch, args.batch)   # [B, T] each
        s, n = masked_loss(model, x, y, m)
        loss = s / max(n, 1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip))
        opt.step()
        step += 1
        tokens_seen += x.numel()
        loss_tokens_seen += n
        tok_log += x.numel()
        win.append(float(loss))
        step_times.append(time.time() - t0)

        # ---- plan the number of steps from the time budget
        if not planned and len(step_times) == 6:
            per = statistics.median(step_times[1:])
            total = step + max(1, int((deadline - time.time()) / (per * 1.03)))
            planned = True
            log(f"plan: {per:.2f}s/step -> {total} steps "
                f"({total * args.batch * args.seq / 1e6:.2f}M tokens, "
                f"{total * args.batch / train_p.rows_per_epoch:.2f} epochs)")
        elif not args.steps and planned and step % 50 == 0 and step < 0.9 * total:
            per = statistics.mean(step_times[-50:]) * 1.02
            eta_end = time.time() + (total - step) * per
            if abs(eta_end - deadline) > 0.04 * budget:
                new_total = step + max(1, int((deadline - time.time()) / per))
                log(f"re-plan: {per:.2f}s/step, total steps {total} -> {new_total}")
                total = new_total

        if step % args.log_every == 0 or step == total:
            dt = time.time() - t_log
            avg = sum(win) / len(win)
            hist["train"].append([step, round(avg, 4)])
            per = statistics.mean(step_times[-args.log_every:])
            log(f"step {step}/{total} loss {avg:.4f} lr {lr:.2e} gnorm {gnorm:.2f} "
                f"tok/s {tok_log / dt:.0f} elapsed {fmt_s(prev_elapsed + time.time() - session0)} "
                f"eta {fmt_s((total - step) * per)}")
            win, t_log, tok_log = [], time.time(), 0

        if step % args.eval_every == 0 and step < total:
            t_e = time.time()
            vl = evaluate(model, val_p, args.batch, args.eval_rows)
            hist["val"].append([step, round(vl, 4), "subset"])
            ans = generate(model, sp, fmt, SAMPLE_QUESTIONS[(step // args.eval_every) % 2])
            log(f"eval step {step}: val loss (first {args.eval_rows} rows) {vl:.4f} "
                f"ppl {math.exp(vl):.2f} | sample: {ans!r} ({time.time() - t_e:.1f}s)")
            t_log += time.time() - t_e

        if time.time() - last_ckpt > args.ckpt_minutes * 60:
            save_ckpt(work, state())
            last_ckpt = time.time()
            log(f"checkpoint saved at step {step}")

    # ---- final evaluation
    t_e = time.time()
    vl = evaluate(model, val_p, args.batch)
    hist["val"].append([step, round(vl, 4), "full"])
    log(f"final val loss {vl:.4f} ppl {math.exp(vl):.3f} over all {val_p.rows_per_epoch} "
        f"val rows ({time.time() - t_e:.1f}s)")
    for q in SAMPLE_QUESTIONS:
        a = generate(model, sp, fmt, q)
        hist["samples"].append([step, q, a])
        log(f"sample: {q!r} -> {a!r}")
    st = state()
    st["final_val_loss"] = vl
    st["final_train_loss"] = statistics.mean(v for _, v in hist["train"][-5:]) if hist["train"] else None
    save_ckpt(work, st)
    return st


def fmt_s(s):
    s = int(max(0, s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


# ------------------------------------------------------------------ export

def export(out, model, cfg_dict, meta, st, work, partial=False):
    """Write config.json, model.safetensors, tokenizer.model, chat_format.json,
    training.json into `out`. F32 if it stays under 50 MB, else BF16."""
    os.makedirs(out, exist_ok=True)
    P = n_params(model)
    dtype = "f32" if P * 4 < 48 * 2 ** 20 else "bf16"
    falcon_ref.save_checkpoint(out, cfg_dict, model, dtype=dtype)
    shutil.copyfile(os.path.join(work, "tokenizer.model"), os.path.join(out, "tokenizer.model"))
    shutil.copyfile(os.path.join(work, "chat_format.json"), os.path.join(out, "chat_format.json"))
    vl = st.get("final_val_loss")
    args = st["args"]
    info = {
        "partial": partial,
        "model": {"params": P, "dtype": dtype, "layers": cfg_dict["num_hidden_layers"],
                  "hidden": cfg_dict["hidden_size"], "heads": cfg_dict["num_attention_heads"],
                  "kv_heads": cfg_dict["num_kv_heads"], "ffn": cfg_dict["ffn_hidden_size"],
                  "vocab": cfg_dict["vocab_size"]},
        "settings": {k: args[k] for k in ("seed", "threads", "minutes", "steps", "seq", "batch",
                                           "lr", "min_lr_ratio", "warmup", "weight_decay",
                                           "clip", "val_percent", "tier_b", "max_fortunes",
                                           "max_fortune_chars", "greeting_copies",
                                           "multi_turn", "vocab", "layers", "ffn")},
        "optimizer": "AdamW(betas=(0.9, 0.95), eps=1e-8), no decay on LayerNorm/embedding; "
                     "linear warmup + cosine decay; grad clip",
        "loss": "cross-entropy on answer tokens and end-of-turn eos only",
        "steps": st["step"], "planned_steps": st["total_steps"],
        "tokens_seen": st["tokens_seen"], "answer_tokens_seen": st["loss_tokens_seen"],
        "final_train_loss": st.get("final_train_loss"),
        "final_val_loss": vl,
        "val_perplexity": math.exp(vl) if vl is not None else None,
        "wall_time_seconds": round(st["elapsed"], 1),
        "data": meta["stats"],
        "train_loss_curve": st["history"]["train"],
        "val_history": st["history"]["val"],
        "samples": st["history"]["samples"],
        "torch": torch.__version__,
        "blas_ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
    }
    with open(os.path.join(out, "training.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")

#!/usr/bin/python3
"""Greedy continuations of the test fixtures from the numpy references (issue 51: "greedy text
identical to the reference's over 64 tokens" for every layout). numpy only, no torch.

    /usr/bin/python3 tools/python/greedy_ref.py                    # every fixture: write greedy.txt
    /usr/bin/python3 tools/python/greedy_ref.py mq_f32 llama_gqa4_f32   # only these
    /usr/bin/python3 tools/python/greedy_ref.py --check            # recompute, compare, write nothing
    /usr/bin/python3 tools/python/greedy_ref.py --report /tmp/g.json   # also every step's top-2

For a fixture dir (tests/fixtures/NAME with config.json and ids.txt), starting from ids.txt,
each step runs the fixture's reference forward pass over the whole sequence so far (no KV
cache), rounds the last position's logits to float32 (as logits.npy is) and appends their
argmax (the lowest id on a float32 tie); FIXTURE/greedy.txt is one line of the new ids,
space-separated. The reference is the one the fixture's logits.npy is checked against
(tools/python/check_reference.py), chosen by config.json:

    model_type "llama"   wormref.llama_ref (float64, weights as stored)
    anything else        wormref.slow_ref (float64 per-token loop, Falcon layouts; ALiBi with
                         HF's bf16 bias roundings when alibi is true). The Falcon fixtures'
                         logits.npy comes from the PyTorch falcon_ref in float32; slow_ref
                         agrees with it to ~1e-6 and needs no torch.

bf16/f16 weights are upcast exactly. The first step's logits are asserted to match the last
row of logits.npy (max |diff| <= 2e-5 * max(1, max |logit|)), so the continuation starts from
the fixture's own reference.

Length: 64 new ids (--n), fewer when the positions would exceed max_position_embeddings
(2048 when config.json has no such key): the forward pass for new id i (1-based) covers
n_prompt + i - 1 positions, so at most max_position_embeddings - n_prompt + 1 new ids are
made (the last one from a pass over exactly max_position_embeddings positions, and never fed
back). With 12 ids and max_position_embeddings 64 that is 53 new ids, as many as
`wormchat generate --ctx 0` (context = max_position_embeddings) makes.

For every step the gap between the top-1 and top-2 float32 logits is recorded; the least gap
of each fixture is printed (an engine whose logits differ from the reference's by ~1e-6 can
only disagree with greedy.txt at a step whose gap is that small). Per fixture this prints
"NAME: REF, N new ids[ (limit)], min top1-top2 gap G at step S, T s"; --check prints "ok" or
the first differing step and exits 1 when any fixture differs.

The fixture dir default_model/ (ids and logits of the shipped model, no config.json) is
skipped unless named; named, its checkpoint is assets/default-model (slow: ~1 min).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from wormref import REPO_ROOT, fixture_io, llama_ref, slow_ref
from wormref.config import FalconConfig

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
GREEDY_NAME = "greedy.txt"
N_NEW = 64
# Fixture dirs whose checkpoint lives elsewhere (as in check_reference.py).
CHECKPOINTS = {"default_model": os.path.join(REPO_ROOT, "assets", "default-model")}


def fixture_names(root=FIXTURES):
    """Fixture dirs under root with config.json and ids.txt, sorted."""
    return sorted(n for n in os.listdir(root)
                  if os.path.isfile(os.path.join(root, n, fixture_io.CONFIG_NAME))
                  and os.path.isfile(os.path.join(root, n, fixture_io.IDS_NAME)))


def load_reference(model_dir):
    """(reference name, max_position_embeddings, vocab_size, forward) for the checkpoint in
    model_dir; forward(ids) -> float64 logits [len(ids), vocab]."""
    with open(os.path.join(model_dir, fixture_io.CONFIG_NAME)) as f:
        cfg_json = json.load(f)
    if cfg_json.get("model_type") == "llama":
        cfg, tensors = llama_ref.load_checkpoint(model_dir)
        return ("llama_ref", cfg.max_position_embeddings, cfg.vocab_size,
                lambda ids: llama_ref.logits(cfg, tensors, ids))
    cfg, sd = fixture_io.load_checkpoint(
        model_dir, lambda d: FalconConfig.from_dict(d, allow_alibi=True))
    want = set(slow_ref.expected_keys(cfg))
    if set(sd) != want:     # slow_ref reads a missing bias as zero: refuse instead
        raise ValueError(f"{model_dir}: tensor names differ from HF's: {sorted(set(sd) ^ want)[:5]}")
    return ("slow_ref (alibi)" if cfg.alibi else "slow_ref", cfg.max_position_embeddings,
            cfg.vocab_size, lambda ids: slow_ref.slow_forward(cfg, sd, ids))


def new_count(n_wanted, n_prompt, max_positions):
    """How many new ids fit: every forward pass covers at most max_positions positions."""
    if n_prompt > max_positions:
        raise ValueError(f"{n_prompt} prompt ids exceed max_position_embeddings={max_positions}")
    return min(n_wanted, max_positions - n_prompt + 1)


def top2(row):
    """(top-1 id, top-2 id, gap) of a float32 logits row; ties go to the lower id (np.argmax)."""
    order = np.argsort(-row, kind="stable")
    a, b = int(order[0]), int(order[1])
    return a, b, float(row[a]) - float(row[b])


def greedy(forward, prompt, n_new, first_row=None):
    """n_new greedy ids after prompt, recomputing the whole sequence each step. Returns
    (new ids, steps: [{top1, top2, gap, logit1, logit2}]). first_row (logits.npy's last row)
    is compared with the first step's float32 logits (AssertionError when they differ)."""
    ids, steps = list(prompt), []
    for step in range(n_new):
        row = forward(ids)[-1].astype(np.float32)
        if step == 0 and first_row is not None:
            err = float(np.abs(row - first_row).max())
            tol = 2e-5 * max(1.0, float(np.abs(row).max()))
            assert err <= tol, f"first step's logits differ from logits.npy by {err:g}"
        a, b, gap = top2(row)
        steps.append(dict(top1=a, top2=b, gap=gap, logit1=float(row[a]), logit2=float(row[b])))
        ids.append(a)
    return ids[len(prompt):], steps


def run_fixture(name, root=FIXTURES, n_wanted=N_NEW):
    """Greedy continuation of fixture `name`: a dict with the reference's name, prompt, the
    new ids, the steps, n_new, the limit (max_position_embeddings) if it cut n_wanted short,
    seconds taken."""
    fdir = os.path.join(root, name)
    t0 = time.time()
    ref, max_pos, vocab, forward = load_reference(CHECKPOINTS.get(name, fdir))
    prompt = fixture_io.read_ids(os.path.join(fdir, fixture_io.IDS_NAME))
    assert prompt and all(0 <= i < vocab for i in prompt), f"{name}: ids out of range"
    n_new = new_count(n_wanted, len(prompt), max_pos)
    saved = np.load(os.path.join(fdir, fixture_io.LOGITS_NAME))
    assert saved.shape == (len(prompt), vocab), f"{name}: logits.npy shape {saved.shape}"
    new, steps = greedy(forward, prompt, n_new, first_row=saved[-1])
    return dict(name=name, reference=ref, prompt=prompt, ids=new, steps=steps, n_new=n_new,
                limit=max_pos if n_new < n_wanted else None, seconds=time.time() - t0)


def summary(res):
    """One line: reference, count (and the limit), least gap and its 1-based step, time."""
    gaps = [s["gap"] for s in res["steps"]]
    i = int(np.argmin(gaps))
    lim = ""
    if res["limit"] is not None:
        lim = (f" (max_position_embeddings={res['limit']}: {len(res['prompt'])} + "
               f"{res['n_new']} - 1 positions)")
    return (f"{res['name']}: {res['reference']}, {res['n_new']} new ids{lim}, "
            f"min top1-top2 gap {gaps[i]:.3g} at step {i + 1}, {res['seconds']:.1f} s")


def read_greedy(fixture_dir):
    """The ids in fixture_dir/greedy.txt."""
    return fixture_io.read_ids(os.path.join(fixture_dir, GREEDY_NAME))


def compare(res, fixture_dir):
    """None when fixture_dir/greedy.txt holds exactly res's ids, else a description."""
    path = os.path.join(fixture_dir, GREEDY_NAME)
    if not os.path.exists(path):
        return f"{GREEDY_NAME} missing"
    with open(path) as f:
        text = f.read()
    have = fixture_io.parse_ids(text)
    if text != " ".join(map(str, res["ids"])) + "\n" or have != res["ids"]:
        k = next((i for i, (a, b) in enumerate(zip(have, res["ids"])) if a != b),
                 min(len(have), len(res["ids"])))
        gap = res["steps"][k]["gap"] if k < len(res["steps"]) else float("nan")
        return (f"{GREEDY_NAME} differs: {len(have)} ids vs {len(res['ids'])} recomputed, "
                f"first difference at step {k + 1} (gap there {gap:.3g})")
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help="fixture dirs under --root (default: every dir "
                   "with config.json and ids.txt; default_model only when named)")
    p.add_argument("--root", default=FIXTURES, help="fixtures root (default tests/fixtures)")
    p.add_argument("--n", type=int, default=N_NEW, help="new ids wanted (default 64)")
    p.add_argument("--check", action="store_true", help="compare with greedy.txt, write nothing")
    p.add_argument("--report", help="write every step's top-1/top-2 ids, logits and gap as JSON")
    args = p.parse_args(argv)
    names = args.names or fixture_names(args.root)
    failed, report = 0, {}
    for name in names:
        fdir = os.path.join(args.root, name)
        res = run_fixture(name, args.root, args.n)
        report[name] = {k: res[k] for k in ("reference", "prompt", "ids", "steps", "n_new",
                                             "limit")}
        line = summary(res)
        if args.check:
            diff = compare(res, fdir)
            failed += diff is not None
            line += ": " + (diff or "ok")
        else:
            fixture_io.write_ids(os.path.join(fdir, GREEDY_NAME), res["ids"])
        print(line, flush=True)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if args.check:
        print(f"{len(names) - failed} agree, {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

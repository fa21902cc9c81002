"""Independent reference of issue 13's beam search, and the fixtures that check the engine's.

Written from issue 13's text, not from serving/beam_search.cpp. Every forward pass is
falcon_ref's full-sequence float32 one (no KV cache): each live beam's next logits are the last
row of the logits of prompt + its tokens. log-softmax is taken in float64 from those float32
logits, as the engine does.

Semantics (issue 13):
  - A live beam's score is the sum of the log-softmax (temperature 1) of its generated tokens.
    Step 1 has one live beam (the prompt's last position).
  - Each step every live beam b and token t give the candidate score_b + logprob_b(t). The best
    2W (ties: lower beam, then lower token id) are walked in order. An EOS candidate becomes a
    finished hypothesis if its rank among the 2W is below W, scored candidate / L^length_penalty
    (L = its generated tokens, that EOS included); otherwise it is skipped. Other candidates
    become the next live beams, in walk order, until W are chosen.
  - At most W hypotheses are kept: once W are, a new one replaces the worst (the last kept among
    equal-worst) only if its score is strictly greater.
  - After the walk, the stopping test: no live beam -> end; with early_stopping, end once W are
    finished; without, end once W are finished and the best live beam's score / its
    length^length_penalty <= the worst finished score.
  - If max_new_tokens steps ran and the test did not end the search, every live beam is added as
    a hypothesis (same scoring and replacement rule), finish reason "length".
  - Result: the best num_return hypotheses, best first, equal scores in the order they were kept.

Fixtures (tests/fixtures/beams/cases.json, compared by tests/serving/beam_fixture_test.cpp): each case's
prompt is drawn from a seeded RNG and redrawn until every decision of the search has a margin of
at least MIN_MARGIN (the engine's float32 logits differ from torch's by ~1e-6 relative): adjacent
scores among the best 2W+1 candidates of every step, the stopping test's comparison, every
replace-the-worst comparison and the final ranking of the kept hypotheses.

Made and checked from the command line by tools/python/make_beam_fixtures.py.
"""

import os

import numpy as np
import torch

from . import REPO_ROOT, falcon_ref

FIXTURES_ROOT = os.path.join(REPO_ROOT, "tests", "fixtures")
DEFAULT_OUT = os.path.join(FIXTURES_ROOT, "beams", "cases.json")
FORMAT = "wormchat-beam-fixtures-1"

MIN_MARGIN = 1e-4      # smallest accepted gap of any decision (absolute, in score units)
CHECK_SCORE_TOL = 1e-6  # --check: recomputed scores may differ this much (other torch builds)
MAX_ATTEMPTS = 400     # prompt redraws per case before giving up
BASE_SEED = 1300       # case i, attempt a: prompt from default_rng(BASE_SEED + 1000 * i + a)

# name -> (model fixture, W, length_penalty, early_stopping, num_return, max_new_tokens,
#          prompt length, eos choice). Every model has max_position_embeddings 64, so
#          prompt length + max_new_tokens <= 63 keeps every forward inside the context.
# eos choice (made from a run of the same prompt in which nothing ends a beam):
#   "frequent": the token most often among a step's best W candidates (many hypotheses finish;
#               searches tend to end by the stopping test);
#   "late":     a token first among a step's best W candidates in the second half of the steps;
#   "never":    a token never among any step's best 2W candidates (the walk never meets it);
#   "ends":     as "frequent", and the prompt is redrawn until the search ends before
#               max_new_tokens (W hypotheses finished).
CASES = [
    ("gqa_w1_greedy",          "newarch_gqa_f32", 1, 1.0, False, 1, 12, 5, "frequent"),
    ("gqa_w2_lp1_eos",         "newarch_gqa_f32", 2, 1.0, False, 1, 12, 5, "frequent"),
    ("gqa_w2_lp05_early_late", "newarch_gqa_f32", 2, 0.5, True,  2, 10, 6, "late"),
    ("gqa_w2_lp2_noeos",       "newarch_gqa_f32", 2, 2.0, False, 2, 14, 4, "never"),
    ("gqa_w4_lp05_eos",        "newarch_gqa_f32", 4, 0.5, False, 2, 12, 5, "frequent"),
    ("gqa_w4_lp2_early_eos",   "newarch_gqa_f32", 4, 2.0, True,  1, 10, 7, "frequent"),
    ("gqa_w4_lp1_noeos",       "newarch_gqa_f32", 4, 1.0, False, 4, 16, 3, "never"),
    ("gqa_w8_lp2_late",        "newarch_gqa_f32", 8, 2.0, False, 3, 8, 5, "late"),
    ("gqa_w8_lp1_early_eos",   "newarch_gqa_f32", 8, 1.0, True,  8, 8, 6, "frequent"),
    ("gqa_w8_lp05_noeos",      "newarch_gqa_f32", 8, 0.5, False, 1, 10, 4, "never"),
    ("mq_w2_lp05_eos",         "mq_f32",          2, 0.5, False, 1, 16, 5, "frequent"),
    ("mq_w2_lp2_early_eos",    "mq_f32",          2, 2.0, True,  2, 12, 4, "frequent"),
    ("mq_w2_lp1_noeos",        "mq_f32",          2, 1.0, False, 1, 20, 6, "never"),
    ("mq_w4_lp1_early_late",   "mq_f32",          4, 1.0, True,  2, 12, 5, "late"),
    ("mq_w4_lp05_eos",         "mq_f32",          4, 0.5, False, 4, 14, 8, "frequent"),
    ("mq_w4_lp2_noeos",        "mq_f32",          4, 2.0, False, 1, 10, 5, "never"),
    ("mq_w8_lp05_early_ends",  "mq_f32",          8, 0.5, True,  4, 16, 5, "ends"),
    ("mq_w8_lp2_eos",          "mq_f32",          8, 2.0, False, 8, 8, 6, "frequent"),
    ("mq_w8_lp1_noeos",        "mq_f32",          8, 1.0, False, 2, 9, 4, "never"),
    ("mha_w2_lp2_late",        "mha_bias_f32",    2, 2.0, False, 1, 14, 5, "late"),
    ("mha_w2_lp1_early_eos",   "mha_bias_f32",    2, 1.0, True,  1, 12, 7, "frequent"),
    ("mha_w2_lp05_noeos",      "mha_bias_f32",    2, 0.5, False, 2, 24, 5, "never"),
    ("mha_w4_lp1_eos",         "mha_bias_f32",    4, 1.0, False, 1, 14, 6, "frequent"),
    ("mha_w4_lp2_early_late",  "mha_bias_f32",    4, 2.0, True,  3, 12, 4, "late"),
    ("mha_w4_lp05_noeos",      "mha_bias_f32",    4, 0.5, False, 2, 12, 5, "never"),
    ("mha_w8_lp1_ends",        "mha_bias_f32",    8, 1.0, False, 1, 16, 5, "ends"),
    ("mha_w8_lp05_early_late", "mha_bias_f32",    8, 0.5, True,  8, 8, 6, "late"),
    ("mha_w8_lp2_noeos",       "mha_bias_f32",    8, 2.0, False, 4, 8, 4, "never"),
]


# --------------------------------------------------------------------------- the search

class Margins:
    """The smallest gap of any decision the search took, and where (for the robustness test)."""

    def __init__(self):
        self.min = float("inf")
        self.where = ""

    def note(self, a, b, where):
        gap = abs(a - b)
        if gap < self.min:
            self.min, self.where = gap, where


def log_softmax_f64(logits_f32):
    """[V] float32 -> [V] float64 log-softmax (temperature 1)."""
    x = np.asarray(logits_f32, dtype=np.float32).astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


@torch.no_grad()
def next_logprobs(model, prompt, tokens):
    """log-softmax [V] f64 of the position after prompt + tokens (full-sequence forward)."""
    ids = torch.tensor([list(prompt) + list(tokens)], dtype=torch.long)
    return log_softmax_f64(model(ids)[0, -1].numpy())


def beam_search(model, prompt, eos_id, num_beams, length_penalty, early_stopping, num_return,
                max_new_tokens, margins=None, trace=None):
    """Runs issue 13's beam search. eos_id None: nothing ends a beam.

    Returns (sequences, info): sequences = [{"ids", "score", "finish_reason"}], best first;
    info = {"steps", "end", "eos_finished", "eos_skipped", "replaced_worst", "not_kept",
    "stopping_test_went_on"} (counts of those events; "end": what ended it). trace (a list), when given, gets per
    step the walked candidates [(rank, beam, token, score)] of the best 2W.
    """
    W = num_beams
    margins = margins if margins is not None else Margins()
    live = [([], 0.0)]      # (generated tokens, score), in walk order
    kept = []               # hypotheses (tokens, normalized score, reason), in the order kept
    info = {"steps": 0, "end": "max_new_tokens", "eos_finished": 0, "eos_skipped": 0,
            "replaced_worst": 0, "not_kept": 0, "stopping_test_went_on": 0}

    def normalized(score, length):
        return score / float(length) ** length_penalty

    def keep(tokens, score, reason, where):
        if len(kept) < W:
            kept.append((tokens, score, reason))
            return
        worst_score = min(h[1] for h in kept)
        worst = max(i for i, h in enumerate(kept) if h[1] == worst_score)
        margins.note(score, worst_score, f"{where}: vs the worst kept hypothesis")
        if score > worst_score:
            del kept[worst]
            kept.append((tokens, score, reason))
            info["replaced_worst"] += 1
        else:
            info["not_kept"] += 1

    done = False
    for step in range(1, max_new_tokens + 1):
        info["steps"] = step
        # Candidates of every live beam: rows [beam], columns [token].
        cand = np.stack([score + next_logprobs(model, prompt, toks) for toks, score in live])
        n_beams, vocab = cand.shape
        flat = cand.reshape(-1)
        beam_of = np.repeat(np.arange(n_beams), vocab)
        token_of = np.tile(np.arange(vocab), n_beams)
        # Best first: higher score, then lower beam, then lower token (lexsort: last key major).
        order = np.lexsort((token_of, beam_of, -flat))
        top = order[: min(2 * W + 1, order.size)]
        for i in range(len(top) - 1):
            margins.note(flat[top[i]], flat[top[i + 1]],
                         f"step {step}: candidates of rank {i} and {i + 1}")
        walked = [(r, int(beam_of[j]), int(token_of[j]), float(flat[j]))
                  for r, j in enumerate(order[: 2 * W])]
        if trace is not None:
            trace.append(walked)

        next_live = []
        for rank, b, t, score in walked:
            if len(next_live) == W:
                break
            tokens = live[b][0] + [t]
            if eos_id is not None and t == eos_id:
                if rank < W:
                    info["eos_finished"] += 1
                    keep(tokens, normalized(score, len(tokens)), "stop", f"step {step}")
                else:
                    info["eos_skipped"] += 1
                continue
            next_live.append((tokens, score))
        live = next_live

        # The stopping test, once per step.
        if not live:
            info["end"], done = "no live beam", True
        elif len(kept) == W:
            if early_stopping:
                info["end"], done = "early stopping", True
            else:
                best = normalized(live[0][1], len(live[0][0]))
                worst = min(h[1] for h in kept)
                margins.note(best, worst, f"step {step}: the stopping test")
                if best <= worst:
                    info["end"], done = "stopping test", True
                else:
                    info["stopping_test_went_on"] += 1
        if done:
            break

    if not done:  # max_new_tokens: every live beam becomes a hypothesis
        for tokens, score in live:
            keep(tokens, normalized(score, len(tokens)), "length", "finalize")

    ranked = sorted(kept, key=lambda h: -h[1])  # stable: equal scores stay in kept order
    for i in range(len(ranked) - 1):
        margins.note(ranked[i][1], ranked[i + 1][1], f"final ranking {i} and {i + 1}")
    sequences = [{"ids": [int(t) for t in h[0]], "score": float(h[1]), "finish_reason": h[2]}
                 for h in ranked[:num_return]]
    return sequences, info


# --------------------------------------------------------------------------- fixtures

_MODELS = {}


def load_model(name):
    if name not in _MODELS:
        _MODELS[name] = falcon_ref.load_checkpoint(os.path.join(FIXTURES_ROOT, name))
    return _MODELS[name]


def choose_eos(trace, how, rng):
    """An eos id from a search run with nothing ending a beam (see CASES); None if none fits."""
    n_steps = len(trace)
    W = len(trace[0]) // 2
    best_w = [[t for r, b, t, s in walked if r < W] for walked in trace]
    if how in ("frequent", "ends"):
        counts = {}
        for step_tokens in best_w[1:]:  # not step 1: let the beams spread first
            for t in step_tokens:
                counts[t] = counts.get(t, 0) + 1
        if not counts:
            return None
        return min(counts, key=lambda t: (-counts[t], t))
    if how == "late":
        first = {}
        for step, step_tokens in enumerate(best_w):
            for t in step_tokens:
                first.setdefault(t, step)
        late = sorted(t for t, s in first.items() if s >= max(1, n_steps // 2))
        return late[int(rng.integers(len(late)))] if late else None
    if how == "never":
        return None  # chosen from the margins run below (needs the 2W+1 candidates)
    raise ValueError(how)


def make_case(index, spec):
    name, model_name, W, lp, early, num_return, max_new, prompt_len, eos_how = spec
    cfg, model = load_model(model_name)
    assert prompt_len + max_new <= cfg.max_position_embeddings - 1, name
    for attempt in range(MAX_ATTEMPTS):
        seed = BASE_SEED + 1000 * index + attempt
        rng = np.random.default_rng(seed)
        prompt = [int(i) for i in rng.integers(0, cfg.vocab_size, size=prompt_len)]
        trace = []
        beam_search(model, prompt, None, W, lp, early, num_return, max_new, trace=trace)
        if eos_how == "never":
            seen = set()
            # The 2W best of every step of the eos-free run: a token outside all of them is
            # never a candidate the walk reaches, with or without being EOS.
            for step in range(len(trace)):
                seen.update(t for r, b, t, s in trace[step])
            unseen = [t for t in range(cfg.vocab_size) if t not in seen]
            eos = unseen[int(rng.integers(len(unseen)))]
        else:
            eos = choose_eos(trace, eos_how, rng)
            if eos is None:
                continue
        margins = Margins()
        trace = []
        seqs, info = beam_search(model, prompt, eos, W, lp, early, num_return, max_new,
                                 margins=margins, trace=trace)
        if margins.min < MIN_MARGIN:
            continue
        reached = info["eos_finished"] > 0
        if eos_how == "never":
            if any(t == eos for walked in trace for r, b, t, s in walked):
                continue
        elif not any(s["finish_reason"] == "stop" for s in seqs):
            continue  # EOS cases must return at least one EOS-ended sequence
        if eos_how == "ends" and info["end"] == "max_new_tokens":
            continue
        assert reached or eos_how == "never"
        return {
            "name": name, "model": model_name, "eos_token_id": int(eos), "prompt_ids": prompt,
            "num_beams": W, "length_penalty": lp, "early_stopping": early,
            "num_return": num_return, "max_new_tokens": max_new, "expected": seqs,
            "info": dict(info, seed=seed, eos_choice=eos_how, min_margin=float(margins.min),
                         min_margin_at=margins.where),
        }
    raise RuntimeError(f"{name}: no prompt with all margins >= {MIN_MARGIN} in {MAX_ATTEMPTS} tries")


def check_case(case):
    """Recomputes one case; returns a list of problems (empty: ok)."""
    _, model = load_model(case["model"])
    margins = Margins()
    seqs, info = beam_search(model, case["prompt_ids"], case["eos_token_id"], case["num_beams"],
                             case["length_penalty"], case["early_stopping"], case["num_return"],
                             case["max_new_tokens"], margins=margins)
    problems = []
    want = case["expected"]
    if len(seqs) != len(want):
        problems.append(f"{len(seqs)} sequences, expected {len(want)}")
    for i, (g, w) in enumerate(zip(seqs, want)):
        if g["ids"] != w["ids"]:
            problems.append(f"sequence {i}: ids {g['ids']}, expected {w['ids']}")
        if g["finish_reason"] != w["finish_reason"]:
            problems.append(f"sequence {i}: {g['finish_reason']}, expected {w['finish_reason']}")
        if abs(g["score"] - w["score"]) > CHECK_SCORE_TOL:
            problems.append(f"sequence {i}: score {g['score']!r}, expected {w['score']!r}")
    if margins.min < MIN_MARGIN:
        problems.append(f"margin {margins.min:.3g} < {MIN_MARGIN} at {margins.where}")
    for key in ("steps", "end", "eos_finished", "eos_skipped", "replaced_worst", "not_kept",
                "stopping_test_went_on"):
        if info[key] != case["info"][key]:
            problems.append(f"info.{key} {info[key]!r}, expected {case['info'][key]!r}")
    return problems


def summary(case):
    i = case["info"]
    reasons = "/".join(s["finish_reason"] for s in case["expected"])
    return (f"{case['name']}: W={case['num_beams']} lp={case['length_penalty']} "
            f"early={case['early_stopping']} ret={case['num_return']} "
            f"max_new={case['max_new_tokens']} eos={case['eos_token_id']} -> {i['steps']} steps, "
            f"end: {i['end']}, eos finished {i['eos_finished']} skipped {i['eos_skipped']}, "
            f"replaced {i['replaced_worst']} not kept {i['not_kept']}, "
            f"test went on {i['stopping_test_went_on']}, "
            f"returned {reasons}, margin {i['min_margin']:.2g}")

#!/usr/bin/python3
"""Generate / verify tests/fixtures/beams/cases.json: issue 13's beam search (wormref.beam_ref)
over the PyTorch reference's full-sequence forward passes. Needs torch (Debian python3-torch).

Usage (from anywhere; paths default to the repository's):
    /usr/bin/python3 tools/python/make_beam_fixtures.py            # (re)generate, then verify
    /usr/bin/python3 tools/python/make_beam_fixtures.py --check    # recompute every case and compare
    /usr/bin/python3 tools/python/make_beam_fixtures.py --only NAME [--out FILE]
"""

import argparse
import json
import os
import re
import sys

import torch

from wormref.beam_ref import CASES, DEFAULT_OUT, FORMAT, MIN_MARGIN, check_case, make_case, summary

GENERATOR = "tools/python/make_beam_fixtures.py"


def main(argv=None):
    p = argparse.ArgumentParser(description="generate / verify the beam-search fixtures")
    p.add_argument("--out", default=DEFAULT_OUT, help="fixture file (default %(default)s)")
    p.add_argument("--only", action="append", help="restrict to case NAME")
    p.add_argument("--check", action="store_true", help="verify the existing fixtures only")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # keep float32 reductions reproducible
    names = set(args.only or [])
    unknown = names - {c[0] for c in CASES}
    if unknown:
        p.error(f"unknown case(s): {sorted(unknown)}")

    if not args.check:
        old = {}
        if names and os.path.exists(args.out):
            with open(args.out) as f:
                old = {c["name"]: c for c in json.load(f)["cases"]}
        cases = []
        for index, spec in enumerate(CASES):
            if names and spec[0] not in names:
                if spec[0] in old:  # --only: the other cases stay as they were
                    cases.append(old[spec[0]])
                continue
            case = make_case(index, spec)
            print("made", summary(case), flush=True)
            cases.append(case)
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        text = json.dumps({"format": FORMAT, "generator": GENERATOR,
                           "min_margin": MIN_MARGIN, "cases": cases}, indent=1)
        # Token id lists on one line each.
        text = re.sub(r"\[(?:\s*-?\d+,)*\s*-?\d+\s*\]",
                      lambda m: "[" + ", ".join(m.group(0)[1:-1].split()).replace(",,", ",") + "]",
                      text)
        with open(args.out, "w") as f:
            f.write(text + "\n")

    with open(args.out) as f:
        data = json.load(f)
    assert data["format"] == FORMAT, data["format"]
    failed = checked = 0
    for case in data["cases"]:
        if names and case["name"] not in names:
            continue
        checked += 1
        problems = check_case(case)
        if problems:
            failed += 1
            print(f"{case['name']}: FAILED " + "; ".join(problems))
        else:
            print(summary(case))
    print(f"{checked - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

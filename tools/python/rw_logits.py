#!/usr/bin/python3
"""Write a Falcon checkpoint's float32 logits [n_tokens, vocab] for given token ids as .npy, from
the float64 numpy loop (wormref.slow_ref, rounded to float32), which also runs ALiBi (Falcon-RW,
`alibi: true`, HF's bf16 bias roundings). numpy only, no torch; slow (seconds for a few hundred
ids on the test fixtures, far too slow for real models).

    /usr/bin/python3 tools/python/rw_logits.py --model DIR --ids "1 2 3" --out FILE.npy
    /usr/bin/python3 tools/python/rw_logits.py --model DIR --ids-file IDS.txt --out FILE.npy
"""

import argparse
import json
import os
import sys

import numpy as np

from wormref import safetensors_io, slow_ref
from wormref.config import FalconConfig


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="checkpoint dir (config.json + safetensors)")
    ids_src = p.add_mutually_exclusive_group(required=True)
    ids_src.add_argument("--ids", help='token ids, e.g. "1 2 3"')
    ids_src.add_argument("--ids-file", help="file holding whitespace-separated token ids")
    p.add_argument("--out", required=True, help="output .npy path")
    args = p.parse_args(argv)

    if args.ids_file:
        with open(args.ids_file) as f:
            text = f.read()
    else:
        text = args.ids
    ids = [int(t) for t in text.replace(",", " ").split()]
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = FalconConfig.from_dict(json.load(f), allow_alibi=True)
    if not ids or not all(0 <= i < cfg.vocab_size for i in ids):
        p.error(f"ids must be non-empty and in [0, {cfg.vocab_size})")
    sd = {k: v.astype(np.float64) for k, v in safetensors_io.read_model_dir(args.model).items()}
    want = set(slow_ref.expected_keys(cfg))
    if set(sd) - {"lm_head.weight"} != want - {"lm_head.weight"} or not want <= set(sd):
        p.error(f"tensor names differ from HF's: {sorted(set(sd) ^ want)[:5]}")
    logits = np.ascontiguousarray(slow_ref.slow_forward(cfg, sd, ids), dtype="<f4")
    np.save(args.out, logits)
    print(f"wrote {args.out}: float32 {list(logits.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

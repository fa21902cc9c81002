#!/usr/bin/python3
"""Write a Falcon checkpoint's float32 logits [n_tokens, vocab] for given token ids as .npy, from
the float64 numpy loop (wormref.slow_ref, rounded to float32), which also runs ALiBi (Falcon-RW,
`alibi: true`, HF's bf16 bias roundings). numpy only, no torch; slow (seconds for a few hundred
ids on the test fixtures, far too slow for real models).

    /usr/bin/python3 tools/python/rw_logits.py --model DIR --ids "1 2 3" --out FILE.npy
    /usr/bin/python3 tools/python/rw_logits.py --model DIR --ids-file IDS.txt --out FILE.npy
"""

import sys

from wormref import fixture_io, slow_ref
from wormref.config import FalconConfig


def compute(model_dir, ids, parser):
    """slow_ref's float64 logits [len(ids), vocab] of the checkpoint in model_dir (ALiBi
    allowed); parser.error when an id is out of range or the tensor names are not HF's."""
    cfg, sd = fixture_io.load_checkpoint(
        model_dir, lambda d: FalconConfig.from_dict(d, allow_alibi=True))
    if not ids or not all(0 <= i < cfg.vocab_size for i in ids):
        parser.error(f"ids must be non-empty and in [0, {cfg.vocab_size})")
    want = set(slow_ref.expected_keys(cfg))
    if set(sd) - {"lm_head.weight"} != want - {"lm_head.weight"} or not want <= set(sd):
        parser.error(f"tensor names differ from HF's: {sorted(set(sd) ^ want)[:5]}")
    return slow_ref.slow_forward(cfg, sd, ids)


def main(argv=None):
    return fixture_io.logits_main(argv, __doc__.split("\n")[0], compute)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Write a checkpoint's float32 logits [n_tokens, vocab] for given token ids as .npy, from the
PyTorch reference (wormref.falcon_ref). Needs torch (Debian python3-torch).

    /usr/bin/python3 tools/python/falcon_logits.py --model DIR --ids "1 2 3" --out FILE.npy
    /usr/bin/python3 tools/python/falcon_logits.py --model DIR --ids-file IDS.txt --out FILE.npy
"""

import sys

import torch

from wormref import falcon_ref, fixture_io


def compute(model_dir, ids, _parser):
    """falcon_ref's float32 logits [len(ids), vocab] of the checkpoint in model_dir."""
    torch.set_grad_enabled(False)
    _, model = falcon_ref.load_checkpoint(model_dir)
    return falcon_ref.compute_logits(model, ids)


def main(argv=None):
    return fixture_io.logits_main(argv, __doc__.split("\n")[0], compute)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Write a checkpoint's float32 logits [n_tokens, vocab] for given token ids as .npy, from the
PyTorch reference (wormref.falcon_ref). Needs torch (Debian python3-torch).

    /usr/bin/python3 tools/python/falcon_logits.py --model DIR --ids "1 2 3" --out FILE.npy
    /usr/bin/python3 tools/python/falcon_logits.py --model DIR --ids-file IDS.txt --out FILE.npy
"""

import argparse
import sys

import numpy as np
import torch

from wormref import falcon_ref


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="checkpoint dir (config.json + safetensors)")
    ids_src = p.add_mutually_exclusive_group(required=True)
    ids_src.add_argument("--ids", help='token ids, e.g. "1 2 3"')
    ids_src.add_argument("--ids-file", help="file holding whitespace-separated token ids")
    p.add_argument("--out", required=True, help="output .npy path")
    args = p.parse_args(argv)

    torch.set_grad_enabled(False)
    if args.ids_file:
        with open(args.ids_file) as f:
            ids = falcon_ref.parse_ids(f.read())
    else:
        ids = falcon_ref.parse_ids(args.ids)
    _, model = falcon_ref.load_checkpoint(args.model)
    logits = falcon_ref.compute_logits(model, ids)
    np.save(args.out, logits)
    print(f"wrote {args.out}: float32 {list(logits.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Write a Llama checkpoint's float32 logits [n_tokens, vocab] for given token ids as .npy, from
the float64 numpy reference (wormref.llama_ref, rounded to float32). numpy only, no torch.

    /usr/bin/python3 tools/python/llama_logits.py --model DIR --ids "1 2 3" --out FILE.npy
    /usr/bin/python3 tools/python/llama_logits.py --model DIR --ids-file IDS.txt --out FILE.npy
"""

import argparse
import sys

import numpy as np

from wormref import llama_ref


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
            ids = llama_ref.parse_ids(f.read())
    else:
        ids = llama_ref.parse_ids(args.ids)
    cfg, tensors = llama_ref.load_checkpoint(args.model)
    logits = np.ascontiguousarray(llama_ref.logits(cfg, tensors, ids), dtype="<f4")
    np.save(args.out, logits)
    print(f"wrote {args.out}: float32 {list(logits.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

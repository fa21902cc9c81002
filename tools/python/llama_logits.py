#!/usr/bin/python3
"""Write a Llama checkpoint's float32 logits [n_tokens, vocab] for given token ids as .npy, from
the float64 numpy reference (wormref.llama_ref, rounded to float32). numpy only, no torch.

    /usr/bin/python3 tools/python/llama_logits.py --model DIR --ids "1 2 3" --out FILE.npy
    /usr/bin/python3 tools/python/llama_logits.py --model DIR --ids-file IDS.txt --out FILE.npy
"""

import sys

from wormref import fixture_io, llama_ref


def compute(model_dir, ids, _parser):
    """llama_ref's float64 logits [len(ids), vocab] of the checkpoint in model_dir."""
    cfg, tensors = llama_ref.load_checkpoint(model_dir)
    return llama_ref.logits(cfg, tensors, ids)


def main(argv=None):
    return fixture_io.logits_main(argv, __doc__.split("\n")[0], compute)


if __name__ == "__main__":
    sys.exit(main())

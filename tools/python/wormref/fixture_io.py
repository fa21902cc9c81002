"""What the fixture generators and logits scripts share, numpy only (no torch).

Used by make_llama_fixtures.py and make_rw_fixtures.py (all of it), make_fixtures.py (ids,
logits, command line; its weights come from torch), falcon_ref.save_checkpoint
(write_checkpoint) and llama_logits.py / rw_logits.py / falcon_logits.py (logits_main).
A fixture directory tests/fixtures/<name>/ holds:

    config.json                      the config as given, plus torch_dtype
    model.safetensors                or model-0000i-of-0000N.safetensors + model.safetensors.index.json
    ids.txt                          one line of space-separated token ids
    logits.npy                       float32 '<f4', C order, shape [n_ids, vocab_size]

    write_checkpoint(dir, cfg_json, tensors, dtype, shards)   config.json + safetensors, HF layout
    load_checkpoint(dir, config_from_dict)                     (config, float64 weights as stored)
    parse_ids(text) / read_ids(path) / write_ids(path, ids)    token id lists
    seeded_weights(shapes, seed, init)                         the numpy generators' weights
    fixture_ids(vocab_size, seed, n_ids)                       the numpy generators' ids
    save_logits(path, logits)                                  '<f4' C-order .npy
    write_fixture(dir, ...)                                    a whole fixture dir
    compare_logits / zeroing_moves / dir_kib                   the generators' --check parts
    replace_readme_section(out_root, heading, lines)           a generator's README section
    fixture_main(...)                                          a generator's command line
    logits_main(...)                                           a logits script's command line
"""

import argparse
import json
import os
import shutil

import numpy as np

from . import REPO_ROOT, safetensors_io

FIXTURES_ROOT = os.path.join(REPO_ROOT, "tests", "fixtures")   # the generators' default --out
CONFIG_NAME = "config.json"
IDS_NAME = "ids.txt"
LOGITS_NAME = "logits.npy"
README_NAME = "README.md"
# safetensors dtype -> config.json torch_dtype
TORCH_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


# --------------------------------------------------------------------------- checkpoint dirs

def shard_groups(names, sizes, shards):
    """Split ordered `names` (tensor i taking sizes[i] bytes) into `shards` contiguous non-empty
    groups of ~equal bytes: a group ends at the first tensor that brings the running total to
    its share, or earlier when every later shard needs one of the tensors left."""
    if shards > len(names):
        raise ValueError(f"cannot split {len(names)} tensors into {shards} shards")
    total, groups, start, cum = sum(sizes), [], 0, 0
    for i, s in enumerate(sizes):
        cum += s
        k = len(groups) + 1                      # index of the cut we are looking for
        if k < shards and (cum >= total * k / shards or len(names) - (i + 1) == shards - k):
            groups.append(names[start:i + 1])
            start = i + 1
    groups.append(names[start:])
    assert len(groups) == shards and all(groups)
    return groups


def write_checkpoint(model_dir, cfg_json, tensors, dtype, shards=1):
    """Write an HF checkpoint dir: config.json (cfg_json's keys in their order with torch_dtype
    set, appended when absent; indent 2, trailing newline) and the weights {name: float32 ndarray} in one storage dtype
    ("f32" | "bf16" | "f16" or the safetensors spelling), sorted names, header padded to 8,
    format "pt". shards <= 1: model.safetensors; N > 1: the names' given order (HF's state_dict
    order) cut into N ~equal-byte runs (shard_groups), model-0000i-of-0000N.safetensors and
    model.safetensors.index.json {"metadata": {"total_size"}, "weight_map": sorted}.
    Weight files of an earlier layout in model_dir are removed first."""
    st_dtype = safetensors_io.canonical_dtype(dtype)
    os.makedirs(model_dir, exist_ok=True)
    for name in os.listdir(model_dir):
        if name == safetensors_io.INDEX_NAME or (name.startswith("model")
                                                 and name.endswith(".safetensors")):
            os.remove(os.path.join(model_dir, name))
    with open(os.path.join(model_dir, CONFIG_NAME), "w") as f:
        json.dump(dict(cfg_json, torch_dtype=TORCH_DTYPES[st_dtype]), f, indent=2)
        f.write("\n")
    meta = {"format": "pt"}
    if shards <= 1:
        safetensors_io.write_safetensors(os.path.join(model_dir, safetensors_io.SINGLE_NAME),
                                         tensors, st_dtype, meta)
        return
    names = list(tensors)
    sizes = [tensors[n].size * safetensors_io.DTYPE_SIZES[st_dtype] for n in names]
    weight_map = {}
    for i, group in enumerate(shard_groups(names, sizes, shards)):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        safetensors_io.write_safetensors(os.path.join(model_dir, fname),
                                         {n: tensors[n] for n in group}, st_dtype, meta)
        weight_map.update({n: fname for n in group})
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(model_dir, safetensors_io.INDEX_NAME), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def load_checkpoint(model_dir, config_from_dict):
    """(config_from_dict(config.json's dict), {name: float64 ndarray}) of an HF checkpoint dir
    (single or sharded), the weights exactly as stored."""
    with open(os.path.join(model_dir, CONFIG_NAME)) as f:
        cfg = config_from_dict(json.load(f))
    tensors = safetensors_io.read_model_dir(model_dir)
    return cfg, {k: v.astype(np.float64) for k, v in tensors.items()}


# --------------------------------------------------------------------------- ids and logits

def parse_ids(text):
    """'1 2 3' or '1,2,3' (any whitespace) -> [1, 2, 3]."""
    return [int(tok) for tok in text.replace(",", " ").split()]


def read_ids(path):
    """The token ids a file holds (parse_ids of its text)."""
    with open(path) as f:
        return parse_ids(f.read())


def write_ids(path, ids):
    """Write ids as one line of space-separated integers ending in a newline."""
    with open(path, "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")


def seeded_weights(shapes, seed, init):
    """{name: float32 ndarray} for {name: shape}, drawn in the given (HF state_dict) order from
    default_rng([seed, 0]): init(name) -> (base, std) gives base + N(0, std) per element,
    computed in float64 and then rounded to float32."""
    rng = np.random.default_rng([seed, 0])
    out = {}
    for name, shape in shapes.items():
        base, std = init(name)
        a = rng.normal(0.0, std, shape)
        out[name] = (base + a if base else a).astype(np.float32)
    return out


def fixture_ids(vocab_size, seed, n_ids):
    """n_ids seeded random ids in [0, vocab); positions 3 and 7 forced to vocab-1 and 0.
    Drawn from default_rng([seed, 1]) (seeded_weights draws from default_rng([seed, 0]))."""
    rng = np.random.default_rng([seed, 1])
    ids = [int(i) for i in rng.integers(0, vocab_size, size=n_ids)]
    ids[3], ids[7] = vocab_size - 1, 0
    return ids


def save_logits(path, logits):
    """Write logits rounded to float32 as a '<f4' C-order .npy (v1); returns what was written."""
    out = np.ascontiguousarray(logits, dtype="<f4")
    np.save(path, out)
    return out


# --------------------------------------------------------------------------- fixture dirs

def write_fixture(fixture_dir, cfg_json, tensors, dtype, shards, ids, reference):
    """Replace fixture_dir by a fresh fixture: the checkpoint (write_checkpoint), ids.txt and
    logits.npy = save_logits(reference(fixture_dir, ids)). reference reads the checkpoint back,
    so the logits come from the weights as stored (bf16/f16 rounding included)."""
    if os.path.isdir(fixture_dir):
        shutil.rmtree(fixture_dir)
    write_checkpoint(fixture_dir, cfg_json, tensors, dtype, shards)
    write_ids(os.path.join(fixture_dir, IDS_NAME), ids)
    save_logits(os.path.join(fixture_dir, LOGITS_NAME), reference(fixture_dir, ids))


def compare_logits(name, fixture_dir, ids, vocab_size, base):
    """A fixture's logits.npy against base, the logits recomputed from its checkpoint: asserts
    the file is '<f4', C order, [len(ids), vocab_size], within 1e-5 of base, and that base is
    not degenerate (some |logit| > 0.5). Returns (saved logits, whether base rounds to them
    exactly); raises AssertionError naming the fixture."""
    saved = np.load(os.path.join(fixture_dir, LOGITS_NAME))
    assert saved.dtype == np.dtype("<f4") and saved.flags.c_contiguous, saved.dtype
    assert saved.shape == (len(ids), vocab_size), saved.shape
    diff = float(np.abs(base - saved).max())
    assert diff <= 1e-5, f"{name}: recomputed logits differ by {diff}"
    assert np.abs(base).max() > 0.5, f"{name}: degenerate logits"
    return saved, np.array_equal(base.astype("<f4"), saved)


def zeroing_moves(name, tensors, forward, base):
    """Every tensor must influence the logits: zeroes each one in turn and asserts that
    forward(tensors with it zeroed) moves max |logits - base| by > 1e-3 (AssertionError naming
    the fixture and the tensor). Returns the least such move."""
    least = np.inf
    for tname in tensors:
        moved = float(np.abs(forward(dict(tensors, **{tname: 0 * tensors[tname]})) - base).max())
        assert moved > 1e-3, f"{name}: tensor {tname} barely matters (max change {moved:g})"
        least = min(least, moved)
    return least


def dir_kib(fixture_dir):
    """Total size of the files directly in fixture_dir, in KiB (float)."""
    return sum(os.path.getsize(os.path.join(fixture_dir, fn))
               for fn in os.listdir(fixture_dir)) / 1024


def replace_readme_section(out_root, heading, lines):
    """Rewrite the section of out_root/README.md that starts with the line `heading` (up to the
    next line starting "## ", or the end) with lines joined by newlines; the section is appended
    (after one blank line) when absent, the file created when missing. Other sections are kept
    byte for byte."""
    path = os.path.join(out_root, README_NAME)
    old = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    start = old.find("\n" + heading + "\n")
    if start < 0:
        new = (old.rstrip("\n") + "\n\n" if old else "") + "\n".join(lines)
    else:
        end = old.find("\n## ", start + 1)
        new = old[:start + 1] + "\n".join(lines) + (old[end:] if end >= 0 else "")
    with open(path, "w") as f:
        f.write(new)


# --------------------------------------------------------------------------- command lines

def fixture_main(argv, description, names, generate, check, write_readme, setup=None):
    """A fixture generator's command line: --out DIR (default FIXTURES_ROOT), --only NAME
    (repeatable, one of names), --check. Calls setup() if given; unless --check, generate(name,
    out) for each selected fixture, then write_readme(out); then prints check(name, out) for
    each (its one-line summary, or "NAME: FAILED msg" on AssertionError) and "P passed, F
    failed". Returns the exit status: 1 if any check failed, else 0."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default=FIXTURES_ROOT, help="fixtures root (default tests/fixtures)")
    p.add_argument("--only", action="append", choices=sorted(names), help="restrict to NAME")
    p.add_argument("--check", action="store_true", help="verify existing fixtures only")
    args = p.parse_args(argv)
    selected = args.only or list(names)
    if setup is not None:
        setup()

    if not args.check:
        os.makedirs(args.out, exist_ok=True)
        for name in selected:
            generate(name, args.out)
        write_readme(args.out)
    failed = 0
    for name in selected:
        try:
            print(check(name, args.out))
        except AssertionError as e:
            failed += 1
            print(f"{name}: FAILED {e}")
    print(f"{len(selected) - failed} passed, {failed} failed")
    return 1 if failed else 0


def logits_main(argv, description, compute):
    """A logits script's command line: --model DIR, --ids "1 2 3" or --ids-file FILE (one of
    them), --out FILE.npy. Writes save_logits(compute(model_dir, ids, parser)) to FILE.npy and
    prints "wrote FILE.npy: float32 [T, V]"; compute may call parser.error to reject its input.
    Returns 0."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", required=True, help="checkpoint dir (config.json + safetensors)")
    ids_src = p.add_mutually_exclusive_group(required=True)
    ids_src.add_argument("--ids", help='token ids, e.g. "1 2 3"')
    ids_src.add_argument("--ids-file", help="file holding whitespace-separated token ids")
    p.add_argument("--out", required=True, help="output .npy path")
    args = p.parse_args(argv)

    ids = read_ids(args.ids_file) if args.ids_file else parse_ids(args.ids)
    logits = save_logits(args.out, compute(args.model, ids, p))
    print(f"wrote {args.out}: float32 {list(logits.shape)}")
    return 0

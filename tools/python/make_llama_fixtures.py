#!/usr/bin/python3
"""Write tiny seeded random Llama (LlamaForCausalLM, Falcon3's layout) checkpoints + reference
logits to tests/fixtures/<name>/, numpy only (no torch).

Each fixture directory holds (same layout as the Falcon fixtures, see tests/fixtures/README.md):
    config.json                      HF LlamaConfig keys, model_type "llama"
    model.safetensors                or model-0000i-of-0000N.safetensors + model.safetensors.index.json
    ids.txt                          one line of space-separated token ids
    logits.npy                       float32 '<f4', C order, shape [n_ids, vocab_size]

logits.npy is wormref.llama_ref's float64 forward pass, rounded to float32, from the checkpoint
*as stored* (it is reloaded after saving, so bf16/f16 rounding is included).

Usage:
    python3 tools/python/make_llama_fixtures.py            # (re)generate all, then verify
    python3 tools/python/make_llama_fixtures.py --check    # only verify existing fixtures
    python3 tools/python/make_llama_fixtures.py --only llama_gqa4_f32 [--out DIR]
"""

import argparse
import dataclasses
import json
import os
import shutil
import sys

import numpy as np

from wormref import REPO_ROOT, llama_ref, safetensors_io
from wormref.llama_config import LlamaConfig

DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures")

N_IDS = 12
WEIGHT_STD = 0.08   # Linear / Embedding weights ~ N(0, 0.08)
BIAS_STD = 0.05     # Linear biases ~ N(0, 0.05) when attention_bias / mlp_bias
NORM_STD = 0.1      # RMSNorm weight ~ 1 + N(0, 0.1)
TORCH_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}

# Extra keys real HF Llama / Falcon3 configs carry; the engine must ignore them.
HF_NOISE = {"attention_dropout": 0.0, "hidden_act": "silu", "initializer_range": 0.02,
            "pretraining_tp": 1, "use_cache": True}

# name -> (config.json content, storage dtype, shard count, seed, what it covers)
FIXTURES = {
    "llama_gqa4_f32": (dict(
        HF_NOISE, vocab_size=353, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
        rope_theta=1000042.0, rope_scaling=None, attention_bias=False, mlp_bias=False,
        tie_word_embeddings=False, max_position_embeddings=64, bos_token_id=11,
        eos_token_id=11),
        "f32", 1, 201,
        "Falcon3 layout: GQA 8 q heads / 2 kv heads (4:1), explicit head_dim 32 != hidden/heads "
        "(q_proj [256, 128], o_proj [128, 256]), rope_theta=1000042, rope_scaling null, no "
        "biases, UNTIED lm_head.weight"),
    "llama_gqa2_tied_bias_bf16": (dict(
        HF_NOISE, vocab_size=389, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
        max_position_embeddings=64, bos_token_id=1, eos_token_id=2),
        "bf16", 2, 202,
        "GQA 2:1, no head_dim key (64/4 = 16), attention_bias and mlp_bias (bias on all seven "
        "projections), tied embeddings (no lm_head.weight), rms_norm_eps=1e-5, llama3 "
        "rope_scaling (factor 8, low/high_freq_factor 1/4, original_max_position_embeddings 32: "
        "inv_freq component 0 is in the high band (unchanged), 1 in the medium band "
        "(interpolated), 2..7 in the low band (divided by 8)), BF16, two shards + index (the cut "
        "falls inside layer 0's MLP: mlp.up_proj.weight is in the first file, mlp.up_proj.bias "
        "in the second)"),
    "llama_mqa_linear_f16": (dict(
        HF_NOISE, vocab_size=311, hidden_size=96, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=1, head_dim=16, rms_norm_eps=1e-6,
        rope_theta=500000.0, rope_scaling={"type": "linear", "factor": 2.0},
        attention_bias=False, mlp_bias=False, tie_word_embeddings=False,
        max_position_embeddings=64, bos_token_id=1, eos_token_id=2),
        "f16", 1, 203,
        "multi-query (6 q heads / 1 kv head), head_dim 16 given explicitly (equal to "
        "hidden/heads), linear rope_scaling written with the old key \"type\" (factor 2: "
        "inv_freq halved), rope_theta=500000, untied, F16"),
}


def fixture_ids(vocab_size, seed):
    """N_IDS seeded random ids in [0, vocab); positions 3 and 7 forced to vocab-1 and 0.
    Drawn from default_rng([seed, 1]); weights come from default_rng([seed, 0])."""
    rng = np.random.default_rng([seed, 1])
    ids = [int(i) for i in rng.integers(0, vocab_size, size=N_IDS)]
    ids[3], ids[7] = vocab_size - 1, 0
    return ids


def init_weights(cfg, seed):
    """{HF name: float32 ndarray}, drawn in HF state_dict order from default_rng([seed, 0])."""
    rng = np.random.default_rng([seed, 0])
    out = {}
    for name, shape in llama_ref.expected_shapes(cfg).items():
        if name.endswith("norm.weight"):          # input/post_attention_layernorm, model.norm
            a = 1.0 + rng.normal(0.0, NORM_STD, shape)
        elif name.endswith(".bias"):
            a = rng.normal(0.0, BIAS_STD, shape)
        else:
            a = rng.normal(0.0, WEIGHT_STD, shape)
        out[name] = a.astype(np.float32)
    return out


def _shard_groups(names, sizes, shards):
    """Split ordered `names` into `shards` contiguous non-empty groups of ~equal bytes
    (same rule as falcon_ref.save_checkpoint)."""
    if shards > len(names):
        raise ValueError(f"cannot split {len(names)} tensors into {shards} shards")
    total, groups, start, cum = sum(sizes), [], 0, 0
    for i, s in enumerate(sizes):
        cum += s
        k = len(groups) + 1
        if k < shards and (cum >= total * k / shards or len(names) - (i + 1) == shards - k):
            groups.append(names[start:i + 1])
            start = i + 1
    groups.append(names[start:])
    assert len(groups) == shards and all(groups)
    return groups


def save_checkpoint(model_dir, cfg_json, tensors, dtype, shards):
    """config.json (cfg_json as given + model_type / architectures / torch_dtype) and the
    safetensors file(s): one dtype, sorted names, header padded to 8, format "pt"; shards > 1
    cut the HF state_dict order into ~equal-byte runs and write model.safetensors.index.json."""
    st_dtype = safetensors_io.canonical_dtype(dtype)
    cfg_json = dict(cfg_json, model_type="llama", architectures=["LlamaForCausalLM"],
                    torch_dtype=TORCH_DTYPES[st_dtype])
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, llama_ref.CONFIG_NAME), "w") as f:
        json.dump(cfg_json, f, indent=2)
        f.write("\n")
    meta = {"format": "pt"}
    if shards <= 1:
        safetensors_io.write_safetensors(os.path.join(model_dir, safetensors_io.SINGLE_NAME),
                                         tensors, st_dtype, meta)
        return
    names = list(tensors)
    sizes = [tensors[n].size * safetensors_io.DTYPE_SIZES[st_dtype] for n in names]
    weight_map = {}
    for i, group in enumerate(_shard_groups(names, sizes, shards)):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        safetensors_io.write_safetensors(os.path.join(model_dir, fname),
                                         {n: tensors[n] for n in group}, st_dtype, meta)
        weight_map.update({n: fname for n in group})
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(model_dir, safetensors_io.INDEX_NAME), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def read_ids(path):
    with open(path) as f:
        return llama_ref.parse_ids(f.read())


def generate(name, out_root):
    cfg_json, dtype, shards, seed, _ = FIXTURES[name]
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    cfg = LlamaConfig.from_dict(cfg_json)
    save_checkpoint(d, cfg_json, init_weights(cfg, seed), dtype, shards)
    ids = fixture_ids(cfg.vocab_size, seed)
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")
    cfg, stored = llama_ref.load_checkpoint(d)      # logits from the stored (rounded) weights
    np.save(os.path.join(d, "logits.npy"),
            np.ascontiguousarray(llama_ref.logits(cfg, stored, ids), dtype="<f4"))


def check(name, out_root):
    """Reload a fixture, recompute logits, compare; check every tensor and the rope scaling
    matter. Returns a one-line summary; raises AssertionError on failure."""
    d = os.path.join(out_root, name)
    cfg, tensors = llama_ref.load_checkpoint(d)
    assert cfg == LlamaConfig.from_dict(FIXTURES[name][0]), f"{name}: config.json changed"
    ids = read_ids(os.path.join(d, "ids.txt"))
    assert ids == fixture_ids(cfg.vocab_size, FIXTURES[name][3]), f"{name}: ids.txt changed"
    saved = np.load(os.path.join(d, "logits.npy"))
    assert saved.dtype == np.dtype("<f4") and saved.flags.c_contiguous, saved.dtype
    assert saved.shape == (len(ids), cfg.vocab_size), saved.shape
    assert len(ids) <= cfg.max_position_embeddings
    base = llama_ref.logits(cfg, tensors, ids)
    diff = float(np.abs(base - saved).max())
    assert diff <= 1e-5, f"{name}: recomputed logits differ by {diff}"
    assert np.abs(base).max() > 0.5, f"{name}: degenerate logits"

    # Every tensor must influence the logits: zeroing it must move them visibly.
    least = np.inf
    for tname in tensors:
        moved = float(np.abs(llama_ref.logits(cfg, dict(tensors, **{tname: 0 * tensors[tname]}),
                                              ids) - base).max())
        assert moved > 1e-3, f"{name}: tensor {tname} barely matters (max change {moved:g})"
        least = min(least, moved)
    # The rope scaling must matter too, and llama3 must use all three bands.
    rope_note = "rope default"
    if cfg.rope_type != "default":
        plain = dataclasses.replace(cfg, rope_type="default")
        moved = float(np.abs(llama_ref.logits(plain, tensors, ids) - base).max())
        assert moved > 1e-3, f"{name}: rope_scaling barely matters (max change {moved:g})"
        rope_note = f"rope {cfg.rope_type} (unscaled differs by {moved:.3f})"
    if cfg.rope_type == "llama3":
        bands = llama_ref.llama3_bands(cfg)
        assert {"high", "medium", "low"} <= set(bands), f"{name}: llama3 bands {bands}"
        rope_note += " bands " + "".join(b[0] for b in bands)

    with open(os.path.join(d, "config.json")) as f:
        torch_dtype = json.load(f)["torch_dtype"]
    size = sum(os.path.getsize(os.path.join(d, fn)) for fn in os.listdir(d))
    exact = np.array_equal(base.astype("<f4"), saved)
    return (f"{name}: ok (exact={exact}) {torch_dtype} L={cfg.num_hidden_layers} "
            f"C={cfg.hidden_size} H={cfg.num_attention_heads} K={cfg.num_key_value_heads} "
            f"D={cfg.head_dim} F={cfg.intermediate_size} V={cfg.vocab_size} "
            f"bias={cfg.attention_bias}/{cfg.mlp_bias} tied={cfg.tie_word_embeddings} {rope_note}, "
            f"zeroing a tensor moves >= {least:.3f}, "
            f"logit range [{saved.min():.2f}, {saved.max():.2f}] {size / 1024:.0f} KiB")


README_HEADING = "## `llama_*/`"


def write_readme(out_root):
    """Rewrite this generator's section of tests/fixtures/README.md (appended if absent); the
    sections other generators own are kept as they are."""
    lines = [
        README_HEADING,
        "",
        "Tiny seeded random Llama checkpoints (HF `LlamaForCausalLM`, the layout TII's Falcon3",
        "models use) with reference logits from an independent float64 numpy reference",
        "(`tools/python/wormref/llama_ref.py`; config resolution in `wormref/llama_config.py`).",
        "Generated (from the repo root, numpy only, no torch) with:",
        "",
        "    /usr/bin/python3 tools/python/make_llama_fixtures.py           # regenerate, verify",
        "    /usr/bin/python3 tools/python/make_llama_fixtures.py --check   # only verify",
        "",
        "The files are as for the Falcon fixtures above (config.json, model.safetensors or shards +",
        "index, ids.txt with 12 ids, logits.npy `<f4` `[n_ids, vocab_size]`), except that",
        "`config.json` holds HF LlamaConfig keys with `model_type: \"llama\"`,",
        "`architectures: [\"LlamaForCausalLM\"]` and the noise keys real Llama configs carry",
        "(`attention_dropout`, `hidden_act: \"silu\"`, `initializer_range`, `pretraining_tp: 1`,",
        "`use_cache`), and logits.npy is the float64 forward pass rounded to float32.",
        "Tensor names are exactly HF's: `model.embed_tokens.weight`,",
        "`model.layers.{i}.input_layernorm.weight`,",
        "`model.layers.{i}.self_attn.{q,k,v,o}_proj.weight` (+ `.bias` when `attention_bias`),",
        "`model.layers.{i}.post_attention_layernorm.weight`,",
        "`model.layers.{i}.mlp.{gate,up,down}_proj.weight` (+ `.bias` when `mlp_bias`),",
        "`model.norm.weight`, `lm_head.weight` (absent when `tie_word_embeddings`).",
        "",
        "Random init (numpy `default_rng([seed, 0])`, drawn in HF state_dict order):",
        f"Linear/Embedding weights ~ N(0, {WEIGHT_STD}), biases ~ N(0, {BIAS_STD}),",
        f"RMSNorm weights ~ 1 + N(0, {NORM_STD});",
        "ids from `default_rng([seed, 1])` (index 3 is vocab_size-1, index 7 is 0). `--check`",
        "verifies that zeroing any single tensor moves the logits by > 1e-3 and, for the two",
        "scaled fixtures, that dropping rope_scaling does too.",
        "",
        "RoPE follows HF's modeling_rope_utils: inv_freq[i] = 1 / rope_theta^(2i / head_dim),",
        "rotate_half pairs (i, i + head_dim/2); `linear`: inv_freq / factor; `llama3`: with",
        "wavelen = 2 pi / inv_freq, components with wavelen < original_max_position_embeddings /",
        "high_freq_factor are kept, those with wavelen > original_max_position_embeddings /",
        "low_freq_factor are divided by factor, the rest become (1 - s) * inv_freq / factor +",
        "s * inv_freq with s = (original_max_position_embeddings / wavelen - low_freq_factor) /",
        "(high_freq_factor - low_freq_factor).",
        "",
        "Suggested comparison: max |logit difference| <= 1e-4 (float32 rounding of the reference",
        "is ~1e-7). On these fixtures an interleaved RoPE is off by 0.6..1.5, kv head h % K",
        "instead of h // (H/K) by 2.8..4.2, scaling scores by (hidden/heads)**-0.5 instead of",
        "head_dim**-0.5 by 0.8 (llama_gqa4_f32), leaving the llama3 medium band unscaled by 0.22,",
        "a 1% rope_theta error by 4e-4..1.2e-3, rms_norm_eps 1e-5 vs 1e-6 by 1.6e-3..4.7e-3.",
        "",
    ]
    for name, (cfg_json, dtype, shards, seed, what) in FIXTURES.items():
        cfg = LlamaConfig.from_dict(cfg_json)
        lines.append(f"- `{name}` ({dtype}, seed {seed}, {shards} file{'s' if shards > 1 else ''}; "
                     f"L={cfg.num_hidden_layers} hidden={cfg.hidden_size} "
                     f"heads={cfg.num_attention_heads} kv={cfg.num_key_value_heads} "
                     f"head_dim={cfg.head_dim} intermediate={cfg.intermediate_size} "
                     f"vocab={cfg.vocab_size}): {what}.")
    lines += [
        "",
        "Reference logits for other ids: `/usr/bin/python3 tools/python/llama_logits.py --model "
        "tests/fixtures/NAME --ids \"1 2 3\" --out /tmp/x.npy`.",
        "",
    ]
    path = os.path.join(out_root, "README.md")
    old = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    start = old.find("\n" + README_HEADING + "\n")
    if start < 0:
        new = (old.rstrip("\n") + "\n\n" if old else "") + "\n".join(lines)
    else:
        end = old.find("\n## ", start + 1)
        new = old[:start + 1] + "\n".join(lines) + (old[end:] if end >= 0 else "")
    with open(path, "w") as f:
        f.write(new)


def main(argv=None):
    p = argparse.ArgumentParser(description="generate / verify Llama test fixtures")
    p.add_argument("--out", default=DEFAULT_OUT, help="fixtures root (default tests/fixtures)")
    p.add_argument("--only", action="append", choices=sorted(FIXTURES), help="restrict to NAME")
    p.add_argument("--check", action="store_true", help="verify existing fixtures only")
    args = p.parse_args(argv)
    names = args.only or list(FIXTURES)

    if not args.check:
        os.makedirs(args.out, exist_ok=True)
        for name in names:
            generate(name, args.out)
        write_readme(args.out)
    failed = 0
    for name in names:
        try:
            print(check(name, args.out))
        except AssertionError as e:
            failed += 1
            print(f"{name}: FAILED {e}")
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

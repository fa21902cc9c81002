#!/usr/bin/python3
"""Write tiny seeded random Llama (LlamaForCausalLM, Falcon3's layout) checkpoints + reference
logits to tests/fixtures/<name>/, numpy only (no torch).

Each fixture directory holds the files wormref.fixture_io writes (the Falcon fixtures' layout,
see tests/fixtures/README.md), config.json with HF LlamaConfig keys and model_type "llama".

logits.npy is wormref.llama_ref's float64 forward pass, rounded to float32, from the checkpoint
*as stored* (it is reloaded after saving, so bf16/f16 rounding is included).

Usage:
    python3 tools/python/make_llama_fixtures.py            # (re)generate all, then verify
    python3 tools/python/make_llama_fixtures.py --check    # only verify existing fixtures
    python3 tools/python/make_llama_fixtures.py --only llama_gqa4_f32 [--out DIR]
"""

import dataclasses
import json
import os
import sys

import numpy as np

from wormref import fixture_io, llama_ref
from wormref.llama_config import LlamaConfig

N_IDS = 12
WEIGHT_STD = 0.08   # Linear / Embedding weights ~ N(0, 0.08)
BIAS_STD = 0.05     # Linear biases ~ N(0, 0.05) when attention_bias / mlp_bias
NORM_STD = 0.1      # RMSNorm weight ~ 1 + N(0, 0.1)

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
    """fixture_io.fixture_ids with N_IDS ids (default_rng([seed, 1]))."""
    return fixture_io.fixture_ids(vocab_size, seed, N_IDS)


def init_weights(cfg, seed):
    """{HF name: float32 ndarray}, drawn in HF state_dict order from default_rng([seed, 0])
    (fixture_io.seeded_weights)."""
    def init(name):
        if name.endswith("norm.weight"):          # input/post_attention_layernorm, model.norm
            return 1.0, NORM_STD
        return 0.0, BIAS_STD if name.endswith(".bias") else WEIGHT_STD
    return fixture_io.seeded_weights(llama_ref.expected_shapes(cfg), seed, init)


def generate(name, out_root):
    """Write fixture `name` to out_root/name (replacing it): config.json (the FIXTURES entry +
    model_type / architectures / torch_dtype), the weights in its dtype and shard count,
    ids.txt, and logits.npy from the stored (rounded) weights."""
    cfg_json, dtype, shards, seed, _ = FIXTURES[name]
    cfg = LlamaConfig.from_dict(cfg_json)
    fixture_io.write_fixture(
        os.path.join(out_root, name),
        dict(cfg_json, model_type="llama", architectures=["LlamaForCausalLM"]),
        init_weights(cfg, seed), dtype, shards, fixture_ids(cfg.vocab_size, seed),
        lambda d, ids: llama_ref.logits(*llama_ref.load_checkpoint(d), ids))


def check(name, out_root):
    """Reload a fixture, recompute logits, compare; check every tensor and the rope scaling
    matter. Returns a one-line summary; raises AssertionError on failure."""
    d = os.path.join(out_root, name)
    cfg, tensors = llama_ref.load_checkpoint(d)
    assert cfg == LlamaConfig.from_dict(FIXTURES[name][0]), f"{name}: config.json changed"
    ids = fixture_io.read_ids(os.path.join(d, fixture_io.IDS_NAME))
    assert ids == fixture_ids(cfg.vocab_size, FIXTURES[name][3]), f"{name}: ids.txt changed"
    assert len(ids) <= cfg.max_position_embeddings
    base = llama_ref.logits(cfg, tensors, ids)
    saved, exact = fixture_io.compare_logits(name, d, ids, cfg.vocab_size, base)
    least = fixture_io.zeroing_moves(name, tensors, lambda t: llama_ref.logits(cfg, t, ids), base)
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

    with open(os.path.join(d, fixture_io.CONFIG_NAME)) as f:
        torch_dtype = json.load(f)["torch_dtype"]
    return (f"{name}: ok (exact={exact}) {torch_dtype} L={cfg.num_hidden_layers} "
            f"C={cfg.hidden_size} H={cfg.num_attention_heads} K={cfg.num_key_value_heads} "
            f"D={cfg.head_dim} F={cfg.intermediate_size} V={cfg.vocab_size} "
            f"bias={cfg.attention_bias}/{cfg.mlp_bias} tied={cfg.tie_word_embeddings} {rope_note}, "
            f"zeroing a tensor moves >= {least:.3f}, "
            f"logit range [{saved.min():.2f}, {saved.max():.2f}] {fixture_io.dir_kib(d):.0f} KiB")


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
    fixture_io.replace_readme_section(out_root, README_HEADING, lines)


def main(argv=None):
    return fixture_io.fixture_main(argv, "generate / verify Llama test fixtures", FIXTURES,
                                   generate, check, write_readme)


if __name__ == "__main__":
    sys.exit(main())

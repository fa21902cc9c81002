#!/usr/bin/python3
"""Write tiny seeded random Falcon-RW (ALiBi) checkpoints + reference logits to
tests/fixtures/<name>/, numpy only (no torch).

Falcon-RW is HF FalconForCausalLM with `alibi: true` (no rotary), plain multi-head attention
(multi_query false, fused QKV per head [q, k, v]), sequential residuals (parallel_attn false:
x += dense(attn(input_layernorm(x))); x += mlp(post_attention_layernorm(x))), biases on every
Linear, tied LM head. Each fixture directory holds the files wormref.fixture_io writes (the
Falcon fixtures' layout, see tests/fixtures/README.md): config.json with HF FalconConfig keys
(rw_alibi_f32, rw_alibi12_long_f32) or RW-era keys (rw_alibi6_bf16), one model.safetensors,
ids.txt with n_ids ids (12; 300 for rw_alibi12_long_f32, whose key positions pass 256),
logits.npy [n_ids, vocab_size].

logits.npy is wormref.slow_ref's float64 forward pass (with HF's bf16 ALiBi roundings, see
wormref/alibi.py), rounded to float32, from the checkpoint *as stored* (it is reloaded after
saving, so bf16 weight rounding is included).

rw_alibi_f32 and rw_alibi6_bf16 cannot tell whether an engine applies HF's bf16 rounding of the
bias (power-of-two slopes, positions < 256: every rounding is exact); rw_alibi12_long_f32 can
(12 heads: slopes 2^-0.5, 2^-1.5, ... round in bf16; 300 ids: positions > 256 round), and
--check asserts that skipping the rounding moves its logits by > 1e-3 (ROUNDING_FIXTURES).

Usage:
    python3 tools/python/make_rw_fixtures.py            # (re)generate all, then verify
    python3 tools/python/make_rw_fixtures.py --check    # only verify existing fixtures
    python3 tools/python/make_rw_fixtures.py --only rw_alibi_f32 [--out DIR]
"""

import os
import sys

import numpy as np

from wormref import alibi, fixture_io, slow_ref
from wormref.config import FalconConfig

N_IDS = 12          # ids of every fixture but rw_alibi12_long_f32 (FIXTURES' n_ids)
LONG_IDS = 300      # rw_alibi12_long_f32: key positions 0..299 pass 256, where bf16(j) rounds
WEIGHT_STD = 0.08   # Linear / Embedding weights ~ N(0, 0.08)
BIAS_STD = 0.05     # Linear biases ~ N(0, 0.05)
LN_STD = 0.1        # LayerNorm weight ~ 1 + N(0, 0.1), LayerNorm bias ~ N(0, 0.1)

# Keys real Falcon / RW configs carry that the engine ignores.
HF_NOISE = {"apply_residual_connection_post_layernorm": False, "attention_dropout": 0.0,
            "hidden_dropout": 0.0, "initializer_range": 0.02, "use_cache": True}
# What tiiuae/falcon-rw-1b's config.json carried before its conversion to model_type "falcon".
RW_NOISE = dict(HF_NOISE, auto_map={"AutoConfig": "configuration_RW.RWConfig",
                                    "AutoModelForCausalLM": "modelling_RW.RWForCausalLM"},
                transformers_version="4.27.4")

# name -> (config.json content without torch_dtype, storage dtype, seed, n_ids, what it covers)
FIXTURES = {
    "rw_alibi_f32": (dict(
        HF_NOISE, alibi=True, vocab_size=331, hidden_size=64, num_attention_heads=4,
        num_hidden_layers=2, new_decoder_architecture=False, multi_query=False,
        parallel_attn=False, bias=True, layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
        model_type="falcon", architectures=["FalconForCausalLM"]),
        "f32", 301, N_IDS,
        "Falcon-RW-1B layout with HF key names (as in a Falcon-RW config converted to model_type "
        "\"falcon\"): "
        "alibi=true (no rotary), 4 heads (a power of two: slopes 2^-2, 2^-4, 2^-6, 2^-8), "
        "multi-head fused QKV per head [q, k, v], parallel_attn=false (input_layernorm + "
        "post_attention_layernorm, sequential residuals), bias on every Linear, ffn 4x hidden "
        "(no ffn_hidden_size key), tied embeddings, no max_position_embeddings / rope_theta keys"),
    "rw_alibi6_bf16": (dict(
        RW_NOISE, alibi=True, vocab_size=389, n_embed=96, n_head=6, n_layer=2,
        multi_query=False, parallel_attn=False, bias=True, layer_norm_epsilon=1e-5,
        bos_token_id=1, eos_token_id=2,
        model_type="RefinedWebModel", architectures=["RWForCausalLM"]),
        "bf16", 302, N_IDS,
        "same layout, RW-era config (model_type \"RefinedWebModel\", architectures "
        "[\"RWForCausalLM\"], auto_map, keys n_embed / n_head / n_layer, no "
        "new_decoder_architecture / num_* / max_position_embeddings keys), 6 heads (not a power "
        "of two: slopes 2^-2, 2^-4, 2^-6, 2^-8 from closest power 4, then the extra slopes "
        "2^-1, 2^-3), head_dim 16, BF16"),
    "rw_alibi12_long_f32": (dict(
        HF_NOISE, alibi=True, vocab_size=211, hidden_size=96, num_attention_heads=12,
        num_hidden_layers=2, new_decoder_architecture=False, multi_query=False,
        parallel_attn=False, bias=True, layer_norm_epsilon=1e-5, max_position_embeddings=512,
        bos_token_id=1, eos_token_id=2, model_type="falcon", architectures=["FalconForCausalLM"]),
        "f32", 303, LONG_IDS,
        "the fixture that sees HF's bf16 rounding of the ALiBi bias: rw_alibi_f32's layout and "
        "HF key names (plus max_position_embeddings 512), 12 heads (not a power of two: closest "
        "power 8 gives 2^-1 .. 2^-8, then the extra slopes 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5, which "
        "are not powers of two and change in bf16: 0.70710677 -> 0.70703125, ...), head_dim 8, "
        f"{LONG_IDS} ids, so key positions 257..299 are rounded by bf16(j) too; skipping the "
        "rounding moves the logits by > 1e-3 (`--check` asserts it)"),
}
# Fixtures whose bias HF rounds (bf16(slope) != slope or bf16(j) != j for some head / position):
# --check asserts that the rounding changes the bias and that skipping it moves the logits.
ROUNDING_FIXTURES = ("rw_alibi12_long_f32",)


def load_config(cfg_json):
    """FalconConfig of a config.json dict, ALiBi allowed."""
    return FalconConfig.from_dict(cfg_json, allow_alibi=True)


def expected_shapes(cfg):
    """{HF state-dict name: shape} in HF FalconForCausalLM.state_dict() order (module
    registration order: word_embeddings; per layer self_attention (query_key_value, dense),
    mlp (dense_h_to_4h, dense_4h_to_h), then the LayerNorms (post_attention_layernorm before
    input_layernorm when parallel_attn is false); ln_f; lm_head only when untied)."""
    c, v, f = cfg.hidden_size, cfg.vocab_size, cfg.ffn_hidden_size
    shapes = {"transformer.word_embeddings.weight": (v, c)}
    if not cfg.parallel_attn:
        lns = ("post_attention_layernorm", "input_layernorm")
    else:
        lns = cfg.layernorm_names
    for i in range(cfg.num_hidden_layers):
        p = f"transformer.h.{i}."
        for name, rows, cols in (("self_attention.query_key_value", cfg.qkv_out_dim, c),
                                 ("self_attention.dense", c, c),
                                 ("mlp.dense_h_to_4h", f, c),
                                 ("mlp.dense_4h_to_h", c, f)):
            shapes[p + name + ".weight"] = (rows, cols)
            if cfg.bias:
                shapes[p + name + ".bias"] = (rows,)
        for ln in lns:
            shapes[p + ln + ".weight"] = (c,)
            shapes[p + ln + ".bias"] = (c,)
    shapes["transformer.ln_f.weight"] = (c,)
    shapes["transformer.ln_f.bias"] = (c,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (v, c)
    assert sorted(shapes) == sorted(slow_ref.expected_keys(cfg))
    return shapes


def init_weights(cfg, seed):
    """{HF name: float32 ndarray}, drawn in HF state_dict order from default_rng([seed, 0])
    (fixture_io.seeded_weights)."""
    def init(name):
        if "layernorm" in name or name.startswith("transformer.ln_f"):
            return (1.0 if name.endswith(".weight") else 0.0), LN_STD
        return 0.0, BIAS_STD if name.endswith(".bias") else WEIGHT_STD
    return fixture_io.seeded_weights(expected_shapes(cfg), seed, init)


def load_checkpoint(model_dir):
    """(FalconConfig, {name: float64 ndarray}) of a fixture dir, weights as stored."""
    return fixture_io.load_checkpoint(model_dir, load_config)


def generate(name, out_root):
    """Write fixture `name` to out_root/name (replacing it): config.json (the FIXTURES entry +
    torch_dtype), model.safetensors in its dtype, its n_ids ids, and logits.npy from the stored
    (rounded) weights."""
    cfg_json, dtype, seed, n_ids, _ = FIXTURES[name]
    cfg = load_config(cfg_json)
    fixture_io.write_fixture(
        os.path.join(out_root, name), cfg_json, init_weights(cfg, seed), dtype, 1,
        fixture_io.fixture_ids(cfg.vocab_size, seed, n_ids),
        lambda d, ids: slow_ref.slow_forward(*load_checkpoint(d), ids))


def check(name, out_root):
    """Reload a fixture, recompute logits, compare; check that every tensor and the ALiBi bias
    matter, and measure what HF's bf16 rounding of the bias does. Returns a one-line summary;
    raises AssertionError on failure."""
    cfg_json, _, seed, n_ids, _ = FIXTURES[name]
    d = os.path.join(out_root, name)
    cfg, tensors = load_checkpoint(d)
    assert cfg == load_config(cfg_json), f"{name}: config.json changed"
    assert cfg.alibi and not cfg.multi_query and not cfg.parallel_attn and cfg.bias, name
    shapes = expected_shapes(cfg)
    assert set(tensors) == set(shapes), f"{name}: {sorted(set(tensors) ^ set(shapes))[:5]}"
    assert all(tensors[n].shape == s for n, s in shapes.items()), f"{name}: tensor shapes"
    ids = fixture_io.read_ids(os.path.join(d, fixture_io.IDS_NAME))
    assert ids == fixture_io.fixture_ids(cfg.vocab_size, seed, n_ids), f"{name}: ids.txt changed"
    base = slow_ref.slow_forward(cfg, tensors, ids)
    saved, exact = fixture_io.compare_logits(name, d, ids, cfg.vocab_size, base)

    # Zeroing any tensor must move the logits, measured on the first N_IDS ids (all of them but
    # for rw_alibi12_long_f32): attention is causal, so those rows of the full forward pass are
    # exactly the forward pass of the prefix, and a change there is a lower bound of the change
    # over all ids (and the loop stays seconds, not minutes).
    probe = ids[:N_IDS]
    least = fixture_io.zeroing_moves(name, tensors,
                                     lambda t: slow_ref.slow_forward(cfg, t, probe),
                                     base[:len(probe)])
    # The ALiBi bias must matter. HF's bf16 rounding of it is measured: invisible (0) on
    # rw_alibi_f32 / rw_alibi6_bf16, asserted to matter on ROUNDING_FIXTURES.
    no_bias = float(np.abs(slow_ref.slow_forward(cfg, tensors, ids, alibi_bias="zero")
                           - base).max())
    assert no_bias > 1e-3, f"{name}: the ALiBi bias barely matters (max change {no_bias:g})"
    # max |change| per query row when the bias is slope * j unrounded (alibi.py "exact")
    unrounded_rows = np.abs(slow_ref.slow_forward(cfg, tensors, ids, alibi_bias="exact")
                            - base).max(axis=1)
    unrounded = float(unrounded_rows.max())
    positions = np.arange(len(ids))
    bias_diff = float(np.abs(alibi.alibi_bias(cfg.num_attention_heads, positions, "hf")
                             - alibi.alibi_bias(cfg.num_attention_heads, positions,
                                                "exact")).max())
    if name in ROUNDING_FIXTURES:
        assert bias_diff > 0, f"{name}: HF's bf16 rounding leaves the bias unchanged"
        assert unrounded > 1e-3, \
            f"{name}: skipping the bf16 bias rounding barely matters (max change {unrounded:g})"

    late = (f", rows 256..{len(ids) - 1}: {unrounded_rows[256:].max():.3g}"
            if len(ids) > 256 else "")
    slopes = " ".join(f"2^{np.log2(s):.4g}" for s in alibi.hf_slopes_bf16(cfg.num_attention_heads))
    return (f"{name}: ok (exact={exact}) {cfg_json.get('model_type')} L={cfg.num_hidden_layers} "
            f"C={cfg.hidden_size} H={cfg.num_attention_heads} D={cfg.head_dim} "
            f"F={cfg.ffn_hidden_size} V={cfg.vocab_size} slopes [{slopes}], "
            f"zeroing a tensor moves >= {least:.3f}, no ALiBi bias moves {no_bias:.3f}, "
            f"skipping the bf16 bias rounding moves {unrounded:.3g} (rows 0..255: "
            f"{unrounded_rows[:256].max():.3g}{late}; bias differs by "
            f"{bias_diff:.3g} at positions 0..{len(ids) - 1}), "
            f"logit range [{saved.min():.2f}, {saved.max():.2f}] {fixture_io.dir_kib(d):.0f} KiB")


README_HEADING = "## `rw_*/`"


def write_readme(out_root):
    """Rewrite this generator's section of tests/fixtures/README.md (appended if absent); the
    sections other generators own are kept as they are."""
    lines = [
        README_HEADING,
        "",
        "Tiny seeded random Falcon-RW checkpoints (HF `FalconForCausalLM` with `alibi: true`, the",
        "layout of tiiuae/falcon-rw-1b / -7b: 24 / 36 layers, hidden 2048 / 4096, 32 / 64 heads)",
        "with reference logits from the float64 numpy loop `tools/python/wormref/slow_ref.py`",
        "(ALiBi bias from `wormref/alibi.py`; config resolution in `wormref/config.py`, which",
        "accepts `alibi: true` only for the numpy reference: the PyTorch `falcon_ref` is",
        "rotary-only and keeps refusing it). Generated (from the repo root, numpy only, no torch)",
        "with:",
        "",
        "    /usr/bin/python3 tools/python/make_rw_fixtures.py           # regenerate, verify",
        "    /usr/bin/python3 tools/python/make_rw_fixtures.py --check   # only verify",
        "",
        "The files are as for the Falcon fixtures above (config.json, model.safetensors, ids.txt",
        "with 12 ids (300 for `rw_alibi12_long_f32`), logits.npy `<f4` `[n_ids, vocab_size]`),",
        "except that logits.npy is the float64 forward pass rounded to float32, and",
        "`config.json` carries its own `model_type` and `architectures` (`rw_alibi6_bf16` is an",
        "RW-era config). Tensor names are exactly HF's: `transformer.word_embeddings.weight`,",
        "`transformer.h.{i}.input_layernorm.{weight,bias}`,",
        "`transformer.h.{i}.self_attention.query_key_value.{weight,bias}` (`[3 * hidden, hidden]`,",
        "rows per head h: q_h, k_h, v_h, head_dim rows each, HF `_split_heads` for",
        "multi_query=false without new_decoder_architecture),",
        "`transformer.h.{i}.self_attention.dense.{weight,bias}`,",
        "`transformer.h.{i}.post_attention_layernorm.{weight,bias}`,",
        "`transformer.h.{i}.mlp.dense_h_to_4h.{weight,bias}`,",
        "`transformer.h.{i}.mlp.dense_4h_to_h.{weight,bias}`, `transformer.ln_f.{weight,bias}`;",
        "no `lm_head.weight` (tied).",
        "",
        "Random init (numpy `default_rng([seed, 0])`, drawn in HF state_dict order):",
        f"Linear/Embedding weights ~ N(0, {WEIGHT_STD}), Linear biases ~ N(0, {BIAS_STD}),",
        f"LayerNorm weight ~ 1 + N(0, {LN_STD}), LayerNorm bias ~ N(0, {LN_STD});",
        "ids from `default_rng([seed, 1])` (index 3 is vocab_size-1, index 7 is 0). `--check`",
        "verifies that zeroing any single tensor moves the logits by > 1e-3 (measured on the",
        "first 12 ids: attention is causal, so those rows are the prefix's forward pass and a",
        "lower bound of the change over all ids), that dropping the ALiBi bias does too, and,",
        "for `rw_alibi12_long_f32`, that skipping HF's bf16 rounding of the bias does too.",
        "",
        "Forward pass (HF FalconDecoderLayer with parallel_attn=false; HF's Falcon ignores",
        "apply_residual_connection_post_layernorm, which is false here anyway):",
        "",
        "    h = x + dense(attn(input_layernorm(x)))",
        "    x = h + dense_4h_to_h(gelu(dense_h_to_4h(post_attention_layernorm(h))))   # exact erf GELU",
        "    logits = word_embeddings.weight @ ln_f(x)",
        "",
        "No rotary embedding: FalconAttention applies rotary only `if alibi is None`. Query head h",
        "at position i scores key position j <= i as",
        "",
        "    (q_i . k_j + bias[h, j]) / sqrt(head_dim)",
        "",
        "following FalconAttention.forward's alibi branch: `attention_logits = attention_scores +",
        "alibi.view(batch_size, self.num_heads, 1, -1)`, then `attention_logits *=",
        "self.inv_norm_factor` (1 / sqrt(head_dim)), then the causal softmax: the bias goes on",
        "the raw score, before the scaling. (The default SDPA path folds",
        "`alibi / math.sqrt(self.config.hidden_size // self.num_heads)` into the mask in",
        "FalconModel._update_causal_mask and adds it after scaling q.k: the same number, up to",
        "one rounding of bias / sqrt(head_dim) in the model dtype: exact for head_dim 16, one",
        "float32 rounding (relative 2^-24, invisible at 1e-4) for `rw_alibi12_long_f32`'s 8.)",
        "The bias uses the absolute key position j; the ALiBi paper's -slope * (i - j) differs",
        "by slope * i per query row, which softmax removes, so it gives the same probabilities",
        "in exact arithmetic but does not reproduce HF's bf16 roundings of slope * j.",
        "",
        "ALiBi bias, from HF's `build_alibi_tensor(attention_mask, num_heads, dtype)` (called by",
        "FalconModel.forward with `dtype=inputs_embeds.dtype` and, when no mask is passed,",
        "`attention_mask = torch.ones(..., dtype=torch.long)`):",
        "",
        "- slopes: c = `closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))`,",
        "  `base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)`",
        "  = 2^(-8/c), `slopes = torch.pow(base, powers)` with powers 1..c; when num_heads is not",
        "  a power of two, `extra_base` = 2^(-4/c) (the same formula with 2 * c) raised to the odd",
        "  powers 1, 3, ..., 2 * min(c, num_heads - c) - 1 is appended. So slope[h] =",
        "  2^(-8 (h+1) / c) for h < c and slope[c + j] = 2^(-4 (2j + 1) / c): 4 heads 2^-2, 2^-4,",
        "  2^-6, 2^-8; 6 heads 2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3.",
        "- key positions: `arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)`,",
        "  0..L-1 for an unpadded sequence (left padding shifts them; padded keys get 0).",
        "- `alibi = slopes[..., None].bfloat16() * arange_tensor`, then `.to(dtype)`.",
        "",
        "Roundings (PyTorch type promotion): base and extra_base are Python doubles rounded to",
        "float32; `torch.pow(float32 0-dim tensor, int32 tensor)` is float32; `.bfloat16()` rounds",
        "each slope to bf16 (nearest even). `arange_tensor` is int64 (a long mask and its cumsum),",
        "and bf16 tensor * int64 tensor has result dtype bfloat16 (the float category wins; an",
        "integer operand never widens it to float32): the position is converted to bf16 (exact",
        "up to 256; 257 -> 256, 259 -> 260, ...) and the product, exact in float32, is rounded to",
        "bf16. `.to(dtype)` is then exact for float32, bfloat16 and float16. So, for f32",
        "checkpoints as much as for bf16 ones,",
        "",
        "    bias[h, j] = bf16( bf16(slope_f32[h]) * bf16(j) )",
        "",
        "which the fixtures' logits use. On `rw_alibi_f32` and `rw_alibi6_bf16` every slope is a",
        "power of two and every position < 256, so all three roundings are exact: skipping them",
        "changes nothing (0.0, `--check` prints it), and those two cannot tell whether an engine",
        "rounds. `rw_alibi12_long_f32` can: 12 heads (c = 8) have the extra slopes 2^-0.5,",
        "2^-1.5, 2^-2.5, 2^-3.5, which bf16 rounds (0.70710677 -> 0.70703125, 0.35355338 ->",
        "0.35351562, 0.17677668 -> 0.17675781, 0.08838834 -> 0.08837891), and its 300 ids put",
        "key positions 257..299 where bf16(j) rounds (257 -> 256, 259 -> 260, ...); the bias",
        "differs from the unrounded slope * j by up to 1.21 (0.51 below position 256), and",
        "skipping the roundings moves its logits by up to 0.42 (0.15 in rows 0..255; `--check`",
        "asserts > 1e-3 and prints both). Each rounding on its own is visible too (max |logit",
        "change| when only it is skipped, check_reference.py asserts > 1e-3 for each): the",
        "slopes' 0.20, the positions' 0.45 (rows 256..299 only), the product's 0.16; a float32",
        "`-bf16(slope) * (i - j)` moves by 0.42. An engine that gets any of them wrong fails",
        "this fixture at 1e-4 while it passes the other two.",
        "The roundings matter for real models: with 32 heads (Falcon-RW-1B) c = 32, slope[0] =",
        "2^-0.25 = 0.8408964 becomes bf16 0.83984375 (24 of the 32 slopes change, by up to",
        "0.14%), and bias[0, 1000] is 840 instead of 840.896; positions above 256 are rounded",
        "for every head count. Measured: `rw_alibi_f32` and `rw_alibi6_bf16` run on 300 random",
        "ids move by 0 in positions 0..256 and by a few hundredths (rw_alibi_f32: 0.03..0.05) and",
        "~0.15..0.17 (rw_alibi6_bf16) in positions 257..299, depending on the ids, when the",
        "roundings are skipped; a 16-head variant of rw_alibi_f32 (not committed) moves by",
        "2.5e-3 at its 12 ids. `wormref.alibi.alibi_bias` gives the bias itself (spot values",
        "checked by check_reference.py) to compare an engine's directly.",
        "",
        "Suggested comparison: max |logit difference| <= 1e-4 (float32 rounding of the reference",
        "is ~1e-7).",
        "",
    ]
    for name, (cfg_json, dtype, seed, n_ids, what) in FIXTURES.items():
        cfg = load_config(cfg_json)
        lines.append(f"- `{name}` ({dtype}, seed {seed}, 1 file, {n_ids} ids; "
                     f"L={cfg.num_hidden_layers} hidden={cfg.hidden_size} "
                     f"heads={cfg.num_attention_heads} head_dim={cfg.head_dim} "
                     f"ffn={cfg.ffn_hidden_size} vocab={cfg.vocab_size}): {what}.")
    lines += [
        "",
        "Reference logits for other ids: `/usr/bin/python3 tools/python/rw_logits.py --model "
        "tests/fixtures/NAME --ids \"1 2 3\" --out /tmp/x.npy` (numpy loop: seconds for a few",
        "hundred ids on these fixtures).",
        "",
    ]
    fixture_io.replace_readme_section(out_root, README_HEADING, lines)


def main(argv=None):
    return fixture_io.fixture_main(argv, "generate / verify Falcon-RW (ALiBi) test fixtures",
                                   FIXTURES, generate, check, write_readme)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Write tiny seeded random Falcon checkpoints + reference logits to tests/fixtures/<name>/.

Each fixture directory holds:
    config.json                      HF (or RW-era) key names, model_type "falcon"
    model.safetensors                or model-0000i-of-0000N.safetensors + model.safetensors.index.json
    ids.txt                          one line of space-separated token ids
    logits.npy                       float32 '<f4', C order, shape [n_ids, vocab_size]

logits.npy is computed by falcon_ref in float32 from the checkpoint *as stored*
(it is reloaded after saving, so bf16/f16 rounding is included).

Usage:
    python3 tools/python/make_fixtures.py            # (re)generate all, then verify
    python3 tools/python/make_fixtures.py --check    # only verify existing fixtures
    python3 tools/python/make_fixtures.py --only mq_f32 [--out DIR]
"""

import json
import os
import shutil
import sys

import numpy as np
import torch

from wormref import falcon_ref, fixture_io

N_IDS = 12
WEIGHT_STD = 0.08   # Linear / Embedding weights ~ N(0, 0.08)
BIAS_STD = 0.05     # Linear biases ~ N(0, 0.05) when bias=true
LN_STD = 0.1        # LayerNorm weight ~ 1 + N(0, 0.1), bias ~ N(0, 0.1)

# Extra keys real HF Falcon configs carry; the engine must ignore them.
HF_NOISE = {"alibi": False, "apply_residual_connection_post_layernorm": False,
            "attention_dropout": 0.0, "hidden_dropout": 0.0, "initializer_range": 0.02,
            "use_cache": True}

# name -> (config.json content, storage dtype, shard count, seed, what it covers)
FIXTURES = {
    "newarch_gqa_f32": (dict(
        HF_NOISE, vocab_size=331, hidden_size=128, num_attention_heads=8, num_kv_heads=2,
        num_hidden_layers=2, new_decoder_architecture=True, multi_query=True, parallel_attn=True,
        bias=False, ffn_hidden_size=128, layer_norm_epsilon=1e-5, rope_theta=10000.0,
        max_position_embeddings=64, bos_token_id=11, eos_token_id=11),
        "f32", 1, 101,
        "Falcon-40B/180B layout: new_decoder_architecture, GQA 8 q heads / 2 kv heads "
        "(fused QKV in groups [q,q,q,q,k,v]), ln_attn + ln_mlp, no bias, tied embeddings, "
        "explicit ffn_hidden_size equal to hidden (1x), multi_query=true present but ignored "
        "(new arch wins)"),
    "newarch_gqa_bias_bf16": (dict(
        alibi=False, attention_dropout=0.0, hidden_dropout=0.0, initializer_range=0.02,
        vocab_size=389, hidden_size=128, n_head=8, n_head_kv=2, n_layer=2,
        new_decoder_architecture=True, parallel_attn=True, bias=True, ffn_hidden_size=256,
        layer_norm_epsilon=1e-5, max_position_embeddings=64, bos_token_id=11, eos_token_id=11),
        "bf16", 1, 102,
        "same layout with bias=true and BF16 storage; RW-era keys n_head / n_head_kv / n_layer "
        "(no num_* keys), rope_theta absent (default 10000)"),
    "newarch_1ln_f16": (dict(
        HF_NOISE, vocab_size=457, hidden_size=64, num_attention_heads=4, num_kv_heads=1,
        num_hidden_layers=2, new_decoder_architecture=True, multi_query=False,
        parallel_attn=True, num_ln_in_parallel_attn=1, bias=False, ffn_hidden_size=192,
        layer_norm_epsilon=1e-5, rope_theta=500042.0, max_position_embeddings=64,
        bos_token_id=11, eos_token_id=11),
        "f16", 1, 103,
        "Falcon2-11B layout: new arch with num_ln_in_parallel_attn=1 (input_layernorm only), "
        "4 q heads / 1 kv head, F16 storage, rope_theta=500042, ffn_hidden_size=3x hidden, "
        "multi_query=false present but ignored (new arch wins)"),
    "mq_f32": (dict(
        HF_NOISE, vocab_size=347, hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
        new_decoder_architecture=False, multi_query=True, parallel_attn=True, bias=False,
        layer_norm_epsilon=1e-5, max_position_embeddings=64, tie_word_embeddings=False,
        bos_token_id=11, eos_token_id=11),
        "f32", 1, 104,
        "Falcon-7B layout: multi_query (1 kv head, fused QKV [q*H, k, v]), parallel attn+MLP "
        "with one input_layernorm, no bias, UNTIED lm_head.weight, no rope_theta / "
        "ffn_hidden_size / num_kv_heads keys (defaults 10000, 4x hidden, 1)"),
    "mq_bias_bf16": (dict(
        HF_NOISE, vocab_size=503, hidden_size=80, num_attention_heads=5, num_hidden_layers=2,
        new_decoder_architecture=False, multi_query=True, parallel_attn=True, bias=True,
        layer_norm_epsilon=1e-5, rope_theta=10000.0, max_position_embeddings=64,
        bos_token_id=11, eos_token_id=11),
        "bf16", 2, 105,
        "multi_query with bias, odd head count (5 heads, hidden 80), BF16, sharded into "
        "model-00001-of-00002 / model-00002-of-00002 + model.safetensors.index.json (the cut "
        "falls inside layer 0: its mlp.dense_4h_to_h.bias is in the second file)"),
    "mha_bias_f32": (dict(
        HF_NOISE, vocab_size=419, hidden_size=64, num_attention_heads=2, num_hidden_layers=2,
        new_decoder_architecture=False, multi_query=False, parallel_attn=True, bias=True,
        layer_norm_epsilon=1e-5, rope_theta=1000.0, max_position_embeddings=64,
        bos_token_id=11, eos_token_id=11),
        "f32", 1, 106,
        "plain multi-head (fused QKV per head [q, k, v]), head_dim 32, parallel attn+MLP with "
        "one input_layernorm, bias, rope_theta=1000"),
    "mha_seq_bf16": (dict(
        HF_NOISE, vocab_size=613, hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
        new_decoder_architecture=False, multi_query=False, parallel_attn=False, bias=False,
        layer_norm_epsilon=1e-5, max_position_embeddings=64, bos_token_id=11, eos_token_id=11),
        "bf16", 1, 107,
        "plain multi-head, parallel_attn=false: x += attn(input_layernorm(x)); "
        "x += mlp(post_attention_layernorm(x)); no bias, BF16"),
}


def fixture_ids(vocab_size, seed):
    """N_IDS seeded random ids in [0, vocab); positions 3 and 7 forced to vocab-1 and 0."""
    rng = np.random.default_rng(seed)
    ids = [int(i) for i in rng.integers(0, vocab_size, size=N_IDS)]
    ids[3], ids[7] = vocab_size - 1, 0
    return ids


def generate(name, out_root):
    cfg_dict, dtype, shards, seed, _ = FIXTURES[name]
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    cfg = falcon_ref.FalconConfig.from_dict(cfg_dict)
    gen = torch.Generator().manual_seed(seed)
    bias_std = BIAS_STD if cfg.bias else 0.0
    model = falcon_ref.Falcon(cfg).init_weights(WEIGHT_STD, gen, bias_std=bias_std, ln_std=LN_STD)
    falcon_ref.save_checkpoint(d, cfg_dict, model, dtype=dtype, shards=shards)

    ids = fixture_ids(cfg.vocab_size, seed)
    fixture_io.write_ids(os.path.join(d, fixture_io.IDS_NAME), ids)
    _, stored = falcon_ref.load_checkpoint(d)          # logits from the stored (rounded) weights
    fixture_io.save_logits(os.path.join(d, fixture_io.LOGITS_NAME),
                           falcon_ref.compute_logits(stored, ids))


@torch.no_grad()
def check(name, out_root):
    """Reload a fixture, recompute logits, compare; also check every tensor matters.
    Returns a one-line summary; raises AssertionError on failure."""
    d = os.path.join(out_root, name)
    cfg, model = falcon_ref.load_checkpoint(d)
    ids = fixture_io.read_ids(os.path.join(d, fixture_io.IDS_NAME))
    saved = np.load(os.path.join(d, "logits.npy"))
    assert saved.dtype == np.dtype("<f4") and saved.flags.c_contiguous, saved.dtype
    assert saved.shape == (len(ids), cfg.vocab_size), saved.shape
    assert len(ids) <= cfg.max_position_embeddings
    assert cfg.vocab_size % 512 != 0
    got = falcon_ref.compute_logits(model, ids)
    diff = float(np.abs(got - saved).max())
    assert diff <= 1e-5, f"{name}: recomputed logits differ by {diff}"

    # Every tensor must influence the logits: zeroing it must move them visibly.
    base = torch.from_numpy(got)
    ids_t = torch.tensor(ids)
    for pname, prm in model.named_parameters():
        keep = prm.detach().clone()
        prm.zero_()
        moved = (model(ids_t) - base).abs().max().item()
        prm.copy_(keep)
        assert moved > 1e-3, f"{name}: tensor {pname} barely matters (max change {moved:g})"

    with open(os.path.join(d, "config.json")) as f:
        stored_cfg = json.load(f)
    size = sum(os.path.getsize(os.path.join(d, fn)) for fn in os.listdir(d))
    return (f"{name}: ok (exact={diff == 0.0}) {stored_cfg['torch_dtype']} "
            f"L={cfg.num_hidden_layers} C={cfg.hidden_size} H={cfg.num_attention_heads} "
            f"K={cfg.num_kv_heads} D={cfg.head_dim} F={cfg.ffn_hidden_size} V={cfg.vocab_size} "
            f"bias={cfg.bias} tied={cfg.tie_word_embeddings} "
            f"logit range [{saved.min():.2f}, {saved.max():.2f}] {size / 1024:.0f} KiB")


def write_readme(out_root):
    lines = [
        "# Falcon test fixtures",
        "",
        "Tiny seeded random Falcon checkpoints with reference logits, for checking the C++",
        "engine against an independent PyTorch reference (`tools/python/wormref/falcon_ref.py`).",
        "",
        "Generated (from the repo root) with:",
        "",
        "    /usr/bin/python3 tools/python/make_fixtures.py",
        "",
        "which rewrites every fixture dir listed below and then verifies them; "
        "`/usr/bin/python3 tools/python/make_fixtures.py --check` only verifies.",
        "Generated with Debian 12's python3-torch 1.13 / python3-numpy 1.24 (CPU); other torch",
        "versions may draw different random weights, so regenerate all fixtures together.",
        "",
        "## Files in each `<name>/`",
        "",
        "- `config.json`: HF FalconConfig keys (one fixture uses RW-era keys), plus",
        "  `model_type: \"falcon\"`, `architectures: [\"FalconForCausalLM\"]`, `torch_dtype`,",
        "  and keys real Falcon configs carry that an engine ignores (dropouts, use_cache, ...).",
        "- `model.safetensors`, or `model-0000i-of-0000N.safetensors` + `model.safetensors.index.json`",
        "  (`{\"metadata\": {\"total_size\": bytes}, \"weight_map\": {tensor: file}}`).",
        "  Every tensor in a file has the same dtype (F32, BF16 or F16), tensors are laid out in",
        "  sorted-name order, the JSON header is space-padded to a multiple of 8 bytes and has",
        "  `__metadata__: {\"format\": \"pt\"}`. Tensor names are exactly HF's.",
        "- `ids.txt`: one line of space-separated token ids "
        f"({N_IDS} ids; index 3 is vocab_size-1, index 7 is 0).",
        "- `logits.npy`: numpy `.npy` v1, dtype `<f4`, C order, shape `[n_ids, vocab_size]`:",
        "  full-sequence causal logits for all positions, computed in float32 from the weights",
        "  *as stored* (bf16/f16 values upcast exactly), positions 0..n_ids-1.",
        "",
        "Random init: Linear/Embedding weights ~ N(0, "
        f"{WEIGHT_STD}), Linear biases ~ N(0, {BIAS_STD}) when bias=true,",
        f"LayerNorm weight ~ 1 + N(0, {LN_STD}), LayerNorm bias ~ N(0, {LN_STD}). "
        "`--check` verifies that zeroing any single tensor moves the logits by > 1e-3.",
        "Fixtures without a `tie_word_embeddings` key use the default (true: no `lm_head.weight`,",
        "logits use `transformer.word_embeddings.weight`).",
        "",
        "Suggested comparison: max |logit difference| <= 1e-4. float32 engines land around",
        "1e-6..1e-5; a tanh-approximate GELU is off by ~5e-4 and a 1% rope_theta error by",
        "2e-4..2e-3 on these fixtures.",
        "",
        "## Fixtures",
        "",
    ]
    for name, (cfg_dict, dtype, shards, seed, what) in FIXTURES.items():
        cfg = falcon_ref.FalconConfig.from_dict(cfg_dict)
        lines.append(f"- `{name}` ({dtype}, seed {seed}, {shards} file{'s' if shards > 1 else ''}; "
                     f"L={cfg.num_hidden_layers} hidden={cfg.hidden_size} "
                     f"heads={cfg.num_attention_heads} kv={cfg.num_kv_heads} "
                     f"head_dim={cfg.head_dim} ffn={cfg.ffn_hidden_size} vocab={cfg.vocab_size}): "
                     f"{what}.")
    lines += [
        "",
        "Reference logits for other ids: "
        "`/usr/bin/python3 tools/python/falcon_logits.py --model tests/fixtures/NAME --ids \"1 2 3\" "
        "--out /tmp/x.npy`.",
        "",
    ]
    # Sections other generators own (`## \`default_model/\``, `## \`beams/\``) are kept as they are.
    path = os.path.join(out_root, "README.md")
    kept = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        start = old.find("\n## `")
        if start >= 0:
            kept = old[start:]
    with open(path, "w") as f:
        f.write("\n".join(lines) + kept)


def main(argv=None):
    return fixture_io.fixture_main(argv, "generate / verify Falcon test fixtures", FIXTURES,
                                   generate, check, write_readme,
                                   setup=lambda: torch.set_num_threads(1))  # reproducible f32 sums


if __name__ == "__main__":
    sys.exit(main())

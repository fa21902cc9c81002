#!/usr/bin/python3
"""Checks the Python reference and the committed fixtures with numpy only (no torch); run by
tools/test.sh, so CI needs python3-numpy but not python3-torch.

    /usr/bin/python3 tools/python/check_reference.py     # prints 'N passed, M failed'

- config parsing: wormref.config.FalconConfig resolves HF / RW-era keys and refuses what the
  references do not implement;
- safetensors codec: bf16 rounding against an independent float64 nearest-even derivation
  (ties, overflow to inf, NaN), F32/BF16/F16 write/read round trips;
- every Falcon fixture in tests/fixtures/ and default_model/: the files are as
  tests/fixtures/README.md describes them (header padded to 8 bytes, format "pt", one dtype per
  file, sorted-name order, the shard index's total_size and weight map), hold exactly HF's tensor
  names with a fused QKV of (H + 2K) * D rows, and logits.npy (written by the PyTorch
  falcon_ref) matches wormref.slow_ref's float64 per-token, per-head loop;
- llama: wormref.llama_config.LlamaConfig resolves HF LlamaConfig defaults and refuses (naming
  the key) contradictions and what llama_ref does not implement; llama_ref.inv_freq matches HF's
  default / linear / llama3 formulas written out per component (the llama3 fixture uses all three
  bands); every Llama fixture (tests/fixtures/llama_*) has the same file layout as the Falcon ones
  with exactly HF's tensor names and shapes, and logits.npy matches llama_ref recomputed
  (max |diff| < 1e-5), which matches a float64 per-token, per-head loop written here.
- falcon-rw (ALiBi): wormref.alibi's slopes against known values (4 heads 2^-2..2^-8; 6 heads
  2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3) and the ALiBi paper's formulation, HF's bf16 roundings of
  the bias at hand-worked positions, the bf16 slopes' independence of torch.pow's last float32
  ulp for 1..1024 heads; FalconConfig accepts alibi only with allow_alibi=True; every Falcon-RW
  fixture (tests/fixtures/rw_*) has the promised config keys and file layout with exactly HF's
  tensor names, and logits.npy matches wormref.slow_ref recomputed (max |diff| < 1e-5), which
  matches a vectorized forward pass with an independently built bias written here;
  rw_alibi12_long_f32 (12 heads, 300 ids) must see HF's bf16 rounding of the bias: skipping
  any one of its three roundings (slope, position, product) moves the logits by > 1e-3.
- greedy continuations (tools/python/greedy_ref.py): every fixture dir with config.json and
  ids.txt has a greedy.txt of the right length (64 new ids, or as many as
  max_position_embeddings allows) with ids in range; for the Llama fixtures and the two
  12-id Falcon-RW fixtures (rw_alibi_f32, rw_alibi6_bf16) greedy.txt is regenerated step by
  step from the reference and must come out identical (~15 s). The Falcon rotary fixtures
  (~30 s together) and rw_alibi12_long_f32 (~8 min: 64 slow_ref passes over 300+ ids) are
  regenerated only by `greedy_ref.py --check`.

The torch-only properties of falcon_ref (batch and causal consistency of the nn.Module,
gradients) matter only to the training recipe and are not checked here; make_fixtures.py
--check re-verifies the fixtures with torch when they are regenerated.
"""

import json
import math
import os
import sys
import tempfile
import traceback

import numpy as np

import greedy_ref
from wormref import REPO_ROOT, alibi, fixture_io, llama_ref, safetensors_io, slow_ref
from wormref.config import FalconConfig
from wormref.llama_config import LlamaConfig

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
# Fixture dir -> checkpoint dir (default_model holds only ids and logits of the shipped model).
CHECKPOINTS = {name: os.path.join(FIXTURES, name) for name in (
    "newarch_gqa_f32", "newarch_gqa_bias_bf16", "newarch_1ln_f16", "mq_f32", "mq_bias_bf16",
    "mha_bias_f32", "mha_seq_bf16")}
CHECKPOINTS["default_model"] = os.path.join(REPO_ROOT, "assets", "default-model")
TORCH_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
# Llama fixtures (tools/python/make_llama_fixtures.py); checked by the test_llama_* tests.
LLAMA_FIXTURES = ("llama_gqa4_f32", "llama_gqa2_tied_bias_bf16", "llama_mqa_linear_f16")


# --------------------------------------------------------------------------- config

def test_config_parsing():
    FC = FalconConfig
    rw = FC.from_dict(dict(n_head=8, n_head_kv=2, n_layer=3, n_embed=64, vocab_size=10,
                           new_decoder_architecture=True))
    assert (rw.num_attention_heads, rw.num_kv_heads, rw.num_hidden_layers, rw.hidden_size) == (8, 2, 3, 64)
    assert rw.num_ln_in_parallel_attn == 2 and rw.ffn_hidden_size == 256 and rw.rope_theta == 10000.0
    assert FC.from_dict(dict(hidden_size=64, num_attention_heads=8, multi_query=True,
                             num_kv_heads=8)).num_kv_heads == 1
    assert FC.from_dict(dict(hidden_size=64, num_attention_heads=8,
                             multi_query=False)).num_kv_heads == 8
    assert FC.from_dict(dict(hidden_size=64, num_attention_heads=8,
                             new_decoder_architecture=True)).num_kv_heads == 8
    assert FC.from_dict({}).tie_word_embeddings is True
    assert FC.from_dict(FC.from_dict(rw.to_dict()).to_dict()) == rw
    bad = [dict(alibi=True), dict(rope_scaling={"type": "linear", "factor": 2.0}),
           dict(hidden_size=64, num_attention_heads=8, new_decoder_architecture=True,
                parallel_attn=False),
           dict(hidden_size=64, num_attention_heads=8, num_kv_heads=3, new_decoder_architecture=True),
           dict(hidden_size=60, num_attention_heads=8),
           dict(n_head=8, num_attention_heads=4),
           dict(activation="relu")]
    for d in bad:
        try:
            FC.from_dict(d)
        except ValueError:
            continue
        raise AssertionError(f"accepted bad config {d}")


# --------------------------------------------------------------------------- safetensors codec

def _bf16_value(bits):
    """float64 value of bf16 bits, exponent unbounded (0x7F80 counts as 2^128, for overflow)."""
    sign = -1.0 if bits & 0x8000 else 1.0
    exp, man = (bits >> 7) & 0xFF, bits & 0x7F
    if exp == 0:
        return sign * math.ldexp(man / 128.0, -126)
    return sign * math.ldexp(1.0 + man / 128.0, exp - 127)


def _bf16_nearest_even(x):
    """bf16 bits nearest to float32 x by float64 distance, ties to an even mantissa (IEEE RNE)."""
    u = int(np.array([x], np.float32).view(np.uint32)[0])
    lo = u >> 16                               # truncation toward zero, same sign
    hi = lo + 1                                # next magnitude up (may be 0x7F80 = inf)
    v = float(x)
    d_lo, d_hi = abs(v - _bf16_value(lo)), abs(v - _bf16_value(hi))
    if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0):
        return lo
    return hi


def test_bf16_rounding():
    rng = np.random.default_rng(0)
    ties = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x3F80FFFF, 0x7F7FFFFF, 0x00008000,
                     0x00018000, 0x7F7F8000, 0x7F7F7FFF], dtype=np.uint32).view(np.float32)
    x = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 10,
                        rng.standard_normal(1000).astype(np.float32) * 1e-39,   # subnormals
                        ties, np.array([0.0, -0.0, 1e-40], dtype=np.float32)])
    ours = safetensors_io.f32_to_bf16_bits(x)
    want = np.array([_bf16_nearest_even(v) for v in x], dtype=np.uint16)
    bad = np.nonzero(ours != want)[0]
    assert bad.size == 0, [(hex(int(x[i:i + 1].view(np.uint32)[0])), hex(ours[i]), hex(want[i]))
                           for i in bad[:5]]
    # spot values: tie to even down, tie to even up, max float overflows to inf
    assert list(ours[-12:-9]) == [0x3F80, 0x3F82, 0xBF80], [hex(b) for b in ours[-12:-9]]
    assert ours[-8] == 0x7F80, hex(ours[-8])
    back = safetensors_io.bf16_bits_to_f32(ours)
    assert np.array_equal(back.view(np.uint32), ours.astype(np.uint32) << 16)
    special = safetensors_io.f32_to_bf16_bits(np.array([np.inf, -np.inf, np.nan, -np.nan], np.float32))
    assert list(special[:2]) == [0x7F80, 0xFF80], [hex(b) for b in special]
    assert np.isnan(safetensors_io.bf16_bits_to_f32(special[2:])).all()


def test_safetensors_roundtrip():
    rng = np.random.default_rng(1)
    tensors = {"b": rng.standard_normal((3, 5)).astype(np.float32),
               "a.weight": rng.standard_normal(7).astype(np.float32),
               "scalar": np.array(2.5, dtype=np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        for dt in ("F32", "BF16", "F16"):
            path = os.path.join(tmp, f"t_{dt}.safetensors")
            safetensors_io.write_safetensors(path, tensors, dt, {"format": "pt"})
            header, meta, start = safetensors_io.read_header(path)
            assert start % 8 == 0 and meta == {"format": "pt"}
            got, dtypes, _ = safetensors_io.read_safetensors(path)
            assert set(dtypes.values()) == {dt}
            for k, v in tensors.items():
                assert got[k].shape == v.shape and got[k].dtype == np.float32
                assert np.array_equal(got[k], safetensors_io.round_to_dtype(v, dt)), (dt, k)
            stored, _ = safetensors_io.read_stored(path)
            for k, (sdt, shape, arr) in stored.items():
                assert sdt == dt and shape == tensors[k].shape
                assert arr.dtype == np.dtype(safetensors_io.STORED_NUMPY_TYPES[dt])
        f16 = safetensors_io.round_to_dtype(tensors["b"], "f16")
        assert np.abs(f16 - tensors["b"]).max() <= np.abs(tensors["b"]).max() * 2.0 ** -11


# --------------------------------------------------------------------------- fixtures

def _load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg_json = json.load(f)
    return cfg_json, FalconConfig.from_dict(cfg_json)


def _check_file_layout(path, cfg_json):
    """The safetensors layout tests/fixtures/README.md promises; returns {name: dtype}."""
    header, meta, start = safetensors_io.read_header(path)
    assert start % 8 == 0, f"{path}: header not padded to 8 bytes"
    assert meta == {"format": "pt"}, f"{path}: metadata {meta}"
    stored, _ = safetensors_io.read_stored(path)             # offsets tile the buffer
    dtypes = {d for d, _, _ in stored.values()}
    assert len(dtypes) == 1, f"{path}: dtypes {dtypes}"
    assert cfg_json["torch_dtype"] == TORCH_DTYPES[dtypes.pop()], f"{path}: torch_dtype"
    by_offset = sorted(header, key=lambda n: header[n]["data_offsets"][0])
    assert by_offset == sorted(header), f"{path}: tensors not in sorted-name order"
    return stored


def _check_checkpoint_files(name, d, cfg_json):
    """Every safetensors file of checkpoint dir d as _check_file_layout wants it, and the shard
    index (file names, weight map, total_size) when there is one; returns {name: stored}."""
    index_path = os.path.join(d, safetensors_io.INDEX_NAME)
    if not os.path.exists(index_path):
        return _check_file_layout(os.path.join(d, safetensors_io.SINGLE_NAME), cfg_json)
    stored = {}
    with open(index_path) as f:
        index = json.load(f)
    files = sorted(set(index["weight_map"].values()))
    assert files == [f"model-{i:05d}-of-{len(files):05d}.safetensors"
                     for i in range(1, len(files) + 1)], f"{name}: {files}"
    for fn in files:
        part = _check_file_layout(os.path.join(d, fn), cfg_json)
        assert all(index["weight_map"][t] == fn for t in part), f"{name}: {fn} map"
        stored.update(part)
    assert set(index["weight_map"]) == set(stored), f"{name}: weight_map"
    total = sum(a.nbytes for _, _, a in stored.values())
    assert index["metadata"]["total_size"] == total, f"{name}: total_size"
    return stored


def test_fixture_files():
    for name, d in CHECKPOINTS.items():
        cfg_json, cfg = _load(d)
        assert cfg_json["model_type"] == "falcon", name
        assert cfg_json["architectures"] == ["FalconForCausalLM"], name
        stored = _check_checkpoint_files(name, d, cfg_json)
        want = slow_ref.expected_keys(cfg)
        assert sorted(stored) == sorted(want), f"{name}: {sorted(set(stored) ^ set(want))}"
        for layer in range(cfg.num_hidden_layers):
            shape = stored[f"transformer.h.{layer}.self_attention.query_key_value.weight"][1]
            assert shape == (cfg.qkv_out_dim, cfg.hidden_size), f"{name}: qkv {shape}"


def test_fixture_logits_vs_slow_loop():
    for name, d in CHECKPOINTS.items():
        _, cfg = _load(d)
        sd = {k: v.astype(np.float64) for k, v in safetensors_io.read_model_dir(d).items()}
        with open(os.path.join(FIXTURES, name, "ids.txt")) as f:
            ids = [int(t) for t in f.read().split()]
        saved = np.load(os.path.join(FIXTURES, name, "logits.npy"))
        assert saved.dtype == np.dtype("<f4") and saved.shape == (len(ids), cfg.vocab_size), name
        want = slow_ref.slow_forward(cfg, sd, ids)
        err = float(np.abs(saved - want).max())
        assert err < 2e-5 * max(1.0, float(np.abs(want).max())), f"{name}: max |diff| {err}"
        assert np.abs(want).max() > 0.5, f"{name}: degenerate logits"


# --------------------------------------------------------------------------- llama

def _refused(d, key):
    """LlamaConfig.from_dict(d) must raise ValueError whose message names `key`."""
    try:
        LlamaConfig.from_dict(d)
    except ValueError as e:
        assert key in str(e), f"refusal of {d} does not name {key!r}: {e}"
        return
    raise AssertionError(f"accepted bad llama config {d}")


def test_llama_config():
    LC = LlamaConfig
    c = LC.from_dict({})                                   # HF LlamaConfig defaults
    assert (c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
            c.head_dim) == (4096, 32, 32, 128)
    assert (c.intermediate_size, c.num_hidden_layers, c.vocab_size) == (11008, 32, 32000)
    assert (c.rms_norm_eps, c.rope_theta, c.rope_type,
            c.max_position_embeddings) == (1e-6, 10000.0, "default", 2048)
    assert not (c.attention_bias or c.mlp_bias or c.tie_word_embeddings)
    assert (c.bos_token_id, c.eos_token_id, c.rope_scaling) == (1, 2, None)
    # Falcon3-7B's config.json: explicit head_dim, GQA 12:4, rope_theta 1000042
    f3 = LC.from_dict(dict(hidden_size=3072, intermediate_size=23040, num_attention_heads=12,
                           num_key_value_heads=4, head_dim=256, num_hidden_layers=28,
                           rope_theta=1000042, rope_scaling=None, vocab_size=131072,
                           hidden_act="silu", pretraining_tp=1, eos_token_id=11))
    assert (f3.head_dim, f3.group_size, f3.rope_theta, f3.eos_token_id) == (256, 3, 1000042.0, 11)
    assert LC.from_dict(dict(hidden_size=64, num_attention_heads=4, head_dim=32)).head_dim == 32
    lin = LC.from_dict(dict(rope_scaling={"type": "linear", "factor": 2.0}))
    assert (lin.rope_type, lin.rope_factor) == ("linear", 2.0)
    assert LC.from_dict(dict(rope_scaling={"rope_type": "default"})).rope_type == "default"
    l3 = LC.from_dict(dict(eos_token_id=[128001, 128009], rope_scaling=dict(
        rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=8192)))
    assert l3.eos_token_id == (128001, 128009) and l3.original_max_position_embeddings == 8192
    for cfg in (c, f3, lin, l3):
        assert LC.from_dict(cfg.to_dict()) == cfg
    l3s = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 32}
    _refused(dict(num_attention_heads=8, num_key_value_heads=3), "num_key_value_heads")
    _refused(dict(hidden_size=60, num_attention_heads=8), "head_dim")
    _refused(dict(hidden_size=64, num_attention_heads=4, head_dim=15), "head_dim")
    _refused(dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "rope_type")
    _refused(dict(rope_scaling={"type": "yarn", "factor": 2.0}), "rope_type")
    _refused(dict(rope_scaling={"rope_type": "linear", "type": "llama3", "factor": 2.0}), "type")
    _refused(dict(rope_scaling={"rope_type": "linear"}), "factor")
    _refused(dict(rope_scaling={"rope_type": "linear", "factor": 0.5}), "factor")
    _refused(dict(rope_scaling={k: v for k, v in l3s.items() if k != "low_freq_factor"}),
             "low_freq_factor")
    _refused(dict(rope_scaling=dict(l3s, high_freq_factor=1.0)), "high_freq_factor")
    _refused(dict(rope_scaling=dict(l3s, original_max_position_embeddings=0)),
             "original_max_position_embeddings")
    _refused(dict(rope_scaling="linear"), "rope_scaling")
    _refused(dict(hidden_act="gelu"), "hidden_act")
    _refused(dict(partial_rotary_factor=0.5), "partial_rotary_factor")
    _refused(dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4}), "rope_parameters")


def _inv_freq_scalar(cfg, i):
    """inv_freq component i written out from HF's formulas one scalar at a time."""
    d = cfg.head_dim
    base = 1.0 / cfg.rope_theta ** (2.0 * i / d)
    if cfg.rope_type == "linear":
        return base / cfg.rope_factor
    if cfg.rope_type != "llama3":
        return base
    wavelen = 2.0 * math.pi / base
    omax, lo, hi, f = (cfg.original_max_position_embeddings, cfg.low_freq_factor,
                       cfg.high_freq_factor, cfg.rope_factor)
    if wavelen < omax / hi:
        return base
    if wavelen > omax / lo:
        return base / f
    s = (omax / wavelen - lo) / (hi - lo)
    return (1.0 - s) * base / f + s * base


def test_llama_inv_freq():
    for name in LLAMA_FIXTURES:
        _, cfg = _load_llama(os.path.join(FIXTURES, name))
        got = llama_ref.inv_freq(cfg)
        want = np.array([_inv_freq_scalar(cfg, i) for i in range(cfg.head_dim // 2)])
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-13, atol=0), name
    _, cfg = _load_llama(os.path.join(FIXTURES, "llama_gqa2_tied_bias_bf16"))
    assert llama_ref.llama3_bands(cfg) == ["high", "medium"] + ["low"] * 6
    got = llama_ref.inv_freq(cfg)                # 10000^(-2i/16): i=0 kept, 1 smoothed, 2.. / 8
    s = (32 / (2 * math.pi / 10000 ** -0.125) - 1.0) / 3.0
    assert got[0] == 1.0 and abs(got[1] / 10000 ** -0.125 - ((1 - s) / 8 + s)) < 1e-14
    assert np.allclose(got[2:], 10000.0 ** (-np.arange(2, 8) / 8.0) / 8, rtol=1e-14)


def _llama_slow(cfg, sd, ids):
    """float64 per-token, per-head loop over explicit weight row slices (shares no code with
    llama_ref): ids -> logits [T, V]."""
    d, g, eps = cfg.head_dim, cfg.group_size, cfg.rms_norm_eps
    inv = [_inv_freq_scalar(cfg, i) for i in range(d // 2)]

    def lin(name, v):
        return sd[name + ".weight"] @ v + sd.get(name + ".bias", 0.0)

    def rms(v, w):
        return v / math.sqrt(float(v @ v) / v.shape[0] + eps) * w

    def rope(vec, pos):
        out = vec.copy()
        for i in range(d // 2):
            a, b, ang = vec[i], vec[i + d // 2], pos * inv[i]
            out[i] = a * math.cos(ang) - b * math.sin(ang)
            out[i + d // 2] = b * math.cos(ang) + a * math.sin(ang)
        return out

    xs = [sd["model.embed_tokens.weight"][i].copy() for i in ids]
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        ys = [rms(x, sd[p + "input_layernorm.weight"]) for x in xs]
        qs = [lin(p + "self_attn.q_proj", y) for y in ys]
        ks = [lin(p + "self_attn.k_proj", y) for y in ys]
        vs = [lin(p + "self_attn.v_proj", y) for y in ys]
        for t in range(len(xs)):
            merged = []
            for h in range(cfg.num_attention_heads):
                kv = slice((h // g) * d, (h // g + 1) * d)
                q = rope(qs[t][h * d:(h + 1) * d], t)
                sc = [q @ rope(ks[s][kv], s) / math.sqrt(d) for s in range(t + 1)]
                e = [math.exp(v - max(sc)) for v in sc]
                merged.append(sum(e[s] / sum(e) * vs[s][kv] for s in range(t + 1)))
            xs[t] = xs[t] + lin(p + "self_attn.o_proj", np.concatenate(merged))
            n = rms(xs[t], sd[p + "post_attention_layernorm.weight"])
            gate = lin(p + "mlp.gate_proj", n)
            act = np.array([v / (1.0 + math.exp(-v)) for v in gate])
            xs[t] = xs[t] + lin(p + "mlp.down_proj", act * lin(p + "mlp.up_proj", n))
    head = sd["model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"]
    return np.stack([head @ rms(x, sd["model.norm.weight"]) for x in xs])


def _load_llama(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg_json = json.load(f)
    return cfg_json, LlamaConfig.from_dict(cfg_json)


def test_llama_fixture_files():
    for name in LLAMA_FIXTURES:
        d = os.path.join(FIXTURES, name)
        cfg_json, cfg = _load_llama(d)
        assert cfg_json["model_type"] == "llama", name
        assert cfg_json["architectures"] == ["LlamaForCausalLM"], name
        assert cfg_json["hidden_act"] == "silu" and cfg_json["pretraining_tp"] == 1, name
        stored = _check_checkpoint_files(name, d, cfg_json)
        want = llama_ref.expected_shapes(cfg)
        assert sorted(stored) == sorted(want), f"{name}: {sorted(set(stored) ^ set(want))}"
        for t, shape in want.items():
            assert stored[t][1] == shape, f"{name}: {t} {stored[t][1]} != {shape}"


def test_llama_fixture_logits():
    for name in LLAMA_FIXTURES:
        d = os.path.join(FIXTURES, name)
        cfg, tensors = llama_ref.load_checkpoint(d)
        with open(os.path.join(d, "ids.txt")) as f:
            ids = [int(t) for t in f.read().split()]
        assert len(ids) == 12 and ids[3] == cfg.vocab_size - 1 and ids[7] == 0, name
        saved = np.load(os.path.join(d, "logits.npy"))
        assert saved.dtype == np.dtype("<f4") and saved.shape == (len(ids), cfg.vocab_size), name
        want = llama_ref.logits(cfg, tensors, ids)
        err = float(np.abs(saved - want).max())
        assert err < 1e-5, f"{name}: logits.npy vs llama_ref max |diff| {err}"
        slow = _llama_slow(cfg, {k: v.astype(np.float64) for k, v in tensors.items()}, ids)
        err = float(np.abs(slow - want).max())
        assert err < 1e-9, f"{name}: llama_ref vs the slow loop max |diff| {err}"
        assert np.abs(want).max() > 0.5, f"{name}: degenerate logits"


# --------------------------------------------------------------------------- falcon-rw (alibi)

def _alibi_paper_slopes(n):
    """ALiBi slopes the way the ALiBi paper's reference code (and BLOOM) writes them: a
    geometric sequence start, start^2, ..., start = 2^(-8/n) for a power of two n; otherwise
    the closest power of two c's sequence followed by every other slope of 2c's, first n - c.
    (HF Falcon's base / odd-power formula is the same list, capped at 2c heads.)"""
    def power_of_2(m):
        start = 2.0 ** (-(2.0 ** -(math.log2(m) - 3)))
        return [start * start ** i for i in range(m)]
    c = 2 ** int(math.floor(math.log2(n)))
    if c == n:
        return power_of_2(n)
    return power_of_2(c) + power_of_2(2 * c)[0::2][:min(c, n - c)]


def test_alibi_slopes():
    # Known values: 4 heads 2^-2, 2^-4, 2^-6, 2^-8; 6 heads (closest power 4, then HF's extra
    # base 2^(-4/4) = 2^-1 at odd powers 1, 3): 2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3.
    known = {1: [-8], 2: [-4, -8], 3: [-4, -8, -2], 4: [-2, -4, -6, -8],
             6: [-2, -4, -6, -8, -1, -3], 8: [-1, -2, -3, -4, -5, -6, -7, -8],
             12: [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]}
    for n, exps in known.items():
        want = [2.0 ** e for e in exps]
        assert list(alibi.alibi_slopes(n)) == want, (n, alibi.alibi_slopes(n))
    for n in (1, 2, 3, 4, 6, 8):      # powers of two: no rounding anywhere
        assert list(alibi.hf_slopes_bf16(n).astype(np.float64)) == [2.0 ** e for e in known[n]]
    for n in range(1, 300):
        got = alibi.alibi_slopes(n)
        assert got.shape == (n,) and np.allclose(got, _alibi_paper_slopes(n), rtol=1e-12), n
    # Falcon-RW-1B (32 heads) and -7B (64 heads): slopes 2^(-k/4) and 2^(-k/8), k = 1..H.
    assert np.allclose(alibi.alibi_slopes(32), 2.0 ** (-np.arange(1, 33) / 4), rtol=1e-15)
    assert np.allclose(alibi.alibi_slopes(64), 2.0 ** (-np.arange(1, 65) / 8), rtol=1e-15)
    # 32 heads in bf16: 2^-0.25 = 0.8408964 -> 0.83984375 (bits 0x3F57); 24 of 32 slopes change.
    b32 = alibi.hf_slopes_bf16(32)
    assert safetensors_io.f32_to_bf16_bits(b32[:1])[0] == 0x3F57 and b32[0] == 0.83984375
    assert int((b32.astype(np.float64) != alibi.alibi_slopes(32)).sum()) == 24
    # The bf16 slopes must not depend on the last float32 ulp of torch.pow (within 1 ulp): no
    # float32 slope of 1..1024 heads lies within 2 ulps of a bf16 rounding midpoint, and
    # rounding the exact slope gives the same bf16 value.
    for n in range(1, 1025):
        f = alibi.hf_slopes_f32(n)
        low = f.view(np.uint32).astype(np.int64) & 0xFFFF
        assert np.abs(low - 0x8000).min() >= 2, n
        exact_bf16 = alibi.bf16(alibi.alibi_slopes(n).astype(np.float32))
        assert np.array_equal(exact_bf16, alibi.bf16(f)), n


def test_alibi_bias():
    pos = [0, 1, 2, 255, 256, 257, 258, 259, 300, 301, 513]
    b = alibi.alibi_bias(4, pos)
    # slope 2^-2 is exact; positions round in bf16: 257 -> 256, 259 -> 260, 301 -> 300, 513 -> 512
    assert list(b[0]) == [0, 0.25, 0.5, 63.75, 64, 64, 64.5, 65, 75, 75, 128], list(b[0])
    assert list(b[3]) == [p / 256 for p in (0, 1, 2, 255, 256, 256, 258, 260, 300, 300, 512)]
    exact = alibi.alibi_bias(4, pos, "exact")
    assert np.array_equal(exact, np.outer([0.25, 2 ** -4, 2 ** -6, 2 ** -8], pos))
    assert np.array_equal(b[:, :5], exact[:, :5])        # nothing rounds below 256
    b6 = alibi.alibi_bias(6, range(12))
    assert np.array_equal(b6, np.outer(2.0 ** np.array([-2, -4, -6, -8, -1, -3]), range(12)))
    # 32 heads (Falcon-RW-1B): bf16(0.83984375 * 3) = 2.515625, bf16(0.83984375 * 1000) = 840
    b32 = alibi.alibi_bias(32, [1, 3, 1000])
    assert list(b32[0]) == [0.83984375, 2.515625, 840.0], list(b32[0])
    assert abs(alibi.alibi_bias(32, [1000], "exact")[0, 0] - 1000 * 2 ** -0.25) < 1e-9
    # Every "hf" value is a bf16 value, and within bf16 rounding of the exact product.
    many = alibi.alibi_bias(71, range(0, 3000, 7))
    assert np.array_equal(alibi.bf16(many.astype(np.float32)).astype(np.float64), many)
    ex = alibi.alibi_bias(71, range(0, 3000, 7), "exact")
    assert np.all(np.abs(many - ex) <= np.abs(ex) * 3 * 2.0 ** -8 + 1e-12)
    # key positions: (cumsum(mask) - 1) * mask; left padding shifts, padded keys get 0.
    assert list(alibi.key_positions([1, 1, 1, 1])) == [0, 1, 2, 3]
    assert list(alibi.key_positions([0, 0, 1, 1, 1])) == [0, 0, 0, 1, 2]


def test_rw_config():
    FC = FalconConfig
    # alibi is refused by default (falcon_ref, PyTorch, is rotary-only) ...
    try:
        FC.from_dict(dict(alibi=True))
    except ValueError as e:
        assert "alibi" in str(e), e
    else:
        raise AssertionError("alibi accepted without allow_alibi")
    # ... and accepted for the numpy reference. Falcon-RW-1B / -7B (RW-era and HF key names).
    rw1b = FC.from_dict(dict(alibi=True, n_head=32, n_layer=24, hidden_size=2048,
                             multi_query=False, parallel_attn=False, bias=True, vocab_size=50304,
                             apply_residual_connection_post_layernorm=False), allow_alibi=True)
    assert rw1b.alibi and (rw1b.num_attention_heads, rw1b.num_kv_heads, rw1b.num_hidden_layers,
                           rw1b.head_dim, rw1b.ffn_hidden_size) == (32, 32, 24, 64, 8192)
    assert rw1b.layernorm_names == ("input_layernorm", "post_attention_layernorm")
    assert rw1b.max_position_embeddings == 2048 and rw1b.qkv_out_dim == 3 * 2048
    rw7b = FC.from_dict(dict(alibi=True, num_attention_heads=64, num_hidden_layers=36,
                             hidden_size=4096, multi_query=False, parallel_attn=False, bias=True,
                             new_decoder_architecture=False), allow_alibi=True)
    assert (rw7b.num_kv_heads, rw7b.head_dim, rw7b.alibi) == (64, 64, True)
    assert FC.from_dict(dict(n_embed=96, n_head=6, alibi=True, multi_query=False),
                        allow_alibi=True).hidden_size == 96
    assert FC.from_dict(rw1b.to_dict(), allow_alibi=True) == rw1b
    assert FC.from_dict(rw1b.to_dict(), allow_alibi=True).to_dict()["alibi"] is True
    assert FC.from_dict({}).alibi is False and FC.from_dict({}).to_dict()["alibi"] is False
    # rope_theta is read and ignored with alibi; HF refuses rope_scaling with alibi.
    assert FC.from_dict(dict(alibi=True, rope_theta=500.0), allow_alibi=True).rope_theta == 500.0
    try:
        FC.from_dict(dict(alibi=True, rope_scaling={"type": "linear", "factor": 2.0}),
                     allow_alibi=True)
    except ValueError as e:
        assert "rope_scaling" in str(e), e
    else:
        raise AssertionError("rope_scaling accepted with alibi")


# name -> (model_type, architectures, keys config.json must hold, keys it must not hold,
#          number of ids, whether HF's bf16 rounding of the bias must be visible in the logits)
RW_FIXTURES = {
    "rw_alibi_f32": ("falcon", ["FalconForCausalLM"],
                     ("alibi", "hidden_size", "num_attention_heads", "num_hidden_layers"),
                     ("max_position_embeddings", "rope_theta", "n_head", "ffn_hidden_size"),
                     12, False),
    "rw_alibi6_bf16": ("RefinedWebModel", ["RWForCausalLM"],
                       ("alibi", "n_embed", "n_head", "n_layer"),
                       ("hidden_size", "num_attention_heads", "num_hidden_layers",
                        "new_decoder_architecture", "max_position_embeddings"),
                       12, False),
    "rw_alibi12_long_f32": ("falcon", ["FalconForCausalLM"],
                            ("alibi", "hidden_size", "num_attention_heads", "num_hidden_layers",
                             "max_position_embeddings"),
                            ("rope_theta", "n_head", "n_embed", "ffn_hidden_size"),
                            300, True),
}


def _load_rw(name):
    d = os.path.join(FIXTURES, name)
    with open(os.path.join(d, "config.json")) as f:
        cfg_json = json.load(f)
    return d, cfg_json, FalconConfig.from_dict(cfg_json, allow_alibi=True)


def test_rw_fixture_files():
    for name, (model_type, archs, present, absent, _, _) in RW_FIXTURES.items():
        d, cfg_json, cfg = _load_rw(name)
        assert cfg_json["model_type"] == model_type and cfg_json["architectures"] == archs, name
        assert all(k in cfg_json for k in present), (name, present)
        assert not any(k in cfg_json for k in absent), (name, absent)
        assert cfg.alibi and not cfg.multi_query and not cfg.new_decoder_architecture, name
        assert not cfg.parallel_attn and cfg.bias and cfg.tie_word_embeddings, name
        assert cfg.num_kv_heads == cfg.num_attention_heads, name
        assert not os.path.exists(os.path.join(d, safetensors_io.INDEX_NAME)), name
        stored = _check_checkpoint_files(name, d, cfg_json)
        want = slow_ref.expected_keys(cfg)
        assert sorted(stored) == sorted(want), f"{name}: {sorted(set(stored) ^ set(want))}"
        assert "lm_head.weight" not in stored, name
        c, f = cfg.hidden_size, cfg.ffn_hidden_size
        for layer in range(cfg.num_hidden_layers):
            p = f"transformer.h.{layer}."
            for t, shape in (("self_attention.query_key_value.weight", (3 * c, c)),
                             ("self_attention.query_key_value.bias", (3 * c,)),
                             ("self_attention.dense.weight", (c, c)),
                             ("mlp.dense_h_to_4h.weight", (f, c)),
                             ("mlp.dense_4h_to_h.weight", (c, f)),
                             ("input_layernorm.bias", (c,)),
                             ("post_attention_layernorm.weight", (c,))):
                assert stored[p + t][1] == shape, f"{name}: {p + t} {stored[p + t][1]}"


def _rw_vectorized(cfg, sd, ids, bias):
    """Falcon-RW forward pass, float64, whole-sequence numpy (shares no code with slow_ref):
    bias [H, T, T] is added to the raw q.k scores before the 1/sqrt(head_dim) scaling."""
    t_len, h, d, c = len(ids), cfg.num_attention_heads, cfg.head_dim, cfg.hidden_size
    eps = cfg.layer_norm_epsilon
    erf = np.vectorize(math.erf)

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * sd[name + ".weight"] + sd[name + ".bias"]

    def lin(x, name):
        return x @ sd[name + ".weight"].T + sd[name + ".bias"]

    future = np.triu(np.ones((t_len, t_len), dtype=bool), 1)
    x = sd["transformer.word_embeddings.weight"][ids]
    for layer in range(cfg.num_hidden_layers):
        p = f"transformer.h.{layer}."
        qkv = lin(ln(x, p + "input_layernorm"), p + "self_attention.query_key_value")
        qkv = qkv.reshape(t_len, h, 3, d)                       # per head [q, k, v]
        q, k, v = (qkv[:, :, i].transpose(1, 0, 2) for i in range(3))   # [H, T, D]
        s = (q @ k.transpose(0, 2, 1) + bias) / math.sqrt(d)
        s = np.where(future, -np.inf, s)
        e = np.exp(s - s.max(-1, keepdims=True))
        att = (e / e.sum(-1, keepdims=True)) @ v                # [H, T, D]
        x = x + lin(att.transpose(1, 0, 2).reshape(t_len, c), p + "self_attention.dense")
        y = lin(ln(x, p + "post_attention_layernorm"), p + "mlp.dense_h_to_4h")
        x = x + lin(0.5 * y * (1.0 + erf(y / math.sqrt(2.0))), p + "mlp.dense_4h_to_h")
    return ln(x, "transformer.ln_f") @ sd["transformer.word_embeddings.weight"].T


def test_rw_fixture_logits():
    for name, (_, _, _, _, n_ids, rounding_visible) in RW_FIXTURES.items():
        d, _, cfg = _load_rw(name)
        sd = {k: v.astype(np.float64) for k, v in safetensors_io.read_model_dir(d).items()}
        with open(os.path.join(d, "ids.txt")) as f:
            ids = [int(t) for t in f.read().split()]
        assert len(ids) == n_ids and ids[3] == cfg.vocab_size - 1 and ids[7] == 0, name
        assert all(0 <= i < cfg.vocab_size for i in ids), name
        saved = np.load(os.path.join(d, "logits.npy"))
        assert saved.dtype == np.dtype("<f4") and saved.shape == (len(ids), cfg.vocab_size), name
        want = slow_ref.slow_forward(cfg, sd, ids)       # the float64 loop: ~7 s for 300 ids
        err = float(np.abs(saved - want).max())
        assert err < 1e-5, f"{name}: logits.npy vs slow_ref max |diff| {err}"
        assert np.abs(want).max() > 0.5, f"{name}: degenerate logits"
        t_len, n = len(ids), cfg.num_attention_heads
        pos = np.arange(t_len)
        pos_f32 = pos.astype(np.float32)
        bf16 = alibi.bf16

        def fwd(bias):
            """the vectorized forward with bias [H, T] per key position or [H, T, T]"""
            if bias.ndim == 2:
                bias = np.broadcast_to(bias.astype(np.float64)[:, None, :], (n, t_len, t_len))
            return _rw_vectorized(cfg, sd, ids, bias)

        # An independent bias: the paper-style slopes, bf16-rounded here, times bf16(j).
        paper = np.array(_alibi_paper_slopes(n), dtype=np.float64)
        slopes = bf16(paper.astype(np.float32))
        bias = bf16(slopes[:, None] * bf16(pos_f32)[None, :])
        assert np.array_equal(bias.astype(np.float64), alibi.alibi_bias(n, pos)), name
        err = float(np.abs(fwd(bias) - want).max())
        assert err < 1e-9, f"{name}: slow_ref vs the vectorized forward max |diff| {err}"
        # -slope * (i - j) (ALiBi paper) differs from slope * j by a per-row constant, which
        # softmax removes (in exact arithmetic, i.e. without HF's roundings).
        unrounded = fwd(paper[:, None] * pos[None, :])
        rel = -paper[:, None, None] * (pos[:, None] - pos[None, :])
        err = float(np.abs(fwd(rel) - unrounded).max())
        assert err < 1e-9, f"{name}: -slope * (i - j) differs by {err}"
        # HF's bf16 roundings, skipped all at once and one at a time: invisible on the
        # power-of-two, short fixtures; each one visible on rw_alibi12_long_f32.
        skipped = {
            "all": unrounded,
            "slope": fwd(bf16(paper.astype(np.float32)[:, None] * bf16(pos_f32)[None, :])),
            "position": fwd(bf16(slopes[:, None] * pos_f32[None, :])),     # exact in float32
            "product": fwd(slopes[:, None] * bf16(pos_f32)[None, :]),      # exact in float32
        }
        for what, logits in skipped.items():
            rows = np.abs(logits - want).max(axis=1)
            if not rounding_visible:
                assert rows.max() < 1e-9, f"{name}: skipping the {what} rounding moves {rows.max()}"
                continue
            assert rows.max() > 1e-3, \
                f"{name}: skipping the {what} rounding barely matters ({rows.max():g})"
            if what == "position":      # bf16(j) == j for j <= 256: rows 0..256 unaffected
                assert rows[:257].max() < 1e-9, f"{name}: {rows[:257].max()}"
        # Without the bias (or with rotary instead) the logits must differ visibly.
        err = float(np.abs(fwd(0 * bias) - want).max())
        assert err > 1e-3, f"{name}: the ALiBi bias barely matters ({err})"


# --------------------------------------------------------------------------- greedy.txt

# Fixtures whose greedy.txt is regenerated here (~15 s together); the others only by
# `greedy_ref.py --check` (the Falcon rotary fixtures ~30 s, rw_alibi12_long_f32 ~8 min).
GREEDY_REGENERATED = LLAMA_FIXTURES + ("rw_alibi_f32", "rw_alibi6_bf16")


def test_greedy_files():
    names = greedy_ref.fixture_names(FIXTURES)
    assert set(GREEDY_REGENERATED) <= set(names), names
    assert len(names) == len(CHECKPOINTS) - 1 + len(LLAMA_FIXTURES) + len(RW_FIXTURES), names
    for name in names:
        d = os.path.join(FIXTURES, name)
        _, max_pos, vocab, _ = greedy_ref.load_reference(d)
        n_prompt = len(fixture_io.read_ids(os.path.join(d, fixture_io.IDS_NAME)))
        with open(os.path.join(d, greedy_ref.GREEDY_NAME)) as f:
            text = f.read()
        ids = fixture_io.parse_ids(text)
        assert text == " ".join(map(str, ids)) + "\n", f"{name}: greedy.txt is not one line"
        want = greedy_ref.new_count(greedy_ref.N_NEW, n_prompt, max_pos)
        assert len(ids) == want, f"{name}: {len(ids)} greedy ids, want {want}"
        assert all(0 <= i < vocab for i in ids), f"{name}: greedy id out of range"


def test_greedy_regenerates():
    for name in GREEDY_REGENERATED:
        res = greedy_ref.run_fixture(name, FIXTURES)
        diff = greedy_ref.compare(res, os.path.join(FIXTURES, name))
        assert diff is None, f"{name}: {diff}"


TESTS = [v for k, v in sorted(globals().items()) if k.startswith("test_")]


def main():
    passed = failed = 0
    for test in TESTS:
        try:
            test()
            passed += 1
            print(f"PASS {test.__name__}")
        except Exception:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            print(f"FAIL {test.__name__}")
            traceback.print_exc()
    print(f"check_reference.py: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

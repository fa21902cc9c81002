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
  falcon_ref) matches wormref.slow_ref's float64 per-token, per-head loop.

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

from wormref import REPO_ROOT, safetensors_io, slow_ref
from wormref.config import FalconConfig

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
# Fixture dir -> checkpoint dir (default_model holds only ids and logits of the shipped model).
CHECKPOINTS = {name: os.path.join(FIXTURES, name) for name in (
    "newarch_gqa_f32", "newarch_gqa_bias_bf16", "newarch_1ln_f16", "mq_f32", "mq_bias_bf16",
    "mha_bias_f32", "mha_seq_bf16")}
CHECKPOINTS["default_model"] = os.path.join(REPO_ROOT, "assets", "default-model")
TORCH_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


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


def test_fixture_files():
    for name, d in CHECKPOINTS.items():
        cfg_json, cfg = _load(d)
        assert cfg_json["model_type"] == "falcon", name
        assert cfg_json["architectures"] == ["FalconForCausalLM"], name
        index_path = os.path.join(d, safetensors_io.INDEX_NAME)
        stored = {}
        if os.path.exists(index_path):
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
        else:
            stored = _check_file_layout(os.path.join(d, safetensors_io.SINGLE_NAME), cfg_json)
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

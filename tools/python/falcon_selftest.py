#!/usr/bin/python3
"""Self-test for falcon_ref.py and safetensors_io.py (run: python3 tools/python/falcon_selftest.py).

The core check compares falcon_ref.Falcon against `slow_forward`, a float64
numpy implementation that loops over tokens and heads and reads each head's
q/k/v rows straight out of the fused weight by explicit row offsets (no
tensor views), and applies RoPE pair by pair. It also checks the safetensors
codec (bf16/f16 rounding vs torch), checkpoint round trips, state_dict key
names, config parsing, batch/causal consistency and that gradients flow.
Prints 'N passed, M failed' and returns non-zero on failure.
"""

import json
import math
import os
import sys
import tempfile
import traceback

import numpy as np
import torch

from wormref import falcon_ref, safetensors_io

# Tiny configs covering every decoder-layer / QKV-layout path.
BASE = dict(vocab_size=37, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
            max_position_embeddings=16, layer_norm_epsilon=1e-5)
LAYOUTS = {
    "newarch_gqa_2ln": dict(new_decoder_architecture=True, num_kv_heads=2, bias=True),
    "newarch_mqa_1ln": dict(new_decoder_architecture=True, num_kv_heads=1,
                            num_ln_in_parallel_attn=1, rope_theta=500.0, ffn_hidden_size=48),
    "newarch_mha_2ln": dict(new_decoder_architecture=True, num_kv_heads=4),
    "multi_query": dict(multi_query=True, bias=False, tie_word_embeddings=False),
    "multi_query_bias": dict(multi_query=True, bias=True),
    "mha_parallel": dict(multi_query=False, bias=True),
    "mha_sequential": dict(multi_query=False, parallel_attn=False, bias=True),
}


def make_model(layout, seed=0):
    cfg_dict = dict(BASE, **LAYOUTS[layout])
    cfg = falcon_ref.FalconConfig.from_dict(cfg_dict)
    g = torch.Generator().manual_seed(seed)
    model = falcon_ref.Falcon(cfg).init_weights(0.2, g, bias_std=0.1, ln_std=0.1).eval()
    return cfg_dict, cfg, model


# --------------------------------------------------------------------------- slow reference

def _layernorm(x, w, b, eps):
    """x [C] -> [C]."""
    mu = x.mean()
    var = ((x - mu) ** 2).mean()
    return (x - mu) / math.sqrt(var + eps) * w + b


def _gelu(x):
    """exact erf GELU, elementwise."""
    return np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])


def _rope(vec, pos, theta):
    """Rotate pairs (i, i + D/2) of vec [D] by pos * theta^(-2i/D)."""
    d = vec.shape[0]
    out = vec.copy()
    for i in range(d // 2):
        ang = pos * theta ** (-(2.0 * i) / d)
        a, b = vec[i], vec[i + d // 2]
        out[i] = a * math.cos(ang) - b * math.sin(ang)
        out[i + d // 2] = b * math.cos(ang) + a * math.sin(ang)
    return out


def qkv_row_start(cfg, kind, head):
    """First row in query_key_value.weight of the D-row block for (kind, head).

    kind 'q': head is a query head in [0, H); kind 'k'/'v': head is a kv head in [0, K).
    """
    d, h, g = cfg.head_dim, cfg.num_attention_heads, cfg.group_size
    if cfg.new_decoder_architecture:       # groups of [q * G, k, v]
        if kind == "q":
            return ((head // g) * (g + 2) + head % g) * d
        return (head * (g + 2) + g + (kind == "v")) * d
    if cfg.multi_query:                    # [q * H, k, v]
        return {"q": head, "k": h, "v": h + 1}[kind] * d
    return (3 * head + {"q": 0, "k": 1, "v": 2}[kind]) * d   # per head [q, k, v]


def kv_head_of(cfg, q_head):
    if cfg.new_decoder_architecture:
        return q_head // cfg.group_size
    return 0 if cfg.multi_query else q_head


def _slow_attention(cfg, sd, prefix, y):
    """y [T, C] (normed input) -> [T, C]."""
    t_len, d = y.shape[0], cfg.head_dim
    w = sd[prefix + "query_key_value.weight"]
    b = sd.get(prefix + "query_key_value.bias", np.zeros(w.shape[0]))

    def proj(kind, head, t):
        r = qkv_row_start(cfg, kind, head)
        return w[r:r + d] @ y[t] + b[r:r + d]

    merged = np.zeros((t_len, cfg.hidden_size))
    for h in range(cfg.num_attention_heads):
        kv = kv_head_of(cfg, h)
        keys = [_rope(proj("k", kv, s), s, cfg.rope_theta) for s in range(t_len)]
        vals = [proj("v", kv, s) for s in range(t_len)]
        for t in range(t_len):
            q = _rope(proj("q", h, t), t, cfg.rope_theta)
            scores = np.array([q @ keys[s] / math.sqrt(d) for s in range(t + 1)])
            p = np.exp(scores - scores.max())
            p /= p.sum()
            merged[t, h * d:(h + 1) * d] = sum(p[s] * vals[s] for s in range(t + 1))
    wd = sd[prefix + "dense.weight"]
    bd = sd.get(prefix + "dense.bias", np.zeros(wd.shape[0]))
    return merged @ wd.T + bd


def _slow_mlp(sd, prefix, y):
    """y [T, C] -> [T, C]."""
    w1, w2 = sd[prefix + "dense_h_to_4h.weight"], sd[prefix + "dense_4h_to_h.weight"]
    b1 = sd.get(prefix + "dense_h_to_4h.bias", np.zeros(w1.shape[0]))
    b2 = sd.get(prefix + "dense_4h_to_h.bias", np.zeros(w2.shape[0]))
    return np.stack([w2 @ _gelu(w1 @ row + b1) + b2 for row in y])


def slow_forward(cfg, sd, ids):
    """float64 loop reference. sd: {HF name: float64 ndarray}; ids list[int] -> logits [T, V]."""
    eps = cfg.layer_norm_epsilon
    x = sd["transformer.word_embeddings.weight"][ids].copy()       # [T, C]
    for layer in range(cfg.num_hidden_layers):
        p = f"transformer.h.{layer}."

        def ln(name, v):
            return np.stack([_layernorm(r, sd[p + name + ".weight"], sd[p + name + ".bias"], eps)
                             for r in v])

        attn = lambda v: _slow_attention(cfg, sd, p + "self_attention.", v)  # noqa: E731
        mlp = lambda v: _slow_mlp(sd, p + "mlp.", v)                        # noqa: E731
        if not cfg.parallel_attn:
            r = x + attn(ln("input_layernorm", x))
            x = r + mlp(ln("post_attention_layernorm", r))
        elif cfg.new_decoder_architecture and cfg.num_ln_in_parallel_attn == 2:
            x = x + attn(ln("ln_attn", x)) + mlp(ln("ln_mlp", x))
        else:
            y = ln("input_layernorm", x)
            x = x + attn(y) + mlp(y)
    x = np.stack([_layernorm(r, sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], eps)
                  for r in x])
    head = sd["transformer.word_embeddings.weight"] if cfg.tie_word_embeddings else sd["lm_head.weight"]
    return x @ head.T


def expected_keys(cfg):
    """State-dict key list written out from the HF naming scheme."""
    keys = ["transformer.word_embeddings.weight"]
    for i in range(cfg.num_hidden_layers):
        p = f"transformer.h.{i}."
        if not cfg.parallel_attn:
            lns = ["input_layernorm", "post_attention_layernorm"]
        elif cfg.new_decoder_architecture and cfg.num_ln_in_parallel_attn == 2:
            lns = ["ln_attn", "ln_mlp"]
        else:
            lns = ["input_layernorm"]
        for ln in lns:
            keys += [p + ln + ".weight", p + ln + ".bias"]
        for lin in ["self_attention.query_key_value", "self_attention.dense",
                    "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"]:
            keys.append(p + lin + ".weight")
            if cfg.bias:
                keys.append(p + lin + ".bias")
    keys += ["transformer.ln_f.weight", "transformer.ln_f.bias"]
    if not cfg.tie_word_embeddings:
        keys.append("lm_head.weight")
    return keys


# --------------------------------------------------------------------------- tests

def test_layouts_vs_slow_loop():
    ids = [3, 36, 0, 17, 17, 5, 29]
    for layout in LAYOUTS:
        _, cfg, model = make_model(layout)
        sd = {k: v.double().numpy() for k, v in model.state_dict().items()}
        want = slow_forward(cfg, sd, ids)
        got = falcon_ref.compute_logits(model, ids)
        err = np.abs(got - want).max()
        assert err < 2e-5 * max(1.0, np.abs(want).max()), f"{layout}: max |diff| {err}"
        assert np.abs(want).max() > 0.5, f"{layout}: degenerate logits"


def test_qkv_shapes():
    for layout in LAYOUTS:
        _, cfg, model = make_model(layout)
        w = model.transformer.h[0].self_attention.query_key_value.weight
        h, k, d = cfg.num_attention_heads, cfg.num_kv_heads, cfg.head_dim
        assert w.shape == ((h + 2 * k) * d, cfg.hidden_size), (layout, w.shape)


def test_state_dict_keys():
    for layout in LAYOUTS:
        _, cfg, model = make_model(layout)
        got = list(model.state_dict().keys())
        want = expected_keys(cfg)
        assert sorted(got) == sorted(want), f"{layout}: {sorted(set(got) ^ set(want))}"


def test_batch_and_causal_consistency():
    for layout in LAYOUTS:
        _, cfg, model = make_model(layout)
        a = torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]])
        with torch.no_grad():
            both = model(a)
            for row in range(2):
                single = model(a[row])
                assert torch.allclose(both[row], single, atol=1e-5), layout
                prefix = model(a[row, :3])
                assert torch.allclose(single[:3], prefix, atol=1e-5), f"{layout}: not causal"


def test_gradients_flow():
    _, cfg, model = make_model("newarch_gqa_2ln")
    model.train()
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])
    loss.backward()
    for name, prm in model.named_parameters():
        assert prm.grad is not None and torch.isfinite(prm.grad).all(), name
        assert prm.grad.abs().sum() > 0, f"zero grad for {name}"


def test_bf16_rounding_matches_torch():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.standard_normal(10000).astype(np.float32) * 10,
        # exact ties: low 16 bits == 0x8000 with even and odd kept mantissa
        np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x3F80FFFF, 0x7F7FFFFF, 0x00008000],
                 dtype=np.uint32).view(np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, 1e-40], dtype=np.float32),
    ])
    ours = safetensors_io.f32_to_bf16_bits(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(ours, theirs), np.nonzero(ours != theirs)
    back = safetensors_io.bf16_bits_to_f32(ours)
    assert np.array_equal(back, torch.from_numpy(x).to(torch.bfloat16).float().numpy())
    assert np.isnan(safetensors_io.bf16_bits_to_f32(
        safetensors_io.f32_to_bf16_bits(np.array([np.nan], np.float32))))[0]
    f16 = safetensors_io.round_to_dtype(x[:10000], "f16")
    assert np.array_equal(f16, torch.from_numpy(x[:10000]).half().float().numpy())


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


def test_checkpoint_roundtrip():
    with tempfile.TemporaryDirectory() as tmp:
        for layout in LAYOUTS:
            cfg_dict, cfg, model = make_model(layout)
            for dtype, shards in (("f32", 1), ("bf16", 3), ("f16", 2)):
                d = os.path.join(tmp, f"{layout}_{dtype}")
                falcon_ref.save_checkpoint(d, cfg_dict, model, dtype=dtype, shards=shards)
                with open(os.path.join(d, "config.json")) as f:
                    written = json.load(f)
                assert written["model_type"] == "falcon"
                assert written["architectures"] == ["FalconForCausalLM"]
                cfg2, model2 = falcon_ref.load_checkpoint(d)
                assert cfg2 == cfg
                sd1, sd2 = model.state_dict(), model2.state_dict()
                assert list(sd1) == list(sd2)
                for k in sd1:
                    want = safetensors_io.round_to_dtype(sd1[k].numpy(), dtype)
                    assert np.array_equal(sd2[k].numpy(), want), (layout, dtype, k)
                if shards > 1:
                    with open(os.path.join(d, "model.safetensors.index.json")) as f:
                        index = json.load(f)
                    files = sorted(set(index["weight_map"].values()))
                    assert files == [f"model-{i:05d}-of-{shards:05d}.safetensors"
                                     for i in range(1, shards + 1)]
                    assert not os.path.exists(os.path.join(d, "model.safetensors"))


def test_config_parsing():
    FC = falcon_ref.FalconConfig
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


TESTS = [v for k, v in sorted(globals().items()) if k.startswith("test_")]


def main():
    torch.manual_seed(0)
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
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

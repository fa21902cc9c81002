"""Independent float64 numpy reference of Hugging Face's LlamaForCausalLM forward pass (the
layout TII's Falcon3 models use); no torch, no HF code imported.

Written from transformers' modeling_llama.py / modeling_rope_utils.py (4.45+ semantics):

    x = embed_tokens[ids]
    per layer:  h = x + o_proj(attn(input_layernorm(x)))
                x = h + down_proj(silu(gate_proj(n)) * up_proj(n)),  n = post_attention_layernorm(h)
    logits = lm_head(norm(x))            (lm_head = embed_tokens when tie_word_embeddings)

    RMSNorm(x) = x / sqrt(mean(x^2) + rms_norm_eps) * weight
    q/k/v_proj rows are head-major: head h owns rows [h*D, (h+1)*D); query head h reads kv head
    h // (H/K) (HF repeat_kv); RoPE rotates (x[i], x[i + D/2]) (rotate_half, not interleaved) by
    position * inv_freq[i] (see inv_freq); scores scaled by D**-0.5, causal softmax; biases only
    when attention_bias / mlp_bias. Positions are 0..T-1 (full sequence, no KV cache).

Everything is computed in float64 from the weights as stored (bf16/f16 upcast exactly).
HF itself computes inv_freq and cos/sin in float32; the difference is ~1e-7 relative.

    inv_freq(cfg)                 float64 [D/2], scaling applied
    llama3_bands(cfg)             'high' / 'medium' / 'low' per inv_freq component (llama3 only)
    logits(cfg, tensors, ids)     float64 [len(ids), vocab]
    expected_shapes(cfg)          {HF tensor name: shape}, in HF state_dict order
    load_checkpoint(dir)          (LlamaConfig, {name: float32 ndarray})
"""

import json
import math
import os

import numpy as np

from . import safetensors_io
from .llama_config import LlamaConfig

CONFIG_NAME = "config.json"


# --------------------------------------------------------------------------- rotary

def inv_freq(cfg):
    """HF ROPE_INIT_FUNCTIONS[rope_type](cfg)[0] in float64, D = head_dim:

    default: inv[i] = 1 / theta^(2i / D), i < D/2
    linear:  inv[i] / factor
    llama3:  wavelen = 2 pi / inv[i]; with low_wl = original_max_position_embeddings /
             low_freq_factor and high_wl = original_max_position_embeddings / high_freq_factor:
               wavelen < high_wl               -> inv[i]             (high band, unchanged)
               wavelen > low_wl                -> inv[i] / factor    (low band)
               otherwise (medium band)         -> (1 - s) * inv[i] / factor + s * inv[i],
                 s = (original_max_position_embeddings / wavelen - low_freq_factor)
                     / (high_freq_factor - low_freq_factor)
    (The attention_factor both return is 1.0: cos/sin are not rescaled.)
    """
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    if cfg.rope_type == "linear":
        return inv / cfg.rope_factor
    if cfg.rope_type == "llama3":
        omax, lo, hi, f = (cfg.original_max_position_embeddings, cfg.low_freq_factor,
                           cfg.high_freq_factor, cfg.rope_factor)
        wavelen = 2 * math.pi / inv
        out = np.where(wavelen > omax / lo, inv / f, inv)
        smooth = (omax / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * out / f + smooth * out
        medium = ~(wavelen < omax / hi) & ~(wavelen > omax / lo)
        return np.where(medium, smoothed, out)
    return inv


def llama3_bands(cfg):
    """For each default inv_freq component, which llama3 band it falls in."""
    d = cfg.head_dim
    wavelen = 2 * math.pi * cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    omax = cfg.original_max_position_embeddings
    return ["high" if w < omax / cfg.high_freq_factor else
            "low" if w > omax / cfg.low_freq_factor else "medium" for w in wavelen]


def _rope(x, cos, sin):
    """x [T, heads, D]; cos/sin [T, D] -> x * cos + rotate_half(x) * sin."""
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


# --------------------------------------------------------------------------- forward

def _rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def _silu(x):
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))     # x * sigmoid(x), overflow-free


def expected_shapes(cfg):
    """{HF state-dict name: shape} a checkpoint of cfg holds, in HF state_dict order."""
    c, f, v = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    qd, kd = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    shapes = {"model.embed_tokens.weight": (v, c)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        for name, (rows, cols), bias in (
                ("self_attn.q_proj", (qd, c), cfg.attention_bias),
                ("self_attn.k_proj", (kd, c), cfg.attention_bias),
                ("self_attn.v_proj", (kd, c), cfg.attention_bias),
                ("self_attn.o_proj", (c, qd), cfg.attention_bias),
                ("mlp.gate_proj", (f, c), cfg.mlp_bias),
                ("mlp.up_proj", (f, c), cfg.mlp_bias),
                ("mlp.down_proj", (c, f), cfg.mlp_bias)):
            shapes[p + name + ".weight"] = (rows, cols)
            if bias:
                shapes[p + name + ".bias"] = (rows,)
        shapes[p + "input_layernorm.weight"] = (c,)
        shapes[p + "post_attention_layernorm.weight"] = (c,)
    shapes["model.norm.weight"] = (c,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (v, c)
    return shapes


def logits(cfg, tensors, ids):
    """Full-sequence causal logits, float64 [len(ids), vocab].

    tensors: {HF name: ndarray} holding exactly expected_shapes(cfg) (ValueError otherwise);
    ids: token ids in [0, vocab_size)."""
    want = expected_shapes(cfg)
    if set(tensors) != set(want):
        raise ValueError(f"tensor names differ from HF's: {sorted(set(tensors) ^ set(want))[:5]}")
    bad = [n for n, s in want.items() if tuple(tensors[n].shape) != s]
    if bad:
        raise ValueError(f"{bad[0]}: shape {tuple(tensors[bad[0]].shape)}, want {want[bad[0]]}")
    ids = [int(i) for i in ids]
    if not ids or not all(0 <= i < cfg.vocab_size for i in ids):
        raise ValueError(f"ids must be non-empty and in [0, {cfg.vocab_size})")
    w = {n: np.asarray(a, dtype=np.float64) for n, a in tensors.items()}
    t_len, h, k, d = len(ids), cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    eps = cfg.rms_norm_eps

    def linear(name, x):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    ang = np.arange(t_len, dtype=np.float64)[:, None] * inv_freq(cfg)[None, :]
    emb = np.concatenate([ang, ang], axis=-1)                        # [T, D]
    cos, sin = np.cos(emb), np.sin(emb)
    causal = np.tril(np.ones((t_len, t_len), dtype=bool))

    x = w["model.embed_tokens.weight"][ids]                          # [T, C]
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        y = _rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = _rope(linear(p + "self_attn.q_proj", y).reshape(t_len, h, d), cos, sin)
        kk = _rope(linear(p + "self_attn.k_proj", y).reshape(t_len, k, d), cos, sin)
        vv = linear(p + "self_attn.v_proj", y).reshape(t_len, k, d)
        out = np.empty((t_len, h, d))
        for head in range(h):
            kv = head // cfg.group_size                              # repeat_kv
            s = (q[:, head] @ kk[:, kv].T) * d ** -0.5               # [T, T]
            s = np.where(causal, s, -np.inf)
            pr = np.exp(s - s.max(axis=-1, keepdims=True))
            out[:, head] = (pr / pr.sum(axis=-1, keepdims=True)) @ vv[:, kv]
        x = x + linear(p + "self_attn.o_proj", out.reshape(t_len, h * d))
        n = _rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + linear(p + "mlp.down_proj",
                       _silu(linear(p + "mlp.gate_proj", n)) * linear(p + "mlp.up_proj", n))
    x = _rmsnorm(x, w["model.norm.weight"], eps)
    head_w = w["model.embed_tokens.weight"] if cfg.tie_word_embeddings else w["lm_head.weight"]
    return x @ head_w.T


# --------------------------------------------------------------------------- checkpoints

def load_checkpoint(model_dir):
    """(LlamaConfig, {name: float32 ndarray}) of an HF checkpoint dir (single or sharded)."""
    with open(os.path.join(model_dir, CONFIG_NAME)) as f:
        cfg_json = json.load(f)
    return LlamaConfig.from_dict(cfg_json), safetensors_io.read_model_dir(model_dir)

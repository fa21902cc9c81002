"""A slow, obviously-correct float64 Falcon forward pass in numpy (no torch), the second
reference the committed fixtures are checked against.

It loops over tokens and heads, reads each head's q/k/v rows straight out of the fused
query_key_value weight by explicit row offsets (no tensor views) and applies RoPE pair by
pair, so it shares no code and no tensor-reshaping idea with falcon_ref. Seconds for the
test fixtures; far too slow for real models.

ALiBi (cfg.alibi, Falcon-RW; falcon_ref does not implement it): no rotary, and query head h
scores key position s as (q . k_s + bias[h, s]) / sqrt(head_dim), the bias added to the raw
score before the scaling as in HF's FalconAttention alibi branch; bias from
wormref.alibi.alibi_bias (HF's bf16 roundings, positions 0..T-1 of an unpadded sequence).

    slow_forward(cfg, sd, ids, alibi_bias="hf")
                                 cfg: config.FalconConfig; sd: {HF tensor name: ndarray};
                                 ids: list[int] -> float64 logits [T, V]; with cfg.alibi,
                                 alibi_bias "exact" drops HF's bf16 rounding of the bias and
                                 "zero" the bias itself (to measure what they do)
    expected_keys(cfg)           HF state-dict names a checkpoint of cfg holds
"""

import math

import numpy as np

from . import alibi as alibi_mod


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


def _slow_attention(cfg, sd, prefix, y, alibi_bias="hf"):
    """y [T, C] (normed input) -> [T, C]."""
    t_len, d = y.shape[0], cfg.head_dim
    w = sd[prefix + "query_key_value.weight"]
    b = sd.get(prefix + "query_key_value.bias", np.zeros(w.shape[0]))

    def proj(kind, head, t):
        r = qkv_row_start(cfg, kind, head)
        return w[r:r + d] @ y[t] + b[r:r + d]

    merged = np.zeros((t_len, cfg.hidden_size))
    if cfg.alibi:           # bias[h, s] for key position s; no rotary
        if alibi_bias == "zero":
            bias = np.zeros((cfg.num_attention_heads, t_len))
        else:
            bias = alibi_mod.alibi_bias(cfg.num_attention_heads, list(range(t_len)), alibi_bias)
        pos_enc = lambda vec, pos: vec                                      # noqa: E731
    else:
        pos_enc = lambda vec, pos: _rope(vec, pos, cfg.rope_theta)          # noqa: E731
    for h in range(cfg.num_attention_heads):
        kv = kv_head_of(cfg, h)
        keys = [pos_enc(proj("k", kv, s), s) for s in range(t_len)]
        vals = [proj("v", kv, s) for s in range(t_len)]
        for t in range(t_len):
            q = pos_enc(proj("q", h, t), t)
            if cfg.alibi:   # HF: (scores + alibi) * inv_norm_factor
                scores = np.array([(q @ keys[s] + bias[h, s]) / math.sqrt(d)
                                   for s in range(t + 1)])
            else:
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


def slow_forward(cfg, sd, ids, alibi_bias="hf"):
    """float64 loop reference. sd: {HF name: float64 ndarray}; ids list[int] -> logits [T, V].
    alibi_bias ("hf" | "exact" | "zero") only matters when cfg.alibi (see wormref.alibi)."""
    if alibi_bias not in ("hf", "exact", "zero"):
        raise ValueError(f"alibi_bias must be 'hf', 'exact' or 'zero', got {alibi_bias!r}")
    eps = cfg.layer_norm_epsilon
    x = sd["transformer.word_embeddings.weight"][ids].copy()       # [T, C]
    for layer in range(cfg.num_hidden_layers):
        p = f"transformer.h.{layer}."

        def ln(name, v):
            return np.stack([_layernorm(r, sd[p + name + ".weight"], sd[p + name + ".bias"], eps)
                             for r in v])

        attn = lambda v: _slow_attention(cfg, sd, p + "self_attention.", v,  # noqa: E731
                                         alibi_bias)
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

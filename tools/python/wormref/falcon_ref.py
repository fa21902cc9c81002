"""Independent PyTorch reference of Hugging Face's Falcon (FalconForCausalLM) forward pass.

Written from the structure of transformers' `modeling_falcon.py`; no HF code is
imported. Full-sequence only (no KV cache), rotary positions 0..T-1, always
float32 (bf16/f16 checkpoints are upcast on load). It is a plain `nn.Module`,
so it can be trained too; `state_dict()` keys are exactly HF's.

Public API (kept stable; tools/python/train imports it):
    FalconConfig.from_dict(d) / .to_dict()
    Falcon(cfg)                         forward(ids [B, T] long) -> logits [B, T, vocab] f32
    Falcon.init_weights(std, generator, bias_std=, ln_std=)
    load_checkpoint(dir) -> (cfg, model)
    save_checkpoint(dir, cfg_dict, model, dtype="f32"|"bf16"|"f16", shards=1)

    compute_logits(model, ids) -> float32 ndarray [T, vocab]
    (FalconConfig lives in wormref.config, torch-free, and is re-exported here.)

Logits from the command line: python3 tools/python/falcon_logits.py (see there).

Shape legend: B batch, T tokens, C hidden_size, H query heads, K kv heads,
G = H // K query heads per kv head, D head_dim = C // H, F ffn_hidden_size, V vocab.
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import fixture_io, safetensors_io
from .config import FalconConfig  # noqa: F401  (re-exported: falcon_ref.FalconConfig)


# --------------------------------------------------------------------------- rotary

def rotary_cos_sin(cfg, seq_len, device=None):
    """cos, sin tables, each [T, D] float32, GPT-NeoX (rotate-half) layout.

    inv_freq[i] = 1 / theta^(2i / D) (i < D/2), angle[t, i] = t * inv_freq[i],
    emb = cat(angle, angle) so column j and j + D/2 share a frequency.
    Computed in float32 like HF.
    """
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=device).float() / d))
    t = torch.arange(seq_len, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)           # [T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)    # [T, D]
    return emb.cos(), emb.sin()


def rotate_half(x):
    """[..., D] -> [..., D]: (x1, x2) -> (-x2, x1) with x1 = x[..., :D/2]."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x, cos, sin):
    """x [B, n, T, D], cos/sin [T, D] -> [B, n, T, D]."""
    return x * cos + rotate_half(x) * sin


# --------------------------------------------------------------------------- modules

class FalconAttention(nn.Module):
    """Causal self-attention with a fused QKV projection (HF `self_attention`)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.query_key_value = nn.Linear(cfg.hidden_size, cfg.qkv_out_dim, bias=cfg.bias)
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=cfg.bias)

    def split_qkv(self, fused):
        """fused [B, T, (H + 2K) * D] -> q [B, T, H, D], k [B, T, K, D], v [B, T, K, D].

        Row layouts of query_key_value.weight (each block D rows), as HF `_split_heads`:
          new arch:    for g in K groups: [q_{gG}, ..., q_{gG+G-1}, k_g, v_g]
          multi_query: [q_0, ..., q_{H-1}, k, v]                       (K = 1)
          multi-head:  for h in H heads:  [q_h, k_h, v_h]              (K = H)
        """
        c = self.cfg
        b, t, _ = fused.shape
        h, k, d, g = c.num_attention_heads, c.num_kv_heads, c.head_dim, c.group_size
        if c.new_decoder_architecture:
            x = fused.view(b, t, k, g + 2, d)                 # [B, T, K, G+2, D]
            q = x[:, :, :, :g].reshape(b, t, h, d)            # [B, T, H, D]
            return q, x[:, :, :, g], x[:, :, :, g + 1]        # k, v: [B, T, K, D]
        if c.multi_query:
            x = fused.view(b, t, h + 2, d)                    # [B, T, H+2, D]
            return x[:, :, :h], x[:, :, h:h + 1], x[:, :, h + 1:h + 2]
        x = fused.view(b, t, h, 3, d)                         # [B, T, H, 3, D]
        return x[:, :, :, 0], x[:, :, :, 1], x[:, :, :, 2]

    def forward(self, x, cos, sin):
        """x [B, T, C], cos/sin [T, D] -> [B, T, C]."""
        c = self.cfg
        b, t, _ = x.shape
        q, k, v = self.split_qkv(self.query_key_value(x))
        q, k, v = (y.transpose(1, 2) for y in (q, k, v))     # [B, H|K, T, D]
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        if c.group_size > 1:                                  # query head i uses kv head i // G
            k = k.repeat_interleave(c.group_size, dim=1)      # [B, H, T, D]
            v = v.repeat_interleave(c.group_size, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim)   # [B, H, T, T]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1)                 # [B, H, T, T]
        out = (probs @ v).transpose(1, 2).reshape(b, t, c.hidden_size)   # [B, T, C]
        return self.dense(out)


class FalconMLP(nn.Module):
    """dense_4h_to_h(gelu_erf(dense_h_to_4h(x))): [B, T, C] -> [B, T, C] via [B, T, F]."""

    def __init__(self, cfg):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(cfg.hidden_size, cfg.ffn_hidden_size, bias=cfg.bias)
        self.dense_4h_to_h = nn.Linear(cfg.ffn_hidden_size, cfg.hidden_size, bias=cfg.bias)

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))


class FalconDecoderLayer(nn.Module):
    """One block, wired like HF FalconDecoderLayer.forward (dropout = 0).

    new arch, 2 LNs:    out = x + attn(ln_attn(x)) + mlp(ln_mlp(x))
    parallel, 1 LN:     y = input_layernorm(x); out = x + attn(y) + mlp(y)
    sequential:         r = x + attn(input_layernorm(x)); out = r + mlp(post_attention_layernorm(r))
    """

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        for name in cfg.layernorm_names:
            setattr(self, name, nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_epsilon))
        self.self_attention = FalconAttention(cfg)
        self.mlp = FalconMLP(cfg)

    def forward(self, x, cos, sin):
        """x [B, T, C] -> [B, T, C]."""
        c = self.cfg
        if not c.parallel_attn:
            r = x + self.self_attention(self.input_layernorm(x), cos, sin)
            return r + self.mlp(self.post_attention_layernorm(r))
        if c.new_decoder_architecture and c.num_ln_in_parallel_attn == 2:
            attn_in, mlp_in = self.ln_attn(x), self.ln_mlp(x)
        else:
            attn_in = mlp_in = self.input_layernorm(x)
        return x + (self.mlp(mlp_in) + self.self_attention(attn_in, cos, sin))


class FalconModel(nn.Module):
    """HF `transformer`: word_embeddings -> h[0..L-1] -> ln_f."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.h = nn.ModuleList(FalconDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.ln_f = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_epsilon)

    def forward(self, ids):
        """ids [B, T] long -> final hidden states [B, T, C]."""
        cos, sin = rotary_cos_sin(self.cfg, ids.shape[1], device=ids.device)
        x = self.word_embeddings(ids)
        for layer in self.h:
            x = layer(x, cos, sin)
        return self.ln_f(x)


class Falcon(nn.Module):
    """FalconForCausalLM. With tied embeddings there is no `lm_head` module:
    logits use transformer.word_embeddings.weight directly."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = FalconModel(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    @property
    def output_weight(self):
        """[V, C] matrix mapping final hidden states to logits."""
        if self.cfg.tie_word_embeddings:
            return self.transformer.word_embeddings.weight
        return self.lm_head.weight

    def forward(self, ids):
        """ids [B, T] (or [T]) long -> logits [B, T, V] (or [T, V]) float32."""
        squeeze = ids.dim() == 1
        if squeeze:
            ids = ids.unsqueeze(0)
        logits = F.linear(self.transformer(ids), self.output_weight)
        return logits.squeeze(0) if squeeze else logits

    @torch.no_grad()
    def init_weights(self, std=0.02, generator=None, *, bias_std=0.0, ln_std=0.0):
        """Random init in place; returns self.

        Linear/Embedding weights ~ N(0, std); Linear biases ~ N(0, bias_std);
        LayerNorm weight ~ 1 + N(0, ln_std), bias ~ N(0, ln_std).
        The defaults (bias_std = ln_std = 0) are HF's init: biases 0, LayerNorm (1, 0).
        """
        def normal_(t, mean, s):
            if s == 0.0:
                t.fill_(mean)
            else:
                t.normal_(mean, s, generator=generator)

        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                normal_(m.weight, 0.0, std)
                if getattr(m, "bias", None) is not None:
                    normal_(m.bias, 0.0, bias_std)
            elif isinstance(m, nn.LayerNorm):
                normal_(m.weight, 1.0, ln_std)
                normal_(m.bias, 0.0, ln_std)
        return self


# --------------------------------------------------------------------------- checkpoints

CONFIG_NAME = "config.json"
SINGLE_NAME = safetensors_io.SINGLE_NAME
INDEX_NAME = safetensors_io.INDEX_NAME
TORCH_DTYPE_NAMES = fixture_io.TORCH_DTYPES


def load_checkpoint(model_dir):
    """Read config.json + safetensors weights from `model_dir` -> (cfg, model in eval mode, float32).

    Strict: every expected tensor must be present with the right shape; unknown
    tensors are an error, except `lm_head.weight` when embeddings are tied (ignored,
    HF ties it to word_embeddings) and rotary `inv_freq` buffers.
    """
    with open(os.path.join(model_dir, CONFIG_NAME)) as f:
        cfg = FalconConfig.from_dict(json.load(f))
    model = Falcon(cfg)
    tensors = safetensors_io.read_model_dir(model_dir)
    expected = model.state_dict()
    state = {}
    for name, arr in tensors.items():
        if name not in expected:
            if (name == "lm_head.weight" and cfg.tie_word_embeddings) or name.endswith("inv_freq"):
                continue
            raise ValueError(f"{model_dir}: unexpected tensor {name!r}")
        if tuple(arr.shape) != tuple(expected[name].shape):
            raise ValueError(f"{model_dir}: {name} has shape {list(arr.shape)}, "
                             f"expected {list(expected[name].shape)}")
        state[name] = torch.from_numpy(np.array(arr, dtype=np.float32))
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ValueError(f"{model_dir}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    model.load_state_dict(state, strict=True)
    return cfg, model.eval()


def save_checkpoint(model_dir, cfg_dict, model, dtype="f32", shards=1):
    """Write config.json + safetensors for `model` into `model_dir`.

    cfg_dict: the config.json content (HF or RW-era key names, written as given)
              or a FalconConfig; it must resolve to model.cfg.
              "model_type": "falcon", "architectures": ["FalconForCausalLM"] and
              "torch_dtype" are added.
    dtype:    "f32" | "bf16" | "f16" storage type (bf16 = RNE-rounded upper 16 bits of fp32).
    shards:   1 -> model.safetensors; N > 1 -> model-0000i-of-0000N.safetensors +
              model.safetensors.index.json {"metadata": {"total_size"}, "weight_map"}.
    Weight files of an earlier layout in model_dir are removed (fixture_io.write_checkpoint).
    """
    st_dtype = safetensors_io.canonical_dtype(dtype)
    cfg_json = cfg_dict.to_dict() if isinstance(cfg_dict, FalconConfig) else dict(cfg_dict)
    if FalconConfig.from_dict(cfg_json) != model.cfg:
        raise ValueError("cfg_dict does not describe the model's configuration")
    cfg_json["model_type"] = "falcon"
    cfg_json["architectures"] = ["FalconForCausalLM"]
    state = {k: v.detach().cpu().float().numpy() for k, v in model.state_dict().items()}
    fixture_io.write_checkpoint(model_dir, cfg_json, state, st_dtype, shards)


# --------------------------------------------------------------------------- logits

parse_ids = fixture_io.parse_ids     # '1 2 3' or '1,2,3' -> [1, 2, 3]


@torch.no_grad()
def compute_logits(model, ids):
    """ids: list[int] (length T) -> float32 ndarray [T, V] (C order)."""
    if not ids:
        raise ValueError("no token ids given")
    v = model.cfg.vocab_size
    bad = [i for i in ids if not 0 <= i < v]
    if bad:
        raise ValueError(f"token ids out of range [0, {v}): {bad[:5]}")
    logits = model(torch.tensor(ids, dtype=torch.long))
    return np.ascontiguousarray(logits.float().numpy(), dtype=np.float32)

"""ALiBi position bias exactly as Hugging Face's Falcon computes it (Falcon-RW: `alibi: true`),
numpy only.

Written from transformers' src/transformers/models/falcon/modeling_falcon.py,
`build_alibi_tensor(attention_mask, num_heads, dtype)` (the same function as the original
RW `modelling_RW.py`):

    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), ..., dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, ..., dtype=torch.int32)
    slopes = torch.pow(base, powers)
    (num_heads not a power of two: extra_base from 2 * closest_power_of_2, odd powers
     1, 3, ..., 2 * min(closest_power_of_2, num_heads - closest_power_of_2) - 1, concatenated)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None].bfloat16() * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)

Slopes (c = closest_power_of_2 <= H):  slope[h] = 2^(-8 (h+1) / c)            for h < c,
                                       slope[c + j] = 2^(-4 (2j+1) / c)        for j < H - c
(H = 4: 2^-2, 2^-4, 2^-6, 2^-8; H = 6: those four, then 2^-1, 2^-3).

Which roundings happen (PyTorch type promotion, CPU and CUDA alike):
  1. base / extra_base: a Python double rounded to float32 by torch.tensor(..., float32).
  2. torch.pow(float32 0-dim tensor, int32 tensor) -> float32 (a 0-dim float tensor outranks a
     dimensioned int tensor by category). PyTorch's float32 pow is within 1 ulp; we take the
     correctly rounded float32 of base_f32 ** k (check_reference verifies that no slope of
     1..1024 heads lies within 2 float32 ulps of a bf16 rounding boundary, so the bf16 slope
     below does not depend on that last float32 ulp).
  3. slopes[..., None].bfloat16(): slope rounded to bfloat16 (round to nearest even).
  4. arange_tensor is int64: attention_mask is torch.long (FalconModel.forward builds
     torch.ones(..., dtype=torch.long) when no mask is passed; tokenizers and generate() give
     int64 masks), and cumsum of an integer tensor stays int64.
     bf16 tensor * int64 tensor: both dimensioned, the float category wins and no widening to
     float32 happens -> the result dtype is bfloat16. The int64 operand is converted to
     bfloat16 (positions > 256 are rounded: 257 -> 256, 259 -> 260, ...), the product is formed
     in float32 (exact: two 8-bit significands) and rounded to bfloat16.
     (Only a floating-point attention_mask would make arange_tensor float32 and the product
     float32; HF never builds one.)
  5. .to(dtype) with dtype = inputs_embeds.dtype: bf16 -> float32 / bfloat16 is exact, and so is
     bf16 -> float16 here (every nonzero |bias| is >= 2^-8, within float16's normal range).
So  bias[h, j] = bf16( bf16(slope_f32[h]) * bf16(j) ),  j the key position, for f32 checkpoints
as much as for bf16 ones.

How the bias is used (FalconAttention.forward, alibi branch, eager):
    attention_scores = matmul_result.view(batch_size, self.num_heads, query_length, kv_length)
    attention_logits = attention_scores + alibi.view(batch_size, self.num_heads, 1, -1)
    attention_logits *= self.inv_norm_factor                   # 1 / sqrt(head_dim)
    attention_probs = F.softmax(attention_logits + attention_mask, dim=-1, dtype=hidden_states.dtype)
i.e. logits[h, i, j] = (q_i . k_j + bias[h, j]) / sqrt(head_dim) for j <= i (added to the raw
scores BEFORE the scaling). The default SDPA path folds the same bias into the mask instead
(FalconModel._update_causal_mask: `alibi / math.sqrt(self.config.hidden_size // self.num_heads)`,
rounded in the model dtype, then SDPA adds it after scaling q.k), which is the same number up to
one model-dtype rounding of bias / sqrt(head_dim) (none when head_dim is a power of 4).
(In the transformers main read for this, _update_causal_mask folds the bias into the mask
whenever head_mask is None, whatever the attention implementation, so the eager branch, used
with attn_implementation="eager" or output_attentions=True, appears to add it twice; the
default SDPA path and the original RW code add it once, as this reference does.)
The bias uses the absolute key position j, not -(i - j); softmax over j removes the per-row
constant slope * i, so -slope * (i - j) gives the same probabilities in exact arithmetic, but
only slope * j reproduces HF's bf16 roundings.

    closest_power_of_2(n)            largest power of two <= n
    alibi_slopes(num_heads)          float64 [H], the exact slopes 2^(...) (no rounding)
    hf_slopes_f32(num_heads)         float32 [H], roundings 1-2
    hf_slopes_bf16(num_heads)        float32 [H] holding bf16 values, roundings 1-3
    key_positions(mask)              (cumsum(mask) - 1) * mask, int64 (unpadded: 0..L-1)
    alibi_bias(num_heads, key_positions, rounding="hf")
                                     float64 [H, n]; "hf": roundings 1-4, "exact": slope * j
"""

import math

import numpy as np

from . import safetensors_io

ROUNDINGS = ("hf", "exact")


def bf16(x):
    """float32 array -> float32 array holding the nearest bfloat16 values (round to nearest
    even), the rounding of torch's .bfloat16() / .to(torch.bfloat16)."""
    return safetensors_io.round_to_dtype(np.asarray(x, dtype=np.float32), "bf16")


def closest_power_of_2(n):
    """2 ** floor(log2(n)) for an integer n >= 1 (HF evaluates it with math.log2)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"num_heads must be >= 1, got {n}")
    return 1 << (n.bit_length() - 1)


def _slope_terms(num_heads):
    """[(base_exponent e, power k)] per head: slope = (2^e)^k, in HF's head order.
    e = -(2 ** -(log2(c) - 3)) = -8 / c for the first c heads, -8 / (2c) for the rest."""
    c = closest_power_of_2(num_heads)
    terms = [(-8.0 / c, k) for k in range(1, c + 1)]
    rest = min(c, num_heads - c)
    terms += [(-4.0 / c, k) for k in range(1, 2 * rest, 2)]
    return terms


def alibi_slopes(num_heads):
    """The exact ALiBi slopes of HF's formula, float64 [num_heads] (each 2^(e*k) rounded once
    to float64; no float32 / bf16 rounding)."""
    return np.array([2.0 ** (e * k) for e, k in _slope_terms(num_heads)], dtype=np.float64)


def _hf_base_f32(c):
    """HF's base for closest power c, computed as HF does in Python doubles, then float32."""
    return np.float32(2 ** (-(2 ** -(math.log2(c) - 3))))


def hf_slopes_f32(num_heads):
    """The float32 slopes HF's build_alibi_tensor holds before .bfloat16(): base rounded to
    float32, base_f32 ** k correctly rounded to float32."""
    c = closest_power_of_2(num_heads)
    out = [float(_hf_base_f32(c)) ** k for k in range(1, c + 1)]
    rest = min(c, num_heads - c)
    extra = float(_hf_base_f32(2 * c))
    out += [extra ** k for k in range(1, 2 * rest, 2)]
    return np.array(out, dtype=np.float64).astype(np.float32)


def hf_slopes_bf16(num_heads):
    """slopes[..., None].bfloat16(): float32 [num_heads] holding bfloat16 values."""
    return bf16(hf_slopes_f32(num_heads))


def key_positions(mask):
    """HF's arange_tensor for one sequence: (mask.cumsum() - 1) * mask, int64.
    An unpadded sequence (mask all ones) gives 0, 1, ..., L-1."""
    m = np.asarray(mask, dtype=np.int64)
    return (np.cumsum(m, axis=-1) - 1) * m


def alibi_bias(num_heads, positions, rounding="hf"):
    """ALiBi bias [num_heads, len(positions)] in float64.

    rounding "hf":    bf16( bf16(slope_f32[h]) * bf16(positions[j]) ), what HF adds (see the
                      module doc; the same for f32, bf16 and f16 checkpoints);
    rounding "exact": alibi_slopes(num_heads)[h] * positions[j], no rounding (only to measure
                      what the rounding does).
    """
    pos = np.asarray(positions, dtype=np.int64)
    if pos.ndim != 1:
        raise ValueError("positions must be one-dimensional")
    if rounding == "exact":
        return alibi_slopes(num_heads)[:, None] * pos.astype(np.float64)[None, :]
    if rounding != "hf":
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    if pos.size and np.abs(pos).max() >= 1 << 24:
        raise ValueError("positions >= 2^24 are not exact in float32")
    slopes = hf_slopes_bf16(num_heads)                        # float32 holding bf16 values
    pos_bf16 = bf16(pos.astype(np.float32))                   # int64 -> bfloat16
    product = slopes[:, None] * pos_bf16[None, :]             # float32, exact (8 x 8 bits)
    return bf16(product).astype(np.float64)

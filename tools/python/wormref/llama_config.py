"""Llama hyper-parameters from an HF config.json (LlamaForCausalLM, the layout TII's Falcon3
models use), torch-free.

`LlamaConfig.from_dict` resolves defaults the way HF's LlamaConfig (transformers 4.45+) and
modeling_rope_utils do, and refuses (ValueError naming the key) what llama_ref does not
implement or what contradicts itself. Shared by llama_ref, make_llama_fixtures.py and
check_reference.py.

Defaults (HF LlamaConfig): num_key_value_heads = num_attention_heads; head_dim =
hidden_size // num_attention_heads (an explicit head_dim may differ, Falcon3 uses 256);
rms_norm_eps 1e-6; rope_theta 10000; rope_scaling null; attention_bias / mlp_bias false;
tie_word_embeddings false; max_position_embeddings 2048; bos 1, eos 2.

rope_scaling (type read from "rope_type", or the older "type"; both present must agree):
    null or {"rope_type": "default"}                      plain RoPE
    {"rope_type": "linear", "factor"}                     inv_freq / factor
    {"rope_type": "llama3", "factor", "low_freq_factor",  Llama 3.1 banded scaling
     "high_freq_factor", "original_max_position_embeddings"}
anything else (dynamic, yarn, longrope, ...) is refused. Extra keys inside rope_scaling are
ignored, as HF does (it only warns).
"""

import dataclasses
from typing import Optional, Tuple, Union

ROPE_TYPES = ("default", "linear", "llama3")
_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Resolved Llama hyper-parameters (defaults are HF LlamaConfig's)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 32
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_type: str = "default"           # "default" | "linear" | "llama3"
    rope_factor: float = 1.0             # linear and llama3
    low_freq_factor: float = 1.0         # llama3 only
    high_freq_factor: float = 4.0        # llama3 only
    original_max_position_embeddings: int = 0   # llama3 only
    attention_bias: bool = False         # bias on q/k/v/o_proj
    mlp_bias: bool = False               # bias on gate/up/down_proj
    tie_word_embeddings: bool = False    # lm_head = embed_tokens (no lm_head.weight)
    max_position_embeddings: int = 2048
    bos_token_id: Optional[int] = 1
    eos_token_id: Union[None, int, Tuple[int, ...]] = 2   # Llama 3 configs carry a list

    # ---- derived
    @property
    def group_size(self):
        """Query heads sharing one kv head (HF num_key_value_groups)."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def rope_scaling(self):
        """The rope_scaling dict HF would see (None for plain RoPE)."""
        if self.rope_type == "linear":
            return {"rope_type": "linear", "factor": self.rope_factor}
        if self.rope_type == "llama3":
            return {"rope_type": "llama3", "factor": self.rope_factor,
                    "low_freq_factor": self.low_freq_factor,
                    "high_freq_factor": self.high_freq_factor,
                    "original_max_position_embeddings": self.original_max_position_embeddings}
        return None

    # ---- (de)serialisation
    @classmethod
    def from_dict(cls, d):
        """Build from an HF config.json dict; ValueError for what is refused (see module doc)."""
        d = dict(d)

        def num(key, default, kind=int, positive=True):
            v = d.get(key)
            if v is None:
                return default
            if (isinstance(v, bool) or not isinstance(v, (int, float))
                    or (kind is int and v != int(v))):
                raise ValueError(f"{key}={v!r} is not a number of the expected kind")
            v = kind(v)
            if positive and not v > 0:
                raise ValueError(f"{key}={v!r} must be > 0")
            return v

        if d.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act={d['hidden_act']!r} is not supported (only 'silu')")
        if d.get("partial_rotary_factor", 1.0) != 1.0:   # HF's rope init reads it if present
            raise ValueError(f"partial_rotary_factor={d['partial_rotary_factor']!r} is not "
                             "supported")
        if d.get("rope_parameters") is not None:          # transformers v5 spelling
            raise ValueError("rope_parameters is not supported (use rope_theta / rope_scaling)")

        hidden = num("hidden_size", 4096)
        n_head = num("num_attention_heads", 32)
        n_kv = num("num_key_value_heads", n_head)
        if n_head % n_kv != 0:
            raise ValueError(f"num_attention_heads={n_head} is not divisible by "
                             f"num_key_value_heads={n_kv}")
        if d.get("head_dim") is None and hidden % n_head != 0:
            raise ValueError(f"hidden_size={hidden} is not divisible by num_attention_heads="
                             f"{n_head} and no head_dim is given")
        head_dim = num("head_dim", hidden // n_head)
        if head_dim % 2:
            raise ValueError(f"head_dim={head_dim} must be even (rotate_half RoPE)")

        rope = dict(rope_type="default", rope_factor=1.0, low_freq_factor=1.0,
                    high_freq_factor=4.0, original_max_position_embeddings=0)
        rs = d.get("rope_scaling")
        if rs is not None:
            if not isinstance(rs, dict):
                raise ValueError(f"rope_scaling={rs!r} is not an object")
            a, b = rs.get("rope_type"), rs.get("type")
            if a is not None and b is not None and a != b:
                raise ValueError(f"rope_scaling has conflicting rope_type={a!r} and type={b!r}")
            kind = a if a is not None else b
            if kind not in ROPE_TYPES:
                raise ValueError(f"rope_scaling.rope_type={kind!r} is not supported "
                                 f"(only {', '.join(ROPE_TYPES)})")
            rope["rope_type"] = kind
            need = {"default": (), "linear": ("factor",), "llama3": _LLAMA3_KEYS}[kind]
            for key in need:
                v = rs.get(key)
                if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise ValueError(f"rope_scaling.{key}={v!r}: a number is required for "
                                     f"rope_type {kind!r}")
            if kind != "default":
                rope["rope_factor"] = float(rs["factor"])
                if rope["rope_factor"] < 1.0:      # HF: "factor field must be a float >= 1"
                    raise ValueError(f"rope_scaling.factor={rs['factor']!r} must be >= 1")
            if kind == "llama3":
                lo, hi = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
                omax = rs["original_max_position_embeddings"]
                if not lo < hi:
                    raise ValueError(f"rope_scaling.high_freq_factor={hi} must be greater than "
                                     f"low_freq_factor={lo}")
                if lo <= 0:
                    raise ValueError(f"rope_scaling.low_freq_factor={lo} must be > 0")
                if omax != int(omax) or omax <= 0:
                    raise ValueError(f"rope_scaling.original_max_position_embeddings={omax!r} "
                                     "must be a positive integer")
                rope.update(low_freq_factor=lo, high_freq_factor=hi,
                            original_max_position_embeddings=int(omax))

        eos = d.get("eos_token_id", 2)
        return cls(
            vocab_size=num("vocab_size", 32000),
            hidden_size=hidden,
            intermediate_size=num("intermediate_size", 11008),
            num_hidden_layers=num("num_hidden_layers", 32),
            num_attention_heads=n_head,
            num_key_value_heads=n_kv,
            head_dim=head_dim,
            rms_norm_eps=num("rms_norm_eps", 1e-6, float),
            rope_theta=num("rope_theta", 10000.0, float),
            attention_bias=bool(d.get("attention_bias", False)),
            mlp_bias=bool(d.get("mlp_bias", False)),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            max_position_embeddings=num("max_position_embeddings", 2048),
            bos_token_id=d.get("bos_token_id", 1),
            eos_token_id=tuple(eos) if isinstance(eos, list) else eos,
            **rope,
        )

    def to_dict(self):
        """HF-style config.json dict (without model_type/architectures/torch_dtype);
        from_dict(to_dict()) gives back an equal config."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("rope_type", "rope_factor", "low_freq_factor", "high_freq_factor",
                    "original_max_position_embeddings"):
            del d[key]
        d["rope_scaling"] = self.rope_scaling
        if isinstance(d["eos_token_id"], tuple):
            d["eos_token_id"] = list(d["eos_token_id"])
        d["hidden_act"] = "silu"
        return d

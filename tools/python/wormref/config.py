"""Falcon hyper-parameters from an HF (or RW-era) config.json, torch-free.

`FalconConfig.from_dict` resolves the aliases and defaults the way HF's FalconConfig and
FalconForCausalLM do, and refuses what the references do not implement. Shared by
falcon_ref (PyTorch) and slow_ref (numpy); falcon_ref re-exports it.

ALiBi (`alibi: true`, Falcon-RW): HF's FalconModel then builds no rotary position at all
(FalconAttention applies rotary only `if alibi is None`) and adds wormref.alibi's bias instead;
rope_theta / max_position_embeddings are still read (and ignored by the forward pass), and
rope_scaling is refused as HF's FalconConfig refuses it with alibi. Only the numpy reference
(slow_ref) implements ALiBi, so from_dict refuses alibi unless the caller passes
allow_alibi=True; the PyTorch falcon_ref (rotary only) keeps refusing it.
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class FalconConfig:
    """Resolved Falcon hyper-parameters (defaults are HF FalconConfig's)."""

    vocab_size: int = 65024
    hidden_size: int = 4544
    num_hidden_layers: int = 32
    num_attention_heads: int = 71
    num_kv_heads: int = 1             # effective kv heads (see from_dict)
    new_decoder_architecture: bool = False
    multi_query: bool = True
    parallel_attn: bool = True
    bias: bool = False
    layer_norm_epsilon: float = 1e-5
    rope_theta: float = 10000.0
    ffn_hidden_size: int = 4 * 4544
    num_ln_in_parallel_attn: Optional[int] = None  # 1 or 2 for new arch, None otherwise
    max_position_embeddings: int = 2048
    alibi: bool = False               # ALiBi bias instead of rotary (Falcon-RW)
    tie_word_embeddings: bool = True
    bos_token_id: Optional[int] = 11
    eos_token_id: Optional[int] = 11

    # ---- derived
    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def group_size(self):
        """Query heads sharing one kv head (G)."""
        return self.num_attention_heads // self.num_kv_heads

    @property
    def qkv_out_dim(self):
        """Rows of the fused query_key_value weight: (H + 2K) * D."""
        return (self.num_attention_heads + 2 * self.num_kv_heads) * self.head_dim

    @property
    def layernorm_names(self):
        """Per-layer LayerNorm module names, as in HF FalconDecoderLayer.__init__."""
        if not self.parallel_attn:
            return ("input_layernorm", "post_attention_layernorm")
        if self.new_decoder_architecture and self.num_ln_in_parallel_attn == 2:
            return ("ln_attn", "ln_mlp")
        return ("input_layernorm",)

    # ---- (de)serialisation
    @classmethod
    def from_dict(cls, d, allow_alibi=False):
        """Build from an HF (or RW-era) config.json dict.

        RW-era aliases: n_head -> num_attention_heads, n_head_kv -> num_kv_heads,
        n_layer -> num_hidden_layers, n_embed -> hidden_size.
        Effective kv heads: new_decoder_architecture -> num_kv_heads
        (default num_attention_heads); elif multi_query -> 1; else num_attention_heads.
        alibi=true is accepted only with allow_alibi=True (callers whose forward pass implements
        ALiBi: slow_ref); HF accepts it with every layout, so does this resolver.
        Raises ValueError for configurations HF cannot run or this reference
        does not implement (rope_scaling, non-gelu activation, ...).
        """
        d = dict(d)

        def pick(hf_key, rw_key, default):
            a, b = d.get(hf_key), d.get(rw_key)
            if a is not None and b is not None and a != b:
                raise ValueError(f"config has conflicting {hf_key}={a} and {rw_key}={b}")
            return a if a is not None else (b if b is not None else default)

        alibi = bool(d.get("alibi", False))
        if alibi and not allow_alibi:
            raise ValueError("alibi=true is not supported by this (rotary-only) reference; "
                             "wormref.slow_ref implements ALiBi (from_dict(..., allow_alibi=True))")
        if d.get("rope_scaling") is not None:
            if alibi:      # HF FalconConfig: "`rope_scaling` is not supported when `alibi` is `True`."
                raise ValueError("rope_scaling is not supported when alibi=true (HF refuses it)")
            raise ValueError(f"rope_scaling={d['rope_scaling']!r} is not supported")
        if d.get("activation", "gelu") != "gelu":
            raise ValueError(f"activation={d['activation']!r} is not supported (only exact 'gelu')")
        if d.get("apply_residual_connection_post_layernorm", False):
            raise ValueError("apply_residual_connection_post_layernorm=true is not supported")

        hidden = int(pick("hidden_size", "n_embed", 4544))
        n_head = int(pick("num_attention_heads", "n_head", 71))
        n_layer = int(pick("num_hidden_layers", "n_layer", 32))
        kv_raw = pick("num_kv_heads", "n_head_kv", None)
        new_arch = bool(d.get("new_decoder_architecture", False))
        multi_query = bool(d.get("multi_query", True))
        parallel = bool(d.get("parallel_attn", True))
        n_ln = d.get("num_ln_in_parallel_attn")

        if n_head <= 0 or hidden % n_head != 0:
            raise ValueError(f"hidden_size={hidden} is not divisible by num_attention_heads={n_head}")
        if new_arch:
            n_kv = n_head if kv_raw is None else int(kv_raw)
            if not parallel:
                raise ValueError("new_decoder_architecture with parallel_attn=false is not "
                                 "runnable in HF Falcon")
            n_ln = 2 if n_ln is None else int(n_ln)
            if n_ln not in (1, 2):
                raise ValueError(f"num_ln_in_parallel_attn must be 1 or 2, got {n_ln}")
        else:
            if multi_query:
                n_kv = 1
            else:
                if kv_raw is not None and int(kv_raw) != n_head:
                    raise ValueError(f"multi-head Falcon with num_kv_heads={kv_raw} != "
                                     f"num_attention_heads={n_head} is not runnable in HF")
                n_kv = n_head
            if n_ln not in (None, 1):
                raise ValueError("num_ln_in_parallel_attn=2 requires new_decoder_architecture")
            n_ln = None
        if n_kv <= 0 or n_head % n_kv != 0:
            raise ValueError(f"num_attention_heads={n_head} not divisible by num_kv_heads={n_kv}")

        ffn = d.get("ffn_hidden_size")
        return cls(
            vocab_size=int(d.get("vocab_size", 65024)),
            hidden_size=hidden,
            num_hidden_layers=n_layer,
            num_attention_heads=n_head,
            num_kv_heads=n_kv,
            new_decoder_architecture=new_arch,
            multi_query=multi_query,
            parallel_attn=parallel,
            bias=bool(d.get("bias", False)),
            layer_norm_epsilon=float(d.get("layer_norm_epsilon", 1e-5)),
            rope_theta=float(d.get("rope_theta", 10000.0)),
            ffn_hidden_size=4 * hidden if ffn is None else int(ffn),
            num_ln_in_parallel_attn=n_ln,
            max_position_embeddings=int(d.get("max_position_embeddings", 2048)),
            alibi=alibi,
            tie_word_embeddings=bool(d.get("tie_word_embeddings", True)),
            bos_token_id=d.get("bos_token_id", 11),
            eos_token_id=d.get("eos_token_id", 11),
        )

    def to_dict(self):
        """HF-style config.json dict (without model_type/architectures/torch_dtype)."""
        d = dataclasses.asdict(self)
        if d["num_ln_in_parallel_attn"] is None:
            del d["num_ln_in_parallel_attn"]
        return d

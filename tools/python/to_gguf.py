#!/usr/bin/python3
"""Converts a wormchat / Hugging Face Falcon or Llama checkpoint to GGUF for llama.cpp, keeping
its dtype.

    PYTHONPATH=LLAMA_CPP/gguf-py /usr/bin/python3 tools/python/to_gguf.py MODEL_DIR OUT.gguf \
        [--tokenizer tokenizer.model|tokenizer.json] [--pre NAME]

MODEL_DIR holds config.json, model.safetensors (one file; HF or RW-era key names) and, if present,
tokenizer.model (sentencepiece) and chat_format.json. Weights are written in the checkpoint's own
dtype (F32, F16 or BF16 bits copied as they are), so both programs run the same numbers; layer
norms stay F32 as llama.cpp wants. The fused query_key_value rows are regrouped from Falcon's
per-KV-group order (G query heads, then K, then V, per group) to llama.cpp's (all Q, all K, all
V), as llama.cpp's own converter does.

The vocabulary is the sentencepiece model's pieces (llama.cpp's "llama" SPM tokenizer, so text
tokenizes as wormchat's does); --tokenizer takes that file from elsewhere, or a Hugging Face
byte-level BPE tokenizer.json, written as llama.cpp's "gpt2" vocabulary with pre-tokenizer --pre
(default "falcon") as convert_hf_to_gguf.py writes one (add_bpe_vocab); ids past the tokenizer (a model vocabulary larger than it), or all
of them for a model without tokenizer.model, get padding pieces "[PADn]" of type NORMAL, so
llama.cpp prints them and a random checkpoint's greedy tokens can be compared as text (no text
tokenizes into them).

llama.cpp's Falcon graph has no linear biases and always runs attention and MLP in parallel, so
checkpoints with bias=true or parallel_attn=false are refused.

The Llama layout (config.json model_type "llama" / LlamaForCausalLM, which TII's Falcon3 uses)
becomes GGUF arch "llama" as llama.cpp's convert_hf_to_gguf.py (LlamaModel) writes it: tensors
token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
ffn_down}, output_norm and output (absent when tie_word_embeddings; llama.cpp then reuses
token_embd), q/k/v/o and gate/up/down biases (F32) when attention_bias / mlp_bias; keys
llama.{context_length, embedding_length, block_count, feed_forward_length,
attention.head_count, attention.head_count_kv, attention.layer_norm_rms_epsilon, rope.freq_base,
rope.dimension_count (= head_dim), attention.key_length / value_length (when config.json gives
head_dim, as the converter does), vocab_size}; rope_scaling "linear" as rope.scaling.type/factor,
"llama3" as the rope_freqs tensor of per-frequency divisors. The q_proj and k_proj rows (and
biases) are permuted per head from HF's rotate_half RoPE order (first half, second half) to the
interleaved pairs of llama.cpp's NORM RoPE, as the converter's LlamaModel.permute does; without
it the greedy check fails. RMS norm weights are written as F32.

Run by tools/bench/compare.sh; its check is that greedy tokens agree.
"""

import json
import math
import os
import struct
import sys

import numpy as np

from wormref import safetensors_io
from wormref.llama_config import LlamaConfig

try:
    import gguf
except ImportError:
    sys.exit("to_gguf.py: needs llama.cpp's gguf-py (PYTHONPATH=LLAMA_CPP/gguf-py)")


def fail(msg):
    sys.exit(f"to_gguf.py: {msg}")


# ---------------------------------------------------------------- config


def load_config_json(model_dir):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        return path, json.load(f)


def is_llama(d):
    return d.get("model_type") == "llama" or "LlamaForCausalLM" in (d.get("architectures") or [])


def read_config(model_dir):
    path, d = load_config_json(model_dir)

    def pick(hf, rw, default):
        return d.get(hf, d.get(rw, default))

    c = {
        "hidden": int(pick("hidden_size", "n_embed", 4544)),
        "n_head": int(pick("num_attention_heads", "n_head", 71)),
        "n_layer": int(pick("num_hidden_layers", "n_layer", 32)),
        "vocab": int(d.get("vocab_size", 65024)),
        "eps": float(d.get("layer_norm_epsilon", 1e-5)),
        "theta": float(d.get("rope_theta", 10000.0)),
        "ctx": int(d.get("max_position_embeddings", 2048)),
        "bos": d.get("bos_token_id", 11),
        "eos": d.get("eos_token_id", 11),
    }
    new_arch = bool(d.get("new_decoder_architecture", False))
    kv = pick("num_kv_heads", "n_head_kv", None)
    if new_arch:
        c["n_kv"] = c["n_head"] if kv is None else int(kv)
    else:
        c["n_kv"] = 1 if d.get("multi_query", True) else c["n_head"]
    c["ffn"] = int(d.get("ffn_hidden_size") or 4 * c["hidden"])
    c["new_arch"] = new_arch
    if d.get("bias", False):
        fail(f"{path}: bias=true; llama.cpp's Falcon has no linear biases")
    if not d.get("parallel_attn", True):
        fail(f"{path}: parallel_attn=false; llama.cpp's Falcon is parallel only")
    if d.get("alibi", False):
        fail(f"{path}: alibi=true is not supported")
    return c


# ---------------------------------------------------------------- safetensors


def read_tensors(model_dir):
    """{name: (dtype, shape, stored ndarray)} of model.safetensors: F32 float32, F16 float16,
    BF16 uint16 bits, as stored (wormref.safetensors_io.read_stored)."""
    path = os.path.join(model_dir, safetensors_io.SINGLE_NAME)
    if not os.path.exists(path):
        fail(f"{path}: missing (sharded checkpoints are not supported here)")
    try:
        return safetensors_io.read_stored(path)[0]
    except ValueError as e:
        fail(str(e))


# ---------------------------------------------------------------- vocabulary


def read_varint(buf, pos):
    v, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7


def proto_fields(buf):
    """(field number, wire type, value) of a protobuf message; value is bytes for wire type 2."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = read_varint(buf, pos)
        elif wire == 1:
            v, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            v, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            v, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, wire, v


def sentencepiece_pieces(path):
    """[(piece, score, type)] of a sentencepiece ModelProto (pieces = 1; piece = 1, score = 2,
    type = 3 with NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6: the numbering
    llama.cpp's token types share)."""
    with open(path, "rb") as f:
        model = f.read()
    pieces = []
    for number, wire, value in proto_fields(model):
        if number != 1 or wire != 2:
            continue
        piece, score, kind = "", 0.0, 1
        for n, w, v in proto_fields(value):
            if n == 1:
                piece = v.decode("utf-8")
            elif n == 2 and w == 5:
                score = struct.unpack("<f", v)[0]
            elif n == 3 and w == 0:
                kind = v
        pieces.append((piece, score, kind))
    return pieces


# ---------------------------------------------------------------- conversion


def regroup_qkv(w, c):
    """Falcon's fused QKV rows [n_kv, G + 2, head_dim, hidden] -> all Q, all K, all V."""
    n_kv, head_dim = c["n_kv"], c["hidden"] // c["n_head"]
    g = c["n_head"] // n_kv
    qkv = w.reshape(n_kv, g + 2, head_dim, w.shape[-1])
    q = qkv[:, :g].reshape(c["n_head"] * head_dim, -1)
    k = qkv[:, g].reshape(n_kv * head_dim, -1)
    v = qkv[:, g + 1].reshape(n_kv * head_dim, -1)
    return np.concatenate([q, k, v])


def weight_dtype(tensors, suffix):
    """The one dtype of the checkpoint's weights (those whose name ends with suffix) and its GGML
    tensor type and GGUF file type."""
    dtypes = {t[0] for n, t in tensors.items() if n.endswith(suffix)}
    if len(dtypes) != 1:
        fail(f"expected one weight dtype, got {sorted(dtypes)}")
    wdtype = dtypes.pop()
    if wdtype not in ("F32", "F16", "BF16"):
        fail(f"weight dtype {wdtype} is not supported (F32, F16 or BF16)")
    qtype = {"F32": gguf.GGMLQuantizationType.F32, "F16": gguf.GGMLQuantizationType.F16,
             "BF16": gguf.GGMLQuantizationType.BF16}[wdtype]
    ftype = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
             "BF16": gguf.LlamaFileType.MOSTLY_BF16}[wdtype]
    return wdtype, qtype, ftype


def looks_special(text):
    """convert_hf_to_gguf.py's does_token_look_special: control-looking added tokens."""
    return (text.startswith("<|") and text.endswith("|>")) or \
        (text.startswith("<\uff5c") and text.endswith("\uff5c>")) or \
        text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or \
        (text.startswith("<unused") and text.endswith(">"))


def add_bpe_vocab(w, tokenizer_json, vocab, pre, add_bos, bos=None, eos=None):
    """A Hugging Face byte-level BPE tokenizer.json as llama.cpp's "gpt2" vocabulary, written as
    convert_hf_to_gguf.py writes one (get_vocab_base + _set_vocab_gpt2): tokens by id, added
    tokens CONTROL when special or control-looking else USER_DEFINED, ids the tokenizer lacks (up
    to vocab, None: its size) "[PADi]" UNUSED, merges as "a b" strings, pre-tokenizer `pre`. The
    BOS/EOS ids default to <|endoftext|> when the tokenizer has it."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    ids = dict(tj["model"]["vocab"])
    added = {t["id"]: t for t in tj.get("added_tokens", [])}
    for t in added.values():
        ids[t["content"]] = t["id"]
    n = max(ids.values()) + 1 if vocab is None else vocab
    if max(ids.values()) >= n:
        fail(f"{tokenizer_json}: ids up to {max(ids.values())}, more than vocab_size {n}")
    by_id = {i: t for t, i in ids.items()}
    tokens, types = [], []
    for i in range(n):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(5)
        elif i in added:
            t = added[i]
            tokens.append(by_id[i])
            types.append(3 if t.get("special") or looks_special(t["content"]) else 4)
        else:
            tokens.append(by_id[i])
            types.append(1)
    merges = [m if isinstance(m, str) else " ".join(p.replace(" ", "\u0120") for p in m)
              for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eot = ids.get("<|endoftext|>")
    bos = eot if bos is None else bos
    eos = eot if eos is None else eos
    if bos is not None:
        w.add_bos_token_id(int(bos))
    if eos is not None:
        w.add_eos_token_id(int(eos))
    if add_bos is not None:
        w.add_add_bos_token(bool(add_bos))
    return len(tokens)


def add_vocab(w, model_dir, vocab, bos, eos, tokenizer=None, pre="falcon"):
    """The sentencepiece pieces as llama.cpp's "llama" (SPM) vocabulary, padded to vocab; or, with
    `tokenizer` a tokenizer.json, that as a "gpt2" vocabulary (add_bpe_vocab)."""
    if tokenizer is not None and tokenizer.endswith(".json"):
        add_bpe_vocab(w, tokenizer, vocab, pre, add_bos=False)
        return
    tok_path = tokenizer or os.path.join(model_dir, "tokenizer.model")
    pieces = sentencepiece_pieces(tok_path) if os.path.exists(tok_path) else []
    if len(pieces) > vocab:
        fail(f"{tok_path}: {len(pieces)} pieces, more than vocab_size {vocab}")
    if not pieces:
        pieces = [("<unk>", 0.0, 2)]
    pieces += [(f"[PAD{i}]", 0.0, 1) for i in range(len(pieces), vocab)]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([p[0] for p in pieces])
    w.add_token_scores([p[1] for p in pieces])
    w.add_token_types([p[2] for p in pieces])
    unk = next((i for i, p in enumerate(pieces) if p[2] == 2), 0)
    w.add_unk_token_id(unk)
    if isinstance(eos, (list, tuple)):  # Llama 3 configs list several; GGUF holds one
        eos = eos[0] if eos else None
    if bos is not None:
        w.add_bos_token_id(int(bos))
    if eos is not None:
        w.add_eos_token_id(int(eos))
    add_bos = False
    fmt = os.path.join(model_dir, "chat_format.json")
    if os.path.exists(fmt):
        with open(fmt) as f:
            add_bos = bool(json.load(f).get("add_bos", False))
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)


class TensorSink:
    """Writes checkpoint tensors into a GGUFWriter: weights in the checkpoint's dtype (bits
    copied), norms and biases as F32."""

    def __init__(self, w, tensors, wdtype, qtype):
        self.w, self.tensors, self.wdtype, self.qtype = w, tensors, wdtype, qtype

    def f32(self, name, transform=None):
        dtype, _, stored = self.tensors[name]
        arr = safetensors_io.to_f32(dtype, stored)
        return arr if transform is None else transform(arr)

    def weight(self, name, transform=None):
        dtype, _, arr = self.tensors[name]
        if dtype != self.wdtype:
            fail(f"{name}: {dtype}, expected {self.wdtype} like the other weights")
        return arr if transform is None else transform(arr)

    def add(self, gguf_name, arr, is_weight):
        self.w.add_tensor(gguf_name, np.ascontiguousarray(arr),
                          raw_dtype=self.qtype if is_weight and self.wdtype == "BF16" else None)


def finish(w, out, wdtype, n_layer, vocab, arch):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"to_gguf.py: wrote {out} ({arch}, {wdtype}, {n_layer} layers, vocab {vocab})")


# ---------------------------------------------------------------- Llama layout


def permute_rope_rows(a, n_head):
    """HF rotate_half order -> GGML NORM RoPE order, per head (convert_hf_to_gguf's
    LlamaModel.permute): the rows of each head, [2, head_dim / 2] (first half, second half),
    become [head_dim / 2, 2] (interleaved pairs). Works for weights [rows, cols] and biases
    [rows]."""
    rows = a.shape[0]
    if rows % (2 * n_head):
        fail(f"{rows} q/k rows do not split into {n_head} heads of an even head_dim")
    return (a.reshape(n_head, 2, rows // n_head // 2, *a.shape[1:])
            .swapaxes(1, 2)
            .reshape(a.shape))


def llama3_rope_factors(c):
    """rope_freqs for rope_scaling llama3: the divisor of each of the head_dim / 2 frequencies,
    as convert_hf_to_gguf's LlamaModel.generate_extra_tensors computes it (and HF's
    _compute_llama3_parameters: inv_freq / divisor). original_max_position_embeddings is
    rope_scaling's, as HF reads it (the converter reads the top-level key, default 8192)."""
    dim, base = c.head_dim, c.rope_theta
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor, lo, hi = c.rope_factor, c.low_freq_factor, c.high_freq_factor
    old_ctx = c.original_max_position_embeddings
    low_freq_wavelen, high_freq_wavelen = old_ctx / lo, old_ctx / hi
    out = []
    for freq in freqs.astype(np.float64):
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(1.0)
        elif wavelen > low_freq_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def convert_llama(model_dir, out):
    path, d = load_config_json(model_dir)
    try:
        c = LlamaConfig.from_dict(d)
    except ValueError as e:
        fail(f"{path}: {e}")
    n_head, n_kv, head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    if c.attention_bias and n_head * head_dim != c.hidden_size:
        # llama.cpp b6673 declares attn_q.bias as [n_embd] (llama-model.cpp, LLM_ARCH_LLAMA).
        fail(f"{path}: attention_bias with heads x head_dim ({n_head} x {head_dim}) != "
             f"hidden_size ({c.hidden_size}); llama.cpp's llama loader expects a q bias of "
             "hidden_size")
    tensors = read_tensors(model_dir)
    wdtype, qtype, ftype = weight_dtype(tensors, "self_attn.q_proj.weight")

    w = gguf.GGUFWriter(out, "llama")
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(c.rope_theta)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    if d.get("head_dim") is not None or head_dim * n_head != c.hidden_size:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_file_type(ftype)
    w.add_vocab_size(c.vocab_size)
    w.add_rope_dimension_count(head_dim)
    if c.rope_type == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(c.rope_factor)
    add_vocab(w, model_dir, c.vocab_size, c.bos_token_id, c.eos_token_id, TOKENIZER["path"],
              TOKENIZER["pre"])

    t = TensorSink(w, tensors, wdtype, qtype)

    def has_bias(name, flag, key):
        if name in tensors:
            return True
        if flag:
            fail(f"{name} missing and {key} is true")
        return False

    t.add("token_embd.weight", t.weight("model.embed_tokens.weight"), True)
    if c.rope_type == "llama3":
        t.add("rope_freqs.weight", llama3_rope_factors(c), False)
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        t.add(f"blk.{i}.attn_norm.weight", t.f32(f"{p}input_layernorm.weight"), False)
        for src, dst, heads in (("q_proj", "attn_q", n_head), ("k_proj", "attn_k", n_kv),
                                ("v_proj", "attn_v", None), ("o_proj", "attn_output", None)):
            perm = None if heads is None else (lambda a, h=heads: permute_rope_rows(a, h))
            t.add(f"blk.{i}.{dst}.weight", t.weight(f"{p}self_attn.{src}.weight", perm), True)
            if has_bias(f"{p}self_attn.{src}.bias", c.attention_bias, "attention_bias"):
                t.add(f"blk.{i}.{dst}.bias", t.f32(f"{p}self_attn.{src}.bias", perm), False)
        t.add(f"blk.{i}.ffn_norm.weight", t.f32(f"{p}post_attention_layernorm.weight"), False)
        for src, dst in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"),
                         ("down_proj", "ffn_down")):
            t.add(f"blk.{i}.{dst}.weight", t.weight(f"{p}mlp.{src}.weight"), True)
            if has_bias(f"{p}mlp.{src}.bias", c.mlp_bias, "mlp_bias"):
                t.add(f"blk.{i}.{dst}.bias", t.f32(f"{p}mlp.{src}.bias"), False)
    t.add("output_norm.weight", t.f32("model.norm.weight"), False)
    if not c.tie_word_embeddings:
        if "lm_head.weight" not in tensors:
            fail("lm_head.weight missing and tie_word_embeddings is false")
        t.add("output.weight", t.weight("lm_head.weight"), True)
    finish(w, out, wdtype, c.num_hidden_layers, c.vocab_size, "llama")


# ---------------------------------------------------------------- Falcon layout


def convert_falcon(model_dir, out):
    c = read_config(model_dir)
    tensors = read_tensors(model_dir)
    wdtype, qtype, ftype = weight_dtype(tensors, "query_key_value.weight")

    w = gguf.GGUFWriter(out, "falcon")
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_context_length(c["ctx"])
    w.add_embedding_length(c["hidden"])
    w.add_feed_forward_length(c["ffn"])
    w.add_block_count(c["n_layer"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_kv"])
    w.add_layer_norm_eps(c["eps"])
    w.add_rope_freq_base(c["theta"])
    w.add_file_type(ftype)

    add_vocab(w, model_dir, c["vocab"], c["bos"], c["eos"], TOKENIZER["path"], TOKENIZER["pre"])

    t = TensorSink(w, tensors, wdtype, qtype)
    t.add("token_embd.weight", t.weight("transformer.word_embeddings.weight"), True)
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        # llama.cpp's falcon graph feeds attn_norm to the MLP and attn_norm_2 (when present) to
        # the attention, as gguf-py's tensor_mapping names Falcon-40B's ln_mlp and ln_attn.
        norms = [("ln_mlp", "attn_norm"), ("ln_attn", "attn_norm_2")] if c["new_arch"] and \
            f"{p}ln_attn.weight" in tensors else [("input_layernorm", "attn_norm")]
        for src, dst in norms:
            t.add(f"blk.{i}.{dst}.weight", t.f32(f"{p}{src}.weight"), False)
            t.add(f"blk.{i}.{dst}.bias", t.f32(f"{p}{src}.bias"), False)
        t.add(f"blk.{i}.attn_qkv.weight",
              t.weight(f"{p}self_attention.query_key_value.weight", lambda a: regroup_qkv(a, c)),
              True)
        t.add(f"blk.{i}.attn_output.weight", t.weight(f"{p}self_attention.dense.weight"), True)
        t.add(f"blk.{i}.ffn_up.weight", t.weight(f"{p}mlp.dense_h_to_4h.weight"), True)
        t.add(f"blk.{i}.ffn_down.weight", t.weight(f"{p}mlp.dense_4h_to_h.weight"), True)
    t.add("output_norm.weight", t.f32("transformer.ln_f.weight"), False)
    t.add("output_norm.bias", t.f32("transformer.ln_f.bias"), False)
    if "lm_head.weight" in tensors:
        t.add("output.weight", t.weight("lm_head.weight"), True)
    finish(w, out, wdtype, c["n_layer"], c["vocab"], "falcon")


TOKENIZER = {"path": None, "pre": "falcon"}


def main():
    args = sys.argv[1:]
    while len(args) > 2 and args[-2] in ("--tokenizer", "--pre"):
        TOKENIZER["path" if args[-2] == "--tokenizer" else "pre"] = args[-1]
        args = args[:-2]
    if len(args) != 2:
        fail("usage: to_gguf.py MODEL_DIR OUT.gguf [--tokenizer tokenizer.model|tokenizer.json] "
             "[--pre NAME]")
    model_dir, out = args
    _, d = load_config_json(model_dir)
    if is_llama(d):
        convert_llama(model_dir, out)
    else:
        convert_falcon(model_dir, out)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Converts a wormchat / Hugging Face Falcon checkpoint to GGUF for llama.cpp, keeping its dtype.

    PYTHONPATH=LLAMA_CPP/gguf-py /usr/bin/python3 tools/python/to_gguf.py MODEL_DIR OUT.gguf

MODEL_DIR holds config.json, model.safetensors (one file; HF or RW-era key names) and, if present,
tokenizer.model (sentencepiece) and chat_format.json. Weights are written in the checkpoint's own
dtype (F32, F16 or BF16 bits copied as they are), so both programs run the same numbers; layer
norms stay F32 as llama.cpp wants. The fused query_key_value rows are regrouped from Falcon's
per-KV-group order (G query heads, then K, then V, per group) to llama.cpp's (all Q, all K, all
V), as llama.cpp's own converter does.

The vocabulary is the sentencepiece model's pieces (llama.cpp's "llama" SPM tokenizer, so text
tokenizes as wormchat's does); ids past the tokenizer (a model vocabulary larger than it), or all
of them for a model without tokenizer.model, get padding pieces "[PADn]" of type NORMAL, so
llama.cpp prints them and a random checkpoint's greedy tokens can be compared as text (no text
tokenizes into them).

llama.cpp's Falcon graph has no linear biases and always runs attention and MLP in parallel, so
checkpoints with bias=true or parallel_attn=false are refused. Run by tools/bench/compare.sh; its
check is that greedy tokens agree.
"""

import json
import os
import struct
import sys

import numpy as np

from wormref import safetensors_io

try:
    import gguf
except ImportError:
    sys.exit("to_gguf.py: needs llama.cpp's gguf-py (PYTHONPATH=LLAMA_CPP/gguf-py)")


def fail(msg):
    sys.exit(f"to_gguf.py: {msg}")


# ---------------------------------------------------------------- config


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        d = json.load(f)

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


def main():
    if len(sys.argv) != 3:
        fail("usage: to_gguf.py MODEL_DIR OUT.gguf")
    model_dir, out = sys.argv[1], sys.argv[2]
    c = read_config(model_dir)
    tensors = read_tensors(model_dir)
    weight_dtypes = {t[0] for n, t in tensors.items() if n.endswith("query_key_value.weight")}
    if len(weight_dtypes) != 1:
        fail(f"expected one weight dtype, got {sorted(weight_dtypes)}")
    wdtype = weight_dtypes.pop()
    qtype = {"F32": gguf.GGMLQuantizationType.F32, "F16": gguf.GGMLQuantizationType.F16,
             "BF16": gguf.GGMLQuantizationType.BF16}[wdtype]
    ftype = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
             "BF16": gguf.LlamaFileType.MOSTLY_BF16}[wdtype]

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

    # Vocabulary: the sentencepiece pieces, padded to the model's vocab_size.
    tok_path = os.path.join(model_dir, "tokenizer.model")
    pieces = sentencepiece_pieces(tok_path) if os.path.exists(tok_path) else []
    if len(pieces) > c["vocab"]:
        fail(f"{tok_path}: {len(pieces)} pieces, more than vocab_size {c['vocab']}")
    if not pieces:
        pieces = [("<unk>", 0.0, 2)]
    pieces += [(f"[PAD{i}]", 0.0, 1) for i in range(len(pieces), c["vocab"])]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([p[0] for p in pieces])
    w.add_token_scores([p[1] for p in pieces])
    w.add_token_types([p[2] for p in pieces])
    unk = next((i for i, p in enumerate(pieces) if p[2] == 2), 0)
    w.add_unk_token_id(unk)
    if c["bos"] is not None:
        w.add_bos_token_id(int(c["bos"]))
    if c["eos"] is not None:
        w.add_eos_token_id(int(c["eos"]))
    add_bos = False
    fmt = os.path.join(model_dir, "chat_format.json")
    if os.path.exists(fmt):
        with open(fmt) as f:
            add_bos = bool(json.load(f).get("add_bos", False))
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)

    def norm(name):  # layer norms in F32
        dtype, _, stored = tensors[name]
        return safetensors_io.to_f32(dtype, stored)

    def weight(name, transform=None):
        dtype, _, arr = tensors[name]
        if dtype != wdtype:
            fail(f"{name}: {dtype}, expected {wdtype} like the other weights")
        return arr if transform is None else transform(arr)

    def add(gguf_name, arr, is_weight):
        w.add_tensor(gguf_name, np.ascontiguousarray(arr),
                     raw_dtype=qtype if is_weight and wdtype == "BF16" else None)

    add("token_embd.weight", weight("transformer.word_embeddings.weight"), True)
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        norms = [("ln_attn", "attn_norm"), ("ln_mlp", "attn_norm_2")] if c["new_arch"] and \
            f"{p}ln_attn.weight" in tensors else [("input_layernorm", "attn_norm")]
        for src, dst in norms:
            add(f"blk.{i}.{dst}.weight", norm(f"{p}{src}.weight"), False)
            add(f"blk.{i}.{dst}.bias", norm(f"{p}{src}.bias"), False)
        add(f"blk.{i}.attn_qkv.weight",
            weight(f"{p}self_attention.query_key_value.weight", lambda a: regroup_qkv(a, c)), True)
        add(f"blk.{i}.attn_output.weight", weight(f"{p}self_attention.dense.weight"), True)
        add(f"blk.{i}.ffn_up.weight", weight(f"{p}mlp.dense_h_to_4h.weight"), True)
        add(f"blk.{i}.ffn_down.weight", weight(f"{p}mlp.dense_4h_to_h.weight"), True)
    add("output_norm.weight", norm("transformer.ln_f.weight"), False)
    add("output_norm.bias", norm("transformer.ln_f.bias"), False)
    if "lm_head.weight" in tensors:
        add("output.weight", weight("lm_head.weight"), True)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"to_gguf.py: wrote {out} ({wdtype}, {c['n_layer']} layers, vocab {c['vocab']})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/NAME/): a few small valid inputs per parser,
some near-misses, and copies of small real files of the repository. Run from the repository root."""
import json
import os
import struct

ROOT = "tests/fuzz/corpus"


def put(name, file, data):
    os.makedirs(f"{ROOT}/{name}", exist_ok=True)
    with open(f"{ROOT}/{name}/{file}", "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def safetensors(tensors, pad=True, metadata=True):
    header, data = {}, b""
    for name, (dtype, shape, size) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += bytes(range(size % 256)) + b"\0" * (size - size % 256)
    if metadata:
        header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


put("safetensors", "two.safetensors",
    safetensors({"w": ("F32", [2, 3], 24), "b": ("BF16", [3], 6)}))
put("safetensors", "empty.safetensors", safetensors({}, metadata=False))
put("safetensors", "scalar_u8.safetensors", safetensors({"s": ("U8", [], 1), "z": ("F16", [0, 4], 0)}))
put("safetensors", "f64.safetensors", safetensors({"x": ("F64", [1, 1, 2], 16)}, pad=False))

put("safetensors_index", "index.json", json.dumps({
    "metadata": {"total_size": 48},
    "weight_map": {"transformer.h.0.w": "model-00001-of-00002.safetensors",
                   "lm_head.weight": "model-00002-of-00002.safetensors"}}, indent=2))
put("safetensors_index", "slash.json", '{"weight_map": {"a": "../x.safetensors"}}')

put("config", "default.json", open("assets/default-model/config.json").read())
put("config", "falcon7b.json", json.dumps({
    "architectures": ["FalconForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 2, "vocab_size": 100, "multi_query": True, "parallel_attn": True,
    "bias": False, "new_decoder_architecture": False, "layer_norm_epsilon": 1e-5,
    "bos_token_id": 11, "eos_token_id": 11, "rope_theta": 10000.0, "max_position_embeddings": 2048}))
put("config", "rw40b.json", json.dumps({
    "model_type": "RefinedWeb", "hidden_size": 128, "n_head": 8, "n_head_kv": 2, "n_layer": 2,
    "vocab_size": 64, "new_decoder_architecture": True, "alibi": False, "rope_scaling": None}))
put("config", "falcon3.json", json.dumps({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 96,
    "intermediate_size": 160, "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 32,
    "num_hidden_layers": 2, "vocab_size": 100, "rms_norm_eps": 1e-6, "rope_theta": 1000042,
    "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
    "rope_scaling": None, "bos_token_id": 11, "eos_token_id": 11}))
put("config", "llama3_scaled.json", json.dumps({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 50,
    "tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}))
put("config", "linear.json", json.dumps({
    "model_type": "llama", "hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 1,
    "vocab_size": 10, "rope_scaling": {"type": "linear", "factor": 2.0}}))

put("kv_scales", "default.json", open("assets/default-model/kv_scales.json").read())
put("kv_scales", "two.json", json.dumps({"format": "wormchat-kv-scales-1", "fingerprint": "ab",
                                         "n_layers": 2, "calibration_tokens": 10,
                                         "k_amax": [1.5, 0], "v_amax": [2, 3.25e38]}))

put("chat_format", "default.json", open("assets/default-model/chat_format.json").read())
put("chat_format", "full.json", json.dumps({
    "add_bos": True, "user_prefix": "<|user|>", "user_suffix": "\n", "assistant_prefix": "<|a|>",
    "system_prefix": "S: ", "system_suffix": "\n", "end_of_turn": "none", "stop": ["\nUser:", "</s>"],
    "turn_separator": "\n", "trim_messages": True, "collapse_blank_lines": True}))
# The chat_format fuzzer reads the same bytes as tokenizer_config.json (its chat_template).
templates = "tests/fixtures/chat_templates"
put("chat_format", "tokenizer_config_falcon3.json", json.dumps({
    "chat_template": open(f"{templates}/falcon3.jinja").read(), "eos_token": "<|endoftext|>"}))
put("chat_format", "tokenizer_config_llama3_list.json", json.dumps({
    "chat_template": [{"name": "tool_use", "template": "x"},
                      {"name": "default", "template": open(f"{templates}/llama3.jinja").read()}],
    "bos_token": {"content": "<|begin_of_text|>"}, "eos_token": "<|eot_id|>"}))
put("chat_format", "tokenizer_config_falcon_instruct.json", json.dumps({
    "chat_template": open(f"{templates}/falcon_instruct.jinja", newline="").read(),
    "eos_token": "<|endoftext|>"}))


def npy(shape, version=1, descr="<f4", values=None):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    head = 10 if version == 1 else 12
    d += " " * ((64 - (head + len(d) + 1) % 64) % 64) + "\n"
    n = 1
    for s in shape:
        n *= s
    size = struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return b"\x93NUMPY" + bytes([version, 0]) + size + d.encode() + struct.pack(f"<{n}f", *range(n))


put("npy", "2x3.npy", npy([2, 3]))
put("npy", "vector.npy", npy([5]))
put("npy", "scalar.npy", npy([]))
put("npy", "empty_v2.npy", npy([0, 7], version=2))

put("tokenizer", "tokenizer.model", open("tests/fixtures/tokenizer/tokenizer.model", "rb").read())

SEP = b"\xff\xfe"
put("text_stream", "plain", b"\x00" + SEP.join([b"Hello", b" w\xc3", b"\xb6rld", b"\n"]))
put("text_stream", "stop", b"\x05" + SEP.join([b"\nUser:", b"A reply", b"\nUs", b"er: more"]))
put("text_stream", "bad", b"\x02" + SEP.join([b"\xe2\x82", b"\xf0\x9f\x90", b"\xa6\x01\x7f\xc2\x85",
                                             b"\xed\xa0\x80\xc0\xaf", b"\xe2", b"\x82\xac"]))

put("batch_input", "jsonl.jsonl", "\n".join(json.dumps(x) for x in [
    {"custom_id": "a", "method": "POST", "url": "/v1/completions",
     "body": {"prompt": "Hi", "max_tokens": 5, "temperature": 0.5, "top_p": 0.9, "top_k": -1,
              "seed": 3, "stop": ["\n"]}},
    {"custom_id": "b", "method": "POST", "url": "/v1/chat/completions",
     "body": {"messages": [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Hello"}],
              "num_beams": 4, "length_penalty": 1.0, "early_stopping": True, "n": 2}},
    {"custom_id": "a", "method": "GET", "url": "/x", "body": {"prompt": ""}}]) + "\n\n{bad\n")
put("batch_input", "text.txt", "What is a falcon?\n\n\xef\xbb\xbfAnother prompt\r\n")

for f in ["kv_int8.txt", "beams.txt", "context_trim.txt"]:
    put("transcript", f, open(f"tests/transcripts/{f}").read())

put("turns_file", "turns.txt", 'What is a falcon?\n\n"""\nTwo lines,\n\nkept.\n"""\n/reset\n'
    '/set temperature 0.5\n/set system "Be brief."\nLast one\n')
put("turns_file", "bad.txt", '/set temperature\n/bogus\n"""\n')


# GGUF (model/gguf/gguf_file.h): the layout ggml/src/gguf.cpp writes, little-endian.
def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q",
           12: "<d"}
    if t == 8:
        return gguf_str(v)
    if t == 9:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(fmt[t], v)


def gguf(keys, tensors, version=3, alignment=32):
    """keys: [(name, type, value)]; tensors: [(name, ggml type, ne, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(keys))
    for name, t, v in keys:
        out += gguf_str(name) + struct.pack("<I", t) + gguf_value(t, v)
    at, offsets = 0, []
    for _, _, _, data in tensors:
        offsets.append(at)
        at = (at + len(data) + alignment - 1) // alignment * alignment
    for (name, t, ne, _), off in zip(tensors, offsets):
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", t, off)
    if tensors:
        out += b"\0" * ((alignment - len(out) % alignment) % alignment)
        body = bytearray(at)
        for (_, _, _, data), off in zip(tensors, offsets):
            body[off:off + len(data)] = data
        out += bytes(body)
    return out


LLAMA_KEYS = [("general.architecture", 8, "llama"), ("llama.block_count", 4, 1),
              ("llama.context_length", 4, 64), ("llama.embedding_length", 4, 32),
              ("llama.feed_forward_length", 4, 64), ("llama.attention.head_count", 4, 4),
              ("llama.attention.head_count_kv", 4, 2), ("llama.rope.freq_base", 6, 10000.0),
              ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
              ("tokenizer.ggml.model", 8, "gpt2"), ("tokenizer.ggml.pre", 8, "falcon3"),
              ("tokenizer.ggml.tokens", 9, (8, ["<s>", "a", "b", "ab", "\u0120"])),
              ("tokenizer.ggml.token_type", 9, (5, [3, 1, 1, 1, 1])),
              ("tokenizer.ggml.merges", 9, (8, ["a b"])),
              ("tokenizer.ggml.bos_token_id", 4, 0), ("tokenizer.ggml.add_bos_token", 7, 0),
              ("general.flags", 9, (10, [1, 2])), ("general.scale", 12, 0.5), ("general.i64", 11, -3)]
put("gguf", "llama_f32_q8.gguf", gguf(LLAMA_KEYS, [
    ("token_embd.weight", 0, [8, 2], bytes(range(64))),
    ("output_norm.weight", 1, [32], bytes(64)),
    ("blk.0.attn_q.weight", 8, [32, 2], bytes(range(68))),
    ("blk.0.ffn_down.weight", 2, [32, 1], bytes(18)),
    ("blk.0.ffn_up.weight", 12, [256, 1], bytes(144)),
    ("blk.0.ffn_gate.weight", 30, [4, 1], bytes(8))]))
put("gguf", "v2_align64.gguf", gguf([("general.alignment", 4, 64)] + LLAMA_KEYS[:3],
                                    [("a", 0, [4], bytes(16)), ("b", 14, [256], bytes(210))],
                                    version=2, alignment=64))
put("gguf", "empty.gguf", gguf([], []))
# A vocabulary alone (model/gguf/gguf_vocab.h, tokenizer/gguf_tokenizer.h): SPM with scores, a
# control and a user-defined token and byte pieces.
put("gguf", "vocab_spm.gguf", gguf([
    ("general.architecture", 8, "falcon"), ("tokenizer.ggml.model", 8, "llama"),
    ("tokenizer.ggml.tokens", 9, (8, ["<unk>", "<s>", "</s>", "<|endoftext|>", "<ud>",
                                      "\u2581", "a", "b", "ab", "\u2581a"] +
                                     [f"<0x{b:02X}>" for b in range(256)])),
    ("tokenizer.ggml.scores", 9, (6, [0.0] * 5 + [-1.0, -2.0, -2.0, -0.5, -0.25] + [0.0] * 256)),
    ("tokenizer.ggml.token_type", 9, (5, [2, 3, 3, 3, 4] + [1] * 5 + [6] * 256)),
    ("tokenizer.ggml.bos_token_id", 4, 1), ("tokenizer.ggml.eos_token_id", 4, 2)], []))

def f32s(n, seed):
    return b"".join(struct.pack("<f", ((i * 7 + seed) % 13 - 6) / 8.0) for i in range(n))


# Whole models (gguf_config.h, gguf_tensors.h): every tensor their keys need, F32.
TINY_LLAMA = [("general.architecture", 8, "llama"), ("llama.block_count", 4, 1),
              ("llama.context_length", 4, 16), ("llama.embedding_length", 4, 8),
              ("llama.feed_forward_length", 4, 16), ("llama.attention.head_count", 4, 2),
              ("llama.attention.head_count_kv", 4, 1),
              ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5)]
put("gguf", "model_llama.gguf", gguf(TINY_LLAMA, [
    (name, 0, ne, f32s(ne[0] * (ne[1] if len(ne) > 1 else 1), i))
    for i, (name, ne) in enumerate([
        ("token_embd.weight", [8, 4]), ("output_norm.weight", [8]), ("output.weight", [8, 4]),
        ("blk.0.attn_norm.weight", [8]), ("blk.0.ffn_norm.weight", [8]),
        ("blk.0.attn_q.weight", [8, 8]), ("blk.0.attn_k.weight", [8, 4]),
        ("blk.0.attn_v.weight", [8, 4]), ("blk.0.attn_output.weight", [8, 8]),
        ("blk.0.ffn_gate.weight", [8, 16]), ("blk.0.ffn_up.weight", [8, 16]),
        ("blk.0.ffn_down.weight", [16, 8])])]))
TINY_FALCON = [("general.architecture", 8, "falcon"), ("falcon.block_count", 4, 1),
               ("falcon.context_length", 4, 16), ("falcon.embedding_length", 4, 8),
               ("falcon.feed_forward_length", 4, 16), ("falcon.attention.head_count", 4, 4),
               ("falcon.attention.head_count_kv", 4, 2),
               ("falcon.attention.layer_norm_epsilon", 6, 1e-5),
               ("tokenizer.ggml.bos_token_id", 4, 0), ("tokenizer.ggml.eos_token_id", 4, 3)]
put("gguf", "model_falcon_grouped.gguf", gguf(TINY_FALCON, [
    (name, 0, ne, f32s(ne[0] * (ne[1] if len(ne) > 1 else 1), i))
    for i, (name, ne) in enumerate([
        ("token_embd.weight", [8, 4]), ("output_norm.weight", [8]), ("output_norm.bias", [8]),
        ("blk.0.attn_norm.weight", [8]), ("blk.0.attn_norm.bias", [8]),
        ("blk.0.attn_norm_2.weight", [8]), ("blk.0.attn_norm_2.bias", [8]),
        ("blk.0.attn_qkv.weight", [8, 16]), ("blk.0.attn_output.weight", [8, 8]),
        ("blk.0.ffn_up.weight", [8, 16]), ("blk.0.ffn_down.weight", [16, 8])])]))
put("gguf", "keys_only.gguf", gguf([("general.architecture", 8, "falcon"),
                                    ("falcon.block_count", 5, 2)], []))

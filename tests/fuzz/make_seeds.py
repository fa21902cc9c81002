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

#!/usr/bin/python3
"""Writes the quantized GGUF fixtures of issue 52 (tests/fixtures/gguf/README.md) with llama.cpp
b6673's own llama-quantize and gguf-py, so the tests check wormchat against llama.cpp's bytes and
values without llama.cpp installed (CI has none).

    PYTHONPATH=LLAMA_CPP/gguf-py:tools/python /usr/bin/python3 tools/python/make_quant_fixtures.py \
        LLAMA_CPP/build/bin/llama-quantize tests/fixtures/gguf

Steps (in a temporary directory):
  1. A tiny random Llama-layout checkpoint (seeded): hidden 256 (K types need rows of 256
     multiples), 2 query heads of 32 and 1 KV head, ffn 32, vocabulary 16, one layer. The rows of
     32 (attn_output, ffn_down) are where llama-quantize falls back from K types (Q4_K -> Q5_0,
     Q5_K -> Q5_1, Q6_K -> Q8_0), so a K file mixes types as real Falcon-7B ones do.
  2. tools/python/to_gguf.py writes it as an F32 GGUF; llama-quantize writes it as Q4_K_M, kept
     as tiny_llama_q4_k_m.gguf (Q4_K, Q6_K, and the fallbacks Q5_0 and Q8_0).
  3. It is also quantized to Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q5_K_M and Q6_K. The first
     BLOCK_ROWS rows of one 256-wide tensor of each
     of the eight types wormchat dequantizes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) is
     copied, its bytes as llama-quantize wrote them, into quant_blocks.gguf under the type's name
     ("q4_k"), beside an F32 tensor "q4_k.expected": gguf-py's numpy dequantization of it
     (gguf.quants.dequantize), the values wormchat must give bit for bit.
  4. The committed mq_f32.gguf (OUT/mq_f32.gguf, to_gguf.py's conversion of tests/fixtures/mq_f32)
     quantized by llama-quantize --pure to Q8_0 and Q4_0, kept as mq_q8_0.gguf and mq_q4_0.gguf:
     GGUF draft models for that GGUF target (tests/app/gguf_features_test.cpp; the Q4_0 one's
     proposals are often wrong), its rows all 32-multiples.
Byte-identical on a rerun (seeded weights; llama-quantize is deterministic on one thread).
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import gguf
from gguf import quants
from wormref import safetensors_io

HIDDEN, N_HEAD, N_KV, HEAD_DIM, FFN, VOCAB = 256, 2, 1, 32, 32, 16
BLOCK_ROWS = 4  # rows of each type kept in quant_blocks.gguf

# type name -> (llama-quantize ftype, the 256-wide tensor holding that type in its output)
BLOCK_SOURCES = {
    "q8_0": ("Q8_0", "blk.0.attn_q.weight"),
    "q4_0": ("Q4_0", "blk.0.attn_q.weight"),
    "q4_1": ("Q4_1", "blk.0.attn_q.weight"),
    "q5_0": ("Q5_0", "blk.0.attn_q.weight"),
    "q5_1": ("Q5_1", "blk.0.attn_q.weight"),
    "q4_k": ("Q4_K_M", "blk.0.attn_q.weight"),
    "q5_k": ("Q5_K_M", "blk.0.attn_q.weight"),
    "q6_k": ("Q6_K", "blk.0.attn_q.weight"),
}


def write_checkpoint(out_dir):
    rng = np.random.default_rng(52)
    config = {
        "hidden_act": "silu", "vocab_size": VOCAB, "hidden_size": HIDDEN,
        "intermediate_size": FFN, "num_hidden_layers": 1, "num_attention_heads": N_HEAD,
        "num_key_value_heads": N_KV, "head_dim": HEAD_DIM, "rms_norm_eps": 1e-06,
        "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": False, "max_position_embeddings": 64, "bos_token_id": 1,
        "eos_token_id": 2, "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "torch_dtype": "float32",
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    p = "model.layers.0."
    tensors = {
        "model.embed_tokens.weight": w(VOCAB, HIDDEN),
        p + "input_layernorm.weight": 1 + w(HIDDEN),
        p + "self_attn.q_proj.weight": w(N_HEAD * HEAD_DIM, HIDDEN),
        p + "self_attn.k_proj.weight": w(N_KV * HEAD_DIM, HIDDEN),
        p + "self_attn.v_proj.weight": w(N_KV * HEAD_DIM, HIDDEN),
        p + "self_attn.o_proj.weight": w(HIDDEN, N_HEAD * HEAD_DIM),
        p + "post_attention_layernorm.weight": 1 + w(HIDDEN),
        p + "mlp.gate_proj.weight": w(FFN, HIDDEN),
        p + "mlp.up_proj.weight": w(FFN, HIDDEN),
        p + "mlp.down_proj.weight": w(HIDDEN, FFN),
        "model.norm.weight": 1 + w(HIDDEN),
        "lm_head.weight": w(VOCAB, HIDDEN),
    }
    safetensors_io.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)


def quantize(llama_quantize, src, dst, ftype, pure=False):
    subprocess.run([llama_quantize] + (["--pure"] if pure else []) + [src, dst, ftype, "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    llama_quantize, out = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "tiny_llama")
        os.mkdir(ck)
        write_checkpoint(ck)
        f32 = os.path.join(tmp, "tiny_llama_f32.gguf")
        subprocess.run([sys.executable, os.path.join(here, "to_gguf.py"), ck, f32], check=True,
                       stdout=subprocess.DEVNULL)
        quantize(llama_quantize, f32, os.path.join(out, "tiny_llama_q4_k_m.gguf"), "Q4_K_M")

        writer = gguf.GGUFWriter(os.path.join(out, "quant_blocks.gguf"), "llama")
        for name, (ftype, tensor) in BLOCK_SOURCES.items():
            q = os.path.join(tmp, f"{ftype}.gguf")
            if not os.path.exists(q):
                quantize(llama_quantize, f32, q, ftype)
            t = next(t for t in gguf.GGUFReader(q).tensors if t.name == tensor)
            if t.tensor_type.name.lower() != name:
                sys.exit(f"{q}: {tensor} is {t.tensor_type.name}, expected {name}")
            raw = np.array(t.data)[:BLOCK_ROWS]  # [rows, row bytes] as llama-quantize wrote them
            expected = quants.dequantize(raw, t.tensor_type).astype(np.float32)
            writer.add_tensor(name, raw, raw_dtype=t.tensor_type)
            writer.add_tensor(name + ".expected", expected)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    for ftype in ("Q8_0", "Q4_0"):
        quantize(llama_quantize, os.path.join(out, "mq_f32.gguf"),
                 os.path.join(out, f"mq_{ftype.lower()}.gguf"), ftype, pure=True)


if __name__ == "__main__":
    main()

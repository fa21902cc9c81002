#!/usr/bin/env python3
"""Writes a few tiny (< 4 KB) valid GGUF files for the GGUF parser fuzzer's seed corpus, then reads each
back with gguf-py's GGUFReader and prints what it saw.

Uses only the standard library, numpy and llama.cpp's gguf-py (put its directory on PYTHONPATH, e.g.
PYTHONPATH=build-llama/llama.cpp-b6673/gguf-py; if that is missing the script looks for
build-llama/llama.cpp-*/gguf-py next to the repository root).

    usage: make_gguf_seeds.py OUT_DIR

Files written (shapes below are ggml order, ne[0] first = the contiguous row length):
  v3_llama.gguf        GGUF v3, alignment 32 (default), general.architecture "llama", one key of every
                       GGUF value type plus a string array and an int32 array;
                       tensors F32 [8,4], F16 [32,2], Q8_0 [32,2].
  v3_llama_align64.gguf  the same with general.alignment = 64 (u32).
  v3_bf16_q4.gguf      general.architecture "falcon"; tensors BF16 [16,2], Q4_0 [64,2], Q4_K [256,1].

Every value is deterministic, so reruns give byte-identical files.
"""
import glob
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:
    _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    _cands = sorted(glob.glob(os.path.join(_root, "build-llama", "llama.cpp-*", "gguf-py")))
    if not _cands:
        sys.exit("gguf-py not found: set PYTHONPATH to llama.cpp's gguf-py directory")
    sys.path.insert(0, _cands[-1])
    import gguf

from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType, GGUFWriter

try:
    from gguf import quants
except ImportError:  # very old gguf-py
    quants = None

MAX_SEED_BYTES = 4096


# ---------------------------------------------------------------------------------------------------
# deterministic test data

def ramp(ne, scale=1.0, phase=0.0):
    """float32 array for ggml shape ne (ne[0] first) -> numpy shape reversed(ne)."""
    n = int(np.prod(ne))
    x = np.sin(np.arange(n, dtype=np.float64) * 0.37 + phase) * scale
    return x.astype(np.float32).reshape(tuple(reversed(ne)))


def fp16_bits(x):
    return np.array([x], dtype=np.float16).view(np.uint8).tobytes()


# ---------------------------------------------------------------------------------------------------
# block packers (used when gguf-py cannot quantize the type) and reference dequantizers written from
# ggml/src/ggml-quants.c, to cross-check gguf-py and the bytes written

def pack_q8_0_by_hand(x):
    """quantize_row_q8_0_ref: d = amax/127, q = roundf(x/d) (half away from zero)."""
    rows = x.reshape(-1, 32).astype(np.float32)
    out = bytearray()
    for b in rows:
        amax = float(np.max(np.abs(b)))
        d = np.float32(amax / 127.0)
        idv = np.float32(1.0) / d if d != 0 else np.float32(0)
        v = b * idv
        q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
        out += fp16_bits(d) + q.astype(np.int8).tobytes()
    return np.frombuffer(bytes(out), dtype=np.uint8).reshape(x.shape[:-1] + (x.shape[-1] // 32 * 34,))


def pack_q4_k_block(d, dmin, sc, mn, q):
    """One block_q4_K (144 bytes): f16 d, f16 dmin, scales[12], qs[128].
    sc, mn: 8 six-bit sub-block scales/mins (inverse of get_scale_min_k4); q: 256 values in 0..15."""
    assert len(sc) == len(mn) == 8 and all(0 <= v < 64 for v in list(sc) + list(mn))
    s = [0] * 12
    for j in range(4):
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
        s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6)
        s[j + 8] = (sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4)
    qs = bytearray(128)
    # element order: for each 64-chunk c: 32 low nibbles of qs[32c..32c+31], then 32 high nibbles
    for c in range(4):
        for l in range(32):
            lo = q[64 * c + l]
            hi = q[64 * c + 32 + l]
            qs[32 * c + l] = (lo & 0xF) | ((hi & 0xF) << 4)
    return fp16_bits(d) + fp16_bits(dmin) + bytes(s) + bytes(qs)


def get_scale_min_k4(j, q):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def ref_dequant(raw, qt):
    """Straight transcription of dequantize_row_* for the types used here; returns float32 values."""
    raw = bytes(raw)
    h = lambda b: float(np.frombuffer(b, dtype=np.float16)[0])
    out = []
    if qt == QT.Q8_0:
        for o in range(0, len(raw), 34):
            d = np.float32(h(raw[o:o + 2]))
            out += [np.float32(v) * d for v in np.frombuffer(raw[o + 2:o + 34], dtype=np.int8)]
    elif qt == QT.Q4_0:
        for o in range(0, len(raw), 18):
            d = np.float32(h(raw[o:o + 2]))
            qs = raw[o + 2:o + 18]
            out += [np.float32((b & 0xF) - 8) * d for b in qs] + [np.float32((b >> 4) - 8) * d for b in qs]
    elif qt == QT.Q4_K:
        for o in range(0, len(raw), 144):
            d, dmin = np.float32(h(raw[o:o + 2])), np.float32(h(raw[o + 2:o + 4]))
            sc, qs = raw[o + 4:o + 16], raw[o + 16:o + 144]
            for c in range(4):
                s0, m0 = get_scale_min_k4(2 * c, sc)
                s1, m1 = get_scale_min_k4(2 * c + 1, sc)
                d1, mm1, d2, mm2 = d * s0, dmin * m0, d * s1, dmin * m1
                chunk = qs[32 * c:32 * c + 32]
                out += [d1 * (b & 0xF) - mm1 for b in chunk] + [d2 * (b >> 4) - mm2 for b in chunk]
    elif qt == QT.BF16:
        u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        out = list(u.view(np.float32))
    else:
        raise NotImplementedError(qt)
    return np.array(out, dtype=np.float32)


# ---------------------------------------------------------------------------------------------------
# quantization with gguf-py, falling back to hand packing

def quantize(x, qt):
    """Returns (uint8 byte array shaped like gguf-py's byte shape, how)."""
    if quants is not None:
        try:
            return quants.quantize(x, qt), "gguf-py quants.quantize"
        except (NotImplementedError, AttributeError):
            pass
    if qt == QT.Q8_0:
        return pack_q8_0_by_hand(x), "hand-packed (quantize_row_q8_0_ref)"
    raise NotImplementedError(qt)


def q4_k_tensor():
    """One hand-packed Q4_K row of 256 (gguf-py has no Q4_K quantizer)."""
    sc = [1, 7, 13, 20, 33, 45, 58, 63]           # exercises the high-2-bit packing for j >= 4
    mn = [0, 5, 17, 31, 40, 48, 55, 62]
    q = [(7 * i + (i >> 5)) & 15 for i in range(256)]
    blk = pack_q4_k_block(0.0625, 0.03125, sc, mn, q)
    assert len(blk) == 144
    assert [get_scale_min_k4(j, blk[4:16]) for j in range(8)] == list(zip(sc, mn))
    return np.frombuffer(blk, dtype=np.uint8).reshape(1, 144).copy()


# ---------------------------------------------------------------------------------------------------
# writers

def add_every_value_type(w):
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "h\u00e9llo gguf")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**40))
    w.add_float64("test.f64", -1.0e-300)
    w.add_array("test.arr_str", ["a", "", "\u00df\u00e7", "last"])   # empty element is allowed inside arrays
    w.add_array("test.arr_i32", [1, -2, 3, 2147483647])           # ints -> INT32 sub-type
    w.add_key_value("test.arr_u8", [0, 1, 255], GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT8)


def add_llama_hparams(w, arch):
    w.add_name("tiny-seed")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    if arch == "llama":
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
    else:
        w.add_layer_norm_eps(1e-5)
    w.add_file_type(7 if arch == "llama" else 2)   # LLAMA_FTYPE_MOSTLY_Q8_0 / _Q4_0 (informational only)
    w.add_quantization_version(2)


def write_gguf(path, arch, tensors, alignment=None, every_type=True):
    """tensors: list of (name, array, raw_dtype or None). float32/float16 arrays go in as-is,
    uint8 arrays are raw quantized bytes (gguf-py converts their byte shape to the element shape)."""
    w = GGUFWriter(path, arch)          # writes general.architecture itself
    if alignment is not None:
        w.add_custom_alignment(alignment)   # general.alignment as UINT32
    add_llama_hparams(w, arch)
    if every_type:
        add_every_value_type(w)
    for name, arr, qt in tensors:
        if qt is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------------------------------
# verification

def field_value(f):
    t = f.types[0]
    if t == GGUFValueType.STRING:
        return repr(bytes(f.parts[-1]).decode("utf-8"))
    if t == GGUFValueType.ARRAY:
        sub = f.types[-1]
        if sub == GGUFValueType.STRING:
            return "[" + ", ".join(repr(bytes(f.parts[i]).decode("utf-8")) for i in f.data) + "]"
        return "[" + ", ".join(str(f.parts[i][0]) for i in f.data) + "]"
    return str(f.parts[-1][0])


def verify(path, originals):
    """Reads path back; checks what gguf.cpp (b6673) would check; returns printable lines."""
    lines = []
    size = os.path.getsize(path)
    r = GGUFReader(path)
    version = int(r.fields["GGUF.version"].parts[0][0])
    lines.append(f"== {os.path.basename(path)}: {size} bytes, version {version}, "
                 f"alignment {r.alignment}, data_offset {r.data_offset}, "
                 f"{len(r.tensors)} tensors, {len(r.fields) - 3} KV pairs")
    assert size < MAX_SEED_BYTES, size
    assert version == 3
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        t = f.types[0].name + (f"[{f.types[-1].name}]" if f.types[0] == GGUFValueType.ARRAY else "")
        lines.append(f"  kv  {name:42s} {t:14s} {field_value(f)}")
    expected_off = 0
    for t in r.tensors:
        blck, tsize = gguf.GGML_QUANT_SIZES[t.tensor_type]
        ne = [int(v) for v in t.shape]
        rel = t.data_offset - r.data_offset
        lines.append(f"  tensor {t.name:24s} type {t.tensor_type.name:5s} ({int(t.tensor_type):2d}) "
                     f"shape(ne) {ne} n_elements {t.n_elements} n_bytes {t.n_bytes} "
                     f"data_offset {t.data_offset} (rel {rel}) numpy data {t.data.dtype}{list(t.data.shape)}")
        # the rules gguf_init_from_file_impl enforces
        assert ne[0] % blck == 0, "ne[0] not a multiple of the block size"
        assert rel == expected_off, f"offset {rel} != running padded sum {expected_off}"
        assert t.data_offset % r.alignment == 0
        assert t.data_offset + t.n_bytes <= size
        expected_off += -(-t.n_bytes // r.alignment) * r.alignment
        # values
        src, qt = originals[t.name]
        raw = np.asarray(t.data).reshape(-1)
        if qt is None:
            assert np.array_equal(raw, src.reshape(-1)), t.name
        else:
            ref = ref_dequant(raw.tobytes(), qt)
            if quants is not None:
                gp = quants.dequantize(raw, qt).reshape(-1)
                assert np.array_equal(gp, ref), f"gguf-py dequant != reference for {t.name}"
            if src is not None:
                err = float(np.max(np.abs(ref - src.reshape(-1))))
                lines.append(f"         max |dequant - source| = {err:.6g}")
            else:
                lines.append(f"         hand-packed; dequant[0:4] = {ref[:4].tolist()}")
    return lines


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)

    report = []

    # (1) and (2): llama, every value type, F32 / F16 / Q8_0
    f32 = ramp([8, 4], 2.0)
    f16 = ramp([32, 2], 1.5, 0.3).astype(np.float16)
    q8_src = ramp([32, 2], 3.0, 1.1)
    q8, how = quantize(q8_src, QT.Q8_0)
    report.append(f"Q8_0 data: {how}")
    t1 = [("token_embd.weight", f32, None), ("blk.0.attn_q.weight", f16, None), ("blk.0.ffn_up.weight", q8, QT.Q8_0)]
    orig1 = {"token_embd.weight": (f32, None), "blk.0.attn_q.weight": (f16, None),
             "blk.0.ffn_up.weight": (q8_src, QT.Q8_0)}
    for fname, align in (("v3_llama.gguf", None), ("v3_llama_align64.gguf", 64)):
        p = os.path.join(out, fname)
        write_gguf(p, "llama", t1, alignment=align)
        report += verify(p, orig1)

    # (3): BF16, Q4_0, Q4_K
    bf_src = ramp([16, 2], 1.0, 0.7)
    bf, how_bf = quantize(bf_src, QT.BF16)
    q4_src = ramp([64, 2], 0.8, 2.0)
    q4, how_q4 = quantize(q4_src, QT.Q4_0)
    q4k = q4_k_tensor()
    report.append(f"BF16 data: {how_bf}; Q4_0 data: {how_q4}; Q4_K data: hand-packed (gguf-py has no Q4_K quantizer)")
    t3 = [("blk.0.attn_norm.weight", bf, QT.BF16), ("blk.0.attn_qkv.weight", q4, QT.Q4_0),
          ("blk.0.ffn_down.weight", q4k, QT.Q4_K)]
    orig3 = {"blk.0.attn_norm.weight": (bf_src, QT.BF16), "blk.0.attn_qkv.weight": (q4_src, QT.Q4_0),
             "blk.0.ffn_down.weight": (None, QT.Q4_K)}
    p = os.path.join(out, "v3_bf16_q4.gguf")
    write_gguf(p, "falcon", t3, every_type=False)
    report += verify(p, orig3)

    print("\n".join(report))


if __name__ == "__main__":
    main()

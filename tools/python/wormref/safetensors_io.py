"""Minimal safetensors reader/writer (numpy only, no `safetensors` package).

File layout (all integers little-endian):

    u64 N                      header length in bytes
    N bytes of UTF-8 JSON      {"name": {"dtype": "F32"|"BF16"|"F16",
                                         "shape": [d0, d1, ...],
                                         "data_offsets": [begin, end]},
                                ...,
                                "__metadata__": {"str": "str", ...}}   (optional)
    raw tensor bytes           row-major (C order), little-endian; offsets are
                               relative to the first byte after the header

The header is padded with trailing spaces so that N is a multiple of 8, which
keeps the data buffer 8-byte aligned relative to the file start.

In memory every tensor is a float32 numpy array; the on-disk dtype is chosen at
write time and upcast (exactly) at read time:

    F32   '<f4'                    stored as is
    F16   '<f2'                    numpy float32 -> float16 cast (round-to-nearest-even)
    BF16  upper 16 bits of fp32    round-to-nearest-even, see f32_to_bf16_bits()
"""

import json
import os
import struct

import numpy as np

# dtype name -> bytes per element
DTYPE_SIZES = {"F32": 4, "F16": 2, "BF16": 2}

# dtype name -> numpy type of the stored values (BF16: the raw upper 16 bits)
STORED_NUMPY_TYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}

# Friendly aliases accepted by write functions.
DTYPE_ALIASES = {
    "f32": "F32", "float32": "F32", "F32": "F32",
    "f16": "F16", "float16": "F16", "F16": "F16",
    "bf16": "BF16", "bfloat16": "BF16", "BF16": "BF16",
}

_MAX_HEADER = 100 * 1024 * 1024  # same sanity cap as the reference implementation


def canonical_dtype(name):
    """Map 'f32'/'bf16'/'f16' (or the safetensors spelling) to 'F32'/'BF16'/'F16'."""
    try:
        return DTYPE_ALIASES[name]
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r}; expected one of f32, bf16, f16") from None


def f32_to_bf16_bits(x):
    """float32 array -> uint16 array of bfloat16 bit patterns (same shape).

    Round-to-nearest-even on the 16 dropped mantissa bits; NaN stays a quiet NaN
    (sign preserved), +-inf stays inf.
    """
    u = np.array(x, dtype=np.float32, order="C").view(np.uint32)
    is_nan = np.isnan(u.view(np.float32))
    lsb = (u >> np.uint32(16)) & np.uint32(1)
    rounded = (u.astype(np.uint64) + np.uint64(0x7FFF) + lsb.astype(np.uint64)) >> np.uint64(16)
    bits = rounded.astype(np.uint16)
    nan_bits = ((u >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(is_nan, nan_bits, bits)


def bf16_bits_to_f32(bits):
    """uint16 array of bfloat16 bit patterns -> float32 array (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_to_dtype(x, dtype):
    """float32 array -> float32 array holding exactly what `dtype` storage would give back."""
    dtype = canonical_dtype(dtype)
    x = np.array(x, dtype=np.float32, order="C")
    if dtype == "F32":
        return x
    if dtype == "F16":
        return x.astype("<f2").astype(np.float32)
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def encode(x, dtype):
    """float32 array -> raw little-endian bytes in `dtype` (C order)."""
    dtype = canonical_dtype(dtype)
    x = np.array(x, dtype=np.float32, order="C")
    if dtype == "F32":
        return x.astype("<f4").tobytes()
    if dtype == "F16":
        return x.astype("<f2").tobytes()
    return f32_to_bf16_bits(x).astype("<u2").tobytes()


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """Write {name: float32 ndarray} to `path`, every tensor stored as `dtype`.

    Tensors are laid out in sorted-name order, back to back. `metadata` is an
    optional {str: str} dict stored under "__metadata__".
    Returns the number of tensor-data bytes written.
    """
    dtype = canonical_dtype(dtype)
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        data = encode(arr, dtype)
        header[name] = {
            "dtype": dtype,
            "shape": [int(d) for d in arr.shape],
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
    return offset


def read_header(path):
    """Return (header dict without "__metadata__", metadata dict, data start offset)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > _MAX_HEADER:
            raise ValueError(f"{path}: header length {n} is implausibly large")
        hbytes = f.read(n)
    if len(hbytes) != n:
        raise ValueError(f"{path}: truncated header")
    header = json.loads(hbytes.decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + n


def read_stored(path):
    """Read a safetensors file without converting it.

    Returns (tensors, metadata):
        tensors  {name: (dtype, shape, ndarray)}: dtype "F32"|"F16"|"BF16" as stored, ndarray the
                 stored values of that shape, '<f4' for F32, '<f2' for F16, '<u2' bits for BF16
        metadata {str: str} from "__metadata__" ({} if absent)
    Validates that data_offsets are in bounds, match shape x dtype size, and
    tile the data buffer without gaps or overlaps.
    """
    header, metadata, start = read_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        buf = f.read()
    tensors = {}
    spans = []
    for name, info in header.items():
        dt = info.get("dtype")
        if dt not in DTYPE_SIZES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dt!r}")
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(v) for v in info["data_offsets"])
        want = int(np.prod(shape, dtype=np.int64)) * DTYPE_SIZES[dt]
        if not (0 <= begin <= end <= len(buf)) or end - begin != want:
            raise ValueError(f"{path}: tensor {name!r} has bad data_offsets {[begin, end]} "
                             f"for shape {list(shape)} {dt} (buffer {len(buf)} bytes)")
        stored = np.frombuffer(buf[begin:end], dtype=STORED_NUMPY_TYPES[dt]).reshape(shape)
        tensors[name] = (dt, shape, stored)
        spans.append((begin, end, name))
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            raise ValueError(f"{path}: data buffer has a gap/overlap at tensor {name!r}")
        pos = end
    if pos != len(buf):
        raise ValueError(f"{path}: {len(buf) - pos} trailing bytes after the last tensor")
    return tensors, metadata


def to_f32(dtype, stored):
    """Stored values (as read_stored gives them) -> float32 array, exactly."""
    if dtype == "BF16":
        return bf16_bits_to_f32(stored)
    if dtype in ("F32", "F16"):
        return stored.astype(np.float32)
    raise ValueError(f"unsupported safetensors dtype {dtype!r}")


def read_safetensors(path):
    """Read a safetensors file, every tensor upcast (exactly) to float32.

    Returns (tensors, dtypes, metadata):
        tensors  {name: float32 ndarray with the stored shape}
        dtypes   {name: "F32"|"F16"|"BF16"} as stored on disk
        metadata {str: str} from "__metadata__" ({} if absent)
    Validates the file as read_stored does.
    """
    stored, metadata = read_stored(path)
    tensors = {name: to_f32(dt, arr) for name, (dt, _, arr) in stored.items()}
    dtypes = {name: dt for name, (dt, _, _) in stored.items()}
    return tensors, dtypes, metadata


# --------------------------------------------------------------------------- checkpoint dirs

SINGLE_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"


def read_model_dir(model_dir):
    """{name: float32 ndarray} of an HF checkpoint dir: model.safetensors, or the shards
    model.safetensors.index.json maps (every shard's tensors must be mapped to that shard)."""
    single = os.path.join(model_dir, SINGLE_NAME)
    index = os.path.join(model_dir, INDEX_NAME)
    if os.path.exists(single):
        return read_safetensors(single)[0]
    if not os.path.exists(index):
        raise FileNotFoundError(f"{model_dir}: neither {SINGLE_NAME} nor {INDEX_NAME}")
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        part = read_safetensors(os.path.join(model_dir, shard))[0]
        for name, arr in part.items():
            if weight_map.get(name) != shard:
                raise ValueError(f"{shard}: tensor {name!r} not mapped to this shard in {INDEX_NAME}")
            tensors[name] = arr
    missing = set(weight_map) - set(tensors)
    if missing:
        raise ValueError(f"{INDEX_NAME} lists tensors missing from shards: {sorted(missing)[:5]}")
    return tensors

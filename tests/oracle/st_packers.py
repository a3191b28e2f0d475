"""numpy packers and decoders for the safetensors-based formats, written from formats.md §3-§6
independently of mixq: GPTQ and AWQ packing, e4m3 decoding, a raw safetensors reader (numpy has
no bf16 / float8 dtypes) and a decoder of mixq's own layout (include/mixq/formats/checkpoint.hpp).
"""
import json
import struct

import numpy as np
import pytest

st_numpy = pytest.importorskip("safetensors.numpy")


def save(path, tensors, renames=None, metadata=None):
    """safetensors.numpy.save_file, then rename dtypes numpy lacks (e.g. {"w": "F8_E4M3"})."""
    st_numpy.save_file(tensors, str(path), metadata=metadata)
    if not renames:
        return
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    for name, dt in renames.items():
        header[name]["dtype"] = dt
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def f16_values(rng, shape):
    return rng.uniform(0.001, 0.1, size=shape).astype(np.float16)


def pack_bits_along_axis0(codes, bits):
    """Dense little-endian bitstream of each column: element i at global bit i*bits."""
    rows, cols = codes.shape
    nwords = (rows * bits + 31) // 32
    words = np.zeros((nwords + 1, cols), dtype=np.uint64)
    for i in range(rows):
        bit = i * bits
        w, s = divmod(bit, 32)
        v = codes[i].astype(np.uint64) << np.uint64(s)
        words[w] |= v & np.uint64(0xFFFFFFFF)
        words[w + 1] |= v >> np.uint64(32)
    return words[:nwords].astype(np.uint32).view(np.int32)


def gptq_tensors(rng, bits, K, N, g, act_order, v1, prefix="layer"):
    G = (K + g - 1) // g
    q = rng.integers(0, 2 ** bits, size=(K, N), dtype=np.uint32)
    zlo = 1 if v1 else 0  # v1 stores z - 1, so its zeros live in [1, 2^b]; v2 in [0, 2^b - 1]
    z = rng.integers(zlo, 2 ** bits + zlo, size=(G, N), dtype=np.int64)
    s = f16_values(rng, (G, N))
    if act_order:
        perm = rng.permutation(K)
        g_idx = np.empty(K, dtype=np.int32)
        g_idx[perm] = np.arange(K) // g
    else:
        g_idx = (np.arange(K) // g).astype(np.int32)
    stored = (z - 1) if v1 else z
    tensors = {
        f"{prefix}.qweight": pack_bits_along_axis0(q, bits),
        f"{prefix}.qzeros": pack_bits_along_axis0(stored.T.astype(np.uint32), bits).T.copy(),
        f"{prefix}.scales": s,
        f"{prefix}.g_idx": g_idx,
        f"{prefix}.bias": rng.standard_normal(N).astype(np.float16),
    }
    # W[n, k] = s[g_idx[k], n] * (q[k, n] - z[g_idx[k], n]), f32 (exact)
    ref = (s[g_idx].astype(np.float32) * (q.astype(np.float32) - z[g_idx].astype(np.float32))).T
    return tensors, ref


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def awq_pack(codes):
    """codes [R, N] -> [R, ceil(N/8)]: nibble i of word c holds column 8c + ORDER[i]."""
    R, N = codes.shape
    C = (N + 7) // 8
    padded = np.zeros((R, C * 8), dtype=np.uint32)
    padded[:, :N] = codes
    out = np.zeros((R, C), dtype=np.uint32)
    for i, col in enumerate(AWQ_ORDER):
        out |= padded[:, col::8] << np.uint32(4 * i)
    return out.view(np.int32)


def e4m3_decode(b):
    b = b.astype(np.int64)
    sign = np.where(b >> 7, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = b & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return (sign * mag).astype(np.float32)


# ----------------------------------------------------------------------------- raw reading

RAW_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "U8": np.uint8,
              "BF16": np.uint16, "F8_E4M3": np.uint8, "I8": np.int8, "I64": np.int64}


def read_raw(path):
    """(tensors as numpy arrays of the stored bytes, metadata); BF16 as uint16, F8 as uint8."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(raw[8 + n + b:8 + n + end], dtype=RAW_DTYPES[e["dtype"]])
        out[name] = (e["dtype"], arr.reshape(e["shape"]))
    return out, meta


def float_of(dtype, arr):
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.float32)


def decode_mixq_layout(path, name):
    """Dequantizes weight `name` of a mixq-layout file in float32 exactly as documented:
    None w = value(q)*s, Offset w = value(q)*s + o, ZeroPoint w = s*(q - z) (unfused f32)."""
    tensors, meta = read_raw(path)
    assert meta["mixq.format"] == "1"
    desc = meta["mixq.weight." + name]
    geo = dict(kv.split("=", 1) for kv in desc.split(";origin=")[0].split(";"))
    N, K = int(geo["N"]), int(geo["K"])
    bk, bn = int(geo["block_k"]), int(geo["block_n"])
    codes = tensors[name + ".codes"][1]
    code = geo["code"]
    if code in ("i4", "u4"):
        lo, hi = codes & 0xF, codes >> 4
        q = np.stack([lo, hi], axis=2).reshape(N, -1)[:, :K].astype(np.int64)
        if code == "i4":
            q = np.where(q >= 8, q - 16, q)
        value = q.astype(np.float32)
    elif code == "i8":
        value = codes.view(np.int8)[:, :K].astype(np.float32)
    elif code == "u8":
        value = codes[:, :K].astype(np.float32)
    elif code == "f8e4m3":
        value = e4m3_decode(codes[:, :K])
    elif code in ("f32", "f16"):
        value = np.ascontiguousarray(codes).view("<f4" if code == "f32" else "<f2").astype(np.float32)
    elif code == "bf16":
        value = float_of("BF16", np.ascontiguousarray(codes).view("<u2"))
    else:
        raise AssertionError(f"unexpected code type {code}")
    if geo["scales"] == "0":
        return value
    sd, s = tensors[name + ".scales"]
    s = np.repeat(np.repeat(float_of(sd, s), bn, 0), bk, 1)[:N, :K]
    zero = geo["zero"]
    if zero == "none":
        return value * s
    zd, z = tensors[name + ".zeros"]
    z = np.repeat(np.repeat(z, bn, 0), bk, 1)[:N, :K]
    if zero == "offset":
        return value * s + float_of(zd, z)
    assert zero == "zero-point" and zd == "I32"
    return s * (value - z.astype(np.float32))

"""Oracle tests for mixq's safetensors reader/writer and its GPTQ / AWQ / FP8-block / dense
conversions, against the `safetensors` package (files written and read by it) and numpy.

Packing and dequantization here are written independently from formats.md §3-§6 in numpy; mixq
is driven through tests/tools/st_tool.cpp (built into the --mixq-tools-dir directory).
numpy has no bf16 / float8 dtypes: such tensors are saved by safetensors as U16 / U8 and the
header's dtype is then renamed (same byte size, offsets unchanged).
"""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

st_numpy = pytest.importorskip("safetensors.numpy")


@pytest.fixture(scope="session")
def tool(request):
    tools_dir = request.config.getoption("--mixq-tools-dir")
    path = os.environ.get("MIXQ_ST_TOOL") or (
        os.path.join(tools_dir, "st_tool") if tools_dir else None)
    if not path or not os.path.exists(path):
        pytest.fail("st_tool not found (pass --mixq-tools-dir or MIXQ_ST_TOOL)")
    return path


def run_tool(tool, *args):
    r = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


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


# ----------------------------------------------------------------------------- packers (numpy)

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


def gptq_tensors(rng, bits, K, N, g, act_order, v1):
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
        "layer.qweight": pack_bits_along_axis0(q, bits),
        "layer.qzeros": pack_bits_along_axis0(stored.T.astype(np.uint32), bits).T.copy(),
        "layer.scales": s,
        "layer.g_idx": g_idx,
        "layer.bias": rng.standard_normal(N).astype(np.float16),
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


def load_dequant(tool, path, tensor, workdir):
    out = os.path.join(str(workdir), "deq.npy")
    run_tool(tool, "dequant", path, tensor, out)
    return np.load(out)


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("v1", [True, False])
@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_dequant_matches_numpy(tool, workdir, bits, v1, act_order):
    rng = np.random.default_rng(bits * 10 + v1 * 2 + act_order)
    K, N, g = 256, 96, 64
    tensors, ref = gptq_tensors(rng, bits, K, N, g, act_order, v1)
    path = os.path.join(str(workdir), "model.safetensors")
    save(path, tensors, metadata={"format": "pt"})
    cfg = {"bits": bits, "group_size": g, "desc_act": act_order, "sym": False,
           "checkpoint_format": "gptq" if v1 else "gptq_v2"}
    with open(os.path.join(str(workdir), "quantize_config.json"), "w") as f:
        json.dump(cfg, f)
    got = load_dequant(tool, path, "layer", workdir)
    assert got.dtype == np.float32 and got.shape == (N, K)
    assert np.array_equal(got, ref)
    # mixq's own layout written from it: readable by safetensors, same dequantization.
    out = os.path.join(str(workdir), "mixq.safetensors")
    run_tool(tool, "save-mixq", path, out)
    back = st_numpy.load_file(out)
    assert back["layer.codes"].dtype == np.uint8 and back["layer.codes"].shape[0] == N
    assert back["layer.zeros"].dtype == np.int32
    if act_order:
        assert sorted(back["layer.k_perm"].tolist()) == list(range(K))
    assert np.array_equal(load_dequant(tool, out, "layer", workdir), ref)


@pytest.mark.parametrize("K,N,g", [(256, 64, 128), (128, 40, 32), (96, 13, 96)])
def test_awq_dequant_matches_numpy(tool, workdir, K, N, g):
    rng = np.random.default_rng(K + N + g)
    G = (K + g - 1) // g
    q = rng.integers(0, 16, size=(K, N), dtype=np.uint32)
    z = rng.integers(0, 16, size=(G, N), dtype=np.uint32)
    s = f16_values(rng, (G, N))
    path = os.path.join(str(workdir), "model.safetensors")
    save(path, {"m.qweight": awq_pack(q), "m.qzeros": awq_pack(z), "m.scales": s})
    with open(os.path.join(str(workdir), "config.json"), "w") as f:
        json.dump({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": g,
                                           "zero_point": True, "version": "gemm"}}, f)
    gi = np.arange(K) // g
    ref = ((q.astype(np.float32) - z[gi].astype(np.float32)) * s[gi].astype(np.float32)).T
    assert np.array_equal(load_dequant(tool, path, "m", workdir), ref)


@pytest.mark.parametrize("N,K", [(300, 200), (128, 384), (7, 130)])
def test_fp8_block_dequant_matches_numpy(tool, workdir, N, K):
    rng = np.random.default_rng(N * K)
    w = rng.integers(0, 256, size=(N, K), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] = 0x38  # no NaN codes
    sinv = rng.uniform(1e-4, 1e-2, size=((N + 127) // 128, (K + 127) // 128)).astype(np.float32)
    path = os.path.join(str(workdir), "model.safetensors")
    save(path, {"x.weight": w, "x.weight_scale_inv": sinv}, renames={"x.weight": "F8_E4M3"})
    ref = e4m3_decode(w) * np.repeat(np.repeat(sinv, 128, 0), 128, 1)[:N, :K]
    assert np.array_equal(load_dequant(tool, path, "x.weight", workdir), ref)


def test_dense_and_writer_roundtrip(tool, workdir):
    rng = np.random.default_rng(5)
    f32 = rng.standard_normal((5, 7)).astype(np.float32)
    f16 = rng.standard_normal((3, 9)).astype(np.float16)
    bf16 = (rng.standard_normal((4, 6)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    extra = {"i8": rng.integers(-128, 128, size=(11,), dtype=np.int8),
             "u8": rng.integers(0, 256, size=(3, 1), dtype=np.uint8),
             "f64": rng.standard_normal((2, 2)),
             "i64": rng.integers(-1000, 1000, size=(3,), dtype=np.int64),
             "empty": np.zeros((0, 4), dtype=np.float32),
             "scalar": np.array(3.5, dtype=np.float32)}
    path = os.path.join(str(workdir), "dense.safetensors")
    save(path, {"a": f32, "b": f16, "c": bf16, **extra}, renames={"c": "BF16"},
         metadata={"format": "pt", "note": "é \" \\"})
    assert np.array_equal(load_dequant(tool, path, "a", workdir), f32)
    assert np.array_equal(load_dequant(tool, path, "b", workdir), f16.astype(np.float32))
    assert np.array_equal(load_dequant(tool, path, "c", workdir),
                          (bf16.astype(np.uint32) << 16).view(np.float32))
    # (a) a file written by mixq's writer reads back with safetensors, data and metadata equal
    # (without the bf16 tensor, which safetensors.numpy cannot return).
    path = os.path.join(str(workdir), "plain.safetensors")
    save(path, {"a": f32, "b": f16, **extra}, metadata={"format": "pt", "note": "é \" \\"})
    out = os.path.join(str(workdir), "copy.safetensors")
    run_tool(tool, "copy", path, out)
    orig = st_numpy.load_file(path)
    back = st_numpy.load_file(out)
    assert set(back) == set(orig)
    for k in orig:
        assert back[k].dtype == orig[k].dtype and back[k].shape == orig[k].shape, k
        assert np.array_equal(back[k], orig[k]), k
    from safetensors import safe_open
    with safe_open(out, framework="numpy") as f:
        assert f.metadata() == {"format": "pt", "note": "é \" \\"}


def test_mixq_rejects_bad_files(tool, workdir):
    path = os.path.join(str(workdir), "bad.safetensors")
    save(path, {"a": np.ones((2, 2), np.float32)})
    raw = bytearray(open(path, "rb").read())
    open(path, "wb").write(raw[:-1])  # truncated buffer
    r = subprocess.run([tool, "dequant", path, "a", os.path.join(str(workdir), "x.npy")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "bad.safetensors" in r.stderr and "format error" in r.stderr

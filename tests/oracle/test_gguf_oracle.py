# GGUF oracle tests: gguf-py (the `gguf` package) writes fixtures and decodes them; mixq must
# reproduce gguf.quants.dequantize bit for bit, and files mixq writes must read back in
# gguf.GGUFReader with the bytes gguf.quants.quantize produces.
#
# The dequantizer under test is the real CLI, `mixq dequantize FILE TENSOR -o OUT.npy`; set
# MIXQ_GGUF_USE_DUMP=1 to run `<tools-dir>/gguf_dump dequantize ...` (tests/tools/gguf_dump.cpp)
# instead. `mixq matmul` is checked on every ggml type against float64 with gguf-py's
# dequantization, `mixq inspect` against the file's own tensor infos, and `mixq quantize
# --format gguf` output is read back by gguf.GGUFReader.
import os
import subprocess

import numpy as np
import pytest

from cli_util import check_matmul, cli_dequantize, expect_clean_failure, inspect, run_cli

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402

# fp16 fields of each block type (byte offsets inside the block): filled with finite values when
# generating random blocks, because mixq rejects non-finite scales (see docs/formats-notes.md).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}


def tool(request_tools_dir, name):
    if not request_tools_dir:
        pytest.skip("--mixq-tools-dir not given")
    path = os.path.join(request_tools_dir, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} not built")
    return path


def mixq_dequantize(mixq_cli, tools_dir, path, tensor, out):
    if os.environ.get("MIXQ_GGUF_USE_DUMP") == "1":
        cmd = [tool(tools_dir, "gguf_dump"), "dequantize", path, tensor, "-o", out]
    else:
        cmd = [mixq_cli, "dequantize", path, tensor, "-o", out]
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"
    return np.load(out)


def random_blocks(qtype, n_rows, k, rng):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nb = n_rows * (k // block)
    data = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        mag = rng.uniform(1.0, 2.0, nb) * np.exp2(rng.integers(-24, 12, nb).astype(np.float64))
        val = (mag * rng.choice([-1.0, 1.0], nb)).astype(np.float16)
        val[rng.random(nb) < 0.05] = 0
        data[:, off:off + 2] = val.view(np.uint8).reshape(nb, 2)
    return data.reshape(n_rows, (k // block) * size)


def write_fixture(path, tensors, alignment=None):
    w = gguf.GGUFWriter(path, arch="llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_quantization_version(2)
    w.add_string("test.note", "mixq oracle fixture \u00e9")
    w.add_array("test.ints", [1, -2, 3])
    for name, arr, qtype in tensors:
        if qtype in (T.F32, T.F16):
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bits_equal(a, b):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


ENCODABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16]
RAW_ONLY = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS]


@pytest.mark.parametrize("qtype", ENCODABLE, ids=lambda t: t.name)
def test_dequantize_matches_gguf_py_quantized_by_gguf_py(qtype, mixq_cli, workdir, mixq_tools_dir):
    rng = np.random.default_rng(int(qtype))
    n, k = 7, 96
    x = (rng.standard_normal((n, k)) * rng.uniform(0.01, 3, (n, 1))).astype(np.float32)
    x[1, :32] = np.arange(32, dtype=np.float32) * 0.25 - 4  # exact-tie patterns
    q = gguf.quants.quantize(x, qtype)
    path = os.path.join(workdir, f"enc_{qtype.name}.gguf")
    write_fixture(path, [("blk.0.w", q, qtype)])
    got = mixq_dequantize(mixq_cli, mixq_tools_dir, path, "blk.0.w", path + ".npy")
    ref = gguf.quants.dequantize(q, qtype)
    assert bits_equal(got, ref)


@pytest.mark.parametrize("qtype", RAW_ONLY + [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0],
                         ids=lambda t: t.name)
def test_dequantize_random_blocks_bit_exact(qtype, mixq_cli, workdir, mixq_tools_dir):
    rng = np.random.default_rng(100 + int(qtype))
    n, k = 5, 512
    q = random_blocks(qtype, n, k, rng)
    path = os.path.join(workdir, f"raw_{qtype.name}.gguf")
    write_fixture(path, [("w", q, qtype)], alignment=64)
    got = mixq_dequantize(mixq_cli, mixq_tools_dir, path, "w", path + ".npy")
    ref = gguf.quants.dequantize(q, qtype)
    assert got.shape == (n, k)
    assert bits_equal(got, ref)


def test_dense_and_multi_tensor_file(mixq_cli, workdir, mixq_tools_dir):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 40)).astype(np.float32)
    b = rng.standard_normal((9, 16)).astype(np.float16)
    c = random_blocks(T.Q6_K, 2, 256, rng)
    path = os.path.join(workdir, "multi.gguf")
    write_fixture(path, [("a", a, T.F32), ("b", b, T.F16), ("c", c, T.Q6_K)], alignment=128)
    assert bits_equal(mixq_dequantize(mixq_cli, mixq_tools_dir, path, "a", path + ".a.npy"), a)
    assert bits_equal(mixq_dequantize(mixq_cli, mixq_tools_dir, path, "b", path + ".b.npy"),
                      b.astype(np.float32))
    assert bits_equal(mixq_dequantize(mixq_cli, mixq_tools_dir, path, "c", path + ".c.npy"),
                      gguf.quants.dequantize(c, T.Q6_K))


def mixq_encode(tools_dir, workdir, qtype_name, x):
    raw = os.path.join(workdir, f"in_{qtype_name}.f32")
    out = os.path.join(workdir, f"mixq_{qtype_name}.gguf")
    np.ascontiguousarray(x, dtype=np.float32).tofile(raw)
    cmd = [tool(tools_dir, "gguf_dump"), "encode", out, qtype_name, str(x.shape[0]),
           str(x.shape[1]), raw]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def read_back(path):
    rd = gguf.GGUFReader(path)
    assert rd.fields["general.architecture"].contents() == "llama"
    (t,) = [t for t in rd.tensors if t.name == "w"]
    return t


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0, T.F16, T.F32, T.BF16], ids=lambda t: t.name)
def test_mixq_encoder_bytes_equal_gguf_py(qtype, workdir, mixq_tools_dir):
    rng = np.random.default_rng(10 + int(qtype))
    n, k = 33, 256
    x = (rng.standard_normal((n, k)) * rng.uniform(1e-3, 10, (n, 1))).astype(np.float32)
    # rows with ties / structure: multiples of a power of two, a constant row, a one-hot row
    x[0] = (np.arange(k) % 32 - 16) * 0.25
    x[1] = 0.5
    x[2] = 0
    x[2, 7] = -3
    x[3] = np.round(x[3] * 8) / 8
    path = mixq_encode(mixq_tools_dir, workdir, qtype.name, x)
    t = read_back(path)
    assert t.tensor_type == qtype
    assert [int(d) for d in t.shape] == [k, n]
    expect = gguf.quants.quantize(x, qtype)
    assert np.array_equal(np.asarray(t.data).view(np.uint8).reshape(-1), expect.view(np.uint8).reshape(-1))


def test_mixq_q4_k_encoder_round_trips_through_gguf_py(mixq_cli, workdir, mixq_tools_dir):
    rng = np.random.default_rng(77)
    n, k = 6, 512
    x = (rng.standard_normal((n, k)) * 0.02 + rng.uniform(-0.01, 0.01, (n, 1))).astype(np.float32)
    x[0, :256] = np.abs(x[0, :256])  # a block without negative values (min clamps to 0)
    path = mixq_encode(mixq_tools_dir, workdir, "Q4_K", x)
    t = read_back(path)
    assert t.tensor_type == T.Q4_K
    data = np.asarray(t.data).reshape(n, -1)
    ref = gguf.quants.dequantize(data, T.Q4_K)
    got = mixq_dequantize(mixq_cli, mixq_tools_dir, path, "w", path + ".npy")
    assert bits_equal(got, ref)
    rel = np.linalg.norm(ref - x) / np.linalg.norm(x)
    assert rel < 0.12, rel


# ----------------------------------------------------------------------------- matmul, inspect

ALL_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K,
             T.IQ4_NL, T.IQ4_XS, T.F16, T.BF16, T.F32]


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_matmul_and_inspect_every_ggml_type(qtype, mixq_cli, workdir):
    """mixq matmul (cpu, ref; f32 X) vs X.astype(float64) @ W.T with W from gguf.quants."""
    rng = np.random.default_rng(300 + int(qtype))
    n, k = 13, 512
    if qtype in F16_FIELDS:
        q = random_blocks(qtype, n, k, rng)
    else:
        q = gguf.quants.quantize(rng.standard_normal((n, k)).astype(np.float32), qtype)
    path = os.path.join(workdir, f"mm_{qtype.name}.gguf")
    norm = rng.standard_normal(n).astype(np.float32)
    write_fixture(path, [("blk.0.ffn_down.weight", q, qtype), ("blk.0.norm", norm, T.F32)])
    w = gguf.quants.dequantize(q, qtype).astype(np.float64)
    assert w.shape == (n, k) and np.all(np.isfinite(w))
    rel = check_matmul(mixq_cli, workdir, path, "blk.0.ffn_down.weight", w)
    print(f"matmul {qtype.name}: worst relative error {rel:.2e}")

    fmt, tensors, meta = inspect(mixq_cli, path)
    assert fmt == "gguf v3"
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    e = tensors["blk.0.ffn_down.weight"]
    assert e["weight"] and e["type"] == qtype.name and e["shape"] == [n, k]
    assert e["bytes"] == n * k // block * size
    assert abs(e["bpw"] - 8.0 * size / block) < 1e-3
    assert tensors["blk.0.norm"] == dict(type="F32", shape=[n], bpw=32.0, bytes=4 * n, weight=False)
    assert meta["general.architecture"] == '"llama"' or "llama" in meta["general.architecture"]
    assert meta["general.quantization_version"] == "2"
    assert "mixq oracle fixture" in meta["test.note"]


# ----------------------------------------------------------------------------- mixq quantize --format gguf

def st_fixture(path, rng, k=512):
    """A safetensors file (written by the safetensors package) with F32, F16 and BF16 matrices,
    a 1-D norm and an integer tensor. Returns the matrices as float32 and the norm."""
    st_numpy = pytest.importorskip("safetensors.numpy")
    from st_packers import save
    a = (rng.standard_normal((7, k)) * rng.uniform(0.01, 2, (7, 1))).astype(np.float32)
    a[0, :32] = np.arange(32, dtype=np.float32) * 0.25 - 4  # exact ties
    b = (rng.standard_normal((5, k)) * 0.1).astype(np.float16)
    c = (rng.standard_normal((3, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    norm = rng.standard_normal(7).astype(np.float32)
    ids = np.arange(6, dtype=np.int32).reshape(2, 3)
    save(path, {"m.a": a, "m.b": b, "m.c": c, "m.norm": norm, "m.ids": ids},
         renames={"m.c": "BF16"}, metadata={"format": "pt"})
    assert st_numpy is not None
    return {"m.a": a, "m.b": b.astype(np.float32),
            "m.c": (c.astype(np.uint32) << 16).view(np.float32)}, norm


@pytest.mark.parametrize("scheme,qtype", [("q4_0", T.Q4_0), ("q8_0", T.Q8_0), ("q4_k", T.Q4_K),
                                          ("f16", T.F16), ("bf16", T.BF16), ("F32", T.F32)])
def test_quantize_to_gguf_reads_back_in_gguf_py(scheme, qtype, mixq_cli, workdir):
    rng = np.random.default_rng(int(qtype) + 900)
    src = os.path.join(workdir, "src.safetensors")
    mats, norm = st_fixture(src, rng)
    out = os.path.join(workdir, f"out_{scheme}.gguf")
    r = run_cli(mixq_cli, "quantize", src, "-o", out, "--format", "gguf", "--scheme", scheme,
                "--skip", "m\\.c")
    assert "m.ids" in r.stderr  # integer tensors are left out and listed
    rd = gguf.GGUFReader(out)
    by_name = {t.name: t for t in rd.tensors}
    assert set(by_name) == {"m.a", "m.b", "m.c", "m.norm"}
    assert rd.fields["mixq.scheme"].contents() == qtype.name
    for name in ("m.a", "m.b"):
        t = by_name[name]
        x = mats[name]
        assert t.tensor_type == qtype and [int(d) for d in t.shape] == [x.shape[1], x.shape[0]]
        data = np.asarray(t.data).view(np.uint8).reshape(x.shape[0], -1)
        if qtype == T.Q4_K:  # no encoder in gguf-py: decode and compare with mixq's decode
            ref = gguf.quants.dequantize(data, qtype)
            assert np.linalg.norm(ref - x) / np.linalg.norm(x) < 0.12
        else:
            assert np.array_equal(data.reshape(-1), gguf.quants.quantize(x, qtype).view(np.uint8).reshape(-1))
            ref = gguf.quants.dequantize(gguf.quants.quantize(x, qtype), qtype)
        got = cli_dequantize(mixq_cli, out, name, workdir)
        assert bits_equal(got, ref)
    # --skip'ed matrix and the 1-D norm: copied in their own type, bit for bit.
    assert by_name["m.c"].tensor_type == T.BF16
    assert bits_equal(cli_dequantize(mixq_cli, out, "m.c", workdir), mats["m.c"])
    assert by_name["m.norm"].tensor_type == T.F32
    assert np.array_equal(np.asarray(by_name["m.norm"].data), norm)
    fmt, tensors, _ = inspect(mixq_cli, out)
    assert fmt == "gguf v3" and tensors["m.a"]["type"] == qtype.name and tensors["m.a"]["shape"] == [7, 512]
    assert tensors["m.c"]["type"] == "BF16" and tensors["m.norm"]["shape"] == [7]


def test_quantize_scheme_and_format_must_match(mixq_cli, workdir):
    rng = np.random.default_rng(1)
    src = os.path.join(workdir, "src.safetensors")
    st_fixture(src, rng, k=96)
    out = os.path.join(workdir, "o.gguf")
    if os.path.exists(out):  # --workdir persists between runs
        os.remove(out)
    expect_clean_failure(mixq_cli, "quantize", src, "-o", out, "--format", "gguf", "--scheme", "w4g128",
                         needles=["w4g128", "GGUF", "q4_0"])
    expect_clean_failure(mixq_cli, "quantize", src, "-o", out, "--scheme", "q4_0",
                         needles=["q4_0", "--format gguf"])
    expect_clean_failure(mixq_cli, "quantize", src, "-o", out, "--format", "ggml", "--scheme", "q4_0",
                         needles=["--format", "ggml"])
    # K = 96 is not a multiple of Q4_K's 256: named tensor, exit 1, no file left half-written.
    err = expect_clean_failure(mixq_cli, "quantize", src, "-o", out, "--format", "gguf", "--scheme", "q4_k",
                               needles=["m.a", "96", "256"])
    assert "src.safetensors" in err
    assert not os.path.exists(out)
    r = run_cli(mixq_cli, "quantize", src, "-o", out, "--format", "gguf", "--scheme", "q8_0")
    assert r.returncode == 0 and gguf.GGUFReader(out).tensors[0].tensor_type == T.Q8_0

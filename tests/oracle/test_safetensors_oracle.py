"""Oracle tests for mixq's safetensors reader/writer and its GPTQ / AWQ / FP8-block / dense
conversions, against the `safetensors` package (files written and read by it) and numpy.

Packing and dequantization are written independently from formats.md §3-§6 in numpy
(st_packers.py). mixq is driven both through tests/tools/st_tool.cpp (built into the
--mixq-tools-dir directory) and through the real CLI: `mixq dequantize` must give the same bits,
`mixq inspect` must list the weight with its logical shape and the config's settings, and
`mixq matmul` (cpu and ref backends, f32 activations) must be within 1e-5 of the float64 product
with the numpy-dequantized weight.
numpy has no bf16 / float8 dtypes: such tensors are saved by safetensors as U16 / U8 and the
header's dtype is then renamed (same byte size, offsets unchanged).
"""
import json
import os
import subprocess

import numpy as np
import pytest

from cli_util import check_matmul, cli_dequantize, inspect
from st_packers import awq_pack, e4m3_decode, f16_values, gptq_tensors, save, st_numpy


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


def load_dequant(tool, path, tensor, workdir):
    out = os.path.join(str(workdir), "deq.npy")
    run_tool(tool, "dequant", path, tensor, out)
    return np.load(out)


def check_cli(mixq, workdir, path, tensor, ref, type_has, meta=None, fmt=None, nbytes=None):
    """The real CLI on one weight: dequantize bit-equal to `ref`; inspect lists it as a weight
    with shape [N, K], a type containing `type_has`, bytes (= `nbytes` when given) and bits per
    weight consistent, and the metadata pairs `meta`; matmul within 1e-5 of float64."""
    N, K = ref.shape
    got = cli_dequantize(mixq, path, tensor, workdir)
    assert got.dtype == np.float32 and got.shape == (N, K)
    assert np.array_equal(got.view(np.uint32), np.ascontiguousarray(ref, np.float32).view(np.uint32))
    file_fmt, tensors, metadata = inspect(mixq, path)
    if fmt:
        assert file_fmt == fmt
    e = tensors[tensor]
    assert e["weight"] and e["shape"] == [N, K] and type_has in e["type"], e
    if nbytes is not None:
        assert e["bytes"] == nbytes, e
    assert abs(e["bpw"] - e["bytes"] * 8 / (N * K)) < 1e-3, e
    for k, v in (meta or {}).items():
        assert metadata.get(k) == v, (k, metadata)
    check_matmul(mixq, workdir, path, tensor, ref.astype(np.float64))
    return tensors, metadata


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("v1", [True, False])
@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_dequant_matches_numpy(tool, mixq_cli, workdir, bits, v1, act_order):
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
    nbytes = sum(tensors[f"layer.{p}"].nbytes for p in ("qweight", "qzeros", "scales", "g_idx"))
    order = " g_idx" if act_order else ""
    tensors_listed, _ = check_cli(
        mixq_cli, workdir, path, "layer", ref, f"gptq-{'v1' if v1 else 'v2'} {bits}bit", fmt="safetensors (gptq)",
        nbytes=nbytes, meta={"quantization.bits": str(bits), "quantization.group_size": str(g),
                             "quantization.desc_act": "true" if act_order else "false",
                             "quantization.config_file": os.path.join(str(workdir), "quantize_config.json"),
                             "format": "pt"})
    assert tensors_listed["layer.bias"]["shape"] == [N] and not tensors_listed["layer.bias"]["weight"]
    assert order in tensors_listed["layer"]["type"]
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
def test_awq_dequant_matches_numpy(tool, mixq_cli, workdir, K, N, g):
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
    check_cli(mixq_cli, workdir, path, "m", ref, "awq-gemm 4bit", fmt="safetensors (awq)",
              nbytes=awq_pack(q).nbytes + awq_pack(z).nbytes + s.nbytes,
              meta={"quantization.quant_method": "awq", "quantization.group_size": str(g),
                    "quantization.version": "gemm"})


@pytest.mark.parametrize("N,K", [(300, 200), (128, 384), (7, 130), (129, 257)])
def test_fp8_block_dequant_matches_numpy(tool, mixq_cli, workdir, N, K):
    rng = np.random.default_rng(N * K)
    w = rng.integers(0, 256, size=(N, K), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] = 0x38  # no NaN codes
    sinv = rng.uniform(1e-4, 1e-2, size=((N + 127) // 128, (K + 127) // 128)).astype(np.float32)
    path = os.path.join(str(workdir), "model.safetensors")
    save(path, {"x.weight": w, "x.weight_scale_inv": sinv}, renames={"x.weight": "F8_E4M3"})
    ref = e4m3_decode(w) * np.repeat(np.repeat(sinv, 128, 0), 128, 1)[:N, :K]
    assert np.array_equal(load_dequant(tool, path, "x.weight", workdir), ref)
    check_cli(mixq_cli, workdir, path, "x.weight", ref, "fp8 128x", fmt="safetensors (fp8)",
              nbytes=w.nbytes + sinv.nbytes)


def test_dense_and_writer_roundtrip(tool, mixq_cli, workdir):
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
    for name, ref, dt in (("a", f32, "F32"), ("b", f16.astype(np.float32), "F16"),
                          ("c", (bf16.astype(np.uint32) << 16).view(np.float32), "BF16")):
        listed, meta = check_cli(mixq_cli, workdir, path, name, ref, dt, fmt="safetensors (dense)",
                                 nbytes=ref.size * (4 if dt == "F32" else 2),
                                 meta={"format": "pt", "note": 'é " \\'})
    assert listed["i8"]["shape"] == [11] and not listed["i8"]["weight"]
    assert listed["scalar"]["shape"] == [] and listed["empty"]["shape"] == [0, 4]
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

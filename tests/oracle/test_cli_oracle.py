"""The mixq CLI end to end on files written by other code (the `safetensors` and `gguf`
packages): `mixq quantize` into mixq's own layout for every kind of scheme, checked with an
independent numpy decoder of that layout; `mixq inspect` on it; `mixq matmul` within 1e-5 of
float64; and bad input of every format, which must fail with one line on stderr naming the file,
the tensor and the problem.
"""
import json
import os

import numpy as np
import pytest

from cli_util import check_matmul, cli_dequantize, expect_clean_failure, inspect, run_cli
from st_packers import (awq_pack, decode_mixq_layout, f16_values, gptq_tensors, read_raw, save,
                        st_numpy)

SCHEMES = ["w4g128", "w4g32asym", "w4g128zp", "w8g128", "w8g64asym", "w4pc", "w8pc", "fp8b128",
           "w4g64-bf16", "w8g32zp-f32"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_quantize_mixq_layout_decodes_inspects_and_multiplies(scheme, mixq_cli, workdir):
    rng = np.random.default_rng(len(scheme) * 31 + sum(map(ord, scheme)))
    w = (rng.standard_normal((37, 200)) * rng.uniform(0.01, 1, (37, 1))).astype(np.float32)
    w[3, 5:70] += 0.5  # blocks with a one-sided range (offset / zero-point forms)
    h = (rng.standard_normal((24, 96)) * 0.1).astype(np.float16)
    src = os.path.join(str(workdir), "src.safetensors")
    save(src, {"layer.w": w, "layer.h": h, "layer.bias": rng.standard_normal(37).astype(np.float32)},
         metadata={"format": "pt"})
    out = os.path.join(str(workdir), "q.safetensors")
    r = run_cli(mixq_cli, "quantize", src, "-o", out, "--scheme", scheme)
    assert "layer.bias" in r.stderr
    fmt, tensors, meta = inspect(mixq_cli, out)
    assert fmt == "safetensors (mixq)" and set(tensors) == {"layer.w", "layer.h"}
    assert meta["mixq.scheme"] == scheme and meta["mixq.format"] == "1"
    raw, _ = read_raw(out)
    for name, x in (("layer.w", w), ("layer.h", h.astype(np.float32))):
        ref = decode_mixq_layout(out, name)
        N, K = x.shape
        assert ref.shape == (N, K)
        # Quantization happened and is close (the quantizer's half-step bound, loosely).
        err = np.abs(ref - x).max() / np.abs(x).max()
        assert 0 < err < (0.08 if scheme.startswith(("w4", "fp8")) else 0.01), err
        got = cli_dequantize(mixq_cli, out, name, workdir)
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
        e = tensors[name]
        parts = sum(a.nbytes for p, (_, a) in raw.items() if p.startswith(name + "."))
        assert e["weight"] and e["shape"] == [N, K] and e["bytes"] == parts
        assert e["type"].startswith("mixq ") and abs(e["bpw"] - parts * 8 / (N * K)) < 1e-3
        assert f"N={N};K={K}" in meta["mixq.weight." + name]
        check_matmul(mixq_cli, workdir, out, name, ref.astype(np.float64), seed=N)


# ----------------------------------------------------------------------------- bad input

def gguf_file(path, rng):
    gguf = pytest.importorskip("gguf")
    wr = gguf.GGUFWriter(path, arch="llama")
    wr.add_tensor("blk.0.w", gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32),
                                                  gguf.GGMLQuantizationType.Q8_0),
                  raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    wr.add_tensor("blk.0.norm", rng.standard_normal(4).astype(np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def all_commands(mixq, path, tensor, workdir, needles):
    """inspect (when the file itself is bad), dequantize and matmul must all fail cleanly."""
    x = os.path.join(str(workdir), "x.npy")
    np.save(x, np.ones((2, 64), np.float32))
    y = os.path.join(str(workdir), "y.npy")
    if os.path.exists(y):
        os.remove(y)
    base = os.path.basename(path)
    expect_clean_failure(mixq, "dequantize", path, tensor, "-o", y, needles=[base, *needles])
    expect_clean_failure(mixq, "matmul", "--weights", f"{path}:{tensor}", "--input", x, "-o", y,
                         "--backend", "cpu", needles=[base, *needles])
    assert not os.path.exists(y)


def test_bad_gguf_files(mixq_cli, workdir):
    rng = np.random.default_rng(3)
    good = os.path.join(str(workdir), "good.gguf")
    gguf_file(good, rng)
    data = open(good, "rb").read()
    trunc = os.path.join(str(workdir), "trunc.gguf")
    open(trunc, "wb").write(data[:len(data) - 40])
    garbage = os.path.join(str(workdir), "garbage.gguf")
    open(garbage, "wb").write(b"GGUF" + rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
    for bad in (trunc, garbage):
        expect_clean_failure(mixq_cli, "inspect", bad, needles=[os.path.basename(bad)])
        all_commands(mixq_cli, bad, "blk.0.w", workdir, [])
    all_commands(mixq_cli, good, "blk.0.nope", workdir, ["blk.0.nope"])


def test_bad_safetensors_files(mixq_cli, workdir):
    rng = np.random.default_rng(4)
    good = os.path.join(str(workdir), "good.safetensors")
    save(good, {"w": rng.standard_normal((4, 64)).astype(np.float32)})
    data = open(good, "rb").read()
    cases = {"trunc.safetensors": data[:-5],
             "garbage.safetensors": rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(),
             "hugeheader.safetensors": (10 ** 12).to_bytes(8, "little") + data[8:],
             "badjson.safetensors": data[:8] + b"[" + data[9:]}
    for name, content in cases.items():
        bad = os.path.join(str(workdir), name)
        open(bad, "wb").write(content)
        expect_clean_failure(mixq_cli, "inspect", bad, needles=[name])
        all_commands(mixq_cli, bad, "w", workdir, [])
    all_commands(mixq_cli, good, "missing.weight", workdir, ["missing.weight"])


def write_config(workdir, cfg, name="quantize_config.json"):
    with open(os.path.join(str(workdir), name), "w") as f:
        json.dump(cfg, f)


def test_inconsistent_gptq_awq_fp8_mixq(mixq_cli, workdir):
    rng = np.random.default_rng(5)
    K, N, g = 128, 64, 32
    tensors, _ = gptq_tensors(rng, 4, K, N, g, act_order=False, v1=True)
    write_config(workdir, {"bits": 4, "group_size": g, "desc_act": False, "sym": False})
    p = os.path.join(str(workdir), "gptq.safetensors")
    bad = dict(tensors)
    bad["layer.scales"] = tensors["layer.scales"][:, :N - 8].copy()  # N disagrees with qweight
    save(p, bad)
    all_commands(mixq_cli, p, "layer", workdir, ['"layer"', "scales [4, 56]"])
    bad = dict(tensors)
    bad["layer.qzeros"] = tensors["layer.qzeros"][:2].copy()  # too few groups
    save(p, bad)
    all_commands(mixq_cli, p, "layer", workdir, ['"layer"', "qzeros [2, 8]"])
    bad = dict(tensors)
    # (a shorter g_idx is a valid odd K, qweight rows = ceil(K*b/32); a longer one needs more rows)
    bad["layer.g_idx"] = np.concatenate([tensors["layer.g_idx"], np.full(9, 3, np.int32)])
    save(p, bad)
    all_commands(mixq_cli, p, "layer", workdir, ["g_idx"])  # K=137 / g_idx[7] = 99
    bad = dict(tensors)
    bad["layer.g_idx"] = tensors["layer.g_idx"].copy()
    bad["layer.g_idx"][7] = 99  # group out of range
    save(p, bad)
    all_commands(mixq_cli, p, "layer", workdir, ["g_idx"])  # K=137 / g_idx[7] = 99
    os.remove(os.path.join(str(workdir), "quantize_config.json"))

    # AWQ: scales' N does not match 8 * qweight columns.
    q = rng.integers(0, 16, size=(K, N), dtype=np.uint32)
    z = rng.integers(0, 16, size=(K // g, N), dtype=np.uint32)
    write_config(workdir, {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": g,
                                                   "zero_point": True, "version": "gemm"}}, "config.json")
    p = os.path.join(str(workdir), "awq.safetensors")
    save(p, {"m.qweight": awq_pack(q), "m.qzeros": awq_pack(z), "m.scales": f16_values(rng, (K // g, N + 16))})
    all_commands(mixq_cli, p, "m", workdir, ['"m"', "scales [4, 80]"])
    os.remove(os.path.join(str(workdir), "config.json"))

    # FP8 block: scale_inv grid does not cover the weight.
    p = os.path.join(str(workdir), "fp8.safetensors")
    save(p, {"x.weight": rng.integers(0, 0x70, size=(130, 200), dtype=np.uint8),
             "x.weight_scale_inv": np.ones((1, 2), np.float32)}, renames={"x.weight": "F8_E4M3"})
    all_commands(mixq_cli, p, "x.weight", workdir, ['"x.weight"', "weight_scale_inv [1, 2]"])

    # mixq layout: a codes tensor with a row missing.
    src = os.path.join(str(workdir), "src.safetensors")
    save(src, {"a.w": rng.standard_normal((8, 64)).astype(np.float32)})
    good = os.path.join(str(workdir), "q.safetensors")
    run_cli(mixq_cli, "quantize", src, "-o", good, "--scheme", "w4g32")
    parts, meta = read_raw(good)
    arrays = {k: a for k, (_, a) in parts.items()}
    arrays["a.w.codes"] = arrays["a.w.codes"][:7].copy()
    p = os.path.join(str(workdir), "mixq_bad.safetensors")
    st_numpy.save_file(arrays, p, metadata=meta)
    all_commands(mixq_cli, p, "a.w", workdir, ['"a.w.codes" is U8 [7, 32]'])

"""mixq.load / mixq.inspect / mixq.save on every checkpoint format, against the oracle tests'
independent numpy packers (tests/oracle/st_packers.py) and gguf-py."""
import json
import os

import numpy as np
import pytest

import mixq
from conftest import reference_linear, rel_err

st = pytest.importorskip("st_packers", reason="needs safetensors (tests/oracle/st_packers.py)")


def check_weight(path, name, ref, fmt, type_has):
    qw = mixq.load(path, name)
    assert (qw.N, qw.K) == ref.shape
    assert np.array_equal(mixq.dequantize(qw), ref)
    info = mixq.inspect(path)
    assert info["format"] == fmt
    entry = {t["name"]: t for t in info["tensors"]}[name]
    assert entry["is_weight"] and tuple(entry["shape"]) == ref.shape and type_has in entry["type"]
    # And the product through the Python API, exact f32 kernel.
    x = np.random.default_rng(0).standard_normal((5, ref.shape[1])).astype(np.float32)
    y = mixq.linear(x, mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32"))
    assert rel_err(y, x.astype(np.float64) @ ref.astype(np.float64).T) <= 1e-5
    return qw, info


@pytest.mark.parametrize("bits,act_order", [(4, False), (4, True), (8, False), (3, True)])
def test_gptq(tmp_path, bits, act_order):
    rng = np.random.default_rng(bits + act_order)
    K, N, g = 256, 96, 64
    tensors, ref = st.gptq_tensors(rng, bits, K, N, g, act_order, v1=True, prefix="model.q")
    path = tmp_path / "model.safetensors"
    st.save(path, tensors, metadata={"format": "pt"})
    (tmp_path / "quantize_config.json").write_text(json.dumps(
        {"bits": bits, "group_size": g, "desc_act": act_order, "sym": False}))
    qw, info = check_weight(path, "model.q", ref, "safetensors (gptq)", f"{bits}bit")
    assert qw.has_k_perm == act_order
    assert info["metadata"]["quantization.bits"] == str(bits)


def test_awq(tmp_path):
    rng = np.random.default_rng(7)
    K, N, g = 256, 64, 128
    G = K // g
    q = rng.integers(0, 16, size=(K, N), dtype=np.uint32)
    z = rng.integers(0, 16, size=(G, N), dtype=np.uint32)
    s = st.f16_values(rng, (G, N))
    path = tmp_path / "model.safetensors"
    st.save(path, {"m.qweight": st.awq_pack(q), "m.qzeros": st.awq_pack(z), "m.scales": s})
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": g, "zero_point": True,
        "version": "gemm"}}))
    gi = np.arange(K) // g
    ref = ((q.astype(np.float32) - z[gi].astype(np.float32)) * s[gi].astype(np.float32)).T
    check_weight(path, "m", ref, "safetensors (awq)", "awq-gemm 4bit")


def test_fp8_block(tmp_path):
    rng = np.random.default_rng(3)
    N, K = 129, 257
    w = rng.integers(0, 256, size=(N, K), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] = 0x38  # no NaN codes
    sinv = rng.uniform(1e-4, 1e-2, size=(2, 3)).astype(np.float32)
    path = tmp_path / "model.safetensors"
    st.save(path, {"x.weight": w, "x.weight_scale_inv": sinv}, renames={"x.weight": "F8_E4M3"})
    ref = st.e4m3_decode(w) * np.repeat(np.repeat(sinv, 128, 0), 128, 1)[:N, :K]
    check_weight(path, "x.weight", ref, "safetensors (fp8)", "fp8 128x")


@pytest.mark.parametrize("scheme", ["w4g128", "w8g64asym", "w4g32zp", "fp8b128"])
def test_mixq_layout_round_trip(tmp_path, scheme):
    rng = np.random.default_rng(11)
    w = rng.standard_normal((80, 256)).astype(np.float32)
    qw = mixq.quantize(w, scheme)
    path = tmp_path / "w.safetensors"
    mixq.save(path, {"layer.weight": qw}, metadata={"note": "python"})
    ref = st.decode_mixq_layout(str(path), "layer.weight")
    assert np.array_equal(ref, mixq.dequantize(qw))
    _, info = check_weight(path, "layer.weight", ref, "safetensors (mixq)", "")
    assert info["metadata"]["note"] == "python"


def test_dense_safetensors(tmp_path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((48, 64)).astype(np.float16)
    path = tmp_path / "dense.safetensors"
    st.save(path, {"d.weight": w})
    check_weight(path, "d.weight", w.astype(np.float32), mixq.inspect(path)["format"], "")


@pytest.mark.parametrize("qtype", ["Q4_0", "Q8_0", "Q5_1", "F16"])
def test_gguf_quantized_by_gguf_py(tmp_path, qtype):
    gguf = pytest.importorskip("gguf", reason="needs gguf-py")
    T = gguf.GGMLQuantizationType
    t = getattr(T, qtype)
    rng = np.random.default_rng(2)
    w = rng.standard_normal((64, 512)).astype(np.float32)
    path = str(tmp_path / "m.gguf")
    writer = gguf.GGUFWriter(path, arch="llama")
    if t == T.F16:
        writer.add_tensor("blk.0.ffn_up.weight", w.astype(np.float16))
        ref = w.astype(np.float16).astype(np.float32)
    else:
        q = gguf.quants.quantize(w, t)
        writer.add_tensor("blk.0.ffn_up.weight", q, raw_dtype=t)
        ref = gguf.quants.dequantize(q, t).astype(np.float32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    qw = mixq.load(path, "blk.0.ffn_up.weight")
    assert np.array_equal(mixq.dequantize(qw), ref)
    info = mixq.inspect(path)
    assert info["format"].startswith("gguf")
    assert "general.architecture" in info["metadata"]


def test_reference_linear_on_loaded(tmp_path):
    """The product of a loaded weight with bias and clamp, through prepare/linear."""
    rng = np.random.default_rng(9)
    qw = mixq.quantize(rng.standard_normal((64, 128)).astype(np.float32), "w4g128zp")
    path = tmp_path / "w.safetensors"
    mixq.save(path, [("a.weight", qw)])
    back = mixq.load(os.fspath(path), "a.weight")
    x = rng.standard_normal((7, 128)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    y = mixq.linear(x, mixq.prepare(back, backend="ref"), bias=b, clamp="relu")
    assert rel_err(y, reference_linear(x, qw, b, 0.0)) <= 1e-5

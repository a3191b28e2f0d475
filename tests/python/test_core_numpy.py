"""The framework-agnostic API on numpy arrays: every scheme against a float64 reference of the
weight mixq.dequantize returns, epilogues, in-place outputs, queries, conv2d."""
import math

import numpy as np
import pytest

import mixq
from conftest import reference_linear, rel_err

SCHEMES = ["w4g128", "w4g32asym", "w4g128zp", "w8g128", "w8g64asym", "w8pc", "w4pc", "fp8b128"]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("M", [1, 5, 33])
def test_linear_f32_matches_float64_reference(rng, scheme, M):
    N, K = 192, 384
    w = rng.standard_normal((N, K)).astype(np.float32)
    qw = mixq.quantize(w, scheme)
    assert (qw.N, qw.K) == (N, K)
    # The CPU default for M <= 8 quantizes activations to int8 (README); cpu_f32 is exact.
    pw = mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32")
    x = rng.standard_normal((M, K)).astype(np.float32)
    y = mixq.linear(x, pw)
    assert y.dtype == np.float32 and y.shape == (M, N)
    assert rel_err(y, reference_linear(x, qw)) <= 1e-5


@pytest.mark.parametrize("backend", ["ref", "cpu"])
def test_backends_and_default_kernels(rng, backend):
    N, K, M = 128, 256, 16
    qw = mixq.quantize(rng.standard_normal((N, K)).astype(np.float32), "w4g128")
    # exact f32 activations: the CPU default quantizes them to int8 where that is faster
    pw = mixq.prepare(qw, backend=backend, tuning="cpu_activations=exact")
    assert pw.backend == backend and pw.act == "weight-only" and (pw.N, pw.K) == (N, K)
    assert isinstance(mixq.kernel_name(pw, M), str) and mixq.kernel_name(pw, M)
    assert mixq.workspace_size(pw, M) >= 0
    x = rng.standard_normal((M, K)).astype(np.float32)
    assert rel_err(mixq.linear(x, pw), reference_linear(x, qw)) <= 1e-5


def test_quantized_weight_properties(rng):
    w = rng.standard_normal((64, 200)).astype(np.float32)
    qw = mixq.quantize(w, "w4g64asym")
    assert qw.code_type == "i4" and qw.block_k == 64 and qw.zero_kind == "offset"
    assert qw.codes.shape == (64, 100) and qw.codes.dtype == np.uint8
    assert abs(qw.bits_per_weight - qw.storage_bytes * 8 / (64 * 200)) < 1e-9
    deq = mixq.dequantize(qw)
    assert deq.shape == (64, 200) and deq.dtype == np.float32
    # Round to nearest: every element within half a step of the input.
    assert np.max(np.abs(deq - w)) < 0.5 * np.max(np.abs(w)) / 7
    rebuilt = mixq.QuantizedWeight.from_parts(
        qw.N, qw.K, qw.code_type, qw.block_k, qw.block_n, qw.scale_type, qw.zero_kind,
        qw.has_scales, qw.codes, qw.scales_bytes, qw.zeros_bytes, None)
    assert np.array_equal(mixq.dequantize(rebuilt), deq)


def test_bias_clamp_and_out_in_place(rng):
    N, K, M = 96, 256, 12
    qw = mixq.quantize(rng.standard_normal((N, K)).astype(np.float32), "w8g128")
    pw = mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32")
    x = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    out = np.full((M, N), np.nan, dtype=np.float32)
    got = mixq.linear(x, pw, out=out, bias=b, clamp="relu6")
    assert got is out
    assert rel_err(out, reference_linear(x, qw, b, 0.0, 6.0)) <= 1e-5
    mixq.linear(x, pw, out=out, clamp=(None, 0.5))
    assert out.max() <= 0.5
    assert rel_err(out, reference_linear(x, qw, None, -np.inf, 0.5)) <= 1e-5


def test_f16_activations_and_outputs(rng):
    N, K, M = 128, 256, 16
    qw = mixq.quantize(rng.standard_normal((N, K)).astype(np.float32), "w4g128")
    pw = mixq.prepare(qw, backend="cpu", tuning="cpu_activations=exact")
    x = rng.standard_normal((M, K)).astype(np.float16)
    y = mixq.linear(x, pw)
    assert y.dtype == np.float16
    assert rel_err(y, reference_linear(x, qw)) <= 2e-3
    y32 = mixq.linear(x, pw, out_dtype="float32")
    assert y32.dtype == np.float32


def test_leading_dims_and_strided_rows_are_views(rng):
    N, K = 64, 128
    qw = mixq.quantize(rng.standard_normal((N, K)).astype(np.float32), "w8g128")
    pw = mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32")
    x = rng.standard_normal((2, 3, K)).astype(np.float32)
    y = mixq.linear(x, pw)
    assert y.shape == (2, 3, N)
    assert rel_err(y, reference_linear(x, qw).reshape(2, 3, N)) <= 1e-5
    # Rows of a wider array: a row stride > K is taken as it is (no copy).
    wide = rng.standard_normal((9, 2 * K)).astype(np.float32)
    assert rel_err(mixq.linear(wide[:, :K], pw), reference_linear(wide[:, :K], qw)) <= 1e-5


def test_empty_batch(rng):
    qw = mixq.quantize(rng.standard_normal((32, 64)).astype(np.float32), "w8g64asym")
    pw = mixq.prepare(qw, backend="cpu")
    assert mixq.linear(np.zeros((0, 64), np.float32), pw).shape == (0, 32)


def test_w8a8_int8_and_fp8_activations(rng):
    N, K, M = 256, 512, 24
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    for scheme, act, tol in (("w8g128", "int8", 1e-2), ("fp8b128", "fp8", 4e-2)):
        qw = mixq.quantize(w, scheme)
        pw = mixq.prepare(qw, backend="cpu", act=act)
        assert pw.act == ("int8-block" if act == "int8" else "fp8-block")
        assert rel_err(mixq.linear(x, pw), reference_linear(x, qw)) <= tol


def conv_reference(x, w, bias, stride, pad):
    """float64 NCHW convolution, torch semantics (cross-correlation)."""
    B, Ci, H, W = x.shape
    Co, _, Kh, Kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    Ho = (H + 2 * pad - Kh) // stride + 1
    Wo = (W + 2 * pad - Kw) // stride + 1
    y = np.zeros((B, Co, Ho, Wo))
    for i in range(Kh):
        for j in range(Kw):
            patch = xp[:, :, i:i + stride * Ho:stride, j:j + stride * Wo:stride]
            y += np.einsum("bchw,oc->bohw", patch, w[:, :, i, j].astype(np.float64))
    return y + bias.astype(np.float64)[None, :, None, None]


def test_conv2d_nchw_matches_float64(rng):
    B, Ci, H, W, Co = 2, 16, 9, 7, 24
    w = rng.standard_normal((Co, Ci, 3, 3)).astype(np.float32)
    qw = mixq.quantize(w, "w8pc")
    pw = mixq.prepare(qw, backend="cpu", conv=(Ci, 3, 3))
    assert pw.is_conv and pw.conv_geometry == (Ci, 3, 3)
    x = rng.standard_normal((B, Ci, H, W)).astype(np.float32)
    b = rng.standard_normal(Co).astype(np.float32)
    y = mixq.conv2d(x, pw, bias=b, stride=2, padding=1)
    assert y.shape == (B, Co) + mixq.conv2d_output_size(H, W, (3, 3), 2, 1)
    wdq = mixq.dequantize(qw).reshape(Co, Ci, 3, 3)
    assert rel_err(y, conv_reference(x, wdq, b, 2, 1)) <= 1e-5


def test_conv2d_workspace_size_binding(rng):
    """The extension's conv2d_workspace_size (what mixq.conv2d and the torch op allocate) answers
    on a CPU weight (the CPU conv takes no workspace) and names a bad dtype or layout."""
    qw = mixq.quantize(rng.standard_normal((24, 16 * 9)).astype(np.float32), "w8pc")
    pw = mixq.prepare(qw, backend="cpu", conv=(16, 3, 3))
    for dtype in ("f32", "float32", "f16", "bfloat16", "int8"):
        for layout in ("nchw", "nhwc"):
            assert mixq._mixq.conv2d_workspace_size(pw, 2, 16, 9, 7, dtype, layout,
                                                    2, 2, 1, 1, 1, 1) == 0
    with pytest.raises(mixq.InvalidArgumentError, match="dtype: unknown dtype 'float128'"):
        mixq._mixq.conv2d_workspace_size(pw, 2, 16, 9, 7, "float128", "nchw", 1, 1, 1, 1, 1, 1)
    with pytest.raises(mixq.InvalidArgumentError, match="layout 'chw' is not one of nchw, nhwc"):
        mixq._mixq.conv2d_workspace_size(pw, 2, 16, 9, 7, "f32", "chw", 1, 1, 1, 1, 1, 1)
    with pytest.raises(mixq.InvalidArgumentError, match="smaller than the dilated kernel"):
        mixq._mixq.conv2d_workspace_size(pw, 1, 16, 1, 1, "f32", "nchw", 1, 1, 0, 0, 1, 1)
    with pytest.raises(mixq.InvalidArgumentError, match="linear weight"):
        mixq._mixq.conv2d_workspace_size(mixq.prepare(qw, backend="cpu"), 1, 16, 9, 9, "f32",
                                         "nchw", 1, 1, 1, 1, 1, 1)


def test_inputs_are_not_copied(rng):
    """out= is written in place, and a read-only input is accepted as it is."""
    qw = mixq.quantize(rng.standard_normal((16, 64)).astype(np.float32), "w8g64asym")
    pw = mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32")
    x = rng.standard_normal((3, 64)).astype(np.float32)
    x.setflags(write=False)
    out = np.zeros((3, 16), np.float32)
    mixq.linear(x, pw, out=out)
    assert rel_err(out, reference_linear(x, qw)) <= 1e-5


def test_scheme_name_and_info():
    assert mixq.scheme_name("w4g128") == "w4g128"
    assert mixq.cpu_isa() in ("avx512", "avx2vnni", "avx2", "scalar")
    assert isinstance(mixq.cuda_available(), bool)
    assert not math.isnan(float(mixq.cuda_device_count()))

"""Quantized activations from Python: mixq.quantize_activations gives the codes linear computes
inside the call (the same outputs), a layer's output written quantized (out=QuantizedActivations)
holds the quantizer's bytes for its float32 output, and a chain of two FP8 / INT8 layers through
it equals the unfused chain. CPU backend, numpy arrays (and CUDA through torch where there is a
GPU); bad arguments name themselves."""
import numpy as np
import pytest

import mixq
from conftest import needs_cuda


def _weight(rng, N, K, scheme, act):
    qw = mixq.quantize(rng.standard_normal((N, K)).astype(np.float32) * 0.1, scheme)
    return mixq.prepare(qw, backend="cpu", act=act)


def _same(a, b, equal=np.array_equal):
    """Codes up to the row pitch's valid columns and meta of the M rows: the same bytes (`equal`:
    the arrays' library's comparison)."""
    assert (a.kind, a.block, a.M, a.K) == (b.kind, b.block, b.M, b.K)
    assert equal(a.q[:, :a.K], b.q[:, :b.K])
    for x, y in ((a.scale, b.scale), (a.offset, b.offset), (a.sums, b.sums)):
        if x is not None:
            assert equal(x[:, :a.M], y[:, :b.M])


@pytest.mark.parametrize("scheme,act,block", [("fp8b128", "fp8-block", 128),
                                              ("w8g64asym", "int8-block", 64)])
def test_quantized_input_gives_linears_outputs(rng, scheme, act, block):
    M, N, K = 5, 96, 200
    pw = _weight(rng, N, K, scheme, act)
    x = rng.standard_normal((M, K)).astype(np.float32)
    xq = mixq.quantize_activations(x, act, block)
    assert isinstance(xq, mixq.QuantizedActivations) and (xq.M, xq.K) == (M, K)
    assert np.array_equal(mixq.linear(xq, pw), mixq.linear(x, pw))


@pytest.mark.parametrize("kind,block", [("fp8-block", 128), ("int8-block", 32),
                                        ("int8-block", 256)])
@pytest.mark.parametrize("scheme,act", [("w4g128", "none"), ("fp8b128", "fp8-block")])
def test_quantized_output_is_the_quantizers_bytes(rng, kind, block, scheme, act):
    M, N, K = 7, 300, 256
    pw = _weight(rng, N, K, scheme, act)
    x = rng.standard_normal((M, K)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    y = mixq.linear(x, pw, bias=bias, clamp=(-2.0, 1.5))
    want = mixq.quantize_activations(y, kind, block)
    got = mixq.QuantizedActivations.empty(kind, M, N, block)
    assert mixq.linear(x, pw, out=got, bias=bias, clamp=(-2.0, 1.5)) is got
    _same(got, want)


def test_chain_of_fp8_layers(rng):
    M, K, H, N = 6, 256, 384, 128
    l1 = _weight(rng, H, K, "fp8b128", "fp8-block")
    l2 = _weight(rng, N, H, "fp8b128", "fp8-block")
    x = rng.standard_normal((M, K)).astype(np.float32)
    want = mixq.linear(mixq.quantize_activations(mixq.linear(x, l1), "fp8-block"), l2)
    h = mixq.linear(x, l1, out=mixq.QuantizedActivations.empty("fp8-block", M, H))
    assert np.array_equal(mixq.linear(h, l2), want)
    # xq in, yq out
    z = mixq.linear(h, l2, out=mixq.QuantizedActivations.empty("fp8-block", M, N))
    _same(z, mixq.quantize_activations(want, "fp8-block"))


def test_bad_arguments(rng):
    M, N, K = 4, 64, 128
    pw = _weight(rng, N, K, "w8g128", "int8-block")
    x = rng.standard_normal((M, K)).astype(np.float32)
    with pytest.raises(ValueError, match="kind 'int4'"):
        mixq.QuantizedActivations.empty("int4", M, N)
    with pytest.raises(mixq.InvalidArgumentError, match="yq.q has 3 rows"):
        mixq.linear(x, pw, out=mixq.QuantizedActivations.empty("int8-block", M - 1, N))
    with pytest.raises(mixq.InvalidArgumentError, match=r"block \(48\)"):
        mixq.linear(x, pw, out=mixq.QuantizedActivations.empty("int8-block", M, N, block=48))
    xq = mixq.quantize_activations(x, "fp8-block")
    with pytest.raises(mixq.InvalidArgumentError, match="xq.kind"):
        mixq.linear(xq, pw)


@needs_cuda
@pytest.mark.parametrize("scheme,act,kind,block", [("fp8b128", "fp8-block", "fp8-block", 128),
                                                   ("w8g128", "int8-block", "int8-block", 128),
                                                   ("w8g64asym", "int8-block", "int8-block", 64)])
@pytest.mark.parametrize("M", [3, 300])
def test_cuda_quantized_input_and_output(scheme, act, kind, block, M):
    """On the GPU through torch: buffers made next to x by QuantizedActivations.empty(like=x), the
    quantized input giving linear's own outputs, the output written quantized holding the
    quantizer's bytes for the same call's float32 output (300 rows: the Hopper block GEMM's
    quantizing epilogue; 3 rows: the few-token kernel, then the quantizer)."""
    import torch
    N, K = 384, 512
    torch.manual_seed(M)
    qw = mixq.quantize(torch.randn(N, K) * 0.1, scheme)
    pw = mixq.prepare(qw, backend="cuda", act=act, device=0)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    xq = mixq.quantize_activations(x, act, block)
    assert xq.q.is_cuda and xq.scale.is_cuda
    assert torch.equal(mixq.linear(xq, pw, bias=bias), mixq.linear(x, pw, bias=bias,
                                                                  out_dtype="float32"))
    y32 = torch.empty(M, N, device="cuda", dtype=torch.float32)
    mixq.linear(x, pw, out=y32, bias=bias, clamp=(-2.0, 1.5))
    want = mixq.quantize_activations(y32, kind, block)
    got = mixq.QuantizedActivations.empty(kind, M, N, block, like=x)
    assert got.q.is_cuda
    assert mixq.linear(x, pw, out=got, bias=bias, clamp=(-2.0, 1.5)) is got
    torch.cuda.synchronize()
    _same(got, want, torch.equal)
    # xq in, yq out: the next layer's link of a chain
    got2 = mixq.QuantizedActivations.empty(kind, M, N, block, like=x)
    mixq.linear(xq, pw, out=got2, bias=bias, clamp=(-2.0, 1.5))
    torch.cuda.synchronize()
    _same(got2, want, torch.equal)

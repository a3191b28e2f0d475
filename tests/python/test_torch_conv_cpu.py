"""mixq.torch convolutions on the CPU: torch.ops.mixq.conv2d, QuantConv2d (NCHW and
channels_last), quantize_convs_, torch.compile, and the errors."""
import gc
import math

import numpy as np
import pytest

from conftest import HAVE_TORCH

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (the CPU torch path)")

if HAVE_TORCH:
    import torch
    import torch.nn.functional as F
    from torch import nn

    import mixq
    import mixq.torch as mt


def reference(qc, x, bias):
    """float64 conv of x with the module's dequantized weight."""
    w = qc.dequantized_weight(torch.float64)
    b = None if bias is None else bias.double()
    return F.conv2d(x.double(), w, b, qc.stride, qc.padding, qc.dilation)


def rel(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


# (Ci, Co, kernel, stride, padding, dilation, scheme)
CASES = [(16, 24, 3, 1, 1, 1, "w4g16"), (32, 17, 3, 2, 1, 1, "w8g32"), (3, 8, 7, 2, 3, 1, "w8pc"),
         (64, 33, 1, 1, 0, 1, "w4g64"), (16, 16, (3, 5), (1, 2), (2, 1), (2, 1), "w4g16asym"),
         (32, 8, 3, 3, 4, 2, "w4pc")]


@pytest.mark.parametrize("ci,co,k,s,p,d,scheme", CASES)
def test_quant_conv_matches_float64_reference_both_layouts(ci, co, k, s, p, d, scheme):
    torch.manual_seed(ci + co)
    conv = nn.Conv2d(ci, co, k, stride=s, padding=p, dilation=d, bias=True)
    qc = mt.QuantConv2d.from_conv(conv, scheme)
    x = torch.randn(3, ci, 13, 11)
    want = reference(qc, x, conv.bias)
    y = qc(x)
    assert y.shape == want.shape and y.dtype == torch.float32 and y.is_contiguous()
    assert rel(y, want) < 1e-5  # f32 activations: the exact CPU kernels
    xl = x.contiguous(memory_format=torch.channels_last)
    yl = qc(xl)
    assert yl.is_contiguous(memory_format=torch.channels_last) and not yl.is_contiguous()
    assert rel(yl, want) < 1e-5
    # the op equals the core API on the same tensors
    assert torch.equal(yl, mixq.conv2d(xl.permute(0, 2, 3, 1), qc.prepared, bias=conv.bias, stride=s,
                                       padding=p, dilation=d, layout="nhwc").permute(0, 3, 1, 2))
    assert torch.equal(y, mixq.conv2d(x, qc.prepared, bias=conv.bias, stride=s, padding=p,
                                      dilation=d))


def test_same_padding_clamp_bf16_and_no_bias():
    torch.manual_seed(3)
    conv = nn.Conv2d(32, 16, 3, padding="same", dilation=2, bias=False)
    qc = mt.QuantConv2d.from_conv(conv, "w8g32", clamp="relu6")
    assert qc.padding == (2, 2)
    x = torch.randn(2, 32, 9, 10)
    want = reference(qc, x, None).clamp(0, 6)
    assert rel(qc(x), want) < 1e-5
    yb = qc(x.to(torch.bfloat16))
    assert yb.dtype == torch.bfloat16 and yb.shape == (2, 16, 9, 10)
    assert rel(yb.float(), want) < 1e-2  # bf16 input and output roundings
    assert "cpu" in qc.kernel_name(90)


def test_compile_fullgraph_same_bits_and_fake_shapes():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 8, 1))
    mt.quantize_convs_(model, "w8g16")
    for fmt in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(2, 16, 8, 8).contiguous(memory_format=fmt)
        eager = model(x)
        compiled = torch.compile(model, fullgraph=True)(x)
        assert torch.equal(eager, compiled)
    from torch._subclasses.fake_tensor import FakeTensorMode
    qc = model[0]
    with FakeTensorMode():
        xf = torch.empty(4, 16, 10, 12).contiguous(memory_format=torch.channels_last)
        yf = torch.ops.mixq.conv2d(xf, qc.handle, None, [2, 2], [1, 1], [1, 1], -math.inf, math.inf)
    assert yf.shape == (4, 32, 5, 6) and yf.is_contiguous(memory_format=torch.channels_last)


def test_opcheck():
    torch.manual_seed(5)
    qc = mt.QuantConv2d.from_conv(nn.Conv2d(16, 8, 3, padding=1), "w8g16")
    for x in (torch.randn(2, 16, 6, 7), torch.randn(2, 16, 6, 7).contiguous(memory_format=torch.channels_last)):
        torch.library.opcheck(torch.ops.mixq.conv2d.default,
                              (x, qc.handle, qc.bias, [1, 1], [1, 1], [1, 1], -math.inf, 6.0))


def test_quantize_convs_replaces_dense_and_keeps_the_rest():
    model = nn.Sequential(nn.Conv2d(3, 16, 7, stride=2, padding=3), nn.Conv2d(16, 16, 3, groups=4),
                          nn.Conv2d(16, 16, 3, padding_mode="reflect", padding=1),
                          nn.Conv2d(16, 16, 2, padding="same"), nn.Conv2d(16, 32, 3))
    replaced, kept = mt.quantize_convs_(
        model, lambda name, conv: "w8pc" if conv.in_channels % 16 else "w4g16", skip=("4",))
    assert replaced == ["0"]
    assert [k for k, _ in kept] == ["1", "2", "3"]
    assert "groups = 4" in kept[0][1] and "reflect" in kept[1][1] and "uneven" in kept[2][1]
    assert isinstance(model[0], mt.QuantConv2d) and type(model[4]) is nn.Conv2d
    # blocks of 32 along 48 channels would cross taps: the error names the layer and the sizes
    with pytest.raises(mixq.InvalidArgumentError, match=r"^0: .*block_k \(32\) must divide Ci \(48\)"):
        mt.quantize_convs_(nn.Sequential(nn.Conv2d(48, 8, 3)), "w4g32")


def test_errors_and_handles():
    with pytest.raises(mixq.InvalidArgumentError, match="conv: groups = 2"):
        mt.QuantConv2d.from_conv(nn.Conv2d(4, 4, 3, groups=2), "w8pc")
    with pytest.raises(mixq.InvalidArgumentError, match="padding_mode 'circular'"):
        mt.QuantConv2d.from_conv(nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular"), "w8pc")
    with pytest.raises(mixq.InvalidArgumentError, match="uneven"):
        mt.QuantConv2d.from_conv(nn.Conv2d(4, 4, 4, padding="same"), "w8pc")
    qw = mixq.quantize(torch.randn(8, 36), "w8pc")
    with pytest.raises(mixq.InvalidArgumentError, match=r"K = 36 is not Kh \* Kw \* in_channels = 3 \* 3 \* 5"):
        mt.QuantConv2d(qw, 5, 3)
    qc = mt.QuantConv2d(qw, 4, 3, padding=1)
    with pytest.raises(mixq.InvalidArgumentError, match="x: expected a 4-D"):
        qc(torch.randn(4, 6, 6))
    with pytest.raises(mixq.InvalidArgumentError, match="x: 5 input channels"):
        qc(torch.randn(1, 5, 6, 6))
    with pytest.raises(mixq.InvalidArgumentError, match=r"x: a 1x1 image gives a -1x-1 output"):
        mt.QuantConv2d(qw, 4, 3)(torch.randn(1, 4, 1, 1))
    with pytest.raises(mixq.InvalidArgumentError, match="stride .* must be >= 1"):
        torch.ops.mixq.conv2d(torch.randn(1, 4, 6, 6), qc.handle, None, [0, 1], [1, 1], [1, 1],
                              -math.inf, math.inf)
    with pytest.raises(mixq.InvalidArgumentError, match=r"bias: expected a contiguous float \[8\]"):
        torch.ops.mixq.conv2d(torch.randn(1, 4, 6, 6), qc.handle, torch.zeros(7), [1, 1], [1, 1],
                              [1, 1], -math.inf, math.inf)
    with pytest.raises(mixq.InvalidArgumentError, match="x: dtype torch.float64"):
        qc(torch.randn(1, 4, 6, 6, dtype=torch.float64))
    ql = mt.QuantLinear.from_linear(nn.Linear(36, 8), "w8pc")
    with pytest.raises(mixq.InvalidArgumentError, match="is a linear weight"):
        torch.ops.mixq.conv2d(torch.randn(1, 4, 6, 6), ql.handle, None, [1, 1], [1, 1], [1, 1],
                              -math.inf, math.inf)
    # an empty batch gives an empty output of the right shape
    assert qc(torch.randn(0, 4, 6, 6)).shape == (0, 8, 6, 6)
    before = mt._registry.count()
    q2 = mt.QuantConv2d(qw, 4, 3)
    assert mt._registry.count() == before + 1
    del q2
    gc.collect()
    assert mt._registry.count() == before

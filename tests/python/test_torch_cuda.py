"""mixq on CUDA through torch (and CuPy when present): the custom op against the core API,
torch.compile(fullgraph=True), CUDA-graph capture and replay, two streams at once, device
checks. Every test skips, with the reason, without a GPU + CUDA torch + a CUDA build of mixq."""
import copy
import math

import numpy as np
import pytest

from conftest import HAVE_CUDA, CUDA_SKIP_REASON, reference_linear, rel_err

pytestmark = pytest.mark.skipif(not HAVE_CUDA, reason=CUDA_SKIP_REASON)

if HAVE_CUDA:
    import torch
    from torch import nn

    import mixq
    import mixq.torch as mt

# Tolerances of the README (weight-only): f16 2e-3, bf16 1e-2, f32 1e-5 on the exact paths.
TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}


def make(scheme, N=1024, K=2048, seed=0):
    torch.manual_seed(seed)
    w = torch.randn(N, K)
    qw = mixq.quantize(w, scheme)
    return qw, mixq.prepare(qw, backend="cuda", device=0)


@pytest.mark.parametrize("scheme", ["w4g128", "w8g128", "w4g128zp", "fp8b128"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M", [1, 16, 300])
def test_cuda_linear_matches_reference(scheme, dtype, M):
    qw, pw = make(scheme)
    assert pw.backend == "cuda"
    x = torch.randn(M, qw.K, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(qw.N, device="cuda", dtype=x.dtype)
    y = mixq.linear(x, pw, bias=b)
    assert y.is_cuda and y.dtype == x.dtype and y.shape == (M, qw.N)
    ref = reference_linear(x.float().cpu().numpy(), qw, b.float().cpu().numpy())
    assert rel_err(y.float().cpu().numpy(), ref) <= TOL[dtype]


def test_op_bit_identical_to_core_api_and_cupy():
    qw, pw = make("w4g128")
    h = mt.register_prepared(pw)
    try:
        x = torch.randn(8, qw.K, device="cuda", dtype=torch.float16)
        got = torch.ops.mixq.linear(x, h, None, -math.inf, math.inf)
        want = mixq.linear(x, pw)
        assert torch.equal(got, want)
        cupy = pytest.importorskip("cupy", reason="needs CuPy for the CuPy part")
        xc = cupy.from_dlpack(x)
        yc = mixq.linear(xc, pw)
        assert torch.equal(torch.from_dlpack(yc), want)
    finally:
        mt.release_prepared(h)


def test_w8a8_modes():
    torch.manual_seed(3)
    w = torch.randn(1024, 2048)
    x = torch.randn(32, 2048, device="cuda", dtype=torch.bfloat16)
    for scheme, act, tol in (("w8g128", "int8", 1e-2), ("fp8b128", "fp8", 4e-2)):
        qw = mixq.quantize(w, scheme)
        pw = mixq.prepare(qw, backend="cuda", act=act)
        y = mixq.linear(x, pw)
        assert rel_err(y.float().cpu().numpy(),
                       reference_linear(x.float().cpu().numpy(), qw)) <= tol


def test_quant_linear_on_cuda_and_move():
    torch.manual_seed(4)
    lin = nn.Linear(2048, 1024).cuda().half()
    ql = mt.QuantLinear.from_linear(lin, "w4g128")
    assert ql.prepared.backend == "cuda" and ql.bias.is_cuda
    x = torch.randn(4, 2048, device="cuda", dtype=torch.float16)
    y = ql(x)
    ref = reference_linear(x.float().cpu().numpy(), ql.qweight, lin.bias.detach().float().cpu().numpy())
    assert rel_err(y.float().cpu().numpy(), ref) <= 2e-3
    ql.cpu()
    assert ql.prepared.backend == "cpu"
    y_cpu = ql(x.cpu().float())
    assert rel_err(y_cpu.numpy(), ref) <= 1e-2
    ql.cuda()
    assert ql.prepared.backend == "cuda"


def test_compile_fullgraph_cuda():
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.SiLU(), nn.Linear(4096, 2048)).cuda().half()
    mt.quantize_(model, "w4g128")
    x = torch.randn(4, 2048, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, fullgraph=True)
        assert torch.equal(compiled(x), eager)
        cg = torch.compile(model, fullgraph=True, mode="reduce-overhead")
        for _ in range(3):  # warm-up, record, replay
            out = cg(x)
        assert torch.equal(out, eager)


def test_cuda_graph_capture_and_replay():
    torch.manual_seed(6)
    ql = mt.QuantLinear.from_linear(nn.Linear(4096, 4096).cuda().half(), "w4g128")
    x = torch.randn(1, 4096, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up outside capture (lazy CUDA / library initialisation)
            ql(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ql(x)
    for seed in range(3):
        x.copy_(torch.randn(1, 4096, generator=torch.Generator().manual_seed(seed)).half())
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, ql(x))


def test_two_streams_at_once():
    qw, pw = make("w8g128", N=4096, K=4096)
    xs = [torch.randn(16, qw.K, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    want = [mixq.linear(x, pw) for x in xs]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [torch.empty_like(w) for w in want]
    for _ in range(20):
        for s, x, o in zip(streams, xs, outs):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                mixq.linear(x, pw, out=o)  # workspace per call: concurrent calls are safe
    torch.cuda.synchronize()
    for o, w in zip(outs, want):
        assert torch.equal(o, w)
    # An explicit stream argument (another stream than the current one) works the same.
    o = mixq.linear(xs[0], pw, stream=streams[0])
    streams[0].synchronize()
    assert torch.equal(o, want[0])


def test_device_errors_name_the_argument():
    qw, pw = make("w4g128", N=256, K=512)
    with pytest.raises(mixq.InvalidArgumentError, match="x: expected a cuda"):
        mixq.linear(torch.randn(2, 512, dtype=torch.float16), pw,
                    out=torch.empty(2, 256, device="cuda", dtype=torch.float16))
    with pytest.raises(mixq.InvalidArgumentError, match="bias: expected a cuda"):
        mixq.linear(torch.randn(2, 512, device="cuda", dtype=torch.float16), pw,
                    bias=torch.zeros(256, dtype=torch.float16))
    cpu_pw = mixq.prepare(qw, backend="cpu")
    with pytest.raises(mixq.InvalidArgumentError, match="x: expected a cpu"):
        mixq.linear(torch.randn(2, 512, device="cuda"), cpu_pw, out=torch.empty(2, 256))
    with pytest.raises(mixq.InvalidArgumentError, match="x: innermost dimension"):
        mixq.linear(torch.randn(2, 1024, device="cuda", dtype=torch.float16)[:, ::2], pw)


@pytest.mark.skipif(not HAVE_CUDA or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensor_on_another_gpu():
    qw, pw = make("w4g128", N=256, K=512)
    with pytest.raises(mixq.InvalidArgumentError, match="x: on cuda:1 but the weight is prepared for cuda:0"):
        mixq.linear(torch.randn(2, 512, device="cuda:1", dtype=torch.float16), pw,
                    out=torch.empty(2, 256, device="cuda:0", dtype=torch.float16))
    pw1 = mixq.prepare(qw, backend="cuda", device=1)
    x1 = torch.randn(2, 512, device="cuda:1", dtype=torch.float16)
    y1 = mixq.linear(x1, pw1)
    assert y1.device == torch.device("cuda:1")
    y0 = mixq.linear(x1.to("cuda:0"), pw)
    assert torch.equal(y1.cpu(), y0.cpu())


def test_op_device_errors_and_fast_path_matches_op():
    torch.manual_seed(7)
    ql = mt.QuantLinear.from_linear(nn.Linear(512, 256).cuda().half(), "w4g128")
    with pytest.raises(mixq.InvalidArgumentError, match="x: on cpu, but the weight is prepared for cuda:0"):
        ql(torch.randn(2, 512, dtype=torch.float16))
    with pytest.raises(mixq.InvalidArgumentError, match="bias: expected a cuda"):
        torch.ops.mixq.linear(torch.randn(2, 512, device="cuda", dtype=torch.float16), ql.handle,
                              torch.zeros(256, dtype=torch.float16), -math.inf, math.inf)
    x = torch.randn(5, 512, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        eager = ql(x)  # the module's direct call
    op = torch.ops.mixq.linear(x, ql.handle, ql.bias, ql.clamp_lo, ql.clamp_hi)
    assert torch.equal(eager, op)


def test_fused_projections_under_cuda_graphs():
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=256, intermediate_size=512,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(14)
    model = transformers.LlamaForCausalLM(cfg).eval().cuda().half()
    separate, fused = model, copy.deepcopy(model)
    mt.quantize_(separate, "w4g128", skip=("lm_head",))
    mt.quantize_(fused, "w4g128", skip=("lm_head",), fuse=True)
    ids = torch.randint(0, 256, (1, 1), device="cuda")
    with torch.no_grad():
        want = separate(ids).logits
        eager = fused(ids).logits
        assert rel_err(eager.float().cpu().numpy(), want.float().cpu().numpy()) <= TOL["float16"]
        step = torch.compile(lambda t: fused(t).logits, fullgraph=True, mode="reduce-overhead")
        for _ in range(3):  # warm-up, record, replay
            got = step(ids).clone()
        # inductor fuses the norms and softmax itself, so the graph differs from eager in the
        # last bits of fp16; the mixq ops inside it are the same calls
        assert rel_err(got.float().cpu().numpy(), eager.float().cpu().numpy()) <= TOL["float16"]


# On Hopper a 16-bit NCHW conv runs the NHWC kernels between two transposes, in a workspace the
# op sizes with conv2d_workspace_size (larger than the NHWC call's: the copies): the contiguous
# input gives the channels_last input's values bit for bit, through the op and through mixq.conv2d.
@pytest.mark.parametrize("ci,co,k,s,p,scheme", [(64, 64, 3, 1, 1, "w4g64"),
                                                  (128, 40, 3, 2, 1, "w8g128"),
                                                  (256, 96, 1, 1, 0, "w4g128")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_nchw_conv_runs_the_nhwc_kernels(ci, co, k, s, p, scheme, dtype):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the NHWC implicit GEMM needs compute capability 9.0")
    torch.manual_seed(ci + co + 1)
    conv = nn.Conv2d(ci, co, k, stride=s, padding=p).cuda()
    qc = mt.QuantConv2d.from_conv(conv, scheme)
    x = torch.randn(2, ci, 9, 11, device="cuda").to(getattr(torch, dtype))
    x_cl = x.contiguous(memory_format=torch.channels_last)
    code = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    args = (2, ci, 9, 11, code)
    geom = (s, s, p, p, 1, 1)
    nchw = mixq._mixq.conv2d_workspace_size(qc.prepared, *args, "nchw", *geom)
    nhwc = mixq._mixq.conv2d_workspace_size(qc.prepared, *args, "nhwc", *geom)
    assert nchw > nhwc
    y = qc(x)
    y_cl = qc(x_cl)
    assert y.is_contiguous() and y_cl.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, y_cl)
    assert torch.equal(mixq.conv2d(x, qc.prepared, stride=s, padding=p, bias=qc.bias), y)


# QuantConv2d on CUDA: the Hopper NHWC implicit GEMM (channels_last, or NCHW through NHWC copies;
# Ci a multiple of 64) and the sm_80 kernel (other Ci) against the float64 conv of the dequantized
# weight; under torch.compile and a captured CUDA graph, the same bits as eager.
@pytest.mark.parametrize("ci,co,k,s,p,scheme", [(64, 64, 3, 1, 1, "w4g64"), (128, 40, 3, 2, 1, "w8g128"),
                                                  (3, 16, 7, 2, 3, "w8pc"), (256, 96, 1, 1, 0, "w4g128")])
@pytest.mark.parametrize("fmt", ["contiguous", "channels_last"])
def test_cuda_quant_conv2d(ci, co, k, s, p, scheme, fmt):
    import torch.nn.functional as F
    torch.manual_seed(ci + co)
    conv = nn.Conv2d(ci, co, k, stride=s, padding=p).cuda()
    qc = mt.QuantConv2d.from_conv(conv, scheme)
    memory_format = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
    x = torch.randn(2, ci, 14, 14, device="cuda").half().contiguous(memory_format=memory_format)
    y = qc(x)
    assert y.dtype == torch.float16 and y.is_contiguous(memory_format=memory_format)
    w = qc.dequantized_weight(torch.float64).cuda()
    want = F.conv2d(x.double(), w, conv.bias.double(), s, p)
    assert ((y.double() - want).norm() / want.norm()).item() < 3e-3
    compiled = torch.compile(qc, fullgraph=True)
    assert torch.equal(compiled(x), y)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        yg = qc(x)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(yg, y)

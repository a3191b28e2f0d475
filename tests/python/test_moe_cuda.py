"""The mixture-of-experts API on CUDA with torch tensors: moe_mlp and grouped_linear against a
float64 loop, the device-side error flag, torch.compile(fullgraph=True) of QuantMoE, and CUDA-graph
capture replayed with changing routing. Skips without a GPU."""
import numpy as np
import pytest

import mixq
from conftest import HAVE_CUDA, needs_cuda, rel_err

if HAVE_CUDA:
    import torch

    import mixq.torch as mt

pytestmark = needs_cuda

E, K_TOP, H, I = 8, 2, 512, 256


def quant_moe(seed=0, scheme="w4g128", act="none"):
    torch.manual_seed(seed)
    gates = [torch.nn.Linear(H, I, bias=False) for _ in range(E)]
    ups = [torch.nn.Linear(H, I, bias=False) for _ in range(E)]
    downs = [torch.nn.Linear(I, H, bias=False) for _ in range(E)]
    moe = mt.QuantMoE.from_linears(gates, ups, downs, scheme, device="cuda", act=act)
    gu = [mixq.dequantize(mixq.fuse_gate_up(mixq.quantize(g.weight.detach(), scheme),
                                            mixq.quantize(u.weight.detach(), scheme)))
          .astype(np.float64) for g, u in zip(gates, ups)]
    dn = [mixq.dequantize(mixq.quantize(d.weight.detach(), scheme)).astype(np.float64)
          for d in downs]
    return moe, gu, dn


def reference(x, ids, w, gu, dn):
    x, ids, w = (a.detach().cpu().double().numpy() for a in (x, ids, w))
    y = np.zeros((x.shape[0], H))
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            h = gu[e] @ x[t]
            y[t] += w[t, j] * (dn[e] @ (h[:I] / (1 + np.exp(-h[:I])) * h[I:]))
    return y


def route(T, seed):
    g = torch.Generator().manual_seed(seed)
    w, ids = torch.topk(torch.softmax(torch.randn(T, E, generator=g), -1), K_TOP)
    return ids.cuda(), w.cuda()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_moe_mlp_cuda_matches_float64(dtype):
    moe, gu, dn = quant_moe()
    dt = getattr(torch, dtype)
    x = torch.randn(37, H, device="cuda").to(dt)
    ids, w = route(37, 1)
    y = moe(x, ids, w)
    torch.cuda.synchronize()
    assert y.dtype == dt
    assert rel_err(y.float().cpu().numpy(), reference(x, ids, w, gu, dn)) < 2e-2
    # the core function on the same tensors (int32 ids)
    y2 = mixq.moe_mlp(x, ids.int(), w, moe.w_gate_up, moe.w_down)
    assert torch.equal(y, y2)


def test_moe_mlp_cuda_fp8_block_experts():
    """DeepSeek-V3's format: fp8b128 experts with e4m3 activations per 128 (the grouped FP8 block
    GEMM, Hopper only) against float64 on the dequantized weights and exact activations."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the FP8 block GEMM needs compute capability 9.0")
    moe, gu, dn = quant_moe(seed=3, scheme="fp8b128", act="fp8")
    assert "fp8_block_grouped" in moe.w_gate_up.kernel_name(74)
    x = torch.randn(37, H, device="cuda").to(torch.bfloat16)
    ids, w = route(37, 2)
    y = moe(x, ids, w)
    torch.cuda.synchronize()
    # e4m3 activations: ~4e-2 of relative error (mixq bench --op moe measures 4.2-4.6e-2)
    assert rel_err(y.float().cpu().numpy(), reference(x, ids, w, gu, dn)) < 8e-2


@pytest.mark.parametrize("scheme", ["w8g128", "w8g64asym"])
def test_moe_mlp_cuda_int8_experts(scheme):
    """INT8 W8A8 experts: int8 codes per block with activations quantized to int8 per token per
    block (the grouped INT8 block GEMM, Hopper only) against float64 on the dequantized weights
    and exact activations."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the grouped INT8 block GEMM needs compute capability 9.0")
    moe, gu, dn = quant_moe(seed=4, scheme=scheme, act="int8")
    assert "sm90_i8_grouped" in moe.w_gate_up.kernel_name(74)
    x = torch.randn(37, H, device="cuda").to(torch.bfloat16)
    ids, w = route(37, 3)
    y = moe(x, ids, w)
    torch.cuda.synchronize()
    # int8 activations per block: ~1e-2 of relative error
    assert rel_err(y.float().cpu().numpy(), reference(x, ids, w, gu, dn)) < 3e-2


def test_grouped_linear_cuda_and_error_flag():
    moe, gu, _ = quant_moe(1)
    x = torch.randn(6, H, device="cuda", dtype=torch.float16)
    offsets = torch.tensor([0, 2, 2, 3, 3, 3, 3, 3, 6], dtype=torch.int32, device="cuda")
    y = mixq.grouped_linear(x, moe.w_gate_up, offsets=offsets)
    xh = x.double().cpu().numpy()
    want = np.concatenate([xh[:2] @ gu[0].T, xh[2:3] @ gu[2].T, xh[3:] @ gu[7].T])
    assert rel_err(y.float().cpu().numpy(), want) < 2e-2
    err = torch.zeros(1, dtype=torch.int32, device="cuda")
    bad = torch.tensor([0, 4, 2, 3, 3, 3, 3, 3, 6], dtype=torch.int32, device="cuda")
    out = torch.full_like(y, 5.0)
    mixq.grouped_linear(x, moe.w_gate_up, offsets=bad, out=out, error=err)
    assert int(err.item()) & mixq.MOE_ERROR_OFFSETS
    assert torch.all(out == 5.0)  # no work done


def test_compile_fullgraph_and_graph_capture_with_changing_routing():
    moe, gu, dn = quant_moe(2)
    T = 4
    x = torch.randn(T, H, device="cuda", dtype=torch.float16)
    ids, w = route(T, 3)
    eager = moe(x, ids, w)
    compiled = torch.compile(moe, fullgraph=True)
    assert torch.equal(compiled(x, ids, w), eager)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            moe(x, ids, w)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = moe(x, ids, w)
    for seed in range(4, 8):  # new tokens and new routing, same shapes
        new_ids, new_w = route(T, seed)
        ids.copy_(new_ids)
        w.copy_(new_w)
        x.copy_(torch.randn(T, H, generator=torch.Generator().manual_seed(seed)).half())
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, moe(x, ids, w))
        assert rel_err(y.float().cpu().numpy(), reference(x, ids, w, gu, dn)) < 2e-2

"""The mixture-of-experts API on the CPU (numpy and torch CPU): prepare_experts, grouped_linear in
both layouts, moe_route / gather / scatter_add, moe_mlp and the torch ops / QuantMoE, each
against a float64 loop over the experts' dequantized weights; bad input raises naming the
argument."""
import math

import numpy as np
import pytest

import mixq
from conftest import HAVE_TORCH, needs_torch, rel_err

if HAVE_TORCH:
    import torch

    import mixq.torch  # noqa: F401  (registers torch.ops.mixq.moe_mlp)


# The CPU backend's default for few rows per expert quantizes activations to int8 per weight
# segment (~1e-2 relative error per product, docs/cpu-backend.md); "exact" keeps f32 activations,
# so results agree with float64 to f32 accumulation (1e-5).
EXACT = "cpu_activations=exact"


def make_experts(rng, E, N, K, scheme="w4g128"):
    qws = [mixq.quantize((rng.standard_normal((N, K)) * 0.05).astype(np.float32), scheme)
           for _ in range(E)]
    return qws, [mixq.dequantize(q).astype(np.float64) for q in qws]


def routing(rng, T, E, k):
    ids = np.stack([rng.choice(E, size=k, replace=False) for _ in range(T)]).astype(np.int32)
    w = rng.random((T, k)).astype(np.float32)
    return ids, w / w.sum(1, keepdims=True)


def silu(v):
    return v / (1.0 + np.exp(-v))


def mlp_reference(x, ids, w, gu, dn):
    """float64 loop over tokens and their experts."""
    x = x.astype(np.float64)
    I = dn[0].shape[1]
    y = np.zeros((x.shape[0], dn[0].shape[0]))
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = ids[t, j]
            h = gu[e] @ x[t]
            y[t] += float(w[t, j]) * (dn[e] @ (silu(h[:I]) * h[I:]))
    return y


@pytest.mark.parametrize("scheme", ["w4g128", "w8g128"])
def test_grouped_linear_contiguous(rng, scheme):
    E, N, K = 5, 96, 256
    qws, ref = make_experts(rng, E, N, K, scheme)
    pe = mixq.prepare_experts(qws, backend="cpu", tuning=EXACT)
    assert (pe.num_experts, pe.N, pe.K, pe.backend) == (E, N, K, "cpu")
    counts = [3, 0, 7, 1, 4]  # an expert without rows
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    x = rng.standard_normal((offsets[-1], K)).astype(np.float32)
    bias = rng.standard_normal((E, N)).astype(np.float32)
    y = mixq.grouped_linear(x, pe, offsets=offsets, bias=bias)
    want = np.concatenate([x[offsets[e]:offsets[e + 1]].astype(np.float64) @ ref[e].T + bias[e]
                           for e in range(E)])
    assert y.shape == (offsets[-1], N)
    assert rel_err(y, want) < 1e-5


def test_grouped_linear_masked_leaves_rows_past_counts(rng):
    E, N, K, max_tokens = 3, 64, 128, 4
    qws, ref = make_experts(rng, E, N, K)
    pe = mixq.prepare_experts(qws, backend="cpu", tuning=EXACT)
    x = rng.standard_normal((E, max_tokens, K)).astype(np.float32)
    counts = np.array([2, 0, 4], dtype=np.int32)
    out = np.full((E, max_tokens, N), 7.0, dtype=np.float32)
    mixq.grouped_linear(x, pe, counts=counts, out=out)
    for e in range(E):
        c = counts[e]
        assert rel_err(out[e, :c], x[e, :c].astype(np.float64) @ ref[e].T) < 1e-5
        assert np.all(out[e, c:] == 7.0)


def test_prepare_from_stacked_array(rng):
    w = (rng.standard_normal((3, 64, 128)) * 0.1).astype(np.float32)
    pe = mixq.prepare_experts(w, backend="ref", scheme="w8g128")
    assert (pe.num_experts, pe.N, pe.K, pe.backend) == (3, 64, 128, "ref")
    x = rng.standard_normal((3, 128)).astype(np.float32)
    y = mixq.grouped_linear(x, pe, offsets=np.array([0, 1, 1, 3], np.int32))
    ref = [mixq.dequantize(mixq.quantize(w[e], "w8g128")).astype(np.float64) for e in range(3)]
    assert rel_err(y[0], ref[0] @ x[0]) < 1e-5
    assert rel_err(y[1:], x[1:].astype(np.float64) @ ref[2].T) < 1e-5
    with pytest.raises(mixq.InvalidArgumentError, match="scheme"):
        mixq.prepare_experts(w, backend="cpu")


def test_route_gather_scatter_roundtrip(rng):
    T, E, k, K = 9, 6, 2, 32
    ids, w = routing(rng, T, E, k)
    perm, offsets, inverse = mixq.moe_route(ids, E)
    flat = ids.reshape(-1)
    # offsets count the pairs per expert; the permutation sorts pairs by expert, stably
    assert np.array_equal(np.diff(offsets), np.bincount(flat, minlength=E))
    assert np.array_equal(perm, np.argsort(flat, kind="stable"))
    assert np.array_equal(inverse[perm], np.arange(T * k))
    x = rng.standard_normal((T, K)).astype(np.float32)
    xs = mixq.moe_gather(x, perm, k)
    assert np.array_equal(xs, x[perm // k])
    y = mixq.moe_scatter_add(xs, inverse, w)
    assert rel_err(y, x.astype(np.float64) * w.sum(1, keepdims=True)) < 1e-6
    y2 = mixq.moe_scatter_add(xs, inverse, w, out=y.copy(), accumulate=True)
    assert rel_err(y2, 2 * y.astype(np.float64)) < 1e-6


@pytest.mark.parametrize("backend,tuning,tol", [("cpu", EXACT, 1e-5), ("cpu", "", 3e-2),
                                                ("ref", "", 1e-5)])
def test_moe_mlp_matches_float64_loop(rng, backend, tuning, tol):
    E, k, H, I, T = 6, 2, 128, 64, 11
    gq, _ = make_experts(rng, E, I, H)
    uq, _ = make_experts(rng, E, I, H)
    dq, dn = make_experts(rng, E, H, I)
    fused = [mixq.fuse_gate_up(g, u) for g, u in zip(gq, uq)]
    gu_ref = [mixq.dequantize(f).astype(np.float64) for f in fused]
    gu = mixq.prepare_experts(fused, backend=backend, tuning=tuning)
    down = mixq.prepare_experts(dq, backend=backend, tuning=tuning)
    x = rng.standard_normal((T, H)).astype(np.float32)
    ids, w = routing(rng, T, E, k)
    y = mixq.moe_mlp(x, ids, w, gu, down)
    assert y.shape == (T, H) and y.dtype == np.float32
    assert rel_err(y, mlp_reference(x, ids, w, gu_ref, dn)) < tol


def test_bad_input_names_the_argument(rng):
    E, N, K = 4, 64, 128
    qws, _ = make_experts(rng, E, N, K)
    pe = mixq.prepare_experts(qws, backend="cpu")
    x = rng.standard_normal((6, K)).astype(np.float32)
    with pytest.raises(mixq.InvalidArgumentError, match="offsets"):  # not non-decreasing
        mixq.grouped_linear(x, pe, offsets=np.array([0, 4, 2, 5, 6], np.int32))
    with pytest.raises(mixq.InvalidArgumentError, match="offsets"):  # does not end at rows
        mixq.grouped_linear(x, pe, offsets=np.array([0, 1, 2, 3, 4], np.int32))
    with pytest.raises(mixq.InvalidArgumentError, match="counts"):
        mixq.grouped_linear(rng.standard_normal((E, 2, K)).astype(np.float32), pe,
                            counts=np.array([1, 3, 0, 0], np.int32))  # 3 > max_tokens 2
    with pytest.raises(mixq.InvalidArgumentError, match="offsets / counts"):
        mixq.grouped_linear(x, pe)
    ids = np.array([[0, 4], [1, 2]], np.int32)  # 4 is out of [0, 4)
    with pytest.raises(mixq.InvalidArgumentError, match="topk_ids"):
        mixq.moe_route(ids, E)
    with pytest.raises(mixq.InvalidArgumentError, match="topk_ids"):
        mixq.moe_route(np.array([[0, -1]], np.int32), E)
    with pytest.raises(mixq.InvalidArgumentError, match="experts"):
        mixq.prepare_experts([], backend="cpu")
    other = mixq.quantize(rng.standard_normal((N, 2 * K)).astype(np.float32), "w4g128")
    with pytest.raises(mixq.InvalidArgumentError, match="expert"):
        mixq.prepare_experts(qws + [other], backend="cpu")
    gu = mixq.prepare_experts([mixq.fuse_gate_up(q, q) for q in qws], backend="cpu")
    down = mixq.prepare_experts(
        [mixq.quantize(rng.standard_normal((K, N)).astype(np.float32), "w4g128")
         for _ in range(E)], backend="cpu")
    with pytest.raises(mixq.InvalidArgumentError, match="topk_ids"):
        mixq.moe_mlp(x[:2], ids, np.ones((2, 2), np.float32), gu, down)
    with pytest.raises(mixq.InvalidArgumentError, match="activation|relu"):
        mixq.moe_mlp(x[:2], ids % E, np.ones((2, 2), np.float32), gu, down, activation="relu")
    # the kernel a grouped call would run, for a given activation dtype
    assert pe.kernel_name(6).startswith("grouped<")
    assert pe.kernel_name(6, "bf16").startswith("grouped<")
    with pytest.raises(mixq.InvalidArgumentError, match="dtype"):
        pe.kernel_name(6, "f12")


@needs_torch
def test_torch_ops_and_quant_moe_cpu():
    torch.manual_seed(3)
    E, k, H, I, T = 4, 2, 128, 64, 5
    lin = lambda n, kk: torch.nn.Linear(kk, n, bias=False)  # noqa: E731
    experts = torch.nn.ModuleList()
    for _ in range(E):
        m = torch.nn.Module()
        m.w1, m.w3, m.w2 = lin(I, H), lin(I, H), lin(H, I)  # Mixtral naming
        experts.append(m)
    moe = mixq.torch.QuantMoE.from_experts(experts, "w8g128", tuning=EXACT)
    x = torch.randn(T, H)
    logits = torch.randn(T, E)
    w, ids = torch.topk(torch.softmax(logits, -1), k)  # int64 ids
    y = moe(x, ids, w)
    gu = [mixq.dequantize(mixq.fuse_gate_up(mixq.quantize(e.w1.weight.detach(), "w8g128"),
                                            mixq.quantize(e.w3.weight.detach(), "w8g128")))
          .astype(np.float64) for e in experts]
    dn = [mixq.dequantize(mixq.quantize(e.w2.weight.detach(), "w8g128")).astype(np.float64)
          for e in experts]
    want = mlp_reference(x.numpy(), ids.numpy(), w.numpy(), gu, dn)
    assert rel_err(y.detach().numpy(), want) < 1e-5
    # the op traces whole under torch.compile
    compiled = torch.compile(moe, fullgraph=True)
    assert torch.allclose(compiled(x, ids, w), y)
    # grouped_linear op, contiguous layout
    offsets = torch.tensor([0, 2, 2, 3, 5], dtype=torch.int32)
    g = torch.ops.mixq.grouped_linear(x, moe.gate_up_handle, offsets, None, None)
    want_g = np.concatenate([x.numpy()[offsets[e]:offsets[e + 1]].astype(np.float64) @ gu[e].T
                             for e in range(E)])
    assert rel_err(g.numpy(), want_g) < 1e-5
    with pytest.raises(mixq.InvalidArgumentError, match="topk_ids"):
        moe(x, torch.full((T, k), E), w)


@needs_torch
def test_core_functions_take_torch_cpu_tensors(rng):
    E, N, K = 3, 64, 128
    qws, ref = make_experts(rng, E, N, K)
    pe = mixq.prepare_experts(qws, backend="cpu", tuning=EXACT)
    x = torch.randn(4, K)
    y = mixq.grouped_linear(x, pe, offsets=torch.tensor([0, 1, 1, 4], dtype=torch.int32))
    assert isinstance(y, torch.Tensor)
    want = np.concatenate([x.numpy()[:1].astype(np.float64) @ ref[0].T,
                           x.numpy()[1:].astype(np.float64) @ ref[2].T])
    assert rel_err(y.numpy(), want) < 1e-5
    perm, offsets, inverse = mixq.moe_route(torch.tensor([[2, 0], [0, 1]], dtype=torch.int32), E)
    assert offsets.tolist() == [0, 2, 3, 4] and perm.tolist() == [1, 2, 3, 0]
    assert math.isclose(float(inverse[0]), 3)


def test_load_experts_from_a_checkpoint(rng, tmp_path):
    E, I, H = 3, 64, 128
    gates, _ = make_experts(rng, E, I, H)
    ups, _ = make_experts(rng, E, I, H)
    path = str(tmp_path / "experts.safetensors")
    named = {f"mlp.experts.{e}.gate_proj.weight": q for e, q in enumerate(gates)}
    named.update({f"mlp.experts.{e}.up_proj.weight": q for e, q in enumerate(ups)})
    mixq.save(path, named)
    loaded = mixq.load_experts(path, "mlp.experts.{e}.gate_proj.weight")
    assert len(loaded) == E
    for a, b in zip(loaded, gates):
        assert np.array_equal(mixq.dequantize(a), mixq.dequantize(b))
    fused = mixq.load_experts(path, "mlp.experts.{e}.gate_proj.weight",
                              "mlp.experts.{e}.up_proj.weight")
    assert (fused[1].N, fused[1].K) == (2 * I, H)
    want = np.concatenate([mixq.dequantize(gates[1]), mixq.dequantize(ups[1])])
    assert np.array_equal(mixq.dequantize(fused[1]), want)
    with pytest.raises(mixq.FormatError, match="nothing"):
        mixq.load_experts(path, "mlp.experts.{e}.nothing.weight")

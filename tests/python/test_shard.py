"""Tensor-parallel shards from Python: mixq.shard / shard_range / load_shard / check_shard_set
on numpy weights (any split, cut groups included), and the torch.distributed parallel layers on
gloo across processes, against the unsharded layer."""
import math
import os

import numpy as np
import pytest

import mixq
from conftest import HAVE_TORCH, reference_linear, rel_err

SCHEMES = ["w4g128", "w8g128", "w4g64zp", "fp8b128"]


def _weights(N=200, K=320, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, K)).astype(np.float32), rng.standard_normal(
        (5, K)).astype(np.float32)


def test_shard_range_balanced_and_errors():
    for dim, world, g in ((10944, 3, 1), (14784, 8, 1), (29568, 4, 128), (7, 7, 1)):
        ranges = [mixq.shard_range(dim, r, world, g) for r in range(world)]
        assert ranges[0][0] == 0 and ranges[-1][1] == dim
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        sizes = [e - b for b, e in ranges]
        assert max(sizes) - min(sizes) <= g
    with pytest.raises(mixq.InvalidArgumentError, match="rank"):
        mixq.shard_range(100, 3, 3)
    with pytest.raises(mixq.InvalidArgumentError):
        mixq.shard_range(4, 0, 8)  # a rank would get nothing


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("world", [2, 3])
def test_column_shards_concatenate_to_the_global_output(scheme, world):
    w, x = _weights()
    qw = mixq.quantize(w, scheme)
    want = reference_linear(x, qw)
    parts, kernel = [], []
    for r in range(world):
        s = mixq.shard(qw, r, world, "column")
        parts.append(reference_linear(x, s))
        kernel.append(mixq.linear(x, mixq.prepare(s, backend="cpu", force_kernel="cpu_f32")))
    assert rel_err(np.concatenate(parts, axis=1), want) <= 1e-12
    assert rel_err(np.concatenate(kernel, axis=1), want) <= 1e-5


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("world", [2, 3])
def test_row_shards_sum_to_the_global_output_through_cut_groups(scheme, world):
    w, x = _weights()
    qw = mixq.quantize(w, scheme)
    want = reference_linear(x, qw)
    total_ref, total_kernel = 0.0, 0.0
    for r in range(world):
        b, e = mixq.shard_range(qw.K, r, world)
        s = mixq.shard(qw, r, world, "row")
        assert s.K == e - b
        # every element of the shard dequantizes to the global weight's bits (cut groups too)
        assert np.array_equal(mixq.dequantize(s), mixq.dequantize(qw)[:, b:e])
        xr = np.ascontiguousarray(x[:, b:e])
        total_ref = total_ref + reference_linear(xr, s)
        total_kernel = total_kernel + mixq.linear(
            xr, mixq.prepare(s, backend="cpu", force_kernel="cpu_f32")).astype(np.float64)
    assert rel_err(total_ref, want) <= 1e-12
    assert rel_err(total_kernel, want) <= 1e-5


def test_check_shard_set_and_load_shard(tmp_path):
    w, _ = _weights()
    qw = mixq.quantize(w, "w4g128")
    shards = [mixq.shard(qw, r, 3, "column") for r in range(3)]
    mixq.check_shard_set(shards, 3, "column")
    with pytest.raises(mixq.InvalidArgumentError):
        mixq.check_shard_set(shards[:2], 3, "column")  # rank 2 missing
    other = mixq.shard(mixq.quantize(w, "w8g128"), 2, 3, "column")
    with pytest.raises(mixq.InvalidArgumentError):
        mixq.check_shard_set(shards[:2] + [other], 3, "column")  # another scheme
    path = tmp_path / "w.safetensors"
    mixq.save(path, {"w": qw})
    for axis in ("column", "row"):
        for r in range(3):
            got = mixq.load_shard(path, "w", r, 3, axis)
            assert np.array_equal(mixq.dequantize(got),
                                  mixq.dequantize(mixq.shard(qw, r, 3, axis)))
    with pytest.raises(mixq.InvalidArgumentError, match="axis"):
        mixq.shard(qw, 0, 2, "diagonal")


def _tp_worker(rank, world, init_file):
    import torch
    import torch.distributed as dist
    from torch import nn

    import mixq.torch as mt
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        torch.manual_seed(0)  # the same global layers on every rank
        up, down = nn.Linear(320, 200), nn.Linear(200, 320)
        x = torch.randn(2, 3, 320)
        exact = dict(force_kernel="cpu_f32")
        g_up = mt.QuantLinear.from_linear(up, "w4g128", **exact)
        g_down = mt.QuantLinear.from_linear(down, "w8g128", **exact)
        with torch.no_grad():
            want_up = g_up(x)
            want = torch.relu(g_down(want_up))
            col = mt.ColumnParallelQuantLinear.from_linear(up, "w4g128", gather_output=True,
                                                           **exact)
            assert rel_err(col(x).numpy(), want_up.numpy()) <= 1e-6
            # the chain engines use: column output stays sharded, row takes it as its slice
            c = mt.ColumnParallelQuantLinear.from_linear(up, "w4g128", **exact)
            r = mt.RowParallelQuantLinear.from_linear(down, "w8g128", input_is_parallel=True,
                                                      clamp="relu", **exact)
            assert (r.begin, r.end) == (c.begin, c.end)
            assert rel_err(r(c(x)).numpy(), want.numpy()) <= 1e-5
            # the full input, sliced in place (K = 200 over 3 cuts the w8g128 groups)
            full = mt.RowParallelQuantLinear.from_linear(down, "w8g128", clamp="relu", **exact)
            assert rel_err(full(want_up).numpy(), want.numpy()) <= 1e-5
        # a rank passing another weight: every rank gets an error naming the rank
        scheme = "w8g128" if rank == world - 1 else "w4g128"
        try:
            mt.ColumnParallelQuantLinear.from_linear(up, scheme)
        except mixq.InvalidArgumentError as e:
            assert "rank" in str(e)
        else:
            raise AssertionError("mismatched weights across ranks were not refused")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (torch.distributed, gloo)")
def test_parallel_layers_on_gloo_match_the_global_layer(tmp_path):
    import torch.distributed as dist
    import torch.multiprocessing as tmp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    world = 3
    tmp.spawn(_tp_worker, args=(world, str(tmp_path / "init")), nprocs=world, join=True)

"""What cuBLASLt runs for block-scaled FP8 (torch._scaled_mm, 1x128 / 128x128 scales), on the
GPU machine: kernel names (they encode tile, cluster and schedule), and the sustained clock and
power while it runs, to set beside mixq's kernel (scripts/fp8_device.sh step fp8probe).

  python3 scripts/fp8_peer_probe.py names            # kernel names for the #5 target shapes
  python3 scripts/fp8_peer_probe.py sustain K N M S  # replay for S seconds, print us per call
  python3 scripts/fp8_peer_probe.py plain K N M C    # C plain launches (for ncu)

Needs peers/peers.py (a copy of shared/bench/peers.py) for its calling-convention probe.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "peers"))
import peers  # noqa: E402
import torch  # noqa: E402

SHAPES = [(16384, 7168), (1536, 24576), (14336, 21504), (8192, 57344)]  # K x N


def make(K, N, M):
    peers.fp8_block_probe()
    mode = peers.FP8_BLOCK_MODE
    if mode is None:
        raise SystemExit("no block-scaled FP8 calling convention works: " + "; ".join(peers.results["notes"]))
    dev = peers.dev
    w = torch.randn(N, K, device=dev).to(torch.float8_e4m3fn)
    a = torch.randn(M, K, device=dev).to(torch.float8_e4m3fn)
    sa = torch.rand(M, K // 128, device=dev) + 0.5
    sb = torch.rand(N // 128, K // 128, device=dev) + 0.5
    if mode.startswith("sa_colmajor"):
        sa = sa.t().contiguous().t()
    sbx = sb.t() if mode.endswith("sbT") else (sb.t().contiguous() if mode.endswith("contig") else sb)
    return lambda: torch._scaled_mm(a, w.t(), sa, sbx, out_dtype=torch.bfloat16)


def names():
    from torch.profiler import ProfilerActivity, profile
    for K, N in SHAPES:
        for M in (2048, 4096):
            f = make(K, N, M)
            f()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    f()
                torch.cuda.synchronize()
            for ev in prof.key_averages():
                if ev.device_type.name == "CUDA":
                    us = ev.device_time_total / max(ev.count, 1) if hasattr(ev, "device_time_total") else 0
                    print("K=%d N=%d M=%d  %8.1f us  %s" % (K, N, M, us, ev.key), flush=True)


def sustain(K, N, M, seconds):
    f = make(K, N, M)
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(20):
            f()
    g.replay()
    torch.cuda.synchronize()
    t0 = time.time()
    n = 0
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    while time.time() - t0 < seconds:
        g.replay()
        n += 20
        if n % 200 == 0:
            torch.cuda.synchronize()
    e1.record()
    e1.synchronize()
    us = e0.elapsed_time(e1) * 1e3 / n
    print("sustain cublaslt K=%d N=%d M=%d calls=%d us=%.1f TFLOP/s=%.0f" %
          (K, N, M, n, us, 2.0 * M * N * K / us * 1e-6), flush=True)


def plain(K, N, M, count):
    f = make(K, N, M)
    f()
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("probe"):  # ncu --nvtx --nvtx-include probe/ profiles these only
        for _ in range(count):
            f()
        torch.cuda.synchronize()


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "names"
    if cmd == "names":
        names()
    elif cmd == "sustain":
        sustain(*(int(v) for v in sys.argv[2:5]), float(sys.argv[5]))
    elif cmd == "plain":
        plain(*(int(v) for v in sys.argv[2:6]))
    else:
        raise SystemExit(__doc__)

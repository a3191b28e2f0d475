#!/usr/bin/env python3
"""mixq's FP8 block linear and cuBLASLt's block-scaled FP8 GEMM timed by one harness, settled alike.

mixq: `mixq.linear(x, w)` with DeepSeek-style FP8 weights (e4m3, one f32 scale per 128 x 128
block, `fp8b128`, act `fp8-block`): the bf16 x is quantized to e4m3 per 1 x 128 inside the call,
bf16 out. cuBLASLt: `torch._scaled_mm` on pre-quantized e4m3 inputs with 1 x 128 / 128 x 128 f32
scales, bf16 out: the GEMM alone.

Both are timed the same way, in the same process: a CUDA graph of >= 10 calls that rotate over
enough weight copies to keep the weights >= 4x the L2 (cold), the median of 7 replays; before each
case its own calls run untimed for --settle-ms (the clocks of sustained load, as `mixq bench`
settles: docs/decisions/bench-settle.md). --settle-ms 0,200 times every case both ways, so the
effect of the settling on each side shows in one run.

    python3 bench/fp8_block_vs_cublaslt.py --shapes 16384x7168,1536x24576 --m 2048,4096 --json out.json
"""
import argparse
import json
import math

import torch

import mixq
from torch_settle import settle


def time_graph(calls, settle_ms):
    """Median µs per call of a graph of `calls` (zero-argument callables), after settle_ms of them."""
    for c in calls[:3]:
        c()
    torch.cuda.synchronize()
    settle(calls, settle_ms)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / len(calls))
    ts.sort()
    return ts[len(ts) // 2]


def copies(weight_bytes):
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    return int(min(16, max(1, math.ceil(4 * l2 / max(weight_bytes, 1)))))


def mixq_calls(M, K, N):
    torch.manual_seed(0)
    qw = mixq.quantize(torch.randn(N, K) * 0.05, "fp8b128")
    pws = [mixq.prepare(qw, backend="cuda", act="fp8-block", device=0)
           for _ in range(copies(N * K))]
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ws = torch.empty(max(1, mixq.workspace_size(pws[0], M)), device="cuda", dtype=torch.uint8)
    calls = [(lambda pw=pws[i % len(pws)]: mixq.linear(x, pw, out=y, workspace=ws))
             for i in range(max(10, len(pws)))]
    return calls, mixq.kernel_name(pws[0], M, "bfloat16")


def cublaslt_calls(M, K, N):
    """torch._scaled_mm's block-scaled convention in torch 2.11: the activation scales [M][K/128]
    column-major, the weight scales [N/128][K/128] passed transposed. Checked against a float
    reference first."""
    def call(a8, w8, sa, sb):
        return torch._scaled_mm(a8, w8.t(), sa.t().contiguous().t(), sb.t(), out_dtype=torch.bfloat16)

    m, k, n = 256, 512, 384
    a8 = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w8 = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.rand(m, k // 128, device="cuda") + 0.5
    sb = torch.rand(n // 128, k // 128, device="cuda") + 0.5
    ref = (a8.float() * sa.repeat_interleave(128, 1)) @ (
        w8.float() * sb.repeat_interleave(128, 0).repeat_interleave(128, 1)).t()
    rel = ((call(a8, w8, sa, sb).float() - ref).norm() / ref.norm()).item()
    if rel > 2e-2:
        raise RuntimeError(f"torch._scaled_mm block scaling: relative error {rel:.3e} on the probe")
    nrot = copies(N * K)
    ws = [torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn) for _ in range(nrot)]
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.rand(M, (K + 127) // 128, device="cuda") + 0.5
    sb = torch.rand((N + 127) // 128, (K + 127) // 128, device="cuda") + 0.5
    return [(lambda w=ws[i % nrot]: call(a, w, sa, sb)) for i in range(max(10, nrot))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="16384x7168,1536x24576,14336x21504,8192x57344", help="KxN list")
    ap.add_argument("--m", default="2048,4096")
    ap.add_argument("--settle-ms", default="0,200")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    settles = [int(s) for s in a.settle_ms.split(",")]
    rows = []
    dev = torch.cuda.get_device_properties(0)
    print(f"{dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}")
    print("K x N        M  settle_ms  mixq_us  cublaslt_us  cublaslt/mixq  mixq_kernel")
    for shape in a.shapes.split(","):
        K, N = (int(v) for v in shape.split("x"))
        for M in (int(m) for m in a.m.split(",")):
            mq, kernel = mixq_calls(M, K, N)
            lt = cublaslt_calls(M, K, N)
            for settle in settles:  # the two sides alternate, each settled on its own calls
                t_m = time_graph(mq, settle)
                t_l = time_graph(lt, settle)
                rows.append({"K": K, "N": N, "M": M, "settle_ms": settle, "mixq_us": round(t_m, 2),
                             "cublaslt_us": round(t_l, 2), "ratio": round(t_l / t_m, 3),
                             "mixq_kernel": kernel})
                print(f"{K:>5}x{N:<6} {M:>5} {settle:>9} {t_m:>8.1f} {t_l:>12.1f} {t_l / t_m:>14.3f}  {kernel}",
                      flush=True)
            del mq, lt
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": dev.name, "torch": torch.__version__, "command": vars(a), "rows": rows},
                      fh, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torch._grouped_mm (BF16) on the MoE layers of `mixq bench --op moe`: the peer of its grouped GEMMs.

For each model and token count, routes T tokens uniformly to top-k distinct experts (the bench's
`uniform` routing), and times the two grouped GEMMs of the expert MLP on the sorted rows:
gate+up (N = 2 * intermediate, K = hidden) and down (N = hidden, K = intermediate), with BF16
expert weights [E][N][K] (fresh weights per call beyond L2: cold), median of --reps CUDA-event
timings, each case after --settle-ms of its own untimed calls (default 200, as `mixq bench`).
Prints a table and writes JSON (--json).
--dtype fp8: torch._scaled_grouped_mm instead (e4m3 activations and weights, f32 scales per row of X
and per output column of each expert, bf16 out: the FP8 grouped GEMM torch ships; its scales are
per row / column, not DeepSeek-V3's 1x128 / 128x128 blocks, so it does less work per element than a
block-scaled GEMM).

    python3 bench/torch_grouped_mm_peer.py --models deepseek-v3 --m 1,64,4096 --json peer.json
"""
import argparse
import json

import torch
from torch_settle import settle

MODELS = {  # experts, top-k, hidden, intermediate (tools/mixq/bench_moe.cpp)
    "deepseek-v3": (256, 8, 7168, 2048),
    "qwen3-30b-a3b": (128, 8, 2048, 768),
    "mixtral-8x7b": (8, 2, 4096, 14336),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--m", default="1,8,64,512,4096", help="tokens per batch")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp8"])
    ap.add_argument("--settle-ms", type=int, default=200,
                    help="each case's own calls replayed untimed for this long before it is timed, "
                         "as `mixq bench` does (the clocks of sustained load); 0: none")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []
    for name in a.models.split(","):
        E, k, H, I = MODELS[name]
        for T in (int(t) for t in a.m.split(",")):
            g = torch.Generator(device="cuda").manual_seed(1)
            ids = torch.rand(T, E, device="cuda", generator=g).topk(k, dim=1).indices.flatten()
            offs = torch.cumsum(torch.bincount(ids, minlength=E), 0).to(torch.int32)
            R = int(offs[-1])
            for proj, N, K in (("gate_up", 2 * I, H), ("down", H, I)):
                # two weight copies alternate when one does not exceed the 50 MB L2 four times over
                fp8 = a.dtype == "fp8"
                esize = 1 if fp8 else 2
                copies = 1 if E * N * K * esize > 200e6 else 2
                if fp8:
                    ws = [torch.randn(E, N, K, device="cuda").to(torch.float8_e4m3fn).transpose(1, 2)
                          for _ in range(copies)]
                    x = torch.randn(R, K, device="cuda").to(torch.float8_e4m3fn)
                    sa = torch.ones(R, device="cuda", dtype=torch.float32)
                    sb = torch.ones(E, N, device="cuda", dtype=torch.float32)

                    def mm(w):
                        return torch._scaled_grouped_mm(x, w, sa, sb, offs=offs, out_dtype=torch.bfloat16)
                else:
                    ws = [torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
                          for _ in range(copies)]
                    x = torch.randn(R, K, device="cuda", dtype=torch.bfloat16)

                    def mm(w):
                        return torch._grouped_mm(x, w, offs=offs)
                row = {"model": name, "tokens": T, "proj": proj, "N": N, "K": K, "rows": R, "dtype": a.dtype}
                try:
                    for w in ws:
                        mm(w)
                    torch.cuda.synchronize()
                    settle([lambda w=w: mm(w) for w in ws], a.settle_ms)
                    times = []
                    for r in range(a.reps):
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        mm(ws[r % copies])
                        e.record()
                        torch.cuda.synchronize()
                        times.append(s.elapsed_time(e) * 1e3)
                    us = sorted(times)[len(times) // 2]
                    row.update(us=us, tflop_per_s=2 * R * N * K / us / 1e6)
                    print(f"{name:14s} T={T:5d} {proj:8s} N={N:5d} K={K:5d} rows={R:6d} {us:9.1f} us "
                          f"{row['tflop_per_s']:7.1f} TFLOP/s", flush=True)
                except Exception as ex:  # a shape the peer does not take: recorded, not fatal
                    row["error"] = str(ex)[:300]
                    print(f"{name:14s} T={T:5d} {proj:8s} error: {row['error']}", flush=True)
                rows.append(row)
                del ws, x
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

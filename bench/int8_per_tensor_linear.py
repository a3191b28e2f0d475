#!/usr/bin/env python3
"""Times the INT8 per-tensor linear (int8 activations and weights, int8 output requantized
exactly as the float64 reference) on the GPU against cuBLASLt's s8 GEMM (`torch._int_mm`, int32
output) and cuBLAS FP16 (`torch.nn.functional.linear`), in the same process.

Each time is the median of --reps calls with a cold L2 (CUDA events around one call after a
256 MB fill). mixq runs the kernel its planner picks, and each --force kernel beside it.

    python3 bench/int8_per_tensor_linear.py --json out.json
    python3 bench/int8_per_tensor_linear.py --m 256,4096 --k 4096 --n 11008
"""
import argparse
import json

import torch
import torch.nn.functional as F

import mixq
from mixq.bench_conv import cold_time_us, flush_buffer


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", default="256,1024,4096,16384", help="token counts")
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--force", default="sm80_i8_128x128,sm80_i8_64x64",
                    help="kernels also timed forced (comma-separated; empty: none)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    flush = flush_buffer(dev)
    K, N = a.k, a.n
    forced = [f for f in a.force.split(",") if f]
    w = torch.randn(N, K) * 0.05
    qw = mixq._mixq.quantize_int8_per_channel(w.numpy())

    def prep(force=""):
        # S_O: about 20 output codes per standard deviation of the accumulator
        return mixq.prepare(qw, backend="cuda", act="int8-per-tensor", input_quant=(0.05, 0),
                            output_quant=(0.05 * 0.05 * 64 * (K / 4096) ** 0.5, 0), force_kernel=force)

    weights = {f: prep(f) for f in [""] + forced}
    rows = []
    print("| M | kernel | mixq us | TOP/s | " + " | ".join(forced) + (" | " if forced else "")
          + "torch._int_mm s8 | cuBLAS fp16 |")
    print("|---:|---|---:|---:|" + "---:|" * len(forced) + "---:|---:|")
    for M in [int(v) for v in a.m.split(",")]:
        x = torch.randint(-128, 128, (M, K), dtype=torch.int8, device=dev)
        y = torch.empty(M, N, dtype=torch.int8, device=dev)
        t = {f: cold_time_us(lambda: mixq.linear(x, pw, out=y), flush, a.reps) for f, pw in weights.items()}
        wt = torch.randint(-128, 128, (N, K), dtype=torch.int8, device=dev).t()
        t_int_mm = cold_time_us(lambda: torch._int_mm(x, wt), flush, a.reps)
        xh = torch.randn(M, K, device=dev, dtype=torch.float16)
        wh = torch.randn(N, K, device=dev, dtype=torch.float16)
        t_fp16 = cold_time_us(lambda: F.linear(xh, wh), flush, a.reps)
        row = {"M": M, "K": K, "N": N, "kernel": weights[""].kernel_name(M), "mixq_us": t[""],
               "tops": 2 * M * N * K / t[""] / 1e6, "forced_us": {f: t[f] for f in forced},
               "int_mm_us": t_int_mm, "cublas_fp16_us": t_fp16}
        rows.append(row)
        cells = "".join(f" {t[f]:.1f} |" for f in forced)
        print(f"| {M} | {row['kernel']} | {t['']:.1f} | {row['tops']:.0f} |{cells} {t_int_mm:.1f} | {t_fp16:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "reps": a.reps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

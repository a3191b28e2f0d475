"""Quantized-weight conv2d on CUDA against cuDNN FP16, on ResNet-50's and a detection backbone's layers.

    python -m mixq.bench_conv                          # batch 1, 8, 32; W4, W8, INT8; print a table
    python -m mixq.bench_conv --batch 1 --json conv.json
    python -m mixq.bench_conv --conv 1,256,14,14,256,3,3,1,1   # N,Ci,H,W,Co,Kh,Kw,stride,pad

For every layer and batch, in one process on one GPU:
  cudnn   torch.nn.functional.conv2d on FP16 activations and weights, NCHW and channels_last
          (torch.backends.cudnn.benchmark on); the faster of the two is the baseline.
  W4/W8   mixq.conv2d, FP16 activations and output, NHWC and NCHW (the faster is reported, the
          layout named), weights quantized along Ci in blocks of 128 (g128; blocks of Ci where
          Ci < 128 or 128 does not divide Ci, per output channel for the 3-channel stem).
  I8      INT8 per-tensor conv (--bits i8): int8 activations (scale 0.05), int8 weights
          symmetric per output channel, int8 output requantized (O_q = M*(Acc32 + FusedBias)),
          NHWC and NCHW, the faster reported; against the same cuDNN FP16 time.
          --i8-kernels also times every INT8 kernel forced (NHWC; the Hopper wgmma kernel where
          Ci is a multiple of 128, or of 16 from 32 on with padded taps, and the device is sm_90)
          and prints them as a second table.
Each call is timed alone with CUDA events, after a 256 MB buffer is overwritten so that weights
and activations come from HBM (cold L2); the median of --reps calls is reported.
"""

import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

import mixq

# (name, Ci, H, Co, K, stride, pad): ResNet-50's distinct conv shapes (H = W)
RESNET50 = [
    ("3x3 64->64 @56", 64, 56, 64, 3, 1, 1),
    ("3x3 128->128 @28", 128, 28, 128, 3, 1, 1),
    ("3x3 256->256 @14", 256, 14, 256, 3, 1, 1),
    ("3x3 512->512 @7", 512, 7, 512, 3, 1, 1),
    ("1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0),
    ("1x1 2048->512 @7", 2048, 7, 512, 1, 1, 0),
    ("7x7/2 stem 3->64 @224", 3, 224, 64, 7, 2, 3),
]
# six of a modern detection backbone's (YOLOv8-s at 640 x 640): the stride-2 3x3 stem and
# downsamplers (few input channels, large images), a C2f bottleneck's 3x3, the SPPF's 1x1
DETECTION = [
    ("3x3/2 stem 3->32 @640", 3, 640, 32, 3, 2, 1),
    ("3x3/2 32->64 @320", 32, 320, 64, 3, 2, 1),
    ("3x3 64->64 @80", 64, 80, 64, 3, 1, 1),
    ("3x3/2 128->256 @80", 128, 80, 256, 3, 2, 1),
    ("3x3 256->256 @20", 256, 20, 256, 3, 1, 1),
    ("1x1 512->256 @20", 512, 20, 256, 1, 1, 0),
]


def flush_buffer(device):
    """A 256 MB buffer whose fill evicts the L2 before each timed call (cold_time_us)."""
    return torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=device)


def cold_time_us(fn, flush, reps):
    """Median GPU time of fn() over reps calls, each after overwriting the flush buffer."""
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        flush.fill_(1)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def _key(bits):
    return "i8" if bits == "i8" else f"w{bits}"


def _time_layouts(pw, x_nhwc, y_nhwc, x_nchw, y_nchw, stride, pad, flush, reps):
    """The conv's time with NHWC and with NCHW tensors (us)."""
    t_h = cold_time_us(lambda: mixq.conv2d(x_nhwc, pw, out=y_nhwc, stride=stride, padding=pad,
                                           layout="nhwc"), flush, reps)
    t_c = cold_time_us(lambda: mixq.conv2d(x_nchw, pw, out=y_nchw, stride=stride, padding=pad,
                                           layout="nchw"), flush, reps)
    return t_h, t_c


def _channel_block(ci, want=128):
    if ci % want == 0:
        return want
    if ci < want and ci % 16 == 0:
        return ci
    return 0  # per output channel


def _scheme(bits, ci, kh, kw):
    cb = _channel_block(ci)
    if cb == 0:
        return f"w{bits}pc", "pc"
    return f"w{bits}g{cb}", f"g{cb}"


def bench_layer(name, B, Ci, H, Co, K, stride, pad, reps, flush, schemes, i8_kernels=False):
    dev = torch.device("cuda")
    W = H
    torch.manual_seed(0)
    w = torch.randn(Co, Ci, K, K) * 0.05
    x = torch.randn(B, Ci, H, W, device=dev, dtype=torch.float16)
    w16 = w.to(dev, torch.float16)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    w_cl = w16.contiguous(memory_format=torch.channels_last)
    t_nchw = cold_time_us(lambda: F.conv2d(x, w16, stride=stride, padding=pad), flush, reps)
    t_cl = cold_time_us(lambda: F.conv2d(x_cl, w_cl, stride=stride, padding=pad), flush, reps)
    row = {"layer": name, "batch": B, "Ci": Ci, "H": H, "W": W, "Co": Co, "K": K,
           "stride": stride, "pad": pad, "cudnn_nchw_us": t_nchw, "cudnn_nhwc_us": t_cl,
           "cudnn_us": min(t_nchw, t_cl)}
    # mixq weights in KhKwCi order, so that blocks run along Ci
    w_khkwci = w.permute(0, 2, 3, 1).reshape(Co, -1).contiguous()
    x_nhwc = x.permute(0, 2, 3, 1).contiguous()
    Ho, Wo = mixq.conv2d_output_size(H, W, (K, K), stride, pad)
    ref = F.conv2d(x.float(), w.to(dev), stride=stride, padding=pad)
    for bits in schemes:
        if bits == "i8":
            row["i8"] = bench_int8(B, Ci, H, W, Co, K, stride, pad, w, w_khkwci, reps, flush,
                                   i8_kernels)
            continue
        scheme, block = _scheme(bits, Ci, K, K)
        qw = mixq.quantize(w_khkwci, scheme)
        pw = mixq.prepare(qw, backend="cuda", conv=(Ci, K, K), conv_order="khkwci")
        y_nhwc = torch.empty(B, Ho, Wo, Co, device=dev, dtype=torch.float16)
        y_nchw = torch.empty(B, Co, Ho, Wo, device=dev, dtype=torch.float16)
        t_h, t_c = _time_layouts(pw, x_nhwc, y_nhwc, x, y_nchw, stride, pad, flush, reps)
        # sanity: the quantized conv is close to the float one (quantization error only)
        err = ((y_nchw.float() - ref).norm() / ref.norm()).item()
        err_h = ((y_nhwc.permute(0, 3, 1, 2).float() - ref).norm() / ref.norm()).item()
        best = min(t_h, t_c)
        row[_key(bits)] = {"scheme": scheme, "block": block, "nhwc_us": t_h, "nchw_us": t_c,
                           "us": best, "layout": "nhwc" if t_h <= t_c else "nchw",
                           "speedup_vs_cudnn": row["cudnn_us"] / best,
                           "rel_err_vs_float": max(err, err_h),
                           "kernel": pw.kernel_name(B * Ho * Wo, "float16")}
    return row


# The INT8 per-tensor conv kernels force_kernel can name (the direct kernel takes any layout)
I8_KERNELS = ["sm80_i8_16x32", "sm80_i8_64x64", "sm80_i8_64x64_s3", "sm80_i8_128x128",
              "sm80_conv_igemm_64x64_i8", "sm90_i8_128x128", "sm90_i8_128x64",
              "sm90_i8_128x64_k2", "sm90_i8_128x64_k4", "sm90_i8_128x64_k8",
              "sm80_conv_stem_i8", "sm90_conv_stem_tma_i8"]


def _i8_kernel_runs(name, Ci):
    """Whether force_kernel=name can run this layer here (NHWC, 16-byte aligned x)."""
    hopper = torch.cuda.get_device_capability() == (9, 0)
    if name.startswith("sm90_i8_"):  # Ci a multiple of 128, or padded to one from 32 channels on
        hopper_ci = Ci % 128 == 0 or (Ci % 16 == 0 and Ci >= 32)
        return hopper_ci and hopper
    if "_stem_" in name:  # few input channels (an RGB stem); the TMA form on sm_90
        return Ci <= 4 and (hopper or "_tma_" not in name)
    return name == "sm80_conv_igemm_64x64_i8" or Ci % 16 == 0


def bench_int8(B, Ci, H, W, Co, K, stride, pad, w, w_khkwci, reps, flush, every_kernel=False):
    """The INT8 per-tensor conv with requantized int8 output, NHWC and NCHW; with every_kernel,
    also each kernel forced (NHWC) in "forced_us"."""
    dev = torch.device("cuda")
    kk = Ci * K * K
    s_in, z_in = 0.05, 0
    # about 20 output codes per standard deviation of the accumulator: few saturate
    s_out, z_out = 0.01 * math.sqrt(kk), 0
    qw = mixq._mixq.quantize_int8_per_channel(w_khkwci.numpy())

    def prep(force=""):
        return mixq.prepare(qw, backend="cuda", act="int8-per-tensor", conv=(Ci, K, K),
                            conv_order="khkwci", input_quant=(s_in, z_in),
                            output_quant=(s_out, z_out), force_kernel=force)

    pw = prep()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-128, 128, (B, Ci, H, W), generator=g, dtype=torch.int8).to(dev)
    x_nhwc = x.permute(0, 2, 3, 1).contiguous()
    Ho, Wo = mixq.conv2d_output_size(H, W, (K, K), stride, pad)
    y_nhwc = torch.empty(B, Ho, Wo, Co, device=dev, dtype=torch.int8)
    y_nchw = torch.empty(B, Co, Ho, Wo, device=dev, dtype=torch.int8)
    t_h, t_c = _time_layouts(pw, x_nhwc, y_nhwc, x, y_nchw, stride, pad, flush, reps)
    # sanity: the requantized output against the float conv of the same int8 input
    ref = F.conv2d((x.float() - z_in) * s_in, w.to(dev), stride=stride, padding=pad)
    err = max(((((y.float() - z_out) * s_out) - ref).norm() / ref.norm()).item()
              for y in (y_nchw, y_nhwc.permute(0, 3, 1, 2)))
    best = min(t_h, t_c)
    out = {"scheme": "i8 per-channel, int8 in/out", "block": "pc", "nhwc_us": t_h, "nchw_us": t_c,
           "us": best, "layout": "nhwc" if t_h <= t_c else "nchw", "rel_err_vs_float": err,
           "kernel": pw.kernel_name(B * Ho * Wo)}
    if every_kernel:
        out["forced_us"] = {}
        for name in I8_KERNELS:
            if _i8_kernel_runs(name, Ci):
                pf = prep(name)
                out["forced_us"][name] = cold_time_us(
                    lambda: mixq.conv2d(x_nhwc, pf, out=y_nhwc, stride=stride, padding=pad,
                                        layout="nhwc"), flush, reps)
    return out


def _parse_conv(spec):
    v = [int(t) for t in spec.split(",")]
    if len(v) != 9:
        raise SystemExit(f"--conv: expected N,Ci,H,W,Co,Kh,Kw,stride,pad, got {spec!r}")
    n, ci, h, w, co, kh, kw, s, p = v
    if h != w or kh != kw:
        raise SystemExit("--conv: this benchmark takes square inputs and kernels (H = W, Kh = Kw)")
    return n, (f"{kh}x{kw}/{s} {ci}->{co} @{h}", ci, h, co, kh, s, p)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", default="1,8,32", help="comma-separated batch sizes")
    ap.add_argument("--conv", action="append", default=[],
                    help="N,Ci,H,W,Co,Kh,Kw,stride,pad (repeatable; replaces the default set)")
    ap.add_argument("--bits", default="4,8,i8",
                    help="weight-only bits to run (4, 8) and i8 for the INT8 per-tensor conv")
    ap.add_argument("--i8-kernels", action="store_true",
                    help="with i8: also time every INT8 conv kernel forced (a second table)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_conv: no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    flush = flush_buffer("cuda")
    bits = [b if b == "i8" else int(b) for b in a.bits.split(",")]
    jobs = []
    if a.conv:
        jobs = [_parse_conv(c) for c in a.conv]
    else:
        jobs = [(int(b), l) for b in a.batch.split(",") for l in RESNET50 + DETECTION]
    rows = []
    for B, (name, ci, h, co, k, s, p) in jobs:
        row = bench_layer(name, B, ci, h, co, k, s, p, a.reps, flush, bits, a.i8_kernels)
        if "i8" in row:
            row["i8"]["speedup_vs_cudnn"] = row["cudnn_us"] / row["i8"]["us"]
        rows.append(row)
    dev = torch.cuda.get_device_name()
    print(f"# mixq conv2d vs cuDNN FP16 on {dev} (median of {a.reps}, cold L2, us)\n")
    head = "| layer | batch | cuDNN fp16 (best of NCHW / NHWC) |"
    sep = "|---|---:|---:|"
    for b in bits:
        tag = "I8" if b == "i8" else f"W{b}"
        head += f" {tag} (layout) | {tag} speedup |"
        sep += "---:|---:|"
    print(head)
    print(sep)
    for r in rows:
        line = f"| {r['layer']} | {r['batch']} | {r['cudnn_us']:.1f} |"
        for b in bits:
            m = r[_key(b)]
            line += f" {m['us']:.1f} ({m['layout']}, {m['block']}) | {m['speedup_vs_cudnn']:.2f}x |"
        print(line)
    for b in bits:
        sp = [r[_key(b)]["speedup_vs_cudnn"] for r in rows]
        print(f"\n{_key(b).upper()}: geomean speedup {math.exp(sum(math.log(x) for x in sp) / len(sp)):.2f}x, "
              f"min {min(sp):.2f}x, worst rel. error vs float conv "
              f"{max(r[_key(b)]['rel_err_vs_float'] for r in rows):.3g}")
    if a.i8_kernels and "i8" in bits:
        print("\n# every INT8 kernel forced (NHWC, us; - where it cannot run the layer)\n")
        print("| layer | batch | cuDNN fp16 | chosen | " + " | ".join(I8_KERNELS) + " |")
        print("|---|---:|---:|---|" + "---:|" * len(I8_KERNELS))
        for r in rows:
            forced = r["i8"]["forced_us"]
            cells = " | ".join(f"{forced[k]:.1f}" if k in forced else "-" for k in I8_KERNELS)
            print(f"| {r['layer']} | {r['batch']} | {r['cudnn_us']:.1f} | {r['i8']['kernel']} | {cells} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "reps": a.reps, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

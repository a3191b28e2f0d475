"""Front-end overhead benchmark: the host cost of mixq's Python and torch entry points over the
C++ call, and the kernel time of the torch op inside CUDA graphs against the C++ call captured
the same way.

    python -m mixq.bench_overhead                      # cuda when available, else cpu
    python -m mixq.bench_overhead --json overhead.json --shapes 4096x4096,4096x14336

Host time per call (microseconds, best of --reps batches of --calls calls; on CUDA the batches
only enqueue, and the synchronisation between batches is not counted):
  cpp           mixq::linear in a C++ loop on views made once (the floor)
  core          mixq.linear(x, prepared, out=y)  (DLPack views each call)
  op            torch.ops.mixq.linear(x, handle, None, -inf, inf)  (dispatcher + output alloc)
  module        QuantLinear(x) in eager mode (what a model runs)
  dense         torch.nn.functional.linear with the dense weight (for scale)
The floors torch itself puts under any op or module (what mixq cannot remove from Python):
  empty         torch.empty of the output alone
  floor_op      an op of the same schema, defined the same way, whose kernel only allocates the
                output (dispatcher + Python kernel + allocation)
  floor_module  an nn.Module whose forward only allocates the output
mixq's own cost above them: op - floor_op - cpp, module - floor_module - cpp.
Graph kernel time per call (CUDA): the op and the C++ call each captured `--graph-calls` times in a
CUDA graph, cycling over enough weight copies that each call reads its weight from HBM (cold L2),
replayed and timed with events.

    python -m mixq.bench_overhead --conv              # the same for convolutions instead

--conv: the ResNet-50 layers of mixq.bench_conv (stem excluded) at --batch (default 1), W4 with
blocks along Ci, host time per call of mixq.conv2d (core, NHWC views), QuantConv2d on a
contiguous and on a channels_last input (module, module_cl; the raw-pointer op kernel) and
torch.nn.functional.conv2d on the dense weight in both formats (dense, dense_cl).
"""

import argparse
import json
import math
import sys
import time

import torch

import mixq
import mixq.torch as mt
from mixq import _mixq
from mixq.torch import ops as _ops

_INF = math.inf


def _host_us(fn, calls, reps, sync):
    fn()
    sync()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - t0)
        sync()
    return best / calls * 1e6


def _cpp_host_us(x, pw, y, stream, ws, calls, reps, sync):
    _mixq.host_time_linear(x, pw, y, stream, ws, 1)
    sync()
    best = math.inf
    for _ in range(reps):
        best = min(best, _mixq.host_time_linear(x, pw, y, stream, ws, calls))
        sync()
    return best / calls * 1e6


def _graph_us(launch_one, n_calls, replays):
    """Kernel time per call of `n_calls` launches captured in one CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            launch_one(i)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n_calls):
            launch_one(i)
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = math.inf
    for _ in range(replays):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / n_calls)
    return best


_floor_lib = torch.library.Library("mixq_overhead_floor", "DEF")
_floor_lib.define("linear(Tensor x, int n, Tensor? bias, float clamp_lo, float clamp_hi) -> Tensor")


def _floor_kernel(x, n, bias, clamp_lo, clamp_hi):
    return torch.empty((x.shape[0], n), dtype=x.dtype, device=x.device)


_floor_lib.impl("linear", _floor_kernel, "CPU")
_floor_lib.impl("linear", _floor_kernel, "CUDA")


class _FloorModule(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return torch.empty((x.shape[0], self.n), dtype=x.dtype, device=x.device)


def run_shape(N, K, M, scheme, dtype, device, args):
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)
    w = torch.randn(N, K)
    lin = torch.nn.Linear(K, N, bias=False)
    with torch.no_grad():
        lin.weight.copy_(w)
    ql = mt.QuantLinear.from_linear(lin, scheme, device=device)
    x = torch.randn(M, K, device=device, dtype=dtype)
    y = torch.empty(M, N, device=device, dtype=dtype)
    pw, h = ql.prepared, ql.handle
    nws = pw.workspace_size(M)
    ws = torch.empty(nws, dtype=torch.uint8, device=device) if nws else None
    stream = torch.cuda.current_stream().cuda_stream if cuda else 0
    dense_w = lin.weight.detach().to(device=device, dtype=dtype)
    calls, reps = args.calls, args.reps
    row_dtype = str(dtype).replace("torch.", "")
    row = {"N": N, "K": K, "M": M, "scheme": scheme, "dtype": row_dtype,
           "device": str(device), "kernel": pw.kernel_name(M, row_dtype)}
    row["cpp_us"] = _cpp_host_us(x, pw, y, stream, ws, calls, reps, sync)
    row["core_us"] = _host_us(lambda: mixq.linear(x, pw, out=y, workspace=ws), calls, reps, sync)
    row["op_us"] = _host_us(lambda: torch.ops.mixq.linear(x, h, None, -_INF, _INF), calls, reps,
                            sync)
    with torch.no_grad():
        row["module_us"] = _host_us(lambda: ql(x), calls, reps, sync)
        row["dense_us"] = _host_us(lambda: torch.nn.functional.linear(x, dense_w), calls, reps,
                                   sync)
    row["empty_us"] = _host_us(lambda: torch.empty((M, N), dtype=dtype, device=device), calls,
                               reps, sync)
    row["floor_op_us"] = _host_us(
        lambda: torch.ops.mixq_overhead_floor.linear(x, N, None, -_INF, _INF), calls, reps, sync)
    floor_module = _FloorModule(N)
    row["floor_module_us"] = _host_us(lambda: floor_module(x), calls, reps, sync)
    row["op_overhead_us"] = row["op_us"] - row["cpp_us"]
    row["module_overhead_us"] = row["module_us"] - row["cpp_us"]
    row["op_above_floor_us"] = row["op_overhead_us"] - row["floor_op_us"]
    row["module_above_floor_us"] = row["module_overhead_us"] - row["floor_module_us"]
    if cuda and args.graph_calls:
        # Enough copies of the weight that the working set exceeds L2 (each call reads from HBM).
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        wbytes = max(1, N * K // 2 if "w4" in scheme else N * K)
        copies = max(2, math.ceil(3 * l2 / wbytes))
        copies = min(copies, 64)
        mods = [ql] + [mt.QuantLinear.from_linear(lin, scheme, device=device)
                       for _ in range(copies - 1)]
        ys = [torch.empty(M, N, device=device, dtype=dtype) for _ in range(copies)]
        wss = [torch.empty(nws, dtype=torch.uint8, device=device) if nws else None
               for _ in range(copies)]

        def op_call(i):
            m = mods[i % copies]
            torch.ops.mixq.linear(x, m.handle, None, -_INF, _INF)

        def cpp_call(i):
            m = mods[i % copies]
            _mixq.host_time_linear(x, m.prepared, ys[i % copies],
                                   torch.cuda.current_stream().cuda_stream, wss[i % copies], 1)

        n = copies * max(1, args.graph_calls // copies)
        row["graph_copies"] = copies
        row["graph_cpp_us"] = _graph_us(cpp_call, n, args.replays)
        row["graph_op_us"] = _graph_us(op_call, n, args.replays)
        row["graph_ratio"] = row["graph_op_us"] / row["graph_cpp_us"]
    return row


def run_conv(name, Ci, H, Co, K, pad, B, dtype, device, args):
    from mixq.bench_conv import _scheme
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(Ci, Co, K, padding=pad, bias=False).to(device)
    scheme, _ = _scheme(4, Ci, K, K)
    qc = mt.QuantConv2d.from_conv(conv, scheme, device=device)
    x = torch.randn(B, Ci, H, H, device=device, dtype=dtype)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    x_nhwc = x_cl.permute(0, 2, 3, 1)
    y_nhwc = torch.empty(B, H, H, Co, device=device, dtype=dtype)
    dense_w = conv.weight.detach().to(dtype)
    dense_w_cl = dense_w.contiguous(memory_format=torch.channels_last)
    calls, reps = args.calls, args.reps
    row = {"layer": name, "batch": B, "scheme": scheme, "dtype": str(dtype).replace("torch.", ""),
           "device": str(device), "kernel": qc.kernel_name(B * H * H)}
    row["core_us"] = _host_us(lambda: mixq.conv2d(x_nhwc, qc.prepared, out=y_nhwc, padding=pad,
                                                  layout="nhwc"), calls, reps, sync)
    with torch.no_grad():
        row["module_us"] = _host_us(lambda: qc(x), calls, reps, sync)
        row["module_cl_us"] = _host_us(lambda: qc(x_cl), calls, reps, sync)
        row["dense_us"] = _host_us(lambda: torch.nn.functional.conv2d(x, dense_w, padding=pad),
                                   calls, reps, sync)
        row["dense_cl_us"] = _host_us(
            lambda: torch.nn.functional.conv2d(x_cl, dense_w_cl, padding=pad), calls, reps, sync)
    return row


def main_conv(args, device, dtype):
    from mixq.bench_conv import RESNET50
    rows = []
    for B in (int(v) for v in args.batch.split(",")):
        for name, Ci, H, Co, K, stride, pad in RESNET50:
            if stride != 1:
                continue  # the stem: per-channel weights on 3 channels, the sm_80 kernel
            r = run_conv(name, Ci, H, Co, K, pad, B, dtype, device, args)
            rows.append(r)
            print(f"{name} batch {B} {r['scheme']}: core {r['core_us']:.2f}  module "
                  f"{r['module_us']:.2f}  module_cl {r['module_cl_us']:.2f}  dense "
                  f"{r['dense_us']:.2f}  dense_cl {r['dense_cl_us']:.2f} us", flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="default: cuda when available")
    p.add_argument("--shapes", default="4096x4096,4096x14336",
                   help="KxN list (K inputs, N outputs), as mixq bench --shapes")
    p.add_argument("--m", default="1,16")
    p.add_argument("--schemes", default="w4g128,w8g128")
    p.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    # Short batches: a few hundred queued launches (each with kilobytes of parameters) fill the
    # launch queue, and the host then waits for the GPU, which would time kernels, not calls.
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--graph-calls", type=int, default=256)
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--conv", action="store_true", help="convolutions instead (see above)")
    p.add_argument("--batch", default="1", help="--conv: comma-separated batch sizes")
    args = p.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available()
                                          and mixq.cuda_available() else "cpu"))
    dtype = getattr(torch, args.dtype) if args.dtype else (
        torch.bfloat16 if device.type == "cuda" else torch.float32)
    rows = main_conv(args, device, dtype) if args.conv else []
    for shape in ([] if args.conv else args.shapes.split(",")):
        K, N = (int(v) for v in shape.split("x"))
        for scheme in args.schemes.split(","):
            for M in (int(v) for v in args.m.split(",")):
                r = run_shape(N, K, M, scheme, dtype, device, args)
                rows.append(r)
                g = (f"  graph op {r['graph_op_us']:.2f} us vs cpp {r['graph_cpp_us']:.2f} us "
                     f"({(r['graph_ratio'] - 1) * 100:+.1f}%)") if "graph_op_us" in r else ""
                print(f"{K}x{N} {scheme} M={M}: cpp {r['cpp_us']:.2f}  core {r['core_us']:.2f}  "
                      f"op {r['op_us']:.2f} (+{r['op_overhead_us']:.2f})  module "
                      f"{r['module_us']:.2f} (+{r['module_overhead_us']:.2f})  dense "
                      f"{r['dense_us']:.2f}  floors: empty {r['empty_us']:.2f} op "
                      f"{r['floor_op_us']:.2f} module {r['floor_module_us']:.2f}  above floor: "
                      f"op {r['op_above_floor_us']:+.2f} module {r['module_above_floor_us']:+.2f}"
                      f" us{g}", flush=True)
    out = {"command": " ".join(["python -m mixq.bench_overhead"] + (argv or sys.argv[1:])),
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()

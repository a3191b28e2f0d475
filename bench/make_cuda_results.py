"""Turns `mixq bench --backend cuda --json` outputs (f16 and bf16) and the tinygemm peer JSON of the
same device run into bench/results/cuda_weight_only.md.

  RESULTS_DATE=YYYY-MM-DD python3 bench/make_cuda_results.py bench/results > bench/results/cuda_weight_only.md

RESULTS_DIR holds cuda_weight_only_f16.json, cuda_weight_only_bf16.json (the two mixq bench runs)
and cuda_peers_tinygemm.json (peers.py's torch int4 tinygemm); RESULTS_DATE is the day of the
measurement, RESULTS_NOTE overrides the sentence about how the runs were made; RESULTS_TINY_COMMAND
and RESULTS_TINY_NOTE give the tinygemm run's command and where it ran.
"""
import json
import os
import sys

from result_tables import index, marlin_h100, read_ceiling_tbs

d = sys.argv[1]
F16, BF16, PEERS = "cuda_weight_only_f16.json", "cuda_weight_only_bf16.json", "cuda_peers_tinygemm.json"
f16 = json.load(open(os.path.join(d, F16)))
bf16 = json.load(open(os.path.join(d, BF16)))
peer_path = os.path.join(d, PEERS)
peers = json.load(open(peer_path)) if os.path.exists(peer_path) else {"rows": []}
tiny = {(r["K"], r["N"], r["M"]): r.get("torch_tinygemm_w4g128_bf16") for r in peers["rows"]}

# Marlin W4 g128 FP16 on the H100 (anchors.md): shown for orientation only.
MARLIN = marlin_h100()

a, b = index(f16), index(bf16)
dev = f16["device"]
ceiling_tbs = read_ceiling_tbs(dev)

print("# CUDA weight-only linear: measured results\n")
print("Device: %s\n" % dev)
NOTE = os.environ.get("RESULTS_NOTE", "the two mixq bench runs back to back on one GPU; "
                      "`peers/peers.py` is the peer harness (shared/bench/peers.py)")
if os.environ.get("RESULTS_DATE"):
    print("Date of the measurement: %s\n" % os.environ["RESULTS_DATE"])
print("Commands (%s):\n" % NOTE)
print("```\n%s\n%s\n%s\n```\n" % (
    f16["command"], bf16["command"],
    os.environ.get("RESULTS_TINY_COMMAND",
                   "OUT=... TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 "
                   "python3 peers/peers.py   # shared/bench/peers.py (torch int4 tinygemm, BF16)")))
print(("Times in µs per call: median of 7 CUDA-graph replays of >= 10 calls rotating over enough "
      "prepared weight copies for >= 4x L2 (cold L2). `x` columns are cuBLAS time / mixq time "
      "(> 1: mixq faster), cuBLAS timed on its own in the same run (the JSON also holds "
      "`paired_baseline_us`, cuBLAS replayed alternately with each row, a few percent slower). "
      "`%%ceil` is the W4 weight stream (bytes of codes + scales) as a fraction of the "
      "streaming-read ceiling measured in the same run (%.2f TB/s). tinygemm is " +
      os.environ.get("RESULTS_TINY_NOTE", "from its own earlier run on the same kind of GPU") +
      " (`cuda_peers_tinygemm.json`); Marlin figures are from anchors.md "
      "(H100), not from this run.\n") % (ceiling_tbs or 0))
shapes = []
for r in f16["results"]:
    if (r["K"], r["N"]) not in shapes:
        shapes.append((r["K"], r["N"]))
hdr = ("| K×N | M | cuBLAS FP16 | mixq W4 FP16 | x | %ceil | mixq W8 FP16 | x | cuBLAS BF16 | "
       "mixq W4 BF16 | x | mixq W8 BF16 | tinygemm W4 BF16 | Marlin W4 (H100) | kernel (W4 FP16) |")
print(hdr)
print("|" + "---|" * (hdr.count("|") - 1))
for (K, N) in shapes:
    ms = sorted({r["M"] for r in f16["results"] if r["K"] == K and r["N"] == N})
    for M in ms:
        def t(ix, s):
            r = ix.get((s, K, N, M))
            return r["time_us"] if r and r.get("time_us") else None
        c16, w4, w8 = t(a, "dense"), t(a, "w4g128"), t(a, "w8g128")
        cb, w4b, w8b = t(b, "dense"), t(b, "w4g128"), t(b, "w8g128")
        # the cuBLAS time each mixq row is compared with: the baseline timed on its own (the
        # layer's dense row of the same run)
        def base(ix, s, dense):
            r = ix.get((s, K, N, M))
            return r.get("baseline_us") or dense if r else dense
        c16_4, c16_8 = base(a, "w4g128", c16), base(a, "w8g128", c16)
        cb_4, cb_8 = base(b, "w4g128", cb), base(b, "w8g128", cb)
        r4 = a.get(("w4g128", K, N, M))
        ceil = ""
        if r4 and ceiling_tbs and M <= 16:
            ceil = "%.0f%%" % (100 * r4["weight_bytes"] / (r4["time_us"] * 1e-6) / (ceiling_tbs * 1e12))
        f = lambda v: "%.1f" % v if v else "–"
        x = lambda c, v: "%.2f" % (c / v) if c and v else "–"
        tg = tiny.get((K, N, M))
        print("| %dx%d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            K, N, M, f(c16_4), f(w4), x(c16_4, w4), ceil, f(w8), x(c16_8, w8), f(cb_4), f(w4b), x(cb_4, w4b),
            f(w8b), f(tg), f(MARLIN.get((K, N, M))), r4["kernel"] if r4 else ""))
bad = [r for rep in (f16, bf16) for r in rep["results"] if not r.get("ok", True)]
print("\nRows outside their error tolerance: %d of %d." % (
    len(bad), len(f16["results"]) + len(bf16["results"])))

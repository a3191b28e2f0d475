"""Turns the `mixq bench --backend cuda` JSON of the online-activation-quantization schemes
(fp8b128:fp8, w8g128:int8) and peers.py JSON into bench/results/act_quant_gemms/README.md tables,
plus (when act_quant_bench.json is there) the standalone quantizer bandwidth table of
build/cuda_act_quant_bench.

  python3 bench/make_act_quant_results.py bench/results/act_quant_gemms > bench/results/act_quant_gemms/tables.md
"""
import json
import os
import sys

d = sys.argv[1]
fp8 = json.load(open(os.path.join(d, "act_bench.json")))
peers = json.load(open(os.path.join(d, "peers_fp8.json")))
int8 = json.load(open(os.path.join(d, "int8_anchor_layers.json")))
int8_peers = json.load(open(os.path.join(d, "..", "cuda_int8", "peers_all.json")))


def peer_index(p):
    return {(r["K"], r["N"], r["M"]): r for r in p["rows"]}


P, P8 = peer_index(peers), peer_index(int8_peers)
f = lambda v: "%.1f" % v if v else "–"
x = lambda peer, ours: "%.2f" % (peer / ours) if peer and ours else "–"

print("## FP8 block (1x128 activations, 128x128 weights) and INT8 W8A8 g128, activation "
      "quantization inside the timed call\n")
print("Device: %s\n\n```\n%s\nOUT=... TAG=fp8 CEIL=1 OPS=cublas_fp8_block128,cublas_int8,cublas_fp16 "
      "MS=16,2048,4096 SHAPES=16384x7168,1536x24576,14336x21504,8192x57344 python3 peers/peers.py\n```\n"
      % (fp8["device"], fp8["command"]))
print("Same device call. Ceilings of that call: %s. cuBLASLt block-scaled FP8 needs M %% 16 == 0 "
      "(peers.py pads M = 1 to 16). `x` = peer time / mixq time (> 1: mixq faster).\n"
      % json.dumps({k: round(v, 1) for k, v in peers["ceilings"].items()}))
print("| K×N | M | mixq FP8 µs | TFLOP/s | kernel | cuBLASLt FP8 block µs | x | mixq INT8 µs | kernel "
      "| cuBLAS INT8 µs | x | cuBLAS FP16 µs | FP8 x | INT8 x |")
print("|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
idx = {(r["scheme"], r["K"], r["N"], r["M"]): r for r in fp8["results"]}
shapes = []
for r in fp8["results"]:
    if (r["K"], r["N"]) not in shapes:
        shapes.append((r["K"], r["N"]))
for (K, N) in shapes:
    for M in sorted({r["M"] for r in fp8["results"] if (r["K"], r["N"]) == (K, N)}):
        a, b = idx.get(("fp8b128:fp8", K, N, M)), idx.get(("w8g128:int8", K, N, M))
        pr = P.get((K, N, max(M, 16)), {})
        ta, tb = a and a["time_us"], b and b["time_us"]
        print("| %dx%d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            K, N, M, f(ta), "%.0f" % a["tflop_per_s"] if a else "–", a["kernel"] if a else "",
            f(pr.get("cublas_fp8_block128")), x(pr.get("cublas_fp8_block128"), ta), f(tb),
            b["kernel"] if b else "", f(pr.get("cublas_int8")), x(pr.get("cublas_int8"), tb),
            f(pr.get("cublas_fp16")), x(pr.get("cublas_fp16"), ta), x(pr.get("cublas_fp16"), tb)))
bad = [r for r in fp8["results"] + int8["results"] if not r.get("ok", True)]
print("\n## INT8 W8A8 g128 on the nine anchor layers (activation quantization included)\n")
print("```\n%s\n```\n" % int8["command"])
print("cuBLAS FP16 from the same call (`dense` rows of mixq bench); cuBLAS INT8 (torch._int_mm, no "
      "scales) from bench/results/cuda_int8/peers_all.json (an earlier call on an H200 of the same "
      "session).\n")
print("| K×N | M | mixq INT8 µs | TOP/s | cuBLAS FP16 µs | x FP16 (target ≥ 1.25) | cuBLAS INT8 µs | x INT8 (target ≥ 0.9) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
ii = {(r["scheme"], r["K"], r["N"], r["M"]): r for r in int8["results"]}
for r in int8["results"]:
    if r["scheme"] != "w8g128:int8":
        continue
    K, N, M = r["K"], r["N"], r["M"]
    dn = ii.get(("dense", K, N, M))
    pi = P8.get((K, N, M), {})
    print("| %dx%d | %d | %s | %.0f | %s | %s | %s | %s |" % (
        K, N, M, f(r["time_us"]), r["tflop_per_s"], f(dn and dn["time_us"]),
        x(dn and dn["time_us"], r["time_us"]), f(pi.get("cublas_int8")),
        x(pi.get("cublas_int8"), r["time_us"])))
print("\nRows outside their error tolerance: %d." % len(bad))

aq_path = os.path.join(d, "act_quant_bench.json")
if os.path.exists(aq_path):
    aq = json.load(open(aq_path))
    print("\n## Activation quantizers alone vs the copy ceiling (issue #5 target: >= 80% on 4096x16384)\n")
    print("Device: %s. D2D copy ceiling %.1f GB/s (cudaMemcpyAsync of 256 MiB, read + write counted), "
          "same process. Bytes = x read + codes written + meta written (4 B per block FP8, 12 B INT8); "
          "cold L2 (inputs rotated over >= 4x L2), median of CUDA-graph replays.\n"
          % (aq["device"], aq["copy_ceiling_gbs"]))
    print("```\n%s\n```\n" % aq.get("command", "cuda_act_quant_bench --json act_quant_bench.json"))
    print("| quantizer | act | M x K | us | GB/s | % copy |")
    print("|---|---|---|---:|---:|---:|")
    for r in aq["rows"]:
        print("| %s | %s | %dx%d | %.2f | %.0f | %.1f%% |" % (
            r["quant"], r["act"], r["M"], r["K"], r["us"], r["gbs"], r["pct_copy"]))

#!/usr/bin/env python3
"""The large-M and weight-only scorecard: every row that the FP8 block, INT8 W8A8 and weight-only
targets name (the nine layers of anchors.md and the FP8 shapes), mixq against the peers timed on
the same GPU machine, and how far each row is from its target.

  RESULTS_DATE=YYYY-MM-DD RESULTS_COMMIT=abc1234 python3 bench/make_scorecard.py DIR \
      --json bench/results/cuda_scorecard_h100.json > bench/results/cuda_scorecard_h100.md

DIR holds the outputs of one run (the commands are printed in the table's header):
  w8a8_big.json     mixq bench, FP8 block and INT8 g128 on the four FP8 shapes, M = 2048 / 4096
  int8_nine.json    mixq bench, INT8 g128 on the nine layers, M = 1024 / 4096
  peers_big.json    peers.py, cuBLASLt block FP8, _int_mm, cuBLAS FP16 on the four FP8 shapes
  peers_nine_int8.json  peers.py, _int_mm and cuBLAS FP16 on the nine layers, M = 1024 / 4096
  wo_f16.json, wo_bf16.json          mixq bench, W4 / W8 g128 on the nine layers + 4096x14336
                                     (or wo_f16_1.json, wo_f16_2.json, ...: the same in shape groups)
  wo3000_f16.json, wo3000_bf16.json  mixq bench, the M = 3000 rows
  peers_tinygemm.json (optional)     peers.py, torch's int4 tinygemm (bf16)
Marlin's W4 g128 FP16 times are anchors.md's (H100), not from the run.
"""
import argparse
import json
import os
import re
import sys

from result_tables import index, marlin_h100, peer_index, read_ceiling_tbs

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--json", help="write every row and the per-target summary here")
p.add_argument("--settled", help="a second run's peers_big_settled.json, peers_nine_int8_settled.json, "
               "peers_tinygemm_settled.json (peers timed after settling, as mixq bench settles)")
a = p.parse_args()


def load(name, required=True):
    path = os.path.join(a.dir, name)
    if not os.path.exists(path):
        if required:
            sys.exit("make_scorecard: %s is missing" % path)
        return None
    return json.load(open(path))


big, int8_nine = index(load("w8a8_big.json")), index(load("int8_nine.json"))
peers = peer_index(load("peers_big.json"))
peers_nine = peer_index(load("peers_nine_int8.json"))
# the weight-only sweep may come in shape groups: wo_f16.json or wo_f16_1.json, wo_f16_2.json, ...
wo_files = {act: sorted(f for f in os.listdir(a.dir) if f.startswith("wo_%s" % act) and f.endswith(".json")
                        and f[len("wo_%s" % act)] in "._") + ["wo3000_%s.json" % act] for act in ("f16", "bf16")}
wo = {act: {k: v for f in files for k, v in index(load(f)).items()} for act, files in wo_files.items()}
tiny = peer_index(load("peers_tinygemm.json", required=False))
marlin = marlin_h100()
device = load(wo_files["f16"][0])["device"]
# the commands as run, their --json paths reduced to the file names DIR holds
commands = [re.sub(r"--json \S*/", "--json ", load(f)["command"])
            for f in ["w8a8_big.json", "int8_nine.json"] + wo_files["f16"] + wo_files["bf16"]]

out = {"device": device, "date": os.environ.get("RESULTS_DATE"), "commit": os.environ.get("RESULTS_COMMIT"),
       "commands": commands, "fp8": [], "int8": [], "weight_only": [], "summary": {}}
f1 = lambda v: "%.1f" % v if v else "–"
f2 = lambda v: "%.2f" % v if v else "–"
print("# Large-M FP8 / INT8 and weight-only rows against their peers: the scorecard (H100)\n")
print("Device: %s. Date: %s, commit %s.\n" % (device, out["date"] or "?", out["commit"] or "?"))
print("One H100 machine, in this order: the weight-only runs (f16, then bf16), the FP8 / INT8 runs, their "
      "peers, tinygemm. `peers/peers.py` is shared/bench/peers.py:\n\n```")
print("\n".join(commands[2:]))
print("\n".join(commands[:2]))
print("OUT=... TAG=big CEIL=0 OPS=cublas_fp8_block128,cublas_int8,cublas_fp16 MS=2048,4096 "
      "SHAPES=<the four FP8 shapes> python3 peers/peers.py")
print("OUT=... TAG=nine_int8 CEIL=0 OPS=cublas_int8,cublas_fp16 MS=1024,4096 SHAPES=<the nine layers> "
      "python3 peers/peers.py")
if tiny:
    print("OUT=... TAG=tinygemm CEIL=0 OPS=cublas_fp16,torch_tinygemm_w4g128_bf16 "
          "MS=1,...,4096 SHAPES=<the nine layers>,4096x14336 python3 peers/peers.py")
print("```\n")
print("Times are µs per call: the median of 7 CUDA-graph replays of >= 10 calls over rotating weight "
      "copies (cold L2). mixq's cases (and the cuBLAS baseline `mixq bench` times beside them) run "
      "200 ms of their own calls before they are timed, the clocks of sustained load; peers.py "
      "times the peers the same way in its own process, without that settling. mixq's FP8 "
      "and INT8 times include quantizing the bf16 activations; cuBLASLt's and `_int_mm`'s are the "
      "GEMM alone on pre-quantized inputs. `×` = peer µs / mixq µs (> 1: mixq faster).\n")

# ---- FP8 block
print("## FP8 block (1 × 128 activations, 128 × 128 weights), bf16 in and out\n")
print("Target: ≥ 1.10× cuBLASLt block-scaled FP8 on every row; ≥ 1300 TFLOP/s on 16384 × 7168.\n")
print("| K×N | M | mixq µs | TFLOP/s | cuBLASLt µs | × cuBLASLt | kernel |")
print("|---|---:|---:|---:|---:|---:|---|")
for (s, K, N, M), r in sorted(big.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3])):
    if s != "fp8b128:fp8":
        continue
    lt = peers.get((K, N, M), {}).get("cublas_fp8_block128")
    x = lt / r["time_us"] if lt else None
    out["fp8"].append({"K": K, "N": N, "M": M, "mixq_us": r["time_us"], "tflops": r["tflop_per_s"],
                       "cublaslt_us": lt, "x_cublaslt": x, "kernel": r["kernel"], "ok": r["ok"]})
    print("| %dx%d | %d | %s | %.0f | %s | %s | %s |" % (K, N, M, f1(r["time_us"]), r["tflop_per_s"], f1(lt),
                                                       f2(x), r["kernel"]))
fx = [e["x_cublaslt"] for e in out["fp8"] if e["x_cublaslt"]]
tf = [e["tflops"] for e in out["fp8"] if (e["K"], e["N"]) == (16384, 7168)]
out["summary"]["fp8"] = {"x_cublaslt_min": min(fx, default=None), "x_cublaslt_max": max(fx, default=None),
                         "rows_at_1.10": sum(v >= 1.10 for v in fx), "rows": len(fx),
                         "tflops_16384x7168_max": max(tf, default=None)}

# ---- INT8 g128
print("\n## INT8 W8A8 per block (w8g128:int8), bf16 activations\n")
print("Target: ≥ 1.25× cuBLAS FP16 and ≥ 0.95× `torch._int_mm` at M ≥ 1024 on the nine layers.\n")
print("`cuBLAS BF16` is timed inside `mixq bench`, settled like mixq (the JSON's `baseline_us`); the "
      "two FP8 shapes that are not among the nine layers are shown for reference and not counted.\n")
print("| K×N | M | mixq µs | cuBLAS FP16 µs | × FP16 | _int_mm µs | × _int_mm | cuBLAS BF16 µs | × BF16 | kernel |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
int8 = {k: v for k, v in {**big, **int8_nine}.items() if k[0] == "w8g128:int8"}
nine_layers = {(r["K"], r["N"]) for r in load("int8_nine.json")["results"]}
allpeers = {**peers_nine, **peers}
for (s, K, N, M), r in sorted(int8.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3])):
    pr = allpeers.get((K, N, M), {})
    fp16, imm = pr.get("cublas_fp16"), pr.get("cublas_int8")
    x16 = fp16 / r["time_us"] if fp16 else None
    xi = imm / r["time_us"] if imm else None
    bf = r.get("baseline_us")
    xb = bf / r["time_us"] if bf else None
    target = (K, N) in nine_layers and M >= 1024
    out["int8"].append({"K": K, "N": N, "M": M, "mixq_us": r["time_us"], "cublas_fp16_us": fp16, "x_fp16": x16,
                        "int_mm_us": imm, "x_int_mm": xi, "cublas_bf16_settled_us": bf, "x_bf16": xb,
                        "target_row": target, "kernel": r["kernel"], "ok": r["ok"]})
    print("| %dx%d%s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        K, N, "" if target else " (ref.)", M, f1(r["time_us"]), f1(fp16), f2(x16), f1(imm), f2(xi), f1(bf), f2(xb),
        r["kernel"]))
x16 = [e["x_fp16"] for e in out["int8"] if e["x_fp16"] and e["target_row"]]
xi = [e["x_int_mm"] for e in out["int8"] if e["x_int_mm"] and e["target_row"]]
out["summary"]["int8"] = {"x_fp16_min": min(x16, default=None), "x_fp16_max": max(x16, default=None),
                          "rows_at_1.25": sum(v >= 1.25 for v in x16), "x_int_mm_min": min(xi, default=None),
                          "x_int_mm_max": max(xi, default=None), "rows_at_0.95": sum(v >= 0.95 for v in xi),
                          "rows": len(x16)}

# ---- weight-only
print("\n## Weight-only W4 / W8 g128\n")
print("Target: ≥ 1.0× the best peer on every row: cuBLAS (FP16 for f16 activations, BF16 for bf16, "
      "timed on its own inside `mixq bench`), Marlin W4 FP16 (anchors.md, H100) and tinygemm W4 BF16 "
      "(this run). `best peer` names the fastest of those that run the row; `%ceil` = weight bytes / "
      "time / the run's streaming-read ceiling, at M ≤ 32; `/ read` = mixq time / a plain read of the "
      "same bytes (M = 1).\n")
print("| K×N | M | act | best peer | peer µs | W4 µs | × | W8 µs | × | W4 %ceil | W4 / read | W4 kernel |")
print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
ceiling = read_ceiling_tbs(device)
misses = {"f16": [], "bf16": []}
for act in ("f16", "bf16"):
    keys = sorted({(K, N, M) for (s, K, N, M) in wo[act] if s != "dense"})
    for (K, N, M) in keys:
        w4, w8 = wo[act].get(("w4g128", K, N, M)), wo[act].get(("w8g128", K, N, M))
        base = (w4 or w8).get("baseline_us") or (wo[act].get(("dense", K, N, M)) or {}).get("time_us")
        cands = {("cuBLAS FP16" if act == "f16" else "cuBLAS BF16"): base}
        if act == "f16" and (K, N, M) in marlin:
            cands["Marlin"] = marlin[(K, N, M)]
        if act == "bf16" and tiny.get((K, N, M), {}).get("torch_tinygemm_w4g128_bf16"):
            cands["tinygemm"] = tiny[(K, N, M)]["torch_tinygemm_w4g128_bf16"]
        cands = {k: v for k, v in cands.items() if v}
        name, best = min(cands.items(), key=lambda kv: kv[1]) if cands else ("–", None)
        # W8 is compared with the dense and W8-capable peers only (Marlin and tinygemm are 4-bit)
        best8 = (w8 or {}).get("baseline_us") or cands.get("cuBLAS FP16" if act == "f16" else "cuBLAS BF16")
        x4 = best / w4["time_us"] if w4 and best else None
        x8 = best8 / w8["time_us"] if w8 and best8 else None
        frac = w4["weight_bytes"] / (w4["time_us"] * 1e-6) / (ceiling * 1e12) if w4 and ceiling else None
        pct = "%.0f%%" % (100 * frac) if frac and M <= 32 else ""
        rd = "%.2f×" % (w4["time_us"] / w4["plain_read_us"]) if w4 and w4.get("plain_read_us") else ""
        e = {"K": K, "N": N, "M": M, "act": act, "best_peer": name, "best_peer_us": best, "peers": cands,
             "w4_us": w4 and w4["time_us"], "x_w4": x4, "w8_us": w8 and w8["time_us"], "x_w8": x8,
             "w4_kernel": w4 and w4["kernel"], "w8_kernel": w8 and w8["kernel"],
             "w4_plain_read_us": w4 and w4.get("plain_read_us"), "w4_fraction_of_ceiling": frac,
             "ok": bool((not w4 or w4["ok"]) and (not w8 or w8["ok"]))}
        out["weight_only"].append(e)
        for s, x in (("W4", x4), ("W8", x8)):
            if x is not None and x < 1.0:
                misses[act].append("%s %dx%d M=%d %.2f" % (s, K, N, M, x))
        print("| %dx%d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            K, N, M, act, name, f1(best), f1(w4 and w4["time_us"]), f2(x4), f1(w8 and w8["time_us"]), f2(x8),
            pct, rd, (w4 or {}).get("kernel", "")))
wox = [v for e in out["weight_only"] for v in (e["x_w4"], e["x_w8"]) if v is not None]
out["summary"]["weight_only"] = {"rows": len(wox), "rows_at_1.0": sum(v >= 1.0 for v in wox),
                                 "x_min": min(wox, default=None), "misses": misses}
# the decode sub-targets: M = 1 on 4096 x 4096 against a plain read of its bytes, and the mid-size
# layers (K, N of 4-14k) at M = 8-32 as a fraction of the streaming-read ceiling
m1 = [e["w4_us"] / e["w4_plain_read_us"] for e in out["weight_only"]
      if (e["K"], e["N"], e["M"]) == (4096, 4096, 1) and e["w4_plain_read_us"]]
mid_ceil = [e["w4_fraction_of_ceiling"] for e in out["weight_only"] if e["w4_fraction_of_ceiling"]
            and 4096 <= e["K"] <= 14336 and 4096 <= e["N"] <= 14336 and 8 <= e["M"] <= 32]
out["summary"]["decode"] = {"m1_4096x4096_over_plain_read": m1, "mid_size_m8_32_w4_fraction_of_ceiling":
                            [min(mid_ceil, default=None), max(mid_ceil, default=None)]}
bad = [e for grp in ("fp8", "int8", "weight_only") for e in out[grp] if not e["ok"]]
out["summary"]["rows_outside_tolerance"] = len(bad)

s = out["summary"]
print("\n## Against the targets\n")
print("- FP8: %d of %d rows at ≥ 1.10× cuBLASLt (%.2f-%.2f×); %.0f TFLOP/s at best on 16384 × 7168 (target 1300)." % (
    s["fp8"]["rows_at_1.10"], s["fp8"]["rows"], s["fp8"]["x_cublaslt_min"] or 0, s["fp8"]["x_cublaslt_max"] or 0,
    s["fp8"]["tflops_16384x7168_max"] or 0))
print("- INT8 g128: %d of %d rows at ≥ 1.25× cuBLAS FP16 (%.2f-%.2f×); %d at ≥ 0.95× `_int_mm` (%.2f-%.2f×)." % (
    s["int8"]["rows_at_1.25"], s["int8"]["rows"], s["int8"]["x_fp16_min"] or 0, s["int8"]["x_fp16_max"] or 0,
    s["int8"]["rows_at_0.95"], s["int8"]["x_int_mm_min"] or 0, s["int8"]["x_int_mm_max"] or 0))
print("- Weight-only: %d of %d W4 / W8 rows at ≥ 1.0× the best peer (lowest %.2f×). Rows below 1.0×, "
      "by M (count, lowest ×):" % (s["weight_only"]["rows_at_1.0"], s["weight_only"]["rows"], s["weight_only"]["x_min"] or 0))
bands = [(1, 64), (128, 256), (1024, 4096)]
print("\n  | act | scheme | M 1-64 | M 128-256 | M ≥ 1024 |\n  |---|---|---|---|---|")
for act in ("f16", "bf16"):
    for sch, key in (("W4", "x_w4"), ("W8", "x_w8")):
        cells = []
        for lo, hi in bands:
            xs = [e[key] for e in out["weight_only"] if e["act"] == act and lo <= e["M"] <= hi and e[key] is not None]
            below = [x for x in xs if x < 1.0]
            cells.append("%d of %d%s" % (len(below), len(xs), ", %.2f" % min(below) if below else ""))
        print("  | %s | %s | %s |" % (act, sch, " | ".join(cells)))
print()
print("- Decode: W4 at M = 1 on 4096 × 4096 takes %s (f16, bf16) a plain read of its bytes (target ≤ 1.2×); the "
      "mid-size layers (K, N of 4-14k) at M = 8-32 stream W4 at %.0f-%.0f%% of the read ceiling (target ≥ 85%%)." % (
          ", ".join("%.2f×" % v for v in m1) or "–", 100 * (min(mid_ceil, default=0)), 100 * (max(mid_ceil, default=0))))
print("- Rows outside their error tolerance: %d." % len(bad))
if a.settled:
    # the same peers on a second machine, each case settled first: the ratios with those times
    sp = lambda name: peer_index(json.load(open(os.path.join(a.settled, name))))
    big_s, nine_s, tiny_s = sp("peers_big_settled.json"), sp("peers_nine_int8_settled.json"), sp("peers_tinygemm_settled.json")
    def vs(peer_rows, op, entries, mixq_key):
        """peer µs / mixq µs on the entries the peer ran."""
        return [peer_rows[k][op] / e[mixq_key] for e in entries
                for k in [(e["K"], e["N"], e["M"])] if e[mixq_key] and peer_rows.get(k, {}).get(op)]

    both = {**nine_s, **big_s}
    targets = [e for e in out["int8"] if e["target_row"]]
    xs_lt = vs(big_s, "cublas_fp8_block128", out["fp8"], "mixq_us")
    xs16, xsi = vs(both, "cublas_fp16", targets, "mixq_us"), vs(both, "cublas_int8", targets, "mixq_us")
    xtg = vs(tiny_s, "torch_tinygemm_w4g128_bf16", [e for e in out["weight_only"] if e["act"] == "bf16"], "w4_us")
    out["settled_peers_second_machine"] = {"big": big_s and list(big_s.values()), "nine_int8": list(nine_s.values()),
                                           "tinygemm": list(tiny_s.values())}
    rng = lambda v: "%.2f-%.2f×" % (min(v), max(v)) if v else "–"
    print("- The peers again on a second H100, each case settled for 200 ms first (`bench/peers_settled.py`, "
          "as `mixq bench` settles mixq and cuBLAS), against this run's mixq times: FP8 %s cuBLASLt; INT8 %s cuBLAS FP16 and %s "
          "`_int_mm`; W4 bf16 %s tinygemm (JSON: `settled_peers_second_machine`). Two machines of one "
          "kind differ by up to ~8%% (`cuda_fp8_block.md`), so the same-run columns decide." % (
              rng(xs_lt), rng(xs16), rng(xsi), rng(xtg)))
print("\nWhere the cycles of the rows that miss go (ncu, A/B runs): FP8 `docs/decisions/fp8-block-gemm.md` "
      "and `cuda_fp8_block.md` (the GEMM kernel level with cuBLASLt's in cycles, both at ~80% of tensor "
      "peak; the quantizer and the clocks separate the calls; the wave-count rows); INT8 "
      "`docs/decisions/int8-block-gemm.md` (the per-block promotion); weight-only at M ≥ 128 "
      "`cuda_weight_only_ncu_h100.md` and `docs/decisions/wo-wgmma-*.md`; decode "
      "`docs/decisions/wo-stream-splits-cluster-pdl.md` and `cuda_weight_only_h200_decode.md`.")
# the FP8 / INT8 runs' own outputs (the weight-only ones are bench/results/cuda_weight_only_*.json)
out["raw"] = {f: load(f) for f in ("w8a8_big.json", "int8_nine.json", "peers_big.json", "peers_nine_int8.json")}
if a.json:
    with open(a.json, "w") as fh:
        json.dump(out, fh, indent=1)

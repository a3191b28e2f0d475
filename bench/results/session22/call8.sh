#!/usr/bin/env bash
# Session 22, call 8 (H100). As call 7 with a third binary: activation pieces of at least 8 chunks
# (p8: -DMIXQ_STREAM_X_MIN_PIECE=8, one piece for splits of <= 8 chunks) against p1 (call 5's
# code) and old (79ee3d6). Was: old against new streaming
# kernel in the probe, M = 1 (and 2, 4), W8 and W4 on the small and large layers, alternating
# processes twice: is W8 M = 1 slower on the small layers (the table says 4096x4096 10.7 -> 11.5 us
# across calls)? Binaries built here, both with:
#   nvcc -O3 -std=c++17 -DMIXQ_STREAM_DIAG -I bench -I src -I include -gencode=arch=compute_90a,code=sm_90a \
#        --expt-relaxed-constexpr bench/cuda_wo_stream_probe.cu -o build-gpu/wo_stream_probe_{old,p1,p8} [-DMIXQ_STREAM_X_MIN_PIECE=1|8]
# (old: from a worktree of 79ee3d6).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SMALL=4096x4096,4096x6144,14336x4096,8192x8192,8192x10240,4096x28672
for round in 1 2; do
  for v in old p1 p8; do
    for bits in 8 4; do
      echo "== round $round $v W$bits"
      timeout 60 build-gpu/wo_stream_probe_$v $SMALL,28672x8192 $bits 0 0 1,2,4
    done
  done
done > "$OUT/probe_old_new.txt" 2>&1
echo "rc=$?"
python3 - "$OUT/probe_old_new.txt" <<'PY'
import re, sys, collections
cur = None; res = collections.defaultdict(list); shape = None
for line in open(sys.argv[1]):
    m = re.match(r"== round (\d) (\w+) W(\d)", line)
    if m: cur = (m.group(2), m.group(3)); continue
    m = re.match(r"(\d+x\d+) W(\d) M=(\d+):", line)
    if m: shape = (m.group(1), int(m.group(3))); continue
    if line.startswith("full kernel"):
        v = [float(x) for x in line.split()[2:]]
        res[(cur[1], shape, cur[0])].append(min(v))  # the best mode (what the planner would pick)
vers = ["old", "p1", "p8"]
print("bits shape M  " + "  ".join(vers) + "  (min of modes and rounds)  p1/old  p8/p1")
keys = sorted({(b, sh) for (b, sh, v) in res})
for (bits, shape) in keys:
    t = {v: min(res[(bits, shape, v)]) for v in vers}
    print(f"W{bits} {shape[0]:>12} {shape[1]}  " + "  ".join(f"{t[v]:6.2f}" for v in vers) + f"  {t['p1']/t['old']:.3f}  {t['p8']/t['p1']:.3f}")
PY

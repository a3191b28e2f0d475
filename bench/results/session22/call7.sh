#!/usr/bin/env bash
# Session 22, call 7 (H100). Old (79ee3d6, session 21) against new (this session's) streaming
# kernel in the probe, M = 1 (and 2, 4), W8 and W4 on the small and large layers, alternating
# processes twice: is W8 M = 1 slower on the small layers (the table says 4096x4096 10.7 -> 11.5 us
# across calls)? Binaries built here, both with:
#   nvcc -O3 -std=c++17 -DMIXQ_STREAM_DIAG -I bench -I src -I include -gencode=arch=compute_90a,code=sm_90a \
#        --expt-relaxed-constexpr bench/cuda_wo_stream_probe.cu -o build-gpu/wo_stream_probe_{old,new}
# (old: from a worktree of 79ee3d6).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SMALL=4096x4096,4096x6144,14336x4096,8192x8192,8192x10240,4096x28672
for round in 1 2; do
  for v in old new; do
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
    m = re.match(r"== round (\d) (old|new) W(\d)", line)
    if m: cur = (m.group(2), m.group(3)); continue
    m = re.match(r"(\d+x\d+) W(\d) M=(\d+):", line)
    if m: shape = (m.group(1), int(m.group(3))); continue
    if line.startswith("full kernel"):
        v = [float(x) for x in line.split()[2:]]
        res[(cur[1], shape, cur[0])].append(min(v))  # the best mode (what the planner would pick)
print("bits shape M  old(min of modes, 2 rounds)  new  new/old")
for (bits, shape, ver) in sorted(res):
    if ver != "old": continue
    o = res[(bits, shape, "old")]; n = res[(bits, shape, "new")]
    print(f"W{bits} {shape[0]:>12} {shape[1]}  {' '.join(f'{x:6.2f}' for x in o)}  {' '.join(f'{x:6.2f}' for x in n)}  {min(n)/min(o):.3f}")
PY

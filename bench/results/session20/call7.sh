#!/usr/bin/env bash
# Session 20, call 7 (H100). Diagnostic build of the sweep (-DMIXQ_WS_DIAG_BUILD, built here:
#   cmake -S . -B build-diag -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON -DMIXQ_CUDA_ARCHS=90a \
#     "-DCMAKE_CUDA_FLAGS=-DMIXQ_WS_DIAG_BUILD" && cmake --build build-diag --target cuda_wo_sweep
#   tar -cJf build-diag/diag-sweep.tar.xz build-diag/cuda_wo_sweep)
# with the wgmma kernel's per-CTA timing log (%globaltimer at the consumers' start, first landed
# stage and end, and the SM; MIXQ_WS_CTA_LOG): which CTAs make the straggler tail between
# back-to-back calls, W4 g128 f16 M = 16 on 28672x8192 and 14336x21504 (inline reduction, the default).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" build-diag/diag-sweep.tar.xz || exit 1
for shape in 28672x8192 14336x21504; do
  MIXQ_WS_CTA_LOG="$OUT/cta_log_$shape.csv" timeout 120 build-diag/cuda_wo_sweep --shapes $shape --m 16 --schemes w4g128 \
    --act f16 --no-baseline > "$OUT/sweep_$shape.txt" 2>&1
  echo "$shape rc=$?"; tail -1 "$OUT/sweep_$shape.txt"; wc -l "$OUT/cta_log_$shape.csv"
done

#!/usr/bin/env bash
# One GPU-machine call for the FP8 block GEMM work: standalone harness (checks + timings), the
# project's GPU tests for Fp8Block, compute-sanitizer memcheck on a small subset, peers.
#   bash scripts/fp8_device.sh [harness] [tests] [peers]     (outputs to $OUT)
# Steps: build (ninja targets BUILD_TARGETS), tests (build + GPU tests + sanitizers), int8 (sweep),
# i8prof (ncu on the INT8 kernel), i8src (its stalls by SASS line), harness, prof, peers.
# Env: BNS / CLUSTERS (harness timing lists, default 128 / 1,2), GROUPS_ (raster groups), SANF
# (the gtest filter compute-sanitizer runs), SAN_TOOLS (default memcheck racecheck; empty: none),
# I8SHAPES / I8MS / I8K (int8 sweep shapes, M, kernels).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# ncu's stall reasons, as per-issue ratios (append to a --metrics list)
STALLS="long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle barrier not_selected selected dispatch_stall no_instruction sleeping membar branch_resolving"
stall_metrics() { for x in $STALLS; do printf ',smsp__average_warps_issue_stalled_%s_per_issue_active.ratio' "$x"; done; }
# ncu_cublaslt K N SECONDS NCU_ARGS...: ncu on one cuBLASLt block-FP8 launch (M = 4096, the
# NVTX-scoped launches of scripts/fp8_peer_probe.py), report on stdout
ncu_cublaslt() {
  local k=$1 n=$2 t=$3; shift 3
  timeout "$t" ncu --clock-control none --nvtx --nvtx-include "probe/" --launch-skip 3 --launch-count 1 "$@" \
    python3 scripts/fp8_peer_probe.py plain "$k" "$n" 4096 6
}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for step in "$@"; do
  case "$step" in
    harness)
      nvcc -O3 -lineinfo -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude --expt-relaxed-constexpr \
        bench/cuda_fp8_sweep.cu src/cuda/sm90_fp8_gemm.cu src/core/error.cpp -o /tmp/fp8_sweep 2>&1 | grep -iE "error" ;
      timeout 120 /tmp/fp8_sweep --check-only > "$OUT/checks.txt" 2>&1; echo "harness checks rc=$?"; grep -E "FAIL|failed|error|illegal" "$OUT/checks.txt" | head -12
      timeout 300 /tmp/fp8_sweep --bench-only ${GROUPS_:+--groups $GROUPS_} --bn ${BNS:-128} --cluster ${CLUSTERS:-1,2} \
        --json "$OUT/fp8_sweep.json" > "$OUT/bench.txt" 2>&1; echo "bench rc=$?"; cat "$OUT/bench.txt" ;;
    prof)
      # Nsight Compute on one timed launch per configuration (M = 4096, 7168 x 16384)
      [ -x /tmp/fp8_sweep ] || nvcc -O3 -lineinfo -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude --expt-relaxed-constexpr \
        bench/cuda_fp8_sweep.cu src/cuda/sm90_fp8_gemm.cu src/core/error.cpp -o /tmp/fp8_sweep
      for cfg in ${PROF_CFGS:-128:1}; do
        bn=${cfg%:*}; cl=${cfg#*:}
        timeout 200 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 \
          --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats \
          /tmp/fp8_sweep --bench-only --ms 4096 --nk 7168x16384 --bn $bn --cluster $cl > "$OUT/ncu_bn${bn}_c${cl}.txt" 2>&1
        echo "== bn=$bn cluster=$cl rc=$?"
        grep -E "Duration|Grid Size|Cluster|Throughput|Registers|Achieved Occupancy|Waves|Stall|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu_bn${bn}_c${cl}.txt" | head -40
      done ;;
    build)
      # MIXQ_PREBUILT: build-gpu's binaries came with `carry` (scripts/prebuild_gpu.sh)
      [ -n "${MIXQ_PREBUILT:-}" ] && { bash scripts/prebuild_gpu.sh unpack || exit 1; echo "build: prebuilt, carried"; continue; }
      t0=$(date +%s)
      cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON -DMIXQ_CUDA_ARCHS=90a > /tmp/cmake.log 2>&1 || { tail -20 /tmp/cmake.log; exit 1; }
      cmake --build build-gpu -j 16 --target ${BUILD_TARGETS:-mixq_gpu_tests cuda_int8_sweep} > /tmp/build.log 2>&1 || { grep -E "error|FAILED" /tmp/build.log | head -30; cp /tmp/build.log "$OUT/"; exit 1; }
      echo "build: $(( $(date +%s) - t0 )) s" ;;
    tests)
      bash "$0" build || exit 1
      timeout 300 build-gpu/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block*:CudaActQuant*:CudaInt8*' > "$OUT/gtest.txt" 2>&1; echo "gtest rc=$?"
      grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |Failure|Expected|Which is|actual|error" "$OUT/gtest.txt" | head -40
      for tool in ${SAN_TOOLS-memcheck racecheck}; do
        timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/tests/mixq_gpu_tests \
          --gtest_filter="${SANF:-CudaFp8Block.OddShapesBiasClamp:CudaFp8Block.EveryTileConfiguration:CudaInt8Block.HopperWgmma}" \
          > "$OUT/$tool.txt" 2>&1; echo "$tool rc=$?"; tail -3 "$OUT/$tool.txt"
      done ;;
    int8)
      # the Hopper INT8 kernels side by side (single CTAs, CTA pairs) with cuBLAS FP16 / INT8
      timeout 300 build-gpu/cuda_int8_sweep --shapes ${I8SHAPES:-16384x7168,1536x24576,14336x21504,8192x57344} \
        --m ${I8MS:-1024,4096} --kernels ${I8K:-sm90_i8_128x128,sm90_i8_128x128_c2} --json "$OUT/int8_sweep.json" > "$OUT/int8.txt" 2>&1
      echo "int8 sweep rc=$?"; cat "$OUT/int8.txt" ;;
    i8prof)
      # Nsight Compute on the Hopper INT8 kernel (one launch, M = 4096, 8192 x 8192): where it stalls
      mets="smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__warps_active.avg.per_cycle_active"
      mets="$mets$(stall_metrics)"
      timeout 200 ncu --clock-control none -k regex:block_gemm --launch-skip 2 --launch-count 1 --metrics "$mets" \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        build-gpu/cuda_int8_sweep --shapes ${I8PROF_SHAPE:-8192x8192} --m 4096 --kernels sm90_i8_128x128 > "$OUT/i8prof.txt" 2>&1
      echo "i8prof rc=$?"
      grep -E "stalled|inst_executed|cycles_elapsed|issue_active|gmma|pipe_|wavefronts|conflicts|warps_active|Duration|Throughput|Busy|Pipe" "$OUT/i8prof.txt" | sed -E 's/smsp__average_warps_issue_stalled_//' | head -60 ;;
    i8src)
      # ncu source counters of the INT8 kernel: where the warps stall, by SASS line (top entries),
      # plus the raw page for offline reading
      timeout 240 ncu --clock-control none -k regex:block_gemm --launch-skip 2 --launch-count 1 \
        --section SourceCounters --section WarpStateStats --print-details all \
        build-gpu/cuda_int8_sweep --shapes ${I8PROF_SHAPE:-8192x8192} --m 4096 --kernels ${I8PROF_K:-sm90_i8_128x128} > "$OUT/i8src.txt" 2>&1
      echo "i8src rc=$?"; grep -iE "stall|sampl|Warp Cycles|Issued" "$OUT/i8src.txt" | head -60
      timeout 240 ncu --clock-control none -k regex:block_gemm --launch-skip 2 --launch-count 1 --set full --import-source no \
        --page source --csv --print-source sass \
        build-gpu/cuda_int8_sweep --shapes ${I8PROF_SHAPE:-8192x8192} --m 4096 --kernels ${I8PROF_K:-sm90_i8_128x128} > "$OUT/i8sass.csv" 2>&1
      echo "i8sass rc=$? $(wc -l < "$OUT/i8sass.csv") lines" ;;
    fp8probe)
      # cuBLASLt's block-scaled FP8 kernel beside mixq's (7168 x 16384, M = 4096): kernel names of
      # the target shapes, sustained clock / power over a few seconds each, and one ncu launch each.
      # FP8_BIN: a prebuilt harness (carried), else the one `harness` built.
      B=${FP8_BIN:-/tmp/fp8_sweep}
      smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 > "$OUT/smi_$1.csv" 2>/dev/null & }
      med() { python3 -c "import sys,statistics as s; r=[l.split(',') for l in open(sys.argv[1]) if l.strip()]; r=r[len(r)//4:]; print(sys.argv[2], 'samples', len(r), 'clock MHz', s.median(float(x[0]) for x in r), 'power W', s.median(float(x[1]) for x in r), 'temp', s.median(float(x[2]) for x in r))" "$OUT/smi_$1.csv" "$1"; }
      timeout 120 python3 scripts/fp8_peer_probe.py names > "$OUT/lt_names.txt" 2>&1; echo "names rc=$?"; grep -E "K=" "$OUT/lt_names.txt" | grep -viE "elementwise|distribution|copy|fill" | head -24
      smi lt; sp=$!; timeout 60 python3 scripts/fp8_peer_probe.py sustain 16384 7168 4096 5 2>&1 | tail -2; kill $sp 2>/dev/null; wait $sp 2>/dev/null; med lt
      smi mixq; sp=$!; timeout 60 $B --bench-only --ms 4096 --nk 7168x16384 --cluster 1 --iters ${SUSTAIN_ITERS:-1000} 2>&1 | tail -2; kill $sp 2>/dev/null; wait $sp 2>/dev/null; med mixq
      mets="sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,gpu__time_duration.sum,sm__warps_active.avg.per_cycle_active"
      ncu_cublaslt 16384 7168 150 --section LaunchStats --metrics "$mets" > "$OUT/ncu_lt.txt" 2>&1; echo "ncu cublaslt rc=$?"
      timeout 150 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --section LaunchStats --metrics "$mets" \
        $B --bench-only --ms 4096 --nk 7168x16384 --cluster 1 > "$OUT/ncu_mixq.txt" 2>&1; echo "ncu mixq rc=$?"
      for f in lt mixq; do echo "== $f"; grep -E "^  [a-zA-Z_]|Grid Size|Block Size|Cluster Size|Registers|Dynamic Shared|$(echo $mets | tr , '|')" "$OUT/ncu_$f.txt" | grep -v "^==" | head -24; done ;;
    fp8ab)
      # Same-process A/B of the FP8 GEMM's cluster and raster knobs (harness FP8_BIN), M = AB_MS
      B=${FP8_BIN:-/tmp/fp8_sweep}
      timeout 300 $B --bench-only --ms ${AB_MS:-4096} --nk ${AB_NK:-7168,16384,24576,1536,21504,14336,57344,8192} \
        --cluster ${AB_CLUSTERS:-1,2} --groups ${AB_GROUPS:-0} ${AB_SETS:+--sets $AB_SETS} --rounds ${AB_ROUNDS:-1} --json "$OUT/fp8ab.json" > "$OUT/fp8ab.txt" 2>&1; echo "fp8ab rc=$?"; cat "$OUT/fp8ab.txt" ;;
    fp8ncu)
      # ncu of mixq's FP8 GEMM (each cluster size of NCU_CLUSTERS) and cuBLASLt's on 7168 x 16384,
      # M = 4096: clock, cycles, L2 / DRAM bytes, issue activity and the stall reasons per issue.
      B=${FP8_BIN:-/tmp/fp8_sweep}
      mets="sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
      mets="$mets$(stall_metrics)"
      for cl in ${NCU_CLUSTERS:-1 2}; do
        timeout 150 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --metrics "$mets" \
          $B --bench-only --ms 4096 --nk ${NCU_NK:-7168x16384} --cluster $cl ${FP8_ARGS:-} > "$OUT/ncu_mixq_c$cl.txt" 2>&1; echo "ncu mixq c$cl rc=$?"
      done
      [ -n "${NCU_LT-1}" ] && { ncu_cublaslt 16384 7168 150 --metrics "$mets" > "$OUT/ncu_mixq_lt.txt" 2>&1; echo "ncu cublaslt rc=$?"; }
      python3 scripts/ncu_metrics_table.py "$OUT"/ncu_mixq_*.txt ;;
    fp8src)
      # Warp stalls by SASS line (ncu source page, CSV) of mixq's FP8 GEMM (cluster 1) and of
      # cuBLASLt's on 7168 x 16384, M = 4096, then the hottest lines of each
      B=${FP8_BIN:-/tmp/fp8_sweep}
      timeout 200 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --section SourceCounters \
        --page source --csv --print-source sass $B --bench-only --ms 4096 --nk ${NCU_NK:-7168x16384} --cluster 1 ${FP8_ARGS:-} > "$OUT/src_mixq.csv" 2>&1
      echo "src mixq rc=$? $(wc -l < "$OUT/src_mixq.csv") lines"
      [ -n "${SRC_LT-1}" ] && ncu_cublaslt 16384 7168 200 --section SourceCounters --page source --csv --print-source sass \
        > "$OUT/src_lt.csv" 2>&1
      echo "src cublaslt rc=$? $(wc -l < "$OUT/src_lt.csv") lines"
      for f in mixq lt; do python3 scripts/ncu_hot_sass.py "$OUT/src_$f.csv" 25 > "$OUT/hot_$f.txt" 2>&1; head -40 "$OUT/hot_$f.txt"; done ;;
    fp8l2)
      # Where the L2 bytes of the FP8 GEMM come from (ncu's lts__t_* breakdown, the names this ncu
      # knows): mixq's 192-wide tile as single CTAs and as pairs (B multicast), and cuBLASLt, on
      # 21504 x 14336, M = 4096
      B=${FP8_BIN:-/tmp/fp8_sweep}
      ncu --query-metrics --chip gh100 > "$OUT/ncu_query.txt" 2>&1 || ncu --query-metrics > "$OUT/ncu_query.txt" 2>&1
      mets="sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,dram__bytes_read.sum"
      for w in lts__t_bytes lts__t_sectors lts__t_requests_srcunit_tex lts__t_sectors_srcunit_tex lts__t_sectors_srcunit_tex_op_read \
               lts__t_sectors_srcunit_ltcfabric lts__t_sectors_srcnode_gpc lts__t_sectors_srcunit_tex_lookup_hit lts__t_sectors_srcunit_tex_lookup_miss; do
        grep -qE "^$w[[:space:]]" "$OUT/ncu_query.txt" && mets="$mets,$w.sum"
      done
      echo "metrics: $mets"
      for cl in 1 2; do
        timeout 120 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --metrics "$mets" \
          $B --bench-only --ms 4096 --nk 21504x14336 --bn 192 --cluster $cl > "$OUT/l2_c$cl.txt" 2>&1; echo "l2 c$cl rc=$?"
      done
      ncu_cublaslt 14336 21504 150 --metrics "$mets" > "$OUT/l2_lt.txt" 2>&1; echo "l2 cublaslt rc=$?"
      rm -f "$OUT/ncu_query.txt"
      python3 scripts/ncu_metrics_table.py "$OUT"/l2_c1.txt "$OUT"/l2_c2.txt "$OUT"/l2_lt.txt ;;
    peers)
      OPS=cublas_fp8_block128 MS=2048,4096 SHAPES=16384x7168,1536x24576,14336x21504,8192x57344 \
        timeout 200 python3 peers/peers.py > "$OUT/peers.txt" 2>&1; echo "peers rc=$?"; grep -E '^\{"model' "$OUT/peers.txt" ;;
  esac
done

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
      st="long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle barrier not_selected selected dispatch_stall no_instruction sleeping membar branch_resolving"
      mets="smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__warps_active.avg.per_cycle_active"
      for x in $st; do mets="$mets,smsp__average_warps_issue_stalled_${x}_per_issue_active.ratio"; done
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
    peers)
      OPS=cublas_fp8_block128 MS=2048,4096 SHAPES=16384x7168,1536x24576,14336x21504,8192x57344 \
        timeout 200 python3 peers/peers.py > "$OUT/peers.txt" 2>&1; echo "peers rc=$?"; grep -E '^\{"model' "$OUT/peers.txt" ;;
  esac
done

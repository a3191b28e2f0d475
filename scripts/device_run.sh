#!/usr/bin/env bash
# What one call on the GPU machine runs: build with ninja (CUDA for sm_80 + sm_90a), run every test,
# then optional extra steps. Logs and JSON go to $OUT.
#   bash scripts/device_run.sh [test|sanitize|bench|sass]...
# Env: MIXQ_CUDA_ARCHS (default "80;90a"; "90a" builds faster), MIXQ_TARGETS (ninja targets,
# default all), MIXQ_BUILD_DIR, MIXQ_PREBUILT (non-empty: the build dir's binaries were carried, skip
# the build; see scripts/prebuild_gpu.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export MIXQ_BUILD_DIR=${MIXQ_BUILD_DIR:-build-gpu}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
# build logs stay on the machine unless the build fails (only 8 files come back from $OUT)
LOGS=/tmp/mixq-logs; mkdir -p "$LOGS"
if [ -n "${MIXQ_PREBUILT:-}" ]; then
  # binaries built on the CPU machine (same nvcc 13.0) and sent with `carry`: no cmake here (its
  # cache names the other machine's paths), which saves the 150-270 s build of a fresh machine
  bash scripts/prebuild_gpu.sh unpack || exit 1
  echo "build: prebuilt, carried"
else
  cmake -S . -B "$MIXQ_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON "-DMIXQ_CUDA_ARCHS=${MIXQ_CUDA_ARCHS:-80;90a}" > "$LOGS/cmake.log" 2>&1 || { cp "$LOGS/cmake.log" "$OUT/"; tail -30 "$LOGS/cmake.log"; exit 1; }
  cmake --build "$MIXQ_BUILD_DIR" -j 16 ${MIXQ_TARGETS:+--target $MIXQ_TARGETS} > "$LOGS/build.log" 2>&1 || { cp "$LOGS/build.log" "$OUT/"; grep -E "error|FAILED" "$LOGS/build.log" | head -40; exit 1; }
fi
echo "build: $(( $(date +%s) - t0 )) s"
for step in "$@"; do
  case "$step" in
    test)
      (cd "$MIXQ_BUILD_DIR" && ctest -j 8 --timeout 300 --output-on-failure -L "unit|gpu" > "$OUT/ctest.log" 2>&1); echo "ctest rc=$?"
      grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | head -30 ;;
    sanitize)
      # memcheck: the streaming, both wgmma and the cuBLAS paths (determinism/concurrency run all of
      # them), the quantizers and the act-quant GEMMs; racecheck: mixq's own kernels only (cuBLAS's
      # nvjet kernels report hazards of their own)
      mem='CudaWeightOnly.SchemesAndBlockSizes:CudaWeightOnly.Deterministic*:CudaWeightOnly.Concurrent*:CudaActQuant.Fp8MatchesHost:CudaActQuant.Int8MatchesHost:CudaFp8Block.OddShapesBiasClamp:CudaInt8Block.HopperWgmma:CudaFp8WeightOnly.F32ActivationsAndOddShapes'
      race='CudaWeightOnly.SchemesAndBlockSizes:CudaWeightOnly.HopperWgmmaKernel:CudaFp8Block.OddShapesBiasClamp:CudaInt8Block.HopperWgmma'
      for tool in memcheck racecheck; do
        filter=$mem; [ $tool = racecheck ] && filter=$race
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$MIXQ_BUILD_DIR/tests/mixq_gpu_tests" \
          --gtest_filter="$filter" > "$LOGS/sanitize_$tool.log" 2>&1
        echo "compute-sanitizer $tool rc=$?"; tail -3 "$LOGS/sanitize_$tool.log"; cp "$LOGS/sanitize_$tool.log" "$OUT/"
      done ;;
    wotests)
      # the weight-only GPU tests with the (prebuilt) test binary itself: ctest needs the build's
      # cmake cache, which a carried build does not have
      timeout "${WOT_TIMEOUT:-300}" "$MIXQ_BUILD_DIR/tests/mixq_gpu_tests" \
        --gtest_filter="${WOT_FILTER:-CudaWeightOnly.*:CudaFp8WeightOnly.*}" > "$OUT/wotests.log" 2>&1
      echo "wotests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|^\[       OK \]" "$OUT/wotests.log" | tail -25 ;;
    wosan)
      # compute-sanitizer on the streaming kernel's split-K reductions (clusters, global partials)
      for tool in memcheck racecheck; do
        filter=${WOSAN_FILTER:-CudaWeightOnly.StreamKernelClusterAndGlobalReduction}
        [ $tool = memcheck ] && filter="$filter:CudaWeightOnly.Deterministic*"
        timeout "${WOSAN_TIMEOUT:-200}" compute-sanitizer --tool $tool --error-exitcode 9 \
          "$MIXQ_BUILD_DIR/tests/mixq_gpu_tests" --gtest_filter="$filter" > "$OUT/wosan_$tool.log" 2>&1
        echo "compute-sanitizer $tool rc=$?"; tail -3 "$OUT/wosan_$tool.log"
      done ;;
    variants)
      # same-process A/B of planner knobs: cuda_wo_sweep --variants (VAR_LIST: 'A;B;...', each
      # variant VAR=V,...), VAR_ROUNDS rounds alternating them; table: scripts/variants_table.py
      timeout "${VAR_TIMEOUT:-300}" "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes "${VAR_SHAPES:-4096x4096}" \
        --m "${VAR_MS:-1,2}" --schemes "${VAR_SCHEMES:-w4g128,w8g128}" --act "${VAR_ACT:-f16}" --no-baseline \
        --variants "$VAR_LIST" --rounds "${VAR_ROUNDS:-2}" --json "$OUT/variants.json" > "$OUT/variants.txt" 2>&1
      echo "variants rc=$?"; grep -m1 ceiling "$OUT/variants.txt"
      python3 scripts/variants_table.py "$OUT/variants.json" ;;
    sass)
      cuobjdump --dump-resource-usage "$MIXQ_BUILD_DIR"/CMakeFiles/mixq.dir/src/cuda/sm80_wo_stream_f16.cu.o > "$OUT/resources.txt" 2>&1
      grep -E "REG|STACK" "$OUT/resources.txt" | head -20
      cuobjdump --dump-sass "$MIXQ_BUILD_DIR"/CMakeFiles/mixq.dir/src/cuda/sm80_wo_stream_f16.cu.o > "$OUT/sass_stream_f16.txt" 2>&1
      echo "HMMA: $(grep -c HMMA "$OUT/sass_stream_f16.txt")  LOP3: $(grep -c LOP3 "$OUT/sass_stream_f16.txt")  LDL/STL: $(grep -cE 'LDL|STL' "$OUT/sass_stream_f16.txt")" ;;
    ncu)
      for m in 1 16; do
        ncu --clock-control none -k regex:wo_stream --launch-count 1 \
          --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
          --section MemoryWorkloadAnalysis \
          "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes 14336x21504 --m $m --schemes w4g128 --act f16 --no-baseline \
          > "$OUT/ncu_m$m.txt" 2>&1
        echo "ncu M=$m rc=$?"
        grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Eligible" "$OUT/ncu_m$m.txt" | head -24
      done ;;
    stalls)
      st="long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle barrier not_selected selected dispatch_stall no_instruction drain membar branch_resolving tex_throttle imc_miss"
      mets="smsp__inst_executed.sum,sm__cycles_elapsed.avg,dram__bytes_read.sum"
      for x in $st; do mets="$mets,smsp__average_warps_issue_stalled_${x}_per_issue_active.ratio"; done
      ncu --clock-control none -k regex:wo_stream --launch-count 1 --metrics "$mets" \
        "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes 14336x21504 --m 1 --schemes w4g128 --act f16 --no-baseline > "$OUT/stalls.txt" 2>&1
      grep -E "stalled|inst_executed|cycles_elapsed|dram__bytes" "$OUT/stalls.txt" | sed -E 's/smsp__average_warps_issue_stalled_//' ;;
    sass8)
      cuobjdump --dump-sass -arch sm_90a "$MIXQ_BUILD_DIR"/CMakeFiles/mixq.dir/src/cuda/sm80_wo_stream_f16.cu.o > /tmp/all.sass 2>&1
      python3 - "$OUT" <<'PY'
import re, sys
txt = open('/tmp/all.sass').read()
funcs = re.split(r'\n\s*Function : ', txt)
for f in funcs:
    name = f.split('\n', 1)[0]
    if 'wo_stream_kernel' in name and 'Li8ELi4ELb0E' in name:
        open(sys.argv[1] + '/sass_mt8_w4.txt', 'w').write(f)
        ops = re.findall(r'/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\d\s+)?([A-Z0-9_.]+)', f)
        from collections import Counter
        c = Counter(o.split('.')[0] for o in ops)
        print('instructions', len(ops), c.most_common(25))
        break
PY
      ;;
    prof)
      # GEMV diagnosis: blocks-per-SM sweep, then ncu (full set + per-SASS source counters) at M = 1
      W=14336x21504
      for b in ${PROF_BLOCKS:-2 3 4 6 8 12}; do
        echo "blocks_per_sm=$b: $(MIXQ_STREAM_BLOCKS_PER_SM=$b "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $W --m 1,4 --schemes w4g128,w8g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $2, $4, $5}' | tr '\n' ' ')"
      done
      PM=${PROF_M:-1}
      "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $W --m $PM --schemes w4g128 --act f16 --no-baseline 2>&1 | head -3
      ncu --clock-control none -k regex:wo_stream --launch-count 1 --set full --import-source no -o /tmp/gemv \
        "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $W --m $PM --schemes w4g128 --act f16 --no-baseline > "$LOGS/ncu_run.log" 2>&1
      echo "ncu rc=$?"; tail -2 "$LOGS/ncu_run.log"
      ncu -i /tmp/gemv.ncu-rep --page details > "$OUT/gemv_details.txt" 2>&1
      ncu -i /tmp/gemv.ncu-rep --page source --csv --print-source sass > "$OUT/gemv_source.csv" 2>&1 || echo "source page failed"
      gzip -f "$OUT/gemv_source.csv"
      grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Block Limit|Executed Ipc|Grid Size|Dynamic Shared" "$OUT/gemv_details.txt" | head -30 ;;
    gemv)
      # decode sweep: the nine layers at M = 1..16 (stream kernel; M = 16 also forced onto it),
      # then the K-split knobs on the small layers
      shapes=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
      "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m 1,2,4,8,16 --schemes w4g128,w8g128 --act f16 \
        --json "$OUT/gemv_f16.json" > "$OUT/gemv_f16.txt" 2>&1; echo "sweep rc=$?"
      MIXQ_FORCE_KERNEL=stream "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes 14336x21504,8192x57344,28672x8192,4096x4096 \
        --m 8,16 --schemes w4g128,w8g128 --act f16 --no-baseline 2>&1 | grep -E "^[0-9]+x" > "$OUT/gemv_forced16.txt"
      for mc in 2 4; do for b in 4; do
        echo "min_chunks=$mc: $(MIXQ_STREAM_MIN_CHUNKS=$mc "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes 4096x4096,4096x6144,8192x8192 --m 1 --schemes w4g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $1, $5}' | tr '\n' ' ')"
      done; done | tee "$OUT/gemv_knobs.txt"
      cat "$OUT/gemv_f16.txt" "$OUT/gemv_forced16.txt" | grep -E '^[0-9]+x|ceiling' ;;
    gemv3)
      # register-ring depth x resident blocks for decode (int4, mt = 8): variant builds
      L=14336x21504,8192x57344,28672x8192,4096x4096,8192x8192
      echo "default: $(MIXQ_FORCE_KERNEL=stream $MIXQ_BUILD_DIR/cuda_wo_sweep --shapes $L --m 1,4,8 --schemes w4g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $1, $4, $5}' | tr '\n' ' ')" | tee "$OUT/gemv3_default.txt"
      for v in ${GEMV_VARIANTS:-3,3 4,3 6,2}; do
        set -- ${v/,/ }; d=/tmp/build-d$1b$2
        cmake -S . -B $d -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON -DMIXQ_CUDA_ARCHS=90a \
          "-DCMAKE_CUDA_FLAGS=-DMIXQ_STREAM_DEPTH=$1 -DMIXQ_STREAM_MT8_BLOCKS=$2" \
          "-DCMAKE_CXX_FLAGS=-DMIXQ_STREAM_DEPTH=$1 -DMIXQ_STREAM_MT8_BLOCKS=$2" > /tmp/mixq-logs/v.log 2>&1
        cmake --build $d -j 16 --target cuda_wo_sweep >> /tmp/mixq-logs/v.log 2>&1 || tail -20 /tmp/mixq-logs/v.log
        echo "depth=$1 blocks=$2: $(MIXQ_FORCE_KERNEL=stream $d/cuda_wo_sweep --shapes $L --m 1,4,8 --schemes w4g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $1, $4, $5}' | tr '\n' ' ')"
      done | tee "$OUT/gemv3.txt" ;;
    bench)
      # the nine layers of anchors.md x the M sweep, W4/W8 g128, f16 and bf16, cuBLAS in-process
      shapes=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
      for act in f16 bf16; do
        "$MIXQ_BUILD_DIR/mixq" bench --backend cuda --act $act --shapes $shapes \
          --m 1,2,4,8,16,32,64,128,256,1024,4096 --schemes w4g128,w8g128 --no-progress \
          --json "$OUT/bench_cuda_$act.json" > "$OUT/bench_cuda_$act.txt" 2>&1
        echo "mixq bench --act $act rc=$?"
      done ;;
    bench_actq)
      # FP8 block and INT8 W8A8 end to end (activation quantization inside the timed call) on the
      # issue-5 shapes, then cuBLASLt block FP8 / _int_mm / cuBLAS FP16 in the same call
      "$MIXQ_BUILD_DIR/mixq" bench --backend cuda --act bf16 --schemes fp8b128:fp8,w8g128:int8 \
        --shapes 16384x7168,1536x24576,14336x21504,8192x57344 --m 2048,4096 --no-progress \
        --json "$OUT/act_bench.json" > "$OUT/act_bench.txt" 2>&1
      echo "mixq bench fp8/int8 rc=$?"; cat "$OUT/act_bench.txt"
      if [ -n "${ACTQ_GROUPS:-}" ]; then  # raster-group A/B of both Hopper GEMMs
        for g in $ACTQ_GROUPS; do
          echo "== MIXQ_BLOCK_GEMM_GROUP_N=$g"
          MIXQ_BLOCK_GEMM_GROUP_N=$g "$MIXQ_BUILD_DIR/mixq" bench --backend cuda --act bf16 --schemes fp8b128:fp8,w8g128:int8 \
            --shapes 16384x7168,1536x24576,14336x21504,8192x57344 --m 2048,4096 --no-progress 2>&1 | grep -E "^(fp8|w8)"
        done > "$OUT/act_groups.txt"; cat "$OUT/act_groups.txt"
      fi
      if [ -f peers/peers.py ]; then
        OPS=cublas_fp8_block128,cublas_int8,cublas_fp16 MS=2048,4096 SHAPES=16384x7168,1536x24576,14336x21504,8192x57344 \
          timeout 300 python3 peers/peers.py > "$OUT/act_peers.txt" 2>&1
        echo "peers rc=$?"; grep -E '^\{"model' "$OUT/act_peers.txt"
      fi ;;
    bench_fp8wo)
      # FP8 (e4m3, 128x128 block scales) weight-only decode against W8 g128 on the large layers
      for act in f16 bf16; do
        "$MIXQ_BUILD_DIR/mixq" bench --backend cuda --act $act --shapes 14336x21504,8192x57344,28672x8192 \
          --m 1,4,16 --schemes fp8b128,w8g128 --no-progress --json "$OUT/fp8wo_$act.json" > "$OUT/fp8wo_$act.txt" 2>&1
        echo "mixq bench fp8b128 --act $act rc=$?"
      done ;;
    wsk)
      # warp-specialized wgmma kernel (stream-K): its GPU tests with it forced at every M, then
      # the nine layers at M = 64..1024 next to cuBLAS
      MIXQ_WGMMA_V1=0 "$MIXQ_BUILD_DIR/tests/mixq_gpu_tests" --gtest_filter='*Wgmma*:CudaWeightOnly.*' > "$OUT/wsk_tests.log" 2>&1
      echo "ws-forced gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/wsk_tests.log" | tr '\n' ' ')"
      shapes=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
      "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m ${WSK_M:-64,128,256,1024} --schemes ${WSK_SCHEMES:-w4g128,w8g128} \
        --act ${WSK_ACT:-f16} --json "$OUT/wsk_sweep.json" > "$OUT/wsk_sweep.txt" 2>&1; echo "sweep rc=$?"
      grep -E '^[0-9]+x|ceiling' "$OUT/wsk_sweep.txt"
      # the schedule forced both ways (W4 f16), to calibrate the cost model of wo_stream_k.hpp
      if [ -n "${WSK_FORCED:-}" ]; then
        for mode in dp sk; do
          MIXQ_WS_SCHEDULE=$mode "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m ${WSK_M:-64,128,256,1024} \
            --schemes w8g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk -v m=$mode '{print m, $1, $4, $5}'
        done | tee "$OUT/wsk_forced.txt" | paste - - - - - - - - | head -40
      fi ;;
    wsprof)
      # ncu on the warp-specialized wgmma kernel: W8 M = 64 (stream-K, per-stage floor) and W4
      # M = 1024 (whole tiles, tensor-bound) on 14336x21504
      for cfg in "w8g128 64" "w4g128 1024"; do
        set -- $cfg
        ncu --clock-control none -k regex:wo_wgmma_ws_kernel --launch-count 1 \
          --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
          --section WarpStateStats --section LaunchStats --section Occupancy \
          "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes 14336x21504 --m $2 --schemes $1 --act f16 --no-baseline \
          > "$OUT/wsprof_$1_m$2.txt" 2>&1
        echo "== ncu $1 M=$2 rc=$?"
        grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|Stall|Max Bandwidth|L2 Hit Rate|Mem Pipes Busy|Tensor" "$OUT/wsprof_$1_m$2.txt" | head -30
      done ;;
    wssmall)
      # small M: the default dispatch, the v1 wgmma kernel forced, and wgmma forced where the
      # streaming kernel serves (M <= 8), on the nine layers
      shapes=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
      for v in default v1 wgmma; do
        env=""; ms=4,8,16,32,64
        [ $v = v1 ] && env="MIXQ_WGMMA_V1=1" && ms=16,32,64
        [ $v = wgmma ] && env="MIXQ_FORCE_KERNEL=wgmma" && ms=2,4,8
        env $env "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m $ms --schemes w4g128,w8g128 --act f16 \
          $([ $v = default ] || echo --no-baseline) 2>&1 | grep -E '^[0-9]+x' | awk -v v=$v '{print v, $1, $2, $4, $5, $6, $10}'
      done | tee "$OUT/wssmall.txt" | wc -l ;;
    wsdiag)
      # which copy costs the warp-specialized kernel its per-stage time: a diagnostic build
      # (-DMIXQ_WS_DIAG_BUILD; results are wrong on purpose) with the pairs (1), weights (2),
      # activations (4) or all three (7) not loaded
      d=/tmp/build-wsdiag
      cmake -S . -B $d -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON -DMIXQ_CUDA_ARCHS=90a \
        "-DCMAKE_CUDA_FLAGS=-DMIXQ_WS_DIAG_BUILD" > /tmp/mixq-logs/diag.log 2>&1
      cmake --build $d -j 16 --target cuda_wo_sweep >> /tmp/mixq-logs/diag.log 2>&1 || tail -20 /tmp/mixq-logs/diag.log
      for dg in 0 1 2 4 7; do
        echo "diag=$dg: $(MIXQ_WS_DIAG=$dg MIXQ_WGMMA_V1=0 $d/cuda_wo_sweep --shapes 14336x21504,4096x4096 --m 16,64,128,256,1024 \
          --schemes w4g128,w8g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $1, $2, $4, $5}' | tr '\n' ';')"
      done | tee "$OUT/wsdiag.txt" ;;
    wssrc)
      # per-instruction warp-stall sampling of the warp-specialized kernel (W4 M = 16 on
      # 14336x21504, the consumer-bound case): the hottest SASS lines with their stall reasons
      ncu --clock-control none -k regex:wo_wgmma_ws_kernel --launch-count 1 --section SourceCounters \
        --section WarpStateStats --section ComputeWorkloadAnalysis --section SpeedOfLight \
        --metrics "regex:sm__(inst_executed_)?pipe_.*(tensor|alu|fma|shared).*" --import-source no -o /tmp/wssrc -f \
        "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes 14336x21504 --m ${WSSRC_M:-16} --schemes ${WSSRC_SCHEME:-w4g128} \
        --act f16 --no-baseline > "$LOGS/wssrc.log" 2>&1; echo "ncu rc=$?"
      ncu --import /tmp/wssrc.ncu-rep --page details > "$OUT/wssrc_details.txt" 2>&1
      grep -E "Stall|Warp Cycles|Issued|Duration|Throughput|Busy|Ipc" "$OUT/wssrc_details.txt" | head -24
      ncu --import /tmp/wssrc.ncu-rep --page raw > "$LOGS/wssrc_raw.txt" 2>&1
      grep -E "pipe_" "$LOGS/wssrc_raw.txt" | grep -vE " 0$| 0(\.0+)?$" | sort -k3 -n -r | head -40 | tee "$OUT/wssrc_pipes.txt"
      ncu --import /tmp/wssrc.ncu-rep --page source --csv --print-source sass > "$LOGS/wssrc_src.csv" 2>&1
      echo "source page rc=$? lines=$(wc -l < "$LOGS/wssrc_src.csv")"
      python3 scripts/ncu_hot_sass.py "$LOGS/wssrc_src.csv" > "$OUT/wssrc_hot.txt" 2>&1; head -60 "$OUT/wssrc_hot.txt" ;;
    bigm)
      # the warp-specialized kernel forced at M = 2048 / 4096 against the default (dequantize + cuBLAS)
      shapes=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
      for v in default wgmma; do
        env=""; [ $v = wgmma ] && env="MIXQ_FORCE_KERNEL=wgmma"
        env $env "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m ${BIGM_M:-2048,4096} --schemes ${BIGM_SCHEMES:-w4g128,w8g128} \
          --act ${BIGM_ACT:-f16} $([ $v = default ] || echo --no-baseline) 2>&1 | grep -E '^[0-9]+x' | awk -v v=$v '{print v, $0}'
      done | tee "$OUT/bigm.txt" | awk '{print $1,$2,$3,$4,$5,$6,$7,$11}' ;;
    wsshape)
      # the shapes of the MT = 16 warp-specialized kernel (MIXQ_WS_SHAPE 1: one CTA per SM; 2: two
      # CTAs, one A buffer): the wgmma GPU tests with each, then the nine layers with the kernel
      # forced at M = 1, 4, 16 (WSSHAPE_SCHEMES, default W4/W8 g128)
      shapes=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
      for sh in 1 2; do
        MIXQ_WS_SHAPE=$sh MIXQ_WGMMA_V1=0 "$MIXQ_BUILD_DIR/tests/mixq_gpu_tests" --gtest_filter='*Wgmma*:CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$LOGS/wsshape_tests_$sh.log" 2>&1
        echo "shape $sh gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/wsshape_tests_$sh.log" | tr '\n' ' ')"
      done
      for sh in 1 2; do
        MIXQ_WS_SHAPE=$sh MIXQ_FORCE_KERNEL=wgmma "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m ${WSSHAPE_M:-1,4,16} \
          --schemes ${WSSHAPE_SCHEMES:-w4g128,w8g128} --act ${WSSHAPE_ACT:-f16} --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk -v s=$sh '{print s, $1, $2, $4, $5}'
      done > "$OUT/wsshape.txt"
      python3 - "$OUT/wsshape.txt" <<'PY'
import sys, collections
t = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    s, shp, sch, m, us = l.split()
    t[(shp, sch, int(m))][s] = float(us)
print("shape      scheme   M    one-cta  two-ctas")
for k in sorted(t, key=lambda k: (k[1], k[2], k[0])):
    print(f"{k[0]:11s} {k[1]:7s} {k[2]:3d}  " + "  ".join(f"{t[k].get(s, 0):8.1f}" for s in "12"))
PY
      ;;
    wsstages)
      # ring depth of the warp-specialized kernel (MIXQ_WS_STAGES caps it): W4/W8 g128 f16
      shapes=14336x21504,4096x4096,28672x8192,8192x57344,8192x8192
      for st in ${WSSTAGES:-3 4 5 6 8 11 24}; do
        MIXQ_WS_STAGES=$st MIXQ_FORCE_KERNEL=wgmma "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $shapes --m ${WSSTAGES_M:-4,16,64,256} \
          --schemes w4g128,w8g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk -v s=$st '{print s, $1, $2, $4, $5}'
      done > "$OUT/wsstages.txt"
      python3 - "$OUT/wsstages.txt" <<'PY'
import sys, collections
t = collections.defaultdict(dict); cols = []
for l in open(sys.argv[1]):
    s, shp, sch, m, us = l.split()
    t[(shp, sch, int(m))][s] = float(us)
    if s not in cols: cols.append(s)
print("shape      scheme   M  " + " ".join(f"S<={c:>4s}" for c in cols))
for k in sorted(t, key=lambda k: (k[1], k[2], k[0])):
    print(f"{k[0]:11s} {k[1]:7s} {k[2]:3d} " + " ".join(f"{t[k].get(c, 0):7.1f}" for c in cols))
PY
      ;;
    wsfold)
      # scale after the MMA (fold) against the per-register path (MIXQ_WS_FOLD=0): the wgmma GPU
      # tests with the fold off, then W4 g128 bf16 and FP8 (f32 block scales) f16/bf16 at small M
      if [ -z "${WSFOLD_NOTEST:-}" ]; then
        MIXQ_WS_FOLD=0 MIXQ_WGMMA_V1=0 "$MIXQ_BUILD_DIR/tests/mixq_gpu_tests" --gtest_filter='*Wgmma*:CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$LOGS/wsfold_tests.log" 2>&1
        echo "fold-off gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$LOGS/wsfold_tests.log" | tr '\n' ' ')"
      fi
      shapes=14336x21504,4096x4096,28672x8192,8192x57344,8192x8192
      for f in 1 0; do
        for act in bf16 f16; do
          sch=w4g128,fp8b128; [ $act = f16 ] && sch=fp8b128
          MIXQ_WS_FOLD=$f "$MIXQ_BUILD_DIR/mixq" bench --backend cuda --act $act --shapes $shapes --m ${WSFOLD_M:-4,16,64} \
            --schemes $sch --no-progress 2>&1 | grep -E '^(w4|fp8)' | awk -v f=$f -v a=$act '{print f, $2, $1, a, $3, $5}'
        done
      done > "$OUT/wsfold.txt"
      python3 - "$OUT/wsfold.txt" <<'PY'
import sys, collections
t = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    f, shp, sch, act, m, us = l.split()
    t[(shp, sch, act, int(m))][f] = float(us)
print("shape       scheme  act   M   fold  per-reg")
for k in sorted(t, key=lambda k: (k[1], k[2], k[3], k[0])):
    print(f"{k[0]:11s} {k[1]:7s} {k[2]:4s} {k[3]:3d} {t[k].get('1', 0):6.1f} {t[k].get('0', 0):7.1f}")
PY
      ;;
    actq)
      # activation quantizers against the copy ceiling, then the INT8 W8A8 linear end to end
      "$MIXQ_BUILD_DIR/cuda_act_quant_bench" --shapes 4096x16384,4096x4096,512x16384 --act f16,bf16,f32 \
        --json "$OUT/act_quant_bench.json" > "$OUT/act_quant_bench.txt" 2>&1; echo "act_quant_bench rc=$?"
      cat "$OUT/act_quant_bench.txt"
      for band in ${ACTQ_BANDS:-0 3}; do
        echo "MIXQ_ACT_QUANT_BAND=$band:"; MIXQ_ACT_QUANT_BAND=$band "$MIXQ_BUILD_DIR/cuda_act_quant_bench" --shapes 4096x16384,512x16384 --act f16,bf16 2>&1 | grep -E "^(fp8|int8)"
      done
      "$MIXQ_BUILD_DIR/mixq" bench --backend cuda --act f16 --schemes w8g128:int8 --no-progress \
        --shapes 14336x21504,4096x4096,14336x4096,8192x8192 --m 1024,4096 --json "$OUT/int8_e2e.json" > "$OUT/int8_e2e.txt" 2>&1
      echo "mixq bench int8 rc=$?"; grep -E "^\|? ?[0-9]+x|TB/s" "$OUT/int8_e2e.txt" | head -20 ;;
    small)
      # M = 1-2 on the small layers: graph time, the K-split knobs, the wgmma kernel forced
      S=4096x4096,4096x6144,14336x4096,8192x10240
      {
        "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $S --m 1,2 --schemes w4g128,w8g128 --act f16 --no-baseline 2>&1 | grep -E "^[0-9]+x|ceiling"
        for mc in ${SMALL_MC:-2 8}; do
          echo "min_chunks=$mc: $(MIXQ_STREAM_MIN_CHUNKS=$mc "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $S --m 1 --schemes w4g128,w8g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $1, $2, $4, $5, $9}' | tr '\n' ' ')"
        done
        echo "wgmma forced: $(MIXQ_FORCE_KERNEL=wgmma "$MIXQ_BUILD_DIR/cuda_wo_sweep" --shapes $S --m 1 --schemes w4g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $1, $5, $9}' | tr '\n' ' ')"
      } | tee "$OUT/small.txt" ;;
    peers)
      # torch's int4 tinygemm (BF16) in the same run (cuBLAS is timed inside mixq bench)
      if [ -f peers/peers.py ]; then
        OUT="$OUT" TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 \
          timeout 400 python3 peers/peers.py > "$LOGS/peers_tinygemm.log" 2>&1
        echo "peers.py rc=$?"
      fi ;;
    *) echo "unknown step $step" ;;
  esac
done

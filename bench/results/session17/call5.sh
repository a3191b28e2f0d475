#!/usr/bin/env bash
# Session 17, call 5 (H100): the tensor-core probe, first version: bench/sm90_wgmma_fp8_probe.cu as
# committed, patched by call5/probe_with_rs_vs_committed.diff (register-A variants, wrappers from
# call5/mma_gen.inc), as build-exp/probe/probe.cu, built with
#   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude -Ibuild-exp/probe \
#     --expt-relaxed-constexpr build-exp/probe/probe.cu -o build-exp/probe/probe
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader
build-exp/probe/probe

#!/usr/bin/env bash
# Builds mixq and runs every test (CTest): unit tests, CLI end-to-end tests, the Python oracle
# tests, and the GPU tests (which skip, with a visible count, on a machine without a GPU).
# Then the CPU backend's unit tests again under each smaller CPU kernel set this machine runs
# (MIXQ_CPU_ISA=avx2vnni where the CPU has AVX-VNNI, avx2, scalar), so the fallbacks of CPUs
# without AVX-512 are tested everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${MIXQ_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"

cpu_tests='CpuBackend.*:CpuIsa.*:LinearQuantized*:CpuPolicy.*'
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
avx2_flags() { [[ $flags == *" avx2"* ]] && [[ $flags == *" fma"* ]] && [[ $flags == *" f16c"* ]]; }
for isa in avx2vnni avx2 scalar; do
  if [ "$isa" = avx2vnni ] && ! { avx2_flags && [[ $flags == *" avx_vnni"* ]]; }; then
    echo "MIXQ_CPU_ISA=avx2vnni: this CPU has no AVX-VNNI, skipped"
    continue
  fi
  if [ "$isa" = avx2 ] && ! avx2_flags; then
    echo "MIXQ_CPU_ISA=avx2: this CPU has no AVX2 + FMA + F16C, skipped"
    continue
  fi
  echo "== CPU backend unit tests with MIXQ_CPU_ISA=$isa"
  MIXQ_CPU_ISA=$isa ./tests/mixq_unit_tests --gtest_filter="$cpu_tests" --gtest_brief=1
done

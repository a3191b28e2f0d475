#!/usr/bin/env bash
# Build every libFuzzer target in fuzz/ with clang + ASan/UBSan and run each for SECONDS
# (default 60) on its seed corpus fuzz/corpus/<name without fuzz_>/ (new inputs go to
# build-fuzz/corpus/<name>, crashes to build-fuzz/crashes/).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
build=build-fuzz
cmake -S . -B "$build" -G Ninja -DMIXQ_CUDA=OFF -DMIXQ_BUILD_FUZZERS=ON -DMIXQ_BUILD_TESTS=OFF \
  -DMIXQ_BUILD_TOOLS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
# Only the fuzzers (and their instrumented library): the main library's CPU kernels are not needed.
ninja -C "$build" -j2 "${targets[@]}"
mkdir -p "$build/crashes"
for t in "${targets[@]}"; do
  seeds="fuzz/corpus/${t#fuzz_}"
  work="$build/corpus/$t"
  mkdir -p "$work"
  echo "== $t for ${secs}s (seeds: $seeds)"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$build/fuzz/$t" "$work" "$seeds" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
    -timeout=10 -artifact_prefix="$build/crashes/$t-" -print_final_stats=1
done

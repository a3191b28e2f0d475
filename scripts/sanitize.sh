#!/usr/bin/env bash
# The unit tests (ctest -L unit: library, formats, CLI end to end) under AddressSanitizer and
# UndefinedBehaviorSanitizer, in a CPU-only build of its own (build-asan). Any report fails the
# run: UBSan does not recover, ASan aborts on the first error and LeakSanitizer reports leaks at
# exit. The mixq tool is built with the same flags, so the CLI tests check it too.
#   scripts/sanitize.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${MIXQ_ASAN_BUILD_DIR:-build-asan}"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
cmake -S . -B "$build" -G Ninja -DMIXQ_CUDA=OFF -DMIXQ_BUILD_TOOLS=ON -DMIXQ_BUILD_TESTS=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
# CMAKE_MAKE_PROGRAM: the ninja cmake configured with (another ninja on PATH would rebuild all).
ninja_bin="$(sed -n 's/^CMAKE_MAKE_PROGRAM:FILEPATH=//p' "$build/CMakeCache.txt")"
"${ninja_bin:-ninja}" -C "$build" -j "$(nproc)" mixq_unit_tests mixq_cli
cd "$build"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest -L unit --output-on-failure -j "$(nproc)" "$@"

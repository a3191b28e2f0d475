#!/usr/bin/env bash
# Build the GPU binaries here, on the CPU machine (nvcc 13.0, the same toolkit as the GPU machine),
# so that a device call can skip its own build (150-270 s of a fresh machine's time, every call):
#   bash scripts/prebuild_gpu.sh [targets...]   (default: mixq_gpu_tests cuda_int8_sweep mixq_cli)
# then carry build-gpu/gpu-bins.tar.xz to the device and run its scripts with MIXQ_PREBUILT=1
# (scripts/device_run.sh); it calls `bash scripts/prebuild_gpu.sh unpack`
# in place of a build. Only sm_90a is built (the H100); the library is static, so each binary
# carries all of it and needs only the CUDA runtime there.
set -euo pipefail
cd "$(dirname "$0")/.."
archive=build-gpu/gpu-bins.tar.xz
if [ "${1:-}" = unpack ]; then  # on the GPU machine (python's tarfile: xz-utils may be absent)
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" "$archive"
  exit
fi
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(mixq_gpu_tests cuda_int8_sweep mixq_cli)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON -DMIXQ_CUDA_ARCHS=90a > /dev/null
# An object whose dependency record is empty (its depfile lost, e.g. to a compile command run by
# hand with the same -MF path) never rebuilds on a header change: a stale kernel with an old
# parameter layout then faults at run time (this happened: a bf16 kernel object kept an old struct
# layout and failed with misaligned addresses). Remove such objects so ninja rebuilds them.
for o in $(cd build-gpu && ninja -t deps 2>/dev/null | awk '/#deps 0,/ {sub(":$", "", $1); print $1}'); do
  echo "rebuilding $o (no dependency record)"; rm -f "build-gpu/$o"
done
cmake --build build-gpu -j "$(nproc)" --target "${targets[@]}"
files=()
for t in "${targets[@]}"; do
  case "$t" in
    mixq_gpu_tests) f=build-gpu/tests/mixq_gpu_tests ;;
    mixq_cli) f=build-gpu/mixq ;;
    *) f=build-gpu/$t ;;
  esac
  [ -x "$f" ] || { echo "missing $f" >&2; exit 1; }
  files+=("$f")
done
# each binary holds the whole fatbin (~49 MiB) and carry takes 64 MiB in all: one xz archive with a
# window that spans them dedupes the copies (3 binaries: ~11 MiB, ~100 s here)
tar cf - "${files[@]}" | xz -T1 --lzma2=preset=6,dict=192MiB > "$archive"
echo "carry: $archive ($(( $(stat -c %s "$archive") / 1048576 )) MiB: ${files[*]})"

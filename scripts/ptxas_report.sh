#!/usr/bin/env bash
# Registers and spills of every kernel in one CUDA source of the library, as the build compiles it:
#   bash scripts/ptxas_report.sh src/cuda/sm80_wo_stream_f16.cu [build-gpu]
# Runs the build's own compile command with -Xptxas -v into a scratch object. The command's
# dependency-file options (-MD -MT -MF) are removed: writing ninja's depfile from outside a ninja
# build once left objects with an empty dependency record, which then never rebuilt on a header
# change.
set -euo pipefail
src=${1:?usage: ptxas_report.sh SOURCE.cu [BUILD_DIR]}
build=${2:-build-gpu}
cd "$(dirname "$0")/.."
cmd=$(cd "$build" && ninja -t commands mixq | grep -F "$src" | head -1)
[ -n "$cmd" ] || { echo "no compile command for $src in $build" >&2; exit 1; }
cmd=$(echo "$cmd" | sed -E 's/ -MD//; s/ -MT [^ ]+//; s/ -MF [^ ]+//; s/ -o [^ ]+/ -o \/tmp\/ptxas_report.o/')
(cd "$build" && eval "$cmd -Xptxas -v") 2>&1 |
  awk '/Compiling entry function/ {match($0, /_Z[^'"'"']*/); name = substr($0, RSTART, RLENGTH)}
       /bytes spill stores/ {spill = $5 " B spill stores, " $9 " B spill loads"}
       /Used [0-9]+ registers/ {match($0, /Used [0-9]+ registers/); print substr($0, RSTART + 5, RLENGTH - 15) " regs, " spill "  " name}'

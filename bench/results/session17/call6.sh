#!/usr/bin/env bash
# Session 17, call 6 (H100): SASS of the FP8 block GEMM kernels as main builds them (harness
# build-exp/fp8/fp8_sweep_main, call 1's command on main's kernel) and of the tensor-core probe
# (build-exp/probe/probe), to compare their consumer loops.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cuobjdump --dump-sass build-exp/fp8/fp8_sweep_main > /tmp/main.sass 2>&1; echo "main sass rc=$?"
cuobjdump --dump-sass build-exp/probe/probe > /tmp/probe.sass 2>&1; echo "probe sass rc=$?"
# one function each: the 192-wide single-CTA kernel, the 128-wide one, the probe's 192 SS 1-set promote
python3 - <<'PY'
import re, os
out = os.environ.get("OUT", "/tmp/out")
def split(path):
    funcs, cur, name = {}, [], None
    for line in open(path):
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            if name: funcs[name] = cur
            name, cur = m.group(1), []
        elif name: cur.append(line)
    if name: funcs[name] = cur
    return funcs
f = split("/tmp/main.sass")
for n, body in f.items():
    if "block_gemm" in n and ("ILi192ELi5E" in n or "ILi128ELi6E" in n) and "Li1ELi1ELi" in n:
        tag = "bn192" if "ILi192" in n else "bn128"
        open(f"{out}/sass_{tag}.txt", "w").writelines([n + "\n"] + body)
        print(tag, len(body), "lines")
p = split("/tmp/probe.sass")
for n, body in p.items():
    if "ILi192ELi0ELi2ELi1ELi1E" in n:
        open(f"{out}/sass_probe192.txt", "w").writelines([n + "\n"] + body); print("probe192", len(body))
PY
ls -la $OUT

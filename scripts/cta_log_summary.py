#!/usr/bin/env python3
"""Summary of the wgmma kernel's per-CTA timing log: per launch, the spread of the CTAs' first
landed stage and end, and which SMs / CTA indices finish late on average over the launches.
The log comes from a diagnostic build (-DMIXQ_WS_DIAG_BUILD) of cuda_wo_sweep run with
MIXQ_WS_CTA_LOG=FILE.csv, e.g. `cuda_wo_sweep --shapes 28672x8192 --m 16 --schemes w4g128 --act f16
--no-baseline` (GRID = the launch's CTA count, 264 there; docs/decisions/wo-wgmma-stream-k-reduction.md).

usage: cta_log_summary.py LOG.csv[.xz] GRID [LAUNCHES]   (the last LAUNCHES complete launches, default 40)"""
import csv
import lzma
import statistics as st
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    f = lzma.open(path, "rt") if path.endswith(".xz") else open(path)
    rows = [dict((k, int(v)) for k, v in r.items()) for r in csv.DictReader(f)]
    grid = int(sys.argv[2])
    want = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    launches = defaultdict(list)
    for r in rows:
        launches[r["seq"] // grid].append(r)
    full = [k for k in sorted(launches) if len(launches[k]) == grid][-want:]
    late_sm, late_cta, late_first = defaultdict(list), defaultdict(list), defaultdict(list)
    spreads, first_spreads, dur = [], [], []
    prev_end = None
    gaps = []
    for k in full:
        L = launches[k]
        first = sorted(r["t_first_stage_ns"] for r in L)
        end = sorted(r["t_end_ns"] for r in L)
        t0 = st.median(first)
        spreads.append((end[-1] - end[0]) / 1e3)
        first_spreads.append((first[-1] - first[0]) / 1e3)
        dur.append((end[-1] - first[0]) / 1e3)
        if prev_end is not None:
            gaps.append((first[0] - prev_end) / 1e3)
        prev_end = end[-1]
        med_end = st.median(end)
        for r in L:
            late_sm[r["sm"]].append((r["t_end_ns"] - med_end) / 1e3)
            late_cta[r["cta"]].append((r["t_end_ns"] - med_end) / 1e3)
            late_first[r["sm"]].append((r["t_first_stage_ns"] - t0) / 1e3)
    q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
    print(f"{len(full)} launches of {grid} CTAs")
    print(f"first landed stage spread (us): median {st.median(first_spreads):.2f}, max {max(first_spreads):.2f}")
    print(f"end spread, first to last CTA (us): median {st.median(spreads):.2f}, p90 {q(spreads, 0.9):.2f}")
    print(f"launch span, first stage to last end (us): median {st.median(dur):.2f}")
    if gaps:
        print(f"gap, last end of a launch to the first landed stage of the next (us): median {st.median(gaps):.2f}")
    # lateness of an SM's CTAs: is it the same SMs every launch?
    sm_mean = {sm: st.mean(v) for sm, v in late_sm.items()}
    order = sorted(sm_mean, key=sm_mean.get)
    print("SMs by mean end relative to the launch's median end (us):")
    print("  earliest:", ", ".join(f"{sm}:{sm_mean[sm]:+.2f}" for sm in order[:10]))
    print("  latest:  ", ", ".join(f"{sm}:{sm_mean[sm]:+.2f}" for sm in order[-10:]))
    # consistency: correlation of an SM's lateness between the two halves of the launches
    half = len(full) // 2
    a = {sm: st.mean(v[:half]) for sm, v in late_sm.items() if len(v) > 2 * half - 2}
    b = {sm: st.mean(v[half:]) for sm, v in late_sm.items() if len(v) > 2 * half - 2}
    common = sorted(set(a) & set(b))
    if len(common) > 3:
        print(f"  SM lateness, first half vs second half of the launches: r = {st.correlation([a[s] for s in common], [b[s] for s in common]):.2f}")
    cta_mean = {c: st.mean(v) for c, v in late_cta.items()}
    c_order = sorted(cta_mean, key=cta_mean.get)
    print("CTA indices by mean lateness (us): earliest", ", ".join(f"{c}:{cta_mean[c]:+.2f}" for c in c_order[:8]))
    print("                                  latest  ", ", ".join(f"{c}:{cta_mean[c]:+.2f}" for c in c_order[-8:]))
    # by SM id in blocks of 8 (neighbouring SM ids share a TPC / GPC on Hopper)
    print("mean lateness by SM id / 8:", " ".join(f"{g * 8}:{st.mean([sm_mean[s] for s in sm_mean if s // 8 == g]):+.2f}"
                                                 for g in sorted({s // 8 for s in sm_mean})))


if __name__ == "__main__":
    main()

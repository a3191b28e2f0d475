#!/usr/bin/env python3
"""Per-sample timeline of an ncu PM-sampling report of a whole CUDA graph (the csv of
`ncu --import X.ncu-rep --page raw --print-metric-instances values --csv`, graph profiled with
--graph-profiling graph): DRAM read % of peak, CTAs launched, SM instruction issue % and tensor
pipe % per sample, and a summary of the window where DRAM runs (first to last sample >= 5%).

usage: pm_timeline.py PM.csv [--rows]   (--rows prints every sample)"""
import csv
import sys

COLS = {
    "dram": "FBSP.TriageCompute.dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
    "ctas": "FE_B.TriageCompute.gr__ctas_launched_realtime.sum",
    "issue": "TPC.TriageCompute.sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
    "tensor": "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
}


def instances(cell):
    """'summary (v; v; ...)' -> [v, ...] as floats (thousands separators dropped)."""
    if "(" not in cell:
        return []
    inner = cell[cell.index("(") + 1: cell.rindex(")")]
    return [float(v.strip().replace(",", "")) for v in inner.split(";") if v.strip()]


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    hdr, data = rows[0], rows[-1]
    series = {k: instances(data[hdr.index(c)]) for k, c in COLS.items() if c in hdr}
    n = min(len(v) for v in series.values())
    interval = next((float(x) for x in [data[hdr.index("profiler__pmsampler_interval_time")].split()[0]]
                     if "profiler__pmsampler_interval_time" in hdr), 1.5)
    dram = series["dram"][:n]
    on = [i for i, v in enumerate(dram) if v >= 5.0]
    if not on:
        print("no DRAM activity")
        return
    a, b = on[0], on[-1]
    win = dram[a: b + 1]
    if "--rows" in sys.argv:
        print("sample  dram%  ctas  issue%  tensor%")
        for i in range(a, b + 1):
            print(f"{i:6d} {dram[i]:6.1f} {series['ctas'][i]:5.0f} {series['issue'][i]:7.1f} {series['tensor'][i]:7.1f}")
    bins = [(0, 40), (40, 70), (70, 80), (80, 85), (85, 101)]
    hist = ", ".join(f"{lo}-{min(hi, 100)}%: {sum(lo <= v < hi for v in win)}" for lo, hi in bins)
    print(f"samples {len(win)} x {interval} us, mean DRAM read {sum(win) / len(win):.1f}% of peak; {hist}")


if __name__ == "__main__":
    main()

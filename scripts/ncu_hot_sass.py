#!/usr/bin/env python3
"""Hottest SASS instructions of an `ncu --page source --csv --print-source sass` export.

usage: ncu_hot_sass.py SOURCE.csv [TOP]
Prints the header (so unknown column names are visible), then the TOP instructions by warp-stall
samples with their share of all samples and every non-zero per-reason column.
"""
import csv
import sys


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 45
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    # ncu may print a preamble before the CSV: start at the first line that looks like a header
    start = next((i for i, l in enumerate(lines) if l.startswith('"') and "Source" in l), 0)
    rows = list(csv.reader(lines[start:]))
    if not rows:
        print("no rows")
        return
    head = rows[0]
    print("columns:", " | ".join(head))
    src = next((i for i, h in enumerate(head) if h.strip() == "Source"), 1)
    samp = next((i for i, h in enumerate(head) if "Sampling (All" in h), None)
    if samp is None:
        samp = next((i for i, h in enumerate(head) if "Sampl" in h), None)
    if samp is None:
        print("no sampling column")
        return
    body = [r for r in rows[1:] if len(r) == len(head) and num(r[samp]) is not None]
    total = sum(num(r[samp]) for r in body) or 1.0
    print(f"instructions {len(body)}, samples {total:.0f}")
    for r in sorted(body, key=lambda r: -num(r[samp]))[:top]:
        extra = [f"{head[i][:28]}={r[i]}" for i in range(len(head))
                 if i not in (src, samp) and "stall" in head[i].lower() and num(r[i])]
        addr = r[0]
        print(f"{100 * num(r[samp]) / total:5.1f}%  {addr:>8}  {r[src].strip()[:60]:60s} {' '.join(extra)[:200]}")


if __name__ == "__main__":
    main()

"""What the table writers in bench/ read from their inputs: `mixq bench --json` rows, peers.py rows,
the read ceiling of a bench's device line, and Marlin's published H100 times."""
import os
import re


def index(rep):
    """A `mixq bench --json` report's rows by (scheme, K, N, M); unsupported rows left out."""
    return {(r["scheme"], r["K"], r["N"], r["M"]): r for r in rep["results"] if not r.get("unsupported")}


def peer_index(rep):
    """A peers.py report's rows by (K, N, M); an absent report (None) has none."""
    return {(r["K"], r["N"], r["M"]): r for r in rep.get("rows", [])} if rep else {}


def read_ceiling_tbs(device):
    """The streaming-read ceiling (TB/s) that `mixq bench` measured and wrote into its device line."""
    m = re.search(r"streaming-read ceiling ([0-9.]+) TB/s", device)
    return float(m.group(1)) if m else None


def marlin_h100():
    """Marlin W4 g128 FP16 µs on the H100 by (K, N, M), from anchors.md (not runnable on the GPU
    machine; shown for orientation)."""
    out = {}
    for line in open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "marlin_h100_anchors.tsv")):
        if line.strip() and not line.startswith("#"):
            k, n, m, us = line.split()
            out[(int(k), int(n), int(m))] = float(us)
    return out

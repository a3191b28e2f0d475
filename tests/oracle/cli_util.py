"""Helpers shared by the oracle tests that drive the real `mixq` CLI: running it, reading
`mixq inspect`'s table, and checking `mixq matmul` against a float64 product."""
import os
import re
import subprocess

import numpy as np


def run_cli(mixq, *args, expect_ok=True):
    r = subprocess.run([mixq, *map(str, args)], capture_output=True, text=True, timeout=300)
    if expect_ok:
        assert r.returncode == 0, f"mixq {' '.join(map(str, args))}: {r.stderr}"
    return r


def expect_clean_failure(mixq, *args, needles=()):
    """Non-zero exit (1 or 2, no signal), exactly one line on stderr holding every needle."""
    r = run_cli(mixq, *args, expect_ok=False)
    assert r.returncode in (1, 2), (args, r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and r.stderr.endswith("\n"), (args, r.stderr)
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    return r.stderr


def cli_dequantize(mixq, path, tensor, workdir):
    out = os.path.join(str(workdir), "cli_deq.npy")
    if os.path.exists(out):
        os.remove(out)
    run_cli(mixq, "dequantize", path, tensor, "-o", out)
    return np.load(out)


ROW = re.compile(r"^([* ]) (\S+)\s+(.+?)\s+(\[[-0-9, ]*\])\s+([0-9.]+)\s+([0-9]+)$")


def inspect(mixq, path):
    """`mixq inspect` parsed: (format, {name: dict(type, shape, bpw, bytes, weight)}, metadata)."""
    out = run_cli(mixq, "inspect", path, "--max-value-chars", "100000").stdout
    lines = out.splitlines()
    fmt = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("format:"))
    n_tensors = int(next(l.split(":", 1)[1] for l in lines if l.startswith("tensors:")))
    tensors, metadata, in_meta = {}, {}, False
    for line in lines:
        if line == "metadata:":
            in_meta = True
            continue
        if in_meta and line.startswith("  ") and " = " in line:
            k, v = line[2:].split(" = ", 1)
            metadata[k] = v
            continue
        m = ROW.match(line)
        if m and m.group(2) != "name":
            shape = [int(s) for s in m.group(4)[1:-1].split(",") if s.strip()]
            tensors[m.group(2)] = dict(type=m.group(3).strip(), shape=shape,
                                       bpw=float(m.group(5)), bytes=int(m.group(6)),
                                       weight=m.group(1) == "*")
    assert len(tensors) == n_tensors, out
    return fmt, tensors, metadata


def check_matmul(mixq, workdir, path, tensor, w_ref, ms=(1, 11), seed=0, tol=1e-5):
    """`mixq matmul` on the cpu and ref backends with f32 activations against
    X.astype(float64) @ W.T, W the float64 dequantized weight [N, K]: relative error <= tol."""
    w_ref = np.asarray(w_ref, dtype=np.float64)
    N, K = w_ref.shape
    rng = np.random.default_rng(seed)
    worst = 0.0
    for M in ms:
        x = rng.standard_normal((M, K)).astype(np.float32)
        xp = os.path.join(str(workdir), f"x{M}.npy")
        np.save(xp, x)
        ref = x.astype(np.float64) @ w_ref.T
        for backend in ("cpu", "ref"):
            out = os.path.join(str(workdir), f"y{M}_{backend}.npy")
            if os.path.exists(out):
                os.remove(out)
            run_cli(mixq, "matmul", "--weights", f"{path}:{tensor}", "--input", xp, "-o", out,
                    "--backend", backend, "--threads", "2")
            y = np.load(out)
            assert y.dtype == np.float32 and y.shape == (M, N), (y.dtype, y.shape)
            assert np.all(np.isfinite(y))
            rel = np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(ref)
            assert rel <= tol, (tensor, backend, M, rel)
            worst = max(worst, rel)
    return worst

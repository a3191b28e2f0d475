"""The command-line tools of the package: mixq.plot on bench / bench_model JSON, and the
bench_model smoke test (--tiny, CPU)."""
import json
import subprocess
import sys

import pytest


def bench_doc():
    rows = []
    for N, K in ((256, 512), (512, 512)):
        for M in (1, 4, 64):
            for scheme, speed in (("dense", 1.0), ("w4g128", 2.5 / M ** 0.2)):
                rows.append(dict(scheme=scheme, act="f32 weights" if scheme == "dense" else
                                 "weight-only", N=N, K=K, M=M, gb_per_s=100.0 * speed,
                                 tflop_per_s=0.1 * M * speed, speedup_vs_baseline=speed))
    return {"backend": "cpu", "device": "test (streaming-read ceiling 0.2 TB/s on 1 MB)",
            "baseline": "dense", "results": rows}


def test_plot_bench_and_model_json(tmp_path):
    pytest.importorskip("matplotlib", reason="needs matplotlib")
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(bench_doc()))
    out = tmp_path / "bench.png"
    subprocess.run([sys.executable, "-m", "mixq.plot", str(src), "-o", str(out)], check=True)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    model = {"kind": "mixq.bench_model", "results": [
        dict(model="tiny", scheme=s, batch=b, tokens_per_s=t * b, speedup=t / 10, device="cpu",
             compile="none") for s, t in (("bf16", 10.0), ("w4a16", 25.0)) for b in (1, 4)]}
    src.write_text(json.dumps(model))
    subprocess.run([sys.executable, "-m", "mixq.plot", str(src), "-o", str(out)], check=True)
    assert out.stat().st_size > 1000
    src.write_text("{}")
    r = subprocess.run([sys.executable, "-m", "mixq.plot", str(src), "-o", str(out)])
    assert r.returncode == 2


def test_bench_model_tiny_smoke(tmp_path):
    pytest.importorskip("torch", reason="needs torch")
    pytest.importorskip("transformers", reason="needs transformers")
    out = tmp_path / "model.json"
    r = subprocess.run([sys.executable, "-m", "mixq.bench_model", "--tiny", "--tokens", "4",
                        "--batch", "1", "--schemes", "w4a16,w8a16", "--device", "cpu",
                        "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["results"]
    assert [r["scheme"] for r in rows] == ["f32", "w4a16", "w8a16"]
    for row in rows[1:]:
        assert row["tokens_per_s"] > 0 and 0 <= row["linear_share"] <= 1
        assert row["logits_rel_err"] < 1e-3  # f32 activations: the kernels' rounding only

"""Shared fixtures of the Python package tests. Tests that need torch, a GPU or CuPy skip with a
visible reason where those are absent (pytest -rs lists them)."""
import os
import sys

import numpy as np
import pytest

# The oracle tests' independent numpy packers / decoders (GPTQ, AWQ, FP8, mixq layout).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "oracle"))

try:
    import torch
    HAVE_TORCH = True
except ImportError:  # the numpy path is tested without torch
    torch = None
    HAVE_TORCH = False

import mixq

HAVE_CUDA = bool(HAVE_TORCH and torch.cuda.is_available() and mixq.cuda_available())
CUDA_SKIP_REASON = ("needs a GPU, torch with CUDA and mixq built with CUDA "
                    f"(torch: {HAVE_TORCH}, mixq built with CUDA: {mixq.built_with_cuda})")

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason=CUDA_SKIP_REASON)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def rel_err(got, ref):
    """||got - ref|| / ||ref|| in float64."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def reference_linear(x, qw, bias=None, lo=-np.inf, hi=np.inf):
    """float64 x @ dequantize(qw).T + bias, clamped: the oracle every test compares against."""
    w = mixq.dequantize(qw).astype(np.float64)
    y = np.asarray(x, dtype=np.float64).reshape(-1, qw.K) @ w.T
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float64)
    return np.clip(y, lo, hi)

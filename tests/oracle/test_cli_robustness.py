"""The mixq command-line tool under careless and hostile use (issue #34): an output that is an
input, FIFOs, directories and devices given as files, missing directories, huge tensor names,
values a format cannot hold, data on standard output, FILE:TENSOR ambiguity. Every failing case
asserts the exact exit code (1 runtime, 2 usage), exactly one stderr line "mixq...: ..." holding
the expected words, and that every input file is byte-identical afterwards (and no temporary
file is left behind). Sharded checkpoints have their own suite in test_cli_sharded.py."""
import hashlib
import json
import os
import stat
import subprocess
import time

import numpy as np
import pytest

from st_packers import save, st_numpy  # noqa: F401  (skips the module without safetensors)

TIMEOUT = 60


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(mixq, *args, timeout=TIMEOUT):
    return subprocess.run([mixq, *map(str, args)], capture_output=True, timeout=timeout)


def fails(mixq, code, needles, *args, unchanged=(), timeout=TIMEOUT):
    """mixq <args> exits with `code` and one stderr line holding every needle; the files in
    `unchanged` keep their bytes; the directories they live in get no stray temporary files."""
    before = {p: digest(p) for p in unchanged}
    listing = {os.path.dirname(os.path.abspath(p)): set(os.listdir(os.path.dirname(
        os.path.abspath(p)))) for p in unchanged}
    r = run(mixq, *args, timeout=timeout)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == code, (args, r.returncode, err)
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), (args, err)
    assert lines[0].startswith("mixq"), (args, err)
    for n in needles:
        assert n in err, (n, err)
    for p, h in before.items():
        assert digest(p) == h, f"{p} changed"
    for d, names in listing.items():
        stray = [n for n in set(os.listdir(d)) - names if ".tmp-" in n]
        assert not stray, stray
    return err


@pytest.fixture
def model(workdir):
    """A small safetensors model with a norm and a bias (what triggered the SIGBUS), and an
    activation .npy."""
    d = str(workdir)
    rng = np.random.default_rng(34)
    path = os.path.join(d, "m.safetensors")
    st_numpy.save_file({"layer.weight": rng.standard_normal((8, 64)).astype(np.float32),
                        "layer.bias": rng.standard_normal(8).astype(np.float32),
                        "norm.weight": np.ones(64, dtype=np.float32)}, path)
    x = os.path.join(d, "x.npy")
    np.save(x, rng.standard_normal((3, 64)).astype(np.float32))
    return path, x


# ----------------------------------------------------------------------------- output == input

@pytest.mark.parametrize("fmt,scheme", [("mixq", "w4g128"), ("gguf", "q8_0")])
def test_quantize_onto_its_input_is_refused(mixq_cli, model, fmt, scheme):
    path, _ = model
    for args in (["quantize", path, "-o", path, "--format", fmt, "--scheme", scheme],
                 ["quantize", "-o", path, "--scheme", scheme, "--format", fmt, path]):
        fails(mixq_cli, 2, ["-o '" + path + "' is the input file", "destroy the input"], *args,
              unchanged=[path])


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_output_reaching_the_input_through_a_link_is_refused(mixq_cli, model, workdir, kind):
    path, x = model
    link = os.path.join(str(workdir), "link." + kind)
    if os.path.lexists(link):
        os.remove(link)
    (os.link if kind == "hardlink" else os.symlink)(path, link)
    fails(mixq_cli, 2, ["is the input file"], "quantize", path, "-o", link, "--scheme", "q8_0",
          "--format", "gguf", unchanged=[path])
    fails(mixq_cli, 2, ["is the input file"], "dequantize", path, "layer.weight", "-o", link,
          unchanged=[path])
    fails(mixq_cli, 2, ["is the input file"], "matmul", "--weights", path + ":layer.weight",
          "--input", x, "-o", link, unchanged=[path, x])


def test_dequantize_and_matmul_onto_inputs_are_refused(mixq_cli, model):
    path, x = model
    fails(mixq_cli, 2, ["is the input file"], "dequantize", path, "layer.weight", "-o", path,
          unchanged=[path])
    fails(mixq_cli, 2, ["is the input file"], "dequantize", "-o", path, path, "layer.weight",
          unchanged=[path])
    for out in (path, x):
        fails(mixq_cli, 2, ["-o '" + out + "' is the input file"], "matmul", "--weights",
              path + ":layer.weight", "--input", x, "-o", out, unchanged=[path, x])
    fails(mixq_cli, 2, ["is the input file"], "matmul", "-o", x, "--input", x, "--weights",
          path + ":layer.weight", unchanged=[path, x])


def test_quantize_onto_an_input_gguf_and_back(mixq_cli, model, workdir):
    path, x = model
    g = os.path.join(str(workdir), "m.gguf")
    assert run(mixq_cli, "quantize", path, "-o", g, "--format", "gguf", "--scheme",
               "q8_0").returncode == 0
    fails(mixq_cli, 2, ["is the input file"], "dequantize", g, "layer.weight", "-o", g,
          unchanged=[g])
    fails(mixq_cli, 2, ["is the input file"], "matmul", "--weights", g + ":layer.weight",
          "--input", x, "-o", g, unchanged=[g, x])


# ----------------------------------------------------------------------------- special files

@pytest.fixture
def fifo(workdir):
    p = os.path.join(str(workdir), "p.fifo")
    if os.path.lexists(p):
        os.remove(p)
    os.mkfifo(p)
    return p


def test_fifo_inputs_fail_at_once(mixq_cli, model, fifo, workdir):
    path, x = model
    out = os.path.join(str(workdir), "o.npy")
    if os.path.exists(out):  # the work directory outlives a run
        os.remove(out)
    t0 = time.monotonic()
    fails(mixq_cli, 1, ["'" + fifo + "' is a FIFO, not a regular file"], "inspect", fifo,
          timeout=10)
    fails(mixq_cli, 1, ["is a FIFO"], "dequantize", fifo, "w", "-o", out, timeout=10)
    fails(mixq_cli, 1, ["is a FIFO"], "quantize", fifo, "-o", out, "--scheme", "w4g128",
          timeout=10)
    fails(mixq_cli, 1, ["is a FIFO"], "quantize", fifo, "-o", out, "--scheme", "q8_0",
          "--format", "gguf", timeout=10)
    fails(mixq_cli, 1, ["input '" + fifo + "' is a FIFO"], "matmul", "--weights",
          path + ":layer.weight", "--input", fifo, "-o", out, unchanged=[path], timeout=10)
    fails(mixq_cli, 1, ["is a FIFO"], "matmul", "--weights", path + ":layer.weight", "--input",
          x, "--bias", fifo, "-o", out, unchanged=[path, x], timeout=10)
    fails(mixq_cli, 1, ["is a FIFO"], "matmul", "--weights", fifo, "--tensor", "w", "--input", x,
          "-o", out, unchanged=[x], timeout=10)
    assert time.monotonic() - t0 < 30
    assert not os.path.exists(out)


def test_fifo_output_without_reader_fails_at_once(mixq_cli, model, fifo):
    path, _ = model
    fails(mixq_cli, 1, ["no process is reading this FIFO"], "dequantize", path, "layer.weight",
          "-o", fifo, unchanged=[path], timeout=10)


def test_directories_and_devices_as_inputs(mixq_cli, model, workdir):
    path, x = model
    d = os.path.join(str(workdir), "adir")
    os.makedirs(d, exist_ok=True)
    out = os.path.join(str(workdir), "o.npy")
    fails(mixq_cli, 1, ["input '" + d + "' is a directory, not a regular file"], "matmul",
          "--weights", path + ":layer.weight", "--input", d, "-o", out, unchanged=[path])
    fails(mixq_cli, 1, ["'" + d + "' holds no *.safetensors.index.json"], "inspect", d)
    fails(mixq_cli, 1, ["holds no *.safetensors.index.json"], "quantize", d, "-o", out,
          "--scheme", "w8g128")
    fails(mixq_cli, 1, ["'/dev/zero' is a character device, not a regular file"], "inspect",
          "/dev/zero", timeout=10)
    fails(mixq_cli, 1, ["'/dev/zero' is a character device"], "matmul", "--weights",
          path + ":layer.weight", "--input", "/dev/zero", "-o", out, unchanged=[path], timeout=10)
    fails(mixq_cli, 1, ["'/dev/zero' is a character device"], "dequantize", "/dev/zero", "w",
          "-o", out, timeout=10)
    fails(mixq_cli, 1, ["cannot open: No such file or directory"], "inspect",
          os.path.join(d, "missing.safetensors"))


# ----------------------------------------------------------------------------- output paths

def test_outputs_in_missing_directories_fail_before_any_work(mixq_cli, model, workdir):
    path, x = model
    bad = os.path.join(str(workdir), "nodir", "out")
    fails(mixq_cli, 1, ["-o '" + bad + "': directory", "does not exist"], "dequantize", path,
          "layer.weight", "-o", bad, unchanged=[path])
    fails(mixq_cli, 1, ["does not exist"], "matmul", "--weights", path + ":layer.weight",
          "--input", x, "-o", bad, unchanged=[path, x])
    for fmt, scheme in (("mixq", "w4g128"), ("gguf", "q4_0")):
        fails(mixq_cli, 1, ["does not exist"], "quantize", path, "-o", bad, "--format", fmt,
              "--scheme", scheme, unchanged=[path])
    # bench --json: refused before the benchmark runs (it would take seconds to minutes)
    t0 = time.monotonic()
    fails(mixq_cli, 1, ["--json '" + bad + "': directory", "does not exist"], "bench",
          "--quick", "--backend", "cpu", "--json", bad)
    assert time.monotonic() - t0 < 5


def test_output_that_is_a_directory(mixq_cli, model, workdir):
    path, x = model
    d = os.path.join(str(workdir), "outdir")
    os.makedirs(d, exist_ok=True)
    fails(mixq_cli, 1, ["-o '" + d + "' is a directory"], "dequantize", path, "layer.weight",
          "-o", d, unchanged=[path])
    fails(mixq_cli, 1, ["--json '" + d + "' is a directory"], "bench", "--quick", "--json", d)


def test_dequantize_to_stdout_keeps_the_data_clean(mixq_cli, model, workdir):
    path, _ = model
    r = run(mixq_cli, "dequantize", path, "layer.weight", "-o", "/dev/stdout")
    assert r.returncode == 0, r.stderr
    ref = os.path.join(str(workdir), "ref.npy")
    assert run(mixq_cli, "dequantize", path, "layer.weight", "-o", ref).returncode == 0
    assert r.stdout == open(ref, "rb").read()
    assert b"layer.weight" in r.stderr and len(r.stderr.splitlines()) == 1


def test_failed_write_leaves_the_old_output_and_no_temporary(mixq_cli, workdir):
    d = str(workdir)
    src = os.path.join(d, "big.safetensors")
    st_numpy.save_file({"w": np.full((4, 32), 1e6, dtype=np.float32)}, src)
    out = os.path.join(d, "old.gguf")
    with open(out, "wb") as f:
        f.write(b"previous contents")
    fails(mixq_cli, 1, ["tensor 'w'", "Q4_0 block 0 scale d", "overflows f16"], "quantize", src,
          "-o", out, "--format", "gguf", "--scheme", "q4_0", unchanged=[src, out])


def test_replacing_an_output_keeps_its_mode_and_follows_links(mixq_cli, model, workdir):
    path, _ = model
    d = str(workdir)
    target = os.path.join(d, "real.npy")
    link = os.path.join(d, "alias.npy")
    for p in (target, link):
        if os.path.lexists(p):
            os.remove(p)
    with open(target, "wb") as f:
        f.write(b"old")
    os.chmod(target, 0o640)
    os.symlink(target, link)
    assert run(mixq_cli, "dequantize", path, "layer.weight", "-o", link).returncode == 0
    assert os.path.islink(link) and np.load(target).shape == (8, 64)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


# ----------------------------------------------------------------------------- names

def test_huge_tensor_names_and_patterns(mixq_cli, workdir):
    d = str(workdir)
    long_name = "a" * 50000 + ".weight"
    path = os.path.join(d, "long.safetensors")
    st_numpy.save_file({long_name: np.ones((4, 32), dtype=np.float32),
                        "b.weight": np.ones((4, 32), dtype=np.float32)}, path)
    out = os.path.join(d, "long_q.safetensors")
    # patterns that make a backtracking matcher recurse per character (or worse) on the name
    for pattern, n in (("a.*t$", 1), ("(a|b)+\\.weight$", 2), ("^(a*)*\\.weight$", 1),
                       ("a{2,100}.*\\.w", 1)):
        if os.path.exists(out):
            os.remove(out)
        r = run(mixq_cli, "quantize", path, "-o", out, "--scheme", "w8g128", "--only", pattern,
                timeout=30)
        assert r.returncode == 0, (pattern, r.stderr)
        assert f": {n} tensor(s) quantized".encode() in r.stdout, (pattern, r.stdout)
    before = digest(path)
    r = run(mixq_cli, "inspect", path, "--max-value-chars", "20")
    assert r.returncode == 0 and long_name.encode() in r.stdout
    assert digest(path) == before
    fails(mixq_cli, 2, ["--only: invalid pattern '(a'", "missing ')'"], "quantize", path, "-o",
          out, "--scheme", "w8g128", "--only", "(a", unchanged=[path])
    fails(mixq_cli, 2, ["--skip: invalid pattern", "back-references"], "quantize", path, "-o",
          out, "--scheme", "w8g128", "--skip", "(a)\\1", unchanged=[path])


def test_matmul_file_tensor_split_is_unambiguous(mixq_cli, model, workdir):
    path, x = model
    d = str(workdir)
    a = os.path.join(d, "a")
    ab = os.path.join(d, "a:b")
    for p in (a, ab):
        with open(p, "wb") as f:
            f.write(open(path, "rb").read())
    out = os.path.join(d, "y.npy")
    fails(mixq_cli, 2, ["--weights '" + ab + ":layer.weight' is ambiguous", "--tensor"],
          "matmul", "--weights", ab + ":layer.weight", "--input", x, "-o", out,
          unchanged=[a, ab, x])
    r = run(mixq_cli, "matmul", "--weights", ab, "--tensor", "layer.weight", "--input", x, "-o",
            out)
    assert r.returncode == 0, r.stderr
    r = run(mixq_cli, "matmul", "--help")
    assert b"--tensor" in r.stdout and b"ambiguous" in r.stdout and b"longest" not in r.stdout
    fails(mixq_cli, 1, ["no part before a ':' is an existing file"], "matmul", "--weights",
          os.path.join(d, "zz") + ":w", "--input", x, "-o", out)


# ----------------------------------------------------------------------------- value range

def test_values_a_format_cannot_hold_are_errors(mixq_cli, workdir):
    d = str(workdir)
    rng = np.random.default_rng(1)
    src = os.path.join(d, "range.safetensors")
    st_numpy.save_file({"big": (rng.standard_normal((4, 256)) * 1e5).astype(np.float32),
                        "huge": np.full((4, 256), 1e6, dtype=np.float32),
                        "tiny": (rng.standard_normal((4, 256)) * 1e-6).astype(np.float32),
                        "tiny16": (rng.standard_normal((4, 256)) * 1e-9).astype(np.float32)},
                       src)
    out = os.path.join(d, "range.out")
    if os.path.exists(out):  # the work directory outlives a run
        os.remove(out)
    gguf = ["--format", "gguf"]
    fails(mixq_cli, 1, ["tensor 'big'", "overflows f16"], "quantize", src, "-o", out, *gguf,
          "--scheme", "f16", "--only", "^big$", unchanged=[src])
    fails(mixq_cli, 1, ["tensor 'huge'", "Q4_0 block 0 scale d", "overflows f16"], "quantize",
          src, "-o", out, *gguf, "--scheme", "q4_0", "--only", "^huge$", unchanged=[src])
    fails(mixq_cli, 1, ["tensor 'tiny'", "underflows f16"], "quantize", src, "-o", out, *gguf,
          "--scheme", "q8_0", "--only", "^tiny$", unchanged=[src])
    fails(mixq_cli, 1, ["tensor 'tiny16'", "values underflow f16", "use f32 or bf16"],
          "quantize", src, "-o", out, *gguf, "--scheme", "f16", "--only", "^tiny16$",
          unchanged=[src])
    fails(mixq_cli, 1, ["tensor 'tiny'", "scale of block", "underflows f16", "-f32"], "quantize",
          src, "-o", out, "--scheme", "w8g128", "--only", "^tiny$", unchanged=[src])
    fails(mixq_cli, 1, ["tensor 'huge'", "does not fit in f16"], "quantize", src, "-o", out,
          "--scheme", "w4g128", "--only", "^huge$", unchanged=[src])
    assert not os.path.exists(out)
    # the suggested fixes work, and mixq reads back what it wrote
    for args in (["--scheme", "w8g128-f32", "--only", "tiny"], ["--scheme", "w4g128-f32"],
                 [*gguf, "--scheme", "bf16"], [*gguf, "--scheme", "f32"]):
        if os.path.exists(out):
            os.remove(out)
        r = run(mixq_cli, "quantize", src, "-o", out, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert run(mixq_cli, "inspect", out).returncode == 0
    if os.path.exists(out):
        os.remove(out)
    r = run(mixq_cli, "quantize", src, "-o", out, "--scheme", "w8g128-f32", "--only", "^tiny$")
    w = os.path.join(d, "tiny.npy")
    assert run(mixq_cli, "dequantize", out, "tiny", "-o", w).returncode == 0
    t = st_numpy.load_file(src)["tiny"]
    assert np.count_nonzero(np.load(w)) >= 0.9 * t.size  # not zeroed (94% were before)

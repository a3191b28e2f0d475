"""Sharded safetensors checkpoints (model.safetensors.index.json + shards, written here with the
real `safetensors` package and the independent GPTQ / AWQ / FP8 packers of st_packers.py) through
every mixq command: inspect, dequantize, matmul and quantize give exactly what the same tensors
in one file give, whether mixq is pointed at the index or at its directory, also when a module's
parts live in different shards. Missing, extra and mismatched shards are refused with one line
naming the index and the shard, exit 1, and no file changes."""
import json
import os
import shutil

import numpy as np
import pytest

from cli_util import inspect
from st_packers import awq_pack, e4m3_decode, gptq_tensors, save, st_numpy
from test_cli_robustness import digest, fails, run


def write_sharded(d, shards, renames=None, metadata=None):
    """shards: list of {name: array}; writes model-0000i-of-0000n.safetensors and the index
    (HF layout). Returns the index path."""
    os.makedirs(d, exist_ok=True)
    n = len(shards)
    weight_map, total = {}, 0
    for i, tensors in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{n:05d}.safetensors"
        save(os.path.join(d, name), tensors,
             renames={k: v for k, v in (renames or {}).items() if k in tensors},
             metadata=metadata)
        for k, v in tensors.items():
            weight_map[k] = name
            total += v.nbytes
    index = os.path.join(d, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return index


def checkpoint(workdir, name):
    """One checkpoint in two forms: sharded (parts of each module split across shards) and one
    file, in sibling directories with the same config.json."""
    rng = np.random.default_rng(7)
    gptq, gptq_ref = gptq_tensors(rng, 4, 256, 64, 128, act_order=True, v1=True, prefix="q")
    q = rng.integers(0, 16, size=(128, 40), dtype=np.uint32)
    z = rng.integers(0, 16, size=(4, 40), dtype=np.uint32)
    s = rng.uniform(0.001, 0.1, size=(4, 40)).astype(np.float16)
    w8 = rng.integers(0, 256, size=(130, 200), dtype=np.uint8)
    w8[(w8 & 0x7F) == 0x7F] = 0x38
    sinv = rng.uniform(1e-3, 1e-2, size=(2, 2)).astype(np.float32)
    dense = rng.standard_normal((16, 64)).astype(np.float32)
    norm = np.ones(64, dtype=np.float32)
    shards = [
        {"q.qweight": gptq["q.qweight"], "a.qweight": awq_pack(q), "f.weight": w8,
         "dense.weight": dense},
        {"q.qzeros": gptq["q.qzeros"], "q.g_idx": gptq["q.g_idx"], "a.qzeros": awq_pack(z),
         "f.weight_scale_inv": sinv, "norm.weight": norm},
        {"q.scales": gptq["q.scales"], "a.scales": s},
    ]
    renames = {"f.weight": "F8_E4M3"}
    # GPTQ and AWQ are told apart by their shapes; the config beside the index gives FP8's blocks
    config = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    base = os.path.join(str(workdir), name)
    shutil.rmtree(base, ignore_errors=True)
    index = write_sharded(os.path.join(base, "sharded"), shards, renames)
    one = os.path.join(base, "single", "model.safetensors")
    os.makedirs(os.path.dirname(one))
    merged = {k: v for sh in shards for k, v in sh.items()}
    save(one, merged, renames=renames)
    for d in (os.path.dirname(index), os.path.dirname(one)):
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
    gi = np.arange(128) // 32
    refs = {
        "q": gptq_ref,
        "a": ((q.astype(np.float32) - z[gi].astype(np.float32)) * s[gi].astype(np.float32)).T,
        "f.weight": e4m3_decode(w8) * np.repeat(np.repeat(sinv, 128, 0), 128, 1)[:130, :200],
        "dense.weight": dense,
    }
    return index, one, refs


def all_files(d):
    return [os.path.join(d, f) for f in sorted(os.listdir(d))]


def test_sharded_inspect_matches_one_file(mixq_cli, workdir):
    index, one, _ = checkpoint(workdir, "inspect")
    fmt1, t1, _ = inspect(mixq_cli, one)
    for path in (index, os.path.dirname(index)):
        fmt, t, meta = inspect(mixq_cli, path)
        assert fmt == fmt1 + ", 3 shards", fmt
        assert t == t1
        assert "index.total_size" in meta
    assert {k for k, v in t1.items() if v["weight"]} == {"q", "a", "f.weight", "dense.weight"}


def test_sharded_dequantize_and_matmul(mixq_cli, workdir):
    index, one, refs = checkpoint(workdir, "deq")
    d = os.path.dirname(index)
    before = {p: digest(p) for p in all_files(d)}
    x = os.path.join(str(workdir), "x.npy")
    for name, ref in refs.items():
        for path in (index, d, one):
            out = os.path.join(str(workdir), "deq.npy")
            r = run(mixq_cli, "dequantize", path, name, "-o", out)
            assert r.returncode == 0, r.stderr
            assert np.array_equal(np.load(out), ref), (name, path)
        K = ref.shape[1]
        np.save(x, np.random.default_rng(K).standard_normal((3, K)).astype(np.float32))
        ys = []
        for spec in (index + ":" + name, d + ":" + name):
            y = os.path.join(str(workdir), "y.npy")
            r = run(mixq_cli, "matmul", "--weights", spec, "--input", x, "-o", y, "--backend",
                    "ref")
            assert r.returncode == 0, r.stderr
            ys.append(np.load(y))
        ref_y = np.load(x).astype(np.float64) @ ref.T.astype(np.float64)
        assert np.allclose(ys[0], ref_y, rtol=1e-4, atol=1e-4) and np.array_equal(ys[0], ys[1])
    assert before == {p: digest(p) for p in all_files(d)}


@pytest.mark.parametrize("fmt,scheme", [("mixq", "w8g64"), ("gguf", "q8_0")])
def test_sharded_quantize_matches_one_file(mixq_cli, workdir, fmt, scheme):
    index, one, _ = checkpoint(workdir, "quant_" + fmt)
    outs = []
    for path in (index, one):
        out = os.path.join(str(workdir), f"out_{len(outs)}.{fmt}")
        if os.path.exists(out):
            os.remove(out)
        r = run(mixq_cli, "quantize", path, "-o", out, "--format", fmt, "--scheme", scheme,
                "--only", "^dense")
        assert r.returncode == 0, r.stderr
        outs.append(out)
    w = [os.path.join(str(workdir), f"w{i}.npy") for i in range(2)]
    for i in range(2):
        assert run(mixq_cli, "dequantize", outs[i], "dense.weight", "-o", w[i]).returncode == 0
    assert np.array_equal(np.load(w[0]), np.load(w[1]))


def test_sharded_output_onto_a_shard_is_refused(mixq_cli, workdir):
    index, _, _ = checkpoint(workdir, "onto")
    d = os.path.dirname(index)
    shard = os.path.join(d, "model-00002-of-00003.safetensors")
    files = all_files(d)
    fails(mixq_cli, 2, ["-o '" + shard + "' is the input file"], "quantize", index, "-o", shard,
          "--scheme", "w8g128", unchanged=files)
    fails(mixq_cli, 2, ["is the input file"], "dequantize", d, "dense.weight", "-o", index,
          unchanged=files)
    fails(mixq_cli, 2, ["is the input file"], "dequantize", index, "q", "-o",
          os.path.join(d, "config.json"), unchanged=files)


def broken(workdir, name):
    index, _, _ = checkpoint(workdir, name)
    return index, os.path.dirname(index)


def test_missing_shard(mixq_cli, workdir):
    index, d = broken(workdir, "missing")
    os.remove(os.path.join(d, "model-00003-of-00003.safetensors"))
    files = all_files(d)
    needles = [index, "shard \"model-00003-of-00003.safetensors\"", "is missing"]
    fails(mixq_cli, 1, needles, "inspect", index, unchanged=files)
    fails(mixq_cli, 1, needles, "dequantize", d, "q", "-o",
          os.path.join(str(workdir), "o.npy"), unchanged=files)
    # a weight whose shards are all there still loads: only its shards are opened
    out = os.path.join(str(workdir), "dense.npy")
    assert run(mixq_cli, "dequantize", index, "dense.weight", "-o", out).returncode == 0


def test_extra_shard_file(mixq_cli, workdir):
    index, d = broken(workdir, "extra")
    st_numpy.save_file({"stale": np.zeros(4, dtype=np.float32)},
                       os.path.join(d, "model-00004-of-00003.safetensors"))
    fails(mixq_cli, 1, [index, "\"model-00004-of-00003.safetensors\"", "not in weight_map"],
          "inspect", d, unchanged=all_files(d))


def test_index_and_shards_disagree(mixq_cli, workdir):
    index, d = broken(workdir, "mismatch")
    with open(index) as f:
        idx = json.load(f)
    good = json.dumps(idx)
    # a tensor the index puts in another shard than the one holding it
    idx["weight_map"]["q.scales"] = "model-00001-of-00003.safetensors"
    with open(index, "w") as f:
        json.dump(idx, f)
    # (shard 1 is read first and lacks q.scales; the unit tests cover a misplaced tensor found
    # from the other side)
    fails(mixq_cli, 1, ["tensor \"q.scales\" in shard \"model-00001-of-00003.safetensors\"",
                        "which does not hold it"], "inspect", index, unchanged=all_files(d))
    fails(mixq_cli, 1, ["tensor \"q.scales\" in shard \"model-00001-of-00003.safetensors\""],
          "dequantize", index, "q", "-o", os.path.join(str(workdir), "o.npy"),
          unchanged=all_files(d))
    # a tensor listed but not in its shard
    idx = json.loads(good)
    idx["weight_map"]["ghost.weight"] = "model-00002-of-00003.safetensors"
    with open(index, "w") as f:
        json.dump(idx, f)
    fails(mixq_cli, 1, ["lists tensor \"ghost.weight\" in shard \"model-00002-of-00003",
                        "which does not hold it"], "inspect", index, unchanged=all_files(d))
    # a tensor in a shard that the index does not list
    idx = json.loads(good)
    del idx["weight_map"]["norm.weight"]
    with open(index, "w") as f:
        json.dump(idx, f)
    fails(mixq_cli, 1, ["holds tensor \"norm.weight\", which the index", "does not list"],
          "inspect", index, unchanged=all_files(d))
    # shard series that does not add up, names outside the directory, not an index
    for weight_map, needle in (
            ({"a": "model-00001-of-00003.safetensors", "b": "model-00003-of-00003.safetensors"},
             "names 2 of the 3 shards"),
            ({"a": "../model-00001-of-00003.safetensors"}, "not a plain file name"),
            ({"a": "pytorch_model-00001-of-00002.bin"}, "is not a .safetensors file")):
        with open(index, "w") as f:
            json.dump({"weight_map": weight_map}, f)
        fails(mixq_cli, 1, [index, needle], "inspect", index, unchanged=all_files(d))
    with open(index, "w") as f:
        json.dump({"architectures": ["x"]}, f)
    fails(mixq_cli, 1, ["no \"weight_map\" (not a safetensors index file)"], "inspect", index)
    with open(index, "w") as f:
        f.write("{\"weight_map\": {\"a\": ")
    fails(mixq_cli, 1, [index, "JSON"], "inspect", d)

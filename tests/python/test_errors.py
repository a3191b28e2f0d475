"""Bad input raises a Python exception naming the argument (never a crash)."""
import numpy as np
import pytest

import mixq


@pytest.fixture
def pw(rng):
    qw = mixq.quantize(rng.standard_normal((32, 128)).astype(np.float32), "w4g128")
    return mixq.prepare(qw, backend="cpu")


def test_error_classes_carry_code_and_message(pw):
    with pytest.raises(mixq.InvalidArgumentError) as e:
        mixq.linear(np.zeros((2, 100), np.float32), pw)
    assert isinstance(e.value, ValueError) and isinstance(e.value, mixq.MixqError)
    assert e.value.code == "invalid argument"
    assert "x.shape[1] (100)" in str(e.value) and str(e.value).startswith("mixq: invalid argument")


def test_wrong_dtype_names_x(pw):
    with pytest.raises(mixq.InvalidArgumentError, match="x"):
        mixq.linear(np.zeros((2, 128), np.float64), pw)
    with pytest.raises(mixq.InvalidArgumentError, match=r"^mixq: invalid argument: x: dtype"):
        mixq.linear(np.zeros((2, 128), np.complex64), pw)


def test_wrong_out_shape_and_dtype(pw):
    x = np.zeros((2, 128), np.float32)
    with pytest.raises(mixq.InvalidArgumentError, match="y is"):
        mixq.linear(x, pw, out=np.zeros((2, 31), np.float32))
    with pytest.raises(mixq.InvalidArgumentError, match="y: dtype"):
        mixq.linear(x, pw, out=np.zeros((2, 32), np.int32))


def test_read_only_out_names_out(pw):
    out = np.zeros((2, 32), np.float32)
    out.setflags(write=False)
    with pytest.raises(mixq.InvalidArgumentError, match="out: .*read-only"):
        mixq.linear(np.zeros((2, 128), np.float32), pw, out=out)


def test_non_contiguous_rows(pw):
    x = np.zeros((2, 256), np.float32)[:, ::2]
    with pytest.raises(mixq.InvalidArgumentError, match="x: innermost dimension"):
        mixq.linear(x, pw)
    x3 = np.zeros((4, 3, 128), np.float32).transpose(1, 0, 2)
    with pytest.raises(mixq.InvalidArgumentError, match="x: leading dimensions"):
        mixq.linear(x3, pw)


def test_bias_errors(pw):
    x = np.zeros((2, 128), np.float32)
    with pytest.raises(mixq.InvalidArgumentError, match="bias: length 31"):
        mixq.linear(x, pw, bias=np.zeros(31, np.float32))
    with pytest.raises(mixq.InvalidArgumentError, match="bias"):
        mixq.linear(x, pw, bias=np.zeros(32, np.float64))


def test_not_an_array(pw):
    with pytest.raises(mixq.InvalidArgumentError, match="x: cannot view a list"):
        mixq.linear([[1.0] * 128], pw, out=np.zeros((1, 32), np.float32))


def test_unsupported_scheme_and_options(rng):
    w = rng.standard_normal((16, 64)).astype(np.float32)
    with pytest.raises(mixq.InvalidArgumentError, match="scheme 'w3g128'"):
        mixq.quantize(w, "w3g128")
    qw = mixq.quantize(w, "w4g64")
    with pytest.raises(mixq.InvalidArgumentError, match="backend 'tpu'"):
        mixq.prepare(qw, backend="tpu")
    with pytest.raises(mixq.InvalidArgumentError, match="act 'int4'"):
        mixq.prepare(qw, act="int4")
    # fp8 activations take fp8b128 weights, or 4-bit ones in groups of 128 (W4A8): not g64 on K = 256
    qw256 = mixq.quantize(rng.standard_normal((16, 256)).astype(np.float32), "w4g64")
    with pytest.raises(mixq.MixqError, match="W4A8"):
        mixq.prepare(qw256, act="fp8")
    with pytest.raises(ValueError, match="clamp"):
        mixq.linear(np.zeros((1, 64), np.float32), mixq.prepare(qw, backend="cpu"), clamp="tanh")


@pytest.mark.skipif(mixq.built_with_cuda, reason="checks the CPU-only build's CUDA error")
def test_cuda_backend_in_cpu_build(rng):
    qw = mixq.quantize(rng.standard_normal((16, 64)).astype(np.float32), "w4g64")
    with pytest.raises(mixq.MixqError) as e:
        mixq.prepare(qw, backend="cuda")
    assert e.value.code in ("unsupported", "cuda error", "invalid argument")


def test_conv_and_linear_weights_are_not_mixed(rng):
    qw = mixq.quantize(rng.standard_normal((8, 16 * 9)).astype(np.float32), "w8pc")
    pw = mixq.prepare(qw, backend="cpu", conv=(16, 3, 3))
    with pytest.raises(mixq.InvalidArgumentError, match="convolution weight"):
        mixq.linear(np.zeros((1, 144), np.float32), pw)
    lin = mixq.prepare(qw, backend="cpu")
    with pytest.raises(ValueError, match="prepared: a linear weight"):
        mixq.conv2d(np.zeros((1, 16, 5, 5), np.float32), lin)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(mixq.IoError) as e:
        mixq.load(tmp_path / "none.gguf", "w")
    assert isinstance(e.value, OSError) and e.value.code == "i/o error"
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(mixq.FormatError) as e:
        mixq.inspect(bad)
    assert "bad.safetensors" in str(e.value)


def test_tuning_keys_are_checked(rng):
    qw = mixq.quantize(rng.standard_normal((32, 128)).astype(np.float32), "w4g128")
    # a valid key is accepted (it tunes only the CUDA kernels; the CPU result is unchanged)
    x = rng.standard_normal((3, 128)).astype(np.float32)
    a = mixq.linear(x, mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32"))
    b = mixq.linear(x, mixq.prepare(qw, backend="cpu", force_kernel="cpu_f32", tuning="wo_token_tile=64"))
    assert np.array_equal(a, b)
    with pytest.raises(mixq.InvalidArgumentError, match="unknown key 'wo_tile'"):
        mixq.prepare(qw, backend="cpu", tuning="wo_tile=64")
    with pytest.raises(mixq.InvalidArgumentError, match="wo_fold=maybe"):
        mixq.prepare(qw, backend="cpu", tuning="wo_fold=maybe")

"""mixq.torch on the CPU: the custom op, QuantLinear, quantize_, torch.compile, checkpoint
loaders into a small HF-named model."""
import copy
import gc
import json
import math

import numpy as np
import pytest

from conftest import HAVE_TORCH, reference_linear, rel_err

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (the CPU torch path)")

if HAVE_TORCH:
    import torch
    from torch import nn

    import mixq
    import mixq.torch as mt
    from hf_tiny import TinyLlama


def exact(**kw):
    """QuantLinear options for the exact CPU kernel (the M <= 8 default quantizes x to int8)."""
    return dict(force_kernel="cpu_f32", **kw)


def test_op_equals_core_api_bitwise():
    torch.manual_seed(0)
    qw = mixq.quantize(torch.randn(96, 256), "w4g128")
    pw = mixq.prepare(qw, backend="cpu")
    h = mt.register_prepared(pw)
    try:
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            x = torch.randn(7, 256).to(dtype)
            b = torch.randn(96)
            got = torch.ops.mixq.linear(x, h, b, 0.0, math.inf)
            want = mixq.linear(x, pw, bias=b, clamp="relu")
            assert got.dtype == dtype and torch.equal(got, want)
    finally:
        mt.release_prepared(h)


@pytest.mark.parametrize("scheme", ["w4g128", "w8g128", "w4g64zp", "fp8b128"])
def test_quant_linear_matches_float64_reference(scheme):
    torch.manual_seed(1)
    lin = nn.Linear(256, 160)
    ql = mt.QuantLinear.from_linear(lin, scheme, **exact())
    x = torch.randn(3, 5, 256)
    y = ql(x)
    assert y.shape == (3, 5, 160) and y.dtype == torch.float32
    ref = reference_linear(x.numpy(), ql.qweight, lin.bias.detach().numpy()).reshape(3, 5, 160)
    assert rel_err(y.numpy(), ref) <= 1e-5
    # Close to the float layer too (quantization error only).
    assert rel_err(y.detach().numpy(), lin(x).detach().numpy()) < (0.2 if "w4" in scheme else 0.05)


def test_bf16_activations():
    torch.manual_seed(2)
    lin = nn.Linear(512, 256, bias=False)
    ql = mt.QuantLinear.from_linear(lin, "w4g128")
    x = torch.randn(16, 512, dtype=torch.bfloat16)
    y = ql(x)
    assert y.dtype == torch.bfloat16
    assert rel_err(y.float().numpy(), reference_linear(x.float().numpy(), ql.qweight)) <= 1e-2


def test_quantize_replaces_linears_and_skips():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Sequential(nn.Linear(256, 64)))
    model.add_module("lm_head", nn.Linear(64, 32))
    replaced = mt.quantize_(model, "w8g128", skip=("lm_head",))
    assert replaced == ["0", "2.0"]
    assert isinstance(model[0], mt.QuantLinear) and type(model.lm_head) is nn.Linear
    by_callable = nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 64))
    mt.quantize_(by_callable, lambda name, lin: "w4g64" if name == "1" else None)
    assert type(by_callable[0]) is nn.Linear and isinstance(by_callable[1], mt.QuantLinear)


def test_compile_fullgraph_same_bits():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(256, 384), nn.SiLU(), nn.Linear(384, 256))
    mt.quantize_(model, "w4g128")
    x = torch.randn(4, 256)
    eager = model(x)
    compiled = torch.compile(model, fullgraph=True)
    assert torch.equal(compiled(x), eager)
    assert compiled(torch.randn(9, 256)).shape == (9, 256)  # another M, same graph


def test_opcheck():
    torch.manual_seed(5)
    ql = mt.QuantLinear.from_linear(nn.Linear(128, 64), "w8g64asym")
    x = torch.randn(6, 128)
    torch.library.opcheck(torch.ops.mixq.linear.default, (x, ql.handle, ql.bias, -math.inf, 6.0))


def test_fake_tensor_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    ql = mt.QuantLinear.from_linear(nn.Linear(128, 48), "w4g128")
    with FakeTensorMode():
        x = torch.empty(2, 3, 128, dtype=torch.bfloat16)
        y = torch.ops.mixq.linear(x, ql.handle, None, -math.inf, math.inf)
    assert y.shape == (2, 3, 48) and y.dtype == torch.bfloat16


def test_handles_released_with_module():
    before = mt._registry.count()
    ql = mt.QuantLinear.from_linear(nn.Linear(64, 32), "w8g64asym")
    assert mt._registry.count() == before + 1
    del ql
    gc.collect()
    assert mt._registry.count() == before


def test_errors_name_the_argument():
    ql = mt.QuantLinear.from_linear(nn.Linear(128, 64), "w4g128")
    with pytest.raises(mixq.InvalidArgumentError, match="x: dtype"):
        ql(torch.randn(2, 128, dtype=torch.float64))
    with pytest.raises(mixq.InvalidArgumentError, match=r"x.shape\[1\] \(100\)"):
        mixq.linear(torch.randn(2, 100), ql.prepared)
    with pytest.raises(KeyError, match="no prepared weight with handle"):
        torch.ops.mixq.linear(torch.randn(1, 128), 10 ** 9, None, -math.inf, math.inf)
    with pytest.raises(mixq.InvalidArgumentError, match="x: last dimension 100 does not match"):
        ql(torch.randn(3, 100))
    with pytest.raises(mixq.InvalidArgumentError, match=r"bias: expected a contiguous \[64\]"):
        torch.ops.mixq.linear(torch.randn(2, 128), ql.handle, torch.zeros(63), -math.inf,
                              math.inf)
    with pytest.raises(mixq.InvalidArgumentError, match="bias: dtype torch.int64"):
        torch.ops.mixq.linear(torch.randn(2, 128), ql.handle, torch.zeros(64, dtype=torch.long),
                              -math.inf, math.inf)
    # Rows that are not contiguous are copied; leading dimensions are kept.
    x = torch.randn(2, 3, 256)[..., ::2]
    assert torch.equal(ql(x), ql(x.contiguous()))
    assert ql(x).shape == (2, 3, 64)
    with pytest.raises(mixq.InvalidArgumentError, match="out: cannot view"):
        # A (pretend) mismatch of devices: a meta tensor cannot be exported at all.
        mixq.linear(torch.randn(1, 128), ql.prepared, out=torch.empty(1, 64, device="meta"))


def test_core_api_allocates_torch_outputs():
    qw = mixq.quantize(torch.randn(32, 64), "w8g64asym")
    pw = mixq.prepare(qw, backend="cpu")
    x = torch.randn(3, 64, requires_grad=True)
    y = mixq.linear(x, pw)
    assert isinstance(y, torch.Tensor) and y.shape == (3, 32)


# --------------------------------------------------------------------------- loaders


def check_loaded(model, refs):
    """Each QuantLinear's dequantized weight equals `refs[name]` (float32 [N, K]) exactly, and
    its product matches the float64 product with it."""
    x_rng = np.random.default_rng(0)
    for name, ref in refs.items():
        mod = model.get_submodule(name)
        assert isinstance(mod, mt.QuantLinear), name
        assert np.array_equal(mixq.dequantize(mod.qweight), ref), name
        x = x_rng.standard_normal((3, ref.shape[1])).astype(np.float32)
        y = mod(torch.from_numpy(x))
        assert rel_err(y.numpy(), x.astype(np.float64) @ ref.astype(np.float64).T) <= 1e-5


def test_load_mixq_layout_into_hf_model(tmp_path):
    src = TinyLlama()
    qws = {n: mixq.quantize(m.weight.detach(), "w4g64") for n, m in src.linears().items()}
    path = tmp_path / "model.safetensors"
    mixq.save(path, {f"{n}.weight": q for n, q in qws.items()})
    dst = TinyLlama(seed=1)
    report = mt.load_checkpoint_(dst, path, **exact())
    assert sorted(report["loaded"]) == sorted(qws) and not report["missing"]
    check_loaded(dst, {n: mixq.dequantize(q) for n, q in qws.items()})


def test_load_gptq_into_hf_model(tmp_path):
    st = pytest.importorskip("st_packers", reason="needs safetensors")
    model = TinyLlama(n_layers=1)
    rng = np.random.default_rng(0)
    tensors, refs = {}, {}
    for name, m in model.linears().items():
        t, ref = st.gptq_tensors(rng, 4, m.in_features, m.out_features, 64, act_order=True,
                                 v1=True, prefix=name)
        t.pop(f"{name}.bias")
        tensors.update(t)
        refs[name] = ref
    st.save(tmp_path / "model.safetensors", tensors, metadata={"format": "pt"})
    (tmp_path / "quantize_config.json").write_text(json.dumps(
        {"bits": 4, "group_size": 64, "desc_act": True, "sym": False}))
    report = mt.load_checkpoint_(model, tmp_path, **exact())  # a folder of shards
    assert len(report["loaded"]) == len(refs)
    check_loaded(model, refs)


def test_load_gguf_undoes_llama_cpp_qk_order(tmp_path):
    gguf = pytest.importorskip("gguf", reason="needs gguf-py")
    T = gguf.GGMLQuantizationType
    src = TinyLlama(n_layers=1)
    path = str(tmp_path / "model.gguf")
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_head_count(src.n_head)
    writer.add_head_count_kv(src.n_kv)
    refs = {}
    for name, m in src.linears().items():
        w = m.weight.detach().numpy()
        gname = mt.hf_to_gguf_name(name)
        perm = None
        if name.endswith(("q_proj", "k_proj")):
            heads = src.n_head if name.endswith("q_proj") else src.n_kv
            # llama.cpp's convert_hf_to_gguf permute of Q / K rows.
            perm = np.arange(w.shape[0]).reshape(heads, 2, -1).swapaxes(1, 2).reshape(-1)
            w = w[perm]
        q = gguf.quants.quantize(w, T.Q8_0)
        writer.add_tensor(gname, q, raw_dtype=T.Q8_0)
        deq = gguf.quants.dequantize(q, T.Q8_0).astype(np.float32)
        if perm is not None:
            deq = deq[np.argsort(perm)]
        refs[name] = deq
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    dst = TinyLlama(n_layers=1, seed=2)
    mt.load_checkpoint_(dst, path, **exact())
    check_loaded(dst, refs)
    # Close to the source layers' float weights (Q8_0 error only), in HF row order.
    for name, m in src.linears().items():
        assert rel_err(refs[name], m.weight.detach().numpy()) < 0.01


def test_loader_errors(tmp_path):
    src = TinyLlama(n_layers=1)
    qws = {n: mixq.quantize(m.weight.detach(), "w8g64asym") for n, m in src.linears().items()}
    path = tmp_path / "model.safetensors"
    mixq.save(path, {f"{n}.weight": q for n, q in qws.items() if "down_proj" not in n})
    with pytest.raises(mt.CheckpointMismatch, match="model.layers.0.mlp.down_proj"):
        mt.load_checkpoint_(TinyLlama(n_layers=1), path)
    report = mt.load_checkpoint_(TinyLlama(n_layers=1), path, strict=False)
    assert report["missing"] == ["model.layers.0.mlp.down_proj"]
    wrong = TinyLlama(n_layers=1, d=64, f=256)
    with pytest.raises(mt.CheckpointMismatch, match=r"q_proj: checkpoint tensor .* is \[128, 128\]"):
        mt.load_checkpoint_(wrong, path, strict=False)
    skipped = mt.load_checkpoint_(TinyLlama(n_layers=1), path, skip=("mlp.down_proj",))
    assert not skipped["missing"]




def test_transformers_llama_quantize_and_run():
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (1, 12))
    with torch.no_grad():
        dense = model(ids).logits
        q = copy.deepcopy(model)
        replaced = mt.quantize_(q, "w8g64asym", skip=("lm_head",))
        assert len(replaced) == 14
        got = q(ids).logits
    assert rel_err(got.numpy(), dense.numpy()) < 0.05


def _block(d=256, bias=False):
    """q/k/v and gate/up siblings reading one input, HF names (a function: the module must
    import where torch is not installed, for its tests to be skipped)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(d, 256, bias=bias)
            self.k_proj = nn.Linear(d, 128, bias=bias)
            self.v_proj = nn.Linear(d, 128, bias=bias)
            self.gate_proj = nn.Linear(d, 384, bias=bias)
            self.up_proj = nn.Linear(d, 384, bias=bias)

        def forward(self, x):
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
            return torch.cat([q, k, v, nn.functional.silu(self.gate_proj(x)) * self.up_proj(x)], -1)

    return Block()


@pytest.mark.parametrize("scheme", ["w4g128", "w8g128", "fp8b128"])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_projections_match_separate_layers(scheme, bias):
    torch.manual_seed(11)
    block = _block(bias=bias)
    separate, fused = copy.deepcopy(block), copy.deepcopy(block)
    mt.quantize_(separate, scheme, **exact())
    names = mt.quantize_(fused, scheme, fuse=True, **exact())
    assert sorted(names) == ["gate_up_proj.linear", "qkv_proj.linear"]
    assert isinstance(fused.k_proj, mt.FusedMember) and fused.qkv_proj.linear.out_features == 512
    # Per-row quantization: each member's rows of the fused weight are its own quantized weight.
    for n in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
        assert torch.equal(getattr(fused, n).dequantized_weight(),
                           getattr(separate, n).dequantized_weight())
    x = torch.randn(5, 256)
    with torch.no_grad():
        assert rel_err(fused(x).numpy(), separate(x).numpy()) <= 1e-6


def test_fused_members_any_order_and_inputs():
    torch.manual_seed(12)
    block = _block()
    mt.quantize_(block, "w8g128", fuse=True, **exact())
    x1, x2 = torch.randn(3, 256), torch.randn(3, 256)
    with torch.no_grad():
        want_k2 = block.qkv_proj(x2)[:, 256:384].clone()
        v1 = block.v_proj(x1)  # kept output for x1
        k2 = block.k_proj(x2)  # another input: recomputed, not x1's slice
        q1 = block.q_proj(x1)
        full1 = block.qkv_proj(x1)
    assert torch.equal(k2, want_k2)
    assert torch.equal(q1, full1[:, :256]) and torch.equal(v1, full1[:, 384:])
    assert block.qkv_proj._y is None or block.qkv_proj._left > 0


def test_fused_compile_fullgraph_and_skip():
    torch.manual_seed(13)
    block = _block()
    mt.quantize_(block, "w4g128", fuse=True, **exact())
    x = torch.randn(4, 256)
    with torch.no_grad():
        eager = block(x)
        assert torch.equal(torch.compile(block, fullgraph=True)(x), eager)
    kept = _block()
    mt.quantize_(kept, "w4g128", fuse=True, skip=("k_proj",), **exact())
    assert not hasattr(kept, "qkv_proj") and type(kept.k_proj) is nn.Linear
    assert isinstance(kept.q_proj, mt.QuantLinear) and hasattr(kept, "gate_up_proj")

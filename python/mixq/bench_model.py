"""Whole-model decode benchmark: a Llama-3-8B-shaped decoder (HF transformers' LlamaConfig,
random weights, no download) with its linear layers replaced by mixq (W4A16, W8A16, FP8 block)
against the same model in BF16, under the same torch.compile / CUDA-graph settings, in one
process.

    python -m mixq.bench_model                       # 8B shapes, batch 1,4,16, 256 tokens (GPU)
    python -m mixq.bench_model --model 70b-layers    # Llama-3-70B layer stack, time x 80
    python -m mixq.bench_model --tiny                # tiny config, CPU smoke test

Reported per scheme and batch: tokens/s (batch x decoded tokens / decode time), speedup over
BF16, the share of a decode step spent in the linear layers (each distinct layer shape timed
alone at the step's M, times its count, over the step time), and the relative error of the
last-position logits against a BF16 model whose linear weights are mixq's own dequantized
weights (so only the kernels' arithmetic differs, not the quantization).
"""

import argparse
import copy
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

import mixq
import mixq.torch as mt

CONFIGS = {
    # Llama-3-8B: hidden 4096, MLP 14336, 32 layers, 32 query / 8 KV heads, vocab 128256.
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    # Llama-3-70B's layer (hidden 8192, MLP 28672, 64 / 8 heads); a few layers, time x 80 / n.
    # The vocabulary is cut to 256 so that the scaled step is the layer stack's (a 128256-word
    # lm_head would be counted 80 / n times).
    "70b-layers": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=4,
                       num_attention_heads=64, num_key_value_heads=8, vocab_size=256),
    "tiny": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=512),
}
FULL_LAYERS = {"8b": 32, "70b-layers": 80, "tiny": 2}
SCHEMES = {"w4a16": ("w4g128", "none"), "w8a16": ("w8g128", "none"),
           "fp8": ("fp8b128", "none"), "fp8-act": ("fp8b128", "fp8")}


def build_model(name, device, dtype, layers=None):
    """A LlamaForCausalLM with random weights, created directly on `device` in `dtype`."""
    import transformers
    cfg = dict(CONFIGS[name])
    if layers:
        cfg["num_hidden_layers"] = layers
    config = transformers.LlamaConfig(max_position_embeddings=4096, rope_theta=500000.0,
                                      tie_word_embeddings=False, **cfg)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(old)
    # Small weights keep the activations of a deep random model finite in bf16.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return model.eval(), config


def shared_copy(model):
    """A copy of the module tree that shares every parameter and buffer (no memory)."""
    memo = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    return copy.deepcopy(model, memo)


def dequantized_twin(base, qmodel, dtype, own_copy=False):
    """`base` (shared parameters; with `own_copy`, a full copy converted to `dtype`) with each
    linear that qmodel quantized (a QuantLinear, or a member of a fused group) replaced by an
    nn.Linear holding the weight mixq's kernels use, dequantized and converted to `dtype`
    (each quantized layer dequantized once, on host threads: the C++ call releases the GIL)."""
    ref = copy.deepcopy(base).to(dtype) if own_copy else shared_copy(base)
    todo = []
    for name, mod in list(ref.named_modules()):
        for cname, _ in list(mod.named_children()):
            child = qmodel.get_submodule(f"{name}.{cname}" if name else cname)
            if isinstance(child, mt.FusedMember):
                source, rows, bias = child.group.linear, child.rows(), child.group.linear.bias
            elif isinstance(child, mt.QuantLinear):
                source, rows, bias = child, None, child.bias
            else:
                continue
            if isinstance(source, mt.QuantLinear):
                todo.append((mod, cname, source, rows, bias))
    sources = list({id(t[2]): t[2] for t in todo}.values())
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        dense = dict(zip((id(q) for q in sources),
                         pool.map(lambda q: q.dequantized_weight(torch.float32), sources)))
    for mod, cname, source, rows, bias in todo:
        w = dense[id(source)]
        if rows is not None:
            w, bias = w[rows[0]:rows[1]], None if bias is None else bias[rows[0]:rows[1]]
        lin = nn.Linear(w.shape[1], w.shape[0], bias=bias is not None,
                        device=source._place.device, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(w)
            if bias is not None:
                lin.bias.copy_(bias)
        setattr(mod, cname, lin)
    return ref


def make_cache(config, batch, length, device, dtype):
    from transformers import StaticCache
    try:  # transformers >= 5: batch, device and dtype come from the first update
        return StaticCache(config=config, max_cache_len=length)
    except TypeError:
        return StaticCache(config=config, max_batch_size=batch, max_cache_len=length,
                           device=device, dtype=dtype)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Decoder:
    """Greedy decoding with a static KV cache; the one-token step is compiled once per model
    (torch.compile mode `mode`; 'reduce-overhead' captures CUDA graphs; 'none': eager)."""

    def __init__(self, model, config, batch, prompt, tokens, mode, device, dtype):
        self.model, self.device = model, device
        self.batch, self.prompt, self.tokens = batch, prompt, tokens
        self.cache = make_cache(config, batch, prompt + tokens + 1, device, dtype)
        step = self._step
        if mode != "none":
            step = torch.compile(step, mode=mode, fullgraph=True, dynamic=False)
        self.step = step

    def _step(self, ids, pos):
        out = self.model(input_ids=ids, past_key_values=self.cache, cache_position=pos,
                         use_cache=True)
        return out.logits[:, -1, :]

    def prefill(self, ids):
        self.cache.reset()
        pos = torch.arange(ids.shape[1], device=self.device)
        with torch.no_grad():
            out = self.model(input_ids=ids, past_key_values=self.cache, cache_position=pos,
                             use_cache=True)
        return out.logits[:, -1, :]

    def run(self, ids):
        """Prefill (untimed), then decode self.tokens tokens; returns (seconds, last logits)."""
        logits = self.prefill(ids)
        nxt = logits.argmax(-1, keepdim=True)
        sync(self.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            for i in range(self.tokens):
                pos = torch.tensor([self.prompt + i], device=self.device)
                logits = self.step(nxt, pos)
                nxt = logits.argmax(-1, keepdim=True)
        sync(self.device)
        return time.perf_counter() - t0, logits


def linear_time(model, M, device, dtype, reps):
    """Seconds one decode step spends in the model's linear layers at M rows: each distinct
    (module type, N, K) timed alone (CUDA graph on the GPU), times its count."""
    groups = {}
    for _, mod in model.named_modules():
        if isinstance(mod, (nn.Linear, mt.QuantLinear)):
            groups.setdefault((type(mod).__name__, mod.out_features, mod.in_features),
                              []).append(mod)
    total = 0.0
    with torch.no_grad():
        for (_, _, K), mods in groups.items():
            mod = mods[0]
            x = torch.randn(M, K, device=device, dtype=dtype)
            for _ in range(3):
                mod(x)
            if device.type == "cuda":
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for _ in range(10):
                        mod(x)
                g.replay()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(reps):
                    g.replay()
                torch.cuda.synchronize()
                per = (time.perf_counter() - t0) / (reps * 10)
            else:
                t0 = time.perf_counter()
                for _ in range(reps):
                    mod(x)
                per = (time.perf_counter() - t0) / reps
            total += per * len(mods)
    return total


def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def main(argv=None):
    """Command line entry point (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m mixq.bench_model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(CONFIGS), default="8b")
    p.add_argument("--tiny", action="store_true", help="--model tiny, 8 tokens, batch 1,2, "
                   "eager on the CPU: a smoke test")
    p.add_argument("--layers", type=int, default=None, help="decoder layers (default: the model's)")
    p.add_argument("--schemes", default="w4a16,w8a16,fp8",
                   help=f"comma-separated, of {', '.join(SCHEMES)}")
    p.add_argument("--batch", default="1,4,16")
    p.add_argument("--tokens", type=int, default=256, help="decoded tokens per run")
    p.add_argument("--prompt", type=int, default=16, help="prompt tokens (prefill, untimed)")
    p.add_argument("--compile", default=None, choices=["none", "default", "reduce-overhead",
                                                       "max-autotune-no-cudagraphs"],
                   help="torch.compile mode of the decode step (default: reduce-overhead on "
                        "CUDA, i.e. CUDA graphs; none on the CPU)")
    p.add_argument("--device", default=None, help="default: cuda when available")
    p.add_argument("--quantize-lm-head", action="store_true",
                   help="also quantize lm_head (kept in BF16 by default)")
    p.add_argument("--fuse", action=argparse.BooleanOptionalAction, default=True,
                   help="fuse q/k/v and gate/up into one quantized product each in the mixq "
                        "models (mixq.torch.fuse_linears_; default on); the BF16 baseline is "
                        "the model as transformers defines it")
    p.add_argument("--reps", type=int, default=50, help="repetitions of the per-layer timing")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--f32-reference", action="store_true",
                   help="also compare mixq's and the twin's logits with a float32 model holding "
                        "the dequantized weights (needs memory for a float32 copy)")
    a = p.parse_args(argv)
    if a.tiny:
        a.model = "tiny"
        a.tokens = min(a.tokens, 8)
        if a.batch == "1,4,16":
            a.batch = "1,2"
        a.reps = min(a.reps, 3)
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    mode = a.compile or ("reduce-overhead" if device.type == "cuda" else "none")
    # bf16 on the GPU (the baseline's dtype); the CPU smoke test runs f32 (fast CPU kernels).
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    batches = [int(b) for b in a.batch.split(",")]
    torch.manual_seed(0)
    base, config = build_model(a.model, device, dtype, a.layers)
    n_layers = config.num_hidden_layers
    scale = FULL_LAYERS[a.model] / n_layers if a.model == "70b-layers" else 1.0
    print(f"# {a.model}: {n_layers} layers, hidden {config.hidden_size}, device {device}, "
          f"{dtype}, compile={mode}, {a.tokens} tokens, prompt {a.prompt}"
          + (f", times x {scale:g} for {FULL_LAYERS[a.model]} layers" if scale != 1 else ""),
          flush=True)
    results = []
    ids = {b: torch.randint(0, config.vocab_size, (b, a.prompt),
                            generator=torch.Generator().manual_seed(b)).to(device)
           for b in batches}

    def bench(model, label, scheme_label, ref_logits=None):
        rows = []
        for b in batches:
            t_build = time.perf_counter()
            dec = Decoder(model, config, b, a.prompt, a.tokens, mode, device, dtype)
            dec.run(ids[b])  # compile / capture / warm-up
            warm = time.perf_counter() - t_build
            secs, _ = dec.run(ids[b])
            tps = b * a.tokens / (secs * scale)
            step = secs / a.tokens
            lin = linear_time(model, b, device, dtype, a.reps)
            row = dict(model=a.model, scheme=scheme_label, batch=b, tokens=a.tokens,
                       tokens_per_s=tps, step_ms=step * 1e3 * scale,
                       linear_share=min(lin / step, 1.0) if step > 0 else math.nan,
                       # the rest of the step: attention, norms, rotary, sampling, launches
                       linear_ms=lin * 1e3 * scale, other_ms=max(step - lin, 0.0) * 1e3 * scale,
                       compile=mode, device=str(device), fused=bool(a.fuse and label != dense),
                       warmup_s=warm)
            rows.append(row)
        return rows

    print("| model | scheme | batch | tokens/s | step ms | linear ms | other ms | speedup "
          "| logits rel err |")
    print("|---|---|---|---|---|---|---|---|---|")
    dense = "bf16" if dtype == torch.bfloat16 else str(dtype).replace("torch.float", "f")
    dense_rows = bench(base, dense, dense)
    for r in dense_rows:
        r["speedup"] = 1.0
        r["logits_rel_err"] = 0.0
        print(f"| {a.model} | {dense} | {r['batch']} | {r['tokens_per_s']:.1f} | {r['step_ms']:.3f} "
              f"| {r['linear_ms']:.3f} | {r['other_ms']:.3f} | 1.00 | - |", flush=True)
    results += dense_rows
    dense_tps = {r["batch"]: r["tokens_per_s"] for r in dense_rows}

    for name in a.schemes.split(","):
        scheme, act = SCHEMES[name]
        qmodel = shared_copy(base)
        t0 = time.perf_counter()
        # On the CPU, exact f32 activations (its default quantizes them to int8 where faster),
        # so the logits error measures the kernels' rounding only, as on the GPU.
        extra = {"tuning": "cpu_activations=exact"} if device.type == "cpu" else {}
        mt.quantize_(qmodel, scheme, skip=None if a.quantize_lm_head else ("lm_head",), act=act,
                     fuse=a.fuse, **extra)
        qsecs = time.perf_counter() - t0
        # Logits against the dequantized-weight model on the same prompt (prefill, eager).
        ref = dequantized_twin(base, qmodel, dtype)
        b0 = batches[0]
        with torch.no_grad():
            got = qmodel(input_ids=ids[b0]).logits[:, -1].float()
            want = ref(input_ids=ids[b0]).logits[:, -1].float()
        err = rel_err(got, want)
        del ref
        if device.type == "cuda":
            torch.cuda.empty_cache()
        # Both against the float32 model with the same dequantized weights: how far mixq's
        # logits are from exact arithmetic, next to how far the BF16 twin's own are (the
        # deviation plain BF16 arithmetic already has in this model).
        err32 = twin_err32 = math.nan
        if a.f32_reference:
            ref32 = dequantized_twin(base, qmodel, torch.float32, own_copy=True)
            with torch.no_grad():
                want32 = ref32(input_ids=ids[b0]).logits[:, -1].float()
            err32, twin_err32 = rel_err(got, want32), rel_err(want, want32)
            del ref32
            if device.type == "cuda":
                torch.cuda.empty_cache()
            print(f"# {name}: logits rel err vs the f32 dequantized-weight model: mixq "
                  f"{err32:.2e}, the {dense} twin {twin_err32:.2e}", flush=True)
        for r in bench(qmodel, name, name):
            r["speedup"] = r["tokens_per_s"] / dense_tps[r["batch"]]
            r["logits_rel_err"] = err
            r["logits_rel_err_vs_f32"] = err32
            r["twin_rel_err_vs_f32"] = twin_err32
            r["quantize_s"] = qsecs
            print(f"| {a.model} | {name} ({scheme}{'' if act == 'none' else ':' + act}) | "
                  f"{r['batch']} | {r['tokens_per_s']:.1f} | {r['step_ms']:.3f} | "
                  f"{r['linear_ms']:.3f} | {r['other_ms']:.3f} | {r['speedup']:.2f} | "
                  f"{err:.2e} |", flush=True)
            results.append(r)
        del qmodel
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kind": "mixq.bench_model", "command": " ".join(sys.argv),
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

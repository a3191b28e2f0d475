"""A tiny decoder with Hugging Face Llama module names (model.layers.N.self_attn.q_proj, ...),
built from plain torch modules so that the loader tests need no transformers."""
import torch
from torch import nn


class Attn(nn.Module):
    def __init__(self, d, n_head, n_kv, head_dim):
        super().__init__()
        self.q_proj = nn.Linear(d, n_head * head_dim, bias=False)
        self.k_proj = nn.Linear(d, n_kv * head_dim, bias=False)
        self.v_proj = nn.Linear(d, n_kv * head_dim, bias=False)
        self.o_proj = nn.Linear(n_head * head_dim, d, bias=False)


class Mlp(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)


class Layer(nn.Module):
    def __init__(self, d, f, n_head, n_kv, head_dim):
        super().__init__()
        self.self_attn = Attn(d, n_head, n_kv, head_dim)
        self.mlp = Mlp(d, f)


class Inner(nn.Module):
    def __init__(self, n_layers, d, f, n_head, n_kv, head_dim):
        super().__init__()
        self.layers = nn.ModuleList(Layer(d, f, n_head, n_kv, head_dim) for _ in range(n_layers))


class TinyLlama(nn.Module):
    """Names as LlamaForCausalLM: model.layers.{i}.{self_attn,mlp}.*, lm_head."""

    def __init__(self, n_layers=2, d=128, f=256, n_head=4, n_kv=2, vocab=96, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.n_head, self.n_kv = n_head, n_kv
        self.model = Inner(n_layers, d, f, n_head, n_kv, d // n_head)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def linears(self):
        return {n: m for n, m in self.named_modules() if isinstance(m, nn.Linear)}

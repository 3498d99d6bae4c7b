"""The forward pass for Llama-family decoders (Llama, Mistral, Qwen2, Qwen3) over the paged KV cache.

Embedding, RMSNorm, RoPE, grouped-query attention, SwiGLU MLP, tied or untied head. Weights come from a
transformers state dict; q/k/v and gate/up are fused into one matmul each.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from prefixgate.local_backend.attention import AttentionMetadata, paged_attention, store_kv
from prefixgate.local_backend.linear import Linear, linear, pack

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused kernel, bit-identical to the steps below in float32
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        # transformers' order of operations (float32 statistics, scale after casting back), to match it.
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_tables(hf_config: Any, head_dim: int, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for every position, [max_len, head_dim], computed in float32 as transformers does."""
    params = dict(getattr(hf_config, "rope_parameters", None) or getattr(hf_config, "rope_scaling", None) or {})
    rope_type = params.get("rope_type", params.get("type", "default"))
    scaling = 1.0
    if rope_type == "default":
        theta = params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0))
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    else:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](hf_config, "cpu")
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq.float())
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * scaling, emb.sin() * scaling


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """transformers' x * cos + rotate_half(x) * sin, with rotate_half's negation moved into the table
    (`signed_sin` = [-sin | sin] over the two halves): the same values, one pass fewer."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, *, qkv_bias: bool,
                 o_bias: bool, qk_norm_eps: float | None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.qkv_proj = Linear(hidden, (heads + 2 * kv_heads) * head_dim, bias=qkv_bias)
        self.o_proj = Linear(heads * head_dim, hidden, bias=o_bias)
        self.q_norm = RMSNorm(head_dim, qk_norm_eps) if qk_norm_eps is not None else None
        self.k_norm = RMSNorm(head_dim, qk_norm_eps) if qk_norm_eps is not None else None
        self.scale = head_dim ** -0.5
        self.k_cache = self.v_cache = torch.empty(0)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        n, heads, kv_heads, d = x.shape[0], self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv_proj(x)
        qk, v = qkv[:, :(heads + kv_heads) * d].view(n, heads + kv_heads, d), qkv[:, (heads + kv_heads) * d:]
        if self.q_norm is not None:
            qk = torch.cat((self.q_norm(qk[:, :heads]), self.k_norm(qk[:, heads:])), dim=1)
        # RoPE on queries and keys at once: they share positions, and one pass halves the small ops.
        qk = apply_rope(qk, cos, sin)
        q, k = qk[:, :heads], qk[:, heads:]
        store_kv(self.k_cache, self.v_cache, k, v.view(n, kv_heads, d), meta.slot_mapping)
        return self.o_proj(paged_attention(q, self.k_cache, self.v_cache, meta, self.scale))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool) -> None:
        super().__init__()
        self.intermediate = intermediate
        self.gate_up_proj = Linear(hidden, 2 * intermediate, bias=bias)
        self.down_proj = Linear(intermediate, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate, dim=-1)
        return self.down_proj(F.silu(gate, inplace=True).mul_(up))  # in place: no two more [n, I] tensors


class DecoderLayer(nn.Module):
    def __init__(self, attn: Attention, mlp: MLP, hidden: int, eps: float) -> None:
        super().__init__()
        self.self_attn, self.mlp = attn, mlp
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, meta)
        return x + self.mlp(self.post_attention_layernorm(x))


class CausalLM(nn.Module):
    def __init__(self, hf_config: Any, max_len: int, *, qkv_bias: bool = False, o_bias: bool = False,
                 mlp_bias: bool = False, qk_norm: bool = False, tied: bool = True) -> None:
        super().__init__()
        c = hf_config
        if c.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"model type {c.model_type!r} is not supported (supported: {SUPPORTED_MODEL_TYPES})")
        self.hidden = c.hidden_size
        self.heads = c.num_attention_heads
        self.kv_heads = getattr(c, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(c, "head_dim", None) or self.hidden // self.heads
        self.num_layers = c.num_hidden_layers
        eps = c.rms_norm_eps
        self.embed_tokens = nn.Embedding(c.vocab_size, self.hidden)
        self.layers = nn.ModuleList(
            DecoderLayer(Attention(self.hidden, self.heads, self.kv_heads, self.head_dim, qkv_bias=qkv_bias,
                                   o_bias=o_bias, qk_norm_eps=eps if qk_norm else None),
                         MLP(self.hidden, c.intermediate_size, mlp_bias), self.hidden, eps)
            for _ in range(self.num_layers))
        self.norm = RMSNorm(self.hidden, eps)
        self.lm_head = None if tied else Linear(self.hidden, c.vocab_size, bias=False)
        self.head_packed: torch.Tensor | None = None
        cos, sin = rope_tables(c, self.head_dim, max_len)
        half = self.head_dim // 2
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("signed_sin", torch.cat((-sin[:, :half], sin[:, half:]), dim=-1), persistent=False)
        self.requires_grad_(False)

    @classmethod
    def from_weights(cls, hf_config: Any, weights: dict[str, torch.Tensor], max_len: int) -> CausalLM:
        model = cls(hf_config, max_len, qkv_bias="layers.0.self_attn.q_proj.bias" in weights,
                    o_bias="layers.0.self_attn.o_proj.bias" in weights,
                    mlp_bias="layers.0.mlp.gate_proj.bias" in weights,
                    qk_norm="layers.0.self_attn.q_norm.weight" in weights,
                    tied="lm_head.weight" not in weights)
        model.load_weights(weights)
        return model

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        fused = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
        missing = []
        for name, param in self.named_parameters():
            prefix, _, leaf = name.rpartition(".")
            module_prefix, _, module = prefix.rpartition(".")
            if module in fused:
                parts = [weights.get(f"{module_prefix}.{p}.{leaf}") for p in fused[module]]
                tensor = None if any(p is None for p in parts) else torch.cat(parts)
            else:
                tensor = weights.get(name)
            if tensor is None:
                missing.append(name)
                continue
            param.copy_(tensor)
        if missing:
            raise ValueError(f"checkpoint lacks {len(missing)} weights, e.g. {missing[:3]}")

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Hidden states for each input token, before the final norm."""
        x = self.embed_tokens(input_ids)
        cos, sin = self.cos[positions].unsqueeze(1), self.signed_sin[positions].unsqueeze(1)
        for layer in self.layers:
            x = layer(x, cos, sin, meta)
        return x

    def pack_weights(self) -> None:
        """Keep MKL-packed copies of every matmul weight (CPU float32; see linear.py). Call after `.to()`."""
        for module in self.modules():
            if isinstance(module, Linear):
                module.pack_weight()
        self.head_packed = pack(self._head_weight())

    def _head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return linear(self.norm(hidden), self._head_weight(), None, self.head_packed).float()

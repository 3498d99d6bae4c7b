"""Attention over the paged KV cache, for a batch that mixes decodes and prefill chunks.

The flat batch holds the decode tokens (one query each) first, then each prefill chunk's tokens. Every layer
first writes the whole batch's new K/V into the cache, then each sequence attends over its blocks, so a
sequence may read blocks another sequence writes in the same step. Only the blocks the batch needs are
gathered, never the whole cache. Decodes share the blocks all of them start with (a common system prompt):
those are gathered and multiplied once for the whole decode batch ("cascade" attention), and only each
sequence's own blocks are gathered per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

# Block ids, or a slice when they are consecutive in the pool (a view then replaces the gather's copy).
Blocks = torch.Tensor | slice


@dataclass
class PrefillChunk:
    start: int  # first query row in the flat batch
    num_queries: int
    context_len: int  # keys: the cached prefix plus this chunk
    blocks: Blocks  # covering the context
    # Additive mask [num_queries, context_len] when the chunk follows cached context; None: plain causal.
    mask: torch.Tensor | None = None


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [num_tokens] cache slot of each new token
    num_decodes: int = 0
    shared_blocks: Blocks | None = None  # [S] blocks every decode sequence starts with
    own_blocks: torch.Tensor | None = None  # [num_decodes, U] the rest of each table, padded with block 0
    own_mask: torch.Tensor | None = None  # [num_decodes, 1, 1, U * block_size] True where a key exists
    prefills: list[PrefillChunk] = field(default_factory=list)


def store_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    num_kv_heads, head_dim = k_cache.shape[-2:]
    k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, k)
    v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, v)


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                    scale: float) -> torch.Tensor:
    """q: [num_tokens, heads, head_dim]; caches: [num_blocks, block_size, kv_heads, head_dim]."""
    out = []
    if meta.num_decodes:
        out.append(_decode_attention(q[:meta.num_decodes], k_cache, v_cache, meta, scale))
    for chunk in meta.prefills:
        out.append(_prefill_attention(q[chunk.start:chunk.start + chunk.num_queries], k_cache, v_cache,
                                      chunk, scale))
    return torch.cat(out) if len(out) > 1 else out[0]


def _gather(cache: torch.Tensor, blocks: Blocks) -> torch.Tensor:
    # [..., n] block ids -> [..., kv_heads, n * block_size, head_dim]
    g = cache[blocks]
    g = g.view(*g.shape[:-4], -1, *cache.shape[-2:])
    return g.transpose(-3, -2)


def _per_kv_head(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # a @ b over [batch, kv_heads, ...]. Gathered K/V are strided across kv heads: one matmul per head reads
    # them in place, where a single batched matmul would first copy them to merge the batch dimensions.
    return torch.stack([torch.matmul(a[:, h], b[:, h]) for h in range(a.shape[1])], dim=1)


def _decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                      scale: float) -> torch.Tensor:
    b, heads, d = q.shape
    kv_heads = k_cache.shape[-2]
    group = heads // kv_heads
    # Query heads h = kv * group + g share kv head `kv` (transformers' repeat_kv layout).
    q = (q * scale).view(b, kv_heads, group, d)
    ko, vo = _gather(k_cache, meta.own_blocks), _gather(v_cache, meta.own_blocks)  # [b, kv, U, d]
    # Scores and softmax in float32 whatever the cache dtype (a no-op on CPU).
    own = _per_kv_head(q, ko.transpose(-1, -2)).float().masked_fill_(~meta.own_mask, float("-inf"))  # [b,kv,g,U]
    if meta.shared_blocks is None:
        return _per_kv_head(torch.softmax(own, dim=-1).to(vo.dtype), vo).reshape(b, heads * d)
    ks, vs = _gather(k_cache, meta.shared_blocks), _gather(v_cache, meta.shared_blocks)  # [kv, S, d]
    qs = q.transpose(0, 1).reshape(kv_heads, b * group, d)
    shared = torch.matmul(qs, ks.transpose(-1, -2)).float()  # [kv, b * g, S]
    # One softmax over [shared keys | own keys], in two parts: exactly attention over the whole table.
    peak = torch.maximum(shared.amax(-1).view(kv_heads, b, group).transpose(0, 1), own.amax(-1))
    own = torch.exp(own - peak[..., None])
    shared = torch.exp(shared - peak.transpose(0, 1).reshape(kv_heads, b * group, 1))
    total = own.sum(-1) + shared.sum(-1).view(kv_heads, b, group).transpose(0, 1)
    out = (torch.matmul(shared.to(vs.dtype), vs).view(kv_heads, b, group, d).transpose(0, 1).float()
           + _per_kv_head(own.to(vo.dtype), vo).float())
    return (out / total[..., None]).to(q.dtype).reshape(b, heads * d)


def _prefill_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, chunk: PrefillChunk,
                       scale: float) -> torch.Tensor:
    n, heads, d = q.shape
    ctx = chunk.context_len
    # 4-D inputs: 3-D ones miss torch's fused CPU kernel and run many times slower.
    k = _gather(k_cache, chunk.blocks)[None, :, :ctx]  # [1, kv, ctx, d]
    v = _gather(v_cache, chunk.blocks)[None, :, :ctx]
    q = q.transpose(0, 1)[None]
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=chunk.mask, is_causal=chunk.mask is None, scale=scale,
                                       enable_gqa=True)
    return o[0].transpose(0, 1).reshape(n, heads * d)

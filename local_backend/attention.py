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


@dataclass
class PrefillChunk:
    start: int  # first query row in the flat batch
    num_queries: int
    context_len: int  # keys: the cached prefix plus this chunk
    blocks: torch.Tensor  # block ids covering the context


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [num_tokens] cache slot of each new token
    num_decodes: int = 0
    shared_blocks: torch.Tensor | None = None  # [S] blocks every decode sequence starts with
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


def _gather(cache: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    # [..., n] block ids -> [..., kv_heads, n * block_size, head_dim]
    g = cache[blocks]
    g = g.view(*blocks.shape[:-1], -1, *cache.shape[-2:])
    return g.transpose(-3, -2)


def _decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                      scale: float) -> torch.Tensor:
    b, heads, d = q.shape
    kv_heads = k_cache.shape[-2]
    group = heads // kv_heads
    # Query heads h = kv * group + g share kv head `kv` (transformers' repeat_kv layout).
    q = q.view(b, kv_heads, group, d)
    ko, vo = _gather(k_cache, meta.own_blocks), _gather(v_cache, meta.own_blocks)  # [b, kv, U, d]
    own = torch.matmul(q, ko.transpose(-1, -2)).masked_fill_(~meta.own_mask, float("-inf"))  # [b, kv, g, U]
    shared_len = 0 if meta.shared_blocks is None else meta.shared_blocks.numel()
    if not shared_len:
        probs = torch.softmax(own.float() * scale, dim=-1).to(q.dtype)
        return torch.matmul(probs, vo).reshape(b, heads * d)
    ks, vs = _gather(k_cache, meta.shared_blocks), _gather(v_cache, meta.shared_blocks)  # [kv, S, d]
    qs = q.permute(1, 0, 2, 3).reshape(kv_heads, b * group, d)
    shared = torch.matmul(qs, ks.transpose(-1, -2)).view(kv_heads, b, group, -1).permute(1, 0, 2, 3)
    # One softmax over [shared keys | own keys] gives exactly the attention over the whole table.
    probs = torch.softmax(torch.cat([shared, own], dim=-1).float() * scale, dim=-1).to(q.dtype)
    ps, po = probs.split([shared.shape[-1], own.shape[-1]], dim=-1)
    ps = ps.permute(1, 0, 2, 3).reshape(kv_heads, b * group, -1)
    out = torch.matmul(ps, vs).view(kv_heads, b, group, d).permute(1, 0, 2, 3) + torch.matmul(po, vo)
    return out.reshape(b, heads * d)


def _prefill_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, chunk: PrefillChunk,
                       scale: float) -> torch.Tensor:
    n, heads, d = q.shape
    ctx = chunk.context_len
    k = _gather(k_cache, chunk.blocks)[:, :ctx]  # [kv, ctx, d]
    v = _gather(v_cache, chunk.blocks)[:, :ctx]
    q = q.transpose(0, 1)
    if n == ctx:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)
    else:
        # Query i sits at position ctx - n + i and sees keys up to and including itself.
        pos = torch.arange(ctx - n, ctx, device=q.device)
        mask = torch.arange(ctx, device=q.device)[None, :] <= pos[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    return o.transpose(0, 1).reshape(n, heads * d)

"""Owns the model and the KV pool tensor; turns a scheduled batch into tensors, runs it, samples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from prefixgate.local_backend.attention import AttentionMetadata, DecodeGroup, PrefillChunk
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.kv_cache_manager import cdiv
from prefixgate.local_backend.linear import packing_available, worth_packing
from prefixgate.local_backend.model import CausalLM
from prefixgate.local_backend.sampler import Sampler, SamplerOutput
from prefixgate.local_backend.scheduler import ScheduledBatch
from prefixgate.local_backend.sequence import Sequence

LogitsObserver = Callable[[list[Sequence], torch.Tensor], None]
# A sequence, the tokens a step emits for it, and their logprob entries (None where not asked for).
Emitted = tuple[Sequence, list[int], list[dict[int, tuple[float, int]] | None]]


def accept_drafts(row_seqs: list[Sequence], sampled: SamplerOutput) -> tuple[list[Emitted], list[int]]:
    """Each sequence's sampled rows are consecutive: its last known token's, then one per draft. Keep the
    tokens up to and including the first where the model's choice differs from the draft, which is what
    greedy decoding one token at a time emits. Returns them and the rows they came from."""
    emitted: list[Emitted] = []
    rows: list[int] = []
    i = 0
    while i < len(row_seqs):
        seq, tokens = row_seqs[i], sampled.token_ids
        drafts = seq.draft_token_ids
        accepted = 0
        while accepted < len(drafts) and tokens[i + accepted] == drafts[accepted]:
            accepted += 1
        end = i + accepted + 1
        emitted.append((seq, tokens[i:end], sampled.logprobs[i:end]))
        rows.extend(range(i, end))
        i += len(drafts) + 1
    return emitted, rows


class ModelRunner:
    def __init__(self, config: EngineConfig, hf_config: Any, weights: dict[str, torch.Tensor],
                 eos_token_ids: set[int]) -> None:
        self.device = torch.device(config.device)
        self.cpu_threads = config.cpu_threads
        self.dtype = config.torch_dtype
        self.block_size = bs = config.block_size
        model_max = getattr(hf_config, "max_position_embeddings", None) or 2048
        # Sliding-window models (Mistral) attend fully up to their window; beyond it we would be wrong.
        window = getattr(hf_config, "sliding_window", None) if getattr(hf_config, "use_sliding_window",
                                                                        True) else None
        limit = min(x for x in (config.max_model_len, model_max, window) if x)
        self.model = CausalLM.from_weights(hf_config, weights, limit).to(self.device, self.dtype)
        m = self.model
        if packing_available(self.device, self.dtype):
            weight_bytes = sum(p.numel() * p.element_size() for p in m.parameters())
            if config.pack_cpu_weights or (config.pack_cpu_weights is None and worth_packing(weight_bytes)):
                m.pack_weights()
        bytes_per_block = 2 * m.num_layers * bs * m.kv_heads * m.head_dim * self.dtype.itemsize
        # More blocks than max_num_seqs full-length sequences can use would only cost memory.
        useful = config.max_num_seqs * cdiv(limit, bs) + 1
        self.num_blocks = config.num_kv_blocks or max(2, min(useful, int(config.kv_cache_gib * 2**30 // bytes_per_block)))
        # One block is reserved (padding target), so a lone sequence can grow to (num_blocks - 1) blocks.
        self.max_model_len = min(limit, (self.num_blocks - 1) * bs)
        # Zeroed, not empty: padded reads land on block 0 and are masked, but 0 * NaN would still be NaN.
        self.kv_cache = torch.zeros(2, m.num_layers, self.num_blocks, bs, m.kv_heads, m.head_dim,
                                    device=self.device, dtype=self.dtype)
        for i, layer in enumerate(m.layers):
            layer.self_attn.k_cache, layer.self_attn.v_cache = self.kv_cache[0, i], self.kv_cache[1, i]
        self.sampler = Sampler(eos_token_ids, config.seed)
        # Tests hook this to compare raw logits with a reference implementation.
        self.logits_observer: LogitsObserver | None = None

    def execute(self, batch: ScheduledBatch) -> list[Emitted]:
        """Run one step; returns each sequence that reached its last known token with the tokens it emits
        (one, or more where drafts were accepted) and their logprob entries (None where not asked for)."""
        if self.cpu_threads is None or self.device.type != "cpu":
            return self._execute(batch)
        previous = torch.get_num_threads()
        torch.set_num_threads(self.cpu_threads)
        try:
            return self._execute(batch)
        finally:
            torch.set_num_threads(previous)

    @torch.inference_mode()
    def _execute(self, batch: ScheduledBatch) -> list[Emitted]:
        input_ids, positions, meta, sample_rows, row_seqs = self._prepare(batch)
        hidden = self.model(input_ids, positions, meta)
        if not row_seqs:
            return []
        logits = self.model.compute_logits(hidden[sample_rows])
        emitted, rows = accept_drafts(row_seqs, self.sampler(logits, row_seqs))
        if self.logits_observer is not None:
            self.logits_observer([row_seqs[i] for i in rows], logits[rows])
        return emitted

    def _prepare(self, batch: ScheduledBatch) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata,
                                                          torch.Tensor, list[Sequence]]:
        bs = self.block_size
        # Decodes (the last known token, then any drafts) first, those without drafts before those with:
        # each kind's own blocks are attended as one batch.
        scheduled = sorted(batch.scheduled.items(), key=lambda item: (
            item[0].num_computed_tokens < item[0].num_tokens - 1, item[1] > 1))
        seqs = [seq for seq, _ in scheduled]
        shared = self._shared_blocks(seqs)
        first_key = shared * bs  # position of each sequence's first own key
        ids: list[int] = []
        pos_parts, slot_parts = [], []
        sample_rows: list[int] = []
        row_seqs: list[Sequence] = []  # the sequence each sampled row belongs to
        prefills: list[PrefillChunk] = []
        decodes: list[tuple[Sequence, int]] = []
        for seq, n in scheduled:
            start, row = seq.num_computed_tokens, len(ids)
            ids.extend(seq.step_token_ids(start, n))
            pos = np.arange(start, start + n)
            table = np.asarray(seq.block_table)
            pos_parts.append(pos)
            slot_parts.append(table[pos // bs] * bs + pos % bs)
            if start == seq.num_tokens - 1:
                decodes.append((seq, n))
            else:
                prefills.append(PrefillChunk(row, n, self._blocks(table[shared:cdiv(start + n, bs)]),
                                             start + n - first_key, self._prefill_mask(start - first_key, n)))
            # Every row from the last known token on predicts a token: the next one, or a draft's check.
            first_sampled = seq.num_tokens - 1 - start
            if first_sampled < n:
                sample_rows.extend(range(row + first_sampled, row + n))
                row_seqs.extend([seq] * (n - first_sampled))
        meta = AttentionMetadata(self._tensor(np.concatenate(slot_parts)), prefills=prefills)
        if shared:
            meta.shared_blocks = self._blocks(np.asarray(seqs[0].block_table[:shared]))
        width_one = sum(n == 1 for _, n in decodes)
        for group, start in ((decodes[:width_one], 0), (decodes[width_one:], width_one)):
            if group:
                meta.decodes.append(self._decode_group(group, start, shared))
        positions = self._tensor(np.concatenate(pos_parts))
        return (self._tensor(ids), positions, meta, self._tensor(sample_rows), row_seqs)

    def _shared_blocks(self, seqs: list[Sequence]) -> int:
        """Leading blocks that every sequence in the batch has, all of them computed before this step."""
        limit = min(s.num_computed_tokens for s in seqs) // self.block_size
        if limit == 0 or len(seqs) == 1:
            return limit
        tables = np.array([s.block_table[:limit] for s in seqs])
        same = (tables == tables[:1]).all(axis=0)
        return limit if same.all() else int(np.argmin(same))

    def _decode_group(self, decodes: list[tuple[Sequence, int]], first_row: int, shared: int) -> DecodeGroup:
        bs = self.block_size
        start = np.array([s.num_computed_tokens for s, _ in decodes])
        queries = np.array([n for _, n in decodes])
        ctx = start + queries
        nblocks = -(-ctx // bs)
        own = np.zeros((len(decodes), int(nblocks.max()) - shared), dtype=np.int64)
        for i, (s, _) in enumerate(decodes):
            own[i, :nblocks[i] - shared] = s.block_table[shared:nblocks[i]]
        key_pos = shared * bs + np.arange(own.shape[1] * bs)
        width = int(queries.max())
        # Query j of a decode sees its own keys up to position start + j: causal over its drafts.
        query_pos = start[:, None] + np.arange(width)[None, :]
        bias = self._additive(key_pos[None, None, :] <= query_pos[:, :, None])[:, None]
        group = DecodeGroup(first_row, int(queries.sum()), self._tensor(own), bias)
        if width > 1:
            group.own_bias = bias.repeat(1, 1, self.model.heads // self.model.kv_heads, 1)
            # Rows of the group -> [decodes, width] slots, padded with each decode's last row.
            rows = np.minimum(np.arange(width)[None, :], queries[:, None] - 1) + (np.cumsum(queries) - queries)[:, None]
            group.rows = self._tensor(rows)
            group.valid = self._tensor((np.arange(width)[None, :] < queries[:, None]).reshape(-1).nonzero()[0])
        return group

    def _prefill_mask(self, offset: int, n: int) -> torch.Tensor | None:
        """Causal mask of a chunk whose first query is the key at `offset` of its own keys; None when 0."""
        if offset == 0:
            return None
        # Built once per step, shared by every layer.
        return self._additive(np.arange(offset + n)[None, :] <= np.arange(offset, offset + n)[:, None])

    def _additive(self, visible: np.ndarray) -> torch.Tensor:
        # 0 where a key is visible, -inf where not: additive float masks take torch's fast CPU attention
        # path, boolean ones do not.
        return self._tensor(np.where(visible, 0.0, -np.inf).astype(np.float32)).to(self.dtype)

    def _blocks(self, ids: np.ndarray) -> torch.Tensor | slice:
        # A prefix computed in one go usually got consecutive blocks: read them in place.
        if ids[-1] - ids[0] == len(ids) - 1 and (len(ids) < 3 or (np.diff(ids) == 1).all()):
            return slice(int(ids[0]), int(ids[-1]) + 1)
        return self._tensor(ids)

    def _tensor(self, x: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x)).to(self.device, non_blocking=True)

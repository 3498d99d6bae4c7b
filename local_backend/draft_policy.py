"""Which decoding sequences draft this step, and how many tokens: the policy over ngram_proposer's mechanism.

A draft token costs the step one row whether or not it is accepted, so it pays only when it is likely to be.
A step's time is a fixed part (reading the weights, Python) plus a part per row: F + r * rows. With B
sequences decoding, a token the step emits anyway costs (F + r * B) / B, and a draft row costs r, so a draft
token is worth its row when the chance that it is accepted (it and every draft before it) is at least
r * B / (F + r * B) = B / (B + F / r). F / r, the step's fixed cost counted in rows, was measured at 17-40
for SmolLM2-135M in bfloat16 on a 2-core CPU (4 decodes: 28-31 ms a step, each draft row 0.9-1.5 ms more,
as the context is shorter or longer; 16 decodes: 49-55 ms and 0.9-1.4 ms), and 32 is taken (16 streams of
code edits: 1.43x faster with speculation at 24, 1.62x at 32, plain text unchanged); in float32 at 12-18
(54-103 ms a step, 2.9-3.5 ms a row: MKL's packed float32 weights make rows dearer), and 14 is taken. On a
GPU, where a decode step reads every weight whatever its rows, it should be in the hundreds. So small batches speculate freely
and large ones only for sequences that are quoting their prompt: vLLM turns speculation off above a batch
size, this does it per sequence.

Each sequence's acceptance rate q is estimated from its own recent verifications (each accepted draft is a
hit, the first rejected one a miss, the drafts after it were never tested) over an optimistic prior (80%:
a new sequence drafts and so shows whether it is quoting). The evidence fades at every step, so a sequence
that starts or stops quoting is followed, and one that stopped drafting tries again once its misses fade.
It drafts the longest L with q ** L >= B / (B + F / r), at most num_speculative_tokens. A second
verification in a row that accepts nothing also pauses its drafting for 2 steps, a third for 4, and so on:
on a small batch, where even a likely miss is cheap, a sequence whose drafts keep being rejected (free text
that merely repeats short n-grams) still stops paying for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from prefixgate.local_backend.sequence import Sequence

# A step's fixed cost in rows (F / r above): CPU float32, CPU bfloat16 or float16, and a GPU (assumed, not
# measured here).
CPU_FLOAT32_FIXED_COST_ROWS, CPU_FIXED_COST_ROWS, GPU_FIXED_COST_ROWS = 14.0, 32.0, 256.0
# The prior's hits and misses, and the weight evidence keeps from one step to the next.
PRIOR_HITS, PRIOR_MISSES = 0.8, 0.2
FADE = 0.85
MAX_PAUSE = 64


@dataclass(slots=True)
class DraftHistory:
    hits: float = 0.0  # accepted drafts, faded
    misses: float = 0.0  # verifications that rejected a draft, faded
    failures: int = 0  # verifications in a row that accepted nothing
    pause: int = 0  # steps left without drafting

    @property
    def acceptance_rate(self) -> float:
        return (self.hits + PRIOR_HITS) / (self.hits + self.misses + PRIOR_HITS + PRIOR_MISSES)


class DraftPolicy:
    def __init__(self, max_draft_tokens: int, device_type: str, dtype: torch.dtype) -> None:
        self.max_draft_tokens = max_draft_tokens
        if device_type != "cpu":
            self.fixed_cost_rows = GPU_FIXED_COST_ROWS
        else:
            self.fixed_cost_rows = CPU_FLOAT32_FIXED_COST_ROWS if dtype == torch.float32 else CPU_FIXED_COST_ROWS

    def draft_length(self, seq: Sequence, num_decodes: int) -> int:
        """How many tokens `seq` may draft in a step where `num_decodes` sequences decode (0: none). Called
        once per step in which `seq` decodes."""
        history = seq.draft_history
        if history is None:
            history = seq.draft_history = DraftHistory()
        history.hits *= FADE
        history.misses *= FADE
        if history.pause:
            history.pause -= 1
            return 0
        q = history.acceptance_rate
        worth = num_decodes / (num_decodes + self.fixed_cost_rows)
        if q <= worth:
            return 0
        return min(self.max_draft_tokens, int(math.log(worth) / math.log(q)))

    def record(self, seq: Sequence, num_drafted: int, num_accepted: int) -> None:
        """A verification of `seq`'s drafts: the first `num_accepted` of `num_drafted` were kept."""
        history = seq.draft_history
        if history is None or not 0 <= num_accepted <= num_drafted:
            raise RuntimeError(f"{seq.request_id}: {num_accepted} of {num_drafted} drafts accepted, history {history!r}")
        history.hits += num_accepted
        history.misses += num_accepted < num_drafted
        if num_accepted:
            history.failures = 0
            return
        history.failures += 1
        # One rejection alone is common while quoting (where the answer departs from the prompt for a
        # token); a second in a row is not.
        if history.failures > 1:
            history.pause = min(2 ** (history.failures - 1), MAX_PAUSE)

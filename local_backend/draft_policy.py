"""Which decoding sequences draft this step, and how many tokens: the policy over ngram_proposer's mechanism.

A draft token costs the step one row whether or not it is accepted, so it pays only when it is likely to be.
A step's time is a fixed part (reading the weights, Python) plus a part per row: F + r * rows. With B
sequences decoding, a token the step emits anyway costs (F + r * B) / B, and a draft row costs r, so a draft
token is worth its row when the chance that it is accepted (it and every draft before it) is at least
r * B / (F + r * B) = B / (B + F / r). F / r, the step's fixed cost counted in rows, is about 13 for
SmolLM2-135M in bfloat16 on a 2-core CPU (4 decodes: 46 ms a step; each draft row about 2.7 ms more); on a
GPU, where a decode step reads every weight whatever its rows, it is in the hundreds. So small batches
speculate freely and large ones only for sequences that are quoting their prompt, as vLLM turns speculation
off above a batch size, but per sequence.

Each sequence's acceptance rate q is estimated from its own recent verifications (each accepted draft is a
hit, the first rejected one a miss; older verifications weigh less, so a sequence that starts or stops quoting is
followed), from an even prior. It drafts the longest L with q ** L >= B / (B + F / r), at most
num_speculative_tokens. A verification that accepts nothing also pauses the sequence's drafting for 2, 4, 8,
... steps: a sequence whose drafts keep being rejected (free text that merely repeats short n-grams) stops
paying for them, and still tries again now and then, since its text may turn to quoting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prefixgate.local_backend.sequence import Sequence

# A step's fixed cost in rows (F / r above), by device type.
FIXED_COST_ROWS = {"cpu": 16.0, "cuda": 256.0}
# Weight of the past at each verification, and the prior's hits and misses (an even chance, worth two).
DECAY = 0.7
PRIOR = 1.0
MAX_PAUSE = 64


@dataclass(slots=True)
class DraftHistory:
    hits: float = PRIOR  # accepted drafts
    misses: float = PRIOR  # verifications that rejected a draft (the drafts after it were never tested)
    failures: int = 0  # verifications in a row that accepted nothing
    pause: int = 0  # steps left without drafting

    @property
    def acceptance_rate(self) -> float:
        return self.hits / (self.hits + self.misses)


class DraftPolicy:
    def __init__(self, max_draft_tokens: int, device_type: str) -> None:
        self.max_draft_tokens = max_draft_tokens
        self.fixed_cost_rows = FIXED_COST_ROWS.get(device_type, FIXED_COST_ROWS["cuda"])

    def draft_length(self, seq: Sequence, num_decodes: int) -> int:
        """How many tokens `seq` may draft in a step where `num_decodes` sequences decode (0: none)."""
        history = seq.draft_history
        if history is None:
            history = seq.draft_history = DraftHistory()
        if history.pause:
            history.pause -= 1
            return 0
        q = history.acceptance_rate
        worth = num_decodes / (num_decodes + self.fixed_cost_rows)
        if q <= worth:
            return 0
        if q >= 1.0:
            return self.max_draft_tokens
        return min(self.max_draft_tokens, int(math.log(worth) / math.log(q)))

    def record(self, seq: Sequence, num_drafted: int, num_accepted: int) -> None:
        """A verification of `seq`'s drafts: the first `num_accepted` of `num_drafted` were kept."""
        history = seq.draft_history
        assert history is not None and 0 <= num_accepted <= num_drafted
        history.hits = history.hits * DECAY + num_accepted
        history.misses = history.misses * DECAY + (num_accepted < num_drafted)
        if num_accepted:
            history.failures = 0
        else:
            history.failures += 1
            history.pause = min(2 ** history.failures, MAX_PAUSE)

"""Deterministic replies for the mock providers: the same prompt always gets the same text.

The reply is drawn from a fixed word list seeded by a hash of the prompt, between 8 and 48 words long (or `words`
long: a long-winded model, faults.py's `answer_words`), and cut at `max_tokens` (counted with the provider's encoding),
so usage and stop reasons are real.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from prefixgate.simulation.mock.agent import Turn, structured_text
from prefixgate.tokens import count_tokens

_WORDS = (
    "the cache keeps a stable prefix so every later request reads it for a fraction of the price and "
    "answers sooner while the dynamic part at the end changes freely between calls without breaking "
    "what came before it in the prompt order of tools system and messages"
).split()


@dataclass(frozen=True)
class Reply:
    text: str
    output_tokens: int
    truncated: bool

    def chunks(self, words_per_chunk: int = 3) -> list[str]:
        """The text in stream-sized pieces that concatenate back to it exactly."""
        words = self.text.split(" ")
        pieces = [" ".join(words[i:i + words_per_chunk]) for i in range(0, len(words), words_per_chunk)]
        return [p if i == 0 else " " + p for i, p in enumerate(pieces)] if self.text else []


def reply_for(prompt: str, max_tokens: int | None, encoding: str = "cl100k_base", words: int | None = None) -> Reply:
    digest = hashlib.sha256(prompt.encode()).digest()
    length = words or 8 + digest[0] % 41
    chosen = [_WORDS[digest[(i % 31) + 1] * (i + 1) % len(_WORDS)] for i in range(length)]
    chosen[0] = chosen[0].capitalize()
    text = " ".join(chosen) + "."
    if max_tokens is None or count_tokens(text, encoding) <= max_tokens:
        return Reply(text, count_tokens(text, encoding), False)
    fits, over = 0, len(chosen)     # the most leading words within max_tokens (a long answer: by bisection)
    while over - fits > 1:
        mid = (fits + over) // 2
        fits, over = (mid, over) if count_tokens(" ".join(chosen[:mid]), encoding) <= max_tokens else (fits, mid)
    text = " ".join(chosen[:fits])
    return Reply(text, count_tokens(text, encoding), True)


def structured_reply(turn: Turn, encoding: str = "cl100k_base") -> Reply | None:
    """The JSON answer to a structured-output request (agent.py), never cut: a cut one would not parse."""
    text = structured_text(turn)
    return None if text is None else Reply(text, count_tokens(text, encoding), False)

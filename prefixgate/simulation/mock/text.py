"""Deterministic replies for the mock providers: the same prompt always gets the same text.

The reply is drawn from a fixed word list seeded by a hash of the prompt, between 8 and 48 words long,
and cut at `max_tokens` (counted with the provider's encoding), so usage and stop reasons are real.
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


def reply_for(prompt: str, max_tokens: int | None, encoding: str = "cl100k_base") -> Reply:
    digest = hashlib.sha256(prompt.encode()).digest()
    length = 8 + digest[0] % 41
    words = [_WORDS[digest[(i % 31) + 1] * (i + 1) % len(_WORDS)] for i in range(length)]
    words[0] = words[0].capitalize()
    text = " ".join(words) + "."
    if max_tokens is None or count_tokens(text, encoding) <= max_tokens:
        return Reply(text, count_tokens(text, encoding), False)
    kept: list[str] = []
    for word in words:
        if count_tokens(" ".join([*kept, word]), encoding) > max_tokens:
            break
        kept.append(word)
    text = " ".join(kept)
    return Reply(text, count_tokens(text, encoding), True)


def structured_reply(turn: Turn, encoding: str = "cl100k_base") -> Reply | None:
    """The JSON answer to a structured-output request (agent.py), never cut: a cut one would not parse."""
    text = structured_text(turn)
    return None if text is None else Reply(text, count_tokens(text, encoding), False)

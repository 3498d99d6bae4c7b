"""Prompt builders with exact token counts (cl100k: " hello" and friends are one token each)."""

from __future__ import annotations

from prefixgate.tokens import count_tokens

WORDS = (" alpha", " beta", " gamma", " delta", " omega", " hello", " world", " river", " stone", " cloud")


def text_of(tokens: int, word: str = " hello") -> str:
    """A text of exactly `tokens` cl100k tokens."""
    text = word * tokens
    assert count_tokens(text) == tokens, (word, tokens, count_tokens(text))
    return text


def anthropic_body(model: str = "claude-sonnet-4-6", *, system_tokens: int = 2000, question: str = "Why?",
                   ttl: str | None = None, cache: bool = True, **extra: object) -> dict:
    marker: dict = {"type": "ephemeral"} | ({"ttl": ttl} if ttl else {})
    block: dict = {"type": "text", "text": text_of(system_tokens)}
    if cache:
        block["cache_control"] = marker
    return {"model": model, "max_tokens": 64, "system": [block],
            "messages": [{"role": "user", "content": question}], **extra}

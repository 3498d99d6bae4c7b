"""The `max_tokens` a request to Claude carries when its caller's format let it leave the limit out.

Anthropic requires `max_tokens`; OpenAI (Chat Completions and Responses) and Gemini do not, and without one
an answer runs to the model's own output limit there. A request translated from those formats asks Claude for
the target model's documented limit (the catalogue's `max_output_tokens`), so the answer is cut no shorter
than on the caller's own API. A model the catalogue gives no limit gets 4,096, which every Claude model allows.
"""

from __future__ import annotations

from prefixgate.dialects.neutral import Chat
from prefixgate.dialects.sampling import claude_id

FALLBACK_MAX_TOKENS = 4096


def model_output_limit(model: str) -> int:
    """The most output tokens `model` (any platform's id for a Claude model) may answer with; 4,096 if unknown."""
    from prefixgate.providers.rules import default_catalog  # the catalogue loads on the first such request

    row = default_catalog().names("anthropic").get(claude_id(model))
    return row.max_output_tokens if row is not None and row.max_output_tokens else FALLBACK_MAX_TOKENS


def max_tokens_for(chat: Chat, model: str) -> int:
    """The caller's output limit, or `model`'s own (noted on `chat`) where the caller set none."""
    if chat.max_tokens is not None:
        return chat.max_tokens
    limit = model_output_limit(model)
    chat.notes.append(f"max_tokens {limit} ({model}'s output limit: the caller set none)")
    return limit

"""The output limit a translated request carries: to Claude where its caller's format let it leave the limit out,
to Gemini where its caller asked for more than the model gives.

Anthropic requires `max_tokens`; OpenAI (Chat Completions and Responses) and Gemini do not, and without one
an answer runs to the model's own output limit there. A request translated from those formats asks Claude for
the target model's documented limit (the catalogue's `max_output_tokens`), so the answer is cut no shorter
than on the caller's own API. A model the catalogue gives no limit gets 4,096, which every Claude model allows. A
caller's limit over the model's own (an OpenAI caller's 100,000 falling over to Claude Haiku 4.5, which gives 64,000)
is cut to it: Anthropic answers it with a 400 naming `max_tokens`.

Gemini refuses a `maxOutputTokens` over the model's limit ("... the supported range is from 1 (inclusive) to 65537
(exclusive)"), where OpenAI and Claude callers may ask for more (128,000 on Claude Opus 4.7 and GPT-5.x): such a
limit reaches Gemini cut to the model's own, since no answer there can run longer anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixgate.dialects.neutral import Chat
from prefixgate.dialects.sampling import claude_id

if TYPE_CHECKING:
    from prefixgate.providers.rules import Catalog

FALLBACK_MAX_TOKENS = 4096


def model_output_limit(model: str) -> int:
    """The most output tokens `model` (any platform's id for a Claude model) may answer with; 0 if the catalogue
    does not say."""
    from prefixgate.providers.rules import default_catalog  # the catalogue loads on the first such request

    row = default_catalog().names("anthropic").get(claude_id(model))
    return row.max_output_tokens if row is not None else 0


def max_tokens_for(chat: Chat, model: str) -> int:
    """The caller's output limit (cut as `within_claude_limit` cuts it), or `model`'s own (noted on `chat`) where the
    caller set none."""
    if chat.max_tokens is None:
        limit = model_output_limit(model) or FALLBACK_MAX_TOKENS
        chat.notes.append(f"max_tokens {limit} ({model}'s output limit: the caller set none)")
        return limit
    return within_claude_limit(chat, model)


def within_claude_limit(chat: Chat, model: str) -> int | None:
    """The caller's output limit, cut (and noted on `chat`) to the Claude `model`'s catalogued own where it asks for
    more: Anthropic and Bedrock refuse a larger one with a 400, and no answer could run longer anyway."""
    limit = model_output_limit(model)
    if chat.max_tokens is not None and limit and chat.max_tokens > limit:
        chat.notes.append(f"max_tokens {chat.max_tokens} -> {limit} ({model}'s output limit)")
        return limit
    return chat.max_tokens


def within_gemini_limit(chat: Chat, model: str) -> int | None:
    """The caller's output limit, cut (and noted on `chat`) to the Gemini `model`'s own where it asks for more."""
    from prefixgate.providers.pricing import UnknownModel, resolve_model

    try:
        limit = resolve_model("gemini", model).max_output_tokens
    except UnknownModel:
        return chat.max_tokens
    if chat.max_tokens is None or not limit or chat.max_tokens <= limit:
        return chat.max_tokens
    chat.notes.append(f"max_tokens {chat.max_tokens} -> maxOutputTokens {limit} ({model}'s output limit)")
    return limit


def catalogued_limit(rows: str, model: str, catalog: Catalog | None = None) -> int:
    """The most output tokens `model` answers with, from `rows`' catalogue rows (a Claude model on any platform by its
    Claude id); 0 if the catalogue does not say (the packaged one carries Claude's and Gemini's, not OpenAI's)."""
    from prefixgate.providers.pricing import UnknownModel, resolve_model
    from prefixgate.providers.rules import default_catalog

    catalog = catalog or default_catalog()
    claude = catalog.names("anthropic").get(claude_id(model))
    if claude is not None and claude.max_output_tokens:
        return claude.max_output_tokens
    try:
        return resolve_model(rows, model, catalog).max_output_tokens
    except UnknownModel:
        return 0


# Where a request of each format carries its output limit at the top level; the others nest it.
TOP_LEVEL_LIMIT = {"openai": "max_completion_tokens", "responses": "max_output_tokens", "anthropic": "max_tokens",
                   "vertex_anthropic": "max_tokens", "bedrock_invoke": "max_tokens"}


def with_output_limit(fmt: str, params: dict, tokens: int) -> dict:
    """`params` (a request of format `fmt`, less its prompt) with the output limit `tokens`, in that format's own field
    (Gemini's generation config keeps the spelling the body uses: camelCase or snake_case)."""
    if fmt in TOP_LEVEL_LIMIT:
        return {**params, TOP_LEVEL_LIMIT[fmt]: tokens}
    if fmt == "bedrock_converse":
        return {**params, "inferenceConfig": {**(params.get("inferenceConfig") or {}), "maxTokens": tokens}}
    snake = fmt == "interactions" or "generation_config" in params
    config = "generation_config" if snake else "generationConfig"
    return {**params, config: {**(params.get(config) or {}), "max_output_tokens" if snake else "maxOutputTokens": tokens}}

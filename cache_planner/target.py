"""Where a planned request goes: the provider whose caching rules apply, and the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Provider = Literal["anthropic", "openai", "gemini", "bedrock", "local"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "gemini", "bedrock", "local")


@dataclass(frozen=True)
class Target:
    provider: Provider
    model: str
    # Whose price rows (and cache minimum) the model is looked up under, when not `provider`'s own: a
    # hosted OpenAI-compatible provider (deepseek, openrouter, ...) caches under OpenAI's rules (Claude's,
    # for OpenRouter's Claude and Gemini models) but lists its own models.
    rows_of: str = ""

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"target provider must be one of {', '.join(PROVIDERS)}, got {self.provider!r}")
        if not self.model:
            raise ValueError("target model must not be empty")

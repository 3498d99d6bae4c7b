"""A dialect-neutral chat request: what translation reads from one wire format and writes to another.

It holds only what all three APIs can express (text, images, tool calls and results, tool definitions,
common sampling options) plus the caching intent: checkpoints on parts and tools, a cache key, and
Anthropic's request-level automatic caching. Anything else is refused or named in the explanation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from prefixgate.ir import Checkpoint

PartKind = Literal["text", "image", "tool_call", "tool_result"]


@dataclass
class Part:
    kind: PartKind
    text: str = ""
    checkpoint: Checkpoint | None = None
    mime: str = ""         # image: media type with inline base64 `data`, or a `url`
    data: str = ""
    url: str = ""
    call_id: str = ""      # tool_call / tool_result
    name: str = ""
    args: Any = None       # tool_call arguments (a JSON object)
    is_error: bool = False


@dataclass
class Turn:
    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part]


@dataclass
class Tool:
    name: str
    description: str = ""
    schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    checkpoint: Checkpoint | None = None


@dataclass
class Chat:
    turns: list[Turn]
    tools: list[Tool] = field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    # "auto", "any" (must call some tool), "none", or a tool name to force.
    tool_choice: str | None = None
    user: str | None = None
    # OpenAI's prompt_cache_key: "requests with this key share a prefix; keep them together".
    cache_key: str | None = None
    # Anthropic's top-level cache_control: cache up to the last cacheable block.
    auto_cache: Checkpoint | None = None
    # What translation could not carry over, for the plan's explanation.
    notes: list[str] = field(default_factory=list)

    def call_names(self) -> dict[str, str]:
        """tool call id -> tool name (Gemini answers calls by name, the others by id)."""
        return {p.call_id: p.name for t in self.turns for p in t.parts if p.kind == "tool_call" and p.call_id}

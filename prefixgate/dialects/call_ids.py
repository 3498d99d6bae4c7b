"""Tool call ids a translated conversation can carry to any target.

OpenAI-compatible backends may number their calls per turn (`call_0` every turn: grok over OpenAI Chat,
NVIDIA-NeMo/Switchyard#502) or spell them with characters Claude refuses (kimi-k3's `list_dir:0`,
fw-ai/fireconnect#16), and OpenAI Chat takes such a history back. Claude does not: "`tool_use` ids must be unique"
and "tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'" are 400s (anthropics/claude-code#20508,
anomalyco/opencode#1279). So, before a conversation is written in another format, each call id keeps to that
pattern and a repeated one is renamed (`call_0`, then `call_0_2`), each result following the call it answers.
The renaming is deterministic, so a resent conversation renames alike and its prefix stays cached.
"""

from __future__ import annotations

import re

from prefixgate.dialects.neutral import Chat
from prefixgate.errors import RequestError

_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def make_call_ids_unique(chat: Chat) -> None:
    """Rename `chat`'s tool call ids (and their results') that repeat or use characters outside `[a-zA-Z0-9_-]`."""
    used: set[str] = set()
    latest: dict[str, str] = {}        # a caller's id -> the id of its most recent call
    renamed = False
    for turn in chat.turns:
        for part in turn.parts:
            if part.kind in ("tool_call", "tool_result") and not isinstance(part.call_id, str | None):
                # The readers take the caller's JSON value as is; its own API would refuse it too.
                raise RequestError(f"a tool call's id must be a string, got {part.call_id!r:.40}")
            if part.kind == "tool_call" and part.call_id:
                new = _OUTSIDE.sub("_", part.call_id)
                n = 1
                while new in used:
                    n += 1
                    new = f"{_OUTSIDE.sub('_', part.call_id)}_{n}"
                used.add(new)
                renamed = renamed or new != part.call_id
                latest[part.call_id] = new
                part.call_id = new
            elif part.kind == "tool_result" and part.call_id in latest:
                part.call_id = latest[part.call_id]
    if renamed:
        chat.notes.append("tool call ids renamed where they repeat or use characters other than [a-zA-Z0-9_-]")

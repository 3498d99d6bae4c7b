"""The planner's one entry point and its result.

`plan(conversation, target, state, mode)` returns a `Plan`: the conversation to send (rewritten
and annotated with checkpoints), provider cache parameters, and an explanation of every decision,
which the gateway keeps with the request in its ledger and returns in `x-prefixgate-plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from prefixgate.cache_planner.target import Target

from prefixgate.ir import Conversation

# What a policy lets the planner do: rewrite static-first and place checkpoints, only place
# checkpoints, or send the request exactly as the caller wrote it.
Mode = Literal["rewrite", "checkpoints", "off"]
MODES: tuple[Mode, ...] = ("rewrite", "checkpoints", "off")


@dataclass
class Plan:
    conversation: Conversation
    target: Target
    mode: Mode
    route: str = ""
    # Chained hash of the stable prefix: the key for prefix-affinity routing and `prompt_cache_key`.
    prefix_hash: str = ""
    explanation: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """One short line for a response header: mode, checkpoints, rewrites."""
        marks = len(self.conversation.checkpoints())
        rewrites = sum(1 for line in self.explanation if line.startswith("rewrite:"))
        return f"mode={self.mode};checkpoints={marks};rewrites={rewrites}"


def plan(conversation: Conversation, target: Target, state: object | None = None, mode: Mode = "rewrite") -> Plan:
    """Plan `conversation` for `target`. The conversation passed in is never modified."""
    if mode not in MODES:
        raise ValueError(f"planner mode must be one of {', '.join(MODES)}, got {mode!r}")
    conv = conversation.copy()
    keys = conv.prefix_keys()
    result = Plan(conv, target, mode, prefix_hash=keys[-1] if keys else "")
    if mode == "off":
        result.explanation.append("passthrough: planning is off for this route")
    return result

"""How much a mock Gemini model thinks before it answers.

Gemini 2.5 and 3.x models think by default, and report it as `usageMetadata.thoughtsTokenCount`, billed as
output and left out of `candidatesTokenCount` (ai.google.dev/gemini-api/docs/thinking: "response pricing is the
sum of output tokens and thinking tokens"). A `thinkingBudget` of 0 turns thinking off where the model allows it;
a smaller budget bounds it. Thinking counts against `maxOutputTokens`: a limit it uses up leaves an empty answer
that stops at MAX_TOKENS (what 2.5 users hit with small limits).
"""

from __future__ import annotations

import re
from typing import Any

from prefixgate.simulation.mock.gemini_generation_params import proto_field

# The mock's thinking, when a model thinks at all and its budget allows this much.
THOUGHT_TOKENS = 64


def generation(model_id: str) -> tuple[int, int]:
    """A Gemini model's version, (2, 5) for `gemini-2.5-pro`; (0, 0) for another name."""
    version = re.match(r"gemini-(\d+)(?:\.(\d+))?", model_id)
    return (int(version.group(1)), int(version.group(2) or 0)) if version else (0, 0)


def thinks(model_id: str) -> bool:
    """Whether `model_id` is a thinking model (Gemini 2.5 and later)."""
    return generation(model_id) >= (2, 5)


def thought_tokens(body: dict[str, Any], model_id: str, max_output: int | None) -> int:
    """The tokens `model_id` thinks for `body`, within its budget and the answer's `max_output`."""
    if not thinks(model_id):
        return 0
    config = proto_field(body, "generationConfig")
    thinking = proto_field(config, "thinkingConfig") if isinstance(config, dict) else None
    budget = proto_field(thinking, "thinkingBudget") if isinstance(thinking, dict) else None
    tokens = min(THOUGHT_TOKENS, budget) if isinstance(budget, int) and budget >= 0 else THOUGHT_TOKENS
    return tokens if max_output is None else min(tokens, max_output)

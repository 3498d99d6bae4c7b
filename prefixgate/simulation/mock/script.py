"""When mock-providers answers a Responses request with a function call instead of text: agent.py's rules
(per `tool_choice`, the user's words, or the marker `[[mock:call NAME {json arguments}]]`), read from the
Responses input items. Arguments not given in the marker are the tool schema's fixed values (the same values
answer a `text.format` JSON schema)."""

from __future__ import annotations

from dataclasses import dataclass

from prefixgate.simulation.mock.agent import decide, responses_turn
from prefixgate.simulation.mock.schema_value import value_for

__all__ = ["ScriptedCall", "scripted_call", "value_for"]


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: str


def scripted_call(body: dict, items: list[dict]) -> ScriptedCall | None:
    """The function call this request gets, or None for a text answer. `items`: the whole input."""
    call = decide(responses_turn(body, items))
    return None if call is None else ScriptedCall(call.name, call.arguments)

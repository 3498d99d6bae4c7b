"""Gemini 3's thought signatures (ai.google.dev/gemini-api/docs/thought-signatures).

A Gemini 3 model signs the first `functionCall` part of each step it answers with (`thoughtSignature`, beside
`functionCall` on the part, opaque; parallel calls: the first only). A request replaying the current turn (from
the last user message that is not only function responses) must carry each step's signature back, else a 400
INVALID_ARGUMENT: "Function call is missing a thought_signature in functionCall parts. This is required for tools to
work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call
`default_api:<name>` , position <n>. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more
details." (as quoted from the API by agents that dropped it; <n> counts the contents from 1). Earlier turns are not
checked, and Google's documented stand-in for history from another model, `skip_thought_signature_validator`, passes.
Models before Gemini 3 check nothing.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from prefixgate.errors import RequestError
from prefixgate.simulation.mock.gemini_generation_params import proto_field
from prefixgate.simulation.mock.gemini_thinking import generation

_DOCS = "https://ai.google.dev/gemini-api/docs/thought-signatures"


def signs(model_id: str) -> bool:
    """Whether `model_id` signs its function calls and checks them replayed (Gemini 3 and later)."""
    return generation(model_id) >= (3, 0)


def signature_for(name: str, arguments: str) -> str:
    """An opaque signature for a call the mock's model makes."""
    return base64.b64encode(hashlib.sha256(f"{name}:{arguments}".encode()).digest()).decode()


def check_thought_signatures(contents: list[Any], model_id: str) -> None:
    """Raise Gemini's 400 for a call of the current turn in `contents` replayed without its signature, if any."""
    if not signs(model_id):
        return
    for position in range(_turn_start(contents), len(contents)):
        content = contents[position]
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        first = next((p for p in content.get("parts") or [] if isinstance(p, dict) and proto_field(p, "functionCall")),
                     None)
        if first is not None and not proto_field(first, "thoughtSignature"):
            name = (proto_field(first, "functionCall") or {}).get("name", "")
            raise RequestError("Function call is missing a thought_signature in functionCall parts. This is required "
                               "for tools to work correctly, and missing thought_signature may lead to degraded model "
                               f"performance. Additional data, function call `default_api:{name}` , position "
                               f"{position + 1}. Please refer to {_DOCS} for more details.",
                               field=f"contents.{position}.parts")


def _turn_start(contents: list[Any]) -> int:
    """Where the current turn starts: the last user content holding more than function responses."""
    for position in range(len(contents) - 1, -1, -1):
        content = contents[position] if isinstance(contents[position], dict) else {}
        if content.get("role", "user") == "user" and any(
                isinstance(p, dict) and not proto_field(p, "functionResponse") for p in content.get("parts") or []):
            return position
    return 0

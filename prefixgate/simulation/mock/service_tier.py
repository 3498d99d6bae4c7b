"""Service tiers as the hosted APIs document them: the values a request may ask for, and the tier the answer
says served it (which "may be different from the value set in the parameter", OpenAI's words).

- OpenAI (Chat Completions, Responses; openai-python `completion_create_params.py`): `service_tier` auto |
  default | flex | scale | priority | fast. auto runs at the project's tier (default here); fast is answered
  as priority. The answer's `service_tier` names the tier used.
- Anthropic Messages (anthropic-sdk-python `message_create_params.py`, `usage.py`): `service_tier` auto |
  standard_only; auto uses Priority Tier capacity only where the organisation bought some (none here), so
  `usage.service_tier` is standard.

A fault `served_tier=...` stands for capacity running out: the answer names that tier whatever was asked.
"""

from __future__ import annotations

from typing import Any

from prefixgate.errors import RequestError
from prefixgate.simulation.mock.faults import Fault

OPENAI_SERVES = {"auto": "default", "default": "default", "flex": "flex", "scale": "scale", "priority": "priority",
                 "fast": "priority"}
ANTHROPIC_ASKS = ("auto", "standard_only")


def openai_tier(body: dict[str, Any], fault: Fault | None) -> str:
    asked = body.get("service_tier")
    if asked is not None and asked not in OPENAI_SERVES:
        raise RequestError(f"Invalid value: '{asked}'. Supported values are: "
                           f"{', '.join(repr(t) for t in OPENAI_SERVES)}.", field="service_tier")
    return (fault.served_tier if fault and fault.served_tier else None) or OPENAI_SERVES[asked or "auto"]


def anthropic_tier(body: dict[str, Any], fault: Fault | None) -> str:
    asked = body.get("service_tier")
    if asked is not None and asked not in ANTHROPIC_ASKS:
        raise RequestError("service_tier: Input should be 'auto' or 'standard_only'", field="service_tier")
    return (fault.served_tier if fault and fault.served_tier else None) or "standard"

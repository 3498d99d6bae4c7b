"""Priority classes sent to hosted upstreams as the service tier each documents, where a route opts in.

    routes: [{name: chat, ..., service_tiers: {high: priority, low: flex}}]

The mapping is per priority class (the key's, else the route's: `policies.router.priority_for`); a class it
does not name sends no tier. Each name must be one the route's hosted targets take (a load error otherwise):

- OpenAI, Chat Completions and Responses: `service_tier` auto | default | flex | priority (openai-python
  `completion_create_params.py`); the answer's `service_tier` is the tier that served it, which may differ.
- Anthropic Messages: `service_tier` auto | standard_only (anthropic-sdk-python `message_create_params.py`);
  the answer's `usage.service_tier` is standard, priority or batch.

Self-hosted targets get the class as vLLM's `priority` instead; other upstream kinds document no such field
here and never get one. The ledger prices a request at the tier the answer names (providers/pricing.py).

A caller's own `service_tier` passes through on a route without `service_tiers` (the gateway adds none, and
prices what the upstream says it served, so budgets stay true); on a route with them, the route's tier for
the caller's class replaces it (noted), since the classes are the operator's to assign.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Upstream kind -> tiers its request field takes.
REQUEST_TIERS: dict[str, tuple[str, ...]] = {
    "openai": ("auto", "default", "flex", "priority"),
    "openai_responses": ("auto", "default", "flex", "priority"),
    "anthropic": ("auto", "standard_only"),
}
CLASSES = ("high", "normal", "low")


def parse_service_tiers(spec: Any, path: str, kinds: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(class, tier) pairs from a route's `service_tiers`, checked against its hosted targets (`kinds`:
    upstream name -> kind; self-hosted ones are left out by the caller). ValueError names what is wrong."""
    if spec is None:
        return ()
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"{path}: a mapping of priority class to service tier is required, e.g. "
                          "{high: priority, low: flex}")
    for cls, tier in spec.items():
        if cls not in CLASSES:
            raise ValueError(f"{path}.{cls}: not a priority class ({', '.join(CLASSES)})")
        for name, kind in kinds.items():
            allowed = REQUEST_TIERS.get(kind)
            if allowed is None:
                raise ValueError(f"{path}: target {name!r} ({kind}) documents no service tier the gateway sends "
                                  f"(only {', '.join(sorted(REQUEST_TIERS))} upstreams take one)")
            if tier not in allowed:
                raise ValueError(f"{path}.{cls}: {tier!r} is not a service tier of {kind} upstream {name!r} "
                                  f"({', '.join(allowed)})")
    return tuple(sorted(spec.items()))


def takes_tiers(service_tiers: tuple[tuple[str, str], ...], kind: str) -> bool:
    """Whether this route decides the `service_tier` of what it sends to an upstream of `kind`."""
    return bool(service_tiers) and kind in REQUEST_TIERS


def apply_tier(payload: dict[str, Any], service_tiers: tuple[tuple[str, str], ...], priority: str) -> str | None:
    """Set the request's `service_tier` to the route's tier for class `priority` (none where the route names
    none for it), replacing the caller's; returns the ledger note, None where nothing was sent."""
    asked, tier = payload.pop("service_tier", None), dict(service_tiers).get(priority)
    if tier is not None:
        payload["service_tier"] = tier
    replaced = f"; the caller's {asked!r} replaced" if asked is not None and asked != tier else ""
    if tier is None:
        return f"service tier: none for class {priority}{replaced}" if replaced else None
    return f"service tier: {tier} asked (class {priority}){replaced}"

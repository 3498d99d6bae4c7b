"""Cache diagnostics as the providers document them (reference: wire-2026-11.md sections 2 and 3).

Anthropic: a Messages request carrying `diagnostics: {"previous_message_id": ...}` has its prompt fingerprint
stored under its answer's id (only requests carrying the object are stored); with an id, the answer's
`diagnostics.cache_miss_reason` names the first part that changed (model, tools, system, an earlier message),
`previous_message_not_found` for an id with no record, and `diagnostics` is null when nothing diverged.

OpenAI Responses: every response's fingerprint is kept; `prompt_cache_options.comparison_response_id` gets
`prompt_cache_diagnostics` back: `cache_miss` with one of nine reasons and `cache_missed_tokens`, `cache_hit`,
`comparison_response_not_found` or `unavailable`.

Both count the missed tokens as the provider does: the tokens of this request not read from cache.
Fingerprints ignore cache markers (`cache_control`, `prompt_cache_breakpoint`): moving a checkpoint is no change.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from prefixgate.usage import Usage

KEEP = 10_000          # fingerprints kept per provider (oldest dropped first)
_MARKERS = {"cache_control", "prompt_cache_breakpoint"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _MARKERS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_strip(value), sort_keys=True).encode()).hexdigest()


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [{"type": "text", "text": value}]


@dataclass(frozen=True)
class Fingerprint:
    fields: tuple[tuple[str, str], ...]      # (reason when it differs, digest), in prefix order
    items: tuple[str, ...]                    # digest of each message / input item
    tokens: int = 0                           # the request's input tokens


def missed_tokens(usage: Usage) -> int:
    return usage.uncached_input + usage.cache_write


class FingerprintStore:
    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], Fingerprint] = OrderedDict()

    def put(self, tenant: str, response_id: str, fp: Fingerprint) -> None:
        self._kept[(tenant, response_id)] = fp
        while len(self._kept) > KEEP:
            self._kept.popitem(last=False)

    def get(self, tenant: str, response_id: str) -> Fingerprint | None:
        return self._kept.get((tenant, response_id))


def changed(before: Fingerprint, now: Fingerprint, items_reason: str) -> str | None:
    """The first part of `now` that differs from `before` (None: `before`'s prefix carries over)."""
    for (reason, old), (_, new) in zip(before.fields, now.fields, strict=True):
        if old != new:
            return reason
    if before.items != now.items[:len(before.items)]:
        return items_reason
    return None


# ---- Anthropic Messages ------------------------------------------------------------------------

def anthropic_fingerprint(body: dict) -> Fingerprint:
    # Anthropic's cache prefix is tools, then system, then messages.
    return Fingerprint((("model_changed", _digest(body.get("model"))), ("tools_changed", _digest(body.get("tools") or [])),
                        ("system_changed", _digest(_as_list(body.get("system"))))),
                       tuple(_digest(m) for m in body.get("messages") or []))


class AnthropicDiagnostics:
    def __init__(self) -> None:
        self.store = FingerprintStore()

    def answer(self, body: dict, tenant: str, message_id: str, usage: Usage) -> dict[str, Any]:
        """The answer's extra fields: `{"diagnostics": ...}` when the request asked, else nothing."""
        asked = body.get("diagnostics")
        if not isinstance(asked, dict):
            return {}
        fp = replace(anthropic_fingerprint(body), tokens=usage.input_total)
        previous = asked.get("previous_message_id")
        self.store.put(tenant, message_id, fp)
        if previous is None:
            return {"diagnostics": None}
        before = self.store.get(tenant, str(previous))
        if before is None:
            return {"diagnostics": {"cache_miss_reason": {"type": "previous_message_not_found"}}}
        reason = changed(before, fp, "messages_changed")
        if reason is None:
            return {"diagnostics": None}
        # What would have been read had the prefix matched: at most the previous request's whole prompt.
        missed = min(before.tokens, missed_tokens(usage))
        return {"diagnostics": {"cache_miss_reason": {"type": reason, "cache_missed_input_tokens": missed}}}


# ---- OpenAI Responses --------------------------------------------------------------------------

def responses_fingerprint(sent: dict) -> Fingerprint:
    text = sent.get("text") if isinstance(sent.get("text"), dict) else {}
    reasoning = sent.get("reasoning") if isinstance(sent.get("reasoning"), dict) else {}
    return Fingerprint((("model_changed", _digest(sent.get("model"))),
                        ("prompt_cache_key_changed", _digest(sent.get("prompt_cache_key"))),
                        ("service_tier_changed", _digest(sent.get("service_tier") or "auto")),
                        ("tools_changed", _digest(sent.get("tools") or [])),
                        ("text_format_changed", _digest(text.get("format") or {"type": "text"})),
                        ("verbosity_changed", _digest(text.get("verbosity") or "medium")),
                        ("reasoning_effort_changed", _digest(reasoning.get("effort"))),
                        ("input_changed", _digest(sent.get("instructions")))),
                       tuple(_digest(i) for i in _as_list(sent.get("input"))))


class ResponsesDiagnostics:
    def __init__(self) -> None:
        self.store = FingerprintStore()

    def answer(self, body: dict, sent: dict, tenant: str, response_id: str, usage: Usage) -> dict[str, Any]:
        """The response's extra fields: the applied `prompt_cache_options` and, when a comparison was asked,
        `prompt_cache_diagnostics`. `sent` is the request with its stored chain expanded."""
        fp = responses_fingerprint(sent)
        self.store.put(tenant, response_id, fp)
        options = body.get("prompt_cache_options")
        if not isinstance(options, dict):
            return {}
        comparison = options.get("comparison_response_id")
        applied = {"mode": options.get("mode", "implicit"), "ttl": options.get("ttl", "30m"),
                   "comparison_response_id": comparison}
        if comparison is None:
            return {"prompt_cache_options": applied}
        before = self.store.get(tenant, str(comparison))
        if before is None:
            verdict: dict[str, Any] = {"type": "comparison_response_not_found"}
        else:
            reason = changed(before, fp, "input_changed")
            if reason is not None:
                verdict = {"type": "cache_miss", "reason": reason, "cache_missed_tokens": missed_tokens(usage),
                           "comparison_reusable_tokens": None}
            else:
                verdict = {"type": "cache_hit" if usage.cache_read else "unavailable"}
        return {"prompt_cache_options": applied, "prompt_cache_diagnostics": verdict}

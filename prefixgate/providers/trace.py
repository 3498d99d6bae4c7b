"""The trace format: one JSON object per line, one recorded request per object.

    {"t": seconds, "provider": "anthropic"|"openai"|"gemini"|"bedrock", "model": str, "route": str,
     "tenant": str, "output_tokens": int, "body": <the native request body>}

`route` (default "default") groups the report; `tenant` (default "default") is the cache scope (Anthropic
workspace, OpenAI organisation, Gemini project); `output_tokens` defaults to 0. Gemini explicit caches
add `"endpoint"`: "cachedContents.create" (body: the CachedContent, optionally with the recorded "name"),
"cachedContents.update" or "cachedContents.delete" (with "name"); the default is "generate".
`"keepalive": true` marks a request sent only to keep a cached prefix alive (`prefixgate plan --keepalive`):
it is priced like any other, but would not exist without caching, so its cost without caching is nothing.
`"response"` (optional) is the response body the provider returned (an Anthropic Message, a Chat Completion,
...); replay ignores it, and `plan --keepalive` re-sends an Anthropic reply's content to keep a session whose
user is away cached for longer (`cache_planner.keepalive.upgrade_body`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefixgate.providers.rules import PROVIDERS

ENDPOINTS = ("generate", "cachedContents.create", "cachedContents.update", "cachedContents.delete")
# `plan` (a planned trace's explanation) is read and ignored, so a planned trace replays as it is.
_KEYS = {"t", "provider", "model", "route", "tenant", "output_tokens", "body", "endpoint", "name", "keepalive", "plan", "response"}


class TraceError(ValueError):
    """A trace line that cannot be replayed; the message starts with FILE:LINE."""


@dataclass(frozen=True)
class TraceRecord:
    line: int
    t: float
    provider: str
    model: str
    body: dict
    route: str = "default"
    tenant: str = "default"
    output_tokens: int = 0
    endpoint: str = "generate"
    name: str | None = None
    keepalive: bool = False
    response: dict | None = None


def read_trace(path: str | Path) -> list[TraceRecord]:
    """Every record of the trace, in time order (ties keep file order)."""
    records = list(iter_trace(path))
    records.sort(key=lambda r: r.t)
    return records


def iter_trace(path: str | Path) -> Iterator[TraceRecord]:
    where = str(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise TraceError(f"{where}: cannot open: {e.strerror}") from None
    with handle:
        # Decoded line by line, so a byte that is not UTF-8 is an error naming its line, not a traceback.
        for number, data in enumerate(handle, start=1):
            try:
                text = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise TraceError(f"{where}:{number}: not UTF-8 text (byte 0x{data[e.start]:02x} at column "
                                 f"{e.start + 1})") from None
            if text.strip():
                yield parse_record(text, number, where)


def parse_record(text: str, line: int = 1, where: str = "trace") -> TraceRecord:
    at = f"{where}:{line}"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{at}: not valid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(raw, dict):
        raise TraceError(f"{at}: expected a JSON object per line")
    unknown = set(raw) - _KEYS
    if unknown:
        raise TraceError(f"{at}: unknown field {sorted(unknown)[0]!r} (known: {', '.join(sorted(_KEYS))})")
    for key in ("t", "provider", "model", "body"):
        if key not in raw:
            raise TraceError(f"{at}: missing field {key!r}")
    t = raw["t"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise TraceError(f"{at}: 't' must be a number of seconds, got {t!r}")
    if raw["provider"] not in PROVIDERS:
        raise TraceError(f"{at}: 'provider' must be one of {', '.join(PROVIDERS)}, got {raw['provider']!r}")
    for key in ("model", "route", "tenant"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise TraceError(f"{at}: {key!r} must be a non-empty string, got {raw[key]!r}")
    output = raw.get("output_tokens", 0)
    if isinstance(output, bool) or not isinstance(output, int) or output < 0:
        raise TraceError(f"{at}: 'output_tokens' must be an integer >= 0, got {output!r}")
    if not isinstance(raw["body"], dict):
        raise TraceError(f"{at}: 'body' must be the native request body (a JSON object)")
    endpoint = raw.get("endpoint", "generate")
    if endpoint not in ENDPOINTS:
        raise TraceError(f"{at}: 'endpoint' must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
    if endpoint != "generate" and raw["provider"] != "gemini":
        raise TraceError(f"{at}: endpoint {endpoint!r} exists only for provider 'gemini'")
    name = raw.get("name")
    if endpoint in ("cachedContents.update", "cachedContents.delete") and not isinstance(name, str):
        raise TraceError(f"{at}: endpoint {endpoint!r} needs 'name' (cachedContents/{{id}})")
    keepalive = raw.get("keepalive", False)
    if not isinstance(keepalive, bool):
        raise TraceError(f"{at}: 'keepalive' must be true or false, got {keepalive!r}")
    response = raw.get("response")
    if response is not None and not isinstance(response, dict):
        raise TraceError(f"{at}: 'response' must be the provider's response body (a JSON object)")
    return TraceRecord(
        line=line, t=float(t), provider=raw["provider"], model=raw["model"], body=raw["body"],
        route=raw.get("route", "default"), tenant=raw.get("tenant", "default"), output_tokens=output,
        endpoint=endpoint, name=name, keepalive=keepalive, response=response,
    )


def record_json(record: TraceRecord) -> dict[str, Any]:
    """A record as a trace line (what the gateway's ledger export writes)."""
    out: dict[str, Any] = {"t": record.t, "provider": record.provider, "model": record.model,
                           "route": record.route, "tenant": record.tenant,
                           "output_tokens": record.output_tokens, "body": record.body}
    if record.endpoint != "generate":
        out["endpoint"] = record.endpoint
    if record.name is not None:
        out["name"] = record.name
    if record.keepalive:
        out["keepalive"] = True
    if record.response is not None:
        out["response"] = record.response
    return out

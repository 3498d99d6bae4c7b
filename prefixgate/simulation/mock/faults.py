"""Fault injection for the mock providers: latency, error statuses with retry-after, dropped streams.

A fault is written `key=value` pairs joined by `;` (or `,`), e.g. `latency=0.5`, `status=429;retry_after=2`,
`status=529` (a 429 is its provider's own, naming `limit=requests` or `limit=tokens`: rate_limits.py),
`drop_stream_after=3`, `stream_error=529` (a stream begun with a 200 that reports that status's
error after `stream_error_after` events, 2 unless told: stream_errors.py), `event_delay=0.05` (a slow stream: seconds between events),
`served_tier=default` (no capacity at the service tier asked for: the answer says the one that served it),
`answer_words=3000` (a long-winded model: Chat Completions and Messages answers run that many words, unless the
request's output limit cuts them first, as a real answer without one may run to the model's own limit),
`google=location` (one of Google's errors with its own status or details, worded as the Gemini API or Vertex AI
words it; on Vertex paths `location` and `free_tier`, the Gemini API's alone, are refused: google_faults.py),
`cut_answer=1` (a cachedContents create is made, its answer's head sent and its body cut off: `cut_off`).
A request asks for one with the `x-mock-fault` header; a faults file (YAML or TOML) adds standing rules:

    faults:
      - fault: "status=429;retry_after=1"
        provider: anthropic        # optional: anthropic | openai | gemini | bedrock | vertex
        path: /v1/messages         # optional: path prefix
        model: claude-sonnet-5-5   # optional: exact model name as sent
        every: 3                   # optional: every 3rd matching request (default: every one)
        times: 2                   # optional: at most this many times
"""

from __future__ import annotations

import json
import math
import threading
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from starlette.responses import StreamingResponse

from prefixgate.errors import RequestError
from prefixgate.providers.rules import PROVIDERS
from prefixgate.simulation.mock.google_faults import GEMINI_API_ONLY, REASONS, google_fault
from prefixgate.simulation.mock.rate_limits import LIMITS, rate_limited
from prefixgate.yaml_file import YamlFileError, read_mapping

HEADER = "x-mock-fault"
# Whose requests a fault rule may name: the providers, and Vertex AI (both its publishers).
FAULT_PROVIDERS = (*PROVIDERS, "vertex")
_STATUS_KINDS = {
    400: "invalid_request", 401: "authentication", 403: "permission", 404: "not_found", 413: "too_large",
    429: "rate_limit", 500: "server", 502: "server", 503: "overloaded", 504: "timeout", 529: "overloaded",
}


class FaultError(ValueError):
    """A fault spec or faults file that cannot be used."""


@dataclass(frozen=True)
class Fault:
    latency_s: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    drop_stream_after: int | None = None
    event_delay_s: float = 0.0
    served_tier: str | None = None
    google: str | None = None
    answer_words: int | None = None
    stream_error: int | None = None
    stream_error_after: int = 2
    cut_answer: bool = False
    limit: str = "requests"     # which of the account's limits a 429 ran into (rate_limits.LIMITS)

    # The model the request it falls on asked for (Google's quota error names it): not part of what the fault is.
    model: str | None = field(default=None, compare=False)

    def error(self, provider: str | None = None, path: str = "", now: float = 0.0) -> RequestError | None:
        """The error `provider` (a FAULT_PROVIDERS name) answers this fault with at `path` at `now` (epoch seconds),
        if it is an error fault."""
        project = (path.partition("/projects/")[2].partition("/")[0] or "-") if provider == "vertex" else None
        if self.google is not None:
            if project is None:
                return google_fault(self.google, self.retry_after, self.model)
            _vertex_only(self.google)
            return google_fault(self.google, self.retry_after, self.model, vertex_project=project)
        if self.status is None:
            return None
        if self.status == 429 and provider is not None:
            return rate_limited(provider, self.limit, self.retry_after, self.model, now, vertex_project=project)
        return _injected(self.status, self.retry_after)

    def stream_failure(self) -> RequestError | None:
        """The error a stream this fault falls on reports mid-way, if it is a `stream_error` fault."""
        return None if self.stream_error is None else _injected(self.stream_error, None)


def _injected(status: int, retry_after: float | None) -> RequestError:
    kind = _STATUS_KINDS.get(status, "server" if status >= 500 else "invalid_request")
    # Anthropic's own words for its 529 (its docs' example error event)
    message = "Overloaded" if status == 529 else f"mock-providers: injected fault, status {status}"
    return RequestError(message, status=status, kind=kind, retry_after=retry_after)


def _vertex_only(reason: str) -> None:
    if reason in GEMINI_API_ONLY:
        raise FaultError(f"{HEADER}: google={reason} is {GEMINI_API_ONLY[reason]}; Vertex AI has no such answer "
                         "(google_faults.py)")


def parse_fault(spec: str) -> Fault:
    values: dict[str, Any] = {}
    for item in spec.replace(",", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep:
            raise FaultError(f"{HEADER}: expected key=value, got {item!r}")
        if key == "latency":
            values["latency_s"] = _number(raw, key)
        elif key in ("status", "stream_error"):
            status = int(_number(raw, key))
            if not 400 <= status <= 599:
                raise FaultError(f"{HEADER}: {key} must be an HTTP error status 400-599, got {raw}")
            values[key] = status
        elif key == "stream_error_after":
            values[key] = int(_number(raw, key))
        elif key in ("retry_after", "retry-after"):
            values["retry_after"] = _number(raw, key)
        elif key == "drop_stream_after":
            values["drop_stream_after"] = int(_number(raw, key))
        elif key == "event_delay":
            values["event_delay_s"] = _number(raw, key)
        elif key == "answer_words":
            values["answer_words"] = int(_number(raw, key))
        elif key == "cut_answer":
            values["cut_answer"] = bool(_number(raw, key))
        elif key == "served_tier":
            values["served_tier"] = raw
        elif key == "limit":
            if raw not in LIMITS:
                raise FaultError(f"{HEADER}: limit must be one of {', '.join(LIMITS)}, got {raw!r}")
            values["limit"] = raw
        elif key == "google":
            if raw not in REASONS:
                raise FaultError(f"{HEADER}: google must be one of {', '.join(REASONS)}, got {raw!r}")
            values["google"] = raw
        else:
            raise FaultError(f"{HEADER}: unknown key {key!r} "
                             "(latency, status, retry_after, drop_stream_after, stream_error, stream_error_after, event_delay, "
                             "served_tier, google, answer_words, cut_answer, limit)")
    if not values:
        raise FaultError(f"{HEADER}: empty fault spec")
    return Fault(**values)


def _number(raw: str, key: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise FaultError(f"{HEADER}: {key} must be a number, got {raw!r}") from None
    if value < 0 or not math.isfinite(value):
        raise FaultError(f"{HEADER}: {key} must be >= 0, got {raw!r}")
    return value


@dataclass
class FaultRule:
    fault: Fault
    provider: str | None = None
    path: str | None = None
    model: str | None = None
    every: int = 1
    times: int | None = None
    _seen: int = field(default=0, repr=False)
    _fired: int = field(default=0, repr=False)

    def matches(self, provider: str, path: str, model: str | None) -> bool:
        return ((self.provider is None or self.provider == provider)
                and (self.path is None or path.startswith(self.path))
                and (self.model is None or self.model == model))

    def fire(self) -> bool:
        self._seen += 1
        if self.times is not None and self._fired >= self.times:
            return False
        if self._seen % self.every:
            return False
        self._fired += 1
        return True


class FaultPlan:
    """Which fault (if any) a request gets: its header's, else the first standing rule that fires."""

    def __init__(self, rules: list[FaultRule] | None = None) -> None:
        self.rules = rules or []
        self._lock = threading.Lock()

    def for_request(self, provider: str, path: str, model: str | None, header: str | None) -> Fault | None:
        fault = parse_fault(header) if header else self._standing(provider, path, model)
        return None if fault is None else replace(fault, model=model)

    def _standing(self, provider: str, path: str, model: str | None) -> Fault | None:
        with self._lock:
            for rule in self.rules:
                if rule.matches(provider, path, model) and rule.fire():
                    return rule.fault
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> FaultPlan:
        path = Path(path)
        if path.suffix in (".yaml", ".yml"):
            try:    # one line naming the line and column, as the gateway's own files get (not PyYAML's several)
                return cls.from_config(read_mapping(path, "faults file"), str(path))
            except YamlFileError as e:
                raise FaultError(str(e)) from None
        try:
            data = tomllib.loads(path.read_text())
        except OSError as e:
            raise FaultError(f"cannot read faults file {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise FaultError(f"faults file {path} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                             f"{e.start})") from None
        except tomllib.TOMLDecodeError as e:
            raise FaultError(f"faults file {path} does not parse: {e}") from None
        return cls.from_config(data, str(path))

    @classmethod
    def from_config(cls, data: Any, where: str = "faults") -> FaultPlan:
        if not isinstance(data, dict) or not isinstance(data.get("faults", []), list):
            raise FaultError(f"{where}: expected a mapping with a 'faults' list")
        rules = []
        allowed = {"fault", "provider", "path", "model", "every", "times"}
        for i, raw in enumerate(data.get("faults", [])):
            at = f"{where}: faults[{i}]"
            if not isinstance(raw, dict) or "fault" not in raw:
                raise FaultError(f"{at}: expected a mapping with a 'fault' spec")
            unknown = set(raw) - allowed
            if unknown:
                raise FaultError(f"{at}: unknown key {sorted(unknown)[0]!r}")
            if raw.get("provider") not in (None, *FAULT_PROVIDERS):
                raise FaultError(f"{at}.provider: expected one of {', '.join(FAULT_PROVIDERS)}")
            for key in ("every", "times"):
                if key in raw and (not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < 1):
                    raise FaultError(f"{at}.{key}: expected an integer >= 1")
            try:
                fault = parse_fault(str(raw["fault"]))
                if raw.get("provider") == "vertex" and fault.google:
                    _vertex_only(fault.google)
            except FaultError as e:
                raise FaultError(f"{at}.fault: {e}") from None
            rules.append(FaultRule(fault, raw.get("provider"), raw.get("path"), raw.get("model"),
                                   raw.get("every", 1), raw.get("times")))
        return cls(rules)


def cut_off(answer: dict) -> StreamingResponse:
    """`answer` begun with a 200 and its length, then the connection closed halfway: what was asked was done, and
    the client cannot read what it was."""
    raw = json.dumps(answer).encode()

    async def half() -> AsyncIterator[bytes]:
        yield raw[: len(raw) // 2]
        raise ConnectionResetError("mock-providers: cut_answer")

    return StreamingResponse(half(), media_type="application/json", headers={"content-length": str(len(raw))})

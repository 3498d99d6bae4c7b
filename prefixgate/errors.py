"""One typed error for bad requests, rendered in each dialect's own error shape."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class RateLimited:
    """The gateway's own limit a 429 ran into: what it counts (`requests` or `tokens`, OpenAI's error type for it),
    its size, the seconds until its window resets and when that is (epoch seconds). A limit with no size a caller
    could track (a budget held by running requests, the local engine's waiting queue) names its unit alone: no
    rate-limit headers are written for it."""

    unit: str
    limit: int | None = None
    reset_s: float = 0.0
    resets_at: float | None = None


@dataclass(frozen=True)
class Refused:
    """An upstream's own refusal, as its provider sent it: written back only to a caller of that provider's format
    (its SDK reads the error's `type` and the rate-limit headers by the provider's names)."""

    provider: str                   # whose format (the upstream format's `planner_provider`)
    type: str | None                # its error's `type` (OpenAI's `requests` or `tokens` on a 429)
    headers: dict[str, str]         # its headers worth passing on (retry-after-ms, x-ratelimit-*, ...)
    unit: str | None = None         # the limit a 429 says it reached, in OpenAI's terms (limit_reached)


class RequestError(Exception):
    """A request the caller must fix (or an upstream failure to report), with the field at fault.

    `kind` is a dialect-neutral category; `status` the HTTP status to answer with.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        status: int = 400,
        kind: str = "invalid_request",
        retry_after: float | None = None,
        code: str | None = None,
        details: dict[str, Any] | list[Any] | None = None,
        rpc_status: str | None = None,
        limited: RateLimited | None = None,
        refused: Refused | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status
        self.kind = kind
        self.retry_after = retry_after
        self.code = code    # an upstream's own error code (OpenAI's `context_length_exceeded`), passed on as sent
        # An upstream's `error.details`, as sent: Anthropic's object (`{"error_code": "file_not_downloadable"}`) or
        # Google's list of google.rpc messages (RetryInfo, ErrorInfo, BadRequest...), each written back only to a
        # caller of the format it came in.
        self.details = details
        self.rpc_status = rpc_status    # Google's status name (FAILED_PRECONDITION), for a Gemini caller
        self.limited = limited          # the gateway's own rate limit this refusal ran into
        self.refused = refused          # the upstream's refusal this passes on

    def __repr__(self) -> str:
        return f"RequestError({self.message!r}, field={self.field!r}, status={self.status})"


def retry_after_header(seconds: float) -> str:
    """A Retry-After value: whole seconds, at least 1 (a client reading 0 would retry at once)."""
    return str(max(1, round(seconds)))


# kind -> (OpenAI type, Anthropic type, Gemini status)
_KINDS: dict[str, tuple[str, str, str]] = {
    "invalid_request": ("invalid_request_error", "invalid_request_error", "INVALID_ARGUMENT"),
    "authentication": ("authentication_error", "authentication_error", "UNAUTHENTICATED"),
    "permission": ("permission_error", "permission_error", "PERMISSION_DENIED"),
    # OpenAI has no not-found type: its 404s ("No such File object", an unknown model) are invalid_request_error.
    "not_found": ("invalid_request_error", "not_found_error", "NOT_FOUND"),
    "too_large": ("invalid_request_error", "request_too_large", "INVALID_ARGUMENT"),
    "rate_limit": ("rate_limit_error", "rate_limit_error", "RESOURCE_EXHAUSTED"),
    # A caller's spend allowance used up until its window resets: OpenAI's own out-of-quota 429 type.
    "quota": ("insufficient_quota", "rate_limit_error", "RESOURCE_EXHAUSTED"),
    "overloaded": ("server_error", "overloaded_error", "UNAVAILABLE"),
    "timeout": ("timeout_error", "timeout_error", "DEADLINE_EXCEEDED"),
    "server": ("server_error", "api_error", "INTERNAL"),
    # The gateway is not set up to serve this (no Google Cloud project for Vertex): a 501, not to be retried.
    "not_configured": ("server_error", "api_error", "UNIMPLEMENTED"),
}
# An HTTP status -> kind: what an upstream's refusal with it is (gateway/upstream.py).
KIND_BY_STATUS = {400: "invalid_request", 401: "authentication", 403: "permission", 404: "not_found",
                  413: "too_large", 429: "rate_limit", 503: "overloaded", 529: "overloaded", 504: "timeout"}
# A provider's error type, code or Google status -> kind: every name above, one that several kinds share (OpenAI's
# `server_error`, Anthropic's `api_error`) standing for the most general of them; and OpenAI's code for a rate limit
# (its Responses `error.code`).
_KIND_OF_NAME = {name: kind for kind in (*reversed(_KINDS), "rate_limit", "invalid_request", "server")
                 for name in _KINDS[kind]} | {"rate_limit_exceeded": "rate_limit"}
# The status each kind is answered with: the first listed (overloaded: HTTP's 503, Google's UNAVAILABLE), but
# Anthropic answers its overloaded_error with a 529 of its own.
_STATUS_OF_KIND = {"server": 500, "quota": 429, "not_configured": 501} | {k: s for s, k in reversed(KIND_BY_STATUS.items())}
_OWN_STATUS = {"overloaded_error": 529}


def status_named(name: object) -> int | None:
    """The HTTP status a provider's error named `name` stands for (a type: Anthropic's `overloaded_error` is its 529;
    a code: `rate_limit_exceeded`; a Google status: `UNAVAILABLE`), None for a name none of them documents. An
    error reported mid-stream has no status of its own: this is the one its refusal would have had."""
    kind = _KIND_OF_NAME.get(name) if isinstance(name, str) else None
    return None if kind is None else _OWN_STATUS.get(name) or _STATUS_OF_KIND[kind]


def error_body(err: RequestError, dialect: str) -> dict[str, Any]:
    """The error JSON a client of `dialect` expects (its SDK parses this shape into its own exception)."""
    oa_type, an_type, g_status = _KINDS.get(err.kind, _KINDS["server"])
    if dialect == "anthropic":
        found = {"type": an_type, "message": err.message}
        return {"type": "error", "error": {**found, "details": err.details} if isinstance(err.details, dict) else found}
    if dialect == "gemini":
        # 529 is Anthropic's overloaded alone: Google answers UNAVAILABLE with a 503, which google-genai retries.
        code = 503 if err.status == 529 else err.status
        shown = {"code": code, "message": err.message, "status": err.rpc_status or g_status}
        return {"error": {**shown, "details": err.details} if isinstance(err.details, list) else shown}
    code = err.code or ("insufficient_quota" if err.kind == "quota" else None)    # OpenAI's code is its type there
    if err.kind == "rate_limit":
        # OpenAI's rate-limit 429: code rate_limit_exceeded, type the unit of the limit reached (requests, tokens)
        oa_type = _limit_type(err)
        own = err.refused is None or err.refused.provider == "openai"
        code = (err.code if own else None) or "rate_limit_exceeded"     # Bedrock's ThrottlingException is no OpenAI code
    return {"error": {"message": err.message, "type": oa_type, "param": err.field, "code": code}}


def _limit_type(err: RequestError) -> str:
    """The OpenAI type of a rate limit's 429: the unit of the gateway's own limit (a budget held by running requests
    and the local engine's full queue too: policies/limits.py and local_backend say why theirs), OpenAI's own
    refusal's type as sent, another's unit as its refusal names it (limit_reached), else `tokens`, as
    rate_limit_error is no OpenAI type. A limit not named is mostly on a request's size (Anthropic's input and output
    tokens a minute, Bedrock's tokens per minute, Vertex's shared capacity), and tokens' advice, wait or ask for
    less, serves a requests limit too, where requests' (only wait) fails a tokens one."""
    refused = err.refused
    if err.limited is not None:
        return err.limited.unit
    if refused is None:
        return "tokens"
    return (refused.type if refused.provider == "openai" else None) or refused.unit or "tokens"


def limit_reached(type_: object, headers: Mapping[str, str], details: object) -> str | None:
    """Which limit an upstream's 429 says it reached, as OpenAI's error type names it (`requests` or `tokens`), or
    None where it says none (Vertex AI's and Bedrock's, Claude's error event mid-stream). It is said by OpenAI's `type`, a
    limit's headers with nothing remaining (Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
    output-tokens}-remaining, OpenAI's x-ratelimit-remaining-{requests,tokens}), or the quota metric of a Google
    QuotaFailure violation in `details` (generate_content_free_tier_requests, ..._input_token_count, and their quota
    ids: GenerateRequestsPerMinutePerProjectPerModel-FreeTier...). A tokens limit wins where both are spent: waiting
    out the requests one alone would not do."""
    if type_ in ("requests", "tokens"):
        return type_
    spent = [m.group(1) or m.group(2) for name, value in headers.items() if value.strip() == "0"
             and (m := _REMAINING.fullmatch(name.lower()))]
    for violation in _violations(details):
        quota = f"{violation.get('quotaMetric', '')} {violation.get('quotaId', '')}".lower()
        spent += ["tokens"] if "token" in quota else ["requests"] if "request" in quota else []
    return "tokens" if any("tokens" in unit for unit in spent) else "requests" if spent else None


_REMAINING = re.compile(r"anthropic-ratelimit-(requests|tokens|input-tokens|output-tokens)-remaining"
                        r"|x-ratelimit-remaining-(requests|tokens)")


def _violations(details: object) -> list[dict]:
    """The violations of the google.rpc.QuotaFailure messages among Google's error `details`."""
    return [v for d in (details if isinstance(details, list) else ()) if isinstance(d, dict)
            and str(d.get("@type", "")).endswith("google.rpc.QuotaFailure")
            for v in (d.get("violations") if isinstance(d.get("violations"), list) else ()) if isinstance(v, dict)]


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's x-ratelimit-reset-* headers write it, Go's `time.Duration` format: `120ms`, `1.5s`,
    `6m0s`, `1h0m0s`."""
    ms = round(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{secs}s"


def rfc3339(epoch_s: float) -> str:
    """A moment as Anthropic's anthropic-ratelimit-*-reset headers write it (RFC 3339, UTC, whole seconds)."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def openai_limit_headers(err: RequestError) -> dict[str, str]:
    """The x-ratelimit-* headers OpenAI sends with a rate-limit 429, for the gateway's own limit `err` ran into:
    the limit, nothing remaining, and the reset as a duration (`1s`, `6m0s`)."""
    if err.limited is None or err.limited.limit is None:
        return {}
    unit = err.limited.unit
    return {f"x-ratelimit-limit-{unit}": str(err.limited.limit), f"x-ratelimit-remaining-{unit}": "0",
            f"x-ratelimit-reset-{unit}": go_duration(math.ceil(err.limited.reset_s))}


def anthropic_limit_headers(err: RequestError) -> dict[str, str]:
    """The anthropic-ratelimit-* headers Anthropic sends with a 429 (docs.claude.com/en/api/rate-limits, "Response
    headers"), for the gateway's own limit `err` ran into: its limit, nothing remaining, and when it is replenished
    (RFC 3339). A key's tokens per minute counts input and output together: Anthropic's `tokens` family (the most
    restrictive limit in effect), not its input-tokens or output-tokens ones, which would name limits the key has not."""
    limited = err.limited
    if limited is None or limited.limit is None or limited.resets_at is None:
        return {}
    family = f"anthropic-ratelimit-{limited.unit}"
    return {f"{family}-limit": str(limited.limit), f"{family}-remaining": "0",
            f"{family}-reset": rfc3339(math.ceil(limited.resets_at))}

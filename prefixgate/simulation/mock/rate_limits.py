"""Each provider's own 429, as its documentation shows it: what the fault `status=429` answers (`limit=requests`, the
default, or `limit=tokens`: which of the account's limits the request ran into; `retry_after`: the wait, 1 s unless
told). Callers' SDKs and back-off code read these by name, so each follows its provider's pages:

- OpenAI (platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"; /docs/guides/error-codes, 429
  "Rate limit reached for requests"): error `type` the limit reached (`requests` or `tokens`), `code`
  `rate_limit_exceeded`, the message naming the model, limit and wait; every x-ratelimit-limit-*, -remaining-* and
  -reset-* header, the reset a Go duration (`1s`, `6m0s`). A wait the fault names is also sent as `retry-after`
  (seconds) and `retry-after-ms`, which openai-python reads first (_base_client._parse_retry_after_header).
- Anthropic (docs.claude.com/en/api/rate-limits, "Response headers"; /en/api/errors): `rate_limit_error` with
  `retry-after` (whole seconds) and anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}, each reset an RFC 3339 time; `tokens` is the most restrictive of input and output in effect.
- Gemini API: google_faults' `quota` (RESOURCE_EXHAUSTED with QuotaFailure, Help and RetryInfo's retryDelay; the
  violation's quota metric the limit reached, requests or input tokens per minute); Vertex
  AI, either publisher: its own words and no details (google_faults.py cites both).
- Bedrock (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html, Errors): a 429
  ThrottlingException, no Retry-After (botocore backs off by itself), worded as botocore users report it.

The figures are a tier-1 account's (OpenAI: 500 requests and 30,000 tokens a minute; Anthropic: 50 requests, 30,000
input and 8,000 output tokens a minute); the limit not reached is shown full.
"""

from __future__ import annotations

import math

from prefixgate.errors import Refused, RequestError, go_duration, rfc3339
from prefixgate.simulation.mock.google_faults import google_fault

LIMITS = ("requests", "tokens")
DEFAULT_WAIT_S = 1.0
_OPENAI = {"requests": 500, "tokens": 30_000}
_OPENAI_NAMES = {"requests": "requests per min (RPM)", "tokens": "tokens per min (TPM)"}
_ANTHROPIC = {"requests": 50, "input-tokens": 30_000, "output-tokens": 8_000}
_BEDROCK = "Too many requests, please wait before trying again."


def rate_limited(provider: str, limit: str, retry_after: float | None, model: str | None, now: float,
                 vertex_project: str | None = None) -> RequestError:
    """The 429 `provider` (a fault's provider: openai, anthropic, gemini, bedrock, vertex) answers a request for
    `model` at `now` that ran into its `limit` (one of LIMITS)."""
    wait = DEFAULT_WAIT_S if retry_after is None else retry_after
    if provider in ("gemini", "vertex"):
        return google_fault("quota", retry_after, model, vertex_project=vertex_project, limit=limit)
    if provider == "bedrock":
        return RequestError(_BEDROCK, status=429, kind="rate_limit")
    if provider == "anthropic":
        return _anthropic(limit, wait, model, now)
    return _openai(limit, wait, retry_after, model)


def _openai(limit: str, wait: float, asked: float | None, model: str | None) -> RequestError:
    headers = {}
    for unit, size in _OPENAI.items():
        hit = unit == limit
        headers |= {f"x-ratelimit-limit-{unit}": str(size), f"x-ratelimit-remaining-{unit}": "0" if hit else str(size),
                    f"x-ratelimit-reset-{unit}": go_duration(wait if hit else 0)}
    if asked is not None:
        headers |= {"retry-after": str(math.ceil(asked)), "retry-after-ms": str(round(asked * 1000))}
    size = _OPENAI[limit]
    message = (f"Rate limit reached for {model or 'the model'} in organization org-mock on {_OPENAI_NAMES[limit]}: "
               f"Limit {size}, Used {size}, Requested 1. Please try again in {go_duration(wait)}. Visit "
               "https://platform.openai.com/account/rate-limits to learn more.")
    return RequestError(message, status=429, kind="rate_limit", code="rate_limit_exceeded",
                        refused=Refused("openai", limit, headers))


def _anthropic(limit: str, wait: float, model: str | None, now: float) -> RequestError:
    hit = "requests" if limit == "requests" else "input-tokens"
    families = {**_ANTHROPIC, "tokens": _ANTHROPIC["input-tokens"]}     # the most restrictive: input's
    headers = {"retry-after": str(max(1, math.ceil(wait)))}
    for family, size in families.items():
        exhausted = family == hit or (family == "tokens" and hit == "input-tokens")
        headers |= {f"anthropic-ratelimit-{family}-limit": str(size),
                    f"anthropic-ratelimit-{family}-remaining": "0" if exhausted else str(size),
                    f"anthropic-ratelimit-{family}-reset": rfc3339(math.ceil(now + (wait if exhausted else 0)))}
    what = "requests" if limit == "requests" else "input tokens"
    message = (f"This request would exceed your organization's rate limit of {_ANTHROPIC[hit]:,} {what} per minute "
               f"(org: mock, model: {model or '-'}). For details, refer to: https://docs.claude.com/en/api/rate-limits. "
               "You can see the response headers for current usage. Please reduce the prompt length or the maximum "
               "tokens requested, or try again later.")
    return RequestError(message, status=429, kind="rate_limit", refused=Refused("anthropic", None, headers))

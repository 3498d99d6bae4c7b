"""When a failed upstream attempt may be retried, and how long to wait first."""

from __future__ import annotations

import random

from prefixgate.policies.schema import RetryPolicy


def retry_condition(status: int | None, timed_out: bool = False, connect_failed: bool = False) -> str | None:
    """The `retry.on` condition an attempt's outcome falls under, or None for outcomes never retried
    (successes and the caller's own 4xx mistakes, which would fail the same way again)."""
    if connect_failed:
        return "connect"
    if timed_out:
        return "timeout"
    if status == 429:
        return "429"
    if status is not None and (status >= 500 or status == 408):
        return "5xx"
    return None


def backoff_delay(policy: RetryPolicy, attempt: int, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff for retry number `attempt` (1-based); a server's Retry-After wins
    when it asks for longer, capped at max_backoff_s so a caller is never parked for minutes."""
    ceiling = min(policy.max_backoff_s, policy.backoff_s * (2 ** (attempt - 1)))
    delay = (rng or random).uniform(0, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_backoff_s))
    return delay

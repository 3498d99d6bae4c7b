"""One request as the SDK wrapper records it: the gateway ledger's record, field for field, so the
dashboard and the gateway's ledger writer take SDK traffic as they take their own.

The type is repeated here rather than imported because nothing may import the gateway; a test keeps
the two field lists equal. (It belongs in core; see the README.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prefixgate.usage import Usage


@dataclass
class LedgerRecord:
    id: str
    ts: float
    key: str = ""
    tenant: str = ""
    route: str = ""
    target: str = ""            # "sdk:<host>" for SDK traffic
    provider: str = ""
    model: str = ""
    dialect: str = ""
    stream: bool = False
    status: int = 200
    uncached_input: int = 0
    cache_read: int = 0
    cache_writes: dict[str, int] = field(default_factory=dict)
    output: int = 0
    cost_usd: str | None = None           # Decimal as text; None when the model has no known price
    cost_without_cache_usd: str | None = None
    savings_usd: str | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    overhead_ms: float = 0.0
    attempts: int = 1
    prefix_hash: str = ""
    plan_summary: str = ""
    explanation: list[str] = field(default_factory=list)
    miss_reason: str = ""
    error: str = ""

    @property
    def usage(self) -> Usage:
        return Usage(self.uncached_input, self.cache_read, dict(self.cache_writes), self.output)


def failed(status: int) -> bool:
    """An error answer, or none at all (status 0: the request never got one)."""
    return status == 0 or status >= 400


def miss_reason(usage: Usage | None, status: int, explanation: list[str]) -> str:
    """Why no cached tokens were read, in the gateway's words (the dashboard groups by them)."""
    if failed(status) or (usage is not None and usage.cache_read):
        return ""
    if usage is None:
        return "usage not reported by the provider"
    planned = next((line.split(":", 1)[1].strip() for line in explanation if line.startswith("miss:")), None)
    if planned:
        return planned
    if usage.cache_write:
        return "cold: this request wrote the prefix"
    if any(line.startswith("passthrough:") for line in explanation):
        return "planner off and no cached prefix"
    return "no cached prefix reported by the provider"

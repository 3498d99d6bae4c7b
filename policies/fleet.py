"""A fleet whose replicas share a ledger but not counters: said at start. Budgets and rate limits count in Redis
when `redis_url` is set; without it each replica counts alone, so behind a load balancer a key spends its budget
once per replica. A shared PostgreSQL ledger (`ledger_url`) is the sign that there are several replicas."""

from __future__ import annotations

from prefixgate.policies.schema import Policy


def unshared_limits(policy: Policy, shared_ledger: bool, shared_counters: bool) -> list[str]:
    """One line when keys have budgets or rate limits that the replicas of a fleet would each count alone."""
    limited = [k.name for k in policy.keys if k.budget is not None or k.rate_limit is not None]
    if not shared_ledger or shared_counters or not limited:
        return []
    return [f"ledger_url is set (replicas share a ledger) but redis_url is not: each replica counts the budgets and "
            f"rate limits of keys {', '.join(limited[:5])}{', ...' if len(limited) > 5 else ''} alone, so N replicas "
            "let a key spend its budget N times; set redis_url to share the counters"]

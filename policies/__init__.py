"""Policies: routing, fallbacks, prefix affinity, budgets and rate limits, planner permissions."""

from prefixgate.policies.affinity import pick_replica, ranking
from prefixgate.policies.limits import CounterStore, Limits
from prefixgate.policies.load import builtin_upstreams, load_policy
from prefixgate.policies.retry import backoff_delay, retry_condition
from prefixgate.policies.router import Decision, Router
from prefixgate.policies.schema import (
    CallerKey,
    Policy,
    PolicyError,
    RetryPolicy,
    Route,
    TargetRef,
    Upstream,
    hash_key,
)

__all__ = [
    "CallerKey", "CounterStore", "Decision", "Limits", "Policy", "PolicyError", "RetryPolicy", "Route", "Router",
    "TargetRef", "Upstream", "backoff_delay", "builtin_upstreams", "hash_key", "load_policy", "pick_replica",
    "ranking", "retry_condition",
]
